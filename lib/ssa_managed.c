/*
 * managedFields entries: read, checked, matched, built, kept in
 * kube-apiserver's order, and stored back into an object.
 */
#include <stdlib.h>
#include <string.h>
#include "ssa-priv.h"
#include "banned.h"

const char *ssa_str_or(jv o, const char *key, jv *hold)
{
	*hold = jv_get_kind(o) == JV_KIND_OBJECT ? jv_object_get(jv_copy(o), jv_string(key)) : jv_invalid();
	return jv_get_kind(*hold) == JV_KIND_STRING ? jv_string_value(*hold) : "";
}

int ssa_entry_is(jv e, const char *manager, const char *op, const char *api_version, const char *sub)
{
	jv h1, h2, h3, h4;
	const char *m = ssa_str_or(e, "manager", &h1), *o = ssa_str_or(e, "operation", &h2);
	const char *a = ssa_str_or(e, "apiVersion", &h3), *s = ssa_str_or(e, "subresource", &h4);
	int r = !strcmp(m, manager) && !strcmp(o, op) && (!api_version || !strcmp(a, api_version)) &&
		!strcmp(s, sub ? sub : "");

	jv_free(h1);
	jv_free(h2);
	jv_free(h3);
	jv_free(h4);
	return r;
}

static int entry_cmp(const void *pa, const void *pb)
{
	static const char *const fields[] = { "operation", "time", "manager", "apiVersion", "subresource" };
	const jv *a = pa, *b = pb;
	size_t i;

	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		jv ha, hb;
		int c = strcmp(ssa_str_or(*a, fields[i], &ha), ssa_str_or(*b, fields[i], &hb));

		jv_free(ha);
		jv_free(hb);
		if (c)
			return c;
	}
	return 0;
}

/* Drops entries with an empty FieldsV1 set and sorts them as kube-apiserver does. */
jv ssa_entries_finish(jv entries)
{
	int i, n = jv_array_length(jv_copy(entries)), m = 0;
	jv *v = kop_calloc((size_t)n + 1, sizeof(jv));
	jv out = jv_array();

	for (i = 0; i < n; i++) {
		jv e = jv_array_get(jv_copy(entries), i);
		jv f = jv_object_get(jv_copy(e), jv_string("fieldsV1"));

		if (jv_get_kind(f) == JV_KIND_OBJECT && jv_object_length(jv_copy(f)) == 0)
			jv_free(e);
		else
			v[m++] = e;
		jv_free(f);
	}
	qsort(v, (size_t)m, sizeof(jv), entry_cmp);
	for (i = 0; i < m; i++)
		out = jv_array_append(out, v[i]);
	free(v);
	jv_free(entries);
	return out;
}

jv ssa_entry_fields(jv e)
{
	jv f = jv_get_kind(e) == JV_KIND_OBJECT ? jv_object_get(jv_copy(e), jv_string("fieldsV1")) : jv_invalid();

	if (jv_get_kind(f) != JV_KIND_OBJECT || jv_object_length(jv_copy(f)) == 0) {
		jv_free(f);
		return jv_invalid();
	}
	return f;
}

/*
 * structured-merge-diff's order of values (value.Compare): numbers (by value)
 * before strings (by bytes), booleans (false first), lists and maps (member by
 * member, maps by sorted key, then value), null last. Both borrowed.
 */
static int smd_rank(jv v)
{
	switch (jv_get_kind(v)) {
	case JV_KIND_NUMBER: return 0;
	case JV_KIND_STRING: return 1;
	case JV_KIND_FALSE:
	case JV_KIND_TRUE: return 2;
	case JV_KIND_ARRAY: return 3;
	case JV_KIND_OBJECT: return 4;
	default: return 5;
	}
}

static int smd_cmp(jv a, jv b)
{
	int ra = smd_rank(a), rb = smd_rank(b), c = 0, i, na, nb;

	if (ra != rb)
		return ra < rb ? -1 : 1;
	switch (ra) {
	case 0: {
		double x = jv_number_value(a), y = jv_number_value(b);

		return x < y ? -1 : x > y;
	}
	case 1: {
		int la = jv_string_length_bytes(jv_copy(a)), lb = jv_string_length_bytes(jv_copy(b));

		c = memcmp(jv_string_value(a), jv_string_value(b), (size_t)(la < lb ? la : lb));
		return c ? c : (la > lb) - (la < lb);
	}
	case 2:
		return (jv_get_kind(a) == JV_KIND_TRUE) - (jv_get_kind(b) == JV_KIND_TRUE);
	case 3:
	case 4: {
		/* a map as its sorted [name, value] list (FieldList.Compare) */
		jv ka = ra == 4 ? jv_keys(jv_copy(a)) : jv_invalid(), kb = ra == 4 ? jv_keys(jv_copy(b)) : jv_invalid();

		na = jv_array_length(jv_copy(ra == 4 ? ka : a));
		nb = jv_array_length(jv_copy(ra == 4 ? kb : b));
		for (i = 0; !c && i < na && i < nb; i++) {
			jv x, y;

			if (ra == 4) {
				jv xn = jv_array_get(jv_copy(ka), i), yn = jv_array_get(jv_copy(kb), i);

				c = smd_cmp(xn, yn);
				x = jv_object_get(jv_copy(a), xn);
				y = jv_object_get(jv_copy(b), yn);
			} else {
				x = jv_array_get(jv_copy(a), i);
				y = jv_array_get(jv_copy(b), i);
			}
			if (!c)
				c = smd_cmp(x, y);
			jv_free(x);
			jv_free(y);
		}
		jv_free(ka);
		jv_free(kb);
		return c ? c : (na > nb) - (na < nb);
	}
	default:
		return 0;
	}
}

/* The order of a field set's keys (PathElement.Compare): "." first, then
 * field names (f:, by bytes), keys (k:, as maps), values (v:), indices (i:, by number). */
static int pe_rank(const char *k)
{
	if (!strcmp(k, "."))
		return 0;
	if (!strncmp(k, "f:", 2))
		return 1;
	if (!strncmp(k, "k:", 2))
		return 2;
	if (!strncmp(k, "v:", 2))
		return 3;
	if (!strncmp(k, "i:", 2))
		return 4;
	return 5;
}

static int pe_order(const void *pa, const void *pb)
{
	const struct pe *x = pa, *y = pb;
	const char *a = jv_string_value(x->name), *b = jv_string_value(y->name);
	int c;

	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (x->rank == 2 || x->rank == 3) {
		c = jv_is_valid(x->val) && jv_is_valid(y->val) ? smd_cmp(x->val, y->val) : 0;
		return c ? c : strcmp(a, b);
	}
	if (x->rank == 4) {
		long long i = strtoll(a + 2, NULL, 10), j = strtoll(b + 2, NULL, 10);

		return i < j ? -1 : i > j;
	}
	return strcmp(a, b);
}

void *ssa_grow(void *buf, const void *small, int *room, size_t size)
{
	void *more = kop_calloc((size_t)*room * 2, size);

	memcpy(more, buf, (size_t)*room * size);
	if (buf != small)
		free(buf);
	*room *= 2;
	return more;
}

/*
 * A field set (consumed) with its keys in kube-apiserver's order at every
 * level (structured-merge-diff serializes its sorted path elements, "."
 * first); *moved is set when anything had to be reordered. A level already
 * in order is kept as it is, as most are once stored: ksim writes the
 * managedFields of every status its controllers change, and a node
 * ssa_set_intern() keeps was sorted before it was kept. The k:/v: keys of a
 * level are parsed once per call, and only when it holds two or more.
 */
static jv sorted_set_(jv set, int *moved)
{
	struct pe small[16], *p = small;
	int i = 0, n, it, reorder = 0, keyed = 0, room = (int)(sizeof(small) / sizeof(small[0]));

	if (jv_get_kind(set) != JV_KIND_OBJECT || ssa_set_is_interned(set))
		return set;
	/* (one pass over the slots, the empty leaves' included: jv_object_length would be another) */
	for (it = jv_object_iter(set); jv_object_iter_valid(set, it); it = jv_object_iter_next(set, it), i++) {
		if (i == room)
			p = ssa_grow(p, small, &room, sizeof(*p));
		p[i].name = jv_object_iter_key(set, it);
		p[i].rank = pe_rank(jv_string_value(p[i].name));
		p[i].val = jv_invalid();
		p[i].child = sorted_set_(jv_object_iter_value(set, it), &reorder);
		keyed += p[i].rank == 2 || p[i].rank == 3;
	}
	/* k: and v: keys are compared as values: parsed when two of them are met at one level */
	for (n = 0; keyed > 1 && n < i; n++)
		if (p[n].rank == 2 || p[n].rank == 3)
			p[n].val = jv_parse(jv_string_value(p[n].name) + 2);
	for (n = 1; !reorder && n < i; n++)
		if (pe_order(&p[n - 1], &p[n]) > 0)
			reorder = 1;
	if (reorder) {
		qsort(p, (size_t)i, sizeof(*p), pe_order);
		jv_free(set);
		set = jv_object();
		for (n = 0; n < i; n++)
			set = jv_object_set(set, jv_copy(p[n].name), jv_copy(p[n].child));
		*moved = 1;
	}
	for (n = 0; n < i; n++) {
		jv_free(p[n].name);
		jv_free(p[n].val);
		jv_free(p[n].child);
	}
	if (p != small)
		free(p);
	return set;
}

jv ssa_set_sorted(jv set)
{
	int moved = 0;

	return sorted_set_(set, &moved);
}

jv ssa_entry_set_fields(jv e, jv set)
{
	return jv_object_set(e, jv_string("fieldsV1"),
			     ssa_set_intern(jv_is_valid(set) ? ssa_set_sorted(set) : (jv_free(set), jv_object())));
}

jv ssa_new_entry(const char *manager, const char *op, const char *api_version, const char *now,
		 const char *sub, jv set)
{
	jv e = jv_object();

	e = jv_object_set(e, jv_string("manager"), jv_string(manager));
	e = jv_object_set(e, jv_string("operation"), jv_string(op));
	e = jv_object_set(e, jv_string("apiVersion"), jv_string(api_version));
	e = jv_object_set(e, jv_string("time"), jv_string(now));
	e = jv_object_set(e, jv_string("fieldsType"), jv_string("FieldsV1"));
	e = ssa_entry_set_fields(e, set);
	if (sub && *sub)
		e = jv_object_set(e, jv_string("subresource"), jv_string(sub));
	return e;
}

/* Whether s (borrowed) reads as a FieldsV1 set: objects all the way down, as
 * structured-merge-diff's decoder wants them. */
static int valid_set(jv s)
{
	int ok = jv_get_kind(s) == JV_KIND_OBJECT;

	if (!ok)
		return 0;
	jv_object_foreach(s, k, v) {
		ok = ok && valid_set(v);
		jv_free(k);
		jv_free(v);
	}
	return ok;
}

/* Whether managedFields sent by a client (borrowed, an array) decode: every
 * entry an object, its fieldsV1 (if any) a set. */
int ssa_valid_managed(jv mf)
{
	int ok = 1;

	jv_array_foreach(mf, i, e) {
		if (ok && jv_get_kind(e) != JV_KIND_OBJECT) {
			ok = 0;
		} else if (ok && jv_object_has(jv_copy(e), jv_string("fieldsV1"))) {
			jv f = jv_object_get(jv_copy(e), jv_string("fieldsV1"));

			ok = valid_set(f);
			jv_free(f);
		}
		jv_free(e);
	}
	return ok;
}

/* A set (consumed) as structured-merge-diff decodes and encodes it: "." (what
 * it holds skipped) only beside the members below it; a member with none
 * below it is {}. */
static jv canonical_set(jv set)
{
	jv out = jv_object();
	int self = 0;

	jv_object_foreach(set, k, v) {
		if (!strcmp(jv_string_value(k), ".")) {
			self = 1;
			jv_free(k);
			jv_free(v);
		} else {
			out = jv_object_set(out, k, canonical_set(v));
		}
	}
	jv_free(set);
	return self ? ssa_node_build(1, out) : out;
}

/* Entries a client sent (consumed, ssa_valid_managed) as kube-apiserver stores
 * what it decodes: each set in its order and its canonical form, empty ones
 * dropped, sorted. */
jv ssa_entries_stored(jv mf)
{
	jv out = jv_array();

	jv_array_foreach(mf, i, e) {
		jv f = ssa_entry_fields(e);

		out = jv_array_append(out, jv_is_valid(f) ? ssa_entry_set_fields(e, canonical_set(f)) : (jv_free(f), e));
	}
	jv_free(mf);
	return ssa_entries_finish(out);
}

jv ssa_get_managed(jv obj)
{
	jv mf = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("metadata"), jv_string("managedFields")));

	if (jv_get_kind(mf) != JV_KIND_ARRAY) {
		jv_free(mf);
		return jv_array();
	}
	return mf;
}

jv ssa_strip_managed(jv obj)
{
	jv md = jv_object_get(jv_copy(obj), jv_string("metadata"));

	if (jv_get_kind(md) == JV_KIND_OBJECT && jv_object_has(jv_copy(md), jv_string("managedFields")))
		return jv_object_set(obj, jv_string("metadata"), jv_object_delete(md, jv_string("managedFields")));
	jv_free(md);
	return obj;
}

jv ssa_set_managed(jv obj, jv mf)
{
	jv md = jv_object_get(jv_copy(obj), jv_string("metadata"));

	if (jv_get_kind(md) != JV_KIND_OBJECT) {
		jv_free(md);
		md = jv_object();
	}
	if (jv_array_length(jv_copy(mf)) == 0) {
		jv_free(mf);
		md = jv_object_delete(md, jv_string("managedFields"));
	} else {
		md = jv_object_set(md, jv_string("managedFields"), mf);
	}
	return jv_object_set(obj, jv_string("metadata"), md);
}

const char *ssa_obj_str(jv obj, const char *key, jv *hold)
{
	return ssa_str_or(obj, key, hold);
}
