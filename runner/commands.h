/*
 * The commands `runner` offers, one function each, in one file each
 * (cmd_<name>.c).  main.c holds the table that maps names to them.
 *
 * A command gets the arguments after its name (argv[0] is the command
 * name) and returns the process exit status.  Global options were already
 * applied by main.c.
 */
#ifndef RUNNER_COMMANDS_H
#define RUNNER_COMMANDS_H

int	cmd_list(int argc, char **argv);

/*
 * Shared by the commands: print "runner <cmd>: <message>" and the command's
 * usage line on stderr, and return the exit status for a usage error (2).
 */
int	cmd_usage_error(const char *usage, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));

/* The config path: the -c/--config value if given, else the default. */
char	*cmd_config_path(const char *flag_value);

#endif
