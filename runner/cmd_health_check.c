/*
 * `runner health-check`: wait until a TCP service accepts a connection,
 * as gitlab-runner's (commands/helpers/health_check.go), which the docker
 * and kubernetes executors run beside a job's services.
 *
 * Where: each -p/--port on localhost, waiting for all of them (the
 * kubernetes executor's use: the pod shares one network); without -p, the
 * environment's *_TCP_ADDR (the last one) and every *_TCP_PORT (docker
 * links), waiting for the first to answer.  Each port is dialled again a
 * second after each failure, a dial given 5 minutes; there is no overall
 * limit: the caller has its own.  The lines on stdout are gitlab-runner's.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/strv.h"
#include "lib/xmalloc.h"
#include "runner/commands.h"

#define DIAL_TIMEOUT_MS	(5 * 60 * 1000)
#define RETRY_S		1
#define MAX_DIALS	256	/* sockets in one round: ports times addresses */

extern char **environ;

struct health_opts {
	struct strv	 ports;
};

/* One connection attempt: a socket of one port's, connecting. */
struct dial {
	int	 fd;
	size_t	 port;
};

/*
 * Start connecting to every address of addr:port; the sockets still
 * connecting go into dials.  True if one connected at once.
 */
static bool
dial_start(const char *addr, const char *port, size_t idx, struct dial *dials, size_t *n)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *ai;
	bool connected = false;
	int fd;

	if (getaddrinfo(addr, port, &hints, &res) != 0)
		return false;
	for (ai = res; ai != NULL && !connected && *n < MAX_DIALS; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    ai->ai_protocol);
		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			connected = true;
		else if (errno == EINPROGRESS) {
			dials[*n].fd = fd;
			dials[(*n)++].port = idx;
			continue;
		}
		close(fd);
	}
	freeaddrinfo(res);
	return connected;
}

/* Wait for the round's sockets; mark ok[port] for each that connected. */
static void
dial_wait(struct dial *dials, size_t n, bool *ok)
{
	struct pollfd pfd[MAX_DIALS];
	uint64_t deadline = clock_mono_ms() + DIAL_TIMEOUT_MS, now;
	size_t i, left = n;
	socklen_t len;
	int err, rc;

	for (i = 0; i < n; i++)
		pfd[i] = (struct pollfd){ .fd = dials[i].fd, .events = POLLOUT };
	while (left > 0 && (now = clock_mono_ms()) < deadline) {
		rc = poll(pfd, n, (int)(deadline - now));
		if (rc < 0 && errno != EINTR)
			break;
		for (i = 0; i < n; i++) {
			if (pfd[i].fd < 0 || pfd[i].revents == 0)
				continue;
			len = sizeof(err);
			if (getsockopt(pfd[i].fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
				ok[dials[i].port] = true;
			close(pfd[i].fd);
			pfd[i].fd = -1;
			left--;
		}
	}
	for (i = 0; i < n; i++)
		if (pfd[i].fd >= 0)
			close(pfd[i].fd);
}

/* "[80 443]", as Go's %v prints a []string. */
static void
print_ports(const char *addr, const struct strv *ports)
{
	size_t i;

	printf("waiting for TCP connection to %s on [", addr);
	for (i = 0; i < ports->n; i++)
		printf("%s%s", i > 0 ? " " : "", ports->v[i]);
	printf("]...\n");
	fflush(stdout);
}

/* Docker links' variables: NAME_PORT_80_TCP_ADDR=..., NAME_PORT_80_TCP_PORT=80. */
static const char *
from_environment(struct strv *ports)
{
	const char *addr = NULL, *eq, *e;
	char **ep;
	size_t klen;

	for (ep = environ; *ep != NULL; ep++) {
		e = *ep;
		/* Go splits on every "=": a value that has one is not looked at. */
		if ((eq = strchr(e, '=')) == NULL || strchr(eq + 1, '=') != NULL)
			continue;
		klen = (size_t)(eq - e);
		if (klen >= 9 && strncmp(eq - 9, "_TCP_ADDR", 9) == 0)
			addr = eq + 1;
		else if (klen >= 9 && strncmp(eq - 9, "_TCP_PORT", 9) == 0)
			strv_push(ports, eq + 1);
	}
	return addr;
}

static int
health_check_run(const struct cli_command *cmd, void *opts)
{
	struct health_opts *o = opts;
	struct strv env_ports = { 0 };
	const struct strv *ports;
	struct dial dials[MAX_DIALS];
	const char *addr;
	bool wait_all, *ok, *done, any;
	size_t i, n, left;

	(void)cmd;
	if (o->ports.n > 0) {
		addr = "localhost";
		ports = &o->ports;
		wait_all = true;
	} else {
		addr = from_environment(&env_ports);
		ports = &env_ports;
		wait_all = false;
	}
	if (addr == NULL || *addr == '\0' || ports->n == 0) {
		log_msg(LOG_LEVEL_FATAL, "No HOST or PORT found");
		strv_release(&env_ports);
		return 1;
	}
	print_ports(addr, ports);
	ok = xcalloc(ports->n, sizeof(*ok));
	done = xcalloc(ports->n, sizeof(*done));
	for (left = ports->n;;) {
		n = 0;
		any = false;
		for (i = 0; i < ports->n; i++) {
			if (done[i])
				continue;
			printf("dialing %s:%s...\n", addr, ports->v[i]);
			fflush(stdout);
			if (dial_start(addr, ports->v[i], i, dials, &n))
				ok[i] = true;
		}
		dial_wait(dials, n, ok);
		for (i = 0; i < ports->n; i++) {
			if (done[i] || !ok[i])
				continue;
			printf("dial succeeded on %s:%s. Exiting...\n", addr, ports->v[i]);
			fflush(stdout);
			done[i] = true;
			left--;
			any = true;
		}
		if (left == 0 || (any && !wait_all))
			break;
		(void)nanosleep(&(struct timespec){ .tv_sec = RETRY_S }, NULL);
	}
	free(ok);
	free(done);
	strv_release(&env_ports);
	return 0;
}

static const struct cli_option health_check_options[] = {
	CLI_OPT("port", 'p', CLI_STRINGS, NULL, offsetof(struct health_opts, ports), "PORT",
	    "a port on localhost to wait for (repeat for more: all must answer)"),
	CLI_END,
};

const struct cli_command cmd_health_check_entry = {
	.name = "health-check",
	.summary = "Wait until a TCP service accepts connections",
	.usage = "runner health-check [-p PORT]...",
	.help = "Wait until a TCP service accepts connections: each -p PORT on localhost (all "
	    "of them), or else the address of a *_TCP_ADDR variable on each *_TCP_PORT "
	    "variable's port (the first that answers), as gitlab-runner's health-check.",
	.options = health_check_options,
	.opts_size = sizeof(struct health_opts),
	.run = health_check_run,
};
