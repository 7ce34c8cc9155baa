/*
 * Routing: an /api or /apis URL to its type, namespace, name and
 * subresource (struct route). What is done with it is api.c's.
 */
#include <stdlib.h>
#include <string.h>
#include "api.h"
#include "banned.h"

void route_release(struct route *r)
{
	free(r->ns);
	free(r->name);
	free(r->sub);
	memset(r, 0, sizeof(*r));
}

/* 0 = routed; -1 = unknown path (plain 404). */
int route(const char *path, struct route *r)
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
		    !strcmp(r->sub, "token") ? strcmp(r->t->gr, "serviceaccounts") :
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
