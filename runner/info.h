/*
 * What this runner tells GitLab about itself (the "info" object of
 * register, verify, job requests and updates): product, version,
 * platform, executor, shell, features and labels.
 */
#ifndef RUNNER_INFO_H
#define RUNNER_INFO_H

#include "api/api.h"
#include "runner/config.h"

struct runner_info {
	struct api_info		 info;
	struct api_label	*labels;	/* owned, with their strings */
	char			*executor;	/* owned */
	char			*shell;		/* owned */
};

/*
 * Fill in the info for one entry (rc may be NULL for register).  Every
 * string is copied: a running job keeps its info across a config reload.
 * jobs: advertise what running jobs needs (the daemon), or nothing (the
 * commands that only register or verify).
 */
void	runner_info_init(struct runner_info *ri, const struct config *cfg,
	    const struct runner_config *rc, bool jobs);
void	runner_info_release(struct runner_info *ri);

#endif
