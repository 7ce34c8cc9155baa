/* JSON Lines reader and writer over jv (see jsonl.h). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
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
	kop_buf_drop(&r->in, r->start);
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
	size_t i, at;
	char digits[48];	/* (never shown) */

	for (i = 0; i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r'); i++)
		;
	if (i == len)
		return 0;
	/* (jq's parser would make something of it: "a\0b" gave three values) */
	if (memchr(p, 0, len))
		return kop_error(err, "line %zu, column %zu: a NUL byte, which JSON text cannot hold", lineno,
				 (size_t)((const char *)memchr(p, 0, len) - p) + 1);
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
	r->inexact[0] = '\0';
	if (r->want_inexact && kop_json_inexact(p, len, digits, sizeof(digits), &at))
		kop_json_place(p, len, at, lineno, r->inexact, sizeof(r->inexact));
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
		if (parse_line(r, base, len, no, err) < 0)
			return -1;
	}
}

/*
 * Compact JSON text, byte for byte what jv_dump_string(v, 0) writes
 * (texts are compared and digested, so they must not depend on which of the
 * two wrote them), several times faster: libjq 1.6 appends its output a
 * character at a time. What is unusual is left to libjq: numbers other than
 * integers below 10^16 (its own shortest form: 1e+16, 0.1, 1e-05), and
 * nesting past its print depth (where it writes "<skipped: too deep>").
 */
#define DUMP_DEPTH_MAX 200	/* libjq 1.6's MAX_PRINT_DEPTH is 256 */

/* ---- kop_json_read: the texts kop_json_dump writes, read back ---- */

struct reader {
	const char *p, *end;
	struct kop_buf str;	/* a string's bytes, unescaped */
};

#define READ_DEPTH_MAX 128

/* Reads a value at r->p into *v: 0, or -1 when the text is not one this reader takes. */
static int read_value(struct reader *r, jv *v, int depth);

/*
 * Short strings shared: the keys, kinds, names and label values of stored
 * objects come back again and again, and libjq checks each new string's
 * UTF-8, allocates it and later hashes it as an object key (a string shared
 * keeps its hash). Each thread has a table of INTERN_SLOTS slots, made when
 * it first reads and freed when it exits; a slot holds the last string that
 * fell in it. libjq's reference counts are not atomic and the table holds a
 * reference to each string in it: a value read or keyed here stays on its
 * thread (handed to another one whole, it would share strings with it).
 */
#define INTERN_LEN_MAX 32
#define INTERN_SLOTS 1024	/* a power of two */

struct intern {
	jv s;			/* jv_invalid() while empty (jv_free of it is a no-op) */
	unsigned len;
	char b[INTERN_LEN_MAX];
};

static pthread_key_t intern_key;
static pthread_once_t intern_once = PTHREAD_ONCE_INIT;
static int intern_keyed;
static _Thread_local struct intern *intern;

static void intern_free(void *t)
{
	struct intern *in = t;
	size_t i;

	for (i = 0; i < INTERN_SLOTS; i++)
		jv_free(in[i].s);
	free(in);
}

static void intern_key_create(void)
{
	intern_keyed = !pthread_key_create(&intern_key, intern_free);
}

/* This thread's table, or NULL (out of memory: nothing shared this time). */
static struct intern *intern_table(void)
{
	if (intern)
		return intern;
	pthread_once(&intern_once, intern_key_create);
	if (intern_keyed && (intern = calloc(INTERN_SLOTS, sizeof(*intern))) &&
	    pthread_setspecific(intern_key, intern)) {
		free(intern);
		intern = NULL;
	}
	return intern;
}

/* The string of the n bytes at b, shared when short. */
static jv intern_sized(const char *b, size_t n)
{
	uint32_t h = 2166136261u;
	struct intern *in = n <= INTERN_LEN_MAX ? intern_table() : NULL;
	size_t i;

	if (!in)
		return jv_string_sized(b, (int)n);
	for (i = 0; i < n; i++)
		h = (h ^ (unsigned char)b[i]) * 16777619u;
	in += h & (INTERN_SLOTS - 1);
	if (in->len == n && jv_get_kind(in->s) == JV_KIND_STRING && !memcmp(in->b, b, n))
		return jv_copy(in->s);
	jv_free(in->s);
	in->s = jv_string_sized(b, (int)n);
	in->len = (unsigned)n;
	memcpy(in->b, b, n);
	return jv_copy(in->s);
}

static jv read_string_jv(const struct reader *r)
{
	return intern_sized(r->str.buf ? r->str.buf : "", r->str.len);
}

jv kop_json_key(const char *s)
{
	return intern_sized(s, strlen(s));
}

static int read_hex4(const char *p, unsigned *u)
{
	int i;

	*u = 0;
	for (i = 0; i < 4; i++) {
		int d = kop_hex_digit((unsigned char)p[i]);

		if (d < 0)
			return -1;
		*u = *u << 4 | (unsigned)d;
	}
	return 0;
}

/* The string at r->p (its opening quote), unescaped into r->str. */
static int read_string_bytes(struct reader *r)
{
	const char *p = r->p + 1, *run = p;

	r->str.len = 0;
	for (;;) {
		unsigned char c;

		if (p == r->end)
			return -1;
		c = (unsigned char)*p;
		if (c == '"')
			break;
		if (c < 0x20 || c >= 0x80)
			return -1;	/* control bytes, and UTF-8 (libjq checks it) */
		if (c != '\\') {
			p++;
			continue;
		}
		kop_buf_add(&r->str, run, (size_t)(p - run));
		if (r->end - p < 2)
			return -1;
		switch (p[1]) {
		case '"': case '\\': case '/':
			c = (unsigned char)p[1];
			break;
		case 'b': c = '\b'; break;
		case 'f': c = '\f'; break;
		case 'n': c = '\n'; break;
		case 'r': c = '\r'; break;
		case 't': c = '\t'; break;
		case 'u': {
			unsigned u;

			if (r->end - p < 6 || read_hex4(p + 2, &u) || u >= 0x80)
				return -1;	/* (surrogates and UTF-8: libjq's) */
			c = (unsigned char)u;
			p += 4;
			break;
		}
		default:
			return -1;
		}
		kop_buf_add(&r->str, (const char *)&c, 1);
		p += 2;
		run = p;
	}
	kop_buf_add(&r->str, run, (size_t)(p - run));
	r->p = p + 1;
	return 0;
}

/* A number as JSON writes it (-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][-+]?[0-9]+)?), as libjq reads it. */
static int read_number(struct reader *r, jv *v)
{
	const char *p = r->p, *start = p;
	char buf[64];
	int plain = 1;		/* an integer of at most 15 digits: exact as a double */
	double d = 0;

	if (p < r->end && *p == '-')
		p++;
	if (p == r->end || !isdigit((unsigned char)*p))
		return -1;
	if (*p == '0') {
		p++;
	} else {
		while (p < r->end && isdigit((unsigned char)*p))
			d = d * 10 + (*p++ - '0');
	}
	if (p - start - (*start == '-') > 15)
		plain = 0;
	if (p < r->end && *p == '.') {
		plain = 0;
		if (++p == r->end || !isdigit((unsigned char)*p))
			return -1;
		while (p < r->end && isdigit((unsigned char)*p))
			p++;
	}
	if (p < r->end && (*p == 'e' || *p == 'E')) {
		plain = 0;
		if (++p < r->end && (*p == '+' || *p == '-'))
			p++;
		if (p == r->end || !isdigit((unsigned char)*p))
			return -1;
		while (p < r->end && isdigit((unsigned char)*p))
			p++;
	}
	if (plain) {
		*v = jv_number(*start == '-' ? -d : d);
	} else {
		/* (strtod and libjq's own both round correctly: the same double) */
		if ((size_t)(p - start) >= sizeof(buf))
			return -1;
		memcpy(buf, start, (size_t)(p - start));
		buf[p - start] = 0;
		*v = jv_number(strtod(buf, NULL));
	}
	r->p = p;
	return 0;
}

static int read_literal(struct reader *r, const char *word, jv value, jv *v)
{
	size_t n = strlen(word);

	if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n))
		return -1;
	r->p += n;
	*v = value;
	return 0;
}

/* At a container's opening bracket: skips it; 0 when the closing one
 * follows at once (skipped too), 1 when members or elements do. */
static int read_open(struct reader *r, char close)
{
	if (++r->p < r->end && *r->p == close) {
		r->p++;
		return 0;
	}
	return 1;
}

/* After a member or an element: 1 at ',' (another follows), 0 at close,
 * either skipped; -1 at anything else. */
static int read_after(struct reader *r, char close)
{
	if (r->p < r->end && (*r->p == ',' || *r->p == close))
		return *r->p++ == ',';
	return -1;
}

/* A container read (more: read_after's last answer) into *v, or freed. */
static int read_done(jv x, int more, jv *v)
{
	if (more < 0) {
		jv_free(x);
		return -1;
	}
	*v = x;
	return 0;
}

static int read_value(struct reader *r, jv *v, int depth)
{
	if (r->p == r->end || depth > READ_DEPTH_MAX)
		return -1;
	switch (*r->p) {
	case '{': {
		jv o = jv_object();
		int more = read_open(r, '}');

		while (more > 0) {
			jv key, val;

			if (r->p == r->end || *r->p != '"' || read_string_bytes(r)) {
				more = -1;
				break;
			}
			key = read_string_jv(r);
			if (r->p == r->end || *r->p++ != ':' || read_value(r, &val, depth + 1)) {
				jv_free(key);
				more = -1;
				break;
			}
			o = jv_object_set(o, key, val);
			more = read_after(r, '}');
		}
		return read_done(o, more, v);
	}
	case '[': {
		jv a = jv_array();
		int more = read_open(r, ']');

		while (more > 0) {
			jv item;

			if (read_value(r, &item, depth + 1)) {
				more = -1;
				break;
			}
			a = jv_array_append(a, item);
			more = read_after(r, ']');
		}
		return read_done(a, more, v);
	}
	case '"':
		if (read_string_bytes(r))
			return -1;
		*v = read_string_jv(r);
		return 0;
	case 't':
		return read_literal(r, "true", jv_true(), v);
	case 'f':
		return read_literal(r, "false", jv_false(), v);
	case 'n':
		return read_literal(r, "null", jv_null(), v);
	default:
		return read_number(r, v);
	}
}

jv kop_json_read(const char *s, size_t len)
{
	struct reader r = { s, s + len, KOP_BUF_INIT };
	jv v;
	int rc = read_value(&r, &v, 0);

	kop_buf_release(&r.str);
	if (rc == 0 && r.p == r.end)
		return v;
	if (rc == 0)
		jv_free(v);
	return jv_parse_sized(s, (int)len);
}

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

int kop_jsonl_write(FILE *f, jv v)
{
	struct kop_buf b = KOP_BUF_INIT;
	int rc = 0;

	kop_json_dump_buf(&b, v);
	kop_buf_add(&b, "\n", 1);
	if (fwrite(b.buf, 1, b.len, f) != b.len || fflush(f) == EOF)
		rc = -1;
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

char *kop_json_str(jv v, const char *a, const char *b)
{
	jv x;
	char *s = NULL;

	if (jv_get_kind(v) != JV_KIND_OBJECT)
		return NULL;
	x = jv_object_get(jv_copy(v), kop_json_key(a));
	if (b) {
		if (jv_get_kind(x) != JV_KIND_OBJECT) {
			jv_free(x);
			return NULL;
		}
		x = jv_object_get(x, kop_json_key(b));
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
	return jv_object_get(v, kop_json_key(key));
}

const char *kop_json_cstr(jv o, const char *key)
{
	jv v;
	const char *s;

	if (jv_get_kind(o) != JV_KIND_OBJECT)
		return NULL;
	v = jv_object_get(jv_copy(o), kop_json_key(key));
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

#define FP_PREFIX "\0sha256:"
#define FP_PREFIX_LEN 8
#define FP_LEN (FP_PREFIX_LEN + 2 * SHA256_DIGEST_LENGTH)

static int fp_marked(const char *s, int len)
{
	return len >= FP_PREFIX_LEN && !memcmp(s, FP_PREFIX, FP_PREFIX_LEN);
}

/* Whether the string s (borrowed) is replaced by its fingerprint. */
static int fp_wanted(jv s)
{
	int len = jv_string_length_bytes(jv_copy(s));

	return len >= KOP_JSON_FP_MIN || fp_marked(jv_string_value(s), len);
}

/* The fingerprint of the len bytes at s, in out[FP_LEN]. */
static void fp_make(const char *s, size_t len, char out[FP_LEN])
{
	unsigned char d[SHA256_DIGEST_LENGTH];
	char hex[2 * SHA256_DIGEST_LENGTH + 1];

	SHA256((const unsigned char *)s, len, d);
	memcpy(out, FP_PREFIX, FP_PREFIX_LEN);
	kop_hex(d, sizeof(d), hex);
	memcpy(out + FP_PREFIX_LEN, hex, 2 * sizeof(d));
}

jv kop_json_fingerprint(jv v, int *changed)
{
	switch (jv_get_kind(v)) {
	case JV_KIND_STRING: {
		char fp[FP_LEN];

		if (!fp_wanted(v))
			return v;
		fp_make(jv_string_value(v), (size_t)jv_string_length_bytes(jv_copy(v)), fp);
		jv_free(v);
		if (changed)
			*changed = 1;
		return jv_string_sized(fp, FP_LEN);
	}
	case JV_KIND_ARRAY: {
		int i, n = jv_array_length(jv_copy(v));

		for (i = 0; i < n; i++) {
			jv item = jv_array_get(jv_copy(v), i);
			jv_kind k = jv_get_kind(item);
			int c = 0;

			if (k == JV_KIND_STRING || k == JV_KIND_ARRAY || k == JV_KIND_OBJECT)
				item = kop_json_fingerprint(item, &c);
			if (c) {
				v = jv_array_set(v, i, item);
				if (changed)
					*changed = 1;
			} else {
				jv_free(item);
			}
		}
		return v;
	}
	case JV_KIND_OBJECT: {
		jv keys = jv_array();
		int it;

		/* (the keys to change first: setting while iterating could move them) */
		for (it = jv_object_iter(v); jv_object_iter_valid(v, it); it = jv_object_iter_next(v, it)) {
			jv val = jv_object_iter_value(v, it);
			jv_kind k = jv_get_kind(val);

			if (k == JV_KIND_STRING ? fp_wanted(val) : k == JV_KIND_ARRAY || k == JV_KIND_OBJECT)
				keys = jv_array_append(keys, jv_object_iter_key(v, it));
			jv_free(val);
		}
		jv_array_foreach(keys, i, key) {
			int c = 0;
			jv val = kop_json_fingerprint(jv_object_get(jv_copy(v), jv_copy(key)), &c);

			if (c) {
				v = jv_object_set(v, key, val);
				if (changed)
					*changed = 1;
			} else {
				jv_free(key);
				jv_free(val);
			}
		}
		jv_free(keys);
		return v;
	}
	default:
		return v;
	}
}

int kop_json_fp_equal(jv s, jv fp)
{
	int slen = jv_string_length_bytes(jv_copy(s)), flen = jv_string_length_bytes(jv_copy(fp));
	char want[FP_LEN];

	if (flen != FP_LEN || !fp_marked(jv_string_value(fp), flen))
		return slen == flen && !memcmp(jv_string_value(s), jv_string_value(fp), (size_t)slen);
	if (!fp_wanted(s))
		return 0;	/* kept as it is: not this fingerprint's */
	fp_make(jv_string_value(s), (size_t)slen, want);
	return !memcmp(want, jv_string_value(fp), FP_LEN);
}
