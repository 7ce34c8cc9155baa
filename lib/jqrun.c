/* A jq program compiled once and run per input (see jqrun.h). */
#include <stdlib.h>
#include <string.h>
#include <jq.h>
#include "jqrun.h"
#include "banned.h"

struct kop_jq {
	jq_state *jq;
	struct kop_buf msgs;	/* messages from jq's error callback since the last reset */
};

static void on_error(void *data, jv msg)
{
	struct kop_jq *q = data;
	jv s;

	if (jv_get_kind(msg) == JV_KIND_STRING) {
		s = msg;
	} else {
		s = jv_dump_string(msg, 0);
	}
	if (q->msgs.len)
		kop_buf_adds(&q->msgs, "; ");
	kop_buf_adds(&q->msgs, jv_string_value(s));
	jv_free(s);
}

/*
 * jq's messages come as "jq: error: ...\n": keep the text, on one line. For
 * a compile error (name given) runs of blanks are one, "<top-level>" is the
 * text compiled: it is said by its name, as jq names a module's file, and
 * jq's "(Unix shell quoting issues?)" hint, which no shell is behind here, goes.
 */
static const char *tidy(struct kop_buf *b, const char *name)
{
	static const char hint[] = " (Unix shell quoting issues?)";
	struct kop_buf t = KOP_BUF_INIT;
	const char *p;

	kop_buf_adds(&t, "");
	for (p = b->buf; p && *p; p++) {
		char c = *p == '\n' || (name && *p == '\t') ? ' ' : *p;

		if (name && !strncmp(p, "<top-level>", 11)) {
			kop_buf_adds(&t, name);
			p += 10;
			continue;
		}
		if (name && !strncmp(p, hint, sizeof(hint) - 1)) {
			p += sizeof(hint) - 2;
			continue;
		}
		if (name && c == ' ' && (!t.len || t.buf[t.len - 1] == ' '))
			continue;
		kop_buf_add(&t, &c, 1);
	}
	while (t.len && t.buf[t.len - 1] == ' ')
		t.buf[--t.len] = 0;
	kop_buf_release(b);
	*b = t;
	return b->buf;
}

struct kop_jq *kop_jq_compile(const char *text, const char *name, jv libdirs, jv vars, char *err)
{
	struct kop_jq *q = kop_calloc(1, sizeof(*q));

	q->jq = jq_init();
	if (!q->jq) {
		free(q);
		jv_free(libdirs);
		jv_free(vars);
		kop_error(err, "unable to compile '%s': out of memory", name);
		return NULL;
	}
	jq_set_error_cb(q->jq, on_error, q);
	if (jv_get_kind(libdirs) == JV_KIND_ARRAY)
		jq_set_attr(q->jq, jv_string("JQ_LIBRARY_PATH"), libdirs);
	else
		jv_free(libdirs);
	if (jv_get_kind(vars) != JV_KIND_OBJECT) {
		jv_free(vars);
		vars = jv_object();
	}
	if (!jq_compile_args(q->jq, text, vars)) {
		kop_error(err, "unable to compile '%s': %s", name, tidy(&q->msgs, name));
		kop_jq_free(q);
		return NULL;
	}
	kop_buf_reset(&q->msgs);
	return q;
}

void kop_jq_free(struct kop_jq *q)
{
	if (!q)
		return;
	jq_teardown(&q->jq);
	kop_buf_release(&q->msgs);
	free(q);
}

/* The text of an error value: strings as they are, anything else as JSON. */
static void error_text(jv msg, char *err, const char *what)
{
	if (jv_get_kind(msg) == JV_KIND_STRING) {
		kop_error(err, "%s%s", what, jv_string_value(msg));
		jv_free(msg);
	} else {
		jv s = jv_dump_string(msg, 0);

		kop_error(err, "%s%s", what, jv_string_value(s));
		jv_free(s);
	}
}

int kop_jq_run1(struct kop_jq *q, jv input, jv *out, char *err)
{
	jv r, more;

	kop_buf_reset(&q->msgs);
	jq_start(q->jq, input, 0);
	r = jq_next(q->jq);
	if (!jv_is_valid(r)) {
		if (jq_halted(q->jq)) {
			jv m = jq_get_error_message(q->jq);

			jv_free(r);
			if (jv_is_valid(m))
				error_text(m, err, "halted: ");
			else
				kop_error(err, "halted");
			return -1;
		}
		if (jv_invalid_has_msg(jv_copy(r))) {
			error_text(jv_invalid_get_msg(r), err, "");
			return -1;
		}
		jv_free(r);
		if (q->msgs.len)
			return kop_error(err, "%s", tidy(&q->msgs, NULL));
		return kop_error(err, "no output");
	}
	more = jq_next(q->jq);
	if (jv_is_valid(more)) {
		jv_free(more);
		jv_free(r);
		/* Drain, so the next jq_start begins clean. */
		while (jv_is_valid(more = jq_next(q->jq)))
			jv_free(more);
		jv_free(more);
		return kop_error(err, "more than one output");
	}
	if (jv_invalid_has_msg(jv_copy(more))) {
		jv_free(r);
		error_text(jv_invalid_get_msg(more), err, "");
		return -1;
	}
	jv_free(more);
	*out = r;
	return 0;
}
