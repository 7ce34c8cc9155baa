/*
 * The render worker: a process forked at the start, before the view is
 * read, that makes render answers ahead of the first pass on the second
 * core. A restarted operator's first pass renders every primary, and this
 * process is busy reading the initial lists meanwhile (cache.c, render
 * ahead): the worker is given the primaries noted (their render input as
 * JSON, a few on their way at once), answers with what render_make made of
 * each (the answer's packed text, what sync sees of it, the digests), and
 * keeps on through the first pass, which renders itself the primaries it
 * meets before the worker does. It ends once the first pass is done, so
 * that its memory is not kept; should it die or stall, the primaries it
 * held are rendered here.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "ireconcile.h"
#include "banned.h"

#define DEPTH 4			/* requests on their way at once */
#define NAME "ireconcile-rw"	/* its name (comm: ps -o comm, top, the benchmarks) */
#define MAX_DIGESTS (1u << 20)	/* an answer's desired objects, at most */
#define KEEP_BUF (1u << 20)	/* a buffer grown past this is given back once empty */
/* The reconciles of the first pass wait this long in all for the answers the worker is making
 * (a render takes milliseconds, and the pass seldom catches up with the worker); then the rest
 * of the pass renders here without waiting, and the worker is given nothing more: it runs at
 * nice 10, and on a busy machine, or stalled, it would set the pace of a pass that waits for it. */
#define SLOW_MS 250

/* A reply: this, then (ok) n digests, n status flags, the packed answer (len bytes) and what sync sees
 * of it (vlen bytes; 0: the answer itself), or (not ok) the error message (len bytes). */
struct head {
	uint32_t ok, n, len, vlen;
};

static struct {
	pid_t pid;		/* 0: none */
	int req, rep;		/* our ends of its requests and of its replies, both non-blocking */
	struct kop_buf out;	/* requests not written yet */
	struct kop_buf in;	/* replies read, the last one maybe not whole */
	struct {
		char *pkey;
		unsigned char d[KOP_JSON_DIGEST_LEN];	/* the render key it was sent under */
	} sent[DEPTH];		/* answered in order: sent[0] first */
	int nsent;
	int64_t waited;		/* ms the first pass waited for its answers */
	int slow;		/* SLOW_MS waited: none waits for it any more, nor is it given more */
	unsigned long renders;	/* answers taken */
} R = { .req = -1, .rep = -1 };

/* ---- the worker's side ---------------------------------------------------- */

static int read_full(int fd, void *buf, size_t n)
{
	char *p = buf;

	while (n) {
		ssize_t r = read(fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static void reply_error(struct kop_buf *b, const char *msg)
{
	struct head h = { 0, 0, (uint32_t)strlen(msg), 0 };

	kop_buf_add(b, &h, sizeof(h));
	kop_buf_add(b, msg, h.len);
}

/* Reads requests until their end, answering each: the worker's life. */
static void serve(int req, int rep)
{
	struct kop_buf in = KOP_BUF_INIT, out = KOP_BUF_INIT;
	uint32_t len;

	while (read_full(req, &len, sizeof(len)) == 0 && len <= MAX_LINE) {
		char err[KOP_ERRLEN];
		int64_t us = 0;
		struct rmade m;
		jv v;

		in.len = 0;
		kop_buf_grow(&in, (size_t)len + 1);
		if (read_full(req, in.buf, len) < 0)
			break;
		out.len = 0;
		v = kop_json_read(in.buf, len);
		if (!jv_is_valid(v)) {
			jv_free(v);
			reply_error(&out, "a request that is no JSON");
		} else if (render_make(v, &m, &us, &us, err) < 0) {
			reply_error(&out, err);
		} else {
			/* (what this process reads back is at most MAX_LINE: a longer answer is
			 * rendered there, and fails there, where it is said) */
			struct head h = { 1, (uint32_t)m.n, 0, 0 };
			size_t flen, vlen = 0;
			char *full = render_packed(m.out, &flen);
			char *view = jv_is_valid(m.view) ? kop_json_dump_len(jv_copy(m.view), &vlen) : NULL;

			if (flen > MAX_LINE || vlen > MAX_LINE || (size_t)m.n > MAX_DIGESTS) {
				reply_error(&out, "an answer too large to pass on");
			} else {
				h.len = (uint32_t)flen;
				h.vlen = (uint32_t)vlen;
				kop_buf_add(&out, &h, sizeof(h));
				if (m.n) {
					kop_buf_add(&out, m.dig, (size_t)m.n * sizeof(*m.dig));
					kop_buf_add(&out, m.stat, (size_t)m.n);
				}
				kop_buf_add(&out, full, flen);
				if (view)
					kop_buf_add(&out, view, vlen);
			}
			free(full);
			free(view);
			jv_free(m.out);
			if (jv_is_valid(m.view))
				jv_free(m.view);
			free(m.dig);
			free(m.stat);
		}
		if (kop_write_all(rep, out.buf, out.len) < 0)
			break;
		if (in.cap > KEEP_BUF)
			kop_buf_release(&in);
		if (out.cap > KEEP_BUF)
			kop_buf_release(&out);
	}
	_exit(0);	/* (nothing of the engine's to flush or free: it is the other process's) */
}

/* ---- this side ------------------------------------------------------------ */

/* The worker started (a program with a render program only); without one, everything is rendered
 * here. Before any thread: the child of a fork has only the thread that forked. */
void worker_start(void)
{
	int rq[2], rp[2];
	pid_t parent = getpid(), pid;

	if (!E.prog.render)
		return;
	if (pipe2(rq, O_CLOEXEC) < 0)
		goto fail;
	if (pipe2(rp, O_CLOEXEC) < 0) {
		close(rq[0]);
		close(rq[1]);
		goto fail;
	}
	pid = fork();
	if (pid < 0) {
		close(rq[0]);
		close(rq[1]);
		close(rp[0]);
		close(rp[1]);
		goto fail;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		close(rq[1]);
		close(rp[0]);
		/* (it ends with this process, however that ends) */
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		(void)prctl(PR_SET_NAME, NAME);
		/* (the spare time of the cores: while the lists come in, the API
		 * server's, kwatch's and this process's work comes first) */
		errno = 0;
		if (nice(10) == -1 && errno)
			log_debug("render worker: unable to lower its priority: %s", strerror(errno));
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		if (null >= 0) {
			/* (stdout is kapply's: nothing of the worker's goes there) */
			(void)dup2(null, 0);
			(void)dup2(null, 1);
			if (null > 1)
				close(null);
		}
		serve(rq[0], rp[1]);
	}
	close(rq[0]);
	close(rp[1]);
	(void)fcntl(rq[1], F_SETFL, O_NONBLOCK);
	(void)fcntl(rp[0], F_SETFL, O_NONBLOCK);
	R.pid = pid;
	R.req = rq[1];
	R.rep = rp[0];
	log_debug("render worker %ld started", (long)pid);
	return;
fail:
	log_warn("unable to start the render worker: %s; rendering in this process alone", strerror(errno));
}

/* Its replies' fd, to poll; -1 when there is no worker. */
int worker_fd(void)
{
	return R.pid ? R.rep : -1;
}

/* Its requests' fd, to poll for room while some are not written yet; -1 otherwise. */
int worker_req_fd(void)
{
	return R.pid && R.out.len ? R.req : -1;
}

unsigned long worker_renders(void)
{
	return R.renders;
}

/* The worker gone (why: what went wrong, NULL once its work is done): killed and reaped; the
 * primaries it held are rendered here. */
static void worker_end(const char *why)
{
	int i;

	if (!R.pid)
		return;
	if (why)
		log_warn("%s; rendering in this process alone", why);
	else
		log_debug("render worker done: %lu answers taken", R.renders);
	(void)kill(R.pid, SIGKILL);
	while (waitpid(R.pid, NULL, 0) < 0 && errno == EINTR)
		;
	close(R.req);
	close(R.rep);
	R.pid = 0;
	R.req = R.rep = -1;
	for (i = 0; i < R.nsent; i++) {
		struct prim *p = prim_get(R.sent[i].pkey, 0);

		if (p && p->ahead == AHEAD_SENT) {
			p->ahead = 0;
			render_ahead(p);	/* (before the first pass, for prerender; after, the pass renders it) */
		}
		free(R.sent[i].pkey);
	}
	R.nsent = 0;
	kop_buf_release(&R.in);
	kop_buf_release(&R.out);
	if (E.synced)
		ahead_free();	/* (the first pass left them to the worker) */
}

void worker_stop(void)
{
	worker_end(NULL);
}

/* The reply at the start of R.in, whole (its head h), for R.sent[0]. */
static void take(const struct head *h)
{
	const char *at = R.in.buf + sizeof(*h);
	struct prim *p = prim_get(R.sent[0].pkey, 0);

	if (p && p->ahead == AHEAD_SENT) {
		p->ahead = 0;
		if (h->ok) {
			struct rmade m = { jv_invalid(), jv_invalid(), (int)h->n, NULL, NULL };
			const char *full = at + (size_t)h->n * (KOP_JSON_DIGEST_LEN + 1);
			int r;

			if (m.n) {
				m.dig = kop_malloc((size_t)m.n * sizeof(*m.dig));
				memcpy(m.dig, at, (size_t)m.n * sizeof(*m.dig));
				m.stat = kop_malloc((size_t)m.n);
				memcpy(m.stat, at + (size_t)m.n * sizeof(*m.dig), (size_t)m.n);
			}
			r = render_take(p, R.sent[0].d, &m, full, h->len, h->vlen ? full + h->len : NULL, h->vlen);
			if (r > 0) {
				R.renders++;
				log_debug("primary '%s': rendered ahead of the first pass by the render worker", p->key);
			} else if (r == 0) {
				render_ahead(p);	/* (its input changed: made again; after the first pass, by it) */
			}
			free(m.dig);
			free(m.stat);
		} else {
			/* (the first pass renders it again, and says why) */
			log_debug("primary '%s': the render worker's render failed: %.*s", p->key, (int)h->len, at);
		}
	}
	free(R.sent[0].pkey);
	memmove(R.sent, R.sent + 1, (size_t)(R.nsent - 1) * sizeof(R.sent[0]));
	R.nsent--;
}

/* The worker's replies that have come, taken. */
static void worker_read(void)
{
	char why[KOP_ERRLEN] = "";

	while (R.pid) {
		ssize_t n;

		kop_buf_grow(&R.in, 65536);
		n = read(R.rep, R.in.buf + R.in.len, R.in.cap - R.in.len);
		if (n > 0) {
			R.in.len += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			snprintf(why, sizeof(why), "the render worker ended before its work was done");
		else if (errno != EAGAIN)
			snprintf(why, sizeof(why), "unable to read the render worker's answers: %s", strerror(errno));
		break;
	}
	while (R.pid && R.in.len >= sizeof(struct head)) {
		struct head h;
		size_t need;

		memcpy(&h, R.in.buf, sizeof(h));
		if (!R.nsent || h.n > MAX_DIGESTS || h.len > MAX_LINE || h.vlen > MAX_LINE) {
			worker_end("the render worker answered what was not asked");
			return;
		}
		need = sizeof(h) + (h.ok ? (size_t)h.n * (KOP_JSON_DIGEST_LEN + 1) + h.vlen : 0) + h.len;
		if (R.in.len < need)
			break;
		take(&h);
		kop_buf_drop(&R.in, need);
	}
	if (R.pid && R.in.cap > KEEP_BUF && !R.in.len)
		kop_buf_release(&R.in);
	if (*why)
		worker_end(why);
}

/* What requests wait, written as far as the pipe takes them. */
static void flush_requests(void)
{
	while (R.pid && R.out.len) {
		ssize_t n = write(R.req, R.out.buf, R.out.len);

		if (n > 0) {
			kop_buf_drop(&R.out, (size_t)n);
		} else if (n < 0 && errno == EAGAIN) {
			return;	/* (the rest once it has read: worker_req_fd) */
		} else if (!(n < 0 && errno == EINTR)) {
			char why[KOP_ERRLEN];

			snprintf(why, sizeof(why), "unable to write to the render worker: %s",
				 n < 0 ? strerror(errno) : "nothing written");
			worker_end(why);
			return;
		}
	}
	if (R.out.cap > KEEP_BUF)
		kop_buf_release(&R.out);
}

/*
 * The worker given the next primaries noted, up to DEPTH on their way. It
 * is stopped once the first pass is over (nothing left queued: what it is
 * still making is for no reconcile that waits), or has nothing more for it.
 */
static int first_pass_over(void)
{
	return E.synced && (!E.qhead || (!R.nsent && (!E.nahead || R.slow)));
}

static void worker_feed(void)
{
	unsigned char d[KOP_JSON_DIGEST_LEN];
	struct prim *p;
	jv in;

	if (R.pid && first_pass_over()) {
		worker_stop();
		return;
	}
	while (R.pid && !R.slow && R.nsent < DEPTH && (p = ahead_next(d, &in))) {
		size_t len;
		char *text = kop_json_dump_len(render_input_parent(p, in), &len);
		uint32_t n = (uint32_t)len;

		if (len > MAX_LINE) {
			free(text);	/* (not ahead: the first pass renders it, and says what is wrong with it) */
			continue;
		}
		kop_buf_add(&R.out, &n, sizeof(n));
		kop_buf_add(&R.out, text, len);
		free(text);
		R.sent[R.nsent].pkey = kop_strdup(p->key);
		memcpy(R.sent[R.nsent].d, d, sizeof(d));
		R.nsent++;
		p->ahead = AHEAD_SENT;
	}
	flush_requests();
	if (R.pid && first_pass_over())
		worker_stop();
}

/* The primaries the worker holds queued, in the order it answers them (first_pass_enqueue). */
void worker_enqueue_sent(void)
{
	int i;

	for (i = 0; i < R.nsent; i++) {
		struct prim *p = prim_get(R.sent[i].pkey, 0);

		if (p && p->obj && p->ahead == AHEAD_SENT)
			enqueue(p);
	}
}

/* Between the reconciles of a pass, and the reads of a burst of input: its answers taken, and more sent. */
void worker_tend(void)
{
	if (!R.pid)
		return;
	worker_read();
	worker_feed();
}

/* p's answer, if the worker is making it now (the first sent, not answered yet), waited for: a
 * reconcile of the first pass needs it. One still waiting its turn is rendered here (the worker
 * runs at a lower priority), and so is p once the pass has waited SLOW_MS in all. */
void worker_wait(struct prim *p)
{
	int64_t start = kop_mono_ms(), until = start + SLOW_MS - R.waited;

	if (R.slow || !R.nsent || strcmp(R.sent[0].pkey, p->key))
		return;
	while (R.pid && p->ahead == AHEAD_SENT) {
		/* (what is not written of the requests yet is, meanwhile: p's may be among them) */
		struct pollfd pfd[2] = { { R.rep, POLLIN, 0 }, { R.req, POLLOUT, 0 } };
		int64_t left = until - kop_mono_ms();

		if (left <= 0) {
			R.slow = 1;
			log_info("the first pass has waited %d ms for the render worker: it renders without "
				 "waiting for it from now on", SLOW_MS);
			break;
		}
		if (poll(pfd, R.out.len ? 2 : 1, (int)left) < 0 && errno != EINTR) {
			char why[KOP_ERRLEN];

			snprintf(why, sizeof(why), "unable to wait for the render worker: %s", strerror(errno));
			worker_end(why);
			break;
		}
		flush_requests();
		worker_read();
	}
	R.waited += kop_mono_ms() - start;
}
