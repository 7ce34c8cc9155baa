/*
 * The decoder of Kubernetes protobuf bodies: the "k8s\0" envelope, and a
 * kind's message as the JSON its Go type marshals to, walking the table of
 * kproto_types.c.
 *
 * Go's JSON of a decoded message, which is what a JSON client of the same
 * object sends: a field that was not sent is its Go zero; a zero scalar and
 * a nil slice, map or pointer are left out under omitempty and written
 * (0, "", false, null) without it; a struct is always written, recursively;
 * a pointer that was sent is kept even when its value is zero. Unknown
 * fields are skipped, as Go's generated Unmarshal does. (The encoder, for
 * the tests, is kproto_encode.c.)
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kproto.h"
#include "banned.h"

#define MAX_DEPTH 64
#define ZERO_TIME (-62135596800LL)	/* 0001-01-01T00:00:00Z, Go's zero time.Time */

/* ---- reading the wire ------------------------------------------------------------ */

struct rd {
	const unsigned char *p, *end;
};

static int varint(struct rd *r, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (r->p >= r->end)
			return -1;
		*v |= (uint64_t)(*r->p & 0x7f) << shift;
		if (!(*r->p++ & 0x80))
			return 0;
	}
	return -1;
}

/* One field: its number and wire type, and its varint (*v) or bytes (*sub); -1 when cut short. */
struct wire {
	uint32_t num;
	unsigned wt;
	uint64_t v;
	struct rd sub;
};

static int next_field(struct rd *r, struct wire *w)
{
	uint64_t key, n;

	if (varint(r, &key) < 0 || key >> 3 == 0 || key >> 3 > 0x1fffffff)
		return -1;
	w->num = (uint32_t)(key >> 3);
	w->wt = key & 7;
	w->sub.p = w->sub.end = NULL;
	switch (w->wt) {
	case 0:
		return varint(r, &w->v);
	case 1:
	case 5:
		n = w->wt == 1 ? 8 : 4;
		if ((uint64_t)(r->end - r->p) < n)
			return -1;
		w->v = 0;
		for (unsigned i = 0; i < n; i++)
			w->v |= (uint64_t)r->p[i] << (8 * i);
		r->p += n;
		return 0;
	case 2:
		if (varint(r, &n) < 0 || n > (uint64_t)(r->end - r->p))
			return -1;
		w->sub.p = r->p;
		w->sub.end = r->p + n;
		r->p += n;
		return 0;
	}
	return -1;
}

/* ---- decoding ------------------------------------------------------------------- */

struct dec {
	const unsigned char *base;	/* offsets in messages count from here */
	struct kop_buf path;		/* the JSON path of the value being read */
	int depth;
	char *err;
};

static int dec_fail(struct dec *d, const unsigned char *at, const char *what)
{
	return kop_error(d->err, "protobuf: %s%s%s at offset %ld", d->path.len ? d->path.buf : "",
			 d->path.len ? ": " : "", what, at ? (long)(at - d->base) : 0L);
}

static int decode_msg(struct dec *d, unsigned mi, struct rd r, jv *out);

static jv zero_scalar(unsigned type)
{
	switch (type) {
	case KP_STRING:
		return jv_string("");
	case KP_BOOL:
		return jv_false();
	case KP_BYTES:
		return jv_null();
	}
	return jv_number(0);
}

/* (v borrowed) */
static int is_zero(jv v)
{
	switch (jv_get_kind(v)) {
	case JV_KIND_STRING:
		return jv_string_length_bytes(jv_copy(v)) == 0;
	case JV_KIND_NUMBER:
		return jv_number_value(v) == 0;
	case JV_KIND_FALSE:
	case JV_KIND_NULL:
		return 1;
	default:
		return 0;
	}
}

static unsigned wire_type_of(unsigned type)
{
	return type == KP_INT32 || type == KP_INT64 || type == KP_BOOL ? 0 : type == KP_DOUBLE ? 1 : 2;
}

/* A scalar of the wire field w as JSON. */
static int scalar(struct dec *d, unsigned type, const struct wire *w, jv *out)
{
	double dv;

	switch (type) {
	case KP_STRING:
		*out = jv_string_sized((const char *)w->sub.p, (int)(w->sub.end - w->sub.p));
		return 0;
	case KP_BYTES: {
		char *b = kop_base64(w->sub.p, (size_t)(w->sub.end - w->sub.p));

		*out = jv_string(b);
		free(b);
		return 0;
	}
	case KP_INT32:
		*out = jv_number((double)(int32_t)(uint32_t)w->v);
		return 0;
	case KP_INT64:
		*out = jv_number((double)(int64_t)w->v);
		return 0;
	case KP_BOOL:
		*out = w->v ? jv_true() : jv_false();
		return 0;
	case KP_DOUBLE:
		memcpy(&dv, &w->v, sizeof(dv));
		*out = jv_number(dv);
		return 0;
	}
	return dec_fail(d, w->sub.p, "unknown value type");
}

/* One value of field f (a message, or a scalar) from the wire field w. */
static int value(struct dec *d, const struct kproto_field *f, const struct wire *w, jv *out)
{
	if (f->type == KP_MSG)
		return decode_msg(d, f->msg, w->sub, out);
	return scalar(d, f->type, w, out);
}

/* A map entry (key 1, value 2) into *obj. */
static int map_entry(struct dec *d, const struct kproto_field *f, struct rd r, jv *obj)
{
	jv key = jv_string(""), val = jv_invalid();
	struct wire w;

	while (r.p < r.end) {
		const unsigned char *at = r.p;

		if (next_field(&r, &w) < 0) {
			jv_free(key);
			jv_free(val);
			return dec_fail(d, at, "truncated map entry");
		}
		if (w.num == 1 && w.wt == 2) {
			jv_free(key);
			key = jv_string_sized((const char *)w.sub.p, (int)(w.sub.end - w.sub.p));
		} else if (w.num == 2) {
			if (w.wt != wire_type_of(f->type)) {
				jv_free(key);
				jv_free(val);
				return dec_fail(d, at, "wrong wire type of a map value");
			}
			jv_free(val);
			if (value(d, f, &w, &val) < 0) {
				jv_free(key);
				return -1;
			}
		}
	}
	if (!jv_is_valid(val)) {
		struct rd none = { NULL, NULL };

		if (f->type != KP_MSG)
			val = zero_scalar(f->type);
		else if (decode_msg(d, f->msg, none, &val) < 0) {
			jv_free(key);
			return -1;
		}
	}
	*obj = jv_object_set(*obj, key, val);
	return 0;
}

/* A field's wire value into its slot (an array for repeated fields, an object for maps). */
static int field_value(struct dec *d, const struct kproto_field *f, const struct wire *w, const unsigned char *at,
		       jv *slot)
{
	unsigned want = wire_type_of(f->type);
	jv v;

	if ((f->flags & KP_MAP) && w->wt == 2) {
		if (!jv_is_valid(*slot))
			*slot = jv_object();
		return map_entry(d, f, w->sub, slot);
	}
	if ((f->flags & KP_REP) && w->wt == 2 && want != 2) {
		/* packed repeated scalars */
		struct rd r = w->sub;
		struct wire e = { .num = w->num, .wt = want };

		if (!jv_is_valid(*slot))
			*slot = jv_array();
		while (r.p < r.end) {
			if (want == 0 ? varint(&r, &e.v) < 0 : (size_t)(r.end - r.p) < 8)
				return dec_fail(d, r.p, "truncated packed values");
			if (want == 1) {
				memcpy(&e.v, r.p, 8);
				r.p += 8;
			}
			if (scalar(d, f->type, &e, &v) < 0)
				return -1;
			*slot = jv_array_append(*slot, v);
		}
		return 0;
	}
	if (w->wt != want || (f->flags & KP_MAP)) {
		char what[64];

		snprintf(what, sizeof(what), "wrong wire type %u (want %u)", w->wt, (f->flags & KP_MAP) ? 2 : want);
		return dec_fail(d, at, what);
	}
	if (value(d, f, w, &v) < 0)
		return -1;
	if (f->flags & KP_REP) {
		if (!jv_is_valid(*slot))
			*slot = jv_array();
		*slot = jv_array_append(*slot, v);
	} else {
		jv_free(*slot);
		*slot = v;
	}
	return 0;
}

/* Appends Go's time.Duration.String() of ns nanoseconds. */
static void go_duration(int64_t ns, struct kop_buf *b)
{
	uint64_t u = ns < 0 ? -(uint64_t)ns : (uint64_t)ns;
	char frac[16];
	int n;

	if (ns < 0)
		kop_buf_adds(b, "-");
	if (u == 0) {
		kop_buf_adds(b, "0s");
		return;
	}
	if (u < 1000000000ULL) {
		uint64_t unit = u < 1000 ? 1 : u < 1000000 ? 1000 : 1000000;
		const char *name = u < 1000 ? "ns" : u < 1000000 ? "\xc2\xb5s" : "ms";

		n = snprintf(frac, sizeof(frac), "%0*llu", unit == 1 ? 1 : unit == 1000 ? 3 : 6,
			     (unsigned long long)(u % unit));
		while (n > 0 && frac[n - 1] == '0')
			frac[--n] = 0;
		kop_buf_addf(b, "%llu%s%s%s", (unsigned long long)(u / unit), unit > 1 && n ? "." : "",
			     unit > 1 ? frac : "", name);
		return;
	}
	{
		uint64_t s = u / 1000000000ULL, h = s / 3600, m = s / 60 % 60;

		if (h)
			kop_buf_addf(b, "%lluh%llum", (unsigned long long)h, (unsigned long long)m);
		else if (m)
			kop_buf_addf(b, "%llum", (unsigned long long)m);
		n = snprintf(frac, sizeof(frac), "%09llu", (unsigned long long)(u % 1000000000ULL));
		while (n > 0 && frac[n - 1] == '0')
			frac[--n] = 0;
		kop_buf_addf(b, "%llu%s%ss", (unsigned long long)(s % 60), n ? "." : "", frac);
	}
}

/*
 * apiextensions' schema-or-something messages: their schema field (a
 * message) or their other form (a repeated message or string, or a bool),
 * as their MarshalJSON chooses.
 */
static int decode_either(struct dec *d, const struct kproto_msg *m, struct rd r, jv *out)
{
	jv schema = jv_invalid(), list = jv_array();
	int allows = 0, rc = 0;
	struct wire w;

	while (rc == 0 && r.p < r.end) {
		const unsigned char *at = r.p;
		const struct kproto_field *f = NULL;
		jv v;

		if (next_field(&r, &w) < 0) {
			rc = dec_fail(d, at, "truncated message");
			break;
		}
		for (size_t i = 0; i < m->nfields; i++)
			if (m->fields[i].num == w.num)
				f = &m->fields[i];
		if (!f)
			continue;
		if (f->type == KP_BOOL && w.wt == 0) {
			allows = w.v != 0;
		} else if (f->type == KP_STRING && w.wt == 2) {
			list = jv_array_append(list, jv_string_sized((const char *)w.sub.p, (int)(w.sub.end - w.sub.p)));
		} else if (f->type == KP_MSG && w.wt == 2) {
			if ((rc = decode_msg(d, f->msg, w.sub, &v)) < 0)
				break;
			if (f->flags & KP_REP) {
				list = jv_array_append(list, v);
			} else {
				jv_free(schema);
				schema = v;
			}
		} else {
			rc = dec_fail(d, at, "wrong wire type");
		}
	}
	if (rc < 0) {
		jv_free(schema);
		jv_free(list);
		return rc;
	}
	if (m->special != KP_ORBOOL && jv_array_length(jv_copy(list)) > 0) {
		jv_free(schema);
		*out = list;
		return 0;
	}
	jv_free(list);
	*out = jv_is_valid(schema) ? schema : m->special == KP_ORBOOL ? jv_bool(allows) : jv_null();
	return 0;
}

/* The JSON of a message whose Go type marshals itself (enum kproto_special). */
static int decode_special(struct dec *d, const struct kproto_msg *m, struct rd r, jv *out)
{
	const unsigned char *start = r.p;
	int64_t n1 = 0, n2 = 0;
	jv s3 = jv_invalid(), s1 = jv_invalid(), items = jv_null();
	int have1 = 0;
	struct wire w;

	while (r.p < r.end) {
		const unsigned char *at = r.p;

		if (next_field(&r, &w) < 0) {
			jv_free(s1);
			jv_free(s3);
			jv_free(items);
			return dec_fail(d, at, "truncated message");
		}
		if (w.wt == 0 && w.num == 1)
			n1 = (int64_t)w.v;
		else if (w.wt == 0 && w.num == 2)
			n2 = (int64_t)w.v;
		else if (w.wt == 2 && w.num == 1 && m->special == KP_ITEMS)
			items = jv_array_append(jv_get_kind(items) == JV_KIND_ARRAY ? items : jv_array(),
						jv_string_sized((const char *)w.sub.p, (int)(w.sub.end - w.sub.p)));
		else if (w.wt == 2 && w.num == 1) {
			jv_free(s1);
			s1 = jv_string_sized((const char *)w.sub.p, (int)(w.sub.end - w.sub.p));
			have1 = 1;
		} else if (w.wt == 2 && w.num == 3) {
			jv_free(s3);
			s3 = jv_string_sized((const char *)w.sub.p, (int)(w.sub.end - w.sub.p));
		}
	}
	switch (m->special) {
	case KP_TIME:
	case KP_MICROTIME: {
		time_t t = (time_t)n1;
		struct tm tm;
		char buf[64];
		long usec = m->special == KP_MICROTIME ? (long)((int32_t)n2 / 1000) : 0;

		if (start == r.end || (n1 == ZERO_TIME && usec == 0)) {
			*out = jv_null();
			break;
		}
		if (!gmtime_r(&t, &tm) || tm.tm_year + 1900 < 0 || tm.tm_year + 1900 > 9999) {
			jv_free(s1);
			jv_free(s3);
			jv_free(items);
			return dec_fail(d, start, "time outside of the years 0 to 9999");
		}
		if (m->special == KP_TIME)
			strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
		else
			snprintf(buf + strftime(buf, 32, "%Y-%m-%dT%H:%M:%S", &tm), 32, ".%06ldZ", usec);
		*out = jv_string(buf);
		break;
	}
	case KP_DURATION: {
		struct kop_buf b = KOP_BUF_INIT;

		go_duration(n1, &b);
		*out = jv_string(b.buf);
		kop_buf_release(&b);
		break;
	}
	case KP_QUANTITY:
		*out = have1 ? jv_copy(s1) : jv_string("0");
		break;
	case KP_INTORSTRING:
		*out = n1 == 1 ? (jv_is_valid(s3) ? jv_copy(s3) : jv_string("")) : jv_number((double)(int32_t)n2);
		break;
	case KP_RAW:
		if (!have1 || !jv_string_length_bytes(jv_copy(s1))) {
			*out = jv_null();
			break;
		}
		*out = jv_parse_sized(jv_string_value(s1), jv_string_length_bytes(jv_copy(s1)));
		if (!jv_is_valid(*out)) {
			jv_free(*out);
			jv_free(s1);
			jv_free(s3);
			jv_free(items);
			return dec_fail(d, start, "raw bytes that are not JSON");
		}
		break;
	case KP_ITEMS:
		*out = jv_copy(items);
		break;
	}
	jv_free(s1);
	jv_free(s3);
	jv_free(items);
	return 0;
}

static const struct kproto_field *find_field(const struct kproto_msg *m, uint32_t num, size_t *i)
{
	for (*i = 0; *i < m->nfields; (*i)++)
		if (m->fields[*i].num == num)
			return &m->fields[*i];
	return NULL;
}

/* Message mi from r (r.p NULL: the zero message) as Go's JSON of it. */
static int decode_msg(struct dec *d, unsigned mi, struct rd r, jv *out)
{
	const struct kproto_msg *m = &kproto_msgs[mi];
	jv *slots;
	int rc = 0;

	if (m->special >= KP_ORARRAY)
		return decode_either(d, m, r, out);
	if (m->special != KP_PLAIN)
		return decode_special(d, m, r, out);
	if (d->depth >= MAX_DEPTH)
		return dec_fail(d, r.p, "messages nested too deep");
	d->depth++;
	slots = calloc(m->nfields ? m->nfields : 1, sizeof(*slots));
	if (!slots)
		abort();
	for (size_t i = 0; i < m->nfields; i++)
		slots[i] = jv_invalid();
	while (rc == 0 && r.p < r.end) {
		const unsigned char *at = r.p;
		const struct kproto_field *f;
		struct wire w;
		size_t i, plen = d->path.len;

		if (next_field(&r, &w) < 0) {
			rc = dec_fail(d, at, w.wt > 5 || w.wt == 3 || w.wt == 4 ? "unknown wire type" : "truncated field");
			break;
		}
		f = find_field(m, w.num, &i);
		if (!f)
			continue;	/* a field this version does not know */
		if (*f->json)
			kop_buf_addf(&d->path, "%s%s", plen ? "." : "", f->json);
		if ((f->flags & KP_REP) && f->type == KP_MSG)
			kop_buf_addf(&d->path, "[%d]", jv_is_valid(slots[i]) ? jv_array_length(jv_copy(slots[i])) : 0);
		rc = field_value(d, f, &w, at, &slots[i]);
		d->path.len = plen;
		if (d->path.buf)
			d->path.buf[plen] = 0;
	}
	*out = jv_object();
	for (size_t i = 0; i < m->nfields; i++) {
		const struct kproto_field *f = &m->fields[i];
		jv v = slots[i];

		if (rc < 0) {
			jv_free(v);
			continue;
		}
		if (!jv_is_valid(v)) {
			if ((f->flags & (KP_REP | KP_MAP | KP_PTR)) || f->type == KP_BYTES) {
				if (f->flags & KP_OMIT)
					continue;
				v = jv_null();
			} else if (f->type == KP_MSG) {
				struct rd none = { NULL, NULL };

				if ((rc = decode_msg(d, f->msg, none, &v)) < 0)
					continue;
			} else if (f->flags & KP_OMIT) {
				continue;
			} else {
				v = zero_scalar(f->type);
			}
		} else if ((f->flags & KP_OMIT) && !(f->flags & (KP_PTR | KP_REP | KP_MAP)) && f->type != KP_MSG &&
			   is_zero(v)) {
			jv_free(v);
			continue;
		}
		if (f->flags & KP_INLINE)
			*out = jv_object_merge(*out, jv_get_kind(v) == JV_KIND_OBJECT ? v : (jv_free(v), jv_object()));
		else
			*out = jv_object_set(*out, jv_string(f->json), v);
	}
	free(slots);
	d->depth--;
	if (rc < 0) {
		jv_free(*out);
		*out = jv_invalid();
	}
	return rc;
}

int kproto_decode(unsigned msg, const void *data, size_t len, jv *out, char *err)
{
	struct dec d = { data, KOP_BUF_INIT, 0, err };
	struct rd r = { data, (const unsigned char *)data + len };
	int rc;

	if (!data) {
		static const unsigned char nothing[1];

		r.p = r.end = nothing;
	}
	rc = decode_msg(&d, msg, r, out);
	kop_buf_release(&d.path);
	return rc;
}

int kproto_kind_msg(const char *api_version, const char *kind)
{
	for (const struct kproto_kind *k = kproto_kinds; k->kind; k++)
		if (!strcmp(k->api_version, api_version) && !strcmp(k->kind, kind))
			return (int)k->msg;
	return -1;
}

int kproto_envelope(const void *body, size_t len, char **api_version, char **kind, const unsigned char **raw,
		    size_t *raw_len, char *err)
{
	struct rd r = { body, (const unsigned char *)body + len };
	struct wire w;

	*api_version = *kind = NULL;
	*raw = NULL;
	*raw_len = 0;
	if (len < 4 || memcmp(body, "k8s\0", 4))
		return kop_error(err, "the body does not start with the protobuf prefix \"k8s\\x00\"");
	r.p += 4;
	while (r.p < r.end) {
		if (next_field(&r, &w) < 0)
			goto bad;
		if (w.num == 2 && w.wt == 2) {
			*raw = w.sub.p;
			*raw_len = (size_t)(w.sub.end - w.sub.p);
		} else if (w.num == 1 && w.wt == 2) {
			struct wire t;

			while (w.sub.p < w.sub.end) {
				if (next_field(&w.sub, &t) < 0)
					goto bad;
				if (t.wt == 2 && (t.num == 1 || t.num == 2)) {
					char **s = t.num == 1 ? api_version : kind;

					free(*s);
					*s = kop_strndup((const char *)t.sub.p, (size_t)(t.sub.end - t.sub.p));
				}
			}
		}
	}
	if (!*api_version)
		*api_version = kop_strdup("");
	if (!*kind)
		*kind = kop_strdup("");
	return 0;
bad:
	free(*api_version);
	free(*kind);
	*api_version = *kind = NULL;
	return kop_error(err, "protobuf: the runtime.Unknown envelope is truncated at offset %ld",
			 (long)(r.p - (const unsigned char *)body));
}
