/*
 * A few string fields of an object's metadata read from its JSON text
 * without building the rest (kop_json_meta): what a writer needs of the
 * object a server answers a write with, its resourceVersion and uid, for a
 * fraction of a whole parse. Whole texts are json_read.c's.
 */
#include <string.h>
#include "jsonl.h"
#include "kop.h"
#include "banned.h"

struct scan {
	const char *p, *end;
};

static void skip_ws(struct scan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

/* At a '"': past the string's closing quote; its bytes (escapes as they are) in *b, *n. -1: unterminated. */
static int scan_string(struct scan *s, const char **b, size_t *n)
{
	const char *q = ++s->p;

	while (q < s->end && *q != '"') {
		if (*q == '\\')
			q++;
		q++;
	}
	if (q >= s->end)
		return -1;
	*b = s->p;
	*n = (size_t)(q - s->p);
	s->p = q + 1;
	return 0;
}

/* Past one value (nested ones matched bracket for bracket, strings skipped whole); -1 when cut short. */
static int skip_value(struct scan *s)
{
	const char *b;
	size_t n, depth = 0;

	do {
		if (s->p >= s->end)
			return -1;
		switch (*s->p) {
		case '"':
			if (scan_string(s, &b, &n) < 0)
				return -1;
			continue;
		case '{':
		case '[':
			depth++;
			break;
		case '}':
		case ']':
			if (!depth)
				return -1;
			depth--;
			break;
		case ',':
		case ':':
			if (!depth)
				return -1;
			break;
		default:
			if (!depth) {
				/* a number or a literal: up to what ends it */
				while (s->p < s->end && !strchr(",}] \t\r\n", *s->p))
					s->p++;
				return 0;
			}
		}
		s->p++;
	} while (depth);
	return 0;
}

/*
 * The members of the object at s->p, each key handed to fn with the scan at
 * its value (fn moves past it, or leaves it for the walk to skip: returns 1
 * when it moved, 0 when not, -1 to stop). -1 when the text is not such an object.
 */
static int each_member(struct scan *s, int (*fn)(struct scan *, const char *, size_t, void *), void *ctx)
{
	skip_ws(s);
	if (s->p >= s->end || *s->p != '{')
		return -1;
	s->p++;
	skip_ws(s);
	if (s->p < s->end && *s->p == '}') {
		s->p++;
		return 0;
	}
	for (;;) {
		const char *k;
		size_t kn;
		int r;

		skip_ws(s);
		if (s->p >= s->end || *s->p != '"' || scan_string(s, &k, &kn) < 0)
			return -1;
		skip_ws(s);
		if (s->p >= s->end || *s->p != ':')
			return -1;
		s->p++;
		skip_ws(s);
		if ((r = fn(s, k, kn, ctx)) < 0)
			return -1;
		if (!r && skip_value(s) < 0)
			return -1;
		skip_ws(s);
		if (s->p < s->end && *s->p == ',') {
			s->p++;
			continue;
		}
		if (s->p < s->end && *s->p == '}') {
			s->p++;
			return 0;
		}
		return -1;
	}
}

struct want {
	const char *const *names;
	size_t n;
	jv meta;		/* what was found */
	int seen;		/* a "metadata" object met */
};

static int key_is(const char *k, size_t kn, const char *name)
{
	return strlen(name) == kn && !memcmp(k, name, kn);
}

static int meta_member(struct scan *s, const char *k, size_t kn, void *ctx)
{
	struct want *w = ctx;
	const char *b;
	size_t i, n;

	for (i = 0; i < w->n; i++) {
		if (!key_is(k, kn, w->names[i]))
			continue;
		if (s->p >= s->end || *s->p != '"')
			return 0;	/* not a string: left out */
		if (scan_string(s, &b, &n) < 0 || memchr(b, '\\', n))
			return -1;	/* (an escape: a whole parse says what it means) */
		w->meta = jv_object_set(w->meta, jv_string(w->names[i]), jv_string_sized(b, (int)n));
		return 1;
	}
	return 0;
}

static int top_member(struct scan *s, const char *k, size_t kn, void *ctx)
{
	struct want *w = ctx;

	if (!key_is(k, kn, "metadata") || s->p >= s->end || *s->p != '{')
		return 0;
	if (w->seen)
		return -1;	/* twice: the last one would win in a whole parse */
	w->seen = 1;
	return each_member(s, meta_member, w) < 0 ? -1 : 1;
}

int kop_json_meta(const char *text, size_t len, const char *const *names, size_t n, jv *out)
{
	struct scan s = { text, text + len };
	struct want w = { names, n, jv_object(), 0 };

	if (each_member(&s, top_member, &w) < 0) {
		jv_free(w.meta);
		return -1;
	}
	skip_ws(&s);
	if (s.p != s.end) {
		jv_free(w.meta);
		return -1;
	}
	*out = JV_OBJECT(jv_string("metadata"), w.meta);
	return 0;
}
