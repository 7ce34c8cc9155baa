#ifndef KOP_WATCH_H
#define KOP_WATCH_H
/*
 * The list-and-watch state machine of one resource (kwatch keeps one per
 * watched collection). It knows no HTTP client: the caller asks it for the
 * next request path, feeds it what the server answered and is told what to
 * do next. So it runs offline in tests (t/helper/test-watch.c).
 *
 * What it guarantees downstream (through the emit callback): every change
 * exactly once, in order, across reconnects and relists. It keeps, per
 * object, only the key (namespace/name), uid and the resourceVersion last
 * emitted (struct kw_map), not the objects. After a relist (410 Expired) it
 * emits the difference between that map and the new state: ADDED for new
 * objects, MODIFIED for changed ones (another resourceVersion), DELETED for
 * vanished ones (a stub: kind, apiVersion, metadata name/namespace/uid and
 * the relist's resourceVersion), DELETED + ADDED for a name reused by a new
 * uid.
 *
 * Requests, in order:
 *  - initial state: a streaming list (watch with sendInitialEvents=true,
 *    resourceVersionMatch=NotOlderThan, allowWatchBookmarks=true), or a
 *    paged LIST (limit, continue);
 *  - then a WATCH from the last resourceVersion seen (bookmarks requested).
 *
 * Streaming lists (watch_list): in KW_WL_AUTO, any failure of one before its
 * initial-events-end bookmark that came with an answer from the server (an
 * HTTP status other than 401/403, an ERROR event, a stream that ended, was
 * cut or stalled) makes the watch use paged LIST + WATCH for good, as
 * client-go's reflector does; the objects a partial stream already emitted
 * are reconciled by the LIST like a relist's. No answer at all (connection
 * refused) says nothing about the server and is retried as it was; 401 and
 * 403 are about the client, not streaming lists. KW_WL_ALWAYS never falls
 * back (every such failure is retried with backoff); KW_WL_NEVER never
 * streams.
 */
#include <stdint.h>
#include <jv.h>
#include "kop.h"
#include "jsonl.h"
#include "shard.h"

#define KW_PAGE_SIZE 500

enum kw_req {
	KW_REQ_NONE,
	KW_REQ_STREAM,		/* streaming list: initial ADDEDs, end bookmark, then a watch */
	KW_REQ_LIST,		/* one page of a paged LIST; the body is a whole List */
	KW_REQ_WATCH		/* a watch from w->rv */
};

/* Whether the initial state is read with streaming lists (--watch-list). */
enum kw_watch_list {
	KW_WL_AUTO,		/* stream; fall back to paged LIST + WATCH for good on a failure */
	KW_WL_ALWAYS,		/* stream; never fall back */
	KW_WL_NEVER		/* paged LIST + WATCH only */
};

/* "auto", "always", "never" -> *mode; -1 when it is none of them. */
int kw_watch_list_parse(const char *s, enum kw_watch_list *mode);

/* What the caller does after kw_watch_done(). */
enum kw_next {
	KW_NEXT_NOW,		/* send kw_watch_request() at once */
	KW_NEXT_BACKOFF,	/* wait (backoff, at least retry_after_s) then send the next request */
	KW_NEXT_AUTH,		/* 401: refresh the credentials, then as KW_NEXT_BACKOFF */
	KW_NEXT_FORBIDDEN,	/* 403: permanent, report loudly (w->err_*) */
	KW_NEXT_FATAL		/* another permanent refusal (bad selector...): report (w->err_*) */
};

/* An object downstream was told about. One allocation: key, uid, rv follow the struct. */
struct kw_entry {
	struct kw_entry *next;
	uint32_t hash;
	unsigned gen;		/* the relist generation that last saw it */
	uint32_t klen, ulen, rvlen;
	uint64_t memo;		/* the emit callback's, kept while the uid stays (0: none) */
	char data[];		/* "ns/name\0uid\0rv\0" */
};

struct kw_map {
	struct kw_entry **slots;
	size_t nslots, count;
};

/*
 * emit: one event for downstream. type "ADDED", "MODIFIED" or "DELETED";
 * object consumed. memo: the object's slot for the callback to remember
 * what it last sent of it (kwatch --keep: a digest, to drop a MODIFIED
 * whose kept fields did not change); 0 at first and after a new uid, NULL
 * with DELETED.
 */
/*
 * text: when the watch passes objects on as they came (kw_watch.pass_text),
 * the object's text, obj[0..len) (valid during the call), and object holds
 * its metadata's name, namespace, uid and resourceVersion alone (and kind,
 * apiVersion); obj[cut_b..cut_e) is its metadata.managedFields member with a
 * comma beside it (cut_b == cut_e: none). NULL: object is the whole object.
 */
struct kw_text {
	const char *obj;
	size_t len, cut_b, cut_e;
};
typedef void kw_emit_fn(void *ctx, const char *type, jv object, const struct kw_text *text, uint64_t *memo);

struct kw_watch {
	/* configuration (kw_watch_init; owned) */
	char *name;		/* as the user named it, for messages */
	char *path;		/* collection path, "/api/v1/namespaces/ns/pods" */
	char *kind, *api_version;
	char *label_selector, *field_selector;	/* NULL = none */
	struct kop_shard_sel *shard;	/* the shardSelector (kw_watch_set_shard), or NULL */
	enum kw_watch_list watch_list;	/* KW_WL_AUTO unless kw_watch_set_list() says otherwise */
	int streaming;		/* 1: the initial state comes from a streaming list; cleared by a fallback */
	unsigned watch_timeout_s;	/* timeoutSeconds of a watch (0 = server's default) */
	int quiet;		/* emit nothing until the first sync ends (--no-initial) */
	kw_emit_fn *emit;
	void *ctx;
	int pass_text;		/* ADDED, MODIFIED and DELETED from a watch stream are handed to emit as
				   their text (struct kw_text) when a scan reads them, not parsed */

	/* state */
	enum kw_req req;	/* the request in flight (set by kw_watch_request) */
	int need_list;		/* the state must be (re)read before watching */
	int synced;		/* the initial state has been delivered once */
	int in_init;		/* a streaming list before its end bookmark */
	unsigned gen;		/* relist generation */
	char *rv;		/* where a watch resumes; NULL = none yet */
	char *cont;		/* continue token of the paged list in progress */
	char *sync_rv;		/* resourceVersion of the last completed (re)list */
	struct kw_map map;
	struct kop_jsonl reader;	/* the body of a watch */
	size_t events;		/* events received by the current request (ERROR events not counted) */
	size_t bad_lines;	/* malformed lines received (skipped) */
	size_t shard_dropped;	/* objects outside the shard selector, dropped here (the server ignored it) */
	int shard_echoed;	/* the last LIST answered with the selector in metadata.shardInfo */
	int narrowed;		/* kw_watch_narrow since the request in flight: what it drops is not the
				   server's doing, and is not counted in shard_dropped */
	jv stream_error;	/* the Status of an ERROR event, or jv_invalid() */

	/* the refusal that kw_watch_done() reports (KW_NEXT_FORBIDDEN, FATAL, BACKOFF) */
	long err_code;
	char *err;		/* KOP_ERRLEN bytes while there is one (kw_watch_error), else NULL: a
				   thousand watches that never fail need none */
	int expired;		/* ... and it means the state must be read again (410, a resourceVersion too large) */
	int stream_failed;	/* ... and it is a streaming list's failure before its initial state (the
				   watch fell back when streaming is now 0; in KW_WL_ALWAYS it is retried) */
};

void kw_watch_init(struct kw_watch *w, const char *name, const char *path, const char *kind,
		   const char *api_version, const char *label_selector, const char *field_selector);
void kw_watch_release(struct kw_watch *w);
/* What the last refusal was (kw_watch_done), "" when none. */
const char *kw_watch_error(const struct kw_watch *w);
/*
 * Asks the server for the objects selected by a shard selector (lib/shard.h)
 * and drops here whatever else comes, for servers that ignore the parameter
 * (before the first request). 0, or -1 with err when it does not parse.
 */
int kw_watch_set_shard(struct kw_watch *w, const char *selector, char *err);
/* Sets the --watch-list mode (before the first request). */
void kw_watch_set_list(struct kw_watch *w, enum kw_watch_list mode);

/*
 * The path and query of the next request (caller frees). Resets the
 * per-request state. Its verb, for messages: kw_watch_verb().
 */
char *kw_watch_request(struct kw_watch *w);
const char *kw_watch_verb(const struct kw_watch *w);

/*
 * Body bytes of a watch or streaming list answered 200. Events are applied
 * and emitted as they complete. Returns 0, or -1 with err describing a
 * malformed line (skipped; feeding may go on).
 */
int kw_watch_feed(struct kw_watch *w, const char *data, size_t len, char *err);

/* The body of a LIST page answered 200 (consumed). -1 with err when it is no List. */
int kw_watch_list(struct kw_watch *w, jv list, char *err);

/*
 * The request ended. code: HTTP status (0 = none arrived); transport_ok:
 * the transfer completed (CURLE_OK); status: the decoded error body
 * (consumed; jv_null() when none); elapsed_ms: how long the request lasted.
 * Decides what comes next and prepares the state for it.
 */
enum kw_next kw_watch_done(struct kw_watch *w, long code, int transport_ok, jv status, int64_t elapsed_ms);

/*
 * The caller abandoned the request (idle watch, shutdown): the next request
 * resumes where the stream stopped. A streaming list that stalled before its
 * initial state is complete is not abandoned but ended with kw_watch_done()
 * (code 200, transport_ok 0, a Status whose message says so).
 */
void kw_watch_abort(struct kw_watch *w);

/*
 * Downstream is told that every object it knows of is gone (DELETED stubs,
 * as after a relist) and the map is emptied: the collection is no longer
 * watched (kwatch: the namespace of a per-namespace watch went).
 */
void kw_watch_forget(struct kw_watch *w);

/*
 * The ranges of drop leave a watch's shard selector (kwatch --shard-control:
 * the caller's pipeline no longer works for them; kop_shard_remove). The
 * objects it knows of there are forgotten without a word (downstream was
 * told), and what comes next is held to what is left. KOP_SHARD_SAME:
 * nothing changed (no shard selector, or none of its ranges in drop);
 * KOP_SHARD_LESS: the selector is narrower (a request in flight asked for
 * more: the caller may resume it with the new one, kw_watch_abort then
 * kw_watch_request); KOP_SHARD_NONE: nothing is left, the watch is to be
 * stopped.
 */
enum kop_shard_cut kw_watch_narrow(struct kw_watch *w, const struct kop_shard_sel *drop);

/* Compares resourceVersions as kube-apiserver's decimal ones: by length, then bytes. */
int kw_rv_cmp(const char *a, const char *b);

/* The map (exposed for tests). */
void kw_map_init(struct kw_map *m);
void kw_map_release(struct kw_map *m);
struct kw_entry *kw_map_get(const struct kw_map *m, const char *key);
static inline const char *kw_entry_key(const struct kw_entry *e) { return e->data; }
static inline const char *kw_entry_uid(const struct kw_entry *e) { return e->data + e->klen + 1; }
static inline const char *kw_entry_rv(const struct kw_entry *e) { return e->data + e->klen + e->ulen + 2; }

#endif
