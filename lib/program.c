/*
 * Reconcile programs: program.yml found, read and checked, its jq compiled, and the
 * program released (see program.h); the helpers that read its fields. Settings and
 * templates are program_settings.c's, kinds and mappings program_kinds.c's, and what
 * the tools ask a loaded program program_query.c's.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "program-priv.h"
#include "yaml.h"
#include "jsonl.h"
#include "banned.h"

char *kop_api_group(const char *api_version)
{
	const char *slash = strrchr(api_version, '/');

	return slash ? kop_strndup(api_version, (size_t)(slash - api_version)) : kop_strdup("");
}

/* ---- reading the document ------------------------------------------------ */

/* A field of o, jv_null() when absent (jv_object_get gives jv_invalid()). */
jv program_get(jv o, const char *key)
{
	jv v;

	if (jv_get_kind(o) != JV_KIND_OBJECT)
		return jv_null();
	v = jv_object_get(jv_copy(o), kop_json_key(key));
	if (jv_get_kind(v) == JV_KIND_INVALID) {
		jv_free(v);
		return jv_null();
	}
	return v;
}

static char *dup_or_null(const char *s)
{
	return s ? kop_strdup(s) : NULL;
}

/* A field that must be a string if present: -1 with err otherwise. */
int program_opt_str(jv o, const char *key, const char *where, char **out, char *err)
{
	jv v = program_get(o, key);
	int kind = jv_get_kind(v);

	*out = NULL;
	if (kind == JV_KIND_NULL || kind == JV_KIND_INVALID) {
		jv_free(v);
		return 0;
	}
	if (kind != JV_KIND_STRING) {
		jv_free(v);
		return kop_error(err, "'%s.%s' must be a string", where, key);
	}
	*out = kop_strdup(jv_string_value(v));
	jv_free(v);
	return 0;
}

/* -1 naming the first key of o (an object) that is not one of keys (NULL-terminated): a typo
 * would otherwise be a silently missing setting. where: "" at the top. */
int program_known_keys(jv o, const char *where, const char *const *keys, char *err)
{
	int rc = 0;

	if (jv_get_kind(o) != JV_KIND_OBJECT)
		return 0;
	jv_object_foreach(o, k, v) {
		size_t i;

		for (i = 0; keys[i] && strcmp(keys[i], jv_string_value(k)); i++)
			;
		if (!keys[i] && !rc) {
			struct kop_buf known = KOP_BUF_INIT;

			for (i = 0; keys[i]; i++)
				kop_buf_addf(&known, "%s%s", i ? ", " : "", keys[i]);
			rc = kop_error(err, "'%s%s%s' is not a known key (%s)", where, *where ? "." : "",
				       jv_string_value(k), known.buf);
			kop_buf_release(&known);
		}
		jv_free(k);
		jv_free(v);
	}
	return rc;
}

int program_req_str(jv o, const char *key, const char *where, char **out, char *err)
{
	if (program_opt_str(o, key, where, out, err) < 0)
		return -1;
	if (!*out || !**out) {
		free(*out);
		*out = NULL;
		return kop_error(err, "'%s.%s' is required", where, key);
	}
	return 0;
}

/* ---- loading --------------------------------------------------------------- */

static int is_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static char *path_join(const char *dir, const char *name)
{
	struct kop_buf b = KOP_BUF_INIT;

	kop_buf_addf(&b, "%s/%s", dir, name);
	return kop_buf_detach(&b, NULL);
}

/* Finds the program file; sets p->dir. Caller frees the returned path. */
static char *find_program_file(struct kop_program *p, const char *path, char *err)
{
	static const char *const names[] = { "program.yml", "program.yaml", "program.json" };
	struct stat st;
	size_t i;

	if (stat(path, &st) < 0) {
		kop_error(err, "unable to open '%s': %s", path, strerror(errno));
		return NULL;
	}
	if (!S_ISDIR(st.st_mode)) {
		const char *slash = strrchr(path, '/');

		p->dir = slash ? kop_strndup(path, (size_t)(slash - path)) : kop_strdup(".");
		return kop_strdup(path);
	}
	p->dir = kop_strdup(path);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char *f = path_join(path, names[i]);

		if (is_file(f))
			return f;
		free(f);
	}
	kop_error(err, "unable to find a program in '%s': no program.yml, program.yaml or program.json", path);
	return NULL;
}

static int compile_jq(struct kop_program *p, jv doc, char *err)
{
	const char *sync = kop_json_cstr(doc, "sync");
	char *file, *text = NULL, *dir, *lib, real[PATH_MAX];
	jv libdirs = jv_array(), aggs;
	size_t len, ki;
	char sub[KOP_ERRLEN];

	if (!sync)
		sync = "sync.jq";
	file = sync[0] == '/' ? kop_strdup(sync) : path_join(p->dir, sync);
	if (kop_read_file(file, 16u << 20, &text, &len, err) < 0) {
		free(file);
		jv_free(libdirs);
		return -1;
	}
	/* jq resolves relative library paths against the including file; use absolute ones. */
	dir = realpath(p->dir, real) ? kop_strdup(real) : kop_strdup(p->dir);
	libdirs = jv_array_append(libdirs, jv_string(dir));
	lib = path_join(dir, "../lib");
	if (realpath(lib, real))
		libdirs = jv_array_append(libdirs, jv_string(real));
	free(lib);
	free(dir);
	p->sync = kop_jq_compile(text, file, jv_copy(libdirs), jv_null(), sub);
	free(text);
	if (!p->sync) {
		free(file);
		jv_free(libdirs);
		return kop_error(err, "%s", sub);
	}
	free(file);
	if (kop_json_cstr(doc, "render")) {
		const char *render = kop_json_cstr(doc, "render");

		file = render[0] == '/' ? kop_strdup(render) : path_join(p->dir, render);
		if (kop_read_file(file, 16u << 20, &text, &len, err) < 0) {
			free(file);
			jv_free(libdirs);
			return -1;
		}
		p->render = kop_jq_compile(text, file, jv_copy(libdirs), jv_null(), sub);
		free(text);
		free(file);
		if (!p->render) {
			jv_free(libdirs);
			return kop_error(err, "%s", sub);
		}
	}
	for (ki = 0; ki < p->nkinds; ki++) {
		struct kop_kind *k = &p->kinds[ki];
		char name[160];

		if (!k->project_text)
			continue;
		snprintf(name, sizeof(name), "project of %s", k->key);
		if (!(k->project = kop_jq_compile(k->project_text, name, jv_copy(libdirs), jv_null(), sub))) {
			jv_free(libdirs);
			return kop_error(err, "%s", sub);
		}
	}
	aggs = program_get(doc, "aggregates");
	if (jv_get_kind(aggs) == JV_KIND_OBJECT) {
		jv keys = jv_keys(jv_copy(aggs));
		int i, n = jv_array_length(jv_copy(keys));

		p->aggs = kop_calloc((size_t)n, sizeof(*p->aggs));
		for (i = 0; i < n; i++) {
			jv k = jv_array_get(jv_copy(keys), i);
			const char *expr = kop_json_cstr(aggs, jv_string_value(k));
			struct kop_aggregate *a = &p->aggs[p->naggs];
			char name[128];

			a->name = kop_strdup(jv_string_value(k));
			jv_free(k);
			p->naggs++;
			snprintf(name, sizeof(name), "aggregates.%s", a->name);
			if (!expr) {
				jv_free(keys);
				jv_free(aggs);
				jv_free(libdirs);
				return kop_error(err, "'%s' must be a jq expression (a string)", name);
			}
			if (!(a->jq = kop_jq_compile(expr, name, jv_copy(libdirs), jv_null(), sub))) {
				jv_free(keys);
				jv_free(aggs);
				jv_free(libdirs);
				return kop_error(err, "%s", sub);
			}
		}
		jv_free(keys);
	} else if (jv_get_kind(aggs) != JV_KIND_NULL) {
		jv_free(aggs);
		jv_free(libdirs);
		return kop_error(err, "'aggregates' must be a mapping of names to jq expressions");
	}
	jv_free(aggs);
	jv_free(libdirs);
	return 0;
}

static int load_doc(struct kop_program *p, jv doc, int compile, char *err)
{
	jv settings = program_get(doc, "settings"), sect;
	int i, n;

	if (jv_get_kind(doc) != JV_KIND_OBJECT) {
		jv_free(settings);
		jv_free(doc);
		return kop_error(err, "not a mapping");
	}
	{
		static const char *const keys[] = { "name", "settings", "primary", "mapping", "children", "observed",
						    "related", "aggregates", "render", "sync", NULL };

		if (program_known_keys(doc, "", keys, err) < 0) {
			jv_free(settings);
			jv_free(doc);
			return -1;
		}
	}
	p->name = dup_or_null(kop_json_cstr(doc, "name"));
	if (!p->name) {
		const char *slash = strrchr(p->dir, '/');

		p->name = kop_strdup(slash && slash[1] ? slash + 1 : p->dir);
	}
	if (jv_get_kind(settings) == JV_KIND_ARRAY) {
		n = jv_array_length(jv_copy(settings));
		for (i = 0; i < n; i++) {
			jv s = jv_array_get(jv_copy(settings), i);
			int rc = program_load_setting(s, (size_t)i, &p->settings, err);

			jv_free(s);
			if (rc < 0) {
				jv_free(settings);
				jv_free(doc);
				return -1;
			}
		}
	} else if (jv_get_kind(settings) != JV_KIND_NULL) {
		jv_free(settings);
		jv_free(doc);
		return kop_error(err, "'settings' must be a list");
	}
	jv_free(settings);

	/* Templates are filled in before anything else reads these sections. */
	{
		static const char *const sections[] = { "primary", "mapping", "children", "observed", "related" };
		size_t s;

		for (s = 0; s < sizeof(sections) / sizeof(sections[0]); s++) {
			jv v = program_expand(p->settings, program_get(doc, sections[s]), err);

			if (!jv_is_valid(v)) {
				char sub[KOP_ERRLEN];

				snprintf(sub, sizeof(sub), "%s", err ? err : "");
				jv_free(doc);
				return kop_error(err, "'%s': %s", sections[s], sub);
			}
			doc = jv_object_set(doc, kop_json_key(sections[s]), v);
		}
	}

	sect = program_get(doc, "mapping");
	if (jv_get_kind(sect) == JV_KIND_OBJECT) {
		jv_free(p->mapping.match);
		if (program_load_mapping(sect, "mapping", &p->mapping, err) < 0) {
			jv_free(sect);
			jv_free(doc);
			return -1;
		}
	} else if (jv_get_kind(sect) != JV_KIND_NULL) {
		jv_free(sect);
		jv_free(doc);
		return kop_error(err, "'mapping' must be a mapping");
	}
	jv_free(sect);

	sect = program_get(doc, "primary");
	if (jv_get_kind(sect) != JV_KIND_OBJECT) {
		jv_free(sect);
		jv_free(doc);
		return kop_error(err, "'primary' is required");
	}
	program_kind_release(&p->primary);
	if (program_load_kind(sect, "primary", KOP_ROLE_PRIMARY, &p->mapping, &p->primary, err) < 0 ||
	    program_opt_str(sect, "finalizer", "primary", &p->finalizer, err) < 0 ||
	    program_load_shard_key(p, sect, err) < 0) {
		jv_free(sect);
		jv_free(doc);
		return -1;
	}
	jv_free(sect);
	if (program_load_kinds(p, doc, "children", KOP_ROLE_CHILD, err) < 0 ||
	    program_load_kinds(p, doc, "observed", KOP_ROLE_OBSERVED, err) < 0 ||
	    program_load_kinds(p, doc, "related", KOP_ROLE_RELATED, err) < 0) {
		jv_free(doc);
		return -1;
	}
	for (i = 0; i < (int)p->nkinds; i++) {
		struct kop_kind *k = &p->kinds[i];

		k->mapping = k->has_own_mapping ? &k->own_mapping : &p->mapping;
		if (k->role == KOP_ROLE_RELATED)
			continue;
		if (program_check_ignore(k, err) < 0) {
			jv_free(doc);
			return -1;
		}
		if (!k->mapping->owner_ref && !k->mapping->label_name) {
			jv_free(doc);
			return kop_error(err, "kind '%s': no mapping (ownerReference or labels) to its primary",
					 k->key);
		}
	}
	if (compile && compile_jq(p, doc, err) < 0) {
		jv_free(doc);
		return -1;
	}
	jv_free(doc);
	return 0;
}

int kop_program_load(struct kop_program *p, const char *path, int compile, char *err)
{
	char *file;
	jv docs, doc;
	char sub[KOP_ERRLEN];

	memset(p, 0, sizeof(*p));
	p->settings = jv_object();
	p->mapping.match = jv_object();
	p->primary.own_mapping.match = jv_null();
	if (!(file = find_program_file(p, path, err)))
		return -1;
	if (kop_yaml_load_file(file, &docs, err) < 0) {
		free(file);
		return -1;
	}
	if (jv_array_length(jv_copy(docs)) != 1) {
		jv_free(docs);
		kop_error(err, "unable to load program '%s': want one document", file);
		free(file);
		return -1;
	}
	doc = jv_array_get(docs, 0);
	if (load_doc(p, doc, compile, sub) < 0) {
		kop_error(err, "unable to load program '%s': %s", file, sub);
		free(file);
		return -1;
	}
	free(file);
	return 0;
}

void kop_program_release(struct kop_program *p)
{
	size_t i;

	free(p->name);
	free(p->dir);
	jv_free(p->settings);
	program_kind_release(&p->primary);
	free(p->finalizer);
	program_mapping_release(&p->mapping);
	for (i = 0; i < p->nkinds; i++)
		program_kind_release(&p->kinds[i]);
	free(p->kinds);
	for (i = 0; i < p->naggs; i++) {
		free(p->aggs[i].name);
		kop_jq_free(p->aggs[i].jq);
	}
	free(p->aggs);
	kop_jq_free(p->sync);
	kop_jq_free(p->render);
	free(p->shard_key);
	for (i = 0; i < p->nshard_parts; i++)
		free(p->shard_parts[i].text);
	free(p->shard_parts);
	memset(p, 0, sizeof(*p));
	p->settings = jv_null();
	p->mapping.match = jv_null();
}
