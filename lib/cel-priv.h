#ifndef KOP_CEL_PRIV_H
#define KOP_CEL_PRIV_H
/* The CEL syntax tree shared by lib/cel_parse.c (which builds it) and lib/cel_eval.c. */
#include <stddef.h>
#include <jv.h>

/* Ints are jv numbers, doubles: exact up to 2^53, beyond which literals and results are errors. */
#define CEL_INT_MAX 9007199254740992LL

enum cel_op {
	CEL_LIT,		/* val: the literal */
	CEL_IDENT,		/* val: the name */
	CEL_SELECT,		/* kid[0].val */
	CEL_HAS,		/* has(kid[0].val) */
	CEL_INDEX,		/* kid[0][kid[1]] */
	CEL_CALL,		/* val: function; kid[0]: the receiver or NULL, kid[1..]: arguments */
	CEL_NOT, CEL_NEG,
	CEL_AND, CEL_OR, CEL_COND,
	CEL_EQ, CEL_NE, CEL_LT, CEL_LE, CEL_GT, CEL_GE, CEL_IN,
	CEL_ADD, CEL_SUB, CEL_MUL, CEL_DIV, CEL_MOD,
	CEL_LIST,		/* kid[]: the items */
	CEL_MAP,		/* kid[]: key, value, key, value... */
	/* the macros over a list's items or a map's keys, val: the variable; kid[0]: the range */
	CEL_ALL, CEL_EXISTS, CEL_EXISTS_ONE,	/* kid[1]: the predicate */
	CEL_FILTER,		/* kid[1]: the predicate */
	CEL_MAPLIST,		/* e.map(x, t): kid[1] t; e.map(x, p, t): kid[1] p, kid[2] t */
};

struct cel_node {
	enum cel_op op;
	jv val;			/* jv_invalid() when unused */
	struct cel_node **kid;
	size_t n;
	int depth;		/* of the tree below, n itself 1 */
};

struct kop_cel {
	struct cel_node *root;
};

void cel_node_free(struct cel_node *n);

/* The lexer (lib/cel_lex.c): one token of lookahead. */
enum cel_tok { CEL_T_EOF, CEL_T_INT, CEL_T_STR, CEL_T_IDENT, CEL_T_PUNCT };

struct cel_lex {
	const char *src;
	size_t pos;		/* where the next token starts looking */
	enum cel_tok tok;
	size_t start;		/* the current token's offset */
	char punct[3];		/* CEL_T_PUNCT: "(", "==", "&&"... */
	jv val;			/* CEL_T_INT: a number; CEL_T_STR, CEL_T_IDENT: a string */
	char *err;		/* KOP_ERRLEN bytes */
};

/* The next token into lx: 0, or -1 with lx->err set ("LINE:COL: what"). */
int cel_lex_next(struct cel_lex *lx);

/* An error at offset off of the source, in lx->err; returns -1. */
int cel_lex_error(struct cel_lex *lx, size_t off, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
