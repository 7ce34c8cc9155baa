/*
 * What kube-apiserver's validation refuses in the built-in kinds ksim
 * simulates, where a simulated controller would otherwise meet it later: a
 * CronJob's schedule (cron.c) and time zone, and the restartPolicy of a
 * Job's pod template. The causes are worded as the real validation words
 * them; create.c makes the 422 of them.
 */
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
