/*
 * Client configuration as kubectl and controller-runtime find it: kubeconfig
 * files (merged by client-go's clientcmd rules), in-cluster service account,
 * and the exec credential plugin.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <openssl/evp.h>
#include "jsonl.h"
#include "kube-priv.h"
#include "yaml.h"
#include "banned.h"

#define KUBECONFIG_MAX (16u << 20)
#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define EXEC_OUT_MAX (1u << 20)

extern char **environ;

/* ---- small helpers -------------------------------------------------------- */

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

static char *trim_dup(const char *s, size_t len)
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
	*token = trim_dup(text, len);
	free(text);
	return 0;
}

/* Go's os error text: "open /x: no such file or directory". */
static void go_open_error(char *buf, size_t size, const char *path, int e)
{
	char msg[128];

	snprintf(msg, sizeof(msg), "%s", strerror(e));
	msg[0] = (char)tolower((unsigned char)msg[0]);
	snprintf(buf, size, "open %s: %s", path, msg);
}

/* A string member of obj (not consumed), heap copy; NULL when absent, null or "". Numbers and bools as text. */
static char *get_str(jv obj, const char *key)
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

static int get_bool(jv obj, const char *key)
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
static jv get_member(jv obj, const char *key)
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
static char *resolve_path(const char *dir, char *path)
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

static char *dir_of(const char *path)
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

/* ---- kubeconfig files ----------------------------------------------------- */

/* The merged view of one or more files: name -> {"v": entry, "dir", "file"}. */
struct merged {
	jv clusters, users, contexts;
	char *current_context;
	char *source;		/* the files, for messages */
	int files;		/* how many files were read */
};

static int merge_list(struct merged *m, jv doc, const char *list, const char *member, jv *map, const char *path,
		      const char *dir, char *err)
{
	jv arr = get_member(doc, list), seen = jv_object();
	int rc = 0;

	if (jv_get_kind(arr) == JV_KIND_NULL) {
		jv_free(arr);
		jv_free(seen);
		return 0;
	}
	if (jv_get_kind(arr) != JV_KIND_ARRAY) {
		jv_free(arr);
		jv_free(seen);
		return kop_error(err, "unable to load '%s': %s must be a list", path, list);
	}
	jv_array_foreach(arr, i, e) {
		char *name = get_str(e, "name");
		jv body = get_member(e, member);

		if (jv_get_kind(e) != JV_KIND_OBJECT || !name) {
			rc = kop_error(err, "unable to load '%s': an entry of %s has no name", path, list);
		} else if (jv_object_has(jv_copy(seen), jv_string(name))) {
			rc = kop_error(err, "unable to load '%s': duplicate name \"%s\" in %s", path, name, list);
		} else if (jv_get_kind(body) != JV_KIND_OBJECT && jv_get_kind(body) != JV_KIND_NULL) {
			rc = kop_error(err, "unable to load '%s': %s \"%s\": %s must be a mapping", path, list, name,
				       member);
		} else {
			seen = jv_object_set(seen, jv_string(name), jv_true());
			/* The first file to define a name wins; later ones are ignored entirely. */
			if (!jv_object_has(jv_copy(*map), jv_string(name)))
				*map = jv_object_set(*map, jv_string(name),
						     JV_OBJECT(jv_string("v"),
							       jv_get_kind(body) == JV_KIND_OBJECT ? jv_copy(body)
												   : jv_object(),
							       jv_string("dir"), jv_string(dir), jv_string("file"),
							       jv_string(path)));
		}
		free(name);
		jv_free(body);
		jv_free(e);
		if (rc)
			break;
	}
	jv_free(arr);
	jv_free(seen);
	(void)m;
	return rc;
}

/* Reads one kubeconfig file into m. 0, 1 when missing and missing_ok, -1 with err. */
static int merge_file(struct merged *m, const char *path, int missing_ok, char *err)
{
	char *text, *dir, sub[KOP_ERRLEN];
	size_t len;
	jv docs, doc;
	int rc;

	if (missing_ok && access(path, F_OK) && errno == ENOENT)
		return 1;
	/* named as the kubeconfig: a bare path says nothing of where it came from */
	if (access(path, R_OK))
		return kop_error(err, "unable to open kubeconfig '%s': %s", path, strerror(errno));
	if (kop_read_file(path, KUBECONFIG_MAX, &text, &len, sub)) {
		const char *why = strstr(sub + strlen(path), "': ");

		return kop_error(err, "unable to read kubeconfig '%s': %s", path, why ? why + 3 : sub);
	}
	rc = kop_yaml_load(text, len, path, &docs, err);
	free(text);
	if (rc)
		return -1;
	doc = jv_array_length(jv_copy(docs)) > 0 ? jv_array_get(jv_copy(docs), 0) : jv_object();
	jv_free(docs);
	if (jv_get_kind(doc) != JV_KIND_OBJECT) {
		jv_free(doc);
		return kop_error(err, "unable to load '%s': not a kubeconfig (a mapping was expected)", path);
	}
	dir = dir_of(path);
	rc = merge_list(m, doc, "clusters", "cluster", &m->clusters, path, dir, err);
	if (!rc)
		rc = merge_list(m, doc, "users", "user", &m->users, path, dir, err);
	if (!rc)
		rc = merge_list(m, doc, "contexts", "context", &m->contexts, path, dir, err);
	if (!rc && !m->current_context)
		m->current_context = get_str(doc, "current-context");
	free(dir);
	jv_free(doc);
	if (rc)
		return -1;
	m->files++;
	if (!m->source) {
		m->source = kop_strdup(path);
	} else {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "%s:%s", m->source, path);
		free(m->source);
		m->source = kop_buf_detach(&b, NULL);
	}
	return 0;
}

static void merged_release(struct merged *m)
{
	jv_free(m->clusters);
	jv_free(m->users);
	jv_free(m->contexts);
	free(m->current_context);
	free(m->source);
}

/* clientcmd's aggregate of validation errors: one as is, several as "[a, b]". */
struct verrs {
	struct kop_buf b;
	int n;
	int empty_cluster;	/* the ErrEmptyCluster special case */
};

static void verr(struct verrs *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void verr(struct verrs *v, const char *fmt, ...)
{
	va_list ap;

	if (v->n++)
		kop_buf_adds(&v->b, ", ");
	va_start(ap, fmt);
	kop_buf_vaddf(&v->b, fmt, ap);
	va_end(ap);
}

static void check_readable(struct verrs *v, const char *what, const char *path, const char *owner)
{
	char why[600];
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		close(fd);
		return;
	}
	go_open_error(why, sizeof(why), path, errno);
	verr(v, "unable to read %s %s for %s due to %s", what, path, owner, why);
}

/* Entry v of a merged map, with its paths resolved: a new object {"v", "dir", "file"}, or null. */
static jv lookup(jv map, const char *name)
{
	if (!name)
		return jv_null();
	return jv_object_get(jv_copy(map), jv_string(name));
}

static int load_blob(const char *what, const char *owner, const char *path, const char *data, const char *file,
		     char **out, size_t *out_len, char *err)
{
	if (data) {
		if (kube_base64_decode(data, strlen(data), out, out_len))
			return kop_error(err, "unable to load '%s': illegal base64 data in %s-data of \"%s\"", file,
					 what, owner);
		return 0;
	}
	if (path) {
		char e2[KOP_ERRLEN];

		if (kop_read_file(path, 1u << 20, out, out_len, e2))
			return kop_error(err, "unable to read %s '%s' for \"%s\": %s", what, path, owner, e2);
	}
	return 0;
}

static int parse_exec(struct kube_config *cfg, jv exec, const char *dir, const char *uname, jv cluster,
		      char *err);

static int resolve_merged(struct kube_config *cfg, struct merged *m, const char *context, char *err)
{
	struct verrs v = { KOP_BUF_INIT, 0, 0 };
	const char *ctxname = context && *context ? context : m->current_context;
	jv ctxe = lookup(m->contexts, ctxname), ctx, ue, ce, user, cluster;
	char *uname = NULL, *cname = NULL;
	char *ca = NULL, *ca_data = NULL, *cert = NULL, *cert_data = NULL, *key = NULL, *key_data = NULL;
	char *token_file = NULL;
	const char *udir = NULL, *cdir = NULL, *ufile = "", *cfile = "";
	jv exec;
	int rc = -1;

	if (ctxname && jv_get_kind(ctxe) != JV_KIND_OBJECT)
		verr(&v, "context was not found for specified context: %s", ctxname);
	ctx = jv_get_kind(ctxe) == JV_KIND_OBJECT ? jv_object_get(jv_copy(ctxe), jv_string("v")) : jv_object();
	uname = get_str(ctx, "user");
	cname = get_str(ctx, "cluster");
	ue = lookup(m->users, uname);
	ce = lookup(m->clusters, cname);
	user = jv_get_kind(ue) == JV_KIND_OBJECT ? jv_object_get(jv_copy(ue), jv_string("v")) : jv_object();
	cluster = jv_get_kind(ce) == JV_KIND_OBJECT ? jv_object_get(jv_copy(ce), jv_string("v")) : jv_object();
	if (jv_get_kind(ue) == JV_KIND_OBJECT) {
		jv d = jv_object_get(jv_copy(ue), jv_string("dir")), f = jv_object_get(jv_copy(ue), jv_string("file"));

		udir = jv_string_value(d);	/* borrowed from ue, which lives to the end */
		ufile = jv_string_value(f);
		jv_free(d);
		jv_free(f);
	}
	if (jv_get_kind(ce) == JV_KIND_OBJECT) {
		jv d = jv_object_get(jv_copy(ce), jv_string("dir")), f = jv_object_get(jv_copy(ce), jv_string("file"));

		cdir = jv_string_value(d);
		cfile = jv_string_value(f);
		jv_free(d);
		jv_free(f);
	}

	/* validateAuthInfo */
	cert = resolve_path(udir, get_str(user, "client-certificate"));
	cert_data = get_str(user, "client-certificate-data");
	key = resolve_path(udir, get_str(user, "client-key"));
	key_data = get_str(user, "client-key-data");
	token_file = resolve_path(udir, get_str(user, "tokenFile"));
	cfg->token = get_str(user, "token");
	cfg->username = get_str(user, "username");
	cfg->password = get_str(user, "password");
	exec = get_member(user, "exec");
	if (cert || cert_data) {
		const char *un = uname ? uname : "";

		if (cert && cert_data)
			verr(&v, "client-cert-data and client-cert are both specified for %s. client-cert-data will override.", un);
		if (key && key_data)
			verr(&v, "client-key-data and client-key are both specified for %s; client-key-data will override", un);
		if (!key && !key_data)
			verr(&v, "client-key-data or client-key must be specified for %s to use the clientCert authentication method.", un);
		if (cert)
			check_readable(&v, "client-cert", cert, un);
		if (key)
			check_readable(&v, "client-key", key, un);
	}
	if (jv_get_kind(exec) == JV_KIND_OBJECT) {
		const char *un = uname ? uname : "";
		char *cmd = get_str(exec, "command"), *av = get_str(exec, "apiVersion");
		char *im = get_str(exec, "interactiveMode");
		jv env = get_member(exec, "env");

		if (!cmd)
			verr(&v, "command must be specified for %s to use exec authentication plugin", un);
		if (!av)
			verr(&v, "apiVersion must be specified for %s to use exec authentication plugin", un);
		if (jv_get_kind(env) == JV_KIND_ARRAY) {
			jv_array_foreach(env, i, ev) {
				char *n = get_str(ev, "name");

				if (!n)
					verr(&v, "env variable name must be specified for %s to use exec authentication plugin", un);
				free(n);
				jv_free(ev);
			}
		}
		jv_free(env);
		if (!im && av && strcmp(av, "client.authentication.k8s.io/v1beta1"))
			verr(&v, "interactiveMode must be specified for %s to use exec authentication plugin", un);
		else if (im && strcmp(im, "Never") && strcmp(im, "IfAvailable") && strcmp(im, "Always"))
			verr(&v, "invalid interactiveMode for %s: \"%s\"", un, im);
		free(cmd);
		free(av);
		free(im);
	}
	if ((cfg->token || token_file) && (cfg->username || cfg->password))
		verr(&v, "more than one authentication method found for %s; found [token basicAuth], only one is allowed",
		     uname ? uname : "");

	/* validateClusterInfo */
	ca = resolve_path(cdir, get_str(cluster, "certificate-authority"));
	ca_data = get_str(cluster, "certificate-authority-data");
	cfg->server = get_str(cluster, "server");
	if (jv_get_kind(cluster) != JV_KIND_OBJECT || jv_object_length(jv_copy(cluster)) == 0) {
		verr(&v, "cluster has no server defined");
		v.empty_cluster = v.n == 1;
	} else {
		if (!cfg->server) {
			if (!cname)
				verr(&v, "default cluster has no server defined");
			else
				verr(&v, "no server found for cluster \"%s\"", cname);
		}
		if (ca && ca_data)
			verr(&v, "certificate-authority-data and certificate-authority are both specified for %s. certificate-authority-data will override.",
			     cname ? cname : "");
		if (ca)
			check_readable(&v, "certificate-authority", ca, cname ? cname : "");
	}
	if (v.n) {
		if (v.n == 1 && v.empty_cluster)
			kop_error(err, "invalid configuration: no configuration has been provided, try setting KUBERNETES_MASTER environment variable");
		else if (v.n == 1)
			kop_error(err, "invalid configuration: %s", v.b.buf);
		else
			kop_error(err, "invalid configuration: [%s]", v.b.buf);
		goto out;
	}

	/* Load what the chosen cluster and user name: -data wins over a path, as client-go does. */
	if (load_blob("certificate-authority", cname, ca_data ? NULL : ca, ca_data, cfile, &cfg->ca_pem, &cfg->ca_len,
		      err))
		goto out;
	if (load_blob("client-certificate", uname, cert_data ? NULL : cert, cert_data, ufile, &cfg->cert_pem,
		      &cfg->cert_len, err))
		goto out;
	if (load_blob("client-key", uname, key_data ? NULL : key, key_data, ufile, &cfg->key_pem, &cfg->key_len, err))
		goto out;
	if (token_file) {
		char *t;

		/* client-go reads it once here; a static token, if any, wins until the file is re-read. */
		if (!cfg->token) {
			if (kube_read_token_file(token_file, &t, err))
				goto out;
			cfg->token = t;
		}
		cfg->token_file = token_file;
		token_file = NULL;
	}
	cfg->insecure = get_bool(cluster, "insecure-skip-tls-verify");
	cfg->tls_server_name = get_str(cluster, "tls-server-name");
	if (jv_get_kind(exec) == JV_KIND_OBJECT && parse_exec(cfg, exec, udir, uname, cluster, err))
		goto out;
	if (!strstr(cfg->server, "://")) {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "https://%s", cfg->server);
		free(cfg->server);
		cfg->server = kop_buf_detach(&b, NULL);
	}
	while (strlen(cfg->server) > 8 && cfg->server[strlen(cfg->server) - 1] == '/')
		cfg->server[strlen(cfg->server) - 1] = 0;
	cfg->context = ctxname ? kop_strdup(ctxname) : NULL;
	cfg->namespace = get_str(ctx, "namespace");
	if (!cfg->namespace)
		cfg->namespace = kop_strdup("default");
	cfg->source = kop_strdup(m->source);
	rc = 0;
out:
	kop_buf_release(&v.b);
	free(uname);
	free(cname);
	free(ca);
	free(ca_data);
	free(cert);
	free(cert_data);
	free(key);
	if (key_data)
		OPENSSL_cleanse(key_data, strlen(key_data));
	free(key_data);
	free(token_file);
	jv_free(exec);
	jv_free(ctx);
	jv_free(ctxe);
	jv_free(user);
	jv_free(cluster);
	jv_free(ue);
	jv_free(ce);
	return rc;
}

static int parse_exec(struct kube_config *cfg, jv exec, const char *dir, const char *uname, jv cluster, char *err)
{
	struct kube_exec *e = kop_calloc(1, sizeof(*e));
	char *im = get_str(exec, "interactiveMode");
	jv args = get_member(exec, "args"), env = get_member(exec, "env");
	size_t n = 0, i;

	cfg->exec = e;
	e->api_version = get_str(exec, "apiVersion");
	e->command = get_str(exec, "command");
	e->install_hint = get_str(exec, "installHint");
	if (strcmp(e->api_version, "client.authentication.k8s.io/v1") &&
	    strcmp(e->api_version, "client.authentication.k8s.io/v1beta1")) {
		free(im);
		jv_free(args);
		jv_free(env);
		return kop_error(err, "exec plugin: invalid apiVersion \"%s\"", e->api_version);
	}
	/* A command with a path separator is relative to the kubeconfig; a bare name is looked up on PATH. */
	if (strchr(e->command, '/'))
		e->command = resolve_path(dir, e->command);
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
		char *name = get_str(ev, "name"), *value = get_str(ev, "value");
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "%s=%s", name, value ? value : "");
		e->env[i] = kop_buf_detach(&b, NULL);
		free(name);
		free(value);
		jv_free(ev);
	}
	jv_free(args);
	jv_free(env);
	if (get_bool(exec, "provideClusterInfo")) {
		jv c = jv_object(), ext = get_member(cluster, "extensions");
		char *s;

		if (cfg->server)
			c = jv_object_set(c, jv_string("server"), jv_string(cfg->server));
		if ((s = get_str(cluster, "tls-server-name"))) {
			c = jv_object_set(c, jv_string("tls-server-name"), jv_string(s));
			free(s);
		}
		if (get_bool(cluster, "insecure-skip-tls-verify"))
			c = jv_object_set(c, jv_string("insecure-skip-tls-verify"), jv_true());
		if (cfg->ca_pem) {
			s = kop_base64(cfg->ca_pem, cfg->ca_len);
			c = jv_object_set(c, jv_string("certificate-authority-data"), jv_string(s));
			free(s);
		}
		if (jv_get_kind(ext) == JV_KIND_ARRAY) {
			jv_array_foreach(ext, i2, x) {
				char *nm = get_str(x, "name");

				if (nm && !strcmp(nm, "client.authentication.k8s.io/exec"))
					c = jv_object_set(c, jv_string("config"), get_member(x, "extension"));
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

/* ---- in-cluster ------------------------------------------------------------ */

static int load_in_cluster(struct kube_config *cfg, const char *host, const char *port, char *err)
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
			cfg->namespace = trim_dup(text, len);
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

/* ---- the order ------------------------------------------------------------ */

static int load_files(struct kube_config *cfg, const char *list, int explicit_file, const char *context, char *err)
{
	struct merged m = { jv_object(), jv_object(), jv_object(), NULL, NULL, 0 };
	char *copy = kop_strdup(list), *p, *save = NULL;
	jv seen = jv_object();
	int rc = 0;

	if (explicit_file) {
		rc = merge_file(&m, list, 0, err);
	} else {
		for (p = strtok_r(copy, ":", &save); p && !rc; p = strtok_r(NULL, ":", &save)) {
			if (jv_object_has(jv_copy(seen), jv_string(p)))
				continue;
			seen = jv_object_set(seen, jv_string(p), jv_true());
			if (merge_file(&m, p, 1, err) < 0)
				rc = -1;
		}
		if (!rc && !m.files)
			rc = kop_error(err, "invalid configuration: no configuration has been provided: none of the files in KUBECONFIG exist ('%s')",
				       list);
	}
	if (!rc)
		rc = resolve_merged(cfg, &m, context, err);
	free(copy);
	jv_free(seen);
	merged_release(&m);
	if (rc)
		kube_config_release(cfg);
	return rc;
}

int kube_config_load(struct kube_config *cfg, const char *kubeconfig, const char *context, char *err)
{
	const char *env = getenv("KUBECONFIG"), *host, *port, *home;
	char in_cluster_err[KOP_ERRLEN] = "";
	struct kop_buf b = KOP_BUF_INIT;
	int rc;

	memset(cfg, 0, sizeof(*cfg));
	if (kubeconfig && *kubeconfig)
		return load_files(cfg, kubeconfig, 1, context, err);
	if (env && *env)
		return load_files(cfg, env, 0, context, err);
	host = getenv("KUBERNETES_SERVICE_HOST");
	port = getenv("KUBERNETES_SERVICE_PORT");
	if (host && *host && port && *port) {
		if (!load_in_cluster(cfg, host, port, in_cluster_err))
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
		rc = load_files(cfg, b.buf, 1, context, err);
	}
	kop_buf_release(&b);
	return rc;
}

/* ---- exec credential plugin ---------------------------------------------- */

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

/* The environment for the plugin: ours, with the configured variables and KUBERNETES_EXEC_INFO set. */
static char **exec_environ(const struct kube_exec *e, const char *info)
{
	size_t n = 0, k = 0, i;
	char **env, **p;

	for (p = environ; *p; p++)
		n++;
	for (p = e->env; *p; p++)
		n++;
	env = kop_calloc(n + 2, sizeof(char *));
	for (p = environ; *p; p++) {
		int overridden = !strncmp(*p, "KUBERNETES_EXEC_INFO=", 21);

		for (i = 0; e->env[i] && !overridden; i++) {
			size_t nl = strcspn(e->env[i], "=");

			overridden = !strncmp(*p, e->env[i], nl) && (*p)[nl] == '=';
		}
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
	/* Network tools ignore SIGPIPE; the plugin gets the default back. */
	posix_spawnattr_init(&attr);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGPIPE);
	posix_spawnattr_setsigdefault(&attr, &dfl);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
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
	av = get_str(cred, "apiVersion");
	if (!av || strcmp(av, e->api_version)) {
		kop_error(err, "getting credentials: exec plugin is configured to use API version %s, plugin returned version %s",
			  e->api_version, av ? av : "");
		goto out;
	}
	status = get_member(cred, "status");
	if (jv_get_kind(status) != JV_KIND_OBJECT) {
		kop_error(err, "getting credentials: exec plugin didn't return a status field");
		goto out;
	}
	token = get_str(status, "token");
	cert = get_str(status, "clientCertificateData");
	key = get_str(status, "clientKeyData");
	exp = get_str(status, "expirationTimestamp");
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
