#ifndef KOP_LEASE_H
#define KOP_LEASE_H
/*
 * Leader election on a coordination.k8s.io/v1 Lease, client-go's algorithm
 * (client-go's tools/leaderelection): tryAcquireOrRenew and the
 * release on shutdown. The caller runs the loops (retry period, renew
 * deadline); this module does one round per call and never sleeps.
 *
 * Validity is judged as client-go does: a lease whose record we saw change at
 * local monotonic time T is held until T + its leaseDurationSeconds, whatever
 * its renewTime says, so clock skew between replicas does not matter.
 *
 * The HTTP requests go through lease_io, so the algorithm runs the same on the
 * kube client (iot-operator) and on an in-memory store (t/helper/test-lease.c).
 */
#include <jv.h>
#include "kop.h"

struct lease_io {
	/*
	 * One request: method "GET", "POST", "PUT" or "DELETE"; path with no query; body
	 * consumed (jv_invalid() for none). Returns the HTTP status, 0 when no
	 * response arrived (err says why); *resp gets the decoded body (the
	 * object, a Status, or jv_null()), owned by the caller.
	 */
	long (*request)(void *ctx, const char *method, const char *path, jv body, jv *resp, char *err);
	void *ctx;
	/*
	 * The local monotonic clock (ms), read once a request has answered:
	 * what it read is stamped with that time, never with an earlier one,
	 * so a slow answer cannot make another candidate's Lease expire early
	 * in our view. NULL (a virtual clock that requests do not advance):
	 * the time the call was given.
	 */
	int64_t (*mono_ms)(void *clock_ctx);
	void *clock_ctx;
};

struct lease {
	char *path;		/* /apis/coordination.k8s.io/v1/namespaces/NS/leases/NAME */
	char *collection;	/* .../leases */
	char *name, *ns, *identity;
	long duration_s;	/* leaseDurationSeconds we write */
	jv observed;		/* the Lease as last read or written (jv_null() before) */
	jv observed_spec;	/* its spec, to notice a change */
	int64_t observed_ms;	/* local monotonic time of that change */
	int leader;		/* the last round made or kept us the holder */
};

void lease_init(struct lease *l, const char *ns, const char *name, const char *identity, long duration_s);
void lease_release_mem(struct lease *l);

/*
 * One round of client-go's tryAcquireOrRenew at local monotonic time now_ms
 * and wall time now_us (microseconds since the epoch, for the MicroTimes).
 * 1: we hold the lease; 0: another candidate holds it or won a race (409);
 * -1: the request failed (err), which counts as "not renewed" for the caller.
 */
int lease_try_acquire_or_renew(struct lease *l, const struct lease_io *io, int64_t now_ms, int64_t now_us,
			       char *err);

/*
 * ReleaseOnCancel: if we hold the lease, PUT holderIdentity "" with
 * leaseDurationSeconds 1 so that a standby takes over at once; a 409 re-reads
 * and retries while the lease is still ours. 0 when released (or not ours),
 * -1 with err otherwise.
 */
int lease_release(struct lease *l, const struct lease_io *io, int64_t now_us, char *err);

/*
 * A read of the Lease made elsewhere (obj consumed: an item of a list of the
 * leases), taken as lease_try_acquire_or_renew takes its own GET at local
 * monotonic time now_ms: a changed spec restarts the validity clock. An
 * observed holder other than us ends our leadership (the next round reads
 * before it writes).
 */
void lease_observe(struct lease *l, jv obj, int64_t now_ms);

/* Whether the lease as last observed is unexpired at now_ms (observed change + its duration), whoever holds it. */
int lease_observed_valid(const struct lease *l, int64_t now_ms);
/* When it expires by that rule (local monotonic ms), unless it changes meanwhile. */
int64_t lease_observed_expiry(const struct lease *l);

/* The holderIdentity of the lease as last observed ("" when none), borrowed. */
const char *lease_holder(const struct lease *l);

#endif
