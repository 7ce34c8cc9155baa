/*
 * For the fuzz targets that parse JSON with libjq (header only: every
 * t/fuzz/fuzz-*.c is a target of its own).
 *
 * libjq 1.6 leaks the token when a value follows another inside a container
 * without a separator ('{"a":"x" "b"}': value() in jv_parse.c returns
 * "Expected separator between values" without freeing it; fixed in later
 * jq). Its allocation stack is that of any parsed value, so no suppression
 * can single it out: fuzz_libjq_leaks(p, len) tells whether parsing p as a
 * whole or any of its lines reaches that message, and such inputs are run
 * with leak checking off (__lsan_disable); every other input keeps it.
 */
#ifndef FUZZ_LIBJQ_LEAK_H
#define FUZZ_LIBJQ_LEAK_H
#include <string.h>
#include <jv.h>
#include <sanitizer/lsan_interface.h>

static int fuzz_libjq_parse_hits(const char *p, size_t len)
{
	jv_parser *parser = jv_parser_new(0);
	int hit = 0;
	jv v;

	jv_parser_set_buf(parser, p, (int)len, 0);
	while (jv_is_valid(v = jv_parser_next(parser)))
		jv_free(v);
	if (jv_invalid_has_msg(jv_copy(v))) {
		jv msg = jv_invalid_get_msg(v);

		hit = strstr(jv_string_value(msg), "Expected separator between values") != NULL;
		jv_free(msg);
	} else {
		jv_free(v);
	}
	jv_parser_free(parser);
	return hit;
}

/* Whether parsing p whole reaches the leak (what kop_yaml_load does with
 * text that looks like JSON). */
static int fuzz_libjq_leaks_whole(const char *p, size_t len)
{
	int hit;

	__lsan_disable();
	hit = fuzz_libjq_parse_hits(p, len);
	__lsan_enable();
	return hit;
}

/* Whether parsing p whole or any of its lines reaches it (JSON Lines). */
static int fuzz_libjq_leaks(const char *p, size_t len)
{
	const char *end = p + len;
	int hit;

	if (fuzz_libjq_leaks_whole(p, len))
		return 1;
	__lsan_disable();
	hit = 0;
	while (p < end && !hit) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		hit = fuzz_libjq_parse_hits(p, n);
		p += n + 1;
	}
	__lsan_enable();
	return hit;
}
#endif
