/*
 * The StatefulSet controller (pods name-0, name-1, ... in order or in
 * parallel, a PVC per volumeClaimTemplate and ordinal, rolling updates by
 * revision with a partition, or OnDelete) and the PVC binder (every Pending
 * claim is Bound; pvc-protection keeps a claim a pod uses).
 */
#include <stdlib.h>
#include <string.h>
#include "sim-priv.h"
#include "banned.h"

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

void sync_sts(const char *ns, jv sts, jv pods, jv pvcs)
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
void sync_pvc(jv pvc, jv pods)
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
