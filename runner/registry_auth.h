/*
 * Which registry credentials a container job's pulls may use, as
 * gitlab-runner's auth.Resolver decides it: the job's DOCKER_AUTH_CONFIG
 * (a job variable, or the runner's environment), then the config.json of
 * the daemon's user (~/.docker/config.json), then the payload's
 * "registry" credentials (the GitLab registry, with the job token).  Per
 * registry path the first source wins; an image then takes the most
 * specific path it is under (executors/docker/auth.h).  Only here is it
 * known which credential carries the job token; the executor passes
 * opaque values on.
 */
#ifndef RUNNER_REGISTRY_AUTH_H
#define RUNNER_REGISTRY_AUTH_H

#include <stddef.h>

#include "api/api.h"
#include "executors/executor.h"
#include "lib/strv.h"

#define REGISTRY_SOURCE_VARIABLE	"$DOCKER_AUTH_CONFIG"
#define REGISTRY_SOURCE_PAYLOAD		"job payload (GitLab Registry)"

struct registry_auths {
	struct exec_registry_auth	*v;
	size_t				 n;
	struct strv			 own;	/* paths, sources and values (secrets) */
};

struct registry_auth_input {
	const char			*docker_auth_config;	/* the variable's value, or NULL */
	const char			*home_config;		/* the file's text, or NULL */
	const char			*home_config_path;	/* its name, the source in logs */
	const struct api_credential	*credentials;		/* the payload's */
	size_t				 n_credentials;
};

/*
 * The credentials of every source, into out.  What cannot be used is said
 * in warnings, one line each, for the job's log ("Failed to resolve
 * credentials from $DOCKER_AUTH_CONFIG: not a JSON object. Credentials
 * from this source will not be used."), never with a secret in it.
 */
void	registry_auths_make(struct registry_auths *out, const struct registry_auth_input *in,
	    struct strv *warnings);
void	registry_auths_release(struct registry_auths *a);

/*
 * The text of $HOME/.docker/config.json of the daemon's user (1 MiB at
 * most), its path in *path; NULL when there is none (*path still set).
 * Read as the job starts, as gitlab-runner reads it for each pull.
 */
char	*registry_home_config(char **path);

#endif
