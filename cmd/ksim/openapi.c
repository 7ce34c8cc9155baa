/*
 * The OpenAPI v3 documents kubectl's client-side fieldValidation check
 * reads: the index and one document per group version, with every served
 * kind's paths and the schemas of custom kinds (openapi_meta.c gives the
 * ObjectMeta they refer to).
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/sha.h>
#include "types-priv.h"
#include "banned.h"

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

#define D_API_VERSION "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"
#define D_KIND "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
#define META_REF "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1."

/* The definition name of a custom kind: its group reversed (ToRESTFriendlyName), version, kind. */
static char *definition_name(const struct ksim_type *t, const char *suffix)
{
	struct kop_buf b = KOP_BUF_INIT;
	const char *g = t->group, *end = g + strlen(g);

	if (strchr(g, '.')) {
		while (end > g) {
			const char *dot = end;

			while (dot > g && dot[-1] != '.')
				dot--;
			kop_buf_addf(&b, "%s%.*s", b.len ? "." : "", (int)(end - dot), dot);
			end = dot > g ? dot - 1 : g;
		}
	} else {
		kop_buf_adds(&b, g);
	}
	kop_buf_addf(&b, ".%s.%s%s", t->version, t->kind, suffix);
	return kop_buf_detach(&b, NULL);
}

static jv gvk_of(const struct ksim_type *t, const char *kind)
{
	return JV_ARRAY(JV_OBJECT(jv_string("group"), jv_string(t->group), jv_string("kind"), jv_string(kind),
				  jv_string("version"), jv_string(t->version)));
}

static jv meta_property(const char *desc, const char *type)
{
	struct kop_buf b = KOP_BUF_INIT;
	jv p;

	kop_buf_addf(&b, META_REF "%s", type);
	p = JV_OBJECT(jv_string("description"), jv_string(desc), jv_string("allOf"),
		      JV_ARRAY(JV_OBJECT(jv_string("$ref"), jv_string(b.buf))));
	kop_buf_release(&b);
	return p;
}

/*
 * The schema of a custom kind in its OpenAPI v3 document, as apiextensions'
 * builder makes it (buildKubeNative): the CRD's openAPIV3Schema with
 * apiVersion, kind and metadata (a reference to ObjectMeta) set, and the
 * group-version-kind that `kubectl explain` looks it up by.
 */
static jv custom_schema(const struct ksim_type *t)
{
	jv s;

	if (jv_get_kind(t->schema) == JV_KIND_OBJECT) {
		jv props = jv_object_get(jv_copy(t->schema), jv_string("properties"));

		if (jv_get_kind(props) != JV_KIND_OBJECT) {
			jv_free(props);
			props = jv_object();
		}
		props = jv_object_set(props, jv_string("apiVersion"),
				      JV_OBJECT(jv_string("description"), jv_string(D_API_VERSION), jv_string("type"),
						jv_string("string")));
		props = jv_object_set(props, jv_string("kind"),
				      JV_OBJECT(jv_string("description"), jv_string(D_KIND), jv_string("type"),
						jv_string("string")));
		props = jv_object_set(props, jv_string("metadata"),
				      meta_property("Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
						    "ObjectMeta"));
		s = jv_object_set(jv_copy(t->schema), jv_string("properties"), props);
	} else {
		s = JV_OBJECT(jv_string("type"), jv_string("object"));
	}
	return jv_object_set(s, jv_string("x-kubernetes-group-version-kind"), gvk_of(t, t->kind));
}

/* The schema of its list kind (buildListSchema). */
static jv custom_list_schema(const struct ksim_type *t, const char *item_def)
{
	struct kop_buf d = KOP_BUF_INIT, id = KOP_BUF_INIT, ref = KOP_BUF_INIT;
	jv s;

	kop_buf_addf(&d, "%s is a list of %s", t->list_kind, t->kind);
	kop_buf_addf(&id, "List of %s. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md",
		     t->resource);
	kop_buf_addf(&ref, "#/components/schemas/%s", item_def);
	s = JV_OBJECT(jv_string("description"), jv_string(d.buf), jv_string("required"), JV_ARRAY(jv_string("items")),
		      jv_string("properties"),
		      JV_OBJECT(jv_string("apiVersion"),
				JV_OBJECT(jv_string("description"), jv_string(D_API_VERSION), jv_string("type"),
					  jv_string("string")),
				jv_string("items"),
				JV_OBJECT(jv_string("description"), jv_string(id.buf), jv_string("type"),
					  jv_string("array"), jv_string("items"),
					  JV_OBJECT(jv_string("$ref"), jv_string(ref.buf))),
				jv_string("kind"),
				JV_OBJECT(jv_string("description"), jv_string(D_KIND), jv_string("type"),
					  jv_string("string")),
				jv_string("metadata"),
				meta_property("Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
					      "ListMeta")),
		      jv_string("x-kubernetes-group-version-kind"), gvk_of(t, t->list_kind));
	kop_buf_release(&d);
	kop_buf_release(&id);
	kop_buf_release(&ref);
	return s;
}

static jv gv_doc(const char *group, const char *version)
{
	jv paths = jv_object(), schemas = jv_object();
	char *gv = join_gv(group, version);
	int custom = 0;

	for (struct ksim_type *t = ksim_types(); t; t = t->next) {
		struct kop_buf coll = KOP_BUF_INIT, item = KOP_BUF_INIT;

		if (!t->served || strcmp(t->group, group) || strcmp(t->version, version))
			continue;
		kop_buf_addf(&coll, "/%s/%s/%s%s", *group ? "apis" : "api", gv,
			     t->flags & KT_NAMESPACED ? "namespaces/{namespace}/" : "", t->resource);
		kop_buf_addf(&item, "%s/{name}", coll.buf);
		if (t->crd) {
			char *def = definition_name(t, ""), *list = definition_name(t, "List");

			schemas = jv_object_set(schemas, jv_string(def), custom_schema(t));
			schemas = jv_object_set(schemas, jv_string(list), custom_list_schema(t, def));
			free(def);
			free(list);
			custom = 1;
		}
		if (t->flags & KT_REVIEW) {
			paths = jv_object_set(paths, jv_string(coll.buf), JV_OBJECT(jv_string("post"), op(t, "post", 0)));
			kop_buf_release(&coll);
			kop_buf_release(&item);
			continue;
		}
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
	if (custom) {
		/* what the custom schemas refer to */
		jv meta = jv_parse(ksim_openapi_meta_schemas);

		schemas = jv_object_merge(meta, schemas);
	}
	return JV_OBJECT(jv_string("openapi"), jv_string("3.0.0"), jv_string("info"),
			 custom ? JV_OBJECT(jv_string("title"), jv_string("Kubernetes CRD Swagger"), jv_string("version"),
					    jv_string("v0.1.0")) :
				  JV_OBJECT(jv_string("title"), jv_string("Kubernetes"), jv_string("version"),
					    jv_string("v1.30.0-ksim")),
			 jv_string("paths"), paths, jv_string("components"), JV_OBJECT(jv_string("schemas"), schemas));
}

static void hex_hash(jv doc, char *out)
{
	jv s = jv_dump_string(doc, 0);
	unsigned char md[SHA256_DIGEST_LENGTH];

	kop_sha256(jv_string_value(s), jv_string_length_bytes(jv_copy(s)), md);
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(out + 2 * i, 3, "%02X", md[i]);
	jv_free(s);
}

jv ksim_openapi(const char *path)
{
	if (!strcmp(path, "/openapi/v3") || !strcmp(path, "/openapi/v3/")) {
		jv paths = jv_object();

		for (struct ksim_type *t = ksim_types(); t; t = t->next) {
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
