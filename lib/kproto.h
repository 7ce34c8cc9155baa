#ifndef KPROTO_H
#define KPROTO_H
/*
 * Kubernetes protobuf bodies (application/vnd.kubernetes.protobuf): the
 * "k8s\0" envelope around a runtime.Unknown whose raw is the kind's message.
 *
 * kproto_decode() turns one into exactly the JSON the kind's Go type
 * marshals to (the JSON body a Go client would have sent); kproto_encode()
 * does the reverse. Both walk the table of kproto_types.c, generated from
 * the kinds' generated.proto and Go types (scripts/kproto-gen.py).
 */
#include <stddef.h>
#include <stdint.h>
#include <jv.h>
#include "kop.h"

enum kproto_type { KP_STRING, KP_BYTES, KP_INT32, KP_INT64, KP_BOOL, KP_DOUBLE, KP_MSG };

enum kproto_flags {
	KP_REP = 1 << 0,	/* repeated: a JSON array (a Go slice) */
	KP_MAP = 1 << 1,	/* map<string, type>: a JSON object */
	KP_OMIT = 1 << 2,	/* json:",omitempty": a zero scalar, nil slice/map/pointer is left out */
	KP_PTR = 1 << 3,	/* a Go pointer: a zero that was sent is kept */
	KP_INLINE = 1 << 4	/* json:",inline": the message's fields are its parent's */
};

/* How a message is JSON: its fields, or what its Go type's MarshalJSON makes. */
enum kproto_special {
	KP_PLAIN,
	KP_TIME,		/* metav1.Time: RFC 3339 seconds, zero is null */
	KP_MICROTIME,		/* metav1.MicroTime: 6 fractional digits */
	KP_DURATION,		/* metav1.Duration: Go's duration string */
	KP_QUANTITY,		/* resource.Quantity: its string */
	KP_INTORSTRING,		/* intstr.IntOrString: a number or a string */
	KP_RAW,			/* runtime.RawExtension, metav1.FieldsV1: raw JSON bytes */
	KP_ITEMS,		/* a named Go slice (authentication's ExtraValue): an array of its items */
	KP_ORARRAY,		/* apiextensions' JSONSchemaPropsOrArray: the array, else the schema */
	KP_ORBOOL,		/* JSONSchemaPropsOrBool: the schema, else the boolean */
	KP_ORSTRINGS		/* JSONSchemaPropsOrStringArray: the strings, else the schema */
};

struct kproto_field {
	uint32_t num;
	uint8_t type;		/* enum kproto_type; of the values, for KP_MAP */
	uint8_t flags;		/* enum kproto_flags */
	uint16_t msg;		/* KP_MSG: index in kproto_msgs */
	const char *json;	/* "" for KP_INLINE */
};

struct kproto_msg {
	const char *name;
	uint8_t special;	/* enum kproto_special */
	uint8_t nfields;
	const struct kproto_field *fields;	/* in the Go struct's order, which is the JSON's */
};

struct kproto_kind {
	const char *api_version, *kind;
	unsigned msg;
};

extern const struct kproto_msg kproto_msgs[];
extern const struct kproto_kind kproto_kinds[];	/* ends with a NULL kind */

/* The message of a kind, or -1 when there is no table for it. */
int kproto_kind_msg(const char *api_version, const char *kind);

/*
 * A body's envelope: the typeMeta's apiVersion and kind (heap strings, ""
 * when absent) and the raw message inside it (pointing into body).
 */
int kproto_envelope(const void *body, size_t len, char **api_version, char **kind, const unsigned char **raw,
		    size_t *raw_len, char *err);

/* The JSON object of message msg (no apiVersion/kind: the caller adds them); -1 and err naming the field. */
int kproto_decode(unsigned msg, const void *data, size_t len, jv *out, char *err);

/* The whole body ("k8s\0" envelope) of a JSON object of a kind in the table; -1 and err. Consumes obj. */
int kproto_encode(jv obj, struct kop_buf *out, char *err);

#endif
