/*
 * Discovery documents: /api, /apis, each group and each group version, in
 * the legacy JSON form kube-apiserver serves (the types are types.c's).
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/sha.h>
#include "types-priv.h"
#include "banned.h"

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
	jv v;

	if (t->flags & KT_REVIEW)
		return JV_ARRAY(jv_string("create"));
	v = JV_ARRAY(jv_string("create"), jv_string("delete"));

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

	kop_sha256(gr, strlen(gr), md);
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

	for (struct ksim_type *t = ksim_types(); t; t = t->next) {
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
		if (!(t->flags & KT_REVIEW))	/* reviews are not stored */
			r = jv_object_set(r, jv_string("storageVersionHash"), storage_hash(t->gr));
		res = jv_array_append(res, r);
		if (!strcmp(t->resource, "namespaces") && !*t->group)
			res = jv_array_append(res, JV_OBJECT(jv_string("name"), jv_string("namespaces/finalize"),
							     jv_string("singularName"), jv_string(""),
							     jv_string("namespaced"), jv_false(), jv_string("kind"),
							     jv_string("Namespace"), jv_string("verbs"),
							     JV_ARRAY(jv_string("update"))));
		if (!strcmp(t->gr, "serviceaccounts"))
			res = jv_array_append(res, JV_OBJECT(jv_string("name"), jv_string("serviceaccounts/token"),
							     jv_string("singularName"), jv_string(""),
							     jv_string("namespaced"), jv_true(), jv_string("group"),
							     jv_string("authentication.k8s.io"), jv_string("version"),
							     jv_string("v1"), jv_string("kind"), jv_string("TokenRequest"),
							     jv_string("verbs"), JV_ARRAY(jv_string("create"))));
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
		if (!strcmp(t->gr, "pods")) {
			/* the node subresources pods.c answers */
			static const char *const subs[][2] = { { "attach", "PodAttachOptions" },
								 { "exec", "PodExecOptions" },
								 { "log", "Pod" },
								 { "portforward", "PodPortForwardOptions" } };

			for (size_t i = 0; i < sizeof(subs) / sizeof(*subs); i++) {
				struct kop_buf b = KOP_BUF_INIT;

				kop_buf_addf(&b, "pods/%s", subs[i][0]);
				res = jv_array_append(res, JV_OBJECT(jv_string("name"), jv_string(b.buf),
								     jv_string("singularName"), jv_string(""),
								     jv_string("namespaced"), jv_true(), jv_string("kind"),
								     jv_string(subs[i][1]), jv_string("verbs"),
								     strcmp(subs[i][0], "log") ?
									     JV_ARRAY(jv_string("create"), jv_string("get")) :
									     JV_ARRAY(jv_string("get"))));
				kop_buf_release(&b);
			}
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

	for (struct ksim_type *t = ksim_types(); t; t = t->next) {
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

	for (struct ksim_type *t = ksim_types(); t; t = t->next) {
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

int gv_served(const char *group, const char *version)
{
	for (struct ksim_type *t = ksim_types(); t; t = t->next)
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
