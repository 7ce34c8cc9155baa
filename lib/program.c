/* Reconcile programs: program.yml loaded, settings, templates, mapping (see program.h). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/sha.h>
#include "program.h"
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
static jv get(jv o, const char *key)
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
static int opt_str(jv o, const char *key, const char *where, char **out, char *err)
{
	jv v = get(o, key);
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
static int known_keys(jv o, const char *where, const char *const *keys, char *err)
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

static int req_str(jv o, const char *key, const char *where, char **out, char *err)
{
	if (opt_str(o, key, where, out, err) < 0)
		return -1;
	if (!*out || !**out) {
		free(*out);
		*out = NULL;
		return kop_error(err, "'%s.%s' is required", where, key);
	}
	return 0;
}

/* ---- settings and templates ---------------------------------------------- */

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

static int load_setting(jv s, size_t i, jv *settings, char *err)
{
	const char *name = kop_json_cstr(s, "name"), *env = kop_json_cstr(s, "env"), *type = kop_json_cstr(s, "type");
	const char *val = NULL;
	jv v, req = get(s, "required");
	int required = jv_get_kind(req) == JV_KIND_TRUE;

	jv_free(req);
	{
		static const char *const keys[] = { "name", "env", "type", "default", "required", "minimum", NULL };
		char where[48];

		snprintf(where, sizeof(where), "settings[%zu]", i);
		if (known_keys(s, where, keys, err) < 0)
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
				jv min = get(s, "minimum");
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
		v = get(s, "default");
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
static jv expand(jv settings, jv v, char *err)
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
			jv e = expand(settings, jv_array_get(jv_copy(v), i), err);

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
			e = expand(settings, jv_object_get(jv_copy(v), jv_copy(k)), err);

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

/* ---- kinds and mappings ---------------------------------------------------- */

static void mapping_release(struct kop_mapping *m)
{
	free(m->label_name);
	free(m->namespace);
	free(m->namespace_label);
	jv_free(m->match);
	memset(m, 0, sizeof(*m));
	m->match = jv_null();
}

static int load_mapping(jv o, const char *where, struct kop_mapping *m, char *err)
{
	jv owner = get(o, "ownerReference"), labels = get(o, "labels");
	int rc = 0;

	static const char *const mapping_keys[] = { "ownerReference", "labels", NULL };
	static const char *const labels_keys[] = { "name", "namespace", "namespaceLabel", "match", NULL };
	char lwhere[96];

	memset(m, 0, sizeof(*m));
	m->match = jv_object();
	m->owner_ref = jv_get_kind(owner) == JV_KIND_TRUE;
	snprintf(lwhere, sizeof(lwhere), "%s.labels", where);
	if (known_keys(o, where, mapping_keys, err) < 0) {
		rc = -1;
	} else if (jv_get_kind(labels) == JV_KIND_OBJECT) {
		jv match = get(labels, "match");

		if (known_keys(labels, lwhere, labels_keys, err) < 0 ||
		    req_str(labels, "name", lwhere, &m->label_name, err) < 0 ||
		    opt_str(labels, "namespace", lwhere, &m->namespace, err) < 0 ||
		    opt_str(labels, "namespaceLabel", lwhere, &m->namespace_label, err) < 0)
			rc = -1;
		if (!rc && jv_get_kind(match) == JV_KIND_OBJECT) {
			jv_object_foreach(match, k, v) {
				if (jv_get_kind(v) != JV_KIND_STRING && !rc)
					rc = kop_error(err, "'%s.labels.match.%s' must be a string", where,
						       jv_string_value(k));
				jv_free(k);
				jv_free(v);
			}
			if (!rc) {
				jv_free(m->match);
				m->match = jv_copy(match);
			}
		} else if (!rc && jv_get_kind(match) != JV_KIND_NULL) {
			rc = kop_error(err, "'%s.labels.match' must be an object", where);
		}
		jv_free(match);
	} else if (jv_get_kind(labels) != JV_KIND_NULL) {
		rc = kop_error(err, "'%s.labels' must be an object", where);
	}
	jv_free(owner);
	jv_free(labels);
	return rc;
}

static void kind_release(struct kop_kind *k)
{
	free(k->resource);
	free(k->api_version);
	free(k->kind);
	free(k->group);
	free(k->key);
	free(k->namespace);
	free(k->name);
	free(k->label_selector);
	free(k->project_text);
	kop_jq_free(k->project);
	jv_free(k->keep);
	mapping_release(&k->own_mapping);
}

/*
 * A kind's `project`: jq text (k->project_text), or a list of the fields
 * kept (k->keep), each "spec.replicas" or a list of keys (a key with a dot,
 * as label names have: [metadata, labels, app.kubernetes.io/name]).
 */
static int load_project(jv o, const char *where, struct kop_kind *k, char *err)
{
	jv v = get(o, "project"), keep = jv_array();
	int i, n;

	if (jv_get_kind(v) != JV_KIND_ARRAY) {
		jv_free(v);
		jv_free(keep);
		if (opt_str(o, "project", where, &k->project_text, err) < 0)
			return kop_error(err, "'%s.project' must be jq text or a list of fields", where);
		return 0;
	}
	n = jv_array_length(jv_copy(v));
	if (!n) {
		jv_free(v);
		jv_free(keep);
		return kop_error(err, "'%s.project' lists no field (leave it out to keep objects whole)", where);
	}
	for (i = 0; i < n; i++) {
		jv f = jv_array_get(jv_copy(v), i), path = jv_array();
		int ok = 1, j, m;

		if (jv_get_kind(f) == JV_KIND_STRING) {
			const char *s = jv_string_value(f), *dot;

			for (;; s = dot + 1) {
				dot = strchr(s, '.');
				if (dot == s || !*s) {
					ok = 0;
					break;
				}
				path = jv_array_append(path, jv_string_sized(s, (int)(dot ? (size_t)(dot - s) : strlen(s))));
				if (!dot)
					break;
			}
		} else if (jv_get_kind(f) == JV_KIND_ARRAY && (m = jv_array_length(jv_copy(f))) > 0) {
			for (j = 0; j < m && ok; j++) {
				jv key = jv_array_get(jv_copy(f), j);

				ok = jv_get_kind(key) == JV_KIND_STRING && jv_string_length_bytes(jv_copy(key)) > 0;
				path = jv_array_append(path, key);
			}
		} else {
			ok = 0;
		}
		jv_free(f);
		if (!ok) {
			jv_free(path);
			jv_free(keep);
			jv_free(v);
			return kop_error(err, "'%s.project[%d]' must be a field such as spec.replicas, or a list of "
					 "keys such as [metadata, labels, app.kubernetes.io/name]", where, i);
		}
		keep = jv_array_append(keep, path);
	}
	jv_free(v);
	jv_free(k->keep);
	k->keep = keep;
	return 0;
}

static int load_kind(jv o, const char *where, enum kop_role role, const struct kop_mapping *dflt,
		     struct kop_kind *k, char *err)
{
	jv m;
	int rc;

	memset(k, 0, sizeof(*k));
	k->own_mapping.match = jv_null();
	k->keep = jv_null();
	k->role = role;
	k->mapping = dflt;
	if (jv_get_kind(o) != JV_KIND_OBJECT)
		return kop_error(err, "'%s' must be an object", where);
	{
		static const char *const kind_keys[] = { "resource", "apiVersion", "kind", "namespace", "name",
							 "labelSelector", "project", "mapping", NULL };
		static const char *const primary_keys[] = { "resource", "apiVersion", "kind", "namespace", "name",
							    "labelSelector", "project", "mapping", "finalizer", NULL };

		if (known_keys(o, where, role == KOP_ROLE_PRIMARY ? primary_keys : kind_keys, err) < 0)
			return -1;
	}
	if (req_str(o, "resource", where, &k->resource, err) < 0 ||
	    req_str(o, "apiVersion", where, &k->api_version, err) < 0 ||
	    req_str(o, "kind", where, &k->kind, err) < 0 || opt_str(o, "namespace", where, &k->namespace, err) < 0 ||
	    opt_str(o, "name", where, &k->name, err) < 0 ||
	    opt_str(o, "labelSelector", where, &k->label_selector, err) < 0 ||
	    load_project(o, where, k, err) < 0)
		return -1;
	if (k->namespace && !*k->namespace) {
		free(k->namespace);
		k->namespace = NULL;
	}
	k->group = kop_api_group(k->api_version);
	k->key = kop_strdup("");
	{
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "%s.%s", k->kind, k->api_version);
		free(k->key);
		k->key = kop_buf_detach(&b, NULL);
	}
	m = get(o, "mapping");
	rc = 0;
	if (jv_get_kind(m) == JV_KIND_OBJECT) {
		char mwhere[96];

		snprintf(mwhere, sizeof(mwhere), "%s.mapping", where);
		jv_free(k->own_mapping.match);
		rc = load_mapping(m, mwhere, &k->own_mapping, err);
		k->has_own_mapping = 1;	/* k->mapping is set once p->kinds stops moving */
	} else if (jv_get_kind(m) != JV_KIND_NULL) {
		rc = kop_error(err, "'%s.mapping' must be an object", where);
	}
	jv_free(m);
	return rc;
}

static int load_kinds(struct kop_program *p, jv doc, const char *section, enum kop_role role, char *err)
{
	jv list = get(doc, section);
	int i, n;

	if (jv_get_kind(list) == JV_KIND_NULL) {
		jv_free(list);
		return 0;
	}
	if (jv_get_kind(list) != JV_KIND_ARRAY) {
		jv_free(list);
		return kop_error(err, "'%s' must be a list", section);
	}
	n = jv_array_length(jv_copy(list));
	p->kinds = kop_realloc(p->kinds, (p->nkinds + (size_t)n) * sizeof(*p->kinds));
	for (i = 0; i < n; i++) {
		char where[64];
		struct kop_kind *k = &p->kinds[p->nkinds];
		jv e = jv_array_get(jv_copy(list), i);
		int rc;

		snprintf(where, sizeof(where), "%s[%d]", section, i);
		rc = load_kind(e, where, role, &p->mapping, k, err);
		jv_free(e);
		p->nkinds++;	/* released with the rest, even when half loaded */
		if (rc < 0) {
			jv_free(list);
			return -1;
		}
		if (role == KOP_ROLE_RELATED && k->has_own_mapping) {
			jv_free(list);
			return kop_error(err, "'%s.mapping': related objects belong to every primary", where);
		}
		if (role != KOP_ROLE_RELATED) {
			/* (related objects are one object each: two Secrets are two entries) */
			size_t j;

			for (j = p->nkinds - (size_t)i - 1; j < p->nkinds - 1; j++)
				if (!strcmp(p->kinds[j].kind, k->kind) && !strcmp(p->kinds[j].group, k->group)) {
					jv_free(list);
					return kop_error(err, "'%s': %s is listed twice in '%s'", where, k->kind, section);
				}
		}
	}
	jv_free(list);
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
	aggs = get(doc, "aggregates");
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
	jv settings = get(doc, "settings"), sect;
	int i, n;

	if (jv_get_kind(doc) != JV_KIND_OBJECT) {
		jv_free(settings);
		jv_free(doc);
		return kop_error(err, "not a mapping");
	}
	{
		static const char *const keys[] = { "name", "settings", "primary", "mapping", "children", "observed",
						    "related", "aggregates", "render", "sync", NULL };

		if (known_keys(doc, "", keys, err) < 0) {
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
			int rc = load_setting(s, (size_t)i, &p->settings, err);

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
			jv v = expand(p->settings, get(doc, sections[s]), err);

			if (!jv_is_valid(v)) {
				char sub[KOP_ERRLEN];

				snprintf(sub, sizeof(sub), "%s", err ? err : "");
				jv_free(doc);
				return kop_error(err, "'%s': %s", sections[s], sub);
			}
			doc = jv_object_set(doc, kop_json_key(sections[s]), v);
		}
	}

	sect = get(doc, "mapping");
	if (jv_get_kind(sect) == JV_KIND_OBJECT) {
		jv_free(p->mapping.match);
		if (load_mapping(sect, "mapping", &p->mapping, err) < 0) {
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

	sect = get(doc, "primary");
	if (jv_get_kind(sect) != JV_KIND_OBJECT) {
		jv_free(sect);
		jv_free(doc);
		return kop_error(err, "'primary' is required");
	}
	kind_release(&p->primary);
	if (load_kind(sect, "primary", KOP_ROLE_PRIMARY, &p->mapping, &p->primary, err) < 0 ||
	    opt_str(sect, "finalizer", "primary", &p->finalizer, err) < 0) {
		jv_free(sect);
		jv_free(doc);
		return -1;
	}
	jv_free(sect);
	if (load_kinds(p, doc, "children", KOP_ROLE_CHILD, err) < 0 ||
	    load_kinds(p, doc, "observed", KOP_ROLE_OBSERVED, err) < 0 ||
	    load_kinds(p, doc, "related", KOP_ROLE_RELATED, err) < 0) {
		jv_free(doc);
		return -1;
	}
	for (i = 0; i < (int)p->nkinds; i++) {
		struct kop_kind *k = &p->kinds[i];

		k->mapping = k->has_own_mapping ? &k->own_mapping : &p->mapping;
		if (k->role == KOP_ROLE_RELATED)
			continue;
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
	kind_release(&p->primary);
	free(p->finalizer);
	mapping_release(&p->mapping);
	for (i = 0; i < p->nkinds; i++)
		kind_release(&p->kinds[i]);
	free(p->kinds);
	for (i = 0; i < p->naggs; i++) {
		free(p->aggs[i].name);
		kop_jq_free(p->aggs[i].jq);
	}
	free(p->aggs);
	kop_jq_free(p->sync);
	kop_jq_free(p->render);
	memset(p, 0, sizeof(*p));
	p->settings = jv_null();
	p->mapping.match = jv_null();
}

/* ---- queries --------------------------------------------------------------- */

static int kind_matches(const struct kop_kind *k, const char *group, const char *kind)
{
	return !strcmp(k->kind, kind) && !strcmp(k->group, group);
}

const struct kop_kind *kop_program_find_kind(const struct kop_program *p, const char *api_version,
					     const char *kind, const char *ns, const char *name)
{
	char *group = kop_api_group(api_version);
	const struct kop_kind *found = NULL;
	size_t i;
	int pass;

	if (!ns)
		ns = "";
	if (kind_matches(&p->primary, group, kind)) {
		found = &p->primary;
		goto out;
	}
	/* Related objects first: they are the specific ones (a Secret can be both). */
	for (pass = 0; pass < 2 && !found; pass++) {
		for (i = 0; i < p->nkinds && !found; i++) {
			const struct kop_kind *k = &p->kinds[i];

			if ((k->role == KOP_ROLE_RELATED) != (pass == 0) || !kind_matches(k, group, kind))
				continue;
			if (k->namespace && strcmp(k->namespace, ns))
				continue;
			if (k->name && strcmp(k->name, name))
				continue;
			found = k;
		}
	}
out:
	free(group);
	return found;
}

/* "k1=v1,k2=v2" of a match object, keys sorted (kubectl's order). */
static char *selector_of(jv match)
{
	struct kop_buf b = KOP_BUF_INIT;

	if (jv_get_kind(match) == JV_KIND_OBJECT) {
		jv keys = jv_keys(jv_copy(match));
		int i, n = jv_array_length(jv_copy(keys));

		for (i = 0; i < n; i++) {
			jv k = jv_array_get(jv_copy(keys), i);
			jv v = jv_object_get(jv_copy(match), jv_copy(k));

			kop_buf_addf(&b, "%s%s=%s", i ? "," : "", jv_string_value(k), jv_string_value(v));
			jv_free(k);
			jv_free(v);
		}
		jv_free(keys);
	}
	return kop_buf_detach(&b, NULL);
}

static jv watch_of(const struct kop_kind *k)
{
	static const char *const roles[] = { "primary", "child", "observed", "related" };
	char *sel = k->label_selector ? kop_strdup(k->label_selector)
				      : k->role == KOP_ROLE_CHILD || k->role == KOP_ROLE_OBSERVED
					? selector_of(k->mapping->match)
					: kop_strdup("");
	struct kop_buf fs = KOP_BUF_INIT;
	jv w = jv_object();

	if (k->name)
		kop_buf_addf(&fs, "metadata.name=%s", k->name);
	w = jv_object_set(w, kop_json_key("resource"), jv_string(k->resource));
	w = jv_object_set(w, kop_json_key("namespace"), jv_string(k->namespace ? k->namespace : ""));
	w = jv_object_set(w, kop_json_key("labelSelector"), jv_string(sel));
	w = jv_object_set(w, kop_json_key("fieldSelector"), jv_string(fs.buf ? fs.buf : ""));
	w = jv_object_set(w, kop_json_key("role"), jv_string(roles[k->role]));
	free(sel);
	kop_buf_release(&fs);
	return w;
}

jv kop_program_watches(const struct kop_program *p)
{
	jv out = jv_array_append(jv_array(), watch_of(&p->primary));
	size_t i;

	for (i = 0; i < p->nkinds; i++) {
		jv w = watch_of(&p->kinds[i]);
		int j, n = jv_array_length(jv_copy(out)), dup = 0;

		/* The same watch twice (a kind both child and observed) is one watch. */
		for (j = 0; j < n && !dup; j++) {
			jv o = jv_array_get(jv_copy(out), j);

			dup = jv_equal(jv_object_delete(o, kop_json_key("role")),
				       jv_object_delete(jv_copy(w), kop_json_key("role")));
		}
		if (dup)
			jv_free(w);
		else
			out = jv_array_append(out, w);
	}
	return out;
}

/* A string at obj.metadata.<field>[.<key>] (borrowed from obj), NULL when absent. */
static const char *meta_str(jv obj, const char *field, const char *key)
{
	/* (lookups one level at a time: jv_getpath built three arrays for each
	 * of the ~200 calls of a reconcile) */
	const char *keys[] = { "metadata", field, key };
	int i, n = key ? 3 : 2;
	jv v = jv_copy(obj);
	const char *s;

	for (i = 0; i < n; i++) {
		if (jv_get_kind(v) != JV_KIND_OBJECT) {
			jv_free(v);
			return NULL;
		}
		v = jv_object_get(v, kop_json_key(keys[i]));
	}
	if (jv_get_kind(v) != JV_KIND_STRING) {
		jv_free(v);
		return NULL;
	}
	s = jv_string_value(v);
	jv_free(v);
	return s;
}

static char *primary_key(const char *ns, const char *name)
{
	struct kop_buf b = KOP_BUF_INIT;

	if (ns && *ns)
		kop_buf_addf(&b, "%s/%s", ns, name);
	else
		kop_buf_adds(&b, name);
	return kop_buf_detach(&b, NULL);
}

static int labels_match(jv obj, jv match)
{
	int ok = 1;

	if (jv_get_kind(match) != JV_KIND_OBJECT)
		return 1;
	jv_object_foreach(match, k, v) {
		const char *have = ok ? meta_str(obj, "labels", jv_string_value(k)) : NULL;

		if (!have || strcmp(have, jv_string_value(v)))
			ok = 0;
		jv_free(k);
		jv_free(v);
	}
	return ok;
}

char *kop_program_map(const struct kop_program *p, const struct kop_mapping *m, jv obj, char **owner_uid)
{
	const char *ns = meta_str(obj, "namespace", NULL);

	if (owner_uid)
		*owner_uid = NULL;
	if (m->owner_ref && ns) {
		jv refs = jv_getpath(jv_copy(obj), jv_array_append(jv_array_append(jv_array(), jv_string("metadata")),
								   jv_string("ownerReferences")));
		char *key = NULL;

		if (jv_get_kind(refs) == JV_KIND_ARRAY) {
			jv_array_foreach(refs, i, r) {
				const char *av = kop_json_cstr(r, "apiVersion"), *kind = kop_json_cstr(r, "kind");
				const char *name = kop_json_cstr(r, "name"), *uid = kop_json_cstr(r, "uid");
				jv c = get(r, "controller");

				if (!key && jv_get_kind(c) == JV_KIND_TRUE && av && kind && name &&
				    !strcmp(kind, p->primary.kind)) {
					char *g = kop_api_group(av);

					if (!strcmp(g, p->primary.group)) {
						key = primary_key(ns, name);
						if (owner_uid && uid)
							*owner_uid = kop_strdup(uid);
					}
					free(g);
				}
				jv_free(c);
				jv_free(r);
			}
		}
		jv_free(refs);
		if (key)
			return key;
	}
	if (m->label_name) {
		const char *name = meta_str(obj, "labels", m->label_name);
		const char *pns = m->namespace ? m->namespace
				: m->namespace_label ? meta_str(obj, "labels", m->namespace_label)
				: ns;

		if (!name || !*name || (m->namespace_label && !pns) || !labels_match(obj, m->match))
			return NULL;
		return primary_key(pns, name);
	}
	return NULL;
}

/* v (consumed) with value (consumed) at path[from..] (keys), objects made on the way. */
static jv keep_set(jv v, jv path, int from, int n, jv value)
{
	jv key = jv_array_get(jv_copy(path), from);

	if (from == n - 1)
		return jv_object_set(v, key, value);
	{
		jv sub = jv_object_has(jv_copy(v), jv_copy(key)) ? jv_object_get(jv_copy(v), jv_copy(key)) : jv_object();

		return jv_object_set(v, key, keep_set(sub, path, from + 1, n, value));
	}
}

jv kop_program_keep(const struct kop_kind *k, jv obj)
{
	jv out = jv_object();

	jv_array_foreach(k->keep, i, path) {
		int n = jv_array_length(jv_copy(path)), j;
		jv v = jv_copy(obj);

		for (j = 0; j < n && jv_get_kind(v) == JV_KIND_OBJECT; j++) {
			jv key = jv_array_get(jv_copy(path), j);

			v = jv_object_has(jv_copy(v), jv_copy(key)) ? jv_object_get(v, key) : (jv_free(v), jv_free(key), jv_null());
		}
		if (j == n && jv_get_kind(v) != JV_KIND_NULL)
			out = keep_set(out, path, 0, n, v);
		else
			jv_free(v);
		jv_free(path);
	}
	jv_free(obj);
	return out;
}

jv kop_program_stamp(const struct kop_program *p, const struct kop_mapping *m, jv child, jv primary)
{
	const char *pname = meta_str(primary, "name", NULL), *pns = meta_str(primary, "namespace", NULL);
	jv meta, labels;

	(void)p;
	if (jv_get_kind(child) != JV_KIND_OBJECT || !pname)
		return child;
	meta = jv_object_get(jv_copy(child), kop_json_key("metadata"));
	if (jv_get_kind(meta) != JV_KIND_OBJECT) {
		jv_free(meta);
		return child;
	}
	if (m->label_name) {
		labels = jv_object_get(jv_copy(meta), kop_json_key("labels"));
		if (jv_get_kind(labels) != JV_KIND_OBJECT) {
			jv_free(labels);
			labels = jv_object();
		}
		if (jv_get_kind(m->match) == JV_KIND_OBJECT)
			labels = jv_object_merge(labels, jv_copy(m->match));
		labels = jv_object_set(labels, kop_json_key(m->label_name), jv_string(pname));
		if (m->namespace_label && pns)
			labels = jv_object_set(labels, kop_json_key(m->namespace_label), jv_string(pns));
		meta = jv_object_set(meta, kop_json_key("labels"), labels);
	}
	if (m->owner_ref && pns) {
		const char *cns = kop_json_cstr(meta, "namespace");
		const char *uid = meta_str(primary, "uid", NULL);
		jv refs = jv_object_get(jv_copy(meta), kop_json_key("ownerReferences"));
		int has = 0;

		if (jv_get_kind(refs) == JV_KIND_ARRAY) {
			jv_array_foreach(refs, i, r) {
				jv c = get(r, "controller");

				if (jv_get_kind(c) == JV_KIND_TRUE)
					has = 1;
				jv_free(c);
				jv_free(r);
			}
		} else {
			jv_free(refs);
			refs = jv_array();
		}
		if (!has && cns && !strcmp(cns, pns) && uid) {
			jv r = jv_object();

			r = jv_object_set(r, kop_json_key("apiVersion"), jv_string(p->primary.api_version));
			r = jv_object_set(r, kop_json_key("kind"), jv_string(p->primary.kind));
			r = jv_object_set(r, kop_json_key("name"), jv_string(pname));
			r = jv_object_set(r, kop_json_key("uid"), jv_string(uid));
			r = jv_object_set(r, kop_json_key("controller"), jv_true());
			r = jv_object_set(r, kop_json_key("blockOwnerDeletion"), jv_true());
			meta = jv_object_set(meta, kop_json_key("ownerReferences"), jv_array_append(refs, r));
		} else {
			jv_free(refs);
		}
	}
	return jv_object_set(child, kop_json_key("metadata"), meta);
}

/* null, false, 0, "", {} or []: what Go's omitempty leaves out of a stored object. */
static int is_zero(jv v)
{
	switch (jv_get_kind(v)) {
	case JV_KIND_NULL:
	case JV_KIND_FALSE:
		return 1;
	case JV_KIND_NUMBER:
		return jv_number_value(v) == 0;
	case JV_KIND_STRING:
		return jv_string_length_bytes(jv_copy(v)) == 0;
	case JV_KIND_ARRAY:
		return jv_array_length(jv_copy(v)) == 0;
	case JV_KIND_OBJECT:
		return jv_object_length(jv_copy(v)) == 0;
	default:
		return 0;
	}
}

static int subset(jv desired, jv live, int fp)
{
	int dk = jv_get_kind(desired), lk = jv_get_kind(live);

	if (lk == JV_KIND_INVALID || (lk == JV_KIND_NULL && dk != JV_KIND_NULL))
		return is_zero(desired);
	if (dk != lk)
		return 0;
	if (dk == JV_KIND_OBJECT) {
		int ok = 1;

		jv_object_foreach(desired, k, v) {
			if (ok) {
				/* (jv_invalid() when live lacks k: one look-up) */
				jv l = jv_object_get(jv_copy(live), jv_copy(k));

				ok = subset(v, l, fp);
				jv_free(l);
			}
			jv_free(k);
			jv_free(v);
		}
		return ok;
	}
	if (dk == JV_KIND_ARRAY) {
		int i, n = jv_array_length(jv_copy(desired));

		if (n != jv_array_length(jv_copy(live)))
			return 0;
		for (i = 0; i < n; i++) {
			jv d = jv_array_get(jv_copy(desired), i), l = jv_array_get(jv_copy(live), i);
			int ok = subset(d, l, fp);

			jv_free(d);
			jv_free(l);
			if (!ok)
				return 0;
		}
		return 1;
	}
	if (fp && dk == JV_KIND_STRING)
		return kop_json_fp_equal(desired, live);
	return jv_equal(jv_copy(desired), jv_copy(live));
}

int kop_json_subset(jv desired, jv live)
{
	return subset(desired, live, 0);
}

int kop_json_subset_fp(jv desired, jv live)
{
	return subset(desired, live, 1);
}

void kop_program_applied_digest(const unsigned char objdig[KOP_JSON_DIGEST_LEN], const char *puid,
				unsigned char d[KOP_JSON_DIGEST_LEN])
{
	unsigned char both[2 * KOP_JSON_DIGEST_LEN];

	memcpy(both, objdig, KOP_JSON_DIGEST_LEN);
	SHA256((const unsigned char *)puid, strlen(puid), both + KOP_JSON_DIGEST_LEN);
	SHA256(both, sizeof(both), d);
}

jv kop_program_stamp_applied(jv child, const unsigned char d[KOP_JSON_DIGEST_LEN])
{
	char hex[33];
	jv meta, ann;

	if (jv_get_kind(child) != JV_KIND_OBJECT)
		return child;
	meta = jv_object_get(jv_copy(child), kop_json_key("metadata"));
	if (jv_get_kind(meta) != JV_KIND_OBJECT) {
		jv_free(meta);
		return child;
	}
	kop_hex(d, 16, hex);
	ann = jv_object_get(jv_copy(meta), kop_json_key("annotations"));
	if (jv_get_kind(ann) != JV_KIND_OBJECT) {
		jv_free(ann);
		ann = jv_object();
	}
	ann = jv_object_set(ann, kop_json_key(KOP_APPLIED_ANNOTATION), jv_string(hex));
	meta = jv_object_set(meta, kop_json_key("annotations"), ann);
	return jv_object_set(child, kop_json_key("metadata"), meta);
}

void kop_program_object_digest(jv child, unsigned char objdig[KOP_JSON_DIGEST_LEN])
{
	jv ann = jv_getpath(jv_copy(child), JV_ARRAY(jv_string("metadata"), jv_string("annotations")));

	if (jv_get_kind(ann) == JV_KIND_OBJECT && jv_object_has(jv_copy(ann), kop_json_key(KOP_APPLIED_ANNOTATION))) {
		jv bare = jv_delpaths(jv_copy(child), JV_ARRAY(JV_ARRAY(jv_string("metadata"), jv_string("annotations"),
								       jv_string(KOP_APPLIED_ANNOTATION))));

		kop_json_digest(bare, objdig);
		jv_free(bare);
	} else {
		kop_json_digest(child, objdig);
	}
	jv_free(ann);
}
