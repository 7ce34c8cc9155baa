/*
 * The view of the cluster: watch events applied to the objects kept (under
 * --shard, those of the shard's primaries only: shard.c), each child linked to its
 * primary, aggregates counted. How an object's text is
 * stored is store.c's; what a reconcile reads of the view is input.c's.
 */
#include <stdlib.h>
#include <string.h>
#include "ireconcile.h"
#include "banned.h"

void obj_free(void *v)
{
	struct obj *o = v;

	free(o->key);
	free(o->text);
	free(o->meta);
	free(o->vtext);
	free(o);
}

/* o's resourceVersion, namespace, uid and owner's uid (NULL: none), copied
 * into one allocation (each is small: four would take twice the memory);
 * any of them may point into the one they replace. Its name is the end of
 * its key (obj_key). */
static void set_meta(struct obj *o, const char *rv, const char *name, const char *ns, const char *uid,
		     const char *owner_uid)
{
	const char *src[4] = { rv, ns, uid, owner_uid ? owner_uid : "" };
	uint32_t at[4];
	size_t len[4], total = 0, i;
	char *m;

	for (i = 0; i < 4; i++) {
		at[i] = (uint32_t)total;
		total += (len[i] = strlen(src[i])) + 1;
	}
	m = kop_malloc(total);
	for (i = 0; i < 4; i++)
		memcpy(m + at[i], src[i], len[i] + 1);
	o->ns_at = at[1];
	o->uid_at = at[2];
	o->owner_at = owner_uid ? at[3] : 0;
	o->name_at = (uint32_t)(strlen(o->key) - strlen(name));
	free(o->meta);
	o->meta = m;
}

static void unlink_child(struct obj *o)
{
	struct prim *p = o->prim;

	if (!p)
		return;
	if (o->prev)
		o->prev->next = o->next;
	else
		p->children = o->next;
	if (o->next)
		o->next->prev = o->prev;
	o->prev = o->next = NULL;
	o->prim = NULL;
}

static void link_child(struct obj *o, struct prim *p)
{
	o->prim = p;
	o->prev = NULL;
	o->next = p->children;
	if (p->children)
		p->children->prev = o;
	p->children = o;
}

/* Recomputes a primary's aggregate flags from obj (borrowed; jv_null() when
 * gone); the cache goes stale when one flips. */
void update_aggs(struct prim *p, jv obj)
{
	size_t i;

	for (i = 0; i < E.prog.naggs; i++) {
		int flag = 0;

		if (jv_get_kind(obj) == JV_KIND_OBJECT) {
			jv r;
			char err[KOP_ERRLEN];

			if (kop_jq_run1(E.prog.aggs[i].jq, jv_copy(obj), &r, err) < 0) {
				tool_logj(LOG_WARN, jv_object_set(jv_object(), kop_json_key("primary"), jv_string(p->key)),
					  "unable to evaluate aggregate '%s' for '%s': %s", E.prog.aggs[i].name, p->key,
					  err);
			} else {
				flag = jv_get_kind(r) != JV_KIND_FALSE && jv_get_kind(r) != JV_KIND_NULL;
				jv_free(r);
			}
		}
		if (flag != p->agg[i]) {
			p->agg[i] = (unsigned char)flag;
			jv_free(E.aggs_cache);
			E.aggs_cache = jv_invalid();
		}
	}
}

/*
 * update_aggs on what the program sees of p (parent_seen): obj (borrowed)
 * with our status while that is on its way. A status sent is counted at
 * once, not when it is stored: instances edited together are reconciled
 * before any of their statuses lands, and would otherwise all pass a
 * limit counted by an aggregate (iotservice's parallel updates).
 */
static void update_aggs_seen(struct prim *p, jv obj, int64_t now)
{
	jv st;

	if (!E.prog.naggs || jv_get_kind(obj) != JV_KIND_OBJECT || !status_flight(p, now)) {
		update_aggs(p, obj);
		return;
	}
	st = kop_json_read(p->status_sent, strlen(p->status_sent));
	if (!jv_is_valid(st)) {	/* cannot happen: we wrote it */
		jv_free(st);
		update_aggs(p, obj);
		return;
	}
	obj = jv_object_set(jv_copy(obj), kop_json_key("status"), st);
	update_aggs(p, obj);
	jv_free(obj);
}

/* The writes of an object that can be in flight (flight.c's keys: "op|objkey"). */
static const char *const obj_ops[] = { "apply", "delete", "patch" };

/* Operations on an object that is gone are no longer in flight. */
static void forget_flights(const struct obj *o)
{
	size_t i;

	for (i = 0; i < sizeof(obj_ops) / sizeof(obj_ops[0]); i++) {
		char *fkey = join2(obj_ops[i], o->key);

		flight_forget(fkey);
		free(fkey);
	}
	if (o->kind->role == KOP_ROLE_PRIMARY && o->prim) {
		char *fkey = join2("status", o->prim->key);

		flight_forget(fkey);
		free(fkey);
	}
}

/* A write of o's on its way: its echo may decide what is pending. */
static int in_flight(const struct obj *o)
{
	size_t i;
	int found = 0;

	for (i = 0; i < sizeof(obj_ops) / sizeof(obj_ops[0]) && !found; i++) {
		char *fkey = join2(obj_ops[i], o->key);

		found = kop_hmap_get(&E.flights, fkey) != NULL;
		free(fkey);
	}
	return found;
}

/* o leaves the view, unreconciled: its flights forgotten, parked when no selector picks its kind. */
static void drop_obj(struct obj *o, const char *pkey)
{
	kop_hmap_remove(&E.objs, o->key);
	forget_flights(o);
	if (!kop_program_kind_sharded(&E.prog, o->kind)) {
		jv v = parse_obj(o);

		if (jv_get_kind(v) == JV_KIND_OBJECT)
			shard_park(o->key, pkey, o->kind, v);
		jv_free(v);
	}
}

/*
 * --shard, ranges removed: p and its objects leave the view without a
 * reconcile (another replica works for them from now on), so nothing of
 * theirs is written again; what aggregates count of p goes with it.
 */
void drop_prim(struct prim *p)
{
	struct prim *q, **pp;

	while (p->children) {
		struct obj *o = p->children;

		unlink_child(o);
		drop_obj(o, p->key);
		obj_free(o);
	}
	if (p->obj) {
		struct obj *o = p->obj;

		o->prim = p;	/* (forget_flights reads the status flight's key from it) */
		drop_obj(o, p->key);
		obj_free(o);
		p->obj = NULL;
		E.nseen--;
		tool_metric_set("ireconcile_primaries", NULL, (double)E.nseen);
		update_aggs(p, jv_null());
	}
	{
		/* (and its writes in flight for objects not in the view: creates) */
		size_t it = 0;
		const char *k;
		void *v;

		while (kop_hmap_next(&E.flights, &it, &k, &v))
			if (((struct flight *)v)->pkey && !strcmp(((struct flight *)v)->pkey, p->key))
				flight_free(kop_hmap_remove(&E.flights, k));
	}
	if (p->queued) {
		for (pp = &E.qhead, q = NULL; *pp && *pp != p; q = *pp, pp = &(*pp)->qnext)
			;
		if (*pp) {
			*pp = p->qnext;
			if (E.qtail == p)
				E.qtail = q;
			E.qlen--;
		}
	}
	kop_hmap_remove(&E.prims, p->key);
	prim_free(p);
}

/*
 * A change of an observed object (what the program reads for the status,
 * pods say) reconciles its primary once the burst it is part of is over:
 * --settle after its last change, SETTLE_CAP --settles after its first at
 * the latest (a stream of changes still reconciles). The pods of a workload
 * come and change in bursts, and one reconcile after the burst writes one
 * status where one a pod would write several. So does a change of a child
 * that leaves its comparison alike (its status alone: a workload's ready
 * replicas, which the program reads like pods). Other changes of children,
 * and primaries, are reconciled at once (drift is corrected without delay);
 * the status such a reconcile derives waits for the burst's end when it says
 * nothing new of where the primary stands (write_status). The end of the input ends every
 * burst (input_end). A primary whose objects are still being listed (before
 * the bookmark, or in a shard range being added) starts none: the first
 * pass, once they are all in, sees them.
 */
#define SETTLE_CAP 5

static void settle(struct prim *p)
{
	int64_t now, at;

	if (!p || !E.synced || shard_waits(p))
		return;
	if (E.settle_ms <= 0 || p->queued) {
		enqueue(p);
		return;
	}
	now = kop_mono_ms();
	if (!p->settle_due)
		p->settle_from = now;
	at = now + E.settle_ms;
	if (at > p->settle_from + SETTLE_CAP * E.settle_ms)
		at = p->settle_from + SETTLE_CAP * E.settle_ms;
	timer_set(&p->settle_due, at);
}

void remove_obj(struct obj *o)
{
	struct prim *p = o->prim;

	kop_hmap_remove(&E.objs, o->key);
	forget_flights(o);
	if (o->kind->role == KOP_ROLE_RELATED) {
		kop_hmap_remove(&E.related, o->key);
		jv_free(E.related_cache);
		E.related_cache = jv_invalid();
		enqueue_all();
		render_ahead_all();
	} else if (o->kind->role == KOP_ROLE_PRIMARY) {
		if (p && p->obj == o) {
			p->obj = NULL;
			p->seen_ok = 0;
			p->status_at = 0;	/* (a primary of that name created again: its first status at once) */
			E.nseen--;
			tool_metric_set("ireconcile_primaries", NULL, (double)E.nseen);
			update_aggs(p, jv_null());
			enqueue(p);
		}
	} else {
		unlink_child(o);
		enqueue(p);
	}
	obj_free(o);
}

/*
 * The object's text in the event line as it came (kwatch passes the
 * server's), its managedFields cut, heap-allocated: what is kept of it needs
 * no writing out again. NULL when a scan does not read the line plainly.
 * (The same object in other bytes, a relist's, is then one change more.)
 */
static char *event_object_text(const char *line, size_t len, size_t *tlen)
{
	struct kop_json_event ev;
	char *t;

	if (E.event_scanned && line == E.event_text) {
		ev = E.event_scan;	/* (event_read's) */
	} else {
		if (kop_json_event(line, len, &ev) < 0)
			return NULL;
		jv_free(ev.meta);
	}
	*tlen = ev.obj_len - (ev.cut_e - ev.cut_b);
	t = kop_malloc(*tlen + 1);
	memcpy(t, ev.obj, ev.cut_b);
	memcpy(t + ev.cut_b, ev.obj + ev.cut_e, ev.obj_len - ev.cut_e);
	t[*tlen] = 0;
	return t;
}

/*
 * What is built of an event line whose object is of kind k (event_read), the
 * rest passed over (kop_json_read_pick: pick, and *rest for what it does not
 * name), or jv_null(): all of it. Its type, and of the object: of a child
 * whose view is a list of fields, those and its identity (all the view takes
 * of it; it is compared from its text); of a primary whose spec only the
 * render program reads, all but the spec (the render reads its text). Made
 * once per kind; borrowed.
 */
static jv pick_of(const struct kop_kind *k, int *rest)
{
	static jv *picks;	/* [0]: the primary's, [1 + i]: E.prog.kinds[i]'s */
	size_t i = k == &E.prog.primary ? 0 : 1 + (size_t)(k - E.prog.kinds), j;

	if (!picks) {
		picks = kop_malloc((E.prog.nkinds + 1) * sizeof(*picks));
		for (j = 0; j <= E.prog.nkinds; j++)
			picks[j] = jv_invalid();
	}
	if (!jv_is_valid(picks[i])) {
		jv obj = jv_null();

		if (k->role == KOP_ROLE_PRIMARY && E.prog.render && !projects(k))
			obj = JV_OBJECT(jv_string("spec"), jv_false());
		else if (k->role == KOP_ROLE_CHILD && !k->project && jv_get_kind(k->keep) == JV_KIND_ARRAY)
			obj = kop_json_keep_pick(JV_OBJECT(jv_string("apiVersion"), jv_true(), jv_string("kind"),
							   jv_true(), jv_string("metadata"), jv_true()),
						 k->keep);
		picks[i] = jv_get_kind(obj) == JV_KIND_NULL ? obj :
			   JV_OBJECT(jv_string("type"), jv_true(), jv_string("object"), obj);
	}
	*rest = k->role == KOP_ROLE_PRIMARY;
	return picks[i];
}

/* Whether the n bytes at b are s. */
static int scanned_is(const char *b, size_t n, const char *s)
{
	return n == strlen(s) && !memcmp(b, s, n);
}

/* A string of the scanned text (n bytes at b) with no escape in it, copied
 * into buf (size bytes): buf, or NULL. */
static const char *scanned_str(const char *b, size_t n, char *buf, size_t size)
{
	if (n >= size || memchr(b, '\\', n))
		return NULL;
	memcpy(buf, b, n);
	buf[n] = 0;
	return buf;
}

/*
 * A watch event line read for handle_event with only what the view takes of
 * its object built (pick_of): 0 and *ev, or -1 (nothing made): read it whole.
 * Its scan is kept for handle_object either way (E.event_scanned).
 */
int event_read(const char *line, size_t len, jv *ev)
{
	struct kop_json_event *sc = &E.event_scan;
	char kind[128], av[320];
	const struct kop_kind *k = NULL;
	const char *name;
	jv pick;
	int rest;

	E.event_scanned = E.event_picked = 0;
	/* (not under --shard: an object of another shard is parked from its value) */
	if (E.shard || kop_json_event(line, len, sc) < 0)
		return -1;
	E.event_scanned = 1;
	/* (an object without a name is left to the whole read, which says so) */
	if ((scanned_is(sc->type, sc->type_len, "ADDED") || scanned_is(sc->type, sc->type_len, "MODIFIED") ||
	     scanned_is(sc->type, sc->type_len, "DELETED")) &&
	    scanned_str(sc->kind, sc->kind_len, kind, sizeof(kind)) &&
	    scanned_str(sc->api_version, sc->api_version_len, av, sizeof(av)) &&
	    (name = meta(sc->meta, "name")) && *name)
		k = kop_program_find_kind(&E.prog, av, kind, meta(sc->meta, "namespace"), name);
	jv_free(sc->meta);
	sc->meta = jv_invalid();
	if (!k)
		return -1;
	pick = pick_of(k, &rest);
	/* (the whole line is read: what is passed over of it checked as the whole read would) */
	if (jv_get_kind(pick) != JV_KIND_OBJECT ||
	    /* (a child with long strings, a Secret's data, is fingerprinted from its value: store_text) */
	    (!rest && kop_json_fp_text_needed(sc->obj, sc->obj_len)) || kop_json_read_pick(line, len, pick, rest, ev) < 0)
		return -1;
	E.event_picked = 1;
	return 0;
}

void handle_object(const char *type, jv obj, const char *line, size_t line_len, size_t lineno)
{
	const char *name = meta(obj, "name"), *ns = meta(obj, "namespace");
	const char *kind = kop_json_cstr(obj, "kind"), *av = kop_json_cstr(obj, "apiVersion"), *bad;
	const struct kop_kind *k;
	struct obj *o;
	char *key;
	const char *rv;
	char *text, *new_owner = NULL;
	size_t tlen;
	int fresh, relinked = 0, had_view, unseen = 0, owner_set = 0, text_kept = 0;
	jv value;		/* obj, or jv_invalid() when it was read in part: read from text where needed */
	unsigned char tdig[OBJ_DIG], pdig[KOP_JSON_DIGEST_LEN];
	const unsigned char *tdig_made = NULL;	/* tdig, once same_text made it */

	if (!name || !*name || !kind || !av) {
		log_warn("line %zu: %s without %s; skipped", lineno, "an object",
			 !kind ? "kind" : !av ? "apiVersion" : "metadata.name");
		jv_free(obj);
		return;
	}
	if ((bad = nul_field(obj))) {
		log_warn("line %zu: an object whose %s holds a NUL byte; skipped", lineno, bad);
		jv_free(obj);
		return;
	}
	if (!(k = kop_program_find_kind(&E.prog, av, kind, ns, name))) {
		log_warn("line %zu: unknown kind '%s' (apiVersion '%s') for program '%s'; skipped", lineno, kind, av,
			 E.prog.name);
		jv_free(obj);
		return;
	}
	if (k->role == KOP_ROLE_PRIMARY && k->namespace && strcmp(k->namespace, ns ? ns : "")) {
		log_debug("line %zu: %s '%s/%s' outside namespace '%s'; ignored", lineno, kind, ns ? ns : "", name,
			  k->namespace);
		jv_free(obj);
		return;
	}
	key = obj_key(av, kind, ns, name);
	o = kop_hmap_get(&E.objs, key);
	if (!strcmp(type, "DELETED")) {
		if (o)
			remove_obj(o);
		free(key);
		jv_free(obj);
		return;
	}
	if (has_meta(obj, "managedFields"))
		obj = jv_object_set(obj, kop_json_key("metadata"),
				    jv_object_delete(jv_object_get(jv_copy(obj), kop_json_key("metadata")),
						     kop_json_key("managedFields")));
	rv = meta(obj, "resourceVersion");
	/* (one read in part, event_read, has its text: its scan was made) */
	value = line && line == E.event_text && E.event_picked ? jv_invalid() : obj;
	text = line ? event_object_text(line, line_len, &tlen) : NULL;
	if (!text)
		text = kop_json_dump_len(jv_copy(obj), &tlen);
	if (o && same_text(o, text, tlen, tdig, &tdig_made)) {
		free(key);	/* the same state again (a replay, a relist): nothing new */
		free(text);
		jv_free(obj);
		return;
	}
	fresh = !o;
	if (k->role == KOP_ROLE_CHILD || k->role == KOP_ROLE_OBSERVED) {
		char *owner_uid = NULL;
		char *pkey = kop_program_map(&E.prog, k->mapping, obj, &owner_uid);

		if (!pkey) {
			/* Not (or no longer) ours: out of the view. */
			if (o)
				remove_obj(o);
			free(key);
			free(text);
			jv_free(obj);
			return;
		}
		if (!o) {
			o = kop_calloc(1, sizeof(*o));
			o->key = key;
			kop_hmap_put(&E.objs, key, o);
		} else {
			free(key);
		}
		if (!o->prim || strcmp(o->prim->key, pkey)) {
			struct prim *old = o->prim;

			relinked = 1;
			o->status_free = 0;	/* (its new primary's reconcile says) */
			unlink_child(o);
			enqueue(old);
			link_child(o, prim_get(pkey, 1));
		}
		new_owner = owner_uid;	/* (set_meta, below) */
		owner_set = 1;
		free(pkey);
		if (k->create_only) {
			/* Its create (adopt: false) landed, or one of its name is there: no longer in flight. */
			char *fkey = join2("create", o->key);

			flight_forget(fkey);
			free(fkey);
		}
	} else {
		if (!o) {
			o = kop_calloc(1, sizeof(*o));
			o->key = key;
			kop_hmap_put(&E.objs, key, o);
		} else {
			free(key);
		}
	}
	o->kind = k;
	had_view = o->vtext != NULL;
	free(o->vtext);
	o->vtext = NULL;
	o->vzlen = 0;
	if (k->role == KOP_ROLE_CHILD) {
		/* Compared whole, seen by the program as projected. A change
		 * that leaves both alike (its status outside the projection)
		 * gives the program nothing new and leaves nothing to apply:
		 * unless a write of its own is on its way, or the program
		 * desired it with a status, it reconciles nothing (unseen 1).
		 * One that changes only what the program sees of its status
		 * leaves nothing to apply either: it settles (unseen 2). And a
		 * change of its status alone while its primary waits for its
		 * creates to land (flight_landed) waits with it: the reconcile
		 * of the last one sees it, and the statuses the controllers
		 * write as the objects come give it no reconcile of their own
		 * (unseen 3). That wait ends at its reconcile, LANDED_WAIT_MS
		 * after the first create seen at the latest, whatever is still
		 * counted as on its way. */
		jv v = projects(k) ? project(jv_copy(obj), lineno) : jv_invalid();
		unsigned char ovdig[sizeof(o->vdig)], osdig[sizeof(o->sdig)];
		int sdig_same;

		memcpy(ovdig, o->vdig, sizeof(ovdig));
		memcpy(osdig, o->sdig, sizeof(osdig));
		if (jv_is_valid(v))
			store_view(o, v);
		child_digest(k, value, text, tlen, o->sdig);
		sdig_same = !fresh && !memcmp(osdig, o->sdig, sizeof(osdig));
		if (!sdig_same)
			o->sdig_rv = rv_number(rv);
		if (sdig_same && !relinked) {
			if (had_view && o->vtext && o->status_free && !in_flight(o))
				unseen = memcmp(ovdig, o->vdig, sizeof(ovdig)) ? 2 : 1;
			else if (o->prim->landing && o->prim->creating > 0)
				unseen = 3;
		}
	} else if (k->role == KOP_ROLE_PRIMARY && E.prog.render) {
		/* Its spec goes to the render program only (README: render). Its
		 * text is read only to render, and what the render gets of it is
		 * what pdig covers: a text that renders as the one kept (a
		 * status, a finalizer, a resourceVersion changed) leaves that one
		 * kept, rather than compressed and digested again. Not with
		 * --shard: a primary whose range leaves is parked from its text,
		 * to come back as it was last seen. */
		store_view(o, jv_object_delete(jv_copy(obj), kop_json_key("spec")));
		render_parent_digest(value, text, tlen, pdig);
		text_kept = !E.shard && !fresh && o->prim && o->prim->obj == o &&
			    !memcmp(pdig, o->prim->pdig, sizeof(pdig));
	}
	if (!text_kept)
		store_text(o, value, text, tlen, tdig_made);
	set_meta(o, rv ? rv : "", name, ns ? ns : "", meta(obj, "uid") ? meta(obj, "uid") : "",
		 owner_set ? new_owner : obj_owner_uid(o));
	free(new_owner);
	o->deleting = has_meta(obj, "deletionTimestamp");
	switch (k->role) {
	case KOP_ROLE_PRIMARY: {
		struct kop_buf pk = KOP_BUF_INIT;
		struct prim *p;
		jv seen;

		if (ns && *ns)
			kop_buf_addf(&pk, "%s/%s", ns, name);
		else
			kop_buf_adds(&pk, name);
		p = prim_get(pk.buf, 1);
		kop_buf_release(&pk);
		o->prim = p;	/* for primaries: a back pointer only, not a list */
		if (!p->obj) {
			E.nseen++;
			tool_metric_set("ireconcile_primaries", NULL, (double)E.nseen);
		}
		p->obj = o;
		if (E.prog.render)
			memcpy(p->pdig, pdig, sizeof(pdig));
		/* (with a render program, what the program sees of a primary has no spec, however
		 * the line was read: event_read) */
		seen = E.prog.render && jv_object_has(jv_copy(obj), kop_json_key("spec")) ?
			       jv_object_delete(jv_copy(obj), kop_json_key("spec")) : jv_copy(obj);
		update_aggs_seen(p, seen, kop_mono_ms());
		render_ahead(p);
		if (p->queued || !seen_alike(p, seen, kop_mono_ms()))
			enqueue(p);
		else
			log_debug("primary '%s': as its last reconcile saw it; not reconciled", p->key);
		jv_free(seen);
		break;
	}
	case KOP_ROLE_RELATED:
		kop_hmap_put(&E.related, o->key, o);
		jv_free(E.related_cache);
		E.related_cache = jv_invalid();
		enqueue_all();
		render_ahead_all();
		break;
	case KOP_ROLE_OBSERVED:
		settle(o->prim);
		break;
	default:
		/* (one of several created together: once the last is seen) */
		if (unseen == 3)
			log_debug("'%s': a status of a child while its creates land; waits for them", o->prim->key);
		else if (unseen == 2)
			settle(o->prim);
		else if (!unseen && (!fresh || !flight_landed(o)))
			enqueue(o->prim);
		flight_apply_seen(o);
	}
	free(text);
	jv_free(obj);
}

/*
 * Applies the kind's `project` (program.yml) to obj (consumed): the object as
 * it will be kept. apiVersion, kind, name and namespace always stay.
 */
jv project_kind(jv obj, size_t lineno, int whole, int *projected)
{
	const char *name = meta(obj, "name"), *ns = meta(obj, "namespace");
	const char *kind = kop_json_cstr(obj, "kind"), *av = kop_json_cstr(obj, "apiVersion");
	const struct kop_kind *k = kind && av && name ? kop_program_find_kind(&E.prog, av, kind, ns, name) : NULL;
	jv out = jv_invalid(), meta_out;
	char err[KOP_ERRLEN] = "";

	if (projected)
		*projected = 0;
	if (!k || !projects(k))
		return obj;
	if (k->role == KOP_ROLE_CHILD && !whole)
		return obj;	/* kept whole for comparing: handle_object keeps the view beside it */
	if (projected)
		*projected = 1;
	if (!k->project) {
		out = kop_program_keep(k, jv_copy(obj));
	} else if (kop_jq_run1(k->project, jv_copy(obj), &out, err) < 0 || jv_get_kind(out) != JV_KIND_OBJECT) {
		log_warn("line %zu: unable to project %s '%s': %s; kept whole", lineno, kind, name,
			 !strcmp(kind, "Secret") ? "(the jq error on a Secret is not logged: it may quote its data)"
			 : err[0] ? err : "not an object");
		jv_free(out);
		return obj;
	}
	meta_out = jv_object_get(jv_copy(out), kop_json_key("metadata"));
	if (jv_get_kind(meta_out) != JV_KIND_OBJECT) {
		jv_free(meta_out);
		meta_out = jv_object();
	}
	meta_out = jv_object_set(meta_out, kop_json_key("name"), jv_string(name));
	if (ns)
		meta_out = jv_object_set(meta_out, kop_json_key("namespace"), jv_string(ns));
	out = jv_object_set(out, kop_json_key("metadata"), meta_out);
	out = jv_object_set(out, kop_json_key("apiVersion"), jv_string(av));
	out = jv_object_set(out, kop_json_key("kind"), jv_string(kind));
	jv_free(obj);
	return out;
}

void handle_event(jv ev, size_t lineno)
{
	const char *type = kop_json_cstr(ev, "type");
	jv obj;

	if (jv_get_kind(ev) != JV_KIND_OBJECT || !type) {
		log_warn("line %zu: not a watch event (no \"type\"); skipped", lineno);
		jv_free(ev);
		return;
	}
	obj = jv_object_get(jv_copy(ev), kop_json_key("object"));
	if (!strcmp(type, "BOOKMARK")) {
		jv mark = jv_getpath(jv_copy(obj), jv_array_append(path2("metadata", "annotations"),
								   jv_string("k8s.io/initial-events-end")));

		if (jv_get_kind(mark) == JV_KIND_STRING && !strcmp(jv_string_value(mark), "true")) {
			if (!E.synced) {
				log_debug("line %zu: initial events end: reconciling every primary", lineno);
				E.synced = 1;
				ahead_drop();
				first_pass_enqueue();
			}
			shard_synced(lineno);
		}
		jv_free(mark);
		jv_free(obj);
	} else if (!strcmp(type, "SHARDS")) {
		jv_free(obj);
		if (kop_json_cstr(ev, "remove"))
			shard_removed(ev, lineno);
		else
			shard_added(ev, lineno);
	} else if (!strcmp(type, "ERROR")) {
		const char *msg = kop_json_cstr(obj, "message");

		log_warn("line %zu: watch error: %s; skipped", lineno, msg ? msg : "(no message)");
		jv_free(obj);
	} else if (strcmp(type, "ADDED") && strcmp(type, "MODIFIED") && strcmp(type, "DELETED")) {
		log_warn("line %zu: unknown event type '%s'; skipped", lineno, type);
		jv_free(obj);
	} else if (jv_get_kind(obj) != JV_KIND_OBJECT || !has_meta(obj, "name")) {
		log_warn("line %zu: %s event with an object without metadata; skipped", lineno, type);
		jv_free(obj);
	} else if (other_shard(type, obj)) {
		jv_free(obj);
	} else {
		const char *line = E.event_text;
		size_t line_len = E.event_len;
		int projected;

		obj = project_kind(obj, lineno, 0, &projected);
		handle_object(type, obj, projected ? NULL : line, line_len, lineno);
	}
	jv_free(ev);
}
