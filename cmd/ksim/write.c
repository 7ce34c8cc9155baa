/*
 * What every write shares: managedFields tracking, the comparison that
 * makes a write a no-op, generation, schema defaulting, pruning and
 * validation of custom objects, and the fields the server sets on some
 * types (a CRD's status, an Event's, a Service's IP, a Secret's data).
 * The verbs themselves are create.c's, update.c's, patch.c's, delete.c's.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include "api.h"
#include "patch.h"
#include "schema.h"
#include "ssa.h"
#include "banned.h"

/* The list shapes of t (computed once per type and schema; lock held). */
jv listinfo(const struct ksim_type *t)
{
	struct ksim_type *mt = (struct ksim_type *)t;

	if (jv_get_kind(t->listinfo) == JV_KIND_NULL) {
		if ((t->flags & KT_CUSTOM) && jv_get_kind(t->schema) == JV_KIND_OBJECT)
			mt->listinfo = kop_schema_listinfo(t->schema);
		else
			mt->listinfo = kop_builtin_listinfo(t->api_version, t->kind);
	}
	return jv_copy(t->listinfo);
}

/*
 * kop_ssa_track_update() on the parts that can differ: top-level fields
 * equal in old and new (the spec of a status write, say; equal values are
 * often the same storage, compared at once) are left out of both, so the
 * field sets are worked out over what changed only. The managedFields
 * that come out are the same: only changed and removed fields move.
 * old consumed (null on create: nothing left out), new consumed.
 */
jv track_update(jv old, jv new, const char *manager, const char *sub, const char *now, jv li)
{
	jv rold, rnew, r, md;

	if (jv_get_kind(old) != JV_KIND_OBJECT || jv_get_kind(new) != JV_KIND_OBJECT)
		return kop_ssa_track_update(old, new, manager, sub, now, li);
	rold = jv_object();
	rnew = jv_object();
	jv_object_foreach(new, k, v) {
		const char *ks = jv_string_value(k);
		jv ov = jv_object_get(jv_copy(old), jv_copy(k));
		int keep = !strcmp(ks, "metadata") || !strcmp(ks, "apiVersion") || !strcmp(ks, "kind") ||
			   !jv_is_valid(ov) || !jv_equal(jv_copy(ov), jv_copy(v));

		if (keep) {
			if (jv_is_valid(ov))
				rold = jv_object_set(rold, jv_copy(k), ov);
			else
				jv_free(ov);
			rnew = jv_object_set(rnew, k, v);
		} else {
			jv_free(ov);
			jv_free(k);
			jv_free(v);
		}
	}
	jv_object_foreach(old, k, v) {
		if (!jv_object_has(jv_copy(new), jv_copy(k)))
			rold = jv_object_set(rold, k, v);
		else {
			jv_free(k);
			jv_free(v);
		}
	}
	jv_free(old);
	r = kop_ssa_track_update(rold, rnew, manager, sub, now, li);
	md = jv_object_get(jv_copy(r), jv_string("metadata"));
	jv_free(r);
	if (jv_get_kind(md) == JV_KIND_OBJECT && jv_object_has(jv_copy(md), jv_string("managedFields")))
		new = set_meta(new, "managedFields", jv_object_get(md, jv_string("managedFields")));
	else {
		jv nmd = jv_object_get(jv_copy(new), jv_string("metadata"));

		jv_free(md);
		if (jv_get_kind(nmd) == JV_KIND_OBJECT && jv_object_has(jv_copy(nmd), jv_string("managedFields")))
			new = jv_object_set(new, jv_string("metadata"),
					    jv_object_delete(nmd, jv_string("managedFields")));
		else
			jv_free(nmd);
	}
	return new;
}

const char *manager_of(const struct ksim_request *rq, char *buf, size_t len)
{
	const char *m = query(rq, "fieldManager");
	const char *ua = rq->user_agent;

	if (m && *m)
		return m;
	if (ua && *ua) {
		size_t n = strcspn(ua, "/");

		if (n >= len)
			n = len - 1;
		memcpy(buf, ua, n);
		buf[n] = 0;
		return buf;
	}
	return "unknown";
}

/* Objects compared without resourceVersion and managedFields' times. */
static jv strip_times(jv obj)
{
	jv mf = get_meta(obj, "managedFields");

	obj = set_meta(obj, "resourceVersion", jv_null());
	if (jv_get_kind(mf) == JV_KIND_ARRAY) {
		jv out = jv_array();

		jv_array_foreach(mf, i, e) {
			if (jv_get_kind(e) == JV_KIND_OBJECT)
				e = jv_object_delete(e, jv_string("time"));
			out = jv_array_append(out, e);
		}
		obj = set_meta(obj, "managedFields", out);
	}
	jv_free(mf);
	return obj;
}

int same_object(jv a, jv b)
{
	return jv_equal(strip_times(jv_copy(a)), strip_times(jv_copy(b)));
}

/* Everything but metadata (and status when the type has a status subresource). */
jv spec_part(const struct ksim_type *t, jv obj)
{
	obj = jv_object_delete(obj, jv_string("metadata"));
	obj = jv_object_delete(obj, jv_string("apiVersion"));
	obj = jv_object_delete(obj, jv_string("kind"));
	if (t->flags & KT_STATUS)
		obj = jv_object_delete(obj, jv_string("status"));
	return obj;
}

double generation(jv obj)
{
	jv g = get_meta(obj, "generation");
	double d = jv_get_kind(g) == JV_KIND_NUMBER ? jv_number_value(g) : 0;

	jv_free(g);
	return d;
}

/* The fields of orig (borrowed) that pruned (borrowed) lacks, as "spec.x" paths appended to *out. */
static void pruned_paths(jv orig, jv pruned, const char *prefix, jv *out)
{
	if (jv_identical(jv_copy(orig), jv_copy(pruned)))
		return;	/* left alone by the pruning (lib/schema.c keeps it shared) */
	if (jv_get_kind(orig) == JV_KIND_OBJECT && jv_get_kind(pruned) == JV_KIND_OBJECT) {
		jv_object_foreach(orig, k, v) {
			struct kop_buf p = KOP_BUF_INIT;
			jv pv = jv_object_get(jv_copy(pruned), jv_copy(k));

			kop_buf_addf(&p, "%s%s%s", prefix, *prefix ? "." : "", jv_string_value(k));
			if (!jv_is_valid(pv))
				*out = jv_array_append(*out, jv_string(p.buf));
			else
				pruned_paths(v, pv, p.buf, out);
			jv_free(pv);
			kop_buf_release(&p);
			jv_free(k);
			jv_free(v);
		}
	} else if (jv_get_kind(orig) == JV_KIND_ARRAY && jv_get_kind(pruned) == JV_KIND_ARRAY) {
		jv_array_foreach(orig, i, v) {
			struct kop_buf p = KOP_BUF_INIT;
			jv pv = jv_array_get(jv_copy(pruned), i);

			kop_buf_addf(&p, "%s[%d]", prefix, i);
			if (jv_is_valid(pv))
				pruned_paths(v, pv, p.buf, out);
			jv_free(pv);
			kop_buf_release(&p);
			jv_free(v);
		}
	}
}

/* A schema's subschema at key (borrowed schema), or null. */
static jv sub_schema(jv schema, const char *key)
{
	if (jv_get_kind(schema) != JV_KIND_OBJECT)
		return jv_null();
	return jv_object_get(jv_copy(schema), jv_string(key));
}

/*
 * kube-apiserver's PruneNonNullableNullsWithoutDefaults, then defaulting:
 * a null in a field that is not nullable is as if the field were absent
 * (its default, if any, then applies). Nulls in arrays are kept.
 */
static jv drop_nulls(jv obj, jv schema)
{
	if (jv_get_kind(obj) == JV_KIND_OBJECT) {
		jv props = sub_schema(schema, "properties"), ap = sub_schema(schema, "additionalProperties");
		jv orig = jv_copy(obj);

		jv_object_foreach(orig, k, v) {
			jv ps = jv_get_kind(props) == JV_KIND_OBJECT ? jv_object_get(jv_copy(props), jv_copy(k))
								    : jv_invalid();

			if (!jv_is_valid(ps) && jv_get_kind(ap) == JV_KIND_OBJECT)
				ps = (jv_free(ps), jv_copy(ap));
			if (jv_get_kind(ps) == JV_KIND_OBJECT) {
				jv nullable = sub_schema(ps, "nullable");

				if (jv_get_kind(v) == JV_KIND_NULL && jv_get_kind(nullable) != JV_KIND_TRUE) {
					obj = jv_object_delete(obj, jv_copy(k));
				} else if (jv_get_kind(v) == JV_KIND_OBJECT || jv_get_kind(v) == JV_KIND_ARRAY) {
					jv nv = drop_nulls(jv_copy(v), ps);

					/* set only when changed: what is left alone stays shared */
					if (jv_identical(jv_copy(nv), jv_copy(v)))
						jv_free(nv);
					else
						obj = jv_object_set(obj, jv_copy(k), nv);
				}
				jv_free(nullable);
			}
			jv_free(ps);
			jv_free(k);
			jv_free(v);
		}
		jv_free(orig);
		jv_free(props);
		jv_free(ap);
	} else if (jv_get_kind(obj) == JV_KIND_ARRAY) {
		jv items = sub_schema(schema, "items");

		if (jv_get_kind(items) == JV_KIND_OBJECT) {
			int n = jv_array_length(jv_copy(obj));

			for (int i = 0; i < n; i++) {
				jv e = jv_array_get(jv_copy(obj), i), ne = drop_nulls(jv_copy(e), items);

				if (jv_identical(jv_copy(ne), e))
					jv_free(ne);
				else
					obj = jv_array_set(obj, i, ne);
			}
		}
		jv_free(items);
	}
	return obj;
}

/*
 * The top-level members of *obj but its identity (apiVersion, kind,
 * metadata) that are the stored object's own storage, objects or arrays
 * this write did not touch (the spec of a status write, say): taken out of
 * *obj into the object returned, its key order in *keys, so that
 * defaulting, pruning and unknown fields go over what the write brought
 * only. They were gone over when they were stored, under the same version
 * (one stored through another version of t, whose schema may differ, is
 * gone over whole; a CRD's schema changed since reaches them at the next
 * write that touches them: ksim defaults and prunes on writes only). old
 * (borrowed) is jv_invalid() on a create: nothing is taken.
 */
static jv untouched_take(const struct ksim_type *t, jv *obj, jv old, jv *keys)
{
	jv kept = jv_object(), src;
	const char *av;

	*keys = jv_array();
	if (jv_get_kind(old) != JV_KIND_OBJECT || jv_get_kind(*obj) != JV_KIND_OBJECT)
		return kept;
	av = ksim_str(old, "apiVersion");
	if (!av || strcmp(av, t->api_version))
		return kept;
	src = jv_copy(*obj);
	jv_object_foreach(src, k, v) {
		const char *ks = jv_string_value(k);
		jv_kind vk = jv_get_kind(v);

		*keys = jv_array_append(*keys, jv_copy(k));
		/* (a member old lacks is jv_invalid() there: identical to nothing) */
		if (strcmp(ks, "apiVersion") && strcmp(ks, "kind") && strcmp(ks, "metadata") &&
		    (vk == JV_KIND_OBJECT || vk == JV_KIND_ARRAY) &&
		    jv_identical(jv_object_get(jv_copy(old), jv_copy(k)), jv_copy(v))) {
			*obj = jv_object_delete(*obj, jv_copy(k));
			kept = jv_object_set(kept, k, v);
		} else {
			jv_free(k);
			jv_free(v);
		}
	}
	jv_free(src);
	return kept;
}

/* obj (consumed) with kept's members (consumed) put back, in the order of keys (consumed), then what obj gained. */
static jv untouched_put(jv obj, jv kept, jv keys)
{
	jv out;

	if (jv_object_length(jv_copy(kept)) == 0) {
		jv_free(kept);
		jv_free(keys);
		return obj;
	}
	obj = jv_object_merge(obj, kept);
	out = jv_object();
	jv_array_foreach(keys, i, k) {
		jv v = jv_object_get(jv_copy(obj), jv_copy(k));

		if (jv_is_valid(v))
			out = jv_object_set(out, k, v);
		else {
			jv_free(v);
			jv_free(k);
		}
	}
	jv_free(keys);
	return ksim_add_missing(out, obj);
}

/*
 * Schema defaulting, pruning and validation of a custom object: 0, or -1
 * with *err_out a 422 (invalid) or 400 (fieldValidation=Strict and unknown
 * fields). With Warn (the default), each pruned field becomes a warning.
 * old (borrowed): the stored object of an update, whose values the new one
 * still shares are not validated again (ratcheting); jv_invalid() on a create.
 */
int schema_check(const struct ksim_type *t, jv *obj, jv old, const char *name, const struct wopts *o, jv *err_out)
{
	jv causes, orig, unknown = jv_array(), keys, kept = untouched_take(t, obj, old, &keys);
	int custom = (t->flags & KT_CUSTOM) && jv_get_kind(t->schema) == JV_KIND_OBJECT;

	if (!custom) {
		/* a built-in kind: its decoder drops the fields it does not know */
		jv_free(unknown);
		*obj = ksim_builtin_unknown_fields(t, *obj, &unknown);
		if (o->validation == VALIDATE_IGNORE) {
			jv_free(unknown);
			unknown = jv_array();
		}
	} else {
		*obj = drop_nulls(*obj, t->schema);
		orig = jv_copy(*obj);
		*obj = kop_schema_prune(kop_schema_default(*obj, t->schema), t->schema);
		if (o->validation != VALIDATE_IGNORE)
			pruned_paths(orig, *obj, "", &unknown);
		jv_free(orig);
	}
	*obj = untouched_put(*obj, kept, keys);
	if (jv_array_length(jv_copy(unknown)) > 0) {
		struct kop_buf m = KOP_BUF_INIT;

		kop_buf_adds(&m, "strict decoding error: ");
		jv_array_foreach(unknown, i, f) {
			struct kop_buf w = KOP_BUF_INIT;

			kop_buf_addf(&w, "unknown field \"%s\"", jv_string_value(f));
			kop_buf_addf(&m, "%s%s", i ? ", " : "", w.buf);
			if (o->validation == VALIDATE_WARN && o->warnings)
				*o->warnings = jv_array_append(*o->warnings, jv_string(w.buf));
			kop_buf_release(&w);
			jv_free(f);
		}
		if (o->validation == VALIDATE_STRICT) {
			*err_out = bad_request(m.buf);
			kop_buf_release(&m);
			jv_free(unknown);
			return -1;
		}
		kop_buf_release(&m);
	}
	jv_free(unknown);
	if (!custom)
		return 0;
	causes = kop_schema_validate_update(jv_copy(*obj), jv_copy(old), t->schema);
	if (jv_get_kind(causes) == JV_KIND_ARRAY && jv_array_length(jv_copy(causes)) > 0) {
		*err_out = invalid(t, name, causes);
		return -1;
	}
	jv_free(causes);
	return 0;
}

jv crd_status(jv crd, const char *now)
{
	jv names = jv_getpath(jv_copy(crd), JV_ARRAY(jv_string("spec"), jv_string("names")));
	jv versions = jv_getpath(jv_copy(crd), JV_ARRAY(jv_string("spec"), jv_string("versions")));
	jv stored = jv_getpath(jv_copy(crd), JV_ARRAY(jv_string("status"), jv_string("storedVersions")));
	jv status;

	if (jv_get_kind(names) == JV_KIND_OBJECT) {
		const char *kind = ksim_str(names, "kind");

		if (!jv_object_has(jv_copy(names), jv_string("singular")) && kind) {
			char *s = kop_strdup(kind);

			for (char *p = s; *p; p++)
				*p = tolower((unsigned char)*p);
			names = jv_object_set(names, jv_string("singular"), jv_string(s));
			free(s);
		}
		if (!jv_object_has(jv_copy(names), jv_string("listKind")) && kind) {
			struct kop_buf b = KOP_BUF_INIT;

			kop_buf_addf(&b, "%sList", kind);
			names = jv_object_set(names, jv_string("listKind"), jv_string(b.buf));
			kop_buf_release(&b);
		}
		crd = jv_setpath(crd, JV_ARRAY(jv_string("spec"), jv_string("names")), jv_copy(names));
	}
	if (jv_get_kind(stored) != JV_KIND_ARRAY)
		stored = (jv_free(stored), jv_array());
	if (jv_get_kind(versions) == JV_KIND_ARRAY) {
		jv_array_foreach(versions, i, v) {
			jv st = jv_object_get(jv_copy(v), jv_string("storage"));

			if (jv_get_kind(st) == JV_KIND_TRUE) {
				jv n = jv_object_get(jv_copy(v), jv_string("name"));
				int seen = 0;

				jv_array_foreach(stored, j, s) {
					seen |= jv_equal(s, jv_copy(n));
				}
				if (!seen)
					stored = jv_array_append(stored, n);
				else
					jv_free(n);
			}
			jv_free(st);
			jv_free(v);
		}
	}
	jv_free(versions);
	{
		jv conv = jv_getpath(jv_copy(crd), JV_ARRAY(jv_string("spec"), jv_string("conversion")));

		if (jv_get_kind(conv) != JV_KIND_OBJECT)
			crd = jv_setpath(crd, JV_ARRAY(jv_string("spec"), jv_string("conversion")),
					 JV_OBJECT(jv_string("strategy"), jv_string("None")));
		jv_free(conv);
	}
	status = JV_OBJECT(jv_string("conditions"),
			   JV_ARRAY(JV_OBJECT(jv_string("type"), jv_string("NamesAccepted"), jv_string("status"),
					      jv_string("True"), jv_string("lastTransitionTime"), jv_string(now),
					      jv_string("reason"), jv_string("NoConflicts"), jv_string("message"),
					      jv_string("no conflicts found")),
				    JV_OBJECT(jv_string("type"), jv_string("Established"), jv_string("status"),
					      jv_string("True"), jv_string("lastTransitionTime"), jv_string(now),
					      jv_string("reason"), jv_string("InitialNamesAccepted"),
					      jv_string("message"), jv_string("the initial names have been accepted"))),
			   jv_string("acceptedNames"), names, jv_string("storedVersions"), stored);
	return jv_object_set(crd, jv_string("status"), status);
}

/*
 * events.k8s.io/v1 creates are validated strictly (k/k ValidateEventCreate);
 * obj is already in the stored core/v1 form. Returns the causes (array).
 */
jv event_causes(jv obj)
{
	static const char *const req[][2] = { { "eventTime", "eventTime" },
					      { "reportingComponent", "reportingController" },
					      { "reportingInstance", "reportingInstance" },
					      { "action", "action" },
					      { "reason", "reason" } };
	static const char *const dep[][2] = { { "firstTimestamp", "deprecatedFirstTimestamp" },
					      { "lastTimestamp", "deprecatedLastTimestamp" },
					      { "count", "deprecatedCount" },
					      { "source", "deprecatedSource" } };
	jv causes = jv_array();
	const char *type = ksim_str(obj, "type"), *note = ksim_str(obj, "message");

	for (size_t i = 0; i < sizeof(req) / sizeof(*req); i++) {
		jv v = field(obj, req[i][0]);

		if (jv_get_kind(v) != JV_KIND_STRING || !*jv_string_value(v))
			causes = jv_array_append(causes, cause("FieldValueRequired", "Required value", req[i][1]));
		else if (i > 1 && jv_string_length_bytes(jv_copy(v)) > 128)
			causes = jv_array_append(causes, cause("FieldValueTooLong", "Too long: may not be more than 128 bytes",
							       req[i][1]));
		jv_free(v);
	}
	if (!type || (strcmp(type, "Normal") && strcmp(type, "Warning"))) {
		struct kop_buf m = KOP_BUF_INIT;

		kop_buf_addf(&m, "Unsupported value: \"%s\": supported values: \"Normal\", \"Warning\"", type ? type : "");
		causes = jv_array_append(causes, cause("FieldValueNotSupported", m.buf, "type"));
		kop_buf_release(&m);
	}
	if (note && strlen(note) > 1024)
		causes = jv_array_append(causes, cause("FieldValueTooLong", "Too long: may not be more than 1024 bytes", "note"));
	for (size_t i = 0; i < sizeof(dep) / sizeof(*dep); i++) {
		jv v = field(obj, dep[i][0]);

		/* set: not its Go zero (a Go client always sends deprecatedSource, as {}) */
		if (jv_is_valid(v) && jv_get_kind(v) != JV_KIND_NULL &&
		    !(jv_get_kind(v) == JV_KIND_OBJECT && !jv_object_length(jv_copy(v))) &&
		    !(jv_get_kind(v) == JV_KIND_NUMBER && !jv_number_value(v)))
			causes = jv_array_append(causes, cause("FieldValueForbidden",
							       "Forbidden: deprecated field must not be set", dep[i][1]));
		jv_free(v);
	}
	return causes;
}

/*
 * The next free Service clusterIP in 10.96.0.0/16 (lock held). The counter
 * only says where to start looking: the stored Services (replayed from
 * --data, or given a clusterIP by their creator) decide what is free.
 */
void next_service_ip(char *ip, size_t len)
{
	static unsigned svc_ip = 10;

	for (unsigned n = 0; n < 65536; n++) {
		svc_ip = svc_ip >= 65534 ? 11 : svc_ip + 1;
		snprintf(ip, len, "10.96.%u.%u", (svc_ip >> 8) & 255, svc_ip & 255);
		if (!ksim_store_service_ip_used(ip))
			break;
	}
}

/*
 * A Secret's stringData is write-only: merged into data (base64), as
 * kube-apiserver's conversion does on every write, and never stored.
 */
jv secret_string_data(const struct ksim_type *t, jv obj)
{
	jv sd, data;

	if (strcmp(t->gr, "secrets") || jv_get_kind(obj) != JV_KIND_OBJECT ||
	    !jv_object_has(jv_copy(obj), jv_string("stringData")))
		return obj;
	sd = field(obj, "stringData");
	data = field(obj, "data");
	if (jv_get_kind(data) != JV_KIND_OBJECT)
		data = (jv_free(data), jv_object());
	if (jv_get_kind(sd) == JV_KIND_OBJECT) {
		jv_object_foreach(sd, k, v) {
			if (jv_get_kind(v) == JV_KIND_STRING) {
				char *b64 = kop_base64(jv_string_value(v), (size_t)jv_string_length_bytes(jv_copy(v)));

				data = jv_object_set(data, jv_copy(k), jv_string(b64));
				free(b64);
			}
			jv_free(k);
			jv_free(v);
		}
	}
	jv_free(sd);
	obj = jv_object_delete(obj, jv_string("stringData"));
	return jv_object_length(jv_copy(data)) ? jv_object_set(obj, jv_string("data"), data) : (jv_free(data), obj);
}
