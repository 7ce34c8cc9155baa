/*
 * Conflict messages and Status causes, worded as kube-apiserver words them.
 */
#include <string.h>
#include "ssa-priv.h"
#include "banned.h"

static void print_manager(struct kop_buf *b, jv c)
{
	jv h1, h2, h3, h4;
	const char *op = ssa_str_or(c, "operation", &h2);
	const char *sub = ssa_str_or(c, "subresource", &h4);
	jv q = jv_dump_string(jv_string(ssa_str_or(c, "manager", &h1)), 0);

	kop_buf_adds(b, jv_string_value(q));
	jv_free(q);
	if (*sub) {
		jv qs = jv_dump_string(jv_string(sub), 0);

		kop_buf_addf(b, " with subresource %s", jv_string_value(qs));
		jv_free(qs);
	}
	if (!strcmp(op, "Update"))
		kop_buf_addf(b, " using %s", ssa_str_or(c, "apiVersion", &h3));
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
		int c = strcmp(ssa_str_or(a, fields[i], &ha), ssa_str_or(b, fields[i], &hb));

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
		kop_buf_addf(&b, ": %s", ssa_str_or(c, "field", &h));
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
		kop_buf_addf(&b, "\n- %s", ssa_str_or(c, "field", &h));
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
		cause = jv_object_set(cause, jv_string("field"), jv_string(ssa_str_or(c, "field", &h)));
		jv_free(h);
		kop_buf_release(&b);
		jv_free(c);
		out = jv_array_append(out, cause);
	}
	return out;
}
