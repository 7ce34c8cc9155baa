#ifndef KAPPLY_H
#define KAPPLY_H
/*
 * kapply's own API, shared by its files: an operation (struct op) and its
 * life (queued, running, done), the options and the client. Not for other
 * tools: what more than one tool needs lives in lib/.
 */
#include <signal.h>
#include <curl/curl.h>
#include "tool.h"
#include "kube.h"
#include "jsonl.h"
#include "manifest.h"
#include "opresult.h"

/* OP_UNKNOWN: an "op" no stage knows, answered with a failed result (op.c, op_from_line). */
enum op_kind { OP_PASS, OP_APPLY, OP_DELETE, OP_PATCH, OP_CREATE, OP_UNKNOWN };

enum op_state { ST_QUEUED, ST_RUNNING, ST_DONE };

/* What the next request of an operation is for. */
enum op_phase {
	PH_MAIN,	/* the write itself */
	PH_ESTABLISH,	/* a CRD was applied: GET it until Established */
	PH_DIFF_GET,	/* --diff: the live object */
	PH_DIFF_DRY	/* --diff: the same write with dryRun=All */
};

/* One operation: an input line or a manifest's object, from its parsing to its result line. */
struct op {
	enum op_kind kind;
	enum op_state state;
	enum op_phase phase;
	jv line;		/* the input line (kept whole for passthrough) */
	jv obj;			/* the object of an operation */
	/*
	 * An apply or create whose body is its object as it came (the usual one:
	 * named with its namespace, or a Namespace), once parsed, is kept as its
	 * text, a fraction of its jq value's size: line and obj are then null,
	 * and what the result needs of them is here. A passthrough taken unread
	 * (op_pass_text) is kept as the line's text: line is then invalid.
	 */
	char *text;		/* the object's JSON, or the passthrough's line (NUL-ended); NULL: none */
	size_t text_len;	/* the passthrough's: its length */
	jv ref;			/* its reference (op_ref) */
	jv tag;			/* the line's "tag" (what kop_json_member gives: a string, or not) */
	jv primary;		/* string or null */
	char *op_name;		/* OP_UNKNOWN: its "op" as given (JSON text when not a string) */
	char *api_version, *kind_name, *group, *ns, *name, *uid;
	char *key;		/* group/Kind/namespace/name: the order of operations is kept per key */
	char *who;		/* Kind/namespace/name, for messages (as much of it as the object gives), or NULL */
	size_t lineno;		/* its line on stdin; 0 from a manifest */
	int bad_names_line;	/* bad already says which line */
	char *crd_group, *crd_kind;	/* an applied CRD: what it defines */
	int is_namespace;	/* an apply or create of a Namespace: objects in it wait for it */
	int is_binding;		/* an apply of a RoleBinding: the other objects in its namespace wait for it */
	char *bad;		/* a malformed operation: reported, never sent */
	struct kube_resource res;
	int resolved;
	/* the transfer in flight */
	CURL *easy;
	const char *method;	/* of the request in flight (a string literal) */
	struct curl_slist *headers;
	struct kop_buf resp;
	char errbuf[CURL_ERROR_SIZE];
	/* retries */
	struct kop_backoff backoff;
	unsigned attempts;
	unsigned silent_retries;	/* -f: retries after no response */
	int64_t first_silent;	/* -f: monotonic ms of the first failure without a response; 0 = none */
	int64_t first_try;	/* monotonic ms when its first request started; 0 = not yet */
	int auth_retried;
	int64_t not_before;	/* monotonic ms; 0 = now */
	int64_t deadline;	/* PH_ESTABLISH gives up here */
	jv applied;		/* the apply's response, while waiting for Established */
	long applied_code;
	jv live;		/* --diff: the live object, or null */
};

/* The options, as main.c parses them into opt. */
struct kapply_options {
	const char *namespace;
	const char *field_manager;
	int force;
	enum { DRY_NONE, DRY_CLIENT, DRY_SERVER } dry_run;
	int diff;
	unsigned concurrency;
	double qps, burst;
	unsigned max_retries;
	long crd_timeout_ms;
};

/* How many operations the queue holds before input.c reads no more. */
#define QUEUE_MAX (256 + 4 * (size_t)opt.concurrency)

/* main.c */
extern const char *const kind_names[];
extern struct kapply_options opt;
extern struct kube_client *client;
extern const char *default_ns;
extern CURLM *multi;
extern unsigned inflight;
extern struct op **queue;
extern size_t queue_len, queue_cap;
extern int stream_mode;
extern int worst;		/* exit code: 0, 1 (diff), 100, 111 */
extern volatile sig_atomic_t stopping;

/* op.c */
void op_free(struct op *op);
struct op *op_from_line(jv line, size_t lineno);
int op_pass_text(const char *text, size_t len);
int op_apply_text(const char *text, size_t len, size_t lineno);
void op_text_release(void);
const char *op_ns(const struct op *op);
jv op_ref(const struct op *op);
void op_done(struct op *op, jv result);
void op_ok(struct op *op, long code, jv body);
void op_fail(struct op *op, const struct kube_response *r);
void op_fail_local(struct op *op, long code, const char *reason, const char *msg);

/* queue.c */
void queue_push(struct op *op);
int same(const char *a, const char *b);
int blocked(size_t i);
void flush_queue(void);
int pass_free(const char *primary);

/* input.c */
int input_take(void *ctx, const char *text, size_t len);	/* the reader's take (struct kop_jsonl) */

/* request.c */
jv write_request(const struct op *op, const char **method, const char **ctype, struct kop_buf *query, int dry);
int64_t schedule(void);
void op_end_transfer(struct op *op);

/* result.c */
extern int server_down;	/* -f: the server could not be reached; nothing more is sent */
extern struct kube_response down;	/* why (while server_down) */
void op_not_sent(struct op *op, const struct kube_response *r);
void note_exit(int code);
void emit(jv line);
void op_failed(struct op *op, const struct kube_response *r);
void finished(CURLMsg *m);

/* diff.c */
void op_diff(struct op *op, jv before, jv after);

/* secret.c */
int op_is_secret(const struct op *op);
void mask_secrets(jv *a, jv *b);
jv mask_secret_body(jv body);

/* dryrun.c */
void dry_run_client(struct op *op);

/* input.c */
extern struct kop_jsonl reader;
extern int input_done;
extern jv manifest_objs;
extern int manifest_next, manifest_len;
extern int need_input;
void read_input(void);

#endif
