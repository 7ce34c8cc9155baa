/* The list-and-watch state machine of one resource (see watch.h). */
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include "watch.h"
#include "banned.h"

/* ---- the map: key -> (uid, resourceVersion last emitted) ------------------ */

static uint32_t hash_str(const char *s)
{
	uint32_t h = 2166136261u;	/* FNV-1a */

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 16777619u;
	}
	return h;
}

void kw_map_init(struct kw_map *m)
{
	/* (most maps are a namespace's Secrets, a handful: the others grow) */
	m->nslots = 8;
	m->count = 0;
	m->slots = kop_calloc(m->nslots, sizeof(*m->slots));
}

void kw_map_release(struct kw_map *m)
{
	size_t i;

	for (i = 0; i < m->nslots; i++) {
		struct kw_entry *e = m->slots[i], *next;

		for (; e; e = next) {
			next = e->next;
			free(e);
		}
	}
	free(m->slots);
	m->slots = NULL;
	m->nslots = m->count = 0;
}

/* The link that points at key's entry, or at the NULL ending its chain. */
static struct kw_entry **map_link(const struct kw_map *m, const char *key, uint32_t h)
{
	struct kw_entry **p = &m->slots[h & (m->nslots - 1)];

	for (; *p; p = &(*p)->next)
		if ((*p)->hash == h && !strcmp((*p)->data, key))
			break;
	return p;
}

struct kw_entry *kw_map_get(const struct kw_map *m, const char *key)
{
	return *map_link(m, key, hash_str(key));
}

static void map_grow(struct kw_map *m)
{
	size_t n = m->nslots * 2, i;
	struct kw_entry **slots = kop_calloc(n, sizeof(*slots));

	for (i = 0; i < m->nslots; i++) {
		struct kw_entry *e = m->slots[i], *next;

		for (; e; e = next) {
			next = e->next;
			e->next = slots[e->hash & (n - 1)];
			slots[e->hash & (n - 1)] = e;
		}
	}
	free(m->slots);
	m->slots = slots;
	m->nslots = n;
}

/* Sets key's uid and rv (inserting or replacing); returns the entry. */
static struct kw_entry *map_put(struct kw_map *m, const char *key, const char *uid, const char *rv, unsigned gen)
{
	uint32_t h = hash_str(key);
	struct kw_entry **p = map_link(m, key, h), *e;
	size_t kl = strlen(key), ul = strlen(uid), rl = strlen(rv);

	e = kop_malloc(sizeof(*e) + kl + ul + rl + 3);
	e->memo = *p && !strcmp(kw_entry_uid(*p), uid) ? (*p)->memo : 0;
	e->hash = h;
	e->gen = gen;
	e->klen = (uint32_t)kl;
	e->ulen = (uint32_t)ul;
	e->rvlen = (uint32_t)rl;
	memcpy(e->data, key, kl + 1);
	memcpy(e->data + kl + 1, uid, ul + 1);
	memcpy(e->data + kl + ul + 2, rv, rl + 1);
	if (*p) {
		e->next = (*p)->next;
		free(*p);
		*p = e;
		return e;
	}
	e->next = NULL;
	*p = e;
	if (++m->count > m->nslots)
		map_grow(m);
	return e;
}

static void map_remove(struct kw_map *m, const char *key)
{
	struct kw_entry **p = map_link(m, key, hash_str(key)), *e = *p;

	if (!e)
		return;
	*p = e->next;
	free(e);
	m->count--;
}

/* ---- helpers --------------------------------------------------------------- */

int kw_rv_cmp(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);

	if (la != lb)
		return la < lb ? -1 : 1;
	return strcmp(a, b);
}

static void set_str(char **p, const char *s)
{
	char *old = *p;

	*p = s ? kop_strdup(s) : NULL;
	free(old);
}

/* A string field of obj.metadata (borrowed from obj), or "" */
static const char *meta_str(jv obj, const char *field, jv *hold)
{
	jv meta, v;

	*hold = jv_null();
	if (jv_get_kind(obj) != JV_KIND_OBJECT)
		return "";
	meta = jv_object_get(jv_copy(obj), jv_string("metadata"));
	if (jv_get_kind(meta) != JV_KIND_OBJECT) {
		jv_free(meta);
		return "";
	}
	v = jv_object_get(meta, jv_string(field));
	if (jv_get_kind(v) != JV_KIND_STRING) {
		jv_free(v);
		return "";
	}
	*hold = v;
	return jv_string_value(v);
}

/* The identity of an object: "namespace/name" (heap), uid and rv (copies in the struct). */
struct ident {
	struct kop_buf key;
	jv uid, rv;
	const char *uid_s, *rv_s;
};

static void ident_get(struct ident *id, jv obj)
{
	jv ns, name;
	const char *n = meta_str(obj, "namespace", &ns);
	const char *nm = meta_str(obj, "name", &name);

	id->key = (struct kop_buf)KOP_BUF_INIT;
	kop_buf_addf(&id->key, "%s/%s", n, nm);
	jv_free(ns);
	jv_free(name);
	id->uid_s = meta_str(obj, "uid", &id->uid);
	id->rv_s = meta_str(obj, "resourceVersion", &id->rv);
}

static void ident_release(struct ident *id)
{
	kop_buf_release(&id->key);
	jv_free(id->uid);
	jv_free(id->rv);
}

/* Typed list items carry no kind/apiVersion: give every object both. */
static jv with_type(const struct kw_watch *w, jv obj)
{
	jv k = jv_object_get(jv_copy(obj), jv_string("kind"));

	if (jv_get_kind(k) != JV_KIND_STRING)
		obj = jv_object_set(obj, jv_string("kind"), jv_string(w->kind));
	jv_free(k);
	k = jv_object_get(jv_copy(obj), jv_string("apiVersion"));
	if (jv_get_kind(k) != JV_KIND_STRING)
		obj = jv_object_set(obj, jv_string("apiVersion"), jv_string(w->api_version));
	jv_free(k);
	return obj;
}

static void emit(struct kw_watch *w, const char *type, jv obj, const struct kw_text *text, struct kw_entry *e)
{
	if (w->quiet || !w->emit) {
		jv_free(obj);
		return;
	}
	w->emit(w->ctx, type, obj, text, e ? &e->memo : NULL);
}

/* What downstream gets for an object it knew and that is gone: a stub. */
static void emit_gone(struct kw_watch *w, const struct kw_entry *e, const char *rv)
{
	const char *key = kw_entry_key(e), *slash = strchr(key, '/');
	jv meta = jv_object();

	if (!slash)
		slash = key - 1;	/* cannot happen: keys always hold a '/' */
	meta = jv_object_set(meta, jv_string("name"), jv_string(slash + 1));
	if (slash > key)
		meta = jv_object_set(meta, jv_string("namespace"), jv_string_sized(key, (int)(slash - key)));
	if (*kw_entry_uid(e))
		meta = jv_object_set(meta, jv_string("uid"), jv_string(kw_entry_uid(e)));
	meta = jv_object_set(meta, jv_string("resourceVersion"), jv_string(rv && *rv ? rv : kw_entry_rv(e)));
	emit(w, "DELETED",
	     JV_OBJECT(jv_string("kind"), jv_string(w->kind), jv_string("apiVersion"), jv_string(w->api_version),
		       jv_string("metadata"), meta), NULL, NULL);
}

/* ---- applying what the server says ---------------------------------------- */

/* An object of the (re)listed state: emit the difference to what downstream knows.
 * (text: the object as it came, obj its identity alone; NULL: obj is whole) */
static void sync_item(struct kw_watch *w, jv obj, const struct kw_text *text)
{
	struct ident id;
	struct kw_entry *e;

	if (w->shard && !kop_shard_match(w->shard, obj)) {
		jv_free(obj);	/* not ours: the server ignored the selector (or the request asked for more) */
		w->shard_dropped += !w->narrowed;
		return;
	}
	obj = with_type(w, obj);
	ident_get(&id, obj);
	e = kw_map_get(&w->map, id.key.buf);
	if (!e) {
		e = map_put(&w->map, id.key.buf, id.uid_s, id.rv_s, w->gen);
		emit(w, "ADDED", obj, text, e);
	} else if (strcmp(kw_entry_uid(e), id.uid_s)) {
		emit_gone(w, e, id.rv_s);
		e = map_put(&w->map, id.key.buf, id.uid_s, id.rv_s, w->gen);
		emit(w, "ADDED", obj, text, e);
	} else if (strcmp(kw_entry_rv(e), id.rv_s)) {
		e = map_put(&w->map, id.key.buf, id.uid_s, id.rv_s, w->gen);
		emit(w, "MODIFIED", obj, text, e);
	} else {
		e->gen = w->gen;
		jv_free(obj);
	}
	ident_release(&id);
}

/* The (re)listed state is complete at rv: what was not seen is gone. */
static void sync_end(struct kw_watch *w, const char *rv)
{
	size_t i;

	for (i = 0; i < w->map.nslots; i++) {
		struct kw_entry **p = &w->map.slots[i];

		while (*p) {
			struct kw_entry *e = *p;

			if (e->gen == w->gen) {
				p = &e->next;
				continue;
			}
			emit_gone(w, e, rv);
			*p = e->next;
			free(e);
			w->map.count--;
		}
	}
	if (rv && *rv) {
		set_str(&w->rv, rv);
		set_str(&w->sync_rv, rv);
	}
	set_str(&w->cont, NULL);
	w->need_list = 0;
	w->in_init = 0;
	w->synced = 1;
	w->quiet = 0;
}

/* A change from a watch. The type downstream gets follows from the map. (text: as sync_item's) */
static void apply_event(struct kw_watch *w, const char *type, jv obj, const struct kw_text *text)
{
	struct ident id;
	struct kw_entry *e;

	obj = with_type(w, obj);
	ident_get(&id, obj);
	e = kw_map_get(&w->map, id.key.buf);
	if (w->shard && !kop_shard_match(w->shard, obj)) {
		jv_free(obj);	/* not ours: the server ignored the selector (or the request asked for
				   more); its resourceVersion still counts */
		w->shard_dropped += !w->narrowed;
	} else if (!strcmp(type, "DELETED")) {
		if (e && (!*id.uid_s || !strcmp(kw_entry_uid(e), id.uid_s))) {
			map_remove(&w->map, id.key.buf);
			emit(w, "DELETED", obj, text, NULL);
		} else {
			jv_free(obj);	/* downstream never knew it */
		}
	} else if (e && !strcmp(kw_entry_uid(e), id.uid_s) && !strcmp(kw_entry_rv(e), id.rv_s)) {
		jv_free(obj);		/* already told */
	} else if (e && strcmp(kw_entry_uid(e), id.uid_s)) {
		emit_gone(w, e, id.rv_s);
		e = map_put(&w->map, id.key.buf, id.uid_s, id.rv_s, w->gen);
		emit(w, "ADDED", obj, text, e);
	} else {
		const char *type_out = e ? "MODIFIED" : "ADDED";

		e = map_put(&w->map, id.key.buf, id.uid_s, id.rv_s, w->gen);
		emit(w, type_out, obj, text, e);
	}
	if (*id.rv_s && !w->in_init)
		set_str(&w->rv, id.rv_s);
	ident_release(&id);
}

static int is_initial_end(jv obj)
{
	jv v = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("metadata"), jv_string("annotations"),
						 jv_string("k8s.io/initial-events-end")));
	int yes = jv_get_kind(v) == JV_KIND_STRING && !strcmp(jv_string_value(v), "true");

	jv_free(v);
	return yes;
}

/* An ADDED, MODIFIED or DELETED (t, one of those literals) of obj (consumed; text: sync_item's). */
static void change(struct kw_watch *w, const char *t, jv obj, const struct kw_text *text)
{
	w->events++;
	if (!strcmp(t, "ADDED") && w->in_init)
		sync_item(w, obj, text);
	else
		apply_event(w, t, obj, text);
}

/* One watch event (consumed); -1 when it is no event. */
static int handle_event(struct kw_watch *w, jv ev)
{
	jv type, obj;
	const char *t;
	int rc = 0;

	if (jv_get_kind(ev) != JV_KIND_OBJECT) {
		jv_free(ev);
		return -1;
	}
	type = jv_object_get(jv_copy(ev), jv_string("type"));
	obj = jv_object_get(ev, jv_string("object"));
	if (jv_get_kind(type) != JV_KIND_STRING || jv_get_kind(obj) != JV_KIND_OBJECT) {
		jv_free(type);
		jv_free(obj);
		return -1;
	}
	t = jv_string_value(type);
	if (!strcmp(t, "ERROR")) {
		/* not counted in events: a stream of ERRORs is no healthy one */
		jv_free(w->stream_error);
		w->stream_error = obj;
		jv_free(type);
		return 0;
	}
	if (!strcmp(t, "BOOKMARK")) {
		w->events++;
		jv rvh;
		const char *rv = meta_str(obj, "resourceVersion", &rvh);

		if (w->in_init) {
			if (is_initial_end(obj))
				sync_end(w, rv);
		} else if (*rv) {
			set_str(&w->rv, rv);
		}
		jv_free(rvh);
		jv_free(obj);
	} else if (!strcmp(t, "ADDED") || !strcmp(t, "MODIFIED") || !strcmp(t, "DELETED")) {
		change(w, t, obj, NULL);
	} else {
		w->events++;	/* (an event still, of a type not known here) */
		jv_free(obj);
		rc = -1;
	}
	jv_free(type);
	return rc;
}

/*
 * The reader's take (w->pass_text): an ADDED, MODIFIED or DELETED whose
 * identity a scan reads is handled with its text, never parsed; anything
 * else (a BOOKMARK, an ERROR, a text the scan leaves) is parsed whole.
 */
static int take_line(void *ctx, const char *line, size_t len)
{
	static const char *const types[] = { "ADDED", "MODIFIED", "DELETED" };
	struct kw_watch *w = ctx;
	struct kop_json_event ev;
	struct kw_text text;
	const char *t = NULL;
	size_t i;

	if (!w->pass_text || kop_json_event(line, len, &ev) < 0)
		return 0;
	for (i = 0; i < 3; i++)
		if (strlen(types[i]) == ev.type_len && !memcmp(types[i], ev.type, ev.type_len))
			t = types[i];
	if (!t) {
		jv_free(ev.meta);
		return 0;
	}
	text = (struct kw_text){ ev.obj, ev.obj_len, ev.cut_b, ev.cut_e };
	change(w, t, ev.meta, &text);
	return 1;
}

/* ---- the public interface --------------------------------------------------- */

void kw_watch_init(struct kw_watch *w, const char *name, const char *path, const char *kind,
		   const char *api_version, const char *label_selector, const char *field_selector)
{
	memset(w, 0, sizeof(*w));
	w->name = kop_strdup(name);
	w->path = kop_strdup(path);
	w->kind = kop_strdup(kind);
	w->api_version = kop_strdup(api_version);
	w->label_selector = label_selector && *label_selector ? kop_strdup(label_selector) : NULL;
	w->field_selector = field_selector && *field_selector ? kop_strdup(field_selector) : NULL;
	w->watch_list = KW_WL_AUTO;
	w->streaming = 1;
	w->need_list = 1;
	kw_map_init(&w->map);
	kop_jsonl_init(&w->reader, 0);
	w->reader.fast = 1;
	w->reader.take = take_line;
	w->reader.take_ctx = w;
	w->stream_error = jv_invalid();
}

int kw_watch_list_parse(const char *s, enum kw_watch_list *mode)
{
	if (!strcmp(s, "auto"))
		*mode = KW_WL_AUTO;
	else if (!strcmp(s, "always"))
		*mode = KW_WL_ALWAYS;
	else if (!strcmp(s, "never"))
		*mode = KW_WL_NEVER;
	else
		return -1;
	return 0;
}

int kw_watch_set_shard(struct kw_watch *w, const char *selector, char *err)
{
	struct kop_shard_sel *sel = kop_malloc(sizeof(*sel));

	if (kop_shard_parse(selector, sel, err) < 0) {
		free(sel);
		return -1;
	}
	if (w->shard) {
		kop_shard_free(w->shard);
		free(w->shard);
	}
	w->shard = sel;
	return 0;
}

void kw_watch_set_list(struct kw_watch *w, enum kw_watch_list mode)
{
	w->watch_list = mode;
	w->streaming = mode != KW_WL_NEVER;
}

/* w's refusal buffer, allocated when first needed. */
static char *err_buf(struct kw_watch *w)
{
	if (!w->err)
		w->err = kop_calloc(1, KOP_ERRLEN);
	return w->err;
}

const char *kw_watch_error(const struct kw_watch *w)
{
	return w->err ? w->err : "";
}

void kw_watch_release(struct kw_watch *w)
{
	free(w->name);
	free(w->err);
	free(w->path);
	free(w->kind);
	free(w->api_version);
	free(w->label_selector);
	free(w->field_selector);
	if (w->shard) {
		kop_shard_free(w->shard);
		free(w->shard);
	}
	free(w->rv);
	free(w->cont);
	free(w->sync_rv);
	kw_map_release(&w->map);
	kop_jsonl_release(&w->reader);
	jv_free(w->stream_error);
	memset(w, 0, sizeof(*w));
	w->stream_error = jv_invalid();
}

static void add_param(struct kop_buf *b, const char *name, const char *value)
{
	char *e = curl_easy_escape(NULL, value, 0);

	kop_buf_addf(b, "&%s=%s", name, e ? e : "");
	curl_free(e);
}

char *kw_watch_request(struct kw_watch *w)
{
	struct kop_buf b = KOP_BUF_INIT;

	kop_jsonl_release(&w->reader);
	kop_jsonl_init(&w->reader, 0);
	w->reader.fast = 1;
	w->reader.take = take_line;
	w->reader.take_ctx = w;
	jv_free(w->stream_error);
	w->stream_error = jv_invalid();
	w->events = 0;
	w->err_code = 0;
	free(w->err);
	w->err = NULL;
	w->stream_failed = 0;
	w->narrowed = 0;
	w->in_init = 0;
	kop_buf_adds(&b, w->path);
	if (w->need_list && w->streaming) {
		/* A consistent read (no resourceVersion): the diff needs the current state. */
		w->req = KW_REQ_STREAM;
		w->in_init = 1;
		w->gen++;
		kop_buf_adds(&b, "?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
			     "&allowWatchBookmarks=true");
	} else if (w->need_list) {
		w->req = KW_REQ_LIST;
		if (!w->cont)
			w->gen++;
		kop_buf_addf(&b, "?limit=%d", KW_PAGE_SIZE);
		if (w->cont)
			add_param(&b, "continue", w->cont);
	} else {
		w->req = KW_REQ_WATCH;
		kop_buf_adds(&b, "?watch=true&allowWatchBookmarks=true");
		add_param(&b, "resourceVersion", w->rv ? w->rv : "");
		if (w->watch_timeout_s)
			kop_buf_addf(&b, "&timeoutSeconds=%u",
				     w->watch_timeout_s + (unsigned)(random() % w->watch_timeout_s));
	}
	if (w->label_selector)
		add_param(&b, "labelSelector", w->label_selector);
	if (w->field_selector)
		add_param(&b, "fieldSelector", w->field_selector);
	if (w->shard)
		add_param(&b, "shardSelector", w->shard->string);
	return kop_buf_detach(&b, NULL);
}

const char *kw_watch_verb(const struct kw_watch *w)
{
	return w->req == KW_REQ_LIST ? "list" : "watch";
}

int kw_watch_feed(struct kw_watch *w, const char *data, size_t len, char *err)
{
	char lerr[KOP_ERRLEN];
	int rc = 0;

	kop_jsonl_feed(&w->reader, data, len);
	for (;;) {
		jv v;
		size_t line;
		int n = kop_jsonl_next(&w->reader, &v, &line, lerr);

		if (n == 0)
			break;
		if (n < 0 || handle_event(w, v) < 0) {
			if (n > 0)
				kop_error(lerr, "line %zu: not a watch event", line);
			w->bad_lines++;
			rc = kop_error(err, "bad event from '%s': %s", w->name, lerr);
		}
	}
	kop_jsonl_trim(&w->reader);	/* a thousand quiet watches keep no burst each */
	return rc;
}

int kw_watch_list(struct kw_watch *w, jv list, char *err)
{
	jv items, rvh, conth;
	const char *rv, *cont;
	int i, n;

	if (jv_get_kind(list) != JV_KIND_OBJECT) {
		jv_free(list);
		return kop_error(err, "unable to list '%s': the answer is no JSON object", w->name);
	}
	items = jv_object_get(jv_copy(list), jv_string("items"));
	if (jv_get_kind(items) == JV_KIND_NULL) {
		jv_free(items);
		items = jv_array();
	}
	if (jv_get_kind(items) != JV_KIND_ARRAY) {
		jv_free(items);
		jv_free(list);
		return kop_error(err, "unable to list '%s': the answer has no items", w->name);
	}
	n = jv_array_length(jv_copy(items));
	for (i = 0; i < n; i++) {
		jv it = jv_array_get(jv_copy(items), i);

		if (jv_get_kind(it) == JV_KIND_OBJECT)
			sync_item(w, it, NULL);
		else
			jv_free(it);
	}
	jv_free(items);
	if (w->shard) {
		jv sel = jv_getpath(jv_copy(list), JV_ARRAY(jv_string("metadata"), jv_string("shardInfo"),
							   jv_string("selector")));

		w->shard_echoed = jv_get_kind(sel) == JV_KIND_STRING && !strcmp(jv_string_value(sel), w->shard->string);
		jv_free(sel);
	}
	rv = meta_str(list, "resourceVersion", &rvh);
	cont = meta_str(list, "continue", &conth);
	if (*cont)
		set_str(&w->cont, cont);
	else
		sync_end(w, rv);
	jv_free(rvh);
	jv_free(conth);
	jv_free(list);
	return 0;
}

static void set_err(struct kw_watch *w, long code, jv status)
{
	jv msg = jv_invalid();

	w->err_code = code;
	if (jv_get_kind(status) == JV_KIND_OBJECT)
		msg = jv_object_get(jv_copy(status), jv_string("message"));
	if (jv_is_valid(msg) && jv_get_kind(msg) == JV_KIND_STRING && jv_string_length_bytes(jv_copy(msg)) > 0)
		kop_error(err_buf(w), "%s", jv_string_value(msg));
	else if (code == 200)
		kop_error(err_buf(w), "the stream ended early");
	else if (code)
		kop_error(err_buf(w), "HTTP %ld", code);
	else
		kop_error(err_buf(w), "no answer");
	jv_free(msg);
	jv_free(status);
}

/* Whether status (borrowed) has a cause of this reason (details.causes[].reason). */
static int has_cause(jv status, const char *reason)
{
	jv causes = jv_getpath(jv_copy(status), JV_ARRAY(jv_string("details"), jv_string("causes")));
	int found = 0;

	if (jv_get_kind(causes) == JV_KIND_ARRAY) {
		jv_array_foreach(causes, i, c) {
			const char *r = kop_json_cstr(c, "reason");

			if (r && !strcmp(r, reason))
				found = 1;
			jv_free(c);
		}
	}
	jv_free(causes);
	return found;
}

enum kw_next kw_watch_done(struct kw_watch *w, long code, int transport_ok, jv status, int64_t elapsed_ms)
{
	enum kw_req req = w->req;
	int too_large;

	w->req = KW_REQ_NONE;
	w->expired = 0;
	w->stream_failed = 0;
	if (jv_is_valid(w->stream_error)) {
		jv c = jv_object_get(jv_copy(w->stream_error), jv_string("code"));

		jv_free(status);
		status = w->stream_error;
		w->stream_error = jv_invalid();
		code = jv_get_kind(c) == JV_KIND_NUMBER ? (long)jv_number_value(c) : 500;
		jv_free(c);
		transport_ok = 1;
	}
	if (code != 200 || !transport_ok)
		set_err(w, code, jv_copy(status));
	too_large = jv_get_kind(status) == JV_KIND_OBJECT && has_cause(status, "ResourceVersionTooLarge");
	jv_free(status);
	if (req == KW_REQ_STREAM && w->need_list && code != 0 && code != 401 && code != 403) {
		/*
		 * The server answered, but no initial state came of it (a
		 * refusal, an ERROR event, a stream that ended, was cut or
		 * stalled): see watch.h. What a partial stream emitted is
		 * reconciled by the next (re)list, as after a 410.
		 */
		if (code == 200 && transport_ok) {
			w->err_code = 200;
			kop_error(err_buf(w), "the stream ended before the initial state was complete");
		}
		w->stream_failed = 1;
		if (w->watch_list == KW_WL_ALWAYS)
			return KW_NEXT_BACKOFF;
		w->streaming = 0;
		set_str(&w->cont, NULL);
		return KW_NEXT_NOW;
	}
	if (code == 200) {
		if (!transport_ok)
			return KW_NEXT_BACKOFF;		/* cut: resume (or retry the page / the stream) */
		if (req == KW_REQ_LIST || (!w->need_list && (w->events > 0 || elapsed_ms >= 1000)))
			return KW_NEXT_NOW;
		/* a watch that ended at once: do not spin */
		kop_error(err_buf(w), "the watch ended at once");
		return KW_NEXT_BACKOFF;
	}
	switch (code) {
	case 0:
		return KW_NEXT_BACKOFF;
	case 410:
		/* Expired: the resourceVersion or the continue token. Read the state again. */
		set_str(&w->cont, NULL);
		w->need_list = 1;
		w->expired = 1;
		return KW_NEXT_BACKOFF;
	case 504:
		/* A resourceVersion the server does not have yet (its history went
		 * back: a restore, another server) is never reached by waiting:
		 * read the state again, as client-go's reflector does. */
		if (too_large) {
			set_str(&w->cont, NULL);
			w->need_list = 1;
			w->expired = 1;
		}
		return KW_NEXT_BACKOFF;
	case 401:
		return KW_NEXT_AUTH;
	case 403:
		return KW_NEXT_FORBIDDEN;
	case 404:
	case 408:
	case 409:
	case 429:
		return KW_NEXT_BACKOFF;
	}
	return code >= 500 ? KW_NEXT_BACKOFF : KW_NEXT_FATAL;
}

void kw_watch_abort(struct kw_watch *w)
{
	w->req = KW_REQ_NONE;
	w->in_init = 0;
	jv_free(w->stream_error);
	w->stream_error = jv_invalid();
}

void kw_watch_forget(struct kw_watch *w)
{
	size_t i;

	for (i = 0; i < w->map.nslots; i++) {
		struct kw_entry *e = w->map.slots[i];

		while (e) {
			struct kw_entry *next = e->next;

			emit_gone(w, e, NULL);
			free(e);
			e = next;
		}
		w->map.slots[i] = NULL;
	}
	w->map.count = 0;
}

/* Whether the object of map entry e is in sel (by its namespace, the key's head, or its uid). */
static int entry_selected(const struct kop_shard_sel *sel, const struct kw_entry *e)
{
	const char *key = kw_entry_key(e), *slash;

	if (sel->key == KOP_SHARD_UID)
		return kop_shard_match_value(sel, kw_entry_uid(e), e->ulen);
	slash = strchr(key, '/');
	return kop_shard_match_value(sel, key, slash ? (size_t)(slash - key) : strlen(key));
}

enum kop_shard_cut kw_watch_narrow(struct kw_watch *w, const struct kop_shard_sel *drop)
{
	enum kop_shard_cut cut;
	size_t i;

	if (!w->shard || (cut = kop_shard_remove(w->shard, drop)) == KOP_SHARD_SAME)
		return KOP_SHARD_SAME;
	/* what is outside is forgotten without a word: downstream was told of the change of ranges */
	for (i = 0; i < w->map.nslots; i++) {
		struct kw_entry **p = &w->map.slots[i];

		while (*p) {
			struct kw_entry *e = *p;

			if (entry_selected(w->shard, e)) {
				p = &e->next;
				continue;
			}
			*p = e->next;
			free(e);
			w->map.count--;
		}
	}
	w->narrowed = cut == KOP_SHARD_LESS;
	return cut;
}
