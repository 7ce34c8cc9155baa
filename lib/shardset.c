/*
 * The shard Leases of one replica: its member Lease, the members' view read
 * from the leases list, the targets, and the acquire, renew and release of
 * the range Leases through lib/lease.c (shardset.h says the rules).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "shardset.h"
#include "banned.h"

#define BIT(i) ((uint64_t)1 << (i))

static unsigned count(uint64_t x)
{
	return (unsigned)__builtin_popcountll(x);
}

static int64_t system_mono_ms(void *ctx)
{
	(void)ctx;
	return kop_mono_ms();
}

static int64_t system_wall_us(void *ctx)
{
	(void)ctx;
	return kop_wall_ms() * 1000;
}

const struct shardset_clock shardset_system_clock = { system_mono_ms, system_wall_us, NULL };

static int64_t mono(const struct shardset_clock *c)
{
	return c->mono_ms(c->ctx);
}

static int64_t wall(const struct shardset_clock *c)
{
	return c->wall_us(c->ctx);
}

/*
 * lease.c's calls through io, with c as the clock that stamps what they
 * read (lease_io.mono_ms: the time after the answer, never earlier).
 */
static struct lease_io timed(const struct lease_io *io, const struct shardset_clock *c)
{
	struct lease_io t = *io;

	t.mono_ms = c->mono_ms;
	t.clock_ctx = c->ctx;
	return t;
}

/* One lease.c round on l, started at *t (read now). */
static int try_lease(struct lease *l, const struct lease_io *io, const struct shardset_clock *c, int64_t *t,
		     char *err)
{
	struct lease_io tio = timed(io, c);

	*t = mono(c);
	return lease_try_acquire_or_renew(l, &tio, *t, wall(c), err);
}

static int release_lease(struct lease *l, const struct lease_io *io, const struct shardset_clock *c, char *err)
{
	struct lease_io tio = timed(io, c);

	return lease_release(l, &tio, wall(c), err);
}

/* Keeps the first error of a round in err. */
static void note(char *err, int *failed, const char *e)
{
	if (!*failed)
		snprintf(err, KOP_ERRLEN, "%s", e);
	*failed = 1;
}

int shardset_init(struct shardset *s, const char *ns, const char *prefix, const char *identity, unsigned nranges,
		  long duration_s, int64_t renew_deadline_ms, char *err)
{
	struct kop_buf b = KOP_BUF_INIT;
	unsigned i;

	memset(s, 0, sizeof(*s));
	if (!kop_dns1123(ns, 1))
		return kop_error(err, "invalid namespace '%s': not a DNS-1123 label", ns);
	if (nranges < 1 || nranges > SHARDSET_MAX)
		return kop_error(err, "invalid number of shard ranges %u: from 1 to %d", nranges, SHARDSET_MAX);
	if (duration_s < 1)
		return kop_error(err, "invalid lease duration %ld s: at least 1 s", duration_s);
	if (renew_deadline_ms <= 0 || renew_deadline_ms >= (int64_t)duration_s * 1000)
		return kop_error(err, "invalid renew deadline %lld ms: it must be positive and below the lease "
				 "duration (%ld s)", (long long)renew_deadline_ms, duration_s);
	kop_buf_addf(&b, "%s-member-%s", prefix, identity);
	if (!kop_dns1123(b.buf, 0)) {
		kop_error(err, "invalid lease name '%s': not a DNS-1123 subdomain (prefix '%s', identity '%s')", b.buf,
			  prefix, identity);
		kop_buf_release(&b);
		return -1;
	}
	lease_init(&s->member, ns, b.buf, identity, duration_s);
	kop_buf_reset(&b);
	kop_buf_addf(&b, "%s-shard-%02u", prefix, nranges - 1);
	if (!kop_dns1123(b.buf, 0)) {
		kop_error(err, "invalid lease name '%s': not a DNS-1123 subdomain (prefix '%s')", b.buf, prefix);
		kop_buf_release(&b);
		lease_release_mem(&s->member);
		return -1;
	}
	s->ns = kop_strdup(ns);
	s->prefix = kop_strdup(prefix);
	s->identity = kop_strdup(identity);
	kop_buf_reset(&b);
	kop_buf_addf(&b, "%s-member-", prefix);
	s->member_prefix = kop_strdup(b.buf);
	kop_buf_reset(&b);
	kop_buf_addf(&b, "%s-shard-", prefix);
	s->shard_prefix = kop_buf_detach(&b, NULL);
	s->n = nranges;
	s->duration_s = duration_s;
	s->renew_deadline_ms = renew_deadline_ms;
	s->range = kop_calloc(nranges, sizeof(*s->range));
	s->renewed_ms = kop_calloc(nranges, sizeof(*s->renewed_ms));
	for (i = 0; i < nranges; i++) {
		kop_buf_addf(&b, "%s%02u", s->shard_prefix, i);
		lease_init(&s->range[i], ns, b.buf, identity, duration_s);
		kop_buf_reset(&b);
	}
	kop_buf_release(&b);
	s->rank = -1;
	return 0;
}

static void peer_free(struct shardset_peer *p)
{
	lease_release_mem(&p->l);
	free(p->identity);
}

void shardset_release_mem(struct shardset *s)
{
	unsigned i;
	size_t j;

	if (s->range)
		for (i = 0; i < s->n; i++)
			lease_release_mem(&s->range[i]);
	if (s->ns)
		lease_release_mem(&s->member);
	for (j = 0; j < s->npeers; j++)
		peer_free(&s->peers[j]);
	free(s->peers);
	free(s->range);
	free(s->renewed_ms);
	free(s->ns);
	free(s->prefix);
	free(s->identity);
	free(s->member_prefix);
	free(s->shard_prefix);
	memset(s, 0, sizeof(*s));
	s->rank = -1;
}

const char *shardset_range_lease(const struct shardset *s, unsigned i)
{
	return i < s->n ? s->range[i].name : NULL;
}

void shardset_view_get(const struct shardset *s, struct shardset_view *v)
{
	memset(v, 0, sizeof(*v));
	v->held = s->held;
	v->pending = s->pending;
	if (s->n)
		memcpy(v->renewed_ms, s->renewed_ms, s->n * sizeof(*s->renewed_ms));
	v->renew_deadline_ms = s->renew_deadline_ms;
}

/* The ranges of mask renewed within the renew deadline at now_ms. */
static uint64_t renewed_within(const struct shardset_view *v, uint64_t mask, int64_t now_ms)
{
	uint64_t u = 0;
	unsigned i;

	for (i = 0; i < SHARDSET_MAX; i++)
		if ((mask & BIT(i)) && now_ms - v->renewed_ms[i] < v->renew_deadline_ms)
			u |= BIT(i);
	return u;
}

uint64_t shardset_view_usable(const struct shardset_view *v, int64_t now_ms)
{
	return renewed_within(v, v->held, now_ms);
}

uint64_t shardset_view_winding(const struct shardset_view *v, int64_t now_ms)
{
	return renewed_within(v, v->pending, now_ms);
}

uint64_t shardset_usable(const struct shardset *s, int64_t now_ms)
{
	struct shardset_view v;

	shardset_view_get(s, &v);
	return shardset_view_usable(&v, now_ms);
}

/* The range a lease name is for: its index, or -1 when it is not exactly one of ours. */
static int range_of(const struct shardset *s, const char *name)
{
	size_t pl = strlen(s->shard_prefix);
	const char *d = name + pl;
	int i;

	if (strncmp(name, s->shard_prefix, pl) || d[0] < '0' || d[0] > '9' || d[1] < '0' || d[1] > '9' || d[2])
		return -1;
	i = (d[0] - '0') * 10 + (d[1] - '0');
	return (unsigned)i < s->n ? i : -1;
}

static struct shardset_peer *peer(struct shardset *s, const char *name, const char *identity)
{
	struct shardset_peer *p;
	size_t j;

	for (j = 0; j < s->npeers; j++)
		if (!strcmp(s->peers[j].identity, identity))
			return &s->peers[j];
	if (s->npeers == s->peers_cap) {
		s->peers_cap = s->peers_cap ? 2 * s->peers_cap : 8;
		s->peers = kop_realloc(s->peers, s->peers_cap * sizeof(*s->peers));
	}
	p = &s->peers[s->npeers++];
	lease_init(&p->l, s->ns, name, identity, s->duration_s);
	p->identity = kop_strdup(identity);
	p->seen = 0;
	return p;
}

static int peer_cmp(const void *a, const void *b)
{
	return strcmp(((const struct shardset_peer *)a)->identity, ((const struct shardset_peer *)b)->identity);
}

static int peer_live(const struct shardset_peer *p, int64_t now_ms)
{
	return !strcmp(lease_holder(&p->l), p->identity) && lease_observed_valid(&p->l, now_ms);
}

static int list_error(const struct shardset *s, long code, jv resp, const char *rerr, char *err)
{
	jv msg = jv_get_kind(resp) == JV_KIND_OBJECT ? jv_object_get(jv_copy(resp), jv_string("message")) : jv_null();

	if (code == 0)
		kop_error(err, "unable to list the leases of namespace '%s': %s", s->ns, rerr);
	else if (jv_get_kind(msg) == JV_KIND_STRING)
		kop_error(err, "unable to list the leases of namespace '%s': %ld %s", s->ns, code, jv_string_value(msg));
	else
		kop_error(err, "unable to list the leases of namespace '%s': HTTP %ld", s->ns, code);
	jv_free(msg);
	jv_free(resp);
	return -1;
}

/*
 * Reads the leases of the namespace: the member Leases into peers (sorted
 * by identity; those gone are forgotten), the range Leases we do not hold
 * into their struct lease. *present gets the ranges that have a Lease.
 */
static int list_leases(struct shardset *s, const struct lease_io *io, const struct shardset_clock *c,
		       uint64_t *present, char *err)
{
	char rerr[KOP_ERRLEN] = "";
	jv resp = jv_null(), items;
	long code = io->request(io->ctx, "GET", s->member.collection, jv_invalid(), &resp, rerr);
	int64_t now_ms = mono(c);	/* after the answer, as lease.c stamps its reads (timed) */
	size_t mpl = strlen(s->member_prefix), j, k;
	int i, len;

	*present = 0;
	if (code < 200 || code >= 300)
		return list_error(s, code, resp, rerr, err);
	items = jv_get_kind(resp) == JV_KIND_OBJECT ? jv_object_get(jv_copy(resp), jv_string("items")) : jv_null();
	jv_free(resp);
	if (jv_get_kind(items) != JV_KIND_ARRAY) {
		jv_free(items);
		return kop_error(err, "unable to list the leases of namespace '%s': the answer has no items", s->ns);
	}
	for (j = 0; j < s->npeers; j++)
		s->peers[j].seen = 0;
	len = jv_array_length(jv_copy(items));
	for (i = 0; i < len; i++) {
		jv item = jv_array_get(jv_copy(items), i);
		jv name = jv_get_kind(item) == JV_KIND_OBJECT
			? jv_getpath(jv_copy(item), JV_ARRAY(jv_string("metadata"), jv_string("name"))) : jv_null();
		const char *nm = jv_get_kind(name) == JV_KIND_STRING ? jv_string_value(name) : "";
		int r = range_of(s, nm);

		if (r >= 0) {
			*present |= BIT(r);
			if (!(s->held & BIT(r)))
				lease_observe(&s->range[r], jv_copy(item), now_ms);
		} else if (!strncmp(nm, s->member_prefix, mpl) && nm[mpl]) {
			struct shardset_peer *p = peer(s, nm, nm + mpl);

			lease_observe(&p->l, jv_copy(item), now_ms);
			p->seen = 1;
		}
		jv_free(name);
		jv_free(item);
	}
	jv_free(items);
	for (j = k = 0; j < s->npeers; j++) {
		if (s->peers[j].seen)
			s->peers[k++] = s->peers[j];
		else
			peer_free(&s->peers[j]);
	}
	s->npeers = k;
	if (s->npeers)
		qsort(s->peers, s->npeers, sizeof(*s->peers), peer_cmp);
	return 0;
}

/* The member Leases out for a Lease duration past their expiry, deleted if unchanged since we read them. */
static int collect_members(struct shardset *s, const struct lease_io *io, int64_t now_ms, char *err)
{
	int64_t dur_ms = (int64_t)s->duration_s * 1000;
	int failed = 0;
	size_t j;

	for (j = 0; j < s->npeers; j++) {
		struct shardset_peer *p = &s->peers[j];
		char rerr[KOP_ERRLEN] = "";
		jv rv, body, resp = jv_null();
		long code;

		if (!strcmp(p->identity, s->identity) || lease_observed_valid(&p->l, now_ms - dur_ms))
			continue;
		rv = jv_getpath(jv_copy(p->l.observed), JV_ARRAY(jv_string("metadata"), jv_string("resourceVersion")));
		if (jv_get_kind(rv) != JV_KIND_STRING) {
			jv_free(rv);
			continue;
		}
		body = JV_OBJECT(jv_string("apiVersion"), jv_string("v1"), jv_string("kind"), jv_string("DeleteOptions"),
				 jv_string("preconditions"), JV_OBJECT(jv_string("resourceVersion"), rv));
		code = io->request(io->ctx, "DELETE", p->l.path, body, &resp, rerr);
		/* 404: gone already; 409: renewed (or deleted and made again) meanwhile. */
		if (code == 0 || (code >= 300 && code != 404 && code != 409)) {
			jv msg = jv_get_kind(resp) == JV_KIND_OBJECT ? jv_object_get(jv_copy(resp), jv_string("message"))
								      : jv_null();

			struct kop_buf m = KOP_BUF_INIT;

			kop_buf_addf(&m, "unable to delete lease '%s/%s': ", s->ns, p->l.name);
			if (code == 0)
				kop_buf_adds(&m, rerr);
			else if (jv_get_kind(msg) == JV_KIND_STRING)
				kop_buf_addf(&m, "%ld %s", code, jv_string_value(msg));
			else
				kop_buf_addf(&m, "HTTP %ld", code);
			jv_free(msg);
			note(err, &failed, m.buf);
			kop_buf_release(&m);
		}
		jv_free(resp);
	}
	return failed ? -1 : 0;
}

/* Whether range i, not held, may be taken by us per the last read of it. */
static int range_free(const struct shardset *s, unsigned i, uint64_t present, int64_t now_ms)
{
	const struct lease *l = &s->range[i];
	const char *h = lease_holder(l);

	return !(present & BIT(i)) || !*h || !strcmp(h, s->identity) || !lease_observed_valid(l, now_ms);
}

int64_t shardset_next_free(const struct shardset *s, int64_t now_ms)
{
	int64_t first = 0, at;
	unsigned i;
	size_t k;

	if (!s->listed || !s->joined)
		return 0;
	/* a member that stops renewing leaves: the shares change */
	for (k = 0; k < s->npeers; k++) {
		if (!s->peers[k].seen || !strcmp(s->peers[k].identity, s->identity) || !peer_live(&s->peers[k], now_ms))
			continue;
		at = lease_observed_expiry(&s->peers[k].l);
		if (!first || at < first)
			first = at;
	}
	/* a range another holds that is not renewed becomes free */
	for (i = 0; i < s->n; i++) {
		const struct lease *l = &s->range[i];

		if (((s->held | s->pending) & BIT(i)) || !*lease_holder(l) || !strcmp(lease_holder(l), s->identity) ||
		    !lease_observed_valid(l, now_ms))
			continue;
		at = lease_observed_expiry(l);
		if (!first || at < first)
			first = at;
	}
	return first;
}

int shardset_handover(struct shardset *s, const struct lease_io *io, const struct shardset_clock *c, char *err)
{
	char e[KOP_ERRLEN];
	int failed = 0;
	unsigned i;

	for (i = 0; i < s->n; i++) {
		if (!(s->pending & BIT(i)) || (s->busy & BIT(i)))
			continue;	/* (still worked for: kept) */
		if (release_lease(&s->range[i], io, c, e) < 0)
			note(err, &failed, e);
		else
			s->pending &= ~BIT(i);
	}
	return failed ? -1 : 0;
}

int shardset_round(struct shardset *s, const struct lease_io *io, const struct shardset_clock *c, char *err)
{
	char e[KOP_ERRLEN];
	uint64_t before = s->held, keep = 0, present = 0;
	int failed = 0, r;
	unsigned i, j, start;
	int64_t t;
	size_t k;

	/* 1. The ranges dropped last round: the caller has stopped working for them. */
	if (shardset_handover(s, io, c, e) < 0)
		note(err, &failed, e);

	/* 2. Membership and my target. */
	if (try_lease(&s->member, io, c, &t, e) < 0)
		note(err, &failed, e);
	s->live = 0;
	s->rank = -1;
	s->listed = list_leases(s, io, c, &present, e) == 0;
	if (!s->listed) {
		note(err, &failed, e);
	} else {
		t = mono(c);
		for (k = 0; k < s->npeers; k++) {
			if (!peer_live(&s->peers[k], t))
				continue;
			if (!strcmp(s->peers[k].identity, s->identity))
				s->rank = (int)s->live;
			s->live++;
		}
		s->target = s->rank < 0 ? 0 : s->n / s->live + ((unsigned)s->rank < s->n % s->live);
		if (s->rank == 0 && collect_members(s, io, t, e) < 0)
			note(err, &failed, e);
	}

	/* 3. Renew what I hold, up to my target; drop the rest (released at the next handover). */
	for (i = 0; i < s->n; i++) {
		if (!(before & BIT(i)))
			continue;
		if (s->listed && count(keep) >= s->target) {
			s->pending |= BIT(i);
			continue;
		}
		r = try_lease(&s->range[i], io, c, &t, e);
		if (r == 1) {
			s->renewed_ms[i] = t;
			keep |= BIT(i);
		} else if (r < 0) {
			note(err, &failed, e);
			if (mono(c) - s->renewed_ms[i] < s->renew_deadline_ms)
				keep |= BIT(i);
		}
	}

	/*
	 * 4. Below my target: take free ranges, from my own slice on. At it: release ranges still in my name.
	 * Not in the first round that lists me: replicas started together first see each other.
	 */
	if (s->listed && s->joined) {
		start = s->rank < 0 ? 0 : (unsigned)s->rank * s->n / s->live;
		for (j = 0; j < s->n; j++) {
			i = (start + j) % s->n;
			if (((before | keep | s->pending) & BIT(i)) || !range_free(s, i, present, mono(c)))
				continue;
			if (count(keep) < s->target) {
				r = try_lease(&s->range[i], io, c, &t, e);
				if (r == 1) {
					s->renewed_ms[i] = t;
					keep |= BIT(i);
				} else if (r < 0) {
					note(err, &failed, e);
				}
			} else if (!strcmp(lease_holder(&s->range[i]), s->identity)) {
				if (release_lease(&s->range[i], io, c, e) < 0)
					note(err, &failed, e);
			}
		}
	}

	if (s->listed && s->rank >= 0)
		s->joined = 1;
	s->held = keep;
	s->gained = keep & ~before;
	s->lost = before & ~keep;
	return failed ? -1 : 0;
}

int shardset_release(struct shardset *s, const struct lease_io *io, const struct shardset_clock *c, char *err)
{
	char e[KOP_ERRLEN];
	int failed = 0;
	unsigned i;

	s->lost = s->held;
	s->gained = 0;
	s->busy = 0;	/* (the caller has stopped all work) */
	for (i = 0; i < s->n; i++)
		if ((s->held & BIT(i)) || s->range[i].leader)
			s->pending |= BIT(i);
	s->held = 0;
	if (shardset_handover(s, io, c, e) < 0)
		note(err, &failed, e);
	if (release_lease(&s->member, io, c, e) < 0)
		note(err, &failed, e);
	return failed ? -1 : 0;
}
