/*
 * What one reconcile reads: the live objects it parses (struct rctx) and
 * the program's input built from the view (.related, .aggregates, .children,
 * .errors). The view itself is view.c's.
 */
#include <stdlib.h>
#include <string.h>
#include "ireconcile.h"
#include "banned.h"

void parsed_free(void *v)
{
	jv *j = v;

	jv_free(*j);
	free(j);
}

/* The parsed live object, whole (borrowed from the context); fingerprinted if o->fp. */
static jv live_of(struct rctx *c, const struct obj *o)
{
	jv *j = kop_hmap_get(&c->live, o->key);

	if (!j) {
		j = kop_malloc(sizeof(*j));
		*j = parse_obj(o);
		kop_hmap_put(&c->live, o->key, j);
	}
	return *j;
}

/* Whether the live object o holds every field of desired (borrowed). */
int live_holds(struct rctx *c, const struct obj *o, jv desired)
{
	return o->fp ? kop_json_subset_fp(desired, live_of(c, o)) : kop_json_subset(desired, live_of(c, o));
}

/* o is known to hold the desired object of digest d as it is now (struct obj's match). */
void match_set(struct obj *o, const unsigned char *d)
{
	o->match_ok = 1;
	memcpy(o->match, d, sizeof(o->match));
	memcpy(o->match_sdig, o->sdig, sizeof(o->match_sdig));
}

/* Whether o was seen to hold the desired object of digest d and has not changed since but for its status. */
int match_holds(const struct obj *o, const unsigned char *d)
{
	return o->match_ok && !memcmp(o->match, d, sizeof(o->match)) && !memcmp(o->match_sdig, o->sdig, sizeof(o->sdig));
}

/*
 * A resourceVersion as a number, 0 when it is not one (it is opaque to
 * clients: kube-apiserver's are etcd's revisions, all different, and so are
 * ksim's; another server's that are not numbers are never compared so).
 */
uint64_t rv_number(const char *rv)
{
	uint64_t n = 0;

	if (!rv || !*rv || *rv == '0')
		return 0;
	for (; *rv; rv++) {
		if (*rv < '0' || *rv > '9' || n > (UINT64_MAX - 9) / 10)
			return 0;
		n = n * 10 + (uint64_t)(*rv - '0');
	}
	return n;
}

/* The live object as the program sees it (borrowed from the context). */
jv view_of(struct rctx *c, const struct obj *o)
{
	jv *j;

	if (!o->vtext)
		return live_of(c, o);
	if (!(j = kop_hmap_get(&c->view, o->key))) {
		j = kop_malloc(sizeof(*j));
		*j = parse_view(o);
		kop_hmap_put(&c->view, o->key, j);
	}
	return *j;
}

jv build_related(void)
{
	size_t it = 0, i;
	void *v;
	jv r;

	if (jv_is_valid(E.related_cache))
		return jv_copy(E.related_cache);
	r = jv_object();
	for (i = 0; i < E.prog.nkinds; i++)
		if (E.prog.kinds[i].role == KOP_ROLE_RELATED)
			r = jv_object_set(r, kop_json_key(E.prog.kinds[i].key), jv_object());
	while (kop_hmap_next(&E.related, &it, NULL, &v)) {
		struct obj *o = v;
		struct kop_buf k = KOP_BUF_INIT;
		jv group;

		if (*obj_ns(o))
			kop_buf_addf(&k, "%s/%s", obj_ns(o), obj_name(o));
		else
			kop_buf_adds(&k, obj_name(o));
		group = jv_object_get(jv_copy(r), kop_json_key(o->kind->key));
		r = jv_object_set(r, kop_json_key(o->kind->key), jv_object_set(group, kop_json_key(k.buf), parse_obj(o)));
		kop_buf_release(&k);
	}
	E.related_cache = jv_copy(r);
	return r;
}

jv build_aggs(void)
{
	size_t i;
	jv r;

	if (jv_is_valid(E.aggs_cache))
		return jv_copy(E.aggs_cache);
	r = jv_object();
	for (i = 0; i < E.prog.naggs; i++) {
		size_t it = 0;
		void *v;
		jv keys = jv_array();

		while (kop_hmap_next(&E.prims, &it, NULL, &v)) {
			struct prim *p = v;

			if (p->obj && p->agg[i])
				keys = jv_array_append(keys, jv_string(p->key));
		}
		r = jv_object_set(r, kop_json_key(E.prog.aggs[i].name), jv_sort(keys, jv_copy(keys)));
	}
	E.aggs_cache = jv_copy(r);
	return r;
}

/* o's key in its kind's map of .children: its name, or "ns/name" when one
 * before it in p's list has the kind and the name. */
jv child_slot(struct prim *p, const struct obj *o)
{
	const struct obj *e;

	for (e = p->children; e != o && *obj_ns(o); e = e->next)
		if (!strcmp(e->kind->key, o->kind->key) && !strcmp(obj_name(e), obj_name(o)))
			return jv_string_fmt("%s/%s", obj_ns(o), obj_name(o));
	return jv_string(obj_name(o));
}

jv build_children(struct prim *p, struct rctx *ctx)
{
	jv c = jv_copy(E.children_empty);
	struct obj *o;

	for (o = p->children; o; o = o->next) {
		jv group = jv_object_get(jv_copy(c), kop_json_key(o->kind->key));
		jv slot = child_slot(p, o);

		if (strcmp(jv_string_value(slot), obj_name(o)))
			log_warn("primary '%s': two %s named '%s'; the one in '%s' is keyed '%s'", p->key, o->kind->key,
				 obj_name(o), obj_ns(o), jv_string_value(slot));
		group = jv_object_set(group, slot, jv_copy(view_of(ctx, o)));
		c = jv_object_set(c, kop_json_key(o->kind->key), group);
	}
	return c;
}

jv errors_list(struct prim *p)
{
	jv keys = jv_keys(jv_copy(p->errors)), out = jv_array();

	jv_array_foreach(keys, i, k) {
		jv e = jv_object_get(jv_copy(p->errors), k);

		out = jv_array_append(out, jv_object_delete(e, kop_json_key(ERROR_TAG)));
	}
	jv_free(keys);
	return out;
}
