/*
 * `runner install`, `uninstall`, `start`, `stop`, `restart`, `status`:
 * the runner as a systemd service, with gitlab-runner's names and flags.
 *
 * install writes /etc/systemd/system/<name>.service.  Its text is
 * packaging/systemd/runner.service itself, compiled in at build time
 * (the Makefile turns the file into unit_template.inc), with three lines
 * made to fit the flags: the ExecStart command, the condition on the
 * binary and the writable config directory, plus User= for --init-user.
 * One source, so the unit the Debian package ships and the one install
 * writes cannot drift apart; a test checks that install's defaults give
 * the packaged file byte for byte.
 *
 * The other commands are thin: systemctl does the work, and its failure
 * is reported with its exit status.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <spawn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/buf.h"
#include "lib/fdio.h"
#include "lib/log.h"
#include "lib/xmalloc.h"
#include "runner/commands.h"

extern char **environ;

static const char unit_template[] =
#include "unit_template.inc"
    ;

#define UNIT_DIR	"/etc/systemd/system"
#define DEFAULT_NAME	"runner"
/* The template's first line: a unit that starts with it is ours to replace. */
#define UNIT_MARK	"# The runner as a system service."

/* ---- the unit's text ---- */

/*
 * One word of an Exec line as systemd splits it: '%' starts a specifier
 * and '$' a variable everywhere, so both are doubled; a word with blanks,
 * quotes, backslashes or ';' is double-quoted, with C escapes inside.
 * Control characters cannot be written; the caller refuses them first.
 */
char *
service_exec_quote(const char *word)
{
	struct buf b;
	const char *p;
	bool quote = *word == '\0' || strpbrk(word, " \t\"'\\;") != NULL;

	buf_init(&b, BUF_UNLIMITED);
	if (quote)
		buf_putc(&b, '"');
	for (p = word; *p != '\0'; p++) {
		if (*p == '%' || *p == '$')
			buf_putc(&b, *p);
		else if (*p == '"' || *p == '\\')
			buf_putc(&b, '\\');
		buf_putc(&b, *p);
	}
	if (quote)
		buf_putc(&b, '"');
	return buf_detach(&b, NULL);
}

/* A setting that takes the rest of the line as it is (specifiers aside). */
static void
put_specifier_escaped(struct buf *b, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '%')
			buf_putc(b, '%');
		buf_putc(b, *s);
	}
}

static bool
has_control(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

/* Unix user names as useradd takes them; nothing systemd would read otherwise. */
static bool
user_name_ok(const char *s)
{
	if (*s == '\0' || *s == '-' || strlen(s) > 32)
		return false;
	for (; *s != '\0'; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.')
			return false;
	return true;
}

/* The directory part of an absolute path ("/" for "/x"). */
static char *
dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash == NULL || slash == path ? xstrdup("/") : xmemdup(path, (size_t)(slash - path));
}

static void
put_exec_word(struct buf *b, const char *word)
{
	char *q = service_exec_quote(word);

	buf_putc(b, ' ');
	buf_puts(b, q);
	free(q);
}

char *
service_unit_text(const struct service_unit *u, char **cause)
{
	const char *line = unit_template, *eol;
	const char *checked[] = { u->binary, u->working_dir, u->config };
	struct buf b;
	char *q, *dir;
	size_t i, len;

	for (i = 0; i < sizeof(checked) / sizeof(checked[0]); i++)
		if (checked[i] == NULL || checked[i][0] != '/' || has_control(checked[i])) {
			*cause = xasprintf("%s: an absolute path without control characters is "
			    "needed", checked[i] != NULL ? checked[i] : "(none)");
			return NULL;
		}
	if ((u->user != NULL && !user_name_ok(u->user)) ||
	    (u->init_user != NULL && !user_name_ok(u->init_user))) {
		*cause = xasprintf("'%s' is not a user name", u->user != NULL && !user_name_ok(u->user) ?
		    u->user : u->init_user);
		return NULL;
	}
	buf_init(&b, BUF_UNLIMITED);
	for (; *line != '\0'; line = eol + (*eol == '\n')) {
		eol = strchr(line, '\n');
		if (eol == NULL)
			eol = line + strlen(line);
		len = (size_t)(eol - line);
		if (strncmp(line, "ExecStart=", 10) == 0) {
			q = service_exec_quote(u->binary);
			buf_printf(&b, "ExecStart=%s run", q);
			free(q);
			buf_puts(&b, " --working-directory");
			put_exec_word(&b, u->working_dir);
			buf_puts(&b, " --config");
			put_exec_word(&b, u->config);
			if (u->user != NULL) {
				buf_puts(&b, " --user");
				put_exec_word(&b, u->user);
			}
			if (u->syslog_name != NULL) {
				buf_puts(&b, " --syslog --service");
				put_exec_word(&b, u->syslog_name);
			}
			if (u->init_user != NULL)
				buf_printf(&b, "\nUser=%s", u->init_user);
		} else if (strncmp(line, "ConditionFileIsExecutable=", 26) == 0) {
			buf_puts(&b, "ConditionFileIsExecutable=");
			put_specifier_escaped(&b, u->binary);
		} else if (strncmp(line, "ReadWritePaths=", 15) == 0) {
			/* A path list: quoted like an Exec word, but '$' means nothing here. */
			dir = dir_of(u->config);
			q = xasprintf("-%s", dir);
			buf_puts(&b, "ReadWritePaths=");
			if (strpbrk(q, " \t\"'\\") != NULL) {
				buf_putc(&b, '"');
				for (i = 0; q[i] != '\0'; i++) {
					if (q[i] == '"' || q[i] == '\\')
						buf_putc(&b, '\\');
					if (q[i] == '%')
						buf_putc(&b, '%');
					buf_putc(&b, q[i]);
				}
				buf_putc(&b, '"');
			} else
				put_specifier_escaped(&b, q);
			free(q);
			free(dir);
		} else
			buf_append(&b, line, len);
		if (*eol == '\n')
			buf_putc(&b, '\n');
	}
	return buf_detach(&b, NULL);
}

/* ---- systemctl ---- */

static bool
systemd_booted(void)
{
	struct stat st;

	/* sd_booted()'s test: systemd makes this directory at boot. */
	return lstat("/run/systemd/system", &st) == 0 && S_ISDIR(st.st_mode);
}

/* Run systemctl with up to two arguments; its exit status, or -1 (logged). */
static int
systemctl(const char *cmd, const char *verb, const char *arg, bool quiet)
{
	char *argv[] = { "systemctl", (char *)verb, (char *)arg, NULL };
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int rc, status;

	posix_spawn_file_actions_init(&fa);
	if (quiet)
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	rc = posix_spawnp(&pid, "systemctl", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		log_error("%s: cannot run systemctl %s: %s", cmd, verb, strerror(rc));
		return -1;
	}
	while (waitpid(pid, &status, 0) == -1)
		if (errno != EINTR) {
			log_error("%s: systemctl %s: %s", cmd, verb, strerror(errno));
			return -1;
		}
	if (WIFSIGNALED(status)) {
		log_error("%s: systemctl %s %s: killed by %s", cmd, verb, arg ? arg : "",
		    strsignal(WTERMSIG(status)));
		return -1;
	}
	return WEXITSTATUS(status);
}

/* systemctl that must succeed: 0, or 1 after saying how it failed. */
static int
systemctl_must(const char *cmd, const char *verb, const char *arg)
{
	int rc = systemctl(cmd, verb, arg, false);

	if (rc == 0)
		return 0;
	if (rc > 0)
		log_error("%s: systemctl %s%s%s failed with exit status %d", cmd, verb,
		    arg != NULL ? " " : "", arg != NULL ? arg : "", rc);
	return 1;
}

/* ---- the unit file ---- */

/* Was the file at path written by us (install or the package)?  -1: absent. */
static int
unit_is_ours(const char *path)
{
	char head[sizeof(UNIT_MARK)];
	FILE *f = fopen(path, "r");
	size_t n;

	if (f == NULL)
		return errno == ENOENT ? -1 : 0;
	n = fread(head, 1, sizeof(head) - 1, f);
	fclose(f);
	head[n] = '\0';
	return strcmp(head, UNIT_MARK) == 0;
}

/* All or nothing (fd_replace_file): systemd never reads half a unit. */
static int
write_unit(const char *cmd, const char *path, const char *text)
{
	if (fd_replace_file(path, text, strlen(text), 0644) == 0)
		return 0;
	log_error("%s: cannot write %s: %s", cmd, path, strerror(errno));
	return -1;
}

/* ---- the commands ---- */

struct service_flags {
	const char	*name;
	const char	*working_dir;
	const char	*config;
	const char	*user;
	const char	*init_user;
	bool		 syslog;
};


/* "runner" or "runner.service": what systemctl and the file name want. */
static int
check_name(const char *cmd, const char *name)
{
	const char *p;

	if (*name == '\0' || strlen(name) > 200)
		goto bad;
	for (p = name; *p != '\0'; p++)
		if (!isalnum((unsigned char)*p) && strchr(":_.-@", *p) == NULL)
			goto bad;
	return 0;
bad:
	log_error("%s: '%s' is not a service name (letters, digits, ':', '_', '.', '-', '@')",
	    cmd, name);
	return -1;
}

static char *
unit_path(const char *name)
{
	size_t n = strlen(name);

	if (n > 8 && strcmp(name + n - 8, ".service") == 0)
		return xasprintf("%s/%s", UNIT_DIR, name);
	return xasprintf("%s/%s.service", UNIT_DIR, name);
}

static int
need_root(const char *cmd)
{
	if (geteuid() == 0)
		return 0;
	log_error("%s: the system unit lives in %s: run this as root (sudo runner %s)", cmd,
	    UNIT_DIR, cmd);
	return -1;
}

static char *
absolute(const char *path)
{
	char cwd[PATH_MAX];

	if (path[0] == '/' || getcwd(cwd, sizeof(cwd)) == NULL)
		return xstrdup(path);
	return xasprintf("%s/%s", cwd, path);
}

static int
cmd_install(const struct cli_command *cmd, void *opts)
{
	const struct service_flags *f = opts;
	struct service_unit u = { 0 };
	struct passwd *pw;
	char cwd[PATH_MAX], self[PATH_MAX], *path = NULL, *text = NULL, *cause = NULL;
	ssize_t n;
	int rc, ours;

	if (check_name(cmd->name, f->name) != 0)
		return 2;
	if (need_root("install") != 0)
		return 1;
	if (f->user != NULL && f->init_user != NULL) {
		log_error("install: only one of --user and --init-user can be given");
		return 2;
	}
	if (f->user == NULL && f->init_user == NULL) {
		log_error("install: Please specify user that will run the runner service: "
		    "--user USER (jobs run as USER, the daemon as root) or --init-user USER "
		    "(the daemon runs as USER)");
		return 2;
	}
	if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) <= 0) {
		log_error("install: cannot find this binary (/proc/self/exe): %s", strerror(errno));
		return 1;
	}
	self[n] = '\0';
	u.binary = self;
	u.user = f->user;
	u.init_user = f->init_user;
	u.syslog_name = f->syslog ? f->name : NULL;
	/* As gitlab-runner: builds go where install was run unless -d says. */
	if (f->working_dir != NULL)
		u.working_dir = absolute(f->working_dir);
	else
		u.working_dir = xstrdup(getcwd(cwd, sizeof(cwd)) != NULL ? cwd : "/");
	if (f->config != NULL)
		u.config = absolute(f->config);
	else if (f->init_user != NULL) {
		/* The daemon runs as that user: its config is where `runner register` as it puts it. */
		if ((pw = getpwnam(f->init_user)) == NULL) {
			log_error("install: --init-user %s: no such user", f->init_user);
			rc = 1;
			goto out;
		}
		u.config = xasprintf("%s/.gitlab-runner/config.toml", pw->pw_dir);
	} else
		u.config = cmd_config_path(NULL);

	if ((text = service_unit_text(&u, &cause)) == NULL) {
		log_error("install: %s", cause);
		rc = 2;
		goto out;
	}
	path = unit_path(f->name);
	if ((ours = unit_is_ours(path)) == 0) {
		log_error("install: %s already exists and was not written by runner install; "
		    "remove it first", path);
		rc = 1;
		goto out;
	}
	if (write_unit("install", path, text) != 0) {
		rc = 1;
		goto out;
	}
	log_info("install: %s %s", ours == 1 ? "replaced" : "wrote", path);
	rc = 0;
	if (systemd_booted())
		rc = systemctl_must("install", "daemon-reload", NULL);
	if (rc == 0)
		rc = systemctl_must("install", "enable", f->name);
out:
	free((char *)u.working_dir);
	free((char *)u.config);
	free(text);
	free(cause);
	free(path);
	return rc;
}

static int
cmd_uninstall(const struct cli_command *cmd, void *opts)
{
	const struct service_flags *f = opts;
	char *path;
	int rc, ours;

	if (check_name(cmd->name, f->name) != 0)
		return 2;
	if (need_root("uninstall") != 0)
		return 1;
	path = unit_path(f->name);
	if ((ours = unit_is_ours(path)) != 1) {
		if (ours == -1)
			log_error("uninstall: %s is not installed (%s)", f->name, path);
		else
			log_error("uninstall: %s was not written by runner install; leaving it",
			    path);
		free(path);
		return 1;
	}
	/* The link in multi-user.target.wants goes first, or it would dangle. */
	if ((rc = systemctl("uninstall", "disable", f->name, false)) != 0 && rc != -1)
		log_warnx("uninstall: systemctl disable %s failed with exit status %d; "
		    "removing the unit anyway", f->name, rc);
	if (unlink(path) != 0) {
		log_error("uninstall: cannot remove %s: %s", path, strerror(errno));
		free(path);
		return 1;
	}
	(void)fd_sync_parent(path);
	log_info("uninstall: removed %s", path);
	free(path);
	return systemd_booted() ? systemctl_must("uninstall", "daemon-reload", NULL) : 0;
}

static int
control(const struct cli_command *cmd, void *opts)
{
	const struct service_flags *f = opts;

	if (check_name(cmd->name, f->name) != 0)
		return 2;
	if (strcmp(cmd->name, "status") != 0)
		return systemctl_must(cmd->name, cmd->name, f->name);
	/* gitlab-runner's words and exit status: 0 only when it runs. */
	switch (systemctl("status", "is-active", f->name, true)) {
	case 0:
		printf("%s: Service is running\n", f->name);
		return 0;
	case -1:
		return 1;
	case 3:
		fprintf(stderr, "%s: Service has stopped\n", f->name);
		return 1;
	default:
		fprintf(stderr, "%s: Service status unknown\n", f->name);
		return 1;
	}
}

#define SF(f)	offsetof(struct service_flags, f)
#define SERVICE_OPT_NAME	CLI_OPT("service", 'n', CLI_STRING, NULL, SF(name), "NAME", \
	"the unit's name", .def = DEFAULT_NAME)

static const struct cli_option install_options[] = {
	SERVICE_OPT_NAME,
	CLI_OPT("working-directory", 'd', CLI_STRING, NULL, SF(working_dir), "DIR",
	    "where builds go (default: the current directory)"),
	CLI_OPT("config", 'c', CLI_STRING, NULL, SF(config), "FILE",
	    "the config file (default: /etc/gitlab-runner/config.toml)"),
	CLI_OPT("user", 'u', CLI_STRING, NULL, SF(user), "USER",
	    "run the jobs as USER (the daemon runs as root)"),
	CLI_OPT("init-user", 'i', CLI_STRING, NULL, SF(init_user), "USER",
	    "run the daemon itself as USER (User= in the unit)"),
	/* Off unless given, as gitlab-runner under systemd: the journal has the output. */
	CLI_OPT("syslog", 0, CLI_BOOL, NULL, SF(syslog), NULL,
	    "the service also logs to syslog, under the --service name"),
	CLI_END,
};

static const struct cli_option control_options[] = {
	SERVICE_OPT_NAME,
	CLI_END,
};

const struct cli_command cmd_install_entry = {
	.name = "install",
	.summary = "Install the runner as a systemd service",
	.usage = "runner install [-n NAME] [-d DIR] [-c FILE] (-u USER | -i USER)",
	.help = "Install the runner as a systemd service (" UNIT_DIR "/NAME.service), "
	    "enabled at boot.",
	.options = install_options,
	.opts_size = sizeof(struct service_flags),
	.run = cmd_install,
};

const struct cli_command cmd_uninstall_entry = {
	.name = "uninstall",
	.summary = "Remove the systemd service",
	.usage = "runner uninstall [-n NAME]",
	.options = control_options,
	.opts_size = sizeof(struct service_flags),
	.run = cmd_uninstall,
};

/* The thin ones: systemctl VERB NAME. */
#define CONTROL_ENTRY(verb, text) {			\
	.name = verb,					\
	.summary = text,				\
	.usage = "runner " verb " [-n NAME]",		\
	.options = control_options,			\
	.opts_size = sizeof(struct service_flags),	\
	.run = control,					\
}

const struct cli_command cmd_start_entry =
    CONTROL_ENTRY("start", "Start the service (systemctl start)");
const struct cli_command cmd_stop_entry =
    CONTROL_ENTRY("stop", "Stop the service: running jobs finish first");
const struct cli_command cmd_restart_entry =
    CONTROL_ENTRY("restart", "Restart the service (systemctl restart)");
const struct cli_command cmd_status_entry =
    CONTROL_ENTRY("status", "Say whether the service is running");
