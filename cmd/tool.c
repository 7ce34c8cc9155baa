/* The tools' shared layer: logging, dying, common options, stdout checks,
 * finding a program directory. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
#include "jsonl.h"
#include "tool.h"
#include "banned.h"

const char *PROG = "iot-operator";
int log_level = LOG_INFO;
static int log_text;
struct tool_kube_opts tool_kube;

static const char *const level_names[] = { "error", "warn", "info", "debug", "trace" };

int log_enabled(int level)
{
	return level <= log_level;
}

static void vlog(int level, jv fields, const char *fmt, va_list ap)
{
	struct kop_buf msg = KOP_BUF_INIT;
	int e = errno;

	if (!log_enabled(level)) {
		jv_free(fields);
		return;
	}
	kop_buf_vaddf(&msg, fmt, ap);
	if (log_text) {
		struct kop_buf line = KOP_BUF_INIT;

		kop_buf_addf(&line, "%s: %s: %s", PROG, level_names[level], msg.buf);
		if (jv_get_kind(fields) == JV_KIND_OBJECT && jv_object_length(jv_copy(fields)) > 0) {
			jv s = jv_dump_string(jv_copy(fields), 0);

			kop_buf_addf(&line, " %s", jv_string_value(s));
			jv_free(s);
		}
		kop_buf_add(&line, "\n", 1);
		(void)kop_write_all(2, line.buf, line.len);
		kop_buf_release(&line);
	} else {
		char ts[40];
		jv o = jv_object();

		kop_time_micro(ts, sizeof(ts), kop_wall_ms() * 1000);
		o = jv_object_set(o, jv_string("time"), jv_string(ts));
		o = jv_object_set(o, jv_string("level"), jv_string(level_names[level]));
		o = jv_object_set(o, jv_string("prog"), jv_string(PROG));
		o = jv_object_set(o, jv_string("msg"), jv_string(msg.buf));
		if (jv_get_kind(fields) == JV_KIND_OBJECT)
			o = jv_object_merge(o, jv_copy(fields));
		{
			jv s = jv_dump_string(o, 0);
			struct kop_buf line = KOP_BUF_INIT;

			kop_buf_addf(&line, "%s\n", jv_string_value(s));
			(void)kop_write_all(2, line.buf, line.len);
			kop_buf_release(&line);
			jv_free(s);
		}
	}
	jv_free(fields);
	kop_buf_release(&msg);
	errno = e;
}

void tool_log(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(level, jv_null(), fmt, ap);
	va_end(ap);
}

void tool_logj(int level, jv fields, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(level, fields, fmt, ap);
	va_end(ap);
}

void die(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_ERROR, jv_null(), fmt, ap);	/* (the level says it: "error: fatal:" said it twice) */
	va_end(ap);
	exit(code);
}

void die_usage(const char *fmt, ...)
{
	struct kop_buf b = KOP_BUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	kop_buf_vaddf(&b, fmt, ap);
	va_end(ap);
	tool_log(LOG_ERROR, "usage: %s; see '%s --help'", b.buf, PROG);
	kop_buf_release(&b);
	exit(KOP_EXIT_PERM);
}

long tool_parse_duration_ms(const char *s)
{
	char *end;
	double v;
	const char *p = s;

	/* decimal digits, an optional fraction, a unit: not strtod's hex,
	 * exponents, infinities or leading blanks ("0x10", "1e3", " 5s") */
	if (!isdigit((unsigned char)*p))
		return -1;
	while (isdigit((unsigned char)*p))
		p++;
	if (*p == '.') {
		if (!isdigit((unsigned char)p[1]))
			return -1;
		for (p++; isdigit((unsigned char)*p); p++)
			;
	}
	errno = 0;
	v = strtod(s, &end);
	if (errno || end != p)
		return -1;
	if (!*end || !strcmp(end, "s"))
		v *= 1000;
	else if (!strcmp(end, "ms"))
		;
	else if (!strcmp(end, "m"))
		v *= 60000;
	else if (!strcmp(end, "h"))
		v *= 3600000;
	else
		return -1;
	if (v > 1e12)
		return -1;
	return (long)v;
}

static int parse_level(const char *s)
{
	size_t i;

	for (i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
		if (!strcmp(s, level_names[i]))
			return (int)i;
	if (!strcmp(s, "warning"))
		return LOG_WARN;
	return -1;
}

int tool_common_option(int c, const char *arg, const char *usage)
{
	switch (c) {
	case 'h':
		fputs(usage, stdout);
		exit(tool_finish(KOP_EXIT_OK));
	case 'v':
		if (log_level < LOG_TRACE)
			log_level++;
		return 1;
	case OPT_LOG_LEVEL: {
		int level = parse_level(arg);

		if (level < 0)
			die_usage("unknown log level '%s' (error, warn, info, debug, trace)", arg);
		log_level = level;
		return 1;
	}
	case OPT_LOG_FORMAT:
		if (!strcmp(arg, "text"))
			log_text = 1;
		else if (!strcmp(arg, "json"))
			log_text = 0;
		else
			die_usage("unknown log format '%s' (json, text)", arg);
		return 1;
	case OPT_KUBECONFIG:
		tool_kube.kubeconfig = arg;
		return 1;
	case OPT_CONTEXT:
		tool_kube.context = arg;
		return 1;
	case OPT_REQUEST_TIMEOUT:
		if ((tool_kube.request_timeout_ms = tool_parse_duration_ms(arg)) < 0)
			die_usage("invalid --request-timeout '%s'", arg);
		return 1;
	}
	return 0;
}

void tool_init(const char *prog, int argc, char **argv, int ignore_sigpipe)
{
	struct timeval tv;
	int fd;
	const char *env;

	(void)argc;
	(void)argv;
	PROG = prog;
	/* fds 0-2 must be open, or the first file we open would become stdout. */
	for (fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF && open("/dev/null", O_RDWR) != fd)
			exit(KOP_EXIT_TEMP);
	gettimeofday(&tv, NULL);
	srandom((unsigned)(tv.tv_sec ^ tv.tv_usec ^ (getpid() << 16)));
	log_text = isatty(2);
	opterr = 0;	/* tool_bad_option says it, as a log line */
	if ((env = getenv("KOP_LOG_FORMAT")) && *env) {
		if (strcmp(env, "text") && strcmp(env, "json"))
			log_warn("KOP_LOG_FORMAT: unknown log format '%s' (json, text); using %s", env,
				 log_text ? "text" : "json");
		else
			log_text = !strcmp(env, "text");
	}
	if ((env = getenv("KOP_LOG_LEVEL")) && *env) {
		int level = parse_level(env);

		if (level < 0)
			log_warn("KOP_LOG_LEVEL: unknown log level '%s' (error, warn, info, debug, trace); using info",
				 env);
		else
			log_level = level;
	}
	if (ignore_sigpipe)
		signal(SIGPIPE, SIG_IGN);
}

void tool_bad_option(char **argv, const char *optstring)
{
	const char *arg = optind > 0 ? argv[optind - 1] : "";

	if (optopt > 0 && optopt < 256 && optopt != ':' && strchr(optstring, optopt))
		die_usage("option '-%c' needs an argument", optopt);
	if (optopt > 0 && optopt < 256)
		die_usage("unknown option '-%c'", optopt);
	if (optopt >= 256)
		die_usage("option '%s' needs an argument", arg);
	die_usage("unknown option '%s'", arg);
}

void tool_stdout_failed(void)
{
	if (errno == EPIPE) {
		/* The reader went away: end as quietly as SIGPIPE would. */
		signal(SIGPIPE, SIG_DFL);
		raise(SIGPIPE);
		exit(KOP_EXIT_SIGNAL + SIGPIPE);
	}
	die(KOP_EXIT_TEMP, "unable to write to stdout: %s", strerror(errno));
}

void tool_write_line(const char *text, size_t len)
{
	if (kop_jsonl_write_text(stdout, text, len) < 0)
		tool_stdout_failed();
}

int tool_finish(int code)
{
	tool_metrics_flush(1);
	if (fflush(stdout) == EOF || ferror(stdout))
		tool_stdout_failed();
	if (fclose(stdout) == EOF)
		tool_stdout_failed();
	return code;
}

/* ---- metrics for the supervisor (tool.h) ---------------------------------- */

#define METRICS_GAP_MS 200	/* the least time between two lines, but at the end */

static struct {
	int state;		/* 0 unknown, 1 enabled, -1 disabled */
	int fd;
	int dirty, broken;
	int64_t last_ms;
	jv series;		/* "name{labels}" -> {"name","type","labels","value"} */
	char *note;		/* tool_metric_note(), or NULL */
} metrics;

static int metrics_enabled(void)
{
	const char *env;
	char *end;
	long fd;

	if (metrics.state)
		return metrics.state > 0;
	metrics.state = -1;
	if (!(env = getenv("KOP_STATS_FD")) || !*env)
		return 0;
	fd = strtol(env, &end, 10);
	if (*end || fd < 3 || fd > 1023 || fcntl((int)fd, F_GETFD) < 0)
		return 0;
	/* The stats pipe stays ours: not inherited by exec plugins, never blocking. */
	(void)fcntl((int)fd, F_SETFD, FD_CLOEXEC);
	(void)fcntl((int)fd, F_SETFL, fcntl((int)fd, F_GETFL) | O_NONBLOCK);
	metrics.fd = (int)fd;
	metrics.series = jv_object();
	metrics.state = 1;
	return 1;
}

static jv metric_labels(const char *labels)
{
	jv o = jv_object();
	const char *p = labels;

	while (p && *p) {
		const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p);
		const char *eq = memchr(p, '=', (size_t)(end - p));

		if (eq && eq > p)
			o = jv_object_set(o, jv_string_sized(p, (int)(eq - p)),
					  jv_string_sized(eq + 1, (int)(end - eq - 1)));
		p = comma ? comma + 1 : end;
	}
	return o;
}

static void metric_update(const char *name, const char *labels, const char *type, double v, int add)
{
	struct kop_buf key = KOP_BUF_INIT;
	jv cur;

	if (!metrics_enabled())
		return;
	kop_buf_addf(&key, "%s{%s}", name, labels ? labels : "");
	cur = jv_object_get(jv_copy(metrics.series), jv_string(key.buf));
	if (jv_get_kind(cur) == JV_KIND_OBJECT) {
		jv old = jv_object_get(jv_copy(cur), jv_string("value"));
		double was = jv_get_kind(old) == JV_KIND_NUMBER ? jv_number_value(old) : 0;

		jv_free(old);
		if (add)
			v += was;
		if (v == was) {
			/* (nothing new to send: a gauge set again as it was does not wake an idle tool) */
			jv_free(cur);
			kop_buf_release(&key);
			return;
		}
	} else {
		jv_free(cur);
		cur = jv_object();
		cur = jv_object_set(cur, jv_string("name"), jv_string(name));
		cur = jv_object_set(cur, jv_string("type"), jv_string(type));
		cur = jv_object_set(cur, jv_string("labels"), metric_labels(labels));
	}
	cur = jv_object_set(cur, jv_string("value"), jv_number(v));
	metrics.series = jv_object_set(metrics.series, jv_string(key.buf), cur);
	metrics.dirty = 1;
	kop_buf_release(&key);
	tool_metrics_flush(0);
}

void tool_metric_add(const char *name, const char *labels, double delta)
{
	metric_update(name, labels, "counter", delta, 1);
}

void tool_metric_set(const char *name, const char *labels, double value)
{
	metric_update(name, labels, "gauge", value, 0);
}

void tool_metric_request(const char *method, long code)
{
	char labels[64];

	if (code > 0)
		snprintf(labels, sizeof(labels), "code=%ld,method=%s", code, method);
	else
		snprintf(labels, sizeof(labels), "code=<error>,method=%s", method);
	tool_metric_add("rest_client_requests_total", labels, 1);
}

void tool_metric_note(const char *text)
{
	if (!metrics_enabled())
		return;
	if (!text || !*text)
		text = NULL;
	if (!text ? !metrics.note : metrics.note && !strcmp(text, metrics.note))
		return;
	free(metrics.note);
	metrics.note = text ? kop_strdup(text) : NULL;
	metrics.dirty = 1;
	tool_metrics_flush(0);
}

int64_t tool_sooner(int64_t a, int64_t b)
{
	return a < 0 ? b : b < 0 || a < b ? a : b;
}

/*
 * About to wait: the values that changed go out now if the last went 200 ms
 * ago, or the wait ends when they may (and again then while the socket is
 * full). (A busy tool waits for its input many times a second: sending them
 * at each wait took 3% of ireconcile's CPU while instances converge, and the
 * supervisor spent half of its own parsing them.)
 */
static int64_t metrics_idle(int64_t now, int64_t timeout_ms)
{
	if (metrics.state <= 0 || !metrics.dirty)
		return timeout_ms;
	if (now - metrics.last_ms >= METRICS_GAP_MS) {
		tool_metrics_flush(0);
		if (!metrics.dirty)
			return timeout_ms;
		return tool_sooner(timeout_ms, METRICS_GAP_MS);	/* (the pipe was full: again then) */
	}
	return tool_sooner(timeout_ms, METRICS_GAP_MS - (now - metrics.last_ms));
}

int64_t tool_idle(int64_t timeout_ms)
{
	static int64_t last;		/* when the heap was last looked at */
	static size_t trimmed_at;	/* the heap in use when it was last trimmed */
	int64_t now = kop_mono_ms();
	struct mallinfo2 mi;

	timeout_ms = metrics_idle(now, timeout_ms);
	/* mallinfo2 walks every free chunk (5% of ireconcile's CPU when asked at
	 * each wait): looked at once a second at most, and a second after a burst */
	if (now - last < 1000) {
		int64_t due = 1000 - (now - last);

		return tool_sooner(timeout_ms, due);
	}
	last = now;
	mi = mallinfo2();
	/* (what was free at the last trim stays counted free: not trimmed again while nothing moved) */
	if (mi.fordblks < 256 * 1024 || mi.uordblks == trimmed_at)
		return timeout_ms;
	malloc_trim(0);
	trimmed_at = mallinfo2().uordblks;
	return timeout_ms;
}

void tool_metrics_flush(int force)
{
	struct kop_buf line = KOP_BUF_INIT;
	jv all, dump;
	ssize_t n;
	size_t off = 0;
	int64_t now;

	if (!metrics_enabled() || !metrics.dirty)
		return;
	now = kop_mono_ms();
	if (!force && now - metrics.last_ms < METRICS_GAP_MS)
		return;
	all = jv_array();
	jv_object_foreach(metrics.series, k, v) {
		all = jv_array_append(all, v);
		jv_free(k);
	}
	dump = jv_dump_string(jv_object_set(JV_OBJECT(jv_string("note"), jv_string(metrics.note ? metrics.note : "")),
					    jv_string("metrics"), all),
			      0);
	/* After a line was cut short, a newline first ends the garbled line for the reader. */
	kop_buf_addf(&line, "%s%s\n", metrics.broken ? "\n" : "", jv_string_value(dump));
	jv_free(dump);
	while (off < line.len) {
		/* A socket (what iot-operator gives) never raises SIGPIPE; a pipe works too. */
		n = send(metrics.fd, line.buf + off, line.len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == ENOTSOCK)
			n = write(metrics.fd, line.buf + off, line.len - off);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
			/* (the supervisor's end is gone: nothing will read them, nor wait for them) */
			metrics.state = -1;
			metrics.dirty = 0;
		}
		break;
	}
	if (off == line.len) {
		metrics.dirty = metrics.broken = 0;
		metrics.last_ms = now;
	} else if (off > 0) {
		metrics.broken = 1;
	}
	kop_buf_release(&line);
}

char *tool_user_agent(const char *component)
{
	const char *pod = getenv("POD_NAME");
	struct kop_buf b = KOP_BUF_INIT;

	kop_buf_addf(&b, "iot-operator/%s", component);
	if (pod && *pod) {
		if (kop_dns1123(pod, 0))
			kop_buf_addf(&b, " (%s)", pod);
		else
			log_warn("POD_NAME '%s' is not a DNS-1123 subdomain: left out of the user agent", pod);
	}
	return kop_buf_detach(&b, NULL);
}

char *tool_exe_path(void)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);

	if (n <= 0)
		return NULL;
	buf[n] = 0;
	return kop_strdup(buf);
}

char *tool_exe_dir(void)
{
	char *path = tool_exe_path(), *slash;

	if (!path || !(slash = strrchr(path, '/'))) {
		free(path);
		return NULL;
	}
	if (slash == path)
		slash++;	/* (the root itself) */
	*slash = 0;
	return path;
}

static int is_dir(const char *path)
{
	struct stat s;

	return !stat(path, &s) && S_ISDIR(s.st_mode);
}

char *tool_find_program(const char *dir)
{
	static const char *const up[] = { "/../share/iot-operator/", "/../", "/../../../" };
	struct kop_buf b = KOP_BUF_INIT;
	char *exe;
	size_t i;
	int pass;

	if (is_dir(dir) || *dir == '/')
		return is_dir(dir) ? kop_strdup(dir) : NULL;
	exe = tool_exe_dir();
	for (pass = 0; pass < 2; pass++) {
		if (pass && strchr(dir, '/'))
			break;
		for (i = 0; exe && i < sizeof(up) / sizeof(up[0]); i++) {
			kop_buf_reset(&b);
			kop_buf_addf(&b, "%s%s%s%s", exe, up[i], pass ? "pipeline/" : "", dir);
			if (is_dir(b.buf))
				goto found;
		}
		if (pass) {
			kop_buf_reset(&b);
			kop_buf_addf(&b, "pipeline/%s", dir);
			if (is_dir(b.buf))
				goto found;
		}
	}
	free(exe);
	kop_buf_release(&b);
	return NULL;
found:
	free(exe);
	return kop_buf_detach(&b, NULL);
}

/* (tool.h; here, after the metrics it forgets) */
void tool_reset(void)
{
	PROG = "iot-operator";
	log_level = LOG_INFO;
	log_text = 0;
	memset(&tool_kube, 0, sizeof(tool_kube));
	/* (the values the process had are its parent's to free: forgotten, not freed) */
	memset(&metrics, 0, sizeof(metrics));
	optind = 0;	/* (glibc: 0 starts getopt afresh, its state between calls included) */
	opterr = 1;
}
