/*
 * The shell executor and the child process under it (executors/proc.c),
 * with real bash and sh: exit codes, the two output streams, big input and
 * output, the exact environment, the working directory, errors that come
 * once, cancel with and without a script that ignores SIGTERM, background
 * processes that outlive the script, and file descriptors that must not
 * leak into the child.  Every test runs its own loop and ends with every
 * handle closed and uv_loop_close() == 0.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/resource.h>
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "executors/executor.h"
#include "executors/proc.h"
#include "lib/buf.h"
#include "lib/clock.h"
#include "lib/xmalloc.h"

#define CAPTURE_MAX	(1024 * 1024)
#define BIG_OUTPUT	(50 * 1024 * 1024)
#define BIG_PATTERN	"0123456789abcde\n"

/* What one stage did, as the callbacks saw it. */
struct run {
	uv_loop_t			 loop;
	const struct executor_ops	*ops;
	struct exec			*e;
	struct buf			 out;
	struct buf			 err;
	int				 done_calls;
	int				 status;
	int				 exit_code;
	uint64_t			 started;
	uint64_t			 first_output;	/* 0: none yet */
	uint64_t			 ended;

	/* Count and check the output instead of keeping it. */
	bool				 big;
	size_t				 big_bytes;
	bool				 big_bad;

	/* Cancel once stdout holds this much text (a line with a pid). */
	const char			*cancel_on;
	uint64_t			 cancel_grace;
	bool				 canceled;
	uint64_t			 canceled_at;
	bool				 cancel_twice;
	bool				 cancel_in_done;
};

static char	*default_env[] = {
	"PATH=/usr/local/bin:/usr/bin:/bin",
	"HOME=/nonexistent",
	"LC_ALL=C",
	NULL
};

static void
on_output(int stream, const char *data, size_t len, void *arg)
{
	struct run	*r = arg;
	size_t		 i;

	if (stream != 1 && stream != 2)
		fail_msg("output on stream %d", stream);
	if (r->first_output == 0)
		r->first_output = clock_mono_ms();
	if (r->big) {
		for (i = 0; i < len; i++) {
			if (data[i] != BIG_PATTERN[(r->big_bytes + i) % 16])
				r->big_bad = true;
		}
		r->big_bytes += len;
		return;
	}
	if (buf_append(stream == 1 ? &r->out : &r->err, data, len) != 0)
		fail_msg("more output than the test expects");
	if (r->cancel_on != NULL && !r->canceled &&
	    strstr(r->out.ptr, r->cancel_on) != NULL) {
		r->canceled = true;
		r->canceled_at = clock_mono_ms();
		r->ops->cancel(r->e, r->cancel_grace);
		if (r->cancel_twice)
			r->ops->cancel(r->e, r->cancel_grace);
	}
}

static void
on_done(int status, int exit_code, void *arg)
{
	struct run	*r = arg;

	r->done_calls++;
	r->status = status;
	r->exit_code = exit_code;
	r->ended = clock_mono_ms();
	if (r->cancel_in_done)
		r->ops->cancel(r->e, 0);	/* must be a no-op */
}

static void
run_init(struct run *r)
{
	memset(r, 0, sizeof *r);
	assert_int_equal(uv_loop_init(&r->loop), 0);
	buf_init(&r->out, CAPTURE_MAX);
	buf_init(&r->err, CAPTURE_MAX);
	r->ops = executor_find("shell");
	assert_non_null(r->ops);
	r->exit_code = -2;
}

static void
walk_close(uv_handle_t *h, void *arg)
{
	int	*left = arg;

	if (!uv_is_closing(h)) {
		(*left)++;
		uv_close(h, NULL);
	}
}

/* libuv's MAKE_VALGRIND_HAPPY: nothing may be left open. */
static void
close_all_and_check(uv_loop_t *loop)
{
	int	left = 0;

	uv_run(loop, UV_RUN_DEFAULT);
	uv_walk(loop, walk_close, &left);
	uv_run(loop, UV_RUN_DEFAULT);
	assert_int_equal(left, 0);
	assert_int_equal(uv_loop_close(loop), 0);
}

static void
run_free(struct run *r)
{
	close_all_and_check(&r->loop);
	buf_release(&r->out);
	buf_release(&r->err);
}

/* Start a stage; fail the test if it does not start. */
static void
run_start(struct run *r, const struct exec_stage *stage)
{
	char	*cause = NULL;

	r->started = clock_mono_ms();
	r->e = r->ops->start(&r->loop, stage, on_output, on_done, r, &cause);
	if (r->e == NULL)
		fail_msg("start: %s", cause);
	assert_null(cause);
}

/* Run script with shell in the default environment, to the end. */
static void
run_script(struct run *r, const char *shell, const char *script)
{
	struct exec_stage	stage = {
		.name = "test", .shell = shell, .script = script,
		.env = default_env,
	};

	run_start(r, &stage);
	uv_run(&r->loop, UV_RUN_DEFAULT);
	assert_int_equal(r->done_calls, 1);
}

/* Alive and not a zombie: PID 1 of a container may never reap orphans. */
static bool
pid_alive(int pid)
{
	char	 path[64], line[512], *p;
	FILE	*f;
	bool	 alive = false;

	if (kill(pid, 0) != 0)
		return false;
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	if ((f = fopen(path, "r")) == NULL)
		return false;
	if (fgets(line, sizeof line, f) != NULL &&
	    (p = strrchr(line, ')')) != NULL && p[1] == ' ')
		alive = p[2] != 'Z' && p[2] != 'X';
	fclose(f);
	return alive;
}

/* Wait up to ms for pid to die (a SIGKILL takes a moment to land). */
static bool
pid_dies_within(int pid, int ms)
{
	for (; ms > 0; ms -= 10) {
		if (!pid_alive(pid))
			return true;
		usleep(10 * 1000);
	}
	return !pid_alive(pid);
}

/* The first number on stdout: a pid the script printed with echo $!. */
static int
printed_pid(struct run *r)
{
	int	pid = atoi(r->out.ptr);

	if (pid <= 1)
		fail_msg("no pid in the output: '%s'", r->out.ptr);
	return pid;
}

static long
maxrss_kib(void)
{
	struct rusage	ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

static void
test_find(void **state)
{
	const struct executor_ops	*ops;

	(void)state;
	ops = executor_find("shell");
	assert_non_null(ops);
	assert_string_equal(ops->name, "shell");
	assert_non_null(ops->start);
	assert_non_null(ops->cancel);
	assert_null(executor_find("docker-windows"));
	assert_null(executor_find(""));
	assert_null(executor_find(NULL));
}

static void
check_exit_code(const char *shell, const char *script, int code)
{
	struct run	r;

	run_init(&r);
	run_script(&r, shell, script);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.exit_code, code);
	run_free(&r);
}

static void
test_exit_codes(void **state)
{
	(void)state;
	check_exit_code("bash", "true\n", 0);
	check_exit_code("bash", "exit 3\n", 3);
	check_exit_code("bash", "exit 255\n", 255);
	check_exit_code("bash", "false\n", 1);
	check_exit_code("bash", "", 0);
	/* A script that dies of a signal: 128 + signal. */
	check_exit_code("bash", "kill -9 $$\n", 137);
}

static void
check_streams(const char *shell)
{
	struct run	r;

	run_init(&r);
	run_script(&r, shell,
	    "echo out1\n"
	    "echo err1 >&2\n"
	    "echo out2\n"
	    "echo err2 > /dev/stderr\n"
	    "echo out3 > /dev/stdout\n"
	    "printf 'no newline'\n"
	    "printf 'err no newline' >&2\n");
	assert_int_equal(r.exit_code, 0);
	assert_string_equal(r.out.ptr, "out1\nout2\nout3\nno newline");
	assert_string_equal(r.err.ptr, "err1\nerr2\nerr no newline");
	run_free(&r);
}

static void
test_streams(void **state)
{
	(void)state;
	check_streams("bash");
}

static void
test_no_final_newline(void **state)
{
	struct run	r;

	(void)state;
	run_init(&r);
	run_script(&r, "bash", "printf abc");	/* the script lacks one too */
	assert_int_equal(r.exit_code, 0);
	assert_int_equal(r.out.len, 3);
	assert_string_equal(r.out.ptr, "abc");
	assert_int_equal(r.err.len, 0);
	run_free(&r);
}

/*
 * The script comes on stdin as a file, not a pipe: bash reads a file in
 * blocks and a pipe a byte at a time (a read(2) per byte of a stage), and
 * a command in the script that reads stdin sees the rest of the script
 * either way, as with gitlab-runner.
 */
static void
test_script_on_stdin_is_a_file(void **state)
{
	struct run	r;

	(void)state;
	run_init(&r);
	run_script(&r, "bash", "if [ -p /dev/stdin ]; then echo pipe; else echo file; fi\n"
	    "read -r next\n"
	    "this line is read, not run\n"
	    "echo \"read: $next\"");
	assert_int_equal(r.exit_code, 0);
	assert_string_equal(r.out.ptr, "file\nread: this line is read, not run\n");
	assert_int_equal(r.err.len, 0);
	run_free(&r);
}

/* Output comes while the stage runs, not at its end. */
static void
test_output_as_it_arrives(void **state)
{
	struct run	r;

	(void)state;
	run_init(&r);
	run_script(&r, "bash", "echo first\nsleep 1\necho second\n");
	assert_string_equal(r.out.ptr, "first\nsecond\n");
	assert_true(r.first_output != 0);
	assert_true(r.ended - r.first_output >= 900);
	run_free(&r);
}

/*
 * The other order: the output pipes close first, the exit comes later;
 * and a cancel in that state, of a script that ignores SIGTERM.
 */
static void
test_eof_before_exit(void **state)
{
	struct run	r;

	(void)state;
	run_init(&r);
	run_script(&r, "bash", "echo bye\nexec >&- 2>&-\nsleep 0.5\nexit 2\n");
	assert_int_equal(r.exit_code, 2);
	assert_string_equal(r.out.ptr, "bye\n");
	assert_true(r.ended - r.first_output >= 400);
	run_free(&r);

	run_init(&r);
	r.cancel_on = "ready\n";
	r.cancel_grace = 300;
	run_script(&r, "bash",
	    "trap '' TERM\necho ready\nexec >&- 2>&-\nsleep 30\n");
	assert_int_equal(r.exit_code, 137);
	assert_true(r.ended - r.canceled_at < 2000);
	run_free(&r);
}

/* 5 MiB of script: far more than a pipe holds, all of it read by bash. */
static void
test_big_script(void **state)
{
	struct run	 r;
	struct buf	 s;
	char		 line[1100];
	int		 i, lines = 5 * 1024;

	(void)state;
	memset(line, 'x', sizeof line);
	memcpy(line, "n=$((n+1)) # ", 13);
	line[1023] = '\n';
	buf_init(&s, BUF_UNLIMITED);
	buf_puts(&s, "n=0\n");
	for (i = 0; i < lines; i++)
		buf_append(&s, line, 1024);
	buf_puts(&s, "echo \"end $n\"\n");
	assert_true(s.len > 5 * 1024 * 1024);

	run_init(&r);
	run_script(&r, "bash", s.ptr);
	buf_release(&s);	/* the executor has its own copy */
	assert_int_equal(r.exit_code, 0);
	assert_string_equal(r.out.ptr, "end 5120\n");
	assert_string_equal(r.err.ptr, "");
	run_free(&r);
}

/* A stage that exits early leaves most of a big script unwritten. */
static void
test_big_script_early_exit(void **state)
{
	struct run	 r;
	char		*s;
	size_t		 len = 4 * 1024 * 1024;

	(void)state;
	s = xmalloc(len + 1);
	memset(s, '\n', len);
	memcpy(s, "exit 7\n", 7);
	s[len] = '\0';
	run_init(&r);
	run_script(&r, "bash", s);
	free(s);
	assert_int_equal(r.exit_code, 7);
	run_free(&r);
}

/* 50 MiB of output: every byte arrives, and nothing piles up in memory. */
static void
test_big_output(void **state)
{
	struct run	r;
	long		before;
	char		script[128];

	(void)state;
	run_init(&r);
	r.big = true;
	snprintf(script, sizeof script, "yes 0123456789abcde | head -c %d\n",
	    BIG_OUTPUT);
	before = maxrss_kib();
	run_script(&r, "bash", script);
	assert_int_equal(r.exit_code, 0);
	assert_int_equal(r.big_bytes, BIG_OUTPUT);
	assert_false(r.big_bad);
	if (maxrss_kib() - before > 16 * 1024)
		fail_msg("memory grew by %ld KiB", maxrss_kib() - before);
	run_free(&r);
}

/* The environment is exactly the one given, values byte for byte. */
static void
check_env(const char *shell)
{
	static const char	 weird[] = "a b\t'\"`$(touch /tmp/x)${HOME};|&<>*?~!#\\\n"
				     "second line $$ %s %n";
	char			*env[5];
	struct buf		 want;
	struct run		 r;
	size_t			 i;
	struct exec_stage	 stage = {
		.name = "env", .shell = shell, .env = env,
		.script = "cat /proc/$$/environ\n"
		    "echo\n"
		    "printf '%s' \"$WEIRD\" >&2\n"
		    "echo \"${RUNNER_TEST_NOT_GIVEN-absent}\"\n",
	};

	env[0] = "PATH=/usr/bin:/bin";
	env[1] = "HOME=/nonexistent";
	env[2] = xasprintf("WEIRD=%s", weird);
	env[3] = "EMPTY=";
	env[4] = NULL;

	/* What /proc/PID/environ of the shell holds: our block, exactly. */
	buf_init(&want, BUF_UNLIMITED);
	for (i = 0; env[i] != NULL; i++)
		buf_append(&want, env[i], strlen(env[i]) + 1);
	buf_puts(&want, "\nabsent\n");

	run_init(&r);
	run_start(&r, &stage);
	uv_run(&r.loop, UV_RUN_DEFAULT);
	assert_int_equal(r.done_calls, 1);
	assert_int_equal(r.exit_code, 0);
	assert_int_equal(r.out.len, want.len);
	assert_memory_equal(r.out.ptr, want.ptr, want.len);
	assert_string_equal(r.err.ptr, weird);
	run_free(&r);
	buf_release(&want);
	free(env[2]);
}

static void
test_env_exact(void **state)
{
	(void)state;
	/* In our own environment, so "not inherited" means something. */
	assert_non_null(getenv("RUNNER_TEST_NOT_GIVEN"));
	check_env("bash");
}

static void
check_cwd(const char *shell)
{
	char			 tmpl[] = "/tmp/test_executor.XXXXXX", *dir;
	char			 real[PATH_MAX], *want;
	struct run		 r;
	struct exec_stage	 stage = {
		.name = "cwd", .shell = shell, .env = default_env,
		.script = "pwd -P\n",
	};

	assert_non_null(dir = mkdtemp(tmpl));
	assert_non_null(realpath(dir, real));
	stage.cwd = dir;
	run_init(&r);
	run_start(&r, &stage);
	uv_run(&r.loop, UV_RUN_DEFAULT);
	assert_int_equal(r.done_calls, 1);
	assert_int_equal(r.exit_code, 0);
	want = xasprintf("%s\n", real);
	assert_string_equal(r.out.ptr, want);
	free(want);
	run_free(&r);
	rmdir(dir);
}

static void
test_cwd(void **state)
{
	(void)state;
	check_cwd("bash");
}

/*
 * A stage that cannot start: either start() says why, or on_done says so
 * once with status < 0; never both, never twice.  Returns the message.
 */
static char *
start_failure(struct exec_stage *stage)
{
	struct run	 r;
	char		*cause = NULL;

	run_init(&r);
	r.e = r.ops->start(&r.loop, stage, on_output, on_done, &r, &cause);
	uv_run(&r.loop, UV_RUN_DEFAULT);
	if (r.e == NULL) {
		assert_non_null(cause);
		assert_int_equal(r.done_calls, 0);
	} else {
		assert_null(cause);
		assert_int_equal(r.done_calls, 1);
		assert_true(r.status < 0);
		assert_int_equal(r.exit_code, -1);
		cause = xasprintf("%s", strerror(-r.status));
	}
	assert_int_equal(r.out.len, 0);
	run_free(&r);
	return cause;
}

static void
test_missing_cwd(void **state)
{
	struct exec_stage	 stage = {
		.name = "cwd", .shell = "bash", .env = default_env,
		.script = "echo should not run\n",
		.cwd = "/nonexistent/test_executor",
	};
	char			*cause;

	(void)state;
	cause = start_failure(&stage);
	assert_string_equal(cause, "cannot change to directory "
	    "'/nonexistent/test_executor': No such file or directory");
	free(cause);

	stage.cwd = "/etc/passwd";
	cause = start_failure(&stage);
	assert_string_equal(cause, "cannot change to directory "
	    "'/etc/passwd': Not a directory");
	free(cause);
}

static void
test_missing_shell(void **state)
{
	char			*env[] = { "PATH=/nonexistent:/also-not", NULL };
	struct exec_stage	 stage = {
		.name = "shell", .shell = "bash", .env = env,
		.script = "echo should not run\n",
	};
	char			*cause;

	(void)state;
	cause = start_failure(&stage);
	assert_string_equal(cause, "cannot run bash: not found in PATH "
	    "(/nonexistent:/also-not)");
	free(cause);

	stage.shell = "sh";
	cause = start_failure(&stage);
	assert_string_equal(cause, "cannot run sh: not found in PATH "
	    "(/nonexistent:/also-not)");
	free(cause);

	stage.shell = "pwsh";
	stage.env = default_env;
	cause = start_failure(&stage);
	assert_string_equal(cause, "unsupported shell 'pwsh'");
	free(cause);
}

/* SIGTERM ends the stage at once, background jobs included. */
static void
check_cancel(const char *shell)
{
	struct run	r;
	int		pid;

	run_init(&r);
	r.cancel_on = "\n";
	r.cancel_grace = 5000;
	r.cancel_twice = true;
	run_script(&r, shell, "sleep 1000 &\necho $!\nsleep 30\n");
	assert_true(r.canceled);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.exit_code, 143);
	/* Well within the grace: SIGTERM did it, not the SIGKILL. */
	assert_true(r.ended - r.canceled_at < 2000);
	pid = printed_pid(&r);
	assert_true(pid_dies_within(pid, 1000));
	run_free(&r);
}

static void
test_cancel(void **state)
{
	(void)state;
	check_cancel("bash");
}

/* A script that ignores SIGTERM is SIGKILLed after the grace. */
static void
test_cancel_term_ignored(void **state)
{
	struct run	r;
	uint64_t	took;
	int		pid;

	(void)state;
	run_init(&r);
	r.cancel_on = "\n";
	r.cancel_grace = 500;
	run_script(&r, "bash",
	    "trap '' TERM\nsleep 1000 &\necho $!\nsleep 30\n");
	assert_true(r.canceled);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.exit_code, 137);
	took = r.ended - r.canceled_at;
	if (took < 450 || took > 3000)
		fail_msg("SIGKILL came %llu ms after the cancel, not ~500",
		    (unsigned long long)took);
	pid = printed_pid(&r);
	assert_true(pid_dies_within(pid, 1000));
	run_free(&r);
}

/*
 * The script is done but a background job still holds stdout: the stage
 * ends anyway, soon, and the job is killed.
 */
static void
test_background_holds_stdout(void **state)
{
	struct run	r;
	int		pid;

	(void)state;
	run_init(&r);
	run_script(&r, "bash", "sleep 1000 &\necho $!\nexit 0\n");
	assert_int_equal(r.status, 0);
	assert_int_equal(r.exit_code, 0);
	assert_true(r.ended - r.started < 2000);
	pid = printed_pid(&r);
	assert_true(pid_dies_within(pid, 1000));
	run_free(&r);
}

/*
 * A background job that left the process group (setsid) cannot be killed
 * with it; the stage still ends, the pipes closed under it.
 */
static void
test_background_outside_group(void **state)
{
	struct run	r;
	int		pid;

	(void)state;
	if (access("/usr/bin/setsid", X_OK) != 0) {
		print_message("skipped: no /usr/bin/setsid\n");
		skip();
	}
	run_init(&r);
	run_script(&r, "bash", "setsid sleep 1000 &\necho $!\nexit 4\n");
	assert_int_equal(r.status, 0);
	assert_int_equal(r.exit_code, 4);
	assert_true(r.ended - r.started < 3000);
	pid = printed_pid(&r);
	if (pid_alive(pid))
		kill(pid, SIGKILL);
	run_free(&r);
}

/* Cancel from inside on_done (the last moment the exec exists) does nothing. */
static void
test_cancel_after_done(void **state)
{
	struct run	r;

	(void)state;
	run_init(&r);
	r.cancel_in_done = true;
	run_script(&r, "bash", "echo hi\nexit 5\n");
	assert_int_equal(r.exit_code, 5);
	assert_string_equal(r.out.ptr, "hi\n");
	run_free(&r);

	/* A cancel after the exit but before the end: still one on_done. */
	run_init(&r);
	r.cancel_on = "hi";
	r.cancel_grace = 0;
	r.cancel_in_done = true;
	run_script(&r, "bash", "echo hi\nexit 6\n");
	assert_true(r.exit_code == 6 || r.exit_code == 143 ||
	    r.exit_code == 137);
	run_free(&r);
}

static void
test_sh(void **state)
{
	(void)state;
	check_exit_code("sh", "true\n", 0);
	check_exit_code("sh", "exit 3\n", 3);
	check_exit_code("sh", "exit 255\n", 255);
	check_streams("sh");
	check_env("sh");
	check_cwd("sh");
	check_cancel("sh");
}

/*
 * The child has fds 0, 1 and 2 and nothing else, even while another stage
 * on the same loop has its pipes open in this process.
 */
static void
test_no_fd_leak(void **state)
{
	struct run		 other, r;
	struct exec_stage	 stage = {
		.name = "other", .shell = "bash", .env = default_env,
		.script = "echo started\nsleep 30\n",
	};

	(void)state;
	run_init(&other);
	run_start(&other, &stage);
	while (other.out.len == 0)
		uv_run(&other.loop, UV_RUN_ONCE);

	run_init(&r);
	run_script(&r, "bash", "ls /proc/$$/fd\n");
	assert_int_equal(r.exit_code, 0);
	assert_string_equal(r.out.ptr, "0\n1\n2\n");
	run_free(&r);

	run_init(&r);
	run_script(&r, "sh", "ls /proc/$$/fd\n");
	assert_string_equal(r.out.ptr, "0\n1\n2\n");
	run_free(&r);

	other.ops->cancel(other.e, 0);
	uv_run(&other.loop, UV_RUN_DEFAULT);
	assert_int_equal(other.done_calls, 1);
	run_free(&other);
}

/* With a user, through su; only as root, with a user "nobody". */
static void
test_user(void **state)
{
	struct run		 r;
	struct exec_stage	 stage = {
		.name = "user", .shell = "bash", .env = default_env,
		.script = "id -un\necho oops >&2\nexit 3\n",
		.cwd = "/", .user = "nobody",
	};

	(void)state;
	if (getuid() != 0 || getpwnam("nobody") == NULL ||
	    (access("/usr/bin/su", X_OK) != 0 && access("/bin/su", X_OK) != 0)) {
		print_message("skipped: needs root, su and a user 'nobody'\n");
		skip();
	}
	run_init(&r);
	run_start(&r, &stage);
	uv_run(&r.loop, UV_RUN_DEFAULT);
	assert_int_equal(r.done_calls, 1);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.exit_code, 3);
	assert_string_equal(r.out.ptr, "nobody\n");
	assert_string_equal(r.err.ptr, "oops\n");
	run_free(&r);

	/*
	 * A cancel through su ends the stage and everything it started.
	 * su -c puts the user's shell in a session of its own, out of
	 * reach of kill(-pgid); the executor finds that session and
	 * signals its group too.
	 */
	run_init(&r);
	stage.script = "sleep 1000 &\necho $!\nsleep 30\n";
	r.cancel_on = "\n";
	r.cancel_grace = 6000;
	run_start(&r, &stage);
	uv_run(&r.loop, UV_RUN_DEFAULT);
	assert_int_equal(r.done_calls, 1);
	assert_true(r.exit_code > 128);
	/* su waits 2 s for its shell after passing SIGTERM on: before the SIGKILL. */
	assert_true(r.ended - r.canceled_at < 5000);
	assert_true(pid_dies_within(printed_pid(&r), 1000));
	run_free(&r);
}

/*
 * proc_find_program() on its own: PATH order, an empty entry, a name with
 * a slash.
 */
static void
test_find_program(void **state)
{
	char	*p;

	(void)state;
	p = proc_find_program("sh", "/nonexistent:/bin:/usr/bin");
	assert_string_equal(p, "/bin/sh");
	free(p);
	assert_null(proc_find_program("sh", "/nonexistent"));
	assert_null(proc_find_program("passwd", "/etc"));	/* not executable */
	p = proc_find_program("/bin/sh", "/nonexistent");
	assert_string_equal(p, "/bin/sh");
	free(p);
	assert_null(proc_find_program("/nonexistent/sh", NULL));
}

/*
 * Whatever started us may have leaked descriptors into this process (a
 * make jobserver, a CI harness).  They are its business, not the
 * executor's: mark them close-on-exec so the leak test sees only ours.
 */
static void
cloexec_inherited_fds(void)
{
	DIR		*d;
	struct dirent	*de;
	int		 fd;

	if ((d = opendir("/proc/self/fd")) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		fd = atoi(de->d_name);
		if (fd > 2 && fd != dirfd(d))
			fcntl(fd, F_SETFD, FD_CLOEXEC);
	}
	closedir(d);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_find_program),
		cmocka_unit_test(test_exit_codes),
		cmocka_unit_test(test_streams),
		cmocka_unit_test(test_no_final_newline),
		cmocka_unit_test(test_script_on_stdin_is_a_file),
		cmocka_unit_test(test_output_as_it_arrives),
		cmocka_unit_test(test_eof_before_exit),
		cmocka_unit_test(test_big_script),
		cmocka_unit_test(test_big_script_early_exit),
		cmocka_unit_test(test_big_output),
		cmocka_unit_test(test_env_exact),
		cmocka_unit_test(test_cwd),
		cmocka_unit_test(test_missing_cwd),
		cmocka_unit_test(test_missing_shell),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_cancel_term_ignored),
		cmocka_unit_test(test_background_holds_stdout),
		cmocka_unit_test(test_background_outside_group),
		cmocka_unit_test(test_cancel_after_done),
		cmocka_unit_test(test_sh),
		cmocka_unit_test(test_no_fd_leak),
		cmocka_unit_test(test_user),
	};

	/* The daemon ignores SIGPIPE; a child that stops reading is normal. */
	signal(SIGPIPE, SIG_IGN);
	setenv("RUNNER_TEST_NOT_GIVEN", "inherited", 1);
	cloexec_inherited_fds();
	/* A hung stage must fail the run, not hang it. */
	alarm(300);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
