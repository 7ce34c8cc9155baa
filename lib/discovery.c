/*
 * Discovery (/api, /apis, /api/v1, /apis/G/V) and resource names resolved as
 * kubectl resolves them: shortNames expanded first,
 * then plural, singular or Kind, optionally qualified by group or by
 * version and group; core first, then the groups in the server's order, the
 * preferred version of each group before the others.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include "kube-priv.h"
#include "banned.h"

void kube_resource_release(struct kube_resource *r)
{
	free(r->group);
	free(r->version);
	free(r->resource);
	free(r->kind);
	free(r->api_version);
	jv_free(r->verbs);
	memset(r, 0, sizeof(*r));
	r->verbs = jv_null();
}

static char *dup_or_null(const char *s)
{
	return s ? kop_strdup(s) : NULL;
}

void kube_resource_copy(struct kube_resource *dst, const struct kube_resource *src)
{
	dst->group = dup_or_null(src->group);
	dst->version = dup_or_null(src->version);
	dst->resource = dup_or_null(src->resource);
	dst->kind = dup_or_null(src->kind);
	dst->api_version = dup_or_null(src->api_version);
	dst->namespaced = src->namespaced;
	dst->verbs = jv_copy(src->verbs);
}

/* A string member (not consumed), borrowed from a jv that the caller keeps: "" when absent. */
static jv member(jv obj, const char *key)
{
	if (jv_get_kind(obj) != JV_KIND_OBJECT)
		return jv_null();
	return jv_object_get(jv_copy(obj), jv_string(key));
}

static int member_is(jv obj, const char *key, const char *want)
{
	jv v = member(obj, key);
	int eq = jv_get_kind(v) == JV_KIND_STRING && !strcmp(jv_string_value(v), want);

	jv_free(v);
	return eq;
}

static char *lower_dup(const char *s)
{
	char *p = kop_strdup(s), *q;

	for (q = p; *q; q++)
		*q = (char)tolower((unsigned char)*q);
	return p;
}

/*
 * The search order: an array of [group, [versions…]] with core first and the
 * preferred version of every group before its others.
 */
static jv search_order(jv docs, jv groups)
{
	jv order = jv_array(), list = member(groups, "groups");
	int have_core = 0;

	if (jv_get_kind(list) == JV_KIND_ARRAY) {
		jv_array_foreach(list, i, g) {
			if (member_is(g, "name", ""))
				have_core = 1;
			jv_free(g);
		}
	}
	if (!have_core && jv_object_has(jv_copy(docs), jv_string("v1")))
		order = jv_array_append(order, JV_ARRAY(jv_string(""), JV_ARRAY(jv_string("v1"))));
	if (jv_get_kind(list) == JV_KIND_ARRAY) {
		/* Core first, whatever its place in the list. */
		int pass;

		for (pass = 0; pass < 2; pass++) {
			jv_array_foreach(list, i, g) {
				jv name = member(g, "name"), pref = jv_getpath(jv_copy(g), JV_ARRAY(jv_string("preferredVersion"),
											 jv_string("version")));
				jv vs = member(g, "versions"), out = jv_array();

				if (jv_get_kind(name) == JV_KIND_STRING && (pass == 0) == !*jv_string_value(name)) {
					if (jv_get_kind(pref) == JV_KIND_STRING)
						out = jv_array_append(out, jv_copy(pref));
					if (jv_get_kind(vs) == JV_KIND_ARRAY) {
						jv_array_foreach(vs, j, ver) {
							jv v = member(ver, "version");

							if (jv_get_kind(v) == JV_KIND_STRING &&
							    !(jv_get_kind(pref) == JV_KIND_STRING && jv_equal(jv_copy(v), jv_copy(pref))))
								out = jv_array_append(out, v);
							else
								jv_free(v);
							jv_free(ver);
						}
					}
					order = jv_array_append(order, JV_ARRAY(jv_copy(name), out));
				} else {
					jv_free(out);
				}
				jv_free(name);
				jv_free(pref);
				jv_free(vs);
				jv_free(g);
			}
		}
	}
	jv_free(list);
	return order;
}

static jv gv_doc(jv docs, const char *group, const char *version)
{
	struct kop_buf b = KOP_BUF_INIT;
	jv d;

	if (*group)
		kop_buf_addf(&b, "%s/%s", group, version);
	else
		kop_buf_adds(&b, version);
	d = jv_object_get(jv_copy(docs), jv_string(b.buf));
	kop_buf_release(&b);
	return d;
}

typedef int (*res_match_fn)(jv res, const char *want);

/* Calls fn on every top-level resource in order (group filter and version filter optional); the first match wins. */
static int search(jv docs, jv order, const char *group, const char *version, res_match_fn fn, const char *want,
		  jv *found, char **fgroup, char **fversion)
{
	int hit = 0;

	jv_array_foreach(order, i, gv) {
		jv g = jv_array_get(jv_copy(gv), 0), vs = jv_array_get(jv_copy(gv), 1);

		if (!hit && (!group || !strcmp(group, jv_string_value(g)))) {
			jv_array_foreach(vs, j, v) {
				jv doc, list;

				if (hit || (version && strcmp(version, jv_string_value(v)))) {
					jv_free(v);
					continue;
				}
				doc = gv_doc(docs, jv_string_value(g), jv_string_value(v));
				list = member(doc, "resources");
				if (jv_get_kind(list) == JV_KIND_ARRAY) {
					jv_array_foreach(list, k, res) {
						jv name = member(res, "name");
						int sub = jv_get_kind(name) != JV_KIND_STRING ||
							  strchr(jv_string_value(name), '/');

						if (!hit && !sub && fn(res, want)) {
							hit = 1;
							*found = jv_copy(res);
							*fgroup = kop_strdup(jv_string_value(g));
							*fversion = kop_strdup(jv_string_value(v));
						}
						jv_free(name);
						jv_free(res);
					}
				}
				jv_free(list);
				jv_free(doc);
				jv_free(v);
			}
		}
		jv_free(g);
		jv_free(vs);
		jv_free(gv);
	}
	return hit;
}

static int match_short(jv res, const char *want)
{
	jv sn = member(res, "shortNames");
	int hit = 0;

	if (jv_get_kind(sn) == JV_KIND_ARRAY) {
		jv_array_foreach(sn, i, s) {
			if (jv_get_kind(s) == JV_KIND_STRING && !strcmp(jv_string_value(s), want))
				hit = 1;
			jv_free(s);
		}
	}
	jv_free(sn);
	return hit;
}

/* plural, singular, or the Kind lowercased (the singular kubectl derives when singularName is empty) */
static int match_name(jv res, const char *want)
{
	jv kind;
	char *lk;
	int hit;

	if (member_is(res, "name", want) || member_is(res, "singularName", want))
		return 1;
	kind = member(res, "kind");
	if (jv_get_kind(kind) != JV_KIND_STRING) {
		jv_free(kind);
		return 0;
	}
	lk = lower_dup(jv_string_value(kind));
	hit = !strcmp(lk, want);
	free(lk);
	jv_free(kind);
	return hit;
}

static int match_kind(jv res, const char *want)
{
	return member_is(res, "kind", want);
}

static void fill(struct kube_resource *out, jv res, char *group, char *version)
{
	jv name = member(res, "name"), kind = member(res, "kind"), verbs = member(res, "verbs"),
	   ns = member(res, "namespaced");
	struct kop_buf b = KOP_BUF_INIT;

	out->group = group;
	out->version = version;
	out->resource = kop_strdup(jv_string_value(name));
	out->kind = kop_strdup(jv_get_kind(kind) == JV_KIND_STRING ? jv_string_value(kind) : "");
	if (*group)
		kop_buf_addf(&b, "%s/%s", group, version);
	else
		kop_buf_adds(&b, version);
	out->api_version = kop_buf_detach(&b, NULL);
	out->namespaced = jv_get_kind(ns) == JV_KIND_TRUE;
	out->verbs = jv_get_kind(verbs) == JV_KIND_ARRAY ? verbs : (jv_free(verbs), jv_array());
	jv_free(name);
	jv_free(kind);
	jv_free(ns);
	jv_free(res);
}

/* One attempt: resource res in group grp (NULL = any) and version ver (NULL = any). */
static int find_gvr(jv docs, jv order, const char *res, const char *grp, const char *ver, struct kube_resource *out)
{
	jv found = jv_null(), sfound = jv_null();
	char *g = NULL, *v = NULL, *sg = NULL, *sv = NULL;
	const char *name = res, *group = grp;

	/* kubectl's shortcut expander runs first: "deploy" -> deployments.apps */
	if (search(docs, order, grp, NULL, match_short, res, &sfound, &sg, &sv)) {
		jv n = member(sfound, "name");

		name = jv_string_value(n);
		group = sg;
		if (search(docs, order, group, ver, match_name, name, &found, &g, &v)) {
			jv_free(n);
			fill(out, found, g, v);
			goto done;
		}
		jv_free(n);
		name = res;
		group = grp;
	}
	if (search(docs, order, group, ver, match_name, name, &found, &g, &v)) {
		fill(out, found, g, v);
		goto done;
	}
	jv_free(sfound);
	free(sg);
	free(sv);
	return 0;
done:
	jv_free(sfound);
	free(sg);
	free(sv);
	return 1;
}

int kube_discovery_find(jv docs, jv groups, const char *name, struct kube_resource *out, char *err)
{
	char *lname = lower_dup(name), *dot, *dot2;
	jv order = search_order(docs, groups);
	int hit = 0;

	memset(out, 0, sizeof(*out));
	out->verbs = jv_null();
	dot = strchr(lname, '.');
	if (!dot) {
		hit = find_gvr(docs, order, lname, NULL, NULL, out);
	} else {
		*dot = 0;
		/* resource.version.group first, then resource.group (kubectl's ParseResourceArg). */
		dot2 = strchr(dot + 1, '.');
		if (dot2) {
			*dot2 = 0;
			hit = find_gvr(docs, order, lname, dot2 + 1, dot + 1, out);
			*dot2 = '.';
		}
		if (!hit)
			hit = find_gvr(docs, order, lname, dot + 1, NULL, out);
	}
	free(lname);
	jv_free(order);
	jv_free(docs);
	jv_free(groups);
	if (!hit)
		return kop_error(err, "the server doesn't have a resource type \"%s\"", name);
	return 0;
}

/* ---- fetching ----------------------------------------------------------------- */

static int fetch(struct kube_client *c, const char *path, jv *out, char *err)
{
	struct kube_response r;

	if (kube_request(c, "GET", path, NULL, jv_invalid(), &r)) {
		char why[KOP_ERRLEN];

		/* (no response: the server named, as every tool says it) */
		kop_error(err, "unable to get '%s': %s", path,
			  r.code ? kube_response_why(&r, why, sizeof(why)) : kube_failure_text(c, &r, why, sizeof(why)));
		kube_response_release(&r);
		return -1;
	}
	*out = r.body;
	r.body = jv_null();
	kube_response_release(&r);
	return 0;
}

static int load_discovery(struct kube_client *c, char *err)
{
	jv *docs, *groups, *kinds, api, apis, list, core_versions;
	int *have;
	char path[512];

	kube_discovery_cache(c, &docs, &groups, &kinds, &have);
	if (fetch(c, "/api", &api, err))
		return -1;
	if (fetch(c, "/apis", &apis, err)) {
		jv_free(api);
		return -1;
	}
	jv_free(*docs);
	jv_free(*groups);
	jv_free(*kinds);
	*docs = jv_object();
	*kinds = jv_object();
	/* Core as a group named "", first. */
	core_versions = jv_array();
	list = member(api, "versions");
	if (jv_get_kind(list) == JV_KIND_ARRAY) {
		jv_array_foreach(list, i, v) {
			if (jv_get_kind(v) == JV_KIND_STRING)
				core_versions = jv_array_append(core_versions,
							       JV_OBJECT(jv_string("groupVersion"), jv_copy(v),
									 jv_string("version"), jv_copy(v)));
			jv_free(v);
		}
	}
	jv_free(list);
	list = member(apis, "groups");
	if (jv_get_kind(list) != JV_KIND_ARRAY) {
		jv_free(list);
		list = jv_array();
	}
	{
		jv core = JV_OBJECT(jv_string("name"), jv_string(""), jv_string("versions"), jv_copy(core_versions));
		jv all = JV_ARRAY(core);

		if (jv_array_length(jv_copy(core_versions)) > 0)
			core = jv_object_set(jv_array_get(jv_copy(all), 0), jv_string("preferredVersion"),
					     jv_array_get(jv_copy(core_versions), 0));
		else
			core = jv_array_get(jv_copy(all), 0);
		jv_free(all);
		*groups = JV_OBJECT(jv_string("kind"), jv_string("APIGroupList"), jv_string("groups"),
				    jv_array_concat(JV_ARRAY(core), list));
	}
	jv_free(core_versions);
	jv_free(api);
	jv_free(apis);
	/* Every version of every group: "resource.version.group" may name a non-preferred one. */
	list = member(*groups, "groups");
	jv_array_foreach(list, i, g) {
		jv name = member(g, "name"), vs = member(g, "versions");

		if (jv_get_kind(vs) == JV_KIND_ARRAY && jv_get_kind(name) == JV_KIND_STRING) {
			jv_array_foreach(vs, j, v) {
				jv gv = member(v, "groupVersion");
				jv doc;

				if (jv_get_kind(gv) == JV_KIND_STRING) {
					snprintf(path, sizeof(path), "%s/%s", *jv_string_value(name) ? "/apis" : "/api",
						 jv_string_value(gv));
					/* One group that fails (an aggregated API down) does not hide the others. */
					if (!fetch(c, path, &doc, NULL))
						*docs = jv_object_set(*docs, jv_copy(gv), doc);
				}
				jv_free(gv);
				jv_free(v);
			}
		}
		jv_free(name);
		jv_free(vs);
		jv_free(g);
	}
	jv_free(list);
	*have = 1;
	return 0;
}

void kube_discovery_invalidate(struct kube_client *c)
{
	jv *docs, *groups, *kinds;
	int *have;

	kube_discovery_cache(c, &docs, &groups, &kinds, &have);
	*have = 0;
}

int kube_resolve(struct kube_client *c, const char *name, struct kube_resource *out, char *err)
{
	jv *docs, *groups, *kinds;
	int *have, fresh = 0;

	kube_discovery_cache(c, &docs, &groups, &kinds, &have);
	if (!*have) {
		if (load_discovery(c, err))
			return -1;
		fresh = 1;
	}
	if (!kube_discovery_find(jv_copy(*docs), jv_copy(*groups), name, out, err))
		return 0;
	if (fresh)
		return -1;
	/* An unknown name: maybe a CRD was just created. Refresh once. */
	if (load_discovery(c, err))
		return -1;
	return kube_discovery_find(jv_copy(*docs), jv_copy(*groups), name, out, err);
}

/* The resource of kind in docs' document for api_version (not a subresource): its APIResource, or jv_invalid(). */
static jv find_gvk(jv docs, const char *api_version, const char *kind)
{
	jv doc = jv_object_get(jv_copy(docs), jv_string(api_version)), list = member(doc, "resources");
	jv hit = jv_invalid();

	if (jv_get_kind(list) == JV_KIND_ARRAY) {
		int i, n = jv_array_length(jv_copy(list));

		for (i = 0; i < n && !jv_is_valid(hit); i++) {
			jv res = jv_array_get(jv_copy(list), i);

			if (match_kind(res, kind)) {
				jv name = member(res, "name");

				if (jv_get_kind(name) == JV_KIND_STRING && !strchr(jv_string_value(name), '/'))
					hit = jv_copy(res);
				jv_free(name);
			}
			jv_free(res);
		}
	}
	jv_free(list);
	jv_free(doc);
	return hit;
}

/* out filled from res (consumed), found for api_version. */
static void fill_gvk(struct kube_resource *out, jv res, const char *api_version)
{
	const char *slash = strchr(api_version, '/');

	fill(out, res, slash ? kop_strndup(api_version, (size_t)(slash - api_version)) : kop_strdup(""),
	     kop_strdup(slash ? slash + 1 : api_version));
}

int kube_resolve_gvk(struct kube_client *c, const char *api_version, const char *kind, struct kube_resource *out,
		     struct kube_response *fail, char *err)
{
	jv *docs, *groups, *kinds, doc, key, res;
	int *have;
	char path[512];
	struct kube_response r;
	struct kop_buf k = KOP_BUF_INIT;

	memset(out, 0, sizeof(*out));
	out->verbs = jv_null();
	kube_discovery_cache(c, &docs, &groups, &kinds, &have);
	/* (found before in the same docs: each apply of a kind asks for it again) */
	kop_buf_adds(&k, api_version);
	kop_buf_add(&k, "", 1);
	kop_buf_adds(&k, kind);
	key = jv_string_sized(k.buf, (int)k.len);
	kop_buf_release(&k);
	res = jv_object_get(jv_copy(*kinds), jv_copy(key));
	if (jv_is_valid(res)) {
		jv_free(key);
		fill_gvk(out, res, api_version);
		return 0;
	}
	if (jv_is_valid(res = find_gvk(*docs, api_version, kind))) {
		*kinds = jv_object_set(*kinds, key, jv_copy(res));
		fill_gvk(out, res, api_version);
		return 0;
	}
	jv_free(key);
	/* Not known (yet): the group version's own document, as a RESTMapper
	 * asks (a CRD just created; no other group's trouble matters here). */
	snprintf(path, sizeof(path), "%s/%s", strchr(api_version, '/') ? "/apis" : "/api", api_version);
	if (kube_request(c, "GET", path, NULL, jv_invalid(), &r)) {
		if (r.code != 404) {
			char why[KOP_ERRLEN];

			kop_error(err, "unable to get '%s': %s", path,
				  r.code ? kube_response_why(&r, why, sizeof(why)) :
					   kube_failure_text(c, &r, why, sizeof(why)));
			if (fail)
				*fail = r;
			else
				kube_response_release(&r);
			return -2;
		}
		kube_response_release(&r);
	} else {
		doc = r.body;
		r.body = jv_null();
		kube_response_release(&r);
		if (jv_get_kind(doc) == JV_KIND_OBJECT) {
			*docs = jv_object_set(*docs, jv_string(api_version), doc);
			jv_free(*kinds);
			*kinds = jv_object();	/* (what it held was found in the document replaced) */
		} else {
			jv_free(doc);
		}
		if (jv_is_valid(res = find_gvk(*docs, api_version, kind))) {
			fill_gvk(out, res, api_version);
			return 0;
		}
	}
	return kop_error(err, "no matches for kind \"%s\" in version \"%s\"", kind, api_version);
}
