/*
 * Commands as tables, in the shape of tmux's cmd_entry: each command
 * declares its options (long name, short letter, environment variable,
 * type, where the value goes, help) and one parser reads them.  The flag
 * errors, `--help`, `runner help COMMAND` and the environment fallback
 * all come from the table, so they are the same for every command, and a
 * gitlab-runner flag is added as one line of data.
 *
 * The rules, gitlab-runner's where it has one:
 *   --name VALUE, --name=VALUE, -x VALUE, -xVALUE; short flags cluster
 *   (-nc FILE); a bool is --name, or --name=true|false; "--" ends the
 *   options.  Nothing takes arguments: one is a usage error.
 *   The command line wins; an option it did not set takes its environment
 *   variable when that is set and not empty, else its default.  Two
 *   options may share a field (--name and --description): a field the
 *   command line set takes no environment variable.
 *   Values are borrowed: strings point into argv, environ or the table.
 */
#ifndef LIB_CLI_H
#define LIB_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum cli_type {
	CLI_BOOL,		/* bool */
	CLI_STRING,		/* const char *, NULL when not given */
	CLI_STRINGS,		/* struct strv: each use adds one (copied) */
	CLI_INT,		/* int64_t, a whole number in [min, max] */
	CLI_DURATION,		/* uint64_t milliseconds, a Go duration above 0 */
	CLI_IGNORED_BOOL,	/* gitlab-runner's, meaningless here: accepted, dropped */
	CLI_IGNORED_VALUE,	/* the same, with a value */
};

struct cli_option {
	const char	*name;		/* long name, without "--" */
	char		 short_name;	/* 0: none */
	enum cli_type	 type;
	const char	*env;		/* the environment variable, or NULL */
	size_t		 offset;	/* of the field in the command's options struct */
	const char	*arg;		/* the value's name in the help ("FILE") */
	const char	*help;
	const char	*def;		/* the default, read as a value would be; or NULL */
	int64_t		 min, max;	/* CLI_INT: both 0 means any int64_t */
	const char	*what;		/* CLI_INT: "is not <what>" ("a runner id") */
};

/*
 * One line of a table, the fields in their order; the rarer ones (.def,
 * .min, .max, .what) go after, designated.  The table ends with CLI_END.
 */
#define CLI_OPT(n, s, t, e, off, a, h, ...) { .name = (n), .short_name = (s), \
	.type = (t), .env = (e), .offset = (off), .arg = (a), .help = (h), __VA_ARGS__ }
#define CLI_END	{ .name = NULL }

/*
 * Where the parser marks each option given (by the command line or the
 * environment, not by a default), for the commands that ask cli_given().
 */
#define CLI_MAX_OPTIONS	512
struct cli_given {
	uint8_t	bits[CLI_MAX_OPTIONS / 8];
};

struct cli_command {
	const char	*name;
	const char	*summary;	/* one line, for `runner help` */
	const char	*usage;		/* "runner list [-c FILE]" */
	const char	*help;		/* what it does, for --help; or NULL */
	const struct cli_option *options; /* ends with { .name = NULL } */
	size_t		 opts_size;	/* sizeof the options struct */
	/*
	 * offsetof a struct cli_given in the options struct, or 0 for none
	 * (it is never the first member).
	 */
	size_t		 given;
	/* The command, on its parsed options; returns the exit status. */
	int		(*run)(const struct cli_command *cmd, void *opts);
};

/*
 * Parse argv (argv[0] is the command's name) into opts, which the caller
 * zeroed.  0: go on; 1: the help was printed (exit 0); -1: a usage error
 * was printed (exit 2).  cli_release() frees what it stored, in every case.
 */
int	cli_parse(const struct cli_command *cmd, int argc, char **argv, void *opts);
void	cli_release(const struct cli_command *cmd, void *opts);

/* Parse, run, release: the process exit status. */
int	cli_run(const struct cli_command *cmd, int argc, char **argv);

/* `runner COMMAND --help` and `runner help COMMAND`. */
void	cli_help(const struct cli_command *cmd, FILE *f);

/* Was the option of this long name given?  (cmd->given must be set.) */
bool	cli_given(const struct cli_command *cmd, const void *opts, const char *name);

/*
 * Print "runner: <message>" and the command's usage line on stderr, and
 * return the exit status for a usage error (2).
 */
int	cli_usage_error(const struct cli_command *cmd, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));

#endif
