/*
 * What a job's cache and artifact stages are given (script.h's
 * script_cache, script_artifact, script_dependency), worked out once from
 * the payload and the job's variables: cache keys expanded and sanitised
 * as gitlab-runner does (cache/cachekey), their local files, the fallback
 * keys, the expanded policy; the dependencies that have artifacts.
 */
#ifndef RUNNER_TRANSFERS_H
#define RUNNER_TRANSFERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/api.h"
#include "lib/strv.h"
#include "runner/script.h"

struct job_vars;

struct transfers {
	struct script_cache		*caches;
	size_t				 n_caches;
	struct script_artifact		*artifacts;
	size_t				 n_artifacts;
	struct script_dependency	*dependencies;
	size_t				 n_dependencies;
	struct strv			 owned;		/* every string made here */
	struct script_cache_key		**keys;		/* one array per cache */
	struct strv			*warnings;	/* one per cache */
	struct strv			*lists;		/* the expanded path lists */
	size_t				 n_lists;
};

struct transfers_input {
	const char	*cache_dir;	/* absolute: [[runners]] cache_dir or <working dir>/cache */
	bool		 hash_keys;	/* FF_HASH_CACHE_KEYS */
};

/*
 * Fill t; borrowed strings point into job and v, which must outlive t.
 * Cache keys, fallback keys and policies, cache paths, and artifact
 * paths, excludes and names are expanded with the job's variables
 * (job_vars_expand()).
 */
void	transfers_make(struct transfers *t, const struct api_job *job,
	    const struct job_vars *v, const struct transfers_input *in);
void	transfers_release(struct transfers *t);

/*
 * gitlab-runner's cachekey.Sanitize: %2F and \ become /, %2E becomes .,
 * the path is cleaned as rooted (no way above it), trailing blanks of the
 * last parts go.  Returns a new string, or NULL if nothing is left.
 */
char	*cache_key_sanitize(const char *raw);

#endif
