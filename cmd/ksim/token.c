/*
 * ServiceAccount tokens: POST serviceaccounts/NAME/token (a TokenRequest,
 * answered as kube-apiserver's TokenREST.Create does) and the tokens it
 * issues, JWTs signed HS256 with a key made at start, which authenticate
 * as the ServiceAccount until they expire or the ServiceAccount (its uid)
 * is gone. Tokens are never logged.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include "api.h"
#include "banned.h"

#define ISSUER "https://kubernetes.default.svc.cluster.local"

static unsigned char key[32];
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void make_key(void)
{
	if (RAND_bytes(key, sizeof(key)) != 1)
		abort();	/* no randomness: nothing safe to sign with */
}

static char *b64url(const void *data, size_t len)
{
	char *s = kop_base64(data, len), *p;

	for (p = s; *p; p++)
		if (*p == '+')
			*p = '-';
		else if (*p == '/')
			*p = '_';
	for (p = s + strlen(s); p > s && p[-1] == '='; p--)
		p[-1] = 0;
	return s;
}

/* base64url (no padding) of n bytes at in: a heap buffer, NUL-terminated, or NULL. */
static char *b64url_decode(const char *in, size_t n, size_t *out_len)
{
	size_t pad = (4 - n % 4) % 4;
	char *s = kop_malloc(n + pad + 1);
	unsigned char *out = kop_malloc(n + pad + 1);
	int len;

	if (pad == 3) {
		free(s);
		free(out);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		s[i] = in[i] == '-' ? '+' : in[i] == '_' ? '/' : in[i];
	memset(s + n, '=', pad);
	s[n + pad] = 0;
	len = EVP_DecodeBlock(out, (unsigned char *)s, (int)(n + pad));
	free(s);
	if (len < 0 || strspn(in, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") < n) {
		free(out);
		return NULL;
	}
	*out_len = (size_t)len - pad;
	out[*out_len] = 0;
	return (char *)out;
}

static char *sign(const char *data, size_t len)
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int n = 0;

	pthread_once(&key_once, make_key);
	HMAC(EVP_sha256(), key, sizeof(key), (const unsigned char *)data, len, mac, &n);
	return b64url(mac, n);
}

static char *jwt(jv claims)
{
	jv h = jv_dump_string(JV_OBJECT(jv_string("alg"), jv_string("HS256"), jv_string("typ"), jv_string("JWT")), 0);
	jv c = jv_dump_string(claims, 0);
	char *hs = b64url(jv_string_value(h), strlen(jv_string_value(h)));
	char *cs = b64url(jv_string_value(c), strlen(jv_string_value(c)));
	struct kop_buf b = KOP_BUF_INIT;
	char *sig;

	kop_buf_addf(&b, "%s.%s", hs, cs);
	sig = sign(b.buf, b.len);
	kop_buf_addf(&b, ".%s", sig);
	free(sig);
	free(hs);
	free(cs);
	jv_free(h);
	jv_free(c);
	return kop_buf_detach(&b, NULL);
}

static void time_string(time_t t, char *buf)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static jv str_or_null(const char *s)
{
	return s ? jv_string(s) : jv_null();
}

/*
 * spec.boundObjectRef: a Pod (running as this ServiceAccount) or a Secret of
 * the namespace, which must exist (its uid, when given, matching). Its
 * claim, or jv_invalid() with *err and the code returned.
 */
static int bound_object(const char *ns, const char *sa, jv ref, jv *claim, jv *err)
{
	const char *av = ksim_str(ref, "apiVersion"), *kind = ksim_str(ref, "kind"), *name = ksim_str(ref, "name");
	const char *uid = ksim_str(ref, "uid"), *have_uid;
	const char *gr = NULL;
	jv obj;

	av = av ? av : "";
	kind = kind ? kind : "";
	name = name ? name : "";
	if (!strchr(av, '/') && !strcmp(kind, "Pod"))
		gr = "pods";
	else if (!strchr(av, '/') && !strcmp(kind, "Secret"))
		gr = "secrets";
	if (!gr) {
		struct kop_buf b = KOP_BUF_INIT;
		const char *slash = strchr(av, '/');

		/* schema.GroupVersionKind's String() */
		if (slash)
			kop_buf_addf(&b, "cannot bind token to object of type %.*s/%s, Kind=%s", (int)(slash - av), av,
				     slash + 1, kind);
		else
			kop_buf_addf(&b, "cannot bind token to object of type /%s, Kind=%s", av, kind);
		*err = bad_request(b.buf);
		kop_buf_release(&b);
		return 400;
	}
	obj = ksim_store_get(gr, ns, name);
	if (!jv_is_valid(obj)) {
		*err = not_found(ksim_type_find("", "v1", gr), name);
		return 404;
	}
	if (!strcmp(gr, "pods")) {
		const char *psa = ksim_str(obj, "spec.serviceAccountName");

		if (!psa || strcmp(psa, sa)) {
			struct kop_buf b = KOP_BUF_INIT;

			kop_buf_addf(&b, "cannot bind token for serviceaccount \"%s\" to pod running with different serviceaccount name.",
				     sa);
			*err = bad_request(b.buf);
			kop_buf_release(&b);
			return 400;
		}
	}
	have_uid = ksim_str(obj, "metadata.uid");
	if (uid && *uid && (!have_uid || strcmp(uid, have_uid))) {
		struct kop_buf b = KOP_BUF_INIT;

		kop_buf_addf(&b, "Operation cannot be fulfilled on %s \"%s\": the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated",
			     kind, name, uid);
		*err = ksim_status(409, "Conflict", b.buf,
				   JV_OBJECT(jv_string("name"), jv_string(name), jv_string("kind"), jv_string(kind)));
		kop_buf_release(&b);
		return 409;
	}
	*claim = JV_OBJECT(jv_string("name"), jv_string(name), jv_string("uid"), str_or_null(have_uid));
	return 0;
}

int ksim_token_request(const struct ksim_request *rq, const struct route *r, jv *out)
{
	const char *sa_uid;
	char now_s[32], exp_s[32], jti[37];
	jv sa, obj, secs, auds, ref, bound = jv_null(), claims, ko;
	double n;
	time_t now;
	int code, rc;
	char *tok;
	struct kop_buf sub = KOP_BUF_INIT;

	if (strcmp(rq->method, "POST")) {
		*out = ksim_status(405, "MethodNotAllowed", "the server does not allow this method on the requested resource",
				   jv_object());
		return 405;
	}
	if ((rc = ksim_proto_as(rq, "authentication.k8s.io/v1", "TokenRequest", &obj, out)) < 0)
		return status_code(*out);
	if (!rc && parse_body(rq, &obj, out) < 0)
		return status_code(*out);
	if (jv_get_kind(obj) != JV_KIND_OBJECT) {
		jv_free(obj);
		*out = bad_request("the body of the request is not a TokenRequest object");
		return 400;
	}
	{
		const char *kind = ksim_str(obj, "kind");

		if (kind && *kind && strcmp(kind, "TokenRequest")) {
			struct kop_buf b = KOP_BUF_INIT;

			kop_buf_addf(&b, "the kind in the data (%s) does not match the expected kind (TokenRequest)", kind);
			*out = bad_request(b.buf);
			kop_buf_release(&b);
			jv_free(obj);
			return 400;
		}
	}
	sa = ksim_store_get("serviceaccounts", r->ns, r->name);
	if (!jv_is_valid(sa)) {
		jv_free(obj);
		*out = not_found(r->t, r->name);
		return 404;
	}
	sa_uid = ksim_str(sa, "metadata.uid");
	secs = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("spec"), jv_string("expirationSeconds")));
	n = jv_get_kind(secs) == JV_KIND_NUMBER ? jv_number_value(secs) : 3600;
	jv_free(secs);
	if (n < 600 || n > 4294967296.0) {
		struct kop_buf b = KOP_BUF_INIT;
		struct ksim_type tt = *r->t;
		char g[] = "authentication.k8s.io", k[] = "TokenRequest";

		kop_buf_addf(&b, "Invalid value: %.0f: may not specify a duration %s", n,
			     n < 600 ? "less than 10 minutes" : "larger than 2^32 seconds");
		/* NewInvalid(TokenRequest.authentication.k8s.io, "", errs) */
		tt.group = g;
		tt.kind = k;
		*out = invalid(&tt, "", JV_ARRAY(cause("FieldValueInvalid", b.buf, "spec.expirationSeconds")));
		kop_buf_release(&b);
		jv_free(obj);
		return 422;
	}
	auds = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("spec"), jv_string("audiences")));
	if (jv_get_kind(auds) != JV_KIND_ARRAY || !jv_array_length(jv_copy(auds))) {
		jv_free(auds);
		auds = JV_ARRAY(jv_string(ISSUER));
	}
	ref = jv_getpath(jv_copy(obj), JV_ARRAY(jv_string("spec"), jv_string("boundObjectRef")));
	if (jv_get_kind(ref) == JV_KIND_OBJECT && (code = bound_object(r->ns, r->name, ref, &bound, out))) {
		jv_free(ref);
		jv_free(auds);
		jv_free(obj);
		return code;
	}
	now = time(NULL);
	time_string(now, now_s);
	time_string(now + (time_t)n, exp_s);
	ksim_uuid(jti);
	kop_buf_addf(&sub, "system:serviceaccount:%s:%s", r->ns, r->name);
	ko = JV_OBJECT(jv_string("namespace"), jv_string(r->ns), jv_string("serviceaccount"),
		       JV_OBJECT(jv_string("name"), jv_string(r->name), jv_string("uid"), str_or_null(sa_uid)));
	if (jv_is_valid(bound) && jv_get_kind(bound) == JV_KIND_OBJECT)
		ko = jv_object_set(ko, jv_string(!strcmp(ksim_str(ref, "kind"), "Pod") ? "pod" : "secret"), bound);
	else
		jv_free(bound);
	jv_free(ref);
	claims = JV_OBJECT(jv_string("aud"), jv_copy(auds), jv_string("exp"), jv_number((double)(now + (time_t)n)),
			   jv_string("iat"), jv_number((double)now), jv_string("iss"), jv_string(ISSUER),
			   jv_string("jti"), jv_string(jti), jv_string("kubernetes.io"), ko, jv_string("nbf"),
			   jv_number((double)now), jv_string("sub"), jv_string(sub.buf));
	kop_buf_release(&sub);
	tok = jwt(claims);
	obj = jv_object_set(obj, jv_string("kind"), jv_string("TokenRequest"));
	obj = jv_object_set(obj, jv_string("apiVersion"), jv_string("authentication.k8s.io/v1"));
	{
		jv meta = jv_object_get(jv_copy(obj), jv_string("metadata"));

		if (jv_get_kind(meta) != JV_KIND_OBJECT) {
			jv_free(meta);
			meta = jv_object();
		}
		if (!ksim_str(meta, "name"))
			meta = jv_object_set(meta, jv_string("name"), jv_string(r->name));
		if (!ksim_str(meta, "namespace"))
			meta = jv_object_set(meta, jv_string("namespace"), jv_string(r->ns));
		if (!ksim_str(meta, "uid") && sa_uid)
			meta = jv_object_set(meta, jv_string("uid"), jv_string(sa_uid));
		meta = jv_object_set(meta, jv_string("creationTimestamp"), jv_string(now_s));
		obj = jv_object_set(obj, jv_string("metadata"), meta);
	}
	obj = jv_setpath(obj, JV_ARRAY(jv_string("spec"), jv_string("audiences")), auds);
	obj = jv_setpath(obj, JV_ARRAY(jv_string("spec"), jv_string("expirationSeconds")), jv_number(n));
	obj = jv_object_set(obj, jv_string("status"),
			    JV_OBJECT(jv_string("token"), jv_string(tok), jv_string("expirationTimestamp"),
				      jv_string(exp_s)));
	OPENSSL_cleanse(tok, strlen(tok));
	free(tok);
	*out = obj;
	return 201;
}

/*
 * A bearer token ksim issued: 1 with *ns and *name (heap strings) of a
 * ServiceAccount it is valid for now; -1 for one ksim signed that is no
 * longer valid (expired, or its ServiceAccount gone); 0 for any other token.
 */
int ksim_token_authenticate(const char *token, char **ns, char **name)
{
	const char *d1 = strchr(token, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
	char *sig, *payload;
	size_t plen;
	jv claims, sa, ko;
	const char *cns, *cname, *cuid, *uid;
	double exp, nbf, now = (double)time(NULL);
	int ok;

	if (!d1 || !d2 || strchr(d2 + 1, '.'))
		return 0;
	sig = sign(token, (size_t)(d2 - token));
	ok = strlen(sig) == strlen(d2 + 1) && !CRYPTO_memcmp(sig, d2 + 1, strlen(sig));
	free(sig);
	if (!ok)
		return 0;
	if (!(payload = b64url_decode(d1 + 1, (size_t)(d2 - d1 - 1), &plen)))
		return -1;
	claims = jv_parse_sized(payload, (int)plen);
	free(payload);
	if (jv_get_kind(claims) != JV_KIND_OBJECT) {
		jv_free(claims);
		return -1;
	}
	{
		jv e = jv_object_get(jv_copy(claims), jv_string("exp"));
		jv b = jv_object_get(jv_copy(claims), jv_string("nbf"));

		exp = jv_get_kind(e) == JV_KIND_NUMBER ? jv_number_value(e) : 0;
		nbf = jv_get_kind(b) == JV_KIND_NUMBER ? jv_number_value(b) : now + 1;
		jv_free(e);
		jv_free(b);
	}
	ko = jv_object_get(jv_copy(claims), jv_string("kubernetes.io"));	/* (a key with a dot) */
	jv_free(ko);	/* claims holds it */
	cns = ksim_str(ko, "namespace");
	cname = ksim_str(ko, "serviceaccount.name");
	cuid = ksim_str(ko, "serviceaccount.uid");
	if (now >= exp || now < nbf || !cns || !cname || !cuid) {
		jv_free(claims);
		return -1;
	}
	ksim_lock();
	sa = ksim_store_get("serviceaccounts", cns, cname);
	uid = jv_is_valid(sa) ? ksim_str(sa, "metadata.uid") : NULL;
	ok = uid && !strcmp(uid, cuid);
	ksim_unlock();
	if (ok) {
		*ns = kop_strdup(cns);
		*name = kop_strdup(cname);
	}
	jv_free(claims);
	return ok ? 1 : -1;
}
