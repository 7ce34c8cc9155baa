/*
 * The reader: a byte stream split into JSON values, one per line or a
 * pretty-printed value from a line "{" to a line "}" (kubectl -o json).
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include "ireconcile.h"
#include "banned.h"

void reader_init(struct reader *rd, const char *name, int fd)
{
	memset(rd, 0, sizeof(*rd));
	rd->name = name;
	rd->fd = fd;
}

void reader_release(struct reader *rd)
{
	kop_buf_release(&rd->buf);
	kop_buf_release(&rd->acc);
}

/* Parses text into values handed to fn; a malformed one is logged with its line. */
static void parse_values(struct reader *rd, const char *text, size_t len, size_t lineno,
			 void (*fn)(jv, size_t))
{
	const char *nul = memchr(text, 0, len);
	jv_parser *parser;
	jv v;

	if (nul) {	/* (jq's parser would make something of it: "a\0b" gave three values) */
		log_warn("%sline %zu, column %zu: a NUL byte, which JSON text cannot hold; skipped", rd->name, lineno,
			 (size_t)(nul - text) + 1);
		return;
	}
	/* A line that is one compact value (kwatch's, the supervisor's): read by
	 * json_read.c's reader, the value jq's parser would give, in 40% of its
	 * work; or in part, by the reader's own (the input's: event_read). */
	if ((rd->read && rd->read(text, len, &v) == 0) || kop_json_read_fast(text, len, &v) == 0) {
		E.event_text = text;	/* (for handle_event: the object's text as it came) */
		E.event_len = len;
		fn(v, lineno);
		E.event_text = NULL;
		E.event_scanned = E.event_picked = 0;
		return;
	}
	parser = jv_parser_new(0);
	jv_parser_set_buf(parser, text, (int)len, 0);
	while (jv_is_valid(v = jv_parser_next(parser)))
		fn(v, lineno);
	if (jv_invalid_has_msg(jv_copy(v))) {
		jv msg = jv_invalid_get_msg(v);
		char m[KOP_ERRLEN];

		/* (jq counts from the first line it was given: one line, or a kubectl -o json value) */
		log_warn("%s%s; skipped", rd->name, kop_json_parser_error(jv_string_value(msg), text, len, lineno, m,
									  sizeof(m)));
		jv_free(msg);
	} else {
		jv_free(v);
	}
	jv_parser_free(parser);
}

static void reader_line(struct reader *rd, const char *line, size_t len, void (*fn)(jv, size_t))
{
	size_t no = ++rd->lineno;

	if (len && line[len - 1] == '\r')
		len--;
	if (rd->in_multi) {
		kop_buf_add(&rd->acc, line, len);
		kop_buf_add(&rd->acc, "\n", 1);
		if (len == 1 && line[0] == '}') {
			rd->in_multi = 0;
			parse_values(rd, rd->acc.buf, rd->acc.len, rd->acc_line, fn);
			kop_buf_reset(&rd->acc);
		} else if (rd->acc.len > MAX_LINE) {
			log_warn("%sline %zu: a value longer than %u bytes; skipped", rd->name, rd->acc_line, MAX_LINE);
			rd->in_multi = 0;
			kop_buf_release(&rd->acc);
		}
		return;
	}
	if (len == 1 && line[0] == '{') {
		/* kubectl -o json prints each event over many lines, from "{" to "}". */
		rd->in_multi = 1;
		rd->acc_line = no;
		kop_buf_reset(&rd->acc);
		kop_buf_add(&rd->acc, "{\n", 2);
		return;
	}
	parse_values(rd, line, len, no, fn);
}

/* Consumes the complete lines in the buffer (and the last one at EOF). */
void reader_drain(struct reader *rd, void (*fn)(jv, size_t))
{
	for (;;) {
		size_t avail = rd->buf.len - rd->start;
		char *base = avail ? rd->buf.buf + rd->start : NULL, *nl;

		nl = avail ? memchr(base, '\n', avail) : NULL;
		if (!nl) {
			if (rd->eof && avail) {
				if (!rd->skipping)
					reader_line(rd, base, avail, fn);
				rd->start = rd->buf.len;
			} else if (avail > MAX_LINE && !rd->skipping) {
				log_warn("%sline %zu: longer than %u bytes; skipped", rd->name, rd->lineno + 1, MAX_LINE);
				rd->skipping = 1;
				rd->lineno++;
				rd->start = rd->buf.len;
			} else if (rd->skipping) {
				rd->start = rd->buf.len;
			}
			if (rd->eof && rd->in_multi) {
				log_warn("%sline %zu: a value not closed before the end; skipped", rd->name,
					 rd->acc_line);
				rd->in_multi = 0;
			}
			break;
		}
		if (rd->skipping)
			rd->skipping = 0;
		else
			reader_line(rd, base, (size_t)(nl - base), fn);
		rd->start += (size_t)(nl - base) + 1;
	}
	if (rd->start == rd->buf.len && rd->buf.cap > (256u << 10)) {
		/* all read: a buffer an initial list grew to megabytes is not kept for a trickle of events */
		kop_buf_release(&rd->buf);
		rd->start = 0;
	} else if (rd->start == rd->buf.len || rd->start > (1u << 20)) {
		kop_buf_drop(&rd->buf, rd->start);
		rd->start = 0;
	}
}

/* One read(2): >0 bytes, 0 EOF (eof set), -1 nothing now or an error (logged). */
ssize_t reader_fill(struct reader *rd)
{
	ssize_t n;

	kop_buf_grow(&rd->buf, 65536);
	do
		n = read(rd->fd, rd->buf.buf + rd->buf.len, rd->buf.cap - rd->buf.len - 1);
	while (n < 0 && errno == EINTR);
	if (n > 0) {
		rd->buf.len += (size_t)n;
		rd->buf.buf[rd->buf.len] = 0;
	} else if (n == 0) {
		rd->eof = 1;
	} else if (errno != EAGAIN && errno != EWOULDBLOCK) {
		log_error("unable to read %s: %s", rd->name[0] ? rd->name : "stdin", strerror(errno));
		rd->eof = 1;
		if (!rd->name[0])
			E.read_failed = 1;
	}
	return n;
}
