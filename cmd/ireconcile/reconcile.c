/*
 * The reconcile of one primary: the program run on its input, its answer
 * checked and written, errors retried after a backoff, the metrics counted.
 * The pieces are input.c's, cache.c's, children.c's and status.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ireconcile.h"
#include "banned.h"

/*
 * controller-runtime's metric names, so that dashboards made for Go
 * operators read ours: every reconcile by result, and the errors.
 */
static void count_reconcile(const char *result)
{
	char labels[256];

	snprintf(labels, sizeof(labels), "controller=%s,result=%s", E.prog.name, result);
	tool_metric_add("controller_runtime_reconcile_total", labels, 1);
	if (!strcmp(result, "error")) {
		snprintf(labels, sizeof(labels), "controller=%s", E.prog.name);
		tool_metric_add("controller_runtime_reconcile_errors_total", labels, 1);
	}
}

/* Logs a program error of p ("<before>'<key>': <msg><after>") and reconciles p again after its backoff. */
static void retry_after_error(struct prim *p, const char *before, const char *msg, const char *after, int64_t now)
{
	unsigned delay = kop_backoff_next(&p->backoff);
	jv f = jv_object_set(jv_object(), kop_json_key("primary"), jv_string(p->key));

	f = jv_object_set(f, kop_json_key("retryInMs"), jv_number(delay));
	tool_logj(LOG_ERROR, f, "%s'%s': %s%s", before, p->key, msg, after);
	schedule(p, now + delay);
	E.errors++;
}

static void program_failed(struct prim *p, const char *msg, int64_t now)
{
	retry_after_error(p, "unable to reconcile ", msg, "", now);
	count_reconcile("error");
}

/* Whether two values (borrowed) of the program's answers say the same: absent as null. */
static int same_member(jv a, jv b, const char *key)
{
	jv x = jv_object_get(jv_copy(a), kop_json_key(key)), y = jv_object_get(jv_copy(b), kop_json_key(key));
	int same;

	if (!jv_is_valid(x)) {
		jv_free(x);
		x = jv_null();
	}
	if (!jv_is_valid(y)) {
		jv_free(y);
		y = jv_null();
	}
	same = jv_identical(jv_copy(x), jv_copy(y)) || jv_equal(jv_copy(x), jv_copy(y));
	jv_free(x);
	jv_free(y);
	return same;
}

/*
 * A status just written for p (status, borrowed) comes back as a change of
 * p, and the program, which reads its own status, may answer otherwise
 * then: its landing would reconcile p. Asked now instead, on this
 * reconcile's input (in, consumed) with that status stored, and the
 * .aggregates and .pending this reconcile's writes made (the status counted
 * at once, the applies sent): when the answer is this one (out, borrowed, as
 * the program gave it) but for its events, none, and the status it was
 * given, the landing is what the program has seen (seen_note), and
 * reconciles nothing. One run of the program, where the landing's
 * reconcile would build its whole input again. 1 when so.
 */
static int ask_landed(struct prim *p, struct rctx *ctx, jv in, jv out, jv status, int64_t now)
{
	jv parent = jv_object_set(jv_object_get(jv_copy(in), kop_json_key("parent")), kop_json_key("status"),
				  jv_copy(status));
	jv again = jv_invalid(), ev;
	char err[KOP_ERRLEN];
	int same;

	in = jv_object_set(in, kop_json_key("parent"), jv_copy(parent));
	in = jv_object_set(in, kop_json_key("aggregates"), build_aggs());
	in = jv_object_set(in, kop_json_key("pending"), build_pending(p, ctx, now));
	if (kop_jq_run1(E.prog.sync, in, &again, err) < 0 || jv_get_kind(again) != JV_KIND_OBJECT) {
		if (jv_is_valid(again))
			jv_free(again);
		jv_free(parent);
		return 0;	/* (the landing's reconcile says what is wrong) */
	}
	ev = jv_object_get(jv_copy(again), kop_json_key("events"));
	same = (jv_get_kind(ev) != JV_KIND_ARRAY || jv_array_length(jv_copy(ev)) == 0) &&
	       same_member(out, again, "children") && same_member(out, again, "resyncAfterSeconds") &&
	       same_member(out, again, "finalized");
	jv_free(ev);
	if (same) {
		jv st = jv_object_get(jv_copy(again), kop_json_key("status"));

		same = jv_equal(st, jv_copy(status));
	}
	if (same)
		seen_note(p, parent);
	jv_free(parent);
	jv_free(again);
	return same;
}

/* One reconcile of p, whose parsed object is ctx->parent. */
static void reconcile_parsed(struct prim *p, struct rctx *ctx, int64_t now)
{
	struct counts n = { 0, 0, 0, 0, 0 };
	int finalizing = 0, index = -1, status_sent = 1, landed = 0;
	enum seen seen = SEEN_STORED;
	jv in, out, v, parent = ctx->parent, rdes, asked, given;
	char err[KOP_ERRLEN], ts[40];
	struct kop_hmap desired = KOP_HMAP_INIT;
	int64_t t0 = kop_mono_us(), t1, t2, t3, render_jq = 0, render_fn = 0, ask_jq = 0;	/* microseconds */
	int render_cached = 0, held = 0;

	p->seen_ok = 0;
	if (p->obj->deleting) {
		/* Being deleted: ours to finalize only while our finalizer holds it. */
		if (!E.prog.finalizer || !has_finalizer(parent, E.prog.finalizer, &index))
			return;
		finalizing = 1;
	} else if (E.prog.finalizer && !has_finalizer(parent, E.prog.finalizer, NULL)) {
		/* Nothing else until the finalizer is stored: a primary deleted
		 * before it lands would leave children to nobody (the patch
		 * fails, applies sent with it succeed), and a status written
		 * meanwhile would change the resourceVersion the patch tests.
		 * Its arrival reconciles again. */
		add_finalizer(p, parent, now, &n);
		log_debug("primary '%s': finalizer added; reconciled once it is stored", p->key);
		return;
	}

	rdes = jv_array();	/* the rendered .desired as sync sees them */
	in = jv_object();
	v = parent_seen(p, parent, &seen, now);
	seen_note(p, v);
	update_aggs(p, v);
	in = jv_object_set(in, kop_json_key("parent"), v);
	in = jv_object_set(in, kop_json_key("children"), build_children(p, ctx));
	in = jv_object_set(in, kop_json_key("related"), build_related());
	in = jv_object_set(in, kop_json_key("settings"), jv_copy(E.prog.settings));
	in = jv_object_set(in, kop_json_key("aggregates"), build_aggs());
	in = jv_object_set(in, kop_json_key("errors"), errors_list(p));
	in = jv_object_set(in, kop_json_key("finalizing"), jv_bool(finalizing));
	in = jv_object_set(in, kop_json_key("now"),
			   jv_string(E.now ? E.now : kop_time_rfc3339(ts, sizeof(ts), (time_t)(kop_wall_ms() / 1000))));
	E.reconciles++;
	if (E.prog.render) {
		jv r = render(p, ctx, &render_jq, &render_fn, &render_cached, err);

		if (!jv_is_valid(r)) {
			jv_free(in);
			jv_free(rdes);
			program_failed(p, err, now);
			return;
		}
		jv_free(rdes);
		rdes = jv_getpath(jv_copy(r), JV_ARRAY(jv_string("desired")));
		if (jv_get_kind(rdes) != JV_KIND_ARRAY || jv_array_length(jv_copy(rdes)) != p->nrdig) {
			jv_free(rdes);
			rdes = jv_array();
		}
		in = jv_object_set(in, kop_json_key("rendered"), r);
	}
	in = jv_object_set(in, kop_json_key("pending"), build_pending(p, ctx, now));
	t1 = kop_mono_us();
	asked = jv_copy(in);	/* (ask_landed's) */
	if (kop_jq_run1(E.prog.sync, in, &out, err) < 0) {
		jv_free(asked);
		jv_free(rdes);
		program_failed(p, err, now);
		return;
	}
	t2 = kop_mono_us();
	given = jv_copy(out);
	if (check_output(out, err) < 0 || resolve_output(out, rdes, &out, err) < 0 || check_children(out, err) < 0) {
		if (jv_is_valid(out))
			jv_free(out);
		jv_free(given);
		jv_free(asked);
		jv_free(rdes);
		program_failed(p, err, now);
		return;
	}

	t3 = kop_mono_us();
	count_reconcile(jv_get_kind(jv_getpath(jv_copy(out), JV_ARRAY(jv_string("resyncAfterSeconds")))) == JV_KIND_NUMBER
				? "requeue_after" : "success");
	v = jv_object_get(jv_copy(out), kop_json_key("children"));
	if (jv_get_kind(v) == JV_KIND_ARRAY)
		apply_children(p, ctx, v, rdes, &desired, now, &n, &held);
	else
		jv_free(v);
	if (E.prog.render)
		render_keep(p, ctx, held && !ctx->rfail);
	if (ctx->rfail) {
		/* Rendered anew next time, after the backoff of a program error. */
		p->render_valid = 0;
		retry_after_error(p, "primary ", ctx->rfail_msg, "; children that needed it left as they are", now);
	}
	if (ctx->unmapped)
		retry_after_error(p, "primary ", ctx->unmapped_msg, "; not applied, nothing pruned", now);
	else
		prune(p, &desired, now, &n);
	tidy_errors(p, &desired);

	v = jv_object_get(jv_copy(out), kop_json_key("status"));
	if (jv_get_kind(v) == JV_KIND_OBJECT) {
		jv ev = jv_object_get(jv_copy(out), kop_json_key("events"));
		int events = jv_get_kind(ev) == JV_KIND_ARRAY && jv_array_length(jv_copy(ev)) > 0;
		unsigned before = n.statuses;

		jv_free(ev);
		status_sent = write_status(p, parent, jv_copy(v), seen, events, now, &n);
		if (n.statuses > before && !finalizing && !ctx->rfail && !ctx->unmapped) {
			int64_t ta = kop_mono_us();

			landed = ask_landed(p, ctx, asked, given, v, now);
			asked = jv_invalid();
			ask_jq = kop_mono_us() - ta;
		}
		jv_free(v);
	} else {
		jv_free(v);
	}
	jv_free(asked);
	jv_free(given);

	/* Events that came with a status still in flight were sent with it already. */
	v = jv_object_get(jv_copy(out), kop_json_key("events"));
	if (jv_get_kind(v) == JV_KIND_ARRAY && status_sent)
		write_events(p, parent, v, &n);
	else
		jv_free(v);

	v = jv_object_get(jv_copy(out), kop_json_key("finalized"));
	if (finalizing && jv_get_kind(v) == JV_KIND_TRUE) {
		const char *creating = flight_create_pending(p, now);

		if (creating) {
			/* Reconciled again once it is seen, or failed (or timed out). The key
			 * "Kind.group|ns/name" said as "Kind/name" or "Kind/ns/name". */
			const char *dot = strchr(creating, '.'), *bar = strchr(creating, '|');
			const char *where = bar ? bar + 1 + (bar[1] == '/') : creating;

			log_debug("primary '%s': finalizer kept while the create of '%.*s/%s' is on its way", p->key,
				  (int)(dot && bar && dot < bar ? dot - creating : 0), creating, where);
		} else
			remove_finalizer(p, parent, index, now, &n);
	}
	jv_free(v);

	v = jv_object_get(jv_copy(out), kop_json_key("resyncAfterSeconds"));
	if (jv_get_kind(v) == JV_KIND_NUMBER && jv_number_value(v) > 0) {
		double s = jv_number_value(v);

		/* (at least a second: a program answering 1e-9 would spin) */
		schedule(p, now + (int64_t)(s > 1e9 ? 1e12 : s < 1 ? 1000 : s * 1000));
	}
	jv_free(v);
	jv_free(out);
	jv_free(rdes);
	kop_hmap_release(&desired, NULL);
	if (!jv_object_length(jv_copy(p->errors)) && !ctx->rfail && !ctx->unmapped)
		kop_backoff_reset(&p->backoff);
	p->seen_ok = 1;

	if (log_enabled(LOG_DEBUG)) {
		jv f = jv_object_set(jv_object(), kop_json_key("primary"), jv_string(p->key));

		f = jv_object_set(f, kop_json_key("ms"), jv_number((double)(kop_mono_us() - t0) / 1000));
		f = jv_object_set(f, kop_json_key("programMs"),
				  jv_number((double)(t2 - t1 + render_jq + ctx->rerender_jq + ask_jq) / 1000));
		f = jv_object_set(f, kop_json_key("functionsMs"),
				  jv_number((double)(t3 - t2 + render_fn + ctx->rerender_fn) / 1000));
		if (n.statuses)
			f = jv_object_set(f, kop_json_key("landingSeen"), jv_bool(landed));
		if (E.prog.render) {
			f = jv_object_set(f, kop_json_key("renderCached"), jv_bool(render_cached));
			f = jv_object_set(f, kop_json_key("renderKept"), jv_bool(p->rendered != NULL));
		}
		f = jv_object_set(f, kop_json_key("applies"), jv_number(n.applies));
		f = jv_object_set(f, kop_json_key("deletes"), jv_number(n.deletes));
		f = jv_object_set(f, kop_json_key("patches"), jv_number(n.patches));
		f = jv_object_set(f, kop_json_key("statuses"), jv_number(n.statuses));
		f = jv_object_set(f, kop_json_key("events"), jv_number(n.events));
		f = jv_object_set(f, kop_json_key("finalizing"), jv_bool(finalizing));
		tool_logj(LOG_DEBUG, f, "reconciled '%s'", p->key);
	}
}

/* ctx for p (its object in the view): with a render program, sync gets the primary without its spec (vtext). */
void rctx_init(struct rctx *ctx, struct prim *p)
{
	ctx->parent = p->obj->vtext ? parse_view(p->obj) : parse_obj(p->obj);
	kop_hmap_init(&ctx->live);
	kop_hmap_init(&ctx->view);
	ctx->rfull = jv_invalid();
	ctx->rtext = NULL;
	ctx->rel = NULL;
	ctx->nrel = -1;
	ctx->rerender_jq = ctx->rerender_fn = 0;
	ctx->rfail = 0;
	ctx->rfail_msg[0] = '\0';
	ctx->unmapped = 0;
	ctx->unmapped_msg[0] = '\0';
}

void rctx_release(struct rctx *ctx)
{
	jv_free(ctx->parent);
	jv_free(ctx->rfull);
	free(ctx->rtext);
	free(ctx->rel);
	kop_hmap_release(&ctx->live, parsed_free);
	kop_hmap_release(&ctx->view, parsed_free);
}

/* (never inlined: bench/ireconcile.sh counts the instructions of reconciles
 * with callgrind's --toggle-collect=reconcile) */
__attribute__((noinline)) void reconcile(struct prim *p, int64_t now)
{
	struct rctx ctx;

	p->due = 0;
	p->landing = 0;
	p->status_held = 0;	/* (write_status holds it again, if it must) */
	if (p->settle_due <= now)
		p->settle_due = 0;	/* (one still to come may hold the status: status_may_wait) */
	if (!p->obj) {
		if (!p->children) {
			kop_hmap_remove(&E.prims, p->key);
			prim_free(p);
		}
		return;
	}
	rctx_init(&ctx, p);
	watchdog_mark(p->key);
	reconcile_parsed(p, &ctx, now);
	watchdog_mark(NULL);
	rctx_release(&ctx);
}
