/*
 * Faults on demand: the ones real clusters have, so that clients' retries
 * are tested rather than hoped for. Set by flags at start or at any time by
 * POST /ksim/faults (loopback, no authentication) with a JSON object:
 *
 *   {"rate": 0.5, "code": 429, "count": 3, "path": "/apis/apps",
 *    "latency": "200ms", "cutWatchesEvery": "5s", "stallWatches": "10s",
 *    "cutWatches": true, "errorWatches": true, "compact": true, "reset": true}
 *
 * rate/code/count/path: a share of API requests (those whose path starts
 * with `path`) is answered with 429 (plain text and Retry-After: 1, as the
 * max-in-flight filter does), 500 (Status InternalError) or 503 (Status
 * ServiceUnavailable, Retry-After: 1); `count` caps how many (then the rate
 * drops to 0). latency delays every API request. stallWatches keeps every
 * watch connection open without a byte for the duration (true = until
 * false). cutWatchesEvery cuts every watch periodically ("0" stops).
 * GET /ksim/faults answers the settings and counters.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <microhttpd.h>
#include "sim.h"
#include "banned.h"

static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	double rate;
	int code;
	long count;		/* injected errors left, -1 = no cap */
	char *path;
	long latency_ms;
	long cut_every_ms;
	int stall;
	int64_t stall_until;	/* 0 = until cleared */
	long injected, cuts, stalled;
	int stopping;
} F = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 429, -1, NULL, 0, 0, 0, 0, 0, 0, 0, 0 };

static pthread_t cutter;
static int cutter_running;

static void cut_watches(void)
{
	ksim_lock();
	ksim.cut_epoch++;
	pthread_cond_broadcast(&ksim.changed);
	ksim_watch_wake_all();
	ksim_unlock();
}

static void *cut_loop(void *arg)
{
	int64_t next = 0;

	(void)arg;
	pthread_mutex_lock(&F.lock);
	while (!F.stopping) {
		struct timespec ts;
		int64_t now = kop_mono_ms();

		if (F.cut_every_ms > 0) {
			if (!next || next > now + F.cut_every_ms)
				next = now + F.cut_every_ms;
			if (now >= next) {
				F.cuts++;
				pthread_mutex_unlock(&F.lock);
				cut_watches();
				log_info("faults: cut every watch");
				pthread_mutex_lock(&F.lock);
				next = now + F.cut_every_ms;
				continue;
			}
		} else {
			next = 0;
		}
		ts = kop_clock_after(CLOCK_REALTIME, 100);
		pthread_cond_timedwait(&F.wake, &F.lock, &ts);
	}
	pthread_mutex_unlock(&F.lock);
	return NULL;
}

static int parse_rate(const char *s, double *out)
{
	char *end;
	double r = strtod(s, &end);

	if (end == s || *end || r < 0 || r > 1)
		return -1;
	*out = r;
	return 0;
}

int faults_option(int c, const char *arg)
{
	long ms;

	switch (c) {
	case OPT_FAULT_CUT_EVERY:
		if ((ms = tool_parse_duration_ms(arg)) < 0)
			die_usage("invalid duration '%s'", arg);
		F.cut_every_ms = ms;
		return 1;
	case OPT_FAULT_RATE:
		if (parse_rate(arg, &F.rate) < 0)
			die_usage("invalid rate '%s' (0 to 1)", arg);
		return 1;
	case OPT_FAULT_CODE:
		F.code = atoi(arg);
		if (F.code != 429 && F.code != 500 && F.code != 503)
			die_usage("invalid fault code '%s' (429, 500 or 503)", arg);
		return 1;
	case OPT_FAULT_LATENCY:
		if ((ms = tool_parse_duration_ms(arg)) < 0)
			die_usage("invalid duration '%s'", arg);
		F.latency_ms = ms;
		return 1;
	case OPT_FAULT_PATH:
		free(F.path);
		F.path = kop_strdup(arg);
		return 1;
	}
	return 0;
}

/* A duration given as a string ("5s") or a number of seconds; -1 when neither. */
static long duration_of(jv v)
{
	long ms = -1;

	if (jv_get_kind(v) == JV_KIND_STRING)
		ms = tool_parse_duration_ms(jv_string_value(v));
	else if (jv_get_kind(v) == JV_KIND_NUMBER && jv_number_value(v) >= 0)
		ms = (long)(jv_number_value(v) * 1000);
	jv_free(v);
	return ms;
}

static jv settings(void)
{
	int64_t now = kop_mono_ms();
	jv stall = F.stall ? (F.stall_until ? jv_number((double)(F.stall_until - now) / 1000.0) : jv_true()) :
			     jv_false();

	jv s = JV_OBJECT(jv_string("rate"), jv_number(F.rate), jv_string("code"), jv_number(F.code),
			 jv_string("count"), jv_number((double)F.count), jv_string("path"),
			 F.path ? jv_string(F.path) : jv_null(), jv_string("latencyMs"), jv_number((double)F.latency_ms));

	s = jv_object_set(s, jv_string("cutWatchesEveryMs"), jv_number((double)F.cut_every_ms));
	s = jv_object_set(s, jv_string("stallWatches"), stall);
	s = jv_object_set(s, jv_string("injected"), jv_number((double)F.injected));
	s = jv_object_set(s, jv_string("cuts"), jv_number((double)F.cuts));
	return jv_object_set(s, jv_string("stalledWatches"), jv_number((double)F.stalled));
}

/* Applies a settings object; NULL or an error message (static, or this thread's). Takes F.lock. */
static const char *apply(jv in)
{
	static __thread char unknown[224];
	const char *err = NULL;
	jv v;
	int cut = 0, error = 0, compact = 0;

	if (jv_get_kind(in) != JV_KIND_OBJECT) {
		jv_free(in);
		return "the body must be a JSON object";
	}
	pthread_mutex_lock(&F.lock);
	v = jv_object_get(jv_copy(in), jv_string("reset"));
	if (jv_get_kind(v) == JV_KIND_TRUE) {
		F.rate = 0;
		F.code = 429;
		F.count = -1;
		free(F.path);
		F.path = NULL;
		F.latency_ms = 0;
		F.cut_every_ms = 0;
		F.stall = 0;
	}
	jv_free(v);
	jv_object_foreach(in, k, val) {
		const char *key = jv_string_value(k);
		long ms;

		if (!strcmp(key, "reset")) {
		} else if (!strcmp(key, "rate")) {
			if (jv_get_kind(val) != JV_KIND_NUMBER || jv_number_value(val) < 0 || jv_number_value(val) > 1)
				err = "rate: a number from 0 to 1";
			else
				F.rate = jv_number_value(val);
		} else if (!strcmp(key, "code")) {
			int c = jv_get_kind(val) == JV_KIND_NUMBER ? (int)jv_number_value(val) : 0;

			if (c != 429 && c != 500 && c != 503)
				err = "code: 429, 500 or 503";
			else
				F.code = c;
		} else if (!strcmp(key, "count")) {
			if (jv_get_kind(val) != JV_KIND_NUMBER)
				err = "count: a number (-1 = no cap)";
			else
				F.count = (long)jv_number_value(val);
		} else if (!strcmp(key, "path")) {
			free(F.path);
			F.path = jv_get_kind(val) == JV_KIND_STRING && *jv_string_value(val) ?
					 kop_strdup(jv_string_value(val)) :
					 NULL;
		} else if (!strcmp(key, "latency")) {
			if ((ms = duration_of(jv_copy(val))) < 0)
				err = "latency: a duration";
			else
				F.latency_ms = ms;
		} else if (!strcmp(key, "cutWatchesEvery")) {
			if ((ms = duration_of(jv_copy(val))) < 0)
				err = "cutWatchesEvery: a duration";
			else
				F.cut_every_ms = ms;
		} else if (!strcmp(key, "stallWatches")) {
			if (jv_get_kind(val) == JV_KIND_TRUE || jv_get_kind(val) == JV_KIND_FALSE) {
				F.stall = jv_get_kind(val) == JV_KIND_TRUE;
				F.stall_until = 0;
			} else if ((ms = duration_of(jv_copy(val))) < 0) {
				err = "stallWatches: true, false or a duration";
			} else {
				F.stall = ms > 0;
				F.stall_until = kop_mono_ms() + ms;
			}
		} else if (!strcmp(key, "cutWatches")) {
			cut = jv_get_kind(val) == JV_KIND_TRUE;
		} else if (!strcmp(key, "errorWatches")) {
			error = jv_get_kind(val) == JV_KIND_TRUE;
		} else if (!strcmp(key, "compact")) {
			compact = jv_get_kind(val) == JV_KIND_TRUE;
		} else {
			snprintf(unknown, sizeof(unknown), "unknown setting '%.64s' (known: reset, rate, code, count, "
				 "path, latency, cutWatchesEvery, stallWatches, cutWatches, errorWatches, compact)", key);
			err = unknown;
		}
		jv_free(k);
		jv_free(val);
	}
	jv_free(in);
	pthread_cond_broadcast(&F.wake);
	pthread_mutex_unlock(&F.lock);
	if (cut || error || compact) {
		ksim_lock();
		if (cut)
			ksim.cut_epoch++;
		if (error)
			ksim.error_epoch++;
		if (compact)
			ksim.compacted = ksim.rv;
		pthread_cond_broadcast(&ksim.changed);
		ksim_watch_wake_all();
		ksim_unlock();
	}
	return err;
}

static int answer(struct MHD_Connection *c, int code, const char *ctype, const char *body, const char *retry_after)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
	char uid[40];
	int ret;

	ksim_uuid(uid);
	MHD_add_response_header(r, "Audit-Id", uid);
	MHD_add_response_header(r, "Cache-Control", "no-cache, private");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	if (retry_after)
		MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, retry_after);
	ret = MHD_queue_response(c, (unsigned)code, r) == MHD_YES;
	MHD_destroy_response(r);
	return ret;
}

int ksim_faults_admin(struct MHD_Connection *c, const char *method, const char *url, const char *body, size_t len,
		      int *ret)
{
	jv s;

	if (strcmp(url, "/ksim/faults"))
		return 0;
	if (!strcmp(method, "POST")) {
		const char *err = apply(len ? jv_parse_sized(body, (int)len) : jv_object());

		if (err) {
			struct kop_buf b = KOP_BUF_INIT;

			kop_buf_addf(&b, "invalid fault settings: %s\n", err);
			*ret = answer(c, 400, "text/plain; charset=utf-8", b.buf, NULL);
			kop_buf_release(&b);
			return 1;
		}
		log_info("admin: %s %.*s", url, (int)(len > 500 ? 500 : len), len ? body : "");
	} else if (strcmp(method, "GET")) {
		*ret = answer(c, 405, "text/plain; charset=utf-8", "method not allowed\n", NULL);
		return 1;
	}
	pthread_mutex_lock(&F.lock);
	s = jv_dump_string(settings(), 0);
	pthread_mutex_unlock(&F.lock);
	*ret = answer(c, 200, "application/json", jv_string_value(s), NULL);
	jv_free(s);
	return 1;
}

int ksim_faults_request(struct MHD_Connection *c, const char *method, const char *url, int *ret)
{
	long latency;
	int code = 0;

	(void)method;
	pthread_mutex_lock(&F.lock);
	latency = F.latency_ms;
	if (F.rate > 0 && F.count != 0 && (!F.path || !strncmp(url, F.path, strlen(F.path))) &&
	    (F.rate >= 1 || (double)random() / ((double)RAND_MAX + 1.0) < F.rate)) {
		code = F.code;
		F.injected++;
		if (F.count > 0 && --F.count == 0)
			F.rate = 0;
	}
	pthread_mutex_unlock(&F.lock);
	if (latency > 0) {
		struct timespec ts = { latency / 1000, (latency % 1000) * 1000000L };

		nanosleep(&ts, NULL);
	}
	if (!code)
		return 0;
	if (code == 429) {
		*ret = answer(c, 429, "text/plain; charset=utf-8", "Too many requests, please try again later.\n", "1");
	} else {
		jv st = code == 500 ? ksim_status(500, "InternalError",
						  "Internal error occurred: injected by ksim (fault injection)",
						  JV_OBJECT(jv_string("causes"),
							    JV_ARRAY(JV_OBJECT(jv_string("message"),
									       jv_string("injected by ksim (fault injection)")))))
				    : ksim_status(503, "ServiceUnavailable",
						  "the server is currently unable to handle the request (injected by ksim)",
						  JV_OBJECT(jv_string("retryAfterSeconds"), jv_number(1)));
		jv s = jv_dump_string(st, 0);

		*ret = answer(c, code, "application/json", jv_string_value(s), code == 503 ? "1" : NULL);
		jv_free(s);
	}
	return 1;
}

void ksim_faults_watch_wait(void)
{
	int counted = 0;

	pthread_mutex_lock(&F.lock);
	while (F.stall && !F.stopping && !ksim_stopping()) {
		struct timespec ts;

		if (F.stall_until && kop_mono_ms() >= F.stall_until) {
			F.stall = 0;
			break;
		}
		if (!counted) {
			F.stalled++;
			counted = 1;
		}
		ts = kop_clock_after(CLOCK_REALTIME, 100);
		pthread_cond_timedwait(&F.wake, &F.lock, &ts);
	}
	pthread_mutex_unlock(&F.lock);
}

void faults_start(void)
{
	if (pthread_create(&cutter, NULL, cut_loop, NULL) == 0)
		cutter_running = 1;
	else
		log_error("unable to start the fault injection thread");
}

void faults_stop(void)
{
	pthread_mutex_lock(&F.lock);
	F.stopping = 1;
	pthread_cond_broadcast(&F.wake);
	pthread_mutex_unlock(&F.lock);
	if (cutter_running)
		pthread_join(cutter, NULL);
	cutter_running = 0;
	free(F.path);
	F.path = NULL;
}
