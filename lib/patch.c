/*
 * JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge
 * patch (apimachinery pkg/util/strategicpatch) on jv values, plus the list
 * semantics of the built-in kinds that SMP and server-side apply share.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "patch.h"
#include "banned.h"

/* ---- merge patch ---- */

jv kop_merge_patch(jv target, jv patch)
{
	if (jv_get_kind(patch) != JV_KIND_OBJECT) {
		jv_free(target);
		return patch;
	}
	if (jv_get_kind(target) != JV_KIND_OBJECT) {
		jv_free(target);
		target = jv_object();
	}
	jv_object_foreach(patch, key, value) {
		if (jv_get_kind(value) == JV_KIND_NULL) {
			jv_free(value);
			target = jv_object_delete(target, key);
			continue;
		}
		jv old = jv_object_has(jv_copy(target), jv_copy(key)) ?
			jv_object_get(jv_copy(target), jv_copy(key)) : jv_null();
		target = jv_object_set(target, key, kop_merge_patch(old, value));
	}
	jv_free(patch);
	return target;
}

/* ---- JSON patch ---- */

/* RFC 6901: "/a~1b/c" -> ["a/b","c"]; jv_invalid on a malformed pointer. */
static jv pointer_parse(const char *p)
{
	jv toks = jv_array();
	struct kop_buf b = KOP_BUF_INIT;

	if (!*p)
		return toks;
	if (*p != '/') {
		jv_free(toks);
		return jv_invalid();
	}
	while (*p == '/') {
		p++;
		kop_buf_reset(&b);
		kop_buf_adds(&b, "");
		while (*p && *p != '/') {
			if (*p == '~') {
				if (p[1] == '0')
					kop_buf_add(&b, "~", 1);
				else if (p[1] == '1')
					kop_buf_add(&b, "/", 1);
				else {
					kop_buf_release(&b);
					jv_free(toks);
					return jv_invalid();
				}
				p += 2;
				continue;
			}
			kop_buf_add(&b, p, 1);
			p++;
		}
		toks = jv_array_append(toks, jv_string_sized(b.buf, (int)b.len));
	}
	kop_buf_release(&b);
	return toks;
}

/* An array index token: digits without a leading zero; "-" gives len when allowed. */
static int array_index(const char *tok, int len, int allow_end)
{
	long v = 0;
	const char *c;

	if (allow_end && !strcmp(tok, "-"))
		return len;
	if (!*tok || (tok[0] == '0' && tok[1]))
		return -1;
	for (c = tok; *c; c++) {
		if (*c < '0' || *c > '9')
			return -1;
		v = v * 10 + (*c - '0');
		if (v > 1000000000)
			return -1;
	}
	return (int)v;
}

/* The value at toks in doc (neither consumed), or jv_invalid(). */
static jv pointer_get(jv doc, jv toks)
{
	jv cur = jv_copy(doc);
	int i, n = jv_array_length(jv_copy(toks));

	for (i = 0; i < n; i++) {
		jv t = jv_array_get(jv_copy(toks), i);
		const char *s = jv_string_value(t);

		if (jv_get_kind(cur) == JV_KIND_OBJECT) {
			if (!jv_object_has(jv_copy(cur), jv_copy(t))) {
				jv_free(t);
				jv_free(cur);
				return jv_invalid();
			}
			cur = jv_object_get(cur, t);
		} else if (jv_get_kind(cur) == JV_KIND_ARRAY) {
			int len = jv_array_length(jv_copy(cur));
			int idx = array_index(s, len, 0);

			jv_free(t);
			if (idx < 0 || idx >= len) {
				jv_free(cur);
				return jv_invalid();
			}
			cur = jv_array_get(cur, idx);
		} else {
			jv_free(t);
			jv_free(cur);
			return jv_invalid();
		}
	}
	return cur;
}

static jv array_insert(jv a, int idx, jv v)
{
	int len = jv_array_length(jv_copy(a));
	jv out = jv_array_slice(jv_copy(a), 0, idx);

	out = jv_array_append(out, v);
	out = jv_array_concat(out, jv_array_slice(a, idx, len));
	return out;
}

static jv array_remove(jv a, int idx)
{
	int len = jv_array_length(jv_copy(a));
	jv out = jv_array_slice(jv_copy(a), 0, idx);

	return jv_array_concat(out, jv_array_slice(a, idx + 1, len));
}

enum ptr_op { PTR_ADD, PTR_REMOVE, PTR_REPLACE };

/*
 * Applies op at toks[i..] below doc (consumed); value consumed. Returns the
 * new doc, or jv_invalid() with err filled (path is for messages).
 */
static jv pointer_apply(jv doc, jv toks, int i, enum ptr_op op, jv value, const char *path, char *err)
{
	int n = jv_array_length(jv_copy(toks));
	jv t = jv_array_get(jv_copy(toks), i);
	const char *s = jv_string_value(t);

	if (jv_get_kind(doc) == JV_KIND_OBJECT) {
		int has = jv_object_has(jv_copy(doc), jv_copy(t));

		if (i == n - 1) {
			if (op != PTR_ADD && !has)
				goto missing;
			if (op == PTR_REMOVE) {
				jv_free(value);
				return jv_object_delete(doc, t);
			}
			return jv_object_set(doc, t, value);
		}
		if (!has)
			goto missing;
		jv child = pointer_apply(jv_object_get(jv_copy(doc), jv_copy(t)), toks, i + 1, op, value, path, err);
		if (!jv_is_valid(child)) {
			jv_free(t);
			jv_free(doc);
			return child;
		}
		return jv_object_set(doc, t, child);
	}
	if (jv_get_kind(doc) == JV_KIND_ARRAY) {
		int len = jv_array_length(jv_copy(doc));
		int idx = array_index(s, len, op == PTR_ADD && i == n - 1);

		if (idx < 0 || idx > len || (idx == len && !(op == PTR_ADD && i == n - 1)))
			goto missing;
		jv_free(t);
		if (i == n - 1) {
			if (op == PTR_ADD)
				return array_insert(doc, idx, value);
			jv_free(value);
			if (op == PTR_REMOVE)
				return array_remove(doc, idx);
			return jv_array_set(doc, idx, value);
		}
		jv child = pointer_apply(jv_array_get(jv_copy(doc), idx), toks, i + 1, op, value, path, err);
		if (!jv_is_valid(child)) {
			jv_free(doc);
			return child;
		}
		return jv_array_set(doc, idx, child);
	}
missing:
	jv_free(t);
	jv_free(doc);
	jv_free(value);
	kop_error(err, "path '%s' not found", path);
	return jv_invalid();
}

/* Fetches a string member of op; NULL when absent or not a string. */
static const char *op_string(jv op, const char *key, jv *hold)
{
	*hold = jv_object_get(jv_copy(op), jv_string(key));
	if (jv_get_kind(*hold) != JV_KIND_STRING)
		return NULL;
	return jv_string_value(*hold);
}

static int one_op(jv *doc, jv op, int n, char *err)
{
	jv hname, hpath, hfrom, toks, ftoks = jv_invalid(), value = jv_invalid();
	const char *name, *path, *from;
	int rc = -1;

	if (jv_get_kind(op) != JV_KIND_OBJECT) {
		jv_free(op);
		return kop_error(err, "operation %d is not an object", n);
	}
	name = op_string(op, "op", &hname);
	path = op_string(op, "path", &hpath);
	from = op_string(op, "from", &hfrom);
	if (!name) {
		kop_error(err, "operation %d has no 'op'", n);
		goto out;
	}
	if (!path) {
		kop_error(err, "operation %d ('%s') has no 'path'", n, name);
		goto out;
	}
	toks = pointer_parse(path);
	if (!jv_is_valid(toks)) {
		kop_error(err, "invalid path '%s' in operation %d", path, n);
		goto out;
	}
	if (!strcmp(name, "add") || !strcmp(name, "replace") || !strcmp(name, "test")) {
		if (!jv_object_has(jv_copy(op), jv_string("value"))) {
			kop_error(err, "operation %d ('%s') has no 'value'", n, name);
			goto out_toks;
		}
		value = jv_object_get(jv_copy(op), jv_string("value"));
	} else if (!strcmp(name, "move") || !strcmp(name, "copy")) {
		if (!from) {
			kop_error(err, "operation %d ('%s') has no 'from'", n, name);
			goto out_toks;
		}
		ftoks = pointer_parse(from);
		if (!jv_is_valid(ftoks)) {
			kop_error(err, "invalid path '%s' in operation %d", from, n);
			goto out_toks;
		}
		value = pointer_get(*doc, ftoks);
		if (!jv_is_valid(value)) {
			kop_error(err, "path '%s' not found", from);
			goto out_toks;
		}
	} else if (strcmp(name, "remove")) {
		kop_error(err, "unknown op '%s' in operation %d", name, n);
		goto out_toks;
	}

	int depth = jv_array_length(jv_copy(toks));
	if (!strcmp(name, "test")) {
		jv cur = pointer_get(*doc, toks);
		int same = jv_is_valid(cur) && jv_equal(cur, jv_copy(value));

		if (!jv_is_valid(cur))
			jv_free(cur);
		if (!same) {
			kop_error(err, "test operation failed at '%s'", path);
			goto out_toks;
		}
		rc = 0;
		goto out_toks;
	}
	if (!strcmp(name, "move")) {
		size_t fl = strlen(from);

		if (!strncmp(path, from, fl) && path[fl] == '/') {
			kop_error(err, "cannot move '%s' into its own child '%s'", from, path);
			goto out_toks;
		}
		if (!strcmp(path, from)) {
			rc = 0;
			goto out_toks;
		}
		jv d = jv_array_length(jv_copy(ftoks)) == 0 ? jv_invalid() :
			pointer_apply(jv_copy(*doc), ftoks, 0, PTR_REMOVE, jv_null(), from, err);
		if (!jv_is_valid(d)) {
			jv_free(d);
			kop_error(err, "path '%s' not found", from);
			goto out_toks;
		}
		jv_free(*doc);
		*doc = d;
		name = "add";
	}
	if (depth == 0) {
		if (!strcmp(name, "remove")) {
			kop_error(err, "cannot remove the whole document");
			goto out_toks;
		}
		jv_free(*doc);
		*doc = jv_copy(value);
		rc = 0;
		goto out_toks;
	}
	enum ptr_op pop = !strcmp(name, "remove") ? PTR_REMOVE : !strcmp(name, "replace") ? PTR_REPLACE : PTR_ADD;
	jv d = pointer_apply(jv_copy(*doc), toks, 0, pop, jv_is_valid(value) ? jv_copy(value) : jv_null(), path, err);
	if (jv_is_valid(d)) {
		jv_free(*doc);
		*doc = d;
		rc = 0;
	} else {
		jv_free(d);
	}
out_toks:
	jv_free(toks);
out:
	jv_free(ftoks);
	jv_free(value);
	jv_free(hname);
	jv_free(hpath);
	jv_free(hfrom);
	jv_free(op);
	return rc;
}

int kop_json_patch(jv target, jv ops, jv *out, char *err)
{
	int i, n;

	if (jv_get_kind(ops) != JV_KIND_ARRAY) {
		jv_free(target);
		jv_free(ops);
		return kop_error(err, "a JSON patch must be an array of operations");
	}
	n = jv_array_length(jv_copy(ops));
	for (i = 0; i < n; i++) {
		if (one_op(&target, jv_array_get(jv_copy(ops), i), i, err) < 0) {
			jv_free(target);
			jv_free(ops);
			return -1;
		}
	}
	jv_free(ops);
	*out = target;
	return 0;
}

/* ---- list semantics of the built-in kinds ---- */

jv kop_listinfo_get(jv listinfo, const char *pattern)
{
	jv e;

	if (jv_get_kind(listinfo) != JV_KIND_OBJECT)
		return jv_null();
	e = jv_object_get(jv_copy(listinfo), jv_string(pattern));
	if (!jv_is_valid(e)) {
		jv_free(e);
		return jv_null();
	}
	return e;
}

jv kop_listinfo_lookup(jv listinfo, jv path)
{
	struct kop_buf b = KOP_BUF_INIT;
	int i, n = jv_array_length(jv_copy(path));
	jv e;

	kop_buf_adds(&b, "");
	for (i = 0; i < n; i++) {
		jv t = jv_array_get(jv_copy(path), i);

		if (jv_get_kind(t) == JV_KIND_NUMBER)
			kop_buf_adds(&b, "[]");
		else if (jv_get_kind(t) == JV_KIND_STRING) {
			if (b.len)
				kop_buf_adds(&b, ".");
			kop_buf_adds(&b, jv_string_value(t));
		}
		jv_free(t);
	}
	e = kop_listinfo_get(listinfo, b.buf);
	kop_buf_release(&b);
	return e;
}

static jv li_map(const char *k1, const char *k2)
{
	jv keys = jv_array_append(jv_array(), jv_string(k1));

	if (k2)
		keys = jv_array_append(keys, jv_string(k2));
	return jv_object_set(jv_object_set(jv_object(), jv_string("type"), jv_string("map")),
			     jv_string("keys"), keys);
}

static jv li_type(const char *type)
{
	return jv_object_set(jv_object(), jv_string("type"), jv_string(type));
}

static jv li_set(jv li, const char *prefix, const char *rest, jv entry)
{
	struct kop_buf b = KOP_BUF_INIT;

	kop_buf_adds(&b, prefix);
	if (*prefix)
		kop_buf_adds(&b, ".");
	kop_buf_adds(&b, rest);
	li = jv_object_set(li, jv_string(b.buf), entry);
	kop_buf_release(&b);
	return li;
}

/* protocol defaults to TCP in ports lists: the key is filled as the server defaults it */
static jv li_ports(const char *k1)
{
	jv e = li_map(k1, "protocol");

	return jv_object_set(e, jv_string("defaults"),
			     jv_object_set(jv_object(), jv_string("protocol"), jv_string("TCP")));
}

/* The lists of a PodSpec at prefix ("spec", "spec.template.spec"). */
static jv li_podspec(jv li, const char *prefix)
{
	static const char *const containers[] = { "containers", "initContainers", "ephemeralContainers" };
	size_t i;

	for (i = 0; i < sizeof(containers) / sizeof(containers[0]); i++) {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "%s%s%s", prefix, *prefix ? "." : "", containers[i]);
		/* li_set appends "." before the rest; containers[] entries use the list itself */
		li = jv_object_set(li, jv_string(b.buf), li_map("name", NULL));
		kop_buf_adds(&b, "[]");
		li = li_set(li, b.buf, "ports", li_ports("containerPort"));
		li = li_set(li, b.buf, "env", li_map("name", NULL));
		li = li_set(li, b.buf, "volumeMounts", li_map("mountPath", NULL));
		li = li_set(li, b.buf, "volumeDevices", li_map("devicePath", NULL));
		kop_buf_release(&b);
	}
	li = li_set(li, prefix, "volumes", li_map("name", NULL));
	li = li_set(li, prefix, "imagePullSecrets", li_map("name", NULL));
	li = li_set(li, prefix, "hostAliases", li_map("ip", NULL));
	li = li_set(li, prefix, "topologySpreadConstraints", li_map("topologyKey", "whenUnsatisfiable"));
	li = li_set(li, prefix, "resourceClaims", li_map("name", NULL));
	li = li_set(li, prefix, "schedulingGates", li_map("name", NULL));
	return li;
}

static jv li_conditions(jv li, const char *path)
{
	return jv_object_set(li, jv_string(path), li_map("type", NULL));
}

static const char *const builtin_kinds[][2] = {
	{ "v1", "Pod" }, { "v1", "Service" }, { "v1", "Secret" }, { "v1", "ConfigMap" },
	{ "v1", "Namespace" }, { "v1", "ServiceAccount" }, { "v1", "Event" },
	{ "v1", "PersistentVolumeClaim" }, { "v1", "PersistentVolume" }, { "v1", "Node" },
	{ "v1", "Endpoints" },
	{ "apps/v1", "Deployment" }, { "apps/v1", "StatefulSet" }, { "apps/v1", "ReplicaSet" },
	{ "apps/v1", "DaemonSet" },
	{ "batch/v1", "Job" }, { "batch/v1", "CronJob" },
	{ "networking.k8s.io/v1", "NetworkPolicy" },
	{ "coordination.k8s.io/v1", "Lease" },
	{ "events.k8s.io/v1", "Event" },
	{ "rbac.authorization.k8s.io/v1", "Role" }, { "rbac.authorization.k8s.io/v1", "ClusterRole" },
	{ "rbac.authorization.k8s.io/v1", "RoleBinding" },
	{ "rbac.authorization.k8s.io/v1", "ClusterRoleBinding" },
	{ "apiextensions.k8s.io/v1", "CustomResourceDefinition" },
};

int kop_builtin_known(const char *api_version, const char *kind)
{
	size_t i;

	if (!api_version || !kind)
		return 0;
	for (i = 0; i < sizeof(builtin_kinds) / sizeof(builtin_kinds[0]); i++)
		if (!strcmp(api_version, builtin_kinds[i][0]) && !strcmp(kind, builtin_kinds[i][1]))
			return 1;
	return 0;
}

jv kop_builtin_listinfo(const char *api_version, const char *kind)
{
	jv li = jv_object();

	li = jv_object_set(li, jv_string("metadata.finalizers"), li_type("set"));
	li = jv_object_set(li, jv_string("metadata.ownerReferences"), li_map("uid", NULL));
	li = jv_object_set(li, jv_string("metadata.managedFields"), li_type("atomic"));
	if (!kop_builtin_known(api_version, kind))
		return li;
	if (!strcmp(kind, "Pod")) {
		li = li_podspec(li, "spec");
		li = li_conditions(li, "status.conditions");
		li = jv_object_set(li, jv_string("status.podIPs"), li_map("ip", NULL));
		li = jv_object_set(li, jv_string("status.hostIPs"), li_map("ip", NULL));
	} else if (!strcmp(kind, "Deployment") || !strcmp(kind, "StatefulSet") ||
		   !strcmp(kind, "ReplicaSet") || !strcmp(kind, "DaemonSet") || !strcmp(kind, "Job")) {
		li = li_podspec(li, "spec.template.spec");
		li = jv_object_set(li, jv_string("spec.selector"), li_type("atomic"));
		li = li_conditions(li, "status.conditions");
		if (!strcmp(kind, "StatefulSet"))
			li = jv_object_set(li, jv_string("spec.volumeClaimTemplates"), li_type("atomic"));
	} else if (!strcmp(kind, "CronJob")) {
		li = li_podspec(li, "spec.jobTemplate.spec.template.spec");
		li = jv_object_set(li, jv_string("spec.jobTemplate.spec.selector"), li_type("atomic"));
	} else if (!strcmp(kind, "Service")) {
		li = jv_object_set(li, jv_string("spec.ports"), li_ports("port"));
		li = li_conditions(li, "status.conditions");
	} else if (!strcmp(kind, "Namespace") || !strcmp(kind, "PersistentVolumeClaim") ||
		   !strcmp(kind, "Node")) {
		li = li_conditions(li, "status.conditions");
		if (!strcmp(kind, "Node"))
			li = jv_object_set(li, jv_string("status.addresses"), li_map("type", NULL));
	} else if (!strcmp(kind, "ServiceAccount")) {
		li = jv_object_set(li, jv_string("secrets"), li_map("name", NULL));
	} else if (!strcmp(kind, "CustomResourceDefinition")) {
		li = jv_object_set(li, jv_string("spec.versions"), li_map("name", NULL));
		li = li_conditions(li, "status.conditions");
	}
	/* NetworkPolicy, Role/ClusterRole (rules), bindings (subjects), Secret,
	 * ConfigMap, Lease, Event: every list is atomic. */
	return li;
}

/* ---- strategic merge patch ---- */

struct smp {
	jv listinfo;
	struct kop_buf pat;	/* the pattern of the current path */
	char *err;
};

static jv smp_map(struct smp *s, jv orig, jv patch, int *deleted);
static jv smp_value(struct smp *s, jv orig, jv patch);

static size_t pat_push_field(struct kop_buf *b, const char *name)
{
	size_t old = b->len;

	if (b->len)
		kop_buf_adds(b, ".");
	kop_buf_adds(b, name);
	return old;
}

static void pat_pop(struct kop_buf *b, size_t len)
{
	b->len = len;
	if (b->buf)
		b->buf[len] = '\0';
}

static int is_directive_key(const char *k)
{
	return k[0] == '$';
}

/* Does the map element e match patch element p on the keys p carries? */
static int keys_match(jv keys, jv e, jv p)
{
	int i, n = jv_array_length(jv_copy(keys)), any = 0;

	if (jv_get_kind(e) != JV_KIND_OBJECT || jv_get_kind(p) != JV_KIND_OBJECT)
		return 0;
	for (i = 0; i < n; i++) {
		jv k = jv_array_get(jv_copy(keys), i);

		if (!jv_object_has(jv_copy(p), jv_copy(k))) {
			jv_free(k);
			continue;
		}
		any = 1;
		jv pv = jv_object_get(jv_copy(p), jv_copy(k));
		jv ev = jv_object_has(jv_copy(e), jv_copy(k)) ? jv_object_get(jv_copy(e), k) : (jv_free(k), jv_null());
		int eq = jv_equal(pv, ev);

		if (!eq)
			return 0;
	}
	return any;
}

static int find_element(jv list, jv keys, jv p)
{
	int i, n = jv_array_length(jv_copy(list));

	for (i = 0; i < n; i++) {
		jv e = jv_array_get(jv_copy(list), i);
		int m = keys_match(keys, e, p);

		jv_free(e);
		if (m)
			return i;
	}
	return -1;
}

static const char *patch_directive(jv v, jv *hold)
{
	*hold = jv_invalid();
	if (jv_get_kind(v) != JV_KIND_OBJECT || !jv_object_has(jv_copy(v), jv_string("$patch")))
		return NULL;
	*hold = jv_object_get(jv_copy(v), jv_string("$patch"));
	if (jv_get_kind(*hold) != JV_KIND_STRING)
		return "";
	return jv_string_value(*hold);
}

/* A patch value with its directives applied to nothing (a new field). */
static jv smp_fresh(struct smp *s, jv patch)
{
	if (jv_get_kind(patch) == JV_KIND_OBJECT) {
		int deleted = 0;
		jv r = smp_map(s, jv_object(), patch, &deleted);

		if (deleted) {
			jv_free(r);
			return jv_invalid();
		}
		return r;
	}
	if (jv_get_kind(patch) == JV_KIND_ARRAY)
		return smp_value(s, jv_array(), patch);
	return patch;
}

static jv smp_list(struct smp *s, jv orig, jv patch)
{
	jv li = kop_listinfo_get(s->listinfo, s->pat.buf);
	jv type = jv_get_kind(li) == JV_KIND_OBJECT ? jv_object_get(jv_copy(li), jv_string("type")) : jv_null();
	const char *t = jv_get_kind(type) == JV_KIND_STRING ? jv_string_value(type) : "atomic";
	int i, n = jv_array_length(jv_copy(patch));
	jv out;

	if (!strcmp(t, "set")) {
		out = orig;
		for (i = 0; i < n; i++) {
			jv p = jv_array_get(jv_copy(patch), i);
			int j, m = jv_array_length(jv_copy(out)), found = 0;

			for (j = 0; j < m && !found; j++) {
				jv e = jv_array_get(jv_copy(out), j);

				found = jv_equal(e, jv_copy(p));
			}
			if (found)
				jv_free(p);
			else
				out = jv_array_append(out, p);
		}
		jv_free(patch);
	} else if (!strcmp(t, "map")) {
		jv keys = jv_object_get(jv_copy(li), jv_string("keys"));
		size_t mark;
		int replace = 0;

		for (i = 0; i < n; i++) {
			jv h, p = jv_array_get(jv_copy(patch), i);
			const char *d = patch_directive(p, &h);

			if (d && !strcmp(d, "replace"))
				replace = 1;
			jv_free(h);
			jv_free(p);
		}
		out = replace ? (jv_free(orig), jv_array()) : orig;
		mark = s->pat.len;
		kop_buf_adds(&s->pat, "[]");
		for (i = 0; i < n; i++) {
			jv h, p = jv_array_get(jv_copy(patch), i);
			const char *d = patch_directive(p, &h);
			int idx;

			if (d && !strcmp(d, "replace")) {
				jv_free(h);
				jv_free(p);
				continue;
			}
			idx = find_element(out, keys, p);
			if (d && !strcmp(d, "delete")) {
				while (idx >= 0) {
					out = array_remove(out, idx);
					idx = find_element(out, keys, p);
				}
				jv_free(h);
				jv_free(p);
				continue;
			}
			jv_free(h);
			if (jv_get_kind(p) != JV_KIND_OBJECT) {
				out = jv_array_append(out, p);
				continue;
			}
			if (idx >= 0) {
				int deleted = 0;
				jv m = smp_map(s, jv_array_get(jv_copy(out), idx), p, &deleted);

				out = deleted ? (jv_free(m), array_remove(out, idx)) : jv_array_set(out, idx, m);
			} else {
				jv m = smp_fresh(s, p);

				if (jv_is_valid(m))
					out = jv_array_append(out, m);
				else
					jv_free(m);
			}
		}
		pat_pop(&s->pat, mark);
		jv_free(keys);
		jv_free(patch);
	} else {
		/* atomic: replaced, but nested maps still lose their directives */
		jv_free(orig);
		out = jv_array();
		for (i = 0; i < n; i++) {
			jv p = jv_array_get(jv_copy(patch), i);

			out = jv_array_append(out, jv_get_kind(p) == JV_KIND_OBJECT ? smp_fresh(s, p) : p);
		}
		jv_free(patch);
	}
	jv_free(type);
	jv_free(li);
	return out;
}

static jv smp_value(struct smp *s, jv orig, jv patch)
{
	if (jv_get_kind(patch) == JV_KIND_OBJECT && jv_get_kind(orig) == JV_KIND_OBJECT) {
		int deleted = 0;
		jv r = smp_map(s, orig, patch, &deleted);

		if (deleted) {
			jv_free(r);
			return jv_invalid();
		}
		return r;
	}
	if (jv_get_kind(patch) == JV_KIND_ARRAY && jv_get_kind(orig) == JV_KIND_ARRAY)
		return smp_list(s, orig, patch);
	jv_free(orig);
	return smp_fresh(s, patch);
}

/* Orders list by order: named elements first, in that order, then the rest in theirs. */
static jv apply_order(struct smp *s, jv list, jv order)
{
	jv li = kop_listinfo_get(s->listinfo, s->pat.buf);
	jv keys = jv_get_kind(li) == JV_KIND_OBJECT ? jv_object_get(jv_copy(li), jv_string("keys")) : jv_null();
	int i, n = jv_array_length(jv_copy(order)), len = jv_array_length(jv_copy(list));
	char *used = kop_calloc((size_t)len + 1, 1);
	jv out = jv_array();

	for (i = 0; i < n; i++) {
		jv o = jv_array_get(jv_copy(order), i);
		int j;

		for (j = 0; j < len; j++) {
			jv e;
			int m;

			if (used[j])
				continue;
			e = jv_array_get(jv_copy(list), j);
			m = jv_get_kind(keys) == JV_KIND_ARRAY ? keys_match(keys, e, o) :
				jv_equal(jv_copy(e), jv_copy(o));
			if (m) {
				used[j] = 1;
				out = jv_array_append(out, e);
				break;
			}
			jv_free(e);
		}
		jv_free(o);
	}
	for (i = 0; i < len; i++)
		if (!used[i])
			out = jv_array_append(out, jv_array_get(jv_copy(list), i));
	free(used);
	jv_free(keys);
	jv_free(li);
	jv_free(list);
	jv_free(order);
	return out;
}

static jv smp_map(struct smp *s, jv orig, jv patch, int *deleted)
{
	jv h, retain = jv_invalid(), orders = jv_object();
	const char *d = patch_directive(patch, &h);

	*deleted = 0;
	if (d && !strcmp(d, "delete")) {
		*deleted = 1;
		jv_free(h);
		jv_free(orders);
		jv_free(patch);
		return orig;
	}
	if (d && !strcmp(d, "replace")) {
		jv_free(orig);
		orig = jv_object();
	}
	jv_free(h);
	if (jv_object_has(jv_copy(patch), jv_string("$retainKeys")))
		retain = jv_object_get(jv_copy(patch), jv_string("$retainKeys"));

	jv_object_foreach(patch, key, value) {
		const char *k = jv_string_value(key);

		if (!strncmp(k, "$deleteFromPrimitiveList/", 25)) {
			jv name = jv_string(k + 25);
			jv cur = jv_object_has(jv_copy(orig), jv_copy(name)) ?
				jv_object_get(jv_copy(orig), jv_copy(name)) : jv_null();

			if (jv_get_kind(cur) == JV_KIND_ARRAY && jv_get_kind(value) == JV_KIND_ARRAY) {
				jv kept = jv_array();

				jv_array_foreach(cur, i, e) {
					int drop = 0;

					jv_array_foreach(value, j, v) {
						if (!drop)
							drop = jv_equal(jv_copy(e), v);
						else
							jv_free(v);
					}
					kept = drop ? (jv_free(e), kept) : jv_array_append(kept, e);
				}
				orig = jv_object_set(orig, name, kept);
			} else {
				jv_free(name);
			}
			jv_free(cur);
			jv_free(value);
			jv_free(key);
			continue;
		}
		if (!strncmp(k, "$setElementOrder/", 17)) {
			orders = jv_object_set(orders, jv_string(k + 17), value);
			jv_free(key);
			continue;
		}
		if (is_directive_key(k)) {
			jv_free(value);
			jv_free(key);
			continue;
		}
		if (jv_get_kind(value) == JV_KIND_NULL) {
			jv_free(value);
			orig = jv_object_delete(orig, key);
			continue;
		}
		size_t mark = pat_push_field(&s->pat, k);
		jv cur = jv_object_has(jv_copy(orig), jv_copy(key)) ? jv_object_get(jv_copy(orig), jv_copy(key)) : jv_null();
		jv r = smp_value(s, cur, value);

		orig = jv_is_valid(r) ? jv_object_set(orig, key, r) : (jv_free(r), jv_object_delete(orig, key));
		pat_pop(&s->pat, mark);
	}
	jv_object_foreach(orders, key, order) {
		jv cur = jv_object_has(jv_copy(orig), jv_copy(key)) ? jv_object_get(jv_copy(orig), jv_copy(key)) : jv_null();

		if (jv_get_kind(cur) == JV_KIND_ARRAY && jv_get_kind(order) == JV_KIND_ARRAY) {
			size_t mark = pat_push_field(&s->pat, jv_string_value(key));

			orig = jv_object_set(orig, jv_copy(key), apply_order(s, cur, order));
			pat_pop(&s->pat, mark);
		} else {
			jv_free(cur);
			jv_free(order);
		}
		jv_free(key);
	}
	jv_free(orders);
	if (jv_get_kind(retain) == JV_KIND_ARRAY) {
		jv keep = jv_object();

		jv_array_foreach(retain, i, k) {
			if (jv_get_kind(k) == JV_KIND_STRING && jv_object_has(jv_copy(orig), jv_copy(k)))
				keep = jv_object_set(keep, jv_copy(k), jv_object_get(jv_copy(orig), jv_copy(k)));
			jv_free(k);
		}
		jv_free(orig);
		orig = keep;
	}
	jv_free(retain);
	jv_free(patch);
	return orig;
}

int kop_strategic_merge_patch(jv target, jv patch, const char *api_version, const char *kind, jv *out, char *err)
{
	struct smp s;
	int deleted = 0;
	jv r;

	if (!kop_builtin_known(api_version, kind)) {
		jv_free(target);
		jv_free(patch);
		return kop_error(err, "strategic merge patch is not supported for '%s/%s'",
				 api_version ? api_version : "", kind ? kind : "");
	}
	if (jv_get_kind(patch) != JV_KIND_OBJECT) {
		jv_free(target);
		jv_free(patch);
		return kop_error(err, "a strategic merge patch must be an object");
	}
	if (jv_get_kind(target) != JV_KIND_OBJECT) {
		jv_free(target);
		target = jv_object();
	}
	s.listinfo = kop_builtin_listinfo(api_version, kind);
	s.pat = (struct kop_buf)KOP_BUF_INIT;
	kop_buf_adds(&s.pat, "");
	s.err = err;
	r = smp_map(&s, target, patch, &deleted);
	if (deleted) {
		jv_free(r);
		r = jv_object();
	}
	kop_buf_release(&s.pat);
	jv_free(s.listinfo);
	*out = r;
	return 0;
}
