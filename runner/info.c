/*
 * The runner info object.  Features are advertised only once they work:
 * GitLab changes what it sends and how it ends jobs on them (protocol.md
 * 4.7), so a feature claimed early is a job broken later.  Nothing that
 * runs jobs exists in this build yet, so none is claimed.
 */
#include <stdlib.h>
#include <string.h>

#include "runner/info.h"
#include "runner/version.h"
#include "runner/xmalloc.h"

void
runner_info_init(struct runner_info *ri, const struct config *cfg,
    const struct runner_config *rc)
{
	size_t i, j, n = 0;

	memset(ri, 0, sizeof(*ri));
	ri->info.name = "runner";
	ri->info.version = version_number();
	ri->info.revision = version_revision();
	ri->info.platform = version_os();
	ri->info.architecture = version_arch();
	if (rc != NULL) {
		ri->info.executor = rc->executor;
		ri->info.shell = rc->shell;
	}

	/* Global labels, then the entry's, which win on a shared name. */
	ri->labels = xcalloc(cfg->n_labels + (rc ? rc->n_labels : 0) + 1,
	    sizeof(*ri->labels));
	for (i = 0; i < cfg->n_labels; i++)
		ri->labels[n++] = (struct api_label){ cfg->labels[i].name, cfg->labels[i].value };
	for (i = 0; rc != NULL && i < rc->n_labels; i++) {
		for (j = 0; j < n; j++)
			if (strcmp(ri->labels[j].name, rc->labels[i].name) == 0)
				break;
		ri->labels[j] = (struct api_label){ rc->labels[i].name, rc->labels[i].value };
		if (j == n)
			n++;
	}
	ri->info.labels = ri->labels;
	ri->info.n_labels = n;
}

void
runner_info_release(struct runner_info *ri)
{
	free(ri->labels);
	memset(ri, 0, sizeof(*ri));
}
