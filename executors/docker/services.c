/*
 * A job's services, as gitlab-runner's (services.go): config.toml's first,
 * then the job's; each pulled, created with the job's volumes and its
 * public variables, started, inspected; then, unless
 * wait_for_services_timeout is -1, a health check per service that exposes
 * a port.  The check is `runner health-check` in a container from the
 * helper image that shares the service's network namespace, dialling
 * 127.0.0.1: no name to resolve, so it works on bridge, per-build and host
 * networks alike.  A service that does not answer in time is a warning,
 * not a failure, as upstream.
 *
 * The build and helper containers reach a service by its aliases: an
 * ExtraHosts entry per alias, to the service's address, or to 127.0.0.1 on
 * the host network (where upstream's aliases resolve to nothing).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "executors/docker/bundle.h"
#include "executors/docker/djob.h"
#include "lib/buf.h"
#include "lib/xmalloc.h"

#define DEFAULT_WAIT_S	30

enum svc_step {
	SVC_PULL,
	SVC_CREATE,
	SVC_START,
	SVC_INSPECT,
	SVC_WAIT_CREATE,
	SVC_WAIT_START,
	SVC_WAIT,
};

struct svc_run {
	struct exec_job	*j;
	djob_step_cb	*step;
	size_t		 i;		/* the service */
	enum svc_step	 at;
	bool		 waiting;	/* the health-check round */
};

static void	svc_next(struct svc_run *);

static void
svc_end(struct svc_run *r, int status, const char *reason, const char *cause)
{
	struct exec_job *j = r->j;
	djob_step_cb *step = r->step;

	free(r);
	step(j, status, reason, cause);
}

static bool
host_network(const struct exec_job *j)
{
	return j->network_mode != NULL && strcmp(j->network_mode, "host") == 0;
}

static void
on_pulled(struct exec_job *j, int status, const char *reason, const char *cause)
{
	struct svc_run *r = j->services_run;

	j->services_run = NULL;
	if (status != 0) {
		svc_end(r, status, reason, cause);
		return;
	}
	r->at = SVC_CREATE;
	svc_next(r);
}

static void
on_created(struct exec_job *j, int status, const char *reason, const char *cause)
{
	struct svc_run *r = j->services_run;

	j->services_run = NULL;
	if (status != 0) {
		svc_end(r, status, reason, cause);
		return;
	}
	r->at = r->waiting ? SVC_WAIT_START : SVC_START;
	svc_next(r);
}

static char *
service_body(struct svc_run *r, char **error)
{
	struct exec_job *j = r->j;
	struct dservice *sv = &j->services[r->i];
	struct strv env = { 0 }, labels = { 0 }, extra = { 0 };
	bool privileged;
	size_t k;
	char *body, *service, *version;
	int sp = j->s.services_privileged;

	for (k = 0; k < j->service_env.n; k++)
		strv_push(&env, j->service_env.v[k]);
	for (k = 0; k < sv->image.variables.n; k++)
		strv_push(&env, sv->image.variables.v[k]);
	docker_service_split(sv->image.name, &service, &version);
	strv_push_owned(&extra, xasprintf(DOCKER_LABEL_PREFIX "service=%s", service));
	strv_push_owned(&extra, xasprintf(DOCKER_LABEL_PREFIX "service.version=%s", version));
	free(service);
	free(version);
	djob_labels(j, &labels, CTR_SERVICE, &extra);
	privileged = (sp < 0 ? j->s.privileged : sp == 1) &&
	    docker_allowed(&j->s.allowed_privileged_services, sv->image.name);
	body = docker_create_body(&(struct ctr_spec){
		.type = CTR_SERVICE,
		.image = sv->image.id,
		.user = sv->image.user,
		.cmd = sv->image.has_command ? &sv->image.command : NULL,
		.entrypoint = sv->image.has_entrypoint ? &sv->image.entrypoint : NULL,
		.env = &env,
		.labels = &labels,
		.binds = &j->binds,
		.aliases = &sv->aliases,
		.network_mode = j->network_mode,
		.init = j->use_init,
		.privileged = privileged,
	}, &j->s, engine_api_version(j->engine), error);
	strv_release(&env);
	strv_release(&labels);
	strv_release(&extra);
	return body;
}

static char *
wait_body(struct svc_run *r, char **error)
{
	struct exec_job *j = r->j;
	struct dservice *sv = &j->services[r->i];
	struct strv env = { 0 }, labels = { 0 }, extra = { 0 }, cmd = { 0 }, binds = { 0 };
	char *body, *mode;
	size_t k;

	strv_push(&env, "WAIT_FOR_SERVICE_TCP_ADDR=127.0.0.1");
	for (k = 0; k < sv->ports.n; k++)
		strv_push_owned(&env, xasprintf("WAIT_FOR_SERVICE_%s_TCP_PORT=%s", sv->ports.v[k],
		    sv->ports.v[k]));
	strv_push(&cmd, BUNDLE_COMMAND);
	strv_push(&cmd, "health-check");
	strv_push_owned(&binds, xasprintf("%s:%s:ro", j->bundle_volume, BUNDLE_MOUNT));
	strv_push_owned(&extra, xasprintf(DOCKER_LABEL_PREFIX "wait=%s", sv->ctr.id));
	djob_labels(j, &labels, CTR_WAIT, &extra);
	mode = host_network(j) ? xstrdup("host") : xasprintf("container:%s", sv->ctr.id);
	body = docker_create_body(&(struct ctr_spec){
		.type = CTR_WAIT,
		.image = j->helper_image.id,
		.cmd = &cmd,
		.env = &env,
		.labels = &labels,
		.binds = &binds,
		.network_mode = mode,
	}, &j->s, engine_api_version(j->engine), error);
	free(mode);
	strv_release(&env);
	strv_release(&labels);
	strv_release(&extra);
	strv_release(&cmd);
	strv_release(&binds);
	return body;
}

static void
on_call(const struct engine_result *res, void *arg)
{
	struct svc_run *r = arg;
	struct exec_job *j = r->j;
	struct dservice *sv = &j->services[r->i];
	cJSON *o, *ports, *nets, *p;
	char *cause;
	size_t k;

	j->call = NULL;
	if (res->error == -ECANCELED) {
		svc_end(r, -ECANCELED, "runner_system_failure", "canceled");
		return;
	}
	switch (r->at) {
	case SVC_START:
		if (res->status != 204 && res->status != 304) {
			cause = xasprintf("cannot start service %s: %s", sv->image.name, res->message);
			svc_end(r, -EIO, "runner_system_failure", cause);
			free(cause);
			return;
		}
		r->at = SVC_INSPECT;
		break;
	case SVC_INSPECT:
		if (res->status != 200 || (o = cJSON_Parse(res->body)) == NULL) {
			cause = xasprintf("cannot inspect service %s: %s", sv->image.name,
			    res->message);
			svc_end(r, -EIO, "runner_system_failure", cause);
			free(cause);
			return;
		}
		ports = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "Config"), "ExposedPorts");
		cJSON_ArrayForEach(p, ports) {
			int port;

			if (p->string != NULL && sscanf(p->string, "%d/tcp", &port) == 1 &&
			    sv->ports.n < 20)
				strv_push_owned(&sv->ports, xasprintf("%d", port));
		}
		nets = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "NetworkSettings"), "Networks");
		cJSON_ArrayForEach(p, nets) {
			cJSON *ip = cJSON_GetObjectItem(p, "IPAddress");

			if (cJSON_IsString(ip) && *ip->valuestring && sv->ip == NULL)
				sv->ip = xstrdup(ip->valuestring);
		}
		cJSON_Delete(o);
		for (k = 0; k < sv->aliases.n; k++) {
			if (sv->ip != NULL)
				strv_push_owned(&j->extra_hosts, xasprintf("%s:%s", sv->aliases.v[k],
				    sv->ip));
			else if (host_network(j))
				strv_push_owned(&j->extra_hosts, xasprintf("%s:127.0.0.1",
				    sv->aliases.v[k]));
		}
		r->i++;
		r->at = SVC_PULL;
		break;
	case SVC_WAIT_START:
		if (res->status != 204 && res->status != 304) {
			djob_say(j, "\033[0;33mWARNING: Service %s probably didn't start properly: "
			    "its health check did not start: %s", sv->image.name, res->message);
			r->i++;
			r->at = SVC_WAIT_CREATE;
			break;
		}
		r->at = SVC_WAIT;
		break;
	case SVC_WAIT: {
		int64_t code = -1;

		if (res->status == 200 && (o = cJSON_Parse(res->body)) != NULL) {
			if (cJSON_IsNumber(cJSON_GetObjectItem(o, "StatusCode")))
				code = (int64_t)cJSON_GetObjectItem(o, "StatusCode")->valuedouble;
			cJSON_Delete(o);
		}
		if (code != 0)
			djob_say(j, "\033[0;33mWARNING: Service %s probably didn't start properly.\n\n"
			    "Health check error:\n%s\n", sv->image.name,
			    res->error == -ETIMEDOUT || res->status == 0 ?
			    "service did not answer on its port(s) before "
			    "wait_for_services_timeout" : "the health check failed");
		r->i++;
		r->at = SVC_WAIT_CREATE;
		break;
	}
	case SVC_PULL:
	case SVC_CREATE:
	case SVC_WAIT_CREATE:
		break;
	}
	svc_next(r);
}

static void
svc_call(struct svc_run *r, const char *method, const char *path, uint64_t timeout_ms)
{
	struct exec_job *j = r->j;

	j->call = engine_call(j->engine, method, path,
	    &(struct engine_call_opts){ .timeout_ms = timeout_ms }, on_call, r);
	if (j->call == NULL)
		svc_end(r, -EIO, "runner_system_failure", "cannot call the Docker engine");
}

static void
svc_next(struct svc_run *r)
{
	struct exec_job *j = r->j;
	struct dservice *sv;
	char *body, *error = NULL, *path, *part;
	int64_t timeout;

	if (!r->waiting && r->i == j->n_services) {
		djob_service_logs_start(j);
		r->waiting = true;
		r->i = 0;
		r->at = SVC_WAIT_CREATE;
		if (j->s.wait_for_services_timeout < 0) {
			svc_end(r, 0, NULL, NULL);
			return;
		}
	}
	if (r->waiting) {
		while (r->i < j->n_services && j->services[r->i].ports.n == 0)
			r->i++;
		if (r->i == j->n_services) {
			svc_end(r, 0, NULL, NULL);
			return;
		}
	}
	sv = &j->services[r->i];
	switch (r->at) {
	case SVC_PULL:
		if (j->s.services_limit >= 0 && j->n_services > (size_t)j->s.services_limit) {
			char *why = xasprintf("the job asks for %zu services; services_limit "
			    "allows %" PRId64, j->n_services, j->s.services_limit);

			svc_end(r, -EPERM, "runner_configuration_error", why);
			free(why);
			return;
		}
		djob_say(j, "Starting service %s ...", sv->image.name);
		{
			struct buf b;
			size_t k;

			buf_init(&b, BUF_UNLIMITED);
			for (k = 0; k < sv->image.aliases.n; k++)
				buf_printf(&b, "%s%s", k ? "," : "", sv->image.aliases.v[k]);
			docker_service_aliases(&sv->aliases, sv->image.name, b.ptr);
			buf_release(&b);
		}
		j->services_run = r;
		djob_pull(j, &sv->image, true, on_pulled);
		return;
	case SVC_CREATE:
		if ((body = service_body(r, &error)) == NULL) {
			svc_end(r, -EINVAL, "runner_configuration_error", error);
			free(error);
			return;
		}
		part = docker_service_container_part(sv->image.name);
		sv->ctr.type = CTR_SERVICE;
		sv->ctr.name = xasprintf("%s-%s-%zu", j->prefix, part, r->i);
		free(part);
		j->services_run = r;
		djob_create(j, &sv->ctr, body, on_created);
		free(body);
		return;
	case SVC_START:
		path = xasprintf("/containers/%s/start", sv->ctr.id);
		svc_call(r, "POST", path, 0);
		free(path);
		return;
	case SVC_INSPECT:
		path = xasprintf("/containers/%s/json", sv->ctr.id);
		svc_call(r, "GET", path, 0);
		free(path);
		return;
	case SVC_WAIT_CREATE:
		djob_say(j, "Waiting for services to be up and running (timeout %" PRId64
		    " seconds)...", j->s.wait_for_services_timeout > 0 ?
		    j->s.wait_for_services_timeout : DEFAULT_WAIT_S);
		if ((body = wait_body(r, &error)) == NULL) {
			svc_end(r, -EINVAL, "runner_configuration_error", error);
			free(error);
			return;
		}
		sv->wait.type = CTR_WAIT;
		sv->wait.name = xasprintf("%s-%s-%zu-wait-for-service", j->prefix,
		    "svc", r->i);
		j->services_run = r;
		djob_create(j, &sv->wait, body, on_created);
		free(body);
		return;
	case SVC_WAIT_START:
		path = xasprintf("/containers/%s/start", sv->wait.id);
		svc_call(r, "POST", path, 0);
		free(path);
		return;
	case SVC_WAIT:
		timeout = j->s.wait_for_services_timeout > 0 ? j->s.wait_for_services_timeout :
		    DEFAULT_WAIT_S;
		path = xasprintf("/containers/%s/wait?condition=not-running", sv->wait.id);
		svc_call(r, "POST", path, (uint64_t)timeout * 1000);
		free(path);
		return;
	}
}

void
djob_services(struct exec_job *j, djob_step_cb *step)
{
	struct svc_run *r;

	if (j->n_services == 0) {
		step(j, 0, NULL, NULL);
		return;
	}
	r = xcalloc(1, sizeof(*r));
	r->j = j;
	r->step = step;
	r->at = SVC_PULL;
	svc_next(r);
}
