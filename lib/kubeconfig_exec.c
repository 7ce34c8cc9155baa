/*
 * The exec credential plugin: a user's exec stanza read into a kube_exec, the
 * plugin run and its ExecCredential read, the credential cached until it
 * expires (see kube-priv.h). When kube.c asks for it is kube.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include "jsonl.h"
#include "kubeconfig-priv.h"
#include "banned.h"

#define EXEC_OUT_MAX (1u << 20)

extern char **environ;

int kc_parse_exec(struct kube_config *cfg, jv exec, const char *dir, const char *uname, jv cluster, char *err)
{
	struct kube_exec *e = kop_calloc(1, sizeof(*e));
	char *im = kc_get_str(exec, "interactiveMode");
	jv args = kc_get_member(exec, "args"), env = kc_get_member(exec, "env");
	size_t n = 0, i;

	cfg->exec = e;
	e->api_version = kc_get_str(exec, "apiVersion");
	e->command = kc_get_str(exec, "command");
	e->install_hint = kc_get_str(exec, "installHint");
	if (strcmp(e->api_version, "client.authentication.k8s.io/v1") &&
	    strcmp(e->api_version, "client.authentication.k8s.io/v1beta1")) {
		free(im);
		jv_free(args);
		jv_free(env);
		return kop_error(err, "exec plugin: invalid apiVersion \"%s\"", e->api_version);
	}
	/* A command with a path separator is relative to the kubeconfig; a bare name is looked up on PATH. */
	if (strchr(e->command, '/'))
		e->command = kc_resolve_path(dir, e->command);
	e->interactive = !im || !strcmp(im, "IfAvailable") ? KUBE_EXEC_IF_AVAILABLE
			 : !strcmp(im, "Always")		  ? KUBE_EXEC_ALWAYS
								  : KUBE_EXEC_NEVER;
	free(im);
	n = jv_get_kind(args) == JV_KIND_ARRAY ? (size_t)jv_array_length(jv_copy(args)) : 0;
	e->argv = kop_calloc(n + 2, sizeof(char *));
	e->argv[0] = kop_strdup(e->command);
	for (i = 0; i < n; i++) {
		jv a = jv_array_get(jv_copy(args), (int)i);

		e->argv[i + 1] = kop_strdup(jv_get_kind(a) == JV_KIND_STRING ? jv_string_value(a) : "");
		jv_free(a);
	}
	n = jv_get_kind(env) == JV_KIND_ARRAY ? (size_t)jv_array_length(jv_copy(env)) : 0;
	e->env = kop_calloc(n + 1, sizeof(char *));
	for (i = 0; i < n; i++) {
		jv ev = jv_array_get(jv_copy(env), (int)i);
		char *name = kc_get_str(ev, "name"), *value = kc_get_str(ev, "value");
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "%s=%s", name, value ? value : "");
		e->env[i] = kop_buf_detach(&b, NULL);
		free(name);
		free(value);
		jv_free(ev);
	}
	jv_free(args);
	jv_free(env);
	if (kc_get_bool(exec, "provideClusterInfo")) {
		jv c = jv_object(), ext = kc_get_member(cluster, "extensions");
		char *s;

		if (cfg->server)
			c = jv_object_set(c, jv_string("server"), jv_string(cfg->server));
		if ((s = kc_get_str(cluster, "tls-server-name"))) {
			c = jv_object_set(c, jv_string("tls-server-name"), jv_string(s));
			free(s);
		}
		if (kc_get_bool(cluster, "insecure-skip-tls-verify"))
			c = jv_object_set(c, jv_string("insecure-skip-tls-verify"), jv_true());
		if (cfg->ca_pem) {
			s = kop_base64(cfg->ca_pem, cfg->ca_len);
			c = jv_object_set(c, jv_string("certificate-authority-data"), jv_string(s));
			free(s);
		}
		if (jv_get_kind(ext) == JV_KIND_ARRAY) {
			jv_array_foreach(ext, i2, x) {
				char *nm = kc_get_str(x, "name");

				if (nm && !strcmp(nm, "client.authentication.k8s.io/exec"))
					c = jv_object_set(c, jv_string("config"), kc_get_member(x, "extension"));
				free(nm);
				jv_free(x);
			}
		}
		jv_free(ext);
		e->cluster_info = kop_json_dump(c);
	}
	(void)uname;
	return 0;
}


void kube_exec_forget(struct kube_exec *e)
{
	if (e->token)
		OPENSSL_cleanse(e->token, strlen(e->token));
	free(e->token);
	free(e->cert_pem);
	if (e->key_pem)
		OPENSSL_cleanse(e->key_pem, e->key_len);
	free(e->key_pem);
	e->token = e->cert_pem = e->key_pem = NULL;
	e->cert_len = e->key_len = 0;
	e->expiry = 0;
	e->have = 0;
}

void kube_exec_free(struct kube_exec *e)
{
	char **p;

	if (!e)
		return;
	kube_exec_forget(e);
	free(e->api_version);
	free(e->command);
	free(e->install_hint);
	free(e->cluster_info);
	for (p = e->argv; p && *p; p++)
		free(*p);
	free(e->argv);
	for (p = e->env; p && *p; p++)
		free(*p);
	free(e->env);
	free(e);
}

/* Whether the environment entry "NAME=value" is of the variable name names ("NAME", or "NAME=..."). */
static int env_named(const char *entry, const char *name)
{
	size_t len = strcspn(name, "=");

	return !strncmp(entry, name, len) && entry[len] == '=';
}

/* The environment for the plugin: ours, with the configured variables and KUBERNETES_EXEC_INFO set,
 * without the GNUTLS_NO_IMPLICIT_INIT iot-operator set for its own processes (KOP_GNUTLS_OURS). */
static char **exec_environ(const struct kube_exec *e, const char *info)
{
	size_t n = 0, k = 0, i;
	char **env, **p;
	const char *ours = getenv(KOP_GNUTLS_OURS);
	int drop_gnutls = ours && !strcmp(ours, "1");

	for (p = environ; *p; p++)
		n++;
	for (p = e->env; *p; p++)
		n++;
	env = kop_calloc(n + 2, sizeof(char *));
	for (p = environ; *p; p++) {
		int overridden = env_named(*p, "KUBERNETES_EXEC_INFO") ||
				 (drop_gnutls && (env_named(*p, "GNUTLS_NO_IMPLICIT_INIT") || env_named(*p, KOP_GNUTLS_OURS)));

		for (i = 0; e->env[i] && !overridden; i++)
			overridden = env_named(*p, e->env[i]);
		if (!overridden)
			env[k++] = kop_strdup(*p);
	}
	for (p = e->env; *p; p++)
		env[k++] = kop_strdup(*p);
	{
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "KUBERNETES_EXEC_INFO=%s", info);
		env[k++] = kop_buf_detach(&b, NULL);
	}
	env[k] = NULL;
	return env;
}

static void free_strv(char **v)
{
	char **p;

	for (p = v; *p; p++)
		free(*p);
	free(v);
}

/* Runs the plugin, its stdout into out. 0, or -1 with err in client-go's words. */
static int exec_run(struct kube_exec *e, int interactive, struct kop_buf *out, char *err)
{
	struct kop_buf info = KOP_BUF_INIT;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t dfl;
	int outp[2], status = 0, rc;
	char **env;
	pid_t pid;
	ssize_t n;

	kop_buf_addf(&info, "{\"kind\":\"ExecCredential\",\"apiVersion\":\"%s\",\"spec\":{", e->api_version);
	if (e->cluster_info)
		kop_buf_addf(&info, "\"cluster\":%s,", e->cluster_info);
	kop_buf_addf(&info, "\"interactive\":%s}}", interactive ? "true" : "false");
	env = exec_environ(e, info.buf);
	kop_buf_release(&info);
	if (pipe2(outp, O_CLOEXEC) < 0) {
		free_strv(env);
		return kop_error(err, "getting credentials: exec: %s", strerror(errno));
	}
	/* stdin only when interactive; stdout to us; stderr passed through, as client-go does. */
	posix_spawn_file_actions_init(&fa);
	if (!interactive)
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
	/* glibc's posix_spawnp reports a failed exec (ENOENT, EACCES) as its result. */
	/* Network tools ignore SIGPIPE; the plugin gets the default back, and no signal blocked (a
	 * caller's thread may block some: kstatus's writers). */
	posix_spawnattr_init(&attr);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGPIPE);
	posix_spawnattr_setsigdefault(&attr, &dfl);
	{
		sigset_t none;

		sigemptyset(&none);
		posix_spawnattr_setsigmask(&attr, &none);
	}
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
	rc = posix_spawnp(&pid, e->argv[0], &fa, &attr, e->argv, env);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	free_strv(env);
	close(outp[1]);
	if (rc) {
		close(outp[0]);
		if (rc == ENOENT && e->install_hint)
			return kop_error(err, "getting credentials: exec: executable %s not found\n\n%s", e->command,
					 e->install_hint);
		if (rc == ENOENT)
			return kop_error(err, "getting credentials: exec: executable %s not found", e->command);
		return kop_error(err, "getting credentials: exec: fork/exec %s: %s", e->command, strerror(rc));
	}
	for (;;) {
		kop_buf_grow(out, 4096);
		n = read(outp[0], out->buf + out->len, out->cap - out->len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		out->len += (size_t)n;
		out->buf[out->len] = 0;
		if (out->len > EXEC_OUT_MAX)
			break;
	}
	close(outp[0]);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			status = 0;	/* reaped by someone else's SIGCHLD handler: judge by the output */
			break;
		}
	}
	if (WIFEXITED(status) && WEXITSTATUS(status))
		return kop_error(err, "getting credentials: exec: executable %s failed with exit code %d", e->command,
				 WEXITSTATUS(status));
	if (WIFSIGNALED(status))
		return kop_error(err, "getting credentials: exec: executable %s was killed by signal %d", e->command,
				 WTERMSIG(status));
	if (out->len > EXEC_OUT_MAX)
		return kop_error(err, "getting credentials: exec: executable %s wrote more than %u bytes", e->command,
				 EXEC_OUT_MAX);
	return 0;
}

int kube_exec_credential(struct kube_exec *e, char *err)
{
	struct kop_buf out = KOP_BUF_INIT;
	int interactive = 0, rc = -1;
	jv cred, status = jv_null();
	char *av = NULL, *token = NULL, *cert = NULL, *key = NULL, *exp = NULL;
	time_t expiry = 0;

	if (e->have && (!e->expiry || time(NULL) < e->expiry))
		return 0;
	if (e->interactive != KUBE_EXEC_NEVER)
		interactive = isatty(0);
	if (e->interactive == KUBE_EXEC_ALWAYS && !interactive)
		return kop_error(err, "getting credentials: exec plugin cannot support interactive mode: standard input is not a terminal");
	e->runs++;
	if (exec_run(e, interactive, &out, err)) {
		kop_buf_release(&out);
		return -1;
	}
	cred = jv_parse_sized(out.buf ? out.buf : "", (int)out.len);
	if (out.buf)
		OPENSSL_cleanse(out.buf, out.len);
	kop_buf_release(&out);
	if (!jv_is_valid(cred)) {
		char m[256];

		/* (never the output itself: it may hold the token) */
		return kop_error(err, "getting credentials: decoding stdout: %s", kop_json_parse_error(cred, m, sizeof(m)));
	}
	av = kc_get_str(cred, "apiVersion");
	if (!av || strcmp(av, e->api_version)) {
		kop_error(err, "getting credentials: exec plugin is configured to use API version %s, plugin returned version %s",
			  e->api_version, av ? av : "");
		goto out;
	}
	status = kc_get_member(cred, "status");
	if (jv_get_kind(status) != JV_KIND_OBJECT) {
		kop_error(err, "getting credentials: exec plugin didn't return a status field");
		goto out;
	}
	token = kc_get_str(status, "token");
	cert = kc_get_str(status, "clientCertificateData");
	key = kc_get_str(status, "clientKeyData");
	exp = kc_get_str(status, "expirationTimestamp");
	if (!token && !cert && !key) {
		kop_error(err, "getting credentials: exec plugin didn't return a token or cert/key pair");
		goto out;
	}
	if (!cert != !key) {
		kop_error(err, "getting credentials: exec plugin returned only certificate or key, not both");
		goto out;
	}
	if (exp && kop_time_parse(exp, &expiry)) {
		kop_error(err, "getting credentials: decoding stdout: invalid expirationTimestamp '%s'", exp);
		goto out;
	}
	kube_exec_forget(e);
	e->token = token;
	e->cert_pem = cert;
	e->key_pem = key;
	e->cert_len = cert ? strlen(cert) : 0;
	e->key_len = key ? strlen(key) : 0;
	token = cert = key = NULL;
	e->expiry = expiry;
	e->have = 1;
	rc = 1;
out:
	if (token)
		OPENSSL_cleanse(token, strlen(token));
	if (key)
		OPENSSL_cleanse(key, strlen(key));
	free(token);
	free(cert);
	free(key);
	free(exp);
	free(av);
	jv_free(status);
	jv_free(cred);
	return rc;
}
