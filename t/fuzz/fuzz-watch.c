/*
 * libFuzzer target: the list-and-watch state machine (lib/watch.h) fed
 * arbitrary server answers. The input is a sequence of answers separated by
 * the byte 0xff; the first byte of each picks its HTTP status, whether the
 * transfer completed and how long it lasted (or an abort by the caller).
 * A 200 answer to a LIST is parsed as one JSON value (kw_watch_list);
 * a 200 answer to a watch or streaming list is fed as body bytes in pieces
 * whose sizes come from the input (kw_watch_feed); another status gets the
 * answer parsed as its Status (or null). Whatever the bytes, the machine
 * must not crash, leak or emit an invalid value.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "watch.h"
#include "libjq-leak.h"
#include "banned.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void emit(void *ctx, const char *type, jv obj)
{
	(void)ctx;
	(void)type;
	if (!jv_is_valid(obj) || jv_get_kind(obj) != JV_KIND_OBJECT)
		abort();
	jv_free(obj);
}

static const long codes[] = { 200, 200, 200, 200, 410, 400, 422, 500, 503, 429, 0, 401, 403, 404, 408 };

static void answer(struct kw_watch *w, const uint8_t *p, size_t len)
{
	uint8_t c = len ? p[0] : 0;
	long code = codes[c % (sizeof(codes) / sizeof(codes[0]))];
	int transport_ok = !(c & 0x40);
	char err[KOP_ERRLEN];
	char *path = kw_watch_request(w);
	size_t off, step;
	jv status = jv_null();

	free(path);
	if (len) {
		p++;
		len--;
	}
	if (c == 0xfe) {
		kw_watch_abort(w);
		return;
	}
	if (code == 200 && w->req == KW_REQ_LIST) {
		jv list = jv_parse_sized((const char *)p, (int)len);

		if (jv_is_valid(list))
			kw_watch_list(w, list, err);
		else
			jv_free(list);
	} else if (code == 200) {
		for (off = 0; off < len; off += step) {
			step = 1 + p[off] % 97;
			if (step > len - off)
				step = len - off;
			kw_watch_feed(w, (const char *)p + off, step, err);
		}
	} else if (len) {
		status = jv_parse_sized((const char *)p, (int)len);
		if (!jv_is_valid(status)) {
			jv_free(status);
			status = jv_null();
		}
	}
	kw_watch_done(w, code, transport_ok, status, (c & 0x20) ? 100 : 5000);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kw_watch w;
	const uint8_t *p = data, *end = data + size, *sep;
	int known_leak = 0;

	/* each answer is parsed whole or line by line: see libjq-leak.h */
	while (p < end && !known_leak) {
		sep = memchr(p, 0xff, (size_t)(end - p));
		size_t n = (size_t)((sep ? sep : end) - p);

		/* without its first byte, which answer() takes as the status */
		known_leak = n > 1 && fuzz_libjq_leaks((const char *)p + 1, n - 1);
		p = sep ? sep + 1 : end;
	}
	p = data;
	if (known_leak)
		__lsan_disable();
	kw_watch_init(&w, "pods", "/api/v1/namespaces/ns/pods", "Pod", "v1", size & 1 ? "app=x" : NULL, NULL);
	w.emit = emit;
	w.streaming = !(size & 2);
	while (p < end) {
		sep = memchr(p, 0xff, (size_t)(end - p));
		answer(&w, p, (size_t)((sep ? sep : end) - p));
		p = sep ? sep + 1 : end;
	}
	kw_watch_release(&w);
	if (known_leak)
		__lsan_enable();
	return 0;
}
