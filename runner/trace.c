/*
 * The log sender: one state machine per job, one request in flight at a
 * time, one timer.  See trace.h for what it does; here is how.
 *
 * Ticks come from the timer.  While the job runs a tick sends the next
 * PATCH, or a keep-alive PUT, or nothing.  Once the job is finished the
 * trace goes round: PATCH until GitLab has every byte, then the final PUT,
 * and again after each 202 or 412, until an answer ends it.
 *
 * A PATCH sends only bytes already on disk (trace_log.h says why).  The
 * fdatasync that puts them there runs on libuv's thread pool, on a dup of
 * the log's descriptor, so the loop never waits for the disk and the job
 * may close its log meanwhile.  One sync covers everything written so far:
 * a backlog goes out in many PATCHes after one sync, not one sync each.
 * A log sealed by a failed write (trace_log.h) ends in memory: those last
 * bytes, the disk notice among them, go out from there after the file's.
 * So every byte the log counts can be sent, and the final report, which
 * goes once GitLab has acknowledged them all, describes exactly its copy.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/metrics.h"
#include "lib/xmalloc.h"
#include "runner/trace.h"
#include "runner/trace_log.h"

#define PATCH_MAX		(1024 * 1024)
#define INTERVAL_CAP_MS		(15ULL * 60 * 1000)
#define CATCH_UP_PAUSE_MS	334	/* a backlog goes at most 3 PATCHes a second */
#define FINAL_BACKOFF_CAP_MS	(60ULL * 60 * 1000)

/* Where the sender is. */
enum sender_state {
	SENDER_IDLE,		/* waiting for the timer */
	SENDER_SYNCING,		/* the log's fdatasync in flight, then a PATCH */
	SENDER_PATCHING,	/* a PATCH in flight */
	SENDER_TOUCHING,	/* a keep-alive PUT in flight */
	SENDER_FINAL_PUT,	/* the final PUT in flight */
	SENDER_DONE,		/* the final report was answered, or given up */
	SENDER_CLOSING,		/* trace_close(): waiting for the timer to close */
};

static const char *const sender_state_names[] = {
	[SENDER_IDLE] = "idle",
	[SENDER_SYNCING] = "syncing",
	[SENDER_PATCHING] = "patching",
	[SENDER_TOUCHING] = "touching",
	[SENDER_FINAL_PUT] = "final put",
	[SENDER_DONE] = "done",
	[SENDER_CLOSING] = "closing",
};
_Static_assert(sizeof(sender_state_names) / sizeof(sender_state_names[0]) ==
    SENDER_CLOSING + 1, "a name for every sender state");

struct trace {
	enum sender_state	 state;
	uv_loop_t		*loop;
	struct api		*api;
	const struct api_creds	*creds;
	struct api_job_ref	 ref;
	char			*job_token;
	const struct api_info	*info;
	struct trace_log	*log;
	bool			 debug_trace;
	uint64_t		 sent;
	uint64_t		 synced;	/* bytes of the file known to be on disk */
	uint64_t		 syncing;	/* what the sync in flight will cover */
	uv_fs_t			 sync_req;
	int			 sync_fd;	/* our dup of the log's fd while syncing */
	bool			 timer_closed;	/* trace_close(): freed by the last of the two */
	uint64_t		 interval_ms;
	uint64_t		 default_interval_ms;
	uint64_t		 keepalive_ms;
	uint64_t		 last_send;	/* monotonic ms of the last PATCH or touch */
	uv_timer_t		 timer;
	struct api_call		*call;
	bool			 patches_stopped; /* 404 or abort: the log is not wanted */
	bool			 cancel_told;
	bool			 abort_told;
	struct trace_events	 events;
	void			*arg;

	/* The end. */
	bool			 finishing;
	struct api_job_update	 final;
	char			*final_state;
	char			*final_reason;
	int64_t			 retry_limit;
	int64_t			 attempts;
	uint64_t		 final_backoff_ms;
	char			*last_answer;
	trace_final_cb		*final_cb;
	void			*final_arg;
};

static void	tick(struct trace *);
static void	final_round(struct trace *);

static void
set_state(struct trace *t, enum sender_state to)
{
	log_kv(LOG_LEVEL_DEBUG, LOG_FIELDS(LOG_JOB(t->ref.id)),
	    "log sender %s -> %s",
	    sender_state_names[t->state], sender_state_names[to]);
	t->state = to;
}

static void
on_timer(uv_timer_t *timer)
{
	tick(timer->data);
}

static void
wait_ms(struct trace *t, uint64_t ms)
{
	set_state(t, SENDER_IDLE);
	uv_timer_start(&t->timer, on_timer, ms, 0);
}

static void
remember_answer(struct trace *t, const struct api_answer *a)
{
	free(t->last_answer);
	t->last_answer = xasprintf("%s (request id %s)", a->message != NULL ? a->message : "",
	    a->request_id != NULL ? a->request_id : "");
}

/* What every answer may carry: a new interval, a cancel, an abort. */
static void
learn(struct trace *t, const struct api_job_state *st)
{
	if (st->update_interval > 0) {
		uint64_t ms = (uint64_t)st->update_interval * 1000;

		t->interval_ms = ms < INTERVAL_CAP_MS ? ms : INTERVAL_CAP_MS;
	}
	if (st->cancel_requested && !t->cancel_told && !t->finishing) {
		t->cancel_told = true;
		if (t->events.cancel_requested != NULL)
			t->events.cancel_requested(t->arg);
	}
}

static void
tell_aborted(struct trace *t)
{
	t->patches_stopped = true;
	if (!t->abort_told) {
		t->abort_told = true;
		if (t->events.aborted != NULL)
			t->events.aborted(t->arg);
	}
}

static void
finish_with(struct trace *t, enum trace_final result)
{
	trace_final_cb *cb = t->final_cb;

	set_state(t, SENDER_DONE);
	uv_timer_stop(&t->timer);
	t->final_cb = NULL;
	if (cb != NULL)
		cb(result, t->last_answer != NULL ? t->last_answer : "", t->final_arg);
}

/* A round of the final report failed: try again later, or give up. */
static void
final_failed(struct trace *t)
{
	uint64_t delay;
	int64_t i;

	t->attempts++;
	if (t->attempts >= t->retry_limit) {
		finish_with(t, TRACE_FINAL_GAVE_UP);
		return;
	}
	delay = t->final_backoff_ms;
	for (i = 1; i < t->attempts && delay < FINAL_BACKOFF_CAP_MS; i++)
		delay *= 2;
	if (delay > FINAL_BACKOFF_CAP_MS)
		delay = FINAL_BACKOFF_CAP_MS;
	log_kv(LOG_LEVEL_WARN, LOG_FIELDS(LOG_JOB(t->ref.id)),
	    "final report not delivered (%s); attempt %" PRId64
	    " of %" PRId64 " in %" PRIu64 " ms", t->last_answer, t->attempts + 1,
	    t->retry_limit, delay);
	wait_ms(t, delay);
}

static void
on_patched(enum api_patch_result result, const struct api_answer *answer,
    const struct api_job_state *st, uint64_t offset, void *arg)
{
	struct trace *t = arg;
	uint64_t size;

	if (result == API_PATCH_CANCELED || t->state == SENDER_CLOSING)
		return;
	t->call = NULL;
	learn(t, st);
	size = trace_log_size(t->log);
	switch (result) {
	case API_PATCH_OK:
		if (offset > t->sent)
			metrics_counter_add("runner_trace_bytes_sent_total", "",
			    (double)(offset - t->sent));
		t->sent = offset;
		t->last_send = clock_mono_ms();
		break;
	case API_PATCH_RANGE_MISMATCH:
		/* GitLab says where its copy ends: go on from there. */
		log_kv(LOG_LEVEL_INFO, LOG_FIELDS(LOG_JOB(t->ref.id)),
		    "GitLab has %" PRIu64 " bytes of the log, not %" PRIu64
		    ": sending from there", offset, t->sent);
		t->sent = offset <= size ? offset : size;
		wait_ms(t, t->interval_ms);
		return;
	case API_PATCH_NOT_FOUND:
		t->patches_stopped = true;
		break;
	case API_PATCH_ABORT:
		tell_aborted(t);
		break;
	case API_PATCH_FAILED:
		remember_answer(t, answer);
		if (t->finishing) {
			final_failed(t);
			return;
		}
		wait_ms(t, t->interval_ms);
		return;
	case API_PATCH_CANCELED:
		return;
	}
	if (t->finishing) {
		final_round(t);
		return;
	}
	wait_ms(t, !t->patches_stopped && t->sent < size && size - t->sent >= PATCH_MAX ?
	    CATCH_UP_PAUSE_MS : t->interval_ms);
}

static void	send_patch(struct trace *);
static void	trace_free(struct trace *);

static void
on_synced(uv_fs_t *req)
{
	struct trace *t = req->data;
	ssize_t rc = req->result;

	uv_fs_req_cleanup(req);
	close(t->sync_fd);
	t->sync_fd = -1;
	if (t->state == SENDER_CLOSING) {
		if (t->timer_closed)
			trace_free(t);
		return;
	}
	if (rc < 0)
		log_kv(LOG_LEVEL_WARN, LOG_FIELDS(LOG_JOB(t->ref.id)),
		    "cannot put the log on disk: %s; a crash now would "
		    "lose what GitLab is about to receive", uv_strerror((int)rc));
	/* Sent all the same: GitLab having the log matters more. */
	t->synced = t->syncing;
	send_patch(t);
}

/*
 * Start putting the first in_file bytes of the log on disk.  Returns false
 * when that cannot go to the thread pool; then it was done here, blocking.
 */
static bool
sync_log(struct trace *t, int fd, uint64_t in_file)
{
	t->syncing = in_file;
	t->sync_fd = dup(fd);
	if (t->sync_fd != -1) {
		t->sync_req.data = t;
		if (uv_fs_fdatasync(t->loop, &t->sync_req, t->sync_fd, on_synced) == 0) {
			set_state(t, SENDER_SYNCING);
			return true;
		}
		close(t->sync_fd);
		t->sync_fd = -1;
	}
	if (fdatasync(fd) != 0)
		log_warn("job %" PRId64 ": cannot put the log on disk; a crash now would "
		    "lose what GitLab is about to receive", t->ref.id);
	t->synced = in_file;
	return false;
}

/* The log cannot be read at t->sent: try later, or report what GitLab has. */
static void
patch_unreadable(struct trace *t, const char *why)
{
	log_kv(LOG_LEVEL_WARN, LOG_FIELDS(LOG_JOB(t->ref.id)),
	    "cannot read the log at %" PRIu64 ": %s",
	    t->sent, why);
	if (t->finishing) {
		/* A log we cannot read cannot be sent. */
		t->patches_stopped = true;
		final_round(t);
	} else
		wait_ms(t, t->interval_ms);
}

/* The end of a sealed log, from memory: the request takes a copy. */
static void
send_memory_patch(struct trace *t, uint64_t size)
{
	size_t len = size - t->sent > PATCH_MAX ? PATCH_MAX : (size_t)(size - t->sent);
	char *bytes = xmalloc(len);

	if (trace_log_read(t->log, t->sent, bytes, len) != (ssize_t)len) {
		free(bytes);
		patch_unreadable(t, "the end kept in memory is short");
		return;
	}
	set_state(t, SENDER_PATCHING);
	t->call = api_patch_trace_bytes(t->api, &t->ref, t->sent, bytes, len, t->debug_trace,
	    on_patched, t);
	free(bytes);
}

static void
send_patch(struct trace *t)
{
	uint64_t in_file, len;
	int fd, rc;

	if ((rc = trace_log_flush(t->log)) != 0)
		log_kv(LOG_LEVEL_WARN, LOG_FIELDS(LOG_JOB(t->ref.id)),
		    "cannot write the log to %s: %s",
		    trace_log_path(t->log), strerror(-rc));
	/* Only what is in the file can be sent: the PATCH reads it from there. */
	fd = trace_log_file(t->log, &in_file);
	if (fd != -1 && t->sent >= t->synced && in_file > t->synced &&
	    sync_log(t, fd, in_file))
		return;
	if (in_file > t->synced)
		in_file = t->synced;
	if (t->sent >= in_file && trace_log_disk_error(t->log) != 0 &&
	    t->sent < trace_log_size(t->log)) {
		send_memory_patch(t, trace_log_size(t->log));
		return;
	}
	len = in_file > t->sent ? in_file - t->sent : 0;
	if (len > PATCH_MAX)
		len = PATCH_MAX;
	if (fd == -1 || len == 0) {
		patch_unreadable(t, fd == -1 ? "no log file" : "not written to the file");
		return;
	}
	set_state(t, SENDER_PATCHING);
	t->call = api_patch_trace(t->api, &t->ref, fd, t->sent, (size_t)len, t->debug_trace,
	    on_patched, t);
}

static void
on_touched(enum api_update_result result, const struct api_answer *answer,
    const struct api_job_state *st, void *arg)
{
	struct trace *t = arg;

	(void)answer;
	if (result == API_UPDATE_CANCELED || t->state == SENDER_CLOSING)
		return;
	t->call = NULL;
	learn(t, st);
	if (result == API_UPDATE_OK || result == API_UPDATE_ACCEPTED)
		t->last_send = clock_mono_ms();
	else if (result == API_UPDATE_ABORT)
		tell_aborted(t);
	if (t->finishing)
		final_round(t);
	else
		wait_ms(t, t->interval_ms);
}

/* Keep-alive: state=running with the log's checksum and size. */
static void
send_touch(struct trace *t)
{
	struct api_job_update u = {
		.state = "running",
		.has_output = true,
		.checksum = trace_log_crc32(t->log),
		.bytesize = trace_log_size(t->log),
	};

	set_state(t, SENDER_TOUCHING);
	t->call = api_update_job(t->api, &t->ref, t->info, &u, on_touched, t);
}

static void
tick(struct trace *t)
{
	uint64_t size = trace_log_size(t->log);

	if (t->state != SENDER_IDLE)
		return;
	if (t->finishing) {
		final_round(t);
		return;
	}
	if (!t->patches_stopped && t->sent < size)
		send_patch(t);
	else if (clock_mono_ms() - t->last_send >= t->keepalive_ms)
		send_touch(t);
	else
		wait_ms(t, t->interval_ms);
}

static void
on_final_answer(enum api_update_result result, const struct api_answer *answer,
    const struct api_job_state *st, void *arg)
{
	struct trace *t = arg;
	uint64_t wait;

	if (result == API_UPDATE_CANCELED || t->state == SENDER_CLOSING)
		return;
	t->call = NULL;
	remember_answer(t, answer);
	wait = st->update_interval > 0 ? (uint64_t)st->update_interval * 1000 : t->interval_ms;
	if (wait > INTERVAL_CAP_MS)
		wait = INTERVAL_CAP_MS;
	switch (result) {
	case API_UPDATE_OK:
	case API_UPDATE_ABORT:
		finish_with(t, TRACE_FINAL_ACCEPTED);
		return;
	case API_UPDATE_ACCEPTED:
		/* GitLab is still storing the log: ask again when it says. */
		log_kv(LOG_LEVEL_INFO, LOG_FIELDS(LOG_JOB(t->ref.id)),
		    "final report accepted, not yet completed; asking "
		    "again in %" PRIu64 " ms", wait);
		wait_ms(t, wait);
		return;
	case API_UPDATE_TRACE_VALIDATION_FAILED:
		log_kv(LOG_LEVEL_WARN, LOG_FIELDS(LOG_JOB(t->ref.id)),
		    "GitLab could not validate the log: sending it again "
		    "from the start");
		t->sent = 0;
		t->patches_stopped = false;
		wait_ms(t, wait);
		return;
	case API_UPDATE_FAILED:
		final_failed(t);
		return;
	case API_UPDATE_CANCELED:
		return;
	}
}

/* One round of the end: the rest of the log, then the final PUT. */
static void
final_round(struct trace *t)
{
	if (!t->patches_stopped && t->sent < trace_log_size(t->log)) {
		send_patch(t);
		return;
	}
	t->final.checksum = trace_log_crc32(t->log);
	t->final.bytesize = trace_log_size(t->log);
	set_state(t, SENDER_FINAL_PUT);
	t->call = api_update_job(t->api, &t->ref, t->info, &t->final, on_final_answer, t);
}

struct trace *
trace_new(const struct trace_params *p)
{
	struct trace *t = xcalloc(1, sizeof(*t));

	t->state = SENDER_IDLE;	/* born; every change after goes through set_state() */
	t->loop = p->loop;
	t->api = p->api;
	t->creds = p->creds;
	t->job_token = xstrdup(p->job_token);
	t->ref.creds = p->creds;
	t->ref.id = p->job_id;
	t->ref.token = t->job_token;
	t->info = p->info;
	t->log = p->log;
	t->debug_trace = p->debug_trace;
	t->sent = p->sent;
	t->sync_fd = -1;
	t->default_interval_ms = p->interval_ms ? p->interval_ms : 3000;
	t->interval_ms = t->default_interval_ms;
	t->keepalive_ms = p->keepalive_ms ? p->keepalive_ms : 30000;
	t->final_backoff_ms = p->final_backoff_ms ? p->final_backoff_ms : 1000;
	t->retry_limit = p->retry_limit > 0 ? p->retry_limit : 10;
	t->events = p->events;
	t->arg = p->arg;
	t->last_send = clock_mono_ms();
	uv_timer_init(t->loop, &t->timer);
	t->timer.data = t;
	return t;
}

void
trace_start(struct trace *t)
{
	if (t->state == SENDER_IDLE)
		wait_ms(t, t->interval_ms);
}

void
trace_finish(struct trace *t, const struct api_job_update *u, trace_final_cb *cb, void *arg)
{
	t->finishing = true;
	t->final = *u;
	t->final_state = xstrdup(u->state);
	t->final.state = t->final_state;
	if (u->failure_reason != NULL) {
		t->final_reason = xstrdup(u->failure_reason);
		t->final.failure_reason = t->final_reason;
	}
	t->final.has_output = true;
	t->final_cb = cb;
	t->final_arg = arg;
	/* gitlab-runner starts the end at the default interval. */
	t->interval_ms = t->default_interval_ms;
	if (t->state == SENDER_IDLE) {
		uv_timer_stop(&t->timer);
		final_round(t);
	}
	/* Otherwise the request in flight calls final_round() when answered. */
}

static void
trace_free(struct trace *t)
{
	if (t->job_token != NULL)
		explicit_bzero(t->job_token, strlen(t->job_token));
	free(t->job_token);
	free(t->final_state);
	free(t->final_reason);
	free(t->last_answer);
	free(t);
}

static void
on_closed(uv_handle_t *h)
{
	struct trace *t = h->data;

	t->timer_closed = true;
	/* A sync in flight cannot be called back; its callback frees. */
	if (t->sync_fd == -1)
		trace_free(t);
}

void
trace_close(struct trace *t)
{
	trace_final_cb *cb = t->final_cb;
	struct api_call *call = t->call;

	set_state(t, SENDER_CLOSING);
	t->final_cb = NULL;
	t->call = NULL;
	if (call != NULL)
		api_call_cancel(call);
	uv_timer_stop(&t->timer);
	uv_close((uv_handle_t *)&t->timer, on_closed);
	if (cb != NULL)
		cb(TRACE_FINAL_CANCELED, "", t->final_arg);
}
