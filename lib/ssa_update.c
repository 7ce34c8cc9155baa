/*
 * managedFields for writes that are not apply (kop_ssa_track_update):
 * the fields that changed move to the writer's Update entry.
 */
#include "ssa-priv.h"
#include "banned.h"

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
	oldmf = ssa_get_managed(old);
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
			return ssa_strip_managed(new);
		}
		if (ssa_valid_managed(newmf)) {
			base = ssa_entries_stored(newmf);
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
	old = ssa_strip_managed(old);
	new = ssa_strip_managed(new);
	kop_buf_adds(&w.pat, "");
	ssa_fs_diff(&w, old, new, &changed, &removed);
	kop_buf_release(&w.pat);
	if (!jv_is_valid(changed) && !jv_is_valid(removed)) {
		jv_free(oldmf);
		jv_free(old);
		jv_free(changed);
		jv_free(removed);
		jv_free(entries);
		return ssa_set_managed(new, base);
	}
	touched = ssa_set_union(jv_copy(changed), jv_copy(removed));
	const char *av = ssa_obj_str(new, "apiVersion", &hav);
	jv_array_foreach(base, i, e) {
		if (mine < 0 && jv_get_kind(e) == JV_KIND_OBJECT && ssa_entry_is(e, manager, "Update", av, sub)) {
			mine = jv_array_length(jv_copy(entries));
			entries = jv_array_append(entries, e);
		} else if (jv_get_kind(e) == JV_KIND_OBJECT) {
			jv f = ssa_entry_fields(e);

			/* an entry this write does not touch stays as it is */
			if (jv_is_valid(f) && ssa_set_meets(f, touched))
				e = ssa_entry_set_fields(e, ssa_set_diff(f, jv_copy(touched)));
			else
				jv_free(f);
			entries = jv_array_append(entries, e);
		} else {
			jv_free(e);
		}
	}
	if (mine >= 0) {
		jv e = jv_array_get(jv_copy(entries), mine);
		jv f = ssa_entry_fields(e);

		/* (a controller writing the fields it wrote before: its set as it was, not built again) */
		if (!ssa_set_covers(f, changed) || ssa_set_meets(f, removed))
			f = ssa_set_diff(ssa_set_union(f, jv_copy(changed)), jv_copy(removed));
		e = ssa_entry_set_fields(e, f);
		e = jv_object_set(e, jv_string("time"), jv_string(now));
		entries = jv_array_set(entries, mine, e);
	} else if (jv_is_valid(changed)) {
		entries = jv_array_append(entries, ssa_new_entry(manager, "Update", av, now, sub, jv_copy(changed)));
	}
	jv_free(hav);
	jv_free(touched);
	jv_free(changed);
	jv_free(removed);
	jv_free(base);
	jv_free(oldmf);
	jv_free(old);
	return ssa_set_managed(new, ssa_entries_finish(entries));
}
