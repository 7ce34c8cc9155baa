/*
 * The request path: routing of /api and /apis URLs, the verbs (list, get,
 * create, update, patch, delete, deletecollection, watch set-up) with
 * kube-apiserver's semantics and wording (guides/kube-api.md §1-4, the
 * recordings). Every write ends in ksim_store_commit().
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/evp.h>
#include "ksim.h"
#include "sim.h"
#include "patch.h"
#include "schema.h"
#include "ssa.h"
#include "yaml.h"
#include "banned.h"

struct route {
	struct ksim_type *t;
	char *ns;		/* from the URL, or NULL */
	char *name;		/* NULL for a collection */
	char *sub;		/* "status", "finalize", or NULL */
};

enum validation { VALIDATE_WARN, VALIDATE_STRICT, VALIDATE_IGNORE };

struct wopts {
	int dry_run;
	enum validation validation;	/* fieldValidation */
	jv *warnings;		/* the response's Warning headers */
	const char *manager;
	const char *user;
	int put;		/* an update (PUT): an empty resourceVersion is an unconditional update */
	int force;		/* apply: force conflicts */
};

/* ---- Status ------------------------------------------------------------ */

jv ksim_status(int code, const char *reason, const char *message, jv details)
{
	jv s = JV_OBJECT(jv_string("kind"), jv_string("Status"), jv_string("apiVersion"), jv_string("v1"),
			 jv_string("metadata"), jv_object(), jv_string("status"),
			 jv_string(code < 400 ? "Success" : "Failure"));

	if (message)
		s = jv_object_set(s, jv_string("message"), jv_string(message));
	if (reason)
		s = jv_object_set(s, jv_string("reason"), jv_string(reason));
	if (jv_get_kind(details) == JV_KIND_OBJECT)
		s = jv_object_set(s, jv_string("details"), details);
	else
		jv_free(details);
	return jv_object_set(s, jv_string("code"), jv_number(code));
}

/* "configmaps" or "deployments.apps": GroupResource.String(). */
static char *gr_string(const struct ksim_type *t)
{
	struct kop_buf b = KOP_BUF_INIT;

	if (*t->group)
		kop_buf_addf(&b, "%s.%s", t->resource, t->group);
	else
		kop_buf_adds(&b, t->resource);
	return kop_buf_detach(&b, NULL);
}

static jv details(const struct ksim_type *t, const char *name)
{
	jv d = jv_object();

	if (name)
		d = jv_object_set(d, jv_string("name"), jv_string(name));
	if (*t->group)
		d = jv_object_set(d, jv_string("group"), jv_string(t->group));
	return jv_object_set(d, jv_string("kind"), jv_string(t->resource));
}

static jv err_status(const struct ksim_type *t, const char *name, int code, const char *reason, const char *fmt,
		     ...) __attribute__((format(printf, 5, 6)));
static jv err_status(const struct ksim_type *t, const char *name, int code, const char *reason, const char *fmt, ...)
{
	struct kop_buf b = KOP_BUF_INIT;
	va_list ap;
	jv s;

	va_start(ap, fmt);
	kop_buf_vaddf(&b, fmt, ap);
	va_end(ap);
	s = ksim_status(code, reason, b.buf, t ? details(t, name) : jv_null());
	kop_buf_release(&b);
	return s;
}

static jv not_found(const struct ksim_type *t, const char *name)
{
	char *gr = gr_string(t);
	jv s = err_status(t, name, 404, "NotFound", "%s \"%s\" not found", gr, name);

	free(gr);
	return s;
}

/* The code of a Status object. */
static int status_code(jv st)
{
	jv c = jv_get_kind(st) == JV_KIND_OBJECT ? jv_object_get(jv_copy(st), jv_string("code")) : jv_invalid();
	int code = jv_get_kind(c) == JV_KIND_NUMBER ? (int)jv_number_value(c) : 500;

	jv_free(c);
	return code;
}

static jv bad_request(const char *msg)
{
	return ksim_status(400, "BadRequest", msg, jv_null());
}

/*
 * The 400 of a body whose metadata.name (n bytes at s: it may hold a NUL)
 * is not the one on the URL; printed as it is, as kube-apiserver's %s does.
 */
static jv name_mismatch(const char *s, size_t n, const char *url_name)
{
	struct kop_buf b = KOP_BUF_INIT;
	jv st;

	kop_buf_adds(&b, "the name of the object (");
	kop_buf_add(&b, s, n);
	kop_buf_addf(&b, ") does not match the name on the URL (%s)", url_name);
	st = jv_object_set(bad_request(""), jv_string("message"), jv_string_sized(b.buf, (int)b.len));
	kop_buf_release(&b);
	return st;
}

/* Whether the n bytes at s (a NUL byte among them counts) are not the string want. */
static int bytes_differ(const char *s, size_t n, const char *want)
{
	return n != strlen(want) || memcmp(s, want, n);
}

/* Whether the string at path in obj is there, not empty, and not want. */
static int str_set_and_differs(jv obj, const char *path, const char *want)
{
	size_t n;
	const char *s = ksim_strl(obj, path, &n);

	return s && n && bytes_differ(s, n, want);
}

/* 422 Invalid: name a string (consumed; any byte); causes an array of {reason, message, field}. */
static jv invalid_jv(const struct ksim_type *t, jv name, jv causes)
{
	struct kop_buf kg = KOP_BUF_INIT;
	char *msg;
	jv d, s;

	if (jv_get_kind(name) != JV_KIND_STRING) {
		jv_free(name);
		name = jv_string("");
	}
	if (*t->group)
		kop_buf_addf(&kg, "%s.%s", t->kind, t->group);
	else
		kop_buf_adds(&kg, t->kind);
	msg = kop_schema_invalid_message(kg.buf, jv_copy(name), causes);
	d = JV_OBJECT(jv_string("name"), name);
	if (*t->group)
		d = jv_object_set(d, jv_string("group"), jv_string(t->group));
	d = jv_object_set(d, jv_string("kind"), jv_string(t->kind));
	d = jv_object_set(d, jv_string("causes"), causes);
	s = ksim_status(422, "Invalid", msg, d);
	free(msg);
	kop_buf_release(&kg);
	return s;
}

static jv invalid(const struct ksim_type *t, const char *name, jv causes)
{
	return invalid_jv(t, jv_string(name ? name : ""), causes);
}

static jv cause(const char *reason, const char *message, const char *field)
{
	return JV_OBJECT(jv_string("reason"), jv_string(reason), jv_string("message"), jv_string(message),
			 jv_string("field"), jv_string(field));
}

static jv conflict(const struct ksim_type *t, const char *name)
{
	char *gr = gr_string(t);
	jv s = err_status(t, name, 409, "Conflict",
			  "Operation cannot be fulfilled on %s \"%s\": the object has been modified; please apply your changes to the latest version and try again",
			  gr, name);

	free(gr);
	return s;
}

/* ---- small jv helpers ---------------------------------------------------- */

static jv meta(jv obj)
{
	jv m = jv_get_kind(obj) == JV_KIND_OBJECT ? jv_object_get(jv_copy(obj), jv_string("metadata")) : jv_invalid();

	if (jv_get_kind(m) != JV_KIND_OBJECT) {
		jv_free(m);
		m = jv_object();
	}
	return m;
}

static jv set_meta(jv obj, const char *key, jv val)
{
	jv m = meta(obj);

	if (jv_get_kind(val) == JV_KIND_INVALID || jv_get_kind(val) == JV_KIND_NULL) {
		jv_free(val);
		m = jv_object_delete(m, jv_string(key));
	} else {
		m = jv_object_set(m, jv_string(key), val);
	}
	return jv_object_set(obj, jv_string("metadata"), m);
}

static jv get_meta(jv obj, const char *key)
{
	return jv_object_get(meta(obj), jv_string(key));
}

static jv field(jv obj, const char *key)
{
	if (jv_get_kind(obj) != JV_KIND_OBJECT)
		return jv_null();
	return jv_object_get(jv_copy(obj), jv_string(key));
}

static int has_items(jv v)
{
	int n = jv_get_kind(v) == JV_KIND_ARRAY ? jv_array_length(jv_copy(v)) : 0;

	jv_free(v);
	return n > 0;
}

static const char *query(const struct ksim_request *rq, const char *name)
{
	jv v;

	if (jv_get_kind(rq->query) != JV_KIND_OBJECT)
		return NULL;
	v = jv_object_get(jv_copy(rq->query), jv_string(name));
	jv_free(v);	/* still held by rq->query */
	return jv_get_kind(v) == JV_KIND_STRING ? jv_string_value(v) : NULL;
}

static int query_bool(const struct ksim_request *rq, const char *name)
{
	const char *v = query(rq, name);

	return v && *v && strcmp(v, "0") && strcasecmp(v, "false");
}

/* The object as a client of type t sees it: apiVersion/kind of t, converted, in canonical key order. */
static jv present(const struct ksim_type *t, jv obj)
{
	if (!strcmp(t->gr, "events")) {
		/* one store, two APIs: core/v1 is stored; events.k8s.io/v1 renames fields */
		static const char *const ren[][2] = { { "message", "note" }, { "involvedObject", "regarding" },
						     { "reportingComponent", "reportingController" },
						     { "firstTimestamp", "deprecatedFirstTimestamp" },
						     { "lastTimestamp", "deprecatedLastTimestamp" },
						     { "count", "deprecatedCount" }, { "source", "deprecatedSource" } };
		int to_new = !strcmp(t->group, "events.k8s.io");
		int from_new = !to_new && jv_equal(field(obj, "apiVersion"), jv_string("events.k8s.io/v1"));

		if (to_new || from_new) {
			for (size_t i = 0; i < sizeof(ren) / sizeof(*ren); i++) {
				const char *from = ren[i][to_new ? 0 : 1], *to = ren[i][to_new ? 1 : 0];
				jv v = field(obj, from);

				if (jv_is_valid(v) && jv_get_kind(v) != JV_KIND_NULL) {
					obj = jv_object_delete(obj, jv_string(from));
					obj = jv_object_set(obj, jv_string(to), v);
				} else {
					jv_free(v);
				}
			}
		}
	}
	obj = ksim_convert(t, obj);
	obj = jv_object_set(obj, jv_string("apiVersion"), jv_string(t->api_version));
	obj = jv_object_set(obj, jv_string("kind"), jv_string(t->kind));
	/* stored objects are in canonical order already; answer() orders single objects */
	return obj;
}

/* ---- routing -------------------------------------------------------------- */

static void route_release(struct route *r)
{
	free(r->ns);
	free(r->name);
	free(r->sub);
	memset(r, 0, sizeof(*r));
}

/* 0 = routed; -1 = unknown path (plain 404). */
static int route(const char *path, struct route *r)
{
	char *segs[9];
	int n = 0, i, more = 0;
	char *copy = kop_strdup(path), *p = copy, *version;
	const char *group;
	int ret = -1;

	memset(r, 0, sizeof(*r));
	while (*p == '/')
		p++;
	while (*p) {
		char *s = strchr(p, '/');

		if (n == 9) {
			more = 1;
			break;
		}
		if (s)
			*s = 0;
		segs[n++] = p;
		if (!s)
			break;
		p = s + 1;
	}
	if (more)
		goto out;
	if (n >= 2 && !strcmp(segs[0], "api")) {
		group = "";
		version = segs[1];
		i = 2;
	} else if (n >= 3 && !strcmp(segs[0], "apis")) {
		group = segs[1];
		version = segs[2];
		i = 3;
	} else {
		goto out;
	}
	for (int k = i; k < n; k++)
		if (!*segs[k])
			goto out;
	if (n - i >= 3 && !strcmp(segs[i], "namespaces") && strcmp(segs[i + 2], "status") &&
	    strcmp(segs[i + 2], "finalize")) {
		r->ns = kop_strdup(segs[i + 1]);
		i += 2;
		r->t = ksim_type_find(group, version, segs[i]);
		if (!r->t || !(r->t->flags & KT_NAMESPACED))
			goto out;
	} else if (n - i >= 1) {
		r->t = ksim_type_find(group, version, segs[i]);
		if (!r->t)
			goto out;
	} else {
		goto out;
	}
	i++;
	if (n - i > 2)
		goto out;
	if (n - i >= 1)
		r->name = kop_strdup(segs[i]);
	if (n - i == 2) {
		r->sub = kop_strdup(segs[i + 1]);
		if (!strcmp(r->sub, "status") ? !(r->t->flags & KT_STATUS) :
		    !strcmp(r->sub, "scale") ? !(r->t->flags & KT_SCALE) :
		    !strcmp(r->sub, "finalize") ? strcmp(r->t->gr, "namespaces") :
		    ksim_pod_subresource_name(r->sub) ? strcmp(r->t->gr, "pods") : 1)
			goto out;
	}
	ret = 0;
out:
	free(copy);
	if (ret < 0)
		route_release(r);
	return ret;
}

/* ---- authorization -------------------------------------------------------- */

int ksim_authorize(const struct ksim_attrs *a, jv *status)
{
	return ksim_authorize_why(a, status, NULL);
}

int ksim_authorize_why(const struct ksim_attrs *a, jv *status, struct kop_buf *reason)
{
	struct kop_buf m = KOP_BUF_INIT, res = KOP_BUF_INIT;
	jv d;

	/*
	 * Without --authorization rbac, authenticated users may do everything;
	 * anonymous requests (no token while --token is set) only reach what
	 * system:public-info-viewer allows (/version and the health paths, rbac.c
	 * decides).
	 */
	switch (ksim_rbac_authorize(a, reason)) {	/* rbac.c: --authorization rbac */
	case 1:
		return 0;
	case 0:
		if (strcmp(a->user, "system:anonymous"))
			return 0;
		break;
	}
	if (a->path) {
		/* a non-resource request's verb is its method in lower case (RequestInfo) */
		kop_buf_addf(&m, "forbidden: User \"%s\" cannot %s path \"%s\"", a->user, a->verb, a->path);
		*status = ksim_status(403, "Forbidden", m.buf, jv_object());
		kop_buf_release(&m);
		return -1;
	}
	kop_buf_adds(&res, a->resource);
	if (a->subresource)
		kop_buf_addf(&res, "/%s", a->subresource);
	/* the prefix names the group-qualified resource ("deployments.apps"), no subresource */
	kop_buf_addf(&m, "%s%s%s", a->resource, *a->group ? "." : "", a->group);
	if (a->name)
		kop_buf_addf(&m, " \"%s\" is forbidden: ", a->name);
	else
		kop_buf_adds(&m, " is forbidden: ");
	kop_buf_addf(&m, "User \"%s\" cannot %s resource \"%s\" in API group \"%s\" ", a->user, a->verb, res.buf,
		     a->group);
	if (a->namespace)
		kop_buf_addf(&m, "in the namespace \"%s\"", a->namespace);
	else
		kop_buf_adds(&m, "at the cluster scope");
	d = jv_object();
	if (a->name)
		d = jv_object_set(d, jv_string("name"), jv_string(a->name));
	if (*a->group)
		d = jv_object_set(d, jv_string("group"), jv_string(a->group));
	d = jv_object_set(d, jv_string("kind"), jv_string(a->resource));
	*status = ksim_status(403, "Forbidden", m.buf, d);
	kop_buf_release(&m);
	kop_buf_release(&res);
	return -1;
}

const char *ksim_nonresource_verb(const char *method, char *buf, size_t size)
{
	size_t i;

	for (i = 0; method[i] && i + 1 < size; i++)
		buf[i] = (char)tolower((unsigned char)method[i]);
	buf[i] = 0;
	return buf;
}

/*
 * RequestInfo's split of a path: under /api with three segments or more,
 * or under /apis with four or more, a resource request; any other path is
 * a non-resource request.
 */
static int resource_path(const char *path)
{
	const char *s = path, *e;
	size_t n = 1;

	while (*s == '/')
		s++;
	e = s + strlen(s);
	while (e > s && e[-1] == '/')
		e--;
	for (const char *p = s; p < e; p++)
		n += *p == '/';
	if (!strncmp(s, "api/", 4))
		return n >= 3;
	if (!strncmp(s, "apis/", 5))
		return n >= 4;
	return 0;
}

static const char *verb_of(const struct ksim_request *rq, const struct route *r)
{
	const char *m = rq->method;

	if (!strcmp(m, "GET"))
		return r->name ? "get" : query_bool(rq, "watch") ? "watch" : "list";
	if (!strcmp(m, "POST"))
		return "create";
	if (!strcmp(m, "PUT"))
		return "update";
	if (!strcmp(m, "PATCH"))
		return "patch";
	if (!strcmp(m, "DELETE"))
		return r->name ? "delete" : "deletecollection";
	return "";
}

/*
 * The attributes RequestInfo gives a resource request (resource_path())
 * that routes nowhere, as kube-apiserver authorizes it before its handler
 * finds nothing: /api/V or /apis/G/V, a special verb (watch, proxy: the
 * verb), namespaces/NS (the namespace; the resource namespaces unless
 * status or finalize follows), then RESOURCE[/NAME[/SUBRESOURCE]], the
 * rest not read. path: a copy of the path, cut into the strings a gets.
 */
static void unrouted_attrs(const struct ksim_request *rq, char *path, struct ksim_attrs *a)
{
	char *segs[10], *p = path, *s;
	size_t len = strlen(path);
	int n = 0, i;
	const char *special = NULL;
	struct route r = { 0 };

	while (len && path[len - 1] == '/')
		path[--len] = 0;
	while (*p == '/')
		p++;
	for (;;) {
		s = strchr(p, '/');
		if (s)
			*s = 0;
		if (n < (int)(sizeof(segs) / sizeof(*segs)))
			segs[n++] = p;
		if (!s)
			break;
		p = s + 1;
	}
	i = !strcmp(segs[0], "api") ? 2 : 3;
	a->group = i == 3 ? segs[1] : "";
	if (n - i >= 2 && (!strcmp(segs[i], "watch") || !strcmp(segs[i], "proxy")))
		special = segs[i++];
	a->namespace = NULL;
	if (!strcmp(segs[i], "namespaces") && n - i >= 2) {
		a->namespace = *segs[i + 1] ? segs[i + 1] : NULL;
		if (n - i >= 3 && strcmp(segs[i + 2], "status") && strcmp(segs[i + 2], "finalize"))
			i += 2;
	}
	a->resource = segs[i];
	r.name = n - i >= 2 && *segs[i + 1] ? segs[i + 1] : NULL;
	a->name = r.name;
	a->subresource = n - i >= 3 && *segs[i + 2] && !(special && !strcmp(special, "proxy")) ? segs[i + 2] : NULL;
	a->verb = special ? special : verb_of(rq, &r);
}

/* ---- write helpers ---------------------------------------------------------- */

/* The list shapes of t (computed once per type and schema; lock held). */
static jv listinfo(const struct ksim_type *t)
{
	struct ksim_type *mt = (struct ksim_type *)t;

	if (jv_get_kind(t->listinfo) == JV_KIND_NULL) {
		if ((t->flags & KT_CUSTOM) && jv_get_kind(t->schema) == JV_KIND_OBJECT)
			mt->listinfo = kop_schema_listinfo(t->schema);
		else
			mt->listinfo = kop_builtin_listinfo(t->api_version, t->kind);
	}
	return jv_copy(t->listinfo);
}

/*
 * kop_ssa_track_update() on the parts that can differ: top-level fields
 * equal in old and new (the spec of a status write, say; equal values are
 * often the same storage, compared at once) are left out of both, so the
 * field sets are worked out over what changed only. The managedFields
 * that come out are the same: only changed and removed fields move.
 * old consumed (null on create: nothing left out), new consumed.
 */
static jv track_update(jv old, jv new, const char *manager, const char *sub, const char *now, jv li)
{
	jv rold, rnew, r, md;

	if (jv_get_kind(old) != JV_KIND_OBJECT || jv_get_kind(new) != JV_KIND_OBJECT)
		return kop_ssa_track_update(old, new, manager, sub, now, li);
	rold = jv_object();
	rnew = jv_object();
	jv_object_foreach(new, k, v) {
		const char *ks = jv_string_value(k);
		jv ov = jv_object_get(jv_copy(old), jv_copy(k));
		int keep = !strcmp(ks, "metadata") || !strcmp(ks, "apiVersion") || !strcmp(ks, "kind") ||
			   !jv_is_valid(ov) || !jv_equal(jv_copy(ov), jv_copy(v));

		if (keep) {
			if (jv_is_valid(ov))
				rold = jv_object_set(rold, jv_copy(k), ov);
			else
				jv_free(ov);
			rnew = jv_object_set(rnew, k, v);
		} else {
			jv_free(ov);
			jv_free(k);
			jv_free(v);
		}
	}
	jv_object_foreach(old, k, v) {
		if (!jv_object_has(jv_copy(new), jv_copy(k)))
			rold = jv_object_set(rold, k, v);
		else {
			jv_free(k);
			jv_free(v);
		}
	}
	jv_free(old);
	r = kop_ssa_track_update(rold, rnew, manager, sub, now, li);
	md = jv_object_get(jv_copy(r), jv_string("metadata"));
	jv_free(r);
	if (jv_get_kind(md) == JV_KIND_OBJECT && jv_object_has(jv_copy(md), jv_string("managedFields")))
		new = set_meta(new, "managedFields", jv_object_get(md, jv_string("managedFields")));
	else {
		jv nmd = jv_object_get(jv_copy(new), jv_string("metadata"));

		jv_free(md);
		if (jv_get_kind(nmd) == JV_KIND_OBJECT && jv_object_has(jv_copy(nmd), jv_string("managedFields")))
			new = jv_object_set(new, jv_string("metadata"),
					    jv_object_delete(nmd, jv_string("managedFields")));
		else
			jv_free(nmd);
	}
	return new;
}

static const char *manager_of(const struct ksim_request *rq, char *buf, size_t len)
{
	const char *m = query(rq, "fieldManager");
	const char *ua = rq->user_agent;

	if (m && *m)
		return m;
	if (ua && *ua) {
		size_t n = strcspn(ua, "/");

		if (n >= len)
			n = len - 1;
		memcpy(buf, ua, n);
		buf[n] = 0;
		return buf;
	}
	return "unknown";
}

/* Objects compared without resourceVersion and managedFields' times. */
static jv strip_times(jv obj)
{
	jv mf = get_meta(obj, "managedFields");

	obj = set_meta(obj, "resourceVersion", jv_null());
	if (jv_get_kind(mf) == JV_KIND_ARRAY) {
		jv out = jv_array();

		jv_array_foreach(mf, i, e) {
			if (jv_get_kind(e) == JV_KIND_OBJECT)
				e = jv_object_delete(e, jv_string("time"));
			out = jv_array_append(out, e);
		}
		obj = set_meta(obj, "managedFields", out);
	}
	jv_free(mf);
	return obj;
}

static int same_object(jv a, jv b)
{
	return jv_equal(strip_times(jv_copy(a)), strip_times(jv_copy(b)));
}

/* Everything but metadata (and status when the type has a status subresource). */
static jv spec_part(const struct ksim_type *t, jv obj)
{
	obj = jv_object_delete(obj, jv_string("metadata"));
	obj = jv_object_delete(obj, jv_string("apiVersion"));
	obj = jv_object_delete(obj, jv_string("kind"));
	if (t->flags & KT_STATUS)
		obj = jv_object_delete(obj, jv_string("status"));
	return obj;
}

static double generation(jv obj)
{
	jv g = get_meta(obj, "generation");
	double d = jv_get_kind(g) == JV_KIND_NUMBER ? jv_number_value(g) : 0;

	jv_free(g);
	return d;
}

/* Schema defaulting, pruning and validation of a custom object: 0, or -1 with *err_out a 422. */
/* The fields of orig (borrowed) that pruned (borrowed) lacks, as "spec.x" paths appended to *out. */
static void pruned_paths(jv orig, jv pruned, const char *prefix, jv *out)
{
	if (jv_get_kind(orig) == JV_KIND_OBJECT && jv_get_kind(pruned) == JV_KIND_OBJECT) {
		jv_object_foreach(orig, k, v) {
			struct kop_buf p = KOP_BUF_INIT;
			jv pv = jv_object_get(jv_copy(pruned), jv_copy(k));

			kop_buf_addf(&p, "%s%s%s", prefix, *prefix ? "." : "", jv_string_value(k));
			if (!jv_is_valid(pv))
				*out = jv_array_append(*out, jv_string(p.buf));
			else
				pruned_paths(v, pv, p.buf, out);
			jv_free(pv);
			kop_buf_release(&p);
			jv_free(k);
			jv_free(v);
		}
	} else if (jv_get_kind(orig) == JV_KIND_ARRAY && jv_get_kind(pruned) == JV_KIND_ARRAY) {
		jv_array_foreach(orig, i, v) {
			struct kop_buf p = KOP_BUF_INIT;
			jv pv = jv_array_get(jv_copy(pruned), i);

			kop_buf_addf(&p, "%s[%d]", prefix, i);
			if (jv_is_valid(pv))
				pruned_paths(v, pv, p.buf, out);
			jv_free(pv);
			kop_buf_release(&p);
			jv_free(v);
		}
	}
}

/* A schema's subschema at key (borrowed schema), or null. */
static jv sub_schema(jv schema, const char *key)
{
	if (jv_get_kind(schema) != JV_KIND_OBJECT)
		return jv_null();
	return jv_object_get(jv_copy(schema), jv_string(key));
}

/*
 * kube-apiserver's PruneNonNullableNullsWithoutDefaults, then defaulting:
 * a null in a field that is not nullable is as if the field were absent
 * (its default, if any, then applies). Nulls in arrays are kept.
 */
static jv drop_nulls(jv obj, jv schema)
{
	if (jv_get_kind(obj) == JV_KIND_OBJECT) {
		jv props = sub_schema(schema, "properties"), ap = sub_schema(schema, "additionalProperties");
		jv orig = jv_copy(obj);

		jv_object_foreach(orig, k, v) {
			jv ps = jv_get_kind(props) == JV_KIND_OBJECT ? jv_object_get(jv_copy(props), jv_copy(k))
								    : jv_invalid();

			if (!jv_is_valid(ps) && jv_get_kind(ap) == JV_KIND_OBJECT)
				ps = (jv_free(ps), jv_copy(ap));
			if (jv_get_kind(ps) == JV_KIND_OBJECT) {
				jv nullable = sub_schema(ps, "nullable");

				if (jv_get_kind(v) == JV_KIND_NULL && jv_get_kind(nullable) != JV_KIND_TRUE)
					obj = jv_object_delete(obj, jv_copy(k));
				else if (jv_get_kind(v) == JV_KIND_OBJECT || jv_get_kind(v) == JV_KIND_ARRAY)
					obj = jv_object_set(obj, jv_copy(k), drop_nulls(jv_copy(v), ps));
				jv_free(nullable);
			}
			jv_free(ps);
			jv_free(k);
			jv_free(v);
		}
		jv_free(orig);
		jv_free(props);
		jv_free(ap);
	} else if (jv_get_kind(obj) == JV_KIND_ARRAY) {
		jv items = sub_schema(schema, "items");

		if (jv_get_kind(items) == JV_KIND_OBJECT) {
			int n = jv_array_length(jv_copy(obj));

			for (int i = 0; i < n; i++)
				obj = jv_array_set(obj, i, drop_nulls(jv_array_get(jv_copy(obj), i), items));
		}
		jv_free(items);
	}
	return obj;
}

/*
 * Schema defaulting, pruning and validation of a custom object: 0, or -1
 * with *err_out a 422 (invalid) or 400 (fieldValidation=Strict and unknown
 * fields). With Warn (the default), each pruned field becomes a warning.
 */
static int schema_check(const struct ksim_type *t, jv *obj, const char *name, const struct wopts *o, jv *err_out)
{
	jv causes, orig, unknown = jv_array();
	int custom = (t->flags & KT_CUSTOM) && jv_get_kind(t->schema) == JV_KIND_OBJECT;

	if (!custom) {
		/* a built-in kind: its decoder drops the fields it does not know */
		jv_free(unknown);
		*obj = ksim_builtin_unknown_fields(t, *obj, &unknown);
		if (o->validation == VALIDATE_IGNORE) {
			jv_free(unknown);
			unknown = jv_array();
		}
	} else {
		*obj = drop_nulls(*obj, t->schema);
		orig = jv_copy(*obj);
		*obj = kop_schema_prune(kop_schema_default(*obj, t->schema), t->schema);
		if (o->validation != VALIDATE_IGNORE)
			pruned_paths(orig, *obj, "", &unknown);
		jv_free(orig);
	}
	if (jv_array_length(jv_copy(unknown)) > 0) {
		struct kop_buf m = KOP_BUF_INIT;

		kop_buf_adds(&m, "strict decoding error: ");
		jv_array_foreach(unknown, i, f) {
			struct kop_buf w = KOP_BUF_INIT;

			kop_buf_addf(&w, "unknown field \"%s\"", jv_string_value(f));
			kop_buf_addf(&m, "%s%s", i ? ", " : "", w.buf);
			if (o->validation == VALIDATE_WARN && o->warnings)
				*o->warnings = jv_array_append(*o->warnings, jv_string(w.buf));
			kop_buf_release(&w);
			jv_free(f);
		}
		if (o->validation == VALIDATE_STRICT) {
			*err_out = bad_request(m.buf);
			kop_buf_release(&m);
			jv_free(unknown);
			return -1;
		}
		kop_buf_release(&m);
	}
	jv_free(unknown);
	if (!custom)
		return 0;
	causes = kop_schema_validate(jv_copy(*obj), t->schema);
	if (jv_get_kind(causes) == JV_KIND_ARRAY && jv_array_length(jv_copy(causes)) > 0) {
		*err_out = invalid(t, name, causes);
		return -1;
	}
	jv_free(causes);
	return 0;
}

static jv crd_status(jv crd, const char *now)
{
	jv names = jv_getpath(jv_copy(crd), JV_ARRAY(jv_string("spec"), jv_string("names")));
	jv versions = jv_getpath(jv_copy(crd), JV_ARRAY(jv_string("spec"), jv_string("versions")));
	jv stored = jv_getpath(jv_copy(crd), JV_ARRAY(jv_string("status"), jv_string("storedVersions")));
	jv status;

	if (jv_get_kind(names) == JV_KIND_OBJECT) {
		const char *kind = ksim_str(names, "kind");

		if (!jv_object_has(jv_copy(names), jv_string("singular")) && kind) {
			char *s = kop_strdup(kind);

			for (char *p = s; *p; p++)
				*p = tolower((unsigned char)*p);
			names = jv_object_set(names, jv_string("singular"), jv_string(s));
			free(s);
		}
		if (!jv_object_has(jv_copy(names), jv_string("listKind")) && kind) {
			struct kop_buf b = KOP_BUF_INIT;

			kop_buf_addf(&b, "%sList", kind);
			names = jv_object_set(names, jv_string("listKind"), jv_string(b.buf));
			kop_buf_release(&b);
		}
		crd = jv_setpath(crd, JV_ARRAY(jv_string("spec"), jv_string("names")), jv_copy(names));
	}
	if (jv_get_kind(stored) != JV_KIND_ARRAY)
		stored = (jv_free(stored), jv_array());
	if (jv_get_kind(versions) == JV_KIND_ARRAY) {
		jv_array_foreach(versions, i, v) {
			jv st = jv_object_get(jv_copy(v), jv_string("storage"));

			if (jv_get_kind(st) == JV_KIND_TRUE) {
				jv n = jv_object_get(jv_copy(v), jv_string("name"));
				int seen = 0;

				jv_array_foreach(stored, j, s) {
					seen |= jv_equal(s, jv_copy(n));
				}
				if (!seen)
					stored = jv_array_append(stored, n);
				else
					jv_free(n);
			}
			jv_free(st);
			jv_free(v);
		}
	}
	jv_free(versions);
	{
		jv conv = jv_getpath(jv_copy(crd), JV_ARRAY(jv_string("spec"), jv_string("conversion")));

		if (jv_get_kind(conv) != JV_KIND_OBJECT)
			crd = jv_setpath(crd, JV_ARRAY(jv_string("spec"), jv_string("conversion")),
					 JV_OBJECT(jv_string("strategy"), jv_string("None")));
		jv_free(conv);
	}
	status = JV_OBJECT(jv_string("conditions"),
			   JV_ARRAY(JV_OBJECT(jv_string("type"), jv_string("NamesAccepted"), jv_string("status"),
					      jv_string("True"), jv_string("lastTransitionTime"), jv_string(now),
					      jv_string("reason"), jv_string("NoConflicts"), jv_string("message"),
					      jv_string("no conflicts found")),
				    JV_OBJECT(jv_string("type"), jv_string("Established"), jv_string("status"),
					      jv_string("True"), jv_string("lastTransitionTime"), jv_string(now),
					      jv_string("reason"), jv_string("InitialNamesAccepted"),
					      jv_string("message"), jv_string("the initial names have been accepted"))),
			   jv_string("acceptedNames"), names, jv_string("storedVersions"), stored);
	return jv_object_set(crd, jv_string("status"), status);
}

/*
 * events.k8s.io/v1 creates are validated strictly (k/k ValidateEventCreate);
 * obj is already in the stored core/v1 form. Returns the causes (array).
 */
static jv event_causes(jv obj)
{
	static const char *const req[][2] = { { "eventTime", "eventTime" },
					      { "reportingComponent", "reportingController" },
					      { "reportingInstance", "reportingInstance" },
					      { "action", "action" },
					      { "reason", "reason" } };
	static const char *const dep[][2] = { { "firstTimestamp", "deprecatedFirstTimestamp" },
					      { "lastTimestamp", "deprecatedLastTimestamp" },
					      { "count", "deprecatedCount" },
					      { "source", "deprecatedSource" } };
	jv causes = jv_array();
	const char *type = ksim_str(obj, "type"), *note = ksim_str(obj, "message");

	for (size_t i = 0; i < sizeof(req) / sizeof(*req); i++) {
		jv v = field(obj, req[i][0]);

		if (jv_get_kind(v) != JV_KIND_STRING || !*jv_string_value(v))
			causes = jv_array_append(causes, cause("FieldValueRequired", "Required value", req[i][1]));
		else if (i > 1 && jv_string_length_bytes(jv_copy(v)) > 128)
			causes = jv_array_append(causes, cause("FieldValueTooLong", "Too long: may not be more than 128 bytes",
							       req[i][1]));
		jv_free(v);
	}
	if (!type || (strcmp(type, "Normal") && strcmp(type, "Warning"))) {
		struct kop_buf m = KOP_BUF_INIT;

		kop_buf_addf(&m, "Unsupported value: \"%s\": supported values: \"Normal\", \"Warning\"", type ? type : "");
		causes = jv_array_append(causes, cause("FieldValueNotSupported", m.buf, "type"));
		kop_buf_release(&m);
	}
	if (note && strlen(note) > 1024)
		causes = jv_array_append(causes, cause("FieldValueTooLong", "Too long: may not be more than 1024 bytes", "note"));
	for (size_t i = 0; i < sizeof(dep) / sizeof(*dep); i++) {
		jv v = field(obj, dep[i][0]);

		/* set: not its Go zero (a Go client always sends deprecatedSource, as {}) */
		if (jv_is_valid(v) && jv_get_kind(v) != JV_KIND_NULL &&
		    !(jv_get_kind(v) == JV_KIND_OBJECT && !jv_object_length(jv_copy(v))) &&
		    !(jv_get_kind(v) == JV_KIND_NUMBER && !jv_number_value(v)))
			causes = jv_array_append(causes, cause("FieldValueForbidden",
							       "Forbidden: deprecated field must not be set", dep[i][1]));
		jv_free(v);
	}
	return causes;
}

/*
 * The next free Service clusterIP in 10.96.0.0/16 (lock held). The counter
 * only says where to start looking: the stored Services (replayed from
 * --data, or given a clusterIP by their creator) decide what is free.
 */
static void next_service_ip(char *ip, size_t len)
{
	static unsigned svc_ip = 10;

	for (unsigned n = 0; n < 65536; n++) {
		svc_ip = svc_ip >= 65534 ? 11 : svc_ip + 1;
		snprintf(ip, len, "10.96.%u.%u", (svc_ip >> 8) & 255, svc_ip & 255);
		if (!ksim_store_service_ip_used(ip))
			break;
	}
}

/*
 * A Secret's stringData is write-only: merged into data (base64), as
 * kube-apiserver's conversion does on every write, and never stored.
 */
static jv secret_string_data(const struct ksim_type *t, jv obj)
{
	jv sd, data;

	if (strcmp(t->gr, "secrets") || jv_get_kind(obj) != JV_KIND_OBJECT ||
	    !jv_object_has(jv_copy(obj), jv_string("stringData")))
		return obj;
	sd = field(obj, "stringData");
	data = field(obj, "data");
	if (jv_get_kind(data) != JV_KIND_OBJECT)
		data = (jv_free(data), jv_object());
	if (jv_get_kind(sd) == JV_KIND_OBJECT) {
		jv_object_foreach(sd, k, v) {
			if (jv_get_kind(v) == JV_KIND_STRING) {
				char *b64 = kop_base64(jv_string_value(v), (size_t)jv_string_length_bytes(jv_copy(v)));

				data = jv_object_set(data, jv_copy(k), jv_string(b64));
				free(b64);
			}
			jv_free(k);
			jv_free(v);
		}
	}
	jv_free(sd);
	obj = jv_object_delete(obj, jv_string("stringData"));
	return jv_object_length(jv_copy(data)) ? jv_object_set(obj, jv_string("data"), data) : (jv_free(data), obj);
}

/* Type-specific defaults and status on create. */
static jv prepare_create(const struct ksim_type *t, jv obj, const char *now)
{
	if (t->flags & KT_STATUS)
		obj = jv_object_delete(obj, jv_string("status"));
	if (!strcmp(t->gr, "namespaces")) {
		jv labels = get_meta(obj, "labels");
		const char *name = ksim_str(obj, "metadata.name");

		if (jv_get_kind(labels) != JV_KIND_OBJECT)
			labels = (jv_free(labels), jv_object());
		labels = jv_object_set(labels, jv_string("kubernetes.io/metadata.name"), jv_string(name ? name : ""));
		obj = set_meta(obj, "labels", labels);
		obj = jv_setpath(obj, JV_ARRAY(jv_string("spec"), jv_string("finalizers")),
				 JV_ARRAY(jv_string("kubernetes")));
		obj = jv_object_set(obj, jv_string("status"), JV_OBJECT(jv_string("phase"), jv_string("Active")));
	} else if (!strcmp(t->gr, "persistentvolumeclaims")) {
		obj = jv_object_set(obj, jv_string("status"), JV_OBJECT(jv_string("phase"), jv_string("Pending")));
	} else if (!strcmp(t->gr, "services")) {
		jv spec = field(obj, "spec");
		const char *type;

		if (jv_get_kind(spec) != JV_KIND_OBJECT)
			spec = (jv_free(spec), jv_object());
		if (!jv_object_has(jv_copy(spec), jv_string("type")))
			spec = jv_object_set(spec, jv_string("type"), jv_string("ClusterIP"));
		type = ksim_str(spec, "type");
		if (!jv_object_has(jv_copy(spec), jv_string("clusterIP")) && type && strcmp(type, "ExternalName")) {
			char ip[32];

			next_service_ip(ip, sizeof(ip));
			spec = jv_object_set(spec, jv_string("clusterIP"), jv_string(ip));
			spec = jv_object_set(spec, jv_string("clusterIPs"), JV_ARRAY(jv_string(ip)));
		}
		if (!jv_object_has(jv_copy(spec), jv_string("sessionAffinity")))
			spec = jv_object_set(spec, jv_string("sessionAffinity"), jv_string("None"));
		obj = jv_object_set(obj, jv_string("spec"), spec);
		obj = jv_object_set(obj, jv_string("status"),
				    JV_OBJECT(jv_string("loadBalancer"), jv_object()));
	} else if (!strcmp(t->gr, "secrets")) {
		if (!jv_object_has(jv_copy(obj), jv_string("type")))
			obj = jv_object_set(obj, jv_string("type"), jv_string("Opaque"));
	} else if (!strcmp(t->gr, "customresourcedefinitions.apiextensions.k8s.io")) {
		obj = crd_status(obj, now);
	} else if (!strcmp(t->gr, "deployments.apps") || !strcmp(t->gr, "statefulsets.apps") ||
		   !strcmp(t->gr, "replicasets.apps")) {
		jv r = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("spec"), jv_string("replicas")));

		if (jv_get_kind(r) != JV_KIND_NUMBER)
			obj = jv_setpath(obj, JV_ARRAY(jv_string("spec"), jv_string("replicas")), jv_number(1));
		jv_free(r);
		/* as kube-apiserver answers: the controller fills it in later */
		obj = jv_object_set(obj, jv_string("status"), jv_object());
	}
	return ksim_builtin_defaults(t, obj);
}

/* Checks the namespace of a namespaced create: 0, or -1 with *err (404 or 403). */
static int namespace_ok(const struct ksim_type *t, const char *ns, const char *name, jv *err)
{
	jv nso;

	if (!(t->flags & KT_NAMESPACED))
		return 0;
	nso = ksim_store_get("namespaces", "", ns);
	if (!jv_is_valid(nso)) {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "namespaces \"%s\" not found", ns);
		*err = ksim_status(404, "NotFound", b.buf,
				   JV_OBJECT(jv_string("name"), jv_string(ns), jv_string("kind"), jv_string("namespaces")));
		kop_buf_release(&b);
		return -1;
	}
	if (ksim_str(nso, "metadata.deletionTimestamp")) {
		struct kop_buf m = KOP_BUF_INIT, c = KOP_BUF_INIT;
		char *gr = gr_string(t);

		kop_buf_addf(&m, "%s \"%s\" is forbidden: unable to create new content in namespace %s because it is being terminated",
			     gr, name, ns);
		kop_buf_addf(&c, "namespace %s is being terminated", ns);
		*err = ksim_status(403, "Forbidden", m.buf,
				   jv_object_set(details(t, name), jv_string("causes"),
						 JV_ARRAY(cause("NamespaceTerminating", c.buf, "metadata.namespace"))));
		free(gr);
		kop_buf_release(&m);
		kop_buf_release(&c);
		return -1;
	}
	return 0;
}

/*
 * Whether the n bytes at s (a NUL byte possible) make a valid name of a t:
 * an RFC 1123 label for a namespace, a subdomain for the rest. A
 * generateName (prefix) is checked as kube-apiserver's maskTrailingDash
 * does: a trailing '-' and the byte before it become an "a".
 */
static int name_ok(const struct ksim_type *t, const char *s, size_t n, int prefix)
{
	struct kop_buf b = KOP_BUF_INIT;
	int ok;

	if (memchr(s, 0, n))
		return 0;
	if (!strcmp(t->group, "rbac.authorization.k8s.io"))	/* ValidatePathSegmentName: "system:basic-user" */
		return n && !memchr(s, '/', n) && !memchr(s, '%', n) && !(n == 1 && *s == '.') &&
		       !(n == 2 && !memcmp(s, "..", 2));
	kop_buf_add(&b, s, n);
	if (prefix && n > 1 && s[n - 1] == '-') {
		b.len = n - 2;
		kop_buf_adds(&b, "a");
	}
	ok = kop_dns1123(b.buf, !strcmp(t->gr, "namespaces"));
	kop_buf_release(&b);
	return ok;
}

/* The FieldValueInvalid cause of a bad name at field (n bytes at s, quoted as Go's %q does). */
static jv name_cause(const struct ksim_type *t, const char *s, size_t n, const char *field)
{
	struct kop_buf m = KOP_BUF_INIT;
	int label = !strcmp(t->gr, "namespaces");
	jv c;

	kop_buf_adds(&m, "Invalid value: ");
	kop_buf_add_quoted(&m, s, n);
	kop_buf_addf(&m, ": a lowercase RFC 1123 %s must consist of lower case alphanumeric characters, '-'%s and must start and end with an alphanumeric character",
		     label ? "label" : "subdomain", label ? "" : " or '.',");
	c = cause("FieldValueInvalid", m.buf, field);
	kop_buf_release(&m);
	return c;
}

/*
 * Create: obj consumed. Returns the HTTP code; *out the object or a Status.
 * mf_done: managedFields already computed (server-side apply).
 */
static int do_create(const struct ksim_type *t, const char *ns, jv obj, const struct wopts *o, int mf_done,
		     jv *out)
{
	char now[32], uid[40];
	const char *name, *gen;
	size_t name_len = 0, gen_len = 0;
	jv old;

	ksim_now(now);
	obj = secret_string_data(t, obj);
	if (t->flags & KT_NAMESPACED) {
		if (str_set_and_differs(obj, "metadata.namespace", ns)) {
			jv_free(obj);
			*out = bad_request("the namespace of the provided object does not match the namespace sent on the request");
			return 400;
		}
		obj = set_meta(obj, "namespace", jv_string(ns));
	} else {
		obj = set_meta(obj, "namespace", jv_null());
	}
	name = ksim_strl(obj, "metadata.name", &name_len);
	gen = ksim_strl(obj, "metadata.generateName", &gen_len);
	if ((!name || !name_len) && gen && gen_len) {
		static const char alnum[] = "bcdfghjklmnpqrstvwxz2456789";
		char suffix[6];
		struct kop_buf b = KOP_BUF_INIT;

		/* every byte of generateName, a NUL too: the name check below sees them */
		do {
			for (int i = 0; i < 5; i++)
				suffix[i] = alnum[random() % (sizeof(alnum) - 1)];
			suffix[5] = 0;
			kop_buf_reset(&b);
			kop_buf_add(&b, gen, gen_len);
			kop_buf_adds(&b, suffix);
		} while (jv_is_valid(ksim_store_get(t->gr, ns, b.buf)));
		obj = set_meta(obj, "name", jv_string_sized(b.buf, (int)b.len));
		kop_buf_release(&b);
		name = ksim_strl(obj, "metadata.name", &name_len);
		gen = ksim_strl(obj, "metadata.generateName", &gen_len);
	}
	{
		jv causes = jv_array();

		if (gen && gen_len && !name_ok(t, gen, gen_len, 1))
			causes = jv_array_append(causes, name_cause(t, gen, gen_len, "metadata.generateName"));
		if (!name || !name_len)
			causes = jv_array_append(causes, cause("FieldValueRequired",
							       "Required value: name or generateName is required",
							       "metadata.name"));
		else if (!name_ok(t, name, name_len, 0))
			causes = jv_array_append(causes, name_cause(t, name, name_len, "metadata.name"));
		if (jv_array_length(jv_copy(causes)) > 0) {
			*out = invalid_jv(t, name ? jv_string_sized(name, (int)name_len) : jv_string(""), causes);
			jv_free(obj);
			return 422;
		}
		jv_free(causes);
	}
	if (!strcmp(t->gr, "events") && !strcmp(t->group, "events.k8s.io")) {
		jv causes = event_causes(obj);

		if (jv_array_length(jv_copy(causes)) > 0) {
			char *nm = kop_strdup(name);

			*out = invalid(t, nm, causes);
			free(nm);
			jv_free(obj);
			return 422;
		}
		jv_free(causes);
	}
	if (!strcmp(t->gr, "customresourcedefinitions.apiextensions.k8s.io")) {
		struct kop_buf want = KOP_BUF_INIT;
		const char *plural = ksim_str(obj, "spec.names.plural"), *group = ksim_str(obj, "spec.group");

		kop_buf_addf(&want, "%s.%s", plural ? plural : "", group ? group : "");
		if (strcmp(want.buf, name)) {
			char *nm = kop_strdup(name);

			*out = invalid(t, nm, JV_ARRAY(cause("FieldValueInvalid",
							     "Invalid value: \"name\": must be spec.names.plural+\".\"+spec.group",
							     "metadata.name")));
			free(nm);
			kop_buf_release(&want);
			jv_free(obj);
			return 422;
		}
		kop_buf_release(&want);
	}
	{
		jv e;

		if (namespace_ok(t, ns, name, &e) < 0) {
			*out = e;
			jv_free(obj);
			return status_code(e);
		}
	}
	old = ksim_store_get(t->gr, ns, name);
	if (jv_is_valid(old)) {
		char *gr = gr_string(t);

		*out = err_status(t, name, 409, "AlreadyExists", "%s \"%s\" already exists", gr, name);
		free(gr);
		jv_free(obj);
		return 409;
	}
	ksim_uuid(uid);
	obj = set_meta(obj, "uid", jv_string(uid));
	obj = set_meta(obj, "resourceVersion", jv_null());
	obj = set_meta(obj, "creationTimestamp", jv_string(now));
	obj = set_meta(obj, "deletionTimestamp", jv_null());
	obj = set_meta(obj, "deletionGracePeriodSeconds", jv_null());
	obj = set_meta(obj, "selfLink", jv_null());
	obj = set_meta(obj, "generation", t->flags & KT_GENERATION ? jv_number(1) : jv_null());
	obj = jv_object_set(obj, jv_string("apiVersion"), jv_string(t->api_version));
	obj = jv_object_set(obj, jv_string("kind"), jv_string(t->kind));
	obj = prepare_create(t, obj, now);
	{
		jv causes = ksim_builtin_causes(t, obj);

		if (jv_array_length(jv_copy(causes)) > 0) {
			char *nm = kop_strdup(name);

			*out = invalid(t, nm, causes);
			free(nm);
			jv_free(obj);
			return 422;
		}
		jv_free(causes);
	}
	{
		jv e;
		char *nm = kop_strdup(name);
		int bad = schema_check(t, &obj, nm, o, &e);

		free(nm);
		if (bad) {
			jv_free(obj);
			*out = e;
			return status_code(e);
		}
	}
	if (!mf_done) {
		jv li = listinfo(t);

		obj = kop_ssa_track_update(jv_null(), obj, o->manager, NULL, now, li);
		jv_free(li);
	}
	obj = ksim_builtin_admission(t, obj);
	if (o->dry_run) {
		*out = present(t, obj);
		return 201;
	}
	obj = ksim_store_commit(t->gr, jv_null(), obj);
	if (!strcmp(t->gr, "customresourcedefinitions.apiextensions.k8s.io"))
		ksim_types_crd_changed(obj, 0);
	*out = present(t, obj);
	return 201;
}

static int finalizers_empty(jv obj)
{
	return !has_items(get_meta(obj, "finalizers"));
}

/* In a graceful deletion (a pod's, until its kubelet deletes it with grace 0). */
static int graceful(jv obj)
{
	jv g = get_meta(obj, "deletionGracePeriodSeconds");
	int yes = jv_get_kind(g) == JV_KIND_NUMBER && jv_number_value(g) > 0;

	jv_free(g);
	return yes;
}

static int collect_fn(jv obj, const char *key, void *data)
{
	jv *items = data;

	(void)key;
	*items = jv_array_append(*items, jv_copy(obj));
	return 0;
}

/* Removes every object of gr at once (the objects of a deleted CRD). */
static void drop_all(const char *gr)
{
	jv items = jv_array();

	ksim_store_each(gr, NULL, NULL, collect_fn, &items);
	jv_array_foreach(items, i, o)
		jv_free(ksim_store_commit(gr, o, jv_null()));
	jv_free(items);
}

/* Commits the removal of stored (consumed) now; returns the deleted state. */
static jv remove_now(const struct ksim_type *t, jv stored)
{
	jv gone = ksim_store_commit(t->gr, jv_copy(stored), jv_null());

	if (!strcmp(t->gr, "customresourcedefinitions.apiextensions.k8s.io")) {
		/* a CRD takes its objects with it (their finalizers are not waited for) */
		const char *group = ksim_str(stored, "spec.group"), *plural = ksim_str(stored, "spec.names.plural");
		struct kop_buf gr = KOP_BUF_INIT;

		kop_buf_addf(&gr, "%s.%s", plural ? plural : "", group ? group : "");
		ksim_types_crd_changed(stored, 1);
		drop_all(gr.buf);
		kop_buf_release(&gr);
	}
	jv_free(stored);
	return gone;
}

/*
 * The common end of update, patch and apply: `obj` (consumed) is the
 * wanted new state of `old` (borrowed, stored). Applies the subresource
 * rules, immutable fields, generation, schema, managedFields (unless
 * mf_done), no-op detection, finalizer-driven removal, and commits.
 */
static int do_update(const struct ksim_type *t, jv old, jv obj, const char *sub, const struct wopts *o,
		     int mf_done, jv *out)
{
	char now[32];
	const char *name = ksim_str(old, "metadata.name");
	char *nm = kop_strdup(name ? name : "");
	jv rv = get_meta(obj, "resourceVersion"), oldrv = get_meta(old, "resourceVersion");
	int code = 200;

	ksim_now(now);
	if (!sub)
		obj = secret_string_data(t, obj);
	if (jv_get_kind(rv) != JV_KIND_STRING || !*jv_string_value(rv)) {
		if (o->put && (t->flags & KT_NEEDS_RV)) {
			*out = invalid(t, nm, JV_ARRAY(cause("FieldValueInvalid",
							     "Invalid value: 0x0: must be specified for an update",
							     "metadata.resourceVersion")));
			code = 422;
			goto fail;
		}
	} else if (!jv_equal(jv_copy(rv), jv_copy(oldrv))) {
		*out = conflict(t, nm);
		code = 409;
		goto fail;
	}
	if (sub && !strcmp(sub, "status")) {
		jv st = field(obj, "status");
		jv mf = get_meta(obj, "managedFields");

		jv_free(obj);
		obj = jv_copy(old);
		obj = jv_get_kind(st) == JV_KIND_NULL || !jv_is_valid(st) ? jv_object_delete(obj, jv_string("status")) :
									     jv_object_set(obj, jv_string("status"), st);
		if (mf_done)
			obj = set_meta(obj, "managedFields", mf);
		else
			jv_free(mf);
	} else if (sub && !strcmp(sub, "finalize")) {
		jv fin = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("spec"), jv_string("finalizers")));

		jv_free(obj);
		obj = jv_setpath(jv_copy(old), JV_ARRAY(jv_string("spec"), jv_string("finalizers")),
				 jv_is_valid(fin) ? fin : jv_array());
	} else {
		if (t->flags & KT_STATUS) {
			jv st = field(old, "status");

			obj = jv_is_valid(st) && jv_get_kind(st) != JV_KIND_NULL ?
				      jv_object_set(obj, jv_string("status"), st) :
				      (jv_free(st), jv_object_delete(obj, jv_string("status")));
		}
		if (!strcmp(t->gr, "namespaces")) {
			jv fin = jv_getpath(jv_copy(old), JV_ARRAY(jv_string("spec"), jv_string("finalizers")));

			obj = jv_setpath(obj, JV_ARRAY(jv_string("spec"), jv_string("finalizers")), fin);
		}
		if (!strcmp(t->gr, "customresourcedefinitions.apiextensions.k8s.io"))
			obj = crd_status(obj, now);
	}
	/* immutable and server-owned metadata */
	{
		static const char *const keep[] = { "name", "namespace", "uid", "creationTimestamp",
						    "deletionTimestamp", "deletionGracePeriodSeconds", "generation" };

		for (size_t i = 0; i < sizeof(keep) / sizeof(*keep); i++)
			obj = set_meta(obj, keep[i], get_meta(old, keep[i]));
		obj = set_meta(obj, "resourceVersion", jv_copy(oldrv));
		obj = set_meta(obj, "selfLink", jv_null());
	}
	obj = jv_object_set(obj, jv_string("apiVersion"), field(old, "apiVersion"));
	obj = jv_object_set(obj, jv_string("kind"), jv_string(t->kind));
	if (ksim_str(old, "metadata.deletionTimestamp")) {
		jv of = get_meta(old, "finalizers"), nf = get_meta(obj, "finalizers");
		int added = 0;

		if (jv_get_kind(nf) == JV_KIND_ARRAY) {
			jv_array_foreach(nf, i, f) {
				int found = 0;

				if (jv_get_kind(of) == JV_KIND_ARRAY) {
					jv_array_foreach(of, j, g) {
						found |= jv_equal(g, jv_copy(f));
					}
				}
				added |= !found;
				jv_free(f);
			}
		}
		jv_free(of);
		jv_free(nf);
		if (added) {
			*out = invalid(t, nm, JV_ARRAY(cause("FieldValueForbidden",
							     "Forbidden: no new finalizers can be added if the object is being deleted",
							     "metadata.finalizers")));
			jv_free(obj);
			code = 422;
			goto out;
		}
	}
	if (schema_check(t, &obj, nm, o, out) < 0) {
		jv_free(obj);
		code = status_code(*out);
		goto out;
	}
	if (t->flags & KT_GENERATION) {
		if (!jv_equal(spec_part(t, jv_copy(obj)), spec_part(t, jv_copy(old))))
			obj = set_meta(obj, "generation", jv_number(generation(old) + 1));
	}
	if (!mf_done) {
		jv li = listinfo(t);

		obj = track_update(jv_copy(old), obj, o->manager, sub && !strcmp(sub, "status") ? "status" : NULL,
					   now, li);
		jv_free(li);
	}
	if (same_object(obj, old)) {
		jv_free(obj);
		*out = present(t, jv_copy(old));
		goto out;
	}
	if (o->dry_run) {
		*out = present(t, obj);
		goto out;
	}
	if (ksim_str(obj, "metadata.deletionTimestamp") && finalizers_empty(obj) && !graceful(obj) &&
	    !(!strcmp(t->gr, "namespaces") &&
	      has_items(jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("spec"), jv_string("finalizers")))))) {
		/*
		 * The last finalizer went: the object goes. Watchers see one
		 * DELETED carrying the state before this update (as etcd3's
		 * store does), except for namespaces, whose finalize step is a
		 * write of its own (recordings/namespace/).
		 */
		if (!strcmp(t->gr, "namespaces")) {
			jv stored = ksim_store_commit(t->gr, jv_copy(old), jv_copy(obj));

			jv_free(remove_now(t, stored));
		} else {
			jv_free(remove_now(t, jv_copy(old)));
		}
		*out = present(t, obj);
		goto out;
	}
	obj = ksim_store_commit(t->gr, jv_copy(old), obj);
	if (!strcmp(t->gr, "customresourcedefinitions.apiextensions.k8s.io"))
		ksim_types_crd_changed(obj, 0);
	*out = present(t, obj);
	goto out;
fail:
	jv_free(obj);
out:
	jv_free(rv);
	jv_free(oldrv);
	free(nm);
	return code;
}

/* ---- verbs ------------------------------------------------------------------- */

static int parse_body(const struct ksim_request *rq, jv *obj, jv *err)
{
	const char *ct = rq->content_type ? rq->content_type : "";
	jv v;

	if (jv_is_valid(rq->body_jv)) {
		/* ksim_call_locked(): the body is already a value (JSON) */
		*obj = jv_copy(rq->body_jv);
		return 0;
	}
	if (!rq->body || !rq->body_len) {
		*err = bad_request("the body of the request is empty");
		return -1;
	}
	if (!strncmp(ct, "application/yaml", 16)) {
		char e[KOP_ERRLEN];
		jv docs;

		if (kop_yaml_load(rq->body, rq->body_len, "request body", &docs, e) < 0) {
			*err = bad_request(e);
			return -1;
		}
		if (jv_array_length(jv_copy(docs)) != 1) {
			jv_free(docs);
			*err = bad_request("the body of the request must hold exactly one YAML document");
			return -1;
		}
		*obj = jv_array_get(docs, 0);
		return 0;
	}
	if (*ct && strncmp(ct, "application/json", 16) && strncmp(ct, "application/", 12) == 0 &&
	    !strstr(ct, "json")) {
		/* CBOR, and protobuf that proto.c does not take (custom resources): what kube-apiserver says */
		*err = ksim_status(415, "UnsupportedMediaType",
				   "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml",
				   jv_null());
		return -1;
	}
	v = jv_parse_sized(rq->body, (int)rq->body_len);
	if (!jv_is_valid(v)) {
		jv msg = jv_invalid_get_msg(v);
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "json: cannot unmarshal the request body: %s",
			     jv_get_kind(msg) == JV_KIND_STRING ? jv_string_value(msg) : "invalid JSON");
		*err = bad_request(b.buf);
		kop_buf_release(&b);
		jv_free(msg);
		return -1;
	}
	*obj = v;
	return 0;
}

/*
 * A body's object (consumed on failure) against the type it was sent to:
 * -1 with the 400 kube-apiserver gives when it is no object or says another
 * kind or API version.
 */
static int check_kind(const struct ksim_type *t, jv *obj, jv *err)
{
	const char *av, *kind;

	if (jv_get_kind(*obj) != JV_KIND_OBJECT) {
		jv_free(*obj);
		*err = bad_request("the body of the request is not a JSON object");
		return -1;
	}
	av = ksim_str(*obj, "apiVersion");
	kind = ksim_str(*obj, "kind");
	if (kind && *kind && strcmp(kind, t->kind) && strcmp(kind, "DeleteOptions")) {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "the kind in the data (%s) does not match the expected kind (%s)", kind, t->kind);
		*err = bad_request(b.buf);
		kop_buf_release(&b);
		jv_free(*obj);
		return -1;
	}
	if (av && *av && strcmp(av, t->api_version) && !(t->flags & KT_CUSTOM) && strcmp(t->gr, "events")) {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "the API version in the data (%s) does not match the expected API version (%s)", av,
			     t->api_version);
		*err = bad_request(b.buf);
		kop_buf_release(&b);
		jv_free(*obj);
		return -1;
	}
	return 0;
}

static int body_object(const struct ksim_request *rq, const struct ksim_type *t, jv *obj, jv *err)
{
	int pb = ksim_proto_body(rq, t, obj, err);	/* protobuf bodies of built-in kinds (proto.c) */

	if (pb < 0 || (!pb && parse_body(rq, obj, err) < 0) || check_kind(t, obj, err) < 0)
		return -1;
	if (!strcmp(t->gr, "events") && !strcmp(t->group, "events.k8s.io")) {
		/* stored in the core/v1 form */
		static const char *const ren[][2] = { { "note", "message" }, { "regarding", "involvedObject" },
						     { "reportingController", "reportingComponent" },
						     { "deprecatedFirstTimestamp", "firstTimestamp" },
						     { "deprecatedLastTimestamp", "lastTimestamp" },
						     { "deprecatedCount", "count" }, { "deprecatedSource", "source" } };

		for (size_t i = 0; i < sizeof(ren) / sizeof(*ren); i++) {
			jv v = field(*obj, ren[i][0]);

			if (jv_is_valid(v) && jv_get_kind(v) != JV_KIND_NULL) {
				*obj = jv_object_delete(*obj, jv_string(ren[i][0]));
				*obj = jv_object_set(*obj, jv_string(ren[i][1]), v);
			} else {
				jv_free(v);
			}
		}
	}
	return 0;
}

static int dry_run(const struct ksim_request *rq, jv *err)
{
	const char *d = query(rq, "dryRun");

	if (!d)
		return 0;
	if (strcmp(d, "All")) {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "Unsupported value: \"%s\": supported values: \"All\"", d);
		*err = ksim_status(422, "Invalid", b.buf, jv_null());
		kop_buf_release(&b);
		return -1;
	}
	return 1;
}

/* base64url without padding (the continue token's encoding). */
static char *b64url(const char *s)
{
	char *out = kop_base64(s, strlen(s));
	size_t len = strlen(out);

	while (len > 0 && out[len - 1] == '=')
		len--;
	out[len] = 0;
	for (size_t i = 0; i < len; i++)
		out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
	return out;
}

static jv unb64url(const char *s)
{
	size_t n = strlen(s);
	char *in = kop_malloc(n + 4);
	unsigned char *out = kop_malloc(n + 4);
	int len;
	jv v;

	for (size_t i = 0; i < n; i++)
		in[i] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
	while (n % 4)
		in[n++] = '=';
	in[n] = 0;
	len = EVP_DecodeBlock(out, (unsigned char *)in, (int)n);
	if (len < 0) {
		free(in);
		free(out);
		return jv_invalid();
	}
	while (len > 0 && n >= 2 && in[n - 1] == '=' && out[len - 1] == 0) {
		len--;
		n--;
	}
	v = jv_parse_sized((const char *)out, len);
	free(in);
	free(out);
	return v;
}

static char *continue_token(long long rv, const char *key)
{
	jv tok = JV_OBJECT(jv_string("v"), jv_string("meta.k8s.io/v1"), jv_string("rv"), jv_number((double)rv));
	struct kop_buf start = KOP_BUF_INIT;
	jv s;
	char *out;

	kop_buf_adds(&start, key);
	kop_buf_add(&start, "", 1);
	tok = jv_object_set(tok, jv_string("start"), jv_string_sized(start.buf, (int)start.len));
	s = jv_dump_string(tok, 0);
	out = b64url(jv_string_value(s));
	jv_free(s);
	kop_buf_release(&start);
	return out;
}

struct list_ctx {
	const struct ksim_type *t;
	struct ksim_selector *ls, *fs;
	long limit;
	jv items;
	long n;
	char *last_key;
	int more;
	struct ksim_json_cache **caches;	/* list_cached_fn: the items' caches, in order */
	size_t ncaches;
};

static int list_fn(jv obj, const char *key, void *data)
{
	struct list_ctx *c = data;

	if (!ksim_selector_match(c->ls, obj, c->t) || !ksim_selector_match(c->fs, obj, c->t))
		return 0;
	if (c->limit > 0 && c->n >= c->limit) {
		c->more = 1;
		return 1;
	}
	c->items = jv_array_append(c->items, jv_copy(obj));
	c->n++;
	free(c->last_key);
	c->last_key = kop_strdup(key);
	return 0;
}

static int list_cached_fn(jv obj, const char *key, struct ksim_json_cache *cache, void *data)
{
	struct list_ctx *c = data;
	long before = c->n;
	int stop = list_fn(obj, key, data);

	if (c->n > before) {
		c->caches = kop_realloc(c->caches, (c->ncaches + 1) * sizeof(*c->caches));
		c->caches[c->ncaches++] = cache;
	}
	return stop;
}

/*
 * A list answer as text (lock held): what ksim_dump() writes for the list
 * `shell` (consumed; canonical, "items" last and empty) with the items
 * (consumed, as presented) in it, each item's JSON taken from its stored
 * object's cache or made once and kept there, for lists that are polled.
 */
static char *list_text(const struct ksim_type *t, jv shell, jv items, struct ksim_json_cache **caches, size_t *len)
{
	struct kop_buf b = KOP_BUF_INIT, view = KOP_BUF_INIT;
	size_t slen;
	char *s = ksim_dump(shell, &slen);

	/* the shell ends with "items":[]} */
	if (slen < 3 || strcmp(s + slen - 3, "[]}")) {
		free(s);
		jv_free(items);
		return NULL;
	}
	kop_buf_addf(&view, "list %s %s", t->api_version, t->kind);
	kop_buf_add(&b, s, slen - 2);
	free(s);
	jv_array_foreach(items, i, o) {
		struct ksim_json_cache *c = caches[i];

		if (i)
			kop_buf_add(&b, ",", 1);
		if (!c->json || strcmp(c->view, view.buf)) {
			free(c->json);
			free(c->view);
			c->json = ksim_dump(o, &c->len);
			c->view = kop_strdup(view.buf);
		} else {
			jv_free(o);
		}
		kop_buf_add(&b, c->json, c->len);
	}
	jv_free(items);
	kop_buf_release(&view);
	kop_buf_add(&b, "]}", 2);
	return kop_buf_detach(&b, len);
}

/* Parses both selectors: 0, or -1 with *err a 400. */
static int selectors(const struct ksim_request *rq, const struct ksim_type *t, struct ksim_selector **ls,
		     struct ksim_selector **fs, jv *err)
{
	char e[KOP_ERRLEN];
	const char *l = query(rq, "labelSelector"), *f = query(rq, "fieldSelector");

	*ls = *fs = NULL;
	if (l && *l) {
		*ls = ksim_selector_parse(l, 0, e);
		if (*ls == (struct ksim_selector *)-1) {
			struct kop_buf b = KOP_BUF_INIT;

			*ls = NULL;
			kop_buf_addf(&b, "unable to parse requirement: %s", e);
			*err = bad_request(b.buf);
			kop_buf_release(&b);
			return -1;
		}
	}
	if (f && *f) {
		*fs = ksim_selector_parse(f, 1, e);
		if (*fs == (struct ksim_selector *)-1) {
			*fs = NULL;
			*err = bad_request(e);
			ksim_selector_free(*ls);
			*ls = NULL;
			return -1;
		}
		/* every field must be supported */
		{
			const char *p = f;

			while (*p) {
				size_t n = strcspn(p, ",");
				char *term = kop_strndup(p, n), *op = strpbrk(term, "!=");

				if (op)
					*op = 0;
				if (!ksim_field_supported(t, term)) {
					struct kop_buf b = KOP_BUF_INIT;

					kop_buf_addf(&b, "field label not supported: %s", term);
					*err = bad_request(b.buf);
					kop_buf_release(&b);
					free(term);
					ksim_selector_free(*ls);
					ksim_selector_free(*fs);
					*ls = *fs = NULL;
					return -1;
				}
				free(term);
				p += n;
				if (*p)
					p++;
			}
		}
	}
	return 0;
}

static int wants_table(const struct ksim_request *rq)
{
	return rq->accept && strstr(rq->accept, "as=Table");
}

static int include_object(const struct ksim_request *rq)
{
	const char *io = query(rq, "includeObject");

	if (io && !strcmp(io, "None"))
		return 0;
	if (io && !strcmp(io, "Object"))
		return 2;
	return 1;
}

/*
 * A read at resourceVersion n, newer than any: kube-apiserver waits up to 3 s
 * for its cache to reach n, then answers this (storage/errors.go
 * NewTooLargeResourceVersionError). ksim has no cache to wait for: n is
 * from another server (or another life of this one), so a list or get gets
 * it at once; a watch waits the 3 s (watch.c), as a write may still come.
 */
jv ksim_too_large_rv(unsigned long long n)
{
	char msg[128];

	snprintf(msg, sizeof(msg), "Timeout: Too large resource version: %llu, current: %llu", n,
		 (unsigned long long)ksim.rv);
	return ksim_status(504, "Timeout", msg,
			   JV_OBJECT(jv_string("causes"),
				     JV_ARRAY(JV_OBJECT(jv_string("reason"), jv_string("ResourceVersionTooLarge"),
							jv_string("message"), jv_string("Too large resource version"))),
				     jv_string("retryAfterSeconds"), jv_number(1)));
}

/* A list: 200 with *out, or with *text (when text is non-NULL and the answer can be made as text). */
static int do_list(const struct ksim_request *rq, const struct route *r, jv *out, char **text, size_t *text_len)
{
	const struct ksim_type *t = r->t;
	struct list_ctx c = { .t = t, .items = jv_null() };
	const char *lim = query(rq, "limit"), *cont = query(rq, "continue"), *rvs = query(rq, "resourceVersion");
	const char *rvm = query(rq, "resourceVersionMatch");
	char *after = NULL;
	long long list_rv = (long long)ksim.rv;
	char rvbuf[32];
	char *token = NULL;
	int fail = 400;
	jv md, items;

	if (query_bool(rq, "sendInitialEvents")) {
		*out = ksim_status(422, "Invalid", "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
				   jv_null());
		return 422;
	}
	if (rvm && *rvm && (!rvs || !*rvs)) {
		*out = ksim_status(422, "Invalid", "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
				   jv_null());
		return 422;
	}
	if (selectors(rq, t, &c.ls, &c.fs, out) < 0)
		return 400;
	c.items = jv_array();
	if (lim && *lim)
		c.limit = strtol(lim, NULL, 10);
	if (cont && *cont) {
		jv tok = unb64url(cont);
		jv rvj = field(tok, "rv"), start = field(tok, "start");

		if (rvs && *rvs && strcmp(rvs, "0")) {
			*out = bad_request("specifying resource version is not allowed when using continue");
			goto bad;
		}
		if (jv_get_kind(rvj) != JV_KIND_NUMBER || jv_get_kind(start) != JV_KIND_STRING) {
			*out = bad_request("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)");
			jv_free(tok);
			jv_free(rvj);
			jv_free(start);
			goto bad;
		}
		after = kop_strdup(jv_string_value(start));
		if (jv_number_value(rvj) >= 0 && ksim.compacted && (uint64_t)jv_number_value(rvj) <= ksim.compacted) {
			char *nt = continue_token(-1, after);

			*out = ksim_status(410, "Expired",
					   "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
					   jv_null());
			*out = jv_object_set(*out, jv_string("metadata"), JV_OBJECT(jv_string("continue"), jv_string(nt)));
			*out = ksim_canonical(*out);
			free(nt);
			jv_free(tok);
			jv_free(rvj);
			jv_free(start);
			free(after);
			ksim_selector_free(c.ls);
			ksim_selector_free(c.fs);
			jv_free(c.items);
			return 410;
		}
		if (jv_number_value(rvj) >= 0)
			list_rv = (long long)jv_number_value(rvj);
		jv_free(tok);
		jv_free(rvj);
		jv_free(start);
	} else if (rvs && *rvs && strcmp(rvs, "0")) {
		char *end;
		unsigned long long n = strtoull(rvs, &end, 10);

		if (*end) {
			struct kop_buf b = KOP_BUF_INIT;

			kop_buf_addf(&b, "Invalid value: \"%s\": resourceVersion must be a number", rvs);
			*out = bad_request(b.buf);
			kop_buf_release(&b);
			goto bad;
		}
		if (n > ksim.rv) {
			*out = ksim_too_large_rv(n);
			fail = 504;
			goto bad;
		}
		if ((rvm && !strcmp(rvm, "Exact")) || (c.limit > 0 && (!rvm || !*rvm))) {
			if (n < ksim.compacted) {
				*out = ksim_status(410, "Expired", "The resourceVersion for the provided list is too old.",
						   jv_null());
				fail = 410;
				goto bad;
			}
		}
	}
	if (r->ns && (t->flags & KT_NAMESPACED)) {
		/* restrict the walk to the namespace */
		ksim_store_each_cached(t->gr, r->ns, after, list_cached_fn, &c);
	} else {
		ksim_store_each_cached(t->gr, NULL, after, list_cached_fn, &c);
	}
	snprintf(rvbuf, sizeof(rvbuf), "%lld", list_rv);
	md = JV_OBJECT(jv_string("resourceVersion"), jv_string(rvbuf));
	if (c.more && c.last_key) {
		token = continue_token(list_rv, c.last_key);
		md = jv_object_set(md, jv_string("continue"), jv_string(token));
		if (!c.ls && !c.fs) {
			size_t total = ksim_store_count(t->gr, r->ns);
			long long before = 0;
			struct list_ctx cnt = { .t = t, .items = jv_array() };

			/* remaining = everything after the last key returned */
			ksim_store_each(t->gr, r->ns, c.last_key, list_fn, &cnt);
			before = cnt.n;
			(void)total;
			md = jv_object_set(md, jv_string("remainingItemCount"), jv_number((double)before));
			jv_free(cnt.items);
			free(cnt.last_key);
		}
	}
	items = jv_array();
	jv_array_foreach(c.items, i, o) {
		o = present(t, o);
		if (!(t->flags & KT_CUSTOM)) {
			o = jv_object_delete(o, jv_string("kind"));
			o = jv_object_delete(o, jv_string("apiVersion"));
		}
		items = jv_array_append(items, o);
	}
	jv_free(c.items);
	if (wants_table(rq)) {
		jv full = jv_array();

		jv_array_foreach(items, i, o)
			full = jv_array_append(full, present(t, o));
		jv_free(items);
		jv_free(md);
		*out = ksim_table(t, full, rvbuf, token, include_object(rq));
	} else if (text && jv_array_length(jv_copy(items)) > 0) {
		jv shell = JV_OBJECT(jv_string("kind"), jv_string(t->list_kind), jv_string("apiVersion"),
				     jv_string(t->api_version), jv_string("metadata"), jv_copy(md), jv_string("items"),
				     jv_array());

		/* as answer() orders it */
		*text = list_text(t, ksim_canonical(shell), jv_copy(items), c.caches, text_len);
		if (*text) {
			jv_free(md);
			jv_free(items);
			*out = jv_invalid();
		} else {
			*out = JV_OBJECT(jv_string("kind"), jv_string(t->list_kind), jv_string("apiVersion"),
					 jv_string(t->api_version), jv_string("metadata"), md, jv_string("items"), items);
		}
	} else {
		*out = JV_OBJECT(jv_string("kind"), jv_string(t->list_kind), jv_string("apiVersion"),
				 jv_string(t->api_version), jv_string("metadata"), md, jv_string("items"), items);
	}
	free(c.caches);
	free(token);
	free(after);
	free(c.last_key);
	ksim_selector_free(c.ls);
	ksim_selector_free(c.fs);
	return 200;
bad:
	free(after);
	free(c.caches);
	ksim_selector_free(c.ls);
	ksim_selector_free(c.fs);
	jv_free(c.items);
	return fail;
}

static int do_get(const struct ksim_request *rq, const struct route *r, jv *out)
{
	const char *rvs = query(rq, "resourceVersion");
	jv obj;

	if (rvs && *rvs) {
		char *end;
		unsigned long long n = strtoull(rvs, &end, 10);

		if (!*end && n > ksim.rv) {
			*out = ksim_too_large_rv(n);
			return 504;
		}
	}
	obj = ksim_store_get(r->t->gr, r->ns, r->name);
	if (!jv_is_valid(obj)) {
		*out = not_found(r->t, r->name);
		return 404;
	}
	if (wants_table(rq)) {
		char rvbuf[32];

		snprintf(rvbuf, sizeof(rvbuf), "%llu", (unsigned long long)ksim.rv);
		*out = ksim_table(r->t, JV_ARRAY(present(r->t, jv_copy(obj))), rvbuf, NULL, include_object(rq));
	} else {
		*out = present(r->t, jv_copy(obj));
	}
	return 200;
}

static int do_put(const struct ksim_request *rq, const struct route *r, const struct wopts *o, jv *out)
{
	jv obj, old;
	const char *bname;
	size_t bname_len = 0;

	if (body_object(rq, r->t, &obj, out) < 0)
		return status_code(*out);
	bname = ksim_strl(obj, "metadata.name", &bname_len);
	if (bname && bytes_differ(bname, bname_len, r->name)) {
		*out = name_mismatch(bname, bname_len, r->name);
		jv_free(obj);
		return 400;
	}
	if (!bname)
		obj = set_meta(obj, "name", jv_string(r->name));
	if (r->ns && (r->t->flags & KT_NAMESPACED)) {
		if (str_set_and_differs(obj, "metadata.namespace", r->ns)) {
			jv_free(obj);
			*out = bad_request("the namespace of the provided object does not match the namespace sent on the request");
			return 400;
		}
	}
	old = ksim_store_get(r->t->gr, r->ns, r->name);
	if (!jv_is_valid(old)) {
		if ((r->t->flags & KT_CREATE_ON_UPDATE) && !r->sub) {
			obj = set_meta(obj, "resourceVersion", jv_null());
			return do_create(r->t, r->ns, obj, o, 0, out);
		}
		jv_free(obj);
		*out = not_found(r->t, r->name);
		return 404;
	}
	return do_update(r->t, old, obj, r->sub, o, 0, out);
}

static int has_annotation(jv obj, const char *key)
{
	jv a = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("metadata"), jv_string("annotations"), jv_string(key)));
	int has = jv_get_kind(a) == JV_KIND_STRING;

	jv_free(a);
	return has;
}

/*
 * kube-apiserver lets `kubectl apply --server-side` take over fields that
 * `kubectl apply` (client-side) set: when every conflict is with the
 * client-side manager and the live object carries the last-applied
 * annotation, the apply is forced (managedfields' lastAppliedManager; it
 * also compares the values with the annotation's, which is skipped here).
 */
static int upgrade_from_csa(jv live, jv conflicts, const char *manager)
{
	int ok;

	if (!manager || strcmp(manager, "kubectl") || !jv_is_valid(live) ||
	    !has_annotation(live, "kubectl.kubernetes.io/last-applied-configuration"))
		ok = 0;
	else
		ok = jv_get_kind(conflicts) == JV_KIND_ARRAY && jv_array_length(jv_copy(conflicts)) > 0;
	if (ok) {
		jv_array_foreach(conflicts, i, c) {
			const char *m = ksim_str(c, "manager");

			if (!m || strcmp(m, "kubectl-client-side-apply"))
				ok = 0;
			jv_free(c);
		}
	}
	return ok;
}

static int do_patch(const struct ksim_request *rq, const struct route *r, const struct wopts *o, jv *out)
{
	const char *ct = rq->content_type ? rq->content_type : "";
	jv old = ksim_store_get(r->t->gr, r->ns, r->name), patch, res;
	char err[KOP_ERRLEN];
	int apply = !strncmp(ct, "application/apply-patch+yaml", 28);

	if (!apply && query(rq, "force")) {
		*out = ksim_status(422, "Invalid", "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch",
				   jv_null());
		return 422;
	}
	if (apply) {
		jv docs;
		const char *fm = query(rq, "fieldManager");

		if (!fm || !*fm) {
			*out = ksim_status(422, "Invalid", "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
					   jv_null());
			return 422;
		}
		if (kop_yaml_load(rq->body ? rq->body : "", rq->body_len, "request body", &docs, err) < 0) {
			*out = bad_request(err);
			return 400;
		}
		if (jv_array_length(jv_copy(docs)) != 1) {
			jv_free(docs);
			*out = bad_request("error decoding YAML: the body must hold exactly one object");
			return 400;
		}
		patch = jv_array_get(docs, 0);
	} else if (parse_body(rq, &patch, out) < 0) {
		return status_code(*out);
	}
	if (apply) {
		jv conflicts = jv_null(), saved = jv_null();
		char now[32];
		const char *av = ksim_str(patch, "apiVersion"), *name;
		size_t name_len = 0;
		int rc;

		ksim_now(now);
		if (jv_get_kind(patch) != JV_KIND_OBJECT) {
			jv_free(patch);
			*out = bad_request("the body of the request is not a JSON object");
			return 400;
		}
		if (av && strcmp(av, r->t->api_version) && strcmp(r->t->gr, "events")) {
			struct kop_buf b = KOP_BUF_INIT;

			kop_buf_addf(&b, "Incorrect version specified in apply patch. Specified patch version: %s, expected: %s",
				     av, r->t->api_version);
			*out = bad_request(b.buf);
			kop_buf_release(&b);
			jv_free(patch);
			return 400;
		}
		name = ksim_strl(patch, "metadata.name", &name_len);
		if (name && bytes_differ(name, name_len, r->name)) {
			*out = name_mismatch(name, name_len, r->name);
			jv_free(patch);
			return 400;
		}
		if (!jv_is_valid(old) && r->sub) {
			jv_free(patch);
			*out = not_found(r->t, r->name);
			return 404;
		}
		if (!name)
			patch = set_meta(patch, "name", jv_string(r->name));
		if (r->t->flags & KT_NAMESPACED) {
			if (str_set_and_differs(patch, "metadata.namespace", r->ns)) {
				jv_free(patch);
				*out = bad_request("the namespace of the provided object does not match the namespace sent on the request");
				return 400;
			}
			patch = set_meta(patch, "namespace", jv_string(r->ns));
		}
		if (!jv_is_valid(old)) {
			/* the applied object is its own first version */
			patch = jv_object_set(patch, jv_string("apiVersion"), jv_string(r->t->api_version));
			patch = jv_object_set(patch, jv_string("kind"), jv_string(r->t->kind));
		}
		{
			jv applied_rv = get_meta(patch, "resourceVersion");
			jv li = listinfo(r->t);

			if (jv_get_kind(applied_rv) == JV_KIND_STRING && jv_is_valid(old) &&
			    !jv_equal(jv_copy(applied_rv), get_meta(old, "resourceVersion"))) {
				jv_free(applied_rv);
				jv_free(li);
				jv_free(patch);
				*out = conflict(r->t, r->name);
				return 409;
			}
			jv_free(applied_rv);
			saved = jv_copy(patch);
			rc = kop_ssa_apply(jv_is_valid(old) ? jv_copy(old) : jv_null(), patch, query(rq, "fieldManager"),
					   o->force, r->sub, now, li, &res, &conflicts, err);
			jv_free(li);
		}
		if (rc == 1 && upgrade_from_csa(old, conflicts, query(rq, "fieldManager"))) {
			/* kube-apiserver's lastAppliedManager: client-side apply hands over to kubectl's SSA */
			jv li = listinfo(r->t);

			jv_free(conflicts);
			conflicts = jv_null();
			rc = kop_ssa_apply(jv_copy(old), jv_copy(saved), query(rq, "fieldManager"), 1, r->sub, now, li,
					   &res, &conflicts, err);
			jv_free(li);
		}
		jv_free(saved);
		if (rc == 1) {
			char *msg = kop_ssa_conflict_message(conflicts);

			*out = ksim_status(409, "Conflict", msg,
					   JV_OBJECT(jv_string("causes"), kop_ssa_conflict_causes(conflicts)));
			free(msg);
			jv_free(conflicts);
			return 409;
		}
		if (rc < 0) {
			*out = bad_request(err);
			return 400;
		}
		jv_free(conflicts);
		if (!jv_is_valid(old))
			return do_create(r->t, r->ns, res, o, 1, out);
		return do_update(r->t, old, res, r->sub, o, 1, out);
	}
	if (!jv_is_valid(old)) {
		jv_free(patch);
		*out = not_found(r->t, r->name);
		return 404;
	}
	if (!strncmp(ct, "application/json-patch+json", 27)) {
		if (jv_get_kind(patch) != JV_KIND_ARRAY) {
			jv_free(patch);
			*out = bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch");
			return 400;
		}
		if (jv_array_length(jv_copy(patch)) > 10000) {
			jv_free(patch);
			*out = ksim_status(413, "RequestEntityTooLarge",
					   "Request entity too large: The allowed operations in a JSON patch are limited to 10000, got more",
					   jv_null());
			return 413;
		}
		if (kop_json_patch(present(r->t, jv_copy(old)), patch, &res, err) < 0) {
			*out = ksim_status(422, "Invalid", err, jv_null());
			return 422;
		}
	} else if (!strncmp(ct, "application/merge-patch+json", 28)) {
		if (jv_get_kind(patch) != JV_KIND_OBJECT) {
			jv_free(patch);
			*out = bad_request("the body of the request is not a JSON object");
			return 400;
		}
		res = kop_merge_patch(present(r->t, jv_copy(old)), patch);
	} else if (!strncmp(ct, "application/strategic-merge-patch+json", 38)) {
		if ((r->t->flags & KT_CUSTOM) || !kop_builtin_known(r->t->api_version, r->t->kind)) {
			jv_free(patch);
			*out = ksim_status(415, "UnsupportedMediaType",
					   "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
					   jv_null());
			return 415;
		}
		if (kop_strategic_merge_patch(present(r->t, jv_copy(old)), patch, r->t->api_version, r->t->kind, &res,
					      err) < 0) {
			*out = bad_request(err);
			return 400;
		}
	} else {
		jv_free(patch);
		*out = ksim_status(415, "UnsupportedMediaType",
				   "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json",
				   jv_null());
		return 415;
	}
	if (jv_get_kind(res) != JV_KIND_OBJECT) {
		jv_free(res);
		*out = bad_request("the patched object is not a JSON object");
		return 400;
	}
	return do_update(r->t, old, res, r->sub, o, 0, out);
}

/* DeleteOptions from the body or the query. */
struct delopts {
	char *uid, *rv, *policy;
	int dry;
	long grace;		/* gracePeriodSeconds, -1 when not given */
};

static void delopts_release(struct delopts *d)
{
	free(d->uid);
	free(d->rv);
	free(d->policy);
}

/* 0, or the HTTP status of the Status *err says what is wrong with. */
static int parse_delopts(const struct ksim_request *rq, struct delopts *d, jv *err)
{
	jv pb = jv_invalid();
	int rc;

	memset(d, 0, sizeof(*d));
	if ((rc = ksim_proto_delete_options(rq, &pb, err)) < 0)
		return 400;
	d->grace = -1;
	if (query(rq, "gracePeriodSeconds")) {
		char *end;
		long g = strtol(query(rq, "gracePeriodSeconds"), &end, 10);

		if (!*end && end != query(rq, "gracePeriodSeconds"))
			d->grace = g < 0 ? 0 : g;
	}
	if (query(rq, "propagationPolicy"))
		d->policy = kop_strdup(query(rq, "propagationPolicy"));
	if (rc > 0 || jv_is_valid(rq->body_jv) || (rq->body && rq->body_len)) {
		jv b = rc > 0		       ? pb
		       : jv_is_valid(rq->body_jv) ? jv_copy(rq->body_jv)
						  : jv_parse_sized(rq->body, (int)rq->body_len);

		if (jv_get_kind(b) == JV_KIND_OBJECT) {
			const char *s;
			jv dr = field(b, "dryRun"), g = field(b, "gracePeriodSeconds");

			if (jv_get_kind(g) == JV_KIND_NUMBER)
				d->grace = jv_number_value(g) < 0 ? 0 : (long)jv_number_value(g);
			jv_free(g);
			if ((s = ksim_str(b, "preconditions.uid")))
				d->uid = kop_strdup(s);
			if ((s = ksim_str(b, "preconditions.resourceVersion")))
				d->rv = kop_strdup(s);
			if ((s = ksim_str(b, "propagationPolicy"))) {
				free(d->policy);
				d->policy = kop_strdup(s);
			}
			if (jv_get_kind(dr) == JV_KIND_ARRAY && jv_array_length(jv_copy(dr)) > 0)
				d->dry = 1;
			jv_free(dr);
		} else if (!jv_is_valid(b) && rq->body_len > 0) {
			jv_free(b);
			delopts_release(d);
			*err = bad_request("json: cannot unmarshal the request body into DeleteOptions");
			return 400;
		}
		jv_free(b);
	}
	if (d->policy && strcmp(d->policy, "Orphan") && strcmp(d->policy, "Background") &&
	    strcmp(d->policy, "Foreground")) {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"%s\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"",
			     d->policy);
		*err = ksim_status(422, "Invalid", b.buf, jv_null());
		kop_buf_release(&b);
		delopts_release(d);
		return 422;
	}
	return 0;
}

struct orphan_ctx {
	const char *uid;
};

static int owned_by(const char *gr, jv obj, void *data)
{
	struct orphan_ctx *c = data;
	jv refs = get_meta(obj, "ownerReferences");
	int hit = 0;

	(void)gr;
	if (jv_get_kind(refs) == JV_KIND_ARRAY) {
		jv_array_foreach(refs, i, ref) {
			const char *u = ksim_str(ref, "uid");

			hit |= u && !strcmp(u, c->uid);
			jv_free(ref);
		}
	}
	jv_free(refs);
	return hit;
}

/* Orphan propagation: dependents lose their reference to uid (what the GC does for policy Orphan). */
static void orphan_dependents(const char *uid)
{
	struct orphan_ctx c = { uid };
	jv deps = ksim_store_select(owned_by, &c);

	jv_array_foreach(deps, i, pair) {
		jv gr = jv_array_get(jv_copy(pair), 0), obj = jv_array_get(pair, 1);
		jv refs = get_meta(obj, "ownerReferences"), kept = jv_array();
		jv nobj;

		jv_array_foreach(refs, j, ref) {
			const char *u = ksim_str(ref, "uid");

			if (u && !strcmp(u, uid))
				jv_free(ref);
			else
				kept = jv_array_append(kept, ref);
		}
		jv_free(refs);
		nobj = set_meta(jv_copy(obj), "ownerReferences",
				jv_array_length(jv_copy(kept)) ? kept : (jv_free(kept), jv_null()));
		jv_free(ksim_store_commit(jv_string_value(gr), obj, nobj));
		jv_free(gr);
	}
	jv_free(deps);
}

/* Deletes one stored object (a copy, consumed); returns the code and *out. */
static int delete_one(const struct ksim_type *t, jv stored, const struct delopts *d, int dry, jv *out)
{
	const char *name = ksim_str(stored, "metadata.name");
	char *nm = kop_strdup(name ? name : "");
	char now[32];
	int ns = !strcmp(t->gr, "namespaces");
	int code = 200;

	ksim_now(now);
	if (d->uid && strcmp(d->uid, ksim_str(stored, "metadata.uid") ? ksim_str(stored, "metadata.uid") : "")) {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "Precondition failed: UID in precondition: %s, UID in object meta: %s", d->uid,
			     ksim_str(stored, "metadata.uid"));
		*out = err_status(t, nm, 409, "Conflict",
				  "Operation cannot be fulfilled on %s: the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated",
				  t->resource, d->uid, ksim_str(stored, "metadata.uid"));
		kop_buf_release(&b);
		code = 409;
		goto out;
	}
	if (d->rv && strcmp(d->rv, ksim_str(stored, "metadata.resourceVersion"))) {
		*out = err_status(t, nm, 409, "Conflict",
				  "Operation cannot be fulfilled on %s: the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified",
				  t->resource, d->rv, ksim_str(stored, "metadata.resourceVersion"));
		code = 409;
		goto out;
	}
	if (ns) {
		if (!strcmp(nm, "default") || !strcmp(nm, "kube-system") || !strcmp(nm, "kube-public")) {
			*out = err_status(t, nm, 403, "Forbidden", "namespaces \"%s\" is forbidden: this namespace may not be deleted",
					  nm);
			code = 403;
			goto out;
		}
		if (ksim_str(stored, "metadata.deletionTimestamp")) {
			if (has_items(jv_getpath(jv_copy(stored), JV_ARRAY(jv_string("spec"), jv_string("finalizers"))))) {
				*out = err_status(t, nm, 409, "Conflict",
						  "Operation cannot be fulfilled on namespaces \"%s\": The system is ensuring all content is removed from this namespace.  Upon completion, this namespace will automatically be purged by the system.",
						  nm);
				code = 409;
				goto out;
			}
			*out = present(t, jv_copy(stored));
			goto out;
		}
	}
	if (d->policy && !strcmp(d->policy, "Orphan") && !dry) {
		const char *uid = ksim_str(stored, "metadata.uid");

		if (uid) {
			char *u = kop_strdup(uid);

			orphan_dependents(u);
			free(u);
		}
	}
	if (!strcmp(t->gr, "pods")) {
		/* graceful deletion: the kubelet deletes the pod once its containers stopped (sim_pods.c) */
		long g = ksim_pod_grace(stored, d->grace);
		jv have = get_meta(stored, "deletionGracePeriodSeconds");
		int shorter = jv_get_kind(have) != JV_KIND_NUMBER || g < jv_number_value(have);

		jv_free(have);
		if (g == 0 && graceful(stored) && !finalizers_empty(stored)) {
			/* the kubelet is done with it; its finalizers keep it */
			jv obj = set_meta(jv_copy(stored), "deletionGracePeriodSeconds", jv_number(0));

			*out = present(t, dry ? obj : ksim_store_commit(t->gr, jv_copy(stored), obj));
			goto out;
		}
		if (g > 0 && !shorter) {
			*out = present(t, jv_copy(stored));
			goto out;
		}
		if (g > 0) {
			char at[32];
			time_t when = time(NULL) + g;
			struct tm tm;
			jv obj;

			gmtime_r(&when, &tm);
			strftime(at, sizeof(at), "%Y-%m-%dT%H:%M:%SZ", &tm);
			obj = set_meta(jv_copy(stored), "deletionTimestamp", jv_string(at));
			obj = set_meta(obj, "deletionGracePeriodSeconds", jv_number((double)g));
			*out = present(t, dry ? obj : ksim_store_commit(t->gr, jv_copy(stored), obj));
			goto out;
		}
	}
	if (!finalizers_empty(stored) ||
	    (ns && has_items(jv_getpath(jv_copy(stored), JV_ARRAY(jv_string("spec"), jv_string("finalizers")))))) {
		jv obj;

		if (ksim_str(stored, "metadata.deletionTimestamp")) {
			*out = present(t, jv_copy(stored));
			goto out;
		}
		obj = set_meta(jv_copy(stored), "deletionTimestamp", jv_string(now));
		obj = set_meta(obj, "deletionGracePeriodSeconds", jv_number(0));
		if (t->flags & KT_GENERATION && generation(obj) > 0)
			obj = set_meta(obj, "generation", jv_number(generation(obj) + 1));
		if (ns)
			obj = jv_setpath(obj, JV_ARRAY(jv_string("status"), jv_string("phase")), jv_string("Terminating"));
		if (dry) {
			*out = present(t, obj);
			goto out;
		}
		*out = present(t, ksim_store_commit(t->gr, jv_copy(stored), obj));
		goto out;
	}
	if (dry) {
		*out = t->flags & KT_RETURN_DELETED ? present(t, jv_copy(stored)) :
			ksim_status(200, NULL, NULL,
				    jv_object_set(details(t, nm), jv_string("uid"),
						  jv_string(ksim_str(stored, "metadata.uid"))));
		goto out;
	}
	if (graceful(stored))	/* the grace-0 delete that ends a graceful one: watchers see 0 */
		stored = set_meta(stored, "deletionGracePeriodSeconds", jv_number(0));
	{
		jv uid = get_meta(stored, "uid");
		jv gone = remove_now(t, jv_copy(stored));

		if (t->flags & KT_RETURN_DELETED) {
			*out = present(t, gone);
		} else {
			jv_free(gone);
			*out = ksim_status(200, NULL, NULL, jv_object_set(details(t, nm), jv_string("uid"), uid));
			uid = jv_null();
		}
		jv_free(uid);
	}
out:
	jv_free(stored);
	free(nm);
	return code;
}

static int do_delete(const struct ksim_request *rq, const struct route *r, int dry, jv *out)
{
	struct delopts d;
	jv stored;
	int code;

	if ((code = parse_delopts(rq, &d, out)))
		return code;
	stored = ksim_store_get(r->t->gr, r->ns, r->name);
	if (!jv_is_valid(stored)) {
		delopts_release(&d);
		*out = not_found(r->t, r->name);
		return 404;
	}
	code = delete_one(r->t, jv_copy(stored), &d, dry || d.dry, out);
	delopts_release(&d);
	return code;
}

static int do_deletecollection(const struct ksim_request *rq, const struct route *r, int dry, jv *out)
{
	struct list_ctx c = { .t = r->t, .items = jv_array() };
	struct delopts d;
	jv items = jv_array();
	char rvbuf[32];
	int code;

	if (r->t->flags & KT_NO_DELCOL) {
		jv_free(c.items);
		*out = err_status(r->t, NULL, 405, "MethodNotAllowed",
				  "deletecollection is not supported on resources of kind \"%s\"", r->t->resource);
		return 405;
	}
	if (selectors(rq, r->t, &c.ls, &c.fs, out) < 0) {
		jv_free(c.items);
		return 400;
	}
	if ((code = parse_delopts(rq, &d, out))) {
		jv_free(c.items);
		ksim_selector_free(c.ls);
		ksim_selector_free(c.fs);
		return code;
	}
	ksim_store_each(r->t->gr, r->ns, NULL, list_fn, &c);
	jv_array_foreach(c.items, i, o) {
		jv res;

		if (delete_one(r->t, jv_copy(o), &d, dry || d.dry, &res) == 200) {
			const char *kind = ksim_str(res, "kind");

			if (kind && !strcmp(kind, "Status"))
				items = jv_array_append(items, present(r->t, jv_copy(o)));
			else
				items = jv_array_append(items, jv_copy(res));
		}
		jv_free(res);
		jv_free(o);
	}
	jv_free(c.items);
	free(c.last_key);
	delopts_release(&d);
	ksim_selector_free(c.ls);
	ksim_selector_free(c.fs);
	snprintf(rvbuf, sizeof(rvbuf), "%llu", (unsigned long long)ksim.rv);
	*out = JV_OBJECT(jv_string("kind"), jv_string(r->t->list_kind), jv_string("apiVersion"),
			 jv_string(r->t->api_version), jv_string("metadata"),
			 JV_OBJECT(jv_string("resourceVersion"), jv_string(rvbuf)), jv_string("items"), items);
	return 200;
}

/* ---- reviews ---------------------------------------------------------------------- */

/* POST of a review (KT_REVIEW): nothing stored, the answer made from the requester (review.c). */
static int do_review(const struct ksim_request *rq, const struct route *r, jv *out)
{
	const char *ct = rq->content_type ? rq->content_type : "";
	jv obj;

	if (strcmp(rq->method, "POST") || r->name) {
		*out = ksim_status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource",
				   jv_object());
		return 405;
	}
	if (!strncmp(ct, "application/vnd.kubernetes.protobuf", 35) && !jv_is_valid(rq->body_jv)) {
		/* kubectl 1.32 and later */
		if (ksim_review_protobuf(r->t, rq->body, rq->body_len, &obj) < 0) {
			*out = bad_request("the body of the request is not a valid protobuf object");
			return 400;
		}
	} else if (!strcmp(r->t->resource, "selfsubjectreviews") && !rq->body_len && !jv_is_valid(rq->body_jv)) {
		obj = jv_object();	/* nothing in it is read */
	} else if (parse_body(rq, &obj, out) < 0) {
		return status_code(*out);
	}
	if (check_kind(r->t, &obj, out) < 0)	/* (the protobuf envelope's typeMeta too) */
		return status_code(*out);
	return ksim_review(r->t, rq, obj, out);
}

/* ---- scale subresource ------------------------------------------------------------ */

/* The autoscaling/v1 Scale of a stored object (borrowed). */
static jv scale_of(jv obj)
{
	jv md = meta(obj), sel = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("spec"), jv_string("selector")));
	jv smd = jv_object(), spec = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("spec"), jv_string("replicas")));
	jv st = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("status"), jv_string("replicas")));
	static const char *const keep[] = { "name", "namespace", "uid", "resourceVersion", "creationTimestamp" };
	jv status, s;

	if (!strcmp(ksim_str(obj, "kind") ? ksim_str(obj, "kind") : "", "ReplicationController"))
		sel = JV_OBJECT(jv_string("matchLabels"), sel);	/* a ReplicationController's is a map */
	s = ksim_selector_string(sel);	/* selector.String(), matchExpressions too */

	for (size_t i = 0; i < sizeof(keep) / sizeof(*keep); i++)
		if (jv_object_has(jv_copy(md), jv_string(keep[i])))
			smd = jv_object_set(smd, jv_string(keep[i]), jv_object_get(jv_copy(md), jv_string(keep[i])));
	status = JV_OBJECT(jv_string("replicas"), jv_get_kind(st) == JV_KIND_NUMBER ? st : (jv_free(st), jv_number(0)));
	if (jv_get_kind(s) == JV_KIND_STRING && jv_string_length_bytes(jv_copy(s)) > 0)
		status = jv_object_set(status, jv_string("selector"), s);
	else
		jv_free(s);
	jv_free(sel);
	jv_free(md);
	return JV_OBJECT(jv_string("kind"), jv_string("Scale"), jv_string("apiVersion"), jv_string("autoscaling/v1"),
			 jv_string("metadata"), smd, jv_string("spec"),
			 JV_OBJECT(jv_string("replicas"),
				   jv_get_kind(spec) == JV_KIND_NUMBER ? spec : (jv_free(spec), jv_number(1))),
			 jv_string("status"), status);
}

/*
 * GET, PUT and PATCH on .../scale: the Scale view of spec.replicas
 * (kubectl scale). Writes go through do_update on the main resource.
 */
static int do_scale(const struct ksim_request *rq, const struct route *r, const struct wopts *o, jv *out)
{
	const char *m = rq->method, *ct = rq->content_type ? rq->content_type : "";
	jv stored = ksim_store_get(r->t->gr, r->ns, r->name), scale, rep, obj, res;
	char err[KOP_ERRLEN];
	int code;

	if (!jv_is_valid(stored)) {
		*out = not_found(r->t, r->name);
		return 404;
	}
	if (!strcmp(m, "GET")) {
		*out = scale_of(stored);
		return 200;
	}
	if (!strcmp(m, "PUT")) {
		int pb = ksim_proto_scale(rq, &scale, out);	/* (proto.c) */

		if (pb < 0 || (!pb && parse_body(rq, &scale, out) < 0))
			return status_code(*out);
	} else if (!strcmp(m, "PATCH")) {
		jv patch;

		if (parse_body(rq, &patch, out) < 0)
			return status_code(*out);
		if (!strncmp(ct, "application/json-patch+json", 27)) {
			if (kop_json_patch(scale_of(stored), patch, &scale, err) < 0) {
				*out = ksim_status(422, "Invalid", err, jv_null());
				return 422;
			}
		} else if (!strncmp(ct, "application/merge-patch+json", 28) ||
			   !strncmp(ct, "application/strategic-merge-patch+json", 38)) {
			scale = kop_merge_patch(scale_of(stored), patch);
		} else {
			jv_free(patch);
			*out = ksim_status(415, "UnsupportedMediaType",
					   "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json",
					   jv_null());
			return 415;
		}
	} else {
		*out = ksim_status(405, "MethodNotAllowed", "the scale subresource takes get, update and patch",
				   jv_null());
		return 405;
	}
	rep = jv_getpath(jv_copy(scale), JV_ARRAY(jv_string("spec"), jv_string("replicas")));
	if (jv_get_kind(rep) == JV_KIND_NULL)
		rep = jv_number(0);	/* omitempty: what a Go client sends for 0 */
	if (jv_get_kind(rep) != JV_KIND_NUMBER || jv_number_value(rep) < 0) {
		jv_free(rep);
		jv_free(scale);
		*out = ksim_status(422, "Invalid",
				   "Scale.autoscaling \"\" is invalid: spec.replicas: Invalid value: must be greater than or equal to 0",
				   jv_null());
		return 422;
	}
	obj = jv_setpath(jv_copy(stored), JV_ARRAY(jv_string("spec"), jv_string("replicas")), rep);
	{
		/* a resourceVersion in the Scale is a precondition */
		jv rv = jv_getpath(jv_copy(scale), JV_ARRAY(jv_string("metadata"), jv_string("resourceVersion")));

		obj = set_meta(obj, "resourceVersion", jv_get_kind(rv) == JV_KIND_STRING && *jv_string_value(rv) ? rv :
							  (jv_free(rv), get_meta(stored, "resourceVersion")));
	}
	jv_free(scale);
	code = do_update(r->t, stored, obj, NULL, o, 0, &res);
	if (code != 200) {
		*out = res;
		return code;
	}
	{
		const char *kind = ksim_str(res, "kind");

		*out = kind && !strcmp(kind, "Status") ? res : (scale_of(res));
		if (!(kind && !strcmp(kind, "Status")))
			jv_free(res);
	}
	return 200;
}

/* ---- watch set-up (the stream itself is in watch.c) ----------------------------- */

struct ksim_watch *ksim_watch_new(const struct ksim_request *rq, const struct ksim_type *t, const char *ns,
				  struct ksim_selector *ls, struct ksim_selector *fs, jv *err, int *code);

/* ---- entry ------------------------------------------------------------------------ */

static void answer(struct ksim_response *rs, int code, jv body)
{
	rs->code = code;
	if (rs->discard) {
		/* ksim_call_locked() without *out: nobody reads it */
		jv_free(body);
		rs->body = jv_invalid();
		return;
	}
	if (jv_get_kind(body) == JV_KIND_OBJECT)
		body = ksim_canonical(body);
	rs->body = body;
}

/* ksim_handle() with the lock held by the caller. */
static void handle_locked(const struct ksim_request *rq, struct ksim_response *rs)
{
	struct route r;
	struct ksim_attrs a;
	jv out = jv_null(), st;
	int code, dry;
	char mbuf[129];
	struct wopts o = { 0 };
	const char *m = rq->method;

	memset(rs, 0, sizeof(*rs));
	rs->body = jv_invalid();
	rs->warnings = jv_array();
	rs->discard = rq->internal && !rq->want_jv;
	if (!strcmp(m, "GET")) {
		jv d = ksim_discovery(rq->path);

		if (!jv_is_valid(d))
			d = ksim_openapi(rq->path);
		if (jv_is_valid(d)) {
			struct ksim_attrs na = { rq->user, "get", "", "", NULL, NULL, NULL, rq->path, rq->groups };

			if (ksim_authorize(&na, &st) < 0) {
				jv_free(d);
				answer(rs, 403, st);
			} else if (!strcmp(rq->path, "/version") && !rq->internal) {
				/* kube-apiserver writes it with responsewriters.WriteRawJSON:
				 * json.MarshalIndent, two spaces, no newline at the end */
				jv s = jv_dump_string(d, JV_PRINT_INDENT_FLAGS(2));

				rs->code = 200;
				rs->json = kop_strdup(jv_string_value(s));
				rs->json_len = strlen(rs->json);
				rs->json_verbatim = 1;
				jv_free(s);
			} else {
				answer(rs, 200, d);
			}
			goto done;
		}
		jv_free(d);
	}
	if (!strcmp(m, "GET") && !strcmp(rq->path, "/openapi/v2")) {
		/*
		 * kubectl 1.27 loads OpenAPI v2 (protobuf only) before it applies
		 * anything. An empty document (no definitions) makes it skip
		 * client-side validation and compute patches from its compiled-in
		 * types; the fieldValidation check reads /openapi/v3.
		 */
		static const char doc[] = "\x0a\x03" "2.0" "\x12\x15\x0a\x0a" "Kubernetes" "\x12\x07" "v1.30.0"
					  "\x42\x00";
		struct ksim_attrs na = { rq->user, "get", "", "", NULL, NULL, NULL, rq->path, rq->groups };

		if (ksim_authorize(&na, &st) < 0) {	/* (as every other document: not for anonymous) */
			answer(rs, 403, st);
			goto done;
		}
		rs->code = 200;
		rs->text_len = sizeof(doc) - 1;
		rs->text = kop_malloc(rs->text_len + 1);
		memcpy(rs->text, doc, rs->text_len + 1);
		rs->content_type = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
		goto done;
	}
	if (route(rq->path, &r) < 0) {
		/* kube-apiserver authorizes a request, resource or not, before it finds nothing there */
		char verb[16], *copy = kop_strdup(rq->path);
		struct ksim_attrs na = { rq->user, ksim_nonresource_verb(m, verb, sizeof(verb)), "", "", NULL,
					 NULL, NULL, rq->path, rq->groups };

		if (resource_path(rq->path)) {
			na.path = NULL;
			unrouted_attrs(rq, copy, &na);
		}
		if (ksim_authorize(&na, &st) < 0) {
			free(copy);
			answer(rs, 403, st);
			goto done;
		}
		free(copy);
		rs->code = 404;
		rs->text = kop_strdup("404 page not found\n");
		rs->content_type = "text/plain; charset=utf-8";
		goto done;
	}
	a.user = rq->user;
	a.verb = verb_of(rq, &r);
	a.group = r.t->group;
	a.resource = r.t->resource;
	a.subresource = r.sub;
	a.namespace = r.ns;
	a.name = r.name;
	a.path = NULL;
	a.groups = rq->groups;
	if (ksim_authorize(&a, &st) < 0) {
		answer(rs, 403, st);
		route_release(&r);
		goto done;
	}
	if (r.name && !r.ns && (r.t->flags & KT_NAMESPACED)) {
		/* /apis/G/V/RES/NAME on a namespaced resource: not a route */
		rs->code = 404;
		rs->text = kop_strdup("404 page not found\n");
		rs->content_type = "text/plain; charset=utf-8";
		route_release(&r);
		goto done;
	}
	dry = dry_run(rq, &out);
	if (dry < 0) {
		answer(rs, 422, out);
		route_release(&r);
		goto done;
	}
	o.dry_run = dry;
	o.manager = manager_of(rq, mbuf, sizeof(mbuf));
	o.user = rq->user;
	o.force = query_bool(rq, "force");
	o.warnings = &rs->warnings;
	{
		const char *fv = query(rq, "fieldValidation");

		if (!fv || !*fv || !strcmp(fv, "Warn")) {
			o.validation = VALIDATE_WARN;
		} else if (!strcmp(fv, "Strict")) {
			o.validation = VALIDATE_STRICT;
		} else if (!strcmp(fv, "Ignore")) {
			o.validation = VALIDATE_IGNORE;
		} else {
			struct kop_buf b = KOP_BUF_INIT;

			kop_buf_addf(&b, "fieldValidation: Unsupported value: \"%s\": supported values: \"Ignore\", \"Strict\", \"Warn\"",
				     fv);
			answer(rs, 400, bad_request(b.buf));
			kop_buf_release(&b);
			route_release(&r);
			goto done;
		}
	}
	if (r.t->flags & KT_REVIEW) {
		code = do_review(rq, &r, &out);
		answer(rs, code, out);
	} else if (!strcmp(m, "GET") && !r.name && query_bool(rq, "watch")) {
		struct ksim_selector *ls, *fs;

		if (selectors(rq, r.t, &ls, &fs, &out) < 0) {
			answer(rs, 400, out);
		} else {
			rs->watch = ksim_watch_new(rq, r.t, r.t->flags & KT_NAMESPACED ? r.ns : NULL, ls, fs, &out, &code);
			if (!rs->watch)
				answer(rs, code, out);
			else
				rs->code = 200;
		}
	} else if (r.sub && ksim_pod_subresource_name(r.sub)) {
		char *text;

		code = ksim_pod_subresource(r.t, r.ns, r.name, r.sub, m, &out, &text);
		if (text) {
			jv_free(out);
			rs->code = code;
			rs->text = text;
			rs->content_type = code == 204 ? "" : NULL;
		} else {
			answer(rs, code, out);
		}
	} else if (r.sub && !strcmp(r.sub, "scale")) {
		code = do_scale(rq, &r, &o, &out);
		answer(rs, code, out);
	} else if (!strcmp(m, "GET")) {
		if (r.name) {
			code = do_get(rq, &r, &out);
			answer(rs, code, out);
		} else {
			char *text = NULL;
			size_t text_len = 0;

			/* a list's items' JSON is kept with the stored objects (list_text) */
			code = do_list(rq, &r, &out, rq->internal || rq->want_jv ? NULL : &text, &text_len);
			if (text) {
				rs->code = code;
				rs->json = text;
				rs->json_len = text_len;
			} else {
				answer(rs, code, out);
			}
		}
	} else if (!strcmp(m, "POST") && !r.name) {
		jv obj;

		if (body_object(rq, r.t, &obj, &out) < 0)
			answer(rs, status_code(out), out);
		else if (!(r.t->flags & KT_NAMESPACED) || r.ns)
			answer(rs, (code = do_create(r.t, r.ns, obj, &o, 0, &out)), out);
		else {
			jv_free(obj);
			rs->code = 404;
			rs->text = kop_strdup("404 page not found\n");
			rs->content_type = "text/plain; charset=utf-8";
		}
	} else if (!strcmp(m, "PUT") && r.name) {
		o.put = 1;
		code = do_put(rq, &r, &o, &out);
		answer(rs, code, out);
	} else if (!strcmp(m, "PATCH") && r.name) {
		code = do_patch(rq, &r, &o, &out);
		answer(rs, code, out);
	} else if (!strcmp(m, "DELETE") && r.name && !r.sub) {
		code = do_delete(rq, &r, dry, &out);
		answer(rs, code, out);
	} else if (!strcmp(m, "DELETE") && !r.name) {
		code = do_deletecollection(rq, &r, dry, &out);
		answer(rs, code, out);
	} else {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "%s is not supported on resources of kind \"%s\"", m, r.t->resource);
		answer(rs, 405, ksim_status(405, "MethodNotAllowed", b.buf, jv_null()));
		kop_buf_release(&b);
	}
	route_release(&r);
done:
	if (rq->internal) {
		/* ksim_call_locked(): the caller holds the lock and reads rs->body, if anything */
		if (!rq->want_jv) {
			jv_free(rs->body);
			rs->body = jv_invalid();
		}
		return;
	}
	/* nothing that shares storage with the store leaves the lock */
	if (jv_is_valid(rs->body)) {
		rs->json = ksim_dump(jv_copy(rs->body), &rs->json_len);
		if (rq->want_jv) {
			rs->body = ksim_deep_copy(rs->body);
		} else {
			jv_free(rs->body);
			rs->body = jv_invalid();
		}
	}
}

void ksim_handle(const struct ksim_request *rq, struct ksim_response *rs)
{
	ksim_lock();
	handle_locked(rq, rs);
	ksim_unlock();
}

void ksim_response_release(struct ksim_response *rs)
{
	jv_free(rs->body);
	jv_free(rs->warnings);
	free(rs->text);
	free(rs->json);
	if (rs->watch)
		ksim_watch_free(rs->watch);
	memset(rs, 0, sizeof(*rs));
	rs->body = rs->warnings = jv_null();
}

/* The request of ksim_call() and ksim_call_locked(): returns the path to free, and rq->query to free. */
static char *call_request(struct ksim_request *rq, const char *user, const char *method, const char *path_and_query,
			  const char *content_type)
{
	char *path = kop_strdup(path_and_query), *q = strchr(path, '?');
	jv query = jv_object();

	if (q) {
		*q++ = 0;
		while (*q) {
			size_t n = strcspn(q, "&");
			char *kv = kop_strndup(q, n), *eq = strchr(kv, '=');

			if (eq) {
				*eq = 0;
				query = jv_object_set(query, jv_string(kv), jv_string(eq + 1));
			} else {
				query = jv_object_set(query, jv_string(kv), jv_string(""));
			}
			free(kv);
			q += n;
			if (*q)
				q++;
		}
	}
	memset(rq, 0, sizeof(*rq));
	rq->method = method;
	rq->path = path;
	rq->query = query;
	rq->content_type = content_type ? content_type : "application/json";
	rq->user = user;
	rq->user_agent = "ksim";
	rq->body_jv = jv_invalid();
	return path;
}

int ksim_call(const char *user, const char *method, const char *path_and_query, const char *content_type, jv body,
	      jv *out)
{
	struct ksim_request rq;
	struct ksim_response rs;
	char *path = call_request(&rq, user, method, path_and_query, content_type);
	jv dumped = jv_null();
	int code;

	rq.want_jv = out != NULL;
	if (jv_get_kind(body) != JV_KIND_NULL && jv_is_valid(body)) {
		dumped = jv_dump_string(body, 0);
		rq.body = jv_string_value(dumped);
		rq.body_len = strlen(rq.body);
	} else {
		jv_free(body);
	}
	ksim_handle(&rq, &rs);
	code = rs.code;
	if (out)
		*out = jv_copy(rs.body);
	ksim_response_release(&rs);
	jv_free(dumped);
	jv_free(rq.query);
	free(path);
	return code;
}

int ksim_call_locked(const char *user, const char *method, const char *path_and_query, jv body, jv *out)
{
	struct ksim_request rq;
	struct ksim_response rs;
	char *path = call_request(&rq, user, method, path_and_query, NULL);
	int code;

	rq.want_jv = out != NULL;
	rq.internal = 1;
	if (jv_get_kind(body) != JV_KIND_NULL && jv_is_valid(body))
		rq.body_jv = body;
	else
		jv_free(body);
	handle_locked(&rq, &rs);
	code = rs.code;
	if (out)
		*out = jv_copy(rs.body);
	ksim_response_release(&rs);
	jv_free(rq.body_jv);
	jv_free(rq.query);
	free(path);
	return code;
}
