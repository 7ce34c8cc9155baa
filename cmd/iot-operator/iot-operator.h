#ifndef IOT_OPERATOR_H
#define IOT_OPERATOR_H
/*
 * The supervisor's own API, shared by its files: the stages of a pipeline,
 * the supervisor's state (sup) and the leader election's (le). Not for other
 * tools: what more than one tool needs lives in lib/ or cmd/tool.c.
 */
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include <microhttpd.h>
#include "tool.h"
#include "kube.h"
#include "lease.h"

#define FEEDBACK_FD 3
#define STATS_FD 4
#define MERGE_HIGH (1024 * 1024)	/* stop reading kwatch while this much waits for ireconcile */
#define LOCK_NAME "iot-operator-lock"
#define SHARD_PREFIX "iot-operator"	/* the shard Leases: iot-operator-shard-NN, iot-operator-member-POD */
#define SHARDS_TEXT (3 * 64 + 8)	/* room for shards_text() */

struct stage {
	const char *name;	/* one of stage_names */
	pid_t pid;		/* 0 once reaped (or never started) */
	int status;		/* its wait status once reaped */
	int stats_fd;		/* our end of its stats socket; -1 closed */
	struct kop_buf stats;	/* a partial stats line */
	int out_fd;		/* kwatch: its stdout; -1 closed */
	struct kop_buf out;	/* kwatch: a partial line */
	int bookmark;		/* kwatch: its initial-events-end seen */
	unsigned narrow_sent;	/* kwatch: ranges removed told it (--shard-control lines) */
	unsigned narrow_acked;	/* ... and those it said it no longer reads (kwatch/shards-removed) */
	uint64_t gained;	/* kwatch started for ranges gained: those it still reads (0 for others) */
	unsigned retire_at;	/* ... none left once it has said so this often: it is stopped then */
	int retired;		/* stopped for that: its end ends nothing */
	int narrow_failed;	/* kwatch: a line could not be written whole: it is told nothing more */
};

struct supervisor {
	/* settings */
	const char *operator_name, *program, *stage_dir, *metrics_addr;
	char *identity, *exe_dir, *program_dir;
	int leader_elect;
	unsigned shards;	/* --shards R: ranges (0: leader election) */
	long lease_ms, renew_ms, retry_ms, drain_ms;

	/* the pipeline of the current generation */
	struct stage *st;
	size_t nst;
	int merged_fd;		/* ireconcile's stdin; -1 closed */
	struct kop_buf merged;	/* lines waiting for it */
	size_t merged_off;
	int running, tearing_down, draining, culprit_seen, lease_killed;
	uint64_t shard_mask;	/* --shards: the ranges it works for */
	int gain_pending;	/* --shards: ranges added to it whose kwatch have not all sent their lists */
	uint64_t streamed;	/* --shards: the ranges its kwatch read (dropped ones until they let go) */
	uint64_t narrowing;	/* --shards: ranges dropped that a kwatch may still read (pipeline_shrink) */
	uint64_t removing;	/* --shards: ranges dropped, until what was written for them is done */
	double barrier_sent, barrier_seen;	/* ... the barrier that says so, and the last one back */
	int64_t started_ms, next_start_ms, kill_at_ms;
	size_t suspect;		/* a stage that ended cleanly, unasked: its index + 1 (0: none) */
	int64_t suspect_until;	/* blamed then, unless another dies meanwhile */
	struct kop_backoff backoff;
	int killed_at_bound;
	int program_broken;	/* the check exited 100: no pipeline until SIGHUP (sup.broken says why) */
	jv checked;		/* kwatch's arguments from the last check, for a start soon after (or jv_invalid()) */
	int64_t checked_ms;	/* when that check was made */
	jv started;		/* kwatch's arguments (before --shards' selectors) the pipeline last started with */
	int same_program;	/* --shards: the pipeline was stopped for a change of ranges, nothing failed:
				   the next start runs it with those arguments again, no new check */

	/* shutdown */
	int terminating;

	/* what the HTTP thread reads: under mu */
	pthread_mutex_t mu;
	jv base;		/* series key -> series: counters of stages gone, the supervisor's own */
	jv live;		/* "slot" -> jv object of series, the running stages' last values */
	jv notes;		/* "slot" -> a running stage's note ("stage: why it cannot work"), if any */
	char last_note[KOP_ERRLEN + 32];	/* the last note of a stage gone, until the initial lists are in */
	char why[3 * KOP_ERRLEN + 128];		/* ready_locked's answer when it is built */
	char broken[KOP_ERRLEN + 16];		/* why the program cannot work ("": it can) */
	jv restarts;		/* stage name -> count */
	int initial_sent, pipeline_up, is_leader;
	pid_t pids[64];		/* running stages, for their RSS; 0-terminated */
	const char *pid_names[64];
	int64_t start_wall_ms;
};

/* The leader-election thread and what it shares with the main loop (under mu). */
struct leader_election {
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
};

enum teardown { TEARDOWN_DRAIN, TEARDOWN_TERM, TEARDOWN_KILL };

/* main.c */
extern const char *const stage_names[4];
extern struct supervisor sup;

/* spawn.c */
int fd_high(int fd);
int pipe_high(int p[2]);
void set_nonblock(int fd);
void close_fd(int *fd);
void argv_add(jv *argv, const char *s);
void argv_kube(jv *argv);
int socketpair_high(int type, int sv[2]);
pid_t spawn_stage(const char *name, jv args, int in, int out, int errfd, int fd3, int fd4, char *err);
/* Whether --stage-dir holds every stage (then none is built in). */
int stage_dir_has_all(void);
/* In a child about to become a stage: its group and parent-death signal; its fds and signals (spawn.c). */
int child_start(pid_t parent);
int child_fds(const int fds[5]);

/* spawner.c */
/* The built-in stages: each tool's main, renamed in the objects the Makefile links into iot-operator. */
int kwatch_main(int argc, char **argv);
int ireconcile_main(int argc, char **argv);
int kapply_main(int argc, char **argv);
int kstatus_main(int argc, char **argv);
/*
 * At setup, before any thread and once the environment is what the stages are to get: forks the
 * spawner. 0, or -1 (errno): the stages are exec'd then.
 */
int spawner_start(int argc, char **argv);
/* Whether name is a built-in stage and the spawner is there to start it. */
int spawner_has(const char *name);
/*
 * Starts the built-in argv[0] with fds[0..4] (-1: /dev/null for stdin, inherited 1 and 2, none):
 * its pid, or 0 when the spawner did not (the caller runs its executable; why is logged).
 */
pid_t spawner_spawn(char *const argv[], const int fds[5]);
/* A child reaped: 1 if it was the spawner (then gone for good, said once), 0 if not. */
int spawner_reaped(pid_t pid, int status);

/* pipeline.c */
void publish_pids(void);
void schedule_restart(const char *culprit, const char *why);
void program_broken(const char *why);
void program_recheck(void);
void program_check(void);
void signal_stages(int sig, int only_kwatch);
void teardown(enum teardown how);
void pipeline_finish(void);
int pipeline_start(void);
void pipeline_grow(uint64_t gained);
void pipeline_shrink(uint64_t dropped);

/* merger.c */
/* The initial-events-end bookmark the supervisor passes on when no kwatch's own is at hand. */
#define INITIAL_END "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"annotations\":" \
		    "{\"k8s.io/initial-events-end\":\"true\"}}}}"
void kwatch_read(struct stage *s);
void merged_write(void);

/* children.c */
char *describe_status(int status);
void blame(size_t i);
int setup_signals(void);
void on_signal(int sfd);

/* metrics.c */
void metric_own_add(const char *name, jv labels, double delta);
void stage_stats_fold(size_t slot);
char *metrics_render(size_t *len);
void stage_read_stats(size_t slot);

/* http.c */
int ready_locked(int can, const char *can_why, const char **why);
int http_bind(const char *addr);
struct MHD_Daemon *http_start(int fd, const char *addr);

/* leader.c */
extern struct leader_election le;
long lease_request_timeout_ms(void);
long lease_request(void *ctx, const char *method, const char *path, jv body, jv *out, char *err);
int64_t lease_clock(void *ctx);
void wake_main(void);
int same_failure(const char *a, const char *b);
int standby_can_lead(char *why, size_t n);
int may_lead(int64_t now);
void lease_client_setup(const char *component);
void lease_setup(void);
void lease_stop(void);

/* shards.c */
void shards_setup(void);
void shards_release_mem(void);
uint64_t shards_usable(int64_t now);
uint64_t shards_winding(int64_t now);
int shards_settled(int64_t now);
void shards_working(uint64_t mask);
void shards_figures(uint64_t *held, unsigned *live, unsigned *target);
const char *shards_text(uint64_t mask, char buf[SHARDS_TEXT]);

#endif
