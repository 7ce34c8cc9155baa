/*
 * test-tool commands for lib/hmap.c and lib/program.c:
 *   test-tool hmap-stress [--borrow] N SEED
 *                                   N random puts/removes checked against a plain array, then all but
 *                                   a few removed and the table fit (kop_hmap_fit), then expiry
 *                                   (kop_hmap_expire); prints "ok"
 *                                   (--borrow: the map borrows its keys, each the very pointer put)
 *   test-tool json-subset [--fp] < pairs.jsonl   each line [desired, live] -> true or false
 *                                   (--fp: live fingerprinted first, compared by kop_json_subset_fp)
 *   test-tool json-fingerprint < values.jsonl   each value fingerprinted, compact, then
 *                                   "changed" or "same"
 *   test-tool json-fp-scan < values.jsonl   each line: "scan" when kop_json_fp_text_needed
 *                                   says its text may need fingerprints, else "skip"; then
 *                                   "changed" or "same" as above; exit 1 when one changed
 *                                   that the scan would have skipped
 *   test-tool program-map PROGRAM < objs.jsonl   each object -> the primary key it maps to, or null
 * Exit 0, 1 on a failed check, 2 on bad usage or input.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "kop.h"
#include "jsonl.h"
#include "hmap.h"
#include "program.h"
#include "test-tool.h"
#include "banned.h"

static int expired;

static int64_t due_left(const void *v, int64_t now)
{
	return (int64_t)(intptr_t)v - now;
}

static long expired_sum;

static void count_expired(void *v)
{
	expired++;
	expired_sum += (long)v;
}

static int cmd_hmap_stress(int argc, char **argv)
{
	struct kop_hmap m = KOP_HMAP_INIT;
	long n, keys = 997, i;
	long *ref;
	char (*tab)[32];
	int rc = 0, borrow = argc == 4 && !strcmp(argv[1], "--borrow");

	if (argc != 3 + borrow)
		return 2;
	n = atol(argv[1 + borrow]);
	srandom((unsigned)atol(argv[2 + borrow]));
	if (borrow)
		kop_hmap_borrow_keys(&m);
	ref = kop_calloc((size_t)keys, sizeof(*ref));	/* 0 = absent, else the value */
	tab = kop_calloc((size_t)keys, sizeof(*tab));	/* the keys, borrowed (their copies in turn when not) */
	for (i = 0; i < n && !rc; i++) {
		long k = random() % keys, op = random() % 3;
		char *key = tab[k];
		void *old;

		snprintf(key, sizeof(*tab), "key-%ld", k);
		if (op < 2) {
			old = kop_hmap_put(&m, key, (void *)(i + 1));
			if ((long)old != ref[k])
				rc = 1;
			ref[k] = i + 1;
		} else {
			old = kop_hmap_remove(&m, key);
			if ((long)old != ref[k])
				rc = 1;
			ref[k] = 0;
		}
		if ((long)kop_hmap_get(&m, key) != ref[k])
			rc = 1;
	}
	if (!rc) {
		size_t it = 0, seen = 0, want = 0;
		const char *key;
		void *v;

		for (i = 0; i < keys; i++)
			want += ref[i] != 0;
		while (kop_hmap_next(&m, &it, &key, &v)) {
			long k = atol(key + 4);

			seen++;
			if (ref[k] != (long)v || (borrow ? key != tab[k] : key == tab[k]))
				rc = 1;
		}
		if (seen != want || m.len != want)
			rc = 1;
	}
	/* Emptied after the burst: kop_hmap_fit gives its slots back, and what is left stays found. */
	for (i = 0; i < keys && !rc; i++) {
		if (i % 100 == 7 && ref[i])
			continue;
		if ((long)kop_hmap_remove(&m, tab[i]) != ref[i])
			rc = 1;
		ref[i] = 0;
	}
	if (!rc) {
		size_t left = m.len, cap = m.cap;
		int64_t due;

		kop_hmap_fit(&m);
		if (m.len != left || (cap > 16 && left * 8 < cap && (m.cap >= cap || m.cap < left * 4)))
			rc = 1;
		for (i = 0; i < keys; i++)
			if ((long)kop_hmap_get(&m, tab[i]) != ref[i])
				rc = 1;
		for (i = 0; i < keys; i++)
			if (ref[i] && (long)kop_hmap_remove(&m, tab[i]) != ref[i])
				rc = 1;
		kop_hmap_fit(&m);
		if (m.len || m.cap || kop_hmap_get(&m, tab[0]))
			rc = 1;
		/* kop_hmap_expire, the values as due times: those due by 80 go (each given to free_val),
		 * 1 left to the next, the table fit to the 20 left */
		for (i = 0; i < 100; i++) {
			snprintf(tab[i], sizeof(*tab), "key-%ld", i);
			kop_hmap_put(&m, tab[i], (void *)(i + 1));
		}
		expired = 0;
		expired_sum = 0;
		cap = m.cap;
		due = -1;
		if (kop_hmap_expire(&m, due_left, 80, count_expired, &due) != 1 || due != 81 || expired != 80 ||
		    expired_sum != 80 * 81 / 2 || m.len != 20 || m.cap >= cap || m.cap < 80 || kop_hmap_get(&m, tab[79]) ||
		    kop_hmap_get(&m, tab[80]) != (void *)81 || kop_hmap_get(&m, tab[99]) != (void *)100)
			rc = 1;
		/* before its due the table is not looked at: an entry due already (against the contract) stays */
		kop_hmap_put(&m, tab[0], (void *)1);
		if (kop_hmap_expire(&m, due_left, 80, count_expired, &due) != 1 || expired != 80 || m.len != 21)
			rc = 1;
		if (kop_hmap_expire(&m, due_left, 1000, count_expired, &due) != -1 || due != -1 || expired != 101 ||
		    m.len || m.cap)
			rc = 1;
		if (kop_hmap_put(&m, tab[0], (void *)1) || kop_hmap_get(&m, tab[0]) != (void *)1 || m.len != 1)
			rc = 1;
	}
	kop_hmap_release(&m, NULL);
	if (borrow != m.borrowed)
		rc = 1;
	free(ref);
	free(tab);
	puts(rc ? "mismatch" : "ok");
	return rc;
}

/* Runs fn on every JSON value of stdin. */
static int each_value(int (*fn)(jv, void *), void *data)
{
	struct kop_jsonl r;
	char err[KOP_ERRLEN];
	int rc = 0;

	kop_jsonl_init(&r, 0);
	for (;;) {
		jv v;
		int got = kop_jsonl_next(&r, &v, NULL, err);

		if (got < 0) {
			fprintf(stderr, "error: %s\n", err);
			rc = 2;
			continue;
		}
		if (got == 1) {
			if (fn(v, data))
				rc = 2;
			continue;
		}
		if (r.eof)
			break;
		if (kop_jsonl_read_fd(&r, 0) < 0)
			break;
		if (r.eof)
			kop_jsonl_eof(&r);
	}
	kop_jsonl_release(&r);
	return rc;
}

static int one_subset(jv pair, void *data)
{
	int fp = *(int *)data;

	if (jv_get_kind(pair) != JV_KIND_ARRAY || jv_array_length(jv_copy(pair)) != 2) {
		jv_free(pair);
		return 1;
	}
	{
		jv d = jv_array_get(jv_copy(pair), 0), l = jv_array_get(jv_copy(pair), 1);

		if (fp)
			l = kop_json_fingerprint(l, NULL);
		puts((fp ? kop_json_subset_fp(d, l) : kop_json_subset(d, l)) ? "true" : "false");
		jv_free(d);
		jv_free(l);
	}
	jv_free(pair);
	return 0;
}

static int cmd_json_subset(int argc, char **argv)
{
	int fp = argc == 2 && !strcmp(argv[1], "--fp");

	if (argc > 2 || (argc == 2 && !fp))
		return 2;
	return each_value(one_subset, &fp);
}

static int one_fingerprint(jv v, void *data)
{
	int changed = 0;
	char *text;

	(void)data;
	v = kop_json_fingerprint(v, &changed);
	text = kop_json_dump(v);
	printf("%s %s\n", text, changed ? "changed" : "same");
	free(text);
	return 0;
}

static int cmd_json_fingerprint(int argc, char **argv)
{
	(void)argv;
	if (argc != 1)
		return 2;
	return each_value(one_fingerprint, NULL);
}

static int one_fp_scan(const char *line, size_t n, void *data)
{
	int need = kop_json_fp_text_needed(line, n), changed = 0;
	jv v = kop_json_read(line, n);

	(void)data;
	if (!jv_is_valid(v)) {
		jv_free(v);
		return 2;
	}
	jv_free(kop_json_fingerprint(v, &changed));
	printf("%s %s\n", need ? "scan" : "skip", changed ? "changed" : "same");
	return changed && !need;
}

static int cmd_json_fp_scan(int argc, char **argv)
{
	(void)argv;
	if (argc != 1)
		return 2;
	return each_line(one_fp_scan, NULL);
}

static int one_map(jv obj, void *data)
{
	const struct kop_program *p = data;
	const char *av = NULL, *kind = NULL, *ns = "", *name = "";
	const struct kop_kind *k;
	jv a = jv_object_get(jv_copy(obj), jv_string("apiVersion")), b = jv_object_get(jv_copy(obj), jv_string("kind"));
	jv m = jv_object_get(jv_copy(obj), jv_string("metadata"));
	jv n = jv_object_get(jv_copy(m), jv_string("name")), s = jv_object_get(m, jv_string("namespace"));

	if (jv_get_kind(a) == JV_KIND_STRING)
		av = jv_string_value(a);
	if (jv_get_kind(b) == JV_KIND_STRING)
		kind = jv_string_value(b);
	if (jv_get_kind(n) == JV_KIND_STRING)
		name = jv_string_value(n);
	if (jv_get_kind(s) == JV_KIND_STRING)
		ns = jv_string_value(s);
	k = av && kind ? kop_program_find_kind(p, av, kind, ns, name) : NULL;
	if (!k || k->role == KOP_ROLE_PRIMARY || k->role == KOP_ROLE_RELATED) {
		puts("null");
	} else {
		char *owner = NULL, *key = kop_program_map(p, k->mapping, obj, &owner);

		if (key)
			printf("\"%s\"%s%s\n", key, owner ? " " : "", owner ? owner : "");
		else
			puts("null");
		free(key);
		free(owner);
	}
	jv_free(a);
	jv_free(b);
	jv_free(n);
	jv_free(s);
	jv_free(obj);
	return 0;
}

static int cmd_program_map(int argc, char **argv)
{
	struct kop_program p;
	char err[KOP_ERRLEN];
	int rc;

	if (argc != 2)
		return 2;
	if (kop_program_load(&p, argv[1], 0, err) < 0) {
		fprintf(stderr, "error: %s\n", err);
		kop_program_release(&p);
		return 2;
	}
	rc = each_value(one_map, &p);
	kop_program_release(&p);
	return rc;
}

/* Each object stamped with the applied annotation ireconcile would give it
 * as a child of the primary of uid data (fixtures of live objects). */
static int one_applied(jv obj, void *data)
{
	unsigned char objdig[KOP_JSON_DIGEST_LEN], d[KOP_JSON_DIGEST_LEN];

	kop_program_object_digest(obj, objdig);
	kop_program_applied_digest(objdig, data, d);
	kop_jsonl_write(stdout, kop_program_stamp_applied(obj, d));
	return 0;
}

static int cmd_stamp_applied(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	return each_value(one_applied, argv[1]);
}

static const struct test_cmd program_cmds[] = {
	{ "hmap-stress", cmd_hmap_stress },
	{ "json-subset", cmd_json_subset },
	{ "json-fingerprint", cmd_json_fingerprint },
	{ "json-fp-scan", cmd_json_fp_scan },
	{ "program-map", cmd_program_map },
	{ "stamp-applied", cmd_stamp_applied },
	{ NULL, NULL }
};
TEST_TOOL_REGISTER(program_cmds)
