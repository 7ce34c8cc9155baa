/*
 * Children and signals: stages reaped and the one that ended the pipeline
 * blamed; SIGTERM and SIGINT (drain, then kill), SIGCHLD, through a signalfd.
 * Tearing down and restarting is pipeline.c's.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>
#include "iot-operator.h"
#include "banned.h"

char *describe_status(int status)
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

/* The stage of index i ended the pipeline: restart it all. */
void blame(size_t i)
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
			if (s->retired && WIFEXITED(status) && !WEXITSTATUS(status)) {
				/* (stopped for having nothing left to read: merger.c) */
				tool_logj(LOG_DEBUG, JV_OBJECT(jv_string("pid"), jv_number(pid)), "kwatch stopped");
			} else if (sup.running && !sup.tearing_down && !sup.culprit_seen) {
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
		if (!ours && !spawner_reaped(pid, status))
			tool_logj(LOG_DEBUG, JV_OBJECT(jv_string("pid"), jv_number(pid)), "reaped an orphaned process");
	}
	publish_pids();
}

int setup_signals(void)
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

void on_signal(int sfd)
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
		} else if (si.ssi_signo == SIGHUP) {
			program_recheck();
		} else {
			log_info("ignoring %s", strsignal((int)si.ssi_signo));
		}
	}
}
