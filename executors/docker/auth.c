/* Docker's credential formats; see auth.h. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "executors/docker/auth.h"
#include "lib/base64.h"
#include "lib/xmalloc.h"

#define DEFAULT_REGISTRY	"docker.io"

static char *
str_or_null(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) && *v->valuestring ? xstrdup(v->valuestring) : NULL;
}

static int
by_server(const void *a, const void *b)
{
	return strcmp(((const struct docker_credential *)a)->server,
	    ((const struct docker_credential *)b)->server);
}

/* An "auth" value: base64 of "user:password", into c. */
static int
take_auth(struct docker_credential *c, const char *auth)
{
	char *plain = NULL, *colon;
	size_t len = 0;

	if (base64_decode(auth, strlen(auth), &plain, &len) != 0 ||
	    (colon = memchr(plain, ':', len)) == NULL) {
		if (plain != NULL)
			explicit_bzero(plain, len);
		free(plain);
		return -1;
	}
	*colon = '\0';
	free(c->username);
	free(c->password);
	c->username = xstrdup(plain);
	c->password = xstrdup(colon + 1);
	explicit_bzero(plain, len);
	free(plain);
	return 0;
}

int
docker_config_credentials(const char *text, size_t len, struct docker_credentials *out,
    char **cause)
{
	cJSON *root, *auths, *e, *auth;
	struct docker_credential *c;

	memset(out, 0, sizeof(*out));
	if ((root = cJSON_ParseWithLength(text, len)) == NULL || !cJSON_IsObject(root)) {
		cJSON_Delete(root);
		*cause = xstrdup("not a JSON object");
		return -1;
	}
	out->helpers = cJSON_GetObjectItemCaseSensitive(root, "credsStore") != NULL ||
	    cJSON_GetObjectItemCaseSensitive(root, "credHelpers") != NULL;
	auths = cJSON_GetObjectItemCaseSensitive(root, "auths");
	if (auths != NULL && !cJSON_IsObject(auths)) {
		cJSON_Delete(root);
		*cause = xstrdup("\"auths\" is not an object");
		return -1;
	}
	cJSON_ArrayForEach(e, auths) {
		if (!cJSON_IsObject(e))
			continue;
		out->v = xreallocarray(out->v, out->n + 1, sizeof(*out->v));
		c = &out->v[out->n++];
		memset(c, 0, sizeof(*c));
		c->server = xstrdup(e->string);
		c->username = str_or_null(e, "username");
		c->password = str_or_null(e, "password");
		c->identity_token = str_or_null(e, "identitytoken");
		auth = cJSON_GetObjectItemCaseSensitive(e, "auth");
		if (cJSON_IsString(auth) && *auth->valuestring &&
		    take_auth(c, auth->valuestring) != 0) {
			*cause = xasprintf("auths.\"%s\".auth is not base64 of user:password",
			    e->string);
			cJSON_Delete(root);
			docker_credentials_release(out);
			return -1;
		}
	}
	cJSON_Delete(root);
	if (out->n > 1)
		qsort(out->v, out->n, sizeof(*out->v), by_server);
	return 0;
}

static void
free_secret(char *s)
{
	if (s != NULL)
		explicit_bzero(s, strlen(s));
	free(s);
}

void
docker_credentials_release(struct docker_credentials *c)
{
	size_t i;

	for (i = 0; i < c->n; i++) {
		free(c->v[i].server);
		free(c->v[i].username);
		free_secret(c->v[i].password);
		free_secret(c->v[i].identity_token);
	}
	free(c->v);
	memset(c, 0, sizeof(*c));
}

/* The host part (up to the first '/') in lower case. */
static char *
lower_host(const char *path)
{
	char *out = xstrdup(path), *p;

	for (p = out; *p != '\0' && *p != '/'; p++)
		*p = (char)tolower((unsigned char)*p);
	return out;
}

char *
docker_registry_path(const char *server)
{
	const char *rest = NULL, *slash, *colon;
	char *path, *out;
	size_t n;

	if (strncasecmp(server, "http://", 7) == 0)
		rest = server + 7;
	else if (strncasecmp(server, "https://", 8) == 0)
		rest = server + 8;
	if (rest != NULL) {
		n = strcspn(rest, "/");
		path = xasprintf("%.*s", (int)n, rest);
		out = lower_host(path);
		free(path);
		if (strcmp(out, "index." DEFAULT_REGISTRY) == 0) {
			free(out);
			out = xstrdup(DEFAULT_REGISTRY);
		}
		return out;
	}
	path = xstrdup(server);
	n = strlen(path);
	if (n > 0 && path[n - 1] == '/')
		path[n - 1] = '\0';
	slash = strrchr(path, '/');
	colon = strrchr(path, ':');
	if (slash != NULL && colon != NULL && colon > slash)
		path[colon - path] = '\0';	/* a tag; a port has no '/' after it */
	out = lower_host(path);
	free(path);
	return out;
}

char *
docker_image_path(const char *image)
{
	const char *base = strrchr(image, '/'), *first_end;
	char *path, *tag, *out;
	size_t host_len;
	bool docker_io;

	path = xstrdup(image);
	base = path + (base != NULL ? base - image + 1 : 0);
	if ((tag = strchr(base, ':')) != NULL)
		*tag = '\0';
	if ((tag = strchr(base, '@')) != NULL)
		*tag = '\0';	/* a digest, as a tag */
	first_end = strchr(path, '/');
	host_len = first_end != NULL ? (size_t)(first_end - path) : strlen(path);
	docker_io = first_end == NULL ||
	    (memchr(path, '.', host_len) == NULL && memchr(path, ':', host_len) == NULL &&
	    !(host_len == 9 && strncasecmp(path, "localhost", 9) == 0));
	if (docker_io)
		out = xasprintf(DEFAULT_REGISTRY "/%s", path);
	else if (host_len == strlen("index." DEFAULT_REGISTRY) &&
	    strncasecmp(path, "index." DEFAULT_REGISTRY, host_len) == 0)
		out = xstrdup(path + strlen("index."));
	else
		out = xstrdup(path);
	free(path);
	path = lower_host(out);
	free(out);
	return path;
}

ssize_t
docker_auth_match(const char *const *paths, size_t n, const char *image)
{
	char *p = docker_image_path(image), *slash;
	ssize_t found = -1;
	size_t i;

	/* The image's path, then each parent: the most specific wins. */
	for (;;) {
		for (i = 0; i < n && found < 0; i++)
			if (strcmp(paths[i], p) == 0)
				found = (ssize_t)i;
		if (found >= 0 || (slash = strrchr(p, '/')) == NULL)
			break;
		*slash = '\0';
	}
	free(p);
	return found;
}

char *
docker_registry_auth_value(const struct docker_credential *c)
{
	cJSON *o = cJSON_CreateObject();
	char *json, *line, *out;

	/* Go's types.AuthConfig, fields omitted when empty; json.Encoder ends in "\n". */
	if (c->username != NULL)
		cJSON_AddStringToObject(o, "username", c->username);
	if (c->password != NULL)
		cJSON_AddStringToObject(o, "password", c->password);
	if (c->server != NULL)
		cJSON_AddStringToObject(o, "serveraddress", c->server);
	if (c->identity_token != NULL)
		cJSON_AddStringToObject(o, "identitytoken", c->identity_token);
	if ((json = cJSON_PrintUnformatted(o)) == NULL)
		abort();
	cJSON_Delete(o);
	line = xasprintf("%s\n", json);
	explicit_bzero(json, strlen(json));
	cJSON_free(json);
	out = base64_encode(line, strlen(line), true);
	explicit_bzero(line, strlen(line));
	free(line);
	return out;
}
