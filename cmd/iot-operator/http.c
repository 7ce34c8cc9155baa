/*
 * HTTP: /metrics, /healthz and /readyz on libmicrohttpd's thread, and
 * readiness, which /readyz and the iot_operator_ready gauge share. The
 * metrics' text is metrics.c's; whether a standby could lead is leader.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include "iot-operator.h"
#include "banned.h"

/* What keeps the pipeline from being ready, as its stages said (under sup.mu): "" when nothing. */
static const char *stage_note_locked(void)
{
	const char *note = sup.last_note;

	jv_object_foreach(sup.notes, slot, n) {
		if (note == sup.last_note && jv_get_kind(n) == JV_KIND_STRING)
			note = jv_string_value(n);	/* (held by sup.notes, not changed before the caller is done) */
		jv_free(slot);
		jv_free(n);
	}
	return note;
}

/*
 * Readiness (under sup.mu): can is standby_can_lead's answer, taken before,
 * with its reason in can_why. Not ready because of a stage: *why says which
 * and why, as the stage said it (a watch refused by the server...).
 */
int ready_locked(int can, const char *can_why, const char **why)
{
	/* (a standby too: it would take over only to fail the same way) */
	if (*sup.broken) {
		snprintf(sup.why, sizeof(sup.why), "the program '%s' cannot work: %s", sup.program_dir, sup.broken);
		*why = sup.why;
		return 0;
	}
	if (!sup.leader_elect || sup.is_leader) {
		if (!sup.pipeline_up || !sup.initial_sent) {
			const char *note = stage_note_locked();

			snprintf(sup.why, sizeof(sup.why), "%s%s%s",
				 !sup.pipeline_up ? "the pipeline is not running" : "the initial lists are not in yet",
				 *note ? ": " : "", note);
			*why = sup.why;
			return 0;
		}
		return 1;
	}
	*why = can_why;
	return can;	/* a standby is ready as a standby, if it could take over */
}

/* Answers with the text in b (taken). */
static enum MHD_Result http_answer(struct MHD_Connection *conn, unsigned code, const char *type, struct kop_buf *b)
{
	size_t len;
	char *body = kop_buf_detach(b, &len);
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result ret;

	MHD_add_response_header(r, "Content-Type", type);
	ret = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result http_handler(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				    const char *version, const char *upload_data, size_t *upload_data_size,
				    void **con_cls)
{
	struct kop_buf b = KOP_BUF_INIT;
	size_t len;

	(void)cls;
	(void)version;
	(void)upload_data;
	(void)con_cls;
	if (*upload_data_size) {
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
		kop_buf_adds(&b, "method not allowed\n");
		return http_answer(conn, 405, "text/plain; charset=utf-8", &b);
	}
	if (!strcmp(url, "/metrics")) {
		char *text = metrics_render(&len);

		b.buf = text;
		b.len = b.cap = len;
		return http_answer(conn, 200, "text/plain; version=0.0.4; charset=utf-8", &b);
	}
	if (!strcmp(url, "/healthz")) {
		kop_buf_adds(&b, "ok\n");
		return http_answer(conn, 200, "text/plain; charset=utf-8", &b);
	}
	if (!strcmp(url, "/readyz")) {
		const char *why = NULL;
		int ok, standby;

		char can_why[KOP_ERRLEN + 64] = "";
		int can = standby_can_lead(can_why, sizeof(can_why));

		pthread_mutex_lock(&sup.mu);
		ok = ready_locked(can, can_why, &why);
		standby = sup.leader_elect && !sup.is_leader;
		pthread_mutex_unlock(&sup.mu);
		if (ok)
			kop_buf_adds(&b, standby ? "ok (standby)\n" : "ok\n");
		else
			kop_buf_addf(&b, "not ready: %s\n", why);
		return http_answer(conn, ok ? 200 : 503, "text/plain; charset=utf-8", &b);
	}
	kop_buf_adds(&b, "404 page not found\n");
	return http_answer(conn, 404, "text/plain; charset=utf-8", &b);
}

/*
 * [HOST]:PORT, HOST empty = every address; "0" = no server (-1). Setup: an
 * address that is not one is bad usage (100), one that cannot be bound (in
 * use, not ours) a setup failure (111), both said before anything else is
 * started; it is served (and logged) by http_start. Returns the listening
 * socket.
 */
int http_bind(const char *addr)
{
	struct sockaddr_in sa;
	const char *colon = strrchr(addr, ':');
	char host[64];
	char *end;
	long port;
	int fd, on = 1;

	if (!strcmp(addr, "0"))
		return -1;
	if (!colon || (size_t)(colon - addr) >= sizeof(host))
		die_usage("invalid --metrics-addr '%s' (want [HOST]:PORT)", addr);
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = 0;
	port = strtol(colon + 1, &end, 10);
	if (*end || end == colon + 1 || port < 0 || port > 65535)
		die_usage("invalid port in --metrics-addr '%s'", addr);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	if (!*host || !strcmp(host, "0.0.0.0"))
		sa.sin_addr.s_addr = htonl(INADDR_ANY);
	else if (!strcmp(host, "localhost"))
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		die_usage("invalid host in --metrics-addr '%s' (an IPv4 address)", addr);
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		die(KOP_EXIT_TEMP, "unable to listen on '%s': %s", addr, strerror(errno));
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0) {
		int e = errno;

		close(fd);
		die(KOP_EXIT_TEMP, "unable to listen on '%s': %s", addr, strerror(e));
	}
	return fd_high(fd);
}

/* Serves on fd (http_bind's of addr; -1: no server, NULL). The daemon owns fd from here. */
struct MHD_Daemon *http_start(int fd, const char *addr)
{
	struct sockaddr_in sa;
	socklen_t salen = sizeof(sa);
	struct MHD_Daemon *d;
	const char *colon = strrchr(addr, ':');
	char host[64] = "";
	unsigned port = 0;

	if (fd < 0)
		return NULL;
	if (colon && (size_t)(colon - addr) < sizeof(host)) {
		memcpy(host, addr, (size_t)(colon - addr));
		host[colon - addr] = 0;
	}
	if (getsockname(fd, (struct sockaddr *)&sa, &salen) == 0)
		port = ntohs(sa.sin_port);
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, http_handler, NULL,
			     MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_CONNECTION_TIMEOUT, 30u,
			     MHD_OPTION_END);
	if (!d)
		die(KOP_EXIT_TEMP, "unable to serve on '%s': %s", addr, strerror(errno));
	tool_logj(LOG_INFO, JV_OBJECT(jv_string("addr"), jv_string(host), jv_string("port"), jv_number(port)),
		  "serving metrics and probes on '%s:%u'", *host ? host : "0.0.0.0", port);
	return d;
}
