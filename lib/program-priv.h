#ifndef KOP_PROGRAM_PRIV_H
#define KOP_PROGRAM_PRIV_H
/*
 * What the files of a reconcile program (lib/program*.c) share and nobody else
 * needs: the readers of the document's fields, settings and templates, and kinds
 * and mappings. Callers outside use program.h. Each reader fills err (naming
 * where in the document) and returns -1 on a bad field.
 */
#include "program.h"

/* Reading the document (program.c). */
jv program_get(jv o, const char *key);
int program_opt_str(jv o, const char *key, const char *where, char **out, char *err);
int program_known_keys(jv o, const char *where, const char *const *keys, char *err);
int program_req_str(jv o, const char *key, const char *where, char **out, char *err);

/* Settings and templates (program_settings.c). */
int program_load_setting(jv s, size_t i, jv *settings, char *err);
jv program_expand(jv settings, jv v, char *err);
int program_load_shard_key(struct kop_program *p, jv primary, char *err);

/* Kinds and mappings (program_kinds.c). */
void program_mapping_release(struct kop_mapping *m);
int program_load_mapping(jv o, const char *where, struct kop_mapping *m, char *err);
void program_kind_release(struct kop_kind *k);
int program_load_kind(jv o, const char *where, enum kop_role role, const struct kop_mapping *dflt,
		      struct kop_kind *k, char *err);
int program_load_kinds(struct kop_program *p, jv doc, const char *section, enum kop_role role, char *err);
/* A child kind's `ignore` against what the engine reads or writes itself (its mapping known). */
int program_check_ignore(const struct kop_kind *k, char *err);

#endif
