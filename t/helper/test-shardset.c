/*
 * test-tool shardset-sim < script: replicas sharing R ranges through
 * lib/shardset.c on an in-memory Lease store, on a simulated clock (10 ms
 * steps). Each replica runs a round every retry period (+ up to 10 % jitter)
 * with its own monotonic clock and a skewed wall clock. At every step the
 * simulation checks that no range is usable (shardset_usable) by two
 * replicas, that a usable range's stored Lease names its replica, and that
 * the store never saw a range Lease change holder before the previous
 * holder's last write had expired (unless released): it prints
 * "violation: ..." and exits 1 otherwise. Rounds that change something are
 * logged on stderr. Requests may take simulated time (latency, timeout):
 * the clock moves during a round, but the rounds of two replicas never
 * overlap.
 *
 * Script lines (# comments):
 *   ranges R | duration S | deadline MS | retry MS | seed N   settings, before any start
 *   expirywake 0|1    a replica also runs a round when another's member or range Lease
 *                     expires (shardset_next_free), as the supervisor does; 0 at first
 *   winddown MS       a replica works for what a round drops MS more (shardset's busy), 0 at
 *                     first: those ranges count as its own in the checks until then
 *   latency MS        each request takes MS of simulated time (applied half way), 0 at first
 *   timeout MS        a request that gets no answer takes MS, 0 at first
 *   start NAME        a replica (identity NAME) starts; its first round is now
 *   stop NAME         it stops working and releases everything (shutdown)
 *   kill NAME         it stops running rounds, frozen (its usable set is still checked)
 *   restart NAME      its process is gone (nothing released) and a new one of the same
 *                     identity starts
 *   cut NAME | heal NAME  every request of NAME gets no answer / answers again
 *   fail NAME CODE N  the next N requests of NAME fail with CODE (0: no answer), not applied
 *   flaky PCT         each request fails with probability PCT %: no answer, 500, or
 *                     applied with its answer lost
 *   run MS            runs the simulation for MS
 *   until even MAXMS  runs until the running replicas hold the targets (sorted by identity,
 *                     the first R % n one more), every range usable: "even after X ms: A=11 ..."
 *   until taken MAXMS runs until every range is usable by a running replica: "taken after X ms"
 *   show              "t=MS NAME=COUNT ... free=F": the usable ranges of each replica
 *   max               "max=M": the most ranges any replica holds
 *   leases            the stored Leases, "NAME holder=H duration=S", sorted
 *   requests          "NAME rounds=N requests=M" per replica since the last "requests"
 *
 * test-tool shardset-kube [--ranges R] [--duration S] [--deadline MS] NS < script:
 * the same on a real API server ($KUBECONFIG), the real clock; lines
 * "ID round", "ID release" (shutdown), "sleep MS"; each action prints
 * "ID round: OK|error: ... live=L rank=K target=T held=N gained=.. lost=..".
 *   put LEASE HOLDER  another writer creates or updates Lease LEASE: holder HOLDER,
 *                     15 s, renewed now
 *   steal NAME RANGE  another writer puts holder NAME into the Lease of RANGE (what
 *                     the checks must catch)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "kop.h"
#include "kube.h"
#include "lease.h"
#include "shardset.h"
#include "test-tool.h"
#include "banned.h"

#define WALL0_US 1767225600000000LL	/* 2026-01-01T00:00:00Z */
#define STEP_MS 10
#define MAXREP 16
#define PREFIX "iot-operator"
#define NS "iot-system"
#define COLLECTION "/apis/coordination.k8s.io/v1/namespaces/" NS "/leases"

struct entry {
	char *name;
	jv obj;
	int64_t written;	/* global time of the last write */
};

enum rstate { R_RUNNING, R_STOPPED, R_KILLED };

struct replica {
	char name[32];
	enum rstate state;
	struct shardset s;
	int64_t next_round, mono0, skew_ms;
	uint64_t winding;		/* dropped, still worked for (winddown) until winding_until */
	int64_t winding_until;
	int cut, fail_n;
	long rounds, requests;
	long fail_code;
	struct sim *sim;
};

struct sim {
	struct entry *e;
	size_t ne;
	long rv;
	int64_t t;
	unsigned ranges;
	long duration_s;
	int64_t deadline_ms, retry_ms, latency_ms, timeout_ms, winddown_ms;
	int expirywake;
	unsigned long long rng;
	int flaky_pct;
	struct replica rep[MAXREP];
	int nrep;
	char violation[512];
};

static unsigned rnd(struct sim *m, unsigned n)
{
	m->rng = m->rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (unsigned)((m->rng >> 33) % n);
}

static jv status(long code, const char *reason, const char *msg)
{
	return JV_OBJECT(jv_string("kind"), jv_string("Status"), jv_string("apiVersion"), jv_string("v1"),
			 jv_string("status"), jv_string("Failure"), jv_string("reason"), jv_string(reason),
			 jv_string("message"), jv_string(msg), jv_string("code"), jv_number((double)code));
}

static struct entry *find(struct sim *m, const char *name)
{
	size_t i;

	for (i = 0; i < m->ne; i++)
		if (!strcmp(m->e[i].name, name))
			return &m->e[i];
	return NULL;
}

static jv spec_str(jv obj, const char *key)
{
	jv v = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("spec"), jv_string(key)));

	if (jv_get_kind(v) != JV_KIND_STRING) {
		jv_free(v);
		return jv_string("");
	}
	return v;
}

static double spec_num(jv obj, const char *key)
{
	jv v = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("spec"), jv_string(key)));
	double d = jv_get_kind(v) == JV_KIND_NUMBER ? jv_number_value(v) : 0;

	jv_free(v);
	return d;
}

/*
 * Stores obj as name (e, or a new entry): a range Lease must not pass from
 * one holder to another before the previous holder's last write expired.
 */
static jv store_write(struct sim *m, struct entry *e, const char *name, jv obj)
{
	char rv[32];

	if (e && !strncmp(name, PREFIX "-shard-", strlen(PREFIX "-shard-"))) {
		jv was = spec_str(e->obj, "holderIdentity"), now = spec_str(obj, "holderIdentity");

		if (*jv_string_value(was) && *jv_string_value(now) && strcmp(jv_string_value(was), jv_string_value(now)) &&
		    m->t - e->written < (int64_t)(spec_num(e->obj, "leaseDurationSeconds") * 1000) && !*m->violation)
			snprintf(m->violation, sizeof(m->violation),
				 "%s passed from %s to %s at t=%lld, %lld ms after %s's last write", name,
				 jv_string_value(was), jv_string_value(now), (long long)m->t,
				 (long long)(m->t - e->written), jv_string_value(was));
		jv_free(was);
		jv_free(now);
	}
	snprintf(rv, sizeof(rv), "%ld", ++m->rv);
	obj = jv_setpath(obj, JV_ARRAY(jv_string("metadata"), jv_string("resourceVersion")), jv_string(rv));
	if (!e) {
		m->e = kop_realloc(m->e, (m->ne + 1) * sizeof(*m->e));
		e = &m->e[m->ne++];
		e->name = kop_strdup(name);
	} else {
		jv_free(e->obj);
	}
	e->obj = jv_copy(obj);
	e->written = m->t;
	return obj;
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

/* The store: GET of the collection or of one Lease, POST, PUT and DELETE with a resourceVersion precondition. */
static long store(struct sim *m, const char *method, const char *path, jv body, jv *resp)
{
	const char *name = NULL;
	struct entry *e;
	jv have, want;
	size_t i;

	if (!strncmp(path, COLLECTION "/", strlen(COLLECTION "/")))
		name = path + strlen(COLLECTION "/");
	else if (strcmp(path, COLLECTION)) {
		jv_free(body);
		*resp = status(404, "NotFound", "the server could not find the requested resource");
		return 404;
	}
	if (!strcmp(method, "GET") && !name) {
		jv items = jv_array();

		jv_free(body);
		if (m->ne)
			qsort(m->e, m->ne, sizeof(*m->e), entry_cmp);
		for (i = 0; i < m->ne; i++)
			items = jv_array_append(items, jv_copy(m->e[i].obj));
		*resp = JV_OBJECT(jv_string("kind"), jv_string("LeaseList"), jv_string("apiVersion"),
				  jv_string("coordination.k8s.io/v1"), jv_string("metadata"), jv_object(),
				  jv_string("items"), items);
		return 200;
	}
	if (!strcmp(method, "POST") && !name) {
		jv n = jv_getpath(jv_copy(body), JV_ARRAY(jv_string("metadata"), jv_string("name")));
		long code = 201;

		if (jv_get_kind(n) != JV_KIND_STRING) {
			jv_free(body);
			*resp = status(422, "Invalid", "metadata.name: Required value");
			code = 422;
		} else if (find(m, jv_string_value(n))) {
			jv_free(body);
			*resp = status(409, "AlreadyExists", "leases.coordination.k8s.io already exists");
			code = 409;
		} else {
			*resp = store_write(m, NULL, jv_string_value(n), body);
		}
		jv_free(n);
		return code;
	}
	if (!name) {
		jv_free(body);
		*resp = status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
		return 405;
	}
	e = find(m, name);
	if (!e) {
		jv_free(body);
		*resp = status(404, "NotFound", "leases.coordination.k8s.io not found");
		return 404;
	}
	if (!strcmp(method, "GET")) {
		jv_free(body);
		*resp = jv_copy(e->obj);
		return 200;
	}
	have = jv_getpath(jv_copy(e->obj), JV_ARRAY(jv_string("metadata"), jv_string("resourceVersion")));
	if (!strcmp(method, "DELETE"))
		want = jv_getpath(body, JV_ARRAY(jv_string("preconditions"), jv_string("resourceVersion")));
	else
		want = jv_getpath(jv_copy(body), JV_ARRAY(jv_string("metadata"), jv_string("resourceVersion")));
	if (!jv_equal(have, want)) {
		if (strcmp(method, "DELETE"))
			jv_free(body);
		*resp = status(409, "Conflict", "the object has been modified; please apply your changes to the "
			       "latest version and try again");
		return 409;
	}
	if (!strcmp(method, "DELETE")) {
		*resp = jv_copy(e->obj);
		jv_free(e->obj);
		free(e->name);
		*e = m->e[--m->ne];
		return 200;
	}
	*resp = store_write(m, e, name, body);
	return 200;
}

/* A request without an answer: it took the timeout. */
static long no_answer(struct sim *m, char *err, const char *why)
{
	m->t += m->timeout_ms;
	kop_error(err, "%s", why);
	return 0;
}

static long replica_request(void *ctx, const char *method, const char *path, jv body, jv *resp, char *err)
{
	struct replica *r = ctx;
	struct sim *m = r->sim;
	long code;

	*resp = jv_null();
	r->requests++;
	if (r->cut || r->fail_n > 0) {
		code = r->cut ? 0 : r->fail_code;
		if (!r->cut)
			r->fail_n--;
		jv_free(body);
		if (!code)
			return no_answer(m, err, "Connection refused");
		m->t += m->latency_ms;
		*resp = status(code, "InternalError", "Internal error occurred: injected");
		return code;
	}
	m->t += m->latency_ms / 2;
	if (m->flaky_pct && (int)rnd(m, 100) < m->flaky_pct) {
		switch (rnd(m, 3)) {
		case 0:
			jv_free(body);
			return no_answer(m, err, "Connection refused");
		case 1:
			jv_free(body);
			m->t += m->latency_ms - m->latency_ms / 2;
			*resp = status(500, "InternalError", "Internal error occurred: injected");
			return 500;
		default:	/* applied, the answer lost */
			code = store(m, method, path, body, resp);
			jv_free(*resp);
			*resp = jv_null();
			return no_answer(m, err, "Operation timed out after 5000 milliseconds");
		}
	}
	code = store(m, method, path, body, resp);
	m->t += m->latency_ms - m->latency_ms / 2;
	return code;
}

static struct replica *replica(struct sim *m, const char *name)
{
	int i;

	for (i = 0; i < m->nrep; i++)
		if (!strcmp(m->rep[i].name, name))
			return &m->rep[i];
	return NULL;
}

static int64_t mono(const struct replica *r, int64_t t)
{
	return r->mono0 + t;
}

static void print_ranges(FILE *f, uint64_t bits, unsigned n)
{
	unsigned i;
	const char *sep = "";

	for (i = 0; i < n; i++)
		if (bits & ((uint64_t)1 << i)) {
			fprintf(f, "%s%u", sep, i);
			sep = ",";
		}
	if (!*sep)
		fputc('-', f);
}

static int64_t clock_mono(void *ctx)
{
	struct replica *r = ctx;

	return mono(r, r->sim->t);
}

static int64_t clock_wall(void *ctx)
{
	struct replica *r = ctx;

	return WALL0_US + (r->sim->t + r->skew_ms) * 1000;
}

static void round_of(struct sim *m, struct replica *r)
{
	struct lease_io io = { replica_request, r, NULL, NULL };
	struct shardset_clock c = { clock_mono, clock_wall, r };
	char err[KOP_ERRLEN] = "";
	int64_t t0 = m->t;
	int rc;

	if (m->t >= r->winding_until)
		r->winding = 0;
	r->s.busy = r->winding;
	rc = shardset_round(&r->s, &io, &c, err);
	r->rounds++;
	/* The caller stops working for what it lost (winddown later), then hands it over. */
	if (r->s.lost && m->winddown_ms) {
		r->winding |= r->s.lost;
		r->winding_until = m->t + m->winddown_ms;
	}
	r->s.busy = r->winding;
	if (r->s.pending && shardset_handover(&r->s, &io, &c, err) < 0)
		rc = -1;
	if (r->s.gained || r->s.lost || rc < 0) {
		fprintf(stderr, "t=%lld..%lld %s: live=%u rank=%d target=%u held=%u gained=", (long long)t0,
			(long long)m->t, r->name,
			r->s.live, r->s.rank, r->s.target, (unsigned)__builtin_popcountll(r->s.held));
		print_ranges(stderr, r->s.gained, m->ranges);
		fputs(" lost=", stderr);
		print_ranges(stderr, r->s.lost, m->ranges);
		if (rc < 0)
			fprintf(stderr, " error: %s", err);
		fputc('\n', stderr);
	}
	r->next_round = m->t + m->retry_ms + rnd(m, (unsigned)(m->retry_ms / 10 + 1));
	if (m->expirywake) {
		int64_t free_at = shardset_next_free(&r->s, mono(r, m->t));

		if (free_at && free_at + 1 - r->mono0 < r->next_round)
			r->next_round = free_at + 1 - r->mono0;
	}
}

/* The ranges r still works for at t after dropping them (winddown). */
static uint64_t winding(const struct replica *r, int64_t t)
{
	return t < r->winding_until ? r->winding : 0;
}

/* The checks of one step: see the top of the file. */
static int check(struct sim *m)
{
	unsigned i;
	int a, b;
	char name[64];

	if (*m->violation)
		return -1;
	for (a = 0; a < m->nrep; a++) {
		uint64_t ua = shardset_usable(&m->rep[a].s, mono(&m->rep[a], m->t));
		uint64_t wa = winding(&m->rep[a], m->t);

		for (b = a + 1; b < m->nrep; b++) {
			uint64_t ub = shardset_usable(&m->rep[b].s, mono(&m->rep[b], m->t));
			uint64_t wb = winding(&m->rep[b], m->t);
			uint64_t both = (ua | wa) & (ub | wb);

			if (both) {
				snprintf(m->violation, sizeof(m->violation), "ranges usable (or winding down) by %s and %s at once at t=%lld "
					 "(first %d)", m->rep[a].name, m->rep[b].name, (long long)m->t,
					 __builtin_ctzll(both));
				return -1;
			}
		}
		for (i = 0; i < m->ranges; i++) {
			struct entry *e;
			jv h;
			int ok;

			if (!(ua & ((uint64_t)1 << i)))
				continue;
			snprintf(name, sizeof(name), PREFIX "-shard-%02u", i);
			e = find(m, name);
			h = e ? spec_str(e->obj, "holderIdentity") : jv_string("");
			ok = !strcmp(jv_string_value(h), m->rep[a].name);
			if (!ok)
				snprintf(m->violation, sizeof(m->violation), "%s usable by %s at t=%lld but held by '%s'",
					 name, m->rep[a].name, (long long)m->t, jv_string_value(h));
			jv_free(h);
			if (!ok)
				return -1;
		}
	}
	return 0;
}

static int step(struct sim *m)
{
	int i;

	m->t += STEP_MS;
	for (i = 0; i < m->nrep; i++)
		if (m->rep[i].state == R_RUNNING && m->rep[i].next_round <= m->t)
			round_of(m, &m->rep[i]);
	return check(m);
}

static uint64_t usable(struct sim *m, struct replica *r)
{
	return shardset_usable(&r->s, mono(r, m->t));
}

static int rep_cmp(const void *a, const void *b)
{
	return strcmp((*(struct replica *const *)a)->name, (*(struct replica *const *)b)->name);
}

/* The running replicas sorted by identity, their count. */
static int running(struct sim *m, struct replica **out)
{
	int i, n = 0;

	for (i = 0; i < m->nrep; i++)
		if (m->rep[i].state == R_RUNNING)
			out[n++] = &m->rep[i];
	qsort(out, (size_t)n, sizeof(*out), rep_cmp);
	return n;
}

static int is_even(struct sim *m)
{
	struct replica *r[MAXREP];
	uint64_t all = 0;
	int i, n = running(m, r);

	if (!n)
		return 0;
	for (i = 0; i < n; i++) {
		uint64_t u = usable(m, r[i]);

		if ((unsigned)__builtin_popcountll(u) != m->ranges / n + ((unsigned)i < m->ranges % n))
			return 0;
		all |= u;
	}
	return (unsigned)__builtin_popcountll(all) == m->ranges;
}

static int is_taken(struct sim *m)
{
	struct replica *r[MAXREP];
	uint64_t all = 0;
	int i, n = running(m, r);

	for (i = 0; i < n; i++)
		all |= usable(m, r[i]);
	return (unsigned)__builtin_popcountll(all) == m->ranges;
}

static void show(struct sim *m)
{
	uint64_t all = 0;
	int i;

	printf("t=%lld", (long long)m->t);
	for (i = 0; i < m->nrep; i++) {
		uint64_t u = usable(m, &m->rep[i]);

		if (m->rep[i].state != R_RUNNING && !u)
			continue;
		printf(" %s=%u", m->rep[i].name, (unsigned)__builtin_popcountll(u));
		all |= u;
	}
	printf(" free=%u\n", m->ranges - (unsigned)__builtin_popcountll(all));
}

static void print_split(struct sim *m)
{
	struct replica *r[MAXREP];
	int i, n = running(m, r);

	for (i = 0; i < n; i++)
		printf("%s%s=%u", i ? " " : "", r[i]->name, (unsigned)__builtin_popcountll(usable(m, r[i])));
	putchar('\n');
}

static void leases(struct sim *m)
{
	size_t i;

	if (m->ne)
		qsort(m->e, m->ne, sizeof(*m->e), entry_cmp);
	for (i = 0; i < m->ne; i++) {
		jv h = spec_str(m->e[i].obj, "holderIdentity");

		printf("%s holder=%s duration=%g\n", m->e[i].name, jv_string_value(h),
		       spec_num(m->e[i].obj, "leaseDurationSeconds"));
		jv_free(h);
	}
}

static int start(struct sim *m, const char *name)
{
	struct replica *r;
	char err[KOP_ERRLEN];

	if (replica(m, name) || m->nrep == MAXREP) {
		fprintf(stderr, "cannot start '%s'\n", name);
		return -1;
	}
	r = &m->rep[m->nrep];
	memset(r, 0, sizeof(*r));
	if (shardset_init(&r->s, NS, PREFIX, name, m->ranges, m->duration_s, m->deadline_ms, err) < 0) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->sim = m;
	r->state = R_RUNNING;
	r->next_round = m->t;
	/* Monotonic clocks with unrelated origins, wall clocks minutes apart. */
	r->mono0 = 1000000LL * (m->nrep + 1) + 7919LL * m->nrep;
	r->skew_ms = (m->nrep % 2 ? 1 : -1) * 180000LL * m->nrep;
	m->nrep++;
	return 0;
}

static int cmd_shardset_sim(int argc, char **argv)
{
	struct sim m;
	char line[256];
	int rc = 0, i;

	(void)argv;
	if (argc != 1) {
		fprintf(stderr, "usage: test-tool shardset-sim < script\n");
		return 2;
	}
	memset(&m, 0, sizeof(m));
	m.ranges = 32;
	m.duration_s = 15;
	m.deadline_ms = 10000;
	m.retry_ms = 2000;
	m.rng = 1;
	while (!rc && fgets(line, sizeof(line), stdin)) {
		char a[32], b[32];
		long long x, y;
		struct replica *r;
		int64_t until, t0;

		line[strcspn(line, "\n")] = 0;
		if (!*line || *line == '#')
			continue;
		if (sscanf(line, "ranges %lld", &x) == 1)
			m.ranges = (unsigned)x;
		else if (sscanf(line, "duration %lld", &x) == 1)
			m.duration_s = (long)x;
		else if (sscanf(line, "deadline %lld", &x) == 1)
			m.deadline_ms = x;
		else if (sscanf(line, "retry %lld", &x) == 1)
			m.retry_ms = x;
		else if (sscanf(line, "winddown %lld", &x) == 1)
			m.winddown_ms = x;
		else if (sscanf(line, "expirywake %lld", &x) == 1)
			m.expirywake = (int)x;
		else if (sscanf(line, "latency %lld", &x) == 1)
			m.latency_ms = x;
		else if (sscanf(line, "timeout %lld", &x) == 1)
			m.timeout_ms = x;
		else if (sscanf(line, "seed %lld", &x) == 1)
			m.rng = (unsigned long long)x;
		else if (sscanf(line, "flaky %lld", &x) == 1)
			m.flaky_pct = (int)x;
		else if (sscanf(line, "start %31s", a) == 1)
			rc = start(&m, a) < 0 ? 2 : 0;
		else if (sscanf(line, "fail %31s %lld %lld", a, &x, &y) == 3 && (r = replica(&m, a))) {
			r->fail_code = (long)x;
			r->fail_n = (int)y;
		} else if (sscanf(line, "%31s %31s", b, a) == 2 && (r = replica(&m, a)) &&
			   (!strcmp(b, "stop") || !strcmp(b, "kill") || !strcmp(b, "cut") || !strcmp(b, "heal") ||
			    !strcmp(b, "restart"))) {
			if (!strcmp(b, "cut") || !strcmp(b, "heal")) {
				r->cut = !strcmp(b, "cut");
			} else if (!strcmp(b, "kill")) {
				r->state = R_KILLED;
			} else if (!strcmp(b, "restart")) {
				char err[KOP_ERRLEN];

				shardset_release_mem(&r->s);
				r->winding = 0;
				if (shardset_init(&r->s, NS, PREFIX, r->name, m.ranges, m.duration_s, m.deadline_ms, err) < 0) {
					fprintf(stderr, "%s\n", err);
					rc = 2;
				}
				r->state = R_RUNNING;
				r->next_round = m.t;
			} else if (r->state == R_RUNNING) {
				struct lease_io io = { replica_request, r, NULL, NULL };
				struct shardset_clock c = { clock_mono, clock_wall, r };
				char err[KOP_ERRLEN] = "";

				r->state = R_STOPPED;
				r->winding = 0;	/* (it stops all work first) */
				if (shardset_release(&r->s, &io, &c, err) < 0)
					fprintf(stderr, "t=%lld %s: release: %s\n", (long long)m.t, r->name, err);
			}
		} else if (sscanf(line, "put %31s %31s", a, b) == 2) {
			char now[40];
			jv o = JV_OBJECT(jv_string("apiVersion"), jv_string("coordination.k8s.io/v1"), jv_string("kind"),
					 jv_string("Lease"), jv_string("metadata"),
					 JV_OBJECT(jv_string("name"), jv_string(a), jv_string("namespace"), jv_string(NS)),
					 jv_string("spec"),
					 JV_OBJECT(jv_string("holderIdentity"), jv_string(b),
						   jv_string("leaseDurationSeconds"), jv_number(15), jv_string("renewTime"),
						   jv_string(kop_time_micro(now, sizeof(now), WALL0_US + m.t * 1000))));

			jv_free(store_write(&m, find(&m, a), a, o));
		} else if (sscanf(line, "steal %31s %lld", a, &x) == 2) {
			char name[64];
			struct entry *e;

			snprintf(name, sizeof(name), PREFIX "-shard-%02lld", x);
			if (!(e = find(&m, name))) {
				fprintf(stderr, "no lease %s\n", name);
				rc = 2;
			} else {
				jv_free(store_write(&m, e, name, jv_setpath(jv_copy(e->obj), JV_ARRAY(jv_string("spec"),
						    jv_string("holderIdentity")), jv_string(a))));
			}
		} else if (sscanf(line, "run %lld", &x) == 1) {
			for (until = m.t + x; !rc && m.t < until;)
				rc = step(&m) < 0;
		} else if (sscanf(line, "until %31s %lld", a, &x) == 2 && (!strcmp(a, "even") || !strcmp(a, "taken"))) {
			int even = !strcmp(a, "even");

			for (t0 = m.t, until = m.t + x; !rc && m.t < until && !(even ? is_even(&m) : is_taken(&m));)
				rc = step(&m) < 0;
			if (!rc && (even ? is_even(&m) : is_taken(&m))) {
				printf("%s after %lld ms: ", even ? "even" : "taken", (long long)(m.t - t0));
				print_split(&m);
			} else if (!rc) {
				printf("not %s after %lld ms: ", a, x);
				show(&m);
				rc = 1;
			}
		} else if (!strcmp(line, "show")) {
			show(&m);
		} else if (!strcmp(line, "max")) {
			unsigned most = 0;

			for (i = 0; i < m.nrep; i++) {
				unsigned c = (unsigned)__builtin_popcountll(usable(&m, &m.rep[i]));

				most = c > most ? c : most;
			}
			printf("max=%u\n", most);
		} else if (!strcmp(line, "requests")) {
			for (i = 0; i < m.nrep; i++) {
				printf("%s rounds=%ld requests=%ld\n", m.rep[i].name, m.rep[i].rounds, m.rep[i].requests);
				m.rep[i].rounds = m.rep[i].requests = 0;
			}
		} else if (!strcmp(line, "leases")) {
			leases(&m);
		} else {
			fprintf(stderr, "bad line: %s\n", line);
			rc = 2;
		}
	}
	if (*m.violation) {
		printf("violation: %s\n", m.violation);
		rc = 1;
	}
	for (i = 0; i < m.nrep; i++)
		shardset_release_mem(&m.rep[i].s);
	for (size_t j = 0; j < m.ne; j++) {
		free(m.e[j].name);
		jv_free(m.e[j].obj);
	}
	free(m.e);
	return rc;
}

static long kube_io_request(void *ctx, const char *method, const char *path, jv body, jv *out, char *err)
{
	struct kube_response r;
	long code;

	kube_request(ctx, method, path, jv_is_valid(body) ? "application/json" : NULL, body, &r);
	*out = jv_copy(r.body);
	if (!r.code)
		kop_error(err, "%s", r.message ? r.message : "no response");
	code = r.code;
	kube_response_release(&r);
	return code;
}

static int cmd_shardset_kube(int argc, char **argv)
{
	struct kube_config cfg;
	struct kube_client *kc;
	struct lease_io io;
	struct shardset *sets = NULL;
	char **ids = NULL, line[256], err[KOP_ERRLEN];
	unsigned ranges = 32;
	long duration_s = 15;
	long long deadline_ms = 10000;
	size_t n = 0, i;
	int a, rc = 0;

	for (a = 1; a + 1 < argc && !strncmp(argv[a], "--", 2); a += 2) {
		if (!strcmp(argv[a], "--ranges"))
			ranges = (unsigned)atoi(argv[a + 1]);
		else if (!strcmp(argv[a], "--duration"))
			duration_s = atol(argv[a + 1]);
		else if (!strcmp(argv[a], "--deadline"))
			deadline_ms = atoll(argv[a + 1]);
		else
			break;
	}
	if (a + 1 != argc) {
		fprintf(stderr, "usage: test-tool shardset-kube [--ranges R] [--duration S] [--deadline MS] NS < script\n");
		return 2;
	}
	if (kube_config_load(&cfg, NULL, NULL, err) < 0) {
		printf("error: %s\n", err);
		return 1;
	}
	kc = kube_client_new(&cfg, 5000, err);
	kube_config_release(&cfg);
	if (!kc) {
		printf("error: %s\n", err);
		return 1;
	}
	io.request = kube_io_request;
	io.ctx = kc;
	io.mono_ms = NULL;	/* (shardset gives lease.c its clock) */
	io.clock_ctx = NULL;
	while (!rc && fgets(line, sizeof(line), stdin)) {
		char id[64], what[32];
		long long ms;
		struct shardset *s = NULL;
		int r;

		line[strcspn(line, "\n")] = 0;
		err[0] = 0;
		if (!*line || *line == '#')
			continue;
		if (sscanf(line, "sleep %lld", &ms) == 1) {
			usleep((useconds_t)(ms * 1000));
			continue;
		}
		if (sscanf(line, "%63s %31s", id, what) != 2 || (strcmp(what, "round") && strcmp(what, "release"))) {
			fprintf(stderr, "bad line: %s\n", line);
			rc = 2;
			break;
		}
		for (i = 0; i < n; i++)
			if (!strcmp(ids[i], id))
				s = &sets[i];
		if (!s) {
			sets = kop_realloc(sets, (n + 1) * sizeof(*sets));
			ids = kop_realloc(ids, (n + 1) * sizeof(*ids));
			if (shardset_init(&sets[n], argv[a], "iot-operator", id, ranges, duration_s, deadline_ms, err) < 0) {
				printf("error: %s\n", err);
				rc = 1;
				break;
			}
			ids[n] = kop_strdup(id);
			s = &sets[n++];
		}
		if (!strcmp(what, "round")) {
			r = shardset_round(s, &io, &shardset_system_clock, err);
			if (r == 0 && s->pending)
				r = shardset_handover(s, &io, &shardset_system_clock, err);
		} else {
			r = shardset_release(s, &io, &shardset_system_clock, err);
		}
		printf("%s %s: %s%s live=%u rank=%d target=%u held=%u gained=", id, what, r ? "error: " : "OK", r ? err : "",
		       s->live, s->rank, s->target, (unsigned)__builtin_popcountll(s->held));
		print_ranges(stdout, s->gained, s->n);
		fputs(" lost=", stdout);
		print_ranges(stdout, s->lost, s->n);
		putchar('\n');
		fflush(stdout);
	}
	for (i = 0; i < n; i++) {
		shardset_release_mem(&sets[i]);
		free(ids[i]);
	}
	free(sets);
	free(ids);
	kube_client_free(kc);
	return rc;
}

static const struct test_cmd shardset_cmds[] = {
	{ "shardset-sim", cmd_shardset_sim },
	{ "shardset-kube", cmd_shardset_kube },
	{ NULL, NULL }
};
TEST_TOOL_REGISTER(shardset_cmds)
