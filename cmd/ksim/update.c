/*
 * The update verb (PUT) and the common end of update, patch and apply
 * (do_update): subresource rules, immutable fields, generation, no-op
 * detection, the removal a last finalizer's going allows, the commit.
 */
#include <stdlib.h>
#include <string.h>
#include "api.h"
#include "banned.h"

int finalizers_empty(jv obj)
{
	return !has_items(get_meta(obj, "finalizers"));
}

/* In a graceful deletion (a pod's, until its kubelet deletes it with grace 0). */
int graceful(jv obj)
{
	jv g = get_meta(obj, "deletionGracePeriodSeconds");
	int yes = jv_get_kind(g) == JV_KIND_NUMBER && jv_number_value(g) > 0;

	jv_free(g);
	return yes;
}

static int collect_fn(jv obj, const char *key, void *data)
{
	jv *items = data;

	(void)key;
	*items = jv_array_append(*items, jv_copy(obj));
	return 0;
}

/* Removes every object of gr at once (the objects of a deleted CRD). */
static void drop_all(const char *gr)
{
	jv items = jv_array();

	ksim_store_each(gr, NULL, NULL, collect_fn, &items);
	jv_array_foreach(items, i, o)
		jv_free(ksim_store_commit(gr, o, jv_null()));
	jv_free(items);
}

/* Commits the removal of stored (consumed) now; returns the deleted state. */
jv remove_now(const struct ksim_type *t, jv stored)
{
	jv gone = ksim_store_commit(t->gr, jv_copy(stored), jv_null());

	if (!strcmp(t->gr, "customresourcedefinitions.apiextensions.k8s.io")) {
		/* a CRD takes its objects with it (their finalizers are not waited for) */
		const char *group = ksim_str(stored, "spec.group"), *plural = ksim_str(stored, "spec.names.plural");
		struct kop_buf gr = KOP_BUF_INIT;

		kop_buf_addf(&gr, "%s.%s", plural ? plural : "", group ? group : "");
		ksim_types_crd_changed(stored, 1);
		drop_all(gr.buf);
		kop_buf_release(&gr);
	}
	jv_free(stored);
	return gone;
}

/*
 * A uid given in a written object must be the stored one (kube-apiserver's
 * BeforeUpdate: ValidateObjectMetaUpdate, uid immutable), so that a write
 * meant for an object deleted and made again under its name is refused:
 * 422 in *out; 0 when uid is absent, empty or the stored one.
 */
int uid_changed(const struct ksim_type *t, jv old, const char *uid, jv *out)
{
	const char *stored = ksim_str(old, "metadata.uid"), *name = ksim_str(old, "metadata.name");
	struct kop_buf b = KOP_BUF_INIT;

	if (!uid || !*uid || !strcmp(uid, stored ? stored : ""))
		return 0;
	kop_buf_adds(&b, "Invalid value: ");
	kop_buf_add_quoted(&b, uid, strlen(uid));
	kop_buf_adds(&b, ": field is immutable");
	*out = invalid(t, name, JV_ARRAY(cause("FieldValueInvalid", b.buf, "metadata.uid")));
	kop_buf_release(&b);
	return 422;
}

/*
 * The common end of update, patch and apply: `obj` (consumed) is the
 * wanted new state of `old` (borrowed, stored). Applies the subresource
 * rules, immutable fields, generation, schema, managedFields (unless
 * mf_done), no-op detection, finalizer-driven removal, and commits.
 */
int do_update(const struct ksim_type *t, jv old, jv obj, const char *sub, const struct wopts *o,
	      int mf_done, jv *out)
{
	char now[32];
	const char *name = ksim_str(old, "metadata.name");
	char *nm = kop_strdup(name ? name : "");
	jv rv = get_meta(obj, "resourceVersion"), oldrv = get_meta(old, "resourceVersion");
	int code = 200, status = sub && !strcmp(sub, "status");
	int status_meta = status && (t->flags & KT_STATUS_META);	/* (a /status write that writes metadata) */

	ksim_now(now);
	if (!sub)
		obj = secret_string_data(t, obj);
	if (jv_get_kind(rv) != JV_KIND_STRING || !*jv_string_value(rv)) {
		if (o->put && (t->flags & KT_NEEDS_RV)) {
			*out = invalid(t, nm, JV_ARRAY(cause("FieldValueInvalid",
							     "Invalid value: 0x0: must be specified for an update",
							     "metadata.resourceVersion")));
			code = 422;
			goto fail;
		}
	} else if (!jv_equal(jv_copy(rv), jv_copy(oldrv))) {
		*out = conflict(t, nm);
		code = 409;
		goto fail;
	}
	/* (a PUT's uid is a precondition on kube-apiserver, 409: left as it was here) */
	if (!o->put && uid_changed(t, old, ksim_str(obj, "metadata.uid"), out)) {
		code = 422;
		goto fail;
	}
	if (status_meta) {
		/*
		 * The status strategies of the workloads (ReplicationControllers
		 * and the apps group's), Jobs and CronJobs reset the spec alone, a
		 * Deployment's its labels too: the rest of the metadata is written
		 * (kube-controller-manager writes a Deployment's revision
		 * annotation with its status). Other kinds here keep only the
		 * status of a /status write.
		 */
		jv spec = field(old, "spec"), st = field(obj, "status");

		obj = jv_get_kind(spec) == JV_KIND_OBJECT ? jv_object_set(obj, jv_string("spec"), spec) :
							     (jv_free(spec), jv_object_delete(obj, jv_string("spec")));
		if (jv_get_kind(st) == JV_KIND_NULL)	/* (as the other kinds' status: null is none) */
			obj = jv_object_delete(obj, jv_string("status"));
		jv_free(st);
		if (!strcmp(t->gr, "deployments.apps"))
			obj = set_meta(obj, "labels", get_meta(old, "labels"));
		/* a subresource's managedFields are the stored ones, whatever the request sends */
		if (!mf_done)
			obj = set_meta(obj, "managedFields", get_meta(old, "managedFields"));
	} else if (status) {
		jv st = field(obj, "status");
		jv mf = get_meta(obj, "managedFields");

		jv_free(obj);
		obj = jv_copy(old);
		obj = jv_get_kind(st) == JV_KIND_NULL || !jv_is_valid(st) ? jv_object_delete(obj, jv_string("status")) :
									     jv_object_set(obj, jv_string("status"), st);
		if (mf_done)
			obj = set_meta(obj, "managedFields", mf);
		else
			jv_free(mf);
	} else if (sub && !strcmp(sub, "finalize")) {
		jv fin = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("spec"), jv_string("finalizers")));

		jv_free(obj);
		obj = jv_setpath(jv_copy(old), JV_ARRAY(jv_string("spec"), jv_string("finalizers")),
				 jv_is_valid(fin) ? fin : jv_array());
	} else {
		if (t->flags & KT_STATUS) {
			jv st = field(old, "status");

			obj = jv_is_valid(st) && jv_get_kind(st) != JV_KIND_NULL ?
				      jv_object_set(obj, jv_string("status"), st) :
				      (jv_free(st), jv_object_delete(obj, jv_string("status")));
		}
		if (!strcmp(t->gr, "namespaces")) {
			jv fin = jv_getpath(jv_copy(old), JV_ARRAY(jv_string("spec"), jv_string("finalizers")));

			obj = jv_setpath(obj, JV_ARRAY(jv_string("spec"), jv_string("finalizers")), fin);
		}
		if (!strcmp(t->gr, "customresourcedefinitions.apiextensions.k8s.io"))
			obj = crd_status(obj, now);
	}
	/* immutable and server-owned metadata */
	{
		static const char *const keep[] = { "name", "namespace", "uid", "creationTimestamp",
						    "deletionTimestamp", "deletionGracePeriodSeconds", "generation" };

		for (size_t i = 0; i < sizeof(keep) / sizeof(*keep); i++)
			obj = set_meta(obj, keep[i], get_meta(old, keep[i]));
		obj = set_meta(obj, "resourceVersion", jv_copy(oldrv));
		obj = set_meta(obj, "selfLink", jv_null());
	}
	obj = jv_object_set(obj, jv_string("apiVersion"), field(old, "apiVersion"));
	obj = jv_object_set(obj, jv_string("kind"), jv_string(t->kind));
	if (ksim_str(old, "metadata.deletionTimestamp")) {
		jv of = get_meta(old, "finalizers"), nf = get_meta(obj, "finalizers");
		int added = 0;

		if (jv_get_kind(nf) == JV_KIND_ARRAY) {
			jv_array_foreach(nf, i, f) {
				int found = 0;

				if (jv_get_kind(of) == JV_KIND_ARRAY) {
					jv_array_foreach(of, j, g) {
						found |= jv_equal(g, jv_copy(f));
					}
				}
				added |= !found;
				jv_free(f);
			}
		}
		jv_free(of);
		jv_free(nf);
		if (added) {
			*out = invalid(t, nm, JV_ARRAY(cause("FieldValueForbidden",
							     "Forbidden: no new finalizers can be added if the object is being deleted",
							     "metadata.finalizers")));
			jv_free(obj);
			code = 422;
			goto out;
		}
	}
	if (!sub || status_meta) {
		jv causes = ksim_size_causes(t, jv_array(), obj);	/* validate.c */

		if (jv_array_length(jv_copy(causes)) > 0) {
			*out = invalid(t, nm, causes);
			code = 422;
			goto fail;
		}
		jv_free(causes);
	}
	if (!sub && ksim_escalation_check(t, o->user, o->groups, obj, &code, out) < 0)	/* escalation.c */
		goto fail;
	if (schema_check(t, &obj, old, nm, o, out) < 0) {
		jv_free(obj);
		code = status_code(*out);
		goto out;
	}
	if (t->flags & KT_GENERATION) {
		if (!jv_equal(spec_part(t, jv_copy(obj)), spec_part(t, jv_copy(old))))
			obj = set_meta(obj, "generation", jv_number(generation(old) + 1));
	}
	if (!mf_done) {
		jv li = listinfo(t);

		obj = track_update(jv_copy(old), obj, o->manager, status ? "status" : NULL, now, li);
		jv_free(li);
	}
	{
		int c = sub ? 0 : ksim_admission_check(t, obj, out);	/* admission.c */

		if (!c)
			c = ksim_admit(t, "UPDATE", ksim_str(old, "metadata.namespace"), nm, sub, obj, old, o, out);
		if (c) {
			code = c;
			goto fail;
		}
	}
	if (same_object(obj, old)) {
		jv_free(obj);
		*out = present(t, jv_copy(old));
		goto out;
	}
	if (o->dry_run) {
		*out = present(t, obj);
		goto out;
	}
	if (ksim_str(obj, "metadata.deletionTimestamp") && finalizers_empty(obj) && !graceful(obj) &&
	    !(!strcmp(t->gr, "namespaces") &&
	      has_items(jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("spec"), jv_string("finalizers")))))) {
		/*
		 * The last finalizer went: the object goes. Watchers see one
		 * DELETED carrying the state before this update (as etcd3's
		 * store does), except for namespaces, whose finalize step is a
		 * write of its own (recordings/namespace/).
		 */
		if (!strcmp(t->gr, "namespaces")) {
			jv stored = ksim_store_commit(t->gr, jv_copy(old), jv_copy(obj));

			jv_free(remove_now(t, stored));
		} else {
			jv_free(remove_now(t, jv_copy(old)));
		}
		*out = present(t, obj);
		goto out;
	}
	obj = ksim_store_commit(t->gr, jv_copy(old), obj);
	if (!strcmp(t->gr, "customresourcedefinitions.apiextensions.k8s.io"))
		ksim_types_crd_changed(obj, 0);
	*out = present(t, obj);
	goto out;
fail:
	jv_free(obj);
out:
	jv_free(rv);
	jv_free(oldrv);
	free(nm);
	return code;
}

int do_put(const struct ksim_request *rq, const struct route *r, const struct wopts *o, jv *out)
{
	jv obj, old;
	const char *bname;
	size_t bname_len = 0;

	if (body_object(rq, r->t, &obj, out) < 0)
		return status_code(*out);
	bname = ksim_strl(obj, "metadata.name", &bname_len);
	if (bname && bytes_differ(bname, bname_len, r->name)) {
		*out = name_mismatch(bname, bname_len, r->name);
		jv_free(obj);
		return 400;
	}
	if (!bname)
		obj = set_meta(obj, "name", jv_string(r->name));
	if (r->ns && (r->t->flags & KT_NAMESPACED)) {
		if (ns_mismatch(obj, r->ns, out)) {
			jv_free(obj);
			return 400;
		}
	}
	old = ksim_store_get(r->t->gr, r->ns, r->name);
	if (!jv_is_valid(old)) {
		if ((r->t->flags & KT_CREATE_ON_UPDATE) && !r->sub) {
			obj = set_meta(obj, "resourceVersion", jv_null());
			return do_create(r->t, r->ns, obj, o, 0, out);
		}
		jv_free(obj);
		*out = not_found(r->t, r->name);
		return 404;
	}
	return do_update(r->t, old, obj, r->sub, o, 0, out);
}
