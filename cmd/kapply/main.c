/*
 * kapply: server-side apply, delete and patch, from the stage protocol on
 * stdin or from manifests (-f), several requests in flight, the order of
 * operations on one object kept, transient failures retried, one result line
 * per operation on stdout.
 * This file owns the options, the client's setup and the main loop; the rest
 * is in the files beside it.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include "kapply.h"
#include "banned.h"

static const char usage[] =
"usage: kapply [options] [-f FILE|DIR|-]...\n"
"\n"
"Without -f, reads JSON lines on stdin: {\"op\":\"apply\"|\"create\"|\"delete\"|\"patch\",...}\n"
"are performed; lines of other stages' ops (status, event, result, dry-run, diff)\n"
"and lines without an op are passed through to stdout, an unknown op is refused;\n"
"one {\"op\":\"result\",...} line is written per operation. With -f, applies the objects of YAML or JSON\n"
"manifests (as kubectl apply --server-side -f does).\n"
"\n"
"  -f, --filename F         a manifest file, a directory of them, or - (stdin); repeatable\n"
"  -n, --namespace NS       namespace for namespaced objects that name none\n"
"      --field-manager M    server-side apply field manager (default iot-operator)\n"
"      --force-conflicts[=BOOL]  take fields owned by other managers (default true)\n"
"      --dry-run[=MODE]     client (default when given): print what would be sent, no\n"
"                           network; server: send with dryRun=All; none\n"
"      --diff               print, per object, what would change; exit 1 if anything would\n"
"      --concurrency N      requests in flight (default 8)\n"
"      --qps Q, --burst B   client rate limit (default off)\n"
"      --max-retries N      tries after a transient failure (default 10)\n"
"      --crd-timeout D      how long to wait for a CRD to become Established (default 60s)\n"
"      --kubeconfig F, --context C, --request-timeout D\n"
"  -v, --log-level L, --log-format json|text, -h, --help\n"
"\n"
"Exit: 0 all done; 1 --diff found changes; with -f, 100 when the input was bad (no\n"
"objects in it included) or an operation failed permanently, 111 when one still\n"
"failed transiently after its retries (a server that cannot be reached: after 3\n"
"retries within 5 s). On stdin the stream goes on after any API error (reported\n"
"in its result line) and ends with 0.\n";

const char *const kind_names[] = { "pass", "apply", "delete", "patch", "create", "unknown" };

struct kapply_options opt = { NULL, "iot-operator", 1, DRY_NONE, 0, 8, 0, 0, 10, 60000 };

struct kube_client *client;
const char *default_ns = "default";
CURLM *multi;
unsigned inflight;
struct op **queue;
size_t queue_len, queue_cap;

int stream_mode;
int worst;		/* exit code: 0, 1 (diff), 100, 111 */
volatile sig_atomic_t stopping;
static int unfinished;		/* stopped by a signal before everything was done */

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static int parse_bool(const char *s, const char *what)
{
	if (!s || !strcmp(s, "true") || !strcmp(s, "1"))
		return 1;
	if (!strcmp(s, "false") || !strcmp(s, "0"))
		return 0;
	die_usage("invalid value '%s' for %s (true or false)", s, what);
}

static unsigned long parse_count(const char *s, const char *what, unsigned long min)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < min || v > 100000)
		die_usage("invalid %s '%s'", what, s);
	return v;
}

static double parse_rate(const char *s, const char *what)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || v < 0 || v > 1e6)
		die_usage("invalid %s '%s'", what, s);
	return v;
}

enum {
	OPT_FIELD_MANAGER = OPT_TOOL_LAST,
	OPT_FORCE,
	OPT_DRY_RUN,
	OPT_DIFF,
	OPT_CONCURRENCY,
	OPT_QPS,
	OPT_BURST,
	OPT_MAX_RETRIES,
	OPT_CRD_TIMEOUT
};

static const struct option options[] = {
	{ "filename", required_argument, NULL, 'f' },
	{ "namespace", required_argument, NULL, 'n' },
	{ "field-manager", required_argument, NULL, OPT_FIELD_MANAGER },
	{ "force-conflicts", optional_argument, NULL, OPT_FORCE },
	{ "dry-run", optional_argument, NULL, OPT_DRY_RUN },
	{ "diff", no_argument, NULL, OPT_DIFF },
	{ "concurrency", required_argument, NULL, OPT_CONCURRENCY },
	{ "qps", required_argument, NULL, OPT_QPS },
	{ "burst", required_argument, NULL, OPT_BURST },
	{ "max-retries", required_argument, NULL, OPT_MAX_RETRIES },
	{ "crd-timeout", required_argument, NULL, OPT_CRD_TIMEOUT },
	TOOL_COMMON_OPTIONS,
	TOOL_KUBE_OPTIONS,
	{ NULL, 0, NULL, 0 }
};

/* -f gave nothing to apply: kubectl's "no objects passed to apply" (bad input, 100). */
static noreturn void die_no_objects(const char *const *files, int nfiles)
{
	struct kop_buf b = KOP_BUF_INIT;
	int i;

	for (i = 0; i < nfiles; i++)
		kop_buf_addf(&b, "%s'%s'", i ? ", " : "", strcmp(files[i], "-") ? files[i] : "<stdin>");
	die(KOP_EXIT_PERM, "unable to apply %s: no objects in %s (empty documents are skipped)", b.buf,
	    nfiles > 1 ? "them" : "it");
}

static void setup_client(void)
{
	struct kube_config cfg;
	char err[KOP_ERRLEN];

	memset(&cfg, 0, sizeof(cfg));
	if (kube_config_load(&cfg, tool_kube.kubeconfig, tool_kube.context, err) < 0) {
		if (opt.dry_run == DRY_CLIENT)
			return;	/* no network needed: the namespace defaults to "default" */
		die(KOP_EXIT_PERM, "%s", err);
	}
	if (cfg.namespace && *cfg.namespace)
		default_ns = kop_strdup(cfg.namespace);
	if (opt.dry_run == DRY_CLIENT) {
		kube_config_release(&cfg);
		return;
	}
	/* Discovery's reads (blocking) get the writes' default limit too: a server that never answers is no answer. */
	if (!(client = kube_client_new(&cfg, tool_kube.request_timeout_ms > 0 ? tool_kube.request_timeout_ms : 60000,
				       err)))
		die(KOP_EXIT_PERM, "%s", err);
	{
		char *ua = tool_user_agent("kapply");

		kube_client_set_user_agent(client, ua);
		free(ua);
	}
}

static int stdin_ready(int timeout_ms)
{
	struct pollfd pfd = { 0, POLLIN, 0 };

	return poll(&pfd, 1, timeout_ms) > 0 && (pfd.revents & (POLLIN | POLLHUP | POLLERR));
}

static void run(void)
{
	struct sigaction sa;
	int64_t stop_deadline = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (client) {
		multi = curl_multi_init();
		curl_multi_setopt(multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
		curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)opt.concurrency);
	}
	for (;;) {
		struct curl_waitfd wfd = { 0, CURL_WAIT_POLLIN, 0 };
		int64_t wait;
		int running = 0, left, want_stdin;
		CURLMsg *m;

		read_input();
		wait = schedule();
		flush_queue();
		if ((input_done || stopping) && !queue_len)
			break;
		if (stopping) {
			/* Drain what is in flight for a bounded time; what never started is dropped. */
			if (!stop_deadline)
				stop_deadline = kop_mono_ms() + 10000;
			if (!inflight || kop_mono_ms() > stop_deadline) {
				log_warn("stopping with %zu operations unfinished", queue_len);
				unfinished = 1;
				break;
			}
		}
		/* Backpressure: stdin is read only once the lines already read are all queued. */
		want_stdin = stream_mode && need_input && !input_done && !stopping && !reader.eof;
		if (!multi) {
			if (want_stdin && stdin_ready((int)wait) && kop_jsonl_read_fd(&reader, 0) < 0 && errno != EINTR &&
			    errno != EAGAIN) {
				log_error("unable to read stdin: %s", strerror(errno));
				kop_jsonl_eof(&reader);
			}
			continue;
		}
		if (wait > 200 && stopping)
			wait = 200;
		if (!inflight)
			wait = tool_idle(wait);	/* (the last counts are not held back while it waits) */
		curl_multi_poll(multi, want_stdin ? &wfd : NULL, want_stdin ? 1 : 0, (int)wait, NULL);
		/* curl reports POLLIN only; poll again for the end of a pipe (POLLHUP). */
		if (want_stdin && stdin_ready(0) && kop_jsonl_read_fd(&reader, 0) < 0 && errno != EINTR &&
		    errno != EAGAIN) {
			log_error("unable to read stdin: %s", strerror(errno));
			kop_jsonl_eof(&reader);
		}
		curl_multi_perform(multi, &running);
		while ((m = curl_multi_info_read(multi, &left)))
			if (m->msg == CURLMSG_DONE)
				finished(m);
	}
	if (multi) {
		size_t i;

		/* (stopped with operations in flight: their handles out of the multi handle before it
		 * goes, and back to the client, which frees them before the share they use) */
		for (i = 0; i < queue_len; i++)
			if (queue[i]->easy)
				op_end_transfer(queue[i]);
		curl_multi_cleanup(multi);
	}
}

int main(int argc, char **argv)
{
	const char *files[64];
	int nfiles = 0, c, i;
	char err[KOP_ERRLEN];

	tool_init("kapply", argc, argv, 1);
	while ((c = getopt_long(argc, argv, "f:n:" TOOL_COMMON_SHORT, options, NULL)) != -1) {
		if (tool_common_option(c, optarg, usage))
			continue;
		switch (c) {
		case 'f':
			if (nfiles == (int)(sizeof(files) / sizeof(files[0])))
				die_usage("too many -f");
			files[nfiles++] = optarg;
			break;
		case 'n':
			opt.namespace = optarg;
			break;
		case OPT_FIELD_MANAGER:
			if (!*optarg || strlen(optarg) > 128)
				die_usage("invalid --field-manager '%s'", optarg);
			opt.field_manager = optarg;
			break;
		case OPT_FORCE:
			opt.force = parse_bool(optarg, "--force-conflicts");
			break;
		case OPT_DRY_RUN:
			if (!optarg || !strcmp(optarg, "client"))
				opt.dry_run = DRY_CLIENT;
			else if (!strcmp(optarg, "server"))
				opt.dry_run = DRY_SERVER;
			else if (!strcmp(optarg, "none"))
				opt.dry_run = DRY_NONE;
			else
				die_usage("invalid --dry-run '%s' (client, server, none)", optarg);
			break;
		case OPT_DIFF:
			opt.diff = 1;
			break;
		case OPT_CONCURRENCY:
			opt.concurrency = (unsigned)parse_count(optarg, "--concurrency", 1);
			break;
		case OPT_QPS:
			opt.qps = parse_rate(optarg, "--qps");
			break;
		case OPT_BURST:
			opt.burst = parse_rate(optarg, "--burst");
			break;
		case OPT_MAX_RETRIES:
			opt.max_retries = (unsigned)parse_count(optarg, "--max-retries", 0);
			break;
		case OPT_CRD_TIMEOUT:
			if ((opt.crd_timeout_ms = tool_parse_duration_ms(optarg)) < 0)
				die_usage("invalid --crd-timeout '%s'", optarg);
			break;
		default:
			tool_bad_option(argv, "f:n:" TOOL_COMMON_SHORT);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	if (opt.diff && opt.dry_run != DRY_NONE)
		die_usage("--diff and --dry-run do not go together");
	stream_mode = !nfiles;

	manifest_objs = jv_array();
	for (i = 0; i < nfiles; i++)
		if (kop_manifest_read(files[i], &manifest_objs, err) < 0)
			die(KOP_EXIT_PERM, "%s", err);
	manifest_len = jv_array_length(jv_copy(manifest_objs));
	if (nfiles && !manifest_len)
		die_no_objects(files, nfiles);

	curl_global_init(CURL_GLOBAL_DEFAULT);
	setup_client();
	kop_jsonl_init(&reader, 0);
	reader.want_inexact = 1;	/* what is applied must not be rounded */
	reader.fast = 1;		/* (one thread reads and writes) */
	reader.take = input_take;	/* (the lines of other stages pass as their text) */
	run();
	kop_jsonl_release(&reader);
	op_text_release();
	for (i = 0; i < (int)queue_len; i++)
		op_free(queue[i]);
	free(queue);
	jv_free(manifest_objs);
	if (server_down)
		kube_response_release(&down);
	if (client)
		kube_client_free(client);
	curl_global_cleanup();
	if (stream_mode)	/* a stream reports API errors in its result lines */
		worst = worst == KOP_EXIT_NO ? KOP_EXIT_NO : KOP_EXIT_OK;
	if (unfinished)
		worst = KOP_EXIT_TEMP;
	return tool_finish(worst);
}
