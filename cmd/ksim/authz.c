/*
 * Authorization: a request's attributes (verb, resource, subresource) as
 * kube-apiserver derives them, checked against RBAC (rbac.c keeps the rules).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include "api.h"
#include "banned.h"

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
int resource_path(const char *path)
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

const char *verb_of(const struct ksim_request *rq, const struct route *r)
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
void unrouted_attrs(const struct ksim_request *rq, char *path, struct ksim_attrs *a)
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
