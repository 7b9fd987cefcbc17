/*
 * The redirect decision (redirect.h).  The origin of a URL is read here
 * rather than by libcurl's URL API so the rule does not depend on how a
 * libcurl version normalises hosts: what is compared is what is parsed.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/redirect.h"
#include "lib/xmalloc.h"

/* Every header a token travels in; Authorization though we never set one. */
static const char *const token_headers[] = {
	"Job-Token", "Runner-Token", "Private-Token", "Authorization",
};

bool
token_header(const char *line)
{
	size_t i, n;

	for (i = 0; i < sizeof(token_headers) / sizeof(token_headers[0]); i++) {
		n = strlen(token_headers[i]);
		if (strncasecmp(line, token_headers[i], n) == 0 &&
		    (line[n] == '\0' || line[n] == ':'))
			return true;
	}
	return false;
}

/* Length of "http://" or "https://" at the start of url, or 0. */
static size_t
http_scheme_len(const char *url, bool *https)
{
	if (strncasecmp(url, "https://", 8) == 0) {
		*https = true;
		return 8;
	}
	if (strncasecmp(url, "http://", 7) == 0) {
		*https = false;
		return 7;
	}
	return 0;
}

static int
parse_port(const char *p, const char *end, unsigned *port)
{
	unsigned long v = 0;

	if (p == end)
		return 0;	/* "host:" names the default port (RFC 3986 3.2.3) */
	for (; p < end; p++) {
		if (!isdigit((unsigned char)*p) || (v = v * 10 + (unsigned)(*p - '0')) > 65535)
			return -1;
	}
	if (v == 0)
		return -1;
	*port = (unsigned)v;
	return 0;
}

int
url_origin_parse(const char *url, struct url_origin *o)
{
	const char *auth, *end, *at, *host, *host_end, *port;
	size_t n, i;

	memset(o, 0, sizeof(*o));
	if (url == NULL || (n = http_scheme_len(url, &o->https)) == 0)
		return -1;
	auth = url + n;
	end = auth + strcspn(auth, "/?#");
	/* The last '@' ends the user info; a '@' in a password is encoded. */
	for (at = end; at > auth && at[-1] != '@'; at--)
		;
	host = at;
	if (*host == '[') {
		if ((host_end = memchr(host, ']', (size_t)(end - host))) == NULL)
			return -1;
		host++;
		port = host_end + 1;
		if (port != end && *port != ':')
			return -1;
	} else {
		host_end = memchr(host, ':', (size_t)(end - host));
		if (host_end == NULL)
			host_end = end;
		port = host_end;
	}
	n = (size_t)(host_end - host);
	if (n == 0 || n >= sizeof(o->host))
		return -1;
	for (i = 0; i < n; i++) {
		if ((unsigned char)host[i] <= ' ' || host[i] == 0x7f)
			return -1;
		o->host[i] = (char)tolower((unsigned char)host[i]);
	}
	o->host[n] = '\0';
	o->port = o->https ? 443 : 80;
	return parse_port(port == end ? end : port + 1, end, &o->port);
}

bool
url_origin_same(const struct url_origin *a, const struct url_origin *b)
{
	return a->https == b->https && a->port == b->port && strcmp(a->host, b->host) == 0;
}

void
url_origin_format(const struct url_origin *o, char *out, size_t size)
{
	bool v6 = strchr(o->host, ':') != NULL;

	snprintf(out, size, "%s://%s%s%s:%u", o->https ? "https" : "http", v6 ? "[" : "",
	    o->host, v6 ? "]" : "", o->port);
}

/* A URI scheme ("[A-Za-z][A-Za-z0-9+.-]*:") at the start of s? */
static bool
has_scheme(const char *s)
{
	if (!isalpha((unsigned char)*s))
		return false;
	while (isalnum((unsigned char)*s) || *s == '+' || *s == '-' || *s == '.')
		s++;
	return *s == ':';
}

char *
redirect_resolve(const char *base, const char *location)
{
	const char *p, *auth_end, *path_end, *slash;
	bool https;
	size_t n;
	char *url;

	for (p = location; *p != '\0'; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			return NULL;	/* a Location must be encoded (RFC 3986 2) */
	if ((n = http_scheme_len(base, &https)) == 0)
		return NULL;
	auth_end = base + n + strcspn(base + n, "/?#");
	path_end = auth_end + strcspn(auth_end, "?#");
	if (has_scheme(location))
		url = xstrdup(location);
	else if (location[0] == '/' && location[1] == '/')
		url = xasprintf("%s:%s", https ? "https" : "http", location);
	else if (location[0] == '/')
		url = xasprintf("%.*s%s", (int)(auth_end - base), base, location);
	else if (location[0] == '?' || location[0] == '#' || location[0] == '\0')
		url = xasprintf("%.*s%s", (int)(path_end - base), base, location);
	else {
		/* Relative to the base's directory. */
		for (slash = path_end; slash > auth_end && slash[-1] != '/'; slash--)
			;
		if (slash == auth_end)
			url = xasprintf("%.*s/%s", (int)(auth_end - base), base, location);
		else
			url = xasprintf("%.*s%s", (int)(slash - base), base, location);
	}
	url[strcspn(url, "#")] = '\0';	/* a fragment is never sent */
	return url;
}

static bool
is_redirect(long status)
{
	return status == 301 || status == 302 || status == 303 || status == 307 ||
	    status == 308;
}

static void
refuse(struct redirect_decision *d, const char *why)
{
	free(d->url);
	d->url = NULL;
	d->action = REDIRECT_REFUSE;
	d->why_not = why;
}

void
redirect_decide(const struct redirect_input *in, struct redirect_decision *d)
{
	struct url_origin from, to;

	memset(d, 0, sizeof(*d));
	d->action = REDIRECT_NONE;
	if (!is_redirect(in->status) || in->location == NULL || *in->location == '\0')
		return;
	if (url_origin_parse(in->url, &from) == -1) {
		refuse(d, "the request's own URL is not http or https");
		return;
	}
	url_origin_format(&from, d->from, sizeof(d->from));
	if (in->hops >= in->max_hops) {
		refuse(d, "too many redirects");
		return;
	}
	if ((d->url = redirect_resolve(in->url, in->location)) == NULL ||
	    url_origin_parse(d->url, &to) == -1) {
		refuse(d, "the Location is not an http or https URL");
		return;
	}
	url_origin_format(&to, d->to, sizeof(d->to));
	if (from.https && !to.https) {
		refuse(d, "it would go from https to plain http");
		return;
	}
	d->same_origin = url_origin_same(&from, &to);
	d->keep_tokens = d->same_origin && !in->never_keep_tokens;
	if (in->status == 303 && strcmp(in->method, "HEAD") != 0) {
		d->method = "GET";
		d->keep_body = false;
	} else {
		d->method = in->method;
		d->keep_body = in->has_body;
	}
	if (!d->same_origin && d->keep_body && in->body_has_token) {
		refuse(d, "the request body carries a token and would go to another origin");
		return;
	}
	d->action = REDIRECT_FOLLOW;
}

void
redirect_decision_release(struct redirect_decision *d)
{
	free(d->url);
	d->url = NULL;
}
