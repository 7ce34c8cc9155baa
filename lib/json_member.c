/* A member of a JSON object, as jv or as C string (kop_json_str, kop_json_member, kop_json_cstr). */
#include <stdlib.h>
#include "jsonl.h"
#include "kop.h"
#include "banned.h"

char *kop_json_str(jv v, const char *a, const char *b)
{
	jv x;
	char *s = NULL;

	if (jv_get_kind(v) != JV_KIND_OBJECT)
		return NULL;
	x = jv_object_get(jv_copy(v), kop_json_key(a));
	if (b) {
		if (jv_get_kind(x) != JV_KIND_OBJECT) {
			jv_free(x);
			return NULL;
		}
		x = jv_object_get(x, kop_json_key(b));
	}
	if (jv_get_kind(x) == JV_KIND_STRING)
		s = kop_strdup(jv_string_value(x));
	jv_free(x);
	return s;
}

jv kop_json_member(jv v, const char *key)
{
	if (jv_get_kind(v) != JV_KIND_OBJECT) {
		jv_free(v);
		return jv_invalid();
	}
	return jv_object_get(v, kop_json_key(key));
}

const char *kop_json_cstr(jv o, const char *key)
{
	jv v;
	const char *s;

	if (jv_get_kind(o) != JV_KIND_OBJECT)
		return NULL;
	v = jv_object_get(jv_copy(o), kop_json_key(key));
	if (jv_get_kind(v) != JV_KIND_STRING) {
		jv_free(v);
		return NULL;
	}
	/* o still holds a reference, so the bytes outlive v. */
	s = jv_string_value(v);
	jv_free(v);
	return s;
}
