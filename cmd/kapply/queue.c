/*
 * The queue: operations on one object kept in order, objects in a Namespace
 * (or beside a RoleBinding) or of a CRD being applied held back until it is there; operations that may
 * pass written as soon as those before them are done.
 */
#include <string.h>
#include "kapply.h"
#include "banned.h"

void queue_push(struct op *op)
{
	if (queue_len == queue_cap) {
		queue_cap = queue_cap ? 2 * queue_cap : 64;
		queue = kop_realloc(queue, queue_cap * sizeof(*queue));
	}
	queue[queue_len++] = op;
}

int same(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

/*
 * Whether queue[i] must wait for an earlier operation still unfinished: one
 * on the same object, the apply of its namespace or of a RoleBinding in it, or the apply of the CRD
 * that defines its kind (until Established).
 */
int blocked(size_t i)
{
	const struct op *op = queue[i];
	size_t j;

	for (j = 0; j < i; j++) {
		const struct op *e = queue[j];

		if (e->kind == OP_PASS || e->state == ST_DONE)
			continue;
		if (same(e->key, op->key))
			return 1;
		if (e->is_namespace && same(e->name, op_ns(op)) && !op->is_namespace)
			return 1;
		/* (the rights to write the rest may come from it, as Helm orders RBAC first) */
		if (e->is_binding && same(e->ns, op_ns(op)) && !op->is_binding)
			return 1;
		if (e->crd_kind && same(e->crd_group, op->group) && same(e->crd_kind, op->kind_name))
			return 1;
	}
	return 0;
}

/* A passthrough line waits for the earlier operations of its primary (of all, without one):
 * whether e is one that holds a line of primary (NULL: none). */
static int holds_pass(const struct op *e, const char *primary)
{
	return e->kind != OP_PASS && e->state != ST_DONE &&
	       (!primary || jv_get_kind(e->primary) != JV_KIND_STRING || !strcmp(jv_string_value(e->primary), primary));
}

static int pass_blocked(size_t i)
{
	const char *primary = jv_get_kind(queue[i]->primary) == JV_KIND_STRING ? jv_string_value(queue[i]->primary) : NULL;
	size_t j;

	for (j = 0; j < i; j++)
		if (holds_pass(queue[j], primary))
			return 1;
	return 0;
}

/*
 * Whether a passthrough line of primary (NULL: none) may go at once, as
 * flush_queue would let it: no passthrough line waits before it, nor an
 * unfinished operation of its primary (of any primary, without one).
 */
int pass_free(const char *primary)
{
	size_t i;

	for (i = 0; i < queue_len; i++)
		if (queue[i]->kind == OP_PASS || holds_pass(queue[i], primary))
			return 0;
	return 1;
}

/* Writes the passthrough lines that may go, and drops finished entries. */
void flush_queue(void)
{
	size_t i, n = 0;
	int held = 0;

	for (i = 0; i < queue_len; i++) {
		struct op *op = queue[i];

		if (op->kind == OP_PASS && !held) {
			if (pass_blocked(i))
				held = 1;
			else {
				if (op->text)
					tool_write_line(op->text, op->text_len);
				else
					emit(jv_copy(op->line));
				op->state = ST_DONE;
			}
		}
	}
	for (i = 0; i < queue_len; i++) {
		if (queue[i]->state == ST_DONE)
			op_free(queue[i]);
		else
			queue[n++] = queue[i];
	}
	queue_len = n;
}
