/*
 * What a reconcile writes about its primary: finalizers, the status (and
 * which status the program saw while ours is on its way) and Events.
 * Children's writes are children.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ireconcile.h"
#include "banned.h"

int has_finalizer(jv obj, const char *f, int *index)
{
	jv list = jv_getpath(jv_copy(obj), path2("metadata", "finalizers"));
	int found = 0;

	if (jv_get_kind(list) == JV_KIND_ARRAY) {
		jv_array_foreach(list, i, e) {
			if (!found && jv_get_kind(e) == JV_KIND_STRING && !strcmp(jv_string_value(e), f)) {
				found = 1;
				if (index)
					*index = i;
			}
			jv_free(e);
		}
	}
	jv_free(list);
	return found;
}

/* {"apiVersion","kind","metadata":{"name","namespace"[,"uid"]}} of obj. */
static jv ref_object(jv obj, int with_uid)
{
	jv m = jv_object(), r = jv_object();
	const char *ns = meta(obj, "namespace"), *uid = meta(obj, "uid");

	m = jv_object_set(m, kop_json_key("name"), jv_string(meta(obj, "name")));
	if (ns && *ns)
		m = jv_object_set(m, kop_json_key("namespace"), jv_string(ns));
	if (with_uid && uid)
		m = jv_object_set(m, kop_json_key("uid"), jv_string(uid));
	r = jv_object_set(r, kop_json_key("apiVersion"), jv_string(kop_json_cstr(obj, "apiVersion")));
	r = jv_object_set(r, kop_json_key("kind"), jv_string(kop_json_cstr(obj, "kind")));
	return jv_object_set(r, kop_json_key("metadata"), m);
}

/* The same for a stored object, named as the program names its kind. */
jv ref_of(const struct obj *o)
{
	jv m = jv_object_set(jv_object(), kop_json_key("name"), jv_string(obj_name(o)));
	jv r = jv_object();

	if (*obj_ns(o))
		m = jv_object_set(m, kop_json_key("namespace"), jv_string(obj_ns(o)));
	m = jv_object_set(m, kop_json_key("uid"), jv_string(obj_uid(o)));
	r = jv_object_set(r, kop_json_key("apiVersion"), jv_string(o->kind->api_version));
	r = jv_object_set(r, kop_json_key("kind"), jv_string(o->kind->kind));
	return jv_object_set(r, kop_json_key("metadata"), m);
}

jv op_line(const char *op, const char *pkey)
{
	return jv_object_set(jv_object_set(jv_object(), kop_json_key("op"), jv_string(op)), kop_json_key("primary"),
			     jv_string(pkey));
}

static void finalizer_patch(struct prim *p, jv obj, jv patch, int64_t now, struct counts *n)
{
	const char *pkey = p->key;
	char *fkey = join2("patch", p->obj->key);

	if (flight_check(p, fkey, patch, obj_rv(p->obj), now)) {
		jv line = op_line("patch", pkey);

		line = jv_object_set(line, kop_json_key("object"), ref_object(obj, 0));
		line = jv_object_set(line, kop_json_key("patchType"), jv_string("json"));
		line = jv_object_set(line, kop_json_key("patch"), patch);
		emit(line);
		n->patches++;
	} else {
		jv_free(patch);
	}
	free(fkey);
}

static jv test_op(const char *path, jv value)
{
	jv o = jv_object_set(jv_object(), kop_json_key("op"), jv_string("test"));

	o = jv_object_set(o, kop_json_key("path"), jv_string(path));
	return jv_object_set(o, kop_json_key("value"), value);
}

static jv patch_op(const char *op, const char *path, jv value)
{
	jv o = jv_object_set(jv_object(), kop_json_key("op"), jv_string(op));

	o = jv_object_set(o, kop_json_key("path"), jv_string(path));
	if (jv_is_valid(value))
		o = jv_object_set(o, kop_json_key("value"), value);
	return o;
}

void add_finalizer(struct prim *p, jv parent, int64_t now, struct counts *n)
{
	jv list = jv_getpath(jv_copy(parent), path2("metadata", "finalizers"));
	jv patch = jv_array();

	if (jv_get_kind(list) == JV_KIND_ARRAY) {
		/* Others' finalizers stay: the test fails if the list changed meanwhile. */
		patch = jv_array_append(patch, test_op("/metadata/finalizers", list));
		patch = jv_array_append(patch, patch_op("add", "/metadata/finalizers/-", jv_string(E.prog.finalizer)));
	} else {
		jv_free(list);
		patch = jv_array_append(patch, test_op("/metadata/resourceVersion", jv_string(obj_rv(p->obj))));
		patch = jv_array_append(patch, patch_op("add", "/metadata/finalizers",
							jv_array_append(jv_array(), jv_string(E.prog.finalizer))));
	}
	finalizer_patch(p, parent, patch, now, n);
}

void remove_finalizer(struct prim *p, jv parent, int index, int64_t now, struct counts *n)
{
	char path[64];
	jv patch = jv_array();

	snprintf(path, sizeof(path), "/metadata/finalizers/%d", index);
	patch = jv_array_append(patch, test_op(path, jv_string(E.prog.finalizer)));
	patch = jv_array_append(patch, patch_op("remove", path, jv_invalid()));
	finalizer_patch(p, parent, patch, now, n);
}

/* The flight of p's last status (p->status_sent) while it is on its way:
 * sent, not failed, not timed out, not yet seen back (parent_seen); else NULL. */
struct flight *status_flight(struct prim *p, int64_t now)
{
	char *fkey = join2("status", p->key);
	struct flight *f = kop_hmap_get(&E.flights, fkey);

	free(fkey);
	if (!p->status_sent || !f || !flight_alive(f, now))
		return NULL;
	return f;
}

/* Whether status (borrowed) is p's last status sent. */
static int status_is_sent(struct prim *p, jv status)
{
	char *text = kop_json_dump(jv_copy(status));
	int same = p->status_sent && !strcmp(text, p->status_sent);

	free(text);
	return same;
}

/*
 * v without what a stored object would not tell from absent: members that
 * are null, an empty list or an empty object, at every depth of objects
 * (consumed). A status of {"nodes": []} is what a server stores as no status.
 */
static jv sparse(jv v)
{
	jv out;

	if (jv_get_kind(v) != JV_KIND_OBJECT)
		return v;
	out = jv_object();
	jv_object_foreach(v, k, x) {
		x = sparse(x);
		if (jv_get_kind(x) == JV_KIND_NULL ||
		    (jv_get_kind(x) == JV_KIND_ARRAY && jv_array_length(jv_copy(x)) == 0) ||
		    (jv_get_kind(x) == JV_KIND_OBJECT && jv_object_length(jv_copy(x)) == 0)) {
			jv_free(k);
			jv_free(x);
		} else {
			out = jv_object_set(out, k, x);
		}
	}
	jv_free(v);
	return out;
}

/* Whether a status and the stored one (null when none; both borrowed) say the same. */
static int status_same(jv status, jv live)
{
	if (jv_equal(jv_copy(status), jv_copy(live)))
		return 1;
	if (jv_get_kind(live) == JV_KIND_NULL)
		live = jv_object();
	else
		live = jv_copy(live);
	return jv_equal(sparse(jv_copy(status)), sparse(live));
}

/*
 * What of a status says where the primary stands: phase, reason,
 * observedGeneration and each condition's type, status, reason and
 * observedGeneration (borrowed). Messages and other members (a list of
 * pods) only describe it, and no status at all says as little as one with
 * none of these: both give {}.
 */
static jv status_gist(jv status)
{
	static const char *const top[] = { "phase", "reason", "observedGeneration" };
	static const char *const cond[] = { "type", "status", "reason", "observedGeneration" };
	jv g, conds;
	size_t i;

	g = jv_object();
	if (jv_get_kind(status) != JV_KIND_OBJECT)
		return g;
	for (i = 0; i < sizeof(top) / sizeof(top[0]); i++) {
		jv v = jv_object_get(jv_copy(status), kop_json_key(top[i]));

		if (jv_is_valid(v) && jv_get_kind(v) != JV_KIND_NULL)
			g = jv_object_set(g, kop_json_key(top[i]), v);
		else
			jv_free(v);
	}
	conds = jv_object_get(jv_copy(status), kop_json_key("conditions"));
	if (jv_get_kind(conds) == JV_KIND_ARRAY && jv_array_length(jv_copy(conds)) > 0) {	/* ([] as absent) */
		jv out = jv_array();

		jv_array_foreach(conds, j, c) {
			jv oc = jv_object();

			for (i = 0; jv_get_kind(c) == JV_KIND_OBJECT && i < sizeof(cond) / sizeof(cond[0]); i++) {
				jv v = jv_object_get(jv_copy(c), kop_json_key(cond[i]));

				if (jv_is_valid(v) && jv_get_kind(v) != JV_KIND_NULL)
					oc = jv_object_set(oc, kop_json_key(cond[i]), v);
				else
					jv_free(v);
			}
			out = jv_array_append(out, oc);
			jv_free(c);
			(void)j;
		}
		g = jv_object_set(g, kop_json_key("conditions"), out);
	}
	jv_free(conds);
	return g;
}

/*
 * Whether a status that differs from the one the program saw (seen: the
 * stored one, live, or ours on its way; borrowed) may wait: it changes
 * nothing of where the primary stands, and either the observed objects it is made of
 * are still changing (a burst not yet settled: view.c's settle, whose
 * reconcile writes it) or one of ours was written less than
 * --status-interval ago (then p is reconciled again when the interval is
 * over, and the latest is written). A status that says nothing of where
 * the primary stands (a list of pods alone) waits for no interval: every
 * change of it is all it says. Once the input has ended, none waits.
 */
static int status_may_wait(struct prim *p, jv status, jv live, enum seen seen, int64_t now)
{
	int settling = p->settle_due > now, same, bare;
	jv saw, gist;

	if (E.input_ended)
		return 0;	/* (no reconcile will follow) */
	if (!settling && (E.status_interval_ms <= 0 || !p->status_at || now - p->status_at >= E.status_interval_ms))
		return 0;
	if (seen == SEEN_CARRIED && p->status_sent)
		saw = kop_json_read(p->status_sent, strlen(p->status_sent));
	else
		saw = jv_copy(live);
	gist = status_gist(status);
	bare = jv_object_length(jv_copy(gist)) == 0;
	same = jv_equal(gist, status_gist(saw));
	jv_free(saw);
	if (settling)
		return same;	/* (the burst's end reconciles) */
	if (bare)
		return 0;	/* (nothing in it to tell news from description) */
	if (same)
		schedule(p, p->status_at + E.status_interval_ms);
	p->status_held = same;
	return same;
}

/*
 * Writes the status when it differs from the stored one; 0 when it is not
 * written because the same is on its way, or because it says nothing new
 * and may wait (status_may_wait; never with events, which go with it). seen: what the program saw.
 * When the program saw the stored status (no write of ours on its way), the
 * line carries it and the resourceVersion it was read at, so that kstatus
 * can write without reading the object first.
 */
int write_status(struct prim *p, jv parent, jv status, enum seen seen, int events, int64_t now, struct counts *n)
{
	jv live = jv_object_get(jv_copy(parent), kop_json_key("status"));
	char *fkey = join2("status", p->key);
	int sent = 1;

	if (jv_get_kind(live) == JV_KIND_INVALID)
		live = jv_null();
	p->status_held = 0;
	if (status_same(status, live)) {
		flight_forget(fkey);
	} else if (seen == SEEN_CARRIED && status_is_sent(p, status)) {
		sent = 0;	/* on its way (an older one of ours landed first) */
	} else if (seen != SEEN_FOREIGN && !events && status_may_wait(p, status, live, seen, now)) {
		sent = 0;
	} else if (flight_check(p, fkey, status, obj_rv(p->obj), now)) {
		jv obj = ref_object(parent, 1), line;

		obj = jv_object_set(obj, kop_json_key("status"), jv_copy(status));
		line = jv_object_set(op_line("status", p->key), kop_json_key("object"), obj);
		if (seen == SEEN_STORED && *obj_rv(p->obj)) {
			line = jv_object_set(line, kop_json_key("stored"), jv_copy(live));
			line = jv_object_set(line, kop_json_key("resourceVersion"), jv_string(obj_rv(p->obj)));
		}
		emit(line);
		n->statuses++;
		p->status_at = now;
		obj = jv_object_set(jv_copy(parent), kop_json_key("status"), jv_copy(status));
		update_aggs(p, obj);	/* counted from now on (update_aggs_seen) */
		jv_free(obj);
		if (seen == SEEN_CARRIED) {
			status_prev_push(p, p->status_sent);	/* an earlier one of ours, still on its way */
		} else if (seen == SEEN_FOREIGN) {
			/* Over someone else's status, stored meanwhile: ours sent before may still land after it. */
			if (p->nprev) {
				free(p->status_prev[0]);
				p->status_prev[0] = kop_json_dump(jv_copy(live));
			} else {	/* (none kept: the flight had failed or timed out meanwhile) */
				status_prev_push(p, kop_json_dump(jv_copy(live)));
			}
			status_prev_push(p, p->status_sent);
		} else {
			free(p->status_sent);
			status_prev_drop(p, p->nprev);
			status_prev_push(p, kop_json_dump(jv_copy(live)));	/* stored now */
		}
		p->status_sent = kop_json_dump(jv_copy(status));
	} else {
		sent = 0;
	}
	jv_free(status);
	jv_free(live);
	free(fkey);
	return sent;
}

void write_events(struct prim *p, jv parent, jv events, struct counts *n)
{
	jv_array_foreach(events, i, ev) {
		jv involved;

		if (jv_get_kind(ev) != JV_KIND_OBJECT || !kop_json_cstr(ev, "reason")) {
			tool_logj(LOG_ERROR, jv_object_set(jv_object(), kop_json_key("primary"), jv_string(p->key)),
				  "primary '%s': event %d has no reason; skipped", p->key, i);
			jv_free(ev);
			continue;
		}
		if (!jv_object_has(jv_copy(ev), kop_json_key("type")))
			ev = jv_object_set(ev, kop_json_key("type"), jv_string("Normal"));
		if (!jv_object_has(jv_copy(ev), kop_json_key("involvedObject"))) {
			jv r = ref_object(parent, 1), m = jv_object_get(jv_copy(r), kop_json_key("metadata"));

			involved = jv_object_set(jv_object(), kop_json_key("apiVersion"),
						 jv_object_get(jv_copy(r), kop_json_key("apiVersion")));
			involved = jv_object_set(involved, kop_json_key("kind"), jv_object_get(r, kop_json_key("kind")));
			involved = jv_object_merge(involved, m);
			ev = jv_object_set(ev, kop_json_key("involvedObject"), involved);
		}
		emit(jv_object_set(op_line("event", p->key), kop_json_key("event"), ev));
		n->events++;
	}
	jv_free(events);
}

/* Which of p->status_prev the status live (borrowed) is, or -1. */
static int status_prev_find(struct prim *p, jv live)
{
	int i, found = -1;

	for (i = 0; i < p->nprev && found < 0; i++) {	/* the oldest: none that may still land is dropped */
		jv v = kop_json_read(p->status_prev[i], strlen(p->status_prev[i]));

		if (jv_equal(v, jv_copy(live)))
			found = i;
	}
	return found;
}

/*
 * The primary as the program sees it (parent borrowed), and in *seen which
 * status: while a status written for it is in flight (status_flight), that
 * status (SEEN_CARRIED), so that what the program derives from the stored one (an event on
 * a phase change, a condition's transition time) is not derived twice.
 * Until the stored status is that one, for as long as it is one the stored
 * status may be meanwhile (p->status_prev: an older one of ours landing,
 * kstatus writes them in order): another is someone else's, and what the
 * program derives from it is written again. A reconcile is due when the
 * flight times out, in case it never shows.
 */
jv parent_seen(struct prim *p, jv parent, enum seen *seen, int64_t now)
{
	struct flight *f = status_flight(p, now);
	jv st, live;

	*seen = SEEN_STORED;
	if (!f) {
		status_prev_drop(p, p->nprev);
		return jv_copy(parent);
	}
	st = kop_json_read(p->status_sent, strlen(p->status_sent));
	if (!jv_is_valid(st)) {	/* cannot happen: we wrote it */
		jv_free(st);
		return jv_copy(parent);
	}
	live = jv_object_get(jv_copy(parent), kop_json_key("status"));
	if (jv_get_kind(live) == JV_KIND_INVALID)
		live = jv_null();
	if (jv_equal(jv_copy(st), jv_copy(live))) {
		char *fkey = join2("status", p->key);

		flight_forget(fkey);	/* seen back */
		free(fkey);
		status_prev_drop(p, p->nprev);
		jv_free(st);
		jv_free(live);
		return jv_copy(parent);
	}
	if (strcmp(f->live_rv, obj_rv(p->obj))) {
		/* The primary changed since: with a status it may be meanwhile? */
		int i = status_prev_find(p, live);

		if (i < 0) {
			jv_free(st);
			jv_free(live);
			*seen = SEEN_FOREIGN;
			return jv_copy(parent);
		}
		status_prev_drop(p, i);	/* (those before it will not be stored any more) */
	}
	jv_free(live);
	*seen = SEEN_CARRIED;
	if (!f->acked)	/* (written for sure: its event will come, however late) */
		schedule(p, f->at + FLIGHT_TIMEOUT_MS);
	return jv_object_set(jv_copy(parent), kop_json_key("status"), st);
}

/*
 * The digest of what the program sees of p: seen (consumed), parent_seen's
 * answer, but its resourceVersion (which a write of its status alone moves),
 * and the part of it the render program gets (p->pdig).
 */
static void seen_digest(const struct prim *p, jv seen, unsigned char out[KOP_JSON_DIGEST_LEN])
{
	unsigned char both[2 * KOP_JSON_DIGEST_LEN];
	jv meta = jv_object_get(jv_copy(seen), kop_json_key("metadata"));

	if (jv_get_kind(meta) == JV_KIND_OBJECT)
		seen = jv_object_set(seen, kop_json_key("metadata"),
				     jv_object_delete(meta, kop_json_key("resourceVersion")));
	else
		jv_free(meta);
	memcpy(both, p->pdig, KOP_JSON_DIGEST_LEN);
	kop_json_digest_equal(seen, both + KOP_JSON_DIGEST_LEN);	/* (a server may sort a status's keys) */
	jv_free(seen);
	kop_sha256(both, sizeof(both), out);
}

/* Notes seen (borrowed), parent_seen's answer, as what p's program is given
 * now (the reconcile sets seen_ok once it has run through). */
void seen_note(struct prim *p, jv seen)
{
	seen_digest(p, jv_copy(seen), p->seen_dig);
}

/*
 * Whether p's program would see it as its last reconcile did, obj
 * (borrowed) being what the program sees of the primary as it just arrived
 * (without its spec with a render program; p->obj and p->pdig already its): our status landing that the program saw on its way, a
 * relist, a change of what no program reads (its resourceVersion, its
 * managedFields). Such an event reconciles nothing: the answer would be the
 * last one. What parent_seen does on the way (a flight seen back) is done
 * here as it would be there.
 */
int seen_alike(struct prim *p, jv obj, int64_t now)
{
	unsigned char d[KOP_JSON_DIGEST_LEN];
	enum seen seen;
	jv ps;

	if (!p->seen_ok)
		return 0;
	ps = parent_seen(p, obj, &seen, now);
	seen_digest(p, ps, d);
	return !memcmp(d, p->seen_dig, sizeof(d));
}
