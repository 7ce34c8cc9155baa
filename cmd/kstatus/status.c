/*
 * Status writes: a merge patch of the status subresource under a
 * resourceVersion precondition. When the line carries the stored status and
 * the resourceVersion it was seen at (ireconcile's view: every status comes
 * through its watch), or else this kstatus wrote the object's status last,
 * the patch goes at once; otherwise, or after a conflict, the object is read
 * first and nothing is written when its status already is the given one. An
 * object gone (or created again) is skipped.
 */
#include <stdlib.h>
#include <string.h>
#include "kstatus.h"
#include "banned.h"

/* The RFC 7386 merge patch that turns old into new (both consumed): removed keys become null. */
static jv merge_patch(jv old, jv new)
{
	jv patch, keys;
	int i, n;

	if (jv_get_kind(old) != JV_KIND_OBJECT || jv_get_kind(new) != JV_KIND_OBJECT) {
		jv_free(old);
		return new;
	}
	patch = jv_object();
	keys = jv_keys(jv_copy(new));
	n = jv_array_length(jv_copy(keys));
	for (i = 0; i < n; i++) {
		jv k = jv_array_get(jv_copy(keys), i);
		jv nv = jv_object_get(jv_copy(new), jv_copy(k));

		if (!jv_object_has(jv_copy(old), jv_copy(k)))
			patch = jv_object_set(patch, k, nv);
		else {
			jv ov = jv_object_get(jv_copy(old), jv_copy(k));

			if (jv_equal(jv_copy(ov), jv_copy(nv))) {
				jv_free(ov);
				jv_free(nv);
				jv_free(k);
			} else
				patch = jv_object_set(patch, k, merge_patch(ov, nv));
		}
	}
	jv_free(keys);
	keys = jv_keys(jv_copy(old));
	n = jv_array_length(jv_copy(keys));
	for (i = 0; i < n; i++) {
		jv k = jv_array_get(jv_copy(keys), i);

		if (jv_object_has(jv_copy(new), jv_copy(k)))
			jv_free(k);
		else
			patch = jv_object_set(patch, k, jv_null());
	}
	jv_free(keys);
	jv_free(old);
	jv_free(new);
	return patch;
}

/*
 * After a 404 from the status subresource: whether the object itself is
 * gone (or was replaced), rather than the subresource missing (a CRD
 * without one) or the path unknown.
 */
static int object_gone(const char *obj_path, const char *uid)
{
	struct kube_response r;
	int gone;

	if (request("GET", obj_path, NULL, jv_invalid(), &r) < 0)
		gone = r.code == 404;
	else {
		char *live_uid = kop_json_str(r.body, "metadata", "uid");

		gone = uid && *uid && live_uid && strcmp(uid, live_uid);
		free(live_uid);
	}
	kube_response_release(&r);
	return gone;
}

static jv skipped(jv primary, jv ref, long code, const char *why)
{
	jv r = kop_result_ok("status", primary, ref, code, jv_null());

	r = jv_object_set(r, jv_string("reason"), jv_string(code == 404 ? "NotFound" : "Conflict"));
	return jv_object_set(r, jv_string("skipped"), jv_string(why));
}

/*
 * The last status this kstatus wrote to each object (op_key), and the
 * resourceVersion the write left: what is stored unless someone wrote
 * since. A status that comes without what is stored (ireconcile's view
 * still waits for the last one to come back) is written from it, without a
 * read. Each is remembered for WRITTEN_TTL_MS (status_idle), at most
 * WRITTEN_MAX objects (then none, and so on: kstatus does not see deletions).
 */
#define WRITTEN_MAX 10000
#define WRITTEN_TTL_MS 30000

struct written {
	char *status;		/* compact JSON */
	char *rv;
	char *uid;		/* "" when unknown */
	int64_t at;		/* when (monotonic ms) */
};

static struct kop_hmap written;

static void written_free(void *v)
{
	struct written *w = v;

	free(w->status);
	free(w->rv);
	free(w->uid);
	free(w);
}

static void written_forget(const char *key)
{
	struct written *w = key && written.len ? kop_hmap_remove(&written, key) : NULL;

	if (w)
		written_free(w);
}

/* After a write of status to key answered r (2xx): remembered, with the resourceVersion it left. */
static void written_note(const char *key, jv status, const char *uid, const struct kube_response *r)
{
	char *rv = key ? kop_json_str(r->body, "metadata", "resourceVersion") : NULL;
	struct written *w;

	if (!rv || !*rv) {
		free(rv);
		written_forget(key);
		return;
	}
	if (!(w = kop_hmap_get(&written, key))) {
		if (written.len >= WRITTEN_MAX)
			kop_hmap_release(&written, written_free);
		w = kop_calloc(1, sizeof(*w));
		kop_hmap_put(&written, key, w);
	}
	free(w->status);
	free(w->rv);
	free(w->uid);
	w->status = kop_json_dump(jv_copy(status));
	w->rv = rv;
	w->uid = kop_strdup(uid ? uid : "");
	w->at = kop_mono_ms();
}

static int64_t written_left(const void *v, int64_t now)
{
	return ((const struct written *)v)->at + WRITTEN_TTL_MS - now;
}

/*
 * A status written WRITTEN_TTL_MS ago is forgotten: by then the watch has
 * brought it back to ireconcile, whose lines say what is stored. Returns
 * the ms until the next is (-1: none left); the table is looked at only then.
 */
int64_t status_idle(int64_t now)
{
	static int64_t due = -1;	/* (entries come later than those there: the first one's due) */

	return kop_hmap_expire(&written, written_left, now, written_free, &due);
}

/*
 * The write without a read, from the stored status and resourceVersion the
 * line carries, or else from the last status written to the object here:
 * 1 when that settled the operation (written, skipped, reported), 0 to go
 * on with a read (a conflict: the object changed since).
 */
static int write_known(jv line, const char *key, jv primary, jv obj, jv status, const char *obj_path,
		       const char *status_path, const char *uid, const char *who, struct kop_backoff *b,
		       unsigned *tries)
{
	jv stored = kop_json_member(jv_copy(line), "stored");
	char *rv = kop_json_str(line, "resourceVersion", NULL);
	struct written *w = key ? kop_hmap_get(&written, key) : NULL;
	const char *whose = "ireconcile saw it";
	struct kube_response r;
	jv body;
	int done = 1;

	if (w && written_left(w, kop_mono_ms()) <= 0)
		w = NULL;	/* (forgotten, if not yet gone: status_idle) */

	if ((!jv_is_valid(stored) || !rv || !*rv) && w && (!uid || !*uid || !*w->uid || !strcmp(uid, w->uid))) {
		jv_free(stored);
		free(rv);
		stored = kop_json_read(w->status, strlen(w->status));
		rv = kop_strdup(w->rv);
		whose = "it was last written here";
	}
	if (!jv_is_valid(stored) || !rv || !*rv) {
		jv_free(stored);
		free(rv);
		return 0;
	}
	if (jv_get_kind(stored) != JV_KIND_OBJECT)
		stored = (jv_free(stored), jv_object());
	body = jv_object_set(jv_object(), jv_string("metadata"),
			     jv_object_set(jv_object(), jv_string("resourceVersion"), jv_string(rv)));
	body = jv_object_set(body, jv_string("status"), merge_patch(stored, jv_copy(status)));
	free(rv);
	if (write_request("PATCH", status_path, "application/merge-patch+json", body, &r) == 0) {
		written_note(key, status, uid, &r);
		emit(kop_result_ok("status", jv_copy(primary), kop_op_ref(jv_copy(obj)), r.code, jv_copy(r.body)));
	} else if (r.code == 404 && object_gone(obj_path, uid)) {
		written_forget(key);
		emit(skipped(jv_copy(primary), kop_op_ref(jv_copy(obj)), 404, "deleted"));
	} else if (r.code == 409 || retry_after_failure(&r, b, tries, 0)) {
		done = 0;	/* changed since it was seen, or a transient failure: read it and go on */
	} else {
		report_fail("status", jv_copy(primary), kop_op_ref(jv_copy(obj)), &r, who);
	}
	if (!done) {
		written_forget(key);
		if (r.code == 409)
			log_debug("'%s' changed since %s: reading it", who, whose);
	}
	kube_response_release(&r);
	return done;
}

/*
 * Unless the line says what is stored (write_known), GET the object; unless
 * it is gone (or another object now has its name), merge-patch its status
 * with the stored resourceVersion as a precondition; a 409 (the object
 * changed meanwhile) starts again with a fresh read.
 */
void do_status(jv line, const char *line_key)
{
	jv primary = kop_json_member(jv_copy(line), "primary"), obj = kop_json_member(jv_copy(line), "object"), status;
	char *api_version = kop_json_str(obj, "apiVersion", NULL), *kind = kop_json_str(obj, "kind", NULL);
	char *name = kop_json_str(obj, "metadata", "name"), *ns = kop_json_str(obj, "metadata", "namespace");
	char *uid = kop_json_str(obj, "metadata", "uid"), *obj_path = NULL, *status_path = NULL, *who = NULL;
	char *own_key = line_key ? NULL : op_key(line, 1);
	const char *key = line_key ? line_key : own_key;
	struct kube_resource res;
	struct kop_backoff b;
	char err[KOP_ERRLEN];
	unsigned tries = 0;
	int resolved = 0, rc;
	struct kop_buf q = KOP_BUF_INIT;
	struct kube_response dr;

	if (jv_get_kind(primary) != JV_KIND_STRING) {
		jv_free(primary);
		primary = jv_null();
	}
	status = kop_json_member(jv_copy(obj), "status");
	if (!api_version || !kind || !name || !*name || jv_get_kind(status) != JV_KIND_OBJECT) {
		report_local("status", primary, kop_op_ref(jv_copy(obj)), 400, "BadRequest",
			     "a status operation needs an object with apiVersion, kind, metadata.name and status");
		goto out;
	}
	kop_buf_addf(&q, "%s/%s/%s", kind, ns ? ns : "", name);
	who = kop_buf_detach(&q, NULL);
	kop_backoff_init(&b, 100, 5000, 1.0);
	/* (discovery without the lock: its cache and answers are this writer's client's alone) */
	for (;;) {
		pthread_mutex_unlock(&kstatus_lock);
		rc = kube_resolve_gvk(client, api_version, kind, &res, &dr, err);
		pthread_mutex_lock(&kstatus_lock);
		if (rc >= 0)
			break;
		/* No such kind (permanent), or its group version could not be read (classified as any answer). */
		if (rc == -1) {
			report_local("status", primary, kop_op_ref(jv_copy(obj)), 404, "NotFound", err);
			goto out;
		}
		tool_metric_request("GET", dr.code);
		if (!retry_after_failure(&dr, &b, &tries, 0)) {
			report_fail("status", primary, kop_op_ref(jv_copy(obj)), &dr, who);
			kube_response_release(&dr);
			goto out;
		}
		kube_response_release(&dr);
	}
	resolved = 1;
	if (res.namespaced && !ns) {
		ns = kop_strdup(default_ns);
		obj = jv_object_set(obj, jv_string("metadata"),
				    jv_object_set(kop_json_member(jv_copy(obj), "metadata"), jv_string("namespace"),
						  jv_string(ns)));
	}
	obj_path = kube_path(&res, res.namespaced ? ns : NULL, name, NULL);
	{
		char *sp = kube_path(&res, res.namespaced ? ns : NULL, name, "status"), *fm = kube_query_escape(opt.field_manager);

		kop_buf_addf(&q, "%s?fieldManager=%s", sp, fm);
		status_path = kop_buf_detach(&q, NULL);
		free(sp);
		free(fm);
	}
	if (write_known(line, key, primary, obj, status, obj_path, status_path, uid, who, &b, &tries))
		goto written;
	for (;;) {
		struct kube_response r;
		jv stored, body, meta;
		char *live_uid, *rv;

		if (request("GET", obj_path, NULL, jv_invalid(), &r) < 0) {
			if (r.code == 404) {
				written_forget(key);
				log_debug("'%s' is gone: status not written", who);
				emit(skipped(jv_copy(primary), kop_op_ref(jv_copy(obj)), 404, "deleted"));
			} else if (!retry_after_failure(&r, &b, &tries, 0))
				report_fail("status", jv_copy(primary), kop_op_ref(jv_copy(obj)), &r, who);
			else {
				kube_response_release(&r);
				continue;
			}
			kube_response_release(&r);
			break;
		}
		live_uid = kop_json_str(r.body, "metadata", "uid");
		if (uid && *uid && live_uid && strcmp(uid, live_uid)) {
			written_forget(key);
			log_debug("'%s' was deleted and created again: status not written", who);
			emit(skipped(jv_copy(primary), kop_op_ref(jv_copy(obj)), 404, "deleted"));
			free(live_uid);
			kube_response_release(&r);
			break;
		}
		free(live_uid);
		stored = kop_json_member(jv_copy(r.body), "status");
		if (jv_get_kind(stored) != JV_KIND_OBJECT) {
			jv_free(stored);
			stored = jv_object();
		}
		if (jv_equal(jv_copy(stored), jv_copy(status))) {
			jv res_line = kop_result_ok("status", jv_copy(primary), kop_op_ref(jv_copy(obj)), 200,
						    jv_copy(r.body));

			written_note(key, status, uid, &r);
			emit(jv_object_set(res_line, jv_string("unchanged"), jv_true()));
			jv_free(stored);
			kube_response_release(&r);
			break;
		}
		rv = kop_json_str(r.body, "metadata", "resourceVersion");
		meta = jv_object();
		if (rv)
			meta = jv_object_set(meta, jv_string("resourceVersion"), jv_string(rv));
		free(rv);
		body = jv_object_set(jv_object(), jv_string("metadata"), meta);
		body = jv_object_set(body, jv_string("status"), merge_patch(stored, jv_copy(status)));
		kube_response_release(&r);
		if (write_request("PATCH", status_path, "application/merge-patch+json", body, &r) == 0) {
			written_note(key, status, uid, &r);
			emit(kop_result_ok("status", jv_copy(primary), kop_op_ref(jv_copy(obj)), r.code,
					   jv_copy(r.body)));
			kube_response_release(&r);
			break;
		}
		if (r.code == 404 && object_gone(obj_path, uid)) {
			written_forget(key);
			emit(skipped(jv_copy(primary), kop_op_ref(jv_copy(obj)), 404, "deleted"));
			kube_response_release(&r);
			break;
		}
		if (retry_after_failure(&r, &b, &tries, 1)) {
			if (r.code == 409)
				log_debug("'%s' changed meanwhile: reading it again", who);
			kube_response_release(&r);
			continue;
		}
		report_fail("status", jv_copy(primary), kop_op_ref(jv_copy(obj)), &r, who);
		kube_response_release(&r);
		break;
	}
written:
	jv_free(primary);
out:
	if (resolved)
		kube_resource_release(&res);
	jv_free(status);
	jv_free(obj);
	jv_free(line);
	free(api_version);
	free(kind);
	free(name);
	free(ns);
	free(uid);
	free(obj_path);
	free(status_path);
	free(who);
	free(own_key);
	kop_buf_release(&q);
}

void status_release(void)
{
	kop_hmap_release(&written, written_free);
}
