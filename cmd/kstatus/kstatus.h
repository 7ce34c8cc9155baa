#ifndef KSTATUS_H
#define KSTATUS_H
/*
 * kstatus's own API, shared by its files: the options, the client, the
 * writes of a status and of an event, and the coalescing windows. Not for
 * other tools: what more than one tool needs lives in lib/.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include "tool.h"
#include "kube.h"
#include "hmap.h"
#include "jsonl.h"
#include "opresult.h"

/* The options, as main.c parses them into opt. */
struct kstatus_options {
	const char *field_manager;
	const char *component;
	unsigned max_retries;
	long coalesce_ms;
	unsigned concurrency;	/* writers */
};

/* The coalescing window of one object (window.c says how windows work). */
struct window {
	char *key;
	int64_t end;		/* kop_mono_ms() */
	jv status;		/* the newest status line held, or jv_invalid() */
	jv events;		/* the event lines held, in order */
	struct window *next;
};

/* main.c */
extern struct kstatus_options opt;
extern const char *default_ns;
extern char *instance;		/* reportingInstance: $POD_NAME or the host name */
extern char *host;
extern atomic_int stopping;	/* SIGTERM or SIGINT: write what is held, then exit (lock-free: set by the handler) */

/* writers.c: kstatus_lock is held by the thread that runs; client is the running writer's */
extern pthread_mutex_t kstatus_lock;
extern _Thread_local struct kube_client *client;
int writers_start(unsigned n, struct kube_client **clients, char *err);
void writers_queue(jv lines, const char *key, int is_status);	/* lines consumed; key copied */
/* A line passed through (consumed), or a result of ours (superseded: ours), after what it waits for */
void writers_pass(jv line, int ours);
/* A line passed through as its text (len bytes at text, copied when held), of primary (taken; NULL: none) */
void writers_pass_text(const char *text, size_t len, char *primary);
void writers_drain(void);		/* until every operation queued is written, every line passed */
int writers_full(void);			/* as many operations and lines waiting as the writers may hold */
int writers_busy(void);			/* an operation queued or being written */
int writers_pending_for(const char *key);	/* an operation on the object key queued or being written */
void writers_wait_room(long ms);	/* until not full, stopping, or ms passed */
void writers_sleep(unsigned ms);	/* the lock let go; ends early when stopping */
void writers_wake(void);		/* stopping: sleeps end */
void writers_stop(void);		/* drained, then the threads joined and their clients freed */

/* request.c */
extern int passing;		/* emit() is passing a line through */
void emit(jv line);
int request(const char *method, const char *path, const char *ctype, jv body, struct kube_response *r);
/* A write: of a 2xx answer only metadata.resourceVersion and uid are read (kube_request_meta). */
int write_request(const char *method, const char *path, const char *ctype, jv body, struct kube_response *r);
int retry_after_failure(const struct kube_response *r, struct kop_backoff *b, unsigned *tries,
			int conflict_retries);
void report_fail(const char *what, jv primary, jv ref, const struct kube_response *r, const char *who);
void report_local(const char *what, jv primary, jv ref, long code, const char *reason, const char *msg);

/* status.c */
/* line_key: the line's op_key when the caller has it (a window's), else NULL: worked out here */
void do_status(jv line, const char *line_key);
void status_release(void);	/* what it remembers of its writes */
int64_t status_idle(int64_t now);	/* the ms until the next is forgotten, -1: none */

/* event.c */
int64_t events_idle(int64_t now);	/* wall ms; the ms until the next is forgotten, -1: none */
void events_release(void);
jv line_primary(jv line);
jv event_key(jv line);
void do_event(jv lines);

/* window.c */
extern struct kop_hmap windows;
extern struct window *win_head;
/* What an operation line names of its object (a status's object, an event's involvedObject); NULL when absent */
struct op_names {
	char *api_version, *kind, *ns, *name;
};
void op_names(jv line, int is_status, struct op_names *n);	/* line consumed */
void op_names_release(struct op_names *n);
char *op_key(jv line, int is_status);
void win_open(const char *key);
jv superseded(jv line);
void windows_due(int all);

#endif
