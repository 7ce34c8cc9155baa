/*
 * Where a walk over an object is: the path pattern listinfo is looked up
 * by, the list type there, the keys of list elements, and the metadata
 * fields nobody owns.
 */
#include <string.h>
#include "ssa-priv.h"
#include "banned.h"

static const char *const unowned_meta[] = {
	"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
	"deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "managedFields", "generateName",
};

int ssa_is_unowned_meta(const char *k)
{
	size_t i;

	for (i = 0; i < sizeof(unowned_meta) / sizeof(unowned_meta[0]); i++)
		if (!strcmp(k, unowned_meta[i]))
			return 1;
	return 0;
}

/* Is key k (at the current pattern) left out of field sets? */
int ssa_skipped_key(struct walk *w, const char *k)
{
	if (!w->pat.len)
		return !strcmp(k, "apiVersion") || !strcmp(k, "kind");
	if (!strcmp(w->pat.buf, "metadata"))
		return ssa_is_unowned_meta(k);
	return 0;
}

size_t ssa_pat_field(struct walk *w, const char *name)
{
	size_t old = w->pat.len;

	if (w->pat.len)
		kop_buf_adds(&w->pat, ".");
	kop_buf_adds(&w->pat, name);
	return old;
}

size_t ssa_pat_elem(struct walk *w)
{
	size_t old = w->pat.len;

	kop_buf_adds(&w->pat, "[]");
	return old;
}

void ssa_pat_pop(struct walk *w, size_t len)
{
	w->pat.len = len;
	w->pat.buf[len] = '\0';
}

/* The type of the value at the current pattern; *entry gets the listinfo entry (or null). */
enum lt ssa_list_type(struct walk *w, jv *entry)
{
	jv e = kop_listinfo_get(w->listinfo, w->pat.buf);
	jv t;
	enum lt r = LT_GRANULAR;

	if (jv_get_kind(e) != JV_KIND_OBJECT) {
		jv_free(e);
		*entry = jv_null();
		return LT_GRANULAR;
	}
	t = jv_object_get(jv_copy(e), jv_string("type"));
	if (jv_get_kind(t) == JV_KIND_STRING) {
		if (!strcmp(jv_string_value(t), "map"))
			r = LT_MAP;
		else if (!strcmp(jv_string_value(t), "set"))
			r = LT_SET;
		else if (!strcmp(jv_string_value(t), "atomic"))
			r = LT_ATOMIC;
	}
	jv_free(t);
	*entry = e;
	return r;
}

/* The kind of list at the current pattern (unnamed lists are atomic). */
enum lt ssa_array_type(struct walk *w, jv *entry)
{
	enum lt t = ssa_list_type(w, entry);

	return t == LT_GRANULAR ? LT_ATOMIC : t;
}

/* "k:{...}" for element e of a map list (entry has keys, maybe defaults); jv_null() without keys. */
static jv elem_key(jv entry, jv e)
{
	jv keys = jv_object_get(jv_copy(entry), jv_string("keys"));
	jv defs = jv_object_get(jv_copy(entry), jv_string("defaults"));
	jv k = jv_object();
	int any = 0;
	char *s;
	struct kop_buf b = KOP_BUF_INIT;

	if (jv_get_kind(keys) == JV_KIND_ARRAY && jv_get_kind(e) == JV_KIND_OBJECT) {
		jv_array_foreach(keys, i, name) {
			jv v = jv_object_get(jv_copy(e), jv_copy(name));

			if (!jv_is_valid(v) || jv_get_kind(v) == JV_KIND_NULL) {
				jv_free(v);
				v = jv_get_kind(defs) == JV_KIND_OBJECT ? jv_object_get(jv_copy(defs), jv_copy(name)) : jv_invalid();
			}
			if (jv_is_valid(v)) {
				k = jv_object_set(k, name, v);
				any = 1;
			} else {
				jv_free(v);
				jv_free(name);
			}
		}
	}
	jv_free(keys);
	jv_free(defs);
	if (!any) {
		jv_free(k);
		return jv_null();
	}
	jv d = jv_dump_string(k, JV_PRINT_SORTED);
	kop_buf_addf(&b, "k:%s", jv_string_value(d));
	jv_free(d);
	s = b.buf;
	jv r = jv_string(s);
	kop_buf_release(&b);
	return r;
}

static jv value_key(jv e)
{
	jv d = jv_dump_string(e, JV_PRINT_SORTED);
	jv r = jv_string_fmt("v:%s", jv_string_value(d));

	jv_free(d);
	return r;
}

/* The key of element e (borrowed) of a list of type t, or jv_null(). */
jv ssa_list_elem_key(enum lt t, jv entry, jv e)
{
	if (t == LT_MAP)
		return elem_key(entry, e);
	if (t == LT_SET)
		return value_key(jv_copy(e));
	return jv_null();
}
