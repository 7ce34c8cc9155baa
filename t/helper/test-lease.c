/*
 * test-tool lease-scenario < script: client-go's leader election (lib/lease.c)
 * between candidates on an in-memory Lease store with a virtual clock.
 * Script lines: "CANDIDATE try|release MS" (local monotonic ms; wall time is
 * 2026-01-01T00:00:00Z + MS), "store" (print the stored Lease), "fail N" (the
 * next N requests get no response), "steal NAME MS" (another writer updates the
 * lease: holder NAME). Each action prints its result and the holder.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kop.h"
#include "jsonl.h"
#include "lease.h"
#include "test-tool.h"
#include "banned.h"

#define WALL0_US 1767225600000000LL	/* 2026-01-01T00:00:00Z */

struct store {
	jv obj;		/* the Lease or jv_null() */
	long rv;
	int fail;
	int requests;
};

static jv store_status(long code, const char *reason, const char *msg)
{
	return JV_OBJECT(jv_string("kind"), jv_string("Status"), jv_string("status"), jv_string("Failure"),
			 jv_string("reason"), jv_string(reason), jv_string("message"), jv_string(msg),
			 jv_string("code"), jv_number((double)code));
}

static jv store_put(struct store *s, jv obj)
{
	char rv[32];

	snprintf(rv, sizeof(rv), "%ld", ++s->rv);
	obj = jv_setpath(obj, JV_ARRAY(jv_string("metadata"), jv_string("resourceVersion")), jv_string(rv));
	jv_free(s->obj);
	s->obj = jv_copy(obj);
	return obj;
}

static long store_request(void *ctx, const char *method, const char *path, jv body, jv *resp, char *err)
{
	struct store *s = ctx;
	jv have, want;
	int same;

	s->requests++;
	*resp = jv_null();
	if (s->fail > 0) {
		s->fail--;
		jv_free(body);
		kop_error(err, "Connection refused");
		return 0;
	}
	if (!strcmp(method, "GET")) {
		jv_free(body);
		if (jv_get_kind(s->obj) == JV_KIND_NULL) {
			*resp = store_status(404, "NotFound", "leases.coordination.k8s.io \"lock\" not found");
			return 404;
		}
		*resp = jv_copy(s->obj);
		return 200;
	}
	if (!strcmp(method, "POST")) {
		if (jv_get_kind(s->obj) != JV_KIND_NULL) {
			jv_free(body);
			*resp = store_status(409, "AlreadyExists", "leases.coordination.k8s.io \"lock\" already exists");
			return 409;
		}
		*resp = store_put(s, body);
		return 201;
	}
	/* PUT: the resourceVersion must be the current one. */
	have = jv_getpath(jv_copy(s->obj), JV_ARRAY(jv_string("metadata"), jv_string("resourceVersion")));
	want = jv_getpath(jv_copy(body), JV_ARRAY(jv_string("metadata"), jv_string("resourceVersion")));
	same = jv_equal(have, want);
	if (!same || strstr(path, "/leases/") == NULL) {
		jv_free(body);
		*resp = store_status(409, "Conflict", "the object has been modified; please apply your changes "
				     "to the latest version and try again");
		return 409;
	}
	*resp = store_put(s, body);
	return 200;
}

struct candidate {
	char name[32];
	struct lease l;
};

static struct lease *candidate(struct candidate *c, int *n, const char *name)
{
	int i;

	for (i = 0; i < *n; i++)
		if (!strcmp(c[i].name, name))
			return &c[i].l;
	if (*n == 8)
		return NULL;
	snprintf(c[*n].name, sizeof(c[*n].name), "%s", name);
	lease_init(&c[*n].l, "ns", "lock", name, 15);
	return &c[(*n)++].l;
}

static int cmd_lease_scenario(int argc, char **argv)
{
	struct store s = { jv_null(), 0, 0, 0 };
	struct lease_io io = { store_request, &s, NULL, NULL };
	struct candidate cand[8];
	int ncand = 0, i;
	char line[256];

	(void)argc;
	(void)argv;
	while (fgets(line, sizeof(line), stdin)) {
		char who[32], what[32], err[KOP_ERRLEN] = "";
		long long ms = 0;
		struct lease *l;
		int r;

		line[strcspn(line, "\n")] = 0;
		if (!*line || *line == '#')
			continue;
		if (!strcmp(line, "store")) {
			kop_jsonl_write(stdout, jv_copy(s.obj));
			continue;
		}
		if (sscanf(line, "fail %d", &s.fail) == 1)
			continue;
		if (sscanf(line, "steal %31s %lld", who, &ms) == 2) {
			jv o = jv_setpath(jv_copy(s.obj), JV_ARRAY(jv_string("spec"), jv_string("holderIdentity")),
					  jv_string(who));

			jv_free(store_put(&s, o));
			continue;
		}
		if (sscanf(line, "%31s %31s %lld", who, what, &ms) != 3 || !(l = candidate(cand, &ncand, who))) {
			fprintf(stderr, "bad line: %s\n", line);
			return 2;
		}
		s.requests = 0;
		if (!strcmp(what, "try"))
			r = lease_try_acquire_or_renew(l, &io, ms, WALL0_US + ms * 1000, err);
		else if (!strcmp(what, "release"))
			r = lease_release(l, &io, WALL0_US + ms * 1000, err);
		else {
			fprintf(stderr, "bad action: %s\n", what);
			return 2;
		}
		printf("%s %s %lld: %d%s%s requests=%d holder=%s\n", who, what, ms, r, *err ? " " : "", err,
		       s.requests, lease_holder(l));
	}
	for (i = 0; i < ncand; i++)
		lease_release_mem(&cand[i].l);
	jv_free(s.obj);
	return 0;
}

static const struct test_cmd lease_cmds[] = {
	{ "lease-scenario", cmd_lease_scenario },
	{ NULL, NULL }
};
TEST_TOOL_REGISTER(lease_cmds)
