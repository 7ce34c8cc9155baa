/*
 * The cronjob controller: at each time its spec.schedule (cron.c, UTC)
 * names, a CronJob makes a Job of its jobTemplate, named NAME-<minutes
 * since the epoch> as kube-controller-manager names them, and keeps
 * status.active, lastScheduleTime and lastSuccessfulTime. Missed times run
 * once (the latest), concurrencyPolicy Forbid skips while a Job runs and
 * Replace deletes the running ones; finished Jobs beyond the history
 * limits are deleted, oldest first. A timer wakes the pass at the next
 * time. spec.timeZone is not read (UTC).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "sim.h"
#include "banned.h"

static long long parse_time(const char *s)
{
	struct tm tm;

	memset(&tm, 0, sizeof(tm));
	if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm))
		return -1;
	return (long long)timegm(&tm);
}

static void format_time(long long t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static long number(jv obj, const char *a, const char *b, long def)
{
	jv v = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string(a), jv_string(b)));
	long n = jv_get_kind(v) == JV_KIND_NUMBER ? (long)jv_number_value(v) : def;

	jv_free(v);
	return n;
}

static int is_true(jv obj, const char *a, const char *b)
{
	jv v = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string(a), jv_string(b)));
	int yes = jv_get_kind(v) == JV_KIND_TRUE;

	jv_free(v);
	return yes;
}

static jv job_ref(jv job)
{
	return JV_OBJECT(jv_string("kind"), jv_string("Job"), jv_string("namespace"),
			 jv_string(ksim_str(job, "metadata.namespace")), jv_string("name"),
			 jv_string(ksim_str(job, "metadata.name")), jv_string("uid"), jv_string(ksim_str(job, "metadata.uid")),
			 jv_string("apiVersion"), jv_string("batch/v1"), jv_string("resourceVersion"),
			 jv_string(ksim_str(job, "metadata.resourceVersion")));
}

/* Deletes job (consumed) and, in the background, its pods. */
static void delete_job(const char *ns, jv job)
{
	char *name = kop_strdup(ksim_str(job, "metadata.name"));

	sim_write(SIM_KCM, "DELETE", "/apis/batch/v1", ns, "jobs", name, NULL, NULL,
		  JV_OBJECT(jv_string("propagationPolicy"), jv_string("Background")));
	free(name);
	jv_free(job);
}

/* Deletes the oldest finished Jobs (of one outcome) beyond limit. */
static void trim_history(const char *ns, jv finished, long limit)
{
	long n = jv_array_length(jv_copy(finished));

	/* finished is in name order: NAME-<minutes> sorts by time for names of equal length */
	for (long i = 0; i < n - limit; i++)
		delete_job(ns, jv_array_get(jv_copy(finished), (int)i));
	jv_free(finished);
}

static jv new_job(jv cj, long long when)
{
	jv tmpl = jv_getpath(jv_copy(cj), JV_ARRAY(jv_string("spec"), jv_string("jobTemplate")));
	jv md = jv_object_get(jv_copy(tmpl), jv_string("metadata")), spec = jv_object_get(tmpl, jv_string("spec"));
	jv ann;
	char name[320], ts[32];

	if (jv_get_kind(md) != JV_KIND_OBJECT)
		md = (jv_free(md), jv_object());
	if (jv_get_kind(spec) != JV_KIND_OBJECT)
		spec = (jv_free(spec), jv_object());
	snprintf(name, sizeof(name), "%s-%lld", ksim_str(cj, "metadata.name"), when / 60);
	format_time(when, ts, sizeof(ts));
	ann = jv_object_get(jv_copy(md), jv_string("annotations"));
	if (jv_get_kind(ann) != JV_KIND_OBJECT)
		ann = (jv_free(ann), jv_object());
	ann = jv_object_set(ann, jv_string("batch.kubernetes.io/cronjob-scheduled-timestamp"), jv_string(ts));
	md = jv_object_set(md, jv_string("annotations"), ann);
	md = jv_object_set(md, jv_string("name"), jv_string(name));
	md = jv_object_delete(md, jv_string("creationTimestamp"));
	md = jv_object_set(md, jv_string("ownerReferences"),
			   JV_ARRAY(JV_OBJECT(jv_string("apiVersion"), jv_string("batch/v1"), jv_string("kind"),
					      jv_string("CronJob"), jv_string("name"),
					      jv_string(ksim_str(cj, "metadata.name")), jv_string("uid"),
					      jv_string(ksim_str(cj, "metadata.uid")), jv_string("controller"), jv_true(),
					      jv_string("blockOwnerDeletion"), jv_true())));
	return JV_OBJECT(jv_string("apiVersion"), jv_string("batch/v1"), jv_string("kind"), jv_string("Job"),
			 jv_string("metadata"), md, jv_string("spec"), spec);
}

static void sync_one(const char *ns, jv cj, jv jobs)
{
	const char *uid = ksim_str(cj, "metadata.uid"), *sched = ksim_str(cj, "spec.schedule");
	const char *policy = ksim_str(cj, "spec.concurrencyPolicy");
	struct ksim_cron c;
	char err[256], key[160], ts[32];
	jv active = jv_array(), succeeded = jv_array(), failed = jv_array(), status, old;
	long long now = (long long)time(NULL), last, due = -1, next, last_success = -1;

	if (!uid || !sched || ksim_cron_parse(sched, &c, err, sizeof(err)) < 0) {
		jv_free(jobs);
		return;
	}
	jv_array_foreach(jobs, i, job) {
		if (sim_is_controlled_by(job, uid) && !ksim_str(job, "metadata.deletionTimestamp")) {
			jv conds = jv_getpath(jv_copy(job), JV_ARRAY(jv_string("status"), jv_string("conditions")));
			int done = 0;

			if (jv_get_kind(conds) == JV_KIND_ARRAY) {
				jv_array_foreach(conds, j, cond) {
					const char *t = ksim_str(cond, "type"), *s = ksim_str(cond, "status");

					if (t && s && !strcmp(s, "True") && !strcmp(t, "Complete"))
						done = 1;
					else if (t && s && !strcmp(s, "True") && !strcmp(t, "Failed"))
						done = 2;
					jv_free(cond);
				}
			}
			jv_free(conds);
			if (done == 1) {
				long long ct = parse_time(ksim_str(job, "status.completionTime"));

				if (ct > last_success)
					last_success = ct;
				succeeded = jv_array_append(succeeded, jv_copy(job));
			} else if (done == 2) {
				failed = jv_array_append(failed, jv_copy(job));
			} else {
				active = jv_array_append(active, jv_copy(job));
			}
		}
		jv_free(job);
	}
	jv_free(jobs);
	trim_history(ns, succeeded, number(cj, "spec", "successfulJobsHistoryLimit", 3));
	trim_history(ns, failed, number(cj, "spec", "failedJobsHistoryLimit", 1));
	last = parse_time(ksim_str(cj, "status.lastScheduleTime"));
	if (last < 0)
		last = parse_time(ksim_str(cj, "metadata.creationTimestamp"));
	/* the latest time due since the last one (missed ones run once) */
	for (next = ksim_cron_next(&c, last); next >= 0 && next <= now;) {
		due = next;
		if (c.every && now - next > c.every)
			next += (now - next) / c.every * c.every;	/* straight to the latest */
		else
			next = ksim_cron_next(&c, next);
	}
	if (due >= 0 && !is_true(cj, "spec", "suspend")) {
		long deadline = number(cj, "spec", "startingDeadlineSeconds", -1);
		int run = deadline < 0 || now - due <= deadline;

		snprintf(key, sizeof(key), "cronjob/%s/%lld", uid, due);
		sim_timer_due(ns, key, 0);	/* this time's timer, if it woke us, is done */
		if (run && policy && !strcmp(policy, "Forbid") && jv_array_length(jv_copy(active)) > 0)
			run = 0, due = -1;	/* skipped, not recorded: it runs once the active one ends */
		if (run && policy && !strcmp(policy, "Replace")) {
			jv_array_foreach(active, i, job)
				delete_job(ns, job);
			jv_free(active);
			active = jv_array();
		}
		if (run) {
			jv created = jv_null();
			char *p;
			int code;
			struct kop_buf path = KOP_BUF_INIT;

			kop_buf_addf(&path, "/apis/batch/v1/namespaces/%s/jobs?fieldManager=kube-controller-manager", ns);
			p = kop_buf_detach(&path, NULL);
			code = ksim_call_locked(SIM_KCM, "POST", p, new_job(cj, due), &created);
			free(p);
			if (code == 201)
				active = jv_array_append(active, jv_copy(created));
			jv_free(created);
		}
	}
	status = jv_object();
	{
		jv refs = jv_array();

		jv_array_foreach(active, i, job) {
			refs = jv_array_append(refs, job_ref(job));
			jv_free(job);
		}
		if (jv_array_length(jv_copy(refs)) > 0)
			status = jv_object_set(status, jv_string("active"), refs);
		else
			jv_free(refs);
	}
	jv_free(active);
	if (due >= 0) {
		format_time(due, ts, sizeof(ts));
		status = jv_object_set(status, jv_string("lastScheduleTime"), jv_string(ts));
	} else if (ksim_str(cj, "status.lastScheduleTime")) {
		status = jv_object_set(status, jv_string("lastScheduleTime"),
				       jv_string(ksim_str(cj, "status.lastScheduleTime")));
	}
	if (last_success >= 0) {
		format_time(last_success, ts, sizeof(ts));
		status = jv_object_set(status, jv_string("lastSuccessfulTime"), jv_string(ts));
	} else if (ksim_str(cj, "status.lastSuccessfulTime")) {
		status = jv_object_set(status, jv_string("lastSuccessfulTime"),
				       jv_string(ksim_str(cj, "status.lastSuccessfulTime")));
	}
	old = jv_object_get(jv_copy(cj), jv_string("status"));
	if (!jv_equal(old, jv_copy(status)))
		sim_put_status(SIM_KCM, "/apis/batch/v1", "cronjobs", jv_copy(cj), status);
	else
		jv_free(status);
	/* wake at the next time */
	next = ksim_cron_next(&c, now);
	if (next >= 0 && !is_true(cj, "spec", "suspend")) {
		snprintf(key, sizeof(key), "cronjob/%s/%lld", uid, next);
		sim_timer_due(ns, key, (long)((next - now) * 1000));
	}
}

void sim_cronjob_sync(const char *ns)
{
	jv cjs = sim_list("cronjobs.batch", ns), jobs;

	if (!jv_array_length(jv_copy(cjs))) {
		jv_free(cjs);
		return;
	}
	jobs = sim_list("jobs.batch", ns);
	jv_array_foreach(cjs, i, cj) {
		if (!ksim_str(cj, "metadata.deletionTimestamp"))
			sync_one(ns, cj, jv_copy(jobs));
		jv_free(cj);
	}
	jv_free(cjs);
	jv_free(jobs);
}
