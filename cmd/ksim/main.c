/*
 * ksim: a local Kubernetes API server for the demo, the tests and the
 * benchmarks (docs/ksim.md). main() sets up the store, the built-in
 * namespaces, TLS and HTTP, writes the kubeconfig once it serves, and
 * waits for SIGTERM/SIGINT.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <microhttpd.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include "tool.h"
#include "ksim.h"
#include "sim.h"
#include "banned.h"

static const char usage[] =
	"usage: ksim [--port N] [--kubeconfig FILE] [--tls] [--token T] [--history N]\n"
	"            [--bookmark-interval DUR] [--event-ttl DUR] [--watch-list MODE]\n"
	"            [--feature-gates GATES] [-v]\n"
	"            [--log-level L]\n"
	"            [--log-format json|text]\n"
	"\n"
	"A local Kubernetes API server on 127.0.0.1 for tests and demos.\n"
	"Request bodies: JSON, YAML, and protobuf for built-in kinds (what kubectl 1.32+\n"
	"and client-go send); answers are JSON.\n"
	"\n"
	"  --port N               listen on 127.0.0.1:N (default 0: a free port)\n"
	"  --kubeconfig FILE      write a kubeconfig for clients once ready to serve\n"
	"  --tls                  serve HTTPS with a self-signed certificate (CA data in the kubeconfig)\n"
	"  --token T              require 'Authorization: Bearer T' (missing: anonymous, 403; wrong: 401);\n"
	"                         implies --tls (kubectl sends no bearer token over plain HTTP)\n"
	"  --history N            watch events kept for resuming watches (default 10000)\n"
	"  --bookmark-interval D  period of watch bookmarks (default 60s)\n"
	"  --event-ttl D          an Event is deleted D after its last write (default 1h, as\n"
	"                         kube-apiserver's --event-ttl)\n"
	"  --watch-list MODE      streaming lists (watch with sendInitialEvents=true): serve\n"
	"                         (default); refuse-storage: HTTP 200, one ERROR event (500\n"
	"                         InternalError, storage feature RequestWatchProgress disabled)\n"
	"                         and the end, as kube-apiserver 1.32+ on an etcd without it;\n"
	"                         gate-off: 422 Invalid (FieldValueForbidden on sendInitialEvents),\n"
	"                         as kube-apiserver with the WatchList feature gate off (1.27-1.31);\n"
	"                         old: 422 Invalid, resourceVersionMatch forbidden for watch, as\n"
	"                         1.19-1.26; ignore: the parameters ignored (a plain watch: the\n"
	"                         initial state but no initial-events-end bookmark), as older ones\n"
	"  --feature-gates G      ShardedListAndWatch=true: lists and watches honour shardSelector\n"
	"                         and lists echo it in metadata.shardInfo, as kube-apiserver 1.36\n"
	"                         with that alpha gate on (default false: the parameter ignored)\n"
	"  -v, --verbose          log every request (method, path, code, user agent)\n" KSIM_SIM_USAGE;

enum { OPT_PORT = OPT_TOOL_LAST, OPT_TLS, OPT_TOKEN, OPT_HISTORY, OPT_BOOKMARK, OPT_EVENT_TTL, OPT_WATCH_LIST,
       OPT_FEATURE_GATES };

static const struct option options[] = {
	TOOL_COMMON_OPTIONS,
	{ "kubeconfig", required_argument, NULL, OPT_KUBECONFIG },
	{ "port", required_argument, NULL, OPT_PORT },
	{ "tls", no_argument, NULL, OPT_TLS },
	{ "token", required_argument, NULL, OPT_TOKEN },
	{ "history", required_argument, NULL, OPT_HISTORY },
	{ "bookmark-interval", required_argument, NULL, OPT_BOOKMARK },
	{ "event-ttl", required_argument, NULL, OPT_EVENT_TTL },
	{ "watch-list", required_argument, NULL, OPT_WATCH_LIST },
	{ "feature-gates", required_argument, NULL, OPT_FEATURE_GATES },
	KSIM_SIM_OPTIONS,
	{ NULL, 0, NULL, 0 }
};

/* kube-apiserver's --feature-gates: comma-separated NAME=BOOL; ksim knows one. */
static void feature_gates(const char *arg)
{
	char *copy = kop_strdup(arg), *save = NULL;

	for (char *g = strtok_r(copy, ",", &save); g; g = strtok_r(NULL, ",", &save)) {
		char *v = strchr(g, '=');

		if (!v)
			die_usage("missing bool value for %s in --feature-gates", g);
		*v++ = 0;
		if (strcmp(g, "ShardedListAndWatch"))
			die_usage("unrecognized feature gate: %s (ksim knows ShardedListAndWatch)", g);
		if (!strcasecmp(v, "true"))
			ksim.sharded_list = 1;
		else if (!strcasecmp(v, "false"))
			ksim.sharded_list = 0;
		else
			die_usage("invalid value of %s=%s in --feature-gates, err: invalid syntax", g, v);
	}
	free(copy);
}

static char *bio_string(BIO *b)
{
	char *data;
	long n = BIO_get_mem_data(b, &data);

	return kop_strndup(data, (size_t)n);
}

/* A self-signed EC P-256 certificate for 127.0.0.1 and localhost, PEM. */
static int make_cert(char **cert_pem, char **key_pem, char *err)
{
	EVP_PKEY *key = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	X509_NAME *name;
	X509V3_CTX ctx;
	BIO *b;
	static const char *const exts[][2] = {
		{ "basicConstraints", "critical,CA:TRUE" },
		{ "keyUsage", "critical,digitalSignature,keyEncipherment,keyCertSign" },
		{ "extendedKeyUsage", "serverAuth" },
		{ "subjectAltName", "IP:127.0.0.1,DNS:localhost" },
	};
	int ok = 0;

	if (!key || !x)
		goto out;
	ASN1_INTEGER_set(X509_get_serialNumber(x), (long)(random() & 0x7fffffff));
	X509_set_version(x, 2);
	X509_gmtime_adj(X509_getm_notBefore(x), -3600);
	X509_gmtime_adj(X509_getm_notAfter(x), 365L * 24 * 3600);
	X509_set_pubkey(x, key);
	name = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"ksim", -1, -1, 0);
	X509_set_issuer_name(x, name);
	X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
	for (size_t i = 0; i < sizeof(exts) / sizeof(*exts); i++) {
		X509_EXTENSION *e = X509V3_EXT_conf(NULL, &ctx, exts[i][0], exts[i][1]);

		if (!e)
			goto out;
		X509_add_ext(x, e, -1);
		X509_EXTENSION_free(e);
	}
	if (!X509_sign(x, key, EVP_sha256()))
		goto out;
	b = BIO_new(BIO_s_mem());
	PEM_write_bio_X509(b, x);
	*cert_pem = bio_string(b);
	BIO_free(b);
	b = BIO_new(BIO_s_mem());
	PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL);
	*key_pem = bio_string(b);
	BIO_free(b);
	ok = 1;
out:
	X509_free(x);
	EVP_PKEY_free(key);
	return ok ? 0 : kop_error(err, "unable to generate a certificate: OpenSSL failed");
}

/* Writes text to path atomically (a temporary file, fsync, rename), mode 0600. */
static int write_file(const char *path, const char *text, char *err)
{
	struct kop_buf tmp = KOP_BUF_INIT;
	int fd, ret = 0;

	kop_buf_addf(&tmp, "%s.tmp.%d", path, (int)getpid());
	fd = open(tmp.buf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || kop_write_all(fd, text, strlen(text)) < 0 || fsync(fd) < 0) {
		/* the temporary file is ours: the user named path */
		ret = kop_error(err, "unable to write '%s': %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		unlink(tmp.buf);
	} else if (close(fd) < 0 || rename(tmp.buf, path) < 0) {
		ret = kop_error(err, "unable to write '%s': %s", path, strerror(errno));
		unlink(tmp.buf);
	}
	kop_buf_release(&tmp);
	return ret;
}

/* Writes the kubeconfig (JSON, which every YAML reader takes) atomically. */
static int write_kubeconfig(const char *path, const char *url, const char *ca_pem, const char *token, char *err)
{
	jv cluster = JV_OBJECT(jv_string("server"), jv_string(url));
	jv user = jv_object(), cfg, s;
	struct kop_buf tmp = KOP_BUF_INIT;
	int ret = 0;

	if (ca_pem) {
		char *d = kop_base64(ca_pem, strlen(ca_pem));

		cluster = jv_object_set(cluster, jv_string("certificate-authority-data"), jv_string(d));
		free(d);
	}
	if (token)
		user = jv_object_set(user, jv_string("token"), jv_string(token));
	cfg = JV_OBJECT(jv_string("apiVersion"), jv_string("v1"), jv_string("kind"), jv_string("Config"),
			jv_string("clusters"),
			JV_ARRAY(JV_OBJECT(jv_string("name"), jv_string("ksim"), jv_string("cluster"), cluster)),
			jv_string("users"), JV_ARRAY(JV_OBJECT(jv_string("name"), jv_string("ksim"), jv_string("user"), user)),
			jv_string("contexts"),
			JV_ARRAY(JV_OBJECT(jv_string("name"), jv_string("ksim"), jv_string("context"),
					   JV_OBJECT(jv_string("cluster"), jv_string("ksim"), jv_string("user"),
						     jv_string("ksim"), jv_string("namespace"), jv_string("default")))),
			jv_string("current-context"), jv_string("ksim"), jv_string("preferences"), jv_object());
	s = jv_dump_string(cfg, JV_PRINT_PRETTY | JV_PRINT_SPACE1);
	kop_buf_addf(&tmp, "%s\n", jv_string_value(s));
	ret = write_file(path, tmp.buf, err);
	jv_free(s);
	kop_buf_release(&tmp);
	return ret;
}

/*
 * With --tls and --data, the certificate and its key live in the data
 * directory (tls.crt, tls.key), so that a restarted ksim keeps the CA its
 * clients trust; made (and kept there) when absent.
 */
static int tls_cert(char **cert, char **key, char *err)
{
	struct kop_buf cp = KOP_BUF_INIT, kp = KOP_BUF_INIT;
	size_t n;
	int rc = 0;

	if (!persist_dir)
		return make_cert(cert, key, err);
	kop_buf_addf(&cp, "%s/tls.crt", persist_dir);
	kop_buf_addf(&kp, "%s/tls.key", persist_dir);
	if (access(cp.buf, F_OK) == 0 || access(kp.buf, F_OK) == 0) {
		if (kop_read_file(cp.buf, 1 << 20, cert, &n, err) < 0 || kop_read_file(kp.buf, 1 << 20, key, &n, err) < 0)
			rc = -1;
	} else if ((rc = make_cert(cert, key, err)) == 0) {
		rc = write_file(kp.buf, *key, err) < 0 || write_file(cp.buf, *cert, err) < 0 ? -1 : 0;
	}
	kop_buf_release(&cp);
	kop_buf_release(&kp);
	return rc;
}

static void bootstrap(void)
{
	static const char *const names[] = { "default", "kube-system", "kube-public", "kube-node-lease" };

	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
		jv ns = JV_OBJECT(jv_string("apiVersion"), jv_string("v1"), jv_string("kind"), jv_string("Namespace"),
				  jv_string("metadata"), JV_OBJECT(jv_string("name"), jv_string(names[i])));
		int code = ksim_call("system:apiserver", "POST", "/api/v1/namespaces?fieldManager=kube-apiserver", NULL,
				     ns, NULL);

		if (code != 201 && code != 409)	/* 409: replayed from --data */
			die(KOP_EXIT_TEMP, "unable to create namespace '%s': code %d", names[i], code);
	}
}

int main(int argc, char **argv)
{
	const char *kubeconfig = NULL, *token = NULL;
	long port = 0, history = 10000;
	int tls = 0, c, bound = 0, sig, lfd;
	char *cert = NULL, *key = NULL, err[KOP_ERRLEN];
	struct MHD_Daemon *d;
	struct kop_buf url = KOP_BUF_INIT;
	sigset_t set;

	tool_init("ksim", argc, argv, 1);
	while ((c = getopt_long(argc, argv, TOOL_COMMON_SHORT, options, NULL)) != -1) {
		char *end;

		switch (c) {
		case OPT_KUBECONFIG:
			kubeconfig = optarg;
			break;
		case OPT_PORT:
			port = strtol(optarg, &end, 10);
			if (end == optarg || *end || port < 0 || port > 65535)
				die_usage("invalid port '%s'", optarg);
			break;
		case OPT_TLS:
			tls = 1;
			break;
		case OPT_TOKEN:
			token = optarg;
			if (!*token)
				die_usage("empty token");
			break;
		case OPT_HISTORY:
			history = strtol(optarg, &end, 10);
			if (*end || history < 1)
				die_usage("invalid history size '%s'", optarg);
			break;
		case OPT_BOOKMARK:
			ksim.bookmark_ms = tool_parse_duration_ms(optarg);
			if (ksim.bookmark_ms <= 0)
				die_usage("invalid duration '%s'", optarg);
			break;
		case OPT_EVENT_TTL:
			ksim.event_ttl_ms = tool_parse_duration_ms(optarg);
			if (ksim.event_ttl_ms <= 0)
				die_usage("invalid duration '%s'", optarg);
			break;
		case OPT_WATCH_LIST:
			if (!strcmp(optarg, "serve"))
				ksim.watch_list = KSIM_WL_SERVE;
			else if (!strcmp(optarg, "refuse-storage"))
				ksim.watch_list = KSIM_WL_REFUSE_STORAGE;
			else if (!strcmp(optarg, "gate-off"))
				ksim.watch_list = KSIM_WL_GATE_OFF;
			else if (!strcmp(optarg, "old"))
				ksim.watch_list = KSIM_WL_OLD;
			else if (!strcmp(optarg, "ignore"))
				ksim.watch_list = KSIM_WL_IGNORE;
			else
				die_usage("invalid --watch-list '%s' (serve, refuse-storage, gate-off, old or ignore)", optarg);
			break;
		case OPT_FEATURE_GATES:
			feature_gates(optarg);
			break;
		default:
			if (!ksim_sim_option(c, optarg) && !tool_common_option(c, optarg, usage))
				tool_bad_option(argv, TOOL_COMMON_SHORT);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	ksim.verbose = log_enabled(LOG_DEBUG);
	ksim.token = token;
	if (token)
		tls = 1;	/* kubectl (client-go) sends no bearer token over plain HTTP */

	/* Signals are taken by sigwait below; every thread inherits the mask. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	ksim_store_init((size_t)history);
	ksim_types_init();
	ksim_sim_init();
	bootstrap();
	if (tls && tls_cert(&cert, &key, err) < 0)
		die(KOP_EXIT_TEMP, "%s", err);
	ksim_ca_pem = cert;	/* self-signed: its own CA, published in kube-root-ca.crt */
	d = ksim_http_start((int)port, cert, key, &bound, err);
	if (!d)
		die(KOP_EXIT_TEMP, "%s", err);
	ksim_controllers_start();
	ksim_sim_start();
	kop_buf_addf(&url, "%s://127.0.0.1:%d", tls ? "https" : "http", bound);
	if (kubeconfig && write_kubeconfig(kubeconfig, url.buf, cert, token, err) < 0)
		die(KOP_EXIT_TEMP, "%s", err);
	tool_logj(LOG_INFO, JV_OBJECT(jv_string("url"), jv_string(url.buf)), "serving on '%s'", url.buf);

	do {
		if (sigwait(&set, &sig))
			sig = SIGTERM;
	} while (sig != SIGTERM && sig != SIGINT);
	log_info("stopping on signal %d", sig);
	/*
	 * No new connections; watch streams see `stopping` and end with the
	 * zero chunk; MHD stops once they are gone (or after 5 s).
	 */
	lfd = MHD_quiesce_daemon(d);
	ksim_lock();
	ksim.stopping = 1;
	pthread_cond_broadcast(&ksim.changed);
	ksim_watch_wake_all();
	{
		struct timespec until;

		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += 5;
		while (ksim.watches > 0 && !pthread_cond_timedwait(&ksim.changed, &ksim.lock, &until))
			;
	}
	ksim_unlock();
	/*
	 * Connections still open (keep-alive) may send requests until MHD is
	 * stopped: only then are the threads that serve them joined, and only
	 * then may what they read (RBAC tokens, fault settings) be freed and
	 * the --data log be closed (a write answered after it was closed
	 * would not be on disk).
	 */
	MHD_stop_daemon(d);
	if (lfd >= 0)
		close(lfd);
	/*
	 * The controllers (namespace finalizer, garbage collector) still
	 * delete and so consult RBAC's index and write the --data log: they
	 * stop before either is freed or closed.
	 */
	ksim_controllers_stop();
	ksim_sim_stop();
	ksim_store_free();
	ksim_types_free();
	free(cert);
	free(key);
	kop_buf_release(&url);
	return tool_finish(KOP_EXIT_OK);
}
