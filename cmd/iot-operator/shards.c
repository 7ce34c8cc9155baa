/*
 * Sharding (--shards R): the lease thread runs lib/shardset.c's rounds
 * instead of the leader election, so this replica holds some of the R
 * ranges of the hash space, and publishes them to the main loop, which
 * runs the pipeline for what it may work for (shards_usable) and says what
 * that pipeline works for (shards_working). A range dropped is handed over
 * (its Lease released) only once the pipeline no longer works for it; at
 * the end, once the pipeline is down, every Lease is released.
 * docs/sharding.md tells the design and its guarantees.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "iot-operator.h"
#include "shardset.h"
#include "banned.h"

static struct {
	struct shardset s;		/* the thread's own */
	/* under le.mu */
	struct shardset_view view;	/* after the last round */
	uint64_t working;		/* what the running pipeline works for (the main loop's) */
	unsigned live, target;		/* members seen live, and our share, by the last list */
	int64_t changed_ms;		/* when held last changed */
	int ready;			/* a round has been made */
} sh;

/* "00,03,04" for the ranges in mask ("none" for none). */
const char *shards_text(uint64_t mask, char buf[SHARDS_TEXT])
{
	size_t n = 0;
	unsigned i;

	buf[0] = 0;
	for (i = 0; i < SHARDSET_MAX; i++)
		if (mask >> i & 1)
			n += (size_t)snprintf(buf + n, SHARDS_TEXT - n, "%s%02u", n ? "," : "", i);
	return n ? buf : "none";
}

/* Logs the ranges of mask handed over. */
static void handed_over(uint64_t mask)
{
	char txt[SHARDS_TEXT];

	if (mask)
		tool_logj(LOG_INFO, JV_OBJECT(jv_string("ranges"), jv_string(shards_text(mask, txt))),
			  "handed over ranges %s", txt);
}

/*
 * Hands over (le.mu held, released around the requests) the ranges of mask
 * dropped that the pipeline no longer works for: those it tried.
 */
static uint64_t handover_free(const struct lease_io *io, uint64_t mask)
{
	char err[KOP_ERRLEN] = "";
	uint64_t give = sh.s.pending & ~sh.working & mask;

	if (!give)
		return 0;
	sh.s.busy = sh.s.pending & ~give;
	pthread_mutex_unlock(&le.mu);
	if (shardset_handover(&sh.s, io, &shardset_system_clock, err) < 0)
		log_warn("%s (the Lease expires instead)", err);
	handed_over(give & ~sh.s.pending);
	pthread_mutex_lock(&le.mu);
	return give;
}

static void *shards_thread(void *arg)
{
	struct lease_io io = { lease_request, le.kc, lease_clock, NULL };
	char last_err[KOP_ERRLEN] = "";	/* the failure last logged ("" none since a success) */
	int64_t last_err_at = 0;

	(void)arg;
	pthread_mutex_lock(&le.mu);
	while (!le.stop) {
		char err[KOP_ERRLEN] = "", held[SHARDS_TEXT], got[SHARDS_TEXT],
		     lost[SHARDS_TEXT];
		int64_t start = kop_mono_ms(), deadline = start + sup.retry_ms;
		uint64_t tried, give;
		int r;

		tried = handover_free(&io, ~(uint64_t)0);
		/* (the round hands over too: never what the pipeline still works for) */
		sh.s.busy = sh.working;
		give = sh.s.pending & ~sh.s.busy & ~tried;
		pthread_mutex_unlock(&le.mu);
		r = shardset_round(&sh.s, &io, &shardset_system_clock, err);
		handed_over(give & ~sh.s.pending);
		pthread_mutex_lock(&le.mu);
		if (sh.s.listed) {
			le.answered_ms = start;
			le.fail[0] = 0;
		}
		if (r < 0) {
			if (!sh.s.listed)
				snprintf(le.fail, sizeof(le.fail), "%s", err);
			/* a new failure at once, the same one again every minute */
			if (!same_failure(err, last_err) || kop_mono_ms() - last_err_at >= 60000) {
				log_warn("shard Leases: %s", err);
				snprintf(last_err, sizeof(last_err), "%s", err);
				last_err_at = kop_mono_ms();
			}
		} else {
			last_err[0] = 0;
		}
		shardset_view_get(&sh.s, &sh.view);
		sh.live = sh.s.live;
		sh.target = sh.s.target;
		sh.ready = 1;
		le.leader = sh.s.held != 0;
		le.renewed_ms = start;
		if (sh.s.gained || sh.s.lost) {
			sh.changed_ms = kop_mono_ms();
			const char *h = shards_text(sh.s.held, held), *g = shards_text(sh.s.gained, got),
				   *l = shards_text(sh.s.lost, lost);

			tool_logj(sh.s.lost ? LOG_WARN : LOG_INFO,
				  JV_OBJECT(jv_string("held"), jv_string(h), jv_string("gained"), jv_string(g),
					    jv_string("lost"), jv_string(l), jv_string("members"), jv_number(sh.s.live),
					    jv_string("target"), jv_number(sh.s.target)),
				  "ranges held: %s (gained %s, lost %s)", h, g, l);
			wake_main();
		}
		/* Another replica's member or range Lease not renewed in time: the next round when it
		 * expires (a replica gone), not a retry period later. */
		{
			int64_t free_at = shardset_next_free(&sh.s, kop_mono_ms());

			if (free_at && free_at + 1 < deadline)
				deadline = free_at + 1;
		}
		/* Until the next round: hand over as soon as the pipeline lets go (once a round: one that
		 * fails is left to the next, or to its Lease's expiry). */
		tried = 0;
		while (!le.stop && kop_mono_ms() < deadline) {
			struct timespec ts;
			int64_t wait_ms = deadline - kop_mono_ms();

			if (sh.s.pending & ~sh.working & ~tried) {
				tried |= handover_free(&io, ~tried);
				continue;
			}
			ts = kop_clock_after(CLOCK_REALTIME, wait_ms);
			pthread_cond_timedwait(&le.cv, &le.mu, &ts);
		}
	}
	pthread_mutex_unlock(&le.mu);
	/* Stopping: the pipeline is down; the others take our ranges at their next round. */
	{
		char err[KOP_ERRLEN] = "", txt[SHARDS_TEXT];
		uint64_t had = sh.s.held | sh.s.pending;

		if (shardset_release(&sh.s, &io, &shardset_system_clock, err) < 0) {
			log_warn("%s", err);
			le.release_failed = 1;
		} else {
			tool_logj(LOG_INFO, JV_OBJECT(jv_string("ranges"), jv_string(shards_text(had, txt))),
				  "released the shard Leases (ranges %s)", txt);
		}
	}
	return NULL;
}

void shards_setup(void)
{
	char err[KOP_ERRLEN];
	const char *pod = getenv("POD_NAME");
	char host[256] = "";

	if (!pod || !*pod) {
		gethostname(host, sizeof(host) - 1);
		pod = host;
	}
	if (shardset_init(&sh.s, sup.operator_name, SHARD_PREFIX, pod, sup.shards, (sup.lease_ms + 999) / 1000,
			  sup.renew_ms, err) < 0)
		die_usage("--shards: %s (the identity is POD_NAME, else the host name)", err);
	lease_client_setup("shards");
	if (pthread_create(&le.th, NULL, shards_thread, NULL))
		die(KOP_EXIT_TEMP, "unable to start the sharding thread");
	le.started = 1;
	tool_logj(LOG_INFO, JV_OBJECT(jv_string("ranges"), jv_number(sup.shards), jv_string("namespace"),
				      jv_string(sup.operator_name), jv_string("identity"), jv_string(pod)),
		  "sharding: taking a share of %u ranges", sup.shards);
}

void shards_release_mem(void)
{
	shardset_release_mem(&sh.s);
}

/* What f says of the view after the last round (0 before the first). */
static uint64_t of_view(uint64_t (*f)(const struct shardset_view *, int64_t), int64_t now)
{
	uint64_t r;

	pthread_mutex_lock(&le.mu);
	r = sh.ready ? f(&sh.view, now) : 0;
	pthread_mutex_unlock(&le.mu);
	return r;
}

uint64_t shards_usable(int64_t now)
{
	return of_view(shardset_view_usable, now);
}

/* The ranges dropped whose work may still finish (shardset_view_winding). */
uint64_t shards_winding(int64_t now)
{
	return of_view(shardset_view_winding, now);
}

/*
 * Whether the ranges have settled for a (re)start: this replica holds its
 * share, or they have not changed for two retry periods (a share it cannot
 * reach, when ranges are missing or members disagree for a while).
 */
int shards_settled(int64_t now)
{
	int r;

	pthread_mutex_lock(&le.mu);
	r = sh.ready && (__builtin_popcountll(sh.view.held) == (int)sh.target ||
			 now - sh.changed_ms >= 2 * sup.retry_ms);
	pthread_mutex_unlock(&le.mu);
	return r;
}

void shards_working(uint64_t mask)
{
	pthread_mutex_lock(&le.mu);
	sh.working = mask;
	pthread_cond_signal(&le.cv);
	pthread_mutex_unlock(&le.mu);
}

/* The figures /metrics shows (metrics.c), under le.mu. */
void shards_figures(uint64_t *held, unsigned *live, unsigned *target)
{
	pthread_mutex_lock(&le.mu);
	*held = sh.view.held;
	*live = sh.live;
	*target = sh.target;
	pthread_mutex_unlock(&le.mu);
}
