/* Result lines of the writing stages (lib/opresult.h). */
#include <string.h>
#include "opresult.h"
#include "banned.h"

static jv get_kind(jv v, const char *key, jv_kind kind)
{
	jv x;

	if (jv_get_kind(v) != JV_KIND_OBJECT) {
		jv_free(v);
		return jv_invalid();
	}
	x = jv_object_get(v, jv_string(key));
	if (jv_get_kind(x) != kind) {
		jv_free(x);
		return jv_invalid();
	}
	return x;
}

jv kop_op_ref(jv obj)
{
	jv ref = jv_object(), meta = get_kind(jv_copy(obj), "metadata", JV_KIND_OBJECT), x;

	if (jv_is_valid(x = get_kind(jv_copy(obj), "apiVersion", JV_KIND_STRING)))
		ref = jv_object_set(ref, jv_string("apiVersion"), x);
	if (jv_is_valid(x = get_kind(jv_copy(obj), "kind", JV_KIND_STRING)))
		ref = jv_object_set(ref, jv_string("kind"), x);
	if (jv_is_valid(meta)) {
		if (jv_is_valid(x = get_kind(jv_copy(meta), "namespace", JV_KIND_STRING)))
			ref = jv_object_set(ref, jv_string("namespace"), x);
		if (jv_is_valid(x = get_kind(jv_copy(meta), "name", JV_KIND_STRING)))
			ref = jv_object_set(ref, jv_string("name"), x);
	}
	jv_free(meta);
	jv_free(obj);
	return ref;
}

static jv result_head(const char *for_op, jv primary, jv ref, int ok, long code)
{
	jv r = jv_object();

	r = jv_object_set(r, jv_string("op"), jv_string("result"));
	r = jv_object_set(r, jv_string("for"), jv_string(for_op));
	if (jv_get_kind(primary) == JV_KIND_STRING)
		r = jv_object_set(r, jv_string("primary"), primary);
	else
		jv_free(primary);
	r = jv_object_set(r, jv_string("ref"), ref);
	r = jv_object_set(r, jv_string("ok"), ok ? jv_true() : jv_false());
	return jv_object_set(r, jv_string("code"), jv_number((double)code));
}

jv kop_result_ok(const char *for_op, jv primary, jv ref, long code, jv body)
{
	jv r = result_head(for_op, primary, ref, 1, code);
	jv meta = get_kind(body, "metadata", JV_KIND_OBJECT), x;

	if (jv_is_valid(x = get_kind(jv_copy(meta), "resourceVersion", JV_KIND_STRING)))
		r = jv_object_set(r, jv_string("resourceVersion"), x);
	if (jv_is_valid(x = get_kind(jv_copy(meta), "uid", JV_KIND_STRING)))
		r = jv_object_set(r, jv_string("uid"), x);
	jv_free(meta);
	return r;
}

jv kop_result_fail(const char *for_op, jv primary, jv ref, const struct kube_response *resp)
{
	jv r = result_head(for_op, primary, ref, 0, resp->code);
	jv details, causes;

	r = jv_object_set(r, jv_string("reason"), jv_string(resp->reason ? resp->reason : ""));
	r = jv_object_set(r, jv_string("message"), jv_string(resp->message ? resp->message : ""));
	details = get_kind(jv_copy(resp->body), "details", JV_KIND_OBJECT);
	causes = get_kind(details, "causes", JV_KIND_ARRAY);
	if (jv_is_valid(causes))
		r = jv_object_set(r, jv_string("causes"), causes);
	if (!resp->transient)
		return r;
	return jv_object_set(r, jv_string("transient"), jv_true());
}

jv kop_result_local(const char *for_op, jv primary, jv ref, long code, const char *reason, const char *message)
{
	jv r = result_head(for_op, primary, ref, 0, code);

	r = jv_object_set(r, jv_string("reason"), jv_string(reason));
	return jv_object_set(r, jv_string("message"), jv_string(message));
}
