/*
 * The request path's entry: ksim_handle() and ksim_call() route a request
 * (route.c), authorize it (authz.c) and hand it to its verb (read.c,
 * create.c, update.c, patch.c, delete.c, scale.c, the reviews in review.c,
 * serviceaccounts/token in token.c),
 * with kube-apiserver's semantics and wording. Every write ends in
 * ksim_store_commit().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "api.h"
#include "jsonl.h"
#include "banned.h"

/* POST of a review (KT_REVIEW): nothing stored, the answer made from the requester (review.c). */
static int do_review(const struct ksim_request *rq, const struct route *r, jv *out)
{
	const char *ct = rq->content_type ? rq->content_type : "";
	jv obj;

	if (strcmp(rq->method, "POST") || r->name) {
		*out = ksim_status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource",
				   jv_object());
		return 405;
	}
	if (!strncmp(ct, "application/vnd.kubernetes.protobuf", 35) && !jv_is_valid(rq->body_jv)) {
		/* kubectl 1.32 and later */
		if (ksim_review_protobuf(r->t, rq->body, rq->body_len, &obj) < 0) {
			*out = bad_request("the body of the request is not a valid protobuf object");
			return 400;
		}
	} else if (!strcmp(r->t->resource, "selfsubjectreviews") && !rq->body_len && !jv_is_valid(rq->body_jv)) {
		obj = jv_object();	/* nothing in it is read */
	} else if (parse_body(rq, &obj, out) < 0) {
		return status_code(*out);
	}
	if (check_kind(r->t, &obj, out) < 0)	/* (the protobuf envelope's typeMeta too) */
		return status_code(*out);
	return ksim_review(r->t, rq, obj, out);
}

/* A watch's set-up (the stream itself is watch.c's). */
struct ksim_watch *ksim_watch_new(const struct ksim_request *rq, const struct ksim_type *t, const char *ns,
				  struct ksim_selector *ls, struct ksim_selector *fs, jv *err, int *code);

static void answer(struct ksim_response *rs, int code, jv body)
{
	rs->code = code;
	if (rs->discard) {
		/* ksim_call_locked() without *out: nobody reads it */
		jv_free(body);
		rs->body = jv_invalid();
		return;
	}
	if (jv_get_kind(body) == JV_KIND_OBJECT)
		body = ksim_canonical(body);
	rs->body = body;
}

/* ksim_handle() with the lock held by the caller. */
static void handle_locked(const struct ksim_request *rq, struct ksim_response *rs)
{
	struct route r;
	struct ksim_attrs a;
	jv out = jv_null(), st;
	int code, dry;
	char mbuf[129];
	struct wopts o = { 0 };
	const char *m = rq->method;

	memset(rs, 0, sizeof(*rs));
	rs->body = jv_invalid();
	rs->warnings = jv_array();
	rs->discard = rq->internal && !rq->want_jv;
	if (!strcmp(m, "GET")) {
		jv d = ksim_discovery(rq->path);

		if (!jv_is_valid(d))
			d = ksim_openapi(rq->path);
		if (jv_is_valid(d)) {
			struct ksim_attrs na = { rq->user, "get", "", "", NULL, NULL, NULL, rq->path, rq->groups };

			if (ksim_authorize(&na, &st) < 0) {
				jv_free(d);
				answer(rs, 403, st);
			} else if (!strcmp(rq->path, "/version") && !rq->internal) {
				/* kube-apiserver writes it with responsewriters.WriteRawJSON:
				 * json.MarshalIndent, two spaces, no newline at the end */
				jv s = jv_dump_string(d, JV_PRINT_INDENT_FLAGS(2));

				rs->code = 200;
				rs->json = kop_strdup(jv_string_value(s));
				rs->json_len = strlen(rs->json);
				rs->json_verbatim = 1;
				jv_free(s);
			} else {
				answer(rs, 200, d);
			}
			goto done;
		}
		jv_free(d);
	}
	if (!strcmp(m, "GET") && !strcmp(rq->path, "/openapi/v2")) {
		/*
		 * kubectl 1.27 loads OpenAPI v2 (protobuf only) before it applies
		 * anything. An empty document (no definitions) makes it skip
		 * client-side validation and compute patches from its compiled-in
		 * types; the fieldValidation check reads /openapi/v3.
		 */
		static const char doc[] = "\x0a\x03" "2.0" "\x12\x15\x0a\x0a" "Kubernetes" "\x12\x07" "v1.30.0"
					  "\x42\x00";
		struct ksim_attrs na = { rq->user, "get", "", "", NULL, NULL, NULL, rq->path, rq->groups };

		if (ksim_authorize(&na, &st) < 0) {	/* (as every other document: not for anonymous) */
			answer(rs, 403, st);
			goto done;
		}
		rs->code = 200;
		rs->text_len = sizeof(doc) - 1;
		rs->text = kop_malloc(rs->text_len + 1);
		memcpy(rs->text, doc, rs->text_len + 1);
		rs->content_type = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
		goto done;
	}
	if (route(rq->path, &r) < 0) {
		/* kube-apiserver authorizes a request, resource or not, before it finds nothing there */
		char verb[16], *copy = kop_strdup(rq->path);
		struct ksim_attrs na = { rq->user, ksim_nonresource_verb(m, verb, sizeof(verb)), "", "", NULL,
					 NULL, NULL, rq->path, rq->groups };

		if (resource_path(rq->path)) {
			na.path = NULL;
			unrouted_attrs(rq, copy, &na);
		}
		if (ksim_authorize(&na, &st) < 0) {
			free(copy);
			answer(rs, 403, st);
			goto done;
		}
		free(copy);
		rs->code = 404;
		rs->text = kop_strdup("404 page not found\n");
		rs->content_type = "text/plain; charset=utf-8";
		goto done;
	}
	if (*r.t->group)	/* (formatted under the lock: a CRD's change frees the type's strings) */
		snprintf(rs->resource, sizeof(rs->resource), "%s.%s", r.t->resource, r.t->group);
	else
		snprintf(rs->resource, sizeof(rs->resource), "%s", r.t->resource);
	a.user = rq->user;
	a.verb = verb_of(rq, &r);
	a.group = r.t->group;
	a.resource = r.t->resource;
	a.subresource = r.sub;
	a.namespace = r.ns;
	a.name = r.name;
	a.path = NULL;
	a.groups = rq->groups;
	{
		/*
		 * A list or watch of one name (fieldSelector metadata.name=NAME,
		 * its only requirement) is authorized for that name, so that
		 * resourceNames can grant it, as kube-apiserver's RequestInfo does.
		 */
		const char *fs = query(rq, "fieldSelector");

		if (!a.name && fs && (!strcmp(a.verb, "list") || !strcmp(a.verb, "watch"))) {
			if (!strncmp(fs, "metadata.name==", 15))
				fs += 15;
			else if (!strncmp(fs, "metadata.name=", 14))
				fs += 14;
			else
				fs = NULL;
			if (fs && *fs && !strchr(fs, ','))
				a.name = fs;
		}
	}
	if (ksim_authorize(&a, &st) < 0) {
		answer(rs, 403, st);
		route_release(&r);
		goto done;
	}
	if (r.name && !r.ns && (r.t->flags & KT_NAMESPACED)) {
		/* /apis/G/V/RES/NAME on a namespaced resource: not a route */
		rs->code = 404;
		rs->text = kop_strdup("404 page not found\n");
		rs->content_type = "text/plain; charset=utf-8";
		route_release(&r);
		goto done;
	}
	dry = dry_run(rq, &out);
	if (dry < 0) {
		answer(rs, 422, out);
		route_release(&r);
		goto done;
	}
	o.dry_run = dry;
	o.manager = manager_of(rq, mbuf, sizeof(mbuf));
	o.user = rq->user;
	o.groups = rq->groups;
	o.force = query_bool(rq, "force");
	o.warnings = &rs->warnings;
	{
		const char *fv = query(rq, "fieldValidation");

		if (!fv || !*fv || !strcmp(fv, "Warn")) {
			o.validation = VALIDATE_WARN;
		} else if (!strcmp(fv, "Strict")) {
			o.validation = VALIDATE_STRICT;
		} else if (!strcmp(fv, "Ignore")) {
			o.validation = VALIDATE_IGNORE;
		} else {
			struct kop_buf b = KOP_BUF_INIT;

			kop_buf_addf(&b, "fieldValidation: Unsupported value: \"%s\": supported values: \"Ignore\", \"Strict\", \"Warn\"",
				     fv);
			answer(rs, 400, bad_request(b.buf));
			kop_buf_release(&b);
			route_release(&r);
			goto done;
		}
	}
	if (r.t->flags & KT_REVIEW) {
		code = do_review(rq, &r, &out);
		answer(rs, code, out);
	} else if (!strcmp(m, "GET") && !r.name && query_bool(rq, "watch")) {
		struct ksim_selector *ls, *fs;

		if (selectors(rq, r.t, &ls, &fs, &out) < 0) {
			answer(rs, 400, out);
		} else {
			rs->watch = ksim_watch_new(rq, r.t, r.t->flags & KT_NAMESPACED ? r.ns : NULL, ls, fs, &out, &code);
			if (!rs->watch)
				answer(rs, code, out);
			else
				rs->code = 200;
		}
	} else if (r.sub && ksim_pod_subresource_name(r.sub)) {
		char *text;

		code = ksim_pod_subresource(r.t, r.ns, r.name, r.sub, m, &out, &text);
		if (text) {
			jv_free(out);
			rs->code = code;
			rs->text = text;
			rs->content_type = code == 204 ? "" : NULL;
		} else {
			answer(rs, code, out);
		}
	} else if (r.sub && !strcmp(r.sub, "token")) {
		code = ksim_token_request(rq, &r, &out);	/* token.c */
		answer(rs, code, out);
	} else if (r.sub && !strcmp(r.sub, "scale")) {
		code = do_scale(rq, &r, &o, &out);
		answer(rs, code, out);
	} else if (!strcmp(m, "GET")) {
		if (r.name) {
			code = do_get(rq, &r, &out);
			answer(rs, code, out);
		} else {
			char *text = NULL;
			size_t text_len = 0;

			/* a list's items' JSON is kept with the stored objects (list_text) */
			code = do_list(rq, &r, &out, rq->internal || rq->want_jv ? NULL : &text, &text_len);
			if (text) {
				rs->code = code;
				rs->json = text;
				rs->json_len = text_len;
			} else {
				answer(rs, code, out);
			}
		}
	} else if (!strcmp(m, "POST") && !r.name) {
		jv obj;

		if (body_object(rq, r.t, &obj, &out) < 0)
			answer(rs, status_code(out), out);
		else if (!(r.t->flags & KT_NAMESPACED) || r.ns)
			answer(rs, (code = do_create(r.t, r.ns, obj, &o, 0, &out)), out);
		else {
			jv_free(obj);
			rs->code = 404;
			rs->text = kop_strdup("404 page not found\n");
			rs->content_type = "text/plain; charset=utf-8";
		}
	} else if (!strcmp(m, "PUT") && r.name) {
		o.put = 1;
		code = do_put(rq, &r, &o, &out);
		answer(rs, code, out);
	} else if (!strcmp(m, "PATCH") && r.name) {
		code = do_patch(rq, &r, &o, &out);
		answer(rs, code, out);
	} else if (!strcmp(m, "DELETE") && r.name && !r.sub) {
		code = do_delete(rq, &r, dry, &out);
		answer(rs, code, out);
	} else if (!strcmp(m, "DELETE") && !r.name) {
		code = do_deletecollection(rq, &r, dry, &out);
		answer(rs, code, out);
	} else {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "%s is not supported on resources of kind \"%s\"", m, r.t->resource);
		answer(rs, 405, ksim_status(405, "MethodNotAllowed", b.buf, jv_null()));
		kop_buf_release(&b);
	}
	route_release(&r);
done:
	if (rq->internal) {
		/* ksim_call_locked(): the caller holds the lock and reads rs->body, if anything */
		if (!rq->want_jv) {
			jv_free(rs->body);
			rs->body = jv_invalid();
		}
		return;
	}
	/* nothing that shares storage with the store leaves the lock */
	if (jv_is_valid(rs->body)) {
		rs->json = ksim_dump(jv_copy(rs->body), &rs->json_len);
		if (rq->want_jv) {
			rs->body = ksim_deep_copy(rs->body);
		} else {
			jv_free(rs->body);
			rs->body = jv_invalid();
		}
	}
}

void ksim_handle(const struct ksim_request *rq, struct ksim_response *rs)
{
	ksim_lock();
	handle_locked(rq, rs);
	ksim_unlock();
}

void ksim_response_release(struct ksim_response *rs)
{
	jv_free(rs->body);
	jv_free(rs->warnings);
	free(rs->text);
	free(rs->json);
	if (rs->watch)
		ksim_watch_free(rs->watch);
	memset(rs, 0, sizeof(*rs));
	rs->body = rs->warnings = jv_null();
}

/* The request of ksim_call() and ksim_call_locked(): returns the path to free, and rq->query to free. */
static char *call_request(struct ksim_request *rq, const char *user, const char *method, const char *path_and_query,
			  const char *content_type)
{
	char *path = kop_strdup(path_and_query), *q = strchr(path, '?');
	jv query = jv_object();

	if (q) {
		*q++ = 0;
		while (*q) {
			size_t n = strcspn(q, "&");
			char *kv = kop_strndup(q, n), *eq = strchr(kv, '=');

			if (eq) {
				*eq = 0;
				query = jv_object_set(query, jv_string(kv), jv_string(eq + 1));
			} else {
				query = jv_object_set(query, jv_string(kv), jv_string(""));
			}
			free(kv);
			q += n;
			if (*q)
				q++;
		}
	}
	memset(rq, 0, sizeof(*rq));
	rq->method = method;
	rq->path = path;
	rq->query = query;
	rq->content_type = content_type ? content_type : "application/json";
	rq->user = user;
	rq->user_agent = "ksim";
	rq->body_jv = jv_invalid();
	return path;
}

int ksim_call(const char *user, const char *method, const char *path_and_query, const char *content_type, jv body,
	      jv *out)
{
	struct ksim_request rq;
	struct ksim_response rs;
	char *path = call_request(&rq, user, method, path_and_query, content_type);
	char *dumped = NULL;
	int code;

	rq.want_jv = out != NULL;
	if (jv_get_kind(body) != JV_KIND_NULL && jv_is_valid(body)) {
		dumped = kop_json_dump_len(body, &rq.body_len);
		rq.body = dumped;
	} else {
		jv_free(body);
	}
	ksim_handle(&rq, &rs);
	code = rs.code;
	if (out)
		*out = jv_copy(rs.body);
	ksim_response_release(&rs);
	free(dumped);
	jv_free(rq.query);
	free(path);
	return code;
}

int ksim_call_locked(const char *user, const char *method, const char *path_and_query, jv body, jv *out)
{
	struct ksim_request rq;
	struct ksim_response rs;
	char *path = call_request(&rq, user, method, path_and_query, NULL);
	int code;

	rq.want_jv = out != NULL;
	rq.internal = 1;
	if (jv_get_kind(body) != JV_KIND_NULL && jv_is_valid(body))
		rq.body_jv = body;
	else
		jv_free(body);
	handle_locked(&rq, &rs);
	code = rs.code;
	if (out)
		*out = jv_copy(rs.body);
	ksim_response_release(&rs);
	jv_free(rq.body_jv);
	jv_free(rq.query);
	free(path);
	return code;
}
