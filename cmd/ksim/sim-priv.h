#ifndef KSIM_SIM_PRIV_H
#define KSIM_SIM_PRIV_H
/*
 * The simulated cluster's private API: the helpers sim.c gives the
 * controllers split out of it (sim_kubelet.c, sim_replicaset.c,
 * sim_deployment.c, sim_statefulset.c, sim_service.c) and their sync
 * functions, which sim.c's pass calls. They run on the sim thread with
 * the lock held. The other sim_*.c use the sim_ wrappers in sim.h.
 */
#include "sim.h"

#define KCM "system:kube-controller-manager"
#define KUBELET "system:node:ksim-node"
#define NODE_NAME "ksim-node"
#define NODE_IP "10.0.0.2"

/* sim.c */
jv get(jv obj, const char *a, const char *b, const char *c);
long num(jv obj, const char *a, const char *b, const char *c, long def);
const char *str(jv obj, const char *path, const char *def);
void now_rfc(char *buf);
void owner_template_hash(jv owner, char *out, size_t len);
void random_suffix(char *out);
int is_controlled_by(jv obj, const char *uid);
jv owner_ref(jv owner, const char *api_version, const char *kind);
int deleting(jv obj);
int pod_ready(jv pod);
int call(const char *user, const char *method, const char *prefix, const char *ns, const char *resource,
	 const char *name, const char *sub, const char *manager, jv body);
int put_status(const char *user, const char *prefix, const char *resource, jv obj, jv status,
	       const char *manager);
int put_object(const char *prefix, const char *resource, jv obj);
int timer_due(const char *ns, const char *key, long delay);
jv new_pod(jv owner, const char *owner_kind, const char *name, const char *generate_name, jv labels);

/* sim_kubelet.c */
jv condition(const char *type, const char *status, const char *reason, const char *message, const char *now);
void sync_pod(const char *ns, jv pod);
void ensure_node(void);

/* sim_replicaset.c */
void sync_rs(const char *ns, jv rs, jv pods);

/* sim_deployment.c */
void sync_deploy(const char *ns, jv d, jv rss);

/* sim_statefulset.c */
void sync_sts(const char *ns, jv sts, jv pods, jv pvcs);
void sync_pvc(jv pvc, jv pods);

/* sim_service.c */
void sync_svc(const char *ns, jv svc);

#endif
