/*
 * CI_DEBUG_SERVICES: each service's output in the job's log while the job
 * runs, as gitlab-runner's captureContainersLogs: GET .../logs with
 * follow and timestamps from the moment the services have started, every
 * line as "[service:<aliases joined by ->] <timestamp> <text>" in grey.
 * The streams are read until the job closes; a service that exits ends
 * its own.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "executors/docker/djob.h"
#include "executors/docker/frames.h"
#include "lib/buf.h"
#include "lib/log.h"
#include "lib/xmalloc.h"

#define GREY	"\033[0;37m"
#define RESET	"\033[0;m"
/* A longer line is passed on in pieces of this size, each a line of its own. */
#define LINE_MAX_BYTES	(16 * 1024)

struct svc_logs {
	struct exec_job		*j;
	struct dservice		*sv;
	struct engine_call	*call;
	struct frames		 fr;
	struct buf		 line;		/* the unterminated rest of a frame */
	int			 stream;	/* of the bytes in line */
	char			*prefix;
};

static void
emit(struct svc_logs *l)
{
	struct exec_job *j = l->j;
	struct buf out;

	buf_init(&out, BUF_UNLIMITED);
	buf_puts(&out, l->prefix);
	buf_append(&out, l->line.ptr, l->line.len);
	buf_puts(&out, RESET "\n");
	if (j->on_output != NULL)
		j->on_output(l->stream, out.ptr, out.len, j->arg);
	buf_release(&out);
	buf_reset(&l->line);
}

static void
on_frame(int stream, const char *data, size_t len, void *arg)
{
	struct svc_logs *l = arg;
	const char *nl;
	size_t n;

	if (stream != l->stream && l->line.len > 0)
		emit(l);
	l->stream = stream == 2 ? 2 : 1;
	while (len > 0) {
		nl = memchr(data, '\n', len);
		n = nl != NULL ? (size_t)(nl - data) : len;
		if (l->line.len + n > LINE_MAX_BYTES)
			n = LINE_MAX_BYTES - l->line.len;
		buf_append(&l->line, data, n);
		data += n;
		len -= n;
		if (nl != NULL && data == nl) {
			data++;
			len--;
			emit(l);
		} else if (l->line.len == LINE_MAX_BYTES) {
			emit(l);
		}
	}
}

static void
on_data(const char *data, size_t len, void *arg)
{
	struct svc_logs *l = arg;

	frames_feed(&l->fr, data, len, on_frame, l);
}

static void
on_end(const struct engine_result *res, void *arg)
{
	struct svc_logs *l = arg;

	if (l->line.len > 0)
		emit(l);
	if (res->error != -ECANCELED && res->status != 200)
		djob_say(l->j, "\033[0;33mWARNING: cannot follow the logs of service %s: %s",
		    l->sv->image.name, *res->message ? res->message : "no answer");
	log_kv(LOG_LEVEL_DEBUG, LOG_FIELDS(LOG_JOB(l->j->job_id)),
	    "docker: stopped following the logs of %s", l->sv->ctr.name);
	l->sv->logs = NULL;
	buf_release(&l->line);
	free(l->prefix);
	free(l);
}

static void
follow(struct exec_job *j, struct dservice *sv)
{
	struct svc_logs *l = xcalloc(1, sizeof(*l));
	struct buf name;
	char *path;
	size_t k;

	buf_init(&name, BUF_UNLIMITED);
	for (k = 0; k < sv->aliases.n; k++)
		buf_printf(&name, "%s%s", k ? "-" : "", sv->aliases.v[k]);
	l->prefix = xasprintf(GREY "[service:%s] ", name.ptr);
	buf_release(&name);
	l->j = j;
	l->sv = sv;
	l->stream = 1;
	frames_init(&l->fr);
	buf_init(&l->line, BUF_UNLIMITED);
	sv->logs = l;
	path = xasprintf("/containers/%s/logs?follow=1&stdout=1&stderr=1&timestamps=1",
	    sv->ctr.id);
	l->call = engine_call(j->engine, "GET", path,
	    &(struct engine_call_opts){ .on_data = on_data }, on_end, l);
	free(path);
	if (l->call == NULL) {
		djob_say(j, "\033[0;33mWARNING: cannot follow the logs of service %s",
		    sv->image.name);
		sv->logs = NULL;
		free(l->prefix);
		free(l);
	}
}

void
djob_service_logs_start(struct exec_job *j)
{
	size_t i;

	if (!j->debug_services)
		return;
	for (i = 0; i < j->n_services; i++)
		if (j->services[i].ctr.id != NULL && j->services[i].logs == NULL)
			follow(j, &j->services[i]);
}

void
djob_service_logs_stop(struct exec_job *j)
{
	size_t i;

	for (i = 0; i < j->n_services; i++)
		if (j->services[i].logs != NULL)
			engine_call_cancel(j->services[i].logs->call);
}
