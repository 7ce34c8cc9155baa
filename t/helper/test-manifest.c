/*
 * test-tool manifest PATH...   the objects kapply -f would read, one compact
 *                              line each; an error as "error: …", exit 1
 */
#include <stdio.h>
#include "kop.h"
#include "jsonl.h"
#include "manifest.h"
#include "test-tool.h"
#include "banned.h"

static int cmd_manifest(int argc, char **argv)
{
	char err[KOP_ERRLEN];
	jv objs = jv_array();
	int i, n, ret = 0;

	for (i = 1; i < argc && !ret; i++)
		if (kop_manifest_read(argv[i], &objs, err) < 0) {
			printf("error: %s\n", err);
			ret = 1;
		}
	n = jv_array_length(jv_copy(objs));
	for (i = 0; i < n; i++)
		kop_jsonl_write(stdout, jv_array_get(jv_copy(objs), i));
	jv_free(objs);
	return ret;
}

static const struct test_cmd manifest_cmds[] = { { "manifest", cmd_manifest }, { NULL, NULL } };
TEST_TOOL_REGISTER(manifest_cmds)
