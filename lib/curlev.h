#ifndef KOP_CURLEV_H
#define KOP_CURLEV_H

#include <stdint.h>
#include <curl/curl.h>

/*
 * A curl multi handle driven by its sockets' events (curl_multi_socket_action
 * and epoll) rather than curl_multi_perform, which visits every transfer and
 * polls each one's socket whenever any one has news: with a thousand watches
 * open, that was most of a watcher's CPU. Here only the transfers whose
 * socket is ready, or whose timer is due, are run.
 */
struct kop_curlev {
	CURLM *multi;
	int epfd;		/* the transfers' sockets; readable when one of them is ready */
	int64_t due;		/* curl's timer (monotonic ms), -1: none */
	unsigned timer_calls;	/* times curl set its timer */
	int broken;		/* a socket the epoll set refused: run as curl_multi_perform does */
	int broken_errno;	/* why */
};

/* Takes over multi's socket and timer callbacks. 0, or -1 with err. */
int kop_curlev_init(struct kop_curlev *ev, CURLM *multi, char *err);
/* After curl_multi_cleanup (which still tells of the sockets it closes). */
void kop_curlev_free(struct kop_curlev *ev);

/* A file descriptor to poll for POLLIN with the caller's own: ready when a transfer's socket is
 * (-1, which poll skips, once the set failed: then kop_curlev_timeout paces the transfers). */
int kop_curlev_fd(const struct kop_curlev *ev);

/* Milliseconds from now until curl's timer is due (0: due), -1 when it has none. */
int64_t kop_curlev_timeout(const struct kop_curlev *ev, int64_t now);

/* Runs the transfers whose socket is ready or whose timer is due (what
 * curl_multi_perform did, for them only); completed ones are then read with
 * curl_multi_info_read, as after curl_multi_perform. */
void kop_curlev_run(struct kop_curlev *ev, int64_t now);

#endif
