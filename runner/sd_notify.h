/*
 * systemd's notification protocol, written here rather than linked from
 * libsystemd: one datagram of "KEY=VALUE" lines to the unix socket that
 * $NOTIFY_SOCKET names (a path, or "@name" for the abstract namespace).
 * That is the whole of it, and it keeps libsystemd out of the binary and
 * the package's dependencies.
 *
 * notify_open() reads $NOTIFY_SOCKET, $WATCHDOG_USEC and $WATCHDOG_PID
 * and removes them from the environment, as sd_notify(unset=1) does: the
 * jobs inherit the daemon's environment, and a job's process must neither
 * speak for the service nor be taken for it.  Without $NOTIFY_SOCKET every
 * call is a no-op, so the daemon calls them unconditionally.
 *
 * Sends never block: the socket is non-blocking, and a datagram that
 * cannot go now is dropped.  The first failure is logged, later ones are
 * not (a notification is advice to the service manager, never a reason to
 * stop working).
 */
#ifndef RUNNER_SD_NOTIFY_H
#define RUNNER_SD_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

struct notifier {
	int			 fd;		/* -1: nobody listens */
	struct sockaddr_un	 addr;
	socklen_t		 addr_len;
	uint64_t		 watchdog_usec;	/* 0: no watchdog for us */
	bool			 failed;	/* a send failed and was logged */
};

/* Always usable afterwards; -1 (logged) if $NOTIFY_SOCKET is unusable. */
int	notify_open(struct notifier *n);
/* Send one message ("READY=1", "STATUS=..."); 0, or -1 if it was not sent. */
int	notify_send(struct notifier *n, const char *msg);
bool	notify_enabled(const struct notifier *n);
/* How often to send WATCHDOG=1 (half the service manager's limit); 0: never. */
uint64_t notify_watchdog_interval_ms(const struct notifier *n);
void	notify_close(struct notifier *n);

#endif
