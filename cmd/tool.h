#ifndef KOP_TOOL_H
#define KOP_TOOL_H
/*
 * What every tool in cmd/ shares and lib/ must not do: print and exit.
 *
 * Logs are one JSON object per line on stderr:
 *   {"time":"2026-11-22T10:00:00.123456Z","level":"error","prog":"kwatch","msg":"…", …fields}
 * or, with --log-format=text (the default when stderr is a terminal),
 *   kwatch: error: unable to open 'x': No such file or directory
 * Messages follow one style: lowercase, no full stop, the subject quoted,
 * "unable to <verb> '<obj>': <reason>". No secret value is ever logged.
 */
#include <stdnoreturn.h>
#include <jv.h>
#include "kop.h"

extern const char *PROG;

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG, LOG_TRACE };

/* Current threshold (default LOG_INFO); messages above it are dropped. */
extern int log_level;
int log_enabled(int level);
void tool_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* With extra structured fields: `fields` is a jv object (consumed; jv_null() for none). */
void tool_logj(int level, jv fields, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define log_error(...) tool_log(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) tool_log(LOG_WARN, __VA_ARGS__)
#define log_info(...) tool_log(LOG_INFO, __VA_ARGS__)
#define log_debug(...) tool_log(LOG_DEBUG, __VA_ARGS__)

/* Logs at error level, "fatal: …", and exits with code. Setup only: never in a loop. */
noreturn void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Bad usage: logs the message and "see 'PROG --help'", exits 100. */
noreturn void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* After getopt_long answered '?' (tool_init set opterr = 0): names the bad option (100). */
noreturn void tool_bad_option(char **argv, const char *optstring);

/*
 * Options every tool takes the same way. Tools add these to their
 * getopt_long table with TOOL_COMMON_OPTIONS (or TOOL_KUBE_OPTIONS for the
 * ones that talk to the API) and pass unknown codes to tool_common_option().
 */
enum {
	OPT_LOG_LEVEL = 0x1000,
	OPT_LOG_FORMAT,
	OPT_KUBECONFIG,
	OPT_CONTEXT,
	OPT_REQUEST_TIMEOUT,
	OPT_HELP,
	OPT_TOOL_LAST	/* tools number their own long-only options from here */
};
#define TOOL_COMMON_OPTIONS \
	{ "log-level", required_argument, NULL, OPT_LOG_LEVEL }, \
	{ "log-format", required_argument, NULL, OPT_LOG_FORMAT }, \
	{ "verbose", no_argument, NULL, 'v' }, \
	{ "help", no_argument, NULL, 'h' }
#define TOOL_KUBE_OPTIONS \
	{ "kubeconfig", required_argument, NULL, OPT_KUBECONFIG }, \
	{ "context", required_argument, NULL, OPT_CONTEXT }, \
	{ "request-timeout", required_argument, NULL, OPT_REQUEST_TIMEOUT }
/* The short options of TOOL_COMMON_OPTIONS, for the getopt string. */
#define TOOL_COMMON_SHORT "vh"

/* What the common options set. */
struct tool_kube_opts {
	const char *kubeconfig;		/* --kubeconfig, else NULL */
	const char *context;		/* --context, else NULL */
	long request_timeout_ms;	/* --request-timeout (0 = none) */
};
extern struct tool_kube_opts tool_kube;

/*
 * Handles a common option; returns 1 if c was one, 0 if not. -v raises the
 * log level by one step. -h prints `usage` to stdout and exits 0.
 */
int tool_common_option(int c, const char *arg, const char *usage);
/* Parses a duration: "30s", "500ms", "2m", "1h", or plain seconds. -1 on error. */
long tool_parse_duration_ms(const char *s);

/*
 * Start of main(): sets PROG, makes sure fds 0-2 are open, seeds random(),
 * picks the log format; ignores SIGPIPE when ignore_sigpipe (network tools,
 * which check every write instead).
 */
void tool_init(const char *prog, int argc, char **argv, int ignore_sigpipe);
/*
 * Before the main of a tool run in a process that was another one until now
 * (iot-operator's built-in stages: spawner.c forks them without exec): what
 * this layer keeps, as a fresh process has it. The log level and format, the
 * common options, the metrics, getopt's position.
 */
void tool_reset(void);
/*
 * Handles a failed write to stdout: EPIPE (reader gone) exits quietly as
 * SIGPIPE would; anything else is fatal (111).
 */
noreturn void tool_stdout_failed(void);
/* A line's text (len bytes, no '\n') written to stdout as it came, flushed: a line passed on unread. */
void tool_write_line(const char *text, size_t len);
/* End of main(): flush and close stdout, turning errors into 111 (or quiet EPIPE). */
int tool_finish(int code);

/*
 * The User-Agent of the tool's API client: "iot-operator/COMPONENT", and
 * when the environment has POD_NAME (the supervisor's stages inherit it) a
 * comment naming the replica, "iot-operator/kapply (op-0)", so that a write
 * can be traced to the replica that made it. The part before "/" stays
 * "iot-operator": the API server's default field manager (ksim's too).
 * A POD_NAME that is not a DNS-1123 subdomain (a pod's name always is) is
 * left out, with a warning. Caller frees.
 */
char *tool_user_agent(const char *component);

/* The running executable, and its directory (from /proc/self/exe). Caller frees; NULL when unknown. */
char *tool_exe_path(void);
char *tool_exe_dir(void);
/*
 * A program directory: DIR as given when it exists; else, for a relative
 * DIR, beside the executable as installed (../share/iot-operator/DIR) or in
 * the source tree (bin/../DIR, build/san/bin/../../../DIR); a bare name is
 * also looked for under pipeline/ there and in the current directory.
 * Caller frees; NULL when not found.
 */
char *tool_find_program(const char *dir);

/*
 * Metrics for the supervisor (docs/iot-operator.md, "Stage metrics").
 * iot-operator gives each stage a pipe and names it in KOP_STATS_FD; the
 * tool's counters and gauges travel there as JSON lines, values cumulative
 * since the tool started, so a dropped line loses nothing:
 *   {"note":"","metrics":[{"name":"rest_client_requests_total","type":"counter",
 *                "labels":{"code":"200","method":"PATCH"},"value":12},...]}
 * labels is NULL or "key=value,key=value" (values without ',' or '=').
 * Without KOP_STATS_FD everything here is a cheap no-op. Writes never block
 * the tool: a line that does not fit the pipe is dropped.
 */
void tool_metric_add(const char *name, const char *labels, double delta);	/* a counter */
void tool_metric_set(const char *name, const char *labels, double value);	/* a gauge */
/* rest_client_requests_total{code,method}; code 0 (no response) counts as "<error>", as client-go does. */
void tool_metric_request(const char *method, long code);
/*
 * Sends the values if any changed: at most every 200 ms unless force. Every
 * tool_metric_* call tries it, so a busy tool needs nothing more; one that is
 * about to wait calls tool_idle(), which sends what changed or shortens the
 * wait to when it may, so that its last counts are not held back while it
 * waits. tool_finish() forces. A send that fails but for a full socket (the
 * supervisor's end gone) stops the metrics for good.
 */
void tool_metrics_flush(int force);
/*
 * About to wait for input: the values that changed are sent (as
 * tool_metrics_flush() does, 200 ms apart), and the heap a burst of work left
 * free is given back to the system (glibc keeps it otherwise: kapply held 4 MB
 * after 300 applies), when there is enough of it. The heap is looked at once a second at most
 * (glibc's count walks every free chunk). Returns the wait the caller is about
 * to make (timeout_ms, < 0: none), shortened to when it wants to be called
 * again if it is too soon now: a burst that ended within a second of the last
 * look would be kept for good otherwise, and values held back until the next
 * burst. Not thread-safe: the caller holds what guards its tool_metric_* calls.
 */
int64_t tool_idle(int64_t timeout_ms);
/* The sooner of two waits in ms (-1: none). */
int64_t tool_sooner(int64_t a, int64_t b);
/*
 * Why the tool cannot do its work right now, in a sentence ("" or NULL: it
 * can), sent with the metrics as "note" so that the supervisor's /readyz can
 * say it (kwatch: a watch that cannot read its initial state).
 */
void tool_metric_note(const char *text);

#endif
