/*
 * The request body: JSON, YAML or protobuf parsed into an object, its
 * apiVersion and kind checked against the URL's type, and dryRun.
 */
#include <stdlib.h>
#include <string.h>
#include "api.h"
#include "yaml.h"
#include "banned.h"

int parse_body(const struct ksim_request *rq, jv *obj, jv *err)
{
	const char *ct = rq->content_type ? rq->content_type : "";
	jv v;

	if (jv_is_valid(rq->body_jv)) {
		/* ksim_call_locked(): the body is already a value (JSON) */
		*obj = jv_copy(rq->body_jv);
		return 0;
	}
	if (!rq->body || !rq->body_len) {
		*err = bad_request("the body of the request is empty");
		return -1;
	}
	if (!strncmp(ct, "application/yaml", 16)) {
		char e[KOP_ERRLEN];
		jv docs;

		if (kop_yaml_load(rq->body, rq->body_len, "request body", &docs, e) < 0) {
			*err = bad_request(e);
			return -1;
		}
		if (jv_array_length(jv_copy(docs)) != 1) {
			jv_free(docs);
			*err = bad_request("the body of the request must hold exactly one YAML document");
			return -1;
		}
		*obj = jv_array_get(docs, 0);
		return 0;
	}
	if (*ct && strncmp(ct, "application/json", 16) && strncmp(ct, "application/", 12) == 0 &&
	    !strstr(ct, "json")) {
		/* CBOR, and protobuf that proto.c does not take (custom resources): what kube-apiserver says */
		*err = ksim_status(415, "UnsupportedMediaType",
				   "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml",
				   jv_null());
		return -1;
	}
	v = jv_parse_sized(rq->body, (int)rq->body_len);
	if (!jv_is_valid(v)) {
		jv msg = jv_invalid_get_msg(v);
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "json: cannot unmarshal the request body: %s",
			     jv_get_kind(msg) == JV_KIND_STRING ? jv_string_value(msg) : "invalid JSON");
		*err = bad_request(b.buf);
		kop_buf_release(&b);
		jv_free(msg);
		return -1;
	}
	*obj = v;
	return 0;
}

/*
 * A body's object (consumed on failure) against the type it was sent to:
 * -1 with the 400 kube-apiserver gives when it is no object or says another
 * kind or API version.
 */
int check_kind(const struct ksim_type *t, jv *obj, jv *err)
{
	const char *av, *kind;

	if (jv_get_kind(*obj) != JV_KIND_OBJECT) {
		jv_free(*obj);
		*err = bad_request("the body of the request is not a JSON object");
		return -1;
	}
	av = ksim_str(*obj, "apiVersion");
	kind = ksim_str(*obj, "kind");
	if (kind && *kind && strcmp(kind, t->kind) && strcmp(kind, "DeleteOptions")) {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "the kind in the data (%s) does not match the expected kind (%s)", kind, t->kind);
		*err = bad_request(b.buf);
		kop_buf_release(&b);
		jv_free(*obj);
		return -1;
	}
	if (av && *av && strcmp(av, t->api_version) && !(t->flags & KT_CUSTOM) && strcmp(t->gr, "events")) {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "the API version in the data (%s) does not match the expected API version (%s)", av,
			     t->api_version);
		*err = bad_request(b.buf);
		kop_buf_release(&b);
		jv_free(*obj);
		return -1;
	}
	return 0;
}

int body_object(const struct ksim_request *rq, const struct ksim_type *t, jv *obj, jv *err)
{
	int pb = ksim_proto_body(rq, t, obj, err);	/* protobuf bodies of built-in kinds (proto.c) */

	if (pb < 0 || (!pb && parse_body(rq, obj, err) < 0) || check_kind(t, obj, err) < 0)
		return -1;
	if (!strcmp(t->gr, "events") && !strcmp(t->group, "events.k8s.io")) {
		/* stored in the core/v1 form */
		static const char *const ren[][2] = { { "note", "message" }, { "regarding", "involvedObject" },
						     { "reportingController", "reportingComponent" },
						     { "deprecatedFirstTimestamp", "firstTimestamp" },
						     { "deprecatedLastTimestamp", "lastTimestamp" },
						     { "deprecatedCount", "count" }, { "deprecatedSource", "source" } };

		for (size_t i = 0; i < sizeof(ren) / sizeof(*ren); i++) {
			jv v = field(*obj, ren[i][0]);

			if (jv_is_valid(v) && jv_get_kind(v) != JV_KIND_NULL) {
				*obj = jv_object_delete(*obj, jv_string(ren[i][0]));
				*obj = jv_object_set(*obj, jv_string(ren[i][1]), v);
			} else {
				jv_free(v);
			}
		}
	}
	return 0;
}

int dry_run(const struct ksim_request *rq, jv *err)
{
	const char *d = query(rq, "dryRun");

	if (!d)
		return 0;
	if (strcmp(d, "All")) {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "Unsupported value: \"%s\": supported values: \"All\"", d);
		*err = ksim_status(422, "Invalid", b.buf, jv_null());
		kop_buf_release(&b);
		return -1;
	}
	return 1;
}
