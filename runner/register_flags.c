/*
 * The rows of register_flags.def as a table, and the new [[runners]] entry
 * built from them (register_flags.h).
 *
 * Which keys appear follows how gitlab-runner's TOML encoder writes its
 * config structs: a key that was given; a key of a table that is written,
 * when its tag has no omitempty (or it is a number, which omitempty keeps);
 * the executor tables only for their executor, because register drops the
 * others before saving (askExecutorOptions); [runners.referees] never.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/duration.h"
#include "lib/strconv.h"
#include "lib/xmalloc.h"
#include "runner/config.h"
#include "runner/register_flags.h"
#include "runner/toml.h"

const struct reg_row reg_rows[REG_N] = {
#define REG_FLAG(id, flag, sh, env, path, type, zero, help) \
	[REG_##id] = { (flag), (path), REG_T_##type, (zero) },
#define REG_KEY(id, path, type) \
	[REG_##id] = { NULL, (path), REG_T_##type, true },
#include "runner/register_flags.def"
};

/* gitlab-runner's executors (main.go) and the tables each keeps. */
static const struct {
	const char	*name;
	const char	*tables[2];
} executors[] = {
	{ "custom", { "custom" } },
	{ "docker", { "docker" } },
	{ "docker-autoscaler", { "docker" } },
	{ "docker+machine", { "machine", "docker" } },
	{ "docker-windows", { "docker" } },
	{ "instance", { NULL } },
	{ "kubernetes", { "kubernetes" } },
	{ "parallels", { "ssh", "parallels" } },
	{ "shell", { NULL } },
	{ "ssh", { "ssh" } },
	{ "virtualbox", { "ssh", "virtualbox" } },
};

const char reg_executor_names[] = "custom, docker, docker-autoscaler, docker+machine, "
    "docker-windows, instance, kubernetes, parallels, shell, ssh, virtualbox";

/* The tables register writes only for their executor; referees for none. */
static const char *const executor_tables[] = {
	"ssh", "docker", "parallels", "virtualbox", "machine", "kubernetes", "custom",
	"referees", NULL,
};

/* The tables written whatever was given, besides the executor's. */
static const char *const always_tables[] = {
	"cache", "cache.s3", "cache.gcs", "cache.azure", NULL,
};

bool
reg_executor_known(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(executors) / sizeof(executors[0]); i++)
		if (strcmp(executors[i].name, name) == 0)
			return true;
	return false;
}

static bool
executor_keeps(const char *executor, const char *table, size_t len)
{
	size_t i, j;

	for (i = 0; i < sizeof(executors) / sizeof(executors[0]); i++) {
		if (strcmp(executors[i].name, executor) != 0)
			continue;
		for (j = 0; j < 2 && executors[i].tables[j] != NULL; j++)
			if (strlen(executors[i].tables[j]) == len &&
			    strncmp(executors[i].tables[j], table, len) == 0)
				return true;
	}
	return false;
}

static bool
in_list(const char *const *list, const char *s, size_t len)
{
	for (; *list != NULL; list++)
		if (strlen(*list) == len && strncmp(*list, s, len) == 0)
			return true;
	return false;
}

/* May anything be written at path (dotted, below the entry)? */
static bool
allowed(const char *path, const char *executor)
{
	const char *dot = strchr(path, '.');
	size_t len = dot != NULL ? (size_t)(dot - path) : strlen(path);

	return !in_list(executor_tables, path, len) || executor_keeps(executor, path, len);
}

/* Is the table at path[0..len) written even when nothing in it was given? */
static bool
always_written(const char *path, size_t len, const char *executor)
{
	return len == 0 || in_list(always_tables, path, len) ||
	    (memchr(path, '.', len) == NULL && executor_keeps(executor, path, len));
}

/* The table at path[0..len) below entry, made (as [sections]) if missing. */
static struct toml_value *
table_at(struct toml_value *entry, const char *path, size_t len)
{
	struct toml_value *t = entry, *next;
	const char *p = path, *end = path + len, *dot;
	size_t n;

	while (p < end) {
		dot = memchr(p, '.', (size_t)(end - p));
		n = dot != NULL ? (size_t)(dot - p) : (size_t)(end - p);
		if ((next = toml_getn(t, p, n)) == NULL || next->type != TOML_TABLE) {
			next = toml_new_table(TOML_TABLE_HEADER);
			toml_table_set(t, p, n, next);
		}
		t = next;
		p += n + 1;
	}
	return t;
}

/* The value at a dotted path in t, or NULL. */
static const struct toml_value *
value_at(const struct toml_value *t, const char *path)
{
	const char *dot;

	while (t != NULL && (dot = strchr(path, '.')) != NULL) {
		t = toml_getn(t, path, (size_t)(dot - path));
		path = dot + 1;
	}
	return t != NULL ? toml_get(t, path) : NULL;
}

static struct toml_value *
new_string(const char *s)
{
	return toml_new_string(s, strlen(s));
}

static struct toml_value *
new_duration(const char *s)
{
	char out[64];
	int64_t ns = 0;

	if (s != NULL)
		(void)duration_parse(s, &ns);
	duration_format(ns, out, sizeof(out));
	return new_string(out);
}

static int64_t
parse_int(const char *s)
{
	int64_t n = 0;

	(void)strconv_parse_int(s, &n);
	return n;
}

/* One KEY:VALUE item's value, typed; NULL if it does not read as one. */
static struct toml_value *
map_value(enum reg_type type, const char *s)
{
	bool b;
	int64_t n;

	switch (type) {
	case REG_T_MAP_BOOL:
		return strconv_parse_bool(s, &b) == 0 ? toml_new_bool(b) : NULL;
	case REG_T_MAP_INT:
		return strconv_parse_int(s, &n) == 0 ? toml_new_integer(n) : NULL;
	default:
		return new_string(s);
	}
}

static bool
is_map(enum reg_type type)
{
	return type == REG_T_MAP || type == REG_T_MAP_BOOL || type == REG_T_MAP_INT;
}

int
reg_values_check(const struct reg_value *v, char **cause)
{
	const struct reg_row *r;
	const char *s, *colon;
	struct toml_value *t;
	int64_t n;
	size_t i, j;
	char *end;

	for (i = 0; i < REG_N; i++) {
		r = &reg_rows[i];
		if (r->flag == NULL || !v[i].given)
			continue;
		s = v[i].s;
		if (r->type == REG_T_FLOAT && s != NULL && *s != '\0' &&
		    (strtod(s, &end), *end != '\0')) {
			*cause = xasprintf("--%s: \"%s\" is not a number", r->flag, s);
			return -1;
		}
		if (r->type == REG_T_DURATION && s != NULL && *s != '\0' &&
		    duration_parse(s, &n) != 0) {
			*cause = xasprintf("--%s: \"%s\" is not a duration", r->flag, s);
			return -1;
		}
		for (j = 0; j < v[i].v.n; j++) {
			s = v[i].v.v[j];
			if (r->type == REG_T_INTS && strconv_parse_int(s, &n) != 0) {
				*cause = xasprintf("--%s: \"%s\" is not a whole number", r->flag, s);
				return -1;
			}
			if (!is_map(r->type))
				continue;
			if ((colon = strchr(s, ':')) == NULL) {
				*cause = xasprintf("--%s: \"%s\" is not KEY:VALUE", r->flag, s);
				return -1;
			}
			if ((t = map_value(r->type, colon + 1)) == NULL) {
				*cause = xasprintf("--%s: \"%s\": the value is not %s", r->flag, s,
				    r->type == REG_T_MAP_BOOL ? "true or false" : "a whole number");
				return -1;
			}
			toml_free(t);
		}
	}
	return 0;
}

/* A given value as TOML; NULL when it is empty (an empty string, no items). */
static struct toml_value *
given_value(const struct reg_row *r, const struct reg_value *v)
{
	struct toml_value *t;
	const char *colon;
	size_t i;

	switch (r->type) {
	case REG_T_STRING:
		return v->s != NULL && *v->s != '\0' ? new_string(v->s) : NULL;
	case REG_T_BOOL:
		return toml_new_bool(v->b);
	case REG_T_INT:
		return toml_new_integer(v->i);
	case REG_T_FLOAT:
		return v->s != NULL && *v->s != '\0' ? toml_new_float(strtod(v->s, NULL)) : NULL;
	case REG_T_DURATION:
		return v->s != NULL && *v->s != '\0' ? new_duration(v->s) : NULL;
	case REG_T_STRINGS:
	case REG_T_INTS:
		if (v->v.n == 0)
			return NULL;
		t = toml_new_array();
		for (i = 0; i < v->v.n; i++)
			toml_array_push(t, r->type == REG_T_INTS ?
			    toml_new_integer(parse_int(v->v.v[i])) : new_string(v->v.v[i]));
		return t;
	case REG_T_MAP:
	case REG_T_MAP_BOOL:
	case REG_T_MAP_INT:
		if (v->v.n == 0)
			return NULL;
		t = toml_new_table(TOML_TABLE_HEADER);
		for (i = 0; i < v->v.n; i++) {
			colon = strchr(v->v.v[i], ':');
			toml_table_set(t, v->v.v[i], (size_t)(colon - v->v.v[i]),
			    map_value(r->type, colon + 1));
		}
		return t;
	case REG_T_TIME:
	case REG_T_TABLE:
		break;
	}
	return NULL;
}

static struct toml_value *
zero_value(const struct reg_row *r)
{
	switch (r->type) {
	case REG_T_STRING:
		return new_string("");
	case REG_T_BOOL:
		return toml_new_bool(false);
	case REG_T_INT:
		return toml_new_integer(0);
	case REG_T_FLOAT:
		return toml_new_float(0);
	case REG_T_DURATION:
		return new_duration(NULL);
	case REG_T_TABLE:
		return toml_new_table(TOML_TABLE_HEADER);
	default:
		return NULL;
	}
}

/*
 * What the template has that the entry has not, as mergo.Merge (which
 * gitlab-runner's template merge is) fills what is unset: tables are
 * merged key by key, everything else is taken whole.
 */
static void
merge_missing(struct toml_value *dst, const struct toml_value *src, const char *executor,
    bool top)
{
	const struct toml_kv *kv;
	struct toml_value *d;
	size_t i;

	for (i = 0; i < src->u.table.len; i++) {
		kv = &src->u.table.items[i];
		if (top && (!allowed(kv->key.ptr, executor) || strcmp(kv->key.ptr, "token") == 0))
			continue;
		d = toml_getn(dst, kv->key.ptr, kv->key.len);
		if (d == NULL)
			toml_table_set(dst, kv->key.ptr, kv->key.len, toml_clone(kv->value));
		else if (d->type == TOML_TABLE && kv->value->type == TOML_TABLE)
			merge_missing(d, kv->value, executor, false);
	}
}

struct toml_value *
reg_entry_build(const struct reg_value *v, const char *executor, const struct toml_value *tmpl)
{
	struct toml_value *entry = toml_new_table(TOML_TABLE_HEADER), *val;
	const struct toml_value *from;
	const struct reg_row *r;
	const char *dot, *key;
	size_t i, plen;
	bool written;

	for (i = 0; i < REG_N; i++) {
		r = &reg_rows[i];
		if (!allowed(r->path, executor))
			continue;
		dot = strrchr(r->path, '.');
		plen = dot != NULL ? (size_t)(dot - r->path) : 0;
		key = dot != NULL ? dot + 1 : r->path;
		/* Made here, at its first row, so tables keep gitlab-runner's order. */
		if ((written = always_written(r->path, plen, executor)))
			(void)table_at(entry, r->path, plen);
		if (r->type == REG_T_TIME) {
			config_set_time(table_at(entry, r->path, plen), key, (time_t)v[i].i,
			    v[i].given);
			continue;
		}
		val = NULL;
		if (r->flag != NULL && v[i].given)
			val = given_value(r, &v[i]);
		else if (r->flag == NULL && v[i].given && r->type == REG_T_INT)
			val = toml_new_integer(v[i].i);
		if (val == NULL && r->flag != NULL && tmpl != NULL &&
		    strcmp(r->path, "token") != 0 && (from = value_at(tmpl, r->path)) != NULL)
			val = toml_clone(from);
		if (val == NULL && r->zero && written)
			val = zero_value(r);
		if (val != NULL)
			toml_table_set(table_at(entry, r->path, plen), key, strlen(key), val);
	}
	if (tmpl != NULL)
		merge_missing(entry, tmpl, executor, true);
	return entry;
}
