/*
 * Digests of JSON values (kop_json_digest) and the fingerprints that stand in
 * for long strings in a value (kop_json_fingerprint, kop_json_fp_equal).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/sha.h>
#include "jsonl.h"
#include "kop.h"
#include "banned.h"

/* The tree of v as tagged, length-prefixed bytes: no two values share them;
 * with sorted, objects' members in the order of their keys (jv_keys). */
static void digest_walk(struct kop_buf *b, jv v, int sorted)
{
	jv_kind k = jv_get_kind(v);
	unsigned char tag = (unsigned char)k;
	uint32_t n;

	kop_buf_add(b, &tag, 1);
	switch (k) {
	case JV_KIND_NUMBER: {
		double d = jv_number_value(v);

		kop_buf_add(b, &d, sizeof(d));
		break;
	}
	case JV_KIND_STRING:
		n = (uint32_t)jv_string_length_bytes(jv_copy(v));
		kop_buf_add(b, &n, sizeof(n));
		kop_buf_add(b, jv_string_value(v), n);
		break;
	case JV_KIND_ARRAY:
		n = (uint32_t)jv_array_length(jv_copy(v));
		kop_buf_add(b, &n, sizeof(n));
		jv_array_foreach(v, i, item) {
			digest_walk(b, item, sorted);
			jv_free(item);
		}
		break;
	case JV_KIND_OBJECT: {
		int it;

		/* (no jv_object_length: it counts; the closing tag delimits) */
		if (sorted) {
			jv keys = jv_keys(jv_copy(v));

			jv_array_foreach(keys, i, key) {
				jv val = jv_object_get(jv_copy(v), jv_copy(key));

				digest_walk(b, key, 1);
				digest_walk(b, val, 1);
				jv_free(key);
				jv_free(val);
			}
			jv_free(keys);
		} else {
			for (it = jv_object_iter(v); jv_object_iter_valid(v, it); it = jv_object_iter_next(v, it)) {
				jv key = jv_object_iter_key(v, it), val = jv_object_iter_value(v, it);

				digest_walk(b, key, 0);
				digest_walk(b, val, 0);
				jv_free(key);
				jv_free(val);
			}
		}
		tag = 0xff;
		kop_buf_add(b, &tag, 1);
		break;
	}
	default:
		break;
	}
}

static void digest(jv v, int sorted, unsigned char out[KOP_JSON_DIGEST_LEN])
{
	struct kop_buf b = KOP_BUF_INIT;

	digest_walk(&b, v, sorted);
	kop_sha256(b.buf ? b.buf : "", b.len, out);
	kop_buf_release(&b);
}

void kop_json_digest(jv v, unsigned char out[KOP_JSON_DIGEST_LEN])
{
	digest(v, 0, out);
}

void kop_json_digest_equal(jv v, unsigned char out[KOP_JSON_DIGEST_LEN])
{
	digest(v, 1, out);
}

int kop_json_digest_cut(const char *text, size_t len, jv obj, jv paths, struct kop_buf *scratch,
			unsigned char out[KOP_JSON_DIGEST_LEN])
{
	jv cut;

	if (text && kop_json_cut(text, len, paths, scratch) == 0) {
		kop_sha256(scratch->buf ? scratch->buf : "", scratch->len, out);
		if (scratch->cap > 1 << 20)
			kop_buf_release(scratch);
		return 0;
	}
	obj = jv_is_valid(obj) ? jv_copy(obj) : text ? kop_json_read(text, len) : jv_null();
	cut = jv_delpaths(jv_copy(obj), jv_copy(paths));
	kop_json_digest(jv_is_valid(cut) ? cut : obj, out);
	jv_free(cut);
	jv_free(obj);
	return -1;
}

#define FP_PREFIX "\0sha256:"
#define FP_PREFIX_LEN 8
#define FP_LEN (FP_PREFIX_LEN + 2 * SHA256_DIGEST_LENGTH)

static int fp_marked(const char *s, int len)
{
	return len >= FP_PREFIX_LEN && !memcmp(s, FP_PREFIX, FP_PREFIX_LEN);
}

/* Whether the string s (borrowed) is replaced by its fingerprint. */
static int fp_wanted(jv s)
{
	int len = jv_string_length_bytes(jv_copy(s));

	return len >= KOP_JSON_FP_MIN || fp_marked(jv_string_value(s), len);
}

/* The fingerprint of the len bytes at s, in out[FP_LEN]. */
static void fp_make(const char *s, size_t len, char out[FP_LEN])
{
	unsigned char d[SHA256_DIGEST_LENGTH];
	char hex[2 * SHA256_DIGEST_LENGTH + 1];

	kop_sha256(s, len, d);
	memcpy(out, FP_PREFIX, FP_PREFIX_LEN);
	kop_hex(d, sizeof(d), hex);
	memcpy(out + FP_PREFIX_LEN, hex, 2 * sizeof(d));
}

jv kop_json_fingerprint(jv v, int *changed)
{
	switch (jv_get_kind(v)) {
	case JV_KIND_STRING: {
		char fp[FP_LEN];

		if (!fp_wanted(v))
			return v;
		fp_make(jv_string_value(v), (size_t)jv_string_length_bytes(jv_copy(v)), fp);
		jv_free(v);
		if (changed)
			*changed = 1;
		return jv_string_sized(fp, FP_LEN);
	}
	case JV_KIND_ARRAY: {
		int i, n = jv_array_length(jv_copy(v));

		for (i = 0; i < n; i++) {
			jv item = jv_array_get(jv_copy(v), i);
			jv_kind k = jv_get_kind(item);
			int c = 0;

			if (k == JV_KIND_STRING || k == JV_KIND_ARRAY || k == JV_KIND_OBJECT)
				item = kop_json_fingerprint(item, &c);
			if (c) {
				v = jv_array_set(v, i, item);
				if (changed)
					*changed = 1;
			} else {
				jv_free(item);
			}
		}
		return v;
	}
	case JV_KIND_OBJECT: {
		jv keys = jv_array();
		int it;

		/* (the keys to change first: setting while iterating could move them) */
		for (it = jv_object_iter(v); jv_object_iter_valid(v, it); it = jv_object_iter_next(v, it)) {
			jv val = jv_object_iter_value(v, it);
			jv_kind k = jv_get_kind(val);

			if (k == JV_KIND_STRING ? fp_wanted(val) : k == JV_KIND_ARRAY || k == JV_KIND_OBJECT)
				keys = jv_array_append(keys, jv_object_iter_key(v, it));
			jv_free(val);
		}
		jv_array_foreach(keys, i, key) {
			int c = 0;
			jv val = kop_json_fingerprint(jv_object_get(jv_copy(v), jv_copy(key)), &c);

			if (c) {
				v = jv_object_set(v, key, val);
				if (changed)
					*changed = 1;
			} else {
				jv_free(key);
				jv_free(val);
			}
		}
		jv_free(keys);
		return v;
	}
	default:
		return v;
	}
}

int kop_json_fp_text_needed(const char *text, size_t len)
{
	const char *p = text, *end = text + len, *b, *e, *k;

	if (memchr(text, 0, len))
		return 1;	/* (a NUL as it is, which libjq reads in a string: maybe the marker's) */
	/* each string's raw bytes, escapes as written: no fewer than it decodes to, but for
	 * bytes that are no UTF-8 */
	while (p < end && (p = memchr(p, '"', (size_t)(end - p)))) {
		b = ++p;
		if ((size_t)(end - b) >= 6 && !memcmp(b, "\\u0000", 6))
			return 1;	/* (a NUL first: maybe the prefix that marks a fingerprint) */
		/* its closing quote: the first after an even run of backslashes */
		for (;;) {
			if (!(e = memchr(p, '"', (size_t)(end - p))))
				return 1;	/* unterminated: not for this scan to say */
			for (k = e; k > b && k[-1] == '\\'; k--)
				;
			if (!((e - k) & 1))
				break;
			p = e + 1;
		}
		if ((size_t)(e - b) >= KOP_JSON_FP_MIN)
			return 1;
		if ((size_t)(e - b) * 3 >= KOP_JSON_FP_MIN) {
			/* a byte that is no UTF-8 is read as U+FFFD, 3 bytes: at most 2 more each */
			size_t high = 0;

			for (k = b; k < e; k++)
				high += (unsigned char)*k >= 0x80;
			if ((size_t)(e - b) + 2 * high >= KOP_JSON_FP_MIN)
				return 1;
		}
		p = e + 1;
	}
	return 0;
}

int kop_json_fp_equal(jv s, jv fp)
{
	int slen = jv_string_length_bytes(jv_copy(s)), flen = jv_string_length_bytes(jv_copy(fp));
	char want[FP_LEN];

	if (flen != FP_LEN || !fp_marked(jv_string_value(fp), flen))
		return slen == flen && !memcmp(jv_string_value(s), jv_string_value(fp), (size_t)slen);
	if (!fp_wanted(s))
		return 0;	/* kept as it is: not this fingerprint's */
	fp_make(jv_string_value(s), (size_t)slen, want);
	return !memcmp(want, jv_string_value(fp), FP_LEN);
}
