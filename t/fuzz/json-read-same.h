/*
 * kop_json_read against libjq's own parser, for the fuzz target (fuzz-jsonl)
 * and test-tool's json-read-check (header only, as libjq-leak.h).
 */
#ifndef FUZZ_JSON_READ_SAME_H
#define FUZZ_JSON_READ_SAME_H
#include <stdlib.h>
#include <string.h>
#include <jv.h>
#include "kop.h"
#include "jsonl.h"

/* What a reader gave (consumed) as text: the value's compact text (jv_equal
 * has -0 == 0: texts do not), its error message, or "(no value)". */
static char *json_read_text(jv v)
{
	if (jv_is_valid(v))
		return kop_json_dump(v);
	if (jv_invalid_has_msg(jv_copy(v)))
		return kop_json_dump(jv_invalid_get_msg(v));
	jv_free(v);
	return kop_strdup("(no value)");
}

/* Whether kop_json_read and jv_parse_sized give the same of s[0..len):
 * *mine and *theirs (the caller frees them) say what each gave. */
static int json_read_same(const char *s, size_t len, char **mine, char **theirs)
{
	*mine = json_read_text(kop_json_read(s, len));
	*theirs = json_read_text(jv_parse_sized(s, (int)len));
	return !strcmp(*mine, *theirs);
}
#endif
