/*
 * Registry credentials in Docker's own formats, as gitlab-runner's
 * helpers/docker/auth reads them: the "auths" of a config.json (the text
 * of DOCKER_AUTH_CONFIG or of ~/.docker/config.json), registry paths of
 * server addresses and of image references, the match of an image to
 * the most specific path, and the X-Registry-Auth value a pull sends.
 * Pure: runner/registry_auth.c decides which sources count, in which
 * order; the executor only matches images against what it was given.
 */
#ifndef EXECUTORS_DOCKER_AUTH_H
#define EXECUTORS_DOCKER_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct docker_credential {
	char	*server;	/* as written: "https://index.docker.io/v1/", "host:5000" */
	char	*username;
	char	*password;
	char	*identity_token;
};

struct docker_credentials {
	struct docker_credential	*v;
	size_t				 n;
	/* The config names credsStore or credHelpers, which this build does not run. */
	bool				 helpers;
};

/*
 * The "auths" of a config.json text, in the order of their server names
 * (the Docker CLI's map, sorted as gitlab-runner sorts it).  An "auth"
 * is base64 of "user:password".  0 also when there are none; -1 with
 * *cause ("not JSON", "auths.X.auth is not base64 of user:password").
 */
int	 docker_config_credentials(const char *text, size_t len, struct docker_credentials *out,
	    char **cause);
void	 docker_credentials_release(struct docker_credentials *c);

/*
 * The registry path of a server address (convertToRegistryPath): a URL
 * gives its host ("https://index.docker.io/v1/" is "docker.io"), anything
 * else loses a trailing "/" and a tag; the host is lower case.
 */
char	*docker_registry_path(const char *server);
/*
 * The registry path of an image reference (normalizeImageRef): no tag,
 * "docker.io/" before a name without a registry host, the host lower case.
 */
char	*docker_image_path(const char *image);
/* The index in paths of the most specific one image is under, or -1. */
ssize_t	 docker_auth_match(const char *const *paths, size_t n, const char *image);
/* X-Registry-Auth: URL-safe base64 of the JSON Go's docker client sends. */
char	*docker_registry_auth_value(const struct docker_credential *c);

#endif
