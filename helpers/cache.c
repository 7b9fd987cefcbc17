/*
 * `runner cache-archiver` and `runner cache-extractor`: the helpers the
 * archive_cache and restore_cache stages call, in the project directory
 * (protocol.md 7.5).  The cache is local: <cache dir>/<project>/<key>/
 * cache.zip, the path given by --file.
 *
 * A cache is written to a temp file beside it, synced, then renamed over
 * the old one, so a crash or a full disk never leaves a half archive that
 * the next job would extract.  Failures exit 1; the job script turns that
 * into "Failed to create cache" or "Failed to extract cache", warnings as
 * in gitlab-runner, never a failed job.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers/archive.h"
#include "helpers/helpers.h"
#include "lib/cli.h"
#include "lib/fdio.h"
#include "lib/log.h"
#include "lib/mkdirs.h"
#include "lib/size.h"
#include "lib/strv.h"
#include "lib/xmalloc.h"


/* The archive into tmp, then renamed over file: all or nothing. */
static int
write_cache(const char *file, char *const *files)
{
	struct archive_stats st = { 0 };
	char cwd[4096], err[512], size[32], *dir, *copy, *tmp;
	struct stat sb;
	int fd, rc = -1;

	if (getcwd(cwd, sizeof(cwd)) == NULL) {
		log_error("cannot tell the working directory: %s", strerror(errno));
		return -1;
	}
	copy = xstrdup(file);
	dir = dirname(copy);
	if (mkdirs(dir, 0755, NULL) == -1) {
		log_error("cannot create the cache directory %s: %s", dir, strerror(errno));
		free(copy);
		return -1;
	}
	tmp = xasprintf("%s/.cache.zip.XXXXXX", dir);
	free(copy);
	if ((fd = mkstemp(tmp)) == -1) {
		log_error("cannot create a temporary file in the cache directory: %s",
		    strerror(errno));
		free(tmp);
		return -1;
	}
	if (archive_write(fd, ARCHIVE_ZIP, cwd, files, &st, err, sizeof(err)) == -1)
		log_error("%s", err);
	else if (fsync(fd) == -1 || fstat(fd, &sb) == -1)
		log_error("cannot write %s: %s", tmp, strerror(errno));
	else if (close(fd) == -1 || (fd = -1, rename(tmp, file) == -1))
		log_error("cannot put the cache in place at %s: %s", file, strerror(errno));
	else {
		(void)fd_sync_parent(file);
		size_format((unsigned long long)sb.st_size, size, sizeof(size));
		log_info("%s: %" PRIu64 " files and directories, %s", file, st.entries, size);
		rc = 0;
	}
	if (fd != -1)
		close(fd);
	if (rc == -1)
		unlink(tmp);
	free(tmp);
	return rc;
}

/*
 * gitlab-runner's isFileChanged: an existing cache at least as new as
 * every file it would take is kept as it is, so a job that restored a
 * cache and changed nothing does not rewrite it.
 */
static bool
cache_up_to_date(const char *file, char *const *files)
{
	struct stat ab, sb;
	size_t i;

	if (stat(file, &ab) == -1)
		return false;
	for (i = 0; files[i] != NULL; i++) {
		if (lstat(files[i], &sb) == -1)
			return false;
		if (sb.st_mtim.tv_sec > ab.st_mtim.tv_sec ||
		    (sb.st_mtim.tv_sec == ab.st_mtim.tv_sec &&
		    sb.st_mtim.tv_nsec > ab.st_mtim.tv_nsec))
			return false;
	}
	return true;
}

struct cache_opts {
	const char	*file;
	struct strv	 paths;
	bool		 untracked;
	const char	*url;		/* remote caches: warned about */
	const char	*gocloud_url;
};

#define CO(f)	offsetof(struct cache_opts, f)
#define OPT_FILE	CLI_OPT("file", 0, CLI_STRING, NULL, CO(file), "PATH", \
	"the cache archive")
/* Minutes for a remote cache; none here. */
#define OPT_TIMEOUT	CLI_OPT("timeout", 0, CLI_IGNORED_VALUE, NULL, 0, "MINUTES", \
	"accepted; for a remote cache, which this runner has not")
#define OPT_REMOTE	CLI_OPT("url", 0, CLI_STRING, NULL, CO(url), "URL", \
	"a remote cache: not supported, warned about"), \
	CLI_OPT("gocloud-url", 0, CLI_STRING, NULL, CO(gocloud_url), "URL", \
	"a remote cache: not supported, warned about")

static const struct cli_option archiver_options[] = {
	OPT_FILE,
	CLI_OPT("path", 0, CLI_STRINGS, NULL, CO(paths), "GLOB", "files to take (repeat)"),
	CLI_OPT("untracked", 0, CLI_BOOL, NULL, CO(untracked), NULL,
	    "take the files git does not track too"),
	OPT_TIMEOUT,
	OPT_REMOTE,
	CLI_END,
};

static const struct cli_option extractor_options[] = {
	OPT_FILE,
	OPT_TIMEOUT,
	OPT_REMOTE,
	CLI_END,
};

/* The checks both make: -1 after a usage error. */
static int
cache_flags(const struct cli_command *cmd, const struct cache_opts *o)
{
	if (o->url != NULL || o->gocloud_url != NULL)
		log_warnx("%s: a remote cache (--url, --gocloud-url) is not supported by this "
		    "runner; the cache stays local", cmd->name);
	if (o->file == NULL || *o->file == '\0') {
		cli_usage_error(cmd, "Missing --file");
		return -1;
	}
	return 0;
}

static int
archiver_run(const struct cli_command *cmd, void *opts)
{
	const struct cache_opts *o = opts;
	struct strv files = { 0 };
	int rc = 1;

	if (cache_flags(cmd, o) != 0)
		return 2;
	if (helper_select(o->paths.v, NULL, o->untracked, &files) == -1)
		goto out;
	if (files.n == 0) {
		log_warnx("No files to cache.");
		rc = 0;
		goto out;
	}
	if (cache_up_to_date(o->file, files.v)) {
		log_info("Archive is up to date!");
		rc = 0;
		goto out;
	}
	rc = write_cache(o->file, files.v) == 0 ? 0 : 1;
out:
	strv_release(&files);
	return rc;
}

static int
extractor_run(const struct cli_command *cmd, void *opts)
{
	const struct cache_opts *o = opts;

	if (cache_flags(cmd, o) != 0)
		return 2;
	log_info("No URL provided, cache will not be downloaded from shared cache server. "
	    "Instead a local version of cache will be extracted.");
	if (access(o->file, F_OK) == -1) {
		log_warnx("Cache file does not exist");
		return 1;
	}
	return helper_extract(o->file) == 0 ? 0 : 1;
}

const struct cli_command cmd_cache_archiver_entry = {
	.name = "cache-archiver",
	.summary = "Archive files into the local cache (called by the job script)",
	.usage = "runner cache-archiver --file PATH [--path GLOB]... [--untracked] "
	    "[--timeout MINUTES]",
	.options = archiver_options,
	.opts_size = sizeof(struct cache_opts),
	.run = archiver_run,
};

const struct cli_command cmd_cache_extractor_entry = {
	.name = "cache-extractor",
	.summary = "Extract a cache archive (called by the job script)",
	.usage = "runner cache-extractor --file PATH [--timeout MINUTES]",
	.options = extractor_options,
	.opts_size = sizeof(struct cache_opts),
	.run = extractor_run,
};
