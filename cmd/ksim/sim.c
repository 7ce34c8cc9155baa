/*
 * The simulated cluster: what kube-controller-manager and a kubelet do that
 * our clients see. One thread, driven by the event stream like ctl.c:
 * every event marks its namespace dirty, and a pass over a dirty namespace
 * runs, level-triggered, the deployment, replicaset, statefulset, PVC
 * binder, service (load balancer) controllers and the kubelet over what
 * is stored. Delays (pod start, image pull back-off, run time, load
 * balancer) are timers that mark the namespace dirty when they fire.
 *
 * Every write goes through ksim_call_locked() with fieldManager
 * kube-controller-manager or kubelet, so it is validated, versioned and
 * watched as a client's write would be. A 409 is left alone: the write
 * that won made an event, and the next pass works from it.
 */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "sim.h"
#include "banned.h"

#define KCM "system:kube-controller-manager"
#define KUBELET "system:node:ksim-node"
#define NODE_NAME "ksim-node"
#define NODE_IP "10.0.0.2"

struct sim_opts sim_opts = { 1, 1000, 2000, 1000, "*:broken*" };

static pthread_t thread;
static int running;
static jv timers;	/* "key" -> due (mono ms); negative once fired */
static int64_t now_ms;
static unsigned ip_seq;

static const char alphanums[] = "bcdfghjklmnpqrstvwxz2456789";

/* ---- small helpers --------------------------------------------------- */

static jv get(jv obj, const char *a, const char *b, const char *c)
{
	jv path = JV_ARRAY(jv_string(a));

	if (b)
		path = jv_array_append(path, jv_string(b));
	if (c)
		path = jv_array_append(path, jv_string(c));
	return jv_getpath(jv_copy(obj), path);
}

static long num(jv obj, const char *a, const char *b, const char *c, long def)
{
	jv v = get(obj, a, b, c);
	long n = jv_get_kind(v) == JV_KIND_NUMBER ? (long)jv_number_value(v) : def;

	jv_free(v);
	return n;
}

static const char *str(jv obj, const char *path, const char *def)
{
	const char *s = ksim_str(obj, path);

	return s ? s : def;
}

static void now_rfc(char *buf)
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
static void owner_template_hash(jv owner, char *out, size_t len)
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

static void random_suffix(char *out)
{
	for (int i = 0; i < 5; i++)
		out[i] = alphanums[random() % (long)(sizeof(alphanums) - 1)];
	out[5] = 0;
}

static int is_controlled_by(jv obj, const char *uid)
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

static jv owner_ref(jv owner, const char *api_version, const char *kind)
{
	return JV_ARRAY(JV_OBJECT(jv_string("apiVersion"), jv_string(api_version), jv_string("kind"), jv_string(kind),
				  jv_string("name"), jv_string(str(owner, "metadata.name", "")), jv_string("uid"),
				  jv_string(str(owner, "metadata.uid", "")), jv_string("controller"), jv_true(),
				  jv_string("blockOwnerDeletion"), jv_true()));
}

static int deleting(jv obj)
{
	return ksim_str(obj, "metadata.deletionTimestamp") != NULL;
}

static int pod_ready(jv pod)
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
static int call(const char *user, const char *method, const char *prefix, const char *ns, const char *resource,
		const char *name, const char *sub, const char *manager, jv body)
{
	char *p = path_of(prefix, ns, resource, name, sub, manager);
	/* the lock is held (sync_batch): the body goes in as it is, no answer is written */
	int code = ksim_call_locked(user, method, p, body, NULL);

	if (code >= 300 && code != 409 && code != 404 && !ksim.stopping)
		log_warn("simulated cluster: %s '%s': code %d", method, p, code);
	free(p);
	return code;
}

static int put_status(const char *user, const char *prefix, const char *resource, jv obj, jv status,
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

static int put_object(const char *prefix, const char *resource, jv obj)
{
	char *ns = kop_strdup(str(obj, "metadata.namespace", ""));
	char *name = kop_strdup(str(obj, "metadata.name", ""));
	int code = call(KCM, "PUT", prefix, ns, resource, name, NULL, "kube-controller-manager", obj);

	free(ns);
	free(name);
	return code;
}

/* ---- timers ------------------------------------------------------------ */

/*
 * 1 when the timer `key` (in namespace ns) of `delay` ms is due: the first
 * call starts it; a due timer is consumed.
 */
static int timer_due(const char *ns, const char *key, long delay)
{
	jv e = jv_object_get(jv_copy(timers), jv_string(key));
	int due = 0;

	if (delay <= 0) {
		jv_free(e);
		timers = jv_object_delete(timers, jv_string(key));
		return 1;
	}
	if (jv_get_kind(e) != JV_KIND_ARRAY) {
		timers = jv_object_set(timers, jv_string(key),
				       JV_ARRAY(jv_string(ns), jv_number((double)(now_ms + delay)), jv_false()));
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

/* ---- the kubelet -------------------------------------------------------- */

static jv condition(const char *type, const char *status, const char *reason, const char *message, const char *now)
{
	jv c = JV_OBJECT(jv_string("type"), jv_string(type), jv_string("status"), jv_string(status),
			 jv_string("lastProbeTime"), jv_null(), jv_string("lastTransitionTime"), jv_string(now));

	if (reason)
		c = jv_object_set(c, jv_string("reason"), jv_string(reason));
	if (message)
		c = jv_object_set(c, jv_string("message"), jv_string(message));
	return c;
}

static int image_broken(const char *image)
{
	return sim_opts.broken_image && *sim_opts.broken_image && image && !fnmatch(sim_opts.broken_image, image, 0);
}

/* Names of the pod's containers, "[a b]" for the not-ready messages. */
static char *container_names(jv containers)
{
	struct kop_buf b = KOP_BUF_INIT;

	kop_buf_adds(&b, "[");
	jv_array_foreach(containers, i, c) {
		kop_buf_addf(&b, "%s%s", i ? " " : "", str(c, "name", ""));
		jv_free(c);
	}
	kop_buf_adds(&b, "]");
	return kop_buf_detach(&b, NULL);
}

/*
 * The pod's status at a stage: "running", "ErrImagePull", "ImagePullBackOff"
 * or "completed". The container states follow the stage; a container whose
 * image is fine runs even when another's is broken.
 */
static jv pod_status(jv pod, const char *stage, const char *now)
{
	jv containers = get(pod, "spec", "containers", NULL), cs = jv_array(), conds;
	const char *start = ksim_str(pod, "status.startTime");
	int all_ready = 1, completed = !strcmp(stage, "completed");
	char ip[32], cid[80];
	unsigned h = 0;
	jv st;

	for (const char *p = str(pod, "metadata.uid", ""); *p; p++)
		h = h * 31 + (unsigned char)*p;
	snprintf(ip, sizeof(ip), "10.244.%u.%u", (h >> 8) & 255, (h & 255) ? (h & 255) : 1);
	if (jv_get_kind(containers) != JV_KIND_ARRAY)
		containers = (jv_free(containers), jv_array());
	jv_array_foreach(containers, i, c) {
		const char *image = str(c, "image", "");
		jv state;
		int ready = 0;

		snprintf(cid, sizeof(cid), "containerd://%08x%08x%02d", h, (unsigned)random(), i);
		if (image_broken(image) && !completed) {
			struct kop_buf m = KOP_BUF_INIT;
			const char *reason = !strcmp(stage, "ErrImagePull") ? "ErrImagePull" : "ImagePullBackOff";

			if (!strcmp(reason, "ErrImagePull"))
				kop_buf_addf(&m, "rpc error: code = NotFound desc = failed to pull and unpack image \"%s\": failed to resolve reference \"%s\": not found",
					     image, image);
			else
				kop_buf_addf(&m, "Back-off pulling image \"%s\"", image);
			state = JV_OBJECT(jv_string("waiting"), JV_OBJECT(jv_string("reason"), jv_string(reason),
									  jv_string("message"), jv_string(m.buf)));
			kop_buf_release(&m);
			all_ready = 0;
		} else if (completed) {
			state = JV_OBJECT(jv_string("terminated"),
					  JV_OBJECT(jv_string("exitCode"), jv_number(0), jv_string("reason"),
						    jv_string("Completed"), jv_string("startedAt"),
						    jv_string(start ? start : now), jv_string("finishedAt"), jv_string(now),
						    jv_string("containerID"), jv_string(cid)));
			all_ready = 0;
		} else {
			state = JV_OBJECT(jv_string("running"), JV_OBJECT(jv_string("startedAt"), jv_string(now)));
			ready = 1;
		}
		{
			jv e = JV_OBJECT(jv_string("name"), jv_string(str(c, "name", "")), jv_string("state"), state,
					 jv_string("lastState"), jv_object(), jv_string("ready"), jv_bool(ready),
					 jv_string("restartCount"), jv_number(0), jv_string("image"), jv_string(image),
					 jv_string("imageID"), jv_string(""));

			if (ready || completed) {
				struct kop_buf id = KOP_BUF_INIT;

				kop_buf_addf(&id, "%s@sha256:%08x%08x", image, h, h ^ 0x5bd1e995u);
				e = jv_object_set(e, jv_string("imageID"), jv_string(id.buf));
				e = jv_object_set(e, jv_string("containerID"), jv_string(cid));
				kop_buf_release(&id);
			}
			e = jv_object_set(e, jv_string("started"), jv_bool(ready));
			cs = jv_array_append(cs, e);
		}
		jv_free(c);
	}
	if (all_ready && jv_array_length(jv_copy(containers)) > 0) {
		conds = JV_ARRAY(condition("Initialized", "True", NULL, NULL, now),
				 condition("Ready", "True", NULL, NULL, now),
				 condition("ContainersReady", "True", NULL, NULL, now),
				 condition("PodScheduled", "True", NULL, NULL, now));
	} else {
		char *names = container_names(containers);
		struct kop_buf m = KOP_BUF_INIT;
		const char *reason = completed ? "PodCompleted" : "ContainersNotReady";

		kop_buf_addf(&m, "containers with unready status: %s", names);
		conds = JV_ARRAY(condition("Initialized", "True", completed ? "PodCompleted" : NULL, NULL, now),
				 condition("Ready", "False", reason, completed ? NULL : m.buf, now),
				 condition("ContainersReady", "False", reason, completed ? NULL : m.buf, now),
				 condition("PodScheduled", "True", NULL, NULL, now));
		kop_buf_release(&m);
		free(names);
	}
	st = JV_OBJECT(jv_string("phase"),
		       jv_string(completed ? "Succeeded" : !strcmp(stage, "running") ? "Running" : "Pending"),
		       jv_string("conditions"), conds, jv_string("hostIP"), jv_string(NODE_IP), jv_string("hostIPs"),
		       JV_ARRAY(JV_OBJECT(jv_string("ip"), jv_string(NODE_IP)))) ;
	st = jv_object_set(st, jv_string("podIP"), jv_string(ip));
	st = jv_object_set(st, jv_string("podIPs"), JV_ARRAY(JV_OBJECT(jv_string("ip"), jv_string(ip))));
	st = jv_object_set(st, jv_string("startTime"), jv_string(start ? start : now));
	st = jv_object_set(st, jv_string("containerStatuses"), cs);
	st = jv_object_set(st, jv_string("qosClass"), jv_string(str(pod, "status.qosClass", "BestEffort")));
	jv_free(containers);
	return st;
}

/* The stage the stored status shows. */
static const char *pod_stage(jv pod)
{
	const char *phase = str(pod, "status.phase", "Pending");
	jv cs = get(pod, "status", "containerStatuses", NULL);
	const char *stage = "new";

	if (!strcmp(phase, "Running"))
		stage = "running";
	else if (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))
		stage = "completed";
	else if (jv_get_kind(cs) == JV_KIND_ARRAY) {
		jv_array_foreach(cs, i, c) {
			const char *r = ksim_str(c, "state.waiting.reason");

			if (r && !strcmp(r, "ErrImagePull"))
				stage = "ErrImagePull";
			else if (r && !strcmp(r, "ImagePullBackOff") && strcmp(stage, "ErrImagePull"))
				stage = "ImagePullBackOff";
			jv_free(c);
		}
	}
	jv_free(cs);
	return stage;
}

static int any_broken(jv pod)
{
	jv containers = get(pod, "spec", "containers", NULL);
	int broken = 0;

	if (jv_get_kind(containers) == JV_KIND_ARRAY) {
		jv_array_foreach(containers, i, c) {
			broken |= image_broken(ksim_str(c, "image"));
			jv_free(c);
		}
	}
	jv_free(containers);
	return broken;
}

static void sync_pod(const char *ns, jv pod)
{
	const char *stage = pod_stage(pod), *next = NULL;
	const char *policy = str(pod, "spec.restartPolicy", "Always");
	char key[128], now[32];
	long delay = sim_opts.pod_start_ms;

	if (deleting(pod) || !strcmp(stage, "completed") || strcmp(str(pod, "spec.nodeName", ""), NODE_NAME))
		return;	/* (sim_pods.c binds the pods a client makes to this node) */
	if (!strcmp(stage, "new")) {
		next = any_broken(pod) ? "ErrImagePull" : "running";
	} else if (!strcmp(stage, "ErrImagePull")) {
		next = any_broken(pod) ? "ImagePullBackOff" : "running";
	} else if (!strcmp(stage, "ImagePullBackOff")) {
		if (!any_broken(pod))
			next = "running";	/* the image was fixed in place */
	} else if (!strcmp(stage, "running") && strcmp(policy, "Always")) {	/* Never, OnFailure: they end */
		next = "completed";
		delay = sim_opts.pod_run_ms;
	}
	if (!next)
		return;
	snprintf(key, sizeof(key), "pod/%s/%s", str(pod, "metadata.uid", ""), stage);
	if (!timer_due(ns, key, delay))
		return;
	now_rfc(now);
	put_status(KUBELET, "/api/v1", "pods", jv_copy(pod), pod_status(pod, next, now), "kubelet");
}

/* ---- ReplicaSets ------------------------------------------------------- */

static jv new_pod(jv owner, const char *owner_kind, const char *name, const char *generate_name, jv labels)
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

struct podinfo {
	int active, ready;
};

static void sync_rs(const char *ns, jv rs, jv pods)
{
	const char *uid = str(rs, "metadata.uid", "");
	long want = num(rs, "spec", "replicas", NULL, 1);
	jv mine = jv_array(), status, old;
	int active = 0, ready = 0, n;

	if (deleting(rs))
		return;
	jv_array_foreach(pods, i, p) {
		if (is_controlled_by(p, uid) && !deleting(p)) {
			mine = jv_array_append(mine, jv_copy(p));
			active++;
			ready += pod_ready(p);
		}
		jv_free(p);
	}
	jv_free(pods);
	if (active < want) {
		for (n = active; n < want; n++) {
			char suffix[8];
			struct kop_buf name = KOP_BUF_INIT, gen = KOP_BUF_INIT;
			jv labels = get(rs, "spec", "template", "metadata");

			random_suffix(suffix);
			kop_buf_addf(&gen, "%s-", str(rs, "metadata.name", ""));
			kop_buf_addf(&name, "%s%s", gen.buf, suffix);
			jv tl = jv_get_kind(labels) == JV_KIND_OBJECT ? jv_object_get(labels, jv_string("labels")) :
									 (jv_free(labels), jv_null());
			if (jv_get_kind(tl) != JV_KIND_OBJECT)
				tl = (jv_free(tl), jv_object());
			call(KCM, "POST", "/api/v1", ns, "pods", NULL, NULL, "kube-controller-manager",
			     new_pod(rs, "ReplicaSet", name.buf, gen.buf, tl));
			kop_buf_release(&name);
			kop_buf_release(&gen);
		}
	} else if (active > want) {
		/* not ready first, then the newest */
		int excess = active - (int)want;

		for (int pass = 0; pass < 2 && excess > 0; pass++) {
			for (int i = jv_array_length(jv_copy(mine)) - 1; i >= 0 && excess > 0; i--) {
				jv p = jv_array_get(jv_copy(mine), i);

				if (pass == 0 ? !pod_ready(p) : pod_ready(p)) {
					char *name = kop_strdup(str(p, "metadata.name", ""));

					call(KCM, "DELETE", "/api/v1", ns, "pods", name, NULL, NULL, jv_null());
					free(name);
					excess--;
					mine = jv_array_set(mine, i, jv_null());
				}
				jv_free(p);
			}
		}
	}
	jv_free(mine);
	status = JV_OBJECT(jv_string("replicas"), jv_number(active));
	if (active)
		status = jv_object_set(status, jv_string("fullyLabeledReplicas"), jv_number(active));
	if (ready) {
		status = jv_object_set(status, jv_string("readyReplicas"), jv_number(ready));
		status = jv_object_set(status, jv_string("availableReplicas"), jv_number(ready));
	}
	status = jv_object_set(status, jv_string("observedGeneration"),
			       jv_number((double)num(rs, "metadata", "generation", NULL, 1)));
	old = get(rs, "status", NULL, NULL);
	if (!jv_equal(old, jv_copy(status)))
		put_status(KCM, "/apis/apps/v1", "replicasets", jv_copy(rs), status, "kube-controller-manager");
	else
		jv_free(status);
}

/* ---- Deployments --------------------------------------------------------- */

/* An int-or-percent of total, rounded up or down. */
static long int_or_percent(jv v, long total, int up, long def)
{
	long n = def;

	if (jv_get_kind(v) == JV_KIND_NUMBER)
		n = (long)jv_number_value(v);
	else if (jv_get_kind(v) == JV_KIND_STRING) {
		const char *s = jv_string_value(v);
		char *end;
		long pct = strtol(s, &end, 10);

		if (*end == '%')
			n = up ? (pct * total + 99) / 100 : pct * total / 100;
		else if (!*end)
			n = pct;
	}
	jv_free(v);
	return n;
}

/* An annotation (keys have dots, so not through ksim_str), borrowed from obj, or NULL. */
static const char *annotation(jv obj, const char *key)
{
	jv a = get(obj, "metadata", "annotations", key);
	const char *s = jv_get_kind(a) == JV_KIND_STRING ? jv_string_value(a) : NULL;

	/* obj still holds the string */
	jv_free(a);
	return s;
}

static long rs_revision(jv rs)
{
	const char *r = annotation(rs, "deployment.kubernetes.io/revision");

	return r ? strtol(r, NULL, 10) : 0;
}

/* Sets the condition of its type: unchanged when status, reason and message are; moves to the end otherwise. */
static jv set_condition(jv conds, const char *type, const char *status, const char *reason, const char *message,
			const char *now, int touch)
{
	jv out = jv_array();
	const char *ltt = now;
	char keep_ltt[40] = "";

	if (jv_get_kind(conds) != JV_KIND_ARRAY)
		conds = (jv_free(conds), jv_array());
	jv_array_foreach(conds, i, c) {
		const char *t = ksim_str(c, "type");

		if (t && !strcmp(t, type)) {
			const char *s = ksim_str(c, "status"), *r = ksim_str(c, "reason"), *m = ksim_str(c, "message");

			if (s && r && m && !strcmp(s, status) && !strcmp(r, reason) && !strcmp(m, message) && !touch) {
				jv_free(c);
				jv_free(out);
				return conds;
			}
			if (s && !strcmp(s, status) && ksim_str(c, "lastTransitionTime"))
				snprintf(keep_ltt, sizeof(keep_ltt), "%s", ksim_str(c, "lastTransitionTime"));
			jv_free(c);
			continue;
		}
		out = jv_array_append(out, c);
	}
	jv_free(conds);
	if (*keep_ltt)
		ltt = keep_ltt;
	return jv_array_append(out, JV_OBJECT(jv_string("type"), jv_string(type), jv_string("status"),
					      jv_string(status), jv_string("lastUpdateTime"), jv_string(now),
					      jv_string("lastTransitionTime"), jv_string(ltt), jv_string("reason"),
					      jv_string(reason), jv_string("message"), jv_string(message)));
}

static jv find_condition(jv conds, const char *type)
{
	jv found = jv_null();

	if (jv_get_kind(conds) == JV_KIND_ARRAY) {
		jv_array_foreach(conds, i, c) {
			const char *t = ksim_str(c, "type");

			if (t && !strcmp(t, type) && jv_get_kind(found) == JV_KIND_NULL)
				found = c;
			else
				jv_free(c);
		}
	}
	jv_free(conds);
	return found;
}

static int set_rs_replicas(jv rs, long replicas, long desired, long max)
{
	char d[24], m[24];

	snprintf(d, sizeof(d), "%ld", desired);
	snprintf(m, sizeof(m), "%ld", max);
	rs = jv_setpath(rs, JV_ARRAY(jv_string("spec"), jv_string("replicas")), jv_number(replicas));
	if (desired >= 0) {
		rs = jv_setpath(rs, JV_ARRAY(jv_string("metadata"), jv_string("annotations"),
					     jv_string("deployment.kubernetes.io/desired-replicas")), jv_string(d));
		rs = jv_setpath(rs, JV_ARRAY(jv_string("metadata"), jv_string("annotations"),
					     jv_string("deployment.kubernetes.io/max-replicas")), jv_string(m));
	}
	return put_object("/apis/apps/v1", "replicasets", rs);
}

static jv new_rs(jv d, const char *hash, long replicas, long revision, long surge)
{
	const char *name = str(d, "metadata.name", "");
	struct kop_buf n = KOP_BUF_INIT;
	jv tmpl = get(d, "spec", "template", NULL), sel = get(d, "spec", "selector", NULL), labels, rs;
	char buf[24];

	if (jv_get_kind(tmpl) != JV_KIND_OBJECT)
		tmpl = (jv_free(tmpl), jv_object());
	labels = get(tmpl, "metadata", "labels", NULL);
	if (jv_get_kind(labels) != JV_KIND_OBJECT)
		labels = (jv_free(labels), jv_object());
	labels = jv_object_set(labels, jv_string("pod-template-hash"), jv_string(hash));
	tmpl = jv_setpath(tmpl, JV_ARRAY(jv_string("metadata"), jv_string("labels")), jv_copy(labels));
	if (jv_get_kind(sel) != JV_KIND_OBJECT)
		sel = (jv_free(sel), jv_object());
	sel = jv_setpath(sel, JV_ARRAY(jv_string("matchLabels"), jv_string("pod-template-hash")), jv_string(hash));
	kop_buf_addf(&n, "%s-%s", name, hash);
	rs = JV_OBJECT(jv_string("apiVersion"), jv_string("apps/v1"), jv_string("kind"), jv_string("ReplicaSet"),
		       jv_string("metadata"),
		       JV_OBJECT(jv_string("name"), jv_string(n.buf), jv_string("namespace"),
				 jv_string(str(d, "metadata.namespace", "")), jv_string("labels"), labels,
				 jv_string("annotations"), jv_object(), jv_string("ownerReferences"),
				 owner_ref(d, "apps/v1", "Deployment")),
		       jv_string("spec"),
		       JV_OBJECT(jv_string("replicas"), jv_number(replicas), jv_string("selector"), sel,
				 jv_string("template"), tmpl));
	snprintf(buf, sizeof(buf), "%ld", num(d, "spec", "replicas", NULL, 1));
	rs = jv_setpath(rs, JV_ARRAY(jv_string("metadata"), jv_string("annotations"),
				     jv_string("deployment.kubernetes.io/desired-replicas")), jv_string(buf));
	snprintf(buf, sizeof(buf), "%ld", num(d, "spec", "replicas", NULL, 1) + surge);
	rs = jv_setpath(rs, JV_ARRAY(jv_string("metadata"), jv_string("annotations"),
				     jv_string("deployment.kubernetes.io/max-replicas")), jv_string(buf));
	snprintf(buf, sizeof(buf), "%ld", revision);
	rs = jv_setpath(rs, JV_ARRAY(jv_string("metadata"), jv_string("annotations"),
				     jv_string("deployment.kubernetes.io/revision")), jv_string(buf));
	kop_buf_release(&n);
	return rs;
}

static void sync_deploy(const char *ns, jv d, jv rss)
{
	const char *uid = str(d, "metadata.uid", "");
	long replicas = num(d, "spec", "replicas", NULL, 1);
	long deadline = num(d, "spec", "progressDeadlineSeconds", NULL, 600);
	const char *stype = str(d, "spec.strategy.type", "RollingUpdate");
	int recreate = !strcmp(stype, "Recreate");
	long surge, unavail, maxrev = 0, sum_spec = 0, sum_status = 0, sum_ready = 0, sum_avail = 0, old_active = 0;
	char hash[16], now[32], msg[512];
	jv tmpl = get(d, "spec", "template", NULL), newrs = jv_null(), olds = jv_array(), status, conds, oldst, prog;
	const char *newname;
	int complete, progress, scaling_only;

	if (deleting(d)) {
		jv_free(tmpl);
		jv_free(olds);
		return;
	}
	now_rfc(now);
	owner_template_hash(d, hash, sizeof(hash));
	jv_free(tmpl);
	{
		jv ru = get(d, "spec", "strategy", "rollingUpdate");

		surge = recreate ? 0 : int_or_percent(jv_get_kind(ru) == JV_KIND_OBJECT ?
							      jv_object_get(jv_copy(ru), jv_string("maxSurge")) :
							      jv_string("25%"),
						      replicas, 1, 0);
		unavail = recreate ? replicas :
				     int_or_percent(jv_get_kind(ru) == JV_KIND_OBJECT ?
							    jv_object_get(jv_copy(ru), jv_string("maxUnavailable")) :
							    jv_string("25%"),
						    replicas, 0, 0);
		if (jv_get_kind(ru) == JV_KIND_OBJECT && !jv_object_has(jv_copy(ru), jv_string("maxSurge")))
			surge = recreate ? 0 : (25 * replicas + 99) / 100;
		if (jv_get_kind(ru) == JV_KIND_OBJECT && !jv_object_has(jv_copy(ru), jv_string("maxUnavailable")))
			unavail = recreate ? replicas : 25 * replicas / 100;
		jv_free(ru);
		if (!recreate && surge == 0 && unavail == 0)
			unavail = 1;
	}
	jv_array_foreach(rss, i, rs) {
		if (!is_controlled_by(rs, uid) || deleting(rs)) {
			jv_free(rs);
			continue;
		}
		if (rs_revision(rs) > maxrev)
			maxrev = rs_revision(rs);
		sum_spec += num(rs, "spec", "replicas", NULL, 1);
		sum_status += num(rs, "status", "replicas", NULL, 0);
		sum_ready += num(rs, "status", "readyReplicas", NULL, 0);
		sum_avail += num(rs, "status", "availableReplicas", NULL, 0);
		{
			const char *h = ksim_str(rs, "metadata.labels.pod-template-hash");

			if (h && !strcmp(h, hash) && jv_get_kind(newrs) == JV_KIND_NULL) {
				jv_free(newrs);
				newrs = rs;
			} else {
				old_active += num(rs, "spec", "replicas", NULL, 1) + num(rs, "status", "replicas", NULL, 0);
				olds = jv_array_append(olds, rs);
			}
		}
	}
	oldst = get(d, "status", NULL, NULL);
	if (jv_get_kind(oldst) != JV_KIND_OBJECT)
		oldst = (jv_free(oldst), jv_object());
	if (jv_get_kind(newrs) == JV_KIND_NULL) {
		long n = replicas;
		int code;
		struct kop_buf name = KOP_BUF_INIT;

		if (recreate && old_active > 0)
			n = 0;
		else if (old_active > 0) {
			n = replicas + surge - sum_spec;
			n = n < 0 ? 0 : n > replicas ? replicas : n;
		}
		code = call(KCM, "POST", "/apis/apps/v1", ns, "replicasets", NULL, NULL, "kube-controller-manager",
			    new_rs(d, hash, n, maxrev + 1, surge));
		kop_buf_addf(&name, "%s-%s", str(d, "metadata.name", ""), hash);
		if (code == 201) {
			snprintf(msg, sizeof(msg), "Created new replica set \"%s\"", name.buf);
			conds = set_condition(get(oldst, "conditions", NULL, NULL), "Progressing", "True",
					      "NewReplicaSetCreated", msg, now, 0);
			put_status(KCM, "/apis/apps/v1", "deployments", jv_copy(d),
				   jv_object_set(jv_copy(oldst), jv_string("conditions"), conds),
				   "kube-controller-manager");
		}
		kop_buf_release(&name);
		goto out;
	}
	newname = str(newrs, "metadata.name", "");
	/* scale */
	{
		long nspec = num(newrs, "spec", "replicas", NULL, 1), target = nspec;
		long navail = num(newrs, "status", "availableReplicas", NULL, 0);
		int wrote = 0;

		if (recreate) {
			int old_pods = 0;

			jv_array_foreach(olds, i, o) {
				if (num(o, "spec", "replicas", NULL, 1) > 0) {
					set_rs_replicas(jv_copy(o), 0, -1, -1);
					wrote = 1;
				}
				old_pods += num(o, "status", "replicas", NULL, 0) > 0;
				jv_free(o);
			}
			if (!wrote && !old_pods)
				target = replicas;
		} else if (old_active == 0 || nspec > replicas) {
			target = replicas;
		} else if (nspec < replicas) {
			long up = replicas + surge - sum_spec;

			if (up > 0)
				target = nspec + up > replicas ? replicas : nspec + up;
		}
		if (target != nspec) {
			set_rs_replicas(jv_copy(newrs), target, replicas, replicas + surge);
			wrote = 1;
			sum_spec += target - nspec;
			nspec = target;
		}
		if (!recreate && !wrote && jv_array_length(jv_copy(olds)) > 0) {
			long min_avail = replicas - unavail;
			long max_down = sum_spec - min_avail - (nspec - navail);
			long total_down = sum_avail - min_avail;

			if (max_down > 0) {
				jv_array_foreach(olds, i, o) {
					long spec = num(o, "spec", "replicas", NULL, 1);
					long av = num(o, "status", "availableReplicas", NULL, 0), down = 0;
					long unhealthy = spec - av;

					if (unhealthy > 0 && max_down > 0) {
						down = unhealthy < max_down ? unhealthy : max_down;
						max_down -= down;
					}
					if (spec - down > 0 && total_down > 0 && max_down > 0) {
						long more = spec - down;

						more = more < total_down ? more : total_down;
						more = more < max_down ? more : max_down;
						down += more;
						total_down -= more;
						max_down -= more;
					}
					if (down > 0) {
						set_rs_replicas(jv_copy(o), spec - down, -1, -1);
						wrote = 1;
					}
					jv_free(o);
				}
			}
		}
		if (wrote)
			goto out;
	}
	/* status */
	status = JV_OBJECT(jv_string("observedGeneration"),
			   jv_number((double)num(d, "metadata", "generation", NULL, 1)));
	if (sum_status)
		status = jv_object_set(status, jv_string("replicas"), jv_number(sum_status));
	if (num(newrs, "status", "replicas", NULL, 0))
		status = jv_object_set(status, jv_string("updatedReplicas"),
				       jv_number(num(newrs, "status", "replicas", NULL, 0)));
	if (sum_ready)
		status = jv_object_set(status, jv_string("readyReplicas"), jv_number(sum_ready));
	if (sum_avail)
		status = jv_object_set(status, jv_string("availableReplicas"), jv_number(sum_avail));
	if (sum_spec - sum_avail > 0)
		status = jv_object_set(status, jv_string("unavailableReplicas"), jv_number(sum_spec - sum_avail));
	conds = get(oldst, "conditions", NULL, NULL);
	if (jv_get_kind(conds) != JV_KIND_ARRAY)
		conds = (jv_free(conds), jv_array());
	if (sum_avail >= replicas - unavail)
		conds = set_condition(conds, "Available", "True", "MinimumReplicasAvailable",
				      "Deployment has minimum availability.", now, 0);
	else
		conds = set_condition(conds, "Available", "False", "MinimumReplicasUnavailable",
				      "Deployment does not have minimum availability.", now, 0);
	complete = num(newrs, "status", "replicas", NULL, 0) == replicas && sum_status == replicas &&
		   sum_avail == replicas;
	progress = num(newrs, "status", "replicas", NULL, 0) > num(oldst, "updatedReplicas", NULL, NULL, 0) ||
		   sum_ready > num(oldst, "readyReplicas", NULL, NULL, 0) ||
		   sum_avail > num(oldst, "availableReplicas", NULL, NULL, 0) ||
		   sum_status < num(oldst, "replicas", NULL, NULL, 0);
	scaling_only = old_active == 0;
	prog = find_condition(jv_copy(conds), "Progressing");
	if (complete) {
		snprintf(msg, sizeof(msg), "ReplicaSet \"%s\" has successfully progressed.", newname);
		conds = set_condition(conds, "Progressing", "True", "NewReplicaSetAvailable", msg, now, 0);
	} else if (scaling_only && !strcmp(str(prog, "reason", ""), "NewReplicaSetAvailable") &&
		   strstr(str(prog, "message", ""), newname)) {
		/* a scaling event leaves Progressing as it was */
	} else if (jv_get_kind(prog) == JV_KIND_NULL) {
		snprintf(msg, sizeof(msg), "Found new replica set \"%s\"", newname);
		conds = set_condition(conds, "Progressing", "True", "FoundNewReplicaSet", msg, now, 0);
	} else if (progress) {
		snprintf(msg, sizeof(msg), "ReplicaSet \"%s\" is progressing.", newname);
		conds = set_condition(conds, "Progressing", "True", "ReplicaSetUpdated", msg, now, 1);
	} else if (strcmp(str(prog, "reason", ""), "ProgressDeadlineExceeded")) {
		time_t last;

		if (!kop_time_parse(str(prog, "lastUpdateTime", ""), &last)) {
			if (time(NULL) - last >= deadline) {
				snprintf(msg, sizeof(msg), "ReplicaSet \"%s\" has timed out progressing.", newname);
				conds = set_condition(conds, "Progressing", "False", "ProgressDeadlineExceeded", msg,
						      now, 0);
			} else {
				char key[160];

				/* look again when the deadline passes */
				snprintf(key, sizeof(key), "deadline/%s/%s", uid, str(prog, "lastUpdateTime", ""));
				timer_due(ns, key, (long)(last + deadline - time(NULL)) * 1000 + 10);
			}
		}
	}
	jv_free(prog);
	status = jv_object_set(status, jv_string("conditions"), conds);
	{
		char rev[24];
		const char *cur = annotation(d, "deployment.kubernetes.io/revision");

		snprintf(rev, sizeof(rev), "%ld", rs_revision(newrs));
		if (!cur || strcmp(cur, rev)) {
			/* the revision annotation follows the new ReplicaSet's; the status waits for the next pass */
			jv_free(status);
			put_object("/apis/apps/v1", "deployments",
				   jv_setpath(jv_copy(d), JV_ARRAY(jv_string("metadata"), jv_string("annotations"),
								   jv_string("deployment.kubernetes.io/revision")),
					      jv_string(rev)));
		} else if (!jv_equal(jv_copy(oldst), jv_copy(status))) {
			put_status(KCM, "/apis/apps/v1", "deployments", jv_copy(d), status, "kube-controller-manager");
		} else {
			jv_free(status);
		}
	}
out:
	jv_free(oldst);
	jv_free(newrs);
	jv_free(olds);
}

/* ---- StatefulSets, PVCs -------------------------------------------------- */

static jv new_pvc(jv sts, jv tmpl, const char *name)
{
	jv md = get(tmpl, "metadata", NULL, NULL), spec = get(tmpl, "spec", NULL, NULL);
	jv labels = get(sts, "spec", "selector", "matchLabels");

	if (jv_get_kind(md) != JV_KIND_OBJECT)
		md = (jv_free(md), jv_object());
	if (jv_get_kind(spec) != JV_KIND_OBJECT)
		spec = (jv_free(spec), jv_object());
	if (jv_get_kind(labels) != JV_KIND_OBJECT)
		labels = (jv_free(labels), jv_object());
	{
		jv tl = jv_object_get(jv_copy(md), jv_string("labels"));

		if (jv_get_kind(tl) == JV_KIND_OBJECT)
			labels = jv_object_merge(tl, labels);
		else
			jv_free(tl);
	}
	md = jv_object_delete(md, jv_string("creationTimestamp"));
	md = jv_object_set(md, jv_string("name"), jv_string(name));
	md = jv_object_set(md, jv_string("namespace"), jv_string(str(sts, "metadata.namespace", "")));
	md = jv_object_set(md, jv_string("labels"), labels);
	md = jv_object_set(md, jv_string("finalizers"), JV_ARRAY(jv_string("kubernetes.io/pvc-protection")));
	if (!jv_object_has(jv_copy(spec), jv_string("volumeMode")))
		spec = jv_object_set(spec, jv_string("volumeMode"), jv_string("Filesystem"));
	return JV_OBJECT(jv_string("apiVersion"), jv_string("v1"), jv_string("kind"), jv_string("PersistentVolumeClaim"),
			 jv_string("metadata"), md, jv_string("spec"), spec);
}

static jv find_named(jv list, const char *name)
{
	jv found = jv_null();

	jv_array_foreach(list, i, o) {
		const char *n = ksim_str(o, "metadata.name");

		if (n && !strcmp(n, name) && jv_get_kind(found) == JV_KIND_NULL)
			found = o;
		else
			jv_free(o);
	}
	jv_free(list);
	return found;
}

static void sync_sts(const char *ns, jv sts, jv pods, jv pvcs)
{
	const char *uid = str(sts, "metadata.uid", ""), *name = str(sts, "metadata.name", "");
	long replicas = num(sts, "spec", "replicas", NULL, 1);
	long partition = num(sts, "spec", "updateStrategy", "rollingUpdate", 0);
	int parallel = !strcmp(str(sts, "spec.podManagementPolicy", "OrderedReady"), "Parallel");
	int ondelete = !strcmp(str(sts, "spec.updateStrategy.type", "RollingUpdate"), "OnDelete");
	char hash[16], rev[300];
	jv tmpl = get(sts, "spec", "template", NULL), mine = jv_object(), status, old;
	long count = 0, ready = 0, current = 0, updated = 0, maxord = -1;
	const char *currev;
	int acted = 0, all_ready = 1;

	if (deleting(sts)) {
		jv_free(tmpl);
		jv_free(mine);
		return;
	}
	{
		jv pr = get(sts, "spec", "updateStrategy", "rollingUpdate");

		partition = jv_get_kind(pr) == JV_KIND_OBJECT ? num(pr, "partition", NULL, NULL, 0) : 0;
		jv_free(pr);
	}
	owner_template_hash(sts, hash, sizeof(hash));
	snprintf(rev, sizeof(rev), "%s-%s", name, hash);
	currev = str(sts, "status.currentRevision", rev);
	jv_array_foreach(pods, i, p) {
		const char *n = ksim_str(p, "metadata.name");
		size_t len = strlen(name);

		if (is_controlled_by(p, uid) && n && !strncmp(n, name, len) && n[len] == '-') {
			char *end;
			long ord = strtol(n + len + 1, &end, 10);
			char key[24];

			if (!*end && ord >= 0) {
				const char *r = str(p, "metadata.labels.controller-revision-hash", "");

				snprintf(key, sizeof(key), "%ld", ord);
				mine = jv_object_set(mine, jv_string(key), jv_copy(p));
				count++;
				ready += pod_ready(p);
				current += !strcmp(r, currev);
				updated += !strcmp(r, rev);
				if (ord > maxord)
					maxord = ord;
			}
		}
		jv_free(p);
	}
	jv_free(pods);
	/* create or wait, in order */
	for (long ord = 0; ord < replicas && !acted; ord++) {
		char key[24], pname[300];
		jv p;

		snprintf(key, sizeof(key), "%ld", ord);
		snprintf(pname, sizeof(pname), "%s-%ld", name, ord);
		p = jv_object_get(jv_copy(mine), jv_string(key));
		if (!jv_is_valid(p)) {
			jv claims = get(sts, "spec", "volumeClaimTemplates", NULL), vols = jv_array(), pod, labels;

			jv_free(p);
			if (jv_get_kind(claims) == JV_KIND_ARRAY) {
				jv_array_foreach(claims, i, c) {
					char cname[600];
					jv have;

					snprintf(cname, sizeof(cname), "%s-%s", str(c, "metadata.name", ""), pname);
					have = find_named(jv_copy(pvcs), cname);
					if (jv_get_kind(have) == JV_KIND_NULL)
						call(KCM, "POST", "/api/v1", ns, "persistentvolumeclaims", NULL, NULL,
						     "kube-controller-manager", new_pvc(sts, c, cname));
					jv_free(have);
					vols = jv_array_append(vols, JV_OBJECT(jv_string("name"),
									       jv_string(str(c, "metadata.name", "")),
									       jv_string("persistentVolumeClaim"),
									       JV_OBJECT(jv_string("claimName"),
											 jv_string(cname))));
					jv_free(c);
				}
			}
			jv_free(claims);
			labels = get(tmpl, "metadata", "labels", NULL);
			if (jv_get_kind(labels) != JV_KIND_OBJECT)
				labels = (jv_free(labels), jv_object());
			labels = jv_object_set(labels, jv_string("controller-revision-hash"), jv_string(rev));
			labels = jv_object_set(labels, jv_string("statefulset.kubernetes.io/pod-name"),
					       jv_string(pname));
			labels = jv_object_set(labels, jv_string("apps.kubernetes.io/pod-index"), jv_string(key));
			pod = new_pod(sts, "StatefulSet", pname, NULL, labels);
			pod = jv_setpath(pod, JV_ARRAY(jv_string("spec"), jv_string("hostname")), jv_string(pname));
			if (ksim_str(sts, "spec.serviceName"))
				pod = jv_setpath(pod, JV_ARRAY(jv_string("spec"), jv_string("subdomain")),
						 jv_string(ksim_str(sts, "spec.serviceName")));
			if (jv_array_length(jv_copy(vols)) > 0) {
				jv v = jv_getpath(jv_copy(pod), JV_ARRAY(jv_string("spec"), jv_string("volumes")));

				if (jv_get_kind(v) != JV_KIND_ARRAY)
					v = (jv_free(v), jv_array());
				pod = jv_setpath(pod, JV_ARRAY(jv_string("spec"), jv_string("volumes")),
						 jv_array_concat(vols, v));
			} else {
				jv_free(vols);
			}
			if (call(KCM, "POST", "/api/v1", ns, "pods", NULL, NULL, "kube-controller-manager", pod) == 201) {
				/* counted at once, as the StatefulSet controller does */
				count++;
				updated++;
				current += !strcmp(rev, currev);
			}
			acted = !parallel;
			all_ready = 0;
			continue;
		}
		if (!pod_ready(p)) {
			all_ready = 0;
			if (!parallel)
				acted = 1;
		}
		jv_free(p);
	}
	/* scale down, highest ordinal first, once the rest is ready */
	if (!acted && all_ready) {
		for (long ord = maxord; ord >= replicas && !acted; ord--) {
			char key[24];
			jv p;

			snprintf(key, sizeof(key), "%ld", ord);
			p = jv_object_get(jv_copy(mine), jv_string(key));
			if (jv_is_valid(p) && !deleting(p)) {
				char *pn = kop_strdup(str(p, "metadata.name", ""));

				call(KCM, "DELETE", "/api/v1", ns, "pods", pn, NULL, NULL, jv_null());
				free(pn);
				acted = 1;
			}
			jv_free(p);
		}
	}
	/* rolling update, highest ordinal first, one at a time, once all are ready */
	if (!acted && all_ready && !ondelete) {
		for (long ord = replicas - 1; ord >= partition && !acted; ord--) {
			char key[24];
			jv p;

			snprintf(key, sizeof(key), "%ld", ord);
			p = jv_object_get(jv_copy(mine), jv_string(key));
			if (jv_is_valid(p) && strcmp(str(p, "metadata.labels.controller-revision-hash", ""), rev)) {
				char *pn = kop_strdup(str(p, "metadata.name", ""));

				call(KCM, "DELETE", "/api/v1", ns, "pods", pn, NULL, NULL, jv_null());
				free(pn);
				acted = 1;
			}
			jv_free(p);
		}
	}
	/* status */
	status = JV_OBJECT(jv_string("observedGeneration"),
			   jv_number((double)num(sts, "metadata", "generation", NULL, 1)), jv_string("replicas"),
			   jv_number(count));
	if (ready)
		status = jv_object_set(status, jv_string("readyReplicas"), jv_number(ready));
	if (updated == count && ready == count && count == replicas) {
		currev = rev;
		current = updated;
	}
	if (current)
		status = jv_object_set(status, jv_string("currentReplicas"), jv_number(current));
	if (updated)
		status = jv_object_set(status, jv_string("updatedReplicas"), jv_number(updated));
	status = jv_object_set(status, jv_string("currentRevision"), jv_string(currev));
	status = jv_object_set(status, jv_string("updateRevision"), jv_string(rev));
	status = jv_object_set(status, jv_string("collisionCount"), jv_number(0));
	status = jv_object_set(status, jv_string("availableReplicas"), jv_number(ready));
	old = get(sts, "status", NULL, NULL);
	if (!jv_equal(old, jv_copy(status)))
		put_status(KCM, "/apis/apps/v1", "statefulsets", jv_copy(sts), status, "kube-controller-manager");
	else
		jv_free(status);
	jv_free(mine);
	jv_free(tmpl);
}

static int pvc_in_use(jv pods, const char *claim)
{
	int used = 0;

	jv_array_foreach(pods, i, p) {
		jv vols = get(p, "spec", "volumes", NULL);

		if (jv_get_kind(vols) == JV_KIND_ARRAY) {
			jv_array_foreach(vols, j, v) {
				const char *c = ksim_str(v, "persistentVolumeClaim.claimName");

				used |= c && !strcmp(c, claim);
				jv_free(v);
			}
		}
		jv_free(vols);
		jv_free(p);
	}
	jv_free(pods);
	return used;
}

/* The binder and a dynamic provisioner in one: every Pending claim is Bound; pvc-protection. */
static void sync_pvc(jv pvc, jv pods)
{
	const char *phase = str(pvc, "status.phase", "Pending");

	if (deleting(pvc)) {
		jv fin = get(pvc, "metadata", "finalizers", NULL), keep = jv_array();
		int had = 0;

		if (jv_get_kind(fin) == JV_KIND_ARRAY) {
			jv_array_foreach(fin, i, f) {
				if (jv_get_kind(f) == JV_KIND_STRING && !strcmp(jv_string_value(f), "kubernetes.io/pvc-protection"))
					had = 1, jv_free(f);
				else
					keep = jv_array_append(keep, f);
			}
		}
		jv_free(fin);
		if (!pvc_in_use(pods, str(pvc, "metadata.name", "")) && had)
			put_object("/api/v1", "persistentvolumeclaims",
				   jv_setpath(jv_copy(pvc), JV_ARRAY(jv_string("metadata"), jv_string("finalizers")), keep));
		else
			jv_free(keep);
		return;
	}
	jv_free(pods);
	if (strcmp(phase, "Pending"))
		return;
	if (!ksim_str(pvc, "spec.volumeName")) {
		struct kop_buf v = KOP_BUF_INIT;
		jv p = jv_copy(pvc);

		kop_buf_addf(&v, "pvc-%s", str(pvc, "metadata.uid", ""));
		p = jv_setpath(p, JV_ARRAY(jv_string("spec"), jv_string("volumeName")), jv_string(v.buf));
		p = jv_setpath(p, JV_ARRAY(jv_string("metadata"), jv_string("annotations"),
					   jv_string("pv.kubernetes.io/bind-completed")), jv_string("yes"));
		p = jv_setpath(p, JV_ARRAY(jv_string("metadata"), jv_string("annotations"),
					   jv_string("pv.kubernetes.io/bound-by-controller")), jv_string("yes"));
		put_object("/api/v1", "persistentvolumeclaims", p);
		kop_buf_release(&v);
		return;
	}
	{
		jv modes = get(pvc, "spec", "accessModes", NULL), storage = get(pvc, "spec", "resources", "requests");
		jv st = JV_OBJECT(jv_string("phase"), jv_string("Bound"));

		if (jv_get_kind(modes) == JV_KIND_ARRAY)
			st = jv_object_set(st, jv_string("accessModes"), modes);
		else
			jv_free(modes);
		if (jv_get_kind(storage) == JV_KIND_OBJECT)
			st = jv_object_set(st, jv_string("capacity"), storage);
		else
			jv_free(storage);
		put_status(KCM, "/api/v1", "persistentvolumeclaims", jv_copy(pvc), st, "kube-controller-manager");
	}
}

/* ---- Services ------------------------------------------------------------ */

static void sync_svc(const char *ns, jv svc)
{
	const char *type = str(svc, "spec.type", "ClusterIP");
	jv ingress = get(svc, "status", "loadBalancer", "ingress");
	int has = jv_get_kind(ingress) == JV_KIND_ARRAY && jv_array_length(jv_copy(ingress)) > 0;
	char key[128], ip[32];

	jv_free(ingress);
	if (deleting(svc))
		return;
	if (!strcmp(type, "LoadBalancer") && !has) {
		snprintf(key, sizeof(key), "lb/%s", str(svc, "metadata.uid", ""));
		if (!timer_due(ns, key, sim_opts.lb_ms))
			return;
		ip_seq++;
		snprintf(ip, sizeof(ip), "172.18.%u.%u", 255 - ((ip_seq >> 8) & 63), (ip_seq & 255) ? ip_seq & 255 : 1);
		put_status(KCM, "/api/v1", "services", jv_copy(svc),
			   JV_OBJECT(jv_string("loadBalancer"),
				     JV_OBJECT(jv_string("ingress"),
					       JV_ARRAY(JV_OBJECT(jv_string("ip"), jv_string(ip), jv_string("ipMode"),
								  jv_string("VIP"))))),
			   "kube-controller-manager");
	} else if (strcmp(type, "LoadBalancer") && has) {
		put_status(KCM, "/api/v1", "services", jv_copy(svc),
			   JV_OBJECT(jv_string("loadBalancer"), jv_object()), "kube-controller-manager");
	}
}

/* ---- the Node -------------------------------------------------------------- */

/* The identities a kubelet reports (typed clients require them): made once, from random. */
static jv node_info_ids(jv st)
{
	char boot[40], machine[40], uuid[40];

	ksim_uuid(boot);
	ksim_uuid(uuid);
	ksim_uuid(machine);
	for (char *p = machine, *q = machine; ; q++)	/* a machine-id: 32 hex digits, no dashes */
		if (*q != '-' && !(*p++ = *q))
			break;
	st = jv_setpath(st, JV_ARRAY(jv_string("nodeInfo"), jv_string("machineID")), jv_string(machine));
	st = jv_setpath(st, JV_ARRAY(jv_string("nodeInfo"), jv_string("systemUUID")), jv_string(uuid));
	st = jv_setpath(st, JV_ARRAY(jv_string("nodeInfo"), jv_string("bootID")), jv_string(boot));
	st = jv_setpath(st, JV_ARRAY(jv_string("nodeInfo"), jv_string("kernelVersion")), jv_string("6.1.0-ksim"));
	st = jv_object_set(st, jv_string("daemonEndpoints"),
			   JV_OBJECT(jv_string("kubeletEndpoint"), JV_OBJECT(jv_string("Port"), jv_number(10250))));
	return jv_object_set(st, jv_string("images"), jv_array());
}

static void ensure_node(void)
{
	jv node = jv_null(), st;
	char now[32];
	int code = ksim_call(KUBELET, "GET", "/api/v1/nodes/" NODE_NAME, NULL, jv_null(), &node);

	now_rfc(now);
	if (code == 404) {
		jv_free(node);
		node = jv_null();
		jv labels = JV_OBJECT(jv_string("kubernetes.io/hostname"), jv_string(NODE_NAME),
				      jv_string("kubernetes.io/os"), jv_string("linux"), jv_string("kubernetes.io/arch"),
				      jv_string("amd64"), jv_string("beta.kubernetes.io/os"), jv_string("linux"),
				      jv_string("beta.kubernetes.io/arch"), jv_string("amd64"));
		jv body = JV_OBJECT(jv_string("apiVersion"), jv_string("v1"), jv_string("kind"), jv_string("Node"),
				    jv_string("metadata"),
				    JV_OBJECT(jv_string("name"), jv_string(NODE_NAME), jv_string("labels"), labels),
				    jv_string("spec"), JV_OBJECT(jv_string("podCIDR"), jv_string("10.244.0.0/16")));

		code = ksim_call(KUBELET, "POST", "/api/v1/nodes?fieldManager=kubelet", NULL, body, &node);
	}
	if (code != 200 && code != 201) {
		log_warn("simulated cluster: unable to create node '%s': code %d", NODE_NAME, code);
		jv_free(node);
		return;
	}
	if (ksim_str(node, "status.nodeInfo.kubeletVersion")) {
		jv_free(node);
		return;
	}
	{
		jv res = JV_OBJECT(jv_string("cpu"), jv_string("2"), jv_string("memory"), jv_string("24Gi"),
				   jv_string("pods"), jv_string("110"), jv_string("ephemeral-storage"),
				   jv_string("100Gi"));
		jv conds = jv_array();
		static const char *const pressure[][3] = {
			{ "MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available" },
			{ "DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure" },
			{ "PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available" },
		};

		for (size_t i = 0; i < 3; i++)
			conds = jv_array_append(conds, JV_OBJECT(jv_string("type"), jv_string(pressure[i][0]),
								 jv_string("status"), jv_string("False"),
								 jv_string("lastHeartbeatTime"), jv_string(now),
								 jv_string("lastTransitionTime"), jv_string(now),
								 jv_string("reason"), jv_string(pressure[i][1]),
								 jv_string("message"), jv_string(pressure[i][2])));
		conds = jv_array_append(conds, JV_OBJECT(jv_string("type"), jv_string("Ready"), jv_string("status"),
							 jv_string("True"), jv_string("lastHeartbeatTime"),
							 jv_string(now), jv_string("lastTransitionTime"), jv_string(now),
							 jv_string("reason"), jv_string("KubeletReady"),
							 jv_string("message"),
							 jv_string("kubelet is posting ready status")));
		st = JV_OBJECT(jv_string("capacity"), jv_copy(res), jv_string("allocatable"), res,
			       jv_string("conditions"), conds, jv_string("addresses"),
			       JV_ARRAY(JV_OBJECT(jv_string("type"), jv_string("InternalIP"), jv_string("address"),
						  jv_string(NODE_IP)),
					JV_OBJECT(jv_string("type"), jv_string("Hostname"), jv_string("address"),
						  jv_string(NODE_NAME))),
			       jv_string("nodeInfo"),
			       JV_OBJECT(jv_string("kubeletVersion"), jv_string("v1.30.0"), jv_string("kubeProxyVersion"),
					 jv_string("v1.30.0"), jv_string("operatingSystem"), jv_string("linux"),
					 jv_string("architecture"), jv_string("amd64"), jv_string("containerRuntimeVersion"),
					 jv_string("containerd://1.7.0")));
		st = jv_setpath(st, JV_ARRAY(jv_string("nodeInfo"), jv_string("osImage")), jv_string("ksim simulated node"));
		st = node_info_ids(st);
	}
	node = jv_object_set(node, jv_string("status"), st);
	code = ksim_call(KUBELET, "PUT", "/api/v1/nodes/" NODE_NAME "/status?fieldManager=kubelet", NULL, node, NULL);
	if (code != 200)
		log_warn("simulated cluster: unable to set the status of node '%s': code %d", NODE_NAME, code);
}

/* ---- for the controllers in sim_*.c -------------------------------------------- */

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

/* ---- the loop --------------------------------------------------------------- */

static const char *const sim_grs[] = { "deployments.apps", "replicasets.apps", "statefulsets.apps", "pods",
					 "persistentvolumeclaims", "services" };
enum { G_DEPLOY, G_RS, G_STS, G_POD, G_PVC, G_SVC, G_COUNT };

static int collect_fn(jv obj, const char *key, void *data)
{
	jv *arr = data;

	(void)key;
	*arr = jv_array_append(*arr, jv_copy(obj));
	return 0;
}

static void sync_namespace(const char *ns, int terminating, jv *g)
{
	if (!terminating) {
		jv_array_foreach(g[G_DEPLOY], i, d) {
			sync_deploy(ns, d, g[G_RS]);
			jv_free(d);
		}
		jv_array_foreach(g[G_RS], i, r) {
			sync_rs(ns, r, jv_copy(g[G_POD]));
			jv_free(r);
		}
		jv_array_foreach(g[G_STS], i, s) {
			sync_sts(ns, s, jv_copy(g[G_POD]), g[G_PVC]);
			jv_free(s);
		}
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
		sim_endpoints_sync(ns);
	}
	sim_defaults_sync(ns, terminating);
	sim_pods_sync(ns);
	jv_array_foreach(g[G_POD], i, p) {
		sync_pod(ns, p);
		jv_free(p);
	}
	jv_array_foreach(g[G_PVC], i, p) {
		sync_pvc(p, jv_copy(g[G_POD]));
		jv_free(p);
	}
}

/*
 * One pass over the dirty namespaces (consumed): for each, under the lock,
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
		for (int i = 0; i < G_COUNT; i++) {
			g[i] = jv_array();
			if (*ns)
				ksim_store_each(sim_grs[i], ns, NULL, collect_fn, &g[i]);
		}
		sync_namespace(ns, t, g);
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
	       !strcmp(gr, "pods") || !strcmp(gr, "persistentvolumeclaims") || !strcmp(gr, "services") ||
	       !strcmp(gr, "namespaces") || sim_ext_relevant(gr, name, deleted);
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

static void *sim_loop(void *arg)
{
	uint64_t cursor;
	jv dirty = jv_object();
	int ndirty = 0;	/* namespaces in dirty since the last pass */

	(void)arg;
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
				dirty = jv_object_set(dirty, jv_copy(ns), jv_true());
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
			/* drop fired timers nothing consumed (their object is gone) */
			{
				jv keep = jv_object();

				now_ms = kop_mono_ms();
				jv_object_foreach(timers, k, v) {
					jv at = jv_array_get(jv_copy(v), 1);

					if ((int64_t)jv_number_value(at) + 60000 > now_ms)
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
			} else if (relevant(ev.gr, ev.name, ev.type == KSIM_DELETED)) {
				const char *ns = !strcmp(ev.gr, "namespaces") ? ev.name : ev.ns;

				/* counted as they come: jv_object_length walks the object */
				if (*ns && !jv_object_has(jv_copy(dirty), jv_string(ns))) {
					dirty = jv_object_set(dirty, jv_string(ns), jv_true());
					ndirty++;
				}
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
		jv_free(hash_cache);
		hash_cache = jv_null();
	}
	running = 0;
}
