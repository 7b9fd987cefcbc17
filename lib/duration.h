/*
 * Go duration strings ("15m", "1h30m", "300ms", "15m0s"), the form
 * gitlab-runner uses for connection_max_age, unhealthy_interval and other
 * timeouts in config.toml and on its command line.
 */
#ifndef LIB_DURATION_H
#define LIB_DURATION_H

#include <stddef.h>
#include <stdint.h>

/*
 * Parse s into nanoseconds.  Accepts what Go's time.ParseDuration accepts:
 * an optional sign, then one or more decimal numbers each with a unit
 * (ns, us, µs, ms, s, m, h), or a bare "0".  Returns 0, or -1 if s is not
 * a duration or is out of range.
 */
int	duration_parse(const char *s, int64_t *ns);

/* Format like Go's Duration.String(): "15m0s", "1h30m0s", "300ms", "0s". */
void	duration_format(int64_t ns, char *out, size_t size);

#endif
