/*
 * The one parser of every command's options; see cli.h for the rules.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cli.h"
#include "lib/duration.h"
#include "lib/log.h"
#include "lib/strconv.h"
#include "lib/strv.h"
#include "lib/xmalloc.h"

/* One parse: the fields the command line or the environment set, by option. */
struct parse {
	const struct cli_command *cmd;
	char			*opts;
	size_t			 n;
	struct cli_given	 set;
};

static bool
bit(const struct cli_given *g, size_t i)
{
	return (g->bits[i / 8] >> (i % 8)) & 1;
}

static void
set_bit(struct cli_given *g, size_t i)
{
	g->bits[i / 8] |= (uint8_t)(1u << (i % 8));
}

static bool
takes_value(const struct cli_option *o)
{
	return o->type != CLI_BOOL && o->type != CLI_IGNORED_BOOL;
}

static bool
ignored(const struct cli_option *o)
{
	return o->type == CLI_IGNORED_BOOL || o->type == CLI_IGNORED_VALUE;
}

int
cli_usage_error(const struct cli_command *cmd, const char *fmt, ...)
{
	va_list ap;

	fputs("runner: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: %s\n", cmd->usage);
	return 2;
}

static int
bad_value(struct parse *p, const char *from, const char *value, const char *what)
{
	cli_usage_error(p->cmd, "%s: %s: \"%s\" is not %s", p->cmd->name, from, value, what);
	return -1;
}

/*
 * Store one value (NULL: a bool given bare) where option idx says; from
 * names where it came from in the error ("--limit", "$RUNNER_LIMIT").
 * A default is stored as any value, but is not "given".
 */
static int
set_value(struct parse *p, size_t idx, const char *value, const char *from, bool given)
{
	const struct cli_option *o = &p->cmd->options[idx];
	char *field = p->opts + o->offset;
	int64_t n, ns;

	switch (o->type) {
	case CLI_BOOL:
		if (value == NULL)
			*(bool *)field = true;
		else if (strconv_parse_bool(value, (bool *)field) != 0)
			return bad_value(p, from, value, "true or false");
		break;
	case CLI_STRING:
		*(const char **)field = value;
		break;
	case CLI_STRINGS:
		strv_push((struct strv *)field, value);
		break;
	case CLI_INT:
		if (strconv_parse_int(value, &n) != 0 ||
		    ((o->min != 0 || o->max != 0) && (n < o->min || n > o->max)))
			return bad_value(p, from, value, o->what != NULL ? o->what :
			    "a whole number");
		*(int64_t *)field = n;
		break;
	case CLI_DURATION:
		if (duration_parse(value, &ns) == -1 || ns <= 0)
			return bad_value(p, from, value, "a duration");
		*(uint64_t *)field = (uint64_t)(ns / 1000000);
		break;
	case CLI_IGNORED_BOOL:
	case CLI_IGNORED_VALUE:
		return 0;
	}
	set_bit(&p->set, idx);
	if (given && p->cmd->given != 0)
		set_bit((struct cli_given *)(p->opts + p->cmd->given), idx);
	return 0;
}

/* Did an option that shares option idx's field set it already? */
static bool
field_set(const struct parse *p, size_t idx)
{
	const struct cli_option *opts = p->cmd->options;
	size_t j;

	for (j = 0; j < p->n; j++)
		if (bit(&p->set, j) && opts[j].offset == opts[idx].offset && !ignored(&opts[j]))
			return true;
	return false;
}

static int
set_from_flag(struct parse *p, size_t idx, const char *value, bool given)
{
	char from[128];

	snprintf(from, sizeof(from), "--%s", p->cmd->options[idx].name);
	return set_value(p, idx, value, from, given);
}

/* argv[*i] is "--name" or "--name=value"; the value may be the next word. */
static int
long_option(struct parse *p, int argc, char **argv, int *i)
{
	const char *arg = argv[*i], *name = arg + 2, *eq = strchr(name, '=');
	size_t len = eq != NULL ? (size_t)(eq - name) : strlen(name), idx;
	const struct cli_option *o;

	for (idx = 0; idx < p->n; idx++)
		if (strlen(p->cmd->options[idx].name) == len &&
		    strncmp(p->cmd->options[idx].name, name, len) == 0)
			break;
	if (idx == p->n) {
		if (strcmp(name, "help") == 0) {
			cli_help(p->cmd, stdout);
			return 1;
		}
		cli_usage_error(p->cmd, "%s: unknown flag '%s'", p->cmd->name, arg);
		return -1;
	}
	o = &p->cmd->options[idx];
	if (!takes_value(o))
		return set_from_flag(p, idx, eq != NULL ? eq + 1 : NULL, true);
	if (eq != NULL)
		return set_from_flag(p, idx, eq + 1, true);
	if (*i + 1 >= argc) {
		cli_usage_error(p->cmd, "%s: %s needs a value", p->cmd->name, arg);
		return -1;
	}
	return set_from_flag(p, idx, argv[++*i], true);
}

/* argv[*i] is "-x", "-xVALUE", "-x VALUE" or bools clustered ("-nc FILE"). */
static int
short_options(struct parse *p, int argc, char **argv, int *i)
{
	const char *c;
	size_t idx;

	for (c = argv[*i] + 1; *c != '\0'; c++) {
		for (idx = 0; idx < p->n; idx++)
			if (p->cmd->options[idx].short_name == *c)
				break;
		if (idx == p->n) {
			if (*c == 'h') {
				cli_help(p->cmd, stdout);
				return 1;
			}
			cli_usage_error(p->cmd, "%s: unknown flag '-%c'", p->cmd->name, *c);
			return -1;
		}
		if (!takes_value(&p->cmd->options[idx])) {
			if (set_from_flag(p, idx, NULL, true) != 0)
				return -1;
			continue;
		}
		if (c[1] != '\0')
			return set_from_flag(p, idx, c + 1, true);
		if (*i + 1 >= argc) {
			cli_usage_error(p->cmd, "%s: -%c needs a value", p->cmd->name, *c);
			return -1;
		}
		return set_from_flag(p, idx, argv[++*i], true);
	}
	return 0;
}

/* What the command line left: the environment variable, else the default. */
static int
fill_rest(struct parse *p)
{
	const struct cli_option *o;
	const char *v;
	char from[128];
	size_t idx;

	for (idx = 0; idx < p->n; idx++) {
		o = &p->cmd->options[idx];
		if (ignored(o) || field_set(p, idx))
			continue;
		if (o->env != NULL && (v = getenv(o->env)) != NULL && *v != '\0') {
			snprintf(from, sizeof(from), "$%s", o->env);
			if (set_value(p, idx, v, from, true) != 0)
				return -1;
		} else if (o->def != NULL && set_from_flag(p, idx, o->def, false) != 0)
			return -1;
	}
	return 0;
}

int
cli_parse(const struct cli_command *cmd, int argc, char **argv, void *opts)
{
	struct parse p = { .cmd = cmd, .opts = opts };
	const char *arg;
	int i, rc;

	while (cmd->options != NULL && cmd->options[p.n].name != NULL)
		p.n++;
	if (p.n > CLI_MAX_OPTIONS)
		fatalx("%s: %zu options, more than %d", cmd->name, p.n, CLI_MAX_OPTIONS);
	for (i = 1; i < argc; i++) {
		arg = argv[i];
		if (strcmp(arg, "--") == 0) {
			i++;
			break;
		}
		if (arg[0] != '-' || arg[1] == '\0')
			break;
		rc = arg[1] == '-' ? long_option(&p, argc, argv, &i) :
		    short_options(&p, argc, argv, &i);
		if (rc != 0)
			return rc;
	}
	if (i < argc) {
		cli_usage_error(cmd, "%s: unexpected argument '%s'", cmd->name, argv[i]);
		return -1;
	}
	return fill_rest(&p);
}

void
cli_release(const struct cli_command *cmd, void *opts)
{
	const struct cli_option *o;

	for (o = cmd->options; o != NULL && o->name != NULL; o++)
		if (o->type == CLI_STRINGS)
			strv_release((struct strv *)((char *)opts + o->offset));
}

int
cli_run(const struct cli_command *cmd, int argc, char **argv)
{
	void *opts = xcalloc(1, cmd->opts_size > 0 ? cmd->opts_size : 1);
	int rc = cli_parse(cmd, argc, argv, opts);

	if (rc == 0)
		rc = cmd->run(cmd, opts);
	else
		rc = rc > 0 ? 0 : 2;
	cli_release(cmd, opts);
	free(opts);
	return rc;
}

bool
cli_given(const struct cli_command *cmd, const void *opts, const char *name)
{
	const struct cli_given *g = (const struct cli_given *)((const char *)opts + cmd->given);
	size_t idx;

	for (idx = 0; cmd->options[idx].name != NULL; idx++)
		if (strcmp(cmd->options[idx].name, name) == 0)
			return cmd->given != 0 && bit(g, idx);
	fatalx("%s: no option --%s", cmd->name, name);
}

#define HELP_COLUMN	32
#define HELP_WIDTH	80

/*
 * "  -c, --config FILE" and its help, the help starting in one column and
 * folded at the blanks to fit a terminal.
 */
static void
help_line(FILE *f, char short_name, const char *name, const char *arg, const char *text,
    const char *def, const char *env)
{
	char left[128], right[1024];
	const char *p, *blank;
	int n, col;

	n = snprintf(left, sizeof(left), "  %c%c%c --%s%s%s", short_name ? '-' : ' ',
	    short_name ? short_name : ' ', short_name ? ',' : ' ', name, arg ? " " : "",
	    arg ? arg : "");
	snprintf(right, sizeof(right), "%s%s%s%s%s%s", text != NULL ? text : "",
	    def != NULL && *def ? " (default: " : "", def != NULL && *def ? def : "",
	    def != NULL && *def ? ")" : "", env != NULL ? " [$" : "", env != NULL ? env : "");
	if (env != NULL)
		strncat(right, "]", sizeof(right) - strlen(right) - 1);
	fputs(left, f);
	if (n >= HELP_COLUMN)
		fprintf(f, "\n%*s", HELP_COLUMN, "");
	else
		fprintf(f, "%*s", HELP_COLUMN - n, "");
	col = HELP_COLUMN;
	for (p = right; *p != '\0'; p = *blank ? blank + 1 : blank) {
		blank = strchrnul(p, ' ');
		n = (int)(blank - p);
		if (col > HELP_COLUMN && col + 1 + n > HELP_WIDTH) {
			fprintf(f, "\n%*s", HELP_COLUMN, "");
			col = HELP_COLUMN;
		} else if (col > HELP_COLUMN) {
			fputc(' ', f);
			col++;
		}
		fwrite(p, 1, (size_t)n, f);
		col += n;
	}
	fputc('\n', f);
}

void
cli_help(const struct cli_command *cmd, FILE *f)
{
	const struct cli_option *o;

	fprintf(f, "usage: %s\n\n%s\n", cmd->usage, cmd->help != NULL ? cmd->help :
	    cmd->summary);
	fputs("\nOptions:\n", f);
	for (o = cmd->options; o != NULL && o->name != NULL; o++)
		help_line(f, o->short_name, o->name, takes_value(o) ?
		    (o->arg != NULL ? o->arg : "VALUE") : NULL, o->help, o->def, o->env);
	help_line(f, 'h', "help", NULL, "show this help", NULL, NULL);
}
