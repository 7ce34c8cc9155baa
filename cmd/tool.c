/* The tools' shared layer: logging, dying, common options, stdout checks. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
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

static void vlog(int level, jv fields, const char *prefix, const char *fmt, va_list ap)
{
	struct kop_buf msg = KOP_BUF_INIT;
	int e = errno;

	if (!log_enabled(level)) {
		jv_free(fields);
		return;
	}
	if (prefix)
		kop_buf_adds(&msg, prefix);
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
	vlog(level, jv_null(), NULL, fmt, ap);
	va_end(ap);
}

void tool_logj(int level, jv fields, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(level, fields, NULL, fmt, ap);
	va_end(ap);
}

void die(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_ERROR, jv_null(), "fatal: ", fmt, ap);
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

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v < 0)
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
	case OPT_LOG_LEVEL:
		if ((log_level = parse_level(arg)) < 0)
			die_usage("unknown log level '%s' (error, warn, info, debug, trace)", arg);
		return 1;
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
	if ((env = getenv("KOP_LOG_FORMAT")) && *env)
		log_text = !strcmp(env, "text");
	if ((env = getenv("KOP_LOG_LEVEL")) && *env && parse_level(env) >= 0)
		log_level = parse_level(env);
	if (ignore_sigpipe)
		signal(SIGPIPE, SIG_IGN);
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

int tool_finish(int code)
{
	if (fflush(stdout) == EOF || ferror(stdout))
		tool_stdout_failed();
	if (fclose(stdout) == EOF)
		tool_stdout_failed();
	return code;
}
