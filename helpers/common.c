/*
 * What the helper commands (artifacts-uploader, artifacts-downloader,
 * cache-archiver, cache-extractor) share: choosing files, sizes for the
 * job log, and bounded extraction into the project.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers/archive.h"
#include "helpers/file_select.h"
#include "helpers/helpers.h"
#include "lib/cli.h"
#include "lib/log.h"
#include "lib/size.h"
#include "lib/strv.h"

/*
 * A hostile archive must not fill the disk: these bound what one
 * extraction writes.  Jobs that need more raise them with the variables
 * of the same names.
 */
#define EXTRACT_MAX_BYTES	(64ULL << 30)
#define EXTRACT_MAX_ENTRIES	(4ULL << 20)

static void
on_warning(const char *line, void *data)
{
	(void)data;
	log_warnx("%s", line);
}

int
helper_select(char *const *paths, char *const *excludes, bool untracked,
    struct strv *out)
{
	struct file_select fs = { 0 };
	char cwd[4096], err[512];

	if (getcwd(cwd, sizeof(cwd)) == NULL) {
		log_error("cannot tell the working directory: %s", strerror(errno));
		return -1;
	}
	fs.project_dir = cwd;
	fs.paths = paths;
	fs.excludes = excludes;
	fs.untracked = untracked;
	if (file_select(&fs, out, on_warning, NULL, err, sizeof(err)) == -1) {
		log_error("%s", err);
		return -1;
	}
	return 0;
}

static uint64_t
env_limit(const char *name, uint64_t def)
{
	const char *v = getenv(name);
	char *end;
	unsigned long long n;

	if (v == NULL || *v == '\0')
		return def;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno != 0 || *end != '\0' || n == 0) {
		log_warnx("%s=%s is not a positive number; using %" PRIu64, name, v, def);
		return def;
	}
	return n;
}

int
helper_extract(const char *path)
{
	struct archive_limits lim;
	struct archive_stats st = { 0 };
	char cwd[4096], err[512], size[32];

	if (getcwd(cwd, sizeof(cwd)) == NULL) {
		log_error("cannot tell the working directory: %s", strerror(errno));
		return -1;
	}
	lim.max_bytes = env_limit("ARTIFACT_EXTRACT_MAX_BYTES", EXTRACT_MAX_BYTES);
	lim.max_entries = env_limit("ARTIFACT_EXTRACT_MAX_ENTRIES", EXTRACT_MAX_ENTRIES);
	if (archive_extract_zip(path, cwd, &lim, &st, err, sizeof(err)) == -1) {
		log_error("%s", err);
		return -1;
	}
	size_format(st.bytes, size, sizeof(size));
	log_info("Extracted %" PRIu64 " files and directories (%s)", st.entries, size);
	return 0;
}
