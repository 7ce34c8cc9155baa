/*
 * Coalescing: a window per object (API group, kind, namespace, name) opens
 * when its status is written at once. The status lines for that object that
 * arrive before the window ends are held, a newer one replacing the held one
 * (whose result says "skipped":"superseded"); an event line for it waits too
 * while a status is held (it came after that status), else it is written at
 * once. When the window ends the newest status is written, then the events
 * held (repeats of one as one write); when anything was held, a new window
 * opens. Every window has the same length, so the list in the order they
 * opened is the list in the order they end.
 * The writes themselves are status.c's and event.c's, on the object's writer
 * (writers.c).
 */
#include <stdlib.h>
#include <string.h>
#include "kstatus.h"
#include "banned.h"

struct kop_hmap windows;
struct window *win_head;
static struct window *win_tail;

void op_names(jv line, int is_status, struct op_names *n)
{
	jv o = is_status ? kop_json_member(jv_copy(line), "object")
			 : kop_json_member(kop_json_member(jv_copy(line), "event"), "involvedObject");

	n->api_version = kop_json_str(o, "apiVersion", NULL);
	n->kind = kop_json_str(o, "kind", NULL);
	n->name = is_status ? kop_json_str(o, "metadata", "name") : kop_json_str(o, "name", NULL);
	n->ns = is_status ? kop_json_str(o, "metadata", "namespace") : kop_json_str(o, "namespace", NULL);
	jv_free(o);
	jv_free(line);
}

void op_names_release(struct op_names *n)
{
	free(n->api_version);
	free(n->kind);
	free(n->name);
	free(n->ns);
}

/* The object an operation line is about, or NULL when the line does not say (it is reported at once). */
char *op_key(jv line, int is_status)
{
	struct op_names n;
	char *key = NULL;

	op_names(jv_copy(line), is_status, &n);
	if (n.api_version && n.kind && n.name && *n.name) {
		const char *slash = strchr(n.api_version, '/');
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "%.*s/%s/%s/%s", slash ? (int)(slash - n.api_version) : 0, n.api_version, n.kind,
			     n.ns ? n.ns : "", n.name);
		key = kop_buf_detach(&b, NULL);
	}
	op_names_release(&n);
	return key;
}

static void win_push(struct window *w)
{
	w->next = NULL;
	if (win_tail)
		win_tail->next = w;
	else
		win_head = w;
	win_tail = w;
}

static struct window *win_pop(void)
{
	struct window *w = win_head;

	if (w) {
		win_head = w->next;
		if (!win_head)
			win_tail = NULL;
		w->next = NULL;
	}
	return w;
}

void win_open(const char *key)
{
	struct window *w = kop_calloc(1, sizeof(*w));

	w->key = kop_strdup(key);
	w->end = kop_mono_ms() + opt.coalesce_ms;
	w->status = jv_invalid();
	w->events = jv_array();
	kop_hmap_put(&windows, w->key, w);
	win_push(w);
}

static void win_free(struct window *w)
{
	kop_hmap_remove(&windows, w->key);
	jv_free(w->status);
	jv_free(w->events);
	free(w->key);
	free(w);
}

/* The result of a status line (consumed) that a newer one replaced before it was written. */
jv superseded(jv line)
{
	jv r = kop_result_ok("status", line_primary(jv_copy(line)), kop_op_ref(kop_json_member(jv_copy(line), "object")),
			     0, jv_null());

	jv_free(line);
	r = jv_object_delete(r, jv_string("code"));	/* nothing was sent */
	return jv_object_set(r, jv_string("skipped"), jv_string("superseded"));
}

/* Held event lines of the object key (consumed), in order; the repeats of one are written with it, as one. */
static void write_events(jv events, const char *obj_key)
{
	int i, j, n = jv_array_length(jv_copy(events));
	char *done = kop_calloc(n > 0 ? (size_t)n : 1, 1);

	for (i = 0; i < n; i++) {
		jv line, key, group, primary;

		if (done[i])
			continue;
		line = jv_array_get(jv_copy(events), i);
		key = event_key(line);
		primary = line_primary(jv_copy(line));
		group = JV_ARRAY(line);
		for (j = i + 1; jv_is_valid(key) && j < n; j++) {
			jv other;

			if (done[j])
				continue;
			other = jv_array_get(jv_copy(events), j);
			/* (of one primary too: a group's result waits as that primary's, writers.c) */
			if (jv_equal(jv_copy(key), event_key(other)) &&
			    jv_equal(jv_copy(primary), line_primary(jv_copy(other)))) {
				done[j] = 1;
				group = jv_array_append(group, other);
			} else
				jv_free(other);
		}
		jv_free(key);
		jv_free(primary);
		writers_queue(group, obj_key, 0);
	}
	free(done);
	jv_free(events);
}

/* Writes what the window held; 1 when it held anything. */
static int win_flush(struct window *w)
{
	jv status = w->status, events = w->events;
	int held = jv_is_valid(status) || jv_array_length(jv_copy(events)) > 0;

	w->status = jv_invalid();
	w->events = jv_array();
	if (jv_is_valid(status))
		writers_queue(status, w->key, 1);
	else
		jv_free(status);
	write_events(events, w->key);
	return held;
}

/*
 * Ends the windows that are due (every one when all, none opening again). A
 * window whose object still has an operation on its way to the server (a
 * status retried) holds on for another window: one status queued per object
 * at a time, however long its retries take.
 */
void windows_due(int all)
{
	while (win_head && (all || win_head->end <= kop_mono_ms())) {
		struct window *w = win_pop();

		if (!all && writers_pending_for(w->key)) {
			w->end = kop_mono_ms() + opt.coalesce_ms;
			win_push(w);
			continue;
		}
		if (win_flush(w) && !all) {
			w->end = kop_mono_ms() + opt.coalesce_ms;
			win_push(w);
		} else
			win_free(w);
	}
}
