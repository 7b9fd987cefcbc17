/*
 * Go's strconv.ParseBool and ParseInt(s, 10, 64): the spellings
 * gitlab-runner takes for a bool or a whole number, in flags and in job
 * variables alike.
 */
#ifndef LIB_STRCONV_H
#define LIB_STRCONV_H

#include <stdbool.h>
#include <stdint.h>

/* 1, t, T, TRUE, true, True and their false forms; 0 or -1. */
int	strconv_parse_bool(const char *s, bool *out);
/* An optional sign, then digits, nothing else, in range; 0 or -1. */
int	strconv_parse_int(const char *s, int64_t *out);

#endif
