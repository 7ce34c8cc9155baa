/*
 * kwatch: lists and watches Kubernetes resources and writes every change as
 * one JSON line {"type":"ADDED|MODIFIED|DELETED","object":{…}}, then, once
 * the initial state of every resource is out, one BOOKMARK line marked
 * k8s.io/initial-events-end. One watch per resource, all multiplexed on one
 * curl multi handle, run by its sockets' events (lib/curlev.c: a thousand
 * watches cost what is ready); lib/watch.c decides what each watch asks and emits.
 *
 * Output blocks when stdout is full (backpressure: while a line is being
 * written nothing is read from the network); a closed stdout ends kwatch as
 * SIGPIPE would; SIGTERM/SIGINT end it cleanly (exit 0).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <curl/curl.h>
#include "kop.h"
#include "kube.h"
#include "curlev.h"
#include "jqrun.h"
#include "shard.h"
#include "watch.h"
#include "tool.h"
#include "banned.h"

static const char usage[] =
	"usage: kwatch [options] RESOURCE[@NAMESPACE][:l=SELECTOR][:f=SELECTOR][:s=SELECTOR][:k=FIELDS]...\n"
	"\n"
	"Lists and watches resources; writes one JSON line per change\n"
	"{\"type\":\"ADDED|MODIFIED|DELETED\",\"object\":{...}}, and one BOOKMARK line\n"
	"(annotation k8s.io/initial-events-end) once the initial state is complete.\n"
	"\n"
	"  -n, --namespace NS         namespace of namespaced resources (default: the context's)\n"
	"  -A, --all-namespaces       all namespaces\n"
	"  -l, --selector SEL         label selector\n"
	"      --field-selector SEL   field selector\n"
	"      --shard-selector SEL   shard selector (KEP-5866), e.g. shardRange(object.metadata.\n"
	"                             namespace, '0x0000000000000000', '0x8000000000000000'):\n"
	"                             asked of the server, and applied here too when it ignores it\n"
	"      --shard-control FD     read lines from FD, each a shard selector whose ranges leave\n"
	"                             every sharded watch (resumed where it was, narrower), then\n"
	"                             write a BOOKMARK annotated kwatch/shards-removed: nothing\n"
	"                             of those ranges comes after it\n"
	"      --no-initial           do not write the initial state (the BOOKMARK line still is)\n"
	"      --once                 write the initial state and the BOOKMARK line, then exit\n"
	"      --no-strip-managed-fields  keep metadata.managedFields (stripped by default)\n"
	"      --keep FIELDS          write only these fields of each object (and its apiVersion,\n"
	"                             kind, name and namespace): metadata.labels,status.phase;\n"
	"                             a MODIFIED whose kept fields did not change is not written\n"
	"      --project JQ           jq expression applied to each object (one output each)\n"
	"      --record FILE          append every line written to stdout to FILE too\n"
	"      --idle-timeout DUR     restart a watch silent this long (default 5m)\n"
	"      --watch-list MODE      read the initial state with streaming lists: auto (the\n"
	"                             default: on a refusal, an ERROR event, or a stream that\n"
	"                             ends, is cut or stalls before its initial state is\n"
	"                             complete, that watch uses paged LIST + WATCH from then\n"
	"                             on), always (never fall back: retry with backoff) or\n"
	"                             never (paged LIST + WATCH only); default: $KOP_WATCH_LIST\n"
	"      --kubeconfig FILE, --context NAME, --request-timeout DUR (a LIST page, and a\n"
	"                             streaming list's initial state; default 60s)\n"
	"  -v, --log-level LEVEL, --log-format json|text, -h\n"
	"\n"
	"Per resource: RESOURCE@NS watches namespace NS (RESOURCE@* all namespaces;\n"
	"RESOURCE@~ one watch in each namespace that the namespaces watch writes, until\n"
	"it is deleted; a 403 there is retried, the rights may come later),\n"
	":l=SEL, :f=SEL, :s=SEL and :k=FIELDS replace the label, field and shard selector\n"
	"and --keep for that resource (an empty one clears it). Exit: 0 done (--once,\n"
	"SIGTERM), 100 bad usage, unknown resource, missing RBAC (403) or a refused\n"
	"selector, 111 setup failed (network).\n";

enum {
	OPT_FIELD_SELECTOR = OPT_TOOL_LAST,
	OPT_SHARD_SELECTOR,
	OPT_SHARD_CONTROL,
	OPT_NO_INITIAL,
	OPT_ONCE,
	OPT_STRIP,
	OPT_NO_STRIP,
	OPT_PROJECT,
	OPT_KEEP,
	OPT_RECORD,
	OPT_IDLE_TIMEOUT,
	OPT_WATCH_LIST
};

static const struct option options[] = {
	{ "namespace", required_argument, NULL, 'n' },
	{ "all-namespaces", no_argument, NULL, 'A' },
	{ "selector", required_argument, NULL, 'l' },
	{ "field-selector", required_argument, NULL, OPT_FIELD_SELECTOR },
	{ "shard-selector", required_argument, NULL, OPT_SHARD_SELECTOR },
	{ "shard-control", required_argument, NULL, OPT_SHARD_CONTROL },
	{ "no-initial", no_argument, NULL, OPT_NO_INITIAL },
	{ "once", no_argument, NULL, OPT_ONCE },
	{ "strip-managed-fields", no_argument, NULL, OPT_STRIP },
	{ "no-strip-managed-fields", no_argument, NULL, OPT_NO_STRIP },
	{ "project", required_argument, NULL, OPT_PROJECT },
	{ "keep", required_argument, NULL, OPT_KEEP },
	{ "record", required_argument, NULL, OPT_RECORD },
	{ "idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT },
	{ "watch-list", required_argument, NULL, OPT_WATCH_LIST },
	TOOL_KUBE_OPTIONS,
	TOOL_COMMON_OPTIONS,
	{ NULL, 0, NULL, 0 }
};

/* One watched collection and its transfer. */
struct res {
	struct kw_watch w;
	struct kube_resource r;
	char *ns;			/* NULL: all namespaces (or cluster-scoped) */
	CURL *easy;			/* the transfer in flight, or NULL */
	struct curl_slist *hdrs;
	const char *verb;		/* of the transfer in flight */
	struct kop_buf body;		/* a LIST page or an error body */
	long code;			/* HTTP status, once the headers are in */
	char retry_after[32];
	char curl_err[CURL_ERROR_SIZE];
	int64_t started, last_rx;
	int64_t next_at;		/* when to send the next request; -1 = nothing planned */
	int done;			/* --once: this one is complete */
	struct kop_backoff bo;
	jv keep;			/* the fields kept (kop_json_keep), or jv_null(): whole objects */
	jv keep_read;			/* those and the identity (keep_fields), read from an object's text */
	long refused_code;		/* the streaming list failed and the watch fell back: said after the paged LIST */
	char *refused;			/* ... with the server's message (NULL: none) */
	char *problem;			/* why its initial state cannot be read (NULL = none): the stats note */
	int shard_said;			/* what shard_note() said: 0 nothing, 1 none outside in the initial
					   events of a streaming list, 2 whether the server applies it */
	size_t shard_counted;		/* w.shard_dropped already added to kwatch_shard_dropped_total */
	int dyn;			/* one of a RESOURCE@~ watch's, in namespace ns */
	int dropped;			/* dyn: its namespace went (or left the shard selector); reaped by run() */
	unsigned forbidden;		/* dyn: 403s in a row (no rights in ns yet) */
};

/* A RESOURCE@~ argument: one watch per namespace that the namespaces watch writes. */
struct tmpl {
	char *arg, *name, *label, *field, *shard, *keep;
	struct kube_resource r;		/* name resolved at the start: each namespace's watch takes a copy */
	struct kop_shard_sel sel;	/* shard parsed; sel.n == 0: none */
	int none_left;			/* --shard-control removed every range of sel: no namespace wanted */
};

static struct {
	const char *ns;
	int all_ns;
	const char *label, *field, *shard;
	int no_initial, once, strip;
	const char *project, *record, *keep;
	long idle_ms;
	enum kw_watch_list watch_list;
	int control_fd;
} opt = { .strip = 1, .idle_ms = 300000, .watch_list = KW_WL_AUTO, .control_fd = -1 };

static struct kube_client *client;
static CURLM *multi;
static struct kop_curlev cev;	/* multi, run by its sockets' events */
static int broken_said;		/* cev.broken logged */
static struct res **res;
static size_t nres;
static struct tmpl *tmpl;
static size_t ntmpl;
static struct res *ns_res;	/* the namespaces watch the RESOURCE@~ ones follow */
static size_t nforbidden;	/* RESOURCE@~ watches waiting for their rights (forbidden > 0) */
static size_t ndropped;		/* watches marked dropped since reap() last ran */
static struct kop_jq *projection;
static int record_fd = -1;
static int sigpipe_fd[2] = { -1, -1 };
static volatile sig_atomic_t stopping;
static int bookmark_written;
static struct kop_buf control;	/* --shard-control: a line not yet complete */

/* ---- output ----------------------------------------------------------------- */

/* Blocking write of a whole buffer, even to an O_NONBLOCK fd. 0, or -1 with errno. */
static int write_blocking(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EAGAIN) {
			struct pollfd pfd = { .fd = fd, .events = POLLOUT };

			if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
				return -1;
			continue;
		}
		if (n < 0 && errno == EINTR) {
			if (stopping)
				return 1;	/* SIGTERM while blocked: drop the rest, we are ending */
			continue;
		}
		return -1;
	}
	return 0;
}

/*
 * Once SIGTERM came: what was made before it, written while the reader takes
 * it, a piece at a time (PIPE_BUF at most: a pipe with room takes it
 * without blocking) once stdout has room, a second at most for each. 0, 1
 * when the rest was dropped, or -1 with errno.
 */
static int write_stopping(int fd, const char *p, size_t len)
{
	while (len) {
		struct pollfd pfd = { .fd = fd, .events = POLLOUT };
		ssize_t n;

		if (poll(&pfd, 1, 1000) <= 0 || !(pfd.revents & POLLOUT))
			return 1;
		n = write(fd, p, len < PIPE_BUF ? len : PIPE_BUF);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * The lines of one pass of the run loop, written together once the pass is
 * done (out_flush, before it waits): one write, and one wakeup of the reader,
 * for the events of a burst rather than one each. Past PENDING_MAX (a pipe's
 * capacity) they are written at once.
 */
#define PENDING_MAX 65536
static struct kop_buf pending = KOP_BUF_INIT;

/* Writes the pending lines to stdout, then to the record file. */
static void out_flush(void)
{
	int rc;

	if (!pending.len)
		return;
	rc = stopping ? write_stopping(1, pending.buf, pending.len) : write_blocking(1, pending.buf, pending.len);
	if (rc < 0)
		tool_stdout_failed();	/* EPIPE: quiet end, as SIGPIPE */
	if (!rc && record_fd >= 0 && write_blocking(record_fd, pending.buf, pending.len) < 0)
		die(KOP_EXIT_TEMP, "unable to write to '%s': %s", opt.record, strerror(errno));
	if (pending.cap > 4 * PENDING_MAX)
		kop_buf_release(&pending);	/* (a line that large is rare: its room is not kept) */
	else
		kop_buf_reset(&pending);
}

/* A line is complete in pending. */
static void out_done(void)
{
	if (pending.len >= PENDING_MAX)
		out_flush();
}

/* One event line: what jv_dump_string of {"type","object"} writes, by kop_json_dump's faster writer. */
static void out_event(const char *type, jv obj)
{
	if (stopping) {
		jv_free(obj);	/* (made after SIGTERM: dropped) */
		return;
	}
	kop_buf_adds(&pending, "{\"type\":\"");
	kop_buf_adds(&pending, type);
	kop_buf_adds(&pending, "\",\"object\":");
	kop_json_dump_buf(&pending, obj);
	kop_buf_add(&pending, "}\n", 2);
	out_done();
}

/* The same with the object's text already made: text[0..len) but for [cut_b..cut_e). */
static void out_text_cut(const char *type, const char *text, size_t len, size_t cut_b, size_t cut_e)
{
	if (stopping)
		return;
	kop_buf_grow(&pending, len + 40);
	kop_buf_adds(&pending, "{\"type\":\"");
	kop_buf_adds(&pending, type);
	kop_buf_adds(&pending, "\",\"object\":");
	kop_buf_add(&pending, text, cut_b);
	kop_buf_add(&pending, text + cut_e, len - cut_e);
	kop_buf_add(&pending, "}\n", 2);
	out_done();
}

static void out_text(const char *type, const char *text, size_t len)
{
	out_text_cut(type, text, len, len, len);
}

/*
 * --keep: obj (consumed) reduced to the fields kept and its identity, in
 * the order ireconcile's projection makes (the kept fields, then
 * metadata's name and namespace, apiVersion, kind): a program's `project`
 * list applied here gives the text ireconcile would make of it.
 */
static jv keep_fields(jv obj, jv keep)
{
	jv meta = kop_json_member(jv_copy(obj), "metadata");
	jv name = kop_json_member(jv_copy(meta), "name"), ns = kop_json_member(meta, "namespace");
	jv av = kop_json_member(jv_copy(obj), "apiVersion"), kind = kop_json_member(jv_copy(obj), "kind");
	jv out = kop_json_keep(obj, keep), m = jv_object_get(jv_copy(out), kop_json_key("metadata"));

	if (jv_get_kind(m) != JV_KIND_OBJECT) {
		jv_free(m);
		m = jv_object();
	}
	if (jv_get_kind(name) == JV_KIND_STRING)
		m = jv_object_set(m, kop_json_key("name"), name);
	else
		jv_free(name);
	if (jv_get_kind(ns) == JV_KIND_STRING)
		m = jv_object_set(m, kop_json_key("namespace"), ns);
	else
		jv_free(ns);
	out = jv_object_set(out, kop_json_key("metadata"), m);
	out = jv_is_valid(av) && jv_get_kind(av) != JV_KIND_NULL ? jv_object_set(out, kop_json_key("apiVersion"), av)
								     : (jv_free(av), out);
	out = jv_is_valid(kind) && jv_get_kind(kind) != JV_KIND_NULL ? jv_object_set(out, kop_json_key("kind"), kind)
								       : (jv_free(kind), out);
	return out;
}

/* 1 when obj's metadata is an object whose name and namespace, if there, are strings. */
static int plain_identity(jv obj)
{
	jv m = jv_object_get(jv_copy(obj), kop_json_key("metadata"));
	int ok = jv_get_kind(m) == JV_KIND_OBJECT;

	for (int i = 0; ok && i < 2; i++) {
		jv v = jv_object_get(jv_copy(m), kop_json_key(i ? "namespace" : "name"));

		ok = !jv_is_valid(v) || jv_get_kind(v) == JV_KIND_STRING;
		jv_free(v);
	}
	jv_free(m);
	return ok;
}

/*
 * r->keep_read from r->keep; an object is handed on as its text (lib/watch.c)
 * unless --project reads it whole: emit writes it as it came, or reads from
 * it the fields kept.
 */
static void set_keep_read(struct res *r)
{
	r->keep_read = jv_null();
	if (jv_get_kind(r->keep) == JV_KIND_ARRAY)
		r->keep_read = jv_array_concat(jv_copy(r->keep),
					       JV_ARRAY(JV_ARRAY(jv_string("metadata"), jv_string("name")),
							JV_ARRAY(jv_string("metadata"), jv_string("namespace")),
							JV_ARRAY(jv_string("apiVersion")), JV_ARRAY(jv_string("kind"))));
	r->w.pass_text = !opt.project;
}

/* 64-bit FNV-1a of the text (lib/shard.c's), never 0 (the memo's "nothing yet"). */
static uint64_t text_hash(const char *p, size_t n)
{
	uint64_t h = kop_fnv1a64(p, n);

	return h ? h : 1;
}

static void ns_seen(jv ns);
static void rights_may_have_come(jv obj);

/*
 * kwatch_events_total by type: counted here, and added to the metric once a
 * pass (counts_flush), since tool_metric_add makes its series' key each call.
 */
static const char *const event_types[] = { "ADDED", "MODIFIED", "DELETED" };
static unsigned long event_counts[sizeof(event_types) / sizeof(event_types[0])];

static void count_add(const char *type, double n)
{
	char labels[64];

	snprintf(labels, sizeof(labels), "type=%s", type);
	tool_metric_add("kwatch_events_total", labels, n);
}

static void count_event(const char *type)
{
	size_t i;

	for (i = 0; i < sizeof(event_types) / sizeof(event_types[0]); i++)
		if (!strcmp(type, event_types[i])) {
			event_counts[i]++;
			return;
		}
	count_add(type, 1);
}

static void counts_flush(void)
{
	size_t i;

	for (i = 0; i < sizeof(event_types) / sizeof(event_types[0]); i++)
		if (event_counts[i]) {
			count_add(event_types[i], (double)event_counts[i]);
			event_counts[i] = 0;
		}
}

/*
 * lib/watch.c's emit callback: strip, keep, project, print. An object handed
 * on as its text (a watch whose objects are written whole) is written as it
 * came, its managedFields cut, unless this one needs reading: the namespaces
 * that make watches, a RoleBinding while rights are missing.
 */
static void emit(void *ctx, const char *type, jv obj, const struct kw_text *text, uint64_t *memo)
{
	struct res *r = ctx;
	char err[KOP_ERRLEN];
	int keeping = jv_get_kind(r->keep) == JV_KIND_ARRAY;
	int whole = !text;	/* read whole: by lib/watch.c, or below */
	int kept_read = 0;	/* obj holds the fields kept and the identity, read from the text */

	if (r->dropped) {
		jv_free(obj);	/* its namespace went: downstream was told already */
		return;
	}
	if (text && !projection && !(r == ns_res && ntmpl) && !(nforbidden && !r->dyn)) {
		jv kept;

		if (!keeping) {
			jv_free(obj);
			if (opt.strip)
				out_text_cut(type, text->obj, text->len, text->cut_b, text->cut_e);
			else
				out_text(type, text->obj, text->len);
			count_event(type);
			return;
		}
		/* the fields kept and the identity, read alone: all keep_fields reads */
		if (kop_json_keep_text(text->obj, text->len, r->keep_read, &kept) == 0) {
			jv_free(obj);
			obj = kept;
			text = NULL;
			kept_read = 1;
		}
	}
	if (text) {
		whole = 1;
		jv_free(obj);
		obj = kop_json_read(text->obj, text->len);
		if (!jv_is_valid(obj)) {
			jv_free(obj);	/* (its message may quote a Secret) */
			tool_logj(LOG_WARN, JV_OBJECT(jv_string("resource"), jv_string(r->w.name)),
				  "a %s event from '%s' is no JSON object: skipped", type, r->w.name);
			r->w.bad_lines++;
			return;
		}
	}
	if (whole)
		tool_metric_add("kwatch_objects_parsed_total", NULL, 1);
	if (r == ns_res && ntmpl)
		ns_seen(JV_OBJECT(jv_string("type"), jv_string(type), jv_string("object"), jv_copy(obj)));
	if (nforbidden && !r->dyn)
		rights_may_have_come(obj);

	if (opt.strip) {
		jv meta = jv_object_get(jv_copy(obj), jv_string("metadata"));

		if (jv_get_kind(meta) == JV_KIND_OBJECT) {
			jv mf = jv_object_get(jv_copy(meta), jv_string("managedFields"));

			if (jv_is_valid(mf))
				obj = jv_object_set(obj, jv_string("metadata"),
						    jv_object_delete(meta, jv_string("managedFields")));
			else
				jv_free(meta);
			jv_free(mf);
		} else {
			jv_free(meta);
		}
	}
	/*
	 * Read from the text, obj is already what keep_fields makes (r->keep_read
	 * lists the same fields in its order), but for an object whose metadata
	 * is no object or whose name or namespace is no string (keep_fields
	 * makes metadata an object and keeps only strings there).
	 */
	if (keeping && (!kept_read || !plain_identity(obj)))
		obj = keep_fields(obj, r->keep);
	if (projection) {
		jv out;

		/* (jq's message may quote the value it failed on: never a Secret's) */
		const char *kind = kop_json_cstr(obj, "kind");
		int secret = kind && !strcmp(kind, "Secret");
		char what[320];
		jv meta = jv_object_get(jv_copy(obj), jv_string("metadata"));
		const char *ns = kop_json_cstr(meta, "namespace"), *name = kop_json_cstr(meta, "name");

		/* (obj goes to jq: what names it is copied first) */
		snprintf(what, sizeof(what), "%s '%s%s%s'", kind ? kind : r->w.kind, ns ? ns : "", ns ? "/" : "",
			 name ? name : "?");
		jv_free(meta);
		if (kop_jq_run1(projection, obj, &out, err) < 0) {
			tool_logj(LOG_WARN, JV_OBJECT(jv_string("resource"), jv_string(r->w.name)),
				  "unable to project the %s event of %s: %s", type, what,
				  secret ? "the jq error on a Secret is not logged (it may quote its data)" : err);
			tool_metric_add("kwatch_project_errors_total", NULL, 1);
			return;
		}
		obj = out;
	}
	if (keeping && memo) {
		/* what downstream sees of it: a MODIFIED that changes none of it is no news */
		struct kop_buf kept = KOP_BUF_INIT;
		uint64_t h;

		kop_json_dump_buf(&kept, obj);
		h = text_hash(kept.buf, kept.len);
		if (*memo == h && !strcmp(type, "MODIFIED")) {
			kop_buf_release(&kept);
			tool_metric_add("kwatch_unchanged_total", NULL, 1);
			return;
		}
		*memo = h;
		out_text(type, kept.buf, kept.len);
		kop_buf_release(&kept);
	} else {
		out_event(type, obj);
	}
	count_event(type);
}

/* The one line that says the view is complete. */
static void out_bookmark(void)
{
	const char *rv = "";
	size_t i;

	for (i = 0; i < nres; i++) {
		const char *v = res[i]->w.sync_rv ? res[i]->w.sync_rv : "";

		if (kw_rv_cmp(v, rv) > 0)
			rv = v;
	}
	out_event("BOOKMARK",
		  JV_OBJECT(jv_string("kind"), jv_string(res[0]->r.kind), jv_string("apiVersion"),
			    jv_string(res[0]->r.api_version), jv_string("metadata"),
			    JV_OBJECT(jv_string("resourceVersion"), jv_string(rv), jv_string("annotations"),
				      JV_OBJECT(jv_string("k8s.io/initial-events-end"), jv_string("true")))));
	bookmark_written = 1;
}

/* ---- transfers ------------------------------------------------------------------ */

/*
 * What kwatch knows of the server's use of a watch's shard selector, said
 * once at info (and the objects outside it that the server sent, counted in
 * kwatch_shard_dropped_total). A LIST tells (listed: one was just read): the
 * server echoes the selector in metadata.shardInfo when it applies it. A
 * streaming list or a watch does not: Kubernetes 1.36 echoes shardInfo only
 * in a list's metadata, and the initial-events-end bookmark is an object, with
 * none. There the first object outside the selector says the server ignores
 * it; until one comes, the end of the initial events says that none was
 * outside, which is all that is known.
 */
static void shard_note(struct res *r, int listed)
{
	const char *name = r->w.name;

	if (!r->w.shard)
		return;
	if (r->w.shard_dropped > r->shard_counted) {
		tool_metric_add("kwatch_shard_dropped_total", NULL, (double)(r->w.shard_dropped - r->shard_counted));
		r->shard_counted = r->w.shard_dropped;
	}
	if (r->shard_said == 2)
		return;
	if (listed) {
		r->shard_said = 2;
		tool_logj(LOG_INFO,
			  JV_OBJECT(jv_string("resource"), jv_string(name), jv_string("serverSharding"),
				    jv_bool(r->w.shard_echoed)),
			  r->w.shard_echoed ? "the server applies the shard selector of '%s' (metadata.shardInfo)"
			  : "the server ignores the shard selector of '%s' (no metadata.shardInfo): kwatch applies it",
			  name);
	} else if (r->w.shard_dropped) {
		r->shard_said = 2;
		tool_logj(LOG_INFO,
			  JV_OBJECT(jv_string("resource"), jv_string(name), jv_string("serverSharding"), jv_false()),
			  "the server ignores the shard selector of '%s' (it sent objects outside it): kwatch applies it",
			  name);
	} else if (!r->shard_said && r->w.synced && r->w.req == KW_REQ_STREAM && !r->dyn) {
		r->shard_said = 1;
		tool_logj(LOG_INFO, JV_OBJECT(jv_string("resource"), jv_string(name)),
			  "the server sent nothing outside the shard selector of '%s' in its initial events (a "
			  "streaming list carries no metadata.shardInfo; kwatch drops and says what comes outside it)",
			  name);
	}
}

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
	struct res *r = ctx;
	char err[KOP_ERRLEN];

	n *= size;
	r->last_rx = kop_mono_ms();
	if (!r->code)
		curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->code);
	if (r->code == 200 && r->w.req != KW_REQ_LIST) {
		if (kw_watch_feed(&r->w, p, n, err) < 0)
			tool_logj(LOG_WARN, JV_OBJECT(jv_string("resource"), jv_string(r->w.name)), "%s", err);
		shard_note(r, 0);
		if (stopping)
			return 0;
		if (opt.once && r->w.synced) {
			/* --once: the state is out; nothing after it is wanted */
			r->w.quiet = 1;
			r->done = 1;
			return 0;
		}
		return n;
	}
	if (r->body.len + n > ((size_t)1 << 30))
		return 0;	/* a runaway body: fail the transfer */
	kop_buf_add(&r->body, p, n);
	return n;
}

static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
	struct res *r = ctx;

	n *= size;
	if (n > 12 && !strncasecmp(p, "retry-after:", 12)) {
		size_t i = 12, j = 0;

		while (i < n && (p[i] == ' ' || p[i] == '\t'))
			i++;
		while (i < n && p[i] != '\r' && p[i] != '\n' && j < sizeof(r->retry_after) - 1)
			r->retry_after[j++] = p[i++];
		r->retry_after[j] = 0;
	}
	return n;
}

static void start(struct res *r)
{
	char err[KOP_ERRLEN];
	char *path = kw_watch_request(&r->w);
	int64_t now = kop_mono_ms();

	r->verb = kw_watch_verb(&r->w);
	r->hdrs = NULL;
	r->easy = kube_easy_new(client, "GET", path, &r->hdrs, err);
	if (!r->easy) {
		unsigned d = kop_backoff_next(&r->bo);

		tool_logj(LOG_ERROR, JV_OBJECT(jv_string("resource"), jv_string(r->w.name)),
			  "unable to %s '%s': %s; retrying in %u ms", r->verb, r->w.name, err, d);
		kw_watch_abort(&r->w);
		r->next_at = now + d;
		free(path);
		return;
	}
	tool_logj(LOG_DEBUG, JV_OBJECT(jv_string("resource"), jv_string(r->w.name)), "GET %s", path);
	free(path);
	kop_buf_reset(&r->body);
	r->code = 0;
	r->retry_after[0] = 0;
	r->curl_err[0] = 0;
	r->started = r->last_rx = now;
	r->next_at = -1;
	curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(r->easy, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(r->easy, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r);
	curl_easy_setopt(r->easy, CURLOPT_ERRORBUFFER, r->curl_err);
	curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(r->easy, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(r->easy, CURLOPT_TCP_KEEPIDLE, 30L);
	curl_easy_setopt(r->easy, CURLOPT_TCP_KEEPINTVL, 15L);
	curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT_MS, 30000L);
	if (r->dyn)
		curl_easy_setopt(r->easy, CURLOPT_BUFFERSIZE, 1024L);
	/* A list is a plain request; a watch lasts as long as the server keeps it. */
	curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS,
			 r->w.req == KW_REQ_LIST ? (tool_kube.request_timeout_ms ? tool_kube.request_timeout_ms : 60000L)
						 : 0L);
	curl_multi_add_handle(multi, r->easy);
}

static void drop_transfer(struct res *r)
{
	curl_multi_remove_handle(multi, r->easy);
	curl_easy_cleanup(r->easy);
	curl_slist_free_all(r->hdrs);
	r->easy = NULL;
	r->hdrs = NULL;
}

static void schedule_backoff(struct res *r, long retry_after_s, int64_t now)
{
	int64_t d = kop_backoff_next(&r->bo);

	if (retry_after_s > 0 && retry_after_s * 1000 > d)
		d = retry_after_s * 1000;
	r->next_at = now + d;
}

/* How long a streaming list may take to deliver its initial state. */
static int64_t stall_ms(void)
{
	return tool_kube.request_timeout_ms ? tool_kube.request_timeout_ms : 60000;
}

/* *dst set to the formatted text (fmt NULL: to NULL), what it held freed. (A watch holds these
 * only while something is wrong: at a thousand watches, fixed buffers were a megabyte.) */
static void setf(char **dst, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void setf(char **dst, const char *fmt, ...)
{
	struct kop_buf b = KOP_BUF_INIT;
	va_list ap;

	free(*dst);
	*dst = NULL;
	if (!fmt)
		return;
	va_start(ap, fmt);
	kop_buf_vaddf(&b, fmt, ap);
	va_end(ap);
	*dst = kop_buf_detach(&b, NULL);
}

/* The stats note (tool_metric_note): the first watch that cannot read its initial state, and why. */
static void update_note(void)
{
	size_t i;

	for (i = 0; i < nres; i++)
		if (res[i]->problem && !res[i]->w.synced) {
			tool_metric_note(res[i]->problem);
			return;
		}
	tool_metric_note(NULL);
}

/*
 * A transfer ended (stalled: a streaming list that did not complete its
 * initial state in time, abandoned by us; cc is not looked at). Returns an
 * exit code to end kwatch with, or -1 to go on.
 */
static int finish(struct res *r, CURLcode cc, int stalled)
{
	int64_t now = kop_mono_ms();
	long code = 0, retry_after_s = -1;
	int transport_ok = cc == CURLE_OK;
	jv status = jv_null();
	enum kw_next next;
	char err[KOP_ERRLEN];
	const char *verb = r->verb;

	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
	drop_transfer(r);
	tool_metric_request("GET", code);
	if (r->done || stopping) {
		kw_watch_abort(&r->w);
		return -1;
	}
	if (stalled) {
		/* The server took the request: its stall counts as its answer (lib/watch.h). */
		code = 200;
		transport_ok = 0;
		snprintf(err, sizeof(err), "no initial-events-end bookmark within %lld ms", (long long)stall_ms());
		status = JV_OBJECT(jv_string("message"), jv_string(err));
	} else if (r->w.req == KW_REQ_LIST && code == 200 && transport_ok) {
		jv list = jv_parse_sized(r->body.buf ? r->body.buf : "", (int)r->body.len);

		if (!jv_is_valid(list)) {
			char m[256];

			/* (never the body itself: a list of Secrets holds their data) */
			tool_logj(LOG_WARN, JV_OBJECT(jv_string("resource"), jv_string(r->w.name)),
				  "unable to read the list of '%s': %s", r->w.name,
				  kop_json_parse_error(list, m, sizeof(m)));
			transport_ok = 0;
		} else if (kw_watch_list(&r->w, list, err) < 0) {
			tool_logj(LOG_WARN, JV_OBJECT(jv_string("resource"), jv_string(r->w.name)), "%s", err);
			transport_ok = 0;
		} else {
			shard_note(r, 1);
		}
	} else if (code != 200 || !transport_ok) {
		struct kube_response resp;

		kube_response_from(&resp, code, r->body.buf ? r->body.buf : "", r->body.len,
				   r->retry_after[0] ? r->retry_after : NULL, cc, r->curl_err);
		status = jv_copy(resp.body);
		if (jv_get_kind(status) != JV_KIND_OBJECT && resp.message) {
			jv_free(status);
			status = JV_OBJECT(jv_string("message"), jv_string(resp.message));
		}
		retry_after_s = resp.retry_after_s;
		kube_response_release(&resp);
	}
	kop_buf_release(&r->body);	/* a LIST page can be megabytes: do not keep it */
	next = kw_watch_done(&r->w, code, transport_ok, status, now - r->started);
	if (r->w.events > 0 && !r->w.stream_failed)
		kop_backoff_reset(&r->bo);	/* it was healthy: the next failure is a first one */
	if (next != KW_NEXT_FORBIDDEN && r->forbidden) {
		r->forbidden = 0;
		nforbidden--;
	}
	if (r->refused_code && code == 200 && transport_ok) {
		/*
		 * The LIST after a failed streaming list was answered: a server
		 * without them is worth a line, once. A refusal of both (a bad
		 * selector) is one refusal, said once as an error below; a LIST
		 * that failed otherwise (a 5xx, the network) says nothing yet.
		 */
		if (r->refused_code != 200)
			tool_logj(LOG_INFO, JV_OBJECT(jv_string("resource"), jv_string(r->w.name), jv_string("code"),
						      jv_number(r->refused_code)),
				  "streaming list of '%s' refused (%ld: %s): read with paged LISTs and watches from now on",
				  r->w.name, r->refused_code, r->refused ? r->refused : "");
		else
			tool_logj(LOG_INFO, JV_OBJECT(jv_string("resource"), jv_string(r->w.name)),
				  "streaming list of '%s' failed before its initial state was complete (%s): read with "
				  "paged LISTs and watches from now on",
				  r->w.name, r->refused ? r->refused : "");
		r->refused_code = 0;
		setf(&r->refused, NULL);
	} else if (next == KW_NEXT_FATAL || next == KW_NEXT_FORBIDDEN) {
		r->refused_code = 0;
	}
	if (next == KW_NEXT_NOW || r->w.synced)
		setf(&r->problem, NULL);
	switch (next) {
	case KW_NEXT_NOW:
		update_note();
		if (opt.once && r->w.synced)
			r->done = 1;	/* --once: no watch after the state */
		if (!r->w.err_code && !r->w.need_list && !r->done && !strcmp(verb, "watch"))
			tool_logj(LOG_DEBUG, JV_OBJECT(jv_string("resource"), jv_string(r->w.name)),
				  "%s of '%s' ended (%zu events); resuming at resourceVersion %s", verb, r->w.name,
				  r->w.events, r->w.rv ? r->w.rv : "");
		if (r->w.stream_failed) {	/* it fell back: said once the LIST is answered */
			r->refused_code = r->w.err_code;
			setf(&r->refused, "%s", kw_watch_error(&r->w));
			tool_metric_add("kwatch_watch_list_fallbacks_total", NULL, 1);
		}
		r->next_at = now;
		return -1;
	case KW_NEXT_AUTH:
		kube_auth_failed(client);
		/* fall through */
	case KW_NEXT_BACKOFF:
		schedule_backoff(r, retry_after_s, now);
		if (r->w.stream_failed) {
			/* --watch-list=always: what the server said, at each retry (a loop, but never a silent one) */
			tool_logj(LOG_ERROR, JV_OBJECT(jv_string("resource"), jv_string(r->w.name), jv_string("code"),
						       jv_number(r->w.err_code)),
				  "streaming list of '%s' failed before its initial state was complete (%ld: %s) and "
				  "--watch-list=always does not fall back to paged LISTs; again in %lld ms",
				  r->w.name, r->w.err_code, kw_watch_error(&r->w), (long long)(r->next_at - now));
			setf(&r->problem, "streaming list of '%s' failed (%ld: %s) and --watch-list=always does not fall back",
				 r->w.name, r->w.err_code, kw_watch_error(&r->w));
		} else if (r->w.expired) {
			tool_metric_add("kwatch_relists_total", NULL, 1);
			tool_logj(LOG_INFO, JV_OBJECT(jv_string("resource"), jv_string(r->w.name)),
				  "resourceVersion of '%s' %s (%s); reading the state again in %lld ms", r->w.name,
				  r->w.err_code == 410 ? "expired" : "is newer than the server's",
				  kw_watch_error(&r->w), (long long)(r->next_at - now));
		} else {
			tool_logj(r->w.synced ? LOG_WARN : LOG_INFO,
				  JV_OBJECT(jv_string("resource"), jv_string(r->w.name), jv_string("code"),
					    jv_number(code)),
				  "%s of '%s' ended: %s; again in %lld ms", verb, r->w.name, kw_watch_error(&r->w),
				  (long long)(r->next_at - now));
			if (!r->w.synced && r->w.err_code)
				setf(&r->problem, "%s of '%s' failed (%ld: %s); retrying", verb,
					 r->w.name, r->w.err_code, kw_watch_error(&r->w));
			else if (!r->w.synced)
				setf(&r->problem, "%s of '%s' failed (%s); retrying", verb,
					 r->w.name, kw_watch_error(&r->w));
		}
		update_note();
		return -1;
	case KW_NEXT_FORBIDDEN: {
		const char *dot = *r->r.group ? "." : "";

		if (r->dyn) {
			/*
			 * A namespace of the operator's own: its rights there come
			 * from a RoleBinding it makes right after the namespace. Not
			 * there yet (or deleted by hand: the operator puts it back):
			 * again after the backoff; never the end of kwatch.
			 */
			schedule_backoff(r, -1, now);
			if (!r->forbidden++)
				nforbidden++;
			tool_logj(r->forbidden > 8 ? LOG_WARN : LOG_INFO,
				  JV_OBJECT(jv_string("resource"), jv_string(r->w.name), jv_string("namespace"),
					    jv_string(r->ns), jv_string("code"), jv_number(403)),
				  "no right to %s '%s%s%s' in namespace '%s' yet (%u in a row; its RoleBinding may not be "
				  "there yet); again in %lld ms",
				  verb, r->r.resource, dot, r->r.group, r->ns, r->forbidden, (long long)(r->next_at - now));
			setf(&r->problem, "no right to %s '%s%s%s' in namespace '%s' yet", verb,
				 r->r.resource, dot, r->r.group, r->ns);
			update_note();
			return -1;
		}
		jv fields = JV_OBJECT(jv_string("resource"), jv_string(r->w.name), jv_string("verb"), jv_string(verb),
				      jv_string("code"), jv_number(403));

		if (r->ns)
			fields = jv_object_set(fields, jv_string("namespace"), jv_string(r->ns));
		/* the resource as kubectl names it ("deployments.apps"), its scope in words: not the argument */
		tool_logj(LOG_ERROR, fields,
			  "forbidden: cannot %s '%s%s%s' %s%s%s: %s (missing RBAC: grant '%s' on '%s%s%s')", verb,
			  r->r.resource, dot, r->r.group,
			  r->ns ? "in namespace '" : r->r.namespaced ? "in all namespaces" : "at the cluster scope",
			  r->ns ? r->ns : "", r->ns ? "'" : "", kw_watch_error(&r->w), verb, r->r.resource, dot, r->r.group);
		setf(&r->problem, "forbidden: cannot %s '%s%s%s' %s%s%s: %s", verb, r->r.resource,
			 dot, r->r.group,
			 r->ns ? "in namespace '" : r->r.namespaced ? "in all namespaces" : "at the cluster scope",
			 r->ns ? r->ns : "", r->ns ? "'" : "", kw_watch_error(&r->w));
		update_note();
		return KOP_EXIT_PERM;
	}
	case KW_NEXT_FATAL:
		tool_logj(LOG_ERROR, JV_OBJECT(jv_string("resource"), jv_string(r->w.name), jv_string("verb"),
					       jv_string(verb), jv_string("code"), jv_number(r->w.err_code)),
			  "unable to %s '%s': %s", verb, r->w.name, kw_watch_error(&r->w));
		setf(&r->problem, "unable to %s '%s': %s", verb, r->w.name, kw_watch_error(&r->w));
		update_note();
		return KOP_EXIT_PERM;
	}
	return -1;
}

/* ---- the loop --------------------------------------------------------------------- */

static void on_signal(int sig)
{
	int e = errno;
	char c = (char)sig;

	stopping = 1;
	/* A full pipe means a wakeup is pending anyway. */
	(void)!write(sigpipe_fd[1], &c, 1);
	errno = e;
}

static void setup_signals(void)
{
	struct sigaction sa;

	if (pipe2(sigpipe_fd, O_CLOEXEC | O_NONBLOCK) < 0)
		die(KOP_EXIT_TEMP, "unable to create a pipe: %s", strerror(errno));
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;	/* no SA_RESTART: a write blocked on a full stdout must see EINTR */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

static void reap(void);
static void control_read(void);

/* Whether every watch has delivered its initial state (those stopped aside). */
static int synced(void)
{
	size_t i;

	for (i = 0; i < nres; i++)
		/* (a namespace of the operator's where it has no rights yet holds nothing up) */
		if (!res[i]->w.synced && !res[i]->dropped && !(res[i]->dyn && res[i]->forbidden))
			return 0;
	return 1;
}

/*
 * After a pass that wrote lines, the watches' sockets are left for GATHER_MS
 * (the control fd and the signals are not): the events that come meanwhile
 * are read in one pass and written in one write, rather than a pass, a write
 * and a wakeup of the reader each. A burst of events is handed on at most
 * GATHER_MS later.
 */
#define GATHER_MS 2

static int run(void)
{
	int64_t gather_until = 0;

	for (;;) {
		int64_t now = kop_mono_ms(), wake = now + 1000, cwait;
		struct pollfd pfd[4];
		CURLMsg *m;
		int left, all_synced, all_done = 1;
		size_t i;

		if (stopping)
			return KOP_EXIT_OK;
		reap();
		for (i = 0; i < nres; i++) {
			struct res *r = res[i];

			if (r->easy && r->w.narrowed && !r->dyn &&	/* (one namespace: its answer is the same) */
			    (r->w.req == KW_REQ_WATCH || (r->w.req == KW_REQ_STREAM && !r->w.in_init))) {
				/* --shard-control: on from where it was, asking for less */
				drop_transfer(r);
				kw_watch_abort(&r->w);
				r->next_at = now;
			}
			if (!r->easy && !r->done && r->next_at >= 0 && now >= r->next_at)
				start(r);
			if (r->easy && r->w.req == KW_REQ_STREAM && r->w.need_list && now - r->started >= stall_ms()) {
				int rc = finish(r, CURLE_OK, 1);

				if (rc >= 0)
					return rc;
			} else if (r->easy && r->w.req != KW_REQ_LIST && now - r->last_rx >= opt.idle_ms) {
				tool_logj(LOG_INFO, JV_OBJECT(jv_string("resource"), jv_string(r->w.name)),
					  "no news from '%s' for %lld ms: restarting its watch", r->w.name,
					  (long long)(now - r->last_rx));
				tool_metric_add("kwatch_idle_restarts_total", NULL, 1);
				drop_transfer(r);
				kw_watch_abort(&r->w);
				r->next_at = now;
			}
		}
		kop_curlev_run(&cev, kop_mono_ms());
		if (cev.broken && !broken_said) {
			log_warn("the epoll set refused a socket (%s): the watches are run every 50 ms from now on",
				 strerror(cev.broken_errno));
			broken_said = 1;
		}
		while ((m = curl_multi_info_read(multi, &left))) {
			struct res *r;
			int rc;

			if (m->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
			rc = finish(r, m->data.result, 0);
			if (rc >= 0)
				return rc;
		}
		/* (each a walk of every watch: asked only while its answer is used) */
		all_synced = (!bookmark_written || opt.once) && synced();
		if (all_synced && !bookmark_written && !stopping)
			out_bookmark();
		if (opt.once && all_synced) {
			for (i = 0; i < nres; i++) {
				int blocked = res[i]->dyn && res[i]->forbidden;

				all_done &= res[i]->done || (res[i]->w.synced && !res[i]->easy) || blocked;
			}
			if (all_done)
				return KOP_EXIT_OK;
		}
		counts_flush();
		tool_metrics_flush(0);
		now = kop_mono_ms();
		for (i = 0; i < nres; i++) {
			if (!res[i]->easy && !res[i]->done && res[i]->next_at >= 0 && res[i]->next_at < wake)
				wake = res[i]->next_at;
			if (res[i]->easy && res[i]->w.req != KW_REQ_LIST && res[i]->last_rx + opt.idle_ms < wake)
				wake = res[i]->last_rx + opt.idle_ms;
			if (res[i]->easy && res[i]->w.req == KW_REQ_STREAM && res[i]->w.need_list &&
			    res[i]->started + stall_ms() < wake)
				wake = res[i]->started + stall_ms();
		}
		if (pending.len) {
			out_flush();
			gather_until = now + GATHER_MS;
		}
		pfd[0] = (struct pollfd){ .fd = now < gather_until ? -1 : kop_curlev_fd(&cev), .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = sigpipe_fd[0], .events = POLLIN };
		pfd[2] = (struct pollfd){ .fd = 1, .events = 0 };	/* (a reader gone: POLLERR) */
		pfd[3] = (struct pollfd){ .fd = opt.control_fd, .events = POLLIN };
		cwait = kop_curlev_timeout(&cev, now);
		if (cwait >= 0 && cwait < wake - now)
			wake = now + cwait;
		if (now < gather_until && gather_until < wake)
			wake = gather_until;
		/* (asked even when something is due at once: the control fd and the signals are not left behind) */
		if (poll(pfd, opt.control_fd >= 0 ? 4 : 3, wake > now ? (int)tool_idle(wake - now) : 0) < 0 &&
		    errno != EINTR)
			log_warn("unable to poll: %s", strerror(errno));
		if (pfd[1].revents) {
			char buf[64];

			while (read(sigpipe_fd[0], buf, sizeof(buf)) > 0)
				;
		}
		if (opt.control_fd >= 0 && pfd[3].revents)
			control_read();
		/* a pipe on stdout whose reader went away says so with POLLERR: end quietly, as SIGPIPE would */
		if (pfd[2].revents & POLLERR) {
			errno = EPIPE;
			tool_stdout_failed();
		}
	}
}

/* ---- setup ---------------------------------------------------------------------------- */

/* RESOURCE[@NAMESPACE][:l=SELECTOR][:f=SELECTOR][:s=SELECTOR]: the parts, as heap strings (NULL = not given). */
struct spec {
	char *name, *ns, *label, *field, *shard, *keep;
	int ns_given, all_ns, per_ns;
};

/* A shard selector that does not parse is bad usage, named with where it came from. */
static void check_shard(const char *sel, const char *where)
{
	struct kop_shard_sel s;
	char err[KOP_ERRLEN];

	if (kop_shard_parse(sel, &s, err) < 0)
		die_usage("invalid shard selector in '%s': %s", where, err);
	kop_shard_free(&s);
}

static void parse_spec(const char *arg, struct spec *s)
{
	const char *colon = strchr(arg, ':'), *at;
	size_t head = colon ? (size_t)(colon - arg) : strlen(arg);
	char **cur = NULL;

	memset(s, 0, sizeof(*s));
	at = memchr(arg, '@', head);
	s->name = kop_strndup(arg, at ? (size_t)(at - arg) : head);
	if (at) {
		s->ns_given = 1;
		s->ns = kop_strndup(at + 1, head - (size_t)(at + 1 - arg));
		if (!strcmp(s->ns, "*"))
			s->all_ns = 1;
		else if (!strcmp(s->ns, "~"))
			s->per_ns = 1;
		else if (!kop_dns1123(s->ns, 1))
			die_usage("'%s' in '%s' is not a namespace name (RESOURCE@NS, RESOURCE@* for all, RESOURCE@~ for each "
				  "namespace watched)", s->ns, arg);
	}
	if (!*s->name)
		die_usage("no resource name in '%s'", arg);
	/* Selectors may hold ':' themselves: only ":l=", ":f=", ":s=" and ":k=" start a part. */
	while (colon) {
		const char *p = colon + 1, *next = strchr(p, ':');
		size_t len;

		while (next && strncmp(next, ":l=", 3) && strncmp(next, ":f=", 3) && strncmp(next, ":s=", 3) &&
		       strncmp(next, ":k=", 3))
			next = strchr(next + 1, ':');
		len = next ? (size_t)(next - p) : strlen(p);
		if (len >= 2 && (p[0] == 'l' || p[0] == 'f' || p[0] == 's' || p[0] == 'k') && p[1] == '=') {
			cur = p[0] == 'l' ? &s->label : p[0] == 'f' ? &s->field : p[0] == 's' ? &s->shard : &s->keep;
			free(*cur);
			*cur = kop_strndup(p + 2, len - 2);
		} else {
			die_usage("unknown part ':%.*s' in '%s' (:l=SELECTOR, :f=SELECTOR, :s=SELECTOR, :k=FIELDS)", (int)len,
				  p, arg);
		}
		colon = next;
	}
	if (s->shard && *s->shard)
		check_shard(s->shard, arg);
	if (s->keep && *s->keep) {
		char err[KOP_ERRLEN];
		jv paths;

		if (kop_fields_parse(s->keep, &paths, err) < 0)
			die_usage("invalid :k= in '%s': %s", arg, err);
		jv_free(paths);
	}
}

static void free_spec(struct spec *s)
{
	free(s->name);
	free(s->ns);
	free(s->label);
	free(s->field);
	free(s->shard);
	free(s->keep);
}

static int has_verb(jv verbs, const char *verb)
{
	int i, n;

	if (jv_get_kind(verbs) != JV_KIND_ARRAY)
		return 1;	/* unknown: let the server say */
	n = jv_array_length(jv_copy(verbs));
	for (i = 0; i < n; i++) {
		jv v = jv_array_get(jv_copy(verbs), i);
		int yes = jv_get_kind(v) == JV_KIND_STRING && !strcmp(jv_string_value(v), verb);

		jv_free(v);
		if (yes)
			return 1;
	}
	return 0;
}

static void setup_resource(struct res *r, const char *arg)
{
	struct spec s;
	char err[KOP_ERRLEN];
	const char *ns;
	char *path;

	parse_spec(arg, &s);
	memset(r, 0, sizeof(*r));
	/*
	 * An unknown name is permanent, and so is a discovery refused with 403;
	 * discovery that could not be fetched otherwise (server down) is not.
	 */
	if (kube_resolve(client, s.name, &r->r, err) < 0)
		die(strncmp(err, "unable to get", 13) || strstr(err, "Forbidden") ? KOP_EXIT_PERM : KOP_EXIT_TEMP, "%s",
		    err);
	if (!has_verb(r->r.verbs, "list") || !has_verb(r->r.verbs, "watch"))
		die(KOP_EXIT_PERM, "resource '%s' cannot be listed and watched", s.name);
	if (s.ns_given)
		ns = s.all_ns ? NULL : s.ns;
	else if (opt.all_ns)
		ns = NULL;
	else
		ns = opt.ns ? opt.ns : kube_client_config(client)->namespace;
	if (!r->r.namespaced)
		ns = NULL;
	r->ns = ns && *ns ? kop_strdup(ns) : NULL;
	path = kube_path(&r->r, r->ns, NULL, NULL);
	kw_watch_init(&r->w, arg, path, r->r.kind, r->r.api_version, s.label ? s.label : opt.label,
		      s.field ? s.field : opt.field);
	free(path);
	{
		const char *shard = s.shard ? s.shard : opt.shard;

		if (shard && *shard && kw_watch_set_shard(&r->w, shard, err) < 0)
			die_usage("invalid shard selector in '%s': %s", arg, err);	/* (checked before) */
	}
	r->w.watch_timeout_s = 300;	/* timeoutSeconds in [300, 600), as client-go */
	r->w.quiet = opt.no_initial;
	kw_watch_set_list(&r->w, opt.watch_list);
	r->w.emit = emit;
	r->w.ctx = r;
	r->keep = jv_null();
	{
		const char *keep = s.keep ? s.keep : opt.keep;

		if (keep && *keep && kop_fields_parse(keep, &r->keep, err) < 0)
			die_usage("invalid --keep: %s", err);	/* (checked before: cannot happen) */
	}
	set_keep_read(r);
	r->next_at = 0;
	kop_backoff_init(&r->bo, 800, 30000, 1.0);
	tool_logj(LOG_DEBUG, JV_OBJECT(jv_string("resource"), jv_string(arg)), "watching '%s' %s%s", r->r.resource,
		  r->ns ? "in " : "in all namespaces", r->ns ? r->ns : "");
	free_spec(&s);
}

static void release_res(struct res *r)
{
	if (r->easy)
		drop_transfer(r);
	kw_watch_release(&r->w);
	kube_resource_release(&r->r);
	jv_free(r->keep);
	jv_free(r->keep_read);
	kop_buf_release(&r->body);
	free(r->ns);
	free(r->refused);
	free(r->problem);
	free(r);
}

/* RESOURCE@~: checked now (known, namespaced, listable), watched per namespace later. */
static void setup_template(const char *arg, const struct spec *s)
{
	struct kube_resource r;
	char err[KOP_ERRLEN];
	struct tmpl *t;

	if (kube_resolve(client, s->name, &r, err) < 0)
		die(strncmp(err, "unable to get", 13) || strstr(err, "Forbidden") ? KOP_EXIT_PERM : KOP_EXIT_TEMP, "%s",
		    err);
	if (!r.namespaced)
		die_usage("'%s': %s are not namespaced, and RESOURCE@~ watches in each namespace", arg, r.resource);
	if (!has_verb(r.verbs, "list") || !has_verb(r.verbs, "watch"))
		die(KOP_EXIT_PERM, "resource '%s' cannot be listed and watched", s->name);
	tmpl = kop_realloc(tmpl, (ntmpl + 1) * sizeof(*tmpl));
	t = &tmpl[ntmpl++];
	t->r = r;
	t->arg = kop_strdup(arg);
	t->name = kop_strdup(s->name);
	t->label = s->label ? kop_strdup(s->label) : opt.label ? kop_strdup(opt.label) : NULL;
	t->field = s->field ? kop_strdup(s->field) : opt.field ? kop_strdup(opt.field) : NULL;
	t->shard = s->shard ? kop_strdup(s->shard) : opt.shard ? kop_strdup(opt.shard) : NULL;
	t->keep = s->keep ? kop_strdup(s->keep) : opt.keep ? kop_strdup(opt.keep) : NULL;
	memset(&t->sel, 0, sizeof(t->sel));
	t->none_left = 0;
	if (t->shard && *t->shard && kop_shard_parse(t->shard, &t->sel, err) < 0)
		die_usage("invalid shard selector in '%s': %s", arg, err);	/* (checked before) */
}

/*
 * Whether template t watches in namespace ns: with a shard selector by
 * namespace, only where ns hashes into it (a watch elsewhere could send nothing).
 */
static int tmpl_wants(const struct tmpl *t, const char *ns)
{
	return !t->none_left &&
	       (!t->sel.n || t->sel.key != KOP_SHARD_NAMESPACE || kop_shard_match_value(&t->sel, ns, strlen(ns)));
}

/* The watch of template t in namespace ns, to start at once. */
static void add_dyn(const struct tmpl *t, const char *ns)
{
	struct res *r = kop_calloc(1, sizeof(*r));
	char err[KOP_ERRLEN], *path;
	struct kop_buf name = KOP_BUF_INIT;

	kube_resource_copy(&r->r, &t->r);
	r->dyn = 1;
	r->ns = kop_strdup(ns);
	kop_buf_addf(&name, "%s@%s", t->name, ns);
	path = kube_path(&r->r, r->ns, NULL, NULL);
	kw_watch_init(&r->w, name.buf, path, r->r.kind, r->r.api_version, t->label, t->field);
	free(path);
	if (t->shard && *t->shard && kw_watch_set_shard(&r->w, t->shard, err) < 0)
		tool_logj(LOG_ERROR, JV_OBJECT(jv_string("resource"), jv_string(t->arg)),
			  "invalid shard selector in '%s': %s", t->arg, err);	/* (checked at the start) */
	kop_buf_release(&name);
	r->w.watch_timeout_s = 300;
	r->w.quiet = bookmark_written ? 0 : opt.no_initial;	/* (new to downstream once it is live) */
	kw_watch_set_list(&r->w, opt.watch_list);
	r->w.emit = emit;
	r->w.ctx = r;
	r->keep = jv_null();
	if (t->keep && *t->keep && kop_fields_parse(t->keep, &r->keep, err) < 0)
		tool_logj(LOG_ERROR, JV_OBJECT(jv_string("resource"), jv_string(t->arg)), "invalid :k= in '%s': %s",
			  t->arg, err);	/* (checked at the start) */
	set_keep_read(r);
	r->next_at = 0;
	/* its RoleBinding follows the namespace by a moment: the first retries come soon */
	kop_backoff_init(&r->bo, 200, 30000, 1.0);
	res = kop_realloc(res, (nres + 1) * sizeof(*res));
	res[nres++] = r;
	tool_logj(LOG_DEBUG, JV_OBJECT(jv_string("resource"), jv_string(r->w.name)), "watching '%s' in %s",
		  r->r.resource, ns);
}

/*
 * An event of the namespaces watch (consumed): a namespace seen alive gets
 * the RESOURCE@~ watches it lacks; one deleted or being deleted loses them,
 * and what they had written is said DELETED (stubs) before the namespace
 * itself. Its objects go with it, and so do the rights to watch them.
 */
static void ns_seen(jv ev)
{
	jv obj = jv_object_get(jv_copy(ev), jv_string("object"));
	jv type = jv_object_get(ev, jv_string("type"));
	jv meta = jv_object_get(obj, jv_string("metadata"));
	const char *name = kop_json_cstr(meta, "name");
	jv del = jv_get_kind(meta) == JV_KIND_OBJECT ? jv_object_get(jv_copy(meta), jv_string("deletionTimestamp"))
						     : jv_invalid();
	int going = !strcmp(jv_string_value(type), "DELETED") ||
		    (jv_is_valid(del) && jv_get_kind(del) != JV_KIND_NULL);
	size_t i, j;

	if (name) {
		for (j = 0; j < ntmpl; j++) {
			struct kop_buf want = KOP_BUF_INIT;
			int have = 0;

			kop_buf_addf(&want, "%s@%s", tmpl[j].name, name);
			for (i = 0; i < nres; i++) {
				struct res *r = res[i];

				if (!r->dyn || r->dropped || strcmp(r->w.name, want.buf))
					continue;
				have = 1;
				if (going) {
					kw_watch_forget(&r->w);
					r->dropped = 1;
					ndropped++;
				}
			}
			if (!have && !going && tmpl_wants(&tmpl[j], name))
				add_dyn(&tmpl[j], name);
			kop_buf_release(&want);
		}
	}
	jv_free(del);
	jv_free(meta);
	jv_free(type);
}

/*
 * Another watch wrote an object (borrowed): in its namespace, a
 * RESOURCE@~ watch waiting for its rights tries again at once, since what
 * came may be the RoleBinding that grants them (the operator makes it right
 * after the namespace), rather than after a backoff grown meanwhile.
 */
static void rights_may_have_come(jv obj)
{
	jv meta = jv_object_get(jv_copy(obj), jv_string("metadata"));
	const char *ns = kop_json_cstr(meta, "namespace");
	size_t i;

	for (i = 0; ns && i < nres; i++) {
		struct res *r = res[i];

		if (r->dyn && r->forbidden && !r->easy && !r->dropped && !strcmp(r->ns, ns))
			r->next_at = kop_mono_ms();
	}
	jv_free(meta);
}

/* Frees the watches whose namespace went (outside curl's callbacks). */
static void reap(void)
{
	size_t i, n = 0;

	if (!ndropped)
		return;
	ndropped = 0;
	for (i = 0; i < nres; i++) {
		if (res[i]->dropped) {
			if (res[i]->forbidden)
				nforbidden--;
			tool_logj(LOG_DEBUG, JV_OBJECT(jv_string("resource"), jv_string(res[i]->w.name)),
				  "no longer watching '%s' in namespace '%s' (it went, or left the shard selector)",
				  res[i]->r.resource, res[i]->ns);
			release_res(res[i]);
		} else {
			res[n++] = res[i];
		}
	}
	nres = n;
}

/*
 * --shard-control: a line names ranges (a shard selector) that leave this
 * kwatch, since what reads it no longer works for them. Each watch with a
 * shard selector is narrowed (kw_watch_narrow): what it knew of them is
 * forgotten without a word, a watch in flight goes on from where it was with
 * the narrower selector (run()), one with nothing left stops; a RESOURCE@~
 * watch whose namespace left stops, and none starts in such a namespace.
 * Then a BOOKMARK annotated kwatch/shards-removed: nothing of those ranges
 * comes after it.
 */
static void shards_removed(const char *line)
{
	struct kop_shard_sel drop;
	char err[KOP_ERRLEN];
	size_t i, narrowed = 0, stopped = 0;

	if (kop_shard_parse(line, &drop, err) < 0) {
		tool_logj(LOG_ERROR, JV_OBJECT(jv_string("line"), jv_string(line)),
			  "--shard-control: invalid shard selector '%s': %s; ignored", line, err);
		return;
	}
	for (i = 0; i < ntmpl; i++) {
		struct tmpl *t = &tmpl[i];
		enum kop_shard_cut k;

		if (!t->sel.n || t->none_left || (k = kop_shard_remove(&t->sel, &drop)) == KOP_SHARD_SAME)
			continue;
		t->none_left = k == KOP_SHARD_NONE;
		free(t->shard);
		t->shard = kop_strdup(t->sel.string);
	}
	for (i = 0; i < nres; i++) {
		struct res *r = res[i];
		enum kop_shard_cut k;

		if (r->dropped || r->done || !r->w.shard || (k = kw_watch_narrow(&r->w, &drop)) == KOP_SHARD_SAME)
			continue;
		if (r->dyn) {
			/* one namespace: still selected, or its watch stops (what it knew was forgotten) */
			if (k == KOP_SHARD_NONE || (r->w.shard->key == KOP_SHARD_NAMESPACE &&
						    !kop_shard_match_value(r->w.shard, r->ns, strlen(r->ns)))) {
				if (r->forbidden)
					nforbidden--, r->forbidden = 0;
				r->dropped = 1;
				ndropped++;
				stopped++;
			}
			continue;
		}
		if (k == KOP_SHARD_LESS) {
			narrowed++;	/* (its request in flight, if it asked for more, is made anew: run()) */
			continue;
		}
		if (r->easy) {
			drop_transfer(r);
			kw_watch_abort(&r->w);
		}
		r->done = 1;	/* nothing left to ask for */
		r->w.synced = 1;
		r->next_at = -1;
		stopped++;
	}
	tool_logj(LOG_INFO, JV_OBJECT(jv_string("removed"), jv_string(drop.string), jv_string("narrowed"),
				      jv_number((double)narrowed), jv_string("stopped"), jv_number((double)stopped)),
		  "shard ranges removed: %zu watches narrowed, %zu stopped", narrowed, stopped);
	if (!bookmark_written && synced())
		out_bookmark();	/* (what was left to list has left: the initial state is out before the line below) */
	out_event("BOOKMARK",
		  JV_OBJECT(jv_string("kind"), jv_string(res[0]->r.kind), jv_string("apiVersion"),
			    jv_string(res[0]->r.api_version), jv_string("metadata"),
			    JV_OBJECT(jv_string("annotations"),
				      JV_OBJECT(jv_string("kwatch/shards-removed"), jv_string(drop.string)))));
	kop_shard_free(&drop);
}

/* --shard-control readable: its complete lines handled; its end (or a failure) stops reading it. */
static void control_read(void)
{
	char buf[4096];
	ssize_t n = read(opt.control_fd, buf, sizeof(buf));
	size_t start = 0, i;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		/* (not closed: under the supervisor it is the stats socket too, still written) */
		if (n < 0)
			log_warn("--shard-control: %s; no longer read", strerror(errno));
		opt.control_fd = -1;
		kop_buf_release(&control);
		return;
	}
	for (i = 0; i < (size_t)n; i++) {
		if (buf[i] != '\n')
			continue;
		kop_buf_add(&control, buf + start, i - start);
		if (control.len)
			shards_removed(control.buf);
		kop_buf_reset(&control);
		start = i + 1;
	}
	kop_buf_add(&control, buf + start, (size_t)n - start);
}

static void cleanup(void)
{
	size_t i;

	for (i = 0; i < nres; i++) {
		if (res[i]->easy)
			drop_transfer(res[i]);
		release_res(res[i]);
	}
	for (i = 0; i < ntmpl; i++) {
		free(tmpl[i].arg);
		free(tmpl[i].name);
		free(tmpl[i].label);
		free(tmpl[i].field);
		free(tmpl[i].shard);
		free(tmpl[i].keep);
		kube_resource_release(&tmpl[i].r);
		kop_shard_free(&tmpl[i].sel);
	}
	free(tmpl);
	free(res);
	kop_buf_release(&control);
	kop_buf_release(&pending);
	curl_multi_cleanup(multi);
	kop_curlev_free(&cev);
	kube_client_free(client);
	if (projection)
		kop_jq_free(projection);
	if (record_fd >= 0)
		close(record_fd);
	curl_global_cleanup();
}

int main(int argc, char **argv)
{
	struct kube_config cfg;
	char err[KOP_ERRLEN];
	const char *env;
	int c, code, watch_list_given = 0;
	size_t i;

	tool_init("kwatch", argc, argv, 1);
	while ((c = getopt_long(argc, argv, "n:Al:" TOOL_COMMON_SHORT, options, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (!*optarg)	/* (an empty one would have meant every namespace) */
				die_usage("-n needs a namespace name (-A for every namespace)");
			opt.ns = optarg;
			break;
		case 'A':
			opt.all_ns = 1;
			break;
		case 'l':
			opt.label = optarg;
			break;
		case OPT_FIELD_SELECTOR:
			opt.field = optarg;
			break;
		case OPT_SHARD_SELECTOR:
			if (*optarg)
				check_shard(optarg, "--shard-selector");
			opt.shard = optarg;
			break;
		case OPT_SHARD_CONTROL: {
			char *end;
			long fd = strtol(optarg, &end, 10);

			if (!*optarg || *end || fd < 0 || fd > 65535 || fcntl((int)fd, F_GETFD) < 0)
				die_usage("--shard-control '%s': not an open file descriptor", optarg);
			opt.control_fd = (int)fd;
			break;
		}
		case OPT_NO_INITIAL:
			opt.no_initial = 1;
			break;
		case OPT_ONCE:
			opt.once = 1;
			break;
		case OPT_STRIP:
			opt.strip = 1;
			break;
		case OPT_NO_STRIP:
			opt.strip = 0;
			break;
		case OPT_PROJECT:
			opt.project = optarg;
			break;
		case OPT_KEEP:
			opt.keep = optarg;
			break;
		case OPT_RECORD:
			opt.record = optarg;
			break;
		case OPT_WATCH_LIST:
			if (kw_watch_list_parse(optarg, &opt.watch_list) < 0)
				die_usage("invalid --watch-list '%s' (auto, always or never)", optarg);
			watch_list_given = 1;
			break;
		case OPT_IDLE_TIMEOUT:
			if ((opt.idle_ms = tool_parse_duration_ms(optarg)) <= 0)
				die_usage("invalid --idle-timeout '%s'", optarg);
			break;
		default:
			if (!tool_common_option(c, optarg, usage))
				tool_bad_option(argv, "n:Al:" TOOL_COMMON_SHORT);
		}
	}
	if (optind >= argc)
		die_usage("no resource to watch");
	if (!watch_list_given && (env = getenv("KOP_WATCH_LIST")) && *env &&
	    kw_watch_list_parse(env, &opt.watch_list) < 0)
		die_usage("invalid KOP_WATCH_LIST '%s' (auto, always or never)", env);
	if (opt.ns && opt.all_ns)
		die_usage("-n and -A exclude each other");
	if (opt.keep && *opt.keep) {
		jv paths;

		if (kop_fields_parse(opt.keep, &paths, err) < 0)
			die_usage("invalid --keep: %s", err);
		jv_free(paths);
	}
	if (opt.project && !(projection = kop_jq_compile(opt.project, "--project", jv_null(), jv_null(), err)))
		die(KOP_EXIT_PERM, "%s", err);
	if (opt.record && (record_fd = open(opt.record, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0)
		die(KOP_EXIT_TEMP, "unable to open '%s': %s", opt.record, strerror(errno));
	for (i = (size_t)optind; i < (size_t)argc; i++) {
		struct spec s;

		parse_spec(argv[i], &s);	/* (usage errors before any setup) */
		free_spec(&s);
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT))
		die(KOP_EXIT_TEMP, "unable to initialise libcurl");
	if (kube_config_load(&cfg, tool_kube.kubeconfig, tool_kube.context, err) < 0)
		die(KOP_EXIT_PERM, "%s", err);
	if (!(client = kube_client_new(&cfg, tool_kube.request_timeout_ms, err)))
		die(KOP_EXIT_PERM, "%s", err);
	{
		char *ua = tool_user_agent("kwatch");

		kube_client_set_user_agent(client, ua);
		free(ua);
	}
	res = kop_calloc((size_t)(argc - optind), sizeof(*res));
	for (i = (size_t)optind; i < (size_t)argc; i++) {
		struct spec s;

		parse_spec(argv[i], &s);
		if (s.per_ns) {
			setup_template(argv[i], &s);
		} else {
			res[nres] = kop_calloc(1, sizeof(**res));
			setup_resource(res[nres], argv[i]);
			if (!ns_res && !strcmp(res[nres]->r.resource, "namespaces") && !*res[nres]->r.group)
				ns_res = res[nres];
			nres++;
		}
		free_spec(&s);
	}
	if (!nres)
		die_usage("RESOURCE@~ needs a namespaces watch among the resources (one watch per namespace it writes)");
	if (ntmpl && !ns_res)
		die_usage("'%s' needs a namespaces watch among the resources (one watch per namespace it writes)",
			  tmpl[0].arg);
	if (!(multi = curl_multi_init()))
		die(KOP_EXIT_TEMP, "unable to initialise libcurl");
	if (kop_curlev_init(&cev, multi, err) < 0)
		die(KOP_EXIT_TEMP, "%s", err);
	tool_metric_add("kwatch_objects_parsed_total", NULL, 0);	/* (0 included: what the scan spared) */
	for (i = 0; i < nres; i++)
		if (res[i]->w.shard)
			break;
	if (i < nres || opt.shard)
		tool_metric_add("kwatch_shard_dropped_total", NULL, 0);	/* reported from the start, 0 included */
	else
		for (i = 0; i < ntmpl; i++)
			if (tmpl[i].sel.n) {
				tool_metric_add("kwatch_shard_dropped_total", NULL, 0);
				break;
			}
	setup_signals();
	code = run();
	out_flush();
	counts_flush();
	cleanup();
	return tool_finish(code);
}
