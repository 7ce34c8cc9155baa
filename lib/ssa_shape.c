/*
 * The field sets of shapes met before. The field set of a map or list
 * depends on its shape alone: the mode, its keys, which members are null,
 * and, as the listinfo types its lists, their elements' keys; not on the
 * other values it holds. A controller creates each Pod from a template like
 * hundreds before it, an apply sends a spec shaped as every instance's, a
 * status write adds the conditions every such object gets: the set of such
 * a map or list that ssa_fs_value is asked for (below the top, and out of
 * metadata, where which keys count is a matter of the path) is looked up by
 * a digest of that shape, made by a walk that mirrors fs_value's
 * (ssa_fieldset.c) and reads the listinfo as it does (a schema changed
 * since gives other tokens) but builds nothing, and kept sorted and
 * interned, as managedFields store it. The table is the process's: callers
 * serialize, as for ssa_intern.c's.
 */
#include <stdint.h>
#include <string.h>
#include "ssa-priv.h"
#include "banned.h"

/* Two 64-bit digests over the same tokens (FNV-1a, and a multiply-xorshift mix): 128 bits, so that
 * two shapes met in one server's life do not share one by chance. */
struct shape {
	uint64_t a, b;
};

static void feed(struct shape *h, const void *p, size_t n)
{
	const unsigned char *c = p;
	size_t i;

	for (i = 0; i < n; i++) {
		h->a = (h->a ^ c[i]) * 0x100000001b3ULL;
		h->b = ((h->b ^ c[i]) * 0x9e3779b97f4a7c15ULL);
		h->b ^= h->b >> 29;
	}
}

/* A token: its tag, then n bytes of text at s, if any, with their length (no two token
 * sequences read alike). */
static void token(struct shape *h, char tag, const char *s, uint32_t n)
{
	feed(h, &tag, 1);
	if (s) {
		feed(h, &n, sizeof(n));
		feed(h, s, n);
	}
}

/* A token of the string str (borrowed). */
static void token_jv(struct shape *h, char tag, jv str)
{
	token(h, tag, jv_string_value(str), (uint32_t)jv_string_length_bytes(jv_copy(str)));
}

/* What fs_value(w, v, mode) reads of v (borrowed), branch for branch, the listinfo at each path
 * included: its result is a function of the tokens fed here and of the mode (the caller's). A
 * change to one is a change to the other. */
static void shape_of(struct walk *w, jv v, struct shape *h)
{
	jv entry;
	enum lt t;

	if (jv_get_kind(v) == JV_KIND_OBJECT) {
		t = ssa_list_type(w, &entry);
		jv_free(entry);
		if (t == LT_ATOMIC || jv_object_length(jv_copy(v)) == 0) {
			token(h, 'E', NULL, 0);
			return;
		}
		token(h, 'O', NULL, 0);
		jv_object_foreach(v, k, c) {
			const char *ks = jv_string_value(k);

			if (jv_get_kind(c) != JV_KIND_NULL && !ssa_skipped_key(w, ks)) {
				size_t mark = ssa_pat_field(w, ks);

				token_jv(h, 'M', k);
				shape_of(w, c, h);
				ssa_pat_pop(w, mark);
			}
			jv_free(k);
			jv_free(c);
		}
		token(h, 'o', NULL, 0);
		return;
	}
	if (jv_get_kind(v) != JV_KIND_ARRAY) {
		token(h, 'S', NULL, 0);
		return;
	}
	t = ssa_array_type(w, &entry);
	if (t == LT_ATOMIC || jv_array_length(jv_copy(v)) == 0) {
		jv_free(entry);
		token(h, 'E', NULL, 0);
		return;
	}
	token(h, t == LT_MAP ? 'L' : 'T', NULL, 0);
	size_t mark = ssa_pat_elem(w);
	jv_array_foreach(v, i, e) {
		jv key = ssa_list_elem_key(t, entry, e);

		if (jv_get_kind(key) == JV_KIND_STRING) {
			token_jv(h, 'K', key);
			if (t == LT_MAP)
				shape_of(w, e, h);
		}
		jv_free(key);
		jv_free(e);
	}
	ssa_pat_pop(w, mark);
	jv_free(entry);
	token(h, 'l', NULL, 0);
}

/* Direct-mapped: a slot holds the last shape that hashed to it. */
#define SLOTS 1024
static struct slot {
	struct shape h;
	jv set;		/* sorted, interned; invalid (all zero bits): an empty slot */
} slots[SLOTS];

/* Whether the set of v at the walk's path is looked up by its shape: a map or a list below the
 * top, out of metadata (where the keys skipped and the maps not marked are a matter of the path). */
int ssa_by_shape(const struct walk *w, jv v)
{
	jv_kind k = jv_get_kind(v);

	return (k == JV_KIND_OBJECT || k == JV_KIND_ARRAY) && w->pat.len &&
	       !(strcspn(w->pat.buf, ".[") == 8 && !memcmp(w->pat.buf, "metadata", 8));
}

jv ssa_shape_fs_value(struct walk *w, jv v, int mode, jv (*make)(struct walk *, jv, int))
{
	struct shape h = { 0xcbf29ce484222325ULL, 0x6a09e667f3bcc909ULL };
	struct slot *s;
	char m = (char)('0' + mode);
	jv set;

	feed(&h, &m, 1);
	shape_of(w, v, &h);
	s = &slots[h.a & (SLOTS - 1)];
	if (jv_is_valid(s->set) && s->h.a == h.a && s->h.b == h.b)
		return jv_copy(s->set);
	set = ssa_set_intern(ssa_set_sorted(make(w, v, mode)));
	jv_free(s->set);
	s->h = h;
	s->set = jv_copy(set);
	return set;
}
