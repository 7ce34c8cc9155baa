/*
 * Operations: an input line or a manifest's object parsed and checked into
 * a struct op, and its end (one result line). Sending it is request.c's.
 */
#include <stdlib.h>
#include <string.h>
#include "kapply.h"
#include "banned.h"

void op_free(struct op *op)
{
	jv_free(op->line);
	jv_free(op->obj);
	free(op->text);
	jv_free(op->ref);
	jv_free(op->tag);
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
	free(op->op_name);
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
	op->ref = jv_invalid();
	op->tag = jv_invalid();
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

/* As much of Kind/namespace/name as op names, so that even a refusal names its object (NULL: none). */
static char *op_who(const struct op *op)
{
	struct kop_buf b = KOP_BUF_INIT;

	if (!filled(op->kind_name) && !filled(op->name))
		return NULL;
	kop_buf_addf(&b, "%s%s", filled(op->kind_name) ? op->kind_name : "",
		     filled(op->kind_name) && filled(op->name) ? "/" : "");
	if (filled(op->name))
		kop_buf_addf(&b, "%s%s%s", filled(op->ns) ? op->ns : "", filled(op->ns) ? "/" : "", op->name);
	return kop_buf_detach(&b, NULL);
}

/* op's group and key, from its apiVersion, kind and names (all given). */
static void op_key(struct op *op)
{
	const char *slash = strchr(op->api_version, '/');
	struct kop_buf b = KOP_BUF_INIT;

	op->group = slash ? kop_strndup(op->api_version, (size_t)(slash - op->api_version)) : kop_strdup("");
	kop_buf_addf(&b, "%s/%s/%s/%s", op->group, op->kind_name, op->ns ? op->ns : "", op->name);
	op->key = kop_buf_detach(&b, NULL);
}

/* An apply's or a create's: whether it writes a Namespace or a RoleBinding, which others wait for. */
static void op_waited_for(struct op *op)
{
	op->is_namespace = !*op->group && !strcmp(op->kind_name, "Namespace");
	op->is_binding = !strcmp(op->group, "rbac.authorization.k8s.io") && !strcmp(op->kind_name, "RoleBinding");
}

/* Reads the members every operation needs; a problem is kept in op->bad. */
static void op_parse(struct op *op)
{
	jv meta;
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
	op->who = op_who(op);
	if ((op->bad = missing_names(op)))
		return;
	op_key(op);
	if (op->ns && opt.namespace && strcmp(op->ns, opt.namespace)) {
		kop_buf_addf(&b, "the namespace from the provided object '%s' does not match the namespace '%s'",
			     op->ns, opt.namespace);
		op->bad = kop_buf_detach(&b, NULL);
		return;
	}
	if (op->kind != OP_APPLY && op->kind != OP_CREATE)
		return;
	op_waited_for(op);
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

/*
 * The ops other stages act on or write, passed through: kstatus's status and
 * event, the results (kapply's and kstatus's, for ireconcile), and what
 * kapply --dry-run and --diff write. A line without "op" passes too.
 */
static const char *const passed_ops[] = { "status", "event", "result", "dry-run", "diff" };

/* The ops kapply performs (NULL-ended, as kop_line_route takes them), and their kinds. */
static const char *const our_ops[] = { "apply", "delete", "patch", "create", NULL };
static const enum op_kind our_kinds[] = { OP_APPLY, OP_DELETE, OP_PATCH, OP_CREATE };

/* What kind of line an "op" string makes it (NULL: none). */
static enum op_kind kind_named(const char *name)
{
	size_t i;

	if (!name)
		return OP_PASS;
	for (i = 0; our_ops[i]; i++)
		if (!strcmp(name, our_ops[i]))
			return our_kinds[i];
	for (i = 0; i < sizeof(passed_ops) / sizeof(passed_ops[0]); i++)
		if (!strcmp(name, passed_ops[i]))
			return OP_PASS;
	return OP_UNKNOWN;
}

/* The same of an "op" value (only looked at, not consumed). */
static enum op_kind kind_of(jv opname)
{
	if (!jv_is_valid(opname) || jv_get_kind(opname) == JV_KIND_NULL)
		return OP_PASS;
	if (jv_get_kind(opname) != JV_KIND_STRING)
		return OP_UNKNOWN;
	return kind_named(jv_string_value(opname));
}

/* An op no stage knows: refused (a failed result naming it), never passed on to be lost. */
static void op_unknown(struct op *op, jv opname)
{
	struct kop_buf b = KOP_BUF_INIT;
	size_t n;

	op->op_name = jv_get_kind(opname) == JV_KIND_STRING ? kop_strdup(jv_string_value(opname))
							     : kop_json_dump(jv_copy(opname));
	n = strlen(op->op_name);
	kop_buf_addf(&b, "unknown op '%.*s%s' (kapply performs apply, create, delete and patch; ", n > 64 ? 64 : (int)n,
		     op->op_name, n > 64 ? "..." : "");
	for (n = 0; n < sizeof(passed_ops) / sizeof(passed_ops[0]); n++)
		kop_buf_addf(&b, "%s%s", n ? (n + 1 < sizeof(passed_ops) / sizeof(passed_ops[0]) ? ", " : " and ") : "",
			     passed_ops[n]);
	kop_buf_adds(&b, " lines, and lines without an op, pass through)");
	op->bad = kop_buf_detach(&b, NULL);
	jv_free(opname);
}

/*
 * Keeps op as its object's text (kapply.h): what is sent is that text, its
 * result names the object as before. While 288
 * operations wait in the queue, this is most of kapply's memory.
 */
static void op_compact(struct op *op)
{
	op->ref = op_ref(op);
	op->text = kop_json_dump(op->obj);	/* (consumes it) */
	jv_free(op->line);
	op->obj = jv_null();
	op->line = jv_null();
}

/*
 * A line that is none of kapply's (a status or an Event for kstatus, a
 * result) read for where it goes alone (kop_line_route), and passed on as
 * its text: written at once when nothing before it holds it (pass_free), else
 * queued behind what does. 1 when so; 0 when it must be parsed (an operation
 * of kapply's, or a line kop_line_route cannot read so).
 */
int op_pass_text(const char *text, size_t len)
{
	char *name, *primary;
	int barrier, pass;
	struct op *op;

	if (kop_line_route(text, len, our_ops, &name, &primary, &barrier) != 0)
		return 0;
	pass = kind_named(name) == OP_PASS;
	free(name);
	if (!pass) {
		free(primary);
		return 0;	/* (an op no stage knows: answered as op_from_line answers it) */
	}
	if (pass_free(primary)) {
		tool_write_line(text, len);
		free(primary);
		return 1;
	}
	op = op_alloc(OP_PASS, jv_invalid());
	op->text = kop_strndup(text, len);
	op->text_len = len;
	if (primary)
		op->primary = jv_string(primary);
	free(primary);
	queue_push(op);
	return 1;
}

/*
 * What op_apply_text reads of a line: the members op_from_line reads of an
 * apply or a create, and managedFields (such an object is parsed, to be
 * sent without them). Made at the first line, freed by op_text_release.
 */
enum { TP_OP, TP_TAG, TP_PRIMARY, TP_OBJECT, TP_API_VERSION, TP_KIND, TP_NAME, TP_NS, TP_UID, TP_MANAGED, TP_N };
static jv text_paths;

void op_text_release(void)
{
	if (jv_is_valid(text_paths))
		jv_free(text_paths);
	text_paths = jv_invalid();
}

/*
 * An apply or a create from stdin taken as its text (the reader's take,
 * beside op_pass_text): the object goes to the server as it came, without
 * its parse into jq values and the dump of them that op_compact would make,
 * when neither that parse nor the server's reading could take it otherwise
 * than that dump (kop_json_verbatim) and it is one op_compact keeps as text
 * (named with its namespace, or a Namespace). The op is what
 * op_from_line and op_compact make of the line, queued; 1 when so, 0 when the
 * line must be parsed (anything else: no plain strings for its names, a
 * CustomResourceDefinition, managedFields, --diff or --dry-run=client).
 */
int op_apply_text(const char *text, size_t len, size_t lineno)
{
	struct kop_json_span sp[TP_N];
	enum op_kind kind;
	char *api_version = NULL, *kind_name = NULL, *name = NULL, *ns = NULL, *uid = NULL;
	jv tag = jv_invalid(), primary = jv_null(), ref;
	struct op *op;

	if (opt.diff || opt.dry_run == DRY_CLIENT)
		return 0;
	if (!jv_is_valid(text_paths))
		text_paths = jv_parse("[[\"op\"],[\"tag\"],[\"primary\"],[\"object\"],[\"object\",\"apiVersion\"],"
				      "[\"object\",\"kind\"],[\"object\",\"metadata\",\"name\"],"
				      "[\"object\",\"metadata\",\"namespace\"],[\"object\",\"metadata\",\"uid\"],"
				      "[\"object\",\"metadata\",\"managedFields\"]]");
	if (kop_json_spans(text, len, text_paths, sp) < 0 || !sp[TP_OP].b || !sp[TP_OBJECT].b ||
	    sp[TP_OBJECT].b[0] != '{' || sp[TP_MANAGED].b)
		return 0;
	if (!(name = kop_json_plain_string(&sp[TP_OP])))
		return 0;
	kind = kind_named(name);
	free(name);
	name = NULL;
	if (kind != OP_APPLY && kind != OP_CREATE)
		return 0;
	if (!(api_version = kop_json_plain_string(&sp[TP_API_VERSION])) || !*api_version ||
	    !(kind_name = kop_json_plain_string(&sp[TP_KIND])) || !*kind_name || !(name = kop_json_plain_string(&sp[TP_NAME])) ||
	    !*name || (sp[TP_NS].b && (!(ns = kop_json_plain_string(&sp[TP_NS])) || !*ns)) ||
	    (sp[TP_UID].b && !(uid = kop_json_plain_string(&sp[TP_UID]))) ||
	    !strcmp(kind_name, "CustomResourceDefinition"))
		goto parse;
	/* (op_compact's condition: a namespace, or a Namespace of the core group) */
	if ((!ns && (strchr(api_version, '/') || strcmp(kind_name, "Namespace"))) ||
	    (ns && opt.namespace && strcmp(ns, opt.namespace)))
		goto parse;
	if (sp[TP_PRIMARY].b && sp[TP_PRIMARY].b[0] == '"') {
		char *p = kop_json_plain_string(&sp[TP_PRIMARY]);

		if (!p)
			goto parse;
		primary = jv_string(p);
		free(p);
	}
	if (sp[TP_TAG].b && !jv_is_valid(tag = kop_json_read(sp[TP_TAG].b, sp[TP_TAG].n)))
		goto parse;
	if (kop_json_verbatim(text, len) < 0)
		goto parse;

	op = op_alloc(kind, jv_null());
	op->lineno = lineno;
	op->tag = tag;
	op->primary = primary;
	op->api_version = api_version;
	op->kind_name = kind_name;
	op->name = name;
	op->ns = ns;
	op->uid = uid;
	op->who = op_who(op);
	op_key(op);
	op_waited_for(op);
	/* (kop_op_ref's, in its order) */
	ref = JV_OBJECT(jv_string("apiVersion"), jv_string(api_version), jv_string("kind"), jv_string(kind_name));
	if (ns)
		ref = jv_object_set(ref, jv_string("namespace"), jv_string(ns));
	op->ref = jv_object_set(ref, jv_string("name"), jv_string(name));
	op->text = kop_strndup(sp[TP_OBJECT].b, sp[TP_OBJECT].n);
	queue_push(op);
	return 1;
parse:
	free(api_version);
	free(kind_name);
	free(name);
	free(ns);
	free(uid);
	jv_free(tag);
	jv_free(primary);
	return 0;
}

/* An input line (consumed; lineno 0 = from a manifest) as an operation or a passthrough. */
struct op *op_from_line(jv line, size_t lineno)
{
	jv opname = kop_json_member(jv_copy(line), "op");
	enum op_kind kind = kind_of(opname);
	struct op *op;

	op = op_alloc(kind, line);
	op->lineno = lineno;
	if (kind != OP_PASS)	/* (its result gives it back; a line passed through has no result of ours) */
		op->tag = kop_json_member(jv_copy(line), "tag");
	op->primary = kop_json_member(jv_copy(line), "primary");
	if (jv_get_kind(op->primary) != JV_KIND_STRING) {
		jv_free(op->primary);
		op->primary = jv_null();
	}
	if (kind == OP_UNKNOWN) {
		op->obj = kop_json_member(jv_copy(line), "object");
		op_unknown(op, opname);
		return op;
	}
	jv_free(opname);
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
	/* (not a manifest's object: -f's objects are all kept until the end anyway) */
	if (!op->bad && lineno && (kind == OP_APPLY || kind == OP_CREATE) && (op->ns || op->is_namespace) &&
	    !opt.diff && opt.dry_run != DRY_CLIENT)
		op_compact(op);
	return op;
}

const char *op_ns(const struct op *op)
{
	return op->ns ? op->ns : (opt.namespace ? opt.namespace : default_ns);
}

jv op_ref(const struct op *op)
{
	jv ref;

	if (op->text)
		return jv_copy(op->ref);
	ref = kop_op_ref(jv_copy(op->obj));

	if (op->resolved && op->res.namespaced && !op->ns)
		ref = jv_object_set(ref, jv_string("namespace"), jv_string(op_ns(op)));
	return ref;
}

/* Writes op's result line (result, consumed; the line's "tag" given back in it) and marks it done. */
void op_done(struct op *op, jv result)
{
	jv ok = jv_object_get(jv_copy(result), jv_string("ok"));
	jv tag = jv_copy(op->tag);
	struct kop_buf labels = KOP_BUF_INIT;

	if (jv_get_kind(tag) == JV_KIND_STRING)
		result = jv_object_set(result, jv_string("tag"), tag);
	else
		jv_free(tag);

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

void op_ok(struct op *op, long code, jv body)
{
	op_done(op, kop_result_ok(kind_names[op->kind], jv_copy(op->primary), op_ref(op), code, body));
}

void op_fail(struct op *op, const struct kube_response *r)
{
	jv fields = jv_object();

	if (r->code)	/* 0 is no response, never a status */
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

void op_fail_local(struct op *op, long code, const char *reason, const char *msg)
{
	const char *verb = kind_names[op->kind];

	if (op->kind == OP_UNKNOWN) {
		log_error("unable to perform line %zu of stdin: %s", op->lineno, msg);
		note_exit(KOP_EXIT_PERM);
		op_done(op, kop_result_local(op->op_name, jv_copy(op->primary), op_ref(op), code, reason, msg));
		return;
	}

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
