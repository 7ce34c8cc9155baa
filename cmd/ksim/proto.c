/*
 * Protobuf request bodies (application/vnd.kubernetes.protobuf, what
 * kubectl 1.32+, client-go and controller-runtime send for built-in kinds):
 * decoded by lib/kproto.c into the JSON a JSON client sends of the same
 * object, so that create and update go on exactly as for JSON. Custom
 * resources take no protobuf (415 from the JSON path), as on a real server.
 */
#include <stdlib.h>
#include <string.h>
#include "ksim.h"
#include "kproto.h"
#include "banned.h"

/* kube-apiserver's transformDecodeError: 400 naming the kind and what failed. */
static jv decode_error(const char *into, const char *kind, const char *version, const char *what,
		       const char *body, size_t len)
{
	struct kop_buf b = KOP_BUF_INIT;
	jv st;

	if (kind && *kind) {
		kop_buf_addf(&b, "%s in version \"%s\" cannot be handled as a %s: %s", kind, version, into, what);
	} else {
		char hex[61];

		kop_hex(body, len < 30 ? len : 30, hex);
		kop_buf_addf(&b, "the object provided is unrecognized (must be of type %s): %s (%s%s)", into, what,
			     len ? hex : "<empty>", len > 30 ? " ..." : "");
	}
	st = ksim_status(400, "BadRequest", b.buf, jv_null());
	kop_buf_release(&b);
	return st;
}

/*
 * The body as the JSON of want_kind (of want_av, table entry mi), as
 * ksim_proto_body() says; a body of another kind is its apiVersion and kind.
 */
static int decode_body(const struct ksim_request *rq, const char *want_av, const char *want_kind, int mi, jv *obj,
		       jv *err)
{
	const char *version;
	const unsigned char *raw;
	char e[KOP_ERRLEN], *av, *kind;
	size_t raw_len;
	int rc = 1;
	jv o;

	if (kproto_envelope(rq->body, rq->body_len, &av, &kind, &raw, &raw_len, e) < 0) {
		*err = decode_error(want_kind, NULL, NULL, e, rq->body, rq->body_len);
		return -1;
	}
	version = *av ? av : want_av;
	version = strchr(version, '/') ? strchr(version, '/') + 1 : version;
	if (*kind && (strcmp(kind, want_kind) || strcmp(av, want_av))) {
		/* another kind: check_kind() answers as for a JSON body of it */
		*obj = JV_OBJECT(jv_string("apiVersion"), jv_string(av), jv_string("kind"), jv_string(kind));
	} else if (kproto_decode((unsigned)mi, raw, raw_len, &o, e) < 0) {
		*err = decode_error(want_kind, *kind ? kind : want_kind, version, e, rq->body, rq->body_len);
		rc = -1;
	} else {
		*obj = jv_object_merge(JV_OBJECT(jv_string("kind"), jv_string(want_kind), jv_string("apiVersion"),
						 jv_string(want_av)), o);
	}
	free(av);
	free(kind);
	return rc;
}

static int is_protobuf(const struct ksim_request *rq)
{
	return rq->content_type && !strncmp(rq->content_type, "application/vnd.kubernetes.protobuf", 35) &&
	       !jv_is_valid(rq->body_jv);
}

int ksim_proto_body(const struct ksim_request *rq, const struct ksim_type *t, jv *obj, jv *err)
{
	int mi;

	if (!is_protobuf(rq) || (t->flags & KT_CUSTOM) || (mi = kproto_kind_msg(t->api_version, t->kind)) < 0)
		return 0;
	return decode_body(rq, t->api_version, t->kind, mi, obj, err);
}

int ksim_proto_as(const struct ksim_request *rq, const char *av, const char *want, jv *obj, jv *err)
{
	const char *kind;
	int mi, rc;

	if (!is_protobuf(rq) || (mi = kproto_kind_msg(av, want)) < 0)
		return 0;
	if ((rc = decode_body(rq, av, want, mi, obj, err)) > 0 &&
	    strcmp((kind = ksim_str(*obj, "kind")) ? kind : "", want)) {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "the kind in the data (%s) does not match the expected kind (%s)", kind ? kind : "",
			     want);
		*err = ksim_status(400, "BadRequest", b.buf, jv_null());
		kop_buf_release(&b);
		jv_free(*obj);
		return -1;
	}
	return rc;
}

int ksim_proto_scale(const struct ksim_request *rq, jv *obj, jv *err)
{
	return ksim_proto_as(rq, "autoscaling/v1", "Scale", obj, err);
}

/*
 * client-go sends a DELETE's DeleteOptions in the resource's group version,
 * so any apiVersion goes; another kind is a 400 as for a Scale.
 */
int ksim_proto_delete_options(const struct ksim_request *rq, jv *obj, jv *err)
{
	const unsigned char *raw;
	char e[KOP_ERRLEN], *av, *kind;
	size_t raw_len;
	int mi, rc = 1;

	if (!is_protobuf(rq) || (mi = kproto_kind_msg("meta.k8s.io/v1", "DeleteOptions")) < 0)
		return 0;
	if (kproto_envelope(rq->body, rq->body_len, &av, &kind, &raw, &raw_len, e) < 0) {
		*err = decode_error("DeleteOptions", NULL, NULL, e, rq->body, rq->body_len);
		return -1;
	}
	if (*kind && strcmp(kind, "DeleteOptions")) {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "the kind in the data (%s) does not match the expected kind (DeleteOptions)", kind);
		*err = ksim_status(400, "BadRequest", b.buf, jv_null());
		kop_buf_release(&b);
		rc = -1;
	} else if (kproto_decode((unsigned)mi, raw, raw_len, obj, e) < 0) {
		*err = decode_error("DeleteOptions", "DeleteOptions", *av ? av : "v1", e, rq->body, rq->body_len);
		rc = -1;
	}
	free(av);
	free(kind);
	return rc;
}
