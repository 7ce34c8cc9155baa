/*
 * The create verb (POST): names, generateName, the namespace check, the
 * defaults and status a new object gets, and its commit.
 */
#include <stdlib.h>
#include <string.h>
#include "api.h"
#include "ssa.h"
#include "banned.h"

/* Type-specific defaults and status on create. */
static jv prepare_create(const struct ksim_type *t, jv obj, const char *now)
{
	if (t->flags & KT_STATUS)
		obj = jv_object_delete(obj, jv_string("status"));
	if (!strcmp(t->gr, "namespaces")) {
		jv labels = get_meta(obj, "labels");
		const char *name = ksim_str(obj, "metadata.name");

		if (jv_get_kind(labels) != JV_KIND_OBJECT)
			labels = (jv_free(labels), jv_object());
		labels = jv_object_set(labels, jv_string("kubernetes.io/metadata.name"), jv_string(name ? name : ""));
		obj = set_meta(obj, "labels", labels);
		obj = jv_setpath(obj, JV_ARRAY(jv_string("spec"), jv_string("finalizers")),
				 JV_ARRAY(jv_string("kubernetes")));
		obj = jv_object_set(obj, jv_string("status"), JV_OBJECT(jv_string("phase"), jv_string("Active")));
	} else if (!strcmp(t->gr, "persistentvolumeclaims")) {
		obj = jv_object_set(obj, jv_string("status"), JV_OBJECT(jv_string("phase"), jv_string("Pending")));
	} else if (!strcmp(t->gr, "services")) {
		jv spec = field(obj, "spec");
		const char *type;

		if (jv_get_kind(spec) != JV_KIND_OBJECT)
			spec = (jv_free(spec), jv_object());
		if (!jv_object_has(jv_copy(spec), jv_string("type")))
			spec = jv_object_set(spec, jv_string("type"), jv_string("ClusterIP"));
		type = ksim_str(spec, "type");
		if (!jv_object_has(jv_copy(spec), jv_string("clusterIP")) && type && strcmp(type, "ExternalName")) {
			char ip[32];

			next_service_ip(ip, sizeof(ip));
			spec = jv_object_set(spec, jv_string("clusterIP"), jv_string(ip));
			spec = jv_object_set(spec, jv_string("clusterIPs"), JV_ARRAY(jv_string(ip)));
		}
		if (!jv_object_has(jv_copy(spec), jv_string("sessionAffinity")))
			spec = jv_object_set(spec, jv_string("sessionAffinity"), jv_string("None"));
		obj = jv_object_set(obj, jv_string("spec"), spec);
		obj = jv_object_set(obj, jv_string("status"),
				    JV_OBJECT(jv_string("loadBalancer"), jv_object()));
	} else if (!strcmp(t->gr, "secrets")) {
		if (!jv_object_has(jv_copy(obj), jv_string("type")))
			obj = jv_object_set(obj, jv_string("type"), jv_string("Opaque"));
	} else if (!strcmp(t->gr, "customresourcedefinitions.apiextensions.k8s.io")) {
		obj = crd_status(obj, now);
	} else if (!strcmp(t->gr, "deployments.apps") || !strcmp(t->gr, "statefulsets.apps") ||
		   !strcmp(t->gr, "replicasets.apps")) {
		jv r = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("spec"), jv_string("replicas")));

		if (jv_get_kind(r) != JV_KIND_NUMBER)
			obj = jv_setpath(obj, JV_ARRAY(jv_string("spec"), jv_string("replicas")), jv_number(1));
		jv_free(r);
		/* as kube-apiserver answers: the controller fills it in later */
		obj = jv_object_set(obj, jv_string("status"), jv_object());
	}
	return ksim_builtin_defaults(t, obj);
}

/* Checks the namespace of a namespaced create: 0, or -1 with *err (404 or 403). */
static int namespace_ok(const struct ksim_type *t, const char *ns, const char *name, jv *err)
{
	jv nso;

	if (!(t->flags & KT_NAMESPACED))
		return 0;
	nso = ksim_store_get("namespaces", "", ns);
	if (!jv_is_valid(nso)) {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "namespaces \"%s\" not found", ns);
		*err = ksim_status(404, "NotFound", b.buf,
				   JV_OBJECT(jv_string("name"), jv_string(ns), jv_string("kind"), jv_string("namespaces")));
		kop_buf_release(&b);
		return -1;
	}
	if (ksim_str(nso, "metadata.deletionTimestamp")) {
		struct kop_buf m = KOP_BUF_INIT, c = KOP_BUF_INIT;
		char *gr = gr_string(t);

		kop_buf_addf(&m, "%s \"%s\" is forbidden: unable to create new content in namespace %s because it is being terminated",
			     gr, name, ns);
		kop_buf_addf(&c, "namespace %s is being terminated", ns);
		*err = ksim_status(403, "Forbidden", m.buf,
				   jv_object_set(details(t, name), jv_string("causes"),
						 JV_ARRAY(cause("NamespaceTerminating", c.buf, "metadata.namespace"))));
		free(gr);
		kop_buf_release(&m);
		kop_buf_release(&c);
		return -1;
	}
	return 0;
}

/*
 * Create: obj consumed. Returns the HTTP code; *out the object or a Status.
 * mf_done: managedFields already computed (server-side apply).
 */
int do_create(const struct ksim_type *t, const char *ns, jv obj, const struct wopts *o, int mf_done,
	      jv *out)
{
	char now[32], uid[40];
	const char *name, *gen;
	size_t name_len = 0, gen_len = 0;
	jv old;

	ksim_now(now);
	obj = secret_string_data(t, obj);
	if (t->flags & KT_NAMESPACED) {
		if (ns_mismatch(obj, ns, out)) {
			jv_free(obj);
			return 400;
		}
		obj = set_meta(obj, "namespace", jv_string(ns));
	} else {
		obj = set_meta(obj, "namespace", jv_null());
	}
	name = ksim_strl(obj, "metadata.name", &name_len);
	gen = ksim_strl(obj, "metadata.generateName", &gen_len);
	if ((!name || !name_len) && gen && gen_len) {
		static const char alnum[] = "bcdfghjklmnpqrstvwxz2456789";
		char suffix[6];
		struct kop_buf b = KOP_BUF_INIT;

		/*
		 * every byte of generateName, a NUL too: the name check below sees
		 * them; at most 58 of them, as SimpleNameGenerator keeps (63 - 5)
		 */
		do {
			for (int i = 0; i < 5; i++)
				suffix[i] = alnum[random() % (sizeof(alnum) - 1)];
			suffix[5] = 0;
			kop_buf_reset(&b);
			kop_buf_add(&b, gen, gen_len > 58 ? 58 : gen_len);
			kop_buf_adds(&b, suffix);
		} while (jv_is_valid(ksim_store_get(t->gr, ns, b.buf)));
		obj = set_meta(obj, "name", jv_string_sized(b.buf, (int)b.len));
		kop_buf_release(&b);
		name = ksim_strl(obj, "metadata.name", &name_len);
		gen = ksim_strl(obj, "metadata.generateName", &gen_len);
	}
	{
		jv causes = jv_array();

		if (gen && gen_len)
			causes = ksim_name_causes(t, causes, gen, gen_len, 1, "metadata.generateName");
		if (!name || !name_len)
			causes = jv_array_append(causes, cause("FieldValueRequired",
							       "Required value: name or generateName is required",
							       "metadata.name"));
		else
			causes = ksim_name_causes(t, causes, name, name_len, 0, "metadata.name");
		causes = ksim_size_causes(t, causes, obj);	/* after the metadata's, as kube-apiserver lists them */
		if (jv_array_length(jv_copy(causes)) > 0) {
			*out = invalid_jv(t, name ? jv_string_sized(name, (int)name_len) : jv_string(""), causes);
			jv_free(obj);
			return 422;
		}
		jv_free(causes);
	}
	if (!strcmp(t->gr, "events") && !strcmp(t->group, "events.k8s.io")) {
		jv causes = event_causes(obj);

		if (jv_array_length(jv_copy(causes)) > 0) {
			char *nm = kop_strdup(name);

			*out = invalid(t, nm, causes);
			free(nm);
			jv_free(obj);
			return 422;
		}
		jv_free(causes);
	}
	if (!strcmp(t->gr, "customresourcedefinitions.apiextensions.k8s.io")) {
		struct kop_buf want = KOP_BUF_INIT;
		const char *plural = ksim_str(obj, "spec.names.plural"), *group = ksim_str(obj, "spec.group");

		kop_buf_addf(&want, "%s.%s", plural ? plural : "", group ? group : "");
		if (strcmp(want.buf, name)) {
			char *nm = kop_strdup(name);

			*out = invalid(t, nm, JV_ARRAY(cause("FieldValueInvalid",
							     "Invalid value: \"name\": must be spec.names.plural+\".\"+spec.group",
							     "metadata.name")));
			free(nm);
			kop_buf_release(&want);
			jv_free(obj);
			return 422;
		}
		kop_buf_release(&want);
	}
	{
		jv e;

		if (namespace_ok(t, ns, name, &e) < 0) {
			*out = e;
			jv_free(obj);
			return status_code(e);
		}
	}
	old = ksim_store_get(t->gr, ns, name);
	if (jv_is_valid(old)) {
		char *gr = gr_string(t);

		*out = err_status(t, name, 409, "AlreadyExists", "%s \"%s\" already exists", gr, name);
		free(gr);
		jv_free(obj);
		return 409;
	}
	ksim_uuid(uid);
	obj = set_meta(obj, "uid", jv_string(uid));
	obj = set_meta(obj, "resourceVersion", jv_null());
	obj = set_meta(obj, "creationTimestamp", jv_string(now));
	obj = set_meta(obj, "deletionTimestamp", jv_null());
	obj = set_meta(obj, "deletionGracePeriodSeconds", jv_null());
	obj = set_meta(obj, "selfLink", jv_null());
	obj = set_meta(obj, "generation", t->flags & KT_GENERATION ? jv_number(1) : jv_null());
	obj = jv_object_set(obj, jv_string("apiVersion"), jv_string(t->api_version));
	obj = jv_object_set(obj, jv_string("kind"), jv_string(t->kind));
	obj = prepare_create(t, obj, now);
	{
		jv causes = ksim_builtin_causes(t, obj);

		if (jv_array_length(jv_copy(causes)) > 0) {
			char *nm = kop_strdup(name);

			*out = invalid(t, nm, causes);
			free(nm);
			jv_free(obj);
			return 422;
		}
		jv_free(causes);
	}
	{
		int code;

		if (ksim_escalation_check(t, o->user, o->groups, obj, &code, out) < 0) {	/* escalation.c */
			jv_free(obj);
			return code;
		}
	}
	{
		jv e;
		char *nm = kop_strdup(name);
		int bad = schema_check(t, &obj, jv_invalid(), nm, o, &e);

		free(nm);
		if (bad) {
			jv_free(obj);
			*out = e;
			return status_code(e);
		}
	}
	if (!mf_done) {
		jv li = listinfo(t);

		obj = kop_ssa_track_update(jv_null(), obj, o->manager, NULL, now, li);
		jv_free(li);
	}
	obj = ksim_builtin_admission(t, obj);
	{
		int code = ksim_admission_check(t, obj, out);	/* admission.c */

		if (!code)
			code = ksim_admit(t, "CREATE", ns, name, NULL, obj, jv_null(), o, out);
		if (code) {
			jv_free(obj);
			return code;
		}
	}
	if (o->dry_run) {
		*out = present(t, obj);
		return 201;
	}
	obj = ksim_store_commit(t->gr, jv_null(), obj);
	if (!strcmp(t->gr, "customresourcedefinitions.apiextensions.k8s.io"))
		ksim_types_crd_changed(obj, 0);
	*out = present(t, obj);
	return 201;
}
