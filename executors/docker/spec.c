/*
 * The pure parts of the docker executor (spec.h): names, labels, policies,
 * globs, sizes and the container create body, each as gitlab-runner 19.x
 * makes it (internal/labels, helpers/container/services, helpers/dns,
 * helpers/pull_policies, createContainerConfig/createHostConfig).
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "executors/docker/spec.h"
#include "lib/buf.h"
#include "lib/rand.h"
#include "lib/xmalloc.h"

static const char *const type_labels[] = {
	[CTR_BUILD]		= "build",
	[CTR_HELPER]		= "predefined",
	[CTR_SERVICE]		= "service",
	[CTR_WAIT]		= "wait",
	[CTR_CACHE_INIT]	= "cache-init",
};

const char *
ctr_type_label(enum ctr_type t)
{
	return t <= CTR_CACHE_INIT ? type_labels[t] : "";
}

/* ---- labels ---- */

/* Go's time.Duration.String() for whole seconds: "2h0m0s", "1m30s", "45s". */
static char *
go_duration(int64_t s)
{
	if (s >= 3600)
		return xasprintf("%lldh%lldm%llds", (long long)(s / 3600),
		    (long long)(s % 3600 / 60), (long long)(s % 60));
	if (s >= 60)
		return xasprintf("%lldm%llds", (long long)(s / 60), (long long)(s % 60));
	return xasprintf("%llds", (long long)(s > 0 ? s : 0));
}

static void
label(struct strv *out, const char *key, const char *value)
{
	strv_push_owned(out, xasprintf(DOCKER_LABEL_PREFIX "%s=%s", key,
	    value != NULL ? value : ""));
}

static void
label_int(struct strv *out, const char *key, int64_t v)
{
	strv_push_owned(out, xasprintf(DOCKER_LABEL_PREFIX "%s=%lld", key, (long long)v));
}

void
docker_labels(struct strv *out, const struct label_input *in, int type,
    const struct strv *extra)
{
	char *timeout = go_duration(in->timeout_s);
	size_t i;

	label_int(out, "job.id", in->job_id);
	label(out, "job.url", in->job_url);
	label(out, "job.sha", in->sha);
	label(out, "job.before_sha", in->before_sha);
	label(out, "job.ref", in->ref);
	label(out, "job.timeout", timeout);
	label_int(out, "project.id", in->project_id);
	label_int(out, "project.runner_id", in->concurrent_project_id);
	if (in->pipeline_id > 0)
		label_int(out, "pipeline.id", in->pipeline_id);
	else
		label(out, "pipeline.id", "");
	label(out, "runner.id", in->runner_short);
	label_int(out, "runner.local_id", in->runner_id);
	label(out, "runner.system_id", in->system_id);
	label(out, "managed", "true");
	strv_push_owned(out, xasprintf("%s=%s", RUNNER_LABEL_SYSTEM_ID,
	    in->system_id != NULL ? in->system_id : ""));
	strv_push_owned(out, xasprintf("%s=%lld", RUNNER_LABEL_JOB_ID, (long long)in->job_id));
	if (type >= 0)
		label(out, "type", ctr_type_label((enum ctr_type)type));
	for (i = 0; extra != NULL && i < extra->n; i++)
		strv_push(out, extra->v[i]);
	free(timeout);
}

/* ---- names ---- */

/* helpers/dns MakeRFC1123Compatible: lower case, [-a-z0-9] only, no leading '-', 63 at most. */
static char *
rfc1123(const char *s)
{
	char *out = xmalloc(strlen(s) + 1);
	size_t n = 0;

	for (; *s; s++) {
		int c = tolower((unsigned char)*s);

		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c == '-' && n > 0))
			out[n++] = (char)c;
	}
	out[n > 63 ? 63 : n] = '\0';
	return out;
}

char *
docker_project_name(const char *runner_short, int64_t project_id, int concurrent)
{
	char *raw = xasprintf("runner-%s-project-%lld-concurrent-%d",
	    runner_short != NULL ? runner_short : "", (long long)project_id, concurrent);
	char *out = rfc1123(raw);

	free(raw);
	return out;
}

char *
docker_job_prefix(const char *project_name)
{
	char hex[17];

	rand_hex(hex, 16);
	hex[16] = '\0';
	return xasprintf("%s-%s", project_name, hex);
}

char *
docker_cache_volume_name(const char *unique_name, const char *path, bool protected_ref)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0, i;
	char hex[2 * EVP_MAX_MD_SIZE + 1];

	if (EVP_Digest(path, strlen(path), md, &n, EVP_md5(), NULL) != 1)
		n = 0;
	for (i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	hex[2 * n] = '\0';
	return xasprintf("%s-cache-%s%s", unique_name, hex, protected_ref ? "-protected" : "");
}

/*
 * SplitNameAndVersion's Service: the image without tag or digest and
 * without the registry's port ("domain.tld:8080/ns/svc:1" ->
 * "domain.tld/ns/svc").
 */
static char *
service_path(const char *image)
{
	const char *at = strchr(image, '@'), *slash, *colon, *end;
	char *name, *port, *after;

	end = at != NULL ? at : image + strlen(image);
	slash = memrchr(image, '/', (size_t)(end - image));
	colon = memrchr(slash != NULL ? slash : image, ':',
	    (size_t)(end - (slash != NULL ? slash : image)));
	if (colon != NULL)
		end = colon;
	name = xmalloc((size_t)(end - image) + 1);
	memcpy(name, image, (size_t)(end - image));
	name[end - image] = '\0';
	/* A port is a ':' followed by digits before the first '/'. */
	if ((slash = strchr(name, '/')) != NULL && (port = memchr(name, ':',
	    (size_t)(slash - name))) != NULL) {
		after = port + 1;
		while (after < slash && isdigit((unsigned char)*after))
			after++;
		if (after == slash && after > port + 1)
			memmove(port, slash, strlen(slash) + 1);
	}
	return name;
}

static char *
replace_all(const char *s, char from, const char *to)
{
	struct buf b;

	buf_init(&b, BUF_UNLIMITED);
	for (; *s; s++) {
		if (*s == from)
			buf_puts(&b, to);
		else
			buf_append(&b, s, 1);
	}
	return buf_detach(&b, NULL);
}

char *
docker_service_container_part(const char *image)
{
	char *path = service_path(image), *out = replace_all(path, '/', "__");

	free(path);
	return out;
}

static void
push_unique(struct strv *out, const char *s)
{
	size_t i;

	if (*s == '\0')
		return;
	for (i = 0; i < out->n; i++)
		if (strcmp(out->v[i], s) == 0)
			return;
	strv_push(out, s);
}

void
docker_service_aliases(struct strv *out, const char *image, const char *job_aliases)
{
	char *path = service_path(image);
	char *a = replace_all(path, '/', "__"), *b = replace_all(path, '/', "-");
	const char *p = job_aliases, *e;

	push_unique(out, a);
	push_unique(out, b);
	while (p != NULL && *p) {
		p += strspn(p, ", ");
		e = p + strcspn(p, ", ");
		if (e > p) {
			char *one = xmalloc((size_t)(e - p) + 1);

			memcpy(one, p, (size_t)(e - p));
			one[e - p] = '\0';
			push_unique(out, one);
			free(one);
		}
		p = e;
	}
	free(path);
	free(a);
	free(b);
}

/* ---- images and policies ---- */

static const char *const policy_names[] = {
	[PULL_ALWAYS]		= "always",
	[PULL_IF_NOT_PRESENT]	= "if-not-present",
	[PULL_NEVER]		= "never",
};

const char *
pull_policy_name(enum pull_policy p)
{
	return p <= PULL_NEVER ? policy_names[p] : "";
}

static int
policy_parse(const char *s, enum pull_policy *out)
{
	size_t i;

	for (i = 0; i < sizeof(policy_names) / sizeof(policy_names[0]); i++)
		if (strcmp(s, policy_names[i]) == 0) {
			*out = (enum pull_policy)i;
			return 0;
		}
	return -1;
}

/* Go's %v of a []string: "[a b]". */
static void
go_list(struct buf *b, const enum pull_policy *v, size_t n)
{
	size_t i;

	buf_puts(b, "[");
	for (i = 0; i < n; i++)
		buf_printf(b, "%s%s", i ? " " : "", pull_policy_name(v[i]));
	buf_puts(b, "]");
}

/* A config list of policies, or its default (always). */
static int
policies_of(const struct strv *list, const char *key, enum pull_policy *out, size_t *n,
    char **error)
{
	size_t i;

	*n = 0;
	if (list == NULL || list->n == 0) {
		out[(*n)++] = PULL_ALWAYS;
		return 0;
	}
	for (i = 0; i < list->n && *n < 16; i++)
		if (policy_parse(list->v[i], &out[(*n)++]) != 0) {
			*error = xasprintf("unsupported %s: \"%s\" (always, if-not-present or never)",
			    key, list->v[i]);
			return -1;
		}
	return 0;
}

int
docker_pull_policies(const struct strv *job, const struct docker_settings *s,
    enum pull_policy *out, size_t *n_out, char **error)
{
	enum pull_policy want[16], allowed[16];
	size_t n_want = 0, n_allowed = 0, i, k;
	const char *source;
	struct buf b;

	*n_out = 0;
	if (job != NULL && job->n > 0) {
		if (policies_of(job, "pull_policy in the job's image", want, &n_want, error) != 0)
			return -1;
		source = "GitLab pipeline config";
	} else {
		if (policies_of(&s->pull_policy, "runners.docker.pull_policy", want, &n_want,
		    error) != 0)
			return -1;
		source = s->pull_policy.n > 0 ? "Runner config" : "Runner config (default)";
	}
	if (s->allowed_pull_policies.n > 0) {
		if (policies_of(&s->allowed_pull_policies, "runners.docker.allowed_pull_policies",
		    allowed, &n_allowed, error) != 0)
			return -1;
	} else if (policies_of(&s->pull_policy, "runners.docker.pull_policy", allowed,
	    &n_allowed, error) != 0)
		return -1;
	for (i = 0; i < n_want; i++)
		for (k = 0; k < n_allowed; k++)
			if (want[i] == allowed[k]) {
				out[(*n_out)++] = want[i];
				break;
			}
	if (*n_out > 0)
		return 0;
	buf_init(&b, BUF_UNLIMITED);
	buf_puts(&b, "pull_policy (");
	go_list(&b, want, n_want);
	buf_printf(&b, ") defined in %s is not one of the allowed_pull_policies (", source);
	go_list(&b, allowed, n_allowed);
	buf_puts(&b, ")");
	*error = buf_detach(&b, NULL);
	return -1;
}

/* A character class at p ("[a-z]", "[!x]"); *end past it.  -1: not a class. */
static int
class_match(const char *p, char c, const char **end)
{
	bool neg = false, hit = false;
	const char *q = p + 1;

	if (*q == '!' || *q == '^') {
		neg = true;
		q++;
	}
	if (*q == ']')
		return -1;
	for (; *q && *q != ']'; q++) {
		if (q[1] == '-' && q[2] && q[2] != ']') {
			if (c >= q[0] && c <= q[2])
				hit = true;
			q += 2;
		} else if (*q == c)
			hit = true;
	}
	if (*q != ']')
		return -1;
	*end = q + 1;
	return hit != neg && c != '/';
}

bool
docker_glob_match(const char *p, const char *s)
{
	const char *end;
	int m;

	for (; *p; p++, s++) {
		switch (*p) {
		case '*':
			if (p[1] == '*') {
				/* "**" crosses '/'; "**" + "/" also matches nothing. */
				p += 2;
				if (*p == '/' && docker_glob_match(p + 1, s))
					return true;
				for (;; s++) {
					if (docker_glob_match(p, s))
						return true;
					if (*s == '\0')
						return false;
				}
			}
			for (p++;; s++) {
				if (docker_glob_match(p, s))
					return true;
				if (*s == '\0' || *s == '/')
					return false;
			}
		case '?':
			if (*s == '\0' || *s == '/')
				return false;
			break;
		case '[':
			if (*s == '\0')
				return false;
			if ((m = class_match(p, *s, &end)) < 0) {
				if (*s != '[')
					return false;
				break;
			}
			if (!m)
				return false;
			p = end - 1;
			break;
		case '\\':
			if (p[1])
				p++;
			/* FALLTHROUGH */
		default:
			if (*p != *s)
				return false;
		}
	}
	return *s == '\0';
}

bool
docker_allowed(const struct strv *list, const char *name)
{
	size_t i;

	if (list == NULL || list->n == 0)
		return true;
	for (i = 0; i < list->n; i++)
		if (docker_glob_match(list->v[i], name))
			return true;
	return false;
}

void
docker_image_split(const char *name, char **repo, char **tag)
{
	const char *at = strchr(name, '@'), *slash, *colon;

	if (at != NULL) {
		*repo = xmalloc((size_t)(at - name) + 1);
		memcpy(*repo, name, (size_t)(at - name));
		(*repo)[at - name] = '\0';
		*tag = xstrdup(at + 1);
		return;
	}
	slash = strrchr(name, '/');
	colon = strrchr(slash != NULL ? slash : name, ':');
	if (colon == NULL) {
		*repo = xstrdup(name);
		*tag = xstrdup("latest");
		return;
	}
	*repo = xmalloc((size_t)(colon - name) + 1);
	memcpy(*repo, name, (size_t)(colon - name));
	(*repo)[colon - name] = '\0';
	*tag = xstrdup(colon + 1);
}

/* ---- sizes ---- */

int64_t
docker_ram_bytes(const char *s)
{
	const char *p = s;
	double v, mult = 1;
	char *end;

	if (s == NULL || !isdigit((unsigned char)*s))
		return -1;
	v = strtod(p, &end);
	p = end;
	if (*p == ' ')
		p++;
	switch (tolower((unsigned char)*p)) {
	case 'k': mult = 1024.0; p++; break;
	case 'm': mult = 1024.0 * 1024; p++; break;
	case 'g': mult = 1024.0 * 1024 * 1024; p++; break;
	case 't': mult = 1024.0 * 1024 * 1024 * 1024; p++; break;
	case 'p': mult = 1024.0 * 1024 * 1024 * 1024 * 1024; p++; break;
	default: break;
	}
	if (mult > 1 && tolower((unsigned char)*p) == 'i')
		p++;
	if (tolower((unsigned char)*p) == 'b')
		p++;
	if (*p != '\0' || v * mult > 9.2e18)
		return -1;
	return (int64_t)(v * mult);
}

int64_t
docker_nano_cpus(const char *s)
{
	char *end;
	double v;

	if (s == NULL || *s == '\0')
		return -1;
	v = strtod(s, &end);
	if (*end != '\0' || !(v > 0) || v > 1e9)
		return -1;
	return (int64_t)llround(v * 1e9);
}

/* ---- container create bodies ---- */

/* "1.44" >= "1.41"? */
static bool
api_at_least(const char *api, int major, int minor)
{
	int ma = 0, mi = 0;

	if (api == NULL || sscanf(api, "%d.%d", &ma, &mi) != 2)
		return false;
	return ma > major || (ma == major && mi >= minor);
}

static void
add_strv(cJSON *o, const char *key, const struct strv *sv)
{
	cJSON *a;
	size_t i;

	if (sv == NULL || sv->n == 0)
		return;
	a = cJSON_AddArrayToObject(o, key);
	for (i = 0; i < sv->n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateString(sv->v[i]));
}

static void
add_str(cJSON *o, const char *key, const char *v)
{
	if (v != NULL && *v)
		cJSON_AddStringToObject(o, key, v);
}

/* "key=value" entries as an object, split at the first '='. */
static int
add_map(cJSON *o, const char *key, const struct strv *sv, const char *config_key,
    char **error)
{
	cJSON *m;
	size_t i;

	if (sv == NULL || sv->n == 0)
		return 0;
	m = cJSON_AddObjectToObject(o, key);
	for (i = 0; i < sv->n; i++) {
		char *kv = xstrdup(sv->v[i]), *eq = strchr(kv, '=');

		if (eq == NULL) {
			*error = xasprintf("%s: \"%s\" is not key=value", config_key, sv->v[i]);
			free(kv);
			return -1;
		}
		*eq = '\0';
		cJSON_DeleteItemFromObject(m, kv);
		cJSON_AddStringToObject(m, kv, eq + 1);
		free(kv);
	}
	return 0;
}

static int
add_ram(cJSON *o, const char *key, const char *v, const char *config_key, char **error)
{
	int64_t n;

	if (v == NULL || *v == '\0')
		return 0;
	if ((n = docker_ram_bytes(v)) < 0) {
		*error = xasprintf("%s: \"%s\" is not a size (like 512m or 2g)", config_key, v);
		return -1;
	}
	cJSON_AddNumberToObject(o, key, (double)n);
	return 0;
}

static int
add_cpus(cJSON *o, const char *v, const char *config_key, char **error)
{
	int64_t n;

	if (v == NULL || *v == '\0')
		return 0;
	if ((n = docker_nano_cpus(v)) < 0) {
		*error = xasprintf("%s: \"%s\" is not a number of CPUs (like 1.5)", config_key, v);
		return -1;
	}
	cJSON_AddNumberToObject(o, "NanoCpus", (double)n);
	return 0;
}

/* "host[:ctr[:perm]]" as a device mapping. */
static int
add_devices(cJSON *hc, const struct strv *sv, const char *config_key, char **error)
{
	cJSON *a, *d;
	size_t i;

	if (sv == NULL || sv->n == 0)
		return 0;
	a = cJSON_AddArrayToObject(hc, "Devices");
	for (i = 0; i < sv->n; i++) {
		char *spec = xstrdup(sv->v[i]), *ctr, *perm = NULL;

		if ((ctr = strchr(spec, ':')) != NULL) {
			*ctr++ = '\0';
			if ((perm = strchr(ctr, ':')) != NULL)
				*perm++ = '\0';
		}
		if (*spec != '/' || (ctr != NULL && *ctr != '/') ||
		    (perm != NULL && (*perm == '\0' || strspn(perm, "rwm") != strlen(perm)))) {
			*error = xasprintf("%s: \"%s\" is not host[:container[:rwm]]", config_key,
			    sv->v[i]);
			free(spec);
			return -1;
		}
		d = cJSON_CreateObject();
		cJSON_AddStringToObject(d, "PathOnHost", spec);
		cJSON_AddStringToObject(d, "PathInContainer", ctr != NULL && *ctr ? ctr : spec);
		cJSON_AddStringToObject(d, "CgroupPermissions", perm != NULL ? perm : "rwm");
		cJSON_AddItemToArray(a, d);
		free(spec);
	}
	return 0;
}

/* ulimit name=soft[:hard]. */
static int
add_ulimits(cJSON *hc, const struct strv *sv, char **error)
{
	cJSON *a, *u;
	size_t i;

	if (sv == NULL || sv->n == 0)
		return 0;
	a = cJSON_AddArrayToObject(hc, "Ulimits");
	for (i = 0; i < sv->n; i++) {
		const char *eq = strchr(sv->v[i], '=');
		long long soft, hard;
		char *end, *name;

		if (eq == NULL || eq == sv->v[i])
			goto bad;
		soft = strtoll(eq + 1, &end, 10);
		if (end == eq + 1)
			goto bad;
		hard = soft;
		if (*end == ':') {
			const char *h = end + 1;

			hard = strtoll(h, &end, 10);
			if (end == h)
				goto bad;
		}
		if (*end != '\0')
			goto bad;
		name = xmalloc((size_t)(eq - sv->v[i]) + 1);
		memcpy(name, sv->v[i], (size_t)(eq - sv->v[i]));
		name[eq - sv->v[i]] = '\0';
		u = cJSON_CreateObject();
		cJSON_AddStringToObject(u, "Name", name);
		cJSON_AddNumberToObject(u, "Soft", (double)soft);
		cJSON_AddNumberToObject(u, "Hard", (double)hard);
		cJSON_AddItemToArray(a, u);
		free(name);
		continue;
bad:
		*error = xasprintf("runners.docker.ulimit: \"%s\" is not name = \"soft[:hard]\"",
		    sv->v[i]);
		return -1;
	}
	return 0;
}

static bool
user_defined_network(const char *mode)
{
	return mode != NULL && *mode && strcmp(mode, "host") != 0 && strcmp(mode, "none") != 0 &&
	    strcmp(mode, "bridge") != 0 && strcmp(mode, "default") != 0 &&
	    strncmp(mode, "container:", 10) != 0;
}

static int
host_config(cJSON *hc, const struct ctr_spec *spec, const struct docker_settings *s,
    const char *network_mode, char **error)
{
	bool svc = spec->type == CTR_SERVICE, job = spec->type == CTR_BUILD ||
	    spec->type == CTR_HELPER;
	struct strv hosts = { 0 };
	cJSON *o;
	size_t i;
	int rc = -1;

	add_strv(hc, "Binds", spec->binds);
	for (i = 0; i < s->extra_hosts.n; i++)
		strv_push(&hosts, s->extra_hosts.v[i]);
	for (i = 0; spec->extra_hosts != NULL && i < spec->extra_hosts->n; i++)
		strv_push(&hosts, spec->extra_hosts->v[i]);
	add_strv(hc, "ExtraHosts", &hosts);
	strv_release(&hosts);
	add_str(hc, "NetworkMode", network_mode);
	cJSON_AddBoolToObject(hc, "Privileged", spec->privileged);
	if (spec->init)
		cJSON_AddBoolToObject(hc, "Init", true);
	if (spec->read_only)
		cJSON_AddBoolToObject(hc, "ReadonlyRootfs", true);
	o = cJSON_AddObjectToObject(hc, "RestartPolicy");
	cJSON_AddStringToObject(o, "Name", "no");
	if (s->log_options.n > 0) {
		for (i = 0; i < s->log_options.n; i++)
			if (strncmp(s->log_options.v[i], "env=", 4) != 0 &&
			    strncmp(s->log_options.v[i], "labels=", 7) != 0) {
				*error = xasprintf("runners.docker.log_options: \"%s\": only env and "
				    "labels may be set", s->log_options.v[i]);
				return -1;
			}
		o = cJSON_AddObjectToObject(hc, "LogConfig");
		cJSON_AddStringToObject(o, "Type", "json-file");
		if (add_map(o, "Config", &s->log_options, "runners.docker.log_options", error) != 0)
			return -1;
	}
	if (spec->type == CTR_WAIT || spec->type == CTR_CACHE_INIT)
		return 0;	/* a check or a copy: no limits, no devices */

	add_strv(hc, "Dns", &s->dns);
	add_strv(hc, "DnsSearch", &s->dns_search);
	add_str(hc, "Runtime", s->runtime);
	add_str(hc, "UsernsMode", s->userns_mode);
	if (svc) {
		if (add_ram(hc, "Memory", s->service_memory, "runners.docker.service_memory",
		    error) != 0 ||
		    add_ram(hc, "MemorySwap", s->service_memory_swap,
		    "runners.docker.service_memory_swap", error) != 0 ||
		    add_ram(hc, "MemoryReservation", s->service_memory_reservation,
		    "runners.docker.service_memory_reservation", error) != 0 ||
		    add_cpus(hc, s->service_cpus, "runners.docker.service_cpus", error) != 0 ||
		    add_devices(hc, &s->services_devices, "runners.docker.services_devices",
		    error) != 0 ||
		    add_map(hc, "Tmpfs", &s->services_tmpfs, "runners.docker.services_tmpfs",
		    error) != 0)
			goto out;
		add_str(hc, "CpusetCpus", s->service_cpuset_cpus);
		if (s->service_cpu_shares > 0)
			cJSON_AddNumberToObject(hc, "CpuShares", (double)s->service_cpu_shares);
		add_strv(hc, "SecurityOpt", &s->services_security_opt);
	} else if (job) {
		if (add_ram(hc, "Memory", s->memory, "runners.docker.memory", error) != 0 ||
		    add_ram(hc, "MemorySwap", s->memory_swap, "runners.docker.memory_swap",
		    error) != 0 ||
		    add_ram(hc, "MemoryReservation", s->memory_reservation,
		    "runners.docker.memory_reservation", error) != 0 ||
		    add_cpus(hc, s->cpus, "runners.docker.cpus", error) != 0 ||
		    add_devices(hc, &s->devices, "runners.docker.devices", error) != 0 ||
		    add_map(hc, "Tmpfs", &s->tmpfs, "runners.docker.tmpfs", error) != 0 ||
		    add_map(hc, "Sysctls", &s->sysctls, "runners.docker.sysctls", error) != 0 ||
		    add_ulimits(hc, &s->ulimit, error) != 0)
			goto out;
		add_str(hc, "CpusetCpus", s->cpuset_cpus);
		add_str(hc, "CpusetMems", s->cpuset_mems);
		if (s->cpu_shares > 0)
			cJSON_AddNumberToObject(hc, "CpuShares", (double)s->cpu_shares);
		add_str(hc, "CgroupParent", s->cgroup_parent);
		add_strv(hc, "CapAdd", &s->cap_add);
		add_strv(hc, "CapDrop", &s->cap_drop);
		add_strv(hc, "SecurityOpt", &s->security_opt);
		add_strv(hc, "DeviceCgroupRules", &s->device_cgroup_rules);
		add_strv(hc, "GroupAdd", &s->group_add);
		add_str(hc, "IpcMode", s->ipcmode);
		if (spec->type == CTR_BUILD)
			add_str(hc, "PidMode", s->pid_mode);
		if (s->oom_kill_disable)
			cJSON_AddBoolToObject(hc, "OomKillDisable", true);
		if (s->oom_score_adjust != 0)
			cJSON_AddNumberToObject(hc, "OomScoreAdj", (double)s->oom_score_adjust);
		add_strv(hc, "Links", &s->links);
		add_strv(hc, "VolumesFrom", &s->volumes_from);
		add_str(hc, "VolumeDriver", s->volume_driver);
		if (s->gpus != NULL && *s->gpus) {
			cJSON *a = cJSON_AddArrayToObject(hc, "DeviceRequests");
			cJSON *r = cJSON_CreateObject(), *caps = cJSON_CreateArray();
			cJSON *gpu = cJSON_CreateArray();

			cJSON_AddStringToObject(r, "Driver", "");
			if (strcmp(s->gpus, "all") == 0)
				cJSON_AddNumberToObject(r, "Count", -1);
			else {
				char *end;
				long n = strtol(s->gpus, &end, 10);

				if (*end != '\0' || n <= 0) {
					*error = xasprintf("runners.docker.gpus: \"%s\": only \"all\" "
					    "or a count is understood", s->gpus);
					cJSON_Delete(r);
					cJSON_Delete(caps);
					cJSON_Delete(gpu);
					goto out;
				}
				cJSON_AddNumberToObject(r, "Count", (double)n);
			}
			cJSON_AddItemToArray(gpu, cJSON_CreateString("gpu"));
			cJSON_AddItemToArray(caps, gpu);
			cJSON_AddItemToObject(r, "Capabilities", caps);
			cJSON_AddItemToArray(a, r);
		}
	}
	if (s->shm_size > 0)
		cJSON_AddNumberToObject(hc, "ShmSize", (double)s->shm_size);
	rc = 0;
out:
	return rc;
}

char *
docker_create_body(const struct ctr_spec *spec, const struct docker_settings *s,
    const char *api, char **error)
{
	const char *mode = spec->network_mode != NULL ? spec->network_mode : s->network_mode;
	bool new_api = api_at_least(api, 1, 44);
	bool mac = s->mac_address != NULL && *s->mac_address && spec->type == CTR_BUILD;
	cJSON *o, *labels, *hc, *ports;
	char *body;
	size_t i;

	*error = NULL;
	if (s->isolation != NULL && *s->isolation) {
		*error = xasprintf("runners.docker.isolation = \"%s\" is for Windows containers",
		    s->isolation);
		return NULL;
	}
	o = cJSON_CreateObject();
	add_str(o, "Image", spec->image);
	add_str(o, "Hostname", spec->hostname);
	add_str(o, "User", spec->user);
	add_strv(o, "Cmd", spec->cmd);
	if (spec->entrypoint != NULL) {
		cJSON *a = cJSON_AddArrayToObject(o, "Entrypoint");

		for (i = 0; i < spec->entrypoint->n; i++)
			cJSON_AddItemToArray(a, cJSON_CreateString(spec->entrypoint->v[i]));
	}
	add_strv(o, "Env", spec->env);
	labels = cJSON_AddObjectToObject(o, "Labels");
	for (i = 0; spec->labels != NULL && i < spec->labels->n; i++) {
		char *kv = xstrdup(spec->labels->v[i]), *eq = strchr(kv, '=');

		if (eq != NULL) {
			*eq = '\0';
			cJSON_DeleteItemFromObject(labels, kv);
			cJSON_AddStringToObject(labels, kv, eq + 1);
		}
		free(kv);
	}
	/* container_labels: raw and with gitlab-runner's prefix, as it adds them. */
	if (spec->type != CTR_WAIT)
		for (i = 0; i < s->container_labels.n; i++) {
			char *kv = xstrdup(s->container_labels.v[i]), *eq = strchr(kv, '=');
			char *prefixed;

			if (eq == NULL) {
				*error = xasprintf("runners.docker.container_labels: \"%s\" is not "
				    "key=value", s->container_labels.v[i]);
				free(kv);
				cJSON_Delete(o);
				return NULL;
			}
			*eq = '\0';
			prefixed = xasprintf(DOCKER_LABEL_PREFIX "%s", kv);
			if (cJSON_GetObjectItem(labels, prefixed) == NULL)
				cJSON_AddStringToObject(labels, prefixed, eq + 1);
			if (cJSON_GetObjectItem(labels, kv) == NULL)
				cJSON_AddStringToObject(labels, kv, eq + 1);
			free(prefixed);
			free(kv);
		}
	cJSON_AddBoolToObject(o, "Tty", false);
	if (spec->stdin_stage) {
		cJSON_AddBoolToObject(o, "AttachStdin", true);
		cJSON_AddBoolToObject(o, "AttachStdout", true);
		cJSON_AddBoolToObject(o, "AttachStderr", true);
		cJSON_AddBoolToObject(o, "OpenStdin", true);
		cJSON_AddBoolToObject(o, "StdinOnce", true);
	}
	if (spec->exposed_ports != NULL && spec->exposed_ports->n > 0) {
		ports = cJSON_AddObjectToObject(o, "ExposedPorts");
		for (i = 0; i < spec->exposed_ports->n; i++)
			cJSON_AddObjectToObject(ports, spec->exposed_ports->v[i]);
	}
	if (mac && !new_api)
		cJSON_AddStringToObject(o, "MacAddress", s->mac_address);
	hc = cJSON_AddObjectToObject(o, "HostConfig");
	if (host_config(hc, spec, s, mode, error) != 0) {
		cJSON_Delete(o);
		return NULL;
	}
	if ((user_defined_network(mode) && spec->aliases != NULL && spec->aliases->n > 0) ||
	    (mac && new_api)) {
		cJSON *nc = cJSON_AddObjectToObject(o, "NetworkingConfig");
		cJSON *eps = cJSON_AddObjectToObject(nc, "EndpointsConfig");
		cJSON *ep = cJSON_AddObjectToObject(eps, mode != NULL && *mode ? mode : "default");

		if (user_defined_network(mode))
			add_strv(ep, "Aliases", spec->aliases);
		if (mac && new_api)
			cJSON_AddStringToObject(ep, "MacAddress", s->mac_address);
	}
	body = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return body;
}

/* ---- the build container's shell ---- */

void
docker_detect_shell_cmd(struct strv *out, bool login)
{
	static const char *const shells[] = {
		"/usr/local/bin/bash", "/usr/bin/bash", "/bin/bash",
		"/usr/local/bin/sh", "/usr/bin/sh", "/bin/sh", "/busybox/sh",
	};
	const char *args = login ? " -l" : "";
	struct buf b;
	size_t i;

	buf_init(&b, BUF_UNLIMITED);
	for (i = 0; i < sizeof(shells) / sizeof(shells[0]); i++)
		buf_printf(&b, "%s [ -x %s ]; then\n\texec %s%s\n", i ? "elif" : "if", shells[i],
		    shells[i], args);
	buf_puts(&b, "else\n\techo shell not found\n\texit 1\nfi\n\n");
	strv_push(out, "sh");
	strv_push(out, "-c");
	strv_push_owned(out, buf_detach(&b, NULL));
}
