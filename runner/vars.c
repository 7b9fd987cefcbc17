/*
 * A job's variables, build settings and directories (vars.h): the
 * behaviour of gitlab-runner's GetAllVariables, JobVariables.Expand,
 * BuildSettings and getCustomBuildDir, written for this runner.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "lib/duration.h"
#include "lib/strconv.h"
#include "lib/xmalloc.h"
#include "runner/config.h"
#include "runner/script.h"
#include "runner/vars.h"

/* A TLS file bigger than this is not a certificate chain. */
#define TLS_FILE_MAX	(1024 * 1024)

/*
 * The flags gitlab-runner exports, in its order.  config.c keeps the same
 * names with their defaults but does not export the list; the values come
 * from config_feature_flag(), so only the names live here.
 */
static const char *const ff_names[] = {
	"FF_NETWORK_PER_BUILD",
	"FF_USE_LEGACY_KUBERNETES_EXECUTION_STRATEGY",
	"FF_USE_DIRECT_DOWNLOAD",
	"FF_USE_FASTZIP",
	"FF_DISABLE_UMASK_FOR_DOCKER_EXECUTOR",
	"FF_ENABLE_BASH_EXIT_CODE_CHECK",
	"FF_USE_WINDOWS_LEGACY_PROCESS_STRATEGY",
	"FF_USE_LEGACY_BASH_EVAL",
	"FF_USE_POWERSHELL_PATH_RESOLVER",
	"FF_USE_DYNAMIC_TRACE_FORCE_SEND_INTERVAL",
	"FF_SCRIPT_SECTIONS",
	"FF_ENABLE_JOB_CLEANUP",
	"FF_KUBERNETES_HONOR_ENTRYPOINT",
	"FF_POSIXLY_CORRECT_ESCAPES",
	"FF_RESOLVE_FULL_TLS_CHAIN",
	"FF_DISABLE_POWERSHELL_STDIN",
	"FF_USE_POD_ACTIVE_DEADLINE_SECONDS",
	"FF_USE_ADVANCED_POD_SPEC_CONFIGURATION",
	"FF_SECRET_RESOLVING_FAILS_IF_MISSING",
	"FF_PRINT_POD_EVENTS",
	"FF_USE_GIT_BUNDLE_URIS",
	"FF_USE_GIT_NATIVE_CLONE",
	"FF_USE_DUMB_INIT_WITH_KUBERNETES_EXECUTOR",
	"FF_USE_INIT_WITH_DOCKER_EXECUTOR",
	"FF_LOG_IMAGES_CONFIGURED_FOR_JOB",
	"FF_USE_DOCKER_AUTOSCALER_DIAL_STDIO",
	"FF_CLEAN_UP_FAILED_CACHE_EXTRACT",
	"FF_USE_WINDOWS_JOB_OBJECT",
	"FF_TIMESTAMPS",
	"FF_DISABLE_AUTOMATIC_TOKEN_ROTATION",
	"FF_USE_LEGACY_GCS_CACHE_ADAPTER",
	"FF_DISABLE_UMASK_FOR_KUBERNETES_EXECUTOR",
	"FF_USE_LEGACY_S3_CACHE_ADAPTER",
	"FF_GIT_URLS_WITHOUT_TOKENS",
	"FF_WAIT_FOR_POD_TO_BE_REACHABLE",
	"FF_MASK_ALL_DEFAULT_TOKENS",
	"FF_EXPORT_HIGH_CARDINALITY_METRICS",
	"FF_USE_FLEETING_ACQUIRE_HEARTBEATS",
	"FF_USE_EXPONENTIAL_BACKOFF_STAGE_RETRY",
	"FF_USE_ADAPTIVE_REQUEST_CONCURRENCY",
	"FF_USE_GITALY_CORRELATION_ID",
	"FF_USE_GIT_PROACTIVE_AUTH",
	"FF_HASH_CACHE_KEYS",
	"FF_ENABLE_JOB_INPUTS_INTERPOLATION",
	"FF_USE_JOB_ROUTER",
	"FF_SCRIPT_TO_STEP_MIGRATION",
	"FF_USE_PARALLEL_CACHE_TRANSFER",
	"FF_USE_PARALLEL_ARTIFACT_TRANSFER",
	"FF_CONCRETE",
	"FF_SUSPENDABLE_ENVIRONMENTS",
	"FF_USE_NATIVE_CONTAINER_STOP",
};
#define N_FF	(sizeof(ff_names) / sizeof(ff_names[0]))

static void
push(struct job_vars *v, const char *key, const char *value, bool file,
    bool masked, bool raw)
{
	struct job_var *e;

	/* Doubling: 100,000 variables must not cost 100,000 copies of the list. */
	if (v->n == v->cap) {
		v->cap = v->cap < 64 ? 64 : v->cap * 2;
		v->v = xreallocarray(v->v, v->cap, sizeof(*v->v));
	}
	e = &v->v[v->n++];
	e->key = xstrdup(key);
	e->value = xstrdup(value != NULL ? value : "");
	e->file = file;
	e->masked = masked;
	e->raw = raw;
}

/* The flag's place in ff_names, or N_FF. */
static size_t
ff_index(const char *key)
{
	size_t i;

	if (strncmp(key, "FF_", 3) != 0)
		return N_FF;
	for (i = 0; i < N_FF; i++)
		if (strcmp(ff_names[i], key) == 0)
			return i;
	return N_FF;
}

/* The whole content of a small file, or NULL with errno set. */
static char *
read_small_file(const char *path)
{
	struct buf b;
	char chunk[4096];
	size_t n;
	FILE *f;
	int err;

	if ((f = fopen(path, "r")) == NULL)
		return NULL;
	buf_init(&b, TLS_FILE_MAX);
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		if (buf_append(&b, chunk, n) != 0) {
			fclose(f);
			buf_release(&b);
			errno = EFBIG;
			return NULL;
		}
	err = ferror(f) ? EIO : 0;
	fclose(f);
	if (err != 0) {
		buf_release(&b);
		errno = err;
		return NULL;
	}
	return buf_detach(&b, NULL);
}

static char *
read_tls(const char *key, const char *path, struct strv *warnings)
{
	char *s;

	if (path == NULL || *path == '\0')
		return NULL;
	if ((s = read_small_file(path)) == NULL) {
		strv_push_owned(warnings, xasprintf("%s: cannot read %s: %s", key,
		    path, strerror(errno)));
		return NULL;
	}
	if (*s == '\0') {
		free(s);
		return NULL;
	}
	return s;
}

/* Go's TLS variables: the CA chain alone, the client pair only together. */
static void
push_tls(struct job_vars *v, const struct job_vars_input *in)
{
	char *ca, *cert, *key;

	ca = read_tls("CI_SERVER_TLS_CA_FILE", in->tls_ca_file, &v->warnings);
	cert = read_tls("CI_SERVER_TLS_CERT_FILE", in->tls_cert_file, &v->warnings);
	key = read_tls("CI_SERVER_TLS_KEY_FILE", in->tls_key_file, &v->warnings);
	if (ca != NULL)
		push(v, "CI_SERVER_TLS_CA_FILE", ca, true, false, false);
	if (cert != NULL && key != NULL) {
		push(v, "CI_SERVER_TLS_CERT_FILE", cert, true, false, false);
		push(v, "CI_SERVER_TLS_KEY_FILE", key, true, false, false);
	}
	free(ca);
	free(cert);
	free(key);
}

/*
 * Go's path.Clean: one slash between parts, no "." parts, ".." takes the
 * part before it; at the root a ".." goes, at the head of a relative path
 * it stays.  Nothing left is "/" or ".".
 */
/*
 * The next part of a slash-separated path at *p (slashes skipped), its
 * length in *len; NULL at the end.  *p is left after the part.
 */
static const char *
path_part(const char **p, size_t *len)
{
	const char *part = *p, *end;

	while (*part == '/')
		part++;
	if (*part == '\0')
		return NULL;
	end = strchr(part, '/');
	*len = end != NULL ? (size_t)(end - part) : strlen(part);
	*p = part + *len;
	return part;
}

static char *
go_path_clean(const char *path)
{
	struct strv parts = { 0 };
	struct buf b;
	const char *p = path, *part;
	bool rooted = *path == '/';
	size_t len, kept = 0, i;	/* kept: leading ".." parts, never taken back */

	while ((part = path_part(&p, &len)) != NULL) {
		if (len == 1 && part[0] == '.')
			;
		else if (len == 2 && part[0] == '.' && part[1] == '.') {
			if (parts.n > kept) {
				free(parts.v[--parts.n]);
				parts.v[parts.n] = NULL;
			} else if (!rooted) {
				strv_push(&parts, "..");
				kept++;
			}
		} else
			strv_push_owned(&parts, xmemdup(part, len));
	}
	buf_init(&b, BUF_UNLIMITED);
	if (rooted)
		buf_putc(&b, '/');
	for (i = 0; i < parts.n; i++) {
		if (i > 0)
			buf_putc(&b, '/');
		buf_puts(&b, parts.v[i]);
	}
	if (b.len == 0)
		buf_putc(&b, '.');
	strv_release(&parts);
	return buf_detach(&b, NULL);
}

/* Go's path.Join(dir, name): empty elements are skipped; none left is "". */
static char *
go_path_join(const char *dir, const char *name)
{
	char *joined, *out;

	if (*dir == '\0' && *name == '\0')
		return xstrdup("");
	if (*dir == '\0' || *name == '\0')
		return go_path_clean(*dir != '\0' ? dir : name);
	joined = xasprintf("%s/%s", dir, name);
	out = go_path_clean(joined);
	free(joined);
	return out;
}

static bool
is_special(char c)
{
	return strchr("*#$@!?-0123456789", c) != NULL && c != '\0';
}

static bool
is_alnum(char c)
{
	return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
	    (c >= 'A' && c <= 'Z');
}

/*
 * The name after a '$' (s holds at least one byte) and how many bytes it
 * takes, as Go's os.Expand: "${}" and an unclosed "${" take bytes and no
 * name (they are eaten); a byte that starts no name takes none (the '$'
 * stays as it is).
 */
static size_t
shell_name(const char *s, size_t len, const char **name, size_t *nlen)
{
	size_t i;

	*name = s;
	*nlen = 0;
	if (s[0] == '{') {
		if (len > 2 && is_special(s[1]) && s[2] == '}') {
			*name = s + 1;
			*nlen = 1;
			return 3;
		}
		for (i = 1; i < len; i++)
			if (s[i] == '}') {
				if (i == 1)
					return 2;
				*name = s + 1;
				*nlen = i - 1;
				return i + 1;
			}
		return 1;
	}
	if (is_special(s[0])) {
		*nlen = 1;
		return 1;
	}
	for (i = 0; i < len && is_alnum(s[i]); i++)
		;
	*nlen = i;
	return i;
}

/*
 * What a reference is resolved against: the variables with these values
 * (the unexpanded ones while expanding, the final ones after), and the
 * directory a file variable's path is in.
 */
struct source {
	const struct job_var	*vars;
	char *const		*values;
	size_t			 n;
	const char		*tmp_dir;	/* RUNNER_TEMP_PROJECT_DIR's value */
};

static struct source
source_of(const struct job_var *vars, char *const *values, size_t n)
{
	struct source src = { vars, values, n, "" };
	size_t i;

	for (i = n; i > 0; i--)
		if (strcmp(vars[i - 1].key, "RUNNER_TEMP_PROJECT_DIR") == 0) {
			src.tmp_dir = values[i - 1];
			break;
		}
	return src;
}

/*
 * JobVariables.Get, appended to b: the last of a name wins, and a file
 * variable stands for its file's path (path.Join(RUNNER_TEMP_PROJECT_DIR,
 * key), where script.c writes it), never for its content.
 */
static void
lookup(struct buf *b, const struct source *src, const char *name, size_t nlen)
{
	const struct job_var *v;
	char *path;
	size_t i;

	if (nlen == 1 && name[0] == '$') {
		buf_putc(b, '$');
		return;
	}
	if (nlen == 1 && strchr("*#@!?0123456789", name[0]) != NULL)
		return;
	for (i = src->n; i > 0; i--) {
		v = &src->vars[i - 1];
		if (strlen(v->key) != nlen || memcmp(v->key, name, nlen) != 0)
			continue;
		if (!v->file) {
			buf_puts(b, src->values[i - 1]);
			return;
		}
		path = go_path_join(src->tmp_dir, v->key);
		buf_puts(b, path);
		free(path);
		return;
	}
}

/* Go's os.Expand(s, src.Get). */
static char *
expand(const char *s, const struct source *src)
{
	struct buf b;
	const char *name;
	size_t i = 0, j, len = strlen(s), nlen, w;

	buf_init(&b, BUF_UNLIMITED);
	for (j = 0; j < len; j++) {
		if (s[j] != '$' || j + 1 >= len)
			continue;
		buf_append(&b, s + i, j - i);
		w = shell_name(s + j + 1, len - j - 1, &name, &nlen);
		if (nlen > 0)
			lookup(&b, src, name, nlen);
		else if (w == 0)
			buf_putc(&b, '$');	/* no name follows: not a reference */
		j += w;
		i = j + 1;
	}
	buf_append(&b, s + i, len - i);
	return buf_detach(&b, NULL);
}

bool
job_vars_feature_flag(const struct job_vars *v, const char *name)
{
	size_t i;

	/* The resolved flags come first; a job's own FF_ variable comes later. */
	for (i = 0; i < v->n && i < N_FF; i++)
		if (strcmp(v->v[i].key, name) == 0)
			return strcmp(v->v[i].value, "true") == 0;
	return false;
}

/* The values of v as they are now, borrowed; the array is the caller's. */
static char **
values_of(const struct job_vars *v)
{
	char **values = xcalloc(v->n + 1, sizeof(*values));
	size_t i;

	for (i = 0; i < v->n; i++)
		values[i] = v->v[i].value;
	return values;
}

char *
job_vars_expand(const struct job_vars *v, const char *s)
{
	char **values = values_of(v);
	struct source src = source_of(v->v, values, v->n);
	char *out = expand(s, &src);

	free(values);
	return out;
}

/* One pass: every value is expanded against the others as they were. */
static void
expand_all(struct job_vars *v)
{
	char **values = values_of(v);
	struct source src = source_of(v->v, values, v->n);
	size_t i;

	for (i = 0; i < v->n; i++)
		if (!v->v[i].raw)
			v->v[i].value = expand(values[i], &src);
	for (i = 0; i < v->n; i++)
		if (!v->v[i].raw)
			free(values[i]);
	free(values);
}

/*
 * gitlab-runner's populateFeatureFlags, on v as built (the defaults at
 * v[0, N_FF), then the runner's environment, the job's variables and the
 * rest): a flag set in config.toml wins; else the last value of its name,
 * expanded as every value is, if it parses as a bool; else the default,
 * with a warning.  The resolved values replace the defaults, and the job's
 * own FF_ variables, in v[job_first, job_end), go: the flag block is what
 * the job sees (GetAllVariables' getNonFeatureFlagJobVariables).  One set
 * in [[runners]] environment stays where it is, as in gitlab-runner.
 */
static void
resolve_flags(struct job_vars *v, const struct runner_config *rc,
    size_t job_first, size_t job_end)
{
	size_t last[N_FF], i, k, f;
	bool resolved[N_FF];
	char **values;
	struct source src;
	char *raw;
	bool val;

	for (f = 0; f < N_FF; f++)
		last[f] = f;
	for (i = N_FF; i < v->n; i++)
		if ((f = ff_index(v->v[i].key)) < N_FF)
			last[f] = i;

	values = values_of(v);
	src = source_of(v->v, values, v->n);
	for (f = 0; f < N_FF; f++) {
		if (rc != NULL && config_flag_set(rc, ff_names[f], &val))
			;
		else {
			k = last[f];
			raw = v->v[k].raw ? xstrdup(values[k]) : expand(values[k], &src);
			if (strconv_parse_bool(raw, &val) != 0) {
				strv_push_owned(&v->warnings, xasprintf("%s: could not parse "
				    "feature flag, expected bool, got %s", ff_names[f], raw));
				val = strcmp(values[f], "true") == 0;
			}
			free(raw);
		}
		resolved[f] = val;
	}
	free(values);
	for (f = 0; f < N_FF; f++) {
		free(v->v[f].value);
		v->v[f].value = xstrdup(resolved[f] ? "true" : "false");
	}

	for (i = k = job_first; i < v->n; i++) {
		if (i < job_end && ff_index(v->v[i].key) < N_FF) {
			free(v->v[i].key);
			free(v->v[i].value);
			continue;
		}
		v->v[k++] = v->v[i];
	}
	v->n = k;
}

static int64_t
job_timeout(const struct api_job *job, int64_t given)
{
	if (given > 0)
		return given;
	if (job->runner_info.timeout > 0)
		return job->runner_info.timeout;
	return JOB_DEFAULT_TIMEOUT_S;
}

void
job_vars_build(struct job_vars *v, const struct api_job *job,
    const struct job_vars_input *in)
{
	const struct strv *env = in->environment;
	struct runner_config none;
	char num[32], *kv, *eq;
	size_t i, job_first, job_end;

	memset(v, 0, sizeof(*v));
	memset(&none, 0, sizeof(none));

	/* The defaults first; resolve_flags() puts the resolved values here. */
	for (i = 0; i < N_FF; i++)
		push(v, ff_names[i], config_feature_flag(&none, ff_names[i]) ?
		    "true" : "false", false, false, false);

	if (job->image.present && job->image.name != NULL && *job->image.name != '\0')
		push(v, "CI_JOB_IMAGE", job->image.name, false, false, false);

	push(v, "CI_RUNNER_SHORT_TOKEN", in->short_token, false, false, false);
	for (i = 0; env != NULL && i < env->n; i++) {
		/* Go's ParseVariable: an entry without '=' is skipped. */
		if ((eq = strchr(env->v[i], '=')) == NULL)
			continue;
		kv = xmemdup(env->v[i], (size_t)(eq - env->v[i]));
		push(v, kv, eq + 1, false, false, false);
		free(kv);
	}

	push(v, "CI_BUILDS_DIR", in->builds_dir, false, false, false);
	push(v, "CI_PROJECT_DIR", in->project_dir, false, false, false);
	snprintf(num, sizeof(num), "%d", in->concurrent_id);
	push(v, "CI_CONCURRENT_ID", num, false, false, false);
	snprintf(num, sizeof(num), "%d", in->concurrent_project_id);
	push(v, "CI_CONCURRENT_PROJECT_ID", num, false, false, false);
	push(v, "CI_SERVER", "yes", false, false, false);
	push(v, "CI_JOB_STATUS", "running", false, false, false);
	snprintf(num, sizeof(num), "%lld", (long long)job_timeout(job, in->job_timeout));
	push(v, "CI_JOB_TIMEOUT", num, false, false, false);

	push_tls(v, in);

	job_first = v->n;
	for (i = 0; i < job->n_variables; i++) {
		const struct api_variable *pv = &job->variables[i];

		if (pv->key == NULL || *pv->key == '\0')
			continue;
		push(v, pv->key, pv->value, pv->file, pv->masked, pv->raw);
	}
	job_end = v->n;

	push(v, in->shared_env ? "CI_SHARED_ENVIRONMENT" : "CI_DISPOSABLE_ENVIRONMENT",
	    "true", false, false, false);
	push(v, "CI_RUNNER_VERSION", in->version, false, false, false);
	push(v, "CI_RUNNER_REVISION", in->revision, false, false, false);
	push(v, "CI_RUNNER_EXECUTABLE_ARCH", in->arch, false, false, false);
	push(v, "RUNNER_TEMP_PROJECT_DIR", in->tmp_dir, false, false, false);

	resolve_flags(v, in->rc, job_first, job_end);
	expand_all(v);
}

void
job_vars_release(struct job_vars *v)
{
	size_t i;

	for (i = 0; i < v->n; i++) {
		free(v->v[i].key);
		free(v->v[i].value);
	}
	free(v->v);
	strv_release(&v->warnings);
	memset(v, 0, sizeof(*v));
}

const char *
job_vars_get(const struct job_vars *v, const char *key)
{
	size_t i;

	for (i = v->n; i > 0; i--)
		if (strcmp(v->v[i - 1].key, key) == 0)
			return v->v[i - 1].value;
	return NULL;
}

size_t
job_vars_script(const struct job_vars *v, struct script_var **out)
{
	struct script_var *sv;
	size_t i;

	sv = xcalloc(v->n + 1, sizeof(*sv));
	for (i = 0; i < v->n; i++) {
		sv[i].key = v->v[i].key;
		sv[i].value = v->v[i].value;
		sv[i].file = v->v[i].file;
	}
	*out = sv;
	return v->n;
}

void
job_vars_masked(const struct job_vars *v, struct strv *out)
{
	size_t i;

	/* An empty phrase would mask nothing and match everywhere. */
	for (i = 0; i < v->n; i++)
		if (v->v[i].masked && *v->v[i].value != '\0')
			strv_push(out, v->v[i].value);
}

/* ---- Build settings. ---- */

static const char *
value_of(const struct job_vars *v, const char *key)
{
	const char *s = job_vars_get(v, key);

	return s != NULL ? s : "";
}

static bool
setting_bool(const struct job_vars *v, const char *key, bool def,
    struct strv *warnings)
{
	const char *raw = value_of(v, key);
	bool val;

	if (*raw == '\0')
		return def;
	if (strconv_parse_bool(raw, &val) == 0)
		return val;
	strv_push_owned(warnings, xasprintf("%s: expected bool got \"%s\", using "
	    "default value: %s", key, raw, def ? "true" : "false"));
	return def;
}

static int64_t
setting_int(const struct job_vars *v, const char *key, int64_t def,
    struct strv *warnings)
{
	const char *raw = value_of(v, key);
	int64_t val;

	if (*raw == '\0')
		return def;
	if (strconv_parse_int(raw, &val) == 0)
		return val;
	strv_push_owned(warnings, xasprintf("%s: expected int got \"%s\", using "
	    "default value: %lld", key, raw, (long long)def));
	return def;
}

static int
setting_attempts(const struct job_vars *v, const char *key, struct strv *warnings)
{
	int64_t n = setting_int(v, key, 1, warnings);

	if (n >= 1 && n <= 10)
		return (int)n;
	strv_push_owned(warnings, xasprintf("%s: number of attempts out of the "
	    "range [1, 10], using %d", key, n < 1 ? 1 : 10));
	return n < 1 ? 1 : 10;
}

static char *
setting_str(const struct job_vars *v, const char *key, const char *def)
{
	const char *raw = value_of(v, key);

	return xstrdup(*raw != '\0' ? raw : def);
}

/*
 * A Go duration bounding a script.  Malformed or negative: ignored, def
 * stays.  Longer than the job: the job timeout.
 */
static int64_t
setting_timeout(const struct job_vars *v, const char *key, int64_t def,
    int64_t job_timeout_s, struct strv *warnings)
{
	const char *raw = value_of(v, key);
	int64_t ns, max = job_timeout_s * 1000000000LL;
	char have[64], limit[64];

	if (*raw == '\0')
		return def;
	if (duration_parse(raw, &ns) != 0 || ns < 0) {
		strv_push_owned(warnings, xasprintf("%s: invalid duration \"%s\", "
		    "ignored", key, raw));
		return def;
	}
	if (max > 0 && ns > max) {
		duration_format(ns, have, sizeof(have));
		duration_format(max, limit, sizeof(limit));
		strv_push_owned(warnings, xasprintf("%s: %s is longer than the job "
		    "timeout, using %s", key, have, limit));
		return max;
	}
	return ns;
}

void
build_settings_parse(struct build_settings *s, const struct job_vars *v,
    const struct api_job *job, const struct runner_config *rc,
    int64_t job_timeout_s)
{
	const char *raw, *def;
	struct strv *w = &s->warnings;

	memset(s, 0, sizeof(*s));

	def = job->allow_git_fetch ? "fetch" : "clone";
	raw = value_of(v, "GIT_STRATEGY");
	if (strcmp(raw, "fetch") == 0)
		s->git_strategy = "fetch";
	else if (strcmp(raw, "clone") == 0)
		s->git_strategy = "clone";
	else if (strcmp(raw, "none") == 0)
		s->git_strategy = "none";
	else if (strcmp(raw, "empty") == 0)
		s->git_strategy = "empty";
	else {
		s->git_strategy = def;
		if (*raw != '\0')
			strv_push_owned(w, xasprintf("GIT_STRATEGY: expected either "
			    "'clone', 'fetch', 'none' or 'empty' got \"%s\", using "
			    "default value '%s'", raw, def));
	}

	s->git_checkout = setting_bool(v, "GIT_CHECKOUT", true, w);
	s->git_depth = setting_int(v, "GIT_DEPTH", job->git_info.depth, w);
	if (s->git_depth < 0) {
		strv_push_owned(w, xasprintf("GIT_DEPTH: negative depth %lld, "
		    "fetching the full history", (long long)s->git_depth));
		s->git_depth = 0;
	}
	s->git_clean_flags = setting_str(v, "GIT_CLEAN_FLAGS", "-ffdx");
	s->git_fetch_flags = setting_str(v, "GIT_FETCH_EXTRA_FLAGS", "--prune --quiet");
	s->git_clone_flags = setting_str(v, "GIT_CLONE_EXTRA_FLAGS", "");

	raw = value_of(v, "GIT_SUBMODULE_STRATEGY");
	if (*raw == '\0' || strcmp(raw, "none") == 0)
		s->submodule_strategy = "none";
	else if (strcmp(raw, "normal") == 0)
		s->submodule_strategy = "normal";
	else if (strcmp(raw, "recursive") == 0)
		s->submodule_strategy = "recursive";
	else {
		/* gitlab-runner fails get_sources on it; fail before starting. */
		s->submodule_strategy = "none";
		strv_push_owned(w, xasprintf("GIT_SUBMODULE_STRATEGY: expected "
		    "either 'normal', 'recursive' or 'none' got \"%s\"", raw));
		s->error = xstrdup("unknown GIT_SUBMODULE_STRATEGY");
	}
	s->submodule_paths = setting_str(v, "GIT_SUBMODULE_PATHS", "");
	s->submodule_depth = setting_int(v, "GIT_SUBMODULE_DEPTH",
	    job->git_info.depth, w);
	s->submodule_update_flags = setting_str(v, "GIT_SUBMODULE_UPDATE_FLAGS", "");
	s->submodule_force_https = setting_bool(v, "GIT_SUBMODULE_FORCE_HTTPS", false, w);
	s->lfs_skip_smudge = setting_bool(v, "GIT_LFS_SKIP_SMUDGE", false, w);
	s->clone_path = setting_str(v, "GIT_CLONE_PATH", "");

	s->get_sources_attempts = setting_attempts(v, "GET_SOURCES_ATTEMPTS", w);
	s->artifact_download_attempts = setting_attempts(v,
	    "ARTIFACT_DOWNLOAD_ATTEMPTS", w);
	s->restore_cache_attempts = setting_attempts(v, "RESTORE_CACHE_ATTEMPTS", w);
	s->executor_job_section_attempts = setting_attempts(v,
	    "EXECUTOR_JOB_SECTION_ATTEMPTS", w);

	s->after_script_ignore_errors = setting_bool(v,
	    "AFTER_SCRIPT_IGNORE_ERRORS", true, w);
	s->cache_request_timeout = setting_int(v, "CACHE_REQUEST_TIMEOUT", 10, w);

	s->debug_trace = setting_bool(v, "CI_DEBUG_TRACE", false, w);
	s->debug_services = setting_bool(v, "CI_DEBUG_SERVICES", false, w);
	if (rc != NULL && rc->debug_trace_disabled) {
		if (s->debug_trace)
			strv_push(w, "CI_DEBUG_TRACE: usage is disabled on this Runner");
		if (s->debug_services)
			strv_push(w, "CI_DEBUG_SERVICES: usage is disabled on this Runner");
		s->debug_trace = s->debug_services = false;
	}

	if (job_timeout_s <= 0)
		job_timeout_s = job_timeout(job, 0);
	s->script_timeout_ns = setting_timeout(v, "RUNNER_SCRIPT_TIMEOUT", 0,
	    job_timeout_s, w);
	s->after_script_timeout_ns = setting_timeout(v,
	    "RUNNER_AFTER_SCRIPT_TIMEOUT", JOB_AFTER_SCRIPT_TIMEOUT_NS,
	    job_timeout_s, w);
}

void
build_settings_release(struct build_settings *s)
{
	free(s->git_clean_flags);
	free(s->git_fetch_flags);
	free(s->git_clone_flags);
	free(s->submodule_paths);
	free(s->submodule_update_flags);
	free(s->clone_path);
	free(s->error);
	strv_release(&s->warnings);
	memset(s, 0, sizeof(*s));
}

/* ---- Directories. ---- */

/* Is path (clean) root itself or below it (clean)? */
static bool
is_under(const char *path, const char *root)
{
	size_t n = strlen(root);

	if (strcmp(root, "/") == 0)
		return true;
	return strncmp(path, root, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

char *
job_project_path(const char *full, int64_t project_id)
{
	struct buf b;
	const char *p = full != NULL ? full : "", *part;
	size_t len;
	bool refused = false;

	buf_init(&b, BUF_UNLIMITED);
	while ((part = path_part(&p, &len)) != NULL) {
		if (len == 2 && part[0] == '.' && part[1] == '.') {
			refused = true;
			break;
		}
		if (!(len == 1 && part[0] == '.')) {
			if (b.len > 0)
				buf_putc(&b, '/');
			buf_append(&b, part, len);
		}
	}
	if (refused || b.len == 0) {
		buf_release(&b);
		if (project_id > 0)
			return xasprintf("project-%lld", (long long)project_id);
		return xstrdup("project");
	}
	return buf_detach(&b, NULL);
}

int
job_dirs_compute(struct job_dirs *d, const struct job_dirs_input *in,
    char **error)
{
	char *root, *dir, *proj;

	memset(d, 0, sizeof(*d));
	*error = NULL;
	root = go_path_clean(in->builds_dir != NULL ? in->builds_dir : "/");

	if (in->clone_path != NULL && *in->clone_path != '\0') {
		if (!in->custom_build_dir) {
			*error = xstrdup("setting GIT_CLONE_PATH is not allowed, "
			    "enable `custom_build_dir` feature");
			free(root);
			return -1;
		}
		if (in->clone_path[0] != '/') {
			*error = xasprintf("the GIT_CLONE_PATH=\"%s\" has to be an "
			    "absolute path within \"%s\"", in->clone_path, root);
			free(root);
			return -1;
		}
		dir = go_path_clean(in->clone_path);
		if (!is_under(dir, root)) {
			*error = xasprintf("the GIT_CLONE_PATH=\"%s\" has to be "
			    "within \"%s\"", in->clone_path, root);
			free(dir);
			free(root);
			return -1;
		}
	} else {
		proj = job_project_path(in->project_full_path, in->project_id);
		const char *empty = in->git_strategy != NULL &&
		    strcmp(in->git_strategy, "empty") == 0 ? "-empty" : "";
		const char *sep = strcmp(root, "/") == 0 ? "" : "/";

		if (in->disposable)
			dir = xasprintf("%s%s%s%s", root, sep, proj, empty);
		else
			dir = xasprintf("%s%s%s/%d/%s%s", root, sep,
			    in->short_token != NULL ? in->short_token : "",
			    in->concurrent_project_id, proj, empty);
		free(proj);
	}
	free(root);
	d->project_dir = dir;
	d->tmp_dir = xasprintf("%s.tmp", dir);
	return 0;
}

void
job_dirs_release(struct job_dirs *d)
{
	free(d->project_dir);
	free(d->tmp_dir);
	memset(d, 0, sizeof(*d));
}

int
job_concurrent_project_id(const int *in_use, size_t n)
{
	size_t i;
	int id;

	/* At most n ids are taken, so one of 0..n is free. */
	for (id = 0;; id++) {
		for (i = 0; i < n; i++)
			if (in_use[i] == id)
				break;
		if (i == n)
			return id;
	}
}

/* ---- All of it. ---- */

static void
append_all(struct strv *to, const struct strv *from)
{
	size_t i;

	for (i = 0; i < from->n; i++)
		strv_push(to, from->v[i]);
}

int
job_prepare(struct job_prep *p, const struct api_job *job,
    const struct job_vars_input *in, char **error)
{
	struct job_vars_input pass = *in;
	struct job_dirs_input di;
	struct build_settings first;
	const struct runner_config *rc = in->rc;
	int64_t timeout = job_timeout(job, in->job_timeout);

	memset(p, 0, sizeof(*p));
	*error = NULL;

	/*
	 * First pass as gitlab-runner's StartBuild: no project dir yet, so
	 * GIT_CLONE_PATH can only lean on CI_BUILDS_DIR and the like.
	 */
	pass.project_dir = "";
	pass.tmp_dir = "";
	job_vars_build(&p->vars, job, &pass);
	build_settings_parse(&first, &p->vars, job, rc, timeout);

	memset(&di, 0, sizeof(di));
	di.builds_dir = in->builds_dir;
	di.short_token = in->short_token;
	di.concurrent_project_id = in->concurrent_project_id;
	di.project_full_path = job->job_info.project_full_path;
	di.project_id = job->job_info.project_id;
	di.git_strategy = first.git_strategy;
	di.clone_path = first.clone_path;
	/* Enabled by default where the builds directory is the job's own (docker). */
	di.custom_build_dir = rc != NULL && (rc->custom_build_dir_enabled == 1 ||
	    (rc->custom_build_dir_enabled == -1 && !in->shared_env));
	di.disposable = !in->shared_env;
	if (job_dirs_compute(&p->dirs, &di, error) != 0) {
		p->dirs.project_dir = xstrdup("");
		p->dirs.tmp_dir = xstrdup("");
	}
	build_settings_release(&first);
	job_vars_release(&p->vars);

	pass.project_dir = p->dirs.project_dir;
	pass.tmp_dir = p->dirs.tmp_dir;
	job_vars_build(&p->vars, job, &pass);
	build_settings_parse(&p->settings, &p->vars, job, rc, timeout);

	append_all(&p->warnings, &p->vars.warnings);
	append_all(&p->warnings, &p->settings.warnings);
	if (*error == NULL && p->settings.error != NULL)
		*error = xstrdup(p->settings.error);
	return *error != NULL ? -1 : 0;
}

void
job_prep_release(struct job_prep *p)
{
	job_vars_release(&p->vars);
	build_settings_release(&p->settings);
	job_dirs_release(&p->dirs);
	strv_release(&p->warnings);
}
