/*
 * test-tool: exposes lib/ functions to the shell tests (git's t/helper).
 *   test-tool jsonl [MAXLINE] < input    each value as a compact line; errors as "error: …"
 *   test-tool backoff BASE CAP JITTER N   N delays in ms, one per line
 *   test-tool time-parse RFC3339          seconds since the epoch
 *   test-tool json-dump-check < input     kop_json_dump against jv_dump_string on every value
 *   test-tool json-digest-cut PATH... < pairs   kop_json_digest_cut on lines in pairs
 *   test-tool json-event < events        kop_json_event on every line: type, tab, the object's text
 *                                         (its managedFields cut), or -1
 *   test-tool line-route [OWN...] < lines  kop_line_route on every line, the ops named its own:
 *                                         op, primary, barrier (tab-separated, "-" when none), 1 or -1
 *   test-tool json-verbatim < lines      kop_json_verbatim on every line: 0, or -1 (a parse says it)
 *   test-tool json-read-check [--thread] < input
 *                                         kop_json_read against jv_parse_sized on every line and value
 *   test-tool json-key-share              whose table of short strings a thread's kop_json_key
 *                                         answers from, before kop_json_key_share and after
 * Exit 0, or 1 when any input was bad.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "kop.h"
#include "jsonl.h"
#include "../fuzz/json-read-same.h"
#include "test-tool.h"
#include "banned.h"

/* All of fd, NUL-terminated, in *out (the caller frees): 0, or -1 with errno. */
int read_all_fd(int fd, char **out, size_t *len)
{
	struct kop_buf b = KOP_BUF_INIT;

	for (;;) {
		ssize_t n;

		kop_buf_grow(&b, 65536);
		n = read(fd, b.buf + b.len, b.cap - b.len - 1);
		if (n < 0) {
			kop_buf_release(&b);
			return -1;
		}
		if (n == 0)
			break;
		b.len += (size_t)n;
		b.buf[b.len] = 0;
	}
	*out = kop_buf_detach(&b, len);
	return 0;
}

static int cmd_jsonl(int argc, char **argv)
{
	struct kop_jsonl r;
	char err[KOP_ERRLEN];
	int bad = 0;

	kop_jsonl_init(&r, argc > 1 ? strtoul(argv[1], NULL, 10) : 0);
	for (;;) {
		jv v;
		size_t line;
		int rc = kop_jsonl_next(&r, &v, &line, err);

		if (rc > 0) {
			printf("%zu ", line);
			kop_jsonl_write(stdout, v);
			continue;
		}
		if (rc < 0) {
			printf("error: %s\n", err);
			bad = 1;
			continue;
		}
		if (r.eof)
			break;
		if (kop_jsonl_read_fd(&r, 0) < 0) {
			perror("read");
			return 2;
		}
	}
	kop_jsonl_release(&r);
	return bad;
}

/*
 * jsonl-feed CHUNK: stdin fed to the reader CHUNK bytes at a time, as
 * kwatch's transfers feed it (kop_jsonl_feed, then every value read, then
 * kop_jsonl_trim); prints each value, then "max-cap N" (the largest the
 * buffer grew) and "cap N" (what it holds at the end).
 */
static int cmd_jsonl_feed(int argc, char **argv)
{
	struct kop_jsonl r;
	char err[KOP_ERRLEN], *chunk;
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1024, max_cap = 0;
	ssize_t got;
	int bad = 0;

	if (!n)
		return 2;
	chunk = kop_malloc(n);
	kop_jsonl_init(&r, 0);
	while ((got = read(0, chunk, n)) > 0) {
		jv v;
		size_t line;
		int rc;

		kop_jsonl_feed(&r, chunk, (size_t)got);
		if (r.in.cap > max_cap)
			max_cap = r.in.cap;
		while ((rc = kop_jsonl_next(&r, &v, &line, err)) != 0) {
			if (rc < 0) {
				printf("error: %s\n", err);
				bad = 1;
				continue;
			}
			printf("%zu ", line);
			kop_jsonl_write(stdout, v);
		}
		kop_jsonl_trim(&r);
	}
	printf("max-cap %zu\ncap %zu\n", max_cap, r.in.cap);
	kop_jsonl_release(&r);
	free(chunk);
	return got < 0 ? 2 : bad;
}

int each_line(int (*fn)(const char *line, size_t len, void *data), void *data)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0;

	while ((n = getline(&line, &cap, stdin)) > 0) {
		int r;

		if (line[n - 1] == '\n')
			line[--n] = 0;
		if ((r = fn(line, (size_t)n, data)) > rc)
			rc = r;
	}
	free(line);
	return rc;
}

static int one_meta(const char *line, size_t n, void *data)
{
	static const char *const names[] = { "resourceVersion", "uid" };
	jv v;

	(void)data;
	if (kop_json_meta(line, n, names, 2, &v) < 0)
		printf("-1\n");
	else
		kop_jsonl_write(stdout, v);
	return 0;
}

/* json-meta: each line of stdin through kop_json_meta (resourceVersion, uid): its answer, or "-1". */
static int cmd_json_meta(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return each_line(one_meta, NULL);
}

static int one_event(const char *line, size_t n, void *data)
{
	struct kop_json_event ev;

	(void)data;
	if (kop_json_event(line, n, &ev) < 0) {
		printf("-1\n");
		return 0;
	}
	jv_free(ev.meta);
	printf("%.*s\t%.*s\t%.*s\t%.*s%.*s\n", (int)ev.type_len, ev.type, (int)ev.kind_len, ev.kind,
	       (int)ev.api_version_len, ev.api_version, (int)ev.cut_b, ev.obj, (int)(ev.obj_len - ev.cut_e),
	       ev.obj + ev.cut_e);
	return 0;
}

/* json-event: each line of stdin through kop_json_event: the type, the kind, the apiVersion,
 * then the object's text with its managedFields cut, tabs between ("-1" when it leaves the line
 * to a whole parse). */
static int cmd_json_event(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return each_line(one_event, NULL);
}

static int one_route(const char *line, size_t n, void *data)
{
	char *op, *primary;
	int barrier, rc;

	if ((rc = kop_line_route(line, n, data, &op, &primary, &barrier)) != 0) {
		printf("%d\n", rc);
		return 0;
	}
	printf("%s\t%s\t%d\n", op ? op : "-", primary ? primary : "-", barrier);
	free(op);
	free(primary);
	return 0;
}

/* line-route: each line of stdin through kop_line_route, the arguments its own ops. */
static int cmd_line_route(int argc, char **argv)
{
	(void)argc;
	return each_line(one_route, argv + 1);
}

static int one_verbatim(const char *line, size_t n, void *data)
{
	(void)data;
	printf("%d\n", kop_json_verbatim(line, n));
	return 0;
}

/* json-verbatim: each line of stdin through kop_json_verbatim. */
static int cmd_json_verbatim(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return each_line(one_verbatim, NULL);
}

static int one_elements(const char *line, size_t n, void *data)
{
	struct kop_json_span out[16];
	long max = *(const long *)data;
	int k, i;

	if ((k = kop_json_elements(line, n, out, (size_t)max)) < 0)
		printf("-1\n");
	for (i = 0; i < k; i++)
		printf("%.*s\n", (int)out[i].n, out[i].b);
	printf("--\n");
	return 0;
}

/* json-elements MAX: each line of stdin through kop_json_elements: the elements' texts,
 * one a line ("-1" when it leaves the text to a whole parse), then "--". */
static int cmd_json_elements(int argc, char **argv)
{
	long max = argc > 1 ? strtol(argv[1], NULL, 10) : 16;

	if (max < 0 || max > 16)
		return 2;
	return each_line(one_elements, &max);
}

/* json-keep FIELDS: each line of stdin, an object's text, read by
 * kop_json_keep_text ("-1" when it leaves it to a whole parse), and by a
 * whole parse and kop_json_keep ("whole: ..."), both written. */
static int one_keep(const char *line, size_t n, void *data)
{
	jv paths = *(jv *)data, v;

	if (kop_json_keep_text(line, n, paths, &v) < 0)
		printf("-1\n");
	else
		kop_jsonl_write(stdout, v);
	v = kop_json_read(line, n);
	printf("whole: ");
	if (jv_get_kind(v) == JV_KIND_OBJECT) {
		kop_jsonl_write(stdout, kop_json_keep(v, paths));
	} else {
		jv_free(v);
		printf("-\n");
	}
	return 0;
}

/* each_line(fn) given the paths of the field list argv[1] (2 when there is none). */
static int each_line_fields(int argc, char **argv, int (*fn)(const char *, size_t, void *))
{
	char err[KOP_ERRLEN];
	jv paths;

	if (argc < 2 || kop_fields_parse(argv[1], &paths, err) < 0)
		return 2;
	each_line(fn, &paths);
	jv_free(paths);
	return 0;
}

static int cmd_json_keep(int argc, char **argv)
{
	return each_line_fields(argc, argv, one_keep);
}

/* What json-pick compares of an object (v consumed): its identity and the fields kept. */
static jv picked_part(jv v, jv paths)
{
	jv ids = JV_ARRAY(JV_ARRAY(jv_string("apiVersion")), JV_ARRAY(jv_string("kind")), JV_ARRAY(jv_string("metadata")));
	jv id = kop_json_keep(jv_copy(v), ids);

	jv_free(ids);
	return JV_OBJECT(jv_string("id"), id, jv_string("keep"), kop_json_keep(v, paths));
}

/* json-pick FIELDS: each line of stdin, an object's text, read by
 * kop_json_read_pick with its identity and FIELDS named ("-1" when it leaves
 * the text to a whole parse), then by a whole parse ("whole: ..."), each
 * written as its identity and kop_json_keep of FIELDS; then read with its
 * "spec" alone passed over ("drop: ...", or "drop: -1"), and whole without
 * its spec ("whole: ..."). */
static int one_pick(const char *line, size_t n, void *data)
{
	jv paths = *(jv *)data, v, whole = jv_invalid();
	jv pick = kop_json_keep_pick(JV_OBJECT(jv_string("apiVersion"), jv_true(), jv_string("kind"), jv_true(),
					       jv_string("metadata"), jv_true()), paths);
	jv drop = JV_OBJECT(jv_string("spec"), jv_false());

	if (kop_json_read_fast(line, n, &whole) < 0)
		whole = jv_invalid();
	if (kop_json_read_pick(line, n, pick, 0, &v) < 0)
		printf("-1\n");
	else
		kop_jsonl_write(stdout, picked_part(v, paths));
	printf("whole: ");
	if (jv_get_kind(whole) == JV_KIND_OBJECT)
		kop_jsonl_write(stdout, picked_part(jv_copy(whole), paths));
	else
		printf("-\n");
	printf("drop: ");
	if (kop_json_read_pick(line, n, drop, 1, &v) < 0)
		printf("-1\n");
	else
		kop_jsonl_write(stdout, v);
	printf("whole: ");
	if (jv_get_kind(whole) == JV_KIND_OBJECT)
		kop_jsonl_write(stdout, jv_object_delete(jv_copy(whole), jv_string("spec")));
	else
		printf("-\n");
	jv_free(whole);
	jv_free(pick);
	jv_free(drop);
	return 0;
}

static int cmd_json_pick(int argc, char **argv)
{
	return each_line_fields(argc, argv, one_pick);
}

static int cmd_backoff(int argc, char **argv)
{
	struct kop_backoff b;
	int i, n;

	if (argc < 5)
		return 2;
	kop_backoff_init(&b, (unsigned)atoi(argv[1]), (unsigned)atoi(argv[2]), atof(argv[3]));
	n = atoi(argv[4]);
	for (i = 0; i < n; i++)
		printf("%u\n", kop_backoff_next(&b));
	return 0;
}

static int cmd_time_parse(int argc, char **argv)
{
	time_t t;

	if (argc < 2 || kop_time_parse(argv[1], &t) < 0)
		return 1;
	printf("%lld\n", (long long)t);
	return 0;
}

/* json-digest [--equal]: a line per JSON argument, the hex of kop_json_digest
 * (kop_json_digest_equal). */
static int cmd_json_digest(int argc, char **argv)
{
	int i, equal = argc > 1 && !strcmp(argv[1], "--equal");

	for (i = 1 + equal; i < argc; i++) {
		jv v = jv_parse(argv[i]);
		unsigned char d[KOP_JSON_DIGEST_LEN];
		size_t j;

		if (!jv_is_valid(v)) {
			jv_free(v);
			fprintf(stderr, "not JSON: %s\n", argv[i]);
			return 1;
		}
		if (equal)
			kop_json_digest_equal(v, d);
		else
			kop_json_digest(v, d);
		jv_free(v);
		for (j = 0; j < sizeof(d); j++)
			printf("%02x", d[j]);
		putchar('\n');
	}
	return 0;
}

struct cut_pair {
	jv paths;		/* arrays of keys: kop_json_spans's, and jv_delpaths's */
	char *first;		/* the pair's first line, or NULL */
	size_t first_len;
	struct kop_buf scratch;
};

/* The digest of a text cut, and its value without the paths; "-1" and invalid when it cannot say. */
static jv cut_one(struct cut_pair *c, const char *text, size_t len, unsigned char d[KOP_JSON_DIGEST_LEN], int *ok)
{
	jv v = kop_json_read(text, len);

	*ok = jv_get_kind(v) == JV_KIND_OBJECT && kop_json_digest_cut(text, len, v, c->paths, &c->scratch, d) == 0;
	if (jv_get_kind(v) != JV_KIND_OBJECT)
		return v;
	return jv_delpaths(v, jv_copy(c->paths));
}

static int one_cut(const char *line, size_t n, void *data)
{
	struct cut_pair *c = data;
	unsigned char da[KOP_JSON_DIGEST_LEN], db[KOP_JSON_DIGEST_LEN];
	int oka, okb, same;
	jv a, b;

	if (!c->first) {
		c->first = kop_strndup(line, n);
		c->first_len = n;
		return 0;
	}
	a = cut_one(c, c->first, c->first_len, da, &oka);
	b = cut_one(c, line, n, db, &okb);
	free(c->first);
	c->first = NULL;
	if (!jv_is_valid(a) || !jv_is_valid(b)) {
		jv_free(a);
		jv_free(b);
		return 2;
	}
	same = jv_equal(a, b);
	if (!oka || !okb)
		printf("-1 %s\n", same ? "equal" : "unequal");
	else
		printf("%s %s\n", memcmp(da, db, sizeof(da)) ? "differ" : "same", same ? "equal" : "unequal");
	return oka && okb && !memcmp(da, db, sizeof(da)) && !same;
}

/* json-digest-cut PATH...: stdin's lines in pairs, JSON objects' texts: whether their
 * kop_json_digest_cut without the dotted PATHs is the same ("same", "differ", or
 * "-1" when it digests the value, not the text), then whether the values without them are "equal"; exit 1
 * when one digest stood for two values. */
static int cmd_json_digest_cut(int argc, char **argv)
{
	struct cut_pair c = { jv_array(), NULL, 0, KOP_BUF_INIT };
	int i, rc;

	for (i = 1; i < argc; i++) {
		jv path = jv_array();
		char *s = kop_strdup(argv[i]), *tok, *save = NULL;

		for (tok = strtok_r(s, ".", &save); tok; tok = strtok_r(NULL, ".", &save))
			path = jv_array_append(path, jv_string(tok));
		free(s);
		c.paths = jv_array_append(c.paths, path);
	}
	rc = each_line(one_cut, &c);
	if (c.first)
		rc = 2;		/* (a line without its pair) */
	free(c.first);
	kop_buf_release(&c.scratch);
	jv_free(c.paths);
	return rc;
}

/* Whether kop_json_read and jv_parse_sized give the same of s[0..len) (0), or prints both (1). */
static int read_same(const char *s, size_t len)
{
	char *a, *b;
	int same = json_read_same(s, len, &a, &b);

	if (!same)
		printf("differs on %.*s:\n  kop_json_read  %s\n  jv_parse_sized %s\n", (int)len, s, a, b);
	free(a);
	free(b);
	return !same;
}

/*
 * json-read-check [--thread] < input: each line of the input, and the
 * compact text of each JSON value in it (a stream, as jq reads it), read by
 * kop_json_read and by jv_parse_sized; prints the count of texts, and both
 * answers where they differ (exit 1). --thread: on a thread of its own,
 * which then exits (its table of shared strings must go with it).
 */
struct read_check {
	char *in;
	size_t len, count;
	int bad;
};

static void *json_read_check(void *arg)
{
	struct read_check *c = arg;
	char *line, *nl;
	struct jv_parser *p;
	jv v;

	for (line = c->in; line < c->in + c->len; line = nl + 1) {
		nl = memchr(line, '\n', (size_t)(c->in + c->len - line));
		if (!nl)
			nl = c->in + c->len;
		c->bad |= read_same(line, (size_t)(nl - line));
		c->count++;
	}
	p = jv_parser_new(0);
	jv_parser_set_buf(p, c->in, (int)c->len, 0);
	while (jv_is_valid(v = jv_parser_next(p))) {
		size_t tlen;
		char *text = kop_json_dump_len(v, &tlen);

		c->bad |= read_same(text, tlen);
		c->count++;
		free(text);
	}
	jv_free(v);
	jv_parser_free(p);
	return NULL;
}

static int cmd_json_read_check(int argc, char **argv)
{
	struct read_check c = { NULL, 0, 0, 0 };
	int thread = argc == 2 && !strcmp(argv[1], "--thread");
	pthread_t t;

	if (argc > 2 || (argc == 2 && !thread)) {
		fprintf(stderr, "usage: test-tool json-read-check [--thread] < input\n");
		return 2;
	}
	if (read_all_fd(0, &c.in, &c.len)) {
		perror("read");
		return 2;
	}
	if (!thread)
		json_read_check(&c);
	else if ((errno = pthread_create(&t, NULL, json_read_check, &c)) || (errno = pthread_join(t, NULL))) {
		perror("pthread");
		free(c.in);
		return 2;
	}
	free(c.in);
	printf("%zu texts\n", c.count);
	return c.bad;
}

/*
 * json-key-share: "metadata" keyed on the main thread and on a thread
 * started after it, once before kop_json_key_share (each its own table:
 * "own") and once after ("shared"): one line each.
 */
static void *key_on_thread(void *arg)
{
	jv *k = arg;

	*k = kop_json_key("metadata");
	return NULL;
}

static int cmd_json_key_share(int argc, char **argv)
{
	jv mine = kop_json_key("metadata"), theirs;
	int round;
	pthread_t t;

	for (round = 0; round < 2; round++) {
		if (round)
			kop_json_key_share();
		if ((errno = pthread_create(&t, NULL, key_on_thread, &theirs)) || (errno = pthread_join(t, NULL))) {
			perror("pthread");
			jv_free(mine);
			return 2;
		}
		printf("%s\n", theirs.u.ptr == mine.u.ptr ? "shared" : "own");
		jv_free(theirs);
	}
	jv_free(mine);
	return 0;
}

/*
 * json-dump-check < input: every JSON value of the input (a stream, as jq
 * reads it) written by kop_json_dump and by libjq's jv_dump_string; prints
 * the count, and both texts of each value where they differ (exit 1).
 */
static int cmd_json_dump_check(int argc, char **argv)
{
	char *in;
	size_t len, count = 0;
	int bad = 0;
	struct jv_parser *p;
	jv v;

	if (read_all_fd(0, &in, &len)) {
		perror("read");
		return 2;
	}
	p = jv_parser_new(0);
	jv_parser_set_buf(p, in, (int)len, 0);
	while (jv_is_valid(v = jv_parser_next(p))) {
		jv s = jv_dump_string(jv_copy(v), 0);
		char *mine = kop_json_dump(v);

		count++;
		if (strlen(mine) != (size_t)jv_string_length_bytes(jv_copy(s)) || strcmp(mine, jv_string_value(s))) {
			printf("differs:\n  kop_json_dump  %s\n  jv_dump_string %s\n", mine, jv_string_value(s));
			bad = 1;
		}
		free(mine);
		jv_free(s);
	}
	if (jv_invalid_has_msg(jv_copy(v))) {
		jv msg = jv_invalid_get_msg(v);

		printf("error: %s\n", jv_string_value(msg));
		jv_free(msg);
		bad = 1;
	} else {
		jv_free(v);
	}
	jv_parser_free(p);
	free(in);
	printf("%zu values\n", count);
	return bad;
}

static const struct test_cmd builtin_cmds[] = {
	{ "jsonl", cmd_jsonl },
	{ "jsonl-feed", cmd_jsonl_feed },
	{ "json-meta", cmd_json_meta },
	{ "json-event", cmd_json_event },
	{ "line-route", cmd_line_route },
	{ "json-verbatim", cmd_json_verbatim },
	{ "json-keep", cmd_json_keep },
	{ "json-pick", cmd_json_pick },
	{ "json-elements", cmd_json_elements },
	{ "json-dump-check", cmd_json_dump_check },
	{ "json-read-check", cmd_json_read_check },
	{ "json-key-share", cmd_json_key_share },
	{ "json-digest", cmd_json_digest },
	{ "json-digest-cut", cmd_json_digest_cut },
	{ "backoff", cmd_backoff },
	{ "time-parse", cmd_time_parse },
};

struct test_cmd_list *test_cmd_lists;

int main(int argc, char **argv)
{
	size_t i;
	const struct test_cmd_list *l;
	const struct test_cmd *c;

	if (argc < 2) {
		fprintf(stderr, "usage: test-tool COMMAND [ARGS]\n");
		return 2;
	}
	for (i = 0; i < sizeof(builtin_cmds) / sizeof(builtin_cmds[0]); i++)
		if (!strcmp(argv[1], builtin_cmds[i].name))
			return builtin_cmds[i].fn(argc - 1, argv + 1);
	for (l = test_cmd_lists; l; l = l->next)
		for (c = l->cmds; c->name; c++)
			if (!strcmp(argv[1], c->name))
				return c->fn(argc - 1, argv + 1);
	fprintf(stderr, "test-tool: unknown command '%s'\n", argv[1]);
	return 2;
}
