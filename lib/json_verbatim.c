/*
 * Whether a JSON text may be sent as it is, in place of the text a parse by
 * libjq and a dump would make of it (kop_json_verbatim): kapply sends the
 * objects of its apply and create lines so. Only texts on which the two
 * cannot differ in meaning pass, read as JSON (a create's body) or as YAML
 * (an apply's: kube-apiserver reads it with go-yaml): compact JSON (RFC 8259,
 * no white space outside strings), numbers that the dump writes with the
 * same digits, strings of UTF-8 whose escapes stand for what the dump
 * writes escaped too or for ASCII, each key once in its object. Such a text
 * without an escape \u is the dump's own bytes (the jsonl fuzz target checks
 * it).
 */
#include <stdlib.h>
#include <string.h>
#include "jsonl.h"
#include "kop.h"
#include "banned.h"

/*
 * jq 1.6's parser refuses nesting past its stack of 256 (MAX_PARSING_DEPTH),
 * where an object's member takes two places (the object and the key) and an
 * array's element one: far below that, a text is left to it to say so.
 */
#define VERBATIM_MAX_DEPTH 128
/* Significant digits that read back the same from a double, whatever they are. */
#define VERBATIM_MAX_DIGITS 15

struct vkey {
	const char *b;
	size_t n;
};

struct vscan {
	const unsigned char *p, *end;
	struct vkey *keys;	/* the keys of the objects open, outermost first */
	size_t nkeys, cap;
};

static int hex4(const unsigned char *p, unsigned *out)
{
	unsigned v = 0;
	int i;

	for (i = 0; i < 4; i++) {
		unsigned c = p[i];

		if (c >= '0' && c <= '9')
			v = v * 16 + (c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v * 16 + (c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v = v * 16 + (c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

/* The length of the UTF-8 sequence at p (below end), or 0 when it is none (overlong, a surrogate, beyond U+10FFFF). */
static size_t utf8_len(const unsigned char *p, const unsigned char *end)
{
	unsigned c = p[0], cp;
	size_t n, i;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, cp = c & 0x07;
	else
		return 0;
	if ((size_t)(end - p) < n)
		return 0;
	for (i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/*
 * At a '"': past the string. Its bytes in *b, *n when b is not NULL (a key:
 * then without any escape, so that bytes alike are keys alike). Control
 * characters and DEL (the dump escapes it, go-yaml refuses it raw), escapes
 * other than \" \\ \b \f \n \r \t and \u (go-yaml has no \/), a \u beyond
 * ASCII (the dump writes it raw, and go-yaml reads some such raw characters
 * otherwise: NEL, LS and PS break a line) and bytes that are no UTF-8 fail.
 */
static int vstring(struct vscan *s, const char **b, size_t *n)
{
	const unsigned char *start = ++s->p;

	while (s->p < s->end) {
		unsigned c = *s->p;

		if (c == '"') {
			if (b) {
				*b = (const char *)start;
				*n = (size_t)(s->p - start);
			}
			s->p++;
			return 0;
		}
		if (c < 0x20 || c == 0x7f)
			return -1;
		if (c == '\\') {
			unsigned u;

			if (b || s->p + 1 >= s->end)
				return -1;
			c = s->p[1];
			if (c == 'u') {
				if (s->end - s->p < 6 || hex4(s->p + 2, &u) < 0 || u >= 0x80)
					return -1;
				s->p += 6;
			} else if (c && strchr("\"\\bfnrt", (int)c)) {
				s->p += 2;
			} else {
				return -1;
			}
			continue;
		}
		if (c < 0x80) {
			s->p++;
		} else {
			size_t l = utf8_len(s->p, s->end);

			if (!l)
				return -1;
			s->p += l;
		}
	}
	return -1;
}

/*
 * A number of at most VERBATIM_MAX_DIGITS significant digits, without an
 * exponent, its fraction (if any) not ending in 0 (the dump writes 1.0 as 1,
 * and a JSON reader refuses 1.0 for an integer field), and not below 1e-4
 * unless 0 (the dump writes 0.00001 as 1e-05, and a quantity's reader keeps
 * the form it is given).
 */
static int vnumber(struct vscan *s)
{
	size_t digits = 0, zeros = 0;
	int lead = 1;	/* still in the leading zeros, which are not significant */
	int zero = 0;	/* the integer part is 0 */

	if (s->p < s->end && *s->p == '-')
		s->p++;
	if (s->p >= s->end || *s->p < '0' || *s->p > '9')
		return -1;
	if (*s->p == '0') {
		s->p++;
		zero = 1;
	} else {
		while (s->p < s->end && *s->p >= '0' && *s->p <= '9') {
			digits++;
			s->p++;
		}
		lead = 0;
	}
	if (s->p < s->end && *s->p == '.') {
		s->p++;
		if (s->p >= s->end || *s->p < '0' || *s->p > '9')
			return -1;
		while (s->p < s->end && *s->p >= '0' && *s->p <= '9') {
			if (*s->p != '0' || !lead) {
				lead = 0;
				digits++;
			} else {
				zeros++;
			}
			s->p++;
		}
		if (s->p[-1] == '0' || (zero && zeros >= 4))
			return -1;
	}
	if (s->p < s->end && (*s->p == 'e' || *s->p == 'E'))
		return -1;
	return digits <= VERBATIM_MAX_DIGITS ? 0 : -1;
}

static int key_cmp(const void *pa, const void *pb)
{
	const struct vkey *a = pa, *b = pb;

	if (a->n != b->n)
		return a->n < b->n ? -1 : 1;
	return memcmp(a->b, b->b, a->n);
}

static int vvalue(struct vscan *s, int depth);

/* After a member or an element: 1 past a ',' (another follows), 0 past close (the end), -1 else. */
static int vnext(struct vscan *s, char close)
{
	if (s->p >= s->end || (*s->p != ',' && *s->p != close))
		return -1;
	return *s->p++ == ',';
}

/* At a '{': past the object, its keys all different; depth: the places of libjq's stack before it. */
static int vobject(struct vscan *s, int depth)
{
	size_t first = s->nkeys, i;
	int more = 1;

	s->p++;
	if (s->p < s->end && *s->p == '}') {
		s->p++;
		return 0;
	}
	while (more) {
		struct vkey k;

		if (s->p >= s->end || *s->p != '"' || vstring(s, &k.b, &k.n) < 0)
			return -1;
		if (s->nkeys == s->cap) {
			s->cap = s->cap ? 2 * s->cap : 64;
			s->keys = kop_realloc(s->keys, s->cap * sizeof(*s->keys));
		}
		s->keys[s->nkeys++] = k;
		if (s->p >= s->end || *s->p != ':')
			return -1;
		s->p++;
		/* (the object and its key: two places of libjq's stack) */
		if (vvalue(s, depth + 2) < 0 || (more = vnext(s, '}')) < 0)
			return -1;
	}
	if (s->nkeys - first > 1) {
		qsort(s->keys + first, s->nkeys - first, sizeof(*s->keys), key_cmp);
		for (i = first + 1; i < s->nkeys; i++)
			if (!key_cmp(&s->keys[i - 1], &s->keys[i]))
				return -1;
	}
	s->nkeys = first;
	return 0;
}

static int vvalue(struct vscan *s, int depth)
{
	if (s->p >= s->end)
		return -1;
	switch (*s->p) {
	case '{':
		return depth >= VERBATIM_MAX_DEPTH ? -1 : vobject(s, depth);
	case '[':
		if (depth >= VERBATIM_MAX_DEPTH)
			return -1;
		s->p++;
		if (s->p < s->end && *s->p == ']') {
			s->p++;
			return 0;
		}
		for (;;) {
			int more;

			if (vvalue(s, depth + 1) < 0 || (more = vnext(s, ']')) < 0)
				return -1;
			if (!more)
				return 0;
		}
	case '"':
		return vstring(s, NULL, NULL);
	case 't':
		if (s->end - s->p >= 4 && !memcmp(s->p, "true", 4)) {
			s->p += 4;
			return 0;
		}
		return -1;
	case 'f':
		if (s->end - s->p >= 5 && !memcmp(s->p, "false", 5)) {
			s->p += 5;
			return 0;
		}
		return -1;
	case 'n':
		if (s->end - s->p >= 4 && !memcmp(s->p, "null", 4)) {
			s->p += 4;
			return 0;
		}
		return -1;
	default:
		return vnumber(s);
	}
}

int kop_json_verbatim(const char *text, size_t len)
{
	struct vscan s = { (const unsigned char *)text, (const unsigned char *)text + len, NULL, 0, 0 };
	int rc = vvalue(&s, 0);

	if (!rc && s.p != s.end)
		rc = -1;
	free(s.keys);
	return rc;
}
