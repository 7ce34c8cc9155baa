/*
 * A few fields of an object read from its JSON text without building the
 * rest: its metadata's strings (kop_json_meta: what a writer needs of the
 * object a server answers a write with, its resourceVersion and uid), and a
 * watch event's type, object and identity (kop_json_event: what kwatch needs
 * to pass an object on as it came), and the texts of the values at a few
 * paths (kop_json_spans: the fields a kind's `project` list keeps), and the
 * texts of an array's elements (kop_json_elements: one object of ireconcile's
 * kept render answer), and where a stage-protocol line goes (kop_line_route:
 * what kapply and kstatus need to pass a line on as it came), each for a
 * fraction of a whole parse. Whole texts are
 * json_read.c's.
 */
#include <stdlib.h>
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

/*
 * At a '"': past the string's closing quote; its bytes (escapes as they are)
 * in *b, *n. -1: unterminated. The closing quote is the first one after an
 * even run of backslashes (memchr finds each candidate: most of a large
 * object's bytes are in its strings).
 */
static int scan_string(struct scan *s, const char **b, size_t *n)
{
	const char *q = ++s->p, *e, *k;

	for (;;) {
		if (!(e = memchr(q, '"', (size_t)(s->end - q))))
			return -1;
		for (k = e; k > s->p && k[-1] == '\\'; k--)
			;
		if (!((e - k) & 1))
			break;
		q = e + 1;
	}
	*b = s->p;
	*n = (size_t)(e - s->p);
	s->p = e + 1;
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
 * when it moved, 0 when not, -1 to stop). -1 when the text is not such an
 * object, or a key holds an escape: it may spell a key wanted ("obj\u0065ct"
 * is "object" once parsed), and a whole parse says what it means.
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
		if (s->p >= s->end || *s->p != '"' || scan_string(s, &k, &kn) < 0 || memchr(k, '\\', kn))
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

/* rc, a walk's answer: 0 when it was good and nothing but white space is left after it. */
static int walked_whole(struct scan *s, int rc)
{
	if (rc < 0)
		return -1;
	skip_ws(s);
	return s->p == s->end ? 0 : -1;
}

struct want {
	const char *const *names;
	size_t n;
	jv meta;		/* what was found */
	int seen;		/* a "metadata" object met */
};

static int is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

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

	if (walked_whole(&s, each_member(&s, top_member, &w)) < 0) {
		jv_free(w.meta);
		return -1;
	}
	*out = JV_OBJECT(jv_string("metadata"), w.meta);
	return 0;
}

/*
 * Whether a JSON string's bytes b[0..n) (between its quotes) are what a parse
 * gives back, so that they may be taken without one: no escape, and ASCII
 * alone (a parse makes U+FFFD of bytes no UTF-8 holds).
 */
static int plain_ascii(const char *b, size_t n)
{
	size_t i;

	if (memchr(b, '\\', n))
		return 0;
	for (i = 0; i < n; i++)
		if ((unsigned char)b[i] >= 0x80)
			return 0;
	return 1;
}

char *kop_json_plain_string(const struct kop_json_span *sp)
{
	if (!sp->b || sp->n < 2 || sp->b[0] != '"' || sp->b[sp->n - 1] != '"' || !plain_ascii(sp->b + 1, sp->n - 2))
		return NULL;
	return kop_strndup(sp->b + 1, sp->n - 2);
}

/* ---- a stage-protocol line ------------------------------------------------------ */

struct route {
	const char *const *own;
	char *op, *primary;
	int seen_op, seen_primary, barrier, mine;
};

static int route_member(struct scan *s, const char *k, size_t kn, void *ctx)
{
	struct route *r = ctx;
	const char *b;
	size_t n, i;
	int is_op = key_is(k, kn, "op");

	if (key_is(k, kn, "barrier"))
		return r->barrier++ ? -1 : 0;
	if (!is_op && !key_is(k, kn, "primary"))
		return 0;
	if (is_op ? r->seen_op++ : r->seen_primary++)
		return -1;	/* twice: the last one would win in a whole parse */
	if (s->p >= s->end || *s->p != '"')
		return is_op ? -1 : 0;	/* an op that is no string: a whole parse says; a primary: none */
	if (scan_string(s, &b, &n) < 0 || memchr(b, '\\', n))
		return -1;
	if (!is_op) {
		if (!plain_ascii(b, n))
			return -1;	/* (compared as a parse gives it: its own ops' primaries are parsed) */
		r->primary = kop_strndup(b, n);
		return 1;
	}
	for (i = 0; r->own && r->own[i]; i++)
		if (key_is(b, n, r->own[i])) {
			r->mine = 1;
			return -1;	/* (the walk stops: the caller parses it) */
		}
	r->op = kop_strndup(b, n);
	return 1;
}

int kop_line_route(const char *text, size_t len, const char *const *own, char **op, char **primary, int *barrier)
{
	struct scan s = { text, text + len };
	struct route r = { own, NULL, NULL, 0, 0, 0, 0 };
	int rc = memchr(text, 0, len) ? -1 : walked_whole(&s, each_member(&s, route_member, &r));

	*op = *primary = NULL;
	*barrier = 0;
	if (rc < 0) {
		free(r.op);
		free(r.primary);
		return r.mine ? 1 : -1;
	}
	*op = r.op;
	*primary = r.primary;
	*barrier = r.barrier;
	return 0;
}

/* ---- a watch event ----------------------------------------------------------- */

static const char *const event_meta[] = { "name", "namespace", "uid", "resourceVersion" };

struct event_scan {
	struct kop_json_event *ev;
	const char *base;	/* the object's first byte */
	int seen_meta, seen_type, seen_obj, seen_kind, seen_av, seen_mf;
	jv meta;
};

/*
 * A member cut from its object with one comma beside it (the one before it,
 * else the one after), so that what is left reads as the object without it:
 * [*b, *e) from its key's opening quote at key to its value's end at vend;
 * the object's bytes are within [base, end).
 */
static void member_cut(const char *base, const char *end, const char *key, const char *vend,
		       const char **b, const char **e)
{
	const char *q;

	for (q = key; q > base && is_ws(q[-1]); q--)
		;
	if (q > base && q[-1] == ',') {
		*b = q - 1;
		*e = vend;
		return;
	}
	for (q = vend; q < end && is_ws(*q); q++)
		;
	*b = key;
	*e = q < end && *q == ',' ? q + 1 : vend;
}

static int event_meta_member(struct scan *s, const char *k, size_t kn, void *ctx)
{
	struct event_scan *e = ctx;
	const char *b;
	size_t i, n;

	if (key_is(k, kn, "managedFields")) {
		const char *key = k - 1, *cb, *ce;

		if (e->seen_mf++ || skip_value(s) < 0)
			return -1;
		/* (a comma after it is cut too, but the scan stays at it: the walk reads it) */
		member_cut(e->base, s->end, key, s->p, &cb, &ce);
		e->ev->cut_b = (size_t)(cb - e->base);
		e->ev->cut_e = (size_t)(ce - e->base);
		return 1;
	}
	for (i = 0; i < sizeof(event_meta) / sizeof(event_meta[0]); i++) {
		if (!key_is(k, kn, event_meta[i]))
			continue;
		if (s->p >= s->end || *s->p != '"')
			return 0;	/* not a string: left out */
		if (jv_object_has(jv_copy(e->meta), jv_string(event_meta[i])) ||
		    scan_string(s, &b, &n) < 0 || memchr(b, '\\', n))
			return -1;	/* twice, or an escape: a whole parse says what it means */
		e->meta = jv_object_set(e->meta, jv_string(event_meta[i]), jv_string_sized(b, (int)n));
		return 1;
	}
	return 0;
}

static int event_obj_member(struct scan *s, const char *k, size_t kn, void *ctx)
{
	struct event_scan *e = ctx;
	int is_kind = key_is(k, kn, "kind");
	int *seen = is_kind ? &e->seen_kind : key_is(k, kn, "apiVersion") ? &e->seen_av : NULL;

	if (seen) {
		const char *b;
		size_t n;

		if ((*seen)++ || s->p >= s->end || *s->p != '"' || scan_string(s, &b, &n) < 0)
			return -1;
		*(is_kind ? &e->ev->kind : &e->ev->api_version) = b;
		*(is_kind ? &e->ev->kind_len : &e->ev->api_version_len) = n;
		return 1;
	}
	if (!key_is(k, kn, "metadata"))
		return 0;
	if (e->seen_meta++ || s->p >= s->end || *s->p != '{')
		return -1;
	return each_member(s, event_meta_member, e) < 0 ? -1 : 1;
}

static int event_member(struct scan *s, const char *k, size_t kn, void *ctx)
{
	struct event_scan *e = ctx;

	if (key_is(k, kn, "type")) {
		const char *b;
		size_t n;

		if (e->seen_type++ || s->p >= s->end || *s->p != '"' || scan_string(s, &b, &n) < 0 ||
		    memchr(b, '\\', n))
			return -1;
		e->ev->type = b;
		e->ev->type_len = n;
		return 1;
	}
	if (!key_is(k, kn, "object"))
		return 0;
	if (e->seen_obj++ || s->p >= s->end || *s->p != '{')
		return -1;
	e->base = s->p;
	if (each_member(s, event_obj_member, e) < 0)
		return -1;
	e->ev->obj = e->base;
	e->ev->obj_len = (size_t)(s->p - e->base);
	return 1;
}

int kop_json_event(const char *text, size_t len, struct kop_json_event *ev)
{
	struct scan s = { text, text + len };
	struct event_scan e = { ev, NULL, 0, 0, 0, 0, 0, 0, jv_object() };

	memset(ev, 0, sizeof(*ev));
	if (memchr(text, 0, len) || walked_whole(&s, each_member(&s, event_member, &e)) < 0 || !e.seen_type ||
	    !e.seen_obj || !e.seen_meta || !e.seen_kind || !e.seen_av) {
		jv_free(e.meta);
		return -1;
	}
	ev->meta = JV_OBJECT(jv_string("metadata"), e.meta);
	return 0;
}

/* ---- the values at a few paths ------------------------------------------------ */

#define SPAN_MAX_DEPTH 31	/* (the bits of a uint32_t seen, the paths' of a uint64_t alive) */
_Static_assert(KOP_JSON_SPANS_MAX <= 64, "a path is a bit of a uint64_t");

struct span_key {
	const char *k;
	size_t kn;
};

struct spans {
	int n;
	int len[KOP_JSON_SPANS_MAX];		/* keys in path i */
	struct span_key *keys;			/* path i's key j at keys[i * SPAN_MAX_DEPTH + j] */
	uint32_t seen[KOP_JSON_SPANS_MAX];		/* the depths at which path i's key was met */
	struct kop_json_span *out;
};

struct span_level {
	struct spans *sp;
	int depth;
	uint64_t alive;				/* the paths whose keys matched down to here */
};

static int span_member(struct scan *s, const char *k, size_t kn, void *ctx)
{
	struct span_level *l = ctx, child;
	struct spans *sp = l->sp;
	uint64_t ends = 0;
	const char *b = s->p;
	int i;

	child.sp = sp;
	child.depth = l->depth + 1;
	child.alive = 0;
	for (i = 0; i < sp->n; i++) {
		const struct span_key *key = &sp->keys[i * SPAN_MAX_DEPTH + l->depth];

		if (!(l->alive >> i & 1) || key->kn != kn || memcmp(key->k, k, kn))
			continue;
		if (sp->seen[i] >> l->depth & 1)
			return -1;	/* twice: the last one would win in a whole parse */
		sp->seen[i] |= 1u << l->depth;
		if (sp->len[i] == l->depth + 1)
			ends |= 1ull << i;
		else
			child.alive |= 1ull << i;
	}
	if (child.alive && s->p < s->end && *s->p == '{') {
		if (each_member(s, span_member, &child) < 0)
			return -1;
	} else if (!ends) {
		return 0;	/* nothing here, or no object on a path's way: left for the walk to skip */
	} else if (skip_value(s) < 0) {
		return -1;
	}
	for (i = 0; i < sp->n; i++) {
		if (ends >> i & 1) {
			sp->out[i].b = b;
			sp->out[i].n = (size_t)(s->p - b);
		}
	}
	return 1;
}

int kop_json_spans(const char *text, size_t len, jv paths, struct kop_json_span *out)
{
	struct scan s = { text, text + len };
	struct spans sp;
	struct span_level top;
	int i, j, rc = -1;

	memset(&sp, 0, sizeof(sp));
	sp.n = jv_get_kind(paths) == JV_KIND_ARRAY ? jv_array_length(jv_copy(paths)) : -1;
	if (sp.n < 0 || sp.n > KOP_JSON_SPANS_MAX || memchr(text, 0, len))
		return -1;
	sp.keys = kop_calloc((size_t)(sp.n ? sp.n : 1) * SPAN_MAX_DEPTH, sizeof(*sp.keys));
	sp.out = out;
	top.sp = &sp;
	top.depth = 0;
	top.alive = 0;
	for (i = 0; i < sp.n; i++) {
		jv path = jv_array_get(jv_copy(paths), i);	/* (its strings stay alive in paths) */

		out[i].b = NULL;
		out[i].n = 0;
		sp.len[i] = jv_get_kind(path) == JV_KIND_ARRAY ? jv_array_length(jv_copy(path)) : 0;
		if (sp.len[i] < 1 || sp.len[i] > SPAN_MAX_DEPTH) {
			jv_free(path);
			goto out;
		}
		for (j = 0; j < sp.len[i]; j++) {
			jv key = jv_array_get(jv_copy(path), j);

			if (jv_get_kind(key) != JV_KIND_STRING) {
				jv_free(key);
				jv_free(path);
				goto out;
			}
			sp.keys[i * SPAN_MAX_DEPTH + j].k = jv_string_value(key);
			sp.keys[i * SPAN_MAX_DEPTH + j].kn = (size_t)jv_string_length_bytes(jv_copy(key));
			jv_free(key);
			/* U+FFFD: a parse makes it of any byte that is no UTF-8, so raw bytes cannot say */
			if (memmem(sp.keys[i * SPAN_MAX_DEPTH + j].k, sp.keys[i * SPAN_MAX_DEPTH + j].kn,
				   "\xef\xbf\xbd", 3)) {
				jv_free(path);
				goto out;
			}
		}
		jv_free(path);
		top.alive |= 1ull << i;
	}
	rc = walked_whole(&s, each_member(&s, span_member, &top));
out:
	free(sp.keys);
	return rc;
}

int kop_json_cut(const char *text, size_t len, jv paths, struct kop_buf *out)
{
	struct kop_json_span sp[KOP_JSON_SPANS_MAX];
	const char *cb[KOP_JSON_SPANS_MAX], *ce[KOP_JSON_SPANS_MAX], *p = text, *end = text + len;
	int i, j, n = jv_get_kind(paths) == JV_KIND_ARRAY ? jv_array_length(jv_copy(paths)) : -1, m = 0;

	if (n < 0 || n > KOP_JSON_SPANS_MAX || kop_json_spans(text, len, paths, sp) < 0)
		return -1;
	for (i = 0; i < n; i++) {
		const char *q = sp[i].b, *key;

		if (!q)
			continue;
		/* back from the value to its key: "KEY" : (each_member let no escape in a key) */
		while (q > text && is_ws(q[-1]))
			q--;
		if (q == text || *--q != ':')
			return -1;
		while (q > text && is_ws(q[-1]))
			q--;
		if (q == text || q[-1] != '"' || !(key = memrchr(text, '"', (size_t)(q - 1 - text))))
			return -1;
		/* (in the text's order) */
		for (j = m; j > 0 && cb[j - 1] > key; j--) {
			cb[j] = cb[j - 1];
			ce[j] = ce[j - 1];
		}
		member_cut(text, end, key, sp[i].b + sp[i].n, &cb[j], &ce[j]);
		m++;
	}
	kop_buf_reset(out);
	for (i = 0; i < m; i++) {
		if (cb[i] < p)
			return -1;	/* (two cuts meet: members side by side, or one inside another) */
		kop_buf_add(out, p, (size_t)(cb[i] - p));
		p = ce[i];
	}
	kop_buf_add(out, p, (size_t)(end - p));
	return 0;
}

int kop_json_elements(const char *text, size_t len, struct kop_json_span *out, size_t max)
{
	struct scan s = { text, text + len };
	size_t n = 0;

	if (memchr(text, 0, len))
		return -1;
	skip_ws(&s);
	if (s.p >= s.end || *s.p != '[')
		return -1;
	s.p++;
	skip_ws(&s);
	if (s.p < s.end && *s.p == ']') {
		s.p++;
		return walked_whole(&s, 0) < 0 ? -1 : 0;
	}
	for (;;) {
		const char *b = s.p;

		if (n >= max || skip_value(&s) < 0 || s.p == b)
			return -1;
		out[n].b = b;
		out[n].n = (size_t)(s.p - b);
		n++;
		skip_ws(&s);
		if (s.p < s.end && *s.p == ',') {
			s.p++;
			skip_ws(&s);
			continue;
		}
		if (s.p < s.end && *s.p == ']') {
			s.p++;
			return walked_whole(&s, 0) < 0 ? -1 : (int)n;
		}
		return -1;
	}
}
