/*
 * CRD structural schemas: defaulting, pruning and validation of custom
 * objects, worded as kube-apiserver (apiextensions-apiserver with
 * kube-openapi's validator, 1.25 line) words its 422 causes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <pthread.h>
#include <oniguruma.h>
#include "schema.h"
#include "banned.h"

/*
 * The keywords looked up in schemas as jv strings, made once per thread
 * rather than at every lookup (an allocation, a copy and a hash each: a
 * sixth of a server's work per write). Per thread, since a jv's reference
 * count is not atomic; freed when the thread ends.
 */
#define KEYWORDS_MAX 48
struct keywords {
	int n;
	const char *k[KEYWORDS_MAX];	/* the callers' literals, compared by address first */
	jv s[KEYWORDS_MAX];
};
static pthread_key_t keywords_key;
static pthread_once_t keywords_once = PTHREAD_ONCE_INIT;
static int keywords_ok;

static void keywords_free(void *p)
{
	struct keywords *c = p;

	while (c->n)
		jv_free(c->s[--c->n]);
	free(c);
}

static void keywords_init(void)
{
	keywords_ok = pthread_key_create(&keywords_key, keywords_free) == 0;
}

static jv keyword(const char *key)
{
	struct keywords *c;
	int i;

	pthread_once(&keywords_once, keywords_init);
	if (!keywords_ok)
		return jv_string(key);
	if (!(c = pthread_getspecific(keywords_key))) {
		if (!(c = calloc(1, sizeof(*c))))
			return jv_string(key);
		if (pthread_setspecific(keywords_key, c)) {
			free(c);
			return jv_string(key);
		}
	}
	for (i = 0; i < c->n; i++)
		if (c->k[i] == key && !strcmp(jv_string_value(c->s[i]), key))
			return jv_copy(c->s[i]);
	if (c->n == KEYWORDS_MAX)
		return jv_string(key);
	c->k[c->n] = key;
	c->s[c->n] = jv_string(key);
	return jv_copy(c->s[c->n++]);
}

/* schema[key] (schema borrowed), or jv_invalid(). */
static jv sget(jv schema, const char *key)
{
	if (jv_get_kind(schema) != JV_KIND_OBJECT)
		return jv_invalid();
	jv v = jv_object_get(jv_copy(schema), keyword(key));

	if (jv_get_kind(v) == JV_KIND_NULL) {
		jv_free(v);
		return jv_invalid();
	}
	return v;
}

static int sflag(jv schema, const char *key)
{
	jv v = sget(schema, key);
	int r = jv_get_kind(v) == JV_KIND_TRUE;

	jv_free(v);
	return r;
}

/* The schema of property k of an object schema: properties[k], else an
 * additionalProperties schema, else jv_invalid(). */
static jv prop_schema(jv schema, jv k)
{
	jv props = sget(schema, "properties");

	if (jv_get_kind(props) == JV_KIND_OBJECT && jv_object_has(jv_copy(props), jv_copy(k))) {
		jv r = jv_object_get(props, k);

		return r;
	}
	jv_free(props);
	jv_free(k);
	jv ap = sget(schema, "additionalProperties");
	if (jv_get_kind(ap) == JV_KIND_OBJECT)
		return ap;
	jv_free(ap);
	return jv_invalid();
}

/* ---- defaulting ---- */

jv kop_schema_default(jv obj, jv schema)
{
	if (jv_get_kind(obj) == JV_KIND_OBJECT) {
		jv props = sget(schema, "properties");

		if (jv_get_kind(props) == JV_KIND_OBJECT) {
			jv_object_foreach(props, k, ps) {
				jv cur = jv_object_get(jv_copy(obj), jv_copy(k));
				jv def = sget(ps, "default");
				int given = 1;

				if ((!jv_is_valid(cur) || (jv_get_kind(cur) == JV_KIND_NULL && !sflag(ps, "nullable"))) &&
				    jv_is_valid(def)) {
					jv_free(cur);
					cur = jv_copy(def);
					given = 0;
				}
				jv_free(def);
				if (jv_is_valid(cur)) {
					jv nv = kop_schema_default(jv_copy(cur), ps);

					/* set only when changed: what is left alone stays shared */
					if (given && jv_identical(jv_copy(nv), jv_copy(cur)))
						jv_free(nv);
					else
						obj = jv_object_set(obj, jv_copy(k), nv);
				}
				jv_free(cur);
				jv_free(k);
				jv_free(ps);
			}
		}
		jv_free(props);
		jv ap = sget(schema, "additionalProperties");
		if (jv_get_kind(ap) == JV_KIND_OBJECT) {
			jv props2 = sget(schema, "properties");

			jv orig = jv_copy(obj);

			jv_object_foreach(orig, k, v) {
				if (jv_get_kind(props2) == JV_KIND_OBJECT && jv_object_has(jv_copy(props2), jv_copy(k))) {
					jv_free(k);
					jv_free(v);
					continue;
				}
				jv nv = kop_schema_default(jv_copy(v), ap);

				if (jv_identical(jv_copy(nv), v)) {
					jv_free(nv);
					jv_free(k);
				} else {
					obj = jv_object_set(obj, k, nv);
				}
			}
			jv_free(orig);
			jv_free(props2);
		}
		jv_free(ap);
		return obj;
	}
	if (jv_get_kind(obj) == JV_KIND_ARRAY) {
		jv items = sget(schema, "items");

		if (jv_get_kind(items) == JV_KIND_OBJECT) {
			int i, n = jv_array_length(jv_copy(obj));

			for (i = 0; i < n; i++) {
				jv e = jv_array_get(jv_copy(obj), i), ne = kop_schema_default(jv_copy(e), items);

				if (jv_identical(jv_copy(ne), e))
					jv_free(ne);
				else
					obj = jv_array_set(obj, i, ne);
			}
		}
		jv_free(items);
	}
	return obj;
}

/* ---- pruning ---- */

static const char *const objectmeta_fields[] = {
	"name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
	"creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
	"ownerReferences", "finalizers", "managedFields",
};

static jv prune_meta(jv md)
{
	size_t i;
	jv out = jv_object();

	if (jv_get_kind(md) != JV_KIND_OBJECT)
		return md;
	for (i = 0; i < sizeof(objectmeta_fields) / sizeof(objectmeta_fields[0]); i++) {
		jv v = jv_object_get(jv_copy(md), jv_string(objectmeta_fields[i]));

		if (jv_is_valid(v))
			out = jv_object_set(out, jv_string(objectmeta_fields[i]), v);
		else
			jv_free(v);
	}
	jv_free(md);
	return out;
}

static jv prune(jv obj, jv schema, int resource)
{
	if (jv_get_kind(obj) == JV_KIND_OBJECT) {
		int preserve = sflag(schema, "x-kubernetes-preserve-unknown-fields");
		jv ap = sget(schema, "additionalProperties");
		int ap_any = jv_get_kind(ap) == JV_KIND_TRUE || jv_get_kind(ap) == JV_KIND_OBJECT;

		jv_free(ap);
		jv orig = jv_copy(obj);
		jv_object_foreach(orig, k, v) {
			const char *ks = jv_string_value(k);

			if (resource && (!strcmp(ks, "apiVersion") || !strcmp(ks, "kind"))) {
				jv_free(k);
				jv_free(v);
				continue;
			}
			if (resource && !strcmp(ks, "metadata")) {
				obj = jv_object_set(obj, k, prune_meta(v));
				continue;
			}
			jv ps = prop_schema(schema, jv_copy(k));
			if (jv_is_valid(ps)) {
				jv pv = prune(jv_copy(v), ps, sflag(ps, "x-kubernetes-embedded-resource"));

				/* set only when changed: what is left alone stays shared (and cheap to compare) */
				if (jv_identical(jv_copy(pv), v)) {
					jv_free(pv);
					jv_free(k);
				} else {
					obj = jv_object_set(obj, k, pv);
				}
			} else if (preserve || ap_any) {
				jv_free(k);
				jv_free(v);
			} else {
				obj = jv_object_delete(obj, k);
				jv_free(v);
			}
			jv_free(ps);
		}
		jv_free(orig);
		return obj;
	}
	if (jv_get_kind(obj) == JV_KIND_ARRAY) {
		jv items = sget(schema, "items");

		if (jv_get_kind(items) == JV_KIND_OBJECT) {
			int i, n = jv_array_length(jv_copy(obj));
			int emb = sflag(items, "x-kubernetes-embedded-resource");

			for (i = 0; i < n; i++) {
				jv e = jv_array_get(jv_copy(obj), i), pe = prune(jv_copy(e), items, emb);

				if (jv_identical(jv_copy(pe), e))
					jv_free(pe);
				else
					obj = jv_array_set(obj, i, pe);
			}
		}
		jv_free(items);
	}
	return obj;
}

jv kop_schema_prune(jv obj, jv schema)
{
	return prune(obj, schema, 1);
}

/* ---- validation ---- */

struct val {
	jv causes;
	struct kop_buf path;
	jv old;		/* the stored object's value at path, or jv_invalid() (kop_schema_validate_update) */
};

static void cause(struct val *v, const char *reason, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void cause(struct val *v, const char *reason, const char *field, const char *fmt, ...)
{
	struct kop_buf b = KOP_BUF_INIT;
	va_list ap;
	jv c = jv_object();

	va_start(ap, fmt);
	kop_buf_vaddf(&b, fmt, ap);
	va_end(ap);
	c = jv_object_set(c, jv_string("reason"), jv_string(reason));
	c = jv_object_set(c, jv_string("message"), jv_string(b.buf));
	c = jv_object_set(c, jv_string("field"), jv_string(field));
	v->causes = jv_array_append(v->causes, c);
	kop_buf_release(&b);
}

static const char *type_name(jv x)
{
	switch (jv_get_kind(x)) {
	case JV_KIND_OBJECT: return "object";
	case JV_KIND_ARRAY: return "array";
	case JV_KIND_STRING: return "string";
	case JV_KIND_TRUE:
	case JV_KIND_FALSE: return "boolean";
	case JV_KIND_NULL: return "null";
	case JV_KIND_NUMBER: {
		double d = jv_number_value(x);

		return d == floor(d) && fabs(d) < 9.2e18 ? "integer" : "number";
	}
	default: return "null";
	}
}

static int type_ok(const char *want, jv x, int int_or_string)
{
	const char *got = type_name(x);

	if (int_or_string)
		return !strcmp(got, "integer") || !strcmp(got, "string");
	if (!strcmp(want, "number"))
		return !strcmp(got, "number") || !strcmp(got, "integer");
	return !strcmp(want, got);
}

/* A JSON rendering of x for messages (caller frees with jv_free of *hold). */
static const char *show(jv x, jv *hold)
{
	if (jv_get_kind(x) == JV_KIND_NUMBER) {
		double d = jv_number_value(x);

		if (d == floor(d) && fabs(d) < 1e15)
			*hold = jv_string_fmt("%.0f", d);
		else
			*hold = jv_string_fmt("%.17g", d);
		return jv_string_value(*hold);
	}
	*hold = jv_dump_string(jv_copy(x), 0);
	return jv_string_value(*hold);
}

static const char *field(struct val *v)
{
	return v->path.buf;
}

static void validate(struct val *v, jv x, jv schema);

static void number_checks(struct val *v, jv x, jv schema)
{
	double d = jv_number_value(x);
	jv min = sget(schema, "minimum"), max = sget(schema, "maximum"), mul = sget(schema, "multipleOf");
	jv h, hm;

	if (jv_get_kind(min) == JV_KIND_NUMBER) {
		int excl = sflag(schema, "exclusiveMinimum");
		double m = jv_number_value(min);

		if (excl ? d <= m : d < m)
			cause(v, "FieldValueInvalid", field(v), "Invalid value: %s: %s in body should be greater than %s%s",
			      show(x, &h), field(v), excl ? "" : "or equal to ", show(min, &hm)), jv_free(h), jv_free(hm);
	}
	if (jv_get_kind(max) == JV_KIND_NUMBER) {
		int excl = sflag(schema, "exclusiveMaximum");
		double m = jv_number_value(max);

		if (excl ? d >= m : d > m)
			cause(v, "FieldValueInvalid", field(v), "Invalid value: %s: %s in body should be less than %s%s",
			      show(x, &h), field(v), excl ? "" : "or equal to ", show(max, &hm)), jv_free(h), jv_free(hm);
	}
	if (jv_get_kind(mul) == JV_KIND_NUMBER && jv_number_value(mul) > 0) {
		double q = d / jv_number_value(mul);

		if (q != floor(q))
			cause(v, "FieldValueInvalid", field(v), "Invalid value: %s: %s in body should be a multiple of %s",
			      show(x, &h), field(v), show(mul, &hm)), jv_free(h), jv_free(hm);
	}
	jv_free(min);
	jv_free(max);
	jv_free(mul);
}

/* Length of a UTF-8 string in characters, as Go's utf8.RuneCountInString. */
static int utf8_len(const char *s)
{
	int n = 0;

	for (; *s; s++)
		if (((unsigned char)*s & 0xC0) != 0x80)
			n++;
	return n;
}

/*
 * Does s match pattern? Oniguruma (libjq's regex engine, linked anyway) with
 * Perl syntax, close to the ECMA-262/RE2 patterns CRDs use. Note: libonig
 * also exports POSIX regcomp/regexec that shadow glibc's, so <regex.h>
 * cannot be used in a program linked with -lonig. A pattern that does not
 * compile never fails a value (the CRD would have been rejected).
 */
static int pattern_matches(const char *pattern, const char *s)
{
	OnigRegex re;
	OnigErrorInfo einfo;
	const UChar *p = (const UChar *)pattern, *str = (const UChar *)s;
	const UChar *end = str + strlen(s);
	int r;

	if (onig_new(&re, p, p + strlen(pattern), ONIG_OPTION_CAPTURE_GROUP, ONIG_ENCODING_UTF8,
		     ONIG_SYNTAX_PERL, &einfo) != ONIG_NORMAL)
		return 1;
	r = onig_search(re, str, end, str, end, NULL, ONIG_OPTION_NONE);
	onig_free(re);
	return r >= 0;
}

static void string_checks(struct val *v, jv x, jv schema)
{
	const char *s = jv_string_value(x);
	int len = utf8_len(s);
	jv minl = sget(schema, "minLength"), maxl = sget(schema, "maxLength"), pat = sget(schema, "pattern");
	jv h;

	if (jv_get_kind(minl) == JV_KIND_NUMBER && len < (int)jv_number_value(minl))
		cause(v, "FieldValueInvalid", field(v), "Invalid value: %s: %s in body should be at least %d chars long",
		      show(x, &h), field(v), (int)jv_number_value(minl)), jv_free(h);
	if (jv_get_kind(maxl) == JV_KIND_NUMBER && len > (int)jv_number_value(maxl))
		cause(v, "FieldValueTooLong", field(v), "Too long: may not be longer than %d", (int)jv_number_value(maxl));
	if (jv_get_kind(pat) == JV_KIND_STRING && !pattern_matches(jv_string_value(pat), s))
		cause(v, "FieldValueInvalid", field(v), "Invalid value: %s: %s in body should match '%s'",
		      show(x, &h), field(v), jv_string_value(pat)), jv_free(h);
	jv_free(minl);
	jv_free(maxl);
	jv_free(pat);
}

static void array_checks(struct val *v, jv x, jv schema)
{
	int n = jv_array_length(jv_copy(x));
	jv mini = sget(schema, "minItems"), maxi = sget(schema, "maxItems"), items = sget(schema, "items");
	jv lt = sget(schema, "x-kubernetes-list-type");
	size_t mark = v->path.len;

	if (jv_get_kind(mini) == JV_KIND_NUMBER && n < (int)jv_number_value(mini)) {
		jv h;

		cause(v, "FieldValueInvalid", field(v), "Invalid value: %s: %s in body should have at least %d items",
		      show(x, &h), field(v), (int)jv_number_value(mini));
		jv_free(h);
	}
	if (jv_get_kind(maxi) == JV_KIND_NUMBER && n > (int)jv_number_value(maxi))
		cause(v, "FieldValueTooMany", field(v), "Too many: %d: must have at most %d items", n,
		      (int)jv_number_value(maxi));
	if (sflag(schema, "uniqueItems") ||
	    (jv_get_kind(lt) == JV_KIND_STRING && !strcmp(jv_string_value(lt), "set"))) {
		int i, j;

		for (i = 1; i < n; i++)
			for (j = 0; j < i; j++)
				if (jv_equal(jv_array_get(jv_copy(x), i), jv_array_get(jv_copy(x), j))) {
					jv h, e = jv_array_get(jv_copy(x), i);

					kop_buf_addf(&v->path, "[%d]", i);
					cause(v, "FieldValueDuplicate", field(v), "Duplicate value: %s", show(e, &h));
					jv_free(h);
					jv_free(e);
					v->path.len = mark;
					v->path.buf[mark] = '\0';
					j = i;
				}
	}
	if (jv_get_kind(items) == JV_KIND_OBJECT) {
		jv_array_foreach(x, i, e) {
			/* (an element has no stored counterpart: a changed list is judged whole) */
			jv saved = v->old;

			v->old = jv_invalid();
			kop_buf_addf(&v->path, "[%d]", i);
			validate(v, e, items);
			jv_free(v->old);
			v->old = saved;
			v->path.len = mark;
			v->path.buf[mark] = '\0';
		}
	}
	jv_free(mini);
	jv_free(maxi);
	jv_free(items);
	jv_free(lt);
}

static void object_checks(struct val *v, jv x, jv schema)
{
	jv req = sget(schema, "required"), props = sget(schema, "properties"), ap = sget(schema, "additionalProperties");
	jv minp = sget(schema, "minProperties"), maxp = sget(schema, "maxProperties");
	size_t mark = v->path.len;
	int n = jv_object_length(jv_copy(x));
	jv h;

	if (jv_get_kind(minp) == JV_KIND_NUMBER && n < (int)jv_number_value(minp))
		cause(v, "FieldValueInvalid", field(v), "Invalid value: %s: %s in body should have at least %d properties",
		      show(x, &h), field(v), (int)jv_number_value(minp)), jv_free(h);
	if (jv_get_kind(maxp) == JV_KIND_NUMBER && n > (int)jv_number_value(maxp))
		cause(v, "FieldValueTooMany", field(v), "Too many: %d: must have at most %d items", n,
		      (int)jv_number_value(maxp));
	if (jv_get_kind(req) == JV_KIND_ARRAY) {
		jv_array_foreach(req, i, name) {
			jv c = jv_get_kind(name) == JV_KIND_STRING ? jv_object_get(jv_copy(x), jv_copy(name)) : jv_invalid();

			if (!jv_is_valid(c) && jv_get_kind(name) == JV_KIND_STRING) {
				if (v->path.len)
					kop_buf_adds(&v->path, ".");
				kop_buf_adds(&v->path, jv_string_value(name));
				cause(v, "FieldValueRequired", field(v), "Required value");
				v->path.len = mark;
				if (v->path.buf)
					v->path.buf[mark] = '\0';
			}
			jv_free(c);
			jv_free(name);
		}
	}
	jv keys = jv_keys(jv_copy(x));
	jv_array_foreach(keys, i, k) {
		jv ps = jv_invalid();

		if (jv_get_kind(props) == JV_KIND_OBJECT && jv_object_has(jv_copy(props), jv_copy(k)))
			ps = jv_object_get(jv_copy(props), jv_copy(k));
		else if (jv_get_kind(ap) == JV_KIND_OBJECT)
			ps = jv_copy(ap);
		if (jv_is_valid(ps)) {
			if (v->path.len)
				kop_buf_adds(&v->path, ".");
			jv saved = v->old;

			v->old = jv_get_kind(saved) == JV_KIND_OBJECT ? jv_object_get(jv_copy(saved), jv_copy(k)) : jv_invalid();
			kop_buf_adds(&v->path, jv_string_value(k));
			validate(v, jv_object_get(jv_copy(x), jv_copy(k)), ps);
			jv_free(v->old);
			v->old = saved;
			v->path.len = mark;
			v->path.buf[mark] = '\0';
		}
		jv_free(ps);
		jv_free(k);
	}
	jv_free(keys);
	jv_free(req);
	jv_free(props);
	jv_free(ap);
	jv_free(minp);
	jv_free(maxp);
}

/* Does x satisfy schema? (for allOf/anyOf/oneOf/not) */
static int satisfies(jv x, jv schema)
{
	struct val sub = { jv_array(), KOP_BUF_INIT, jv_invalid() };
	int ok;

	kop_buf_adds(&sub.path, "");
	validate(&sub, jv_copy(x), schema);
	ok = jv_array_length(jv_copy(sub.causes)) == 0;
	jv_free(sub.causes);
	kop_buf_release(&sub.path);
	return ok;
}

static void logic_checks(struct val *v, jv x, jv schema)
{
	jv all = sget(schema, "allOf"), any = sget(schema, "anyOf"), one = sget(schema, "oneOf"), not = sget(schema, "not");

	if (jv_get_kind(all) == JV_KIND_ARRAY) {
		jv_array_foreach(all, i, s) {
			validate(v, jv_copy(x), s);
			jv_free(s);
		}
	}
	if (jv_get_kind(any) == JV_KIND_ARRAY) {
		int ok = 0;

		jv_array_foreach(any, i, s) {
			if (!ok)
				ok = satisfies(x, s);
			jv_free(s);
		}
		if (!ok)
			cause(v, "FieldValueInvalid", field(v), "Invalid value: \"%s\": %s in body must be of type %s",
			      type_name(x), field(v), "anyOf");
	}
	if (jv_get_kind(one) == JV_KIND_ARRAY) {
		int ok = 0;

		jv_array_foreach(one, i, s) {
			ok += satisfies(x, s);
			jv_free(s);
		}
		if (ok != 1)
			cause(v, "FieldValueInvalid", field(v), "Invalid value: \"%s\": %s in body must validate one and only one schema (oneOf)",
			      type_name(x), field(v));
	}
	if (jv_get_kind(not) == JV_KIND_OBJECT && satisfies(x, not))
		cause(v, "FieldValueInvalid", field(v), "Invalid value: \"%s\": %s in body should not validate the schema",
		      type_name(x), field(v));
	jv_free(all);
	jv_free(any);
	jv_free(one);
	jv_free(not);
}

/* x consumed, schema borrowed. */
static void validate(struct val *v, jv x, jv schema)
{
	if (jv_is_valid(v->old) && jv_equal(jv_copy(v->old), jv_copy(x))) {
		/* the stored value, unchanged by this write: not judged again (ratcheting) */
		jv_free(x);
		return;
	}
	jv type = sget(schema, "type"), en = sget(schema, "enum");
	int ios = sflag(schema, "x-kubernetes-int-or-string");
	const char *f = field(v);

	if (jv_get_kind(schema) != JV_KIND_OBJECT)
		goto out;
	if (jv_get_kind(x) == JV_KIND_NULL && sflag(schema, "nullable"))
		goto out;
	if ((jv_get_kind(type) == JV_KIND_STRING && !type_ok(jv_string_value(type), x, ios)) ||
	    (ios && !type_ok("", x, 1))) {
		const char *want = ios ? "integer-or-string" : jv_string_value(type);

		if (ios) {
			cause(v, "FieldValueTypeInvalid", f, "Invalid value: \"%s\": %s in body must be of type %s: \"%s\"",
			      type_name(x), f, "integer,string", type_name(x));
		} else {
			cause(v, "FieldValueTypeInvalid", f, "Invalid value: \"%s\": %s in body must be of type %s: \"%s\"",
			      type_name(x), f, want, type_name(x));
		}
		goto out;
	}
	if (jv_get_kind(en) == JV_KIND_ARRAY) {
		int found = 0;
		struct kop_buf b = KOP_BUF_INIT;

		jv_array_foreach(en, i, e) {
			jv h;

			if (!found)
				found = jv_equal(jv_copy(e), jv_copy(x));
			kop_buf_addf(&b, "%s%s", i ? ", " : "", show(e, &h));
			jv_free(h);
			jv_free(e);
		}
		if (!found) {
			jv h;

			cause(v, "FieldValueNotSupported", f, "Unsupported value: %s: supported values: %s", show(x, &h),
			      b.buf ? b.buf : "");
			jv_free(h);
		}
		kop_buf_release(&b);
	}
	switch (jv_get_kind(x)) {
	case JV_KIND_NUMBER:
		number_checks(v, x, schema);
		break;
	case JV_KIND_STRING:
		string_checks(v, x, schema);
		break;
	case JV_KIND_ARRAY:
		array_checks(v, x, schema);
		break;
	case JV_KIND_OBJECT:
		object_checks(v, x, schema);
		break;
	default:
		break;
	}
	logic_checks(v, x, schema);
out:
	jv_free(type);
	jv_free(en);
	jv_free(x);
}

jv kop_schema_validate(jv obj, jv schema)
{
	return kop_schema_validate_update(obj, jv_invalid(), schema);
}

jv kop_schema_validate_update(jv obj, jv old, jv schema)
{
	struct val v = { jv_array(), KOP_BUF_INIT, old };

	kop_buf_adds(&v.path, "");
	if (jv_get_kind(obj) == JV_KIND_OBJECT) {
		/* the root's apiVersion/kind/metadata are ObjectMeta's business, not the schema's */
		obj = jv_object_delete(obj, jv_string("apiVersion"));
		obj = jv_object_delete(obj, jv_string("kind"));
		obj = jv_object_delete(obj, jv_string("metadata"));
		jv props = sget(schema, "properties");
		jv root = jv_copy(schema);

		if (jv_get_kind(props) == JV_KIND_OBJECT) {
			props = jv_object_delete(props, jv_string("metadata"));
			props = jv_object_delete(props, jv_string("apiVersion"));
			props = jv_object_delete(props, jv_string("kind"));
			root = jv_object_set(root, jv_string("properties"), props);
		} else {
			jv_free(props);
		}
		validate(&v, obj, root);
		jv_free(root);
	} else {
		validate(&v, obj, schema);
	}
	kop_buf_release(&v.path);
	jv_free(v.old);
	return v.causes;
}

/* ---- list semantics ---- */

static jv listinfo_walk(jv li, jv schema, struct kop_buf *pat)
{
	jv lt = sget(schema, "x-kubernetes-list-type"), mt = sget(schema, "x-kubernetes-map-type");

	if (jv_get_kind(lt) == JV_KIND_STRING && pat->len) {
		jv e = jv_object_set(jv_object(), jv_string("type"), jv_copy(lt));

		if (!strcmp(jv_string_value(lt), "map")) {
			jv keys = sget(schema, "x-kubernetes-list-map-keys");

			e = jv_object_set(e, jv_string("keys"), jv_get_kind(keys) == JV_KIND_ARRAY ? keys :
					  (jv_free(keys), jv_array()));
			/* keys the server defaults (as kube-openapi's defaults on list-map keys) */
			jv items = sget(schema, "items"), ip = sget(items, "properties"), defs = jv_object();
			jv keys2 = jv_object_get(jv_copy(e), jv_string("keys"));

			jv_array_foreach(keys2, i, k) {
				jv ks = jv_get_kind(ip) == JV_KIND_OBJECT ? jv_object_get(jv_copy(ip), jv_copy(k)) : jv_invalid();
				jv d = sget(ks, "default");

				if (jv_is_valid(d))
					defs = jv_object_set(defs, jv_copy(k), d);
				else
					jv_free(d);
				jv_free(ks);
				jv_free(k);
			}
			if (jv_object_length(jv_copy(defs)))
				e = jv_object_set(e, jv_string("defaults"), defs);
			else
				jv_free(defs);
			jv_free(keys2);
			jv_free(items);
			jv_free(ip);
		}
		li = jv_object_set(li, jv_string(pat->buf), e);
	} else if (jv_get_kind(mt) == JV_KIND_STRING && !strcmp(jv_string_value(mt), "atomic") && pat->len) {
		li = jv_object_set(li, jv_string(pat->buf),
				   jv_object_set(jv_object(), jv_string("type"), jv_string("atomic")));
	}
	jv_free(lt);
	jv_free(mt);

	size_t mark = pat->len;
	jv props = sget(schema, "properties");
	if (jv_get_kind(props) == JV_KIND_OBJECT) {
		jv_object_foreach(props, k, ps) {
			if (pat->len)
				kop_buf_adds(pat, ".");
			kop_buf_adds(pat, jv_string_value(k));
			li = listinfo_walk(li, ps, pat);
			pat->len = mark;
			pat->buf[mark] = '\0';
			jv_free(k);
			jv_free(ps);
		}
	}
	jv_free(props);
	jv items = sget(schema, "items");
	if (jv_get_kind(items) == JV_KIND_OBJECT) {
		kop_buf_adds(pat, "[]");
		li = listinfo_walk(li, items, pat);
		pat->len = mark;
		pat->buf[mark] = '\0';
	}
	jv_free(items);
	return li;
}

jv kop_schema_listinfo(jv schema)
{
	struct kop_buf pat = KOP_BUF_INIT;
	jv li = jv_object();

	li = jv_object_set(li, jv_string("metadata.finalizers"),
			   jv_object_set(jv_object(), jv_string("type"), jv_string("set")));
	li = jv_object_set(li, jv_string("metadata.ownerReferences"),
			   jv_object_set(jv_object_set(jv_object(), jv_string("type"), jv_string("map")),
					 jv_string("keys"), JV_ARRAY(jv_string("uid"))));
	li = jv_object_set(li, jv_string("metadata.managedFields"),
			   jv_object_set(jv_object(), jv_string("type"), jv_string("atomic")));
	kop_buf_adds(&pat, "");
	li = listinfo_walk(li, schema, &pat);
	kop_buf_release(&pat);
	return li;
}

char *kop_schema_invalid_message(const char *kind_group, jv name, jv causes)
{
	struct kop_buf b = KOP_BUF_INIT;
	int n = jv_get_kind(causes) == JV_KIND_ARRAY ? jv_array_length(jv_copy(causes)) : 0;

	kop_buf_addf(&b, "%s ", kind_group);
	if (jv_get_kind(name) == JV_KIND_STRING)
		kop_buf_add_quoted(&b, jv_string_value(name), (size_t)jv_string_length_bytes(jv_copy(name)));
	else
		kop_buf_adds(&b, "\"\"");
	jv_free(name);
	kop_buf_adds(&b, " is invalid: ");
	if (n != 1)
		kop_buf_adds(&b, "[");
	if (n) {
		jv_array_foreach(causes, i, c) {
			jv f = jv_object_get(jv_copy(c), jv_string("field"));
			jv m = jv_object_get(jv_copy(c), jv_string("message"));

			kop_buf_addf(&b, "%s%s%s%s", i ? ", " : "",
				     jv_get_kind(f) == JV_KIND_STRING ? jv_string_value(f) : "",
				     jv_get_kind(f) == JV_KIND_STRING && jv_string_length_bytes(jv_copy(f)) ? ": " : "",
				     jv_get_kind(m) == JV_KIND_STRING ? jv_string_value(m) : "");
			jv_free(f);
			jv_free(m);
			jv_free(c);
		}
	}
	if (n != 1)
		kop_buf_adds(&b, "]");
	return kop_buf_detach(&b, NULL);
}
