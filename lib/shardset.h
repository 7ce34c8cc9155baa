#ifndef KOP_SHARDSET_H
#define KOP_SHARDSET_H
/*
 * The shard Leases of one replica: which of the R ranges of the hash space
 * (lib/shard.h, kop_shard_range_string(key, i, R)) this replica owns, each
 * through a coordination.k8s.io/v1 Lease of a fixed name, spread evenly over
 * the live replicas. One round per call, never sleeps; the caller runs the
 * loop (a retry period apart) as it does for the leader Lease (lib/lease.h).
 *
 * Leases, in the namespace ns:
 *   <prefix>-shard-NN            range NN (two digits, 00 .. R-1), held as a
 *                                leader Lease (lib/lease.c) by at most one replica
 *   <prefix>-member-<identity>   one per replica, held and renewed by it every round
 *
 * Membership. A replica is live, in the view of any replica, while its member
 * Lease names it as holder (holderIdentity == <identity>) and is unexpired by
 * lease.c's rule: the record was last seen to change at local monotonic time
 * T (its spec, renewTime included, differs from the previous read) and T +
 * leaseDurationSeconds is still ahead. Clock skew does not matter; a replica
 * that stops renewing drops out one Lease duration after it was last seen to
 * renew; one that shuts down releases its member Lease (holder "") and drops
 * out at the next read. The members are read each round by one GET of the
 * leases collection of ns, kept by name prefix. A member Lease seen
 * unchanged for its own leaseDurationSeconds plus ours (out for a full
 * Lease duration) is deleted, with its resourceVersion as precondition, by
 * the first live member, so that the Leases of replicas gone do not pile up.
 * Identities must be unique among the replicas (the pod's name): two
 * replicas of one identity would each take the other's Leases for its own.
 *
 * Shares. R is fixed: every replica uses the same R (the Leases name the
 * ranges). The live members ordered by identity (strcmp), n of them: member k
 * targets R / n ranges, one more when k < R % n. Every replica with the same
 * view computes the same targets; views differ for a round or so while a
 * member joins or leaves, which costs time, never safety (below).
 *
 * One round (shardset_round):
 *  1. hand over (lease_release: holder "", so another takes it at once) the
 *     ranges dropped before that the caller no longer works for
 *     (shardset_handover);
 *  2. renew the member Lease, list the leases, compute the target;
 *  3. renew the held ranges up to the target, lowest first; drop the others
 *     (they go to `lost` and to `pending`: released at the next handover,
 *     not now, since the caller may still be writing for them);
 *  4. from the second round that lists this replica as live (replicas
 *     started together then see each other before they take anything),
 *     while below the target, try to acquire the ranges that are free in
 *     this round's list (no Lease yet, holder "", or expired by the observed
 *     rule), starting from this member's own slice k*R/n, so that replicas
 *     starting together rarely race for the same one; a range still naming
 *     us as holder that we do not hold is taken back, or released when we
 *     are at the target.
 * When the list fails no range is acquired or dropped; held ones are renewed.
 * A steady round makes 2 + (ranges held) requests, one after the other; a
 * range changing hands costs a GET and a PUT (or a POST) more. A round that
 * lasts long costs ranges (their renew deadline passes), never safety: the
 * caller keeps its request timeout well below the renew deadline.
 *
 * Safety: a range is never held by two replicas at once.
 *  - A range enters `held` only by a successful acquire or renew (a write
 *    that the resourceVersion made conditional), never from a read.
 *  - renewed_ms[i] is the local monotonic time read just before the request
 *    of the last successful acquire/renew of range i: no other replica can
 *    see that write before, so none can take the range before renewed_ms[i]
 *    + duration on our clock.
 *  - What a request read is stamped with the time read after its answer
 *    (lease.c does so with the clock this module gives it in lease_io), so
 *    a slow answer never makes another replica's Lease expire early in our
 *    view.
 *  - The caller works for range i at local monotonic time t only while
 *    shardset_usable(s, t) has bit i, that is i is in held and t -
 *    renewed_ms[i] < renew_deadline_ms (< duration): the same rule as the
 *    leader Lease's renew deadline, checked before each write, between
 *    rounds too (a round may be late). A round whose renewal gets no
 *    answer keeps the range in held until that deadline, then drops it
 *    (lost).
 *  - A range that leaves held (`lost` of a round) is released by a handover
 *    (shardset_handover, or a round's first step) only once the caller no
 *    longer works for it: while its bit is in `busy`, which the caller sets
 *    before each of them, it stays pending, its Lease in our name until it
 *    expires. At shutdown the caller stops all work, then calls
 *    shardset_release.
 *
 * Use, from a thread of its own as the leader Lease's (retry period apart):
 *	shardset_init(&s, ns, "iot-operator", pod_name, 32, 15, 10000, err);
 *	each period: shardset_round(&s, &io, &shardset_system_clock, err);
 *		publish shardset_view_get(&s, &view) under the caller's lock;
 *		stop the work for s.lost, start it for s.gained;
 *		before a handover or a round: s.busy = what of s.pending it still works for;
 *		shardset_handover(&s, &io, &shardset_system_clock, err);
 *	before each write for range i: shardset_view_usable(&view, kop_mono_ms()) has bit i;
 *	at the end: stop all work, shardset_release(...), shardset_release_mem(&s).
 *
 * RBAC: get and update on the shard Leases (by name) and on the member
 * Leases, create (which cannot be limited by name), list of the leases of
 * ns, delete of member Leases.
 */
#include <stdint.h>
#include "lease.h"

#define SHARDSET_MAX 64		/* ranges: the bits of a uint64_t */

/* Where the time comes from: kop_mono_ms and kop_wall_ms (shardset_system_clock), or a test's. */
struct shardset_clock {
	int64_t (*mono_ms)(void *ctx);	/* local monotonic time, ms */
	int64_t (*wall_us)(void *ctx);	/* wall time, microseconds since the epoch (the Leases' MicroTimes) */
	void *ctx;
};
extern const struct shardset_clock shardset_system_clock;

struct shardset_peer {
	struct lease l;		/* observed only: lease_observe from the list */
	char *identity;		/* the name after <prefix>-member- */
	int seen;		/* in the last list */
};

struct shardset {
	char *ns, *prefix, *identity, *member_prefix, *shard_prefix;
	unsigned n;			/* ranges R */
	long duration_s;		/* leaseDurationSeconds we write */
	int64_t renew_deadline_ms;	/* < duration */
	struct lease *range;		/* n: <prefix>-shard-NN */
	struct lease member;		/* <prefix>-member-<identity> */
	int64_t *renewed_ms;		/* n: see Safety; meaningful for the bits of held */
	uint64_t held;			/* ranges held, as of the last round */
	uint64_t gained, lost;		/* what the last round (or release) added to and took from held */
	uint64_t pending;		/* dropped from held, to release at the next handover */
	uint64_t busy;			/* the caller's: pending ranges it still works for, kept */
	struct shardset_peer *peers;	/* every member Lease of the last list, mine included */
	size_t npeers, peers_cap;
	unsigned live;			/* live members in the last list (0 when it failed) */
	int rank;			/* my index among them, -1 when I am not live in it */
	unsigned target;		/* my share as computed by the last list */
	int listed;			/* the last round read the leases */
	int joined;			/* a round listed me as live: the next ones may acquire */
};

/*
 * 0, or -1 with err when the Lease names made of prefix and identity are not
 * DNS-1123 subdomains, nranges is not in 1 .. SHARDSET_MAX, or the renew
 * deadline is not positive and below the duration.
 */
int shardset_init(struct shardset *s, const char *ns, const char *prefix, const char *identity, unsigned nranges,
		  long duration_s, int64_t renew_deadline_ms, char *err);
void shardset_release_mem(struct shardset *s);

/*
 * One round, reading the time from c as it goes. Sets held, gained, lost,
 * pending, live, rank, target and listed. 0, or -1 when a request failed
 * (err, KOP_ERRLEN bytes, says the first); the outputs are valid either way.
 * Not thread-safe: a caller that reads held and renewed_ms from another
 * thread copies them under its own lock after each round.
 */
int shardset_round(struct shardset *s, const struct lease_io *io, const struct shardset_clock *c, char *err);

/*
 * Releases the pending ranges but those in busy (still worked for): 0, or
 * -1 with err (a range whose release failed is simply left to expire).
 */
int shardset_handover(struct shardset *s, const struct lease_io *io, const struct shardset_clock *c, char *err);

/*
 * Shutdown, once the caller has stopped working for every range: releases
 * every range and the member Lease, so that the others take them at their
 * next round. held becomes 0 (lost says what it held). 0, or -1 with err.
 */
int shardset_release(struct shardset *s, const struct lease_io *io, const struct shardset_clock *c, char *err);

/* The ranges the caller may work for at local monotonic time now_ms (see Safety). */
uint64_t shardset_usable(const struct shardset *s, int64_t now_ms);

/*
 * After the last round, the local monotonic time (after now_ms) at which
 * the first Lease of another replica expires by the observed rule, unless
 * renewed meanwhile: a member Lease (the shares change) or a range Lease (it
 * becomes free). A round then takes what a replica gone leaves, without
 * waiting for the retry period; a replica that renews in time moves its
 * expiry past the next round. 0 when none.
 */
int64_t shardset_next_free(const struct shardset *s, int64_t now_ms);

/* What another thread needs to judge the ranges: a copy made after a round. */
struct shardset_view {
	uint64_t held;
	uint64_t pending;	/* dropped, not yet handed over (shardset_view_winding) */
	int64_t renewed_ms[SHARDSET_MAX];
	int64_t renew_deadline_ms;
};
void shardset_view_get(const struct shardset *s, struct shardset_view *v);
uint64_t shardset_view_usable(const struct shardset_view *v, int64_t now_ms);
/*
 * The ranges dropped but not yet handed over whose Leases are still ours by
 * the same rule (renewed within the renew deadline): the caller may finish
 * its work for them, and must have stopped it once a range leaves this set.
 */
uint64_t shardset_view_winding(const struct shardset_view *v, int64_t now_ms);

/* The name of the Lease of range i, borrowed. */
const char *shardset_range_lease(const struct shardset *s, unsigned i);

#endif
