/*
 * Walking a field set against values: the fields whose value an apply
 * would change under another manager (conflicts), and the fields a manager
 * no longer applies removed from the object.
 */
#include <stdlib.h>
#include <string.h>
#include "ssa-priv.h"
#include "banned.h"

/* The child of v (borrowed) named by path element pe at the current
 * pattern (after the caller pushed it), or jv_invalid(). */
static jv child_of(jv v, const char *pe, enum lt t, jv entry)
{
	if (pe[0] == 'f' && pe[1] == ':') {
		if (jv_get_kind(v) != JV_KIND_OBJECT)
			return jv_invalid();
		return jv_object_get(jv_copy(v), jv_string(pe + 2));
	}
	if (jv_get_kind(v) != JV_KIND_ARRAY)
		return jv_invalid();
	if (pe[0] == 'i' && pe[1] == ':') {
		int n = atoi(pe + 2);

		return n >= 0 && n < jv_array_length(jv_copy(v)) ? jv_array_get(jv_copy(v), n) : jv_invalid();
	}
	jv_array_foreach(v, i, e) {
		jv key = ssa_list_elem_key(t, entry, e);
		int hit = jv_get_kind(key) == JV_KIND_STRING && !strcmp(jv_string_value(key), pe);

		jv_free(key);
		if (hit)
			return e;
		jv_free(e);
	}
	return jv_invalid();
}

/* Appends the printed form of path element pe (".name", `[name="x"]`, `[="v"]`, "[3]"). */
static void print_pe(struct kop_buf *b, const char *pe)
{
	if (pe[0] == 'f') {
		kop_buf_addf(b, ".%s", pe + 2);
	} else if (pe[0] == 'k') {
		jv k = jv_parse(pe + 2);
		int first = 1;

		kop_buf_adds(b, "[");
		if (jv_get_kind(k) == JV_KIND_OBJECT) {
			jv keys = jv_keys(jv_copy(k));

			jv_array_foreach(keys, i, name) {
				jv d = jv_dump_string(jv_object_get(jv_copy(k), jv_copy(name)), 0);

				kop_buf_addf(b, "%s%s=%s", first ? "" : ",", jv_string_value(name), jv_string_value(d));
				first = 0;
				jv_free(d);
				jv_free(name);
			}
			jv_free(keys);
		}
		jv_free(k);
		kop_buf_adds(b, "]");
	} else if (pe[0] == 'v') {
		kop_buf_addf(b, "[=%s]", pe + 2);
	} else if (pe[0] == 'i') {
		kop_buf_addf(b, "[%s]", pe + 2);
	}
}

/*
 * Walks set node (borrowed) against live and merged (borrowed, maybe
 * invalid): leaf members whose value differs are appended to *fields
 * (printed paths). Returns the set of those members (or jv_invalid()).
 */
jv ssa_conflict_walk(struct walk *w, jv node, jv live, jv merged, struct kop_buf *field, jv *fields)
{
	jv ch = jv_object();

	if (jv_object_length(jv_copy(node)) == 0) {
		int same = jv_is_valid(live) && jv_is_valid(merged) && jv_equal(jv_copy(live), jv_copy(merged));

		jv_free(ch);
		if (same || (!jv_is_valid(live) && !jv_is_valid(merged)))
			return jv_invalid();
		*fields = jv_array_append(*fields, jv_string(field->buf));
		return jv_object();
	}
	jv_object_foreach(node, k, c) {
		const char *pe = jv_string_value(k);

		if (!strcmp(pe, ".")) {
			jv_free(k);
			jv_free(c);
			continue;
		}
		size_t fmark = field->len, mark;
		jv entry = jv_null();
		enum lt t = LT_GRANULAR;

		if (pe[0] == 'f')
			mark = ssa_pat_field(w, pe + 2);
		else {
			t = ssa_array_type(w, &entry);
			mark = ssa_pat_elem(w);
		}
		print_pe(field, pe);
		jv lc = jv_is_valid(live) ? child_of(live, pe, t, entry) : jv_invalid();
		jv mc = jv_is_valid(merged) ? child_of(merged, pe, t, entry) : jv_invalid();
		jv r = ssa_conflict_walk(w, c, lc, mc, field, fields);

		jv_free(lc);
		jv_free(mc);
		jv_free(entry);
		field->len = fmark;
		field->buf[fmark] = '\0';
		ssa_pat_pop(w, mark);
		if (jv_is_valid(r))
			ch = jv_object_set(ch, k, r);
		else {
			jv_free(r);
			jv_free(k);
		}
		jv_free(c);
	}
	return ssa_node_build(0, ch);
}

/*
 * Removes from v (consumed) the members of set node (borrowed) that others
 * (borrowed, maybe invalid) own neither themselves nor below. Returns v, or
 * jv_invalid() when v itself goes.
 */
jv ssa_remove_walk(struct walk *w, jv v, jv node, jv others)
{
	int had = 0;

	if (ssa_node_member(node) && jv_object_length(jv_copy(node)) == 0 && !jv_is_valid(others)) {
		jv_free(v);
		return jv_invalid();
	}
	if (ssa_node_member(node) && !jv_is_valid(others) && jv_object_has(jv_copy(node), jv_string("."))) {
		jv_free(v);
		return jv_invalid();
	}
	if (jv_get_kind(v) == JV_KIND_OBJECT) {
		had = jv_object_length(jv_copy(v)) > 0;
		jv_object_foreach(node, k, c) {
			const char *pe = jv_string_value(k);

			if (pe[0] != 'f' || !jv_object_has(jv_copy(v), jv_string(pe + 2))) {
				jv_free(k);
				jv_free(c);
				continue;
			}
			size_t mark = ssa_pat_field(w, pe + 2);
			jv o = jv_is_valid(others) ? jv_object_get(jv_copy(others), jv_copy(k)) : jv_invalid();
			jv r = ssa_remove_walk(w, jv_object_get(jv_copy(v), jv_string(pe + 2)), c, o);

			ssa_pat_pop(w, mark);
			v = jv_is_valid(r) ? jv_object_set(v, jv_string(pe + 2), r) :
				(jv_free(r), jv_object_delete(v, jv_string(pe + 2)));
			jv_free(o);
			jv_free(k);
			jv_free(c);
		}
		if (had && jv_object_length(jv_copy(v)) == 0 && !jv_is_valid(others) && w->pat.len) {
			jv_free(v);
			return jv_invalid();
		}
		return v;
	}
	if (jv_get_kind(v) == JV_KIND_ARRAY) {
		jv entry, out = jv_array();
		enum lt t = ssa_array_type(w, &entry);
		size_t mark;

		if (t == LT_ATOMIC) {
			jv_free(entry);
			jv_free(out);
			return v;
		}
		had = jv_array_length(jv_copy(v)) > 0;
		mark = ssa_pat_elem(w);
		jv_array_foreach(v, i, e) {
			jv key = ssa_list_elem_key(t, entry, e);
			jv c = jv_get_kind(key) == JV_KIND_STRING ? jv_object_get(jv_copy(node), jv_copy(key)) : jv_invalid();

			if (jv_is_valid(c)) {
				jv o = jv_is_valid(others) ? jv_object_get(jv_copy(others), jv_copy(key)) : jv_invalid();

				e = ssa_remove_walk(w, e, c, o);
				jv_free(o);
			}
			jv_free(c);
			jv_free(key);
			if (jv_is_valid(e))
				out = jv_array_append(out, e);
			else
				jv_free(e);
		}
		ssa_pat_pop(w, mark);
		jv_free(entry);
		jv_free(v);
		if (had && jv_array_length(jv_copy(out)) == 0 && !jv_is_valid(others)) {
			jv_free(out);
			return jv_invalid();
		}
		return out;
	}
	return v;
}
