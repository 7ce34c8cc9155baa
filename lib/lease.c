/* Leader election on a Lease: client-go's tryAcquireOrRenew and release (lease.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lease.h"
#include "banned.h"

void lease_init(struct lease *l, const char *ns, const char *name, const char *identity, long duration_s)
{
	struct kop_buf b = KOP_BUF_INIT;

	memset(l, 0, sizeof(*l));
	kop_buf_addf(&b, "/apis/coordination.k8s.io/v1/namespaces/%s/leases", ns);
	l->collection = kop_strdup(b.buf);
	kop_buf_addf(&b, "/%s", name);
	l->path = kop_buf_detach(&b, NULL);
	l->ns = kop_strdup(ns);
	l->name = kop_strdup(name);
	l->identity = kop_strdup(identity);
	l->duration_s = duration_s;
	l->observed = jv_null();
	l->observed_spec = jv_null();
}

void lease_release_mem(struct lease *l)
{
	free(l->path);
	free(l->collection);
	free(l->ns);
	free(l->name);
	free(l->identity);
	jv_free(l->observed);
	jv_free(l->observed_spec);
	memset(l, 0, sizeof(*l));
	l->observed = jv_null();
	l->observed_spec = jv_null();
}

/* A field of spec (not consumed), jv_null() when spec is not an object; the caller frees it. */
static jv spec_get(jv spec, const char *key)
{
	if (jv_get_kind(spec) != JV_KIND_OBJECT)
		return jv_null();
	return jv_object_get(jv_copy(spec), jv_string(key));
}

static int spec_holder_is(jv spec, const char *identity)
{
	jv h = spec_get(spec, "holderIdentity");
	int r = jv_get_kind(h) == JV_KIND_STRING && !strcmp(jv_string_value(h), identity);

	jv_free(h);
	return r;
}

static int spec_holder_empty(jv spec)
{
	jv h = spec_get(spec, "holderIdentity");
	int r = jv_get_kind(h) != JV_KIND_STRING || !*jv_string_value(h);

	jv_free(h);
	return r;
}

static double spec_number(jv spec, const char *key)
{
	jv v = spec_get(spec, key);
	double d = jv_get_kind(v) == JV_KIND_NUMBER ? jv_number_value(v) : 0;

	jv_free(v);
	return d;
}

/* Remembers obj (consumed) as observed; a changed spec restarts the validity clock. */
static void observe(struct lease *l, jv obj, int64_t now_ms)
{
	jv spec = jv_get_kind(obj) == JV_KIND_OBJECT ? jv_object_get(jv_copy(obj), jv_string("spec")) : jv_null();

	if (!jv_equal(jv_copy(spec), jv_copy(l->observed_spec)) || jv_get_kind(l->observed) == JV_KIND_NULL)
		l->observed_ms = now_ms;
	jv_free(l->observed_spec);
	l->observed_spec = spec;
	jv_free(l->observed);
	l->observed = obj;
}

/* When what a request of io just read is observed: now, or given when io has no clock. */
static int64_t answered(const struct lease_io *io, int64_t given_ms)
{
	return io->mono_ms ? io->mono_ms(io->clock_ctx) : given_ms;
}

int64_t lease_observed_expiry(const struct lease *l)
{
	return l->observed_ms + (int64_t)(spec_number(l->observed_spec, "leaseDurationSeconds") * 1000);
}

static int observed_valid(const struct lease *l, int64_t now_ms)
{
	return lease_observed_expiry(l) > now_ms;
}

void lease_observe(struct lease *l, jv obj, int64_t now_ms)
{
	observe(l, obj, now_ms);
	if (!spec_holder_is(l->observed_spec, l->identity))
		l->leader = 0;
}

int lease_observed_valid(const struct lease *l, int64_t now_ms)
{
	return observed_valid(l, now_ms);
}

static jv micro(int64_t now_us)
{
	char buf[40];

	return jv_string(kop_time_micro(buf, sizeof(buf), now_us));
}

/* The Lease object to write: metadata from the observed one (resourceVersion included) or new. */
static jv lease_object(const struct lease *l, jv spec)
{
	jv meta;

	if (jv_get_kind(l->observed) == JV_KIND_OBJECT) {
		meta = jv_object_get(jv_copy(l->observed), jv_string("metadata"));
		if (jv_get_kind(meta) != JV_KIND_OBJECT) {
			jv_free(meta);
			meta = jv_object();
		}
		meta = jv_object_delete(meta, jv_string("managedFields"));
	} else {
		meta = jv_object();
	}
	meta = jv_object_set(meta, jv_string("name"), jv_string(l->name));
	meta = jv_object_set(meta, jv_string("namespace"), jv_string(l->ns));
	return JV_OBJECT(jv_string("apiVersion"), jv_string("coordination.k8s.io/v1"),
			 jv_string("kind"), jv_string("Lease"), jv_string("metadata"), meta,
			 jv_string("spec"), spec);
}

static int request_error(long code, jv resp, const char *what, const struct lease *l, char *err, char *rerr)
{
	jv msg = jv_get_kind(resp) == JV_KIND_OBJECT ? jv_object_get(jv_copy(resp), jv_string("message")) : jv_null();

	if (code == 0)
		kop_error(err, "unable to %s lease '%s/%s': %s", what, l->ns, l->name, rerr);
	else if (jv_get_kind(msg) == JV_KIND_STRING)
		kop_error(err, "unable to %s lease '%s/%s': %ld %s", what, l->ns, l->name, code, jv_string_value(msg));
	else
		kop_error(err, "unable to %s lease '%s/%s': HTTP %ld", what, l->ns, l->name, code);
	jv_free(msg);
	jv_free(resp);
	return -1;
}

/* PUT the observed lease with spec (consumed). 1 ok, 0 conflict, -1 error. */
static int put_spec(struct lease *l, const struct lease_io *io, jv spec, int64_t now_ms, const char *what, char *err)
{
	char rerr[KOP_ERRLEN] = "";
	jv resp = jv_null();
	long code = io->request(io->ctx, "PUT", l->path, lease_object(l, spec), &resp, rerr);

	if (code >= 200 && code < 300) {
		observe(l, resp, answered(io, now_ms));
		return 1;
	}
	if (code == 409) {
		jv_free(resp);
		return 0;
	}
	return request_error(code, resp, what, l, err, rerr);
}

int lease_try_acquire_or_renew(struct lease *l, const struct lease_io *io, int64_t now_ms, int64_t now_us,
			       char *err)
{
	char rerr[KOP_ERRLEN] = "";
	jv resp = jv_null(), spec;
	long code;
	int r;

	/* 1. Fast path: we lead and our view is still valid: renew with the cached resourceVersion. */
	if (l->leader && jv_get_kind(l->observed_spec) == JV_KIND_OBJECT && observed_valid(l, now_ms)) {
		spec = jv_copy(l->observed_spec);
		spec = jv_object_set(spec, jv_string("holderIdentity"), jv_string(l->identity));
		spec = jv_object_set(spec, jv_string("leaseDurationSeconds"), jv_number((double)l->duration_s));
		spec = jv_object_set(spec, jv_string("renewTime"), micro(now_us));
		if (put_spec(l, io, spec, now_ms, "renew", rerr) == 1)
			return 1;
	}

	/* 2. Read it; create it when there is none. */
	code = io->request(io->ctx, "GET", l->path, jv_invalid(), &resp, rerr);
	if (code == 404) {
		jv_free(resp);
		resp = jv_null();
		spec = JV_OBJECT(jv_string("holderIdentity"), jv_string(l->identity),
				 jv_string("leaseDurationSeconds"), jv_number((double)l->duration_s),
				 jv_string("acquireTime"), micro(now_us), jv_string("renewTime"), micro(now_us),
				 jv_string("leaseTransitions"), jv_number(0));
		jv_free(l->observed);
		l->observed = jv_null();
		code = io->request(io->ctx, "POST", l->collection, lease_object(l, spec), &resp, rerr);
		if (code >= 200 && code < 300) {
			observe(l, resp, answered(io, now_ms));
			l->leader = 1;
			return 1;
		}
		l->leader = 0;
		if (code == 409) {	/* another candidate created it first */
			jv_free(resp);
			return 0;
		}
		return request_error(code, resp, "create", l, err, rerr);
	}
	if (code < 200 || code >= 300)
		return request_error(code, resp, "get", l, err, rerr);

	/* 3. Note when the record changed; a valid lease held by someone else is theirs. */
	observe(l, resp, answered(io, now_ms));
	if (!spec_holder_empty(l->observed_spec) && !spec_holder_is(l->observed_spec, l->identity) &&
	    observed_valid(l, now_ms)) {
		l->leader = 0;
		return 0;
	}

	/* 4. Take it (or keep it): transitions count changes of holder. */
	spec = jv_get_kind(l->observed_spec) == JV_KIND_OBJECT ? jv_copy(l->observed_spec) : jv_object();
	if (!spec_holder_is(l->observed_spec, l->identity)) {
		spec = jv_object_set(spec, jv_string("acquireTime"), micro(now_us));
		spec = jv_object_set(spec, jv_string("leaseTransitions"),
				     jv_number(spec_number(l->observed_spec, "leaseTransitions") + 1));
	}
	spec = jv_object_set(spec, jv_string("holderIdentity"), jv_string(l->identity));
	spec = jv_object_set(spec, jv_string("leaseDurationSeconds"), jv_number((double)l->duration_s));
	spec = jv_object_set(spec, jv_string("renewTime"), micro(now_us));
	r = put_spec(l, io, spec, now_ms, "update", err);
	l->leader = r == 1;
	return r;
}

int lease_release(struct lease *l, const struct lease_io *io, int64_t now_us, char *err)
{
	char rerr[KOP_ERRLEN] = "";
	int attempt;

	for (attempt = 0; attempt < 3; attempt++) {
		jv spec, resp = jv_null();
		long code;
		int r;

		if (!spec_holder_is(l->observed_spec, l->identity)) {
			l->leader = 0;
			return 0;
		}
		spec = jv_copy(l->observed_spec);
		spec = jv_object_set(spec, jv_string("holderIdentity"), jv_string(""));
		spec = jv_object_set(spec, jv_string("leaseDurationSeconds"), jv_number(1));
		spec = jv_object_set(spec, jv_string("acquireTime"), micro(now_us));
		spec = jv_object_set(spec, jv_string("renewTime"), micro(now_us));
		r = put_spec(l, io, spec, l->observed_ms, "release", err);
		if (r == 1) {
			l->leader = 0;
			return 0;
		}
		if (r < 0)
			return -1;
		/* 409: someone wrote meanwhile; read again and release only if still ours. */
		code = io->request(io->ctx, "GET", l->path, jv_invalid(), &resp, rerr);
		if (code < 200 || code >= 300)
			return request_error(code, resp, "get", l, err, rerr);
		observe(l, resp, answered(io, l->observed_ms));
	}
	return kop_error(err, "unable to release lease '%s/%s': conflicting updates", l->ns, l->name);
}

const char *lease_holder(const struct lease *l)
{
	jv h;
	const char *s;

	if (jv_get_kind(l->observed_spec) != JV_KIND_OBJECT)
		return "";
	h = jv_object_get(jv_copy(l->observed_spec), jv_string("holderIdentity"));
	if (jv_get_kind(h) != JV_KIND_STRING) {
		jv_free(h);
		return "";
	}
	/* The string lives in observed_spec, which still holds a reference. */
	s = jv_string_value(h);
	jv_free(h);
	return s;
}
