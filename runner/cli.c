/*
 * What every command does the same way: report a usage error in one line
 * followed by the command's usage, and find config.toml.
 */
#include <stdarg.h>
#include <stdio.h>

#include "runner/commands.h"
#include "runner/config.h"
#include "runner/xmalloc.h"

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

char *
cmd_config_path(const char *flag_value)
{
	if (flag_value != NULL && *flag_value != '\0')
		return xstrdup(flag_value);
	return config_default_path();
}
