/*
 * Fields kept of an object: a program's `project` list of fields, kwatch's
 * --keep. The object reduced to them, and the list as one line of text
 * ("metadata.labels,status.phase"), written and read.
 */
#include <stdlib.h>
#include <string.h>
#include "jsonl.h"
#include "kop.h"
#include "banned.h"

/* v (consumed) with value (consumed) at path[from..] (keys), objects made on the way. */
static jv keep_set(jv v, jv path, int from, int n, jv value)
{
	jv key = jv_array_get(jv_copy(path), from), sub;

	if (from == n - 1)
		return jv_object_set(v, key, value);
	sub = jv_object_get(jv_copy(v), jv_copy(key));
	if (jv_is_valid(sub))
		/* (v's hold on sub let go, its member left where it is: sub, held once, is then
		 * changed in place rather than copied) */
		v = jv_object_set(v, jv_copy(key), jv_null());
	else
		sub = jv_object();
	return jv_object_set(v, key, keep_set(sub, path, from + 1, n, value));
}

jv kop_json_keep(jv obj, jv paths)
{
	jv out = jv_object();

	jv_array_foreach(paths, i, path) {
		int n = jv_array_length(jv_copy(path)), j;
		jv v = jv_copy(obj);

		for (j = 0; j < n && jv_get_kind(v) == JV_KIND_OBJECT; j++) {
			jv key = jv_array_get(jv_copy(path), j);

			v = jv_object_get(v, key);
			if (!jv_is_valid(v)) {
				jv_free(v);
				v = jv_null();	/* (absent) */
			}
		}
		if (j == n && jv_get_kind(v) != JV_KIND_NULL)
			out = keep_set(out, path, 0, n, v);
		else
			jv_free(v);
		jv_free(path);
	}
	jv_free(obj);
	return out;
}

/* pick (consumed) with path[from..n) read whole. */
static jv pick_path(jv pick, jv path, int from, int n)
{
	jv key = jv_array_get(jv_copy(path), from), sub;

	if (jv_get_kind(key) != JV_KIND_STRING) {
		jv_free(key);
		return pick;
	}
	sub = jv_object_get(jv_copy(pick), jv_copy(key));
	if (jv_get_kind(sub) == JV_KIND_TRUE) {	/* (read whole already) */
		jv_free(key);
		jv_free(sub);
		return pick;
	}
	if (from == n - 1 || jv_get_kind(sub) == JV_KIND_FALSE) {
		/* (a member passed over with a path in it: read whole) */
		jv_free(sub);
		return jv_object_set(pick, key, jv_true());
	}
	if (jv_get_kind(sub) != JV_KIND_OBJECT) {
		jv_free(sub);
		sub = jv_object();
	}
	return jv_object_set(pick, key, pick_path(sub, path, from + 1, n));
}

jv kop_json_keep_pick(jv pick, jv paths)
{
	jv_array_foreach(paths, i, path) {
		int n = jv_array_length(jv_copy(path));

		if (n > 0)
			pick = pick_path(pick, path, 0, n);
		jv_free(path);
	}
	return pick;
}

int kop_json_keep_text(const char *text, size_t len, jv paths, jv *out)
{
	struct kop_json_span spans[KOP_JSON_SPANS_MAX];
	jv r;

	if (kop_json_spans(text, len, paths, spans) < 0)
		return -1;
	r = jv_object();
	jv_array_foreach(paths, i, path) {
		jv v = spans[i].b ? kop_json_read(spans[i].b, spans[i].n) : jv_null();

		if (!jv_is_valid(v)) {
			jv_free(v);
			jv_free(path);
			jv_free(r);
			return -1;
		}
		if (jv_get_kind(v) != JV_KIND_NULL)
			r = keep_set(r, path, 0, jv_array_length(jv_copy(path)), v);
		else
			jv_free(v);
		jv_free(path);
	}
	*out = r;
	return 0;
}

/* The characters a key holds escaped in a field list: the separators, the escape, and ':' (kwatch's parts). */
static int special(char c)
{
	return c == '.' || c == ',' || c == '\\' || c == ':';
}

void kop_fields_format(jv paths, struct kop_buf *b)
{
	int first = 1;

	jv_array_foreach(paths, i, path) {
		if (!first)
			kop_buf_add(b, ",", 1);
		first = 0;
		jv_array_foreach(path, j, key) {
			const char *s = jv_get_kind(key) == JV_KIND_STRING ? jv_string_value(key) : "";

			if (j)
				kop_buf_add(b, ".", 1);
			for (; *s; s++) {
				if (special(*s))
					kop_buf_add(b, "\\", 1);
				kop_buf_add(b, s, 1);
			}
			jv_free(key);
		}
		jv_free(path);
	}
}

int kop_fields_parse(const char *s, jv *paths, char *err)
{
	jv out = jv_array(), path = jv_array();
	struct kop_buf key = KOP_BUF_INIT;
	const char *p = s;

	for (;; p++) {
		if (*p == '\\' && p[1] && special(p[1])) {
			kop_buf_add(&key, ++p, 1);
			continue;
		}
		if (*p && *p != '.' && *p != ',') {
			kop_buf_add(&key, p, 1);
			continue;
		}
		if (!key.len) {
			jv_free(out);
			jv_free(path);
			kop_buf_release(&key);
			return kop_error(err, "'%s': an empty key at offset %zu (fields are separated by ',', keys "
					 "by '.'; write '\\.' for a dot in a key)", s, (size_t)(p - s));
		}
		path = jv_array_append(path, jv_string_sized(key.buf, (int)key.len));
		key.len = 0;
		if (*p == '.')
			continue;
		out = jv_array_append(out, path);
		path = jv_array();
		if (!*p)
			break;
	}
	jv_free(path);
	kop_buf_release(&key);
	*paths = out;
	return 0;
}
