/*
 * How the view keeps an object's text: compact JSON, and reading it back. A
 * child the program sees projected is read whole only to compare it again
 * after a change other than its status: it is kept compressed (a third of the
 * memory, with a dictionary per kind), with a digest to tell a new state;
 * what the program sees of it (its view), and an observed object's text, are
 * kept compressed too, against dictionaries of their own. Which objects are
 * kept is view.c's.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/sha.h>
#include <zstd.h>
#include "ireconcile.h"
#include "banned.h"

/* Texts shorter than this are kept as they are: compressing would gain too little to pay for itself. */
#define COMPRESS_MIN 128

/* Whether the kind has a `project` (jq, or the list of fields kept). */
int projects(const struct kop_kind *k)
{
	return k->project || jv_get_kind(k->keep) == JV_KIND_ARRAY;
}

/* The digest of a child without what its writers other than us change
 * alone (status, resourceVersion, and the fields its kind k, one of
 * E.prog.kinds, `ignore`s):
 * while it stays, so does its comparison with a desired object that sets
 * none of them. From its text (len bytes at text) without those members,
 * there or not, where a scan finds them (a fraction of a walk of the parsed
 * object); else from obj (borrowed; jv_invalid(): the text's value, read
 * then) without them. The two never meet: a
 * text that cannot be scanned now and can later only looks changed once,
 * and is compared again. */
void child_digest(const struct kop_kind *k, jv obj, const char *text, size_t len, unsigned char d[OBJ_DIG])
{
	static jv *paths;	/* per kind of E.prog.kinds: what is cut, made once */
	static struct kop_buf cut = KOP_BUF_INIT;
	unsigned char full[KOP_JSON_DIGEST_LEN];
	size_t ki = (size_t)(k - E.prog.kinds);

	if (!paths) {
		size_t i;

		paths = kop_malloc(E.prog.nkinds * sizeof(*paths));
		for (i = 0; i < E.prog.nkinds; i++)
			paths[i] = jv_invalid();
	}
	if (!jv_is_valid(paths[ki])) {
		paths[ki] = JV_ARRAY(JV_ARRAY(jv_string("status")),
				     JV_ARRAY(jv_string("metadata"), jv_string("resourceVersion")));
		if (jv_get_kind(k->ignore) == JV_KIND_ARRAY)
			paths[ki] = jv_array_concat(paths[ki], jv_copy(k->ignore));
	}
	kop_json_digest_cut(text, len, obj, paths[ki], &cut, full);
	memcpy(d, full, OBJ_DIG);
}

/* What struct obj keeps of the SHA-256 of len bytes at text. */
static void text_digest(const char *text, size_t len, unsigned char d[OBJ_DIG])
{
	unsigned char full[SHA256_DIGEST_LENGTH];

	kop_sha256(text, len, full);
	memcpy(d, full, OBJ_DIG);
}

/*
 * Compresses len bytes at in into *out (allocated), with the dictionary dict
 * (NULL: none): its size, 0 on failure. zstd at level 1, the dictionary
 * given as a prefix (raw content: nothing is built of it beforehand, and
 * nothing kept per dictionary), frames without the content size, checksum
 * or dictionary ID (the text's length and digest are kept beside it), nor
 * the magic number every frame starts with (ZSTD_MAGICNUMBER: 4 bytes of
 * each of the 60,000 texts and views of 1,000 instances; expand_text puts it
 * back). One context serves every call. The frame is written into a scratch
 * buffer kept for the next call, and the result allocated at its size: a
 * block allocated at the bound and shrunk would leave a free piece behind
 * each text kept, among the view's blocks, which the heap cannot give back.
 */
#define MAGIC_LEN 4
static const unsigned char zmagic[MAGIC_LEN] = { 0x28, 0xb5, 0x2f, 0xfd };	/* ZSTD_MAGICNUMBER, little-endian */

size_t compress_text(const char *in, size_t len, unsigned char **out, const struct zdict *dict)
{
	static ZSTD_CCtx *cc;
	static struct kop_buf scratch = KOP_BUF_INIT;
	size_t cap, n;

	*out = NULL;
	if (!cc) {
		if (!(cc = ZSTD_createCCtx()))
			return 0;
		if (ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, 1)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 0)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_dictIDFlag, 0))) {
			ZSTD_freeCCtx(cc);
			cc = NULL;
			return 0;
		}
	}
	/* (a prefix serves the next frame only) */
	if (dict && dict->len && ZSTD_isError(ZSTD_CCtx_refPrefix(cc, dict->buf, dict->len)))
		return 0;
	cap = ZSTD_compressBound(len);
	scratch.len = 0;
	kop_buf_grow(&scratch, cap);
	n = ZSTD_compress2(cc, scratch.buf, cap, in, len);
	if (!ZSTD_isError(n) && n > MAGIC_LEN && !memcmp(scratch.buf, zmagic, MAGIC_LEN)) {
		n -= MAGIC_LEN;
		*out = kop_malloc(n);
		memcpy(*out, scratch.buf + MAGIC_LEN, n);
	} else {
		/* (back to a frame's start: a context an error left within a frame would
		 * refuse the next prefix; the prefix itself went as this frame began) */
		ZSTD_CCtx_reset(cc, ZSTD_reset_session_only);
	}
	if (scratch.cap > (1u << 20))
		kop_buf_release(&scratch);	/* (an answer that large is rare: not kept) */
	return *out ? n : 0;
}

static struct kdict *dict_of(const struct kop_kind *k)
{
	return &E.dicts[k == &E.prog.primary ? 0 : 1 + (k - E.prog.kinds)];
}

static struct kdict *vdict_of(const struct kop_kind *k)
{
	return &E.vdicts[k == &E.prog.primary ? 0 : 1 + (k - E.prog.kinds)];
}

/* d, made from text (its last 32 KB) if it is not yet. */
const struct zdict *dict_made(struct zdict *d, const char *text, size_t len)
{
	static const unsigned char dict_magic[4] = { 0x37, 0xa4, 0x30, 0xec };	/* ZSTD_MAGIC_DICTIONARY */

	if (!d->buf) {
		if (len > 32768) {
			text += len - 32768;
			len = 32768;
		}
		/* (expand_text's reader would take a dictionary that starts so for one of zstd's own:
		 * bytes no UTF-8 holds, a cut within a text of other bytes could) */
		if (len >= 4 && !memcmp(text, dict_magic, 4)) {
			text++;
			len--;
		}
		d->buf = kop_malloc(len ? len : 1);
		memcpy(d->buf, text, len);
		d->len = len;
	}
	return d;
}

/*
 * The dictionary of kd to compress text with, its generation in *gen. Objects
 * of one kind differ in little, names mostly: against one of them a Deployment
 * takes ~160 bytes, not ~550. The first is the kind's first text (its last 32
 * KB). That one is most often an object as created, without the status its
 * controller writes next: once a text of the kind comes a quarter longer than
 * it, that text makes the second, which the texts compressed from then on use
 * (at N = 1,000 converged IoT instances, 0.7 to 1 MB less). A dictionary, once
 * made, never changes: the texts compressed with the first keep it.
 */
static const struct zdict *kind_dict(struct kdict *kd, const char *text, size_t len, unsigned char *gen)
{
	if (!kd->n || (kd->n < KDICT_GENS && len - len / 5 > kd->from)) {
		dict_made(&kd->gen[kd->n++], text, len);
		kd->from = len;
	}
	*gen = (unsigned char)(kd->n - 1);
	return &kd->gen[kd->n - 1];
}

/* A text (len bytes, malloc'd, consumed) kept against d as it is (unused when len is too short to gain). */
static char *keep_against(char *text, size_t len, const struct zdict *d, size_t *zlen)
{
	unsigned char *z;

	*zlen = len >= COMPRESS_MIN ? compress_text(text, len, &z, d) : 0;
	if (!*zlen)
		return text;
	free(text);
	return (char *)z;
}

/* A text of kd's kind (len bytes, malloc'd, consumed) kept as keep_text keeps it, against the
 * dictionary kind_dict gives (*gen its generation). */
static char *keep_kind_text(char *text, size_t len, struct kdict *kd, size_t *zlen, unsigned char *gen)
{
	*gen = 0;
	return keep_against(text, len, len >= COMPRESS_MIN ? kind_dict(kd, text, len, gen) : NULL, zlen);
}

/*
 * Keeps an object's text (its JSON; obj borrowed, its value, or jv_invalid():
 * read from the text if needed). One whose program sees a
 * projection of it (vtext) is read whole only to compare it again after a
 * change other than its status, or to render (a primary): it is kept
 * compressed, with a digest to tell a new state; a child also fingerprinted
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
	if (o->vtext || (o->kind->role == KOP_ROLE_OBSERVED && len >= COMPRESS_MIN)) {
		unsigned char *z;
		const char *st = text;
		char *fptext = NULL;
		size_t slen = len, zlen;
		int changed = 0;

		if (o->kind->role == KOP_ROLE_CHILD && kop_json_fp_text_needed(text, len)) {
			jv f = kop_json_fingerprint(jv_is_valid(obj) ? jv_copy(obj) : kop_json_read(text, len), &changed);

			if (changed)
				st = fptext = kop_json_dump_len(f, &slen);
			else
				jv_free(f);
		}
		zlen = compress_text(st, slen, &z, kind_dict(dict_of(o->kind), st, slen, &o->tgen));
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

/* Expands size bytes compressed as zlen at zin with the dictionary dict
 * (NULL: none: the one compress_text was given; a dictionary never changes
 * once made): the text, malloc'd and NUL-terminated, or NULL if unreadable. */
char *expand_text(const unsigned char *zin, size_t zlen, size_t size, const struct zdict *dict)
{
	static ZSTD_DCtx *dc;
	static struct kop_buf frame = KOP_BUF_INIT;
	char *buf;
	size_t n;

	if (!dc && !(dc = ZSTD_createDCtx()))
		return NULL;
	frame.len = 0;
	kop_buf_add(&frame, zmagic, MAGIC_LEN);
	kop_buf_add(&frame, zin, zlen);
	buf = kop_malloc(size + 1);
	/* (a dictionary of raw content is referenced as it is: nothing is built of it) */
	n = ZSTD_decompress_usingDict(dc, buf, size + 1, frame.buf, frame.len, dict ? dict->buf : NULL,
				      dict ? dict->len : 0);
	if (frame.cap > (1u << 20))
		kop_buf_release(&frame);
	if (ZSTD_isError(n) || n != size) {
		free(buf);
		return NULL;
	}
	buf[size] = 0;
	return buf;
}

/* The same, parsed; jv_invalid() if unreadable. */
jv expand_parse(const unsigned char *zin, size_t zlen, size_t size, const struct zdict *dict)
{
	char *buf = expand_text(zin, zlen, size, dict);
	jv v = buf ? kop_json_read(buf, size) : jv_invalid();

	free(buf);
	return v;
}

/*
 * A text to keep (len bytes, malloc'd, consumed) as it is kept: compressed
 * against d (made from it if it is the first) when long enough to gain, *zlen
 * its size; else as it is, *zlen 0. kept_parse reads it back.
 */
char *keep_text(char *text, size_t len, struct zdict *d, size_t *zlen)
{
	return keep_against(text, len, len >= COMPRESS_MIN ? dict_made(d, text, len) : NULL, zlen);
}


/* A text keep_text kept (len: its length as JSON), parsed; jv_invalid() if unreadable. */
jv kept_parse(const char *kept, size_t zlen, size_t len, const struct zdict *d)
{
	if (!zlen)
		return kop_json_read(kept, len);
	return expand_parse((const unsigned char *)kept, zlen, len, d);
}

/*
 * Keeps what the program sees of o (v, consumed) as compact JSON, compressed
 * against a dictionary of its kind's views when long enough to gain. A
 * Deployment's status, say, ~450 bytes, so takes ~130: the view is most of
 * what the view keeps (and an observed object's text, store_text).
 */
void store_view(struct obj *o, jv v)
{
	size_t len, zlen;
	char *text = kop_json_dump_len(v, &len);

	text_digest(text, len, o->vdig);
	free(o->vtext);
	o->vtext = keep_kind_text(text, len, vdict_of(o->kind), &zlen, &o->vgen);
	o->vlen = (uint32_t)len;
	o->vzlen = (uint32_t)zlen;
}

/* What the program sees of o (caller owns it); jv_invalid() if it cannot be read back. */
jv parse_view(const struct obj *o)
{
	return kept_parse(o->vtext, o->vzlen, o->vlen, &vdict_of(o->kind)->gen[o->vgen]);
}

/*
 * Text of an object of kind k kept outside the view (shard.c's park),
 * malloc'd: compressed against k's dictionary when that pays (*zlen its size),
 * else as it is (*zlen 0); *gen the dictionary's generation. kind_parse reads it back.
 */
char *kind_compress(const struct kop_kind *k, const char *text, size_t len, size_t *zlen, unsigned char *gen)
{
	return keep_kind_text(kop_strndup(text, len), len, dict_of(k), zlen, gen);
}

jv kind_parse(const struct kop_kind *k, const char *text, size_t zlen, size_t len, unsigned char gen)
{
	return kept_parse(text, zlen, len, &dict_of(k)->gen[gen]);
}

/* The object parsed (caller owns it), fingerprinted if o->fp; jv_invalid() if it cannot be read back. */
jv parse_obj(const struct obj *o)
{
	return kept_parse(o->text, o->zlen, o->zlen ? o->slen : o->len, &dict_of(o->kind)->gen[o->tgen]);
}
