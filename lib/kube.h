#ifndef KOP_KUBE_H
#define KOP_KUBE_H
/*
 * The Kubernetes client every tool shares: configuration as kubectl finds it,
 * requests over libcurl with decoded Status errors, one classification of
 * failures, discovery, as kube-apiserver and client-go speak them.
 *
 * Ownership: structs are owned by the caller and released with their
 * _release or _free function; strings inside them belong to the struct.
 * Secrets (tokens, keys, passwords) live only in memory and never appear in
 * an error message.
 */
#include <curl/curl.h>
#include <jv.h>
#include "kop.h"

/* Set to "1" by iot-operator when it set GNUTLS_NO_IMPLICIT_INIT for its
 * own processes: an exec credential plugin is run without either. */
#define KOP_GNUTLS_OURS "KOP_GNUTLS_OURS"

/* ---- configuration ------------------------------------------------------ */

struct kube_exec;	/* an exec credential plugin (client.authentication.k8s.io v1/v1beta1) */

struct kube_config {
	char *server;		/* "https://127.0.0.1:6443" (no trailing slash) */
	char *context;		/* the context used, or NULL in-cluster */
	char *namespace;	/* the context's namespace, in-cluster namespace, else "default" */
	char *ca_pem;		/* CA bundle (PEM) in memory; NULL = system roots */
	size_t ca_len;
	int insecure;		/* insecure-skip-tls-verify: true */
	char *tls_server_name;
	char *cert_pem, *key_pem;	/* client certificate and key (PEM), in memory */
	size_t cert_len, key_len;
	char *token;		/* static bearer token */
	char *token_file;	/* bearer token file, re-read as it rotates (tokenFile, in-cluster) */
	char *username, *password;	/* basic auth */
	struct kube_exec *exec;
	char *source;		/* where it came from, for messages: "/root/.kube/config", "in-cluster" */
};

/*
 * Loads the configuration the way the operator finds it (controller-runtime's
 * order): the explicit file (kubeconfig != NULL; missing
 * = error), else $KUBECONFIG (a ':'-separated list merged by kubectl's rules:
 * the first file to define a name wins, the first non-empty current-context
 * wins, missing files skipped), else in-cluster (KUBERNETES_SERVICE_HOST/PORT
 * and /var/run/secrets/kubernetes.io/serviceaccount, overridable with
 * $KOP_SERVICEACCOUNT_DIR for tests), else ~/.kube/config. context != NULL
 * overrides current-context. Relative paths resolve against the directory of
 * the file that named them. -1 with err naming the file and the problem.
 */
int kube_config_load(struct kube_config *cfg, const char *kubeconfig, const char *context, char *err);
void kube_config_release(struct kube_config *cfg);

/* ---- client ------------------------------------------------------------- */

struct kube_client;

/* Takes cfg's contents (cfg is left empty). timeout_ms = 0: no overall limit for plain requests. */
struct kube_client *kube_client_new(struct kube_config *cfg, long timeout_ms, char *err);
/* After every handle from kube_easy_new is cleaned up (they share its connection cache). */
void kube_client_free(struct kube_client *c);
const struct kube_config *kube_client_config(const struct kube_client *c);
/* "iot-operator/kapply" style User-Agent; default "iot-operator". */
void kube_client_set_user_agent(struct kube_client *c, const char *ua);

/* The outcome of one request, successful or not. */
struct kube_response {
	long code;		/* HTTP status; 0 when no response arrived (connection, TLS, timeout) */
	jv body;		/* the decoded JSON body (object or Status); jv_null() when none or not JSON */
	char *reason;		/* Status.reason, else derived from code ("NotFound"), else curl's name */
	char *message;		/* Status.message, plain-text body, or curl's error */
	long retry_after_s;	/* Retry-After header or details.retryAfterSeconds; -1 when absent */
	int transient;		/* kube_classify() of this outcome */
	int os_errno;		/* no response: the system's reason (ECONNREFUSED), 0 when none */
};
void kube_response_release(struct kube_response *r);
/*
 * The reason and message of a failed response in buf, "NotFound: configmaps
 * \"x\" not found", for messages: the reason alone when the message only
 * repeats it (a 401's Status says "Unauthorized" twice), either alone when
 * the other is missing. Returns buf.
 */
const char *kube_response_why(const struct kube_response *r, char *buf, size_t size);
/*
 * Why no response came (code 0), in buf: the system's reason ("Connection
 * refused"), else curl's message, else its reason. Returns buf.
 */
const char *kube_no_response_why(const struct kube_response *r, char *buf, size_t size);
/*
 * What a failure was, in buf, for every tool's "retrying … after <it>" and
 * "unable to …: <it>": with a response, its status and kube_response_why
 * ("503 ServiceUnavailable: …"); without one, the server named and why,
 * never a status 0 ("no response from 'https://127.0.0.1:6443': Connection
 * refused"); when nothing could be sent (no credentials), kube_response_why
 * alone. c may be NULL ("the server"). Returns buf.
 */
const char *kube_failure_text(const struct kube_client *c, const struct kube_response *r, char *buf, size_t size);

/*
 * One classification for every tool: transient =
 * no response (connection refused/reset, DNS, timeout), 408, 429, 5xx (and
 * 409 for callers that re-read and retry); permanent = other 4xx. 401 is
 * transient once: the caller calls kube_auth_failed() and retries (so
 * kube_is_transient(401, …) itself says 0, and a 401 that persists exits 100).
 */
int kube_is_transient(long code, CURLcode cc);
/* The exit code for a failed response: 100 permanent, 111 transient. */
int kube_exit_code(const struct kube_response *r);

/*
 * A blocking request. path includes the query ("/api/v1/namespaces?limit=500").
 * body (consumed) is sent as content_type when valid (jv_invalid() = none).
 * Returns 0 on 2xx, -1 otherwise; resp is filled in both cases and must be
 * released. Retries nothing itself: callers decide with their backoff. On a
 * 401 it has already called kube_auth_failed(). When no credential can be
 * had (exec plugin failed), resp has code 0, reason "CredentialsUnavailable"
 * and is transient.
 */
int kube_request(struct kube_client *c, const char *method, const char *path, const char *content_type,
		 jv body, struct kube_response *resp);
/*
 * kube_request for a writer that needs no more of a 2xx answer than its
 * metadata.resourceVersion and uid: resp->body is {"metadata":{...}} with
 * those (kube_response_meta), the rest of the object never built. Any other
 * answer is read as kube_request reads it.
 */
int kube_request_meta(struct kube_client *c, const char *method, const char *path, const char *content_type,
		      jv body, struct kube_response *resp);
/*
 * kube_request (kube_request_meta when meta_only) with the body already
 * written out: text (NULL = none; the caller's) sent as content_type. It
 * touches no jv the caller holds, so a caller may run it on a thread while
 * another uses those (kstatus's writers, which share one lock around the rest).
 */
int kube_request_text(struct kube_client *c, const char *method, const char *path, const char *content_type,
		      const char *text, int meta_only, struct kube_response *resp);

/*
 * For callers that drive many transfers with a curl multi handle (kwatch's
 * watches, kapply's writes in flight): an easy handle set up with the URL,
 * TLS, credentials (exec plugin run or token file re-read as needed),
 * User-Agent, Accept: application/json, TCP keepalive, HTTP/2 where offered.
 * No overall timeout is set (watches run long). The caller adds its own
 * write/header callbacks, body, timeout and CURLOPT_ERRORBUFFER (curl keeps
 * no buffer the caller could read otherwise), may curl_slist_append more
 * headers to *headers (the list is never empty, so its head stays put), and
 * frees *headers with curl_slist_free_all after curl_easy_cleanup (or
 * kube_easy_done). NULL with err when credentials cannot be obtained.
 */
CURL *kube_easy_new(struct kube_client *c, const char *method, const char *path, struct curl_slist **headers,
		    char *err);
/*
 * Instead of curl_easy_cleanup, for a handle of c's done with (out of any
 * multi handle): reset and kept, the next kube_easy_new takes it rather than
 * make one (one is kept: a handle kept before is cleaned up).
 */
void kube_easy_done(struct kube_client *c, CURL *e);
/*
 * Builds a kube_response from a finished transfer: HTTP code, the body
 * bytes, the Retry-After header value (NULL if none), the curl result and
 * error buffer (NULL or "" = curl_easy_strerror(cc)).
 */
void kube_response_from(struct kube_response *r, long code, const char *body, size_t len,
			const char *retry_after, CURLcode cc, const char *curl_err);
/*
 * kube_response_from for a caller that wants only the resourceVersion and
 * uid of a 2xx answer's object: body is then {"metadata":{...}} with those,
 * read without parsing the rest (kop_json_meta); any other answer whole.
 */
void kube_response_meta(struct kube_response *r, long code, const char *body, size_t len, const char *retry_after,
			CURLcode cc, const char *curl_err);
/* After a 401: forget the cached credential (exec plugin re-run, token file re-read). */
void kube_auth_failed(struct kube_client *c);

/* ---- discovery ------------------------------------------------------------ */

struct kube_resource {
	char *group;		/* "" for core */
	char *version;		/* "v1" */
	char *resource;		/* plural, "deployments" */
	char *kind;		/* "Deployment" */
	char *api_version;	/* "apps/v1" or "v1" */
	int namespaced;
	jv verbs;		/* array of strings */
};
void kube_resource_release(struct kube_resource *r);
/* dst (uninitialized) made a copy of src, which stays the caller's. */
void kube_resource_copy(struct kube_resource *dst, const struct kube_resource *src);

/*
 * Resolves a resource name as kubectl does: "deployments", "deployment",
 * "deploy", "Deployment", "deployments.apps", "deployments.v1.apps",
 * "iotservices.cp.iot.sap", "iotservices.v1.cp.iot.sap"; the preferred
 * version of the group wins. Discovery is cached; an unknown name refreshes
 * the cache once before failing (a CRD just created).
 */
int kube_resolve(struct kube_client *c, const char *name, struct kube_resource *out, char *err);
/*
 * The same from an object's apiVersion and kind (kapply, kstatus), asking
 * for the group version's document when the cache does not know the kind:
 * -1 no such kind (permanent); -2 the server could not be asked (fail, when
 * not NULL, is the response to classify and release; err says which).
 */
int kube_resolve_gvk(struct kube_client *c, const char *api_version, const char *kind, struct kube_resource *out,
		     struct kube_response *fail, char *err);
void kube_discovery_invalidate(struct kube_client *c);
/*
 * The resolution itself, on discovery documents already fetched: docs is an
 * object { "<groupVersion>": <APIResourceList>, ... } and groups the /apis
 * APIGroupList plus core (for preferred versions). Pure, for tests.
 */
int kube_discovery_find(jv docs, jv groups, const char *name, struct kube_resource *out, char *err);

/*
 * The path of a collection or an object: ns NULL/"" = all namespaces (or
 * cluster-scoped), name NULL = collection, sub NULL = no subresource.
 * "/apis/apps/v1/namespaces/ns/deployments/d/status". Caller frees.
 */
char *kube_path(const struct kube_resource *r, const char *ns, const char *name, const char *sub);
/* Percent-encodes a query value (label selectors, continue tokens). Caller frees. */
char *kube_query_escape(const char *s);

#endif
