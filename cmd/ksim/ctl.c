/*
 * The controllers kube-controller-manager runs that every client notices:
 * the namespace controller (a Terminating namespace's content is deleted,
 * then the namespace is finalized and goes) and the garbage collector's
 * background propagation (dependents of a deleted owner uid are deleted).
 * One thread, driven by the event stream; every change goes through
 * ksim_call(), as a client's would. A full pass (terminating namespaces,
 * dependents whose owners are all gone) runs at start, every 30 s and after
 * losing history.
 *
 * The same thread expires Events, as kube-apiserver's storage does (each
 * write of one gives it an etcd lease of --event-ttl, 1 h by default): an
 * Event not written for that long is removed, and watchers see DELETED.
 */
#include <stdlib.h>
#include <string.h>
#include "tool.h"
#include "ksim.h"
#include "hmap.h"
#include "banned.h"

#define CTL_USER "system:serviceaccount:kube-system:ksim-controllers"

static pthread_t thread;
static int running;

/* The API path of an object of storage key gr (lock held): "/apis/G/V/namespaces/NS/RES/NAME". */
static char *object_path(const char *gr, jv obj)
{
	struct kop_buf b = KOP_BUF_INIT;
	const char *ns = ksim_str(obj, "metadata.namespace"), *name = ksim_str(obj, "metadata.name");

	for (struct ksim_type *t = ksim_types(); t; t = t->next) {
		if (!t->served || strcmp(t->gr, gr))
			continue;
		if (*t->group)
			kop_buf_addf(&b, "/apis/%s/%s", t->group, t->version);
		else
			kop_buf_addf(&b, "/api/%s", t->version);
		if ((t->flags & KT_NAMESPACED) && ns)
			kop_buf_addf(&b, "/namespaces/%s", ns);
		kop_buf_addf(&b, "/%s/%s", t->resource, name ? name : "");
		return kop_buf_detach(&b, NULL);
	}
	return NULL;
}

struct ns_ctx {
	const char *ns;
};

static int in_namespace(const char *gr, jv obj, void *data)
{
	struct ns_ctx *c = data;
	const char *ns = ksim_str(obj, "metadata.namespace");

	(void)gr;
	return ns && !strcmp(ns, c->ns);
}

/* [path, deleting?] of every object in namespace ns (takes the lock). */
static jv namespace_content(const char *ns)
{
	struct ns_ctx c = { ns };
	jv all, out = jv_array();

	ksim_lock();
	all = ksim_store_select(in_namespace, &c);
	jv_array_foreach(all, i, pair) {
		jv gr = jv_array_get(jv_copy(pair), 0), obj = jv_array_get(pair, 1);
		char *path = object_path(jv_string_value(gr), obj);

		if (path)
			out = jv_array_append(out, JV_ARRAY(jv_string(path),
							    jv_bool(ksim_str(obj, "metadata.deletionTimestamp") != NULL)));
		free(path);
		jv_free(gr);
		jv_free(obj);
	}
	jv_free(all);
	ksim_unlock();
	return out;
}

static void finalize_namespace(const char *name)
{
	jv content = namespace_content(name);
	int remaining = jv_array_length(jv_copy(content));

	jv_array_foreach(content, i, e) {
		jv path = jv_array_get(jv_copy(e), 0), deleting = jv_array_get(e, 1);

		if (jv_get_kind(deleting) != JV_KIND_TRUE) {
			int code = ksim_call(CTL_USER, "DELETE", jv_string_value(path), NULL,
					     JV_OBJECT(jv_string("kind"), jv_string("DeleteOptions"), jv_string("apiVersion"),
						       jv_string("v1"), jv_string("propagationPolicy"),
						       jv_string("Background")),
					     NULL);

			if (code != 200 && code != 404)
				log_warn("namespace controller: unable to delete '%s': code %d", jv_string_value(path),
					 code);
		}
		jv_free(path);
		jv_free(deleting);
	}
	jv_free(content);
	if (remaining) {
		/* objects with finalizers may still be there: look again */
		content = namespace_content(name);
		remaining = jv_array_length(jv_copy(content));
		jv_free(content);
	}
	if (!remaining) {
		struct kop_buf p = KOP_BUF_INIT;
		jv ns = jv_null();
		int code;

		kop_buf_addf(&p, "/api/v1/namespaces/%s", name);
		code = ksim_call(CTL_USER, "GET", p.buf, NULL, jv_null(), &ns);
		if (code == 200 && ksim_str(ns, "metadata.deletionTimestamp")) {
			kop_buf_adds(&p, "/finalize");
			ns = jv_setpath(ns, JV_ARRAY(jv_string("spec"), jv_string("finalizers")), jv_array());
			code = ksim_call(CTL_USER, "PUT", p.buf, NULL, ns, NULL);
			if (code != 200 && code != 404 && code != 409)
				log_warn("namespace controller: unable to finalize '%s': code %d", name, code);
		} else {
			jv_free(ns);
		}
		kop_buf_release(&p);
	}
}

static int terminating_ns(jv obj, const char *key, void *data)
{
	jv *names = data;
	const char *name = ksim_str(obj, "metadata.name");

	(void)key;
	if (name && ksim_str(obj, "metadata.deletionTimestamp"))
		*names = jv_array_append(*names, jv_string(name));
	return 0;
}

static void resync_namespaces(void)
{
	jv names = jv_array();

	ksim_lock();
	ksim_store_each("namespaces", NULL, NULL, terminating_ns, &names);
	ksim_unlock();
	jv_array_foreach(names, i, n) {
		finalize_namespace(jv_string_value(n));
		jv_free(n);
	}
	jv_free(names);
}

struct gc_ctx {
	jv deleted;		/* object: owners just deleted, or null (resync: any owner) */
	jv uids;		/* object: every live uid */
};

/* A dependent to collect: its owners are all gone (and, with uid, it named that one). */
static int dependent(const char *gr, jv obj, void *data)
{
	struct gc_ctx *c = data;
	jv refs = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("metadata"), jv_string("ownerReferences")));
	int n = 0, gone = 0, named = jv_get_kind(c->deleted) != JV_KIND_OBJECT;

	if (jv_get_kind(refs) != JV_KIND_ARRAY) {
		jv_free(refs);
		return 0;
	}

	(void)gr;
	if (jv_get_kind(refs) == JV_KIND_ARRAY) {
		jv_array_foreach(refs, i, ref) {
			const char *u = ksim_str(ref, "uid");

			n++;
			gone += !u || !jv_object_has(jv_copy(c->uids), jv_string(u));
			named |= u && jv_get_kind(c->deleted) == JV_KIND_OBJECT && jv_object_has(jv_copy(c->deleted), jv_string(u));
			jv_free(ref);
		}
	}
	jv_free(refs);
	return named && n > 0 && gone == n && !ksim_str(obj, "metadata.deletionTimestamp");
}

static int names_deleted(const char *gr, jv obj, void *data)
{
	struct gc_ctx *c = data;
	jv refs = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("metadata"), jv_string("ownerReferences")));
	int hit = 0;

	(void)gr;
	if (jv_get_kind(refs) == JV_KIND_ARRAY) {
		jv_array_foreach(refs, i, ref) {
			const char *u = ksim_str(ref, "uid");

			hit |= u && jv_object_has(jv_copy(c->deleted), jv_string(u));
			jv_free(ref);
		}
	}
	jv_free(refs);
	return hit;
}

static int collect_uid(const char *gr, jv obj, void *data)
{
	struct gc_ctx *c = data;
	const char *u = ksim_str(obj, "metadata.uid");

	(void)gr;
	if (u)
		c->uids = jv_object_set(c->uids, jv_string(u), jv_true());
	return 0;
}

/*
 * Background propagation: deletes the dependents whose owners are all gone
 * and among them one of `deleted` (an object of uids, consumed; null =
 * any: the resync pass).
 */
static void collect(jv deleted)
{
	struct gc_ctx c = { deleted, jv_object() };
	jv deps, paths = jv_array();

	ksim_lock();
	if (jv_get_kind(deleted) == JV_KIND_OBJECT) {
		/* cheap first: does anything name one of the deleted owners? */
		jv named = ksim_store_select(names_deleted, &c);
		int any = jv_array_length(named) > 0;

		if (!any) {
			jv_free(c.uids);
			jv_free(c.deleted);
			ksim_unlock();
			jv_free(paths);
			return;
		}
	}
	jv_free(ksim_store_select(collect_uid, &c));
	deps = ksim_store_select(dependent, &c);
	jv_array_foreach(deps, i, pair) {
		jv gr = jv_array_get(jv_copy(pair), 0), obj = jv_array_get(pair, 1);
		char *path = object_path(jv_string_value(gr), obj);

		if (path)
			paths = jv_array_append(paths, jv_string(path));
		free(path);
		jv_free(gr);
		jv_free(obj);
	}
	jv_free(deps);
	jv_free(c.uids);
	jv_free(c.deleted);
	ksim_unlock();
	jv_array_foreach(paths, i, p) {
		int code = ksim_call(CTL_USER, "DELETE", jv_string_value(p), NULL,
				     JV_OBJECT(jv_string("kind"), jv_string("DeleteOptions"), jv_string("apiVersion"),
					       jv_string("v1"), jv_string("propagationPolicy"), jv_string("Background")),
				     NULL);

		if (code != 200 && code != 404)
			log_warn("garbage collector: unable to delete '%s': code %d", jv_string_value(p), code);
		jv_free(p);
	}
	jv_free(paths);
}

static int ns_terminating(const char *name)
{
	jv ns;
	int t;

	ksim_lock();
	ns = ksim_store_get("namespaces", "", name);
	t = jv_is_valid(ns) && ksim_str(ns, "metadata.deletionTimestamp") != NULL;
	ksim_unlock();
	return t;
}

/* ---- Event expiry ---- */

/* An Event's lease: due when it expires, rv the write that gave it. */
struct lease {
	int64_t due;		/* mono ms */
	uint64_t rv;
};

static struct kop_hmap leases;	/* an Event's "ns/name" -> struct lease */
static int64_t lease_next = INT64_MAX;	/* the earliest due time */

static void lease_set(const char *key, int64_t due, uint64_t rv)
{
	struct lease *l = kop_hmap_get(&leases, key);

	if (!l) {
		l = kop_malloc(sizeof(*l));
		kop_hmap_put(&leases, key, l);
	}
	l->due = due;
	l->rv = rv;
	if (due < lease_next)
		lease_next = due;
}

static uint64_t rv_of(jv obj)
{
	const char *rv = ksim_str(obj, "metadata.resourceVersion");

	return rv ? strtoull(rv, NULL, 10) : 0;
}

static int lease_scan_one(jv obj, const char *key, void *data)
{
	struct kop_hmap *seen = data;
	struct lease *l = kop_hmap_remove(&leases, key);

	if (!l || l->rv != rv_of(obj)) {
		/* not known, or written while the history was lost: a TTL from now */
		free(l);
		l = kop_malloc(sizeof(*l));
		l->due = kop_mono_ms() + ksim.event_ttl_ms;
		l->rv = rv_of(obj);
	}
	kop_hmap_put(seen, key, l);
	return 0;
}

/* The Events in the store (at start, after losing history) and their leases. */
static void lease_scan(void)
{
	struct kop_hmap seen = KOP_HMAP_INIT;
	const char *key;
	void *val;
	size_t it = 0;

	ksim_lock();
	ksim_store_each("events", NULL, NULL, lease_scan_one, &seen);
	ksim_unlock();
	kop_hmap_release(&leases, free);
	leases = seen;
	lease_next = INT64_MAX;
	while (kop_hmap_next(&leases, &it, &key, &val))
		if (((struct lease *)val)->due < lease_next)
			lease_next = ((struct lease *)val)->due;
}

/* Each write of an Event gives it a lease of --event-ttl from now. */
static void lease_change(const struct ksim_change *ev)
{
	struct kop_buf key = KOP_BUF_INIT;

	if (strcmp(ev->gr, "events"))
		return;
	kop_buf_addf(&key, "%s/%s", ev->ns, ev->name);
	if (ev->type == KSIM_DELETED)
		free(kop_hmap_remove(&leases, key.buf));
	else
		lease_set(key.buf, kop_mono_ms() + ksim.event_ttl_ms, ev->rv);
	kop_buf_release(&key);
}

/*
 * Removes the Events whose lease is up, as etcd does: from the store at
 * once (no request, finalizers or not), a DELETED event for watchers. One
 * written again since its lease was taken (a write this thread has not
 * read yet) is left alone: that write brings its new lease.
 */
static void expire_events(int64_t now)
{
	const char *key;
	void *val;
	size_t it = 0;

	ksim_lock();
	lease_next = INT64_MAX;
	while (kop_hmap_next(&leases, &it, &key, &val)) {
		struct lease *l = val;
		char *ns, *name;
		jv stored;

		if (l->due > now) {
			if (l->due < lease_next)
				lease_next = l->due;
			continue;
		}
		ns = kop_strdup(key);
		name = strchr(ns, '/');
		*name++ = 0;
		stored = ksim_store_get("events", ns, name);
		if (jv_is_valid(stored) && rv_of(stored) == l->rv)
			jv_free(ksim_store_commit("events", jv_copy(stored), jv_null()));
		free(ns);
		free(kop_hmap_remove(&leases, key));
	}
	ksim_unlock();
}

/*
 * Events are taken in batches (up to 1000 events or 100 ms) so that a burst
 * of deletions costs one scan of the store, not one each.
 */
static void *controllers(void *arg)
{
	uint64_t cursor = ksim_current_rv();
	int64_t next_resync = kop_mono_ms() + 30000;
	jv deleted = jv_object(), dirty = jv_object();
	int batch = 0, resync = 1;
	int64_t batch_end = 0;

	(void)arg;
	ksim_thread_keys();
	lease_scan();
	while (!ksim_stopping()) {
		struct ksim_change ev;
		int64_t now = kop_mono_ms();
		long wait = batch ? (batch_end > now ? (long)(batch_end - now) : 0) : 1000;
		int r;

		if (lease_next - now < wait)
			wait = lease_next > now ? (long)(lease_next - now) : 0;
		r = ksim_next_change(&cursor, wait, &ev);
		if (r < 0)
			lease_scan();
		if (r > 0) {
			lease_change(&ev);
			if (!strcmp(ev.gr, "namespaces") && ev.type != KSIM_DELETED && ev.deleting) {
				dirty = jv_object_set(dirty, jv_string(ev.name), jv_true());
				batch++;
			} else if (ev.type == KSIM_DELETED || ev.deleting) {
				if (ev.type == KSIM_DELETED && *ev.uid)
					deleted = jv_object_set(deleted, jv_string(ev.uid), jv_true());
				if (*ev.ns)
					dirty = jv_object_set(dirty, jv_string(ev.ns), jv_true());
				batch++;
			}
			/* a batch collects events for up to 100 ms (or 1000 of them) */
			if (batch == 1)
				batch_end = kop_mono_ms() + 100;
			if (batch && batch < 1000 && kop_mono_ms() < batch_end)
				continue;
		}
		if (r < 0 || kop_mono_ms() >= next_resync)
			resync = 1;
		if (jv_object_length(jv_copy(deleted)) > 0) {
			collect(deleted);
			deleted = jv_object();
		}
		jv_object_foreach(dirty, k, v) {
			if (ns_terminating(jv_string_value(k)))
				finalize_namespace(jv_string_value(k));
			jv_free(k);
			jv_free(v);
		}
		jv_free(dirty);
		dirty = jv_object();
		batch = 0;
		if (resync) {
			resync_namespaces();
			collect(jv_null());
			next_resync = kop_mono_ms() + 30000;
			resync = 0;
		}
		if (kop_mono_ms() >= lease_next)
			expire_events(kop_mono_ms());
	}
	jv_free(deleted);
	jv_free(dirty);
	kop_hmap_release(&leases, free);
	return NULL;
}

void ksim_controllers_start(void)
{
	if (pthread_create(&thread, NULL, controllers, NULL) == 0)
		running = 1;
	else
		log_error("unable to start the controllers thread");
}

void ksim_controllers_stop(void)
{
	if (running)
		pthread_join(thread, NULL);
	running = 0;
}
