/* Reading -f FILE|DIR|- manifests into objects (lib/manifest.h). */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "manifest.h"
#include "yaml.h"
#include "banned.h"

#define MANIFEST_MAX (64u << 20)

static const char *str_at(jv v, const char *a, const char *b)
{
	jv x;

	if (jv_get_kind(v) != JV_KIND_OBJECT)
		return NULL;
	x = jv_object_get(jv_copy(v), jv_string(a));
	if (b && jv_get_kind(x) == JV_KIND_OBJECT)
		x = jv_object_get(x, jv_string(b));
	else if (b) {
		jv_free(x);
		return NULL;
	}
	if (jv_get_kind(x) != JV_KIND_STRING) {
		jv_free(x);
		return NULL;
	}
	/* Borrowed: v keeps the string alive, and jv strings are refcounted. */
	{
		const char *s = jv_string_value(x);

		jv_free(x);
		return s;
	}
}

static int is_list(jv v)
{
	const char *kind = str_at(v, "kind", NULL);
	size_t n;
	jv items;
	int ret;

	if (!kind || (n = strlen(kind)) < 4 || strcmp(kind + n - 4, "List"))
		return 0;
	items = jv_object_get(jv_copy(v), jv_string("items"));
	ret = jv_get_kind(items) == JV_KIND_ARRAY;
	jv_free(items);
	return ret;
}

static int add_object(jv obj, const char *name, int doc, jv *objs, char *err)
{
	if (jv_get_kind(obj) != JV_KIND_OBJECT) {
		jv_free(obj);
		return kop_error(err, "unable to read '%s': document %d is not an object", name, doc);
	}
	if (is_list(obj)) {
		jv items = jv_object_get(obj, jv_string("items"));
		int i, n = jv_array_length(jv_copy(items));

		for (i = 0; i < n; i++)
			if (add_object(jv_array_get(jv_copy(items), i), name, doc, objs, err) < 0) {
				jv_free(items);
				return -1;
			}
		jv_free(items);
		return 0;
	}
	if (!str_at(obj, "apiVersion", NULL) || !*str_at(obj, "apiVersion", NULL)) {
		jv_free(obj);
		return kop_error(err, "unable to read '%s': document %d has no apiVersion", name, doc);
	}
	if (!str_at(obj, "kind", NULL) || !*str_at(obj, "kind", NULL)) {
		jv_free(obj);
		return kop_error(err, "unable to read '%s': document %d has no kind", name, doc);
	}
	if (!str_at(obj, "metadata", "name") || !*str_at(obj, "metadata", "name")) {
		jv_free(obj);
		return kop_error(err, "unable to read '%s': document %d has no metadata.name", name, doc);
	}
	*objs = jv_array_append(*objs, obj);
	return 0;
}

int kop_manifest_parse(const char *text, size_t len, const char *name, jv *objs, char *err)
{
	jv docs;
	int i, n;

	if (kop_yaml_load(text, len, name, &docs, err) < 0)
		return -1;
	n = jv_array_length(jv_copy(docs));
	for (i = 0; i < n; i++)
		if (add_object(jv_array_get(jv_copy(docs), i), name, i + 1, objs, err) < 0) {
			jv_free(docs);
			return -1;
		}
	jv_free(docs);
	return 0;
}

static int read_fd(int fd, const char *name, jv *objs, char *err)
{
	struct kop_buf b = KOP_BUF_INIT;
	int ret;

	for (;;) {
		ssize_t got;

		kop_buf_grow(&b, 65536);
		got = read(fd, b.buf + b.len, b.cap - b.len - 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			ret = kop_error(err, "unable to read '%s': %s", name, strerror(errno));
			kop_buf_release(&b);
			return ret;
		}
		if (!got)
			break;
		b.len += (size_t)got;
		b.buf[b.len] = '\0';
		if (b.len > MANIFEST_MAX) {
			kop_buf_release(&b);
			return kop_error(err, "unable to read '%s': larger than %u bytes", name, MANIFEST_MAX);
		}
	}
	ret = kop_manifest_parse(b.buf ? b.buf : "", b.len, name, objs, err);
	kop_buf_release(&b);
	return ret;
}

static int read_file(const char *path, jv *objs, char *err)
{
	char *text;
	size_t len;
	int ret;

	if (kop_read_file(path, MANIFEST_MAX, &text, &len, err) < 0)
		return -1;
	ret = kop_manifest_parse(text, len, path, objs, err);
	free(text);
	return ret;
}

static int manifest_ext(const char *name)
{
	size_t n = strlen(name);

	return (n > 5 && !strcmp(name + n - 5, ".yaml")) || (n > 4 && !strcmp(name + n - 4, ".yml")) ||
	       (n > 5 && !strcmp(name + n - 5, ".json"));
}

static int cmp_names(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int read_dir(const char *path, jv *objs, char *err)
{
	struct dirent **ents;
	int i, n, ret = 0, files = 0;

	if ((n = scandir(path, &ents, NULL, cmp_names)) < 0)
		return kop_error(err, "unable to read directory '%s': %s", path, strerror(errno));
	for (i = 0; i < n; i++) {
		struct kop_buf p = KOP_BUF_INIT;
		struct stat st;

		if (!ret && ents[i]->d_name[0] != '.' && manifest_ext(ents[i]->d_name)) {
			kop_buf_addf(&p, "%s/%s", path, ents[i]->d_name);
			if (!stat(p.buf, &st) && S_ISREG(st.st_mode)) {
				files++;
				ret = read_file(p.buf, objs, err);
			}
		}
		kop_buf_release(&p);
		free(ents[i]);
	}
	free(ents);
	/* As kubectl: a directory given is expected to hold manifests. */
	if (!ret && !files)
		ret = kop_error(err, "unable to read directory '%s': no manifest in it "
			       "(recognized file extensions are .json, .yaml, .yml)", path);
	return ret;
}

int kop_manifest_read(const char *path, jv *objs, char *err)
{
	struct stat st;

	if (!strcmp(path, "-"))
		return read_fd(0, "<stdin>", objs, err);
	if (stat(path, &st) < 0)
		return kop_error(err, "unable to open '%s': %s", path, strerror(errno));
	if (S_ISDIR(st.st_mode))
		return read_dir(path, objs, err);
	return read_file(path, objs, err);
}
