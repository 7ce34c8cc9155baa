/*
 * What kube-controller-manager and kube-apiserver make in a cluster
 * without being asked: the `default` ServiceAccount (serviceaccount
 * controller) and the `kube-root-ca.crt` ConfigMap (root-ca-cert-publisher)
 * in every namespace, remade when deleted; and in `default` the
 * `kubernetes` Service of the API server, with its Endpoints and
 * EndpointSlice (the API server's bootstrap controller).
 */
#include <stdlib.h>
#include <string.h>
#include "sim.h"
#include "banned.h"

/* ksim's serving certificate (self-signed, so its own CA) with --tls, else NULL (main.c). */
const char *ksim_ca_pem;

#define APISERVER_IP "127.0.0.1"
#define APISERVER_PORT 6443

static void ensure_service_account(const char *ns)
{
	if (jv_is_valid(ksim_store_get("serviceaccounts", ns, "default")))
		return;
	sim_write(SIM_KCM, "POST", "/api/v1", ns, "serviceaccounts", NULL, NULL, "kube-controller-manager",
		  JV_OBJECT(jv_string("apiVersion"), jv_string("v1"), jv_string("kind"), jv_string("ServiceAccount"),
			    jv_string("metadata"), JV_OBJECT(jv_string("name"), jv_string("default"))));
}

static int key_count(jv cm)
{
	jv d = jv_object_get(jv_copy(cm), jv_string("data"));
	int n = jv_get_kind(d) == JV_KIND_OBJECT ? jv_object_length(jv_copy(d)) : 0;

	jv_free(d);
	return n;
}

static void ensure_root_ca(const char *ns)
{
	jv cm = ksim_store_get("configmaps", ns, "kube-root-ca.crt");
	const char *want = ksim_ca_pem ? ksim_ca_pem : "", *have;
	jv data = JV_OBJECT(jv_string("ca.crt"), jv_string(want));

	if (!jv_is_valid(cm)) {
		sim_write(SIM_KCM, "POST", "/api/v1", ns, "configmaps", NULL, NULL, "kube-controller-manager",
			  JV_OBJECT(jv_string("apiVersion"), jv_string("v1"), jv_string("kind"), jv_string("ConfigMap"),
				    jv_string("metadata"),
				    JV_OBJECT(jv_string("name"), jv_string("kube-root-ca.crt"), jv_string("annotations"),
					      JV_OBJECT(jv_string("kubernetes.io/description"),
							jv_string("Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."))),
				    jv_string("data"), data));
		return;
	}
	have = ksim_str(cm, "data.ca.crt");
	if (!have || strcmp(have, want) || key_count(cm) != 1) {
		jv obj = jv_object_set(jv_copy(cm), jv_string("data"), data);

		sim_write(SIM_KCM, "PUT", "/api/v1", ns, "configmaps", "kube-root-ca.crt", NULL,
			  "kube-controller-manager", obj);
		return;
	}
	jv_free(data);
}

static jv port(void)
{
	return JV_OBJECT(jv_string("name"), jv_string("https"), jv_string("port"), jv_number(APISERVER_PORT),
			 jv_string("protocol"), jv_string("TCP"));
}

static void ensure_kubernetes_service(void)
{
	jv labels = JV_OBJECT(jv_string("component"), jv_string("apiserver"), jv_string("provider"),
			      jv_string("kubernetes"));

	if (!jv_is_valid(ksim_store_get("services", "default", "kubernetes")))
		sim_write("system:apiserver", "POST", "/api/v1", "default", "services", NULL, NULL, "kube-apiserver",
			  JV_OBJECT(jv_string("apiVersion"), jv_string("v1"), jv_string("kind"), jv_string("Service"),
				    jv_string("metadata"),
				    JV_OBJECT(jv_string("name"), jv_string("kubernetes"), jv_string("labels"),
					      jv_copy(labels)),
				    jv_string("spec"),
				    JV_OBJECT(jv_string("type"), jv_string("ClusterIP"), jv_string("clusterIP"),
					      jv_string("10.96.0.1"), jv_string("clusterIPs"),
					      JV_ARRAY(jv_string("10.96.0.1")), jv_string("ports"),
					      JV_ARRAY(JV_OBJECT(jv_string("name"), jv_string("https"), jv_string("port"),
								 jv_number(443), jv_string("protocol"), jv_string("TCP"),
								 jv_string("targetPort"), jv_number(APISERVER_PORT))),
					      jv_string("sessionAffinity"), jv_string("None"))));
	if (!jv_is_valid(ksim_store_get("endpoints", "default", "kubernetes")))
		sim_write("system:apiserver", "POST", "/api/v1", "default", "endpoints", NULL, NULL, "kube-apiserver",
			  JV_OBJECT(jv_string("apiVersion"), jv_string("v1"), jv_string("kind"), jv_string("Endpoints"),
				    jv_string("metadata"),
				    JV_OBJECT(jv_string("name"), jv_string("kubernetes"), jv_string("labels"),
					      JV_OBJECT(jv_string("endpointslice.kubernetes.io/skip-mirror"),
							jv_string("true"))),
				    jv_string("subsets"),
				    JV_ARRAY(JV_OBJECT(jv_string("addresses"),
						       JV_ARRAY(JV_OBJECT(jv_string("ip"), jv_string(APISERVER_IP))),
						       jv_string("ports"), JV_ARRAY(port())))));
	if (!jv_is_valid(ksim_store_get("endpointslices.discovery.k8s.io", "default", "kubernetes")))
		sim_write("system:apiserver", "POST", "/apis/discovery.k8s.io/v1", "default", "endpointslices", NULL,
			  NULL, "kube-apiserver",
			  JV_OBJECT(jv_string("apiVersion"), jv_string("discovery.k8s.io/v1"), jv_string("kind"),
				    jv_string("EndpointSlice"), jv_string("metadata"),
				    JV_OBJECT(jv_string("name"), jv_string("kubernetes"), jv_string("labels"),
					      JV_OBJECT(jv_string("kubernetes.io/service-name"), jv_string("kubernetes"))),
				    jv_string("addressType"), jv_string("IPv4"), jv_string("endpoints"),
				    JV_ARRAY(JV_OBJECT(jv_string("addresses"), JV_ARRAY(jv_string(APISERVER_IP)),
						       jv_string("conditions"),
						       JV_OBJECT(jv_string("ready"), jv_true()))),
				    jv_string("ports"), JV_ARRAY(port())));
	jv_free(labels);
}

void sim_defaults_sync(const char *ns, int terminating)
{
	if (terminating)
		return;	/* the namespace controller empties it */
	ensure_service_account(ns);
	ensure_root_ca(ns);
	if (!strcmp(ns, "default"))
		ensure_kubernetes_service();
}

int sim_ext_relevant(const char *gr, const char *name, int deleted)
{
	if (!strcmp(gr, "serviceaccounts"))
		return deleted && !strcmp(name, "default");
	if (!strcmp(gr, "configmaps"))
		return !strcmp(name, "kube-root-ca.crt");
	if (!strcmp(gr, "endpoints") || !strcmp(gr, "endpointslices.discovery.k8s.io"))
		return deleted;
	return !strcmp(gr, "jobs.batch") || !strcmp(gr, "cronjobs.batch") || !strcmp(gr, "daemonsets.apps") ||
	       !strcmp(gr, "replicationcontrollers");
}
