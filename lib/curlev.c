/*
 * A curl multi handle run by its sockets' events (curlev.h): curl says which
 * sockets it waits on (an epoll set kept here) and when its timer is due;
 * kop_curlev_run hands curl the sockets epoll found ready and the timer once
 * due, so that a wakeup costs what is ready, not what is open.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include "kop.h"
#include "curlev.h"
#include "banned.h"

/* (a socket curl waits on with no epoll set to hold it: run as curl_multi_perform, every 50 ms at most) */
#define BROKEN_POLL_MS 50

static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct kop_curlev *ev = userp;
	struct epoll_event e;

	(void)easy;
	(void)socketp;
	if (what == CURL_POLL_REMOVE) {
		/* (curl may have closed it already, which took it out of the set) */
		epoll_ctl(ev->epfd, EPOLL_CTL_DEL, s, NULL);
		return 0;
	}
	memset(&e, 0, sizeof(e));
	e.events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
	e.data.fd = s;
	if (!ev->broken && epoll_ctl(ev->epfd, EPOLL_CTL_MOD, s, &e) < 0 &&
	    (errno != ENOENT || epoll_ctl(ev->epfd, EPOLL_CTL_ADD, s, &e) < 0)) {
		ev->broken = 1;
		ev->broken_errno = errno;
	}
	return 0;
}

static int on_timer(CURLM *multi, long timeout_ms, void *userp)
{
	struct kop_curlev *ev = userp;

	(void)multi;
	ev->due = timeout_ms < 0 ? -1 : kop_mono_ms() + timeout_ms;
	ev->timer_calls++;
	return 0;
}

int kop_curlev_init(struct kop_curlev *ev, CURLM *multi, char *err)
{
	memset(ev, 0, sizeof(*ev));
	ev->multi = multi;
	ev->due = -1;
	ev->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (ev->epfd < 0)
		return kop_error(err, "unable to create an epoll set: %s", strerror(errno));
	curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, on_socket);
	curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, ev);
	curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, on_timer);
	curl_multi_setopt(multi, CURLMOPT_TIMERDATA, ev);
	return 0;
}

void kop_curlev_free(struct kop_curlev *ev)
{
	if (ev->epfd >= 0)
		close(ev->epfd);
	ev->epfd = -1;
	ev->multi = NULL;
}

int kop_curlev_fd(const struct kop_curlev *ev)
{
	/* (broken: the set no longer follows curl's sockets, and one left writable would wake
	 * every poll at once; kop_curlev_timeout's 50 ms paces curl_multi_perform instead) */
	return ev->broken ? -1 : ev->epfd;
}

int64_t kop_curlev_timeout(const struct kop_curlev *ev, int64_t now)
{
	int64_t t = ev->due < 0 ? -1 : ev->due <= now ? 0 : ev->due - now;

	if (ev->broken && (t < 0 || t > BROKEN_POLL_MS))
		t = BROKEN_POLL_MS;
	return t;
}

void kop_curlev_run(struct kop_curlev *ev, int64_t now)
{
	struct epoll_event ready[64];
	int n, i, running;

	if (ev->broken) {
		curl_multi_perform(ev->multi, &running);
		return;
	}
	n = epoll_wait(ev->epfd, ready, (int)(sizeof(ready) / sizeof(ready[0])), 0);
	for (i = 0; i < n; i++) {
		uint32_t e = ready[i].events;
		/* (an error or hang-up is read, as curl's own poll does, so that the transfer fails with
		 * what the read says rather than a bare CURL_CSELECT_ERR) */
		int flags = (e & (EPOLLIN | EPOLLHUP | EPOLLERR) ? CURL_CSELECT_IN : 0) |
			    (e & EPOLLOUT ? CURL_CSELECT_OUT : 0);

		curl_multi_socket_action(ev->multi, ready[i].data.fd, flags, &running);
	}
	if (ev->due >= 0 && now >= ev->due) {
		unsigned calls = ev->timer_calls;

		curl_multi_socket_action(ev->multi, CURL_SOCKET_TIMEOUT, 0, &running);
		/* curl tells of its timer only when it changes: one it found not quite due yet (its
		 * clock is finer than ours) is asked again in a millisecond */
		if (ev->timer_calls == calls)
			ev->due = kop_mono_ms() + 1;
	}
}
