/*
 * The scale subresource: the autoscaling/v1 Scale of a stored object, and
 * its update or patch written back as spec.replicas (through do_update()).
 */
#include <stdlib.h>
#include <string.h>
#include "api.h"
#include "patch.h"
#include "banned.h"

/* The autoscaling/v1 Scale of a stored object (borrowed). */
static jv scale_of(jv obj)
{
	jv md = meta(obj), sel = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("spec"), jv_string("selector")));
	jv smd = jv_object(), spec = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("spec"), jv_string("replicas")));
	jv st = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("status"), jv_string("replicas")));
	static const char *const keep[] = { "name", "namespace", "uid", "resourceVersion", "creationTimestamp" };
	jv status, s;

	if (!strcmp(ksim_str(obj, "kind") ? ksim_str(obj, "kind") : "", "ReplicationController"))
		sel = JV_OBJECT(jv_string("matchLabels"), sel);	/* a ReplicationController's is a map */
	s = ksim_selector_string(sel);	/* selector.String(), matchExpressions too */

	for (size_t i = 0; i < sizeof(keep) / sizeof(*keep); i++)
		if (jv_object_has(jv_copy(md), jv_string(keep[i])))
			smd = jv_object_set(smd, jv_string(keep[i]), jv_object_get(jv_copy(md), jv_string(keep[i])));
	status = JV_OBJECT(jv_string("replicas"), jv_get_kind(st) == JV_KIND_NUMBER ? st : (jv_free(st), jv_number(0)));
	if (jv_get_kind(s) == JV_KIND_STRING && jv_string_length_bytes(jv_copy(s)) > 0)
		status = jv_object_set(status, jv_string("selector"), s);
	else
		jv_free(s);
	jv_free(sel);
	jv_free(md);
	return JV_OBJECT(jv_string("kind"), jv_string("Scale"), jv_string("apiVersion"), jv_string("autoscaling/v1"),
			 jv_string("metadata"), smd, jv_string("spec"),
			 JV_OBJECT(jv_string("replicas"),
				   jv_get_kind(spec) == JV_KIND_NUMBER ? spec : (jv_free(spec), jv_number(1))),
			 jv_string("status"), status);
}

/*
 * GET, PUT and PATCH on .../scale: the Scale view of spec.replicas
 * (kubectl scale). Writes go through do_update on the main resource.
 */
int do_scale(const struct ksim_request *rq, const struct route *r, const struct wopts *o, jv *out)
{
	const char *m = rq->method, *ct = rq->content_type ? rq->content_type : "";
	jv stored = ksim_store_get(r->t->gr, r->ns, r->name), scale, rep, obj, res;
	char err[KOP_ERRLEN];
	int code;

	if (!jv_is_valid(stored)) {
		*out = not_found(r->t, r->name);
		return 404;
	}
	if (!strcmp(m, "GET")) {
		*out = scale_of(stored);
		return 200;
	}
	if (!strcmp(m, "PUT")) {
		int pb = ksim_proto_scale(rq, &scale, out);	/* (proto.c) */

		if (pb < 0 || (!pb && parse_body(rq, &scale, out) < 0))
			return status_code(*out);
	} else if (!strcmp(m, "PATCH")) {
		jv patch;

		if (parse_body(rq, &patch, out) < 0)
			return status_code(*out);
		if (!strncmp(ct, "application/json-patch+json", 27)) {
			if (kop_json_patch(scale_of(stored), patch, &scale, err) < 0) {
				*out = ksim_status(422, "Invalid", err, jv_null());
				return 422;
			}
		} else if (!strncmp(ct, "application/merge-patch+json", 28) ||
			   !strncmp(ct, "application/strategic-merge-patch+json", 38)) {
			scale = kop_merge_patch(scale_of(stored), patch);
		} else {
			jv_free(patch);
			*out = ksim_status(415, "UnsupportedMediaType",
					   "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json",
					   jv_null());
			return 415;
		}
	} else {
		*out = ksim_status(405, "MethodNotAllowed", "the scale subresource takes get, update and patch",
				   jv_null());
		return 405;
	}
	rep = jv_getpath(jv_copy(scale), JV_ARRAY(jv_string("spec"), jv_string("replicas")));
	if (jv_get_kind(rep) == JV_KIND_NULL)
		rep = jv_number(0);	/* omitempty: what a Go client sends for 0 */
	if (jv_get_kind(rep) != JV_KIND_NUMBER || jv_number_value(rep) < 0) {
		jv_free(rep);
		jv_free(scale);
		*out = ksim_status(422, "Invalid",
				   "Scale.autoscaling \"\" is invalid: spec.replicas: Invalid value: must be greater than or equal to 0",
				   jv_null());
		return 422;
	}
	obj = jv_setpath(jv_copy(stored), JV_ARRAY(jv_string("spec"), jv_string("replicas")), rep);
	{
		/* a resourceVersion in the Scale is a precondition */
		jv rv = jv_getpath(jv_copy(scale), JV_ARRAY(jv_string("metadata"), jv_string("resourceVersion")));

		obj = set_meta(obj, "resourceVersion", jv_get_kind(rv) == JV_KIND_STRING && *jv_string_value(rv) ? rv :
							  (jv_free(rv), get_meta(stored, "resourceVersion")));
	}
	jv_free(scale);
	code = do_update(r->t, stored, obj, NULL, o, 0, &res);
	if (code != 200) {
		*out = res;
		return code;
	}
	{
		const char *kind = ksim_str(res, "kind");

		*out = kind && !strcmp(kind, "Status") ? res : (scale_of(res));
		if (!(kind && !strcmp(kind, "Status")))
			jv_free(res);
	}
	return 200;
}
