/*
 * Field sets: union, difference, intersection, the set of an object's
 * fields and the fields that differ between two objects.
 */
#include <string.h>
#include "ssa-priv.h"
#include "banned.h"

int ssa_node_member(jv n)
{
	return jv_object_length(jv_copy(n)) == 0 || jv_object_has(jv_copy(n), jv_string("."));
}

jv ssa_node_build(int member, jv children)
{
	if (jv_object_length(jv_copy(children)) == 0) {
		jv_free(children);
		return member ? jv_object() : jv_invalid();
	}
	if (member)
		children = jv_object_set(children, jv_string("."), jv_object());
	return children;
}

jv ssa_set_union(jv a, jv b)
{
	jv ch;

	if (!jv_is_valid(a)) {
		jv_free(a);
		return b;
	}
	if (!jv_is_valid(b)) {
		jv_free(b);
		return a;
	}
	int member = ssa_node_member(a) || ssa_node_member(b);
	ch = jv_object_delete(a, jv_string("."));
	jv_object_foreach(b, k, v) {
		if (!strcmp(jv_string_value(k), ".")) {
			jv_free(k);
			jv_free(v);
			continue;
		}
		jv cur = jv_object_get(jv_copy(ch), jv_copy(k));
		ch = jv_object_set(ch, k, ssa_set_union(cur, v));
	}
	jv_free(b);
	return ssa_node_build(member, ch);
}

jv ssa_set_diff(jv a, jv b)
{
	jv ch;

	if (!jv_is_valid(a) || !jv_is_valid(b)) {
		jv_free(b);
		return a;
	}
	ch = jv_object();
	int member = ssa_node_member(a) && !ssa_node_member(b);
	jv_object_foreach(a, k, v) {
		if (!strcmp(jv_string_value(k), ".")) {
			jv_free(k);
			jv_free(v);
			continue;
		}
		jv r = ssa_set_diff(v, jv_object_get(jv_copy(b), jv_copy(k)));

		if (jv_is_valid(r))
			ch = jv_object_set(ch, k, r);
		else {
			jv_free(k);
			jv_free(r);
		}
	}
	jv_free(a);
	jv_free(b);
	return ssa_node_build(member, ch);
}

/* Whether every member of the set b is one of a (both borrowed): ssa_set_union(a, b) equals a,
 * told without building it. */
int ssa_set_covers(jv a, jv b)
{
	int it, covers;

	if (!jv_is_valid(b))
		return 1;
	if (!jv_is_valid(a) || (ssa_node_member(b) && !ssa_node_member(a)))
		return 0;
	covers = 1;
	for (it = jv_object_iter(b); covers && jv_object_iter_valid(b, it); it = jv_object_iter_next(b, it)) {
		jv k = jv_object_iter_key(b, it);

		if (strcmp(jv_string_value(k), ".")) {
			jv x = jv_object_get(jv_copy(a), jv_copy(k)), y = jv_object_iter_value(b, it);

			covers = jv_is_valid(x) && ssa_set_covers(x, y);
			jv_free(x);
			jv_free(y);
		}
		jv_free(k);
	}
	return covers;
}

/* Whether the sets a and b (borrowed) share a member: jv_is_valid(ssa_set_inter(a, b))
 * without building it. */
int ssa_set_meets(jv a, jv b)
{
	int it, meets;

	if (!jv_is_valid(a) || !jv_is_valid(b))
		return 0;
	if (ssa_node_member(a) && ssa_node_member(b))
		return 1;
	if (jv_object_length(jv_copy(a)) > jv_object_length(jv_copy(b))) {
		jv t = a;

		a = b;
		b = t;
	}
	meets = 0;
	for (it = jv_object_iter(a); !meets && jv_object_iter_valid(a, it); it = jv_object_iter_next(a, it)) {
		jv k = jv_object_iter_key(a, it);

		if (strcmp(jv_string_value(k), ".")) {
			jv x = jv_object_iter_value(a, it), y = jv_object_get(jv_copy(b), k);

			meets = ssa_set_meets(x, y);
			jv_free(x);
			jv_free(y);
		} else {
			jv_free(k);
		}
	}
	return meets;
}

jv ssa_set_inter(jv a, jv b)
{
	jv ch;

	if (!jv_is_valid(a) || !jv_is_valid(b)) {
		jv_free(a);
		jv_free(b);
		return jv_invalid();
	}
	ch = jv_object();
	int member = ssa_node_member(a) && ssa_node_member(b);
	jv_object_foreach(a, k, v) {
		if (!strcmp(jv_string_value(k), ".") || !jv_object_has(jv_copy(b), jv_copy(k))) {
			jv_free(k);
			jv_free(v);
			continue;
		}
		jv r = ssa_set_inter(v, jv_object_get(jv_copy(b), jv_copy(k)));

		if (jv_is_valid(r))
			ch = jv_object_set(ch, k, r);
		else {
			jv_free(k);
			jv_free(r);
		}
	}
	jv_free(a);
	jv_free(b);
	return ssa_node_build(member, ch);
}

static jv fs_value(struct walk *w, jv v, int mode);

/* The field set of v (borrowed) at the current pattern. mode FS_UPDATE marks
 * maps and lists themselves ("."), as a write that adds them does. Looked
 * up by its shape (ssa_shape.c) but at the top and in metadata. */
jv ssa_fs_value(struct walk *w, jv v, int mode)
{
	return ssa_by_shape(w, v) ? ssa_shape_fs_value(w, v, mode, fs_value) : fs_value(w, v, mode);
}

/* (ssa_shape.c's shape_of reads of v what this reads, branch for branch: the two change together.) */
static jv fs_value(struct walk *w, jv v, int mode)
{
	jv entry, node;
	enum lt t;

	if (jv_get_kind(v) == JV_KIND_OBJECT) {
		t = ssa_list_type(w, &entry);
		jv_free(entry);
		if (t == LT_ATOMIC || jv_object_length(jv_copy(v)) == 0)
			return jv_object();
		node = jv_object();
		jv_object_foreach(v, k, c) {
			const char *ks = jv_string_value(k);

			if (jv_get_kind(c) == JV_KIND_NULL || ssa_skipped_key(w, ks)) {
				jv_free(k);
				jv_free(c);
				continue;
			}
			size_t mark = ssa_pat_field(w, ks);
			int meta = !strcmp(w->pat.buf, "metadata");
			/* (a top-level member's looked up by its shape; below, the caller's was) */
			jv cn = mark ? fs_value(w, c, mode) : ssa_fs_value(w, c, mode);

			if (meta && jv_object_length(jv_copy(cn)) == 0) {
				jv_free(cn);
				cn = jv_invalid();
			}
			ssa_pat_pop(w, mark);
			if (jv_is_valid(cn))
				node = jv_object_set(node, jv_string_fmt("f:%s", ks), cn);
			else
				jv_free(cn);
			jv_free(k);
			jv_free(c);
		}
		if (mode == FS_UPDATE && w->pat.len && strcmp(w->pat.buf, "metadata"))
			node = ssa_node_build(1, node);
		else if (jv_object_length(jv_copy(node)) == 0) {
			jv_free(node);
			node = jv_object();
		}
		return node;
	}
	if (jv_get_kind(v) != JV_KIND_ARRAY)
		return jv_object();
	t = ssa_array_type(w, &entry);
	if (t == LT_ATOMIC || jv_array_length(jv_copy(v)) == 0) {
		jv_free(entry);
		return jv_object();
	}
	node = mode == FS_UPDATE ? jv_object_set(jv_object(), jv_string("."), jv_object()) : jv_object();
	size_t mark = ssa_pat_elem(w);
	jv_array_foreach(v, i, e) {
		jv key = ssa_list_elem_key(t, entry, e);

		if (jv_get_kind(key) == JV_KIND_STRING) {
			jv en = t == LT_MAP ? fs_value(w, e, mode) : jv_object();

			if (t == LT_MAP)
				en = ssa_node_build(1, en);
			node = jv_object_set(node, key, ssa_set_union(jv_object_get(jv_copy(node), jv_copy(key)), en));
		} else {
			jv_free(key);
		}
		jv_free(e);
	}
	ssa_pat_pop(w, mark);
	jv_free(entry);
	return node;
}

jv kop_ssa_fieldset(jv obj, jv listinfo)
{
	struct walk w = { listinfo, KOP_BUF_INIT };
	jv r;

	kop_buf_adds(&w.pat, "");
	r = ssa_fs_value(&w, obj, FS_APPLY);
	kop_buf_release(&w.pat);
	return r;
}

/* An index {key: element} of list (borrowed) of type t. */
jv ssa_list_index(enum lt t, jv entry, jv list)
{
	jv idx = jv_object();

	if (jv_get_kind(list) != JV_KIND_ARRAY)
		return idx;
	jv_array_foreach(list, i, e) {
		jv key = ssa_list_elem_key(t, entry, e);

		if (jv_get_kind(key) == JV_KIND_STRING && !jv_object_has(jv_copy(idx), jv_copy(key)))
			idx = jv_object_set(idx, key, jv_number(i));
		else
			jv_free(key);
		jv_free(e);
	}
	return idx;
}

/*
 * What a non-apply write changed from old to new (both borrowed): *changed
 * gets the members added or modified (new's side), *removed the members
 * that are gone. Either may be left jv_invalid() (empty).
 */
void ssa_fs_diff(struct walk *w, jv old, jv new, jv *changed, jv *removed)
{
	jv entry;
	enum lt t;

	*changed = jv_invalid();
	*removed = jv_invalid();
	/* One value on both sides (an update built from the stored object shares what it left alone). */
	if (jv_identical(jv_copy(old), jv_copy(new)))
		return;
	if (jv_get_kind(old) == JV_KIND_OBJECT && jv_get_kind(new) == JV_KIND_OBJECT) {
		t = ssa_list_type(w, &entry);
		jv_free(entry);
		if (t == LT_ATOMIC) {
			if (!jv_equal(jv_copy(old), jv_copy(new)))
				*changed = jv_object();
			return;
		}
		jv ch = jv_object(), rm = jv_object();
		jv_object_foreach(new, k, nv) {
			const char *ks = jv_string_value(k);
			jv c, r;

			if (jv_get_kind(nv) == JV_KIND_NULL || ssa_skipped_key(w, ks)) {
				jv_free(k);
				jv_free(nv);
				continue;
			}
			size_t mark = ssa_pat_field(w, ks);
			jv ov = jv_object_get(jv_copy(old), jv_copy(k));
			if (!jv_is_valid(ov) || jv_get_kind(ov) == JV_KIND_NULL) {
				jv_free(ov);
				int meta = !strcmp(w->pat.buf, "metadata");
				c = ssa_fs_value(w, nv, FS_UPDATE);
				r = jv_invalid();
				if (meta && jv_object_length(jv_copy(c)) == 0) {
					jv_free(c);
					c = jv_invalid();
				}
			} else {
				ssa_fs_diff(w, ov, nv, &c, &r);
				jv_free(ov);
			}
			ssa_pat_pop(w, mark);
			jv fk = jv_string_fmt("f:%s", ks);
			if (jv_is_valid(c))
				ch = jv_object_set(ch, jv_copy(fk), c);
			else
				jv_free(c);
			if (jv_is_valid(r))
				rm = jv_object_set(rm, jv_copy(fk), r);
			else
				jv_free(r);
			jv_free(fk);
			jv_free(k);
			jv_free(nv);
		}
		jv_object_foreach(old, k, ov) {
			const char *ks = jv_string_value(k);

			if (jv_get_kind(ov) != JV_KIND_NULL && !ssa_skipped_key(w, ks)) {
				jv nv = jv_object_get(jv_copy(new), jv_copy(k));

				if (!jv_is_valid(nv) || jv_get_kind(nv) == JV_KIND_NULL) {
					size_t mark = ssa_pat_field(w, ks);

					rm = jv_object_set(rm, jv_string_fmt("f:%s", ks), ssa_fs_value(w, ov, FS_UPDATE));
					ssa_pat_pop(w, mark);
				}
				jv_free(nv);
			}
			jv_free(k);
			jv_free(ov);
		}
		*changed = ssa_node_build(0, ch);
		*removed = ssa_node_build(0, rm);
		return;
	}
	if (jv_get_kind(old) == JV_KIND_ARRAY && jv_get_kind(new) == JV_KIND_ARRAY) {
		t = ssa_array_type(w, &entry);
		if (t == LT_ATOMIC) {
			jv_free(entry);
			if (!jv_equal(jv_copy(old), jv_copy(new)))
				*changed = jv_object();
			return;
		}
		jv oi = ssa_list_index(t, entry, old), ni = ssa_list_index(t, entry, new);
		jv ch = jv_object(), rm = jv_object();
		size_t mark = ssa_pat_elem(w);

		jv_object_foreach(ni, k, nidx) {
			jv ne = jv_array_get(jv_copy(new), (int)jv_number_value(nidx));
			jv oidx = jv_object_get(jv_copy(oi), jv_copy(k));
			jv c = jv_invalid(), r = jv_invalid();

			if (!jv_is_valid(oidx)) {
				c = t == LT_MAP ? ssa_node_build(1, ssa_fs_value(w, ne, FS_UPDATE)) : jv_object();
				jv_free(oidx);
			} else if (t == LT_MAP) {
				jv oe = jv_array_get(jv_copy(old), (int)jv_number_value(oidx));

				ssa_fs_diff(w, oe, ne, &c, &r);
				jv_free(oe);
				jv_free(oidx);
			} else {
				jv_free(oidx);
			}
			if (jv_is_valid(c))
				ch = jv_object_set(ch, jv_copy(k), c);
			else
				jv_free(c);
			if (jv_is_valid(r))
				rm = jv_object_set(rm, jv_copy(k), r);
			else
				jv_free(r);
			jv_free(ne);
			jv_free(k);
			jv_free(nidx);
		}
		jv_object_foreach(oi, k, oidx) {
			if (!jv_object_has(jv_copy(ni), jv_copy(k))) {
				jv oe = jv_array_get(jv_copy(old), (int)jv_number_value(oidx));

				rm = jv_object_set(rm, jv_copy(k),
						   t == LT_MAP ? ssa_node_build(1, ssa_fs_value(w, oe, FS_UPDATE)) : jv_object());
				jv_free(oe);
			}
			jv_free(k);
			jv_free(oidx);
		}
		ssa_pat_pop(w, mark);
		jv_free(oi);
		jv_free(ni);
		jv_free(entry);
		*changed = ssa_node_build(0, ch);
		*removed = ssa_node_build(0, rm);
		return;
	}
	if (!jv_equal(jv_copy(old), jv_copy(new)))
		*changed = jv_get_kind(new) == JV_KIND_OBJECT || jv_get_kind(new) == JV_KIND_ARRAY ?
			ssa_fs_value(w, new, FS_UPDATE) : jv_object();
}
