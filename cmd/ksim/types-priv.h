#ifndef KSIM_TYPES_PRIV_H
#define KSIM_TYPES_PRIV_H
/*
 * What types.c, discovery.c, openapi.c and table.c share beyond ksim.h:
 * a few helpers over the registry's names and objects.
 */
#include "ksim.h"

/* types.c */
char *join_gv(const char *group, const char *version);
const char *jstr(jv o, const char *key, const char *def);

/* discovery.c */
int gv_served(const char *group, const char *version);

#endif
