/*
 * iot-operator: the whole operator in one container, as its PID 1.
 *
 *   kwatch... ─▶ (merge) ─▶ ireconcile PROGRAM ─▶ kapply ─▶ kstatus ─┐
 *                               ▲ --feedback /dev/fd/3 ◀─────────────┘
 *
 * Runs the pipeline while it holds the leader Lease, restarts all of it when
 * any stage dies (the view is rebuilt from fresh lists), reaps every child,
 * drains on SIGTERM, and serves /metrics, /healthz and /readyz. kwatch's
 * lines reach ireconcile through here (the merger below, which can join
 * several kwatch streams): that is how the supervisor knows the initial
 * lists are in (the initial-events-end bookmark, passed on once after every
 * kwatch sent its own, so ireconcile never reconciles on a partial view).
 *
 * Stage metrics come in on a socket per stage (fd 4, KOP_STATS_FD; cmd/tool.h).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tool.h"
#include "kube.h"
#include "lease.h"
#include "banned.h"

extern char **environ;

#define FEEDBACK_FD 3
#define STATS_FD 4
#define MERGE_HIGH (1024 * 1024)	/* stop reading kwatch while this much waits for ireconcile */
#define LOCK_NAME "iot-operator-lock"

static const char usage[] =
	"usage: iot-operator [options]\n"
	"\n"
	"Runs kwatch | ireconcile PROGRAM | kapply | kstatus while this replica holds the\n"
	"leader Lease " LOCK_NAME " in the operator's namespace; restarts the pipeline\n"
	"when a stage dies; serves /metrics, /healthz and /readyz.\n"
	"\n"
	"environment:\n"
	"  OPERATOR_NAME              the operator's namespace (required)\n"
	"  POD_NAME                   leader identity (default: the host name)\n"
	"  WATCH_NAMESPACE            accepted for compatibility, ignored\n"
	"  KOP_STAGE_DIR              where to look for the stages first (as --stage-dir)\n"
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
	"  --program DIR              the program (default pipeline/iotservice)\n"
	"  --stage-dir DIR            look for kwatch, ireconcile, kapply, kstatus here first\n"
	"  --drain-timeout D          SIGTERM: how long the writers may finish (default 10s)\n"
	"  --watch-list MODE          kwatch's streaming lists: auto (default: fall back to paged\n"
	"                             LIST + WATCH where they fail), always, never (env KOP_WATCH_LIST)\n"
	"  -v, --log-level L, --log-format F, -h\n"
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
	OPT_WATCH_LIST
};

static const char *const stage_names[] = { "kwatch", "ireconcile", "kapply", "kstatus" };

struct stage {
	const char *name;	/* one of stage_names */
	pid_t pid;		/* 0 once reaped (or never started) */
	int status;		/* its wait status once reaped */
	int stats_fd;		/* our end of its stats socket; -1 closed */
	struct kop_buf stats;	/* a partial stats line */
	int out_fd;		/* kwatch: its stdout; -1 closed */
	struct kop_buf out;	/* kwatch: a partial line */
	int bookmark;		/* kwatch: its initial-events-end seen */
};

static struct {
	/* settings */
	const char *operator_name, *program, *stage_dir, *metrics_addr;
	char *identity, *exe_dir, *program_dir;
	int leader_elect;
	long lease_ms, renew_ms, retry_ms, drain_ms;

	/* the pipeline of the current generation */
	struct stage *st;
	size_t nst;
	int merged_fd;		/* ireconcile's stdin; -1 closed */
	struct kop_buf merged;	/* lines waiting for it */
	size_t merged_off;
	int running, tearing_down, draining, culprit_seen, lease_killed;
	int64_t started_ms, next_start_ms, kill_at_ms;
	size_t suspect;		/* a stage that ended cleanly, unasked: its index + 1 (0: none) */
	int64_t suspect_until;	/* blamed then, unless another dies meanwhile */
	struct kop_backoff backoff;
	int killed_at_bound;

	/* shutdown */
	int terminating;

	/* what the HTTP thread reads: under mu */
	pthread_mutex_t mu;
	jv base;		/* series key -> series: counters of stages gone, the supervisor's own */
	jv live;		/* "slot" -> jv object of series, the running stages' last values */
	jv notes;		/* "slot" -> a running stage's note ("stage: why it cannot work"), if any */
	char last_note[KOP_ERRLEN + 32];	/* the last note of a stage gone, until the initial lists are in */
	char why[2 * KOP_ERRLEN + 128];		/* ready_locked's answer when it is built */
	jv restarts;		/* stage name -> count */
	int initial_sent, pipeline_up, is_leader;
	pid_t pids[64];		/* running stages, for their RSS; 0-terminated */
	const char *pid_names[64];
	int64_t start_wall_ms;
} sup;

/* The leader-election thread and what it shares with the main loop (under mu). */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th;
	int started, stop, leader;
	int64_t renewed_ms;	/* monotonic start of the last successful round */
	int64_t answered_ms;	/* ... of the last round the API server answered (0: none yet) */
	char fail[KOP_ERRLEN];	/* why the last round failed ("" if it did not) */
	int efd;		/* eventfd: wakes the main loop on a change */
	struct kube_client *kc;
	struct lease l;
	int release_failed;
} le = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .efd = -1 };

/* ---- small helpers ---------------------------------------------------------- */

/* Moves fd to 10 or above, close-on-exec, so that the dup2s of a spawn never collide with it. */
static int fd_high(int fd)
{
	int n;

	if (fd < 0)
		return -1;
	n = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	close(fd);
	return n;
}

static int pipe_high(int p[2])
{
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	p[0] = fd_high(p[0]);
	p[1] = fd_high(p[1]);
	if (p[0] < 0 || p[1] < 0) {
		if (p[0] >= 0)
			close(p[0]);
		if (p[1] >= 0)
			close(p[1]);
		return -1;
	}
	return 0;
}

static void set_nonblock(int fd)
{
	(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static int is_exec(const char *path)
{
	struct stat s;

	return !stat(path, &s) && S_ISREG(s.st_mode) && !access(path, X_OK);
}

/* A stage's executable: --stage-dir/KOP_STAGE_DIR, beside our own executable, then PATH. Caller frees. */
static char *find_stage(const char *name)
{
	struct kop_buf b = KOP_BUF_INIT;
	const char *path = getenv("PATH"), *p;

	if (sup.stage_dir) {
		kop_buf_addf(&b, "%s/%s", sup.stage_dir, name);
		if (is_exec(b.buf))
			return kop_buf_detach(&b, NULL);
	}
	if (sup.exe_dir) {
		kop_buf_reset(&b);
		kop_buf_addf(&b, "%s/%s", sup.exe_dir, name);
		if (is_exec(b.buf))
			return kop_buf_detach(&b, NULL);
	}
	for (p = path; p && *p;) {
		const char *colon = strchr(p, ':');
		size_t len = colon ? (size_t)(colon - p) : strlen(p);

		kop_buf_reset(&b);
		kop_buf_add(&b, len ? p : ".", len ? len : 1);
		kop_buf_addf(&b, "/%s", name);
		if (is_exec(b.buf))
			return kop_buf_detach(&b, NULL);
		p = colon ? colon + 1 : p + len;
	}
	kop_buf_release(&b);
	return NULL;
}

static char *describe_status(int status)
{
	struct kop_buf b = KOP_BUF_INIT;

	if (WIFEXITED(status))
		kop_buf_addf(&b, "exited with code %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		kop_buf_addf(&b, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		kop_buf_addf(&b, "ended with status %d", status);
	return kop_buf_detach(&b, NULL);
}

/* ---- metrics ------------------------------------------------------------------ */

static int valid_name(const char *s, int colon)
{
	const char *p;

	if (!*s || (*s >= '0' && *s <= '9'))
		return 0;
	for (p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
		      (colon && *p == ':')))
			return 0;
	return 1;
}

/* "name{k="v",...}" with sorted, escaped labels; NULL when a name is not valid. Caller frees. */
static char *series_key(const char *name, jv labels)
{
	struct kop_buf b = KOP_BUF_INIT;
	jv keys;
	int i, n, first = 1;

	if (!valid_name(name, 1))
		return NULL;
	kop_buf_addf(&b, "%s{", name);
	if (jv_get_kind(labels) == JV_KIND_OBJECT) {
		keys = jv_keys(jv_copy(labels));
		n = jv_array_length(jv_copy(keys));
		for (i = 0; i < n; i++) {
			jv k = jv_array_get(jv_copy(keys), i), v = jv_object_get(jv_copy(labels), jv_copy(k));
			const char *s;

			if (!valid_name(jv_string_value(k), 0) || jv_get_kind(v) != JV_KIND_STRING) {
				jv_free(k);
				jv_free(v);
				continue;
			}
			kop_buf_addf(&b, "%s%s=\"", first ? "" : ",", jv_string_value(k));
			for (s = jv_string_value(v); *s; s++) {
				if (*s == '\\' || *s == '"')
					kop_buf_addf(&b, "\\%c", *s);
				else if (*s == '\n')
					kop_buf_adds(&b, "\\n");
				else
					kop_buf_add(&b, s, 1);
			}
			kop_buf_adds(&b, "\"");
			first = 0;
			jv_free(k);
			jv_free(v);
		}
		jv_free(keys);
	}
	kop_buf_adds(&b, "}");
	return kop_buf_detach(&b, NULL);
}

/* Adds (or, for a gauge with set, replaces) a series in obj; consumes obj and labels. */
static jv series_put(jv obj, const char *name, const char *type, jv labels, double value, int set)
{
	char *key = series_key(name, labels);
	jv cur;

	if (!key) {
		jv_free(labels);
		return obj;
	}
	cur = jv_object_get(jv_copy(obj), jv_string(key));
	if (jv_get_kind(cur) == JV_KIND_OBJECT && !set) {
		jv old = jv_object_get(jv_copy(cur), jv_string("value"));

		value += jv_get_kind(old) == JV_KIND_NUMBER ? jv_number_value(old) : 0;
		jv_free(old);
	}
	jv_free(cur);
	cur = JV_OBJECT(jv_string("name"), jv_string(name), jv_string("type"), jv_string(type),
			jv_string("labels"), labels, jv_string("value"), jv_number(value));
	obj = jv_object_set(obj, jv_string(key), cur);
	free(key);
	return obj;
}

/* The supervisor's own counter (locks mu). */
static void metric_own_add(const char *name, jv labels, double delta)
{
	pthread_mutex_lock(&sup.mu);
	sup.base = series_put(sup.base, name, "counter", labels, delta, 0);
	pthread_mutex_unlock(&sup.mu);
}

/* A stats line from a stage: {"metrics":[{"name","type","labels","value"},...]}; mu held. */
static void stage_stats_line(size_t slot, const char *line, size_t len)
{
	jv v = jv_parse_sized(line, (int)len), arr, note, series = jv_object();
	char key[32];
	int i, n;

	if (jv_get_kind(v) != JV_KIND_OBJECT) {
		jv_free(v);
		jv_free(series);
		return;
	}
	note = jv_object_get(jv_copy(v), jv_string("note"));
	arr = jv_object_get(v, jv_string("metrics"));
	n = jv_get_kind(arr) == JV_KIND_ARRAY ? jv_array_length(jv_copy(arr)) : 0;
	for (i = 0; i < n; i++) {
		jv m = jv_array_get(jv_copy(arr), i);
		jv name = jv_get_kind(m) == JV_KIND_OBJECT ? jv_object_get(jv_copy(m), jv_string("name")) : jv_null();
		jv type = jv_get_kind(m) == JV_KIND_OBJECT ? jv_object_get(jv_copy(m), jv_string("type")) : jv_null();
		jv val = jv_get_kind(m) == JV_KIND_OBJECT ? jv_object_get(jv_copy(m), jv_string("value")) : jv_null();
		jv labels = jv_get_kind(m) == JV_KIND_OBJECT ? jv_object_get(jv_copy(m), jv_string("labels")) : jv_null();

		if (jv_get_kind(name) == JV_KIND_STRING && jv_get_kind(val) == JV_KIND_NUMBER)
			series = series_put(series, jv_string_value(name),
					    jv_get_kind(type) == JV_KIND_STRING &&
					    !strcmp(jv_string_value(type), "gauge") ? "gauge" : "counter",
					    labels, jv_number_value(val), 1);
		else
			jv_free(labels);
		jv_free(name);
		jv_free(type);
		jv_free(val);
		jv_free(m);
	}
	jv_free(arr);
	snprintf(key, sizeof(key), "%zu", slot);
	sup.live = jv_object_set(sup.live, jv_string(key), series);
	if (jv_get_kind(note) == JV_KIND_STRING && jv_string_length_bytes(jv_copy(note)) > 0 && slot < sup.nst)
		sup.notes = jv_object_set(sup.notes, jv_string(key),
					  jv_string_fmt("%s: %s", sup.st[slot].name, jv_string_value(note)));
	else
		sup.notes = jv_object_delete(sup.notes, jv_string(key));
	jv_free(note);
}

static long long statm_rss(pid_t pid)
{
	char path[64], buf[128];
	long long size = 0, rss = 0;
	FILE *f;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/statm");
	if (!(f = fopen(path, "r")))
		return -1;
	if (!fgets(buf, sizeof(buf), f) || sscanf(buf, "%lld %lld", &size, &rss) != 2)
		rss = -1;
	fclose(f);
	return rss < 0 ? -1 : rss * sysconf(_SC_PAGESIZE);
}

/* utime + stime of a process in seconds, -1 when unknown. */
static double proc_cpu(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "r")))
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* The command name may hold spaces; the fields after it start at the last ')'. */
	if (!(p = strrchr(buf, ')')) ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static const char *metric_help(const char *name)
{
	static const char *const help[][2] = {
		{ "controller_runtime_reconcile_total", "Total number of reconciliations per controller" },
		{ "controller_runtime_reconcile_errors_total", "Total number of reconciliation errors per controller" },
		{ "workqueue_depth", "Current depth of workqueue" },
		{ "rest_client_requests_total", "Number of HTTP requests, partitioned by status code and method" },
		{ "iot_operator_stage_restarts_total", "Pipeline restarts caused by each stage ending" },
		{ "leader_election_master_status", "1 when this replica is the leader of the lease name, 0 otherwise" },
		{ "process_resident_memory_bytes", "Resident memory size of the supervisor in bytes" },
		{ "process_cpu_seconds_total", "Total user and system CPU time of the supervisor in seconds" },
		{ "process_start_time_seconds", "Start time of the process since unix epoch in seconds" },
		{ "iot_operator_stage_resident_memory_bytes", "Resident memory size of each running stage in bytes" },
		{ "iot_operator_stage_cpu_seconds_total", "CPU time of each running stage in seconds" },
		{ "iot_operator_ready", "1 when /readyz answers 200" },
	};
	size_t i;

	for (i = 0; i < sizeof(help) / sizeof(help[0]); i++)
		if (!strcmp(help[i][0], name))
			return help[i][1];
	return NULL;
}

/*
 * Adds the series of series (consumed) to all (consumed), the same series of
 * two stages summing up; only the counters when counters_only.
 */
static jv series_add_all(jv all, jv series, int counters_only)
{
	if (jv_get_kind(series) != JV_KIND_OBJECT) {
		jv_free(series);
		return all;
	}
	jv_object_foreach(series, k, m) {
		jv name = jv_object_get(jv_copy(m), jv_string("name"));
		jv type = jv_object_get(jv_copy(m), jv_string("type"));
		jv val = jv_object_get(jv_copy(m), jv_string("value"));

		if (!counters_only || !strcmp(jv_string_value(type), "counter"))
			all = series_put(all, jv_string_value(name), jv_string_value(type),
					 jv_object_get(jv_copy(m), jv_string("labels")), jv_number_value(val), 0);
		jv_free(name);
		jv_free(type);
		jv_free(val);
		jv_free(k);
		jv_free(m);
	}
	jv_free(series);
	return all;
}

/* A stage is gone: its counters join the base (so totals never go down), its gauges vanish; mu held. */
static void stage_stats_fold(size_t slot)
{
	char key[32];

	snprintf(key, sizeof(key), "%zu", slot);
	sup.base = series_add_all(sup.base, jv_object_get(jv_copy(sup.live), jv_string(key)), 1);
	sup.live = jv_object_delete(sup.live, jv_string(key));
	{
		jv note = jv_object_get(jv_copy(sup.notes), jv_string(key));

		if (jv_get_kind(note) == JV_KIND_STRING)
			snprintf(sup.last_note, sizeof(sup.last_note), "%s", jv_string_value(note));
		jv_free(note);
	}
	sup.notes = jv_object_delete(sup.notes, jv_string(key));
}

/* How long one lease request may take: it never outlives a retry period much
 * (the main loop enforces the renew deadline anyway). */
static long lease_request_timeout_ms(void)
{
	return sup.retry_ms * 2 > 5000 ? sup.retry_ms * 2 : 5000;
}

/*
 * Whether a standby could take over, for ready_locked: the API server
 * answered its lease requests within a lease duration, or longer when a
 * candidate's round (up to 2.2 retry periods apart, and a request of up to
 * max(2 retry periods, 5 s)) may take longer (takes le.mu, so it is called
 * before sup.mu is taken). Else *why (why[KOP_ERRLEN + 64]) says why.
 */
static int standby_can_lead(char *why, size_t n)
{
	int64_t now = kop_mono_ms();
	int64_t round = sup.retry_ms * 22 / 10 + lease_request_timeout_ms();
	int ok;

	pthread_mutex_lock(&le.mu);
	ok = le.answered_ms > 0 && now - le.answered_ms < (sup.lease_ms > round ? sup.lease_ms : round);
	if (!ok)
		snprintf(why, n, "a standby that cannot reach the API server could not take over: %s",
			 *le.fail ? le.fail : "no answer to the lease requests yet");
	pthread_mutex_unlock(&le.mu);
	return ok;
}

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
static int ready_locked(int can, const char *can_why, const char **why)
{
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

/* The Prometheus text exposition of everything (takes mu). Caller frees. */
static char *metrics_render(size_t *len)
{
	struct kop_buf b = KOP_BUF_INIT;
	struct rusage ru;
	jv all, keys;
	const char *why;
	char prev[256] = "", can_why[KOP_ERRLEN + 64] = "";
	int i, n, can = standby_can_lead(can_why, sizeof(can_why));
	size_t s;

	pthread_mutex_lock(&sup.mu);
	all = jv_copy(sup.base);
	jv_object_foreach(sup.live, slot, series) {
		all = series_add_all(all, series, 0);
		jv_free(slot);
	}
	for (s = 0; s < sizeof(stage_names) / sizeof(stage_names[0]); s++) {
		jv c = jv_object_get(jv_copy(sup.restarts), jv_string(stage_names[s]));

		all = series_put(all, "iot_operator_stage_restarts_total", "counter",
				 JV_OBJECT(jv_string("stage"), jv_string(stage_names[s])),
				 jv_get_kind(c) == JV_KIND_NUMBER ? jv_number_value(c) : 0, 1);
		jv_free(c);
	}
	all = series_put(all, "leader_election_master_status", "gauge",
			 JV_OBJECT(jv_string("name"), jv_string(LOCK_NAME)),
			 (!sup.leader_elect || sup.is_leader) ? 1 : 0, 1);
	all = series_put(all, "iot_operator_ready", "gauge", jv_object(), ready_locked(can, can_why, &why), 1);
	for (i = 0; sup.pids[i]; i++) {
		long long rss = statm_rss(sup.pids[i]);
		double cpu = proc_cpu(sup.pids[i]);

		if (rss >= 0)
			all = series_put(all, "iot_operator_stage_resident_memory_bytes", "gauge",
					 JV_OBJECT(jv_string("stage"), jv_string(sup.pid_names[i])), (double)rss, 0);
		if (cpu >= 0)
			all = series_put(all, "iot_operator_stage_cpu_seconds_total", "counter",
					 JV_OBJECT(jv_string("stage"), jv_string(sup.pid_names[i])), cpu, 0);
	}
	pthread_mutex_unlock(&sup.mu);

	all = series_put(all, "process_resident_memory_bytes", "gauge", jv_object(), (double)statm_rss(0), 1);
	getrusage(RUSAGE_SELF, &ru);
	all = series_put(all, "process_cpu_seconds_total", "counter", jv_object(),
			 (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
			 ru.ru_stime.tv_usec / 1e6, 1);
	all = series_put(all, "process_start_time_seconds", "gauge", jv_object(), (double)sup.start_wall_ms / 1000.0, 1);

	keys = jv_keys(jv_copy(all));
	n = jv_array_length(jv_copy(keys));
	for (i = 0; i < n; i++) {
		jv k = jv_array_get(jv_copy(keys), i), m = jv_object_get(jv_copy(all), jv_copy(k));
		jv name = jv_object_get(jv_copy(m), jv_string("name"));
		jv type = jv_object_get(jv_copy(m), jv_string("type"));
		jv val = jv_object_get(jv_copy(m), jv_string("value"));
		const char *key = jv_string_value(k), *brace = strchr(key, '{');

		if (strcmp(prev, jv_string_value(name))) {
			const char *h = metric_help(jv_string_value(name));

			if (h)
				kop_buf_addf(&b, "# HELP %s %s\n", jv_string_value(name), h);
			kop_buf_addf(&b, "# TYPE %s %s\n", jv_string_value(name), jv_string_value(type));
			snprintf(prev, sizeof(prev), "%s", jv_string_value(name));
		}
		/* An empty label set is written without braces. */
		if (brace && !strcmp(brace, "{}"))
			kop_buf_add(&b, key, (size_t)(brace - key));
		else
			kop_buf_adds(&b, key);
		kop_buf_addf(&b, " %.15g\n", jv_number_value(val));
		jv_free(k);
		jv_free(m);
		jv_free(name);
		jv_free(type);
		jv_free(val);
	}
	jv_free(keys);
	jv_free(all);
	return kop_buf_detach(&b, len);
}

/* ---- HTTP ----------------------------------------------------------------------- */

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

/* [HOST]:PORT, HOST empty = every address; "0" = no server. */
static struct MHD_Daemon *http_start(const char *addr)
{
	struct sockaddr_in sa;
	const char *colon = strrchr(addr, ':');
	char host[64];
	char *end;
	long port;
	struct MHD_Daemon *d;
	const union MHD_DaemonInfo *info;

	if (!strcmp(addr, "0"))
		return NULL;
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
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, (uint16_t)port, NULL, NULL, http_handler, NULL,
			     MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_TIMEOUT, 30u,
			     MHD_OPTION_END);
	if (!d)
		die(KOP_EXIT_TEMP, "unable to listen on '%s': %s", addr, strerror(errno));
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	tool_logj(LOG_INFO, JV_OBJECT(jv_string("addr"), jv_string(host), jv_string("port"),
				      jv_number(info ? info->port : (double)port)),
		  "serving metrics and probes on '%s:%u'", *host ? host : "0.0.0.0",
		  info ? info->port : (unsigned)port);
	return d;
}

/* ---- leader election ------------------------------------------------------------- */

static long lease_request(void *ctx, const char *method, const char *path, jv body, jv *out, char *err)
{
	struct kube_client *c = ctx;
	struct kube_response r;
	char code[16];
	long ret;

	kube_request(c, method, path, jv_is_valid(body) ? "application/json" : NULL, body, &r);
	if (r.code)
		snprintf(code, sizeof(code), "%ld", r.code);
	else
		snprintf(code, sizeof(code), "<error>");
	metric_own_add("rest_client_requests_total", JV_OBJECT(jv_string("code"), jv_string(code),
							       jv_string("method"), jv_string(method)), 1);
	if (r.code == 401)
		kube_auth_failed(c);
	*out = jv_copy(r.body);
	if (!r.code)
		kop_error(err, "%s", r.message ? r.message : "no response");
	ret = r.code;
	kube_response_release(&r);
	return ret;
}

static void wake_main(void)
{
	uint64_t one = 1;

	if (le.efd >= 0)
		(void)!write(le.efd, &one, sizeof(one));
}

/* Whether two failure messages say the same but for their numbers (curl's
 * "after 3 ms" varies from one attempt to the next). */
static int same_failure(const char *a, const char *b)
{
	while (*a && *b) {
		if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
			while (isdigit((unsigned char)*a))
				a++;
			while (isdigit((unsigned char)*b))
				b++;
		} else if (*a++ != *b++) {
			return 0;
		}
	}
	return !*a && !*b;
}

static void *lease_thread(void *arg)
{
	struct lease_io io = { lease_request, le.kc };
	char last_err[KOP_ERRLEN] = "";	/* the failure last logged ("" none since a success) */
	int64_t last_err_at = 0;
	unsigned long failures = 0;

	(void)arg;
	pthread_mutex_lock(&le.mu);
	while (!le.stop) {
		char err[KOP_ERRLEN] = "";
		int64_t start = kop_mono_ms(), wait_ms;
		int r;
		struct timespec ts;

		pthread_mutex_unlock(&le.mu);
		r = lease_try_acquire_or_renew(&le.l, &io, start, kop_wall_ms() * 1000, err);
		pthread_mutex_lock(&le.mu);
		if (r >= 0) {
			le.answered_ms = start;
			le.fail[0] = '\0';
		} else {
			snprintf(le.fail, sizeof(le.fail), "%s", err);
		}
		if (r == 1) {
			le.renewed_ms = start;
			last_err[0] = '\0';
			failures = 0;
			if (!le.leader) {
				le.leader = 1;
				tool_logj(LOG_INFO, JV_OBJECT(jv_string("lease"), jv_string(LOCK_NAME),
							      jv_string("identity"), jv_string(sup.identity)),
					  "became leader");
				wake_main();
			}
		} else {
			/* A new failure is logged at once, the same one again every minute
			 * (a standby that cannot reach the API server says so). */
			failures += r < 0;
			if (r < 0 && (!same_failure(err, last_err) || kop_mono_ms() - last_err_at >= 60000)) {
				tool_logj(LOG_WARN, JV_OBJECT(jv_string("lease"), jv_string(LOCK_NAME), jv_string("failures"),
							      jv_number((double)failures)),
					  "unable to acquire or renew the lease: %s", err);
				snprintf(last_err, sizeof(last_err), "%s", err);
				last_err_at = kop_mono_ms();
			}
			if (le.leader && (r == 0 || kop_mono_ms() - le.renewed_ms >= sup.renew_ms)) {
				le.leader = 0;
				tool_logj(LOG_ERROR, JV_OBJECT(jv_string("lease"), jv_string(LOCK_NAME),
							       jv_string("holder"), jv_string(lease_holder(&le.l))),
					  r == 0 ? "leadership lost: the lease is held by another replica"
						 : "leadership lost: not renewed within the renew deadline");
				wake_main();
			} else if (r == 0 && !le.leader) {
				log_debug("lease '%s' is held by '%s'", LOCK_NAME, lease_holder(&le.l));
			}
		}
		/* A candidate waits RetryPeriod with jitter 1.2 (client-go's wait.JitterUntil); a leader RetryPeriod. */
		wait_ms = le.leader ? sup.retry_ms : sup.retry_ms + (int64_t)(sup.retry_ms * 1.2 * (random() / (RAND_MAX + 1.0)));
		wait_ms -= kop_mono_ms() - start;
		if (wait_ms < 0)
			wait_ms = 0;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += wait_ms / 1000;
		ts.tv_nsec += (wait_ms % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (!le.stop)
			pthread_cond_timedwait(&le.cv, &le.mu, &ts);
	}
	pthread_mutex_unlock(&le.mu);
	/* Stopping: release so that a standby takes over at once (the pipeline is down by now). */
	if (le.l.leader) {
		char err[KOP_ERRLEN] = "";

		if (lease_release(&le.l, &io, kop_wall_ms() * 1000, err) < 0) {
			log_warn("%s", err);
			le.release_failed = 1;
		} else {
			tool_logj(LOG_INFO, JV_OBJECT(jv_string("lease"), jv_string(LOCK_NAME)), "released the lease");
		}
	}
	return NULL;
}

/* Whether this replica may run the pipeline now: it holds the lease and renewed it within the deadline. */
static int may_lead(int64_t now)
{
	int r;

	if (!sup.leader_elect)
		return 1;
	pthread_mutex_lock(&le.mu);
	r = le.leader && now - le.renewed_ms < sup.renew_ms;
	pthread_mutex_unlock(&le.mu);
	return r;
}

static void lease_setup(void)
{
	struct kube_config cfg;
	char err[KOP_ERRLEN];

	memset(&cfg, 0, sizeof(cfg));
	if (kube_config_load(&cfg, tool_kube.kubeconfig, tool_kube.context, err) < 0)
		die(KOP_EXIT_PERM, "%s", err);
	if (!(le.kc = kube_client_new(&cfg, lease_request_timeout_ms(), err)))
		die(KOP_EXIT_PERM, "%s", err);
	kube_config_release(&cfg);
	kube_client_set_user_agent(le.kc, "iot-operator/leader-election");
	lease_init(&le.l, sup.operator_name, LOCK_NAME, sup.identity, (sup.lease_ms + 999) / 1000);
	if ((le.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		die(KOP_EXIT_TEMP, "unable to create an eventfd: %s", strerror(errno));
	le.efd = fd_high(le.efd);
	if (pthread_create(&le.th, NULL, lease_thread, NULL))
		die(KOP_EXIT_TEMP, "unable to start the leader-election thread");
	le.started = 1;
	tool_logj(LOG_INFO, JV_OBJECT(jv_string("lease"), jv_string(LOCK_NAME), jv_string("namespace"),
				      jv_string(sup.operator_name), jv_string("identity"), jv_string(sup.identity)),
		  "waiting for leadership");
}

static void lease_stop(void)
{
	if (!le.started)
		return;
	pthread_mutex_lock(&le.mu);
	le.stop = 1;
	pthread_cond_signal(&le.cv);
	pthread_mutex_unlock(&le.mu);
	pthread_join(le.th, NULL);
	lease_release_mem(&le.l);
	kube_client_free(le.kc);
	close_fd(&le.efd);
	le.started = 0;
}

/* ---- spawning ------------------------------------------------------------------------ */

/*
 * Starts path with stdin/stdout/fd 3/fd 4 as given (-1: /dev/null for stdin,
 * inherited stdout, none). fork+exec rather than posix_spawn for one thing
 * posix_spawn cannot do: the stage gets SIGKILL when the supervisor dies
 * (PR_SET_PDEATHSIG), so that a leader killed with -9 leaves no writer behind.
 * Between fork and exec the child calls only async-signal-safe functions.
 */
static pid_t spawn(const char *path, char *const argv[], int in, int out, int fd3, int fd4, char *err)
{
	pid_t parent = getpid(), pid;
	int ep[2], e = 0;
	ssize_t n;

	if (pipe_high(ep) < 0)
		return kop_error(err, "unable to start '%s': %s", path, strerror(errno));
	pid = fork();
	if (pid < 0) {
		e = errno;
		close(ep[0]);
		close(ep[1]);
		return kop_error(err, "unable to start '%s': %s", path, strerror(e));
	}
	if (pid == 0) {
		static const int dfl[] = { SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD };
		struct sigaction sa;
		sigset_t none;
		size_t i;

		/* Its own process group: a terminal's ^C reaches only us, and a teardown reaches its children. */
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(KOP_EXIT_TEMP);
		if (in >= 0)
			dup2(in, 0);
		else if ((in = open("/dev/null", O_RDONLY)) >= 0 && in != 0)
			dup2(in, 0);
		if (out >= 0)
			dup2(out, 1);
		if (fd3 >= 0)
			dup2(fd3, FEEDBACK_FD);
		if (fd4 >= 0)
			dup2(fd4, STATS_FD);
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = SIG_DFL;
		for (i = 0; i < sizeof(dfl) / sizeof(dfl[0]); i++)
			sigaction(dfl[i], &sa, NULL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execve(path, argv, environ);
		e = errno;
		(void)!write(ep[1], &e, sizeof(e));
		_exit(127);
	}
	setpgid(pid, pid);
	close(ep[1]);
	while ((n = read(ep[0], &e, sizeof(e))) < 0 && errno == EINTR)
		;
	close(ep[0]);
	if (n == (ssize_t)sizeof(e)) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		return kop_error(err, "unable to start '%s': %s", path, strerror(e));
	}
	return pid;
}

static void argv_add(jv *argv, const char *s)
{
	*argv = jv_array_append(*argv, jv_string(s));
}

static void argv_kube(jv *argv)
{
	char buf[32];

	if (tool_kube.kubeconfig) {
		argv_add(argv, "--kubeconfig");
		argv_add(argv, tool_kube.kubeconfig);
	}
	if (tool_kube.context) {
		argv_add(argv, "--context");
		argv_add(argv, tool_kube.context);
	}
	if (tool_kube.request_timeout_ms > 0) {
		snprintf(buf, sizeof(buf), "%ldms", tool_kube.request_timeout_ms);
		argv_add(argv, "--request-timeout");
		argv_add(argv, buf);
	}
}

/* Spawns a stage from a jv array of strings (consumed); the path is looked up here. */
static pid_t spawn_stage(const char *name, jv args, int in, int out, int fd3, int fd4, char *err)
{
	char *path = find_stage(name);
	char **argv;
	int i, n = jv_array_length(jv_copy(args));
	pid_t pid;

	if (!path) {
		jv_free(args);
		kop_error(err, "unable to find '%s' (in --stage-dir, beside iot-operator, on PATH)", name);
		return -1;
	}
	argv = kop_calloc((size_t)n + 2, sizeof(*argv));
	argv[0] = path;
	for (i = 0; i < n; i++) {
		jv s = jv_array_get(jv_copy(args), i);

		argv[i + 1] = kop_strdup(jv_string_value(s));
		jv_free(s);
	}
	jv_free(args);
	pid = spawn(path, argv, in, out, fd3, fd4, err);
	if (pid > 0) {
		struct kop_buf cmd = KOP_BUF_INIT;

		for (i = 0; argv[i]; i++)
			kop_buf_addf(&cmd, "%s%s", i ? " " : "", argv[i]);
		tool_logj(LOG_DEBUG, JV_OBJECT(jv_string("pid"), jv_number(pid), jv_string("cmd"), jv_string(cmd.buf)),
			  "started stage '%s'", name);
		kop_buf_release(&cmd);
	}
	for (i = 0; argv[i]; i++)
		free(argv[i]);
	free(argv);
	return pid;
}

/*
 * `ireconcile --print-watches PROGRAM` as kwatch's arguments: one kwatch
 * watches them all, each resource with its own namespace and selectors
 * (RESOURCE@NS:l=SEL:f=SEL; @* = all namespaces). Returns a jv array of
 * argument arrays (one per kwatch to run), or jv_invalid with a message.
 */
static jv kwatch_groups(void)
{
	char err[KOP_ERRLEN] = "";
	struct kop_buf out = KOP_BUF_INIT;
	jv args = jv_array(), kw = jv_array(), result;
	int p[2], status = 0, nwatch = 0;
	pid_t pid;
	int64_t deadline = kop_mono_ms() + 30000;
	char *line, *nl;

	if (pipe_high(p) < 0) {
		jv_free(args);
		jv_free(kw);
		return jv_invalid_with_msg(jv_string_fmt("unable to create a pipe: %s", strerror(errno)));
	}
	argv_add(&args, "--print-watches");
	argv_add(&args, sup.program_dir);
	pid = spawn_stage("ireconcile", args, -1, p[1], -1, -1, err);
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		jv_free(kw);
		return jv_invalid_with_msg(jv_string(err));
	}
	for (;;) {
		struct pollfd pfd = { p[0], POLLIN, 0 };
		char buf[4096];
		ssize_t n;
		int64_t left = deadline - kop_mono_ms();

		if (left <= 0 || poll(&pfd, 1, (int)left) == 0) {
			kill(pid, SIGKILL);
			break;
		}
		n = read(p[0], buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		kop_buf_add(&out, buf, (size_t)n);
	}
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		char *how = describe_status(status);

		kop_buf_release(&out);
		jv_free(kw);
		result = jv_invalid_with_msg(jv_string_fmt("'ireconcile --print-watches %s' %s", sup.program_dir, how));
		free(how);
		return result;
	}
	argv_kube(&kw);
	argv_add(&kw, "-A");
	for (line = out.buf; line && *line; line = nl ? nl + 1 : NULL) {
		jv w, res, ns, ls, fs, spec;

		nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		if (!*line)
			continue;
		w = jv_parse(line);
		res = jv_get_kind(w) == JV_KIND_OBJECT ? jv_object_get(jv_copy(w), jv_string("resource")) : jv_null();
		if (jv_get_kind(res) != JV_KIND_STRING) {
			log_warn("ignoring a watch without a resource: %s", line);
			jv_free(w);
			jv_free(res);
			continue;
		}
		ns = jv_object_get(jv_copy(w), jv_string("namespace"));
		ls = jv_object_get(jv_copy(w), jv_string("labelSelector"));
		fs = jv_object_get(jv_copy(w), jv_string("fieldSelector"));
		spec = jv_string_fmt("%s@%s:l=%s:f=%s", jv_string_value(res),
				     jv_get_kind(ns) == JV_KIND_STRING && *jv_string_value(ns) ? jv_string_value(ns) : "*",
				     jv_get_kind(ls) == JV_KIND_STRING ? jv_string_value(ls) : "",
				     jv_get_kind(fs) == JV_KIND_STRING ? jv_string_value(fs) : "");
		kw = jv_array_append(kw, spec);
		nwatch++;
		jv_free(res);
		jv_free(ns);
		jv_free(ls);
		jv_free(fs);
		jv_free(w);
	}
	kop_buf_release(&out);
	if (!nwatch) {
		jv_free(kw);
		return jv_invalid_with_msg(jv_string_fmt("'ireconcile --print-watches %s' printed no watch",
							 sup.program_dir));
	}
	return JV_ARRAY(kw);
}

/* ---- the pipeline ---------------------------------------------------------------------- */

static void publish_pids(void)
{
	size_t i, n = 0;

	pthread_mutex_lock(&sup.mu);
	for (i = 0; i < sup.nst && n < 63; i++)
		if (sup.st[i].pid > 0) {
			sup.pids[n] = sup.st[i].pid;
			sup.pid_names[n++] = sup.st[i].name;
		}
	sup.pids[n] = 0;
	pthread_mutex_unlock(&sup.mu);
}

static void count_restart(const char *stage)
{
	jv c;

	pthread_mutex_lock(&sup.mu);
	c = jv_object_get(jv_copy(sup.restarts), jv_string(stage));
	sup.restarts = jv_object_set(sup.restarts, jv_string(stage),
				     jv_number((jv_get_kind(c) == JV_KIND_NUMBER ? jv_number_value(c) : 0) + 1));
	jv_free(c);
	pthread_mutex_unlock(&sup.mu);
}

static void schedule_restart(const char *culprit, const char *why)
{
	int64_t now = kop_mono_ms(), at;
	unsigned delay;

	/* A generation that ran a while starts the backoff over. */
	if (sup.started_ms && now - sup.started_ms > 60000)
		kop_backoff_reset(&sup.backoff);
	delay = kop_backoff_next(&sup.backoff);
	at = now + delay;
	if (at < sup.started_ms + 1000)
		at = sup.started_ms + 1000;
	sup.next_start_ms = at;
	count_restart(culprit);
	tool_logj(LOG_ERROR, JV_OBJECT(jv_string("stage"), jv_string(culprit), jv_string("restartInMs"),
				       jv_number((double)(at - now))),
		  "stage '%s' %s; restarting the pipeline", culprit, why);
}

/* Signals every stage's process group. */
static void signal_stages(int sig, int only_kwatch)
{
	size_t i;

	for (i = 0; i < sup.nst; i++)
		if (sup.st[i].pid > 0 && (!only_kwatch || !strcmp(sup.st[i].name, "kwatch")))
			kill(-sup.st[i].pid, sig);
}

enum teardown { TEARDOWN_DRAIN, TEARDOWN_TERM, TEARDOWN_KILL };

static void teardown(enum teardown how)
{
	int64_t now = kop_mono_ms();

	if (!sup.running)
		return;
	switch (how) {
	case TEARDOWN_DRAIN:
		/* No new events: the writers finish what is in flight and exit on EOF. */
		signal_stages(SIGTERM, 1);
		sup.draining = 1;
		if (!sup.tearing_down || sup.kill_at_ms > now + sup.drain_ms)
			sup.kill_at_ms = now + sup.drain_ms;
		break;
	case TEARDOWN_TERM:
		signal_stages(SIGTERM, 0);
		close_fd(&sup.merged_fd);
		if (!sup.tearing_down || sup.kill_at_ms > now + 2000)
			sup.kill_at_ms = now + 2000;
		break;
	case TEARDOWN_KILL:
		signal_stages(SIGKILL, 0);
		close_fd(&sup.merged_fd);
		sup.kill_at_ms = now;
		break;
	}
	sup.tearing_down = 1;
	pthread_mutex_lock(&sup.mu);
	sup.pipeline_up = 0;
	pthread_mutex_unlock(&sup.mu);
}

static void stage_read_stats(size_t slot);

/* Every stage has been reaped: close what is left, keep the counters. */
static void pipeline_finish(void)
{
	size_t i;

	for (i = 0; i < sup.nst; i++) {
		struct stage *s = &sup.st[i];

		if (s->stats_fd >= 0)
			stage_read_stats(i);
		close_fd(&s->stats_fd);
		close_fd(&s->out_fd);
		kop_buf_release(&s->stats);
		kop_buf_release(&s->out);
	}
	pthread_mutex_lock(&sup.mu);
	for (i = 0; i < sup.nst; i++)
		stage_stats_fold(i);
	sup.initial_sent = 0;
	sup.pipeline_up = 0;
	pthread_mutex_unlock(&sup.mu);
	close_fd(&sup.merged_fd);
	kop_buf_release(&sup.merged);
	sup.merged_off = 0;
	free(sup.st);
	sup.st = NULL;
	sup.nst = 0;
	sup.running = sup.tearing_down = sup.draining = sup.culprit_seen = sup.lease_killed = 0;
	sup.suspect = 0;
	publish_pids();
	log_info("pipeline stopped");
}

static int pipeline_start(void)
{
	char err[KOP_ERRLEN] = "";
	jv groups = kwatch_groups(), args;
	int in[2] = { -1, -1 }, fb[2] = { -1, -1 }, ra[2] = { -1, -1 }, as[2] = { -1, -1 };
	size_t i, nk;
	int ok = 1;

	sup.started_ms = kop_mono_ms();
	if (!jv_is_valid(groups)) {
		jv msg = jv_invalid_get_msg(groups);

		schedule_restart("ireconcile", jv_get_kind(msg) == JV_KIND_STRING ? jv_string_value(msg) : "failed");
		jv_free(msg);
		return -1;
	}
	nk = (size_t)jv_array_length(jv_copy(groups));
	pthread_mutex_lock(&sup.mu);
	sup.nst = nk + 3;
	sup.st = kop_calloc(sup.nst, sizeof(*sup.st));
	pthread_mutex_unlock(&sup.mu);
	for (i = 0; i < sup.nst; i++) {
		sup.st[i].name = i < nk ? "kwatch" : stage_names[i - nk + 1];
		sup.st[i].stats_fd = sup.st[i].out_fd = -1;
		sup.st[i].status = -1;
	}
	if (pipe_high(in) < 0 || pipe_high(fb) < 0 || pipe_high(ra) < 0 || pipe_high(as) < 0) {
		snprintf(err, sizeof(err), "unable to create a pipe: %s", strerror(errno));
		ok = 0;
	}
	for (i = 0; ok && i < sup.nst; i++) {
		struct stage *s = &sup.st[i];
		int sp[2], out[2] = { -1, -1 };

		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0 ||
		    (sp[0] = fd_high(sp[0])) < 0 || (sp[1] = fd_high(sp[1])) < 0) {
			snprintf(err, sizeof(err), "unable to create a socket pair: %s", strerror(errno));
			ok = 0;
			break;
		}
		s->stats_fd = sp[0];
		set_nonblock(s->stats_fd);
		if (i < nk) {
			if (pipe_high(out) < 0) {
				close(sp[1]);
				snprintf(err, sizeof(err), "unable to create a pipe: %s", strerror(errno));
				ok = 0;
				break;
			}
			s->pid = spawn_stage("kwatch", jv_array_get(jv_copy(groups), (int)i), -1, out[1], -1, sp[1], err);
			close(out[1]);
			s->out_fd = out[0];
			set_nonblock(s->out_fd);
		} else if (!strcmp(s->name, "ireconcile")) {
			char fbpath[32];

			snprintf(fbpath, sizeof(fbpath), "/dev/fd/%d", FEEDBACK_FD);
			args = jv_array();
			argv_add(&args, "--feedback");
			argv_add(&args, fbpath);
			argv_add(&args, sup.program_dir);
			s->pid = spawn_stage("ireconcile", args, in[0], ra[1], fb[0], sp[1], err);
		} else if (!strcmp(s->name, "kapply")) {
			args = jv_array();
			argv_kube(&args);
			s->pid = spawn_stage("kapply", args, ra[0], as[1], -1, sp[1], err);
		} else {
			args = jv_array();
			argv_kube(&args);
			s->pid = spawn_stage("kstatus", args, as[0], fb[1], -1, sp[1], err);
		}
		close(sp[1]);
		if (s->pid <= 0) {
			s->pid = 0;
			ok = 0;
		}
	}
	jv_free(groups);
	close_fd(&in[0]);
	close_fd(&fb[0]);
	close_fd(&fb[1]);
	close_fd(&ra[0]);
	close_fd(&ra[1]);
	close_fd(&as[0]);
	close_fd(&as[1]);
	sup.merged_fd = in[1];
	if (sup.merged_fd >= 0)
		set_nonblock(sup.merged_fd);
	sup.running = 1;
	publish_pids();
	if (!ok) {
		schedule_restart(i < sup.nst ? sup.st[i].name : "ireconcile", err);
		sup.culprit_seen = 1;
		teardown(TEARDOWN_KILL);
		return -1;
	}
	pthread_mutex_lock(&sup.mu);
	sup.pipeline_up = 1;
	pthread_mutex_unlock(&sup.mu);
	tool_logj(LOG_INFO, JV_OBJECT(jv_string("kwatch"), jv_number((double)nk), jv_string("program"),
				      jv_string(sup.program_dir)),
		  "pipeline started");
	return 0;
}

/* ---- the merger: kwatch lines to ireconcile ---------------------------------------------- */

static int is_initial_end(const char *line, size_t len)
{
	jv v, t, a;
	int r;

	if (!memmem(line, len, "initial-events-end", 18))
		return 0;
	v = jv_parse_sized(line, (int)len);
	if (jv_get_kind(v) != JV_KIND_OBJECT) {
		jv_free(v);
		return 0;
	}
	t = jv_object_get(jv_copy(v), jv_string("type"));
	a = jv_getpath(v, JV_ARRAY(jv_string("object"), jv_string("metadata"), jv_string("annotations"),
				  jv_string("k8s.io/initial-events-end")));
	r = jv_get_kind(t) == JV_KIND_STRING && !strcmp(jv_string_value(t), "BOOKMARK") &&
	    jv_get_kind(a) == JV_KIND_STRING && !strcmp(jv_string_value(a), "true");
	jv_free(t);
	jv_free(a);
	return r;
}

static void merge_line(struct stage *s, const char *line, size_t len)
{
	size_t i;
	int all = 1;

	if (is_initial_end(line, len)) {
		s->bookmark = 1;
		for (i = 0; i < sup.nst; i++)
			if (!strcmp(sup.st[i].name, "kwatch") && !sup.st[i].bookmark)
				all = 0;
		if (!all || sup.initial_sent)
			return;
		kop_buf_add(&sup.merged, line, len);
		kop_buf_add(&sup.merged, "\n", 1);
		pthread_mutex_lock(&sup.mu);
		sup.initial_sent = 1;
		sup.last_note[0] = 0;
		pthread_mutex_unlock(&sup.mu);
		log_info("initial lists are in");
		return;
	}
	kop_buf_add(&sup.merged, line, len);
	kop_buf_add(&sup.merged, "\n", 1);
}

static void kwatch_read(struct stage *s)
{
	char buf[65536];
	ssize_t n = read(s->out_fd, buf, sizeof(buf));
	size_t start = 0, i;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		/* EOF: a last line without a newline still counts. */
		if (s->out.len)
			merge_line(s, s->out.buf, s->out.len);
		kop_buf_reset(&s->out);
		close_fd(&s->out_fd);
		return;
	}
	for (i = 0; i < (size_t)n; i++) {
		if (buf[i] != '\n')
			continue;
		if (s->out.len) {
			kop_buf_add(&s->out, buf + start, i - start);
			merge_line(s, s->out.buf, s->out.len);
			kop_buf_reset(&s->out);
		} else if (i > start) {
			merge_line(s, buf + start, i - start);
		}
		start = i + 1;
	}
	if (start < (size_t)n)
		kop_buf_add(&s->out, buf + start, (size_t)n - start);
}

static void merged_write(void)
{
	ssize_t n;

	if (sup.merged_fd < 0) {
		kop_buf_reset(&sup.merged);
		sup.merged_off = 0;
		return;
	}
	while (sup.merged_off < sup.merged.len) {
		n = write(sup.merged_fd, sup.merged.buf + sup.merged_off, sup.merged.len - sup.merged_off);
		if (n > 0) {
			sup.merged_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN) {
			/* ireconcile is gone: its death restarts the pipeline. */
			close_fd(&sup.merged_fd);
			kop_buf_reset(&sup.merged);
			sup.merged_off = 0;
		} else {
			/* an ireconcile always a little behind never empties it: without
			 * this it kept every line passed on (27 MB while 1,000 IoT
			 * instances were created) */
			kop_buf_drop_done(&sup.merged, &sup.merged_off, MERGE_HIGH / 4);
		}
		return;
	}
	kop_buf_reset(&sup.merged);
	sup.merged_off = 0;
}

static void stage_read_stats(size_t slot)
{
	struct stage *s = &sup.st[slot];
	char buf[16384];
	ssize_t n;
	char *nl;

	for (;;) {
		n = read(s->stats_fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			close_fd(&s->stats_fd);
			break;
		}
		kop_buf_add(&s->stats, buf, (size_t)n);
	}
	/* Only the last complete line matters: values are cumulative. */
	if (s->stats.len && (nl = memrchr(s->stats.buf, '\n', s->stats.len))) {
		char *prev = nl > s->stats.buf ? memrchr(s->stats.buf, '\n', (size_t)(nl - s->stats.buf)) : NULL;
		const char *line = prev ? prev + 1 : s->stats.buf;

		pthread_mutex_lock(&sup.mu);
		stage_stats_line(slot, line, (size_t)(nl - line));
		pthread_mutex_unlock(&sup.mu);
		kop_buf_drop(&s->stats, (size_t)(nl + 1 - s->stats.buf));
	}
	if (s->stats.len > 1024 * 1024)
		kop_buf_reset(&s->stats);
}

/* ---- children and signals ------------------------------------------------------------------ */

/* The stage of index i ended the pipeline: restart it all. */
static void blame(size_t i)
{
	char *how = describe_status(sup.st[i].status);

	sup.culprit_seen = 1;
	sup.suspect = 0;
	schedule_restart(sup.st[i].name, how);
	free(how);
	teardown(TEARDOWN_TERM);
}

/* How long a clean end waits for the death it may follow (see reap). */
#define SUSPECT_MS 300

/*
 * A stage that ends on its own ends the pipeline. When one is killed, the
 * stage after it reads the end of its input and exits 0, and may be reaped
 * first: a clean end is blamed only if no stage dies otherwise within
 * SUSPECT_MS (the restart is counted for the stage that died).
 */
static void reap(void)
{
	int status;
	pid_t pid;
	size_t i;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		int ours = 0;

		for (i = 0; i < sup.nst; i++) {
			struct stage *s = &sup.st[i];

			if (s->pid != pid)
				continue;
			ours = 1;
			s->pid = 0;
			s->status = status;
			if (sup.running && !sup.tearing_down && !sup.culprit_seen) {
				if (!WIFEXITED(status) || WEXITSTATUS(status)) {
					blame(i);
				} else if (!sup.suspect) {
					sup.suspect = i + 1;
					sup.suspect_until = kop_mono_ms() + SUSPECT_MS;
				}
			} else {
				char *how = describe_status(status);

				tool_logj(LOG_DEBUG, JV_OBJECT(jv_string("pid"), jv_number(pid)), "stage '%s' %s",
					  s->name, how);
				free(how);
			}
			/* Its group (grandchildren) goes with it. */
			kill(-pid, SIGKILL);
		}
		if (!ours)
			tool_logj(LOG_DEBUG, JV_OBJECT(jv_string("pid"), jv_number(pid)), "reaped an orphaned process");
	}
	publish_pids();
}

static int setup_signals(void)
{
	sigset_t set;
	int fd;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGHUP);
	/* Blocked before any thread starts, so that every thread inherits the mask. */
	if (pthread_sigmask(SIG_BLOCK, &set, NULL))
		die(KOP_EXIT_TEMP, "unable to block signals");
	if ((fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)) < 0)
		die(KOP_EXIT_TEMP, "unable to create a signalfd: %s", strerror(errno));
	return fd_high(fd);
}

static void on_signal(int sfd)
{
	struct signalfd_siginfo si;

	while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGCHLD) {
			reap();
		} else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
			if (sup.terminating) {
				log_warn("second %s: stopping the stages now", strsignal((int)si.ssi_signo));
				teardown(TEARDOWN_KILL);
				continue;
			}
			sup.terminating = 1;
			tool_logj(LOG_INFO, JV_OBJECT(jv_string("drainTimeoutMs"), jv_number((double)sup.drain_ms)),
				  "%s: draining", strsignal((int)si.ssi_signo));
			teardown(TEARDOWN_DRAIN);
		} else {
			log_info("ignoring %s", strsignal((int)si.ssi_signo));
		}
	}
}

/* ---- the main loop ----------------------------------------------------------------------------- */

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
			log_error("not the leader any more: stopping the pipeline before the lease can expire");
			sup.lease_killed = 1;
			teardown(TEARDOWN_KILL);
		}
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
		if (!sup.running && lead && !sup.terminating && now >= sup.next_start_ms)
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
		if (!sup.running && lead && sup.next_start_ms < wake)
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
		{ NULL, 0, NULL, 0 }
	};
	struct MHD_Daemon *httpd;
	const char *env;
	char buf[32];
	int c, sfd, code = KOP_EXIT_OK;

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
		default:
			tool_bad_option(argv, TOOL_COMMON_SHORT);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	if ((env = getenv("KOP_WATCH_LIST")) && *env && strcmp(env, "auto") && strcmp(env, "always") &&
	    strcmp(env, "never"))
		die_usage("invalid KOP_WATCH_LIST '%s' (auto, always or never)", env);
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
	}
	snprintf(buf, sizeof(buf), "%d", STATS_FD);
	setenv("KOP_STATS_FD", buf, 1);

	sup.exe_dir = tool_exe_dir();
	if (!(sup.program_dir = tool_find_program(sup.program)))
		die(KOP_EXIT_PERM, "unable to find the program '%s' (as given, beside iot-operator, in pipeline/)",
		    sup.program);
	sup.identity = make_identity();
	sup.base = jv_object();
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
	tool_logj(LOG_INFO, JV_OBJECT(jv_string("operatorNamespace"), jv_string(sup.operator_name),
				      jv_string("program"), jv_string(sup.program_dir),
				      jv_string("leaderElection"), jv_bool(sup.leader_elect)),
		  "starting");
	/* (a kubeconfig that cannot be loaded ends it here, before anything is served) */
	if (sup.leader_elect)
		lease_setup();
	httpd = http_start(sup.metrics_addr);

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
	jv_free(sup.live);
	jv_free(sup.notes);
	jv_free(sup.restarts);
	free(sup.identity);
	free(sup.exe_dir);
	free(sup.program_dir);
	curl_global_cleanup();
	return tool_finish(code);
}
