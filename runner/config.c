/*
 * Loading, checking and saving config.toml.
 *
 * Each section of the file is described by a table of key specs (name,
 * kind, where the value goes).  One walker reads any section with its
 * specs, so the type checks, the unknown-key warnings and the release of
 * what was read are written once, and adding a key is adding a line.
 * Sections this build does not run (docker, kubernetes, ...) are known by
 * name and kept whole without being read.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/buf.h"
#include "lib/duration.h"
#include "lib/fdio.h"
#include "lib/log.h"
#include "lib/mkdirs.h"
#include "api/api.h"
#include "lib/xmalloc.h"
#include "runner/config.h"

/* Larger than any real config by far; protects against reading a disk image. */
#define CONFIG_MAX_SIZE	(16 * 1024 * 1024)

enum spec_kind {
	K_STRING,	/* char * */
	K_INT,		/* int64_t */
	K_BOOL,		/* bool */
	K_TRISTATE,	/* config_tristate */
	K_DURATION,	/* int64_t ms: Go duration string, or integer nanoseconds */
	K_TIME,		/* struct config_time */
	K_STRINGS,	/* struct strv */
	K_SECTION,	/* a sub-table read with its own specs */
	K_FLAGS,	/* [feature_flags]: FF_NAME = bool */
	K_LABELS,	/* labels: name = "value"; offset of the array, count after */
	K_POLICIES,	/* struct strv: one string or an array of strings */
	K_MAP,		/* struct strv of "key=value": a table of strings */
	K_SERVICES,	/* [[runners.docker.services]]; offset of the array, count after */
	K_UNSUPPORTED,	/* a known key this build does not act on: warned about */
	K_OPAQUE,	/* a known table this build keeps but does not read */
	K_ANY,		/* a known key this build does not use */
};

struct spec {
	const char		*name;
	enum spec_kind		 kind;
	size_t			 offset;	/* into the struct being filled */
	const struct spec	*sub;		/* K_SECTION */
};

#define RC(field)	offsetof(struct runner_config, field)
#define GC(field)	offsetof(struct config, field)
#define END		{ NULL, 0, 0, NULL }

static const struct spec cache_specs[] = {
	{ "Type", K_STRING, RC(cache.type), NULL },
	{ "Path", K_STRING, RC(cache.path), NULL },
	{ "Shared", K_BOOL, RC(cache.shared), NULL },
	{ "MaxUploadedArchiveSize", K_INT, RC(cache.max_uploaded_archive_size), NULL },
	{ "s3", K_OPAQUE, 0, NULL },
	{ "gcs", K_OPAQUE, 0, NULL },
	{ "azure", K_OPAQUE, 0, NULL },
	END
};

static const struct spec custom_specs[] = {
	{ "config_exec", K_STRING, RC(custom.config_exec), NULL },
	{ "config_args", K_STRINGS, RC(custom.config_args), NULL },
	{ "config_exec_timeout", K_INT, RC(custom.config_exec_timeout), NULL },
	{ "prepare_exec", K_STRING, RC(custom.prepare_exec), NULL },
	{ "prepare_args", K_STRINGS, RC(custom.prepare_args), NULL },
	{ "prepare_exec_timeout", K_INT, RC(custom.prepare_exec_timeout), NULL },
	{ "run_exec", K_STRING, RC(custom.run_exec), NULL },
	{ "run_args", K_STRINGS, RC(custom.run_args), NULL },
	{ "cleanup_exec", K_STRING, RC(custom.cleanup_exec), NULL },
	{ "cleanup_args", K_STRINGS, RC(custom.cleanup_args), NULL },
	{ "cleanup_exec_timeout", K_INT, RC(custom.cleanup_exec_timeout), NULL },
	{ "graceful_kill_timeout", K_INT, RC(custom.graceful_kill_timeout), NULL },
	{ "force_kill_timeout", K_INT, RC(custom.force_kill_timeout), NULL },
	END
};

static const struct spec custom_build_dir_specs[] = {
	{ "enabled", K_TRISTATE, RC(custom_build_dir_enabled), NULL },
	END
};

#define DK(field)	RC(docker.field)
#define SV(field)	offsetof(struct docker_service_settings, field)

/* One [[runners.docker.services]] table; decoded into its own struct. */
static const struct spec docker_service_specs[] = {
	{ "name", K_STRING, SV(name), NULL },
	{ "alias", K_STRING, SV(alias), NULL },
	{ "entrypoint", K_STRINGS, SV(entrypoint), NULL },
	{ "command", K_STRINGS, SV(command), NULL },
	{ "environment", K_STRINGS, SV(environment), NULL },
	{ "suspend_data_path", K_UNSUPPORTED, 0, NULL },
	END
};

/* [runners.docker], with gitlab-runner's key names (common/config.go DockerConfig). */
static const struct spec docker_specs[] = {
	{ "host", K_STRING, DK(host), NULL },
	{ "tls_verify", K_BOOL, DK(tls_verify), NULL },
	{ "tls_cert_path", K_STRING, DK(tls_cert_path), NULL },
	{ "image", K_STRING, DK(image), NULL },
	{ "pull_policy", K_POLICIES, DK(pull_policy), NULL },
	{ "allowed_pull_policies", K_POLICIES, DK(allowed_pull_policies), NULL },
	{ "allowed_images", K_STRINGS, DK(allowed_images), NULL },
	{ "allowed_services", K_STRINGS, DK(allowed_services), NULL },
	{ "allowed_users", K_STRINGS, DK(allowed_users), NULL },
	{ "allowed_privileged_images", K_STRINGS, DK(allowed_privileged_images), NULL },
	{ "allowed_privileged_services", K_STRINGS, DK(allowed_privileged_services), NULL },
	{ "helper_image", K_STRING, DK(helper_image), NULL },
	{ "helper_image_flavor", K_STRING, DK(helper_image_flavor), NULL },
	{ "disable_entrypoint_overwrite", K_BOOL, DK(disable_entrypoint_overwrite), NULL },
	{ "services", K_SERVICES, DK(services), NULL },
	{ "services_limit", K_INT, DK(services_limit), NULL },
	{ "wait_for_services_timeout", K_INT, DK(wait_for_services_timeout), NULL },
	{ "services_privileged", K_TRISTATE, DK(services_privileged), NULL },
	{ "services_security_opt", K_STRINGS, DK(services_security_opt), NULL },
	{ "services_tmpfs", K_MAP, DK(services_tmpfs), NULL },
	{ "service_memory", K_STRING, DK(service_memory), NULL },
	{ "service_memory_swap", K_STRING, DK(service_memory_swap), NULL },
	{ "service_memory_reservation", K_STRING, DK(service_memory_reservation), NULL },
	{ "service_cpus", K_STRING, DK(service_cpus), NULL },
	{ "service_cpuset_cpus", K_STRING, DK(service_cpuset_cpus), NULL },
	{ "service_cpu_shares", K_INT, DK(service_cpu_shares), NULL },
	{ "services_devices", K_UNSUPPORTED, 0, NULL },
	{ "service_cgroup_parent", K_UNSUPPORTED, 0, NULL },
	{ "service_slot_cgroup_template", K_UNSUPPORTED, 0, NULL },
	{ "service_gpus", K_UNSUPPORTED, 0, NULL },
	{ "network_mode", K_STRING, DK(network_mode), NULL },
	{ "network_mtu", K_INT, DK(network_mtu), NULL },
	{ "enable_ipv6", K_BOOL, DK(enable_ipv6), NULL },
	{ "hostname", K_STRING, DK(hostname), NULL },
	{ "dns", K_STRINGS, DK(dns), NULL },
	{ "dns_search", K_STRINGS, DK(dns_search), NULL },
	{ "extra_hosts", K_STRINGS, DK(extra_hosts), NULL },
	{ "links", K_STRINGS, DK(links), NULL },
	{ "volumes", K_STRINGS, DK(volumes), NULL },
	{ "cache_dir", K_STRING, DK(cache_dir), NULL },
	{ "disable_cache", K_BOOL, DK(disable_cache), NULL },
	{ "volume_keep", K_BOOL, DK(volume_keep), NULL },
	{ "volume_driver", K_STRING, DK(volume_driver), NULL },
	{ "volume_driver_ops", K_MAP, DK(volume_driver_ops), NULL },
	{ "volumes_from", K_STRINGS, DK(volumes_from), NULL },
	{ "privileged", K_BOOL, DK(privileged), NULL },
	{ "user", K_STRING, DK(user), NULL },
	{ "userns_mode", K_STRING, DK(userns_mode), NULL },
	{ "runtime", K_STRING, DK(runtime), NULL },
	{ "isolation", K_STRING, DK(isolation), NULL },
	{ "pid_mode", K_STRING, DK(pid_mode), NULL },
	{ "ipcmode", K_STRING, DK(ipcmode), NULL },
	{ "cap_add", K_STRINGS, DK(cap_add), NULL },
	{ "cap_drop", K_STRINGS, DK(cap_drop), NULL },
	{ "security_opt", K_STRINGS, DK(security_opt), NULL },
	{ "devices", K_STRINGS, DK(devices), NULL },
	{ "device_cgroup_rules", K_STRINGS, DK(device_cgroup_rules), NULL },
	{ "gpus", K_STRING, DK(gpus), NULL },
	{ "group_add", K_STRINGS, DK(group_add), NULL },
	{ "memory", K_STRING, DK(memory), NULL },
	{ "memory_swap", K_STRING, DK(memory_swap), NULL },
	{ "memory_reservation", K_STRING, DK(memory_reservation), NULL },
	{ "cpus", K_STRING, DK(cpus), NULL },
	{ "cpuset_cpus", K_STRING, DK(cpuset_cpus), NULL },
	{ "cpuset_mems", K_STRING, DK(cpuset_mems), NULL },
	{ "cpu_shares", K_INT, DK(cpu_shares), NULL },
	{ "cgroup_parent", K_STRING, DK(cgroup_parent), NULL },
	{ "shm_size", K_INT, DK(shm_size), NULL },
	{ "oom_kill_disable", K_BOOL, DK(oom_kill_disable), NULL },
	{ "oom_score_adjust", K_INT, DK(oom_score_adjust), NULL },
	{ "tmpfs", K_MAP, DK(tmpfs), NULL },
	{ "sysctls", K_MAP, DK(sysctls), NULL },
	{ "ulimit", K_MAP, DK(ulimit), NULL },
	{ "container_labels", K_MAP, DK(container_labels), NULL },
	{ "log_options", K_MAP, DK(log_options), NULL },
	{ "mac_address", K_STRING, DK(mac_address), NULL },
	END
};

static const struct spec runner_specs[] = {
	{ "name", K_STRING, RC(name), NULL },
	{ "url", K_STRING, RC(url), NULL },
	{ "id", K_INT, RC(id), NULL },
	{ "token", K_STRING, RC(token), NULL },
	{ "token_obtained_at", K_TIME, RC(token_obtained_at), NULL },
	{ "token_expires_at", K_TIME, RC(token_expires_at), NULL },
	{ "tls-ca-file", K_STRING, RC(tls_ca_file), NULL },
	{ "tls-cert-file", K_STRING, RC(tls_cert_file), NULL },
	{ "tls-key-file", K_STRING, RC(tls_key_file), NULL },
	{ "executor", K_STRING, RC(executor), NULL },
	{ "shell", K_STRING, RC(shell), NULL },
	{ "builds_dir", K_STRING, RC(builds_dir), NULL },
	{ "cache_dir", K_STRING, RC(cache_dir), NULL },
	{ "clone_url", K_STRING, RC(clone_url), NULL },
	{ "environment", K_STRINGS, RC(environment), NULL },
	{ "limit", K_INT, RC(limit), NULL },
	{ "request_concurrency", K_INT, RC(request_concurrency), NULL },
	{ "strict_check_interval", K_TRISTATE, RC(strict_check_interval), NULL },
	{ "output_limit", K_INT, RC(output_limit), NULL },
	{ "unhealthy_requests_limit", K_INT, RC(unhealthy_requests_limit), NULL },
	{ "unhealthy_interval", K_DURATION, RC(unhealthy_interval_ms), NULL },
	{ "job_status_final_update_retry_limit", K_INT,
	    RC(job_status_final_update_retry_limit), NULL },
	{ "pre_get_sources_script", K_STRING, RC(pre_get_sources_script), NULL },
	{ "post_get_sources_script", K_STRING, RC(post_get_sources_script), NULL },
	{ "pre_build_script", K_STRING, RC(pre_build_script), NULL },
	{ "post_build_script", K_STRING, RC(post_build_script), NULL },
	{ "prepare_timeout", K_DURATION, RC(prepare_timeout_ms), NULL },
	{ "get_sources_timeout", K_DURATION, RC(get_sources_timeout_ms), NULL },
	{ "debug_trace_disabled", K_BOOL, RC(debug_trace_disabled), NULL },
	{ "safe_directory_checkout", K_TRISTATE, RC(safe_directory_checkout), NULL },
	{ "clean_git_config", K_TRISTATE, RC(clean_git_config), NULL },
	{ "custom_build_dir", K_SECTION, 0, custom_build_dir_specs },
	{ "feature_flags", K_FLAGS, RC(feature_flags), NULL },
	{ "labels", K_LABELS, RC(labels), NULL },
	{ "cache", K_SECTION, 0, cache_specs },
	{ "custom", K_SECTION, 0, custom_specs },
	/* Known to gitlab-runner, kept here, not used by this build. */
	{ "proxy_exec", K_ANY, 0, NULL },
	{ "use_slot_cgroups", K_ANY, 0, NULL },
	{ "slot_cgroup_template", K_ANY, 0, NULL },
	{ "step_runner_image", K_ANY, 0, NULL },
	{ "artifact", K_OPAQUE, 0, NULL },
	{ "referees", K_OPAQUE, 0, NULL },
	{ "monitoring", K_OPAQUE, 0, NULL },
	{ "experimental", K_OPAQUE, 0, NULL },
	{ "instance", K_OPAQUE, 0, NULL },
	{ "ssh", K_OPAQUE, 0, NULL },
	{ "docker", K_SECTION, 0, docker_specs },
	{ "parallels", K_OPAQUE, 0, NULL },
	{ "virtualbox", K_OPAQUE, 0, NULL },
	{ "machine", K_OPAQUE, 0, NULL },
	{ "kubernetes", K_OPAQUE, 0, NULL },
	{ "autoscaler", K_OPAQUE, 0, NULL },
	END
};

static const struct spec session_specs[] = {
	{ "listen_address", K_STRING, GC(session_listen_address), NULL },
	{ "advertise_address", K_STRING, GC(session_advertise_address), NULL },
	{ "session_timeout", K_INT, GC(session_timeout), NULL },
	END
};

static const struct spec global_specs[] = {
	{ "concurrent", K_INT, GC(concurrent), NULL },
	{ "check_interval", K_INT, GC(check_interval), NULL },
	{ "log_level", K_STRING, GC(log_level), NULL },
	{ "log_format", K_STRING, GC(log_format), NULL },
	{ "listen_address", K_STRING, GC(listen_address), NULL },
	{ "shutdown_timeout", K_INT, GC(shutdown_timeout), NULL },
	{ "connection_max_age", K_DURATION, GC(connection_max_age_ms), NULL },
	{ "sentry_dsn", K_STRING, GC(sentry_dsn), NULL },
	{ "user", K_STRING, GC(user), NULL },
	{ "labels", K_LABELS, GC(labels), NULL },
	{ "session_server", K_SECTION, 0, session_specs },
	{ "runners", K_ANY, 0, NULL },		/* load_runners() reads it */
	{ "machine", K_OPAQUE, 0, NULL },
	{ "experimental", K_OPAQUE, 0, NULL },
	END
};

/*
 * Feature flags gitlab-runner knows, with its defaults (protocol.md 10.3).
 * A name not in this list is kept and warned about: a misspelt flag is a
 * setting that silently does nothing.
 */
static const struct {
	const char	*name;
	bool		 value;
} flag_defaults[] = {
	{ "FF_NETWORK_PER_BUILD", false },
	{ "FF_USE_LEGACY_KUBERNETES_EXECUTION_STRATEGY", false },
	{ "FF_USE_DIRECT_DOWNLOAD", true },
	{ "FF_USE_FASTZIP", true },
	{ "FF_DISABLE_UMASK_FOR_DOCKER_EXECUTOR", false },
	{ "FF_ENABLE_BASH_EXIT_CODE_CHECK", false },
	{ "FF_USE_WINDOWS_LEGACY_PROCESS_STRATEGY", false },
	{ "FF_USE_LEGACY_BASH_EVAL", false },
	{ "FF_USE_POWERSHELL_PATH_RESOLVER", false },
	{ "FF_USE_DYNAMIC_TRACE_FORCE_SEND_INTERVAL", false },
	{ "FF_SCRIPT_SECTIONS", false },
	{ "FF_ENABLE_JOB_CLEANUP", false },
	{ "FF_KUBERNETES_HONOR_ENTRYPOINT", false },
	{ "FF_POSIXLY_CORRECT_ESCAPES", false },
	{ "FF_RESOLVE_FULL_TLS_CHAIN", false },
	{ "FF_DISABLE_POWERSHELL_STDIN", false },
	{ "FF_USE_POD_ACTIVE_DEADLINE_SECONDS", true },
	{ "FF_USE_ADVANCED_POD_SPEC_CONFIGURATION", false },
	{ "FF_SECRET_RESOLVING_FAILS_IF_MISSING", true },
	{ "FF_PRINT_POD_EVENTS", false },
	{ "FF_USE_GIT_BUNDLE_URIS", true },
	{ "FF_USE_GIT_NATIVE_CLONE", false },
	{ "FF_USE_DUMB_INIT_WITH_KUBERNETES_EXECUTOR", false },
	{ "FF_USE_INIT_WITH_DOCKER_EXECUTOR", false },
	{ "FF_LOG_IMAGES_CONFIGURED_FOR_JOB", false },
	{ "FF_USE_DOCKER_AUTOSCALER_DIAL_STDIO", true },
	{ "FF_CLEAN_UP_FAILED_CACHE_EXTRACT", false },
	{ "FF_USE_WINDOWS_JOB_OBJECT", false },
	{ "FF_TIMESTAMPS", true },
	{ "FF_DISABLE_AUTOMATIC_TOKEN_ROTATION", false },
	{ "FF_USE_LEGACY_GCS_CACHE_ADAPTER", false },
	{ "FF_DISABLE_UMASK_FOR_KUBERNETES_EXECUTOR", false },
	{ "FF_USE_LEGACY_S3_CACHE_ADAPTER", false },
	{ "FF_GIT_URLS_WITHOUT_TOKENS", true },	/* not gitlab-runner's: no token in git's argv */
	{ "FF_WAIT_FOR_POD_TO_BE_REACHABLE", false },
	{ "FF_MASK_ALL_DEFAULT_TOKENS", true },
	{ "FF_EXPORT_HIGH_CARDINALITY_METRICS", false },
	{ "FF_USE_FLEETING_ACQUIRE_HEARTBEATS", false },
	{ "FF_USE_EXPONENTIAL_BACKOFF_STAGE_RETRY", true },
	{ "FF_USE_ADAPTIVE_REQUEST_CONCURRENCY", true },
	{ "FF_USE_GITALY_CORRELATION_ID", true },
	{ "FF_USE_GIT_PROACTIVE_AUTH", false },
	{ "FF_HASH_CACHE_KEYS", false },
	{ "FF_ENABLE_JOB_INPUTS_INTERPOLATION", true },
	{ "FF_USE_JOB_ROUTER", false },
	{ "FF_SCRIPT_TO_STEP_MIGRATION", false },
	{ "FF_USE_PARALLEL_CACHE_TRANSFER", false },
	{ "FF_USE_PARALLEL_ARTIFACT_TRANSFER", false },
	{ "FF_CONCRETE", false },
	{ "FF_SUSPENDABLE_ENVIRONMENTS", false },
	{ "FF_USE_NATIVE_CONTAINER_STOP", false },
};

/*
 * What this build can run.  The executors/ table will take this over
 * when there is more than one executor.
 */
static const char *const supported_executors[] = { "shell", "docker", NULL };
static const char *const supported_shells[] = { "bash", "sh", NULL };

struct loader {
	const char	*file;		/* the path, for messages */
	int		 flags;
	char		*cause;		/* the first error, owned */
};

static void
load_error(struct loader *ld, const struct toml_value *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
load_error(struct loader *ld, const struct toml_value *at, const char *fmt, ...)
{
	struct buf b;
	va_list ap;

	if (ld->cause != NULL)
		return;
	buf_init(&b, BUF_UNLIMITED);
	if (at != NULL && at->line > 0)
		buf_printf(&b, "%s:%d:%d: ", ld->file, at->line, at->column);
	else
		buf_printf(&b, "%s: ", ld->file);
	va_start(ap, fmt);
	buf_vprintf(&b, fmt, ap);
	va_end(ap);
	ld->cause = buf_detach(&b, NULL);
}

static void
load_warning(struct loader *ld, const struct toml_value *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
load_warning(struct loader *ld, const struct toml_value *at, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (ld->flags & CONFIG_QUIET)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (at != NULL && at->line > 0)
		log_warnx("%s:%d:%d: %s", ld->file, at->line, at->column, msg);
	else
		log_warnx("%s: %s", ld->file, msg);
}

/* "an integer", "a string": for messages. */
static const char *
a_type(enum toml_type t)
{
	switch (t) {
	case TOML_STRING:		return "a string";
	case TOML_INTEGER:		return "an integer";
	case TOML_FLOAT:		return "a float";
	case TOML_BOOL:			return "a boolean";
	case TOML_DATETIME:		return "a date-time";
	case TOML_DATETIME_LOCAL:	return "a local date-time";
	case TOML_DATE_LOCAL:		return "a date";
	case TOML_TIME_LOCAL:		return "a time";
	case TOML_ARRAY:		return "an array";
	case TOML_TABLE:		return "a table";
	}
	return "a value";
}

static bool
want_type(struct loader *ld, const char *path, const struct toml_value *v,
    enum toml_type t)
{
	if (v->type == t)
		return true;
	load_error(ld, v, "%s must be %s, not %s", path, a_type(t), a_type(v->type));
	return false;
}

/* Keys may hold anything; show them so that a reader sees what is there. */
static char *
key_text(const struct toml_string *k)
{
	struct buf b;
	size_t i;

	buf_init(&b, BUF_UNLIMITED);
	for (i = 0; i < k->len; i++) {
		unsigned char c = (unsigned char)k->ptr[i];

		if (c < 0x20 || c == 0x7f)
			buf_printf(&b, "\\x%02x", c);
		else
			buf_putc(&b, (char)c);
	}
	return buf_detach(&b, NULL);
}

static void
pairs_release(struct config_pair **pairs, size_t *n)
{
	size_t i;

	for (i = 0; i < *n; i++) {
		free((*pairs)[i].name);
		free((*pairs)[i].value);
	}
	free(*pairs);
	*pairs = NULL;
	*n = 0;
}

static void
flags_release(struct config_flag **flags, size_t *n)
{
	size_t i;

	for (i = 0; i < *n; i++)
		free((*flags)[i].name);
	free(*flags);
	*flags = NULL;
	*n = 0;
}

static bool
is_flag_known(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(flag_defaults) / sizeof(flag_defaults[0]); i++)
		if (strcmp(flag_defaults[i].name, name) == 0)
			return true;
	return false;
}

/* K_LABELS and K_FLAGS keep the count right after the array pointer. */
#define COUNT_AFTER(base, off)	((size_t *)((char *)(base) + (off) + sizeof(void *)))

static void	decode_table(struct loader *, const struct toml_value *,
		    const struct spec *, void *, const char *);

static void
decode_value(struct loader *ld, const struct spec *sp, const struct toml_value *v,
    void *base, const char *path)
{
	char *field = (char *)base + sp->offset;
	int64_t ns;
	size_t i;

	switch (sp->kind) {
	case K_STRING:
		if (want_type(ld, path, v, TOML_STRING)) {
			if (memchr(v->u.s.ptr, '\0', v->u.s.len) != NULL) {
				load_error(ld, v, "%s must not contain a NUL character", path);
				break;
			}
			free(*(char **)field);
			*(char **)field = xstrdup(v->u.s.ptr);
		}
		break;
	case K_INT:
		if (want_type(ld, path, v, TOML_INTEGER))
			*(int64_t *)field = v->u.i;
		break;
	case K_BOOL:
		if (want_type(ld, path, v, TOML_BOOL))
			*(bool *)field = v->u.b;
		break;
	case K_TRISTATE:
		if (want_type(ld, path, v, TOML_BOOL))
			*(config_tristate *)field = v->u.b ? 1 : 0;
		break;
	case K_DURATION:
		/* gitlab-runner's decoder takes "15m" or integer nanoseconds. */
		if (v->type == TOML_INTEGER) {
			*(int64_t *)field = v->u.i / 1000000;
		} else if (v->type == TOML_STRING) {
			if (duration_parse(v->u.s.ptr, &ns) != 0)
				load_error(ld, v, "%s: \"%s\" is not a duration "
				    "(write it like \"90s\", \"15m\" or \"1h30m\")",
				    path, v->u.s.ptr);
			else
				*(int64_t *)field = ns / 1000000;
		} else
			load_error(ld, v, "%s must be a duration string, not %s",
			    path, a_type(v->type));
		break;
	case K_TIME:
		if (v->type == TOML_DATETIME || v->type == TOML_DATETIME_LOCAL) {
			((struct config_time *)field)->set = true;
			((struct config_time *)field)->at = v->u.dt;
		} else
			load_error(ld, v, "%s must be a date-time, not %s",
			    path, a_type(v->type));
		break;
	case K_STRINGS: {
		struct strv *sv = (struct strv *)field;

		if (!want_type(ld, path, v, TOML_ARRAY))
			break;
		strv_release(sv);
		for (i = 0; i < v->u.array.len; i++) {
			const struct toml_value *e = v->u.array.items[i];

			if (e->type != TOML_STRING) {
				load_error(ld, e, "%s[%zu] must be a string, not %s",
				    path, i, a_type(e->type));
				break;
			}
			strv_push(sv, e->u.s.ptr);
		}
		break;
	}
	case K_SECTION:
		if (want_type(ld, path, v, TOML_TABLE))
			decode_table(ld, v, sp->sub, base, path);
		break;
	case K_FLAGS: {
		struct config_flag **flags = (struct config_flag **)field;
		size_t *n = COUNT_AFTER(base, sp->offset);

		if (!want_type(ld, path, v, TOML_TABLE))
			break;
		flags_release(flags, n);
		*flags = xcalloc(v->u.table.len + 1, sizeof(**flags));
		for (i = 0; i < v->u.table.len; i++) {
			const struct toml_kv *kv = &v->u.table.items[i];
			char *name = key_text(&kv->key);

			if (kv->value->type != TOML_BOOL) {
				load_error(ld, kv->value, "%s.%s must be a boolean, not %s",
				    path, name, a_type(kv->value->type));
				free(name);
				break;
			}
			if (!is_flag_known(name))
				load_warning(ld, kv->value,
				    "unknown feature flag %s.%s (kept as written)", path, name);
			(*flags)[*n].name = name;
			(*flags)[*n].value = kv->value->u.b;
			(*n)++;
		}
		break;
	}
	case K_LABELS: {
		struct config_pair **pairs = (struct config_pair **)field;
		size_t *n = COUNT_AFTER(base, sp->offset);

		if (!want_type(ld, path, v, TOML_TABLE))
			break;
		pairs_release(pairs, n);
		*pairs = xcalloc(v->u.table.len + 1, sizeof(**pairs));
		for (i = 0; i < v->u.table.len; i++) {
			const struct toml_kv *kv = &v->u.table.items[i];
			char *name = key_text(&kv->key);

			if (kv->value->type != TOML_STRING) {
				load_error(ld, kv->value, "%s.%s must be a string, not %s",
				    path, name, a_type(kv->value->type));
				free(name);
				break;
			}
			(*pairs)[*n].name = name;
			(*pairs)[*n].value = xstrdup(kv->value->u.s.ptr);
			(*n)++;
		}
		break;
	}
	case K_POLICIES: {
		struct strv *sv = (struct strv *)field;

		if (v->type == TOML_STRING) {
			strv_release(sv);
			strv_push(sv, v->u.s.ptr);
			break;
		}
		if (v->type != TOML_ARRAY) {
			load_error(ld, v, "%s must be a string or an array of strings, not %s",
			    path, a_type(v->type));
			break;
		}
		decode_value(ld, &(struct spec){ sp->name, K_STRINGS, sp->offset, NULL },
		    v, base, path);
		break;
	}
	case K_MAP: {
		struct strv *sv = (struct strv *)field;

		if (!want_type(ld, path, v, TOML_TABLE))
			break;
		strv_release(sv);
		for (i = 0; i < v->u.table.len; i++) {
			const struct toml_kv *kv = &v->u.table.items[i];
			char *name = key_text(&kv->key);
			char *pair;

			if (kv->value->type != TOML_STRING) {
				load_error(ld, kv->value, "%s.%s must be a string, not %s",
				    path, name, a_type(kv->value->type));
				free(name);
				break;
			}
			/* The name ends at the first '=' when the pair is split again. */
			if (strchr(name, '=') != NULL || *name == '\0') {
				load_error(ld, kv->value, "%s: the key \"%s\" must be "
				    "non-empty and hold no '='", path, name);
				free(name);
				break;
			}
			pair = xasprintf("%s=%s", name, kv->value->u.s.ptr);
			strv_push(sv, pair);
			free(pair);
			free(name);
		}
		break;
	}
	case K_SERVICES: {
		struct docker_service_settings **svc = (struct docker_service_settings **)field;
		size_t *n = COUNT_AFTER(base, sp->offset);

		if (!want_type(ld, path, v, TOML_ARRAY))
			break;
		if (*n > 0)	/* a key twice is a TOML error; never two arrays */
			break;
		*svc = v->u.array.len > 0 ? xcalloc(v->u.array.len, sizeof(**svc)) : NULL;
		for (i = 0; i < v->u.array.len && ld->cause == NULL; i++) {
			const struct toml_value *e = v->u.array.items[i];
			char *at = xasprintf("%s[%zu]", path, i);

			(*n)++;
			if (want_type(ld, at, e, TOML_TABLE))
				decode_table(ld, e, docker_service_specs, &(*svc)[i], at);
			if (ld->cause == NULL && (*svc)[i].name == NULL)
				load_error(ld, e, "%s has no name (the service's image)", at);
			free(at);
		}
		break;
	}
	case K_UNSUPPORTED:
		load_warning(ld, v, "%s is not supported by this build (ignored)", path);
		break;
	case K_OPAQUE:
		want_type(ld, path, v, TOML_TABLE);
		break;
	case K_ANY:
		break;
	}
}

static const struct spec *
find_spec(const struct spec *specs, const struct toml_string *key)
{
	for (; specs->name != NULL; specs++)
		if (strlen(specs->name) == key->len &&
		    memcmp(specs->name, key->ptr, key->len) == 0)
			return specs;
	return NULL;
}

static void
decode_table(struct loader *ld, const struct toml_value *t,
    const struct spec *specs, void *base, const char *prefix)
{
	size_t i;

	for (i = 0; i < t->u.table.len && ld->cause == NULL; i++) {
		const struct toml_kv *kv = &t->u.table.items[i];
		const struct spec *sp = find_spec(specs, &kv->key);
		char *name = key_text(&kv->key);
		char *path = *prefix ? xasprintf("%s.%s", prefix, name) : xstrdup(name);

		if (sp == NULL)
			load_warning(ld, kv->value, "unknown key %s (kept as written)", path);
		else
			decode_value(ld, sp, kv->value, base, path);
		free(path);
		free(name);
	}
}

/* Every string field gets "" rather than NULL; walks like decode_table. */
static void
fill_strings(const struct spec *specs, void *base)
{
	for (; specs->name != NULL; specs++) {
		char **field = (char **)((char *)base + specs->offset);

		if (specs->kind == K_STRING && *field == NULL)
			*field = xstrdup("");
		else if (specs->kind == K_SECTION)
			fill_strings(specs->sub, base);
	}
}

static void
release_fields(const struct spec *specs, void *base)
{
	for (; specs->name != NULL; specs++) {
		char *field = (char *)base + specs->offset;

		switch (specs->kind) {
		case K_STRING:
			free(*(char **)field);
			*(char **)field = NULL;
			break;
		case K_STRINGS:
		case K_POLICIES:
		case K_MAP:
			strv_release((struct strv *)field);
			break;
		case K_SECTION:
			release_fields(specs->sub, base);
			break;
		case K_FLAGS:
			flags_release((struct config_flag **)field,
			    COUNT_AFTER(base, specs->offset));
			break;
		case K_LABELS:
			pairs_release((struct config_pair **)field,
			    COUNT_AFTER(base, specs->offset));
			break;
		default:
			break;
		}
	}
}

bool
config_executor_supported(const char *executor)
{
	size_t i;

	for (i = 0; supported_executors[i] != NULL; i++)
		if (strcmp(supported_executors[i], executor) == 0)
			return true;
	return false;
}

bool
config_shell_supported(const char *shell)
{
	size_t i;

	for (i = 0; supported_shells[i] != NULL; i++)
		if (strcmp(supported_shells[i], shell) == 0)
			return true;
	return false;
}

/*
 * [runners.cache] Type names a remote cache (s3, gcs, azure): this build
 * has none, so caches stay on this machine.  Said by list and run; the
 * entry still runs.  The caller frees the sentence; NULL when all is well.
 */
char *
config_cache_unsupported(const struct runner_config *rc)
{
	if (rc->cache.type == NULL || *rc->cache.type == '\0')
		return NULL;
	return xasprintf("cache Type \"%s\": not supported by this build (no remote "
	    "cache: caches stay on this machine)", rc->cache.type);
}

bool
config_flag_set(const struct runner_config *rc, const char *name, bool *value)
{
	size_t i;

	for (i = 0; i < rc->n_feature_flags; i++)
		if (strcmp(rc->feature_flags[i].name, name) == 0) {
			*value = rc->feature_flags[i].value;
			return true;
		}
	return false;
}

bool
config_feature_flag(const struct runner_config *rc, const char *name)
{
	size_t i;
	bool value;

	if (config_flag_set(rc, name, &value))
		return value;
	for (i = 0; i < sizeof(flag_defaults) / sizeof(flag_defaults[0]); i++)
		if (strcmp(flag_defaults[i].name, name) == 0)
			return flag_defaults[i].value;
	return false;
}

void
runner_config_creds(const struct runner_config *rc, struct api_creds *creds)
{
	creds->url = rc->url;
	creds->token = rc->token;
	creds->tls_ca_file = rc->tls_ca_file;
	creds->tls_cert_file = rc->tls_cert_file;
	creds->tls_key_file = rc->tls_key_file;
}

static bool
is_name_char(char c, bool first)
{
	return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (!first && c >= '0' && c <= '9');
}

char *
config_expand_env(const char *s)
{
	struct buf b;
	const char *p, *end, *val;
	char *name;

	buf_init(&b, BUF_UNLIMITED);
	for (p = s; *p != '\0'; p++) {
		if (*p != '$') {
			buf_putc(&b, *p);
			continue;
		}
		if (p[1] == '{' && (end = strchr(p + 2, '}')) != NULL) {
			name = xmemdup(p + 2, (size_t)(end - p - 2));
			p = end;
		} else if (is_name_char(p[1], true)) {
			end = p + 1;
			while (is_name_char(*end, false))
				end++;
			name = xmemdup(p + 1, (size_t)(end - p - 1));
			p = end - 1;
		} else {
			/* A lone '$' is not a reference: keep it. */
			buf_putc(&b, '$');
			continue;
		}
		if ((val = getenv(name)) != NULL)
			buf_puts(&b, val);
		free(name);
	}
	return buf_detach(&b, NULL);
}

/* The scheme and host of a URL, checked the way an HTTP client would. */
static const char *
url_problem(const char *url)
{
	const char *host;

	if (*url == '\0')
		return "url is not set";
	if (strncasecmp(url, "https://", 8) == 0)
		host = url + 8;
	else if (strncasecmp(url, "http://", 7) == 0)
		host = url + 7;
	else
		return "url is not an http:// or https:// URL";
	if (*host == '\0' || *host == '/' || *host == ':' || *host == '?')
		return "url has no host";
	return NULL;
}

static void
set_problem(struct runner_config *rc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
set_problem(struct runner_config *rc, const char *fmt, ...)
{
	struct buf b;
	va_list ap;

	if (rc->problem != NULL)
		return;
	buf_init(&b, BUF_UNLIMITED);
	va_start(ap, fmt);
	buf_vprintf(&b, fmt, ap);
	va_end(ap);
	rc->problem = buf_detach(&b, NULL);
}

/* Defaults of one entry, before its table is read over them. */
static void
runner_defaults(struct runner_config *rc)
{
	rc->strict_check_interval = -1;
	rc->safe_directory_checkout = -1;
	rc->clean_git_config = -1;
	rc->custom_build_dir_enabled = -1;
	rc->prepare_timeout_ms = -1;
	rc->get_sources_timeout_ms = -1;
	rc->unhealthy_interval_ms = -1;
	rc->custom.config_exec_timeout = 3600;
	rc->custom.prepare_exec_timeout = 3600;
	rc->custom.cleanup_exec_timeout = 3600;
	rc->custom.graceful_kill_timeout = 600;
	rc->custom.force_kill_timeout = 600;
	rc->docker.services_limit = -1;
	rc->docker.services_privileged = -1;
}

/* Values the file left at zero or unset mean gitlab-runner's defaults. */
static void
runner_finish(struct runner_config *rc)
{
	char *s;

	fill_strings(runner_specs, rc);
	if (*rc->shell == '\0') {
		free(rc->shell);
		rc->shell = xstrdup("bash");
	}
	s = config_expand_env(rc->url);
	free(rc->url);
	rc->url = s;
	s = config_expand_env(rc->token);
	free(rc->token);
	rc->token = s;
	rc->token_mask = log_secret_hold(rc->token);

	if (rc->limit < 0)
		set_problem(rc, "limit is %lld; it must be 0 (no limit) or more",
		    (long long)rc->limit);
	if (rc->request_concurrency < 0)
		set_problem(rc, "request_concurrency is %lld; it must be 1 or more",
		    (long long)rc->request_concurrency);
	if (rc->output_limit < 0)
		set_problem(rc, "output_limit is %lld; it must be 0 (default) or more",
		    (long long)rc->output_limit);
	if (rc->request_concurrency < 1)
		rc->request_concurrency = 1;
	if (rc->output_limit <= 0)
		rc->output_limit = 4096;
	if (rc->unhealthy_requests_limit <= 0)
		rc->unhealthy_requests_limit = 3;
	if (rc->unhealthy_interval_ms <= 0)
		rc->unhealthy_interval_ms = 60LL * 60 * 1000;
	if (rc->job_status_final_update_retry_limit <= 0)
		rc->job_status_final_update_retry_limit = 10;

	if ((s = (char *)url_problem(rc->url)) != NULL)
		set_problem(rc, "%s (url = \"%s\")", s, rc->url);
	if (*rc->token == '\0')
		set_problem(rc, "token is not set; register the runner or set token");
	if (*rc->executor == '\0')
		set_problem(rc, "executor is not set");
	else if (!config_executor_supported(rc->executor))
		set_problem(rc, "executor \"%s\" is not supported by this build "
		    "(supported: shell, docker)", rc->executor);
	else if (!config_shell_supported(rc->shell))
		set_problem(rc, "shell \"%s\" is not supported by this build "
		    "(supported: bash, sh)", rc->shell);
}

static void
load_runners(struct loader *ld, struct config *cfg, const struct toml_value *v)
{
	char prefix[64];
	size_t i;

	if (v->type == TOML_TABLE) {
		load_error(ld, v, "[runners] is a table, but each runner must be "
		    "an array element: write [[runners]]");
		return;
	}
	if (!want_type(ld, "runners", v, TOML_ARRAY))
		return;
	cfg->runners = xcalloc(v->u.array.len + 1, sizeof(*cfg->runners));
	for (i = 0; i < v->u.array.len && ld->cause == NULL; i++) {
		struct toml_value *t = v->u.array.items[i];
		struct runner_config *rc = &cfg->runners[i];

		snprintf(prefix, sizeof(prefix), "runners[%zu]", i);
		if (!want_type(ld, prefix, t, TOML_TABLE))
			return;
		cfg->n_runners++;
		rc->index = i;
		rc->line = t->line;
		rc->table = t;
		runner_defaults(rc);
		decode_table(ld, t, runner_specs, rc, prefix);
		runner_finish(rc);
	}
}

static int
read_file(const char *path, struct buf *out, int *err)
{
	char chunk[65536];
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		*err = errno;
		return -1;
	}
	for (;;) {
		n = read(fd, chunk, sizeof(chunk));
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (buf_append(out, chunk, (size_t)n) != 0) {
			close(fd);
			*err = EFBIG;
			return -1;
		}
	}
	*err = n == 0 ? 0 : errno;
	close(fd);
	return n == 0 ? 0 : -1;
}

/* Read doc (taken over) into cfg: types, defaults, entries. */
static int
load_doc(struct config *cfg, struct loader *ld, char **cause)
{
	struct toml_value *runners;
	enum log_level level;
	enum log_format format;

	/* gitlab-runner's NewConfig(): a file without the key means 1; "= 0" stays 0. */
	cfg->concurrent = 1;
	cfg->session_timeout = 1800;
	cfg->connection_max_age_ms = 15LL * 60 * 1000;
	decode_table(ld, cfg->doc, global_specs, cfg, "");
	if (ld->cause == NULL && (runners = toml_get(cfg->doc, "runners")) != NULL)
		load_runners(ld, cfg, runners);
	if (ld->cause != NULL)
		goto fail;

	fill_strings(global_specs, cfg);
	if (*cfg->log_level && log_level_parse(cfg->log_level, &level) != 0) {
		load_error(ld, toml_get(cfg->doc, "log_level"), "log_level \"%s\" is "
		    "not one of debug, info, warn, error, fatal, panic", cfg->log_level);
		goto fail;
	}
	if (*cfg->log_format && log_format_parse(cfg->log_format, &format) != 0) {
		load_error(ld, toml_get(cfg->doc, "log_format"), "log_format \"%s\" "
		    "is not one of runner, text, json", cfg->log_format);
		goto fail;
	}
	if (cfg->check_interval <= 0)
		cfg->check_interval = 3;
	if (cfg->shutdown_timeout <= 0)
		cfg->shutdown_timeout = 30;
	if (cfg->connection_max_age_ms < 0)
		cfg->connection_max_age_ms = 0;
	if (cfg->session_timeout <= 0)
		cfg->session_timeout = 1800;
	return 0;

fail:
	config_release(cfg);
	*cause = ld->cause;
	return -1;
}

int
config_load(struct config *cfg, const char *path, int flags, char **cause)
{
	struct loader ld = { .file = path, .flags = flags };
	struct toml_error terr;
	struct buf data;
	int err;

	memset(cfg, 0, sizeof(*cfg));
	cfg->path = xstrdup(path);
	buf_init(&data, CONFIG_MAX_SIZE);
	if (read_file(path, &data, &err) != 0) {
		if (err == ENOENT && (flags & CONFIG_ALLOW_MISSING)) {
			cfg->doc = toml_new_table(TOML_TABLE_HEADER);
		} else {
			if (err == EFBIG)
				load_error(&ld, NULL, "file is larger than %d MiB",
				    CONFIG_MAX_SIZE / (1024 * 1024));
			else
				load_error(&ld, NULL, "cannot read: %s", strerror(err));
			goto fail;
		}
	} else {
		cfg->exists = true;
		if ((cfg->doc = toml_parse(data.ptr, data.len, &terr)) == NULL) {
			ld.cause = xasprintf("%s:%d:%d: %s", path, terr.line,
			    terr.column, terr.msg);
			goto fail;
		}
	}
	buf_release(&data);
	return load_doc(cfg, &ld, cause);

fail:
	buf_release(&data);
	config_release(cfg);
	*cause = ld.cause;
	return -1;
}

int
config_load_doc(struct config *cfg, const char *name, struct toml_value *doc, int flags,
    char **cause)
{
	struct loader ld = { .file = name, .flags = flags };

	memset(cfg, 0, sizeof(*cfg));
	cfg->path = xstrdup(name);
	cfg->doc = doc;
	return load_doc(cfg, &ld, cause);
}

void
config_release(struct config *cfg)
{
	size_t i;

	for (i = 0; i < cfg->n_runners; i++) {
		struct runner_config *rc = &cfg->runners[i];

		log_secret_drop(rc->token_mask);
		docker_settings_release(&rc->docker);	/* K_SERVICES is its own */
		release_fields(runner_specs, rc);
		free(rc->problem);
	}
	free(cfg->runners);
	release_fields(global_specs, cfg);
	toml_free(cfg->doc);
	free(cfg->path);
	memset(cfg, 0, sizeof(*cfg));
}

char *
config_default_path(void)
{
	const char *env = getenv("CONFIG_FILE"), *home;
	struct passwd *pw;

	if (env != NULL && *env != '\0')
		return xstrdup(env);
	if (geteuid() == 0)
		return xstrdup("/etc/gitlab-runner/config.toml");
	if ((home = getenv("HOME")) == NULL || *home == '\0') {
		pw = getpwuid(geteuid());
		home = pw != NULL ? pw->pw_dir : "/";
	}
	return xasprintf("%s/.gitlab-runner/config.toml", home);
}

char *
config_dir(const struct config *cfg)
{
	char *copy = xstrdup(cfg->path), *dir;

	dir = xstrdup(dirname(copy));
	free(copy);
	return dir;
}

int
config_save(const struct config *cfg, char **cause)
{
	char *dir = NULL, *target = NULL, *resolved, *copy;
	struct buf out;
	int rc = -1;

	buf_init(&out, BUF_UNLIMITED);
	if ((rc = toml_write(cfg->doc, &out)) != 0) {
		*cause = xasprintf("cannot save %s: %s", cfg->path, rc == -EILSEQ ?
		    "a value is not valid UTF-8" : strerror(-rc));
		rc = -1;
		goto out;
	}
	rc = -1;

	/* Write through a symlink to its target, as an editor would. */
	if ((resolved = realpath(cfg->path, NULL)) != NULL) {
		target = xstrdup(resolved);
		free(resolved);
	} else
		target = xstrdup(cfg->path);
	copy = xstrdup(target);
	dir = xstrdup(dirname(copy));
	free(copy);
	if (mkdirs(dir, 0700, NULL) != 0) {
		*cause = xasprintf("cannot save %s: cannot create %s: %s",
		    cfg->path, dir, strerror(errno));
		goto out;
	}
	/* 0600: it holds the runners' tokens. */
	if (fd_replace_file(target, out.ptr, out.len, 0600) != 0) {
		*cause = xasprintf("cannot save %s: %s", cfg->path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	free(dir);
	free(target);
	buf_release(&out);
	return rc;
}

void
config_set_time(struct toml_value *table, const char *key, time_t when, bool set)
{
	struct toml_datetime dt = { .year = 1, .month = 1, .day = 1, .offset_z = true };
	struct tm tm;

	if (set && gmtime_r(&when, &tm) != NULL) {
		dt.year = tm.tm_year + 1900;
		dt.month = tm.tm_mon + 1;
		dt.day = tm.tm_mday;
		dt.hour = tm.tm_hour;
		dt.minute = tm.tm_min;
		dt.second = tm.tm_sec;
	}
	toml_table_set(table, key, strlen(key), toml_new_datetime(TOML_DATETIME, &dt));
}
