#ifndef KSIM_H
#define KSIM_H
/*
 * ksim's internal API: one store, one request path, one event stream.
 *
 * Everything that changes the cluster goes through ksim_handle(), whether
 * the request came over HTTP (http.c) or from a thread inside ksim (the
 * namespace and garbage collectors in ctl.c, and later the simulated
 * controllers). That way every write gets the same validation, the same
 * resourceVersion bump, the same managedFields and the same watch event.
 *
 * Locking: one global mutex (ksim.lock) guards the store, the type registry
 * and the event history. ksim_handle() and ksim_call() take it themselves:
 * call them WITHOUT holding it. The ksim_store_* and ksim_type_* functions
 * expect the caller to hold it (they are for the request path and for
 * readers that want a consistent view: ksim_lock(); ...; ksim_unlock();).
 *
 * Being told about changes: every committed write appends one event to a
 * ring (size --history), broadcasts ksim.changed and wakes the watch streams
 * of its resource and namespace (watch.c). A reader keeps a cursor
 * (the last resourceVersion it has seen, starting from ksim_current_rv())
 * and calls ksim_next_event() in a loop:
 *
 *	uint64_t cur = ksim_current_rv();
 *	struct ksim_event ev;
 *	for (;;) {
 *		int r = ksim_next_event(&cur, 1000, &ev);
 *		if (r < 0) ... history lost: relist (cur has been reset to now)
 *		if (r == 0) ... timeout or shutdown (check ksim_stopping())
 *		else { ... look at ev.gr, ev.type, ev.obj; ksim_event_release(&ev); }
 *	}
 *
 * jv ownership follows libjq: arguments consumed, results owned by the caller.
 *
 * Threads and jv: libjq's reference counts are not atomic, and the store's
 * objects share their strings, arrays and objects with every jv_copy() of
 * them. So a value taken from the store (ksim_store_get/each/select, an
 * event in the ring) must not be kept, read or freed after ksim_unlock()
 * unless it went through ksim_deep_copy() under the lock first.
 * ksim_next_event() and ksim_call() hand out deep copies already, and
 * ksim_handle() serializes its answer (rs->json) under the lock.
 */
#include <pthread.h>
#include <stdint.h>
#include <jv.h>
#include "kop.h"

/* ---- resource types -------------------------------------------------- */

enum ksim_type_flags {
	KT_NAMESPACED = 1 << 0,
	KT_STATUS = 1 << 1,		/* has a /status subresource (main resource keeps old status) */
	KT_GENERATION = 1 << 2,		/* metadata.generation is kept */
	KT_CUSTOM = 1 << 3,		/* served from a CRD */
	KT_NEEDS_RV = 1 << 4,		/* PUT without resourceVersion is 422 (CRs, Leases) */
	KT_CREATE_ON_UPDATE = 1 << 5,	/* PUT of a missing object creates it (Leases) */
	KT_RETURN_DELETED = 1 << 6,	/* DELETE answers the object, not a Status (pods, serviceaccounts) */
	KT_NO_DELCOL = 1 << 7,		/* no deletecollection verb (namespaces) */
	KT_SCALE = 1 << 8,		/* has a /scale subresource (autoscaling/v1 Scale of spec.replicas) */
	KT_REVIEW = 1 << 9,		/* a review: create only, answered at once, nothing stored (review.c) */
	KT_STATUS_META = 1 << 10	/* a /status write resets the spec only (workloads, Jobs, CronJobs) */
};

/*
 * One served group/version/resource. Types sharing storage (every version
 * of a CRD; events in core and events.k8s.io) share `gr`, the storage key.
 * Built-ins live for the life of the process; custom types are unlinked
 * (served = 0) when their CRD goes and freed at exit.
 */
struct ksim_type {
	struct ksim_type *next;
	char *group;		/* "" for core */
	char *version;
	char *api_version;	/* "v1", "apps/v1" */
	char *resource;		/* plural */
	char *kind, *singular, *list_kind;
	char *gr;		/* storage key: "configmaps", "deployments.apps" */
	jv short_names;		/* array of strings */
	jv categories;		/* array of strings */
	unsigned flags;
	int served;
	char *crd;		/* custom types: the CRD's name */
	jv schema;		/* custom types: openAPIV3Schema, else null */
	jv columns;		/* custom types: additionalPrinterColumns, else null */
	jv selectable;		/* custom types: selectableFields json paths, else null */
	jv listinfo;		/* write.c's cache of the list shapes for managedFields, null until needed */
};

/* Caller holds the lock. NULL when not served. */
struct ksim_type *ksim_type_find(const char *group, const char *version, const char *resource);
/* The first served type with that apiVersion and kind. */
struct ksim_type *ksim_type_by_kind(const char *api_version, const char *kind);
/* The head of the registry list (walk ->next, skip !served). */
struct ksim_type *ksim_types(void);
void ksim_types_init(void);
void ksim_types_free(void);
/* (Re)registers the versions of a CRD object, or unserves them (crd = the CRD object). */
void ksim_types_crd_changed(jv crd, int deleted);

/* ---- store ------------------------------------------------------------ */

enum ksim_event_type { KSIM_ADDED, KSIM_MODIFIED, KSIM_DELETED };
extern const char *const ksim_event_names[];

/*
 * An object's compact JSON as one view of it shows it (`view` says which:
 * read.c's list answers, watch.c's events and initial states), NULL until
 * someone fills it: a stored object's (the store drops it when the object
 * changes or goes), or a ring event's.
 */
struct ksim_json_cache {
	char *json;
	size_t len;
	char *view;
};

struct ksim_event {
	uint64_t rv;		/* the write's resourceVersion */
	enum ksim_event_type type;
	char *gr;		/* storage key of the object's resource */
	jv obj;			/* new state; DELETED: last state carrying the deletion RV */
	jv old;			/* previous state, or null on ADDED */
	/*
	 * Ring entries only (watch.c, lock held): obj as a watch that is not a
	 * Table shows it, made once for every such watch of that view
	 * ("apiVersion kind") once obj is no longer the version stored (until
	 * then the stored object's cache holds it).
	 */
	struct ksim_json_cache text;
};
/* Events whose json is kept: the last KSIM_JSON_WINDOW (store.c drops older ones, watch.c makes no more). */
#define KSIM_JSON_WINDOW 4096
void ksim_event_release(struct ksim_event *ev);

struct ksim_state {
	pthread_mutex_t lock;
	pthread_cond_t changed;
	uint64_t rv;		/* last committed resourceVersion */
	uint64_t compacted;	/* watches and lists at or below this RV are 410 */
	size_t history;		/* ring size (--history) */
	struct ksim_event *ring;
	unsigned cut_epoch;	/* bumped by /ksim/cut-watches */
	unsigned error_epoch;	/* bumped by /ksim/error-watches */
	int stopping;
	int watches;		/* open watch streams (SIGTERM waits for them to end) */
	long bookmark_ms;	/* period of watch bookmarks */
	long event_ttl_ms;	/* --event-ttl: an Event is deleted this long after its last write */
	int watch_list;		/* --watch-list: KSIM_WL_* (watch.c) */
	int sharded_list;	/* --feature-gates ShardedListAndWatch=true (shard.c) */
	const char *token;	/* --token, or NULL for no authentication */
	int verbose;
};
extern struct ksim_state ksim;
enum { KSIM_WL_SERVE, KSIM_WL_REFUSE_STORAGE, KSIM_WL_GATE_OFF, KSIM_WL_OLD, KSIM_WL_IGNORE };

/* shardSelector (shard.c): 0 with *out NULL when absent or the gate is off; -1 with *err a 500. */
struct kop_shard_sel;
struct ksim_request;
int ksim_shard_selector(const struct ksim_request *rq, struct kop_shard_sel **out, jv *err);
void ksim_shard_selector_free(struct kop_shard_sel *sel);

void ksim_lock(void);
void ksim_unlock(void);
uint64_t ksim_current_rv(void);	/* takes the lock */
int ksim_stopping(void);

/* Caller holds the lock. A borrowed object (do not free; jv_copy to keep), or jv_invalid(). */
jv ksim_store_get(const char *gr, const char *ns, const char *name);
/*
 * Calls fn for each object of gr (ns NULL or "" = all namespaces) in key
 * order (namespace, name), starting after `after` ("ns/name", NULL = from
 * the start); fn returns nonzero to stop. obj is borrowed.
 */
void ksim_store_each(const char *gr, const char *ns, const char *after,
		     int (*fn)(jv obj, const char *key, void *data), void *data);
/* ksim_store_each() that also hands fn the object's cache (lock held; valid until the next commit). */
void ksim_store_each_cached(const char *gr, const char *ns, const char *after,
			    int (*fn)(jv obj, const char *key, struct ksim_json_cache *cache, void *data), void *data);
/* The cache of the object stored under obj's name in gr when obj (borrowed) is that
 * object as stored now, not an older version of it; else NULL (lock held). */
struct ksim_json_cache *ksim_store_cache_of(const char *gr, jv obj);
size_t ksim_store_count(const char *gr, const char *ns);
/* 1 when a stored Service has spec.clusterIP ip (an index kept by every commit). */
int ksim_store_service_ip_used(const char *ip);
/*
 * Commits a write, the only way the store changes: old == null creates,
 * obj == null deletes (old is then the stored object), else replaces. Bumps
 * the RV, sets metadata.resourceVersion, appends the event and wakes
 * watchers. Returns the stored object (copy). Caller holds the lock.
 */
jv ksim_store_commit(const char *gr, jv old, jv obj);
/* Every object (all resources) for which fn returns nonzero, as an array of [gr, obj]. */
jv ksim_store_select(int (*fn)(const char *gr, jv obj, void *data), void *data);
void ksim_store_init(size_t history);
void ksim_store_free(void);

/* Waits (lock NOT held) for the event after *cursor: 1 got one, 0 timeout/stop, -1 history lost. */
int ksim_next_event(uint64_t *cursor, long timeout_ms, struct ksim_event *out);

/*
 * What ksim_next_event() tells, without the objects (no deep copies): for
 * the controllers inside ksim that only need to know what changed. Fields
 * absent from the object are "".
 */
struct ksim_change {
	uint64_t rv;
	enum ksim_event_type type;
	char gr[320];		/* storage key (resource.group) */
	char ns[64];		/* metadata.namespace */
	char name[256];		/* metadata.name */
	char uid[64];		/* metadata.uid */
	char owner[64];		/* the uid of its controller (ksim_controller_uid) */
	char old_owner[64];	/* the same of the state before (MODIFIED), else "" */
	int deleting;		/* metadata.deletionTimestamp is set */
};
int ksim_next_change(uint64_t *cursor, long timeout_ms, struct ksim_change *out);

/* ---- requests --------------------------------------------------------- */

struct ksim_watch;

struct ksim_request {
	const char *method;	/* "GET", ... */
	const char *path;	/* without the query */
	jv query;		/* object: name -> string (borrowed) */
	const char *content_type, *accept;
	const char *body;
	size_t body_len;
	const char *user;	/* authenticated user name (the impersonated one, with Impersonate-User) */
	/* an impersonated user's (http.c) groups, system:authenticated added as kube-apiserver adds it,
	 * and Impersonate-Extra-KEY values as KEY, VALUE pairs, each NULL-terminated; NULL when the
	 * request impersonates nobody (the authenticator's groups, no extra) */
	const char *const *groups, *const *extra;
	const char *uid;	/* Impersonate-Uid, or NULL */
	const char *user_agent;
	int want_jv;		/* also answer rs->body (a deep copy), not only rs->json */
	int internal;		/* ksim_call_locked(): no rs->json, rs->body not deep-copied */
	jv body_jv;		/* ksim_call_locked(): the body as a value (valid), instead of body */
};

struct ksim_response {
	int code;
	char *json;		/* the JSON answer, serialized under the lock (NULL: text or watch) */
	size_t json_len;
	int json_verbatim;	/* json is sent as it is (no newline added): WriteRawJSON's /version */
	jv body;		/* with rq->want_jv: the answer as a jv (deep copy), else jv_invalid() */
	char *text;		/* a plain-text or binary answer ("404 page not found") */
	size_t text_len;	/* its length (0: strlen(text)) */
	const char *content_type;	/* NULL = application/json */
	struct ksim_watch *watch;	/* non-NULL: stream this watch (http.c) */
	jv warnings;		/* array of strings for Warning: headers */
	/* the resource routed to, as kubectl names it ("deployments.apps", "pods"; a plural of at most
	 * 63 and a group of at most 253 characters), "" when the request is on none (discovery) */
	char resource[320];
	int discard;		/* internal request without an answer wanted: rs->body is not made */
};

/* The one request path (takes the lock itself). rs must be released. */
void ksim_handle(const struct ksim_request *rq, struct ksim_response *rs);
void ksim_response_release(struct ksim_response *rs);
/*
 * For threads inside ksim: a request as `user` with a JSON body (consumed;
 * jv_null() for none) sent as content_type (NULL = application/json).
 * Returns the HTTP code; *out (if non-NULL) gets the answer.
 */
int ksim_call(const char *user, const char *method, const char *path_and_query, const char *content_type,
	      jv body, jv *out);

/*
 * ksim_call() for a thread that holds the lock already (the simulated
 * controllers, sim.c): the body (consumed) is used as it is, not serialized
 * and parsed again, no JSON answer is written, and *out (if non-NULL) is
 * the answer as a plain copy sharing storage with the store: read it and
 * free it before ksim_unlock(). The body may share storage with the store
 * too: the lock covers it. Content type application/json.
 */
int ksim_call_locked(const char *user, const char *method, const char *path_and_query, jv body, jv *out);

/*
 * Authorization, in one place (rbac.c with --authorization rbac). verb is
 * the Kubernetes verb ("get", "list", "watch", "create", "update", "patch",
 * "delete", "deletecollection", "impersonate"), for a non-resource request
 * (path set) the method in lower case. 0 = allowed; else -1 and *status
 * gets the 403 Status.
 */
struct ksim_attrs {
	const char *user, *verb, *group, *resource, *subresource, *namespace, *name;
	const char *path;	/* non-resource requests (discovery): the path, else NULL */
	const char *const *groups;	/* an impersonated user's (ksim_request), else NULL: the authenticator's */
};
int ksim_authorize(const struct ksim_attrs *a, jv *status);
/*
 * ksim_authorize() that also gives, when it allows by RBAC, the RBAC
 * authorizer's reason in *reason ("RBAC: allowed by ClusterRoleBinding ...",
 * a SelfSubjectAccessReview's status.reason); nothing for system:masters
 * and AlwaysAllow, as their authorizers give none.
 */
int ksim_authorize_why(const struct ksim_attrs *a, jv *status, struct kop_buf *reason);
/* The verb of a non-resource request: its method in lower case, in buf (returned). */
const char *ksim_nonresource_verb(const char *method, char *buf, size_t size);

/* A Status object. details may be jv_null(). */
jv ksim_status(int code, const char *reason, const char *message, jv details);
/*
 * The 504 Timeout Status of a read at resourceVersion n, newer than any
 * (cause ResourceVersionTooLarge, retryAfterSeconds 1; lock held).
 */
jv ksim_too_large_rv(unsigned long long n);

/* ---- watch streams (http.c drives them) ------------------------------- */

/* Produces the next bytes of the stream into buf; 0 = end of stream (zero chunk). Blocks. */
size_t ksim_watch_read(struct ksim_watch *w, char *buf, size_t max);
void ksim_watch_free(struct ksim_watch *w);
/* The client's connection (its socket): a stream ends once the client has closed it. */
void ksim_watch_set_fd(struct ksim_watch *w, int fd);
/* Wakes the watches a write of resource gr in namespace ns (NULL: cluster-scoped) may concern
 * (lock held); ksim_watch_wake_all() every watch, for what concerns them all (cuts, stop). */
void ksim_watch_notify(const char *gr, const char *ns);
void ksim_watch_wake_all(void);

/* ---- reviews (review.c) ------------------------------------------------ */

/*
 * A SelfSubjectReview, SelfSubjectAccessReview or SelfSubjectRulesReview
 * (obj, consumed) of rq's user (its groups, uid and extra when it
 * impersonates), answered (lock held): 201 and *out the review
 * with its status, or the code and *out a Status.
 */
int ksim_review(const struct ksim_type *t, const struct ksim_request *rq, jv obj, jv *out);
/* A protobuf review body as the JSON object of what a review reads; -1 if malformed. */
int ksim_review_protobuf(const struct ksim_type *t, const char *body, size_t len, jv *out);

/*
 * A protobuf body of a built-in kind (proto.c) as the JSON object a JSON
 * body of it is: 1 and *obj; -1 and *err (a 400 Status) when it does not
 * decode; 0 when the request is not one (not protobuf, or a custom resource).
 */
int ksim_proto_body(const struct ksim_request *rq, const struct ksim_type *t, jv *obj, jv *err);
/* The same for an autoscaling/v1 Scale (PUT .../scale); another kind is a 400. */
int ksim_proto_scale(const struct ksim_request *rq, jv *obj, jv *err);
/* The same for a subresource's body of kind `kind` in `av` (a Scale, a TokenRequest). */
int ksim_proto_as(const struct ksim_request *rq, const char *av, const char *kind, jv *obj, jv *err);
/* The DeleteOptions of a protobuf DELETE body as JSON: 1, 0 (not protobuf), -1 (*err). */
int ksim_proto_delete_options(const struct ksim_request *rq, jv *obj, jv *err);

/* ---- tables (table.c), discovery (discovery.c), OpenAPI (openapi.c) ---- */

/*
 * apimachinery's labels.Selector String() of a metav1.LabelSelector (sel,
 * borrowed; LabelSelectorAsSelector): requirements sorted by key, "k=v",
 * "k in (a,b)", "k notin (a,b)", "k", "!k", values of in/notin sorted;
 * null and {} are "". An unknown operator, or in/notin without values, is
 * jv_invalid().
 */
jv ksim_selector_string(jv sel);
/* The Table for a list of objects (array, consumed) of type t. */
jv ksim_table(const struct ksim_type *t, jv items, const char *rv, const char *cont, int include_object);
/* Discovery and OpenAPI documents; NULL-equivalent jv_invalid() when path unknown. */
jv ksim_discovery(const char *path);
jv ksim_openapi(const char *path);
/* The metadata schemas custom kinds' OpenAPI v3 documents refer to (openapi_meta.c), JSON. */
extern const char ksim_openapi_meta_schemas[];

/* ---- pods (pods.c) ---------------------------------------------------- */

/* 1 for the pod subresources pods.c answers (log, exec, attach, portforward). */
int ksim_pod_subresource_name(const char *sub);
/*
 * A pod subresource request (lock held): the code, and *out a Status or
 * jv_null() with *text (heap) the plain-text answer (a 204's is "").
 */
int ksim_pod_subresource(const struct ksim_type *t, const char *ns, const char *name, const char *sub,
			 const char *method, jv *out, char **text);
/* The grace period (seconds) of the deletion of pod (borrowed); grace: DeleteOptions', -1 when not given. */
long ksim_pod_grace(jv pod, long grace);

/* ---- CronJob schedules (cron.c) ---------------------------------------- */

struct ksim_cron {
	uint64_t bits[5];	/* minute, hour, day of month, month, day of week: bit N = value N */
	int star[5];		/* the field was "*" or "?" (robfig's starBit) */
	long every;		/* "@every D": seconds, else 0 */
};
/* 0, or -1 with err the reason (as robfig/cron words it). */
int ksim_cron_parse(const char *spec, struct ksim_cron *c, char *err, size_t errlen);
/* The first time (Unix seconds, UTC) after `after` the schedule runs; -1 never. */
long long ksim_cron_next(const struct ksim_cron *c, long long after);

/* What validation refuses in obj (borrowed) of a built-in kind: the causes (array, maybe empty; validate.c). */
jv ksim_builtin_causes(const struct ksim_type *t, jv obj);
/*
 * The causes (appended to causes, returned) that refuse the name or
 * generateName (prefix) of a t: the n bytes at s, a NUL possible; field
 * names it ("metadata.name"). An over-long name gets the length cause and,
 * when its bytes are wrong too, the character-set one, as kube-apiserver.
 */
jv ksim_name_causes(const struct ksim_type *t, jv causes, const char *s, size_t n, int prefix, const char *field);
/* kube-apiserver's MaxSecretSize: the most bytes of data a Secret or ConfigMap holds. */
#define KSIM_MAX_SECRET_SIZE ((size_t)1024 * 1024)
/* TotalAnnotationSizeLimitB: the most bytes of an object's annotations, keys and values. */
#define KSIM_MAX_ANNOTATIONS_SIZE ((size_t)256 * 1024)
/*
 * The causes (appended to causes, returned) refusing obj (borrowed) for its
 * size: annotations over KSIM_MAX_ANNOTATIONS_SIZE, a Secret's or
 * ConfigMap's data over KSIM_MAX_SECRET_SIZE.
 */
jv ksim_size_causes(const struct ksim_type *t, jv causes, jv obj);

/*
 * The fields of obj (consumed) of a built-in kind ksim does not know
 * (fields.c): returned without them, their dotted paths in *unknown.
 */
jv ksim_builtin_unknown_fields(const struct ksim_type *t, jv obj, jv *unknown);

/* ---- defaults (defaults.c) ---------------------------------------------- */

/* What kube-apiserver's defaulting fills in on create of a built-in object (consumed). */
jv ksim_builtin_defaults(const struct ksim_type *t, jv obj);
/* What admission then adds (consumed), after the creator's managedFields are taken. */
jv ksim_builtin_admission(const struct ksim_type *t, jv obj);

/* An object of a kind stored for several versions as version t shows it (convert.c; consumed). */
jv ksim_convert(const struct ksim_type *t, jv obj);

/* ---- helpers ------------------------------------------------------------ */

void ksim_uuid(char *buf);	/* 37 bytes */
/* A copy of v (consumed) that shares nothing with it: safe to use after ksim_unlock(). */
jv ksim_deep_copy(jv v);
/* Compact JSON of v (consumed) in a heap buffer the caller frees; *len its length. */
char *ksim_dump(jv v, size_t *len);
void ksim_now(char *buf);	/* metav1.Time, 32 bytes */
/* Canonical key order (kind, apiVersion, metadata in Go's field order, rest). */
jv ksim_canonical(jv obj);
/* to (consumed) with the members of from (consumed) it lacks, in from's order. */
jv ksim_add_missing(jv to, jv from);
/* String field at a dotted path of an object, or NULL (borrowed from obj). */
const char *ksim_str(jv obj, const char *path);
/* The same, and its length in *len: a JSON string may hold a NUL byte, where the C string stops. */
const char *ksim_strl(jv obj, const char *path, size_t *len);
/* The uid in obj's controller ownerReference (controller: true): the string obj holds, or null. */
jv ksim_controller_uid(jv obj);
/*
 * A key to look a member up with: on a thread that called ksim_thread_keys()
 * (the simulated controllers' and the collectors', which look the same keys
 * up all the time), one of the thread's shared strings (kop_json_key: hashed
 * once, never allocated again), else jv_string(k). For lookups only, with or
 * without the lock (the string is the calling thread's): never stored in a value.
 */
jv ksim_key(const char *k);
void ksim_thread_keys(void);

/* Selectors (select.c). NULL sel = everything. */
struct ksim_selector;
struct ksim_selector *ksim_selector_parse(const char *s, int field, char *err);
int ksim_selector_match(const struct ksim_selector *s, jv obj, const struct ksim_type *t);
/* The value of metadata.name= in a field selector, or NULL. */
const char *ksim_selector_name(const struct ksim_selector *s);
void ksim_selector_free(struct ksim_selector *s);
/* Field selectors a type supports ("metadata.name" ...); 1 if supported. */
int ksim_field_supported(const struct ksim_type *t, const char *field);

/* HTTP (http.c): starts serving 127.0.0.1:port (0 = any); *bound = the port. TLS when cert_pem. */
struct MHD_Daemon;
struct MHD_Daemon *ksim_http_start(int port, const char *cert_pem, const char *key_pem, int *bound, char *err);

/* Controllers inside ksim (ctl.c): namespace lifecycle and ownerReference GC. */
void ksim_controllers_start(void);
void ksim_controllers_stop(void);

#endif
