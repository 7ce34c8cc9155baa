/*
 * The daemonset controller: a DaemonSet runs one pod of its template on
 * each Node (ksim's simulated node runs it; a Node a client made has no
 * kubelet, so its pod stays Pending), replaces the pods of an older
 * template generation, and reports them in its status.
 */
#include <stdlib.h>
#include <string.h>
#include "sim.h"
#include "banned.h"

static long number(jv obj, const char *a, const char *b, long def)
{
	jv v = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string(a), jv_string(b)));
	long n = jv_get_kind(v) == JV_KIND_NUMBER ? (long)jv_number_value(v) : def;

	jv_free(v);
	return n;
}

static int collect(jv obj, const char *key, void *data)
{
	(void)key;
	*(jv *)data = jv_array_append(*(jv *)data, jv_copy(obj));
	return 0;
}

static jv daemon_pod(jv ds, const char *node, const char *gen)
{
	jv labels = jv_getpath(jv_copy(ds), JV_ARRAY(jv_string("spec"), jv_string("template"), jv_string("metadata"),
						     jv_string("labels")));
	struct kop_buf g = KOP_BUF_INIT;
	jv pod;

	if (jv_get_kind(labels) != JV_KIND_OBJECT)
		labels = (jv_free(labels), jv_object());
	labels = jv_object_set(labels, jv_string("pod-template-generation"), jv_string(gen));
	kop_buf_addf(&g, "%s-", ksim_str(ds, "metadata.name"));
	pod = sim_new_pod(ds, "apps/v1", "DaemonSet", g.buf, labels);
	kop_buf_release(&g);
	pod = jv_setpath(pod, JV_ARRAY(jv_string("spec"), jv_string("nodeName")), jv_string(node));
	/* as the controller pins it: required node affinity on metadata.name */
	return jv_setpath(pod, JV_ARRAY(jv_string("spec"), jv_string("affinity")),
			  JV_OBJECT(jv_string("nodeAffinity"),
				    JV_OBJECT(jv_string("requiredDuringSchedulingIgnoredDuringExecution"),
					      JV_OBJECT(jv_string("nodeSelectorTerms"),
							JV_ARRAY(JV_OBJECT(jv_string("matchFields"),
									   JV_ARRAY(JV_OBJECT(jv_string("key"),
											      jv_string("metadata.name"),
											      jv_string("operator"),
											      jv_string("In"),
											      jv_string("values"),
											      JV_ARRAY(jv_string(node))))))))));
}

static void sync_one(const char *ns, jv ds, jv pods, jv nodes)
{
	const char *uid = ksim_str(ds, "metadata.uid");
	long generation = number(ds, "metadata", "generation", 1);
	long desired = 0, current = 0, ready = 0, updated = 0;
	char gen[32];
	jv status, old;

	snprintf(gen, sizeof(gen), "%ld", generation);
	jv_array_foreach(nodes, i, node) {
		const char *nn = ksim_str(node, "metadata.name");
		int have = 0;

		desired++;
		jv_array_foreach(pods, j, p) {
			const char *pn = ksim_str(p, "spec.nodeName"), *pg = ksim_str(p, "metadata.labels.pod-template-generation");

			if (uid && nn && pn && sim_is_controlled_by(p, uid) && !strcmp(pn, nn) &&
			    !ksim_str(p, "metadata.deletionTimestamp")) {
				if (pg && !strcmp(pg, gen)) {
					have = 1;
					updated++;
					ready += sim_pod_ready(p);
				} else {
					/* an older template: replaced */
					char *name = kop_strdup(ksim_str(p, "metadata.name"));

					sim_write(SIM_KCM, "DELETE", "/api/v1", ns, "pods", name, NULL, NULL, jv_null());
					free(name);
				}
			}
			jv_free(p);
		}
		if (have)
			current++;
		else if (nn)
			sim_write(SIM_KCM, "POST", "/api/v1", ns, "pods", NULL, NULL, "kube-controller-manager",
				  daemon_pod(ds, nn, gen));
		jv_free(node);
	}
	jv_free(pods);
	jv_free(nodes);
	status = JV_OBJECT(jv_string("currentNumberScheduled"), jv_number((double)current),
			   jv_string("numberMisscheduled"), jv_number(0), jv_string("desiredNumberScheduled"),
			   jv_number((double)desired), jv_string("numberReady"), jv_number((double)ready),
			   jv_string("observedGeneration"), jv_number((double)generation));
	if (updated)
		status = jv_object_set(status, jv_string("updatedNumberScheduled"), jv_number((double)updated));
	if (ready)
		status = jv_object_set(status, jv_string("numberAvailable"), jv_number((double)ready));
	if (desired - ready > 0)
		status = jv_object_set(status, jv_string("numberUnavailable"), jv_number((double)(desired - ready)));
	old = jv_object_get(jv_copy(ds), jv_string("status"));
	if (!jv_equal(old, jv_copy(status)))
		sim_put_status(SIM_KCM, "/apis/apps/v1", "daemonsets", jv_copy(ds), status);
	else
		jv_free(status);
}

void sim_daemonset_sync(const char *ns)
{
	jv dss = sim_list("daemonsets.apps", ns), pods, nodes = jv_array();

	if (!jv_array_length(jv_copy(dss))) {
		jv_free(dss);
		jv_free(nodes);
		return;
	}
	pods = sim_list("pods", ns);
	ksim_store_each("nodes", NULL, NULL, collect, &nodes);
	jv_array_foreach(dss, i, ds) {
		if (!ksim_str(ds, "metadata.deletionTimestamp"))
			sync_one(ns, ds, jv_copy(pods), jv_copy(nodes));
		jv_free(ds);
	}
	jv_free(dss);
	jv_free(pods);
	jv_free(nodes);
}
