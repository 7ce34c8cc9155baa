/*
 * The service controller: a LoadBalancer Service gets an ingress IP after
 * the load balancer delay. Endpoints are sim_endpoints.c's.
 */
#include <stdlib.h>
#include <string.h>
#include "sim-priv.h"
#include "banned.h"

static unsigned ip_seq;	/* load balancer IPs handed out */

void sync_svc(const char *ns, jv svc)
{
	const char *type = str(svc, "spec.type", "ClusterIP");
	jv ingress = get(svc, "status", "loadBalancer", "ingress");
	int has = jv_get_kind(ingress) == JV_KIND_ARRAY && jv_array_length(jv_copy(ingress)) > 0;
	char key[128], ip[32];

	jv_free(ingress);
	if (deleting(svc))
		return;
	if (!strcmp(type, "LoadBalancer") && !has) {
		snprintf(key, sizeof(key), "lb/%s", str(svc, "metadata.uid", ""));
		if (!timer_due(ns, key, sim_opts.lb_ms))
			return;
		ip_seq++;
		snprintf(ip, sizeof(ip), "172.18.%u.%u", 255 - ((ip_seq >> 8) & 63), (ip_seq & 255) ? ip_seq & 255 : 1);
		put_status(KCM, "/api/v1", "services", jv_copy(svc),
			   JV_OBJECT(jv_string("loadBalancer"),
				     JV_OBJECT(jv_string("ingress"),
					       JV_ARRAY(JV_OBJECT(jv_string("ip"), jv_string(ip), jv_string("ipMode"),
								  jv_string("VIP"))))),
			   "kube-controller-manager");
	} else if (strcmp(type, "LoadBalancer") && has) {
		put_status(KCM, "/api/v1", "services", jv_copy(svc),
			   JV_OBJECT(jv_string("loadBalancer"), jv_object()), "kube-controller-manager");
	}
}
