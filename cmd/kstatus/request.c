/*
 * Requests and results: a request counted for the supervisor's metrics, a
 * transient failure retried after its backoff, and the result lines written
 * (ours counted). What to send is status.c's and event.c's.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "kstatus.h"
#include "banned.h"

int passing;

void emit(jv line)
{
	jv op = jv_get_kind(line) == JV_KIND_OBJECT ? jv_object_get(jv_copy(line), jv_string("op")) : jv_null();

	if (jv_get_kind(op) == JV_KIND_STRING && !strcmp(jv_string_value(op), "result")) {
		jv f = jv_object_get(jv_copy(line), jv_string("for")), ok = jv_object_get(jv_copy(line), jv_string("ok"));
		struct kop_buf labels = KOP_BUF_INIT;

		/* kapply's results pass through here too: only ours are counted. */
		if (jv_get_kind(f) == JV_KIND_STRING &&
		    (!strcmp(jv_string_value(f), "status") || !strcmp(jv_string_value(f), "event")) && !passing) {
			kop_buf_addf(&labels, "op=%s,result=%s", jv_string_value(f),
				     jv_get_kind(ok) == JV_KIND_TRUE ? "ok" : "error");
			tool_metric_add("kstatus_operations_total", labels.buf, 1);
		}
		kop_buf_release(&labels);
		jv_free(f);
		jv_free(ok);
	}
	jv_free(op);
	if (kop_jsonl_write(stdout, line) < 0)
		tool_stdout_failed();
}

/*
 * The writer's request, counted for the supervisor's metrics: the body written
 * out under kstatus_lock, which is let go while the server answers
 * (writers.c).
 */
static int send_request(const char *method, const char *path, const char *ctype, jv body, int meta_only,
			struct kube_response *r)
{
	char *text = jv_is_valid(body) ? kop_json_dump(body) : (jv_free(body), NULL);
	int rc;

	pthread_mutex_unlock(&kstatus_lock);
	rc = kube_request_text(client, method, path, ctype, text, meta_only, r);
	pthread_mutex_lock(&kstatus_lock);
	free(text);
	tool_metric_request(method, r->code);
	return rc;
}

int request(const char *method, const char *path, const char *ctype, jv body, struct kube_response *r)
{
	return send_request(method, path, ctype, body, 0, r);
}

int write_request(const char *method, const char *path, const char *ctype, jv body, struct kube_response *r)
{
	return send_request(method, path, ctype, body, 1, r);
}

/*
 * Whether a failed request should be tried again, after sleeping: transient
 * failures (and 409 when conflict_retries) while tries are left.
 */
int retry_after_failure(const struct kube_response *r, struct kop_backoff *b, unsigned *tries,
			       int conflict_retries)
{
	unsigned delay;
	char why[KOP_ERRLEN];

	if (r->code == 401 && *tries == 0) {
		kube_auth_failed(client);
		++*tries;
		return 1;
	}
	if (!(r->transient || (conflict_retries && r->code == 409)) || *tries >= opt.max_retries || stopping)
		return 0;
	++*tries;
	delay = kop_backoff_next(b);
	if (r->retry_after_s >= 0 && (unsigned long)r->retry_after_s * 1000 > delay)
		delay = (unsigned)(r->retry_after_s > 60 ? 60000 : r->retry_after_s * 1000);
	log_info("retrying in %u ms after %s", delay, kube_failure_text(client, r, why, sizeof(why)));
	writers_sleep(delay);
	return !stopping;	/* a signal during the wait: no retry */
}

void report_fail(const char *what, jv primary, jv ref, const struct kube_response *r, const char *who)
{
	jv fields = jv_object_set(jv_object(), jv_string("code"), jv_number((double)r->code));
	char why[KOP_ERRLEN];

	if (r->reason)
		fields = jv_object_set(fields, jv_string("reason"), jv_string(r->reason));
	/* (no response: the server named and why, as in the retries' lines) */
	tool_logj(LOG_ERROR, fields, "unable to write %s of '%s': %s", what, who,
		  !r->code ? kube_failure_text(client, r, why, sizeof(why)) : r->message ? r->message : "");
	emit(kop_result_fail(what, primary, ref, r));
}

void report_local(const char *what, jv primary, jv ref, long code, const char *reason, const char *msg)
{
	log_error("unable to write %s: %s", what, msg);
	emit(kop_result_local(what, primary, ref, code, reason, msg));
}
