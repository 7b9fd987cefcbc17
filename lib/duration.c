/*
 * Go duration strings, both ways.  config.toml files written by
 * gitlab-runner hold connection_max_age = "15m0s", and operators write
 * "1h30m" or "90s" by hand; both must read the same here as there.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "lib/duration.h"

struct unit {
	const char	*name;
	int64_t		 ns;
};

/* Longest names first, so "ms" is not read as "m" followed by "s". */
static const struct unit units[] = {
	{ "ns", 1 },
	{ "us", 1000 },
	{ "\xc2\xb5s", 1000 },	/* µs, U+00B5 */
	{ "\xce\xbcs", 1000 },	/* μs, U+03BC */
	{ "ms", 1000000 },
	{ "s", 1000000000 },
	{ "m", 60LL * 1000000000 },
	{ "h", 3600LL * 1000000000 },
};

static const struct unit *
unit_at(const char *s, size_t *len)
{
	const struct unit *best = NULL;
	size_t i, n, best_len = 0;

	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		n = strlen(units[i].name);
		if (n > best_len && strncmp(s, units[i].name, n) == 0) {
			best = &units[i];
			best_len = n;
		}
	}
	*len = best_len;
	return best;
}

int
duration_parse(const char *s, int64_t *out)
{
	const struct unit *u;
	bool neg = false;
	/* Magnitudes are summed as unsigned so INT64_MIN can be reached. */
	uint64_t total = 0, limit;
	size_t ulen;

	if (s == NULL || *s == '\0')
		return -1;
	if (*s == '+' || *s == '-')
		neg = (*s++ == '-');
	if (strcmp(s, "0") == 0) {
		*out = 0;
		return 0;
	}
	if (*s == '\0')
		return -1;
	limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;

	while (*s != '\0') {
		uint64_t whole = 0, frac = 0, scale = 1, part;
		bool digits = false;

		while (*s >= '0' && *s <= '9') {
			if (whole > (UINT64_MAX - 9) / 10)
				return -1;
			whole = whole * 10 + (uint64_t)(*s++ - '0');
			digits = true;
		}
		if (*s == '.') {
			s++;
			while (*s >= '0' && *s <= '9') {
				/* Digits past nanosecond precision are dropped. */
				if (scale < 1000000000000000000ULL) {
					frac = frac * 10 + (uint64_t)(*s - '0');
					scale *= 10;
				}
				s++;
				digits = true;
			}
		}
		if (!digits)
			return -1;
		if ((u = unit_at(s, &ulen)) == NULL)
			return -1;
		s += ulen;

		if (whole > limit / (uint64_t)u->ns)
			return -1;
		part = whole * (uint64_t)u->ns;
		/* frac / scale of a unit, computed without overflow. */
		part += (uint64_t)((long double)frac * (long double)u->ns /
		    (long double)scale);
		if (part > limit || total > limit - part)
			return -1;
		total += part;
	}
	if (neg)
		*out = total == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)total;
	else
		*out = (int64_t)total;
	return 0;
}

/*
 * Go prints durations under a second with one small unit ("1.5ms"), and
 * longer ones as h, m and s with the seconds' fraction ("1h2m3.5s").
 */
void
duration_format(int64_t ns, char *out, size_t size)
{
	char frac[16] = "";
	uint64_t u;
	const char *sign = "";
	size_t n;

	if (ns == 0) {
		snprintf(out, size, "0s");
		return;
	}
	if (ns < 0) {
		sign = "-";
		u = ns == INT64_MIN ? (uint64_t)INT64_MAX + 1 : (uint64_t)-ns;
	} else
		u = (uint64_t)ns;

	if (u < 1000000000) {
		const char *unit;
		uint64_t div;

		if (u < 1000)
			unit = "ns", div = 1;
		else if (u < 1000000)
			unit = "\xc2\xb5s", div = 1000;
		else
			unit = "ms", div = 1000000;
		if (u % div != 0) {
			snprintf(frac, sizeof(frac), ".%0*llu",
			    div == 1000 ? 3 : 6, (unsigned long long)(u % div));
			n = strlen(frac);
			while (frac[n - 1] == '0')
				frac[--n] = '\0';
		}
		snprintf(out, size, "%s%llu%s%s", sign,
		    (unsigned long long)(u / div), frac, unit);
		return;
	}

	if (u % 1000000000 != 0) {
		snprintf(frac, sizeof(frac), ".%09llu",
		    (unsigned long long)(u % 1000000000));
		n = strlen(frac);
		while (frac[n - 1] == '0')
			frac[--n] = '\0';
	}
	u /= 1000000000;
	if (u >= 3600)
		snprintf(out, size, "%s%lluh%llum%llu%ss", sign,
		    (unsigned long long)(u / 3600),
		    (unsigned long long)(u / 60 % 60),
		    (unsigned long long)(u % 60), frac);
	else if (u >= 60)
		snprintf(out, size, "%s%llum%llu%ss", sign,
		    (unsigned long long)(u / 60),
		    (unsigned long long)(u % 60), frac);
	else
		snprintf(out, size, "%s%llu%ss", sign, (unsigned long long)u, frac);
}
