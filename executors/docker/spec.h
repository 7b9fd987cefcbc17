/*
 * What the docker executor asks the engine for, as pure functions of plain
 * data, tested byte for byte: container create bodies, the names and the
 * labels gitlab-runner gives its containers, volumes and networks (so
 * clear-docker-cache and operators' filters keep working), the effective
 * pull policy, the allowed_* globs.  No I/O here.
 */
#ifndef EXECUTORS_DOCKER_SPEC_H
#define EXECUTORS_DOCKER_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include "executors/docker/settings.h"
#include "lib/strv.h"

/* The label prefix gitlab-runner uses; ours, for the system ID, is next to it. */
#define DOCKER_LABEL_PREFIX	"com.gitlab.gitlab-runner."
#define RUNNER_LABEL_SYSTEM_ID	"io.runner.system_id"	/* what the sweep looks for */
#define RUNNER_LABEL_JOB_ID	"io.runner.job_id"

/* com.gitlab.gitlab-runner.type */
enum ctr_type {
	CTR_BUILD,		/* "build" */
	CTR_HELPER,		/* "predefined" */
	CTR_SERVICE,		/* "service" */
	CTR_WAIT,		/* "wait": a service's health check */
	CTR_CACHE_INIT,		/* "cache-init" */
};
const char	*ctr_type_label(enum ctr_type t);

/* ---- labels (internal/labels/labels.go) ---- */

struct label_input {
	int64_t		 job_id;
	const char	*job_url;
	const char	*sha;
	const char	*before_sha;
	const char	*ref;
	int64_t		 timeout_s;
	int64_t		 project_id;
	int		 concurrent_project_id;	/* project.runner_id */
	int64_t		 pipeline_id;
	const char	*runner_short;		/* runner.id */
	int64_t		 runner_id;		/* runner.local_id */
	const char	*system_id;
};

/*
 * The common labels as "key=value" into out: every com.gitlab.gitlab-runner.*
 * one, managed=true, and ours (system and job ID); then type (if >= 0) and
 * extra ("key=value", e.g. service=..., or container_labels).
 */
void	docker_labels(struct strv *out, const struct label_input *in, int type,
	    const struct strv *extra);

/* ---- names ---- */

/*
 * runner-<short>-project-<id>-concurrent-<n>: the containers' hostname
 * (ProjectUniqueName), RFC 1123 safe.  The caller frees it.
 */
char	*docker_project_name(const char *runner_short, int64_t project_id, int concurrent);
/*
 * The FF_NETWORK_PER_BUILD network: runner-<short>-<project>-<concurrent>-<job>
 * (ProjectUniqueShortName), RFC 1123 safe likewise.
 */
char	*docker_network_name(const char *runner_short, int64_t project_id, int concurrent,
	    int64_t job_id);
/*
 * A job's container name prefix: the project name plus "-" and 16 random
 * hex digits, unique per job (the fixed names of old gitlab-runners
 * collided).  Containers are <prefix>-build, -predefined, -<service>-<i>.
 */
char	*docker_job_prefix(const char *project_name);
/*
 * The volume of a /path cache volume: <unique name>-cache-<md5 of the
 * path>[-protected] (volume.go), unique_name being ProjectRealUniqueName.
 */
char	*docker_cache_volume_name(const char *unique_name, const char *path, bool protected_ref);
/*
 * A service container's "service" and "service.version" labels
 * (SplitNameAndVersion): the image path as above, and its tag, or its
 * "@sha256:..." digest, or "latest".  Both freed by the caller.
 */
void	docker_service_split(const char *image, char **service, char **version);
/* A service's container name part: the image path with '/' as "__", no tag. */
char	*docker_service_container_part(const char *image);
/*
 * A service's aliases into out (services.go): the image path with '/' as
 * "__", the same with "-", then the job's own (split on ',' and ' '),
 * duplicates dropped.
 */
void	docker_service_aliases(struct strv *out, const char *image, const char *job_aliases);

/* ---- images and policies ---- */

enum pull_policy {
	PULL_ALWAYS,
	PULL_IF_NOT_PRESENT,
	PULL_NEVER,
};

/*
 * The policies to try, in order (pull_policies.go): the job's if it gave
 * any, else the runner's, else always; they must be allowed
 * (allowed_pull_policies, default the runner's); out holds 16.  -1 with
 * *error (upstream's message: a config entry that is not a policy, or
 * both lists when none is allowed) otherwise.
 */
int	docker_pull_policies(const struct strv *job, const struct docker_settings *s,
	    enum pull_policy *out, size_t *n_out, char **error);
const char	*pull_policy_name(enum pull_policy p);

/*
 * doublestar v4's Match, as gitlab-runner's allowed_*: "**" as a whole path
 * segment crosses '/', '*' does not; [class], {a,b}; malformed: no match.
 */
bool	docker_glob_match(const char *pattern, const char *name);
/* Whether name is allowed by list (empty list: everything). */
bool	docker_allowed(const struct strv *list, const char *name);

/*
 * repo and tag for POST /images/create?fromImage=&tag=: the name without
 * tag or digest, and the digest, else the tag, else "latest".  Both freed
 * by the caller.
 */
void	docker_image_split(const char *name, char **repo, char **tag);

/* ---- sizes ---- */

/* docker's RAMInBytes ("128m", "1g", "512k", plain bytes); -1 if not one. */
int64_t	docker_ram_bytes(const char *s);
/* "1.5" or "1/3" CPUs as NanoCpus (truncated; "0": 0); -1 if not a number >= 0. */
int64_t	docker_nano_cpus(const char *s);

/* ---- container create bodies ---- */

struct ctr_spec {
	enum ctr_type		 type;
	const char		*image;		/* the image ID or digest reference */
	const char		*hostname;	/* NULL: none */
	const char		*user;		/* NULL: the image's */
	const struct strv	*cmd;		/* NULL: the image's */
	const struct strv	*entrypoint;	/* NULL: the image's; {""}: none */
	const struct strv	*env;		/* "K=V" */
	const struct strv	*labels;	/* "key=value", complete */
	const struct strv	*binds;		/* "volume:/path[:ro]" */
	const struct strv	*extra_hosts;	/* after the settings' own */
	const struct strv	*exposed_ports;	/* "5432/tcp" */
	const struct strv	*aliases;	/* network aliases (user-defined networks only) */
	const char		*network_mode;	/* NULL: the settings' (or none set) */
	bool			 stdin_stage;	/* OpenStdin, StdinOnce, Attach*: a stage container */
	bool			 init;		/* HostConfig.Init */
	bool			 privileged;	/* decided by the caller (allowed_privileged_*) */
	bool			 read_only;	/* ReadonlyRootfs */
};

/*
 * The JSON body of POST /containers/create for spec under settings s, in
 * the field shapes of API version api (MAC address and endpoint config
 * moved at 1.44).  Service containers take the service_* limits, the
 * others the job's.  NULL with *error (naming the config key) when a
 * setting cannot be turned into the engine's form ("memory = 12x").
 */
char	*docker_create_body(const struct ctr_spec *spec, const struct docker_settings *s,
	    const char *api, char **error);

/*
 * The JSON body of POST /networks/create for the per-build network
 * (networks manager's Create): Name, CheckDuplicate, EnableIPv6, Labels
 * from "key=value" strings, and Options com.docker.network.driver.mtu when
 * mtu > 0.  No Driver: the daemon's default (bridge), as gitlab-runner.
 */
char	*docker_network_body(const char *name, const struct strv *labels, bool enable_ipv6,
	    int64_t mtu);

/*
 * The shell detect command of the build container (bash.go's
 * BashDetectShellScript): bash if the image has one, else sh, as argv.
 */
void	docker_detect_shell_cmd(struct strv *out, bool login);

#endif
