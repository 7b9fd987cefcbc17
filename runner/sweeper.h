/*
 * What container jobs left behind, removed by the daemon (executor.h's
 * sweep): once at start, with every object the journal recorded for the
 * jobs of a run that crashed, and then every interval beside the jobs
 * running now.  Each sweep spares what is newer than itself, so it never
 * takes what a job starting meanwhile made.
 */
#ifndef RUNNER_SWEEPER_H
#define RUNNER_SWEEPER_H

#include "runner/daemon.h"

struct sweeper;

/* Starts the first sweep now; interval_ms 0: the default (10 minutes). */
struct sweeper	*sweeper_new(struct daemon *d, uint64_t interval_ms);
/* Cancel what runs and free it once the loop has closed its timer. */
void		 sweeper_close(struct sweeper *w);

#endif
