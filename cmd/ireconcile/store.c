/*
 * How the view keeps an object's text: compact JSON, and reading it back. A
 * child the program sees projected is read whole only to compare it again
 * after a change other than its status: it is kept deflated (a third of the
 * memory, with a dictionary per kind), with a digest to tell a new state;
 * what the program sees of it (its view), and an observed object's text, are
 * kept deflated too, against dictionaries of their own. Which objects are
 * kept is view.c's.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/sha.h>
#include <zlib.h>
#include "ireconcile.h"
#include "banned.h"

/* Texts shorter than this are kept as they are: deflate would gain too little to pay for itself. */
#define VIEW_DEFLATE_MIN 128

/* Whether the kind has a `project` (jq, or the list of fields kept). */
int projects(const struct kop_kind *k)
{
	return k->project || jv_get_kind(k->keep) == JV_KIND_ARRAY;
}

/* The digest of a child without what its writers other than us change
 * alone (status, resourceVersion): while it stays, so does its comparison
 * with a desired object that sets neither. From its text (len bytes at
 * text) without those two members, there or not, where a scan finds them (a
 * fraction of a walk of the parsed object); else from obj (borrowed)
 * without them. The two never meet: a text that cannot be scanned now
 * and can later only looks changed once, and is compared again. */
void child_digest(jv obj, const char *text, size_t len, unsigned char d[OBJ_DIG])
{
	static jv paths;
	static struct kop_buf cut = KOP_BUF_INIT;
	unsigned char full[KOP_JSON_DIGEST_LEN];
	jv m;

	if (!jv_is_valid(paths))
		paths = JV_ARRAY(JV_ARRAY(jv_string("status")),
				 JV_ARRAY(jv_string("metadata"), jv_string("resourceVersion")));
	if (text && kop_json_text_digest_cut(text, len, paths, &cut, full) == 0) {
		memcpy(d, full, OBJ_DIG);
		if (cut.cap > 1 << 20)
			kop_buf_release(&cut);
		return;
	}
	m = jv_object_get(jv_copy(obj), kop_json_key("metadata"));
	obj = jv_object_delete(jv_copy(obj), kop_json_key("status"));
	if (jv_get_kind(m) == JV_KIND_OBJECT)
		obj = jv_object_set(obj, kop_json_key("metadata"), jv_object_delete(m, kop_json_key("resourceVersion")));
	else
		jv_free(m);
	kop_json_digest(obj, full);
	memcpy(d, full, OBJ_DIG);
	jv_free(obj);
}

/* What struct obj keeps of the SHA-256 of len bytes at text. */
static void text_digest(const char *text, size_t len, unsigned char d[OBJ_DIG])
{
	unsigned char full[SHA256_DIGEST_LENGTH];

	SHA256((const unsigned char *)text, len, full);
	memcpy(d, full, OBJ_DIG);
}

/* Deflates len bytes at in into *out (allocated), with the dictionary dict
 * (NULL: none): its size, 0 on failure. One stream serves every call:
 * deflateInit allocates ~270 KB each time. Raw deflate: no zlib header nor
 * Adler-32 (a tenth of the work with a dictionary, which it sums too); the
 * text's length and digest are kept beside it. The stream writes into a
 * scratch buffer kept for the next call, and the result is allocated at its
 * size: a block allocated at the bound and shrunk would leave a free piece
 * behind each text kept, among the view's blocks, which the heap cannot
 * give back. */
size_t deflate_text(const char *in, size_t len, unsigned char **out, const struct zdict *dict)
{
	static z_stream z;
	static int ready;
	static struct kop_buf scratch = KOP_BUF_INIT;
	uLong cap;

	*out = NULL;
	if (!ready) {
		if (deflateInit2(&z, 1, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
			return 0;
		ready = 1;
	} else if (deflateReset(&z) != Z_OK) {
		return 0;
	}
	if (dict && dict->len && deflateSetDictionary(&z, dict->buf, (uInt)dict->len) != Z_OK)
		return 0;
	cap = deflateBound(&z, (uLong)len);
	scratch.len = 0;
	kop_buf_grow(&scratch, cap);
	z.next_in = (Bytef *)(uintptr_t)in;
	z.avail_in = (uInt)len;
	z.next_out = (Bytef *)scratch.buf;
	z.avail_out = (uInt)cap;
	if (deflate(&z, Z_FINISH) == Z_STREAM_END && z.total_out) {
		*out = kop_malloc(z.total_out);
		memcpy(*out, scratch.buf, z.total_out);
	}
	if (scratch.cap > (1u << 20))
		kop_buf_release(&scratch);	/* (an answer that large is rare: not kept) */
	return *out ? z.total_out : 0;
}

/*
 * A kind's dictionary: the first text of the kind deflated (its last 32 KB,
 * deflate's window), never changed after. Objects of one kind differ in
 * little, names mostly: with it a Deployment takes ~160 bytes, not ~550.
 */
static struct zdict *dict_of(const struct kop_kind *k)
{
	return &E.dicts[k == &E.prog.primary ? 0 : 1 + (k - E.prog.kinds)];
}

static struct zdict *vdict_of(const struct kop_kind *k)
{
	return &E.vdicts[k == &E.prog.primary ? 0 : 1 + (k - E.prog.kinds)];
}

/* d, made from text (its last 32 KB) if it is not yet. */
const struct zdict *dict_made(struct zdict *d, const char *text, size_t len)
{
	if (!d->buf) {
		if (len > 32768) {
			text += len - 32768;
			len = 32768;
		}
		d->buf = kop_malloc(len ? len : 1);
		memcpy(d->buf, text, len);
		d->len = len;
	}
	return d;
}

static const struct zdict *kind_dict(const struct kop_kind *k, const char *text, size_t len)
{
	return dict_made(dict_of(k), text, len);
}

/*
 * Keeps an object's text (its JSON, obj borrowed). One whose program sees a
 * projection of it (vtext) is read whole only to compare it again after a
 * change other than its status, or to render (a primary): it is kept
 * deflated, with a digest to tell a new state; a child also fingerprinted
 * (kop_json_fingerprint: a Secret's data as its digest), since it is only
 * ever compared. tdig: the text's digest when same_text made it, else NULL.
 */
void store_text(struct obj *o, jv obj, const char *text, size_t len, const unsigned char *tdig)
{
	free(o->text);
	o->text = NULL;
	o->len = len;
	o->zlen = 0;
	o->fp = 0;
	if (o->vtext || (o->kind->role == KOP_ROLE_OBSERVED && len >= VIEW_DEFLATE_MIN)) {
		unsigned char *z;
		const char *st = text;
		char *fptext = NULL;
		size_t slen = len, zlen;
		int changed = 0;

		if (o->kind->role == KOP_ROLE_CHILD && kop_json_fp_text_needed(text, len)) {
			jv f = kop_json_fingerprint(jv_copy(obj), &changed);

			if (changed)
				st = fptext = kop_json_dump_len(f, &slen);
			else
				jv_free(f);
		}
		zlen = deflate_text(st, slen, &z, kind_dict(o->kind, st, slen));
		if (zlen) {
			o->text = (char *)z;
			o->zlen = zlen;
			o->slen = slen;
			o->fp = o->kind->role == KOP_ROLE_CHILD;
			if (tdig)
				memcpy(o->tdig, tdig, sizeof(o->tdig));
			else
				text_digest(text, len, o->tdig);
			free(fptext);
			return;
		}
		free(fptext);
	}
	o->text = kop_strndup(text, len);
}

int same_text(const struct obj *o, const char *text, size_t len, unsigned char d[OBJ_DIG], const unsigned char **made)
{
	if (o->len != len)
		return 0;
	if (!o->zlen)
		return !memcmp(o->text, text, len);
	text_digest(text, len, d);
	*made = d;
	return !memcmp(d, o->tdig, OBJ_DIG);
}

/* Inflates size bytes deflated as zlen at zin with the dictionary dict (NULL:
 * none: the one deflate_text was given; a dictionary never changes once
 * made): the text, malloc'd and NUL-terminated, or NULL if unreadable. */
char *inflate_text(const unsigned char *zin, size_t zlen, size_t size, const struct zdict *dict)
{
	static z_stream z;
	static int ready;
	char *buf = kop_malloc(size + 1);

	if (!ready) {
		if (inflateInit2(&z, -15) != Z_OK)
			goto fail;
		ready = 1;
	} else if (inflateReset(&z) != Z_OK) {
		goto fail;
	}
	if (dict && dict->len && inflateSetDictionary(&z, dict->buf, (uInt)dict->len) != Z_OK)
		goto fail;
	z.next_in = (Bytef *)(uintptr_t)zin;
	z.avail_in = (uInt)zlen;
	z.next_out = (Bytef *)buf;
	z.avail_out = (uInt)size;
	if (inflate(&z, Z_FINISH) == Z_STREAM_END && z.total_out == size) {
		buf[size] = 0;
		return buf;
	}
fail:
	free(buf);
	return NULL;
}

/* The same, parsed; jv_invalid() if unreadable. */
jv inflate_parse(const unsigned char *zin, size_t zlen, size_t size, const struct zdict *dict)
{
	char *buf = inflate_text(zin, zlen, size, dict);
	jv v = buf ? kop_json_read(buf, size) : jv_invalid();

	free(buf);
	return v;
}

/*
 * A text to keep (len bytes, malloc'd, consumed) as it is kept: deflated
 * against d (made from it if it is the first) when long enough to gain, *zlen
 * its size; else as it is, *zlen 0. kept_parse reads it back.
 */
char *keep_text(char *text, size_t len, struct zdict *d, size_t *zlen)
{
	unsigned char *z;

	*zlen = len >= VIEW_DEFLATE_MIN ? deflate_text(text, len, &z, dict_made(d, text, len)) : 0;
	if (!*zlen)
		return text;
	free(text);
	return (char *)z;
}

/* A text keep_text kept (len: its length as JSON), parsed; jv_invalid() if unreadable. */
jv kept_parse(const char *kept, size_t zlen, size_t len, const struct zdict *d)
{
	if (!zlen)
		return kop_json_read(kept, len);
	return inflate_parse((const unsigned char *)kept, zlen, len, d);
}

/*
 * Keeps what the program sees of o (v, consumed) as compact JSON, deflated
 * against a dictionary of its kind's views when long enough to gain. A
 * Deployment's status, say, ~450 bytes, so takes ~130: the view is most of
 * what the view keeps (and an observed object's text, store_text).
 */
void store_view(struct obj *o, jv v)
{
	char *text = kop_json_dump_len(v, &o->vlen);

	text_digest(text, o->vlen, o->vdig);
	free(o->vtext);
	o->vtext = keep_text(text, o->vlen, vdict_of(o->kind), &o->vzlen);
}

/* What the program sees of o (caller owns it); jv_invalid() if it cannot be read back. */
jv parse_view(const struct obj *o)
{
	return kept_parse(o->vtext, o->vzlen, o->vlen, vdict_of(o->kind));
}

/*
 * Text of an object of kind k kept outside the view (shard.c's park),
 * malloc'd: deflated against k's dictionary when that pays (*zlen its size),
 * else as it is (*zlen 0). kind_parse reads it back.
 */
char *kind_deflate(const struct kop_kind *k, const char *text, size_t len, size_t *zlen)
{
	return keep_text(kop_strndup(text, len), len, dict_of(k), zlen);
}

jv kind_parse(const struct kop_kind *k, const char *text, size_t zlen, size_t len)
{
	return kept_parse(text, zlen, len, dict_of(k));
}

/* The object parsed (caller owns it), fingerprinted if o->fp; jv_invalid() if it cannot be read back. */
jv parse_obj(const struct obj *o)
{
	return kept_parse(o->text, o->zlen, o->zlen ? o->slen : o->len, dict_of(o->kind));
}
