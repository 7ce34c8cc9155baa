#ifndef KOP_H
#define KOP_H
/*
 * What every module of lib/ and every tool shares: the exit-code table, the
 * error-buffer convention, a growable byte buffer and time helpers.
 *
 * Conventions of lib/:
 *  - lib/ never prints and never exits. A function that can fail returns -1
 *    (or NULL) and, when it takes a `char *err`, writes a one-line message of
 *    at most KOP_ERRLEN bytes there: lowercase, no full stop, the subject
 *    quoted ("unable to open '/x': No such file or directory").
 *  - Every .c file includes "banned.h" as its very last include (after all
 *    system headers), so the banned functions cannot be called; t0001 checks.
 *  - jv values follow libjq's rule: arguments are consumed, results are
 *    owned by the caller; jv_copy what you keep.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <time.h>

/* One exit-code table for every tool (docs/architecture.md, "Exit codes"). */
enum kop_exit {
	KOP_EXIT_OK = 0,	/* done */
	KOP_EXIT_NO = 1,	/* a "no" answer: kapply --diff found changes, ... */
	KOP_EXIT_PERM = 100,	/* usage, bad input, permanent API error (4xx but 408/409/429) */
	KOP_EXIT_TEMP = 111,	/* temporary: network, 5xx, 408/409/429, local I/O */
	KOP_EXIT_SIGNAL = 128	/* + n: a child was killed by signal n */
};

#define KOP_ERRLEN 512

/* snprintf into err (if non-NULL) and return -1: `return kop_error(err, "…", …);` */
int kop_error(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A growable, always NUL-terminated byte buffer (git's strbuf). */
struct kop_buf {
	char *buf;
	size_t len, cap;
};
#define KOP_BUF_INIT { NULL, 0, 0 }
void kop_buf_grow(struct kop_buf *b, size_t extra);
void kop_buf_add(struct kop_buf *b, const void *data, size_t len);
void kop_buf_adds(struct kop_buf *b, const char *s);
void kop_buf_addf(struct kop_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void kop_buf_vaddf(struct kop_buf *b, const char *fmt, va_list ap);
void kop_buf_reset(struct kop_buf *b);		/* len = 0, keeps memory */
void kop_buf_release(struct kop_buf *b);	/* frees, back to KOP_BUF_INIT */
/* Drops the first n bytes (all of them if n >= len): what was written out or read. */
void kop_buf_drop(struct kop_buf *b, size_t n);
/*
 * An output queue whose first *done bytes were written: drops them once they
 * are more than min and most of the buffer (*done is then 0), so that a
 * reader always a little behind never makes it keep all that passed.
 */
void kop_buf_drop_done(struct kop_buf *b, size_t *done, size_t min);
/* Hands the string to the caller (who frees it); b is reset to empty. */
char *kop_buf_detach(struct kop_buf *b, size_t *len);

/* Memory: allocation failure aborts, as libjq's does (there is nothing better to do). */
void *kop_malloc(size_t n);
void *kop_calloc(size_t n, size_t size);
void *kop_realloc(void *p, size_t n);
char *kop_strdup(const char *s);
char *kop_strndup(const char *s, size_t n);

/* Time. Monotonic milliseconds for timers (microseconds to measure); wall time for timestamps. */
int64_t kop_mono_ms(void);
int64_t kop_mono_us(void);
int64_t kop_wall_ms(void);
/* The time ms milliseconds from now on clock (a condition variable's deadline, pthread_cond_timedwait). */
struct timespec kop_clock_after(clockid_t clock, int64_t ms);
/* metav1.Time "2006-01-02T15:04:05Z" (buf >= 32). Returns buf. */
char *kop_time_rfc3339(char *buf, size_t len, time_t t);
/* metav1.MicroTime "2006-01-02T15:04:05.000000Z" from microseconds since the epoch (buf >= 32). */
char *kop_time_micro(char *buf, size_t len, int64_t us);
/* Parses RFC 3339 ("Z" or "+hh:mm", optional fraction) to seconds since the epoch; -1 on error. */
int kop_time_parse(const char *s, time_t *out);

/* Reads a whole file (at most max bytes) into a NUL-terminated heap buffer. */
int kop_read_file(const char *path, size_t max, char **out, size_t *len, char *err);
/* write(2) all of it, retrying on EINTR and short writes. */
int kop_write_all(int fd, const void *buf, size_t len);
/* Whether s is a DNS-1123 label (label: at most 63 of a-z, 0-9, '-', alphanumeric at
 * both ends: a namespace's name) or subdomain (253, '.' too: most objects' names). */
int kop_dns1123(const char *s, int label);
/*
 * Appends the n bytes at s quoted as Go's %q does for the ASCII range ("a\"b",
 * "nul\x00x", "\n"), the way kube-apiserver quotes a value in its messages;
 * bytes from 0x80 up (UTF-8) are copied as they are.
 */
void kop_buf_add_quoted(struct kop_buf *b, const char *s, size_t n);
/* Standard padded base64 of len bytes, a NUL-terminated heap string. */
char *kop_base64(const void *data, size_t len);
/* The SHA-256 of len bytes at data (32 bytes into out). */
void kop_sha256(const void *data, size_t len, unsigned char *out);
/* The n bytes at data as 2n lowercase hex digits and a NUL, in out[2n + 1]. */
void kop_hex(const void *data, size_t n, char *out);
/* The value of the hex digit c (either case), or -1. */
int kop_hex_digit(int c);

/*
 * Capped exponential backoff with jitter: the n-th delay is drawn from
 * [d, d + d*jitter) where d = min(base * 2^n, cap); never above cap*(1+jitter).
 * client-go's reflector uses base 800 ms, cap 30 s, jitter 1.0.
 */
struct kop_backoff {
	unsigned base_ms, cap_ms;
	double jitter;
	unsigned attempt;
};
void kop_backoff_init(struct kop_backoff *b, unsigned base_ms, unsigned cap_ms, double jitter);
unsigned kop_backoff_next(struct kop_backoff *b);	/* the delay to wait now, in ms */
void kop_backoff_reset(struct kop_backoff *b);

#endif
