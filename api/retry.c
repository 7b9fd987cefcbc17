/*
 * The retry decision.  gitlab-runner's rules (protocol.md 8.1, 8.2) with
 * the three changes this project was started for: transport failures are
 * retried too, Retry-After is also understood as an HTTP-date, and no wait
 * runs past the request's own deadline, so a 429 can never hang a caller
 * that has somewhere to be.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "api/retry.h"

bool
retry_status_retryable(long status)
{
	switch (status) {
	case 408:
	case 429:
	case 500:
	case 502:
	case 503:
	case 504:
		return true;
	default:
		return status >= 512;
	}
}

const char *
retry_wait_reason_name(enum retry_wait_reason r)
{
	switch (r) {
	case RETRY_WAIT_RETRY_AFTER:
		return "Retry-After";
	case RETRY_WAIT_RATELIMIT_RESET:
		return "RateLimit-ResetTime";
	case RETRY_WAIT_BACKOFF:
		break;
	}
	return "backoff";
}

int
http_date_parse(const char *s, time_t *out)
{
	static const char *const formats[] = {
		"%a, %d %b %Y %H:%M:%S GMT",	/* IMF-fixdate */
		"%A, %d-%b-%y %H:%M:%S GMT",	/* RFC 850 */
		"%a %b %e %H:%M:%S %Y",		/* asctime */
	};
	struct tm tm;
	const char *end;
	size_t i;

	if (s == NULL)
		return -1;
	for (i = 0; i < sizeof(formats) / sizeof(formats[0]); i++) {
		memset(&tm, 0, sizeof(tm));
		end = strptime(s, formats[i], &tm);
		if (end == NULL)
			continue;
		while (isspace((unsigned char)*end))
			end++;
		if (*end != '\0')
			continue;
		*out = timegm(&tm);
		return *out == (time_t)-1 ? -1 : 0;
	}
	return -1;
}

/* Delta-seconds: digits only (RFC 7231 7.1.3). */
static int
parse_seconds(const char *s, uint64_t *ms)
{
	uint64_t v = 0;

	while (isspace((unsigned char)*s))
		s++;
	if (!isdigit((unsigned char)*s))
		return -1;
	for (; isdigit((unsigned char)*s); s++) {
		if (v > UINT64_MAX / 10000)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	while (isspace((unsigned char)*s))
		s++;
	if (*s != '\0')
		return -1;
	*ms = v * 1000;
	return 0;
}

/* How long until an HTTP-date; -1 if it is not one or not in the future. */
static int
date_delay(const char *s, time_t now, uint64_t *ms)
{
	time_t at;

	if (http_date_parse(s, &at) != 0 || at <= now)
		return -1;
	*ms = (uint64_t)(at - now) * 1000;
	return 0;
}

struct retry_decision
retry_decide(const struct retry_input *in)
{
	struct retry_decision d = { .again = false, .reason = RETRY_WAIT_BACKOFF };
	uint64_t ms;

	if (in->status == 0) {
		if (!in->transport_retryable) {
			d.why_not = "not retryable";
			return d;
		}
	} else if (!retry_status_retryable(in->status)) {
		d.why_not = "not retryable";
		return d;
	}
	if (in->no_retry || (in->status == 429 && in->no_retry_429)) {
		d.why_not = "retries disabled for this request";
		return d;
	}
	if (in->attempts >= in->max_attempts) {
		d.why_not = "attempts exhausted";
		return d;
	}

	d.delay_ms = in->backoff_ms;
	if (in->ratelimit_reset != NULL &&
	    date_delay(in->ratelimit_reset, in->now, &ms) == 0) {
		d.delay_ms = ms;
		d.reason = RETRY_WAIT_RATELIMIT_RESET;
	} else if (in->retry_after != NULL &&
	    (parse_seconds(in->retry_after, &ms) == 0 ||
	    date_delay(in->retry_after, in->now, &ms) == 0) && ms > 0) {
		d.delay_ms = ms;
		d.reason = RETRY_WAIT_RETRY_AFTER;
	}
	if (d.delay_ms >= in->remaining_ms) {
		d.why_not = "the wait would pass the deadline";
		return d;
	}
	d.again = true;
	return d;
}
