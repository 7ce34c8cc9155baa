/*
 * Who may do what: bearer tokens to users and groups, and with
 * --authorization rbac the Roles, ClusterRoles and their bindings in the
 * store, evaluated per request as kube-apiserver's RBAC authorizer does
 * (any matching rule allows; nothing matching denies).
 *
 * Tokens: --token T (the admin: user system:admin, group system:masters),
 * --token-file FILE (lines TOKEN,USER[,GROUP...]; '#' comments), and
 * --sa-token NS/NAME=TOKEN (user system:serviceaccount:NS:NAME, groups
 * system:serviceaccounts and system:serviceaccounts:NS), and the tokens of
 * POST serviceaccounts/NAME/token (token.c) as their ServiceAccount. Every
 * authenticated user is in system:authenticated. An unknown token is 401.
 * ksim's own controllers and system:masters members are always allowed.
 */
#include <stdlib.h>
#include <string.h>
#include "sim.h"
#include "banned.h"

static int rbac_on;
static const char *token_file;
static jv sa_tokens;	/* array of "NS/NAME=TOKEN" */
static jv tokens;	/* token -> user */
static jv groups;	/* user -> array of groups */
static jv sa_users;	/* user -> user: the ServiceAccounts of tokens ksim issued (token.c) */
static pthread_mutex_t tokens_lock = PTHREAD_MUTEX_INITIALIZER;	/* jv refcounts are not atomic */

static const char *const internal_users[] = { "system:apiserver", "system:kube-controller-manager",
					      "system:node:ksim-node",
					      "system:serviceaccount:kube-system:ksim-controllers", NULL };

int rbac_option(int c, const char *arg)
{
	switch (c) {
	case OPT_AUTHORIZATION:
		if (!strcasecmp(arg, "rbac"))
			rbac_on = 1;
		else if (!strcmp(arg, "AlwaysAllow"))
			rbac_on = 0;
		else
			die_usage("invalid authorization mode '%s' (AlwaysAllow or rbac)", arg);
		return 1;
	case OPT_TOKEN_FILE:
		token_file = arg;
		return 1;
	case OPT_SA_TOKEN:
		if (!strchr(arg, '/') || !strchr(arg, '=') || strchr(arg, '=') < strchr(arg, '/') ||
		    !strchr(arg, '=')[1])
			die_usage("invalid --sa-token '%s' (NAMESPACE/NAME=TOKEN)", arg);
		if (jv_get_kind(sa_tokens) != JV_KIND_ARRAY)
			sa_tokens = jv_array();
		sa_tokens = jv_array_append(sa_tokens, jv_string(arg));
		return 1;
	}
	return 0;
}

static void add_user(const char *token, const char *user, jv grps)
{
	jv have = jv_object_get(jv_copy(groups), jv_string(user));

	if (jv_get_kind(have) == JV_KIND_ARRAY)
		grps = jv_array_concat(have, grps);
	else
		jv_free(have);
	if (token)
		tokens = jv_object_set(tokens, jv_string(token), jv_string(user));
	groups = jv_object_set(groups, jv_string(user), grps);
}

void rbac_init(void)
{
	tokens = jv_object();
	groups = jv_object();
	sa_users = jv_object();
	add_user(NULL, "system:admin", JV_ARRAY(jv_string("system:masters")));
	for (const char *const *u = internal_users; *u; u++)
		add_user(NULL, *u, JV_ARRAY(jv_string("system:masters")));
	if (ksim.token)
		add_user(ksim.token, "system:admin", jv_array());
	if (token_file) {
		char *data, err[KOP_ERRLEN], *line, *save = NULL;
		size_t len, n = 0;

		if (kop_read_file(token_file, 16 << 20, &data, &len, err) < 0)
			die(KOP_EXIT_PERM, "%s", err);
		for (line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			char *f, *fsave = NULL, *token, *user;
			jv g;

			n++;
			line[strcspn(line, "\r")] = 0;
			if (!*line || *line == '#')
				continue;
			g = jv_array();
			token = strtok_r(line, ",", &fsave);
			user = strtok_r(NULL, ",", &fsave);
			if (!token || !user)
				die(KOP_EXIT_PERM, "'%s': line %zu: expected TOKEN,USER[,GROUP...]", token_file, n);
			while ((f = strtok_r(NULL, ",", &fsave)))
				if (*f)
					g = jv_array_append(g, jv_string(f));
			add_user(token, user, g);
		}
		free(data);
	}
	if (jv_get_kind(sa_tokens) == JV_KIND_ARRAY) {
		jv_array_foreach(sa_tokens, i, s) {
			const char *a = jv_string_value(s), *slash = strchr(a, '/'), *eq = strchr(a, '=');
			struct kop_buf user = KOP_BUF_INIT, g = KOP_BUF_INIT;

			kop_buf_addf(&user, "system:serviceaccount:%.*s:%.*s", (int)(slash - a), a,
				     (int)(eq - slash - 1), slash + 1);
			kop_buf_addf(&g, "system:serviceaccounts:%.*s", (int)(slash - a), a);
			add_user(eq + 1, user.buf, JV_ARRAY(jv_string("system:serviceaccounts"), jv_string(g.buf)));
			kop_buf_release(&user);
			kop_buf_release(&g);
			jv_free(s);
		}
	}
}

const char *ksim_rbac_sa_user(const char *ns, const char *name)
{
	struct kop_buf user = KOP_BUF_INIT, g = KOP_BUF_INIT;
	const char *s;
	jv u;

	kop_buf_addf(&user, "system:serviceaccount:%s:%s", ns, name);
	pthread_mutex_lock(&tokens_lock);
	u = jv_object_get(jv_copy(sa_users), jv_string(user.buf));
	if (jv_get_kind(u) != JV_KIND_STRING) {
		jv_free(u);
		kop_buf_addf(&g, "system:serviceaccounts:%s", ns);
		sa_users = jv_object_set(sa_users, jv_string(user.buf), jv_string(user.buf));
		u = jv_object_get(jv_copy(groups), jv_string(user.buf));
		if (jv_get_kind(u) != JV_KIND_ARRAY)	/* (not also an --sa-token's user) */
			add_user(NULL, user.buf, JV_ARRAY(jv_string("system:serviceaccounts"), jv_string(g.buf)));
		jv_free(u);
		u = jv_object_get(jv_copy(sa_users), jv_string(user.buf));
	}
	/* the string lives in `sa_users`, which lives as long as ksim serves */
	s = jv_string_value(u);
	jv_free(u);
	pthread_mutex_unlock(&tokens_lock);
	kop_buf_release(&user);
	kop_buf_release(&g);
	return s;
}

int rbac_enabled(void)
{
	return rbac_on;
}

void rbac_free(void)
{
	jv_free(tokens);
	jv_free(groups);
	jv_free(sa_tokens);
	jv_free(sa_users);
	tokens = groups = sa_tokens = sa_users = jv_null();
}

int ksim_rbac_authenticate(const char *authorization, const char **user)
{
	jv u;

	if (!token_file && jv_get_kind(sa_tokens) != JV_KIND_ARRAY)
		return 0;
	if (!authorization) {
		*user = "system:anonymous";
		return 1;
	}
	if (strncasecmp(authorization, "Bearer ", 7))
		return -1;
	pthread_mutex_lock(&tokens_lock);
	u = jv_object_get(jv_copy(tokens), jv_string(authorization + 7));
	if (jv_get_kind(u) != JV_KIND_STRING) {
		jv_free(u);
		pthread_mutex_unlock(&tokens_lock);
		return -1;
	}
	/* the string lives in `tokens`, which lives as long as ksim serves */
	*user = jv_string_value(u);
	jv_free(u);
	pthread_mutex_unlock(&tokens_lock);
	return 1;
}

static int in_list(jv list, const char *s, const char *also)
{
	int found = 0;

	if (jv_get_kind(list) != JV_KIND_ARRAY) {
		jv_free(list);
		return 0;
	}
	jv_array_foreach(list, i, e) {
		if (jv_get_kind(e) == JV_KIND_STRING &&
		    (!strcmp(jv_string_value(e), s) || (also && !strcmp(jv_string_value(e), also))))
			found = 1;
		jv_free(e);
	}
	jv_free(list);
	return found;
}

/*
 * The groups of user, a copy that shares nothing with `groups` (which
 * ksim_rbac_sa_user() adds to while requests are served), or an empty array.
 */
static jv user_groups(const char *user)
{
	jv g, out = jv_array();

	pthread_mutex_lock(&tokens_lock);
	g = jv_object_get(jv_copy(groups), jv_string(user));
	if (jv_get_kind(g) == JV_KIND_ARRAY)
		jv_array_foreach(g, i, s) {
			out = jv_array_append(out, jv_string(jv_string_value(s)));
			jv_free(s);
		}
	jv_free(g);
	pthread_mutex_unlock(&tokens_lock);
	return out;
}

/* as: an impersonated user's groups (NULL-terminated), or NULL for the authenticator's of user */
static int user_in_group(const char *user, const char *const *as, const char *group)
{
	if (as) {
		for (; *as; as++)
			if (!strcmp(*as, group))
				return 1;
		return 0;
	}
	if (!strcmp(group, "system:authenticated"))
		return strcmp(user, "system:anonymous") != 0;
	if (!strcmp(group, "system:unauthenticated"))
		return !strcmp(user, "system:anonymous");
	return in_list(user_groups(user), group, NULL);
}

/* The first subject of binding that applies to the requester (a copy), or jv_invalid(): appliesTo's. */
static jv subject_match(jv binding, const struct ksim_attrs *a)
{
	jv subjects = jv_object_get(jv_copy(binding), jv_string("subjects")), found = jv_invalid();
	const char *bns = ksim_str(binding, "metadata.namespace");

	if (jv_get_kind(subjects) != JV_KIND_ARRAY) {
		jv_free(subjects);
		return found;
	}
	jv_array_foreach(subjects, i, s) {
		const char *kind = ksim_str(s, "kind"), *name = ksim_str(s, "name"), *ns = ksim_str(s, "namespace");
		int yes = 0;

		if (kind && name && !jv_is_valid(found)) {
			if (!strcmp(kind, "User"))
				yes = !strcmp(name, a->user);
			else if (!strcmp(kind, "Group"))
				yes = user_in_group(a->user, a->groups, name);
			else if (!strcmp(kind, "ServiceAccount")) {
				struct kop_buf u = KOP_BUF_INIT;

				kop_buf_addf(&u, "system:serviceaccount:%s:%s", ns ? ns : bns ? bns : "", name);
				yes = !strcmp(u.buf, a->user);
				kop_buf_release(&u);
			}
		}
		if (yes)
			found = s;
		else
			jv_free(s);
	}
	jv_free(subjects);
	return found;
}

static void add_q(struct kop_buf *b, const char *s)
{
	kop_buf_add_quoted(b, s, strlen(s));
}

/*
 * The RBAC authorizer's reason for an allow (authorizingVisitor, and the
 * describers of rule.go): `RBAC: allowed by ClusterRoleBinding "NAME" of
 * ClusterRole "ROLE" to User "U"`, a RoleBinding named "NAME/NS", a
 * ServiceAccount subject "NAME/NS" (the binding's namespace when it names
 * none).
 */
static void allowed_by(struct kop_buf *b, const char *binding, const char *bns, const char *rkind, const char *role,
		       const char *skind, const char *sname, const char *sns)
{
	struct kop_buf t = KOP_BUF_INIT;

	if (!b)
		return;
	kop_buf_addf(b, "RBAC: allowed by %s ", bns ? "RoleBinding" : "ClusterRoleBinding");
	kop_buf_adds(&t, binding);
	if (bns)
		kop_buf_addf(&t, "/%s", bns);
	add_q(b, t.buf);
	kop_buf_addf(b, " of %s ", rkind);
	add_q(b, role);
	kop_buf_addf(b, " to %s ", skind);
	kop_buf_reset(&t);
	kop_buf_adds(&t, sname);
	if (!strcmp(skind, "ServiceAccount"))
		kop_buf_addf(&t, "/%s", sns && *sns ? sns : bns ? bns : "");
	add_q(b, t.buf);
	kop_buf_release(&t);
}

/* The reason of a default ClusterRoleBinding of the ClusterRole of its name (bootstrappolicy) to a group. */
static void allowed_by_default(struct kop_buf *b, const char *name, const char *group)
{
	allowed_by(b, name, NULL, "ClusterRole", name, "Group", group, NULL);
}

/*
 * The nonResourceURLs of the default ClusterRoles kube-apiserver binds
 * (bootstrappolicy): system:public-info-viewer, to system:authenticated and
 * system:unauthenticated, and system:discovery, to system:authenticated;
 * both for the verb get.
 */
static const char *const public_info_urls[] = { "/healthz", "/livez", "/readyz", "/version", "/version/", NULL };
static const char *const discovery_urls[] = { "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
					      "/openapi/*", "/readyz", "/version", "/version/", NULL };

/* The RBAC authorizer's NonResourceURLMatches: "*", the path itself, or a prefix ended by '*'. */
static int url_matches(const char *rule, const char *path)
{
	size_t n = strlen(rule);

	if (!strcmp(rule, "*") || !strcmp(rule, path))
		return 1;
	if (!n || rule[n - 1] != '*')
		return 0;
	while (n && rule[n - 1] == '*')
		n--;
	return !strncmp(rule, path, n);
}

static int url_listed(const char *const *urls, const char *path)
{
	for (; *urls; urls++)
		if (url_matches(*urls, path))
			return 1;
	return 0;
}

/* A rule's nonResourceURLs (consumed) that match path. */
static int urls_match(jv urls, const char *path)
{
	int found = 0;

	if (jv_get_kind(urls) != JV_KIND_ARRAY) {
		jv_free(urls);
		return 0;
	}
	jv_array_foreach(urls, i, u) {
		if (jv_get_kind(u) == JV_KIND_STRING && url_matches(jv_string_value(u), path))
			found = 1;
		jv_free(u);
	}
	jv_free(urls);
	return found;
}

/*
 * What the default bindings allow a non-resource request (a->path), with
 * the reason (the bindings in the order of their names, as ksim keeps
 * stored ones).
 */
static int default_nonresource(const struct ksim_attrs *a, struct kop_buf *reason)
{
	int authenticated = user_in_group(a->user, a->groups, "system:authenticated");

	if (strcmp(a->verb, "get"))
		return 0;
	if (authenticated && url_listed(discovery_urls, a->path)) {
		allowed_by_default(reason, "system:discovery", "system:authenticated");
		return 1;
	}
	if (!url_listed(public_info_urls, a->path))
		return 0;
	allowed_by_default(reason, "system:public-info-viewer",
			   authenticated ? "system:authenticated" : "system:unauthenticated");
	return 1;
}

static int rule_allows(jv rule, const struct ksim_attrs *a)
{
	struct kop_buf res = KOP_BUF_INIT, any_sub = KOP_BUF_INIT, res_any = KOP_BUF_INIT;
	jv names;
	int ok;

	if (!in_list(jv_object_get(jv_copy(rule), jv_string("verbs")), a->verb, "*"))
		return 0;
	if (a->path)
		return urls_match(jv_object_get(jv_copy(rule), jv_string("nonResourceURLs")), a->path);
	if (!in_list(jv_object_get(jv_copy(rule), jv_string("apiGroups")), a->group, "*"))
		return 0;
	kop_buf_adds(&res, a->resource);
	if (a->subresource) {
		kop_buf_addf(&res, "/%s", a->subresource);
		kop_buf_addf(&any_sub, "*/%s", a->subresource);
		kop_buf_addf(&res_any, "%s/*", a->resource);
	}
	ok = in_list(jv_object_get(jv_copy(rule), jv_string("resources")), res.buf, "*") ||
	     (a->subresource && in_list(jv_object_get(jv_copy(rule), jv_string("resources")), any_sub.buf,
					res_any.buf));
	kop_buf_release(&res);
	kop_buf_release(&any_sub);
	kop_buf_release(&res_any);
	if (!ok)
		return 0;
	names = jv_object_get(jv_copy(rule), jv_string("resourceNames"));
	if (jv_get_kind(names) == JV_KIND_ARRAY && jv_array_length(jv_copy(names)) > 0)
		return a->name ? in_list(names, a->name, NULL) : (jv_free(names), 0);
	jv_free(names);
	return 1;
}

int ksim_rbac_rule_allows(jv rule, const struct ksim_attrs *a)
{
	return rule_allows(rule, a);
}

/* The rules of a roleRef (lock held); cluster-admin is built in when not stored. */
static jv role_rules(jv ref, const char *ns)
{
	const char *kind = ksim_str(ref, "kind"), *name = ksim_str(ref, "name");
	jv role;

	if (!kind || !name)
		return jv_array();
	if (!strcmp(kind, "ClusterRole"))
		role = ksim_store_get("clusterroles.rbac.authorization.k8s.io", NULL, name);
	else if (!strcmp(kind, "Role") && ns)
		role = ksim_store_get("roles.rbac.authorization.k8s.io", ns, name);
	else
		return jv_array();
	if (!jv_is_valid(role)) {
		if (!strcmp(kind, "ClusterRole") && !strcmp(name, "cluster-admin"))
			return JV_ARRAY(JV_OBJECT(jv_string("apiGroups"), JV_ARRAY(jv_string("*")),
						  jv_string("resources"), JV_ARRAY(jv_string("*")), jv_string("verbs"),
						  JV_ARRAY(jv_string("*"))),
					JV_OBJECT(jv_string("nonResourceURLs"), JV_ARRAY(jv_string("*")),
						  jv_string("verbs"), JV_ARRAY(jv_string("*"))));
		return jv_array();
	}
	role = jv_object_get(jv_copy(role), jv_string("rules"));
	if (jv_get_kind(role) != JV_KIND_ARRAY) {
		jv_free(role);
		return jv_array();
	}
	return role;
}

struct check {
	const struct ksim_attrs *a;
	const char *ns;		/* the bindings' namespace, NULL for cluster bindings */
	int allowed;
	struct kop_buf *reason;
};

static int binding_fn(jv b, const char *key, void *data)
{
	struct check *c = data;
	jv ref, rules, subject = subject_match(b, c->a);

	(void)key;
	if (!jv_is_valid(subject))
		return 0;
	ref = jv_object_get(jv_copy(b), jv_string("roleRef"));
	rules = role_rules(ref, c->ns);
	jv_array_foreach(rules, i, r) {
		if (!c->allowed && rule_allows(r, c->a)) {
			c->allowed = 1;
			allowed_by(c->reason, ksim_str(b, "metadata.name"), c->ns, ksim_str(ref, "kind"),
				   ksim_str(ref, "name"), ksim_str(subject, "kind"), ksim_str(subject, "name"),
				   ksim_str(subject, "namespace"));
		}
		jv_free(r);
	}
	jv_free(rules);
	jv_free(ref);
	jv_free(subject);
	return c->allowed;
}

/* system:basic-user (bound to system:authenticated): the reviews of oneself. */
static int self_review(const struct ksim_attrs *a)
{
	if (a->path || a->subresource || strcmp(a->verb, "create"))
		return 0;
	if (!strcmp(a->group, "authentication.k8s.io"))
		return !strcmp(a->resource, "selfsubjectreviews");
	if (!strcmp(a->group, "authorization.k8s.io"))
		return !strcmp(a->resource, "selfsubjectaccessreviews") || !strcmp(a->resource, "selfsubjectrulesreviews");
	return 0;
}

int ksim_rbac_authorize(const struct ksim_attrs *a, struct kop_buf *reason)
{
	struct check c = { a, NULL, 0, reason };

	if (!rbac_on)
		/* anonymous requests reach what system:public-info-viewer allows; the core decides the rest
		 * (AlwaysAllow: no reason) */
		return a->path && default_nonresource(a, NULL) ? 1 : 0;
	/* the privileged-group authorizer, before RBAC, gives no reason */
	if (user_in_group(a->user, a->groups, "system:masters"))
		return 1;
	if (a->path && default_nonresource(a, reason))
		return 1;
	if (self_review(a) && user_in_group(a->user, a->groups, "system:authenticated")) {
		allowed_by_default(reason, "system:basic-user", "system:authenticated");
		return 1;
	}
	/* the lock is held: ksim_handle() authorizes under it; a non-resource request has no
	 * namespace: only ClusterRoleBindings grant one */
	ksim_store_each("clusterrolebindings.rbac.authorization.k8s.io", NULL, NULL, binding_fn, &c);
	if (!c.allowed && a->namespace && !a->path) {
		c.ns = a->namespace;
		ksim_store_each("rolebindings.rbac.authorization.k8s.io", a->namespace, NULL, binding_fn, &c);
	}
	return c.allowed ? 1 : -1;
}

jv ksim_rbac_groups(const char *user, const char *const *impersonated)
{
	jv g;

	if (impersonated) {
		/* as the impersonation filter made them */
		g = jv_array();
		for (; *impersonated; impersonated++)
			g = jv_array_append(g, jv_string(*impersonated));
		return g;
	}
	if (!strcmp(user, "system:anonymous"))
		return JV_ARRAY(jv_string("system:unauthenticated"));
	g = user_groups(user);
	/* the authenticator adds system:authenticated unless it is there */
	if (!in_list(jv_copy(g), "system:authenticated", NULL))
		g = jv_array_append(g, jv_string("system:authenticated"));
	return g;
}

struct rules {
	const char *user, *const *groups, *ns;
	jv res, nonres;
};

/* Splits a PolicyRule as the RBAC authorizer's RulesFor does. */
static void add_rule(struct rules *r, jv rule)
{
	jv res = jv_object_get(jv_copy(rule), jv_string("resources"));
	jv urls = jv_object_get(jv_copy(rule), jv_string("nonResourceURLs"));
	jv verbs = jv_object_get(jv_copy(rule), jv_string("verbs"));

	if (jv_get_kind(verbs) != JV_KIND_ARRAY) {
		jv_free(verbs);
		verbs = jv_array();
	}
	if (jv_get_kind(res) == JV_KIND_ARRAY && jv_array_length(jv_copy(res)) > 0) {
		jv o = JV_OBJECT(jv_string("verbs"), jv_copy(verbs));
		jv g = jv_object_get(jv_copy(rule), jv_string("apiGroups"));
		jv n = jv_object_get(jv_copy(rule), jv_string("resourceNames"));

		if (jv_get_kind(g) == JV_KIND_ARRAY && jv_array_length(jv_copy(g)) > 0)
			o = jv_object_set(o, jv_string("apiGroups"), g);
		else
			jv_free(g);
		o = jv_object_set(o, jv_string("resources"), jv_copy(res));
		if (jv_get_kind(n) == JV_KIND_ARRAY && jv_array_length(jv_copy(n)) > 0)
			o = jv_object_set(o, jv_string("resourceNames"), n);
		else
			jv_free(n);
		r->res = jv_array_append(r->res, o);
	}
	if (jv_get_kind(urls) == JV_KIND_ARRAY && jv_array_length(jv_copy(urls)) > 0)
		r->nonres = jv_array_append(r->nonres, JV_OBJECT(jv_string("verbs"), jv_copy(verbs),
								  jv_string("nonResourceURLs"), jv_copy(urls)));
	jv_free(res);
	jv_free(urls);
	jv_free(verbs);
	jv_free(rule);
}

static int rules_fn(jv b, const char *key, void *data)
{
	struct rules *r = data;
	struct ksim_attrs a = { 0 };
	jv ref, rules, subject;

	(void)key;
	if (rbac_default_binding(ksim_str(b, "metadata.name") ? ksim_str(b, "metadata.name") : ""))
		return 0;	/* its rules are among those ksim_rbac_rules() starts with */
	a.user = r->user;
	a.groups = r->groups;
	subject = subject_match(b, &a);
	if (!jv_is_valid(subject))
		return 0;
	jv_free(subject);
	ref = jv_object_get(jv_copy(b), jv_string("roleRef"));
	rules = role_rules(ref, ksim_str(b, "metadata.namespace"));
	jv_free(ref);
	jv_array_foreach(rules, i, rule)
		add_rule(r, rule);
	jv_free(rules);
	return 0;
}

/* A rule for the verb get on urls. */
static jv url_rule(const char *const *urls)
{
	jv a = jv_array();

	for (; *urls; urls++)
		a = jv_array_append(a, jv_string(*urls));
	return JV_OBJECT(jv_string("verbs"), JV_ARRAY(jv_string("get")), jv_string("nonResourceURLs"), a);
}

void ksim_rbac_rules(const char *user, const char *const *as, const char *ns, jv *resource, jv *nonresource)
{
	struct rules r = { user, as, ns, jv_null(), jv_null() };

	if (!rbac_on || user_in_group(user, as, "system:masters")) {
		/* AlwaysAllow, and the privileged groups: everything */
		*resource = JV_ARRAY(JV_OBJECT(jv_string("verbs"), JV_ARRAY(jv_string("*")), jv_string("apiGroups"),
					       JV_ARRAY(jv_string("*")), jv_string("resources"),
					       JV_ARRAY(jv_string("*"))));
		*nonresource = JV_ARRAY(JV_OBJECT(jv_string("verbs"), JV_ARRAY(jv_string("*")),
						  jv_string("nonResourceURLs"), JV_ARRAY(jv_string("*"))));
		return;
	}
	/* what the default bindings give every authenticated user: system:basic-user, system:discovery,
	 * system:public-info-viewer */
	if (user_in_group(user, as, "system:authenticated")) {
		r.res = JV_ARRAY(JV_OBJECT(jv_string("verbs"), JV_ARRAY(jv_string("create")), jv_string("apiGroups"),
					   JV_ARRAY(jv_string("authorization.k8s.io")), jv_string("resources"),
					   JV_ARRAY(jv_string("selfsubjectaccessreviews"),
						    jv_string("selfsubjectrulesreviews"))),
				 JV_OBJECT(jv_string("verbs"), JV_ARRAY(jv_string("create")), jv_string("apiGroups"),
					   JV_ARRAY(jv_string("authentication.k8s.io")), jv_string("resources"),
					   JV_ARRAY(jv_string("selfsubjectreviews"))));
		r.nonres = JV_ARRAY(url_rule(discovery_urls));
	} else {
		r.res = jv_array();
		r.nonres = jv_array();
	}
	r.nonres = jv_array_append(r.nonres, url_rule(public_info_urls));
	ksim_store_each("clusterrolebindings.rbac.authorization.k8s.io", NULL, NULL, rules_fn, &r);
	if (ns && *ns)
		ksim_store_each("rolebindings.rbac.authorization.k8s.io", ns, NULL, rules_fn, &r);
	*resource = r.res;
	*nonresource = r.nonres;
}
