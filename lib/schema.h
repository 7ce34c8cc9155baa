#ifndef KOP_SCHEMA_H
#define KOP_SCHEMA_H
/*
 * CRD structural schemas (OpenAPI v3 as in a CRD's
 * spec.versions[].schema.openAPIV3Schema): defaulting,
 * pruning, validation, and the list semantics server-side apply needs.
 * Supported keywords: type, properties, additionalProperties (schema or
 * bool), items, required, enum, default, nullable, minimum, maximum,
 * exclusiveMinimum, exclusiveMaximum, multipleOf, minLength, maxLength, pattern
 * (Perl-style, through Oniguruma), minItems, maxItems,
 * uniqueItems, minProperties, maxProperties, format (int32, int64, etc. are
 * not checked), x-kubernetes-preserve-unknown-fields,
 * x-kubernetes-int-or-string, x-kubernetes-embedded-resource,
 * x-kubernetes-list-type, x-kubernetes-list-map-keys, allOf/anyOf/oneOf/not
 * (validated, not used for pruning, as structural schemas require).
 * obj and schema: obj is consumed, schema is not.
 */
#include <jv.h>
#include "kop.h"

/* Fills `default:` values recursively: a missing property whose schema has
 * a default gets a copy of it (then defaulted itself); array items and
 * additionalProperties values are defaulted by their schemas. Returns obj. */
jv kop_schema_default(jv obj, jv schema);

/* Drops fields not in `properties` (nor covered by additionalProperties or
 * x-kubernetes-preserve-unknown-fields). At the root, apiVersion and kind
 * are kept and metadata is pruned to ObjectMeta's fields (name,
 * generateName, namespace, uid, resourceVersion, generation,
 * creationTimestamp, deletionTimestamp, deletionGracePeriodSeconds, labels,
 * annotations, ownerReferences, finalizers, managedFields, selfLink); the
 * same for x-kubernetes-embedded-resource objects. Returns obj. */
jv kop_schema_prune(jv obj, jv schema);

/*
 * Validates obj (consumed) against schema: an array of causes
 * {"reason","message","field"} in document order, worded as kube-apiserver
 * words them (recordings/errors/422-invalid.http.txt), field paths like
 * "spec.items[0].name":
 *   FieldValueTypeInvalid   Invalid value: "string": spec.size in body must be of type integer: "string"
 *   FieldValueNotSupported  Unsupported value: "pink": supported values: "red", "green", "blue"
 *   FieldValueRequired      Required value
 *   FieldValueInvalid       Invalid value: 11: spec.n in body should be less than or equal to 10
 *                           (minimum/maximum/exclusive*, multipleOf, pattern
 *                           "in body should match '^a'", minLength/maxLength
 *                           "in body should be at least 2 chars long", ...)
 *   FieldValueTooMany / FieldValueTooLong  maxItems / maxProperties, maxLength
 *   FieldValueDuplicate     uniqueItems, duplicate list-map keys / set values
 * Empty array when valid. The root's apiVersion/kind/metadata are not
 * checked against the schema's properties.
 */
jv kop_schema_validate(jv obj, jv schema);

/*
 * The same for an update of the stored object old (consumed), with
 * kube-apiserver's validation ratcheting (1.30, CRDValidationRatcheting): a
 * value of obj equal to old's at the same object path is not judged again,
 * so a value stored before the schema was tightened may stay while others
 * change. Array elements are not matched to old ones: a list that changed
 * is judged whole. (An update built from the stored object shares what it
 * leaves alone, which makes the comparison a pointer's.)
 */
jv kop_schema_validate_update(jv obj, jv old, jv schema);

/* The list semantics of schema (x-kubernetes-list-type map|set|atomic, with
 * x-kubernetes-list-map-keys) in kop_builtin_listinfo's shape (including
 * the metadata entries for finalizers and ownerReferences). */
jv kop_schema_listinfo(jv schema);

/*
 * The 422 message (causes not consumed), e.g.
 *   Widget.test.example.org "bad" is invalid: [spec.color: Unsupported value: "pink": ..., spec.size: ...]
 * kind_group is "Kind" or "Kind.group"; name is a string (consumed, quoted as Go's %q
 * does: it may hold any byte, a NUL too). One cause prints without brackets:
 *   Widget.test.example.org "bad" is invalid: spec.color: Unsupported value: ...
 * Caller frees.
 */
char *kop_schema_invalid_message(const char *kind_group, jv name, jv causes);

#endif
