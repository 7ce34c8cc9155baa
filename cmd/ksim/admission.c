/*
 * ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1) as
 * kube-apiserver's ValidatingAdmissionPolicy plugin applies them to a write,
 * after RBAC and the object's own validation: each binding (in name order)
 * names a policy; a policy whose matchConstraints.resourceRules match the
 * request (scope included) and whose matchConditions all hold runs its
 * validations in order, with request, object, oldObject and namespaceObject
 * bound, in the CEL subset of lib/cel.h. The first false one refuses the
 * request (when the binding's validationActions hold Deny) with the Status
 * kube-apiserver answers; an evaluation error refuses it too under
 * failurePolicy Fail. Writes of the policies and bindings themselves are
 * exempt, as kube-apiserver exempts them.
 *
 * matchPolicy Equivalent (the API's default) matches a request also through
 * another version of its resource (the same storage): for excludeResourceRules
 * ksim does so; a resourceRules match only through another version would need
 * the object converted to it, which ksim does not do: such a policy is refused
 * when written, and a request it would match that way (a CRD version added
 * later) is refused as kube-apiserver refuses a policy it cannot configure.
 *
 * A policy or binding that uses what ksim does not implement (params,
 * variables, messageExpression, auditAnnotations, selectors, matchResources,
 * CEL outside the subset) is refused when written, so that no policy is
 * silently half enforced; so are the values kube-apiserver refuses (scope,
 * matchPolicy, reason).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kop.h"
#include "cel.h"
#include "ksim.h"
#include "api.h"
#include "banned.h"

#define VAP_GR "validatingadmissionpolicies.admissionregistration.k8s.io"
#define VAPB_GR "validatingadmissionpolicybindings.admissionregistration.k8s.io"

static const char *const cel_names[] = { "request", "object", "oldObject", "namespaceObject", NULL };

static jv path(jv v, const char *a, const char *b)
{
	jv p = b ? JV_ARRAY(jv_string(a), jv_string(b)) : JV_ARRAY(jv_string(a));

	return jv_getpath(v, p);
}

static int str_is(jv v, const char *s)
{
	return jv_get_kind(v) == JV_KIND_STRING && !strcmp(jv_string_value(v), s);
}

/* Whether list (an array of strings; consumed) holds s or "*". */
static int list_has(jv list, const char *s)
{
	int found = 0;

	if (jv_get_kind(list) == JV_KIND_ARRAY) {
		jv_array_foreach(list, i, e) {
			found |= str_is(e, s) || str_is(e, "*");
			jv_free(e);
		}
	}
	jv_free(list);
	return found;
}

/* Whether a resources entry matches resource (and subresource sub, or NULL). */
static int resource_matches(const char *entry, const char *resource, const char *sub)
{
	const char *slash = strchr(entry, '/');
	size_t rl = slash ? (size_t)(slash - entry) : strlen(entry);

	if (!sub)
		return !slash && (!strcmp(entry, "*") || !strcmp(entry, resource));
	if (!slash)
		return 0;
	return ((rl == 1 && entry[0] == '*') || (strlen(resource) == rl && !strncmp(entry, resource, rl))) &&
	       (!strcmp(slash + 1, "*") || !strcmp(slash + 1, sub));
}

struct request {
	const struct ksim_type *t;
	const char *op, *ns, *name, *sub;
};

static int is_namespaces(const struct ksim_type *t)
{
	return !*t->group && !strcmp(t->resource, "namespaces");
}

/* Whether rule's apiGroups, apiVersions and resources take t's resource (and subresource sub, or NULL). */
static int rule_takes(jv rule, const struct ksim_type *t, const char *sub)
{
	jv res = path(jv_copy(rule), "resources", NULL);
	int ok = 0;

	if (!list_has(path(jv_copy(rule), "apiGroups", NULL), t->group) ||
	    !list_has(path(jv_copy(rule), "apiVersions", NULL), t->version)) {
		jv_free(res);
		return 0;
	}
	if (jv_get_kind(res) == JV_KIND_ARRAY) {
		jv_array_foreach(res, i, e) {
			if (jv_get_kind(e) == JV_KIND_STRING)
				ok |= resource_matches(jv_string_value(e), t->resource, sub);
			jv_free(e);
		}
	}
	jv_free(res);
	return ok;
}

/*
 * A rule's scope, as kube-apiserver's rule matcher reads it: Namespaced, a
 * request in a namespace (never of a Namespace itself); Cluster, the others;
 * "*" or none, all.
 */
static int scope_matches(jv rule, const struct request *rq)
{
	jv scope = path(jv_copy(rule), "scope", NULL);
	int ok = 1;

	if (str_is(scope, "Namespaced"))
		ok = !is_namespaces(rq->t) && *rq->ns;
	else if (str_is(scope, "Cluster"))
		ok = is_namespaces(rq->t) || !*rq->ns;
	jv_free(scope);
	return ok;
}

/* Whether rule matches the request, taking t for its resource (the request's own, or an equivalent). */
static int rule_matches(jv rule, const struct request *rq, const struct ksim_type *t)
{
	jv names;
	int ok;

	if (!list_has(path(jv_copy(rule), "operations", NULL), rq->op) || !scope_matches(rule, rq))
		return 0;
	ok = rule_takes(rule, t, rq->sub);
	names = path(jv_copy(rule), "resourceNames", NULL);
	if (ok && jv_get_kind(names) == JV_KIND_ARRAY && jv_array_length(jv_copy(names)) > 0) {
		ok = 0;
		jv_array_foreach(names, i, e) {
			ok |= str_is(e, rq->name);
			jv_free(e);
		}
	}
	jv_free(names);
	return ok;
}

/* Whether any rule of rules (borrowed) matches, taking t for the request's resource. */
static int rules_match(jv rules, const struct request *rq, const struct ksim_type *t)
{
	int ok = 0;

	if (jv_get_kind(rules) != JV_KIND_ARRAY)
		return 0;
	jv_array_foreach(rules, i, r) {
		ok |= rule_matches(r, rq, t);
		jv_free(r);
	}
	return ok;
}

/* Another served version of t's resource (the same storage) that a rule of rules matches, or NULL. */
static const struct ksim_type *equivalent_match(jv rules, const struct request *rq)
{
	const struct ksim_type *e;

	for (e = ksim_types(); e; e = e->next)
		if (e != rq->t && e->served && !strcmp(e->gr, rq->t->gr) && rules_match(rules, rq, e))
			return e;
	return NULL;
}

/* Whether matchConstraints (borrowed) asks for matchPolicy Equivalent: its value, or the API's default. */
static int equivalent_policy(jv mc)
{
	jv mp = path(jv_copy(mc), "matchPolicy", NULL);
	int eq = !str_is(mp, "Exact");

	jv_free(mp);
	return eq;
}

/*
 * 1 when the policy applies to the request, 0 when not, -1 when its resourceRules match only another
 * version of the resource (matchPolicy Equivalent), *equiv that version: ksim does not convert.
 */
static int policy_matches(jv policy, const struct request *rq, const struct ksim_type **equiv)
{
	jv mc = path(jv_copy(policy), "spec", "matchConstraints");
	jv inc = path(jv_copy(mc), "resourceRules", NULL), exc = path(jv_copy(mc), "excludeResourceRules", NULL);
	int eq = equivalent_policy(mc), ok;

	if (rules_match(exc, rq, rq->t) || (eq && equivalent_match(exc, rq)))
		ok = 0;
	else if (rules_match(inc, rq, rq->t))
		ok = 1;
	else
		ok = eq && (*equiv = equivalent_match(inc, rq)) ? -1 : 0;
	jv_free(mc);
	jv_free(inc);
	jv_free(exc);
	return ok;
}

/* An expression's value as a bool: 1, 0, or -1 with *msg (malloc'd) saying why not. */
static int eval_bool(const char *expr, jv vars, char **msg)
{
	char err[KOP_ERRLEN];
	struct kop_cel *p = kop_cel_parse(expr, cel_names, err);
	struct kop_buf b = KOP_BUF_INIT;
	jv v;

	if (!p) {
		jv_free(vars);
		kop_buf_addf(&b, "compilation error: ksim's CEL subset: %s", err);
		*msg = kop_buf_detach(&b, NULL);
		return -1;
	}
	v = kop_cel_eval(p, vars);
	kop_cel_free(p);
	if (jv_get_kind(v) == JV_KIND_TRUE || jv_get_kind(v) == JV_KIND_FALSE)
		return jv_get_kind(v) == JV_KIND_TRUE;
	if (jv_is_valid(v)) {
		kop_buf_addf(&b, "expression '%s' resulted in error: the result is not a bool", expr);
		jv_free(v);
	} else {
		jv m = jv_invalid_get_msg(v);

		kop_buf_addf(&b, "expression '%s' resulted in error: %s", expr,
			     jv_get_kind(m) == JV_KIND_STRING ? jv_string_value(m) : "unknown");
		jv_free(m);
	}
	*msg = kop_buf_detach(&b, NULL);
	return -1;
}

/*
 * A refusal, as kube-apiserver's plugin words it, into *status; returns its code: that of the reason
 * (kube-apiserver's reasonToCode: Forbidden 403, Unauthorized 401, RequestEntityTooLarge 413, Invalid
 * and any other 422; a policy's reason is one of Forbidden, Invalid, RequestEntityTooLarge, checked when
 * written). binding NULL: a policy that cannot be configured, named without one.
 */
static int deny(const struct request *rq, const char *policy, const char *binding, const char *msg, const char *reason,
		jv *status)
{
	struct kop_buf m = KOP_BUF_INIT, full = KOP_BUF_INIT;
	char *gr = gr_string(rq->t);
	int code;
	jv d;

	if (!reason || !*reason)
		reason = "Invalid";
	code = !strcmp(reason, "Forbidden") ? 403 : !strcmp(reason, "Unauthorized") ? 401
	       : !strcmp(reason, "RequestEntityTooLarge") ? 413 : 422;
	if (binding)
		kop_buf_addf(&m, "ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s", policy, binding, msg);
	else
		kop_buf_addf(&m, "ValidatingAdmissionPolicy '%s' denied request: %s", policy, msg);
	if (rq->name && *rq->name)
		kop_buf_addf(&full, "%s \"%s\" is forbidden: %s", gr, rq->name, m.buf);
	else
		kop_buf_addf(&full, "%s is forbidden: %s", gr, m.buf);
	d = details(rq->t, rq->name && *rq->name ? rq->name : NULL);
	d = jv_object_set(d, jv_string("causes"), JV_ARRAY(JV_OBJECT(jv_string("message"), jv_string(m.buf))));
	*status = ksim_status(code, reason, full.buf, d);
	kop_buf_release(&m);
	kop_buf_release(&full);
	free(gr);
	return code;
}

static int warn_or_deny(const struct request *rq, jv binding, const char *policy, const char *msg, const char *reason,
			jv *warnings, jv *status)
{
	jv actions = path(jv_copy(binding), "spec", "validationActions");
	const char *bname = ksim_str(binding, "metadata.name");
	int denies = 0, warns = 0;

	if (jv_get_kind(actions) == JV_KIND_ARRAY) {
		jv_array_foreach(actions, i, a) {
			denies |= str_is(a, "Deny");
			warns |= str_is(a, "Warn");
			jv_free(a);
		}
	}
	jv_free(actions);
	if (warns && warnings) {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "Validation failed for ValidatingAdmissionPolicy '%s' with binding '%s': %s", policy,
			     bname ? bname : "", msg);
		*warnings = jv_array_append(*warnings, jv_string(b.buf));
		kop_buf_release(&b);
	}
	return denies ? deny(rq, policy, bname ? bname : "", msg, reason, status) : 0;
}

/* One binding's policy on the request: 0, or the code of a refusal with *status. */
static int apply_policy(const struct request *rq, jv binding, jv policy, jv vars, jv *warnings, jv *status)
{
	const char *pname = ksim_str(policy, "metadata.name");
	jv fp = path(jv_copy(policy), "spec", "failurePolicy");
	int fail = !str_is(fp, "Ignore"), code = 0;
	jv conds = path(jv_copy(policy), "spec", "matchConditions");
	jv vals = path(jv_copy(policy), "spec", "validations");
	char *msg = NULL;

	jv_free(fp);
	if (jv_get_kind(conds) == JV_KIND_ARRAY) {
		jv_array_foreach(conds, i, c) {
			const char *e = ksim_str(c, "expression");
			int r = eval_bool(e ? e : "", jv_copy(vars), &msg);

			jv_free(c);
			if (r == 0 || (r < 0 && !fail))
				goto out;
			if (r < 0) {
				code = warn_or_deny(rq, binding, pname, msg, NULL, warnings, status);
				goto out;
			}
		}
	}
	if (jv_get_kind(vals) == JV_KIND_ARRAY) {
		jv_array_foreach(vals, i, v) {
			const char *e = ksim_str(v, "expression"), *m = ksim_str(v, "message");
			int r = eval_bool(e ? e : "", jv_copy(vars), &msg);

			if (r == 0) {
				struct kop_buf b = KOP_BUF_INIT;
				const char *s = e ? e : "";

				if (m && *m) {
					kop_buf_adds(&b, m);
				} else {
					size_t n;

					while (*s == ' ' || *s == '\n' || *s == '\t')
						s++;
					n = strlen(s);
					while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\t'))
						n--;
					kop_buf_adds(&b, "failed expression: ");
					kop_buf_add(&b, s, n);
				}
				code = warn_or_deny(rq, binding, pname, b.buf, ksim_str(v, "reason"), warnings, status);
				kop_buf_release(&b);
			} else if (r < 0) {
				if (fail)
					code = warn_or_deny(rq, binding, pname, msg, NULL, warnings, status);
				free(msg);
				msg = NULL;
			}
			jv_free(v);
			if (code)
				break;
		}
	}
out:
	free(msg);
	jv_free(conds);
	jv_free(vals);
	return code;
}

static int collect(jv obj, const char *key, void *data)
{
	jv *all = data;

	*all = jv_array_append(*all, jv_copy(obj));
	return 0;
}

static jv request_var(const struct request *rq, const char *user, const char *const *groups, int dry)
{
	jv g = jv_array(), ui;

	for (size_t i = 0; groups && groups[i]; i++)
		g = jv_array_append(g, jv_string(groups[i]));
	ui = JV_OBJECT(jv_string("username"), jv_string(user ? user : ""), jv_string("groups"), g);
	return JV_OBJECT(jv_string("kind"), JV_OBJECT(jv_string("group"), jv_string(rq->t->group),
						      jv_string("version"), jv_string(rq->t->version),
						      jv_string("kind"), jv_string(rq->t->kind)),
			 jv_string("resource"), JV_OBJECT(jv_string("group"), jv_string(rq->t->group),
							  jv_string("version"), jv_string(rq->t->version),
							  jv_string("resource"), jv_string(rq->t->resource)),
			 jv_string("subResource"), jv_string(rq->sub ? rq->sub : ""),
			 jv_string("name"), jv_string(rq->name ? rq->name : ""),
			 jv_string("namespace"), jv_string(rq->ns ? rq->ns : ""),
			 jv_string("operation"), jv_string(rq->op),
			 jv_string("userInfo"), ui,
			 jv_string("dryRun"), jv_bool(dry));
}

/*
 * A policy that matches the request only through another version of its resource: refused under
 * failurePolicy Fail as kube-apiserver refuses a policy it cannot configure (its object not converted),
 * admitted under Ignore.
 */
static int unconverted(const struct request *rq, jv policy, const struct ksim_type *equiv, jv *status)
{
	jv fp = path(jv_copy(policy), "spec", "failurePolicy");
	struct kop_buf m = KOP_BUF_INIT;
	int code = 0;

	if (!str_is(fp, "Ignore")) {
		kop_buf_addf(&m, "failed to configure policy: failed to convert object version: ksim does not convert %s %s "
			     "to %s, which matchPolicy Equivalent matches it through (use matchPolicy: Exact)",
			     rq->t->api_version, rq->t->resource, equiv->api_version);
		code = deny(rq, ksim_str(policy, "metadata.name"), NULL, m.buf, NULL, status);
		kop_buf_release(&m);
	}
	jv_free(fp);
	return code;
}

int ksim_admit(const struct ksim_type *t, const char *op, const char *ns, const char *name, const char *sub,
	       jv object, jv old, const struct wopts *o, jv *status)
{
	/* (a Namespace's own request is in the namespace it names, but for its create: kube-apiserver's attributes) */
	struct request rq = { t, op, is_namespaces(t) ? (strcmp(op, "CREATE") && name ? name : "")
					 : (t->flags & KT_NAMESPACED) && ns ? ns : "", name, sub };
	jv bindings = jv_array(), vars = jv_invalid();
	int code = 0;

	if (!strcmp(t->gr, VAP_GR) || !strcmp(t->gr, VAPB_GR)) {
		jv_free(bindings);
		return 0;
	}
	ksim_store_each(VAPB_GR, NULL, NULL, collect, &bindings);
	jv_array_foreach(bindings, i, b) {
		const char *pname = ksim_str(b, "spec.policyName");
		jv policy = pname ? ksim_store_get(VAP_GR, "", pname) : jv_invalid();
		const struct ksim_type *equiv = NULL;
		int m = !code && jv_is_valid(policy) ? policy_matches(policy, &rq, &equiv) : 0;

		if (m < 0)
			code = unconverted(&rq, policy, equiv, status);
		if (m > 0) {
			if (!jv_is_valid(vars)) {
				/* (the namespace of a Namespace's request is not its namespaceObject: null) */
				jv nso = *rq.ns && !is_namespaces(t) ? ksim_store_get("namespaces", "", rq.ns) : jv_invalid();

				vars = JV_OBJECT(jv_string("request"), request_var(&rq, o->user, o->groups, o->dry_run),
						 jv_string("object"), jv_copy(object), jv_string("oldObject"),
						 jv_copy(old), jv_string("namespaceObject"),
						 jv_is_valid(nso) ? jv_copy(nso) : jv_null());
			}
			code = apply_policy(&rq, b, policy, vars, o->warnings, status);
		}
		jv_free(b);
	}
	jv_free(bindings);
	jv_free(vars);
	return code;
}

/* A cause for field, with what ksim does not implement there. */
static jv unsupported(jv causes, const char *field, const char *what)
{
	struct kop_buf b = KOP_BUF_INIT;

	kop_buf_addf(&b, "Unsupported value: ksim does not implement %s", what);
	causes = jv_array_append(causes, cause("FieldValueNotSupported", b.buf, field));
	kop_buf_release(&b);
	return causes;
}

/* Whether v (consumed) is absent, null or empty. */
static int empty(jv v)
{
	int e;

	switch (jv_get_kind(v)) {
	case JV_KIND_OBJECT:
		e = jv_object_length(v) == 0;
		break;
	case JV_KIND_ARRAY:
		e = jv_array_length(v) == 0;
		break;
	case JV_KIND_INVALID:
	case JV_KIND_NULL:
		jv_free(v);
		e = 1;
		break;
	default:
		jv_free(v);
		e = 0;
	}
	return e;
}

/* The expressions of list field (validations, matchConditions) that ksim's subset cannot parse. */
static jv check_expressions(jv causes, jv spec, const char *field)
{
	jv list = path(jv_copy(spec), field, NULL);

	if (jv_get_kind(list) != JV_KIND_ARRAY) {
		jv_free(list);
		return causes;
	}
	jv_array_foreach(list, i, e) {
		const char *x = ksim_str(e, "expression");
		char err[KOP_ERRLEN], f[128];
		struct kop_cel *p;

		snprintf(f, sizeof(f), "spec.%s[%d].expression", field, i);
		if (!x) {
			causes = jv_array_append(causes, cause("FieldValueRequired", "Required value", f));
		} else if (!(p = kop_cel_parse(x, cel_names, err))) {
			struct kop_buf b = KOP_BUF_INIT;

			kop_buf_adds(&b, "Invalid value: ");
			kop_buf_add_quoted(&b, x, strlen(x));
			kop_buf_addf(&b, ": compilation failed: ksim's CEL subset: %s", err);
			causes = jv_array_append(causes, cause("FieldValueInvalid", b.buf, f));
			kop_buf_release(&b);
		} else {
			kop_cel_free(p);
		}
		snprintf(f, sizeof(f), "spec.%s[%d].messageExpression", field, i);
		if (!empty(path(jv_copy(e), "messageExpression", NULL)))
			causes = unsupported(causes, f, "messageExpression");
		jv_free(e);
	}
	jv_free(list);
	return causes;
}

/* A cause for field holding value, which is none of supported (as kube-apiserver lists them, sorted). */
static jv not_supported(jv causes, const char *field, const char *value, const char *supported)
{
	struct kop_buf b = KOP_BUF_INIT;

	kop_buf_adds(&b, "Unsupported value: ");
	kop_buf_add_quoted(&b, value, strlen(value));
	kop_buf_addf(&b, ": supported values: %s", supported);
	causes = jv_array_append(causes, cause("FieldValueNotSupported", b.buf, field));
	kop_buf_release(&b);
	return causes;
}

/* The value of field (a string; consumed) when it is present and none of the NULL-terminated ok. */
static const char *off_list(jv v, const char *const *ok, char *buf, size_t size)
{
	size_t i;

	if (jv_get_kind(v) != JV_KIND_STRING) {
		int absent = !jv_is_valid(v) || jv_get_kind(v) == JV_KIND_NULL;

		jv_free(v);
		return absent ? NULL : "(not a string)";
	}
	for (i = 0; ok[i] && strcmp(ok[i], jv_string_value(v)); i++)
		;
	snprintf(buf, size, "%s", jv_string_value(v));
	jv_free(v);
	return ok[i] ? NULL : buf;
}

/* The scope of each rule of matchConstraints' list field: "*", Cluster or Namespaced. */
static jv check_scopes(jv causes, jv mc, const char *field)
{
	static const char *const scopes[] = { "*", "Cluster", "Namespaced", NULL };
	jv rules = path(jv_copy(mc), field, NULL);

	if (jv_get_kind(rules) == JV_KIND_ARRAY) {
		jv_array_foreach(rules, i, r) {
			char f[128], v[128];
			const char *bad = off_list(path(jv_copy(r), "scope", NULL), scopes, v, sizeof(v));

			snprintf(f, sizeof(f), "spec.matchConstraints.%s[%d].scope", field, i);
			if (bad)
				causes = not_supported(causes, f, bad, "\"*\", \"Cluster\", \"Namespaced\"");
			jv_free(r);
		}
	}
	jv_free(rules);
	return causes;
}

/*
 * Under matchPolicy Equivalent, a resource (of the types served now) that resourceRules take only
 * through another version of it: ksim would have to convert the object to that version.
 */
static jv check_equivalents(jv causes, jv mc)
{
	jv rules = path(jv_copy(mc), "resourceRules", NULL);
	const struct ksim_type *t, *e;
	int found = 0;

	for (t = ksim_types(); t && !found && jv_get_kind(rules) == JV_KIND_ARRAY; t = t->next) {
		static const char *const subs[] = { NULL, "status", "scale" };

		for (size_t k = 0; t->served && !found && k < sizeof(subs) / sizeof(subs[0]); k++) {
			int takes = 0;

			jv_array_foreach(rules, i, r) {
				takes |= rule_takes(r, t, subs[k]);
				jv_free(r);
			}
			for (e = ksim_types(); e && !takes && !found; e = e->next) {
				if (e == t || !e->served || strcmp(e->gr, t->gr))
					continue;
				jv_array_foreach(rules, i, r) {
					found |= rule_takes(r, e, subs[k]);
					jv_free(r);
				}
				if (found) {
					struct kop_buf b = KOP_BUF_INIT;

					kop_buf_addf(&b, "Unsupported value: ksim does not implement matchPolicy Equivalent "
						     "where it differs from Exact: resourceRules take %s %s%s%s and, through it, "
						     "its equivalent %s %s, to which ksim does not convert (set matchPolicy: "
						     "Exact, and list each version the policy is for)", e->api_version,
						     e->resource, subs[k] ? "/" : "", subs[k] ? subs[k] : "", t->api_version,
						     t->resource);
					causes = jv_array_append(causes, cause("FieldValueNotSupported", b.buf,
									       "spec.matchConstraints.matchPolicy"));
					kop_buf_release(&b);
				}
			}
		}
	}
	jv_free(rules);
	return causes;
}

/* The reason of each validation: Forbidden, Invalid or RequestEntityTooLarge, as kube-apiserver allows. */
static jv check_reasons(jv causes, jv spec)
{
	static const char *const reasons[] = { "Forbidden", "Invalid", "RequestEntityTooLarge", NULL };
	jv list = path(jv_copy(spec), "validations", NULL);

	if (jv_get_kind(list) == JV_KIND_ARRAY) {
		jv_array_foreach(list, i, v) {
			char f[128], val[128];
			const char *bad = off_list(path(jv_copy(v), "reason", NULL), reasons, val, sizeof(val));

			snprintf(f, sizeof(f), "spec.validations[%d].reason", i);
			if (bad)
				causes = not_supported(causes, f, bad,
						       "\"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\"");
			jv_free(v);
		}
	}
	jv_free(list);
	return causes;
}

int ksim_admission_check(const struct ksim_type *t, jv obj, jv *status)
{
	jv spec = path(jv_copy(obj), "spec", NULL), causes = jv_array();
	const char *name = ksim_str(obj, "metadata.name");

	if (!strcmp(t->gr, VAP_GR)) {
		static const char *const no[] = { "paramKind", "variables", "auditAnnotations", NULL };
		jv mc = path(jv_copy(spec), "matchConstraints", NULL);

		for (size_t i = 0; no[i]; i++) {
			char f[64];

			snprintf(f, sizeof(f), "spec.%s", no[i]);
			if (!empty(path(jv_copy(spec), no[i], NULL)))
				causes = unsupported(causes, f, no[i]);
		}
		if (!empty(path(jv_copy(mc), "namespaceSelector", NULL)))
			causes = unsupported(causes, "spec.matchConstraints.namespaceSelector", "namespaceSelector");
		if (!empty(path(jv_copy(mc), "objectSelector", NULL)))
			causes = unsupported(causes, "spec.matchConstraints.objectSelector", "objectSelector");
		if (empty(path(jv_copy(mc), "resourceRules", NULL)))
			causes = jv_array_append(causes, cause("FieldValueRequired", "Required value",
							       "spec.matchConstraints.resourceRules"));
		{
			static const char *const policies[] = { "Equivalent", "Exact", NULL };
			char v[128];
			const char *bad = off_list(path(jv_copy(mc), "matchPolicy", NULL), policies, v, sizeof(v));

			if (bad)
				causes = not_supported(causes, "spec.matchConstraints.matchPolicy", bad,
						       "\"Equivalent\", \"Exact\"");
			else if (equivalent_policy(mc))
				causes = check_equivalents(causes, mc);
		}
		causes = check_scopes(causes, mc, "resourceRules");
		causes = check_scopes(causes, mc, "excludeResourceRules");
		causes = check_reasons(causes, spec);
		jv_free(mc);
		causes = check_expressions(causes, spec, "matchConditions");
		causes = check_expressions(causes, spec, "validations");
	} else if (!strcmp(t->gr, VAPB_GR)) {
		if (!empty(path(jv_copy(spec), "paramRef", NULL)))
			causes = unsupported(causes, "spec.paramRef", "paramRef");
		if (!empty(path(jv_copy(spec), "matchResources", NULL)))
			causes = unsupported(causes, "spec.matchResources", "matchResources");
		if (empty(path(jv_copy(spec), "validationActions", NULL)))
			causes = jv_array_append(causes, cause("FieldValueRequired", "Required value",
							       "spec.validationActions"));
	}
	jv_free(spec);
	if (jv_array_length(jv_copy(causes)) == 0) {
		jv_free(causes);
		return 0;
	}
	*status = invalid(t, name ? name : "", causes);
	return 422;
}
