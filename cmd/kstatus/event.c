/*
 * Events: an event line (or repeats of one) recorded as a core/v1 Event,
 * a repeat within 10 minutes raising the count of the Event already
 * written. Which event lines wait for a status is window.c's.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kstatus.h"
#include "banned.h"

#define EVENT_WINDOW_MS (10 * 60 * 1000)
#define EVENT_CACHE_MAX 4096

/* An Event written, by its event_key: what its repeats need. */
struct recorded {
	char *name;		/* the Event object's */
	int count;
	int64_t last;		/* wall ms of its last write */
};

static struct kop_hmap cache;

static void recorded_free(void *v)
{
	struct recorded *e = v;

	free(e->name);
	free(e);
}

static int64_t recorded_left(const void *v, int64_t now)
{
	return ((const struct recorded *)v)->last + EVENT_WINDOW_MS - now;
}

/*
 * The Events whose repeat window is over forgotten: returns the ms until the
 * next one's is (-1: none left), at most a minute (the wall clock may step).
 */
int64_t events_idle(int64_t now)
{
	static int64_t due = -1;	/* (an entry written again is due later: never sooner) */
	int64_t next = kop_hmap_expire(&cache, recorded_left, now, recorded_free, &due);

	return next > 60000 ? 60000 : next;
}

void events_release(void)
{
	kop_hmap_release(&cache, recorded_free);
}

/* Room for one more: the expired forgotten, or all when none is (only new Event objects for their repeats). */
static void cache_trim(int64_t now)
{
	if (cache.len < EVENT_CACHE_MAX)
		return;
	events_idle(now);
	if (cache.len >= EVENT_CACHE_MAX)
		kop_hmap_release(&cache, recorded_free);
}

static jv str_or_null(jv v, const char *key)
{
	char *s = kop_json_str(v, key, NULL);
	jv r = s ? jv_string(s) : jv_null();

	free(s);
	return r;
}

/* <involvedObject.name>.<unix nanoseconds in hex>, as client-go names events. */
static char *event_name(const char *obj_name)
{
	struct timespec ts;
	struct kop_buf b = KOP_BUF_INIT;

	clock_gettime(CLOCK_REALTIME, &ts);
	kop_buf_addf(&b, "%s.%llx", obj_name,
		     (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec);
	return kop_buf_detach(&b, NULL);
}

static jv event_ref(jv io, const char *ns)
{
	jv ref = jv_object(), x;

	if (jv_get_kind(x = kop_json_member(jv_copy(io), "apiVersion")) == JV_KIND_STRING)
		ref = jv_object_set(ref, jv_string("apiVersion"), x);
	else
		jv_free(x);
	if (jv_get_kind(x = kop_json_member(jv_copy(io), "kind")) == JV_KIND_STRING)
		ref = jv_object_set(ref, jv_string("kind"), x);
	else
		jv_free(x);
	if (ns)
		ref = jv_object_set(ref, jv_string("namespace"), jv_string(ns));
	if (jv_get_kind(x = kop_json_member(io, "name")) == JV_KIND_STRING)
		ref = jv_object_set(ref, jv_string("name"), x);
	else
		jv_free(x);
	return ref;
}

/* The line's "primary" when it is a string, else null. */
jv line_primary(jv line)
{
	jv p = kop_json_member(line, "primary");

	if (jv_get_kind(p) == JV_KIND_STRING)
		return p;
	jv_free(p);
	return jv_null();
}

/*
 * What makes two event lines repeats of one Event: (namespace, kind, name,
 * uid, type, reason, message) of the line (borrowed), or jv_invalid() when
 * it lacks involvedObject.name or reason.
 */
jv event_key(jv line)
{
	jv ev = kop_json_member(jv_copy(line), "event"), io = kop_json_member(jv_copy(ev), "involvedObject");
	char *name = kop_json_str(io, "name", NULL), *ns = kop_json_str(io, "namespace", NULL);
	char *type = kop_json_str(ev, "type", NULL), *reason = kop_json_str(ev, "reason", NULL);
	char *message = kop_json_str(ev, "message", NULL);
	jv key = jv_invalid();

	if (jv_get_kind(io) == JV_KIND_OBJECT && name && *name && reason && *reason)
		key = jv_dump_string(JV_ARRAY(jv_string(ns && *ns ? ns : default_ns), str_or_null(io, "kind"),
					      jv_string(name), str_or_null(io, "uid"),
					      jv_string(type && *type ? type : "Normal"), jv_string(reason),
					      jv_string(message ? message : "")),
				     0);
	free(name);
	free(ns);
	free(type);
	free(reason);
	free(message);
	jv_free(io);
	jv_free(ev);
	return key;
}

/* One result per line of a recorded group: the count each repeat brought the Event to. */
static void event_results(jv lines, jv ref, long code, jv body, int count0)
{
	int i, n = jv_array_length(jv_copy(lines));

	for (i = 0; i < n; i++) {
		jv r = kop_result_ok("event", line_primary(jv_array_get(jv_copy(lines), i)), jv_copy(ref), code,
				     jv_copy(body));

		emit(jv_object_set(r, jv_string("count"), jv_number(count0 + i + 1)));
	}
	jv_free(ref);
	jv_free(body);
}

static void event_fails(jv lines, jv ref, const struct kube_response *r, const char *who)
{
	int i, n = jv_array_length(jv_copy(lines));

	for (i = 0; i < n; i++)
		report_fail("event", line_primary(jv_array_get(jv_copy(lines), i)), jv_copy(ref), r, who);
	jv_free(ref);
}

/*
 * lines (consumed): one event line, or repeats of one (the same
 * event_key) that came within a coalescing window, recorded by one write
 * whose count grows by their number. A repeat of (object, type, reason,
 * message) seen within 10 minutes raises the count of the Event already
 * written (PATCH); anything else creates one. A repeat whose Event has gone
 * (expired by the server's TTL) creates a new one. One result per line.
 */
void do_event(jv lines)
{
	jv line = jv_array_get(jv_copy(lines), 0);
	jv ev = kop_json_member(jv_copy(line), "event"), io, key = jv_invalid();
	struct recorded *e;
	char *io_name = NULL, *io_ns = NULL, *type = NULL, *reason = NULL, *message = NULL, *ev_ns = NULL;
	char ts[40];
	struct kop_backoff b;
	struct kop_buf path = KOP_BUF_INIT;
	unsigned tries = 0;
	int n = jv_array_length(jv_copy(lines));
	int64_t now = kop_wall_ms();

	io = kop_json_member(jv_copy(ev), "involvedObject");
	io_name = kop_json_str(io, "name", NULL);
	io_ns = kop_json_str(io, "namespace", NULL);
	type = kop_json_str(ev, "type", NULL);
	reason = kop_json_str(ev, "reason", NULL);
	message = kop_json_str(ev, "message", NULL);
	if (jv_get_kind(io) != JV_KIND_OBJECT || !io_name || !*io_name || !reason || !*reason) {
		int i;

		for (i = 0; i < n; i++)
			report_local("event", line_primary(jv_array_get(jv_copy(lines), i)), event_ref(jv_copy(io), io_ns),
				     400, "BadRequest", "an event needs involvedObject.name and reason");
		goto out;
	}
	if (!type || !*type) {
		free(type);
		type = kop_strdup("Normal");
	}
	if (!message)
		message = kop_strdup("");
	ev_ns = kop_strdup(io_ns && *io_ns ? io_ns : default_ns);
	kop_time_rfc3339(ts, sizeof(ts), (time_t)(now / 1000));
	key = event_key(line);
	e = kop_hmap_get(&cache, jv_string_value(key));
	kop_backoff_init(&b, 100, 5000, 1.0);

	if (e && now - e->last < EVENT_WINDOW_MS) {
		int count0 = e->count;
		char *name = kop_strdup(e->name);
		jv patch = jv_object_set(jv_object(), jv_string("count"), jv_number(count0 + n));

		patch = jv_object_set(patch, jv_string("lastTimestamp"), jv_string(ts));
		kop_buf_addf(&path, "/api/v1/namespaces/%s/events/%s", ev_ns, name);
		for (;;) {
			struct kube_response r;

			if (write_request("PATCH", path.buf, "application/merge-patch+json", jv_copy(patch),
					 &r) == 0) {
				/* (the lock was let go meanwhile: the entry is looked up again, made again if gone) */
				if (!(e = kop_hmap_get(&cache, jv_string_value(key)))) {
					cache_trim(now);
					e = kop_calloc(1, sizeof(*e));
					e->name = name;
					name = NULL;
					kop_hmap_put(&cache, jv_string_value(key), e);
				}
				e->count = count0 + n;
				e->last = now;
				event_results(lines, event_ref(jv_copy(io), ev_ns), r.code, jv_copy(r.body), count0);
				kube_response_release(&r);
				jv_free(patch);
				free(name);
				goto out;
			}
			if (r.code != 404 && retry_after_failure(&r, &b, &tries, 0)) {
				kube_response_release(&r);
				continue;
			}
			if (r.code != 404) {
				event_fails(lines, event_ref(jv_copy(io), ev_ns), &r, io_name);
				kube_response_release(&r);
				jv_free(patch);
				free(name);
				goto out;
			}
			/* The Event expired: record the repeat as a new one. */
			kube_response_release(&r);
			break;
		}
		jv_free(patch);
		free(name);
	}

	kop_buf_reset(&path);
	kop_buf_addf(&path, "/api/v1/namespaces/%s/events", ev_ns);
	for (;;) {
		struct kube_response r;
		char *name = event_name(io_name);
		jv body = jv_object(), src;

		body = jv_object_set(body, jv_string("apiVersion"), jv_string("v1"));
		body = jv_object_set(body, jv_string("kind"), jv_string("Event"));
		body = jv_object_set(body, jv_string("metadata"),
				     jv_object_set(jv_object_set(jv_object(), jv_string("name"), jv_string(name)),
						   jv_string("namespace"), jv_string(ev_ns)));
		body = jv_object_set(body, jv_string("involvedObject"), jv_copy(io));
		body = jv_object_set(body, jv_string("reason"), jv_string(reason));
		body = jv_object_set(body, jv_string("message"), jv_string(message));
		body = jv_object_set(body, jv_string("type"), jv_string(type));
		src = jv_object_set(jv_object(), jv_string("component"), jv_string(opt.component));
		src = jv_object_set(src, jv_string("host"), jv_string(host));
		body = jv_object_set(body, jv_string("source"), src);
		body = jv_object_set(body, jv_string("firstTimestamp"), jv_string(ts));
		body = jv_object_set(body, jv_string("lastTimestamp"), jv_string(ts));
		body = jv_object_set(body, jv_string("count"), jv_number(n));
		body = jv_object_set(body, jv_string("reportingComponent"), jv_string(opt.component));
		body = jv_object_set(body, jv_string("reportingInstance"), jv_string(instance));
		if (write_request("POST", path.buf, "application/json", body, &r) == 0) {
			cache_trim(now);
			e = kop_calloc(1, sizeof(*e));
			e->name = name;
			e->count = n;
			e->last = now;
			if ((e = kop_hmap_put(&cache, jv_string_value(key), e)))
				recorded_free(e);
			event_results(lines, event_ref(jv_copy(io), ev_ns), r.code, jv_copy(r.body), 0);
			kube_response_release(&r);
			break;
		}
		free(name);
		/* AlreadyExists: two events in one nanosecond tick; a new name is tried. */
		if (retry_after_failure(&r, &b, &tries, 1)) {
			kube_response_release(&r);
			continue;
		}
		event_fails(lines, event_ref(jv_copy(io), ev_ns), &r, io_name);
		kube_response_release(&r);
		break;
	}
out:
	jv_free(key);
	jv_free(io);
	jv_free(ev);
	jv_free(line);
	jv_free(lines);
	free(io_name);
	free(io_ns);
	free(type);
	free(reason);
	free(message);
	free(ev_ns);
	kop_buf_release(&path);
}
