/*
 * The Deployment controller: a ReplicaSet per template (named by its
 * hash), rolling updates within maxSurge and maxUnavailable, revisions,
 * the Progressing and Available conditions and the status kubectl rollout
 * status reads. The pods are the ReplicaSets' (sim_replicaset.c).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "sim-priv.h"
#include "banned.h"

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

/* d (consumed) with its revision annotation set to rev. */
static jv with_revision(jv d, long rev)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%ld", rev);
	return jv_setpath(d, JV_ARRAY(jv_string("metadata"), jv_string("annotations"),
				      jv_string("deployment.kubernetes.io/revision")),
			  jv_string(buf));
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

void sync_deploy(const char *ns, jv d, jv rss)
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
			/* its revision annotation and condition, in one status write as kube-controller-manager's */
			snprintf(msg, sizeof(msg), "Created new replica set \"%s\"", name.buf);
			conds = set_condition(get(oldst, "conditions", NULL, NULL), "Progressing", "True",
					      "NewReplicaSetCreated", msg, now, 0);
			put_status(KCM, "/apis/apps/v1", "deployments", with_revision(jv_copy(d), maxrev + 1),
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
			put_status(KCM, "/apis/apps/v1", "deployments", with_revision(jv_copy(d), rs_revision(newrs)),
				   jv_copy(oldst), "kube-controller-manager");
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
