/*
 * --dry-run=client: what would be sent, printed without the network.
 */
#include "kapply.h"
#include "banned.h"

static jv request_line(const char *method, const char *ctype, const struct kop_buf *query, jv body)
{
	jv req = jv_object_set(jv_object(), jv_string("method"), jv_string(method));

	req = jv_object_set(req, jv_string("contentType"), jv_string(ctype));
	if (query->len)
		req = jv_object_set(req, jv_string("query"), jv_string(query->buf + 1));
	return jv_object_set(req, jv_string("body"), body);
}

/* What would be sent, without discovery: the path needs the server, so it is left out. */
void dry_run_client(struct op *op)
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
