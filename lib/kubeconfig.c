/*
 * Client configuration as kubectl and controller-runtime find it: the order
 * (--kubeconfig, KUBECONFIG, in-cluster, ~/.kube/config), the configuration
 * released, and the small helpers the other kubeconfig files share. Reading
 * and merging kubeconfig files is kubeconfig_file.c's, the in-cluster service
 * account kubeconfig_incluster.c's, the exec credential plugin kubeconfig_exec.c's.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/evp.h>
#include "jsonl.h"
#include "kubeconfig-priv.h"
#include "banned.h"

int kube_base64_decode(const char *in, size_t len, char **out, size_t *out_len)
{
	char *clean = kop_malloc(len + 1);
	unsigned char *buf;
	size_t n = 0, i, pad = 0;
	int got;

	for (i = 0; i < len; i++)
		if (!isspace((unsigned char)in[i]))
			clean[n++] = in[i];
	clean[n] = 0;
	if (n % 4) {
		free(clean);
		return -1;
	}
	if (n && clean[n - 1] == '=')
		pad++;
	if (n > 1 && clean[n - 2] == '=')
		pad++;
	buf = kop_malloc(n / 4 * 3 + 1);
	got = n ? EVP_DecodeBlock(buf, (const unsigned char *)clean, (int)n) : 0;
	free(clean);
	if (got < 0 || (size_t)got < pad) {
		free(buf);
		return -1;
	}
	got -= (int)pad;
	buf[got] = 0;
	*out = (char *)buf;
	*out_len = (size_t)got;
	return 0;
}

char *kc_trim_dup(const char *s, size_t len)
{
	while (len && isspace((unsigned char)*s)) {
		s++;
		len--;
	}
	while (len && isspace((unsigned char)s[len - 1]))
		len--;
	return kop_strndup(s, len);
}

int kube_read_token_file(const char *path, char **token, char *err)
{
	char *text;
	size_t len;

	if (kop_read_file(path, 1u << 20, &text, &len, err))
		return -1;
	*token = kc_trim_dup(text, len);
	free(text);
	return 0;
}

/* Go's os error text: "open /x: no such file or directory". */
void kc_go_open_error(char *buf, size_t size, const char *path, int e)
{
	char msg[128];

	snprintf(msg, sizeof(msg), "%s", strerror(e));
	msg[0] = (char)tolower((unsigned char)msg[0]);
	snprintf(buf, size, "open %s: %s", path, msg);
}

/* A string member of obj (not consumed), heap copy; NULL when absent, null or "". Numbers and bools as text. */
char *kc_get_str(jv obj, const char *key)
{
	jv v;
	char *s = NULL;

	if (jv_get_kind(obj) != JV_KIND_OBJECT)
		return NULL;
	v = jv_object_get(jv_copy(obj), jv_string(key));
	switch (jv_get_kind(v)) {
	case JV_KIND_STRING:
		if (jv_string_length_bytes(jv_copy(v)))
			s = kop_strndup(jv_string_value(v), (size_t)jv_string_length_bytes(jv_copy(v)));
		break;
	case JV_KIND_NUMBER:
	case JV_KIND_TRUE:
	case JV_KIND_FALSE: {
		jv d = jv_dump_string(jv_copy(v), 0);

		s = kop_strdup(jv_string_value(d));
		jv_free(d);
		break;
	}
	default:
		break;
	}
	jv_free(v);
	return s;
}

int kc_get_bool(jv obj, const char *key)
{
	jv v;
	int b;

	if (jv_get_kind(obj) != JV_KIND_OBJECT)
		return 0;
	v = jv_object_get(jv_copy(obj), jv_string(key));
	b = jv_get_kind(v) == JV_KIND_TRUE;
	jv_free(v);
	return b;
}

/* obj[key] (obj not consumed); null when obj is no object or lacks key. */
jv kc_get_member(jv obj, const char *key)
{
	jv v;

	if (jv_get_kind(obj) != JV_KIND_OBJECT)
		return jv_null();
	v = jv_object_get(jv_copy(obj), jv_string(key));
	if (!jv_is_valid(v)) {
		jv_free(v);
		return jv_null();
	}
	return v;
}

/* Resolves a relative path against dir (heap). NULL stays NULL. */
char *kc_resolve_path(const char *dir, char *path)
{
	struct kop_buf b = KOP_BUF_INIT;

	const char *rel = path;

	if (!path || path[0] == '/' || !dir)
		return path;
	while (rel[0] == '.' && rel[1] == '/')
		rel += 2;
	kop_buf_addf(&b, "%s/%s", dir, rel);
	free(path);
	return kop_buf_detach(&b, NULL);
}

char *kc_dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	char cwd[4096];
	struct kop_buf b = KOP_BUF_INIT;

	if (path[0] == '/')
		return slash == path ? kop_strdup("/") : kop_strndup(path, (size_t)(slash - path));
	if (!getcwd(cwd, sizeof(cwd)))
		return slash ? kop_strndup(path, (size_t)(slash - path)) : kop_strdup(".");
	if (slash)
		kop_buf_addf(&b, "%s/%.*s", cwd, (int)(slash - path), path);
	else
		kop_buf_adds(&b, cwd);
	return kop_buf_detach(&b, NULL);
}

void kube_config_release(struct kube_config *cfg)
{
	free(cfg->server);
	free(cfg->context);
	free(cfg->namespace);
	free(cfg->ca_pem);
	free(cfg->tls_server_name);
	free(cfg->cert_pem);
	if (cfg->key_pem)
		OPENSSL_cleanse(cfg->key_pem, cfg->key_len);
	free(cfg->key_pem);
	if (cfg->token)
		OPENSSL_cleanse(cfg->token, strlen(cfg->token));
	free(cfg->token);
	free(cfg->token_file);
	free(cfg->username);
	if (cfg->password)
		OPENSSL_cleanse(cfg->password, strlen(cfg->password));
	free(cfg->password);
	if (cfg->exec)
		kube_exec_free(cfg->exec);
	free(cfg->source);
	memset(cfg, 0, sizeof(*cfg));
}

int kube_config_load(struct kube_config *cfg, const char *kubeconfig, const char *context, char *err)
{
	const char *env = getenv("KUBECONFIG"), *host, *port, *home;
	char in_cluster_err[KOP_ERRLEN] = "";
	struct kop_buf b = KOP_BUF_INIT;
	int rc;

	memset(cfg, 0, sizeof(*cfg));
	if (kubeconfig && *kubeconfig)
		return kc_load_files(cfg, kubeconfig, 1, context, err);
	if (env && *env)
		return kc_load_files(cfg, env, 0, context, err);
	host = getenv("KUBERNETES_SERVICE_HOST");
	port = getenv("KUBERNETES_SERVICE_PORT");
	if (host && *host && port && *port) {
		if (!kc_load_in_cluster(cfg, host, port, in_cluster_err))
			return 0;
		kube_config_release(cfg);
	}
	home = getenv("HOME");
	kop_buf_addf(&b, "%s/.kube/config", home ? home : "");
	if (access(b.buf, F_OK) && errno == ENOENT) {
		if (*in_cluster_err)
			rc = kop_error(err, "unable to load in-cluster configuration: %s", in_cluster_err);
		else
			rc = kop_error(err, "invalid configuration: no configuration has been provided (no --kubeconfig, "
					    "KUBECONFIG, in-cluster service account or '%s')", b.buf);
	} else {
		rc = kc_load_files(cfg, b.buf, 1, context, err);
	}
	kop_buf_release(&b);
	return rc;
}
