/*
 * --data DIR: state that survives a kill -9. Every committed write (API or
 * controller) is appended, as one JSON line {"rv","type","gr","object"}, to
 * DIR/wal.jsonl; http.c calls ksim_persist_sync() before it answers, which
 * writes what is queued and fdatasyncs it, so an acknowledged write is on
 * disk. Concurrent requests share one fdatasync (group commit): whoever
 * takes the sync lock writes everything queued so far, and the others find
 * their write already covered.
 *
 * At start the log is replayed through ksim_store_commit() in order, so the
 * objects, their resourceVersions, the counter and the watch history come
 * back as they were; a torn last line (killed mid-write) is cut off. Any
 * other line that is not a record following the ones before it makes ksim
 * refuse to start (exit 100), the file untouched, as etcd does with a
 * damaged WAL: serving without those writes would lose them silently. When
 * the log holds many more writes than live objects, it is rewritten as a
 * snapshot: every object as an ADDED record at its own resourceVersion, in
 * order, then {"rv":N,"type":"COUNTER"}, which sets the counter and, like
 * an etcd compaction, makes older resourceVersions expire (410).
 *
 * Watchers may see a write before it is on disk (controller writes are
 * synced by a flusher thread every 20 ms, API writes before their answer).
 * So that such a resourceVersion, lost in a crash, is never given to
 * another write, the counter skips ahead by min(1000, --history / 2) after
 * a replay: a client resuming from a version it saw still gets every later
 * event.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "jsonl.h"
#include "sim.h"
#include "banned.h"

const char *persist_dir;

static int fd = -1;
static struct kop_buf pending;		/* under ksim.lock */
static uint64_t pending_rv;		/* under ksim.lock */
static int loading;			/* under ksim.lock */
static pthread_mutex_t sync_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t synced_rv;		/* under sync_lock */
static pthread_t flusher;
static int flusher_running, stop_flusher;	/* stop_flusher under ksim.lock */

static void *flush_loop(void *arg)
{
	(void)arg;
	for (;;) {
		struct timespec ts = { 0, 20 * 1000000L };
		int stop;

		nanosleep(&ts, NULL);
		ksim_lock();
		stop = stop_flusher;
		ksim_unlock();
		if (stop)
			return NULL;
		ksim_persist_sync();
	}
}

void ksim_persist_record(const char *gr, int type, jv obj)
{
	jv rec, s;

	if (fd < 0 || loading)
		return;
	rec = JV_OBJECT(jv_string("rv"), jv_number((double)ksim.rv), jv_string("type"),
			jv_string(ksim_event_names[type]), jv_string("gr"), jv_string(gr), jv_string("object"),
			jv_copy(obj));
	s = jv_dump_string(rec, 0);
	kop_buf_adds(&pending, jv_string_value(s));
	kop_buf_add(&pending, "\n", 1);
	jv_free(s);
	pending_rv = ksim.rv;
}

void ksim_persist_sync(void)
{
	uint64_t target, upto;
	struct kop_buf out = KOP_BUF_INIT;
	off_t end;

	if (fd < 0)
		return;
	ksim_lock();
	target = pending_rv;
	ksim_unlock();
	pthread_mutex_lock(&sync_lock);
	if (synced_rv >= target) {
		pthread_mutex_unlock(&sync_lock);
		return;
	}
	ksim_lock();
	out = pending;
	pending = (struct kop_buf)KOP_BUF_INIT;
	upto = pending_rv;
	ksim_unlock();
	end = lseek(fd, 0, SEEK_END);
	if ((out.len && kop_write_all(fd, out.buf, out.len) < 0) || fdatasync(fd) < 0) {
		/*
		 * Cut what may have been half written, or a start would find a
		 * damaged line before later records and refuse, and queue the
		 * records again for the next sync.
		 */
		log_error("unable to write '%s/wal.jsonl': %s", persist_dir, strerror(errno));
		if (end >= 0 && ftruncate(fd, end) < 0)
			log_error("unable to truncate '%s/wal.jsonl': %s", persist_dir, strerror(errno));
		ksim_lock();
		kop_buf_add(&out, pending.buf, pending.len);
		kop_buf_release(&pending);
		pending = out;
		out = (struct kop_buf)KOP_BUF_INIT;
		ksim_unlock();
	} else {
		synced_rv = upto;
	}
	pthread_mutex_unlock(&sync_lock);
	kop_buf_release(&out);
}

/*
 * Replays one record (lock held; rec consumed): 0, or -1 with *why (static
 * text) when it is not a record that can follow the ones before it.
 */
static int replay(jv rec, const char **why)
{
	jv rvj, obj, old;
	const char *type, *gr, *name;
	double rvd;
	uint64_t rv;
	int deleted, ret = -1;

	if (jv_get_kind(rec) != JV_KIND_OBJECT) {
		*why = "not a JSON object";
		jv_free(rec);
		return -1;
	}
	rvj = jv_object_get(jv_copy(rec), jv_string("rv"));
	obj = jv_object_get(jv_copy(rec), jv_string("object"));
	type = ksim_str(rec, "type");
	gr = ksim_str(rec, "gr");
	name = ksim_str(obj, "metadata.name");
	rvd = jv_get_kind(rvj) == JV_KIND_NUMBER ? jv_number_value(rvj) : -1;
	if (!(rvd >= 1 && rvd <= 9007199254740992.0 && rvd == (double)(uint64_t)rvd)) {
		*why = "no resourceVersion \"rv\" (a positive integer)";
		goto out;
	}
	rv = (uint64_t)rvd;
	if (type && !strcmp(type, "COUNTER")) {
		if (rv < ksim.rv) {
			*why = "a COUNTER behind the resourceVersions before it";
			goto out;
		}
		ksim.rv = ksim.compacted = rv;
		ret = 0;
		goto out;
	}
	if (!type || (strcmp(type, "ADDED") && strcmp(type, "MODIFIED") && strcmp(type, "DELETED")) || !gr ||
	    !*gr || jv_get_kind(obj) != JV_KIND_OBJECT || !name) {
		*why = "not a record: \"type\", \"gr\" or \"object\" (with metadata.name) missing or wrong";
		goto out;
	}
	if (rv <= ksim.rv) {
		*why = "its resourceVersion is not after the one before it (a line repeated or out of order?)";
		goto out;
	}
	deleted = !strcmp(type, "DELETED");
	old = ksim_store_get(gr, ksim_str(obj, "metadata.namespace"), name);
	old = jv_is_valid(old) ? jv_copy(old) : jv_null();
	if (deleted && jv_get_kind(old) == JV_KIND_NULL) {
		*why = "it deletes an object that is not there";
		jv_free(old);
		goto out;
	}
	ksim.rv = rv - 1;
	if (!strcmp(gr, "customresourcedefinitions.apiextensions.k8s.io"))
		ksim_types_crd_changed(obj, deleted);	/* borrows obj */
	if (deleted) {
		jv_free(ksim_store_commit(gr, old, jv_null()));
	} else {
		jv_free(ksim_store_commit(gr, old, obj));
		obj = jv_null();
	}
	ret = 0;
out:
	jv_free(rvj);
	jv_free(obj);
	jv_free(rec);
	return ret;
}

/*
 * Appends the first bytes of a line for a log message: printable ASCII as
 * it is, anything else as \xNN, so that no raw byte of a damaged file
 * reaches the log; cut after 60 bytes.
 */
static void add_excerpt(struct kop_buf *b, const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n && i < 60; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c >= 0x20 && c < 0x7f && c != '\\')
			kop_buf_add(b, s + i, 1);
		else
			kop_buf_addf(b, "\\x%02x", c);
	}
	if (n > 60)
		kop_buf_adds(b, "...");
}

/*
 * Parses and replays line lineno (lock held); 0, or -1 with what is wrong in
 * *why: "line N, column C: MESSAGE" when it is not JSON, else "line N is not
 * a valid record: REASON".
 */
static int replay_line(const char *line, size_t n, size_t lineno, struct kop_buf *why)
{
	jv rec;
	const char *reason = NULL;

	if (n > INT_MAX) {
		kop_buf_addf(why, "line %zu is not a valid record: line too long", lineno);
		return -1;
	}
	rec = jv_parse_sized(line, (int)n);
	if (!jv_is_valid(rec)) {
		char m[256], place[KOP_ERRLEN];

		/* (without the raw line; jq's "at line 1, column C" counted in the line) */
		kop_json_parse_error(rec, m, sizeof(m));
		kop_buf_adds(why, kop_json_parser_error(m, line, n, lineno, place, sizeof(place)));
		return -1;
	}
	if (replay(rec, &reason) < 0) {
		kop_buf_addf(why, "line %zu is not a valid record: %s", lineno, reason);
		return -1;
	}
	return 0;
}

static int every_object(const char *gr, jv obj, void *data)
{
	(void)gr;
	(void)obj;
	(void)data;
	return 1;
}

/* Rewrites the log as a snapshot of the store (lock held); 0 or -1. */
static int snapshot(const char *path)
{
	struct kop_buf tmp = KOP_BUF_INIT, out = KOP_BUF_INIT;
	jv all = ksim_store_select(every_object, NULL), keys = jv_array(), sorted, s;
	int tfd, ret = 0;

	jv_array_foreach(all, i, pair) {
		jv obj = jv_array_get(pair, 1);
		const char *rv = ksim_str(obj, "metadata.resourceVersion");

		keys = jv_array_append(keys, jv_number(rv ? strtod(rv, NULL) : 0));
		jv_free(obj);
	}
	sorted = jv_sort(all, keys);
	jv_array_foreach(sorted, i, pair) {
		jv gr = jv_array_get(jv_copy(pair), 0), obj = jv_array_get(pair, 1);
		const char *rv = ksim_str(obj, "metadata.resourceVersion");

		s = jv_dump_string(JV_OBJECT(jv_string("rv"), jv_number(rv ? strtod(rv, NULL) : 0), jv_string("type"),
					     jv_string("ADDED"), jv_string("gr"), gr, jv_string("object"), obj),
				   0);
		kop_buf_adds(&out, jv_string_value(s));
		kop_buf_add(&out, "\n", 1);
		jv_free(s);
	}
	jv_free(sorted);
	kop_buf_addf(&out, "{\"rv\":%llu,\"type\":\"COUNTER\"}\n", (unsigned long long)ksim.rv);
	kop_buf_addf(&tmp, "%s.tmp", path);
	tfd = open(tmp.buf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (tfd < 0 || kop_write_all(tfd, out.buf, out.len) < 0 || fsync(tfd) < 0 || close(tfd) < 0 ||
	    rename(tmp.buf, path) < 0) {
		log_warn("unable to rewrite '%s' as a snapshot: %s", path, strerror(errno));
		unlink(tmp.buf);
		ret = -1;
	} else {
		ksim.compacted = ksim.rv;
	}
	kop_buf_release(&tmp);
	kop_buf_release(&out);
	return ret;
}

void persist_load(void)
{
	struct kop_buf path = KOP_BUF_INIT;
	char *data = NULL, err[KOP_ERRLEN];
	size_t len = 0, off = 0, good = 0, n = 0, line = 0, bad = 0;

	if (!persist_dir)
		return;
	if (mkdir(persist_dir, 0700) < 0 && errno != EEXIST)
		die(KOP_EXIT_TEMP, "unable to create '%s': %s", persist_dir, strerror(errno));
	kop_buf_addf(&path, "%s/wal.jsonl", persist_dir);
	if (access(path.buf, F_OK) == 0 && kop_read_file(path.buf, (size_t)1 << 34, &data, &len, err) < 0)
		die(KOP_EXIT_TEMP, "%s", err);
	ksim_lock();
	loading = 1;
	while (off < len) {
		char *nl = memchr(data + off, '\n', len - off);
		struct kop_buf why = KOP_BUF_INIT;

		if (!nl)
			break;	/* a torn last line */
		line++;
		if (replay_line(data + off, (size_t)(nl - data) - off, line, &why) == 0) {
			n++;
		} else if (++bad <= 10) {
			struct kop_buf ex = KOP_BUF_INIT;

			add_excerpt(&ex, data + off, (size_t)(nl - data) - off);
			log_error("'%s': %s: \"%s\"", path.buf, why.buf, ex.buf ? ex.buf : "");
			kop_buf_release(&ex);
		}
		kop_buf_release(&why);
		off = (size_t)(nl - data) + 1;
		good = off;
	}
	if (bad) {
		/*
		 * Like etcd with a damaged WAL: refuse rather than serve a state
		 * that silently lacks writes (and append to a log that cannot be
		 * replayed again). Exit 100: starting again will not help.
		 */
		die(KOP_EXIT_PERM,
		    "'%s' is damaged: %zu of its %zu lines are not valid records (%zu replayed); refusing to start: "
		    "fix or remove those lines, or move the file away to start empty",
		    path.buf, bad, line, n);
	}
	loading = 0;
	if (n > 1000 && n > 2 * (size_t)jv_array_length(ksim_store_select(every_object, NULL)) && good == len &&
	    snapshot(path.buf) == 0) {
		log_info("'%s': %zu writes rewritten as a snapshot", path.buf, n);
		good = len = 0;	/* nothing to truncate in the new file */
	}
	if (n) {
		/* skip what watchers may have seen but the disk did not keep (see the top) */
		uint64_t gap = ksim.history / 2 < 1000 ? ksim.history / 2 : 1000;

		for (uint64_t rv = ksim.rv + 1; rv <= ksim.rv + gap; rv++)
			ksim_event_release(&ksim.ring[rv % ksim.history]);
		ksim.rv += gap;
	}
	synced_rv = pending_rv = ksim.rv;
	ksim_unlock();
	fd = open(path.buf, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		die(KOP_EXIT_TEMP, "unable to open '%s': %s", path.buf, strerror(errno));
	if (good < len && ftruncate(fd, (off_t)good) < 0)
		die(KOP_EXIT_TEMP, "unable to truncate '%s': %s", path.buf, strerror(errno));
	{
		int dfd = open(persist_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (dfd >= 0) {
			fsync(dfd);
			close(dfd);
		}
	}
	if (n)
		log_info("replayed %zu writes from '%s' (resourceVersion now %llu)", n, path.buf,
			 (unsigned long long)ksim_current_rv());
	if (pthread_create(&flusher, NULL, flush_loop, NULL) == 0)
		flusher_running = 1;
	else
		log_error("unable to start the --data flusher thread");
	free(data);
	kop_buf_release(&path);
}

void persist_close(void)
{
	if (fd < 0)
		return;
	if (flusher_running) {
		ksim_lock();
		stop_flusher = 1;
		ksim_unlock();
		pthread_join(flusher, NULL);
		flusher_running = 0;
	}
	ksim_persist_sync();
	close(fd);
	fd = -1;
	kop_buf_release(&pending);
}
