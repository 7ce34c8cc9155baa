/*
 * The merger: kwatch's lines joined into ireconcile's stdin, the
 * initial-events-end bookmark passed on once every kwatch sent its own (and
 * again once those started for ranges gained have: pipeline_grow),
 * kwatch read no faster than ireconcile takes its lines. Stats lines are
 * metrics.c's.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include "iot-operator.h"
#include "banned.h"

static int is_initial_end(const char *line, size_t len)
{
	jv v, t, a;
	int r;

	if (!memmem(line, len, "initial-events-end", 18))
		return 0;
	v = jv_parse_sized(line, (int)len);
	if (jv_get_kind(v) != JV_KIND_OBJECT) {
		jv_free(v);
		return 0;
	}
	t = jv_object_get(jv_copy(v), jv_string("type"));
	a = jv_getpath(v, JV_ARRAY(jv_string("object"), jv_string("metadata"), jv_string("annotations"),
				  jv_string("k8s.io/initial-events-end")));
	r = jv_get_kind(t) == JV_KIND_STRING && !strcmp(jv_string_value(t), "BOOKMARK") &&
	    jv_get_kind(a) == JV_KIND_STRING && !strcmp(jv_string_value(a), "true");
	jv_free(t);
	jv_free(a);
	return r;
}

/* Whether every kwatch (but one stopped for having nothing left to read) has sent its initial state. */
static int all_listed(void)
{
	size_t i;

	for (i = 0; i < sup.nst; i++)
		if (!strcmp(sup.st[i].name, "kwatch") && !sup.st[i].bookmark && !sup.st[i].retired)
			return 0;
	return 1;
}

/*
 * Every kwatch has sent its initial state: the initial-events-end (line, len)
 * goes on to ireconcile, once for the pipeline's start and once for each
 * set of ranges gained since (pipeline_grow: their primaries wait for it).
 */
static void pass_initial_end(const char *line, size_t len)
{
	if (sup.initial_sent && !sup.gain_pending)
		return;
	kop_buf_add(&sup.merged, line, len);
	kop_buf_add(&sup.merged, "\n", 1);
	sup.gain_pending = 0;
	if (sup.initial_sent) {
		log_info("the lists of the ranges gained are in");
		return;
	}
	pthread_mutex_lock(&sup.mu);
	sup.initial_sent = 1;
	sup.last_note[0] = 0;
	pthread_mutex_unlock(&sup.mu);
	log_info("initial lists are in");
}

/*
 * A kwatch's BOOKMARK that says it no longer reads ranges it was told of
 * (narrow_kwatch; its first bytes as kwatch writes them, so that no object
 * annotated alike is taken for one): once every kwatch has said so for all
 * it was told, those ranges leave sup.streamed, and may come back with a
 * kwatch of their own. One started for ranges gained that has none left is
 * stopped, and no longer waited for.
 */
static int narrowed(struct stage *s, const char *line, size_t len)
{
	static const char head[] = "{\"type\":\"BOOKMARK\",";
	size_t i;
	char txt[SHARDS_TEXT];

	if (len < sizeof(head) - 1 || memcmp(line, head, sizeof(head) - 1) ||
	    !memmem(line, len, "\"kwatch/shards-removed\"", 23))
		return 0;
	s->narrow_acked++;
	if (s->retire_at && s->narrow_acked >= s->retire_at && s->pid > 0 && !s->retired) {
		/* started for ranges gained that have all left since: it reads nothing now */
		tool_logj(LOG_INFO, JV_OBJECT(jv_string("pid"), jv_number(s->pid)),
			  "a kwatch started for ranges gained reads none of them any more: stopping it");
		s->retired = 1;
		kill(s->pid, SIGTERM);
		if (all_listed())
			pass_initial_end(INITIAL_END, sizeof(INITIAL_END) - 1);	/* (if it was the one awaited) */
	}
	/* (a kwatch that could not be told all keeps what it was not told in sup.streamed: narrow_kwatch) */
	for (i = 0; i < sup.nst; i++)
		if (!strcmp(sup.st[i].name, "kwatch") && sup.st[i].pid > 0 && !sup.st[i].retired &&
		    sup.st[i].narrow_acked < sup.st[i].narrow_sent)
			return 1;
	if (sup.narrowing) {
		tool_logj(LOG_INFO, JV_OBJECT(jv_string("ranges"), jv_string(shards_text(sup.narrowing, txt))),
			  "ranges %s: no kwatch reads them any more", txt);
		sup.streamed &= ~sup.narrowing;
		sup.narrowing = 0;
	}
	return 1;
}

static void merge_line(struct stage *s, const char *line, size_t len)
{
	if (s->narrow_acked < s->narrow_sent && narrowed(s, line, len))
		return;
	if (is_initial_end(line, len)) {
		s->bookmark = 1;
		if (all_listed())
			pass_initial_end(line, len);
		return;
	}
	kop_buf_add(&sup.merged, line, len);
	kop_buf_add(&sup.merged, "\n", 1);
}

void kwatch_read(struct stage *s)
{
	char buf[65536];
	ssize_t n = read(s->out_fd, buf, sizeof(buf));
	size_t start = 0;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		/* EOF: a last line without a newline still counts. */
		if (s->out.len)
			merge_line(s, s->out.buf, s->out.len);
		kop_buf_reset(&s->out);
		close_fd(&s->out_fd);
		return;
	}
	while (start < (size_t)n) {
		const char *nl = memchr(buf + start, '\n', (size_t)n - start);
		size_t i;

		if (!nl)
			break;
		i = (size_t)(nl - buf);
		if (s->out.len) {
			kop_buf_add(&s->out, buf + start, i - start);
			merge_line(s, s->out.buf, s->out.len);
			kop_buf_reset(&s->out);
		} else if (i > start) {
			merge_line(s, buf + start, i - start);
		}
		start = i + 1;
	}
	if (start < (size_t)n)
		kop_buf_add(&s->out, buf + start, (size_t)n - start);
}

void merged_write(void)
{
	ssize_t n;

	if (sup.merged_fd < 0) {
		kop_buf_reset(&sup.merged);
		sup.merged_off = 0;
		return;
	}
	while (sup.merged_off < sup.merged.len) {
		n = write(sup.merged_fd, sup.merged.buf + sup.merged_off, sup.merged.len - sup.merged_off);
		if (n > 0) {
			sup.merged_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN) {
			/* ireconcile is gone: its death restarts the pipeline. */
			close_fd(&sup.merged_fd);
			kop_buf_reset(&sup.merged);
			sup.merged_off = 0;
		} else {
			/* An ireconcile always a little behind never empties the buffer:
			 * drop what it has taken, or the buffer keeps every line passed on. */
			kop_buf_drop_done(&sup.merged, &sup.merged_off, MERGE_HIGH / 4);
		}
		return;
	}
	kop_buf_reset(&sup.merged);
	sup.merged_off = 0;
}
