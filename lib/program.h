#ifndef KOP_PROGRAM_H
#define KOP_PROGRAM_H
/*
 * A reconcile program: pipeline/NAME/program.yml (docs/writing-programs.md)
 * loaded, its settings read from the environment, its "{setting}"
 * templates filled in and its jq compiled. Nothing here knows any kind.
 */
#include <jv.h>
#include "kop.h"
#include "jqrun.h"
#include "jsonl.h"

enum kop_role { KOP_ROLE_PRIMARY, KOP_ROLE_CHILD, KOP_ROLE_OBSERVED, KOP_ROLE_RELATED };

/* How an object finds its primary. */
struct kop_mapping {
	int owner_ref;		/* by the controller ownerReference */
	char *label_name;	/* by this label holding the primary's name (NULL: not by labels) */
	char *namespace;	/* the primary's namespace when mapped by labels (NULL: see below) */
	char *namespace_label;	/* ... else this label's value (NULL: the object's own namespace) */
	jv match;		/* object of labels that must all be present with these values */
};

struct kop_kind {
	enum kop_role role;
	char *resource;		/* "deployments.apps", as kubectl names it */
	char *api_version;	/* "apps/v1" */
	char *kind;		/* "Deployment" */
	char *group;		/* "apps", "" for core */
	char *key;		/* "Deployment.apps/v1": how the program sees the kind */
	char *namespace;	/* watch (and accept) only there; NULL = all; "~" = each Namespace child */
	char *name;		/* related: the one object; NULL = any */
	char *label_selector;	/* the watch's selector; NULL = from the mapping's match labels */
	char *project_text;	/* jq applied to each object before it is kept (NULL: none) */
	struct kop_jq *project;	/* compiled (with compile = 1) */
	jv keep;		/* or the fields kept, an array of paths (arrays of keys); jv_null(): none */
	jv ignore;		/* children: the fields others write that the program neither reads nor
				   sets, an array of paths; their change alone is nothing to reconcile
				   (jv_null(): none) */
	const struct kop_mapping *mapping;	/* &own_mapping or the program's */
	struct kop_mapping own_mapping;
	int has_own_mapping;
	int create_only;	/* adopt: false (children): one not yet seen is created, never applied over another's */
	int cluster_scoped;	/* `scope: Cluster`, or one of Kubernetes' own cluster-scoped kinds */
};

/* A piece of primary.shardKey: text (its settings filled in), or the primary's name or namespace. */
struct kop_shard_part {
	enum { KOP_SHARD_PART_TEXT, KOP_SHARD_PART_NAME, KOP_SHARD_PART_NAMESPACE } what;
	char *text;		/* KOP_SHARD_PART_TEXT only */
};

struct kop_aggregate {
	char *name;
	struct kop_jq *jq;
};

struct kop_program {
	char *name;
	char *dir;		/* the program's directory */
	jv settings;		/* object: name -> value */
	struct kop_kind primary;
	char *finalizer;	/* NULL: none */
	struct kop_mapping mapping;
	struct kop_kind *kinds;	/* children, observed, related, in that order */
	size_t nkinds;
	struct kop_aggregate *aggs;
	size_t naggs;
	struct kop_jq *sync;
	struct kop_jq *render;	/* NULL: no render program (docs/writing-programs.md) */
	char *shard_key;	/* primary.shardKey as written (NULL: none) */
	struct kop_shard_part *shard_parts;
	size_t nshard_parts;
};

/*
 * Loads path (a program directory holding program.yml, program.yaml or
 * program.json, or that file itself). Settings come from getenv(). With
 * compile = 0 the jq is not compiled (only the kinds are wanted;
 * ireconcile compiles it even for --print-watches, to refuse a broken program). -1 with err naming
 * the file and the field.
 */
int kop_program_load(struct kop_program *p, const char *path, int compile, char *err);
void kop_program_release(struct kop_program *p);

/* The entry that an object of apiVersion/kind in namespace ns named name
 * belongs to (related entries by namespace and name first, then children,
 * observed), or &p->primary, or NULL when the program does not know it. */
const struct kop_kind *kop_program_find_kind(const struct kop_program *p, const char *api_version,
					     const char *kind, const char *ns, const char *name);

/* The watches the program needs: an array of
 * {"resource","namespace","labelSelector","fieldSelector","role"} (caller owns),
 * with "keep" when kwatch may keep only some fields (kwatch's :k=FIELDS), and
 * "shard": "namespace" when the program has a shard key and the watch's objects
 * live in the namespace it names (namespaced children and observed kinds
 * watched across namespaces or in each, "~"): a shard selector on
 * object.metadata.namespace picks the objects of a shard's primaries. */
jv kop_program_watches(const struct kop_program *p);

/*
 * Whether the objects of kind k live in the namespace the shard key of their
 * primary names (the watches marked "shard": "namespace" above): a shard
 * selector on their namespace picks exactly those of a shard's primaries.
 */
int kop_program_kind_sharded(const struct kop_program *p, const struct kop_kind *k);

/*
 * The shard key of the primary ns/name (ns "" or NULL when cluster-scoped):
 * primary.shardKey filled in, malloc'd; NULL when the program declares none.
 */
char *kop_program_shard_key(const struct kop_program *p, const char *ns, const char *name);

/*
 * The key ("NAMESPACE/NAME", or "NAME" for a cluster-scoped primary) of the
 * primary that obj (borrowed) maps to under mapping m, or NULL when it does
 * not map. *owner_uid (may be NULL) receives the controller reference's uid
 * when mapped by owner reference (caller frees, NULL otherwise).
 */
char *kop_program_map(const struct kop_program *p, const struct kop_mapping *m, jv obj, char **owner_uid);

/*
 * Marks a desired child (consumed, returned) as the primary's under m: the
 * match labels and the name label, and with owner_ref a controller owner
 * reference to the primary (borrowed) when the child is in its namespace.
 */
/*
 * obj (consumed) reduced to the fields of k->keep (a kind whose `project` is
 * a list of fields): each path whose value is there and not null, in the
 * order listed, copied whole. The caller adds the identity (apiVersion,
 * kind, name, namespace).
 */
jv kop_program_keep(const struct kop_kind *k, jv obj);

jv kop_program_stamp(const struct kop_program *p, const struct kop_mapping *m, jv child, jv primary);

/*
 * The annotation on every child ireconcile applies: a digest of what it
 * applied (the object the program asked for, before stamping, and the
 * primary's uid). A live child whose annotation is not the desired object's
 * is applied even when it holds every desired field: then a field the
 * program no longer sets is removed by server-side apply.
 */
#define KOP_APPLIED_ANNOTATION "iot-operator/applied"

/* The digest d behind KOP_APPLIED_ANNOTATION: SHA-256 of objdig (the
 * kop_program_object_digest of the unstamped object) and the SHA-256 of puid. */
void kop_program_applied_digest(const unsigned char objdig[KOP_JSON_DIGEST_LEN], const char *puid,
				unsigned char d[KOP_JSON_DIGEST_LEN]);

/* KOP_APPLIED_ANNOTATION's value for d: 32 hex digits (its first 16 bytes),
 * also the tag of an apply line (the stage protocol). */
#define KOP_APPLIED_HEX_LEN 32
void kop_program_applied_hex(const unsigned char d[KOP_JSON_DIGEST_LEN], char hex[KOP_APPLIED_HEX_LEN + 1]);

/* Sets child's (consumed, returned) KOP_APPLIED_ANNOTATION from d
 * (kop_program_applied_hex). Left as it is unless child has a metadata object. */
jv kop_program_stamp_applied(jv child, const unsigned char d[KOP_JSON_DIGEST_LEN]);

/* The kop_json_digest of child (borrowed) without its KOP_APPLIED_ANNOTATION:
 * a program that copies a live child's annotations into the desired one
 * must not make each stamp change the next. */
void kop_program_object_digest(jv child, unsigned char objdig[KOP_JSON_DIGEST_LEN]);

/*
 * desired ⊆ live: objects key by key (every key of desired present in live
 * with a matching value), arrays element-wise with the same length, scalars
 * equal. A zero value in desired (null, false, 0, "", {}, []) also matches
 * an absent or null one: the API server leaves omitempty fields out of what
 * it stores. Both borrowed.
 */
int kop_json_subset(jv desired, jv live);
/* The same with live fingerprinted (kop_json_fingerprint): its long strings stand for their SHA-256. */
int kop_json_subset_fp(jv desired, jv live);

/* The API group of an apiVersion ("apps/v1" -> "apps", "v1" -> ""), caller frees. */
char *kop_api_group(const char *api_version);

#endif
