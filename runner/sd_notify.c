/*
 * systemd's notification protocol; see sd_notify.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "runner/sd_notify.h"

/* The watchdog is ours unless $WATCHDOG_PID names another process. */
static uint64_t
watchdog_usec(void)
{
	const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	unsigned long long v;
	char *end;

	if (usec == NULL || *usec == '\0')
		return 0;
	errno = 0;
	v = strtoull(usec, &end, 10);
	if (errno != 0 || *end != '\0' || v == 0) {
		log_warnx("WATCHDOG_USEC=%s is not a number of microseconds; no watchdog", usec);
		return 0;
	}
	if (pid != NULL && *pid != '\0') {
		errno = 0;
		if (strtoll(pid, &end, 10) != (long long)getpid() || errno != 0 || *end != '\0')
			return 0;
	}
	return v;
}

int
notify_open(struct notifier *n)
{
	const char *path = getenv("NOTIFY_SOCKET");
	size_t len;
	int rc = 0;

	memset(n, 0, sizeof(*n));
	n->fd = -1;
	n->watchdog_usec = watchdog_usec();
	if (path == NULL || *path == '\0')
		goto out;
	len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len < 2 || len >= sizeof(n->addr.sun_path)) {
		log_error("NOTIFY_SOCKET=%s: not an absolute path or @name that fits a unix "
		    "socket address; systemd will not hear from us", path);
		rc = -1;
		goto out;
	}
	n->addr.sun_family = AF_UNIX;
	memcpy(n->addr.sun_path, path, len);
	/* The abstract namespace: a leading NUL, and the length says where it ends. */
	if (path[0] == '@')
		n->addr.sun_path[0] = '\0';
	n->addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
	    (path[0] == '/'));
	n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (n->fd < 0) {
		log_error("NOTIFY_SOCKET: cannot make a socket: %s; systemd will not hear from us",
		    strerror(errno));
		rc = -1;
	}
out:
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	if (n->fd < 0)
		n->watchdog_usec = 0;
	return rc;
}

bool
notify_enabled(const struct notifier *n)
{
	return n->fd >= 0;
}

int
notify_send(struct notifier *n, const char *msg)
{
	ssize_t sent;

	if (n->fd < 0)
		return 0;
	sent = sendto(n->fd, msg, strlen(msg), MSG_NOSIGNAL | MSG_DONTWAIT,
	    (const struct sockaddr *)&n->addr, n->addr_len);
	if (sent == (ssize_t)strlen(msg))
		return 0;
	if (!n->failed) {
		n->failed = true;
		log_warnx("cannot notify systemd (%.40s): %s; further failures are not logged",
		    msg, sent < 0 ? strerror(errno) : "short send");
	}
	return -1;
}

uint64_t
notify_watchdog_interval_ms(const struct notifier *n)
{
	uint64_t ms = n->watchdog_usec / 2000;

	return n->watchdog_usec == 0 ? 0 : (ms > 0 ? ms : 1);
}

void
notify_close(struct notifier *n)
{
	if (n->fd >= 0)
		close(n->fd);
	n->fd = -1;
}
