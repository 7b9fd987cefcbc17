/*
 * The runner info object.  Features are advertised only when they work:
 * GitLab changes what it sends and how it ends jobs on them (protocol.md
 * 4.7), so a feature claimed early is a job broken later.  The commands
 * that only talk about the runner claim none; the daemon claims what its
 * job handling does.
 */
#include <stdlib.h>
#include <string.h>

#include "lib/version.h"
#include "lib/xmalloc.h"
#include "runner/info.h"

/* What `run` does with a job today (see job.c and trace.c). */
static void
job_features(struct api_features *f)
{
	f->variables = true;		/* job variables reach the script */
	f->shared = true;		/* the shell executor shares this host */
	f->trace_reset = true;		/* 412: the log is sent again from 0 */
	f->trace_checksum = true;	/* output.checksum on every update */
	f->trace_size = true;		/* output.bytesize on every update */
	f->cancelable = true;		/* Job-Status canceled/failed aborts */
	f->cancel_gracefully = true;	/* canceling runs after_script */
	f->return_exit_code = true;	/* exit_code on failed */
	f->two_phase_job_commit = true;	/* PUT state=running after pickup */
	f->masking = true;		/* masked variables are masked */
	f->multi_build_steps = true;	/* every payload step runs */
	f->artifacts = true;		/* upload_artifacts and dependencies (helpers/artifacts.c) */
	f->upload_multiple_artifacts = true; /* one upload per artifacts entry */
	f->upload_raw_artifacts = true;	/* reports in gzip and raw */
	f->artifacts_exclude = true;	/* --exclude */
	f->cache = true;		/* local caches (helpers/cache.c) */
	f->fallback_cache_keys = true;	/* fallback_keys, CACHE_FALLBACK_KEY */
}

void
runner_info_init(struct runner_info *ri, const struct config *cfg,
    const struct runner_config *rc, bool jobs)
{
	size_t i, j, n = 0;

	memset(ri, 0, sizeof(*ri));
	ri->info.name = "runner";
	ri->info.version = version_number();
	ri->info.revision = version_revision();
	ri->info.platform = version_os();
	ri->info.architecture = version_arch();
	if (rc != NULL) {
		ri->executor = xstrdup(rc->executor);
		ri->shell = xstrdup(rc->shell);
		ri->info.executor = ri->executor;
		ri->info.shell = ri->shell;
	}
	if (jobs)
		job_features(&ri->info.features);

	/* Global labels, then the entry's, which win on a shared name. */
	ri->labels = xcalloc(cfg->n_labels + (rc ? rc->n_labels : 0) + 1,
	    sizeof(*ri->labels));
	for (i = 0; i < cfg->n_labels; i++)
		ri->labels[n++] = (struct api_label){ xstrdup(cfg->labels[i].name),
		    xstrdup(cfg->labels[i].value) };
	for (i = 0; rc != NULL && i < rc->n_labels; i++) {
		for (j = 0; j < n; j++)
			if (strcmp(ri->labels[j].name, rc->labels[i].name) == 0)
				break;
		if (j < n)
			free((char *)ri->labels[j].value);
		else
			ri->labels[n++].name = xstrdup(rc->labels[i].name);
		ri->labels[j].value = xstrdup(rc->labels[i].value);
	}
	ri->info.labels = ri->labels;
	ri->info.n_labels = n;
}

void
runner_info_release(struct runner_info *ri)
{
	size_t i;

	for (i = 0; i < ri->info.n_labels; i++) {
		free((char *)ri->labels[i].name);
		free((char *)ri->labels[i].value);
	}
	free(ri->labels);
	free(ri->executor);
	free(ri->shell);
	memset(ri, 0, sizeof(*ri));
}
