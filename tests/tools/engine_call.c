/*
 * engine_call: the docker executor's transport (executors/docker/engine.h,
 * attach.h) from the command line, for tests/integration/test_docker_engine.py.
 *
 *   engine_call HOST ping                     prints the negotiated API version
 *   engine_call HOST call METHOD PATH [JSON]  prints the status, then the body
 *   engine_call HOST run IMAGE SCRIPT         runs SCRIPT with sh in a new container
 *                                             (SCRIPT "-": read it from stdin)
 *
 * HOST "" means the default ($DOCKER_HOST, then the standard socket).  run
 * creates a container (Cmd ["sh"], stdin open once, network none),
 * attaches, starts it, writes SCRIPT to its stdin and closes it, copies
 * its stdout and stderr frames to ours, waits, removes it and exits with
 * its exit code.  Failures print one line on stderr and exit 125.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>
#include <uv.h>

#include "executors/docker/attach.h"
#include "executors/docker/engine.h"
#include "lib/xmalloc.h"

#define EXIT_TOOL	125

static uv_loop_t loop;
static struct engine *engine;
static int exit_code = EXIT_TOOL;
static const char *argv_method, *argv_path, *argv_json, *argv_image;
static char *script;
static size_t script_len;
static char *container_id;
static struct attach *attach;

static void	remove_container(void);

static void
fail(const char *what, const char *message)
{
	fprintf(stderr, "engine_call: %s%s%s\n", what, *message != '\0' ? ": " : "", message);
	exit_code = EXIT_TOOL;
	if (container_id != NULL)
		remove_container();
	else
		engine_close(engine);
}

static void
write_all(int fd, const char *data, size_t len)
{
	ssize_t n;

	while (len > 0) {
		if ((n = write(fd, data, len)) <= 0) {
			if (n == -1 && errno == EINTR)
				continue;
			return;
		}
		data += n;
		len -= (size_t)n;
	}
}

/* ---- call ---- */

static void
on_call_done(const struct engine_result *res, void *arg)
{
	(void)arg;
	if (res->error != 0) {
		fail("call", res->message);
		return;
	}
	printf("%ld\n", res->status);
	fflush(stdout);
	write_all(1, res->body, res->body_len);
	if (res->status < 200 || res->status > 299)
		fprintf(stderr, "engine_call: %s\n", res->message);
	exit_code = res->status >= 200 && res->status <= 299 ? 0 : 1;
	engine_close(engine);
}

/* ---- run ---- */

static void
on_removed(const struct engine_result *res, void *arg)
{
	(void)arg;
	if (res->error != 0 || (res->status != 204 && res->status != 404))
		fprintf(stderr, "engine_call: remove %s: %s\n", container_id, res->message);
	free(container_id);
	container_id = NULL;
	engine_close(engine);
}

static void
remove_container(void)
{
	char *path = xasprintf("/containers/%s?force=1&v=1", container_id);

	if (engine_call(engine, "DELETE", path, NULL, on_removed, NULL) == NULL) {
		free(container_id);
		container_id = NULL;
		engine_close(engine);
	}
	free(path);
}

static void
on_waited(const struct engine_result *res, void *arg)
{
	cJSON *j, *code;

	(void)arg;
	if (res->error != 0 || res->status != 200) {
		fail("wait", res->message);
		return;
	}
	j = cJSON_ParseWithLength(res->body, res->body_len);
	code = cJSON_GetObjectItemCaseSensitive(j, "StatusCode");
	exit_code = cJSON_IsNumber(code) ? code->valueint : EXIT_TOOL;
	cJSON_Delete(j);
	remove_container();
}

static void
on_output(int stream, const char *data, size_t len, void *arg)
{
	(void)arg;
	write_all(stream == 2 ? 2 : 1, data, len);
}

static void
on_attach_done(int error, const char *cause, void *arg)
{
	char *path;

	(void)arg;
	attach = NULL;
	if (error != 0) {
		fail("attach", cause);
		return;
	}
	path = xasprintf("/containers/%s/wait?condition=not-running", container_id);
	if (engine_call(engine, "POST", path, NULL, on_waited, NULL) == NULL)
		fail("wait", "cannot send");
	free(path);
}

static void
on_started(const struct engine_result *res, void *arg)
{
	(void)arg;
	if (res->error != 0 || res->status != 204) {
		/* on_attach_done comes, and removes the container. */
		fprintf(stderr, "engine_call: start: %s\n", res->message);
		if (attach != NULL)
			attach_close(attach);
		return;
	}
	attach_send(attach, script, script_len);
}

static void
on_attached(int error, const char *cause, void *arg)
{
	char *path;

	(void)arg;
	if (error != 0)
		return;	/* on_attach_done says it */
	path = xasprintf("/containers/%s/start", container_id);
	if (engine_call(engine, "POST", path, NULL, on_started, NULL) == NULL)
		attach_close(attach);
	free(path);
	(void)cause;
}

static void
on_created(const struct engine_result *res, void *arg)
{
	cJSON *j, *id;
	char *cause;

	(void)arg;
	if (res->error != 0 || res->status != 201) {
		fail("create", res->message);
		return;
	}
	j = cJSON_ParseWithLength(res->body, res->body_len);
	id = cJSON_GetObjectItemCaseSensitive(j, "Id");
	if (!cJSON_IsString(id)) {
		cJSON_Delete(j);
		fail("create", "no Id in the answer");
		return;
	}
	container_id = xstrdup(id->valuestring);
	cJSON_Delete(j);
	if ((attach = attach_open(engine, container_id, on_attached, on_output, on_attach_done,
	    NULL, &cause)) == NULL) {
		fail("attach", cause);
		free(cause);
	}
}

static void
create_container(void)
{
	cJSON *c = cJSON_CreateObject(), *hc, *cmd;
	char *json;

	cJSON_AddStringToObject(c, "Image", argv_image);
	cmd = cJSON_AddArrayToObject(c, "Cmd");
	cJSON_AddItemToArray(cmd, cJSON_CreateString("sh"));
	cJSON_AddBoolToObject(c, "OpenStdin", 1);
	cJSON_AddBoolToObject(c, "StdinOnce", 1);
	cJSON_AddBoolToObject(c, "AttachStdin", 1);
	cJSON_AddBoolToObject(c, "AttachStdout", 1);
	cJSON_AddBoolToObject(c, "AttachStderr", 1);
	cJSON_AddBoolToObject(c, "Tty", 0);
	hc = cJSON_AddObjectToObject(c, "HostConfig");
	cJSON_AddStringToObject(hc, "NetworkMode", "none");
	json = cJSON_PrintUnformatted(c);
	cJSON_Delete(c);
	if (engine_call(engine, "POST", "/containers/create",
	    &(struct engine_call_opts){ .json = json }, on_created, NULL) == NULL)
		fail("create", "cannot send");
	free(json);
}

/* ---- connect ---- */

static void
on_ready(const struct engine_result *res, void *arg)
{
	const char *cmd = arg;

	if (res->error != 0 || res->status != 200) {
		fail("connect", res->message);
		return;
	}
	if (strcmp(cmd, "ping") == 0) {
		printf("%s\n", engine_api_version(engine));
		exit_code = 0;
		engine_close(engine);
	} else if (strcmp(cmd, "call") == 0) {
		if (engine_call(engine, argv_method, argv_path,
		    &(struct engine_call_opts){ .json = argv_json }, on_call_done,
		    NULL) == NULL)
			fail("call", "cannot send");
	} else
		create_container();
}

static char *
read_stdin(size_t *len)
{
	size_t cap = 65536, n = 0;
	char *b = xmalloc(cap);
	ssize_t r;

	while ((r = read(0, b + n, cap - n)) != 0) {
		if (r == -1) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "engine_call: reading stdin: %s\n", strerror(errno));
			exit(EXIT_TOOL);
		}
		n += (size_t)r;
		if (n == cap)
			b = xrealloc(b, cap *= 2);
	}
	*len = n;
	return b;
}

static void
usage(void)
{
	fprintf(stderr, "usage: engine_call HOST ping\n"
	    "       engine_call HOST call METHOD PATH [JSON]\n"
	    "       engine_call HOST run IMAGE SCRIPT\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	struct engine_config cfg = { 0 };
	char *cause;

	if (argc < 3)
		usage();
	if (strcmp(argv[2], "call") == 0 && (argc == 5 || argc == 6)) {
		argv_method = argv[3];
		argv_path = argv[4];
		argv_json = argc == 6 ? argv[5] : NULL;
	} else if (strcmp(argv[2], "run") == 0 && argc == 5) {
		argv_image = argv[3];
		if (strcmp(argv[4], "-") == 0)
			script = read_stdin(&script_len);
		else {
			script = xstrdup(argv[4]);
			script_len = strlen(script);
		}
	} else if (strcmp(argv[2], "ping") != 0 || argc != 3)
		usage();
	uv_loop_init(&loop);
	cfg.loop = &loop;
	cfg.host = argv[1];
	cfg.user_agent = "runner engine_call";
	if ((engine = engine_new(&cfg, &cause)) == NULL) {
		fprintf(stderr, "engine_call: %s\n", cause);
		free(cause);
		free(script);
		return EXIT_TOOL;
	}
	if (engine_connect(engine, on_ready, argv[2]) == NULL) {
		fprintf(stderr, "engine_call: cannot connect to %s\n", engine_address(engine));
		engine_close(engine);
	}
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
	free(script);
	return exit_code;
}
