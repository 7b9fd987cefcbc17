/*
 * Journal files.  TOML, because the program already reads and writes it
 * exactly (toml.c, toml_write.c) and an operator can read it; the config
 * writer's atomic save pattern, because a torn journal would be a lost
 * report.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/buf.h"
#include "lib/fdio.h"
#include "lib/xmalloc.h"
#include "runner/journal.h"
#include "runner/toml.h"

char *
journal_dir(const char *state_dir, char **cause)
{
	char *dir = xasprintf("%s/journal", state_dir);

	if (mkdir(state_dir, 0700) == -1 && errno != EEXIST) {
		*cause = xasprintf("cannot create the state directory %s: %s", state_dir,
		    strerror(errno));
		free(dir);
		return NULL;
	}
	if (mkdir(dir, 0700) == -1 && errno != EEXIST) {
		*cause = xasprintf("cannot create %s: %s", dir, strerror(errno));
		free(dir);
		return NULL;
	}
	return dir;
}

char *
journal_path(const char *dir, int64_t job_id, const char *suffix)
{
	return xasprintf("%s/%" PRId64 "%s", dir, job_id, suffix);
}

static void
put_string(struct toml_value *t, const char *key, const char *value)
{
	if (value != NULL)
		toml_table_set(t, key, strlen(key), toml_new_string(value, strlen(value)));
}

static void
put_int(struct toml_value *t, const char *key, int64_t value)
{
	toml_table_set(t, key, strlen(key), toml_new_integer(value));
}

int
journal_write(const char *path, const struct journal_entry *e, char **cause)
{
	struct toml_value *doc = toml_new_table(TOML_TABLE_HEADER);
	struct buf out;
	int rc = -1;

	put_int(doc, "job_id", e->job_id);
	put_string(doc, "job_token", e->job_token);
	put_string(doc, "url", e->url);
	put_string(doc, "tls-ca-file", e->tls_ca_file);
	put_string(doc, "tls-cert-file", e->tls_cert_file);
	put_string(doc, "tls-key-file", e->tls_key_file);
	put_string(doc, "runner_name", e->runner_name);
	put_string(doc, "log", e->log_path);
	put_int(doc, "retry_limit", e->retry_limit);
	put_string(doc, "progress", e->finished ? "finished" : "running");
	if (e->executor_objects.n > 0) {
		struct toml_value *a = toml_new_array();

		for (size_t i = 0; i < e->executor_objects.n; i++)
			toml_array_push(a, toml_new_string(e->executor_objects.v[i],
			    strlen(e->executor_objects.v[i])));
		toml_table_set(doc, "executor_objects", strlen("executor_objects"), a);
	}
	if (e->finished) {
		put_string(doc, "state", e->state);
		put_string(doc, "failure_reason", e->failure_reason);
		put_int(doc, "exit_code", e->exit_code);
	}
	buf_init(&out, BUF_UNLIMITED);
	if (toml_write(doc, &out) != 0) {
		*cause = xasprintf("cannot write %s: a value is not valid UTF-8", path);
		goto out;
	}
	/* The report must outlive a crash, and so must its name; 0600: a token. */
	if (fd_replace_file(path, out.ptr, out.len, 0600) != 0) {
		*cause = xasprintf("cannot write %s: %s", path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	explicit_bzero(out.ptr, out.len);
	buf_release(&out);
	toml_free(doc);
	return rc;
}

static char *
get_string(const struct toml_value *doc, const char *key)
{
	const struct toml_value *v = toml_get(doc, key);

	return v != NULL && v->type == TOML_STRING ? xstrdup(v->u.s.ptr) : NULL;
}

static int64_t
get_int(const struct toml_value *doc, const char *key)
{
	const struct toml_value *v = toml_get(doc, key);

	return v != NULL && v->type == TOML_INTEGER ? v->u.i : 0;
}

int
journal_read(const char *path, struct journal_entry *e, char **cause)
{
	struct toml_error terr;
	struct toml_value *doc;
	struct buf data;
	char chunk[4096];
	ssize_t n;
	int fd;
	char *progress;

	memset(e, 0, sizeof(*e));
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		*cause = xasprintf("cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	buf_init(&data, 1024 * 1024);
	while ((n = read(fd, chunk, sizeof(chunk))) > 0)
		if (buf_append(&data, chunk, (size_t)n) != 0)
			break;
	close(fd);
	doc = toml_parse(data.ptr, data.len, &terr);
	buf_release(&data);
	if (doc == NULL) {
		*cause = xasprintf("%s:%d:%d: %s", path, terr.line, terr.column, terr.msg);
		return -1;
	}
	e->job_id = get_int(doc, "job_id");
	e->job_token = get_string(doc, "job_token");
	e->url = get_string(doc, "url");
	e->tls_ca_file = get_string(doc, "tls-ca-file");
	e->tls_cert_file = get_string(doc, "tls-cert-file");
	e->tls_key_file = get_string(doc, "tls-key-file");
	e->runner_name = get_string(doc, "runner_name");
	e->log_path = get_string(doc, "log");
	e->retry_limit = get_int(doc, "retry_limit");
	progress = get_string(doc, "progress");
	e->finished = progress != NULL && strcmp(progress, "finished") == 0;
	free(progress);
	e->state = get_string(doc, "state");
	e->failure_reason = get_string(doc, "failure_reason");
	e->exit_code = get_int(doc, "exit_code");
	{
		const struct toml_value *a = toml_get(doc, "executor_objects");

		for (size_t i = 0; a != NULL && a->type == TOML_ARRAY && i < a->u.array.len; i++)
			if (a->u.array.items[i]->type == TOML_STRING)
				strv_push(&e->executor_objects, a->u.array.items[i]->u.s.ptr);
	}
	toml_free(doc);
	if (e->job_id <= 0 || e->job_token == NULL || e->url == NULL || e->log_path == NULL) {
		*cause = xasprintf("%s: not a journal entry (job_id, job_token, url or log "
		    "missing)", path);
		journal_entry_release(e);
		return -1;
	}
	return 0;
}

void
journal_entry_release(struct journal_entry *e)
{
	if (e->job_token != NULL)
		explicit_bzero(e->job_token, strlen(e->job_token));
	free(e->job_token);
	free(e->url);
	free(e->tls_ca_file);
	free(e->tls_cert_file);
	free(e->tls_key_file);
	free(e->runner_name);
	free(e->log_path);
	free(e->state);
	free(e->failure_reason);
	strv_release(&e->executor_objects);
	memset(e, 0, sizeof(*e));
}

static int
cmp_strings(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char **
journal_list(const char *state_dir, size_t *n, char **cause)
{
	struct dirent *de;
	char **out = xcalloc(1, sizeof(char *));
	char *dir = xasprintf("%s/journal", state_dir);
	size_t len, cap = 1;
	DIR *d;

	*n = 0;
	if ((d = opendir(dir)) == NULL) {
		if (errno != ENOENT)
			*cause = xasprintf("cannot read the journal %s: %s", dir,
			    strerror(errno));
		free(dir);
		return out;
	}
	while ((de = readdir(d)) != NULL) {
		len = strlen(de->d_name);
		if (len > 5 && strcmp(de->d_name + len - 5, ".toml") == 0) {
			if (*n + 2 > cap) {
				cap = cap * 2 + 2;
				out = xreallocarray(out, cap, sizeof(char *));
			}
			out[(*n)++] = xasprintf("%s/%s", dir, de->d_name);
			out[*n] = NULL;
		}
	}
	closedir(d);
	free(dir);
	qsort(out, *n, sizeof(char *), cmp_strings);
	return out;
}
