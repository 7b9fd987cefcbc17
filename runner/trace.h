/*
 * Sending a job's log to GitLab and, at the end, its final report
 * (protocol.md 5.3, 5.4, 6).
 *
 * While the job runs: every update interval (3 s, or what GitLab asks with
 * X-GitLab-Trace-Update-Interval) the bytes not yet acknowledged go out in
 * PATCHes of at most 1 MiB; nothing is sent when nothing is new; after 30 s
 * without a PATCH a keep-alive PUT state=running says the job is alive.
 * GitLab's answers may cancel the job (Job-Status: canceling) or abort it
 * (403, canceled, failed): the trace reports those to the job.
 *
 * At the end, trace_finish() sends what is left of the log, then the final
 * PUT, until GitLab says 200 (or that the job is gone): 202 waits the
 * interval GitLab gives and asks again, 412 sends the whole log again from
 * 0, and failures are retried with backoff (1 s doubling, at most an hour
 * apart) up to job_status_final_update_retry_limit times.  Only then, and
 * loudly, does it give up.
 */
#ifndef RUNNER_TRACE_H
#define RUNNER_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "api/api.h"

struct trace;
struct trace_log;

/* What the trace tells the job; each at most once. */
struct trace_events {
	void	(*cancel_requested)(void *arg);	/* Job-Status: canceling */
	void	(*aborted)(void *arg);		/* 403, or Job-Status canceled/failed */
};

struct trace_params {
	uv_loop_t		*loop;
	struct api		*api;
	const struct api_creds	*creds;		/* borrowed: outlives the trace */
	int64_t			 job_id;
	const char		*job_token;	/* copied */
	const struct api_info	*info;		/* borrowed */
	struct trace_log	*log;		/* borrowed: the job owns it */
	bool			 debug_trace;
	uint64_t		 sent;		/* bytes GitLab already has (recovery) */
	int64_t			 retry_limit;	/* final report attempts */
	/* Intervals, normally 3 s, 30 s and 1 s; tests shorten them. */
	uint64_t		 interval_ms;
	uint64_t		 keepalive_ms;
	uint64_t		 final_backoff_ms;
	struct trace_events	 events;
	void			*arg;
};

enum trace_final {
	TRACE_FINAL_ACCEPTED,	/* 200, or GitLab said the job is over: done */
	TRACE_FINAL_GAVE_UP,	/* retry_limit attempts failed */
	TRACE_FINAL_CANCELED,	/* the trace was closed first */
};

typedef void	trace_final_cb(enum trace_final result, const char *last_answer, void *arg);

struct trace	*trace_new(const struct trace_params *p);
/* Start sending periodically. */
void		 trace_start(struct trace *t);
/*
 * The log is complete: send the rest, then the final report u (copied),
 * then call cb once.  u->checksum and u->bytesize are taken from the log.
 */
void		 trace_finish(struct trace *t, const struct api_job_update *u,
		    trace_final_cb *cb, void *arg);
/* Stop everything (cb of trace_finish gets TRACE_FINAL_CANCELED); frees later. */
void		 trace_close(struct trace *t);

#endif
