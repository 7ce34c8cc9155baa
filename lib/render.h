#ifndef KOP_RENDER_H
#define KOP_RENDER_H
/*
 * What jq 1.6 cannot do, offered to reconcile programs once, in C.
 *
 * jq 1.6 cannot call C, so a program asks for these by writing a directive
 * in its output: every object of the exact shape {"$fn": NAME, "arg": X}
 * is replaced, innermost first, by NAME(X). pipeline/lib/kop.jq wraps them:
 * `$config | yaml | base64`, `$config | yaml | md5`.
 *
 *   yaml    any value -> its YAML text in the style of the original
 *           operator's gopkg.in/yaml.v2 (spec/vectors: byte for byte)
 *   md5     string -> lowercase hex MD5 of its bytes
 *   sha256  string -> lowercase hex SHA-256 of its bytes
 *   base64  string -> standard base64 (padded), as Secret data needs
 */
#include <jv.h>
#include "kop.h"

/* Calls one function: 0 and *out (owned by the caller), or -1 with err. arg is consumed. */
int kop_fn_call(const char *name, jv arg, jv *out, char *err);

/*
 * Resolves every directive in v (consumed), innermost first. 0 and *out, or
 * -1 with err naming the function and what was wrong with its argument.
 */
int kop_fn_resolve(jv v, jv *out, char *err);

/*
 * The converse, for keeping a resolved value (consumed) small: every string
 * of at least KOP_FN_PACK_MIN bytes that is the padded standard base64 of
 * UTF-8 text becomes {"$fn": "base64", "arg": that text}, which
 * kop_fn_resolve turns back into the very same string. (A resolved value
 * holds no directive, so nothing else in it is taken for one.) Text that
 * differs in a few names compresses to little; its base64 does not.
 */
#define KOP_FN_PACK_MIN 128
jv kop_fn_pack(jv v);

/* The YAML emitter itself (yaml.v2 style, 2-space indent, block style). Caller frees. */
char *kop_yaml_emit(jv v, char *err);

#endif
