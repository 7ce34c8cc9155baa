#ifndef KSIM_API_H
#define KSIM_API_H
/*
 * The request path's private API, shared by api.c, status.c, object.c,
 * route.c, authz.c, write.c, create.c, update.c, body.c, read.c, patch.c,
 * delete.c and scale.c: a routed request, the options
 * of a write, and the helpers more than one of them calls. Not for the
 * simulated controllers (sim.h) nor the rest of ksim (ksim.h).
 */
#include "ksim.h"
#include "sim.h"

struct route {
	struct ksim_type *t;
	char *ns;		/* from the URL, or NULL */
	char *name;		/* NULL for a collection */
	char *sub;		/* "status", "finalize", or NULL */
};

enum validation { VALIDATE_WARN, VALIDATE_STRICT, VALIDATE_IGNORE };

struct wopts {
	int dry_run;
	enum validation validation;	/* fieldValidation */
	jv *warnings;		/* the response's Warning headers */
	const char *manager;
	const char *user;
	const char *const *groups;	/* an impersonated user's, else NULL (ksim_request) */
	int put;		/* an update (PUT): an empty resourceVersion is an unconditional update */
	int force;		/* apply: force conflicts */
};

/* A list in the making (read.c's list_fn(); deletecollection uses it too). */
struct kop_shard_sel;
struct list_ctx {
	const struct ksim_type *t;
	struct ksim_selector *ls, *fs;
	struct kop_shard_sel *shard;	/* shardSelector, or NULL */
	long limit;
	jv items;
	long n;
	char *last_key;
	int more;
	struct ksim_json_cache **caches;	/* list_cached_fn: the items' caches, in order */
	size_t ncaches;
};

/* token.c */
int ksim_token_request(const struct ksim_request *rq, const struct route *r, jv *out);

/* status.c */
char *gr_string(const struct ksim_type *t);
jv details(const struct ksim_type *t, const char *name);
jv err_status(const struct ksim_type *t, const char *name, int code, const char *reason, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
jv not_found(const struct ksim_type *t, const char *name);
int status_code(jv st);
jv bad_request(const char *msg);
jv name_mismatch(const char *s, size_t n, const char *url_name);
/* 1, with *out the 400 of it, when obj (borrowed) names a namespace other than ns (the URL's). */
int ns_mismatch(jv obj, const char *ns, jv *out);
int bytes_differ(const char *s, size_t n, const char *want);
int str_set_and_differs(jv obj, const char *path, const char *want);
jv invalid_jv(const struct ksim_type *t, jv name, jv causes);
jv invalid(const struct ksim_type *t, const char *name, jv causes);
jv cause(const char *reason, const char *message, const char *field);
jv conflict(const struct ksim_type *t, const char *name);

/* object.c */
jv meta(jv obj);
jv set_meta(jv obj, const char *key, jv val);
jv get_meta(jv obj, const char *key);
jv field(jv obj, const char *key);
int has_items(jv v);
const char *query(const struct ksim_request *rq, const char *name);
int query_bool(const struct ksim_request *rq, const char *name);
jv present(const struct ksim_type *t, jv obj);

/* route.c */
void route_release(struct route *r);
int route(const char *path, struct route *r);

/* authz.c */
int resource_path(const char *path);
const char *verb_of(const struct ksim_request *rq, const struct route *r);
void unrouted_attrs(const struct ksim_request *rq, char *path, struct ksim_attrs *a);

/* write.c */
jv listinfo(const struct ksim_type *t);
jv track_update(jv old, jv new, const char *manager, const char *sub, const char *now, jv li);
const char *manager_of(const struct ksim_request *rq, char *buf, size_t len);
int same_object(jv a, jv b);
jv spec_part(const struct ksim_type *t, jv obj);
double generation(jv obj);
int schema_check(const struct ksim_type *t, jv *obj, jv old, const char *name, const struct wopts *o, jv *err_out);
jv crd_status(jv crd, const char *now);
jv event_causes(jv obj);
void next_service_ip(char *ip, size_t len);
jv secret_string_data(const struct ksim_type *t, jv obj);

/* create.c */
int do_create(const struct ksim_type *t, const char *ns, jv obj, const struct wopts *o, int mf_done,
	      jv *out);

/*
 * escalation.c: with --authorization rbac, a Role, ClusterRole or binding
 * written by user (in groups when impersonated, else NULL) with rights it lacks (and no escalate or bind on the
 * role): -1, *code and *status (403, or 404 for a missing role). Else 0.
 */
int ksim_escalation_check(const struct ksim_type *t, const char *user, const char *const *groups, jv obj, int *code,
			  jv *status);

/*
 * admission.c: the ValidatingAdmissionPolicies bound in the store, on a write of op ("CREATE", "UPDATE",
 * "DELETE") to ns/name (sub: the subresource, or NULL) by o->user; object and old are borrowed (null
 * where the operation has none). 0, or the code of a refusal with *status.
 */
int ksim_admit(const struct ksim_type *t, const char *op, const char *ns, const char *name, const char *sub,
	       jv object, jv old, const struct wopts *o, jv *status);
/* A ValidatingAdmissionPolicy or binding that ksim cannot enforce fully: 422 and *status, else 0. */
int ksim_admission_check(const struct ksim_type *t, jv obj, jv *status);

/* update.c */
int finalizers_empty(jv obj);
int graceful(jv obj);
jv remove_now(const struct ksim_type *t, jv stored);
int uid_changed(const struct ksim_type *t, jv old, const char *uid, jv *out);
int do_update(const struct ksim_type *t, jv old, jv obj, const char *sub, const struct wopts *o,
	      int mf_done, jv *out);
int do_put(const struct ksim_request *rq, const struct route *r, const struct wopts *o, jv *out);

/* body.c */
int parse_body(const struct ksim_request *rq, jv *obj, jv *err);
int check_kind(const struct ksim_type *t, jv *obj, jv *err);
int body_object(const struct ksim_request *rq, const struct ksim_type *t, jv *obj, jv *err);
int dry_run(const struct ksim_request *rq, jv *err);

/* read.c */
int list_fn(jv obj, const char *key, void *data);
int selectors(const struct ksim_request *rq, const struct ksim_type *t, struct ksim_selector **ls,
	      struct ksim_selector **fs, jv *err);
int do_list(const struct ksim_request *rq, const struct route *r, jv *out, char **text, size_t *text_len);
int do_get(const struct ksim_request *rq, const struct route *r, jv *out);

/* patch.c */
int do_patch(const struct ksim_request *rq, const struct route *r, const struct wopts *o, jv *out);

/* delete.c */
int do_delete(const struct ksim_request *rq, const struct route *r, int dry, jv *out);
int do_deletecollection(const struct ksim_request *rq, const struct route *r, int dry, jv *out);

/* scale.c */
int do_scale(const struct ksim_request *rq, const struct route *r, const struct wopts *o, jv *out);

#endif
