#ifndef KOP_YAML_H
#define KOP_YAML_H
/*
 * YAML to JSON values, through libyaml, the way Kubernetes reads YAML
 * (sigs.k8s.io/yaml over go-yaml v2): used for kubeconfig files, kapply -f
 * manifests and program manifests.
 *
 * Plain scalars resolve as YAML 1.1 does in go-yaml v2:
 *   null: "", ~, null, Null, NULL
 *   bool: true/false, yes/no, on/off, y/n (and their Title/UPPER forms)
 *   int:  123, -4, +5, 1_000, 0x1F, 0o17, 017 (octal), 0b101
 *   float: 1.5, .5, 1e3, -2.5E-3
 *   everything else (dates included) is a string.
 * Quoted and block (| >) scalars are always strings; explicit tags !!str,
 * !!int, !!float, !!bool, !!null are honoured (an unknown tag gives a
 * string). .inf and .nan have no JSON form and are an error. Mapping keys
 * become strings (1 -> "1", true -> "true"); a null or collection key is an
 * error. Anchors, aliases and merge keys (<<) work; a later duplicate key
 * replaces an earlier one.
 *
 * Input whose first non-blank character is '{' or '[' is read as a stream
 * of JSON values first (kubectl's YAMLOrJSONDecoder does the same), and as
 * YAML if that fails. Either way an integer beyond 2^53 is an error naming
 * its line, column and field path ("stringData.pin"): jv numbers are doubles,
 * and it would be held rounded. So are decimal digits past 64 bits (or with
 * a leading 0 but not octal), which go-yaml reads as a float, rounded too;
 * a 0x, 0o or 0b integer past 64 bits is a string to go-yaml, and here. No
 * message quotes a value: it may be a Secret's.
 */
#include <stddef.h>
#include <jv.h>
#include "kop.h"

/*
 * Parses every document of text[0..len) into *docs_out, a jv array of the
 * documents' values (owned by the caller). Empty documents (nothing, or only
 * comments, or a null value) are skipped, as kubectl skips them, so an
 * empty file gives []. name is used in messages ("manifest.yaml", NULL =
 * "<input>"). Returns 0, or -1 with err such as
 *   "unable to parse 'deploy.yaml': line 3, column 7: mapping values are not allowed in this context"
 * and *docs_out left jv_invalid().
 */
int kop_yaml_load(const char *text, size_t len, const char *name, jv *docs_out, char *err);

/* kop_yaml_load of a whole file (at most 64 MiB); name in messages is path. */
int kop_yaml_load_file(const char *path, jv *docs_out, char *err);
/*
 * Go's strconv.ParseInt(s, 0, 64), falling back to ParseUint: optional sign,
 * 0x/0o/0b prefixes, a leading 0 for octal (no underscores). 0 and *out, or
 * -1. How go-yaml decides that a plain scalar is an integer, both when
 * reading YAML and when lib/render decides whether a string needs quotes.
 * *beyond (may be NULL): its magnitude is past 2^53, so *out is rounded.
 */
int kop_go_parse_int(const char *s, double *out, int *beyond);

#endif

/*
 * This header shadows libyaml's <yaml.h> on the -Ilib path, so it brings in
 * libyaml's too: "yaml.h" or <yaml.h> from anywhere gets both. Outside the
 * guard on purpose: when lib/x.c includes "yaml.h" (found beside it), the
 * #include_next finds this file again through -Ilib, and that inclusion's
 * #include_next reaches the system header.
 */
#ifdef __clang__
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Winclude-next-absolute-path"
#endif
#include_next <yaml.h>
#ifdef __clang__
#pragma clang diagnostic pop
#endif
