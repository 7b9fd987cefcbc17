/* The registry credentials of a container job; see registry_auth.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "executors/docker/auth.h"
#include "lib/xmalloc.h"
#include "runner/registry_auth.h"

static bool
has_path(const struct registry_auths *a, const char *path)
{
	size_t i;

	for (i = 0; i < a->n; i++)
		if (strcmp(a->v[i].path, path) == 0)
			return true;
	return false;
}

/* Adds what is for a path not set yet; the first source wins (auth.go: Append). */
static void
add_all(struct registry_auths *a, const struct docker_credentials *c, const char *source)
{
	struct exec_registry_auth *e;
	char *path;
	size_t i;

	for (i = 0; i < c->n; i++) {
		path = docker_registry_path(c->v[i].server);
		if (has_path(a, path)) {
			free(path);
			continue;
		}
		a->v = xreallocarray(a->v, a->n + 1, sizeof(*a->v));
		e = &a->v[a->n++];
		strv_push_owned(&a->own, path);
		e->path = a->own.v[a->own.n - 1];
		strv_push(&a->own, source);
		e->source = a->own.v[a->own.n - 1];
		strv_push_owned(&a->own, docker_registry_auth_value(&c->v[i]));
		e->value = a->own.v[a->own.n - 1];
	}
}

static void
from_config_text(struct registry_auths *a, const char *text, const char *source,
    struct strv *warnings)
{
	struct docker_credentials c;
	char *cause = NULL;

	if (docker_config_credentials(text, strlen(text), &c, &cause) != 0) {
		strv_push_owned(warnings, xasprintf("Failed to resolve credentials from %s: %s. "
		    "Credentials from this source will not be used.", source, cause));
		free(cause);
		return;
	}
	if (c.helpers)
		strv_push_owned(warnings, xasprintf("%s names a credential store or helper; "
		    "this runner does not run them: only its \"auths\" are used", source));
	add_all(a, &c, source);
	docker_credentials_release(&c);
}

void
registry_auths_make(struct registry_auths *out, const struct registry_auth_input *in,
    struct strv *warnings)
{
	struct docker_credentials c = { 0 };
	size_t i;

	memset(out, 0, sizeof(*out));
	if (in->docker_auth_config != NULL && *in->docker_auth_config != '\0')
		from_config_text(out, in->docker_auth_config, REGISTRY_SOURCE_VARIABLE, warnings);
	if (in->home_config != NULL)
		from_config_text(out, in->home_config, in->home_config_path, warnings);
	for (i = 0; i < in->n_credentials; i++) {
		const struct api_credential *pc = &in->credentials[i];

		if (pc->type == NULL || strcmp(pc->type, "registry") != 0 || pc->url == NULL)
			continue;
		c.v = xreallocarray(c.v, c.n + 1, sizeof(*c.v));
		memset(&c.v[c.n], 0, sizeof(c.v[c.n]));
		c.v[c.n].server = xstrdup(pc->url);
		c.v[c.n].username = pc->username != NULL ? xstrdup(pc->username) : NULL;
		c.v[c.n].password = pc->password != NULL ? xstrdup(pc->password) : NULL;
		c.n++;
	}
	add_all(out, &c, REGISTRY_SOURCE_PAYLOAD);
	docker_credentials_release(&c);
}

#define HOME_CONFIG_MAX	(1024 * 1024)

char *
registry_home_config(char **path)
{
	const char *home = getenv("HOME");
	char *text;
	ssize_t n;
	size_t len = 0;
	int fd;

	*path = xasprintf("%s/.docker/config.json", home != NULL && *home ? home : "/root");
	if ((fd = open(*path, O_RDONLY | O_CLOEXEC)) == -1)
		return NULL;
	text = xmalloc(HOME_CONFIG_MAX + 1);
	while (len < HOME_CONFIG_MAX &&
	    ((n = read(fd, text + len, HOME_CONFIG_MAX - len)) > 0 || (n == -1 && errno == EINTR)))
		if (n > 0)
			len += (size_t)n;
	close(fd);
	text[len] = '\0';
	return text;
}

void
registry_auths_release(struct registry_auths *a)
{
	size_t i;

	for (i = 0; i < a->n; i++)
		explicit_bzero((char *)a->v[i].value, strlen(a->v[i].value));
	free(a->v);
	strv_release(&a->own);
	memset(a, 0, sizeof(*a));
}
