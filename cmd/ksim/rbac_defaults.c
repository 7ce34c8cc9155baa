/*
 * The default ClusterRoles and ClusterRoleBindings kube-apiserver's RBAC
 * bootstrap policy makes when RBAC is on (--authorization rbac), created
 * at start when missing: cluster-admin, the user-facing admin, edit and
 * view (their rules as the aggregation controller writes them, for the
 * kinds ksim serves), and the system:* roles clients look for
 * (system:basic-user, system:discovery, system:public-info-viewer,
 * system:monitoring, system:node, system:kube-controller-manager,
 * system:kube-scheduler), with their bindings. The rules are the real
 * ones as far as ksim serves what they name; rbac.c evaluates them.
 */
#include <stdlib.h>
#include <string.h>
#include "sim.h"
#include "banned.h"

#define READ "get list watch"
#define WRITE "create delete deletecollection patch update"

/* One rule: the role(s) it belongs to ("admin edit view": each), verbs, apiGroups, resources or URLs. */
static const struct rule {
	const char *roles, *verbs, *groups, *resources, *urls;
} rules[] = {
	{ "cluster-admin", "*", "*", "*", NULL },
	{ "cluster-admin", "*", NULL, NULL, "*" },
	/* the aggregated user-facing roles */
	{ "admin edit", "create delete deletecollection patch update", "",
	  "pods pods/attach pods/exec pods/portforward pods/proxy", NULL },
	{ "admin edit", "create", "", "pods/eviction", NULL },
	{ "admin edit", WRITE, "",
	  "configmaps endpoints persistentvolumeclaims replicationcontrollers replicationcontrollers/scale secrets "
	  "serviceaccounts services services/proxy", NULL },
	{ "admin edit", "create", "", "serviceaccounts/token", NULL },
	{ "admin edit", WRITE, "apps",
	  "daemonsets deployments deployments/rollback deployments/scale replicasets replicasets/scale statefulsets "
	  "statefulsets/scale", NULL },
	{ "admin edit", WRITE, "autoscaling", "horizontalpodautoscalers", NULL },
	{ "admin edit", WRITE, "batch", "cronjobs jobs", NULL },
	{ "admin edit", WRITE, "networking.k8s.io", "ingresses networkpolicies", NULL },
	{ "admin edit", WRITE, "policy", "poddisruptionbudgets", NULL },
	{ "admin edit", WRITE, "discovery.k8s.io", "endpointslices", NULL },
	{ "admin edit", "impersonate", "", "serviceaccounts", NULL },
	{ "admin edit", READ, "", "secrets", NULL },
	{ "admin edit view", READ, "",
	  "configmaps endpoints persistentvolumeclaims persistentvolumeclaims/status pods replicationcontrollers "
	  "replicationcontrollers/scale serviceaccounts services services/status bindings events limitranges "
	  "namespaces/status pods/log pods/status replicationcontrollers/status resourcequotas resourcequotas/status "
	  "namespaces", NULL },
	{ "admin edit view", READ, "discovery.k8s.io", "endpointslices", NULL },
	{ "admin edit view", READ, "apps",
	  "controllerrevisions daemonsets daemonsets/status deployments deployments/scale deployments/status "
	  "replicasets replicasets/scale replicasets/status statefulsets statefulsets/scale statefulsets/status", NULL },
	{ "admin edit view", READ, "autoscaling", "horizontalpodautoscalers horizontalpodautoscalers/status", NULL },
	{ "admin edit view", READ, "batch", "cronjobs cronjobs/status jobs jobs/status", NULL },
	{ "admin edit view", READ, "networking.k8s.io", "ingresses ingresses/status networkpolicies", NULL },
	{ "admin edit view", READ, "policy", "poddisruptionbudgets poddisruptionbudgets/status", NULL },
	{ "admin", "create", "authorization.k8s.io", "localsubjectaccessreviews", NULL },
	{ "admin", WRITE " get list watch", "rbac.authorization.k8s.io", "rolebindings roles", NULL },
	/* system roles */
	{ "system:basic-user", "create", "authentication.k8s.io", "selfsubjectreviews", NULL },
	{ "system:basic-user", "create", "authorization.k8s.io", "selfsubjectaccessreviews selfsubjectrulesreviews",
	  NULL },
	{ "system:discovery", "get", NULL, NULL,
	  "/api /api/* /apis /apis/* /healthz /livez /openapi /openapi/* /readyz /version /version/" },
	{ "system:public-info-viewer", "get", NULL, NULL, "/healthz /livez /readyz /version /version/" },
	{ "system:monitoring", "get", NULL, NULL, "/healthz /healthz/* /livez /livez/* /metrics /metrics/slis /readyz /readyz/*" },
	{ "system:node", READ, "", "nodes pods services endpoints configmaps secrets persistentvolumeclaims "
	  "persistentvolumes", NULL },
	{ "system:node", "create delete get list patch update watch", "", "nodes", NULL },
	{ "system:node", "patch update", "", "nodes/status pods/status", NULL },
	{ "system:node", "create delete", "", "pods", NULL },
	{ "system:node", "create patch update", "", "events", NULL },
	{ "system:node", "create delete get patch update", "coordination.k8s.io", "leases", NULL },
	{ "system:kube-controller-manager", "create patch update", "", "events", NULL },
	{ "system:kube-controller-manager", "create delete get patch update", "coordination.k8s.io", "leases", NULL },
	{ "system:kube-controller-manager", "create", "", "serviceaccounts/token secrets serviceaccounts", NULL },
	{ "system:kube-controller-manager", "list watch", "*", "*", NULL },
	{ "system:kube-controller-manager", "get", "", "configmaps namespaces secrets serviceaccounts", NULL },
	{ "system:kube-scheduler", "create patch update", "", "events", NULL },
	{ "system:kube-scheduler", "create delete get patch update", "coordination.k8s.io", "leases", NULL },
	{ "system:kube-scheduler", READ, "", "nodes pods persistentvolumeclaims persistentvolumes services "
	  "replicationcontrollers namespaces", NULL },
	{ "system:kube-scheduler", "create", "", "pods/binding bindings", NULL },
	{ "system:kube-scheduler", "patch update", "", "pods/status", NULL },
	{ "system:kube-scheduler", READ, "apps", "replicasets statefulsets", NULL },
	{ "system:kube-scheduler", READ, "storage.k8s.io", "storageclasses", NULL },
};

/* The default bindings: binding (= role) name, subject kind, subject names. */
static const struct binding {
	const char *name, *kind, *subjects;
} bindings[] = {
	{ "cluster-admin", "Group", "system:masters" },
	{ "system:basic-user", "Group", "system:authenticated" },
	{ "system:discovery", "Group", "system:authenticated" },
	{ "system:public-info-viewer", "Group", "system:authenticated system:unauthenticated" },
	{ "system:monitoring", "Group", "system:monitoring" },
	{ "system:node", NULL, NULL },	/* no subjects: the Node authorizer decides */
	{ "system:kube-controller-manager", "User", "system:kube-controller-manager" },
	{ "system:kube-scheduler", "User", "system:kube-scheduler" },
};

static const char *const roles[] = { "cluster-admin", "admin", "edit", "view", "system:basic-user",
				     "system:discovery", "system:public-info-viewer", "system:monitoring",
				     "system:node", "system:kube-controller-manager", "system:kube-scheduler" };

/* Words of s (space-separated) as a JSON array. */
static jv words(const char *s)
{
	jv a = jv_array();

	while (s && *s) {
		const char *e = strchr(s, ' ');
		size_t n = e ? (size_t)(e - s) : strlen(s);
		char *w = kop_strndup(s, n);

		a = jv_array_append(a, jv_string(w));
		free(w);
		s = e ? e + 1 : NULL;
	}
	return a;
}

static int has_word(const char *s, const char *w)
{
	jv a = words(s);
	int yes = 0;

	jv_array_foreach(a, i, x) {
		yes |= !strcmp(jv_string_value(x), w);
		jv_free(x);
	}
	jv_free(a);
	return yes;
}

static jv meta(const char *name)
{
	return JV_OBJECT(jv_string("name"), jv_string(name), jv_string("labels"),
			 JV_OBJECT(jv_string("kubernetes.io/bootstrapping"), jv_string("rbac-defaults")),
			 jv_string("annotations"),
			 JV_OBJECT(jv_string("rbac.authorization.kubernetes.io/autoupdate"), jv_string("true")));
}

static jv role(const char *name)
{
	jv rs = jv_array(), md = meta(name), obj;

	for (size_t i = 0; i < sizeof(rules) / sizeof(*rules); i++) {
		const struct rule *r = &rules[i];
		jv o;

		if (!has_word(r->roles, name))
			continue;
		o = JV_OBJECT(jv_string("verbs"), words(r->verbs));
		if (r->groups)
			o = jv_object_set(o, jv_string("apiGroups"), *r->groups ? words(r->groups) : JV_ARRAY(jv_string("")));
		if (r->resources)
			o = jv_object_set(o, jv_string("resources"), words(r->resources));
		if (r->urls)
			o = jv_object_set(o, jv_string("nonResourceURLs"), words(r->urls));
		rs = jv_array_append(rs, o);
	}
	if (!strcmp(name, "edit") || !strcmp(name, "view")) {
		/* aggregated into the next wider role */
		md = jv_setpath(md, JV_ARRAY(jv_string("labels"), jv_string(!strcmp(name, "edit") ?
					    "rbac.authorization.k8s.io/aggregate-to-admin" :
					    "rbac.authorization.k8s.io/aggregate-to-edit")), jv_string("true"));
	}
	obj = JV_OBJECT(jv_string("apiVersion"), jv_string("rbac.authorization.k8s.io/v1"), jv_string("kind"),
			jv_string("ClusterRole"), jv_string("metadata"), md, jv_string("rules"), rs);
	if (!strcmp(name, "admin") || !strcmp(name, "edit") || !strcmp(name, "view")) {
		struct kop_buf l = KOP_BUF_INIT;

		kop_buf_addf(&l, "rbac.authorization.k8s.io/aggregate-to-%s", name);
		obj = jv_object_set(obj, jv_string("aggregationRule"),
				    JV_OBJECT(jv_string("clusterRoleSelectors"),
					      JV_ARRAY(JV_OBJECT(jv_string("matchLabels"),
								 JV_OBJECT(jv_string(l.buf), jv_string("true"))))));
		kop_buf_release(&l);
	}
	return obj;
}

static jv binding(const struct binding *b)
{
	jv subjects = jv_array(), names = words(b->subjects);

	jv_array_foreach(names, i, n) {
		jv s = JV_OBJECT(jv_string("kind"), jv_string(b->kind), jv_string("apiGroup"),
				 jv_string("rbac.authorization.k8s.io"), jv_string("name"), n);

		subjects = jv_array_append(subjects, s);
	}
	jv_free(names);
	return JV_OBJECT(jv_string("apiVersion"), jv_string("rbac.authorization.k8s.io/v1"), jv_string("kind"),
			 jv_string("ClusterRoleBinding"), jv_string("metadata"), meta(b->name), jv_string("subjects"),
			 subjects, jv_string("roleRef"),
			 JV_OBJECT(jv_string("apiGroup"), jv_string("rbac.authorization.k8s.io"), jv_string("kind"),
				   jv_string("ClusterRole"), jv_string("name"), jv_string(b->name)));
}

static void create(const char *resource, jv obj)
{
	struct kop_buf p = KOP_BUF_INIT;
	char name[128];
	int code;

	snprintf(name, sizeof(name), "%s", ksim_str(obj, "metadata.name"));
	kop_buf_addf(&p, "/apis/rbac.authorization.k8s.io/v1/%s?fieldManager=kube-apiserver", resource);
	code = ksim_call("system:apiserver", "POST", p.buf, NULL, obj, NULL);
	if (code != 201 && code != 409)	/* 409: there already (replayed from --data) */
		die(KOP_EXIT_TEMP, "unable to create the default %s '%s': code %d", resource, name, code);
	kop_buf_release(&p);
}

void rbac_bootstrap(void)
{
	for (size_t i = 0; i < sizeof(roles) / sizeof(*roles); i++)
		create("clusterroles", role(roles[i]));
	for (size_t i = 0; i < sizeof(bindings) / sizeof(*bindings); i++)
		create("clusterrolebindings", binding(&bindings[i]));
}

int rbac_default_binding(const char *name)
{
	return !strcmp(name, "system:basic-user") || !strcmp(name, "system:discovery") ||
	       !strcmp(name, "system:public-info-viewer");
}
