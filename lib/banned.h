#ifndef KOP_BANNED_H
#define KOP_BANNED_H
/*
 * Functions that are easy to misuse; use the bounded or reentrant variant
 * named beside each (git's banned.h). Included last by kop.h.
 */
#define BANNED(func) sorry_##func##_is_a_banned_function

#undef strcpy
#define strcpy(x, y) BANNED(strcpy)        /* snprintf, memcpy with a length */
#undef strcat
#define strcat(x, y) BANNED(strcat)        /* struct kop_buf */
#undef sprintf
#define sprintf(...) BANNED(sprintf)       /* snprintf */
#undef vsprintf
#define vsprintf(...) BANNED(vsprintf)     /* vsnprintf */
#undef strtok
#define strtok(x, y) BANNED(strtok)        /* strtok_r, strchr */
#undef gmtime
#define gmtime(t) BANNED(gmtime)           /* gmtime_r */
#undef localtime
#define localtime(t) BANNED(localtime)     /* localtime_r */

#endif
