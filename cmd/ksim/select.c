/*
 * Label and field selectors, as apimachinery parses them
 * (pkg/labels/selector.go, pkg/fields/selector.go): requirements joined by
 * commas (AND); labels: k=v, k==v, k!=v, k in (a,b), k notin (a,b), k, !k,
 * k>N, k<N; fields: =, ==, != only.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include "ksim.h"
#include "banned.h"

enum sel_op { OP_EQ, OP_NE, OP_IN, OP_NOTIN, OP_EXISTS, OP_NOTEXISTS, OP_GT, OP_LT };

struct sel_req {
	char *key;
	enum sel_op op;
	char **values;
	size_t nvalues;
};

struct ksim_selector {
	int field;
	struct sel_req *reqs;
	size_t n;
};

static void skip_ws(const char **p)
{
	while (**p == ' ' || **p == '\t')
		(*p)++;
}

/* A label key or value: everything up to a delimiter. */
static char *read_word(const char **p)
{
	const char *s = *p;

	while (**p && !strchr(" \t,()=!<>", **p))
		(*p)++;
	return kop_strndup(s, *p - s);
}

static void add_value(struct sel_req *r, char *v)
{
	r->values = kop_realloc(r->values, (r->nvalues + 1) * sizeof(*r->values));
	r->values[r->nvalues++] = v;
}

static int valid_label_value(const char *v)
{
	size_t n = strlen(v);

	if (n > 63)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)v[i]) && !strchr("-_.", v[i]))
			return 0;
	return n == 0 || (isalnum((unsigned char)v[0]) && isalnum((unsigned char)v[n - 1]));
}

static int parse_label_req(const char **p, struct sel_req *r, char *err)
{
	skip_ws(p);
	if (**p == '!') {
		(*p)++;
		skip_ws(p);
		r->key = read_word(p);
		r->op = OP_NOTEXISTS;
		if (!*r->key)
			return kop_error(err, "found '%c', expected: identifier", **p ? **p : ' ');
		return 0;
	}
	r->key = read_word(p);
	if (!*r->key)
		return kop_error(err, "found '%c', expected: !, identifier, or 'end of string'", **p ? **p : ' ');
	skip_ws(p);
	if (!**p || **p == ',') {
		r->op = OP_EXISTS;
		return 0;
	}
	if (!strncmp(*p, "==", 2)) {
		r->op = OP_EQ;
		*p += 2;
	} else if (!strncmp(*p, "!=", 2)) {
		r->op = OP_NE;
		*p += 2;
	} else if (**p == '=') {
		r->op = OP_EQ;
		(*p)++;
	} else if (**p == '>' || **p == '<') {
		r->op = **p == '>' ? OP_GT : OP_LT;
		(*p)++;
	} else if (!strncmp(*p, "in", 2) || !strncmp(*p, "notin", 5)) {
		r->op = **p == 'i' ? OP_IN : OP_NOTIN;
		*p += r->op == OP_IN ? 2 : 5;
		skip_ws(p);
		if (**p != '(')
			return kop_error(err, "found '%c', expected: '('", **p ? **p : ' ');
		(*p)++;
		for (;;) {
			char *v;

			skip_ws(p);
			v = read_word(p);
			if (!valid_label_value(v)) {
				free(v);
				return kop_error(err, "invalid label value");
			}
			add_value(r, v);
			skip_ws(p);
			if (**p == ',') {
				(*p)++;
				continue;
			}
			if (**p == ')') {
				(*p)++;
				return 0;
			}
			return kop_error(err, "found '%c', expected: ',' or ')'", **p ? **p : ' ');
		}
	} else {
		return kop_error(err, "found '%c', expected: in, notin, =, ==, !=, gt, lt", **p);
	}
	skip_ws(p);
	{
		char *v = read_word(p);

		if (!valid_label_value(v)) {
			free(v);
			return kop_error(err, "invalid label value");
		}
		if ((r->op == OP_GT || r->op == OP_LT) && (!*v || strspn(v, "0123456789") != strlen(v))) {
			free(v);
			return kop_error(err, "for 'gt', 'lt' operators, exactly one value is required");
		}
		add_value(r, v);
	}
	return 0;
}

static int parse_field_req(const char **p, struct sel_req *r, char *err)
{
	const char *s = *p, *op;
	const char *end = strchr(s, ',');
	size_t len = end ? (size_t)(end - s) : strlen(s);
	char *term = kop_strndup(s, len);

	*p = s + len;
	if ((op = strstr(term, "!="))) {
		r->op = OP_NE;
		r->key = kop_strndup(term, op - term);
		add_value(r, kop_strdup(op + 2));
	} else if ((op = strstr(term, "=="))) {
		r->op = OP_EQ;
		r->key = kop_strndup(term, op - term);
		add_value(r, kop_strdup(op + 2));
	} else if ((op = strchr(term, '='))) {
		r->op = OP_EQ;
		r->key = kop_strndup(term, op - term);
		add_value(r, kop_strdup(op + 1));
	} else {
		kop_error(err, "invalid selector: '%s'; can't understand '%s'", s, term);
		free(term);
		return -1;
	}
	free(term);
	return 0;
}

struct ksim_selector *ksim_selector_parse(const char *str, int field, char *err)
{
	struct ksim_selector *s;
	const char *p = str;

	if (!str)
		return NULL;
	s = kop_calloc(1, sizeof(*s));
	s->field = field;
	skip_ws(&p);
	while (*p) {
		struct sel_req *r;

		s->reqs = kop_realloc(s->reqs, (s->n + 1) * sizeof(*s->reqs));
		r = &s->reqs[s->n++];
		memset(r, 0, sizeof(*r));
		if ((field ? parse_field_req(&p, r, err) : parse_label_req(&p, r, err)) < 0) {
			ksim_selector_free(s);
			return (struct ksim_selector *)-1;
		}
		skip_ws(&p);
		if (*p == ',') {
			p++;
			skip_ws(&p);
			if (!*p) {
				kop_error(err, "found '', expected: identifier after ','");
				ksim_selector_free(s);
				return (struct ksim_selector *)-1;
			}
		} else if (*p) {
			kop_error(err, "found '%c', expected: ',' or 'end of string'", *p);
			ksim_selector_free(s);
			return (struct ksim_selector *)-1;
		}
	}
	return s;
}

void ksim_selector_free(struct ksim_selector *s)
{
	if (!s || s == (struct ksim_selector *)-1)
		return;
	for (size_t i = 0; i < s->n; i++) {
		free(s->reqs[i].key);
		for (size_t j = 0; j < s->reqs[i].nvalues; j++)
			free(s->reqs[i].values[j]);
		free(s->reqs[i].values);
	}
	free(s->reqs);
	free(s);
}

const char *ksim_selector_name(const struct ksim_selector *s)
{
	if (!s)
		return NULL;
	for (size_t i = 0; i < s->n; i++)
		if (s->reqs[i].op == OP_EQ && !strcmp(s->reqs[i].key, "metadata.name"))
			return s->reqs[i].values[0];
	return NULL;
}

/* Field values per kind (the selectable fields of kube-apiserver's strategies). */
static const char *const pod_fields[] = { "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
	"spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName", NULL };
static const char *const event_fields[] = { "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
	"involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
	"reason", "reportingComponent", "source", "type", NULL };

static int in_list(const char *const *l, const char *f)
{
	for (; *l; l++)
		if (!strcmp(*l, f))
			return 1;
	return 0;
}

int ksim_field_supported(const struct ksim_type *t, const char *f)
{
	if (!strcmp(f, "metadata.name") || !strcmp(f, "metadata.namespace"))
		return 1;
	if (!t)
		return 0;
	if (!strcmp(t->gr, "pods"))
		return in_list(pod_fields, f);
	if (!strcmp(t->gr, "events"))
		return in_list(event_fields, f);
	if (!strcmp(t->gr, "secrets"))
		return !strcmp(f, "type");
	if (!strcmp(t->gr, "namespaces"))
		return !strcmp(f, "status.phase");
	if (!strcmp(t->gr, "nodes"))
		return !strcmp(f, "spec.unschedulable");
	if (!strcmp(t->gr, "replicasets.apps"))
		return !strcmp(f, "status.replicas");
	if (jv_get_kind(t->selectable) == JV_KIND_ARRAY) {
		jv_array_foreach(t->selectable, i, e) {
			int hit = jv_get_kind(e) == JV_KIND_STRING && jv_string_value(e)[0] == '.' &&
				  !strcmp(jv_string_value(e) + 1, f);

			jv_free(e);
			if (hit)
				return 1;
		}
	}
	return 0;
}

/* The selector value of a field as a string ("" when absent); returned string to free. */
static char *field_value(jv obj, const char *f)
{
	jv path = jv_array(), v;
	char *copy = kop_strdup(f), *p = copy, *dot;
	char *out;

	if (!strcmp(f, "source"))
		f = "source.component";
	free(copy);
	copy = kop_strdup(f);
	p = copy;
	while ((dot = strchr(p, '.'))) {
		*dot = 0;
		path = jv_array_append(path, jv_string(p));
		p = dot + 1;
	}
	path = jv_array_append(path, jv_string(p));
	free(copy);
	v = jv_getpath(jv_copy(obj), path);
	switch (jv_get_kind(v)) {
	case JV_KIND_STRING:
		out = kop_strdup(jv_string_value(v));
		break;
	case JV_KIND_TRUE:
		out = kop_strdup("true");
		break;
	case JV_KIND_FALSE:
		out = kop_strdup("false");
		break;
	case JV_KIND_NUMBER: {
		jv s = jv_dump_string(jv_copy(v), 0);

		out = kop_strdup(jv_string_value(s));
		jv_free(s);
		break;
	}
	default:
		out = kop_strdup(!strcmp(f, "spec.unschedulable") || !strcmp(f, "spec.hostNetwork") ? "false" : "");
	}
	jv_free(v);
	return out;
}

int ksim_selector_match(const struct ksim_selector *s, jv obj, const struct ksim_type *t)
{
	if (!s)
		return 1;
	for (size_t i = 0; i < s->n; i++) {
		const struct sel_req *r = &s->reqs[i];
		int ok;

		if (s->field) {
			char *v = field_value(obj, r->key);

			ok = !strcmp(v, r->values[0]) == (r->op == OP_EQ);
			free(v);
		} else {
			jv labels = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("metadata"), jv_string("labels")));
			jv v = jv_get_kind(labels) == JV_KIND_OBJECT ? jv_object_get(labels, jv_string(r->key)) :
								      (jv_free(labels), jv_invalid());
			int has = jv_get_kind(v) == JV_KIND_STRING;
			const char *sv = has ? jv_string_value(v) : NULL;

			switch (r->op) {
			case OP_EXISTS:
				ok = has;
				break;
			case OP_NOTEXISTS:
				ok = !has;
				break;
			case OP_EQ:
				ok = has && !strcmp(sv, r->values[0]);
				break;
			case OP_NE:
				ok = !has || strcmp(sv, r->values[0]);
				break;
			case OP_IN:
			case OP_NOTIN:
				ok = 0;
				for (size_t j = 0; has && j < r->nvalues; j++)
					if (!strcmp(sv, r->values[j]))
						ok = 1;
				if (r->op == OP_NOTIN)
					ok = !ok;
				break;
			case OP_GT:
			case OP_LT: {
				char *end;
				long long a, b = strtoll(r->values[0], NULL, 10);

				ok = 0;
				if (has) {
					a = strtoll(sv, &end, 10);
					if (*sv && !*end)
						ok = r->op == OP_GT ? a > b : a < b;
				}
				break;
			}
			default:
				ok = 0;
			}
			jv_free(v);
		}
		if (!ok)
			return 0;
	}
	(void)t;
	return 1;
}
