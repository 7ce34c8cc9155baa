/*
 * ireconcile: the generic reconcile engine. Watch events in, a view of the
 * cluster kept, a program's jq run per primary, the operations of the stage
 * protocol out (docs/ireconcile.md and docs/writing-programs.md).
 * This file owns the options, the stats line and the main loop (poll on
 * stdin, the feedback and stdout); the rest is in the files beside it.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "ireconcile.h"
#include "banned.h"

static const char usage[] =
	"usage: ireconcile [options] PROGRAM\n"
	"       ireconcile --print-watches PROGRAM\n"
	"\n"
	"Reads watch events on stdin, keeps a view of the cluster, runs PROGRAM (a directory\n"
	"with a program.yml, or a name under pipeline/ such as iotservice) for each primary\n"
	"and writes apply, delete, patch, status and event lines on stdout (README, \"The stage protocol\").\n"
	"\n"
	"  --feedback FILE        result lines (a FIFO): failed writes reach the program as .errors\n"
	"  --print-watches        check the program as the engine would (100 if it cannot work), print\n"
	"                         the watches it needs, one JSON line each, and exit\n"
	"  --shard SEL            keep only the primaries whose shard key (primary.shardKey) SEL\n"
	"                         selects, and their children and observed objects: SEL is a\n"
	"                         shard selector, shardRange(object.metadata.namespace, '0x...',\n"
	"                         '0x...') || ...; other events are dropped where they enter;\n"
	"                         a line {\"type\":\"SHARDS\",\"add\":SEL} adds SEL's ranges, their\n"
	"                         primaries reconciled after the next initial-events-end bookmark\n"
	"  --no-render-worker     render every answer in this process: by default a second process\n"
	"                         renders ahead of the first pass while the initial lists come in,\n"
	"                         and ends with it (a program with a render program only)\n"
	"  --now TIME             the RFC 3339 time the program sees as .now (default: the clock)\n"
	"  --once                 exit after the first full reconcile\n"
	"  --backoff-base D       first delay after a program error or a failed write (default 1s)\n"
	"  --backoff-cap D        longest such delay (default 5m)\n"
	"  --stats-interval D     log a \"stats\" line (reconciles, errors, queue, objects) every D\n"
	"  --watchdog D           say when one reconcile runs longer than D, then 2D, 4D... (default 10s)\n"
	"  --settle D             changes of observed objects reconcile once, D after the last of\n"
	"                         a burst (5 D after its first at the latest; default 200ms;\n"
	"                         0: at once; --once: at once)\n"
	"  --status-interval D    a status that changes no phase, reason or condition (a message,\n"
	"                         a list) is written at most once in D per primary, the latest\n"
	"                         then (default 5s; 0: at once; --once: at once)\n"
	"  -v, --verbose          log each reconcile (key, duration, counts); twice for more\n"
	"  --log-level LEVEL      error, warn, info, debug, trace\n"
	"  --log-format FORMAT    json or text\n"
	"  -h, --help             this help\n"
	"\n"
	"Settings come from the environment (see the program's settings, e.g. OPERATOR_NAME).\n"
	"Exit codes: 0 end of input, 100 bad usage or program, 111 local I/O error.\n";

enum {
	OPT_FEEDBACK = OPT_TOOL_LAST,
	OPT_PRINT_WATCHES,
	OPT_NOW,
	OPT_ONCE,
	OPT_BACKOFF_BASE,
	OPT_BACKOFF_CAP,
	OPT_STATS_INTERVAL,
	OPT_WATCHDOG,
	OPT_SETTLE,
	OPT_STATUS_INTERVAL,
	OPT_SHARD,
	OPT_NO_RENDER_WORKER
};

/* The engine: its one instance, shared by every file of ireconcile. */
struct engine E;

/* One log line of counters (--stats-interval), for the supervisor's metrics. */
static void log_stats(int level)
{
	jv f = jv_object();

	f = jv_object_set(f, kop_json_key("reconciles"), jv_number((double)E.reconciles));
	f = jv_object_set(f, kop_json_key("programErrors"), jv_number((double)E.errors));
	f = jv_object_set(f, kop_json_key("queue"), jv_number((double)E.qlen));
	f = jv_object_set(f, kop_json_key("primaries"), jv_number((double)E.prims.len));
	f = jv_object_set(f, kop_json_key("objects"), jv_number((double)E.objs.len));
	f = jv_object_set(f, kop_json_key("inFlight"), jv_number((double)E.flights.len));
	f = jv_object_set(f, kop_json_key("synced"), jv_bool(E.synced));
	if (E.prog.render)
		f = jv_object_set(f, kop_json_key("workerRenders"), jv_number((double)worker_renders()));
	if (E.shard)
		f = jv_object_set(f, kop_json_key("shardDropped"), jv_number((double)E.shard_dropped));
	tool_logj(level, f, "stats");
}

static int open_feedback(const char *path, int *keep)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		die(KOP_EXIT_TEMP, "unable to open '%s': %s", path, strerror(errno));
	if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
		/* Our own writer keeps the FIFO from reporting EOF when a stage restarts. */
		*keep = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	}
	return fd;
}

static void run(const char *feedback, int once)
{
	struct reader in, fb;
	int fbfd = -1, keep = -1;
	struct stat st;

	if (fstat(1, &st) == 0 && !S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode))
		out_chunk = (size_t)-1;	/* a file or a terminal: writes do not block for long */
	reader_init(&in, "", 0);
	in.read = event_read;
	if (feedback) {
		E.feedback = 1;
		fbfd = open_feedback(feedback, &keep);
		reader_init(&fb, "feedback ", fbfd);
	}
	for (;;) {
		struct pollfd pfd[5];
		int nfd = 0, timeout, r, ifd = -1, ffd = -1, ofd = -1, wfd = -1, rfd = -1, ahead;
		/* The end of the input (or --once after the first pass): what is queued, then exit. */
		int ending = in.eof || (once && E.synced);
		int64_t now = kop_mono_ms();

		if (!ending) {
			fire_timers(now);
		} else if (in.eof && !E.input_ended) {
			input_end();
		}
		if (in.eof && (!E.synced || E.shard_wait)) {
			/* a recorded file: its end ends the initial state (and the lists of ranges added) */
			int first = !E.synced;

			E.synced = 1;
			ahead_drop();
			if (first)
				first_pass_enqueue();
			shard_synced(in.lineno);
		}
		if (E.synced)
			drain_queue();
		ending = in.eof || (once && E.synced);
		if (ending && !E.qhead && !out_pending())
			break;

		now = kop_mono_ms();
		if (E.synced && E.qhead && out_pending() <= OUT_HIGH)
			timeout = 0;	/* (before the first pass, what is queued waits for it) */
		else if (ending)
			timeout = -1;	/* only the output is left to write */
		else
			timeout = E.synced ? next_timeout(now) : -1;
		/* Before the first pass, render answers made while no input waits. */
		ahead = !ending && !E.synced && E.nahead;
		if (ahead)
			timeout = 0;
		if (E.stats_ms && !ending) {
			if (now >= E.stats_at) {
				log_stats(LOG_INFO);
				E.stats_at = now + E.stats_ms;
			}
			timeout = (int)tool_sooner(timeout, E.stats_at - now);
		}
		/* (read while output waits too: the view stays current, and what is reconciled once
		 * it is written sees every change that came meanwhile) */
		if (!ending) {
			pfd[nfd].fd = 0;
			pfd[nfd].events = POLLIN;
			ifd = nfd++;
		}
		if (fbfd >= 0 && !fb.eof) {
			pfd[nfd].fd = fbfd;
			pfd[nfd].events = POLLIN;
			ffd = nfd++;
		}
		if (out_pending()) {
			pfd[nfd].fd = 1;
			pfd[nfd].events = POLLOUT;
			ofd = nfd++;
		}
		if (worker_fd() >= 0) {
			pfd[nfd].fd = worker_fd();
			pfd[nfd].events = POLLIN;
			wfd = nfd++;
		}
		if (worker_req_fd() >= 0) {
			pfd[nfd].fd = worker_req_fd();
			pfd[nfd].events = POLLOUT;
			rfd = nfd++;
		}
		if (timeout != 0) {
			/* about to wait: nothing held back, and what a burst grew given back */
			timeout = (int)out_idle(kop_mono_ms(), timeout);
			timeout = (int)tool_idle(timeout);
		}
		r = poll(pfd, (nfds_t)nfd, timeout);
		if (r < 0) {
			if (errno != EINTR)
				log_error("unable to poll: %s", strerror(errno));
			continue;
		}
		if (ahead && r == 0)
			prerender();
		if ((wfd >= 0 && pfd[wfd].revents) || (rfd >= 0 && pfd[rfd].revents))
			worker_tend();
		if (ofd >= 0 && pfd[ofd].revents)
			flush_out(0);
		if (ifd >= 0 && pfd[ifd].revents) {
			struct pollfd one = { 0, POLLIN, 0 };
			int rounds = 0;

			/* Whatever has arrived together is read before reconciling: one reconcile per primary. */
			do {
				if (reader_fill(&in) < 0)
					break;
				reader_drain(&in, handle_event);
				worker_tend();
			} while (!in.eof && ++rounds < 256 && poll(&one, 1, 0) > 0 && one.revents);
		}
		if (ffd >= 0 && pfd[ffd].revents) {
			/* Read even when ending, so that a writer is never stuck; results then change nothing. */
			while (reader_fill(&fb) > 0)
				reader_drain(&fb, ending ? drop_result : handle_result);
			reader_drain(&fb, ending ? drop_result : handle_result);
		}
	}
	worker_stop();
	flush_out(1);
	kop_buf_release(&outq);
	reader_release(&in);
	if (fbfd >= 0) {
		reader_release(&fb);
		close(fbfd);
	}
	if (keep >= 0)
		close(keep);
}

static void print_watches(void)
{
	jv w = kop_program_watches(&E.prog);

	jv_array_foreach(w, i, x) emit(x);
	jv_free(w);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "feedback", required_argument, NULL, OPT_FEEDBACK },
		{ "print-watches", no_argument, NULL, OPT_PRINT_WATCHES },
		{ "now", required_argument, NULL, OPT_NOW },
		{ "once", no_argument, NULL, OPT_ONCE },
		{ "backoff-base", required_argument, NULL, OPT_BACKOFF_BASE },
		{ "backoff-cap", required_argument, NULL, OPT_BACKOFF_CAP },
		{ "stats-interval", required_argument, NULL, OPT_STATS_INTERVAL },
		{ "watchdog", required_argument, NULL, OPT_WATCHDOG },
		{ "settle", required_argument, NULL, OPT_SETTLE },
		{ "status-interval", required_argument, NULL, OPT_STATUS_INTERVAL },
		{ "shard", required_argument, NULL, OPT_SHARD },
		{ "no-render-worker", no_argument, NULL, OPT_NO_RENDER_WORKER },
		TOOL_COMMON_OPTIONS,
		{ NULL, 0, NULL, 0 }
	};
	const char *feedback = NULL;
	int c, watches = 0, once = 0, worker = 1;
	long ms;
	char err[KOP_ERRLEN], *program_dir;
	size_t i;

	tool_init("ireconcile", argc, argv, 1);
	E.backoff_base = 1000;
	E.backoff_cap = 300000;
	E.settle_ms = 200;
	E.status_interval_ms = 5000;
	while ((c = getopt_long(argc, argv, TOOL_COMMON_SHORT, opts, NULL)) != -1) {
		switch (c) {
		case OPT_FEEDBACK:
			feedback = optarg;
			break;
		case OPT_PRINT_WATCHES:
			watches = 1;
			break;
		case OPT_NOW: {
			time_t t;

			if (kop_time_parse(optarg, &t) < 0)
				die_usage("invalid --now '%s' (RFC 3339, e.g. 2026-11-22T10:00:00Z)", optarg);
			E.now = optarg;
			break;
		}
		case OPT_ONCE:
			once = 1;
			break;
		case OPT_BACKOFF_BASE:
		case OPT_BACKOFF_CAP:
			if ((ms = tool_parse_duration_ms(optarg)) <= 0 || ms > 86400000)
				die_usage("invalid --%s '%s'", c == OPT_BACKOFF_BASE ? "backoff-base" : "backoff-cap",
					  optarg);
			if (c == OPT_BACKOFF_BASE)
				E.backoff_base = (unsigned)ms;
			else
				E.backoff_cap = (unsigned)ms;
			break;
		case OPT_STATS_INTERVAL:
			if ((E.stats_ms = tool_parse_duration_ms(optarg)) <= 0 || E.stats_ms > 86400000)
				die_usage("invalid --stats-interval '%s'", optarg);
			break;
		case OPT_SETTLE:
			if ((ms = tool_parse_duration_ms(optarg)) < 0 || ms > 60000 || (ms == 0 && strcmp(optarg, "0")))
				die_usage("invalid --settle '%s' (0 to 1m)", optarg);
			E.settle_ms = ms;
			break;
		case OPT_STATUS_INTERVAL:
			if ((ms = tool_parse_duration_ms(optarg)) < 0 || ms > 3600000 || (ms == 0 && strcmp(optarg, "0")))
				die_usage("invalid --status-interval '%s' (0 to 1h)", optarg);
			E.status_interval_ms = ms;
			break;
		case OPT_SHARD:
			if (!E.shard)
				E.shard = kop_calloc(1, sizeof(*E.shard));
			kop_shard_free(E.shard);
			if (kop_shard_parse(optarg, E.shard, err) < 0)
				die_usage("invalid --shard '%s': %s", optarg, err);
			if (E.shard->key != KOP_SHARD_NAMESPACE)
				die_usage("invalid --shard '%s': a primary's shard key is a namespace's name "
					  "(shardRange(object.metadata.namespace, ...))", optarg);
			break;
		case OPT_NO_RENDER_WORKER:
			worker = 0;
			break;
		case OPT_WATCHDOG:
			if ((W.first_ms = tool_parse_duration_ms(optarg)) < 100 || W.first_ms > 86400000)
				die_usage("invalid --watchdog '%s' (100ms to 24h)", optarg);
			break;
		default:
			if (!tool_common_option(c, optarg, usage))
				tool_bad_option(argv, TOOL_COMMON_SHORT);
		}
	}
	if (optind != argc - 1)
		die_usage("want one PROGRAM");
	if (once) {
		E.settle_ms = 0;	/* a replay reconciles at the end of its input */
		E.status_interval_ms = 0;
	}
	if (E.backoff_base > E.backoff_cap)
		die_usage("--backoff-base (%u ms) is above --backoff-cap (%u ms)", E.backoff_base, E.backoff_cap);
	program_dir = tool_find_program(argv[optind]);	/* a bare name as iot-operator finds it */
	if (kop_program_load(&E.prog, program_dir ? program_dir : argv[optind], 1, err) < 0) {
		kop_program_release(&E.prog);
		die(KOP_EXIT_PERM, "%s", err);
	}
	free(program_dir);
	if (E.shard && !E.prog.shard_key) {
		snprintf(err, sizeof(err), "%s", E.prog.name);
		kop_program_release(&E.prog);
		kop_shard_free(E.shard);
		free(E.shard);
		die_usage("--shard: program '%s' declares no shard key (primary.shardKey)", err);
	}
	if (watches) {
		print_watches();
		kop_program_release(&E.prog);
		return tool_finish(KOP_EXIT_OK);
	}
	/* (from the start: a replica whose shard holds none says 0) */
	tool_metric_set("ireconcile_primaries", NULL, 0);
	if (E.shard)
		tool_metric_add("ireconcile_shard_dropped_events_total", NULL, 0);
	kop_hmap_init(&E.objs);
	kop_hmap_init(&E.prims);
	kop_hmap_init(&E.related);
	/* (an object is keyed by its own key, and freed only once out of both) */
	kop_hmap_borrow_keys(&E.objs);
	kop_hmap_borrow_keys(&E.related);
	kop_hmap_init(&E.flights);
	E.related_cache = jv_invalid();
	E.aggs_cache = jv_invalid();
	E.dicts = kop_calloc(1 + E.prog.nkinds, sizeof(*E.dicts));
	E.vdicts = kop_calloc(1 + E.prog.nkinds, sizeof(*E.vdicts));
	E.children_empty = jv_object();
	for (i = 0; i < E.prog.nkinds; i++)
		if (E.prog.kinds[i].role != KOP_ROLE_RELATED)
			E.children_empty = jv_object_set(E.children_empty, kop_json_key(E.prog.kinds[i].key), jv_object());

	if (worker)
		worker_start();	/* (before the watchdog's thread, and what run opens) */
	{
		pthread_t t;

		if (pthread_create(&t, NULL, watchdog, NULL) == 0)
			pthread_detach(t);
		else
			log_warn("unable to start the watchdog thread; a program that never ends would go unsaid");
	}
	run(feedback, once);

	log_stats(LOG_DEBUG);
	kop_hmap_release(&E.related, NULL);
	kop_hmap_release(&E.objs, obj_free);
	kop_hmap_release(&E.prims, prim_free);
	kop_hmap_release(&E.flights, flight_free);
	jv_free(E.related_cache);
	jv_free(E.aggs_cache);
	jv_free(E.children_empty);
	for (i = 0; i <= E.prog.nkinds; i++) {
		int g;

		for (g = 0; g < KDICT_GENS; g++) {
			free(E.dicts[i].gen[g].buf);
			free(E.vdicts[i].gen[g].buf);
		}
	}
	free(E.dicts);
	free(E.vdicts);
	free(E.render_dict.buf);
	free(E.rview_dict.buf);
	kop_program_release(&E.prog);
	if (E.shard) {
		kop_shard_free(E.shard);
		free(E.shard);
	}
	shard_release();
	return tool_finish(E.read_failed ? KOP_EXIT_TEMP : KOP_EXIT_OK);
}
