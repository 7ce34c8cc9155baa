/*
 * kstatus: writes "op":"status" lines to the status subresource (a merge
 * patch, only when the status differs from the stored one) and records
 * "op":"event" lines as core/v1 Events, counting repeats; per object, the
 * statuses that follow a status write within --coalesce are held and only
 * the newest is written. Every other line passes through. One result line
 * per operation.
 * This file owns the options, the client's setup, the dispatch of a line and
 * the main loop; the rest is in the files beside it.
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <curl/curl.h>
#include "kstatus.h"
#include "banned.h"

struct kstatus_options opt = { "iot-operator", "iot-operator", 10, 500, 4 };
const char *default_ns = "default";
char *instance;
char *host;
atomic_int stopping;

static const char usage[] =
"usage: kstatus [options] < operations\n"
"\n"
"Reads JSON lines on stdin. {\"op\":\"status\",\"object\":{...,\"status\":{...}}} is written to\n"
"the object's status subresource when it differs from the stored status;\n"
"{\"op\":\"event\",\"event\":{\"involvedObject\":{...},\"type\",\"reason\",\"message\"}} is recorded\n"
"as a Kubernetes Event (a repeat within 10 minutes raises the count of the first).\n"
"Every other line is passed through to stdout; each operation adds one\n"
"{\"op\":\"result\",...} line. A line with \"barrier\" (and no op) is passed on once all\n"
"before it is written, what is held included.\n"
"\n"
"Per object, a status is written at once when no --coalesce window is open; one\n"
"opens then, and the statuses that come within it are held: only the newest is\n"
"written when it ends (a replaced one's result says \"skipped\":\"superseded\").\n"
"Events that come while a status is held are written after it, repeats of one\n"
"Event as one write; other events at once. End of input or SIGTERM writes what is\n"
"held, then exits.\n"
"\n"
"      --field-manager M    field manager of status writes (default iot-operator)\n"
"      --component C        the events' reporting component (default iot-operator)\n"
"      --max-retries N      tries after a transient failure or a conflict (default 10)\n"
"      --coalesce D         the window per object (default 500ms, at most 30s; 0: write\n"
"                           every line at once)\n"
"      --concurrency N      requests in flight, each object's in order (default 4, at\n"
"                           most 64)\n"
"      --kubeconfig F, --context C, --request-timeout D\n"
"  -v, --log-level L, --log-format json|text, -h, --help\n"
"\n"
"Exit: 0 at the end of the input or after SIGTERM/SIGINT (API errors are reported\n"
"in result lines); 100 bad usage or configuration; 111 stdout or stdin failed.\n";

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static void handle(jv line)
{
	jv op = kop_json_member(jv_copy(line), "op");
	int is_status = jv_get_kind(op) == JV_KIND_STRING && !strcmp(jv_string_value(op), "status");
	int is_event = jv_get_kind(op) == JV_KIND_STRING && !strcmp(jv_string_value(op), "event");
	char *key = NULL;
	struct window *w;

	jv_free(op);
	if (!is_status && !is_event) {
		/* a barrier goes on once everything before it is written: what is held, first */
		if (jv_get_kind(line) == JV_KIND_OBJECT && jv_object_has(jv_copy(line), jv_string("barrier")))
			windows_due(1);
		writers_pass(line, 0);
		return;
	}
	key = op_key(line, is_status);
	w = key && opt.coalesce_ms > 0 ? kop_hmap_get(&windows, key) : NULL;
	if (is_status && w) {
		if (jv_is_valid(w->status))
			writers_pass(superseded(w->status), 1);	/* after that object's earlier results */
		w->status = line;
	} else if (is_status) {
		writers_queue(line, key, 1);
		if (key && opt.coalesce_ms > 0)
			win_open(key);
	} else if (w && jv_is_valid(w->status)) {
		w->events = jv_array_append(w->events, line);	/* it comes after that status */
	} else
		writers_queue(JV_ARRAY(line), key, 0);
	free(key);
}

/*
 * A line that is none of kstatus's (kapply's results, most of its input:
 * twenty-one an IoT instance, against a few statuses and Events) passes
 * through as its text, read only for where it goes (kop_line_route), not
 * parsed and written again. 1 when taken; 0 to read it whole: a status, an
 * Event, a barrier, or a line kop_line_route cannot read so.
 */
static int take_line(void *ctx, const char *text, size_t len)
{
	static const char *const own[] = { "status", "event", NULL };
	char *op, *primary;
	int barrier;

	(void)ctx;
	if (kop_line_route(text, len, own, &op, &primary, &barrier) != 0)
		return 0;
	free(op);
	if (barrier) {
		free(primary);
		return 0;	/* (what is held goes first: handle) */
	}
	writers_pass_text(text, len, primary);
	return 1;
}

enum { OPT_FIELD_MANAGER = OPT_TOOL_LAST, OPT_COMPONENT, OPT_MAX_RETRIES, OPT_COALESCE, OPT_CONCURRENCY };

static const struct option options[] = {
	{ "field-manager", required_argument, NULL, OPT_FIELD_MANAGER },
	{ "component", required_argument, NULL, OPT_COMPONENT },
	{ "max-retries", required_argument, NULL, OPT_MAX_RETRIES },
	{ "coalesce", required_argument, NULL, OPT_COALESCE },
	{ "concurrency", required_argument, NULL, OPT_CONCURRENCY },
	TOOL_COMMON_OPTIONS,
	TOOL_KUBE_OPTIONS,
	{ NULL, 0, NULL, 0 }
};

int main(int argc, char **argv)
{
	struct kube_config cfg;
	struct kube_client **clients;
	struct kop_jsonl reader;
	unsigned i;
	char *ua;
	struct sigaction sa;
	char err[KOP_ERRLEN], hostbuf[256];
	const char *pod;
	int c;

	tool_init("kstatus", argc, argv, 1);
	/* one malloc arena: the writers run one at a time (kstatus_lock), so an arena each would only
	 * hold memory (1.8 MB of PSS at N = 1,000) */
	mallopt(M_ARENA_MAX, 1);
	while ((c = getopt_long(argc, argv, TOOL_COMMON_SHORT, options, NULL)) != -1) {
		if (tool_common_option(c, optarg, usage))
			continue;
		switch (c) {
		case OPT_FIELD_MANAGER:
			if (!*optarg || strlen(optarg) > 128)
				die_usage("invalid --field-manager '%s'", optarg);
			opt.field_manager = optarg;
			break;
		case OPT_COMPONENT:
			if (!*optarg)
				die_usage("invalid --component ''");
			opt.component = optarg;
			break;
		case OPT_MAX_RETRIES: {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);

			if (end == optarg || *end || v > 1000)
				die_usage("invalid --max-retries '%s'", optarg);
			opt.max_retries = (unsigned)v;
			break;
		}
		case OPT_COALESCE:
			/* ireconcile sends an unanswered status again after a minute */
			if ((opt.coalesce_ms = tool_parse_duration_ms(optarg)) < 0 || opt.coalesce_ms > 30000)
				die_usage("invalid --coalesce '%s' (a duration of at most 30s)", optarg);
			break;
		case OPT_CONCURRENCY: {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);

			if (end == optarg || *end || v < 1 || v > 64)
				die_usage("invalid --concurrency '%s' (1 to 64)", optarg);
			opt.concurrency = (unsigned)v;
			break;
		}
		default:
			tool_bad_option(argv, TOOL_COMMON_SHORT);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);

	if (gethostname(hostbuf, sizeof(hostbuf)) < 0)
		hostbuf[0] = '\0';
	hostbuf[sizeof(hostbuf) - 1] = '\0';
	host = kop_strdup(hostbuf);
	pod = getenv("POD_NAME");
	instance = kop_strdup(pod && *pod ? pod : hostbuf);

	curl_global_init(CURL_GLOBAL_DEFAULT);
	/* a client per writer: its own connection */
	clients = kop_calloc(opt.concurrency, sizeof(*clients));
	ua = tool_user_agent("kstatus");
	for (i = 0; i < opt.concurrency; i++) {
		memset(&cfg, 0, sizeof(cfg));
		if (kube_config_load(&cfg, tool_kube.kubeconfig, tool_kube.context, err) < 0)
			die(KOP_EXIT_PERM, "%s", err);
		if (!i && cfg.namespace && *cfg.namespace)
			default_ns = kop_strdup(cfg.namespace);
		if (!(clients[i] = kube_client_new(&cfg, tool_kube.request_timeout_ms, err)))
			die(KOP_EXIT_PERM, "%s", err);
		kube_client_set_user_agent(clients[i], ua);
	}
	free(ua);

	kop_hmap_init(&windows);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;	/* no SA_RESTART: poll() returns */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	pthread_mutex_lock(&kstatus_lock);
	/* (the writers touch jq values only under kstatus_lock: one table of short strings for all) */
	kop_json_key_share();
	if (writers_start(opt.concurrency, clients, err) < 0)
		die(KOP_EXIT_TEMP, "%s", err);
	free(clients);

	kop_jsonl_init(&reader, 0);
	reader.fast = 1;	/* (one thread reads; the writers touch its values only under kstatus_lock, as it does) */
	reader.take = take_line;
	while (!stopping) {
		struct pollfd pfd = { 0, POLLIN, 0 };
		size_t lineno;
		jv v;
		int rc, timeout = -1;

		/* no more input read while the writers have as much as they may queue */
		if (writers_full()) {
			windows_due(0);
			tool_metrics_flush(0);	/* (at most every 200 ms) */
			writers_wait_room(win_head ? win_head->end - kop_mono_ms() : 1000);
			continue;
		}
		rc = kop_jsonl_next(&reader, &v, &lineno, err);
		if (rc > 0) {
			handle(v);
			windows_due(0);
			continue;
		}
		if (rc < 0) {
			log_error("stdin: a bad line skipped: %s", err);
			continue;
		}
		if (reader.eof)
			break;
		windows_due(0);
		if (win_head) {
			int64_t left = win_head->end - kop_mono_ms();

			timeout = left < 0 ? 0 : left > 60000 ? 60000 : (int)left;
		}
		/* (what the writers remember meanwhile is looked at again within a second of their last write) */
		timeout = (int)tool_sooner(tool_sooner(tool_sooner(timeout, status_idle(kop_mono_ms())),
						       events_idle(kop_wall_ms())),
					   writers_busy() ? 1000 : -1);
		timeout = (int)tool_idle(timeout);	/* (under the lock: the writers count too) */
		pthread_mutex_unlock(&kstatus_lock);
		rc = poll(&pfd, 1, timeout);
		pthread_mutex_lock(&kstatus_lock);
		if (stopping)
			writers_wake();	/* a retry's sleep ends */
		if (rc < 0 && errno != EINTR) {
			log_error("unable to read stdin: %s", strerror(errno));
			kop_jsonl_eof(&reader);
		} else if (rc > 0 && kop_jsonl_read_fd(&reader, 0) < 0 && errno != EINTR) {
			log_error("unable to read stdin: %s", strerror(errno));
			kop_jsonl_eof(&reader);
		}
	}
	if (stopping && win_head)
		log_info("stopping on a signal: writing the statuses and events held");
	windows_due(1);
	writers_stop();
	pthread_mutex_unlock(&kstatus_lock);
	kop_hmap_release(&windows, NULL);
	kop_jsonl_release(&reader);
	events_release();
	status_release();
	curl_global_cleanup();
	free(host);
	free(instance);
	if (default_ns && strcmp(default_ns, "default"))
		free((char *)default_ns);
	return tool_finish(KOP_EXIT_OK);
}
