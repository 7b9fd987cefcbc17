/*
 * [runners.docker] as plain data (settings.h): releasing and copying it.
 */
#include <stdlib.h>
#include <string.h>

#include "executors/docker/settings.h"
#include "lib/xmalloc.h"

/* Every string and list of the struct, so that release and copy cannot miss one. */
#define DOCKER_STRINGS(X) \
	X(host) \
	X(tls_cert_path) \
	X(image) \
	X(helper_image) \
	X(helper_image_flavor) \
	X(service_memory) \
	X(service_memory_swap) \
	X(service_memory_reservation) \
	X(service_cpus) \
	X(service_cpuset_cpus) \
	X(network_mode) \
	X(hostname) \
	X(cache_dir) \
	X(volume_driver) \
	X(user) \
	X(userns_mode) \
	X(runtime) \
	X(isolation) \
	X(pid_mode) \
	X(ipcmode) \
	X(gpus) \
	X(memory) \
	X(memory_swap) \
	X(memory_reservation) \
	X(cpus) \
	X(cpuset_cpus) \
	X(cpuset_mems) \
	X(cgroup_parent) \
	X(mac_address)

#define DOCKER_LISTS(X) \
	X(pull_policy) \
	X(allowed_pull_policies) \
	X(allowed_images) \
	X(allowed_services) \
	X(allowed_users) \
	X(allowed_privileged_images) \
	X(allowed_privileged_services) \
	X(services_security_opt) \
	X(services_tmpfs) \
	X(services_devices) \
	X(dns) \
	X(dns_search) \
	X(extra_hosts) \
	X(links) \
	X(volumes) \
	X(volume_driver_ops) \
	X(volumes_from) \
	X(cap_add) \
	X(cap_drop) \
	X(security_opt) \
	X(devices) \
	X(device_cgroup_rules) \
	X(group_add) \
	X(tmpfs) \
	X(sysctls) \
	X(ulimit) \
	X(container_labels) \
	X(log_options)

static char *
dup(const char *s)
{
	return s != NULL ? xstrdup(s) : NULL;
}

static void
copy_list(struct strv *to, const struct strv *from)
{
	size_t i;

	memset(to, 0, sizeof(*to));
	for (i = 0; i < from->n; i++)
		strv_push(to, from->v[i]);
}

static void
service_release(struct docker_service_settings *sv)
{
	free(sv->name);
	free(sv->alias);
	strv_release(&sv->entrypoint);
	strv_release(&sv->command);
	strv_release(&sv->environment);
}

void
docker_settings_release(struct docker_settings *s)
{
	size_t i;

#define FREE_STRING(f)	free(s->f);
#define FREE_LIST(f)	strv_release(&s->f);
	DOCKER_STRINGS(FREE_STRING)
	DOCKER_LISTS(FREE_LIST)
#undef FREE_STRING
#undef FREE_LIST
	for (i = 0; i < s->n_services; i++)
		service_release(&s->services[i]);
	free(s->services);
	memset(s, 0, sizeof(*s));
}

void
docker_settings_copy(struct docker_settings *to, const struct docker_settings *from)
{
	size_t i;

	*to = *from;	/* the scalars; every pointer is replaced below */
#define COPY_STRING(f)	to->f = dup(from->f);
#define COPY_LIST(f)	copy_list(&to->f, &from->f);
	DOCKER_STRINGS(COPY_STRING)
	DOCKER_LISTS(COPY_LIST)
#undef COPY_STRING
#undef COPY_LIST
	to->services = from->n_services > 0 ?
	    xcalloc(from->n_services, sizeof(*to->services)) : NULL;
	for (i = 0; i < from->n_services; i++) {
		const struct docker_service_settings *f = &from->services[i];
		struct docker_service_settings *t = &to->services[i];

		t->name = dup(f->name);
		t->alias = dup(f->alias);
		copy_list(&t->entrypoint, &f->entrypoint);
		copy_list(&t->command, &f->command);
		copy_list(&t->environment, &f->environment);
	}
}
