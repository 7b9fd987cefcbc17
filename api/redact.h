/*
 * Redaction of server text quoted in a log line.
 *
 * A log line that quotes a server's answer (or a request) may quote it
 * before anything in it is known to be a secret: a job payload refused
 * because it does not parse holds the job token, credentials in repo_url
 * and masked variables, and none of them is a registered log secret yet.
 * So every excerpt passes one redaction that needs no knowledge of the
 * payload and works on text cut anywhere, JSON or not:
 *
 *   - known token prefixes (glrt-, glpat-, glcbt-, ...): what follows the
 *     prefix;
 *   - the value of a member or parameter whose name is token, *_token,
 *     *-token, password, secret, authorization and the like, in JSON, in
 *     JSON quoted inside a string (\"), HTML-escaped (&quot;), in headers
 *     (Name: value) and in query strings (name=value);
 *   - the value of a member named value, unless the same object says
 *     "masked": false after it, as GitLab writes its variables; a value
 *     whose object is cut short counts as masked;
 *   - the credentials of a URL (scheme://user:secret@host).
 *
 * A redacted run prints as "[REDACTED]".  Redaction may hide more than a
 * secret, never less: a log line is for an operator, not for a parser.
 */
#ifndef API_REDACT_H
#define API_REDACT_H

#include <stdbool.h>
#include <stddef.h>
#include "lib/buf.h"

/* NULL-terminated; the job log's masker uses the same list. */
extern const char *const redact_token_prefixes[];

/* Whether a member, header or parameter of this name holds a secret. */
bool	redact_name_is_secret(const char *name, size_t len);

/*
 * Append text to b as one printable line (controls escaped as \n, \xNN),
 * redacted, stopping after about max bytes of the input and saying how
 * long the whole was: "... (N bytes)".  The redaction sees the whole text
 * before it is cut, so a cut never leaves part of a secret behind.
 */
void	redact_excerpt(struct buf *b, const char *text, size_t len, size_t max);

/*
 * The text as it is but for the redacted runs, NUL-terminated (the caller
 * frees it): a JSON answer stays JSON when its secrets were strings.
 */
char	*redact_copy(const char *text, size_t len, size_t *outlen);

#endif
