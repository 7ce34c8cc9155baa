/*
 * Server-side apply and managedFields bookkeeping on jv values, after
 * sigs.k8s.io/structured-merge-diff: field sets are FieldsV1 trees where a
 * node is a member of the set when it is a leaf ({}) or has a "." child,
 * and its other children are the members below it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ssa.h"
#include "patch.h"
#include "banned.h"

struct walk {
	jv listinfo;		/* borrowed */
	struct kop_buf pat;	/* pattern of the current path, for listinfo */
};

enum { FS_APPLY, FS_UPDATE };

static const char *const unowned_meta[] = {
	"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
	"deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "managedFields", "generateName",
};

static int is_unowned_meta(const char *k)
{
	size_t i;

	for (i = 0; i < sizeof(unowned_meta) / sizeof(unowned_meta[0]); i++)
		if (!strcmp(k, unowned_meta[i]))
			return 1;
	return 0;
}

/* Is key k (at the current pattern) left out of field sets? */
static int skipped_key(struct walk *w, const char *k)
{
	if (!w->pat.len)
		return !strcmp(k, "apiVersion") || !strcmp(k, "kind");
	if (!strcmp(w->pat.buf, "metadata"))
		return is_unowned_meta(k);
	return 0;
}

static size_t pat_field(struct walk *w, const char *name)
{
	size_t old = w->pat.len;

	if (w->pat.len)
		kop_buf_adds(&w->pat, ".");
	kop_buf_adds(&w->pat, name);
	return old;
}

static size_t pat_elem(struct walk *w)
{
	size_t old = w->pat.len;

	kop_buf_adds(&w->pat, "[]");
	return old;
}

static void pat_pop(struct walk *w, size_t len)
{
	w->pat.len = len;
	w->pat.buf[len] = '\0';
}

enum lt { LT_ATOMIC, LT_MAP, LT_SET, LT_GRANULAR };

/* The type of the value at the current pattern; *entry gets the listinfo entry (or null). */
static enum lt list_type(struct walk *w, jv *entry)
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
static enum lt array_type(struct walk *w, jv *entry)
{
	enum lt t = list_type(w, entry);

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
static jv list_elem_key(enum lt t, jv entry, jv e)
{
	if (t == LT_MAP)
		return elem_key(entry, e);
	if (t == LT_SET)
		return value_key(jv_copy(e));
	return jv_null();
}

/* ---- field sets ---- */

static int node_member(jv n)
{
	return jv_object_length(jv_copy(n)) == 0 || jv_object_has(jv_copy(n), jv_string("."));
}

static jv node_build(int member, jv children)
{
	if (jv_object_length(jv_copy(children)) == 0) {
		jv_free(children);
		return member ? jv_object() : jv_invalid();
	}
	if (member)
		children = jv_object_set(children, jv_string("."), jv_object());
	return children;
}

static jv set_union(jv a, jv b)
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
	int member = node_member(a) || node_member(b);
	ch = jv_object_delete(a, jv_string("."));
	jv_object_foreach(b, k, v) {
		if (!strcmp(jv_string_value(k), ".")) {
			jv_free(k);
			jv_free(v);
			continue;
		}
		jv cur = jv_object_get(jv_copy(ch), jv_copy(k));
		ch = jv_object_set(ch, k, set_union(cur, v));
	}
	jv_free(b);
	return node_build(member, ch);
}

static jv set_diff(jv a, jv b)
{
	jv ch;

	if (!jv_is_valid(a) || !jv_is_valid(b)) {
		jv_free(b);
		return a;
	}
	ch = jv_object();
	int member = node_member(a) && !node_member(b);
	jv_object_foreach(a, k, v) {
		if (!strcmp(jv_string_value(k), ".")) {
			jv_free(k);
			jv_free(v);
			continue;
		}
		jv r = set_diff(v, jv_object_get(jv_copy(b), jv_copy(k)));

		if (jv_is_valid(r))
			ch = jv_object_set(ch, k, r);
		else {
			jv_free(k);
			jv_free(r);
		}
	}
	jv_free(a);
	jv_free(b);
	return node_build(member, ch);
}

/* Whether the sets a and b (borrowed) share a member: jv_is_valid(set_inter(a, b))
 * without building it. */
static int set_meets(jv a, jv b)
{
	int it, meets;

	if (!jv_is_valid(a) || !jv_is_valid(b))
		return 0;
	if (node_member(a) && node_member(b))
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

			meets = set_meets(x, y);
			jv_free(x);
			jv_free(y);
		} else {
			jv_free(k);
		}
	}
	return meets;
}

static jv set_inter(jv a, jv b)
{
	jv ch;

	if (!jv_is_valid(a) || !jv_is_valid(b)) {
		jv_free(a);
		jv_free(b);
		return jv_invalid();
	}
	ch = jv_object();
	int member = node_member(a) && node_member(b);
	jv_object_foreach(a, k, v) {
		if (!strcmp(jv_string_value(k), ".") || !jv_object_has(jv_copy(b), jv_copy(k))) {
			jv_free(k);
			jv_free(v);
			continue;
		}
		jv r = set_inter(v, jv_object_get(jv_copy(b), jv_copy(k)));

		if (jv_is_valid(r))
			ch = jv_object_set(ch, k, r);
		else {
			jv_free(k);
			jv_free(r);
		}
	}
	jv_free(a);
	jv_free(b);
	return node_build(member, ch);
}

/* The field set of v (borrowed) at the current pattern. mode FS_UPDATE marks
 * maps and lists themselves ("."), as a write that adds them does. */
static jv fs_value(struct walk *w, jv v, int mode)
{
	jv entry, node;
	enum lt t;

	if (jv_get_kind(v) == JV_KIND_OBJECT) {
		t = list_type(w, &entry);
		jv_free(entry);
		if (t == LT_ATOMIC || jv_object_length(jv_copy(v)) == 0)
			return jv_object();
		node = jv_object();
		jv_object_foreach(v, k, c) {
			const char *ks = jv_string_value(k);

			if (jv_get_kind(c) == JV_KIND_NULL || skipped_key(w, ks)) {
				jv_free(k);
				jv_free(c);
				continue;
			}
			size_t mark = pat_field(w, ks);
			int meta = !strcmp(w->pat.buf, "metadata");
			jv cn = fs_value(w, c, mode);

			if (meta && jv_object_length(jv_copy(cn)) == 0) {
				jv_free(cn);
				cn = jv_invalid();
			}
			pat_pop(w, mark);
			if (jv_is_valid(cn))
				node = jv_object_set(node, jv_string_fmt("f:%s", ks), cn);
			else
				jv_free(cn);
			jv_free(k);
			jv_free(c);
		}
		if (mode == FS_UPDATE && w->pat.len && strcmp(w->pat.buf, "metadata"))
			node = node_build(1, node);
		else if (jv_object_length(jv_copy(node)) == 0) {
			jv_free(node);
			node = jv_object();
		}
		return node;
	}
	if (jv_get_kind(v) != JV_KIND_ARRAY)
		return jv_object();
	t = array_type(w, &entry);
	if (t == LT_ATOMIC || jv_array_length(jv_copy(v)) == 0) {
		jv_free(entry);
		return jv_object();
	}
	node = mode == FS_UPDATE ? jv_object_set(jv_object(), jv_string("."), jv_object()) : jv_object();
	size_t mark = pat_elem(w);
	jv_array_foreach(v, i, e) {
		jv key = list_elem_key(t, entry, e);

		if (jv_get_kind(key) == JV_KIND_STRING) {
			jv en = t == LT_MAP ? fs_value(w, e, mode) : jv_object();

			if (t == LT_MAP)
				en = node_build(1, en);
			node = jv_object_set(node, key, set_union(jv_object_get(jv_copy(node), jv_copy(key)), en));
		} else {
			jv_free(key);
		}
		jv_free(e);
	}
	pat_pop(w, mark);
	jv_free(entry);
	return node;
}

jv kop_ssa_fieldset(jv obj, jv listinfo)
{
	struct walk w = { listinfo, KOP_BUF_INIT };
	jv r;

	kop_buf_adds(&w.pat, "");
	r = fs_value(&w, obj, FS_APPLY);
	kop_buf_release(&w.pat);
	return r;
}

/* An index {key: element} of list (borrowed) of type t. */
static jv list_index(enum lt t, jv entry, jv list)
{
	jv idx = jv_object();

	if (jv_get_kind(list) != JV_KIND_ARRAY)
		return idx;
	jv_array_foreach(list, i, e) {
		jv key = list_elem_key(t, entry, e);

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
static void fs_diff(struct walk *w, jv old, jv new, jv *changed, jv *removed)
{
	jv entry;
	enum lt t;

	*changed = jv_invalid();
	*removed = jv_invalid();
	if (jv_get_kind(old) == JV_KIND_OBJECT && jv_get_kind(new) == JV_KIND_OBJECT) {
		t = list_type(w, &entry);
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

			if (jv_get_kind(nv) == JV_KIND_NULL || skipped_key(w, ks)) {
				jv_free(k);
				jv_free(nv);
				continue;
			}
			size_t mark = pat_field(w, ks);
			jv ov = jv_object_get(jv_copy(old), jv_copy(k));
			if (!jv_is_valid(ov) || jv_get_kind(ov) == JV_KIND_NULL) {
				jv_free(ov);
				int meta = !strcmp(w->pat.buf, "metadata");
				c = fs_value(w, nv, FS_UPDATE);
				r = jv_invalid();
				if (meta && jv_object_length(jv_copy(c)) == 0) {
					jv_free(c);
					c = jv_invalid();
				}
			} else {
				fs_diff(w, ov, nv, &c, &r);
				jv_free(ov);
			}
			pat_pop(w, mark);
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

			if (jv_get_kind(ov) != JV_KIND_NULL && !skipped_key(w, ks)) {
				jv nv = jv_object_get(jv_copy(new), jv_copy(k));

				if (!jv_is_valid(nv) || jv_get_kind(nv) == JV_KIND_NULL) {
					size_t mark = pat_field(w, ks);

					rm = jv_object_set(rm, jv_string_fmt("f:%s", ks), fs_value(w, ov, FS_UPDATE));
					pat_pop(w, mark);
				}
				jv_free(nv);
			}
			jv_free(k);
			jv_free(ov);
		}
		*changed = node_build(0, ch);
		*removed = node_build(0, rm);
		return;
	}
	if (jv_get_kind(old) == JV_KIND_ARRAY && jv_get_kind(new) == JV_KIND_ARRAY) {
		t = array_type(w, &entry);
		if (t == LT_ATOMIC) {
			jv_free(entry);
			if (!jv_equal(jv_copy(old), jv_copy(new)))
				*changed = jv_object();
			return;
		}
		jv oi = list_index(t, entry, old), ni = list_index(t, entry, new);
		jv ch = jv_object(), rm = jv_object();
		size_t mark = pat_elem(w);

		jv_object_foreach(ni, k, nidx) {
			jv ne = jv_array_get(jv_copy(new), (int)jv_number_value(nidx));
			jv oidx = jv_object_get(jv_copy(oi), jv_copy(k));
			jv c = jv_invalid(), r = jv_invalid();

			if (!jv_is_valid(oidx)) {
				c = t == LT_MAP ? node_build(1, fs_value(w, ne, FS_UPDATE)) : jv_object();
				jv_free(oidx);
			} else if (t == LT_MAP) {
				jv oe = jv_array_get(jv_copy(old), (int)jv_number_value(oidx));

				fs_diff(w, oe, ne, &c, &r);
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
						   t == LT_MAP ? node_build(1, fs_value(w, oe, FS_UPDATE)) : jv_object());
				jv_free(oe);
			}
			jv_free(k);
			jv_free(oidx);
		}
		pat_pop(w, mark);
		jv_free(oi);
		jv_free(ni);
		jv_free(entry);
		*changed = node_build(0, ch);
		*removed = node_build(0, rm);
		return;
	}
	if (!jv_equal(jv_copy(old), jv_copy(new)))
		*changed = jv_get_kind(new) == JV_KIND_OBJECT || jv_get_kind(new) == JV_KIND_ARRAY ?
			fs_value(w, new, FS_UPDATE) : jv_object();
}

/* ---- merging an applied configuration ---- */

static jv ssa_merge(struct walk *w, jv live, jv applied)
{
	jv entry;
	enum lt t;

	if (jv_get_kind(live) == JV_KIND_OBJECT && jv_get_kind(applied) == JV_KIND_OBJECT) {
		t = list_type(w, &entry);
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
			size_t mark = pat_field(w, jv_string_value(k));
			jv cur = jv_object_get(jv_copy(live), jv_copy(k));

			if (!jv_is_valid(cur)) {
				jv_free(cur);
				cur = jv_null();
			}
			live = jv_object_set(live, k, ssa_merge(w, cur, v));
			pat_pop(w, mark);
		}
		jv_free(applied);
		return live;
	}
	if (jv_get_kind(live) == JV_KIND_ARRAY && jv_get_kind(applied) == JV_KIND_ARRAY) {
		t = array_type(w, &entry);
		if (t == LT_ATOMIC) {
			jv_free(entry);
			jv_free(live);
			return applied;
		}
		jv idx = list_index(t, entry, live);
		size_t mark = pat_elem(w);

		jv_array_foreach(applied, i, e) {
			jv key = list_elem_key(t, entry, e);
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
		pat_pop(w, mark);
		jv_free(idx);
		jv_free(entry);
		jv_free(applied);
		return live;
	}
	jv_free(live);
	return applied;
}

/* ---- walking a set against values ---- */

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
		jv key = list_elem_key(t, entry, e);
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
static jv conflict_walk(struct walk *w, jv node, jv live, jv merged, struct kop_buf *field, jv *fields)
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
			mark = pat_field(w, pe + 2);
		else {
			t = array_type(w, &entry);
			mark = pat_elem(w);
		}
		print_pe(field, pe);
		jv lc = jv_is_valid(live) ? child_of(live, pe, t, entry) : jv_invalid();
		jv mc = jv_is_valid(merged) ? child_of(merged, pe, t, entry) : jv_invalid();
		jv r = conflict_walk(w, c, lc, mc, field, fields);

		jv_free(lc);
		jv_free(mc);
		jv_free(entry);
		field->len = fmark;
		field->buf[fmark] = '\0';
		pat_pop(w, mark);
		if (jv_is_valid(r))
			ch = jv_object_set(ch, k, r);
		else {
			jv_free(r);
			jv_free(k);
		}
		jv_free(c);
	}
	return node_build(0, ch);
}

/*
 * Removes from v (consumed) the members of set node (borrowed) that others
 * (borrowed, maybe invalid) own neither themselves nor below. Returns v, or
 * jv_invalid() when v itself goes.
 */
static jv remove_walk(struct walk *w, jv v, jv node, jv others)
{
	int had = 0;

	if (node_member(node) && jv_object_length(jv_copy(node)) == 0 && !jv_is_valid(others)) {
		jv_free(v);
		return jv_invalid();
	}
	if (node_member(node) && !jv_is_valid(others) && jv_object_has(jv_copy(node), jv_string("."))) {
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
			size_t mark = pat_field(w, pe + 2);
			jv o = jv_is_valid(others) ? jv_object_get(jv_copy(others), jv_copy(k)) : jv_invalid();
			jv r = remove_walk(w, jv_object_get(jv_copy(v), jv_string(pe + 2)), c, o);

			pat_pop(w, mark);
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
		enum lt t = array_type(w, &entry);
		size_t mark;

		if (t == LT_ATOMIC) {
			jv_free(entry);
			jv_free(out);
			return v;
		}
		had = jv_array_length(jv_copy(v)) > 0;
		mark = pat_elem(w);
		jv_array_foreach(v, i, e) {
			jv key = list_elem_key(t, entry, e);
			jv c = jv_get_kind(key) == JV_KIND_STRING ? jv_object_get(jv_copy(node), jv_copy(key)) : jv_invalid();

			if (jv_is_valid(c)) {
				jv o = jv_is_valid(others) ? jv_object_get(jv_copy(others), jv_copy(key)) : jv_invalid();

				e = remove_walk(w, e, c, o);
				jv_free(o);
			}
			jv_free(c);
			jv_free(key);
			if (jv_is_valid(e))
				out = jv_array_append(out, e);
			else
				jv_free(e);
		}
		pat_pop(w, mark);
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

/* ---- managedFields entries ---- */

static const char *str_or(jv o, const char *key, jv *hold)
{
	*hold = jv_get_kind(o) == JV_KIND_OBJECT ? jv_object_get(jv_copy(o), jv_string(key)) : jv_invalid();
	return jv_get_kind(*hold) == JV_KIND_STRING ? jv_string_value(*hold) : "";
}

static int entry_is(jv e, const char *manager, const char *op, const char *api_version, const char *sub)
{
	jv h1, h2, h3, h4;
	const char *m = str_or(e, "manager", &h1), *o = str_or(e, "operation", &h2);
	const char *a = str_or(e, "apiVersion", &h3), *s = str_or(e, "subresource", &h4);
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
		int c = strcmp(str_or(*a, fields[i], &ha), str_or(*b, fields[i], &hb));

		jv_free(ha);
		jv_free(hb);
		if (c)
			return c;
	}
	return 0;
}

/* Drops entries with an empty FieldsV1 set and sorts them as kube-apiserver does. */
static jv entries_finish(jv entries)
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

static jv entry_fields(jv e)
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

/* A path element of a field set with what pe_order compares: its rank and,
 * for k: and v:, its value parsed once (invalid when it does not parse). */
struct pe {
	jv name, val, child;
	int rank;
};

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

/*
 * A field set (consumed) with its keys in kube-apiserver's order at every
 * level (structured-merge-diff serializes its sorted path elements, "."
 * first); *moved is set when anything had to be reordered. A level already
 * in order is kept as it is, as most are once stored: ksim writes the
 * managedFields of every status its controllers change. Each k:/v: key is
 * parsed once per call, not at each comparison.
 */
static jv sorted_set_(jv set, int *moved)
{
	struct pe *p;
	int i = 0, n, it, reorder = 0;

	if (jv_get_kind(set) != JV_KIND_OBJECT || (n = jv_object_length(jv_copy(set))) == 0)
		return set;
	p = kop_calloc((size_t)n, sizeof(*p));
	for (it = jv_object_iter(set); i < n && jv_object_iter_valid(set, it); it = jv_object_iter_next(set, it), i++) {
		p[i].name = jv_object_iter_key(set, it);
		p[i].rank = pe_rank(jv_string_value(p[i].name));
		p[i].val = p[i].rank == 2 || p[i].rank == 3 ? jv_parse(jv_string_value(p[i].name) + 2) : jv_invalid();
		p[i].child = sorted_set_(jv_object_iter_value(set, it), &reorder);
		if (i > 0 && pe_order(&p[i - 1], &p[i]) > 0)
			reorder = 1;
	}
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
	free(p);
	return set;
}

static jv sorted_set(jv set)
{
	int moved = 0;

	return sorted_set_(set, &moved);
}

static jv entry_set_fields(jv e, jv set)
{
	return jv_object_set(e, jv_string("fieldsV1"), jv_is_valid(set) ? sorted_set(set) : (jv_free(set), jv_object()));
}

static jv new_entry(const char *manager, const char *op, const char *api_version, const char *now,
		    const char *sub, jv set)
{
	jv e = jv_object();

	e = jv_object_set(e, jv_string("manager"), jv_string(manager));
	e = jv_object_set(e, jv_string("operation"), jv_string(op));
	e = jv_object_set(e, jv_string("apiVersion"), jv_string(api_version));
	e = jv_object_set(e, jv_string("time"), jv_string(now));
	e = jv_object_set(e, jv_string("fieldsType"), jv_string("FieldsV1"));
	e = entry_set_fields(e, set);
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
static int valid_managed(jv mf)
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

/* Entries a client sent (consumed, valid_managed) as kube-apiserver stores
 * what it decodes: each set in its order, empty ones dropped, sorted. */
static jv entries_stored(jv mf)
{
	jv out = jv_array();

	jv_array_foreach(mf, i, e) {
		jv f = entry_fields(e);

		out = jv_array_append(out, jv_is_valid(f) ? entry_set_fields(e, f) : (jv_free(f), e));
	}
	jv_free(mf);
	return entries_finish(out);
}

static jv get_managed(jv obj)
{
	jv mf = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("metadata"), jv_string("managedFields")));

	if (jv_get_kind(mf) != JV_KIND_ARRAY) {
		jv_free(mf);
		return jv_array();
	}
	return mf;
}

static jv strip_managed(jv obj)
{
	jv md = jv_object_get(jv_copy(obj), jv_string("metadata"));

	if (jv_get_kind(md) == JV_KIND_OBJECT && jv_object_has(jv_copy(md), jv_string("managedFields")))
		return jv_object_set(obj, jv_string("metadata"), jv_object_delete(md, jv_string("managedFields")));
	jv_free(md);
	return obj;
}

static jv set_managed(jv obj, jv mf)
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

static const char *obj_str(jv obj, const char *key, jv *hold)
{
	return str_or(obj, key, hold);
}

/* ---- apply ---- */

static int conflict_cmp(const void *pa, const void *pb)
{
	static const char *const fields[] = { "manager", "operation", "apiVersion", "subresource", "field" };
	const jv *a = pa, *b = pb;
	size_t i;

	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		jv ha, hb;
		int c = strcmp(str_or(*a, fields[i], &ha), str_or(*b, fields[i], &hb));

		jv_free(ha);
		jv_free(hb);
		if (c)
			return c;
	}
	return 0;
}

static jv sort_conflicts(jv c)
{
	int i, n = jv_array_length(jv_copy(c));
	jv *v = kop_calloc((size_t)n + 1, sizeof(jv));
	jv out = jv_array();

	for (i = 0; i < n; i++)
		v[i] = jv_array_get(jv_copy(c), i);
	qsort(v, (size_t)n, sizeof(jv), conflict_cmp);
	for (i = 0; i < n; i++)
		out = jv_array_append(out, v[i]);
	free(v);
	jv_free(c);
	return out;
}

/* applied with the fields nobody owns left out, except name and namespace. */
static jv clean_applied(jv applied)
{
	jv md = jv_object_get(jv_copy(applied), jv_string("metadata"));

	if (jv_get_kind(md) != JV_KIND_OBJECT) {
		jv_free(md);
		return applied;
	}
	jv orig = jv_copy(md);

	jv_object_foreach(orig, k, v) {
		const char *ks = jv_string_value(k);

		if (is_unowned_meta(ks) && strcmp(ks, "name") && strcmp(ks, "namespace") && strcmp(ks, "generateName"))
			md = jv_object_delete(md, jv_copy(k));
		jv_free(k);
		jv_free(v);
	}
	jv_free(orig);
	return jv_object_set(applied, jv_string("metadata"), md);
}

int kop_ssa_apply(jv live_or_null, jv applied, const char *manager, int force, const char *subresource,
		  const char *now, jv listinfo, jv *out, jv *conflicts, char *err)
{
	struct walk w = { listinfo, KOP_BUF_INIT };
	struct kop_buf field = KOP_BUF_INIT;
	jv live, mf, entries, newset, prev = jv_invalid(), prev_entry = jv_invalid();
	jv merged, found;
	const char *sub = subresource ? subresource : "";
	int i, n, rc = -1;

	if (jv_get_kind(applied) != JV_KIND_OBJECT) {
		jv_free(live_or_null);
		jv_free(applied);
		return kop_error(err, "the applied configuration must be an object");
	}
	jv md = jv_object_get(jv_copy(applied), jv_string("metadata"));
	if (jv_get_kind(md) == JV_KIND_OBJECT && jv_object_has(jv_copy(md), jv_string("managedFields"))) {
		jv_free(md);
		jv_free(live_or_null);
		jv_free(applied);
		return kop_error(err, "metadata.managedFields must be nil");
	}
	jv_free(md);
	entries = jv_array();
	found = jv_array();
	live = jv_get_kind(live_or_null) == JV_KIND_OBJECT ? live_or_null : (jv_free(live_or_null), jv_object());
	mf = get_managed(live);
	live = strip_managed(live);
	applied = clean_applied(applied);
	kop_buf_adds(&w.pat, "");
	kop_buf_adds(&field, "");

	newset = fs_value(&w, applied, FS_APPLY);
	if (jv_object_length(jv_copy(newset)) == 0) {
		jv_free(newset);
		newset = jv_invalid();
	}
	jv_array_foreach(mf, j, e) {
		if (!jv_is_valid(prev_entry) && entry_is(e, manager, "Apply", NULL, sub)) {
			prev = entry_fields(e);
			prev_entry = e;
		} else {
			entries = jv_array_append(entries, e);
		}
	}
	jv_free(mf);
	merged = ssa_merge(&w, jv_copy(live), jv_copy(applied));

	/* conflicts: fields of others that this apply changes */
	n = jv_array_length(jv_copy(entries));
	for (i = 0; i < n && jv_is_valid(newset); i++) {
		jv e = jv_array_get(jv_copy(entries), i);
		jv inter = set_inter(jv_copy(newset), entry_fields(e));
		jv fields = jv_array(), cset;

		if (!jv_is_valid(inter)) {
			jv_free(inter);
			jv_free(fields);
			jv_free(e);
			continue;
		}
		cset = conflict_walk(&w, inter, live, merged, &field, &fields);
		jv_free(inter);
		if (jv_is_valid(cset) && force) {
			entries = jv_array_set(entries, i, entry_set_fields(jv_copy(e), set_diff(entry_fields(e), cset)));
			cset = jv_invalid();
		}
		jv_free(cset);
		if (!force) {
			jv_array_foreach(fields, j, f) {
				jv c = jv_object();
				jv h1, h2, h3, h4;

				c = jv_object_set(c, jv_string("manager"), jv_string(str_or(e, "manager", &h1)));
				c = jv_object_set(c, jv_string("operation"), jv_string(str_or(e, "operation", &h2)));
				c = jv_object_set(c, jv_string("apiVersion"), jv_string(str_or(e, "apiVersion", &h3)));
				if (*str_or(e, "subresource", &h4))
					c = jv_object_set(c, jv_string("subresource"), jv_copy(h4));
				c = jv_object_set(c, jv_string("field"), f);
				found = jv_array_append(found, c);
				jv_free(h1);
				jv_free(h2);
				jv_free(h3);
				jv_free(h4);
			}
		}
		jv_free(fields);
		jv_free(e);
	}
	if (jv_array_length(jv_copy(found)) > 0) {
		*conflicts = sort_conflicts(found);
		found = jv_invalid();
		jv_free(merged);
		rc = 1;
		goto out;
	}

	/* fields this manager stops applying go, unless somebody else owns them */
	jv removed = set_diff(jv_copy(prev), jv_copy(newset));
	if (jv_is_valid(removed)) {
		jv others = jv_invalid();

		jv_array_foreach(entries, j, e) {
			others = set_union(others, entry_fields(e));
			jv_free(e);
		}
		/*
		 * What this manager applies now is kept too: a "." marker it used
		 * to own (kubectl's client-side-apply hand-over writes them) must
		 * not take the whole map with it.
		 */
		if (jv_is_valid(newset))
			others = set_union(others, jv_copy(newset));
		merged = remove_walk(&w, merged, removed, others);
		if (!jv_is_valid(merged)) {
			jv_free(merged);
			merged = jv_object();
		}
		jv_free(others);
	}
	jv_free(removed);

	{
		jv ha;
		const char *av = obj_str(applied, "apiVersion", &ha);
		jv ht, hav;
		const char *pav = str_or(prev_entry, "apiVersion", &hav), *pt = str_or(prev_entry, "time", &ht);
		int keep = jv_is_valid(prev_entry) && jv_equal(jv_copy(prev), jv_copy(newset)) && !strcmp(pav, av);
		const char *t = keep && *pt ? pt : now;

		if (jv_is_valid(newset))
			entries = jv_array_append(entries, new_entry(manager, "Apply", av, t, sub, jv_copy(newset)));
		jv_free(ht);
		jv_free(hav);
		jv_free(ha);
	}
	*out = set_managed(merged, entries_finish(entries));
	entries = jv_invalid();
	rc = 0;
out:
	jv_free(found);
	jv_free(entries);
	jv_free(prev);
	jv_free(prev_entry);
	jv_free(newset);
	jv_free(live);
	jv_free(applied);
	kop_buf_release(&w.pat);
	kop_buf_release(&field);
	return rc;
}

/* ---- non-apply writes ---- */

jv kop_ssa_track_update(jv old_or_null, jv new, const char *manager, const char *subresource,
			const char *now, jv listinfo)
{
	struct walk w = { listinfo, KOP_BUF_INIT };
	jv old, oldmf, base, newmf = jv_invalid(), changed, removed, touched, entries = jv_array();
	jv hav;
	const char *sub = subresource ? subresource : "";
	int mine = -1;

	if (jv_get_kind(new) != JV_KIND_OBJECT) {
		jv_free(old_or_null);
		return new;
	}
	old = jv_get_kind(old_or_null) == JV_KIND_OBJECT ? old_or_null : (jv_free(old_or_null), jv_object());
	oldmf = get_managed(old);
	{
		jv md = jv_object_get(jv_copy(new), jv_string("metadata"));

		if (jv_get_kind(md) == JV_KIND_OBJECT && jv_object_has(jv_copy(md), jv_string("managedFields")))
			newmf = jv_object_get(jv_copy(md), jv_string("managedFields"));
		jv_free(md);
	}
	if (jv_is_valid(newmf) && !jv_equal(jv_copy(newmf), jv_copy(oldmf))) {
		if (jv_get_kind(newmf) != JV_KIND_ARRAY || jv_array_length(jv_copy(newmf)) == 0) {
			jv_free(newmf);
			jv_free(oldmf);
			jv_free(old);
			jv_free(entries);
			return strip_managed(new);
		}
		if (valid_managed(newmf)) {
			base = entries_stored(newmf);
		} else {
			/* kube-apiserver (decodeLiveOrNew): what does not decode is
			 * taken as not sent, the stored entries stay */
			jv_free(newmf);
			base = jv_copy(oldmf);
		}
	} else {
		jv_free(newmf);
		base = jv_copy(oldmf);
	}
	old = strip_managed(old);
	new = strip_managed(new);
	kop_buf_adds(&w.pat, "");
	fs_diff(&w, old, new, &changed, &removed);
	kop_buf_release(&w.pat);
	if (!jv_is_valid(changed) && !jv_is_valid(removed)) {
		jv_free(oldmf);
		jv_free(old);
		jv_free(changed);
		jv_free(removed);
		jv_free(entries);
		return set_managed(new, base);
	}
	touched = set_union(jv_copy(changed), jv_copy(removed));
	const char *av = obj_str(new, "apiVersion", &hav);
	jv_array_foreach(base, i, e) {
		if (mine < 0 && jv_get_kind(e) == JV_KIND_OBJECT && entry_is(e, manager, "Update", av, sub)) {
			mine = jv_array_length(jv_copy(entries));
			entries = jv_array_append(entries, e);
		} else if (jv_get_kind(e) == JV_KIND_OBJECT) {
			jv f = entry_fields(e);

			/* an entry this write does not touch stays as it is */
			if (jv_is_valid(f) && set_meets(f, touched))
				e = entry_set_fields(e, set_diff(f, jv_copy(touched)));
			else
				jv_free(f);
			entries = jv_array_append(entries, e);
		} else {
			jv_free(e);
		}
	}
	if (mine >= 0) {
		jv e = jv_array_get(jv_copy(entries), mine);
		jv f = set_diff(set_union(entry_fields(e), jv_copy(changed)), jv_copy(removed));

		e = entry_set_fields(e, f);
		e = jv_object_set(e, jv_string("time"), jv_string(now));
		entries = jv_array_set(entries, mine, e);
	} else if (jv_is_valid(changed)) {
		entries = jv_array_append(entries, new_entry(manager, "Update", av, now, sub, jv_copy(changed)));
	}
	jv_free(hav);
	jv_free(touched);
	jv_free(changed);
	jv_free(removed);
	jv_free(base);
	jv_free(oldmf);
	jv_free(old);
	return set_managed(new, entries_finish(entries));
}

/* ---- conflict messages ---- */

static void print_manager(struct kop_buf *b, jv c)
{
	jv h1, h2, h3, h4;
	const char *op = str_or(c, "operation", &h2);
	const char *sub = str_or(c, "subresource", &h4);
	jv q = jv_dump_string(jv_string(str_or(c, "manager", &h1)), 0);

	kop_buf_adds(b, jv_string_value(q));
	jv_free(q);
	if (*sub) {
		jv qs = jv_dump_string(jv_string(sub), 0);

		kop_buf_addf(b, " with subresource %s", jv_string_value(qs));
		jv_free(qs);
	}
	if (!strcmp(op, "Update"))
		kop_buf_addf(b, " using %s", str_or(c, "apiVersion", &h3));
	else
		h3 = jv_invalid();
	jv_free(h1);
	jv_free(h2);
	jv_free(h3);
	jv_free(h4);
}

static int same_manager(jv a, jv b)
{
	static const char *const fields[] = { "manager", "operation", "apiVersion", "subresource" };
	size_t i;

	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		jv ha, hb;
		int c = strcmp(str_or(a, fields[i], &ha), str_or(b, fields[i], &hb));

		jv_free(ha);
		jv_free(hb);
		if (c)
			return 0;
	}
	return 1;
}

char *kop_ssa_conflict_message(jv conflicts)
{
	struct kop_buf b = KOP_BUF_INIT;
	int i, n = jv_get_kind(conflicts) == JV_KIND_ARRAY ? jv_array_length(jv_copy(conflicts)) : 0;
	jv prev = jv_null();

	if (n == 1) {
		jv c = jv_array_get(jv_copy(conflicts), 0), h;

		kop_buf_adds(&b, "Apply failed with 1 conflict: conflict with ");
		print_manager(&b, c);
		kop_buf_addf(&b, ": %s", str_or(c, "field", &h));
		jv_free(h);
		jv_free(c);
		return kop_buf_detach(&b, NULL);
	}
	kop_buf_addf(&b, "Apply failed with %d conflicts: ", n);
	for (i = 0; i < n; i++) {
		jv c = jv_array_get(jv_copy(conflicts), i), h;

		if (jv_get_kind(prev) == JV_KIND_NULL || !same_manager(prev, c)) {
			if (i)
				kop_buf_adds(&b, "\n");
			kop_buf_adds(&b, "conflicts with ");
			print_manager(&b, c);
			kop_buf_adds(&b, ":");
		}
		kop_buf_addf(&b, "\n- %s", str_or(c, "field", &h));
		jv_free(h);
		jv_free(prev);
		prev = c;
	}
	jv_free(prev);
	return kop_buf_detach(&b, NULL);
}

jv kop_ssa_conflict_causes(jv conflicts)
{
	jv out = jv_array();

	if (jv_get_kind(conflicts) != JV_KIND_ARRAY)
		return out;
	jv_array_foreach(conflicts, i, c) {
		struct kop_buf b = KOP_BUF_INIT;
		jv h, cause = jv_object();

		kop_buf_adds(&b, "conflict with ");
		print_manager(&b, c);
		cause = jv_object_set(cause, jv_string("reason"), jv_string("FieldManagerConflict"));
		cause = jv_object_set(cause, jv_string("message"), jv_string(b.buf));
		cause = jv_object_set(cause, jv_string("field"), jv_string(str_or(c, "field", &h)));
		jv_free(h);
		kop_buf_release(&b);
		jv_free(c);
		out = jv_array_append(out, cause);
	}
	return out;
}
