/*
 * Cache keys and the transfer lists of a job (transfers.h).
 *
 * A cache key names a directory under the cache dir, and it comes from the
 * job's YAML and variables: sanitising it is what keeps "../../etc" or
 * "%2e%2e/x" from naming a file outside the cache.  The result is cleaned
 * as a rooted path, so no ".." survives it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "lib/buf.h"
#include "lib/xmalloc.h"
#include "runner/transfers.h"
#include "runner/vars.h"

/* %2f, %2F -> '/', %2e, %2E -> '.', '\' -> '/', in one left-to-right pass. */
static char *
normalise(const char *s)
{
	struct buf b;

	buf_init(&b, BUF_UNLIMITED);
	while (*s != '\0') {
		if (s[0] == '%' && s[1] == '2' && (s[2] == 'f' || s[2] == 'F')) {
			buf_putc(&b, '/');
			s += 3;
		} else if (s[0] == '%' && s[1] == '2' && (s[2] == 'e' || s[2] == 'E')) {
			buf_putc(&b, '.');
			s += 3;
		} else if (*s == '\\') {
			buf_putc(&b, '/');
			s++;
		} else
			buf_putc(&b, *s++);
	}
	buf_putc(&b, '\0');
	return buf_detach(&b, NULL);
}

static int
is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

char *
cache_key_sanitize(const char *raw)
{
	char *norm = normalise(raw), *p, *part, *save = NULL;
	struct strv parts = { 0 };
	struct buf out;
	size_t n, i, len;

	/* Go's path.Clean("/" + key): ".." at the root stays at the root. */
	for (part = strtok_r(norm, "/", &save); part != NULL; part = strtok_r(NULL, "/", &save)) {
		if (strcmp(part, ".") == 0)
			continue;
		if (strcmp(part, "..") == 0) {
			if (parts.n > 0) {
				free(parts.v[--parts.n]);
				parts.v[parts.n] = NULL;
			}
			continue;
		}
		strv_push(&parts, part);
	}
	free(norm);
	/* Trailing blanks of the last part go; a part left empty goes too. */
	for (n = parts.n; n > 0; n--) {
		p = parts.v[n - 1];
		len = strlen(p);
		while (len > 0 && is_blank(p[len - 1]))
			p[--len] = '\0';
		if (len > 0)
			break;
	}
	buf_init(&out, BUF_UNLIMITED);
	for (i = 0; i < n; i++) {
		if (i > 0)
			buf_putc(&out, '/');
		buf_puts(&out, parts.v[i]);
	}
	strv_release(&parts);
	if (out.len == 0) {
		buf_release(&out);
		return NULL;
	}
	return buf_detach(&out, NULL);
}

static const char *
own(struct transfers *t, char *s)
{
	strv_push_owned(&t->owned, s);
	return s;
}

static char *
sha256_hex(const char *s)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0, i;
	char *hex;

	if (EVP_Digest(s, strlen(s), md, &n, EVP_sha256(), NULL) != 1)
		n = 0;
	hex = xcalloc(2 * n + 1, 1);
	for (i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return hex;
}

struct key_ctx {
	struct transfers		*t;
	const struct transfers_input	*in;
	const char			*project;
	struct script_cache_key		*keys;
	size_t				 n;
	struct strv			 warnings;
};

/* Add the sanitised form of raw (already expanded); false if it was refused. */
static bool
add_key(struct key_ctx *k, const char *raw, bool fallback_var)
{
	/* Hashed keys name no path, so gitlab-runner does not sanitise them. */
	char *key = k->in->hash_keys ? (*raw != '\0' ? xstrdup(raw) : NULL) :
	    cache_key_sanitize(raw);
	char *dir, *trimmed;
	size_t len;

	if (key == NULL) {
		strv_push_owned(&k->warnings,
		    xasprintf("cache key \"%s\" could not be sanitized", raw));
		return false;
	}
	if (strcmp(key, raw) != 0)
		strv_push_owned(&k->warnings,
		    xasprintf("cache key \"%s\" sanitized to \"%s\"", raw, key));
	if (fallback_var) {
		/* A protected branch's cache must not be reached from elsewhere. */
		trimmed = xstrdup(key);
		len = strlen(trimmed);
		while (len > 0 && (trimmed[len - 1] == '.' || trimmed[len - 1] == ' '))
			trimmed[--len] = '\0';
		if (len >= 10 && strcmp(trimmed + len - 10, "-protected") == 0) {
			strv_push_owned(&k->warnings, xasprintf("CACHE_FALLBACK_KEY \"%s\" "
			    "not allowed to end in \"-protected\"", raw));
			free(trimmed);
			free(key);
			return false;
		}
		free(trimmed);
	}
	dir = k->in->hash_keys ? sha256_hex(key) : xstrdup(key);
	k->keys = xreallocarray(k->keys, k->n + 1, sizeof(*k->keys));
	k->keys[k->n].key = own(k->t, key);
	k->keys[k->n].file = own(k->t, xasprintf("%s/%s/%s/cache.zip", k->in->cache_dir,
	    k->project, dir));
	k->n++;
	free(dir);
	return true;
}

/*
 * from with every entry expanded, as gitlab-runner's cache-archiver and
 * artifacts-uploader expand their --path, --exclude and --name.
 */
static struct script_lines
expanded(struct transfers *t, const struct job_vars *v, const struct strv *from)
{
	struct strv *to = &t->lists[t->n_lists++];
	struct script_lines out;
	size_t i;

	for (i = 0; i < from->n; i++)
		strv_push_owned(to, job_vars_expand(v, from->v[i]));
	out.v = (const char *const *)to->v;
	out.n = to->n;
	return out;
}

static void
policy(struct script_cache *c, const char *p)
{
	c->pull = p == NULL || *p == '\0' || strcmp(p, "pull") == 0 ||
	    strcmp(p, "pull-push") == 0;
	c->push = p == NULL || *p == '\0' || strcmp(p, "push") == 0 ||
	    strcmp(p, "pull-push") == 0;
}

static void
make_cache(struct transfers *t, struct script_cache *c, const struct api_cache *ac,
    const struct api_job *job, const struct job_vars *v, const struct transfers_input *in,
    const char *project)
{
	struct key_ctx k = { .t = t, .in = in, .project = project };
	const char *fallback;
	char *raw, *pol;
	size_t i;

	if (ac->key != NULL && *ac->key != '\0')
		raw = job_vars_expand(v, ac->key);
	else
		raw = xasprintf("%s/%s", job->job_info.name != NULL ? job->job_info.name : "",
		    job->git_info.ref != NULL ? job->git_info.ref : "");
	c->shown_key = own(t, xstrdup(raw));
	if (add_key(&k, raw, false)) {
		for (i = 0; i < ac->fallback_keys.n; i++) {
			char *fk = job_vars_expand(v, ac->fallback_keys.v[i]);

			if (*fk != '\0')
				(void)add_key(&k, fk, false);
			free(fk);
		}
		if ((fallback = job_vars_get(v, "CACHE_FALLBACK_KEY")) != NULL &&
		    *fallback != '\0')
			(void)add_key(&k, fallback, true);
	}
	free(raw);
	pol = job_vars_expand(v, ac->policy != NULL ? ac->policy : "");
	policy(c, pol);
	if (!c->pull && !c->push)
		strv_push_owned(&k.warnings, xasprintf("unknown cache policy \"%s\": "
		    "the cache is neither restored nor saved", pol));
	free(pol);
	c->keys = k.keys;
	c->n_keys = k.n;
	t->keys[t->n_caches] = k.keys;
	/* The strv is kept as it is from here on, so its array can be lent. */
	t->warnings[t->n_caches] = k.warnings;
	c->warnings.v = (const char *const *)k.warnings.v;
	c->warnings.n = k.warnings.n;
	c->paths = expanded(t, v, &ac->paths);
	c->untracked = ac->untracked;
	c->when = ac->when != NULL ? ac->when : "on_success";
}

void
transfers_make(struct transfers *t, const struct api_job *job, const struct job_vars *v,
    const struct transfers_input *in)
{
	char *project = job_project_path(job->job_info.project_full_path,
	    job->job_info.project_id);
	size_t i;

	memset(t, 0, sizeof(*t));
	/* Every list at once: the caches and artifacts borrow their arrays. */
	t->lists = xcalloc(job->n_caches + 2 * job->n_artifacts + 1, sizeof(*t->lists));
	t->caches = xcalloc(job->n_caches + 1, sizeof(*t->caches));
	t->keys = xcalloc(job->n_caches + 1, sizeof(*t->keys));
	t->warnings = xcalloc(job->n_caches + 1, sizeof(*t->warnings));
	for (i = 0; i < job->n_caches; i++) {
		make_cache(t, &t->caches[i], &job->caches[i], job, v, in, project);
		t->n_caches++;
	}
	free(project);

	t->artifacts = xcalloc(job->n_artifacts + 1, sizeof(*t->artifacts));
	for (i = 0; i < job->n_artifacts; i++) {
		const struct api_artifact *aa = &job->artifacts[i];
		struct script_artifact *a = &t->artifacts[t->n_artifacts++];

		a->paths = expanded(t, v, &aa->paths);
		a->exclude = expanded(t, v, &aa->exclude);
		a->untracked = aa->untracked;
		a->name = aa->name != NULL ? own(t, job_vars_expand(v, aa->name)) : NULL;
		a->when = aa->when;
		a->format = aa->artifact_format;
		a->type = aa->artifact_type;
		a->expire_in = aa->expire_in;
	}

	t->dependencies = xcalloc(job->n_dependencies + 1, sizeof(*t->dependencies));
	for (i = 0; i < job->n_dependencies; i++) {
		const struct api_dependency *ad = &job->dependencies[i];
		struct script_dependency *d;

		/* gitlab-runner's jobArtifacts(): only those with a file to fetch. */
		if (ad->artifacts_filename == NULL || *ad->artifacts_filename == '\0')
			continue;
		d = &t->dependencies[t->n_dependencies++];
		d->id = ad->id;
		d->name = ad->name != NULL ? ad->name : "";
		d->token = ad->token != NULL ? ad->token : "";
	}
}

void
transfers_release(struct transfers *t)
{
	size_t i;

	for (i = 0; i < t->n_caches; i++) {
		free(t->keys[i]);
		strv_release(&t->warnings[i]);
	}
	for (i = 0; i < t->n_lists; i++)
		strv_release(&t->lists[i]);
	free(t->lists);
	free(t->keys);
	free(t->warnings);
	free(t->caches);
	free(t->artifacts);
	free(t->dependencies);
	strv_release(&t->owned);
	memset(t, 0, sizeof(*t));
}
