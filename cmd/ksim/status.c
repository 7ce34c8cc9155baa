/*
 * Status answers: the Status object and the errors kube-apiserver words
 * (NotFound, Invalid with its causes, Conflict, BadRequest), with the
 * details that name the resource. Which verb answers which is theirs.
 */
#include <stdlib.h>
#include <string.h>
#include "api.h"
#include "schema.h"
#include "banned.h"

jv ksim_status(int code, const char *reason, const char *message, jv details)
{
	jv s = JV_OBJECT(jv_string("kind"), jv_string("Status"), jv_string("apiVersion"), jv_string("v1"),
			 jv_string("metadata"), jv_object(), jv_string("status"),
			 jv_string(code < 400 ? "Success" : "Failure"));

	if (message)
		s = jv_object_set(s, jv_string("message"), jv_string(message));
	if (reason)
		s = jv_object_set(s, jv_string("reason"), jv_string(reason));
	if (jv_get_kind(details) == JV_KIND_OBJECT)
		s = jv_object_set(s, jv_string("details"), details);
	else
		jv_free(details);
	return jv_object_set(s, jv_string("code"), jv_number(code));
}

/* "configmaps" or "deployments.apps": GroupResource.String(). */
char *gr_string(const struct ksim_type *t)
{
	struct kop_buf b = KOP_BUF_INIT;

	if (*t->group)
		kop_buf_addf(&b, "%s.%s", t->resource, t->group);
	else
		kop_buf_adds(&b, t->resource);
	return kop_buf_detach(&b, NULL);
}

jv details(const struct ksim_type *t, const char *name)
{
	jv d = jv_object();

	if (name)
		d = jv_object_set(d, jv_string("name"), jv_string(name));
	if (*t->group)
		d = jv_object_set(d, jv_string("group"), jv_string(t->group));
	return jv_object_set(d, jv_string("kind"), jv_string(t->resource));
}

jv err_status(const struct ksim_type *t, const char *name, int code, const char *reason, const char *fmt, ...)
{
	struct kop_buf b = KOP_BUF_INIT;
	va_list ap;
	jv s;

	va_start(ap, fmt);
	kop_buf_vaddf(&b, fmt, ap);
	va_end(ap);
	s = ksim_status(code, reason, b.buf, t ? details(t, name) : jv_null());
	kop_buf_release(&b);
	return s;
}

jv not_found(const struct ksim_type *t, const char *name)
{
	char *gr = gr_string(t);
	jv s = err_status(t, name, 404, "NotFound", "%s \"%s\" not found", gr, name);

	free(gr);
	return s;
}

/* The code of a Status object. */
int status_code(jv st)
{
	jv c = jv_get_kind(st) == JV_KIND_OBJECT ? jv_object_get(jv_copy(st), jv_string("code")) : jv_invalid();
	int code = jv_get_kind(c) == JV_KIND_NUMBER ? (int)jv_number_value(c) : 500;

	jv_free(c);
	return code;
}

jv bad_request(const char *msg)
{
	return ksim_status(400, "BadRequest", msg, jv_null());
}

int ns_mismatch(jv obj, const char *ns, jv *out)
{
	if (!str_set_and_differs(obj, "metadata.namespace", ns))
		return 0;
	*out = bad_request("the namespace of the provided object does not match the namespace sent on the request");
	return 1;
}

/*
 * The 400 of a body whose metadata.name (n bytes at s: it may hold a NUL)
 * is not the one on the URL; printed as it is, as kube-apiserver's %s does.
 */
jv name_mismatch(const char *s, size_t n, const char *url_name)
{
	struct kop_buf b = KOP_BUF_INIT;
	jv st;

	kop_buf_adds(&b, "the name of the object (");
	kop_buf_add(&b, s, n);
	kop_buf_addf(&b, ") does not match the name on the URL (%s)", url_name);
	st = jv_object_set(bad_request(""), jv_string("message"), jv_string_sized(b.buf, (int)b.len));
	kop_buf_release(&b);
	return st;
}

/* Whether the n bytes at s (a NUL byte among them counts) are not the string want. */
int bytes_differ(const char *s, size_t n, const char *want)
{
	return n != strlen(want) || memcmp(s, want, n);
}

/* Whether the string at path in obj is there, not empty, and not want. */
int str_set_and_differs(jv obj, const char *path, const char *want)
{
	size_t n;
	const char *s = ksim_strl(obj, path, &n);

	return s && n && bytes_differ(s, n, want);
}

/* 422 Invalid: name a string (consumed; any byte); causes an array of {reason, message, field}. */
jv invalid_jv(const struct ksim_type *t, jv name, jv causes)
{
	struct kop_buf kg = KOP_BUF_INIT;
	char *msg;
	jv d, s;

	if (jv_get_kind(name) != JV_KIND_STRING) {
		jv_free(name);
		name = jv_string("");
	}
	if (*t->group)
		kop_buf_addf(&kg, "%s.%s", t->kind, t->group);
	else
		kop_buf_adds(&kg, t->kind);
	msg = kop_schema_invalid_message(kg.buf, jv_copy(name), causes);
	d = JV_OBJECT(jv_string("name"), name);
	if (*t->group)
		d = jv_object_set(d, jv_string("group"), jv_string(t->group));
	d = jv_object_set(d, jv_string("kind"), jv_string(t->kind));
	d = jv_object_set(d, jv_string("causes"), causes);
	s = ksim_status(422, "Invalid", msg, d);
	free(msg);
	kop_buf_release(&kg);
	return s;
}

jv invalid(const struct ksim_type *t, const char *name, jv causes)
{
	return invalid_jv(t, jv_string(name ? name : ""), causes);
}

jv cause(const char *reason, const char *message, const char *field)
{
	return JV_OBJECT(jv_string("reason"), jv_string(reason), jv_string("message"), jv_string(message),
			 jv_string("field"), jv_string(field));
}

jv conflict(const struct ksim_type *t, const char *name)
{
	char *gr = gr_string(t);
	jv s = err_status(t, name, 409, "Conflict",
			  "Operation cannot be fulfilled on %s \"%s\": the object has been modified; please apply your changes to the latest version and try again",
			  gr, name);

	free(gr);
	return s;
}
