/*
 * Spawning: a stage started with its fds in place, in its own process
 * group, killed if the supervisor dies: the one in --stage-dir when it is
 * there, else the built-in one (spawner.c), else its executable beside ours
 * or on PATH. Which stages to start, and how they are wired, is pipeline.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "iot-operator.h"
#include "banned.h"

extern char **environ;

/* Moves fd to 10 or above, close-on-exec, so that the dup2s of a spawn never collide with it. */
int fd_high(int fd)
{
	int n;

	if (fd < 0)
		return -1;
	n = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	close(fd);
	return n;
}

/* Both ends of a pair just made moved to 10 or above: 0, or -1 with both closed. */
static int pair_high(int p[2])
{
	p[0] = fd_high(p[0]);
	p[1] = fd_high(p[1]);
	if (p[0] >= 0 && p[1] >= 0)
		return 0;
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	return -1;
}

int pipe_high(int p[2])
{
	return pipe2(p, O_CLOEXEC) < 0 ? -1 : pair_high(p);
}

int socketpair_high(int type, int sv[2])
{
	return socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv) < 0 ? -1 : pair_high(sv);
}

void set_nonblock(int fd)
{
	(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

void close_fd(int *fd)
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

/* A stage's executable in --stage-dir/KOP_STAGE_DIR. Caller frees; NULL if none there. */
static char *stage_dir_has(const char *name)
{
	struct kop_buf b = KOP_BUF_INIT;

	if (sup.stage_dir) {
		kop_buf_addf(&b, "%s/%s", sup.stage_dir, name);
		if (is_exec(b.buf))
			return kop_buf_detach(&b, NULL);
	}
	kop_buf_release(&b);
	return NULL;
}

int stage_dir_has_all(void)
{
	size_t i;
	char *path;

	for (i = 0; i < sizeof(stage_names) / sizeof(stage_names[0]); i++) {
		if (!(path = stage_dir_has(stage_names[i])))
			return 0;
		free(path);
	}
	return 1;
}

/* A stage's executable beside our own executable, then on PATH. Caller frees. */
static char *find_stage(const char *name)
{
	struct kop_buf b = KOP_BUF_INIT;
	const char *path = getenv("PATH"), *p;

	if (sup.exe_dir) {
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

/*
 * In a child about to become a stage (exec'd, or built in: spawner.c), all
 * async-signal-safe. child_start: its own process group (a terminal's ^C
 * reaches only us, a teardown reaches its children), SIGKILL when the
 * supervisor dies; 0, or -1 if it died already. child_fds: fds[0..4] in
 * place (-1: /dev/null for stdin, 1 and 2 as inherited, 3 and 4 closed), our
 * signals back to their defaults and none blocked, as a fresh process has
 * them; 0, or -1 when an fd could not be moved.
 */
int child_start(pid_t parent)
{
	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	return getppid() == parent ? 0 : -1;
}

int child_fds(const int fds[5])
{
	static const int dfl[] = { SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD };
	struct sigaction sa;
	sigset_t none;
	int fd[5], i, null;

	/* Above 4 first, so that no dup2 below lands on one not yet placed. */
	for (i = 0; i < 5; i++)
		if ((fd[i] = fds[i]) >= 0 && fd[i] < 5 && (fd[i] = fcntl(fds[i], F_DUPFD, 5)) < 0)
			return -1;
	if (fd[0] < 0 && (null = open("/dev/null", O_RDONLY)) >= 0) {
		dup2(null, 0);
		if (null)
			close(null);
	}
	for (i = 0; i < 5; i++) {
		if (fd[i] >= 0)
			dup2(fd[i], i);
		else if (i > 2)
			close(i);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (i = 0; i < (int)(sizeof(dfl) / sizeof(dfl[0])); i++)
		sigaction(dfl[i], &sa, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	return 0;
}

/*
 * Starts path with stdin/stdout/stderr/fd 3/fd 4 as given (-1: /dev/null for
 * stdin, inherited stdout and stderr, none). fork+exec rather than posix_spawn for one thing
 * posix_spawn cannot do: the stage gets SIGKILL when the supervisor dies
 * (PR_SET_PDEATHSIG), so that a leader killed with -9 leaves no writer behind.
 * Between fork and exec the child calls only async-signal-safe functions.
 */
static pid_t spawn(const char *path, char *const argv[], int in, int out, int errfd, int fd3, int fd4, char *err)
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
		if (child_start(parent) || child_fds((const int[5]){ in, out, errfd, fd3, fd4 }))
			_exit(KOP_EXIT_TEMP);
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

void argv_add(jv *argv, const char *s)
{
	*argv = jv_array_append(*argv, jv_string(s));
}

void argv_kube(jv *argv)
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

/*
 * Spawns a stage from a jv array of strings (consumed): the one in
 * --stage-dir, else the built-in one, else its executable beside ours or on PATH.
 */
pid_t spawn_stage(const char *name, jv args, int in, int out, int errfd, int fd3, int fd4, char *err)
{
	char *path = stage_dir_has(name);
	char **argv;
	int i, n = jv_array_length(jv_copy(args)), builtin = 0;
	pid_t pid = 0;

	argv = kop_calloc((size_t)n + 2, sizeof(*argv));
	argv[0] = kop_strdup(name);
	for (i = 0; i < n; i++) {
		jv s = jv_array_get(jv_copy(args), i);

		argv[i + 1] = kop_strdup(jv_string_value(s));
		jv_free(s);
	}
	jv_free(args);
	if (!path && spawner_has(name))
		builtin = (pid = spawner_spawn(argv, (const int[5]){ in, out, errfd, fd3, fd4 })) > 0;
	if (!builtin) {
		if (path || (path = find_stage(name))) {
			free(argv[0]);
			argv[0] = path;
			pid = spawn(path, argv, in, out, errfd, fd3, fd4, err);
		} else {
			pid = kop_error(err, "unable to find '%s' (in --stage-dir, beside iot-operator, on PATH)", name);
		}
	}
	if (pid > 0) {
		struct kop_buf cmd = KOP_BUF_INIT;

		for (i = 0; argv[i]; i++)
			kop_buf_addf(&cmd, "%s%s", i ? " " : "", argv[i]);
		tool_logj(LOG_DEBUG, JV_OBJECT(jv_string("pid"), jv_number(pid), jv_string("cmd"), jv_string(cmd.buf),
					       jv_string("builtin"), jv_bool(builtin)),
			  "started stage '%s'", name);
		kop_buf_release(&cmd);
	}
	for (i = 0; argv[i]; i++)
		free(argv[i]);
	free(argv);
	return pid;
}
