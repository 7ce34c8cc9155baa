/*
 * A program's settings (read from the environment, typed, defaulted), the
 * templates that expand them ("{name}" in strings) and primary.shardKey, a
 * template of settings and the primary's name and namespace. Loading the rest
 * of the document is program.c's.
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
			if (!strcmp(jv_string_value(k), "shardKey") && jv_object_has(jv_copy(v), kop_json_key("resource"))) {
				jv_free(k);	/* names the primary's own fields too: program_load_shard_key's */
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

static void shard_part_add(struct kop_program *p, int what, const char *text, size_t len)
{
	struct kop_shard_part *sp;

	if (what == KOP_SHARD_PART_TEXT && !len)
		return;
	if (what == KOP_SHARD_PART_TEXT && p->nshard_parts &&
	    p->shard_parts[p->nshard_parts - 1].what == KOP_SHARD_PART_TEXT) {
		struct kop_buf b = KOP_BUF_INIT;

		sp = &p->shard_parts[p->nshard_parts - 1];
		kop_buf_adds(&b, sp->text);
		kop_buf_add(&b, text, len);
		free(sp->text);
		sp->text = kop_buf_detach(&b, NULL);
		return;
	}
	p->shard_parts = kop_realloc(p->shard_parts, (p->nshard_parts + 1) * sizeof(*p->shard_parts));
	sp = &p->shard_parts[p->nshard_parts++];
	sp->what = what;
	sp->text = what == KOP_SHARD_PART_TEXT ? kop_strndup(text, len) : NULL;
}

/*
 * primary.shardKey (in primary, not expanded): "{name}" and "{namespace}" are
 * the primary's, any other "{x}" the setting x, filled in now; "{{" is a
 * literal "{". Sets p->shard_key and p->shard_parts; -1 with err naming the
 * field.
 */
int program_load_shard_key(struct kop_program *p, jv primary, char *err)
{
	const char *s;
	int own = 0;

	if (program_opt_str(primary, "shardKey", "primary", &p->shard_key, err) < 0)
		return -1;
	if (!p->shard_key)
		return 0;
	if (!*p->shard_key)
		return kop_error(err, "'primary.shardKey' is empty (leave it out when the program is not sharded)");
	for (s = p->shard_key; *s;) {
		const char *close;
		jv v;
		size_t len;

		if (s[0] == '{' && s[1] == '{') {
			shard_part_add(p, KOP_SHARD_PART_TEXT, "{", 1);
			s += 2;
			continue;
		}
		if (*s == '}')
			return kop_error(err, "'primary.shardKey': a '}' without its '{' (\"{{\" is a literal \"{\")");
		if (*s != '{') {
			len = strcspn(s, "{}");
			shard_part_add(p, KOP_SHARD_PART_TEXT, s, len);
			s += len;
			continue;
		}
		if (!(close = strchr(s, '}')))
			return kop_error(err, "'primary.shardKey': a '{' without its '}'");
		len = (size_t)(close - s - 1);
		if ((len == 4 && !strncmp(s + 1, "name", 4)) || (len == 9 && !strncmp(s + 1, "namespace", 9))) {
			if (jv_object_has(jv_copy(p->settings), jv_string_sized(s + 1, (int)len)))
				return kop_error(err, "'primary.shardKey': '{%.*s}' is the primary's metadata.%.*s, "
						 "and a setting has that name too (rename the setting)",
						 (int)len, s + 1, (int)len, s + 1);
			shard_part_add(p, len == 4 ? KOP_SHARD_PART_NAME : KOP_SHARD_PART_NAMESPACE, NULL, 0);
			own = 1;
			s = close + 1;
			continue;
		}
		v = jv_object_get(jv_copy(p->settings), jv_string_sized(s + 1, (int)len));
		if (jv_get_kind(v) == JV_KIND_STRING) {
			shard_part_add(p, KOP_SHARD_PART_TEXT, jv_string_value(v), strlen(jv_string_value(v)));
		} else if (jv_get_kind(v) == JV_KIND_NUMBER || jv_get_kind(v) == JV_KIND_TRUE ||
			   jv_get_kind(v) == JV_KIND_FALSE) {
			jv t = jv_dump_string(jv_copy(v), 0);

			shard_part_add(p, KOP_SHARD_PART_TEXT, jv_string_value(t), strlen(jv_string_value(t)));
			jv_free(t);
		} else {
			jv_free(v);
			return kop_error(err, "'primary.shardKey': unknown or empty setting '%.*s' ({name} and "
					 "{namespace} are the primary's)", (int)len, s + 1);
		}
		jv_free(v);
		s = close + 1;
	}
	if (!own)
		return kop_error(err, "'primary.shardKey' '%s' names neither {name} nor {namespace}: every primary "
				 "would have the same key, in one shard", p->shard_key);
	return 0;
}
