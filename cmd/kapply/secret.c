/*
 * Secrets: their values are never printed. Masks data, stringData and the
 * last-applied annotation in --diff's output and in --dry-run=client's.
 */
#include <stdlib.h>
#include "kapply.h"
#include "banned.h"

#define LAST_APPLIED "kubectl.kubernetes.io/last-applied-configuration"

int op_is_secret(const struct op *op)
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
void mask_secrets(jv *a, jv *b)
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
jv mask_secret_body(jv body)
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
