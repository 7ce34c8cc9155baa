/*
 * The type registry: the built-in kinds ksim serves and the kinds CRDs
 * serve, found by group/version/resource or by kind. What clients read
 * about them is discovery.c's (discovery), openapi.c's (OpenAPI v3) and
 * table.c's (Table output).
 */
#include <stdlib.h>
#include <string.h>
#include "types-priv.h"
#include "banned.h"

#define NS KT_NAMESPACED
#define ST KT_STATUS
#define GEN KT_GENERATION

static const struct builtin {
	const char *group, *version, *resource, *kind, *singular, *shorts, *categories;
	unsigned flags;
} builtins[] = {
	{ "", "v1", "configmaps", "ConfigMap", "configmap", "cm", "", NS },
	{ "", "v1", "endpoints", "Endpoints", "endpoints", "ep", "", NS },
	{ "", "v1", "events", "Event", "event", "ev", "", NS },
	{ "", "v1", "limitranges", "LimitRange", "limitrange", "limits", "", NS },
	{ "", "v1", "namespaces", "Namespace", "namespace", "ns", "", ST | KT_NO_DELCOL },
	{ "", "v1", "nodes", "Node", "node", "no", "", ST },
	{ "", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", "persistentvolumeclaim", "pvc", "", NS | ST },
	{ "", "v1", "persistentvolumes", "PersistentVolume", "persistentvolume", "pv", "", ST },
	{ "", "v1", "pods", "Pod", "pod", "po", "all", NS | ST | KT_RETURN_DELETED },
	{ "", "v1", "podtemplates", "PodTemplate", "podtemplate", "", "", NS },
	{ "", "v1", "replicationcontrollers", "ReplicationController", "replicationcontroller", "rc", "all",
	  NS | ST | GEN | KT_SCALE | KT_STATUS_META },
	{ "", "v1", "resourcequotas", "ResourceQuota", "resourcequota", "quota", "", NS | ST },
	{ "", "v1", "secrets", "Secret", "secret", "", "", NS },
	{ "", "v1", "serviceaccounts", "ServiceAccount", "serviceaccount", "sa", "", NS | KT_RETURN_DELETED },
	{ "", "v1", "services", "Service", "service", "svc", "all", NS | ST },
	{ "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy",
	  "validatingadmissionpolicy", "", "api-extensions", ST | GEN },
	{ "admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding",
	  "validatingadmissionpolicybinding", "", "api-extensions", GEN },
	{ "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
	  "customresourcedefinition", "crd,crds", "api-extensions", ST | GEN },
	{ "apiregistration.k8s.io", "v1", "apiservices", "APIService", "apiservice", "", "api-extensions", ST },
	{ "apps", "v1", "daemonsets", "DaemonSet", "daemonset", "ds", "all", NS | ST | GEN | KT_STATUS_META },
	{ "apps", "v1", "deployments", "Deployment", "deployment", "deploy", "all",
	  NS | ST | GEN | KT_SCALE | KT_STATUS_META },
	{ "apps", "v1", "replicasets", "ReplicaSet", "replicaset", "rs", "all",
	  NS | ST | GEN | KT_SCALE | KT_STATUS_META },
	{ "apps", "v1", "statefulsets", "StatefulSet", "statefulset", "sts", "all",
	  NS | ST | GEN | KT_SCALE | KT_STATUS_META },
	{ "authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", "selfsubjectreview", "", "",
	  KT_REVIEW },
	{ "authentication.k8s.io", "v1beta1", "selfsubjectreviews", "SelfSubjectReview", "selfsubjectreview", "",
	  "", KT_REVIEW },	/* kubectl 1.27 asks v1beta1 */
	{ "authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview",
	  "selfsubjectaccessreview", "", "", KT_REVIEW },
	{ "authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", "selfsubjectrulesreview",
	  "", "", KT_REVIEW },
	{ "autoscaling", "v1", "horizontalpodautoscalers", "HorizontalPodAutoscaler", "horizontalpodautoscaler",
	  "hpa", "all", NS | ST },
	{ "autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", "horizontalpodautoscaler",
	  "hpa", "all", NS | ST },
	{ "batch", "v1", "cronjobs", "CronJob", "cronjob", "cj", "all", NS | ST | GEN | KT_STATUS_META },
	{ "batch", "v1", "jobs", "Job", "job", "", "all", NS | ST | GEN | KT_STATUS_META },
	{ "coordination.k8s.io", "v1", "leases", "Lease", "lease", "", "", NS | KT_NEEDS_RV | KT_CREATE_ON_UPDATE },
	{ "discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", "endpointslice", "", "", NS },
	{ "events.k8s.io", "v1", "events", "Event", "event", "ev", "", NS },
	{ "networking.k8s.io", "v1", "ingressclasses", "IngressClass", "ingressclass", "", "", GEN },
	{ "networking.k8s.io", "v1", "ingresses", "Ingress", "ingress", "ing", "", NS | ST | GEN },
	{ "networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", "networkpolicy", "netpol", "", NS | GEN },
	{ "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", "poddisruptionbudget", "pdb", "",
	  NS | ST | GEN },
	{ "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", "clusterrolebinding", "", "",
	  0 },
	{ "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", "clusterrole", "", "", 0 },
	{ "rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", "rolebinding", "", "", NS },
	{ "rbac.authorization.k8s.io", "v1", "roles", "Role", "role", "", "", NS },
	{ "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", "priorityclass", "pc", "", 0 },
	{ "storage.k8s.io", "v1", "storageclasses", "StorageClass", "storageclass", "sc", "", 0 },
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

char *join_gv(const char *group, const char *version)
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

const char *jstr(jv o, const char *key, const char *def)
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
			t->listinfo = jv_null();	/* write.c works it out again from the new schema */
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
