/*
 * The in-cluster configuration: the API server from KUBERNETES_SERVICE_HOST and
 * _PORT, the service account's token and CA. When it applies is kubeconfig.c's.
 */
#include <stdlib.h>
#include <string.h>
#include "jsonl.h"
#include "kubeconfig-priv.h"
#include "banned.h"

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

int kc_load_in_cluster(struct kube_config *cfg, const char *host, const char *port, char *err)
{
	const char *dir = getenv("KOP_SERVICEACCOUNT_DIR");
	struct kop_buf b = KOP_BUF_INIT;
	char *text;
	size_t len;
	const char *ns = getenv("POD_NAMESPACE");

	if (!dir || !*dir)
		dir = SA_DIR;
	kop_buf_addf(&b, "%s/token", dir);
	cfg->token_file = kop_buf_detach(&b, NULL);
	if (kube_read_token_file(cfg->token_file, &cfg->token, err))
		return -1;
	kop_buf_addf(&b, "%s/ca.crt", dir);
	/* client-go only logs an unreadable ca.crt and uses the system roots. */
	if (!kop_read_file(b.buf, 1u << 20, &text, &len, NULL)) {
		cfg->ca_pem = text;
		cfg->ca_len = len;
	}
	kop_buf_reset(&b);
	if (ns && *ns) {
		cfg->namespace = kop_strdup(ns);
	} else {
		kop_buf_addf(&b, "%s/namespace", dir);
		if (!kop_read_file(b.buf, 4096, &text, &len, NULL)) {
			cfg->namespace = kc_trim_dup(text, len);
			free(text);
			if (!*cfg->namespace) {
				free(cfg->namespace);
				cfg->namespace = NULL;
			}
		}
		kop_buf_reset(&b);
	}
	if (!cfg->namespace)
		cfg->namespace = kop_strdup("default");
	if (strchr(host, ':'))
		kop_buf_addf(&b, "https://[%s]:%s", host, port);
	else
		kop_buf_addf(&b, "https://%s:%s", host, port);
	cfg->server = kop_buf_detach(&b, NULL);
	cfg->source = kop_strdup("in-cluster");
	return 0;
}
