/*
 * A program's kinds (primary, children, observed, related) and their mappings
 * back to the primary, read and checked, and released. Loading the document
 * around them is program.c's; matching objects against them program_query.c's.
 */
#include <stdlib.h>
#include <string.h>
#include "program-priv.h"
#include "jsonl.h"
#include "banned.h"

void program_mapping_release(struct kop_mapping *m)
{
	free(m->label_name);
	free(m->namespace);
	free(m->namespace_label);
	jv_free(m->match);
	memset(m, 0, sizeof(*m));
	m->match = jv_null();
}

int program_load_mapping(jv o, const char *where, struct kop_mapping *m, char *err)
{
	jv owner = program_get(o, "ownerReference"), labels = program_get(o, "labels");
	int rc = 0;

	static const char *const mapping_keys[] = { "ownerReference", "labels", NULL };
	static const char *const labels_keys[] = { "name", "namespace", "namespaceLabel", "match", NULL };
	char lwhere[96];

	memset(m, 0, sizeof(*m));
	m->match = jv_object();
	m->owner_ref = jv_get_kind(owner) == JV_KIND_TRUE;
	snprintf(lwhere, sizeof(lwhere), "%s.labels", where);
	if (program_known_keys(o, where, mapping_keys, err) < 0) {
		rc = -1;
	} else if (jv_get_kind(labels) == JV_KIND_OBJECT) {
		jv match = program_get(labels, "match");

		if (program_known_keys(labels, lwhere, labels_keys, err) < 0 ||
		    program_req_str(labels, "name", lwhere, &m->label_name, err) < 0 ||
		    program_opt_str(labels, "namespace", lwhere, &m->namespace, err) < 0 ||
		    program_opt_str(labels, "namespaceLabel", lwhere, &m->namespace_label, err) < 0)
			rc = -1;
		if (!rc && jv_get_kind(match) == JV_KIND_OBJECT) {
			jv_object_foreach(match, k, v) {
				if (jv_get_kind(v) != JV_KIND_STRING && !rc)
					rc = kop_error(err, "'%s.labels.match.%s' must be a string", where,
						       jv_string_value(k));
				jv_free(k);
				jv_free(v);
			}
			if (!rc) {
				jv_free(m->match);
				m->match = jv_copy(match);
			}
		} else if (!rc && jv_get_kind(match) != JV_KIND_NULL) {
			rc = kop_error(err, "'%s.labels.match' must be an object", where);
		}
		jv_free(match);
	} else if (jv_get_kind(labels) != JV_KIND_NULL) {
		rc = kop_error(err, "'%s.labels' must be an object", where);
	}
	jv_free(owner);
	jv_free(labels);
	return rc;
}

void program_kind_release(struct kop_kind *k)
{
	free(k->resource);
	free(k->api_version);
	free(k->kind);
	free(k->group);
	free(k->key);
	free(k->namespace);
	free(k->name);
	free(k->label_selector);
	free(k->project_text);
	kop_jq_free(k->project);
	jv_free(k->keep);
	jv_free(k->ignore);
	program_mapping_release(&k->own_mapping);
}

/*
 * A list of fields (under key of o, an array: where names it), each
 * "spec.replicas" or a list of keys (a key with a dot, as label names have:
 * [metadata, labels, app.kubernetes.io/name]), into *out as an array of
 * paths (arrays of keys).
 */
static int load_fields(jv v, const char *where, const char *key, jv *out, char *err)
{
	jv fields = jv_array();
	int i, n = jv_array_length(jv_copy(v));

	for (i = 0; i < n; i++) {
		jv f = jv_array_get(jv_copy(v), i), path = jv_array();
		int ok = 1, j, m;

		if (jv_get_kind(f) == JV_KIND_STRING) {
			const char *s = jv_string_value(f), *dot;

			for (;; s = dot + 1) {
				dot = strchr(s, '.');
				if (dot == s || !*s) {
					ok = 0;
					break;
				}
				path = jv_array_append(path, jv_string_sized(s, (int)(dot ? (size_t)(dot - s) : strlen(s))));
				if (!dot)
					break;
			}
		} else if (jv_get_kind(f) == JV_KIND_ARRAY && (m = jv_array_length(jv_copy(f))) > 0) {
			for (j = 0; j < m && ok; j++) {
				jv part = jv_array_get(jv_copy(f), j);

				ok = jv_get_kind(part) == JV_KIND_STRING && jv_string_length_bytes(jv_copy(part)) > 0;
				path = jv_array_append(path, part);
			}
		} else {
			ok = 0;
		}
		jv_free(f);
		if (!ok) {
			jv_free(path);
			jv_free(fields);
			return kop_error(err, "'%s.%s[%d]' must be a field such as spec.replicas, or a list of "
					 "keys such as [metadata, labels, app.kubernetes.io/name]", where, key, i);
		}
		fields = jv_array_append(fields, path);
	}
	*out = fields;
	return 0;
}

/* A kind's `project`: jq text (k->project_text), or a list of the fields kept (k->keep). */
static int load_project(jv o, const char *where, struct kop_kind *k, char *err)
{
	jv v = program_get(o, "project"), keep;
	int rc;

	if (jv_get_kind(v) != JV_KIND_ARRAY) {
		jv_free(v);
		if (program_opt_str(o, "project", where, &k->project_text, err) < 0)
			return kop_error(err, "'%s.project' must be jq text or a list of fields", where);
		return 0;
	}
	if (!jv_array_length(jv_copy(v))) {
		jv_free(v);
		return kop_error(err, "'%s.project' lists no field (leave it out to keep objects whole)", where);
	}
	rc = load_fields(v, where, "project", &keep, err);
	jv_free(v);
	if (rc < 0)
		return -1;
	jv_free(k->keep);
	k->keep = keep;
	return 0;
}

/* Whether path a (an array of keys) is b or within it. */
static int path_within(jv a, jv b)
{
	int i, n = jv_array_length(jv_copy(b)), same = jv_array_length(jv_copy(a)) >= n;

	for (i = 0; same && i < n; i++)
		same = jv_equal(jv_array_get(jv_copy(a), i), jv_array_get(jv_copy(b), i));
	return same;
}

/* The index of the first path of list (from index from on) that path f is
 * within or around, or -1 (both borrowed). */
static int overlap_in(jv f, jv list, int from)
{
	int found = -1;

	jv_array_foreach(list, i, e) {
		if (found < 0 && i >= from && (path_within(f, e) || path_within(e, f)))
			found = i;
		jv_free(e);
	}
	return found;
}

/*
 * A child kind's `ignore` (k->ignore): fields that others write on its
 * objects and the program neither reads nor sets (a Deployment's revision
 * annotation). The kind has a `project` listing the fields the program
 * sees, and none of them is within or around one of those, or another.
 */
static int load_ignore(jv o, const char *where, struct kop_kind *k, char *err)
{
	jv v = program_get(o, "ignore"), ignore;
	int rc;

	if (jv_get_kind(v) == JV_KIND_NULL) {
		jv_free(v);
		return 0;
	}
	if (k->role != KOP_ROLE_CHILD) {
		jv_free(v);
		return kop_error(err, "'%s.ignore' is for children (what the engine compares)", where);
	}
	if (jv_get_kind(v) != JV_KIND_ARRAY || !jv_array_length(jv_copy(v))) {
		jv_free(v);
		return kop_error(err, "'%s.ignore' must be a list of fields", where);
	}
	if (jv_get_kind(k->keep) != JV_KIND_ARRAY) {
		jv_free(v);
		return kop_error(err, "'%s.ignore' needs a project that lists the fields kept: without one the program "
				 "sees the whole object, the fields ignored among them", where);
	}
	rc = load_fields(v, where, "ignore", &ignore, err);
	jv_free(v);
	if (rc < 0)
		return -1;
	jv_array_foreach(ignore, i, f) {
		const char *clash = overlap_in(f, k->keep, 0) >= 0 ? "a field its project keeps (the program reads it)"
				  : overlap_in(f, ignore, i + 1) >= 0 ? "another field it ignores" : NULL;

		jv_free(f);
		if (clash) {
			jv_free(ignore);
			return kop_error(err, "'%s.ignore[%d]' is within or around %s", where, i, clash);
		}
	}
	k->ignore = ignore;
	return 0;
}

/*
 * The labels a label selector (sel) selects by, each as a path
 * metadata.labels.KEY appended to paths (consumed; returned). A requirement
 * ends at a comma outside parentheses; its key comes first, after a "!":
 * "k=v", "k==v", "k!=v", "k in (a,b)", "k notin (a,b)", "k", "!k".
 */
static jv selector_label_paths(const char *sel, jv paths)
{
	const char *q = sel;

	while (*q) {
		size_t n;
		int depth = 0;

		while (*q == ' ' || *q == ',' || *q == '!')
			q++;
		n = strcspn(q, "=!, (");
		if (n)
			paths = jv_array_append(paths, JV_ARRAY(jv_string("metadata"), jv_string("labels"),
								jv_string_sized(q, (int)n)));
		for (q += n; *q && (depth || *q != ','); q++)
			depth = *q == '(' ? depth + 1 : *q == ')' && depth ? depth - 1 : depth;
	}
	return paths;
}

/*
 * A child kind's `ignore` against what the engine itself reads or writes
 * on its objects, once its mapping is known: their identity, the members
 * every digest leaves out already (status, resourceVersion), the deletion
 * timestamp, the applied annotation, the mapping's owner reference and
 * labels, the labels its watch selects by. One ignored there (or around
 * them: all annotations, say) would hide a change of them.
 */
int program_check_ignore(const struct kop_kind *k, char *err)
{
	const struct kop_mapping *m = k->mapping;
	jv own = JV_ARRAY(JV_ARRAY(jv_string("apiVersion")), JV_ARRAY(jv_string("kind")),
			  JV_ARRAY(jv_string("metadata"), jv_string("name")),
			  JV_ARRAY(jv_string("metadata"), jv_string("namespace")),
			  JV_ARRAY(jv_string("metadata"), jv_string("uid")),
			  JV_ARRAY(jv_string("metadata"), jv_string("resourceVersion")), JV_ARRAY(jv_string("status")),
			  JV_ARRAY(jv_string("metadata"), jv_string("annotations"), jv_string(KOP_APPLIED_ANNOTATION)));
	int rc = 0;

	if (jv_get_kind(k->ignore) != JV_KIND_ARRAY) {
		jv_free(own);
		return 0;
	}
	if (m && m->owner_ref)
		own = jv_array_append(own, JV_ARRAY(jv_string("metadata"), jv_string("ownerReferences")));
	if (m && m->label_name)
		own = jv_array_append(own, JV_ARRAY(jv_string("metadata"), jv_string("labels"), jv_string(m->label_name)));
	if (m && m->namespace_label)
		own = jv_array_append(own, JV_ARRAY(jv_string("metadata"), jv_string("labels"),
						    jv_string(m->namespace_label)));
	own = jv_array_append(own, JV_ARRAY(jv_string("metadata"), jv_string("deletionTimestamp")));
	if (k->label_selector)
		own = selector_label_paths(k->label_selector, own);
	if (m && jv_get_kind(m->match) == JV_KIND_OBJECT) {
		jv keys = jv_keys(jv_copy(m->match));

		jv_array_foreach(keys, i, key) {
			own = jv_array_append(own, JV_ARRAY(jv_string("metadata"), jv_string("labels"), key));
			(void)i;
		}
		jv_free(keys);
	}
	jv_array_foreach(k->ignore, i, f) {
		int j = rc ? -1 : overlap_in(f, own, 0);

		if (j >= 0) {
			struct kop_buf b = KOP_BUF_INIT;
			jv one = JV_ARRAY(jv_array_get(jv_copy(own), j));

			kop_fields_format(one, &b);
			jv_free(one);
			rc = kop_error(err, "kind '%s': 'ignore[%d]' is within or around %s, which the engine reads "
				       "or writes itself", k->key, i, b.buf);
			kop_buf_release(&b);
		}
		jv_free(f);
	}
	jv_free(own);
	return rc;
}

/*
 * Kubernetes' own cluster-scoped kinds (group, kind): their objects have no
 * namespace for a shard selector to read. A custom kind says `scope: Cluster`.
 */
static int builtin_cluster_scoped(const char *group, const char *kind)
{
	static const char *const kinds[][2] = {
		{ "", "Namespace" }, { "", "Node" }, { "", "PersistentVolume" }, { "", "ComponentStatus" },
		{ "rbac.authorization.k8s.io", "ClusterRole" }, { "rbac.authorization.k8s.io", "ClusterRoleBinding" },
		{ "storage.k8s.io", "StorageClass" }, { "storage.k8s.io", "CSIDriver" }, { "storage.k8s.io", "CSINode" },
		{ "storage.k8s.io", "VolumeAttachment" }, { "storage.k8s.io", "VolumeAttributesClass" },
		{ "apiextensions.k8s.io", "CustomResourceDefinition" }, { "apiregistration.k8s.io", "APIService" },
		{ "admissionregistration.k8s.io", "MutatingWebhookConfiguration" },
		{ "admissionregistration.k8s.io", "ValidatingWebhookConfiguration" },
		{ "admissionregistration.k8s.io", "ValidatingAdmissionPolicy" },
		{ "admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding" },
		{ "admissionregistration.k8s.io", "MutatingAdmissionPolicy" },
		{ "admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding" },
		{ "scheduling.k8s.io", "PriorityClass" }, { "node.k8s.io", "RuntimeClass" },
		{ "networking.k8s.io", "IngressClass" }, { "networking.k8s.io", "IPAddress" },
		{ "networking.k8s.io", "ServiceCIDR" }, { "certificates.k8s.io", "CertificateSigningRequest" },
		{ "certificates.k8s.io", "ClusterTrustBundle" }, { "flowcontrol.apiserver.k8s.io", "FlowSchema" },
		{ "flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration" }, { "resource.k8s.io", "DeviceClass" },
		{ "resource.k8s.io", "ResourceSlice" },
	};
	size_t i;

	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (!strcmp(kinds[i][0], group) && !strcmp(kinds[i][1], kind))
			return 1;
	return 0;
}

int program_load_kind(jv o, const char *where, enum kop_role role, const struct kop_mapping *dflt,
		      struct kop_kind *k, char *err)
{
	jv m;
	int rc;

	memset(k, 0, sizeof(*k));
	k->own_mapping.match = jv_null();
	k->keep = jv_null();
	k->ignore = jv_null();
	k->role = role;
	k->mapping = dflt;
	if (jv_get_kind(o) != JV_KIND_OBJECT)
		return kop_error(err, "'%s' must be an object", where);
	{
		static const char *const kind_keys[] = { "resource", "apiVersion", "kind", "namespace", "name",
							 "labelSelector", "project", "ignore", "mapping", "adopt", "scope",
							 NULL };
		static const char *const primary_keys[] = { "resource", "apiVersion", "kind", "namespace", "name",
							    "labelSelector", "project", "mapping", "finalizer",
							    "shardKey", NULL };

		if (program_known_keys(o, where, role == KOP_ROLE_PRIMARY ? primary_keys : kind_keys, err) < 0)
			return -1;
	}
	if (program_req_str(o, "resource", where, &k->resource, err) < 0 ||
	    program_req_str(o, "apiVersion", where, &k->api_version, err) < 0 ||
	    program_req_str(o, "kind", where, &k->kind, err) < 0 || program_opt_str(o, "namespace", where, &k->namespace, err) < 0 ||
	    program_opt_str(o, "name", where, &k->name, err) < 0 ||
	    program_opt_str(o, "labelSelector", where, &k->label_selector, err) < 0 ||
	    load_project(o, where, k, err) < 0 || load_ignore(o, where, k, err) < 0)
		return -1;
	{
		jv adopt = program_get(o, "adopt");
		int ak = jv_get_kind(adopt);

		jv_free(adopt);
		if (ak != JV_KIND_NULL && ak != JV_KIND_TRUE && ak != JV_KIND_FALSE)
			return kop_error(err, "'%s.adopt' must be true or false", where);
		if (ak != JV_KIND_NULL && role != KOP_ROLE_CHILD)
			return kop_error(err, "'%s.adopt' is for children (what the engine writes)", where);
		k->create_only = ak == JV_KIND_FALSE;
	}
	if (k->namespace && !*k->namespace) {
		free(k->namespace);
		k->namespace = NULL;
	}
	if (k->namespace && !strcmp(k->namespace, "~") && role != KOP_ROLE_CHILD && role != KOP_ROLE_OBSERVED)
		return kop_error(err, "'%s.namespace': \"~\" (one watch per namespace of the Namespace children) is for "
				      "children and observed kinds", where);
	k->group = kop_api_group(k->api_version);
	{
		char *scope = NULL;

		if (program_opt_str(o, "scope", where, &scope, err) < 0)
			return -1;
		if (scope && strcmp(scope, "Cluster") && strcmp(scope, "Namespaced")) {
			kop_error(err, "'%s.scope' must be Cluster or Namespaced, not '%s'", where, scope);
			free(scope);
			return -1;
		}
		k->cluster_scoped = scope ? !strcmp(scope, "Cluster") : builtin_cluster_scoped(k->group, k->kind);
		free(scope);
	}
	k->key = kop_strdup("");
	{
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "%s.%s", k->kind, k->api_version);
		free(k->key);
		k->key = kop_buf_detach(&b, NULL);
	}
	m = program_get(o, "mapping");
	rc = 0;
	if (jv_get_kind(m) == JV_KIND_OBJECT) {
		char mwhere[96];

		snprintf(mwhere, sizeof(mwhere), "%s.mapping", where);
		jv_free(k->own_mapping.match);
		rc = program_load_mapping(m, mwhere, &k->own_mapping, err);
		k->has_own_mapping = 1;	/* k->mapping is set once p->kinds stops moving */
	} else if (jv_get_kind(m) != JV_KIND_NULL) {
		rc = kop_error(err, "'%s.mapping' must be an object", where);
	}
	jv_free(m);
	return rc;
}

int program_load_kinds(struct kop_program *p, jv doc, const char *section, enum kop_role role, char *err)
{
	jv list = program_get(doc, section);
	int i, n;

	if (jv_get_kind(list) == JV_KIND_NULL) {
		jv_free(list);
		return 0;
	}
	if (jv_get_kind(list) != JV_KIND_ARRAY) {
		jv_free(list);
		return kop_error(err, "'%s' must be a list", section);
	}
	n = jv_array_length(jv_copy(list));
	p->kinds = kop_realloc(p->kinds, (p->nkinds + (size_t)n) * sizeof(*p->kinds));
	for (i = 0; i < n; i++) {
		char where[64];
		struct kop_kind *k = &p->kinds[p->nkinds];
		jv e = jv_array_get(jv_copy(list), i);
		int rc;

		snprintf(where, sizeof(where), "%s[%d]", section, i);
		rc = program_load_kind(e, where, role, &p->mapping, k, err);
		jv_free(e);
		p->nkinds++;	/* released with the rest, even when half loaded */
		if (rc < 0) {
			jv_free(list);
			return -1;
		}
		if (role == KOP_ROLE_RELATED && k->has_own_mapping) {
			jv_free(list);
			return kop_error(err, "'%s.mapping': related objects belong to every primary", where);
		}
		if (role != KOP_ROLE_RELATED) {
			/* (related objects are one object each: two Secrets are two entries) */
			size_t j;

			for (j = p->nkinds - (size_t)i - 1; j < p->nkinds - 1; j++)
				if (!strcmp(p->kinds[j].kind, k->kind) && !strcmp(p->kinds[j].group, k->group)) {
					jv_free(list);
					return kop_error(err, "'%s': %s is listed twice in '%s'", where, k->kind, section);
				}
		}
	}
	jv_free(list);
	return 0;
}
