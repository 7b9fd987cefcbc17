/*
 * The GitLab runner API, as plain C: the one header of api/ that runner/
 * includes.  JSON never leaves api/; callers get structs with owned
 * strings.
 *
 * Every call is asynchronous on the loop given to api_new() and follows
 * one contract: it returns a handle, and its callback is called exactly
 * once (also for a bad URL, which fails before anything is sent, and on
 * api_call_cancel()).  The handle is freed by api after the callback
 * returns; do not use it afterwards.
 *
 * Tokens go only where protocol.md 1.3 puts them: the runner token in the
 * JSON body and Runner-Token, the job token in the body of PUT /jobs/:id
 * and in Job-Token, Private-Token only for a personal access token
 * (api_reset_token_pat).  No token is ever logged.
 */
#ifndef API_API_H
#define API_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <sys/types.h>

#include <uv.h>

#include "lib/strv.h"

struct api;
struct api_call;
struct log_secret;

struct api_config {
	uv_loop_t	*loop;
	/* Where config.toml lives: certs/<host>.crt is looked up there. */
	const char	*config_dir;
	uint64_t	 connection_max_age_ms;	/* 0: no limit */
	/* Backoff bounds (0: 100 ms .. 60 s); tests shorten them. */
	uint64_t	 backoff_min_ms;
	uint64_t	 backoff_max_ms;
	/*
	 * A GitLab that fails (5xx, no answer) holds the endpoint class it
	 * failed on, process-wide (api/pushback.h): windows from gate_min_ms
	 * (0: 1 s) doubling to gate_max_ms (0: 8 s); once it answers again
	 * what was held resumes over resume_spread_ms (check_interval).
	 */
	uint64_t	 gate_min_ms;
	uint64_t	 gate_max_ms;
	uint64_t	 resume_spread_ms;
};

/* One [[runners]] entry's way to its GitLab.  All borrowed. */
struct api_creds {
	const char	*url;		/* as written: https://host[/path][/ci] */
	const char	*token;		/* runner token (registration token for register) */
	const char	*tls_ca_file;	/* "" or NULL: <config dir>/certs/<host>.crt if present */
	const char	*tls_cert_file;	/* "" or NULL: certs/<host>.auth.crt if present */
	const char	*tls_key_file;	/* "" or NULL: certs/<host>.auth.key if present */
	/*
	 * The runner and system_id labels of gitlab_runner_api_request_*
	 * (gitlab.c): the runner's short token also when token is "" (a
	 * job's calls).  NULL: log_token(token) and "".
	 */
	const char	*short_token;
	const char	*system_id;
};

/* Features advertised in info.features (protocol.md 4.2): only what works. */
struct api_features {
	bool	variables, image, services, artifacts, cache, fallback_cache_keys;
	bool	shared, upload_multiple_artifacts, upload_raw_artifacts, session;
	bool	terminal, refspecs, masking, proxy, raw_variables, artifacts_exclude;
	bool	multi_build_steps, trace_reset, trace_checksum, trace_size;
	bool	vault_secrets, cancelable, return_exit_code, service_variables;
	bool	service_multiple_aliases, image_executor_opts, service_executor_opts;
	bool	cancel_gracefully, native_steps_integration, two_phase_job_commit;
	bool	job_inputs;
};

struct api_label {
	const char	*name;
	const char	*value;
};

/* The "info" object sent with register, verify, job requests and updates. */
struct api_info {
	const char		*name;		/* "gitlab-runner" compatible product name */
	const char		*version;
	const char		*revision;
	const char		*platform;	/* linux */
	const char		*architecture;	/* amd64 */
	const char		*executor;	/* "" or NULL: omitted */
	const char		*shell;		/* "" or NULL: omitted */
	struct api_features	 features;
	const struct api_label	*labels;
	size_t			 n_labels;
};

/* What every answer carries, for messages and logs. */
struct api_answer {
	long		 status;	/* HTTP status; 0 if no answer came */
	const char	*message;	/* server's message flattened, or the transport error */
	const char	*request_id;	/* correlation id */
	/*
	 * Job request answered 204 without X-GitLab-Last-Update: Workhorse's
	 * own answer to a long poll (the queue changed, or the hold ended),
	 * not Rails' "nothing for you".
	 */
	bool		 workhorse_204;
	/*
	 * Job request answered with Gitlab-Ci-Builds-Polling: yes: Workhorse
	 * holds a request that carries the current last_update, so asking
	 * again at once waits in GitLab, not in a loop.
	 */
	bool		 long_polling;
};

/* Outcome of the simple calls (register, verify, unregister, reset, discovery). */
enum api_result {
	API_OK,
	API_FORBIDDEN,		/* 403: token unknown, expired, revoked, or wrong PAT */
	API_UNAUTHORIZED,	/* 401 */
	API_NOT_FOUND,		/* 404 */
	API_GONE,		/* 410: registration tokens are disabled on this GitLab */
	API_UNPROCESSABLE,	/* 422: e.g. runner orphaned, reset refused */
	API_DISABLED,		/* 501: discovery says there is no job router */
	API_FAILED,		/* any other status, a transport error, a bad answer */
	API_CLIENT_ERROR,	/* nothing was sent: bad URL, unreadable TLS file */
	API_CANCELED,
};

const char	*api_result_name(enum api_result r);

/* A runner's identity from register, verify or reset. */
struct api_runner_token {
	int64_t	 id;		/* 0 when the server did not say */
	char	*token;		/* owned; NULL when the server did not send one */
	bool	 expires;	/* false: token_expires_at was null or absent */
	time_t	 expires_at;	/* UTC */
};

void	api_runner_token_release(struct api_runner_token *t);

/* Legacy registration (POST /runners). */
struct api_register_params {
	const char		*description;
	const char		*maintenance_note;
	const char		*tag_list;	/* comma-separated */
	bool			 run_untagged;
	bool			 locked;
	const char		*access_level;	/* not_protected, ref_protected, or "" */
	int64_t			 maximum_timeout; /* 0: not sent */
	bool			 paused;
	const struct api_info	*info;
};

typedef void	api_token_cb(enum api_result result, const struct api_answer *answer,
		    struct api_runner_token *token, void *data);
typedef void	api_done_cb(enum api_result result, const struct api_answer *answer,
		    void *data);
typedef void	api_discovery_cb(enum api_result result, const struct api_answer *answer,
		    const char *server_url, void *data);

/* token: the callee may steal token->token (set it to NULL) before returning. */
struct api_call	*api_register(struct api *a, const struct api_creds *creds,
		    const struct api_register_params *p, api_token_cb *cb, void *data);
struct api_call	*api_verify(struct api *a, const struct api_creds *creds,
		    const struct api_info *info, const char *system_id,
		    api_token_cb *cb, void *data);
/* DELETE /runners (legacy tokens). */
struct api_call	*api_unregister(struct api *a, const struct api_creds *creds,
		    api_done_cb *cb, void *data);
/* DELETE /runners/managers (glrt- tokens): this machine's manager only. */
struct api_call	*api_unregister_manager(struct api *a, const struct api_creds *creds,
		    const char *system_id, api_done_cb *cb, void *data);
struct api_call	*api_reset_token(struct api *a, const struct api_creds *creds,
		    api_token_cb *cb, void *data);
/* POST /runners/:id/reset_authentication_token with Private-Token: pat. */
struct api_call	*api_reset_token_pat(struct api *a, const struct api_creds *creds,
		    int64_t runner_id, const char *pat, api_token_cb *cb, void *data);
/* GET /runners/router/discovery; the answer is cached for an hour per runner. */
struct api_call	*api_discovery(struct api *a, const struct api_creds *creds,
		    api_discovery_cb *cb, void *data);

/* ---- The job payload (protocol.md 4.5), every field, strings owned. ---- */

struct api_variable {
	char	*key;
	char	*value;
	bool	 public_;	/* default true when absent */
	bool	 file;
	bool	 masked;
	bool	 raw;
};

struct api_step {
	char		*name;		/* script, after_script, release, ... */
	struct strv	 script;
	int64_t		 timeout;	/* seconds; 0 = not given */
	char		*when;		/* on_success, on_failure, always */
	bool		 allow_failure;
};

struct api_hook {
	char		*name;		/* pre_get_sources_script, post_get_sources_script */
	struct strv	 script;
};

struct api_port {
	int64_t	 number;
	char	*protocol;
	char	*name;
};

struct api_image {
	bool			 present;	/* false: null or absent */
	char			*name;
	char			*alias;
	struct strv		 entrypoint;
	struct strv		 command;
	struct api_port		*ports;
	size_t			 n_ports;
	struct api_variable	*variables;
	size_t			 n_variables;
	struct strv		 pull_policy;
	char			*docker_platform;	/* executor_opts.docker.platform */
	char			*docker_user;		/* executor_opts.docker.user */
	char			*kubernetes_user;	/* executor_opts.kubernetes.user */
	/* executor_opts keys this runner does not know ("docker.blammo"): fail the job. */
	struct strv		 unsupported_options;
};

struct api_artifact {
	char		*name;
	bool		 untracked;
	struct strv	 paths;
	struct strv	 exclude;
	char		*when;
	char		*artifact_type;
	char		*artifact_format;
	char		*expire_in;
};

struct api_cache {
	char		*key;
	bool		 untracked;
	char		*policy;
	struct strv	 paths;
	char		*when;
	struct strv	 fallback_keys;
};

struct api_credential {
	char	*type;
	char	*url;
	char	*username;
	char	*password;
};

struct api_dependency {
	int64_t	 id;
	char	*name;
	char	*token;
	char	*artifacts_filename;	/* NULL: nothing to download */
	int64_t	 artifacts_size;
};

struct api_job_info {
	int64_t	 id;
	char	*name;
	char	*stage;
	int64_t	 project_id;
	char	*project_name;
	char	*project_full_path;
	int64_t	 namespace_id;
	int64_t	 root_namespace_id;
	int64_t	 organization_id;
	char	*instance_id;
	char	*instance_uuid;
	int64_t	 user_id;
	int64_t	 scoped_user_id;
	int64_t	 pipeline_id;
	double	 time_in_queue_seconds;
	char	*project_jobs_running_on_instance_runners_count;
	int64_t	 queue_size;
	int64_t	 queue_depth;
};

struct api_git_info {
	char		*repo_url;	/* carries the job token: never log it as is */
	char		*ref;
	char		*sha;
	char		*before_sha;
	char		*ref_type;	/* branch, tag */
	struct strv	 refspecs;
	int64_t		 depth;
	char		*repo_object_format;
	int		 protected_;	/* -1 null/absent, 0, 1 */
};

struct api_runner_info {
	int64_t	 timeout;		/* seconds; 0 = runner default (7200) */
	char	*uuid;
	char	*runner_session_url;
};

struct api_job_features {
	bool		 trace_sections;
	struct strv	 failure_reasons;
	struct strv	 token_mask_prefixes;
};

/* Secrets and inputs vary by provider and type: kept as JSON text. */
struct api_secret {
	char	*name;
	char	*provider;	/* vault, gcp_secret_manager, ... */
	bool	 file;		/* default true */
	char	*json;		/* the provider object, as JSON */
};

struct api_input {
	char	*key;
	char	*type;
	char	*json;		/* the value's content, as JSON */
	bool	 sensitive;
};

struct api_job {
	int64_t			 id;
	char			*token;		/* the job token */
	struct log_secret	*token_mask;	/* masks token in the log while the job lives */
	bool			 allow_git_fetch;
	struct api_job_info	 job_info;
	struct api_git_info	 git_info;
	struct api_runner_info	 runner_info;
	struct api_variable	*variables;
	size_t			 n_variables;
	struct api_step		*steps;
	size_t			 n_steps;
	struct api_hook		*hooks;
	size_t			 n_hooks;
	struct api_image	 image;
	struct api_image	*services;
	size_t			 n_services;
	struct api_artifact	*artifacts;
	size_t			 n_artifacts;
	struct api_cache	*caches;
	size_t			 n_caches;
	struct api_credential	*credentials;
	size_t			 n_credentials;
	struct api_dependency	*dependencies;
	size_t			 n_dependencies;
	struct api_job_features	 features;
	struct api_secret	*secrets;
	size_t			 n_secrets;
	struct api_input	*inputs;
	size_t			 n_inputs;
	char			*run;		/* CI Steps, JSON text; NULL if absent */
	/*
	 * run asks for steps (GitLab Functions, for a step runner): a
	 * non-empty array, or anything but an empty one or null.
	 */
	bool			 run_steps;
	char			*policy_options; /* JSON text; NULL if absent */
};

void	api_job_free(struct api_job *job);

/* ---- Jobs: request, update, log. ---- */

enum api_request_result {
	API_JOB_RECEIVED,	/* 201: *job is set */
	API_JOB_NONE,		/* 204 */
	API_JOB_FORBIDDEN,	/* 403: counts toward unhealthy */
	API_JOB_UNAVAILABLE,	/* 503 after retries */
	API_JOB_FAILED,		/* 409, 422, 429 after retries, other, transport, bad payload */
	API_JOB_CLIENT_ERROR,	/* nothing sent: counts toward unhealthy */
	API_JOB_CANCELED,
};

/* job is owned by the callee, who frees it with api_job_free(). */
typedef void	api_request_cb(enum api_request_result result,
		    const struct api_answer *answer, struct api_job *job, void *data);

/*
 * POST /jobs/request, long-polled: last_update is kept per (url, token) and
 * echoed, so GitLab (Workhorse) may hold the request until a job appears.
 */
struct api_call	*api_request_job(struct api *a, const struct api_creds *creds,
		    const struct api_info *info, const char *system_id,
		    api_request_cb *cb, void *data);

/* Where a job's calls go: its runner's URL and TLS, and the job token. */
struct api_job_ref {
	const struct api_creds	*creds;		/* creds->token is not used */
	int64_t			 id;
	const char		*token;		/* the job token */
};

struct api_job_update {
	const char	*state;		/* running, success, failed */
	const char	*failure_reason; /* NULL/"": omitted */
	int		 exit_code;	/* 0: omitted */
	bool		 has_output;	/* false: "output": {} */
	uint32_t	 checksum;	/* crc32 of the whole log */
	uint64_t	 bytesize;
};

enum api_update_result {
	API_UPDATE_OK,			/* 200 */
	API_UPDATE_ACCEPTED,		/* 202: send the same again after the interval */
	API_UPDATE_TRACE_VALIDATION_FAILED, /* 412: resend the log from 0, then again */
	API_UPDATE_ABORT,		/* 403, 404, Job-Status canceled/failed: stop */
	API_UPDATE_FAILED,		/* anything else: retry later */
	API_UPDATE_CANCELED,
};

/* What job updates and log patches learn beyond their result. */
struct api_job_state {
	char		 job_status[32];	/* Job-Status, "" if absent */
	bool		 cancel_requested;	/* Job-Status: canceling */
	int64_t		 update_interval;	/* X-GitLab-Trace-Update-Interval (s), 0 absent */
};

typedef void	api_update_cb(enum api_update_result result,
		    const struct api_answer *answer, const struct api_job_state *state,
		    void *data);

struct api_call	*api_update_job(struct api *a, const struct api_job_ref *job,
		    const struct api_info *info, const struct api_job_update *u,
		    api_update_cb *cb, void *data);

enum api_patch_result {
	API_PATCH_OK,			/* 202: *offset is start + len */
	API_PATCH_RANGE_MISMATCH,	/* 416: *offset is the server's */
	API_PATCH_NOT_FOUND,		/* 404: stop sending the log */
	API_PATCH_ABORT,		/* 403, Job-Status canceled/failed */
	API_PATCH_FAILED,		/* try again next tick */
	API_PATCH_CANCELED,
};

typedef void	api_patch_cb(enum api_patch_result result,
		    const struct api_answer *answer, const struct api_job_state *state,
		    uint64_t offset, void *data);

/*
 * PATCH /jobs/:id/trace with Content-Range start-(start+len-1).  The bytes
 * are read from the log file fd at the same offsets, on every attempt: no
 * copy of the log is held while the request is in flight, so a job
 * catching up costs no megabyte of memory.  The caller keeps fd open and
 * that range unchanged until the callback; len must be 1 .. 1 MiB (an
 * empty patch is never sent).
 */
struct api_call	*api_patch_trace(struct api *a, const struct api_job_ref *job,
		    int fd, uint64_t start, size_t len, bool debug_trace,
		    api_patch_cb *cb, void *data);
/*
 * The same for bytes in memory (a log whose disk failed keeps its end
 * there): they are copied into the request.
 */
struct api_call	*api_patch_trace_bytes(struct api *a, const struct api_job_ref *job,
		    uint64_t start, const char *bytes, size_t len, bool debug_trace,
		    api_patch_cb *cb, void *data);

/* ---- Artifacts (protocol.md 7.1, 7.2). ---- */

enum api_artifact_result {
	API_ARTIFACT_OK,		/* upload 201; download 200, the file written */
	API_ARTIFACT_UNAUTHORIZED,	/* 401 */
	API_ARTIFACT_FORBIDDEN,		/* 403 */
	API_ARTIFACT_NOT_FOUND,		/* 404 */
	API_ARTIFACT_TOO_LARGE,		/* 413 */
	API_ARTIFACT_FAILED,		/* anything else, once the retries are spent */
	API_ARTIFACT_CANCELED,
};

/*
 * bytes: how many a download wrote.  Redirects never get here: http.c
 * follows them (a presigned object storage URL, say) by its one rule.
 */
typedef void	api_artifact_cb(enum api_artifact_result result,
		    const struct api_answer *answer, uint64_t bytes, void *data);

struct api_artifact_upload {
	const char	*format;	/* artifact_format; NULL or "": omitted */
	const char	*type;		/* artifact_type */
	const char	*expire_in;
	const char	*content_type;	/* multipart/form-data; boundary=... */
	int		 fd;		/* the whole body, bytes 0 .. len-1 */
	off_t		 len;
	uint64_t	 timeout_ms;	/* 0: the default */
};

/*
 * POST /jobs/:id/artifacts with Job-Token.  The body is read from fd anew
 * for every attempt, so each one sends the same bytes; 5xx and transport
 * errors are retried (six tries), 403 and 413 are not.
 */
struct api_call	*api_upload_artifacts(struct api *a, const struct api_job_ref *job,
		    const struct api_artifact_upload *u, api_artifact_cb *cb, void *data);
/*
 * GET /jobs/:id/artifacts with job->token (the dependency's) in Job-Token,
 * ?direct_download=true if direct; a 200 body is written to fd.  The
 * redirect to object storage is followed without any token header, even
 * to GitLab's own origin: a presigned URL needs none.
 */
struct api_call	*api_download_artifacts(struct api *a, const struct api_job_ref *job,
		    bool direct, int fd, uint64_t timeout_ms, api_artifact_cb *cb,
		    void *data);

/* ---- The client. ---- */

struct api	*api_new(const struct api_config *cfg);
/* A reload's new gate_max_ms and resume_spread_ms (see api_config). */
void		 api_set_pushback(struct api *a, uint64_t gate_max_ms,
		    uint64_t resume_spread_ms);
/* Cancel every call (callbacks get their CANCELED result), then close. */
void		 api_close(struct api *a);
void		 api_call_cancel(struct api_call *call);

#endif
