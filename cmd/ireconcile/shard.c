/*
 * --shard: which primaries this run works for. An object of another shard's
 * primary is dropped where it enters; one of a kind no shard selector picks
 * (the primaries themselves, cluster-scoped children, kinds held to one
 * namespace: every replica is sent them all) is parked instead, as its
 * text, so that ranges added while running (a SHARDS line) find their
 * primaries and such children at once. The primaries of ranges added wait,
 * not reconciled, until the next initial-events-end bookmark: that of the
 * lists of the objects in their namespaces, which come after the SHARDS line.
 * Ranges removed take their primaries out of the view unreconciled, and a
 * barrier after their writes says, once back as feedback, that all is done.
 */
#include <stdlib.h>
#include <string.h>
#include "ireconcile.h"
#include "banned.h"

/* A parked object: the primary it maps to, and its compact JSON (compressed when zlen: kind_compress). */
struct parked {
	char *pkey;
	const struct kop_kind *kind;
	char *text;
	size_t len, zlen;
	unsigned char gen;	/* of the kind's dictionary it was compressed with */
};

static struct kop_hmap parked;	/* objkey -> struct parked */

static void parked_free(void *v)
{
	struct parked *pk = v;

	free(pk->pkey);
	free(pk->text);
	free(pk);
}

void shard_release(void)
{
	kop_hmap_release(&parked, parked_free);
	if (E.shard_wait) {
		kop_shard_free(E.shard_wait);
		free(E.shard_wait);
		E.shard_wait = NULL;
	}
}

/* Whether the shard key of the primary ns/name is in sel's ranges. */
static int sel_holds(const struct kop_shard_sel *sel, const char *ns, const char *name)
{
	char *key = kop_program_shard_key(&E.prog, ns, name);
	int in = kop_shard_match_value(sel, key, strlen(key));

	free(key);
	return in;
}

/* The same for the primary of key pkey ("ns/name", or "name" when cluster-scoped). */
static int sel_holds_key(const struct kop_shard_sel *sel, const char *pkey)
{
	const char *slash = strchr(pkey, '/');
	char *ns = slash ? kop_strndup(pkey, (size_t)(slash - pkey)) : NULL;
	int in = sel_holds(sel, ns, slash ? slash + 1 : pkey);

	free(ns);
	return in;
}

/* Whether the primary p waits for the lists of the ranges added (shard_added). */
int shard_waits(const struct prim *p)
{
	return E.shard_wait && sel_holds_key(E.shard_wait, p->key);
}

/* obj (borrowed), of kind k and primary pkey, parked under key. */
void shard_park(const char *key, const char *pkey, const struct kop_kind *k, jv obj)
{
	struct parked *pk = kop_calloc(1, sizeof(*pk));
	char *text = kop_json_dump_len(jv_copy(obj), &pk->len);

	pk->pkey = kop_strdup(pkey);
	pk->kind = k;
	pk->text = kind_compress(k, text, pk->len, &pk->zlen, &pk->gen);
	free(text);
	if ((pk = kop_hmap_put(&parked, key, pk)))
		parked_free(pk);
}

/* The same from an event of type: parked, or, on DELETED, forgotten. */
static void park(const char *type, const char *key, const char *pkey, const struct kop_kind *k, jv obj)
{
	struct parked *pk;

	if (strcmp(type, "DELETED")) {
		shard_park(key, pkey, k, obj);
	} else if ((pk = kop_hmap_remove(&parked, key))) {
		parked_free(pk);
	}
}

/*
 * Whether obj (borrowed), of an event of type, is another shard's, to be
 * dropped before it costs anything: a primary whose shard key is out of the
 * ranges, or a child or observed object that maps to such a primary (the
 * key from the primary's name and namespace, whether it was seen or not).
 * Related objects are every primary's; objects that map to no primary go
 * on, to be left out as they are unsharded. A copy in the view (it mapped
 * into the shard before, its labels changed since) leaves it, as one that
 * stops mapping does: never pruned, since only the shard's own primaries'
 * children are. One of a kind no selector picks is parked (or, when it
 * comes back into the shard, taken out of the park: view.c gets it).
 */
int other_shard(const char *type, jv obj)
{
	const char *name = meta(obj, "name"), *ns = meta(obj, "namespace");
	const char *kind = kop_json_cstr(obj, "kind"), *av = kop_json_cstr(obj, "apiVersion");
	const struct kop_kind *k;
	char *pkey = NULL, *key;
	struct obj *o;
	int mine = 1;

	if (!E.shard || !name || !*name || !kind || !av || !(k = kop_program_find_kind(&E.prog, av, kind, ns, name)))
		return 0;	/* (handle_object says what is wrong with it) */
	switch (k->role) {
	case KOP_ROLE_PRIMARY:
		if (k->namespace && strcmp(k->namespace, ns ? ns : ""))
			return 0;	/* (one outside its namespace is ignored there) */
		mine = sel_holds(E.shard, ns, name);
		if (!mine) {
			struct kop_buf pk = KOP_BUF_INIT;

			if (ns && *ns)
				kop_buf_addf(&pk, "%s/%s", ns, name);
			else
				kop_buf_adds(&pk, name);
			pkey = kop_buf_detach(&pk, NULL);
		}
		break;
	case KOP_ROLE_CHILD:
	case KOP_ROLE_OBSERVED:
		if (!(pkey = kop_program_map(&E.prog, k->mapping, obj, NULL)))
			return 0;
		mine = sel_holds_key(E.shard, pkey);
		break;
	default:
		return 0;
	}
	key = obj_key(av, kind, ns, name);
	if (mine) {
		struct parked *pk = parked.len ? kop_hmap_remove(&parked, key) : NULL;

		if (pk)
			parked_free(pk);
		free(key);
		free(pkey);
		return 0;
	}
	E.shard_dropped++;
	tool_metric_add("ireconcile_shard_dropped_events_total", NULL, 1);
	if ((o = kop_hmap_get(&E.objs, key)))
		remove_obj(o);
	if (!kop_program_kind_sharded(&E.prog, k))
		park(type, key, pkey, k, obj);
	free(key);
	free(pkey);
	return 1;
}

/* Parses "a || b" (a NULL: b alone) into *sel: 0, or -1 with err. */
static int or_parse(const char *a, const char *b, struct kop_shard_sel *sel, char *err)
{
	struct kop_buf t = KOP_BUF_INIT;
	int r;

	if (a && *a)
		kop_buf_addf(&t, "%s || ", a);
	kop_buf_adds(&t, b);
	r = kop_shard_parse(t.buf, sel, err);
	kop_buf_release(&t);
	return r;
}

/*
 * A SHARDS line: {"type": "SHARDS", "add": SELECTOR} adds SELECTOR's ranges
 * to --shard's. What was parked for them enters the view now; their
 * primaries wait for the next initial-events-end bookmark (shard_synced).
 */
void shard_added(jv ev, size_t lineno)
{
	const char *add = kop_json_cstr(ev, "add");
	struct kop_shard_sel *all, *wait;
	char err[KOP_ERRLEN] = "";
	const char **keys;
	size_t it = 0, n = 0, i;
	const char *k;
	void *v;

	if (!E.shard) {
		log_warn("line %zu: a SHARDS line without --shard (every primary is worked for already); skipped",
			 lineno);
		return;
	}
	if (!add || !*add) {
		log_warn("line %zu: a SHARDS line without \"add\" or \"remove\" (the shard selector of the ranges "
			 "added or removed); skipped",
			 lineno);
		return;
	}
	all = kop_calloc(1, sizeof(*all));
	wait = kop_calloc(1, sizeof(*wait));
	if (or_parse(E.shard->string, add, all, err) < 0 ||
	    or_parse(E.shard_wait ? E.shard_wait->string : NULL, add, wait, err) < 0) {
		log_warn("line %zu: a SHARDS line whose \"add\" '%s' is not a shard selector of the same field as "
			 "--shard's: %s; skipped", lineno, add, err);
		kop_shard_free(all);
		kop_shard_free(wait);
		free(all);
		free(wait);
		return;
	}
	kop_shard_free(E.shard);
	free(E.shard);
	E.shard = all;
	if (E.shard_wait) {
		kop_shard_free(E.shard_wait);
		free(E.shard_wait);
	}
	E.shard_wait = wait;
	log_info("line %zu: ranges added: %s; their primaries wait for the initial lists of their objects", lineno,
		 add);
	/* Out of the park (keys first: what leaves the park changes the map). */
	keys = kop_calloc(parked.len + 1, sizeof(*keys));
	while (kop_hmap_next(&parked, &it, &k, &v))
		if (sel_holds_key(E.shard, ((struct parked *)v)->pkey))
			keys[n++] = kop_strdup(k);
	for (i = 0; i < n; i++) {
		struct parked *pk = kop_hmap_remove(&parked, keys[i]);
		jv obj = kind_parse(pk->kind, pk->text, pk->zlen, pk->len, pk->gen);

		free((char *)keys[i]);
		if (jv_get_kind(obj) != JV_KIND_OBJECT) {	/* cannot happen: we wrote it */
			log_warn("line %zu: a parked object of '%s' could not be read back; it enters with its next event", lineno,
				 pk->pkey);
			jv_free(obj);
		} else {
			handle_object("ADDED", project_kind(obj, lineno, 0, NULL), NULL, 0, lineno);
		}
		parked_free(pk);
	}
	free(keys);
}

/* The initial lists of the ranges added are in: their primaries are reconciled. */
void shard_synced(size_t lineno)
{
	size_t it = 0, n = 0;
	void *v;

	if (!E.shard_wait)
		return;
	while (kop_hmap_next(&E.prims, &it, NULL, &v)) {
		struct prim *p = v;

		if (p->obj && sel_holds_key(E.shard_wait, p->key)) {
			enqueue(p);
			n++;
		}
	}
	log_info("line %zu: the initial lists of the ranges added are in: reconciling their %zu primaries", lineno, n);
	kop_shard_free(E.shard_wait);
	free(E.shard_wait);
	E.shard_wait = NULL;
}

/*
 * A SHARDS line {"type": "SHARDS", "remove": SELECTOR, "barrier": N} takes
 * SELECTOR's ranges from --shard's: their primaries and objects leave the
 * view without a reconcile (those of kinds no selector picks to the park),
 * and {"barrier": N} is written after every operation written for them
 * before: kapply and kstatus pass it on once all that came before it is
 * done, and it comes back as feedback (shard_barrier).
 */
void shard_removed(jv ev, size_t lineno)
{
	const char *rem = kop_json_cstr(ev, "remove");
	jv barrier = jv_object_get(jv_copy(ev), kop_json_key("barrier"));
	struct kop_shard_sel sel;
	char err[KOP_ERRLEN] = "";
	struct prim **drop;
	size_t it = 0, n = 0, i;
	void *v;

	if (!E.shard) {
		log_warn("line %zu: a SHARDS line without --shard (every primary is worked for); skipped", lineno);
		jv_free(barrier);
		return;
	}
	if (!rem || kop_shard_parse(rem, &sel, err) < 0 || sel.key != E.shard->key) {
		log_warn("line %zu: a SHARDS line whose \"remove\" '%s' is not a shard selector of the same field as "
			 "--shard's%s%s; skipped", lineno, rem ? rem : "", *err ? ": " : "", err);
		if (rem && !*err)
			kop_shard_free(&sel);
		jv_free(barrier);
		return;
	}
	kop_shard_remove(E.shard, &sel);	/* (nothing left: no range, no hash matches) */
	if (E.shard_wait && kop_shard_remove(E.shard_wait, &sel) == KOP_SHARD_NONE) {
		kop_shard_free(E.shard_wait);
		free(E.shard_wait);
		E.shard_wait = NULL;
	}
	kop_shard_free(&sel);
	drop = kop_calloc(E.prims.len + 1, sizeof(*drop));
	while (kop_hmap_next(&E.prims, &it, NULL, &v))
		if (!sel_holds_key(E.shard, ((struct prim *)v)->key))
			drop[n++] = v;
	for (i = 0; i < n; i++)
		drop_prim(drop[i]);
	free(drop);
	log_info("line %zu: ranges removed: %s; %zu primaries left the view, unreconciled", lineno, rem, n);
	if (jv_get_kind(barrier) == JV_KIND_NUMBER)
		emit(JV_OBJECT(kop_json_key("barrier"), barrier));
	else
		jv_free(barrier);
}

/* Feedback: a barrier came back, so every operation written before it is done: said in the metrics. */
void shard_barrier(jv line, size_t lineno)
{
	jv b = jv_object_get(line, kop_json_key("barrier"));

	if (jv_get_kind(b) == JV_KIND_NUMBER) {
		log_debug("feedback line %zu: barrier %.0f: what was written before it is done", lineno,
			  jv_number_value(b));
		tool_metric_set("ireconcile_barrier", NULL, jv_number_value(b));
		tool_metrics_flush(1);
	}
	jv_free(b);
}
