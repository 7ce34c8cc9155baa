/*
 * Primaries, the queue of those to reconcile and their timers. What a
 * reconcile does is reconcile.c's; when the loop drains the queue is main.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ireconcile.h"
#include "banned.h"

struct prim *prim_get(const char *key, int create)
{
	struct prim *p = kop_hmap_get(&E.prims, key);

	if (p || !create)
		return p;
	p = kop_calloc(1, sizeof(*p));
	p->key = kop_strdup(key);
	p->errors = jv_object();
	kop_backoff_init(&p->backoff, E.backoff_base, E.backoff_cap, 0.5);
	p->agg = kop_calloc(E.prog.naggs ? E.prog.naggs : 1, 1);
	kop_hmap_put(&E.prims, key, p);
	return p;
}

/* Forgets the first n of p->status_prev. */
void status_prev_drop(struct prim *p, int n)
{
	int i;

	for (i = 0; i < n; i++)
		free(p->status_prev[i]);
	memmove(p->status_prev, p->status_prev + n, (size_t)(p->nprev - n) * sizeof(p->status_prev[0]));
	for (i = p->nprev - n; i < p->nprev; i++)
		p->status_prev[i] = NULL;	/* (no slot past the end points at what was freed) */
	p->nprev -= n;
}

/* Appends text (taken); when full, the oldest of ours goes, not the one
 * stored when the flight began ([0]). */
void status_prev_push(struct prim *p, char *text)
{
	if (p->nprev == (int)(sizeof(p->status_prev) / sizeof(p->status_prev[0]))) {
		free(p->status_prev[1]);
		memmove(p->status_prev + 1, p->status_prev + 2, (size_t)(p->nprev - 2) * sizeof(p->status_prev[0]));
		p->nprev--;
	}
	p->status_prev[p->nprev++] = text;
}

void prim_free(void *v)
{
	struct prim *p = v;

	free(p->key);
	jv_free(p->errors);
	free(p->rendered);
	free(p->rview);
	free(p->rdig);
	free(p->rstat);
	free(p->radig);
	free(p->status_sent);
	status_prev_drop(p, p->nprev);
	free(p->agg);
	free(p);
}

void enqueue(struct prim *p)
{
	if (!p || p->queued)
		return;
	p->queued = 1;
	p->qnext = NULL;
	E.qlen++;
	if (E.qtail)
		E.qtail->qnext = p;
	else
		E.qhead = p;
	E.qtail = p;
}

void enqueue_all(void)
{
	size_t it = 0;
	void *v;

	while (kop_hmap_next(&E.prims, &it, NULL, &v))
		if (((struct prim *)v)->obj)
			enqueue(v);
}

void timer_set(int64_t *t, int64_t at)
{
	*t = at;
	if (!E.next_due || at < E.next_due)
		E.next_due = at;
}

void schedule(struct prim *p, int64_t at)
{
	if (!p->due || at < p->due)
		timer_set(&p->due, at);
}

/*
 * The timers are scanned TIMER_SLACK_MS apart at the most, so they fire up
 * to that late: a settle pushed back by each pod of a burst (view.c) leaves
 * E.next_due early, and a scan of every prim for each such push would cost
 * more than the reconciles it waits for.
 */
#define TIMER_SLACK_MS 10

/* One timer *t of p (0: none): p queued and the timer cleared when it is due by now; else the
 * earlier of it and min, the earliest still to come (0: none). */
static int64_t fire_timer(struct prim *p, int64_t *t, int64_t now, int64_t min)
{
	if (!*t)
		return min;
	if (*t <= now) {
		*t = 0;
		enqueue(p);
		return min;
	}
	return !min || *t < min ? *t : min;
}

/* The prims due by now queued; E.next_due made exact again (a scan of every prim: only once one is due). */
void fire_timers(int64_t now)
{
	size_t it = 0;
	void *v;
	int64_t min = 0;

	if (!E.next_due || E.next_due > now || now < E.timers_at + TIMER_SLACK_MS)
		return;
	E.timers_at = now;
	while (kop_hmap_next(&E.prims, &it, NULL, &v)) {
		struct prim *p = v;

		min = fire_timer(p, &p->settle_due, now, min);
		min = fire_timer(p, &p->due, now, min);
	}
	E.next_due = min;
}

/*
 * The end of the input: no change will follow, so nothing waits for one.
 * Every burst of observed changes is over (view.c's settle), every status
 * held for --status-interval is due (status_may_wait holds none from now
 * on), and no create still on its way will land (flight_landed): their
 * primaries are queued, the last reconciles before the exit.
 */
void input_end(void)
{
	size_t it = 0;
	void *v;

	E.input_ended = 1;
	while (kop_hmap_next(&E.prims, &it, NULL, &v)) {
		struct prim *p = v;

		if (p->settle_due || p->status_held || p->landing) {
			p->settle_due = 0;
			enqueue(p);
		}
	}
}

/* (E.next_due may be early, a timer cleared by its reconcile: that wakes fire_timers once for nothing) */
int next_timeout(int64_t now)
{
	int64_t min = E.next_due;

	if (!min)
		return -1;
	if (min < E.timers_at + TIMER_SLACK_MS)
		min = E.timers_at + TIMER_SLACK_MS;
	if (min <= now)
		return 0;
	return min - now > 3600000 ? 3600000 : (int)(min - now);
}

/*
 * Reconciles what is queued, until the output backs up or 100 ms have gone
 * by: then the main loop reads the feedback and stdin before going on.
 */
void drain_queue(void)
{
	int64_t until = kop_mono_ms() + 100;
	char labels[256];

	snprintf(labels, sizeof(labels), "name=%s", E.prog.name);
	tool_metric_set("workqueue_depth", labels, (double)E.qlen);

	while (E.qhead && out_pending() <= OUT_HIGH && kop_mono_ms() < until) {
		struct prim *p = E.qhead;

		E.qhead = p->qnext;
		if (!E.qhead)
			E.qtail = NULL;
		E.qlen--;
		p->queued = 0;
		p->qnext = NULL;
		if (shard_waits(p))
			continue;	/* (shard_synced queues it again) */
		reconcile(p, kop_mono_ms());
		worker_tend();
	}
	worker_tend();	/* (the queue may have emptied of primaries waiting for their shard) */
	tool_metric_set("workqueue_depth", labels, (double)E.qlen);
}
