/*
 * Input: operation lines on stdin, or the objects of -f's manifests, read
 * as the queue has room for them.
 */
#include "kapply.h"
#include "banned.h"

struct kop_jsonl reader;
int input_done;
jv manifest_objs;
int manifest_next, manifest_len;

/* A line is waiting that input_take left for want of room in the queue;
 * held_at: its number (no passthrough: it is not read for one again);
 * full_said: the queue was said full, not since below half of it. */
static int held, full_said;
static size_t held_at;

/* One more input line as an operation, or NULL when there is none now. */
static struct op *next_input(void)
{
	char err[KOP_ERRLEN];
	size_t lineno;
	jv v;
	int rc;

	if (!stream_mode) {
		jv line;

		if (manifest_next >= manifest_len) {
			input_done = 1;
			return NULL;
		}
		line = jv_object_set(jv_object(), jv_string("op"), jv_string("apply"));
		line = jv_object_set(line, jv_string("object"), jv_array_get(jv_copy(manifest_objs), manifest_next++));
		return op_from_line(line, 0);
	}
	held = 0;
	while ((rc = kop_jsonl_next(&reader, &v, &lineno, err)) < 0)
		log_error("stdin: a bad line skipped: %s", err);
	if (rc > 0) {
		struct op *op = op_from_line(v, lineno);

		if (reader.inexact && reader.inexact[0] && (op->kind == OP_APPLY || op->kind == OP_CREATE || op->kind == OP_PATCH) &&
		    !op->bad) {
			struct kop_buf b = KOP_BUF_INIT;

			/* its place, never its digits: they may be a Secret's, or anything's */
			kop_buf_addf(&b, "%s: an integer beyond 2^53 would be sent rounded (numbers are doubles here), "
				     "so it is not sent", reader.inexact);
			op->bad = kop_buf_detach(&b, NULL);
			op->bad_names_line = 1;
		}
		return op;
	}
	if (reader.eof && !held)
		input_done = 1;
	return NULL;
}

/*
 * A line not kapply's passes through as its text (op_pass_text), room or
 * not: what one read of stdin brought in may take the queue past QUEUE_MAX
 * (read_input reads no more until it is below), never a line taken apart.
 * An apply or create is taken as its text (op_apply_text) while the queue
 * has room; when it has none, the line waits unread (held) until it has.
 */
int input_take(void *ctx, const char *text, size_t len)
{
	size_t lineno = reader.line - 1;

	(void)ctx;
	if (lineno != held_at && op_pass_text(text, len))
		return 1;
	if (queue_len >= QUEUE_MAX || stopping) {
		held = 1;
		held_at = lineno;
		if (!full_said && !stopping)
			log_debug("stdin: line %zu waits unread: %zu operations are held", lineno, queue_len);
		full_said = 1;
		return -1;
	}
	if (queue_len < QUEUE_MAX / 2)
		full_said = 0;
	return op_apply_text(text, len, lineno);
}

/* Whether every complete line read so far is in the queue (so more may be read). */
int need_input;

void read_input(void)
{
	struct op *op;

	need_input = 0;
	for (;;) {
		if (stopping || queue_len >= QUEUE_MAX)
			return;
		if (!(op = next_input())) {
			need_input = !held;	/* (a line held: stdin waits, as the queue is full) */
			return;
		}
		queue_push(op);
		if (opt.dry_run == DRY_CLIENT && op->kind != OP_PASS)
			dry_run_client(op);
		else if (opt.diff && op->kind != OP_PASS)
			op->phase = PH_DIFF_GET;
		if (op->kind == OP_PASS || op->state == ST_DONE)
			flush_queue();	/* a line that may pass goes at once */
	}
}
