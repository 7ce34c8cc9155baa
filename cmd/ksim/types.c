/*
 * The type registry (built-in kinds and CRD-served kinds), discovery
 * documents (legacy JSON, as recordings/discovery/), the OpenAPI v3 documents
 * kubectl's fieldValidation check reads (guides/kube-api.md §5), and Table
 * output for `kubectl get`.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/sha.h>
#include "ksim.h"
#include "banned.h"

#define NS KT_NAMESPACED
#define ST KT_STATUS
#define GEN KT_GENERATION

static const struct builtin {
	const char *group, *version, *resource, *kind, *singular, *shorts, *categories;
	unsigned flags;
} builtins[] = {
	{ "", "v1", "configmaps", "ConfigMap", "configmap", "cm", "", NS },
	{ "", "v1", "events", "Event", "event", "ev", "", NS },
	{ "", "v1", "namespaces", "Namespace", "namespace", "ns", "", ST | KT_NO_DELCOL },
	{ "", "v1", "nodes", "Node", "node", "no", "", ST },
	{ "", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", "persistentvolumeclaim", "pvc", "", NS | ST },
	{ "", "v1", "pods", "Pod", "pod", "po", "all", NS | ST | KT_RETURN_DELETED },
	{ "", "v1", "secrets", "Secret", "secret", "", "", NS },
	{ "", "v1", "serviceaccounts", "ServiceAccount", "serviceaccount", "sa", "", NS | KT_RETURN_DELETED },
	{ "", "v1", "services", "Service", "service", "svc", "all", NS | ST },
	{ "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
	  "customresourcedefinition", "crd,crds", "api-extensions", ST | GEN },
	{ "apps", "v1", "deployments", "Deployment", "deployment", "deploy", "all", NS | ST | GEN | KT_SCALE },
	{ "apps", "v1", "replicasets", "ReplicaSet", "replicaset", "rs", "all", NS | ST | GEN | KT_SCALE },
	{ "apps", "v1", "statefulsets", "StatefulSet", "statefulset", "sts", "all", NS | ST | GEN | KT_SCALE },
	{ "coordination.k8s.io", "v1", "leases", "Lease", "lease", "", "", NS | KT_NEEDS_RV | KT_CREATE_ON_UPDATE },
	{ "events.k8s.io", "v1", "events", "Event", "event", "ev", "", NS },
	{ "networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", "networkpolicy", "netpol", "", NS | GEN },
	{ "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", "clusterrolebinding", "", "",
	  0 },
	{ "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", "clusterrole", "", "", 0 },
	{ "rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", "rolebinding", "", "", NS },
	{ "rbac.authorization.k8s.io", "v1", "roles", "Role", "role", "", "", NS },
};

static struct ksim_type *types, *types_tail;

static jv split_list(const char *s)
{
	jv a = jv_array();
	const char *p = s;

	while (*p) {
		const char *c = strchr(p, ',');
		size_t n = c ? (size_t)(c - p) : strlen(p);
		char *w = kop_strndup(p, n);

		a = jv_array_append(a, jv_string(w));
		free(w);
		p += n;
		if (*p)
			p++;
	}
	return a;
}

static char *join_gv(const char *group, const char *version)
{
	struct kop_buf b = KOP_BUF_INIT;

	if (*group)
		kop_buf_addf(&b, "%s/%s", group, version);
	else
		kop_buf_adds(&b, version);
	return kop_buf_detach(&b, NULL);
}

static char *join_gr(const char *resource, const char *group)
{
	struct kop_buf b = KOP_BUF_INIT;

	if (*group && strcmp(group, "events.k8s.io"))
		kop_buf_addf(&b, "%s.%s", resource, group);
	else
		kop_buf_adds(&b, resource);	/* events.k8s.io/v1 shares core events' storage */
	return kop_buf_detach(&b, NULL);
}

static void type_append(struct ksim_type *t)
{
	if (types_tail)
		types_tail->next = t;
	else
		types = t;
	types_tail = t;
}

void ksim_types_init(void)
{
	for (size_t i = 0; i < sizeof(builtins) / sizeof(*builtins); i++) {
		const struct builtin *b = &builtins[i];
		struct ksim_type *t = kop_calloc(1, sizeof(*t));
		struct kop_buf lk = KOP_BUF_INIT;

		t->group = kop_strdup(b->group);
		t->version = kop_strdup(b->version);
		t->api_version = join_gv(b->group, b->version);
		t->resource = kop_strdup(b->resource);
		t->kind = kop_strdup(b->kind);
		t->singular = kop_strdup(b->singular);
		kop_buf_addf(&lk, "%sList", b->kind);
		t->list_kind = kop_buf_detach(&lk, NULL);
		t->gr = join_gr(b->resource, b->group);
		t->short_names = split_list(b->shorts);
		t->categories = split_list(b->categories);
		t->flags = b->flags;
		t->served = 1;
		t->schema = t->columns = t->selectable = t->listinfo = jv_null();
		type_append(t);
	}
}

static void type_free(struct ksim_type *t)
{
	free(t->group);
	free(t->version);
	free(t->api_version);
	free(t->resource);
	free(t->kind);
	free(t->singular);
	free(t->list_kind);
	free(t->gr);
	free(t->crd);
	jv_free(t->short_names);
	jv_free(t->categories);
	jv_free(t->schema);
	jv_free(t->columns);
	jv_free(t->selectable);
	jv_free(t->listinfo);
	free(t);
}

void ksim_types_free(void)
{
	while (types) {
		struct ksim_type *t = types;

		types = t->next;
		type_free(t);
	}
	types_tail = NULL;
}

struct ksim_type *ksim_types(void)
{
	return types;
}

struct ksim_type *ksim_type_find(const char *group, const char *version, const char *resource)
{
	for (struct ksim_type *t = types; t; t = t->next)
		if (t->served && !strcmp(t->group, group) && !strcmp(t->version, version) &&
		    !strcmp(t->resource, resource))
			return t;
	return NULL;
}

struct ksim_type *ksim_type_by_kind(const char *api_version, const char *kind)
{
	for (struct ksim_type *t = types; t; t = t->next)
		if (t->served && !strcmp(t->api_version, api_version) && !strcmp(t->kind, kind))
			return t;
	return NULL;
}

static const char *jstr(jv o, const char *key, const char *def)
{
	const char *s = ksim_str(o, key);

	return s ? s : def;
}

void ksim_types_crd_changed(jv crd, int deleted)
{
	const char *name = jstr(crd, "metadata.name", "");
	const char *group = jstr(crd, "spec.group", "");
	const char *plural = jstr(crd, "spec.names.plural", "");
	const char *kind = jstr(crd, "spec.names.kind", "");
	jv versions = jv_getpath(jv_copy(crd), JV_ARRAY(jv_string("spec"), jv_string("versions")));
	jv names = jv_getpath(jv_copy(crd), JV_ARRAY(jv_string("spec"), jv_string("names")));

	/* Unserve every version first; the ones still listed come back below. */
	for (struct ksim_type *t = types; t; t = t->next)
		if (t->crd && !strcmp(t->crd, name))
			t->served = 0;
	if (!deleted && jv_get_kind(versions) == JV_KIND_ARRAY) {
		jv_array_foreach(versions, i, v) {
			const char *vname = jstr(v, "name", "");
			struct ksim_type *t = NULL;
			jv sub = jv_getpath(jv_copy(v), JV_ARRAY(jv_string("subresources"), jv_string("status")));
			jv served = jv_object_get(jv_copy(v), jv_string("served"));
			struct kop_buf b = KOP_BUF_INIT;
			const char *lk = jstr(names, "listKind", NULL), *sing = jstr(names, "singular", NULL);

			for (struct ksim_type *x = types; x; x = x->next)
				if (x->crd && !strcmp(x->crd, name) && !strcmp(x->version, vname))
					t = x;
			if (!t) {
				t = kop_calloc(1, sizeof(*t));
				t->crd = kop_strdup(name);
				t->short_names = t->categories = t->schema = t->columns = t->selectable = t->listinfo = jv_null();
				type_append(t);
			} else {
				free(t->group);
				free(t->version);
				free(t->api_version);
				free(t->resource);
				free(t->kind);
				free(t->singular);
				free(t->list_kind);
				free(t->gr);
			}
			t->group = kop_strdup(group);
			t->version = kop_strdup(vname);
			t->api_version = join_gv(group, vname);
			t->resource = kop_strdup(plural);
			t->kind = kop_strdup(kind);
			if (sing) {
				t->singular = kop_strdup(sing);
			} else {
				t->singular = kop_strdup(kind);
				for (char *p = t->singular; *p; p++)
					if (*p >= 'A' && *p <= 'Z')
						*p += 'a' - 'A';
			}
			if (lk)
				kop_buf_adds(&b, lk);
			else
				kop_buf_addf(&b, "%sList", kind);
			t->list_kind = kop_buf_detach(&b, NULL);
			t->gr = join_gr(plural, group);
			jv_free(t->short_names);
			t->short_names = jv_object_get(jv_copy(names), jv_string("shortNames"));
			if (jv_get_kind(t->short_names) != JV_KIND_ARRAY) {
				jv_free(t->short_names);
				t->short_names = jv_array();
			}
			jv_free(t->categories);
			t->categories = jv_object_get(jv_copy(names), jv_string("categories"));
			if (jv_get_kind(t->categories) != JV_KIND_ARRAY) {
				jv_free(t->categories);
				t->categories = jv_array();
			}
			t->flags = KT_CUSTOM | KT_GENERATION | KT_NEEDS_RV;
			if (!strcmp(jstr(crd, "spec.scope", "Namespaced"), "Namespaced"))
				t->flags |= KT_NAMESPACED;
			if (jv_get_kind(sub) == JV_KIND_OBJECT)
				t->flags |= KT_STATUS;
			t->served = jv_get_kind(served) == JV_KIND_TRUE;
			jv_free(t->schema);
			jv_free(t->listinfo);
			t->listinfo = jv_null();	/* api.c works it out again from the new schema */
			t->schema = jv_getpath(jv_copy(v), JV_ARRAY(jv_string("schema"), jv_string("openAPIV3Schema")));
			jv_free(t->columns);
			t->columns = jv_object_get(jv_copy(v), jv_string("additionalPrinterColumns"));
			if (jv_get_kind(t->columns) != JV_KIND_ARRAY) {
				jv_free(t->columns);
				t->columns = jv_null();
			}
			jv_free(t->selectable);
			t->selectable = jv_array();
			{
				jv sf = jv_object_get(jv_copy(v), jv_string("selectableFields"));

				if (jv_get_kind(sf) == JV_KIND_ARRAY) {
					jv_array_foreach(sf, j, f) {
						jv p = jv_object_get(f, jv_string("jsonPath"));

						if (jv_get_kind(p) == JV_KIND_STRING)
							t->selectable = jv_array_append(t->selectable, p);
						else
							jv_free(p);
					}
				}
				jv_free(sf);
			}
			jv_free(sub);
			jv_free(served);
			jv_free(v);
		}
	}
	jv_free(versions);
	jv_free(names);
}

/* ---- discovery ------------------------------------------------------------ */

/* Kubernetes version priority: GA > beta > alpha, then by numbers, newest first. */
static int version_rank(const char *v, long *major, long *minor)
{
	char *end;

	*major = *minor = 0;
	if (v[0] != 'v' || v[1] < '0' || v[1] > '9')
		return 0;
	*major = strtol(v + 1, &end, 10);
	if (!*end)
		return 3;
	if (!strncmp(end, "beta", 4)) {
		*minor = strtol(end + 4, NULL, 10);
		return 2;
	}
	if (!strncmp(end, "alpha", 5)) {
		*minor = strtol(end + 5, NULL, 10);
		return 1;
	}
	return 0;
}

static int version_before(const char *a, const char *b)
{
	long am, an, bm, bn;
	int ra = version_rank(a, &am, &an), rb = version_rank(b, &bm, &bn);

	if (ra != rb)
		return ra > rb;
	if (ra == 0)
		return strcmp(a, b) < 0;
	if (am != bm)
		return am > bm;
	return an > bn;
}

static jv verbs(const struct ksim_type *t)
{
	jv v = JV_ARRAY(jv_string("create"), jv_string("delete"));

	if (!(t->flags & KT_NO_DELCOL))
		v = jv_array_append(v, jv_string("deletecollection"));
	v = jv_array_append(v, jv_string("get"));
	v = jv_array_append(v, jv_string("list"));
	v = jv_array_append(v, jv_string("patch"));
	v = jv_array_append(v, jv_string("update"));
	return jv_array_append(v, jv_string("watch"));
}

static jv storage_hash(const char *gr)
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char out[13];
	int o = 0;

	SHA256((const unsigned char *)gr, strlen(gr), md);
	for (int i = 0; i < 6; i += 3) {
		unsigned n = md[i] << 16 | md[i + 1] << 8 | md[i + 2];

		out[o++] = b64[n >> 18 & 63];
		out[o++] = b64[n >> 12 & 63];
		out[o++] = b64[n >> 6 & 63];
		out[o++] = b64[n & 63];
	}
	{
		unsigned n = md[6] << 16 | md[7] << 8;

		out[o++] = b64[n >> 18 & 63];
		out[o++] = b64[n >> 12 & 63];
		out[o++] = b64[n >> 6 & 63];
		out[o++] = '=';
	}
	out[o] = 0;
	return jv_string(out);
}

static jv resource_list(const char *group, const char *version)
{
	jv res = jv_array();
	char *gv = join_gv(group, version);

	for (struct ksim_type *t = types; t; t = t->next) {
		jv r;

		if (!t->served || strcmp(t->group, group) || strcmp(t->version, version))
			continue;
		r = JV_OBJECT(jv_string("name"), jv_string(t->resource), jv_string("singularName"),
			      jv_string(t->singular), jv_string("namespaced"), jv_bool(t->flags & KT_NAMESPACED),
			      jv_string("kind"), jv_string(t->kind), jv_string("verbs"), verbs(t));
		if (jv_array_length(jv_copy(t->short_names)) > 0)
			r = jv_object_set(r, jv_string("shortNames"), jv_copy(t->short_names));
		if (jv_array_length(jv_copy(t->categories)) > 0)
			r = jv_object_set(r, jv_string("categories"), jv_copy(t->categories));
		r = jv_object_set(r, jv_string("storageVersionHash"), storage_hash(t->gr));
		res = jv_array_append(res, r);
		if (!strcmp(t->resource, "namespaces") && !*t->group)
			res = jv_array_append(res, JV_OBJECT(jv_string("name"), jv_string("namespaces/finalize"),
							     jv_string("singularName"), jv_string(""),
							     jv_string("namespaced"), jv_false(), jv_string("kind"),
							     jv_string("Namespace"), jv_string("verbs"),
							     JV_ARRAY(jv_string("update"))));
		if (t->flags & KT_SCALE) {
			struct kop_buf b = KOP_BUF_INIT;

			kop_buf_addf(&b, "%s/scale", t->resource);
			res = jv_array_append(res, JV_OBJECT(jv_string("name"), jv_string(b.buf), jv_string("singularName"),
							     jv_string(""), jv_string("namespaced"),
							     jv_bool(t->flags & KT_NAMESPACED), jv_string("group"),
							     jv_string("autoscaling"), jv_string("version"), jv_string("v1"),
							     jv_string("kind"), jv_string("Scale"), jv_string("verbs"),
							     JV_ARRAY(jv_string("get"), jv_string("patch"),
								      jv_string("update"))));
			kop_buf_release(&b);
		}
		if (t->flags & KT_STATUS) {
			struct kop_buf b = KOP_BUF_INIT;

			kop_buf_addf(&b, "%s/status", t->resource);
			res = jv_array_append(res, JV_OBJECT(jv_string("name"), jv_string(b.buf), jv_string("singularName"),
							     jv_string(""), jv_string("namespaced"),
							     jv_bool(t->flags & KT_NAMESPACED), jv_string("kind"),
							     jv_string(t->kind), jv_string("verbs"),
							     JV_ARRAY(jv_string("get"), jv_string("patch"),
								      jv_string("update"))));
			kop_buf_release(&b);
		}
	}
	{
		jv list = JV_OBJECT(jv_string("kind"), jv_string("APIResourceList"));

		if (*group)	/* (kube-apiserver gives /api/v1 no apiVersion, /apis/G/V "v1") */
			list = jv_object_set(list, jv_string("apiVersion"), jv_string("v1"));
		list = jv_object_set(list, jv_string("groupVersion"), jv_string(gv));
		res = jv_object_set(list, jv_string("resources"), res);
	}
	free(gv);
	return res;
}

/* The served versions of a group, preferred first. */
static jv group_versions(const char *group)
{
	jv vs = jv_array();

	for (struct ksim_type *t = types; t; t = t->next) {
		int seen = 0, n;

		if (!t->served || strcmp(t->group, group))
			continue;
		n = jv_array_length(jv_copy(vs));
		for (int i = 0; i < n && !seen; i++) {
			jv v = jv_array_get(jv_copy(vs), i);

			seen = !strcmp(jv_string_value(v), t->version);
			jv_free(v);
		}
		if (seen)
			continue;
		/* insertion in priority order */
		{
			jv out = jv_array();
			int placed = 0;

			for (int i = 0; i < n; i++) {
				jv v = jv_array_get(jv_copy(vs), i);

				if (!placed && version_before(t->version, jv_string_value(v))) {
					out = jv_array_append(out, jv_string(t->version));
					placed = 1;
				}
				out = jv_array_append(out, v);
			}
			if (!placed)
				out = jv_array_append(out, jv_string(t->version));
			jv_free(vs);
			vs = out;
		}
	}
	return vs;
}

static jv group_list(void)
{
	jv groups = jv_array();
	jv names = jv_array();

	for (struct ksim_type *t = types; t; t = t->next) {
		int seen = 0;

		if (!t->served || !*t->group)
			continue;
		jv_array_foreach(names, i, n) {
			if (!strcmp(jv_string_value(n), t->group))
				seen = 1;
			jv_free(n);
		}
		if (seen)
			continue;
		names = jv_array_append(names, jv_string(t->group));
	}
	jv_array_foreach(names, i, n) {
		jv vs = group_versions(jv_string_value(n)), list = jv_array(), pref = jv_null();

		jv_array_foreach(vs, j, v) {
			char *gv = join_gv(jv_string_value(n), jv_string_value(v));
			jv e = JV_OBJECT(jv_string("groupVersion"), jv_string(gv), jv_string("version"), jv_copy(v));

			if (j == 0)
				pref = jv_copy(e);
			list = jv_array_append(list, e);
			free(gv);
			jv_free(v);
		}
		groups = jv_array_append(groups, JV_OBJECT(jv_string("name"), jv_copy(n), jv_string("versions"), list,
							   jv_string("preferredVersion"), pref));
		jv_free(vs);
		jv_free(n);
	}
	jv_free(names);
	return JV_OBJECT(jv_string("kind"), jv_string("APIGroupList"), jv_string("apiVersion"), jv_string("v1"),
			 jv_string("groups"), groups);
}

static int gv_served(const char *group, const char *version)
{
	for (struct ksim_type *t = types; t; t = t->next)
		if (t->served && !strcmp(t->group, group) && !strcmp(t->version, version))
			return 1;
	return 0;
}

jv ksim_discovery(const char *path)
{
	if (!strcmp(path, "/version"))
		return JV_OBJECT(jv_string("major"), jv_string("1"), jv_string("minor"), jv_string("30"),
				 jv_string("gitVersion"), jv_string("v1.30.0-ksim"), jv_string("gitCommit"),
				 jv_string("0000000000000000000000000000000000000000"), jv_string("gitTreeState"),
				 jv_string("clean"), jv_string("buildDate"), jv_string("2026-01-01T00:00:00Z"),
				 jv_string("goVersion"), jv_string("go1.22.0"), jv_string("compiler"), jv_string("gc"),
				 jv_string("platform"), jv_string("linux/amd64"));
	if (!strcmp(path, "/api"))
		return JV_OBJECT(jv_string("kind"), jv_string("APIVersions"), jv_string("versions"),
				 JV_ARRAY(jv_string("v1")), jv_string("serverAddressByClientCIDRs"),
				 JV_ARRAY(JV_OBJECT(jv_string("clientCIDR"), jv_string("0.0.0.0/0"),
						    jv_string("serverAddress"), jv_string("127.0.0.1:6443"))));
	if (!strcmp(path, "/api/v1"))
		return resource_list("", "v1");
	if (!strcmp(path, "/apis"))
		return group_list();
	if (!strncmp(path, "/apis/", 6)) {
		const char *g = path + 6, *slash = strchr(g, '/');

		if (!slash) {
			char *group = kop_strdup(g);
			jv vs = group_versions(group), list = jv_array(), pref = jv_null(), out;

			if (jv_array_length(jv_copy(vs)) == 0) {
				jv_free(vs);
				jv_free(list);
				free(group);
				return jv_invalid();
			}
			jv_array_foreach(vs, j, v) {
				char *gv = join_gv(group, jv_string_value(v));
				jv e = JV_OBJECT(jv_string("groupVersion"), jv_string(gv), jv_string("version"), v);

				if (j == 0)
					pref = jv_copy(e);
				list = jv_array_append(list, e);
				free(gv);
			}
			out = JV_OBJECT(jv_string("kind"), jv_string("APIGroup"), jv_string("apiVersion"), jv_string("v1"),
					jv_string("name"), jv_string(group), jv_string("versions"), list,
					jv_string("preferredVersion"), pref);
			jv_free(vs);
			free(group);
			return out;
		}
		if (!strchr(slash + 1, '/')) {
			char *group = kop_strndup(g, slash - g);
			jv out = gv_served(group, slash + 1) ? resource_list(group, slash + 1) : jv_invalid();

			free(group);
			return out;
		}
	}
	return jv_invalid();
}

/* ---- OpenAPI v3 ------------------------------------------------------------ */

static jv query_param(const char *name)
{
	return JV_OBJECT(jv_string("name"), jv_string(name), jv_string("in"), jv_string("query"), jv_string("schema"),
			 JV_OBJECT(jv_string("type"), jv_string("string"), jv_string("uniqueItems"), jv_true()));
}

static jv gvk_ext(const struct ksim_type *t)
{
	return JV_OBJECT(jv_string("group"), jv_string(t->group), jv_string("version"), jv_string(t->version),
			 jv_string("kind"), jv_string(t->kind));
}

static jv op(const struct ksim_type *t, const char *action, int patch)
{
	jv o = JV_OBJECT(jv_string("operationId"), jv_string(action), jv_string("responses"),
			 JV_OBJECT(jv_string("200"), JV_OBJECT(jv_string("description"), jv_string("OK"))),
			 jv_string("x-kubernetes-action"), jv_string(action), jv_string("x-kubernetes-group-version-kind"),
			 gvk_ext(t));

	if (patch) {
		jv content = JV_OBJECT(jv_string("application/json-patch+json"), jv_object(),
				       jv_string("application/merge-patch+json"), jv_object(),
				       jv_string("application/apply-patch+yaml"), jv_object());

		o = jv_object_set(o, jv_string("parameters"),
				  JV_ARRAY(query_param("dryRun"), query_param("fieldManager"),
					   query_param("fieldValidation"), query_param("force")));
		o = jv_object_set(o, jv_string("requestBody"), JV_OBJECT(jv_string("content"), content));
	} else if (!strcmp(action, "post") || !strcmp(action, "put")) {
		o = jv_object_set(o, jv_string("parameters"),
				  JV_ARRAY(query_param("dryRun"), query_param("fieldManager"),
					   query_param("fieldValidation")));
	}
	return o;
}

static jv gv_doc(const char *group, const char *version)
{
	jv paths = jv_object();
	char *gv = join_gv(group, version);

	for (struct ksim_type *t = types; t; t = t->next) {
		struct kop_buf coll = KOP_BUF_INIT, item = KOP_BUF_INIT;

		if (!t->served || strcmp(t->group, group) || strcmp(t->version, version))
			continue;
		kop_buf_addf(&coll, "/%s/%s/%s%s", *group ? "apis" : "api", gv,
			     t->flags & KT_NAMESPACED ? "namespaces/{namespace}/" : "", t->resource);
		kop_buf_addf(&item, "%s/{name}", coll.buf);
		paths = jv_object_set(paths, jv_string(coll.buf),
				      JV_OBJECT(jv_string("get"), op(t, "list", 0), jv_string("post"), op(t, "post", 0)));
		paths = jv_object_set(paths, jv_string(item.buf),
				      JV_OBJECT(jv_string("get"), op(t, "get", 0), jv_string("put"), op(t, "put", 0),
						jv_string("patch"), op(t, "patch", 1), jv_string("delete"),
						op(t, "delete", 0)));
		if (t->flags & KT_STATUS) {
			kop_buf_adds(&item, "/status");
			paths = jv_object_set(paths, jv_string(item.buf),
					      JV_OBJECT(jv_string("get"), op(t, "get", 0), jv_string("put"),
							op(t, "put", 0), jv_string("patch"), op(t, "patch", 1)));
		}
		kop_buf_release(&coll);
		kop_buf_release(&item);
	}
	free(gv);
	return JV_OBJECT(jv_string("openapi"), jv_string("3.0.0"), jv_string("info"),
			 JV_OBJECT(jv_string("title"), jv_string("Kubernetes"), jv_string("version"),
				   jv_string("v1.30.0-ksim")),
			 jv_string("paths"), paths, jv_string("components"),
			 JV_OBJECT(jv_string("schemas"), jv_object()));
}

static void hex_hash(jv doc, char *out)
{
	jv s = jv_dump_string(doc, 0);
	unsigned char md[SHA256_DIGEST_LENGTH];

	SHA256((const unsigned char *)jv_string_value(s), jv_string_length_bytes(jv_copy(s)), md);
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(out + 2 * i, 3, "%02X", md[i]);
	jv_free(s);
}

jv ksim_openapi(const char *path)
{
	if (!strcmp(path, "/openapi/v3") || !strcmp(path, "/openapi/v3/")) {
		jv paths = jv_object();

		for (struct ksim_type *t = types; t; t = t->next) {
			struct kop_buf key = KOP_BUF_INIT, url = KOP_BUF_INIT;
			char hash[2 * SHA256_DIGEST_LENGTH + 1];

			if (!t->served)
				continue;
			if (*t->group)
				kop_buf_addf(&key, "apis/%s/%s", t->group, t->version);
			else
				kop_buf_addf(&key, "api/%s", t->version);
			if (!jv_object_has(jv_copy(paths), jv_string(key.buf))) {
				hex_hash(gv_doc(t->group, t->version), hash);
				kop_buf_addf(&url, "/openapi/v3/%s?hash=%s", key.buf, hash);
				paths = jv_object_set(paths, jv_string(key.buf),
						      JV_OBJECT(jv_string("serverRelativeURL"), jv_string(url.buf)));
			}
			kop_buf_release(&key);
			kop_buf_release(&url);
		}
		return JV_OBJECT(jv_string("paths"), paths);
	}
	if (!strncmp(path, "/openapi/v3/api/", 16) && !strchr(path + 16, '/'))
		return gv_served("", path + 16) ? gv_doc("", path + 16) : jv_invalid();
	if (!strncmp(path, "/openapi/v3/apis/", 17)) {
		const char *g = path + 17, *slash = strchr(g, '/');

		if (slash && !strchr(slash + 1, '/')) {
			char *group = kop_strndup(g, slash - g);
			jv out = gv_served(group, slash + 1) ? gv_doc(group, slash + 1) : jv_invalid();

			free(group);
			return out;
		}
	}
	return jv_invalid();
}

/* ---- tables ----------------------------------------------------------------- */

/* apimachinery's duration.HumanDuration. */
static void human_duration(long long s, char *buf, size_t len)
{
	long long m, h;

	if (s < -1) {
		snprintf(buf, len, "<invalid>");
		return;
	}
	if (s < 0)
		s = 0;
	if (s < 120) {
		snprintf(buf, len, "%llds", s);
		return;
	}
	m = s / 60;
	if (m < 10) {
		if (s % 60)
			snprintf(buf, len, "%lldm%llds", m, s % 60);
		else
			snprintf(buf, len, "%lldm", m);
		return;
	}
	if (m < 180) {
		snprintf(buf, len, "%lldm", m);
		return;
	}
	h = s / 3600;
	if (h < 8) {
		if (m % 60)
			snprintf(buf, len, "%lldh%lldm", h, m % 60);
		else
			snprintf(buf, len, "%lldh", h);
	} else if (h < 48) {
		snprintf(buf, len, "%lldh", h);
	} else if (h < 24 * 8) {
		if (h % 24)
			snprintf(buf, len, "%lldd%lldh", h / 24, h % 24);
		else
			snprintf(buf, len, "%lldd", h / 24);
	} else if (h < 24 * 365 * 2) {
		snprintf(buf, len, "%lldd", h / 24);
	} else if (h < 24 * 365 * 8) {
		if ((h / 24) % 365)
			snprintf(buf, len, "%lldy%lldd", h / 24 / 365, (h / 24) % 365);
		else
			snprintf(buf, len, "%lldy", h / 24 / 365);
	} else {
		snprintf(buf, len, "%lldy", h / 24 / 365);
	}
}

static jv age(jv obj, const char *path)
{
	const char *ts = ksim_str(obj, path);
	time_t t;
	char buf[32];

	if (!ts || kop_time_parse(ts, &t) < 0)
		return jv_string("<unknown>");
	human_duration((long long)(time(NULL) - t), buf, sizeof(buf));
	return jv_string(buf);
}

/* Value at a simple JSONPath (".spec.x", ".status.conditions[0].type"), or null. */
static jv json_path(jv obj, const char *path)
{
	jv cur = jv_copy(obj);
	const char *p = path;

	if (*p == '{')
		p++;
	while (*p && *p != '}') {
		if (*p == '.') {
			const char *s = ++p;
			char *key;

			while (*p && *p != '.' && *p != '[' && *p != '}')
				p++;
			key = kop_strndup(s, p - s);
			if (jv_get_kind(cur) == JV_KIND_OBJECT) {
				cur = jv_object_get(cur, jv_string(key));
			} else {
				jv_free(cur);
				cur = jv_invalid();
			}
			free(key);
		} else if (*p == '[') {
			long idx = strtol(p + 1, NULL, 10);

			while (*p && *p != ']')
				p++;
			if (*p)
				p++;
			if (jv_get_kind(cur) == JV_KIND_ARRAY) {
				int n = jv_array_length(jv_copy(cur));

				if (idx < 0)
					idx += n;
				cur = idx >= 0 && idx < n ? jv_array_get(cur, idx) : (jv_free(cur), jv_invalid());
			} else {
				jv_free(cur);
				cur = jv_invalid();
			}
		} else {
			break;
		}
		if (!jv_is_valid(cur))
			return jv_null();
	}
	return cur;
}

static jv col(const char *name, const char *type, const char *format, const char *desc, int priority)
{
	return JV_OBJECT(jv_string("name"), jv_string(name), jv_string("type"), jv_string(type), jv_string("format"),
			 jv_string(format), jv_string("description"), jv_string(desc), jv_string("priority"),
			 jv_number(priority));
}

static long num(jv obj, const char *a, const char *b, const char *c, long def)
{
	jv p = c ? JV_ARRAY(jv_string(a), jv_string(b), jv_string(c)) : JV_ARRAY(jv_string(a), jv_string(b));
	jv v = jv_getpath(jv_copy(obj), p);
	long r = jv_get_kind(v) == JV_KIND_NUMBER ? (long)jv_number_value(v) : def;

	jv_free(v);
	return r;
}

/* A number member of an object, or def. */
static long key_num(jv o, const char *key, long def)
{
	jv v = jv_get_kind(o) == JV_KIND_OBJECT ? jv_object_get(jv_copy(o), jv_string(key)) : jv_invalid();
	long r = jv_get_kind(v) == JV_KIND_NUMBER ? (long)jv_number_value(v) : def;

	jv_free(v);
	return r;
}

static jv fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static jv fmt(const char *f, ...)
{
	struct kop_buf b = KOP_BUF_INIT;
	va_list ap;
	jv s;

	va_start(ap, f);
	kop_buf_vaddf(&b, f, ap);
	va_end(ap);
	s = jv_string(b.buf ? b.buf : "");
	kop_buf_release(&b);
	return s;
}

static jv str_or(jv obj, const char *path, const char *def)
{
	const char *s = ksim_str(obj, path);

	return jv_string(s ? s : def);
}

static jv pod_cells(jv o)
{
	jv cs = jv_getpath(jv_copy(o), JV_ARRAY(jv_string("status"), jv_string("containerStatuses")));
	jv cn = jv_getpath(jv_copy(o), JV_ARRAY(jv_string("spec"), jv_string("containers")));
	int total = jv_get_kind(cn) == JV_KIND_ARRAY ? jv_array_length(jv_copy(cn)) : 0, ready = 0;
	long restarts = 0;
	const char *phase = ksim_str(o, "status.phase"), *reason = ksim_str(o, "status.reason");
	char status[128];

	snprintf(status, sizeof(status), "%s", reason ? reason : phase ? phase : "Pending");
	if (jv_get_kind(cs) == JV_KIND_ARRAY) {
		jv_array_foreach(cs, i, c) {
			jv r = jv_object_get(jv_copy(c), jv_string("ready"));
			const char *waiting = ksim_str(c, "state.waiting.reason");
			const char *done = ksim_str(c, "state.terminated.reason");

			ready += jv_get_kind(r) == JV_KIND_TRUE;
			restarts += key_num(c, "restartCount", 0);
			if (waiting && *waiting)
				snprintf(status, sizeof(status), "%s", waiting);
			else if (done && *done)
				snprintf(status, sizeof(status), "%s", done);	/* "Completed", as kubectl prints it */
			jv_free(r);
			jv_free(c);
		}
	}
	if (ksim_str(o, "metadata.deletionTimestamp"))
		snprintf(status, sizeof(status), "Terminating");
	jv_free(cs);
	jv_free(cn);
	return JV_ARRAY(fmt("%d/%d", ready, total), jv_string(status), jv_number(restarts));
}

static jv service_cells(jv o)
{
	jv ports = jv_getpath(jv_copy(o), JV_ARRAY(jv_string("spec"), jv_string("ports")));
	jv ing = jv_getpath(jv_copy(o), JV_ARRAY(jv_string("status"), jv_string("loadBalancer"), jv_string("ingress")));
	const char *type = ksim_str(o, "spec.type");
	struct kop_buf p = KOP_BUF_INIT, ext = KOP_BUF_INIT;
	jv cells;

	if (!type)
		type = "ClusterIP";
	if (jv_get_kind(ports) == JV_KIND_ARRAY) {
		jv_array_foreach(ports, i, pt) {
			long port = key_num(pt, "port", 0), np = key_num(pt, "nodePort", 0);
			const char *proto = ksim_str(pt, "protocol");

			if (i)
				kop_buf_adds(&p, ",");
			if (np)
				kop_buf_addf(&p, "%ld:%ld/%s", port, np, proto ? proto : "TCP");
			else
				kop_buf_addf(&p, "%ld/%s", port, proto ? proto : "TCP");
			jv_free(pt);
		}
	}
	if (jv_get_kind(ing) == JV_KIND_ARRAY && jv_array_length(jv_copy(ing)) > 0) {
		jv_array_foreach(ing, i, e) {
			const char *ip = ksim_str(e, "ip"), *host = ksim_str(e, "hostname");

			if (i)
				kop_buf_adds(&ext, ",");
			kop_buf_adds(&ext, ip ? ip : host ? host : "");
			jv_free(e);
		}
	} else {
		kop_buf_adds(&ext, !strcmp(type, "LoadBalancer") ? "<pending>" : "<none>");
	}
	cells = JV_ARRAY(jv_string(type), str_or(o, "spec.clusterIP", "<none>"), jv_string(ext.buf),
			 jv_string(p.buf ? p.buf : "<none>"));
	kop_buf_release(&p);
	kop_buf_release(&ext);
	jv_free(ports);
	jv_free(ing);
	return cells;
}

static int obj_len(jv o, const char *key)
{
	jv v = jv_object_get(jv_copy(o), jv_string(key));
	int n = jv_get_kind(v) == JV_KIND_OBJECT ? jv_object_length(jv_copy(v)) : 0;

	jv_free(v);
	return n;
}

/* Column definitions and the row cells (after Name, before Age) for a built-in kind. */
static jv builtin_columns(const struct ksim_type *t)
{
	const char *r = t->gr;

	if (!strcmp(r, "pods"))
		return JV_ARRAY(col("Ready", "string", "", "The aggregate readiness state of this pod for accepting traffic.", 0),
				col("Status", "string", "", "The aggregate status of the containers in this pod.", 0),
				col("Restarts", "string", "", "The number of times the containers in this pod have been restarted.", 0));
	if (!strcmp(r, "deployments.apps"))
		return JV_ARRAY(col("Ready", "string", "", "Number of the pod with ready state", 0),
				col("Up-to-date", "string", "", "Total number of non-terminated pods targeted by this deployment that have the desired template spec.", 0),
				col("Available", "string", "", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.", 0));
	if (!strcmp(r, "replicasets.apps"))
		return JV_ARRAY(col("Desired", "integer", "", "Number of desired pods.", 0),
				col("Current", "integer", "", "Number of actual replicas.", 0),
				col("Ready", "integer", "", "Number of ready replicas.", 0));
	if (!strcmp(r, "statefulsets.apps"))
		return JV_ARRAY(col("Ready", "string", "", "Number of the pod with ready state", 0));
	if (!strcmp(r, "services"))
		return JV_ARRAY(col("Type", "string", "", "The type of service.", 0),
				col("Cluster-IP", "string", "", "IP address of the service.", 0),
				col("External-IP", "string", "", "External IP addresses of the service.", 0),
				col("Port(s)", "string", "", "The ports exposed by the service.", 0));
	if (!strcmp(r, "namespaces"))
		return JV_ARRAY(col("Status", "string", "", "The status of the namespace", 0));
	if (!strcmp(r, "configmaps"))
		return JV_ARRAY(col("Data", "integer", "", "Number of entries in the data.", 0));
	if (!strcmp(r, "secrets"))
		return JV_ARRAY(col("Type", "string", "", "The type of the secret", 0),
				col("Data", "integer", "", "Number of entries in the data.", 0));
	if (!strcmp(r, "persistentvolumeclaims"))
		return JV_ARRAY(col("Status", "string", "", "The phase of the claim.", 0),
				col("Volume", "string", "", "The volume bound to the claim.", 0));
	if (!strcmp(r, "leases.coordination.k8s.io"))
		return JV_ARRAY(col("Holder", "string", "", "The holder of the lease.", 0));
	if (!strcmp(r, "nodes"))
		return JV_ARRAY(col("Status", "string", "", "The status of the node", 0));
	return jv_array();
}

static jv builtin_cells(const struct ksim_type *t, jv o)
{
	const char *r = t->gr;

	if (!strcmp(r, "pods"))
		return pod_cells(o);
	if (!strcmp(r, "deployments.apps"))
		return JV_ARRAY(fmt("%ld/%ld", num(o, "status", "readyReplicas", NULL, 0),
				    num(o, "spec", "replicas", NULL, 1)),
				jv_number(num(o, "status", "updatedReplicas", NULL, 0)),
				jv_number(num(o, "status", "availableReplicas", NULL, 0)));
	if (!strcmp(r, "replicasets.apps"))
		return JV_ARRAY(jv_number(num(o, "spec", "replicas", NULL, 1)),
				jv_number(num(o, "status", "replicas", NULL, 0)),
				jv_number(num(o, "status", "readyReplicas", NULL, 0)));
	if (!strcmp(r, "statefulsets.apps"))
		return JV_ARRAY(fmt("%ld/%ld", num(o, "status", "readyReplicas", NULL, 0),
				    num(o, "spec", "replicas", NULL, 1)));
	if (!strcmp(r, "services"))
		return service_cells(o);
	if (!strcmp(r, "namespaces"))
		return JV_ARRAY(str_or(o, "status.phase", "Active"));
	if (!strcmp(r, "configmaps"))
		return JV_ARRAY(jv_number(obj_len(o, "data") + obj_len(o, "binaryData")));
	if (!strcmp(r, "secrets"))
		return JV_ARRAY(str_or(o, "type", "Opaque"), jv_number(obj_len(o, "data")));
	if (!strcmp(r, "persistentvolumeclaims"))
		return JV_ARRAY(str_or(o, "status.phase", "Pending"), str_or(o, "spec.volumeName", ""));
	if (!strcmp(r, "leases.coordination.k8s.io"))
		return JV_ARRAY(str_or(o, "spec.holderIdentity", "<none>"));
	if (!strcmp(r, "nodes"))
		return JV_ARRAY(jv_string("Ready"));
	return jv_array();
}

static jv cell_value(jv v, const char *type)
{
	if (jv_get_kind(v) == JV_KIND_NULL)
		return v;
	if (!strcmp(type, "date") && jv_get_kind(v) == JV_KIND_STRING) {
		time_t t;
		char buf[32];

		if (kop_time_parse(jv_string_value(v), &t) == 0) {
			human_duration((long long)(time(NULL) - t), buf, sizeof(buf));
			jv_free(v);
			return jv_string(buf);
		}
	}
	if (jv_get_kind(v) == JV_KIND_OBJECT || jv_get_kind(v) == JV_KIND_ARRAY) {
		jv s = jv_dump_string(v, 0);

		return s;
	}
	return v;
}

jv ksim_table(const struct ksim_type *t, jv items, const char *rv, const char *cont, int include_object)
{
	jv defs = JV_ARRAY(col("Name", "string", "name",
			       "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: http://kubernetes.io/docs/user-guide/identifiers#names",
			       0));
	jv rows = jv_array(), md;
	int custom = jv_get_kind(t->columns) == JV_KIND_ARRAY;
	int crd = !strcmp(t->gr, "customresourcedefinitions.apiextensions.k8s.io");

	if (custom) {
		jv_array_foreach(t->columns, i, c) {
			const char *type = ksim_str(c, "type");
			const char *format = ksim_str(c, "format");
			const char *desc = ksim_str(c, "description");

			defs = jv_array_append(defs, col(jstr(c, "name", ""), type ? type : "string", format ? format : "",
							 desc ? desc : "", (int)key_num(c, "priority", 0)));
			jv_free(c);
		}
	} else if (crd) {
		defs = jv_array_append(defs, col("Created At", "date", "", "", 0));
	} else {
		jv extra = builtin_columns(t);

		jv_array_foreach(extra, i, c)
			defs = jv_array_append(defs, c);
		jv_free(extra);
		defs = jv_array_append(defs, col("Age", "string", "",
						 "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
						 0));
	}
	jv_array_foreach(items, i, o) {
		jv cells = JV_ARRAY(str_or(o, "metadata.name", "")), row;

		if (custom) {
			jv_array_foreach(t->columns, j, c) {
				const char *type = ksim_str(c, "type");

				cells = jv_array_append(cells, cell_value(json_path(o, jstr(c, "jsonPath", "")),
									   type ? type : "string"));
				jv_free(c);
			}
		} else if (crd) {
			cells = jv_array_append(cells, str_or(o, "metadata.creationTimestamp", ""));
		} else {
			jv extra = builtin_cells(t, o);

			jv_array_foreach(extra, j, c)
				cells = jv_array_append(cells, c);
			jv_free(extra);
			cells = jv_array_append(cells, age(o, "metadata.creationTimestamp"));
		}
		row = JV_OBJECT(jv_string("cells"), cells);
		if (include_object == 2) {
			row = jv_object_set(row, jv_string("object"), o);
		} else if (include_object == 1) {
			jv m = jv_object_get(o, jv_string("metadata"));

			row = jv_object_set(row, jv_string("object"),
					    JV_OBJECT(jv_string("kind"), jv_string("PartialObjectMetadata"),
						      jv_string("apiVersion"), jv_string("meta.k8s.io/v1"),
						      jv_string("metadata"), m));
		} else {
			jv_free(o);
		}
		rows = jv_array_append(rows, row);
	}
	jv_free(items);
	md = JV_OBJECT(jv_string("resourceVersion"), jv_string(rv ? rv : ""));
	if (cont && *cont)
		md = jv_object_set(md, jv_string("continue"), jv_string(cont));
	return JV_OBJECT(jv_string("kind"), jv_string("Table"), jv_string("apiVersion"), jv_string("meta.k8s.io/v1"),
			 jv_string("metadata"), md, jv_string("columnDefinitions"), defs, jv_string("rows"), rows);
}
