/*
 * iot-operator: the whole operator in one container, as its PID 1.
 *
 *   kwatch... ─▶ (merge) ─▶ ireconcile PROGRAM ─▶ kapply ─▶ kstatus ─┐
 *                               ▲ --feedback /dev/fd/3 ◀─────────────┘
 *
 * Runs the pipeline while it holds the leader Lease, restarts all of it when
 * any stage dies (the view is rebuilt from fresh lists), reaps every child,
 * drains on SIGTERM, and serves /metrics, /healthz and /readyz. kwatch's
 * lines reach ireconcile through here (merger.c, which can join several
 * kwatch streams): that is how the supervisor knows the initial lists are in
 * (the initial-events-end bookmark, passed on once after every kwatch sent
 * its own, so ireconcile never reconciles on a partial view).
 *
 * Stage metrics come in on a socket per stage (fd 4, KOP_STATS_FD; cmd/tool.h).
 * This file owns the options, the setup and the main loop; the stages and
 * their restarts are pipeline.c's, the rest is in the files beside it.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <curl/curl.h>
#include "iot-operator.h"
#include "banned.h"

const char *const stage_names[4] = { "kwatch", "ireconcile", "kapply", "kstatus" };

struct supervisor sup;

static const char usage[] =
	"usage: iot-operator [options]\n"
	"\n"
	"Runs kwatch | ireconcile PROGRAM | kapply | kstatus while this replica holds the\n"
	"leader Lease " LOCK_NAME " in the operator's namespace; restarts the pipeline\n"
	"when a stage dies; serves /metrics, /healthz and /readyz.\n"
	"\n"
	"environment:\n"
	"  OPERATOR_NAME              the operator's namespace (required)\n"
	"  POD_NAME                   leader identity (default: the host name); with --shards it must\n"
	"                             be unique among the replicas and a DNS-1123 label\n"
	"  WATCH_NAMESPACE            accepted for compatibility, ignored\n"
	"  KOP_STAGE_DIR              stages to run instead of the built-in ones (as --stage-dir)\n"
	"  KOP_WATCH_LIST             as --watch-list\n"
	"\n"
	"options:\n"
	"  --kubeconfig FILE          kubeconfig (else KUBECONFIG, in-cluster, ~/.kube/config)\n"
	"  --context NAME             kubeconfig context\n"
	"  --request-timeout D        per-request timeout of the stages\n"
	"  --metrics-addr ADDR        HTTP listen address, [HOST]:PORT (default :60000; 0 = off)\n"
	"  --max-parallel-updates N   instances rolling out at once (env MAX_PARALLEL_UPDATES)\n"
	"  --progress-deadline D      Processing longer than this is Failed (env PROGRESS_DEADLINE_SECONDS)\n"
	"  --leader-elect[=BOOL]      hold the Lease before running (default true)\n"
	"  --lease-duration D         (default 15s)\n"
	"  --renew-deadline D         (default 10s)\n"
	"  --retry-period D           (default 2s)\n"
	"  --shards R                 every replica active, each on its share of R ranges of the\n"
	"                             instances (1..64; Leases " SHARD_PREFIX "-shard-NN; default 0:\n"
	"                             leader election, one active replica; docs/sharding.md)\n"
	"  --program DIR              the program (default pipeline/iotservice)\n"
	"  --stage-dir DIR            run the kwatch, ireconcile, kapply, kstatus found here\n"
	"                             instead of the built-in ones\n"
	"  --drain-timeout D          SIGTERM: how long the writers may finish (default 10s)\n"
	"  --watch-list MODE          kwatch's streaming lists: auto (default: fall back to paged\n"
	"                             LIST + WATCH where they fail), always, never (env KOP_WATCH_LIST)\n"
	"  -v, --log-level L, --log-format F, -h\n"
	"\n"
	"signals: SIGTERM, SIGINT drain and stop; SIGHUP checks again a program that could not work\n"
	"(one that ireconcile refused: it is not restarted until then, and /readyz says why).\n"
	"\n"
	"exit codes: 0 drained and stopped; 100 bad usage or setup; 111 temporary setup failure,\n"
	"or stages had to be killed at the drain bound.\n";

enum {
	OPT_METRICS_ADDR = OPT_TOOL_LAST,
	OPT_MAX_PARALLEL,
	OPT_PROGRESS_DEADLINE,
	OPT_LEADER_ELECT,
	OPT_LEASE_DURATION,
	OPT_RENEW_DEADLINE,
	OPT_RETRY_PERIOD,
	OPT_PROGRAM,
	OPT_STAGE_DIR,
	OPT_DRAIN_TIMEOUT,
	OPT_WATCH_LIST,
	OPT_SHARDS
};

/*
 * --shards, the pipeline running: killed at once when it works for a range
 * this replica may no longer work for (not renewed within the renew
 * deadline, or dropped and its wind-down not over in that time); ranges
 * dropped leave it once what was written for them is done (pipeline_shrink),
 * ranges gained are added to it once they have settled (pipeline_grow), once
 * its kwatch no longer read them if they did (dropped a moment before), or
 * restart it when a kwatch could not be told to let them go (their objects
 * would come twice).
 */
static void shards_check(int64_t now)
{
	uint64_t usable, winding, gone, gained;
	char was[SHARDS_TEXT], is[SHARDS_TEXT];

	if (sup.lease_killed)
		return;
	if (sup.removing && sup.barrier_seen >= sup.barrier_sent) {
		tool_logj(LOG_INFO, JV_OBJECT(jv_string("ranges"), jv_string(shards_text(sup.removing, was))),
			  "ranges %s: what was written for them is done; handing them over", was);
		sup.shard_mask &= ~sup.removing;
		sup.removing = 0;
		shards_working(sup.shard_mask);
	}
	usable = shards_usable(now);
	winding = shards_winding(now);
	gone = sup.shard_mask & ~usable;
	gained = usable & ~sup.shard_mask;
	if (gone & ~winding) {
		sup.same_program = !sup.culprit_seen;
		tool_logj(LOG_WARN, JV_OBJECT(jv_string("ranges"), jv_string(shards_text(sup.shard_mask, was)),
					      jv_string("usable"), jv_string(shards_text(usable, is))),
			  "ranges %s no longer held: stopping the pipeline before their Leases can expire", was);
		sup.lease_killed = 1;
		teardown(TEARDOWN_KILL);
	} else if (sup.tearing_down || sup.removing) {
		return;
	} else if (gone) {
		pipeline_shrink(gone);
	} else if (gained && shards_settled(now)) {
		if (gained & sup.streamed & sup.narrowing) {
			return;	/* a kwatch has yet to say it let them go (merger.c): soon */
		} else if (gained & sup.streamed) {
			tool_logj(LOG_INFO, JV_OBJECT(jv_string("ranges"), jv_string(shards_text(sup.shard_mask, was)),
						      jv_string("usable"), jv_string(shards_text(usable, is))),
				  "ranges gained that the pipeline read before: restarting it for %s", is);
			sup.same_program = !sup.culprit_seen;
			teardown(TEARDOWN_DRAIN);
		} else {
			pipeline_grow(gained);
		}
	}
}

static void run(int sfd)
{
	struct pollfd *pfd = NULL;
	size_t cap = 0;

	for (;;) {
		int64_t now = kop_mono_ms(), wake;
		int lead = may_lead(now), timeout;
		size_t n = 0, i, k, kwatch_open = 0;

		pthread_mutex_lock(&sup.mu);
		sup.is_leader = lead;
		pthread_mutex_unlock(&sup.mu);

		/* Even during a drain: no write may happen once the lease could be another replica's. */
		if (sup.running && !lead && !sup.lease_killed) {
			log_error(sup.shards ? "no range held any more: stopping the pipeline before the Leases can expire"
					     : "not the leader any more: stopping the pipeline before the lease can expire");
			sup.same_program = sup.shards && !sup.culprit_seen;
			sup.lease_killed = 1;
			teardown(TEARDOWN_KILL);
		}
		if (sup.shards && sup.running)
			shards_check(now);
		if (sup.running && sup.suspect && !sup.culprit_seen && !sup.tearing_down && now >= sup.suspect_until)
			blame(sup.suspect - 1);
		if (sup.running && sup.tearing_down) {
			int alive = 0;

			for (i = 0; i < sup.nst; i++)
				alive |= sup.st[i].pid > 0;
			if (!alive) {
				pipeline_finish();
			} else if (now >= sup.kill_at_ms) {
				if (sup.draining)
					sup.killed_at_bound = 1;
				log_warn("stages still running at the bound: killing them");
				signal_stages(SIGKILL, 0);
				sup.kill_at_ms = now + 1000;
			}
		}
		if (sup.terminating && !sup.running)
			break;
		if (!sup.running && lead && !sup.terminating && !sup.program_broken && now >= sup.next_start_ms &&
		    (!sup.shards || shards_settled(now)))
			pipeline_start();

		/* During a drain, ireconcile's input ends once every kwatch is done and all is passed on. */
		if (sup.running) {
			for (i = 0; i < sup.nst; i++)
				kwatch_open += sup.st[i].out_fd >= 0;
			if (sup.draining && !kwatch_open && sup.merged_off >= sup.merged.len)
				close_fd(&sup.merged_fd);
		}

		if (cap < sup.nst * 2 + 4) {
			cap = sup.nst * 2 + 4;
			pfd = kop_realloc(pfd, cap * sizeof(*pfd));
		}
		pfd[n++] = (struct pollfd){ sfd, POLLIN, 0 };
		pfd[n++] = (struct pollfd){ le.efd, POLLIN, 0 };
		pfd[n++] = (struct pollfd){ sup.merged.len > sup.merged_off ? sup.merged_fd : -1, POLLOUT, 0 };
		for (i = 0; i < sup.nst; i++) {
			int room = sup.merged.len - sup.merged_off < MERGE_HIGH;

			pfd[n++] = (struct pollfd){ room ? sup.st[i].out_fd : -1, POLLIN, 0 };
			pfd[n++] = (struct pollfd){ sup.st[i].stats_fd, POLLIN, 0 };
		}
		wake = now + 250;	/* the renew deadline is checked at least this often */
		if (sup.tearing_down && sup.kill_at_ms < wake)
			wake = sup.kill_at_ms;
		if (sup.suspect && !sup.culprit_seen && sup.suspect_until < wake)
			wake = sup.suspect_until;
		if (!sup.running && lead && !sup.program_broken && sup.next_start_ms < wake)
			wake = sup.next_start_ms;
		timeout = wake > now ? (int)(wake - now) : 0;
		if (poll(pfd, n, timeout) < 0 && errno != EINTR) {
			log_error("poll: %s", strerror(errno));
			sleep(1);
			continue;
		}
		if (pfd[1].revents) {
			uint64_t v;

			(void)!read(le.efd, &v, sizeof(v));
		}
		/* Data before deaths: a stage's last lines are passed on before its end is noticed. */
		for (i = 0, k = 3; i < sup.nst; i++, k += 2) {
			if (pfd[k].fd >= 0 && pfd[k].revents)
				kwatch_read(&sup.st[i]);
			if (pfd[k + 1].fd >= 0 && pfd[k + 1].revents)
				stage_read_stats(i);
		}
		if (sup.merged.len > sup.merged_off)
			merged_write();
		if (pfd[0].revents)
			on_signal(sfd);
	}
	free(pfd);
}

static char *make_identity(void)
{
	const char *pod = getenv("POD_NAME");
	char host[256] = "", id[64];
	unsigned char r[16];
	struct kop_buf b = KOP_BUF_INIT;
	FILE *f = fopen("/dev/urandom", "r");
	size_t i;

	if (!f || fread(r, 1, sizeof(r), f) != sizeof(r)) {
		for (i = 0; i < sizeof(r); i++)
			r[i] = (unsigned char)random();
	}
	if (f)
		fclose(f);
	r[6] = (unsigned char)((r[6] & 0x0f) | 0x40);
	r[8] = (unsigned char)((r[8] & 0x3f) | 0x80);
	snprintf(id, sizeof(id), "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", r[0], r[1],
		 r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15]);
	if (!pod || !*pod) {
		gethostname(host, sizeof(host) - 1);
		pod = host;
	}
	kop_buf_addf(&b, "%s_%s", pod, id);
	return kop_buf_detach(&b, NULL);
}

static long duration_opt(const char *arg, const char *opt)
{
	long ms = tool_parse_duration_ms(arg);

	if (ms < 0)
		die_usage("invalid %s '%s'", opt, arg);
	return ms;
}

/*
 * Debian's libcurl links GnuTLS (through librtmp and libldap) beside OpenSSL,
 * and GnuTLS initialises itself as it is loaded, 0.4 MB that the stages share
 * with us (spawner.c) spent on a library nothing here uses: TLS is OpenSSL's,
 * the protocols http and https alone. GnuTLS's own switch,
 * GNUTLS_NO_IMPLICIT_INIT, must be set before it is loaded: we set it and run
 * ourselves again, once, first thing (the user's setting wins; if the exec
 * fails we go on as we are). Marked ours, so that an exec credential plugin
 * is run without it (kubeconfig_exec.c): it may use GnuTLS.
 */
static void gnutls_left_alone(char **argv)
{
	const char *preload = getenv("LD_PRELOAD");
	char *exe;

	if (getenv("GNUTLS_NO_IMPLICIT_INIT"))
		return;
	if (setenv("GNUTLS_NO_IMPLICIT_INIT", "1", 1) || setenv(KOP_GNUTLS_OURS, "1", 1))
		return;	/* (set or not, we go on: never an exec without it) */
	/*
	 * Not when the dynamic linker was run by hand (ld.so iot-operator ...:
	 * /proc/self/exe is ld.so, AT_BASE 0), nor under valgrind, which would
	 * let the new process run without it.
	 */
	if (!getauxval(AT_BASE) || (preload && strstr(preload, "vgpreload")))
		return;
	/* (by its path, not /proc/self/exe: the name the process goes by is the last part of it) */
	if ((exe = tool_exe_path())) {
		execv(exe, argv);
		free(exe);
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		TOOL_COMMON_OPTIONS,
		TOOL_KUBE_OPTIONS,
		{ "metrics-addr", required_argument, NULL, OPT_METRICS_ADDR },
		{ "max-parallel-updates", required_argument, NULL, OPT_MAX_PARALLEL },
		{ "progress-deadline", required_argument, NULL, OPT_PROGRESS_DEADLINE },
		{ "leader-elect", optional_argument, NULL, OPT_LEADER_ELECT },
		{ "lease-duration", required_argument, NULL, OPT_LEASE_DURATION },
		{ "renew-deadline", required_argument, NULL, OPT_RENEW_DEADLINE },
		{ "retry-period", required_argument, NULL, OPT_RETRY_PERIOD },
		{ "program", required_argument, NULL, OPT_PROGRAM },
		{ "stage-dir", required_argument, NULL, OPT_STAGE_DIR },
		{ "drain-timeout", required_argument, NULL, OPT_DRAIN_TIMEOUT },
		{ "watch-list", required_argument, NULL, OPT_WATCH_LIST },
		{ "shards", required_argument, NULL, OPT_SHARDS },
		{ NULL, 0, NULL, 0 }
	};
	struct MHD_Daemon *httpd;
	const char *env;
	char buf[32];
	int c, sfd, hfd, code = KOP_EXIT_OK;

	gnutls_left_alone(argv);
	tool_init("iot-operator", argc, argv, 1);
	sup.metrics_addr = ":60000";
	sup.program = "pipeline/iotservice";
	sup.leader_elect = 1;
	sup.lease_ms = 15000;
	sup.renew_ms = 10000;
	sup.retry_ms = 2000;
	sup.drain_ms = 10000;
	sup.merged_fd = -1;
	if ((env = getenv("KOP_STAGE_DIR")) && *env)
		sup.stage_dir = env;
	while ((c = getopt_long(argc, argv, TOOL_COMMON_SHORT, opts, NULL)) != -1) {
		long n;
		char *end;

		if (c == OPT_LOG_FORMAT)
			setenv("KOP_LOG_FORMAT", optarg, 1);
		if (tool_common_option(c, optarg, usage))
			continue;
		switch (c) {
		case OPT_METRICS_ADDR:
			sup.metrics_addr = optarg;
			break;
		case OPT_MAX_PARALLEL:
			n = strtol(optarg, &end, 10);
			if (*end || end == optarg || n < 1)
				die_usage("invalid --max-parallel-updates '%s' (a positive integer)", optarg);
			snprintf(buf, sizeof(buf), "%ld", n);
			setenv("MAX_PARALLEL_UPDATES", buf, 1);
			break;
		case OPT_PROGRESS_DEADLINE:
			n = duration_opt(optarg, "--progress-deadline");
			snprintf(buf, sizeof(buf), "%ld", (n + 999) / 1000);
			setenv("PROGRESS_DEADLINE_SECONDS", buf, 1);
			break;
		case OPT_LEADER_ELECT:
			if (!optarg || !strcmp(optarg, "true") || !strcmp(optarg, "1"))
				sup.leader_elect = 1;
			else if (!strcmp(optarg, "false") || !strcmp(optarg, "0"))
				sup.leader_elect = 0;
			else
				die_usage("invalid --leader-elect '%s' (true or false)", optarg);
			break;
		case OPT_LEASE_DURATION:
			sup.lease_ms = duration_opt(optarg, "--lease-duration");
			break;
		case OPT_RENEW_DEADLINE:
			sup.renew_ms = duration_opt(optarg, "--renew-deadline");
			break;
		case OPT_RETRY_PERIOD:
			sup.retry_ms = duration_opt(optarg, "--retry-period");
			break;
		case OPT_PROGRAM:
			sup.program = optarg;
			break;
		case OPT_STAGE_DIR:
			sup.stage_dir = optarg;
			break;
		case OPT_DRAIN_TIMEOUT:
			sup.drain_ms = duration_opt(optarg, "--drain-timeout");
			break;
		case OPT_WATCH_LIST:
			/* kwatch reads it (its --watch-list): every kwatch stage the same */
			if (strcmp(optarg, "auto") && strcmp(optarg, "always") && strcmp(optarg, "never"))
				die_usage("invalid --watch-list '%s' (auto, always or never)", optarg);
			setenv("KOP_WATCH_LIST", optarg, 1);
			break;
		case OPT_SHARDS:
			n = strtol(optarg, &end, 10);
			if (*end || end == optarg || n < 0 || n > 64)
				die_usage("invalid --shards '%s' (ranges: 1 to 64, or 0 for leader election)", optarg);
			sup.shards = (unsigned)n;
			break;
		default:
			tool_bad_option(argv, TOOL_COMMON_SHORT);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	if ((env = getenv("KOP_WATCH_LIST")) && *env && strcmp(env, "auto") && strcmp(env, "always") &&
	    strcmp(env, "never"))
		die_usage("invalid KOP_WATCH_LIST '%s' (auto, always or never)", env);
	if (sup.shards)
		sup.leader_elect = 1;	/* (every range is elected: a replica without one waits as a standby) */
	if (!(sup.operator_name = getenv("OPERATOR_NAME")) || !*sup.operator_name)
		die_usage("OPERATOR_NAME must be set to the operator's namespace");
	/* client-go's checks: LeaseDuration > RenewDeadline > JitterFactor (1.2) * RetryPeriod, all positive. */
	if (sup.retry_ms <= 0 || sup.renew_ms <= (long)(1.2 * sup.retry_ms) || sup.lease_ms <= sup.renew_ms)
		die_usage("want --lease-duration > --renew-deadline > 1.2 * --retry-period > 0");
	if ((env = getenv("WATCH_NAMESPACE")) && *env)
		log_info("WATCH_NAMESPACE='%s' is ignored: IoTServices are watched in '%s'", env,
			 sup.operator_name);
	/* The children log as we do. */
	{
		static const char *const lv[] = { "error", "warn", "info", "debug", "trace" };

		setenv("KOP_LOG_LEVEL", lv[log_level], 1);
		/* (as tool_init chose ours: a stage whose stderr we read, the check's, would not see our terminal) */
		if (!(env = getenv("KOP_LOG_FORMAT")) || !*env)
			setenv("KOP_LOG_FORMAT", isatty(2) ? "text" : "json", 1);
	}
	snprintf(buf, sizeof(buf), "%d", STATS_FD);
	setenv("KOP_STATS_FD", buf, 1);

	/* The listening socket before anything else: a bad or busy address ends it here. */
	hfd = http_bind(sup.metrics_addr);
	sup.exe_dir = tool_exe_dir();
	if (!(sup.program_dir = tool_find_program(sup.program)))
		die(KOP_EXIT_PERM, "unable to find the program '%s' (as given, beside iot-operator, in pipeline/)",
		    sup.program);
	sup.identity = make_identity();
	sup.base = jv_object();
	sup.checked = jv_invalid();
	sup.started = jv_invalid();
	sup.live = jv_object();
	sup.notes = jv_object();
	sup.restarts = jv_object();
	sup.start_wall_ms = kop_wall_ms();
	pthread_mutex_init(&sup.mu, NULL);
	kop_backoff_init(&sup.backoff, 1000, 30000, 0.2);

	/* As PID 1 we are every orphan's parent anyway; elsewhere, become it for our stages' orphans. */
	if (getpid() != 1)
		(void)prctl(PR_SET_CHILD_SUBREAPER, 1);
	sfd = setup_signals();
	curl_global_init(CURL_GLOBAL_DEFAULT);
	/* Before any thread: the process that starts the built-in stages (spawner.c), unless --stage-dir has them all. */
	if (!stage_dir_has_all() && spawner_start(argc, argv) < 0)
		log_warn("unable to start the spawner (%s): stages are started from their executables",
			 strerror(errno));
	tool_logj(LOG_INFO, JV_OBJECT(jv_string("operatorNamespace"), jv_string(sup.operator_name),
				      jv_string("program"), jv_string(sup.program_dir),
				      jv_string("leaderElection"), jv_bool(sup.leader_elect && !sup.shards),
				      jv_string("shards"), jv_number(sup.shards)),
		  "starting");
	/* (a kubeconfig that cannot be loaded ends it here, before anything is served) */
	if (sup.shards)
		shards_setup();
	else if (sup.leader_elect)
		lease_setup();
	httpd = http_start(hfd, sup.metrics_addr);
	/* Every replica checks the program once, the standbys too (the leader again at each start). */
	program_check();

	run(sfd);

	/* The pipeline is down: now the lease may go. */
	lease_stop();
	if (httpd)
		MHD_stop_daemon(httpd);
	if (sup.killed_at_bound || le.release_failed)
		code = KOP_EXIT_TEMP;
	log_info("stopped");
	close(sfd);
	jv_free(sup.base);
	jv_free(sup.checked);
	jv_free(sup.started);
	jv_free(sup.live);
	jv_free(sup.notes);
	jv_free(sup.restarts);
	free(sup.identity);
	free(sup.exe_dir);
	free(sup.program_dir);
	curl_global_cleanup();
	return tool_finish(code);
}
