/*
 * The GitLab API's JSON, both ways, with cJSON.  Builders produce exactly
 * the bodies gitlab-runner sends (protocol.md 2.2-2.4, 4.2, 5.1), leaving
 * out what its encoder leaves out, because Rails treats an empty value
 * differently from an absent one.  Parsers take untrusted answers apart
 * into the owned structs of api.h: every member is type-checked and the
 * first mismatch is reported with its path, since a 201 job payload that
 * cannot be decoded is a job lost on the server, and the one log line
 * about it has to say precisely what was wrong.  Unknown members are
 * ignored (GitLab adds fields over time) and null counts as absent, as in
 * gitlab-runner's decoder.
 */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cJSON.h>

#include "api/json.h"
#include "lib/buf.h"
#include "lib/log.h"
#include "lib/strv.h"
#include "lib/xmalloc.h"

#define nitems(a)	(sizeof(a) / sizeof((a)[0]))

/* Longest member name quoted in an error path; names come from the server. */
#define JSON_PATH_KEY_MAX	64
/* A flattened server error is for one log line. */
#define JSON_ERROR_MESSAGE_MAX	1024

/* ---- Building. ---- */

/* Every key of info.features, always sent (protocol.md 4.2). */
#define FEATURE(f)	{ #f, offsetof(struct api_features, f) }
static const struct {
	const char	*name;
	size_t		 off;
} json_features[] = {
	FEATURE(variables), FEATURE(image), FEATURE(services),
	FEATURE(artifacts), FEATURE(cache), FEATURE(fallback_cache_keys),
	FEATURE(shared), FEATURE(upload_multiple_artifacts),
	FEATURE(upload_raw_artifacts), FEATURE(session), FEATURE(terminal),
	FEATURE(refspecs), FEATURE(masking), FEATURE(proxy),
	FEATURE(raw_variables), FEATURE(artifacts_exclude),
	FEATURE(multi_build_steps), FEATURE(trace_reset),
	FEATURE(trace_checksum), FEATURE(trace_size), FEATURE(vault_secrets),
	FEATURE(cancelable), FEATURE(return_exit_code),
	FEATURE(service_variables), FEATURE(service_multiple_aliases),
	FEATURE(image_executor_opts), FEATURE(service_executor_opts),
	FEATURE(cancel_gracefully), FEATURE(native_steps_integration),
	FEATURE(two_phase_job_commit), FEATURE(job_inputs),
};
#undef FEATURE

/* A feature added to api.h but not here would silently never be sent. */
_Static_assert(nitems(json_features) * sizeof(bool) ==
    sizeof(struct api_features), "json_features must list every feature");

/* cJSON reports exhaustion with NULL; the policy of xmalloc.h is to stop. */
static _Noreturn void
json_oom(void)
{
	fprintf(stderr, "runner: out of memory building JSON\n");
	abort();
}

static void *
json_nn(void *p)
{
	if (p == NULL)
		json_oom();
	return p;
}

static bool
json_empty(const char *s)
{
	return s == NULL || *s == '\0';
}

/* Go's `omitempty` on a string. */
static void
json_add_str(cJSON *o, const char *name, const char *s)
{
	if (!json_empty(s))
		json_nn(cJSON_AddStringToObject(o, name, s));
}

static void
json_add_bool(cJSON *o, const char *name, bool v)
{
	json_nn(cJSON_AddBoolToObject(o, name, v));
}

/*
 * cJSON would store the number as a double and print it back in %g style,
 * which loses int64 precision past 2^53: print the digits ourselves.
 */
static void
json_add_int(cJSON *o, const char *name, int64_t v)
{
	char	n[32];

	snprintf(n, sizeof n, "%" PRId64, v);
	json_nn(cJSON_AddRawToObject(o, name, n));
}

static void
json_add_uint(cJSON *o, const char *name, uint64_t v)
{
	char	n[32];

	snprintf(n, sizeof n, "%" PRIu64, v);
	json_nn(cJSON_AddRawToObject(o, name, n));
}

/* cJSON's text comes from cJSON's allocator; callers free() ours. */
static char *
json_print(const cJSON *item)
{
	char	*s, *out;

	s = json_nn(cJSON_PrintUnformatted(item));
	out = xstrdup(s);
	cJSON_free(s);
	return out;
}

static char *
json_finish(cJSON *o)
{
	char	*out;

	out = json_print(o);
	cJSON_Delete(o);
	return out;
}

static void
json_add_info(cJSON *o, const struct api_info *info)
{
	cJSON		*i, *f, *c, *l, *v;
	size_t		 k;
	const char	*base;

	if (info == NULL)
		return;
	i = json_nn(cJSON_AddObjectToObject(o, "info"));
	json_add_str(i, "name", info->name);
	json_add_str(i, "version", info->version);
	json_add_str(i, "revision", info->revision);
	json_add_str(i, "platform", info->platform);
	json_add_str(i, "architecture", info->architecture);
	json_add_str(i, "executor", info->executor);
	json_add_str(i, "shell", info->shell);

	f = json_nn(cJSON_AddObjectToObject(i, "features"));
	base = (const char *)&info->features;
	for (k = 0; k < nitems(json_features); k++) {
		json_add_bool(f, json_features[k].name,
		    *(const bool *)(base + json_features[k].off));
	}

	c = json_nn(cJSON_AddObjectToObject(i, "config"));
	json_nn(cJSON_AddStringToObject(c, "gpus", ""));

	if (info->n_labels == 0)
		return;
	l = json_nn(cJSON_AddObjectToObject(i, "labels"));
	for (k = 0; k < info->n_labels; k++) {
		if (info->labels[k].name == NULL)
			continue;
		v = json_nn(cJSON_CreateString(info->labels[k].value != NULL ?
		    info->labels[k].value : ""));
		/* A repeated name is an override (runner labels over global). */
		if (cJSON_GetObjectItemCaseSensitive(l, info->labels[k].name) != NULL) {
			if (!cJSON_ReplaceItemInObjectCaseSensitive(l,
			    info->labels[k].name, v))
				json_oom();
		} else if (!cJSON_AddItemToObject(l, info->labels[k].name, v))
			json_oom();
	}
}

char *
json_register_request(const struct api_register_params *p, const char *token)
{
	cJSON	*o;

	o = json_nn(cJSON_CreateObject());
	json_add_str(o, "description", p->description);
	json_add_str(o, "maintenance_note", p->maintenance_note);
	json_add_str(o, "tag_list", p->tag_list);
	json_add_bool(o, "run_untagged", p->run_untagged);
	json_add_bool(o, "locked", p->locked);
	json_add_str(o, "access_level", p->access_level);
	if (p->maximum_timeout != 0)
		json_add_int(o, "maximum_timeout", p->maximum_timeout);
	json_add_bool(o, "paused", p->paused);
	json_add_info(o, p->info);
	json_add_str(o, "token", token);
	return json_finish(o);
}

char *
json_verify_request(const struct api_info *info, const char *token,
    const char *system_id)
{
	cJSON	*o;

	o = json_nn(cJSON_CreateObject());
	json_add_info(o, info);
	json_add_str(o, "token", token);
	json_add_str(o, "system_id", system_id);
	return json_finish(o);
}

char *
json_token_request(const char *token, const char *system_id)
{
	cJSON	*o;

	o = json_nn(cJSON_CreateObject());
	json_add_str(o, "token", token);
	json_add_str(o, "system_id", system_id);
	return json_finish(o);
}

char *
json_job_request(const struct api_info *info, const char *token,
    const char *system_id, const char *last_update)
{
	cJSON	*o;

	o = json_nn(cJSON_CreateObject());
	json_add_info(o, info);
	json_add_str(o, "token", token);
	json_add_str(o, "system_id", system_id);
	json_add_str(o, "last_update", last_update);
	return json_finish(o);
}

char *
json_job_update(const struct api_info *info, const char *job_token,
    const struct api_job_update *u)
{
	cJSON	*o, *out;
	char	 sum[32];

	o = json_nn(cJSON_CreateObject());
	json_add_info(o, info);
	json_add_str(o, "token", job_token);
	json_add_str(o, "state", u->state);
	json_add_str(o, "failure_reason", u->failure_reason);
	out = json_nn(cJSON_CreateObject());
	if (u->has_output) {
		snprintf(sum, sizeof sum, "crc32:%08" PRIx32, u->checksum);
		/* The top-level checksum is deprecated but still read by Rails. */
		json_nn(cJSON_AddStringToObject(o, "checksum", sum));
		json_nn(cJSON_AddStringToObject(out, "checksum", sum));
		/* Go's omitempty: an empty log has a checksum but no bytesize. */
		if (u->bytesize != 0)
			json_add_uint(out, "bytesize", u->bytesize);
	}
	if (!cJSON_AddItemToObject(o, "output", out))
		json_oom();
	if (u->exit_code != 0)
		json_add_int(o, "exit_code", u->exit_code);
	return json_finish(o);
}

/* ---- Parsing: context, paths and errors. ---- */

/* Where a value sits, as a chain of frames on the C stack (no allocation). */
struct json_path {
	const struct json_path	*up;
	const char		*key;	/* member name; NULL for an array index */
	size_t			 index;
};

struct json_parse {
	const char	*what;	/* "job payload": starts every error */
	char		*err;	/* the first error; later ones are dropped */
};

static void
json_path_put(struct buf *b, size_t start, const struct json_path *p)
{
	const unsigned char	*s;
	size_t			 n;

	if (p == NULL)
		return;
	json_path_put(b, start, p->up);
	if (p->key == NULL) {
		buf_printf(b, "[%zu]", p->index);
		return;
	}
	if (b->len > start)
		buf_putc(b, '.');
	/* Names are server text: keep the error one short line. */
	for (s = (const unsigned char *)p->key, n = 0; *s != '\0'; s++, n++) {
		if (n == JSON_PATH_KEY_MAX) {
			buf_puts(b, "...");
			break;
		}
		buf_putc(b, (*s < 0x20 || *s == 0x7f) ? '?' : (char)*s);
	}
}

static void __attribute__((format(printf, 3, 4)))
json_fail(struct json_parse *jp, const struct json_path *at, const char *fmt, ...)
{
	struct buf	b;
	va_list		ap;

	if (jp->err != NULL)
		return;
	buf_init(&b, BUF_UNLIMITED);
	buf_printf(&b, "%s: ", jp->what);
	if (at != NULL) {
		json_path_put(&b, b.len, at);
		buf_putc(&b, ' ');
	}
	va_start(ap, fmt);
	buf_vprintf(&b, fmt, ap);
	va_end(ap);
	jp->err = buf_detach(&b, NULL);
}

static const char *
json_type_name(const cJSON *v)
{
	if (cJSON_IsNull(v))
		return "null";
	if (cJSON_IsBool(v))
		return "a boolean";
	if (cJSON_IsNumber(v))
		return "a number";
	if (cJSON_IsString(v))
		return "a string";
	if (cJSON_IsArray(v))
		return "an array";
	if (cJSON_IsObject(v))
		return "an object";
	return "invalid";
}

/*
 * The body as a JSON object, or NULL with jp->err set.  The bytes are
 * copied so that cJSON always finds a NUL after them whatever it reads,
 * and anything after the value but whitespace makes the body invalid.
 */
static cJSON *
json_parse_root(struct json_parse *jp, const char *body, size_t len)
{
	char		*copy;
	const char	*end = NULL, *ep;
	cJSON		*root;
	size_t		 off = len;

	if (body == NULL || len == 0) {
		jp->err = xasprintf("%s is empty", jp->what);
		return NULL;
	}
	/*
	 * cJSON skips a raw NUL as whitespace, or ends a string at it: JSON
	 * has no place for one, and a script cut short must not run.
	 */
	if ((ep = memchr(body, '\0', len)) != NULL) {
		jp->err = xasprintf("%s: not valid JSON near byte %zu", jp->what,
		    (size_t)(ep - body));
		return NULL;
	}
	copy = xmemdup(body, len);
	root = cJSON_ParseWithLengthOpts(copy, len, &end, 0);
	if (root == NULL) {
		ep = cJSON_GetErrorPtr();
		if (ep != NULL && (uintptr_t)ep >= (uintptr_t)copy &&
		    (uintptr_t)ep <= (uintptr_t)copy + len)
			off = (size_t)(ep - copy);
	} else {
		off = end != NULL ? (size_t)(end - copy) : len;
		while (off < len && strchr(" \t\r\n", copy[off]) != NULL)
			off++;
		if (off != len) {
			cJSON_Delete(root);
			root = NULL;
		}
	}
	free(copy);
	if (root == NULL) {
		jp->err = xasprintf("%s: not valid JSON near byte %zu", jp->what, off);
		return NULL;
	}
	if (!cJSON_IsObject(root)) {
		jp->err = xasprintf("%s is not a JSON object", jp->what);
		cJSON_Delete(root);
		return NULL;
	}
	return root;
}

/*
 * A member, with null taken as absent.  cJSON keeps every copy of a name
 * given twice and its lookup finds the first; Go's decoder, which GitLab's
 * answers are written for, lets the last one win, and a null leaves the
 * value a field already has.  So: the last copy that is not null.
 */
static const cJSON *
json_member(const cJSON *obj, const char *key)
{
	const cJSON	*v, *found = NULL;

	cJSON_ArrayForEach(v, obj)
		if (v->string != NULL && strcmp(v->string, key) == 0 && !cJSON_IsNull(v))
			found = v;
	return found;
}

/* The object under key; NULL when absent, null or (with an error) not an object. */
static const cJSON *
json_object(struct json_parse *jp, const struct json_path *up,
    const cJSON *obj, const char *key)
{
	const cJSON		*v;
	struct json_path	 at = { up, key, 0 };

	if ((v = json_member(obj, key)) == NULL)
		return NULL;
	if (!cJSON_IsObject(v)) {
		json_fail(jp, &at, "must be an object, not %s", json_type_name(v));
		return NULL;
	}
	return v;
}

/* ---- Parsing: values. ---- */

static void
json_get_str(struct json_parse *jp, const struct json_path *at, const cJSON *v,
    char **out)
{
	if (!cJSON_IsString(v) || v->valuestring == NULL) {
		json_fail(jp, at, "must be a string, not %s", json_type_name(v));
		return;
	}
	/* A member given twice: the last one wins, without a leak. */
	free(*out);
	*out = xstrdup(v->valuestring);
}

static bool
json_get_bool(struct json_parse *jp, const struct json_path *at, const cJSON *v,
    bool *out)
{
	if (!cJSON_IsBool(v)) {
		json_fail(jp, at, "must be a boolean, not %s", json_type_name(v));
		return false;
	}
	*out = cJSON_IsTrue(v);
	return true;
}

/*
 * cJSON keeps only the double, so integers past 2^53 arrive rounded; what
 * can be checked is that the value is integral and fits in an int64.
 */
static bool
json_get_int(struct json_parse *jp, const struct json_path *at, const cJSON *v,
    int64_t *out)
{
	double	d;

	if (!cJSON_IsNumber(v)) {
		json_fail(jp, at, "must be an integer, not %s", json_type_name(v));
		return false;
	}
	d = v->valuedouble;
	if (!isfinite(d) || d != floor(d)) {
		json_fail(jp, at, "must be an integer");
		return false;
	}
	if (d < -0x1p63 || d >= 0x1p63) {
		json_fail(jp, at, "is out of range");
		return false;
	}
	*out = (int64_t)d;
	return true;
}

static void
json_get_strv(struct json_parse *jp, const struct json_path *at,
    const cJSON *v, struct strv *out)
{
	const cJSON		*e;
	struct json_path	 ei = { at, NULL, 0 };

	if (!cJSON_IsArray(v)) {
		json_fail(jp, at, "must be an array, not %s", json_type_name(v));
		return;
	}
	strv_release(out);
	cJSON_ArrayForEach(e, v) {
		if (!cJSON_IsString(e) || e->valuestring == NULL) {
			json_fail(jp, &ei, "must be a string, not %s",
			    json_type_name(e));
			return;
		}
		strv_push(out, e->valuestring);
		ei.index++;
	}
}

/* ---- Parsing: members by table. ---- */

enum json_kind {
	JSON_STR,
	JSON_BOOL,
	JSON_INT,
	JSON_FLOAT,
	JSON_STRV,
	JSON_TRIBOOL,	/* int: -1 stays when absent */
	JSON_USER,	/* string or integer, kept as a string (StringOrInt64) */
	JSON_TEXT,	/* any value as JSON text; a string is taken as is */
	JSON_ANY,	/* any value as JSON text */
	JSON_PULL,	/* a string or an array of strings */
};

struct json_field {
	const char	*name;
	enum json_kind	 kind;
	size_t		 off;
};

#define F(type, kind, name, member) \
	{ name, JSON_##kind, offsetof(struct type, member) }

static void
json_set(struct json_parse *jp, const struct json_path *at, enum json_kind kind,
    const cJSON *v, void *p)
{
	char	**sp = p;
	int64_t	  i;
	bool	  b;

	switch (kind) {
	case JSON_STR:
		json_get_str(jp, at, v, sp);
		break;
	case JSON_BOOL:
		json_get_bool(jp, at, v, p);
		break;
	case JSON_INT:
		json_get_int(jp, at, v, p);
		break;
	case JSON_FLOAT:
		if (!cJSON_IsNumber(v))
			json_fail(jp, at, "must be a number, not %s",
			    json_type_name(v));
		else
			*(double *)p = v->valuedouble;
		break;
	case JSON_STRV:
		json_get_strv(jp, at, v, p);
		break;
	case JSON_TRIBOOL:
		if (json_get_bool(jp, at, v, &b))
			*(int *)p = b;
		break;
	case JSON_USER:
		if (cJSON_IsString(v))
			json_get_str(jp, at, v, sp);
		else if (cJSON_IsNumber(v)) {
			if (json_get_int(jp, at, v, &i)) {
				free(*sp);
				*sp = xasprintf("%" PRId64, i);
			}
		} else
			json_fail(jp, at, "must be a string or an integer, not %s",
			    json_type_name(v));
		break;
	case JSON_TEXT:
	case JSON_ANY:
		if (kind == JSON_TEXT && cJSON_IsString(v))
			json_get_str(jp, at, v, sp);
		else {
			free(*sp);
			*sp = json_print(v);
		}
		break;
	case JSON_PULL:
		if (cJSON_IsString(v)) {
			strv_release(p);
			strv_push(p, v->valuestring);
		} else if (cJSON_IsArray(v))
			json_get_strv(jp, at, v, p);
		else
			json_fail(jp, at,
			    "must be a string or an array of strings, not %s",
			    json_type_name(v));
		break;
	}
}

static void
json_fields(struct json_parse *jp, const struct json_path *up, const cJSON *obj,
    const struct json_field *f, size_t n, void *base)
{
	const cJSON		*v;
	struct json_path	 at;
	size_t			 i;

	for (i = 0; i < n && jp->err == NULL; i++) {
		if ((v = json_member(obj, f[i].name)) == NULL)
			continue;
		at = (struct json_path){ up, f[i].name, 0 };
		json_set(jp, &at, f[i].kind, v, (char *)base + f[i].off);
	}
}

/* The object under key, if any, parsed by table into base. */
static void
json_sub(struct json_parse *jp, const struct json_path *up, const cJSON *obj,
    const char *key, const struct json_field *f, size_t n, void *base)
{
	const cJSON		*v;
	struct json_path	 at = { up, key, 0 };

	if ((v = json_object(jp, up, obj, key)) != NULL)
		json_fields(jp, &at, v, f, n, base);
}

typedef void json_elem_fn(struct json_parse *, const struct json_path *,
    const cJSON *, void *);

/*
 * An array of objects under key, each parsed by fn into a zeroed element.
 * *n counts every element allocated, so a failure half way still leaves
 * something api_job_free() can free completely.
 */
static void *
json_list(struct json_parse *jp, const struct json_path *up, const cJSON *obj,
    const char *key, size_t size, size_t *n, json_elem_fn *fn)
{
	const cJSON		*v, *e;
	struct json_path	 at = { up, key, 0 }, ei = { &at, NULL, 0 };
	char			*arr;
	size_t			 count;

	*n = 0;
	if ((v = json_member(obj, key)) == NULL)
		return NULL;
	if (!cJSON_IsArray(v)) {
		json_fail(jp, &at, "must be an array, not %s", json_type_name(v));
		return NULL;
	}
	if ((count = (size_t)cJSON_GetArraySize(v)) == 0)
		return NULL;
	arr = xcalloc(count, size);
	*n = count;
	cJSON_ArrayForEach(e, v) {
		if (ei.index == count || jp->err != NULL)
			break;
		if (!cJSON_IsObject(e))
			json_fail(jp, &ei, "must be an object, not %s",
			    json_type_name(e));
		else
			fn(jp, &ei, e, arr + ei.index * size);
		ei.index++;
	}
	return arr;
}

/* ---- Parsing: the job payload (protocol.md 4.5). ---- */

static const struct json_field json_variable_fields[] = {
	F(api_variable, STR, "key", key),
	F(api_variable, STR, "value", value),
	F(api_variable, BOOL, "public", public_),
	F(api_variable, BOOL, "file", file),
	F(api_variable, BOOL, "masked", masked),
	F(api_variable, BOOL, "raw", raw),
};

static void
json_variable(struct json_parse *jp, const struct json_path *at,
    const cJSON *v, void *elem)
{
	struct api_variable	*var = elem;

	/* Rails' default for a variable that does not say. */
	var->public_ = true;
	json_fields(jp, at, v, json_variable_fields,
	    nitems(json_variable_fields), var);
}

static const struct json_field json_step_fields[] = {
	F(api_step, STR, "name", name),
	F(api_step, STRV, "script", script),
	F(api_step, INT, "timeout", timeout),
	F(api_step, STR, "when", when),
	F(api_step, BOOL, "allow_failure", allow_failure),
};

static const struct json_field json_hook_fields[] = {
	F(api_hook, STR, "name", name),
	F(api_hook, STRV, "script", script),
};

static const struct json_field json_port_fields[] = {
	F(api_port, INT, "number", number),
	F(api_port, STR, "protocol", protocol),
	F(api_port, STR, "name", name),
};

static const struct json_field json_image_fields[] = {
	F(api_image, STR, "name", name),
	F(api_image, STR, "alias", alias),
	F(api_image, STRV, "entrypoint", entrypoint),
	F(api_image, STRV, "command", command),
	F(api_image, PULL, "pull_policy", pull_policy),
};

static const struct json_field json_artifact_fields[] = {
	F(api_artifact, STR, "name", name),
	F(api_artifact, BOOL, "untracked", untracked),
	F(api_artifact, STRV, "paths", paths),
	F(api_artifact, STRV, "exclude", exclude),
	F(api_artifact, STR, "when", when),
	F(api_artifact, STR, "artifact_type", artifact_type),
	F(api_artifact, STR, "artifact_format", artifact_format),
	F(api_artifact, STR, "expire_in", expire_in),
};

static const struct json_field json_cache_fields[] = {
	F(api_cache, STR, "key", key),
	F(api_cache, BOOL, "untracked", untracked),
	F(api_cache, STR, "policy", policy),
	F(api_cache, STRV, "paths", paths),
	F(api_cache, STR, "when", when),
	F(api_cache, STRV, "fallback_keys", fallback_keys),
};

static const struct json_field json_credential_fields[] = {
	F(api_credential, STR, "type", type),
	F(api_credential, STR, "url", url),
	F(api_credential, STR, "username", username),
	F(api_credential, STR, "password", password),
};

static const struct json_field json_dependency_fields[] = {
	F(api_dependency, INT, "id", id),
	F(api_dependency, STR, "name", name),
	F(api_dependency, STR, "token", token),
};

/* dependencies[].artifacts_file, flattened into struct api_dependency. */
static const struct json_field json_artifacts_file_fields[] = {
	F(api_dependency, STR, "filename", artifacts_filename),
	F(api_dependency, INT, "size", artifacts_size),
};

static const struct json_field json_input_fields[] = {
	F(api_input, STR, "key", key),
};

/* inputs[].value, flattened into struct api_input. */
static const struct json_field json_input_value_fields[] = {
	F(api_input, STR, "type", type),
	F(api_input, ANY, "content", json),
	F(api_input, BOOL, "sensitive", sensitive),
};

static const struct json_field json_job_fields[] = {
	F(api_job, INT, "id", id),
	F(api_job, STR, "token", token),
	F(api_job, BOOL, "allow_git_fetch", allow_git_fetch),
	F(api_job, TEXT, "run", run),
	F(api_job, ANY, "policy_options", policy_options),
};

static const struct json_field json_job_info_fields[] = {
	F(api_job_info, INT, "id", id),
	F(api_job_info, STR, "name", name),
	F(api_job_info, STR, "stage", stage),
	F(api_job_info, INT, "project_id", project_id),
	F(api_job_info, STR, "project_name", project_name),
	F(api_job_info, STR, "project_full_path", project_full_path),
	F(api_job_info, INT, "namespace_id", namespace_id),
	F(api_job_info, INT, "root_namespace_id", root_namespace_id),
	F(api_job_info, INT, "organization_id", organization_id),
	F(api_job_info, STR, "instance_id", instance_id),
	F(api_job_info, STR, "instance_uuid", instance_uuid),
	F(api_job_info, INT, "user_id", user_id),
	F(api_job_info, INT, "scoped_user_id", scoped_user_id),
	F(api_job_info, INT, "pipeline_id", pipeline_id),
	F(api_job_info, FLOAT, "time_in_queue_seconds", time_in_queue_seconds),
	F(api_job_info, STR, "project_jobs_running_on_instance_runners_count",
	    project_jobs_running_on_instance_runners_count),
	F(api_job_info, INT, "queue_size", queue_size),
	F(api_job_info, INT, "queue_depth", queue_depth),
};

static const struct json_field json_git_info_fields[] = {
	F(api_git_info, STR, "repo_url", repo_url),
	F(api_git_info, STR, "ref", ref),
	F(api_git_info, STR, "sha", sha),
	F(api_git_info, STR, "before_sha", before_sha),
	F(api_git_info, STR, "ref_type", ref_type),
	F(api_git_info, STRV, "refspecs", refspecs),
	F(api_git_info, INT, "depth", depth),
	F(api_git_info, STR, "repo_object_format", repo_object_format),
	F(api_git_info, TRIBOOL, "protected", protected_),
};

static const struct json_field json_runner_info_fields[] = {
	F(api_runner_info, INT, "timeout", timeout),
	F(api_runner_info, STR, "uuid", uuid),
	F(api_runner_info, STR, "runner_session_url", runner_session_url),
};

static const struct json_field json_job_features_fields[] = {
	F(api_job_features, BOOL, "trace_sections", trace_sections),
	F(api_job_features, STRV, "failure_reasons", failure_reasons),
	F(api_job_features, STRV, "token_mask_prefixes", token_mask_prefixes),
};

/* The executor options this runner understands (gitlab-runner's list). */
static const struct {
	const char	*section;
	struct json_field field;
} json_executor_opts[] = {
	{ "docker", F(api_image, STR, "platform", docker_platform) },
	{ "docker", F(api_image, USER, "user", docker_user) },
	{ "kubernetes", F(api_image, USER, "user", kubernetes_user) },
};

/* Each element parser, for json_list(). */
#define JSON_TABLE_ELEM(fn, table)					\
static void								\
fn(struct json_parse *jp, const struct json_path *at, const cJSON *v,	\
    void *elem)								\
{									\
	json_fields(jp, at, v, table, nitems(table), elem);		\
}
JSON_TABLE_ELEM(json_step, json_step_fields)
JSON_TABLE_ELEM(json_hook, json_hook_fields)
JSON_TABLE_ELEM(json_port, json_port_fields)
JSON_TABLE_ELEM(json_artifact, json_artifact_fields)
JSON_TABLE_ELEM(json_cache, json_cache_fields)
JSON_TABLE_ELEM(json_credential, json_credential_fields)
#undef JSON_TABLE_ELEM

static void
json_dependency(struct json_parse *jp, const struct json_path *at,
    const cJSON *v, void *elem)
{
	json_fields(jp, at, v, json_dependency_fields,
	    nitems(json_dependency_fields), elem);
	json_sub(jp, at, v, "artifacts_file", json_artifacts_file_fields,
	    nitems(json_artifacts_file_fields), elem);
}

static void
json_input(struct json_parse *jp, const struct json_path *at, const cJSON *v,
    void *elem)
{
	json_fields(jp, at, v, json_input_fields, nitems(json_input_fields),
	    elem);
	json_sub(jp, at, v, "value", json_input_value_fields,
	    nitems(json_input_value_fields), elem);
}

/*
 * Unknown executor options are collected, not refused: gitlab-runner fails
 * such a job itself (with a message in its log), which needs the job.
 */
static void
json_executor_options(struct json_parse *jp, const struct json_path *up,
    const cJSON *obj, struct api_image *img)
{
	const cJSON		*opts, *sec, *o;
	struct json_path	 at = { up, "executor_opts", 0 }, sat, oat;
	size_t			 i;
	bool			 known;

	if ((opts = json_object(jp, up, obj, "executor_opts")) == NULL)
		return;
	cJSON_ArrayForEach(sec, opts) {
		known = false;
		for (i = 0; i < nitems(json_executor_opts); i++)
			known |= strcmp(json_executor_opts[i].section,
			    sec->string) == 0;
		if (!known) {
			strv_push(&img->unsupported_options, sec->string);
			continue;
		}
		if (cJSON_IsNull(sec))
			continue;
		sat = (struct json_path){ &at, sec->string, 0 };
		if (!cJSON_IsObject(sec)) {
			json_fail(jp, &sat, "must be an object, not %s",
			    json_type_name(sec));
			return;
		}
		cJSON_ArrayForEach(o, sec) {
			for (i = 0; i < nitems(json_executor_opts); i++) {
				if (strcmp(json_executor_opts[i].section,
				    sec->string) == 0 &&
				    strcmp(json_executor_opts[i].field.name,
				    o->string) == 0)
					break;
			}
			if (i == nitems(json_executor_opts)) {
				strv_push_owned(&img->unsupported_options,
				    xasprintf("%s.%s", sec->string, o->string));
				continue;
			}
			if (cJSON_IsNull(o))
				continue;
			oat = (struct json_path){ &sat, o->string, 0 };
			json_set(jp, &oat, json_executor_opts[i].field.kind, o,
			    (char *)img + json_executor_opts[i].field.off);
		}
	}
}

static void
json_image(struct json_parse *jp, const struct json_path *at, const cJSON *v,
    void *elem)
{
	struct api_image	*img = elem;

	img->present = true;
	json_fields(jp, at, v, json_image_fields, nitems(json_image_fields),
	    img);
	img->ports = json_list(jp, at, v, "ports", sizeof *img->ports,
	    &img->n_ports, json_port);
	img->variables = json_list(jp, at, v, "variables",
	    sizeof *img->variables, &img->n_variables, json_variable);
	json_executor_options(jp, at, v, img);
}

/* secrets: {name: {<provider>: {...}, "file": bool}}. */
static void
json_secrets(struct json_parse *jp, const cJSON *root, struct api_job *job)
{
	const cJSON		*obj, *s, *m;
	struct json_path	 at = { NULL, "secrets", 0 }, sat, fat;
	struct api_secret	*sec;
	size_t			 count;

	if ((obj = json_object(jp, NULL, root, "secrets")) == NULL)
		return;
	if ((count = (size_t)cJSON_GetArraySize(obj)) == 0)
		return;
	job->secrets = xcalloc(count, sizeof *job->secrets);
	cJSON_ArrayForEach(s, obj) {
		if (job->n_secrets == count || jp->err != NULL)
			break;
		sec = &job->secrets[job->n_secrets++];
		sec->name = xstrdup(s->string);
		sec->file = true;
		sat = (struct json_path){ &at, s->string, 0 };
		if (!cJSON_IsObject(s)) {
			json_fail(jp, &sat, "must be an object, not %s",
			    json_type_name(s));
			break;
		}
		cJSON_ArrayForEach(m, s) {
			if (cJSON_IsNull(m))
				continue;
			if (strcmp(m->string, "file") == 0) {
				fat = (struct json_path){ &sat, "file", 0 };
				json_get_bool(jp, &fat, m, &sec->file);
			} else if (sec->provider == NULL) {
				/* No provider is left for the resolver to refuse. */
				sec->provider = xstrdup(m->string);
				sec->json = json_print(m);
			}
		}
	}
}

/*
 * Whether the payload's run (gitlab-runner's JobResponse.Run: a string
 * that holds a JSON array of steps) asks for any step.  Text that is not
 * such an array still asks for something: the job must not pass for one
 * with nothing to do.
 */
static bool
json_run_steps(const char *run)
{
	cJSON	*v;
	bool	 yes;

	if (run == NULL || run[strspn(run, " \t\r\n")] == '\0')
		return false;
	if ((v = cJSON_Parse(run)) == NULL)
		return true;
	yes = cJSON_IsArray(v) ? cJSON_GetArraySize(v) > 0 : !cJSON_IsNull(v);
	cJSON_Delete(v);
	return yes;
}

int
json_parse_job(const char *body, size_t len, struct api_job **out, char **err)
{
	struct json_parse	 jp = { "job payload", NULL };
	struct json_path	 at;
	struct api_job		*job;
	cJSON			*root;
	const cJSON		*v;

	*out = NULL;
	*err = NULL;
	if ((root = json_parse_root(&jp, body, len)) == NULL) {
		*err = jp.err;
		return -1;
	}
	job = xcalloc(1, sizeof *job);
	job->git_info.protected_ = -1;

	json_fields(&jp, NULL, root, json_job_fields, nitems(json_job_fields),
	    job);
	job->run_steps = json_run_steps(job->run);
	json_sub(&jp, NULL, root, "job_info", json_job_info_fields,
	    nitems(json_job_info_fields), &job->job_info);
	json_sub(&jp, NULL, root, "git_info", json_git_info_fields,
	    nitems(json_git_info_fields), &job->git_info);
	json_sub(&jp, NULL, root, "runner_info", json_runner_info_fields,
	    nitems(json_runner_info_fields), &job->runner_info);
	json_sub(&jp, NULL, root, "features", json_job_features_fields,
	    nitems(json_job_features_fields), &job->features);
	job->variables = json_list(&jp, NULL, root, "variables",
	    sizeof *job->variables, &job->n_variables, json_variable);
	job->steps = json_list(&jp, NULL, root, "steps", sizeof *job->steps,
	    &job->n_steps, json_step);
	job->hooks = json_list(&jp, NULL, root, "hooks", sizeof *job->hooks,
	    &job->n_hooks, json_hook);
	if ((v = json_object(&jp, NULL, root, "image")) != NULL) {
		at = (struct json_path){ NULL, "image", 0 };
		json_image(&jp, &at, v, &job->image);
	}
	job->services = json_list(&jp, NULL, root, "services",
	    sizeof *job->services, &job->n_services, json_image);
	job->artifacts = json_list(&jp, NULL, root, "artifacts",
	    sizeof *job->artifacts, &job->n_artifacts, json_artifact);
	job->caches = json_list(&jp, NULL, root, "cache", sizeof *job->caches,
	    &job->n_caches, json_cache);
	job->credentials = json_list(&jp, NULL, root, "credentials",
	    sizeof *job->credentials, &job->n_credentials, json_credential);
	job->dependencies = json_list(&jp, NULL, root, "dependencies",
	    sizeof *job->dependencies, &job->n_dependencies, json_dependency);
	job->inputs = json_list(&jp, NULL, root, "inputs",
	    sizeof *job->inputs, &job->n_inputs, json_input);
	json_secrets(&jp, root, job);

	/* Every later URL and header needs these two. */
	at = (struct json_path){ NULL, "id", 0 };
	if (json_member(root, "id") == NULL)
		json_fail(&jp, &at, "is missing");
	else if (job->id <= 0)
		json_fail(&jp, &at, "must be positive");
	at = (struct json_path){ NULL, "token", 0 };
	if (json_member(root, "token") == NULL)
		json_fail(&jp, &at, "is missing");
	else if (json_empty(job->token))
		json_fail(&jp, &at, "is empty");

	cJSON_Delete(root);
	if (jp.err != NULL) {
		api_job_free(job);
		*err = jp.err;
		return -1;
	}
	/* The job's token is masked in every log line for as long as the job lives. */
	job->token_mask = log_secret_hold(job->token);
	*out = job;
	return 0;
}

/* ---- Parsing: tokens, discovery, errors. ---- */

static bool
json_digits(const char **s, int n, int *out)
{
	*out = 0;
	while (n-- > 0) {
		if (!isdigit((unsigned char)**s))
			return false;
		*out = *out * 10 + (*(*s)++ - '0');
	}
	return true;
}

static int
json_days_in_month(int year, int month)
{
	static const int days[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31,
	    30, 31 };
	bool leap;

	leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
	return month == 2 && leap ? 29 : days[month - 1];
}

/*
 * RFC 3339 ("2026-10-16T13:25:59.5+02:00") to UTC.  *never is set for
 * Go's zero time (year 1), which is how "does not expire" is written.
 */
static bool
json_rfc3339(const char *s, time_t *out, bool *never)
{
	static const int	 width[6] = { 4, 2, 2, 2, 2, 2 };
	static const char	 sep[6] = { 0, '-', '-', 'T', ':', ':' };
	struct tm		 tm;
	int			 f[6], oh, om, i;
	long			 off = 0;
	char			 c;

	for (i = 0; i < 6; i++) {
		if (i > 0) {
			c = *s++;
			if (c != sep[i] && !(i == 3 && (c == 't' || c == ' ')))
				return false;
		}
		if (!json_digits(&s, width[i], &f[i]))
			return false;
	}
	if (*s == '.') {
		s++;
		if (!isdigit((unsigned char)*s))
			return false;
		while (isdigit((unsigned char)*s))
			s++;
	}
	if (*s == 'Z' || *s == 'z')
		s++;
	else if (*s == '+' || *s == '-') {
		c = *s++;
		if (!json_digits(&s, 2, &oh) || *s++ != ':' ||
		    !json_digits(&s, 2, &om) || oh > 23 || om > 59)
			return false;
		off = (c == '-' ? -1 : 1) * (oh * 3600L + om * 60L);
	} else
		return false;
	if (*s != '\0')
		return false;
	if (f[1] < 1 || f[1] > 12 || f[2] < 1 ||
	    f[2] > json_days_in_month(f[0], f[1]) || f[3] > 23 || f[4] > 59 ||
	    f[5] > 59)
		return false;

	*never = f[0] == 1;
	memset(&tm, 0, sizeof tm);
	tm.tm_year = f[0] - 1900;
	tm.tm_mon = f[1] - 1;
	tm.tm_mday = f[2];
	tm.tm_hour = f[3];
	tm.tm_min = f[4];
	tm.tm_sec = f[5];
	*out = timegm(&tm) - off;
	return true;
}

static const struct json_field json_token_fields[] = {
	F(api_runner_token, INT, "id", id),
	F(api_runner_token, STR, "token", token),
};

int
json_parse_runner_token(const char *body, size_t len,
    struct api_runner_token *out, char **err)
{
	struct json_parse	 jp = { "token answer", NULL };
	struct json_path	 at = { NULL, "token_expires_at", 0 };
	cJSON			*root;
	const cJSON		*v;
	bool			 never;

	memset(out, 0, sizeof *out);
	*err = NULL;
	if ((root = json_parse_root(&jp, body, len)) == NULL) {
		*err = jp.err;
		return -1;
	}
	json_fields(&jp, NULL, root, json_token_fields,
	    nitems(json_token_fields), out);
	if ((v = json_member(root, "token_expires_at")) != NULL) {
		if (!cJSON_IsString(v))
			json_fail(&jp, &at, "must be a string, not %s",
			    json_type_name(v));
		else if (!json_rfc3339(v->valuestring, &out->expires_at, &never))
			json_fail(&jp, &at, "is not an RFC 3339 time");
		else if (never)
			out->expires_at = 0;
		else
			out->expires = true;
	}
	cJSON_Delete(root);
	if (jp.err != NULL) {
		api_runner_token_release(out);
		*err = jp.err;
		return -1;
	}
	return 0;
}

int
json_parse_discovery(const char *body, size_t len, char **url, char **err)
{
	struct json_parse	 jp = { "discovery answer", NULL };
	struct json_path	 at = { NULL, "server_url", 0 };
	cJSON			*root;
	const cJSON		*v;

	*url = NULL;
	*err = NULL;
	if ((root = json_parse_root(&jp, body, len)) == NULL) {
		*err = jp.err;
		return -1;
	}
	if ((v = json_member(root, "server_url")) == NULL)
		json_fail(&jp, &at, "is missing");
	else {
		json_get_str(&jp, &at, v, url);
		if (*url != NULL && **url == '\0')
			json_fail(&jp, &at, "is empty");
	}
	cJSON_Delete(root);
	if (jp.err != NULL) {
		free(*url);
		*url = NULL;
		*err = jp.err;
		return -1;
	}
	return 0;
}

/* A value of an error body as text: strings as they are, arrays joined. */
static void
json_put_value(struct buf *b, const cJSON *v)
{
	const cJSON	*e;
	char		*s;
	bool		 first = true;

	if (cJSON_IsString(v))
		buf_puts(b, v->valuestring);
	else if (cJSON_IsArray(v)) {
		cJSON_ArrayForEach(e, v) {
			if (!first)
				buf_puts(b, "; ");
			first = false;
			json_put_value(b, e);
		}
	} else {
		s = json_print(v);
		buf_puts(b, s);
		free(s);
	}
}

static int
json_cmp_members(const void *a, const void *b)
{
	const cJSON	*const *x = a, *const *y = b;

	return strcmp((*x)->string, (*y)->string);
}

/* {"field": ["e1", "e2"], ...} as "field: e1; e2, ..." sorted by field. */
static void
json_put_fields(struct buf *b, const cJSON *obj)
{
	const cJSON	**m, *e;
	size_t		  n, i;

	if ((n = (size_t)cJSON_GetArraySize(obj)) == 0)
		return;
	m = xcalloc(n, sizeof *m);
	i = 0;
	cJSON_ArrayForEach(e, obj) {
		if (i < n)
			m[i++] = e;
	}
	n = i;
	qsort(m, n, sizeof *m, json_cmp_members);
	for (i = 0; i < n; i++) {
		if (i > 0)
			buf_puts(b, ", ");
		buf_printf(b, "%s: ", m[i]->string);
		json_put_value(b, m[i]);
	}
	free(m);
}

char *
json_error_message(const char *body, size_t len)
{
	struct json_parse	 jp = { "error body", NULL };
	struct buf		 b;
	cJSON			*root;
	const cJSON		*m, *e, *d;
	size_t			 i, cut;
	char			*out;

	if ((root = json_parse_root(&jp, body, len)) == NULL) {
		free(jp.err);
		return NULL;
	}
	buf_init(&b, BUF_UNLIMITED);
	if ((m = json_member(root, "message")) != NULL) {
		if (cJSON_IsObject(m))
			json_put_fields(&b, m);
		else
			json_put_value(&b, m);
	} else {
		/* OAuth-style errors, as Doorkeeper answers them. */
		e = json_member(root, "error");
		d = json_member(root, "error_description");
		if (e != NULL)
			json_put_value(&b, e);
		if (e != NULL && d != NULL)
			buf_puts(&b, ": ");
		if (d != NULL)
			json_put_value(&b, d);
	}
	cJSON_Delete(root);
	if (b.len == 0) {
		buf_release(&b);
		return NULL;
	}

	/* One line, of a size a log can take; cut on a UTF-8 boundary. */
	for (i = 0; i < b.len; i++) {
		if ((unsigned char)b.ptr[i] < 0x20 || b.ptr[i] == 0x7f)
			b.ptr[i] = ' ';
	}
	out = buf_detach(&b, &cut);
	if (cut > JSON_ERROR_MESSAGE_MAX) {
		cut = JSON_ERROR_MESSAGE_MAX - 3;
		while (cut > 0 && ((unsigned char)out[cut] & 0xc0) == 0x80)
			cut--;
		memcpy(out + cut, "...", 4);
	}
	return out;
}

#undef F

/* ---- Freeing. ---- */

static void
json_free_variables(struct api_variable *v, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++) {
		free(v[i].key);
		free(v[i].value);
	}
	free(v);
}

static void
json_release_image(struct api_image *img)
{
	size_t	i;

	free(img->name);
	free(img->alias);
	strv_release(&img->entrypoint);
	strv_release(&img->command);
	for (i = 0; i < img->n_ports; i++) {
		free(img->ports[i].protocol);
		free(img->ports[i].name);
	}
	free(img->ports);
	json_free_variables(img->variables, img->n_variables);
	strv_release(&img->pull_policy);
	free(img->docker_platform);
	free(img->docker_user);
	free(img->kubernetes_user);
	strv_release(&img->unsupported_options);
}

void
api_job_free(struct api_job *job)
{
	size_t	i;

	if (job == NULL)
		return;
	log_secret_drop(job->token_mask);
	free(job->token);

	free(job->job_info.name);
	free(job->job_info.stage);
	free(job->job_info.project_name);
	free(job->job_info.project_full_path);
	free(job->job_info.instance_id);
	free(job->job_info.instance_uuid);
	free(job->job_info.project_jobs_running_on_instance_runners_count);

	free(job->git_info.repo_url);
	free(job->git_info.ref);
	free(job->git_info.sha);
	free(job->git_info.before_sha);
	free(job->git_info.ref_type);
	strv_release(&job->git_info.refspecs);
	free(job->git_info.repo_object_format);

	free(job->runner_info.uuid);
	free(job->runner_info.runner_session_url);

	json_free_variables(job->variables, job->n_variables);
	for (i = 0; i < job->n_steps; i++) {
		free(job->steps[i].name);
		strv_release(&job->steps[i].script);
		free(job->steps[i].when);
	}
	free(job->steps);
	for (i = 0; i < job->n_hooks; i++) {
		free(job->hooks[i].name);
		strv_release(&job->hooks[i].script);
	}
	free(job->hooks);
	json_release_image(&job->image);
	for (i = 0; i < job->n_services; i++)
		json_release_image(&job->services[i]);
	free(job->services);
	for (i = 0; i < job->n_artifacts; i++) {
		free(job->artifacts[i].name);
		strv_release(&job->artifacts[i].paths);
		strv_release(&job->artifacts[i].exclude);
		free(job->artifacts[i].when);
		free(job->artifacts[i].artifact_type);
		free(job->artifacts[i].artifact_format);
		free(job->artifacts[i].expire_in);
	}
	free(job->artifacts);
	for (i = 0; i < job->n_caches; i++) {
		free(job->caches[i].key);
		free(job->caches[i].policy);
		strv_release(&job->caches[i].paths);
		free(job->caches[i].when);
		strv_release(&job->caches[i].fallback_keys);
	}
	free(job->caches);
	for (i = 0; i < job->n_credentials; i++) {
		free(job->credentials[i].type);
		free(job->credentials[i].url);
		free(job->credentials[i].username);
		free(job->credentials[i].password);
	}
	free(job->credentials);
	for (i = 0; i < job->n_dependencies; i++) {
		free(job->dependencies[i].name);
		free(job->dependencies[i].token);
		free(job->dependencies[i].artifacts_filename);
	}
	free(job->dependencies);
	strv_release(&job->features.failure_reasons);
	strv_release(&job->features.token_mask_prefixes);
	for (i = 0; i < job->n_secrets; i++) {
		free(job->secrets[i].name);
		free(job->secrets[i].provider);
		free(job->secrets[i].json);
	}
	free(job->secrets);
	for (i = 0; i < job->n_inputs; i++) {
		free(job->inputs[i].key);
		free(job->inputs[i].type);
		free(job->inputs[i].json);
	}
	free(job->inputs);
	free(job->run);
	free(job->policy_options);
	free(job);
}

void
api_runner_token_release(struct api_runner_token *t)
{
	if (t == NULL)
		return;
	free(t->token);
	memset(t, 0, sizeof *t);
}
