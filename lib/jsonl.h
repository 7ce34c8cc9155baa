#ifndef KOP_JSONL_H
#define KOP_JSONL_H
/*
 * JSON Lines in and out, through libjq's jv.
 *
 * Reading is push-style so that one reader serves a file descriptor (stdin,
 * a recorded file) and a libcurl write callback (a watch body) alike: feed
 * bytes as they come, then pull values. Input is split on '\n'; each line
 * holds one JSON value (several values on one line are all returned; blank
 * lines are skipped). A malformed line, or one longer than the limit, is an
 * error that names its line number, and reading goes on with the next line:
 * one bad record never stops a stream.
 */
#include <stdio.h>
#include <jv.h>
#include "kop.h"

#define KOP_JSONL_MAX_LINE (32u << 20)	/* default line limit: 32 MiB */

struct kop_jsonl {
	struct kop_buf in;	/* bytes fed and not yet consumed */
	size_t start;		/* offset of the unconsumed part of in */
	size_t line;		/* number of the line the next value comes from (1-based) */
	size_t max_line;
	int skipping;		/* inside an over-long line: drop bytes up to the next '\n' */
	size_t skip_line;	/* its number, for the error */
	int eof;
	jv pending;		/* array of values parsed from the current line, not yet returned */
	size_t pending_line;
	int want_inexact;	/* set by a reader that writes what it reads (kapply): then inexact is kept */
	int fast;		/* set by a single-threaded reader: a line kop_json_read_fast takes is read by it
				   (its values share short strings, kop_json_key: they stay on the reading thread) */
	/* when set, each line is offered to take first (text[0..len), the reader's
	 * bytes, valid during the call): 1 it took the line, which is not parsed;
	 * 0 it is read as any other (kwatch's watches: an event passed on as text);
	 * -1 not now: kop_jsonl_next returns 0 and offers the line again next time */
	int (*take)(void *ctx, const char *text, size_t len);
	void *take_ctx;
	/* with want_inexact, the place of that line's first integer a double cannot hold
	 * (kop_json_inexact, kop_json_place: "line 3, column 40: object.spec.replicas"), never
	 * its digits, or ""; KOP_ERRLEN bytes, NULL until a line is read (a thousand readers
	 * of kwatch's need none) */
	char *inexact;
};

void kop_jsonl_init(struct kop_jsonl *r, size_t max_line);
void kop_jsonl_release(struct kop_jsonl *r);
void kop_jsonl_feed(struct kop_jsonl *r, const char *data, size_t len);
/*
 * Lets the line buffer go when every byte fed has been read and it has
 * grown past KOP_JSONL_TRIM_CAP: for a reader fed by many quiet streams
 * (kwatch's watch per namespace), whose buffers would otherwise each keep
 * the size of the largest burst they ever held.
 */
#define KOP_JSONL_TRIM_CAP 4096
void kop_jsonl_trim(struct kop_jsonl *r);
/* No more input: a last line without '\n' is still read. */
void kop_jsonl_eof(struct kop_jsonl *r);
/*
 * 1: *out is the next value (caller owns it), *lineno its line.
 * 0: need more input (or, after kop_jsonl_eof, the end), or take said "not
 * now" of the next line (it is offered again at the next call).
 * -1: a bad line, described in err ("line 12: ..."); call again to go on.
 */
int kop_jsonl_next(struct kop_jsonl *r, jv *out, size_t *lineno, char *err);
/*
 * Whether the JSON text s (len bytes) holds an integer literal beyond
 * 2^53 in magnitude (outside strings): libjq 1.6 keeps every number as a
 * double, so such a value would be read, and written again, rounded
 * (9007199254740993 becomes 9007199254740992). Copies the first one (cut)
 * into what (whatlen >= 2), its offset in s into *at (when not NULL), and
 * returns 1; 0 if none.
 */
int kop_json_inexact(const char *s, size_t len, char *what, size_t whatlen, size_t *at);
/*
 * The message of invalid (consumed), the result of a failed jv_parse or
 * jv_parse_sized, in buf: without what jq 1.6 appends to it, the whole text
 * it was given ("… (while parsing '…')"), which may hold a secret (a
 * credential plugin's output, a list of Secrets). Returns buf.
 */
const char *kop_json_parse_error(jv invalid, char *buf, size_t size);
/*
 * Field paths in messages, as kube-apiserver writes them: "spec.ports[0].port",
 * a key that is not a plain name (letters, digits, '-', '_') in brackets:
 * "data[tls.crt]"; control bytes as \xNN, a key past 64 bytes cut ("...").
 * kop_json_path_key appends one key to b.
 */
void kop_json_path_key(struct kop_buf *b, const char *key, size_t n);
/*
 * The path of the value that starts at offset at of the JSON text s (len
 * bytes, JSON that libjq read) appended to b; nothing for a value at the
 * top. For messages that must name a value's place without its bytes.
 */
void kop_json_path_at(const char *s, size_t len, size_t at, struct kop_buf *b);
/* How much of a long path a message shows: its last bytes, after "...". */
#define KOP_PATH_SHOWN 160
/*
 * The place of the value at offset at of the JSON text s (len bytes, JSON
 * that libjq read), whose first line is line first of the input, in buf as
 * "line N, column C: PATH" (C in characters, as libyaml counts columns;
 * PATH as kop_json_path_at gives it, cut to KOP_PATH_SHOWN; "line N,
 * column C" for a value at the top). For messages that must name a value
 * by its place, not its bytes. Returns buf.
 */
const char *kop_json_place(const char *s, size_t len, size_t at, size_t first, char *buf, size_t size);
/*
 * jq 1.6's parser ends a message with " at line L, column C", counted in the
 * text it was given (C: the bytes of line L read so far; 0 when it stopped
 * on the newline ending line L-1), which is one line of the input, or a few.
 * msg (borrowed), the message of a failed jv_parser_next on text[0..len),
 * whose first line is line first of the input, in buf as "line N, column C:
 * MESSAGE" counted in the input, or "line N: MESSAGE" (N = first) when msg
 * names no place. Returns buf.
 */
const char *kop_json_parser_error(const char *msg, const char *text, size_t len, size_t first, char *buf,
				  size_t size);
/* Reads once from fd into the reader: >0 bytes read, 0 end of file (eof set), -1 error (errno). */
ssize_t kop_jsonl_read_fd(struct kop_jsonl *r, int fd);

/*
 * Writes v (consumed) as one compact line and flushes, so a record is never
 * left half-written in a pipe. -1 with errno on a write error (EPIPE
 * included); the caller decides what that means.
 */
int kop_jsonl_write(FILE *f, jv v);
/* The same of a line's text (len bytes, no '\n'), written as it is: a line a stage passes on unread. */
int kop_jsonl_write_text(FILE *f, const char *text, size_t len);
/*
 * A stage-protocol line (len bytes at text, json_scan.c) read for where it
 * goes alone, the values of its other members skipped (brackets and strings
 * checked, not parsed), so that a stage passes a line that is not its own on
 * as its text: 0 and *op, its "op", and *primary, its "primary" (NULL when
 * absent, and *primary when no string; allocated), *barrier whether it has a
 * "barrier"; 1 as soon as the first "op" met is one of own (a NULL-ended
 * list; nothing made, the rest not read): the caller's own, to parse; -1
 * (nothing made) when it must be parsed: no one object, a NUL byte, a member
 * of those twice, an "op" that is no string, an escape in a key or in either
 * string, or a "primary" with a byte beyond ASCII (a parse makes U+FFFD of
 * one no UTF-8 holds). The line itself goes on as it came, such bytes too.
 */
int kop_line_route(const char *text, size_t len, const char *const *own, char **op, char **primary, int *barrier);
/*
 * The value of the JSON text s[0..len), exactly as jv_parse_sized gives it,
 * in two fifths of its work for the texts kop_json_dump writes: compact, ASCII
 * (escapes up to \u007f). Any other text (white space, other bytes or
 * escapes, nesting past 128, more than one value, an error) is read by
 * jv_parse_sized itself, so the answer is always libjq's. For the texts a
 * tool keeps and reads again. Its strings of up to 32 bytes are shared
 * (kop_json_key): the value stays on the calling thread.
 */
jv kop_json_read(const char *s, size_t len);
/* kop_json_read's own reader alone: 0 and *out (caller owns it) when it took
 * the text, -1 (nothing made) when the text is one it leaves to libjq. */
int kop_json_read_fast(const char *s, size_t len, jv *out);
/*
 * The same reader on the JSON object text s[0..len), building only the
 * members pick (borrowed, an object) names: a member pick maps to true is
 * read whole, to false passed over, to an object read as that object says
 * (whole when its value is no object); a member it does not name is read
 * whole when rest, else passed over. What is passed over is checked as the
 * reader checks what it reads, never built: 0 and *out, or -1 (nothing made)
 * when the reader would leave the whole text to libjq.
 */
int kop_json_read_pick(const char *s, size_t len, jv pick, int rest, jv *out);
/*
 * The string fields names[0..n) of the metadata of the JSON object text
 * (json_scan.c), read without building the rest: 0 and *out =
 * {"metadata":{NAME: "...", ...}} (those present as strings), or -1 (nothing
 * made) when the text is not one well-formed object, holds "metadata" twice,
 * a key with an escape at its top or in its metadata, or a wanted string
 * holds an escape: then read it whole.
 */
int kop_json_meta(const char *text, size_t len, const char *const *names, size_t n, jv *out);
/*
 * A watch event's JSON text, {"type":"T","object":{...}} (json_scan.c), read
 * without building the object: 0 and *ev (pointers into text; ev->meta the
 * caller's), or -1 (nothing made) when the text is not one such object whose
 * object has a kind, an apiVersion and a metadata object, holds one of those
 * (or a member read here) twice, holds an escape in the type or a metadata
 * string read here, or in a key of the event, its object or its metadata
 * ("obj\u0065ct" is "object" once parsed), or a NUL byte: then read it whole. Inside the values skipped, only the
 * brackets and strings are checked, not every byte: the text is passed on for
 * a reader that parses it.
 */
struct kop_json_event {
	const char *type;	/* its bytes, type_len of them */
	size_t type_len;
	const char *obj;	/* the object's text, obj_len bytes */
	size_t obj_len;
	size_t cut_b, cut_e;	/* obj[cut_b..cut_e): metadata.managedFields with a comma beside it
				   (equal: none) */
	const char *kind, *api_version;	/* the strings' bytes as written (escapes too), */
	size_t kind_len, api_version_len;	/* kind_len and api_version_len of them */
	jv meta;		/* {"metadata":{name, namespace, uid, resourceVersion: those present as strings}} */
};
int kop_json_event(const char *text, size_t len, struct kop_json_event *ev);
/*
 * The texts of the values at paths (an array of at most KOP_JSON_SPANS_MAX
 * arrays of at most 31 keys, borrowed) in the JSON object text (json_scan.c): 0 and out[i] for
 * path i (b NULL when it is not there, or a value on its way is no object),
 * or -1 (nothing made) when the text is not one such object, holds a NUL
 * byte, a key with an escape in an object the paths walk through, or a key
 * of a path twice in one object, or when a path is empty, too long or holds
 * U+FFFD (what a parse makes of bytes that are no UTF-8): then read it whole.
 * Of what is skipped, only the brackets and strings are checked.
 */
#define KOP_JSON_SPANS_MAX 64
struct kop_json_span {
	const char *b;
	size_t n;
};
int kop_json_spans(const char *text, size_t len, jv paths, struct kop_json_span *out);
/* A span that is a JSON string of ASCII without an escape (its bytes are what a parse gives):
 * those bytes, NUL-ended, malloc'd; NULL when it is none (absent, no string, or not so). */
char *kop_json_plain_string(const struct kop_json_span *sp);
/*
 * Whether the JSON text s[0..len) may be sent as it is in place of the text
 * libjq's parse and a dump would make of it, to a reader of JSON or of YAML
 * (json_verbatim.c): 0 when it is one value of compact JSON (RFC 8259, no
 * white space outside strings) whose strings are UTF-8 without DEL, \/ or a
 * \u beyond ASCII, whose object keys hold no escape and are each named once
 * in their object, whose numbers have at most 15 significant digits, no
 * exponent, no fraction ending in 0 and none below 1e-4, nested well within
 * libjq's limit; else -1, and a parse says what it means.
 */
int kop_json_verbatim(const char *s, size_t len);
/*
 * The JSON object text (len bytes at text) in *out without the members at
 * paths (as kop_json_spans takes them, borrowed), each cut with one comma
 * beside it, as kwatch cuts metadata.managedFields: what is left reads as
 * the object without them, whether they were there or not. 0, or -1 (*out
 * undefined) when kop_json_spans cannot say, or two members cut are side
 * by side (one comma between them) or one inside another.
 */
int kop_json_cut(const char *text, size_t len, jv paths, struct kop_buf *out);
/*
 * The texts of the elements of the JSON array text (json_scan.c), at most
 * max of them, in out: how many, or -1 when the text is not one array (or
 * holds more than max, or a NUL byte). Of the elements, only the brackets
 * and strings are checked: a whole parse of each says the rest.
 */
int kop_json_elements(const char *text, size_t len, struct kop_json_span *out, size_t max);
/* Compact JSON text of v (consumed), heap-allocated: the bytes jv_dump_string(v, 0) would give. */
char *kop_json_dump(jv v);
/* The same, its length in *len. */
char *kop_json_dump_len(jv v, size_t *len);
/* The same text appended to b. */
struct kop_buf;
void kop_json_dump_buf(struct kop_buf *b, jv v);

/*
 * The string at v.a (or v.a.b when b is not NULL), heap-allocated; NULL when
 * v is not an object or the member is missing or not a string. v is borrowed.
 */
char *kop_json_str(jv v, const char *a, const char *b);
/*
 * The string at o.key, borrowed: it lives as long as o does. NULL when o is
 * not an object or the member is missing or not a string. o is borrowed.
 */
const char *kop_json_cstr(jv o, const char *key);
/* v.key, or jv_invalid() when v (consumed) is not an object. */
jv kop_json_member(jv v, const char *key);
/*
 * jv_string(s) (s not NULL), shared when short: for object keys and other
 * strings made again and again, which libjq would check, allocate and hash
 * each time. Like kop_json_read's short strings, it is one of a table of the
 * calling thread's (json_read.c): a value holding it stays on that thread.
 */
jv kop_json_key(const char *s);
/*
 * From now on every thread shares the calling thread's table rather than
 * making one of its own (57 KB each): for a process whose threads touch jq
 * values only while they hold one lock (kstatus's writers). Called before
 * those threads start.
 */
void kop_json_key_share(void);
/*
 * SHA-256 of v (borrowed) as a tree: kinds, keys, numbers' bits and
 * strings, in iteration order, without making its text (a tenth of the time
 * of jv_dump_string). Equal digests mean equal values; equal values built
 * in another key order may give other digests (a cache key, not an identity).
 */
#define KOP_JSON_DIGEST_LEN 32
void kop_json_digest(jv v, unsigned char out[KOP_JSON_DIGEST_LEN]);
/* The same with each object's members in the order of their keys: equal
 * values (jv_equal) give equal digests, whatever order they were built in
 * (an object a server wrote back with its keys sorted). */
void kop_json_digest_equal(jv v, unsigned char out[KOP_JSON_DIGEST_LEN]);
/*
 * A digest of the JSON object obj (borrowed) without the members at paths
 * (borrowed, as kop_json_cut takes them), there or not: SHA-256 of its text
 * (len bytes at text) with them cut, where kop_json_cut can say (scratch is
 * the caller's, reused from call to call, given back once past 1 MB); else,
 * or without a text, kop_json_digest of obj with them deleted (whole, when
 * a member on the way is no object); obj jv_invalid(): the text's value, read
 * then (an object read in part, kop_json_read_pick). 0 when the text was
 * digested, -1 when the value was. Two texts with one digest hold the same object but for those
 * members; a value's other texts (spacing, key order), or a walk where a
 * text was digested, give other digests: a cache key, not an identity.
 */
int kop_json_digest_cut(const char *text, size_t len, jv obj, jv paths, struct kop_buf *scratch,
			unsigned char out[KOP_JSON_DIGEST_LEN]);

/*
 * Fields kept (a program's `project` list, kwatch's --keep): paths is an
 * array of paths, each an array of keys. kop_json_keep: obj (consumed)
 * reduced to them, each path whose value is there and not null, in the
 * order listed, copied whole, objects made on the way (paths borrowed).
 */
jv kop_json_keep(jv obj, jv paths);
/* The same of an object's JSON text, reading only the values kept
 * (kop_json_spans): 0 and *out, or -1 (nothing made) when the text must be
 * read whole first. */
int kop_json_keep_text(const char *text, size_t len, jv paths, jv *out);
/* pick (consumed; kop_json_read_pick's) with each of paths (borrowed) read
 * whole as well: what an object must hold for kop_json_keep of it to be the
 * same as of the whole object. */
jv kop_json_keep_pick(jv pick, jv paths);
/* As one line of text: paths separated by ',', keys by '.', and '.', ',',
 * ':' and '\' in a key escaped with '\' ("metadata.labels.app\.kubernetes\.io/name"). */
void kop_fields_format(jv paths, struct kop_buf *b);
/* The text back into *paths (caller owns it); -1 with err naming it when a key is empty. */
int kop_fields_parse(const char *s, jv *paths, char *err);

/*
 * Fingerprints: a copy of a value that is only ever compared takes less
 * memory with its long strings (a Secret's data, a ConfigMap's files)
 * replaced by their SHA-256, "\u0000sha256:" and 64 hex digits. Every string
 * of KOP_JSON_FP_MIN bytes or more is replaced, and every one that starts
 * so already, so that in a fingerprinted value that prefix always marks a
 * fingerprint.
 */
#define KOP_JSON_FP_MIN 128
/* v (consumed) fingerprinted; *changed (may be NULL) set when a string was replaced. */
jv kop_json_fingerprint(jv v, int *changed);
/*
 * 0 when the value whose JSON text is the len bytes at text holds no string
 * kop_json_fingerprint would replace (every string, its escapes as written
 * and each byte above 0x7f counted as the 3 of U+FFFD, shorter than
 * KOP_JSON_FP_MIN bytes, none starting with NUL, no NUL byte at all in the
 * text): a scan of
 * its quotes, a fraction of a walk of the parsed value. 1 otherwise, or
 * when unsure.
 */
int kop_json_fp_text_needed(const char *text, size_t len);
/* Whether the string s (borrowed) equals the string fp (borrowed) of a fingerprinted value. */
int kop_json_fp_equal(jv s, jv fp);

#endif
