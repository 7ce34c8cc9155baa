/*
 * test-tool watch-sim: drives lib/watch.c's state machine with canned server
 * answers, one JSON object per line on stdin, without any network:
 *
 *   {"code":200,"list":{…List…}}                a LIST page
 *   {"code":200,"stream":[event|"raw line",…]}  a watch body; "ok":false = cut, "ms":N = duration
 *   {"code":410,"status":{…Status…}}            an error answer
 *   {"code":0}                                  no answer (connection refused)
 *   {"abort":true}                              the caller gave up on the request (idle)
 *   {"narrow":"SEL"}                            the ranges of SEL leave the watch (kw_watch_narrow),
 *                                               between requests: "= narrow same|less|none objects=N"
 *
 * Before each answer it prints the request the machine made ("> verb path?query"),
 * then every emitted event ("ADDED ns/name uid rv"; with --pass-text, an event
 * handed on as its text is followed by " text=" and that text, managedFields
 * cut), then "= next" (now, backoff,
 * auth, forbidden, fatal: message). At the end "state synced=… rv=… objects=…".
 *
 * After a streaming list's failure, "= next" is followed by "(streaming list failed: fell back)"
 * or "(streaming list failed: retried)".
 *
 *   test-tool watch-sim [--no-streaming] [--watch-list=MODE] [--quiet] [--shard=SEL] [--pass-text] NAME PATH KIND
 *                       APIVERSION [LABELSEL [FIELDSEL]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kop.h"
#include "jsonl.h"
#include "watch.h"
#include "test-tool.h"
#include "banned.h"

static const char *str_at(jv obj, const char *a, const char *b, jv *hold)
{
	jv v = jv_getpath(jv_copy(obj), b ? JV_ARRAY(jv_string(a), jv_string(b)) : JV_ARRAY(jv_string(a)));

	*hold = v;
	return jv_get_kind(v) == JV_KIND_STRING ? jv_string_value(v) : "-";
}

static void print_event(void *ctx, const char *type, jv obj, const struct kw_text *text, uint64_t *memo)
{
	jv a, b, c, d;
	const char *ns = str_at(obj, "metadata", "namespace", &a);

	(void)ctx;
	(void)memo;
	printf("%s %s/%s %s %s", type, ns, str_at(obj, "metadata", "name", &b), str_at(obj, "metadata", "uid", &c),
	       str_at(obj, "metadata", "resourceVersion", &d));
	if (text)
		printf(" text=%.*s%.*s", (int)text->cut_b, text->obj, (int)(text->len - text->cut_e),
		       text->obj + text->cut_e);
	printf("\n");
	jv_free(a);
	jv_free(b);
	jv_free(c);
	jv_free(d);
	jv_free(obj);
}

static const char *const next_names[] = { "now", "backoff", "auth", "forbidden", "fatal" };

static void step(struct kw_watch *w, jv s)
{
	jv code = jv_object_get(jv_copy(s), jv_string("code"));
	long c = jv_get_kind(code) == JV_KIND_NUMBER ? (long)jv_number_value(code) : 0;
	jv x, ok = jv_object_get(jv_copy(s), jv_string("ok")), ms = jv_object_get(jv_copy(s), jv_string("ms"));
	int transport_ok = jv_get_kind(ok) != JV_KIND_FALSE;
	int64_t elapsed = jv_get_kind(ms) == JV_KIND_NUMBER ? (int64_t)jv_number_value(ms) : 5000;
	char *path = kw_watch_request(w);
	char err[KOP_ERRLEN];
	enum kw_next next;

	jv_free(code);
	jv_free(ok);
	jv_free(ms);
	printf("> %s %s\n", kw_watch_verb(w), path);
	free(path);
	x = jv_object_get(jv_copy(s), jv_string("abort"));
	if (jv_get_kind(x) == JV_KIND_TRUE) {
		jv_free(x);
		jv_free(s);
		kw_watch_abort(w);
		printf("= aborted\n");
		return;
	}
	jv_free(x);
	x = jv_object_get(jv_copy(s), jv_string("list"));
	if (jv_is_valid(x) && jv_get_kind(x) != JV_KIND_NULL) {
		if (kw_watch_list(w, x, err) < 0) {
			printf("error: %s\n", err);
			transport_ok = 0;
		}
	} else {
		jv_free(x);
	}
	x = jv_object_get(jv_copy(s), jv_string("stream"));
	if (jv_get_kind(x) == JV_KIND_ARRAY) {
		int i, n = jv_array_length(jv_copy(x));

		for (i = 0; i < n; i++) {
			jv e = jv_array_get(jv_copy(x), i);
			size_t len;	/* (a raw line may hold a NUL byte) */
			char *line = jv_get_kind(e) == JV_KIND_STRING
					     ? kop_strndup(jv_string_value(e), len = (size_t)jv_string_length_bytes(jv_copy(e)))
					     : kop_json_dump_len(jv_copy(e), &len);
			size_t half = len / 2;

			/* fed in two pieces, as chunk boundaries never align with events */
			if (kw_watch_feed(w, line, half, err) < 0 ||
			    kw_watch_feed(w, line + half, len - half, err) < 0 || kw_watch_feed(w, "\n", 1, err) < 0)
				printf("error: %s\n", err);
			free(line);
			jv_free(e);
		}
	}
	jv_free(x);
	next = kw_watch_done(w, c, transport_ok, jv_object_get(s, jv_string("status")), elapsed);
	if (w->err_code || next != KW_NEXT_NOW)
		printf("= %s: %s\n", next_names[next], kw_watch_error(w));
	else
		printf("= %s\n", next_names[next]);
	if (w->stream_failed)
		printf("(streaming list failed: %s)\n", w->streaming ? "retried" : "fell back");
}

static int cmd_watch_sim(int argc, char **argv)
{
	struct kw_watch w;
	struct kop_jsonl r;
	char err[KOP_ERRLEN];
	enum kw_watch_list mode = KW_WL_AUTO;
	int quiet = 0, bad = 0, pass_text = 0;
	const char *shard = NULL;

	for (; argc > 1 && !strncmp(argv[1], "--", 2); argc--, argv++) {
		if (!strcmp(argv[1], "--no-streaming"))
			mode = KW_WL_NEVER;
		else if (!strncmp(argv[1], "--watch-list=", 13) && kw_watch_list_parse(argv[1] + 13, &mode) == 0)
			;
		else if (!strcmp(argv[1], "--quiet"))
			quiet = 1;
		else if (!strcmp(argv[1], "--pass-text"))
			pass_text = 1;
		else if (!strncmp(argv[1], "--shard=", 8))
			shard = argv[1] + 8;
		else
			argc = 0;	/* an unknown option: the usage below */
	}
	if (argc < 5) {
		fprintf(stderr, "usage: test-tool watch-sim [--no-streaming] [--watch-list=MODE] [--quiet] [--shard=SEL] "
			"NAME PATH KIND APIVERSION [L [F]]\n");
		return 2;
	}
	kw_watch_init(&w, argv[1], argv[2], argv[3], argv[4], argc > 5 ? argv[5] : NULL, argc > 6 ? argv[6] : NULL);
	kw_watch_set_list(&w, mode);
	if (shard && kw_watch_set_shard(&w, shard, err) < 0) {
		fprintf(stderr, "test-tool watch-sim: %s\n", err);
		kw_watch_release(&w);
		return 2;
	}
	w.quiet = quiet;
	w.pass_text = pass_text;
	w.emit = print_event;
	kop_jsonl_init(&r, 0);
	for (;;) {
		jv v;
		int rc = kop_jsonl_next(&r, &v, NULL, err);

		if (rc > 0 && jv_get_kind(v) == JV_KIND_OBJECT && jv_object_has(jv_copy(v), jv_string("narrow"))) {
			static const char *const narrow_names[] = { "same", "less", "none" };
			jv sel = jv_object_get(v, jv_string("narrow"));
			struct kop_shard_sel drop;

			if (jv_get_kind(sel) != JV_KIND_STRING || kop_shard_parse(jv_string_value(sel), &drop, err) < 0) {
				printf("error: narrow: %s\n", jv_get_kind(sel) == JV_KIND_STRING ? err : "not a string");
				bad = 1;
			} else {
				enum kop_shard_cut k = kw_watch_narrow(&w, &drop);

				printf("= narrow %s objects=%zu\n", narrow_names[k], w.map.count);
				kop_shard_free(&drop);
			}
			jv_free(sel);
			continue;
		}
		if (rc > 0) {
			step(&w, v);
			fflush(stdout);
			continue;
		}
		if (rc < 0) {
			printf("error: %s\n", err);
			bad = 1;
			continue;
		}
		if (r.eof)
			break;
		if (kop_jsonl_read_fd(&r, 0) < 0)
			return 2;
	}
	printf("state synced=%d rv=%s objects=%zu streaming=%d\n", w.synced, w.rv ? w.rv : "-", w.map.count,
	       w.streaming);
	kop_jsonl_release(&r);
	kw_watch_release(&w);
	return bad;
}

static const struct test_cmd watch_cmds[] = {
	{ "watch-sim", cmd_watch_sim },
	{ NULL, NULL },
};
TEST_TOOL_REGISTER(watch_cmds)
