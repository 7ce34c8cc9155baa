/*
 * The output queue. Lines are queued and written as stdout takes them, never
 * blocking while it is a full pipe: the stages form a cycle (ireconcile ->
 * kapply -> kstatus -> feedback -> ireconcile), so blocking on stdout while
 * kstatus blocks on a full feedback FIFO would stop all of them. While more
 * than OUT_HIGH bytes wait, no more is reconciled (queue.c); stdin is still
 * read (main.c). What goes into the lines is the callers'. Once nothing was queued
 * for a second, what a burst grew is given back (out_idle).
 */
#include <errno.h>
#include <poll.h>
#include <unistd.h>
#include "ireconcile.h"
#include "banned.h"

struct kop_buf outq;
static size_t out_start;
static int64_t out_at;		/* when a line was last queued (monotonic ms) */
size_t out_chunk = 4096;	/* PIPE_BUF for pipes: a POLLOUT write that never blocks */

size_t out_pending(void)
{
	return outq.len - out_start;
}

/* Writes what stdout takes now (block: all of it). */
void flush_out(int block)
{
	while (out_pending()) {
		struct pollfd pfd = { 1, POLLOUT, 0 };
		size_t len = out_pending() < out_chunk ? out_pending() : out_chunk;
		ssize_t n;
		int r = poll(&pfd, 1, block ? -1 : 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			return;
		n = write(1, outq.buf + out_start, len);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			tool_stdout_failed();
		out_start += (size_t)n;
	}
	out_start = 0;
	kop_buf_reset(&outq);
}

/*
 * What a burst grew, given back once nothing was queued for a second: the
 * queue's buffer (up to OUT_HIGH and a line) and the table of writes in
 * flight (flight.c). Returns timeout (ms, -1: none) shortened to when that
 * second is over.
 */
int64_t out_idle(int64_t now, int64_t timeout)
{
	if (outq.cap <= OUT_KEEP && E.flights.cap <= 16)
		return timeout;
	if (now - out_at < 1000)
		return tool_sooner(timeout, 1000 - (now - out_at));
	if (!out_pending() && outq.cap > OUT_KEEP)
		kop_buf_release(&outq);
	kop_hmap_fit(&E.flights);
	return timeout;
}

/* Drops what was written from the front of the queue once it is most of it. */
static void out_compact(void)
{
	kop_buf_drop_done(&outq, &out_start, OUT_HIGH);
}

/* Queues an operation line from the compact JSON of its object (spares a second dump), with
 * the tag kapply gives back in its result (NULL: none). */
void emit_op_text(const char *op, const char *pkey, const char *tag, const char *text, size_t len)
{
	out_at = kop_mono_ms();
	out_compact();
	kop_buf_addf(&outq, "{\"op\":\"%s\",\"primary\":", op);
	kop_json_dump_buf(&outq, jv_string(pkey));
	if (tag) {
		kop_buf_add(&outq, ",\"tag\":", 7);
		kop_json_dump_buf(&outq, jv_string(tag));
	}
	kop_buf_add(&outq, ",\"object\":", 10);
	kop_buf_add(&outq, text, len);
	kop_buf_add(&outq, "}\n", 2);
	flush_out(0);
}

void emit(jv line)
{
	out_at = kop_mono_ms();
	out_compact();
	kop_json_dump_buf(&outq, line);
	kop_buf_add(&outq, "\n", 1);
	flush_out(0);
}
