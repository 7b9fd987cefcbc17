/*
 * The pure parts of the docker executor (spec.h): names, labels, policies,
 * globs, sizes and the container create body, each as gitlab-runner 19.x
 * makes it (internal/labels, helpers/container/services, helpers/dns,
 * helpers/pull_policies, createContainerConfig/createHostConfig).
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
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
docker_network_name(const char *runner_short, int64_t project_id, int concurrent,
    int64_t job_id)
{
	char *raw = xasprintf("runner-%s-%lld-%d-%lld", runner_short != NULL ? runner_short : "",
	    (long long)project_id, concurrent, (long long)job_id);
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
 * A reference's tag: its ':' (after the last '/'), or NULL; *end is where
 * the name and tag end (the digest's '@', or the end of the string).
 */
static const char *
ref_tag(const char *name, const char **end)
{
	const char *at = strchr(name, '@'), *slash;

	*end = at != NULL ? at : name + strlen(name);
	slash = memrchr(name, '/', (size_t)(*end - name));
	return memrchr(slash != NULL ? slash : name, ':',
	    (size_t)(*end - (slash != NULL ? slash : name)));
}

/*
 * SplitNameAndVersion's Service: the image without tag or digest and
 * without the registry's port ("domain.tld:8080/ns/svc:1" ->
 * "domain.tld/ns/svc").
 */
static char *
service_path(const char *image)
{
	const char *slash, *end, *colon = ref_tag(image, &end);
	char *name, *port, *after;

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

void
docker_service_split(const char *image, char **service, char **version)
{
	const char *end, *colon = ref_tag(image, &end);

	*service = service_path(image);
	if (colon != NULL)
		*version = xmemdup(colon + 1, (size_t)(end - colon - 1));
	else if (strncmp(end, "@sha256:", 8) == 0 && strlen(end + 8) == 64)
		*version = xstrdup(end);
	else
		*version = xstrdup("latest");
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
	/* Image.Aliases(): strings.Fields once every ',' is a space. */
	while (p != NULL && *p) {
		p += strspn(p, ", \t\n\v\f\r");
		e = p + strcspn(p, ", \t\n\v\f\r");
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
go_list(struct buf *b, const char *const *v, size_t n)
{
	size_t i;

	buf_puts(b, "[");
	for (i = 0; i < n; i++)
		buf_printf(b, "%s%s", i ? " " : "", v[i]);
	buf_puts(b, "]");
}

/*
 * GetPullPolicies and GetAllowedPullPolicies: a config list, every entry
 * checked, or [always] when it is empty.
 */
static int
config_policies(const struct strv *list, const char *key, const char **out, size_t *n,
    char **error)
{
	enum pull_policy p;
	size_t i;

	*n = 0;
	if (list->n == 0) {
		out[(*n)++] = policy_names[PULL_ALWAYS];
		return 0;
	}
	for (i = 0; i < list->n && *n < 16; i++) {
		if (policy_parse(list->v[i], &p) != 0) {
			*error = xasprintf("unsupported %s config: \"%s\"", key, list->v[i]);
			return -1;
		}
		out[(*n)++] = list->v[i];
	}
	return 0;
}

int
docker_pull_policies(const struct strv *job, const struct docker_settings *s,
    enum pull_policy *out, size_t *n_out, char **error)
{
	const char *want[16], *allowed[16], *source;
	size_t n_want = 0, n_allowed = 0, i, k;
	struct buf b;

	*n_out = 0;
	if (job != NULL && job->n > 0) {
		/* The job's as GitLab sent them: one that is not allowed is left out. */
		for (i = 0; i < job->n && n_want < 16; i++)
			want[n_want++] = job->v[i];
		source = "GitLab pipeline config";
	} else {
		if (config_policies(&s->pull_policy, "pull_policy", want, &n_want, error) != 0)
			return -1;
		source = s->pull_policy.n > 0 ? "Runner config" : "Runner config (default)";
	}
	if (s->allowed_pull_policies.n > 0) {
		if (config_policies(&s->allowed_pull_policies, "allowed_pull_policies", allowed,
		    &n_allowed, error) != 0)
			return -1;
	} else if (config_policies(&s->pull_policy, "pull_policy", allowed, &n_allowed,
	    error) != 0)
		return -1;
	/* ComputeEffectivePullPolicies: the job's order, repeats kept. */
	for (i = 0; i < n_want; i++)
		for (k = 0; k < n_allowed; k++)
			if (strcmp(want[i], allowed[k]) == 0 &&
			    policy_parse(want[i], &out[*n_out]) == 0) {
				(*n_out)++;
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

/*
 * allowed_images and the other allowed_* lists are doublestar v4's Match:
 * '*' and '?' stop at '/'; "**" crosses it only as a whole path segment
 * (at the start or after a '/', and at the end or before one), elsewhere
 * it is a '*'; [class] (which may match '/'), {alt,ernatives}, '\'
 * escapes.  A malformed pattern (an open '[' or '{', an empty class, a
 * trailing '\') matches nothing.  Bytes, not runes: image names are ASCII.
 */
static bool
glob_valid(const char *p)
{
	int depth = 0;

	for (; *p; p++) {
		switch (*p) {
		case '\\':
			if (*++p == '\0')
				return false;
			break;
		case '[':
			p++;
			if (*p == '!' || *p == '^')
				p++;
			if (*p == '\0' || *p == ']')
				return false;
			for (; *p != ']'; p++)
				if (*p == '\0' || (*p == '\\' && *++p == '\0'))
					return false;
			break;
		case '{':
			depth++;
			break;
		case '}':
			if (depth > 0)	/* a lone '}' is itself */
				depth--;
			break;
		}
	}
	return depth == 0;
}

/* The class at *p against c, *p moved past it; -1 if it does not close. */
static int
glob_class(const char **p, char c)
{
	const char *q = *p + 1;
	bool neg = false, hit = false;
	char lo, hi;

	if (*q == '!' || *q == '^') {
		neg = true;
		q++;
	}
	if (*q == ']')
		return -1;
	while (*q != ']') {
		if (*q == '\\')
			q++;
		if (*q == '\0')
			return -1;
		lo = hi = *q++;
		if (*q == '-' && q[1] != ']' && q[1] != '\0') {
			if (*++q == '\\')
				q++;
			if (*q == '\0')
				return -1;
			hi = *q++;
		}
		if (lo <= c && c <= hi)
			hit = true;
	}
	*p = q + 1;
	return hit != neg;
}

/*
 * In the alternatives of a '{' (from p, just past it): the next ',' or the
 * closing '}' at their own depth, or NULL if it does not close.
 */
static const char *
glob_alt_next(const char *p)
{
	int depth = 0;

	for (; *p; p++) {
		if (*p == '\\') {
			if (*++p == '\0')
				break;
		} else if (*p == '{')
			depth++;
		else if (*p == '}' && depth-- == 0)
			return p;
		else if (*p == ',' && depth == 0)
			return p;
	}
	return NULL;
}

static bool	glob_at(const char *p, const char *s, bool seg);
static bool	glob_empty(const char *p, bool seg);

/* The '{' at p: each alternative in turn, followed by the rest of the pattern. */
static bool
glob_alts(const char *p, const char *s, bool seg)
{
	const char *a = p + 1, *e, *end = a;
	bool hit = false;
	char *one;

	/* Where the rest begins: past the '}' that closes this '{'. */
	while ((end = glob_alt_next(end)) != NULL && *end == ',')
		end++;
	if (end == NULL)
		return false;
	do {
		e = glob_alt_next(a);
		one = xasprintf("%.*s%s", (int)(e - a), a, end + 1);
		hit = *s == '\0' ? glob_empty(one, seg) : glob_at(one, s, seg);
		free(one);
		a = e + 1;
	} while (!hit && e != end);
	return hit;
}

/* Whether what is left of the pattern matches once the name is used up. */
static bool
glob_empty(const char *p, bool seg)
{
	static const char *const empty[] = { "", "*", "**", "/**", "**/", "/**/" };
	size_t i;

	if (*p == '{')
		return glob_alts(p, "", seg);
	for (i = 0; i < sizeof(empty) / sizeof(empty[0]); i++)
		if (strcmp(p, empty[i]) == 0)
			return true;
	return false;
}

static bool
glob_at(const char *p, const char *s, bool seg)
{
	int m;

	for (;;) {
		if (*s == '\0')
			return glob_empty(p, seg);
		switch (*p) {
		case '\0':
			return false;
		case '*':
			if (p[1] == '*' && seg && (p[2] == '\0' || p[2] == '/')) {
				if (p[2] == '\0')
					return true;
				/* "**" + "/": no segment, or some whole ones. */
				for (;;) {
					if (glob_at(p + 3, s, true))
						return true;
					if ((s = strchr(s, '/')) == NULL)
						return false;
					s++;
				}
			}
			while (*p == '*')
				p++;
			for (;; s++) {
				if (glob_at(p, s, false))
					return true;
				if (*s == '\0' || *s == '/')
					return false;
			}
		case '?':
			if (*s == '/')
				return false;
			p++;
			seg = false;
			break;
		case '[':
			if ((m = glob_class(&p, *s)) <= 0)
				return false;
			seg = false;
			break;
		case '{':
			return glob_alts(p, s, seg);
		case '\\':
			p++;
			/* FALLTHROUGH */
		default:
			if (*p != *s)
				return false;
			seg = *p++ == '/';
		}
		s++;
	}
}

bool
docker_glob_match(const char *pattern, const char *name)
{
	return glob_valid(pattern) && glob_at(pattern, name, true);
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

/*
 * As the Docker client's ImagePull sends it: fromImage the name alone
 * (reference.Name(): no tag, no digest), tag the digest if there is one,
 * else the tag, else "latest".
 */
void
docker_image_split(const char *name, char **repo, char **tag)
{
	const char *end, *colon = ref_tag(name, &end);

	*repo = xmemdup(name, (size_t)((colon != NULL ? colon : end) - name));
	if (*end == '@')
		*tag = xstrdup(end + 1);
	else if (colon != NULL)
		*tag = xstrdup(colon + 1);
	else
		*tag = xstrdup("latest");
}

/* ---- sizes ---- */

/* Whether s is a decimal number as Go's strconv.ParseFloat reads one. */
static bool
go_decimal(const char *s)
{
	bool digits = false;

	if (*s == '+' || *s == '-')
		s++;
	for (; isdigit((unsigned char)*s); s++)
		digits = true;
	if (*s == '.')
		for (s++; isdigit((unsigned char)*s); s++)
			digits = true;
	if (!digits)
		return false;
	if (*s == 'e' || *s == 'E') {
		if (*++s == '+' || *s == '-')
			s++;
		if (!isdigit((unsigned char)*s))
			return false;
		while (isdigit((unsigned char)*s))
			s++;
	}
	return *s == '\0';
}

/*
 * go-units' RAMInBytes (v0.5.0, gitlab-runner's): the number up to the last
 * digit, '.' or space (a space there is dropped), then nothing, "b", or one
 * of kmgtp (powers of 1024) with an optional "b" or "ib", in any case.
 */
int64_t
docker_ram_bytes(const char *s)
{
	static const char units[] = "kmgtp";
	const char *sep = NULL, *p, *u;
	double v, mult = 1;
	size_t n;
	char *num;
	bool ok;

	if (s == NULL)
		return -1;
	for (p = s; *p; p++)
		if (strchr("0123456789. ", *p) != NULL)
			sep = p;
	if (sep == NULL)
		return -1;
	num = xmemdup(s, (size_t)(sep - s) + (*sep != ' '));
	ok = go_decimal(num);
	v = ok ? strtod(num, NULL) : -1;
	free(num);
	if (!ok || v < 0)
		return -1;
	p = sep + 1;
	if ((n = strlen(p)) > 3)
		return -1;
	if (n > 0 && tolower((unsigned char)*p) == 'b') {
		if (n > 1)
			return -1;
	} else if (n > 0) {
		if ((u = strchr(units, tolower((unsigned char)*p))) == NULL)
			return -1;
		for (; u >= units; u--)
			mult *= 1024;
		if ((n == 2 && tolower((unsigned char)p[1]) != 'b') ||
		    (n == 3 && (tolower((unsigned char)p[1]) != 'i' ||
		    tolower((unsigned char)p[2]) != 'b')))
			return -1;
	}
	if (v * mult >= 9.2e18)
		return -1;
	return (int64_t)(v * mult);	/* int64(size): truncated */
}

/*
 * A decimal ("1.5", ".5", "2e-1") or a fraction of integers ("1/3") as
 * big.Rat reads it, times 1e9, truncated (GetNanoCPUs); -1 if it is not
 * one, is negative or does not fit.
 */
int64_t
docker_nano_cpus(const char *s)
{
	const char *p, *slash;
	uint64_t v = 0, a, b;
	size_t nd = 0, keep;
	long frac = 0, e = 0, k;
	bool point = false;
	char *end;

	if (s != NULL && *s == '+')
		s++;
	if (s == NULL || !(isdigit((unsigned char)*s) || *s == '.'))
		return -1;
	if ((slash = strchr(s, '/')) != NULL) {
		if (!isdigit((unsigned char)slash[1]))
			return -1;
		errno = 0;
		a = strtoull(s, &end, 10);
		if (end != slash || errno != 0 || a > (uint64_t)INT64_MAX / 1000000000)
			return -1;
		b = strtoull(slash + 1, &end, 10);
		if (*end != '\0' || errno != 0 || b == 0)
			return -1;
		return (int64_t)(a * 1000000000 / b);
	}
	if (!go_decimal(s))
		return -1;
	/* value = digits * 10^(e - frac); in nanos, * 10^(e - frac + 9). */
	for (p = s; isdigit((unsigned char)*p) || *p == '.'; p++)
		if (*p == '.')
			point = true;
		else {
			nd++;
			frac += point;
		}
	if (*p == 'e' || *p == 'E') {
		e = strtol(p + 1, NULL, 10);
		if (e > 10000)
			e = 10000;
		else if (e < -10000)
			e = -10000;
	}
	k = e - frac + 9;
	keep = k >= 0 ? nd : (size_t)-k >= nd ? 0 : nd - (size_t)-k;	/* truncated */
	for (p = s; keep > 0; p++) {
		if (*p == '.')
			continue;
		if (v > ((uint64_t)INT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
		keep--;
	}
	for (; k > 0 && v > 0; k--) {
		if (v > (uint64_t)INT64_MAX / 10)
			return -1;
		v *= 10;
	}
	return (int64_t)v;
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
		cJSON_DeleteItemFromObjectCaseSensitive(m, kv);
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

/* netip.ParseAddr: IPv4, or IPv6 with an optional %zone. */
static bool
ip_address(const char *a)
{
	unsigned char bin[16];
	const char *pct = strchr(a, '%');
	char *v6;
	bool ok;

	if (inet_pton(AF_INET, a, bin) == 1)
		return true;
	if (pct != NULL && pct[1] == '\0')
		return false;
	v6 = pct != NULL ? xmemdup(a, (size_t)(pct - a)) : xstrdup(a);
	ok = inet_pton(AF_INET6, v6, bin) == 1;
	free(v6);
	return ok;
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
	/* GetLogConfig: json-file always, whatever the daemon's default driver. */
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
	if (spec->type == CTR_WAIT || spec->type == CTR_CACHE_INIT)
		return 0;	/* a check or a copy: no limits, no devices */

	/* dnsServerAddrs: IP addresses only. */
	for (i = 0; i < s->dns.n; i++)
		if (!ip_address(s->dns.v[i])) {
			*error = xasprintf("runners.docker.dns: invalid DNS server address \"%s\"",
			    s->dns.v[i]);
			return -1;
		}
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
	/*
	 * mac_address on the build container only: gitlab-runner also gives it
	 * to the helper (and, from API 1.44, to every service, which runs beside
	 * the build on the same network); the bundle container, a helper on
	 * network "none", could not be created with one.  Below 1.44 it is the
	 * top-level MacAddress, as gitlab-runner before its moby API types did.
	 */
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
			cJSON_DeleteItemFromObjectCaseSensitive(labels, kv);
			cJSON_AddStringToObject(labels, kv, eq + 1);
		}
		free(kv);
	}
	/*
	 * container_labels as prepareContainerLabels adds them: over the others
	 * (never over this runner's own, which the sweep trusts), and on a
	 * service also with gitlab-runner's prefix (createServiceContainerConfig's
	 * backwards-compatible copy).  Not on a health check or a cache-init.
	 */
	if (spec->type != CTR_WAIT && spec->type != CTR_CACHE_INIT)
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
			if (strcmp(kv, RUNNER_LABEL_SYSTEM_ID) != 0 &&
			    strcmp(kv, RUNNER_LABEL_JOB_ID) != 0) {
				cJSON_DeleteItemFromObjectCaseSensitive(labels, kv);
				cJSON_AddStringToObject(labels, kv, eq + 1);
			}
			if (spec->type == CTR_SERVICE) {
				prefixed = xasprintf(DOCKER_LABEL_PREFIX "%s", kv);
				cJSON_DeleteItemFromObjectCaseSensitive(labels, prefixed);
				cJSON_AddStringToObject(labels, prefixed, eq + 1);
				free(prefixed);
			}
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

/* ---- networks ---- */

char *
docker_network_body(const char *name, const struct strv *labels, bool enable_ipv6,
    int64_t mtu)
{
	cJSON *o, *l;
	char *body, *kv, *eq;
	size_t i;

	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "Name", name);
	cJSON_AddBoolToObject(o, "CheckDuplicate", true);
	cJSON_AddBoolToObject(o, "EnableIPv6", enable_ipv6);
	l = cJSON_AddObjectToObject(o, "Labels");
	for (i = 0; labels != NULL && i < labels->n; i++) {
		kv = xstrdup(labels->v[i]);
		if ((eq = strchr(kv, '=')) != NULL) {
			*eq = '\0';
			cJSON_AddStringToObject(l, kv, eq + 1);
		}
		free(kv);
	}
	if (mtu > 0) {
		char v[32];

		snprintf(v, sizeof(v), "%lld", (long long)mtu);
		cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "Options"),
		    "com.docker.network.driver.mtu", v);
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
	const char *args = login ? "-l" : "";	/* in place of "$@": "exec /bin/sh \n" */
	struct buf b;
	size_t i;

	buf_init(&b, BUF_UNLIMITED);
	for (i = 0; i < sizeof(shells) / sizeof(shells[0]); i++)
		buf_printf(&b, "%s [ -x %s ]; then\n\texec %s %s\n", i ? "elif" : "if", shells[i],
		    shells[i], args);
	buf_puts(&b, "else\n\techo shell not found\n\texit 1\nfi\n\n");
	strv_push(out, "sh");
	strv_push(out, "-c");
	strv_push_owned(out, buf_detach(&b, NULL));
}
