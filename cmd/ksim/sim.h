#ifndef KSIM_SIM_H
#define KSIM_SIM_H
/*
 * ksim's simulated cluster, kept apart from the API server core:
 *
 *   sim.c      the sim thread, its pass over a namespace, timers, and the
 *              helpers the controllers share (sim-priv.h, and the sim_
 *              wrappers below)
 *   sim_*.c    the controllers, one a file, run by sim.c's pass: the
 *              kubelet and the Node, ReplicaSets, Deployments, StatefulSets
 *              and PVCs, LoadBalancer Services, defaults, pods, jobs,
 *              cronjobs, daemonsets, replication controllers, endpoints
 *   faults.c   fault injection: flags, POST /ksim/faults, request faults
 *   persist.c  --data DIR: an fsync'd log of every committed write, replayed
 *              at start
 *   rbac.c     --authorization rbac, --token-file, --sa-token
 *   ext.c      the options of all four and their start/stop
 *
 * The core calls in through these hooks only: main.c (options, init, start,
 * stop), http.c (admin endpoint, faults, authentication, durability before
 * the answer), store.c (every commit is logged) and authz.c (authorization).
 */
#include <stddef.h>
#include <jv.h>
#include "tool.h"
#include "ksim.h"

enum {
	OPT_SIM_FIRST = OPT_TOOL_LAST + 100,
	OPT_NO_SIMULATE = OPT_SIM_FIRST,
	OPT_POD_START_DELAY,
	OPT_POD_RUN_DURATION,
	OPT_LB_DELAY,
	OPT_BROKEN_IMAGE,
	OPT_DATA,
	OPT_AUTHORIZATION,
	OPT_TOKEN_FILE,
	OPT_SA_TOKEN,
	OPT_FAULT_CUT_EVERY,
	OPT_FAULT_RATE,
	OPT_FAULT_CODE,
	OPT_FAULT_LATENCY,
	OPT_FAULT_PATH
};

#define KSIM_SIM_OPTIONS \
	{ "no-simulate", no_argument, NULL, OPT_NO_SIMULATE }, \
	{ "pod-start-delay", required_argument, NULL, OPT_POD_START_DELAY }, \
	{ "pod-run-duration", required_argument, NULL, OPT_POD_RUN_DURATION }, \
	{ "lb-delay", required_argument, NULL, OPT_LB_DELAY }, \
	{ "broken-image", required_argument, NULL, OPT_BROKEN_IMAGE }, \
	{ "data", required_argument, NULL, OPT_DATA }, \
	{ "authorization", required_argument, NULL, OPT_AUTHORIZATION }, \
	{ "token-file", required_argument, NULL, OPT_TOKEN_FILE }, \
	{ "sa-token", required_argument, NULL, OPT_SA_TOKEN }, \
	{ "fault-cut-every", required_argument, NULL, OPT_FAULT_CUT_EVERY }, \
	{ "fault-rate", required_argument, NULL, OPT_FAULT_RATE }, \
	{ "fault-code", required_argument, NULL, OPT_FAULT_CODE }, \
	{ "fault-latency", required_argument, NULL, OPT_FAULT_LATENCY }, \
	{ "fault-path", required_argument, NULL, OPT_FAULT_PATH }

#define KSIM_SIM_USAGE \
	"\nSimulated cluster (docs/ksim.md):\n" \
	"  --no-simulate          no controllers, no scheduler, no kubelet, no Node, no default ServiceAccounts,\n" \
	"                         kube-root-ca.crt or default/kubernetes (a bare API server)\n" \
	"  --pod-start-delay D    Pending to Running and Ready after D (default 1s; 0 = at once)\n" \
	"  --pod-run-duration D   pods of restartPolicy Never or OnFailure succeed after running D (default 2s)\n" \
	"  --lb-delay D           LoadBalancer Services get an ingress IP after D (default 1s)\n" \
	"  --broken-image PAT     images matching PAT (fnmatch) never pull (default '*:broken*')\n" \
	"  --data DIR             keep every write in DIR/wal.jsonl (fsync'd before the answer), replay at start\n" \
	"  --authorization MODE   AlwaysAllow (default) or rbac (Roles and bindings enforced; the default\n" \
	"                         ClusterRoles and bindings made at start)\n" \
	"  --token-file FILE      lines TOKEN,USER[,GROUP...] (kube-apiserver's static token file)\n" \
	"  --sa-token NS/NAME=T   token T authenticates as ServiceAccount NAME in NS (repeatable);\n" \
	"                         so do the tokens of POST serviceaccounts/NAME/token (kubectl create\n" \
	"                         token), until they expire or the ServiceAccount is deleted\n" \
	"  --fault-cut-every D    cut every watch every D\n" \
	"  --fault-rate R         answer a share R (0..1) of API requests with --fault-code\n" \
	"  --fault-code N         429 (with Retry-After: 1), 500 or 503 (default 429)\n" \
	"  --fault-latency D      delay every API request by D\n" \
	"  --fault-path PREFIX    faults only for paths starting with PREFIX\n" \
	"\n" \
	"Admin endpoints (no authentication): POST /ksim/faults (JSON settings; GET shows\n" \
	"them), /ksim/stats (GET; POST {\"reset\":true}), /ksim/cut-watches, /ksim/error-watches,\n" \
	"/ksim/compact.\n"

/* ext.c: option parsing (1 = handled), then init (before bootstrap), start (serving), stop. */
int ksim_sim_option(int c, const char *arg);
void ksim_sim_init(void);
void ksim_sim_start(void);
void ksim_sim_stop(void);

/* sim.c */
struct sim_opts {
	int enabled;
	long pod_start_ms, pod_run_ms, lb_ms;
	const char *broken_image;
};
extern struct sim_opts sim_opts;
void sim_start(void);
void sim_stop(void);

/*
 * sim.c's helpers for the controllers in sim_*.c. They run on the sim
 * thread with the lock held, as sim.c's own do.
 */
#define SIM_KCM "system:kube-controller-manager"
#define SIM_KUBELET "system:node:ksim-node"
#define SIM_NODE "ksim-node"
/* A write to PREFIX[/namespaces/NS]/RESOURCE[/NAME][/SUB] (body consumed); logs what is neither 2xx, 404 nor 409. */
int sim_write(const char *user, const char *method, const char *prefix, const char *ns, const char *resource,
	      const char *name, const char *sub, const char *manager, jv body);
/* PUT of obj (consumed) with status (consumed) to its status subresource, as user (kubelet or KCM). */
int sim_put_status(const char *user, const char *prefix, const char *resource, jv obj, jv status);
/* 1 when the timer key (namespace ns) of delay ms is due; the first call starts it. */
int sim_timer_due(const char *ns, const char *key, long delay);
/* A pod of owner's spec.template, controlled by owner (apiVersion, kind), on the simulated node. */
jv sim_new_pod(jv owner, const char *api_version, const char *kind, const char *generate_name, jv labels);
int sim_pod_ready(jv pod);
int sim_is_controlled_by(jv obj, const char *uid);
jv sim_condition(const char *type, const char *status, const char *reason, const char *message, const char *now);
/* The objects of gr in ns (lock held; plain copies sharing storage with the store). */
jv sim_list(const char *gr, const char *ns);
/* 1 when this pass syncs obj: `only` is true (every object) or an object whose keys are the uids to sync. */
int sim_wanted(jv only, jv obj);
/* 1 when obj's labels match a LabelSelector (sel consumed; matchLabels and matchExpressions; {} all). */
int sim_selector_matches(jv sel, jv obj);

/* ksim's serving certificate (PEM) with --tls, else NULL: kube-root-ca.crt's ca.crt (sim_defaults.c). */
extern const char *ksim_ca_pem;

/* The controllers in sim_*.c, each over one namespace (lock held). */
void sim_defaults_sync(const char *ns, int terminating);	/* sim_defaults.c */
/* sim_pods.c; only as sim_wanted's; pods: the pass's, every wanted one (a whole pass lists them again); borrowed */
void sim_pods_sync(const char *ns, jv only, jv pods);
void sim_job_sync(const char *ns);			/* sim_job.c */
int sim_job_finished(jv job);				/* its Complete or Failed condition is True */
void sim_cronjob_sync(const char *ns);			/* sim_cronjob.c */
void sim_daemonset_sync(const char *ns);		/* sim_daemonset.c */
void sim_rc_sync(const char *ns);			/* sim_rc.c */
void sim_endpoints_sync(const char *ns);		/* sim_endpoints.c */
/* Kinds whose events make sim.c's pass visit their namespace (the controllers above). */
int sim_ext_relevant(const char *gr, const char *name, int deleted);

/* faults.c: http.c hooks. */
struct MHD_Connection;
/* Admin requests under /ksim/ this module answers: 1 (answered, *ret set) or 0. */
int ksim_faults_admin(struct MHD_Connection *c, const char *method, const char *url, const char *body, size_t len,
		      int *ret);
/* Before an API request: latency, then maybe an injected error answer (1, *ret set) or 0. */
int ksim_faults_request(struct MHD_Connection *c, const char *method, const char *url, int *ret);
/* A watch about to send bytes: blocks while watches are stalled. */
void ksim_faults_watch_wait(void);
int faults_option(int c, const char *arg);
void faults_start(void);
void faults_stop(void);

/* stats.c: request counters (GET/POST /ksim/stats). */
int ksim_stats_admin(struct MHD_Connection *c, const char *method, const char *url, const char *body, size_t len,
		     int *ret);
/* Every API request, before faults and authentication. */
void ksim_stats_count(struct MHD_Connection *c, const char *method);
/* n bytes of the body of the answer to the request, under its verb, user agent and resource
 * (ksim_response's: "" for none). */
void ksim_stats_sent(struct MHD_Connection *c, const char *method, const char *resource, size_t n);
/* n bytes of a watch stream's events on resource sent to user agent ua. */
void ksim_stats_sent_watch(const char *ua, const char *resource, size_t n);

/* persist.c */
extern const char *persist_dir;
/* Lock held: queues the committed event (type: enum ksim_event_type) for the log. */
void ksim_persist_record(const char *gr, int type, jv obj);
/* Lock NOT held: returns once every write committed so far is on disk. */
void ksim_persist_sync(void);
void persist_load(void);
void persist_close(void);

/* rbac.c */
int rbac_option(int c, const char *arg);
void rbac_init(void);
int rbac_enabled(void);	/* --authorization rbac */
/* rbac_defaults.c: creates the default ClusterRoles and bindings that are missing (ksim_call; dies on failure). */
void rbac_bootstrap(void);
/* 1 for the default bindings whose rules rbac.c also knows by heart (basic-user, discovery, public-info-viewer). */
int rbac_default_binding(const char *name);
void rbac_free(void);
/*
 * Authentication: the user of a bearer token (NULL header = anonymous).
 * Returns 1 and *user when this module decides, 0 to leave it to http.c
 * (no token file, no --sa-token), -1 for an unknown token (401).
 */
int ksim_rbac_authenticate(const char *authorization, const char **user);
/* The user system:serviceaccount:NS:NAME with its groups, a string that lives as long as ksim. */
const char *ksim_rbac_sa_user(const char *ns, const char *name);
/* token.c: a token ksim issued (1: valid for the ServiceAccount in ns and name, heap strings; -1: no longer; 0: not ksim's). */
int ksim_token_authenticate(const char *token, char **ns, char **name);
/*
 * Authorization: 1 allowed, 0 not enabled (the core decides), -1 denied
 * (the core words the 403). reason (may be NULL) gets the RBAC
 * authorizer's reason of an allow by RBAC ("RBAC: allowed by ..."), else
 * nothing.
 */
int ksim_rbac_authorize(const struct ksim_attrs *a, struct kop_buf *reason);
/*
 * The groups of a user as the authenticator gives them, or those of an
 * impersonated user (groups non-NULL, NULL-terminated) (SelfSubjectReview;
 * lock held).
 */
jv ksim_rbac_groups(const char *user, const char *const *groups);
/* The rules a user (groups as above) has in namespace ns (SelfSubjectRulesReview; lock held): two arrays. */
/* Does the PolicyRule rule (not consumed) allow a, as the RBAC authorizer matches it? (lock held) */
int ksim_rbac_rule_allows(jv rule, const struct ksim_attrs *a);
void ksim_rbac_rules(const char *user, const char *const *groups, const char *ns, jv *resource, jv *nonresource);

#endif
