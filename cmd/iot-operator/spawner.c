/*
 * The spawner: the built-in stages started without exec. kwatch, ireconcile,
 * kapply and kstatus are linked into iot-operator as well (the Makefile's
 * builtin objects, each tool's main renamed NAME_main); a process forked
 * from the supervisor at setup, before any thread, starts them by forking
 * itself. A stage so started shares with the supervisor and with the other
 * stages the pages that loading and setting up the libraries wrote (their
 * relocations, OpenSSL's and GnuTLS's tables), which exec would make private
 * to each: about 1 MB a process (docs/performance.md).
 *
 * The fork is a clone with CLONE_PARENT: the stage is the supervisor's
 * child, as an exec'd one is, so that reaping, process groups and the
 * parent-death signal stay where they were (children.c, spawn.c). The
 * spawner itself has no thread, no child and no fd but stdin, stdout, stderr
 * and its socket, so what it forks is as clean as a process just started.
 *
 * Requests come on a SOCK_SEQPACKET socket, one message each: a header, the
 * stage's arguments (the first its name) as NUL-terminated strings, and as
 * SCM_RIGHTS the fds it gets (stdin, stdout, stderr, fd 3, fd 4: those the
 * header names) and the read end of a pipe the supervisor holds the other end
 * of. The answer is its pid, or -errno. The stage waits on that pipe before
 * anything else: it runs once the supervisor, having its pid, writes a byte,
 * and exits at once if the supervisor closes the pipe instead. So a stage
 * whose start the supervisor did not hear of never runs. The environment is
 * the spawner's: the supervisor's once its setup is done, as it stays.
 *
 * Whatever goes wrong, the stage is run from its executable instead
 * (spawn.c), and the warning says why: for that start alone when the request
 * is too long for one message or the system is short of processes or
 * memory; for every start from then on when the spawner is gone (killed, not
 * answering) or refused a clone for any other reason (a seccomp profile, say,
 * would refuse it every time). Nothing depends on the spawner but memory.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "iot-operator.h"
#include "banned.h"

#define NFDS 5			/* stdin, stdout, stderr, FEEDBACK_FD, STATS_FD */
#define GO NFDS			/* got[GO]: the pipe the stage waits on */
/* The arguments of one request: well within a Unix socket's default send buffer (208 KiB), which bounds a message. */
#define REQ_MAX (128 * 1024)
#define ANSWER_MS 2000		/* a spawner that does not answer within this is taken for gone (the main loop waits meanwhile) */

struct req {
	uint32_t nargs;
	uint32_t fds;		/* bit i: fd i is in the message (bit GO always) */
};

static const struct builtin {
	const char *name;
	int (*main)(int argc, char **argv);
} builtins[] = {
	{ "kwatch", kwatch_main },
	{ "ireconcile", ireconcile_main },
	{ "kapply", kapply_main },
	{ "kstatus", kstatus_main },
};

static struct {
	pid_t pid;		/* the spawner (0: none) */
	int fd;			/* our end of its socket */
	char *args;		/* our own arguments' memory, /proc/PID/cmdline: a stage writes its own there */
	size_t args_len;
	char **argv;		/* in a stage: its arguments, which live as long as it does (as exec's would) */
} sp = { 0, -1, NULL, 0, NULL };

static const struct builtin *builtin_named(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
		if (!strcmp(builtins[i].name, name))
			return &builtins[i];
	return NULL;
}

/* Closes every fd from lo up: close_range, or one by one on a kernel before 5.9. */
static void close_from(int lo)
{
	long max = sysconf(_SC_OPEN_MAX), fd;

	if (!close_range((unsigned)lo, ~0U, 0))
		return;
	for (fd = lo; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
		close((int)fd);
}

/* In the stage, before its main: /proc/PID/cmdline (ps, pgrep -f) shows its arguments, as far as they fit. */
static void set_cmdline(char **argv)
{
	size_t off = 0, i, n;

	if (!sp.args || sp.args_len < 2)
		return;
	memset(sp.args, 0, sp.args_len);
	for (i = 0; argv[i] && off + 1 < sp.args_len; i++) {
		n = strlen(argv[i]);
		if (n > sp.args_len - 1 - off)
			n = sp.args_len - 1 - off;
		memcpy(sp.args + off, argv[i], n);
		off += n + 1;
	}
}

/*
 * The stage, in the process just cloned: once the supervisor says go, its
 * fds, signals and name as an exec would have left them, then its main.
 * Never returns.
 */
static noreturn void stage_run(const struct builtin *b, char **argv, int got[NFDS + 1], pid_t parent)
{
	ssize_t n;
	char go;
	int i;

	if (child_start(parent))
		_exit(KOP_EXIT_TEMP);
	while ((n = read(got[GO], &go, 1)) < 0 && errno == EINTR)
		;
	if (n != 1)
		_exit(KOP_EXIT_TEMP);	/* (the supervisor did not hear of us, and said so: it runs another) */
	if (child_fds(got)) {
		log_error("unable to start the built-in '%s': %s", b->name, strerror(errno));
		_exit(KOP_EXIT_TEMP);
	}
	close_from(NFDS);	/* (the spawner's socket, the fds as received, the pipe) */
	prctl(PR_SET_NAME, b->name);
	sp.argv = argv;
	set_cmdline(argv);
	tool_reset();
	for (i = 0; argv[i]; i++)
		;
	exit(b->main(i, argv));
}

/* The strings of a request: n of them from *p, NUL-terminated, into v (n + 1 slots). 0, or -1 if short. */
static int take_strings(char **p, char *end, uint32_t n, char **v)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		char *nul = memchr(*p, '\0', (size_t)(end - *p));

		if (!nul)
			return -1;
		v[i] = *p;
		*p = nul + 1;
	}
	v[n] = NULL;
	return 0;
}

/* One request: the stage started, or -errno. The fds received are closed by the caller (the stage has its own). */
static int32_t serve(struct req h, char *buf, ssize_t len, int got[NFDS + 1], pid_t parent)
{
	char *p = buf + sizeof(h), **argv;
	const struct builtin *b;
	int32_t answer;
	long pid;

	if (!h.nargs || h.nargs > REQ_MAX / 2 || got[GO] < 0)	/* (h is zero when the message was shorter) */
		return -EINVAL;
	if (!(argv = calloc((size_t)h.nargs + 1, sizeof(*argv))))
		return -ENOMEM;
	if (take_strings(&p, buf + len, h.nargs, argv)) {
		answer = -EINVAL;
	} else if (!(b = builtin_named(argv[0]))) {
		answer = -ENOENT;
	} else {
		/* (a raw clone: glibc's has no CLONE_PARENT; no thread here holds a lock the stage could need) */
		pid = syscall(SYS_clone, (unsigned long)(CLONE_PARENT | SIGCHLD), NULL, NULL, NULL, 0UL);
		if (!pid)
			stage_run(b, argv, got, parent);
		answer = pid < 0 ? -errno : (int32_t)pid;
	}
	free(argv);
	return answer;
}

/* The spawner's life: requests until the supervisor closes its end (or dies: SIGKILL then). */
static noreturn void spawner_loop(pid_t parent)
{
	static char buf[REQ_MAX];
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE((NFDS + 1) * sizeof(int))];
	} c;

	for (;;) {
		struct iovec iov = { buf, sizeof(buf) };
		struct msghdr m = { 0 };
		struct cmsghdr *cm;
		int got[NFDS + 1], i, k = 0;
		int32_t answer;
		ssize_t n;
		struct req h = { 0, 0 };

		m.msg_iov = &iov;
		m.msg_iovlen = 1;
		m.msg_control = c.space;
		m.msg_controllen = sizeof(c.space);
		n = recvmsg(sp.fd, &m, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(n ? KOP_EXIT_TEMP : KOP_EXIT_OK);
		for (i = 0; i <= NFDS; i++)
			got[i] = -1;
		if (n >= (ssize_t)sizeof(h))
			memcpy(&h, buf, sizeof(h));
		cm = CMSG_FIRSTHDR(&m);
		for (i = 0; i <= NFDS; i++) {
			if (!(h.fds & (1u << i)))
				continue;
			if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
			    cm->cmsg_len >= CMSG_LEN((size_t)(k + 1) * sizeof(int)))
				memcpy(&got[i], CMSG_DATA(cm) + (size_t)k * sizeof(int), sizeof(int));
			k++;
		}
		answer = (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ? -E2BIG : serve(h, buf, n, got, parent);
		/* (every fd that came, those the header did not name too) */
		for (cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
			if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
				continue;
			for (i = 0; (size_t)i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
				int fd;

				memcpy(&fd, CMSG_DATA(cm) + (size_t)i * sizeof(int), sizeof(int));
				close(fd);
			}
		}
		while (send(sp.fd, &answer, sizeof(answer), MSG_NOSIGNAL) < 0 && errno == EINTR)
			;
	}
}

int spawner_start(int argc, char **argv)
{
	pid_t parent = getpid();
	int sv[2], i;

	/* Our arguments, as far as they lie end to end as the kernel laid them out: room for a stage's. */
	if (argc > 0 && argv[0]) {
		for (i = 1; i < argc && argv[i] == argv[i - 1] + strlen(argv[i - 1]) + 1; i++)
			;
		sp.args = argv[0];
		sp.args_len = (size_t)(argv[i - 1] + strlen(argv[i - 1]) + 1 - argv[0]);
	}
	if (socketpair_high(SOCK_SEQPACKET, sv) < 0)
		return -1;
	if ((sp.pid = fork()) < 0) {
		close(sv[0]);
		close(sv[1]);
		sp.pid = 0;
		return -1;
	}
	if (!sp.pid) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(KOP_EXIT_TEMP);
		prctl(PR_SET_NAME, "iot-spawner");
		/* Its socket on fd 3, nothing of ours above it. */
		if ((sp.fd = dup2(sv[1], 3)) < 0)
			_exit(KOP_EXIT_TEMP);
		close_from(4);
		spawner_loop(parent);
	}
	close(sv[1]);
	sp.fd = sv[0];
	tool_logj(LOG_DEBUG, JV_OBJECT(jv_string("pid"), jv_number(sp.pid)), "spawner started");
	return 0;
}

/* It is gone, or cannot be trusted to answer: the stages are exec'd from now on. */
static void spawner_lost(const char *why)
{
	log_warn("the spawner %s: stages are started from their executables from now on", why);
	close_fd(&sp.fd);
	if (sp.pid > 0)
		kill(sp.pid, SIGKILL);	/* (reaped as an orphan, children.c) */
	sp.pid = 0;
}

int spawner_reaped(pid_t pid, int status)
{
	char *how;

	if (!sp.pid || pid != sp.pid)
		return 0;
	how = describe_status(status);
	sp.pid = 0;
	spawner_lost(how);
	free(how);
	return 1;
}

int spawner_has(const char *name)
{
	return sp.pid > 0 && builtin_named(name) != NULL;
}

/* Sends the request: 0, or -1 with errno. */
static int ask(const struct kop_buf *b, const int *fds, int k)
{
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE((NFDS + 1) * sizeof(int))];
	} c;
	struct msghdr m = { 0 };
	struct iovec iov = { b->buf, b->len };
	ssize_t n;

	memset(&c, 0, sizeof(c));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = c.space;
	m.msg_controllen = CMSG_SPACE((size_t)k * sizeof(int));
	c.h.cmsg_level = SOL_SOCKET;
	c.h.cmsg_type = SCM_RIGHTS;
	c.h.cmsg_len = CMSG_LEN((size_t)k * sizeof(int));
	memcpy(CMSG_DATA(&c.h), fds, (size_t)k * sizeof(int));
	while ((n = sendmsg(sp.fd, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	return n < 0 ? -1 : 0;
}

/* The answer: a pid, -errno, or 0 when none came within ANSWER_MS (or the spawner ended). */
static int32_t answer(void)
{
	struct pollfd pfd = { sp.fd, POLLIN, 0 };
	int32_t a;
	ssize_t n = -1;
	int r;

	while ((r = poll(&pfd, 1, ANSWER_MS)) < 0 && errno == EINTR)
		;
	while (r > 0 && (n = recv(sp.fd, &a, sizeof(a), 0)) < 0 && errno == EINTR)
		;
	return n == (ssize_t)sizeof(a) && a ? a : 0;
}

pid_t spawner_spawn(char *const argv[], const int fds[NFDS])
{
	static int long_said;
	struct kop_buf b = KOP_BUF_INIT;
	struct req h = { 0, 0 };
	char why[KOP_ERRLEN];
	int send_fds[NFDS + 1], go[2], k = 0, i;
	int32_t a = 0;

	kop_buf_add(&b, (const char *)&h, sizeof(h));
	for (i = 0; argv[i]; i++, h.nargs++)
		kop_buf_add(&b, argv[i], strlen(argv[i]) + 1);
	if (b.len > REQ_MAX) {
		if (!long_said++)
			log_warn("the arguments of '%s' exceed %d bytes, more than the spawner takes: it is started "
				 "from its executable", argv[0], REQ_MAX);
		kop_buf_release(&b);
		return 0;
	}
	if (pipe_high(go) < 0) {
		log_warn("unable to start the built-in '%s' (a pipe: %s): it is started from its executable", argv[0],
			 strerror(errno));
		kop_buf_release(&b);
		return 0;
	}
	for (i = 0; i < NFDS; i++)
		if (fds[i] >= 0) {
			h.fds |= 1u << i;
			send_fds[k++] = fds[i];
		}
	h.fds |= 1u << GO;
	send_fds[k++] = go[0];
	memcpy(b.buf, &h, sizeof(h));
	if (ask(&b, send_fds, k) < 0) {
		snprintf(why, sizeof(why), "cannot be written to (%s) to start '%s'", strerror(errno), argv[0]);
		spawner_lost(why);
	} else if (!(a = answer())) {
		snprintf(why, sizeof(why), "did not answer when asked to start '%s'", argv[0]);
		spawner_lost(why);
	} else if (a == -EAGAIN || a == -ENOMEM) {
		log_warn("the spawner cannot start '%s' now (%s): it is started from its executable", argv[0],
			 strerror((int)-a));
	} else if (a < 0) {
		snprintf(why, sizeof(why), "cannot start '%s' (%s)", argv[0], strerror((int)-a));
		spawner_lost(why);
	}
	kop_buf_release(&b);
	close(go[0]);
	if (a > 0) {
		/* Its group before it runs (it sets it itself too), against a kill that would come first. */
		setpgid(a, a);
		/* It runs once it reads this byte; a stage we do not know of reads the pipe's end and exits. */
		if (write(go[1], "", 1) != 1)
			a = 0;
	}
	close(go[1]);
	return a > 0 ? (pid_t)a : 0;
}
