/*
 * The read verbs: list (selectors, limit and continue tokens,
 * resourceVersion semantics, Table output) and get.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include "api.h"
#include "shard.h"
#include "banned.h"

/* base64url without padding (the continue token's encoding). */
static char *b64url(const char *s)
{
	char *out = kop_base64(s, strlen(s));
	size_t len = strlen(out);

	while (len > 0 && out[len - 1] == '=')
		len--;
	out[len] = 0;
	for (size_t i = 0; i < len; i++)
		out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
	return out;
}

static jv unb64url(const char *s)
{
	size_t n = strlen(s);
	char *in = kop_malloc(n + 4);
	unsigned char *out = kop_malloc(n + 4);
	int len;
	jv v;

	for (size_t i = 0; i < n; i++)
		in[i] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
	while (n % 4)
		in[n++] = '=';
	in[n] = 0;
	len = EVP_DecodeBlock(out, (unsigned char *)in, (int)n);
	if (len < 0) {
		free(in);
		free(out);
		return jv_invalid();
	}
	while (len > 0 && n >= 2 && in[n - 1] == '=' && out[len - 1] == 0) {
		len--;
		n--;
	}
	v = jv_parse_sized((const char *)out, len);
	free(in);
	free(out);
	return v;
}

static char *continue_token(long long rv, const char *key)
{
	jv tok = JV_OBJECT(jv_string("v"), jv_string("meta.k8s.io/v1"), jv_string("rv"), jv_number((double)rv));
	struct kop_buf start = KOP_BUF_INIT;
	jv s;
	char *out;

	kop_buf_adds(&start, key);
	kop_buf_add(&start, "", 1);
	tok = jv_object_set(tok, jv_string("start"), jv_string_sized(start.buf, (int)start.len));
	s = jv_dump_string(tok, 0);
	out = b64url(jv_string_value(s));
	jv_free(s);
	kop_buf_release(&start);
	return out;
}

int list_fn(jv obj, const char *key, void *data)
{
	struct list_ctx *c = data;

	if (!ksim_selector_match(c->ls, obj, c->t) || !ksim_selector_match(c->fs, obj, c->t) ||
	    (c->shard && !kop_shard_match(c->shard, obj)))
		return 0;
	if (c->limit > 0 && c->n >= c->limit) {
		c->more = 1;
		return 1;
	}
	c->items = jv_array_append(c->items, jv_copy(obj));
	c->n++;
	free(c->last_key);
	c->last_key = kop_strdup(key);
	return 0;
}

static int list_cached_fn(jv obj, const char *key, struct ksim_json_cache *cache, void *data)
{
	struct list_ctx *c = data;
	long before = c->n;
	int stop = list_fn(obj, key, data);

	if (c->n > before) {
		c->caches = kop_realloc(c->caches, (c->ncaches + 1) * sizeof(*c->caches));
		c->caches[c->ncaches++] = cache;
	}
	return stop;
}

/*
 * A list answer as text (lock held): what ksim_dump() writes for the list
 * `shell` (consumed; canonical, "items" last and empty) with the items
 * (consumed, as presented) in it, each item's JSON taken from its stored
 * object's cache or made once and kept there, for lists that are polled.
 */
static char *list_text(const struct ksim_type *t, jv shell, jv items, struct ksim_json_cache **caches, size_t *len)
{
	struct kop_buf b = KOP_BUF_INIT, view = KOP_BUF_INIT;
	size_t slen;
	char *s = ksim_dump(shell, &slen);

	/* the shell ends with "items":[]} */
	if (slen < 3 || strcmp(s + slen - 3, "[]}")) {
		free(s);
		jv_free(items);
		return NULL;
	}
	kop_buf_addf(&view, "list %s %s", t->api_version, t->kind);
	kop_buf_add(&b, s, slen - 2);
	free(s);
	jv_array_foreach(items, i, o) {
		struct ksim_json_cache *c = caches[i];

		if (i)
			kop_buf_add(&b, ",", 1);
		if (!c->json || strcmp(c->view, view.buf)) {
			free(c->json);
			free(c->view);
			c->json = ksim_dump(o, &c->len);
			c->view = kop_strdup(view.buf);
		} else {
			jv_free(o);
		}
		kop_buf_add(&b, c->json, c->len);
	}
	jv_free(items);
	kop_buf_release(&view);
	kop_buf_add(&b, "]}", 2);
	return kop_buf_detach(&b, len);
}

/* Parses both selectors: 0, or -1 with *err a 400. */
int selectors(const struct ksim_request *rq, const struct ksim_type *t, struct ksim_selector **ls,
	      struct ksim_selector **fs, jv *err)
{
	char e[KOP_ERRLEN];
	const char *l = query(rq, "labelSelector"), *f = query(rq, "fieldSelector");

	*ls = *fs = NULL;
	if (l && *l) {
		*ls = ksim_selector_parse(l, 0, e);
		if (*ls == (struct ksim_selector *)-1) {
			struct kop_buf b = KOP_BUF_INIT;

			*ls = NULL;
			kop_buf_addf(&b, "unable to parse requirement: %s", e);
			*err = bad_request(b.buf);
			kop_buf_release(&b);
			return -1;
		}
	}
	if (f && *f) {
		*fs = ksim_selector_parse(f, 1, e);
		if (*fs == (struct ksim_selector *)-1) {
			*fs = NULL;
			*err = bad_request(e);
			ksim_selector_free(*ls);
			*ls = NULL;
			return -1;
		}
		/* every field must be supported */
		{
			const char *p = f;

			while (*p) {
				size_t n = strcspn(p, ",");
				char *term = kop_strndup(p, n), *op = strpbrk(term, "!=");

				if (op)
					*op = 0;
				if (!ksim_field_supported(t, term)) {
					struct kop_buf b = KOP_BUF_INIT;

					kop_buf_addf(&b, "field label not supported: %s", term);
					*err = bad_request(b.buf);
					kop_buf_release(&b);
					free(term);
					ksim_selector_free(*ls);
					ksim_selector_free(*fs);
					*ls = *fs = NULL;
					return -1;
				}
				free(term);
				p += n;
				if (*p)
					p++;
			}
		}
	}
	return 0;
}

static int wants_table(const struct ksim_request *rq)
{
	return rq->accept && strstr(rq->accept, "as=Table");
}

static int include_object(const struct ksim_request *rq)
{
	const char *io = query(rq, "includeObject");

	if (io && !strcmp(io, "None"))
		return 0;
	if (io && !strcmp(io, "Object"))
		return 2;
	return 1;
}

/*
 * A read at resourceVersion n, newer than any: kube-apiserver waits up to 3 s
 * for its cache to reach n, then answers this (storage/errors.go
 * NewTooLargeResourceVersionError). ksim has no cache to wait for: n is
 * from another server (or another life of this one), so a list or get gets
 * it at once; a watch waits the 3 s (watch.c), as a write may still come.
 */
jv ksim_too_large_rv(unsigned long long n)
{
	char msg[128];

	snprintf(msg, sizeof(msg), "Timeout: Too large resource version: %llu, current: %llu", n,
		 (unsigned long long)ksim.rv);
	return ksim_status(504, "Timeout", msg,
			   JV_OBJECT(jv_string("causes"),
				     JV_ARRAY(JV_OBJECT(jv_string("reason"), jv_string("ResourceVersionTooLarge"),
							jv_string("message"), jv_string("Too large resource version"))),
				     jv_string("retryAfterSeconds"), jv_number(1)));
}

/* A list: 200 with *out, or with *text (when text is non-NULL and the answer can be made as text). */
int do_list(const struct ksim_request *rq, const struct route *r, jv *out, char **text, size_t *text_len)
{
	const struct ksim_type *t = r->t;
	struct list_ctx c = { .t = t, .items = jv_null() };
	const char *lim = query(rq, "limit"), *cont = query(rq, "continue"), *rvs = query(rq, "resourceVersion");
	const char *rvm = query(rq, "resourceVersionMatch");
	char *after = NULL;
	long long list_rv = (long long)ksim.rv;
	char rvbuf[32];
	char *token = NULL;
	int fail = 400;
	jv md, items;

	if (query_bool(rq, "sendInitialEvents")) {
		*out = ksim_status(422, "Invalid", "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
				   jv_null());
		return 422;
	}
	if (rvm && *rvm && (!rvs || !*rvs)) {
		*out = ksim_status(422, "Invalid", "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
				   jv_null());
		return 422;
	}
	if (selectors(rq, t, &c.ls, &c.fs, out) < 0)
		return 400;
	if (ksim_shard_selector(rq, &c.shard, out) < 0) {
		ksim_selector_free(c.ls);
		ksim_selector_free(c.fs);
		return 500;
	}
	c.items = jv_array();
	if (lim && *lim)
		c.limit = strtol(lim, NULL, 10);
	if (cont && *cont) {
		jv tok = unb64url(cont);
		jv rvj = field(tok, "rv"), start = field(tok, "start");

		if (rvs && *rvs && strcmp(rvs, "0")) {
			*out = bad_request("specifying resource version is not allowed when using continue");
			goto bad;
		}
		if (jv_get_kind(rvj) != JV_KIND_NUMBER || jv_get_kind(start) != JV_KIND_STRING) {
			*out = bad_request("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)");
			jv_free(tok);
			jv_free(rvj);
			jv_free(start);
			goto bad;
		}
		after = kop_strdup(jv_string_value(start));
		if (jv_number_value(rvj) >= 0 && ksim.compacted && (uint64_t)jv_number_value(rvj) <= ksim.compacted) {
			char *nt = continue_token(-1, after);

			*out = ksim_status(410, "Expired",
					   "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
					   jv_null());
			*out = jv_object_set(*out, jv_string("metadata"), JV_OBJECT(jv_string("continue"), jv_string(nt)));
			*out = ksim_canonical(*out);
			free(nt);
			jv_free(tok);
			jv_free(rvj);
			jv_free(start);
			free(after);
			ksim_selector_free(c.ls);
			ksim_selector_free(c.fs);
			ksim_shard_selector_free(c.shard);
			jv_free(c.items);
			return 410;
		}
		if (jv_number_value(rvj) >= 0)
			list_rv = (long long)jv_number_value(rvj);
		jv_free(tok);
		jv_free(rvj);
		jv_free(start);
	} else if (rvs && *rvs && strcmp(rvs, "0")) {
		char *end;
		unsigned long long n = strtoull(rvs, &end, 10);

		if (*end) {
			struct kop_buf b = KOP_BUF_INIT;

			kop_buf_addf(&b, "Invalid value: \"%s\": resourceVersion must be a number", rvs);
			*out = bad_request(b.buf);
			kop_buf_release(&b);
			goto bad;
		}
		if (n > ksim.rv) {
			*out = ksim_too_large_rv(n);
			fail = 504;
			goto bad;
		}
		if ((rvm && !strcmp(rvm, "Exact")) || (c.limit > 0 && (!rvm || !*rvm))) {
			if (n < ksim.compacted) {
				*out = ksim_status(410, "Expired", "The resourceVersion for the provided list is too old.",
						   jv_null());
				fail = 410;
				goto bad;
			}
		}
	}
	if (r->ns && (t->flags & KT_NAMESPACED)) {
		/* restrict the walk to the namespace */
		ksim_store_each_cached(t->gr, r->ns, after, list_cached_fn, &c);
	} else {
		ksim_store_each_cached(t->gr, NULL, after, list_cached_fn, &c);
	}
	snprintf(rvbuf, sizeof(rvbuf), "%lld", list_rv);
	md = JV_OBJECT(jv_string("resourceVersion"), jv_string(rvbuf));
	if (c.more && c.last_key) {
		token = continue_token(list_rv, c.last_key);
		md = jv_object_set(md, jv_string("continue"), jv_string(token));
		if (!c.ls && !c.fs && !c.shard) {
			size_t total = ksim_store_count(t->gr, r->ns);
			long long before = 0;
			struct list_ctx cnt = { .t = t, .items = jv_array() };

			/* remaining = everything after the last key returned */
			ksim_store_each(t->gr, r->ns, c.last_key, list_fn, &cnt);
			before = cnt.n;
			(void)total;
			md = jv_object_set(md, jv_string("remainingItemCount"), jv_number((double)before));
			jv_free(cnt.items);
			free(cnt.last_key);
		}
	}
	if (c.shard)	/* the echo that tells a client the server filtered */
		md = jv_object_set(md, jv_string("shardInfo"),
				   JV_OBJECT(jv_string("selector"), jv_string(c.shard->string)));
	items = jv_array();
	jv_array_foreach(c.items, i, o) {
		o = present(t, o);
		if (!(t->flags & KT_CUSTOM)) {
			o = jv_object_delete(o, jv_string("kind"));
			o = jv_object_delete(o, jv_string("apiVersion"));
		}
		items = jv_array_append(items, o);
	}
	jv_free(c.items);
	if (wants_table(rq)) {
		jv full = jv_array();

		jv_array_foreach(items, i, o)
			full = jv_array_append(full, present(t, o));
		jv_free(items);
		jv_free(md);
		*out = ksim_table(t, full, rvbuf, token, include_object(rq));
	} else if (text && jv_array_length(jv_copy(items)) > 0) {
		jv shell = JV_OBJECT(jv_string("kind"), jv_string(t->list_kind), jv_string("apiVersion"),
				     jv_string(t->api_version), jv_string("metadata"), jv_copy(md), jv_string("items"),
				     jv_array());

		/* as answer() orders it */
		*text = list_text(t, ksim_canonical(shell), jv_copy(items), c.caches, text_len);
		if (*text) {
			jv_free(md);
			jv_free(items);
			*out = jv_invalid();
		} else {
			*out = JV_OBJECT(jv_string("kind"), jv_string(t->list_kind), jv_string("apiVersion"),
					 jv_string(t->api_version), jv_string("metadata"), md, jv_string("items"), items);
		}
	} else {
		*out = JV_OBJECT(jv_string("kind"), jv_string(t->list_kind), jv_string("apiVersion"),
				 jv_string(t->api_version), jv_string("metadata"), md, jv_string("items"), items);
	}
	free(c.caches);
	free(token);
	free(after);
	free(c.last_key);
	ksim_selector_free(c.ls);
	ksim_selector_free(c.fs);
	ksim_shard_selector_free(c.shard);
	return 200;
bad:
	free(after);
	free(c.caches);
	ksim_selector_free(c.ls);
	ksim_selector_free(c.fs);
	ksim_shard_selector_free(c.shard);
	jv_free(c.items);
	return fail;
}

int do_get(const struct ksim_request *rq, const struct route *r, jv *out)
{
	const char *rvs = query(rq, "resourceVersion");
	jv obj;

	if (rvs && *rvs) {
		char *end;
		unsigned long long n = strtoull(rvs, &end, 10);

		if (!*end && n > ksim.rv) {
			*out = ksim_too_large_rv(n);
			return 504;
		}
	}
	obj = ksim_store_get(r->t->gr, r->ns, r->name);
	if (!jv_is_valid(obj)) {
		*out = not_found(r->t, r->name);
		return 404;
	}
	if (wants_table(rq)) {
		char rvbuf[32];

		snprintf(rvbuf, sizeof(rvbuf), "%llu", (unsigned long long)ksim.rv);
		*out = ksim_table(r->t, JV_ARRAY(present(r->t, jv_copy(obj))), rvbuf, NULL, include_object(rq));
	} else {
		*out = present(r->t, jv_copy(obj));
	}
	return 200;
}
