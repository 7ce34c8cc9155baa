/*
 * The feedback: kapply's and kstatus's result lines, a failed write
 * reaching the program as .errors and a retry after a backoff, and what an
 * apply's answer made (the resourceVersion its result gives).
 */
#include <stdlib.h>
#include <string.h>
#include "ireconcile.h"
#include "banned.h"

/*
 * Whether a result of an operation what, tagged tag (or NULL), answers
 * another apply than the one flight f stands for: its tag, the memo of the
 * object that apply sent (children.c), is not f's. An earlier apply's, for another desired object,
 * comes before the result of the one in flight (kapply keeps an object's
 * operations in order). A result without a tag is taken as f's.
 */
static int earlier_apply(const struct flight *f, const char *what, const char *tag)
{
	char memo[KOP_APPLIED_HEX_LEN + 1];

	if (strcmp(what, "apply") || !tag || !f->has_obj)
		return 0;
	kop_program_applied_hex(f->memo, memo);
	return strcmp(tag, memo) != 0;
}

void clear_error(struct prim *p, const char *fkey, const char *tag)
{
	jv e = jv_object_get(jv_copy(p->errors), kop_json_key(fkey));

	/* (a failure of another object's apply is kept: the program may hold back from it because of
	 * it; one without a tag cannot be told apart, and is cleared) */
	if (jv_is_valid(e) && !(tag && kop_json_cstr(e, ERROR_TAG) && strcmp(kop_json_cstr(e, ERROR_TAG), tag))) {
		p->errors = jv_object_delete(p->errors, kop_json_key(fkey));
		enqueue(p);	/* the program may want to clear what it reported */
	}
	jv_free(e);
	if (!jv_object_length(jv_copy(p->errors)))
		kop_backoff_reset(&p->backoff);
}

void handle_result(jv r, size_t lineno)
{
	const char *op = kop_json_cstr(r, "op"), *what = kop_json_cstr(r, "for"), *pkey = kop_json_cstr(r, "primary");
	const char *tag = kop_json_cstr(r, "tag");	/* (an apply's: children.c) */
	jv ref, ok;
	struct prim *p;
	char *okey = NULL, *fkey;
	struct flight *f;
	struct obj *o;

	if (!op && jv_object_has(jv_copy(r), kop_json_key("barrier"))) {
		shard_barrier(r, lineno);
		return;
	}
	if (!op || strcmp(op, "result")) {
		jv_free(r);
		return;	/* anything else passes by */
	}
	if (!what || !pkey) {
		log_warn("feedback line %zu: a result without \"for\" or \"primary\"; skipped", lineno);
		jv_free(r);
		return;
	}
	ref = jv_object_get(jv_copy(r), kop_json_key("ref"));
	ok = jv_object_get(jv_copy(r), kop_json_key("ok"));
	p = prim_get(pkey, 0);
	if (!strcmp(what, "event")) {
		if (jv_get_kind(ok) != JV_KIND_TRUE)
			log_warn("unable to record an event for '%s': %s", pkey,
				 kop_json_cstr(r, "message") ? kop_json_cstr(r, "message") : "(no message)");
		goto out;
	}
	if (!p)
		goto out;
	if (!strcmp(what, "status")) {
		fkey = join2("status", p->key);
	} else {
		const char *av = kop_json_cstr(ref, "apiVersion"), *kind = kop_json_cstr(ref, "kind");
		const char *ns = kop_json_cstr(ref, "namespace"), *name = kop_json_cstr(ref, "name");

		if (!av || !kind || !name) {
			log_warn("feedback line %zu: a result without \"ref\"; skipped", lineno);
			goto out;
		}
		okey = obj_key(av, kind, ns, name);
		fkey = join2(what, okey);
	}
	f = kop_hmap_get(&E.flights, fkey);
	if (f && earlier_apply(f, what, tag)) {
		/* (neither its success nor its failure is the one in flight's: that one's comes) */
		log_debug("feedback line %zu: the result of an earlier apply of '%s' than the one in flight; skipped",
			  lineno, okey);
		free(fkey);
		goto out;
	}
	if (!f && jv_get_kind(ok) != JV_KIND_TRUE && !strcmp(what, "apply") && tag) {
		/* No apply of the object is in flight: a later one was seen held (the
		 * watch came before this result), or the object went or is no longer
		 * desired. The failure says nothing of what is desired now. */
		log_debug("feedback line %zu: the failure of an apply of '%s' no longer in flight; skipped", lineno,
			  okey);
		free(fkey);
		goto out;
	}
	if (jv_get_kind(ok) == JV_KIND_TRUE) {
		if (f) {
			const char *rv = kop_json_cstr(r, "resourceVersion");

			f->acked = 1;
			f->failed = 0;	/* (an earlier send of the same object may have failed) */
			free(f->answer_rv);
			f->answer_rv = NULL;
			/* What the apply made, when the result is that of an apply of the very
			 * object in flight (tagged with its memo: not an earlier one's). A dry
			 * run's is what the write would have made: nothing was. */
			if (!strcmp(what, "apply") && f->has_obj && tag && rv && *rv &&
			    !kop_json_cstr(r, "dryRun")) {
				f->answer_rv = kop_strdup(rv);
				log_debug("feedback line %zu: the apply of '%s' answered with resourceVersion %s",
					  lineno, okey, rv);
				if ((o = kop_hmap_get(&E.objs, okey)))
					flight_apply_seen(o);	/* (the watch came first) */
			}
		}
		clear_error(p, fkey, tag);
	} else {
		jv e = jv_object_set(jv_object(), kop_json_key("op"), jv_string(what));
		static const char *const fields[] = { "code", "reason", "message" };
		size_t i;
		int64_t now = kop_mono_ms();

		e = jv_object_set(e, kop_json_key("ref"), jv_copy(ref));
		for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
			jv x = jv_object_get(jv_copy(r), kop_json_key(fields[i]));

			e = jv_object_set(e, kop_json_key(fields[i]), jv_is_valid(x) ? x : jv_null());
		}
		if (tag)	/* which object's apply it was (clear_error); not the program's */
			e = jv_object_set(e, kop_json_key(ERROR_TAG), jv_string(tag));
		p->errors = jv_object_set(p->errors, kop_json_key(fkey), e);
		if (!strcmp(what, "status"))
			p->status_at = 0;	/* none of ours written: the next waits for no interval */
		if (f) {
			flight_unseen_clear(f);
			f->failed = 1;
			f->retry_at = now + kop_backoff_next(&p->backoff);
			schedule(p, f->retry_at);
		}
		enqueue(p);
	}
	free(fkey);
out:
	free(okey);
	jv_free(ref);
	jv_free(ok);
	jv_free(r);
}

void drop_result(jv r, size_t lineno)
{
	(void)lineno;
	jv_free(r);
}
