/*
 * [runners.docker] of config.toml, as plain data: runner/config.c fills it
 * (with gitlab-runner's key names and defaults, docs/protocol.md 10), the
 * docker executor reads it.  Nothing here is a secret: registry
 * credentials reach the executor per image, already encoded
 * (executor.h's exec_image.registry_auth).
 *
 * Strings are NULL when the key is absent; lists are empty strvs; maps
 * (tmpfs, sysctls, ulimit, container_labels, log_options,
 * volume_driver_ops) are strvs of "key=value", split at the first '='.
 */
#ifndef EXECUTORS_DOCKER_SETTINGS_H
#define EXECUTORS_DOCKER_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/strv.h"

/* One [[runners.docker.services]] entry. */
struct docker_service_settings {
	char		*name;
	char		*alias;		/* one alias, or several separated by ',' or ' ' */
	struct strv	 entrypoint;
	struct strv	 command;
	struct strv	 environment;	/* "K=V" */
};

struct docker_settings {
	/* Where the engine is: unix:///path or tcp://host:port; NULL: $DOCKER_HOST, then the default. */
	char		*host;
	bool		 tls_verify;
	char		*tls_cert_path;	/* ca.pem, cert.pem, key.pem; NULL: $DOCKER_CERT_PATH */

	/* Images */
	char		*image;			/* when the job names none */
	struct strv	 pull_policy;		/* always, if-not-present, never; empty: [always] */
	struct strv	 allowed_pull_policies;	/* empty: = pull_policy */
	struct strv	 allowed_images;	/* doublestar globs; empty: all */
	struct strv	 allowed_services;
	struct strv	 allowed_users;
	struct strv	 allowed_privileged_images;
	struct strv	 allowed_privileged_services;
	char		*helper_image;		/* NULL: the documented default */
	char		*helper_image_flavor;
	bool		 disable_entrypoint_overwrite;

	/* Services */
	struct docker_service_settings	*services;
	size_t				 n_services;
	int64_t		 services_limit;	/* -1: no limit */
	int64_t		 wait_for_services_timeout; /* seconds; 0: 30; -1: no wait */
	int		 services_privileged;	/* -1 unset (= privileged), 0, 1 */
	struct strv	 services_security_opt;
	struct strv	 services_tmpfs;
	struct strv	 services_devices;
	char		*service_memory;
	char		*service_memory_swap;
	char		*service_memory_reservation;
	char		*service_cpus;
	char		*service_cpuset_cpus;
	int64_t		 service_cpu_shares;

	/* Network */
	char		*network_mode;		/* NULL: daemon default (bridge) */
	int64_t		 network_mtu;
	bool		 enable_ipv6;
	char		*hostname;
	struct strv	 dns;
	struct strv	 dns_search;
	struct strv	 extra_hosts;
	struct strv	 links;

	/* Volumes and caches */
	struct strv	 volumes;		/* host:ctr[:mode] binds, or /path cache volumes */
	char		*cache_dir;		/* host directory for /path volumes, or NULL */
	bool		 disable_cache;
	bool		 volume_keep;
	char		*volume_driver;
	struct strv	 volume_driver_ops;
	struct strv	 volumes_from;

	/* The container itself */
	bool		 privileged;
	char		*user;			/* build container */
	char		*userns_mode;
	char		*runtime;
	char		*isolation;		/* refused on Linux */
	char		*pid_mode;
	char		*ipcmode;
	struct strv	 cap_add;
	struct strv	 cap_drop;
	struct strv	 security_opt;
	struct strv	 devices;		/* host[:ctr[:perm]] */
	struct strv	 device_cgroup_rules;
	char		*gpus;
	struct strv	 group_add;
	char		*memory;		/* "128m": docker's unit suffixes */
	char		*memory_swap;
	char		*memory_reservation;
	char		*cpus;			/* "1.5" */
	char		*cpuset_cpus;
	char		*cpuset_mems;
	int64_t		 cpu_shares;
	char		*cgroup_parent;
	int64_t		 shm_size;		/* bytes; 0: the daemon's 64 MiB */
	bool		 oom_kill_disable;
	int64_t		 oom_score_adjust;
	struct strv	 tmpfs;			/* path=options */
	struct strv	 sysctls;		/* name=value */
	struct strv	 ulimit;		/* name=soft[:hard] */
	struct strv	 container_labels;	/* key=value, values expanded with the job's variables */
	struct strv	 log_options;		/* only env, labels */
	char		*mac_address;
};

void	docker_settings_release(struct docker_settings *s);
/* A deep copy of from into to (a job keeps its own). */
void	docker_settings_copy(struct docker_settings *to, const struct docker_settings *from);

#endif
