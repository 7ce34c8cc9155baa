/*
 * CEL's grammar, by precedence climbing, into the tree of cel-priv.h:
 *
 *   expr     = or ['?' or ':' expr]
 *   or       = and {'||' and}          and = rel {'&&' rel}
 *   rel      = add {('=='|'!='|'<'|'<='|'>'|'>='|'in') add}
 *   add      = mul {('+'|'-') mul}     mul = unary {('*'|'/'|'%') unary}
 *   unary    = {'!'} member | {'-'} member | member
 *   member   = primary {'.' IDENT ['(' args ')'] | '[' expr ']'}
 *   primary  = IDENT ['(' args ')'] | '(' expr ')' | '[' list ']' | '{' map '}' | literal
 *
 * The macros all, exists, exists_one, filter and map (e.all(x, p)) bind
 * their first argument, a simple name, in the expressions after it; has()
 * takes a field selection. Functions and macros outside the subset are
 * refused here, at their position, so that a policy is never half
 * understood.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kop.h"
#include "cel.h"
#include "cel-priv.h"
#include "banned.h"

/* Deeper trees are refused: evaluation and freeing recurse. */
#define CEL_MAX_DEPTH 100

/* The variables of the macros the parser is inside, innermost last. */
#define CEL_MAX_BOUND 16

struct parser {
	struct cel_lex lx;
	const char *const *names;
	int depth;
	const char *bound[CEL_MAX_BOUND];
	size_t nbound;
};

void cel_node_free(struct cel_node *n)
{
	size_t i;

	if (!n)
		return;
	for (i = 0; i < n->n; i++)
		cel_node_free(n->kid[i]);
	free(n->kid);
	jv_free(n->val);
	free(n);
}

static struct cel_node *node(enum cel_op op, jv val)
{
	struct cel_node *n = kop_calloc(1, sizeof(*n));

	n->op = op;
	n->depth = 1;
	n->val = val;
	return n;
}

static void add_kid(struct cel_node *n, struct cel_node *k)
{
	n->kid = kop_realloc(n->kid, (n->n + 1) * sizeof(*n->kid));
	n->kid[n->n++] = k;
	if (k && k->depth >= n->depth)
		n->depth = k->depth + 1;
}

static struct cel_node *node2(enum cel_op op, struct cel_node *a, struct cel_node *b)
{
	struct cel_node *n = node(op, jv_invalid());

	add_kid(n, a);
	add_kid(n, b);
	return n;
}

/* Whether n makes the tree too deep (then an error at the current token). */
static int too_deep(struct parser *p, const struct cel_node *n)
{
	if (n->depth <= CEL_MAX_DEPTH)
		return 0;
	cel_lex_error(&p->lx, p->lx.start, "expression nested too deeply");
	return 1;
}

static int is_punct(const struct parser *p, const char *s)
{
	return p->lx.tok == CEL_T_PUNCT && !strcmp(p->lx.punct, s);
}

static int is_ident(const struct parser *p, const char *s)
{
	return p->lx.tok == CEL_T_IDENT && !strcmp(jv_string_value(p->lx.val), s);
}

static int expect(struct parser *p, const char *s)
{
	if (!is_punct(p, s)) {
		if (p->lx.tok == CEL_T_EOF)
			return cel_lex_error(&p->lx, p->lx.start, "expected '%s', found the end", s);
		return cel_lex_error(&p->lx, p->lx.start, "expected '%s'", s);
	}
	return cel_lex_next(&p->lx);
}

static struct cel_node *parse_expr(struct parser *p);

/* Arguments after '(' up to ')' into n (after its existing kids): 0 or -1. */
static int parse_args(struct parser *p, struct cel_node *n, const char *close)
{
	if (cel_lex_next(&p->lx) < 0)
		return -1;
	while (!is_punct(p, close)) {
		struct cel_node *a = parse_expr(p);

		if (!a)
			return -1;
		add_kid(n, a);
		if (!is_punct(p, ","))
			break;
		if (cel_lex_next(&p->lx) < 0)
			return -1;
	}
	return expect(p, close);
}

static const struct {
	const char *name;
	enum cel_op op;
} macros[] = {
	{ "all", CEL_ALL }, { "exists", CEL_EXISTS }, { "exists_one", CEL_EXISTS_ONE },
	{ "filter", CEL_FILTER }, { "map", CEL_MAPLIST },
};

/*
 * A macro recv.name(x, e) (map also recv.map(x, p, e)) at offset off, its '(' current: x, a simple
 * name, is bound in the expressions that follow it.
 */
static struct cel_node *parse_macro(struct parser *p, struct cel_node *recv, enum cel_op op, const char *name,
				    size_t off)
{
	struct cel_node *n = node(op, jv_invalid());
	size_t want = op == CEL_MAPLIST ? 0 : 2, xoff;

	add_kid(n, recv);
	if (cel_lex_next(&p->lx) < 0)
		goto fail;
	xoff = p->lx.start;
	if (p->lx.tok != CEL_T_IDENT || is_ident(p, "in") || is_ident(p, "true") || is_ident(p, "false") ||
	    is_ident(p, "null")) {
		cel_lex_error(&p->lx, xoff, "argument must be a simple name");
		goto fail;
	}
	n->val = jv_copy(p->lx.val);
	if (cel_lex_next(&p->lx) < 0)
		goto fail;
	if (is_punct(p, "(") || is_punct(p, ".") || is_punct(p, "[")) {
		cel_lex_error(&p->lx, xoff, "argument must be a simple name");
		goto fail;
	}
	if (p->nbound == CEL_MAX_BOUND) {
		cel_lex_error(&p->lx, xoff, "macros nested too deeply");
		goto fail;
	}
	p->bound[p->nbound++] = jv_string_value(n->val);
	while (is_punct(p, ",")) {
		struct cel_node *a;

		if (cel_lex_next(&p->lx) < 0 || !(a = parse_expr(p))) {
			p->nbound--;
			goto fail;
		}
		add_kid(n, a);
	}
	p->nbound--;
	if (expect(p, ")") < 0)
		goto fail;
	if (want ? n->n != want : n->n != 2 && n->n != 3) {
		cel_lex_error(&p->lx, off, "'%s' takes %s", name, want ? "2 arguments" : "2 or 3 arguments");
		goto fail;
	}
	return n;
fail:
	cel_node_free(n);
	return NULL;
}

/* A call of name (receiver recv, or NULL) at offset off, its '(' current. */
static struct cel_node *parse_call(struct parser *p, struct cel_node *recv, const char *name, size_t off)
{
	struct cel_node *n;
	size_t want, i;

	for (i = 0; recv && i < sizeof(macros) / sizeof(macros[0]); i++)
		if (!strcmp(name, macros[i].name))
			return parse_macro(p, recv, macros[i].op, name, off);
	n = node(CEL_CALL, jv_string(name));
	add_kid(n, recv);
	if (strcmp(name, "size") && (recv || strcmp(name, "has")) &&
	    (!recv || (strcmp(name, "startsWith") && strcmp(name, "endsWith") && strcmp(name, "contains")))) {
		cel_lex_error(&p->lx, off, "unsupported function '%s'", name);
		goto fail;
	}
	if (parse_args(p, n, ")") < 0)
		goto fail;
	if (!recv && !strcmp(name, "has")) {
		if (n->n != 2 || n->kid[1]->op != CEL_SELECT) {
			cel_lex_error(&p->lx, off, "invalid argument to has() macro");
			goto fail;
		}
		struct cel_node *h = n->kid[1];

		n->kid[1] = NULL;
		cel_node_free(n);
		h->op = CEL_HAS;
		return h;
	}
	want = recv && !strcmp(name, "size") ? 1 : 2;	/* the receiver slot, then the arguments */
	if (n->n != want) {
		cel_lex_error(&p->lx, off, "'%s' takes %zu argument%s", name, want - 1, want == 2 ? "" : "s");
		goto fail;
	}
	return n;
fail:
	cel_node_free(n);
	return NULL;
}

static struct cel_node *parse_ident(struct parser *p)
{
	size_t off = p->lx.start, i;
	jv name = jv_copy(p->lx.val);
	const char *s = jv_string_value(name);
	struct cel_node *n;

	if (cel_lex_next(&p->lx) < 0)
		goto fail;
	if (is_punct(p, "(")) {
		n = parse_call(p, NULL, s, off);
		jv_free(name);
		return n;
	}
	if (!strcmp(s, "null") || !strcmp(s, "true") || !strcmp(s, "false")) {
		n = node(CEL_LIT, s[0] == 'n' ? jv_null() : jv_bool(s[0] == 't'));
		jv_free(name);
		return n;
	}
	if (!strcmp(s, "in")) {
		cel_lex_error(&p->lx, off, "unexpected 'in'");
		goto fail;
	}
	for (i = 0; i < p->nbound; i++)
		if (!strcmp(p->bound[i], s))
			return node(CEL_IDENT, name);
	if (p->names) {
		for (i = 0; p->names[i] && strcmp(p->names[i], s); i++)
			;
		if (!p->names[i]) {
			cel_lex_error(&p->lx, off, "undeclared reference to '%s'", s);
			goto fail;
		}
	}
	return node(CEL_IDENT, name);
fail:
	jv_free(name);
	return NULL;
}

static struct cel_node *parse_primary(struct parser *p)
{
	struct cel_node *n;

	switch (p->lx.tok) {
	case CEL_T_INT:
	case CEL_T_STR:
		n = node(CEL_LIT, jv_copy(p->lx.val));
		if (cel_lex_next(&p->lx) < 0) {
			cel_node_free(n);
			return NULL;
		}
		return n;
	case CEL_T_IDENT:
		return parse_ident(p);
	case CEL_T_EOF:
		cel_lex_error(&p->lx, p->lx.start, "unexpected end of expression");
		return NULL;
	case CEL_T_PUNCT:
		break;
	}
	if (is_punct(p, "(")) {
		if (cel_lex_next(&p->lx) < 0 || !(n = parse_expr(p)))
			return NULL;
		if (expect(p, ")") < 0) {
			cel_node_free(n);
			return NULL;
		}
		return n;
	}
	if (is_punct(p, "[") || is_punct(p, "{")) {
		int map = is_punct(p, "{");

		n = node(map ? CEL_MAP : CEL_LIST, jv_invalid());
		if (!map) {
			if (parse_args(p, n, "]") < 0)
				goto fail;
			return n;
		}
		if (cel_lex_next(&p->lx) < 0)
			goto fail;
		while (!is_punct(p, "}")) {
			struct cel_node *k = parse_expr(p);

			if (!k)
				goto fail;
			add_kid(n, k);
			if (expect(p, ":") < 0 || !(k = parse_expr(p)))
				goto fail;
			add_kid(n, k);
			if (!is_punct(p, ","))
				break;
			if (cel_lex_next(&p->lx) < 0)
				goto fail;
		}
		if (expect(p, "}") < 0)
			goto fail;
		return n;
fail:
		cel_node_free(n);
		return NULL;
	}
	cel_lex_error(&p->lx, p->lx.start, "unexpected '%s'", p->lx.punct);
	return NULL;
}

static struct cel_node *parse_member(struct parser *p)
{
	struct cel_node *n = parse_primary(p);

	while (n) {
		if (is_punct(p, ".")) {
			size_t off;
			jv name;

			if (cel_lex_next(&p->lx) < 0)
				goto fail;
			if (p->lx.tok != CEL_T_IDENT) {
				cel_lex_error(&p->lx, p->lx.start, "expected a field name after '.'");
				goto fail;
			}
			off = p->lx.start;
			name = jv_copy(p->lx.val);
			if (cel_lex_next(&p->lx) < 0) {
				jv_free(name);
				goto fail;
			}
			if (is_punct(p, "(")) {
				n = parse_call(p, n, jv_string_value(name), off);
				jv_free(name);
			} else {
				struct cel_node *s = node(CEL_SELECT, name);

				add_kid(s, n);
				n = s;
			}
		} else if (is_punct(p, "[")) {
			struct cel_node *i;

			if (cel_lex_next(&p->lx) < 0 || !(i = parse_expr(p)))
				goto fail;
			n = node2(CEL_INDEX, n, i);
			if (expect(p, "]") < 0)
				goto fail;
		} else {
			break;
		}
		if (n && too_deep(p, n))
			goto fail;
	}
	return n;
fail:
	cel_node_free(n);
	return NULL;
}

static struct cel_node *parse_unary(struct parser *p)
{
	struct cel_node *n;

	if (is_punct(p, "!") || is_punct(p, "-")) {
		enum cel_op op = p->lx.punct[0] == '!' ? CEL_NOT : CEL_NEG;

		if (++p->depth > CEL_MAX_DEPTH) {
			cel_lex_error(&p->lx, p->lx.start, "expression nested too deeply");
			return NULL;
		}
		if (cel_lex_next(&p->lx) < 0)
			return NULL;
		n = parse_unary(p);
		p->depth--;
		if (!n)
			return NULL;
		struct cel_node *u = node(op, jv_invalid());

		add_kid(u, n);
		return u;
	}
	return parse_member(p);
}

/* The binary operators, loosest first; a level's operators are left-associative. */
static const struct {
	const char *op;
	enum cel_op code;
	int level;
} binops[] = {
	{ "||", CEL_OR, 0 }, { "&&", CEL_AND, 1 },
	{ "==", CEL_EQ, 2 }, { "!=", CEL_NE, 2 }, { "<", CEL_LT, 2 }, { "<=", CEL_LE, 2 },
	{ ">", CEL_GT, 2 }, { ">=", CEL_GE, 2 }, { "in", CEL_IN, 2 },
	{ "+", CEL_ADD, 3 }, { "-", CEL_SUB, 3 },
	{ "*", CEL_MUL, 4 }, { "/", CEL_DIV, 4 }, { "%", CEL_MOD, 4 },
};
#define MAX_LEVEL 4

static int binop_at(const struct parser *p, int level, enum cel_op *code)
{
	size_t i;

	for (i = 0; i < sizeof(binops) / sizeof(binops[0]); i++) {
		if (binops[i].level != level)
			continue;
		if ((binops[i].op[0] == 'i' && is_ident(p, "in")) || is_punct(p, binops[i].op)) {
			*code = binops[i].code;
			return 1;
		}
	}
	return 0;
}

static struct cel_node *parse_level(struct parser *p, int level)
{
	struct cel_node *n, *r;
	enum cel_op code;

	if (level > MAX_LEVEL)
		return parse_unary(p);
	if (!(n = parse_level(p, level + 1)))
		return NULL;
	while (binop_at(p, level, &code)) {
		if (cel_lex_next(&p->lx) < 0 || !(r = parse_level(p, level + 1)))
			goto fail;
		n = node2(code, n, r);
		if (too_deep(p, n))
			goto fail;
	}
	return n;
fail:
	cel_node_free(n);
	return NULL;
}

static struct cel_node *parse_cond(struct parser *p)
{
	struct cel_node *c, *a, *b, *n;

	if (!(c = parse_level(p, 0)))
		return NULL;
	if (!is_punct(p, "?"))
		return c;
	if (cel_lex_next(&p->lx) < 0 || !(a = parse_level(p, 0))) {
		cel_node_free(c);
		return NULL;
	}
	if (expect(p, ":") < 0 || !(b = parse_expr(p))) {
		cel_node_free(c);
		cel_node_free(a);
		return NULL;
	}
	n = node2(CEL_COND, c, a);
	add_kid(n, b);
	return n;
}

static struct cel_node *parse_expr(struct parser *p)
{
	struct cel_node *n;

	if (++p->depth > CEL_MAX_DEPTH) {
		cel_lex_error(&p->lx, p->lx.start, "expression nested too deeply");
		return NULL;
	}
	n = parse_cond(p);
	p->depth--;
	if (n && too_deep(p, n)) {
		cel_node_free(n);
		return NULL;
	}
	return n;
}

struct kop_cel *kop_cel_parse(const char *src, const char *const *names, char *err)
{
	struct parser p = { { src, 0, CEL_T_EOF, 0, "", jv_invalid(), err }, names, 0, { NULL }, 0 };
	struct cel_node *root = NULL;
	struct kop_cel *prog;

	if (cel_lex_next(&p.lx) < 0)
		goto fail;
	if (!(root = parse_expr(&p)))
		goto fail;
	if (p.lx.tok != CEL_T_EOF) {
		if (p.lx.tok == CEL_T_PUNCT)
			cel_lex_error(&p.lx, p.lx.start, "unexpected '%s'", p.lx.punct);
		else
			cel_lex_error(&p.lx, p.lx.start, "unexpected token after the expression");
		goto fail;
	}
	jv_free(p.lx.val);
	prog = kop_malloc(sizeof(*prog));
	prog->root = root;
	return prog;
fail:
	cel_node_free(root);
	jv_free(p.lx.val);
	return NULL;
}

void kop_cel_free(struct kop_cel *p)
{
	if (!p)
		return;
	cel_node_free(p->root);
	free(p);
}
