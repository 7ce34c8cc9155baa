/*
 * libFuzzer target: the JSON Lines reader. The input is fed in pieces whose
 * sizes come from the input itself, so chunk boundaries fall everywhere, as
 * they do in a watch body; every value is written back out to /dev/null.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "jsonl.h"
#include "libjq-leak.h"
#include "banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
