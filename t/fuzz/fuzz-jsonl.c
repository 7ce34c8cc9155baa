/*
 * libFuzzer target: the JSON Lines reader. The input is fed in pieces whose
 * sizes come from the input itself, so chunk boundaries fall everywhere, as
 * they do in a watch body; every value is written back out to /dev/null,
 * its text checked against libjq's own (kop_json_dump must give the same bytes)
 * and read back by kop_json_read, which must give the value again; the
 * whole input is read by kop_json_read and jv_parse_sized, which must agree,
 * and kop_json_keep_text, when it reads it, must keep what kop_json_keep
 * keeps of a whole parse; a text kop_json_verbatim would have sent as it is
 * must be one libjq reads.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "jsonl.h"
#include "libjq-leak.h"
#include "json-read-same.h"
#include "banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Writes v (consumed) out, after checking that kop_json_dump gives the
 * bytes libjq's jv_dump_string does (texts are compared and digested). */
static void write_checked(FILE *null, jv v)
{
	jv s = jv_dump_string(jv_copy(v), 0);
	char *mine = kop_json_dump(jv_copy(v));

	if (strlen(mine) != (size_t)jv_string_length_bytes(jv_copy(s)) || strcmp(mine, jv_string_value(s))) {
		fprintf(stderr, "kop_json_dump differs from jv_dump_string:\n%s\n%s\n", mine, jv_string_value(s));
		abort();
	}
	{
		jv back = kop_json_read(mine, strlen(mine));
		char *again = jv_is_valid(back) ? kop_json_dump(back) : NULL;

		if (!again || strcmp(again, mine)) {
			fprintf(stderr, "kop_json_read does not read back kop_json_dump's:\n%s\n%s\n", mine,
				again ? again : "(invalid)");
			abort();
		}
		free(again);
	}
	free(mine);
	jv_free(s);
	kop_jsonl_write(null, v);
}

/* kop_json_read and jv_parse_sized agree on the text s[0..len). */
static void read_checked(const char *s, size_t len)
{
	char *a, *b;

	if (!json_read_same(s, len, &a, &b)) {
		fprintf(stderr, "kop_json_read and jv_parse_sized differ on %.*s:\n%s\n%s\n", (int)len, s, a, b);
		abort();
	}
	free(a);
	free(b);
}

/* kop_json_keep_text, when it takes the text s[0..len), keeps what a whole parse and kop_json_keep keep. */
static void keep_checked(const char *s, size_t len)
{
	static jv paths;
	char err[KOP_ERRLEN];
	jv text, whole;

	if (jv_get_kind(paths) != JV_KIND_ARRAY)
		if (kop_fields_parse("metadata.labels,status.phase,metadata,a.b.c,kind,a", &paths, err) < 0)
			abort();
	if (kop_json_keep_text(s, len, paths, &text) < 0)
		return;
	whole = kop_json_read(s, len);
	if (jv_get_kind(whole) == JV_KIND_OBJECT) {
		char *a = kop_json_dump(jv_copy(text)), *b = kop_json_dump(kop_json_keep(whole, paths));

		if (strcmp(a, b)) {
			fprintf(stderr, "kop_json_keep_text and kop_json_keep differ on %.*s:\n%s\n%s\n", (int)len, s, a, b);
			abort();
		}
		free(a);
		free(b);
	} else {
		jv_free(whole);	/* (what it skipped is not all JSON: a whole parse refuses it) */
	}
	jv_free(text);
}

/* A text kop_json_verbatim lets kapply send as it is, libjq reads too (one value, no error),
 * and without an escape \\u it is the very text the dump of that value writes. */
static void verbatim_checked(const char *s, size_t len)
{
	char *dump;
	jv v;

	if (kop_json_verbatim(s, len) < 0)
		return;
	v = jv_parse_sized(s, (int)len);
	if (!jv_is_valid(v)) {
		fprintf(stderr, "kop_json_verbatim takes a text libjq refuses: %.*s\n", (int)len, s);
		abort();
	}
	dump = kop_json_dump(v);
	if (!memmem(s, len, "\\u", 2) && (strlen(dump) != len || memcmp(dump, s, len))) {
		fprintf(stderr, "kop_json_verbatim takes a text its dump writes otherwise:\n%.*s\n%s\n", (int)len, s, dump);
		abort();
	}
	free(dump);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *null;
	struct kop_jsonl r;
	char err[KOP_ERRLEN];
	size_t off = 0, step;
	jv v;

	int known_leak = fuzz_libjq_leaks((const char *)data, size);

	if (!null)
		null = fopen("/dev/null", "w");
	if (known_leak)
		__lsan_disable();
	if (size <= INT32_MAX) {
		read_checked((const char *)data, size);
		keep_checked((const char *)data, size);
		verbatim_checked((const char *)data, size);
	}
	kop_jsonl_init(&r, 4096);
	while (off < size) {
		step = 1 + data[off] % 61;
		if (step > size - off)
			step = size - off;
		kop_jsonl_feed(&r, (const char *)data + off, step);
		off += step;
		for (;;) {
			int rc = kop_jsonl_next(&r, &v, NULL, err);

			if (rc == 0)
				break;
			if (rc > 0)
				write_checked(null, v);
		}
	}
	kop_jsonl_eof(&r);
	for (;;) {
		int rc = kop_jsonl_next(&r, &v, NULL, err);

		if (rc == 0)
			break;
		if (rc > 0)
			write_checked(null, v);
	}
	kop_jsonl_release(&r);
	if (known_leak)
		__lsan_enable();
	return 0;
}
