/* Small shared helpers: error buffers, kop_buf, allocation, time, files, backoff, base64, SHA-256. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include "kop.h"
#include "banned.h"

int kop_error(char *err, const char *fmt, ...)
{
	va_list ap;

	if (err) {
		va_start(ap, fmt);
		vsnprintf(err, KOP_ERRLEN, fmt, ap);
		va_end(ap);
	}
	return -1;
}

void *kop_malloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		abort();
	return p;
}

void *kop_calloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (!p)
		abort();
	return p;
}

void *kop_realloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		abort();
	return p;
}

char *kop_strdup(const char *s)
{
	return kop_strndup(s, strlen(s));
}

char *kop_strndup(const char *s, size_t n)
{
	char *p = kop_malloc(n + 1);

	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

void kop_buf_grow(struct kop_buf *b, size_t extra)
{
	size_t want = b->len + extra + 1;

	if (want <= b->cap)
		return;
	if (want < b->cap * 2)
		want = b->cap * 2;
	if (want < 64)
		want = 64;
	b->buf = kop_realloc(b->buf, want);
	b->cap = want;
}

void kop_buf_add(struct kop_buf *b, const void *data, size_t len)
{
	kop_buf_grow(b, len);
	if (len)
		memcpy(b->buf + b->len, data, len);
	b->len += len;
	b->buf[b->len] = 0;
}

void kop_buf_adds(struct kop_buf *b, const char *s)
{
	kop_buf_add(b, s, strlen(s));
}

void kop_buf_vaddf(struct kop_buf *b, const char *fmt, va_list ap)
{
	va_list cp;
	int n;

	kop_buf_grow(b, 64);
	va_copy(cp, ap);
	n = vsnprintf(b->buf + b->len, b->cap - b->len, fmt, cp);
	va_end(cp);
	if (n < 0)
		return;
	if ((size_t)n >= b->cap - b->len) {
		kop_buf_grow(b, (size_t)n);
		vsnprintf(b->buf + b->len, b->cap - b->len, fmt, ap);
	}
	b->len += (size_t)n;
}

void kop_buf_addf(struct kop_buf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	kop_buf_vaddf(b, fmt, ap);
	va_end(ap);
}

void kop_buf_reset(struct kop_buf *b)
{
	b->len = 0;
	if (b->buf)
		b->buf[0] = 0;
}

void kop_buf_drop(struct kop_buf *b, size_t n)
{
	if (!n)
		return;
	if (n >= b->len) {
		kop_buf_reset(b);
		return;
	}
	memmove(b->buf, b->buf + n, b->len - n);
	b->len -= n;
	b->buf[b->len] = 0;
}

void kop_buf_drop_done(struct kop_buf *b, size_t *done, size_t min)
{
	if (*done > min && *done * 2 > b->len) {
		kop_buf_drop(b, *done);
		*done = 0;
	}
}

void kop_buf_release(struct kop_buf *b)
{
	free(b->buf);
	b->buf = NULL;
	b->len = b->cap = 0;
}

char *kop_buf_detach(struct kop_buf *b, size_t *len)
{
	char *s = b->buf ? b->buf : kop_strdup("");

	if (len)
		*len = b->len;
	b->buf = NULL;
	b->len = b->cap = 0;
	return s;
}

struct timespec kop_clock_after(clockid_t clock, int64_t ms)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return ts;
}

int64_t kop_mono_ms(void)
{
	return kop_mono_us() / 1000;
}

int64_t kop_mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t kop_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

char *kop_time_rfc3339(char *buf, size_t len, time_t t)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}

char *kop_time_micro(char *buf, size_t len, int64_t us)
{
	time_t t = (time_t)(us / 1000000);
	struct tm tm;
	char base[32];

	gmtime_r(&t, &tm);
	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, len, "%s.%06ldZ", base, (long)(us % 1000000));
	return buf;
}

int kop_time_parse(const char *s, time_t *out)
{
	struct tm tm;
	const char *p;
	long off = 0;

	memset(&tm, 0, sizeof(tm));
	p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return -1;
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -1;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':') {
		int h = (p[1] - '0') * 10 + (p[2] - '0'), m = (p[4] - '0') * 10 + (p[5] - '0');

		if (h > 23 || m > 59)
			return -1;
		off = (h * 60L + m) * 60L * (*p == '+' ? 1 : -1);
		p += 6;
	} else {
		return -1;
	}
	if (*p)
		return -1;
	*out = timegm(&tm) - off;
	return 0;
}

int kop_read_file(const char *path, size_t max, char **out, size_t *len, char *err)
{
	struct kop_buf b = KOP_BUF_INIT;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return kop_error(err, "unable to open '%s': %s", path, strerror(errno));
	for (;;) {
		ssize_t n;

		kop_buf_grow(&b, 65536);
		n = read(fd, b.buf + b.len, b.cap - b.len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			close(fd);
			kop_buf_release(&b);
			return kop_error(err, "unable to read '%s': %s", path, strerror(e));
		}
		if (n == 0)
			break;
		b.len += (size_t)n;
		b.buf[b.len] = 0;
		if (b.len > max) {
			close(fd);
			kop_buf_release(&b);
			return kop_error(err, "unable to read '%s': larger than %zu bytes", path, max);
		}
	}
	close(fd);
	*out = kop_buf_detach(&b, len);
	return 0;
}

int kop_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

void kop_backoff_init(struct kop_backoff *b, unsigned base_ms, unsigned cap_ms, double jitter)
{
	b->base_ms = base_ms;
	b->cap_ms = cap_ms;
	b->jitter = jitter;
	b->attempt = 0;
}

unsigned kop_backoff_next(struct kop_backoff *b)
{
	double d = b->base_ms;
	unsigned i;

	for (i = 0; i < b->attempt && d < b->cap_ms; i++)
		d *= 2;
	if (d > b->cap_ms)
		d = b->cap_ms;
	if (b->attempt < 64)
		b->attempt++;
	/* random() is enough for jitter; seeded once by the tool. */
	return (unsigned)(d + d * b->jitter * ((double)random() / ((double)RAND_MAX + 1.0)));
}

void kop_backoff_reset(struct kop_backoff *b)
{
	b->attempt = 0;
}

char *kop_base64(const void *data, size_t len)
{
	unsigned char *b = kop_malloc(4 * ((len + 2) / 3) + 1);
	size_t done = 0, wrote = 0;

	/* EVP_EncodeBlock takes an int length: encode in slices that keep it small. */
	while (done < len) {
		size_t chunk = len - done > 3u << 20 ? 3u << 20 : len - done;

		wrote += (size_t)EVP_EncodeBlock(b + wrote, (const unsigned char *)data + done, (int)chunk);
		done += chunk;
	}
	b[wrote] = 0;
	return (char *)b;
}

/*
 * OpenSSL 3's SHA256() looks the algorithm up in its providers on every
 * call (EVP_MD_fetch: a property query under a lock, a third of a digest of
 * a Kubernetes object's text): it is fetched once, for the process's life.
 */
static EVP_MD *sha256_md;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_fetch(void)
{
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

void kop_sha256(const void *data, size_t len, unsigned char *out)
{
	pthread_once(&sha256_once, sha256_fetch);
	if (!sha256_md || !EVP_Digest(data, len, out, NULL, sha256_md, NULL))
		SHA256(data, len, out);	/* (what could not be fetched or made: the lookup each time) */
}

int kop_dns1123(const char *s, int label)
{
	size_t n = strlen(s);

	if (!n || n > (label ? 63u : 253u))
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || (!label && c == '.')))
			return 0;
	}
	return s[0] != '-' && s[0] != '.' && s[n - 1] != '-' && s[n - 1] != '.';
}

void kop_buf_add_quoted(struct kop_buf *b, const char *s, size_t n)
{
	static const char esc[] = "\a\b\t\n\v\f\r", letter[] = "abtnvfr";

	kop_buf_add(b, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		const char *e = c ? strchr(esc, c) : NULL;

		if (c == '"' || c == '\\') {
			kop_buf_add(b, "\\", 1);
			kop_buf_add(b, s + i, 1);
		} else if (e) {
			kop_buf_add(b, "\\", 1);
			kop_buf_add(b, letter + (e - esc), 1);
		} else if (c < 0x20 || c == 0x7f) {
			kop_buf_addf(b, "\\x%02x", c);
		} else {
			kop_buf_add(b, s + i, 1);
		}
	}
	kop_buf_add(b, "\"", 1);
}

void kop_hex(const void *data, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *d = data;
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = digits[d[i] >> 4];
		out[2 * i + 1] = digits[d[i] & 15];
	}
	out[2 * n] = '\0';
}

int kop_hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}
