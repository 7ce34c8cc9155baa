#ifndef KOP_JQRUN_H
#define KOP_JQRUN_H
/*
 * A jq program compiled once with libjq (jq 1.6) and run on many inputs,
 * as jq's own main does: jq_compile_args, then jq_start/jq_next per input.
 */
#include <jv.h>
#include "kop.h"

struct kop_jq;

/*
 * Compiles text. libdirs (consumed; an array of directory strings, or
 * jv_null()) is the library path for `include`/`import`; vars (consumed; an
 * object, or jv_null()) binds $name for each key. NULL with err holding
 * jq's messages ("unable to compile 'sync.jq': syntax error, ...").
 */
struct kop_jq *kop_jq_compile(const char *text, const char *name, jv libdirs, jv vars, char *err);
void kop_jq_free(struct kop_jq *q);

/*
 * Runs the program on input (consumed) and returns its single output in
 * *out (owned by the caller). -1 with err when it raises an error, halts,
 * or produces no output or more than one.
 */
int kop_jq_run1(struct kop_jq *q, jv input, jv *out, char *err);

#endif
