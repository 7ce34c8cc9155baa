/*
 * libFuzzer target: lib/kproto, the decoder of protobuf request bodies that
 * ksim runs on what any client sends. The first byte picks a kind of the
 * table, the rest is that kind's message (and, whole, a "k8s\0" envelope).
 * A decoded object is encoded again. Nothing may crash or leak.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "kproto.h"
#include "banned.h"
#include "libjq-leak.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Kind k's message from data, and the object decoded encoded again. */
static int decode(unsigned k, const uint8_t *data, size_t size, char *err)
{
	struct kop_buf b = KOP_BUF_INIT;
	jv obj;
	int rc = kproto_decode(kproto_kinds[k].msg, data, size, &obj, err);

	if (rc == 0) {
		obj = jv_object_merge(JV_OBJECT(jv_string("apiVersion"), jv_string(kproto_kinds[k].api_version),
						jv_string("kind"), jv_string(kproto_kinds[k].kind)), obj);
		kproto_encode(obj, &b, err);	/* may refuse what it did not make (a year before 1000) */
		kop_buf_release(&b);
	}
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[KOP_ERRLEN], *av, *kind;
	const unsigned char *raw;
	size_t nkinds = 0, raw_len;
	unsigned k;

	if (!size)
		return 0;
	while (kproto_kinds[nkinds].kind)
		nkinds++;
	k = data[0] % nkinds;
	/*
	 * Raw JSON inside (RawExtension, FieldsV1) is parsed by libjq, whose
	 * 1.6 leaks on some bad JSON (libjq-leak.h): a first run without leak
	 * checks tells whether the input reaches a parse error there.
	 */
	__lsan_disable();
	if (decode(k, data + 1, size - 1, err) < 0 && strstr(err, "not JSON")) {
		__lsan_enable();
		return 0;
	}
	__lsan_enable();
	decode(k, data + 1, size - 1, err);
	if (kproto_envelope(data, size, &av, &kind, &raw, &raw_len, err) == 0) {
		free(av);
		free(kind);
	}
	return 0;
}
