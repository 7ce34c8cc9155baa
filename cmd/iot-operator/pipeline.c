/*
 * The pipeline: kwatch's watches asked of the program, the stages of a
 * generation started and wired, torn down (drained, terminated or killed)
 * and restarted after a backoff. Which stage is blamed when one ends is
 * children.c's; kwatch's lines are merger.c's.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "iot-operator.h"
#include "jsonl.h"
#include "shard.h"
#include "banned.h"

/*
 * The check's stderr: each whole line (the last one too, at the end) passed
 * on to ours as it is, and the last error line kept in last as
 * "ireconcile: MSG" (its "msg" when JSON, the text after "ireconcile: error: "
 * when text).
 */
static void relay_check_err(struct kop_buf *b, int end, char *last, size_t n)
{
	static const char text_prefix[] = "ireconcile: error: ";
	size_t used = 0;

	while (used < b->len) {
		char *line = b->buf + used, *nl = b->len > used ? memchr(line, '\n', b->len - used) : NULL;
		size_t len = nl ? (size_t)(nl - line) : b->len - used;

		if (!nl && (!end || !len))
			break;
		(void)kop_write_all(2, line, len);
		(void)kop_write_all(2, "\n", 1);
		if (len > sizeof(text_prefix) - 1 && !strncmp(line, text_prefix, sizeof(text_prefix) - 1)) {
			snprintf(last, n, "ireconcile: %.*s", (int)(len - (sizeof(text_prefix) - 1)),
				 line + sizeof(text_prefix) - 1);
		} else if (len && line[0] == '{') {
			jv o = jv_parse_sized(line, (int)len);
			const char *level = kop_json_cstr(o, "level"), *msg = kop_json_cstr(o, "msg");

			if (level && msg && !strcmp(level, "error"))
				snprintf(last, n, "ireconcile: %s", msg);
			jv_free(o);
		}
		used += len + (nl ? 1 : 0);
	}
	kop_buf_drop(b, used);
}

/*
 * `ireconcile --print-watches PROGRAM` as kwatch's arguments: one kwatch
 * watches them all, each resource with its own namespace and selectors
 * (RESOURCE@NS:l=SEL:f=SEL; @* = all namespaces). Returns a jv array of
 * argument arrays (one per kwatch to run), or jv_invalid with a message.
 * It is also the program's check (it loads and compiles the program as the
 * engine does): when it exits 100, *permanent is set and the message is its
 * last error line, for "the program cannot work".
 */
static jv kwatch_groups(int *permanent)
{
	char err[KOP_ERRLEN] = "", last[KOP_ERRLEN + 16] = "";
	struct kop_buf out = KOP_BUF_INIT, ebuf = KOP_BUF_INIT;
	jv args = jv_array(), kw = jv_array(), result;
	int p[2], e[2], status = 0, nwatch = 0;
	pid_t pid;
	int64_t deadline = kop_mono_ms() + 30000;
	char *line, *nl;

	*permanent = 0;
	if (pipe_high(p) < 0) {
		jv_free(args);
		jv_free(kw);
		return jv_invalid_with_msg(jv_string_fmt("unable to create a pipe: %s", strerror(errno)));
	}
	if (pipe_high(e) < 0) {
		close(p[0]);
		close(p[1]);
		jv_free(args);
		jv_free(kw);
		return jv_invalid_with_msg(jv_string_fmt("unable to create a pipe: %s", strerror(errno)));
	}
	argv_add(&args, "--print-watches");
	argv_add(&args, sup.program_dir);
	pid = spawn_stage("ireconcile", args, -1, p[1], e[1], -1, -1, err);
	close(p[1]);
	close(e[1]);
	if (pid < 0) {
		close(p[0]);
		close(e[0]);
		jv_free(kw);
		return jv_invalid_with_msg(jv_string(err));
	}
	while (p[0] >= 0 || e[0] >= 0) {
		struct pollfd pfd[2] = { { p[0], POLLIN, 0 }, { e[0], POLLIN, 0 } };
		char buf[4096];
		ssize_t n;
		int64_t left = deadline - kop_mono_ms();
		int i;

		if (left <= 0 || poll(pfd, 2, (int)left) == 0) {
			kill(pid, SIGKILL);
			break;
		}
		for (i = 0; i < 2; i++) {
			int *fd = i ? &e[0] : &p[0];

			if (*fd < 0 || !pfd[i].revents)
				continue;
			n = read(*fd, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				close_fd(fd);
				continue;
			}
			kop_buf_add(i ? &ebuf : &out, buf, (size_t)n);
			if (i)
				relay_check_err(&ebuf, 0, last, sizeof(last));
		}
	}
	close_fd(&p[0]);
	close_fd(&e[0]);
	relay_check_err(&ebuf, 1, last, sizeof(last));
	kop_buf_release(&ebuf);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		char *how = describe_status(status);

		kop_buf_release(&out);
		jv_free(kw);
		if (WIFEXITED(status) && WEXITSTATUS(status) == KOP_EXIT_PERM) {
			*permanent = 1;
			result = jv_invalid_with_msg(*last ? jv_string(last) :
						     jv_string_fmt("'ireconcile --print-watches %s' %s",
								   sup.program_dir, how));
		} else {
			result = jv_invalid_with_msg(jv_string_fmt("'ireconcile --print-watches %s' %s%s%s",
								   sup.program_dir, how, *last ? ": " : "", last));
		}
		free(how);
		return result;
	}
	argv_kube(&kw);
	argv_add(&kw, "-A");
	for (line = out.buf; line && *line; line = nl ? nl + 1 : NULL) {
		jv w, res, ns, ls, fs, keep, shard, spec;

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
		keep = jv_object_get(jv_copy(w), jv_string("keep"));
		shard = jv_object_get(jv_copy(w), jv_string("shard"));
		/* (a kind's fields kept are dropped where the event enters, in kwatch; with
		 * --shards, a watch by the shard's namespace ends in ":s=", its selector
		 * appended at each start: shard_groups) */
		spec = jv_string_fmt("%s@%s:l=%s:f=%s%s%s%s", jv_string_value(res),
				     jv_get_kind(ns) == JV_KIND_STRING && *jv_string_value(ns) ? jv_string_value(ns) : "*",
				     jv_get_kind(ls) == JV_KIND_STRING ? jv_string_value(ls) : "",
				     jv_get_kind(fs) == JV_KIND_STRING ? jv_string_value(fs) : "",
				     jv_get_kind(keep) == JV_KIND_STRING ? ":k=" : "",
				     jv_get_kind(keep) == JV_KIND_STRING ? jv_string_value(keep) : "",
				     sup.shards && jv_get_kind(shard) == JV_KIND_STRING &&
				     !strcmp(jv_string_value(shard), "namespace") ? ":s=" : "");
		jv_free(keep);
		jv_free(shard);
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

void publish_pids(void)
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

void schedule_restart(const char *culprit, const char *why)
{
	int64_t now = kop_mono_ms(), at;
	unsigned delay;

	/* A generation that ran a while starts the backoff over. */
	if (sup.started_ms && now - sup.started_ms > 60000)
		kop_backoff_reset(&sup.backoff);
	sup.same_program = 0;	/* something failed: the next start checks the program */
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

/*
 * The program cannot work (the check exited 100: it does not load or
 * compile, a required setting is missing): no restart could help, so none
 * is made. Said once here, and by /readyz until cleared (SIGHUP, or a new
 * process): the HTTP server stays up, /healthz answers.
 */
void program_broken(const char *why)
{
	pthread_mutex_lock(&sup.mu);
	snprintf(sup.broken, sizeof(sup.broken), "%s", why);
	pthread_mutex_unlock(&sup.mu);
	sup.program_broken = 1;
	tool_logj(LOG_ERROR, JV_OBJECT(jv_string("stage"), jv_string("ireconcile"), jv_string("program"),
				       jv_string(sup.program_dir), jv_string("error"), jv_string(why)),
		  "the program '%s' cannot work: not restarting the pipeline until it is fixed and iot-operator "
		  "restarted (or sent SIGHUP)", sup.program_dir);
}

/*
 * The check alone, at setup and on SIGHUP, so that a standby too knows (and
 * its /readyz says) that the program cannot work. Only a permanent failure
 * counts here: anything else is for the pipeline's start to meet and retry.
 */
void program_check(void)
{
	int permanent;
	jv groups = kwatch_groups(&permanent);

	jv_free(sup.checked);
	sup.checked = jv_invalid();
	if (!jv_is_valid(groups) && permanent) {
		jv msg = jv_invalid_get_msg(groups);

		program_broken(jv_get_kind(msg) == JV_KIND_STRING ? jv_string_value(msg) : "failed");
		jv_free(msg);
		return;
	}
	if (jv_is_valid(groups)) {
		sup.checked = groups;
		sup.checked_ms = kop_mono_ms();
	}
}

/*
 * kwatch's arguments for a pipeline's start: those of a check made less
 * than CHECK_FRESH_MS before (the start right after setup, or after a
 * SIGHUP, need not compile the program a second time: that is a second of
 * jq 1.6 at start-up), else those of a new check. With --shards, a start
 * that follows a stop for a change of ranges (sup.same_program: nothing
 * failed) takes those the pipeline before it ran with: its program loaded
 * and worked, and a new check would only delay the takeover of the ranges
 * gained by that second (seconds on a busy node). Should the program have
 * changed on disk since, ireconcile's own start meets it, and its exit makes
 * the next start check.
 */
#define CHECK_FRESH_MS 10000
static jv start_groups(int *permanent, const char **how)
{
	jv groups = sup.checked;
	int same = sup.same_program;

	sup.checked = jv_invalid();
	sup.same_program = 0;
	*permanent = 0;
	if (jv_is_valid(groups) && kop_mono_ms() - sup.checked_ms < CHECK_FRESH_MS) {
		*how = "checked before";
		return groups;
	}
	jv_free(groups);
	if (same && jv_is_valid(sup.started)) {
		*how = "as the pipeline before";
		return jv_copy(sup.started);
	}
	*how = "checked";
	return kwatch_groups(permanent);
}

/* SIGHUP: a program found broken is checked again at once (the pipeline starts if it is fixed). */
void program_recheck(void)
{
	if (!sup.program_broken) {
		log_info("ignoring SIGHUP: the program is not known to be broken");
		return;
	}
	log_info("SIGHUP: checking the program again");
	sup.program_broken = 0;
	pthread_mutex_lock(&sup.mu);
	sup.broken[0] = 0;
	pthread_mutex_unlock(&sup.mu);
	program_check();
	sup.next_start_ms = kop_mono_ms();
}

/* Signals every stage's process group. */
void signal_stages(int sig, int only_kwatch)
{
	size_t i;

	for (i = 0; i < sup.nst; i++)
		if (sup.st[i].pid > 0 && (!only_kwatch || !strcmp(sup.st[i].name, "kwatch")))
			kill(-sup.st[i].pid, sig);
}

void teardown(enum teardown how)
{
	int64_t now = kop_mono_ms();

	if (!sup.running)
		return;
	/*
	 * Before the initial lists are in, ireconcile has reconciled nothing, and
	 * at the end of its input it would take what it has read for the whole
	 * state (a recorded file's rule) and reconcile every instance from that
	 * part: children not listed yet created again, statuses computed without
	 * them. Nothing is in flight to finish: everything stops at once.
	 */
	if (how == TEARDOWN_DRAIN && (!sup.initial_sent || sup.gain_pending))
		how = TEARDOWN_TERM;	/* (the same for the primaries of ranges gained, their lists not in) */
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

/* Every stage has been reaped: close what is left, keep the counters. */
void pipeline_finish(void)
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
	sup.gain_pending = 0;
	sup.removing = 0;
	sup.narrowing = 0;
	if (sup.shards) {
		/* (now the lease thread may hand over what it dropped) */
		sup.shard_mask = 0;
		shards_working(0);
	}
	publish_pids();
	log_info("pipeline stopped");
}

static int ends_with(const char *t, const char *end)
{
	size_t len = strlen(t), n = strlen(end);

	return len >= n && !strcmp(t + len - n, end);
}

/*
 * kwatch's arguments (groups, consumed) with sel after every ":s=" that ends
 * one (kwatch_groups). With only_sharded (ranges gained by a running
 * pipeline), what the kwatch running already read is left out: the watches
 * not cut by the selector (those after "-A", the options' end), and the
 * groups that have none cut by it; a namespaces watch stays beside a
 * RESOURCE@~ one, which follows it.
 */
static jv shard_groups(jv groups, const char *sel, int only_sharded)
{
	jv out = jv_array();

	jv_array_foreach(groups, i, g) {
		jv args = jv_array();
		int specs = 0, sharded = 0, each_ns = 0;

		jv_array_foreach(g, j, a) {
			(void)j;
			each_ns |= ends_with(jv_string_value(a), ":s=") && strstr(jv_string_value(a), "@~:");
			jv_free(a);
		}
		jv_array_foreach(g, j, a) {
			const char *t = jv_string_value(a);

			(void)j;
			if (ends_with(t, ":s=")) {
				args = jv_array_append(args, jv_string_fmt("%s%s", t, sel));
				sharded = 1;
			} else if (!only_sharded || !specs || (each_ns && !strncmp(t, "namespaces@", 11))) {
				args = jv_array_append(args, jv_copy(a));
			}
			specs |= !strcmp(t, "-A");
			jv_free(a);
		}
		(void)i;
		jv_free(g);
		if (only_sharded && !sharded)
			jv_free(args);
		else
			out = jv_array_append(out, args);
	}
	jv_free(groups);
	return out;
}

/* Stage s's stats socket: our end in s->stats_fd, the stage's end returned (-1 with err). */
static int stats_socket(struct stage *s, char *err)
{
	int sp[2];

	if (socketpair_high(SOCK_STREAM, sp) < 0) {
		snprintf(err, KOP_ERRLEN, "unable to create a socket pair: %s", strerror(errno));
		return -1;
	}
	s->stats_fd = sp[0];
	set_nonblock(s->stats_fd);
	return sp[1];
}

/* Starts the kwatch of stage s with args (consumed), its output to be merged: 0, or -1 with err. */
static int kwatch_spawn(struct stage *s, jv args, char *err)
{
	int stats, out[2] = { -1, -1 };

	if ((stats = stats_socket(s, err)) < 0) {
		jv_free(args);
		return -1;
	}
	if (pipe_high(out) < 0) {
		close(stats);
		jv_free(args);
		snprintf(err, KOP_ERRLEN, "unable to create a pipe: %s", strerror(errno));
		return -1;
	}
	if (sup.shards) {
		/* its stats socket tells it the ranges the pipeline hands over (pipeline_shrink) */
		jv a = jv_array();
		char fd[16];

		snprintf(fd, sizeof(fd), "%d", STATS_FD);
		argv_add(&a, "--shard-control");
		argv_add(&a, fd);
		args = jv_array_concat(a, args);
	}
	s->pid = spawn_stage("kwatch", args, -1, out[1], -1, -1, stats, err);
	close(out[1]);
	close(stats);
	s->out_fd = out[0];
	set_nonblock(s->out_fd);
	if (s->pid <= 0) {
		s->pid = 0;
		return -1;
	}
	return 0;
}

int pipeline_start(void)
{
	char err[KOP_ERRLEN] = "";
	int permanent;
	const char *how;
	jv groups = start_groups(&permanent, &how), args, fields;
	int in[2] = { -1, -1 }, fb[2] = { -1, -1 }, ra[2] = { -1, -1 }, as[2] = { -1, -1 };
	char *shard_sel = NULL, ranges[SHARDS_TEXT];
	size_t i, nk;
	int ok = 1;

	sup.started_ms = kop_mono_ms();
	if (!jv_is_valid(groups)) {
		jv msg = jv_invalid_get_msg(groups);
		const char *why = jv_get_kind(msg) == JV_KIND_STRING ? jv_string_value(msg) : "failed";

		if (permanent)
			program_broken(why);
		else
			schedule_restart("ireconcile", why);
		jv_free(msg);
		return -1;
	}
	jv_free(sup.started);
	sup.started = jv_copy(groups);
	if (sup.shards) {
		/* (lead was true a moment ago; a range lost since waits for the next turn) */
		if (!(sup.shard_mask = shards_usable(kop_mono_ms()))) {
			jv_free(groups);
			sup.same_program = 1;	/* (not started: the next start is this one's) */
			return -1;
		}
		shard_sel = kop_shard_mask_string(KOP_SHARD_NAMESPACE, sup.shard_mask, sup.shards);
		groups = shard_groups(groups, shard_sel, 0);
		shards_working(sup.shard_mask);
		sup.streamed = sup.shard_mask;
		sup.narrowing = 0;
		sup.removing = 0;
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
		int stats;

		if (i < nk) {
			if (kwatch_spawn(s, jv_array_get(jv_copy(groups), (int)i), err) < 0) {
				ok = 0;
				break;
			}
			continue;
		}
		if ((stats = stats_socket(s, err)) < 0) {
			ok = 0;
			break;
		}
		if (!strcmp(s->name, "ireconcile")) {
			char fbpath[32];

			snprintf(fbpath, sizeof(fbpath), "/dev/fd/%d", FEEDBACK_FD);
			args = jv_array();
			argv_add(&args, "--feedback");
			argv_add(&args, fbpath);
			if (shard_sel) {
				argv_add(&args, "--shard");
				argv_add(&args, shard_sel);
			}
			argv_add(&args, sup.program_dir);
			s->pid = spawn_stage("ireconcile", args, in[0], ra[1], -1, fb[0], stats, err);
		} else if (!strcmp(s->name, "kapply")) {
			args = jv_array();
			argv_kube(&args);
			s->pid = spawn_stage("kapply", args, ra[0], as[1], -1, -1, stats, err);
		} else {
			args = jv_array();
			argv_kube(&args);
			s->pid = spawn_stage("kstatus", args, as[0], fb[1], -1, -1, stats, err);
		}
		close(stats);
		if (s->pid <= 0) {
			s->pid = 0;
			ok = 0;
		}
	}
	jv_free(groups);
	free(shard_sel);
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
	fields = JV_OBJECT(jv_string("kwatch"), jv_number((double)nk), jv_string("program"), jv_string(sup.program_dir),
			   jv_string("watches"), jv_string(how));
	if (sup.shards)
		fields = jv_object_set(fields, jv_string("ranges"), jv_string(shards_text(sup.shard_mask, ranges)));
	tool_logj(LOG_INFO, fields, "pipeline started");
	return 0;
}

/*
 * --shards: ranges gained while the pipeline runs are added to it, not
 * restarted for: it works for them from now on (shards_working, before any
 * line of theirs can reach ireconcile), ireconcile is told (a SHARDS line,
 * in order with the events), and a kwatch is started for each group with
 * watches cut by the selector, for the gained ranges alone. Their primaries
 * wait in ireconcile until those kwatch have sent their lists (the merger
 * passes the bookmark on then). What the running kwatch read stays.
 */
void pipeline_grow(uint64_t gained)
{
	char err[KOP_ERRLEN] = "", all[SHARDS_TEXT], got[SHARDS_TEXT];
	char *sel = kop_shard_mask_string(KOP_SHARD_NAMESPACE, gained, sup.shards);
	jv groups = shard_groups(jv_copy(sup.started), sel, 1), line;
	size_t n = (size_t)jv_array_length(jv_copy(groups)), first = sup.nst, i;

	sup.shard_mask |= gained;
	sup.streamed |= gained;
	shards_working(sup.shard_mask);
	line = JV_OBJECT(jv_string("type"), jv_string("SHARDS"), jv_string("add"), jv_string(sel));
	kop_json_dump_buf(&sup.merged, line);
	kop_buf_add(&sup.merged, "\n", 1);
	free(sel);
	if (!n) {
		/* (no watch to start: the program's objects are all read already) */
		kop_buf_adds(&sup.merged, INITIAL_END "\n");
	} else {
		sup.gain_pending = 1;
	}
	pthread_mutex_lock(&sup.mu);
	sup.st = kop_realloc(sup.st, (sup.nst + n) * sizeof(*sup.st));
	memset(sup.st + sup.nst, 0, n * sizeof(*sup.st));
	for (i = first; i < first + n; i++) {
		sup.st[i].name = "kwatch";
		sup.st[i].stats_fd = sup.st[i].out_fd = -1;
		sup.st[i].status = -1;
	}
	sup.nst += n;
	pthread_mutex_unlock(&sup.mu);
	for (i = first; i < first + n; i++) {
		sup.st[i].gained = gained;
		if (kwatch_spawn(&sup.st[i], jv_array_get(jv_copy(groups), (int)(i - first)), err) < 0)
			break;
	}
	jv_free(groups);
	publish_pids();
	if (i < first + n) {
		schedule_restart("kwatch", err);
		sup.culprit_seen = 1;
		teardown(TEARDOWN_KILL);
		return;
	}
	tool_logj(LOG_INFO, JV_OBJECT(jv_string("ranges"), jv_string(shards_text(sup.shard_mask, all)),
				      jv_string("gained"), jv_string(shards_text(gained, got)), jv_string("kwatch"),
				      jv_number((double)n)),
		  "ranges gained: %s added to the running pipeline (%zu kwatch for their objects)", got, n);
}

/*
 * Tells every kwatch running that the ranges of sel leave it (a
 * --shard-control line on its stats socket). Until each has said it no
 * longer reads them (merger.c), they stay in sup.streamed: gained back
 * meanwhile, they wait. A kwatch that cannot be told (its socket gone, or
 * full: a part of a line would spoil the next) is told nothing more, and
 * what is dropped from then on stays in sup.streamed for the pipeline's life
 * (gained back, it restarts the pipeline: shards_check).
 */
static void narrow_kwatch(uint64_t dropped, const char *sel)
{
	size_t i, len = strlen(sel);
	char *line = kop_malloc(len + 2);
	int told = 1;

	memcpy(line, sel, len);
	line[len] = '\n';
	line[len + 1] = 0;
	for (i = 0; i < sup.nst; i++) {
		struct stage *s = &sup.st[i];
		ssize_t n;

		if (strcmp(s->name, "kwatch") || s->pid <= 0 || s->retired || s->out_fd < 0)
			continue;
		if (s->narrow_failed || s->stats_fd < 0) {
			told = 0;
			continue;
		}
		if ((n = write(s->stats_fd, line, len + 1)) != (ssize_t)(len + 1)) {
			log_warn("unable to tell kwatch (pid %d) the ranges dropped: %s; it goes on reading them",
				 (int)s->pid, n < 0 ? strerror(errno) : "a short write");
			s->narrow_failed = 1;
			told = 0;
			continue;
		}
		s->narrow_sent++;
		if (s->gained && !(s->gained &= ~dropped))
			s->retire_at = s->narrow_sent;	/* (nothing left for it to read) */
	}
	if (told)
		sup.narrowing |= dropped;
	free(line);
}

/*
 * --shards: ranges dropped (handed over to a replica that joins) leave the
 * running pipeline, nothing restarted: ireconcile is told (a SHARDS line
 * naming a barrier), forgets their instances at once and writes the barrier
 * after everything it wrote for them; kapply and kstatus pass it on once that
 * is done, and it comes back in ireconcile's metrics (metrics.c). Only then
 * does the pipeline stop working for them (shards_check), and their Leases
 * are handed over. The kwatch running are told too (--shard-control, on
 * their stats socket): they go on from where they were without those
 * ranges, and each says when it no longer reads them (merger.c); ireconcile
 * drops what they send of them meanwhile.
 */
void pipeline_shrink(uint64_t dropped)
{
	char txt[SHARDS_TEXT];
	char *sel = kop_shard_mask_string(KOP_SHARD_NAMESPACE, dropped, sup.shards);
	jv line;

	sup.barrier_sent += 1;
	sup.removing = dropped;
	line = JV_OBJECT(jv_string("type"), jv_string("SHARDS"), jv_string("remove"), jv_string(sel),
			 jv_string("barrier"), jv_number(sup.barrier_sent));
	kop_json_dump_buf(&sup.merged, line);
	kop_buf_add(&sup.merged, "\n", 1);
	narrow_kwatch(dropped, sel);
	free(sel);
	tool_logj(LOG_INFO, JV_OBJECT(jv_string("dropped"), jv_string(shards_text(dropped, txt)), jv_string("barrier"),
				      jv_number(sup.barrier_sent)),
		  "ranges dropped: %s leave the running pipeline; handed over once what was written for them is done",
		  txt);
}
