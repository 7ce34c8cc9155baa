#ifndef KOP_OPRESULT_H
#define KOP_OPRESULT_H
/*
 * The "op":"result" lines kapply and kstatus write for every operation
 * (docs/architecture.md, "The stage protocol"):
 *   {"op":"result","for":"apply","primary":"ns/name","ref":{"apiVersion","kind","namespace","name"},
 *    "ok":true,"code":200,"resourceVersion":"42","uid":"…"}
 *   {"op":"result",…,"ok":false,"code":409,"reason":"Conflict","message":"…","causes":[…]}
 * All jv arguments are consumed; the line is returned to the caller.
 */
#include <jv.h>
#include "kube.h"

/* {"apiVersion","kind","namespace","name"} of obj (members that are missing are left out). */
jv kop_op_ref(jv obj);
/* ok:true, code, and resourceVersion/uid taken from body when it is an object with metadata. */
jv kop_result_ok(const char *for_op, jv primary, jv ref, long code, jv body);
/* ok:false from a failed response: code, reason, message, causes (details.causes) when present. */
jv kop_result_fail(const char *for_op, jv primary, jv ref, const struct kube_response *r);
/* ok:false for a failure found before anything was sent (bad operation, unknown kind). */
jv kop_result_local(const char *for_op, jv primary, jv ref, long code, const char *reason, const char *message);

#endif
