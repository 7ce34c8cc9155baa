/*
 * In-flight writes: an operation sent and not yet seen back is not sent
 * again (README); and the creates a primary waits for, so that children it
 * created together reconcile it once, when the last of them is seen, not
 * once each as they land. Results of the writes are feedback.c's.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/sha.h>
#include "ireconcile.h"
#include "banned.h"

void flight_free(void *v)
{
	struct flight *f = v;

	free(f->live_rv);
	free(f->answer_rv);
	free(f->pkey);
	free(f->ztext);
	free(f);
}

void flight_forget(const char *fkey)
{
	struct flight *f = kop_hmap_remove(&E.flights, fkey);

	if (f) {
		flight_unseen_clear(f);
		flight_free(f);
	}
}

/* The write fkey, just sent for p, creates its object (not in the view). */
void flight_mark_unseen(struct prim *p, const char *fkey)
{
	struct flight *f = kop_hmap_get(&E.flights, fkey);

	if (f && !f->unseen) {
		f->unseen = 1;
		p->creating++;
	}
}

/* f is no longer a create on its way: seen, failed, sent again or forgotten. */
void flight_unseen_clear(struct flight *f)
{
	struct prim *p;

	if (!f->unseen)
		return;
	f->unseen = 0;
	if (f->pkey && (p = prim_get(f->pkey, 0)) && p->creating > 0)
		p->creating--;
}

/*
 * o (a child) has just come into the view. 1 when it is one of its
 * primary's creates and others are still on their way: its reconcile can
 * wait for them (nothing it would do differently is in yet), at most
 * LANDED_WAIT_MS (a create whose object never shows). Else 0: reconcile.
 * (A create of an `adopt: false` kind is forgotten as its object is seen,
 * view.c, before this: it reconciles at once, as what it gates waits for it.)
 */
int flight_landed(struct obj *o)
{
	struct prim *p = o->prim;
	char *fkey = join2("apply", o->key);
	struct flight *f = kop_hmap_get(&E.flights, fkey);

	free(fkey);
	if (!f || !f->unseen || !f->pkey || strcmp(f->pkey, p->key))
		return 0;
	flight_unseen_clear(f);
	if (p->creating <= 0)
		return 0;
	schedule(p, kop_mono_ms() + LANDED_WAIT_MS);
	p->landing = 1;
	return 1;
}

/*
 * The child o is at the resourceVersion an apply of it was answered with
 * (feedback.c): that apply landed, so it is no longer in flight, and o holds
 * what was sent (apply_pending's first case, told as soon as both the
 * answer and the object are in rather than at the next reconcile: a
 * thousand primaries' creates are not all kept until each is reconciled).
 * Called as either comes in.
 */
void flight_apply_seen(struct obj *o)
{
	char *fkey;
	struct flight *f;

	if (!E.flights.len)
		return;
	fkey = join2("apply", o->key);
	f = kop_hmap_get(&E.flights, fkey);

	if (f && f->has_obj && !f->failed && f->answer_rv && !f->unseen && !strcmp(f->answer_rv, obj_rv(o))) {
		log_debug("'%s' is at the resourceVersion its apply was answered with (%s): no longer in flight",
			  o->key, f->answer_rv);
		match_set(o, f->memo);
		flight_forget(fkey);
	}
	free(fkey);
}

/* Whether f may still land: not failed, and kapply or kstatus said it was
 * written (--feedback) or it was sent less than FLIGHT_TIMEOUT_MS ago. */
int flight_alive(const struct flight *f, int64_t now)
{
	return !f->failed && (f->acked || now - f->at < FLIGHT_TIMEOUT_MS);
}

/*
 * 1: send now (remembered as in flight); 0: the same operation is in flight
 * against the same live object, or failed and waits for the backoff.
 */
int flight_check_text(struct prim *p, const char *fkey, const char *text, size_t len, const char *live_rv,
		      int64_t now)
{
	struct flight *f = kop_hmap_get(&E.flights, fkey);
	unsigned char d[SHA256_DIGEST_LENGTH];

	kop_sha256(text, len, d);
	if (f && !memcmp(f->sent, d, sizeof(d))) {
		if (f->failed && now < f->retry_at) {
			schedule(p, f->retry_at);
			return 0;
		}
		if (flight_alive(f, now) && !strcmp(f->live_rv, live_rv))
			return 0;
	}
	if (!f) {
		f = kop_calloc(1, sizeof(*f));
		kop_hmap_put(&E.flights, fkey, f);
	}
	flight_unseen_clear(f);	/* (the caller says whether this one creates) */
	memcpy(f->sent, d, sizeof(d));
	free(f->pkey);
	f->pkey = kop_strdup(p->key);
	free(f->live_rv);
	f->live_rv = kop_strdup(live_rv);
	f->at = now;
	f->failed = 0;
	f->acked = 0;
	free(f->answer_rv);
	f->answer_rv = NULL;
	f->has_obj = 0;
	free(f->ztext);
	f->ztext = NULL;
	return 1;
}

/*
 * Whether the apply fkey of the object whose applied digest (the memo
 * flight_sent_object keeps) is memo is on its way against the live object
 * at live_rv: what flight_check_text would answer (0) for its text, told
 * without making it. A failed one is left to flight_check_text.
 */
int flight_on_way(const char *fkey, const unsigned char *memo, const char *live_rv, int64_t now)
{
	struct flight *f = kop_hmap_get(&E.flights, fkey);

	return f && f->has_obj && flight_alive(f, now) && !memcmp(f->memo, memo, sizeof(f->memo)) &&
	       !strcmp(f->live_rv, live_rv);
}

/*
 * What the apply just let through flight_check_text (text, len) was: the
 * rendered object of index r (>= 0) of p's render, or that text; status:
 * whether it has a status. memo: the comparison's memo key.
 */
void flight_sent_object(struct prim *p, const char *fkey, const unsigned char *memo, int r, int status,
			const char *text, size_t len)
{
	struct flight *f = kop_hmap_get(&E.flights, fkey);

	if (!f)
		return;
	memcpy(f->memo, memo, sizeof(f->memo));
	f->has_status = status;
	f->rindex = r;
	if (r >= 0) {
		memcpy(f->rkey, p->render_key, sizeof(f->rkey));
	} else if (!(f->zlen = compress_text(text, len, &f->ztext, NULL))) {
		return;	/* unknown: never pending */
	}
	f->len = len;
	f->has_obj = 1;
}

int flight_check(struct prim *p, const char *fkey, jv sent, const char *live_rv, int64_t now)
{
	size_t len;
	char *s = kop_json_dump_len(jv_copy(sent), &len);
	int r = flight_check_text(p, fkey, s, len, live_rv, now);

	free(s);
	return r;
}

/*
 * A create p sent whose outcome is not known yet (the object key, else
 * NULL): not failed, and the object not seen since (view.c forgets the
 * flight when it is); with --feedback for as long as its result takes (once
 * it says the object was written, until the watch shows it), else for up
 * to FLIGHT_TIMEOUT_MS, when p is reconciled again. Its finalizer waits for
 * it: removed now, the object would be made for a primary that is gone,
 * and nobody would delete it.
 */
const char *flight_create_pending(struct prim *p, int64_t now)
{
	size_t it = 0;
	const char *k;
	void *v;

	while (kop_hmap_next(&E.flights, &it, &k, &v)) {
		struct flight *f = v;

		if (strncmp(k, "create|", 7) || !f->pkey || strcmp(f->pkey, p->key) || f->failed)
			continue;
		if (!E.feedback && !f->acked && now - f->at >= FLIGHT_TIMEOUT_MS)
			continue;
		if (!E.feedback && !f->acked)
			schedule(p, f->at + FLIGHT_TIMEOUT_MS);
		return k + 7;
	}
	return NULL;
}
