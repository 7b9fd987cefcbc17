/*
 * Command-line errors, the same for every command; see cli.h.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>

#include "lib/cli.h"

int
cmd_usage_error(const char *usage, const char *fmt, ...)
{
	va_list ap;

	fputs("runner: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: %s\n", usage);
	return 2;
}

int
cmd_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts,
    const char *cmd, const char *usage)
{
	int ch = getopt_long(argc, argv, shortopts, longopts, NULL);

	if (ch == ':') {
		cmd_usage_error(usage, "%s: %s needs a value", cmd, argv[optind - 1]);
		return CMD_BAD_FLAG;
	}
	if (ch == '?') {
		cmd_usage_error(usage, "%s: unknown flag '%s'", cmd, argv[optind - 1]);
		return CMD_BAD_FLAG;
	}
	return ch;
}

int
cmd_no_arguments(int argc, char **argv, const char *cmd, const char *usage)
{
	if (optind < argc)
		return cmd_usage_error(usage, "%s: unexpected argument '%s'", cmd, argv[optind]);
	return 0;
}
