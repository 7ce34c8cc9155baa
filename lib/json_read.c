/*
 * kop_json_read: the texts kop_json_dump writes, read back fast (anything else
 * is left to libjq's parser), and kop_json_key, the short strings shared per
 * thread. Lines are jsonl.c's, writing json_dump.c's.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "jsonl.h"
#include "kop.h"
#include "banned.h"

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
 * thread (handed to another one whole, it would share strings with it), or
 * every thread that touches it holds one lock while it does (kstatus, whose
 * threads then share one table: kop_json_key_share).
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
static struct intern *intern_shared;	/* kop_json_key_share: every thread's since (its owner frees it) */

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
	if (intern_shared)
		return intern = intern_shared;
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

void kop_json_key_share(void)
{
	intern_shared = intern_table();
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

/* The string at r->p (its opening quote): its bytes unescaped into r->str
 * when keep, else only checked. */
static int read_string_as(struct reader *r, int keep)
{
	const char *p = r->p + 1, *run = p;

	if (keep)
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
		if (keep)
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
		if (keep)
			kop_buf_add(&r->str, (const char *)&c, 1);
		p += 2;
		run = p;
	}
	if (keep)
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

			if (r->p == r->end || *r->p != '"' || read_string_as(r, 1)) {
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
		if (read_string_as(r, 1))
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

/* A value passed over: what read_value takes, nothing made. */
static int skip_value(struct reader *r, int depth)
{
	jv n;

	if (r->p == r->end || depth > READ_DEPTH_MAX)
		return -1;
	switch (*r->p) {
	case '{': {
		int more = read_open(r, '}');

		while (more > 0) {
			if (r->p == r->end || *r->p != '"' || read_string_as(r, 0) || r->p == r->end || *r->p++ != ':' ||
			    skip_value(r, depth + 1))
				return -1;
			more = read_after(r, '}');
		}
		return more;
	}
	case '[': {
		int more = read_open(r, ']');

		while (more > 0) {
			if (skip_value(r, depth + 1))
				return -1;
			more = read_after(r, ']');
		}
		return more;
	}
	case '"':
		return read_string_as(r, 0);
	case 't':
		return read_literal(r, "true", jv_true(), &n);
	case 'f':
		return read_literal(r, "false", jv_false(), &n);
	case 'n':
		return read_literal(r, "null", jv_null(), &n);
	default:
		if (read_number(r, &n))
			return -1;
		jv_free(n);
		return 0;
	}
}

/* An object at r->p read as pick (borrowed) says (kop_json_read_pick). */
static int read_picked(struct reader *r, jv pick, int rest, jv *v, int depth)
{
	jv o;
	int more;

	if (r->p == r->end || *r->p != '{' || depth > READ_DEPTH_MAX)
		return read_value(r, v, depth);	/* (no object where the pick goes down: read whole) */
	o = jv_object();
	more = read_open(r, '}');
	while (more > 0) {
		jv key, val = jv_invalid(), how;
		int rc;

		if (r->p == r->end || *r->p != '"' || read_string_as(r, 1) || r->p == r->end || *r->p++ != ':') {
			more = -1;
			break;
		}
		key = read_string_jv(r);
		how = jv_object_get(jv_copy(pick), jv_copy(key));	/* (invalid: not named) */
		if (jv_get_kind(how) == JV_KIND_OBJECT)
			rc = read_picked(r, how, rest, &val, depth + 1);
		else if (jv_is_valid(how) ? jv_get_kind(how) == JV_KIND_TRUE : rest)
			rc = read_value(r, &val, depth + 1);
		else
			rc = skip_value(r, depth + 1);
		jv_free(how);
		if (rc) {
			jv_free(key);
			more = -1;
			break;
		}
		if (jv_is_valid(val))
			o = jv_object_set(o, key, val);
		else
			jv_free(key);
		more = read_after(r, '}');
	}
	return read_done(o, more, v);
}

/* The text s[0..len) as one value: read whole (pick jv_invalid()), or as pick says
 * (kop_json_read_pick). */
static int read_text(const char *s, size_t len, jv pick, int rest, jv *out)
{
	struct reader r = { s, s + len, KOP_BUF_INIT };
	jv v;
	int rc = !jv_is_valid(pick) ? read_value(&r, &v, 0) :
		 r.p < r.end && *r.p == '{' ? read_picked(&r, pick, rest, &v, 0) : -1;

	kop_buf_release(&r.str);
	if (rc == 0 && r.p == r.end) {
		*out = v;
		return 0;
	}
	if (rc == 0)
		jv_free(v);
	return -1;
}

int kop_json_read_pick(const char *s, size_t len, jv pick, int rest, jv *out)
{
	return read_text(s, len, pick, rest, out);
}

int kop_json_read_fast(const char *s, size_t len, jv *out)
{
	return read_text(s, len, jv_invalid(), 0, out);
}

jv kop_json_read(const char *s, size_t len)
{
	jv v;

	if (kop_json_read_fast(s, len, &v) == 0)
		return v;
	return jv_parse_sized(s, (int)len);
}
