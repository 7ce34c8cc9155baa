/*
 * The encoder of Kubernetes protobuf bodies (lib/kproto.h): a JSON object
 * of a kind as the "k8s\0" envelope and the message Go's Marshal writes,
 * walking the same table as the decoder (kproto_types.c). Every non-pointer
 * scalar and message is written (its zero when the JSON has none), pointers,
 * slices and maps when set; map entries in key order.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kproto.h"
#include "kube-priv.h"
#include "banned.h"

static jv zero_scalar(unsigned type)
{
	return type == KP_STRING ? jv_string("") : type == KP_BOOL ? jv_false() : jv_number(0);
}

static void put_varint(struct kop_buf *b, uint64_t v)
{
	unsigned char t[10];
	size_t n = 0;

	do {
		t[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	kop_buf_add(b, t, n);
}

static void put_bytes(struct kop_buf *b, uint32_t num, const void *p, size_t n)
{
	put_varint(b, (uint64_t)num << 3 | 2);
	put_varint(b, n);
	kop_buf_add(b, p, n);
}

static int encode_msg(unsigned mi, jv obj, struct kop_buf *b, const char *path, char *err);
static int encode_value(const struct kproto_field *f, jv v, struct kop_buf *b, const char *path, char *err);

/* Seconds (and microseconds) of an RFC 3339 time string. */
static int parse_time(const char *s, int64_t *sec, int32_t *nsec)
{
	struct tm tm = { 0 };
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	long frac = 0, scale = 1000000000L;

	if (!p)
		return -1;
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++)
			if (scale > 1) {
				scale /= 10;
				frac += (*p - '0') * scale;
			}
	}
	if (*p != 'Z' || p[1])
		return -1;
	*sec = (int64_t)timegm(&tm);
	*nsec = (int32_t)frac;
	return 0;
}

/* Go's time.ParseDuration, for the units Kubernetes writes (h, m, s, ms, us/µs, ns). */
static int parse_duration(const char *s, int64_t *ns)
{
	static const struct {
		const char *u;
		double mul;
	} units[] = { { "ns", 1 }, { "us", 1e3 }, { "\xc2\xb5s", 1e3 }, { "ms", 1e6 }, { "s", 1e9 }, { "m", 6e10 },
		      { "h", 3.6e12 } };
	double total = 0;
	int neg = *s == '-';

	s += neg || *s == '+';
	if (!strcmp(s, "0")) {
		*ns = 0;
		return 0;
	}
	while (*s) {
		char *e;
		double v = strtod(s, &e);
		size_t best = 0, bl = 0;

		if (e == s)
			return -1;
		for (size_t i = 0; i < sizeof(units) / sizeof(*units); i++) {
			size_t l = strlen(units[i].u);

			if (!strncmp(e, units[i].u, l) && l > bl) {
				best = i;
				bl = l;
			}
		}
		if (!bl)
			return -1;
		total += v * units[best].mul;
		s = e + bl;
	}
	*ns = (int64_t)(neg ? -total : total);
	return 0;
}

static int enc_fail(char *err, const char *path, const char *what)
{
	return kop_error(err, "%s: %s", *path ? path : "(object)", what);
}

/* A message whose Go type marshals itself, from its JSON v (not null). */
static int encode_special(const struct kproto_msg *m, jv v, struct kop_buf *b, const char *path, char *err)
{
	jv_kind k = jv_get_kind(v);

	switch (m->special) {
	case KP_TIME:
	case KP_MICROTIME: {
		int64_t sec;
		int32_t nsec;

		if (k != JV_KIND_STRING || parse_time(jv_string_value(v), &sec, &nsec) < 0)
			return enc_fail(err, path, "want an RFC 3339 time");
		put_varint(b, 1 << 3);
		put_varint(b, (uint64_t)sec);
		if (m->special == KP_MICROTIME && nsec) {
			put_varint(b, 2 << 3);
			put_varint(b, (uint64_t)(int64_t)(nsec / 1000 * 1000));
		}
		return 0;
	}
	case KP_DURATION: {
		int64_t ns;

		if (k != JV_KIND_STRING || parse_duration(jv_string_value(v), &ns) < 0)
			return enc_fail(err, path, "want a duration");
		put_varint(b, 1 << 3);
		put_varint(b, (uint64_t)ns);
		return 0;
	}
	case KP_QUANTITY: {
		jv s = k == JV_KIND_STRING ? jv_copy(v) : k == JV_KIND_NUMBER ? jv_dump_string(jv_copy(v), 0) : jv_invalid();

		if (!jv_is_valid(s))
			return enc_fail(err, path, "want a quantity");
		put_bytes(b, 1, jv_string_value(s), (size_t)jv_string_length_bytes(jv_copy(s)));
		jv_free(s);
		return 0;
	}
	case KP_INTORSTRING:
		if (k == JV_KIND_NUMBER) {
			put_varint(b, 1 << 3);
			put_varint(b, 0);
			put_varint(b, 2 << 3);
			put_varint(b, (uint64_t)(int64_t)jv_number_value(v));
			put_bytes(b, 3, "", 0);
		} else if (k == JV_KIND_STRING) {
			put_varint(b, 1 << 3);
			put_varint(b, 1);
			put_varint(b, 2 << 3);
			put_varint(b, 0);
			put_bytes(b, 3, jv_string_value(v), (size_t)jv_string_length_bytes(jv_copy(v)));
		} else {
			return enc_fail(err, path, "want a number or a string");
		}
		return 0;
	case KP_RAW: {
		jv s = jv_dump_string(jv_copy(v), 0);

		put_bytes(b, 1, jv_string_value(s), (size_t)jv_string_length_bytes(jv_copy(s)));
		jv_free(s);
		return 0;
	}
	case KP_ORARRAY:
	case KP_ORBOOL:
	case KP_ORSTRINGS:
		for (size_t i = 0; i < m->nfields; i++) {
			const struct kproto_field *f = &m->fields[i];
			int rc = 0;

			if (f->type == KP_BOOL) {
				/* Go's UnmarshalJSON: a schema allows */
				put_varint(b, (uint64_t)f->num << 3);
				put_varint(b, k == JV_KIND_TRUE || k == JV_KIND_OBJECT);
			} else if (k == JV_KIND_OBJECT && !(f->flags & KP_REP)) {
				rc = encode_value(f, v, b, path, err);
			} else if (k == JV_KIND_ARRAY && (f->flags & KP_REP)) {
				jv_array_foreach(v, j, e) {
					if (rc == 0)
						rc = encode_value(f, e, b, path, err);
					jv_free(e);
				}
			}
			if (rc < 0)
				return rc;
		}
		return 0;
	case KP_ITEMS:
		if (k != JV_KIND_ARRAY)
			return enc_fail(err, path, "want an array");
		jv_array_foreach(v, i, e) {
			if (jv_get_kind(e) != JV_KIND_STRING) {
				jv_free(e);
				return enc_fail(err, path, "want an array of strings");
			}
			put_bytes(b, 1, jv_string_value(e), (size_t)jv_string_length_bytes(jv_copy(e)));
			jv_free(e);
		}
		return 0;
	}
	return enc_fail(err, path, "unknown message type");
}

/* One value of field f (borrowed v, not null) with its tag. */
static int encode_value(const struct kproto_field *f, jv v, struct kop_buf *b, const char *path, char *err)
{
	jv_kind k = jv_get_kind(v);

	switch (f->type) {
	case KP_STRING:
		if (k != JV_KIND_STRING)
			return enc_fail(err, path, "want a string");
		put_bytes(b, f->num, jv_string_value(v), (size_t)jv_string_length_bytes(jv_copy(v)));
		return 0;
	case KP_BYTES: {
		char *raw;
		size_t n;

		if (k != JV_KIND_STRING ||
		    kube_base64_decode(jv_string_value(v), (size_t)jv_string_length_bytes(jv_copy(v)), &raw, &n) < 0)
			return enc_fail(err, path, "want base64");
		put_bytes(b, f->num, raw, n);
		free(raw);
		return 0;
	}
	case KP_INT32:
	case KP_INT64: {
		double d;

		if (k != JV_KIND_NUMBER)
			return enc_fail(err, path, "want a number");
		d = jv_number_value(v);
		/* (as a double, int64's range is [-2^63, 2^63): beyond it the conversion is undefined) */
		if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
			return enc_fail(err, path, "want a number within 64 bits");
		put_varint(b, (uint64_t)f->num << 3);
		put_varint(b, (uint64_t)(int64_t)d);
		return 0;
	}
	case KP_BOOL:
		if (k != JV_KIND_TRUE && k != JV_KIND_FALSE)
			return enc_fail(err, path, "want a boolean");
		put_varint(b, (uint64_t)f->num << 3);
		put_varint(b, k == JV_KIND_TRUE);
		return 0;
	case KP_DOUBLE: {
		double d;
		uint64_t u;

		if (k != JV_KIND_NUMBER)
			return enc_fail(err, path, "want a number");
		d = jv_number_value(v);
		memcpy(&u, &d, sizeof(u));
		put_varint(b, (uint64_t)f->num << 3 | 1);
		for (int i = 0; i < 8; i++) {
			unsigned char c = (unsigned char)(u >> (8 * i));

			kop_buf_add(b, &c, 1);
		}
		return 0;
	}
	case KP_MSG: {
		struct kop_buf sub = KOP_BUF_INIT;
		int rc = kproto_msgs[f->msg].special == KP_PLAIN ? encode_msg(f->msg, jv_copy(v), &sub, path, err) :
			 encode_special(&kproto_msgs[f->msg], v, &sub, path, err);

		if (rc == 0)
			put_bytes(b, f->num, sub.buf ? sub.buf : "", sub.len);
		kop_buf_release(&sub);
		return rc;
	}
	}
	return enc_fail(err, path, "unknown value type");
}

static int key_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A map field: one entry message a key, in key order as Go writes them. */
static int encode_map(const struct kproto_field *f, jv v, struct kop_buf *b, const char *path, char *err)
{
	int n = jv_object_length(jv_copy(v)), i = 0, rc = 0;
	const char **keys;

	if (jv_get_kind(v) != JV_KIND_OBJECT)
		return enc_fail(err, path, "want an object");
	keys = calloc((size_t)n + 1, sizeof(*keys));
	if (!keys)
		abort();
	jv_object_foreach(v, key, val) {
		keys[i++] = jv_string_value(key);	/* v holds the key strings */
		jv_free(key);
		jv_free(val);
	}
	qsort(keys, (size_t)n, sizeof(*keys), key_cmp);
	for (i = 0; rc == 0 && i < n; i++) {
		struct kop_buf e = KOP_BUF_INIT;
		struct kproto_field vf = *f;
		jv val = jv_object_get(jv_copy(v), jv_string(keys[i]));

		vf.num = 2;
		put_bytes(&e, 1, keys[i], strlen(keys[i]));
		if (jv_get_kind(val) != JV_KIND_NULL)
			rc = encode_value(&vf, val, &e, path, err);
		if (rc == 0)
			put_bytes(b, f->num, e.buf ? e.buf : "", e.len);
		jv_free(val);
		kop_buf_release(&e);
	}
	free(keys);
	return rc;
}

/*
 * Message mi from JSON obj (consumed; null for the zero message) as Go's
 * Marshal writes it: every non-pointer scalar (its zero when absent), every
 * non-pointer message (empty when absent), pointers, slices and maps when set.
 */
static int encode_msg(unsigned mi, jv obj, struct kop_buf *b, const char *path, char *err)
{
	const struct kproto_msg *m = &kproto_msgs[mi];
	int rc = 0;

	if (jv_get_kind(obj) != JV_KIND_OBJECT && jv_get_kind(obj) != JV_KIND_NULL) {
		jv_free(obj);
		return enc_fail(err, path, "want an object");
	}
	for (size_t i = 0; rc == 0 && i < m->nfields; i++) {
		const struct kproto_field *f = &m->fields[i];
		jv v = f->flags & KP_INLINE ? jv_copy(obj) :
		       jv_get_kind(obj) == JV_KIND_OBJECT ? jv_object_get(jv_copy(obj), jv_string(f->json)) : jv_null();
		struct kop_buf sb = KOP_BUF_INIT;
		const char *sub;

		kop_buf_addf(&sb, "%s%s%s", path, *path && *f->json ? "." : "", f->json);
		sub = sb.buf;
		if (!jv_is_valid(v))
			v = jv_null();
		if (f->flags & KP_MAP) {
			if (jv_get_kind(v) != JV_KIND_NULL)
				rc = encode_map(f, v, b, sub, err);
		} else if (f->flags & KP_REP) {
			if (jv_get_kind(v) == JV_KIND_ARRAY) {
				jv_array_foreach(v, j, e) {
					if (rc == 0 && jv_get_kind(e) != JV_KIND_NULL)
						rc = encode_value(f, e, b, sub, err);
					jv_free(e);
				}
			} else if (jv_get_kind(v) != JV_KIND_NULL) {
				rc = enc_fail(err, sub, "want an array");
			}
		} else if (jv_get_kind(v) != JV_KIND_NULL) {
			rc = encode_value(f, v, b, sub, err);
		} else if (f->flags & KP_PTR) {
			;	/* nil */
		} else if (f->type == KP_MSG) {
			if (kproto_msgs[f->msg].special == KP_PLAIN) {
				struct kop_buf z = KOP_BUF_INIT;

				rc = encode_msg(f->msg, jv_null(), &z, sub, err);
				put_bytes(b, f->num, z.buf ? z.buf : "", z.len);
				kop_buf_release(&z);
			} else if (kproto_msgs[f->msg].special == KP_TIME || kproto_msgs[f->msg].special == KP_MICROTIME ||
				   kproto_msgs[f->msg].special == KP_RAW || kproto_msgs[f->msg].special == KP_ITEMS) {
				put_bytes(b, f->num, "", 0);	/* zero time, nil raw */
			} else {
				struct kop_buf z = KOP_BUF_INIT;
				jv zero = kproto_msgs[f->msg].special == KP_DURATION ? jv_string("0s") :
					  kproto_msgs[f->msg].special == KP_QUANTITY ? jv_string("0") : jv_number(0);

				rc = encode_special(&kproto_msgs[f->msg], zero, &z, sub, err);
				put_bytes(b, f->num, z.buf ? z.buf : "", z.len);
				kop_buf_release(&z);
				jv_free(zero);
			}
		} else if (f->type != KP_BYTES) {
			jv z = zero_scalar(f->type);

			rc = encode_value(f, z, b, sub, err);
			jv_free(z);
		}
		jv_free(v);
		kop_buf_release(&sb);
	}
	jv_free(obj);
	return rc;
}

int kproto_encode(jv obj, struct kop_buf *out, char *err)
{
	jv av = jv_get_kind(obj) == JV_KIND_OBJECT ? jv_object_get(jv_copy(obj), jv_string("apiVersion")) : jv_invalid();
	jv kind = jv_get_kind(obj) == JV_KIND_OBJECT ? jv_object_get(jv_copy(obj), jv_string("kind")) : jv_invalid();
	struct kop_buf tm = KOP_BUF_INIT, raw = KOP_BUF_INIT;
	int mi = -1, rc;

	if (jv_get_kind(av) == JV_KIND_STRING && jv_get_kind(kind) == JV_KIND_STRING)
		mi = kproto_kind_msg(jv_string_value(av), jv_string_value(kind));
	if (mi < 0) {
		rc = kop_error(err, "no protobuf message for apiVersion %s kind %s",
			       jv_get_kind(av) == JV_KIND_STRING ? jv_string_value(av) : "(none)",
			       jv_get_kind(kind) == JV_KIND_STRING ? jv_string_value(kind) : "(none)");
		goto out;
	}
	if ((rc = encode_msg((unsigned)mi, jv_copy(obj), &raw, "", err)) < 0)
		goto out;
	put_bytes(&tm, 1, jv_string_value(av), (size_t)jv_string_length_bytes(jv_copy(av)));
	put_bytes(&tm, 2, jv_string_value(kind), (size_t)jv_string_length_bytes(jv_copy(kind)));
	kop_buf_add(out, "k8s\0", 4);
	put_bytes(out, 1, tm.buf, tm.len);
	put_bytes(out, 2, raw.buf ? raw.buf : "", raw.len);
	put_bytes(out, 3, "", 0);
	put_bytes(out, 4, "", 0);
out:
	kop_buf_release(&tm);
	kop_buf_release(&raw);
	jv_free(av);
	jv_free(kind);
	jv_free(obj);
	return rc;
}
