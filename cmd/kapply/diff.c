/*
 * --diff: what would change, as the server's dry run answers it against the
 * live object, without what the server generates.
 */
#include "kapply.h"
#include "banned.h"

/* Drops what the server generates, so that --diff shows only what would change. */
static jv scrub(jv obj)
{
	static const char *const gone[] = { "managedFields", "resourceVersion", "generation", "creationTimestamp",
					    "uid", NULL };
	jv meta;
	int i;

	if (jv_get_kind(obj) != JV_KIND_OBJECT)
		return obj;
	meta = jv_object_get(jv_copy(obj), jv_string("metadata"));
	if (jv_get_kind(meta) != JV_KIND_OBJECT) {
		jv_free(meta);
		return obj;
	}
	for (i = 0; gone[i]; i++)
		meta = jv_object_delete(meta, jv_string(gone[i]));
	return jv_object_set(obj, jv_string("metadata"), meta);
}

static int plain_key(const char *k)
{
	if (!*k)
		return 0;
	for (; *k; k++)
		if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || (*k >= '0' && *k <= '9') ||
		      *k == '_' || *k == '-'))
			return 0;
	return 1;
}

/*
 * The differences between a and b (both consumed; jv_invalid() = absent) as
 * {"path",".a.b[0]","from","to"} entries appended to *changes. Objects and
 * arrays of equal length are compared member by member; anything else whole.
 */
static void diff_values(jv a, jv b, const char *path, jv *changes)
{
	jv_kind ka = jv_get_kind(a), kb = jv_get_kind(b);
	struct kop_buf p = KOP_BUF_INIT;

	if (jv_is_valid(a) && jv_is_valid(b) && jv_equal(jv_copy(a), jv_copy(b))) {
		jv_free(a);
		jv_free(b);
		return;
	}
	if (ka == JV_KIND_OBJECT && kb == JV_KIND_OBJECT) {
		jv keys = jv_keys(jv_object_merge(jv_copy(a), jv_copy(b)));
		int i, n = jv_array_length(jv_copy(keys));

		for (i = 0; i < n; i++) {
			jv k = jv_array_get(jv_copy(keys), i);
			const char *ks = jv_string_value(k);

			kop_buf_reset(&p);
			if (plain_key(ks))
				kop_buf_addf(&p, "%s.%s", path, ks);
			else {
				jv q = jv_dump_string(jv_copy(k), 0);

				kop_buf_addf(&p, "%s[%s]", path, jv_string_value(q));
				jv_free(q);
			}
			diff_values(jv_object_has(jv_copy(a), jv_copy(k)) ? jv_object_get(jv_copy(a), jv_copy(k))
									    : jv_invalid(),
				    jv_object_has(jv_copy(b), jv_copy(k)) ? jv_object_get(jv_copy(b), jv_copy(k))
									    : jv_invalid(),
				    p.buf, changes);
			jv_free(k);
		}
		jv_free(keys);
	} else if (ka == JV_KIND_ARRAY && kb == JV_KIND_ARRAY &&
		   jv_array_length(jv_copy(a)) == jv_array_length(jv_copy(b))) {
		int i, n = jv_array_length(jv_copy(a));

		for (i = 0; i < n; i++) {
			kop_buf_reset(&p);
			kop_buf_addf(&p, "%s[%d]", path, i);
			diff_values(jv_array_get(jv_copy(a), i), jv_array_get(jv_copy(b), i), p.buf, changes);
		}
	} else {
		jv c = jv_object_set(jv_object(), jv_string("path"), jv_string(*path ? path : "."));

		if (jv_is_valid(a))
			c = jv_object_set(c, jv_string("from"), jv_copy(a));
		if (jv_is_valid(b))
			c = jv_object_set(c, jv_string("to"), jv_copy(b));
		*changes = jv_array_append(*changes, c);
	}
	kop_buf_release(&p);
	jv_free(a);
	jv_free(b);
}

/* --diff: before (live, null = absent) and after (null = gone), both consumed. */
void op_diff(struct op *op, jv before, jv after)
{
	jv changes = jv_array(), line;

	if (op_is_secret(op))
		mask_secrets(&before, &after);
	diff_values(jv_get_kind(before) == JV_KIND_NULL ? jv_invalid() : scrub(before),
		    jv_get_kind(after) == JV_KIND_NULL ? jv_invalid() : scrub(after), "", &changes);
	if (!jv_array_length(jv_copy(changes))) {
		jv_free(changes);
		op->state = ST_DONE;
		return;
	}
	note_exit(KOP_EXIT_NO);
	line = jv_object_set(jv_object(), jv_string("op"), jv_string("diff"));
	line = jv_object_set(line, jv_string("for"), jv_string(kind_names[op->kind]));
	if (jv_get_kind(op->primary) == JV_KIND_STRING)
		line = jv_object_set(line, jv_string("primary"), jv_copy(op->primary));
	line = jv_object_set(line, jv_string("ref"), op_ref(op));
	line = jv_object_set(line, jv_string("changes"), changes);
	emit(line);
	op->state = ST_DONE;
}
