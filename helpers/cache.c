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
#include <getopt.h>
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
#include "lib/strv.h"
#include "lib/xmalloc.h"

static const char archiver_usage[] =
    "runner cache-archiver --file PATH [--path GLOB]... [--untracked] [--timeout MINUTES]";
static const char extractor_usage[] =
    "runner cache-extractor --file PATH [--timeout MINUTES]";

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
		helper_size((unsigned long long)sb.st_size, size, sizeof(size));
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

static int
remote_unsupported(const char *cmd)
{
	log_warnx("%s: a remote cache (--url, --gocloud-url) is not supported by this "
	    "runner; the cache stays local", cmd);
	return 0;
}

int
cmd_cache_archiver(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "file", required_argument, NULL, 'f' },
		{ "path", required_argument, NULL, 'p' },
		{ "untracked", no_argument, NULL, 'U' },
		{ "timeout", required_argument, NULL, 'o' },
		{ "url", required_argument, NULL, 'u' },
		{ "gocloud-url", required_argument, NULL, 'g' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct strv paths = { 0 }, files = { 0 };
	const char *file = NULL;
	bool untracked = false;
	int c, rc = 1;

	optind = 1;
	opterr = 0;
	while ((c = cmd_getopt(argc, argv, "", longopts, "cache-archiver",
	    archiver_usage)) != -1) {
		switch (c) {
		case 'f': file = optarg; break;
		case 'p': strv_push(&paths, optarg); break;
		case 'U': untracked = true; break;
		case 'o': break;	/* minutes for a remote cache; none here */
		case 'u':
		case 'g': remote_unsupported("cache-archiver"); break;
		case 'h':
			printf("usage: %s\n", archiver_usage);
			rc = 0;
			goto out;
		default:
			rc = 2;
			goto out;
		}
	}
	if ((rc = cmd_no_arguments(argc, argv, "cache-archiver", archiver_usage)) != 0)
		goto out;
	if (file == NULL || *file == '\0') {
		rc = cmd_usage_error(archiver_usage, "Missing --file");
		goto out;
	}
	rc = 1;
	if (helper_select(paths.v, NULL, untracked, &files) == -1)
		goto out;
	if (files.n == 0) {
		log_warnx("No files to cache.");
		rc = 0;
		goto out;
	}
	if (cache_up_to_date(file, files.v)) {
		log_info("Archive is up to date!");
		rc = 0;
		goto out;
	}
	rc = write_cache(file, files.v) == 0 ? 0 : 1;
out:
	strv_release(&paths);
	strv_release(&files);
	return rc;
}

int
cmd_cache_extractor(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "file", required_argument, NULL, 'f' },
		{ "timeout", required_argument, NULL, 'o' },
		{ "url", required_argument, NULL, 'u' },
		{ "gocloud-url", required_argument, NULL, 'g' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *file = NULL;
	int c, rc;

	optind = 1;
	opterr = 0;
	while ((c = cmd_getopt(argc, argv, "", longopts, "cache-extractor",
	    extractor_usage)) != -1) {
		switch (c) {
		case 'f': file = optarg; break;
		case 'o': break;
		case 'u':
		case 'g': remote_unsupported("cache-extractor"); break;
		case 'h':
			printf("usage: %s\n", extractor_usage);
			return 0;
		default:
			return 2;
		}
	}
	if ((rc = cmd_no_arguments(argc, argv, "cache-extractor", extractor_usage)) != 0)
		return rc;
	if (file == NULL || *file == '\0')
		return cmd_usage_error(extractor_usage, "Missing --file");
	log_info("No URL provided, cache will not be downloaded from shared cache server. "
	    "Instead a local version of cache will be extracted.");
	if (access(file, F_OK) == -1) {
		log_warnx("Cache file does not exist");
		return 1;
	}
	return helper_extract(file) == 0 ? 0 : 1;
}
