/*
 * This binary, made runnable inside a helper container whatever libc the
 * image has: a tar of the running executable, every shared object it has
 * loaded (read from /proc/self/maps, the loader included) and a small sh
 * wrapper, laid out for /opt/runner:
 *
 *   bin/runner     exec /opt/runner/lib/<loader> --library-path /opt/runner/lib /opt/runner/runner "$@"
 *   runner         the ELF binary
 *   lib/...        its shared objects and the loader
 *
 * The executor copies it once per binary into a labelled, read-only
 * volume named after its content (bundle_volume_name), so helper
 * containers of any image run `/opt/runner/bin/runner cache-archiver ...`.
 */
#ifndef EXECUTORS_DOCKER_BUNDLE_H
#define EXECUTORS_DOCKER_BUNDLE_H

#include <stdint.h>
#include <sys/types.h>

#define BUNDLE_MOUNT	"/opt/runner"
#define BUNDLE_COMMAND	BUNDLE_MOUNT "/bin/runner"

struct bundle {
	char	*path;		/* the tar file */
	off_t	 size;
	char	*id;		/* 16 hex digits of the tar's sha256 */
};

/*
 * Make the bundle of the running process in dir (created if need be) as
 * dir/runner-bundle-<id>.tar, reusing one that is there; written to a
 * temporary file and renamed, so a half-written tar is never used.
 * -1 with *cause on failure.
 */
int	bundle_make(const char *dir, struct bundle *b, char **cause);
/* "runner-helper-<version>-<id>": the volume holding it. */
char	*bundle_volume_name(const struct bundle *b);
void	bundle_release(struct bundle *b);

#endif
