/*
 * test-tool commands for lib/yaml, lib/kubeconfig, lib/kube and lib/discovery.
 * Secret values are never printed: only their length and a SHA-256 prefix.
 *   yaml [FILE]                      each document as a compact JSON line
 *   kubeconfig [--kubeconfig F] [--context C]
 *                                    the resolved configuration as JSON
 *   credentials [--kubeconfig F] N [K]
 *                                    N handles from kube_easy_new; before the K-th,
 *                                    kube_auth_failed (a 401); prints each Authorization.
 * $KOP_TEST_BETWEEN (sh) runs between two handles, requests or names of one command.
 *   response CODE [BODY-FILE [RETRY-AFTER [CURLCODE]]]
 *                                    kube_response_from as JSON
 *   discovery-find DIR NAME...       kube_discovery_find on the .json files in DIR
 *   request [--kubeconfig F] [--context C] [--timeout MS] [--repeat N] METHOD PATH [BODY-FILE]
 *                                    kube_request; the response as JSON
 *   resolve [--kubeconfig F] NAME... kube_resolve against a server
 *   resolve-gvk [--kubeconfig F] APIVERSION KIND
 * Errors print "error: …" and exit 1.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/evp.h>
#include "kop.h"
#include "jsonl.h"
#include "kube.h"
#include "kube-priv.h"
#include "yaml.h"
#include "test-tool.h"
#include "banned.h"

static int cmd_yaml(int argc, char **argv)
{
	char err[KOP_ERRLEN];
	jv docs;
	int rc;

	if (argc > 1) {
		rc = kop_yaml_load_file(argv[1], &docs, err);
	} else {
		char *text;
		size_t len;

		if (read_all_fd(0, &text, &len))
			return 2;
		rc = kop_yaml_load(text, len, NULL, &docs, err);
		free(text);
	}
	if (rc) {
		printf("error: %s\n", err);
		return 1;
	}
	jv_array_foreach(docs, i, d)
		kop_jsonl_write(stdout, d);
	jv_free(docs);
	return 0;
}

/* {"len":N,"sha256":"first 16 hex digits"}: enough to compare, never the value. */
static jv secret(const char *data, size_t len)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0, i;
	char hex[17];

	if (!data)
		return jv_null();
	EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
	for (i = 0; i < 8 && i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return JV_OBJECT(jv_string("len"), jv_number((double)len), jv_string("sha256"), jv_string(hex));
}

static jv str_or_null(const char *s)
{
	return s ? jv_string(s) : jv_null();
}

/* Common flags: --kubeconfig F, --context C, --timeout MS, --repeat N. Returns the index of the first other argument. */
struct kopts {
	const char *kubeconfig, *context;
	long timeout_ms;
	int repeat;
};

static int parse_kopts(int argc, char **argv, struct kopts *o)
{
	int i;

	memset(o, 0, sizeof(*o));
	o->repeat = 1;
	for (i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--kubeconfig"))
			o->kubeconfig = argv[i + 1];
		else if (!strcmp(argv[i], "--context"))
			o->context = argv[i + 1];
		else if (!strcmp(argv[i], "--timeout"))
			o->timeout_ms = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--repeat"))
			o->repeat = atoi(argv[i + 1]);
		else
			break;
	}
	return i;
}

static int cmd_kubeconfig(int argc, char **argv)
{
	struct kube_config cfg;
	struct kopts o;
	char err[KOP_ERRLEN];
	jv out;

	parse_kopts(argc, argv, &o);
	if (kube_config_load(&cfg, o.kubeconfig, o.context, err)) {
		printf("error: %s\n", err);
		return 1;
	}
	out = JV_OBJECT(jv_string("server"), str_or_null(cfg.server), jv_string("context"), str_or_null(cfg.context),
			jv_string("namespace"), str_or_null(cfg.namespace), jv_string("source"), str_or_null(cfg.source),
			jv_string("insecure"), jv_bool(cfg.insecure), jv_string("tls_server_name"),
			str_or_null(cfg.tls_server_name));
	out = jv_object_set(out, jv_string("ca"), secret(cfg.ca_pem, cfg.ca_len));
	out = jv_object_set(out, jv_string("cert"), secret(cfg.cert_pem, cfg.cert_len));
	out = jv_object_set(out, jv_string("key"), secret(cfg.key_pem, cfg.key_len));
	out = jv_object_set(out, jv_string("token"), secret(cfg.token, cfg.token ? strlen(cfg.token) : 0));
	out = jv_object_set(out, jv_string("token_file"), str_or_null(cfg.token_file));
	out = jv_object_set(out, jv_string("username"), str_or_null(cfg.username));
	out = jv_object_set(out, jv_string("password"), secret(cfg.password, cfg.password ? strlen(cfg.password) : 0));
	if (cfg.exec) {
		struct kube_exec *e = cfg.exec;
		jv args = jv_array(), env = jv_array();
		char **p;

		for (p = e->argv + 1; *p; p++)
			args = jv_array_append(args, jv_string(*p));
		for (p = e->env; *p; p++)
			env = jv_array_append(env, jv_string_sized(*p, (int)strcspn(*p, "=")));
		out = jv_object_set(out, jv_string("exec"),
				    JV_OBJECT(jv_string("apiVersion"), jv_string(e->api_version), jv_string("command"),
					      jv_string(e->command), jv_string("args"), args, jv_string("env"), env,
					      jv_string("interactiveMode"),
					      jv_string(e->interactive == KUBE_EXEC_NEVER	    ? "Never"
							: e->interactive == KUBE_EXEC_ALWAYS ? "Always"
											     : "IfAvailable"),
					      jv_string("clusterInfo"),
					      e->cluster_info ? jv_parse(e->cluster_info) : jv_null()));
	} else {
		out = jv_object_set(out, jv_string("exec"), jv_null());
	}
	kop_jsonl_write(stdout, out);
	kube_config_release(&cfg);
	return 0;
}

static struct kube_client *client_from(const struct kopts *o)
{
	struct kube_config cfg;
	struct kube_client *c;
	char err[KOP_ERRLEN];

	if (kube_config_load(&cfg, o->kubeconfig, o->context, err)) {
		printf("error: %s\n", err);
		return NULL;
	}
	c = kube_client_new(&cfg, o->timeout_ms, err);
	if (!c) {
		kube_config_release(&cfg);
		printf("error: %s\n", err);
	}
	return c;
}

/* $KOP_TEST_BETWEEN, a test's hook between two steps (rotate a token file, create a CRD); $J is the step. */
static void between(int j)
{
	char num[16];

	if (j < 2 || !getenv("KOP_TEST_BETWEEN"))
		return;
	snprintf(num, sizeof(num), "%d", j);
	setenv("J", num, 1);
	if (system(getenv("KOP_TEST_BETWEEN")))
		printf("%d hook failed\n", j);
}

static int cmd_credentials(int argc, char **argv)
{
	struct kopts o;
	int i = parse_kopts(argc, argv, &o), n, k, j;
	struct kube_client *c;
	int bad = 0;

	if (i >= argc)
		return 2;
	n = atoi(argv[i]);
	k = i + 1 < argc ? atoi(argv[i + 1]) : 0;
	c = client_from(&o);
	if (!c)
		return 1;
	for (j = 1; j <= n; j++) {
		struct curl_slist *h, *p;
		char err[KOP_ERRLEN];
		CURL *e;
		const char *auth = NULL;

		between(j);
		if (j == k)
			kube_auth_failed(c);
		e = kube_easy_new(c, "GET", "/api", &h, err);
		if (!e) {
			printf("%d error: %s\n", j, err);
			bad = 1;
			continue;
		}
		for (p = h; p; p = p->next)
			if (!strncmp(p->data, "Authorization: ", 15))
				auth = p->data + 15;
		printf("%d ", j);
		kop_jsonl_write(stdout, auth ? secret(auth, strlen(auth)) : jv_null());
		curl_easy_cleanup(e);
		curl_slist_free_all(h);
	}
	kube_client_free(c);
	return bad;
}

static jv response_json(struct kube_response *r, int with_body)
{
	jv out = JV_OBJECT(jv_string("code"), jv_number((double)r->code), jv_string("reason"), str_or_null(r->reason),
			   jv_string("message"), str_or_null(r->message), jv_string("retry_after"),
			   jv_number((double)r->retry_after_s), jv_string("transient"), jv_bool(r->transient),
			   jv_string("exit"), jv_number(kube_exit_code(r)));

	if (with_body)
		out = jv_object_set(out, jv_string("body"), jv_copy(r->body));
	return out;
}

static int cmd_response(int argc, char **argv)
{
	struct kube_response r;
	char *body = NULL;
	size_t len = 0;
	char err[KOP_ERRLEN];

	if (argc < 2)
		return 2;
	if (argc > 2 && *argv[2] && kop_read_file(argv[2], 1u << 24, &body, &len, err)) {
		printf("error: %s\n", err);
		return 1;
	}
	kube_response_from(&r, atol(argv[1]), body, len, argc > 3 && *argv[3] ? argv[3] : NULL,
			   argc > 4 ? (CURLcode)atoi(argv[4]) : CURLE_OK, NULL);
	kop_jsonl_write(stdout, jv_object_set(response_json(&r, 0), jv_string("why"),
					      jv_string(kube_response_why(&r, err, sizeof(err)))));
	kube_response_release(&r);
	free(body);
	return 0;
}

static void print_resource(const char *name, struct kube_resource *r)
{
	char *coll = kube_path(r, "ns1", NULL, NULL), *obj = kube_path(r, "ns1", "x", "status");

	printf("%s %s %s %s %s %s %s\n", name, r->api_version, r->resource, r->kind,
	       r->namespaced ? "namespaced" : "cluster", coll, obj);
	free(coll);
	free(obj);
}

static int cmd_discovery_find(int argc, char **argv)
{
	jv docs = jv_object(), groups = jv_null();
	DIR *d;
	struct dirent *de;
	int i, bad = 0;

	if (argc < 2 || !(d = opendir(argv[1])))
		return 2;
	while ((de = readdir(d))) {
		struct kop_buf path = KOP_BUF_INIT;
		char err[KOP_ERRLEN];
		jv v, kind;

		if (!strstr(de->d_name, ".json"))
			continue;
		kop_buf_addf(&path, "%s/%s", argv[1], de->d_name);
		if (kop_yaml_load_file(path.buf, &v, err)) {
			printf("error: %s\n", err);
			kop_buf_release(&path);
			closedir(d);
			return 1;
		}
		kop_buf_release(&path);
		v = jv_array_get(v, 0);
		kind = jv_get_kind(v) == JV_KIND_OBJECT ? jv_object_get(jv_copy(v), jv_string("kind")) : jv_null();
		if (jv_get_kind(kind) == JV_KIND_STRING && !strcmp(jv_string_value(kind), "APIResourceList"))
			docs = jv_object_set(docs, jv_object_get(jv_copy(v), jv_string("groupVersion")), jv_copy(v));
		else if (jv_get_kind(kind) == JV_KIND_STRING && !strcmp(jv_string_value(kind), "APIGroupList")) {
			jv_free(groups);
			groups = jv_copy(v);
		}
		jv_free(kind);
		jv_free(v);
	}
	closedir(d);
	for (i = 2; i < argc; i++) {
		struct kube_resource r;
		char err[KOP_ERRLEN];

		if (kube_discovery_find(jv_copy(docs), jv_copy(groups), argv[i], &r, err)) {
			printf("%s error: %s\n", argv[i], err);
			bad = 1;
			kube_resource_release(&r);
			continue;
		}
		print_resource(argv[i], &r);
		kube_resource_release(&r);
	}
	jv_free(docs);
	jv_free(groups);
	return bad;
}

static int cmd_request(int argc, char **argv)
{
	struct kopts o;
	int i = parse_kopts(argc, argv, &o), rc = 0, n;
	struct kube_client *c;
	jv body = jv_invalid();

	if (i + 1 >= argc)
		return 2;
	c = client_from(&o);
	if (!c)
		return 1;
	for (n = 0; n < o.repeat; n++) {
		struct kube_response r;

		between(n + 1);

		if (i + 2 < argc) {
			char err[KOP_ERRLEN];

			if (kop_yaml_load_file(argv[i + 2], &body, err)) {
				printf("error: %s\n", err);
				kube_client_free(c);
				return 1;
			}
			body = jv_array_get(body, 0);
		}
		rc = kube_request(c, argv[i], argv[i + 1], NULL, body, &r) ? 1 : 0;
		kop_jsonl_write(stdout, response_json(&r, 1));
		kube_response_release(&r);
	}
	kube_client_free(c);
	return rc;
}

static int cmd_resolve(int argc, char **argv)
{
	struct kopts o;
	int i = parse_kopts(argc, argv, &o), bad = 0, j;
	struct kube_client *c = client_from(&o);

	if (!c)
		return 1;
	for (j = 1; i < argc; i++, j++) {
		struct kube_resource r;
		char err[KOP_ERRLEN];

		between(j);
		if (kube_resolve(c, argv[i], &r, err)) {
			printf("%s error: %s\n", argv[i], err);
			bad = 1;
		} else {
			print_resource(argv[i], &r);
		}
		kube_resource_release(&r);
	}
	kube_client_free(c);
	return bad;
}

static int cmd_resolve_gvk(int argc, char **argv)
{
	struct kopts o;
	int i = parse_kopts(argc, argv, &o), bad = 0;
	struct kube_client *c;
	struct kube_resource r;
	char err[KOP_ERRLEN];

	if (i + 1 >= argc)
		return 2;
	c = client_from(&o);
	if (!c)
		return 1;
	if (kube_resolve_gvk(c, argv[i], argv[i + 1], &r, NULL, err)) {
		printf("error: %s\n", err);
		bad = 1;
	} else {
		print_resource(argv[i + 1], &r);
	}
	kube_resource_release(&r);
	kube_client_free(c);
	return bad;
}

static int cmd_query_escape(int argc, char **argv)
{
	char *e;

	if (argc < 2)
		return 2;
	e = kube_query_escape(argv[1]);
	printf("%s\n", e);
	free(e);
	return 0;
}

static const struct test_cmd kube_cmds[] = {
	{ "yaml", cmd_yaml },
	{ "kubeconfig", cmd_kubeconfig },
	{ "credentials", cmd_credentials },
	{ "response", cmd_response },
	{ "discovery-find", cmd_discovery_find },
	{ "request", cmd_request },
	{ "resolve", cmd_resolve },
	{ "resolve-gvk", cmd_resolve_gvk },
	{ "query-escape", cmd_query_escape },
	{ NULL, NULL }
};
TEST_TOOL_REGISTER(kube_cmds)
