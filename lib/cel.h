#ifndef KOP_CEL_H
#define KOP_CEL_H
/*
 * A subset of CEL (the Common Expression Language of Kubernetes'
 * ValidatingAdmissionPolicies and CRD x-kubernetes-validations) over jv
 * values:
 *
 *   literals      null true false, ints (42, 0x2a), strings '..' ".." r'..'
 *                 with CEL's escapes, lists [a, b], maps {'k': v}
 *   names         identifiers the caller declares; a.f (error "no such key: f"
 *                 on a missing key), a[i], has(a.f)
 *   operators     ?:  ||  &&  == != < <= > >= in  + -  * / %  ! -(unary)
 *                 with CEL's precedence; && and || absorb errors in either
 *                 order (false && error is false, true || error is true)
 *   functions     size(x), x.size(), s.startsWith(t), s.endsWith(t),
 *                 s.contains(t)
 *   macros        e.all(x, p), e.exists(x, p), e.exists_one(x, p),
 *                 e.filter(x, p), e.map(x, t), e.map(x, p, t) over a list's
 *                 items or a map's keys, x bound in p and t; all and exists
 *                 absorb errors as && and || do, the others pass them on
 *
 * Anything else (floats, uints, bytes, other macros, other functions) is a
 * parse error naming its position: "1:17: unsupported ...".
 * Ints are jv numbers with no fraction, exact to 2^53: a literal beyond is a
 * parse error and a result beyond is "integer overflow" (CEL's int64 goes
 * further; jv cannot). A JSON number with a fraction is a double (compared
 * and added, never a literal).
 */
#include <jv.h>

struct kop_cel;

/*
 * Parses src: the program, or NULL with err (KOP_ERRLEN bytes) set to
 * "LINE:COL: what". names, NULL-terminated, are the identifiers the
 * expression may use (NULL: any). The caller frees the program.
 */
struct kop_cel *kop_cel_parse(const char *src, const char *const *names, char *err);
void kop_cel_free(struct kop_cel *p);

/*
 * Evaluates p with vars (an object: name -> value; consumed): the value, or
 * an invalid jv whose message is CEL's runtime error ("no such key: f").
 */
jv kop_cel_eval(const struct kop_cel *p, jv vars);

#endif
