/*
 * The store: objects per storage key (resource.group) in a binary tree
 * ordered by (namespace, name) as etcd orders its keys, one global
 * resourceVersion counter, and a ring of the last --history events for
 * watches. Everything here runs under ksim.lock.
 */
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include "jsonl.h"
#include "ksim.h"
#include "sim.h"
#include "banned.h"

struct ksim_state ksim = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.bookmark_ms = 60000,
	.event_ttl_ms = 3600000,
};

const char *const ksim_event_names[] = { "ADDED", "MODIFIED", "DELETED" };

struct obj {
	char *key;		/* "ns/name" or "/name" for cluster-scoped objects */
	const char *name;	/* the name part of key */
	jv val;
	struct ksim_json_cache cache;	/* of val */
};

static void cache_drop(struct ksim_json_cache *c)
{
	free(c->json);
	free(c->view);
	memset(c, 0, sizeof(*c));
}

/*
 * Objects of one namespace ("" for cluster-scoped ones) in a tree ordered
 * by name. A collection's namespaces are a tree ordered by namespace name:
 * the order of the "ns/name" keys (a '/' sorts below any name character:
 * comparing namespace names first is the same order), and a walk of one
 * namespace visits that namespace only.
 */
struct nsobjs {
	char *ns;
	void *root;
	size_t count;
};

struct coll {
	struct coll *next;
	char *gr;
	void *root;		/* of struct nsobjs */
	size_t count;
};

static struct coll *colls;

void ksim_lock(void)
{
	pthread_mutex_lock(&ksim.lock);
}

void ksim_unlock(void)
{
	pthread_mutex_unlock(&ksim.lock);
}

uint64_t ksim_current_rv(void)
{
	uint64_t rv;

	ksim_lock();
	rv = ksim.rv;
	ksim_unlock();
	return rv;
}

int ksim_stopping(void)
{
	int s;

	ksim_lock();
	s = ksim.stopping;
	ksim_unlock();
	return s;
}

/* Orders "ns/name" keys by namespace, then name (a '/' sorts below any name character here). */
static int key_cmp(const void *a, const void *b)
{
	const struct obj *x = a, *y = b;
	const char *p = x->key, *q = y->key;

	while (*p && *p == *q) {
		p++;
		q++;
	}
	if (*p == *q)
		return 0;
	if (*p == '/')
		return -1;
	if (*q == '/')
		return 1;
	return (unsigned char)*p - (unsigned char)*q;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(((const struct obj *)a)->name, ((const struct obj *)b)->name);
}

static int ns_cmp(const void *a, const void *b)
{
	return strcmp(((const struct nsobjs *)a)->ns, ((const struct nsobjs *)b)->ns);
}

static struct coll *coll_get(const char *gr, int create)
{
	struct coll *c;

	for (c = colls; c; c = c->next)
		if (!strcmp(c->gr, gr))
			return c;
	if (!create)
		return NULL;
	c = kop_calloc(1, sizeof(*c));
	c->gr = kop_strdup(gr);
	c->next = colls;
	colls = c;
	return c;
}

static struct nsobjs *ns_get(struct coll *c, const char *ns, int create)
{
	struct nsobjs probe = { (char *)(ns ? ns : ""), NULL, 0 }, *n, **found;

	found = tfind(&probe, &c->root, ns_cmp);
	if (found)
		return *found;
	if (!create)
		return NULL;
	n = kop_calloc(1, sizeof(*n));
	n->ns = kop_strdup(probe.ns);
	tsearch(n, &c->root, ns_cmp);
	return n;
}

static char *make_key(const char *ns, const char *name)
{
	struct kop_buf b = KOP_BUF_INIT;

	kop_buf_addf(&b, "%s/%s", ns ? ns : "", name);
	return kop_buf_detach(&b, NULL);
}

/* The stored object of (ns, name) in c, or NULL. */
static struct obj *obj_find(struct coll *c, const char *ns, const char *name, struct nsobjs **nsp)
{
	struct nsobjs *n = ns_get(c, ns, 0);
	struct obj probe, **found;

	if (nsp)
		*nsp = n;
	if (!n)
		return NULL;
	probe.name = name ? name : "";
	found = tfind(&probe, &n->root, name_cmp);
	return found ? *found : NULL;
}

jv ksim_store_get(const char *gr, const char *ns, const char *name)
{
	struct coll *c = coll_get(gr, 0);
	struct obj *o;

	if (!c)
		return jv_invalid();
	o = obj_find(c, ns, name, NULL);
	return o ? o->val : jv_invalid();
}

struct ksim_json_cache *ksim_store_cache_of(const char *gr, jv obj)
{
	struct coll *c = coll_get(gr, 0);
	struct obj *o = c ? obj_find(c, ksim_str(obj, "metadata.namespace"), ksim_str(obj, "metadata.name"), NULL) : NULL;

	return o && jv_identical(jv_copy(o->val), jv_copy(obj)) ? &o->cache : NULL;
}

struct walk {
	const char *after;
	int (*fn)(jv, const char *, void *);
	int (*cfn)(jv, const char *, struct ksim_json_cache *, void *);	/* instead of fn */
	void *data;
	int stop;
};

static void walk_fn(const void *node, VISIT which, void *closure)
{
	struct walk *w = closure;
	struct obj *o = *(struct obj *const *)node;

	if (w->stop || (which != postorder && which != leaf))
		return;
	if (w->after) {
		struct obj a = { .key = (char *)w->after, .val = jv_null() };

		if (key_cmp(o, &a) <= 0)
			return;
	}
	if (w->cfn ? w->cfn(o->val, o->key, &o->cache, w->data) :
		     w->fn(o->val, o->key, w->data))
		w->stop = 1;
}

static void walk_ns_fn(const void *node, VISIT which, void *closure)
{
	struct walk *w = closure;
	const struct nsobjs *n = *(struct nsobjs *const *)node;

	if (w->stop || (which != postorder && which != leaf))
		return;
	twalk_r(n->root, walk_fn, w);
}

static void store_walk(const char *gr, const char *ns, struct walk *w)
{
	struct coll *c = coll_get(gr, 0);

	if (!c)
		return;
	if (ns && *ns) {
		struct nsobjs *n = ns_get(c, ns, 0);

		if (n)
			twalk_r(n->root, walk_fn, w);
	} else {
		twalk_r(c->root, walk_ns_fn, w);
	}
}

void ksim_store_each(const char *gr, const char *ns, const char *after,
		     int (*fn)(jv obj, const char *key, void *data), void *data)
{
	struct walk w = { .after = after, .fn = fn, .data = data };

	store_walk(gr, ns, &w);
}

void ksim_store_each_cached(const char *gr, const char *ns, const char *after,
			    int (*fn)(jv obj, const char *key, struct ksim_json_cache *cache, void *data), void *data)
{
	struct walk w = { .after = after, .cfn = fn, .data = data };

	store_walk(gr, ns, &w);
}

static jv service_ips;	/* spec.clusterIP of the stored Services -> how many have it */

/* Keeps service_ips up to date: obj (borrowed) stored (+1) or gone (-1). */
static void count_service_ip(jv obj, int delta)
{
	const char *ip = ksim_str(obj, "spec.clusterIP");
	jv n;
	double v;

	if (!ip || !*ip || !strcmp(ip, "None"))
		return;
	if (jv_get_kind(service_ips) != JV_KIND_OBJECT)
		service_ips = jv_object();
	n = jv_object_get(jv_copy(service_ips), jv_string(ip));
	v = (jv_get_kind(n) == JV_KIND_NUMBER ? jv_number_value(n) : 0) + delta;
	jv_free(n);
	if (v > 0)
		service_ips = jv_object_set(service_ips, jv_string(ip), jv_number(v));
	else
		service_ips = jv_object_delete(service_ips, jv_string(ip));
}

int ksim_store_service_ip_used(const char *ip)
{
	return jv_get_kind(service_ips) == JV_KIND_OBJECT && jv_object_has(jv_copy(service_ips), jv_string(ip));
}

size_t ksim_store_count(const char *gr, const char *ns)
{
	struct coll *c = coll_get(gr, 0);
	struct nsobjs *n;

	if (!c)
		return 0;
	if (!ns || !*ns)
		return c->count;
	n = ns_get(c, ns, 0);
	return n ? n->count : 0;
}

struct select_walk {
	const char *gr;
	int (*fn)(const char *, jv, void *);
	void *data;
	jv out;
};

static void select_fn(const void *node, VISIT which, void *closure)
{
	struct select_walk *s = closure;
	const struct obj *o = *(struct obj *const *)node;

	if (which != postorder && which != leaf)
		return;
	if (s->fn(s->gr, o->val, s->data))
		s->out = jv_array_append(s->out, JV_ARRAY(jv_string(s->gr), jv_copy(o->val)));
}

static void select_ns_fn(const void *node, VISIT which, void *closure)
{
	const struct nsobjs *n = *(struct nsobjs *const *)node;

	if (which != postorder && which != leaf)
		return;
	twalk_r(n->root, select_fn, closure);
}

jv ksim_store_select(int (*fn)(const char *gr, jv obj, void *data), void *data)
{
	struct select_walk s = { NULL, fn, data, jv_array() };

	for (struct coll *c = colls; c; c = c->next) {
		s.gr = c->gr;
		twalk_r(c->root, select_ns_fn, &s);
	}
	return s.out;
}

static jv set_rv(jv obj, uint64_t rv)
{
	char buf[32];
	jv md = jv_object_get(jv_copy(obj), jv_string("metadata"));

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)rv);
	if (jv_get_kind(md) != JV_KIND_OBJECT) {
		jv_free(md);
		md = jv_object();
	}
	md = jv_object_set(md, jv_string("resourceVersion"), jv_string(buf));
	return jv_object_set(obj, jv_string("metadata"), md);
}

void ksim_event_release(struct ksim_event *ev)
{
	free(ev->gr);
	cache_drop(&ev->text);
	jv_free(ev->obj);
	jv_free(ev->old);
	memset(ev, 0, sizeof(*ev));
	ev->obj = ev->old = jv_null();
}

jv ksim_store_commit(const char *gr, jv old, jv obj)
{
	struct coll *c = coll_get(gr, 1);
	struct ksim_event *ev;
	uint64_t rv = ++ksim.rv;
	enum ksim_event_type type;
	struct nsobjs *n;
	struct obj *o;

	if (!strcmp(gr, "services")) {
		if (jv_get_kind(old) == JV_KIND_OBJECT)
			count_service_ip(old, -1);
		if (jv_get_kind(obj) == JV_KIND_OBJECT)
			count_service_ip(obj, 1);
	}

	if (jv_get_kind(obj) == JV_KIND_NULL) {
		/* delete: the last state carries the deletion RV */
		jv_free(obj);
		obj = set_rv(jv_copy(old), rv);
		o = obj_find(c, ksim_str(old, "metadata.namespace"), ksim_str(old, "metadata.name"), &n);
		if (o) {
			tdelete(o, &n->root, name_cmp);
			cache_drop(&o->cache);
			jv_free(o->val);
			free(o->key);
			free(o);
			c->count--;
			if (!--n->count) {
				tdelete(n, &c->root, ns_cmp);
				free(n->ns);
				free(n);
			}
		}
		type = KSIM_DELETED;
	} else {
		/* stored in canonical key order, so that reads need not reorder */
		const char *ns, *name;

		obj = ksim_canonical(set_rv(obj, rv));
		ns = ksim_str(obj, "metadata.namespace");
		name = ksim_str(obj, "metadata.name");
		o = obj_find(c, ns, name, &n);
		if (o) {
			jv_free(o->val);
			o->val = jv_copy(obj);
			cache_drop(&o->cache);
		} else {
			size_t nslen = strlen(ns ? ns : "");

			o = kop_calloc(1, sizeof(*o));
			o->key = make_key(ns, name ? name : "");
			o->name = o->key + nslen + 1;
			o->val = jv_copy(obj);
			if (!n)
				n = ns_get(c, ns, 1);
			tsearch(o, &n->root, name_cmp);
			n->count++;
			c->count++;
		}
		type = jv_get_kind(old) == JV_KIND_NULL ? KSIM_ADDED : KSIM_MODIFIED;
	}
	ev = &ksim.ring[rv % ksim.history];
	if (ev->gr)
		ksim_event_release(ev);
	/* watch.c's serialized objects are kept for the last KSIM_JSON_WINDOW events only (memory) */
	if (rv > KSIM_JSON_WINDOW && ksim.history > KSIM_JSON_WINDOW) {
		cache_drop(&ksim.ring[(rv - KSIM_JSON_WINDOW) % ksim.history].text);
	}
	ev->rv = rv;
	ev->type = type;
	ev->gr = kop_strdup(gr);
	ev->obj = jv_copy(obj);
	ev->old = old;
	ksim_persist_record(gr, type, obj);	/* persist.c: --data */
	pthread_cond_broadcast(&ksim.changed);
	ksim_watch_notify(gr, ksim_str(ev->obj, "metadata.namespace"));
	return obj;
}

/* Waits for the event after *cursor (lock held throughout): the ring entry, NULL (timeout/stop) or -1 (lost). */
static struct ksim_event *next_locked(uint64_t *cursor, long timeout_ms, int *r)
{
	struct timespec until;

	*r = 0;
	until = kop_clock_after(CLOCK_MONOTONIC, timeout_ms);
	while (!ksim.stopping && ksim.rv <= *cursor) {
		if (pthread_cond_timedwait(&ksim.changed, &ksim.lock, &until))
			break;
	}
	if (ksim.rv > *cursor) {
		uint64_t next = *cursor + 1;

		if (*cursor < ksim.compacted || (ksim.rv > ksim.history && next <= ksim.rv - ksim.history)) {
			*cursor = ksim.rv;
			*r = -1;
		} else {
			*cursor = next;
			*r = 1;
			return &ksim.ring[next % ksim.history];
		}
	}
	return NULL;
}

int ksim_next_event(uint64_t *cursor, long timeout_ms, struct ksim_event *out)
{
	struct ksim_event *ev;
	int r;

	ksim_lock();
	ev = next_locked(cursor, timeout_ms, &r);
	if (ev) {
		out->rv = ev->rv;
		out->type = ev->type;
		out->gr = kop_strdup(ev->gr);
		out->obj = ksim_deep_copy(jv_copy(ev->obj));
		out->old = ksim_deep_copy(jv_copy(ev->old));
		memset(&out->text, 0, sizeof(out->text));
	}
	ksim_unlock();
	return r;
}

static void copy_field(char *dst, size_t len, jv obj, const char *path)
{
	const char *s = ksim_str(obj, path);

	snprintf(dst, len, "%s", s ? s : "");
}

int ksim_next_change(uint64_t *cursor, long timeout_ms, struct ksim_change *out)
{
	struct ksim_event *ev;
	jv owner, old_owner;
	int r;

	ksim_lock();
	ev = next_locked(cursor, timeout_ms, &r);
	if (ev) {
		out->rv = ev->rv;
		out->type = ev->type;
		snprintf(out->gr, sizeof(out->gr), "%s", ev->gr);
		copy_field(out->ns, sizeof(out->ns), ev->obj, "metadata.namespace");
		copy_field(out->name, sizeof(out->name), ev->obj, "metadata.name");
		copy_field(out->uid, sizeof(out->uid), ev->obj, "metadata.uid");
		owner = ksim_controller_uid(ev->obj);
		old_owner = ev->type == KSIM_MODIFIED ? ksim_controller_uid(ev->old) : jv_null();
		snprintf(out->owner, sizeof(out->owner), "%s",
			 jv_get_kind(owner) == JV_KIND_STRING ? jv_string_value(owner) : "");
		snprintf(out->old_owner, sizeof(out->old_owner), "%s",
			 jv_get_kind(old_owner) == JV_KIND_STRING ? jv_string_value(old_owner) : "");
		jv_free(owner);
		jv_free(old_owner);
		out->deleting = ksim_str(ev->obj, "metadata.deletionTimestamp") != NULL;
	}
	ksim_unlock();
	return r;
}

void ksim_store_init(size_t history)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&ksim.changed, &a);
	pthread_condattr_destroy(&a);
	ksim.history = history ? history : 1;
	ksim.ring = kop_calloc(ksim.history, sizeof(*ksim.ring));
	for (size_t i = 0; i < ksim.history; i++)
		ksim.ring[i].obj = ksim.ring[i].old = jv_null();
}

static void free_obj(void *p)
{
	struct obj *o = p;

	cache_drop(&o->cache);
	jv_free(o->val);
	free(o->key);
	free(o);
}

static void free_ns(void *p)
{
	struct nsobjs *n = p;

	tdestroy(n->root, free_obj);
	free(n->ns);
	free(n);
}

void ksim_store_free(void)
{
	while (colls) {
		struct coll *c = colls;

		colls = c->next;
		tdestroy(c->root, free_ns);
		free(c->gr);
		free(c);
	}
	for (size_t i = 0; i < ksim.history; i++)
		ksim_event_release(&ksim.ring[i]);
	jv_free(service_ips);
	service_ips = jv_null();
	free(ksim.ring);
	ksim.ring = NULL;
}

jv ksim_deep_copy(jv v)
{
	jv out;

	switch (jv_get_kind(v)) {
	case JV_KIND_STRING:
		out = jv_string_sized(jv_string_value(v), jv_string_length_bytes(jv_copy(v)));
		break;
	case JV_KIND_ARRAY:
		out = jv_array_sized(jv_array_length(jv_copy(v)));
		jv_array_foreach(v, i, e)
			out = jv_array_append(out, ksim_deep_copy(e));
		break;
	case JV_KIND_OBJECT:
		out = jv_object();
		jv_object_foreach(v, k, e)
			out = jv_object_set(out, ksim_deep_copy(k), ksim_deep_copy(e));
		break;
	default:
		return v;	/* null, booleans, numbers: no shared storage */
	}
	jv_free(v);
	return out;
}

/* lib/json_dump.c writes what jv_dump_string(v, 0) writes, several times faster than libjq. */
char *ksim_dump(jv v, size_t *len)
{
	return kop_json_dump_len(v, len);
}

void ksim_uuid(char *buf)
{
	unsigned char b[16];

	if (getrandom(b, sizeof(b), 0) != sizeof(b))
		for (size_t i = 0; i < sizeof(b); i++)
			b[i] = random() & 0xff;
	b[6] = (b[6] & 0x0f) | 0x40;
	b[8] = (b[8] & 0x3f) | 0x80;
	snprintf(buf, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
		 b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

void ksim_now(char *buf)
{
	kop_time_rfc3339(buf, 32, time(NULL));
}

/*
 * Set on the threads that called ksim_thread_keys() (the simulated
 * controllers', the collectors'): their lookups use keys shared per thread.
 */
static _Thread_local int thread_keys;

void ksim_thread_keys(void)
{
	thread_keys = 1;
}

jv ksim_key(const char *k)
{
	return thread_keys ? kop_json_key(k) : jv_string(k);
}

const char *ksim_str(jv obj, const char *path)
{
	return ksim_strl(obj, path, NULL);
}

const char *ksim_strl(jv obj, const char *path, size_t *len)
{
	const char *p = path;
	jv cur = obj;

	/* Walks borrowed values: jv_object_get consumes, so copy and free as we go. */
	while (*p) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);
		char key[128];
		jv next;

		if (jv_get_kind(cur) != JV_KIND_OBJECT || n >= sizeof(key))
			return NULL;
		memcpy(key, p, n);
		key[n] = 0;
		next = jv_object_get(jv_copy(cur), ksim_key(key));
		/* jv values are refcounted: the stored object still holds `next`. */
		jv_free(next);
		if (!jv_is_valid(next))
			return NULL;
		cur = next;
		p += n;
		if (*p == '.')
			p++;
	}
	if (jv_get_kind(cur) != JV_KIND_STRING)
		return NULL;
	if (len)
		*len = (size_t)jv_string_length_bytes(jv_copy(cur));
	return jv_string_value(cur);
}

jv ksim_controller_uid(jv obj)
{
	jv md = jv_get_kind(obj) == JV_KIND_OBJECT ? jv_object_get(jv_copy(obj), ksim_key("metadata")) : jv_null();
	jv refs = jv_get_kind(md) == JV_KIND_OBJECT ? jv_object_get(jv_copy(md), ksim_key("ownerReferences")) :
						      jv_null();
	jv uid = jv_null();

	if (jv_get_kind(refs) == JV_KIND_ARRAY) {
		jv_array_foreach(refs, i, r) {
			jv c = jv_get_kind(r) == JV_KIND_OBJECT ? jv_object_get(jv_copy(r), ksim_key("controller")) :
								  jv_null();

			if (jv_get_kind(uid) == JV_KIND_NULL && jv_get_kind(c) == JV_KIND_TRUE) {
				jv u = jv_object_get(jv_copy(r), ksim_key("uid"));

				if (jv_get_kind(u) == JV_KIND_STRING)
					uid = u;
				else
					jv_free(u);
			}
			jv_free(c);
			jv_free(r);
		}
	}
	jv_free(refs);
	jv_free(md);
	return uid;
}

jv ksim_add_missing(jv to, jv from)
{
	jv_object_foreach(from, k, v) {
		if (!jv_object_has(jv_copy(to), jv_copy(k)))
			to = jv_object_set(to, k, v);
		else {
			jv_free(k);
			jv_free(v);
		}
	}
	jv_free(from);
	return to;
}

static const char *const meta_order[] = { "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion",
	"generation", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
	"ownerReferences", "finalizers", "managedFields", NULL };

jv ksim_canonical(jv obj)
{
	jv out = jv_object(), md;

	if (jv_get_kind(obj) != JV_KIND_OBJECT)
		return obj;
	if (jv_object_has(jv_copy(obj), jv_string("kind")))
		out = jv_object_set(out, jv_string("kind"), jv_object_get(jv_copy(obj), jv_string("kind")));
	if (jv_object_has(jv_copy(obj), jv_string("apiVersion")))
		out = jv_object_set(out, jv_string("apiVersion"), jv_object_get(jv_copy(obj), jv_string("apiVersion")));
	md = jv_object_get(jv_copy(obj), jv_string("metadata"));
	if (jv_get_kind(md) == JV_KIND_OBJECT) {
		jv m = jv_object();

		for (const char *const *k = meta_order; *k; k++)
			if (jv_object_has(jv_copy(md), jv_string(*k)))
				m = jv_object_set(m, jv_string(*k), jv_object_get(jv_copy(md), jv_string(*k)));
		out = jv_object_set(out, jv_string("metadata"), ksim_add_missing(m, md));
	} else {
		jv_free(md);
	}
	return ksim_add_missing(out, obj);
}
