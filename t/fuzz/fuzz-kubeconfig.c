/*
 * libFuzzer target: the kubeconfig loader. The input is written to a
 * memfd and loaded as an explicit --kubeconfig (/proc/self/fd/N), with
 * context NULL and, when the input is long enough, a context named by its
 * first bytes too. kube_config_load only reads: files that the input names
 * (certificate-authority, tokenFile, ...) are read or reported, an exec
 * plugin is parsed but not run.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include "kube.h"
#include "banned.h"
#include "libjq-leak.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fd = -1;
static char path[64];

static void load(const char *context)
{
	struct kube_config cfg;
	char err[KOP_ERRLEN];

	memset(&cfg, 0, sizeof(cfg));
	kube_config_load(&cfg, path, context, err);
	kube_config_release(&cfg);	/* after a failure too: it must be safe */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char ctx[9];
	/* a kubeconfig that looks like JSON is parsed by libjq first: see libjq-leak.h */
	int known_leak = fuzz_libjq_leaks_whole((const char *)data, size);

	if (fd < 0) {
		fd = memfd_create("fuzz-kubeconfig", 0);
		if (fd < 0)
			abort();
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	if (known_leak)
		__lsan_disable();
	load(NULL);
	if (size > 8) {
		memcpy(ctx, data, 8);
		ctx[8] = 0;
		load(ctx);
	}
	if (known_leak)
		__lsan_enable();
	return 0;
}
