/*
 * RBAC's escalation rules, as kube-apiserver's RBAC storage enforces them
 * (pkg/registry/rbac): a Role or ClusterRole may only be written with rules
 * its writer holds, unless it may `escalate` that role; a RoleBinding or
 * ClusterRoleBinding may only be written to a role whose rules its writer
 * holds, unless it may `bind` that role (resourceNames respected); a
 * ClusterRole with an aggregationRule (which gathers rules it cannot know)
 * only by a writer holding every right, unless it may `escalate`. A refusal
 * is the 403 whose message lists the missing rights as
 * ConfirmNoEscalation words them. Lock held throughout.
 */
#include <stdlib.h>
#include <string.h>
#include "api.h"
#include "banned.h"

#define RBAC_GROUP "rbac.authorization.k8s.io"

/* Go's %q of a []string: ["a" "b"] */
static void add_qlist(struct kop_buf *b, jv list)
{
	kop_buf_adds(b, "[");
	jv_array_foreach(list, i, s) {
		const char *p = jv_get_kind(s) == JV_KIND_STRING ? jv_string_value(s) : "";

		kop_buf_adds(b, i ? " \"" : "\"");
		for (; *p; p++) {
			if (*p == '"' || *p == '\\')
				kop_buf_addf(b, "\\%c", *p);
			else
				kop_buf_addf(b, "%c", *p);
		}
		kop_buf_adds(b, "\"");
		jv_free(s);
	}
	jv_free(list);
	kop_buf_adds(b, "]");
}

/* PolicyRule.CompactString() */
static char *compact_string(jv r)
{
	static const char *const fields[][2] = { { "apiGroups", "APIGroups" }, { "resources", "Resources" },
						 { "nonResourceURLs", "NonResourceURLs" },
						 { "resourceNames", "ResourceNames" }, { "verbs", "Verbs" } };
	struct kop_buf b = KOP_BUF_INIT;
	int n = 0;

	kop_buf_adds(&b, "{");
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		jv v = jv_object_get(jv_copy(r), jv_string(fields[i][0]));

		if (jv_get_kind(v) != JV_KIND_ARRAY || !jv_array_length(jv_copy(v))) {
			jv_free(v);
			continue;
		}
		kop_buf_addf(&b, "%s%s:", n++ ? ", " : "", fields[i][1]);
		add_qlist(&b, v);
	}
	kop_buf_adds(&b, "}");
	return b.buf;
}

/* rule[key]'s strings (anything else dropped: validation refuses it later) */
static jv strings_of(jv rule, const char *key)
{
	jv v = jv_object_get(jv_copy(rule), jv_string(key)), out = jv_array();

	if (jv_get_kind(v) == JV_KIND_ARRAY)
		jv_array_foreach(v, i, s) {
			if (jv_get_kind(s) == JV_KIND_STRING)
				out = jv_array_append(out, s);
			else
				jv_free(s);
		}
	jv_free(v);
	return out;
}

static int covered(jv owner, struct ksim_attrs *a)
{
	int ok = 0;

	jv_array_foreach(owner, i, r) {
		if (!ok && ksim_rbac_rule_allows(r, a))
			ok = 1;
		jv_free(r);
	}
	jv_free(owner);
	return ok;
}

/* One broken-down resource right (BreakdownRule) checked against owner; missing ones appended. */
static jv check_resource(jv owner, jv missing, const char *user, const char *group, const char *resource,
			 const char *verb, const char *name)
{
	struct ksim_attrs a = { 0 };
	char *res = kop_strdup(resource), *slash = strchr(res, '/');
	jv r;

	a.user = user;
	a.verb = verb;
	a.group = group;
	a.resource = res;
	a.name = name;
	if (slash && strcmp(res, "*")) {
		*slash = 0;
		a.subresource = slash + 1;
	}
	if (!covered(jv_copy(owner), &a)) {
		r = JV_OBJECT(jv_string("apiGroups"), JV_ARRAY(jv_string(group)), jv_string("resources"),
			      JV_ARRAY(jv_string(resource)), jv_string("verbs"), JV_ARRAY(jv_string(verb)));
		if (name)
			r = jv_object_set(r, jv_string("resourceNames"), JV_ARRAY(jv_string(name)));
		missing = jv_array_append(missing, r);
	}
	free(res);
	return missing;
}

/* Covers(owner, rules): the broken-down rights of rules that no owner rule covers. */
static jv uncovered(jv ownres, jv ownurl, jv rules, const char *user)
{
	jv missing = jv_array();

	jv_array_foreach(rules, ri, rule) {
		jv groups = strings_of(rule, "apiGroups"), resources = strings_of(rule, "resources");
		jv verbs = strings_of(rule, "verbs"), names = strings_of(rule, "resourceNames");
		jv urls = strings_of(rule, "nonResourceURLs");

		jv_array_foreach(groups, gi, g) {
			jv_array_foreach(resources, si, s) {
				jv_array_foreach(verbs, vi, v) {
					if (jv_array_length(jv_copy(names)) > 0) {
						jv_array_foreach(names, ni, n) {
							missing = check_resource(ownres, missing, user, jv_string_value(g),
										 jv_string_value(s), jv_string_value(v),
										 jv_string_value(n));
							jv_free(n);
						}
					} else {
						missing = check_resource(ownres, missing, user, jv_string_value(g),
									 jv_string_value(s), jv_string_value(v), NULL);
					}
					jv_free(v);
				}
				jv_free(s);
			}
			jv_free(g);
		}
		jv_array_foreach(urls, ui, u) {
			jv_array_foreach(verbs, vi, v) {
				struct ksim_attrs a = { 0 };

				a.user = user;
				a.verb = jv_string_value(v);
				a.path = jv_string_value(u);
				if (!covered(jv_copy(ownurl), &a))
					missing = jv_array_append(missing,
								  JV_OBJECT(jv_string("nonResourceURLs"), JV_ARRAY(jv_copy(u)),
									    jv_string("verbs"), JV_ARRAY(jv_copy(v))));
				jv_free(v);
			}
			jv_free(u);
		}
		jv_free(groups);
		jv_free(resources);
		jv_free(verbs);
		jv_free(names);
		jv_free(urls);
		jv_free(rule);
	}
	jv_free(rules);
	return missing;
}

/*
 * CompactRules: the rights of one group, one resource and at most one name
 * merged into one rule with their verbs; then CompactString, sorted and
 * without duplicates (sets.String), one a line.
 */
static void describe(struct kop_buf *m, jv missing)
{
	jv simple = jv_object(), lines = jv_array();

	jv_array_foreach(missing, i, r) {
		jv g = jv_object_get(jv_copy(r), jv_string("apiGroups"));

		if (jv_is_valid(g) && jv_get_kind(g) == JV_KIND_ARRAY) {
			/* simpleResource: the group, the resource, the name or none */
			jv names = jv_object_get(jv_copy(r), jv_string("resourceNames"));
			jv key = JV_ARRAY(jv_array_get(jv_copy(g), 0),
					  jv_array_get(jv_object_get(jv_copy(r), jv_string("resources")), 0),
					  jv_is_valid(names) ? names : (jv_free(names), jv_null()));
			jv ks = jv_dump_string(key, 0);
			struct kop_buf k = KOP_BUF_INIT;
			jv have;

			kop_buf_adds(&k, jv_string_value(ks));
			jv_free(ks);
			have = jv_object_get(jv_copy(simple), jv_string(k.buf));
			if (jv_is_valid(have)) {
				jv v = jv_object_get(jv_copy(have), jv_string("verbs"));

				v = jv_array_concat(v, jv_object_get(jv_copy(r), jv_string("verbs")));
				have = jv_object_set(have, jv_string("verbs"), v);
				simple = jv_object_set(simple, jv_string(k.buf), have);
				jv_free(r);
			} else {
				jv_free(have);
				simple = jv_object_set(simple, jv_string(k.buf), r);
			}
			kop_buf_release(&k);
		} else {
			char *c = compact_string(r);

			lines = jv_array_append(lines, jv_string(c));
			free(c);
			jv_free(r);
		}
		jv_free(g);
	}
	jv_free(missing);
	jv_object_foreach(simple, k, r) {
		char *c = compact_string(r);

		lines = jv_array_append(lines, jv_string(c));
		free(c);
		jv_free(k);
		jv_free(r);
	}
	jv_free(simple);
	lines = jv_sort(lines, jv_copy(lines));
	{
		const char *prev = NULL;
		jv last = jv_null();

		jv_array_foreach(lines, i, l) {
			if (!prev || strcmp(prev, jv_string_value(l))) {
				kop_buf_addf(m, "\n%s", jv_string_value(l));
				jv_free(last);
				last = jv_copy(l);
				prev = jv_string_value(last);
			}
			jv_free(l);
		}
		jv_free(last);
	}
	jv_free(lines);
}

/*
 * ConfirmNoEscalation: 0 when user holds every right of rules (consumed) in
 * ns (NULL: cluster-wide), else -1 and the 403 in *status.
 */
static int confirm_no_escalation(const char *user, const char *const *as, const char *ns, const char *resource,
				 const char *name, jv rules, jv *status)
{
	jv ownres, ownurl, missing, groups;
	struct kop_buf m = KOP_BUF_INIT;

	ksim_rbac_rules(user, as, ns, &ownres, &ownurl);
	missing = uncovered(ownres, ownurl, rules, user);
	jv_free(ownres);
	jv_free(ownurl);
	if (!jv_array_length(jv_copy(missing))) {
		jv_free(missing);
		return 0;
	}
	groups = ksim_rbac_groups(user, as);
	kop_buf_addf(&m, "%s.%s \"%s\" is forbidden: user \"%s\" (groups=", resource, RBAC_GROUP, name, user);
	add_qlist(&m, groups);
	kop_buf_adds(&m, ") is attempting to grant RBAC permissions not currently held:");
	describe(&m, missing);
	*status = ksim_status(403, "Forbidden", m.buf,
			      JV_OBJECT(jv_string("name"), jv_string(name), jv_string("group"), jv_string(RBAC_GROUP),
					jv_string("kind"), jv_string(resource)));
	kop_buf_release(&m);
	return -1;
}

/* Whether a ClusterRole sets an aggregationRule (one with no selector gathers nothing: as absent). */
static int has_aggregation(jv obj)
{
	jv sel = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("aggregationRule"), jv_string("clusterRoleSelectors")));
	int yes = jv_get_kind(sel) == JV_KIND_ARRAY && jv_array_length(jv_copy(sel)) > 0;

	jv_free(sel);
	return yes;
}

/* May user do verb (escalate, bind) on the role resource/name, as seen from ns? */
static int may(const char *user, const char *const *as, const char *verb, const char *resource, const char *ns,
	       const char *name)
{
	struct ksim_attrs a = { 0 };
	jv st = jv_null();
	int ok;

	a.user = user;
	a.groups = as;
	a.verb = verb;
	a.group = RBAC_GROUP;
	a.resource = resource;
	a.namespace = ns;
	a.name = name;
	ok = ksim_authorize(&a, &st) == 0;
	jv_free(st);
	return ok;
}

int ksim_escalation_check(const struct ksim_type *t, const char *user, const char *const *groups, jv obj, int *code,
			  jv *status)
{
	const char *ns = ksim_str(obj, "metadata.namespace"), *name = ksim_str(obj, "metadata.name");
	const char *resource = t->gr;
	char res[32];

	if (strncmp(t->gr, "roles.", 6) && strncmp(t->gr, "clusterroles.", 13) &&
	    strncmp(t->gr, "rolebindings.", 13) && strncmp(t->gr, "clusterrolebindings.", 20))
		return 0;
	if (strcmp(strchr(t->gr, '.') + 1, RBAC_GROUP) || !user || !rbac_enabled())
		return 0;
	snprintf(res, sizeof(res), "%.*s", (int)(strchr(resource, '.') - resource), resource);
	if (!name)
		name = "";
	if (!strcmp(res, "roles") || !strcmp(res, "clusterroles")) {
		jv rules;

		/* EscalationAllowed (system:masters) or RoleEscalationAuthorized */
		if (may(user, groups, "escalate", res, ns, name))
			return 0;
		rules = jv_object_get(jv_copy(obj), jv_string("rules"));
		if (jv_get_kind(rules) != JV_KIND_ARRAY) {
			jv_free(rules);
			rules = jv_array();
		}
		if (confirm_no_escalation(user, groups, ns, res, name, rules, status) < 0) {
			*code = 403;
			return -1;
		}
		if (!strcmp(res, "clusterroles") && has_aggregation(obj)) {
			/* fullAuthority: * on *.*, and every non-resource URL */
			jv full = jv_parse("[{\"apiGroups\":[\"*\"],\"resources\":[\"*\"],\"verbs\":[\"*\"]},"
					   "{\"nonResourceURLs\":[\"*\"],\"verbs\":[\"*\"]}]");
			jv st = jv_null();

			if (confirm_no_escalation(user, groups, ns, res, name, full, &st) < 0) {
				struct kop_buf m = KOP_BUF_INIT;

				jv_free(st);
				kop_buf_addf(&m, "%s.%s \"%s\" is forbidden: must have cluster-admin privileges to use the "
						 "aggregationRule", res, RBAC_GROUP, name);
				*status = ksim_status(403, "Forbidden", m.buf,
						      JV_OBJECT(jv_string("name"), jv_string(name), jv_string("group"),
								jv_string(RBAC_GROUP), jv_string("kind"), jv_string(res)));
				kop_buf_release(&m);
				*code = 403;
				return -1;
			}
			jv_free(st);
		}
		return 0;
	}
	{
		const char *kind = ksim_str(obj, "roleRef.kind"), *rname = ksim_str(obj, "roleRef.name");
		const char *rres;
		jv role, rules;

		if (!kind || !rname || (strcmp(kind, "Role") && strcmp(kind, "ClusterRole")))
			return 0;	/* validation refuses it */
		rres = !strcmp(kind, "Role") ? "roles" : "clusterroles";
		/* BindingAuthorized: bind on the role, in the binding's namespace */
		if (may(user, groups, "bind", rres, ns, rname))
			return 0;
		/* GetRoleReferenceRules */
		role = !strcmp(kind, "Role") ? (ns ? ksim_store_get("roles." RBAC_GROUP, ns, rname) : jv_invalid()) :
					      ksim_store_get("clusterroles." RBAC_GROUP, NULL, rname);
		if (!jv_is_valid(role)) {	/* (borrowed from the store when valid) */
			struct kop_buf m = KOP_BUF_INIT;

			kop_buf_addf(&m, "%s.%s \"%s\" not found", rres, RBAC_GROUP, rname);
			*status = ksim_status(404, "NotFound", m.buf,
					      JV_OBJECT(jv_string("name"), jv_string(rname), jv_string("group"),
							jv_string(RBAC_GROUP), jv_string("kind"), jv_string(rres)));
			kop_buf_release(&m);
			*code = 404;
			return -1;
		}
		rules = jv_object_get(jv_copy(role), jv_string("rules"));
		if (jv_get_kind(rules) != JV_KIND_ARRAY) {
			jv_free(rules);
			rules = jv_array();
		}
		if (confirm_no_escalation(user, groups, ns, res, name, rules, status) < 0) {
			*code = 403;
			return -1;
		}
	}
	return 0;
}
