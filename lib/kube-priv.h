#ifndef KOP_KUBE_PRIV_H
#define KOP_KUBE_PRIV_H
/*
 * What lib/kubeconfig*.c and lib/kube.c share and nobody else needs: the
 * exec credential plugin and base64.
 */
#include <time.h>
#include "kube.h"

enum kube_exec_interactive { KUBE_EXEC_NEVER, KUBE_EXEC_IF_AVAILABLE, KUBE_EXEC_ALWAYS };

struct kube_exec {
	char *api_version;	/* client.authentication.k8s.io/v1 or v1beta1 */
	char *command;		/* as configured, relative paths resolved */
	char **argv;		/* argv[0] = command; NULL-terminated */
	char **env;		/* "NAME=value" added to the environment; NULL-terminated */
	enum kube_exec_interactive interactive;
	char *install_hint;
	char *cluster_info;	/* spec.cluster JSON when provideClusterInfo, else NULL */

	/* The cached credential: valid while have and (expiry == 0 or now < expiry). */
	int have;
	char *token;
	char *cert_pem, *key_pem;
	size_t cert_len, key_len;
	time_t expiry;
	unsigned runs;		/* how many times the plugin ran (tests, metrics) */
};

/*
 * Makes sure e holds a valid credential, running the plugin when there is
 * none or it expired. 1 when the plugin ran (the credential may be new),
 * 0 when the cached one is still good, -1 with err ("getting credentials: …").
 */
int kube_exec_credential(struct kube_exec *e, char *err);
/* Drops the cached credential (after a 401): the next call runs the plugin. */
void kube_exec_forget(struct kube_exec *e);
void kube_exec_free(struct kube_exec *e);

/* Standard base64 (whitespace ignored, padding required). 0 and a heap buffer, or -1. */
int kube_base64_decode(const char *in, size_t len, char **out, size_t *out_len);

/* Reads a token file, whitespace trimmed. 0 and *token (heap), or -1 with err. */
int kube_read_token_file(const char *path, char **token, char *err);

/*
 * The discovery cache inside a client (lib/discovery.c): docs maps
 * groupVersion -> APIResourceList, groups is the APIGroupList with core first;
 * kinds maps "apiVersion\0kind" -> the APIResource kube_resolve_gvk found in
 * docs, and is emptied whenever docs changes.
 */
void kube_discovery_cache(struct kube_client *c, jv **docs, jv **groups, jv **kinds, int **have);

#endif
