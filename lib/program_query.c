/*
 * What the tools ask a loaded program: the kind an object belongs to, the watches
 * kwatch opens, the primary an object maps to, the fields kept, the labels and
 * owner reference stamped on a child, and the applied digest that tells a child
 * in sync. Loading the program is program.c's.
 */
#include <stdlib.h>
#include <string.h>
#include "program-priv.h"
#include "jsonl.h"
#include "banned.h"

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
			/* ("~": one watch per namespace of the Namespace kind; any namespace) */
			if (k->namespace && strcmp(k->namespace, "~") && strcmp(k->namespace, ns))
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

/*
 * The fields kwatch may keep of k's objects ("" for whole ones): k's
 * `project` list, when every entry of the program of the same kind keeps
 * the same list (ireconcile projects each object by the entry it finds for
 * it), and none is a child (compared whole).
 */
static char *keep_of(const struct kop_program *p, const struct kop_kind *k)
{
	struct kop_buf b = KOP_BUF_INIT;
	size_t i;

	if (jv_get_kind(k->keep) != JV_KIND_ARRAY)
		return kop_strdup("");
	for (i = 0; i <= p->nkinds; i++) {
		const struct kop_kind *e = i < p->nkinds ? &p->kinds[i] : &p->primary;

		if (strcmp(e->group, k->group) || strcmp(e->kind, k->kind))
			continue;	/* (an object matches an entry by kind and group) */
		if (e->role == KOP_ROLE_CHILD || !jv_equal(jv_copy(e->keep), jv_copy(k->keep)))
			return kop_strdup("");
	}
	kop_fields_format(k->keep, &b);
	return kop_buf_detach(&b, NULL);
}

/* By the program's word: its namespaced children and observed objects live in
 * the namespace its shard key names; a kind held to one namespace does not,
 * whatever its objects' primaries. */
int kop_program_kind_sharded(const struct kop_program *p, const struct kop_kind *k)
{
	return p->shard_key && (k->role == KOP_ROLE_CHILD || k->role == KOP_ROLE_OBSERVED) && !k->cluster_scoped &&
	       (!k->namespace || !strcmp(k->namespace, "~"));
}

static jv watch_of(const struct kop_program *p, const struct kop_kind *k)
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
	{
		char *keep = keep_of(p, k);

		if (*keep)
			w = jv_object_set(w, kop_json_key("keep"), jv_string(keep));
		free(keep);
	}
	if (kop_program_kind_sharded(p, k))
		w = jv_object_set(w, kop_json_key("shard"), jv_string("namespace"));
	free(sel);
	kop_buf_release(&fs);
	return w;
}

jv kop_program_watches(const struct kop_program *p)
{
	jv out = jv_array_append(jv_array(), watch_of(p, &p->primary));
	size_t i;

	for (i = 0; i < p->nkinds; i++) {
		jv w = watch_of(p, &p->kinds[i]);
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

char *kop_program_shard_key(const struct kop_program *p, const char *ns, const char *name)
{
	struct kop_buf b = KOP_BUF_INIT;
	size_t i;

	if (!p->shard_key)
		return NULL;
	for (i = 0; i < p->nshard_parts; i++) {
		const struct kop_shard_part *sp = &p->shard_parts[i];

		kop_buf_adds(&b, sp->what == KOP_SHARD_PART_TEXT ? sp->text
				 : sp->what == KOP_SHARD_PART_NAME ? name : ns ? ns : "");
	}
	return kop_buf_detach(&b, NULL);
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
				jv c = program_get(r, "controller");

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

jv kop_program_keep(const struct kop_kind *k, jv obj)
{
	return kop_json_keep(obj, k->keep);
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
				jv c = program_get(r, "controller");

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
	kop_sha256(puid, strlen(puid), both + KOP_JSON_DIGEST_LEN);
	kop_sha256(both, sizeof(both), d);
}

void kop_program_applied_hex(const unsigned char d[KOP_JSON_DIGEST_LEN], char hex[KOP_APPLIED_HEX_LEN + 1])
{
	kop_hex(d, KOP_APPLIED_HEX_LEN / 2, hex);
}

jv kop_program_stamp_applied(jv child, const unsigned char d[KOP_JSON_DIGEST_LEN])
{
	char hex[KOP_APPLIED_HEX_LEN + 1];
	jv meta, ann;

	if (jv_get_kind(child) != JV_KIND_OBJECT)
		return child;
	meta = jv_object_get(jv_copy(child), kop_json_key("metadata"));
	if (jv_get_kind(meta) != JV_KIND_OBJECT) {
		jv_free(meta);
		return child;
	}
	kop_program_applied_hex(d, hex);
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
