/*
 * A program's settings (read from the environment, typed, defaulted) and the
 * templates that expand them ({{ name }} in strings). Loading the rest of the
 * document is program.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "program-priv.h"
#include "jsonl.h"
#include "banned.h"

static int parse_bool(const char *s, int *out)
{
	if (!strcmp(s, "true") || !strcmp(s, "1") || !strcmp(s, "yes")) {
		*out = 1;
		return 0;
	}
	if (!strcmp(s, "false") || !strcmp(s, "0") || !strcmp(s, "no")) {
		*out = 0;
		return 0;
	}
	return -1;
}

int program_load_setting(jv s, size_t i, jv *settings, char *err)
{
	const char *name = kop_json_cstr(s, "name"), *env = kop_json_cstr(s, "env"), *type = kop_json_cstr(s, "type");
	const char *val = NULL;
	jv v, req = program_get(s, "required");
	int required = jv_get_kind(req) == JV_KIND_TRUE;

	jv_free(req);
	{
		static const char *const keys[] = { "name", "env", "type", "default", "required", "minimum", NULL };
		char where[48];

		snprintf(where, sizeof(where), "settings[%zu]", i);
		if (program_known_keys(s, where, keys, err) < 0)
			return -1;
	}
	if (!name || !*name)
		return kop_error(err, "'settings[%zu].name' is required", i);
	if (!type)
		type = "string";
	if (strcmp(type, "string") && strcmp(type, "integer") && strcmp(type, "boolean"))
		return kop_error(err, "setting '%s': unknown type '%s' (string, integer, boolean)", name, type);
	if (env)
		val = getenv(env);
	if (val && *val) {
		if (!strcmp(type, "integer")) {
			char *end;
			long long n;

			errno = 0;
			n = strtoll(val, &end, 10);
			if (errno || *end || end == val)
				return kop_error(err, "setting '%s': '%s' (from %s) is not an integer", name, val, env);
			{
				jv min = program_get(s, "minimum");
				double m = jv_get_kind(min) == JV_KIND_NUMBER ? jv_number_value(min) : 0;
				int low = jv_get_kind(min) == JV_KIND_NUMBER && (double)n < m;

				jv_free(min);
				if (low)
					return kop_error(err, "setting '%s': %s (from %s) is less than its minimum %.0f",
							 name, val, env, m);
			}
			v = jv_number((double)n);
		} else if (!strcmp(type, "boolean")) {
			int b;

			if (parse_bool(val, &b) < 0)
				return kop_error(err, "setting '%s': '%s' (from %s) is not a boolean", name, val, env);
			v = jv_bool(b);
		} else {
			v = jv_string(val);
		}
	} else {
		v = program_get(s, "default");
		if (jv_get_kind(v) == JV_KIND_NULL && required) {
			jv_free(v);
			if (env)
				return kop_error(err, "missing setting '%s': set %s", name, env);
			return kop_error(err, "missing setting '%s'", name);
		}
	}
	*settings = jv_object_set(*settings, kop_json_key(name), v);
	return 0;
}

/* "{name}" in s replaced by the setting's text; "{{" is a literal "{". (Not in
 * `project`, which is jq; jq gets settings as .settings.) */
static int expand_str(jv settings, const char *s, struct kop_buf *out, char *err)
{
	while (*s) {
		const char *close;
		jv v;

		if (s[0] == '{' && s[1] == '{') {
			kop_buf_add(out, "{", 1);
			s += 2;
			continue;
		}
		if (*s != '{' || !(close = strchr(s, '}'))) {
			kop_buf_add(out, s, 1);
			s++;
			continue;
		}
		v = jv_object_get(jv_copy(settings), jv_string_sized(s + 1, (int)(close - s - 1)));
		switch (jv_get_kind(v)) {
		case JV_KIND_STRING:
			kop_buf_adds(out, jv_string_value(v));
			break;
		case JV_KIND_NUMBER:
		case JV_KIND_TRUE:
		case JV_KIND_FALSE: {
			jv t = jv_dump_string(jv_copy(v), 0);

			kop_buf_adds(out, jv_string_value(t));
			jv_free(t);
			break;
		}
		default:
			jv_free(v);
			return kop_error(err, "unknown or empty setting '%.*s' in a template", (int)(close - s - 1),
					 s + 1);
		}
		jv_free(v);
		s = close + 1;
	}
	return 0;
}

/* Every string in v (consumed) expanded; jv_invalid() with err on error. */
jv program_expand(jv settings, jv v, char *err)
{
	switch (jv_get_kind(v)) {
	case JV_KIND_STRING: {
		struct kop_buf b = KOP_BUF_INIT;
		jv r;

		if (!strchr(jv_string_value(v), '{'))
			return v;
		if (expand_str(settings, jv_string_value(v), &b, err) < 0) {
			kop_buf_release(&b);
			jv_free(v);
			return jv_invalid();
		}
		r = jv_string_sized(b.buf ? b.buf : "", (int)b.len);
		kop_buf_release(&b);
		jv_free(v);
		return r;
	}
	case JV_KIND_ARRAY: {
		int i, n = jv_array_length(jv_copy(v));

		for (i = 0; i < n; i++) {
			jv e = program_expand(settings, jv_array_get(jv_copy(v), i), err);

			if (!jv_is_valid(e)) {
				jv_free(v);
				return e;
			}
			v = jv_array_set(v, i, e);
		}
		return v;
	}
	case JV_KIND_OBJECT: {
		jv keys = jv_keys(jv_copy(v));
		int i, n = jv_array_length(jv_copy(keys));

		for (i = 0; i < n; i++) {
			jv k = jv_array_get(jv_copy(keys), i);
			jv e;

			if (!strcmp(jv_string_value(k), "project") && jv_object_has(jv_copy(v), kop_json_key("resource"))) {
				jv_free(k);	/* a kind's projection is jq text: its braces are jq's */
				continue;
			}
			e = program_expand(settings, jv_object_get(jv_copy(v), jv_copy(k)), err);

			if (!jv_is_valid(e)) {
				jv_free(k);
				jv_free(keys);
				jv_free(v);
				return e;
			}
			v = jv_object_set(v, k, e);
		}
		jv_free(keys);
		return v;
	}
	default:
		return v;
	}
}
