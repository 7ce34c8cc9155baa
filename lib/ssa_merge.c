/*
 * Merging an applied configuration into the live object, list by list
 * as listinfo says (map-lists by key, set-lists by value, the rest whole).
 */
#include "ssa-priv.h"
#include "banned.h"

jv ssa_merge(struct walk *w, jv live, jv applied)
{
	jv entry;
	enum lt t;

	if (jv_get_kind(live) == JV_KIND_OBJECT && jv_get_kind(applied) == JV_KIND_OBJECT) {
		t = ssa_list_type(w, &entry);
		jv_free(entry);
		if (t == LT_ATOMIC) {
			jv_free(live);
			return applied;
		}
		jv_object_foreach(applied, k, v) {
			if (jv_get_kind(v) == JV_KIND_NULL) {
				jv_free(v);
				live = jv_object_delete(live, k);
				continue;
			}
			size_t mark = ssa_pat_field(w, jv_string_value(k));
			jv cur = jv_object_get(jv_copy(live), jv_copy(k));

			if (!jv_is_valid(cur)) {
				jv_free(cur);
				cur = jv_null();
			}
			live = jv_object_set(live, k, ssa_merge(w, cur, v));
			ssa_pat_pop(w, mark);
		}
		jv_free(applied);
		return live;
	}
	if (jv_get_kind(live) == JV_KIND_ARRAY && jv_get_kind(applied) == JV_KIND_ARRAY) {
		t = ssa_array_type(w, &entry);
		if (t == LT_ATOMIC) {
			jv_free(entry);
			jv_free(live);
			return applied;
		}
		jv idx = ssa_list_index(t, entry, live);
		size_t mark = ssa_pat_elem(w);

		jv_array_foreach(applied, i, e) {
			jv key = ssa_list_elem_key(t, entry, e);
			jv at = jv_get_kind(key) == JV_KIND_STRING ? jv_object_get(jv_copy(idx), jv_copy(key)) : jv_invalid();

			if (jv_is_valid(at)) {
				int n = (int)jv_number_value(at);

				if (t == LT_MAP)
					live = jv_array_set(live, n, ssa_merge(w, jv_array_get(jv_copy(live), n), e));
				else
					jv_free(e);
				jv_free(key);
			} else {
				if (jv_get_kind(key) == JV_KIND_STRING)
					idx = jv_object_set(idx, key, jv_number(jv_array_length(jv_copy(live))));
				else
					jv_free(key);
				live = jv_array_append(live, e);
			}
			jv_free(at);
		}
		ssa_pat_pop(w, mark);
		jv_free(idx);
		jv_free(entry);
		jv_free(applied);
		return live;
	}
	jv_free(live);
	return applied;
}
