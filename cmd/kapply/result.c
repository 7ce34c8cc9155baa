/*
 * Results: a response read, a transient failure retried after its backoff,
 * a CRD waited for until Established, the result line written and the exit
 * code kept. --diff's output is diff.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include "kapply.h"
#include "banned.h"

/*
 * With -f (a user waiting at a terminal) a failure without a response is
 * retried a little, then the server is given up for all operations, as
 * kubectl does (docs/kapply.md, "When the server cannot be reached"); on
 * stdin (the pipeline) it is retried like any transient failure.
 */
#define FILE_SILENT_RETRIES 3
#define FILE_SILENT_WINDOW_MS 5000

int server_down;
struct kube_response down;

void note_exit(int code)
{
	if (code == KOP_EXIT_PERM || worst == KOP_EXIT_PERM)
		worst = KOP_EXIT_PERM;
	else if (code == KOP_EXIT_TEMP || worst == KOP_EXIT_TEMP)
		worst = KOP_EXIT_TEMP;
	else if (code > worst)
		worst = code;
}

void emit(jv line)
{
	if (kop_jsonl_write(stdout, line) < 0)
		tool_stdout_failed();
}

static int established(jv crd)
{
	jv conds = jv_getpath(crd, JV_ARRAY(jv_string("status"), jv_string("conditions")));
	int i, n, yes = 0;

	if (jv_get_kind(conds) != JV_KIND_ARRAY) {
		jv_free(conds);
		return 0;
	}
	n = jv_array_length(jv_copy(conds));
	for (i = 0; i < n && !yes; i++) {
		jv c = jv_array_get(jv_copy(conds), i);
		char *type = kop_json_str(c, "type", NULL), *status = kop_json_str(c, "status", NULL);

		yes = same(type, "Established") && same(status, "True");
		free(type);
		free(status);
		jv_free(c);
	}
	jv_free(conds);
	return yes;
}

/*
 * The namespaces where a RoleBinding was written in the last few seconds:
 * kube-apiserver's authorizer reads RoleBindings from a cache, so an object
 * written there right after may meet a 403 the binding is about to lift.
 */
#define BINDING_GRACE_MS 5000
static struct {
	char ns[64];
	int64_t at;
} bound[16];

static void binding_written(const struct op *op)
{
	size_t i, oldest = 0;

	if (!op->is_binding || !op->ns || strlen(op->ns) >= sizeof(bound[0].ns))
		return;
	for (i = 0; i < sizeof(bound) / sizeof(bound[0]); i++) {
		if (!strcmp(bound[i].ns, op->ns)) {
			oldest = i;
			break;
		}
		if (bound[i].at < bound[oldest].at)
			oldest = i;
	}
	snprintf(bound[oldest].ns, sizeof(bound[oldest].ns), "%s", op->ns);
	bound[oldest].at = kop_mono_ms();
}

static int just_bound(const struct op *op)
{
	size_t i;
	const char *ns = op_ns(op);

	for (i = 0; ns && i < sizeof(bound) / sizeof(bound[0]); i++)
		if (bound[i].at && !strcmp(bound[i].ns, ns) && kop_mono_ms() - bound[i].at < BINDING_GRACE_MS)
			return 1;
	return 0;
}

static const char *server_url(void)
{
	const struct kube_config *cfg = client ? kube_client_config(client) : NULL;

	return cfg && cfg->server ? cfg->server : "the server";
}

/* No response because nothing could be sent (credentials), not because the server was not there. */
static int not_sent(const struct kube_response *r)
{
	return r->reason && !strcmp(r->reason, "CredentialsUnavailable");
}

/* op's result once the server was given up (r: its own failure, or the one that gave it up). */
void op_not_sent(struct op *op, const struct kube_response *r)
{
	log_debug("'%s' not %s: the server could not be reached", op->who ? op->who : "?",
		  op->kind == OP_DELETE ? "deleted" : op->kind == OP_PATCH ? "patched" : "applied");
	note_exit(kube_exit_code(r));
	op_done(op, kop_result_fail(kind_names[op->kind], jv_copy(op->primary), op_ref(op), r));
}

/* -f: a failure without a response, retried a little, then the server given up. */
static void op_silent(struct op *op, const struct kube_response *r)
{
	char why[KOP_ERRLEN];
	int64_t now = kop_mono_ms(), delay;
	unsigned most = opt.max_retries < FILE_SILENT_RETRIES ? opt.max_retries : FILE_SILENT_RETRIES;

	if (server_down && !not_sent(r)) {
		op_not_sent(op, r);
		return;
	}
	if (!op->first_silent)
		op->first_silent = now;
	if (r->transient && op->silent_retries < most && now - op->first_silent < FILE_SILENT_WINDOW_MS && !stopping) {
		op->silent_retries++;
		delay = kop_backoff_next(&op->backoff);
		log_info("retrying %s of '%s' in %lld ms after %s", kind_names[op->kind], op->who, (long long)delay,
			 kube_failure_text(client, r, why, sizeof(why)));
		op->state = ST_QUEUED;
		op->not_before = now + delay;
		return;
	}
	if (not_sent(r)) {
		op_fail(op, r);
		return;
	}
	/* Every other operation would meet the same: one message, and nothing more is sent. */
	server_down = 1;
	memset(&down, 0, sizeof(down));
	down.code = 0;
	down.body = jv_null();
	down.reason = kop_strdup(r->reason ? r->reason : "ConnectionError");
	down.message = kop_strdup(r->message ? r->message : "");
	down.retry_after_s = -1;
	down.transient = r->transient;
	down.os_errno = r->os_errno;
	tool_logj(LOG_ERROR, jv_object_set(jv_object(), jv_string("reason"), jv_string(down.reason)),
		  "unable to reach '%s': %s (tried %u time%s in %.1f s)", server_url(),
		  kube_no_response_why(r, why, sizeof(why)), op->silent_retries + 1, op->silent_retries ? "s" : "", (double)(now - op->first_try) / 1000.0);
	op_not_sent(op, r);
}

/* A failed request: retried when transient and tries are left, else reported. */
void op_failed(struct op *op, const struct kube_response *r)
{
	int64_t delay;
	char why[KOP_ERRLEN];

	if (!stream_mode && !r->code) {
		op_silent(op, r);
		return;
	}

	if (r->code == 403 && !op->is_binding && op->attempts <= 3 && !stopping && just_bound(op)) {
		delay = kop_backoff_next(&op->backoff);
		log_info("retrying %s of '%s' in %lld ms after 403 %s: a RoleBinding written in its namespace a moment "
			 "ago may not be in force yet", kind_names[op->kind], op->who, (long long)delay,
			 kube_response_why(r, why, sizeof(why)));
		op->state = ST_QUEUED;
		op->not_before = kop_mono_ms() + delay;
		return;
	}

	if (r->code == 401 && !op->auth_retried) {
		op->auth_retried = 1;
		kube_auth_failed(client);
		op->state = ST_QUEUED;
		op->not_before = 0;
		return;
	}
	/* A 409 is never retried here: with force it is a precondition that failed, without a conflict to report. */
	if (r->transient && r->code != 409 && op->attempts <= opt.max_retries && !stopping) {
		delay = kop_backoff_next(&op->backoff);
		/* Never sooner than Retry-After, but never more than a minute on its word. */
		if (r->retry_after_s >= 0 && r->retry_after_s * 1000 > delay)
			delay = r->retry_after_s > 60 ? 60000 : r->retry_after_s * 1000;
		log_info("retrying %s of '%s' in %lld ms after %s", kind_names[op->kind], op->who, (long long)delay,
			 kube_failure_text(client, r, why, sizeof(why)));
		op->state = ST_QUEUED;
		op->not_before = kop_mono_ms() + delay;
		return;
	}
	op_fail(op, r);
}

static void op_response(struct op *op, struct kube_response *r)
{
	int ok = r->code >= 200 && r->code < 300;

	switch (op->phase) {
	case PH_MAIN:
		if (ok && op->crd_kind && opt.dry_run != DRY_SERVER) {
			/* Objects of its kind wait (blocked()) until the API serves it. */
			jv_free(op->applied);
			op->applied = jv_copy(r->body);
			op->applied_code = r->code;
			op->phase = PH_ESTABLISH;
			op->state = ST_QUEUED;
			op->not_before = 0;
			op->deadline = kop_mono_ms() + opt.crd_timeout_ms;
			op->attempts = 0;
			kop_backoff_reset(&op->backoff);
		} else if (ok) {
			binding_written(op);
			op_ok(op, r->code, jv_copy(r->body));
		}
		else if (op->kind == OP_DELETE && r->code == 404) {
			/* Already gone: what a deletion wants. */
			jv res = kop_result_ok("delete", jv_copy(op->primary), op_ref(op), 404, jv_null());

			op_done(op, jv_object_set(res, jv_string("reason"), jv_string("NotFound")));
		} else
			op_failed(op, r);
		return;
	case PH_ESTABLISH:
		if (ok && established(jv_copy(r->body))) {
			kube_discovery_invalidate(client);
			op_ok(op, op->applied_code, jv_copy(op->applied));
		} else if (ok || r->code == 404) {
			if (kop_mono_ms() >= op->deadline) {
				struct kop_buf m = KOP_BUF_INIT;

				kop_buf_addf(&m, "customresourcedefinition '%s' not established after %ld ms", op->name,
					     opt.crd_timeout_ms);
				note_exit(KOP_EXIT_TEMP);
				log_error("%s", m.buf);
				op_done(op, kop_result_local("apply", jv_copy(op->primary), op_ref(op), 504, "Timeout",
							     m.buf));
				kop_buf_release(&m);
			} else {
				op->state = ST_QUEUED;
				op->not_before = kop_mono_ms() + 100;
				op->attempts = 0;
			}
		} else
			op_failed(op, r);
		return;
	case PH_DIFF_GET:
		if (!ok && r->code != 404) {
			op_failed(op, r);
			return;
		}
		jv_free(op->live);
		op->live = ok ? jv_copy(r->body) : jv_null();
		op->attempts = 0;
		kop_backoff_reset(&op->backoff);
		if (op->kind == OP_DELETE) {
			char *uid = kop_json_str(op->live, "metadata", "uid");
			int match = same(uid, op->uid);

			free(uid);
			op_diff(op, jv_copy(op->live), match ? jv_null() : jv_copy(op->live));
			return;
		}
		if (op->kind == OP_PATCH && !ok) {
			op_fail(op, r);
			return;
		}
		op->phase = PH_DIFF_DRY;
		op->state = ST_QUEUED;
		op->not_before = 0;
		return;
	case PH_DIFF_DRY:
		if (!ok) {
			op_failed(op, r);
			return;
		}
		op_diff(op, jv_copy(op->live), jv_copy(r->body));
		return;
	}
}

void finished(CURLMsg *m)
{
	struct op *op;
	char *priv = NULL;
	struct kube_response r;
	struct curl_header *h = NULL;
	const char *retry_after = NULL;
	long code = 0;

	curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
	op = (struct op *)(void *)priv;
	curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &code);
	if (curl_easy_header(m->easy_handle, "Retry-After", 0, CURLH_HEADER, -1, &h) == CURLHE_OK && h)
		retry_after = h->value;
	if (op->phase == PH_MAIN && !op->crd_kind)
		/* (what op_ok reads of it: its resourceVersion and uid) */
		kube_response_meta(&r, code, op->resp.buf, op->resp.len, retry_after, m->data.result, op->errbuf);
	else
		kube_response_from(&r, code, op->resp.buf, op->resp.len, retry_after, m->data.result, op->errbuf);
	if (!code) {
		long os_errno = 0;

		curl_easy_getinfo(m->easy_handle, CURLINFO_OS_ERRNO, &os_errno);
		r.os_errno = (int)os_errno;
	}
	op_end_transfer(op);
	inflight--;
	tool_metric_request(op->method, r.code);
	if (r.code)
		log_debug("'%s': %ld %s", op->who, r.code, r.reason ? r.reason : "");
	else
		log_debug("'%s': no response: %s", op->who, r.reason ? r.reason : "");
	op_response(op, &r);
	kube_response_release(&r);
}
