#ifndef IRECONCILE_H
#define IRECONCILE_H
/*
 * ireconcile's own API, shared by its files: the view (struct obj, struct
 * prim), the in-flight writes (struct flight), the engine's state (E) and
 * what one file offers the others. One thread runs it all, but the watchdog's.
 * Not for other tools: what more than one tool needs lives in lib/.
 */
#include <pthread.h>
#include <stdint.h>
#include <openssl/sha.h>
#include "tool.h"
#include "jsonl.h"
#include "hmap.h"
#include "program.h"
#include "render.h"
#include "shard.h"

#define MAX_LINE (32u << 20)

/* An operation sent and not seen back is forgotten after this long. */
#define FLIGHT_TIMEOUT_MS 60000

/* A created child seen while others of its primary's creates are still on
 * their way reconciles once they are all seen, or this much later (flight.c). */
#define LANDED_WAIT_MS 5000

struct prim;

/* struct prim's ahead: noted to be rendered ahead of the first pass (cache.c), or sent to the render worker for it (worker.c) */
#define AHEAD_NOTED 1
#define AHEAD_SENT 2

#define KDICT_GENS 2	/* a kind's dictionaries: the first, and one made again (store.c) */
/* What struct obj keeps of a SHA-256 (of a text, or KOP_JSON_DIGEST_LEN's
 * digests): its first 16 bytes, which tell one state from another as surely
 * (128 bits; a state made to match another's would need a preimage), for
 * half the memory: a view holds five of them an object, 30,000 objects. */
#define OBJ_DIG 16

/*
 * A live object in the view. It is kept as compact JSON text, parsed only
 * when a reconcile needs it: parsed jv objects take ten times the memory of
 * their text, and a reconcile touches few objects. A view holds tens of
 * thousands of them, so the struct is packed: lengths in 32 bits (a line is
 * at most MAX_LINE), flags in bits, and its identity strings as offsets into
 * the texts that hold them (obj_name() and the others below).
 */
struct obj {
	char *key;			/* "Kind.group|ns/name" (obj_key) */
	const struct kop_kind *kind;
	char *text;			/* the object without managedFields (compressed when zlen) */
	char *vtext;			/* child kinds with a `project`: what the program sees (NULL: text) */
	char *meta;			/* "rv\0ns\0uid\0owner_uid\0", one allocation (set_meta) */
	struct prim *prim;		/* children and observed: their primary */
	struct obj *prev, *next;	/* in prim->children */
	uint32_t len;			/* text: its length as JSON */
	uint32_t zlen;			/* compressed: its length so (0: text is the JSON) */
	uint32_t slen;			/* compressed: the length of what was compressed */
	uint32_t vlen;			/* vtext: its length as JSON */
	uint32_t vzlen;			/* compressed: its length so (0: vtext is the JSON) */
	uint32_t name_at;		/* in key: where its name starts (the key ends with it) */
	uint32_t ns_at, uid_at;		/* in meta */
	uint32_t owner_at;		/* in meta; 0: none */
	unsigned char tgen, vgen;	/* text's, vtext's: the generation of their kind's dictionary */
	unsigned fp : 1;		/* compressed: fingerprinted (kop_json_fingerprint) */
	unsigned deleting : 1;		/* metadata.deletionTimestamp is set */
	/* It held every field of the desired object of digest `match` when its
	 * own digest without status was `match_sdig` (match_ok: known). */
	unsigned match_ok : 1;
	/* The last reconcile desired it without a status, or as it was seen: a
	 * change of its status alone, outside what the program sees of it, is
	 * nothing to reconcile (view.c). */
	unsigned status_free : 1;
	unsigned char tdig[OBJ_DIG];	/* compressed: SHA-256 of the JSON */
	unsigned char vdig[OBJ_DIG];	/* vtext: SHA-256 of its JSON */
	unsigned char sdig[OBJ_DIG];	/* digest without status and resourceVersion */
	unsigned char match[OBJ_DIG], match_sdig[OBJ_DIG];
	/* The resourceVersion (read as a number; 0: not one) of the first
	 * version seen with its sdig as it is: an apply answered with that
	 * version is held by this one, which differs but for its status. */
	uint64_t sdig_rv;
};

/* o's metadata.name, namespace ("" when none), uid ("" when none),
 * resourceVersion ("" when none), and the uid of its controller when mapped
 * by owner reference (NULL when not). */
static inline const char *obj_name(const struct obj *o)
{
	return o->key + o->name_at;
}

static inline const char *obj_ns(const struct obj *o)
{
	return o->meta + o->ns_at;
}

static inline const char *obj_uid(const struct obj *o)
{
	return o->meta + o->uid_at;
}

static inline const char *obj_rv(const struct obj *o)
{
	return o->meta;
}

static inline const char *obj_owner_uid(const struct obj *o)
{
	return o->owner_at ? o->meta + o->owner_at : NULL;
}

/* A primary, known from its object or from children that map to it. */
struct prim {
	char *key;			/* "ns/name" */
	struct obj *obj;		/* NULL when not (or no longer) seen */
	struct obj *children;
	int queued;
	struct prim *qnext;
	int64_t due;			/* timer, monotonic ms; 0 = none */
	int64_t settle_due;		/* --settle: when the burst's reconcile is due (0: none) */
	int64_t settle_from;		/* ... and when that burst began */
	int status_held;		/* its last status derived waits for --status-interval */
	int creating;			/* its flights that are unseen creates (flight.c) */
	int landing;			/* its reconcile waits for them, due then at the latest (flight_landed) */
	struct kop_backoff backoff;
	jv errors;			/* "op|objkey" -> {"op","ref","code","reason","message"[,ERROR_TAG]} */
	unsigned char *agg;		/* one flag per aggregate */
	unsigned char pdig[KOP_JSON_DIGEST_LEN];	/* render_parent(the object)'s key, as it arrived */
	/* What its program saw of it at its last reconcile, when that ran
	 * through (seen_ok): an event of it that leaves this alike reconciles
	 * nothing (seen_alike). */
	int seen_ok;
	unsigned char seen_dig[KOP_JSON_DIGEST_LEN];
	int render_valid;		/* render_key, rview, rdig, rstat (and radig) describe the last answer */
	int ahead;			/* to be rendered ahead of the first pass: AHEAD_NOTED, AHEAD_SENT (0: not) */
	unsigned char render_key[KOP_JSON_DIGEST_LEN];	/* of the render program's last input */
	unsigned char *rendered;	/* its output, directives resolved, then packed (kop_fn_pack: read it
					   through cache.c's kept_answer), compact JSON compressed (NULL: not kept) */
	size_t rendered_zlen, rendered_len;	/* compressed and original sizes */
	char *rview;			/* its answer as sync sees it, when projected (NULL: as it is),
					   compact JSON compressed (E.rview_dict) */
	size_t rview_zlen, rview_len;	/* compressed and original sizes */
	char *status_sent;		/* the last status written, compact JSON (NULL: none) */
	int64_t status_at;		/* when a status was last written, monotonic ms; 0 = never */
	/* While it is on its way (status_flight), the statuses the stored one may
	 * still be, oldest first: the one stored when the flight began, then ours
	 * sent before status_sent (parent_seen). */
	char *status_prev[8];
	int nprev;
	unsigned char (*rdig)[KOP_JSON_DIGEST_LEN];	/* of each object of its .desired */
	unsigned char *rstat;		/* which of them have a status */
	int nrdig;
	/* the applied annotation of each (kop_program_applied_digest): the
	 * primary's uid is part of the render key, so it holds while rdig does */
	unsigned char (*radig)[KOP_JSON_DIGEST_LEN];
};

/* An operation sent and not yet seen back (README: not repeated while in flight). */
struct flight {
	unsigned char sent[SHA256_DIGEST_LENGTH];	/* of the compact JSON sent: not the object itself */
	char *pkey;			/* the primary it was written for */
	char *live_rv;			/* the live object's resourceVersion when sent ("" = missing) */
	int64_t at;
	int failed;
	int acked;			/* kapply or kstatus said it was written (--feedback): the watch will show
					   it, however long the pipeline lags; never sent again on a timeout */
	char *answer_rv;		/* the resourceVersion of the object the server answered an apply of
					   this object with (its result tagged with memo): what it made (NULL: unknown) */
	int unseen;			/* a create (an apply or create of an object not in the view), not seen
					   since and not failed: counted in its primary's `creating` */
	int64_t retry_at;
	/* Applies: the object sent, to tell when the live one holds it
	 * (apply_pending): the rendered object of index rindex under the
	 * render key rkey, stamped, or else the JSON text compressed. */
	int has_obj;
	int has_status;			/* the object sent has a status: a change of the live one's matters */
	unsigned char memo[KOP_JSON_DIGEST_LEN];	/* the comparison memo key (struct obj's match) */
	int rindex;
	unsigned char rkey[KOP_JSON_DIGEST_LEN];
	unsigned char *ztext;
	size_t zlen, len;
};

/* Splits a byte stream into JSON values: one per line, or a pretty-printed
 * value from a line "{" to a line "}" (kubectl -o json). */
struct reader {
	const char *name;
	int fd;
	struct kop_buf buf;
	size_t start;
	size_t lineno;
	int eof;
	int skipping;			/* inside an over-long line */
	struct kop_buf acc;		/* a multi-line value being collected */
	size_t acc_line;
	int in_multi;
	/* tried first on each compact line, before the whole is read: 0 and *v, or -1 (NULL: none) */
	int (*read)(const char *text, size_t len, jv *v);
};

struct engine {
	struct kop_program prog;
	struct kop_hmap objs;		/* objkey -> struct obj */
	struct kop_hmap prims;		/* pkey -> struct prim */
	struct kop_hmap related;	/* objkey -> struct obj (also in objs) */
	struct kop_hmap flights;	/* "op|objkey" -> struct flight */
	struct prim *qhead, *qtail;
	size_t qlen;			/* the prims from qhead to qtail */
	int64_t next_due;		/* no prim's due is before this (0: none is set):
					   the timers are not scanned before it */
	int64_t timers_at;		/* when they were last scanned (fire_timers) */
	int synced;
	/* The primaries seen before the first pass, by key, whose render
	 * answers are made ahead of it: by the render worker (worker.c), for as
	 * long as it lives, and by prerender while nothing else is to be done
	 * (cache.c). Taken the latest first. */
	char **ahead;
	size_t nahead, ahead_cap;
	int input_ended;		/* stdin is over: what is queued last, nothing waits (input_end) */
	jv related_cache;		/* the program's .related, jv_invalid() when stale */
	jv children_empty;		/* {"Kind.v": {}} for every child and observed kind */
	jv aggs_cache;			/* .aggregates, jv_invalid() when stale */
	struct zdict {			/* a dictionary compressed texts use */
		unsigned char *buf;
		size_t len;
	} render_dict;			/* the render answers': the first one's last 32 KB */
	struct kdict {			/* per kind: its texts' dictionaries (store.c, kind_dict) */
		struct zdict gen[KDICT_GENS];
		int n;			/* how many were made */
		size_t from;		/* the length of the text the last was made from */
	} *dicts;			/* [0]: the primary's, [1 + i]: E.prog.kinds[i]'s */
	struct kdict *vdicts;		/* the same for what the program sees of them (vtext) */
	struct zdict rview_dict;	/* what sync sees of them (struct prim's rview): as render_dict */
	const char *now;
	const char *event_text;		/* the text of the value handle_event is given when it is one
					   compact line (reader.c), event_len bytes; else NULL */
	size_t event_len;
	struct kop_json_event event_scan;	/* the last line's scan (event_read) */
	int event_scanned;		/* event_scan is of the line read last, event_text when that is
					   set (its meta freed) */
	int event_picked;		/* the object was read in part (event_read) */
	unsigned backoff_base, backoff_cap;
	long settle_ms;		/* --settle: an observed object's change reconciles this much later */
	long status_interval_ms;	/* --status-interval: a status saying nothing new waits this long */
	unsigned long reconciles, errors;
	int read_failed;		/* stdin could not be read: exit 111, not 0 */
	long stats_ms;			/* --stats-interval, 0 = off */
	int64_t stats_at;
	struct kop_shard_sel *shard;	/* --shard: the primaries kept by their shard key (NULL: all) */
	struct kop_shard_sel *shard_wait;	/* ranges added (SHARDS), their lists not in yet (NULL: none) */
	unsigned long shard_dropped;	/* events of another shard's objects, dropped where they enter */
	size_t nseen;			/* primaries whose object is in the view */
	int feedback;			/* --feedback: every write's result comes back */
};

/* While more than this waits for stdout, no more is reconciled (output.c). */
#define OUT_HIGH (1u << 20)

#define project(obj, lineno) project_kind(obj, lineno, 1, NULL)

/* What one reconcile parsed: the primary and the live objects it looked at. */
struct rctx {
	jv parent;
	struct kop_hmap live;		/* objkey -> jv* (parsed, owned here) */
	struct kop_hmap view;		/* the same, projected for the program (vtext) */
	jv rfull;			/* rendered_full(), jv_invalid() until read */
	/* rendered_object(): the kept answer's text, expanded once, and the
	 * texts of its .desired (nrel of them; -1 until read, or unreadable) */
	char *rtext;
	struct kop_json_span *rel;
	int nrel;
	int64_t rerender_jq, rerender_fn;	/* time rendered_full() spent computing it again (us) */
	int rfail;			/* rendered_full() could not compute it again: what it says */
	char rfail_msg[KOP_ERRLEN + 64];	/* (room for err and what it is about) */
	int unmapped;			/* a desired child would not map back: nothing pruned */
	char unmapped_msg[KOP_ERRLEN];
};

struct counts {
	unsigned applies, deletes, patches, statuses, events;
};

/* Which status the program saw (parent_seen). */
enum seen {
	SEEN_STORED,		/* the stored one, nothing of ours on its way */
	SEEN_CARRIED,		/* ours on its way */
	SEEN_FOREIGN		/* the stored one, someone else's, stored while ours was on its way */
};

/* What the watchdog (watchdog.c) watches, under its mutex. */
struct watchdog_state {
	pthread_mutex_t mu;
	char key[512];		/* the primary being reconciled */
	int64_t since;		/* monotonic ms; 0 = none */
	long first_ms;		/* --watchdog */
};

/* main.c */
extern struct engine E;

/* keys.c */
jv path2(const char *a, const char *b);
const char *meta(jv obj, const char *field);
int has_meta(jv obj, const char *field);
const char *nul_field(jv obj);
char *obj_key(const char *api_version, const char *kind, const char *ns, const char *name);
char *join2(const char *a, const char *b);

/* output.c */
extern struct kop_buf outq;
extern size_t out_chunk;
size_t out_pending(void);
void flush_out(int block);
#define OUT_KEEP (64u << 10)	/* the output buffer kept while idle (out_idle) */
int64_t out_idle(int64_t now, int64_t timeout);
void emit_op_text(const char *op, const char *pkey, const char *tag, const char *text, size_t len);
void emit(jv line);

/* queue.c */
struct prim *prim_get(const char *key, int create);
void status_prev_drop(struct prim *p, int n);
void status_prev_push(struct prim *p, char *text);
void prim_free(void *v);
void enqueue(struct prim *p);
void enqueue_all(void);
/* Sets a prim's timer *t (its due or settle_due) to AT, E.next_due brought forward to it. */
void timer_set(int64_t *t, int64_t at);
void schedule(struct prim *p, int64_t at);
void input_end(void);
void fire_timers(int64_t now);
int next_timeout(int64_t now);
void drain_queue(void);

/* view.c */
void obj_free(void *v);
void update_aggs(struct prim *p, jv obj);
jv project_kind(jv obj, size_t lineno, int whole, int *projected);
int event_read(const char *line, size_t len, jv *ev);
void handle_event(jv ev, size_t lineno);
/* line: the watch event's text obj was read from, unprojected (line_len bytes), or NULL */
void handle_object(const char *type, jv obj, const char *line, size_t line_len, size_t lineno);
void remove_obj(struct obj *o);
void drop_prim(struct prim *p);

/* shard.c */
int other_shard(const char *type, jv obj);
int shard_waits(const struct prim *p);
void shard_added(jv ev, size_t lineno);
void shard_removed(jv ev, size_t lineno);
void shard_park(const char *key, const char *pkey, const struct kop_kind *k, jv obj);
void shard_barrier(jv line, size_t lineno);
void shard_synced(size_t lineno);
void shard_release(void);

/* store.c */
int projects(const struct kop_kind *k);
void child_digest(const struct kop_kind *k, jv obj, const char *text, size_t len, unsigned char d[OBJ_DIG]);
size_t compress_text(const char *in, size_t len, unsigned char **out, const struct zdict *dict);
void store_text(struct obj *o, jv obj, const char *text, size_t len, const unsigned char *tdig);
void store_view(struct obj *o, jv v);
jv parse_view(const struct obj *o);
/* Whether o holds this text already; when it took the text's digest to say,
 * that digest is in d and *made points at it (for store_text). */
int same_text(const struct obj *o, const char *text, size_t len, unsigned char d[OBJ_DIG], const unsigned char **made);
const struct zdict *dict_made(struct zdict *d, const char *text, size_t len);
char *keep_text(char *text, size_t len, struct zdict *d, size_t *zlen);
jv kept_parse(const char *kept, size_t zlen, size_t len, const struct zdict *d);
char *expand_text(const unsigned char *zin, size_t zlen, size_t size, const struct zdict *dict);
jv expand_parse(const unsigned char *zin, size_t zlen, size_t size, const struct zdict *dict);
jv parse_obj(const struct obj *o);
char *kind_compress(const struct kop_kind *k, const char *text, size_t len, size_t *zlen, unsigned char *gen);
jv kind_parse(const struct kop_kind *k, const char *text, size_t zlen, size_t len, unsigned char gen);

/* flight.c */
void flight_free(void *v);
void flight_forget(const char *fkey);
int flight_check_text(struct prim *p, const char *fkey, const char *text, size_t len, const char *live_rv,
		      int64_t now);
int flight_alive(const struct flight *f, int64_t now);
int flight_on_way(const char *fkey, const unsigned char *memo, const char *live_rv, int64_t now);
void flight_sent_object(struct prim *p, const char *fkey, const unsigned char *memo, int r, int status,
			const char *text, size_t len);
int flight_check(struct prim *p, const char *fkey, jv sent, const char *live_rv, int64_t now);
const char *flight_create_pending(struct prim *p, int64_t now);
void flight_mark_unseen(struct prim *p, const char *fkey);
void flight_unseen_clear(struct flight *f);
int flight_landed(struct obj *o);
void flight_apply_seen(struct obj *o);

/* input.c */
void parsed_free(void *v);
int live_holds(struct rctx *c, const struct obj *o, jv desired);
void match_set(struct obj *o, const unsigned char *d);
int match_holds(const struct obj *o, const unsigned char *d);
uint64_t rv_number(const char *rv);
jv view_of(struct rctx *c, const struct obj *o);
jv build_related(void);
jv build_aggs(void);
jv child_slot(struct prim *p, const struct obj *o);
jv build_children(struct prim *p, struct rctx *ctx);
jv errors_list(struct prim *p);

/* status.c */
int has_finalizer(jv obj, const char *f, int *index);
jv ref_of(const struct obj *o);
jv op_line(const char *op, const char *pkey);
void add_finalizer(struct prim *p, jv parent, int64_t now, struct counts *n);
void remove_finalizer(struct prim *p, jv parent, int index, int64_t now, struct counts *n);
struct flight *status_flight(struct prim *p, int64_t now);
int write_status(struct prim *p, jv parent, jv status, enum seen seen, int events, int64_t now, struct counts *n);
void write_events(struct prim *p, jv parent, jv events, struct counts *n);
jv parent_seen(struct prim *p, jv parent, enum seen *seen, int64_t now);
void seen_note(struct prim *p, jv seen);
int seen_alike(struct prim *p, jv obj, int64_t now);

/* children.c */
int check_output(jv out, char *err);
int check_children(jv out, char *err);
int check_ignored(jv desired, const char *what, char *err);
int resolve_output(jv out, jv rdes, jv *res, char *err);
void apply_children(struct prim *p, struct rctx *ctx, jv children, jv rdes, struct kop_hmap *desired, int64_t now,
		    struct counts *n, int *held);
void prune(struct prim *p, struct kop_hmap *desired, int64_t now, struct counts *n);
void tidy_errors(struct prim *p, struct kop_hmap *desired);

/* cache.c */
/* What a render makes (render_make). */
struct rmade {
	jv out;			/* the answer, directives resolved */
	jv view;		/* what sync sees of it; jv_invalid(): out itself */
	int n;			/* the objects of its .desired: */
	unsigned char (*dig)[KOP_JSON_DIGEST_LEN];	/* their digests (NULL when none) */
	unsigned char *stat;	/* which of them have a status */
};
jv render_parent(jv parent);
void render_parent_digest(jv obj, const char *text, size_t tlen, unsigned char d[KOP_JSON_DIGEST_LEN]);
jv render_input(void);
jv render_input_parent(struct prim *p, jv in);
int render_make(jv in, struct rmade *m, int64_t *us_jq, int64_t *us_fn, char *err);
char *render_packed(jv out, size_t *len);
int render_take(struct prim *p, const unsigned char d[KOP_JSON_DIGEST_LEN], struct rmade *m, const char *full,
		size_t len, const char *view, size_t vlen);
jv render(struct prim *p, struct rctx *ctx, int64_t *us_jq, int64_t *us_fn, int *cached, char *err);
jv rendered_full(struct prim *p, struct rctx *ctx);
jv rendered_object(struct prim *p, struct rctx *ctx, int i);
void render_keep(struct prim *p, struct rctx *ctx, int held);
void render_ahead(struct prim *p);
void render_ahead_all(void);
__attribute__((noinline)) int prerender(void);
void ahead_drop(void);
void first_pass_enqueue(void);
void ahead_free(void);
struct prim *ahead_next(unsigned char d[KOP_JSON_DIGEST_LEN], jv *in);
jv build_pending(struct prim *p, struct rctx *ctx, int64_t now);

/* worker.c */
void worker_start(void);
int worker_fd(void);
int worker_req_fd(void);
void worker_wait(struct prim *p);
void worker_enqueue_sent(void);
void worker_tend(void);
void worker_stop(void);
unsigned long worker_renders(void);

/* reconcile.c */
__attribute__((noinline)) void reconcile(struct prim *p, int64_t now);
void rctx_init(struct rctx *ctx, struct prim *p);
void rctx_release(struct rctx *ctx);

/* watchdog.c */
extern struct watchdog_state W;
void watchdog_mark(const char *key);
void *watchdog(void *arg);

/* feedback.c */
/* A failed apply's tag in its p->errors record (errors_list leaves it out of .errors). */
#define ERROR_TAG "tag"
/* The failure recorded for write fkey of p (p->errors) dropped, p queued so that the
 * program can clear what it reported: on a later success of that write, or when the
 * object is seen to hold what it was to make (it may have landed, its answer lost).
 * tag: the apply's (the hex of its object's digest), cleared only when the failure
 * was of that very object (another object's success or hold, one the program fell
 * back to because of the failure, clears nothing) or has no tag; NULL: any.
 * The backoff is reset whenever no failure is left. */
void clear_error(struct prim *p, const char *fkey, const char *tag);
void handle_result(jv r, size_t lineno);
void drop_result(jv r, size_t lineno);

/* reader.c */
void reader_init(struct reader *rd, const char *name, int fd);
void reader_release(struct reader *rd);
void reader_drain(struct reader *rd, void (*fn)(jv, size_t));
ssize_t reader_fill(struct reader *rd);

#endif
