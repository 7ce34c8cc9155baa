/*
 * The delete verbs: DeleteOptions (preconditions, propagation policy,
 * grace period), finalizers and graceful deletion, orphaning of dependents,
 * and deletecollection.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "api.h"
#include "banned.h"

/* DeleteOptions from the body or the query. */
struct delopts {
	char *uid, *rv, *policy;
	int dry;
	long grace;		/* gracePeriodSeconds, -1 when not given */
};

static void delopts_release(struct delopts *d)
{
	free(d->uid);
	free(d->rv);
	free(d->policy);
}

/* 0, or the HTTP status of the Status *err says what is wrong with. */
static int parse_delopts(const struct ksim_request *rq, struct delopts *d, jv *err)
{
	jv pb = jv_invalid();
	int rc;

	memset(d, 0, sizeof(*d));
	if ((rc = ksim_proto_delete_options(rq, &pb, err)) < 0)
		return 400;
	d->grace = -1;
	if (query(rq, "gracePeriodSeconds")) {
		char *end;
		long g = strtol(query(rq, "gracePeriodSeconds"), &end, 10);

		if (!*end && end != query(rq, "gracePeriodSeconds"))
			d->grace = g < 0 ? 0 : g;
	}
	if (query(rq, "propagationPolicy"))
		d->policy = kop_strdup(query(rq, "propagationPolicy"));
	if (rc > 0 || jv_is_valid(rq->body_jv) || (rq->body && rq->body_len)) {
		jv b = rc > 0		       ? pb
		       : jv_is_valid(rq->body_jv) ? jv_copy(rq->body_jv)
						  : jv_parse_sized(rq->body, (int)rq->body_len);

		if (jv_get_kind(b) == JV_KIND_OBJECT) {
			const char *s;
			jv dr = field(b, "dryRun"), g = field(b, "gracePeriodSeconds");

			if (jv_get_kind(g) == JV_KIND_NUMBER)
				d->grace = jv_number_value(g) < 0 ? 0 : (long)jv_number_value(g);
			jv_free(g);
			if ((s = ksim_str(b, "preconditions.uid")))
				d->uid = kop_strdup(s);
			if ((s = ksim_str(b, "preconditions.resourceVersion")))
				d->rv = kop_strdup(s);
			if ((s = ksim_str(b, "propagationPolicy"))) {
				free(d->policy);
				d->policy = kop_strdup(s);
			}
			if (jv_get_kind(dr) == JV_KIND_ARRAY && jv_array_length(jv_copy(dr)) > 0)
				d->dry = 1;
			jv_free(dr);
		} else if (!jv_is_valid(b) && rq->body_len > 0) {
			jv_free(b);
			delopts_release(d);
			*err = bad_request("json: cannot unmarshal the request body into DeleteOptions");
			return 400;
		}
		jv_free(b);
	}
	if (d->policy && strcmp(d->policy, "Orphan") && strcmp(d->policy, "Background") &&
	    strcmp(d->policy, "Foreground")) {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"%s\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"",
			     d->policy);
		*err = ksim_status(422, "Invalid", b.buf, jv_null());
		kop_buf_release(&b);
		delopts_release(d);
		return 422;
	}
	return 0;
}

struct orphan_ctx {
	const char *uid;
};

static int owned_by(const char *gr, jv obj, void *data)
{
	struct orphan_ctx *c = data;
	jv refs = get_meta(obj, "ownerReferences");
	int hit = 0;

	(void)gr;
	if (jv_get_kind(refs) == JV_KIND_ARRAY) {
		jv_array_foreach(refs, i, ref) {
			const char *u = ksim_str(ref, "uid");

			hit |= u && !strcmp(u, c->uid);
			jv_free(ref);
		}
	}
	jv_free(refs);
	return hit;
}

/* Orphan propagation: dependents lose their reference to uid (what the GC does for policy Orphan). */
static void orphan_dependents(const char *uid)
{
	struct orphan_ctx c = { uid };
	jv deps = ksim_store_select(owned_by, &c);

	jv_array_foreach(deps, i, pair) {
		jv gr = jv_array_get(jv_copy(pair), 0), obj = jv_array_get(pair, 1);
		jv refs = get_meta(obj, "ownerReferences"), kept = jv_array();
		jv nobj;

		jv_array_foreach(refs, j, ref) {
			const char *u = ksim_str(ref, "uid");

			if (u && !strcmp(u, uid))
				jv_free(ref);
			else
				kept = jv_array_append(kept, ref);
		}
		jv_free(refs);
		nobj = set_meta(jv_copy(obj), "ownerReferences",
				jv_array_length(jv_copy(kept)) ? kept : (jv_free(kept), jv_null()));
		jv_free(ksim_store_commit(jv_string_value(gr), obj, nobj));
		jv_free(gr);
	}
	jv_free(deps);
}

/* Deletes one stored object (a copy, consumed); returns the code and *out. */
static int delete_one(const struct ksim_type *t, jv stored, const struct delopts *d, int dry, jv *out)
{
	const char *name = ksim_str(stored, "metadata.name");
	char *nm = kop_strdup(name ? name : "");
	char now[32];
	int ns = !strcmp(t->gr, "namespaces");
	int code = 200;

	ksim_now(now);
	if (d->uid && strcmp(d->uid, ksim_str(stored, "metadata.uid") ? ksim_str(stored, "metadata.uid") : "")) {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "Precondition failed: UID in precondition: %s, UID in object meta: %s", d->uid,
			     ksim_str(stored, "metadata.uid"));
		*out = err_status(t, nm, 409, "Conflict",
				  "Operation cannot be fulfilled on %s: the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated",
				  t->resource, d->uid, ksim_str(stored, "metadata.uid"));
		kop_buf_release(&b);
		code = 409;
		goto out;
	}
	if (d->rv && strcmp(d->rv, ksim_str(stored, "metadata.resourceVersion"))) {
		*out = err_status(t, nm, 409, "Conflict",
				  "Operation cannot be fulfilled on %s: the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified",
				  t->resource, d->rv, ksim_str(stored, "metadata.resourceVersion"));
		code = 409;
		goto out;
	}
	if (ns) {
		if (!strcmp(nm, "default") || !strcmp(nm, "kube-system") || !strcmp(nm, "kube-public")) {
			*out = err_status(t, nm, 403, "Forbidden", "namespaces \"%s\" is forbidden: this namespace may not be deleted",
					  nm);
			code = 403;
			goto out;
		}
		if (ksim_str(stored, "metadata.deletionTimestamp")) {
			if (has_items(jv_getpath(jv_copy(stored), JV_ARRAY(jv_string("spec"), jv_string("finalizers"))))) {
				*out = err_status(t, nm, 409, "Conflict",
						  "Operation cannot be fulfilled on namespaces \"%s\": The system is ensuring all content is removed from this namespace.  Upon completion, this namespace will automatically be purged by the system.",
						  nm);
				code = 409;
				goto out;
			}
			*out = present(t, jv_copy(stored));
			goto out;
		}
	}
	if (d->policy && !strcmp(d->policy, "Orphan") && !dry) {
		const char *uid = ksim_str(stored, "metadata.uid");

		if (uid) {
			char *u = kop_strdup(uid);

			orphan_dependents(u);
			free(u);
		}
	}
	if (!strcmp(t->gr, "pods")) {
		/* graceful deletion: the kubelet deletes the pod once its containers stopped (sim_pods.c) */
		long g = ksim_pod_grace(stored, d->grace);
		jv have = get_meta(stored, "deletionGracePeriodSeconds");
		int shorter = jv_get_kind(have) != JV_KIND_NUMBER || g < jv_number_value(have);

		jv_free(have);
		if (g == 0 && graceful(stored) && !finalizers_empty(stored)) {
			/* the kubelet is done with it; its finalizers keep it */
			jv obj = set_meta(jv_copy(stored), "deletionGracePeriodSeconds", jv_number(0));

			*out = present(t, dry ? obj : ksim_store_commit(t->gr, jv_copy(stored), obj));
			goto out;
		}
		if (g > 0 && !shorter) {
			*out = present(t, jv_copy(stored));
			goto out;
		}
		if (g > 0) {
			char at[32];
			time_t when = time(NULL) + g;
			struct tm tm;
			jv obj;

			gmtime_r(&when, &tm);
			strftime(at, sizeof(at), "%Y-%m-%dT%H:%M:%SZ", &tm);
			obj = set_meta(jv_copy(stored), "deletionTimestamp", jv_string(at));
			obj = set_meta(obj, "deletionGracePeriodSeconds", jv_number((double)g));
			*out = present(t, dry ? obj : ksim_store_commit(t->gr, jv_copy(stored), obj));
			goto out;
		}
	}
	if (!finalizers_empty(stored) ||
	    (ns && has_items(jv_getpath(jv_copy(stored), JV_ARRAY(jv_string("spec"), jv_string("finalizers")))))) {
		jv obj;

		if (ksim_str(stored, "metadata.deletionTimestamp")) {
			*out = present(t, jv_copy(stored));
			goto out;
		}
		obj = set_meta(jv_copy(stored), "deletionTimestamp", jv_string(now));
		obj = set_meta(obj, "deletionGracePeriodSeconds", jv_number(0));
		if (t->flags & KT_GENERATION && generation(obj) > 0)
			obj = set_meta(obj, "generation", jv_number(generation(obj) + 1));
		if (ns)
			obj = jv_setpath(obj, JV_ARRAY(jv_string("status"), jv_string("phase")), jv_string("Terminating"));
		if (dry) {
			*out = present(t, obj);
			goto out;
		}
		*out = present(t, ksim_store_commit(t->gr, jv_copy(stored), obj));
		goto out;
	}
	if (dry) {
		*out = t->flags & KT_RETURN_DELETED ? present(t, jv_copy(stored)) :
			ksim_status(200, NULL, NULL,
				    jv_object_set(details(t, nm), jv_string("uid"),
						  jv_string(ksim_str(stored, "metadata.uid"))));
		goto out;
	}
	if (graceful(stored))	/* the grace-0 delete that ends a graceful one: watchers see 0 */
		stored = set_meta(stored, "deletionGracePeriodSeconds", jv_number(0));
	{
		jv uid = get_meta(stored, "uid");
		jv gone = remove_now(t, jv_copy(stored));

		if (t->flags & KT_RETURN_DELETED) {
			*out = present(t, gone);
		} else {
			jv_free(gone);
			*out = ksim_status(200, NULL, NULL, jv_object_set(details(t, nm), jv_string("uid"), uid));
			uid = jv_null();
		}
		jv_free(uid);
	}
out:
	jv_free(stored);
	free(nm);
	return code;
}

/* The ValidatingAdmissionPolicies on a DELETE of stored (borrowed) by rq's user: 0, or a refusal (admission.c). */
static int admit_delete(const struct ksim_request *rq, const struct ksim_type *t, jv stored, int dry, jv *out)
{
	struct wopts o = { 0 };

	o.dry_run = dry;
	o.user = rq->user;
	o.groups = rq->groups;
	return ksim_admit(t, "DELETE", ksim_str(stored, "metadata.namespace"), ksim_str(stored, "metadata.name"), NULL,
			  jv_null(), stored, &o, out);
}

int do_delete(const struct ksim_request *rq, const struct route *r, int dry, jv *out)
{
	struct delopts d;
	jv stored;
	int code;

	if ((code = parse_delopts(rq, &d, out)))
		return code;
	stored = ksim_store_get(r->t->gr, r->ns, r->name);
	if (!jv_is_valid(stored)) {
		delopts_release(&d);
		*out = not_found(r->t, r->name);
		return 404;
	}
	code = admit_delete(rq, r->t, stored, dry || d.dry, out);
	if (!code)
		code = delete_one(r->t, jv_copy(stored), &d, dry || d.dry, out);
	delopts_release(&d);
	return code;
}

int do_deletecollection(const struct ksim_request *rq, const struct route *r, int dry, jv *out)
{
	struct list_ctx c = { .t = r->t, .items = jv_array() };
	struct delopts d;
	jv items = jv_array();
	char rvbuf[32];
	int code;

	if (r->t->flags & KT_NO_DELCOL) {
		jv_free(c.items);
		*out = err_status(r->t, NULL, 405, "MethodNotAllowed",
				  "deletecollection is not supported on resources of kind \"%s\"", r->t->resource);
		return 405;
	}
	if (selectors(rq, r->t, &c.ls, &c.fs, out) < 0) {
		jv_free(c.items);
		return 400;
	}
	if (ksim_shard_selector(rq, &c.shard, out) < 0) {
		jv_free(c.items);
		ksim_selector_free(c.ls);
		ksim_selector_free(c.fs);
		return 500;
	}
	if ((code = parse_delopts(rq, &d, out))) {
		jv_free(c.items);
		ksim_selector_free(c.ls);
		ksim_selector_free(c.fs);
		ksim_shard_selector_free(c.shard);
		return code;
	}
	ksim_store_each(r->t->gr, r->ns, NULL, list_fn, &c);
	jv_array_foreach(c.items, i, o) {
		jv res;

		/* kube-apiserver stops at the first item admission refuses */
		if (!code && (code = admit_delete(rq, r->t, o, dry || d.dry, &res)) != 0) {
			jv_free(items);
			items = res;
		}
		if (code) {
			jv_free(o);
			continue;
		}
		if (delete_one(r->t, jv_copy(o), &d, dry || d.dry, &res) == 200) {
			const char *kind = ksim_str(res, "kind");

			if (kind && !strcmp(kind, "Status"))
				items = jv_array_append(items, present(r->t, jv_copy(o)));
			else
				items = jv_array_append(items, jv_copy(res));
		}
		jv_free(res);
		jv_free(o);
	}
	jv_free(c.items);
	free(c.last_key);
	delopts_release(&d);
	ksim_selector_free(c.ls);
	ksim_selector_free(c.fs);
	ksim_shard_selector_free(c.shard);
	if (code) {
		*out = items;
		return code;
	}
	snprintf(rvbuf, sizeof(rvbuf), "%llu", (unsigned long long)ksim.rv);
	*out = JV_OBJECT(jv_string("kind"), jv_string(r->t->list_kind), jv_string("apiVersion"),
			 jv_string(r->t->api_version), jv_string("metadata"),
			 JV_OBJECT(jv_string("resourceVersion"), jv_string(rvbuf)), jv_string("items"), items);
	return 200;
}
