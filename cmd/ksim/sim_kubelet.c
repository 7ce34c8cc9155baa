/*
 * The kubelet: a pod on the one Node goes from Pending through image pulls
 * (a broken image backs off) to Running and Ready, and to Succeeded when
 * its restartPolicy lets it end; and the Node it registers.
 */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include "sim-priv.h"
#include "banned.h"

jv condition(const char *type, const char *status, const char *reason, const char *message, const char *now)
{
	jv c = JV_OBJECT(jv_string("type"), jv_string(type), jv_string("status"), jv_string(status),
			 jv_string("lastProbeTime"), jv_null(), jv_string("lastTransitionTime"), jv_string(now));

	if (reason)
		c = jv_object_set(c, jv_string("reason"), jv_string(reason));
	if (message)
		c = jv_object_set(c, jv_string("message"), jv_string(message));
	return c;
}

static int image_broken(const char *image)
{
	return sim_opts.broken_image && *sim_opts.broken_image && image && !fnmatch(sim_opts.broken_image, image, 0);
}

/* Names of the pod's containers, "[a b]" for the not-ready messages. */
static char *container_names(jv containers)
{
	struct kop_buf b = KOP_BUF_INIT;

	kop_buf_adds(&b, "[");
	jv_array_foreach(containers, i, c) {
		kop_buf_addf(&b, "%s%s", i ? " " : "", str(c, "name", ""));
		jv_free(c);
	}
	kop_buf_adds(&b, "]");
	return kop_buf_detach(&b, NULL);
}

/*
 * The pod's status at a stage: "running", "ErrImagePull", "ImagePullBackOff"
 * or "completed". The container states follow the stage; a container whose
 * image is fine runs even when another's is broken.
 */
static jv pod_status(jv pod, const char *stage, const char *now)
{
	jv containers = get(pod, "spec", "containers", NULL), cs = jv_array(), conds;
	const char *start = ksim_str(pod, "status.startTime");
	int all_ready = 1, completed = !strcmp(stage, "completed");
	char ip[32], cid[80];
	unsigned h = 0;
	jv st;

	for (const char *p = str(pod, "metadata.uid", ""); *p; p++)
		h = h * 31 + (unsigned char)*p;
	snprintf(ip, sizeof(ip), "10.244.%u.%u", (h >> 8) & 255, (h & 255) ? (h & 255) : 1);
	if (jv_get_kind(containers) != JV_KIND_ARRAY)
		containers = (jv_free(containers), jv_array());
	jv_array_foreach(containers, i, c) {
		const char *image = str(c, "image", "");
		jv state;
		int ready = 0;

		snprintf(cid, sizeof(cid), "containerd://%08x%08x%02d", h, (unsigned)random(), i);
		if (image_broken(image) && !completed) {
			struct kop_buf m = KOP_BUF_INIT;
			const char *reason = !strcmp(stage, "ErrImagePull") ? "ErrImagePull" : "ImagePullBackOff";

			if (!strcmp(reason, "ErrImagePull"))
				kop_buf_addf(&m, "rpc error: code = NotFound desc = failed to pull and unpack image \"%s\": failed to resolve reference \"%s\": not found",
					     image, image);
			else
				kop_buf_addf(&m, "Back-off pulling image \"%s\"", image);
			state = JV_OBJECT(jv_string("waiting"), JV_OBJECT(jv_string("reason"), jv_string(reason),
									  jv_string("message"), jv_string(m.buf)));
			kop_buf_release(&m);
			all_ready = 0;
		} else if (completed) {
			state = JV_OBJECT(jv_string("terminated"),
					  JV_OBJECT(jv_string("exitCode"), jv_number(0), jv_string("reason"),
						    jv_string("Completed"), jv_string("startedAt"),
						    jv_string(start ? start : now), jv_string("finishedAt"), jv_string(now),
						    jv_string("containerID"), jv_string(cid)));
			all_ready = 0;
		} else {
			state = JV_OBJECT(jv_string("running"), JV_OBJECT(jv_string("startedAt"), jv_string(now)));
			ready = 1;
		}
		{
			jv e = JV_OBJECT(jv_string("name"), jv_string(str(c, "name", "")), jv_string("state"), state,
					 jv_string("lastState"), jv_object(), jv_string("ready"), jv_bool(ready),
					 jv_string("restartCount"), jv_number(0), jv_string("image"), jv_string(image),
					 jv_string("imageID"), jv_string(""));

			if (ready || completed) {
				struct kop_buf id = KOP_BUF_INIT;

				kop_buf_addf(&id, "%s@sha256:%08x%08x", image, h, h ^ 0x5bd1e995u);
				e = jv_object_set(e, jv_string("imageID"), jv_string(id.buf));
				e = jv_object_set(e, jv_string("containerID"), jv_string(cid));
				kop_buf_release(&id);
			}
			e = jv_object_set(e, jv_string("started"), jv_bool(ready));
			cs = jv_array_append(cs, e);
		}
		jv_free(c);
	}
	if (all_ready && jv_array_length(jv_copy(containers)) > 0) {
		conds = JV_ARRAY(condition("Initialized", "True", NULL, NULL, now),
				 condition("Ready", "True", NULL, NULL, now),
				 condition("ContainersReady", "True", NULL, NULL, now),
				 condition("PodScheduled", "True", NULL, NULL, now));
	} else {
		char *names = container_names(containers);
		struct kop_buf m = KOP_BUF_INIT;
		const char *reason = completed ? "PodCompleted" : "ContainersNotReady";

		kop_buf_addf(&m, "containers with unready status: %s", names);
		conds = JV_ARRAY(condition("Initialized", "True", completed ? "PodCompleted" : NULL, NULL, now),
				 condition("Ready", "False", reason, completed ? NULL : m.buf, now),
				 condition("ContainersReady", "False", reason, completed ? NULL : m.buf, now),
				 condition("PodScheduled", "True", NULL, NULL, now));
		kop_buf_release(&m);
		free(names);
	}
	st = JV_OBJECT(jv_string("phase"),
		       jv_string(completed ? "Succeeded" : !strcmp(stage, "running") ? "Running" : "Pending"),
		       jv_string("conditions"), conds, jv_string("hostIP"), jv_string(NODE_IP), jv_string("hostIPs"),
		       JV_ARRAY(JV_OBJECT(jv_string("ip"), jv_string(NODE_IP)))) ;
	st = jv_object_set(st, jv_string("podIP"), jv_string(ip));
	st = jv_object_set(st, jv_string("podIPs"), JV_ARRAY(JV_OBJECT(jv_string("ip"), jv_string(ip))));
	st = jv_object_set(st, jv_string("startTime"), jv_string(start ? start : now));
	st = jv_object_set(st, jv_string("containerStatuses"), cs);
	st = jv_object_set(st, jv_string("qosClass"), jv_string(str(pod, "status.qosClass", "BestEffort")));
	jv_free(containers);
	return st;
}

/* The stage the stored status shows. */
static const char *pod_stage(jv pod)
{
	const char *phase = str(pod, "status.phase", "Pending");
	jv cs = get(pod, "status", "containerStatuses", NULL);
	const char *stage = "new";

	if (!strcmp(phase, "Running"))
		stage = "running";
	else if (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))
		stage = "completed";
	else if (jv_get_kind(cs) == JV_KIND_ARRAY) {
		jv_array_foreach(cs, i, c) {
			const char *r = ksim_str(c, "state.waiting.reason");

			if (r && !strcmp(r, "ErrImagePull"))
				stage = "ErrImagePull";
			else if (r && !strcmp(r, "ImagePullBackOff") && strcmp(stage, "ErrImagePull"))
				stage = "ImagePullBackOff";
			jv_free(c);
		}
	}
	jv_free(cs);
	return stage;
}

static int any_broken(jv pod)
{
	jv containers = get(pod, "spec", "containers", NULL);
	int broken = 0;

	if (jv_get_kind(containers) == JV_KIND_ARRAY) {
		jv_array_foreach(containers, i, c) {
			broken |= image_broken(ksim_str(c, "image"));
			jv_free(c);
		}
	}
	jv_free(containers);
	return broken;
}

void sync_pod(const char *ns, jv pod)
{
	const char *stage = pod_stage(pod), *next = NULL;
	const char *policy = str(pod, "spec.restartPolicy", "Always");
	char key[128], now[32];
	long delay = sim_opts.pod_start_ms;

	if (deleting(pod) || !strcmp(stage, "completed") || strcmp(str(pod, "spec.nodeName", ""), NODE_NAME))
		return;	/* (sim_pods.c binds the pods a client makes to this node) */
	if (!strcmp(stage, "new")) {
		next = any_broken(pod) ? "ErrImagePull" : "running";
	} else if (!strcmp(stage, "ErrImagePull")) {
		next = any_broken(pod) ? "ImagePullBackOff" : "running";
	} else if (!strcmp(stage, "ImagePullBackOff")) {
		if (!any_broken(pod))
			next = "running";	/* the image was fixed in place */
	} else if (!strcmp(stage, "running") && strcmp(policy, "Always")) {	/* Never, OnFailure: they end */
		next = "completed";
		delay = sim_opts.pod_run_ms;
	}
	if (!next)
		return;
	snprintf(key, sizeof(key), "pod/%s/%s", str(pod, "metadata.uid", ""), stage);
	if (!timer_due(ns, key, delay))
		return;
	now_rfc(now);
	put_status(KUBELET, "/api/v1", "pods", jv_copy(pod), pod_status(pod, next, now), "kubelet");
}


/* The identities a kubelet reports (typed clients require them): made once, from random. */
static jv node_info_ids(jv st)
{
	char boot[40], machine[40], uuid[40];

	ksim_uuid(boot);
	ksim_uuid(uuid);
	ksim_uuid(machine);
	for (char *p = machine, *q = machine; ; q++)	/* a machine-id: 32 hex digits, no dashes */
		if (*q != '-' && !(*p++ = *q))
			break;
	st = jv_setpath(st, JV_ARRAY(jv_string("nodeInfo"), jv_string("machineID")), jv_string(machine));
	st = jv_setpath(st, JV_ARRAY(jv_string("nodeInfo"), jv_string("systemUUID")), jv_string(uuid));
	st = jv_setpath(st, JV_ARRAY(jv_string("nodeInfo"), jv_string("bootID")), jv_string(boot));
	st = jv_setpath(st, JV_ARRAY(jv_string("nodeInfo"), jv_string("kernelVersion")), jv_string("6.1.0-ksim"));
	st = jv_object_set(st, jv_string("daemonEndpoints"),
			   JV_OBJECT(jv_string("kubeletEndpoint"), JV_OBJECT(jv_string("Port"), jv_number(10250))));
	return jv_object_set(st, jv_string("images"), jv_array());
}

void ensure_node(void)
{
	jv node = jv_null(), st;
	char now[32];
	int code = ksim_call(KUBELET, "GET", "/api/v1/nodes/" NODE_NAME, NULL, jv_null(), &node);

	now_rfc(now);
	if (code == 404) {
		jv_free(node);
		node = jv_null();
		jv labels = JV_OBJECT(jv_string("kubernetes.io/hostname"), jv_string(NODE_NAME),
				      jv_string("kubernetes.io/os"), jv_string("linux"), jv_string("kubernetes.io/arch"),
				      jv_string("amd64"), jv_string("beta.kubernetes.io/os"), jv_string("linux"),
				      jv_string("beta.kubernetes.io/arch"), jv_string("amd64"));
		jv body = JV_OBJECT(jv_string("apiVersion"), jv_string("v1"), jv_string("kind"), jv_string("Node"),
				    jv_string("metadata"),
				    JV_OBJECT(jv_string("name"), jv_string(NODE_NAME), jv_string("labels"), labels),
				    jv_string("spec"), JV_OBJECT(jv_string("podCIDR"), jv_string("10.244.0.0/16")));

		code = ksim_call(KUBELET, "POST", "/api/v1/nodes?fieldManager=kubelet", NULL, body, &node);
	}
	if (code != 200 && code != 201) {
		log_warn("simulated cluster: unable to create node '%s': code %d", NODE_NAME, code);
		jv_free(node);
		return;
	}
	if (ksim_str(node, "status.nodeInfo.kubeletVersion")) {
		jv_free(node);
		return;
	}
	{
		jv res = JV_OBJECT(jv_string("cpu"), jv_string("2"), jv_string("memory"), jv_string("24Gi"),
				   jv_string("pods"), jv_string("110"), jv_string("ephemeral-storage"),
				   jv_string("100Gi"));
		jv conds = jv_array();
		static const char *const pressure[][3] = {
			{ "MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available" },
			{ "DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure" },
			{ "PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available" },
		};

		for (size_t i = 0; i < 3; i++)
			conds = jv_array_append(conds, JV_OBJECT(jv_string("type"), jv_string(pressure[i][0]),
								 jv_string("status"), jv_string("False"),
								 jv_string("lastHeartbeatTime"), jv_string(now),
								 jv_string("lastTransitionTime"), jv_string(now),
								 jv_string("reason"), jv_string(pressure[i][1]),
								 jv_string("message"), jv_string(pressure[i][2])));
		conds = jv_array_append(conds, JV_OBJECT(jv_string("type"), jv_string("Ready"), jv_string("status"),
							 jv_string("True"), jv_string("lastHeartbeatTime"),
							 jv_string(now), jv_string("lastTransitionTime"), jv_string(now),
							 jv_string("reason"), jv_string("KubeletReady"),
							 jv_string("message"),
							 jv_string("kubelet is posting ready status")));
		st = JV_OBJECT(jv_string("capacity"), jv_copy(res), jv_string("allocatable"), res,
			       jv_string("conditions"), conds, jv_string("addresses"),
			       JV_ARRAY(JV_OBJECT(jv_string("type"), jv_string("InternalIP"), jv_string("address"),
						  jv_string(NODE_IP)),
					JV_OBJECT(jv_string("type"), jv_string("Hostname"), jv_string("address"),
						  jv_string(NODE_NAME))),
			       jv_string("nodeInfo"),
			       JV_OBJECT(jv_string("kubeletVersion"), jv_string("v1.30.0"), jv_string("kubeProxyVersion"),
					 jv_string("v1.30.0"), jv_string("operatingSystem"), jv_string("linux"),
					 jv_string("architecture"), jv_string("amd64"), jv_string("containerRuntimeVersion"),
					 jv_string("containerd://1.7.0")));
		st = jv_setpath(st, JV_ARRAY(jv_string("nodeInfo"), jv_string("osImage")), jv_string("ksim simulated node"));
		st = node_info_ids(st);
	}
	node = jv_object_set(node, jv_string("status"), st);
	code = ksim_call(KUBELET, "PUT", "/api/v1/nodes/" NODE_NAME "/status?fieldManager=kubelet", NULL, node, NULL);
	if (code != 200)
		log_warn("simulated cluster: unable to set the status of node '%s': code %d", NODE_NAME, code);
}
