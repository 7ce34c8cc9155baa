#ifndef KOP_KUBECONFIG_PRIV_H
#define KOP_KUBECONFIG_PRIV_H
/*
 * What the files of client configuration (lib/kubeconfig*.c) share and nobody
 * else needs: the readers of a kubeconfig's members and paths, and the loaders
 * kube_config_load calls in its order. Callers outside use kube.h (and kube.c
 * kube-priv.h).
 */
#include "kube-priv.h"

/* Helpers (kubeconfig.c). */
/* s[0..len) without surrounding whitespace (heap). */
char *kc_trim_dup(const char *s, size_t len);
/* Go's os error text: "open /x: no such file or directory". */
void kc_go_open_error(char *buf, size_t size, const char *path, int e);
/* A string member of obj (not consumed), heap copy; NULL when absent, null or "". Numbers and bools as text. */
char *kc_get_str(jv obj, const char *key);
/* 1 when obj[key] is true (obj not consumed). */
int kc_get_bool(jv obj, const char *key);
/* obj[key] (obj not consumed); null when obj is no object or lacks key. */
jv kc_get_member(jv obj, const char *key);
/* path (consumed) resolved against dir when relative (heap). NULL stays NULL. */
char *kc_resolve_path(const char *dir, char *path);
/* The directory of path, made absolute against the working directory (heap). */
char *kc_dir_of(const char *path);

/* The files of list (':'-separated unless explicit_file) merged and resolved (kubeconfig_file.c). */
int kc_load_files(struct kube_config *cfg, const char *list, int explicit_file, const char *context, char *err);
/* The in-cluster configuration for host and port (kubeconfig_incluster.c). */
int kc_load_in_cluster(struct kube_config *cfg, const char *host, const char *port, char *err);
/* A user's exec stanza into cfg->exec (kubeconfig_exec.c). */
int kc_parse_exec(struct kube_config *cfg, jv exec, const char *dir, const char *uname, jv cluster, char *err);

#endif
