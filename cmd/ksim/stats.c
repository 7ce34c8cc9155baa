/*
 * Request counters, for benchmarks and chaos runs: every API request that
 * reaches ksim (answered, refused or faulted) is counted by user agent and
 * verb. The verb is the HTTP method, except that a GET with watch=true (or
 * 1) is WATCH.
 *
 *   GET /ksim/stats   {"requests":N,"writes":N,"byVerb":{"GET":N,...},
 *                      "byAgent":{"iot-operator/kapply":{"PATCH":N,...},...},
 *                      "bytesByAgent":{"iot-operator/kwatch":{"GET":N,"WATCH":N},...},
 *                      "bytesByAgentResource":{"iot-operator/kwatch":{"pods":N,
 *                                              "deployments.apps":N,"(discovery)":N,...},...}}
 *   POST /ksim/stats  {"reset":true} sets every counter to zero
 *
 * Writes are POST, PUT, PATCH and DELETE. bytesByAgent counts the response
 * bodies ksim sent (as sent: ksim never compresses), by the verb of the
 * request; a watch's bytes as its events go out, so a watch still open
 * keeps adding. bytesByAgentResource counts the same bytes by the resource
 * the request is on, as kubectl names it (plural.group, the plural alone
 * in the core group; a subresource's under its resource), and under
 * "(discovery)" those of requests on none: /api, /apis/..., /openapi/...,
 * /version, and the 404 of a path that names no served resource. Answers
 * that never reach the API (faults, 401, 403 of impersonation) are counted
 * as requests, not in bytes. Past STATS_AGENTS user agents, the last slot
 * ("other") takes the rest; past STATS_RESOURCES resources, so does the
 * last resource slot ("other").
 */
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <microhttpd.h>
#include "sim.h"
#include "banned.h"

/* user agents now name the replica ("iot-operator/kapply (op-0)"): room for a few replicas' */
#define STATS_AGENTS 64
#define STATS_AGENT_LEN 128

/* every resource an agent's bytes went to: the built-in ones (44 types), a few CRDs', discovery */
#define STATS_RESOURCES 128
#define STATS_RESOURCE_LEN 320	/* a plural of 63 characters, a dot, a group of 253 */
#define DISCOVERY "(discovery)"

static const char *const verbs[] = { "GET", "WATCH", "POST", "PUT", "PATCH", "DELETE", "OTHER" };
#define NVERBS (sizeof(verbs) / sizeof(verbs[0]))

static struct {
	pthread_mutex_t lock;
	int nagents;
	struct {
		char name[STATS_AGENT_LEN];
		unsigned long n[NVERBS];
		unsigned long long bytes[NVERBS];
		unsigned long long rbytes[STATS_RESOURCES];	/* by resource[] */
	} agent[STATS_AGENTS];
	int nresources;	/* the names of the resources bytes went to, for every agent */
	char resource[STATS_RESOURCES][STATS_RESOURCE_LEN];
} S = { PTHREAD_MUTEX_INITIALIZER, 0, { { { 0 }, { 0 }, { 0 }, { 0 } } }, 0, { { 0 } } };

static size_t verb_index(struct MHD_Connection *c, const char *method)
{
	size_t i;

	if (!strcmp(method, "GET")) {
		const char *w = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "watch");

		if (w && (!strcmp(w, "true") || !strcmp(w, "1")))
			return 1;
		return 0;
	}
	for (i = 2; i < NVERBS - 1; i++)
		if (!strcmp(method, verbs[i]))
			return i;
	return NVERBS - 1;
}

/*
 * The slot of name among the *count names (at most len - 1 bytes each,
 * stride bytes apart from names), made when new; past max, the last slot,
 * renamed "other", takes every name beyond. S.lock held.
 */
static int name_slot(char *names, size_t stride, size_t len, int *count, int max, const char *name)
{
	size_t n;
	int i;

	for (i = 0; i < *count; i++)
		if (!strncmp(names + (size_t)i * stride, name, len - 1))
			return i;
	if (*count == max) {
		i = max - 1;
		memcpy(names + (size_t)i * stride, "other", 6);
		return i;
	}
	n = strlen(name);
	if (n > len - 1)
		n = len - 1;
	memcpy(names + (size_t)i * stride, name, n);
	names[(size_t)i * stride + n] = 0;
	(*count)++;
	return i;
}

/* The slot of user agent ua ("-" when none), made when new; S.lock held. */
static int agent_slot(const char *ua)
{
	return name_slot(S.agent[0].name, sizeof(S.agent[0]), STATS_AGENT_LEN, &S.nagents, STATS_AGENTS,
			 ua && *ua ? ua : "-");
}

/* The slot of resource name r ("" or NULL: DISCOVERY), made when new; S.lock held. */
static int resource_slot(const char *r)
{
	return name_slot(S.resource[0], sizeof(S.resource[0]), STATS_RESOURCE_LEN, &S.nresources, STATS_RESOURCES,
			 r && *r ? r : DISCOVERY);
}

static const char *user_agent(struct MHD_Connection *c)
{
	return MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_USER_AGENT);
}

void ksim_stats_count(struct MHD_Connection *c, const char *method)
{
	const char *ua = user_agent(c);
	size_t v = verb_index(c, method);

	pthread_mutex_lock(&S.lock);
	S.agent[agent_slot(ua)].n[v]++;
	pthread_mutex_unlock(&S.lock);
}

static void add_bytes(const char *ua, size_t v, const char *resource, size_t n)
{
	int a;

	if (!n)
		return;
	pthread_mutex_lock(&S.lock);
	a = agent_slot(ua);
	S.agent[a].bytes[v] += n;
	S.agent[a].rbytes[resource_slot(resource)] += n;
	pthread_mutex_unlock(&S.lock);
}

void ksim_stats_sent(struct MHD_Connection *c, const char *method, const char *resource, size_t n)
{
	add_bytes(user_agent(c), verb_index(c, method), resource, n);
}

void ksim_stats_sent_watch(const char *ua, const char *resource, size_t n)
{
	add_bytes(ua, 1, resource, n);	/* WATCH */
}

static jv snapshot(void)
{
	jv by_verb = jv_object(), by_agent = jv_object(), bytes_by_agent = jv_object(), by_resource = jv_object();
	unsigned long total = 0, writes = 0, sum[NVERBS] = { 0 };
	size_t v;
	int i;

	pthread_mutex_lock(&S.lock);
	for (i = 0; i < S.nagents; i++) {
		jv a = jv_object(), b = jv_object(), r = jv_object();
		int requests = 0, sent = 0;
		int k;

		for (v = 0; v < NVERBS; v++) {
			if (S.agent[i].bytes[v]) {
				b = jv_object_set(b, jv_string(verbs[v]), jv_number((double)S.agent[i].bytes[v]));
				sent = 1;
			}
			if (!S.agent[i].n[v])
				continue;
			a = jv_object_set(a, jv_string(verbs[v]), jv_number((double)S.agent[i].n[v]));
			sum[v] += S.agent[i].n[v];
			requests = 1;
		}
		/* an agent only a watch opened before a reset is known by: bytes, no requests */
		if (requests)
			by_agent = jv_object_set(by_agent, jv_string(S.agent[i].name), a);
		else
			jv_free(a);
		for (k = 0; k < S.nresources; k++)
			if (S.agent[i].rbytes[k])
				r = jv_object_set(r, jv_string(S.resource[k]), jv_number((double)S.agent[i].rbytes[k]));
		if (sent) {
			bytes_by_agent = jv_object_set(bytes_by_agent, jv_string(S.agent[i].name), b);
			by_resource = jv_object_set(by_resource, jv_string(S.agent[i].name), r);
		} else {
			jv_free(b);
			jv_free(r);
		}
	}
	pthread_mutex_unlock(&S.lock);
	for (v = 0; v < NVERBS; v++) {
		by_verb = jv_object_set(by_verb, jv_string(verbs[v]), jv_number((double)sum[v]));
		total += sum[v];
		if (v >= 2 && v <= 5)
			writes += sum[v];
	}
	return JV_OBJECT(jv_string("requests"), jv_number((double)total), jv_string("writes"),
			 jv_number((double)writes), jv_string("byVerb"), by_verb, jv_string("byAgent"), by_agent,
			 jv_string("bytesByAgent"), bytes_by_agent, jv_string("bytesByAgentResource"), by_resource);
}

static int answer(struct MHD_Connection *c, unsigned code, const char *ctype, jv body)
{
	jv s = jv_dump_string(body, 0);
	struct kop_buf b = KOP_BUF_INIT;
	struct MHD_Response *r;
	int ret;

	kop_buf_addf(&b, "%s\n", jv_string_value(s));
	jv_free(s);
	r = MHD_create_response_from_buffer(b.len, b.buf, MHD_RESPMEM_MUST_COPY);
	kop_buf_release(&b);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	MHD_add_response_header(r, "Cache-Control", "no-cache, private");
	ret = MHD_queue_response(c, code, r) == MHD_YES;
	MHD_destroy_response(r);
	return ret;
}

int ksim_stats_admin(struct MHD_Connection *c, const char *method, const char *url, const char *body, size_t len,
		     int *ret)
{
	if (strcmp(url, "/ksim/stats"))
		return 0;
	if (!strcmp(method, "POST")) {
		jv req = len ? jv_parse_sized(body, (int)len) : jv_object();

		if (jv_get_kind(req) != JV_KIND_OBJECT) {
			jv_free(req);
			*ret = answer(c, 400, "application/json",
				      JV_OBJECT(jv_string("error"), jv_string("the body must be a JSON object")));
			return 1;
		}
		jv r = jv_object_get(req, jv_string("reset"));

		if (jv_get_kind(r) == JV_KIND_TRUE) {
			pthread_mutex_lock(&S.lock);
			memset(S.agent, 0, sizeof(S.agent));
			S.nagents = 0;
			memset(S.resource, 0, sizeof(S.resource));
			S.nresources = 0;
			pthread_mutex_unlock(&S.lock);
		}
		jv_free(r);
	} else if (strcmp(method, "GET")) {
		*ret = answer(c, 405, "application/json", JV_OBJECT(jv_string("error"), jv_string("method not allowed")));
		return 1;
	}
	*ret = answer(c, 200, "application/json", snapshot());
	return 1;
}
