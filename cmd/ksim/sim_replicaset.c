/*
 * The ReplicaSet controller: a ReplicaSet keeps spec.replicas pods of its
 * template (owned by ownerReference) and reports them in its status.
 */
#include <stdlib.h>
#include "sim-priv.h"
#include "banned.h"

struct podinfo {
	int active, ready;
};

void sync_rs(const char *ns, jv rs, jv pods)
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
