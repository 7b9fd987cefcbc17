/*
 * The cache and artifact stages' text: restore_cache, download_artifacts,
 * archive_cache(_on_failure) and upload_artifacts_on_success/_on_failure,
 * in the shape of gitlab-runner's shells/abstract.go (protocol.md 7).
 *
 * The work itself is done by this binary's helper commands, which the
 * script calls by absolute path.  Each call is guarded by a `--version`
 * probe as gitlab-runner guards its helper, so a runner binary that went
 * missing under a running job gives a warning, not a shell error.
 *
 * Cache failures are warnings (the `if` around the helper turns its
 * failure into one), artifact download and upload failures fail the stage
 * (errexit), as in gitlab-runner.  Tokens reach the helpers only through
 * the environment: the job's CI_JOB_TOKEN is exported already, and a
 * dependency's token is set for the one downloader call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "lib/xmalloc.h"
#include "runner/script.h"
#include "runner/script_int.h"

/* The upload deadlines gitlab-runner passes by default ([runners.artifact]). */
#define UPLOAD_TIMEOUT			"1h0m0s"
#define RESPONSE_HEADER_TIMEOUT		"10m0s"

static int
empty(const char *s)
{
	return (s == NULL || *s == '\0');
}

static void
arg(struct buf *b, const char *flag, const char *value)
{
	buf_putc(b, ' ');
	buf_puts(b, flag);
	buf_putc(b, ' ');
	script_quote(b, value);
}

static void
say_printf(struct buf *b, const char *fmt, const char *text_fmt, const char *a1)
{
	char *m = xasprintf(text_fmt, a1);

	script_say(b, fmt, m);
	free(m);
}

/*
 * gitlab-runner's guardRunnerCommand: `body` runs only if the helper
 * answers --version.  Returns with the caller's text open between the
 * two halves: call guard_end() after writing the guarded part.
 */
static int
guard_begin(struct buf *b, const struct script_job *j, const char *action)
{
	if (empty(j->runner_command)) {
		say_printf(b, FMT_WARNING, "%s is not supported by this executor.", action);
		return (0);
	}
	buf_puts(b, "if ");
	script_quote(b, j->runner_command);
	buf_puts(b, " --version >/dev/null 2>&1; then\n");
	return (1);
}

static void
guard_end(struct buf *b, const struct script_job *j, const char *action)
{
	char *m = xasprintf("Missing %s. %s is disabled.", j->runner_command, action);

	buf_puts(b, "else\n");
	script_say(b, FMT_WARNING, m);
	buf_puts(b, "fi\n");
	free(m);
}

static void
cache_warnings(struct buf *b, const struct script_cache *c)
{
	size_t i;

	for (i = 0; i < c->warnings.n; i++)
		script_say(b, FMT_WARNING, c->warnings.v[i]);
}

static int
cache_has_files(const struct script_cache *c)
{
	return (c->paths.n > 0 || c->untracked);
}

/* Try keys[i], and the next ones only if it could not be extracted. */
static void
extract_chain(struct buf *b, const struct script_job *j, const struct script_cache *c,
    size_t i)
{
	const struct script_cache_key *k = &c->keys[i];

	say_printf(b, FMT_NOTICE, "Checking cache for %s...", k->key);
	buf_puts(b, "if ");
	script_quote(b, j->runner_command);
	buf_puts(b, " cache-extractor");
	arg(b, "--file", k->file);
	buf_printf(b, " --timeout %lld; then\n", (long long)j->cache_request_timeout);
	script_say(b, FMT_NOTICE, "Successfully extracted cache");
	buf_puts(b, "else\n");
	script_say(b, FMT_WARNING, "Failed to extract cache");
	if (i + 1 < c->n_keys)
		extract_chain(b, j, c, i + 1);
	buf_puts(b, "fi\n");
}

int
script_restore_cache(struct buf *b, const struct script_job *j)
{
	const struct script_cache *c;
	int any = 0;
	size_t i;

	script_prologue(b, j);
	for (i = 0; i < j->n_caches; i++) {
		c = &j->caches[i];
		if (!cache_has_files(c))
			continue;
		any = 1;
		cache_warnings(b, c);
		if (c->n_keys == 0) {
			script_say(b, FMT_NOTICE,
			    "Skipping cache extraction due to empty cache key");
			continue;
		}
		if (!c->pull) {
			say_printf(b, FMT_NOTICE, "Not downloading cache %s due to policy",
			    c->keys[0].key);
			continue;
		}
		if (guard_begin(b, j, "Extracting cache")) {
			extract_chain(b, j, c, 0);
			guard_end(b, j, "Extracting cache");
		}
	}
	return (any);
}

/* A command tried `attempts` times, with gitlab-runner's retry warning. */
static void
with_attempts(struct buf *b, const char *cmd, int attempts, const char *what)
{
	if (attempts <= 1) {
		buf_puts(b, cmd);
		buf_putc(b, '\n');
		return;
	}
	if (attempts > 10)
		attempts = 10;
	buf_puts(b, "_runner_attempt=1\nuntil ");
	buf_puts(b, cmd);
	buf_puts(b, "; do\n  _runner_exit_code=$?\n");
	buf_printf(b, "  if [ \"$_runner_attempt\" -ge %d ]; then "
	    "exit $_runner_exit_code; fi\n", attempts);
	buf_puts(b, "  _runner_attempt=$((_runner_attempt + 1))\n  ");
	script_say(b, FMT_WARNING, what);
	buf_puts(b, "done\n");
}

int
script_download_artifacts(struct buf *b, const struct script_job *j)
{
	const struct script_dependency *d;
	struct buf cmd;
	char *m;
	size_t i;

	if (j->n_dependencies == 0)
		return (0);
	script_prologue(b, j);
	if (!guard_begin(b, j, "Artifacts downloading"))
		return (1);
	buf_init(&cmd, BUF_UNLIMITED);
	for (i = 0; i < j->n_dependencies; i++) {
		d = &j->dependencies[i];
		m = xasprintf("Downloading artifacts for %s (%lld)...", d->name,
		    (long long)d->id);
		script_say(b, FMT_NOTICE, m);
		free(m);
		/* The dependency's token, for this one call, in the environment. */
		buf_reset(&cmd);
		buf_puts(&cmd, "CI_JOB_TOKEN=");
		script_quote(&cmd, d->token);
		buf_putc(&cmd, ' ');
		script_quote(&cmd, j->runner_command);
		buf_puts(&cmd, " artifacts-downloader");
		arg(&cmd, "--url", j->server_url);
		buf_printf(&cmd, " --id %lld", (long long)d->id);
		with_attempts(b, cmd.ptr, j->artifact_download_attempts,
		    "Downloading artifacts failed, retrying...");
	}
	buf_release(&cmd);
	guard_end(b, j, "Artifacts downloading");
	return (1);
}

/* gitlab-runner's CacheWhen.ShouldCache / ArtifactWhen.OnSuccess|OnFailure. */
static int
when_matches(const char *when, int on_failure)
{
	if (empty(when) || strcmp(when, "on_success") == 0)
		return (!on_failure);
	if (strcmp(when, "on_failure") == 0)
		return (on_failure);
	return (strcmp(when, "always") == 0);
}

int
script_archive_cache(struct buf *b, const struct script_job *j)
{
	const struct script_cache *c;
	int any = 0;
	size_t i, k;

	script_prologue(b, j);
	for (i = 0; i < j->n_caches; i++) {
		c = &j->caches[i];
		if (!when_matches(c->when, j->on_failure) || !cache_has_files(c))
			continue;
		any = 1;
		cache_warnings(b, c);
		if (c->n_keys == 0) {
			script_say(b, FMT_NOTICE, "Skipping cache archiving due to empty cache key");
			continue;
		}
		if (!c->push) {
			say_printf(b, FMT_NOTICE, "Not uploading cache %s due to policy",
			    c->keys[0].key);
			continue;
		}
		if (!guard_begin(b, j, "Creating cache"))
			continue;
		say_printf(b, FMT_NOTICE, "Creating cache %s...", c->keys[0].key);
		buf_puts(b, "if ");
		script_quote(b, j->runner_command);
		buf_puts(b, " cache-archiver");
		arg(b, "--file", c->keys[0].file);
		buf_printf(b, " --timeout %lld", (long long)j->cache_request_timeout);
		for (k = 0; k < c->paths.n; k++)
			arg(b, "--path", c->paths.v[k]);
		if (c->untracked)
			buf_puts(b, " --untracked");
		buf_puts(b, "; then\n");
		script_say(b, FMT_NOTICE, "Created cache");
		buf_puts(b, "else\n");
		script_say(b, FMT_WARNING, "Failed to create cache");
		buf_puts(b, "fi\n");
		guard_end(b, j, "Creating cache");
	}
	return (any);
}

static void
upload_one(struct buf *b, const struct script_job *j, const struct script_artifact *a)
{
	size_t k;

	if (!guard_begin(b, j, "Uploading artifacts"))
		return;
	script_say(b, FMT_NOTICE, "Uploading artifacts...");
	script_quote(b, j->runner_command);
	buf_puts(b, " artifacts-uploader");
	arg(b, "--url", j->server_url);
	buf_printf(b, " --id %lld", (long long)j->job_id);
	buf_puts(b, " --timeout " UPLOAD_TIMEOUT
	    " --response-header-timeout " RESPONSE_HEADER_TIMEOUT);
	for (k = 0; k < a->paths.n; k++)
		arg(b, "--path", a->paths.v[k]);
	for (k = 0; k < a->exclude.n; k++)
		arg(b, "--exclude", a->exclude.v[k]);
	if (a->untracked)
		buf_puts(b, " --untracked");
	if (!empty(a->name))
		arg(b, "--name", a->name);
	if (!empty(a->expire_in))
		arg(b, "--expire-in", a->expire_in);
	if (!empty(a->format))
		arg(b, "--artifact-format", a->format);
	if (!empty(a->type))
		arg(b, "--artifact-type", a->type);
	buf_putc(b, '\n');
	guard_end(b, j, "Uploading artifacts");
}

int
script_upload_artifacts(struct buf *b, const struct script_job *j)
{
	const struct script_artifact *a;
	int any = 0;
	size_t i;

	if (empty(j->server_url))
		return (0);
	script_prologue(b, j);
	for (i = 0; i < j->n_artifacts; i++) {
		a = &j->artifacts[i];
		if (!when_matches(a->when, j->on_failure))
			continue;
		if (a->paths.n == 0 && a->exclude.n == 0 && !a->untracked)
			continue;
		any = 1;
		upload_one(b, j, a);
	}
	return (any);
}
