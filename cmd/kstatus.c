/*
 * kstatus: writes "op":"status" lines to the status subresource (a merge
 * patch, only when the status differs from the stored one) and records
 * "op":"event" lines as core/v1 Events, counting repeats; per object, the
 * statuses that follow a status write within --coalesce are held and only
 * the newest is written. Every other line passes through. One result line
 * per operation.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "tool.h"
#include "kube.h"
#include "jsonl.h"
#include "hmap.h"
#include "opresult.h"
#include "banned.h"

static const char usage[] =
"usage: kstatus [options] < operations\n"
"\n"
"Reads JSON lines on stdin. {\"op\":\"status\",\"object\":{...,\"status\":{...}}} is written to\n"
"the object's status subresource when it differs from the stored status;\n"
"{\"op\":\"event\",\"event\":{\"involvedObject\":{...},\"type\",\"reason\",\"message\"}} is recorded\n"
"as a Kubernetes Event (a repeat within 10 minutes raises the count of the first).\n"
"Every other line is passed through to stdout; each operation adds one\n"
"{\"op\":\"result\",...} line.\n"
"\n"
"Per object, a status is written at once when no --coalesce window is open; one\n"
"opens then, and the statuses that come within it are held: only the newest is\n"
"written when it ends (a replaced one's result says \"skipped\":\"superseded\").\n"
"Events that come while a status is held are written after it, repeats of one\n"
"Event as one write; other events at once. End of input or SIGTERM writes what is\n"
"held, then exits.\n"
"\n"
"      --field-manager M    field manager of status writes (default iot-operator)\n"
"      --component C        the events' reporting component (default iot-operator)\n"
"      --max-retries N      tries after a transient failure or a conflict (default 10)\n"
"      --coalesce D         the window per object (default 500ms, at most 30s; 0: write\n"
"                           every line at once)\n"
"      --kubeconfig F, --context C, --request-timeout D\n"
"  -v, --log-level L, --log-format json|text, -h, --help\n"
"\n"
"Exit: 0 at the end of the input or after SIGTERM/SIGINT (API errors are reported\n"
"in result lines); 100 bad usage or configuration; 111 stdout or stdin failed.\n";

#define EVENT_WINDOW_MS (10 * 60 * 1000)
#define EVENT_CACHE_MAX 4096

static struct {
	const char *field_manager;
	const char *component;
	unsigned max_retries;
	long coalesce_ms;
} opt = { "iot-operator", "iot-operator", 10, 500 };

static struct kube_client *client;
static const char *default_ns = "default";
static char *instance;		/* reportingInstance: $POD_NAME or the host name */
static char *host;
static jv event_cache;		/* key -> {"name","namespace","count","first","last"} */
static int passing;		/* emit() is passing a line through */
static volatile sig_atomic_t stopping;	/* SIGTERM or SIGINT: write what is held, then exit */

static void emit(jv line)
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

/* kube_request, counted for the supervisor's metrics. */
static int request(const char *method, const char *path, const char *ctype, jv body, struct kube_response *r)
{
	int rc = kube_request(client, method, path, ctype, body, r);

	tool_metric_request(method, r->code);
	return rc;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !stopping)
		;
}

/*
 * Whether a failed request should be tried again, after sleeping: transient
 * failures (and 409 when conflict_retries) while tries are left.
 */
static int retry_after_failure(const struct kube_response *r, struct kop_backoff *b, unsigned *tries,
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
	log_info("retrying in %u ms after %ld %s", delay, r->code, kube_response_why(r, why, sizeof(why)));
	sleep_ms(delay);
	return 1;
}

static void report_fail(const char *what, jv primary, jv ref, const struct kube_response *r, const char *who)
{
	jv fields = jv_object_set(jv_object(), jv_string("code"), jv_number((double)r->code));

	if (r->reason)
		fields = jv_object_set(fields, jv_string("reason"), jv_string(r->reason));
	tool_logj(LOG_ERROR, fields, "unable to write %s of '%s': %s", what, who, r->message ? r->message : "");
	emit(kop_result_fail(what, primary, ref, r));
}

static void report_local(const char *what, jv primary, jv ref, long code, const char *reason, const char *msg)
{
	log_error("unable to write %s: %s", what, msg);
	emit(kop_result_local(what, primary, ref, code, reason, msg));
}

/* ---- status -------------------------------------------------------------- */

/* The RFC 7386 merge patch that turns old into new (both consumed): removed keys become null. */
static jv merge_patch(jv old, jv new)
{
	jv patch, keys;
	int i, n;

	if (jv_get_kind(old) != JV_KIND_OBJECT || jv_get_kind(new) != JV_KIND_OBJECT) {
		jv_free(old);
		return new;
	}
	patch = jv_object();
	keys = jv_keys(jv_copy(new));
	n = jv_array_length(jv_copy(keys));
	for (i = 0; i < n; i++) {
		jv k = jv_array_get(jv_copy(keys), i);
		jv nv = jv_object_get(jv_copy(new), jv_copy(k));

		if (!jv_object_has(jv_copy(old), jv_copy(k)))
			patch = jv_object_set(patch, k, nv);
		else {
			jv ov = jv_object_get(jv_copy(old), jv_copy(k));

			if (jv_equal(jv_copy(ov), jv_copy(nv))) {
				jv_free(ov);
				jv_free(nv);
				jv_free(k);
			} else
				patch = jv_object_set(patch, k, merge_patch(ov, nv));
		}
	}
	jv_free(keys);
	keys = jv_keys(jv_copy(old));
	n = jv_array_length(jv_copy(keys));
	for (i = 0; i < n; i++) {
		jv k = jv_array_get(jv_copy(keys), i);

		if (jv_object_has(jv_copy(new), jv_copy(k)))
			jv_free(k);
		else
			patch = jv_object_set(patch, k, jv_null());
	}
	jv_free(keys);
	jv_free(old);
	jv_free(new);
	return patch;
}

/*
 * After a 404 from the status subresource: whether the object itself is
 * gone (or was replaced), rather than the subresource missing (a CRD
 * without one) or the path unknown.
 */
static int object_gone(const char *obj_path, const char *uid)
{
	struct kube_response r;
	int gone;

	if (request("GET", obj_path, NULL, jv_invalid(), &r) < 0)
		gone = r.code == 404;
	else {
		char *live_uid = kop_json_str(r.body, "metadata", "uid");

		gone = uid && *uid && live_uid && strcmp(uid, live_uid);
		free(live_uid);
	}
	kube_response_release(&r);
	return gone;
}

static jv skipped(jv primary, jv ref, long code, const char *why)
{
	jv r = kop_result_ok("status", primary, ref, code, jv_null());

	r = jv_object_set(r, jv_string("reason"), jv_string(code == 404 ? "NotFound" : "Conflict"));
	return jv_object_set(r, jv_string("skipped"), jv_string(why));
}

/*
 * GET the object; unless it is gone (or another object now has its name),
 * merge-patch its status with the stored resourceVersion as a precondition;
 * a 409 (the object changed meanwhile) starts again with a fresh read.
 */
static void do_status(jv line)
{
	jv primary = kop_json_member(jv_copy(line), "primary"), obj = kop_json_member(jv_copy(line), "object"), status;
	char *api_version = kop_json_str(obj, "apiVersion", NULL), *kind = kop_json_str(obj, "kind", NULL);
	char *name = kop_json_str(obj, "metadata", "name"), *ns = kop_json_str(obj, "metadata", "namespace");
	char *uid = kop_json_str(obj, "metadata", "uid"), *obj_path = NULL, *status_path = NULL, *who = NULL;
	struct kube_resource res;
	struct kop_backoff b;
	char err[KOP_ERRLEN];
	unsigned tries = 0;
	int resolved = 0, rc;
	struct kop_buf q = KOP_BUF_INIT;
	struct kube_response dr;

	if (jv_get_kind(primary) != JV_KIND_STRING) {
		jv_free(primary);
		primary = jv_null();
	}
	status = kop_json_member(jv_copy(obj), "status");
	if (!api_version || !kind || !name || !*name || jv_get_kind(status) != JV_KIND_OBJECT) {
		report_local("status", primary, kop_op_ref(jv_copy(obj)), 400, "BadRequest",
			     "a status operation needs an object with apiVersion, kind, metadata.name and status");
		goto out;
	}
	kop_buf_addf(&q, "%s/%s/%s", kind, ns ? ns : "", name);
	who = kop_buf_detach(&q, NULL);
	kop_backoff_init(&b, 100, 5000, 1.0);
	while ((rc = kube_resolve_gvk(client, api_version, kind, &res, &dr, err)) < 0) {
		/* No such kind (permanent), or its group version could not be read (classified as any answer). */
		if (rc == -1) {
			report_local("status", primary, kop_op_ref(jv_copy(obj)), 404, "NotFound", err);
			goto out;
		}
		tool_metric_request("GET", dr.code);
		if (!retry_after_failure(&dr, &b, &tries, 0)) {
			report_fail("status", primary, kop_op_ref(jv_copy(obj)), &dr, who);
			kube_response_release(&dr);
			goto out;
		}
		kube_response_release(&dr);
	}
	resolved = 1;
	if (res.namespaced && !ns) {
		ns = kop_strdup(default_ns);
		obj = jv_object_set(obj, jv_string("metadata"),
				    jv_object_set(kop_json_member(jv_copy(obj), "metadata"), jv_string("namespace"),
						  jv_string(ns)));
	}
	obj_path = kube_path(&res, res.namespaced ? ns : NULL, name, NULL);
	{
		char *sp = kube_path(&res, res.namespaced ? ns : NULL, name, "status"), *fm = kube_query_escape(opt.field_manager);

		kop_buf_addf(&q, "%s?fieldManager=%s", sp, fm);
		status_path = kop_buf_detach(&q, NULL);
		free(sp);
		free(fm);
	}
	for (;;) {
		struct kube_response r;
		jv stored, body, meta;
		char *live_uid, *rv;

		if (request("GET", obj_path, NULL, jv_invalid(), &r) < 0) {
			if (r.code == 404) {
				log_debug("'%s' is gone: status not written", who);
				emit(skipped(jv_copy(primary), kop_op_ref(jv_copy(obj)), 404, "deleted"));
			} else if (!retry_after_failure(&r, &b, &tries, 0))
				report_fail("status", jv_copy(primary), kop_op_ref(jv_copy(obj)), &r, who);
			else {
				kube_response_release(&r);
				continue;
			}
			kube_response_release(&r);
			break;
		}
		live_uid = kop_json_str(r.body, "metadata", "uid");
		if (uid && *uid && live_uid && strcmp(uid, live_uid)) {
			log_debug("'%s' was deleted and created again: status not written", who);
			emit(skipped(jv_copy(primary), kop_op_ref(jv_copy(obj)), 404, "deleted"));
			free(live_uid);
			kube_response_release(&r);
			break;
		}
		free(live_uid);
		stored = kop_json_member(jv_copy(r.body), "status");
		if (jv_get_kind(stored) != JV_KIND_OBJECT) {
			jv_free(stored);
			stored = jv_object();
		}
		if (jv_equal(jv_copy(stored), jv_copy(status))) {
			jv res_line = kop_result_ok("status", jv_copy(primary), kop_op_ref(jv_copy(obj)), 200,
						    jv_copy(r.body));

			emit(jv_object_set(res_line, jv_string("unchanged"), jv_true()));
			jv_free(stored);
			kube_response_release(&r);
			break;
		}
		rv = kop_json_str(r.body, "metadata", "resourceVersion");
		meta = jv_object();
		if (rv)
			meta = jv_object_set(meta, jv_string("resourceVersion"), jv_string(rv));
		free(rv);
		body = jv_object_set(jv_object(), jv_string("metadata"), meta);
		body = jv_object_set(body, jv_string("status"), merge_patch(stored, jv_copy(status)));
		kube_response_release(&r);
		if (request("PATCH", status_path, "application/merge-patch+json", body, &r) == 0) {
			emit(kop_result_ok("status", jv_copy(primary), kop_op_ref(jv_copy(obj)), r.code,
					   jv_copy(r.body)));
			kube_response_release(&r);
			break;
		}
		if (r.code == 404 && object_gone(obj_path, uid)) {
			emit(skipped(jv_copy(primary), kop_op_ref(jv_copy(obj)), 404, "deleted"));
			kube_response_release(&r);
			break;
		}
		if (retry_after_failure(&r, &b, &tries, 1)) {
			if (r.code == 409)
				log_debug("'%s' changed meanwhile: reading it again", who);
			kube_response_release(&r);
			continue;
		}
		report_fail("status", jv_copy(primary), kop_op_ref(jv_copy(obj)), &r, who);
		kube_response_release(&r);
		break;
	}
	jv_free(primary);
out:
	if (resolved)
		kube_resource_release(&res);
	jv_free(status);
	jv_free(obj);
	jv_free(line);
	free(api_version);
	free(kind);
	free(name);
	free(ns);
	free(uid);
	free(obj_path);
	free(status_path);
	free(who);
	kop_buf_release(&q);
}

/* ---- events -------------------------------------------------------------- */

static void cache_trim(int64_t now)
{
	jv keys;
	int i, n;

	if (jv_object_length(jv_copy(event_cache)) < EVENT_CACHE_MAX)
		return;
	keys = jv_keys(jv_copy(event_cache));
	n = jv_array_length(jv_copy(keys));
	for (i = 0; i < n; i++) {
		jv k = jv_array_get(jv_copy(keys), i);
		jv e = jv_object_get(jv_copy(event_cache), jv_copy(k));
		jv last = jv_object_get(e, jv_string("last"));

		if (now - (int64_t)jv_number_value(last) >= EVENT_WINDOW_MS)
			event_cache = jv_object_delete(event_cache, k);
		else
			jv_free(k);
		jv_free(last);
	}
	jv_free(keys);
	if (jv_object_length(jv_copy(event_cache)) >= EVENT_CACHE_MAX) {
		/* All recent: forgetting them only means new Event objects for their repeats. */
		jv_free(event_cache);
		event_cache = jv_object();
	}
}

static jv str_or_null(jv v, const char *key)
{
	char *s = kop_json_str(v, key, NULL);
	jv r = s ? jv_string(s) : jv_null();

	free(s);
	return r;
}

/* <involvedObject.name>.<unix nanoseconds in hex>, as client-go names events. */
static char *event_name(const char *obj_name)
{
	struct timespec ts;
	struct kop_buf b = KOP_BUF_INIT;

	clock_gettime(CLOCK_REALTIME, &ts);
	kop_buf_addf(&b, "%s.%llx", obj_name,
		     (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec);
	return kop_buf_detach(&b, NULL);
}

static jv event_ref(jv io, const char *ns)
{
	jv ref = jv_object(), x;

	if (jv_get_kind(x = kop_json_member(jv_copy(io), "apiVersion")) == JV_KIND_STRING)
		ref = jv_object_set(ref, jv_string("apiVersion"), x);
	else
		jv_free(x);
	if (jv_get_kind(x = kop_json_member(jv_copy(io), "kind")) == JV_KIND_STRING)
		ref = jv_object_set(ref, jv_string("kind"), x);
	else
		jv_free(x);
	if (ns)
		ref = jv_object_set(ref, jv_string("namespace"), jv_string(ns));
	if (jv_get_kind(x = kop_json_member(io, "name")) == JV_KIND_STRING)
		ref = jv_object_set(ref, jv_string("name"), x);
	else
		jv_free(x);
	return ref;
}

/* The line's "primary" when it is a string, else null. */
static jv line_primary(jv line)
{
	jv p = kop_json_member(line, "primary");

	if (jv_get_kind(p) == JV_KIND_STRING)
		return p;
	jv_free(p);
	return jv_null();
}

/*
 * What makes two event lines repeats of one Event: (namespace, kind, name,
 * uid, type, reason, message) of the line (borrowed), or jv_invalid() when
 * it lacks involvedObject.name or reason.
 */
static jv event_key(jv line)
{
	jv ev = kop_json_member(jv_copy(line), "event"), io = kop_json_member(jv_copy(ev), "involvedObject");
	char *name = kop_json_str(io, "name", NULL), *ns = kop_json_str(io, "namespace", NULL);
	char *type = kop_json_str(ev, "type", NULL), *reason = kop_json_str(ev, "reason", NULL);
	char *message = kop_json_str(ev, "message", NULL);
	jv key = jv_invalid();

	if (jv_get_kind(io) == JV_KIND_OBJECT && name && *name && reason && *reason)
		key = jv_dump_string(JV_ARRAY(jv_string(ns && *ns ? ns : default_ns), str_or_null(io, "kind"),
					      jv_string(name), str_or_null(io, "uid"),
					      jv_string(type && *type ? type : "Normal"), jv_string(reason),
					      jv_string(message ? message : "")),
				     0);
	free(name);
	free(ns);
	free(type);
	free(reason);
	free(message);
	jv_free(io);
	jv_free(ev);
	return key;
}

/* One result per line of a recorded group: the count each repeat brought the Event to. */
static void event_results(jv lines, jv ref, long code, jv body, int count0)
{
	int i, n = jv_array_length(jv_copy(lines));

	for (i = 0; i < n; i++) {
		jv r = kop_result_ok("event", line_primary(jv_array_get(jv_copy(lines), i)), jv_copy(ref), code,
				     jv_copy(body));

		emit(jv_object_set(r, jv_string("count"), jv_number(count0 + i + 1)));
	}
	jv_free(ref);
	jv_free(body);
}

static void event_fails(jv lines, jv ref, const struct kube_response *r, const char *who)
{
	int i, n = jv_array_length(jv_copy(lines));

	for (i = 0; i < n; i++)
		report_fail("event", line_primary(jv_array_get(jv_copy(lines), i)), jv_copy(ref), r, who);
	jv_free(ref);
}

/*
 * lines (consumed): one event line, or repeats of one (the same
 * event_key) that came within a coalescing window, recorded by one write
 * whose count grows by their number. A repeat of (object, type, reason,
 * message) seen within 10 minutes raises the count of the Event already
 * written (PATCH); anything else creates one. A repeat whose Event has gone
 * (expired by the server's TTL) creates a new one. One result per line.
 */
static void do_event(jv lines)
{
	jv line = jv_array_get(jv_copy(lines), 0);
	jv ev = kop_json_member(jv_copy(line), "event"), io, key, entry;
	char *io_name = NULL, *io_ns = NULL, *type = NULL, *reason = NULL, *message = NULL, *ev_ns = NULL;
	char ts[40];
	struct kop_backoff b;
	struct kop_buf path = KOP_BUF_INIT;
	unsigned tries = 0;
	int n = jv_array_length(jv_copy(lines));
	int64_t now = kop_wall_ms();

	io = kop_json_member(jv_copy(ev), "involvedObject");
	io_name = kop_json_str(io, "name", NULL);
	io_ns = kop_json_str(io, "namespace", NULL);
	type = kop_json_str(ev, "type", NULL);
	reason = kop_json_str(ev, "reason", NULL);
	message = kop_json_str(ev, "message", NULL);
	if (jv_get_kind(io) != JV_KIND_OBJECT || !io_name || !*io_name || !reason || !*reason) {
		int i;

		for (i = 0; i < n; i++)
			report_local("event", line_primary(jv_array_get(jv_copy(lines), i)), event_ref(jv_copy(io), io_ns),
				     400, "BadRequest", "an event needs involvedObject.name and reason");
		goto out;
	}
	if (!type || !*type) {
		free(type);
		type = kop_strdup("Normal");
	}
	if (!message)
		message = kop_strdup("");
	ev_ns = kop_strdup(io_ns && *io_ns ? io_ns : default_ns);
	kop_time_rfc3339(ts, sizeof(ts), (time_t)(now / 1000));
	key = event_key(line);
	entry = jv_object_get(jv_copy(event_cache), jv_copy(key));
	kop_backoff_init(&b, 100, 5000, 1.0);

	if (jv_get_kind(entry) == JV_KIND_OBJECT &&
	    now - (int64_t)jv_number_value(jv_object_get(jv_copy(entry), jv_string("last"))) < EVENT_WINDOW_MS) {
		char *name = kop_json_str(entry, "name", NULL);
		int count0 = (int)jv_number_value(jv_object_get(jv_copy(entry), jv_string("count")));
		jv patch = jv_object_set(jv_object(), jv_string("count"), jv_number(count0 + n));

		patch = jv_object_set(patch, jv_string("lastTimestamp"), jv_string(ts));
		kop_buf_addf(&path, "/api/v1/namespaces/%s/events/%s", ev_ns, name);
		free(name);
		for (;;) {
			struct kube_response r;

			if (request("PATCH", path.buf, "application/merge-patch+json", jv_copy(patch),
					 &r) == 0) {
				entry = jv_object_set(entry, jv_string("count"), jv_number(count0 + n));
				entry = jv_object_set(entry, jv_string("last"), jv_number((double)now));
				event_cache = jv_object_set(event_cache, jv_copy(key), jv_copy(entry));
				event_results(lines, event_ref(jv_copy(io), ev_ns), r.code, jv_copy(r.body), count0);
				kube_response_release(&r);
				jv_free(patch);
				jv_free(entry);
				jv_free(key);
				goto out;
			}
			if (r.code != 404 && retry_after_failure(&r, &b, &tries, 0)) {
				kube_response_release(&r);
				continue;
			}
			if (r.code != 404) {
				event_fails(lines, event_ref(jv_copy(io), ev_ns), &r, io_name);
				kube_response_release(&r);
				jv_free(patch);
				jv_free(entry);
				jv_free(key);
				goto out;
			}
			/* The Event expired: record the repeat as a new one. */
			kube_response_release(&r);
			break;
		}
		jv_free(patch);
	}
	jv_free(entry);

	kop_buf_reset(&path);
	kop_buf_addf(&path, "/api/v1/namespaces/%s/events", ev_ns);
	for (;;) {
		struct kube_response r;
		char *name = event_name(io_name);
		jv body = jv_object(), src;

		body = jv_object_set(body, jv_string("apiVersion"), jv_string("v1"));
		body = jv_object_set(body, jv_string("kind"), jv_string("Event"));
		body = jv_object_set(body, jv_string("metadata"),
				     jv_object_set(jv_object_set(jv_object(), jv_string("name"), jv_string(name)),
						   jv_string("namespace"), jv_string(ev_ns)));
		body = jv_object_set(body, jv_string("involvedObject"), jv_copy(io));
		body = jv_object_set(body, jv_string("reason"), jv_string(reason));
		body = jv_object_set(body, jv_string("message"), jv_string(message));
		body = jv_object_set(body, jv_string("type"), jv_string(type));
		src = jv_object_set(jv_object(), jv_string("component"), jv_string(opt.component));
		src = jv_object_set(src, jv_string("host"), jv_string(host));
		body = jv_object_set(body, jv_string("source"), src);
		body = jv_object_set(body, jv_string("firstTimestamp"), jv_string(ts));
		body = jv_object_set(body, jv_string("lastTimestamp"), jv_string(ts));
		body = jv_object_set(body, jv_string("count"), jv_number(n));
		body = jv_object_set(body, jv_string("reportingComponent"), jv_string(opt.component));
		body = jv_object_set(body, jv_string("reportingInstance"), jv_string(instance));
		if (request("POST", path.buf, "application/json", body, &r) == 0) {
			entry = jv_object_set(jv_object(), jv_string("name"), jv_string(name));
			entry = jv_object_set(entry, jv_string("count"), jv_number(n));
			entry = jv_object_set(entry, jv_string("last"), jv_number((double)now));
			cache_trim(now);
			event_cache = jv_object_set(event_cache, jv_copy(key), entry);
			event_results(lines, event_ref(jv_copy(io), ev_ns), r.code, jv_copy(r.body), 0);
			free(name);
			kube_response_release(&r);
			break;
		}
		free(name);
		/* AlreadyExists: two events in one nanosecond tick; a new name is tried. */
		if (retry_after_failure(&r, &b, &tries, 1)) {
			kube_response_release(&r);
			continue;
		}
		event_fails(lines, event_ref(jv_copy(io), ev_ns), &r, io_name);
		kube_response_release(&r);
		break;
	}
	jv_free(key);
out:
	jv_free(io);
	jv_free(ev);
	jv_free(line);
	jv_free(lines);
	free(io_name);
	free(io_ns);
	free(type);
	free(reason);
	free(message);
	free(ev_ns);
	kop_buf_release(&path);
}

/* ---- coalescing ---------------------------------------------------------- */

/*
 * A window per object (API group, kind, namespace, name) opens when its
 * status is written at once. The status lines for that object that arrive
 * before the window ends are held, a newer one replacing the held one
 * (whose result says "skipped":"superseded"); an event line for it waits
 * too while a status is held (it came after that status), else it is
 * written at once. When the window ends the newest status is written, then
 * the events held (repeats of one as one write); when anything was held, a
 * new window opens. Every window has the same length, so the list in the
 * order they opened is the list in the order they end.
 */
struct window {
	char *key;
	int64_t end;		/* kop_mono_ms() */
	jv status;		/* the newest status line held, or jv_invalid() */
	jv events;		/* the event lines held, in order */
	struct window *next;
};

static struct kop_hmap windows;
static struct window *win_head, *win_tail;

/* The object an operation line is about, or NULL when the line does not say (it is reported at once). */
static char *op_key(jv line, int is_status)
{
	jv o = is_status ? kop_json_member(jv_copy(line), "object")
			 : kop_json_member(kop_json_member(jv_copy(line), "event"), "involvedObject");
	char *av = kop_json_str(o, "apiVersion", NULL), *kind = kop_json_str(o, "kind", NULL), *name, *ns, *key = NULL;

	if (is_status) {
		name = kop_json_str(o, "metadata", "name");
		ns = kop_json_str(o, "metadata", "namespace");
	} else {
		name = kop_json_str(o, "name", NULL);
		ns = kop_json_str(o, "namespace", NULL);
	}
	if (av && kind && name && *name) {
		const char *slash = strchr(av, '/');
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "%.*s/%s/%s/%s", slash ? (int)(slash - av) : 0, av, kind, ns ? ns : "", name);
		key = kop_buf_detach(&b, NULL);
	}
	free(av);
	free(kind);
	free(name);
	free(ns);
	jv_free(o);
	return key;
}

static void win_push(struct window *w)
{
	w->next = NULL;
	if (win_tail)
		win_tail->next = w;
	else
		win_head = w;
	win_tail = w;
}

static struct window *win_pop(void)
{
	struct window *w = win_head;

	if (w) {
		win_head = w->next;
		if (!win_head)
			win_tail = NULL;
		w->next = NULL;
	}
	return w;
}

static void win_open(const char *key)
{
	struct window *w = kop_calloc(1, sizeof(*w));

	w->key = kop_strdup(key);
	w->end = kop_mono_ms() + opt.coalesce_ms;
	w->status = jv_invalid();
	w->events = jv_array();
	kop_hmap_put(&windows, w->key, w);
	win_push(w);
}

static void win_free(struct window *w)
{
	kop_hmap_remove(&windows, w->key);
	jv_free(w->status);
	jv_free(w->events);
	free(w->key);
	free(w);
}

/* The result of a status line (consumed) that a newer one replaced before it was written. */
static jv superseded(jv line)
{
	jv r = kop_result_ok("status", line_primary(jv_copy(line)), kop_op_ref(kop_json_member(jv_copy(line), "object")),
			     0, jv_null());

	jv_free(line);
	r = jv_object_delete(r, jv_string("code"));	/* nothing was sent */
	return jv_object_set(r, jv_string("skipped"), jv_string("superseded"));
}

/* Held event lines (consumed), in order; the repeats of one are written with it, as one. */
static void write_events(jv events)
{
	int i, j, n = jv_array_length(jv_copy(events));
	char *done = kop_calloc(n > 0 ? (size_t)n : 1, 1);

	for (i = 0; i < n; i++) {
		jv line, key, group;

		if (done[i])
			continue;
		line = jv_array_get(jv_copy(events), i);
		key = event_key(line);
		group = JV_ARRAY(line);
		for (j = i + 1; jv_is_valid(key) && j < n; j++) {
			jv other;

			if (done[j])
				continue;
			other = jv_array_get(jv_copy(events), j);
			if (jv_equal(jv_copy(key), event_key(other))) {
				done[j] = 1;
				group = jv_array_append(group, other);
			} else
				jv_free(other);
		}
		jv_free(key);
		do_event(group);
	}
	free(done);
	jv_free(events);
}

/* Writes what the window held; 1 when it held anything. */
static int win_flush(struct window *w)
{
	jv status = w->status, events = w->events;
	int held = jv_is_valid(status) || jv_array_length(jv_copy(events)) > 0;

	w->status = jv_invalid();
	w->events = jv_array();
	if (jv_is_valid(status))
		do_status(status);
	else
		jv_free(status);
	write_events(events);
	return held;
}

/* Ends the windows that are due (every one when all, none opening again). */
static void windows_due(int all)
{
	while (win_head && (all || win_head->end <= kop_mono_ms())) {
		struct window *w = win_pop();

		if (win_flush(w) && !all) {
			w->end = kop_mono_ms() + opt.coalesce_ms;
			win_push(w);
		} else
			win_free(w);
	}
}

/* ---- main --------------------------------------------------------------- */

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static void handle(jv line)
{
	jv op = kop_json_member(jv_copy(line), "op");
	int is_status = jv_get_kind(op) == JV_KIND_STRING && !strcmp(jv_string_value(op), "status");
	int is_event = jv_get_kind(op) == JV_KIND_STRING && !strcmp(jv_string_value(op), "event");
	char *key = NULL;
	struct window *w;

	jv_free(op);
	if (!is_status && !is_event) {
		passing = 1;
		emit(line);
		passing = 0;
		return;
	}
	if (opt.coalesce_ms > 0)
		key = op_key(line, is_status);
	w = key ? kop_hmap_get(&windows, key) : NULL;
	if (is_status && w) {
		if (jv_is_valid(w->status))
			emit(superseded(w->status));
		w->status = line;
	} else if (is_status) {
		do_status(line);
		if (key)
			win_open(key);
	} else if (w && jv_is_valid(w->status)) {
		w->events = jv_array_append(w->events, line);	/* it comes after that status */
	} else
		do_event(JV_ARRAY(line));
	free(key);
}

enum { OPT_FIELD_MANAGER = OPT_TOOL_LAST, OPT_COMPONENT, OPT_MAX_RETRIES, OPT_COALESCE };

static const struct option options[] = {
	{ "field-manager", required_argument, NULL, OPT_FIELD_MANAGER },
	{ "component", required_argument, NULL, OPT_COMPONENT },
	{ "max-retries", required_argument, NULL, OPT_MAX_RETRIES },
	{ "coalesce", required_argument, NULL, OPT_COALESCE },
	TOOL_COMMON_OPTIONS,
	TOOL_KUBE_OPTIONS,
	{ NULL, 0, NULL, 0 }
};

int main(int argc, char **argv)
{
	struct kube_config cfg;
	struct kop_jsonl reader;
	struct sigaction sa;
	char err[KOP_ERRLEN], hostbuf[256];
	const char *pod;
	int c;

	tool_init("kstatus", argc, argv, 1);
	while ((c = getopt_long(argc, argv, TOOL_COMMON_SHORT, options, NULL)) != -1) {
		if (tool_common_option(c, optarg, usage))
			continue;
		switch (c) {
		case OPT_FIELD_MANAGER:
			if (!*optarg || strlen(optarg) > 128)
				die_usage("invalid --field-manager '%s'", optarg);
			opt.field_manager = optarg;
			break;
		case OPT_COMPONENT:
			if (!*optarg)
				die_usage("invalid --component ''");
			opt.component = optarg;
			break;
		case OPT_MAX_RETRIES: {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);

			if (end == optarg || *end || v > 1000)
				die_usage("invalid --max-retries '%s'", optarg);
			opt.max_retries = (unsigned)v;
			break;
		}
		case OPT_COALESCE:
			/* ireconcile sends an unanswered status again after a minute */
			if ((opt.coalesce_ms = tool_parse_duration_ms(optarg)) < 0 || opt.coalesce_ms > 30000)
				die_usage("invalid --coalesce '%s' (a duration of at most 30s)", optarg);
			break;
		default:
			tool_bad_option(argv, TOOL_COMMON_SHORT);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);

	if (gethostname(hostbuf, sizeof(hostbuf)) < 0)
		hostbuf[0] = '\0';
	hostbuf[sizeof(hostbuf) - 1] = '\0';
	host = kop_strdup(hostbuf);
	pod = getenv("POD_NAME");
	instance = kop_strdup(pod && *pod ? pod : hostbuf);

	curl_global_init(CURL_GLOBAL_DEFAULT);
	memset(&cfg, 0, sizeof(cfg));
	if (kube_config_load(&cfg, tool_kube.kubeconfig, tool_kube.context, err) < 0)
		die(KOP_EXIT_PERM, "%s", err);
	if (cfg.namespace && *cfg.namespace)
		default_ns = kop_strdup(cfg.namespace);
	if (!(client = kube_client_new(&cfg, tool_kube.request_timeout_ms, err)))
		die(KOP_EXIT_PERM, "%s", err);
	kube_client_set_user_agent(client, "iot-operator/kstatus");
	event_cache = jv_object();

	kop_hmap_init(&windows);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;	/* no SA_RESTART: poll() returns */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	kop_jsonl_init(&reader, 0);
	while (!stopping) {
		struct pollfd pfd = { 0, POLLIN, 0 };
		size_t lineno;
		jv v;
		int rc = kop_jsonl_next(&reader, &v, &lineno, err), timeout = -1;

		if (rc > 0) {
			handle(v);
			windows_due(0);
			continue;
		}
		if (rc < 0) {
			log_error("stdin: a bad line skipped: %s", err);
			continue;
		}
		if (reader.eof)
			break;
		windows_due(0);
		if (win_head) {
			int64_t left = win_head->end - kop_mono_ms();

			timeout = left < 0 ? 0 : left > 60000 ? 60000 : (int)left;
		}
		tool_metrics_flush(1);	/* about to wait for stdin */
		rc = poll(&pfd, 1, timeout);
		if (rc < 0 && errno != EINTR) {
			log_error("unable to read stdin: %s", strerror(errno));
			kop_jsonl_eof(&reader);
		} else if (rc > 0 && kop_jsonl_read_fd(&reader, 0) < 0 && errno != EINTR) {
			log_error("unable to read stdin: %s", strerror(errno));
			kop_jsonl_eof(&reader);
		}
	}
	if (stopping && win_head)
		log_info("stopping on a signal: writing the statuses and events held");
	windows_due(1);
	kop_hmap_release(&windows, NULL);
	kop_jsonl_release(&reader);
	jv_free(event_cache);
	kube_client_free(client);
	curl_global_cleanup();
	free(host);
	free(instance);
	if (default_ns && strcmp(default_ns, "default"))
		free((char *)default_ns);
	return tool_finish(KOP_EXIT_OK);
}
