/*
 * The endpoints and endpointslice controllers: a Service with a selector
 * has an Endpoints of its name and an EndpointSlice (SERVICE-xxxxx, owned
 * by the Service) listing the pods its selector matches that have an IP:
 * ready ones as addresses, the others as notReadyAddresses (Endpoints) or
 * with ready false (EndpointSlice); ports are the Service's, a named
 * targetPort resolved from each pod's containers. The Endpoints of a
 * Service that went (or lost its selector) is deleted when this controller
 * made it; an EndpointSlice goes with its Service (garbage collector).
 */
#include <stdlib.h>
#include <string.h>
#include "sim.h"
#include "banned.h"

static jv field(jv o, const char *a, const char *b)
{
	return jv_getpath(jv_copy(o), b ? JV_ARRAY(jv_string(a), jv_string(b)) : JV_ARRAY(jv_string(a)));
}

/* The pod's port a Service port's targetPort names (a number as it is; the port when absent). */
static long target_port(jv sp, jv pod)
{
	jv tp = jv_object_get(jv_copy(sp), jv_string("targetPort")), cs;
	long port = -1;

	if (jv_get_kind(tp) == JV_KIND_NUMBER) {
		port = (long)jv_number_value(tp);
	} else if (jv_get_kind(tp) == JV_KIND_STRING) {
		char *end;
		long n = strtol(jv_string_value(tp), &end, 10);

		if (!*end && *jv_string_value(tp)) {
			port = n;
		} else {
			cs = field(pod, "spec", "containers");
			if (jv_get_kind(cs) == JV_KIND_ARRAY) {
				jv_array_foreach(cs, i, c) {
					jv ps = jv_object_get(c, jv_string("ports"));

					if (jv_get_kind(ps) == JV_KIND_ARRAY) {
						jv_array_foreach(ps, j, p) {
							const char *nm = ksim_str(p, "name");
							jv cp = jv_object_get(jv_copy(p), jv_string("containerPort"));

							if (port < 0 && nm && !strcmp(nm, jv_string_value(tp)) &&
							    jv_get_kind(cp) == JV_KIND_NUMBER)
								port = (long)jv_number_value(cp);
							jv_free(cp);
							jv_free(p);
						}
					}
					jv_free(ps);
				}
			}
			jv_free(cs);
		}
	} else {
		jv p = jv_object_get(jv_copy(sp), jv_string("port"));

		port = jv_get_kind(p) == JV_KIND_NUMBER ? (long)jv_number_value(p) : -1;
		jv_free(p);
	}
	jv_free(tp);
	return port;
}

static jv ports_for(jv sports, jv pod)
{
	jv out = jv_array();

	jv_array_foreach(sports, i, sp) {
		long port = target_port(sp, pod);
		jv e = JV_OBJECT(jv_string("port"), jv_number((double)port), jv_string("protocol"),
				 jv_string(ksim_str(sp, "protocol") ? ksim_str(sp, "protocol") : "TCP"));

		if (ksim_str(sp, "name") && *ksim_str(sp, "name"))
			e = jv_object_set(e, jv_string("name"), jv_string(ksim_str(sp, "name")));
		if (ksim_str(sp, "appProtocol"))
			e = jv_object_set(e, jv_string("appProtocol"), jv_string(ksim_str(sp, "appProtocol")));
		if (port >= 0)
			out = jv_array_append(out, e);
		else
			jv_free(e);
		jv_free(sp);
	}
	jv_free(sports);
	return out;
}

static jv target_ref(jv pod)
{
	return JV_OBJECT(jv_string("kind"), jv_string("Pod"), jv_string("namespace"),
			 jv_string(ksim_str(pod, "metadata.namespace")), jv_string("name"),
			 jv_string(ksim_str(pod, "metadata.name")), jv_string("uid"), jv_string(ksim_str(pod, "metadata.uid")));
}

/* 1 when the object's last write was this controller's (its managedFields name kube-controller-manager). */
static int made_by_controller(jv obj)
{
	jv mf = field(obj, "metadata", "managedFields");
	int yes = 0;

	if (jv_get_kind(mf) == JV_KIND_ARRAY) {
		jv_array_foreach(mf, i, m) {
			const char *mgr = ksim_str(m, "manager");

			if (mgr && !strcmp(mgr, "kube-controller-manager"))
				yes = 1;
			jv_free(m);
		}
	}
	jv_free(mf);
	return yes;
}

static jv slice_of(jv slices, const char *svc, const char *uid)
{
	jv found = jv_invalid();

	jv_array_foreach(slices, i, s) {
		jv name = field(s, "metadata", "labels");
		jv v = jv_get_kind(name) == JV_KIND_OBJECT ? jv_object_get(name, jv_string("kubernetes.io/service-name")) :
							     (jv_free(name), jv_invalid());

		if (!jv_is_valid(found) && jv_get_kind(v) == JV_KIND_STRING && !strcmp(jv_string_value(v), svc) &&
		    sim_is_controlled_by(s, uid))
			found = jv_copy(s);
		jv_free(v);
		jv_free(s);
	}
	jv_free(slices);
	return found;
}

static void sync_service(const char *ns, jv svc, jv pods, jv slices)
{
	const char *name = ksim_str(svc, "metadata.name"), *uid = ksim_str(svc, "metadata.uid");
	jv sel = field(svc, "spec", "selector"), sports = field(svc, "spec", "ports");
	jv ready = jv_array(), notready = jv_array(), eps = jv_array(), ports = jv_null(), ep, have, slice;
	jv want_ep;

	if (jv_get_kind(sports) != JV_KIND_ARRAY)
		sports = (jv_free(sports), jv_array());
	jv_array_foreach(pods, i, pod) {
		const char *ip = ksim_str(pod, "status.podIP");

		jv pp = jv_null();

		if (ip && !ksim_str(pod, "metadata.deletionTimestamp") &&
		    sim_selector_matches(JV_OBJECT(jv_string("matchLabels"), jv_copy(sel)), pod))
			pp = ports_for(jv_copy(sports), pod);
		/* a pod none of whose ports resolves (a named targetPort it lacks) is not listed */
		if (jv_get_kind(pp) == JV_KIND_ARRAY &&
		    (jv_array_length(jv_copy(pp)) > 0 || jv_array_length(jv_copy(sports)) == 0)) {
			int r = sim_pod_ready(pod);
			jv addr = JV_OBJECT(jv_string("ip"), jv_string(ip));
			const char *node = ksim_str(pod, "spec.nodeName");
			jv e = JV_OBJECT(jv_string("addresses"), JV_ARRAY(jv_string(ip)), jv_string("conditions"),
					 JV_OBJECT(jv_string("ready"), jv_bool(r), jv_string("serving"), jv_bool(r),
						   jv_string("terminating"), jv_false()));

			if (node) {
				addr = jv_object_set(addr, jv_string("nodeName"), jv_string(node));
				e = jv_object_set(e, jv_string("nodeName"), jv_string(node));
			}
			addr = jv_object_set(addr, jv_string("targetRef"), target_ref(pod));
			e = jv_object_set(e, jv_string("targetRef"), target_ref(pod));
			if (r)
				ready = jv_array_append(ready, addr);
			else
				notready = jv_array_append(notready, addr);
			eps = jv_array_append(eps, e);
			if (jv_get_kind(ports) == JV_KIND_NULL)
				ports = jv_copy(pp);	/* (pods whose ports differ would have a subset of their own) */
		}
		jv_free(pp);
		jv_free(pod);
	}
	jv_free(pods);
	if (jv_get_kind(ports) == JV_KIND_NULL) {
		jv none = jv_object();

		ports = ports_for(jv_copy(sports), none);
		jv_free(none);
	}
	/* Endpoints */
	{
		jv subset = jv_object();

		if (jv_array_length(jv_copy(ready)))
			subset = jv_object_set(subset, jv_string("addresses"), jv_copy(ready));
		if (jv_array_length(jv_copy(notready)))
			subset = jv_object_set(subset, jv_string("notReadyAddresses"), jv_copy(notready));
		want_ep = jv_object();
		if (jv_object_length(jv_copy(subset)) && jv_array_length(jv_copy(ports))) {
			subset = jv_object_set(subset, jv_string("ports"), jv_copy(ports));
			want_ep = jv_object_set(want_ep, jv_string("subsets"), JV_ARRAY(subset));
		} else {
			jv_free(subset);
		}
	}
	have = ksim_store_get("endpoints", ns, name);
	if (!jv_is_valid(have)) {
		jv labels = field(svc, "metadata", "labels");

		if (jv_get_kind(labels) != JV_KIND_OBJECT)
			labels = (jv_free(labels), jv_object());
		ep = jv_object_merge(JV_OBJECT(jv_string("apiVersion"), jv_string("v1"), jv_string("kind"),
					       jv_string("Endpoints"), jv_string("metadata"),
					       JV_OBJECT(jv_string("name"), jv_string(name), jv_string("labels"), labels)),
				     want_ep);
		sim_write(SIM_KCM, "POST", "/api/v1", ns, "endpoints", NULL, NULL, "kube-controller-manager", ep);
	} else {
		jv cur = field(have, "subsets", NULL), want = jv_object_get(jv_copy(want_ep), jv_string("subsets"));

		if (!jv_equal(jv_copy(cur), jv_copy(want)) &&
		    !(jv_get_kind(cur) == JV_KIND_NULL && !jv_is_valid(want))) {
			jv obj = jv_object_delete(jv_copy(have), jv_string("subsets"));

			if (jv_is_valid(want))
				obj = jv_object_set(obj, jv_string("subsets"), jv_copy(want));
			sim_write(SIM_KCM, "PUT", "/api/v1", ns, "endpoints", name, NULL, "kube-controller-manager", obj);
		}
		jv_free(cur);
		jv_free(want);
		jv_free(want_ep);
	}
	/* EndpointSlice */
	slice = slice_of(jv_copy(slices), name, uid ? uid : "");
	if (!jv_is_valid(slice)) {
		struct kop_buf g = KOP_BUF_INIT;
		jv labels = field(svc, "metadata", "labels");

		if (jv_get_kind(labels) != JV_KIND_OBJECT)
			labels = (jv_free(labels), jv_object());
		labels = jv_object_set(labels, jv_string("kubernetes.io/service-name"), jv_string(name));
		labels = jv_object_set(labels, jv_string("endpointslice.kubernetes.io/managed-by"),
				       jv_string("endpointslice-controller.k8s.io"));
		kop_buf_addf(&g, "%s-", name);
		sim_write(SIM_KCM, "POST", "/apis/discovery.k8s.io/v1", ns, "endpointslices", NULL, NULL,
			  "kube-controller-manager",
			  JV_OBJECT(jv_string("apiVersion"), jv_string("discovery.k8s.io/v1"), jv_string("kind"),
				    jv_string("EndpointSlice"), jv_string("metadata"),
				    JV_OBJECT(jv_string("generateName"), jv_string(g.buf), jv_string("labels"), labels,
					      jv_string("ownerReferences"),
					      JV_ARRAY(JV_OBJECT(jv_string("apiVersion"), jv_string("v1"),
								 jv_string("kind"), jv_string("Service"),
								 jv_string("name"), jv_string(name), jv_string("uid"),
								 jv_string(uid ? uid : ""), jv_string("controller"),
								 jv_true(), jv_string("blockOwnerDeletion"),
								 jv_true()))),
				    jv_string("addressType"), jv_string("IPv4"), jv_string("endpoints"), jv_copy(eps),
				    jv_string("ports"), jv_copy(ports)));
		kop_buf_release(&g);
	} else {
		jv ce = field(slice, "endpoints", NULL), cp = field(slice, "ports", NULL);

		if (jv_get_kind(ce) == JV_KIND_NULL)
			ce = (jv_free(ce), jv_array());
		int same_eps = jv_equal(ce, jv_copy(eps)), same_ports = jv_equal(cp, jv_copy(ports));

		if (!same_eps || !same_ports) {
			char *sn = kop_strdup(ksim_str(slice, "metadata.name"));
			jv obj = jv_object_set(jv_copy(slice), jv_string("endpoints"), jv_copy(eps));

			obj = jv_object_set(obj, jv_string("ports"), jv_copy(ports));
			sim_write(SIM_KCM, "PUT", "/apis/discovery.k8s.io/v1", ns, "endpointslices", sn, NULL,
				  "kube-controller-manager", obj);
			free(sn);
		}
		jv_free(slice);
	}
	jv_free(slices);
	jv_free(ready);
	jv_free(notready);
	jv_free(eps);
	jv_free(ports);
	jv_free(sports);
	jv_free(sel);
}

static int has_selector(jv svc)
{
	jv sel = field(svc, "spec", "selector");
	int yes = jv_get_kind(sel) == JV_KIND_OBJECT && jv_object_length(jv_copy(sel)) > 0;

	jv_free(sel);
	return yes;
}

void sim_endpoints_sync(const char *ns)
{
	jv svcs = sim_list("services", ns), pods, slices, eps;

	pods = sim_list("pods", ns);
	slices = sim_list("endpointslices.discovery.k8s.io", ns);
	jv_array_foreach(svcs, i, svc) {
		if (has_selector(svc) && !ksim_str(svc, "metadata.deletionTimestamp"))
			sync_service(ns, svc, jv_copy(pods), jv_copy(slices));
		jv_free(svc);
	}
	/* the Endpoints this controller made for a Service that went or has no selector any more */
	eps = sim_list("endpoints", ns);
	jv_array_foreach(eps, i, ep) {
		const char *name = ksim_str(ep, "metadata.name");
		jv svc = name ? ksim_store_get("services", ns, name) : jv_invalid();

		if (name && made_by_controller(ep) && (!jv_is_valid(svc) || !has_selector(svc))) {
			char *n = kop_strdup(name);

			sim_write(SIM_KCM, "DELETE", "/api/v1", ns, "endpoints", n, NULL, NULL, jv_null());
			free(n);
		}
		jv_free(ep);
	}
	jv_free(eps);
	jv_free(svcs);
	jv_free(pods);
	jv_free(slices);
}
