/*
 * CEL's tokens: punctuation, identifiers, int literals and string literals
 * with CEL's escapes. Literals CEL has and the subset lacks (floats, uints,
 * bytes, triple-quoted strings) are errors naming their position.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <stdarg.h>
#include <errno.h>
#include "kop.h"
#include "cel.h"
#include "cel-priv.h"
#include "banned.h"

int cel_lex_error(struct cel_lex *lx, size_t off, const char *fmt, ...)
{
	size_t line = 1, col = 1, i;
	int n;
	va_list ap;

	for (i = 0; i < off && lx->src[i]; i++) {
		if (lx->src[i] == '\n') {
			line++;
			col = 1;
		} else if (((unsigned char)lx->src[i] & 0xc0) != 0x80) {
			col++;
		}
	}
	n = snprintf(lx->err, KOP_ERRLEN, "%zu:%zu: ", line, col);
	if (n < 0 || n >= KOP_ERRLEN)
		return -1;
	va_start(ap, fmt);
	vsnprintf(lx->err + n, KOP_ERRLEN - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static const char *const puncts[] = {
	"==", "!=", "<=", ">=", "&&", "||",
	"(", ")", "[", "]", "{", "}", ".", ",", ":", "?", "!", "-", "+", "*", "/", "%", "<", ">",
	NULL
};

static int is_ident_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int lex_int(struct cel_lex *lx)
{
	const char *s = lx->src + lx->start, *end;
	unsigned long long v;
	int base = 10;

	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		if (kop_hex_digit((unsigned char)s[2]) < 0)
			return cel_lex_error(lx, lx->start, "malformed hex literal");
	}
	errno = 0;
	v = strtoull(s, (char **)&end, base);
	if (*end == '.' || *end == 'e' || *end == 'E')
		return cel_lex_error(lx, lx->start, "unsupported: floating-point literal");
	if (*end == 'u' || *end == 'U')
		return cel_lex_error(lx, lx->start, "unsupported: unsigned literal");
	if (errno == ERANGE || v > (unsigned long long)CEL_INT_MAX)
		return cel_lex_error(lx, lx->start, "unsupported: int literal beyond 2^53");
	if (is_ident_start(*end) || is_digit(*end))
		return cel_lex_error(lx, lx->start, "malformed number");
	lx->tok = CEL_T_INT;
	lx->val = jv_number((double)v);
	lx->pos = (size_t)(end - lx->src);
	return 0;
}

static void put_utf8(struct kop_buf *b, uint32_t c)
{
	char u[4];
	size_t n;

	if (c < 0x80) {
		u[0] = (char)c;
		n = 1;
	} else if (c < 0x800) {
		u[0] = (char)(0xc0 | (c >> 6));
		u[1] = (char)(0x80 | (c & 0x3f));
		n = 2;
	} else if (c < 0x10000) {
		u[0] = (char)(0xe0 | (c >> 12));
		u[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		u[2] = (char)(0x80 | (c & 0x3f));
		n = 3;
	} else {
		u[0] = (char)(0xf0 | (c >> 18));
		u[1] = (char)(0x80 | ((c >> 12) & 0x3f));
		u[2] = (char)(0x80 | ((c >> 6) & 0x3f));
		u[3] = (char)(0x80 | (c & 0x3f));
		n = 4;
	}
	kop_buf_add(b, u, n);
}

/* One escape after the backslash at *p: appended to b, *p past it; -1 when malformed. */
static int lex_escape(struct cel_lex *lx, const char **p, struct kop_buf *b)
{
	static const char simple[] = "a\ab\bf\fn\nr\rt\tv\v\\\\''\"\"``??";
	const char *s = *p + 1, *q;
	uint32_t c = 0;
	int digits = 0, i;

	for (q = simple; *q; q += 2) {
		if (*s == q[0]) {
			kop_buf_add(b, q + 1, 1);
			*p = s + 1;
			return 0;
		}
	}
	if (*s == 'x' || *s == 'X')
		digits = 2;
	else if (*s == 'u')
		digits = 4;
	else if (*s == 'U')
		digits = 8;
	if (digits) {
		for (i = 1; i <= digits; i++) {
			if (kop_hex_digit((unsigned char)s[i]) < 0)
				return -1;
			c = c << 4 | (uint32_t)kop_hex_digit((unsigned char)s[i]);
		}
		s += digits + 1;
	} else if (*s >= '0' && *s <= '3' && s[1] >= '0' && s[1] <= '7' && s[2] >= '0' && s[2] <= '7') {
		c = (uint32_t)((s[0] - '0') * 64 + (s[1] - '0') * 8 + (s[2] - '0'));
		s += 3;
	} else {
		return -1;
	}
	if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return -1;
	put_utf8(b, c);
	*p = s;
	return 0;
}

static int lex_string(struct cel_lex *lx, const char *s, int raw)
{
	char quote = *s;
	const char *p = s + 1;
	struct kop_buf b = KOP_BUF_INIT;

	if (p[0] == quote && p[1] == quote)
		return cel_lex_error(lx, lx->start, "unsupported: triple-quoted string");
	for (;;) {
		if (*p == '\0' || *p == '\n' || *p == '\r') {
			kop_buf_release(&b);
			return cel_lex_error(lx, lx->start, "unterminated string literal");
		}
		if (*p == quote)
			break;
		if (*p == '\\' && !raw) {
			if (lex_escape(lx, &p, &b) < 0) {
				kop_buf_release(&b);
				return cel_lex_error(lx, (size_t)(p - lx->src), "invalid escape sequence");
			}
			continue;
		}
		if (*p == '\\' && p[1] == quote) {
			/* a raw string keeps the backslash, and the quote does not end it */
			kop_buf_add(&b, p, 2);
			p += 2;
			continue;
		}
		kop_buf_add(&b, p, 1);
		p++;
	}
	lx->tok = CEL_T_STR;
	lx->val = jv_string_sized(b.len ? b.buf : "", (int)b.len);
	kop_buf_release(&b);
	lx->pos = (size_t)(p + 1 - lx->src);
	return 0;
}

int cel_lex_next(struct cel_lex *lx)
{
	const char *s;
	size_t i;

	jv_free(lx->val);
	lx->val = jv_invalid();
	while (lx->src[lx->pos] == ' ' || lx->src[lx->pos] == '\t' || lx->src[lx->pos] == '\n' ||
	       lx->src[lx->pos] == '\r' || lx->src[lx->pos] == '\f')
		lx->pos++;
	lx->start = lx->pos;
	s = lx->src + lx->pos;
	if (*s == '\0') {
		lx->tok = CEL_T_EOF;
		return 0;
	}
	if (is_digit(*s))
		return lex_int(lx);
	if (*s == '\'' || *s == '"')
		return lex_string(lx, s, 0);
	if ((*s == 'r' || *s == 'R') && (s[1] == '\'' || s[1] == '"'))
		return lex_string(lx, s + 1, 1);
	if ((*s == 'b' || *s == 'B') && (s[1] == '\'' || s[1] == '"'))
		return cel_lex_error(lx, lx->start, "unsupported: bytes literal");
	if (is_ident_start(*s)) {
		for (i = 1; is_ident_start(s[i]) || is_digit(s[i]); i++)
			;
		lx->tok = CEL_T_IDENT;
		lx->val = jv_string_sized(s, (int)i);
		lx->pos += i;
		return 0;
	}
	for (i = 0; puncts[i]; i++) {
		size_t n = strlen(puncts[i]);

		if (!strncmp(s, puncts[i], n)) {
			lx->tok = CEL_T_PUNCT;
			memcpy(lx->punct, puncts[i], n + 1);
			lx->pos += n;
			return 0;
		}
	}
	if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
		return cel_lex_error(lx, lx->start, "unexpected character 0x%02x", (unsigned char)*s);
	return cel_lex_error(lx, lx->start, "unexpected character '%c'", *s);
}
