#ifndef KOP_SSA_H
#define KOP_SSA_H
/*
 * Server-side apply and managedFields bookkeeping
 * (sigs.k8s.io/structured-merge-diff semantics).
 *
 * Field sets are kept in the real FieldsV1 encoding:
 *   "f:<name>"            a field of an object
 *   "k:<json>"            an element of a map-list, by its keys as a JSON
 *                         object with the keys in sorted order ({"name":"c"},
 *                         {"containerPort":80,"protocol":"TCP"})
 *   "v:<json>"            an element of a set-list, by its JSON value
 *   "i:<n>"               an element of an atomic list is never tracked (the list
 *                         is owned as a whole)
 *   ".": {}               the element / object itself is owned too
 * listinfo is the shape kop_builtin_listinfo and kop_schema_listinfo return
 * (lists not named are atomic). It is not consumed by these functions.
 *
 * Not owned by anybody: metadata.name, namespace, uid, resourceVersion,
 * generation, creationTimestamp, deletionTimestamp, deletionGracePeriodSeconds,
 * selfLink, managedFields; nor apiVersion and kind.
 * Timestamps ("now") are metav1.Time strings, "2006-01-02T15:04:05Z".
 */
#include <jv.h>
#include "kop.h"

/*
 * Applies `applied` (consumed: a partial object with apiVersion, kind,
 * metadata.name) for field manager `manager` onto live_or_null (consumed;
 * jv_null() means create). subresource is "" or NULL for the main resource,
 * or "status".
 *  0: *out = the merged object. Its metadata.managedFields holds one
 *     {manager, operation:"Apply", apiVersion: applied's, time: now,
 *     fieldsType:"FieldsV1", fieldsV1, [subresource]} entry for this manager
 *     (replacing its previous Apply entry) with exactly the fields of
 *     `applied`; other managers lose the fields whose value changed (or that
 *     were forced away from them); entries left empty are dropped. Fields
 *     this manager owned before and no longer applies are removed from the
 *     object unless another manager still owns them. When nothing changes
 *     (same fields, same values) *out equals live except for the entry's
 *     time, which is kept too: callers detect the no-op with jv_equal.
 *  1: !force and other managers own fields whose value would change:
 *     *conflicts = [{"manager","operation","apiVersion","subresource"?,
 *     "field":".spec.replicas"}, ...] (ordered by manager, then field);
 *     pass it to kop_ssa_conflict_message. *out untouched.
 * -1: a malformed body (err): not an object, or metadata.managedFields
 *     set ("metadata.managedFields must be nil"). A map-list element
 *     missing a key takes the listinfo entry's "defaults" for it (protocol
 *     "TCP" in ports); an element with none of its keys is appended and not
 *     tracked.
 * force=1 never conflicts: the forced fields move to this manager.
 */
int kop_ssa_apply(jv live_or_null, jv applied, const char *manager, int force, const char *subresource,
		  const char *now, jv listinfo, jv *out, jv *conflicts, char *err);

/*
 * Ownership bookkeeping for writes that are not apply (create, update,
 * JSON/merge/strategic patch). Returns new (consumed) with
 * metadata.managedFields updated: the fields that differ from old (all set
 * fields when old_or_null is null) become owned by manager's "Update" entry
 * for new's apiVersion (and subresource), merged into any such entry it
 * already has, with time now; the same fields leave every other manager's
 * set; empty entries are dropped. new's own metadata.managedFields, if the
 * client sent any, is taken as given when it differs from old's (as
 * kube-apiserver lets clients reset it); an empty list [] clears all. When
 * nothing changed the result carries old's managedFields untouched.
 * old_or_null consumed.
 */
jv kop_ssa_track_update(jv old_or_null, jv new, const char *manager, const char *subresource,
			const char *now, jv listinfo);

/*
 * The 409 message for conflicts (not consumed), exactly as kube-apiserver
 * words it (recordings/errors/409-apply-conflict.http.txt):
 *   Apply failed with 1 conflict: conflict with "one": .data.k
 *   Apply failed with 1 conflict: conflict with "m" using apps/v1: .spec.replicas
 *   Apply failed with 2 conflicts: conflicts with "m" using apps/v1:\n- .a\n- .b
 * ("using <apiVersion>" for Update managers only; ` with subresource
 * "status"` when the entry has one). Several managers: one line per manager
 * after the first line. Caller frees.
 */
char *kop_ssa_conflict_message(jv conflicts);

/* The Status causes for conflicts (not consumed):
 * [{"reason":"FieldManagerConflict","message":"conflict with \"one\"","field":".data.k"}] */
jv kop_ssa_conflict_causes(jv conflicts);

/* The set of fields set in obj (not consumed), FieldsV1-encoded, ignoring the
 * unowned metadata fields. listinfo not consumed. */
jv kop_ssa_fieldset(jv obj, jv listinfo);

#endif
