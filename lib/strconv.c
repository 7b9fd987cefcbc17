/*
 * Go's strconv parsing, as gitlab-runner reads values; see strconv.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/strconv.h"

int
strconv_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "1", "t", "T", "TRUE", "true", "True" };
	static const char *const no[] = { "0", "f", "F", "FALSE", "false", "False" };
	size_t i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -1;
}

int
strconv_parse_int(const char *s, int64_t *out)
{
	char *end;
	long long n;

	/* strtoll would skip blanks first; Go takes none. */
	if (*s == '\0' || (*s != '-' && *s != '+' && (*s < '0' || *s > '9')))
		return -1;
	errno = 0;
	n = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	*out = n;
	return 0;
}
