/*
 * kapply: server-side apply, delete and patch, from the stage protocol on
 * stdin or from manifests (-f), several requests in flight, the order of
 * operations on one object kept, transient failures retried, one result line
 * per operation on stdout.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <curl/curl.h>
#include "tool.h"
#include "kube.h"
#include "jsonl.h"
#include "manifest.h"
#include "opresult.h"
#include "banned.h"

static const char usage[] =
"usage: kapply [options] [-f FILE|DIR|-]...\n"
"\n"
"Without -f, reads JSON lines on stdin: {\"op\":\"apply\"|\"delete\"|\"patch\",...} are\n"
"performed, every other line is passed through to stdout; one {\"op\":\"result\",...}\n"
"line is written per operation. With -f, applies the objects of YAML or JSON\n"
"manifests (as kubectl apply --server-side -f does).\n"
"\n"
"  -f, --filename F         a manifest file, a directory of them, or - (stdin); repeatable\n"
"  -n, --namespace NS       namespace for namespaced objects that name none\n"
"      --field-manager M    server-side apply field manager (default iot-operator)\n"
"      --force-conflicts[=BOOL]  take fields owned by other managers (default true)\n"
"      --dry-run[=MODE]     client (default when given): print what would be sent, no\n"
"                           network; server: send with dryRun=All; none\n"
"      --diff               print, per object, what would change; exit 1 if anything would\n"
"      --concurrency N      requests in flight (default 8)\n"
"      --qps Q, --burst B   client rate limit (default off)\n"
"      --max-retries N      tries after a transient failure (default 10)\n"
"      --crd-timeout D      how long to wait for a CRD to become Established (default 60s)\n"
"      --kubeconfig F, --context C, --request-timeout D\n"
"  -v, --log-level L, --log-format json|text, -h, --help\n"
"\n"
"Exit: 0 all done; 1 --diff found changes; with -f, 100 when the input was bad (no\n"
"objects in it included) or an operation failed permanently, 111 when one still\n"
"failed transiently after its retries. On stdin the stream goes on after any API\n"
"error (reported in its result line) and ends with 0.\n";

enum op_kind { OP_PASS, OP_APPLY, OP_DELETE, OP_PATCH };
static const char *const kind_names[] = { "pass", "apply", "delete", "patch" };

enum op_state { ST_QUEUED, ST_RUNNING, ST_DONE };

/* What the next request of an operation is for. */
enum op_phase {
	PH_MAIN,	/* the write itself */
	PH_ESTABLISH,	/* a CRD was applied: GET it until Established */
	PH_DIFF_GET,	/* --diff: the live object */
	PH_DIFF_DRY	/* --diff: the same write with dryRun=All */
};

struct op {
	enum op_kind kind;
	enum op_state state;
	enum op_phase phase;
	jv line;		/* the input line (kept whole for passthrough) */
	jv obj;			/* the object of an operation */
	jv primary;		/* string or null */
	char *api_version, *kind_name, *group, *ns, *name, *uid;
	char *key;		/* group/Kind/namespace/name: the order of operations is kept per key */
	char *who;		/* Kind/namespace/name, for messages (as much of it as the object gives), or NULL */
	size_t lineno;		/* its line on stdin; 0 from a manifest */
	int bad_names_line;	/* bad already says which line */
	char *crd_group, *crd_kind;	/* an applied CRD: what it defines */
	int is_namespace;	/* an apply of a Namespace: objects in it wait for it */
	char *bad;		/* a malformed operation: reported, never sent */
	struct kube_resource res;
	int resolved;
	/* the transfer in flight */
	CURL *easy;
	const char *method;	/* of the request in flight (a string literal) */
	struct curl_slist *headers;
	struct kop_buf resp;
	char errbuf[CURL_ERROR_SIZE];
	/* retries */
	struct kop_backoff backoff;
	unsigned attempts;
	int auth_retried;
	int64_t not_before;	/* monotonic ms; 0 = now */
	int64_t deadline;	/* PH_ESTABLISH gives up here */
	jv applied;		/* the apply's response, while waiting for Established */
	long applied_code;
	jv live;		/* --diff: the live object, or null */
};

static struct {
	const char *namespace;
	const char *field_manager;
	int force;
	enum { DRY_NONE, DRY_CLIENT, DRY_SERVER } dry_run;
	int diff;
	unsigned concurrency;
	double qps, burst;
	unsigned max_retries;
	long crd_timeout_ms;
} opt = { NULL, "iot-operator", 1, DRY_NONE, 0, 8, 0, 0, 10, 60000 };

static struct kube_client *client;
static const char *default_ns = "default";
static CURLM *multi;
static unsigned inflight;
static struct op **queue;
static size_t queue_len, queue_cap;
#define QUEUE_MAX (256 + 4 * (size_t)opt.concurrency)

static int stream_mode;
static int worst;		/* exit code: 0, 1 (diff), 100, 111 */
static volatile sig_atomic_t stopping;
static int unfinished;		/* stopped by a signal before everything was done */

static struct {
	double tokens;
	int64_t last;
} bucket;

/* ---- small jv helpers --------------------------------------------------- */

/* A string member of v at path a[.b], heap copy, or NULL. */
static void note_exit(int code)
{
	if (code == KOP_EXIT_PERM || worst == KOP_EXIT_PERM)
		worst = KOP_EXIT_PERM;
	else if (code == KOP_EXIT_TEMP || worst == KOP_EXIT_TEMP)
		worst = KOP_EXIT_TEMP;
	else if (code > worst)
		worst = code;
}

static void emit(jv line)
{
	if (kop_jsonl_write(stdout, line) < 0)
		tool_stdout_failed();
}

/* ---- operations ----------------------------------------------------------- */

static void op_free(struct op *op)
{
	jv_free(op->line);
	jv_free(op->obj);
	jv_free(op->primary);
	jv_free(op->applied);
	jv_free(op->live);
	free(op->api_version);
	free(op->kind_name);
	free(op->group);
	free(op->ns);
	free(op->name);
	free(op->uid);
	free(op->key);
	free(op->who);
	free(op->crd_group);
	free(op->crd_kind);
	free(op->bad);
	if (op->resolved)
		kube_resource_release(&op->res);
	kop_buf_release(&op->resp);
	free(op);
}

static struct op *op_alloc(enum op_kind kind, jv line)
{
	struct op *op = kop_calloc(1, sizeof(*op));

	op->kind = kind;
	op->line = line;
	op->obj = jv_null();
	op->primary = jv_null();
	op->applied = jv_null();
	op->live = jv_null();
	kop_backoff_init(&op->backoff, 200, 30000, 1.0);
	return op;
}

static int filled(const char *s)
{
	return s && *s;
}

/* "a number", "an array", "null": what a value of kind k is, for messages. */
static const char *kind_phrase(jv_kind k)
{
	switch (k) {
	case JV_KIND_NULL:
		return "null";
	case JV_KIND_TRUE:
	case JV_KIND_FALSE:
		return "a boolean";
	case JV_KIND_NUMBER:
		return "a number";
	case JV_KIND_STRING:
		return "a string";
	case JV_KIND_ARRAY:
		return "an array";
	default:
		return "not a JSON value";
	}
}

/* Why the object cannot be sent for want of apiVersion, kind or metadata.name; NULL when it has all three. */
static char *missing_names(const struct op *op)
{
	const char *miss[3];
	struct kop_buf b = KOP_BUF_INIT;
	int n = 0, i;

	if (!filled(op->api_version))
		miss[n++] = "apiVersion";
	if (!filled(op->kind_name))
		miss[n++] = "kind";
	if (!filled(op->name))
		miss[n++] = "metadata.name";
	if (!n)
		return NULL;
	kop_buf_adds(&b, "the object has no ");
	for (i = 0; i < n; i++)
		kop_buf_addf(&b, "%s%s", i ? (i == n - 1 ? " or " : ", ") : "", miss[i]);
	kop_buf_adds(&b, " (an operation needs apiVersion, kind and metadata.name)");
	return kop_buf_detach(&b, NULL);
}

/* Reads the members every operation needs; a problem is kept in op->bad. */
static void op_parse(struct op *op)
{
	jv meta;
	char *slash;
	struct kop_buf b = KOP_BUF_INIT;

	if (jv_get_kind(op->obj) != JV_KIND_OBJECT) {
		if (jv_is_valid(op->obj))
			kop_buf_addf(&b, "the object is %s, not an object", kind_phrase(jv_get_kind(op->obj)));
		else
			kop_buf_adds(&b, "the operation has no object");
		op->bad = kop_buf_detach(&b, NULL);
		return;
	}
	op->api_version = kop_json_str(op->obj, "apiVersion", NULL);
	op->kind_name = kop_json_str(op->obj, "kind", NULL);
	op->name = kop_json_str(op->obj, "metadata", "name");
	op->uid = kop_json_str(op->obj, "metadata", "uid");
	op->ns = kop_json_str(op->obj, "metadata", "namespace");
	/* As much of Kind/namespace/name as there is, so that even a refusal names its object. */
	if (filled(op->kind_name) || filled(op->name)) {
		kop_buf_addf(&b, "%s%s", filled(op->kind_name) ? op->kind_name : "",
			     filled(op->kind_name) && filled(op->name) ? "/" : "");
		if (filled(op->name))
			kop_buf_addf(&b, "%s%s%s", filled(op->ns) ? op->ns : "", filled(op->ns) ? "/" : "", op->name);
		op->who = kop_buf_detach(&b, NULL);
	}
	if ((op->bad = missing_names(op)))
		return;
	slash = strchr(op->api_version, '/');
	op->group = slash ? kop_strndup(op->api_version, (size_t)(slash - op->api_version)) : kop_strdup("");
	kop_buf_addf(&b, "%s/%s/%s/%s", op->group, op->kind_name, op->ns ? op->ns : "", op->name);
	op->key = kop_buf_detach(&b, NULL);
	if (op->ns && opt.namespace && strcmp(op->ns, opt.namespace)) {
		kop_buf_addf(&b, "the namespace from the provided object '%s' does not match the namespace '%s'",
			     op->ns, opt.namespace);
		op->bad = kop_buf_detach(&b, NULL);
		return;
	}
	if (op->kind != OP_APPLY)
		return;
	if (!*op->group && !strcmp(op->kind_name, "Namespace"))
		op->is_namespace = 1;
	if (!strcmp(op->group, "apiextensions.k8s.io") && !strcmp(op->kind_name, "CustomResourceDefinition")) {
		jv spec = kop_json_member(jv_copy(op->obj), "spec");

		op->crd_group = kop_json_str(spec, "group", NULL);
		op->crd_kind = kop_json_str(spec, "names", "kind");
		jv_free(spec);
	}
	meta = kop_json_member(jv_copy(op->obj), "metadata");
	if (jv_get_kind(meta) == JV_KIND_OBJECT) {
		jv mf = jv_object_get(jv_copy(meta), jv_string("managedFields"));

		/* Objects read back from the server carry these; apply must not. */
		if (jv_is_valid(mf)) {
			meta = jv_object_delete(meta, jv_string("managedFields"));
			op->obj = jv_object_set(op->obj, jv_string("metadata"), jv_copy(meta));
		}
		jv_free(mf);
	}
	jv_free(meta);
}

/* An input line (consumed; lineno 0 = from a manifest) as an operation or a passthrough. */
static struct op *op_from_line(jv line, size_t lineno)
{
	jv opname = kop_json_member(jv_copy(line), "op");
	enum op_kind kind = OP_PASS;
	struct op *op;

	if (jv_get_kind(opname) == JV_KIND_STRING) {
		const char *s = jv_string_value(opname);

		if (!strcmp(s, "apply"))
			kind = OP_APPLY;
		else if (!strcmp(s, "delete"))
			kind = OP_DELETE;
		else if (!strcmp(s, "patch"))
			kind = OP_PATCH;
	}
	jv_free(opname);
	op = op_alloc(kind, line);
	op->lineno = lineno;
	op->primary = kop_json_member(jv_copy(line), "primary");
	if (jv_get_kind(op->primary) != JV_KIND_STRING) {
		jv_free(op->primary);
		op->primary = jv_null();
	}
	if (kind == OP_PASS)
		return op;
	op->obj = kop_json_member(jv_copy(line), "object");
	op_parse(op);
	if (!op->bad && kind == OP_DELETE && (!op->uid || !*op->uid))
		op->bad = kop_strdup("a deletion needs metadata.uid (it is sent as a precondition)");
	if (!op->bad && kind == OP_PATCH) {
		jv pt = kop_json_member(jv_copy(line), "patchType"), p = kop_json_member(jv_copy(line), "patch");

		if (jv_get_kind(pt) != JV_KIND_STRING ||
		    (strcmp(jv_string_value(pt), "json") && strcmp(jv_string_value(pt), "merge")))
			op->bad = kop_strdup("a patch needs \"patchType\": \"json\" or \"merge\"");
		else if (!jv_is_valid(p) || jv_get_kind(p) == JV_KIND_NULL)
			op->bad = kop_strdup("a patch needs \"patch\"");
		jv_free(pt);
		jv_free(p);
	}
	return op;
}

static const char *op_ns(const struct op *op)
{
	return op->ns ? op->ns : (opt.namespace ? opt.namespace : default_ns);
}

static jv op_ref(const struct op *op)
{
	jv ref = kop_op_ref(jv_copy(op->obj));

	if (op->resolved && op->res.namespaced && !op->ns)
		ref = jv_object_set(ref, jv_string("namespace"), jv_string(op_ns(op)));
	return ref;
}

/* Writes op's result line and marks it done. line is consumed. */
static void op_done(struct op *op, jv result)
{
	jv ok = jv_object_get(jv_copy(result), jv_string("ok"));
	struct kop_buf labels = KOP_BUF_INIT;

	kop_buf_addf(&labels, "op=%s,result=%s", kind_names[op->kind],
		     jv_get_kind(ok) == JV_KIND_TRUE ? "ok" : "error");
	tool_metric_add("kapply_operations_total", labels.buf, 1);
	kop_buf_release(&labels);
	jv_free(ok);
	if (opt.dry_run == DRY_SERVER)
		result = jv_object_set(result, jv_string("dryRun"), jv_string("server"));
	emit(result);
	op->state = ST_DONE;
}

static void op_ok(struct op *op, long code, jv body)
{
	op_done(op, kop_result_ok(kind_names[op->kind], jv_copy(op->primary), op_ref(op), code, body));
}

static void op_fail(struct op *op, const struct kube_response *r)
{
	jv fields = jv_object();

	fields = jv_object_set(fields, jv_string("code"), jv_number((double)r->code));
	if (r->reason)
		fields = jv_object_set(fields, jv_string("reason"), jv_string(r->reason));
	tool_logj(LOG_ERROR, fields, "unable to %s '%s': %s", kind_names[op->kind], op->who,
		  r->message ? r->message : "");
	if (r->code == 409 && op->kind == OP_APPLY && !opt.force)
		log_error("the fields above have other managers: to take them over, apply again with "
			  "--force-conflicts; to leave them, remove them from '%s'", op->who);
	note_exit(kube_exit_code(r));
	op_done(op, kop_result_fail(kind_names[op->kind], jv_copy(op->primary), op_ref(op), r));
}

static void op_fail_local(struct op *op, long code, const char *reason, const char *msg)
{
	const char *verb = kind_names[op->kind];

	if (op->who && op->lineno && !op->bad_names_line)
		log_error("unable to %s '%s' (line %zu): %s", verb, op->who, op->lineno, msg);
	else if (op->who)
		log_error("unable to %s '%s': %s", verb, op->who, msg);
	else if (op->lineno)
		log_error("unable to %s the object of line %zu: %s", verb, op->lineno, msg);
	else
		log_error("unable to %s an object without kind or name: %s", verb, msg);
	note_exit(KOP_EXIT_PERM);
	op_done(op, kop_result_local(kind_names[op->kind], jv_copy(op->primary), op_ref(op), code, reason, msg));
}

/* ---- the queue ------------------------------------------------------------ */

static void queue_push(struct op *op)
{
	if (queue_len == queue_cap) {
		queue_cap = queue_cap ? 2 * queue_cap : 64;
		queue = kop_realloc(queue, queue_cap * sizeof(*queue));
	}
	queue[queue_len++] = op;
}

static int same(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

/*
 * Whether queue[i] must wait for an earlier operation still unfinished: one
 * on the same object, the apply of its namespace, or the apply of the CRD
 * that defines its kind (until Established).
 */
static int blocked(size_t i)
{
	const struct op *op = queue[i];
	size_t j;

	for (j = 0; j < i; j++) {
		const struct op *e = queue[j];

		if (e->kind == OP_PASS || e->state == ST_DONE)
			continue;
		if (same(e->key, op->key))
			return 1;
		if (e->is_namespace && same(e->name, op_ns(op)) && !op->is_namespace)
			return 1;
		if (e->crd_kind && same(e->crd_group, op->group) && same(e->crd_kind, op->kind_name))
			return 1;
	}
	return 0;
}

/* A passthrough line waits for the earlier operations of its primary (of all, without one). */
static int pass_blocked(size_t i)
{
	const struct op *p = queue[i];
	size_t j;

	for (j = 0; j < i; j++) {
		const struct op *e = queue[j];

		if (e->kind == OP_PASS || e->state == ST_DONE)
			continue;
		if (jv_get_kind(p->primary) != JV_KIND_STRING || jv_get_kind(e->primary) != JV_KIND_STRING ||
		    jv_equal(jv_copy(p->primary), jv_copy(e->primary)))
			return 1;
	}
	return 0;
}

/* Writes the passthrough lines that may go, and drops finished entries. */
static void flush_queue(void)
{
	size_t i, n = 0;
	int held = 0;

	for (i = 0; i < queue_len; i++) {
		struct op *op = queue[i];

		if (op->kind == OP_PASS && !held) {
			if (pass_blocked(i))
				held = 1;
			else {
				emit(jv_copy(op->line));
				op->state = ST_DONE;
			}
		}
	}
	for (i = 0; i < queue_len; i++) {
		if (queue[i]->state == ST_DONE)
			op_free(queue[i]);
		else
			queue[n++] = queue[i];
	}
	queue_len = n;
}

/* ---- requests ------------------------------------------------------------- */

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
 * (body returned, owned by the caller). dry = add dryRun=All.
 */
static jv write_request(const struct op *op, const char **method, const char **ctype, struct kop_buf *query, int dry)
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
		return apply_body(op);
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
	case OP_PASS:
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

static void op_failed(struct op *op, const struct kube_response *r);

/* Starts the next request of op (or puts it back in the queue to retry). */
static void op_start(struct op *op)
{
	char err[KOP_ERRLEN];
	struct kop_buf path = KOP_BUF_INIT, query = KOP_BUF_INIT;
	const char *method = "GET", *ctype = NULL;
	jv body = jv_invalid();
	char *p;
	struct kube_response dr;
	int rc;

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
		p = kube_path(&op->res, op->res.namespaced ? op_ns(op) : NULL, op->name, NULL);
		if (op->phase == PH_MAIN)
			body = write_request(op, &method, &ctype, &query, opt.dry_run == DRY_SERVER);
		else if (op->phase == PH_DIFF_DRY)
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
	if (jv_is_valid(body)) {
		char *text = kop_json_dump(body);
		struct kop_buf h = KOP_BUF_INIT;

		kop_buf_addf(&h, "Content-Type: %s", ctype);
		op->headers = curl_slist_append(op->headers, h.buf);
		kop_buf_release(&h);
		curl_easy_setopt(op->easy, CURLOPT_POSTFIELDSIZE, (long)strlen(text));
		curl_easy_setopt(op->easy, CURLOPT_COPYPOSTFIELDS, text);
		free(text);
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
static int64_t schedule(void)
{
	int64_t now = kop_mono_ms(), wait = 1000;
	size_t i;

	for (i = 0; i < queue_len && !stopping; i++) {
		struct op *op = queue[i];
		int64_t w;

		if (op->kind == OP_PASS || op->state != ST_QUEUED)
			continue;
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

/* ---- results ------------------------------------------------------------- */

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

/* Drops what the server generates, so that --diff shows only what would change. */
static jv scrub(jv obj)
{
	static const char *const gone[] = { "managedFields", "resourceVersion", "generation", "creationTimestamp",
					    "uid", NULL };
	jv meta;
	int i;

	if (jv_get_kind(obj) != JV_KIND_OBJECT)
		return obj;
	meta = jv_object_get(jv_copy(obj), jv_string("metadata"));
	if (jv_get_kind(meta) != JV_KIND_OBJECT) {
		jv_free(meta);
		return obj;
	}
	for (i = 0; gone[i]; i++)
		meta = jv_object_delete(meta, jv_string(gone[i]));
	return jv_object_set(obj, jv_string("metadata"), meta);
}

static int plain_key(const char *k)
{
	if (!*k)
		return 0;
	for (; *k; k++)
		if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || (*k >= '0' && *k <= '9') ||
		      *k == '_' || *k == '-'))
			return 0;
	return 1;
}

/*
 * The differences between a and b (both consumed; jv_invalid() = absent) as
 * {"path",".a.b[0]","from","to"} entries appended to *changes. Objects and
 * arrays of equal length are compared member by member; anything else whole.
 */
static void diff_values(jv a, jv b, const char *path, jv *changes)
{
	jv_kind ka = jv_get_kind(a), kb = jv_get_kind(b);
	struct kop_buf p = KOP_BUF_INIT;

	if (jv_is_valid(a) && jv_is_valid(b) && jv_equal(jv_copy(a), jv_copy(b))) {
		jv_free(a);
		jv_free(b);
		return;
	}
	if (ka == JV_KIND_OBJECT && kb == JV_KIND_OBJECT) {
		jv keys = jv_keys(jv_object_merge(jv_copy(a), jv_copy(b)));
		int i, n = jv_array_length(jv_copy(keys));

		for (i = 0; i < n; i++) {
			jv k = jv_array_get(jv_copy(keys), i);
			const char *ks = jv_string_value(k);

			kop_buf_reset(&p);
			if (plain_key(ks))
				kop_buf_addf(&p, "%s.%s", path, ks);
			else {
				jv q = jv_dump_string(jv_copy(k), 0);

				kop_buf_addf(&p, "%s[%s]", path, jv_string_value(q));
				jv_free(q);
			}
			diff_values(jv_object_has(jv_copy(a), jv_copy(k)) ? jv_object_get(jv_copy(a), jv_copy(k))
									    : jv_invalid(),
				    jv_object_has(jv_copy(b), jv_copy(k)) ? jv_object_get(jv_copy(b), jv_copy(k))
									    : jv_invalid(),
				    p.buf, changes);
			jv_free(k);
		}
		jv_free(keys);
	} else if (ka == JV_KIND_ARRAY && kb == JV_KIND_ARRAY &&
		   jv_array_length(jv_copy(a)) == jv_array_length(jv_copy(b))) {
		int i, n = jv_array_length(jv_copy(a));

		for (i = 0; i < n; i++) {
			kop_buf_reset(&p);
			kop_buf_addf(&p, "%s[%d]", path, i);
			diff_values(jv_array_get(jv_copy(a), i), jv_array_get(jv_copy(b), i), p.buf, changes);
		}
	} else {
		jv c = jv_object_set(jv_object(), jv_string("path"), jv_string(*path ? path : "."));

		if (jv_is_valid(a))
			c = jv_object_set(c, jv_string("from"), jv_copy(a));
		if (jv_is_valid(b))
			c = jv_object_set(c, jv_string("to"), jv_copy(b));
		*changes = jv_array_append(*changes, c);
	}
	kop_buf_release(&p);
	jv_free(a);
	jv_free(b);
}

/* ---- Secrets: their values are never printed --------------------------------- */

#define LAST_APPLIED "kubectl.kubernetes.io/last-applied-configuration"

static int op_is_secret(const struct op *op)
{
	return op->group && !*op->group && same(op->kind_name, "Secret");
}

/* v (consumed) as the mask s; a null stays null (it holds nothing, and in a merge patch it deletes). */
static jv masked(jv v, const char *s)
{
	if (jv_get_kind(v) == JV_KIND_NULL)
		return v;
	jv_free(v);
	return jv_string(s);
}

/*
 * a.key and b.key masked as kubectl diff masks a Secret's data: "***" when
 * the two are equal or only one side has it, "*** (before)" and
 * "*** (after)" when they differ, so that a diff still shows that it changed.
 * a and b are objects or anything else (= absent), replaced; key is consumed.
 */
static void mask_member(jv *a, jv *b, jv key)
{
	int ina = jv_get_kind(*a) == JV_KIND_OBJECT && jv_object_has(jv_copy(*a), jv_copy(key));
	int inb = jv_get_kind(*b) == JV_KIND_OBJECT && jv_object_has(jv_copy(*b), jv_copy(key));
	jv va = ina ? jv_object_get(jv_copy(*a), jv_copy(key)) : jv_invalid();
	jv vb = inb ? jv_object_get(jv_copy(*b), jv_copy(key)) : jv_invalid();
	int differ = ina && inb && !jv_equal(jv_copy(va), jv_copy(vb));

	if (ina)
		*a = jv_object_set(*a, jv_copy(key), masked(va, differ ? "*** (before)" : "***"));
	else
		jv_free(va);
	if (inb)
		*b = jv_object_set(*b, jv_copy(key), masked(vb, differ ? "*** (after)" : "***"));
	else
		jv_free(vb);
	jv_free(key);
}

/* Every value of the map a.field and b.field (two versions of a Secret, either absent) masked. */
static void mask_map(jv *a, jv *b, const char *field)
{
	jv ma = kop_json_member(jv_copy(*a), field), mb = kop_json_member(jv_copy(*b), field), keys;
	jv_kind ka = jv_get_kind(ma), kb = jv_get_kind(mb);
	int i, n;

	if ((ka != JV_KIND_OBJECT && ka != JV_KIND_NULL && ka != JV_KIND_INVALID) ||
	    (kb != JV_KIND_OBJECT && kb != JV_KIND_NULL && kb != JV_KIND_INVALID)) {
		/* Not a map (the server would refuse it): the whole value is masked. */
		jv_free(ma);
		jv_free(mb);
		mask_member(a, b, jv_string(field));
		return;
	}
	keys = jv_keys(jv_object_merge(ka == JV_KIND_OBJECT ? jv_copy(ma) : jv_object(),
				       kb == JV_KIND_OBJECT ? jv_copy(mb) : jv_object()));
	n = jv_array_length(jv_copy(keys));
	for (i = 0; i < n; i++)
		mask_member(&ma, &mb, jv_array_get(jv_copy(keys), i));
	jv_free(keys);
	if (ka == JV_KIND_OBJECT)
		*a = jv_object_set(*a, jv_string(field), ma);
	else
		jv_free(ma);
	if (kb == JV_KIND_OBJECT)
		*b = jv_object_set(*b, jv_string(field), mb);
	else
		jv_free(mb);
}

/* a.metadata.annotations, or jv_invalid() when a has none. */
static jv annotations(jv a)
{
	return kop_json_member(kop_json_member(a, "metadata"), "annotations");
}

static jv set_annotations(jv a, jv ann)
{
	jv meta = kop_json_member(jv_copy(a), "metadata");

	return jv_object_set(a, jv_string("metadata"), jv_object_set(meta, jv_string("annotations"), ann));
}

/*
 * Two versions of a Secret (objects, or anything else for absent; both
 * replaced) with the values of data and stringData masked, and the
 * annotation kubectl's client-side apply leaves, which holds them all again.
 */
static void mask_secrets(jv *a, jv *b)
{
	jv ana = annotations(jv_copy(*a)), anb = annotations(jv_copy(*b));
	int had_a = jv_get_kind(ana) == JV_KIND_OBJECT, had_b = jv_get_kind(anb) == JV_KIND_OBJECT;

	mask_map(a, b, "data");
	mask_map(a, b, "stringData");
	mask_member(&ana, &anb, jv_string(LAST_APPLIED));
	if (had_a)
		*a = set_annotations(*a, ana);
	else
		jv_free(ana);
	if (had_b)
		*b = set_annotations(*b, anb);
	else
		jv_free(anb);
}

/* One version of a Secret (consumed), masked. */
static jv mask_secret(jv v)
{
	jv none = jv_invalid();

	mask_secrets(&v, &none);
	jv_free(none);
	return v;
}

/* The JSON pointer p as a jv path: ["data","k"] for "/data/k" ("~1" is '/', "~0" is '~'). */
static jv pointer_path(const char *p)
{
	jv path = jv_array();
	struct kop_buf t = KOP_BUF_INIT;

	while (*p == '/') {
		kop_buf_reset(&t);
		kop_buf_adds(&t, "");
		for (p++; *p && *p != '/'; p++) {
			char c = *p;

			if (c == '~' && (p[1] == '0' || p[1] == '1'))
				c = *++p == '1' ? '/' : '~';
			kop_buf_add(&t, &c, 1);
		}
		path = jv_array_append(path, jv_string(t.buf));
	}
	kop_buf_release(&t);
	return path;
}

/*
 * The body of a write to a Secret (consumed) with its values masked: an
 * object (apply, merge patch) as mask_secret, a JSON patch per operation,
 * each "value" masked as if it stood at its "path" in an object.
 */
static jv mask_secret_body(jv body)
{
	int i, n;

	if (jv_get_kind(body) == JV_KIND_OBJECT)
		return mask_secret(body);
	if (jv_get_kind(body) != JV_KIND_ARRAY)
		return body;
	n = jv_array_length(jv_copy(body));
	for (i = 0; i < n; i++) {
		jv o = jv_array_get(jv_copy(body), i), v, path;
		char *p;

		if (jv_get_kind(o) != JV_KIND_OBJECT || !jv_object_has(jv_copy(o), jv_string("value"))) {
			jv_free(o);
			continue;
		}
		p = kop_json_str(o, "path", NULL);
		path = pointer_path(p ? p : "");
		free(p);
		v = jv_object_get(jv_copy(o), jv_string("value"));
		if (jv_array_length(jv_copy(path)))
			v = jv_getpath(mask_secret(jv_setpath(jv_object(), jv_copy(path), v)), jv_copy(path));
		else
			v = mask_secret(v);
		/* A path inside a value that is masked whole (a string under data) leaves nothing to show. */
		if (!jv_is_valid(v)) {
			jv_free(v);
			v = jv_string("***");
		}
		jv_free(path);
		body = jv_array_set(body, i, jv_object_set(o, jv_string("value"), v));
	}
	return body;
}

/* --diff: before (live, null = absent) and after (null = gone), both consumed. */
static void op_diff(struct op *op, jv before, jv after)
{
	jv changes = jv_array(), line;

	if (op_is_secret(op))
		mask_secrets(&before, &after);
	diff_values(jv_get_kind(before) == JV_KIND_NULL ? jv_invalid() : scrub(before),
		    jv_get_kind(after) == JV_KIND_NULL ? jv_invalid() : scrub(after), "", &changes);
	if (!jv_array_length(jv_copy(changes))) {
		jv_free(changes);
		op->state = ST_DONE;
		return;
	}
	note_exit(KOP_EXIT_NO);
	line = jv_object_set(jv_object(), jv_string("op"), jv_string("diff"));
	line = jv_object_set(line, jv_string("for"), jv_string(kind_names[op->kind]));
	if (jv_get_kind(op->primary) == JV_KIND_STRING)
		line = jv_object_set(line, jv_string("primary"), jv_copy(op->primary));
	line = jv_object_set(line, jv_string("ref"), op_ref(op));
	line = jv_object_set(line, jv_string("changes"), changes);
	emit(line);
	op->state = ST_DONE;
}

/* A failed request: retried when transient and tries are left, else reported. */
static void op_failed(struct op *op, const struct kube_response *r)
{
	int64_t delay;
	char why[KOP_ERRLEN];

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
		log_info("retrying %s of '%s' in %lld ms after %ld %s", kind_names[op->kind], op->who,
			 (long long)delay, r->code, kube_response_why(r, why, sizeof(why)));
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
		} else if (ok)
			op_ok(op, r->code, jv_copy(r->body));
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

static void finished(CURLMsg *m)
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
	kube_response_from(&r, code, op->resp.buf, op->resp.len, retry_after, m->data.result, op->errbuf);
	curl_multi_remove_handle(multi, m->easy_handle);
	curl_easy_cleanup(m->easy_handle);
	curl_slist_free_all(op->headers);
	op->headers = NULL;
	op->easy = NULL;
	inflight--;
	tool_metric_request(op->method, r.code);
	log_debug("'%s': %ld %s", op->who, r.code, r.reason ? r.reason : "");
	op_response(op, &r);
	kube_response_release(&r);
}

/* ---- --dry-run=client ------------------------------------------------------ */

static jv request_line(const char *method, const char *ctype, const struct kop_buf *query, jv body)
{
	jv req = jv_object_set(jv_object(), jv_string("method"), jv_string(method));

	req = jv_object_set(req, jv_string("contentType"), jv_string(ctype));
	if (query->len)
		req = jv_object_set(req, jv_string("query"), jv_string(query->buf + 1));
	return jv_object_set(req, jv_string("body"), body);
}

/* What would be sent, without discovery: the path needs the server, so it is left out. */
static void dry_run_client(struct op *op)
{
	const char *method, *ctype;
	struct kop_buf query = KOP_BUF_INIT;
	jv line, req, body;

	if (op->bad) {
		op_fail_local(op, 400, "BadRequest", op->bad);
		return;
	}
	body = write_request(op, &method, &ctype, &query, 0);
	if (op_is_secret(op) && op->kind != OP_DELETE)
		body = mask_secret_body(body);
	if (op->kind == OP_APPLY && !op->ns && opt.namespace) {
		/* Without discovery the scope is unknown: -n is shown as given. */
		jv meta = kop_json_member(jv_copy(body), "metadata");

		meta = jv_object_set(meta, jv_string("namespace"), jv_string(opt.namespace));
		body = jv_object_set(body, jv_string("metadata"), meta);
	}
	line = jv_object_set(jv_object(), jv_string("op"), jv_string("dry-run"));
	line = jv_object_set(line, jv_string("for"), jv_string(kind_names[op->kind]));
	if (jv_get_kind(op->primary) == JV_KIND_STRING)
		line = jv_object_set(line, jv_string("primary"), jv_copy(op->primary));
	req = op_ref(op);
	if (!op->ns && opt.namespace)
		req = jv_object_set(req, jv_string("namespace"), jv_string(opt.namespace));
	line = jv_object_set(line, jv_string("ref"), req);
	line = jv_object_set(line, jv_string("request"), request_line(method, ctype, &query, body));
	kop_buf_release(&query);
	emit(line);
	op->state = ST_DONE;
}

/* ---- input ------------------------------------------------------------------ */

static struct kop_jsonl reader;
static int input_done;
static jv manifest_objs;
static int manifest_next, manifest_len;

/* One more input line as an operation, or NULL when there is none now. */
static struct op *next_input(void)
{
	char err[KOP_ERRLEN];
	size_t lineno;
	jv v;
	int rc;

	if (!stream_mode) {
		jv line;

		if (manifest_next >= manifest_len) {
			input_done = 1;
			return NULL;
		}
		line = jv_object_set(jv_object(), jv_string("op"), jv_string("apply"));
		line = jv_object_set(line, jv_string("object"), jv_array_get(jv_copy(manifest_objs), manifest_next++));
		return op_from_line(line, 0);
	}
	while ((rc = kop_jsonl_next(&reader, &v, &lineno, err)) < 0)
		log_error("stdin: a bad line skipped: %s", err);
	if (rc > 0) {
		struct op *op = op_from_line(v, lineno);

		if (reader.inexact[0] && (op->kind == OP_APPLY || op->kind == OP_PATCH) && !op->bad) {
			struct kop_buf b = KOP_BUF_INIT;

			/* its place, never its digits: they may be a Secret's, or anything's */
			kop_buf_addf(&b, "%s: an integer beyond 2^53 would be sent rounded (numbers are doubles here), "
				     "so it is not sent", reader.inexact);
			op->bad = kop_buf_detach(&b, NULL);
			op->bad_names_line = 1;
		}
		return op;
	}
	if (reader.eof)
		input_done = 1;
	return NULL;
}

/* Whether every complete line read so far is in the queue (so more may be read). */
static int need_input;

static void read_input(void)
{
	struct op *op;

	need_input = 0;
	for (;;) {
		if (stopping || queue_len >= QUEUE_MAX)
			return;
		if (!(op = next_input())) {
			need_input = 1;
			return;
		}
		queue_push(op);
		if (opt.dry_run == DRY_CLIENT && op->kind != OP_PASS)
			dry_run_client(op);
		else if (opt.diff && op->kind != OP_PASS)
			op->phase = PH_DIFF_GET;
		if (op->kind == OP_PASS || op->state == ST_DONE)
			flush_queue();	/* a line that may pass goes at once */
	}
}

/* ---- main ------------------------------------------------------------------- */

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static int parse_bool(const char *s, const char *what)
{
	if (!s || !strcmp(s, "true") || !strcmp(s, "1"))
		return 1;
	if (!strcmp(s, "false") || !strcmp(s, "0"))
		return 0;
	die_usage("invalid value '%s' for %s (true or false)", s, what);
}

static unsigned long parse_count(const char *s, const char *what, unsigned long min)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < min || v > 100000)
		die_usage("invalid %s '%s'", what, s);
	return v;
}

static double parse_rate(const char *s, const char *what)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || v < 0 || v > 1e6)
		die_usage("invalid %s '%s'", what, s);
	return v;
}

enum {
	OPT_FIELD_MANAGER = OPT_TOOL_LAST,
	OPT_FORCE,
	OPT_DRY_RUN,
	OPT_DIFF,
	OPT_CONCURRENCY,
	OPT_QPS,
	OPT_BURST,
	OPT_MAX_RETRIES,
	OPT_CRD_TIMEOUT
};

static const struct option options[] = {
	{ "filename", required_argument, NULL, 'f' },
	{ "namespace", required_argument, NULL, 'n' },
	{ "field-manager", required_argument, NULL, OPT_FIELD_MANAGER },
	{ "force-conflicts", optional_argument, NULL, OPT_FORCE },
	{ "dry-run", optional_argument, NULL, OPT_DRY_RUN },
	{ "diff", no_argument, NULL, OPT_DIFF },
	{ "concurrency", required_argument, NULL, OPT_CONCURRENCY },
	{ "qps", required_argument, NULL, OPT_QPS },
	{ "burst", required_argument, NULL, OPT_BURST },
	{ "max-retries", required_argument, NULL, OPT_MAX_RETRIES },
	{ "crd-timeout", required_argument, NULL, OPT_CRD_TIMEOUT },
	TOOL_COMMON_OPTIONS,
	TOOL_KUBE_OPTIONS,
	{ NULL, 0, NULL, 0 }
};

/* -f gave nothing to apply: kubectl's "no objects passed to apply" (bad input, 100). */
static noreturn void die_no_objects(const char *const *files, int nfiles)
{
	struct kop_buf b = KOP_BUF_INIT;
	int i;

	for (i = 0; i < nfiles; i++)
		kop_buf_addf(&b, "%s'%s'", i ? ", " : "", strcmp(files[i], "-") ? files[i] : "<stdin>");
	die(KOP_EXIT_PERM, "unable to apply %s: no objects in %s (empty documents are skipped)", b.buf,
	    nfiles > 1 ? "them" : "it");
}

static void setup_client(void)
{
	struct kube_config cfg;
	char err[KOP_ERRLEN];

	memset(&cfg, 0, sizeof(cfg));
	if (kube_config_load(&cfg, tool_kube.kubeconfig, tool_kube.context, err) < 0) {
		if (opt.dry_run == DRY_CLIENT)
			return;	/* no network needed: the namespace defaults to "default" */
		die(KOP_EXIT_PERM, "%s", err);
	}
	if (cfg.namespace && *cfg.namespace)
		default_ns = kop_strdup(cfg.namespace);
	if (opt.dry_run == DRY_CLIENT) {
		kube_config_release(&cfg);
		return;
	}
	if (!(client = kube_client_new(&cfg, tool_kube.request_timeout_ms, err)))
		die(KOP_EXIT_PERM, "%s", err);
	kube_client_set_user_agent(client, "iot-operator/kapply");
}

static int stdin_ready(int timeout_ms)
{
	struct pollfd pfd = { 0, POLLIN, 0 };

	return poll(&pfd, 1, timeout_ms) > 0 && (pfd.revents & (POLLIN | POLLHUP | POLLERR));
}

static void run(void)
{
	struct sigaction sa;
	int64_t stop_deadline = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (client) {
		multi = curl_multi_init();
		curl_multi_setopt(multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
		curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)opt.concurrency);
	}
	for (;;) {
		struct curl_waitfd wfd = { 0, CURL_WAIT_POLLIN, 0 };
		int64_t wait;
		int running = 0, left, want_stdin;
		CURLMsg *m;

		read_input();
		wait = schedule();
		flush_queue();
		if ((input_done || stopping) && !queue_len)
			break;
		if (stopping) {
			/* Drain what is in flight for a bounded time; what never started is dropped. */
			if (!stop_deadline)
				stop_deadline = kop_mono_ms() + 10000;
			if (!inflight || kop_mono_ms() > stop_deadline) {
				log_warn("stopping with %zu operations unfinished", queue_len);
				unfinished = 1;
				break;
			}
		}
		/* Backpressure: stdin is read only once the lines already read are all queued. */
		want_stdin = stream_mode && need_input && !input_done && !stopping && !reader.eof;
		if (!multi) {
			if (want_stdin && stdin_ready((int)wait) && kop_jsonl_read_fd(&reader, 0) < 0 && errno != EINTR &&
			    errno != EAGAIN) {
				log_error("unable to read stdin: %s", strerror(errno));
				kop_jsonl_eof(&reader);
			}
			continue;
		}
		if (wait > 200 && stopping)
			wait = 200;
		if (!inflight)
			tool_metrics_flush(1);	/* going idle: the last counts go out now */
		curl_multi_poll(multi, want_stdin ? &wfd : NULL, want_stdin ? 1 : 0, (int)wait, NULL);
		/* curl reports POLLIN only; poll again for the end of a pipe (POLLHUP). */
		if (want_stdin && stdin_ready(0) && kop_jsonl_read_fd(&reader, 0) < 0 && errno != EINTR &&
		    errno != EAGAIN) {
			log_error("unable to read stdin: %s", strerror(errno));
			kop_jsonl_eof(&reader);
		}
		curl_multi_perform(multi, &running);
		while ((m = curl_multi_info_read(multi, &left)))
			if (m->msg == CURLMSG_DONE)
				finished(m);
	}
	if (multi)
		curl_multi_cleanup(multi);
}

int main(int argc, char **argv)
{
	const char *files[64];
	int nfiles = 0, c, i;
	char err[KOP_ERRLEN];

	tool_init("kapply", argc, argv, 1);
	while ((c = getopt_long(argc, argv, "f:n:" TOOL_COMMON_SHORT, options, NULL)) != -1) {
		if (tool_common_option(c, optarg, usage))
			continue;
		switch (c) {
		case 'f':
			if (nfiles == (int)(sizeof(files) / sizeof(files[0])))
				die_usage("too many -f");
			files[nfiles++] = optarg;
			break;
		case 'n':
			opt.namespace = optarg;
			break;
		case OPT_FIELD_MANAGER:
			if (!*optarg || strlen(optarg) > 128)
				die_usage("invalid --field-manager '%s'", optarg);
			opt.field_manager = optarg;
			break;
		case OPT_FORCE:
			opt.force = parse_bool(optarg, "--force-conflicts");
			break;
		case OPT_DRY_RUN:
			if (!optarg || !strcmp(optarg, "client"))
				opt.dry_run = DRY_CLIENT;
			else if (!strcmp(optarg, "server"))
				opt.dry_run = DRY_SERVER;
			else if (!strcmp(optarg, "none"))
				opt.dry_run = DRY_NONE;
			else
				die_usage("invalid --dry-run '%s' (client, server, none)", optarg);
			break;
		case OPT_DIFF:
			opt.diff = 1;
			break;
		case OPT_CONCURRENCY:
			opt.concurrency = (unsigned)parse_count(optarg, "--concurrency", 1);
			break;
		case OPT_QPS:
			opt.qps = parse_rate(optarg, "--qps");
			break;
		case OPT_BURST:
			opt.burst = parse_rate(optarg, "--burst");
			break;
		case OPT_MAX_RETRIES:
			opt.max_retries = (unsigned)parse_count(optarg, "--max-retries", 0);
			break;
		case OPT_CRD_TIMEOUT:
			if ((opt.crd_timeout_ms = tool_parse_duration_ms(optarg)) < 0)
				die_usage("invalid --crd-timeout '%s'", optarg);
			break;
		default:
			tool_bad_option(argv, "f:n:" TOOL_COMMON_SHORT);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	if (opt.diff && opt.dry_run != DRY_NONE)
		die_usage("--diff and --dry-run do not go together");
	stream_mode = !nfiles;

	manifest_objs = jv_array();
	for (i = 0; i < nfiles; i++)
		if (kop_manifest_read(files[i], &manifest_objs, err) < 0)
			die(KOP_EXIT_PERM, "%s", err);
	manifest_len = jv_array_length(jv_copy(manifest_objs));
	if (nfiles && !manifest_len)
		die_no_objects(files, nfiles);

	curl_global_init(CURL_GLOBAL_DEFAULT);
	setup_client();
	kop_jsonl_init(&reader, 0);
	reader.want_inexact = 1;	/* what is applied must not be rounded */
	run();
	kop_jsonl_release(&reader);
	for (i = 0; i < (int)queue_len; i++)
		op_free(queue[i]);
	free(queue);
	jv_free(manifest_objs);
	if (client)
		kube_client_free(client);
	curl_global_cleanup();
	if (stream_mode)	/* a stream reports API errors in its result lines */
		worst = worst == KOP_EXIT_NO ? KOP_EXIT_NO : KOP_EXIT_OK;
	if (unfinished)
		worst = KOP_EXIT_TEMP;
	return tool_finish(worst);
}
