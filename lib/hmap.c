/* A string-keyed hash map of pointers (see hmap.h). */
#include <stdlib.h>
#include <string.h>
#include "kop.h"
#include "hmap.h"
#include "banned.h"

static char tomb;
#define KOP_HMAP_TOMB (&tomb)

static uint32_t hash_str(const char *s)
{
	uint32_t h = 2166136261u;	/* FNV-1a */

	while (*s) {
		h ^= (unsigned char)*s++;
		h *= 16777619u;
	}
	return h;
}

void kop_hmap_init(struct kop_hmap *m)
{
	memset(m, 0, sizeof(*m));
}

void kop_hmap_borrow_keys(struct kop_hmap *m)
{
	m->borrowed = 1;
}

void kop_hmap_release(struct kop_hmap *m, void (*free_val)(void *))
{
	size_t i;
	int borrowed = m->borrowed;

	for (i = 0; i < m->cap; i++) {
		if (!m->ents[i].key || m->ents[i].key == KOP_HMAP_TOMB)
			continue;
		if (!borrowed)
			free(m->ents[i].key);
		if (free_val)
			free_val(m->ents[i].val);
	}
	free(m->ents);
	kop_hmap_init(m);
	m->borrowed = borrowed;
}

/* The slot holding key, or -1. */
static long find(const struct kop_hmap *m, const char *key, uint32_t h)
{
	size_t i, mask = m->cap - 1;

	if (!m->cap)
		return -1;
	for (i = h & mask;; i = (i + 1) & mask) {
		struct kop_hmap_ent *e = &m->ents[i];

		if (!e->key)
			return -1;
		if (e->key != KOP_HMAP_TOMB && e->hash == h && !strcmp(e->key, key))
			return (long)i;
	}
}

static void resize(struct kop_hmap *m, size_t cap)
{
	struct kop_hmap_ent *old = m->ents;
	size_t i, oldcap = m->cap;

	m->ents = kop_calloc(cap, sizeof(*m->ents));
	m->cap = cap;
	m->used = m->len;
	for (i = 0; i < oldcap; i++) {
		size_t j;

		if (!old[i].key || old[i].key == KOP_HMAP_TOMB)
			continue;
		for (j = old[i].hash & (cap - 1); m->ents[j].key; j = (j + 1) & (cap - 1))
			;
		m->ents[j] = old[i];
	}
	free(old);
}

void *kop_hmap_get(const struct kop_hmap *m, const char *key)
{
	long i = find(m, key, hash_str(key));

	return i < 0 ? NULL : m->ents[i].val;
}

void *kop_hmap_put(struct kop_hmap *m, const char *key, void *val)
{
	uint32_t h = hash_str(key);
	long i = find(m, key, h);
	size_t j;

	if (i >= 0) {
		void *old = m->ents[i].val;

		if (m->borrowed)
			m->ents[i].key = (char *)key;
		m->ents[i].val = val;
		return old;
	}
	if ((m->used + 1) * 4 >= m->cap * 3)
		resize(m, m->cap ? (m->len * 2 >= m->cap ? m->cap * 2 : m->cap) : 16);
	for (j = h & (m->cap - 1); m->ents[j].key && m->ents[j].key != KOP_HMAP_TOMB; j = (j + 1) & (m->cap - 1))
		;
	if (!m->ents[j].key)
		m->used++;
	m->ents[j].key = m->borrowed ? (char *)key : kop_strdup(key);
	m->ents[j].hash = h;
	m->ents[j].val = val;
	m->len++;
	return NULL;
}

void kop_hmap_fit(struct kop_hmap *m)
{
	size_t cap = 16;

	if (m->cap && !m->len) {
		free(m->ents);
		m->ents = NULL;
		m->cap = m->used = 0;
		return;
	}
	if (m->cap <= 16 || m->len * 8 >= m->cap)
		return;
	while (cap < m->len * 4)
		cap *= 2;
	resize(m, cap);
}

int64_t kop_hmap_expire(struct kop_hmap *m, int64_t (*left)(const void *val, int64_t now), int64_t now,
			void (*free_val)(void *), int64_t *due)
{
	size_t it = 0;
	const char *k;
	void *v;
	int64_t next = -1;

	if (*due < 0 && m->len)
		*due = now;	/* (entries came since it was empty) */
	if (*due < 0 || now < *due)
		return *due < 0 ? -1 : *due - now;
	while (kop_hmap_next(m, &it, &k, &v)) {
		int64_t l = left(v, now);

		if (l <= 0)
			free_val(kop_hmap_remove(m, k));
		else if (next < 0 || l < next)
			next = l;
	}
	kop_hmap_fit(m);
	*due = next < 0 ? -1 : now + next;
	return next;
}

void *kop_hmap_remove(struct kop_hmap *m, const char *key)
{
	long i = find(m, key, hash_str(key));
	void *v;

	if (i < 0)
		return NULL;
	v = m->ents[i].val;
	if (!m->borrowed)
		free(m->ents[i].key);
	m->ents[i].key = KOP_HMAP_TOMB;
	m->ents[i].val = NULL;
	m->len--;
	return v;
}

int kop_hmap_next(const struct kop_hmap *m, size_t *it, const char **key, void **val)
{
	while (*it < m->cap) {
		struct kop_hmap_ent *e = &m->ents[(*it)++];

		if (!e->key || e->key == KOP_HMAP_TOMB)
			continue;
		if (key)
			*key = e->key;
		if (val)
			*val = e->val;
		return 1;
	}
	return 0;
}
