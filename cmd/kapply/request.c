/*
 * Requests: an operation's write (or --diff's reads) built and started on
 * the curl multi handle, under the client rate limit and the concurrency.
 * What comes back is result.c's.
 */
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include "kapply.h"
#include "banned.h"

/* The client rate limit (--qps, --burst): a token bucket. */
static struct {
	double tokens;
	int64_t last;
} bucket;

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct op *op = arg;

	kop_buf_add(&op->resp, data, size * nmemb);
	return size * nmemb;
}

/* The token bucket of --qps/--burst: 0 = go now, else ms to wait. */
static int64_t bucket_take(int64_t now)
{
	double burst = opt.burst >= 1 ? opt.burst : 1;

	if (opt.qps <= 0)
		return 0;
	if (!bucket.last) {
		bucket.tokens = burst;
		bucket.last = now;
	}
	bucket.tokens += (double)(now - bucket.last) * opt.qps / 1000.0;
	if (bucket.tokens > burst)
		bucket.tokens = burst;
	bucket.last = now;
	if (bucket.tokens >= 1) {
		bucket.tokens -= 1;
		return 0;
	}
	return (int64_t)((1 - bucket.tokens) * 1000.0 / opt.qps) + 1;
}

static void add_query(struct kop_buf *path, const char *name, const char *value)
{
	char *v = kube_query_escape(value);

	kop_buf_addf(path, "%c%s=%s", strchr(path->buf, '?') ? '&' : '?', name, v);
	free(v);
}

/* The object to send for an apply: the namespace filled in for namespaced kinds. */
static jv apply_body(const struct op *op)
{
	jv obj = jv_copy(op->obj);

	if (op->resolved && op->res.namespaced && !op->ns) {
		jv meta = kop_json_member(jv_copy(obj), "metadata");

		meta = jv_object_set(meta, jv_string("namespace"), jv_string(op_ns(op)));
		obj = jv_object_set(obj, jv_string("metadata"), meta);
	}
	return obj;
}

static jv delete_body(const struct op *op, int dry)
{
	jv o = jv_object(), pp = kop_json_member(jv_copy(op->line), "propagationPolicy");

	o = jv_object_set(o, jv_string("kind"), jv_string("DeleteOptions"));
	o = jv_object_set(o, jv_string("apiVersion"), jv_string("v1"));
	o = jv_object_set(o, jv_string("preconditions"),
			  jv_object_set(jv_object(), jv_string("uid"), jv_string(op->uid)));
	o = jv_object_set(o, jv_string("propagationPolicy"),
			  jv_get_kind(pp) == JV_KIND_STRING ? pp : jv_string("Background"));
	if (jv_get_kind(pp) != JV_KIND_STRING)
		jv_free(pp);
	if (dry)
		o = jv_object_set(o, jv_string("dryRun"), jv_array_append(jv_array(), jv_string("All")));
	return o;
}

static const char *patch_type(const struct op *op)
{
	jv pt = kop_json_member(jv_copy(op->line), "patchType");
	int json = jv_get_kind(pt) == JV_KIND_STRING && !strcmp(jv_string_value(pt), "json");

	jv_free(pt);
	return json ? "application/json-patch+json" : "application/merge-patch+json";
}

/*
 * The request of an operation's write: method, content type, query and body
 * (body returned, owned by the caller; none for an apply or create kept as
 * text, whose body is op->text). dry = add dryRun=All.
 */
jv write_request(const struct op *op, const char **method, const char **ctype, struct kop_buf *query, int dry)
{
	kop_buf_adds(query, "");
	switch (op->kind) {
	case OP_APPLY:
		*method = "PATCH";
		*ctype = "application/apply-patch+yaml";
		add_query(query, "fieldManager", opt.field_manager);
		if (opt.force)
			add_query(query, "force", "true");
		if (dry)
			add_query(query, "dryRun", "All");
		return op->text ? jv_invalid() : apply_body(op);
	case OP_DELETE:
		*method = "DELETE";
		*ctype = "application/json";
		return delete_body(op, dry);
	case OP_PATCH:
		*method = "PATCH";
		*ctype = patch_type(op);
		add_query(query, "fieldManager", opt.field_manager);
		if (dry)
			add_query(query, "dryRun", "All");
		return kop_json_member(jv_copy(op->line), "patch");
	case OP_CREATE:
		/* Never an existing object: one of the same name is a 409 AlreadyExists. */
		*method = "POST";
		*ctype = "application/json";
		add_query(query, "fieldManager", opt.field_manager);
		if (dry)
			add_query(query, "dryRun", "All");
		return op->text ? jv_invalid() : apply_body(op);
	case OP_PASS:
	case OP_UNKNOWN:
		break;
	}
	*method = "GET";
	*ctype = NULL;
	return jv_invalid();
}

/* 0, or as kube_resolve_gvk: -1 no such kind, -2 discovery failed (*fail). */
static int resolve(struct op *op, struct kube_response *fail, char *err)
{
	int rc;

	if (op->resolved)
		return 0;
	if ((rc = kube_resolve_gvk(client, op->api_version, op->kind_name, &op->res, fail, err)) < 0)
		return rc;
	op->resolved = 1;
	return 0;
}

/* op's transfer (finished, or stopped) out of the multi handle, its handle given back to the client. */
void op_end_transfer(struct op *op)
{
	curl_multi_remove_handle(multi, op->easy);
	kube_easy_done(client, op->easy);
	op->easy = NULL;
	curl_slist_free_all(op->headers);
	op->headers = NULL;
}

/* Starts the next request of op (or puts it back in the queue to retry). */
static void op_start(struct op *op)
{
	char err[KOP_ERRLEN];
	struct kop_buf path = KOP_BUF_INIT, query = KOP_BUF_INIT;
	const char *method = "GET", *ctype = NULL, *text = NULL;
	jv body = jv_invalid();
	char *p;
	struct kube_response dr;
	int rc;

	if (!op->first_try)
		op->first_try = kop_mono_ms();
	if ((rc = resolve(op, &dr, err)) < 0) {
		/* No such kind (permanent), or its group version could not be
		 * read: that answer is classified as any other. */
		op->attempts++;
		if (rc == -1) {
			op_fail_local(op, 404, "NotFound", err);
			return;
		}
		tool_metric_request("GET", dr.code);
		op_failed(op, &dr);
		kube_response_release(&dr);
		return;
	}
	if (op->phase == PH_ESTABLISH) {
		p = kube_path(&op->res, NULL, op->name, NULL);
	} else {
		p = kube_path(&op->res, op->res.namespaced ? op_ns(op) : NULL,
			      op->kind == OP_CREATE && op->phase != PH_DIFF_GET ? NULL : op->name, NULL);
		if (op->phase == PH_MAIN) {
			body = write_request(op, &method, &ctype, &query, opt.dry_run == DRY_SERVER);
			text = op->text;
		} else if (op->phase == PH_DIFF_DRY)
			body = write_request(op, &method, &ctype, &query, 1);
	}
	kop_buf_addf(&path, "%s%s", p, query.buf ? query.buf : "");
	free(p);
	kop_buf_release(&query);

	kop_buf_reset(&op->resp);
	op->errbuf[0] = '\0';
	op->headers = NULL;
	op->easy = kube_easy_new(client, method, path.buf, &op->headers, err);
	if (!op->easy) {
		struct kube_response r;

		/* No credentials now (an exec plugin failed, a token file is missing): transient. */
		kube_response_from(&r, 0, NULL, 0, NULL, CURLE_LOGIN_DENIED, err);
		jv_free(body);
		kop_buf_release(&path);
		op->attempts++;
		op_failed(op, &r);
		kube_response_release(&r);
		return;
	}
	if (strcmp(method, "GET") && strcmp(method, "POST"))
		curl_easy_setopt(op->easy, CURLOPT_CUSTOMREQUEST, method);
	if (jv_is_valid(body) || text) {
		char *dump = text ? NULL : kop_json_dump(body);
		const char *send = text ? text : dump;
		struct kop_buf h = KOP_BUF_INIT;

		kop_buf_addf(&h, "Content-Type: %s", ctype);
		op->headers = curl_slist_append(op->headers, h.buf);
		kop_buf_release(&h);
		curl_easy_setopt(op->easy, CURLOPT_POSTFIELDSIZE, (long)strlen(send));
		curl_easy_setopt(op->easy, CURLOPT_COPYPOSTFIELDS, send);
		free(dump);
	} else {
		curl_easy_setopt(op->easy, CURLOPT_HTTPGET, 1L);
		jv_free(body);
	}
	curl_easy_setopt(op->easy, CURLOPT_HTTPHEADER, op->headers);
	curl_easy_setopt(op->easy, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(op->easy, CURLOPT_WRITEDATA, op);
	curl_easy_setopt(op->easy, CURLOPT_ERRORBUFFER, op->errbuf);
	curl_easy_setopt(op->easy, CURLOPT_PRIVATE, op);
	curl_easy_setopt(op->easy, CURLOPT_TIMEOUT_MS,
			 tool_kube.request_timeout_ms > 0 ? tool_kube.request_timeout_ms : 60000L);
	op->method = method;
	log_debug("%s %s", method, path.buf);
	kop_buf_release(&path);
	curl_multi_add_handle(multi, op->easy);
	op->state = ST_RUNNING;
	op->attempts++;
	inflight++;
}

/* Starts what may start now; returns the ms until something may (for the poll timeout). */
int64_t schedule(void)
{
	int64_t now = kop_mono_ms(), wait = 1000;
	size_t i;

	for (i = 0; i < queue_len && !stopping; i++) {
		struct op *op = queue[i];
		int64_t w;

		if (op->kind == OP_PASS || op->state != ST_QUEUED)
			continue;
		if (server_down && !op->bad) {
			op_not_sent(op, &down);
			continue;
		}
		if (op->not_before > now) {
			if (op->not_before - now < wait)
				wait = op->not_before - now;
			continue;
		}
		if (op->bad) {
			op_fail_local(op, 400, "BadRequest", op->bad);
			continue;
		}
		if (inflight >= opt.concurrency)
			break;
		if (blocked(i))
			continue;
		if ((w = bucket_take(now)) > 0) {
			if (w < wait)
				wait = w;
			break;
		}
		op_start(op);
		if (op->state == ST_QUEUED && op->not_before > now && op->not_before - now < wait)
			wait = op->not_before - now;
	}
	return wait;
}
