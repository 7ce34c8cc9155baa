#ifndef TEST_TOOL_H
#define TEST_TOOL_H
#include <stddef.h>
/*
 * Each t/helper/test-<module>.c adds its commands without touching the
 * others' files:
 *
 *   static const struct test_cmd cmds[] = { { "yaml-render", cmd_yaml_render }, { NULL, NULL } };
 *   TEST_TOOL_REGISTER(cmds)
 */
struct test_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
};

struct test_cmd_list {
	const struct test_cmd *cmds;
	struct test_cmd_list *next;
};
extern struct test_cmd_list *test_cmd_lists;

/* All of fd, NUL-terminated, in *out (the caller frees): 0, or -1 with errno. */
int read_all_fd(int fd, char **out, size_t *len);

/*
 * fn on each line of stdin (its newline cut, NUL-terminated there), data
 * passed on: 0, or the largest of fn's answers (the tools' exit codes).
 */
int each_line(int (*fn)(const char *line, size_t len, void *data), void *data);

#define TEST_TOOL_REGISTER(table) \
	static struct test_cmd_list table##_list = { table, NULL }; \
	__attribute__((constructor)) static void table##_register(void) \
	{ table##_list.next = test_cmd_lists; test_cmd_lists = &table##_list; }

#endif
