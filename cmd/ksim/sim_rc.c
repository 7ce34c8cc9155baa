/*
 * The replication controller controller: a ReplicationController keeps
 * spec.replicas pods of its template (it owns them by ownerReference, as
 * the ReplicaSet controller does), and reports them in its status.
 */
#include <stdlib.h>
#include <string.h>
#include "sim.h"
#include "banned.h"

static int is_deleting(jv obj)
{
	return ksim_str(obj, "metadata.deletionTimestamp") != NULL;
}

static long number(jv obj, const char *a, const char *b, long def)
{
	jv v = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string(a), jv_string(b)));
	long n = jv_get_kind(v) == JV_KIND_NUMBER ? (long)jv_number_value(v) : def;

	jv_free(v);
	return n;
}

static void sync_one(const char *ns, jv rc, jv pods)
{
	const char *uid = ksim_str(rc, "metadata.uid");
	long want = number(rc, "spec", "replicas", 1);
	jv mine = jv_array(), status, old;
	int active = 0, ready = 0;

	jv_array_foreach(pods, i, p) {
		if (uid && sim_is_controlled_by(p, uid) && !is_deleting(p)) {
			mine = jv_array_append(mine, jv_copy(p));
			active++;
			ready += sim_pod_ready(p);
		}
		jv_free(p);
	}
	jv_free(pods);
	if (active < want) {
		struct kop_buf gen = KOP_BUF_INIT;

		kop_buf_addf(&gen, "%s-", ksim_str(rc, "metadata.name"));
		for (long n = active; n < want; n++) {
			jv labels = jv_getpath(jv_copy(rc), JV_ARRAY(jv_string("spec"), jv_string("template"),
								     jv_string("metadata"), jv_string("labels")));

			if (jv_get_kind(labels) != JV_KIND_OBJECT)
				labels = (jv_free(labels), jv_object());
			sim_write(SIM_KCM, "POST", "/api/v1", ns, "pods", NULL, NULL, "kube-controller-manager",
				  sim_new_pod(rc, "v1", "ReplicationController", gen.buf, labels));
		}
		kop_buf_release(&gen);
	} else if (active > want) {
		/* not ready ones first, then the newest */
		long excess = active - want;

		for (int pass = 0; pass < 2 && excess > 0; pass++) {
			for (int i = jv_array_length(jv_copy(mine)) - 1; i >= 0 && excess > 0; i--) {
				jv p = jv_array_get(jv_copy(mine), i);

				if (jv_get_kind(p) == JV_KIND_OBJECT && (pass == 0 ? !sim_pod_ready(p) : 1)) {
					char *name = kop_strdup(ksim_str(p, "metadata.name"));

					sim_write(SIM_KCM, "DELETE", "/api/v1", ns, "pods", name, NULL, NULL, jv_null());
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
			       jv_number((double)number(rc, "metadata", "generation", 1)));
	old = jv_object_get(jv_copy(rc), jv_string("status"));
	if (!jv_equal(old, jv_copy(status)))
		sim_put_status(SIM_KCM, "/api/v1", "replicationcontrollers", jv_copy(rc), status);
	else
		jv_free(status);
}

void sim_rc_sync(const char *ns)
{
	jv rcs = sim_list("replicationcontrollers", ns), pods;

	if (!jv_array_length(jv_copy(rcs))) {
		jv_free(rcs);
		return;
	}
	pods = sim_list("pods", ns);
	jv_array_foreach(rcs, i, rc) {
		if (!is_deleting(rc))
			sync_one(ns, rc, jv_copy(pods));
		jv_free(rc);
	}
	jv_free(rcs);
	jv_free(pods);
}
