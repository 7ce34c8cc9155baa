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

/*
 * A kwatch's BOOKMARK that says it no longer reads ranges it was told of
 * (narrow_kwatch): once every kwatch has said so for all it was told, those
 * ranges leave sup.streamed, and may come back with a kwatch of their own.
 */
static int narrowed(struct stage *s, const char *line, size_t len)
{
	size_t i;
	char txt[SHARDS_TEXT];

	if (s->narrow_acked >= s->narrow_sent || !memmem(line, len, "\"kwatch/shards-removed\"", 23))
		return 0;
	s->narrow_acked++;
	if (s->retire_at && s->narrow_acked >= s->retire_at && s->pid > 0 && !s->retired) {
		/* started for ranges gained that have all left since: it reads nothing now */
		tool_logj(LOG_INFO, JV_OBJECT(jv_string("pid"), jv_number(s->pid)),
			  "a kwatch started for ranges gained reads none of them any more: stopping it");
		s->retired = 1;
		kill(s->pid, SIGTERM);
	}
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
	size_t i;
	int all = 1;

	if (sup.narrowing && narrowed(s, line, len))
		return;

	if (is_initial_end(line, len)) {
		s->bookmark = 1;
		for (i = 0; i < sup.nst; i++)
			if (!strcmp(sup.st[i].name, "kwatch") && !sup.st[i].bookmark)
				all = 0;
		if (!all || (sup.initial_sent && !sup.gain_pending))
			return;
		kop_buf_add(&sup.merged, line, len);
		kop_buf_add(&sup.merged, "\n", 1);
		if (sup.initial_sent) {
			/* (the lists of ranges added to the running pipeline: their primaries wait for it) */
			sup.gain_pending = 0;
			log_info("the lists of the ranges gained are in");
			return;
		}
		pthread_mutex_lock(&sup.mu);
		sup.initial_sent = 1;
		sup.last_note[0] = 0;
		pthread_mutex_unlock(&sup.mu);
		sup.gain_pending = 0;
		log_info("initial lists are in");
		return;
	}
	kop_buf_add(&sup.merged, line, len);
	kop_buf_add(&sup.merged, "\n", 1);
}

void kwatch_read(struct stage *s)
{
	char buf[65536];
	ssize_t n = read(s->out_fd, buf, sizeof(buf));
	size_t start = 0, i;

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
	for (i = 0; i < (size_t)n; i++) {
		if (buf[i] != '\n')
			continue;
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
