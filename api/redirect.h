/*
 * Whether to follow a redirect, and how: one pure function, so the rule
 * that binds a token to the origin it was issued for is in one place and
 * tested without a network.  http.c asks it for every 3xx of every
 * request.
 *
 * An origin is scheme, host and port (RFC 6454): the host compared without
 * regard to case, a port the URL leaves out read as 80 or 443.  The rules:
 *
 * - 301, 302, 303, 307 and 308 with a Location are redirects; any other
 *   answer is given to the caller as it is.
 * - Only http and https, never https to http, at most max_hops in all.
 * - 303 is followed with a GET (HEAD stays HEAD) and no body (RFC 9110
 *   15.4.4).  The others keep the method and the body: RFC 9110 lets a
 *   client keep POST on 301 and 302, and turning a job update into a GET
 *   would lose it without a word.
 * - To the same origin the token headers go along; to another they are
 *   dropped (token_header()).  A body that carries a token is never sent
 *   to another origin: such a redirect is refused.
 */
#ifndef API_REDIRECT_H
#define API_REDIRECT_H

#include <stdbool.h>
#include <stddef.h>

#define ORIGIN_HOST_MAX	256
/* "https://" + host (+ brackets) + ":65535" + NUL */
#define ORIGIN_TEXT_MAX	(ORIGIN_HOST_MAX + 20)

struct url_origin {
	bool		 https;
	char		 host[ORIGIN_HOST_MAX];	/* lower case; IPv6 without brackets */
	unsigned	 port;
};

/* 0, or -1 if url is no http(s) URL with a host and a valid port. */
int		 url_origin_parse(const char *url, struct url_origin *o);
bool		 url_origin_same(const struct url_origin *a, const struct url_origin *b);
/* "https://host:port", always with the port: never user, path or query. */
void		 url_origin_format(const struct url_origin *o, char *out, size_t size);

/* Is this header line ("Name: value") or name one that carries a token? */
bool		 token_header(const char *line);

struct redirect_input {
	long		 status;
	const char	*method;
	const char	*url;		/* the URL that answered */
	const char	*location;	/* its Location header, or NULL */
	bool		 has_body;
	bool		 body_has_token;
	/* The caller's stricter rule: no token header even to the same origin. */
	bool		 never_keep_tokens;
	unsigned	 hops;		/* redirects followed so far */
	unsigned	 max_hops;
};

enum redirect_action {
	REDIRECT_NONE,		/* not a redirect: the answer is the caller's */
	REDIRECT_FOLLOW,
	REDIRECT_REFUSE,	/* a redirect that must not be followed: why_not */
};

struct redirect_decision {
	enum redirect_action	 action;
	char			*url;		/* FOLLOW: absolute, no fragment; caller frees */
	const char		*method;	/* FOLLOW: in->method, or "GET" after a 303 */
	bool			 keep_body;
	bool			 same_origin;
	bool			 keep_tokens;
	char			 from[ORIGIN_TEXT_MAX];	/* origins, for the log ("" if unknown) */
	char			 to[ORIGIN_TEXT_MAX];
	const char		*why_not;	/* REFUSE */
};

/* Fills d; free d->url (NULL unless FOLLOW) with redirect_decision_release(). */
void		 redirect_decide(const struct redirect_input *in, struct redirect_decision *d);
void		 redirect_decision_release(struct redirect_decision *d);

/* Location resolved against base (RFC 3986 5.2, no dot-segment removal); NULL if bad. */
char		*redirect_resolve(const char *base, const char *location);

#endif
