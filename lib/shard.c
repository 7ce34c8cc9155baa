/*
 * Shard selectors (KEP-5866): parsing, as kube-apiserver's
 * k8s.io/apiserver/pkg/sharding does, and matching by 64-bit FNV-1a.
 *
 * The server reads the parameter as a CEL expression and accepts only a
 * shardRange() call or calls joined by ||. This file parses the part of
 * CEL's grammar that can appear (calls, field selections, literals and the
 * binary and unary operators, by CEL's precedence) into a small tree, then
 * walks it with the server's rules, so that what the server refuses is
 * refused here with its words: an operator other than || is "unsupported
 * function \"_&&_\"", a bound must be a 0x-prefixed 16-digit string, and so
 * on. A syntax error says where, in this file's words.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kop.h"
#include "shard.h"
#include "banned.h"

uint64_t kop_fnv1a64(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* The expression tree: a call (operators are calls, as in CEL's AST), an identifier, a selection or a literal. */
enum node_kind { N_CALL, N_IDENT, N_SELECT, N_STRING, N_INT, N_DOUBLE, N_BOOL, N_NULL, N_LIST };

struct node {
	enum node_kind kind;
	char *name;		/* function, identifier, field, or the string literal's value */
	struct node **args;	/* call arguments; a selection's operand is args[0] */
	size_t nargs;
};

static void node_free(struct node *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->nargs; i++)
		node_free(n->args[i]);
	free(n->args);
	free(n->name);
	free(n);
}

static struct node *node_new(enum node_kind kind, char *name)
{
	struct node *n = kop_calloc(1, sizeof(*n));

	n->kind = kind;
	n->name = name;
	return n;
}

static void node_add(struct node *n, struct node *arg)
{
	n->args = kop_realloc(n->args, (n->nargs + 1) * sizeof(*n->args));
	n->args[n->nargs++] = arg;
}

static struct node *call2(const char *fn, struct node *a, struct node *b)
{
	struct node *n = node_new(N_CALL, kop_strdup(fn));

	node_add(n, a);
	if (b)
		node_add(n, b);
	return n;
}

struct parser {
	const char *s;
	size_t pos;
	char *err;
	int failed;
};

static void skip_ws(struct parser *p)
{
	while (p->s[p->pos] && strchr(" \t\r\n", p->s[p->pos]))
		p->pos++;
}

static int syntax_error(struct parser *p, const char *what)
{
	if (!p->failed) {
		if (p->s[p->pos])
			kop_error(p->err, "CEL parse error: Syntax error: %s at position %zu, got '%c'", what, p->pos,
				  p->s[p->pos]);
		else
			kop_error(p->err, "CEL parse error: Syntax error: %s at position %zu, got the end", what,
				  p->pos);
	}
	p->failed = 1;
	return -1;
}

/* Consumes tok (after white space) when it comes next. */
static int accept(struct parser *p, const char *tok)
{
	size_t n = strlen(tok);

	skip_ws(p);
	if (strncmp(p->s + p->pos, tok, n))
		return 0;
	p->pos += n;
	return 1;
}

static int is_ident_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_ident_char(char c)
{
	return is_ident_start(c) || (c >= '0' && c <= '9');
}

static struct node *parse_expr(struct parser *p);

/* Arguments up to ")" (the "(" consumed) into n. */
static int parse_args(struct parser *p, struct node *n, const char *close)
{
	if (accept(p, close))
		return 0;
	for (;;) {
		struct node *a = parse_expr(p);

		if (!a)
			return -1;
		node_add(n, a);
		if (accept(p, close))
			return 0;
		if (!accept(p, ","))
			return syntax_error(p, close[0] == ')' ? "expected ',' or ')'" : "expected ',' or ']'");
	}
}

static struct node *parse_string(struct parser *p)
{
	char q = p->s[p->pos++];
	size_t start = p->pos;

	while (p->s[p->pos] && p->s[p->pos] != q) {
		if (p->s[p->pos] == '\\' || p->s[p->pos] == '\n') {
			syntax_error(p, "escape sequences and line breaks in strings are not supported");
			return NULL;
		}
		p->pos++;
	}
	if (!p->s[p->pos]) {
		syntax_error(p, "unterminated string");
		return NULL;
	}
	p->pos++;
	return node_new(N_STRING, kop_strndup(p->s + start, p->pos - 1 - start));
}

static struct node *parse_number(struct parser *p)
{
	size_t start = p->pos;
	int dbl = 0;

	for (;;) {
		char c = p->s[p->pos], prev = p->s[p->pos - 1];

		if (c == '.' || ((c == '+' || c == '-') && (prev == 'e' || prev == 'E')))
			dbl = 1;
		else if (!is_ident_char(c))
			break;
		p->pos++;
	}
	return node_new(dbl ? N_DOUBLE : N_INT, kop_strndup(p->s + start, p->pos - start));
}

/* A primary: a literal, an identifier or a global call, a parenthesised expression or a list. */
static struct node *parse_primary(struct parser *p)
{
	char c;

	skip_ws(p);
	c = p->s[p->pos];
	if (c == '\'' || c == '"')
		return parse_string(p);
	if (c >= '0' && c <= '9')
		return parse_number(p);
	if (accept(p, "(")) {
		struct node *n = parse_expr(p);

		if (n && !accept(p, ")")) {
			node_free(n);
			syntax_error(p, "expected ')'");
			return NULL;
		}
		return n;
	}
	if (accept(p, "[")) {
		struct node *n = node_new(N_LIST, NULL);

		if (parse_args(p, n, "]") < 0) {
			node_free(n);
			return NULL;
		}
		return n;
	}
	if (c == '.')
		p->pos++;	/* a leading dot names the root scope: the same identifier here */
	if (is_ident_start(p->s[p->pos])) {
		size_t start = p->pos;
		char *name;

		while (is_ident_char(p->s[p->pos]))
			p->pos++;
		name = kop_strndup(p->s + start, p->pos - start);
		if (!strcmp(name, "true") || !strcmp(name, "false"))
			return node_new(N_BOOL, name);
		if (!strcmp(name, "null"))
			return node_new(N_NULL, name);
		if (accept(p, "(")) {
			struct node *n = node_new(N_CALL, name);

			if (parse_args(p, n, ")") < 0) {
				node_free(n);
				return NULL;
			}
			return n;
		}
		return node_new(N_IDENT, name);
	}
	syntax_error(p, "expected an expression");
	return NULL;
}

/* Selections, method calls and indexing after a primary. */
static struct node *parse_member(struct parser *p)
{
	struct node *n = parse_primary(p);

	while (n) {
		if (accept(p, ".")) {
			size_t start;
			char *field;

			skip_ws(p);
			start = p->pos;
			while (is_ident_char(p->s[p->pos]))
				p->pos++;
			if (p->pos == start || !is_ident_start(p->s[start])) {
				node_free(n);
				syntax_error(p, "expected a field name after '.'");
				return NULL;
			}
			field = kop_strndup(p->s + start, p->pos - start);
			if (accept(p, "(")) {
				struct node *m = node_new(N_CALL, field);

				node_add(m, n);	/* the receiver */
				if (parse_args(p, m, ")") < 0) {
					node_free(m);
					return NULL;
				}
				n = m;
			} else {
				struct node *s = node_new(N_SELECT, field);

				node_add(s, n);
				n = s;
			}
		} else if (accept(p, "[")) {
			struct node *i = parse_expr(p);

			if (!i || !accept(p, "]")) {
				node_free(i);
				node_free(n);
				syntax_error(p, "expected ']'");
				return NULL;
			}
			n = call2("_[_]", n, i);
		} else {
			break;
		}
	}
	return n;
}

static struct node *parse_unary(struct parser *p)
{
	struct node *n;

	if (accept(p, "!")) {
		n = parse_unary(p);
		return n ? call2("!_", n, NULL) : NULL;
	}
	if (accept(p, "-")) {
		n = parse_unary(p);
		return n ? call2("-_", n, NULL) : NULL;
	}
	return parse_member(p);
}

/* One level of left-associative binary operators: ops[i] is spelled toks[i]. */
static struct node *parse_binary(struct parser *p, int level);

static const struct {
	const char *tok, *fn;
	int level;
} binops[] = {
	{ "||", "_||_", 0 }, { "&&", "_&&_", 1 },
	{ "<=", "_<=_", 2 }, { ">=", "_>=_", 2 }, { "==", "_==_", 2 }, { "!=", "_!=_", 2 },
	{ "<", "_<_", 2 }, { ">", "_>_", 2 }, { "in ", "@in", 2 },
	{ "+", "_+_", 3 }, { "-", "_-_", 3 },
	{ "*", "_*_", 4 }, { "/", "_/_", 4 }, { "%", "_%_", 4 },
};

static struct node *parse_binary(struct parser *p, int level)
{
	struct node *l;

	if (level > 4)
		return parse_unary(p);
	l = parse_binary(p, level + 1);
	while (l) {
		size_t i;

		for (i = 0; i < sizeof(binops) / sizeof(binops[0]); i++)
			if (binops[i].level == level && accept(p, binops[i].tok))
				break;
		if (i == sizeof(binops) / sizeof(binops[0]))
			break;
		{
			struct node *r = parse_binary(p, level + 1);

			if (!r) {
				node_free(l);
				return NULL;
			}
			l = call2(binops[i].fn, l, r);
		}
	}
	return l;
}

static struct node *parse_expr(struct parser *p)
{
	struct node *c = parse_binary(p, 0);

	if (c && accept(p, "?")) {
		struct node *a = parse_expr(p), *b = NULL;

		if (a && accept(p, ":"))
			b = parse_expr(p);
		else if (a)
			syntax_error(p, "expected ':'");
		if (!b) {
			node_free(a);
			node_free(c);
			return NULL;
		}
		c = call2("_?_:_", c, a);
		node_add(c, b);
	}
	return c;
}

static const char *kind_name(enum node_kind k)
{
	switch (k) {
	case N_CALL:
		return "CallKind";
	case N_IDENT:
		return "IdentKind";
	case N_SELECT:
		return "SelectKind";
	case N_LIST:
		return "ListKind";
	default:
		return "LiteralKind";
	}
}

/* object.metadata.uid as text into b: 0, or -1 when n is not a selection chain. */
static int field_path(const struct node *n, struct kop_buf *b)
{
	if (n->kind == N_IDENT) {
		kop_buf_adds(b, n->name);
		return 0;
	}
	if (n->kind != N_SELECT || field_path(n->args[0], b) < 0)
		return -1;
	kop_buf_addf(b, ".%s", n->name);
	return 0;
}

/* A bound: "0x" and 16 lowercase hex digits, or 0x10000000000000000; 0, or -1 with err. */
static int hex_bound(const struct node *n, const char *name, uint64_t *v, int *max, char *err)
{
	const char *s, *hex;
	size_t len;

	if (n->kind == N_CALL || n->kind == N_IDENT || n->kind == N_SELECT || n->kind == N_LIST)
		return kop_error(err, "%s must be a string literal (e.g. '0xff'), got expression kind %s", name,
				 kind_name(n->kind));
	if (n->kind != N_STRING)
		return kop_error(err, "%s must be a string literal, got %s", name,
				 n->kind == N_INT ? (strchr(n->name, 'u') || strchr(n->name, 'U') ? "uint64" : "int64")
				 : n->kind == N_DOUBLE ? "float64" : n->kind == N_BOOL ? "bool" : "types.NullValue");
	s = n->name;
	if (strncmp(s, "0x", 2))
		return kop_error(err, "%s must have '0x' prefix, got \"%s\"", name, s);
	hex = s + 2;
	len = strlen(hex);
	if (!len)
		return kop_error(err, "%s: hex value is required after '0x'", name);
	if (len > 17)
		return kop_error(err, "%s: hex value too long (%zu chars, max 17): \"%s\"", name, len, hex);
	for (size_t i = 0; i < len; i++)
		if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f')))
			return kop_error(err, "%s: invalid hex character \"%c\" in \"%s\"", name, hex[i], s);
	*max = 0;
	if (len == 17) {
		if (strcmp(s, "0x10000000000000000"))
			return kop_error(err, "%s: 17-digit hex value must be '0x10000000000000000' (2^64), got \"%s\"",
					 name, s);
		*max = 1;
		*v = 0;
		return 0;
	}
	if (len != 16)
		return kop_error(err, "%s must be a 0x-prefixed 16-digit hex value, got \"%s\" (did you mean \"0x%.*s%s\"?)",
				 name, s, (int)(16 - len), "0000000000000000", hex);
	*v = strtoull(hex, NULL, 16);
	return 0;
}

static int less(uint64_t a, int amax, uint64_t b, int bmax)
{
	if (amax || bmax)
		return !amax && bmax;
	return a < b;
}

static void hex_text(struct kop_buf *b, uint64_t v, int max)
{
	if (max)
		kop_buf_adds(b, "0x10000000000000000");
	else
		kop_buf_addf(b, "0x%016llx", (unsigned long long)v);
}

/* Walks the tree as the server does: || of shardRange() calls. */
static int walk(const struct node *n, struct kop_shard_sel *sel, int *key, char *err)
{
	struct kop_buf b = KOP_BUF_INIT;
	struct kop_shard_range r;
	int k, start_max;

	if (n->kind != N_CALL)
		return kop_error(err, "unexpected expression kind %s; expected shardRange() call or || operator",
				 kind_name(n->kind));
	if (!strcmp(n->name, "_||_"))
		return walk(n->args[0], sel, key, err) < 0 ? -1 : walk(n->args[1], sel, key, err);
	if (strcmp(n->name, "shardRange"))
		return kop_error(err, "unsupported function \"%s\"; only shardRange() and || are allowed", n->name);
	if (n->nargs != 3)
		return kop_error(err, "shardRange() requires exactly 3 arguments, got %zu", n->nargs);
	if (field_path(n->args[0], &b) < 0) {
		kop_buf_release(&b);
		return kop_error(err, "shardRange() first argument: expected field path (e.g. object.metadata.uid), got expression kind %s",
				 kind_name(n->args[0]->kind));
	}
	if (!strcmp(b.buf, "object.metadata.uid")) {
		k = KOP_SHARD_UID;
	} else if (!strcmp(b.buf, "object.metadata.namespace")) {
		k = KOP_SHARD_NAMESPACE;
	} else {
		kop_error(err, "unsupported field path \"%s\"; supported: object.metadata.uid, object.metadata.namespace",
			  b.buf);
		kop_buf_release(&b);
		return -1;
	}
	kop_buf_release(&b);
	if (hex_bound(n->args[1], "hexStart", &r.start, &start_max, err) < 0 ||
	    hex_bound(n->args[2], "hexEnd", &r.end, &r.end_max, err) < 0)
		return -1;
	if (!less(r.start, start_max, r.end, r.end_max))
		return kop_error(err, "shard range start %s must be less than end %s", n->args[1]->name,
				 n->args[2]->name);
	if (*key >= 0 && k != *key)
		return kop_error(err, "all shard ranges must use the same field, got \"%s\" and \"%s\"",
				 *key == KOP_SHARD_UID ? "object.metadata.uid" : "object.metadata.namespace",
				 k == KOP_SHARD_UID ? "object.metadata.uid" : "object.metadata.namespace");
	*key = k;
	sel->ranges = kop_realloc(sel->ranges, (sel->n + 1) * sizeof(*sel->ranges));
	sel->ranges[sel->n++] = r;
	return 0;
}

int kop_shard_parse(const char *s, struct kop_shard_sel *sel, char *err)
{
	struct parser p = { .s = s, .err = err };
	struct node *root;
	struct kop_buf b = KOP_BUF_INIT;
	int key = -1;

	memset(sel, 0, sizeof(*sel));
	skip_ws(&p);
	if (!s[p.pos])
		return kop_error(err, "empty shard selector is not allowed; omit the parameter for unfiltered lists");
	root = parse_expr(&p);
	if (root) {
		skip_ws(&p);
		if (s[p.pos]) {
			node_free(root);
			root = NULL;
			syntax_error(&p, "expected the end of the expression");
		}
	}
	if (!root)
		return -1;
	if (walk(root, sel, &key, err) < 0) {
		node_free(root);
		kop_shard_free(sel);
		return -1;
	}
	node_free(root);
	sel->key = key;
	for (size_t i = 0; i < sel->n; i++) {
		if (i)
			kop_buf_adds(&b, " || ");
		kop_buf_addf(&b, "shardRange(%s, '", key == KOP_SHARD_UID ? "object.metadata.uid" : "object.metadata.namespace");
		hex_text(&b, sel->ranges[i].start, 0);
		kop_buf_adds(&b, "', '");
		hex_text(&b, sel->ranges[i].end, sel->ranges[i].end_max);
		kop_buf_adds(&b, "')");
	}
	sel->string = kop_buf_detach(&b, NULL);
	return 0;
}

void kop_shard_free(struct kop_shard_sel *sel)
{
	free(sel->ranges);
	free(sel->string);
	memset(sel, 0, sizeof(*sel));
}

int kop_shard_match_value(const struct kop_shard_sel *sel, const char *value, size_t len)
{
	uint64_t h = kop_fnv1a64(value, len);

	for (size_t i = 0; i < sel->n; i++)
		if (h >= sel->ranges[i].start && (sel->ranges[i].end_max || h < sel->ranges[i].end))
			return 1;
	return 0;
}

int kop_shard_match(const struct kop_shard_sel *sel, jv obj)
{
	jv md = jv_get_kind(obj) == JV_KIND_OBJECT ? jv_object_get(jv_copy(obj), jv_string("metadata")) : jv_null();
	jv v = jv_get_kind(md) == JV_KIND_OBJECT ?
		jv_object_get(jv_copy(md), jv_string(sel->key == KOP_SHARD_UID ? "uid" : "namespace")) : jv_null();
	int m;

	if (jv_get_kind(v) == JV_KIND_STRING)
		m = kop_shard_match_value(sel, jv_string_value(v), (size_t)jv_string_length_bytes(jv_copy(v)));
	else
		m = kop_shard_match_value(sel, "", 0);
	jv_free(v);
	jv_free(md);
	return m;
}

char *kop_shard_range_string(enum kop_shard_key key, unsigned i, unsigned n)
{
	return kop_shard_mask_string(key, (uint64_t)1 << i, n);
}

char *kop_shard_mask_string(enum kop_shard_key key, uint64_t mask, unsigned n)
{
	struct kop_buf b = KOP_BUF_INIT;
	unsigned __int128 span = (unsigned __int128)1 << 64;
	unsigned i = 0, j;

	while (i < n && i < 64) {
		if (!(mask >> i & 1)) {
			i++;
			continue;
		}
		for (j = i; j + 1 < n && j + 1 < 64 && (mask >> (j + 1) & 1); j++)
			;
		kop_buf_addf(&b, "%sshardRange(%s, '", b.len ? " || " : "",
			     key == KOP_SHARD_UID ? "object.metadata.uid" : "object.metadata.namespace");
		hex_text(&b, (uint64_t)(span * i / n), 0);
		kop_buf_adds(&b, "', '");
		hex_text(&b, (uint64_t)(span * (j + 1) / n), j + 1 == n);
		kop_buf_adds(&b, "')");
		i = j + 1;
	}
	return kop_buf_detach(&b, NULL);
}

char *kop_shard_minus(const struct kop_shard_sel *a, const struct kop_shard_sel *b)
{
	struct kop_buf out = KOP_BUF_INIT;
	unsigned __int128 top = (unsigned __int128)1 << 64;

	for (size_t i = 0; i < a->n; i++) {
		/* a's range cut by each of b's in turn: at most one piece each side of a cut */
		unsigned __int128 ps[64], pe[64], s, e;
		size_t np = 1, j, k;

		ps[0] = a->ranges[i].start;
		pe[0] = a->ranges[i].end_max ? top : a->ranges[i].end;
		for (j = 0; j < b->n && np; j++) {
			unsigned __int128 bs = b->ranges[j].start, be = b->ranges[j].end_max ? top : b->ranges[j].end;
			size_t n = 0;

			for (k = 0; k < np; k++) {
				if (be <= ps[k] || pe[k] <= bs) {
					ps[n] = ps[k], pe[n] = pe[k], n++;
					continue;
				}
				s = ps[k], e = pe[k];
				if (s < bs && n < 64)
					ps[n] = s, pe[n] = bs, n++;
				if (be < e && n < 64)
					ps[n] = be, pe[n] = e, n++;
			}
			np = n;
		}
		for (k = 0; k < np; k++) {
			kop_buf_addf(&out, "%sshardRange(%s, '", out.len ? " || " : "",
				     a->key == KOP_SHARD_UID ? "object.metadata.uid" : "object.metadata.namespace");
			hex_text(&out, (uint64_t)ps[k], 0);
			kop_buf_adds(&out, "', '");
			hex_text(&out, (uint64_t)pe[k], pe[k] == top);
			kop_buf_adds(&out, "')");
		}
	}
	return kop_buf_detach(&out, NULL);
}

enum kop_shard_cut kop_shard_remove(struct kop_shard_sel *sel, const struct kop_shard_sel *drop)
{
	struct kop_shard_sel rest;
	char err[KOP_ERRLEN], *left;
	enum kop_shard_key key = sel->key;

	if (drop->key != key)
		return KOP_SHARD_SAME;
	left = kop_shard_minus(sel, drop);
	if (!*left) {
		free(left);
		kop_shard_free(sel);
		sel->key = key;
		sel->string = kop_strdup("");
		return KOP_SHARD_NONE;
	}
	/* (what kop_shard_minus writes parses, in the canonical form: the same text, the same ranges) */
	if (kop_shard_parse(left, &rest, err) < 0 || !strcmp(rest.string, sel->string)) {
		kop_shard_free(&rest);
		free(left);
		return KOP_SHARD_SAME;
	}
	free(left);
	kop_shard_free(sel);
	*sel = rest;
	return KOP_SHARD_LESS;
}
