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
static jv decode_error(const struct ksim_type *t, const char *kind, const char *version, const char *what,
		       const char *body, size_t len)
{
	struct kop_buf b = KOP_BUF_INIT;
	jv st;

	if (kind && *kind) {
		kop_buf_addf(&b, "%s in version \"%s\" cannot be handled as a %s: %s", kind, version, t->kind, what);
	} else {
		char hex[61];

		kop_hex(body, len < 30 ? len : 30, hex);
		kop_buf_addf(&b, "the object provided is unrecognized (must be of type %s): %s (%s%s)", t->kind, what,
			     len ? hex : "<empty>", len > 30 ? " ..." : "");
	}
	st = ksim_status(400, "BadRequest", b.buf, jv_null());
	kop_buf_release(&b);
	return st;
}

int ksim_proto_body(const struct ksim_request *rq, const struct ksim_type *t, jv *obj, jv *err)
{
	const char *ct = rq->content_type ? rq->content_type : "", *version;
	const unsigned char *raw;
	char e[KOP_ERRLEN], *av, *kind;
	size_t raw_len;
	int mi, rc = 1;
	jv o;

	if (strncmp(ct, "application/vnd.kubernetes.protobuf", 35) || jv_is_valid(rq->body_jv) ||
	    (t->flags & KT_CUSTOM) || (mi = kproto_kind_msg(t->api_version, t->kind)) < 0)
		return 0;
	if (kproto_envelope(rq->body, rq->body_len, &av, &kind, &raw, &raw_len, e) < 0) {
		*err = decode_error(t, NULL, NULL, e, rq->body, rq->body_len);
		return -1;
	}
	version = strchr(av, '/') ? strchr(av, '/') + 1 : av;
	if (*kind && (strcmp(kind, t->kind) || strcmp(av, t->api_version))) {
		/* another kind: check_kind() answers as for a JSON body of it */
		*obj = JV_OBJECT(jv_string("apiVersion"), jv_string(av), jv_string("kind"), jv_string(kind));
	} else if (kproto_decode((unsigned)mi, raw, raw_len, &o, e) < 0) {
		*err = decode_error(t, *kind ? kind : t->kind, *kind ? version : t->version, e, rq->body, rq->body_len);
		rc = -1;
	} else {
		*obj = jv_object_merge(JV_OBJECT(jv_string("kind"), jv_string(t->kind), jv_string("apiVersion"),
						 jv_string(t->api_version)), o);
	}
	free(av);
	free(kind);
	return rc;
}
