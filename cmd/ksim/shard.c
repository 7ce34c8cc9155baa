/*
 * The shardSelector parameter of lists and watches (KEP-5866), read as
 * kube-apiserver 1.36 reads it: only with --feature-gates
 * ShardedListAndWatch=true (otherwise an unknown parameter, ignored); an
 * empty one is absent; one it cannot parse is the plain error the server's
 * store returns, which its handlers answer as 500 with no reason.
 * Matching is lib/shard.c's; lists echo the selector (read.c).
 */
#include <stdlib.h>
#include "api.h"
#include "shard.h"
#include "banned.h"

int ksim_shard_selector(const struct ksim_request *rq, struct kop_shard_sel **out, jv *err)
{
	const char *s = query(rq, "shardSelector");
	struct kop_shard_sel *sel;
	char e[KOP_ERRLEN];

	*out = NULL;
	if (!ksim.sharded_list || !s || !*s)
		return 0;
	sel = kop_malloc(sizeof(*sel));
	if (kop_shard_parse(s, sel, e) < 0) {
		struct kop_buf b = KOP_BUF_INIT;

		free(sel);
		kop_buf_addf(&b, "invalid shard selector: %s", e);
		*err = ksim_status(500, NULL, b.buf, jv_null());	/* reason omitted: StatusReasonUnknown */
		kop_buf_release(&b);
		return -1;
	}
	*out = sel;
	return 0;
}

void ksim_shard_selector_free(struct kop_shard_sel *sel)
{
	if (sel) {
		kop_shard_free(sel);
		free(sel);
	}
}
