/*
 * Small helpers the verbs share: an object's metadata and fields, a query
 * parameter, and the object as a client of a type sees it (present()).
 */
#include <stdlib.h>
#include <string.h>
#include "api.h"
#include "banned.h"

jv meta(jv obj)
{
	jv m = jv_get_kind(obj) == JV_KIND_OBJECT ? jv_object_get(jv_copy(obj), jv_string("metadata")) : jv_invalid();

	if (jv_get_kind(m) != JV_KIND_OBJECT) {
		jv_free(m);
		m = jv_object();
	}
	return m;
}

jv set_meta(jv obj, const char *key, jv val)
{
	jv m = meta(obj);

	/* (taken out of obj first: held once, it is changed in place, not copied) */
	obj = jv_object_set(obj, jv_string("metadata"), jv_null());
	if (jv_get_kind(val) == JV_KIND_INVALID || jv_get_kind(val) == JV_KIND_NULL) {
		jv_free(val);
		m = jv_object_delete(m, jv_string(key));
	} else {
		m = jv_object_set(m, jv_string(key), val);
	}
	return jv_object_set(obj, jv_string("metadata"), m);
}

jv get_meta(jv obj, const char *key)
{
	return jv_object_get(meta(obj), jv_string(key));
}

jv field(jv obj, const char *key)
{
	if (jv_get_kind(obj) != JV_KIND_OBJECT)
		return jv_null();
	return jv_object_get(jv_copy(obj), jv_string(key));
}

int has_items(jv v)
{
	int n = jv_get_kind(v) == JV_KIND_ARRAY ? jv_array_length(jv_copy(v)) : 0;

	jv_free(v);
	return n > 0;
}

const char *query(const struct ksim_request *rq, const char *name)
{
	jv v;

	if (jv_get_kind(rq->query) != JV_KIND_OBJECT)
		return NULL;
	v = jv_object_get(jv_copy(rq->query), jv_string(name));
	jv_free(v);	/* still held by rq->query */
	return jv_get_kind(v) == JV_KIND_STRING ? jv_string_value(v) : NULL;
}

int query_bool(const struct ksim_request *rq, const char *name)
{
	const char *v = query(rq, name);

	return v && *v && strcmp(v, "0") && strcasecmp(v, "false");
}

/* The object as a client of type t sees it: apiVersion/kind of t, converted, in canonical key order. */
jv present(const struct ksim_type *t, jv obj)
{
	if (!strcmp(t->gr, "events")) {
		/* one store, two APIs: core/v1 is stored; events.k8s.io/v1 renames fields */
		static const char *const ren[][2] = { { "message", "note" }, { "involvedObject", "regarding" },
						     { "reportingComponent", "reportingController" },
						     { "firstTimestamp", "deprecatedFirstTimestamp" },
						     { "lastTimestamp", "deprecatedLastTimestamp" },
						     { "count", "deprecatedCount" }, { "source", "deprecatedSource" } };
		int to_new = !strcmp(t->group, "events.k8s.io");
		int from_new = !to_new && jv_equal(field(obj, "apiVersion"), jv_string("events.k8s.io/v1"));

		if (to_new || from_new) {
			for (size_t i = 0; i < sizeof(ren) / sizeof(*ren); i++) {
				const char *from = ren[i][to_new ? 0 : 1], *to = ren[i][to_new ? 1 : 0];
				jv v = field(obj, from);

				if (jv_is_valid(v) && jv_get_kind(v) != JV_KIND_NULL) {
					obj = jv_object_delete(obj, jv_string(from));
					obj = jv_object_set(obj, jv_string(to), v);
				} else {
					jv_free(v);
				}
			}
		}
	}
	obj = ksim_convert(t, obj);
	obj = jv_object_set(obj, jv_string("apiVersion"), jv_string(t->api_version));
	obj = jv_object_set(obj, jv_string("kind"), jv_string(t->kind));
	/* stored objects are in canonical order already; answer() orders single objects */
	return obj;
}
