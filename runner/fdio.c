#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner/fdio.h"

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
