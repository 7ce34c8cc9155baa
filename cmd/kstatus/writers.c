/*
 * The writers: --concurrency threads, each with its own client (and so its
 * own connection), that write the operations main.c and window.c hand them.
 * An object's operations always go to the same writer (a hash of its kind,
 * namespace and name: writer_of), so they are written in the order they
 * came; different objects' are written side by side, and one object's
 * retries hold up only its writer. Results
 * come as operations finish; a line passed through waits for the operations
 * before it of its "primary" (of every primary when it names none), as
 * kapply's do.
 *
 * One lock, kstatus_lock, is held by whichever thread runs kstatus's code:
 * the main thread but while it waits for input or for room, a writer but
 * while its request or discovery waits for the server (request.c, status.c)
 * or it sleeps before a retry. So
 * the jv values, the caches and the logs are only ever touched by one
 * thread at a time, as before threads; only the waits overlap.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include "kstatus.h"
#include "shard.h"
#include "banned.h"

/* Jobs pending and lines held per writer, in all, before the main thread stops reading input (its memory bounded). */
#define WRITER_QUEUE 32

struct job {
	jv lines;		/* a status line, or event lines (repeats of one) */
	char *key;		/* op_key, or NULL */
	char *primary;		/* the line's "primary", or NULL */
	uint64_t seq;		/* its place in the input */
	int is_status;
	struct job *next;	/* in its writer's queue */
	struct job *older, *newer;	/* among the jobs not done, in input order */
};

/* A line passed through, held until the operations before it of its primary are done. */
struct held {
	jv line;		/* jv_invalid() when passed as its text */
	char *text;		/* writers_pass_text's line, len bytes */
	size_t len;
	char *primary;		/* NULL: every operation before it */
	uint64_t seq;
	int ours;		/* a result of ours (superseded), not a line passed through */
	struct held *next;
};

struct writer {
	pthread_t th;
	struct kube_client *client;
	struct job *head, *tail;
	pthread_cond_t cv;	/* a job queued, or stopping */
};

pthread_mutex_t kstatus_lock = PTHREAD_MUTEX_INITIALIZER;
_Thread_local struct kube_client *client;

static struct writer *writers;
static unsigned nwriters;
static unsigned pending;	/* jobs queued or being written */
static uint64_t seq;
static struct job *oldest, *newest;	/* the jobs not done */
static struct held *held_head, **held_tail = &held_head;
static unsigned nheld;
static int quitting;
static unsigned cap;		/* jobs pending and lines held at most before input waits */
static pthread_cond_t idle_cv;	/* a job done */
static pthread_cond_t wake_cv;	/* stopping: sleeps end */

/* Whether a line at seq s of primary p (NULL: of none) must still wait. */
static int must_wait(const char *p, uint64_t s)
{
	const struct job *j;

	for (j = oldest; j && j->seq < s; j = j->newer)
		if (!p || (j->primary && !strcmp(j->primary, p)))
			return 1;
	return 0;
}

static void pass(jv line, int ours)
{
	passing = !ours;
	emit(line);
	passing = 0;
}

/* The lines held that need wait no more, passed on. */
static void release_held(void)
{
	struct held **hp = &held_head, *h;

	while ((h = *hp)) {
		if (must_wait(h->primary, h->seq)) {
			hp = &h->next;
			continue;
		}
		if (!(*hp = h->next))
			held_tail = hp;
		if (h->text)
			tool_write_line(h->text, h->len);
		else
			pass(h->line, h->ours);
		free(h->text);
		free(h->primary);
		free(h);
		nheld--;
	}
}

static char *primary_of(jv line)
{
	jv p = line_primary(line);
	char *r = jv_get_kind(p) == JV_KIND_STRING ? kop_strdup(jv_string_value(p)) : NULL;

	jv_free(p);
	return r;
}

static void job_done(struct job *j)
{
	if (j->older)
		j->older->newer = j->newer;
	else
		oldest = j->newer;
	if (j->newer)
		j->newer->older = j->older;
	else
		newest = j->older;
	free(j->key);
	free(j->primary);
	free(j);
	pending--;
	if (held_head)
		release_held();
	pthread_cond_broadcast(&idle_cv);
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;

	client = w->client;
	pthread_mutex_lock(&kstatus_lock);
	for (;;) {
		struct job *j;

		while (!w->head && !quitting)
			pthread_cond_wait(&w->cv, &kstatus_lock);
		if (!(j = w->head))
			break;
		if (!(w->head = j->next))
			w->tail = NULL;
		if (j->is_status)
			do_status(j->lines, j->key);
		else
			do_event(j->lines);
		job_done(j);
	}
	pthread_mutex_unlock(&kstatus_lock);
	return NULL;
}

/* n writers, one per client (each taken: writers_stop frees it) */
int writers_start(unsigned n, struct kube_client **clients, char *err)
{
	sigset_t stop, old;
	pthread_condattr_t mono;
	unsigned i;

	writers = kop_calloc(n, sizeof(*writers));
	cap = n * WRITER_QUEUE;
	/* the timed waits on the monotonic clock */
	pthread_condattr_init(&mono);
	pthread_condattr_setclock(&mono, CLOCK_MONOTONIC);
	pthread_cond_init(&idle_cv, &mono);
	pthread_cond_init(&wake_cv, &mono);
	pthread_condattr_destroy(&mono);
	/* SIGTERM and SIGINT reach the main thread, whose poll() they end */
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	pthread_sigmask(SIG_BLOCK, &stop, &old);
	for (i = 0; i < n; i++) {
		writers[i].client = clients[i];
		pthread_cond_init(&writers[i].cv, NULL);
		if (pthread_create(&writers[i].th, NULL, writer_main, &writers[i])) {
			pthread_sigmask(SIG_SETMASK, &old, NULL);
			kop_error(err, "unable to start writer %u of %u", i + 1, n);
			return -1;
		}
		nwriters++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return 0;
}

/*
 * Which writer a line's operation goes to: FNV-1a (lib/shard.c's) of the object's kind,
 * namespace (the default one when it names none) and name, the parts an
 * Event's repeats are known by (event_key) and that its status names too:
 * an object's statuses and Events, and every repeat of one Event, on one
 * writer. (The API group is left out: an event line may not give it.)
 */
static unsigned writer_of(jv line, int is_status)
{
	struct op_names n;
	struct kop_buf b = KOP_BUF_INIT;
	unsigned w;

	op_names(line, is_status, &n);
	kop_buf_addf(&b, "%s/%s/%s", n.kind ? n.kind : "", n.ns && *n.ns ? n.ns : default_ns, n.name ? n.name : "");
	w = (unsigned)(kop_fnv1a64(b.buf, b.len) % nwriters);
	kop_buf_release(&b);
	op_names_release(&n);
	return w;
}

void writers_queue(jv lines, const char *key, int is_status)
{
	struct job *j = kop_calloc(1, sizeof(*j));
	jv first = is_status ? jv_copy(lines) : jv_array_get(jv_copy(lines), 0);
	struct writer *w = &writers[writer_of(jv_copy(first), is_status)];

	j->primary = primary_of(first);
	j->lines = lines;
	j->key = key ? kop_strdup(key) : NULL;
	j->is_status = is_status;
	j->seq = ++seq;
	if ((j->older = newest))
		newest->newer = j;
	else
		oldest = j;
	newest = j;
	if (w->tail)
		w->tail->next = j;
	else
		w->head = j;
	w->tail = j;
	pending++;
	pthread_cond_signal(&w->cv);
}

/* line (consumed), or else text (len bytes, copied when held), of primary (taken): passed on, or held. */
static void pass_or_hold(jv line, const char *text, size_t len, char *primary, int ours)
{
	struct held *h;

	if (!must_wait(primary, seq + 1)) {
		free(primary);
		if (text)
			tool_write_line(text, len);
		else
			pass(line, ours);
		return;
	}
	h = kop_calloc(1, sizeof(*h));
	h->line = line;
	h->text = text ? kop_strndup(text, len) : NULL;
	h->len = len;
	h->ours = ours;
	h->primary = primary;
	h->seq = ++seq;
	*held_tail = h;
	held_tail = &h->next;
	nheld++;
}

void writers_pass(jv line, int ours)
{
	char *p = primary_of(jv_copy(line));

	pass_or_hold(line, NULL, 0, p, ours);
}

void writers_pass_text(const char *text, size_t len, char *primary)
{
	pass_or_hold(jv_invalid(), text, len, primary, 0);
}

/* Waits on idle_cv for at most ms (the lock let go); a signal come meanwhile ends the retries' sleeps. */
static void idle_wait(long ms)
{
	struct timespec ts = kop_clock_after(CLOCK_MONOTONIC, ms);

	if (stopping)
		writers_wake();
	pthread_cond_timedwait(&idle_cv, &kstatus_lock, &ts);
}

void writers_drain(void)
{
	while (pending || held_head)
		idle_wait(100);
}

int writers_busy(void)
{
	return pending != 0;
}

int writers_full(void)
{
	return pending + nheld >= cap;
}

int writers_pending_for(const char *key)
{
	const struct job *j;

	for (j = oldest; key && j; j = j->newer)
		if (j->key && !strcmp(j->key, key))
			return 1;
	return 0;
}

void writers_wait_room(long ms)
{
	int64_t end = kop_mono_ms() + (ms > 0 ? ms : 0);

	while (writers_full() && !stopping && kop_mono_ms() < end)
		idle_wait(end - kop_mono_ms() < 100 ? end - kop_mono_ms() : 100);
}

void writers_sleep(unsigned ms)
{
	struct timespec ts = kop_clock_after(CLOCK_MONOTONIC, ms);

	while (!stopping && pthread_cond_timedwait(&wake_cv, &kstatus_lock, &ts) == 0)
		;
}

void writers_wake(void)
{
	pthread_cond_broadcast(&wake_cv);
}

void writers_stop(void)
{
	unsigned i;

	if (stopping)
		writers_wake();
	writers_drain();
	quitting = 1;
	for (i = 0; i < nwriters; i++)
		pthread_cond_signal(&writers[i].cv);
	pthread_mutex_unlock(&kstatus_lock);
	for (i = 0; i < nwriters; i++) {
		pthread_join(writers[i].th, NULL);
		pthread_cond_destroy(&writers[i].cv);
		kube_client_free(writers[i].client);
	}
	pthread_cond_destroy(&idle_cv);
	pthread_cond_destroy(&wake_cv);
	pthread_mutex_lock(&kstatus_lock);
	free(writers);
	writers = NULL;
	nwriters = 0;
}
