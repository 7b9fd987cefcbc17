/*
 * `runner artifacts-uploader` and `runner artifacts-downloader`: the
 * helpers the upload_artifacts and download_artifacts stages call, in the
 * project directory, with gitlab-runner's flags (protocol.md 7.1, 7.2).
 *
 * The job token comes from CI_JOB_TOKEN in the environment, never from
 * the command line, where `ps` would show it to every user of the host;
 * --token is refused.  The download stage sets CI_JOB_TOKEN to the
 * dependency's token for the one call.
 *
 * The upload body, the multipart framing around the archive, is written
 * to an unlinked temp file first, so every attempt and every redirect
 * sends the same bytes and memory stays flat whatever the size.  Downloads
 * stream to a temp file, which is extracted only once it is complete.
 * Redirects are the transport's (api/redirect.h): the job token never
 * follows one to another origin.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "api/api.h"
#include "api/session.h"
#include "helpers/archive.h"
#include "helpers/helpers.h"
#include "lib/buf.h"
#include "lib/cli.h"
#include "lib/clock.h"
#include "lib/duration.h"
#include "lib/fdio.h"
#include "lib/log.h"
#include "lib/rand.h"
#include "lib/size.h"
#include "lib/strv.h"
#include "lib/xmalloc.h"


/* One call on the helper's own loop, waited for. */
struct transfer {
	struct api_session	 session;
	enum api_artifact_result result;
	char			*message;	/* the server's answer, for the log */
	uint64_t		 bytes;
};

static void
on_transfer_done(enum api_artifact_result result, const struct api_answer *answer,
    uint64_t bytes, void *data)
{
	struct transfer *t = data;

	t->result = result;
	free(t->message);
	t->message = xstrdup(answer->message != NULL ? answer->message : "");
	t->bytes = bytes;
	t->session.pending--;
}

static void
transfer_release(struct transfer *t)
{
	free(t->message);
}

/* The job token, from the environment only. */
static const char *
job_token(const char *cmd)
{
	const char *t = getenv("CI_JOB_TOKEN");

	if (t == NULL || *t == '\0') {
		log_error("%s: no job token: CI_JOB_TOKEN is not set", cmd);
		return NULL;
	}
	return t;
}

static void
creds_for(struct api_creds *c, const char *url)
{
	memset(c, 0, sizeof(*c));
	c->url = url;
	/* File variables: the job exports their paths. */
	c->tls_ca_file = getenv("CI_SERVER_TLS_CA_FILE");
	c->tls_cert_file = getenv("CI_SERVER_TLS_CERT_FILE");
	c->tls_key_file = getenv("CI_SERVER_TLS_KEY_FILE");
}

/* A temp file for transfer bytes: $TMPDIR or /tmp. */
static int
temp_file(char **path)
{
	const char *dir = getenv("TMPDIR");
	int fd;

	*path = xasprintf("%s/runner-artifacts-XXXXXX", dir != NULL && *dir ? dir : "/tmp");
	if ((fd = mkstemp(*path)) == -1) {
		log_error("cannot create a temporary file %s: %s", *path, strerror(errno));
		free(*path);
		*path = NULL;
	}
	return fd;
}

static void
rate_line(const char *verb, uint64_t bytes, uint64_t start_ms)
{
	uint64_t ms = clock_mono_ms() - start_ms;
	char size[32], rate[32];

	size_format(bytes, size, sizeof(size));
	size_format(ms > 0 ? bytes * 1000 / ms : bytes, rate, sizeof(rate));
	log_info("%s %s in %.1f s (%s/s)", verb, size, (double)ms / 1000, rate);
}

/* ---- upload ---- */

struct upload_opts {
	const char	*url;
	int64_t		 id;
	struct strv	 paths, excludes;
	bool		 untracked;
	const char	*name;
	const char	*format;
	const char	*type;
	const char	*expire_in;
	uint64_t	 timeout_ms;
	uint64_t	 response_header_timeout_ms;	/* checked, not used */
	const char	*token;		/* refused */
};

/* The part's file name: the artifact name's last part, or "default". */
static char *
upload_filename(const char *name, enum archive_format fmt)
{
	const char *base = name != NULL && *name ? name : "artifacts";
	const char *slash = strrchr(base, '/');

	if (slash != NULL)
		base = slash + 1;
	if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
		base = "default";
	return xasprintf("%s%s", base, archive_format_suffix(fmt));
}

/* A quoted-string for Content-Disposition: \ and " escaped, as Go's mime does. */
static void
quoted(struct buf *b, const char *s)
{
	buf_putc(b, '"');
	for (; *s != '\0'; s++) {
		if (*s == '"' || *s == '\\')
			buf_putc(b, '\\');
		if (*s == '\r' || *s == '\n')
			continue;
		buf_putc(b, *s);
	}
	buf_putc(b, '"');
}

/*
 * The whole multipart body into fd: head, archive, tail.  Returns its
 * length, or -1 (logged).
 */
static off_t
write_body(int fd, const char *boundary, const char *filename, enum archive_format fmt,
    char *const *files, struct archive_stats *st)
{
	struct buf head;
	char cwd[4096], err[512], *tail;
	off_t len;
	int rc;

	if (getcwd(cwd, sizeof(cwd)) == NULL) {
		log_error("cannot tell the working directory: %s", strerror(errno));
		return -1;
	}
	buf_init(&head, BUF_UNLIMITED);
	buf_printf(&head, "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=",
	    boundary);
	quoted(&head, filename);
	buf_puts(&head, "\r\nContent-Type: application/octet-stream\r\n\r\n");
	rc = fd_write_all(fd, head.ptr, head.len);
	buf_release(&head);
	if (rc == -1) {
		log_error("cannot write the upload body: %s", strerror(errno));
		return -1;
	}
	if (archive_write(fd, fmt, cwd, files, st, err, sizeof(err)) == -1) {
		log_error("%s", err);
		return -1;
	}
	tail = xasprintf("\r\n--%s--\r\n", boundary);
	if (lseek(fd, 0, SEEK_END) == -1 || fd_write_all(fd, tail, strlen(tail)) == -1) {
		log_error("cannot write the upload body: %s", strerror(errno));
		free(tail);
		return -1;
	}
	free(tail);
	if ((len = lseek(fd, 0, SEEK_CUR)) == -1)
		log_error("cannot write the upload body: %s", strerror(errno));
	return len;
}

static int
send_upload(const struct upload_opts *o, const char *token, int fd, off_t len,
    const char *content_type)
{
	struct api_artifact_upload up = { 0 };
	struct api_job_ref ref;
	struct api_creds creds;
	struct transfer t = { 0 };
	char short_tok[LOG_TOKEN_SIZE], *prefix;
	uint64_t start = clock_mono_ms();
	int rc = 1;

	up.format = o->format;
	up.type = o->type;
	up.expire_in = o->expire_in;
	up.content_type = content_type;
	up.fd = fd;
	up.len = len;
	up.timeout_ms = o->timeout_ms;
	prefix = o->type != NULL && *o->type ? xasprintf("Uploading artifacts as \"%s\" to "
	    "coordinator...", o->type) : xstrdup("Uploading artifacts to coordinator...");
	log_token(token, short_tok);
	api_session_open(&t.session, NULL, 0);
	creds_for(&creds, o->url);
	ref.creds = &creds;
	ref.id = o->id;
	ref.token = token;
	t.session.pending = 1;
	(void)api_upload_artifacts(t.session.api, &ref, &up, on_transfer_done, &t);
	api_session_wait(&t.session);
	switch (t.result) {
	case API_ARTIFACT_OK:
		log_info("%s %s  id=%" PRId64 " responseStatus=%s token=%s", prefix, t.message,
		    o->id, t.message, short_tok);
		rate_line("Uploaded", (uint64_t)len, start);
		rc = 0;
		break;
	case API_ARTIFACT_TOO_LARGE:
		log_error("%s too large archive  id=%" PRId64 " responseStatus=%s token=%s",
		    prefix, o->id, t.message, short_tok);
		log_error("the artifacts are larger than this GitLab accepts "
		    "(its maximum artifacts size): not retried");
		break;
	case API_ARTIFACT_FORBIDDEN:
		log_error("%s forbidden  id=%" PRId64 " responseStatus=%s token=%s", prefix,
		    o->id, t.message, short_tok);
		log_error("GitLab refused the job token: the job is no longer running, or "
		    "artifacts are disabled for this project: not retried");
		break;
	default:
		log_error("%s failed  id=%" PRId64 " responseStatus=%s token=%s", prefix,
		    o->id, t.message, short_tok);
		break;
	}
	api_session_close(&t.session);
	transfer_release(&t);
	free(prefix);
	return rc;
}

static int
upload(const struct upload_opts *o, enum archive_format fmt)
{
	struct strv files = { 0 };
	struct archive_stats st = { 0 };
	const char *token;
	char boundary[41], *path = NULL, *filename = NULL, *ctype = NULL, size[32];
	off_t len;
	int fd = -1, rc = 1;

	if ((token = job_token("artifacts-uploader")) == NULL)
		return 1;
	if (helper_select(o->paths.v, o->excludes.v, o->untracked, &files) == -1)
		return 1;
	if (files.n == 0) {
		/* Not a failure, as in gitlab-runner: the job may make none. */
		log_error("No files to upload");
		strv_release(&files);
		return 0;
	}
	if ((fd = temp_file(&path)) == -1)
		goto out;
	/* Nothing is left behind, whatever happens to this process. */
	unlink(path);
	memcpy(boundary, "runner-", 7);
	rand_hex(boundary + 7, 32);
	boundary[39] = '\0';
	filename = upload_filename(o->name, fmt);
	if ((len = write_body(fd, boundary, filename, fmt, files.v, &st)) == -1)
		goto out;
	size_format((unsigned long long)len, size, sizeof(size));
	log_info("%s: %" PRIu64 " files and directories, %s to send", filename, st.entries,
	    size);
	ctype = xasprintf("multipart/form-data; boundary=%s", boundary);
	rc = send_upload(o, token, fd, len, ctype);
out:
	if (fd != -1)
		close(fd);
	free(path);
	free(filename);
	free(ctype);
	strv_release(&files);
	return rc;
}

static int
no_token_flag(const struct cli_command *cmd)
{
	return cli_usage_error(cmd, "%s: --token is not accepted: a token on the command "
	    "line is visible to every user of the host; the job token comes from CI_JOB_TOKEN",
	    cmd->name);
}

/* The lines both commands have. */
#define OPT_URL(type)	CLI_OPT("url", 0, CLI_STRING, NULL, offsetof(type, url), "URL", \
	"GitLab's URL")
#define OPT_ID(type)	CLI_OPT("id", 0, CLI_INT, NULL, offsetof(type, id), "JOB_ID", \
	"the job's id")
#define OPT_TOKEN(type)	CLI_OPT("token", 0, CLI_STRING, NULL, offsetof(type, token), \
	"TOKEN", "refused: the job token comes from CI_JOB_TOKEN")
#define OPT_TIMEOUT(type) CLI_OPT("timeout", 0, CLI_DURATION, NULL, \
	offsetof(type, timeout_ms), "DURATION", "how long the transfer may take", .def = "1h")

#define UO(f)	offsetof(struct upload_opts, f)

static const struct cli_option upload_options[] = {
	OPT_URL(struct upload_opts),
	OPT_ID(struct upload_opts),
	OPT_TOKEN(struct upload_opts),
	CLI_OPT("path", 0, CLI_STRINGS, NULL, UO(paths), "GLOB", "files to take (repeat)"),
	CLI_OPT("exclude", 0, CLI_STRINGS, NULL, UO(excludes), "GLOB",
	    "files to leave out (repeat)"),
	CLI_OPT("untracked", 0, CLI_BOOL, NULL, UO(untracked), NULL,
	    "take the files git does not track too"),
	CLI_OPT("name", 0, CLI_STRING, NULL, UO(name), "NAME", "the artifact's name"),
	CLI_OPT("artifact-format", 0, CLI_STRING, NULL, UO(format), "FORMAT",
	    "zip, gzip or raw"),
	CLI_OPT("artifact-type", 0, CLI_STRING, NULL, UO(type), "TYPE", "archive, junit, ..."),
	CLI_OPT("expire-in", 0, CLI_STRING, NULL, UO(expire_in), "DURATION",
	    "when GitLab may delete it"),
	OPT_TIMEOUT(struct upload_opts),
	/* Accepted for gitlab-runner's scripts; the attempt deadline covers it. */
	CLI_OPT("response-header-timeout", 0, CLI_DURATION, NULL,
	    UO(response_header_timeout_ms), "DURATION", "accepted; the timeout covers it"),
	CLI_END,
};

static int
uploader_run(const struct cli_command *cmd, void *opts)
{
	const struct upload_opts *o = opts;
	enum archive_format fmt = ARCHIVE_ZIP;

	if (o->token != NULL)
		return no_token_flag(cmd);
	if (o->url == NULL || *o->url == '\0' || o->id <= 0)
		return cli_usage_error(cmd, "--url and a positive --id are required");
	if (o->format != NULL && *o->format && archive_format_parse(o->format, &fmt) == -1)
		return cli_usage_error(cmd, "--artifact-format: \"%s\" is not zip, gzip or raw",
		    o->format);
	return upload(o, fmt);
}

const struct cli_command cmd_artifacts_uploader_entry = {
	.name = "artifacts-uploader",
	.summary = "Archive files and upload them as job artifacts (called by the job script)",
	.usage = "runner artifacts-uploader --url URL --id JOB_ID [--path GLOB]... "
	    "[--exclude GLOB]... [--untracked] [--name NAME] [--artifact-format zip|gzip|raw] "
	    "[--artifact-type TYPE] [--expire-in DURATION] [--timeout DURATION]",
	.options = upload_options,
	.opts_size = sizeof(struct upload_opts),
	.run = uploader_run,
};

/* ---- download ---- */

static const char *
download_failure(enum api_artifact_result r)
{
	switch (r) {
	case API_ARTIFACT_UNAUTHORIZED:	return "unauthorized";
	case API_ARTIFACT_FORBIDDEN:	return "forbidden";
	case API_ARTIFACT_NOT_FOUND:	return "not found";
	default:			return "failed";
	}
}

static int
download(const char *url, int64_t id, uint64_t timeout_ms)
{
	struct api_job_ref ref;
	struct api_creds creds;
	struct transfer t = { 0 };
	const char *token;
	char short_tok[LOG_TOKEN_SIZE], *path = NULL;
	uint64_t start = clock_mono_ms();
	int fd, rc = 1;

	if ((token = job_token("artifacts-downloader")) == NULL)
		return 1;
	if ((fd = temp_file(&path)) == -1)
		return 1;
	log_token(token, short_tok);
	creds_for(&creds, url);
	ref.creds = &creds;
	ref.id = id;
	ref.token = token;
	api_session_open(&t.session, NULL, 0);
	t.session.pending = 1;
	(void)api_download_artifacts(t.session.api, &ref, true, fd, timeout_ms,
	    on_transfer_done, &t);
	api_session_wait(&t.session);
	if (t.result != API_ARTIFACT_OK) {
		log_error("Downloading artifacts from coordinator... %s  id=%" PRId64
		    " responseStatus=%s token=%s", download_failure(t.result), id, t.message,
		    short_tok);
		goto out;
	}
	log_info("Downloading artifacts from coordinator... ok  id=%" PRId64
	    " responseStatus=%s token=%s", id, t.message, short_tok);
	rate_line("Downloaded", t.bytes, start);
	if (helper_extract(path) == 0)
		rc = 0;
out:
	api_session_close(&t.session);
	transfer_release(&t);
	close(fd);
	unlink(path);
	free(path);
	return rc;
}

struct download_opts {
	const char	*url;
	int64_t		 id;
	uint64_t	 timeout_ms;
	const char	*token;		/* refused */
};

static const struct cli_option download_options[] = {
	OPT_URL(struct download_opts),
	OPT_ID(struct download_opts),
	OPT_TOKEN(struct download_opts),
	OPT_TIMEOUT(struct download_opts),
	CLI_END,
};

static int
downloader_run(const struct cli_command *cmd, void *opts)
{
	const struct download_opts *o = opts;

	if (o->token != NULL)
		return no_token_flag(cmd);
	if (o->url == NULL || *o->url == '\0' || o->id <= 0)
		return cli_usage_error(cmd, "--url and a positive --id are required");
	return download(o->url, o->id, o->timeout_ms);
}

const struct cli_command cmd_artifacts_downloader_entry = {
	.name = "artifacts-downloader",
	.summary = "Download and extract a job's artifacts (called by the job script)",
	.usage = "runner artifacts-downloader --url URL --id JOB_ID [--timeout DURATION]",
	.options = download_options,
	.opts_size = sizeof(struct download_opts),
	.run = downloader_run,
};
