/*
 * What kube-apiserver fills in when a built-in object is created: the
 * defaulting functions of k8s.io/api's kinds (SetDefaults_*) and the status
 * a new object is stored with (the fields of its Status type that have no
 * omitempty), before its creator's managedFields are taken; then what
 * admission adds to a pod (ServiceAccount: the kube-api-access volume;
 * DefaultTolerationSeconds: the not-ready and unreachable tolerations;
 * Priority), which the creator does not own. Only what a client sees; the kinds that
 * create.c's prepare_create() handles itself are left to it.
 */
#include <stdlib.h>
#include <string.h>
#include "ksim.h"
#include "banned.h"

static jv path2(const char *a, const char *b)
{
	return b ? JV_ARRAY(jv_string(a), jv_string(b)) : JV_ARRAY(jv_string(a));
}

/* Sets obj.a.b (b may be NULL) to v when absent (v consumed). */
static jv dflt(jv obj, const char *a, const char *b, jv v)
{
	jv cur = jv_getpath(jv_copy(obj), path2(a, b));

	if (jv_get_kind(cur) == JV_KIND_NULL || !jv_is_valid(cur))
		obj = jv_setpath(obj, path2(a, b), v);
	else
		jv_free(v);
	jv_free(cur);
	return obj;
}

/* An object's field as an object ({} when absent or not an object). */
static jv obj_field(jv o, const char *key)
{
	jv v = jv_object_get(jv_copy(o), jv_string(key));

	if (jv_get_kind(v) != JV_KIND_OBJECT)
		v = (jv_free(v), jv_object());
	return v;
}

static jv set_absent(jv o, const char *key, jv v)
{
	if (jv_object_has(jv_copy(o), jv_string(key)))
		jv_free(v);
	else
		o = jv_object_set(o, jv_string(key), v);
	return o;
}

/* imagePullPolicy: Always for a :latest or untagged image, else IfNotPresent (SetDefaults_Container). */
static const char *pull_policy(const char *image)
{
	const char *slash = image ? strrchr(image, '/') : NULL, *base = slash ? slash + 1 : image, *colon;

	if (!image || strchr(image, '@'))
		return "IfNotPresent";
	colon = strchr(base, ':');
	return !colon || !strcmp(colon + 1, "latest") ? "Always" : "IfNotPresent";
}

static jv container_defaults(jv containers)
{
	jv out = jv_array();

	if (jv_get_kind(containers) != JV_KIND_ARRAY) {
		jv_free(containers);
		return out;
	}
	jv_array_foreach(containers, i, c) {
		if (jv_get_kind(c) == JV_KIND_OBJECT) {
			c = set_absent(c, "resources", jv_object());
			c = set_absent(c, "terminationMessagePath", jv_string("/dev/termination-log"));
			c = set_absent(c, "terminationMessagePolicy", jv_string("File"));
			c = set_absent(c, "imagePullPolicy", jv_string(pull_policy(ksim_str(c, "image"))));
		}
		out = jv_array_append(out, c);
	}
	jv_free(containers);
	return out;
}

/* The pod spec defaults (SetDefaults_PodSpec and its containers'). */
static jv pod_spec_defaults(jv spec)
{
	spec = jv_object_set(spec, jv_string("containers"),
			     container_defaults(jv_object_get(jv_copy(spec), jv_string("containers"))));
	if (jv_object_has(jv_copy(spec), jv_string("initContainers")))
		spec = jv_object_set(spec, jv_string("initContainers"),
				     container_defaults(jv_object_get(jv_copy(spec), jv_string("initContainers"))));
	spec = set_absent(spec, "restartPolicy", jv_string("Always"));
	spec = set_absent(spec, "terminationGracePeriodSeconds", jv_number(30));
	spec = set_absent(spec, "dnsPolicy", jv_string("ClusterFirst"));
	spec = set_absent(spec, "securityContext", jv_object());
	spec = set_absent(spec, "schedulerName", jv_string("default-scheduler"));
	spec = set_absent(spec, "enableServiceLinks", jv_true());
	return spec;
}

static jv toleration(const char *key)
{
	return JV_OBJECT(jv_string("key"), jv_string(key), jv_string("operator"), jv_string("Exists"),
			 jv_string("effect"), jv_string("NoExecute"), jv_string("tolerationSeconds"), jv_number(300));
}

/* 1 when the pod's tolerations (consumed) already tolerate key with effect NoExecute. */
static int tolerates(jv tols, const char *key)
{
	int yes = 0;

	jv_array_foreach(tols, i, t) {
		const char *k = ksim_str(t, "key"), *e = ksim_str(t, "effect"), *op = ksim_str(t, "operator");

		if ((!k || !*k) && op && !strcmp(op, "Exists"))
			yes = 1;	/* tolerates everything */
		else if (k && !strcmp(k, key) && (!e || !*e || !strcmp(e, "NoExecute")))
			yes = 1;
		jv_free(t);
	}
	jv_free(tols);
	return yes;
}

/*
 * The ServiceAccount admission's projected volume (token, the namespace's
 * kube-root-ca.crt, the namespace) and its mount in every container, unless
 * the pod opts out or mounts one already.
 */
static jv service_account_volume(jv spec, const char *uid)
{
	jv automount = jv_object_get(jv_copy(spec), jv_string("automountServiceAccountToken"));
	jv vols = jv_object_get(jv_copy(spec), jv_string("volumes")), containers;
	char name[32];
	static const char alnum[] = "bcdfghjklmnpqrstvwxz2456789";
	unsigned h = 5381;

	if (jv_get_kind(automount) == JV_KIND_FALSE) {
		jv_free(automount);
		jv_free(vols);
		return spec;
	}
	jv_free(automount);
	/* the suffix is random on a real server; ksim derives it from the uid */
	for (const char *p = uid; *p; p++)
		h = h * 33 + (unsigned char)*p;
	snprintf(name, sizeof(name), "kube-api-access-");
	for (int i = 0; i < 5; i++, h /= 27)
		name[16 + i] = alnum[h % 27];
	name[21] = 0;
	if (jv_get_kind(vols) != JV_KIND_ARRAY)
		vols = (jv_free(vols), jv_array());
	vols = jv_array_append(vols, JV_OBJECT(jv_string("name"), jv_string(name), jv_string("projected"),
		JV_OBJECT(jv_string("sources"),
			  JV_ARRAY(JV_OBJECT(jv_string("serviceAccountToken"),
					     JV_OBJECT(jv_string("expirationSeconds"), jv_number(3607), jv_string("path"),
						       jv_string("token"))),
				   JV_OBJECT(jv_string("configMap"),
					     JV_OBJECT(jv_string("name"), jv_string("kube-root-ca.crt"), jv_string("items"),
						       JV_ARRAY(JV_OBJECT(jv_string("key"), jv_string("ca.crt"),
									  jv_string("path"), jv_string("ca.crt"))))),
				   JV_OBJECT(jv_string("downwardAPI"),
					     JV_OBJECT(jv_string("items"),
						       JV_ARRAY(JV_OBJECT(jv_string("path"), jv_string("namespace"),
									  jv_string("fieldRef"),
									  JV_OBJECT(jv_string("apiVersion"),
										    jv_string("v1"),
										    jv_string("fieldPath"),
										    jv_string("metadata.namespace"))))))),
			  jv_string("defaultMode"), jv_number(420))));
	spec = jv_object_set(spec, jv_string("volumes"), vols);
	containers = jv_object_get(jv_copy(spec), jv_string("containers"));
	if (jv_get_kind(containers) == JV_KIND_ARRAY) {
		jv out = jv_array();

		jv_array_foreach(containers, i, c) {
			jv mounts = jv_object_get(jv_copy(c), jv_string("volumeMounts"));
			int has = 0;

			if (jv_get_kind(mounts) != JV_KIND_ARRAY)
				mounts = (jv_free(mounts), jv_array());
			jv_array_foreach(mounts, j, m) {
				const char *mp = ksim_str(m, "mountPath");

				if (mp && !strcmp(mp, "/var/run/secrets/kubernetes.io/serviceaccount"))
					has = 1;
				jv_free(m);
			}
			if (!has && jv_get_kind(c) == JV_KIND_OBJECT)
				c = jv_object_set(c, jv_string("volumeMounts"),
						  jv_array_append(mounts, JV_OBJECT(jv_string("name"), jv_string(name),
										    jv_string("readOnly"), jv_true(),
										    jv_string("mountPath"),
										    jv_string("/var/run/secrets/kubernetes.io/serviceaccount"))));
			else
				jv_free(mounts);
			out = jv_array_append(out, c);
		}
		jv_free(containers);
		spec = jv_object_set(spec, jv_string("containers"), out);
	} else {
		jv_free(containers);
	}
	return spec;
}

static jv pod_defaults(jv obj)
{
	return jv_object_set(obj, jv_string("spec"), pod_spec_defaults(obj_field(obj, "spec")));
}

/*
 * What admission adds to a pod, after its creator's managedFields are
 * taken (they do not own it): the ServiceAccount and its token volume, the
 * default tolerations, the priority; and the status a new pod starts with.
 */
static jv pod_admission(jv obj)
{
	jv spec = obj_field(obj, "spec"), tols;
	const char *sa;
	char *uid = kop_strdup(ksim_str(obj, "metadata.uid") ? ksim_str(obj, "metadata.uid") : "");

	sa = ksim_str(spec, "serviceAccountName");
	if (!sa || !*sa)
		sa = ksim_str(spec, "serviceAccount");
	if (!sa || !*sa)
		sa = "default";
	{
		char *s = kop_strdup(sa);

		spec = jv_object_set(spec, jv_string("serviceAccountName"), jv_string(s));
		spec = jv_object_set(spec, jv_string("serviceAccount"), jv_string(s));
		free(s);
	}
	spec = service_account_volume(spec, uid);
	tols = jv_object_get(jv_copy(spec), jv_string("tolerations"));
	if (jv_get_kind(tols) != JV_KIND_ARRAY)
		tols = (jv_free(tols), jv_array());
	if (!tolerates(jv_copy(tols), "node.kubernetes.io/not-ready"))
		tols = jv_array_append(tols, toleration("node.kubernetes.io/not-ready"));
	if (!tolerates(jv_copy(tols), "node.kubernetes.io/unreachable"))
		tols = jv_array_append(tols, toleration("node.kubernetes.io/unreachable"));
	spec = jv_object_set(spec, jv_string("tolerations"), tols);
	spec = set_absent(spec, "priority", jv_number(0));
	spec = set_absent(spec, "preemptionPolicy", jv_string("PreemptLowerPriority"));
	free(uid);
	obj = jv_object_set(obj, jv_string("spec"), spec);
	return jv_object_set(obj, jv_string("status"),
			     JV_OBJECT(jv_string("phase"), jv_string("Pending"), jv_string("qosClass"),
				       jv_string("BestEffort")));
}

jv ksim_builtin_admission(const struct ksim_type *t, jv obj)
{
	if (jv_get_kind(obj) == JV_KIND_OBJECT && !strcmp(t->gr, "pods"))
		return pod_admission(obj);
	return obj;
}

/* spec.template.spec of a workload, defaulted as a pod spec is (no admission). */
static jv template_defaults(jv obj)
{
	jv tspec = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("spec"), jv_string("template"), jv_string("spec")));

	if (jv_get_kind(tspec) != JV_KIND_OBJECT) {
		jv_free(tspec);
		return obj;
	}
	return jv_setpath(obj, JV_ARRAY(jv_string("spec"), jv_string("template"), jv_string("spec")),
			  pod_spec_defaults(tspec));
}

/* The Job controller's selector and template labels (batch's generateSelector). */
static jv job_selector(jv obj)
{
	jv manual = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("spec"), jv_string("manualSelector")));
	const char *uid = ksim_str(obj, "metadata.uid"), *name = ksim_str(obj, "metadata.name");
	jv labels;
	char *u = kop_strdup(uid ? uid : ""), *n = kop_strdup(name ? name : "");

	if (jv_get_kind(manual) != JV_KIND_TRUE) {
		obj = jv_setpath(obj, JV_ARRAY(jv_string("spec"), jv_string("selector")),
				 JV_OBJECT(jv_string("matchLabels"),
					   JV_OBJECT(jv_string("batch.kubernetes.io/controller-uid"), jv_string(u))));
		labels = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("spec"), jv_string("template"),
							  jv_string("metadata"), jv_string("labels")));
		if (jv_get_kind(labels) != JV_KIND_OBJECT)
			labels = (jv_free(labels), jv_object());
		labels = jv_object_set(labels, jv_string("batch.kubernetes.io/controller-uid"), jv_string(u));
		labels = jv_object_set(labels, jv_string("batch.kubernetes.io/job-name"), jv_string(n));
		labels = jv_object_set(labels, jv_string("controller-uid"), jv_string(u));
		labels = jv_object_set(labels, jv_string("job-name"), jv_string(n));
		obj = jv_setpath(obj, JV_ARRAY(jv_string("spec"), jv_string("template"), jv_string("metadata"),
					       jv_string("labels")), labels);
	}
	jv_free(manual);
	free(u);
	free(n);
	return obj;
}

static jv job_spec_defaults(jv obj)
{
	obj = dflt(obj, "spec", "parallelism", jv_number(1));
	obj = dflt(obj, "spec", "completions", jv_number(1));
	obj = dflt(obj, "spec", "backoffLimit", jv_number(6));
	obj = dflt(obj, "spec", "completionMode", jv_string("NonIndexed"));
	obj = dflt(obj, "spec", "suspend", jv_false());
	obj = dflt(obj, "spec", "podReplacementPolicy", jv_string("TerminatingOrFailed"));
	obj = dflt(obj, "spec", "manualSelector", jv_false());	/* (the selector was generated) */
	return template_defaults(obj);
}

/* A ReplicationController's selector defaults to its template's labels, and so do its labels. */
static jv rc_defaults(jv obj)
{
	jv tl = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("spec"), jv_string("template"), jv_string("metadata"),
						 jv_string("labels")));

	if (jv_get_kind(tl) == JV_KIND_OBJECT) {
		jv sel = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("spec"), jv_string("selector")));

		if (jv_get_kind(sel) != JV_KIND_OBJECT || !jv_object_length(jv_copy(sel)))
			obj = jv_setpath(obj, JV_ARRAY(jv_string("spec"), jv_string("selector")), jv_copy(tl));
		jv_free(sel);
		sel = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("metadata"), jv_string("labels")));
		if (jv_get_kind(sel) != JV_KIND_OBJECT || !jv_object_length(jv_copy(sel)))
			obj = jv_setpath(obj, JV_ARRAY(jv_string("metadata"), jv_string("labels")), jv_copy(tl));
		jv_free(sel);
	}
	jv_free(tl);
	obj = dflt(obj, "spec", "replicas", jv_number(1));
	obj = dflt(obj, "spec", "minReadySeconds", jv_number(0));
	obj = template_defaults(obj);
	return jv_object_set(obj, jv_string("status"), JV_OBJECT(jv_string("replicas"), jv_number(0)));
}

jv ksim_builtin_defaults(const struct ksim_type *t, jv obj)
{
	const char *gr = t->gr;

	if (jv_get_kind(obj) != JV_KIND_OBJECT)
		return obj;
	if (!strcmp(gr, "pods"))
		return pod_defaults(obj);
	if (!strcmp(gr, "replicasets.apps"))
		return jv_object_set(template_defaults(obj), jv_string("status"),
				     JV_OBJECT(jv_string("replicas"), jv_number(0)));
	if (!strcmp(gr, "statefulsets.apps"))
		return jv_object_set(template_defaults(obj), jv_string("status"),
				     JV_OBJECT(jv_string("replicas"), jv_number(0), jv_string("availableReplicas"),
					       jv_number(0)));
	if (!strcmp(gr, "deployments.apps"))
		return template_defaults(obj);
	if (!strcmp(gr, "daemonsets.apps")) {
		obj = dflt(obj, "spec", "revisionHistoryLimit", jv_number(10));
		obj = dflt(obj, "spec", "updateStrategy",
			   JV_OBJECT(jv_string("type"), jv_string("RollingUpdate"), jv_string("rollingUpdate"),
				     JV_OBJECT(jv_string("maxUnavailable"), jv_number(1), jv_string("maxSurge"),
					       jv_number(0))));
		obj = template_defaults(obj);
		return jv_object_set(obj, jv_string("status"),
				     JV_OBJECT(jv_string("currentNumberScheduled"), jv_number(0),
					       jv_string("numberMisscheduled"), jv_number(0),
					       jv_string("desiredNumberScheduled"), jv_number(0), jv_string("numberReady"),
					       jv_number(0)));
	}
	if (!strcmp(gr, "replicationcontrollers"))
		return rc_defaults(obj);
	if (!strcmp(gr, "jobs.batch")) {
		obj = job_spec_defaults(job_selector(obj));
		return jv_object_set(obj, jv_string("status"), jv_object());
	}
	if (!strcmp(gr, "cronjobs.batch")) {
		obj = dflt(obj, "spec", "concurrencyPolicy", jv_string("Allow"));
		obj = dflt(obj, "spec", "suspend", jv_false());
		obj = dflt(obj, "spec", "successfulJobsHistoryLimit", jv_number(3));
		obj = dflt(obj, "spec", "failedJobsHistoryLimit", jv_number(1));
		return jv_object_set(obj, jv_string("status"), jv_object());
	}
	if (!strcmp(gr, "poddisruptionbudgets.policy"))
		return jv_object_set(obj, jv_string("status"),
				     JV_OBJECT(jv_string("disruptionsAllowed"), jv_number(0), jv_string("currentHealthy"),
					       jv_number(0), jv_string("desiredHealthy"), jv_number(0),
					       jv_string("expectedPods"), jv_number(0)));
	if (!strcmp(gr, "horizontalpodautoscalers.autoscaling")) {
		obj = dflt(obj, "spec", "minReplicas", jv_number(1));
		return jv_object_set(obj, jv_string("status"),
				     JV_OBJECT(jv_string("currentReplicas"), jv_number(0), jv_string("desiredReplicas"),
					       jv_number(0)));
	}
	if (!strcmp(gr, "persistentvolumes")) {
		obj = dflt(obj, "spec", "persistentVolumeReclaimPolicy", jv_string("Retain"));
		obj = dflt(obj, "spec", "volumeMode", jv_string("Filesystem"));
		return jv_object_set(obj, jv_string("status"), JV_OBJECT(jv_string("phase"), jv_string("Pending")));
	}
	if (!strcmp(gr, "ingresses.networking.k8s.io"))
		return jv_object_set(obj, jv_string("status"), JV_OBJECT(jv_string("loadBalancer"), jv_object()));
	if (!strcmp(gr, "resourcequotas") || !strcmp(gr, "apiservices.apiregistration.k8s.io"))
		return jv_object_set(obj, jv_string("status"), jv_object());
	if (!strcmp(gr, "storageclasses.storage.k8s.io")) {
		obj = dflt(obj, "reclaimPolicy", NULL, jv_string("Delete"));
		return dflt(obj, "volumeBindingMode", NULL, jv_string("Immediate"));
	}
	if (!strcmp(gr, "priorityclasses.scheduling.k8s.io"))
		return dflt(obj, "preemptionPolicy", NULL, jv_string("PreemptLowerPriority"));
	if (!strcmp(gr, "endpointslices.discovery.k8s.io")) {
		jv eps = jv_object_get(jv_copy(obj), jv_string("endpoints"));

		if (jv_get_kind(eps) != JV_KIND_ARRAY)	/* endpoints has no omitempty */
			obj = jv_object_set(obj, jv_string("endpoints"), jv_null());
		jv_free(eps);
		return obj;
	}
	return obj;
}
