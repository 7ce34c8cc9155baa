/*
 * JSON Lines read (see jsonl.h): the line buffer fed from a descriptor, one value
 * per line, and the error messages that name the line, the place and the path in
 * it. Values are parsed by json_read.c's reader; written by json_dump.c.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
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
	free(r->inexact);
	r->inexact = NULL;
}

static void compact(struct kop_jsonl *r)
{
	kop_buf_drop(&r->in, r->start);
	r->start = 0;
}

void kop_jsonl_feed(struct kop_jsonl *r, const char *data, size_t len)
{
	if (r->start && r->start == r->in.len)
		compact(r);	/* all consumed: nothing to move */
	else if (r->start > 4096 && r->start * 2 > r->in.len)
		compact(r);
	kop_buf_add(&r->in, data, len);
}

void kop_jsonl_trim(struct kop_jsonl *r)
{
	if (r->start == r->in.len && r->in.cap > KOP_JSONL_TRIM_CAP &&
	    jv_array_length(jv_copy(r->pending)) == 0) {
		kop_buf_release(&r->in);
		r->start = 0;
	}
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

/* For a reader that wants it, where the line (p, len) has its first integer a double cannot hold. */
static void note_inexact(struct kop_jsonl *r, const char *p, size_t len, size_t lineno)
{
	char digits[48];	/* (never shown) */
	size_t at;

	if (!r->want_inexact)
		return;
	if (!r->inexact)
		r->inexact = kop_malloc(KOP_ERRLEN);
	r->inexact[0] = '\0';
	if (kop_json_inexact(p, len, digits, sizeof(digits), &at))
		kop_json_place(p, len, at, lineno, r->inexact, KOP_ERRLEN);
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
	/* (jq's parser would make something of it: "a\0b" gave three values) */
	if (memchr(p, 0, len))
		return kop_error(err, "line %zu, column %zu: a NUL byte, which JSON text cannot hold", lineno,
				 (size_t)((const char *)memchr(p, 0, len) - p) + 1);
	if (r->fast) {
		size_t end = len;

		while (end > i && (p[end - 1] == ' ' || p[end - 1] == '\t' || p[end - 1] == '\r'))
			end--;
		if (kop_json_read_fast(p + i, end - i, &v) == 0) {
			/* one value, exactly as jq's parser reads it (json_read.c) */
			jv_free(r->pending);
			r->pending = JV_ARRAY(v);
			r->pending_line = lineno;
			note_inexact(r, p, len, lineno);
			return 0;
		}
	}
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

			kop_json_parser_error(jv_string_value(msg), p, len, lineno, err, KOP_ERRLEN);
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
	note_inexact(r, p, len, lineno);
	return 0;
}

const char *kop_json_parser_error(const char *msg, const char *text, size_t len, size_t first, char *buf,
				  size_t size)
{
	const char *at = strstr(msg, " at line "), *col = at ? strstr(at, ", column ") : NULL;
	unsigned long l, c;
	size_t i = 0, n;
	char *end;

	if (!at || !col)
		goto plain;
	l = strtoul(at + 9, &end, 10);
	if (end != col || l < 1)
		goto plain;
	c = strtoul(col + 9, &end, 10);
	if (*end)
		goto plain;
	if (c == 0 && l > 1) {
		/* it stopped on the newline ending line l-1: that line's end is the place */
		for (n = 1; n < l - 1 && i < len; i++)
			if (text[i] == '\n')
				n++;
		for (c = 1; i < len && text[i] != '\n'; i++)
			c++;
		l--;
	}
	snprintf(buf, size, "line %zu, column %lu: %.*s", first + l - 1, c ? c : 1, (int)(at - msg), msg);
	return buf;
plain:
	snprintf(buf, size, "line %zu: %s", first, msg);
	return buf;
}

const char *kop_json_parse_error(jv invalid, char *buf, size_t size)
{
	jv msg = jv_invalid_get_msg(invalid);
	const char *m = jv_get_kind(msg) == JV_KIND_STRING ? jv_string_value(msg) : "not JSON";
	const char *cut = strstr(m, " (while parsing '");

	snprintf(buf, size, "%.*s", (int)(cut ? (size_t)(cut - m) : strlen(m)), m);
	jv_free(msg);
	return buf;
}

int kop_json_inexact(const char *s, size_t len, char *what, size_t whatlen, size_t *at)
{
	static const char limit[] = "9007199254740992";	/* 2^53 */
	size_t i = 0;

	while (i < len) {
		char c = s[i];

		if (c == '"') {
			for (i++; i < len && s[i] != '"'; i++)
				if (s[i] == '\\')
					i++;
			i++;
		} else if (c == '-' || (c >= '0' && c <= '9')) {
			size_t start = i, d0, nd, k;
			int integer = 1;

			if (s[i] == '-')
				i++;
			while (i < len && s[i] == '0')
				i++;
			d0 = i;
			while (i < len && s[i] >= '0' && s[i] <= '9')
				i++;
			nd = i - d0;
			while (i < len && (s[i] == '.' || s[i] == 'e' || s[i] == 'E' || s[i] == '+' || s[i] == '-' ||
					   (s[i] >= '0' && s[i] <= '9'))) {
				integer = 0;
				i++;
			}
			if (integer && (nd > sizeof(limit) - 1 ||
					(nd == sizeof(limit) - 1 && memcmp(s + d0, limit, nd) > 0))) {
				k = i - start < whatlen - 1 ? i - start : whatlen - 1;
				memcpy(what, s + start, k);
				what[k] = '\0';
				if (at)
					*at = start;
				return 1;
			}
		} else {
			i++;
		}
	}
	return 0;
}

void kop_json_path_key(struct kop_buf *b, const char *key, size_t n)
{
	size_t i, show = n > 64 ? 64 : n;
	int plain = n > 0;

	for (i = 0; i < n && plain; i++)
		plain = isalnum((unsigned char)key[i]) || key[i] == '-' || key[i] == '_';
	if (plain) {
		if (b->len)
			kop_buf_add(b, ".", 1);
		kop_buf_add(b, key, n);
		return;
	}
	kop_buf_add(b, "[", 1);
	for (i = 0; i < show; i++) {
		unsigned char c = (unsigned char)key[i];

		if (c < 0x20 || c == 0x7f)
			kop_buf_addf(b, "\\x%02x", c);
		else
			kop_buf_add(b, key + i, 1);
	}
	kop_buf_adds(b, n > show ? "...]" : "]");
}

/* A container around the offset kop_json_path_at looks for. */
struct path_frame {
	int object;		/* else an array */
	int want_key;		/* an object's next string is a key */
	size_t key, key_len;	/* an object's current key: its text, quotes included */
	size_t index;		/* an array's current element */
};

void kop_json_path_at(const char *s, size_t len, size_t at, struct kop_buf *b)
{
	struct path_frame *st = NULL;
	size_t depth = 0, cap = 0, i = 0, d;

	if (at > len)
		at = len;
	while (i < at) {
		char c = s[i];
		struct path_frame *top = depth ? &st[depth - 1] : NULL;

		if (c == '"') {
			size_t start = i;

			for (i++; i < len && s[i] != '"'; i++)
				if (s[i] == '\\')
					i++;
			i++;
			if (top && top->object && top->want_key) {
				top->key = start;
				top->key_len = (i < len ? i : len) - start;
			}
			continue;
		}
		if (c == '{' || c == '[') {
			if (depth == cap) {
				cap = cap ? 2 * cap : 16;
				st = kop_realloc(st, cap * sizeof(*st));
			}
			st[depth++] = (struct path_frame){ .object = c == '{', .want_key = 1 };
		} else if ((c == '}' || c == ']') && depth) {
			depth--;
		} else if (c == ':' && top && top->object) {
			top->want_key = 0;
		} else if (c == ',' && top) {
			top->want_key = 1;
			top->index++;
		}
		i++;
	}
	for (d = 0; d < depth; d++) {
		if (st[d].object && st[d].key_len) {
			jv k = jv_parse_sized(s + st[d].key, (int)st[d].key_len);

			if (jv_get_kind(k) == JV_KIND_STRING)
				kop_json_path_key(b, jv_string_value(k), (size_t)jv_string_length_bytes(jv_copy(k)));
			jv_free(k);
		} else if (!st[d].object) {
			kop_buf_addf(b, "[%zu]", st[d].index);
		}
	}
	free(st);
}

const char *kop_json_place(const char *s, size_t len, size_t at, size_t first, char *buf, size_t size)
{
	struct kop_buf path = KOP_BUF_INIT;
	size_t i, line = first, col = 1;

	if (at > len)
		at = len;
	for (i = 0; i < at; i++) {
		if (s[i] == '\n') {
			line++;
			col = 1;
		} else if (((unsigned char)s[i] & 0xC0) != 0x80) {
			col++;	/* characters, as libyaml counts columns */
		}
	}
	kop_json_path_at(s, len, at, &path);
	if (!path.len)
		snprintf(buf, size, "line %zu, column %zu", line, col);
	else if (path.len > KOP_PATH_SHOWN)
		snprintf(buf, size, "line %zu, column %zu: ...%s", line, col, path.buf + path.len - KOP_PATH_SHOWN);
	else
		snprintf(buf, size, "line %zu, column %zu: %s", line, col, path.buf);
	kop_buf_release(&path);
	return buf;
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
		if (r->take) {
			int took = r->take(r->take_ctx, base, len);

			if (took > 0)
				continue;
			if (took < 0) {
				/* (not now: the line stays, the next call offers it again) */
				r->start = (size_t)(base - r->in.buf);
				r->line = no;
				return 0;
			}
		}
		if (parse_line(r, base, len, no, err) < 0)
			return -1;
	}
}
