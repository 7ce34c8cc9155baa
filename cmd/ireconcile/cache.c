/*
 * The render cache: a render program's answer kept per primary (compressed),
 * with the digests of its children, so that a reconcile whose render input
 * did not change neither runs it nor compares its children again; answers
 * made ahead of the first pass, while the lists come in.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "ireconcile.h"
#include "banned.h"

/* The part of a primary (consumed) that its render program gets. (render_parent_digest cuts the
 * same members from its text.) */
jv render_parent(jv parent)
{
	jv meta = jv_object_get(jv_copy(parent), kop_json_key("metadata"));

	if (jv_get_kind(meta) == JV_KIND_OBJECT) {
		meta = jv_object_delete(meta, kop_json_key("resourceVersion"));
		meta = jv_object_delete(meta, kop_json_key("finalizers"));
		meta = jv_object_delete(meta, kop_json_key("managedFields"));
		parent = jv_object_set(parent, kop_json_key("metadata"), meta);
	} else {
		jv_free(meta);
	}
	if (jv_get_kind(parent) == JV_KIND_OBJECT)
		parent = jv_object_delete(parent, kop_json_key("status"));
	return parent;
}

/*
 * d, the key of render_parent(obj) for the render cache (p->pdig), of a primary's
 * object as it arrived (obj borrowed, or jv_invalid(): read from the text if
 * needed; text, tlen bytes, its JSON as it came):
 * the digest of its text without the members render_parent drops (its
 * events are mostly our statuses landing, and a walk of an IoTService's
 * 13 KB spec was a quarter of such an event's cost), as a child's is.
 */
void render_parent_digest(jv obj, const char *text, size_t tlen, unsigned char d[KOP_JSON_DIGEST_LEN])
{
	static jv dropped;	/* (render_parent's, in step with it) */
	static struct kop_buf cut = KOP_BUF_INIT;

	if (!jv_is_valid(dropped))
		dropped = JV_ARRAY(JV_ARRAY(jv_string("metadata"), jv_string("resourceVersion")),
				   JV_ARRAY(jv_string("metadata"), jv_string("finalizers")),
				   JV_ARRAY(jv_string("metadata"), jv_string("managedFields")), JV_ARRAY(jv_string("status")));
	kop_json_digest_cut(text, tlen, obj, dropped, &cut, d);
}

/* The render answer (consumed) with each desired object projected by its
 * kind's `project`; jv_invalid() when no object changed. */
static jv render_view(jv out)
{
	jv des = jv_getpath(jv_copy(out), JV_ARRAY(jv_string("desired"))), view = jv_array();
	int changed = 0;

	if (jv_get_kind(des) != JV_KIND_ARRAY) {
		jv_free(des);
		jv_free(view);
		jv_free(out);
		return jv_invalid();
	}
	jv_array_foreach(des, i, c) {
		jv pc = project(jv_copy(c), 0);

		if (!jv_identical(jv_copy(pc), jv_copy(c)))
			changed = 1;
		jv_free(c);
		view = jv_array_append(view, pc);
	}
	jv_free(des);
	if (!changed) {
		jv_free(view);
		jv_free(out);
		return jv_invalid();
	}
	return jv_object_set(out, kop_json_key("desired"), view);
}

/* The render program's input for p but its .parent: .related and .settings. */
jv render_input(void)
{
	jv in = jv_object_set(jv_object(), kop_json_key("related"), build_related());

	return jv_object_set(in, kop_json_key("settings"), jv_copy(E.prog.settings));
}

/* in (consumed) with p's .parent: the primary whole (sync's .parent may lack its spec, p->obj->vtext). */
jv render_input_parent(struct prim *p, jv in)
{
	return jv_object_set(in, kop_json_key("parent"), render_parent(parse_obj(p->obj)));
}

/* The digests of the objects of out's .desired (borrowed) in *dig, which of
 * them have a status in *stat (both allocated, NULL when none): their number. */
static int desired_digests(jv out, unsigned char (**dig)[KOP_JSON_DIGEST_LEN], unsigned char **stat)
{
	jv des = jv_getpath(jv_copy(out), JV_ARRAY(jv_string("desired")));
	int n = jv_get_kind(des) == JV_KIND_ARRAY ? jv_array_length(jv_copy(des)) : 0;

	*dig = NULL;
	*stat = NULL;
	if (n > 0) {
		*dig = kop_calloc((size_t)n, sizeof(**dig));
		*stat = kop_calloc((size_t)n, 1);
		jv_array_foreach(des, i, c) {
			kop_program_object_digest(c, (*dig)[i]);
			(*stat)[i] = jv_get_kind(c) == JV_KIND_OBJECT && jv_object_has(jv_copy(c), kop_json_key("status"));
			jv_free(c);
		}
	}
	jv_free(des);
	return n;
}

/* Runs the render program on in (consumed): its answer, directives resolved,
 * the time spent added to *us_jq and *us_fn; jv_invalid() with err. */
static jv render_run(jv in, int64_t *us_jq, int64_t *us_fn, char *err)
{
	int64_t t0 = kop_mono_us(), t1;
	jv out;

	if (kop_jq_run1(E.prog.render, in, &out, err) < 0)
		return jv_invalid();
	t1 = kop_mono_us();
	*us_jq += t1 - t0;
	if (kop_fn_resolve(out, &out, err) < 0) {
		if (jv_is_valid(out))
			jv_free(out);
		return jv_invalid();
	}
	*us_fn += kop_mono_us() - t1;
	return out;
}

/*
 * The render program's answer on in (consumed), checked, in m: the answer
 * (directives resolved), what sync sees of it (m->view, jv_invalid() when
 * that is the answer itself), the digests of its desired objects. What this
 * process (render) and the render worker (worker.c) make alike: 0, or -1
 * with err (m then holds nothing).
 */
int render_make(jv in, struct rmade *m, int64_t *us_jq, int64_t *us_fn, char *err)
{
	m->out = render_run(in, us_jq, us_fn, err);
	m->view = jv_invalid();
	m->n = 0;
	m->dig = NULL;
	m->stat = NULL;
	if (!jv_is_valid(m->out))
		return -1;
	if (jv_get_kind(m->out) == JV_KIND_OBJECT) {
		jv des = jv_object_get(jv_copy(m->out), kop_json_key("desired"));
		int bad = check_ignored(des, "rendered", err);

		jv_free(des);
		if (bad) {
			jv_free(m->out);
			m->out = jv_invalid();
			return -1;
		}
	}
	m->n = desired_digests(m->out, &m->dig, &m->stat);
	m->view = render_view(jv_copy(m->out));
	return 0;
}

/* What p knew of its last answer forgotten: a new one is made, or taken (render_take). */
static void render_forget(struct prim *p)
{
	p->render_valid = 0;
	free(p->rendered);
	p->rendered = NULL;
	free(p->rview);
	p->rview = NULL;
	free(p->rdig);
	p->rdig = NULL;
	free(p->rstat);
	p->rstat = NULL;
	free(p->radig);
	p->radig = NULL;
	p->nrdig = 0;
}

/* The digests of a new answer, made under render key d, p's (those of m taken). */
static void render_adopt(struct prim *p, const unsigned char d[KOP_JSON_DIGEST_LEN], struct rmade *m)
{
	p->nrdig = m->n;
	p->rdig = m->dig;
	p->rstat = m->stat;
	m->dig = NULL;
	m->stat = NULL;
	if (p->nrdig) {
		int i;

		p->radig = kop_calloc((size_t)p->nrdig, sizeof(*p->radig));
		for (i = 0; i < p->nrdig; i++)
			kop_program_applied_digest(p->rdig[i], obj_uid(p->obj), p->radig[i]);
	}
	memcpy(p->render_key, d, KOP_JSON_DIGEST_LEN);
}

/* Keeps an answer's packed text (len bytes: render_store) in p->rendered, compressed: 0 if it could not be. */
static int render_store_text(struct prim *p, const char *text, size_t len)
{
	free(p->rendered);
	p->rendered = NULL;
	p->rendered_len = len;
	/* (answers differ in little but names: with the first as dictionary, an
	 * IoT instance's takes ~0.6 KB compressed instead of ~8 KB) */
	p->rendered_zlen = compress_text(text, len, &p->rendered, dict_made(&E.render_dict, text, len));
	return p->rendered_zlen != 0;
}

/* Keeps what sync sees of an answer (text, len bytes, malloc'd: consumed) in p->rview, compressed against
 * the first one's (an IoT instance's: ~4.5 KB as compact JSON, ~0.3 KB so), for as long as p is. */
static void view_keep(struct prim *p, char *text, size_t len)
{
	p->rview_len = len;
	p->rview = keep_text(text, len, &E.rview_dict, &p->rview_zlen);
}

/* The text an answer (out, borrowed) is kept as: compact JSON, its base64 strings packed (render_store). */
char *render_packed(jv out, size_t *len)
{
	return kop_json_dump_len(kop_fn_pack(jv_copy(out)), len);
}

/* Keeps the render answer out (borrowed) in p->rendered, compressed (as jv the
 * desired children of an IoT instance take ~190 KB, as compact JSON ~34 KB,
 * compressed ~0.6 KB): 0 if it could not be. Its base64 strings are kept as
 * the directives that make them (kop_fn_pack): an IoT instance's Secret is
 * 17 KB of base64 of text, with which its answer compresses to ~10 KB; the
 * text compresses to little (the first answer, the dictionary, holds the same
 * text but for names). */
static int render_store(struct prim *p, jv out)
{
	size_t len;
	char *text = render_packed(out, &len);
	int ok = render_store_text(p, text, len);

	free(text);
	return ok;
}

/* The value of the kept answer's text (packed by render_store) as it was: jv_invalid() if it is not one. */
static jv kept_unpack(jv v)
{
	char err[KOP_ERRLEN];
	jv out;

	if (!jv_is_valid(v)) {
		jv_free(v);	/* (its message, if any) */
		return jv_invalid();
	}
	if (kop_fn_resolve(v, &out, err) < 0)
		return jv_invalid();
	return out;
}

/* The kept answer of p (p->rendered), parsed and unpacked. */
static jv kept_answer(struct prim *p)
{
	return kept_unpack(expand_parse(p->rendered, p->rendered_zlen, p->rendered_len, &E.render_dict));
}

/* The render key of p's input in d: the parent's part (digested as it arrived) and the rest (in,
 * borrowed); whether p's kept answer was made from that input. */
static int render_current(const struct prim *p, jv in, unsigned char d[KOP_JSON_DIGEST_LEN])
{
	unsigned char both[2 * KOP_JSON_DIGEST_LEN];

	memcpy(both, p->pdig, KOP_JSON_DIGEST_LEN);
	kop_json_digest(in, both + KOP_JSON_DIGEST_LEN);
	kop_sha256(both, sizeof(both), d);
	return p->render_valid && !memcmp(d, p->render_key, KOP_JSON_DIGEST_LEN);
}

/*
 * The render program's answer for p (docs/writing-programs.md, render),
 * directives resolved, as sync sees it (its desired objects projected):
 * computed again only when its input (the primary without status,
 * resourceVersion and finalizers, .related, .settings) changed since the
 * last reconcile of p. What sync sees of it stays in p->rview; the answer
 * as computed, in ctx->rfull for this reconcile and in p->rendered for
 * later ones while they may need it (render_keep). *us_jq and *us_fn
 * receive the time spent (microseconds), *cached whether the stored answer
 * was used. jv_invalid() with err. An answer the render worker is making
 * for p is waited for (worker.c).
 */
jv render(struct prim *p, struct rctx *ctx, int64_t *us_jq, int64_t *us_fn, int *cached, char *err)
{
	unsigned char d[KOP_JSON_DIGEST_LEN];
	struct rmade m;
	size_t len;
	char *text;
	jv in;

	*us_jq = *us_fn = 0;
	*cached = 0;
	if (p->ahead == AHEAD_SENT)
		worker_wait(p);	/* (if it renders p now; else p is rendered here, its answer then dropped) */
	p->ahead = 0;	/* (rendered here, if at all: the worker is not given it) */
	in = render_input();
	if (render_current(p, in, d)) {
		jv out = p->rview ? kept_parse(p->rview, p->rview_zlen, p->rview_len, &E.rview_dict) : kept_answer(p);

		if (jv_is_valid(out)) {
			jv_free(in);
			*cached = 1;
			if (!p->rview)
				ctx->rfull = jv_copy(out);
			return out;
		}
		jv_free(out);	/* cannot happen: computed again below */
	}
	render_forget(p);
	if (render_make(render_input_parent(p, in), &m, us_jq, us_fn, err) < 0)
		return jv_invalid();
	render_adopt(p, d, &m);
	ctx->rfull = jv_copy(m.out);
	if (!jv_is_valid(m.view)) {
		/* Sync sees the answer as computed: that is what is kept. */
		p->render_valid = render_store(p, m.out);
		return m.out;
	}
	text = kop_json_dump_len(jv_copy(m.view), &len);
	view_keep(p, text, len);
	p->render_valid = 1;
	jv_free(m.out);
	return m.view;
}

/*
 * An answer the render worker made for p under render key d (m: its
 * digests, taken; full: the answer's packed text, len bytes; view: what
 * sync sees of it, vlen bytes, NULL when the answer itself), kept as render
 * and render_keep would have kept it, when d is still p's render key (its
 * input unchanged since it was sent): 1 then; 0 when p or its input has
 * changed; -1 when it could not be kept (the first pass renders it).
 */
int render_take(struct prim *p, const unsigned char d[KOP_JSON_DIGEST_LEN], struct rmade *m, const char *full,
		size_t len, const char *view, size_t vlen)
{
	unsigned char now[KOP_JSON_DIGEST_LEN];
	jv in;
	int current;

	if (!p->obj || p->obj->deleting)
		return 0;
	in = render_input();
	current = render_current(p, in, now);
	jv_free(in);
	if (current || memcmp(now, d, KOP_JSON_DIGEST_LEN))
		return 0;	/* (rendered here since, or its input changed) */
	render_forget(p);
	render_adopt(p, d, m);
	if (!view) {
		p->render_valid = render_store_text(p, full, len);
		return p->render_valid ? 1 : -1;
	}
	view_keep(p, kop_strndup(view, vlen), vlen);
	p->render_valid = 1;
	(void)render_store_text(p, full, len);	/* (if it cannot be, computed again when needed: rendered_full) */
	return 1;
}

/* Whether out (borrowed) has the desired objects of p's last answer (p->rdig). */
static int same_desired(struct prim *p, jv out)
{
	unsigned char (*dig)[KOP_JSON_DIGEST_LEN], *stat;
	int n = desired_digests(out, &dig, &stat);
	int same = n == p->nrdig && (!n || !memcmp(dig, p->rdig, (size_t)n * sizeof(*dig)));

	free(dig);
	free(stat);
	return same;
}

/*
 * The render answer as computed (borrowed from ctx): parsed once per
 * reconcile, when needed; computed again from the same input (the render
 * key has not changed, or render() would have) when not kept. When it
 * cannot be had (the program fails, or answers otherwise, on the same
 * input: it reads something else), jv_invalid() and ctx->rfail: the
 * children that need it are left as they are, and the reconcile is tried
 * again, rendering anew (reconcile_parsed).
 */
jv rendered_full(struct prim *p, struct rctx *ctx)
{
	char err[KOP_ERRLEN] = "";

	if (jv_is_valid(ctx->rfull) || !p->render_valid || ctx->rfail)
		return ctx->rfull;
	if (p->rendered) {
		ctx->rfull = kept_answer(p);
		return ctx->rfull;
	}
	ctx->rfull = render_run(render_input_parent(p, render_input()), &ctx->rerender_jq, &ctx->rerender_fn, err);
	if (!jv_is_valid(ctx->rfull)) {
		ctx->rfail = 1;
		snprintf(ctx->rfail_msg, sizeof(ctx->rfail_msg), "render program failed on an input it rendered before: %s",
			 err);
	} else if (!same_desired(p, ctx->rfull)) {
		jv_free(ctx->rfull);
		ctx->rfull = jv_invalid();
		ctx->rfail = 1;
		snprintf(ctx->rfail_msg, sizeof(ctx->rfail_msg), "%s",
			 "render program answered otherwise on an input it rendered before (does it read more than its input?)");
	}
	return ctx->rfull;
}

/*
 * Object i of the render answer's .desired (caller owns it), as
 * jv_getpath(rendered_full(), ["desired", i]) gives it: from the kept
 * answer, only that object is parsed (its text found by a scan), since a
 * reconcile most often needs one or two of the twenty (a child changed, an
 * apply on its way), and parsing them all, each time, was some 6% of
 * ireconcile's time while instances converge. Otherwise rendered_full()'s.
 */
jv rendered_object(struct prim *p, struct rctx *ctx, int i)
{
	if (!jv_is_valid(ctx->rfull) && p->render_valid && !ctx->rfail && p->rendered && i >= 0 && i < p->nrdig) {
		if (ctx->nrel < 0 && !ctx->rtext &&
		    (ctx->rtext = expand_text(p->rendered, p->rendered_zlen, p->rendered_len, &E.render_dict))) {
			struct kop_json_span d = { NULL, 0 };
			jv paths = JV_ARRAY(JV_ARRAY(jv_string("desired")));

			ctx->rel = kop_calloc((size_t)p->nrdig, sizeof(*ctx->rel));
			if (kop_json_spans(ctx->rtext, p->rendered_len, paths, &d) == 0 && d.b &&
			    kop_json_elements(d.b, d.n, ctx->rel, (size_t)p->nrdig) == p->nrdig)
				ctx->nrel = p->nrdig;
			jv_free(paths);
		}
		if (ctx->nrel == p->nrdig) {
			/* (only packed strings are directives in the kept text: an object
			 * whose text names no "$fn" has nothing to unpack, and is not walked) */
			jv o = kop_json_read(ctx->rel[i].b, ctx->rel[i].n);

			if (memmem(ctx->rel[i].b, ctx->rel[i].n, "\"$fn\"", 5))
				o = kept_unpack(o);

			if (jv_get_kind(o) == JV_KIND_OBJECT)
				return o;
			jv_free(o);
		}
	}
	return jv_getpath(jv_copy(rendered_full(p, ctx)), JV_ARRAY(jv_string("desired"), jv_number(i)));
}

/*
 * After a reconcile of p: its render answer as computed is kept (stored if
 * it was computed now) while a later reconcile may read it whole (a child
 * not yet held by its live object, an apply on its way, one sync changed),
 * and dropped once every rendered child is held by its live object (held):
 * then the comparisons are remembered (struct obj's match) and sync needs
 * only p->rview. Most instances are at rest: this is most of the memory a
 * render took.
 */
void render_keep(struct prim *p, struct rctx *ctx, int held)
{
	if (!p->render_valid || !p->rview)
		return;		/* without a view of its own, p->rendered is what sync sees */
	if (held) {
		free(p->rendered);
		p->rendered = NULL;
	} else if (!p->rendered && jv_is_valid(ctx->rfull)) {
		render_store(p, ctx->rfull);	/* if it cannot be, computed again when needed */
	}
}

/*
 * Whether an apply written for the live child o is on its way still: sent,
 * not failed, not timed out, and the live object does not hold it yet (a
 * write of someone else's, a controller's status, may come first). One the
 * live object holds is no longer in flight, its comparison remembered for
 * apply_children. The live object an apply of that object was answered with
 * (its resourceVersion, from the apply's result: feedback.c) holds it
 * without a comparison: it is what the server made of it, admission's
 * changes included, and the first reconcile after a child's create or
 * update most often meets it; so does one changed since in its status alone
 * (struct obj's sdig_rv), unless what was sent has a status.
 */
static int apply_pending(struct prim *p, struct rctx *ctx, struct obj *o, int64_t now)
{
	char *fkey = join2("apply", o->key);
	struct flight *f = kop_hmap_get(&E.flights, fkey);
	int pending = 0;
	jv sent;

	if (!f || !f->has_obj || !flight_alive(f, now))
		goto out;
	if (f->answer_rv && (!strcmp(f->answer_rv, obj_rv(o)) ||
			     (!f->has_status && o->sdig_rv && o->sdig_rv == rv_number(f->answer_rv)))) {
		/* (an apply that changed nothing is answered with the object as it was;
		 * a controller may have written its status since, as ksim's and
		 * kube-controller-manager's do at once: 5,000 comparisons at N = 1,000) */
		match_set(o, f->memo);
		flight_forget(fkey);
		goto out;
	}
	if (!strcmp(f->live_rv, obj_rv(o))) {
		pending = 1;	/* not changed since */
		goto out;
	}
	if (match_holds(o, f->memo)) {
		flight_forget(fkey);
		goto out;
	}
	if (f->rindex < 0) {
		sent = expand_parse(f->ztext, f->zlen, f->len, NULL);
	} else if (p->render_valid && !memcmp(f->rkey, p->render_key, sizeof(f->rkey))) {
		sent = rendered_object(p, ctx, f->rindex);
		if (jv_get_kind(sent) == JV_KIND_OBJECT)	/* as apply_children stamped it */
			sent = kop_program_stamp_applied(kop_program_stamp(&E.prog, o->kind->mapping, sent, ctx->parent),
							 f->memo);
	} else {
		pending = 1;	/* rendered anew since: this reconcile decides again */
		goto out;
	}
	if (jv_get_kind(sent) != JV_KIND_OBJECT) {
		jv_free(sent);	/* ctx->rfail: unknown, so not landed */
		pending = ctx->rfail;
		goto out;
	}
	if (live_holds(ctx, o, sent)) {
		match_set(o, f->memo);
		flight_forget(fkey);
	} else {
		pending = 1;
	}
	jv_free(sent);
out:
	free(fkey);
	return pending;
}

/* .pending: the live children with an apply on its way, keyed as in .children. */
jv build_pending(struct prim *p, struct rctx *ctx, int64_t now)
{
	jv r = jv_object();
	struct obj *o;

	if (!E.flights.len)
		return r;
	for (o = p->children; o; o = o->next) {
		if (o->kind->role != KOP_ROLE_CHILD || !apply_pending(p, ctx, o, now))
			continue;
		r = jv_setpath(r, JV_ARRAY(jv_string(o->kind->key), child_slot(p, o)), jv_true());
	}
	return r;
}

/*
 * Render answers made ahead of the first pass. While the lists come in,
 * ireconcile is busy reading them, or waits for them (the API server sends
 * them slower than they are read); a restarted operator's first pass then
 * renders every primary. A primary seen before the first pass is noted
 * (render_ahead); the render worker is given the notes one by one
 * (worker.c), and while no input waits, this process renders the next one
 * too (prerender). An answer is kept whole, as a reconcile keeps it until
 * its children hold it: the first pass finds it under its key and reads it
 * back. One whose input changes before (its spec, a related object listed
 * later) is made again then: its key says so.
 */
void render_ahead(struct prim *p)
{
	if (E.synced || !E.prog.render || p->ahead)
		return;
	p->ahead = AHEAD_NOTED;
	if (E.nahead == E.ahead_cap) {
		E.ahead_cap = E.ahead_cap ? 2 * E.ahead_cap : 64;
		E.ahead = kop_realloc(E.ahead, E.ahead_cap * sizeof(*E.ahead));
	}
	E.ahead[E.nahead++] = kop_strdup(p->key);
}

/* Every primary seen noted again: something all their answers read (a related object) changed. */
void render_ahead_all(void)
{
	size_t it = 0;
	void *v;

	if (E.synced || !E.prog.render)
		return;
	while (kop_hmap_next(&E.prims, &it, NULL, &v))
		if (((struct prim *)v)->obj)
			render_ahead(v);
}

/* The notes dropped (the primaries sent to the worker stay so until its answer). */
void ahead_free(void)
{
	while (E.nahead) {
		struct prim *p = prim_get(E.ahead[--E.nahead], 0);

		if (p && p->ahead == AHEAD_NOTED)
			p->ahead = 0;
		free(E.ahead[E.nahead]);
	}
	free(E.ahead);
	E.ahead = NULL;
	E.ahead_cap = 0;
}

/* The first pass is on: the notes are the render worker's while it works
 * (the first pass renders those it meets first itself); else dropped. */
void ahead_drop(void)
{
	if (worker_fd() < 0)
		ahead_free();
}

/*
 * Called as the first pass begins (the initial state in, after ahead_drop):
 * the queue, which the lists filled in the order they came, put in the
 * order in which the render worker makes the answers, so that the pass
 * finds each made rather than make it here. First those neither noted nor
 * sent (rendered already, or to be rendered in the pass: a render the
 * worker failed or was not given), while the worker goes on; then those
 * it holds, in the order it answers them; then those noted, in the order
 * it takes them (ahead_next); then the rest as they were (primaries known
 * from their children alone). The pass's own work on a primary takes longer
 * than the worker's render of it: it seldom waits for one (worker_wait).
 * Without a worker, the queue is left as it is.
 */
void first_pass_enqueue(void)
{
	struct prim **was, *p;
	size_t n = 0, i;

	if (worker_fd() < 0) {
		enqueue_all();
		return;
	}
	was = kop_calloc(E.qlen ? E.qlen : 1, sizeof(*was));
	while ((p = E.qhead)) {
		E.qhead = p->qnext;
		p->qnext = NULL;
		p->queued = 0;
		was[n++] = p;
	}
	E.qtail = NULL;
	E.qlen = 0;
	for (i = 0; i < n; i++)
		if (was[i]->obj && !was[i]->ahead)
			enqueue(was[i]);
	worker_enqueue_sent();
	for (i = E.nahead; i-- > 0;)
		if ((p = prim_get(E.ahead[i], 0)) && p->obj && p->ahead == AHEAD_NOTED)
			enqueue(p);
	for (i = 0; i < n; i++)
		enqueue(was[i]);
	free(was);
	enqueue_all();	/* (any primary the lists did not queue) */
}

/*
 * The next primary noted (its note taken, the latest first) whose answer is
 * still to be made from what is in the view now: its render key in d, the
 * render program's input but its .parent in *in (render_input: the
 * caller's). NULL when none is left. A note left behind by a primary since
 * rendered (a reconcile of the first pass met it first), gone or going, is
 * passed over.
 */
struct prim *ahead_next(unsigned char d[KOP_JSON_DIGEST_LEN], jv *in)
{
	while (E.nahead) {
		char *key = E.ahead[--E.nahead];
		struct prim *p = prim_get(key, 0);

		free(key);
		if (!p || p->ahead != AHEAD_NOTED)
			continue;
		p->ahead = 0;
		if (!p->obj || p->obj->deleting)
			continue;	/* (gone, or going) */
		*in = render_input();
		if (!render_current(p, *in, d))
			return p;
		jv_free(*in);
	}
	*in = jv_invalid();
	return NULL;
}

/* Renders the next primary noted, if any: 1 when one was looked at (more may follow).
 * (never inlined: bench/ireconcile.sh counts its instructions as a reconcile's) */
__attribute__((noinline)) int prerender(void)
{
	unsigned char d[KOP_JSON_DIGEST_LEN];
	jv in = jv_invalid();
	struct prim *p = E.synced ? NULL : ahead_next(d, &in);

	jv_free(in);	/* (render builds it again, as a reconcile does) */
	if (p) {
		struct rctx ctx;
		int64_t us_jq, us_fn;
		int cached;
		char err[KOP_ERRLEN];
		jv r;

		rctx_init(&ctx, p);
		watchdog_mark(p->key);
		r = render(p, &ctx, &us_jq, &us_fn, &cached, err);
		watchdog_mark(NULL);
		if (jv_is_valid(r)) {
			render_keep(p, &ctx, 0);
			log_debug("primary '%s': rendered ahead of the first pass (%.3f ms)", p->key,
				  (double)(us_jq + us_fn) / 1000);
		}
		jv_free(r);	/* (a failure: the first pass renders it again, and says why) */
		rctx_release(&ctx);
		return 1;
	}
	return 0;
}
