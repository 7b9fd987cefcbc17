#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/fdio.h"

int
fd_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	ssize_t w;

	while (n > 0) {
		if ((w = write(fd, c, n)) == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

int
fd_sync_parent(const char *path)
{
	char *copy = strdup(path);
	int fd, rc = -1, saved;

	if (copy == NULL)
		return -1;
	if ((fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) != -1) {
		rc = fsync(fd);
		saved = errno;
		close(fd);
		errno = saved;
	}
	free(copy);
	return rc;
}

int
fd_replace_file(const char *path, const void *p, size_t n, mode_t mode)
{
	size_t len = strlen(path);
	char *tmp = malloc(len + sizeof(".XXXXXX"));
	int fd, saved;

	if (tmp == NULL)
		return -1;
	memcpy(tmp, path, len);
	memcpy(tmp + len, ".XXXXXX", sizeof(".XXXXXX"));
	if ((fd = mkstemp(tmp)) == -1)
		goto fail;
	if (fchmod(fd, mode) == -1 || fd_write_all(fd, p, n) == -1 || fsync(fd) == -1) {
		saved = errno;
		close(fd);
		errno = saved;
		goto fail_unlink;
	}
	if (close(fd) == -1 || rename(tmp, path) == -1)
		goto fail_unlink;
	free(tmp);
	/* The rename must survive a crash as the file's own fsync does. */
	(void)fd_sync_parent(path);
	return 0;
fail_unlink:
	saved = errno;
	unlink(tmp);
	errno = saved;
fail:
	saved = errno;
	free(tmp);
	errno = saved;
	return -1;
}
