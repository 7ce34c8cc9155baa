/*
 * Keys of objects and pairs, and small readers of an object's metadata.
 */
#include <stdlib.h>
#include <string.h>
#include "ireconcile.h"
#include "banned.h"

jv path2(const char *a, const char *b)
{
	return jv_array_append(jv_array_append(jv_array(), jv_string(a)), jv_string(b));
}

/* obj.metadata.field as a string borrowed from obj, or NULL. */
const char *meta(jv obj, const char *field)
{
	jv m = kop_json_member(jv_copy(obj), "metadata");
	const char *s = kop_json_cstr(m, field);

	jv_free(m);	/* obj still holds it: s outlives m */
	return s;
}

int has_meta(jv obj, const char *field)
{
	jv v = jv_getpath(jv_copy(obj), path2("metadata", field));
	int k = jv_get_kind(v);

	jv_free(v);
	return k != JV_KIND_NULL && k != JV_KIND_INVALID;
}

/* Whether obj.key (obj borrowed) is a string holding a NUL byte. */
static int has_nul(jv obj, const char *key)
{
	jv v = kop_json_member(jv_copy(obj), key);
	int bad = jv_get_kind(v) == JV_KIND_STRING && strlen(jv_string_value(v)) != (size_t)jv_string_length_bytes(jv_copy(v));

	jv_free(v);
	return bad;
}

/*
 * The first of kind, apiVersion, metadata.name and metadata.namespace of obj
 * (borrowed) that is a string holding a NUL byte, or NULL. Keys are C
 * strings: "a\u0000b" would stand for "a" (no real object has such a name).
 */
const char *nul_field(jv obj)
{
	const char *bad = NULL;
	jv m;

	if (has_nul(obj, "kind"))
		return "kind";
	if (has_nul(obj, "apiVersion"))
		return "apiVersion";
	m = kop_json_member(jv_copy(obj), "metadata");
	if (has_nul(m, "name"))
		bad = "metadata.name";
	else if (has_nul(m, "namespace"))
		bad = "metadata.namespace";
	jv_free(m);
	return bad;
}

/* "Kind.group|ns/name": one key per object, whatever version it was read in. */
char *obj_key(const char *api_version, const char *kind, const char *ns, const char *name)
{
	struct kop_buf b = KOP_BUF_INIT;
	char *group = kop_api_group(api_version);

	kop_buf_addf(&b, "%s.%s|%s/%s", kind, group, ns ? ns : "", name);
	free(group);
	return kop_buf_detach(&b, NULL);
}

char *join2(const char *a, const char *b)
{
	struct kop_buf buf = KOP_BUF_INIT;

	kop_buf_addf(&buf, "%s|%s", a, b);
	return kop_buf_detach(&buf, NULL);
}
