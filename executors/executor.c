/*
 * The executors this build has.  An explicit table rather than
 * self-registration at start-up, so there is no init order to get wrong
 * (gitlab-runner's executors/init.go); adding an executor is one line here.
 */
#include <stddef.h>
#include <string.h>

#include "executors/executor.h"

/* Defined in the executor's own file (shell.c, docker/docker.c). */
extern const struct executor_ops	shell_executor;
extern const struct executor_ops	docker_executor;

static const struct executor_ops *const executors[] = {
	&shell_executor,
	&docker_executor,
};

const struct executor_ops *
executor_find(const char *name)
{
	size_t	i;

	if (name == NULL)
		return NULL;
	for (i = 0; i < sizeof executors / sizeof executors[0]; i++) {
		if (strcmp(executors[i]->name, name) == 0)
			return executors[i];
	}
	return NULL;
}
