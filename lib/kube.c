/*
 * The client: libcurl easy handles set up with the configuration's TLS and
 * credentials, blocking requests, Status decoding and the one place that
 * classifies failures as transient or permanent.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <openssl/crypto.h>
#include "jsonl.h"
#include "kube-priv.h"
#include "banned.h"

/* client-go re-reads token files when its copy is older than 1 min minus 10 s. */
#define TOKEN_REREAD_MS 50000
#define RESPONSE_MAX (512u << 20)

struct kube_client {
	struct kube_config cfg;
	long timeout_ms;
	char *user_agent;
	CURLSH *share;
	/* the easy handle of the last request (request()), reset: the next takes it, with the multi
	 * handle and socket pair curl_easy_perform made for it, rather than make them again (a
	 * client serves one thread at a time, as its share and discovery cache need) */
	CURL *spare;
	char *base_url;		/* server, with the host replaced by tls-server-name if set */
	struct curl_slist *connect_to;	/* tls-server-name: connect to the real host */
	int64_t token_read_ms;	/* when the token file was last read */
	int token_stale;	/* re-read the token file before the next request */
	/* discovery cache (lib/discovery.c) */
	int have_discovery;
	jv disc_docs, disc_groups, disc_kinds;
};

void kube_discovery_cache(struct kube_client *c, jv **docs, jv **groups, jv **kinds, int **have)
{
	*docs = &c->disc_docs;
	*groups = &c->disc_groups;
	*kinds = &c->disc_kinds;
	*have = &c->have_discovery;
}

/* ---- client ---------------------------------------------------------------- */

/* tls-server-name: curl verifies and sends SNI for the URL's host, so the URL names it and CONNECT_TO goes to the real one. */
static int setup_server_name(struct kube_client *c, char *err)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL, *port = NULL;
	struct kop_buf b = KOP_BUF_INIT;
	int rc = -1;

	if (curl_url_set(u, CURLUPART_URL, c->cfg.server, 0) ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) || curl_url_get(u, CURLUPART_HOST, &host, 0) ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT)) {
		kop_error(err, "invalid server URL '%s'", c->cfg.server);
		goto out;
	}
	kop_buf_addf(&b, "%s://%s:%s", scheme, c->cfg.tls_server_name, port);
	{
		char *rest = NULL;

		/* Keep a path prefix of the server URL (a proxy in front of the API). */
		if (!curl_url_get(u, CURLUPART_PATH, &rest, 0) && rest && strcmp(rest, "/"))
			kop_buf_adds(&b, rest);
		curl_free(rest);
	}
	while (b.len && b.buf[b.len - 1] == '/')
		b.buf[--b.len] = 0;
	c->base_url = kop_buf_detach(&b, NULL);
	kop_buf_addf(&b, "%s:%s:%s:%s", c->cfg.tls_server_name, port, host, port);
	c->connect_to = curl_slist_append(NULL, b.buf);
	kop_buf_release(&b);
	rc = 0;
out:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
	return rc;
}

struct kube_client *kube_client_new(struct kube_config *cfg, long timeout_ms, char *err)
{
	struct kube_client *c;
	static int curl_ready;

	if (!cfg->server) {
		kop_error(err, "invalid configuration: no server");
		return NULL;
	}
	if (!curl_ready) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT)) {
			kop_error(err, "unable to initialise libcurl");
			return NULL;
		}
		curl_ready = 1;
	}
	c = kop_calloc(1, sizeof(*c));
	c->cfg = *cfg;
	memset(cfg, 0, sizeof(*cfg));
	c->timeout_ms = timeout_ms;
	c->user_agent = kop_strdup("iot-operator");
	c->token_read_ms = kop_mono_ms();
	c->disc_docs = jv_object();
	c->disc_groups = jv_null();
	c->disc_kinds = jv_object();
	if (c->cfg.tls_server_name && !strncmp(c->cfg.server, "https://", 8)) {
		if (setup_server_name(c, err)) {
			kube_client_free(c);
			return NULL;
		}
	} else {
		c->base_url = kop_strdup(c->cfg.server);
	}
	c->share = curl_share_init();
	curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	return c;
}

void kube_client_free(struct kube_client *c)
{
	if (!c)
		return;
	kube_config_release(&c->cfg);
	free(c->user_agent);
	if (c->spare)
		curl_easy_cleanup(c->spare);	/* (before the share it is attached to) */
	if (c->share)
		curl_share_cleanup(c->share);
	free(c->base_url);
	curl_slist_free_all(c->connect_to);
	jv_free(c->disc_docs);
	jv_free(c->disc_groups);
	jv_free(c->disc_kinds);
	free(c);
}

const struct kube_config *kube_client_config(const struct kube_client *c)
{
	return &c->cfg;
}

void kube_client_set_user_agent(struct kube_client *c, const char *ua)
{
	free(c->user_agent);
	c->user_agent = kop_strdup(ua && *ua ? ua : "iot-operator");
}

void kube_auth_failed(struct kube_client *c)
{
	if (c->cfg.exec)
		kube_exec_forget(c->cfg.exec);
	if (c->cfg.token_file)
		c->token_stale = 1;
}

/* The bearer token to send now (borrowed), re-reading a token file as it rotates. */
static const char *current_token(struct kube_client *c, char *err)
{
	if (c->cfg.token_file && (c->token_stale || kop_mono_ms() - c->token_read_ms >= TOKEN_REREAD_MS)) {
		char *t, e2[KOP_ERRLEN];

		/* A failed re-read keeps the token we have, as client-go does. */
		if (!kube_read_token_file(c->cfg.token_file, &t, e2)) {
			if (c->cfg.token) {
				OPENSSL_cleanse(c->cfg.token, strlen(c->cfg.token));
				free(c->cfg.token);
			}
			c->cfg.token = t;
			c->token_read_ms = kop_mono_ms();
			c->token_stale = 0;
		} else if (!c->cfg.token) {
			kop_error(err, "%s", e2);
			return NULL;
		}
	}
	return c->cfg.token;
}

static struct curl_slist *add_auth_header(struct curl_slist *h, const char *scheme, const char *cred)
{
	struct kop_buf b = KOP_BUF_INIT;

	kop_buf_addf(&b, "Authorization: %s %s", scheme, cred);
	h = curl_slist_append(h, b.buf);
	OPENSSL_cleanse(b.buf, b.len);
	kop_buf_release(&b);
	return h;
}

static void set_blob(CURL *e, CURLoption opt, const char *data, size_t len)
{
	struct curl_blob blob;

	blob.data = (void *)data;
	blob.len = len;
	blob.flags = CURL_BLOB_COPY;
	curl_easy_setopt(e, opt, &blob);
}

void kube_easy_done(struct kube_client *c, CURL *e)
{
	/* its options back to their defaults (the headers, body and credentials set for it no
	 * longer referred to); connections stay in the share (or the multi handle) either way */
	curl_easy_reset(e);
	if (c->spare)
		curl_easy_cleanup(c->spare);
	c->spare = e;
}

CURL *kube_easy_new(struct kube_client *c, const char *method, const char *path, struct curl_slist **headers,
		    char *err)
{
	struct kube_exec *x = c->cfg.exec;
	const char *token = NULL, *cert = c->cfg.cert_pem, *key = c->cfg.key_pem;
	size_t cert_len = c->cfg.cert_len, key_len = c->cfg.key_len;
	struct kop_buf url = KOP_BUF_INIT;
	struct curl_slist *h = NULL;
	CURL *e;

	*headers = NULL;
	if (x) {
		if (kube_exec_credential(x, err) < 0)
			return NULL;
		token = x->token;
		if (x->cert_pem) {
			cert = x->cert_pem;
			cert_len = x->cert_len;
			key = x->key_pem;
			key_len = x->key_len;
		}
	} else if (c->cfg.token || c->cfg.token_file) {
		token = current_token(c, err);
		if (!token)
			return NULL;
	}
	e = c->spare ? c->spare : curl_easy_init();
	c->spare = NULL;
	if (!e) {
		kop_error(err, "unable to create a curl handle");
		return NULL;
	}
	kop_buf_addf(&url, "%s%s%s", c->base_url, path[0] == '/' ? "" : "/", path);
	curl_easy_setopt(e, CURLOPT_URL, url.buf);
	kop_buf_release(&url);
	if (!strcmp(method, "GET"))
		curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	else if (!strcmp(method, "HEAD"))
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	else
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(e, CURLOPT_SHARE, c->share);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	/*
	 * HTTP/2 over TLS where the server agrees: the transfers of one multi handle are then streams of
	 * one connection (t1010); a new transfer waits to learn whether it can join one.
	 */
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 30L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 30000L);
	curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "gzip");
	curl_easy_setopt(e, CURLOPT_USERAGENT, c->user_agent);
	if (c->connect_to)
		curl_easy_setopt(e, CURLOPT_CONNECT_TO, c->connect_to);
	if (c->cfg.insecure) {
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
	} else if (c->cfg.ca_pem) {
		set_blob(e, CURLOPT_CAINFO_BLOB, c->cfg.ca_pem, c->cfg.ca_len);
	}
	if (cert && key) {
		set_blob(e, CURLOPT_SSLCERT_BLOB, cert, cert_len);
		curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
		set_blob(e, CURLOPT_SSLKEY_BLOB, key, key_len);
		curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
	}
	h = curl_slist_append(h, "Accept: application/json");
	if (token && *token) {
		h = add_auth_header(h, "Bearer", token);
	} else if (c->cfg.username || c->cfg.password) {
		struct kop_buf up = KOP_BUF_INIT;
		char *b64;

		kop_buf_addf(&up, "%s:%s", c->cfg.username ? c->cfg.username : "",
			     c->cfg.password ? c->cfg.password : "");
		b64 = kop_base64(up.buf, up.len);
		h = add_auth_header(h, "Basic", b64);
		OPENSSL_cleanse(up.buf, up.len);
		OPENSSL_cleanse(b64, strlen(b64));
		kop_buf_release(&up);
		free(b64);
	}
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	*headers = h;
	return e;
}

/* ---- responses ------------------------------------------------------------ */

void kube_response_release(struct kube_response *r)
{
	jv_free(r->body);
	free(r->reason);
	free(r->message);
	memset(r, 0, sizeof(*r));
	r->body = jv_null();
	r->retry_after_s = -1;
}

/* Whether a and b hold the same letters and digits, case aside ("TooManyRequests", "Too many requests"). */
static int same_words(const char *a, const char *b)
{
	for (;;) {
		while (*a && !isalnum((unsigned char)*a))
			a++;
		while (*b && !isalnum((unsigned char)*b))
			b++;
		if (!*a || !*b)
			return !*a && !*b;
		if (tolower((unsigned char)*a++) != tolower((unsigned char)*b++))
			return 0;
	}
}

const char *kube_response_why(const struct kube_response *r, char *buf, size_t size)
{
	const char *reason = r->reason && *r->reason ? r->reason : NULL;
	const char *msg = r->message && *r->message ? r->message : NULL;

	if (reason && msg && !same_words(reason, msg))
		snprintf(buf, size, "%s: %s", reason, msg);
	else
		snprintf(buf, size, "%s", reason ? reason : msg ? msg : "Unknown");
	return buf;
}

const char *kube_no_response_why(const struct kube_response *r, char *buf, size_t size)
{
	if (r->os_errno)
		snprintf(buf, size, "%s", strerror(r->os_errno));
	else if (r->message && *r->message)
		snprintf(buf, size, "%s", r->message);
	else
		snprintf(buf, size, "%s", r->reason && *r->reason ? r->reason : "no response");
	return buf;
}

const char *kube_failure_text(const struct kube_client *c, const struct kube_response *r, char *buf, size_t size)
{
	char why[KOP_ERRLEN];

	if (r->code)
		snprintf(buf, size, "%ld %s", r->code, kube_response_why(r, why, sizeof(why)));
	else if (r->reason && !strcmp(r->reason, "CredentialsUnavailable"))
		snprintf(buf, size, "%s", kube_response_why(r, why, sizeof(why)));
	else
		snprintf(buf, size, "no response from '%s': %s", c && c->cfg.server ? c->cfg.server : "the server",
			 kube_no_response_why(r, why, sizeof(why)));
	return buf;
}

/* apimachinery's NewGenericServerResponse: a reason (and message) for a code without a Status body. */
static const char *reason_for_code(long code, const char **message)
{
	static const struct {
		long code;
		const char *reason, *message;
	} table[] = {
		{ 400, "BadRequest", "the server rejected our request for an unknown reason" },
		{ 401, "Unauthorized", "the server has asked for the client to provide credentials" },
		{ 403, "Forbidden", "the server does not allow access to the requested resource" },
		{ 404, "NotFound", "the server could not find the requested resource" },
		{ 405, "MethodNotAllowed", "the server does not allow this method on the requested resource" },
		{ 406, "NotAcceptable", "the server was unable to respond with a content type that the client supports" },
		{ 408, "Timeout", "the server was unable to return a response in the time allotted" },
		{ 409, "Conflict", "the server reported a conflict" },
		{ 410, "Gone", "the server has asked for the client to try again later" },
		{ 413, "RequestEntityTooLarge", "the server has rejected the request because it is too large" },
		{ 415, "UnsupportedMediaType", "the server was unable to accept the content type of the request" },
		{ 422, "Invalid", "the server rejected our request due to an error in our request" },
		{ 429, "TooManyRequests", "the server has received too many requests and has asked us to try again later" },
		{ 500, "InternalError", "an error on the server has prevented the request from succeeding" },
		{ 503, "ServiceUnavailable", "the server is currently unable to handle the request" },
		{ 504, "Timeout", "the server was unable to return a response in the time allotted" },
	};
	size_t i;

	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (table[i].code == code) {
			*message = table[i].message;
			return table[i].reason;
		}
	*message = "an error on the server has prevented the request from succeeding";
	return code >= 500 ? "InternalError" : "Unknown";
}

static const char *curl_reason(CURLcode cc)
{
	switch (cc) {
	case CURLE_COULDNT_RESOLVE_HOST: return "CouldNotResolveHost";
	case CURLE_COULDNT_CONNECT: return "CouldNotConnect";
	case CURLE_OPERATION_TIMEDOUT: return "Timeout";
	case CURLE_SSL_CONNECT_ERROR: return "TLSHandshakeError";
	case CURLE_PEER_FAILED_VERIFICATION: return "TLSVerificationFailed";
	case CURLE_SSL_CERTPROBLEM: return "TLSClientCertificateError";
	case CURLE_SSL_CACERT_BADFILE: return "TLSBadCA";
	case CURLE_SEND_ERROR: return "SendError";
	case CURLE_RECV_ERROR: return "ReceiveError";
	case CURLE_GOT_NOTHING: return "EmptyReply";
	case CURLE_PARTIAL_FILE: return "PartialResponse";
	case CURLE_HTTP2: case CURLE_HTTP2_STREAM: return "HTTP2Error";
	case CURLE_WRITE_ERROR: return "WriteError";
	case CURLE_ABORTED_BY_CALLBACK: return "Aborted";
	case CURLE_URL_MALFORMAT: return "BadURL";
	case CURLE_UNSUPPORTED_PROTOCOL: return "UnsupportedProtocol";
	case CURLE_LOGIN_DENIED: return "CredentialsUnavailable";
	default: return "ConnectionError";
	}
}

/* Plain-text body, trimmed to its first line: heap, NULL if empty. */
static char *text_message(const char *body, size_t len)
{
	size_t i = 0, n;

	while (i < len && isspace((unsigned char)body[i]))
		i++;
	for (n = 0; i + n < len && body[i + n] != '\n' && body[i + n] != '\r' && n < 300; n++)
		;
	return n ? kop_strndup(body + i, n) : NULL;
}

int kube_is_transient(long code, CURLcode cc)
{
	if (code == 0 || (cc != CURLE_OK && code >= 200 && code < 300)) {
		switch (cc) {
		case CURLE_OK:
			return 1;	/* no response at all */
		/* Configuration problems that trying again will not fix. */
		case CURLE_URL_MALFORMAT:
		case CURLE_UNSUPPORTED_PROTOCOL:
		case CURLE_PEER_FAILED_VERIFICATION:
		case CURLE_SSL_CERTPROBLEM:
		case CURLE_SSL_CACERT_BADFILE:
		case CURLE_SSL_CIPHER:
		case CURLE_BAD_FUNCTION_ARGUMENT:
		case CURLE_NOT_BUILT_IN:
			return 0;
		default:
			return 1;
		}
	}
	/*
	 * 401 counts as permanent here: a caller whose credentials can be
	 * refreshed calls kube_auth_failed() and tries once more (kube_request
	 * already did the first part).
	 */
	return code == 408 || code == 409 || code == 429 || code >= 500;
}

int kube_exit_code(const struct kube_response *r)
{
	return r->transient ? KOP_EXIT_TEMP : KOP_EXIT_PERM;
}

static long parse_retry_after(const char *s)
{
	char *end;
	long v;

	if (!s)
		return -1;
	while (isspace((unsigned char)*s))
		s++;
	v = strtol(s, &end, 10);
	if (end == s || v < 0)
		return -1;	/* an HTTP-date, which kube-apiserver never sends */
	while (isspace((unsigned char)*end))
		end++;
	return *end ? -1 : v;
}

void kube_response_from(struct kube_response *r, long code, const char *body, size_t len, const char *retry_after,
			CURLcode cc, const char *curl_err)
{
	const char *generic = NULL, *reason;
	jv v = jv_invalid();

	memset(r, 0, sizeof(*r));
	r->code = code;
	r->body = jv_null();
	r->retry_after_s = parse_retry_after(retry_after);
	if (body && len && len < INT32_MAX) {
		v = jv_parse_sized(body, (int)len);
		if (jv_get_kind(v) == JV_KIND_OBJECT)
			r->body = jv_copy(v);
	}
	r->transient = kube_is_transient(code, cc);
	if (code == 0 || cc != CURLE_OK) {
		r->reason = kop_strdup(curl_reason(cc == CURLE_OK ? CURLE_GOT_NOTHING : cc));
		r->message = kop_strdup(curl_err && *curl_err ? curl_err
							       : curl_easy_strerror(cc == CURLE_OK ? CURLE_GOT_NOTHING : cc));
		jv_free(v);
		return;
	}
	if (jv_get_kind(v) == JV_KIND_OBJECT) {
		jv kind = jv_object_get(jv_copy(v), jv_string("kind"));

		if (jv_get_kind(kind) == JV_KIND_STRING && !strcmp(jv_string_value(kind), "Status")) {
			jv rs = jv_object_get(jv_copy(v), jv_string("reason"));
			jv msg = jv_object_get(jv_copy(v), jv_string("message"));
			jv ra = jv_getpath(jv_copy(v), JV_ARRAY(jv_string("details"), jv_string("retryAfterSeconds")));

			if (jv_get_kind(rs) == JV_KIND_STRING && jv_string_length_bytes(jv_copy(rs)))
				r->reason = kop_strdup(jv_string_value(rs));
			if (jv_get_kind(msg) == JV_KIND_STRING && jv_string_length_bytes(jv_copy(msg)))
				r->message = kop_strdup(jv_string_value(msg));
			if (r->retry_after_s < 0 && jv_get_kind(ra) == JV_KIND_NUMBER && jv_number_value(ra) > 0)
				r->retry_after_s = (long)jv_number_value(ra);
			jv_free(rs);
			jv_free(msg);
			jv_free(ra);
		}
		jv_free(kind);
	}
	jv_free(v);
	if (code >= 200 && code < 300)
		return;
	/* A 409 is a conflict to read again and retry, except a create's AlreadyExists: that stays. */
	if (code == 409 && r->reason && !strcmp(r->reason, "AlreadyExists"))
		r->transient = 0;
	reason = reason_for_code(code, &generic);
	if (!r->reason)
		r->reason = kop_strdup(reason);
	if (!r->message) {
		/* A plain-text body ("Too many requests, please try again later.") says more, except Go's 404. */
		char *text = jv_get_kind(r->body) == JV_KIND_NULL ? text_message(body, len) : NULL;

		if (text && !(code == 404 && !strcmp(text, "404 page not found")))
			r->message = text;
		else {
			free(text);
			r->message = kop_strdup(generic);
		}
	}
}

void kube_response_meta(struct kube_response *r, long code, const char *body, size_t len, const char *retry_after,
			CURLcode cc, const char *curl_err)
{
	static const char *const names[] = { "resourceVersion", "uid" };
	jv meta;

	if (cc == CURLE_OK && code >= 200 && code < 300 && body && len &&
	    kop_json_meta(body, len, names, sizeof(names) / sizeof(names[0]), &meta) == 0) {
		/* (a 2xx without a body is what it is but for the body) */
		kube_response_from(r, code, NULL, 0, retry_after, cc, curl_err);
		jv_free(r->body);
		r->body = meta;
		return;
	}
	kube_response_from(r, code, body, len, retry_after, cc, curl_err);
}

/* ---- blocking requests ---------------------------------------------------- */

struct sink {
	struct kop_buf body;
	char *retry_after;
};

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	struct sink *s = arg;

	if (s->body.len + size * n > RESPONSE_MAX)
		return 0;
	kop_buf_add(&s->body, data, size * n);
	return size * n;
}

static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
	struct sink *s = arg;
	size_t len = size * n;

	if (len > 12 && !strncasecmp(data, "Retry-After:", 12)) {
		free(s->retry_after);
		s->retry_after = text_message(data + 12, len - 12);
	} else if (len > 5 && !strncmp(data, "HTTP/", 5)) {
		/* A new response (after a 100 Continue or a redirect): forget the old headers. */
		free(s->retry_after);
		s->retry_after = NULL;
	}
	return len;
}

static int request(struct kube_client *c, const char *method, const char *path, const char *content_type,
		   const char *text, struct kube_response *resp, int meta_only)
{
	char err[KOP_ERRLEN], curl_err[CURL_ERROR_SIZE];
	struct curl_slist *headers = NULL;
	struct sink s = { KOP_BUF_INIT, NULL };
	long code = 0, os_errno = 0;
	CURLcode cc;
	CURL *e;

	e = kube_easy_new(c, method, path, &headers, err);
	if (!e) {
		memset(resp, 0, sizeof(*resp));
		resp->body = jv_null();
		resp->retry_after_s = -1;
		resp->reason = kop_strdup("CredentialsUnavailable");
		resp->message = kop_strdup(err);
		resp->transient = 1;
		return -1;
	}
	curl_err[0] = 0;
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, curl_err);
	if (text) {
		struct kop_buf ct = KOP_BUF_INIT;

		kop_buf_addf(&ct, "Content-Type: %s", content_type ? content_type : "application/json");
		headers = curl_slist_append(headers, ct.buf);
		kop_buf_release(&ct);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(text));
		curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, text);
	}
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, &s);
	if (c->timeout_ms > 0)
		curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, c->timeout_ms);
	cc = curl_easy_perform(e);
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_getinfo(e, CURLINFO_OS_ERRNO, &os_errno);
	kube_easy_done(c, e);
	curl_slist_free_all(headers);
	if (meta_only)
		kube_response_meta(resp, code, s.body.buf, s.body.len, s.retry_after, cc, curl_err);
	else
		kube_response_from(resp, code, s.body.buf, s.body.len, s.retry_after, cc, curl_err);
	if (!code)
		resp->os_errno = (int)os_errno;
	kop_buf_release(&s.body);
	free(s.retry_after);
	if (code == 401)
		kube_auth_failed(c);
	return cc == CURLE_OK && code >= 200 && code < 300 ? 0 : -1;
}

static int request_jv(struct kube_client *c, const char *method, const char *path, const char *content_type,
		      jv body, struct kube_response *resp, int meta_only)
{
	char *text = jv_is_valid(body) ? kop_json_dump(body) : (jv_free(body), NULL);
	int rc = request(c, method, path, content_type, text, resp, meta_only);

	free(text);
	return rc;
}

int kube_request(struct kube_client *c, const char *method, const char *path, const char *content_type, jv body,
		 struct kube_response *resp)
{
	return request_jv(c, method, path, content_type, body, resp, 0);
}

int kube_request_meta(struct kube_client *c, const char *method, const char *path, const char *content_type,
		      jv body, struct kube_response *resp)
{
	return request_jv(c, method, path, content_type, body, resp, 1);
}

int kube_request_text(struct kube_client *c, const char *method, const char *path, const char *content_type,
		      const char *text, int meta_only, struct kube_response *resp)
{
	return request(c, method, path, content_type, text, resp, meta_only);
}

/* ---- paths ------------------------------------------------------------------ */

char *kube_query_escape(const char *s)
{
	char *e = curl_easy_escape(NULL, s, 0), *out;

	if (!e)
		return kop_strdup("");
	out = kop_strdup(e);
	curl_free(e);
	return out;
}

char *kube_path(const struct kube_resource *r, const char *ns, const char *name, const char *sub)
{
	struct kop_buf b = KOP_BUF_INIT;

	if (!r->group || !*r->group)
		kop_buf_addf(&b, "/api/%s", r->version);
	else
		kop_buf_addf(&b, "/apis/%s/%s", r->group, r->version);
	if (r->namespaced && ns && *ns) {
		char *e = kube_query_escape(ns);

		kop_buf_addf(&b, "/namespaces/%s", e);
		free(e);
	}
	kop_buf_addf(&b, "/%s", r->resource);
	if (name) {
		char *e = kube_query_escape(name);

		kop_buf_addf(&b, "/%s", e);
		free(e);
	}
	if (name && sub && *sub)
		kop_buf_addf(&b, "/%s", sub);
	return kop_buf_detach(&b, NULL);
}
