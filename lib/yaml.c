/*
 * YAML to jv through libyaml's event parser, resolving scalars as go-yaml v2
 * does under sigs.k8s.io/yaml (see yaml.h for the rules).
 */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "yaml.h"	/* ours, and libyaml's through it */
#include "jsonl.h"
#include "banned.h"

#define YAML_MAX_DEPTH 1000
/* Nodes that aliases may add in one load before we call it a "billion laughs". */
#define YAML_MAX_ALIAS_NODES 4000000

#define TAG_PREFIX "tag:yaml.org,2002:"
/* (the value never shown: it may be a Secret's) */
#define BEYOND_2_53 "an integer beyond 2^53 would be held rounded (numbers are doubles here); quote it if it is text"

struct yl {
	yaml_parser_t p;
	const char *name;
	char *err;
	jv anchors;		/* name -> [value, node count] */
	size_t alias_nodes;
	int depth;
	struct kop_buf path;	/* of the node being read ("spec.ports[0]"), for messages */
};

static int yl_fail(struct yl *y, size_t line, size_t col, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int yl_fail(struct yl *y, size_t line, size_t col, const char *fmt, ...)
{
	char msg[KOP_ERRLEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return kop_error(y->err, "unable to parse '%s': line %zu, column %zu: %s", y->name, line + 1, col + 1, msg);
}

/* The end of a path as messages show it: "spec.x[0]: ", "...b.c: " past KOP_PATH_SHOWN bytes, "" at the top. */
static const char *path_shown(const struct kop_buf *path, char *buf, size_t size)
{
	if (!path->len)
		buf[0] = '\0';
	else if (path->len > KOP_PATH_SHOWN)
		snprintf(buf, size, "...%s: ", path->buf + path->len - KOP_PATH_SHOWN);
	else
		snprintf(buf, size, "%s: ", path->buf);
	return buf;
}

/* yl_fail for a value: its place named by line, column and path, never by its bytes (a Secret's). */
static int yl_fail_value(struct yl *y, const yaml_event_t *ev, const char *what)
{
	char p[KOP_PATH_SHOWN + 8];

	return yl_fail(y, ev->start_mark.line, ev->start_mark.column, "%s%s", path_shown(&y->path, p, sizeof(p)),
		       what);
}

static int yl_next(struct yl *y, yaml_event_t *ev)
{
	if (yaml_parser_parse(&y->p, ev))
		return 0;
	if (y->p.problem)
		return yl_fail(y, y->p.problem_mark.line, y->p.problem_mark.column, "%s", y->p.problem);
	return yl_fail(y, y->p.mark.line, y->p.mark.column, "%s",
		       y->p.error == YAML_MEMORY_ERROR ? "out of memory" : "invalid YAML");
}

/* ---- scalars ------------------------------------------------------------ */

/*
 * Go's strconv.ParseInt(s, 0, 64), falling back to ParseUint: optional sign,
 * 0x/0o/0b prefixes, a leading 0 for octal. 0 and *out, or -1.
 */
int kop_go_parse_int(const char *s, double *out, int *beyond)
{
	int neg = 0, base = 10;
	uint64_t v = 0;
	const char *p = s;

	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		base = 16;
		p += 2;
	} else if (p[0] == '0' && (p[1] == 'o' || p[1] == 'O')) {
		base = 8;
		p += 2;
	} else if (p[0] == '0' && (p[1] == 'b' || p[1] == 'B')) {
		base = 2;
		p += 2;
	} else if (p[0] == '0' && p[1]) {
		base = 8;
		p++;
	}
	if (!*p)
		return -1;
	for (; *p; p++) {
		int d = kop_hex_digit((unsigned char)*p);

		if (d < 0 || d >= base)
			return -1;
		if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
			return -1;
		v = v * (uint64_t)base + (uint64_t)d;
	}
	if (neg) {
		if (v > (uint64_t)INT64_MAX + 1)
			return -1;
		*out = -(double)v;
	} else {
		*out = (double)v;
	}
	if (beyond)
		*beyond = v > (UINT64_C(1) << 53);
	return 0;
}

/* go-yaml's yamlStyleFloat: ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$ */
static int is_yaml_float(const char *p)
{
	if (*p == '+' || *p == '-')
		p++;
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			return 0;
		while (isdigit((unsigned char)*p))
			p++;
	} else {
		if (!isdigit((unsigned char)*p))
			return 0;
		while (isdigit((unsigned char)*p))
			p++;
		if (*p == '.') {
			p++;
			while (isdigit((unsigned char)*p))
				p++;
		}
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!isdigit((unsigned char)*p))
			return 0;
		while (isdigit((unsigned char)*p))
			p++;
	}
	return *p == 0;
}

static int in_list(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(s, *list))
			return 1;
	return 0;
}

static const char *const yes_words[] = { "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON", NULL };
static const char *const no_words[] = { "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF", NULL };
static const char *const null_words[] = { "", "~", "null", "Null", "NULL", NULL };
static const char *const special_floats[] = { ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF",
					      "-.inf", "-.Inf", "-.INF", NULL };

/* The len bytes at s without their '_' digit separators (caller frees). */
static char *without_underscores(const char *s, size_t len)
{
	char *plain = kop_malloc(len + 1);
	size_t i, n = 0;

	for (i = 0; i < len; i++)
		if (s[i] != '_')
			plain[n++] = s[i];
	plain[n] = 0;
	return plain;
}

/*
 * Whether plain is an integer in decimal digits ([-+]?[0-9]+) past 2^53:
 * one kop_go_parse_int could not read (past 64 bits, or not octal for its
 * leading 0) is a float to go-yaml, so rounded as well.
 */
static int digits_beyond_2_53(const char *p)
{
	static const char limit[] = "9007199254740992";	/* 2^53 */
	size_t n;

	if (*p == '+' || *p == '-')
		p++;
	while (p[0] == '0' && p[1])
		p++;
	n = strspn(p, "0123456789");
	if (!n || p[n])
		return 0;
	return n > sizeof(limit) - 1 || (n == sizeof(limit) - 1 && memcmp(p, limit, n) > 0);
}

/* A number in go-yaml's int or float form: 0 and *out (*beyond: an integer
 * past 2^53), or -1. */
static int parse_number(const char *s, size_t len, double *out, int *beyond)
{
	char *plain = without_underscores(s, len);
	int rc = -1;

	*beyond = 0;
	if (!kop_go_parse_int(plain, out, beyond)) {
		rc = 0;
	} else if (is_yaml_float(plain)) {
		double d = strtod(plain, NULL);

		if (isfinite(d)) {
			*out = d;
			*beyond = digits_beyond_2_53(plain);
			rc = 0;
		}
	}
	free(plain);
	return rc;
}

enum scalar_kind { SC_RESOLVE, SC_STR, SC_INT, SC_FLOAT, SC_BOOL, SC_NULL };

/* The value of a scalar event: 0 and *out, or -1 with the error set. */
static int scalar_value(struct yl *y, const yaml_event_t *ev, jv *out)
{
	const char *s = (const char *)ev->data.scalar.value;
	size_t len = ev->data.scalar.length;
	const char *tag = (const char *)ev->data.scalar.tag;
	enum scalar_kind k = SC_RESOLVE;
	double d;
	int beyond = 0;
	char what[256];

	if (tag && !strncmp(tag, TAG_PREFIX, strlen(TAG_PREFIX))) {
		const char *t = tag + strlen(TAG_PREFIX);

		if (!strcmp(t, "int"))
			k = SC_INT;
		else if (!strcmp(t, "float"))
			k = SC_FLOAT;
		else if (!strcmp(t, "bool"))
			k = SC_BOOL;
		else if (!strcmp(t, "null"))
			k = SC_NULL;
		else
			k = SC_STR;	/* str, binary, timestamp, and the rest */
	} else if (tag || ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
		k = SC_STR;	/* quoted, block, "!" or an application tag */
	}
	if (k == SC_STR) {
		*out = jv_string_sized(s, (int)len);
		return 0;
	}
	if (strlen(s) != len) {	/* a NUL inside: never a number, null or bool */
		if (k != SC_RESOLVE)
			goto bad;
		*out = jv_string_sized(s, (int)len);
		return 0;
	}
	if ((k == SC_RESOLVE || k == SC_NULL) && in_list(s, null_words)) {
		*out = jv_null();
		return 0;
	}
	if (k == SC_RESOLVE || k == SC_BOOL) {
		if (in_list(s, yes_words)) {
			*out = jv_true();
			return 0;
		}
		if (in_list(s, no_words)) {
			*out = jv_false();
			return 0;
		}
	}
	if ((k == SC_RESOLVE || k == SC_FLOAT) && in_list(s, special_floats))
		return yl_fail_value(y, ev, "an infinity or NaN has no JSON representation");
	if (k == SC_RESOLVE || k == SC_INT || k == SC_FLOAT) {
		int rc;

		if (k == SC_INT) {
			char *plain = without_underscores(s, len);

			rc = kop_go_parse_int(plain, &d, &beyond);
			if (rc && digits_beyond_2_53(plain)) {
				rc = 0;	/* (past 64 bits: refused as one past 2^53) */
				beyond = 1;
			}
			free(plain);
		} else {
			rc = parse_number(s, len, &d, &beyond);
		}
		/* jv numbers are doubles: an integer past 2^53 would be held, and sent, rounded */
		if (!rc && beyond)
			return yl_fail_value(y, ev, BEYOND_2_53);
		if (!rc) {
			*out = jv_number(d);
			return 0;
		}
	}
	if (k == SC_RESOLVE) {
		*out = jv_string_sized(s, (int)len);
		return 0;
	}
bad:
	snprintf(what, sizeof(what), "cannot decode the value as %s", tag);
	return yl_fail_value(y, ev, what);
}

/* ---- collections -------------------------------------------------------- */

/* The path back to its first mark bytes (a node read). */
static void path_cut(struct yl *y, size_t mark)
{
	y->path.len = mark;
	if (y->path.buf)
		y->path.buf[mark] = '\0';
}

static int parse_node(struct yl *y, yaml_event_t *ev, jv *out, size_t *nodes);

/* A mapping key as a string, as sigs.k8s.io/yaml turns keys into JSON. */
static int key_string(struct yl *y, const yaml_event_t *kev, jv key, jv *out)
{
	switch (jv_get_kind(key)) {
	case JV_KIND_STRING:
		*out = key;
		return 0;
	case JV_KIND_NUMBER:
	case JV_KIND_TRUE:
	case JV_KIND_FALSE:
		*out = jv_dump_string(key, 0);
		return 0;
	default:
		jv_free(key);
		return yl_fail(y, kev->start_mark.line, kev->start_mark.column, "unsupported mapping key");
	}
}

static int is_merge_key(const yaml_event_t *ev)
{
	if (ev->type != YAML_SCALAR_EVENT || strcmp((const char *)ev->data.scalar.value, "<<"))
		return 0;
	if (ev->data.scalar.tag)
		return !strcmp((const char *)ev->data.scalar.tag, TAG_PREFIX "merge");
	return ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

/* Adds the keys of src (an object) that dst lacks. Consumes src. */
static jv merge_missing(jv dst, jv src)
{
	jv_object_foreach(src, k, v) {
		if (jv_object_has(jv_copy(dst), jv_copy(k)))
			jv_free(v);
		else
			dst = jv_object_set(dst, jv_copy(k), v);
		jv_free(k);
	}
	jv_free(src);
	return dst;
}

static int parse_mapping(struct yl *y, jv *out, size_t *nodes)
{
	jv obj = jv_object(), merges = jv_array();
	yaml_event_t kev, vev;

	for (;;) {
		jv key, val;
		int merge, rc;
		size_t mark;

		if (yl_next(y, &kev))
			goto fail;
		if (kev.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&kev);
			break;
		}
		merge = is_merge_key(&kev);
		if (parse_node(y, &kev, &key, nodes)) {
			yaml_event_delete(&kev);
			goto fail;
		}
		if (!merge && key_string(y, &kev, key, &key)) {
			yaml_event_delete(&kev);
			goto fail;
		}
		if (yl_next(y, &vev)) {
			jv_free(key);
			yaml_event_delete(&kev);
			goto fail;
		}
		mark = y->path.len;
		if (!merge)	/* (a merge's keys land in this mapping) */
			kop_json_path_key(&y->path, jv_string_value(key), (size_t)jv_string_length_bytes(jv_copy(key)));
		rc = parse_node(y, &vev, &val, nodes);
		path_cut(y, mark);
		if (rc) {
			jv_free(key);
			yaml_event_delete(&kev);
			yaml_event_delete(&vev);
			goto fail;
		}
		if (merge) {
			jv_free(key);
			if (jv_get_kind(val) == JV_KIND_OBJECT) {
				merges = jv_array_append(merges, val);
			} else if (jv_get_kind(val) == JV_KIND_ARRAY) {
				jv_array_foreach(val, i, m) {
					if (jv_get_kind(m) != JV_KIND_OBJECT) {
						jv_free(m);
						jv_free(val);
						yl_fail(y, vev.start_mark.line, vev.start_mark.column,
							"map merge requires map or sequence of maps as the value");
						yaml_event_delete(&kev);
						yaml_event_delete(&vev);
						goto fail;
					}
					merges = jv_array_append(merges, m);
				}
				jv_free(val);
			} else {
				jv_free(val);
				yl_fail(y, vev.start_mark.line, vev.start_mark.column,
					"map merge requires map or sequence of maps as the value");
				yaml_event_delete(&kev);
				yaml_event_delete(&vev);
				goto fail;
			}
		} else {
			obj = jv_object_set(obj, key, val);
		}
		yaml_event_delete(&kev);
		yaml_event_delete(&vev);
	}
	/* Explicit keys win over merged ones, and an earlier merge over a later one. */
	jv_array_foreach(merges, i, m)
		obj = merge_missing(obj, m);
	jv_free(merges);
	*out = obj;
	return 0;
fail:
	jv_free(obj);
	jv_free(merges);
	return -1;
}

static int parse_sequence(struct yl *y, jv *out, size_t *nodes)
{
	jv arr = jv_array();
	yaml_event_t ev;
	size_t i;

	for (i = 0;; i++) {
		size_t mark = y->path.len;
		jv v;
		int rc;

		if (yl_next(y, &ev)) {
			jv_free(arr);
			return -1;
		}
		if (ev.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&ev);
			break;
		}
		kop_buf_addf(&y->path, "[%zu]", i);
		rc = parse_node(y, &ev, &v, nodes);
		path_cut(y, mark);
		if (rc) {
			yaml_event_delete(&ev);
			jv_free(arr);
			return -1;
		}
		yaml_event_delete(&ev);
		arr = jv_array_append(arr, v);
	}
	*out = arr;
	return 0;
}

static void remember_anchor(struct yl *y, const yaml_char_t *anchor, jv v, size_t count)
{
	if (!anchor)
		return;
	y->anchors = jv_object_set(y->anchors, jv_string((const char *)anchor),
				   JV_ARRAY(jv_copy(v), jv_number((double)count)));
}

/* Parses the node that starts with ev (not deleted here). */
static int parse_node(struct yl *y, yaml_event_t *ev, jv *out, size_t *nodes)
{
	size_t mine = 1;
	int rc;

	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		if (scalar_value(y, ev, out))
			return -1;
		remember_anchor(y, ev->data.scalar.anchor, *out, 1);
		*nodes += 1;
		return 0;
	case YAML_ALIAS_EVENT: {
		jv a = jv_object_get(jv_copy(y->anchors), jv_string((const char *)ev->data.alias.anchor));
		size_t count;

		if (jv_get_kind(a) != JV_KIND_ARRAY) {
			jv_free(a);
			return yl_fail(y, ev->start_mark.line, ev->start_mark.column, "unknown anchor '%s' referenced",
				       (const char *)ev->data.alias.anchor);
		}
		count = (size_t)jv_number_value(jv_array_get(jv_copy(a), 1));
		y->alias_nodes += count;
		if (y->alias_nodes > YAML_MAX_ALIAS_NODES) {
			jv_free(a);
			return yl_fail(y, ev->start_mark.line, ev->start_mark.column,
				       "document contains excessive aliasing");
		}
		*out = jv_array_get(a, 0);
		*nodes += count;
		return 0;
	}
	case YAML_MAPPING_START_EVENT:
	case YAML_SEQUENCE_START_EVENT:
		if (++y->depth > YAML_MAX_DEPTH) {
			y->depth--;
			return yl_fail(y, ev->start_mark.line, ev->start_mark.column,
				       "nested deeper than %d levels", YAML_MAX_DEPTH);
		}
		if (ev->type == YAML_MAPPING_START_EVENT)
			rc = parse_mapping(y, out, &mine);
		else
			rc = parse_sequence(y, out, &mine);
		y->depth--;
		if (rc)
			return -1;
		remember_anchor(y, ev->type == YAML_MAPPING_START_EVENT ? ev->data.mapping_start.anchor
									: ev->data.sequence_start.anchor,
				*out, mine);
		*nodes += mine;
		return 0;
	default:
		return yl_fail(y, ev->start_mark.line, ev->start_mark.column, "unexpected event");
	}
}

/* ---- documents ---------------------------------------------------------- */

static int load_yaml(struct yl *y, jv *docs)
{
	yaml_event_t ev;

	if (yl_next(y, &ev))
		return -1;
	yaml_event_delete(&ev);	/* STREAM-START */
	for (;;) {
		jv v;
		size_t nodes = 0;

		if (yl_next(y, &ev))
			return -1;
		if (ev.type == YAML_STREAM_END_EVENT) {
			yaml_event_delete(&ev);
			return 0;
		}
		yaml_event_delete(&ev);	/* DOCUMENT-START */
		if (yl_next(y, &ev))
			return -1;
		if (parse_node(y, &ev, &v, &nodes)) {
			yaml_event_delete(&ev);
			return -1;
		}
		yaml_event_delete(&ev);
		if (yl_next(y, &ev)) {	/* DOCUMENT-END */
			jv_free(v);
			return -1;
		}
		yaml_event_delete(&ev);
		/* Anchors do not cross documents. */
		jv_free(y->anchors);
		y->anchors = jv_object();
		if (jv_get_kind(v) == JV_KIND_NULL)
			jv_free(v);
		else
			*docs = jv_array_append(*docs, v);
	}
}

/* A stream of JSON values, when the text looks like JSON: 0 and *docs, or -1 (then try YAML). */
static int load_json(const char *text, size_t len, jv *docs)
{
	struct jv_parser *p = jv_parser_new(0);
	jv arr = jv_array(), v;

	/* the whole text, not partial: a truncated value is an error, not the end */
	jv_parser_set_buf(p, text, (int)len, 0);
	while (jv_is_valid(v = jv_parser_next(p))) {
		if (jv_get_kind(v) == JV_KIND_NULL)
			jv_free(v);
		else
			arr = jv_array_append(arr, v);
	}
	jv_parser_free(p);
	if (jv_invalid_has_msg(jv_copy(v))) {
		jv_free(v);
		jv_free(arr);
		return -1;
	}
	jv_free(v);
	jv_free(*docs);
	*docs = arr;
	return 0;
}

/*
 * JSON text is read by libjq, which holds every number as a double: an
 * integer past 2^53 is refused as the YAML path refuses it (parse_scalar),
 * naming its line, column and path. 0, or -1 with err.
 */
static int json_exact(const char *text, size_t len, const char *name, char *err)
{
	char what[48], place[KOP_ERRLEN];	/* (what: its digits, never shown) */
	size_t at;

	if (!kop_json_inexact(text, len, what, sizeof(what), &at))
		return 0;
	return kop_error(err, "unable to parse '%s': %s: " BEYOND_2_53, name ? name : "<input>",
			 kop_json_place(text, len, at, 1, place, sizeof(place)));
}

int kop_yaml_load(const char *text, size_t len, const char *name, jv *docs_out, char *err)
{
	struct yl y;
	jv docs = jv_array();
	size_t i;
	int rc;

	*docs_out = jv_invalid();
	for (i = 0; i < len && isspace((unsigned char)text[i]); i++)
		;
	if (i < len && (text[i] == '{' || text[i] == '[') && len < INT32_MAX && !load_json(text, len, &docs)) {
		if (json_exact(text, len, name, err) < 0) {
			jv_free(docs);
			return -1;
		}
		*docs_out = docs;
		return 0;
	}
	memset(&y, 0, sizeof(y));
	if (!yaml_parser_initialize(&y.p)) {
		jv_free(docs);
		return kop_error(err, "unable to parse '%s': out of memory", name ? name : "<input>");
	}
	yaml_parser_set_input_string(&y.p, (const unsigned char *)text, len);
	y.name = name ? name : "<input>";
	y.err = err;
	y.anchors = jv_object();
	rc = load_yaml(&y, &docs);
	kop_buf_release(&y.path);
	jv_free(y.anchors);
	yaml_parser_delete(&y.p);
	if (rc) {
		jv_free(docs);
		return -1;
	}
	*docs_out = docs;
	return 0;
}

int kop_yaml_load_file(const char *path, jv *docs_out, char *err)
{
	char *text;
	size_t len;
	int rc;

	*docs_out = jv_invalid();
	if (kop_read_file(path, 64u << 20, &text, &len, err))
		return -1;
	rc = kop_yaml_load(text, len, path, docs_out, err);
	free(text);
	return rc;
}
