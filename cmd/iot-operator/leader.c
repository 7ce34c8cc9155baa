/*
 * Leader election: a thread that acquires and renews the Lease (lib/lease.c
 * decides), wakes the main loop on a change and releases the Lease at the
 * end; whether this replica may lead now, and whether a standby could.
 * Stopping the pipeline when leadership is lost is the main loop's. With
 * --shards the same thread state (le) runs shards.c's rounds instead.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "iot-operator.h"
#include "banned.h"

struct leader_election le = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .efd = -1 };

/* How long one lease request may take: it never outlives a retry period much
 * (the main loop enforces the renew deadline anyway). */
long lease_request_timeout_ms(void)
{
	return sup.retry_ms * 2 > 5000 ? sup.retry_ms * 2 : 5000;
}

/*
 * Whether a standby could take over, for ready_locked: the API server
 * answered its lease requests within a lease duration, or longer when a
 * candidate's round (up to 2.2 retry periods apart, and a request of up to
 * max(2 retry periods, 5 s)) may take longer (takes le.mu, so it is called
 * before sup.mu is taken). Else *why (why[KOP_ERRLEN + 64]) says why.
 */
int standby_can_lead(char *why, size_t n)
{
	int64_t now = kop_mono_ms();
	int64_t round = sup.retry_ms * 22 / 10 + lease_request_timeout_ms();
	int ok;

	pthread_mutex_lock(&le.mu);
	ok = le.answered_ms > 0 && now - le.answered_ms < (sup.lease_ms > round ? sup.lease_ms : round);
	if (!ok)
		snprintf(why, n, "a standby that cannot reach the API server could not take over: %s",
			 *le.fail ? le.fail : "no answer to the lease requests yet");
	pthread_mutex_unlock(&le.mu);
	return ok;
}

long lease_request(void *ctx, const char *method, const char *path, jv body, jv *out, char *err)
{
	struct kube_client *c = ctx;
	struct kube_response r;
	char code[16];
	long ret;

	kube_request(c, method, path, jv_is_valid(body) ? "application/json" : NULL, body, &r);
	if (r.code)
		snprintf(code, sizeof(code), "%ld", r.code);
	else
		snprintf(code, sizeof(code), "<error>");
	metric_own_add("rest_client_requests_total", JV_OBJECT(jv_string("code"), jv_string(code),
							       jv_string("method"), jv_string(method)), 1);
	if (r.code == 401)
		kube_auth_failed(c);
	*out = jv_copy(r.body);
	if (!r.code)
		kop_error(err, "%s", r.message ? r.message : "no response");
	ret = r.code;
	kube_response_release(&r);
	return ret;
}

void wake_main(void)
{
	uint64_t one = 1;

	if (le.efd >= 0)
		(void)!write(le.efd, &one, sizeof(one));
}

/* Whether two failure messages say the same but for their numbers (curl's
 * "after 3 ms" varies from one attempt to the next). */
int same_failure(const char *a, const char *b)
{
	while (*a && *b) {
		if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
			while (isdigit((unsigned char)*a))
				a++;
			while (isdigit((unsigned char)*b))
				b++;
		} else if (*a++ != *b++) {
			return 0;
		}
	}
	return !*a && !*b;
}

/* What a lease request read is stamped with: the time after its answer (lib/lease.h). */
int64_t lease_clock(void *ctx)
{
	(void)ctx;
	return kop_mono_ms();
}

static void *lease_thread(void *arg)
{
	struct lease_io io = { lease_request, le.kc, lease_clock, NULL };
	char last_err[KOP_ERRLEN] = "";	/* the failure last logged ("" none since a success) */
	int64_t last_err_at = 0;
	unsigned long failures = 0;

	(void)arg;
	pthread_mutex_lock(&le.mu);
	while (!le.stop) {
		char err[KOP_ERRLEN] = "";
		int64_t start = kop_mono_ms(), wait_ms;
		int r;
		struct timespec ts;

		pthread_mutex_unlock(&le.mu);
		r = lease_try_acquire_or_renew(&le.l, &io, start, kop_wall_ms() * 1000, err);
		pthread_mutex_lock(&le.mu);
		if (r >= 0) {
			le.answered_ms = start;
			le.fail[0] = '\0';
		} else {
			snprintf(le.fail, sizeof(le.fail), "%s", err);
		}
		if (r == 1) {
			le.renewed_ms = start;
			last_err[0] = '\0';
			failures = 0;
			if (!le.leader) {
				le.leader = 1;
				tool_logj(LOG_INFO, JV_OBJECT(jv_string("lease"), jv_string(LOCK_NAME),
							      jv_string("identity"), jv_string(sup.identity)),
					  "became leader");
				wake_main();
			}
		} else {
			/* A new failure is logged at once, the same one again every minute
			 * (a standby that cannot reach the API server says so). */
			failures += r < 0;
			if (r < 0 && (!same_failure(err, last_err) || kop_mono_ms() - last_err_at >= 60000)) {
				tool_logj(LOG_WARN, JV_OBJECT(jv_string("lease"), jv_string(LOCK_NAME), jv_string("failures"),
							      jv_number((double)failures)),
					  "unable to acquire or renew the lease: %s", err);
				snprintf(last_err, sizeof(last_err), "%s", err);
				last_err_at = kop_mono_ms();
			}
			if (le.leader && (r == 0 || kop_mono_ms() - le.renewed_ms >= sup.renew_ms)) {
				le.leader = 0;
				tool_logj(LOG_ERROR, JV_OBJECT(jv_string("lease"), jv_string(LOCK_NAME),
							       jv_string("holder"), jv_string(lease_holder(&le.l))),
					  r == 0 ? "leadership lost: the lease is held by another replica"
						 : "leadership lost: not renewed within the renew deadline");
				wake_main();
			} else if (r == 0 && !le.leader) {
				log_debug("lease '%s' is held by '%s'", LOCK_NAME, lease_holder(&le.l));
			}
		}
		/* A candidate waits RetryPeriod with jitter 1.2 (client-go's wait.JitterUntil); a leader RetryPeriod. */
		wait_ms = le.leader ? sup.retry_ms : sup.retry_ms + (int64_t)(sup.retry_ms * 1.2 * (random() / (RAND_MAX + 1.0)));
		wait_ms -= kop_mono_ms() - start;
		if (wait_ms < 0)
			wait_ms = 0;
		ts = kop_clock_after(CLOCK_REALTIME, wait_ms);
		if (!le.stop)
			pthread_cond_timedwait(&le.cv, &le.mu, &ts);
	}
	pthread_mutex_unlock(&le.mu);
	/* Stopping: release so that a standby takes over at once (the pipeline is down by now). */
	if (le.l.leader) {
		char err[KOP_ERRLEN] = "";

		if (lease_release(&le.l, &io, kop_wall_ms() * 1000, err) < 0) {
			log_warn("%s", err);
			le.release_failed = 1;
		} else {
			tool_logj(LOG_INFO, JV_OBJECT(jv_string("lease"), jv_string(LOCK_NAME)), "released the lease");
		}
	}
	return NULL;
}

/*
 * Whether this replica may run the pipeline now: it holds the lease (with
 * --shards: a range) and renewed it within the renew deadline.
 */
int may_lead(int64_t now)
{
	int r;

	if (sup.shards)
		return shards_usable(now) != 0;
	if (!sup.leader_elect)
		return 1;
	pthread_mutex_lock(&le.mu);
	r = le.leader && now - le.renewed_ms < sup.renew_ms;
	pthread_mutex_unlock(&le.mu);
	return r;
}

/*
 * Setup of the lease thread, leader election's or sharding's: its client
 * (user agent iot-operator/COMPONENT, naming the replica: tool_user_agent)
 * and its eventfd.
 */
void lease_client_setup(const char *component)
{
	struct kube_config cfg;
	char err[KOP_ERRLEN];

	memset(&cfg, 0, sizeof(cfg));
	if (kube_config_load(&cfg, tool_kube.kubeconfig, tool_kube.context, err) < 0)
		die(KOP_EXIT_PERM, "%s", err);
	if (!(le.kc = kube_client_new(&cfg, lease_request_timeout_ms(), err)))
		die(KOP_EXIT_PERM, "%s", err);
	kube_config_release(&cfg);
	{
		char *ua = tool_user_agent(component);

		kube_client_set_user_agent(le.kc, ua);
		free(ua);
	}
	if ((le.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		die(KOP_EXIT_TEMP, "unable to create an eventfd: %s", strerror(errno));
	le.efd = fd_high(le.efd);
}

void lease_setup(void)
{
	lease_client_setup("leader-election");
	lease_init(&le.l, sup.operator_name, LOCK_NAME, sup.identity, (sup.lease_ms + 999) / 1000);
	if (pthread_create(&le.th, NULL, lease_thread, NULL))
		die(KOP_EXIT_TEMP, "unable to start the leader-election thread");
	le.started = 1;
	tool_logj(LOG_INFO, JV_OBJECT(jv_string("lease"), jv_string(LOCK_NAME), jv_string("namespace"),
				      jv_string(sup.operator_name), jv_string("identity"), jv_string(sup.identity)),
		  "waiting for leadership");
}

void lease_stop(void)
{
	if (!le.started)
		return;
	pthread_mutex_lock(&le.mu);
	le.stop = 1;
	pthread_cond_signal(&le.cv);
	pthread_mutex_unlock(&le.mu);
	pthread_join(le.th, NULL);
	if (sup.shards)
		shards_release_mem();
	else
		lease_release_mem(&le.l);
	kube_client_free(le.kc);
	close_fd(&le.efd);
	le.started = 0;
}
