/*
 * The journal: what must still reach GitLab about a job, on disk until it
 * has.  One small TOML file per job, <state dir>/journal/<job id>.toml,
 * next to the job's log file <job id>.log; written atomically (temp file,
 * fsync, rename) whenever it changes, removed once GitLab has the final
 * report.  A daemon started after a crash, a kill -9 or a reboot reads the
 * journal and finishes every report before it asks for new jobs.
 */
#ifndef RUNNER_JOURNAL_H
#define RUNNER_JOURNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/strv.h"

struct journal_entry {
	int64_t	 job_id;
	char	*job_token;
	char	*url;
	char	*tls_ca_file;
	char	*tls_cert_file;
	char	*tls_key_file;
	char	*runner_name;
	char	*log_path;
	bool	 finished;	/* false: the job was still running */
	char	*state;		/* finished: success or failed */
	char	*failure_reason;
	int64_t	 exit_code;
	int64_t	 retry_limit;
	/*
	 * What the executor made for the job ("container:NAME",
	 * "volume:NAME", "network:NAME"), each written here before it was
	 * created: the sweep removes what a crash left.
	 */
	struct strv executor_objects;
};

/* <state dir>/journal, created (0700) if needed; the caller frees it. */
char	*journal_dir(const char *state_dir, char **cause);
/* Paths of <dir>/<id>.toml and <dir>/<id>.log; the caller frees them. */
char	*journal_path(const char *dir, int64_t job_id, const char *suffix);

int	 journal_write(const char *path, const struct journal_entry *e, char **cause);
int	 journal_read(const char *path, struct journal_entry *e, char **cause);
void	 journal_entry_release(struct journal_entry *e);
/*
 * The .toml files in <state dir>/journal, sorted; *n their count.
 * NULL-terminated.  Creates nothing: a journal that does not exist holds
 * no report.  Any other failure to read it sets *cause (the caller frees
 * it), since reports would be lost silently.
 */
char	**journal_list(const char *state_dir, size_t *n, char **cause);

#endif
