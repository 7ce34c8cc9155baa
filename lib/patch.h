#ifndef KOP_PATCH_H
#define KOP_PATCH_H
/*
 * The patch formats of the Kubernetes API, as pure
 * functions on jv values: JSON merge patch (RFC 7386), JSON patch (RFC 6902)
 * and strategic merge patch (apimachinery's strategicpatch) with the list
 * merge keys of the built-in kinds we serve.
 *
 * jv arguments are consumed; results are owned by the caller. err is a
 * KOP_ERRLEN buffer (may be NULL).
 */
#include <jv.h>
#include "kop.h"

/* RFC 7386: objects merge recursively, null deletes, anything else (arrays
 * too) replaces. A non-object patch replaces the target. Both consumed. */
jv kop_merge_patch(jv target, jv patch);

/*
 * RFC 6902: ops is an array of {op, path, value|from}; op is one of add,
 * remove, replace, move, copy, test. Paths are JSON pointers (RFC 6901,
 * "~0"/"~1" escapes, "-" appends to an array in add/move/copy).
 * 0 and *out = the patched document, or -1 with err ("test operation failed
 * at '/a'", "path '/x/y' not found", "unknown op 'frob'"...) and *out
 * untouched. target and ops consumed.
 */
int kop_json_patch(jv target, jv ops, jv *out, char *err);

/*
 * Strategic merge patch (apimachinery pkg/util/strategicpatch) for the
 * built-in kind api_version/kind. Lists merge as kop_builtin_listinfo says
 * (map lists by their keys, set lists as sets of primitives, others
 * replaced); null deletes a key; directives: "$patch": "replace" | "delete"
 * | "merge" (in maps and as list elements), "$retainKeys",
 * "$deleteFromPrimitiveList/<key>", "$setElementOrder/<key>" (honoured:
 * merged lists come out in that order, elements not named keep theirs after).
 * 0 and *out, or -1 with err: a malformed patch, or a kind without SMP
 * support (custom resources: ksim answers 415 "the body of the request was
 * in an unknown format - accepted media types include: ..."). target and
 * patch consumed.
 */
int kop_strategic_merge_patch(jv target, jv patch, const char *api_version, const char *kind,
			      jv *out, char *err);

/* Is api_version/kind a built-in kind whose lists kop_builtin_listinfo knows
 * (SMP allowed)? 1 or 0. */
int kop_builtin_known(const char *api_version, const char *kind);

/*
 * How the lists of a built-in kind merge, as an object keyed by a path
 * pattern ("." between field names, "[]" for "any element of the list"):
 *   {"spec.template.spec.containers": {"type":"map","keys":["name"]},
 *    "spec.template.spec.containers[].ports": {"type":"map","keys":["containerPort","protocol"]},
 *    "metadata.finalizers": {"type":"set"}, ...}
 * type is "map" (elements identified by keys), "set" (primitive elements,
 * identified by value) or "atomic". Lists not named are atomic; objects are
 * always granular (labels and annotations merge key by key). Unknown kinds
 * (custom resources) get only the metadata entries (finalizers set,
 * ownerReferences map by uid, managedFields atomic). Caller owns the result.
 * This same shape is what kop_schema_listinfo returns for a CRD schema and
 * what kop_ssa_apply takes.
 */
jv kop_builtin_listinfo(const char *api_version, const char *kind);

/* The listinfo entry for the list at a concrete path (array of field
 * names/array indices as in jv_getpath), or jv_null() when not named.
 * Neither listinfo nor path is consumed. */
jv kop_listinfo_lookup(jv listinfo, jv path);

/* The same by pattern ("spec.template.spec.containers[].ports"). listinfo not
 * consumed. An entry {"type":"atomic"} may also name an object (a map owned
 * and replaced as a whole, like a Deployment's spec.selector); a map entry
 * may carry "defaults": {"protocol":"TCP"} for keys the server defaults. */
jv kop_listinfo_get(jv listinfo, const char *pattern);

#endif
