/*
 * The fields of the built-in kinds, as far as ksim knows them, for the
 * unknown-field check kube-apiserver makes when it decodes a built-in
 * object (fieldValidation: Warn by default, Strict, Ignore): an unknown
 * field is dropped and named. Covered: every built-in kind's top level and
 * metadata; the spec of the workloads (Deployment, ReplicaSet,
 * StatefulSet, DaemonSet, Job, CronJob, ReplicationController), of Pods
 * and pod templates and their containers, and of Services. Below those,
 * and for the kinds not listed, every field is taken.
 */
#include <string.h>
#include "ksim.h"
#include "banned.h"

#define META "name generateName namespace selfLink uid resourceVersion generation creationTimestamp " \
	     "deletionTimestamp deletionGracePeriodSeconds labels annotations ownerReferences finalizers managedFields"
#define CONTAINER "name image command args workingDir ports envFrom env resources resizePolicy restartPolicy " \
		  "volumeMounts volumeDevices livenessProbe readinessProbe startupProbe lifecycle " \
		  "terminationMessagePath terminationMessagePolicy imagePullPolicy securityContext stdin stdinOnce tty"
#define POD_SPEC "volumes initContainers containers ephemeralContainers restartPolicy terminationGracePeriodSeconds " \
		 "activeDeadlineSeconds dnsPolicy nodeSelector serviceAccountName serviceAccount " \
		 "automountServiceAccountToken nodeName hostNetwork hostPID hostIPC shareProcessNamespace " \
		 "securityContext imagePullSecrets hostname subdomain affinity schedulerName tolerations hostAliases " \
		 "priorityClassName priority dnsConfig readinessGates runtimeClassName enableServiceLinks " \
		 "preemptionPolicy overhead topologySpreadConstraints setHostnameAsFQDN os hostUsers schedulingGates " \
		 "resourceClaims resources"

static const struct kind_fields {
	const char *gr, *top, *spec;
} kinds[] = {
	{ "configmaps", "data binaryData immutable", NULL },
	{ "secrets", "data stringData type immutable", NULL },
	{ "serviceaccounts", "secrets imagePullSecrets automountServiceAccountToken", NULL },
	{ "namespaces", "spec status", NULL },
	{ "nodes", "spec status", NULL },
	{ "persistentvolumeclaims", "spec status", NULL },
	{ "persistentvolumes", "spec status", NULL },
	{ "resourcequotas", "spec status", NULL },
	{ "limitranges", "spec", NULL },
	{ "endpoints", "subsets", NULL },
	{ "podtemplates", "template", NULL },
	{ "pods", "spec status", POD_SPEC },
	{ "services", "spec status",
	  "ports selector clusterIP clusterIPs type externalIPs sessionAffinity loadBalancerIP loadBalancerSourceRanges "
	  "externalName externalTrafficPolicy healthCheckNodePort publishNotReadyAddresses sessionAffinityConfig "
	  "ipFamilies ipFamilyPolicy allocateLoadBalancerNodePorts loadBalancerClass internalTrafficPolicy "
	  "trafficDistribution" },
	{ "replicationcontrollers", "spec status", "replicas minReadySeconds selector template" },
	{ "deployments.apps", "spec status",
	  "replicas selector template strategy minReadySeconds revisionHistoryLimit paused progressDeadlineSeconds" },
	{ "replicasets.apps", "spec status", "replicas minReadySeconds selector template" },
	{ "statefulsets.apps", "spec status",
	  "replicas selector template volumeClaimTemplates serviceName podManagementPolicy updateStrategy "
	  "revisionHistoryLimit minReadySeconds persistentVolumeClaimRetentionPolicy ordinals" },
	{ "daemonsets.apps", "spec status", "selector template updateStrategy minReadySeconds revisionHistoryLimit" },
	{ "jobs.batch", "spec status",
	  "parallelism completions activeDeadlineSeconds podFailurePolicy successPolicy backoffLimit "
	  "backoffLimitPerIndex maxFailedIndexes selector manualSelector template ttlSecondsAfterFinished "
	  "completionMode suspend podReplacementPolicy managedBy" },
	{ "cronjobs.batch", "spec status",
	  "schedule timeZone startingDeadlineSeconds concurrencyPolicy suspend jobTemplate successfulJobsHistoryLimit "
	  "failedJobsHistoryLimit" },
	{ "endpointslices.discovery.k8s.io", "addressType endpoints ports", NULL },
	{ "ingresses.networking.k8s.io", "spec status", NULL },
	{ "ingressclasses.networking.k8s.io", "spec", NULL },
	{ "networkpolicies.networking.k8s.io", "spec status", NULL },
	{ "poddisruptionbudgets.policy", "spec status", NULL },
	{ "horizontalpodautoscalers.autoscaling", "spec status", NULL },
	{ "storageclasses.storage.k8s.io",
	  "provisioner parameters reclaimPolicy mountOptions allowVolumeExpansion volumeBindingMode allowedTopologies",
	  NULL },
	{ "priorityclasses.scheduling.k8s.io", "value globalDefault description preemptionPolicy", NULL },
	{ "apiservices.apiregistration.k8s.io", "spec status", NULL },
	{ "leases.coordination.k8s.io", "spec", NULL },
	{ "roles.rbac.authorization.k8s.io", "rules", NULL },
	{ "clusterroles.rbac.authorization.k8s.io", "rules aggregationRule", NULL },
	{ "rolebindings.rbac.authorization.k8s.io", "subjects roleRef", NULL },
	{ "clusterrolebindings.rbac.authorization.k8s.io", "subjects roleRef", NULL },
	{ "customresourcedefinitions.apiextensions.k8s.io", "spec status", NULL },
};

static int listed(const char *names, const char *key)
{
	size_t n = strlen(key);

	for (const char *p = names; p && *p;) {
		const char *e = strchr(p, ' ');
		size_t len = e ? (size_t)(e - p) : strlen(p);

		if (len == n && !strncmp(p, key, n))
			return 1;
		p = e ? e + 1 : NULL;
	}
	return 0;
}

struct walk {
	jv unknown;	/* dotted paths, in the order found */
};

/* Drops (and records under prefix) the keys of obj (consumed) not in names. */
static jv check_object(jv obj, const char *names, const char *prefix, struct walk *w)
{
	jv keys;

	if (jv_get_kind(obj) != JV_KIND_OBJECT)
		return obj;
	keys = jv_keys_unsorted(jv_copy(obj));
	jv_array_foreach(keys, i, k) {
		if (!listed(names, jv_string_value(k))) {
			struct kop_buf p = KOP_BUF_INIT;

			kop_buf_addf(&p, "%s%s", prefix, jv_string_value(k));
			w->unknown = jv_array_append(w->unknown, jv_string(p.buf));
			kop_buf_release(&p);
			obj = jv_object_delete(obj, jv_copy(k));
		}
		jv_free(k);
	}
	jv_free(keys);
	return obj;
}

/* obj.key (an object) checked against names, under prefix "PREFIXkey." */
static jv check_field(jv obj, const char *key, const char *names, const char *prefix, struct walk *w,
		      jv (*deeper)(jv, const char *, struct walk *))
{
	jv v;
	struct kop_buf p = KOP_BUF_INIT;

	if (jv_get_kind(obj) != JV_KIND_OBJECT || !jv_object_has(jv_copy(obj), jv_string(key)))
		return obj;
	v = jv_object_get(jv_copy(obj), jv_string(key));
	if (jv_get_kind(v) != JV_KIND_OBJECT) {
		jv_free(v);
		return obj;
	}
	kop_buf_addf(&p, "%s%s.", prefix, key);
	v = check_object(v, names, p.buf, w);
	if (deeper)
		v = deeper(v, p.buf, w);
	kop_buf_release(&p);
	return jv_object_set(obj, jv_string(key), v);
}

/* The containers of a pod spec (spec, consumed). */
static jv containers(jv spec, const char *prefix, struct walk *w)
{
	static const char *const lists[] = { "containers", "initContainers" };

	for (size_t l = 0; l < sizeof(lists) / sizeof(*lists); l++) {
		jv cs = jv_object_get(jv_copy(spec), jv_string(lists[l])), out;

		if (jv_get_kind(cs) != JV_KIND_ARRAY) {
			jv_free(cs);
			continue;
		}
		out = jv_array();
		jv_array_foreach(cs, i, c) {
			struct kop_buf p = KOP_BUF_INIT;

			kop_buf_addf(&p, "%s%s[%d].", prefix, lists[l], i);
			out = jv_array_append(out, check_object(c, CONTAINER, p.buf, w));
			kop_buf_release(&p);
		}
		jv_free(cs);
		spec = jv_object_set(spec, jv_string(lists[l]), out);
	}
	return spec;
}

/* A pod template (tmpl, consumed): its metadata, its spec and containers. */
static jv pod_template(jv tmpl, const char *prefix, struct walk *w)
{
	tmpl = check_field(tmpl, "metadata", META, prefix, w, NULL);
	return check_field(tmpl, "spec", POD_SPEC, prefix, w, containers);
}

static jv job_spec(jv spec, const char *prefix, struct walk *w);

/* What a workload spec holds below it: a template, a Job template. */
static jv workload_spec(jv spec, const char *prefix, struct walk *w)
{
	spec = check_field(spec, "template", "metadata spec", prefix, w, pod_template);
	return check_field(spec, "jobTemplate", "metadata spec", prefix, w, job_spec);
}

static jv job_spec(jv tmpl, const char *prefix, struct walk *w)
{
	static const char *const names = "parallelism completions activeDeadlineSeconds podFailurePolicy successPolicy "
					 "backoffLimit backoffLimitPerIndex maxFailedIndexes selector manualSelector "
					 "template ttlSecondsAfterFinished completionMode suspend "
					 "podReplacementPolicy managedBy";

	tmpl = check_field(tmpl, "metadata", META, prefix, w, NULL);
	return check_field(tmpl, "spec", names, prefix, w, workload_spec);
}

jv ksim_builtin_unknown_fields(const struct ksim_type *t, jv obj, jv *unknown)
{
	struct walk w = { jv_array() };

	for (size_t i = 0; i < sizeof(kinds) / sizeof(*kinds); i++) {
		const struct kind_fields *k = &kinds[i];
		struct kop_buf top = KOP_BUF_INIT;

		if (strcmp(k->gr, t->gr) || (t->flags & KT_CUSTOM))
			continue;
		kop_buf_addf(&top, "apiVersion kind metadata %s", k->top);
		obj = check_object(obj, top.buf, "", &w);
		kop_buf_release(&top);
		obj = check_field(obj, "metadata", META, "", &w, NULL);
		if (k->spec)
			obj = check_field(obj, "spec", k->spec, "", &w, !strcmp(t->gr, "pods") ? containers :
									     workload_spec);
		else if (!strcmp(t->gr, "podtemplates"))
			obj = check_field(obj, "template", "metadata spec", "", &w, pod_template);
		break;
	}
	*unknown = w.unknown;
	return obj;
}
