/*
 * test-tool commands for lib/yaml, lib/kubeconfig, lib/kube and lib/discovery:
 *   yaml [FILE]                     each document as a compact JSON line; "error: …" and exit 1
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "kop.h"
#include "jsonl.h"
#include "yaml.h"
#include "test-tool.h"
#include "banned.h"

static int read_all_fd(int fd, char **out, size_t *len)
{
	struct kop_buf b = KOP_BUF_INIT;

	for (;;) {
		ssize_t n;

		kop_buf_grow(&b, 65536);
		n = read(fd, b.buf + b.len, b.cap - b.len - 1);
		if (n < 0) {
			kop_buf_release(&b);
			return -1;
		}
		if (n == 0)
			break;
		b.len += (size_t)n;
		b.buf[b.len] = 0;
	}
	*out = kop_buf_detach(&b, len);
	return 0;
}

static int cmd_yaml(int argc, char **argv)
{
	char err[KOP_ERRLEN];
	jv docs;
	int rc;

	if (argc > 1) {
		rc = kop_yaml_load_file(argv[1], &docs, err);
	} else {
		char *text;
		size_t len;

		if (read_all_fd(0, &text, &len))
			return 2;
		rc = kop_yaml_load(text, len, NULL, &docs, err);
		free(text);
	}
	if (rc) {
		printf("error: %s\n", err);
		return 1;
	}
	jv_array_foreach(docs, i, d)
		kop_jsonl_write(stdout, d);
	jv_free(docs);
	return 0;
}

static const struct test_cmd kube_cmds[] = {
	{ "yaml", cmd_yaml },
	{ NULL, NULL }
};
TEST_TOOL_REGISTER(kube_cmds)
