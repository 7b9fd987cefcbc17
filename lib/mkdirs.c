#include <sys/stat.h>

#include <errno.h>
#include <stdlib.h>

#include "lib/mkdirs.h"
#include "lib/xmalloc.h"

int
mkdirs(const char *path, mode_t mode, bool *created)
{
	char *copy = xstrdup(path), *p;
	int rc = 0, err = 0;

	if (created != NULL)
		*created = false;
	for (p = copy + 1; ; p++) {
		char saved = *p;

		if (saved != '/' && saved != '\0')
			continue;
		*p = '\0';
		if (mkdir(copy, mode) == 0) {
			if (saved == '\0' && created != NULL)
				*created = true;
		} else if (errno != EEXIST) {
			err = errno;
			rc = -1;
			break;
		}
		*p = saved;
		if (saved == '\0')
			break;
	}
	free(copy);
	if (rc == -1)
		errno = err;
	return rc;
}
