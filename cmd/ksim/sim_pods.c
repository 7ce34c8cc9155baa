/*
 * The scheduler and the kubelet's end of a pod, for the pods a client
 * makes: a pod without spec.nodeName, for the default scheduler, is bound
 * to ksim's simulated node (unless the node is cordoned); a pod on that
 * node being deleted gracefully has its containers stopped at once (ksim
 * runs none) and is deleted by the kubelet with grace period 0, as a real
 * kubelet does once they stopped.
 */
#include <stdlib.h>
#include <string.h>
#include "sim.h"
#include "banned.h"

static int node_schedulable(void)
{
	jv node = ksim_store_get("nodes", "", SIM_NODE), u;
	int ok;

	if (!jv_is_valid(node))
		return 0;
	u = jv_getpath(jv_copy(node), JV_ARRAY(jv_string("spec"), jv_string("unschedulable")));
	ok = jv_get_kind(u) != JV_KIND_TRUE;
	jv_free(u);
	return ok;
}

static void bind(const char *ns, jv pod)
{
	const char *name = ksim_str(pod, "metadata.name");
	char *n = kop_strdup(name ? name : "");

	pod = jv_setpath(pod, JV_ARRAY(jv_string("spec"), jv_string("nodeName")), jv_string(SIM_NODE));
	sim_write("system:kube-scheduler", "PUT", "/api/v1", ns, "pods", n, NULL, "kube-scheduler", pod);
	free(n);
}

static void remove_pod(const char *ns, jv pod)
{
	const char *name = ksim_str(pod, "metadata.name"), *uid = ksim_str(pod, "metadata.uid");
	char *n = kop_strdup(name ? name : "");
	struct kop_buf q = KOP_BUF_INIT;

	kop_buf_addf(&q, "%s?gracePeriodSeconds=0", n);
	sim_write(SIM_KUBELET, "DELETE", "/api/v1", ns, "pods", q.buf, NULL, NULL,
		  JV_OBJECT(jv_string("kind"), jv_string("DeleteOptions"), jv_string("apiVersion"), jv_string("v1"),
			    jv_string("gracePeriodSeconds"), jv_number(0), jv_string("preconditions"),
			    JV_OBJECT(jv_string("uid"), jv_string(uid ? uid : ""))));
	kop_buf_release(&q);
	free(n);
	jv_free(pod);
}

void sim_pods_sync(const char *ns, jv only, jv pass)
{
	/* (a whole pass lists them again: the pods the controllers made in it are bound at once) */
	jv pods = jv_get_kind(only) == JV_KIND_OBJECT ? jv_copy(pass) : sim_list("pods", ns);
	int schedulable = -1;

	jv_array_foreach(pods, i, pod) {
		const char *node, *sched;
		jv grace;

		if (!sim_wanted(only, pod)) {
			jv_free(pod);
			continue;
		}
		node = ksim_str(pod, "spec.nodeName");
		sched = ksim_str(pod, "spec.schedulerName");
		grace = jv_getpath(jv_copy(pod), JV_ARRAY(jv_string("metadata"), jv_string("deletionGracePeriodSeconds")));
		if (ksim_str(pod, "metadata.deletionTimestamp")) {
			if (node && !strcmp(node, SIM_NODE) && jv_get_kind(grace) == JV_KIND_NUMBER &&
			    jv_number_value(grace) > 0)
				remove_pod(ns, jv_copy(pod));
		} else if ((!node || !*node) && (!sched || !strcmp(sched, "default-scheduler"))) {
			if (schedulable < 0)
				schedulable = node_schedulable();
			if (schedulable)
				bind(ns, jv_copy(pod));
		}
		jv_free(grace);
		jv_free(pod);
	}
	jv_free(pods);
}
