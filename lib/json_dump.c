/*
 * JSON text written: kop_json_dump and kop_jsonl_write. json_read.c reads it back.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "jsonl.h"
#include "kop.h"
#include "banned.h"

/*
 * Compact JSON text, byte for byte what jv_dump_string(v, 0) writes
 * (texts are compared and digested, so they must not depend on which of the
 * two wrote them), several times faster: libjq 1.6 appends its output a
 * character at a time. What is unusual is left to libjq: numbers other than
 * integers below 10^16 (its own shortest form: 1e+16, 0.1, 1e-05), and
 * nesting past its print depth (where it writes "<skipped: too deep>").
 */
#define DUMP_DEPTH_MAX 200	/* libjq 1.6's MAX_PRINT_DEPTH is 256 */

static void dump_libjq(struct kop_buf *b, jv v)
{
	jv s = jv_dump_string(jv_copy(v), 0);

	kop_buf_add(b, jv_string_value(s), (size_t)jv_string_length_bytes(jv_copy(s)));
	jv_free(s);
}

static void dump_string(struct kop_buf *b, const char *p, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, run = 0;

	kop_buf_add(b, "\"", 1);
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		char esc[6];
		size_t elen = 2;

		if ((c >= 0x20 && c != '"' && c != '\\' && c != 0x7f))
			continue;	/* printable, or a byte of a UTF-8 sequence: as it is */
		kop_buf_add(b, p + run, i - run);
		run = i + 1;
		esc[0] = '\\';
		switch (c) {
		case '"': esc[1] = '"'; break;
		case '\\': esc[1] = '\\'; break;
		case '\b': esc[1] = 'b'; break;
		case '\t': esc[1] = 't'; break;
		case '\r': esc[1] = 'r'; break;
		case '\n': esc[1] = 'n'; break;
		case '\f': esc[1] = 'f'; break;
		default:
			esc[1] = 'u';
			esc[2] = '0';
			esc[3] = '0';
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			elen = 6;
		}
		kop_buf_add(b, esc, elen);
	}
	kop_buf_add(b, p + run, n - run);
	kop_buf_add(b, "\"", 1);
}

/* v borrowed; -1 when nested too deep for this writer (the caller starts over with libjq's). */
static int dump_value(struct kop_buf *b, jv v, int depth)
{
	switch (jv_get_kind(v)) {
	case JV_KIND_NULL:
		kop_buf_add(b, "null", 4);
		return 0;
	case JV_KIND_TRUE:
		kop_buf_add(b, "true", 4);
		return 0;
	case JV_KIND_FALSE:
		kop_buf_add(b, "false", 5);
		return 0;
	case JV_KIND_NUMBER: {
		double d = jv_number_value(v);

		if (d == floor(d) && fabs(d) < 1e16)
			kop_buf_addf(b, "%.0f", d);	/* exact, as libjq's shortest form is there */
		else
			dump_libjq(b, v);
		return 0;
	}
	case JV_KIND_STRING:
		dump_string(b, jv_string_value(v), (size_t)jv_string_length_bytes(jv_copy(v)));
		return 0;
	case JV_KIND_ARRAY: {
		int i, n = jv_array_length(jv_copy(v));

		if (depth >= DUMP_DEPTH_MAX)
			return -1;
		kop_buf_add(b, "[", 1);
		for (i = 0; i < n; i++) {
			jv e = jv_array_get(jv_copy(v), i);
			int rc;

			if (i)
				kop_buf_add(b, ",", 1);
			rc = dump_value(b, e, depth + 1);
			jv_free(e);
			if (rc < 0)
				return -1;
		}
		kop_buf_add(b, "]", 1);
		return 0;
	}
	case JV_KIND_OBJECT: {
		int it, first = 1;

		if (depth >= DUMP_DEPTH_MAX)
			return -1;
		kop_buf_add(b, "{", 1);
		for (it = jv_object_iter(v); jv_object_iter_valid(v, it); it = jv_object_iter_next(v, it)) {
			jv k = jv_object_iter_key(v, it), e = jv_object_iter_value(v, it);
			int rc;

			if (!first)
				kop_buf_add(b, ",", 1);
			first = 0;
			dump_string(b, jv_string_value(k), (size_t)jv_string_length_bytes(jv_copy(k)));
			kop_buf_add(b, ":", 1);
			rc = dump_value(b, e, depth + 1);
			jv_free(k);
			jv_free(e);
			if (rc < 0)
				return -1;
		}
		kop_buf_add(b, "}", 1);
		return 0;
	}
	default:
		dump_libjq(b, v);	/* invalid: libjq's own words */
		return 0;
	}
}

void kop_json_dump_buf(struct kop_buf *b, jv v)
{
	size_t start = b->len;

	if (dump_value(b, v, 0) < 0) {
		b->len = start;
		b->buf[start] = 0;
		dump_libjq(b, v);
	}
	jv_free(v);
}

int kop_jsonl_write_text(FILE *f, const char *text, size_t len)
{
	return fwrite(text, 1, len, f) != len || putc('\n', f) == EOF || fflush(f) == EOF ? -1 : 0;
}

int kop_jsonl_write(FILE *f, jv v)
{
	struct kop_buf b = KOP_BUF_INIT;
	int rc;

	kop_json_dump_buf(&b, v);
	rc = kop_jsonl_write_text(f, b.buf ? b.buf : "", b.len);
	kop_buf_release(&b);
	return rc;
}

char *kop_json_dump_len(jv v, size_t *len)
{
	struct kop_buf b = KOP_BUF_INIT;
	size_t n;
	char *s;

	kop_json_dump_buf(&b, v);
	s = kop_buf_detach(&b, &n);
	if (len)
		*len = n;
	return kop_realloc(s, n + 1);	/* often kept: no growth slack */
}

char *kop_json_dump(jv v)
{
	return kop_json_dump_len(v, NULL);
}
