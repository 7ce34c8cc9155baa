/*
 * test-tool commands for lib/render.c:
 *   test-tool yaml-render < value.json       the YAML text of one JSON value (yaml.v2 style)
 *   test-tool fn-call NAME < value.json      NAME(value) as one JSON line
 *   test-tool fn-resolve [--jq FILTER] < values.jsonl
 *                                            each value (FILTER's output for it: values then
 *                                            shared as jq shares them) with its {"$fn"}
 *                                            directives resolved
 *   test-tool fn-resolve --pack < values.jsonl
 *                                            each value packed (kop_fn_pack)
 * Exit 0, 1 when a function failed (message on stderr), 2 on bad usage or input.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "kop.h"
#include "jsonl.h"
#include "jqrun.h"
#include "render.h"
#include "test-tool.h"
#include "banned.h"

/* Reads the whole of stdin as one JSON value; 0 or -1 (message printed). */
static int read_value(jv *out)
{
	struct kop_buf b = KOP_BUF_INIT;
	char chunk[65536];
	ssize_t n;
	jv v;

	while ((n = read(0, chunk, sizeof(chunk))) > 0)
		kop_buf_add(&b, chunk, (size_t)n);
	if (n < 0) {
		perror("read");
		kop_buf_release(&b);
		return -1;
	}
	v = jv_parse_sized(b.buf ? b.buf : "", (int)b.len);
	kop_buf_release(&b);
	if (!jv_is_valid(v)) {
		jv msg = jv_invalid_get_msg(v);

		fprintf(stderr, "error: %s\n", jv_get_kind(msg) == JV_KIND_STRING ? jv_string_value(msg) : "bad json");
		jv_free(msg);
		return -1;
	}
	*out = v;
	return 0;
}

static int cmd_yaml_render(int argc, char **argv)
{
	char err[KOP_ERRLEN];
	char *text;
	jv v;

	if (read_value(&v))
		return 2;
	text = kop_yaml_emit(v, err);
	if (!text) {
		fprintf(stderr, "error: %s\n", err);
		return 1;
	}
	fputs(text, stdout);
	free(text);
	return 0;
}

static int cmd_fn_call(int argc, char **argv)
{
	char err[KOP_ERRLEN];
	jv v, out;

	if (argc < 2) {
		fprintf(stderr, "usage: test-tool fn-call NAME < value.json\n");
		return 2;
	}
	if (read_value(&v))
		return 2;
	if (kop_fn_call(argv[1], v, &out, err)) {
		fprintf(stderr, "error: %s\n", err);
		return 1;
	}
	kop_jsonl_write(stdout, out);
	return 0;
}

static int cmd_fn_resolve(int argc, char **argv)
{
	struct kop_jsonl r;
	struct kop_jq *q = NULL;
	char err[KOP_ERRLEN];
	int bad = 0, pack = 0;

	if (argc == 2 && !strcmp(argv[1], "--pack")) {
		pack = 1;
	} else if (argc == 3 && !strcmp(argv[1], "--jq")) {
		if (!(q = kop_jq_compile(argv[2], "--jq", jv_null(), jv_null(), err))) {
			fprintf(stderr, "error: %s\n", err);
			return 2;
		}
	} else if (argc != 1) {
		fprintf(stderr, "usage: test-tool fn-resolve [--jq FILTER | --pack] < values.jsonl\n");
		return 2;
	}
	kop_jsonl_init(&r, 0);
	for (;;) {
		jv v, out;
		size_t line;
		int rc = kop_jsonl_next(&r, &v, &line, err);

		if (rc > 0) {
			if (q && kop_jq_run1(q, v, &v, err)) {
				fprintf(stderr, "error: line %zu: %s\n", line, err);
				bad = 2;
				continue;
			}
			if (pack) {
				kop_jsonl_write(stdout, kop_fn_pack(v));
				continue;
			}
			if (kop_fn_resolve(v, &out, err)) {
				fprintf(stderr, "error: line %zu: %s\n", line, err);
				bad = 1;
				continue;
			}
			kop_jsonl_write(stdout, out);
			continue;
		}
		if (rc < 0) {
			fprintf(stderr, "error: %s\n", err);
			bad = 2;
			continue;
		}
		if (r.eof)
			break;
		if (kop_jsonl_read_fd(&r, 0) < 0) {
			perror("read");
			bad = 2;
			break;
		}
	}
	kop_jsonl_release(&r);
	if (q)
		kop_jq_free(q);
	return bad;
}

static const struct test_cmd render_cmds[] = {
	{ "yaml-render", cmd_yaml_render },
	{ "fn-call", cmd_fn_call },
	{ "fn-resolve", cmd_fn_resolve },
	{ NULL, NULL },
};
TEST_TOOL_REGISTER(render_cmds)
