/*
 * test-tool canned-server ROUTES DIR: a tiny loopback HTTP server answering
 * from canned routes, for tests that need an answer ksim does not give
 * (a 403 before RBAC exists, a server without streaming lists).
 *
 * ROUTES holds one JSON object per line, first match wins:
 *   {"path":"/api/v1","file":"api-v1.json"}                  200 with the file (relative to ROUTES)
 *   {"path":"/api/v1/secrets","query":"watch=true","code":403,"body":{…}}
 * "query" (optional) must occur in the request's query string; "auth" (optional)
 * must equal the Authorization header. No match: 404.
 * Writes its port to DIR/port and every request ("GET /path?query") to
 * DIR/requests; serves until SIGTERM.
 */
#include <netinet/in.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <microhttpd.h>
#include "kop.h"
#include "jsonl.h"
#include "test-tool.h"
#include "banned.h"

static jv routes;
static char *routes_dir;
static FILE *requests;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static enum MHD_Result add_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct kop_buf *q = cls;

	(void)kind;
	kop_buf_addf(q, "%s%s=%s", q->len ? "&" : "", key, value ? value : "");
	return MHD_YES;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
			      const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	struct kop_buf q = KOP_BUF_INIT;
	struct MHD_Response *resp;
	enum MHD_Result ret;
	int i, n, code = 404;
	char *body = NULL;
	size_t len = 0;
	char err[KOP_ERRLEN];

	(void)cls;
	(void)version;
	(void)upload;
	if (!*con_cls) {	/* headers only so far */
		*con_cls = conn;
		return MHD_YES;
	}
	if (*upload_size) {
		*upload_size = 0;
		return MHD_YES;
	}
	MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, add_arg, &q);
	pthread_mutex_lock(&log_lock);
	fprintf(requests, "%s %s?%s\n", method, url, q.buf ? q.buf : "");
	fflush(requests);
	pthread_mutex_unlock(&log_lock);
	n = jv_array_length(jv_copy(routes));
	for (i = 0; i < n; i++) {
		jv r = jv_array_get(jv_copy(routes), i);
		jv p = jv_object_get(jv_copy(r), jv_string("path"));
		jv qs = jv_object_get(jv_copy(r), jv_string("query"));
		jv au = jv_object_get(jv_copy(r), jv_string("auth"));
		const char *have = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
		int match = jv_get_kind(p) == JV_KIND_STRING && !strcmp(jv_string_value(p), url) &&
			    (jv_get_kind(qs) != JV_KIND_STRING || (q.buf && strstr(q.buf, jv_string_value(qs)))) &&
			    (jv_get_kind(au) != JV_KIND_STRING || (have && !strcmp(have, jv_string_value(au))));

		jv_free(p);
		jv_free(qs);
		jv_free(au);
		if (match) {
			jv c = jv_object_get(jv_copy(r), jv_string("code"));
			jv f = jv_object_get(jv_copy(r), jv_string("file"));
			jv b = jv_object_get(jv_copy(r), jv_string("body"));

			code = jv_get_kind(c) == JV_KIND_NUMBER ? (int)jv_number_value(c) : 200;
			if (jv_get_kind(f) == JV_KIND_STRING) {
				struct kop_buf path = KOP_BUF_INIT;

				kop_buf_addf(&path, "%s/%s", routes_dir, jv_string_value(f));
				if (kop_read_file(path.buf, 64u << 20, &body, &len, err) < 0) {
					code = 500;
					body = kop_strdup(err);
					len = strlen(body);
				}
				kop_buf_release(&path);
			} else if (jv_is_valid(b) && jv_get_kind(b) != JV_KIND_NULL) {
				body = kop_json_dump(jv_copy(b));
				len = strlen(body);
			}
			jv_free(c);
			jv_free(f);
			jv_free(b);
		}
		jv_free(r);
		if (match)
			break;
	}
	kop_buf_release(&q);
	if (!body) {
		body = kop_strdup(code == 404 ? "404 page not found\n" : "");
		len = strlen(body);
	}
	resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(resp, "Content-Type", code == 404 ? "text/plain" : "application/json");
	ret = MHD_queue_response(conn, (unsigned)code, resp);
	MHD_destroy_response(resp);
	return ret;
}

static int cmd_canned_server(int argc, char **argv)
{
	struct MHD_Daemon *d;
	struct sockaddr_in sin;
	const union MHD_DaemonInfo *info;
	struct kop_jsonl r;
	struct kop_buf path = KOP_BUF_INIT;
	char err[KOP_ERRLEN];
	FILE *f;
	sigset_t set;
	int sig, fd;
	char *slash;

	if (argc < 3) {
		fprintf(stderr, "usage: test-tool canned-server ROUTES DIR\n");
		return 2;
	}
	routes = jv_array();
	routes_dir = kop_strdup(argv[1]);
	slash = strrchr(routes_dir, '/');
	if (slash)
		*slash = 0;
	else
		routes_dir[0] = '.', routes_dir[1] = 0;
	if ((fd = open(argv[1], O_RDONLY)) < 0) {
		perror(argv[1]);
		return 2;
	}
	kop_jsonl_init(&r, 0);
	for (;;) {
		jv v;
		int rc = kop_jsonl_next(&r, &v, NULL, err);

		if (rc > 0) {
			routes = jv_array_append(routes, v);
			continue;
		}
		if (rc < 0) {
			fprintf(stderr, "%s: %s\n", argv[1], err);
			return 2;
		}
		if (r.eof || kop_jsonl_read_fd(&r, fd) < 0)
			break;
	}
	close(fd);
	kop_jsonl_release(&r);
	kop_buf_addf(&path, "%s/requests", argv[2]);
	if (!(requests = fopen(path.buf, "a"))) {
		perror(path.buf);
		return 2;
	}
	/* The signals are taken by sigwait below, in every thread. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0, NULL, NULL, handle,
			     NULL, MHD_OPTION_SOCK_ADDR, &sin, MHD_OPTION_END);
	if (!d || !(info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT))) {
		fprintf(stderr, "canned-server: unable to listen\n");
		return 2;
	}
	kop_buf_reset(&path);
	kop_buf_addf(&path, "%s/port.tmp", argv[2]);
	if (!(f = fopen(path.buf, "w")) || fprintf(f, "%u\n", info->port) < 0 || fclose(f)) {
		perror(path.buf);
		return 2;
	}
	{
		struct kop_buf final = KOP_BUF_INIT;

		kop_buf_addf(&final, "%s/port", argv[2]);
		rename(path.buf, final.buf);
		kop_buf_release(&final);
	}
	sigwait(&set, &sig);
	MHD_stop_daemon(d);
	fclose(requests);
	kop_buf_release(&path);
	jv_free(routes);
	free(routes_dir);
	return 0;
}

static const struct test_cmd canned_cmds[] = {
	{ "canned-server", cmd_canned_server },
	{ NULL, NULL },
};
TEST_TOOL_REGISTER(canned_cmds)
