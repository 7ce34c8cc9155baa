#ifndef KOP_MANIFEST_H
#define KOP_MANIFEST_H
/*
 * Manifests for `kapply -f`, read the way `kubectl apply -f` reads them:
 * a file (YAML or JSON, several documents), a directory (its *.yaml, *.yml
 * and *.json files in name order, not recursive, as kubectl without -R), or
 * "-" for stdin. Empty documents are skipped; a List (kind "List" or any
 * kind ending in "List" with an items array) is unpacked into its items.
 */
#include <jv.h>
#include "kop.h"

/*
 * Appends the objects found at path to *objs (a jv array, consumed and
 * replaced). Every object is checked to have apiVersion, kind and
 * metadata.name (or generateName is refused: apply needs a name).
 * -1 with err naming the file and the document on the first problem; *objs
 * keeps what was read before it. A directory without a manifest file is an
 * error (as in kubectl); a file or stdin holding no object is not.
 */
int kop_manifest_read(const char *path, jv *objs, char *err);

/* The same from a buffer; name is used in messages. */
int kop_manifest_parse(const char *text, size_t len, const char *name, jv *objs, char *err);

#endif
