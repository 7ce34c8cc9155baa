/*
 * The program's answer for the children: checked, then each desired child
 * applied unless the live one already holds it or the same is in flight,
 * the unwanted ones pruned. Statuses and Events are status.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ireconcile.h"
#include "banned.h"

/* Checks the program's output; -1 with err naming what is wrong. */
int check_output(jv out, char *err)
{
	static const struct {
		const char *field;
		int kind, kind2;
	} want[] = {
		{ "children", JV_KIND_ARRAY, JV_KIND_NULL },
		{ "status", JV_KIND_OBJECT, JV_KIND_NULL },
		{ "events", JV_KIND_ARRAY, JV_KIND_NULL },
		{ "resyncAfterSeconds", JV_KIND_NUMBER, JV_KIND_NULL },
		{ "finalized", JV_KIND_TRUE, JV_KIND_FALSE },
	};
	size_t i;

	if (jv_get_kind(out) != JV_KIND_OBJECT)
		return kop_error(err, "the output is %s, not an object", jv_kind_name(jv_get_kind(out)));
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		jv v = jv_object_get(jv_copy(out), kop_json_key(want[i].field));
		int k = jv_get_kind(v);

		jv_free(v);
		if (k == JV_KIND_INVALID || k == JV_KIND_NULL || k == want[i].kind || k == want[i].kind2)
			continue;
		return kop_error(err, "'.%s' is %s", want[i].field, jv_kind_name(k));
	}
	return 0;
}

/* The first field of k's `ignore` that c (borrowed) sets, written out (a
 * static buffer), or NULL. */
static const char *sets_ignored(const struct kop_kind *k, jv c)
{
	static struct kop_buf b = KOP_BUF_INIT;
	const char *found = NULL;

	if (jv_get_kind(k->ignore) != JV_KIND_ARRAY)
		return NULL;
	jv_array_foreach(k->ignore, i, path) {
		jv v = found ? jv_null() : jv_getpath(jv_copy(c), jv_copy(path));

		if (jv_is_valid(v) && jv_get_kind(v) != JV_KIND_NULL) {
			jv one = JV_ARRAY(jv_copy(path));

			kop_buf_reset(&b);
			kop_fields_format(one, &b);	/* (borrows it) */
			jv_free(one);
			found = b.buf;
		}
		jv_free(v);
		jv_free(path);
		(void)i;
	}
	return found;
}

/* The program error of a desired object (what: "desired", "rendered") of
 * kind kind, name name, at index i ("(child 0)", or with at "" "(0)"), that
 * sets field bad its kind ignores. */
static int ignored_set(char *err, const char *what, const char *kind, const char *name, const char *at, int i,
		       const char *bad)
{
	return kop_error(err, "%s %s '%s' (%s%d) sets %s, which program '%s' says it never sets "
			 "(program.yml: ignore)", what, kind, name, at, i, bad, E.prog.name);
}

/* Program error (-1, err) when an object of the array desired (borrowed:
 * the render program's .desired) of a child kind sets a field that kind
 * `ignore`s; what: where it comes from. */
int check_ignored(jv desired, const char *what, char *err)
{
	int rc = 0;

	if (jv_get_kind(desired) != JV_KIND_ARRAY)
		return 0;
	jv_array_foreach(desired, i, c) {
		const char *name = jv_get_kind(c) == JV_KIND_OBJECT ? meta(c, "name") : NULL;
		const char *kind = name ? kop_json_cstr(c, "kind") : NULL, *av = name ? kop_json_cstr(c, "apiVersion") : NULL;
		const struct kop_kind *k = kind && av ? kop_program_find_kind(&E.prog, av, kind, meta(c, "namespace"), name)
						     : NULL;
		const char *bad = k && k->role == KOP_ROLE_CHILD ? sets_ignored(k, c) : NULL;

		if (!rc && bad)
			rc = ignored_set(err, what, kind, name, "", i, bad);
		jv_free(c);
	}
	return rc;
}

/*
 * The answer's children must each name a child object, once: one that does
 * not (no kind, apiVersion or name, not of a child kind), sets a field its
 * kind `ignore`s (the comparison would not see it) or comes twice makes
 * the whole answer a program error, before anything is applied or pruned (a
 * live child it stood for would otherwise be pruned as no longer desired).
 */
int check_children(jv out, char *err)
{
	jv children = jv_object_get(jv_copy(out), kop_json_key("children"));
	struct kop_hmap seen = KOP_HMAP_INIT;
	static int one = 1;
	int rc = 0;

	if (jv_get_kind(children) != JV_KIND_ARRAY) {
		jv_free(children);
		return 0;
	}
	jv_array_foreach(children, i, c) {
		const char *name = jv_get_kind(c) == JV_KIND_OBJECT ? meta(c, "name") : NULL;
		const char *ns = name ? meta(c, "namespace") : NULL;
		const char *kind = name ? kop_json_cstr(c, "kind") : NULL;
		const char *av = name ? kop_json_cstr(c, "apiVersion") : NULL, *bad;
		const struct kop_kind *k;
		char *key;

		if (jv_get_kind(c) != JV_KIND_OBJECT) {
			rc = kop_error(err, "desired child %d is %s, not an object", i, jv_kind_name(jv_get_kind(c)));
		} else if (!name || !*name || !kind || !av) {
			rc = kop_error(err, "desired child %d has no %s", i,
				       !name || !*name ? "metadata.name" : !kind ? "kind" : "apiVersion");
		} else if ((bad = nul_field(c))) {
			rc = kop_error(err, "desired child %d: its %s holds a NUL byte", i, bad);
		} else if (!(k = kop_program_find_kind(&E.prog, av, kind, ns, name)) || k->role != KOP_ROLE_CHILD) {
			rc = kop_error(err, "desired %s '%s' (child %d) is not of a child kind of program '%s'", kind,
				       name, i, E.prog.name);
		} else if ((bad = sets_ignored(k, c))) {
			rc = ignored_set(err, "desired", kind, name, "child ", i, bad);
		} else {
			key = obj_key(av, kind, ns, name);
			if (kop_hmap_put(&seen, key, &one))
				rc = kop_error(err, "desired %s '%s%s%s' is given twice (child %d)", kind, ns ? ns : "",
					       ns ? "/" : "", name, i);
			free(key);
		}
		jv_free(c);
		if (rc)
			break;
	}
	jv_free(children);
	kop_hmap_release(&seen, NULL);
	return rc;
}

/* Which object of rdes (the rendered .desired, borrowed) c (borrowed) is, or
 * -1; looked for at hint first (a program most often gives them back in their
 * order). */
static int rendered_index(jv rdes, jv c, int hint)
{
	int i, n = jv_array_length(jv_copy(rdes));

	if (jv_get_kind(c) != JV_KIND_OBJECT)
		return -1;
	if (hint >= 0 && hint < n && jv_identical(jv_array_get(jv_copy(rdes), hint), jv_copy(c)))
		return hint;
	for (i = 0; i < n; i++)
		if (i != hint && jv_identical(jv_array_get(jv_copy(rdes), i), jv_copy(c)))
			return i;
	return -1;
}

/* The program's answer (consumed) with its directives resolved; the children
 * it took from the rendered ones as they are (resolved already) are not
 * walked again. */
int resolve_output(jv out, jv rdes, jv *res, char *err)
{
	jv children = jv_object_get(jv_copy(out), kop_json_key("children")), done;

	if (jv_get_kind(children) != JV_KIND_ARRAY)
		return jv_free(children), kop_fn_resolve(out, res, err);
	done = jv_array();
	out = jv_object_delete(out, kop_json_key("children"));
	if (kop_fn_resolve(out, &out, err) < 0) {
		jv_free(children);
		jv_free(done);
		return -1;
	}
	jv_array_foreach(children, i, c) {
		if (rendered_index(rdes, c, i) < 0 && kop_fn_resolve(c, &c, err) < 0) {
			jv_free(children);
			jv_free(done);
			jv_free(out);
			return -1;
		}
		done = jv_array_append(done, c);
	}
	jv_free(children);
	*res = jv_object_set(out, kop_json_key("children"), done);
	return 0;
}

/* Which object of rdes (borrowed) has the kind, name and namespace of c (borrowed), or -1. */
static int rendered_match(jv rdes, jv c)
{
	const char *kind = kop_json_cstr(c, "kind"), *av = kop_json_cstr(c, "apiVersion");
	const char *name = meta(c, "name"), *ns = meta(c, "namespace");
	int i, n = jv_array_length(jv_copy(rdes)), found = -1;

	for (i = 0; i < n && found < 0; i++) {
		jv r = jv_array_get(jv_copy(rdes), i);
		const char *rk = kop_json_cstr(r, "kind"), *ra = kop_json_cstr(r, "apiVersion");
		const char *rn = meta(r, "name"), *rns = meta(r, "namespace");

		if (rk && ra && rn && !strcmp(rk, kind) && !strcmp(ra, av) && !strcmp(rn, name) &&
		    !strcmp(rns ? rns : "", ns ? ns : ""))
			found = i;
		jv_free(r);
	}
	return found;
}

/*
 * The live child (key, of kind k) is seen to hold the desired object of digest
 * d: a failure of its apply, or of its create (adopt: false; its creates carry
 * no tag, and the object holding ours, the primary's uid in it, is one it made),
 * is not reported any more: a write whose answer was lost may have landed.
 */
static void held_clear(struct prim *p, const struct kop_kind *k, const char *key, const char *fkey,
		       const unsigned char *d)
{
	char tag[KOP_APPLIED_HEX_LEN + 1];

	if (!jv_object_length(jv_copy(p->errors)))
		return;
	kop_program_applied_hex(d, tag);
	clear_error(p, fkey, tag);
	if (k->create_only) {
		char *ckey = join2("create", key);

		clear_error(p, ckey, NULL);
		free(ckey);
	}
}

/*
 * Applies what is desired and differs from the live object; fills desired
 * (objkey -> 1). The object applied carries KOP_APPLIED_ANNOTATION, so a
 * live object differs also when it was applied from another desired object
 * (one that set a field this one no longer sets). A child of the answer
 * (docs/writing-programs.md) is
 *  - an observed child given back as the program saw it: kept as it is;
 *  - with a render program, one of .rendered.desired as sync saw it: that
 *    object as rendered, whole; changed, but of the same kind and name:
 *    the rendered object with the changes merged in;
 *  - otherwise the object as it is.
 */
void apply_children(struct prim *p, struct rctx *ctx, jv children, jv rdes, struct kop_hmap *desired, int64_t now,
		    struct counts *n, int *held)
{
	static int one = 1;
	unsigned char d[KOP_JSON_DIGEST_LEN];
	unsigned char *hold = p->nrdig ? kop_calloc((size_t)p->nrdig, 1) : NULL;	/* rendered child j held */
	int j;

	jv_array_foreach(children, i, c) {
		const char *name = meta(c, "name"), *ns = meta(c, "namespace");
		const char *kind = kop_json_cstr(c, "kind"), *av = kop_json_cstr(c, "apiVersion");
		const struct kop_kind *k;
		char *key, *fkey;
		struct obj *live;
		jv full = jv_invalid();
		int r = -1, status;

		if (!name || !kind || !av || !(k = kop_program_find_kind(&E.prog, av, kind, ns, name)) ||
		    k->role != KOP_ROLE_CHILD) {
			jv_free(c);	/* (check_children said so already) */
			continue;
		}
		key = obj_key(av, kind, ns, name);
		live = kop_hmap_get(&E.objs, key);
		if (live && live->prim == p)
			live->status_free = 0;	/* (known below, when it is compared) */
		if (k->create_only) {
			/* (adopt: false) one not seen yet is created, so that a namespace of
			 * the same name made by anyone else is never taken over */
			fkey = join2("create", key);
			if (live) {
				flight_forget(fkey);
				free(fkey);
				fkey = join2("apply", key);
			}
		} else {
			fkey = join2("apply", key);
		}
		if (live && live->prim == p && jv_identical(jv_copy(c), jv_copy(view_of(ctx, live)))) {
			/* Given back as it was seen: kept as it is. */
			live->status_free = 1;
			kop_hmap_put(desired, key, &one);
			flight_forget(fkey);
			goto next;
		}
		{
			/* The comparison's memo key and the applied annotation: the
			 * object before stamping (known when rendered) and whom the
			 * stamp names. */
			unsigned char objdig[KOP_JSON_DIGEST_LEN];
			int m = -1;

			r = rendered_index(rdes, c, i);
			if (r < 0 && p->rview)
				m = rendered_match(rdes, c);
			if (r >= 0) {
				memcpy(objdig, p->rdig[r], KOP_JSON_DIGEST_LEN);
				status = p->rstat[r];
				if (!p->rview)
					full = jv_copy(c);	/* sync saw it whole */
			} else {
				if (m >= 0) {
					jv rf = rendered_object(p, ctx, m);

					if (jv_get_kind(rf) != JV_KIND_OBJECT) {
						/* (ctx->rfail) what sync saw is not the whole object */
						jv_free(rf);
						kop_hmap_put(desired, key, &one);
						goto next;
					}
					full = jv_object_merge_recursive(rf, jv_copy(c));
				} else {
					full = jv_copy(c);
				}
				kop_program_object_digest(full, objdig);
				status = jv_object_has(jv_copy(full), kop_json_key("status"));
			}
			if (r >= 0)
				memcpy(d, p->radig[r], sizeof(d));
			else
				kop_program_applied_digest(objdig, obj_uid(p->obj), d);
			if (live && live->prim == p)
				live->status_free = !status;
		}
		if (live && !status && match_holds(live, d)) {
			/* Seen equal before, and neither has changed since but for its status. */
			kop_hmap_put(desired, key, &one);
			flight_forget(fkey);
			held_clear(p, k, key, fkey, d);
			if (r >= 0)
				hold[r] = 1;
			goto next;
		}
		if (flight_on_way(fkey, d, live ? obj_rv(live) : "", now)) {
			/* Sent, and the live object unchanged since: what
			 * flight_check_text would say, without its text made. */
			kop_hmap_put(desired, key, &one);
			goto next;
		}
		if (!jv_is_valid(full)) {
			full = rendered_object(p, ctx, r);
			if (jv_get_kind(full) != JV_KIND_OBJECT) {
				/* (ctx->rfail) left as it is: still desired, not pruned */
				kop_hmap_put(desired, key, &one);
				goto next;
			}
		}
		full = kop_program_stamp_applied(kop_program_stamp(&E.prog, k->mapping, full, ctx->parent), d);
		if (k->create_only && live && *obj_uid(live))
			/* (adopt: false) applied to the object seen alone: one deleted and
			 * made again under its name by someone else meanwhile has another
			 * uid, and the API server refuses the write (422) */
			full = jv_setpath(full, JV_ARRAY(jv_string("metadata"), jv_string("uid")), jv_string(obj_uid(live)));
		{
			/* What does not map back could never be seen, compared or pruned. */
			char *back = kop_program_map(&E.prog, k->mapping, full, NULL);
			int ours = back && !strcmp(back, p->key);

			free(back);
			if (!ours) {
				/* (the first one named; the live object it stands for may
				 * be under another key: nothing is pruned this time) */
				if (!ctx->unmapped++)
					snprintf(ctx->unmapped_msg, sizeof(ctx->unmapped_msg),
						 "desired %s '%s%s%s' would not map back to it (another namespace than "
						 "an owner reference allows?)", kind, ns ? ns : "", ns ? "/" : "", name);
				goto next;
			}
		}
		kop_hmap_put(desired, key, &one);
		if (live && live_holds(ctx, live, full)) {
			match_set(live, d);
			flight_forget(fkey);
			held_clear(p, k, key, fkey, d);
			if (r >= 0 && !status)	/* (one with a status is compared whole every time) */
				hold[r] = 1;
		} else {
			size_t tlen;
			char *text = kop_json_dump_len(full, &tlen);

			full = jv_invalid();	/* consumed */
			if (flight_check_text(p, fkey, text, tlen, live ? obj_rv(live) : "", now)) {
				if (!live && k->create_only) {
					emit_op_text("create", p->key, NULL, text, tlen);
				} else {
					char tag[KOP_APPLIED_HEX_LEN + 1];

					/* (the result names what it answers: feedback.c) */
					kop_program_applied_hex(d, tag);
					flight_sent_object(p, fkey, d, r, status, text, tlen);
					emit_op_text("apply", p->key, tag, text, tlen);
				}
				if (!live)
					flight_mark_unseen(p, fkey);
				n->applies++;
			}
			free(text);
		}
next:
		jv_free(full);
		jv_free(c);
		free(fkey);
		free(key);
	}
	jv_free(children);
	*held = 1;
	for (j = 0; j < p->nrdig; j++)
		if (!hold[j])
			*held = 0;
	free(hold);
}

/* Deletes what p owns, is of a child kind, and is no longer desired. */
void prune(struct prim *p, struct kop_hmap *desired, int64_t now, struct counts *n)
{
	const char *puid = obj_uid(p->obj);
	struct obj *o;

	for (o = p->children; o; o = o->next) {
		const char *uid = obj_uid(o);
		char *fkey;
		jv sent;

		if (o->kind->role != KOP_ROLE_CHILD || kop_hmap_get(desired, o->key))
			continue;
		if (obj_owner_uid(o) && *puid && strcmp(obj_owner_uid(o), puid))
			continue;	/* an earlier object of the same name owns it */
		fkey = join2("delete", o->key);
		if (o->deleting || !*uid) {
			free(fkey);
			continue;	/* going already */
		}
		sent = jv_string(uid);
		if (flight_check(p, fkey, sent, obj_rv(o), now)) {
			jv line = op_line("delete", p->key);

			line = jv_object_set(line, kop_json_key("object"), ref_of(o));
			line = jv_object_set(line, kop_json_key("propagationPolicy"), jv_string("Background"));
			emit(line);
			n->deletes++;
		}
		jv_free(sent);
		free(fkey);
	}
}

/* Drops recorded failures of objects that are neither desired nor live any more. */
void tidy_errors(struct prim *p, struct kop_hmap *desired)
{
	jv keys = jv_keys(jv_copy(p->errors));

	jv_array_foreach(keys, i, k) {
		const char *s = jv_string_value(k), *bar = strchr(s, '|');
		int keep = 1;

		if (bar && (!strncmp(s, "apply|", 6) || !strncmp(s, "create|", 7)))
			keep = kop_hmap_get(desired, bar + 1) != NULL;
		else if (bar && !strncmp(s, "delete|", 7))
			keep = kop_hmap_get(&E.objs, bar + 1) != NULL;
		if (!keep)
			p->errors = jv_object_delete(p->errors, jv_copy(k));
		jv_free(k);
	}
	jv_free(keys);
}
