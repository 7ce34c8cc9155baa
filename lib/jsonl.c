/* JSON Lines reader and writer over jv (see jsonl.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/sha.h>
#include "jsonl.h"
#include "kop.h"
#include "banned.h"

void kop_jsonl_init(struct kop_jsonl *r, size_t max_line)
{
	memset(r, 0, sizeof(*r));
	r->line = 1;
	r->max_line = max_line ? max_line : KOP_JSONL_MAX_LINE;
	r->pending = jv_array();
}

void kop_jsonl_release(struct kop_jsonl *r)
{
	kop_buf_release(&r->in);
	jv_free(r->pending);
	r->pending = jv_invalid();
}

static void compact(struct kop_jsonl *r)
{
	if (r->start == 0)
		return;
	memmove(r->in.buf, r->in.buf + r->start, r->in.len - r->start);
	r->in.len -= r->start;
	r->in.buf[r->in.len] = 0;
	r->start = 0;
}

void kop_jsonl_feed(struct kop_jsonl *r, const char *data, size_t len)
{
	if (r->start > 65536 && r->start * 2 > r->in.len)
		compact(r);
	kop_buf_add(&r->in, data, len);
}

void kop_jsonl_eof(struct kop_jsonl *r)
{
	r->eof = 1;
}

ssize_t kop_jsonl_read_fd(struct kop_jsonl *r, int fd)
{
	ssize_t n;

	compact(r);
	kop_buf_grow(&r->in, 65536);
	do
		n = read(fd, r->in.buf + r->in.len, r->in.cap - r->in.len - 1);
	while (n < 0 && errno == EINTR);
	if (n > 0) {
		r->in.len += (size_t)n;
		r->in.buf[r->in.len] = 0;
	} else if (n == 0) {
		r->eof = 1;
	}
	return n;
}

/* Parses one line into r->pending; -1 with err on malformed input. */
static int parse_line(struct kop_jsonl *r, const char *p, size_t len, size_t lineno, char *err)
{
	jv_parser *parser;
	jv v, vals;
	size_t i;

	for (i = 0; i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r'); i++)
		;
	if (i == len)
		return 0;
	vals = jv_array();
	parser = jv_parser_new(0);
	/* not partial: a value cut short at the end of the line is an error, not "more to come". */
	jv_parser_set_buf(parser, p, (int)len, 0);
	for (;;) {
		v = jv_parser_next(parser);
		if (jv_is_valid(v)) {
			vals = jv_array_append(vals, v);
			continue;
		}
		if (jv_invalid_has_msg(jv_copy(v))) {
			jv msg = jv_invalid_get_msg(v);
			const char *m = jv_string_value(msg);
			/* jq says "… at line 1, column 5" of the one line it saw: keep the column. */
			const char *at = strstr(m, " at line ");
			const char *col = at ? strstr(at, ", column ") : NULL;

			if (at && col)
				kop_error(err, "line %zu, column %s: %.*s", lineno, col + 9, (int)(at - m), m);
			else
				kop_error(err, "line %zu: %s", lineno, m);
			jv_free(msg);
			jv_free(vals);
			jv_parser_free(parser);
			return -1;
		}
		jv_free(v);
		break;
	}
	jv_parser_free(parser);
	jv_free(r->pending);
	r->pending = vals;
	r->pending_line = lineno;
	return 0;
}

int kop_jsonl_next(struct kop_jsonl *r, jv *out, size_t *lineno, char *err)
{
	for (;;) {
		char *base, *nl;
		size_t avail, len, no;

		if (jv_array_length(jv_copy(r->pending)) > 0) {
			*out = jv_array_get(jv_copy(r->pending), 0);
			r->pending = jv_array_slice(r->pending, 1, jv_array_length(jv_copy(r->pending)));
			if (lineno)
				*lineno = r->pending_line;
			return 1;
		}
		base = r->in.buf ? r->in.buf + r->start : NULL;
		avail = r->in.len - r->start;
		nl = avail ? memchr(base, '\n', avail) : NULL;
		if (r->skipping) {
			if (!nl) {
				r->start = r->in.len;	/* drop it all */
				compact(r);
				if (r->eof)
					r->skipping = 0;
				return 0;
			}
			r->start += (size_t)(nl - base) + 1;
			r->skipping = 0;
			r->line++;
			continue;
		}
		if (!nl) {
			if (avail > r->max_line) {
				no = r->line;
				r->skipping = 1;
				r->start = r->in.len;
				compact(r);
				return kop_error(err, "line %zu: longer than %zu bytes", no, r->max_line);
			}
			if (!r->eof || avail == 0)
				return 0;
			len = avail;	/* last line without a newline */
			r->start = r->in.len;
		} else {
			len = (size_t)(nl - base);
			r->start += len + 1;
		}
		no = r->line++;
		if (len > r->max_line)
			return kop_error(err, "line %zu: longer than %zu bytes", no, r->max_line);
		if (parse_line(r, base, len, no, err) < 0)
			return -1;
	}
}

int kop_jsonl_write(FILE *f, jv v)
{
	jv s = jv_dump_string(v, 0);
	int len = jv_string_length_bytes(jv_copy(s));
	int rc = 0;

	if (fwrite(jv_string_value(s), 1, (size_t)len, f) != (size_t)len || putc('\n', f) == EOF ||
	    fflush(f) == EOF)
		rc = -1;
	jv_free(s);
	return rc;
}

char *kop_json_dump(jv v)
{
	jv s = jv_dump_string(v, 0);
	char *p = kop_strdup(jv_string_value(s));

	jv_free(s);
	return p;
}

char *kop_json_str(jv v, const char *a, const char *b)
{
	jv x;
	char *s = NULL;

	if (jv_get_kind(v) != JV_KIND_OBJECT)
		return NULL;
	x = jv_object_get(jv_copy(v), jv_string(a));
	if (b) {
		if (jv_get_kind(x) != JV_KIND_OBJECT) {
			jv_free(x);
			return NULL;
		}
		x = jv_object_get(x, jv_string(b));
	}
	if (jv_get_kind(x) == JV_KIND_STRING)
		s = kop_strdup(jv_string_value(x));
	jv_free(x);
	return s;
}

jv kop_json_member(jv v, const char *key)
{
	if (jv_get_kind(v) != JV_KIND_OBJECT) {
		jv_free(v);
		return jv_invalid();
	}
	return jv_object_get(v, jv_string(key));
}

const char *kop_json_cstr(jv o, const char *key)
{
	jv v;
	const char *s;

	if (jv_get_kind(o) != JV_KIND_OBJECT)
		return NULL;
	v = jv_object_get(jv_copy(o), jv_string(key));
	if (jv_get_kind(v) != JV_KIND_STRING) {
		jv_free(v);
		return NULL;
	}
	/* o still holds a reference, so the bytes outlive v. */
	s = jv_string_value(v);
	jv_free(v);
	return s;
}

/* The tree of v as tagged, length-prefixed bytes: no two values share them. */
static void digest_walk(struct kop_buf *b, jv v)
{
	jv_kind k = jv_get_kind(v);
	unsigned char tag = (unsigned char)k;
	uint32_t n;

	kop_buf_add(b, &tag, 1);
	switch (k) {
	case JV_KIND_NUMBER: {
		double d = jv_number_value(v);

		kop_buf_add(b, &d, sizeof(d));
		break;
	}
	case JV_KIND_STRING:
		n = (uint32_t)jv_string_length_bytes(jv_copy(v));
		kop_buf_add(b, &n, sizeof(n));
		kop_buf_add(b, jv_string_value(v), n);
		break;
	case JV_KIND_ARRAY:
		n = (uint32_t)jv_array_length(jv_copy(v));
		kop_buf_add(b, &n, sizeof(n));
		jv_array_foreach(v, i, item) {
			digest_walk(b, item);
			jv_free(item);
		}
		break;
	case JV_KIND_OBJECT: {
		int it;

		/* (no jv_object_length: it counts; the closing tag delimits) */
		for (it = jv_object_iter(v); jv_object_iter_valid(v, it); it = jv_object_iter_next(v, it)) {
			jv key = jv_object_iter_key(v, it), val = jv_object_iter_value(v, it);

			digest_walk(b, key);
			digest_walk(b, val);
			jv_free(key);
			jv_free(val);
		}
		tag = 0xff;
		kop_buf_add(b, &tag, 1);
		break;
	}
	default:
		break;
	}
}

void kop_json_digest(jv v, unsigned char out[KOP_JSON_DIGEST_LEN])
{
	struct kop_buf b = KOP_BUF_INIT;

	digest_walk(&b, v);
	SHA256((const unsigned char *)(b.buf ? b.buf : ""), b.len, out);
	kop_buf_release(&b);
}
