/*
 * ireconcile: the generic reconcile engine. Watch events in, a view of the
 * cluster kept, a program's jq run per primary, the operations of the stage
 * protocol out (README, "ireconcile" and "Writing a program").
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <openssl/sha.h>
#include <zlib.h>
#include "tool.h"
#include "jsonl.h"
#include "hmap.h"
#include "program.h"
#include "render.h"
#include "banned.h"

static const char usage[] =
	"usage: ireconcile [options] PROGRAM\n"
	"       ireconcile --print-watches PROGRAM\n"
	"\n"
	"Reads watch events on stdin, keeps a view of the cluster, runs PROGRAM (a directory\n"
	"with a program.yml, or a name under pipeline/ such as iotservice) for each primary\n"
	"and writes apply, delete, patch, status and event lines on stdout (README, \"The stage protocol\").\n"
	"\n"
	"  --feedback FILE        result lines (a FIFO): failed writes reach the program as .errors\n"
	"  --print-watches        print the watches the program needs, one JSON line each, and exit\n"
	"  --now TIME             the RFC 3339 time the program sees as .now (default: the clock)\n"
	"  --once                 exit after the first full reconcile\n"
	"  --backoff-base D       first delay after a program error or a failed write (default 1s)\n"
	"  --backoff-cap D        longest such delay (default 5m)\n"
	"  --stats-interval D     log a \"stats\" line (reconciles, errors, queue, objects) every D\n"
	"  --watchdog D           say when one reconcile runs longer than D, then 2D, 4D... (default 10s)\n"
	"  -v, --verbose          log each reconcile (key, duration, counts); twice for more\n"
	"  --log-level LEVEL      error, warn, info, debug, trace\n"
	"  --log-format FORMAT    json or text\n"
	"  -h, --help             this help\n"
	"\n"
	"Settings come from the environment (see the program's settings, e.g. OPERATOR_NAME).\n"
	"Exit codes: 0 end of input, 100 bad usage or program, 111 local I/O error.\n";

enum {
	OPT_FEEDBACK = OPT_TOOL_LAST,
	OPT_PRINT_WATCHES,
	OPT_NOW,
	OPT_ONCE,
	OPT_BACKOFF_BASE,
	OPT_BACKOFF_CAP,
	OPT_STATS_INTERVAL,
	OPT_WATCHDOG
};

#define MAX_LINE (32u << 20)
/* An operation sent and not seen back is forgotten after this long. */
#define FLIGHT_TIMEOUT_MS 60000

struct prim;

/*
 * A live object in the view. It is kept as compact JSON text, parsed only
 * when a reconcile needs it: parsed jv objects take ten times the memory of
 * their text, and a reconcile touches few objects.
 */
struct obj {
	char *key;			/* "Kind.group|ns/name" */
	const struct kop_kind *kind;
	char *text;			/* the object without managedFields (deflated when zlen) */
	size_t len;			/* its length as JSON */
	size_t zlen;			/* deflated: its length so (0: text is the JSON) */
	size_t slen;			/* deflated: the length of what was deflated */
	int fp;				/* deflated: fingerprinted (kop_json_fingerprint) */
	unsigned char tdig[SHA256_DIGEST_LENGTH];	/* deflated: SHA-256 of the JSON */
	char *vtext;			/* child kinds with a `project`: what the program sees (NULL: text) */
	size_t vlen;
	unsigned char sdig[KOP_JSON_DIGEST_LEN];	/* digest without status and resourceVersion */
	char *name, *ns, *uid;		/* ns and uid "" when none */
	int deleting;			/* metadata.deletionTimestamp is set */
	char *rv;			/* metadata.resourceVersion ("" when none) */
	char *owner_uid;		/* controller reference's uid when mapped by owner reference */
	struct prim *prim;		/* children and observed: their primary */
	/* It held every field of the desired object of digest `match` when its
	 * own digest without status was `match_sdig` (match_ok: known). */
	int match_ok;
	unsigned char match[KOP_JSON_DIGEST_LEN], match_sdig[KOP_JSON_DIGEST_LEN];
	struct obj *prev, *next;	/* in prim->children */
};

/* A primary, known from its object or from children that map to it. */
struct prim {
	char *key;			/* "ns/name" */
	struct obj *obj;		/* NULL when not (or no longer) seen */
	struct obj *children;
	int queued;
	struct prim *qnext;
	int64_t due;			/* timer, monotonic ms; 0 = none */
	struct kop_backoff backoff;
	jv errors;			/* "op|objkey" -> {"op","ref","code","reason","message"} */
	unsigned char *agg;		/* one flag per aggregate */
	unsigned char pdig[KOP_JSON_DIGEST_LEN];	/* of render_parent(the object), as it arrived */
	int render_valid;		/* render_key, rview, rdig, rstat (and radig) describe the last answer */
	unsigned char render_key[KOP_JSON_DIGEST_LEN];	/* of the render program's last input */
	unsigned char *rendered;	/* its output, directives resolved, compact JSON deflated (NULL: not kept) */
	size_t rendered_zlen, rendered_len;	/* deflated and original sizes */
	char *rview;			/* its answer as sync sees it, when projected (NULL: as it is) */
	char *status_sent;		/* the last status written, compact JSON (NULL: none) */
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
	char *live_rv;			/* the live object's resourceVersion when sent ("" = missing) */
	int64_t at;
	int failed;
	int64_t retry_at;
	/* Applies: the object sent, to tell when the live one holds it
	 * (apply_pending): the rendered object of index rindex under the
	 * render key rkey, stamped, or else the JSON text deflated. */
	int has_obj;
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
};

struct engine {
	struct kop_program prog;
	struct kop_hmap objs;		/* objkey -> struct obj */
	struct kop_hmap prims;		/* pkey -> struct prim */
	struct kop_hmap related;	/* objkey -> struct obj (also in objs) */
	struct kop_hmap flights;	/* "op|objkey" -> struct flight */
	struct prim *qhead, *qtail;
	int synced;
	jv related_cache;		/* the program's .related, jv_invalid() when stale */
	jv children_empty;		/* {"Kind.v": {}} for every child and observed kind */
	jv aggs_cache;			/* .aggregates, jv_invalid() when stale */
	struct zdict {			/* per kind: the dictionary its deflated texts use */
		unsigned char *buf;
		size_t len;
	} *dicts;			/* [0]: the primary's, [1 + i]: E.prog.kinds[i]'s */
	const char *now;
	unsigned backoff_base, backoff_cap;
	unsigned long reconciles, errors;
	int read_failed;		/* stdin could not be read: exit 111, not 0 */
	long stats_ms;			/* --stats-interval, 0 = off */
	int64_t stats_at;
};

static struct engine E;

/* ---- small helpers ------------------------------------------------------------ */

static jv path2(const char *a, const char *b)
{
	return jv_array_append(jv_array_append(jv_array(), jv_string(a)), jv_string(b));
}

/* obj.metadata.field as a string borrowed from obj, or NULL. */
static const char *meta(jv obj, const char *field)
{
	jv m = kop_json_member(jv_copy(obj), "metadata");
	const char *s = kop_json_cstr(m, field);

	jv_free(m);	/* obj still holds it: s outlives m */
	return s;
}

static int has_meta(jv obj, const char *field)
{
	jv v = jv_getpath(jv_copy(obj), path2("metadata", field));
	int k = jv_get_kind(v);

	jv_free(v);
	return k != JV_KIND_NULL && k != JV_KIND_INVALID;
}

/* Whether obj.key (obj borrowed) is a string holding a NUL byte. */
static int has_nul(jv obj, const char *key)
{
	jv v = kop_json_member(jv_copy(obj), key);
	int bad = jv_get_kind(v) == JV_KIND_STRING && strlen(jv_string_value(v)) != (size_t)jv_string_length_bytes(jv_copy(v));

	jv_free(v);
	return bad;
}

/*
 * The first of kind, apiVersion, metadata.name and metadata.namespace of obj
 * (borrowed) that is a string holding a NUL byte, or NULL. Keys are C
 * strings: "a\u0000b" would stand for "a" (no real object has such a name).
 */
static const char *nul_field(jv obj)
{
	const char *bad = NULL;
	jv m;

	if (has_nul(obj, "kind"))
		return "kind";
	if (has_nul(obj, "apiVersion"))
		return "apiVersion";
	m = kop_json_member(jv_copy(obj), "metadata");
	if (has_nul(m, "name"))
		bad = "metadata.name";
	else if (has_nul(m, "namespace"))
		bad = "metadata.namespace";
	jv_free(m);
	return bad;
}

/* "Kind.group|ns/name": one key per object, whatever version it was read in. */
static char *obj_key(const char *api_version, const char *kind, const char *ns, const char *name)
{
	struct kop_buf b = KOP_BUF_INIT;
	char *group = kop_api_group(api_version);

	kop_buf_addf(&b, "%s.%s|%s/%s", kind, group, ns ? ns : "", name);
	free(group);
	return kop_buf_detach(&b, NULL);
}

static char *join2(const char *a, const char *b)
{
	struct kop_buf buf = KOP_BUF_INIT;

	kop_buf_addf(&buf, "%s|%s", a, b);
	return kop_buf_detach(&buf, NULL);
}

/*
 * Output. Lines are queued and written as stdout takes them, never blocking
 * while it is a full pipe: the stages form a cycle (ireconcile -> kapply ->
 * kstatus -> feedback -> ireconcile), so blocking on stdout while kstatus
 * blocks on a full feedback FIFO would stop all of them. While more than
 * OUT_HIGH bytes wait, no more is reconciled and stdin is not read.
 */
#define OUT_HIGH (1u << 20)

static struct kop_buf outq;
static size_t out_start;
static size_t out_chunk = 4096;	/* PIPE_BUF for pipes: a POLLOUT write that never blocks */

static size_t out_pending(void)
{
	return outq.len - out_start;
}

/* Writes what stdout takes now (block: all of it). */
static void flush_out(int block)
{
	while (out_pending()) {
		struct pollfd pfd = { 1, POLLOUT, 0 };
		size_t len = out_pending() < out_chunk ? out_pending() : out_chunk;
		ssize_t n;
		int r = poll(&pfd, 1, block ? -1 : 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			return;
		n = write(1, outq.buf + out_start, len);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			tool_stdout_failed();
		out_start += (size_t)n;
	}
	out_start = 0;
	kop_buf_reset(&outq);
}

/* Drops what was written from the front of the queue once it is most of it. */
static void out_compact(void)
{
	kop_buf_drop_done(&outq, &out_start, OUT_HIGH);
}

/* Queues an operation line from the compact JSON of its object (spares a second dump). */
static void emit_op_text(const char *op, const char *pkey, const char *text, size_t len)
{
	out_compact();
	kop_buf_addf(&outq, "{\"op\":\"%s\",\"primary\":", op);
	kop_json_dump_buf(&outq, jv_string(pkey));
	kop_buf_add(&outq, ",\"object\":", 10);
	kop_buf_add(&outq, text, len);
	kop_buf_add(&outq, "}\n", 2);
	flush_out(0);
}

static void emit(jv line)
{
	out_compact();
	kop_json_dump_buf(&outq, line);
	kop_buf_add(&outq, "\n", 1);
	flush_out(0);
}

/* ---- primaries and the queue ----------------------------------------------------- */

static struct prim *prim_get(const char *key, int create)
{
	struct prim *p = kop_hmap_get(&E.prims, key);

	if (p || !create)
		return p;
	p = kop_calloc(1, sizeof(*p));
	p->key = kop_strdup(key);
	p->errors = jv_object();
	kop_backoff_init(&p->backoff, E.backoff_base, E.backoff_cap, 0.5);
	p->agg = kop_calloc(E.prog.naggs ? E.prog.naggs : 1, 1);
	kop_hmap_put(&E.prims, key, p);
	return p;
}

/* Forgets the first n of p->status_prev. */
static void status_prev_drop(struct prim *p, int n)
{
	int i;

	for (i = 0; i < n; i++)
		free(p->status_prev[i]);
	memmove(p->status_prev, p->status_prev + n, (size_t)(p->nprev - n) * sizeof(p->status_prev[0]));
	p->nprev -= n;
}

/* Appends text (taken); when full, the oldest of ours goes, not the one
 * stored when the flight began ([0]). */
static void status_prev_push(struct prim *p, char *text)
{
	if (p->nprev == (int)(sizeof(p->status_prev) / sizeof(p->status_prev[0]))) {
		free(p->status_prev[1]);
		memmove(p->status_prev + 1, p->status_prev + 2, (size_t)(p->nprev - 2) * sizeof(p->status_prev[0]));
		p->nprev--;
	}
	p->status_prev[p->nprev++] = text;
}

static void prim_free(void *v)
{
	struct prim *p = v;

	free(p->key);
	jv_free(p->errors);
	free(p->rendered);
	free(p->rview);
	free(p->rdig);
	free(p->rstat);
	free(p->radig);
	free(p->status_sent);
	status_prev_drop(p, p->nprev);
	free(p->agg);
	free(p);
}

static void enqueue(struct prim *p)
{
	if (!p || p->queued)
		return;
	p->queued = 1;
	p->qnext = NULL;
	if (E.qtail)
		E.qtail->qnext = p;
	else
		E.qhead = p;
	E.qtail = p;
}

static void enqueue_all(void)
{
	size_t it = 0;
	void *v;

	while (kop_hmap_next(&E.prims, &it, NULL, &v))
		if (((struct prim *)v)->obj)
			enqueue(v);
}

static void schedule(struct prim *p, int64_t at)
{
	if (!p->due || at < p->due)
		p->due = at;
}

/* ---- the view ----------------------------------------------------------------------- */

static void obj_free(void *v)
{
	struct obj *o = v;

	free(o->key);
	free(o->text);
	free(o->name);
	free(o->ns);
	free(o->uid);
	free(o->rv);
	free(o->owner_uid);
	free(o->vtext);
	free(o);
}

static void unlink_child(struct obj *o)
{
	struct prim *p = o->prim;

	if (!p)
		return;
	if (o->prev)
		o->prev->next = o->next;
	else
		p->children = o->next;
	if (o->next)
		o->next->prev = o->prev;
	o->prev = o->next = NULL;
	o->prim = NULL;
}

static void link_child(struct obj *o, struct prim *p)
{
	o->prim = p;
	o->prev = NULL;
	o->next = p->children;
	if (p->children)
		p->children->prev = o;
	p->children = o;
}

/* Recomputes a primary's aggregate flags from obj (borrowed; jv_null() when
 * gone); the cache goes stale when one flips. */
static void update_aggs(struct prim *p, jv obj)
{
	size_t i;

	for (i = 0; i < E.prog.naggs; i++) {
		int flag = 0;

		if (jv_get_kind(obj) == JV_KIND_OBJECT) {
			jv r;
			char err[KOP_ERRLEN];

			if (kop_jq_run1(E.prog.aggs[i].jq, jv_copy(obj), &r, err) < 0) {
				tool_logj(LOG_WARN, jv_object_set(jv_object(), kop_json_key("primary"), jv_string(p->key)),
					  "unable to evaluate aggregate '%s' for '%s': %s", E.prog.aggs[i].name, p->key,
					  err);
			} else {
				flag = jv_get_kind(r) != JV_KIND_FALSE && jv_get_kind(r) != JV_KIND_NULL;
				jv_free(r);
			}
		}
		if (flag != p->agg[i]) {
			p->agg[i] = (unsigned char)flag;
			jv_free(E.aggs_cache);
			E.aggs_cache = jv_invalid();
		}
	}
}

static void flight_forget(const char *fkey);
static struct flight *status_flight(struct prim *p, int64_t now);

/*
 * update_aggs on what the program sees of p (parent_seen): obj (borrowed)
 * with our status while that is on its way. A status sent is counted at
 * once, not when it is stored: instances edited together are reconciled
 * before any of their statuses lands, and would otherwise all pass a
 * limit counted by an aggregate (iotservice's parallel updates).
 */
static void update_aggs_seen(struct prim *p, jv obj, int64_t now)
{
	jv st;

	if (!E.prog.naggs || jv_get_kind(obj) != JV_KIND_OBJECT || !status_flight(p, now)) {
		update_aggs(p, obj);
		return;
	}
	st = kop_json_read(p->status_sent, strlen(p->status_sent));
	if (!jv_is_valid(st)) {	/* cannot happen: we wrote it */
		jv_free(st);
		update_aggs(p, obj);
		return;
	}
	obj = jv_object_set(jv_copy(obj), kop_json_key("status"), st);
	update_aggs(p, obj);
	jv_free(obj);
}

/* Operations on an object that is gone are no longer in flight. */
static void forget_flights(const struct obj *o)
{
	static const char *const ops[] = { "apply", "delete", "patch" };
	size_t i;

	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		char *fkey = join2(ops[i], o->key);

		flight_forget(fkey);
		free(fkey);
	}
	if (o->kind->role == KOP_ROLE_PRIMARY && o->prim) {
		char *fkey = join2("status", o->prim->key);

		flight_forget(fkey);
		free(fkey);
	}
}

static void remove_obj(struct obj *o)
{
	struct prim *p = o->prim;

	kop_hmap_remove(&E.objs, o->key);
	forget_flights(o);
	if (o->kind->role == KOP_ROLE_RELATED) {
		kop_hmap_remove(&E.related, o->key);
		jv_free(E.related_cache);
		E.related_cache = jv_invalid();
		enqueue_all();
	} else if (o->kind->role == KOP_ROLE_PRIMARY) {
		if (p && p->obj == o) {
			p->obj = NULL;
			update_aggs(p, jv_null());
			enqueue(p);
		}
	} else {
		unlink_child(o);
		enqueue(p);
	}
	obj_free(o);
}

static jv project_kind(jv obj, size_t lineno, int whole);
/* Whether the kind has a `project` (jq, or the list of fields kept). */
static int projects(const struct kop_kind *k)
{
	return k->project || jv_get_kind(k->keep) == JV_KIND_ARRAY;
}
static jv render_parent(jv parent);
#define project(obj, lineno) project_kind(obj, lineno, 1)

/* The digest of a child without what its writers other than us change
 * alone (status, resourceVersion): while it stays, so does its comparison
 * with a desired object that sets neither. */
static void child_digest(jv obj, unsigned char d[KOP_JSON_DIGEST_LEN])
{
	jv m = jv_object_get(jv_copy(obj), kop_json_key("metadata"));

	obj = jv_object_delete(jv_copy(obj), kop_json_key("status"));
	if (jv_get_kind(m) == JV_KIND_OBJECT)
		obj = jv_object_set(obj, kop_json_key("metadata"), jv_object_delete(m, kop_json_key("resourceVersion")));
	else
		jv_free(m);
	kop_json_digest(obj, d);
	jv_free(obj);
}

/*
 * Keeps an object's text. A child the program sees projected is read whole
 * only to compare it again after a change other than its status: it is
 * kept deflated (a third of the memory), with a digest to tell a new state.
 */
/* Deflates len bytes at in into *out (allocated), with the dictionary dict
 * (NULL: none): its size, 0 on failure. One stream serves every call:
 * deflateInit allocates ~270 KB each time. */
static size_t deflate_text(const char *in, size_t len, unsigned char **out, const struct zdict *dict)
{
	static z_stream z;
	static int ready;
	uLong cap;

	if (!ready) {
		if (deflateInit(&z, 1) != Z_OK)
			return 0;
		ready = 1;
	} else if (deflateReset(&z) != Z_OK) {
		return 0;
	}
	if (dict && dict->len && deflateSetDictionary(&z, dict->buf, (uInt)dict->len) != Z_OK)
		return 0;
	cap = deflateBound(&z, (uLong)len);
	*out = kop_malloc(cap);
	z.next_in = (Bytef *)(uintptr_t)in;
	z.avail_in = (uInt)len;
	z.next_out = *out;
	z.avail_out = (uInt)cap;
	if (deflate(&z, Z_FINISH) != Z_STREAM_END || !z.total_out) {
		free(*out);
		*out = NULL;
		return 0;
	}
	*out = kop_realloc(*out, z.total_out);
	return z.total_out;
}

/*
 * A kind's dictionary: the first text of the kind deflated (its last 32 KB,
 * deflate's window), never changed after. Objects of one kind differ in
 * little, names mostly: with it a Deployment takes ~160 bytes, not ~550.
 */
static struct zdict *dict_of(const struct kop_kind *k)
{
	return &E.dicts[k == &E.prog.primary ? 0 : 1 + (k - E.prog.kinds)];
}

static const struct zdict *kind_dict(const struct kop_kind *k, const char *text, size_t len)
{
	struct zdict *d = dict_of(k);

	if (!d->buf) {
		if (len > 32768) {
			text += len - 32768;
			len = 32768;
		}
		d->buf = kop_malloc(len ? len : 1);
		memcpy(d->buf, text, len);
		d->len = len;
	}
	return d;
}

/*
 * Keeps an object's text (its JSON, obj borrowed). One whose program sees a
 * projection of it (vtext) is read whole only to compare it again after a
 * change other than its status, or to render (a primary): it is kept
 * deflated, with a digest to tell a new state; a child also fingerprinted
 * (kop_json_fingerprint: a Secret's data as its digest), since it is only
 * ever compared.
 */
static void store_text(struct obj *o, jv obj, const char *text, size_t len)
{
	free(o->text);
	o->text = NULL;
	o->len = len;
	o->zlen = 0;
	o->fp = 0;
	if (o->vtext) {
		unsigned char *z;
		const char *st = text;
		char *fptext = NULL;
		size_t slen = len, zlen;
		int changed = 0;

		if (o->kind->role == KOP_ROLE_CHILD) {
			jv f = kop_json_fingerprint(jv_copy(obj), &changed);

			if (changed)
				st = fptext = kop_json_dump_len(f, &slen);
			else
				jv_free(f);
		}
		zlen = deflate_text(st, slen, &z, kind_dict(o->kind, st, slen));
		if (zlen) {
			o->text = (char *)z;
			o->zlen = zlen;
			o->slen = slen;
			o->fp = o->kind->role == KOP_ROLE_CHILD;
			SHA256((const unsigned char *)text, len, o->tdig);
			free(fptext);
			return;
		}
		free(fptext);
	}
	o->text = kop_strndup(text, len);
}

static int same_text(const struct obj *o, const char *text, size_t len)
{
	unsigned char d[SHA256_DIGEST_LENGTH];

	if (!o->zlen)
		return !memcmp(o->text, text, len);
	SHA256((const unsigned char *)text, len, d);
	return !memcmp(d, o->tdig, sizeof(d));
}

/* Inflates size bytes deflated as zlen at zin with the dictionary dict (NULL:
 * none) and parses them; jv_invalid() if unreadable. */
static jv inflate_parse(const unsigned char *zin, size_t zlen, size_t size, const struct zdict *dict)
{
	static z_stream z;
	static int ready;
	char *buf = kop_malloc(size + 1);
	jv v = jv_invalid();
	int r;

	if (!ready) {
		if (inflateInit(&z) != Z_OK)
			goto out;
		ready = 1;
	} else if (inflateReset(&z) != Z_OK) {
		goto out;
	}
	z.next_in = (Bytef *)(uintptr_t)zin;
	z.avail_in = (uInt)zlen;
	z.next_out = (Bytef *)buf;
	z.avail_out = (uInt)size;
	r = inflate(&z, Z_FINISH);
	if (r == Z_NEED_DICT && dict && inflateSetDictionary(&z, dict->buf, (uInt)dict->len) == Z_OK)
		r = inflate(&z, Z_FINISH);
	if (r == Z_STREAM_END && z.total_out == size)
		v = kop_json_read(buf, size);
out:
	free(buf);
	return v;
}

/* The object parsed (caller owns it), fingerprinted if o->fp; jv_invalid() if it cannot be read back. */
static jv parse_obj(const struct obj *o)
{
	if (!o->zlen)
		return kop_json_read(o->text, o->len);
	return inflate_parse((const unsigned char *)o->text, o->zlen, o->slen, dict_of(o->kind));
}

static void handle_object(const char *type, jv obj, size_t lineno)
{
	const char *name = meta(obj, "name"), *ns = meta(obj, "namespace");
	const char *kind = kop_json_cstr(obj, "kind"), *av = kop_json_cstr(obj, "apiVersion"), *bad;
	const struct kop_kind *k;
	struct obj *o;
	char *key;
	const char *rv;
	char *text;
	size_t tlen;

	if (!name || !*name || !kind || !av) {
		log_warn("line %zu: %s without %s; skipped", lineno, "an object",
			 !kind ? "kind" : !av ? "apiVersion" : "metadata.name");
		jv_free(obj);
		return;
	}
	if ((bad = nul_field(obj))) {
		log_warn("line %zu: an object whose %s holds a NUL byte; skipped", lineno, bad);
		jv_free(obj);
		return;
	}
	if (!(k = kop_program_find_kind(&E.prog, av, kind, ns, name))) {
		log_warn("line %zu: unknown kind '%s' (apiVersion '%s') for program '%s'; skipped", lineno, kind, av,
			 E.prog.name);
		jv_free(obj);
		return;
	}
	if (k->role == KOP_ROLE_PRIMARY && k->namespace && strcmp(k->namespace, ns ? ns : "")) {
		log_debug("line %zu: %s '%s/%s' outside namespace '%s'; ignored", lineno, kind, ns ? ns : "", name,
			  k->namespace);
		jv_free(obj);
		return;
	}
	key = obj_key(av, kind, ns, name);
	o = kop_hmap_get(&E.objs, key);
	if (!strcmp(type, "DELETED")) {
		if (o)
			remove_obj(o);
		free(key);
		jv_free(obj);
		return;
	}
	if (has_meta(obj, "managedFields"))
		obj = jv_object_set(obj, kop_json_key("metadata"),
				    jv_object_delete(jv_object_get(jv_copy(obj), kop_json_key("metadata")),
						     kop_json_key("managedFields")));
	rv = meta(obj, "resourceVersion");
	text = kop_json_dump_len(jv_copy(obj), &tlen);
	if (o && o->len == tlen && same_text(o, text, tlen)) {
		free(key);	/* the same state again (a replay, a relist): nothing new */
		free(text);
		jv_free(obj);
		return;
	}
	if (k->role == KOP_ROLE_CHILD || k->role == KOP_ROLE_OBSERVED) {
		char *owner_uid = NULL;
		char *pkey = kop_program_map(&E.prog, k->mapping, obj, &owner_uid);

		if (!pkey) {
			/* Not (or no longer) ours: out of the view. */
			if (o)
				remove_obj(o);
			free(key);
			free(text);
			jv_free(obj);
			return;
		}
		if (!o) {
			o = kop_calloc(1, sizeof(*o));
			o->key = key;
			kop_hmap_put(&E.objs, key, o);
		} else {
			free(key);
		}
		if (!o->prim || strcmp(o->prim->key, pkey)) {
			struct prim *old = o->prim;

			unlink_child(o);
			enqueue(old);
			link_child(o, prim_get(pkey, 1));
		}
		free(o->owner_uid);
		o->owner_uid = owner_uid;
		free(pkey);
	} else {
		if (!o) {
			o = kop_calloc(1, sizeof(*o));
			o->key = key;
			kop_hmap_put(&E.objs, key, o);
		} else {
			free(key);
		}
	}
	o->kind = k;
	free(o->vtext);
	o->vtext = NULL;
	if (k->role == KOP_ROLE_CHILD) {
		/* Compared whole, seen by the program as projected. */
		jv v = projects(k) ? project(jv_copy(obj), lineno) : jv_invalid();

		if (jv_is_valid(v))
			o->vtext = kop_json_dump_len(v, &o->vlen);
		child_digest(obj, o->sdig);
	} else if (k->role == KOP_ROLE_PRIMARY && E.prog.render) {
		/* Its spec goes to the render program only (README: render). */
		o->vtext = kop_json_dump_len(jv_object_delete(jv_copy(obj), kop_json_key("spec")), &o->vlen);
	}
	store_text(o, obj, text, tlen);
	free(text);
	free(o->rv);
	o->rv = kop_strdup(rv ? rv : "");
	free(o->name);
	o->name = kop_strdup(name);
	free(o->ns);
	o->ns = kop_strdup(ns ? ns : "");
	free(o->uid);
	o->uid = kop_strdup(meta(obj, "uid") ? meta(obj, "uid") : "");
	o->deleting = has_meta(obj, "deletionTimestamp");
	switch (k->role) {
	case KOP_ROLE_PRIMARY: {
		struct kop_buf pk = KOP_BUF_INIT;
		struct prim *p;

		if (ns && *ns)
			kop_buf_addf(&pk, "%s/%s", ns, name);
		else
			kop_buf_adds(&pk, name);
		p = prim_get(pk.buf, 1);
		kop_buf_release(&pk);
		o->prim = p;	/* for primaries: a back pointer only, not a list */
		p->obj = o;
		if (E.prog.render) {
			jv rp = render_parent(jv_copy(obj));

			kop_json_digest(rp, p->pdig);
			jv_free(rp);
		}
		update_aggs_seen(p, obj, kop_mono_ms());
		enqueue(p);
		break;
	}
	case KOP_ROLE_RELATED:
		kop_hmap_put(&E.related, o->key, o);
		jv_free(E.related_cache);
		E.related_cache = jv_invalid();
		enqueue_all();
		break;
	default:
		enqueue(o->prim);
	}
	jv_free(obj);
}

/*
 * Applies the kind's `project` (program.yml) to obj (consumed): the object as
 * it will be kept. apiVersion, kind, name and namespace always stay.
 */
static jv project_kind(jv obj, size_t lineno, int whole)
{
	const char *name = meta(obj, "name"), *ns = meta(obj, "namespace");
	const char *kind = kop_json_cstr(obj, "kind"), *av = kop_json_cstr(obj, "apiVersion");
	const struct kop_kind *k = kind && av && name ? kop_program_find_kind(&E.prog, av, kind, ns, name) : NULL;
	jv out = jv_invalid(), meta_out;
	char err[KOP_ERRLEN] = "";

	if (!k || !projects(k))
		return obj;
	if (k->role == KOP_ROLE_CHILD && !whole)
		return obj;	/* kept whole for comparing: handle_object keeps the view beside it */
	if (!k->project) {
		out = kop_program_keep(k, jv_copy(obj));
	} else if (kop_jq_run1(k->project, jv_copy(obj), &out, err) < 0 || jv_get_kind(out) != JV_KIND_OBJECT) {
		log_warn("line %zu: unable to project %s '%s': %s; kept whole", lineno, kind, name,
			 !strcmp(kind, "Secret") ? "(the jq error on a Secret is not logged: it may quote its data)"
			 : err[0] ? err : "not an object");
		jv_free(out);
		return obj;
	}
	meta_out = jv_object_get(jv_copy(out), kop_json_key("metadata"));
	if (jv_get_kind(meta_out) != JV_KIND_OBJECT) {
		jv_free(meta_out);
		meta_out = jv_object();
	}
	meta_out = jv_object_set(meta_out, kop_json_key("name"), jv_string(name));
	if (ns)
		meta_out = jv_object_set(meta_out, kop_json_key("namespace"), jv_string(ns));
	out = jv_object_set(out, kop_json_key("metadata"), meta_out);
	out = jv_object_set(out, kop_json_key("apiVersion"), jv_string(av));
	out = jv_object_set(out, kop_json_key("kind"), jv_string(kind));
	jv_free(obj);
	return out;
}

static void handle_event(jv ev, size_t lineno)
{
	const char *type = kop_json_cstr(ev, "type");
	jv obj;

	if (jv_get_kind(ev) != JV_KIND_OBJECT || !type) {
		log_warn("line %zu: not a watch event (no \"type\"); skipped", lineno);
		jv_free(ev);
		return;
	}
	obj = jv_object_get(jv_copy(ev), kop_json_key("object"));
	if (!strcmp(type, "BOOKMARK")) {
		jv mark = jv_getpath(jv_copy(obj), jv_array_append(path2("metadata", "annotations"),
								   jv_string("k8s.io/initial-events-end")));

		if (jv_get_kind(mark) == JV_KIND_STRING && !strcmp(jv_string_value(mark), "true") && !E.synced) {
			log_debug("line %zu: initial events end: reconciling every primary", lineno);
			E.synced = 1;
			enqueue_all();
		}
		jv_free(mark);
		jv_free(obj);
	} else if (!strcmp(type, "ERROR")) {
		const char *msg = kop_json_cstr(obj, "message");

		log_warn("line %zu: watch error: %s; skipped", lineno, msg ? msg : "(no message)");
		jv_free(obj);
	} else if (strcmp(type, "ADDED") && strcmp(type, "MODIFIED") && strcmp(type, "DELETED")) {
		log_warn("line %zu: unknown event type '%s'; skipped", lineno, type);
		jv_free(obj);
	} else if (jv_get_kind(obj) != JV_KIND_OBJECT || !has_meta(obj, "name")) {
		log_warn("line %zu: %s event with an object without metadata; skipped", lineno, type);
		jv_free(obj);
	} else {
		handle_object(type, project_kind(obj, lineno, 0), lineno);
	}
	jv_free(ev);
}

/* ---- in-flight operations -------------------------------------------------------------- */

static void flight_free(void *v)
{
	struct flight *f = v;

	free(f->live_rv);
	free(f->ztext);
	free(f);
}

static void flight_forget(const char *fkey)
{
	struct flight *f = kop_hmap_remove(&E.flights, fkey);

	if (f)
		flight_free(f);
}

/*
 * 1: send now (remembered as in flight); 0: the same operation is in flight
 * against the same live object, or failed and waits for the backoff.
 */
static int flight_check_text(struct prim *p, const char *fkey, const char *text, size_t len, const char *live_rv,
			     int64_t now)
{
	struct flight *f = kop_hmap_get(&E.flights, fkey);
	unsigned char d[SHA256_DIGEST_LENGTH];

	SHA256((const unsigned char *)text, len, d);
	if (f && !memcmp(f->sent, d, sizeof(d))) {
		if (f->failed && now < f->retry_at) {
			schedule(p, f->retry_at);
			return 0;
		}
		if (!f->failed && !strcmp(f->live_rv, live_rv) && now - f->at < FLIGHT_TIMEOUT_MS)
			return 0;
	}
	if (!f) {
		f = kop_calloc(1, sizeof(*f));
		kop_hmap_put(&E.flights, fkey, f);
	}
	memcpy(f->sent, d, sizeof(d));
	free(f->live_rv);
	f->live_rv = kop_strdup(live_rv);
	f->at = now;
	f->failed = 0;
	f->has_obj = 0;
	free(f->ztext);
	f->ztext = NULL;
	return 1;
}

/*
 * What the apply just let through flight_check_text (text, len) was: the
 * rendered object of index r (>= 0) of p's render, or that text. memo: the
 * comparison's memo key.
 */
static void flight_sent_object(struct prim *p, const char *fkey, const unsigned char *memo, int r, const char *text,
			       size_t len)
{
	struct flight *f = kop_hmap_get(&E.flights, fkey);

	if (!f)
		return;
	memcpy(f->memo, memo, sizeof(f->memo));
	f->rindex = r;
	if (r >= 0) {
		memcpy(f->rkey, p->render_key, sizeof(f->rkey));
	} else if (!(f->zlen = deflate_text(text, len, &f->ztext, NULL))) {
		return;	/* unknown: never pending */
	}
	f->len = len;
	f->has_obj = 1;
}

static int flight_check(struct prim *p, const char *fkey, jv sent, const char *live_rv, int64_t now)
{
	size_t len;
	char *s = kop_json_dump_len(jv_copy(sent), &len);
	int r = flight_check_text(p, fkey, s, len, live_rv, now);

	free(s);
	return r;
}

/* ---- one reconcile ------------------------------------------------------------------------ */


/* What one reconcile parsed: the primary and the live objects it looked at. */
struct rctx {
	jv parent;
	struct kop_hmap live;		/* objkey -> jv* (parsed, owned here) */
	struct kop_hmap view;		/* the same, projected for the program (vtext) */
	jv rfull;			/* rendered_full(), jv_invalid() until read */
	int64_t rerender_jq, rerender_fn;	/* time rendered_full() spent computing it again (us) */
	int rfail;			/* rendered_full() could not compute it again: what it says */
	char rfail_msg[KOP_ERRLEN + 64];	/* (room for err and what it is about) */
	int unmapped;			/* a desired child would not map back: nothing pruned */
	char unmapped_msg[KOP_ERRLEN];
};

static void parsed_free(void *v)
{
	jv *j = v;

	jv_free(*j);
	free(j);
}

/* The parsed live object, whole (borrowed from the context); fingerprinted if o->fp. */
static jv live_of(struct rctx *c, const struct obj *o)
{
	jv *j = kop_hmap_get(&c->live, o->key);

	if (!j) {
		j = kop_malloc(sizeof(*j));
		*j = parse_obj(o);
		kop_hmap_put(&c->live, o->key, j);
	}
	return *j;
}

/* Whether the live object o holds every field of desired (borrowed). */
static int live_holds(struct rctx *c, const struct obj *o, jv desired)
{
	return o->fp ? kop_json_subset_fp(desired, live_of(c, o)) : kop_json_subset(desired, live_of(c, o));
}

/* The live object as the program sees it (borrowed from the context). */
static jv view_of(struct rctx *c, const struct obj *o)
{
	jv *j;

	if (!o->vtext)
		return live_of(c, o);
	if (!(j = kop_hmap_get(&c->view, o->key))) {
		j = kop_malloc(sizeof(*j));
		*j = kop_json_read(o->vtext, o->vlen);
		kop_hmap_put(&c->view, o->key, j);
	}
	return *j;
}

static jv build_related(void)
{
	size_t it = 0, i;
	void *v;
	jv r;

	if (jv_is_valid(E.related_cache))
		return jv_copy(E.related_cache);
	r = jv_object();
	for (i = 0; i < E.prog.nkinds; i++)
		if (E.prog.kinds[i].role == KOP_ROLE_RELATED)
			r = jv_object_set(r, kop_json_key(E.prog.kinds[i].key), jv_object());
	while (kop_hmap_next(&E.related, &it, NULL, &v)) {
		struct obj *o = v;
		struct kop_buf k = KOP_BUF_INIT;
		jv group;

		if (*o->ns)
			kop_buf_addf(&k, "%s/%s", o->ns, o->name);
		else
			kop_buf_adds(&k, o->name);
		group = jv_object_get(jv_copy(r), kop_json_key(o->kind->key));
		r = jv_object_set(r, kop_json_key(o->kind->key), jv_object_set(group, kop_json_key(k.buf), parse_obj(o)));
		kop_buf_release(&k);
	}
	E.related_cache = jv_copy(r);
	return r;
}

static jv build_aggs(void)
{
	size_t i;
	jv r;

	if (jv_is_valid(E.aggs_cache))
		return jv_copy(E.aggs_cache);
	r = jv_object();
	for (i = 0; i < E.prog.naggs; i++) {
		size_t it = 0;
		void *v;
		jv keys = jv_array();

		while (kop_hmap_next(&E.prims, &it, NULL, &v)) {
			struct prim *p = v;

			if (p->obj && p->agg[i])
				keys = jv_array_append(keys, jv_string(p->key));
		}
		r = jv_object_set(r, kop_json_key(E.prog.aggs[i].name), jv_sort(keys, jv_copy(keys)));
	}
	E.aggs_cache = jv_copy(r);
	return r;
}

/* o's key in its kind's map of .children: its name, or "ns/name" when one
 * before it in p's list has the kind and the name. */
static jv child_slot(struct prim *p, const struct obj *o)
{
	const struct obj *e;

	for (e = p->children; e != o && *o->ns; e = e->next)
		if (!strcmp(e->kind->key, o->kind->key) && !strcmp(e->name, o->name))
			return jv_string_fmt("%s/%s", o->ns, o->name);
	return jv_string(o->name);
}

static jv build_children(struct prim *p, struct rctx *ctx)
{
	jv c = jv_copy(E.children_empty);
	struct obj *o;

	for (o = p->children; o; o = o->next) {
		jv group = jv_object_get(jv_copy(c), kop_json_key(o->kind->key));
		jv slot = child_slot(p, o);

		if (strcmp(jv_string_value(slot), o->name))
			log_warn("primary '%s': two %s named '%s'; the one in '%s' is keyed '%s'", p->key, o->kind->key,
				 o->name, o->ns, jv_string_value(slot));
		group = jv_object_set(group, slot, jv_copy(view_of(ctx, o)));
		c = jv_object_set(c, kop_json_key(o->kind->key), group);
	}
	return c;
}

static jv errors_list(struct prim *p)
{
	jv keys = jv_keys(jv_copy(p->errors)), out = jv_array();

	jv_array_foreach(keys, i, k) out = jv_array_append(out, jv_object_get(jv_copy(p->errors), k));
	jv_free(keys);
	return out;
}

static int has_finalizer(jv obj, const char *f, int *index)
{
	jv list = jv_getpath(jv_copy(obj), path2("metadata", "finalizers"));
	int found = 0;

	if (jv_get_kind(list) == JV_KIND_ARRAY) {
		jv_array_foreach(list, i, e) {
			if (!found && jv_get_kind(e) == JV_KIND_STRING && !strcmp(jv_string_value(e), f)) {
				found = 1;
				if (index)
					*index = i;
			}
			jv_free(e);
		}
	}
	jv_free(list);
	return found;
}

/* {"apiVersion","kind","metadata":{"name","namespace"[,"uid"]}} of obj. */
static jv ref_object(jv obj, int with_uid)
{
	jv m = jv_object(), r = jv_object();
	const char *ns = meta(obj, "namespace"), *uid = meta(obj, "uid");

	m = jv_object_set(m, kop_json_key("name"), jv_string(meta(obj, "name")));
	if (ns && *ns)
		m = jv_object_set(m, kop_json_key("namespace"), jv_string(ns));
	if (with_uid && uid)
		m = jv_object_set(m, kop_json_key("uid"), jv_string(uid));
	r = jv_object_set(r, kop_json_key("apiVersion"), jv_string(kop_json_cstr(obj, "apiVersion")));
	r = jv_object_set(r, kop_json_key("kind"), jv_string(kop_json_cstr(obj, "kind")));
	return jv_object_set(r, kop_json_key("metadata"), m);
}

/* The same for a stored object, named as the program names its kind. */
static jv ref_of(const struct obj *o)
{
	jv m = jv_object_set(jv_object(), kop_json_key("name"), jv_string(o->name));
	jv r = jv_object();

	if (*o->ns)
		m = jv_object_set(m, kop_json_key("namespace"), jv_string(o->ns));
	m = jv_object_set(m, kop_json_key("uid"), jv_string(o->uid));
	r = jv_object_set(r, kop_json_key("apiVersion"), jv_string(o->kind->api_version));
	r = jv_object_set(r, kop_json_key("kind"), jv_string(o->kind->kind));
	return jv_object_set(r, kop_json_key("metadata"), m);
}

static jv op_line(const char *op, const char *pkey)
{
	return jv_object_set(jv_object_set(jv_object(), kop_json_key("op"), jv_string(op)), kop_json_key("primary"),
			     jv_string(pkey));
}

struct counts {
	unsigned applies, deletes, patches, statuses, events;
};

static void finalizer_patch(struct prim *p, jv obj, jv patch, int64_t now, struct counts *n)
{
	const char *pkey = p->key;
	char *fkey = join2("patch", p->obj->key);

	if (flight_check(p, fkey, patch, p->obj->rv, now)) {
		jv line = op_line("patch", pkey);

		line = jv_object_set(line, kop_json_key("object"), ref_object(obj, 0));
		line = jv_object_set(line, kop_json_key("patchType"), jv_string("json"));
		line = jv_object_set(line, kop_json_key("patch"), patch);
		emit(line);
		n->patches++;
	} else {
		jv_free(patch);
	}
	free(fkey);
}

static jv test_op(const char *path, jv value)
{
	jv o = jv_object_set(jv_object(), kop_json_key("op"), jv_string("test"));

	o = jv_object_set(o, kop_json_key("path"), jv_string(path));
	return jv_object_set(o, kop_json_key("value"), value);
}

static jv patch_op(const char *op, const char *path, jv value)
{
	jv o = jv_object_set(jv_object(), kop_json_key("op"), jv_string(op));

	o = jv_object_set(o, kop_json_key("path"), jv_string(path));
	if (jv_is_valid(value))
		o = jv_object_set(o, kop_json_key("value"), value);
	return o;
}

static void add_finalizer(struct prim *p, jv parent, int64_t now, struct counts *n)
{
	jv list = jv_getpath(jv_copy(parent), path2("metadata", "finalizers"));
	jv patch = jv_array();

	if (jv_get_kind(list) == JV_KIND_ARRAY) {
		/* Others' finalizers stay: the test fails if the list changed meanwhile. */
		patch = jv_array_append(patch, test_op("/metadata/finalizers", list));
		patch = jv_array_append(patch, patch_op("add", "/metadata/finalizers/-", jv_string(E.prog.finalizer)));
	} else {
		jv_free(list);
		patch = jv_array_append(patch, test_op("/metadata/resourceVersion", jv_string(p->obj->rv)));
		patch = jv_array_append(patch, patch_op("add", "/metadata/finalizers",
							jv_array_append(jv_array(), jv_string(E.prog.finalizer))));
	}
	finalizer_patch(p, parent, patch, now, n);
}

static void remove_finalizer(struct prim *p, jv parent, int index, int64_t now, struct counts *n)
{
	char path[64];
	jv patch = jv_array();

	snprintf(path, sizeof(path), "/metadata/finalizers/%d", index);
	patch = jv_array_append(patch, test_op(path, jv_string(E.prog.finalizer)));
	patch = jv_array_append(patch, patch_op("remove", path, jv_invalid()));
	finalizer_patch(p, parent, patch, now, n);
}

/* Logs a program error for p and backs off. */
/*
 * controller-runtime's metric names, so that dashboards made for Go
 * operators read ours: every reconcile by result, and the errors.
 */
static void count_reconcile(const char *result)
{
	char labels[256];

	snprintf(labels, sizeof(labels), "controller=%s,result=%s", E.prog.name, result);
	tool_metric_add("controller_runtime_reconcile_total", labels, 1);
	if (!strcmp(result, "error")) {
		snprintf(labels, sizeof(labels), "controller=%s", E.prog.name);
		tool_metric_add("controller_runtime_reconcile_errors_total", labels, 1);
	}
}

/* Logs a program error of p ("<before>'<key>': <msg><after>") and reconciles p again after its backoff. */
static void retry_after_error(struct prim *p, const char *before, const char *msg, const char *after, int64_t now)
{
	unsigned delay = kop_backoff_next(&p->backoff);
	jv f = jv_object_set(jv_object(), kop_json_key("primary"), jv_string(p->key));

	f = jv_object_set(f, kop_json_key("retryInMs"), jv_number(delay));
	tool_logj(LOG_ERROR, f, "%s'%s': %s%s", before, p->key, msg, after);
	schedule(p, now + delay);
	E.errors++;
}

static void program_failed(struct prim *p, const char *msg, int64_t now)
{
	retry_after_error(p, "unable to reconcile ", msg, "", now);
	count_reconcile("error");
}

/* Checks the program's output; -1 with err naming what is wrong. */
static int check_output(jv out, char *err)
{
	static const struct {
		const char *field;
		int kind, kind2;
	} want[] = {
		{ "children", JV_KIND_ARRAY, JV_KIND_NULL },
		{ "status", JV_KIND_OBJECT, JV_KIND_NULL },
		{ "events", JV_KIND_ARRAY, JV_KIND_NULL },
		{ "resyncAfterSeconds", JV_KIND_NUMBER, JV_KIND_NULL },
		{ "finalized", JV_KIND_TRUE, JV_KIND_FALSE },
	};
	size_t i;

	if (jv_get_kind(out) != JV_KIND_OBJECT)
		return kop_error(err, "the output is %s, not an object", jv_kind_name(jv_get_kind(out)));
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		jv v = jv_object_get(jv_copy(out), kop_json_key(want[i].field));
		int k = jv_get_kind(v);

		jv_free(v);
		if (k == JV_KIND_INVALID || k == JV_KIND_NULL || k == want[i].kind || k == want[i].kind2)
			continue;
		return kop_error(err, "'.%s' is %s", want[i].field, jv_kind_name(k));
	}
	return 0;
}

/*
 * The answer's children must each name a child object, once: one that does
 * not (no kind, apiVersion or name, not of a child kind) or comes twice makes
 * the whole answer a program error, before anything is applied or pruned (a
 * live child it stood for would otherwise be pruned as no longer desired).
 */
static int check_children(jv out, char *err)
{
	jv children = jv_object_get(jv_copy(out), kop_json_key("children"));
	struct kop_hmap seen = KOP_HMAP_INIT;
	static int one = 1;
	int rc = 0;

	if (jv_get_kind(children) != JV_KIND_ARRAY) {
		jv_free(children);
		return 0;
	}
	jv_array_foreach(children, i, c) {
		const char *name = jv_get_kind(c) == JV_KIND_OBJECT ? meta(c, "name") : NULL;
		const char *ns = name ? meta(c, "namespace") : NULL;
		const char *kind = name ? kop_json_cstr(c, "kind") : NULL;
		const char *av = name ? kop_json_cstr(c, "apiVersion") : NULL, *bad;
		const struct kop_kind *k;
		char *key;

		if (jv_get_kind(c) != JV_KIND_OBJECT) {
			rc = kop_error(err, "desired child %d is %s, not an object", i, jv_kind_name(jv_get_kind(c)));
		} else if (!name || !*name || !kind || !av) {
			rc = kop_error(err, "desired child %d has no %s", i,
				       !name || !*name ? "metadata.name" : !kind ? "kind" : "apiVersion");
		} else if ((bad = nul_field(c))) {
			rc = kop_error(err, "desired child %d: its %s holds a NUL byte", i, bad);
		} else if (!(k = kop_program_find_kind(&E.prog, av, kind, ns, name)) || k->role != KOP_ROLE_CHILD) {
			rc = kop_error(err, "desired %s '%s' (child %d) is not of a child kind of program '%s'", kind,
				       name, i, E.prog.name);
		} else {
			key = obj_key(av, kind, ns, name);
			if (kop_hmap_put(&seen, key, &one))
				rc = kop_error(err, "desired %s '%s%s%s' is given twice (child %d)", kind, ns ? ns : "",
					       ns ? "/" : "", name, i);
			free(key);
		}
		jv_free(c);
		if (rc)
			break;
	}
	jv_free(children);
	kop_hmap_release(&seen, NULL);
	return rc;
}

/* Which object of rdes (the rendered .desired, borrowed) c (borrowed) is, or
 * -1; looked for at hint first (a program most often gives them back in their
 * order). */
static int rendered_index(jv rdes, jv c, int hint)
{
	int i, n = jv_array_length(jv_copy(rdes));

	if (jv_get_kind(c) != JV_KIND_OBJECT)
		return -1;
	if (hint >= 0 && hint < n && jv_identical(jv_array_get(jv_copy(rdes), hint), jv_copy(c)))
		return hint;
	for (i = 0; i < n; i++)
		if (i != hint && jv_identical(jv_array_get(jv_copy(rdes), i), jv_copy(c)))
			return i;
	return -1;
}

/* The program's answer (consumed) with its directives resolved; the children
 * it took from the rendered ones as they are (resolved already) are not
 * walked again. */
static int resolve_output(jv out, jv rdes, jv *res, char *err)
{
	jv children = jv_object_get(jv_copy(out), kop_json_key("children")), done;

	if (jv_get_kind(children) != JV_KIND_ARRAY)
		return jv_free(children), kop_fn_resolve(out, res, err);
	done = jv_array();
	out = jv_object_delete(out, kop_json_key("children"));
	if (kop_fn_resolve(out, &out, err) < 0) {
		jv_free(children);
		jv_free(done);
		return -1;
	}
	jv_array_foreach(children, i, c) {
		if (rendered_index(rdes, c, i) < 0 && kop_fn_resolve(c, &c, err) < 0) {
			jv_free(children);
			jv_free(done);
			jv_free(out);
			return -1;
		}
		done = jv_array_append(done, c);
	}
	jv_free(children);
	*res = jv_object_set(out, kop_json_key("children"), done);
	return 0;
}

static jv rendered_full(struct prim *p, struct rctx *ctx);

/* Which object of rdes (borrowed) has the kind, name and namespace of c (borrowed), or -1. */
static int rendered_match(jv rdes, jv c)
{
	const char *kind = kop_json_cstr(c, "kind"), *av = kop_json_cstr(c, "apiVersion");
	const char *name = meta(c, "name"), *ns = meta(c, "namespace");
	int i, n = jv_array_length(jv_copy(rdes)), found = -1;

	for (i = 0; i < n && found < 0; i++) {
		jv r = jv_array_get(jv_copy(rdes), i);
		const char *rk = kop_json_cstr(r, "kind"), *ra = kop_json_cstr(r, "apiVersion");
		const char *rn = meta(r, "name"), *rns = meta(r, "namespace");

		if (rk && ra && rn && !strcmp(rk, kind) && !strcmp(ra, av) && !strcmp(rn, name) &&
		    !strcmp(rns ? rns : "", ns ? ns : ""))
			found = i;
		jv_free(r);
	}
	return found;
}

/*
 * Applies what is desired and differs from the live object; fills desired
 * (objkey -> 1). The object applied carries KOP_APPLIED_ANNOTATION, so a
 * live object differs also when it was applied from another desired object
 * (one that set a field this one no longer sets). A child of the answer
 * (README, "Writing a program") is
 *  - an observed child given back as the program saw it: kept as it is;
 *  - with a render program, one of .rendered.desired as sync saw it: that
 *    object as rendered, whole; changed, but of the same kind and name:
 *    the rendered object with the changes merged in;
 *  - otherwise the object as it is.
 */
static void apply_children(struct prim *p, struct rctx *ctx, jv children, jv rdes, struct kop_hmap *desired, int64_t now,
			   struct counts *n, int *held)
{
	static int one = 1;
	unsigned char d[KOP_JSON_DIGEST_LEN];
	unsigned char *hold = p->nrdig ? kop_calloc((size_t)p->nrdig, 1) : NULL;	/* rendered child j held */
	int j;

	jv_array_foreach(children, i, c) {
		const char *name = meta(c, "name"), *ns = meta(c, "namespace");
		const char *kind = kop_json_cstr(c, "kind"), *av = kop_json_cstr(c, "apiVersion");
		const struct kop_kind *k;
		char *key, *fkey;
		struct obj *live;
		jv full = jv_invalid();
		int r = -1, status;

		if (!name || !kind || !av || !(k = kop_program_find_kind(&E.prog, av, kind, ns, name)) ||
		    k->role != KOP_ROLE_CHILD) {
			jv_free(c);	/* (check_children said so already) */
			continue;
		}
		key = obj_key(av, kind, ns, name);
		live = kop_hmap_get(&E.objs, key);
		fkey = join2("apply", key);
		if (live && live->prim == p && jv_identical(jv_copy(c), jv_copy(view_of(ctx, live)))) {
			/* Given back as it was seen: kept as it is. */
			kop_hmap_put(desired, key, &one);
			flight_forget(fkey);
			goto next;
		}
		{
			/* The comparison's memo key and the applied annotation: the
			 * object before stamping (known when rendered) and whom the
			 * stamp names. */
			unsigned char objdig[KOP_JSON_DIGEST_LEN];
			int m = -1;

			r = rendered_index(rdes, c, i);
			if (r < 0 && p->rview)
				m = rendered_match(rdes, c);
			if (r >= 0) {
				memcpy(objdig, p->rdig[r], KOP_JSON_DIGEST_LEN);
				status = p->rstat[r];
				if (!p->rview)
					full = jv_copy(c);	/* sync saw it whole */
			} else {
				if (m >= 0) {
					jv rf = jv_getpath(jv_copy(rendered_full(p, ctx)),
							   JV_ARRAY(jv_string("desired"), jv_number(m)));

					if (jv_get_kind(rf) != JV_KIND_OBJECT) {
						/* (ctx->rfail) what sync saw is not the whole object */
						jv_free(rf);
						kop_hmap_put(desired, key, &one);
						goto next;
					}
					full = jv_object_merge_recursive(rf, jv_copy(c));
				} else {
					full = jv_copy(c);
				}
				kop_program_object_digest(full, objdig);
				status = jv_object_has(jv_copy(full), kop_json_key("status"));
			}
			if (r >= 0)
				memcpy(d, p->radig[r], sizeof(d));
			else
				kop_program_applied_digest(objdig, p->obj->uid, d);
		}
		if (live && live->match_ok && !status && !memcmp(live->match, d, sizeof(d)) &&
		    !memcmp(live->match_sdig, live->sdig, sizeof(d))) {
			/* Seen equal before, and neither has changed since but for its status. */
			kop_hmap_put(desired, key, &one);
			flight_forget(fkey);
			if (r >= 0)
				hold[r] = 1;
			goto next;
		}
		if (!jv_is_valid(full)) {
			full = jv_getpath(jv_copy(rendered_full(p, ctx)), JV_ARRAY(jv_string("desired"), jv_number(r)));
			if (jv_get_kind(full) != JV_KIND_OBJECT) {
				/* (ctx->rfail) left as it is: still desired, not pruned */
				kop_hmap_put(desired, key, &one);
				goto next;
			}
		}
		full = kop_program_stamp_applied(kop_program_stamp(&E.prog, k->mapping, full, ctx->parent), d);
		{
			/* What does not map back could never be seen, compared or pruned. */
			char *back = kop_program_map(&E.prog, k->mapping, full, NULL);
			int ours = back && !strcmp(back, p->key);

			free(back);
			if (!ours) {
				/* (the first one named; the live object it stands for may
				 * be under another key: nothing is pruned this time) */
				if (!ctx->unmapped++)
					snprintf(ctx->unmapped_msg, sizeof(ctx->unmapped_msg),
						 "desired %s '%s%s%s' would not map back to it (another namespace than "
						 "an owner reference allows?)", kind, ns ? ns : "", ns ? "/" : "", name);
				goto next;
			}
		}
		kop_hmap_put(desired, key, &one);
		if (live && live_holds(ctx, live, full)) {
			live->match_ok = 1;
			memcpy(live->match, d, sizeof(d));
			memcpy(live->match_sdig, live->sdig, sizeof(d));
			flight_forget(fkey);
			if (r >= 0 && !status)	/* (one with a status is compared whole every time) */
				hold[r] = 1;
		} else {
			size_t tlen;
			char *text = kop_json_dump_len(full, &tlen);

			full = jv_invalid();	/* consumed */
			if (flight_check_text(p, fkey, text, tlen, live ? live->rv : "", now)) {
				flight_sent_object(p, fkey, d, r, text, tlen);
				emit_op_text("apply", p->key, text, tlen);
				n->applies++;
			}
			free(text);
		}
next:
		jv_free(full);
		jv_free(c);
		free(fkey);
		free(key);
	}
	jv_free(children);
	*held = 1;
	for (j = 0; j < p->nrdig; j++)
		if (!hold[j])
			*held = 0;
	free(hold);
}

/* Deletes what p owns, is of a child kind, and is no longer desired. */
static void prune(struct prim *p, struct kop_hmap *desired, int64_t now, struct counts *n)
{
	const char *puid = p->obj->uid;
	struct obj *o;

	for (o = p->children; o; o = o->next) {
		const char *uid = o->uid;
		char *fkey;
		jv sent;

		if (o->kind->role != KOP_ROLE_CHILD || kop_hmap_get(desired, o->key))
			continue;
		if (o->owner_uid && *puid && strcmp(o->owner_uid, puid))
			continue;	/* an earlier object of the same name owns it */
		fkey = join2("delete", o->key);
		if (o->deleting || !*uid) {
			free(fkey);
			continue;	/* going already */
		}
		sent = jv_string(uid);
		if (flight_check(p, fkey, sent, o->rv, now)) {
			jv line = op_line("delete", p->key);

			line = jv_object_set(line, kop_json_key("object"), ref_of(o));
			line = jv_object_set(line, kop_json_key("propagationPolicy"), jv_string("Background"));
			emit(line);
			n->deletes++;
		}
		jv_free(sent);
		free(fkey);
	}
}

/* Drops recorded failures of objects that are neither desired nor live any more. */
static void tidy_errors(struct prim *p, struct kop_hmap *desired)
{
	jv keys = jv_keys(jv_copy(p->errors));

	jv_array_foreach(keys, i, k) {
		const char *s = jv_string_value(k), *bar = strchr(s, '|');
		int keep = 1;

		if (bar && !strncmp(s, "apply|", 6))
			keep = kop_hmap_get(desired, bar + 1) != NULL;
		else if (bar && !strncmp(s, "delete|", 7))
			keep = kop_hmap_get(&E.objs, bar + 1) != NULL;
		if (!keep)
			p->errors = jv_object_delete(p->errors, jv_copy(k));
		jv_free(k);
	}
	jv_free(keys);
}

/* The flight of p's last status (p->status_sent) while it is on its way:
 * sent, not failed, not timed out, not yet seen back (parent_seen); else NULL. */
static struct flight *status_flight(struct prim *p, int64_t now)
{
	char *fkey = join2("status", p->key);
	struct flight *f = kop_hmap_get(&E.flights, fkey);

	free(fkey);
	if (!p->status_sent || !f || f->failed || now - f->at >= FLIGHT_TIMEOUT_MS)
		return NULL;
	return f;
}

/* Whether status (borrowed) is p's last status sent. */
static int status_is_sent(struct prim *p, jv status)
{
	char *text = kop_json_dump(jv_copy(status));
	int same = p->status_sent && !strcmp(text, p->status_sent);

	free(text);
	return same;
}

/* Which status the program saw (parent_seen). */
enum seen {
	SEEN_STORED,		/* the stored one, nothing of ours on its way */
	SEEN_CARRIED,		/* ours on its way */
	SEEN_FOREIGN		/* the stored one, someone else's, stored while ours was on its way */
};

/*
 * Writes the status when it differs from the stored one; 0 when it is not
 * written because the same is on its way. seen: what the program saw.
 */
static int write_status(struct prim *p, jv parent, jv status, enum seen seen, int64_t now, struct counts *n)
{
	jv live = jv_object_get(jv_copy(parent), kop_json_key("status"));
	char *fkey = join2("status", p->key);
	int sent = 1;

	if (jv_get_kind(live) == JV_KIND_INVALID)
		live = jv_null();
	if (jv_equal(jv_copy(status), jv_copy(live))) {
		flight_forget(fkey);
	} else if (seen == SEEN_CARRIED && status_is_sent(p, status)) {
		sent = 0;	/* on its way (an older one of ours landed first) */
	} else if (flight_check(p, fkey, status, p->obj->rv, now)) {
		jv obj = ref_object(parent, 1);

		obj = jv_object_set(obj, kop_json_key("status"), jv_copy(status));
		emit(jv_object_set(op_line("status", p->key), kop_json_key("object"), obj));
		n->statuses++;
		obj = jv_object_set(jv_copy(parent), kop_json_key("status"), jv_copy(status));
		update_aggs(p, obj);	/* counted from now on (update_aggs_seen) */
		jv_free(obj);
		if (seen == SEEN_CARRIED) {
			status_prev_push(p, p->status_sent);	/* an earlier one of ours, still on its way */
		} else if (seen == SEEN_FOREIGN) {
			/* Over someone else's status, stored meanwhile: ours sent before may still land after it. */
			free(p->status_prev[0]);
			p->status_prev[0] = kop_json_dump(jv_copy(live));
			status_prev_push(p, p->status_sent);
		} else {
			free(p->status_sent);
			status_prev_drop(p, p->nprev);
			status_prev_push(p, kop_json_dump(jv_copy(live)));	/* stored now */
		}
		p->status_sent = kop_json_dump(jv_copy(status));
	} else {
		sent = 0;
	}
	jv_free(status);
	jv_free(live);
	free(fkey);
	return sent;
}

static void write_events(struct prim *p, jv parent, jv events, struct counts *n)
{
	jv_array_foreach(events, i, ev) {
		jv involved;

		if (jv_get_kind(ev) != JV_KIND_OBJECT || !kop_json_cstr(ev, "reason")) {
			tool_logj(LOG_ERROR, jv_object_set(jv_object(), kop_json_key("primary"), jv_string(p->key)),
				  "primary '%s': event %d has no reason; skipped", p->key, i);
			jv_free(ev);
			continue;
		}
		if (!jv_object_has(jv_copy(ev), kop_json_key("type")))
			ev = jv_object_set(ev, kop_json_key("type"), jv_string("Normal"));
		if (!jv_object_has(jv_copy(ev), kop_json_key("involvedObject"))) {
			jv r = ref_object(parent, 1), m = jv_object_get(jv_copy(r), kop_json_key("metadata"));

			involved = jv_object_set(jv_object(), kop_json_key("apiVersion"),
						 jv_object_get(jv_copy(r), kop_json_key("apiVersion")));
			involved = jv_object_set(involved, kop_json_key("kind"), jv_object_get(r, kop_json_key("kind")));
			involved = jv_object_merge(involved, m);
			ev = jv_object_set(ev, kop_json_key("involvedObject"), involved);
		}
		emit(jv_object_set(op_line("event", p->key), kop_json_key("event"), ev));
		n->events++;
	}
	jv_free(events);
}

/* The part of a primary (consumed) that its render program gets. */
static jv render_parent(jv parent)
{
	jv meta = jv_object_get(jv_copy(parent), kop_json_key("metadata"));

	if (jv_get_kind(meta) == JV_KIND_OBJECT) {
		meta = jv_object_delete(meta, kop_json_key("resourceVersion"));
		meta = jv_object_delete(meta, kop_json_key("finalizers"));
		meta = jv_object_delete(meta, kop_json_key("managedFields"));
		parent = jv_object_set(parent, kop_json_key("metadata"), meta);
	} else {
		jv_free(meta);
	}
	if (jv_get_kind(parent) == JV_KIND_OBJECT)
		parent = jv_object_delete(parent, kop_json_key("status"));
	return parent;
}

/* The render answer (consumed) with each desired object projected by its
 * kind's `project`; jv_invalid() when no object changed. */
static jv render_view(jv out)
{
	jv des = jv_getpath(jv_copy(out), JV_ARRAY(jv_string("desired"))), view = jv_array();
	int changed = 0;

	if (jv_get_kind(des) != JV_KIND_ARRAY) {
		jv_free(des);
		jv_free(view);
		jv_free(out);
		return jv_invalid();
	}
	jv_array_foreach(des, i, c) {
		jv pc = project(jv_copy(c), 0);

		if (!jv_identical(jv_copy(pc), jv_copy(c)))
			changed = 1;
		jv_free(c);
		view = jv_array_append(view, pc);
	}
	jv_free(des);
	if (!changed) {
		jv_free(view);
		jv_free(out);
		return jv_invalid();
	}
	return jv_object_set(out, kop_json_key("desired"), view);
}

/* The render program's input for p but its .parent: .related and .settings. */
static jv render_input(void)
{
	jv in = jv_object_set(jv_object(), kop_json_key("related"), build_related());

	return jv_object_set(in, kop_json_key("settings"), jv_copy(E.prog.settings));
}

/* in (consumed) with p's .parent: the primary whole (sync's .parent may lack its spec, p->obj->vtext). */
static jv render_input_parent(struct prim *p, struct rctx *ctx, jv in)
{
	return jv_object_set(in, kop_json_key("parent"),
			     render_parent(p->obj->vtext ? parse_obj(p->obj) : jv_copy(ctx->parent)));
}

/* The digests of the objects of out's .desired (borrowed) in *dig, which of
 * them have a status in *stat (both allocated, NULL when none): their number. */
static int desired_digests(jv out, unsigned char (**dig)[KOP_JSON_DIGEST_LEN], unsigned char **stat)
{
	jv des = jv_getpath(jv_copy(out), JV_ARRAY(jv_string("desired")));
	int n = jv_get_kind(des) == JV_KIND_ARRAY ? jv_array_length(jv_copy(des)) : 0;

	*dig = NULL;
	*stat = NULL;
	if (n > 0) {
		*dig = kop_calloc((size_t)n, sizeof(**dig));
		*stat = kop_calloc((size_t)n, 1);
		jv_array_foreach(des, i, c) {
			kop_program_object_digest(c, (*dig)[i]);
			(*stat)[i] = jv_get_kind(c) == JV_KIND_OBJECT && jv_object_has(jv_copy(c), kop_json_key("status"));
			jv_free(c);
		}
	}
	jv_free(des);
	return n;
}

/* Runs the render program on in (consumed): its answer, directives resolved,
 * the time spent added to *us_jq and *us_fn; jv_invalid() with err. */
static jv render_run(jv in, int64_t *us_jq, int64_t *us_fn, char *err)
{
	int64_t t0 = kop_mono_us(), t1;
	jv out;

	if (kop_jq_run1(E.prog.render, in, &out, err) < 0)
		return jv_invalid();
	t1 = kop_mono_us();
	*us_jq += t1 - t0;
	if (kop_fn_resolve(out, &out, err) < 0) {
		if (jv_is_valid(out))
			jv_free(out);
		return jv_invalid();
	}
	*us_fn += kop_mono_us() - t1;
	return out;
}

/* Keeps the render answer out (borrowed) in p->rendered, deflated (as jv the
 * desired children of an IoT instance take ~190 KB, as compact JSON ~34 KB,
 * deflated a few KB): 0 if it could not be. */
static int render_store(struct prim *p, jv out)
{
	char *text = kop_json_dump_len(jv_copy(out), &p->rendered_len);

	free(p->rendered);
	p->rendered = NULL;
	p->rendered_zlen = deflate_text(text, p->rendered_len, &p->rendered, NULL);
	free(text);
	return p->rendered_zlen != 0;
}

/*
 * The render program's answer for p (README, "Writing a program": render),
 * directives resolved, as sync sees it (its desired objects projected):
 * computed again only when its input (the primary without status,
 * resourceVersion and finalizers, .related, .settings) changed since the
 * last reconcile of p. What sync sees of it stays in p->rview; the answer
 * as computed, in ctx->rfull for this reconcile and in p->rendered for
 * later ones while they may need it (render_keep). *us_jq and *us_fn
 * receive the time spent (microseconds), *cached whether the stored answer
 * was used. jv_invalid() with err.
 */
static jv render(struct prim *p, struct rctx *ctx, int64_t *us_jq, int64_t *us_fn, int *cached, char *err)
{
	unsigned char d[KOP_JSON_DIGEST_LEN];
	jv in, out, view;

	*us_jq = *us_fn = 0;
	*cached = 0;
	/* The key: the parent's part (digested as it arrived) and the rest. */
	in = render_input();
	{
		unsigned char both[2 * KOP_JSON_DIGEST_LEN];

		memcpy(both, p->pdig, KOP_JSON_DIGEST_LEN);
		kop_json_digest(in, both + KOP_JSON_DIGEST_LEN);
		SHA256(both, sizeof(both), d);
	}
	if (p->render_valid && !memcmp(d, p->render_key, sizeof(d))) {
		out = p->rview ? kop_json_read(p->rview, strlen(p->rview))
			       : inflate_parse(p->rendered, p->rendered_zlen, p->rendered_len, NULL);
		if (jv_is_valid(out)) {
			jv_free(in);
			*cached = 1;
			if (!p->rview)
				ctx->rfull = jv_copy(out);
			return out;
		}
		jv_free(out);	/* cannot happen: computed again below */
	}
	p->render_valid = 0;
	free(p->rendered);
	p->rendered = NULL;
	free(p->rview);
	p->rview = NULL;
	free(p->rdig);
	p->rdig = NULL;
	free(p->rstat);
	p->rstat = NULL;
	free(p->radig);
	p->radig = NULL;
	p->nrdig = 0;
	out = render_run(render_input_parent(p, ctx, in), us_jq, us_fn, err);
	if (!jv_is_valid(out))
		return out;
	p->nrdig = desired_digests(out, &p->rdig, &p->rstat);
	if (p->nrdig) {
		int i;

		p->radig = kop_calloc((size_t)p->nrdig, sizeof(*p->radig));
		for (i = 0; i < p->nrdig; i++)
			kop_program_applied_digest(p->rdig[i], p->obj->uid, p->radig[i]);
	}
	memcpy(p->render_key, d, sizeof(d));
	ctx->rfull = jv_copy(out);
	/* What sync reads of it, small enough to keep as it is. */
	view = render_view(jv_copy(out));
	if (!jv_is_valid(view)) {
		/* Sync sees the answer as computed: that is what is kept. */
		jv_free(view);
		p->render_valid = render_store(p, out);
		return out;
	}
	p->rview = kop_json_dump(jv_copy(view));
	p->render_valid = 1;
	jv_free(out);
	return view;
}

/* Whether out (borrowed) has the desired objects of p's last answer (p->rdig). */
static int same_desired(struct prim *p, jv out)
{
	unsigned char (*dig)[KOP_JSON_DIGEST_LEN], *stat;
	int n = desired_digests(out, &dig, &stat);
	int same = n == p->nrdig && (!n || !memcmp(dig, p->rdig, (size_t)n * sizeof(*dig)));

	free(dig);
	free(stat);
	return same;
}

/*
 * The render answer as computed (borrowed from ctx): parsed once per
 * reconcile, when needed; computed again from the same input (the render
 * key has not changed, or render() would have) when not kept. When it
 * cannot be had (the program fails, or answers otherwise, on the same
 * input: it reads something else), jv_invalid() and ctx->rfail: the
 * children that need it are left as they are, and the reconcile is tried
 * again, rendering anew (reconcile_parsed).
 */
static jv rendered_full(struct prim *p, struct rctx *ctx)
{
	char err[KOP_ERRLEN] = "";

	if (jv_is_valid(ctx->rfull) || !p->render_valid || ctx->rfail)
		return ctx->rfull;
	if (p->rendered) {
		ctx->rfull = inflate_parse(p->rendered, p->rendered_zlen, p->rendered_len, NULL);
		return ctx->rfull;
	}
	ctx->rfull = render_run(render_input_parent(p, ctx, render_input()), &ctx->rerender_jq, &ctx->rerender_fn, err);
	if (!jv_is_valid(ctx->rfull)) {
		ctx->rfail = 1;
		snprintf(ctx->rfail_msg, sizeof(ctx->rfail_msg), "render program failed on an input it rendered before: %s",
			 err);
	} else if (!same_desired(p, ctx->rfull)) {
		jv_free(ctx->rfull);
		ctx->rfull = jv_invalid();
		ctx->rfail = 1;
		snprintf(ctx->rfail_msg, sizeof(ctx->rfail_msg), "%s",
			 "render program answered otherwise on an input it rendered before (does it read more than its input?)");
	}
	return ctx->rfull;
}

/*
 * After a reconcile of p: its render answer as computed is kept (stored if
 * it was computed now) while a later reconcile may read it whole (a child
 * not yet held by its live object, an apply on its way, one sync changed),
 * and dropped once every rendered child is held by its live object (held):
 * then the comparisons are remembered (struct obj's match) and sync needs
 * only p->rview. Most instances are at rest: this is most of the memory a
 * render took.
 */
static void render_keep(struct prim *p, struct rctx *ctx, int held)
{
	if (!p->render_valid || !p->rview)
		return;		/* without a view of its own, p->rendered is what sync sees */
	if (held) {
		free(p->rendered);
		p->rendered = NULL;
	} else if (!p->rendered && jv_is_valid(ctx->rfull)) {
		render_store(p, ctx->rfull);	/* if it cannot be, computed again when needed */
	}
}

/*
 * Whether an apply written for the live child o is on its way still: sent,
 * not failed, not timed out, and the live object does not hold it yet (a
 * write of someone else's, a controller's status, may come first). One the
 * live object holds is no longer in flight, its comparison remembered for
 * apply_children.
 */
static int apply_pending(struct prim *p, struct rctx *ctx, struct obj *o, int64_t now)
{
	char *fkey = join2("apply", o->key);
	struct flight *f = kop_hmap_get(&E.flights, fkey);
	int pending = 0;
	jv sent;

	if (!f || f->failed || !f->has_obj || now - f->at >= FLIGHT_TIMEOUT_MS)
		goto out;
	if (!strcmp(f->live_rv, o->rv)) {
		pending = 1;	/* not changed since */
		goto out;
	}
	if (o->match_ok && !memcmp(o->match, f->memo, sizeof(f->memo)) && !memcmp(o->match_sdig, o->sdig, sizeof(o->sdig))) {
		flight_forget(fkey);
		goto out;
	}
	if (f->rindex < 0) {
		sent = inflate_parse(f->ztext, f->zlen, f->len, NULL);
	} else if (p->render_valid && !memcmp(f->rkey, p->render_key, sizeof(f->rkey))) {
		sent = jv_getpath(jv_copy(rendered_full(p, ctx)), JV_ARRAY(jv_string("desired"), jv_number(f->rindex)));
		if (jv_get_kind(sent) == JV_KIND_OBJECT)	/* as apply_children stamped it */
			sent = kop_program_stamp_applied(kop_program_stamp(&E.prog, o->kind->mapping, sent, ctx->parent),
							 f->memo);
	} else {
		pending = 1;	/* rendered anew since: this reconcile decides again */
		goto out;
	}
	if (jv_get_kind(sent) != JV_KIND_OBJECT) {
		jv_free(sent);	/* ctx->rfail: unknown, so not landed */
		pending = ctx->rfail;
		goto out;
	}
	if (live_holds(ctx, o, sent)) {
		o->match_ok = 1;
		memcpy(o->match, f->memo, sizeof(o->match));
		memcpy(o->match_sdig, o->sdig, sizeof(o->match_sdig));
		flight_forget(fkey);
	} else {
		pending = 1;
	}
	jv_free(sent);
out:
	free(fkey);
	return pending;
}

/* .pending: the live children with an apply on its way, keyed as in .children. */
static jv build_pending(struct prim *p, struct rctx *ctx, int64_t now)
{
	jv r = jv_object();
	struct obj *o;

	if (!E.flights.len)
		return r;
	for (o = p->children; o; o = o->next) {
		if (o->kind->role != KOP_ROLE_CHILD || !apply_pending(p, ctx, o, now))
			continue;
		r = jv_setpath(r, JV_ARRAY(jv_string(o->kind->key), child_slot(p, o)), jv_true());
	}
	return r;
}

/* Which of p->status_prev the status live (borrowed) is, or -1. */
static int status_prev_find(struct prim *p, jv live)
{
	int i, found = -1;

	for (i = 0; i < p->nprev && found < 0; i++) {	/* the oldest: none that may still land is dropped */
		jv v = kop_json_read(p->status_prev[i], strlen(p->status_prev[i]));

		if (jv_equal(v, jv_copy(live)))
			found = i;
	}
	return found;
}

/*
 * The primary as the program sees it (parent borrowed), and in *seen which
 * status: while a status written for it is in flight (status_flight), that
 * status (SEEN_CARRIED), so that what the program derives from the stored one (an event on
 * a phase change, a condition's transition time) is not derived twice.
 * Until the stored status is that one, for as long as it is one the stored
 * status may be meanwhile (p->status_prev: an older one of ours landing,
 * kstatus writes them in order): another is someone else's, and what the
 * program derives from it is written again. A reconcile is due when the
 * flight times out, in case it never shows.
 */
static jv parent_seen(struct prim *p, jv parent, enum seen *seen, int64_t now)
{
	struct flight *f = status_flight(p, now);
	jv st, live;

	*seen = SEEN_STORED;
	if (!f) {
		status_prev_drop(p, p->nprev);
		return jv_copy(parent);
	}
	st = kop_json_read(p->status_sent, strlen(p->status_sent));
	if (!jv_is_valid(st)) {	/* cannot happen: we wrote it */
		jv_free(st);
		return jv_copy(parent);
	}
	live = jv_object_get(jv_copy(parent), kop_json_key("status"));
	if (jv_get_kind(live) == JV_KIND_INVALID)
		live = jv_null();
	if (jv_equal(jv_copy(st), jv_copy(live))) {
		char *fkey = join2("status", p->key);

		flight_forget(fkey);	/* seen back */
		free(fkey);
		status_prev_drop(p, p->nprev);
		jv_free(st);
		jv_free(live);
		return jv_copy(parent);
	}
	if (strcmp(f->live_rv, p->obj->rv)) {
		/* The primary changed since: with a status it may be meanwhile? */
		int i = status_prev_find(p, live);

		if (i < 0) {
			jv_free(st);
			jv_free(live);
			*seen = SEEN_FOREIGN;
			return jv_copy(parent);
		}
		status_prev_drop(p, i);	/* (those before it will not be stored any more) */
	}
	jv_free(live);
	*seen = SEEN_CARRIED;
	schedule(p, f->at + FLIGHT_TIMEOUT_MS);
	return jv_object_set(jv_copy(parent), kop_json_key("status"), st);
}

/* One reconcile of p, whose parsed object is ctx->parent. */
static void reconcile_parsed(struct prim *p, struct rctx *ctx, int64_t now)
{
	struct counts n = { 0, 0, 0, 0, 0 };
	int finalizing = 0, index = -1, status_sent = 1;
	enum seen seen = SEEN_STORED;
	jv in, out, v, parent = ctx->parent, rdes;
	char err[KOP_ERRLEN], ts[40];
	struct kop_hmap desired = KOP_HMAP_INIT;
	int64_t t0 = kop_mono_us(), t1, t2, t3, render_jq = 0, render_fn = 0;	/* microseconds */
	int render_cached = 0, held = 0;

	if (p->obj->deleting) {
		/* Being deleted: ours to finalize only while our finalizer holds it. */
		if (!E.prog.finalizer || !has_finalizer(parent, E.prog.finalizer, &index))
			return;
		finalizing = 1;
	} else if (E.prog.finalizer && !has_finalizer(parent, E.prog.finalizer, NULL)) {
		/* Nothing else until the finalizer is stored: a primary deleted
		 * before it lands would leave children to nobody (the patch
		 * fails, applies sent with it succeed), and a status written
		 * meanwhile would change the resourceVersion the patch tests.
		 * Its arrival reconciles again. */
		add_finalizer(p, parent, now, &n);
		log_debug("primary '%s': finalizer added; reconciled once it is stored", p->key);
		return;
	}

	rdes = jv_array();	/* the rendered .desired as sync sees them */
	in = jv_object();
	in = jv_object_set(in, kop_json_key("parent"), parent_seen(p, parent, &seen, now));
	v = jv_object_get(jv_copy(in), kop_json_key("parent"));
	update_aggs(p, v);
	jv_free(v);
	in = jv_object_set(in, kop_json_key("children"), build_children(p, ctx));
	in = jv_object_set(in, kop_json_key("related"), build_related());
	in = jv_object_set(in, kop_json_key("settings"), jv_copy(E.prog.settings));
	in = jv_object_set(in, kop_json_key("aggregates"), build_aggs());
	in = jv_object_set(in, kop_json_key("errors"), errors_list(p));
	in = jv_object_set(in, kop_json_key("finalizing"), jv_bool(finalizing));
	in = jv_object_set(in, kop_json_key("now"),
			   jv_string(E.now ? E.now : kop_time_rfc3339(ts, sizeof(ts), (time_t)(kop_wall_ms() / 1000))));
	E.reconciles++;
	if (E.prog.render) {
		jv r = render(p, ctx, &render_jq, &render_fn, &render_cached, err);

		if (!jv_is_valid(r)) {
			jv_free(in);
			jv_free(rdes);
			program_failed(p, err, now);
			return;
		}
		jv_free(rdes);
		rdes = jv_getpath(jv_copy(r), JV_ARRAY(jv_string("desired")));
		if (jv_get_kind(rdes) != JV_KIND_ARRAY || jv_array_length(jv_copy(rdes)) != p->nrdig) {
			jv_free(rdes);
			rdes = jv_array();
		}
		in = jv_object_set(in, kop_json_key("rendered"), r);
	}
	in = jv_object_set(in, kop_json_key("pending"), build_pending(p, ctx, now));
	t1 = kop_mono_us();
	if (kop_jq_run1(E.prog.sync, in, &out, err) < 0) {
		jv_free(rdes);
		program_failed(p, err, now);
		return;
	}
	t2 = kop_mono_us();
	if (check_output(out, err) < 0 || resolve_output(out, rdes, &out, err) < 0 || check_children(out, err) < 0) {
		if (jv_is_valid(out))
			jv_free(out);
		jv_free(rdes);
		program_failed(p, err, now);
		return;
	}

	t3 = kop_mono_us();
	count_reconcile(jv_get_kind(jv_getpath(jv_copy(out), JV_ARRAY(jv_string("resyncAfterSeconds")))) == JV_KIND_NUMBER
				? "requeue_after" : "success");
	v = jv_object_get(jv_copy(out), kop_json_key("children"));
	if (jv_get_kind(v) == JV_KIND_ARRAY)
		apply_children(p, ctx, v, rdes, &desired, now, &n, &held);
	else
		jv_free(v);
	if (E.prog.render)
		render_keep(p, ctx, held && !ctx->rfail);
	if (ctx->rfail) {
		/* Rendered anew next time, after the backoff of a program error. */
		p->render_valid = 0;
		retry_after_error(p, "primary ", ctx->rfail_msg, "; children that needed it left as they are", now);
	}
	if (ctx->unmapped)
		retry_after_error(p, "primary ", ctx->unmapped_msg, "; not applied, nothing pruned", now);
	else
		prune(p, &desired, now, &n);
	tidy_errors(p, &desired);

	v = jv_object_get(jv_copy(out), kop_json_key("status"));
	if (jv_get_kind(v) == JV_KIND_OBJECT)
		status_sent = write_status(p, parent, v, seen, now, &n);
	else
		jv_free(v);

	/* Events that came with a status still in flight were sent with it already. */
	v = jv_object_get(jv_copy(out), kop_json_key("events"));
	if (jv_get_kind(v) == JV_KIND_ARRAY && status_sent)
		write_events(p, parent, v, &n);
	else
		jv_free(v);

	v = jv_object_get(jv_copy(out), kop_json_key("finalized"));
	if (finalizing && jv_get_kind(v) == JV_KIND_TRUE)
		remove_finalizer(p, parent, index, now, &n);
	jv_free(v);

	v = jv_object_get(jv_copy(out), kop_json_key("resyncAfterSeconds"));
	if (jv_get_kind(v) == JV_KIND_NUMBER && jv_number_value(v) > 0) {
		double s = jv_number_value(v);

		/* (at least a second: a program answering 1e-9 would spin) */
		schedule(p, now + (int64_t)(s > 1e9 ? 1e12 : s < 1 ? 1000 : s * 1000));
	}
	jv_free(v);
	jv_free(out);
	jv_free(rdes);
	kop_hmap_release(&desired, NULL);
	if (!jv_object_length(jv_copy(p->errors)) && !ctx->rfail && !ctx->unmapped)
		kop_backoff_reset(&p->backoff);

	if (log_enabled(LOG_DEBUG)) {
		jv f = jv_object_set(jv_object(), kop_json_key("primary"), jv_string(p->key));

		f = jv_object_set(f, kop_json_key("ms"), jv_number((double)(kop_mono_us() - t0) / 1000));
		f = jv_object_set(f, kop_json_key("programMs"),
				  jv_number((double)(t2 - t1 + render_jq + ctx->rerender_jq) / 1000));
		f = jv_object_set(f, kop_json_key("functionsMs"),
				  jv_number((double)(t3 - t2 + render_fn + ctx->rerender_fn) / 1000));
		if (E.prog.render) {
			f = jv_object_set(f, kop_json_key("renderCached"), jv_bool(render_cached));
			f = jv_object_set(f, kop_json_key("renderKept"), jv_bool(p->rendered != NULL));
		}
		f = jv_object_set(f, kop_json_key("applies"), jv_number(n.applies));
		f = jv_object_set(f, kop_json_key("deletes"), jv_number(n.deletes));
		f = jv_object_set(f, kop_json_key("patches"), jv_number(n.patches));
		f = jv_object_set(f, kop_json_key("statuses"), jv_number(n.statuses));
		f = jv_object_set(f, kop_json_key("events"), jv_number(n.events));
		f = jv_object_set(f, kop_json_key("finalizing"), jv_bool(finalizing));
		tool_logj(LOG_DEBUG, f, "reconciled '%s'", p->key);
	}
}

/*
 * The watchdog: jq 1.6 cannot be interrupted, so a program that never ends
 * holds the one reconcile loop. A thread says so, naming the primary, after
 * --watchdog and then at doubling intervals, instead of a silent hang.
 */
static struct {
	pthread_mutex_t mu;
	char key[512];		/* the primary being reconciled */
	int64_t since;		/* monotonic ms; 0 = none */
	long first_ms;		/* --watchdog */
} W = { PTHREAD_MUTEX_INITIALIZER, "", 0, 10000 };

static void watchdog_mark(const char *key)
{
	pthread_mutex_lock(&W.mu);
	if (key)
		snprintf(W.key, sizeof(W.key), "%s", key);
	W.since = key ? kop_mono_ms() : 0;
	pthread_mutex_unlock(&W.mu);
}

static void *watchdog(void *arg)
{
	int64_t seen = 0, next = W.first_ms;
	char key[sizeof(W.key)];
	struct timespec tick = { 0, 100 * 1000000L };

	(void)arg;
	for (;;) {
		int64_t since, now;

		nanosleep(&tick, NULL);
		now = kop_mono_ms();
		pthread_mutex_lock(&W.mu);
		since = W.since;
		memcpy(key, W.key, sizeof(key));
		pthread_mutex_unlock(&W.mu);
		if (since != seen) {
			seen = since;
			next = W.first_ms;
		}
		if (since && now - since >= next) {
			tool_logj(LOG_ERROR,
				  JV_OBJECT(jv_string("primary"), jv_string(key), jv_string("ms"),
					    jv_number((double)(now - since))),
				  "primary '%s': its reconcile has run for %.1f s (a program that never ends?); no "
				  "other primary is reconciled meanwhile", key, (double)(now - since) / 1000);
			next *= 2;
		}
	}
	return NULL;
}

/* (never inlined: bench/ireconcile.sh counts the instructions of reconciles
 * with callgrind's --toggle-collect=reconcile) */
static __attribute__((noinline)) void reconcile(struct prim *p, int64_t now)
{
	struct rctx ctx;

	p->due = 0;
	if (!p->obj) {
		if (!p->children) {
			kop_hmap_remove(&E.prims, p->key);
			prim_free(p);
		}
		return;
	}
	/* With a render program, sync gets the primary without its spec (vtext). */
	ctx.parent = p->obj->vtext ? kop_json_read(p->obj->vtext, p->obj->vlen) : parse_obj(p->obj);
	kop_hmap_init(&ctx.live);
	kop_hmap_init(&ctx.view);
	ctx.rfull = jv_invalid();
	ctx.rerender_jq = ctx.rerender_fn = 0;
	ctx.rfail = 0;
	ctx.rfail_msg[0] = '\0';
	ctx.unmapped = 0;
	ctx.unmapped_msg[0] = '\0';
	watchdog_mark(p->key);
	reconcile_parsed(p, &ctx, now);
	watchdog_mark(NULL);
	jv_free(ctx.parent);
	jv_free(ctx.rfull);
	kop_hmap_release(&ctx.live, parsed_free);
	kop_hmap_release(&ctx.view, parsed_free);
}
/* ---- feedback ------------------------------------------------------------------------------ */

static void handle_result(jv r, size_t lineno)
{
	const char *op = kop_json_cstr(r, "op"), *what = kop_json_cstr(r, "for"), *pkey = kop_json_cstr(r, "primary");
	jv ref, ok;
	struct prim *p;
	char *okey = NULL, *fkey;
	struct flight *f;

	if (!op || strcmp(op, "result")) {
		jv_free(r);
		return;	/* anything else passes by */
	}
	if (!what || !pkey) {
		log_warn("feedback line %zu: a result without \"for\" or \"primary\"; skipped", lineno);
		jv_free(r);
		return;
	}
	ref = jv_object_get(jv_copy(r), kop_json_key("ref"));
	ok = jv_object_get(jv_copy(r), kop_json_key("ok"));
	p = prim_get(pkey, 0);
	if (!strcmp(what, "event")) {
		if (jv_get_kind(ok) != JV_KIND_TRUE)
			log_warn("unable to record an event for '%s': %s", pkey,
				 kop_json_cstr(r, "message") ? kop_json_cstr(r, "message") : "(no message)");
		goto out;
	}
	if (!p)
		goto out;
	if (!strcmp(what, "status")) {
		fkey = join2("status", p->key);
	} else {
		const char *av = kop_json_cstr(ref, "apiVersion"), *kind = kop_json_cstr(ref, "kind");
		const char *ns = kop_json_cstr(ref, "namespace"), *name = kop_json_cstr(ref, "name");

		if (!av || !kind || !name) {
			log_warn("feedback line %zu: a result without \"ref\"; skipped", lineno);
			goto out;
		}
		okey = obj_key(av, kind, ns, name);
		fkey = join2(what, okey);
	}
	f = kop_hmap_get(&E.flights, fkey);
	if (jv_get_kind(ok) == JV_KIND_TRUE) {
		if (jv_object_has(jv_copy(p->errors), kop_json_key(fkey))) {
			p->errors = jv_object_delete(p->errors, kop_json_key(fkey));
			enqueue(p);	/* the program may want to clear what it reported */
		}
		if (!jv_object_length(jv_copy(p->errors)))
			kop_backoff_reset(&p->backoff);
	} else {
		jv e = jv_object_set(jv_object(), kop_json_key("op"), jv_string(what));
		static const char *const fields[] = { "code", "reason", "message" };
		size_t i;
		int64_t now = kop_mono_ms();

		e = jv_object_set(e, kop_json_key("ref"), jv_copy(ref));
		for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
			jv x = jv_object_get(jv_copy(r), kop_json_key(fields[i]));

			e = jv_object_set(e, kop_json_key(fields[i]), jv_is_valid(x) ? x : jv_null());
		}
		p->errors = jv_object_set(p->errors, kop_json_key(fkey), e);
		if (f) {
			f->failed = 1;
			f->retry_at = now + kop_backoff_next(&p->backoff);
			schedule(p, f->retry_at);
		}
		enqueue(p);
	}
	free(fkey);
out:
	free(okey);
	jv_free(ref);
	jv_free(ok);
	jv_free(r);
}

static void drop_result(jv r, size_t lineno)
{
	(void)lineno;
	jv_free(r);
}

/* ---- reading ----------------------------------------------------------------------------- */

static void reader_init(struct reader *rd, const char *name, int fd)
{
	memset(rd, 0, sizeof(*rd));
	rd->name = name;
	rd->fd = fd;
}

static void reader_release(struct reader *rd)
{
	kop_buf_release(&rd->buf);
	kop_buf_release(&rd->acc);
}

/* Parses text into values handed to fn; a malformed one is logged with its line. */
static void parse_values(struct reader *rd, const char *text, size_t len, size_t lineno,
			 void (*fn)(jv, size_t))
{
	const char *nul = memchr(text, 0, len);
	jv_parser *parser;
	jv v;

	if (nul) {	/* (jq's parser would make something of it: "a\0b" gave three values) */
		log_warn("%sline %zu, column %zu: a NUL byte, which JSON text cannot hold; skipped", rd->name, lineno,
			 (size_t)(nul - text) + 1);
		return;
	}
	parser = jv_parser_new(0);
	jv_parser_set_buf(parser, text, (int)len, 0);
	while (jv_is_valid(v = jv_parser_next(parser)))
		fn(v, lineno);
	if (jv_invalid_has_msg(jv_copy(v))) {
		jv msg = jv_invalid_get_msg(v);
		char m[KOP_ERRLEN];

		/* (jq counts from the first line it was given: one line, or a kubectl -o json value) */
		log_warn("%s%s; skipped", rd->name, kop_json_parser_error(jv_string_value(msg), text, len, lineno, m,
									  sizeof(m)));
		jv_free(msg);
	} else {
		jv_free(v);
	}
	jv_parser_free(parser);
}

static void reader_line(struct reader *rd, const char *line, size_t len, void (*fn)(jv, size_t))
{
	size_t no = ++rd->lineno;

	if (len && line[len - 1] == '\r')
		len--;
	if (rd->in_multi) {
		kop_buf_add(&rd->acc, line, len);
		kop_buf_add(&rd->acc, "\n", 1);
		if (len == 1 && line[0] == '}') {
			rd->in_multi = 0;
			parse_values(rd, rd->acc.buf, rd->acc.len, rd->acc_line, fn);
			kop_buf_reset(&rd->acc);
		} else if (rd->acc.len > MAX_LINE) {
			log_warn("%sline %zu: a value longer than %u bytes; skipped", rd->name, rd->acc_line, MAX_LINE);
			rd->in_multi = 0;
			kop_buf_release(&rd->acc);
		}
		return;
	}
	if (len == 1 && line[0] == '{') {
		/* kubectl -o json prints each event over many lines, from "{" to "}". */
		rd->in_multi = 1;
		rd->acc_line = no;
		kop_buf_reset(&rd->acc);
		kop_buf_add(&rd->acc, "{\n", 2);
		return;
	}
	parse_values(rd, line, len, no, fn);
}

/* Consumes the complete lines in the buffer (and the last one at EOF). */
static void reader_drain(struct reader *rd, void (*fn)(jv, size_t))
{
	for (;;) {
		char *base = rd->buf.buf + rd->start, *nl;
		size_t avail = rd->buf.len - rd->start;

		nl = avail ? memchr(base, '\n', avail) : NULL;
		if (!nl) {
			if (rd->eof && avail) {
				if (!rd->skipping)
					reader_line(rd, base, avail, fn);
				rd->start = rd->buf.len;
			} else if (avail > MAX_LINE && !rd->skipping) {
				log_warn("%sline %zu: longer than %u bytes; skipped", rd->name, rd->lineno + 1, MAX_LINE);
				rd->skipping = 1;
				rd->lineno++;
				rd->start = rd->buf.len;
			} else if (rd->skipping) {
				rd->start = rd->buf.len;
			}
			if (rd->eof && rd->in_multi) {
				log_warn("%sline %zu: a value not closed before the end; skipped", rd->name,
					 rd->acc_line);
				rd->in_multi = 0;
			}
			break;
		}
		if (rd->skipping)
			rd->skipping = 0;
		else
			reader_line(rd, base, (size_t)(nl - base), fn);
		rd->start += (size_t)(nl - base) + 1;
	}
	if (rd->start == rd->buf.len || rd->start > (1u << 20)) {
		kop_buf_drop(&rd->buf, rd->start);
		rd->start = 0;
	}
}

/* One read(2): >0 bytes, 0 EOF (eof set), -1 nothing now or an error (logged). */
static ssize_t reader_fill(struct reader *rd)
{
	ssize_t n;

	kop_buf_grow(&rd->buf, 65536);
	do
		n = read(rd->fd, rd->buf.buf + rd->buf.len, rd->buf.cap - rd->buf.len - 1);
	while (n < 0 && errno == EINTR);
	if (n > 0) {
		rd->buf.len += (size_t)n;
		rd->buf.buf[rd->buf.len] = 0;
	} else if (n == 0) {
		rd->eof = 1;
	} else if (errno != EAGAIN && errno != EWOULDBLOCK) {
		log_error("unable to read %s: %s", rd->name[0] ? rd->name : "stdin", strerror(errno));
		rd->eof = 1;
		if (!rd->name[0])
			E.read_failed = 1;
	}
	return n;
}

/* ---- main loop ---------------------------------------------------------------------------- */

static void fire_timers(int64_t now)
{
	size_t it = 0;
	void *v;

	while (kop_hmap_next(&E.prims, &it, NULL, &v)) {
		struct prim *p = v;

		if (p->due && p->due <= now) {
			p->due = 0;
			enqueue(p);
		}
	}
}

static int next_timeout(int64_t now)
{
	size_t it = 0;
	void *v;
	int64_t min = 0;

	while (kop_hmap_next(&E.prims, &it, NULL, &v)) {
		struct prim *p = v;

		if (p->due && (!min || p->due < min))
			min = p->due;
	}
	if (!min)
		return -1;
	if (min <= now)
		return 0;
	return min - now > 3600000 ? 3600000 : (int)(min - now);
}

/* One log line of counters (--stats-interval), for the supervisor's metrics. */
static void log_stats(int level)
{
	jv f = jv_object();
	size_t queued = 0;
	struct prim *p;

	for (p = E.qhead; p; p = p->qnext)
		queued++;
	f = jv_object_set(f, kop_json_key("reconciles"), jv_number((double)E.reconciles));
	f = jv_object_set(f, kop_json_key("programErrors"), jv_number((double)E.errors));
	f = jv_object_set(f, kop_json_key("queue"), jv_number((double)queued));
	f = jv_object_set(f, kop_json_key("primaries"), jv_number((double)E.prims.len));
	f = jv_object_set(f, kop_json_key("objects"), jv_number((double)E.objs.len));
	f = jv_object_set(f, kop_json_key("inFlight"), jv_number((double)E.flights.len));
	f = jv_object_set(f, kop_json_key("synced"), jv_bool(E.synced));
	tool_logj(level, f, "stats");
}

/*
 * Reconciles what is queued, until the output backs up or 100 ms have gone
 * by: then the main loop reads the feedback and stdin before going on.
 */
static void drain_queue(void)
{
	int64_t until = kop_mono_ms() + 100;
	char labels[256];
	size_t queued = 0;
	struct prim *q;

	for (q = E.qhead; q; q = q->qnext)
		queued++;
	snprintf(labels, sizeof(labels), "name=%s", E.prog.name);
	tool_metric_set("workqueue_depth", labels, (double)queued);

	while (E.qhead && out_pending() <= OUT_HIGH && kop_mono_ms() < until) {
		struct prim *p = E.qhead;

		E.qhead = p->qnext;
		if (!E.qhead)
			E.qtail = NULL;
		p->queued = 0;
		p->qnext = NULL;
		reconcile(p, kop_mono_ms());
	}
	for (queued = 0, q = E.qhead; q; q = q->qnext)
		queued++;
	tool_metric_set("workqueue_depth", labels, (double)queued);
}

static int open_feedback(const char *path, int *keep)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		die(KOP_EXIT_TEMP, "unable to open '%s': %s", path, strerror(errno));
	if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
		/* Our own writer keeps the FIFO from reporting EOF when a stage restarts. */
		*keep = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	}
	return fd;
}

static void run(const char *feedback, int once)
{
	struct reader in, fb;
	int fbfd = -1, keep = -1;
	struct stat st;

	if (fstat(1, &st) == 0 && !S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode))
		out_chunk = (size_t)-1;	/* a file or a terminal: writes do not block for long */
	reader_init(&in, "", 0);
	if (feedback) {
		fbfd = open_feedback(feedback, &keep);
		reader_init(&fb, "feedback ", fbfd);
	}
	for (;;) {
		struct pollfd pfd[3];
		int nfd = 0, timeout, r, ifd = -1, ffd = -1, ofd = -1;
		/* The end of the input (or --once after the first pass): what is queued, then exit. */
		int ending = in.eof || (once && E.synced);
		int64_t now = kop_mono_ms();

		if (!ending)
			fire_timers(now);
		if (in.eof && !E.synced) {
			E.synced = 1;	/* a recorded file: its end ends the initial state */
			enqueue_all();
		}
		if (E.synced)
			drain_queue();
		ending = in.eof || (once && E.synced);
		if (ending && !E.qhead && !out_pending())
			break;

		now = kop_mono_ms();
		if (E.qhead && out_pending() <= OUT_HIGH)
			timeout = 0;
		else if (ending)
			timeout = -1;	/* only the output is left to write */
		else
			timeout = E.synced ? next_timeout(now) : -1;
		if (E.stats_ms && !ending) {
			if (now >= E.stats_at) {
				log_stats(LOG_INFO);
				E.stats_at = now + E.stats_ms;
			}
			if (timeout < 0 || E.stats_at - now < timeout)
				timeout = (int)(E.stats_at - now);
		}
		if (!ending && out_pending() <= OUT_HIGH) {
			pfd[nfd].fd = 0;
			pfd[nfd].events = POLLIN;
			ifd = nfd++;
		}
		if (fbfd >= 0 && !fb.eof) {
			pfd[nfd].fd = fbfd;
			pfd[nfd].events = POLLIN;
			ffd = nfd++;
		}
		if (out_pending()) {
			pfd[nfd].fd = 1;
			pfd[nfd].events = POLLOUT;
			ofd = nfd++;
		}
		if (timeout != 0)
			tool_metrics_flush(1);	/* about to wait: nothing held back */
		r = poll(pfd, (nfds_t)nfd, timeout);
		if (r < 0) {
			if (errno != EINTR)
				log_error("unable to poll: %s", strerror(errno));
			continue;
		}
		if (ofd >= 0 && pfd[ofd].revents)
			flush_out(0);
		if (ifd >= 0 && pfd[ifd].revents) {
			struct pollfd one = { 0, POLLIN, 0 };
			int rounds = 0;

			/* Whatever has arrived together is read before reconciling: one reconcile per primary. */
			do {
				if (reader_fill(&in) < 0)
					break;
				reader_drain(&in, handle_event);
			} while (!in.eof && ++rounds < 256 && poll(&one, 1, 0) > 0 && one.revents);
		}
		if (ffd >= 0 && pfd[ffd].revents) {
			/* Read even when ending, so that a writer is never stuck; results then change nothing. */
			while (reader_fill(&fb) > 0)
				reader_drain(&fb, ending ? drop_result : handle_result);
			reader_drain(&fb, ending ? drop_result : handle_result);
		}
	}
	flush_out(1);
	kop_buf_release(&outq);
	reader_release(&in);
	if (fbfd >= 0) {
		reader_release(&fb);
		close(fbfd);
	}
	if (keep >= 0)
		close(keep);
}

static void print_watches(void)
{
	jv w = kop_program_watches(&E.prog);

	jv_array_foreach(w, i, x) emit(x);
	jv_free(w);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "feedback", required_argument, NULL, OPT_FEEDBACK },
		{ "print-watches", no_argument, NULL, OPT_PRINT_WATCHES },
		{ "now", required_argument, NULL, OPT_NOW },
		{ "once", no_argument, NULL, OPT_ONCE },
		{ "backoff-base", required_argument, NULL, OPT_BACKOFF_BASE },
		{ "backoff-cap", required_argument, NULL, OPT_BACKOFF_CAP },
		{ "stats-interval", required_argument, NULL, OPT_STATS_INTERVAL },
		{ "watchdog", required_argument, NULL, OPT_WATCHDOG },
		TOOL_COMMON_OPTIONS,
		{ NULL, 0, NULL, 0 }
	};
	const char *feedback = NULL;
	int c, watches = 0, once = 0;
	long ms;
	char err[KOP_ERRLEN], *program_dir;
	size_t i;

	tool_init("ireconcile", argc, argv, 1);
	E.backoff_base = 1000;
	E.backoff_cap = 300000;
	while ((c = getopt_long(argc, argv, TOOL_COMMON_SHORT, opts, NULL)) != -1) {
		switch (c) {
		case OPT_FEEDBACK:
			feedback = optarg;
			break;
		case OPT_PRINT_WATCHES:
			watches = 1;
			break;
		case OPT_NOW: {
			time_t t;

			if (kop_time_parse(optarg, &t) < 0)
				die_usage("invalid --now '%s' (RFC 3339, e.g. 2026-11-22T10:00:00Z)", optarg);
			E.now = optarg;
			break;
		}
		case OPT_ONCE:
			once = 1;
			break;
		case OPT_BACKOFF_BASE:
		case OPT_BACKOFF_CAP:
			if ((ms = tool_parse_duration_ms(optarg)) <= 0 || ms > 86400000)
				die_usage("invalid --%s '%s'", c == OPT_BACKOFF_BASE ? "backoff-base" : "backoff-cap",
					  optarg);
			if (c == OPT_BACKOFF_BASE)
				E.backoff_base = (unsigned)ms;
			else
				E.backoff_cap = (unsigned)ms;
			break;
		case OPT_STATS_INTERVAL:
			if ((E.stats_ms = tool_parse_duration_ms(optarg)) <= 0 || E.stats_ms > 86400000)
				die_usage("invalid --stats-interval '%s'", optarg);
			break;
		case OPT_WATCHDOG:
			if ((W.first_ms = tool_parse_duration_ms(optarg)) < 100 || W.first_ms > 86400000)
				die_usage("invalid --watchdog '%s' (100ms to 24h)", optarg);
			break;
		default:
			if (!tool_common_option(c, optarg, usage))
				tool_bad_option(argv, TOOL_COMMON_SHORT);
		}
	}
	if (optind != argc - 1)
		die_usage("want one PROGRAM");
	if (E.backoff_base > E.backoff_cap)
		die_usage("--backoff-base (%u ms) is above --backoff-cap (%u ms)", E.backoff_base, E.backoff_cap);
	program_dir = tool_find_program(argv[optind]);	/* a bare name as iot-operator finds it */
	if (kop_program_load(&E.prog, program_dir ? program_dir : argv[optind], !watches, err) < 0) {
		kop_program_release(&E.prog);
		die(KOP_EXIT_PERM, "%s", err);
	}
	free(program_dir);
	if (watches) {
		print_watches();
		kop_program_release(&E.prog);
		return tool_finish(KOP_EXIT_OK);
	}
	kop_hmap_init(&E.objs);
	kop_hmap_init(&E.prims);
	kop_hmap_init(&E.related);
	kop_hmap_init(&E.flights);
	E.related_cache = jv_invalid();
	E.aggs_cache = jv_invalid();
	E.dicts = kop_calloc(1 + E.prog.nkinds, sizeof(*E.dicts));
	E.children_empty = jv_object();
	for (i = 0; i < E.prog.nkinds; i++)
		if (E.prog.kinds[i].role != KOP_ROLE_RELATED)
			E.children_empty = jv_object_set(E.children_empty, kop_json_key(E.prog.kinds[i].key), jv_object());

	{
		pthread_t t;

		if (pthread_create(&t, NULL, watchdog, NULL) == 0)
			pthread_detach(t);
		else
			log_warn("unable to start the watchdog thread; a program that never ends would go unsaid");
	}
	run(feedback, once);

	log_stats(LOG_DEBUG);
	kop_hmap_release(&E.related, NULL);
	kop_hmap_release(&E.objs, obj_free);
	kop_hmap_release(&E.prims, prim_free);
	kop_hmap_release(&E.flights, flight_free);
	jv_free(E.related_cache);
	jv_free(E.aggs_cache);
	jv_free(E.children_empty);
	for (i = 0; i <= E.prog.nkinds; i++)
		free(E.dicts[i].buf);
	free(E.dicts);
	kop_program_release(&E.prog);
	return tool_finish(E.read_failed ? KOP_EXIT_TEMP : KOP_EXIT_OK);
}
