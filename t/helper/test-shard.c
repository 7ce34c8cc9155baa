/*
 * test-tool commands for lib/shard.c:
 *   test-tool shard-parse EXPR          the canonical selector, or "error: …" (exit 1)
 *   test-tool shard-hash STRING         its 64-bit FNV-1a as 16 hex digits
 *   test-tool shard-match EXPR < lines  for each object, 1 when selected, else 0
 *   test-tool shard-split KEY I N       the selector of range I of N (KEY: uid or namespace)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kop.h"
#include "jsonl.h"
#include "shard.h"
#include "test-tool.h"
#include "banned.h"

static int cmd_shard_parse(int argc, char **argv)
{
	struct kop_shard_sel sel;
	char err[KOP_ERRLEN];

	if (argc != 2)
		return 2;
	if (kop_shard_parse(argv[1], &sel, err) < 0) {
		printf("error: %s\n", err);
		return 1;
	}
	printf("%s\n", sel.string);
	kop_shard_free(&sel);
	return 0;
}

static int cmd_shard_hash(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	printf("%016llx\n", (unsigned long long)kop_fnv1a64(argv[1], strlen(argv[1])));
	return 0;
}

static int cmd_shard_match(int argc, char **argv)
{
	struct kop_shard_sel sel;
	struct kop_jsonl r;
	char err[KOP_ERRLEN];

	if (argc != 2)
		return 2;
	if (kop_shard_parse(argv[1], &sel, err) < 0) {
		printf("error: %s\n", err);
		return 1;
	}
	kop_jsonl_init(&r, 0);
	for (;;) {
		jv v;
		size_t line;
		int rc = kop_jsonl_next(&r, &v, &line, err);

		if (rc > 0) {
			printf("%d\n", kop_shard_match(&sel, v));
			jv_free(v);
			continue;
		}
		if (rc < 0) {
			printf("error: %s\n", err);
			continue;
		}
		if (r.eof)
			break;
		if (kop_jsonl_read_fd(&r, 0) < 0) {
			perror("read");
			kop_jsonl_release(&r);
			kop_shard_free(&sel);
			return 2;
		}
	}
	kop_jsonl_release(&r);
	kop_shard_free(&sel);
	return 0;
}

static int cmd_shard_split(int argc, char **argv)
{
	char *s;

	if (argc != 4 || (strcmp(argv[1], "uid") && strcmp(argv[1], "namespace")))
		return 2;
	s = kop_shard_range_string(strcmp(argv[1], "uid") ? KOP_SHARD_NAMESPACE : KOP_SHARD_UID,
				   (unsigned)strtoul(argv[2], NULL, 10), (unsigned)strtoul(argv[3], NULL, 10));
	printf("%s\n", s);
	free(s);
	return 0;
}

/* shard-mask namespace|uid MASK N: the selector of the ranges in MASK (hex) of N */
static int cmd_shard_mask(int argc, char **argv)
{
	char *s;

	if (argc != 4 || (strcmp(argv[1], "uid") && strcmp(argv[1], "namespace")))
		return 2;
	s = kop_shard_mask_string(strcmp(argv[1], "uid") ? KOP_SHARD_NAMESPACE : KOP_SHARD_UID,
				  (uint64_t)strtoull(argv[2], NULL, 16), (unsigned)strtoul(argv[3], NULL, 10));
	printf("%s\n", s);
	free(s);
	return 0;
}

/* shard-minus A B: the selector of A's ranges less B's ("" printed as an empty line) */
static int cmd_shard_minus(int argc, char **argv)
{
	struct kop_shard_sel a, b;
	char err[KOP_ERRLEN], *s;

	if (argc != 3)
		return 2;
	if (kop_shard_parse(argv[1], &a, err) < 0) {
		printf("error: %s\n", err);
		return 1;
	}
	if (kop_shard_parse(argv[2], &b, err) < 0) {
		kop_shard_free(&a);
		printf("error: %s\n", err);
		return 1;
	}
	s = kop_shard_minus(&a, &b);
	printf("%s\n", s);
	free(s);
	kop_shard_free(&a);
	kop_shard_free(&b);
	return 0;
}

static const struct test_cmd shard_cmds[] = {
	{ "shard-parse", cmd_shard_parse },
	{ "shard-hash", cmd_shard_hash },
	{ "shard-match", cmd_shard_match },
	{ "shard-split", cmd_shard_split },
	{ "shard-mask", cmd_shard_mask },
	{ "shard-minus", cmd_shard_minus },
	{ NULL, NULL },
};
TEST_TOOL_REGISTER(shard_cmds)
