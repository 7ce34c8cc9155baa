/*
 * The simulated cluster: what kube-controller-manager and a kubelet do that
 * our clients see. One thread, driven by the event stream like ctl.c:
 * every event marks its object and the object's controller (before and
 * after the change) in its namespace, and a pass over a marked namespace
 * runs, level-triggered, the controllers and the kubelet over the marked
 * objects as stored (mark()). Changes of a namespace, a claim or the Node,
 * and events missed, mark whole namespaces. Delays (pod start, image pull
 * back-off, run time, load balancer) are timers that mark the whole
 * namespace when they fire.
 *
 * This file owns the thread, the pass, the timers and the helpers the
 * controllers share (sim-priv.h); the controllers are sim_*.c's, one a
 * file, the kubelet and the Node sim_kubelet.c's.
 *
 * Every write goes through ksim_call_locked() with fieldManager
 * kube-controller-manager or kubelet, so it is validated, versioned and
 * watched as a client's write would be. A 409 is left alone: the write
 * that won made an event, and the next pass works from it.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "sim-priv.h"
#include "banned.h"

struct sim_opts sim_opts = { 1, 1000, 2000, 1000, "*:broken*" };

static pthread_t thread;
static int running;
static jv timers;	/* "key" -> [namespace, due (mono ms), false] */
static int64_t now_ms;
/*
 * A write of this pass was refused (a create whose name is taken, a write
 * found invalid): the next pass over the namespace, whichever event starts
 * it, is whole (sync_batch, mark()), as the sync that wrote may only
 * succeed once some other object has changed or gone.
 */
static int refused;
static jv whole_next;	/* namespaces whose next pass is whole (keys) */

/* In a pass's set of uids, a key no uid can be: a pod, a Service, an
 * Endpoints or EndpointSlice changed, for the endpoints controller (which
 * goes over every Service of the namespace when it runs). */
#define MARK_ENDPOINTS "#endpoints"

static const char alphanums[] = "bcdfghjklmnpqrstvwxz2456789";


/* obj.k (v consumed) as jv_getpath reads it: null when absent or v is null, invalid when v is no object. */
static jv member(jv v, const char *k)
{
	jv r;

	if (jv_get_kind(v) == JV_KIND_NULL)
		return v;
	if (jv_get_kind(v) != JV_KIND_OBJECT) {
		jv_free(v);
		return jv_invalid();
	}
	r = jv_object_get(v, ksim_key(k));
	return jv_is_valid(r) ? r : jv_null();
}

jv get(jv obj, const char *a, const char *b, const char *c)
{
	jv v = member(jv_copy(obj), a);

	if (b)
		v = member(v, b);
	if (c)
		v = member(v, c);
	return v;
}

long num(jv obj, const char *a, const char *b, const char *c, long def)
{
	jv v = get(obj, a, b, c);
	long n = jv_get_kind(v) == JV_KIND_NUMBER ? (long)jv_number_value(v) : def;

	jv_free(v);
	return n;
}

const char *str(jv obj, const char *path, const char *def)
{
	const char *s = ksim_str(obj, path);

	return s ? s : def;
}

void now_rfc(char *buf)
{
	ksim_now(buf);
}

/* Kubernetes' rand.SafeEncodeString(fmt.Sprint(fnv32a(x))) over the sorted JSON of v. */
static void template_hash(jv v, char *out, size_t len)
{
	jv s = jv_dump_string(jv_copy(v), JV_PRINT_SORTED);
	const unsigned char *p = (const unsigned char *)jv_string_value(s);
	uint32_t h = 2166136261u;
	char dec[16];
	size_t i;

	for (; *p; p++) {
		h ^= *p;
		h *= 16777619u;
	}
	jv_free(s);
	snprintf(dec, sizeof(dec), "%u", h);
	for (i = 0; dec[i] && i + 1 < len; i++)
		out[i] = alphanums[(unsigned char)dec[i] % (sizeof(alphanums) - 1)];
	out[i] = 0;
}

static jv hash_cache;	/* "uid/generation" -> template hash (sim thread only) */
static size_t hash_cache_n;	/* its entries (jv_object_length walks the object) */

/*
 * template_hash() of owner's spec.template, remembered per uid and
 * generation (the template changes only with the spec, which bumps the
 * generation): a pass over a namespace need not serialize every template.
 */
void owner_template_hash(jv owner, char *out, size_t len)
{
	const char *uid = ksim_str(owner, "metadata.uid");
	long gen = num(owner, "metadata", "generation", NULL, -1);
	char key[128];
	jv h, tmpl;

	if (!uid || gen < 0) {
		tmpl = get(owner, "spec", "template", NULL);
		template_hash(tmpl, out, len);
		jv_free(tmpl);
		return;
	}
	snprintf(key, sizeof(key), "%s/%ld", uid, gen);
	if (jv_get_kind(hash_cache) != JV_KIND_OBJECT || hash_cache_n > 100000) {
		jv_free(hash_cache);
		hash_cache = jv_object();
		hash_cache_n = 0;
	}
	h = jv_object_get(jv_copy(hash_cache), jv_string(key));
	if (jv_get_kind(h) == JV_KIND_STRING) {
		snprintf(out, len, "%s", jv_string_value(h));
		jv_free(h);
		return;
	}
	jv_free(h);
	tmpl = get(owner, "spec", "template", NULL);
	template_hash(tmpl, out, len);
	jv_free(tmpl);
	hash_cache = jv_object_set(hash_cache, jv_string(key), jv_string(out));
	hash_cache_n++;
}

void random_suffix(char *out)
{
	for (int i = 0; i < 5; i++)
		out[i] = alphanums[random() % (long)(sizeof(alphanums) - 1)];
	out[5] = 0;
}

int is_controlled_by(jv obj, const char *uid)
{
	jv refs = get(obj, "metadata", "ownerReferences", NULL);
	int yes = 0;

	if (jv_get_kind(refs) == JV_KIND_ARRAY) {
		jv_array_foreach(refs, i, r) {
			const char *u = ksim_str(r, "uid");
			jv c = jv_object_get(jv_copy(r), jv_string("controller"));

			if (u && !strcmp(u, uid) && jv_get_kind(c) == JV_KIND_TRUE)
				yes = 1;
			jv_free(c);
			jv_free(r);
		}
	}
	jv_free(refs);
	return yes;
}

jv owner_ref(jv owner, const char *api_version, const char *kind)
{
	return JV_ARRAY(JV_OBJECT(jv_string("apiVersion"), jv_string(api_version), jv_string("kind"), jv_string(kind),
				  jv_string("name"), jv_string(str(owner, "metadata.name", "")), jv_string("uid"),
				  jv_string(str(owner, "metadata.uid", "")), jv_string("controller"), jv_true(),
				  jv_string("blockOwnerDeletion"), jv_true()));
}

int deleting(jv obj)
{
	return ksim_str(obj, "metadata.deletionTimestamp") != NULL;
}

int pod_ready(jv pod)
{
	jv conds = get(pod, "status", "conditions", NULL);
	int ready = 0;

	if (jv_get_kind(conds) == JV_KIND_ARRAY) {
		jv_array_foreach(conds, i, c) {
			const char *t = ksim_str(c, "type"), *s = ksim_str(c, "status");

			if (t && s && !strcmp(t, "Ready") && !strcmp(s, "True"))
				ready = 1;
			jv_free(c);
		}
	}
	jv_free(conds);
	return ready && !deleting(pod);
}

/* The API path of a namespaced object: prefix "/apis/apps/v1", resource, name, subresource. */
static char *path_of(const char *prefix, const char *ns, const char *resource, const char *name, const char *sub,
		     const char *manager)
{
	struct kop_buf b = KOP_BUF_INIT;

	kop_buf_addf(&b, "%s", prefix);
	if (ns)
		kop_buf_addf(&b, "/namespaces/%s", ns);
	kop_buf_addf(&b, "/%s", resource);
	if (name)
		kop_buf_addf(&b, "/%s", name);
	if (sub)
		kop_buf_addf(&b, "/%s", sub);
	if (manager)
		kop_buf_addf(&b, "?fieldManager=%s", manager);
	return kop_buf_detach(&b, NULL);
}

/* Sends a write; logs what is neither success nor a conflict. Returns the code. */
int call(const char *user, const char *method, const char *prefix, const char *ns, const char *resource,
	 const char *name, const char *sub, const char *manager, jv body)
{
	char *p = path_of(prefix, ns, resource, name, sub, manager);
	/* the lock is held (sync_batch): the body goes in as it is, no answer is written */
	int code = ksim_call_locked(user, method, p, body, NULL);

	/* (a conflict on an update, or an object gone: its own event marks it or its controller) */
	if (code >= 300 && code != 404 && (code != 409 || !strcmp(method, "POST")))
		refused = 1;
	if (code >= 300 && code != 409 && code != 404 && !ksim.stopping)
		log_warn("simulated cluster: %s '%s': code %d", method, p, code);
	free(p);
	return code;
}

int put_status(const char *user, const char *prefix, const char *resource, jv obj, jv status,
	       const char *manager)
{
	char *ns = kop_strdup(str(obj, "metadata.namespace", ""));
	char *name = kop_strdup(str(obj, "metadata.name", ""));
	int code;

	obj = jv_object_set(obj, jv_string("status"), status);
	code = call(user, "PUT", prefix, *ns ? ns : NULL, resource, name, "status", manager, obj);
	free(ns);
	free(name);
	return code;
}

int put_object(const char *prefix, const char *resource, jv obj)
{
	char *ns = kop_strdup(str(obj, "metadata.namespace", ""));
	char *name = kop_strdup(str(obj, "metadata.name", ""));
	int code = call(KCM, "PUT", prefix, ns, resource, name, NULL, "kube-controller-manager", obj);

	free(ns);
	free(name);
	return code;
}


/*
 * 1 when the timer `key` (in namespace ns) of `delay` ms is due: the first
 * call starts it; a due timer is consumed.
 */
int timer_due(const char *ns, const char *key, long delay)
{
	jv e = jv_object_get(jv_copy(timers), jv_string(key));
	int due = 0;

	if (delay <= 0) {
		jv_free(e);
		timers = jv_object_delete(timers, jv_string(key));
		return 1;
	}
	if (jv_get_kind(e) != JV_KIND_ARRAY) {
		/* (from now, not from the pass's start: a delay worked out from the clock fires when it says) */
		timers = jv_object_set(timers, jv_string(key),
				       JV_ARRAY(jv_string(ns), jv_number((double)(kop_mono_ms() + delay)), jv_false()));
	} else {
		jv at = jv_array_get(jv_copy(e), 1);

		due = now_ms >= (int64_t)jv_number_value(at);
		jv_free(at);
		if (due)
			timers = jv_object_delete(timers, jv_string(key));
	}
	jv_free(e);
	return due;
}

jv new_pod(jv owner, const char *owner_kind, const char *name, const char *generate_name, jv labels)
{
	jv tmpl = get(owner, "spec", "template", NULL);
	jv md = get(tmpl, "metadata", NULL, NULL), spec = get(tmpl, "spec", NULL, NULL), pod;

	if (jv_get_kind(md) != JV_KIND_OBJECT)
		md = (jv_free(md), jv_object());
	if (jv_get_kind(spec) != JV_KIND_OBJECT)
		spec = (jv_free(spec), jv_object());
	md = jv_object_delete(md, jv_string("creationTimestamp"));
	md = jv_object_set(md, jv_string("name"), jv_string(name));
	if (generate_name)
		md = jv_object_set(md, jv_string("generateName"), jv_string(generate_name));
	md = jv_object_set(md, jv_string("namespace"), jv_string(str(owner, "metadata.namespace", "")));
	md = jv_object_set(md, jv_string("labels"), labels);
	md = jv_object_set(md, jv_string("ownerReferences"), owner_ref(owner, "apps/v1", owner_kind));
	if (!jv_object_has(jv_copy(spec), jv_string("restartPolicy")))
		spec = jv_object_set(spec, jv_string("restartPolicy"), jv_string("Always"));
	if (!jv_object_has(jv_copy(spec), jv_string("serviceAccountName")))
		spec = jv_object_set(spec, jv_string("serviceAccountName"), jv_string("default"));
	spec = jv_object_set(spec, jv_string("nodeName"), jv_string(NODE_NAME));
	pod = JV_OBJECT(jv_string("apiVersion"), jv_string("v1"), jv_string("kind"), jv_string("Pod"),
			jv_string("metadata"), md, jv_string("spec"), spec);
	jv_free(tmpl);
	return pod;
}

int sim_write(const char *user, const char *method, const char *prefix, const char *ns, const char *resource,
	      const char *name, const char *sub, const char *manager, jv body)
{
	return call(user, method, prefix, ns, resource, name, sub, manager, body);
}

int sim_put_status(const char *user, const char *prefix, const char *resource, jv obj, jv status)
{
	return put_status(user, prefix, resource, obj, status, user && !strcmp(user, KUBELET) ? "kubelet" :
						  "kube-controller-manager");
}

int sim_timer_due(const char *ns, const char *key, long delay)
{
	return timer_due(ns, key, delay);
}

jv sim_new_pod(jv owner, const char *api_version, const char *kind, const char *generate_name, jv labels)
{
	jv pod = new_pod(owner, kind, "", generate_name, labels);

	pod = jv_setpath(pod, JV_ARRAY(jv_string("metadata"), jv_string("ownerReferences")),
			 owner_ref(owner, api_version, kind));
	return jv_object_set(pod, jv_string("metadata"),
			     jv_object_delete(jv_object_get(jv_copy(pod), jv_string("metadata")), jv_string("name")));
}

int sim_pod_ready(jv pod)
{
	return pod_ready(pod);
}

int sim_is_controlled_by(jv obj, const char *uid)
{
	return is_controlled_by(obj, uid);
}

jv sim_condition(const char *type, const char *status, const char *reason, const char *message, const char *now)
{
	return condition(type, status, reason, message, now);
}

int sim_selector_matches(jv sel, jv obj)
{
	jv s = ksim_selector_string(sel);
	struct ksim_selector *ls = NULL;
	char err[KOP_ERRLEN];
	int yes = 0;

	if (jv_get_kind(s) == JV_KIND_STRING) {
		ls = ksim_selector_parse(jv_string_value(s), 0, err);
		if (ls != (struct ksim_selector *)-1) {	/* (-1: a selector that does not parse matches nothing) */
			yes = ksim_selector_match(ls, obj, ksim_type_find("", "v1", "pods"));
			ksim_selector_free(ls);
		}
	}
	jv_free(s);
	jv_free(sel);
	return yes;
}

static int append_fn(jv obj, const char *key, void *data)
{
	(void)key;
	*(jv *)data = jv_array_append(*(jv *)data, jv_copy(obj));
	return 0;
}

jv sim_list(const char *gr, const char *ns)
{
	jv a = jv_array();

	ksim_store_each(gr, ns, NULL, append_fn, &a);
	return a;
}


static const char *const sim_grs[] = { "deployments.apps", "replicasets.apps", "statefulsets.apps", "pods",
					 "persistentvolumeclaims", "services" };
enum { G_DEPLOY, G_RS, G_STS, G_POD, G_PVC, G_SVC, G_COUNT };

/* What a pass collects of one kind: the objects sim_wanted(only), and (owned) those a wanted one controls. */
struct collect {
	jv arr;
	jv only;	/* borrowed */
	int owned;
};

static int collect_fn(jv obj, const char *key, void *data)
{
	struct collect *c = data;

	(void)key;
	if (!sim_wanted(c->only, obj)) {
		jv u = c->owned ? ksim_controller_uid(obj) : jv_null();

		if (jv_get_kind(u) != JV_KIND_STRING) {
			jv_free(u);
			return 0;
		}
		if (!jv_object_has(jv_copy(c->only), u))
			return 0;
	}
	c->arr = jv_array_append(c->arr, jv_copy(obj));
	return 0;
}

/*
 * What a pass over a namespace syncs (sim.h): JSON true, everything; else an
 * object whose keys are the uids of the objects to sync (those that changed,
 * and the controllers of those that changed: a pod's change is its
 * ReplicaSet's to count, a ReplicaSet's its Deployment's).
 */
int sim_wanted(jv only, jv obj)
{
	jv uid;

	if (jv_get_kind(only) != JV_KIND_OBJECT)
		return 1;
	/* (the stored string is the key: libjq keeps its hash once worked out) */
	uid = get(obj, "metadata", "uid", NULL);
	if (jv_get_kind(uid) != JV_KIND_STRING) {
		jv_free(uid);
		return 0;
	}
	return jv_object_has(jv_copy(only), uid);
}

/*
 * The objects of a namespace by the uid of their controller, as
 * kube-controller-manager's informers index them: what one controller's sync
 * reads (its ReplicaSets, its pods) is found at once, so a pass over a
 * namespace costs in proportion to its objects, not to their square.
 */
static jv by_controller(jv objs)	/* objs consumed */
{
	jv idx = jv_object();

	jv_array_foreach(objs, i, o) {
		jv k = ksim_controller_uid(o);

		if (jv_get_kind(k) == JV_KIND_STRING) {
			jv kids = jv_object_get(jv_copy(idx), jv_copy(k));

			/* out of the index while it grows, so that the append happens in place */
			idx = jv_object_delete(idx, jv_copy(k));
			if (jv_get_kind(kids) != JV_KIND_ARRAY)
				kids = (jv_free(kids), jv_array());
			idx = jv_object_set(idx, k, jv_array_append(kids, jv_copy(o)));
		} else
			jv_free(k);
		jv_free(o);
	}
	jv_free(objs);
	return idx;
}

/* The objects owner controls, from an index by_controller() made. */
static jv controlled(jv idx, jv owner)
{
	const char *uid = ksim_str(owner, "metadata.uid");
	jv kids = uid ? jv_object_get(jv_copy(idx), jv_string(uid)) : jv_null();

	return jv_get_kind(kids) == JV_KIND_ARRAY ? kids : (jv_free(kids), jv_array());
}

/*
 * g: the objects sync_batch collected; the Deployments, StatefulSets and
 * Services are those the pass syncs, the ReplicaSets and pods also those
 * their controllers read (only tells them apart).
 */
static void sync_namespace(const char *ns, int terminating, jv *g, jv only)
{
	if (!terminating) {
		jv rs_of = by_controller(jv_copy(g[G_RS])), pods_of = by_controller(jv_copy(g[G_POD]));

		jv_array_foreach(g[G_DEPLOY], i, d) {
			jv mine = controlled(rs_of, d);

			sync_deploy(ns, d, mine);
			jv_free(mine);
			jv_free(d);
		}
		jv_array_foreach(g[G_RS], i, r) {
			if (sim_wanted(only, r))
				sync_rs(ns, r, controlled(pods_of, r));
			jv_free(r);
		}
		jv_array_foreach(g[G_STS], i, s) {
			sync_sts(ns, s, controlled(pods_of, s), g[G_PVC]);
			jv_free(s);
		}
		jv_free(rs_of);
		jv_free(pods_of);
		jv_array_foreach(g[G_SVC], i, s) {
			sync_svc(ns, s);
			jv_free(s);
		}
	}
	if (!terminating) {
		sim_job_sync(ns);
		sim_cronjob_sync(ns);
		sim_daemonset_sync(ns);
		sim_rc_sync(ns);
		if (jv_get_kind(only) != JV_KIND_OBJECT || jv_object_has(jv_copy(only), jv_string(MARK_ENDPOINTS)))
			sim_endpoints_sync(ns);
	}
	sim_defaults_sync(ns, terminating);
	sim_pods_sync(ns, only, g[G_POD]);
	jv_array_foreach(g[G_POD], i, p) {
		if (sim_wanted(only, p))
			sync_pod(ns, p);
		jv_free(p);
	}
	jv_array_foreach(g[G_PVC], i, p) {
		sync_pvc(p, jv_copy(g[G_POD]));
		jv_free(p);
	}
}

/*
 * One pass over the dirty namespaces (consumed; each to true, or to the set
 * of uids sim_wanted() takes): for each, under the lock,
 * its objects (a namespace's objects are found without a walk of the whole
 * store) and the controllers over them. The lock is held while a namespace
 * is synced, so the objects are plain copies sharing storage with the store
 * and the writes go in as values (ksim_call_locked); it is let go between
 * namespaces so that clients are served.
 */
static void sync_batch(jv batch)
{
	jv_object_foreach(batch, k, v) {
		const char *ns = jv_string_value(k);
		jv g[G_COUNT], nso;
		int t;

		ksim_lock();
		if (ksim.stopping) {
			ksim_unlock();
			jv_free(k);
			jv_free(v);
			continue;
		}
		nso = ksim_store_get("namespaces", NULL, ns);
		t = !jv_is_valid(nso) || ksim_str(nso, "metadata.deletionTimestamp") != NULL;
		/*
		 * what the pass syncs, and the ReplicaSets and pods their controllers
		 * read; the claims first: with claims, every pod (sync_pvc looks for
		 * those that use each)
		 */
		for (int j = 0; j < G_COUNT; j++) {
			static const int order[G_COUNT] = { G_PVC, G_DEPLOY, G_RS, G_STS, G_POD, G_SVC };
			int i = order[j];
			int all = i == G_PVC || (i == G_POD && jv_array_length(jv_copy(g[G_PVC])) > 0);
			struct collect c = { jv_array(), all ? jv_true() : v, i == G_RS || i == G_POD };

			if (*ns)
				ksim_store_each(sim_grs[i], ns, NULL, collect_fn, &c);
			g[i] = c.arr;
		}
		refused = 0;
		sync_namespace(ns, t, g, v);
		if (refused)
			whole_next = jv_object_set(whole_next, jv_string(ns), jv_true());
		for (int i = 0; i < G_COUNT; i++)
			jv_free(g[i]);
		ksim_unlock();
		jv_free(k);
		jv_free(v);
	}
	jv_free(batch);
}

static int relevant(const char *gr, const char *name, int deleted)
{
	return !strcmp(gr, "deployments.apps") || !strcmp(gr, "replicasets.apps") || !strcmp(gr, "statefulsets.apps") ||
	       !strcmp(gr, "pods") || !strcmp(gr, "services") || sim_ext_relevant(gr, name, deleted);
}

static int all_namespaces(jv obj, const char *key, void *data)
{
	jv *dirty = data;
	const char *n = ksim_str(obj, "metadata.name");

	(void)key;
	if (n)
		*dirty = jv_object_set(*dirty, jv_string(n), jv_true());
	return 0;
}

/*
 * Marks namespace ns (when not "") for the next pass (*dirty, sync_batch's
 * batch): the objects of these uids (NULL-terminated; "" skipped), or, uids
 * NULL, all of it. *ndirty counts the namespaces marked (as they come:
 * jv_object_length walks the object).
 */
static void mark(jv *dirty, const char *ns, const char *const *uids, int *ndirty)
{
	jv set;

	if (!*ns)
		return;
	if (jv_object_has(jv_copy(whole_next), jv_string(ns))) {
		whole_next = jv_object_delete(whole_next, jv_string(ns));
		uids = NULL;
	}
	set = jv_object_get(jv_copy(*dirty), jv_string(ns));
	if (jv_get_kind(set) == JV_KIND_TRUE) {
		jv_free(set);
		return;
	}
	if (jv_get_kind(set) == JV_KIND_OBJECT)
		*dirty = jv_object_delete(*dirty, jv_string(ns));	/* so that the set grows in place */
	else {
		jv_free(set);
		set = jv_object();
		(*ndirty)++;
	}
	if (!uids) {
		jv_free(set);
		set = jv_true();
	}
	for (; uids && *uids; uids++)
		if (**uids)
			set = jv_object_set(set, jv_string(*uids), jv_true());
	*dirty = jv_object_set(*dirty, jv_string(ns), set);
}

static void *sim_loop(void *arg)
{
	uint64_t cursor;
	jv dirty = jv_object();
	int ndirty = 0;	/* namespaces in dirty since the last pass */

	(void)arg;
	ksim_thread_keys();
	ensure_node();
	ksim_lock();
	cursor = ksim.rv;
	ksim_store_each("namespaces", NULL, NULL, all_namespaces, &dirty);
	ksim_unlock();
	while (!ksim_stopping()) {
		struct ksim_change ev;
		int64_t wake = INT64_MAX;
		int r;

		now_ms = kop_mono_ms();
		/* fired timers mark their namespace */
		jv all = jv_copy(timers);

		jv_object_foreach(all, k, v) {
			jv ns = jv_array_get(jv_copy(v), 0), at = jv_array_get(jv_copy(v), 1);
			int64_t due = (int64_t)jv_number_value(at);

			if (due <= now_ms)
				mark(&dirty, jv_string_value(ns), NULL, &ndirty);
			else if (due < wake)
				wake = due;
			jv_free(ns);
			jv_free(at);
			jv_free(k);
			jv_free(v);
		}
		jv_free(all);
		if (jv_object_length(jv_copy(dirty)) > 0) {
			sync_batch(dirty);
			dirty = jv_object();
			ndirty = 0;
			/*
			 * drop the timers that had fired before the pass and that it did not
			 * consume: their namespace was passed over whole, and nothing there
			 * waits for them any more (their object is gone or has moved on)
			 */
			{
				jv keep = jv_object();

				jv_object_foreach(timers, k, v) {
					jv at = jv_array_get(jv_copy(v), 1);

					if ((int64_t)jv_number_value(at) > now_ms)
						keep = jv_object_set(keep, k, v);
					else {
						jv_free(k);
						jv_free(v);
					}
					jv_free(at);
				}
				jv_free(timers);
				timers = keep;
			}
		}
		/* take every event there is, then wait for more or for a timer */
		for (;;) {
			long timeout = 0;

			if (ndirty == 0) {
				int64_t n = kop_mono_ms();

				timeout = wake == INT64_MAX ? 1000 : wake > n ? (long)(wake - n) : 0;
				if (timeout > 1000)
					timeout = 1000;
			}
			r = ksim_next_change(&cursor, timeout, &ev);
			if (r < 0) {
				ksim_lock();
				ksim_store_each("namespaces", NULL, NULL, all_namespaces, &dirty);
				ksim_unlock();
				ndirty = jv_object_length(jv_copy(dirty));
				continue;
			}
			if (r == 0)
				break;
			if (!strcmp(ev.gr, "nodes")) {
				/* a node changed (cordoned, added): every namespace's pods and DaemonSets may care */
				ksim_lock();
				ksim_store_each("namespaces", NULL, NULL, all_namespaces, &dirty);
				ksim_unlock();
				ndirty = jv_object_length(jv_copy(dirty));
			} else if (!strcmp(ev.gr, "namespaces") || !strcmp(ev.gr, "persistentvolumeclaims")) {
				/* (a claim is bound for the pods that use it: every one of them looked at) */
				mark(&dirty, !strcmp(ev.gr, "namespaces") ? ev.name : ev.ns, NULL, &ndirty);
			} else if (relevant(ev.gr, ev.name, ev.type == KSIM_DELETED)) {
				/* (a pod's or a Service's change is also the endpoints controller's, and so is
				 * an Endpoints or EndpointSlice deleted) */
				int ep = !strcmp(ev.gr, "pods") || !strcmp(ev.gr, "services") || !strcmp(ev.gr, "endpoints") ||
					 !strcmp(ev.gr, "endpointslices.discovery.k8s.io");
				const char *uids[] = { ev.uid, ev.owner, ev.old_owner, ep ? MARK_ENDPOINTS : "", NULL };

				mark(&dirty, ev.ns, uids, &ndirty);
			}
			if (ndirty >= 1024)
				break;
		}
	}
	jv_free(dirty);
	return NULL;
}

void sim_start(void)
{
	if (!sim_opts.enabled)
		return;
	timers = jv_object();
	whole_next = jv_object();
	hash_cache = jv_object();
	if (pthread_create(&thread, NULL, sim_loop, NULL) == 0)
		running = 1;
	else
		log_error("unable to start the simulated cluster's thread");
}

void sim_stop(void)
{
	if (running) {
		pthread_join(thread, NULL);
		jv_free(timers);
		timers = jv_null();
		jv_free(whole_next);
		whole_next = jv_null();
		jv_free(hash_cache);
		hash_cache = jv_null();
	}
	running = 0;
}
