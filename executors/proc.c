/*
 * A child process with pipes, on libuv.  Start a program in its own
 * process group, feed it its input, hand its stdout and stderr to the
 * owner as they arrive, and report once when it is all over.
 *
 * This is tmux's job.c state machine: the exit of the process and the EOF
 * of its output pipes are independent events that come in either order,
 * and only when both have happened (and libuv has closed every handle) is
 * the owner told.  A background process of the script that keeps stdout
 * open would hold that forever, so the exit of the main process starts a
 * short drain timer after which the rest of the group is killed.
 *
 * Output is never buffered here: each read goes to the owner from one
 * fixed buffer, so a stage printing gigabytes costs no memory.
 */
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <stdio.h>

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "executors/proc.h"
#include "lib/fdio.h"
#include "lib/log.h"
#include "lib/xmalloc.h"

enum proc_state {
	PROC_RUNNING,	/* the main process runs, an output pipe is open */
	PROC_EXITED,	/* the main process exited; output still draining */
	PROC_EOF,	/* both output pipes are done; the process still runs */
	PROC_CLOSED,	/* both: handles are closing, then done_cb and free */
};

static const char *const proc_state_names[] = {
	[PROC_RUNNING] = "RUNNING",
	[PROC_EXITED] = "EXITED",
	[PROC_EOF] = "EOF",
	[PROC_CLOSED] = "CLOSED",
};

/*
 * A job printing fast fills a 64 KiB pipe in a moment, then every read
 * wakes it and every write blocks it: the context switches cost more
 * than the bytes.  A 1 MiB pipe (the unprivileged maximum by default)
 * and reads of up to 256 KiB make that a sixteenth as many turns.
 */
#define PROC_PIPE_SIZE	(1024 * 1024)
#define PROC_READ_SIZE	(256 * 1024)

struct proc {
	uv_loop_t	*loop;
	enum proc_state	 state;

	uv_process_t	 process;
	uv_pipe_t	 out;		/* our end of its stdout */
	uv_pipe_t	 err;		/* our end of its stderr */
	uv_timer_t	 drain;		/* after the exit: wait, kill, give up */
	uv_timer_t	 kill;		/* after a cancel: SIGKILL */
	int		 handles;	/* initialised and not yet closed */

	int		 pid;		/* also the process group id */
	/*
	 * Sessions our child started (su -c calls setsid): their groups
	 * are out of reach of kill(-pid), so signals go to them too.
	 * Remembered at the first signal, as su may exit before its
	 * shell's children do.
	 */
	int		 sessions[4];
	int		 n_sessions;
	int		 outputs;	/* output pipes not yet at EOF */
	int		 drain_step;	/* 0 waiting, 1 group killed */
	uint64_t	 drain_ms;
	bool		 exited;
	bool		 canceled;
	uint64_t	 kill_at;	/* loop time of the cancel's SIGKILL */
	bool		 failed;	/* start failed: close, call nobody */
	int		 exit_code;

	proc_output_cb	*output_cb;
	proc_done_cb	*done_cb;
	void		*arg;
};

/*
 * Every process's output is read into this one buffer.  libuv calls the
 * read callback right after the alloc callback, on the loop's one thread,
 * and output_cb consumes the bytes before returning; a buffer per process
 * would be a quarter of a megabyte per running job for nothing.
 */
static char proc_rbuf[PROC_READ_SIZE];

static void	proc_set_state(struct proc *, enum proc_state);
static void	proc_on_drain(uv_timer_t *);

/*
 * Note the sessions led by direct children of our child.  The kernel
 * lists a task's children in /proc/<pid>/task/<pid>/children, so this
 * reads one small file per child rather than every process's stat.
 */
static void
proc_find_sessions(struct proc *p)
{
	char	 path[64], kids[1024], line[512], *s, *next, *end;
	int	 fd, ppid, pgrp, sid, kid, i;
	ssize_t	 n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", p->pid, p->pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return;
	n = read(fd, kids, sizeof(kids) - 1);
	close(fd);
	if (n <= 0)
		return;
	kids[n] = '\0';
	for (s = kids; p->n_sessions < (int)(sizeof(p->sessions) /
	    sizeof(p->sessions[0])); s = next) {
		kid = (int)strtol(s, &next, 10);
		if (next == s)
			break;
		snprintf(path, sizeof(path), "/proc/%d/stat", kid);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
			continue;
		n = read(fd, line, sizeof(line) - 1);
		close(fd);
		if (n <= 0)
			continue;
		line[n] = '\0';
		/* "pid (comm) state ppid pgrp session ...": comm may hold ')'. */
		if ((end = strrchr(line, ')')) == NULL ||
		    sscanf(end + 1, " %*c %d %d %d", &ppid, &pgrp, &sid) != 3 ||
		    sid != kid || sid == p->pid)
			continue;
		for (i = 0; i < p->n_sessions && p->sessions[i] != sid; i++)
			;
		if (i == p->n_sessions)
			p->sessions[p->n_sessions++] = sid;
	}
}

/* Send a signal to the whole group; a group already gone is fine. */
static void
proc_signal_group(struct proc *p, int sig)
{
	int i;

	if (!p->exited)
		proc_find_sessions(p);
	if (kill(-p->pid, sig) != 0 && errno != ESRCH)
		log_warn("process group %d: cannot send signal %d", p->pid,
		    sig);
	for (i = 0; i < p->n_sessions; i++)
		if (kill(-p->sessions[i], sig) != 0 && errno != ESRCH)
			log_warn("process group %d: cannot send signal %d",
			    p->sessions[i], sig);
}

/* Whether anything of the process group (or its sessions) is still there. */
static bool
proc_group_alive(struct proc *p)
{
	int i;

	if (kill(-p->pid, 0) == 0 || errno == EPERM)
		return (true);
	for (i = 0; i < p->n_sessions; i++)
		if (kill(-p->sessions[i], 0) == 0 || errno == EPERM)
			return (true);
	return (false);
}

/* A handle is closed; the last one ends the proc. */
static void
proc_on_close(uv_handle_t *h)
{
	struct proc	*p = h->data;

	if (--p->handles > 0)
		return;
	if (!p->failed && p->done_cb != NULL)
		p->done_cb(0, p->exit_code, p->arg);
	free(p);
}

/* Close h unless it is already closing. */
static void
proc_close(void *h)
{
	if (!uv_is_closing(h))
		uv_close(h, proc_on_close);
}

/* Close every handle the proc has (the process one only if it exists). */
static void
proc_close_all(struct proc *p, bool process)
{
	if (process)
		proc_close(&p->process);
	proc_close(&p->out);
	proc_close(&p->err);
	proc_close(&p->drain);
	proc_close(&p->kill);
}

/*
 * Change state; the one place for entry actions.  EXITED arms the drain
 * timer.  CLOSED kills what is left of a cancelled stage (nobody will wait
 * for it any more) and closes the handles, the last of which calls done.
 */
static void
proc_set_state(struct proc *p, enum proc_state to)
{
	log_debug("process %d: %s -> %s", p->pid, proc_state_names[p->state],
	    proc_state_names[to]);
	p->state = to;

	switch (to) {
	case PROC_EXITED:
		uv_timer_start(&p->drain, proc_on_drain, p->drain_ms, 0);
		break;
	case PROC_CLOSED:
		if (p->canceled)
			proc_signal_group(p, SIGKILL);
		proc_close_all(p, true);
		break;
	case PROC_RUNNING:
	case PROC_EOF:
		break;
	}
}

/* One output pipe is done: at EOF, broken, or closed by the drain timer. */
static void
proc_output_done(struct proc *p, uv_pipe_t *pipe)
{
	if (uv_is_closing((uv_handle_t *)pipe))
		return;
	uv_read_stop((uv_stream_t *)pipe);
	proc_close(pipe);
	if (--p->outputs > 0)
		return;

	switch (p->state) {
	case PROC_RUNNING:
		proc_set_state(p, PROC_EOF);
		break;
	case PROC_EXITED:
		proc_set_state(p, PROC_CLOSED);
		break;
	case PROC_EOF:
	case PROC_CLOSED:
		break;
	}
}

static void
proc_on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	(void)h;
	(void)suggested;
	buf->base = proc_rbuf;
	buf->len = sizeof proc_rbuf;
}

static void
proc_on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct proc	*p = s->data;
	int		 stream = (s == (uv_stream_t *)&p->out) ? 1 : 2;

	if (n > 0) {
		if (p->output_cb != NULL)
			p->output_cb(stream, buf->base, (size_t)n, p->arg);
		return;
	}
	if (n == 0)
		return;		/* EAGAIN: nothing this time */
	if (n != UV_EOF)
		log_warnx("process %d: reading stream %d: %s", p->pid, stream,
		    uv_strerror((int)n));
	proc_output_done(p, (uv_pipe_t *)s);
}

static void
proc_on_exit(uv_process_t *process, int64_t status, int sig)
{
	struct proc	*p = process->data;

	p->exited = true;
	p->exit_code = sig != 0 ? 128 + sig : (int)status;
	log_debug("process %d: exited, code %d", p->pid, p->exit_code);

	switch (p->state) {
	case PROC_RUNNING:
		proc_set_state(p, PROC_EXITED);
		break;
	case PROC_EOF:
		proc_set_state(p, PROC_CLOSED);
		break;
	case PROC_EXITED:
	case PROC_CLOSED:
		break;
	}
}

/*
 * The main process is gone but something still holds an output pipe.
 * First kill the rest of the group, whose output up to then still arrives;
 * if the pipes are still open after one more period, something outside
 * the group holds them, and they are closed regardless.
 */
static void
proc_on_drain(uv_timer_t *t)
{
	struct proc	*p = t->data;

	if (p->state != PROC_EXITED)
		return;
	if (p->drain_step == 0) {
		log_debug("process %d: output still open %llu ms after the "
		    "exit, killing the process group", p->pid,
		    (unsigned long long)p->drain_ms);
		p->drain_step = 1;
		proc_signal_group(p, SIGKILL);
		uv_timer_start(&p->drain, proc_on_drain, p->drain_ms, 0);
		return;
	}
	log_warnx("process %d: output held open by a process outside its "
	    "group, closing it", p->pid);
	proc_output_done(p, &p->out);
	proc_output_done(p, &p->err);
}

/* The grace of a cancel is over. */
static void
proc_on_kill(uv_timer_t *t)
{
	struct proc	*p = t->data;

	if (p->state == PROC_CLOSED)
		return;
	if (!p->exited || proc_group_alive(p)) {
		log_debug("process %d: still running after the grace, "
		    "SIGKILL", p->pid);
		proc_signal_group(p, SIGKILL);
	}
}

/*
 * The child's stdin: its input in a memory file, or /dev/null.  A shell
 * reads a script from a pipe a byte at a time, so as not to read past
 * what the commands it starts should find on stdin; from a file it reads
 * blocks and seeks back.  That is thousands of read(2)s less per stage,
 * and the script, secrets and all, is never on a disk.
 */
static int
proc_input_fd(const struct proc_spec *spec, uv_file *fd)
{
	int	f, rc;

	if (spec->inputlen == 0)
		f = open("/dev/null", O_RDONLY | O_CLOEXEC);
	else
		f = memfd_create("runner-input", MFD_CLOEXEC);
	if (f == -1)
		return -errno;
	if (spec->inputlen > 0 &&
	    (fd_write_all(f, spec->input, spec->inputlen) != 0 ||
	    lseek(f, 0, SEEK_SET) != 0)) {
		rc = -errno;
		close(f);
		return rc;
	}
	*fd = f;
	return 0;
}

/* Close both ends of a pipe made by uv_pipe(). */
static void
proc_close_fds(uv_file fds[2])
{
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	fds[0] = fds[1] = -1;
}

/*
 * Make an output pipe: its read end goes into the uv_pipe_t h, its write
 * end is left in *theirs for the child.  Both are close-on-exec; libuv
 * dup2()s the child's end onto 1 or 2, which clears that flag for the
 * copy only.
 */
static int
proc_make_pipe(uv_pipe_t *h, uv_file *theirs)
{
	uv_file	fds[2] = { -1, -1 };
	int	rc;

	if ((rc = uv_pipe(fds, UV_NONBLOCK_PIPE, 0)) != 0)
		return rc;
	/* Best effort: a smaller pipe only costs speed. */
	(void)fcntl(fds[0], F_SETPIPE_SZ, PROC_PIPE_SIZE);
	if ((rc = uv_pipe_open(h, fds[0])) != 0) {
		proc_close_fds(fds);
		return rc;
	}
	*theirs = fds[1];
	return 0;
}

/* The message for a failed uv_spawn(): a missing directory, or the program. */
static char *
proc_spawn_cause(const struct proc_spec *spec, int rc)
{
	struct stat	sb;

	if (spec->cwd != NULL) {
		if (stat(spec->cwd, &sb) != 0)
			return xasprintf("cannot change to directory '%s': %s",
			    spec->cwd, strerror(errno));
		if (!S_ISDIR(sb.st_mode))
			return xasprintf("cannot change to directory '%s': %s",
			    spec->cwd, strerror(ENOTDIR));
	}
	return xasprintf("cannot run %s: %s", spec->file, uv_strerror(rc));
}

struct proc *
proc_start(uv_loop_t *loop, const struct proc_spec *spec,
    proc_output_cb *output_cb, proc_done_cb *done_cb, void *arg, char **cause)
{
	static char *const	 noenv[] = { NULL };
	struct proc		*p;
	uv_process_options_t	 opts;
	uv_stdio_container_t	 stdio[3];
	uv_file			 child[3] = { -1, -1, -1 };
	bool			 spawned = false;
	int			 rc, i;

	*cause = NULL;
	p = xcalloc(1, sizeof *p);
	p->loop = loop;
	p->state = PROC_RUNNING;
	p->drain_ms = spec->drain_ms != 0 ? spec->drain_ms : PROC_DRAIN_MS;
	p->output_cb = output_cb;
	p->done_cb = done_cb;
	p->arg = arg;
	p->exit_code = -1;
	p->outputs = 2;

	uv_pipe_init(loop, &p->out, 0);
	uv_pipe_init(loop, &p->err, 0);
	uv_timer_init(loop, &p->drain);
	uv_timer_init(loop, &p->kill);
	p->handles = 4;
	p->out.data = p->err.data = p;
	p->drain.data = p->kill.data = p;

	if ((rc = proc_input_fd(spec, &child[0])) != 0) {
		*cause = xasprintf("cannot run %s: its input: %s", spec->file,
		    uv_strerror(rc));
		goto fail;
	}
	if ((rc = proc_make_pipe(&p->out, &child[1])) != 0 ||
	    (rc = proc_make_pipe(&p->err, &child[2])) != 0) {
		*cause = xasprintf("cannot run %s: pipe: %s", spec->file,
		    uv_strerror(rc));
		goto fail;
	}

	/*
	 * Our own pipes, inherited, rather than UV_CREATE_PIPE: libuv 1.44
	 * makes those socketpairs, and on a socket "echo x > /dev/stderr"
	 * fails with ENXIO; scripts written for gitlab-runner do that.
	 */
	memset(&opts, 0, sizeof opts);
	for (i = 0; i < 3; i++) {
		stdio[i].flags = UV_INHERIT_FD;
		stdio[i].data.fd = child[i];
	}
	opts.file = spec->file;
	opts.args = (char **)spec->argv;
	opts.env = (char **)(spec->env != NULL ? spec->env : noenv);
	opts.cwd = spec->cwd;
	/* Own session and process group: a cancel reaches all of it. */
	opts.flags = UV_PROCESS_DETACHED;
	opts.stdio = stdio;
	opts.stdio_count = 3;
	opts.exit_cb = proc_on_exit;

	/* uv_spawn() initialises the handle even when it fails. */
	rc = uv_spawn(loop, &p->process, &opts);
	p->process.data = p;
	p->handles++;
	spawned = true;
	for (i = 0; i < 3; i++)
		close(child[i]);
	if (rc != 0) {
		*cause = proc_spawn_cause(spec, rc);
		goto fail_spawned;
	}
	p->pid = p->process.pid;
	log_debug("process %d: started %s", p->pid, spec->file);

	uv_read_start((uv_stream_t *)&p->out, proc_on_alloc, proc_on_read);
	uv_read_start((uv_stream_t *)&p->err, proc_on_alloc, proc_on_read);
	return p;

fail:
	for (i = 0; i < 3; i++) {
		if (child[i] >= 0)
			close(child[i]);
	}
fail_spawned:
	p->failed = true;
	proc_close_all(p, spawned);
	return NULL;
}

void
proc_cancel(struct proc *p, uint64_t grace_ms)
{
	uint64_t	at;

	if (p->state == PROC_CLOSED)
		return;
	at = uv_now(p->loop) + grace_ms;
	if (p->canceled && at >= p->kill_at)
		return;
	log_debug("process %d: cancel, SIGKILL in %llu ms", p->pid,
	    (unsigned long long)grace_ms);
	if (!p->canceled)
		proc_signal_group(p, SIGTERM);
	p->canceled = true;
	p->kill_at = at;
	uv_timer_start(&p->kill, proc_on_kill, grace_ms, 0);
}

int
proc_pid(const struct proc *p)
{
	return p->pid;
}

char *
proc_find_program(const char *name, const char *path)
{
	struct stat	 sb;
	const char	*dir, *end;
	char		*file;
	size_t		 len;

	if (strchr(name, '/') != NULL)
		return access(name, X_OK) == 0 ? xstrdup(name) : NULL;
	if (path == NULL)
		path = "/usr/bin:/bin";

	for (dir = path;; dir = end + 1) {
		end = strchr(dir, ':');
		len = end != NULL ? (size_t)(end - dir) : strlen(dir);
		if (len == 0)
			file = xasprintf("./%s", name);
		else
			file = xasprintf("%.*s/%s", (int)len, dir, name);
		if (stat(file, &sb) == 0 && S_ISREG(sb.st_mode) &&
		    access(file, X_OK) == 0)
			return file;
		free(file);
		if (end == NULL)
			return NULL;
	}
}
