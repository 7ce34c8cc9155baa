/*
 * The watchdog: jq 1.6 cannot be interrupted, so a program that never ends
 * holds the one reconcile loop. A thread says so, naming the primary, after
 * --watchdog and then at doubling intervals, instead of a silent hang.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "ireconcile.h"
#include "banned.h"

struct watchdog_state W = { PTHREAD_MUTEX_INITIALIZER, "", 0, 10000 };

void watchdog_mark(const char *key)
{
	pthread_mutex_lock(&W.mu);
	if (key)
		snprintf(W.key, sizeof(W.key), "%s", key);
	W.since = key ? kop_mono_ms() : 0;
	pthread_mutex_unlock(&W.mu);
}

void *watchdog(void *arg)
{
	int64_t seen = 0, next = W.first_ms;
	char key[sizeof(W.key)];
	struct timespec tick = { 0, 100 * 1000000L };

	(void)arg;
	for (;;) {
		int64_t since, now;

		nanosleep(&tick, NULL);
		now = kop_mono_ms();
		pthread_mutex_lock(&W.mu);
		since = W.since;
		memcpy(key, W.key, sizeof(key));
		pthread_mutex_unlock(&W.mu);
		if (since != seen) {
			seen = since;
			next = W.first_ms;
		}
		if (since && now - since >= next) {
			tool_logj(LOG_ERROR,
				  JV_OBJECT(jv_string("primary"), jv_string(key), jv_string("ms"),
					    jv_number((double)(now - since))),
				  "primary '%s': its reconcile has run for %.1f s (a program that never ends?); no "
				  "other primary is reconciled meanwhile", key, (double)(now - since) / 1000);
			next *= 2;
		}
	}
	return NULL;
}
