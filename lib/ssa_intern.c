/*
 * Field sets kept once (hash-consing): ssa_set_intern() gives every stored
 * FieldsV1 node the storage of an equal node already kept, children first,
 * so that the managedFields of a thousand Deployments made alike hold one
 * copy of each of their sets' nodes, and every empty leaf ({}) is one value.
 * A managedFields entry's set has tens of nodes, each a libjq object of
 * about 400 bytes: in ksim's store they were two thirds of its memory.
 *
 * Values keep jq's value semantics (a node changed later is copied first,
 * as any shared value is), but their reference counts are not atomic: the
 * callers of lib/ssa serialize their calls (ksim holds its lock), and no
 * value of a set leaves that serialization unless deep-copied.
 *
 * The table (open addressing, linear probing) holds one reference to each
 * node; a node nobody else holds is let go when the table would grow. A
 * second table of the nodes' addresses says at once whether a node is one
 * kept: a set changed by a write is mostly kept nodes, and only its new ones
 * are walked (and sorted: every node kept was sorted first).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "ssa-priv.h"
#include "banned.h"

struct islot {
	uint64_t hash;
	jv node;	/* JV_KIND_INVALID: empty */
};

static struct islot *tab;
static const void **addrs;	/* the kept nodes' storage, same capacity */
static size_t cap, used;

static uint64_t mix(uint64_t h, uint64_t x)
{
	h ^= x;
	h *= 0x100000001b3ULL;
	return h ^ (h >> 29);
}

/* A member of a node, its child already interned (so compared by identity). */
struct member {
	jv key, child;
};

/* Whether a and b (borrowed) are the same storage, as jv_identical says without its copies. */
static int same(jv a, jv b)
{
	return jv_get_kind(a) == jv_get_kind(b) && a.u.ptr == b.u.ptr;
}

static uint64_t members_hash(const struct member *m, int n)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)n;

	for (int i = 0; i < n; i++) {
		/* (a key's hash is kept in the string: libjq worked it out as the key went in) */
		h = mix(h, jv_string_hash(jv_copy(m[i].key)));
		h = mix(h, jv_get_kind(m[i].child) == JV_KIND_OBJECT ? (uint64_t)(uintptr_t)m[i].child.u.ptr
								   : (uint64_t)jv_get_kind(m[i].child));
	}
	return h;
}

/* Whether node (borrowed) has members m, in that order. */
static int members_are(const struct member *m, int n, jv node)
{
	int i = 0, eq = 1;

	for (int it = jv_object_iter(node); eq && jv_object_iter_valid(node, it); it = jv_object_iter_next(node, it), i++) {
		jv c = jv_object_iter_value(node, it);

		eq = i < n && same(c, m[i].child);
		jv_free(c);
		if (eq)
			eq = jv_equal(jv_object_iter_key(node, it), jv_copy(m[i].key));
	}
	return eq && i == n;
}

static size_t probe(uint64_t hash)
{
	return (size_t)hash & (cap - 1);
}

static size_t addr_probe(const void *p)
{
	return (size_t)mix(0, (uint64_t)(uintptr_t)p) & (cap - 1);
}

static void put(uint64_t hash, jv node)
{
	size_t i = probe(hash);

	while (jv_is_valid(tab[i].node))
		i = (i + 1) & (cap - 1);
	tab[i].hash = hash;
	tab[i].node = node;
	used++;
	for (i = addr_probe(node.u.ptr); addrs[i]; i = (i + 1) & (cap - 1))
		;
	addrs[i] = node.u.ptr;
}

int ssa_set_is_interned(jv node)
{
	if (!cap || jv_get_kind(node) != JV_KIND_OBJECT)
		return 0;
	for (size_t i = addr_probe(node.u.ptr); addrs[i]; i = (i + 1) & (cap - 1))
		if (addrs[i] == node.u.ptr)
			return 1;
	return 0;
}

/* The table at newcap (a power of two), its live nodes moved over. */
static void rebuild(size_t newcap)
{
	struct islot *old = tab;
	size_t oldcap = cap;

	tab = kop_calloc(newcap, sizeof(*tab));
	for (size_t i = 0; i < newcap; i++)
		tab[i].node = jv_invalid();
	free(addrs);
	addrs = kop_calloc(newcap, sizeof(*addrs));
	cap = newcap;
	used = 0;
	for (size_t i = 0; i < oldcap; i++)
		if (jv_is_valid(old[i].node))
			put(old[i].hash, old[i].node);
	free(old);
}

/*
 * Lets go of the nodes only the table holds: a parent let go may leave its
 * children so, hence the passes (a set is a few levels deep).
 */
static void prune(void)
{
	size_t dropped;

	do {
		dropped = 0;
		for (size_t i = 0; i < cap; i++) {
			if (jv_is_valid(tab[i].node) && jv_get_refcnt(tab[i].node) == 1) {
				jv_free(tab[i].node);
				tab[i].node = jv_invalid();
				used--;
				dropped++;
			}
		}
	} while (dropped);
}

/* Room for one more node: pruned first; grown when still over a quarter full. */
static void make_room(void)
{
	if (cap && (used + 1) * 2 <= cap)
		return;
	if (cap)
		prune();
	rebuild(!cap ? 1024 : used * 4 > cap ? cap * 2 : cap);
}

/* The empty set ({}, every leaf), kept with a reference of its own: met most often. */
static jv empty_set = { .kind_flags = JV_KIND_INVALID };

jv ssa_set_intern(jv node)
{
	struct member small[16], *m = small;
	uint64_t hash;
	int n = 0, room = (int)(sizeof(small) / sizeof(small[0])), changed = 0;
	size_t i;

	if (jv_get_kind(node) != JV_KIND_OBJECT || ssa_set_is_interned(node))
		return node;
	/* (one pass over the slots: jv_object_length would be another) */
	for (int it = jv_object_iter(node); jv_object_iter_valid(node, it); it = jv_object_iter_next(node, it), n++) {
		jv c = jv_object_iter_value(node, it);

		if (n == room)
			m = ssa_grow(m, small, &room, sizeof(*m));
		m[n].key = jv_object_iter_key(node, it);
		m[n].child = ssa_set_intern(jv_copy(c));
		changed |= !same(c, m[n].child);
		jv_free(c);
	}
	if (n == 0 && jv_is_valid(empty_set)) {
		jv_free(node);
		return jv_copy(empty_set);
	}
	hash = members_hash(m, n);
	for (i = cap ? probe(hash) : 0; cap && jv_is_valid(tab[i].node); i = (i + 1) & (cap - 1))
		if (tab[i].hash == hash && members_are(m, n, tab[i].node))
			break;
	if (cap && jv_is_valid(tab[i].node)) {
		jv_free(node);
		node = jv_copy(tab[i].node);
	} else {
		for (int k = 0; changed && k < n; k++)
			node = jv_object_set(node, jv_copy(m[k].key), jv_copy(m[k].child));
		make_room();
		put(hash, jv_copy(node));
		if (n == 0)
			empty_set = jv_copy(node);
	}
	for (int k = 0; k < n; k++) {
		jv_free(m[k].key);
		jv_free(m[k].child);
	}
	if (m != small)
		free(m);
	return node;
}
