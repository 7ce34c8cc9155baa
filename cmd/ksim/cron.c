/*
 * CronJob schedules as kube-controller-manager reads them (robfig/cron's
 * ParseStandard): five fields, minute hour day-of-month month day-of-week,
 * each "*", "?", N, N-M, a step "/S" after any of those, comma lists, the
 * names JAN..DEC and SUN..SAT; the macros @yearly (@annually), @monthly,
 * @weekly, @daily (@midnight), @hourly and "@every DURATION". When both
 * day fields are restricted a day matching either runs. Times are UTC.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include "tool.h"
#include "ksim.h"
#include "banned.h"

static const struct { const char *name; int min, max; } bounds[5] = {
	{ "minute", 0, 59 }, { "hour", 0, 23 }, { "day of month", 1, 31 }, { "month", 1, 12 }, { "day of week", 0, 6 },
};
static const char *const months[] = { "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
				      "dec" };
static const char *const days[] = { "sun", "mon", "tue", "wed", "thu", "fri", "sat" };

/* A number or (month, day-of-week fields) a name; -1 if neither. */
static int value(const char *s, size_t n, int field)
{
	char *end;
	long v;

	if (n == 3 && (field == 3 || field == 4)) {
		for (int i = 0; i < (field == 3 ? 12 : 7); i++)
			if (!strncasecmp(s, field == 3 ? months[i] : days[i], 3))
				return field == 3 ? i + 1 : i;
	}
	if (!n || !isdigit((unsigned char)*s))
		return -1;
	v = strtol(s, &end, 10);
	if ((size_t)(end - s) != n || v > 1000)
		return -1;
	return (int)v;
}

static int parse_field(const char *s, size_t len, int f, uint64_t *bits, int *star, char *err, size_t errlen)
{
	const char *p = s, *end = s + len;

	*bits = 0;
	*star = 0;
	while (p < end) {
		const char *comma = memchr(p, ',', (size_t)(end - p)), *e = comma ? comma : end;
		const char *slash = memchr(p, '/', (size_t)(e - p)), *re = slash ? slash : e;
		const char *dash = memchr(p, '-', (size_t)(re - p));
		int lo, hi, step = 1, is_star = 0;

		if ((re - p == 1 && (*p == '*' || *p == '?'))) {
			lo = bounds[f].min;
			hi = bounds[f].max;
			is_star = 1;
		} else {
			lo = value(p, (size_t)((dash ? dash : re) - p), f);
			hi = dash ? value(dash + 1, (size_t)(re - dash - 1), f) : lo;
			if (lo < 0 || hi < 0) {
				snprintf(err, errlen, "failed to parse int from %.*s", (int)(re - p), p);
				return -1;
			}
		}
		if (slash) {
			step = value(slash + 1, (size_t)(e - slash - 1), -1);
			if (step <= 0) {
				snprintf(err, errlen, "failed to parse int from %.*s", (int)(e - slash - 1), slash + 1);
				return -1;
			}
			if (!dash && !is_star)
				hi = bounds[f].max;	/* "N/S" is "N-max/S" */
			if (step > 1)
				is_star = 0;
		}
		if (lo < bounds[f].min || hi > bounds[f].max || lo > hi) {
			if (lo < bounds[f].min)
				snprintf(err, errlen, "beginning of range (%d) below minimum (%d): %.*s", lo,
					 bounds[f].min, (int)(e - p), p);
			else if (hi > bounds[f].max)
				snprintf(err, errlen, "end of range (%d) above maximum (%d): %.*s", hi, bounds[f].max,
					 (int)(e - p), p);
			else
				snprintf(err, errlen, "beginning of range (%d) beyond end of range (%d): %.*s", lo, hi,
					 (int)(e - p), p);
			return -1;
		}
		for (int v = lo; v <= hi; v += step)
			*bits |= 1ull << v;
		*star |= is_star;
		p = comma ? comma + 1 : end;
		if (comma && p == end) {
			snprintf(err, errlen, "empty spec in %.*s", (int)len, s);
			return -1;
		}
	}
	return 0;
}

int ksim_cron_parse(const char *spec, struct ksim_cron *c, char *err, size_t errlen)
{
	static const struct { const char *name, *fields; } macros[] = {
		{ "@yearly", "0 0 1 1 *" }, { "@annually", "0 0 1 1 *" }, { "@monthly", "0 0 1 * *" },
		{ "@weekly", "0 0 * * 0" }, { "@daily", "0 0 * * *" },	 { "@midnight", "0 0 * * *" },
		{ "@hourly", "0 * * * *" },
	};
	const char *p;
	int n = 0;

	memset(c, 0, sizeof(*c));
	while (*spec == ' ')
		spec++;
	if (!strncmp(spec, "TZ=", 3) || !strncmp(spec, "CRON_TZ=", 8)) {
		snprintf(err, errlen, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead");
		return -1;
	}
	if (!strncmp(spec, "@every ", 7)) {
		long ms = tool_parse_duration_ms(spec + 7);

		if (ms < 0) {
			snprintf(err, errlen, "failed to parse duration %s: time: invalid duration \"%s\"", spec, spec + 7);
			return -1;
		}
		c->every = ms < 1000 ? 1 : ms / 1000;
		return 0;
	}
	for (size_t i = 0; i < sizeof(macros) / sizeof(*macros); i++)
		if (!strcmp(spec, macros[i].name))
			spec = macros[i].fields;
	if (*spec == '@') {
		snprintf(err, errlen, "unrecognized descriptor: %s", spec);
		return -1;
	}
	for (p = spec; *p;) {
		const char *e = p;
		uint64_t bits;
		int star;

		while (*e && *e != ' ')
			e++;
		if (e > p) {
			if (n == 5) {
				n++;
				break;
			}
			if (parse_field(p, (size_t)(e - p), n, &bits, &star, err, errlen) < 0)
				return -1;
			c->bits[n] = bits;
			c->star[n] = star;
			n++;
		}
		p = *e ? e + 1 : e;
	}
	if (n != 5) {
		snprintf(err, errlen, "expected exactly 5 fields, found %d: %s", n, spec);
		return -1;
	}
	return 0;
}

static int day_matches(const struct ksim_cron *c, const struct tm *tm)
{
	int dom = (c->bits[2] >> tm->tm_mday) & 1, dow = (c->bits[4] >> tm->tm_wday) & 1;

	return c->star[2] || c->star[4] ? dom && dow : dom || dow;
}

long long ksim_cron_next(const struct ksim_cron *c, long long after)
{
	time_t t;

	if (c->every)
		return after + c->every;
	t = (time_t)((after / 60 + 1) * 60);
	for (int guard = 0; guard < 100000; guard++) {
		struct tm tm;

		gmtime_r(&t, &tm);
		if (!((c->bits[3] >> (tm.tm_mon + 1)) & 1)) {
			tm.tm_mon++;
			tm.tm_mday = 1;
			tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
			t = timegm(&tm);
		} else if (!day_matches(c, &tm)) {
			tm.tm_mday++;
			tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
			t = timegm(&tm);
		} else if (!((c->bits[1] >> tm.tm_hour) & 1)) {
			tm.tm_hour++;
			tm.tm_min = tm.tm_sec = 0;
			t = timegm(&tm);
		} else if (!((c->bits[0] >> tm.tm_min) & 1)) {
			t += 60;
		} else {
			return (long long)t;
		}
	}
	return -1;	/* never (February 30th) */
}
