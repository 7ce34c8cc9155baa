/*
 * What kube-apiserver's validation refuses: in every kind, a name that is
 * not an RFC 1123 subdomain (a label for a namespace) and annotations over
 * 256 KiB; in the built-in kinds ksim simulates, a Secret's or ConfigMap's
 * data over 1 MiB, a CronJob's schedule (cron.c) and time zone, and the
 * restartPolicy of a Job's pod template. The causes are worded as the
 * validation of kube-apiserver 1.30 (ksim's /version) words them; create.c
 * and update.c make the 422 of them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ksim.h"
#include "banned.h"

static jv cause(const char *type, const char *message, const char *field)
{
	return JV_OBJECT(jv_string("reason"), jv_string(type), jv_string("message"), jv_string(message),
			 jv_string("field"), jv_string(field));
}

static jv restart_policy(jv causes, jv obj, const char *prefix)
{
	struct kop_buf path = KOP_BUF_INIT, m = KOP_BUF_INIT;
	const char *rp;

	kop_buf_addf(&path, "%s.template.spec.restartPolicy", prefix);
	rp = ksim_str(obj, path.buf);
	if (!rp || !*rp) {
		causes = jv_array_append(causes, cause("FieldValueRequired",
						       "Required value: valid values: \"OnFailure\", \"Never\"", path.buf));
	} else if (strcmp(rp, "OnFailure") && strcmp(rp, "Never")) {
		kop_buf_addf(&m, "Unsupported value: \"%s\": supported values: \"OnFailure\", \"Never\"", rp);
		causes = jv_array_append(causes, cause("FieldValueNotSupported", m.buf, path.buf));
	}
	kop_buf_release(&path);
	kop_buf_release(&m);
	return causes;
}

/* apimachinery's IsDNS1123Label / IsDNS1123Subdomain: the regexes, and their RegexError wording */
#define DNS1123_LABEL_FMT "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
#define DNS1123_LABEL_MSG                                                                                  \
	"a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start " \
	"and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '" \
	DNS1123_LABEL_FMT "')"
#define DNS1123_SUBDOMAIN_MSG                                                                                 \
	"a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "    \
	"must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '" \
	DNS1123_LABEL_FMT "(\\." DNS1123_LABEL_FMT ")*')"

/*
 * Whether the n bytes at s match DNS1123_LABEL_FMT (label) or labels of
 * it joined by '.' (a subdomain). Any other byte, a NUL too, fails.
 */
static int dns1123_match(const char *s, size_t n, int label)
{
	size_t start = 0;

	for (size_t i = 0; i <= n; i++) {
		if (i == n || s[i] == '.') {
			if ((label && i < n) || i == start || s[start] == '-' || s[i - 1] == '-')
				return 0;
			start = i + 1;
		} else if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-')) {
			return 0;
		}
	}
	return 1;
}

/* A FieldValueInvalid cause on field: the value (n bytes at s) quoted as Go's %q does, then detail. */
static jv invalid_value(const char *s, size_t n, const char *detail, const char *field)
{
	struct kop_buf m = KOP_BUF_INIT;
	jv c;

	kop_buf_adds(&m, "Invalid value: ");
	kop_buf_add_quoted(&m, s, n);
	kop_buf_addf(&m, ": %s", detail);
	c = cause("FieldValueInvalid", m.buf, field);
	kop_buf_release(&m);
	return c;
}

jv ksim_name_causes(const struct ksim_type *t, jv causes, const char *s, size_t n, int prefix, const char *field)
{
	int label = !strcmp(t->gr, "namespaces");
	size_t max = label ? 63 : 253;
	struct kop_buf b = KOP_BUF_INIT;

	if (!strcmp(t->group, "rbac.authorization.k8s.io")) {	/* ValidatePathSegmentName: "system:basic-user" */
		if (!n || memchr(s, 0, n) || memchr(s, '/', n) || memchr(s, '%', n) || (n == 1 && *s == '.') ||
		    (n == 2 && !memcmp(s, "..", 2)))
			causes = jv_array_append(causes, invalid_value(s, n, DNS1123_SUBDOMAIN_MSG, field));
		return causes;
	}
	/* a generateName is checked as maskTrailingDash leaves it: a trailing '-' and the byte before become "a" */
	kop_buf_add(&b, s, n);
	if (prefix && n > 1 && s[n - 1] == '-') {
		b.len = n - 2;
		kop_buf_adds(&b, "a");
	}
	if (b.len > max) {
		char m[64];

		snprintf(m, sizeof(m), "must be no more than %zu characters", max);
		causes = jv_array_append(causes, invalid_value(s, n, m, field));
	}
	if (!dns1123_match(b.buf, b.len, label))
		causes = jv_array_append(causes,
					 invalid_value(s, n,
						       !label ? DNS1123_SUBDOMAIN_MSG :
						       dns1123_match(b.buf, b.len, 0) ? "must not contain dots" :
										 DNS1123_LABEL_MSG,
						       field));
	kop_buf_release(&b);
	return causes;
}

/* The bytes a base64 string decodes to (padding not counted). */
static size_t base64_decoded_len(jv v)
{
	size_t n = jv_get_kind(v) == JV_KIND_STRING ? (size_t)jv_string_length_bytes(jv_copy(v)) : 0;
	const char *s = n ? jv_string_value(v) : "";
	size_t pad = 0;

	while (pad < 2 && pad < n && s[n - 1 - pad] == '=')
		pad++;
	return (n - pad) * 3 / 4;
}

/* The bytes of the keys and (with values) the string values of obj's map at path. */
static size_t map_len(jv obj, jv path, int keys, int values, int b64)
{
	jv m = jv_getpath(jv_copy(obj), path);
	size_t total = 0;

	if (jv_get_kind(m) == JV_KIND_OBJECT) {
		jv_object_foreach(m, k, v) {
			if (keys)
				total += (size_t)jv_string_length_bytes(jv_copy(k));
			if (values && b64)
				total += base64_decoded_len(v);
			else if (values && jv_get_kind(v) == JV_KIND_STRING)
				total += (size_t)jv_string_length_bytes(jv_copy(v));
			jv_free(k);
			jv_free(v);
		}
	}
	jv_free(m);
	return total;
}

static jv too_long(jv causes, size_t max, const char *field)
{
	char m[64];

	snprintf(m, sizeof(m), "Too long: must have at most %zu bytes", max);
	return jv_array_append(causes, cause("FieldValueTooLong", m, field));
}

jv ksim_size_causes(const struct ksim_type *t, jv causes, jv obj)
{
	if (jv_get_kind(obj) != JV_KIND_OBJECT)
		return causes;
	/* ValidateAnnotationsSize: keys and values, on every kind */
	if (map_len(obj, JV_ARRAY(jv_string("metadata"), jv_string("annotations")), 1, 1, 0) >
	    KSIM_MAX_ANNOTATIONS_SIZE)
		causes = too_long(causes, KSIM_MAX_ANNOTATIONS_SIZE, "metadata.annotations");
	if (*t->group)
		return causes;
	/* ValidateSecret: the decoded bytes of data's values (stringData is merged into it by then), field "data" */
	if (!strcmp(t->gr, "secrets") && map_len(obj, JV_ARRAY(jv_string("data")), 0, 1, 1) > KSIM_MAX_SECRET_SIZE)
		causes = too_long(causes, KSIM_MAX_SECRET_SIZE, "data");
	/* ValidateConfigMap: data's and binaryData's values together, on the whole object (field.NewPath("") prints "[]") */
	if (!strcmp(t->gr, "configmaps") && map_len(obj, JV_ARRAY(jv_string("data")), 0, 1, 0) +
							    map_len(obj, JV_ARRAY(jv_string("binaryData")), 0, 1, 1) >
						    KSIM_MAX_SECRET_SIZE)
		causes = too_long(causes, KSIM_MAX_SECRET_SIZE, "[]");
	return causes;
}

jv ksim_builtin_causes(const struct ksim_type *t, jv obj)
{
	jv causes = jv_array();

	if (!strcmp(t->gr, "jobs.batch")) {
		causes = restart_policy(causes, obj, "spec");
	} else if (!strcmp(t->gr, "cronjobs.batch")) {
		const char *sched = ksim_str(obj, "spec.schedule");
		struct ksim_cron c;
		char err[256];

		if (!sched || !*sched) {
			causes = jv_array_append(causes, cause("FieldValueRequired", "Required value", "spec.schedule"));
		} else if (ksim_cron_parse(sched, &c, err, sizeof(err)) < 0) {
			struct kop_buf m = KOP_BUF_INIT;
			jv s = jv_dump_string(jv_string(sched), 0);

			kop_buf_addf(&m, "Invalid value: %s: %s", jv_string_value(s), err);
			causes = jv_array_append(causes, cause("FieldValueInvalid", m.buf, "spec.schedule"));
			jv_free(s);
			kop_buf_release(&m);
		}
		if (ksim_str(obj, "spec.timeZone") && strcmp(ksim_str(obj, "spec.timeZone"), "UTC") &&
		    strcmp(ksim_str(obj, "spec.timeZone"), "Etc/UTC")) {
			/* ksim's clock is UTC only: refused rather than run at the wrong time */
			causes = jv_array_append(causes, cause("FieldValueNotSupported",
							       "Unsupported value: ksim runs CronJobs in UTC only",
							       "spec.timeZone"));
		}
		causes = restart_policy(causes, obj, "spec.jobTemplate.spec");
	}
	return causes;
}
