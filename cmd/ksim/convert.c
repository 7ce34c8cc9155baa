/*
 * Conversion between the versions of a built-in kind that share storage:
 * an object is stored as it was written and shown in the version it is
 * read through. HorizontalPodAutoscaler autoscaling/v1 and v2: v1's
 * spec.targetCPUUtilizationPercentage is v2's Resource metric of cpu with
 * a Utilization target, and back (v2's other metrics are not shown in v1;
 * kube-apiserver keeps them in an annotation, ksim leaves them out).
 */
#include <stdlib.h>
#include <string.h>
#include "ksim.h"
#include "banned.h"

static jv cpu_metric(jv pct)
{
	return JV_ARRAY(JV_OBJECT(jv_string("type"), jv_string("Resource"), jv_string("resource"),
				  JV_OBJECT(jv_string("name"), jv_string("cpu"), jv_string("target"),
					    JV_OBJECT(jv_string("type"), jv_string("Utilization"),
						      jv_string("averageUtilization"), pct))));
}

/* The averageUtilization of the cpu Utilization metric of metrics (consumed), or invalid. */
static jv cpu_target(jv metrics)
{
	jv out = jv_invalid();

	if (jv_get_kind(metrics) != JV_KIND_ARRAY) {
		jv_free(metrics);
		return out;
	}
	jv_array_foreach(metrics, i, m) {
		const char *type = ksim_str(m, "type"), *name = ksim_str(m, "resource.name");
		const char *tt = ksim_str(m, "resource.target.type");

		if (!jv_is_valid(out) && type && !strcmp(type, "Resource") && name && !strcmp(name, "cpu") && tt &&
		    !strcmp(tt, "Utilization")) {
			jv_free(out);
			out = jv_getpath(jv_copy(m), JV_ARRAY(jv_string("resource"), jv_string("target"),
							       jv_string("averageUtilization")));
		}
		jv_free(m);
	}
	jv_free(metrics);
	return out;
}

static jv hpa(const struct ksim_type *t, jv obj)
{
	jv spec = jv_object_get(jv_copy(obj), jv_string("spec"));

	if (jv_get_kind(spec) != JV_KIND_OBJECT) {
		jv_free(spec);
		return obj;
	}
	if (!strcmp(t->version, "v2")) {
		jv pct = jv_object_get(jv_copy(spec), jv_string("targetCPUUtilizationPercentage"));

		if (jv_get_kind(pct) == JV_KIND_NUMBER) {
			spec = jv_object_delete(spec, jv_string("targetCPUUtilizationPercentage"));
			spec = jv_object_set(spec, jv_string("metrics"), cpu_metric(pct));
		} else {
			jv_free(pct);
		}
	} else if (jv_object_has(jv_copy(spec), jv_string("metrics"))) {
		jv pct = cpu_target(jv_object_get(jv_copy(spec), jv_string("metrics")));

		spec = jv_object_delete(spec, jv_string("metrics"));
		spec = jv_object_delete(spec, jv_string("behavior"));
		if (jv_get_kind(pct) == JV_KIND_NUMBER)
			spec = jv_object_set(spec, jv_string("targetCPUUtilizationPercentage"), pct);
		else
			jv_free(pct);
	}
	return jv_object_set(obj, jv_string("spec"), spec);
}

jv ksim_convert(const struct ksim_type *t, jv obj)
{
	if (jv_get_kind(obj) != JV_KIND_OBJECT || t->crd)
		return obj;
	if (!strcmp(t->gr, "horizontalpodautoscalers.autoscaling"))
		return hpa(t, obj);
	return obj;
}
