/*
 * The [[runners]] keys `register` writes, as data: register_flags.def has
 * one row per key, in gitlab-runner's order, and each row that is one of
 * gitlab-runner's flags becomes both an option of `register` (its CLI_OPT
 * row, in cmd_register.c) and a key of the new entry (reg_entry_build()).
 * Adding a flag is adding a row.
 */
#ifndef RUNNER_REGISTER_FLAGS_H
#define RUNNER_REGISTER_FLAGS_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/strv.h"

struct toml_value;

/* How a row's value is given and written. */
enum reg_type {
	REG_T_STRING,
	REG_T_BOOL,
	REG_T_INT,
	REG_T_FLOAT,		/* given as text; a TOML float */
	REG_T_DURATION,		/* a Go duration; written as Go prints it ("1h30m0s") */
	REG_T_STRINGS,		/* repeated; an array of strings */
	REG_T_INTS,		/* repeated; an array of integers */
	REG_T_MAP,		/* repeated KEY:VALUE; a table of strings */
	REG_T_MAP_BOOL,		/* repeated KEY:true|false; a table of booleans */
	REG_T_MAP_INT,		/* repeated KEY:N; a table of integers */
	REG_T_TIME,		/* not a flag: a timestamp, or the zero time */
	REG_T_TABLE,		/* not a flag: an empty table gitlab-runner always writes */
};

enum reg_id {
#define REG_FLAG(id, ...)	REG_##id,
#define REG_KEY(id, ...)	REG_##id,
#include "runner/register_flags.def"
	REG_N
};

struct reg_row {
	const char	*flag;	/* the long name without "--"; NULL: not a flag */
	const char	*path;	/* dotted, below the [[runners]] entry: "cache.s3.BucketName" */
	enum reg_type	 type;
	/* gitlab-runner writes it, zero-valued, whenever its table is written. */
	bool		 zero;
};

extern const struct reg_row reg_rows[REG_N];

/* One row's value, as the option parser left it (or the command set it). */
struct reg_value {
	const char	*s;	/* STRING, FLOAT, DURATION (borrowed) */
	bool		 b;	/* BOOL */
	int64_t		 i;	/* INT; TIME: a time_t */
	struct strv	 v;	/* STRINGS, INTS and the maps (owned by the parser) */
	bool		 given;	/* on the command line or in the environment; TIME: set */
};

/* Is this one of gitlab-runner's executor names? */
bool	reg_executor_known(const char *name);
/* Its names, for the prompt and the error: "custom, docker, ...". */
extern const char reg_executor_names[];

/*
 * Check the values the parser kept as text (numbers, durations, maps).
 * 0, or -1 with *cause set (the caller frees it).
 */
int	reg_values_check(const struct reg_value *v, char **cause);

/*
 * The new [[runners]] entry: every row given, and every zero row whose
 * table is written, in the rows' order.  The tables of an executor are
 * written only for that executor ([runners.docker] for docker, as
 * gitlab-runner does); [runners.cache] always.  tmpl, when not NULL, is
 * the --template-config file's one [[runners]] entry: what the flags did
 * not give is taken from it (its token never).  Call reg_values_check()
 * first.
 */
struct toml_value *reg_entry_build(const struct reg_value *v, const char *executor,
	    const struct toml_value *tmpl);

#endif
