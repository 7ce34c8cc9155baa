/*
 * Metrics: the stages' stats lines read and kept (a gone stage's counters
 * folded into the base, so totals never go down), the supervisor's own
 * series, and the Prometheus text of it all. Serving it is http.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "iot-operator.h"
#include "banned.h"

static int valid_name(const char *s, int colon)
{
	const char *p;

	if (!*s || (*s >= '0' && *s <= '9'))
		return 0;
	for (p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
		      (colon && *p == ':')))
			return 0;
	return 1;
}

/* "name{k="v",...}" with sorted, escaped labels; NULL when a name is not valid. Caller frees. */
static char *series_key(const char *name, jv labels)
{
	struct kop_buf b = KOP_BUF_INIT;
	jv keys;
	int i, n, first = 1;

	if (!valid_name(name, 1))
		return NULL;
	kop_buf_addf(&b, "%s{", name);
	if (jv_get_kind(labels) == JV_KIND_OBJECT) {
		keys = jv_keys(jv_copy(labels));
		n = jv_array_length(jv_copy(keys));
		for (i = 0; i < n; i++) {
			jv k = jv_array_get(jv_copy(keys), i), v = jv_object_get(jv_copy(labels), jv_copy(k));
			const char *s;

			if (!valid_name(jv_string_value(k), 0) || jv_get_kind(v) != JV_KIND_STRING) {
				jv_free(k);
				jv_free(v);
				continue;
			}
			kop_buf_addf(&b, "%s%s=\"", first ? "" : ",", jv_string_value(k));
			for (s = jv_string_value(v); *s; s++) {
				if (*s == '\\' || *s == '"')
					kop_buf_addf(&b, "\\%c", *s);
				else if (*s == '\n')
					kop_buf_adds(&b, "\\n");
				else
					kop_buf_add(&b, s, 1);
			}
			kop_buf_adds(&b, "\"");
			first = 0;
			jv_free(k);
			jv_free(v);
		}
		jv_free(keys);
	}
	kop_buf_adds(&b, "}");
	return kop_buf_detach(&b, NULL);
}

/* Adds (or, for a gauge with set, replaces) a series in obj; consumes obj and labels. */
static jv series_put(jv obj, const char *name, const char *type, jv labels, double value, int set)
{
	char *key = series_key(name, labels);
	jv cur;

	if (!key) {
		jv_free(labels);
		return obj;
	}
	cur = jv_object_get(jv_copy(obj), jv_string(key));
	if (jv_get_kind(cur) == JV_KIND_OBJECT && !set) {
		jv old = jv_object_get(jv_copy(cur), jv_string("value"));

		value += jv_get_kind(old) == JV_KIND_NUMBER ? jv_number_value(old) : 0;
		jv_free(old);
	}
	jv_free(cur);
	cur = JV_OBJECT(jv_string("name"), jv_string(name), jv_string("type"), jv_string(type),
			jv_string("labels"), labels, jv_string("value"), jv_number(value));
	obj = jv_object_set(obj, jv_string(key), cur);
	free(key);
	return obj;
}

/* The supervisor's own counter (locks mu). */
void metric_own_add(const char *name, jv labels, double delta)
{
	pthread_mutex_lock(&sup.mu);
	sup.base = series_put(sup.base, name, "counter", labels, delta, 0);
	pthread_mutex_unlock(&sup.mu);
}

/* A stats line from a stage: {"metrics":[{"name","type","labels","value"},...]}; mu held. */
static void stage_stats_line(size_t slot, const char *line, size_t len)
{
	jv v = jv_parse_sized(line, (int)len), arr, note, series = jv_object();
	char key[32];
	int i, n;

	if (jv_get_kind(v) != JV_KIND_OBJECT) {
		jv_free(v);
		jv_free(series);
		return;
	}
	note = jv_object_get(jv_copy(v), jv_string("note"));
	arr = jv_object_get(v, jv_string("metrics"));
	n = jv_get_kind(arr) == JV_KIND_ARRAY ? jv_array_length(jv_copy(arr)) : 0;
	for (i = 0; i < n; i++) {
		jv m = jv_array_get(jv_copy(arr), i);
		jv name = jv_get_kind(m) == JV_KIND_OBJECT ? jv_object_get(jv_copy(m), jv_string("name")) : jv_null();
		jv type = jv_get_kind(m) == JV_KIND_OBJECT ? jv_object_get(jv_copy(m), jv_string("type")) : jv_null();
		jv val = jv_get_kind(m) == JV_KIND_OBJECT ? jv_object_get(jv_copy(m), jv_string("value")) : jv_null();
		jv labels = jv_get_kind(m) == JV_KIND_OBJECT ? jv_object_get(jv_copy(m), jv_string("labels")) : jv_null();

		/* (ireconcile's last barrier back: pipeline_shrink) */
		if (jv_get_kind(name) == JV_KIND_STRING && jv_get_kind(val) == JV_KIND_NUMBER &&
		    !strcmp(jv_string_value(name), "ireconcile_barrier") && slot < sup.nst &&
		    !strcmp(sup.st[slot].name, "ireconcile"))
			sup.barrier_seen = jv_number_value(val);
		if (jv_get_kind(name) == JV_KIND_STRING && jv_get_kind(val) == JV_KIND_NUMBER)
			series = series_put(series, jv_string_value(name),
					    jv_get_kind(type) == JV_KIND_STRING &&
					    !strcmp(jv_string_value(type), "gauge") ? "gauge" : "counter",
					    labels, jv_number_value(val), 1);
		else
			jv_free(labels);
		jv_free(name);
		jv_free(type);
		jv_free(val);
		jv_free(m);
	}
	jv_free(arr);
	snprintf(key, sizeof(key), "%zu", slot);
	sup.live = jv_object_set(sup.live, jv_string(key), series);
	if (jv_get_kind(note) == JV_KIND_STRING && jv_string_length_bytes(jv_copy(note)) > 0 && slot < sup.nst)
		sup.notes = jv_object_set(sup.notes, jv_string(key),
					  jv_string_fmt("%s: %s", sup.st[slot].name, jv_string_value(note)));
	else
		sup.notes = jv_object_delete(sup.notes, jv_string(key));
	jv_free(note);
}

static long long statm_rss(pid_t pid)
{
	char path[64], buf[128];
	long long size = 0, rss = 0;
	FILE *f;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/statm");
	if (!(f = fopen(path, "r")))
		return -1;
	if (!fgets(buf, sizeof(buf), f) || sscanf(buf, "%lld %lld", &size, &rss) != 2)
		rss = -1;
	fclose(f);
	return rss < 0 ? -1 : rss * sysconf(_SC_PAGESIZE);
}

/* utime + stime of a process in seconds, -1 when unknown. */
static double proc_cpu(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "r")))
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* The command name may hold spaces; the fields after it start at the last ')'. */
	if (!(p = strrchr(buf, ')')) ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static const char *metric_help(const char *name)
{
	static const char *const help[][2] = {
		{ "controller_runtime_reconcile_total", "Total number of reconciliations per controller" },
		{ "controller_runtime_reconcile_errors_total", "Total number of reconciliation errors per controller" },
		{ "workqueue_depth", "Current depth of workqueue" },
		{ "rest_client_requests_total", "Number of HTTP requests, partitioned by status code and method" },
		{ "iot_operator_stage_restarts_total", "Pipeline restarts caused by each stage ending" },
		{ "leader_election_master_status", "1 when this replica is the leader of the lease name, 0 otherwise" },
		{ "process_resident_memory_bytes", "Resident memory size of the supervisor in bytes" },
		{ "process_cpu_seconds_total", "Total user and system CPU time of the supervisor in seconds" },
		{ "process_start_time_seconds", "Start time of the process since unix epoch in seconds" },
		{ "iot_operator_stage_resident_memory_bytes", "Resident memory size of each running stage in bytes" },
		{ "iot_operator_stage_cpu_seconds_total", "CPU time of each running stage in seconds" },
		{ "iot_operator_ready", "1 when /readyz answers 200" },
		{ "iot_operator_shard_ranges", "Ranges the instances are sharded into (--shards)" },
		{ "iot_operator_shard_range_held", "1 when this replica holds the Lease of the range" },
		{ "iot_operator_shard_ranges_held", "Ranges this replica holds" },
		{ "iot_operator_shard_ranges_target", "This replica's share of the ranges, as its last read of the Leases says" },
		{ "iot_operator_shard_members", "Replicas seen live by this one's last read of the Leases" },
	};
	size_t i;

	for (i = 0; i < sizeof(help) / sizeof(help[0]); i++)
		if (!strcmp(help[i][0], name))
			return help[i][1];
	return NULL;
}

/*
 * Adds the series of series (consumed) to all (consumed), the same series of
 * two stages summing up; only the counters when counters_only.
 */
static jv series_add_all(jv all, jv series, int counters_only)
{
	if (jv_get_kind(series) != JV_KIND_OBJECT) {
		jv_free(series);
		return all;
	}
	jv_object_foreach(series, k, m) {
		jv name = jv_object_get(jv_copy(m), jv_string("name"));
		jv type = jv_object_get(jv_copy(m), jv_string("type"));
		jv val = jv_object_get(jv_copy(m), jv_string("value"));

		if (!counters_only || !strcmp(jv_string_value(type), "counter"))
			all = series_put(all, jv_string_value(name), jv_string_value(type),
					 jv_object_get(jv_copy(m), jv_string("labels")), jv_number_value(val), 0);
		jv_free(name);
		jv_free(type);
		jv_free(val);
		jv_free(k);
		jv_free(m);
	}
	jv_free(series);
	return all;
}

/* A stage is gone: its counters join the base (so totals never go down), its gauges vanish; mu held. */
void stage_stats_fold(size_t slot)
{
	char key[32];

	snprintf(key, sizeof(key), "%zu", slot);
	sup.base = series_add_all(sup.base, jv_object_get(jv_copy(sup.live), jv_string(key)), 1);
	sup.live = jv_object_delete(sup.live, jv_string(key));
	{
		jv note = jv_object_get(jv_copy(sup.notes), jv_string(key));

		if (jv_get_kind(note) == JV_KIND_STRING)
			snprintf(sup.last_note, sizeof(sup.last_note), "%s", jv_string_value(note));
		jv_free(note);
	}
	sup.notes = jv_object_delete(sup.notes, jv_string(key));
}

/* The Prometheus text exposition of everything (takes mu). Caller frees. */
char *metrics_render(size_t *len)
{
	struct kop_buf b = KOP_BUF_INIT;
	struct rusage ru;
	jv all, keys;
	const char *why;
	char prev[256] = "", can_why[KOP_ERRLEN + 64] = "";
	int i, n, can = standby_can_lead(can_why, sizeof(can_why));
	size_t s;
	uint64_t held = 0;
	unsigned live = 0, target = 0, u;

	if (sup.shards)
		shards_figures(&held, &live, &target);	/* (takes le.mu: before sup.mu) */

	pthread_mutex_lock(&sup.mu);
	all = jv_copy(sup.base);
	jv_object_foreach(sup.live, slot, series) {
		all = series_add_all(all, series, 0);
		jv_free(slot);
	}
	for (s = 0; s < sizeof(stage_names) / sizeof(stage_names[0]); s++) {
		jv c = jv_object_get(jv_copy(sup.restarts), jv_string(stage_names[s]));

		all = series_put(all, "iot_operator_stage_restarts_total", "counter",
				 JV_OBJECT(jv_string("stage"), jv_string(stage_names[s])),
				 jv_get_kind(c) == JV_KIND_NUMBER ? jv_number_value(c) : 0, 1);
		jv_free(c);
	}
	if (sup.shards) {
		char nn[12];

		all = series_put(all, "iot_operator_shard_ranges", "gauge", jv_object(), sup.shards, 1);
		all = series_put(all, "iot_operator_shard_ranges_held", "gauge", jv_object(),
				 __builtin_popcountll(held), 1);
		all = series_put(all, "iot_operator_shard_ranges_target", "gauge", jv_object(), target, 1);
		all = series_put(all, "iot_operator_shard_members", "gauge", jv_object(), live, 1);
		for (u = 0; u < sup.shards; u++) {
			snprintf(nn, sizeof(nn), "%02u", u);
			all = series_put(all, "iot_operator_shard_range_held", "gauge",
					 JV_OBJECT(jv_string("range"), jv_string(nn)), (double)(held >> u & 1), 1);
		}
	} else {
		all = series_put(all, "leader_election_master_status", "gauge",
				 JV_OBJECT(jv_string("name"), jv_string(LOCK_NAME)),
				 (!sup.leader_elect || sup.is_leader) ? 1 : 0, 1);
	}
	all = series_put(all, "iot_operator_ready", "gauge", jv_object(), ready_locked(can, can_why, &why), 1);
	for (i = 0; sup.pids[i]; i++) {
		long long rss = statm_rss(sup.pids[i]);
		double cpu = proc_cpu(sup.pids[i]);

		if (rss >= 0)
			all = series_put(all, "iot_operator_stage_resident_memory_bytes", "gauge",
					 JV_OBJECT(jv_string("stage"), jv_string(sup.pid_names[i])), (double)rss, 0);
		if (cpu >= 0)
			all = series_put(all, "iot_operator_stage_cpu_seconds_total", "counter",
					 JV_OBJECT(jv_string("stage"), jv_string(sup.pid_names[i])), cpu, 0);
	}
	pthread_mutex_unlock(&sup.mu);

	all = series_put(all, "process_resident_memory_bytes", "gauge", jv_object(), (double)statm_rss(0), 1);
	getrusage(RUSAGE_SELF, &ru);
	all = series_put(all, "process_cpu_seconds_total", "counter", jv_object(),
			 (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
			 ru.ru_stime.tv_usec / 1e6, 1);
	all = series_put(all, "process_start_time_seconds", "gauge", jv_object(), (double)sup.start_wall_ms / 1000.0, 1);

	keys = jv_keys(jv_copy(all));
	n = jv_array_length(jv_copy(keys));
	for (i = 0; i < n; i++) {
		jv k = jv_array_get(jv_copy(keys), i), m = jv_object_get(jv_copy(all), jv_copy(k));
		jv name = jv_object_get(jv_copy(m), jv_string("name"));
		jv type = jv_object_get(jv_copy(m), jv_string("type"));
		jv val = jv_object_get(jv_copy(m), jv_string("value"));
		const char *key = jv_string_value(k), *brace = strchr(key, '{');

		if (strcmp(prev, jv_string_value(name))) {
			const char *h = metric_help(jv_string_value(name));

			if (h)
				kop_buf_addf(&b, "# HELP %s %s\n", jv_string_value(name), h);
			kop_buf_addf(&b, "# TYPE %s %s\n", jv_string_value(name), jv_string_value(type));
			snprintf(prev, sizeof(prev), "%s", jv_string_value(name));
		}
		/* An empty label set is written without braces. */
		if (brace && !strcmp(brace, "{}"))
			kop_buf_add(&b, key, (size_t)(brace - key));
		else
			kop_buf_adds(&b, key);
		kop_buf_addf(&b, " %.15g\n", jv_number_value(val));
		jv_free(k);
		jv_free(m);
		jv_free(name);
		jv_free(type);
		jv_free(val);
	}
	jv_free(keys);
	jv_free(all);
	return kop_buf_detach(&b, len);
}

void stage_read_stats(size_t slot)
{
	struct stage *s = &sup.st[slot];
	char buf[16384];
	ssize_t n;
	char *nl;

	for (;;) {
		n = read(s->stats_fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			close_fd(&s->stats_fd);
			break;
		}
		kop_buf_add(&s->stats, buf, (size_t)n);
	}
	/* Only the last complete line matters: values are cumulative. */
	if (s->stats.len && (nl = memrchr(s->stats.buf, '\n', s->stats.len))) {
		char *prev = nl > s->stats.buf ? memrchr(s->stats.buf, '\n', (size_t)(nl - s->stats.buf)) : NULL;
		const char *line = prev ? prev + 1 : s->stats.buf;

		pthread_mutex_lock(&sup.mu);
		stage_stats_line(slot, line, (size_t)(nl - line));
		pthread_mutex_unlock(&sup.mu);
		kop_buf_drop(&s->stats, (size_t)(nl + 1 - s->stats.buf));
	}
	if (s->stats.len > 1024 * 1024)
		kop_buf_reset(&s->stats);
}
