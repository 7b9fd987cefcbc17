/*
 * What every command does the same way with its command line: flag errors
 * and usage errors in one line, followed by the command's usage.
 */
#ifndef LIB_CLI_H
#define LIB_CLI_H

/*
 * Shared by the commands: print "runner <cmd>: <message>" and the command's
 * usage line on stderr, and return the exit status for a usage error (2).
 */
int	cmd_usage_error(const char *usage, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));

/*
 * getopt_long() for a command (call with optind = 1 and opterr = 0 first),
 * with every command's flag errors reported the same way: returns the
 * option, -1 after the last, or CMD_BAD_FLAG once a usage error (unknown
 * flag, missing value) was printed: return 2 then.
 */
#define CMD_BAD_FLAG	(-2)
struct option;
int	cmd_getopt(int argc, char **argv, const char *shortopts,
	    const struct option *longopts, const char *cmd, const char *usage);
/* After the options: 0, or 2 after a usage error if arguments are left. */
int	cmd_no_arguments(int argc, char **argv, const char *cmd, const char *usage);

#endif
