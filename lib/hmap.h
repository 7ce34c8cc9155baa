#ifndef KOP_HMAP_H
#define KOP_HMAP_H
/*
 * A string-keyed hash map of pointers (open addressing, linear probing).
 * The map owns copies of its keys (unless told to borrow them); values are
 * borrowed pointers the caller owns (kop_hmap_release can free them).
 * Iteration order is unspecified.
 */
#include <stddef.h>
#include <stdint.h>

struct kop_hmap_ent {
	char *key;		/* NULL: empty slot; KOP_HMAP_TOMB: deleted */
	uint32_t hash;
	void *val;
};

struct kop_hmap {
	struct kop_hmap_ent *ents;
	size_t cap;		/* a power of two, or 0 */
	size_t len;		/* live entries */
	size_t used;		/* live + deleted slots */
	int borrowed;		/* keys are the caller's (kop_hmap_borrow_keys) */
};
#define KOP_HMAP_INIT { NULL, 0, 0, 0, 0 }

void kop_hmap_init(struct kop_hmap *m);
/*
 * From now on m (empty) keeps the keys it is given, not copies: each must
 * stay alive and unchanged while its entry is in m (a value's own key, say,
 * for a value freed only once removed). A put of a key already in m keeps
 * the new pointer. Kept by kop_hmap_release.
 */
void kop_hmap_borrow_keys(struct kop_hmap *m);
/* Frees the keys (unless borrowed) and the table; free_val (may be NULL) is called on each value. */
void kop_hmap_release(struct kop_hmap *m, void (*free_val)(void *));
void *kop_hmap_get(const struct kop_hmap *m, const char *key);
/* Sets key to val (not NULL); returns the value it replaces, or NULL. */
void *kop_hmap_put(struct kop_hmap *m, const char *key, void *val);
/* Removes key; returns its value, or NULL when absent. */
void *kop_hmap_remove(struct kop_hmap *m, const char *key);
/*
 * Gives back the slots of a table that has mostly emptied (after a burst):
 * resized to four times its entries when fewer than an eighth of its slots
 * hold one, freed when none does. Not while an iteration is under way.
 */
void kop_hmap_fit(struct kop_hmap *m);
/*
 * The entries whose left(val, now) is 0 or less removed (their values given
 * to free_val), then the table fit: returns the least left of those that
 * stay, -1 when none does. *due (the caller's, -1 at first) is when that is:
 * the table is looked at only from then, or once it holds entries again
 * after it was empty; entries added meanwhile must not be due sooner.
 */
int64_t kop_hmap_expire(struct kop_hmap *m, int64_t (*left)(const void *val, int64_t now), int64_t now,
			void (*free_val)(void *), int64_t *due);
/*
 * Iteration: size_t it = 0; const char *k; void *v;
 * while (kop_hmap_next(m, &it, &k, &v)) ...
 * Removing the entry just returned is allowed; adding during iteration is not.
 */
int kop_hmap_next(const struct kop_hmap *m, size_t *it, const char **key, void **val);

#endif
