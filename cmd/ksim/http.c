/*
 * HTTP over libmicrohttpd: one thread per connection, 127.0.0.1 only.
 * Authentication (bearer token), the admin endpoints under /ksim/, request
 * logging, and the glue from MHD to ksim_handle(): JSON answers, plain-text
 * 404s, and watch streams as chunked callback responses.
 */
#include <netinet/in.h>
#include <arpa/inet.h>
#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/resource.h>
#include <microhttpd.h>
#include "tool.h"
#include "ksim.h"
#include "sim.h"
#include "banned.h"

#define MAX_BODY (3 * 1024 * 1024)

struct conn {
	struct kop_buf body;
	int too_big;
	int started;		/* the handler saw the request's headers */
	char *uri;		/* the request target as sent (Go's RequestURI) */
};

static int collect_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	jv *q = cls;

	(void)kind;
	*q = jv_object_set(*q, jv_string(key), jv_string(value ? value : ""));
	return MHD_YES;
}

/* A watch stream being sent, and to whom (its bytes are counted by user agent and resource: stats.c). */
struct stream {
	struct ksim_watch *w;
	char *agent;
	char *resource;
};

static ssize_t watch_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream *st = cls;
	size_t n;

	(void)pos;
	ksim_faults_watch_wait();	/* faults.c: stalled watches send nothing, */
	n = ksim_watch_read(st->w, buf, max);
	ksim_faults_watch_wait();	/* not even what a read begun before the stall got */
	ksim_stats_sent_watch(st->agent, st->resource, n);
	return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void watch_free_cb(void *cls)
{
	struct stream *st = cls;

	ksim_watch_free(st->w);
	free(st->agent);
	free(st->resource);
	free(st);
}

static const char *user_agent(struct MHD_Connection *c)
{
	const char *ua = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_USER_AGENT);

	return ua ? ua : "";
}

/*
 * What the -v log line adds for an answered request: whether it became a
 * watch, and for a POST the name of the object it creates (its path does
 * not say it), when the body is JSON that names one.
 */
static jv request_fields(const struct ksim_request *rq, int watch)
{
	jv f = JV_OBJECT(jv_string("watch"), jv_bool(watch));

	if (!strcmp(rq->method, "POST") && rq->body_len && rq->body_len < INT_MAX) {
		jv b = jv_parse_sized(rq->body, (int)rq->body_len), name = jv_invalid();

		if (jv_get_kind(b) == JV_KIND_OBJECT)
			name = jv_getpath(b, JV_ARRAY(jv_string("metadata"), jv_string("name")));
		else
			jv_free(b);
		if (jv_get_kind(name) == JV_KIND_STRING)
			f = jv_object_set(f, jv_string("name"), name);
		else
			jv_free(name);
	}
	return f;
}

/* The -v log line of a request: method, path, code, user agent, and more (fields, consumed). */
static void log_request(struct MHD_Connection *c, const char *method, const char *url, int code, jv fields)
{
	jv o = JV_OBJECT(jv_string("method"), jv_string(method), jv_string("path"), jv_string(url),
			 jv_string("code"), jv_number(code), jv_string("userAgent"), jv_string(user_agent(c)));

	tool_logj(LOG_DEBUG, jv_object_merge(o, fields), "request");
}

static void add_common_headers(struct MHD_Response *r, const char *ctype)
{
	char uid[40];

	ksim_uuid(uid);
	MHD_add_response_header(r, "Audit-Id", uid);
	MHD_add_response_header(r, "Cache-Control", "no-cache, private");
	if (*ctype)	/* "": no body, no type (a 204) */
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
}

/* Sends JSON bytes (taken: freed by MHD) with the Warning headers (consumed),
 * ended by a newline as kube-apiserver's encoder ends every body. */
static enum MHD_Result send_json_bytes(struct MHD_Connection *c, int code, char *s, size_t len, int verbatim,
				       jv warnings)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	if (!verbatim && (len == 0 || s[len - 1] != '\n')) {
		s = kop_realloc(s, len + 2);
		s[len++] = '\n';
		s[len] = '\0';
	}
	r = MHD_create_response_from_buffer(len, s, MHD_RESPMEM_MUST_FREE);

	add_common_headers(r, "application/json");
	if (code >= 400)
		MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	if (jv_get_kind(warnings) == JV_KIND_ARRAY) {
		jv_array_foreach(warnings, i, w) {
			struct kop_buf b = KOP_BUF_INIT;

			kop_buf_adds(&b, "299 - \"");
			for (const char *p = jv_string_value(w); *p; p++) {
				if (*p == '"' || *p == '\\')
					kop_buf_add(&b, "\\", 1);
				kop_buf_add(&b, p, 1);
			}
			kop_buf_add(&b, "\"", 1);
			MHD_add_response_header(r, "Warning", b.buf);
			kop_buf_release(&b);
			jv_free(w);
		}
	}
	jv_free(warnings);
	ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, int code, jv body, jv warnings)
{
	size_t len;
	char *s = ksim_dump(body, &len);

	return send_json_bytes(c, code, s, len, 0, warnings);
}

static enum MHD_Result send_bytes(struct MHD_Connection *c, int code, const char *text, size_t len,
				    const char *ctype)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)text, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;

	add_common_headers(r, ctype ? ctype : "text/plain; charset=utf-8");
	if (!ctype || *ctype)
		MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result send_text(struct MHD_Connection *c, int code, const char *text, const char *ctype)
{
	return send_bytes(c, code, text, strlen(text), ctype);
}

/*
 * The health checks of kube-apiserver (k8s.io/apiserver pkg/server/healthz)
 * as a 1.30 server installs them, in its order (readyz_only: on /readyz
 * alone). All pass.
 */
static const struct {
	const char *name;
	int readyz_only;
} health_checks[] = {
	{ "ping", 0 }, { "log", 0 }, { "etcd", 0 }, { "etcd-readiness", 1 }, { "informer-sync", 1 },
	{ "poststarthook/start-apiserver-admission-initializer", 0 },
	{ "poststarthook/generic-apiserver-start-informers", 0 },
	{ "poststarthook/priority-and-fairness-config-consumer", 0 },
	{ "poststarthook/priority-and-fairness-filter", 0 },
	{ "poststarthook/storage-object-count-tracker-hook", 0 },
	{ "poststarthook/start-apiextensions-informers", 0 },
	{ "poststarthook/start-apiextensions-controllers", 0 },
	{ "poststarthook/crd-informer-synced", 0 },
	{ "poststarthook/start-service-ip-repair-controllers", 0 },
	{ "poststarthook/rbac/bootstrap-roles", 0 },
	{ "poststarthook/scheduling/bootstrap-system-priority-classes", 0 },
	{ "poststarthook/priority-and-fairness-config-producer", 0 },
	{ "poststarthook/start-system-namespaces-controller", 0 },
	{ "poststarthook/bootstrap-controller", 0 },
	{ "poststarthook/start-cluster-authentication-info-controller", 0 },
	{ "poststarthook/start-kube-apiserver-identity-lease-controller", 0 },
	{ "poststarthook/start-kube-apiserver-identity-lease-garbage-collector", 0 },
	{ "poststarthook/start-legacy-token-tracking-controller", 0 },
	{ "poststarthook/aggregator-reload-proxy-client-cert", 0 },
	{ "poststarthook/start-kube-aggregator-informers", 0 },
	{ "poststarthook/apiservice-registration-controller", 0 },
	{ "poststarthook/apiservice-status-available-controller", 0 },
	{ "poststarthook/apiservice-discovery-controller", 0 },
	{ "poststarthook/kube-apiserver-autoregistration", 0 },
	{ "autoregister-completion", 0 },
	{ "poststarthook/apiservice-openapi-controller", 0 },
	{ "poststarthook/apiservice-openapiv3-controller", 0 },
	{ "shutdown", 1 },
};

/* The user: "system:admin" when ksim has no --token, "system:anonymous" without credentials, NULL for bad ones. */
static const char *authenticate(struct MHD_Connection *c)
{
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	const char *u;
	char *ns, *name;
	int known;

	if (h && !strncasecmp(h, "Bearer ", 7) && (known = ksim_token_authenticate(h + 7, &ns, &name))) {
		/* token.c: a TokenRequest's token */
		u = known > 0 ? ksim_rbac_sa_user(ns, name) : NULL;
		if (known > 0) {
			free(ns);
			free(name);
		}
		return u;
	}
	known = ksim_rbac_authenticate(h, &u);	/* rbac.c: --token-file, --sa-token */
	if (known)
		return known > 0 ? u : NULL;

	if (!ksim.token)
		return "system:admin";
	if (!h)
		return "system:anonymous";
	if (strncasecmp(h, "Bearer ", 7) || strcmp(h + 7, ksim.token))
		return NULL;
	return "system:admin";
}

/* The 401 of a request whose credentials are not known. */
static enum MHD_Result unauthorized(struct MHD_Connection *c, const char *method, const char *url)
{
	if (ksim.verbose)
		log_request(c, method, url, 401, jv_object());
	return send_json(c, 401, ksim_status(401, "Unauthorized", "Unauthorized", jv_null()), jv_null());
}

/*
 * Who a request is made as: the authenticated user, or the one it
 * impersonates. The strings are the headers' (kept by MHD for the request)
 * or in owned; who_release() frees what it holds.
 */
struct who {
	const char *user, *uid;
	const char **groups, **extra;	/* ksim_request's: NULL-terminated, NULL when impersonating nobody */
	size_t ngroups, nextra;
	const char *ask_user;	/* the Impersonate-* headers: the first Impersonate-User, */
	const char **ask_groups;	/* each Impersonate-Group (NULL-terminated), */
	size_t nask_groups;
	int asked;		/* any of them (Impersonate-Extra-KEY values go to extra) */
	char **owned;
	size_t nowned;
};

static void push(const char ***a, size_t *n, const char *s)
{
	*a = kop_realloc(*a, (*n + 2) * sizeof(**a));
	(*a)[(*n)++] = s;
	(*a)[*n] = NULL;
}

static const char *own(struct who *w, char *s)
{
	w->owned = kop_realloc(w->owned, (w->nowned + 1) * sizeof(*w->owned));
	w->owned[w->nowned++] = s;
	return s;
}

static void who_release(struct who *w)
{
	for (size_t i = 0; i < w->nowned; i++)
		free(w->owned[i]);
	free(w->owned);
	free(w->groups);
	free(w->extra);
	free(w->ask_groups);
}

/*
 * Decodes each %XX of s in place but %00, which stays as it is (a NUL would
 * end the C string: GET .../configmaps/a%00b would read the object "a",
 * where kube-apiserver looks up "a\x00b"); a % without two hex digits stays
 * too. Returns the new length.
 */
static size_t percent_decode(char *s)
{
	char *w = s;
	const char *r = s;

	while (*r) {
		int hi = r[0] == '%' ? kop_hex_digit((unsigned char)r[1]) : -1;
		int lo = hi >= 0 ? kop_hex_digit((unsigned char)r[2]) : -1;

		if (lo >= 0 && (hi || lo)) {
			*w++ = (char)(hi * 16 + lo);
			r += 3;
		} else {
			*w++ = *r++;
		}
	}
	*w = 0;
	return (size_t)(w - s);
}

/*
 * The key of an Impersonate-Extra-KEY header as kube-apiserver reads it:
 * in lower case, then %-decoded (url.PathUnescape; malformed: as it is).
 * A %00 stays as it is (a NUL would end the C string).
 */
static char *extra_key(const char *name)
{
	char *k = kop_strdup(name);
	const char *r;

	for (char *p = k; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	for (r = k; *r; r++)
		if (*r == '%' && (kop_hex_digit((unsigned char)r[1]) < 0 || kop_hex_digit((unsigned char)r[2]) < 0))
			return k;	/* malformed: as it is */
	percent_decode(k);
	return k;
}

static enum MHD_Result impersonate_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	static const char extra[] = "Impersonate-Extra-";
	struct who *w = cls;

	(void)kind;
	if (!value)
		value = "";
	if (!strcasecmp(key, "Impersonate-User")) {
		w->asked = 1;
		if (!w->ask_user)	/* Header.Get: the first */
			w->ask_user = value;
	} else if (!strcasecmp(key, "Impersonate-Group")) {
		w->asked = 1;
		push(&w->ask_groups, &w->nask_groups, value);
	} else if (!strcasecmp(key, "Impersonate-Uid")) {
		w->asked = 1;
		if (!w->uid)
			w->uid = value;
	} else if (!strncasecmp(key, extra, sizeof(extra) - 1)) {
		w->asked = 1;
		push(&w->extra, &w->nextra, own(w, extra_key(key + sizeof(extra) - 1)));
		push(&w->extra, &w->nextra, value);
	}
	return MHD_YES;
}

/*
 * buildImpersonationRequests' error: groups, extra or a uid without a
 * user, a 500 written by responsewriters.InternalError (http.Error: plain
 * text, HTML-escaped) naming the requests as Go prints []ObjectReference.
 */
static enum MHD_Result impersonate_no_user(struct MHD_Connection *c, struct conn *cn, const struct who *w)
{
	struct kop_buf m = KOP_BUF_INIT, e = KOP_BUF_INIT;
	const char *sep = "";
	enum MHD_Result ret;

	kop_buf_adds(&m, "Internal Server Error: ");
	kop_buf_add_quoted(&m, cn->uri ? cn->uri : "", cn->uri ? strlen(cn->uri) : 0);
	kop_buf_adds(&m, ": requested [");
	for (size_t i = 0; i < w->nask_groups; i++, sep = " ")
		kop_buf_addf(&m, "%s{Group  %s    }", sep, w->ask_groups[i]);
	for (size_t i = 0; i + 1 < w->nextra; i += 2, sep = " ")
		kop_buf_addf(&m, "%s{UserExtra  %s  authentication.k8s.io/v1  %s}", sep, w->extra[i + 1], w->extra[i]);
	if (w->uid && *w->uid)
		kop_buf_addf(&m, "%s{UID  %s  authentication.k8s.io/v1  }", sep, w->uid);
	kop_buf_adds(&m, "] without impersonating a user");
	for (const char *p = m.buf; *p; p++) {
		switch (*p) {
		case '&': kop_buf_adds(&e, "&amp;"); break;
		case '<': kop_buf_adds(&e, "&lt;"); break;
		case '>': kop_buf_adds(&e, "&gt;"); break;
		case '"': kop_buf_adds(&e, "&#34;"); break;
		case '\'': kop_buf_adds(&e, "&#39;"); break;
		default: kop_buf_add(&e, p, 1);
		}
	}
	kop_buf_adds(&e, "\n");
	ret = send_text(c, 500, e.buf, NULL);
	kop_buf_release(&m);
	kop_buf_release(&e);
	return ret;
}

/* The requester (w->user) may impersonate: 0, else -1 and *st the 403 (lock held). */
static int may_impersonate(const struct who *w, const char *group, const char *resource, const char *sub,
			   const char *ns, const char *name, jv *st)
{
	struct ksim_attrs a = { 0 };

	a.user = w->user;
	a.verb = "impersonate";
	a.group = group;
	a.resource = resource;
	a.subresource = sub;
	a.namespace = ns;
	a.name = *name ? name : NULL;	/* (an empty header's: no name, as in NewForbidden) */
	return ksim_authorize(&a, st);
}

/*
 * Authentication, then impersonation as kube-apiserver's WithImpersonation
 * does it: with Impersonate-User the request is made as that user, in the
 * groups of Impersonate-Group (none given, a ServiceAccount's user
 * system:serviceaccount:NS:NAME is in system:serviceaccounts and
 * system:serviceaccounts:NS), with the uid of Impersonate-Uid and the
 * values of Impersonate-Extra-KEY, once the requester may impersonate each
 * of them (verb impersonate: users, groups and serviceaccounts in the core
 * group; uids and userextras/KEY in authentication.k8s.io), in that order;
 * system:authenticated is added unless system:authenticated or
 * system:unauthenticated is among the groups (system:unauthenticated for
 * system:anonymous). 1 and *w, or 0 and the answer queued: 401 for a token
 * not known, 403 for the first thing it may not impersonate, 500 for
 * groups, extra or a uid without a user.
 */
static int identify(struct MHD_Connection *c, struct conn *cn, const char *method, const char *url, struct who *w,
		    enum MHD_Result *ret)
{
	char ns[64], *name = NULL;
	const char *u, *denied = NULL;
	int sa = 0, add = 1;
	jv st = jv_invalid();

	memset(w, 0, sizeof(*w));
	if (!(w->user = authenticate(c))) {
		*ret = unauthorized(c, method, url);
		return 0;
	}
	MHD_get_connection_values(c, MHD_HEADER_KIND, impersonate_header, w);
	if (!w->asked)
		return 1;
	u = w->ask_user;
	if (!u || !*u) {
		if (w->nask_groups || w->nextra || (w->uid && *w->uid)) {
			*ret = impersonate_no_user(c, cn, w);
			return 0;
		}
		w->uid = NULL;	/* only empty headers: nothing asked */
		return 1;
	}
	/* serviceaccount.SplitUsername: system:serviceaccount:NS:NAME, a label and a subdomain */
	if (!strncmp(u, "system:serviceaccount:", 22)) {
		const char *rest = u + 22, *colon = strchr(rest, ':');

		if (colon && !strchr(colon + 1, ':') && (size_t)(colon - rest) < sizeof(ns)) {
			memcpy(ns, rest, (size_t)(colon - rest));
			ns[colon - rest] = 0;
			name = kop_strdup(colon + 1);
			own(w, name);
			sa = kop_dns1123(ns, 1) && kop_dns1123(name, 0);
		}
	}
	ksim_lock();	/* the authorizer reads the bindings in the store */
	if (sa ? may_impersonate(w, "", "serviceaccounts", NULL, ns, name, &st) :
		 may_impersonate(w, "", "users", NULL, NULL, u, &st))
		denied = "user";
	for (size_t i = 0; !denied && i < w->nask_groups; i++)
		if (may_impersonate(w, "", "groups", NULL, NULL, w->ask_groups[i], &st))
			denied = "group";
	for (size_t i = 0; !denied && i + 1 < w->nextra; i += 2)
		if (may_impersonate(w, "authentication.k8s.io", "userextras", w->extra[i], NULL, w->extra[i + 1], &st))
			denied = "extra";
	if (!denied && w->uid && *w->uid && may_impersonate(w, "authentication.k8s.io", "uids", NULL, NULL, w->uid, &st))
		denied = "uid";
	ksim_unlock();
	if (denied) {
		if (ksim.verbose)
			log_request(c, method, url, 403, JV_OBJECT(jv_string("impersonate"), jv_string(denied)));
		*ret = send_json(c, 403, st, jv_null());
		return 0;
	}
	/* the new user */
	w->user = u;
	if (w->uid && !*w->uid)
		w->uid = NULL;
	for (size_t i = 0; i < w->nask_groups; i++)
		push(&w->groups, &w->ngroups, w->ask_groups[i]);
	if (sa && !w->nask_groups) {
		struct kop_buf g = KOP_BUF_INIT;

		kop_buf_addf(&g, "system:serviceaccounts:%s", ns);
		push(&w->groups, &w->ngroups, "system:serviceaccounts");
		push(&w->groups, &w->ngroups, own(w, kop_buf_detach(&g, NULL)));
	}
	for (size_t i = 0; i < w->ngroups; i++)
		if (!strcmp(w->groups[i], "system:unauthenticated") ||
		    (strcmp(u, "system:anonymous") && !strcmp(w->groups[i], "system:authenticated")))
			add = 0;
	if (add)
		push(&w->groups, &w->ngroups,
		     strcmp(u, "system:anonymous") ? "system:authenticated" : "system:unauthenticated");
	return 1;
}

struct health_query {
	int verbose;
	jv exclude;	/* object: name -> true, the names not yet matched */
};

static enum MHD_Result health_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct health_query *q = cls;

	(void)kind;
	if (!strcmp(key, "verbose")) {
		q->verbose = 1;	/* present is enough, as url.Query()["verbose"] */
	} else if (!strcmp(key, "exclude") && value) {
		q->exclude = jv_object_set(q->exclude, jv_string(value), jv_true());
	}
	return MHD_YES;
}

/*
 * /healthz, /livez, /readyz and /ENDPOINT/CHECK (handleRootHealth and
 * adaptCheckToHandler): "ok"; with ?verbose one "[+]NAME ok" line per
 * check, then "ENDPOINT check passed"; ?exclude=NAME (repeatable) shows
 * "[+]NAME excluded: ok" and names it matched no check in a warning line.
 * 0 when url is none of them. As kube-apiserver serves them behind its
 * filters: a token not known is 401, then the path is authorized as any
 * non-resource request (system:public-info-viewer lets everyone, anonymous
 * too, get the three paths, not a single check).
 */
static int health(struct MHD_Connection *c, struct conn *cn, const char *method, const char *url,
		  enum MHD_Result *ret)
{
	static const char *const roots[] = { "healthz", "livez", "readyz" };
	struct health_query q = { 0, jv_object() };
	struct kop_buf b = KOP_BUF_INIT;
	const char *root = NULL, *check = NULL;
	struct who w;
	int readyz;

	for (size_t i = 0; i < sizeof(roots) / sizeof(*roots) && !root; i++) {
		size_t n = strlen(roots[i]);

		if (url[0] == '/' && !strncmp(url + 1, roots[i], n) && (!url[n + 1] || url[n + 1] == '/')) {
			root = roots[i];
			check = url[n + 1] ? url + n + 2 : NULL;
		}
	}
	if (!root) {
		jv_free(q.exclude);
		return 0;
	}
	if (!identify(c, cn, method, url, &w, ret)) {
		who_release(&w);
		jv_free(q.exclude);
		return 1;
	}
	{
		struct ksim_attrs a = { 0 };
		char verb[16];
		jv st;
		int denied;

		a.user = w.user;
		a.groups = w.groups;
		a.verb = ksim_nonresource_verb(method, verb, sizeof(verb));
		a.group = a.resource = "";
		a.path = url;
		ksim_lock();	/* the authorizer reads the bindings in the store */
		denied = ksim_authorize(&a, &st) < 0;
		ksim_unlock();
		who_release(&w);
		if (denied) {
			*ret = send_json(c, 403, st, jv_null());
			jv_free(q.exclude);
			return 1;
		}
	}
	readyz = !strcmp(root, "readyz");
	if (check) {
		for (size_t i = 0; i < sizeof(health_checks) / sizeof(*health_checks); i++) {
			if ((readyz || !health_checks[i].readyz_only) && !strcmp(check, health_checks[i].name)) {
				*ret = send_text(c, 200, "ok", NULL);
				jv_free(q.exclude);
				return 1;
			}
		}
		*ret = send_text(c, 404, "404 page not found\n", NULL);
		jv_free(q.exclude);
		return 1;
	}
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, health_arg, &q);
	for (size_t i = 0; i < sizeof(health_checks) / sizeof(*health_checks); i++) {
		const char *name = health_checks[i].name;

		if (health_checks[i].readyz_only && !readyz)
			continue;
		if (jv_object_has(jv_copy(q.exclude), jv_string(name))) {
			q.exclude = jv_object_delete(q.exclude, jv_string(name));
			kop_buf_addf(&b, "[+]%s excluded: ok\n", name);
		} else {
			kop_buf_addf(&b, "[+]%s ok\n", name);
		}
	}
	if (jv_object_length(jv_copy(q.exclude)) > 0) {
		/* sets.String List(): sorted; each %q, joined by "," */
		jv left = jv_keys(jv_copy(q.exclude));

		kop_buf_adds(&b, "warn: some health checks cannot be excluded: no matches for ");
		jv_array_foreach(left, i, n) {
			if (i)
				kop_buf_adds(&b, ",");
			kop_buf_add_quoted(&b, jv_string_value(n), jv_string_length_bytes(jv_copy(n)));
			jv_free(n);
		}
		jv_free(left);
		kop_buf_adds(&b, "\n");
	}
	kop_buf_addf(&b, "%s check passed\n", root);
	*ret = send_text(c, 200, q.verbose ? b.buf : "ok", NULL);
	kop_buf_release(&b);
	jv_free(q.exclude);
	return 1;
}

/* The admin endpoints (loopback, no authentication: tests and fault injection). */
static int admin(const char *method, const char *url, const char **msg)
{
	if (strcmp(method, "POST"))
		return 405;
	ksim_lock();
	if (!strcmp(url, "/ksim/cut-watches")) {
		ksim.cut_epoch++;
		*msg = "watches cut\n";
	} else if (!strcmp(url, "/ksim/error-watches")) {
		ksim.error_epoch++;
		*msg = "watches sent an ERROR 410 event\n";
	} else if (!strcmp(url, "/ksim/compact")) {
		ksim.compacted = ksim.rv;
		*msg = "history compacted\n";
	} else {
		ksim_unlock();
		return 404;
	}
	pthread_cond_broadcast(&ksim.changed);
	ksim_watch_wake_all();
	ksim_unlock();
	log_info("admin: %s", url);
	return 200;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			       const char *version, const char *upload_data, size_t *upload_size, void **con_cls)
{
	struct conn *cn = *con_cls;
	struct ksim_request rq = { 0 };
	struct ksim_response rs;
	enum MHD_Result ret;
	struct who who;

	(void)cls;
	(void)version;
	if (!cn->started) {
		cn->started = 1;
		return MHD_YES;
	}
	if (*upload_size) {
		if (cn->body.len + *upload_size > MAX_BODY)
			cn->too_big = 1;
		else
			kop_buf_add(&cn->body, upload_data, *upload_size);
		*upload_size = 0;
		return MHD_YES;
	}
	if (!strncmp(url, "/ksim/", 6)) {
		int fr;

		if (ksim_faults_admin(c, method, url, cn->body.buf, cn->body.len, &fr))
			return fr ? MHD_YES : MHD_NO;
		if (ksim_stats_admin(c, method, url, cn->body.buf, cn->body.len, &fr))
			return fr ? MHD_YES : MHD_NO;
		const char *msg = "not found\n";
		int code = admin(method, url, &msg);

		return send_text(c, code, code == 405 ? "method not allowed\n" : msg, NULL);
	}
	{
		enum MHD_Result hr;

		if (health(c, cn, method, url, &hr))
			return hr;
	}
	if (cn->too_big) {
		jv s = ksim_status(413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728", jv_null());

		return send_json(c, 413, s, jv_null());
	}
	ksim_stats_count(c, method);	/* stats.c */
	{
		int fr;

		if (ksim_faults_request(c, method, url, &fr))
			return fr ? MHD_YES : MHD_NO;
	}
	if (!identify(c, cn, method, url, &who, &ret)) {
		who_release(&who);
		return ret;
	}
	rq.user = who.user;
	rq.groups = who.groups;
	rq.extra = who.extra;
	rq.uid = who.uid;
	rq.method = method;
	rq.path = url;
	rq.query = jv_object();
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, (MHD_KeyValueIterator)collect_arg, &rq.query);
	rq.content_type = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	rq.accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
	rq.user_agent = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_USER_AGENT);
	rq.body = cn->body.buf;
	rq.body_len = cn->body.len;
	ksim_handle(&rq, &rs);
	ksim_persist_sync();	/* persist.c: --data, durable before the answer */
	if (ksim.verbose)
		log_request(c, method, url, rs.code, request_fields(&rq, rs.watch != NULL));
	if (rs.watch) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		struct stream *st = kop_calloc(1, sizeof(*st));
		struct MHD_Response *r;

		if (ci)
			ksim_watch_set_fd(rs.watch, ci->connect_fd);
		st->w = rs.watch;
		st->agent = kop_strdup(user_agent(c));
		st->resource = kop_strdup(rs.resource);
		r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, watch_cb, st, watch_free_cb);

		rs.watch = NULL;
		add_common_headers(r, "application/json");
		ret = MHD_queue_response(c, 200, r);
		MHD_destroy_response(r);
	} else if (rs.text) {
		size_t n = rs.text_len ? rs.text_len : strlen(rs.text);

		if (strcmp(method, "HEAD"))
			ksim_stats_sent(c, method, rs.resource, n);
		ret = send_bytes(c, rs.code, rs.text, n, rs.content_type);
	} else {
		/* send_json_bytes ends a body that is not verbatim with a newline */
		size_t n = rs.json_len + (!rs.json_verbatim && (!rs.json_len || rs.json[rs.json_len - 1] != '\n'));

		if (strcmp(method, "HEAD"))
			ksim_stats_sent(c, method, rs.resource, n);
		ret = send_json_bytes(c, rs.code, rs.json, rs.json_len, rs.json_verbatim, jv_copy(rs.warnings));
		rs.json = NULL;	/* MHD frees it */
	}
	ksim_response_release(&rs);
	jv_free(rq.query);
	who_release(&who);
	return ret;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct conn *cn = *con_cls;

	(void)cls;
	(void)c;
	(void)toe;
	if (cn) {
		kop_buf_release(&cn->body);
		free(cn->uri);
		free(cn);
		*con_cls = NULL;
	}
}

/* Each request's state, made as it arrives with the request target as sent (MHD_OPTION_URI_LOG_CALLBACK). */
static void *uri_log(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct conn *cn = kop_calloc(1, sizeof(*cn));

	(void)cls;
	(void)c;
	cn->uri = kop_strdup(uri ? uri : "");
	return cn;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct kop_buf b = KOP_BUF_INIT;

	(void)cls;
	kop_buf_vaddf(&b, fmt, ap);
	while (b.len && b.buf[b.len - 1] == '\n')
		b.buf[--b.len] = 0;
	log_debug("libmicrohttpd: %s", b.buf);
	kop_buf_release(&b);
}

/* libmicrohttpd's unescaping of the path and the query values, but for %00 (percent_decode). */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
	(void)cls;
	(void)c;
	return percent_decode(s);
}

/*
 * How many connections to accept at once: as many as the descriptors allow
 * (the soft limit raised to the hard one), less a margin for ksim's own
 * files. libmicrohttpd's default, 1020, is below what an operator with a
 * watch per instance namespace opens at a thousand instances.
 */
static unsigned connection_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 1020;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || getrlimit(RLIMIT_NOFILE, &rl) < 0)
			return 1020;
	}
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 65536 + 64)
		return 65536;
	return rl.rlim_cur > 1100 ? (unsigned)(rl.rlim_cur - 64) : 1020;
}

struct MHD_Daemon *ksim_http_start(int port, const char *cert_pem, const char *key_pem, int *bound, char *err)
{
	unsigned limit = connection_limit();
	struct sockaddr_in sa;
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
			 MHD_USE_ERROR_LOG | MHD_USE_ITC;
	struct MHD_Daemon *d;
	const union MHD_DaemonInfo *info;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	errno = 0;	/* bind's, when the daemon does not start */
	if (cert_pem) {
		if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
			kop_error(err, "unable to serve TLS: libmicrohttpd was built without TLS support");
			return NULL;
		}
		flags |= MHD_USE_TLS;
		d = MHD_start_daemon(flags, 0, NULL, NULL, handler, NULL, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
				     MHD_OPTION_SOCK_ADDR, &sa,
				     MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_URI_LOG_CALLBACK, uri_log, NULL,
				     MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_CONNECTION_TIMEOUT,
				     (unsigned)600, MHD_OPTION_CONNECTION_LIMIT, limit,
				     MHD_OPTION_HTTPS_MEM_CERT, cert_pem, MHD_OPTION_HTTPS_MEM_KEY, key_pem,
				     MHD_OPTION_END);
	} else {
		d = MHD_start_daemon(flags, 0, NULL, NULL, handler, NULL, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
				     MHD_OPTION_SOCK_ADDR, &sa,
				     MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_URI_LOG_CALLBACK, uri_log, NULL,
				     MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_CONNECTION_TIMEOUT,
				     (unsigned)600, MHD_OPTION_CONNECTION_LIMIT, limit, MHD_OPTION_END);
	}
	if (!d) {
		kop_error(err, "unable to listen on '127.0.0.1:%d': %s", port, errno ? strerror(errno) : "refused");
		return NULL;
	}
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	*bound = info ? info->port : port;
	return d;
}
