/*
 * test-tool commands for lib/patch, lib/ssa and lib/schema. Inputs are
 * JSON files; the result is printed as one compact JSON line; errors as
 * "error: ..." on stdout with exit 1.
 *   merge-patch TARGET PATCH
 *   json-patch TARGET OPS
 *   smp TARGET PATCH                   (apiVersion/kind taken from TARGET, else PATCH)
 *   listinfo APIVERSION KIND
 *   ssa-apply LIVE|- APPLIED MANAGER [force] [SCHEMA]
 *                                      {"object":…, "managed":[entries]} or, exit 1,
 *                                      {"conflicts":…, "message":…, "causes":…}
 *   ssa-update OLD|- NEW MANAGER [SUBRESOURCE] [SCHEMA]
 *   ssa-steps FILE                     a list of steps (see t0203), each printed
 *   schema-default|schema-prune|schema-validate SCHEMA OBJ
 *   schema-listinfo SCHEMA
 * schema-validate prints {"causes":…, "message": the 422 message for Widget.test.example.org "bad"}.
 * managedFields are printed under "managed" (normalize.jq drops the key
 * "managedFields"), with the time kept.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kop.h"
#include "patch.h"
#include "ssa.h"
#include "schema.h"
#include "test-tool.h"
#include "banned.h"

#define NOW "2026-01-01T00:00:00Z"

static jv load(const char *path)
{
	char *buf, err[KOP_ERRLEN];
	size_t len;
	jv v;

	if (!strcmp(path, "-"))
		return jv_null();
	if (kop_read_file(path, 64 << 20, &buf, &len, err) < 0) {
		fprintf(stderr, "test-tool: %s\n", err);
		exit(2);
	}
	v = jv_parse_sized(buf, (int)len);
	free(buf);
	if (!jv_is_valid(v)) {
		jv m = jv_invalid_get_msg(v);

		fprintf(stderr, "test-tool: '%s': %s\n", path, jv_string_value(m));
		exit(2);
	}
	return v;
}

static void print(jv v)
{
	jv s = jv_dump_string(v, JV_PRINT_SORTED);

	printf("%s\n", jv_string_value(s));
	jv_free(s);
}

static int fail(const char *err)
{
	printf("error: %s\n", err);
	return 1;
}

static int cmd_merge_patch(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	print(kop_merge_patch(load(argv[1]), load(argv[2])));
	return 0;
}

static int cmd_json_patch(int argc, char **argv)
{
	char err[KOP_ERRLEN];
	jv out;

	if (argc < 3)
		return 2;
	if (kop_json_patch(load(argv[1]), load(argv[2]), &out, err) < 0)
		return fail(err);
	print(out);
	return 0;
}

static jv str_field(jv a, jv b, const char *key)
{
	jv v = jv_get_kind(a) == JV_KIND_OBJECT ? jv_object_get(jv_copy(a), jv_string(key)) : jv_invalid();

	if (jv_get_kind(v) != JV_KIND_STRING) {
		jv_free(v);
		v = jv_get_kind(b) == JV_KIND_OBJECT ? jv_object_get(jv_copy(b), jv_string(key)) : jv_invalid();
	}
	if (jv_get_kind(v) != JV_KIND_STRING) {
		jv_free(v);
		v = jv_string("");
	}
	return v;
}

static int cmd_smp(int argc, char **argv)
{
	char err[KOP_ERRLEN];
	jv t, p, av, kind, out;
	int rc;

	if (argc < 3)
		return 2;
	t = load(argv[1]);
	p = load(argv[2]);
	av = str_field(t, p, "apiVersion");
	kind = str_field(t, p, "kind");
	rc = kop_strategic_merge_patch(t, p, jv_string_value(av), jv_string_value(kind), &out, err);
	jv_free(av);
	jv_free(kind);
	if (rc < 0)
		return fail(err);
	print(out);
	return 0;
}

static int cmd_listinfo(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	print(kop_builtin_listinfo(argv[1], argv[2]));
	return 0;
}

/* The listinfo for obj: its built-in kind's, or the schema file's. */
static jv listinfo_for(jv obj, const char *schema_path)
{
	jv av, kind, li;

	if (schema_path && *schema_path) {
		jv s = load(schema_path);

		li = kop_schema_listinfo(s);
		jv_free(s);
		return li;
	}
	av = str_field(obj, jv_null(), "apiVersion");
	kind = str_field(obj, jv_null(), "kind");
	li = kop_builtin_listinfo(jv_string_value(av), jv_string_value(kind));
	jv_free(av);
	jv_free(kind);
	return li;
}

/* {"object": obj without managedFields, "managed": its managedFields} */
static jv split_managed(jv obj)
{
	jv mf = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("metadata"), jv_string("managedFields")));
	jv md = jv_object_get(jv_copy(obj), jv_string("metadata"));

	if (jv_get_kind(md) == JV_KIND_OBJECT)
		obj = jv_object_set(obj, jv_string("metadata"), jv_object_delete(md, jv_string("managedFields")));
	else
		jv_free(md);
	if (jv_get_kind(mf) != JV_KIND_ARRAY) {
		jv_free(mf);
		mf = jv_array();
	}
	return jv_object_set(jv_object_set(jv_object(), jv_string("object"), obj), jv_string("managed"), mf);
}

/* managed -> metadata.managedFields (the inverse, for chained steps) */
static jv join_managed(jv v)
{
	jv obj, mf;

	if (jv_get_kind(v) != JV_KIND_OBJECT || !jv_object_has(jv_copy(v), jv_string("object")))
		return v;
	obj = jv_object_get(jv_copy(v), jv_string("object"));
	mf = jv_object_get(v, jv_string("managed"));
	if (jv_get_kind(mf) == JV_KIND_ARRAY && jv_array_length(jv_copy(mf)) > 0)
		obj = jv_setpath(obj, JV_ARRAY(jv_string("metadata"), jv_string("managedFields")), mf);
	else
		jv_free(mf);
	return obj;
}

static int do_apply(jv live, jv applied, const char *manager, int force, const char *sub, const char *now,
		    jv li, jv *result)
{
	char err[KOP_ERRLEN];
	jv out, conflicts;
	int rc = kop_ssa_apply(live, applied, manager, force, sub, now, li, &out, &conflicts, err);

	if (rc < 0) {
		*result = jv_object_set(jv_object(), jv_string("error"), jv_string(err));
		return 1;
	}
	if (rc > 0) {
		char *msg = kop_ssa_conflict_message(conflicts);
		jv r = jv_object();

		r = jv_object_set(r, jv_string("message"), jv_string(msg));
		r = jv_object_set(r, jv_string("causes"), kop_ssa_conflict_causes(conflicts));
		r = jv_object_set(r, jv_string("conflicts"), conflicts);
		free(msg);
		*result = r;
		return 1;
	}
	*result = split_managed(out);
	return 0;
}

static int cmd_ssa_apply(int argc, char **argv)
{
	jv applied, li, r;
	int rc;

	if (argc < 4)
		return 2;
	applied = load(argv[2]);
	li = listinfo_for(applied, argc > 5 ? argv[5] : NULL);
	rc = do_apply(join_managed(load(argv[1])), applied, argv[3], argc > 4 && !strcmp(argv[4], "force"), "",
		      NOW, li, &r);
	jv_free(li);
	print(r);
	return rc;
}

static int cmd_ssa_update(int argc, char **argv)
{
	jv new, li;

	if (argc < 4)
		return 2;
	new = join_managed(load(argv[2]));
	li = listinfo_for(new, argc > 5 ? argv[5] : NULL);
	print(split_managed(kop_ssa_track_update(join_managed(load(argv[1])), new, argv[3],
						 argc > 4 ? argv[4] : "", NOW, li)));
	jv_free(li);
	return 0;
}

/*
 * A scenario: {"schema": optional, "steps": [{"op":"apply"|"update"|"create",
 * "manager", "object", "force", "subresource", "time"}...]}. Each step
 * works on the state the previous one left and prints one line: the
 * result, or the conflict/error object (the state is kept then).
 */
static int cmd_ssa_steps(int argc, char **argv)
{
	jv sc, steps, schema, state = jv_null();

	if (argc < 2)
		return 2;
	sc = load(argv[1]);
	steps = jv_object_get(jv_copy(sc), jv_string("steps"));
	schema = jv_object_get(jv_copy(sc), jv_string("schema"));
	jv_array_foreach(steps, i, st) {
		jv op = str_field(st, jv_null(), "op"), mgr = str_field(st, jv_null(), "manager");
		jv sub = str_field(st, jv_null(), "subresource"), tm = str_field(st, jv_null(), "time");
		jv obj = jv_object_get(jv_copy(st), jv_string("object"));
		jv force = jv_object_get(jv_copy(st), jv_string("force"));
		const char *now = jv_string_length_bytes(jv_copy(tm)) ? jv_string_value(tm) : NOW;
		jv li = jv_get_kind(schema) == JV_KIND_OBJECT ? kop_schema_listinfo(schema) : listinfo_for(obj, NULL);
		jv r;

		if (!strcmp(jv_string_value(op), "apply")) {
			if (do_apply(jv_copy(state), obj, jv_string_value(mgr), jv_get_kind(force) == JV_KIND_TRUE,
				     jv_string_value(sub), now, li, &r) == 0) {
				jv_free(state);
				state = join_managed(jv_copy(r));
			}
		} else {
			jv old = !strcmp(jv_string_value(op), "create") ? jv_null() : jv_copy(state);

			jv_free(state);
			state = kop_ssa_track_update(old, obj, jv_string_value(mgr), jv_string_value(sub), now, li);
			r = split_managed(jv_copy(state));
		}
		print(r);
		jv_free(li);
		jv_free(op);
		jv_free(mgr);
		jv_free(sub);
		jv_free(tm);
		jv_free(force);
		jv_free(st);
	}
	jv_free(state);
	jv_free(steps);
	jv_free(schema);
	jv_free(sc);
	return 0;
}

static int cmd_schema(int argc, char **argv)
{
	jv schema, obj;

	if (argc < 3)
		return 2;
	schema = load(argv[1]);
	obj = load(argv[2]);
	if (!strcmp(argv[0], "schema-default"))
		print(kop_schema_default(obj, schema));
	else if (!strcmp(argv[0], "schema-prune"))
		print(kop_schema_prune(obj, schema));
	else {
		jv causes = kop_schema_validate(obj, schema);
		char *msg = kop_schema_invalid_message("Widget.test.example.org", jv_string("bad"), causes);

		print(jv_object_set(jv_object_set(jv_object(), jv_string("causes"), causes),
				    jv_string("message"), jv_string(msg)));
		free(msg);
	}
	jv_free(schema);
	return 0;
}

static int cmd_schema_listinfo(int argc, char **argv)
{
	jv s;

	if (argc < 2)
		return 2;
	s = load(argv[1]);
	print(kop_schema_listinfo(s));
	jv_free(s);
	return 0;
}

static const struct test_cmd patch_cmds[] = {
	{ "merge-patch", cmd_merge_patch },
	{ "json-patch", cmd_json_patch },
	{ "smp", cmd_smp },
	{ "listinfo", cmd_listinfo },
	{ "ssa-apply", cmd_ssa_apply },
	{ "ssa-update", cmd_ssa_update },
	{ "ssa-steps", cmd_ssa_steps },
	{ "schema-default", cmd_schema },
	{ "schema-prune", cmd_schema },
	{ "schema-validate", cmd_schema },
	{ "schema-listinfo", cmd_schema_listinfo },
	{ NULL, NULL }
};
TEST_TOOL_REGISTER(patch_cmds)
