/*
 * libFuzzer target: the YAML reader and the manifest reader on top of it.
 * The input is one YAML stream (any number of documents): kop_yaml_load
 * turns it into JSON values, kop_manifest_parse into objects checked for
 * apiVersion, kind and metadata.name (List kinds unpacked). Either may
 * refuse the input; neither may crash or leak.
 */
#include <stdint.h>
#include "yaml.h"
#include "manifest.h"
#include "banned.h"
#include "libjq-leak.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[KOP_ERRLEN];
	jv docs, objs = jv_array();
	/* text that looks like JSON is parsed by libjq first: see libjq-leak.h */
	int known_leak = fuzz_libjq_leaks_whole((const char *)data, size);

	if (known_leak)
		__lsan_disable();
	kop_yaml_load((const char *)data, size, "fuzz.yaml", &docs, err);
	jv_free(docs);	/* after a failure, jv_invalid() */
	kop_manifest_parse((const char *)data, size, "fuzz.yaml", &objs, err);
	jv_free(objs);
	if (known_leak)
		__lsan_enable();
	return 0;
}
