/*
 * Whether to send a request again, and when: one pure function, so every
 * rule of the retry layer is in one place and tested without a network.
 *
 * Retried: transport failures worth another try, 408, 429, 500, 502, 503,
 * 504 and every status >= 512.  Never retried: any other answer (a 4xx
 * says something about the request that sending it again will not
 * change).  The wait is RateLimit-ResetTime if it names a moment ahead,
 * else Retry-After (seconds or an HTTP-date), else the jittered backoff;
 * a wait that would end past the request's deadline is not taken, and the
 * caller gets the last answer instead.
 */
#ifndef API_RETRY_H
#define API_RETRY_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct retry_input {
	unsigned	 attempts;	/* sent so far, >= 1 */
	unsigned	 max_attempts;
	long		 status;	/* 0 when no answer came */
	bool		 transport_retryable; /* with status 0: was it worth another try */
	bool		 no_retry;
	bool		 no_retry_429;
	const char	*retry_after;	/* header value or NULL */
	const char	*ratelimit_reset; /* RateLimit-ResetTime value or NULL */
	time_t		 now;		/* wall clock, for HTTP dates */
	uint64_t	 remaining_ms;	/* until the request's deadline */
	uint64_t	 backoff_ms;	/* the jittered backoff for this attempt */
};

enum retry_wait_reason {
	RETRY_WAIT_BACKOFF,
	RETRY_WAIT_RETRY_AFTER,
	RETRY_WAIT_RATELIMIT_RESET,
};

struct retry_decision {
	bool			again;
	uint64_t		delay_ms;
	enum retry_wait_reason	reason;
	/* When !again: why not, for logs ("not retryable", "deadline", ...). */
	const char		*why_not;
};

struct retry_decision	retry_decide(const struct retry_input *in);
bool			retry_status_retryable(long status);
const char		*retry_wait_reason_name(enum retry_wait_reason r);

/* RFC 7231 HTTP-date (IMF-fixdate, RFC 850 or asctime) to time_t. */
int			http_date_parse(const char *s, time_t *out);

#endif
