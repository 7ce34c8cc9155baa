/*
 * The job controller: a Job runs pods of its template (at most
 * spec.parallelism at a time) until spec.completions of them succeeded
 * (ksim's kubelet ends a pod of restartPolicy Never or OnFailure after
 * --pod-run-duration), then is Complete: status.succeeded,
 * completionTime and the SuccessCriteriaMet and Complete conditions, as
 * kube-controller-manager 1.32 sets them. A suspended Job runs nothing.
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

static int has_condition(jv obj, const char *type)
{
	jv conds = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("status"), jv_string("conditions")));
	int yes = 0;

	if (jv_get_kind(conds) == JV_KIND_ARRAY) {
		jv_array_foreach(conds, i, c) {
			const char *t = ksim_str(c, "type"), *s = ksim_str(c, "status");

			if (t && s && !strcmp(t, type) && !strcmp(s, "True"))
				yes = 1;
			jv_free(c);
		}
	}
	jv_free(conds);
	return yes;
}

int sim_job_finished(jv job)
{
	return has_condition(job, "Complete") || has_condition(job, "Failed");
}

static jv job_condition(const char *type, const char *now)
{
	jv c = sim_condition(type, "True", "CompletionsReached", "Reached expected number of succeeded pods", now);

	c = jv_object_delete(c, jv_string("lastProbeTime"));
	return jv_object_set(c, jv_string("lastProbeTime"), jv_string(now));
}

static void sync_one(const char *ns, jv job, jv pods)
{
	const char *uid = ksim_str(job, "metadata.uid");
	long completions = number(job, "spec", "completions", 1), parallelism = number(job, "spec", "parallelism", 1);
	jv suspend = jv_getpath(jv_copy(job), JV_ARRAY(jv_string("spec"), jv_string("suspend")));
	int suspended = jv_get_kind(suspend) == JV_KIND_TRUE;
	long active = 0, ready = 0, succeeded = 0, failed = 0;
	jv status, old = jv_object_get(jv_copy(job), jv_string("status"));
	char now[32];

	jv_free(suspend);
	ksim_now(now);
	jv_array_foreach(pods, i, p) {
		if (uid && sim_is_controlled_by(p, uid)) {
			const char *phase = ksim_str(p, "status.phase");

			if (phase && !strcmp(phase, "Succeeded"))
				succeeded++;
			else if (phase && !strcmp(phase, "Failed"))
				failed++;
			else if (!ksim_str(p, "metadata.deletionTimestamp")) {
				active++;
				ready += sim_pod_ready(p);
			}
		}
		jv_free(p);
	}
	jv_free(pods);
	if (jv_get_kind(old) != JV_KIND_OBJECT)
		old = (jv_free(old), jv_object());
	status = jv_copy(old);
	if (!suspended && !jv_object_has(jv_copy(status), jv_string("startTime")))
		status = jv_object_set(status, jv_string("startTime"), jv_string(now));
	if (succeeded >= completions) {
		jv conds = jv_object_get(jv_copy(status), jv_string("conditions"));

		if (jv_get_kind(conds) != JV_KIND_ARRAY)
			conds = (jv_free(conds), jv_array());
		conds = jv_array_append(conds, job_condition("SuccessCriteriaMet", now));
		conds = jv_array_append(conds, job_condition("Complete", now));
		status = jv_object_set(status, jv_string("conditions"), conds);
		status = jv_object_set(status, jv_string("completionTime"), jv_string(now));
		active = 0;
		ready = 0;
	} else if (!suspended) {
		long want = completions - succeeded < parallelism ? completions - succeeded : parallelism;
		struct kop_buf gen = KOP_BUF_INIT;

		kop_buf_addf(&gen, "%s-", ksim_str(job, "metadata.name"));
		for (long n = active; n < want; n++) {
			jv labels = jv_getpath(jv_copy(job), JV_ARRAY(jv_string("spec"), jv_string("template"),
								      jv_string("metadata"), jv_string("labels")));

			if (jv_get_kind(labels) != JV_KIND_OBJECT)
				labels = (jv_free(labels), jv_object());
			if (sim_write(SIM_KCM, "POST", "/api/v1", ns, "pods", NULL, NULL, "kube-controller-manager",
				      sim_new_pod(job, "batch/v1", "Job", gen.buf, labels)) == 201)
				active++;
		}
		kop_buf_release(&gen);
	}
	status = jv_object_set(status, jv_string("active"), jv_number((double)active));
	if (!active)
		status = jv_object_delete(status, jv_string("active"));
	if (succeeded)
		status = jv_object_set(status, jv_string("succeeded"), jv_number((double)succeeded));
	if (failed)
		status = jv_object_set(status, jv_string("failed"), jv_number((double)failed));
	status = jv_object_set(status, jv_string("ready"), jv_number((double)ready));
	status = jv_object_set(status, jv_string("terminating"), jv_number(0));
	status = jv_object_set(status, jv_string("uncountedTerminatedPods"), jv_object());
	if (!jv_equal(old, jv_copy(status)))
		sim_put_status(SIM_KCM, "/apis/batch/v1", "jobs", jv_copy(job), status);
	else
		jv_free(status);
}

void sim_job_sync(const char *ns)
{
	jv jobs = sim_list("jobs.batch", ns), pods;

	if (!jv_array_length(jv_copy(jobs))) {
		jv_free(jobs);
		return;
	}
	pods = sim_list("pods", ns);
	jv_array_foreach(jobs, i, job) {
		if (!ksim_str(job, "metadata.deletionTimestamp") && !sim_job_finished(job))
			sync_one(ns, job, jv_copy(pods));
		jv_free(job);
	}
	jv_free(jobs);
	jv_free(pods);
}
