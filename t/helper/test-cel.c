/*
 * test-tool commands for lib/cel*.c:
 *   test-tool cel [VARS] < lines   each line a CEL expression, evaluated with
 *                                  VARS (a JSON object: name -> value); prints
 *                                  per line the result as compact JSON,
 *                                  "error: MSG" (a runtime error) or
 *                                  "parse error: MSG"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kop.h"
#include "cel.h"
#include "test-tool.h"
#include "banned.h"

static int one_cel(const char *line, size_t n, void *data)
{
	char err[KOP_ERRLEN];
	struct kop_cel *p;
	jv v;

	(void)n;
	if (!(p = kop_cel_parse(line, NULL, err))) {
		printf("parse error: %s\n", err);
		return 0;
	}
	v = kop_cel_eval(p, jv_copy(*(jv *)data));
	if (jv_is_valid(v)) {
		jv s = jv_dump_string(v, 0);

		printf("%s\n", jv_string_value(s));
		jv_free(s);
	} else {
		jv m = jv_invalid_get_msg(v);

		printf("error: %s\n", jv_string_value(m));
		jv_free(m);
	}
	kop_cel_free(p);
	return 0;
}

static int cmd_cel(int argc, char **argv)
{
	jv vars = jv_object();

	if (argc > 2)
		return 2;
	if (argc == 2) {
		jv_free(vars);
		vars = jv_parse(argv[1]);
		if (jv_get_kind(vars) != JV_KIND_OBJECT) {
			fprintf(stderr, "test-tool cel: VARS is not a JSON object\n");
			jv_free(vars);
			return 2;
		}
	}
	each_line(one_cel, &vars);
	jv_free(vars);
	return 0;
}

static const struct test_cmd cel_cmds[] = {
	{ "cel", cmd_cel },
	{ NULL, NULL },
};
TEST_TOOL_REGISTER(cel_cmds)
