/*
 * One stage in one of the job's containers (docs/protocol.md 15.3), as
 * gitlab-runner's runContainer: create the container on its first stage,
 * attach (before start, so no output is lost), start, write the script to
 * stdin and half-close it, pass the frames on until the stream ends, then
 * ask for the exit code.  The container stops when its shell exits and is
 * started again for the next stage: its writable layer carries over.
 *
 * Stopping a stage: every process but PID 1 gets SIGTERM from an exec in
 * the container (a shell does not pass signals on), then stop?t=<grace>
 * sends PID 1 SIGTERM and SIGKILL after the grace.  A container stopped
 * that way is replaced before its next stage, so after_script runs in a
 * fresh one with the same volumes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "executors/docker/attach.h"
#include "executors/docker/djob.h"
#include "lib/log.h"
#include "lib/xmalloc.h"

/*
 * SIGTERM to every process of the container but PID 1 and this shell,
 * newest first (bash.go's ContainerSigTermScriptForLinux does the same
 * walk of /proc).
 */
#define SIGTERM_ALL \
	"for p in $(ls -r /proc | grep '^[0-9][0-9]*$'); do " \
	"[ \"$p\" = 1 ] || [ \"$p\" = \"$$\" ] || kill -TERM \"$p\" 2>/dev/null; done; true"

enum stage_step {
	STAGE_CREATING,		/* the container, or its replacement */
	STAGE_ATTACHING,
	STAGE_STARTING,
	STAGE_RUNNING,		/* output until the stream ends */
	STAGE_WAITING,		/* POST wait for the exit code */
	STAGE_ENDED,
};

struct exec {
	struct exec_job		*j;
	struct dctr		*c;
	char			*name;		/* the stage's, for messages */
	char			*script;
	size_t			 script_len;
	exec_output_cb		*on_output;
	exec_done_cb		*on_done;
	void			*arg;
	enum stage_step		 at;
	struct attach		*attach;
	struct engine_call	*call;		/* start or wait */
	struct engine_call	*stop_call;	/* exec, stop or kill while canceling */
	bool			 canceled;
	uint64_t		 grace_ms;
	int			 stop_step;
	bool			 recreated;	/* the container vanished once already */
	char			*exec_id;
	char			*pending_error;	/* why attaching or starting failed */
	bool			 retry_create;	/* the container vanished: make it again */
	bool			 stream_ended;	/* before the start's answer came */
};

static void	stage_create(struct exec *);
static void	stage_attach(struct exec *);

static void
stage_end(struct exec *e, int status, int exit_code)
{
	struct exec_job *j = e->j;

	e->at = STAGE_ENDED;
	if (e->stop_call != NULL) {
		struct engine_call *c = e->stop_call;

		e->stop_call = NULL;
		engine_call_cancel(c);
	}
	if (e->canceled)
		e->c->dirty = true;
	j->stage = NULL;
	e->on_done(status, exit_code, e->arg);
	if (e->script != NULL) {
		explicit_bzero(e->script, e->script_len);
		free(e->script);
	}
	free(e->name);
	free(e->exec_id);
	free(e->pending_error);
	free(e);
}

static void
stage_fail(struct exec *e, const char *fmt, const char *detail)
{
	char *line = xasprintf(fmt, detail != NULL && *detail ? detail : "no answer");

	djob_say(e->j, "\033[31;1mERROR: %s: %s", e->name, line);
	free(line);
	stage_end(e, -EIO, -1);
}

/* ---- running ---- */

static void
on_waited(const struct engine_result *res, void *arg)
{
	struct exec *e = arg;
	cJSON *o, *code;
	int exit_code = -1;

	e->call = NULL;
	if (res->status == 200 && (o = cJSON_Parse(res->body)) != NULL) {
		code = cJSON_GetObjectItem(o, "StatusCode");
		if (cJSON_IsNumber(code))
			exit_code = (int)code->valuedouble;
		cJSON_Delete(o);
	}
	if (exit_code < 0) {
		stage_fail(e, "cannot get the exit code: %s", res->message);
		return;
	}
	stage_end(e, 0, exit_code);
}

static void
go_wait(struct exec *e)
{
	char *path;

	e->at = STAGE_WAITING;
	path = xasprintf("/containers/%s/wait?condition=not-running", e->c->id);
	e->call = engine_call(e->j->engine, "POST", path, NULL, on_waited, e);
	free(path);
	if (e->call == NULL)
		stage_fail(e, "cannot wait for the container: %s", "cannot call the engine");
}

/*
 * The one place a stage that got as far as attaching moves on from: the
 * stream's end.  Before the start's answer it only notes it; after a
 * failed start it retries or fails; otherwise the exit code is next.
 */
static void
on_attach_done(int error, const char *cause, void *arg)
{
	struct exec *e = arg;

	e->attach = NULL;
	if (e->at == STAGE_ATTACHING) {
		if (e->canceled)
			stage_end(e, -ECANCELED, -1);
		else
			stage_fail(e, "cannot attach to the container: %s",
			    e->pending_error != NULL ? e->pending_error : cause);
		return;
	}
	if (e->at == STAGE_STARTING) {
		if (e->call != NULL) {
			e->stream_ended = true;	/* on_started() goes on to the wait */
			return;
		}
		if (e->retry_create) {
			e->retry_create = false;
			stage_create(e);
			return;
		}
		stage_fail(e, "cannot start the container: %s", e->pending_error);
		return;
	}
	if (error != 0 && error != -ECANCELED)
		log_kv(LOG_LEVEL_WARN, LOG_FIELDS(LOG_JOB(e->j->job_id)),
		    "docker: the stream of %s ended badly: %s", e->c->name, cause);
	go_wait(e);
}

static void
on_attach_output(int stream, const char *data, size_t len, void *arg)
{
	struct exec *e = arg;

	if (stream == 1 || stream == 2)
		e->on_output(stream, data, len, e->arg);
}

static void
on_recreated(struct exec_job *j, int status, const char *reason, const char *cause)
{
	struct exec *e = j->stage;

	(void)reason;
	if (status != 0) {
		stage_fail(e, "%s", cause);
		return;
	}
	stage_create(e);
}

static void
on_started(const struct engine_result *res, void *arg)
{
	struct exec *e = arg;
	struct attach *a;

	e->call = NULL;
	if (res->status == 204 || res->status == 304) {
		e->at = STAGE_RUNNING;
		if (e->stream_ended) {
			go_wait(e);
			return;
		}
		/* Canceled while starting: the stop is on its way; no script. */
		if (e->canceled)
			attach_send(e->attach, "exit 143\n", 9);
		else
			attach_send(e->attach, e->script, e->script_len);
		return;
	}
	free(e->pending_error);
	e->pending_error = xstrdup(*res->message ? res->message : "no answer");
	if (res->status == 404 && !e->recreated && !e->canceled) {
		/* Gone under us (a prune): a new one, once (EXECUTOR_JOB_SECTION_ATTEMPTS). */
		e->recreated = true;
		e->retry_create = true;
		free(e->c->id);
		e->c->id = NULL;
	}
	if ((a = e->attach) == NULL) {
		on_attach_done(-EIO, e->pending_error, e);
		return;
	}
	e->attach = NULL;
	attach_close(a);	/* on_attach_done() takes it from here */
}

static void
on_attached(int error, const char *cause, void *arg)
{
	struct exec *e = arg;
	char *path;

	if (error != 0) {
		/* on_attach_done() follows and ends the stage. */
		free(e->pending_error);
		e->pending_error = xstrdup(cause != NULL ? cause : "no answer");
		return;
	}
	if (e->canceled) {
		struct attach *a = e->attach;

		e->attach = NULL;
		attach_close(a);
		return;
	}
	e->at = STAGE_STARTING;
	path = xasprintf("/containers/%s/start", e->c->id);
	e->call = engine_call(e->j->engine, "POST", path, NULL, on_started, e);
	free(path);
	if (e->call == NULL) {
		struct attach *a = e->attach;

		e->pending_error = xstrdup("cannot call the engine");
		e->attach = NULL;
		attach_close(a);
	}
}

static void
stage_attach(struct exec *e)
{
	char *cause = NULL;

	e->at = STAGE_ATTACHING;
	e->attach = attach_open(e->j->engine, e->c->id, on_attached, on_attach_output,
	    on_attach_done, e, &cause);
	if (e->attach == NULL) {
		stage_fail(e, "cannot attach to the container: %s", cause);
		free(cause);
	}
}

static void
on_created(struct exec_job *j, int status, const char *reason, const char *cause)
{
	struct exec *e = j->stage;

	(void)reason;
	if (status != 0) {
		stage_fail(e, "%s", cause);
		return;
	}
	if (e->canceled) {
		stage_end(e, -ECANCELED, -1);
		return;
	}
	stage_attach(e);
}

static void
stage_create(struct exec *e)
{
	struct exec_job *j = e->j;
	char *body, *error = NULL;

	e->at = STAGE_CREATING;
	if (e->c->id != NULL && e->c->dirty) {
		djob_remove(j, e->c, on_recreated);
		return;
	}
	if (e->c->id != NULL) {
		stage_attach(e);
		return;
	}
	if ((body = djob_ctr_body(j, e->c->type, &error)) == NULL) {
		stage_fail(e, "%s", error);
		free(error);
		return;
	}
	djob_create(j, e->c, body, on_created);
	free(body);
}

struct exec *
djob_stage_start(uv_loop_t *loop, const struct exec_stage *stage, exec_output_cb *on_output,
    exec_done_cb *on_done, void *arg, char **cause)
{
	struct exec_job *j = stage->job;
	struct exec *e;

	(void)loop;
	if (j == NULL || j->state != DJOB_READY) {
		*cause = xstrdup("docker: the job's containers are not ready");
		return NULL;
	}
	if (j->stage != NULL) {
		*cause = xstrdup("docker: a stage is already running");
		return NULL;
	}
	e = xcalloc(1, sizeof(*e));
	e->j = j;
	e->c = stage->where == EXEC_IN_HELPER ? &j->helper : &j->build;
	e->name = xstrdup(stage->name != NULL ? stage->name : "stage");
	e->script_len = strlen(stage->script);
	e->script = xmalloc(e->script_len + 1);
	memcpy(e->script, stage->script, e->script_len + 1);
	e->on_output = on_output;
	e->on_done = on_done;
	e->arg = arg;
	j->stage = e;
	stage_create(e);
	/* It may have ended already (the engine refused at once): on_done came. */
	return e;
}

/* ---- stopping ---- */

static void	stop_next(struct exec *);

static void
on_stop_call(const struct engine_result *res, void *arg)
{
	struct exec *e = arg;
	cJSON *o;

	e->stop_call = NULL;
	if (res->error == -ECANCELED)
		return;
	if (e->stop_step == 1 && res->status == 201 && (o = cJSON_Parse(res->body)) != NULL) {
		if (cJSON_IsString(cJSON_GetObjectItem(o, "Id")))
			e->exec_id = xstrdup(cJSON_GetObjectItem(o, "Id")->valuestring);
		cJSON_Delete(o);
	}
	stop_next(e);
}

static void
stop_call(struct exec *e, const char *method, const char *path, const char *json)
{
	e->stop_call = engine_call(e->j->engine, method, path,
	    &(struct engine_call_opts){ .json = json }, on_stop_call, e);
	if (e->stop_call == NULL)
		log_kv(LOG_LEVEL_WARN, LOG_FIELDS(LOG_JOB(e->j->job_id)),
		    "docker: cannot ask the engine to stop %s", e->c->name);
}

/*
 * 0: the SIGTERM exec is created (build container, unless
 * FF_USE_NATIVE_CONTAINER_STOP); 1: started, detached; 2: stop?t=grace,
 * which SIGKILLs whatever is left after it.  Grace 0 kills at once.
 */
static void
stop_next(struct exec *e)
{
	char *path, *json;
	cJSON *o, *cmd;
	int step = e->stop_step++;

	if (e->at == STAGE_ENDED || e->c->id == NULL)
		return;
	if (e->grace_ms == 0) {
		if (step > 0)
			return;
		path = xasprintf("/containers/%s/kill?signal=SIGKILL", e->c->id);
		stop_call(e, "POST", path, NULL);
		free(path);
		e->stop_step = 3;
		return;
	}
	switch (step) {
	case 0:
		if (e->c->type != CTR_BUILD || e->j->native_stop) {
			e->stop_step = 2;
			stop_next(e);
			return;
		}
		o = cJSON_CreateObject();
		cJSON_AddBoolToObject(o, "AttachStdout", false);
		cJSON_AddBoolToObject(o, "AttachStderr", false);
		cJSON_AddBoolToObject(o, "Tty", false);
		cmd = cJSON_AddArrayToObject(o, "Cmd");
		cJSON_AddItemToArray(cmd, cJSON_CreateString("sh"));
		cJSON_AddItemToArray(cmd, cJSON_CreateString("-c"));
		cJSON_AddItemToArray(cmd, cJSON_CreateString(SIGTERM_ALL));
		json = cJSON_PrintUnformatted(o);
		cJSON_Delete(o);
		path = xasprintf("/containers/%s/exec", e->c->id);
		stop_call(e, "POST", path, json);
		free(path);
		free(json);
		return;
	case 1:
		if (e->exec_id == NULL) {
			stop_next(e);
			return;
		}
		path = xasprintf("/exec/%s/start", e->exec_id);
		stop_call(e, "POST", path, "{\"Detach\":true,\"Tty\":false}");
		free(path);
		return;
	case 2:
		path = xasprintf("/containers/%s/stop?t=%" PRIu64, e->c->id,
		    (e->grace_ms + 999) / 1000);
		stop_call(e, "POST", path, NULL);
		free(path);
		return;
	default:
		return;
	}
}

void
djob_stage_cancel(struct exec *e, uint64_t grace_ms)
{
	if (e == NULL || e->at == STAGE_ENDED)
		return;
	if (e->canceled && grace_ms >= e->grace_ms)
		return;
	e->canceled = true;
	e->grace_ms = grace_ms;
	switch (e->at) {
	case STAGE_CREATING:
		/* on_created() sees canceled and ends the stage unrun. */
		return;
	case STAGE_ATTACHING:
		if (e->attach != NULL) {
			struct attach *a = e->attach;

			e->attach = NULL;
			attach_close(a);	/* on_attach_done: nothing ran */
		}
		return;
	case STAGE_STARTING:
	case STAGE_RUNNING:
	case STAGE_WAITING:
		if (e->stop_call != NULL) {
			struct engine_call *c = e->stop_call;

			e->stop_call = NULL;
			engine_call_cancel(c);
		}
		e->stop_step = 0;
		stop_next(e);
		return;
	case STAGE_ENDED:
		return;
	}
}
