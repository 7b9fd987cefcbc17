/*
 * JSON <-> plain C structs for the GitLab API, with cJSON.  Internal to
 * api/: nothing outside this folder sees a cJSON tree.
 *
 * Builders return a NUL-terminated compact JSON text the caller frees.
 * Parsers take the raw body (bytes with a length, not trusted), and on
 * failure return -1 with *err set to one line saying what was wrong and
 * where ("job payload: variables[3].key must be a string"); the caller
 * frees *err.  Nothing here logs.
 */
#ifndef API_JSON_H
#define API_JSON_H

#include <stddef.h>

#include "api/api.h"

/* POST /runners: description ... paused, info, token (registration token). */
char	*json_register_request(const struct api_register_params *p, const char *token);
/* POST /runners/verify: info, token, system_id (omitted when NULL/""). */
char	*json_verify_request(const struct api_info *info, const char *token,
	    const char *system_id);
/* {"token": ..., "system_id": ...} for unregister, unregister manager, reset. */
char	*json_token_request(const char *token, const char *system_id);
/* POST /jobs/request: info, token, system_id, last_update (omitted when empty). */
char	*json_job_request(const struct api_info *info, const char *token,
	    const char *system_id, const char *last_update);
/* PUT /jobs/:id: info, token (job), state, failure_reason, checksum, output, exit_code. */
char	*json_job_update(const struct api_info *info, const char *job_token,
	    const struct api_job_update *u);

/* {"id", "token", "token_expires_at"} of register, verify and reset. */
int	 json_parse_runner_token(const char *body, size_t len,
	    struct api_runner_token *out, char **err);
/* {"server_url": ...} of discovery; *url is owned by the caller. */
int	 json_parse_discovery(const char *body, size_t len, char **url, char **err);
/* The 201 body of POST /jobs/request. */
int	 json_parse_job(const char *body, size_t len, struct api_job **out, char **err);

/*
 * GitLab's error body flattened for a log line, as gitlab-runner does:
 * {"message":"403 Forbidden"} -> "403 Forbidden";
 * {"message":{"field":["e1","e2"]}} -> "field: e1; e2" (fields sorted by
 * name, joined with ", "); {"error":"x"} -> "x".  NULL when the body is
 * not such an object.
 */
char	*json_error_message(const char *body, size_t len);

#endif
