#ifndef KOP_SSA_PRIV_H
#define KOP_SSA_PRIV_H
/*
 * What the files of server-side apply (lib/ssa*.c) share and nobody else
 * needs: the walk over an object (struct walk, list types), field sets and
 * managedFields entries. Callers outside use ssa.h. Field sets are FieldsV1 trees where a node is a
 * member of the set when it is a leaf ({}) or has a "." child, and its other
 * children are the members below it (sigs.k8s.io/structured-merge-diff).
 */
#include "ssa.h"
#include "patch.h"

/* Where a walk over an object is, and the listinfo it looks lists up in. */
struct walk {
	jv listinfo;		/* borrowed */
	struct kop_buf pat;	/* pattern of the current path, for listinfo */
};

/* ssa_fs_value's mode: the fields of an applied configuration or of an update. */
enum { FS_APPLY, FS_UPDATE };

/* How a list (or map) at a path is merged and tracked, as listinfo says. */
enum lt { LT_ATOMIC, LT_MAP, LT_SET, LT_GRANULAR };

/* A path element of a field set with what ssa_managed.c's pe_order compares: its rank and,
 * for k: and v:, its value parsed once (invalid when it does not parse). */
struct pe {
	jv name, val, child;
	int rank;
};

/* ssa_path.c */
int ssa_is_unowned_meta(const char *k);
int ssa_skipped_key(struct walk *w, const char *k);
size_t ssa_pat_field(struct walk *w, const char *name);
size_t ssa_pat_elem(struct walk *w);
void ssa_pat_pop(struct walk *w, size_t len);
enum lt ssa_list_type(struct walk *w, jv *entry);
enum lt ssa_array_type(struct walk *w, jv *entry);
jv ssa_list_elem_key(enum lt t, jv entry, jv e);

/* ssa_fieldset.c */
int ssa_node_member(jv n);
jv ssa_node_build(int member, jv children);
jv ssa_set_union(jv a, jv b);
jv ssa_set_diff(jv a, jv b);
int ssa_set_covers(jv a, jv b);
int ssa_set_meets(jv a, jv b);
jv ssa_set_inter(jv a, jv b);
jv ssa_fs_value(struct walk *w, jv v, int mode);
jv ssa_list_index(enum lt t, jv entry, jv list);
void ssa_fs_diff(struct walk *w, jv old, jv new, jv *changed, jv *removed);

/* ssa_shape.c: whether the set of v (borrowed) at w's path is looked up by its shape; the set of
 * v, sorted and interned, as make(w, v, mode) makes it (called for a shape not met yet) */
int ssa_by_shape(const struct walk *w, jv v);
jv ssa_shape_fs_value(struct walk *w, jv v, int mode, jv (*make)(struct walk *, jv, int));

/* ssa_intern.c: the set (consumed) as equal nodes already kept share it (callers serialize) */
jv ssa_set_intern(jv set);
/* whether node (borrowed) is one ssa_set_intern() keeps (and so sorted, at every level) */
int ssa_set_is_interned(jv node);

/* ssa_merge.c */
jv ssa_merge(struct walk *w, jv live, jv applied);

/* ssa_walk.c */
jv ssa_conflict_walk(struct walk *w, jv node, jv live, jv merged, struct kop_buf *field, jv *fields);
jv ssa_remove_walk(struct walk *w, jv v, jv node, jv others);

/* ssa_managed.c */
/* buf, a full array of *room elements of size (small: the caller's stack array), in a heap array twice the room */
void *ssa_grow(void *buf, const void *small, int *room, size_t size);
const char *ssa_str_or(jv o, const char *key, jv *hold);
int ssa_entry_is(jv e, const char *manager, const char *op, const char *api_version, const char *sub);
jv ssa_entries_finish(jv entries);
jv ssa_entry_fields(jv e);
/* set (consumed) in managedFields' order, at every level (what ssa_set_intern() wants) */
jv ssa_set_sorted(jv set);
jv ssa_entry_set_fields(jv e, jv set);
jv ssa_new_entry(const char *manager, const char *op, const char *api_version, const char *now,
		 const char *sub, jv set);
int ssa_valid_managed(jv mf);
jv ssa_entries_stored(jv mf);
jv ssa_get_managed(jv obj);
jv ssa_strip_managed(jv obj);
jv ssa_set_managed(jv obj, jv mf);
const char *ssa_obj_str(jv obj, const char *key, jv *hold);

#endif
