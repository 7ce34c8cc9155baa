/*
 * Kubeconfig files read and merged by client-go's clientcmd rules (the first file
 * to set a name wins), then the context, cluster and user resolved and checked into
 * a kube_config. The exec stanza is read by kubeconfig_exec.c; which files to read
 * is kubeconfig.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include "jsonl.h"
#include "kubeconfig-priv.h"
#include "yaml.h"
#include "banned.h"

#define KUBECONFIG_MAX (16u << 20)

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
	jv arr = kc_get_member(doc, list), seen = jv_object();
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
		char *name = kc_get_str(e, "name");
		jv body = kc_get_member(e, member);

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
	dir = kc_dir_of(path);
	rc = merge_list(m, doc, "clusters", "cluster", &m->clusters, path, dir, err);
	if (!rc)
		rc = merge_list(m, doc, "users", "user", &m->users, path, dir, err);
	if (!rc)
		rc = merge_list(m, doc, "contexts", "context", &m->contexts, path, dir, err);
	if (!rc && !m->current_context)
		m->current_context = kc_get_str(doc, "current-context");
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
	kc_go_open_error(why, sizeof(why), path, errno);
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
	uname = kc_get_str(ctx, "user");
	cname = kc_get_str(ctx, "cluster");
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
	cert = kc_resolve_path(udir, kc_get_str(user, "client-certificate"));
	cert_data = kc_get_str(user, "client-certificate-data");
	key = kc_resolve_path(udir, kc_get_str(user, "client-key"));
	key_data = kc_get_str(user, "client-key-data");
	token_file = kc_resolve_path(udir, kc_get_str(user, "tokenFile"));
	cfg->token = kc_get_str(user, "token");
	cfg->username = kc_get_str(user, "username");
	cfg->password = kc_get_str(user, "password");
	exec = kc_get_member(user, "exec");
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
		char *cmd = kc_get_str(exec, "command"), *av = kc_get_str(exec, "apiVersion");
		char *im = kc_get_str(exec, "interactiveMode");
		jv env = kc_get_member(exec, "env");

		if (!cmd)
			verr(&v, "command must be specified for %s to use exec authentication plugin", un);
		if (!av)
			verr(&v, "apiVersion must be specified for %s to use exec authentication plugin", un);
		if (jv_get_kind(env) == JV_KIND_ARRAY) {
			jv_array_foreach(env, i, ev) {
				char *n = kc_get_str(ev, "name");

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
	ca = kc_resolve_path(cdir, kc_get_str(cluster, "certificate-authority"));
	ca_data = kc_get_str(cluster, "certificate-authority-data");
	cfg->server = kc_get_str(cluster, "server");
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
	cfg->insecure = kc_get_bool(cluster, "insecure-skip-tls-verify");
	cfg->tls_server_name = kc_get_str(cluster, "tls-server-name");
	if (jv_get_kind(exec) == JV_KIND_OBJECT && kc_parse_exec(cfg, exec, udir, uname, cluster, err))
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
	cfg->namespace = kc_get_str(ctx, "namespace");
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


int kc_load_files(struct kube_config *cfg, const char *list, int explicit_file, const char *context, char *err)
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
