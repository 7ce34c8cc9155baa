/*
 * Watch streams: the initial state for RV ""/"0" or
 * sendInitialEvents, then every event after the cursor from the history
 * ring, filtered by namespace and selectors (transitions become ADDED and
 * DELETED), bookmarks, the k8s.io/initial-events-end bookmark, ERROR 410
 * events, a resourceVersion newer than any (the watch cache's 3 s wait, then
 * one ERROR 504 event), timeoutSeconds, and the admin faults (cut, error).
 * --watch-list makes streaming lists refused as servers without them do.
 *
 * http.c calls ksim_watch_read() from the connection's thread; it blocks on
 * the watch's own condition and hands back whole events, one compact JSON
 * line each. A write wakes only the watches of its resource and namespace
 * (ksim_watch_notify): with a watch per namespace, waking every watch on
 * every write cost a thousand context switches an event.
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "hmap.h"
#include "ksim.h"
#include "shard.h"
#include "banned.h"

/* kube-apiserver's watch cache waits this long for a resourceVersion it has not reached (waitUntilFreshAndBlock). */
#define FRESH_WAIT_MS 3000

struct ksim_watch {
	char *group, *version, *resource, *gr;
	char *ns;
	struct ksim_selector *ls, *fs;
	struct kop_shard_sel *shard;	/* shardSelector, or NULL */
	uint64_t cursor;
	struct kop_buf out;
	size_t off;
	int bookmarks;
	int table, include_object;
	int64_t next_bookmark, deadline;
	int64_t fresh_deadline;	/* cursor beyond ksim.rv: the ERROR 504 after this */
	unsigned cut_epoch, error_epoch;
	int done;
	jv initial;		/* the initial state still to send (copies: used under the lock only) */
	int initial_next;
	int initial_end;	/* send the k8s.io/initial-events-end bookmark after it */
	pthread_cond_t wake;	/* signalled (with ksim.lock) when there may be something for it */
	int fd;			/* the client's connection, to see it go while nothing is sent; -1: unknown */
	struct ksim_watch *prev, *next;	/* every open watch (watching) */
	char *bkey;			/* its bucket's key: "GR\nNS" ("GR\n": every namespace) */
	struct ksim_watch *bprev, *bnext;	/* the watches of that bucket */
};

static struct ksim_watch *watching;
/* bucket key -> the first watch of that resource and namespace (a thousand
 * watches, one per namespace, are not scanned on every write) */
static struct kop_hmap buckets = KOP_HMAP_INIT;
/* watches waiting for a resourceVersion not reached yet: any write may be it */
static int ahead;

static char *bucket_key(const char *gr, const char *ns)
{
	struct kop_buf b = KOP_BUF_INIT;

	kop_buf_addf(&b, "%s\n%s", gr, ns ? ns : "");
	return kop_buf_detach(&b, NULL);
}

static void signal_bucket(const char *gr, const char *ns)
{
	char buf[640], *key = buf;
	struct ksim_watch *w;

	if ((size_t)snprintf(buf, sizeof(buf), "%s\n%s", gr, ns ? ns : "") >= sizeof(buf))
		key = bucket_key(gr, ns);
	for (w = kop_hmap_get(&buckets, key); w; w = w->bnext)
		pthread_cond_signal(&w->wake);
	if (key != buf)
		free(key);
}

void ksim_watch_notify(const char *gr, const char *ns)
{
	struct ksim_watch *w;

	if (ahead) {
		for (w = watching; w; w = w->next)
			if (w->cursor >= ksim.rv || (!strcmp(w->gr, gr) && (!w->ns || (ns && !strcmp(w->ns, ns)))))
				pthread_cond_signal(&w->wake);
		return;
	}
	signal_bucket(gr, NULL);
	if (ns)
		signal_bucket(gr, ns);
}

void ksim_watch_wake_all(void)
{
	struct ksim_watch *w;

	for (w = watching; w; w = w->next)
		pthread_cond_signal(&w->wake);
}

struct ksim_watch *ksim_watch_new(const struct ksim_request *rq, const struct ksim_type *t, const char *ns,
				  struct ksim_selector *ls, struct ksim_selector *fs, jv *err, int *code);

static const char *q(const struct ksim_request *rq, const char *name)
{
	jv v;

	if (jv_get_kind(rq->query) != JV_KIND_OBJECT)
		return NULL;
	v = jv_object_get(jv_copy(rq->query), jv_string(name));
	jv_free(v);
	return jv_get_kind(v) == JV_KIND_STRING ? jv_string_value(v) : NULL;
}

static int qbool(const struct ksim_request *rq, const char *name)
{
	const char *v = q(rq, name);

	return v && *v && strcmp(v, "0") && strcasecmp(v, "false");
}

static void emit(struct ksim_watch *w, const char *type, jv obj)
{
	jv ev = JV_OBJECT(jv_string("type"), jv_string(type), jv_string("object"), obj);
	size_t len;
	char *s = ksim_dump(ev, &len);

	kop_buf_add(&w->out, s, len);
	kop_buf_add(&w->out, "\n", 1);
	free(s);
}

/* The object as this watch's client sees it (lock held). */
static jv view(struct ksim_watch *w, const struct ksim_type *t, jv obj)
{
	obj = ksim_convert(t, obj);
	obj = jv_object_set(obj, jv_string("apiVersion"), jv_string(t->api_version));
	obj = jv_object_set(obj, jv_string("kind"), jv_string(t->kind));
	if (w->table) {
		const char *rv = ksim_str(obj, "metadata.resourceVersion");
		char *r = kop_strdup(rv ? rv : "");
		jv tab = ksim_table(t, JV_ARRAY(obj), r, NULL, w->include_object);

		free(r);
		return tab;
	}
	return obj;
}

/* What jv_dump writes for {"type": type, "object": obj}, obj's JSON given. */
static void emit_text(struct ksim_watch *w, const char *type, const char *json, size_t len)
{
	kop_buf_addf(&w->out, "{\"type\":\"%s\",\"object\":", type);
	kop_buf_add(&w->out, json, len);
	kop_buf_add(&w->out, "}\n", 2);
}

/*
 * c, obj's (borrowed) JSON, as the watch w (not a Table) shows it: made
 * unless c holds that view already. Serialized once per version of the
 * object, for every event and initial state that sends it (a restarted
 * client's watches list what the events sent before: lock held).
 */
static void cached_view(struct ksim_watch *w, const struct ksim_type *t, struct ksim_json_cache *c, jv obj)
{
	struct kop_buf key = KOP_BUF_INIT;

	kop_buf_addf(&key, "%s %s", t->api_version, t->kind);
	if (!c->json || strcmp(c->view, key.buf)) {
		free(c->json);
		free(c->view);
		c->json = ksim_dump(view(w, t, jv_copy(obj)), &c->len);
		c->view = kop_buf_detach(&key, NULL);
	} else {
		kop_buf_release(&key);
	}
}

/* obj (borrowed) sent as an event of type from the stored object's cache: 1 when obj is the
 * version stored and w not a Table; else 0, nothing sent (lock held). */
static int emit_stored(struct ksim_watch *w, const struct ksim_type *t, const char *gr, const char *type, jv obj)
{
	struct ksim_json_cache *c = w->table ? NULL : ksim_store_cache_of(gr, obj);

	if (!c)
		return 0;
	cached_view(w, t, c, obj);
	emit_text(w, type, c->json, c->len);
	return 1;
}

/*
 * An event of the ring as this watch's client sees it: emit(w, type,
 * view(w, t, ev->obj)), the same bytes, but the object is serialized once
 * for every watch that shows it the same way: in the stored object's cache
 * while it is the version stored, else with the event (lock held).
 */
static void emit_event(struct ksim_watch *w, const struct ksim_type *t, const char *type, struct ksim_event *ev)
{
	if (emit_stored(w, t, ev->gr, type, ev->obj))
		return;
	if (w->table || ev->rv + KSIM_JSON_WINDOW <= ksim.rv) {
		/* a Table, or a watch far behind: store.c keeps the JSON of the last events only */
		emit(w, type, view(w, t, jv_copy(ev->obj)));
		return;
	}
	cached_view(w, t, &ev->text, ev->obj);
	emit_text(w, type, ev->text.json, ev->text.len);
}

/*
 * A change that takes the object out of what w selects: DELETED with the
 * object as it was, at the change's resourceVersion, as kube-apiserver's
 * watch cache sends it (cacheWatcher.convertToWatchEvent; lock held).
 */
static void emit_left(struct ksim_watch *w, const struct ksim_type *t, struct ksim_event *ev)
{
	char rv[32];

	snprintf(rv, sizeof(rv), "%llu", (unsigned long long)ev->rv);
	emit(w, "DELETED", view(w, t, jv_setpath(jv_copy(ev->old), JV_ARRAY(jv_string("metadata"),
									    jv_string("resourceVersion")),
						  jv_string(rv))));
}

static void emit_error(struct ksim_watch *w, const char *msg)
{
	emit(w, "ERROR", ksim_status(410, "Expired", msg, jv_null()));
	w->done = 1;
}

static void emit_bookmark(struct ksim_watch *w, const struct ksim_type *t, int initial_end)
{
	char rv[32];
	jv md;

	snprintf(rv, sizeof(rv), "%llu", (unsigned long long)w->cursor);
	md = JV_OBJECT(jv_string("resourceVersion"), jv_string(rv), jv_string("creationTimestamp"), jv_null());
	if (initial_end)
		md = jv_object_set(md, jv_string("annotations"),
				   JV_OBJECT(jv_string("k8s.io/initial-events-end"), jv_string("true")));
	emit(w, "BOOKMARK", JV_OBJECT(jv_string("kind"), jv_string(t->kind), jv_string("apiVersion"),
				      jv_string(t->api_version), jv_string("metadata"), md));
}

static int in_scope(struct ksim_watch *w, jv obj)
{
	const char *ns = ksim_str(obj, "metadata.namespace");

	return !w->ns || (ns && !strcmp(ns, w->ns));
}

static int matches(struct ksim_watch *w, const struct ksim_type *t, jv obj)
{
	return jv_get_kind(obj) == JV_KIND_OBJECT && in_scope(w, obj) && ksim_selector_match(w->ls, obj, t) &&
	       ksim_selector_match(w->fs, obj, t) && (!w->shard || kop_shard_match(w->shard, obj));
}

static int initial_fn(jv obj, const char *key, void *data)
{
	void **d = data;
	struct ksim_watch *w = d[0];
	const struct ksim_type *t = d[1];

	(void)key;
	if (matches(w, t, obj))
		w->initial = jv_array_append(w->initial, jv_copy(obj));
	return 0;
}

/*
 * The initial state goes out in slices, so that a watch over 100,000
 * objects neither holds the lock nor buffers them all at once (lock held).
 */
static void send_initial(struct ksim_watch *w, const struct ksim_type *t)
{
	int n = jv_array_length(jv_copy(w->initial));

	while (w->initial_next < n && w->out.len < 256 * 1024) {
		jv obj = jv_array_get(jv_copy(w->initial), w->initial_next++);

		if (emit_stored(w, t, t->gr, "ADDED", obj))
			jv_free(obj);
		else
			emit(w, "ADDED", view(w, t, obj));	/* (a Table, or changed since the watch began) */
	}
	if (w->initial_next >= n) {
		jv_free(w->initial);
		w->initial = jv_null();
		if (w->initial_end)
			emit_bookmark(w, t, 1);
	}
}

/*
 * kube-apiserver's answer to watch options it finds invalid
 * (validateWatchOptions): 422, a FieldValueForbidden cause per error,
 * the message naming them all ("[a, b]" when more than one).
 */
static jv invalid_watch_options(const char *const fields[], const char *const details[], int n)
{
	struct kop_buf msg = KOP_BUF_INIT;
	jv causes = jv_array(), st;
	int i;

	kop_buf_adds(&msg, "ListOptions.meta.k8s.io \"\" is invalid: ");
	if (n > 1)
		kop_buf_adds(&msg, "[");
	for (i = 0; i < n; i++) {
		struct kop_buf m = KOP_BUF_INIT;

		kop_buf_addf(&m, "Forbidden: %s", details[i]);
		kop_buf_addf(&msg, "%s%s: %s", i ? ", " : "", fields[i], m.buf);
		causes = jv_array_append(causes, JV_OBJECT(jv_string("reason"), jv_string("FieldValueForbidden"),
							   jv_string("message"), jv_string(m.buf), jv_string("field"),
							   jv_string(fields[i])));
		kop_buf_release(&m);
	}
	if (n > 1)
		kop_buf_adds(&msg, "]");
	st = ksim_status(422, "Invalid", msg.buf,
			 JV_OBJECT(jv_string("group"), jv_string("meta.k8s.io"), jv_string("kind"), jv_string("ListOptions"),
				   jv_string("causes"), causes));
	kop_buf_release(&msg);
	return st;
}

struct ksim_watch *ksim_watch_new(const struct ksim_request *rq, const struct ksim_type *t, const char *ns,
				  struct ksim_selector *ls, struct ksim_selector *fs, jv *err, int *code)
{
	struct ksim_watch *w;
	const char *rv = q(rq, "resourceVersion"), *rvm = q(rq, "resourceVersionMatch");
	const char *to = q(rq, "timeoutSeconds");
	int initial = qbool(rq, "sendInitialEvents");
	int has_sie = q(rq, "sendInitialEvents") != NULL;
	uint64_t n = 0;
	int64_t now = kop_mono_ms();
	struct kop_shard_sel *shard = NULL;

	if (ksim.watch_list == KSIM_WL_IGNORE) {
		initial = has_sie = 0;	/* unknown parameters: a plain watch */
		rvm = NULL;
	}
	if (ksim.watch_list == KSIM_WL_OLD && rvm && *rvm) {
		/* 1.19-1.26's ValidateListOptions: sendInitialEvents unknown, resourceVersionMatch not for watches */
		const char *fields[2] = { "resourceVersionMatch", "resourceVersionMatch" }, *details[2];
		int nerr = 0;

		details[nerr++] = "resourceVersionMatch is forbidden for watch";
		if (!rv || !*rv)
			details[nerr++] = "resourceVersionMatch is forbidden unless resourceVersion is provided";
		*err = invalid_watch_options(fields, details, nerr);
		*code = 422;
		goto fail;
	}
	if (ksim.watch_list == KSIM_WL_OLD)
		initial = has_sie = 0;	/* (a parameter it does not know) */
	if (has_sie && ksim.watch_list == KSIM_WL_GATE_OFF) {
		const char *fields[2], *details[2];
		int nerr = 0;

		if (!rvm || strcmp(rvm, "NotOlderThan")) {
			fields[nerr] = "resourceVersionMatch";
			details[nerr++] = "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan";
		}
		fields[nerr] = "sendInitialEvents";
		details[nerr++] = "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled";
		*err = invalid_watch_options(fields, details, nerr);
		*code = 422;
		goto fail;
	}
	if (has_sie && (!rvm || strcmp(rvm, "NotOlderThan"))) {
		*err = ksim_status(422, "Invalid",
				   "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
				   jv_null());
		*code = 422;
		goto fail;
	}
	if (!has_sie && rvm && *rvm) {
		*err = ksim_status(422, "Invalid",
				   "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
				   jv_null());
		*code = 422;
		goto fail;
	}
	if (rv && *rv) {
		char *end;

		n = strtoull(rv, &end, 10);
		if (*end) {
			struct kop_buf b = KOP_BUF_INIT;

			kop_buf_addf(&b, "Invalid value: \"%s\": resourceVersion must be a number", rv);
			*err = ksim_status(400, "BadRequest", b.buf, jv_null());
			kop_buf_release(&b);
			*code = 400;
			goto fail;
		}
	}
	if (ksim_shard_selector(rq, &shard, err) < 0) {
		*code = 500;
		goto fail;
	}
	w = kop_calloc(1, sizeof(*w));
	w->fd = -1;
	w->shard = shard;
	w->initial = jv_null();
	w->group = kop_strdup(t->group);
	w->version = kop_strdup(t->version);
	w->resource = kop_strdup(t->resource);
	w->gr = kop_strdup(t->gr);
	w->ns = ns ? kop_strdup(ns) : NULL;
	w->ls = ls;
	w->fs = fs;
	w->bookmarks = qbool(rq, "allowWatchBookmarks");
	w->table = rq->accept && strstr(rq->accept, "as=Table") != NULL;
	{
		const char *io = q(rq, "includeObject");

		w->include_object = io && !strcmp(io, "None") ? 0 : io && !strcmp(io, "Object") ? 2 : 1;
	}
	w->cut_epoch = ksim.cut_epoch;
	w->error_epoch = ksim.error_epoch;
	w->next_bookmark = now + ksim.bookmark_ms;
	if (to && *to)
		w->deadline = now + strtoll(to, NULL, 10) * 1000;
	else
		w->deadline = now + (1800 + random() % 1800) * 1000LL;
	if (initial && w->bookmarks && ksim.watch_list == KSIM_WL_REFUSE_STORAGE) {
		/* the watch cache on storage without progress notifications (cacher.go: newErrWatcher) */
		w->cursor = ksim.rv;
		emit(w, "ERROR", ksim_status(500, "InternalError",
					     "a watch stream was requested by the client but the required storage "
					     "feature RequestWatchProgress is disabled",
					     jv_null()));
		w->done = 1;
	} else if (initial || !rv || !*rv || !strcmp(rv, "0")) {
		void *d[2] = { w, (void *)t };

		w->cursor = ksim.rv;
		w->initial = jv_array();
		ksim_store_each(t->gr, ns, NULL, initial_fn, d);
		w->initial_end = initial && w->bookmarks;
	} else if (n < ksim.compacted || (ksim.rv > ksim.history && n < ksim.rv - ksim.history)) {
		w->cursor = ksim.rv;
		emit_error(w, "The resourceVersion for the provided watch is too old.");
	} else {
		w->cursor = n;
		w->fresh_deadline = now + FRESH_WAIT_MS;
	}
	{
		pthread_condattr_t a;

		pthread_condattr_init(&a);
		pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
		pthread_cond_init(&w->wake, &a);
		pthread_condattr_destroy(&a);
	}
	w->next = watching;
	if (watching)
		watching->prev = w;
	watching = w;
	w->bkey = bucket_key(w->gr, w->ns);
	w->bnext = kop_hmap_get(&buckets, w->bkey);
	if (w->bnext)
		w->bnext->bprev = w;
	kop_hmap_put(&buckets, w->bkey, w);
	ksim.watches++;
	return w;
fail:
	ksim_selector_free(ls);
	ksim_selector_free(fs);
	return NULL;
}

void ksim_watch_free(struct ksim_watch *w)
{
	if (!w)
		return;
	ksim_lock();
	ksim.watches--;
	if (w->prev)
		w->prev->next = w->next;
	else
		watching = w->next;
	if (w->next)
		w->next->prev = w->prev;
	if (w->bprev)
		w->bprev->bnext = w->bnext;
	else if (w->bnext)
		kop_hmap_put(&buckets, w->bkey, w->bnext);
	else
		kop_hmap_remove(&buckets, w->bkey);
	if (w->bnext)
		w->bnext->bprev = w->bprev;
	free(w->bkey);
	pthread_cond_destroy(&w->wake);
	jv_free(w->initial);	/* shares storage with the store: freed under the lock */
	pthread_cond_broadcast(&ksim.changed);
	ksim_unlock();
	free(w->group);
	free(w->version);
	free(w->resource);
	free(w->gr);
	ksim_shard_selector_free(w->shard);
	free(w->ns);
	ksim_selector_free(w->ls);
	ksim_selector_free(w->fs);
	kop_buf_release(&w->out);
	free(w);
}

/* Moves events after the cursor into w->out (lock held). */
static void drain(struct ksim_watch *w, const struct ksim_type *t)
{
	while (!w->done && w->cursor < ksim.rv && w->out.len < 256 * 1024) {
		uint64_t next = w->cursor + 1;
		struct ksim_event *ev;
		int mn, mo;

		if (w->cursor < ksim.compacted || (ksim.rv > ksim.history && next <= ksim.rv - ksim.history)) {
			char msg[128];

			snprintf(msg, sizeof(msg), "too old resource version: %llu (%llu)",
				 (unsigned long long)w->cursor,
				 (unsigned long long)(ksim.compacted > ksim.rv - (ksim.rv > ksim.history ? ksim.history : ksim.rv) ?
							      ksim.compacted :
							      ksim.rv - (ksim.rv > ksim.history ? ksim.history : ksim.rv)));
			emit_error(w, msg);
			return;
		}
		ev = &ksim.ring[next % ksim.history];
		w->cursor = next;
		if (!ev->gr || strcmp(ev->gr, w->gr))
			continue;
		switch (ev->type) {
		case KSIM_ADDED:
			if (matches(w, t, ev->obj))
				emit_event(w, t, "ADDED", ev);
			break;
		case KSIM_MODIFIED:
			mn = matches(w, t, ev->obj);
			mo = matches(w, t, ev->old);
			if (mn && mo)
				emit_event(w, t, "MODIFIED", ev);
			else if (mn)
				emit_event(w, t, "ADDED", ev);
			else if (mo)
				emit_left(w, t, ev);
			break;
		case KSIM_DELETED:
			if (matches(w, t, ev->obj))
				emit_event(w, t, "DELETED", ev);
			break;
		}
	}
}

void ksim_watch_set_fd(struct ksim_watch *w, int fd)
{
	w->fd = fd;
}

/* Whether the client closed its end (a watch with nothing to send would not learn it until its next
 * bookmark, a minute later, keeping a thread and a connection of the server's limit meanwhile). */
static int client_gone(const struct ksim_watch *w)
{
	struct pollfd p = { .fd = w->fd, .events = POLLRDHUP };

	return w->fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

size_t ksim_watch_read(struct ksim_watch *w, char *buf, size_t max)
{
	for (;;) {
		const struct ksim_type *t;
		struct timespec until;
		int64_t now, wake;

		if (w->off < w->out.len) {
			/* One event a chunk, as kube-apiserver flushes after each (an
			 * event is one line; a longer one than max spans chunks). */
			const char *nl = memchr(w->out.buf + w->off, '\n', w->out.len - w->off);
			size_t n = nl ? (size_t)(nl - (w->out.buf + w->off)) + 1 : w->out.len - w->off;

			if (n > max)
				n = max;
			memcpy(buf, w->out.buf + w->off, n);
			w->off += n;
			if (w->off == w->out.len) {
				kop_buf_reset(&w->out);
				w->off = 0;
			}
			return n;
		}
		if (w->done || client_gone(w))
			return 0;
		ksim_lock();
		t = ksim_type_find(w->group, w->version, w->resource);
		now = kop_mono_ms();
		if (!t || ksim.stopping || ksim.cut_epoch != w->cut_epoch || now >= w->deadline) {
			w->done = 1;
		} else if (ksim.error_epoch != w->error_epoch) {
			emit_error(w, "The resourceVersion for the provided watch is too old.");
		} else if (jv_get_kind(w->initial) == JV_KIND_ARRAY) {
			send_initial(w, t);
		} else if (w->cursor > ksim.rv && now >= w->fresh_deadline) {
			/* never reached: fail in-stream, as the watch cache does (cacher.go newErrWatcher) */
			emit(w, "ERROR", ksim_too_large_rv(w->cursor));
			w->done = 1;
		} else {
			drain(w, t);
			if (!w->out.len && w->bookmarks && now >= w->next_bookmark && w->cursor <= ksim.rv) {
				emit_bookmark(w, t, 0);
				w->next_bookmark = now + ksim.bookmark_ms;
			}
			if (!w->out.len && !w->done) {
				wake = w->deadline;
				if (w->cursor > ksim.rv && w->fresh_deadline < wake)
					wake = w->fresh_deadline;
				if (w->bookmarks && w->next_bookmark < wake)
					wake = w->next_bookmark;
				if (wake > now + 1000)
					wake = now + 1000;
				until = kop_clock_after(CLOCK_MONOTONIC, wake - now);
				{
					int is_ahead = w->cursor > ksim.rv;

					ahead += is_ahead;
					pthread_cond_timedwait(&w->wake, &ksim.lock, &until);
					ahead -= is_ahead;
				}
			}
		}
		ksim_unlock();
	}
}
