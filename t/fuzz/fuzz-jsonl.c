/*
 * libFuzzer target: the JSON Lines reader. The input is fed in pieces whose
 * sizes come from the input itself, so chunk boundaries fall everywhere, as
 * they do in a watch body; every value is written back out to /dev/null.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sanitizer/lsan_interface.h>
#include "jsonl.h"
#include "banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * libjq 1.6 leaks the token when a value follows another inside a container
 * without a separator ('{"a":"x" "b"}': value() in jv_parse.c returns
 * "Expected separator between values" without freeing it; fixed in later
 * jq). Its allocation stack is the same as that of any parsed value, so no
 * suppression can single it out: inputs that reach that message are run
 * with leak checking off, and every other input keeps it.
 */
static int hits_libjq_separator_leak(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	int hit = 0;

	__lsan_disable();
	while (p < end && !hit) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		jv_parser *parser = jv_parser_new(0);
		jv v;

		jv_parser_set_buf(parser, p, (int)len, 0);
		while (jv_is_valid(v = jv_parser_next(parser)))
			jv_free(v);
		if (jv_invalid_has_msg(jv_copy(v))) {
			jv msg = jv_invalid_get_msg(v);

			hit = strstr(jv_string_value(msg), "Expected separator between values") != NULL;
			jv_free(msg);
		} else {
			jv_free(v);
		}
		jv_parser_free(parser);
		p += len + 1;
	}
	__lsan_enable();
	return hit;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *null;
	struct kop_jsonl r;
	char err[KOP_ERRLEN];
	size_t off = 0, step;
	jv v;

	int known_leak = hits_libjq_separator_leak(data, size);

	if (!null)
		null = fopen("/dev/null", "w");
	if (known_leak)
		__lsan_disable();
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
				kop_jsonl_write(null, v);
		}
	}
	kop_jsonl_eof(&r);
	for (;;) {
		int rc = kop_jsonl_next(&r, &v, NULL, err);

		if (rc == 0)
			break;
		if (rc > 0)
			kop_jsonl_write(null, v);
	}
	kop_jsonl_release(&r);
	if (known_leak)
		__lsan_enable();
	return 0;
}
