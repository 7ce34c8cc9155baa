/*
 * Server-side apply (kop_ssa_apply): an applied configuration merged into
 * the live object, conflicts found, the manager's entry written. Field sets
 * are ssa_fieldset.c's, entries ssa_managed.c's, messages ssa_conflict.c's.
 */
#include <stdlib.h>
#include <string.h>
#include "ssa-priv.h"
#include "banned.h"

static int conflict_cmp(const void *pa, const void *pb)
{
	static const char *const fields[] = { "manager", "operation", "apiVersion", "subresource", "field" };
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

		if (ssa_is_unowned_meta(ks) && strcmp(ks, "name") && strcmp(ks, "namespace") && strcmp(ks, "generateName"))
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
	mf = ssa_get_managed(live);
	live = ssa_strip_managed(live);
	applied = clean_applied(applied);
	kop_buf_adds(&w.pat, "");
	kop_buf_adds(&field, "");

	newset = ssa_fs_value(&w, applied, FS_APPLY);
	if (jv_object_length(jv_copy(newset)) == 0) {
		jv_free(newset);
		newset = jv_invalid();
	}
	jv_array_foreach(mf, j, e) {
		if (!jv_is_valid(prev_entry) && ssa_entry_is(e, manager, "Apply", NULL, sub)) {
			prev = ssa_entry_fields(e);
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
		jv inter = ssa_set_inter(jv_copy(newset), ssa_entry_fields(e));
		jv fields = jv_array(), cset;

		if (!jv_is_valid(inter)) {
			jv_free(inter);
			jv_free(fields);
			jv_free(e);
			continue;
		}
		cset = ssa_conflict_walk(&w, inter, live, merged, &field, &fields);
		jv_free(inter);
		if (jv_is_valid(cset) && force) {
			entries = jv_array_set(entries, i, ssa_entry_set_fields(jv_copy(e), ssa_set_diff(ssa_entry_fields(e), cset)));
			cset = jv_invalid();
		}
		jv_free(cset);
		if (!force) {
			jv_array_foreach(fields, j, f) {
				jv c = jv_object();
				jv h1, h2, h3, h4;

				c = jv_object_set(c, jv_string("manager"), jv_string(ssa_str_or(e, "manager", &h1)));
				c = jv_object_set(c, jv_string("operation"), jv_string(ssa_str_or(e, "operation", &h2)));
				c = jv_object_set(c, jv_string("apiVersion"), jv_string(ssa_str_or(e, "apiVersion", &h3)));
				if (*ssa_str_or(e, "subresource", &h4))
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
	jv removed = ssa_set_diff(jv_copy(prev), jv_copy(newset));
	if (jv_is_valid(removed)) {
		jv others = jv_invalid();

		jv_array_foreach(entries, j, e) {
			others = ssa_set_union(others, ssa_entry_fields(e));
			jv_free(e);
		}
		/*
		 * What this manager applies now is kept too: a "." marker it used
		 * to own (kubectl's client-side-apply hand-over writes them) must
		 * not take the whole map with it.
		 */
		if (jv_is_valid(newset))
			others = ssa_set_union(others, jv_copy(newset));
		merged = ssa_remove_walk(&w, merged, removed, others);
		if (!jv_is_valid(merged)) {
			jv_free(merged);
			merged = jv_object();
		}
		jv_free(others);
	}
	jv_free(removed);

	{
		jv ha;
		const char *av = ssa_obj_str(applied, "apiVersion", &ha);
		jv ht, hav;
		const char *pav = ssa_str_or(prev_entry, "apiVersion", &hav), *pt = ssa_str_or(prev_entry, "time", &ht);
		int keep = jv_is_valid(prev_entry) && jv_equal(jv_copy(prev), jv_copy(newset)) && !strcmp(pav, av);
		const char *t = keep && *pt ? pt : now;

		if (jv_is_valid(newset))
			entries = jv_array_append(entries, ssa_new_entry(manager, "Apply", av, t, sub, jv_copy(newset)));
		jv_free(ht);
		jv_free(hav);
		jv_free(ha);
	}
	*out = ssa_set_managed(merged, ssa_entries_finish(entries));
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
