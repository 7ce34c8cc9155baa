/*
 * What jq 1.6 cannot do (lib/render.h): YAML text in gopkg.in/yaml.v2
 * v2.2.2's style, MD5 and SHA-256 digests, base64.
 *
 * yaml.v2's encoder is a Go port of libyaml's emitter, so libyaml's emitter
 * writes the same bytes once it is fed the same events. What yaml.v2 adds on
 * top, and what is reproduced here, is the choice of scalar style:
 *  - a string containing a newline asks for a literal block scalar;
 *  - a string that would read back as something else when plain (a bool,
 *    null, int, float or timestamp under yaml.v2's resolver, or a base-60
 *    float) asks for double quotes;
 *  - anything else asks for plain, which libyaml downgrades to single quotes
 *    (or double quotes) when the text is unsafe as a plain scalar.
 * And one emitter detail: yaml.v2 never writes the "..." document end marker
 * that libyaml 0.2.5 writes after a trailing "|+" scalar.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>
#include <openssl/evp.h>
#include "render.h"
#include "jsonl.h"
#include "yaml.h"
#include "banned.h"

/* ---- yaml.v2's resolver: would this plain text read back as a string? ---- */

static int all_digits(const char *s, size_t n)
{
	size_t i;

	if (!n)
		return 0;
	for (i = 0; i < n; i++)
		if (!isdigit((unsigned char)s[i]))
			return 0;
	return 1;
}

/* Go's getnum(s, false): one or two digits. Returns digits consumed, 0 on error. */
static size_t getnum12(const char *s, int *out)
{
	if (!isdigit((unsigned char)s[0]))
		return 0;
	if (isdigit((unsigned char)s[1])) {
		*out = (s[0] - '0') * 10 + (s[1] - '0');
		return 2;
	}
	*out = s[0] - '0';
	return 1;
}

static int days_in(int month, int year)
{
	static const int days[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

	if (month == 2 && ((year % 4 == 0 && year % 100 != 0) || year % 400 == 0))
		return 29;
	return days[month - 1];
}

/*
 * Go's time.Parse for the layouts yaml.v2 tries, written as a tiny pattern:
 * Y year (4 digits), M month, D day, H hour, I minute, S second (1-2
 * digits each), F optional ".digits", Z "Z" or "+hh:mm"; other bytes literal.
 */
static int ts_match(const char *s, const char *layout)
{
	int year = 0, month = 0, day = 0, v = 0;
	size_t n;

	for (; *layout; layout++) {
		switch (*layout) {
		case 'Y':
			if (!all_digits(s, 4))
				return 0;
			year = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0');
			s += 4;
			break;
		case 'M':
		case 'D':
		case 'H':
		case 'I':
		case 'S':
			if (!(n = getnum12(s, &v)))
				return 0;
			s += n;
			if (*layout == 'M') {
				if (v < 1 || v > 12)
					return 0;
				month = v;
			} else if (*layout == 'D') {
				day = v;
			} else if ((*layout == 'H' && v > 23) || v > 59) {
				return 0;
			}
			break;
		case 'F':
			if ((s[0] == '.' || s[0] == ',') && isdigit((unsigned char)s[1])) {
				s++;
				while (isdigit((unsigned char)*s))
					s++;
			}
			break;
		case 'Z':
			if (*s == 'Z') {
				s++;
				break;
			}
			if ((s[0] != '+' && s[0] != '-') || !all_digits(s + 1, 2) || s[3] != ':' ||
			    !all_digits(s + 4, 2))
				return 0;
			s += 6;
			break;
		default:
			if (*s != *layout)
				return 0;
			s++;
		}
	}
	if (*s)
		return 0;
	return day >= 1 && month >= 1 && day <= days_in(month, year);
}

static int is_timestamp(const char *s, size_t len)
{
	static const char *const layouts[] = { "Y-M-DTH:I:SFZ", "Y-M-DtH:I:SFZ", "Y-M-D H:I:SF", "Y-M-D" };
	size_t i;

	if (len < 5 || !all_digits(s, 4) || s[4] != '-')
		return 0;
	for (i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (ts_match(s, layouts[i]))
			return 1;
	return 0;
}

/* yamlStyleFloat: ^[-+]?[0-9]*\.?[0-9]+([eE][-+][0-9]+)?$ and a finite value. */
static int yaml_style_float(const char *s)
{
	const char *p = s, *q;
	double d;

	if (*p == '+' || *p == '-')
		p++;
	q = p;
	while (isdigit((unsigned char)*p))
		p++;
	if (*p == '.') {
		p++;
		q = p;
		if (!isdigit((unsigned char)*p))
			return 0;
		while (isdigit((unsigned char)*p))
			p++;
	} else if (p == q) {
		return 0;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p != '+' && *p != '-')
			return 0;
		p++;
		if (!isdigit((unsigned char)*p))
			return 0;
		while (isdigit((unsigned char)*p))
			p++;
	}
	if (*p)
		return 0;
	errno = 0;
	d = strtod(s, NULL);
	return isfinite(d);
}

/* Go's ParseFloat for a text that starts with '.': ".5", ".5e3". */
static int go_parses_dot_float(const char *s)
{
	const char *p = s + 1;

	if (!isdigit((unsigned char)*p))
		return 0;
	while (isdigit((unsigned char)*p))
		p++;
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!isdigit((unsigned char)*p))
			return 0;
		while (isdigit((unsigned char)*p))
			p++;
	}
	return !*p && isfinite(strtod(s, NULL));
}

/* ^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$ */
static int is_base60_float(const char *s)
{
	int groups = 0;

	if (*s == '+' || *s == '-')
		s++;
	if (!isdigit((unsigned char)*s))
		return 0;
	s++;
	while (isdigit((unsigned char)*s) || *s == '_')
		s++;
	while (*s == ':') {
		s++;
		if (s[0] >= '0' && s[0] <= '5' && isdigit((unsigned char)s[1]))
			s += 2;
		else if (isdigit((unsigned char)s[0]))
			s++;
		else
			return 0;
		groups++;
	}
	if (!groups)
		return 0;
	if (*s == '.') {
		s++;
		while (isdigit((unsigned char)*s) || *s == '_')
			s++;
	}
	return !*s;
}

static int plain_resolves_to_str(const char *s, size_t len)
{
	static const char *const special[] = {
		"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON",
		"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF",
		"", "~", "null", "Null", "NULL", ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF",
		"+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", "<<",
	};
	char hint;
	size_t i, j;
	char *plain;
	int is_str;
	double num;

	if (!len)
		return 0;
	switch (s[0]) {
	case '+': case '-':
		hint = 'S';
		break;
	case '0': case '1': case '2': case '3': case '4':
	case '5': case '6': case '7': case '8': case '9':
		hint = 'D';
		break;
	case 'y': case 'Y': case 'n': case 'N': case 't': case 'T':
	case 'f': case 'F': case 'o': case 'O': case '~':
		hint = 'M';
		break;
	case '.':
		hint = '.';
		break;
	default:
		return 1;
	}
	for (i = 0; i < sizeof(special) / sizeof(special[0]); i++)
		if (strlen(special[i]) == len && !memcmp(special[i], s, len))
			return 0;
	if (hint == 'M')
		return 1;
	if (memchr(s, 0, len))
		return 1;
	if (hint == '.')
		return !go_parses_dot_float(s);
	if (is_timestamp(s, len))
		return 0;
	plain = kop_malloc(len + 1);
	for (i = j = 0; i < len; i++)
		if (s[i] != '_')
			plain[j++] = s[i];
	plain[j] = 0;
	is_str = kop_go_parse_int(plain, &num, NULL) < 0 && !yaml_style_float(plain);
	free(plain);
	return is_str;
}

/* ---- the emitter ---- */

static int write_handler(void *data, unsigned char *buffer, size_t size)
{
	kop_buf_add(data, buffer, size);
	return 1;
}

static int emitter_error(yaml_emitter_t *e, char *err)
{
	return kop_error(err, "unable to emit yaml: %s", e->problem ? e->problem : "unknown error");
}

static int emit_scalar(yaml_emitter_t *e, const char *s, size_t len, yaml_scalar_style_t style, char *err)
{
	yaml_event_t ev;

	if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)len, 1, 1, style))
		return kop_error(err, "unable to emit yaml: out of memory");
	if (!yaml_emitter_emit(e, &ev))
		return emitter_error(e, err);
	return 0;
}

static int emit_string(yaml_emitter_t *e, const char *s, size_t len, char *err)
{
	yaml_scalar_style_t style;

	if (memchr(s, '\n', len))
		style = YAML_LITERAL_SCALAR_STYLE;
	else if (plain_resolves_to_str(s, len) && !is_base60_float(s))
		style = YAML_PLAIN_SCALAR_STYLE;
	else
		style = YAML_DOUBLE_QUOTED_SCALAR_STYLE;
	return emit_scalar(e, s, len, style, err);
}

/*
 * Go's strconv.FormatFloat(f, 'g', -1, 64): the shortest digits that read
 * back, exponent form when exp < -4 || exp >= 21 ('g' with shortest uses
 * eprec 21 when the digits fit), "e+06"-style exponents.
 */
static void format_go_float(double d, char *buf, size_t len)
{
	char tmp[64], digits[32], *p;
	int prec, exp, nd = 0;

	if (isnan(d)) {
		snprintf(buf, len, ".nan");
		return;
	}
	if (isinf(d)) {
		snprintf(buf, len, d > 0 ? ".inf" : "-.inf");
		return;
	}
	for (prec = 0; prec < 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*e", prec, d);
		if (strtod(tmp, NULL) == d)
			break;
	}
	/* tmp is "-d.ddde+XX": collect digits and the exponent. */
	for (p = tmp; *p && *p != 'e'; p++)
		if (isdigit((unsigned char)*p) && nd < (int)sizeof(digits) - 1)
			digits[nd++] = *p;
	digits[nd] = 0;
	exp = atoi(p + 1);
	if (exp < -4 || exp >= (nd > 21 ? nd : 21)) {
		snprintf(buf, len, "%s%c%s%.*se%c%02d", d < 0 ? "-" : "", digits[0], nd > 1 ? "." : "",
			 nd - 1, digits + 1, exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
	} else if (exp < 0) {
		snprintf(buf, len, "%s0.%0*d%s", d < 0 ? "-" : "", -exp - 1, 0, digits);
		if (-exp - 1 == 0)
			snprintf(buf, len, "%s0.%s", d < 0 ? "-" : "", digits);
	} else if (nd <= exp + 1) {
		snprintf(buf, len, "%s%s%0*d", d < 0 ? "-" : "", digits, exp + 1 - nd, 0);
		if (exp + 1 - nd == 0)
			snprintf(buf, len, "%s%s", d < 0 ? "-" : "", digits);
	} else {
		snprintf(buf, len, "%s%.*s.%s", d < 0 ? "-" : "", exp + 1, digits, digits + exp + 1);
	}
}

static int emit_value(yaml_emitter_t *e, jv v, int depth, char *err);

static int emit_mapping(yaml_emitter_t *e, jv v, int depth, char *err)
{
	yaml_event_t ev;
	int it, rc = 0;

	yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE);
	if (!yaml_emitter_emit(e, &ev))
		return emitter_error(e, err);
	for (it = jv_object_iter(v); rc == 0 && jv_object_iter_valid(v, it); it = jv_object_iter_next(v, it)) {
		jv key = jv_object_iter_key(v, it);

		rc = emit_string(e, jv_string_value(key), (size_t)jv_string_length_bytes(jv_copy(key)), err);
		jv_free(key);
		if (rc == 0)
			rc = emit_value(e, jv_object_iter_value(v, it), depth + 1, err);
	}
	if (rc)
		return rc;
	yaml_mapping_end_event_initialize(&ev);
	if (!yaml_emitter_emit(e, &ev))
		return emitter_error(e, err);
	return 0;
}

static int emit_sequence(yaml_emitter_t *e, jv v, int depth, char *err)
{
	yaml_event_t ev;
	int i, n = jv_array_length(jv_copy(v));

	yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE);
	if (!yaml_emitter_emit(e, &ev))
		return emitter_error(e, err);
	for (i = 0; i < n; i++)
		if (emit_value(e, jv_array_get(jv_copy(v), i), depth + 1, err))
			return -1;
	yaml_sequence_end_event_initialize(&ev);
	if (!yaml_emitter_emit(e, &ev))
		return emitter_error(e, err);
	return 0;
}

/* Emits v (borrowed... consumed: v is freed here). */
static int emit_value(yaml_emitter_t *e, jv v, int depth, char *err)
{
	char num[64];
	double d;
	int rc;

	if (depth > 256) {
		jv_free(v);
		return kop_error(err, "unable to emit yaml: value nested deeper than 256 levels");
	}
	switch (jv_get_kind(v)) {
	case JV_KIND_OBJECT:
		rc = emit_mapping(e, v, depth, err);
		break;
	case JV_KIND_ARRAY:
		rc = emit_sequence(e, v, depth, err);
		break;
	case JV_KIND_STRING:
		rc = emit_string(e, jv_string_value(v), (size_t)jv_string_length_bytes(jv_copy(v)), err);
		break;
	case JV_KIND_NUMBER:
		/* Integral values are Go ints in the original's structs. */
		d = jv_number_value(v);
		if (d == floor(d) && fabs(d) < 9.2e18)
			snprintf(num, sizeof(num), "%lld", (long long)d);
		else
			format_go_float(d, num, sizeof(num));
		rc = emit_scalar(e, num, strlen(num), YAML_PLAIN_SCALAR_STYLE, err);
		break;
	case JV_KIND_TRUE:
		rc = emit_scalar(e, "true", 4, YAML_PLAIN_SCALAR_STYLE, err);
		break;
	case JV_KIND_FALSE:
		rc = emit_scalar(e, "false", 5, YAML_PLAIN_SCALAR_STYLE, err);
		break;
	case JV_KIND_NULL:
		rc = emit_scalar(e, "null", 4, YAML_PLAIN_SCALAR_STYLE, err);
		break;
	default:
		rc = kop_error(err, "unable to emit yaml: invalid value");
	}
	jv_free(v);
	return rc;
}

char *kop_yaml_emit(jv v, char *err)
{
	yaml_emitter_t e;
	yaml_event_t ev;
	struct kop_buf out = KOP_BUF_INIT;
	int ok;

	if (!yaml_emitter_initialize(&e)) {
		jv_free(v);
		kop_error(err, "unable to emit yaml: out of memory");
		return NULL;
	}
	yaml_emitter_set_output(&e, write_handler, &out);
	yaml_emitter_set_unicode(&e, 1);
	yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
	ok = yaml_emitter_emit(&e, &ev);
	if (ok) {
		yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1);
		ok = yaml_emitter_emit(&e, &ev);
	}
	if (!ok) {
		emitter_error(&e, err);
		jv_free(v);
		goto fail;
	}
	if (emit_value(&e, v, 0, err))
		goto fail;
	/* yaml.v2 writes no "..." after an open-ended ("|+") last scalar. */
	e.open_ended = 0;
	yaml_document_end_event_initialize(&ev, 1);
	ok = yaml_emitter_emit(&e, &ev);
	if (ok) {
		yaml_stream_end_event_initialize(&ev);
		ok = yaml_emitter_emit(&e, &ev);
	}
	if (ok)
		ok = yaml_emitter_flush(&e);
	if (!ok) {
		emitter_error(&e, err);
		goto fail;
	}
	yaml_emitter_delete(&e);
	if (!out.buf)
		kop_buf_add(&out, "", 0);
	return kop_buf_detach(&out, NULL);
fail:
	yaml_emitter_delete(&e);
	kop_buf_release(&out);
	return NULL;
}

/* ---- digests and base64 ---- */

static int digest_hex(const EVP_MD *md, const char *s, size_t len, jv *out, char *err)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	char hex[2 * EVP_MAX_MD_SIZE + 1];

	if (!EVP_Digest(s, len, d, &n, md, NULL))
		return kop_error(err, "unable to compute digest '%s'", EVP_MD_get0_name(md));
	kop_hex(d, n, hex);
	*out = jv_string(hex);
	return 0;
}

static int base64_encode(const char *s, size_t len, jv *out, char *err)
{
	char *b = kop_base64(s, len);

	*out = jv_string(b);
	free(b);
	(void)err;
	return 0;
}

int kop_fn_call(const char *name, jv arg, jv *out, char *err)
{
	const char *s;
	size_t len;
	int rc;

	if (!strcmp(name, "yaml")) {
		char *text = kop_yaml_emit(arg, err);

		if (!text)
			return -1;
		*out = jv_string(text);
		free(text);
		return 0;
	}
	if (strcmp(name, "md5") && strcmp(name, "sha256") && strcmp(name, "base64")) {
		jv_free(arg);
		return kop_error(err, "unknown function '%s'", name);
	}
	if (jv_get_kind(arg) != JV_KIND_STRING) {
		kop_error(err, "function '%s' needs a string, not %s", name, jv_kind_name(jv_get_kind(arg)));
		jv_free(arg);
		return -1;
	}
	s = jv_string_value(arg);
	len = (size_t)jv_string_length_bytes(jv_copy(arg));
	if (!strcmp(name, "md5"))
		rc = digest_hex(EVP_md5(), s, len, out, err);
	else if (!strcmp(name, "sha256"))
		rc = digest_hex(EVP_sha256(), s, len, out, err);
	else
		rc = base64_encode(s, len, out, err);
	jv_free(arg);
	return rc;
}

/*
 * One resolution (kop_fn_resolve). A program's answer holds the same values
 * many times over: jq hands the very same value wherever a variable is used,
 * so iotservice's checksum directive (the MD5 of config.yml's YAML) is one
 * value standing in eight pod templates, and its argument, the config, is
 * the argument of the Secret's directive too. Two memos keep each piece of
 * work to once:
 *  - calls: [name, arg, result] of each function called, found again by
 *    name and an argument that is the very value called with, or one of
 *    the same text (jv_equal alone would take {"x":1,"y":2} for
 *    {"y":2,"x":1}, whose YAML differs), so the YAML is emitted once;
 *  - seen: each directive met, by identity, with its result and the depth
 *    it was met at, so a shared directive's argument is walked once and not
 *    at every place it stands (a look-up at every object would cost more
 *    than the walk it saves); met deeper than the first time, it is walked
 *    again, so that the depth limit holds wherever a value stands.
 * Both are small: a program asks for a few functions; past the bounds, work
 * is merely done again.
 */
#define FN_CACHE_MAX 32
#define FN_SEEN_MAX 32

struct resolution {
	jv calls;		/* [[name, arg, result], ...] */
	int nseen;
	jv seen_from[FN_SEEN_MAX], seen_to[FN_SEEN_MAX];
	int seen_depth[FN_SEEN_MAX];
};

/* Whether a and b (borrowed), equal as jv_equal has it, are the same text. */
static int same_text(jv a, jv b)
{
	char *ta, *tb;
	int same;

	if (jv_identical(jv_copy(a), jv_copy(b)))
		return 1;
	if (!jv_equal(jv_copy(a), jv_copy(b)))
		return 0;
	ta = kop_json_dump(jv_copy(a));
	tb = kop_json_dump(jv_copy(b));
	same = !strcmp(ta, tb);
	free(ta);
	free(tb);
	return same;
}

/* {"$fn": NAME, "arg": X} exactly: two keys, NAME a string. v is borrowed. */
static int is_directive(jv v)
{
	jv name = jv_object_get(jv_copy(v), kop_json_key("$fn"));	/* (most objects have no "$fn": one look-up) */
	int ok = jv_get_kind(name) == JV_KIND_STRING && jv_object_length(jv_copy(v)) == 2 &&
		 jv_object_has(jv_copy(v), kop_json_key("arg"));

	jv_free(name);
	return ok;
}

static int cached_call(struct resolution *r, jv name, jv arg, jv *out, char *err)
{
	int i, n = jv_array_length(jv_copy(r->calls));

	for (i = 0; i < n; i++) {
		jv entry = jv_array_get(jv_copy(r->calls), i);
		jv ename = jv_array_get(jv_copy(entry), 0), earg = jv_array_get(jv_copy(entry), 1);
		int hit = jv_equal(ename, jv_copy(name)) && same_text(earg, arg);

		jv_free(earg);
		if (hit) {
			*out = jv_array_get(entry, 2);
			jv_free(name);
			jv_free(arg);
			return 0;
		}
		jv_free(entry);
	}
	if (kop_fn_call(jv_string_value(name), jv_copy(arg), out, err)) {
		jv_free(name);
		jv_free(arg);
		return -1;
	}
	if (n < FN_CACHE_MAX)
		r->calls = jv_array_append(r->calls, JV_ARRAY(name, arg, jv_copy(*out)));
	else {
		jv_free(name);
		jv_free(arg);
	}
	return 0;
}

/* The result of the directive v (borrowed) when met before at depth or
 * deeper, or jv_invalid(). */
static jv seen_get(const struct resolution *r, jv v, int depth)
{
	int i;

	for (i = 0; i < r->nseen; i++)
		if (depth <= r->seen_depth[i] && jv_identical(jv_copy(r->seen_from[i]), jv_copy(v)))
			return jv_copy(r->seen_to[i]);
	return jv_invalid();
}

/* Remembers that the directive from (borrowed), met at depth, resolved to to (borrowed). */
static void seen_put(struct resolution *r, jv from, jv to, int depth)
{
	if (r->nseen == FN_SEEN_MAX)
		return;
	r->seen_from[r->nseen] = jv_copy(from);
	r->seen_to[r->nseen] = jv_copy(to);
	r->seen_depth[r->nseen] = depth;
	r->nseen++;
}

/* Resolves the directives in v (consumed) into *out: 0, or -1 with err. */
static int resolve(struct resolution *r, jv v, jv *out, int depth, char *err)
{
	jv_kind kind = jv_get_kind(v);

	if (depth > 512) {
		jv_free(v);
		return kop_error(err, "value nested deeper than 512 levels");
	}
	if (kind == JV_KIND_ARRAY) {
		int i, n = jv_array_length(jv_copy(v));

		for (i = 0; i < n; i++) {
			jv was = jv_array_get(jv_copy(v), i), item;
			jv_kind wk = jv_get_kind(was);

			if (wk != JV_KIND_OBJECT && wk != JV_KIND_ARRAY) {
				jv_free(was);	/* scalars hold no directive */
				continue;
			}
			if (resolve(r, jv_copy(was), &item, depth + 1, err)) {
				jv_free(was);
				jv_free(v);
				return -1;
			}
			/* Unchanged (no directive inside): no set, which would unshare a shared v. */
			if (jv_identical(jv_copy(was), jv_copy(item)))
				jv_free(item);
			else
				v = jv_array_set(v, i, item);
			jv_free(was);
		}
		*out = v;
		return 0;
	}
	if (kind != JV_KIND_OBJECT) {
		*out = v;
		return 0;
	}
	if (is_directive(v)) {
		jv name, arg, to = seen_get(r, v, depth);

		if (jv_is_valid(to)) {
			jv_free(v);
			*out = to;
			return 0;
		}
		jv_free(to);
		name = jv_object_get(jv_copy(v), kop_json_key("$fn"));
		if (resolve(r, jv_object_get(jv_copy(v), kop_json_key("arg")), &arg, depth + 1, err)) {
			jv_free(name);
			jv_free(v);
			return -1;
		}
		if (cached_call(r, name, arg, out, err)) {
			jv_free(v);
			return -1;
		}
		seen_put(r, v, *out, depth);
		jv_free(v);
		return 0;
	}
	{
		/* Iterated over a copy: v itself may be changed on the way. */
		jv src = jv_copy(v);
		int it;

		for (it = jv_object_iter(src); jv_object_iter_valid(src, it); it = jv_object_iter_next(src, it)) {
			jv was = jv_object_iter_value(src, it), item;
			jv_kind wk = jv_get_kind(was);

			if (wk != JV_KIND_OBJECT && wk != JV_KIND_ARRAY) {
				jv_free(was);	/* scalars hold no directive */
				continue;
			}
			if (resolve(r, jv_copy(was), &item, depth + 1, err)) {
				jv_free(was);
				jv_free(src);
				jv_free(v);
				return -1;
			}
			if (jv_identical(jv_copy(was), jv_copy(item)))
				jv_free(item);
			else
				v = jv_object_set(v, jv_object_iter_key(src, it), item);
			jv_free(was);
		}
		jv_free(src);
	}
	*out = v;
	return 0;
}

/* s (borrowed) as kop_fn_pack keeps it: a directive, or s itself. */
static jv pack_string(jv s)
{
	const char *b = jv_string_value(s);
	size_t n = (size_t)jv_string_length_bytes(jv_copy(s)), pad = 0, got;
	unsigned char *raw;
	char *again;
	int len;
	jv text;

	if (n < KOP_FN_PACK_MIN || n % 4 || n > (size_t)INT_MAX)
		return jv_copy(s);
	pad = (b[n - 1] == '=') + (b[n - 2] == '=');
	raw = kop_malloc(n / 4 * 3 + 1);
	if ((len = EVP_DecodeBlock(raw, (const unsigned char *)b, (int)n)) < 0 || (size_t)len < pad) {
		free(raw);
		return jv_copy(s);
	}
	got = (size_t)len - pad;
	/* kept only if it comes back byte for byte (what resolving will encode is
	 * the string jq keeps, which replaces bytes that are not UTF-8) */
	text = jv_string_sized((const char *)raw, (int)got);
	free(raw);
	again = kop_base64(jv_string_value(text), (size_t)jv_string_length_bytes(jv_copy(text)));
	if (strcmp(again, b)) {
		free(again);
		jv_free(text);
		return jv_copy(s);
	}
	free(again);
	return JV_OBJECT(kop_json_key("$fn"), jv_string("base64"), kop_json_key("arg"), text);
}

/* A member of a value (consumed) packed, or jv_invalid() when packing leaves
 * it as it is (the value is then not set: that would unshare a shared one). */
static jv pack_member(jv was)
{
	jv_kind k = jv_get_kind(was);
	jv item;

	if (k != JV_KIND_OBJECT && k != JV_KIND_ARRAY && k != JV_KIND_STRING) {
		jv_free(was);
		return jv_invalid();
	}
	item = kop_fn_pack(jv_copy(was));
	if (jv_identical(was, jv_copy(item))) {
		jv_free(item);
		return jv_invalid();
	}
	return item;
}

jv kop_fn_pack(jv v)
{
	jv_kind kind = jv_get_kind(v);

	if (kind == JV_KIND_STRING) {
		jv p = pack_string(v);

		jv_free(v);
		return p;
	}
	if (kind == JV_KIND_ARRAY) {
		int i, n = jv_array_length(jv_copy(v));

		for (i = 0; i < n; i++) {
			jv item = pack_member(jv_array_get(jv_copy(v), i));

			if (jv_is_valid(item))
				v = jv_array_set(v, i, item);
		}
	} else if (kind == JV_KIND_OBJECT) {
		/* (iterated over a copy: v itself is changed on the way) */
		jv src = jv_copy(v);
		int it;

		for (it = jv_object_iter(src); jv_object_iter_valid(src, it); it = jv_object_iter_next(src, it)) {
			jv item = pack_member(jv_object_iter_value(src, it));

			if (jv_is_valid(item))
				v = jv_object_set(v, jv_object_iter_key(src, it), item);
		}
		jv_free(src);
	}
	return v;
}

int kop_fn_resolve(jv v, jv *out, char *err)
{
	struct resolution r;
	int rc, i;

	r.calls = jv_array();
	r.nseen = 0;
	rc = resolve(&r, v, out, 0, err);
	for (i = 0; i < r.nseen; i++) {
		jv_free(r.seen_from[i]);
		jv_free(r.seen_to[i]);
	}
	jv_free(r.calls);
	return rc;
}
