/*
 * The pod subresources that reach a node (log, exec, attach, portforward)
 * and a pod's graceful deletion, as kube-apiserver answers them. ksim's
 * simulated node runs no containers: a pod no node runs answers as
 * recorded from a real server (log 204, the others 400 "does not have a
 * host assigned"); a pod on ksim's node answers its log with one line that
 * says so, and exec, attach and portforward with a 400 that says ksim runs
 * no containers.
 */
#include <stdlib.h>
#include <string.h>
#include "ksim.h"
#include "banned.h"

#define KSIM_NODE "ksim-node"

int ksim_pod_subresource_name(const char *sub)
{
	return !strcmp(sub, "log") || !strcmp(sub, "exec") || !strcmp(sub, "attach") || !strcmp(sub, "portforward");
}

/* The 400 BadRequest Status of message m (released). */
static jv bad_request(struct kop_buf *m)
{
	jv st = ksim_status(400, "BadRequest", m->buf, jv_null());

	kop_buf_release(m);
	return st;
}

int ksim_pod_subresource(const struct ksim_type *t, const char *ns, const char *name, const char *sub,
			 const char *method, jv *out, char **text)
{
	jv pod;
	const char *node;
	struct kop_buf m = KOP_BUF_INIT;

	*text = NULL;
	if (strcmp(method, "GET") && (!strcmp(sub, "log") || strcmp(method, "POST"))) {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "%s is not supported on resources of kind \"pods/%s\"", method, sub);
		*out = ksim_status(405, "MethodNotAllowed", b.buf, jv_null());
		kop_buf_release(&b);
		return 405;
	}
	pod = ksim_store_get(t->gr, ns, name);
	if (!jv_is_valid(pod)) {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "pods \"%s\" not found", name);
		*out = ksim_status(404, "NotFound", b.buf,
				   JV_OBJECT(jv_string("name"), jv_string(name), jv_string("kind"), jv_string("pods")));
		kop_buf_release(&b);
		return 404;
	}
	node = ksim_str(pod, "spec.nodeName");
	if (!node || !*node) {
		if (!strcmp(sub, "log")) {
			*out = jv_null();
			*text = kop_strdup("");
			return 204;
		}
		kop_buf_addf(&m, "pod %s does not have a host assigned", name);
		*out = bad_request(&m);
		return 400;
	}
	if (strcmp(node, KSIM_NODE)) {
		/* a node ksim does not simulate: nothing answers for it */
		kop_buf_addf(&m, "pod %s is on node %s, which ksim does not run", name, node);
		*out = bad_request(&m);
		return 400;
	}
	if (!strcmp(sub, "log")) {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "ksim: pod %s/%s runs on ksim's simulated node " KSIM_NODE
			     ", which runs no containers and keeps no logs\n", ns, name);
		*out = jv_null();
		*text = kop_buf_detach(&b, NULL);
		return 200;
	}
	kop_buf_addf(&m, "pod %s runs on ksim's simulated node " KSIM_NODE ", which runs no containers: %s is not supported",
		     name, sub);
	*out = bad_request(&m);
	return 400;
}

/*
 * The grace period of a pod's deletion (grace: DeleteOptions', -1 when not
 * given): 0 for a pod no node runs or that has finished, as kube-apiserver
 * decides (pod strategy CheckGracefulDelete), else grace or the pod's
 * spec.terminationGracePeriodSeconds (30 by default).
 */
long ksim_pod_grace(jv pod, long grace)
{
	const char *node = ksim_str(pod, "spec.nodeName"), *phase = ksim_str(pod, "status.phase");
	jv tg;

	if (!node || !*node || (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))))
		return 0;
	if (grace >= 0)
		return grace;
	tg = jv_getpath(jv_copy(pod), JV_ARRAY(jv_string("spec"), jv_string("terminationGracePeriodSeconds")));
	grace = jv_get_kind(tg) == JV_KIND_NUMBER ? (long)jv_number_value(tg) : 30;
	jv_free(tg);
	return grace < 0 ? 0 : grace;
}
