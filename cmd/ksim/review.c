/*
 * The reviews: POST of a SelfSubjectReview (authentication.k8s.io: who am
 * I, `kubectl auth whoami`), a SelfSubjectAccessReview (authorization.k8s.io:
 * may I, `kubectl auth can-i`) or a SelfSubjectRulesReview (what may I,
 * `kubectl auth can-i --list`), answered at once from the requester's
 * identity and ksim_authorize(), as kube-apiserver's registry does; nothing
 * is stored (KT_REVIEW types).
 *
 * kubectl 1.32 and later send these bodies as protobuf (the
 * application/vnd.kubernetes.protobuf envelope): the few fields a review
 * reads are decoded here; the answer is JSON, which they accept too.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "sim.h"
#include "banned.h"

/* ---- protobuf, as far as the reviews need it -------------------------------- */

struct pb {
	const unsigned char *p, *end;
};

static int pb_varint(struct pb *b, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (b->p >= b->end)
			return -1;
		*v |= (uint64_t)(*b->p & 0x7f) << shift;
		if (!(*b->p++ & 0x80))
			return 0;
	}
	return -1;
}

/*
 * The next field of a message: 1 and its number, with *sub the bytes of a
 * length-delimited one (else empty); 0 at the end; -1 when malformed.
 */
static int pb_next(struct pb *b, unsigned *num, struct pb *sub)
{
	uint64_t key, v;

	sub->p = sub->end = b->p;
	if (b->p >= b->end)
		return 0;
	if (pb_varint(b, &key) < 0 || key >> 3 == 0 || key >> 3 > 0x1fffffff)
		return -1;
	*num = (unsigned)(key >> 3);
	switch (key & 7) {
	case 0:
		return pb_varint(b, &v) < 0 ? -1 : 1;
	case 1:
		if (b->end - b->p < 8)
			return -1;
		b->p += 8;
		return 1;
	case 2:
		if (pb_varint(b, &v) < 0 || v > (uint64_t)(b->end - b->p))
			return -1;
		sub->p = b->p;
		sub->end = b->p + v;
		b->p += v;
		return 1;
	case 5:
		if (b->end - b->p < 4)
			return -1;
		b->p += 4;
		return 1;
	}
	return -1;
}

/* The fields of a message that become JSON: a string (msg NULL) or a message. */
struct pb_field {
	unsigned num;
	const char *name;
	const struct pb_field *msg;
};

static const struct pb_field pb_resource_attributes[] = {
	{ 1, "namespace", NULL }, { 2, "verb", NULL }, { 3, "group", NULL }, { 4, "version", NULL },
	{ 5, "resource", NULL }, { 6, "subresource", NULL }, { 7, "name", NULL }, { 0, NULL, NULL }
};
static const struct pb_field pb_non_resource_attributes[] = {
	{ 1, "path", NULL }, { 2, "verb", NULL }, { 0, NULL, NULL }
};
static const struct pb_field pb_access_spec[] = {
	{ 1, "resourceAttributes", pb_resource_attributes },
	{ 2, "nonResourceAttributes", pb_non_resource_attributes }, { 0, NULL, NULL }
};
static const struct pb_field pb_rules_spec[] = { { 1, "namespace", NULL }, { 0, NULL, NULL } };
static const struct pb_field pb_access_review[] = { { 2, "spec", pb_access_spec }, { 0, NULL, NULL } };
static const struct pb_field pb_rules_review[] = { { 2, "spec", pb_rules_spec }, { 0, NULL, NULL } };
static const struct pb_field pb_type_meta[] = { { 1, "apiVersion", NULL }, { 2, "kind", NULL }, { 0, NULL, NULL } };

/* A message as JSON: the listed fields (empty strings left out, as omitempty does), the rest skipped. */
static int pb_decode(struct pb b, const struct pb_field *fields, jv *out)
{
	struct pb sub;
	unsigned num;
	int r;

	*out = jv_object();
	while ((r = pb_next(&b, &num, &sub)) > 0) {
		for (const struct pb_field *f = fields; f->name; f++) {
			jv v;

			if (f->num != num)
				continue;
			if (f->msg) {
				if (pb_decode(sub, f->msg, &v) < 0) {
					jv_free(*out);
					return -1;
				}
			} else if (sub.end > sub.p) {
				v = jv_string_sized((const char *)sub.p, (int)(sub.end - sub.p));
			} else {
				break;
			}
			*out = jv_object_set(*out, jv_string(f->name), v);
			break;
		}
	}
	if (r < 0) {
		jv_free(*out);
		return -1;
	}
	return 0;
}

/*
 * A k8s.io protobuf body ("k8s\0", then runtime.Unknown: typeMeta 1, raw 2)
 * as the JSON object of the fields the review of type t reads (its
 * apiVersion, kind and spec); -1 when it is not one.
 */
int ksim_review_protobuf(const struct ksim_type *t, const char *body, size_t len, jv *out)
{
	struct pb b = { (const unsigned char *)body, (const unsigned char *)body + len }, sub, raw = { NULL, NULL };
	const struct pb_field *fields = !strcmp(t->resource, "selfsubjectaccessreviews") ? pb_access_review :
					!strcmp(t->resource, "selfsubjectrulesreviews") ? pb_rules_review : NULL;
	jv tm = jv_object(), obj;
	unsigned num;
	int r;

	if (len < 4 || memcmp(body, "k8s\0", 4)) {
		jv_free(tm);
		return -1;
	}
	b.p += 4;
	while ((r = pb_next(&b, &num, &sub)) > 0) {
		if (num == 1) {
			jv_free(tm);
			if (pb_decode(sub, pb_type_meta, &tm) < 0)
				return -1;
		} else if (num == 2) {
			raw = sub;
		}
	}
	if (r < 0 || !raw.p) {
		jv_free(tm);
		return -1;
	}
	if (!fields) {
		obj = jv_object();	/* a SelfSubjectReview's body says nothing */
	} else if (pb_decode(raw, fields, &obj) < 0) {
		jv_free(tm);
		return -1;
	}
	*out = jv_object_merge(tm, obj);
	return 0;
}

/* ---- the reviews --------------------------------------------------------------- */

/*
 * The 422 of a review's spec, worded as field.Invalid: the value is the
 * spec's nonResourceAttributes, as Go's %#v prints the internal struct
 * (null when there is none).
 */
static jv invalid(const struct ksim_type *t, const char *field, jv na, const char *message)
{
	struct kop_buf m = KOP_BUF_INIT, c = KOP_BUF_INIT;
	jv s;

	if (jv_get_kind(na) == JV_KIND_OBJECT) {
		size_t plen = 0, vlen = 0;
		const char *path = ksim_strl(na, "path", &plen), *verb = ksim_strl(na, "verb", &vlen);

		kop_buf_addf(&c, "Invalid value: authorization.NonResourceAttributes{Path:");
		kop_buf_add_quoted(&c, path ? path : "", path ? plen : 0);
		kop_buf_addf(&c, ", Verb:");
		kop_buf_add_quoted(&c, verb ? verb : "", verb ? vlen : 0);
		kop_buf_addf(&c, "}: %s", message);
	} else {
		kop_buf_addf(&c, "Invalid value: \"null\": %s", message);
	}
	kop_buf_addf(&m, "%s.%s \"\" is invalid: %s: %s", t->kind, t->group, field, c.buf);
	s = ksim_status(422, "Invalid", m.buf,
			JV_OBJECT(jv_string("group"), jv_string(t->group), jv_string("kind"), jv_string(t->kind),
				  jv_string("causes"),
				  JV_ARRAY(JV_OBJECT(jv_string("reason"), jv_string("FieldValueInvalid"),
						     jv_string("message"), jv_string(c.buf), jv_string("field"),
						     jv_string(field)))));
	kop_buf_release(&m);
	kop_buf_release(&c);
	return s;
}

/*
 * The strings of one review: borrowed from the body, or, when one holds a
 * NUL byte, a copy with each NUL written "%00" as ksim keeps a %00 in a URL
 * (cut at the NUL, "team\u0000zz" would be asked as "team").
 */
struct members {
	char *own[8];
	int n;
};

/* A string member of o, or "" (borrowed from o or kept in m). */
static const char *member(struct members *m, jv o, const char *key)
{
	size_t len;
	const char *s = ksim_strl(o, key, &len);
	struct kop_buf b = KOP_BUF_INIT;

	if (!s)
		return "";
	if (strlen(s) == len || m->n == (int)(sizeof(m->own) / sizeof(*m->own)))
		return s;
	for (size_t i = 0; i < len; i++)
		if (s[i])
			kop_buf_add(&b, s + i, 1);
		else
			kop_buf_add(&b, "%00", 3);
	return m->own[m->n++] = kop_buf_detach(&b, NULL);
}

/* SelfSubjectAccessReview: the decision of ksim_authorize() for the requester. */
static int access_review(const struct ksim_type *t, const struct ksim_request *rq, jv spec, jv *status)
{
	jv ra = jv_object_get(jv_copy(spec), jv_string("resourceAttributes"));
	jv na = jv_object_get(jv_copy(spec), jv_string("nonResourceAttributes"));
	int has_ra = jv_get_kind(ra) == JV_KIND_OBJECT, has_na = jv_get_kind(na) == JV_KIND_OBJECT;
	struct ksim_attrs a = { 0 };
	struct members m = { { NULL }, 0 };
	struct kop_buf reason = KOP_BUF_INIT;
	jv st;

	if (has_ra == has_na) {
		*status = has_ra ? invalid(t, "spec.nonResourceAttributes", na,
					   "cannot be specified in combination with resourceAttributes") :
				   invalid(t, "spec.resourceAttributes", na,
					   "exactly one of nonResourceAttributes or resourceAttributes must be specified");
		jv_free(ra);
		jv_free(na);
		return 422;
	}
	a.user = rq->user;
	a.groups = rq->groups;
	if (has_ra) {
		const char *ns = member(&m, ra, "namespace"), *name = member(&m, ra, "name");
		const char *sub = member(&m, ra, "subresource");

		a.verb = member(&m, ra, "verb");
		a.group = member(&m, ra, "group");
		a.resource = member(&m, ra, "resource");
		a.subresource = *sub ? sub : NULL;
		a.namespace = *ns ? ns : NULL;
		a.name = *name ? name : NULL;
	} else {
		a.verb = member(&m, na, "verb");
		a.group = a.resource = "";
		a.path = member(&m, na, "path");
	}
	if (ksim_authorize_why(&a, &st, &reason) == 0) {
		*status = JV_OBJECT(jv_string("allowed"), jv_true());
		if (reason.len)
			*status = jv_object_set(*status, jv_string("reason"), jv_string(reason.buf));
	} else {
		jv_free(st);
		*status = JV_OBJECT(jv_string("allowed"), jv_false());
	}
	kop_buf_release(&reason);
	while (m.n)
		free(m.own[--m.n]);
	jv_free(ra);
	jv_free(na);
	return 201;
}

/* The userInfo of a SelfSubjectReview: username, uid, groups, extra (KEY: [VALUE...]) as authentication/v1 has them. */
static jv user_info(const struct ksim_request *rq)
{
	jv u = JV_OBJECT(jv_string("username"), jv_string(rq->user));

	if (rq->uid)
		u = jv_object_set(u, jv_string("uid"), jv_string(rq->uid));
	u = jv_object_set(u, jv_string("groups"), ksim_rbac_groups(rq->user, rq->groups));
	if (rq->extra && rq->extra[0]) {
		jv x = jv_object();

		for (const char *const *e = rq->extra; e[0] && e[1]; e += 2) {
			jv v = jv_object_get(jv_copy(x), jv_string(e[0]));

			if (jv_get_kind(v) != JV_KIND_ARRAY) {
				jv_free(v);
				v = jv_array();
			}
			x = jv_object_set(x, jv_string(e[0]), jv_array_append(v, jv_string(e[1])));
		}
		u = jv_object_set(u, jv_string("extra"), x);
	}
	return u;
}

int ksim_review(const struct ksim_type *t, const struct ksim_request *rq, jv obj, jv *out)
{
	jv spec, res, md;
	int code = 201;

	if (jv_get_kind(obj) != JV_KIND_OBJECT) {
		jv_free(obj);
		*out = ksim_status(400, "BadRequest", "the body of the request is not a JSON object", jv_null());
		return 400;
	}
	spec = jv_object_get(jv_copy(obj), jv_string("spec"));
	if (jv_get_kind(spec) != JV_KIND_OBJECT) {
		jv_free(spec);
		spec = jv_object();
	}
	md = jv_object_get(jv_copy(obj), jv_string("metadata"));
	if (jv_get_kind(md) != JV_KIND_OBJECT) {
		jv_free(md);
		md = jv_object();
	}
	res = JV_OBJECT(jv_string("kind"), jv_string(t->kind), jv_string("apiVersion"), jv_string(t->api_version));
	if (!strcmp(t->resource, "selfsubjectreviews")) {
		char now[32];

		/* the registry makes a new object: only creationTimestamp, and who asks */
		jv_free(md);
		ksim_now(now);
		res = jv_object_set(res, jv_string("metadata"),
				    JV_OBJECT(jv_string("creationTimestamp"), jv_string(now)));
		res = jv_object_set(res, jv_string("status"), JV_OBJECT(jv_string("userInfo"), user_info(rq)));
	} else if (!strcmp(t->resource, "selfsubjectaccessreviews")) {
		jv status;

		code = access_review(t, rq, spec, &status);
		if (code != 201) {
			jv_free(res);
			jv_free(md);
			jv_free(spec);
			jv_free(obj);
			*out = status;
			return code;
		}
		/* the request comes back with its status */
		if (!jv_object_has(jv_copy(md), jv_string("creationTimestamp")))
			md = jv_object_set(md, jv_string("creationTimestamp"), jv_null());
		res = jv_object_set(res, jv_string("metadata"), md);
		res = jv_object_set(res, jv_string("spec"), jv_copy(spec));
		res = jv_object_set(res, jv_string("status"), status);
	} else {
		struct members m = { { NULL }, 0 };
		const char *ns = member(&m, spec, "namespace");
		jv rules, nonres;

		ksim_rbac_rules(rq->user, rq->groups, ns, &rules, &nonres);
		while (m.n)
			free(m.own[--m.n]);
		if (!jv_object_has(jv_copy(md), jv_string("creationTimestamp")))
			md = jv_object_set(md, jv_string("creationTimestamp"), jv_null());
		res = jv_object_set(res, jv_string("metadata"), md);
		res = jv_object_set(res, jv_string("spec"), jv_copy(spec));
		res = jv_object_set(res, jv_string("status"),
				    JV_OBJECT(jv_string("resourceRules"), rules, jv_string("nonResourceRules"), nonres,
					      jv_string("incomplete"), jv_false()));
	}
	jv_free(spec);
	jv_free(obj);
	*out = res;
	return code;
}
