/*
 * The patch verb: JSON patch, merge patch, strategic merge patch and
 * server-side apply (with the upgrade of client-side apply's annotation);
 * the result goes through do_update() (update.c).
 */
#include <stdlib.h>
#include <string.h>
#include "api.h"
#include "patch.h"
#include "ssa.h"
#include "yaml.h"
#include "banned.h"

static int has_annotation(jv obj, const char *key)
{
	jv a = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("metadata"), jv_string("annotations"), jv_string(key)));
	int has = jv_get_kind(a) == JV_KIND_STRING;

	jv_free(a);
	return has;
}

/*
 * kube-apiserver lets `kubectl apply --server-side` take over fields that
 * `kubectl apply` (client-side) set: when every conflict is with the
 * client-side manager and the live object carries the last-applied
 * annotation, the apply is forced (managedfields' lastAppliedManager; it
 * also compares the values with the annotation's, which is skipped here).
 */
static int upgrade_from_csa(jv live, jv conflicts, const char *manager)
{
	int ok;

	if (!manager || strcmp(manager, "kubectl") || !jv_is_valid(live) ||
	    !has_annotation(live, "kubectl.kubernetes.io/last-applied-configuration"))
		ok = 0;
	else
		ok = jv_get_kind(conflicts) == JV_KIND_ARRAY && jv_array_length(jv_copy(conflicts)) > 0;
	if (ok) {
		jv_array_foreach(conflicts, i, c) {
			const char *m = ksim_str(c, "manager");

			if (!m || strcmp(m, "kubectl-client-side-apply"))
				ok = 0;
			jv_free(c);
		}
	}
	return ok;
}

int do_patch(const struct ksim_request *rq, const struct route *r, const struct wopts *o, jv *out)
{
	const char *ct = rq->content_type ? rq->content_type : "";
	jv old = ksim_store_get(r->t->gr, r->ns, r->name), patch, res;
	char err[KOP_ERRLEN];
	int apply = !strncmp(ct, "application/apply-patch+yaml", 28);

	if (!apply && query(rq, "force")) {
		*out = ksim_status(422, "Invalid", "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch",
				   jv_null());
		return 422;
	}
	if (apply) {
		jv docs;
		const char *fm = query(rq, "fieldManager");

		if (!fm || !*fm) {
			*out = ksim_status(422, "Invalid", "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
					   jv_null());
			return 422;
		}
		if (kop_yaml_load(rq->body ? rq->body : "", rq->body_len, "request body", &docs, err) < 0) {
			*out = bad_request(err);
			return 400;
		}
		if (jv_array_length(jv_copy(docs)) != 1) {
			jv_free(docs);
			*out = bad_request("error decoding YAML: the body must hold exactly one object");
			return 400;
		}
		patch = jv_array_get(docs, 0);
	} else if (parse_body(rq, &patch, out) < 0) {
		return status_code(*out);
	}
	if (apply) {
		jv conflicts = jv_null(), saved = jv_null();
		char now[32], *applied_uid;
		const char *av = ksim_str(patch, "apiVersion"), *name;
		size_t name_len = 0;
		int rc;

		ksim_now(now);
		if (jv_get_kind(patch) != JV_KIND_OBJECT) {
			jv_free(patch);
			*out = bad_request("the body of the request is not a JSON object");
			return 400;
		}
		if (av && strcmp(av, r->t->api_version) && strcmp(r->t->gr, "events")) {
			struct kop_buf b = KOP_BUF_INIT;

			kop_buf_addf(&b, "Incorrect version specified in apply patch. Specified patch version: %s, expected: %s",
				     av, r->t->api_version);
			*out = bad_request(b.buf);
			kop_buf_release(&b);
			jv_free(patch);
			return 400;
		}
		name = ksim_strl(patch, "metadata.name", &name_len);
		if (name && bytes_differ(name, name_len, r->name)) {
			*out = name_mismatch(name, name_len, r->name);
			jv_free(patch);
			return 400;
		}
		if (!jv_is_valid(old) && r->sub) {
			jv_free(patch);
			*out = not_found(r->t, r->name);
			return 404;
		}
		if (!name)
			patch = set_meta(patch, "name", jv_string(r->name));
		if (r->t->flags & KT_NAMESPACED) {
			if (ns_mismatch(patch, r->ns, out)) {
				jv_free(patch);
				return 400;
			}
			patch = set_meta(patch, "namespace", jv_string(r->ns));
		}
		applied_uid = kop_strdup(ksim_str(patch, "metadata.uid") ? ksim_str(patch, "metadata.uid") : "");
		if (!jv_is_valid(old) && *applied_uid) {
			/* kube-apiserver's patcher: an apply naming a uid creates nothing */
			char *gr = gr_string(r->t);

			*out = err_status(r->t, r->name, 409, "Conflict",
					  "Operation cannot be fulfilled on %s \"%s\": uid mismatch: the provided object specified uid %s, and no existing object was found",
					  gr, r->name, applied_uid);
			free(gr);
			free(applied_uid);
			jv_free(patch);
			return 409;
		}
		if (!jv_is_valid(old)) {
			/* the applied object is its own first version */
			patch = jv_object_set(patch, jv_string("apiVersion"), jv_string(r->t->api_version));
			patch = jv_object_set(patch, jv_string("kind"), jv_string(r->t->kind));
		}
		{
			jv applied_rv = get_meta(patch, "resourceVersion");
			jv li = listinfo(r->t);

			if (jv_get_kind(applied_rv) == JV_KIND_STRING && jv_is_valid(old) &&
			    !jv_equal(jv_copy(applied_rv), get_meta(old, "resourceVersion"))) {
				jv_free(applied_rv);
				jv_free(li);
				jv_free(patch);
				free(applied_uid);
				*out = conflict(r->t, r->name);
				return 409;
			}
			jv_free(applied_rv);
			/* The applied uid judged (kube-apiserver judges the merged object, after
			 * any conflict of fields: the merge here keeps the stored uid). */
			if (jv_is_valid(old) && (rc = uid_changed(r->t, old, applied_uid, out))) {
				jv_free(li);
				jv_free(patch);
				free(applied_uid);
				return rc;
			}
			free(applied_uid);
			saved = jv_copy(patch);
			rc = kop_ssa_apply(jv_is_valid(old) ? jv_copy(old) : jv_null(), patch, query(rq, "fieldManager"),
					   o->force, r->sub, now, li, &res, &conflicts, err);
			jv_free(li);
		}
		if (rc == 1 && upgrade_from_csa(old, conflicts, query(rq, "fieldManager"))) {
			/* kube-apiserver's lastAppliedManager: client-side apply hands over to kubectl's SSA */
			jv li = listinfo(r->t);

			jv_free(conflicts);
			conflicts = jv_null();
			rc = kop_ssa_apply(jv_copy(old), jv_copy(saved), query(rq, "fieldManager"), 1, r->sub, now, li,
					   &res, &conflicts, err);
			jv_free(li);
		}
		jv_free(saved);
		if (rc == 1) {
			char *msg = kop_ssa_conflict_message(conflicts);

			*out = ksim_status(409, "Conflict", msg,
					   JV_OBJECT(jv_string("causes"), kop_ssa_conflict_causes(conflicts)));
			free(msg);
			jv_free(conflicts);
			return 409;
		}
		if (rc < 0) {
			*out = bad_request(err);
			return 400;
		}
		jv_free(conflicts);
		if (!jv_is_valid(old))
			return do_create(r->t, r->ns, res, o, 1, out);
		return do_update(r->t, old, res, r->sub, o, 1, out);
	}
	if (!jv_is_valid(old)) {
		jv_free(patch);
		*out = not_found(r->t, r->name);
		return 404;
	}
	if (!strncmp(ct, "application/json-patch+json", 27)) {
		if (jv_get_kind(patch) != JV_KIND_ARRAY) {
			jv_free(patch);
			*out = bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch");
			return 400;
		}
		if (jv_array_length(jv_copy(patch)) > 10000) {
			jv_free(patch);
			*out = ksim_status(413, "RequestEntityTooLarge",
					   "Request entity too large: The allowed operations in a JSON patch are limited to 10000, got more",
					   jv_null());
			return 413;
		}
		if (kop_json_patch(present(r->t, jv_copy(old)), patch, &res, err) < 0) {
			*out = ksim_status(422, "Invalid", err, jv_null());
			return 422;
		}
	} else if (!strncmp(ct, "application/merge-patch+json", 28)) {
		if (jv_get_kind(patch) != JV_KIND_OBJECT) {
			jv_free(patch);
			*out = bad_request("the body of the request is not a JSON object");
			return 400;
		}
		res = kop_merge_patch(present(r->t, jv_copy(old)), patch);
	} else if (!strncmp(ct, "application/strategic-merge-patch+json", 38)) {
		if ((r->t->flags & KT_CUSTOM) || !kop_builtin_known(r->t->api_version, r->t->kind)) {
			jv_free(patch);
			*out = ksim_status(415, "UnsupportedMediaType",
					   "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
					   jv_null());
			return 415;
		}
		if (kop_strategic_merge_patch(present(r->t, jv_copy(old)), patch, r->t->api_version, r->t->kind, &res,
					      err) < 0) {
			*out = bad_request(err);
			return 400;
		}
	} else {
		jv_free(patch);
		*out = ksim_status(415, "UnsupportedMediaType",
				   "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json",
				   jv_null());
		return 415;
	}
	if (jv_get_kind(res) != JV_KIND_OBJECT) {
		jv_free(res);
		*out = bad_request("the patched object is not a JSON object");
		return 400;
	}
	{
		/* kube-apiserver's patcher checks the patched object's name and namespace (checkName):
		 * a patch that removes or changes them is refused */
		size_t n_len = 0;
		const char *n = ksim_strl(res, "metadata.name", &n_len);

		if (!n || bytes_differ(n, n_len, r->name)) {
			*out = name_mismatch(n ? n : "", n ? n_len : 0, r->name);
			jv_free(res);
			return 400;
		}
		if (r->ns && (r->t->flags & KT_NAMESPACED) && ns_mismatch(res, r->ns, out)) {
			jv_free(res);
			return 400;
		}
	}
	return do_update(r->t, old, res, r->sub, o, 0, out);
}
