/*
 * Evaluates the CEL tree of cel-priv.h over jv values, with CEL's runtime
 * semantics: an error is a value (an invalid jv with a message) that the
 * operators pass on, except that && and || absorb it when the other side
 * decides (false && error is false, error || true is true); == is typed
 * (values of different types are unequal, never an error); ints are checked
 * for overflow.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <math.h>
#include "kop.h"
#include "cel.h"
#include "cel-priv.h"
#include "banned.h"

static jv eval(const struct cel_node *n, jv vars);

static jv error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static jv error(const char *fmt, ...)
{
	char msg[KOP_ERRLEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return jv_invalid_with_msg(jv_string(msg));
}

/* Whether v is a CEL int (a number with no fraction in int64's range): its value in *i. */
static int is_int(jv v, int64_t *i)
{
	double d;

	if (jv_get_kind(v) != JV_KIND_NUMBER)
		return 0;
	d = jv_number_value(v);
	if (d != floor(d) || d < -CEL_INT_MAX || d > CEL_INT_MAX)
		return 0;
	*i = (int64_t)d;
	return 1;
}

static const char *type_name(jv v)
{
	int64_t i;

	switch (jv_get_kind(v)) {
	case JV_KIND_NULL:
		return "null_type";
	case JV_KIND_TRUE:
	case JV_KIND_FALSE:
		return "bool";
	case JV_KIND_NUMBER:
		return is_int(v, &i) ? "int" : "double";
	case JV_KIND_STRING:
		return "string";
	case JV_KIND_ARRAY:
		return "list";
	case JV_KIND_OBJECT:
		return "map";
	default:
		return "error";
	}
}

static int is_bool(jv v)
{
	return jv_get_kind(v) == JV_KIND_TRUE || jv_get_kind(v) == JV_KIND_FALSE;
}

/* "no such overload": the operator op does not take a (and b, when valid); consumes both. */
static jv no_overload(const char *op, jv a, jv b)
{
	jv e;

	if (jv_is_valid(b))
		e = error("no such overload: %s %s %s", type_name(a), op, type_name(b));
	else
		e = error("no such overload: %s(%s)", op, type_name(a));
	jv_free(a);
	jv_free(b);
	return e;
}

/* && (and 1) or || (and 0), with CEL's commutative absorption of errors. */
static jv eval_logic(const struct cel_node *n, jv vars, int and)
{
	jv a = eval(n->kid[0], jv_copy(vars)), b;
	jv_kind decides = and ? JV_KIND_FALSE : JV_KIND_TRUE;

	if (jv_get_kind(a) == decides) {
		jv_free(vars);
		return a;
	}
	b = eval(n->kid[1], vars);
	if (jv_get_kind(b) == decides) {
		jv_free(a);
		return b;
	}
	if (!jv_is_valid(a)) {
		jv_free(b);
		return a;
	}
	if (!jv_is_valid(b)) {
		jv_free(a);
		return b;
	}
	if (is_bool(a) && is_bool(b)) {
		jv_free(b);
		return a;
	}
	return no_overload(and ? "&&" : "||", a, b);
}

static jv eval_cond(const struct cel_node *n, jv vars)
{
	jv c = eval(n->kid[0], jv_copy(vars));

	if (!jv_is_valid(c)) {
		jv_free(vars);
		return c;
	}
	if (!is_bool(c)) {
		jv_free(vars);
		return no_overload("_?_:_", c, jv_invalid());
	}
	return eval(n->kid[jv_get_kind(c) == JV_KIND_TRUE ? 1 : 2], vars);
}

/* The field name of a select or has() out of map m (consumed); has: whether it is there. */
static jv select_field(jv m, jv name, int has)
{
	if (jv_get_kind(m) != JV_KIND_OBJECT) {
		jv e = error("no such overload: field selection on %s", type_name(m));

		jv_free(m);
		jv_free(name);
		return e;
	}
	if (has) {
		int r = jv_object_has(m, name);

		return jv_bool(r);
	}
	if (!jv_object_has(jv_copy(m), jv_copy(name))) {
		jv e = error("no such key: %s", jv_string_value(name));

		jv_free(m);
		jv_free(name);
		return e;
	}
	return jv_object_get(m, name);
}

static jv index_value(jv a, jv i)
{
	int64_t k;

	if (jv_get_kind(a) == JV_KIND_OBJECT && jv_get_kind(i) == JV_KIND_STRING)
		return select_field(a, i, 0);
	if (jv_get_kind(a) == JV_KIND_OBJECT) {
		jv e = error("no such key: %s", type_name(i));

		jv_free(a);
		jv_free(i);
		return e;
	}
	if (jv_get_kind(a) == JV_KIND_ARRAY && is_int(i, &k)) {
		if (k < 0 || k >= jv_array_length(jv_copy(a))) {
			jv e = error("index out of range: %lld", (long long)k);

			jv_free(a);
			jv_free(i);
			return e;
		}
		jv_free(i);
		return jv_array_get(a, (int)k);
	}
	return no_overload("_[_]", a, i);
}

static jv eval_in(jv x, jv c)
{
	int found = 0;

	if (jv_get_kind(c) == JV_KIND_OBJECT) {
		if (jv_get_kind(x) == JV_KIND_STRING)
			return jv_bool(jv_object_has(c, x));
		jv_free(x);
		jv_free(c);
		return jv_false();
	}
	if (jv_get_kind(c) != JV_KIND_ARRAY)
		return no_overload("in", x, c);
	jv_array_foreach(c, i, item) {
		if (!found && jv_equal(jv_copy(x), jv_copy(item)))
			found = 1;
		jv_free(item);
	}
	jv_free(x);
	jv_free(c);
	return jv_bool(found);
}

/* < <= > >= on ints, doubles, strings and bools; consumes a and b. */
static jv compare(enum cel_op op, jv a, jv b)
{
	static const char *const names[] = { "<", "<=", ">", ">=" };
	const char *name = names[op - CEL_LT];
	double c;

	if (jv_get_kind(a) == JV_KIND_NUMBER && jv_get_kind(b) == JV_KIND_NUMBER) {
		double x = jv_number_value(a), y = jv_number_value(b);

		c = x < y ? -1 : x > y ? 1 : 0;
	} else if (jv_get_kind(a) == JV_KIND_STRING && jv_get_kind(b) == JV_KIND_STRING) {
		c = strcmp(jv_string_value(a), jv_string_value(b));
	} else if (is_bool(a) && is_bool(b)) {
		c = (int)(jv_get_kind(a) == JV_KIND_TRUE) - (int)(jv_get_kind(b) == JV_KIND_TRUE);
	} else {
		return no_overload(name, a, b);
	}
	jv_free(a);
	jv_free(b);
	switch (op) {
	case CEL_LT:
		return jv_bool(c < 0);
	case CEL_LE:
		return jv_bool(c <= 0);
	case CEL_GT:
		return jv_bool(c > 0);
	default:
		return jv_bool(c >= 0);
	}
}

/* + - * / % on two ints, with CEL's overflow and division errors. */
static jv int_arith(enum cel_op op, int64_t x, int64_t y)
{
	int64_t r = 0;
	int over = 0;

	switch (op) {
	case CEL_ADD:
		over = __builtin_add_overflow(x, y, &r);
		break;
	case CEL_SUB:
		over = __builtin_sub_overflow(x, y, &r);
		break;
	case CEL_MUL:
		over = __builtin_mul_overflow(x, y, &r);
		break;
	case CEL_DIV:
	case CEL_MOD:
		if (y == 0)
			return error(op == CEL_DIV ? "division by zero" : "modulus by zero");
		if (x == INT64_MIN && y == -1)
			over = 1;
		else
			r = op == CEL_DIV ? x / y : x % y;
		break;
	default:
		break;
	}
	if (over || r < -CEL_INT_MAX || r > CEL_INT_MAX)
		return error("integer overflow");
	return jv_number((double)r);
}

static jv arith(enum cel_op op, jv a, jv b)
{
	static const char *const names[] = { "+", "-", "*", "/", "%" };
	const char *name = names[op - CEL_ADD];
	int64_t x, y;

	if (is_int(a, &x) && is_int(b, &y)) {
		jv_free(a);
		jv_free(b);
		return int_arith(op, x, y);
	}
	if (jv_get_kind(a) == JV_KIND_NUMBER && jv_get_kind(b) == JV_KIND_NUMBER && op != CEL_MOD) {
		double p = jv_number_value(a), q = jv_number_value(b);

		jv_free(a);
		jv_free(b);
		/* CEL has no mixed int and double arithmetic; a JSON number with a fraction meets only doubles */
		return jv_number(op == CEL_ADD ? p + q : op == CEL_SUB ? p - q : op == CEL_MUL ? p * q : p / q);
	}
	if (op == CEL_ADD && jv_get_kind(a) == JV_KIND_STRING && jv_get_kind(b) == JV_KIND_STRING)
		return jv_string_concat(a, b);
	if (op == CEL_ADD && jv_get_kind(a) == JV_KIND_ARRAY && jv_get_kind(b) == JV_KIND_ARRAY)
		return jv_array_concat(a, b);
	return no_overload(name, a, b);
}

static jv eval_unary(enum cel_op op, jv a)
{
	int64_t i;

	if (op == CEL_NOT) {
		if (!is_bool(a))
			return no_overload("!", a, jv_invalid());
		return jv_bool(jv_get_kind(a) == JV_KIND_FALSE);
	}
	if (is_int(a, &i)) {
		jv_free(a);
		return jv_number((double)-i);
	}
	if (jv_get_kind(a) == JV_KIND_NUMBER)
		return jv_number(-jv_number_value(a));
	return no_overload("-", a, jv_invalid());
}

/* size, startsWith, endsWith, contains: the receiver (or size's argument) r, the argument x. */
static jv call(const char *name, jv r, jv x)
{
	if (!strcmp(name, "size")) {
		jv_kind k = jv_get_kind(r);

		if (k == JV_KIND_STRING)
			return jv_number(jv_string_length_codepoints(r));
		if (k == JV_KIND_ARRAY)
			return jv_number(jv_array_length(r));
		if (k == JV_KIND_OBJECT)
			return jv_number(jv_object_length(r));
		return no_overload("size", r, jv_invalid());
	}
	if (jv_get_kind(r) != JV_KIND_STRING || jv_get_kind(x) != JV_KIND_STRING)
		return no_overload(name, r, x);
	const char *s = jv_string_value(r), *t = jv_string_value(x);
	size_t sl = (size_t)jv_string_length_bytes(jv_copy(r)), tl = (size_t)jv_string_length_bytes(jv_copy(x));
	int res;

	if (!strcmp(name, "startsWith"))
		res = tl <= sl && !memcmp(s, t, tl);
	else if (!strcmp(name, "endsWith"))
		res = tl <= sl && !memcmp(s + sl - tl, t, tl);
	else
		res = tl == 0 || (tl <= sl && memmem(s, sl, t, tl) != NULL);
	jv_free(r);
	jv_free(x);
	return jv_bool(res);
}

/* The list or map literal n. */
static jv eval_collection(const struct cel_node *n, jv vars)
{
	jv out = n->op == CEL_LIST ? jv_array() : jv_object();
	size_t i;

	for (i = 0; i < n->n; i++) {
		jv v = eval(n->kid[i], jv_copy(vars));

		if (!jv_is_valid(v)) {
			jv_free(out);
			jv_free(vars);
			return v;
		}
		if (n->op == CEL_LIST) {
			out = jv_array_append(out, v);
			continue;
		}
		jv val = eval(n->kid[++i], jv_copy(vars));

		if (!jv_is_valid(val) || jv_get_kind(v) != JV_KIND_STRING ||
		    jv_object_has(jv_copy(out), jv_copy(v))) {
			jv e = !jv_is_valid(val) ? val
				: jv_get_kind(v) != JV_KIND_STRING ? error("unsupported: map key of type %s", type_name(v))
				: error("repeated key: %s", jv_string_value(v));

			if (jv_is_valid(val))
				jv_free(val);
			jv_free(v);
			jv_free(out);
			jv_free(vars);
			return e;
		}
		out = jv_object_set(out, v, val);
	}
	jv_free(vars);
	return out;
}

/*
 * A macro over the items of a list or the keys of a map (CEL's comprehensions): all and exists
 * absorb errors as && and || do (all is false when any item gives false, else an error when any
 * gives one); exists_one, filter and map pass the first error on.
 */
static jv eval_macro(const struct cel_node *n, jv vars)
{
	static const char *const names[] = { "all", "exists", "exists_one", "filter", "map" };
	const char *name = names[n->op - CEL_ALL];
	int all_exists = n->op == CEL_ALL || n->op == CEL_EXISTS, transform = n->op == CEL_MAPLIST && n->n == 2;
	jv_kind decides = n->op == CEL_ALL ? JV_KIND_FALSE : JV_KIND_TRUE;
	jv range = eval(n->kid[0], jv_copy(vars)), items, out = jv_array(), err = jv_invalid();
	int decided = 0, have_err = 0, count = 0, len, i;

	if (!jv_is_valid(range)) {
		jv_free(vars);
		jv_free(out);
		return range;
	}
	if (jv_get_kind(range) == JV_KIND_OBJECT) {
		items = jv_keys(range);
	} else if (jv_get_kind(range) == JV_KIND_ARRAY) {
		items = range;
	} else {
		jv e = error("no such overload: %s on %s", name, type_name(range));

		jv_free(range);
		jv_free(vars);
		jv_free(out);
		return e;
	}
	len = jv_array_length(jv_copy(items));
	for (i = 0; i < len && !decided && !(have_err && !all_exists); i++) {
		jv item = jv_array_get(jv_copy(items), i);
		jv scope = jv_object_set(jv_copy(vars), jv_copy(n->val), jv_copy(item));
		jv r = eval(n->kid[1], jv_copy(scope));

		if (jv_is_valid(r) && !transform && !is_bool(r))
			r = no_overload(name, r, jv_invalid());
		if (!jv_is_valid(r)) {
			if (!have_err) {
				err = r;
				have_err = 1;
			} else {
				jv_free(r);
			}
		} else if (all_exists) {
			decided = jv_get_kind(r) == decides;
			jv_free(r);
		} else if (n->op == CEL_EXISTS_ONE) {
			count += jv_get_kind(r) == JV_KIND_TRUE;
			jv_free(r);
		} else if (n->op == CEL_FILTER) {
			if (jv_get_kind(r) == JV_KIND_TRUE)
				out = jv_array_append(out, jv_copy(item));
			jv_free(r);
		} else if (transform) {
			out = jv_array_append(out, r);
		} else {
			/* map(x, p, t): t of the items p holds for */
			if (jv_get_kind(r) == JV_KIND_TRUE) {
				jv t = eval(n->kid[2], jv_copy(scope));

				if (jv_is_valid(t)) {
					out = jv_array_append(out, t);
				} else {
					err = t;
					have_err = 1;
				}
			}
			jv_free(r);
		}
		jv_free(scope);
		jv_free(item);
	}
	jv_free(items);
	jv_free(vars);
	if (decided) {
		jv_free(err);
		jv_free(out);
		return jv_bool(n->op == CEL_EXISTS);
	}
	if (have_err) {
		jv_free(out);
		return err;
	}
	switch (n->op) {
	case CEL_ALL:
		jv_free(out);
		return jv_true();
	case CEL_EXISTS:
		jv_free(out);
		return jv_false();
	case CEL_EXISTS_ONE:
		jv_free(out);
		return jv_bool(count == 1);
	default:
		return out;
	}
}

/* Evaluates the first k kids of n into v[]: 0, or -1 with the first error in *err (the rest freed). */
static int eval_kids(const struct cel_node *n, size_t from, size_t k, jv vars, jv *v, jv *err)
{
	size_t i, j;

	for (i = 0; i < k; i++) {
		v[i] = n->kid[from + i] ? eval(n->kid[from + i], jv_copy(vars)) : jv_invalid();
		if (n->kid[from + i] && !jv_is_valid(v[i])) {
			*err = v[i];
			for (j = 0; j < i; j++)
				jv_free(v[j]);
			return -1;
		}
	}
	return 0;
}

static jv eval(const struct cel_node *n, jv vars)
{
	jv v[3], e;

	switch (n->op) {
	case CEL_LIT:
		jv_free(vars);
		return jv_copy(n->val);
	case CEL_IDENT:
		if (jv_get_kind(vars) != JV_KIND_OBJECT || !jv_object_has(jv_copy(vars), jv_copy(n->val))) {
			jv_free(vars);
			return error("undeclared reference to '%s'", jv_string_value(n->val));
		}
		return jv_object_get(vars, jv_copy(n->val));
	case CEL_AND:
	case CEL_OR:
		return eval_logic(n, vars, n->op == CEL_AND);
	case CEL_COND:
		return eval_cond(n, vars);
	case CEL_LIST:
	case CEL_MAP:
		return eval_collection(n, vars);
	case CEL_ALL:
	case CEL_EXISTS:
	case CEL_EXISTS_ONE:
	case CEL_FILTER:
	case CEL_MAPLIST:
		return eval_macro(n, vars);
	default:
		break;
	}
	if (eval_kids(n, 0, n->n, vars, v, &e) < 0) {
		jv_free(vars);
		return e;
	}
	jv_free(vars);
	switch (n->op) {
	case CEL_SELECT:
	case CEL_HAS:
		return select_field(v[0], jv_copy(n->val), n->op == CEL_HAS);
	case CEL_INDEX:
		return index_value(v[0], v[1]);
	case CEL_CALL:
		if (n->n == 2 && !n->kid[0])
			return call(jv_string_value(n->val), v[1], jv_invalid());
		return call(jv_string_value(n->val), v[0], n->n > 1 ? v[1] : jv_invalid());
	case CEL_NOT:
	case CEL_NEG:
		return eval_unary(n->op, v[0]);
	case CEL_EQ:
	case CEL_NE:
		return jv_bool(jv_equal(v[0], v[1]) == (n->op == CEL_EQ));
	case CEL_LT:
	case CEL_LE:
	case CEL_GT:
	case CEL_GE:
		return compare(n->op, v[0], v[1]);
	case CEL_IN:
		return eval_in(v[0], v[1]);
	default:
		return arith(n->op, v[0], v[1]);
	}
}

jv kop_cel_eval(const struct kop_cel *p, jv vars)
{
	return eval(p->root, vars);
}
