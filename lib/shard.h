#ifndef KOP_SHARD_H
#define KOP_SHARD_H
/*
 * Shard selectors, as Kubernetes 1.36 reads the shardSelector parameter of
 * a list or watch (KEP-5866, feature gate ShardedListAndWatch):
 *
 *   shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')
 *     || shardRange(object.metadata.namespace, '0xc000000000000000', '0x10000000000000000')
 *
 * An object is selected when the 64-bit FNV-1a hash of the named field lies
 * in one of the ranges, start inclusive, end exclusive. Bounds are 0x and
 * exactly 16 lowercase hex digits, or 0x10000000000000000 (2^64) as an end;
 * every range names the same field (object.metadata.uid or
 * object.metadata.namespace). The same code serves the server side (ksim)
 * and the client's own filter when a server ignores the parameter.
 */
#include <stddef.h>
#include <stdint.h>
#include <jv.h>

enum kop_shard_key { KOP_SHARD_UID, KOP_SHARD_NAMESPACE };

struct kop_shard_range {
	uint64_t start;
	uint64_t end;		/* exclusive; meaningless when end_max */
	int end_max;		/* the end is 2^64 */
};

struct kop_shard_sel {
	enum kop_shard_key key;
	struct kop_shard_range *ranges;
	size_t n;
	char *string;		/* the canonical form a server echoes in shardInfo.selector */
};

/* 64-bit FNV-1a. */
uint64_t kop_fnv1a64(const char *s, size_t len);

/*
 * Parses s into *sel: 0, or -1 with err set to what kube-apiserver's parser
 * says (without its "invalid shard selector: " prefix).
 */
int kop_shard_parse(const char *s, struct kop_shard_sel *sel, char *err);
void kop_shard_free(struct kop_shard_sel *sel);

/* Whether a field value (the namespace, or the uid) is selected. */
int kop_shard_match_value(const struct kop_shard_sel *sel, const char *value, size_t len);

/* Whether an object is selected, by its metadata (a missing field hashes as ""). */
int kop_shard_match(const struct kop_shard_sel *sel, jv obj);

/*
 * The selector for shard i of n equal ranges (0 <= i < n, n >= 1) of key,
 * as text, malloc'd: what a client sends.
 */
char *kop_shard_range_string(enum kop_shard_key key, unsigned i, unsigned n);

/*
 * The selector for the ranges of n (n <= 64) whose bits are set in mask,
 * neighbours joined into one shardRange(), or-ed, malloc'd ("" for none).
 */
char *kop_shard_mask_string(enum kop_shard_key key, uint64_t mask, unsigned n);

/*
 * The selector of a's ranges less b's (b read as on a's field), malloc'd:
 * what is left of a, "" when nothing is.
 */
char *kop_shard_minus(const struct kop_shard_sel *a, const struct kop_shard_sel *b);

/*
 * Takes drop's ranges out of sel, in place: KOP_SHARD_SAME when none of
 * sel's ranges were in drop (or drop names another field), KOP_SHARD_LESS
 * when sel is now what is left, KOP_SHARD_NONE when nothing is (sel has no
 * range then: it selects nothing, its string is "").
 */
enum kop_shard_cut { KOP_SHARD_SAME, KOP_SHARD_LESS, KOP_SHARD_NONE };
enum kop_shard_cut kop_shard_remove(struct kop_shard_sel *sel, const struct kop_shard_sel *drop);

#endif
