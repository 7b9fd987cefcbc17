/*
 * Unit tests for the systemd notification sender: each message arrives as
 * one datagram on a bound unix socket (a path and the abstract
 * namespace), the variables leave the environment, no socket is a no-op,
 * a listener that went away is an error but no crash, and the watchdog
 * interval is half of $WATCHDOG_USEC unless $WATCHDOG_PID names another.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "runner/sd_notify.h"

/* A datagram socket bound to name ("@x": abstract); its fd. */
static int
listener(const char *name)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	size_t len = strlen(name);
	socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	memcpy(a.sun_path, name, len);
	if (name[0] == '@')
		a.sun_path[0] = '\0';
	else
		alen++;
	assert_int_equal(bind(fd, (struct sockaddr *)&a, alen), 0);
	return fd;
}

/* The next datagram, or "" if none is waiting. */
static void
next_msg(int fd, char *out, size_t size)
{
	ssize_t n = recv(fd, out, size - 1, MSG_DONTWAIT);

	out[n > 0 ? n : 0] = '\0';
}

static void
exchange(const char *name)
{
	struct notifier n;
	char msg[256];
	int fd = listener(name);

	setenv("NOTIFY_SOCKET", name, 1);
	assert_int_equal(notify_open(&n), 0);
	assert_true(notify_enabled(&n));
	assert_null(getenv("NOTIFY_SOCKET"));
	assert_int_equal(notify_send(&n, "READY=1"), 0);
	assert_int_equal(notify_send(&n, "STATUS=3 jobs running"), 0);
	next_msg(fd, msg, sizeof(msg));
	assert_string_equal(msg, "READY=1");
	next_msg(fd, msg, sizeof(msg));
	assert_string_equal(msg, "STATUS=3 jobs running");
	next_msg(fd, msg, sizeof(msg));
	assert_string_equal(msg, "");
	notify_close(&n);
	close(fd);
}

static void
test_path_socket(void **state)
{
	char dir[] = "/tmp/test_sd_notify.XXXXXX", path[128];

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/notify", dir);
	exchange(path);
	unlink(path);
	rmdir(dir);
}

static void
test_abstract_socket(void **state)
{
	char name[64];

	(void)state;
	snprintf(name, sizeof(name), "@runner-test-notify-%ld", (long)getpid());
	exchange(name);
}

static void
test_no_socket_is_a_noop(void **state)
{
	struct notifier n;

	(void)state;
	unsetenv("NOTIFY_SOCKET");
	setenv("WATCHDOG_USEC", "1000000", 1);
	assert_int_equal(notify_open(&n), 0);
	assert_false(notify_enabled(&n));
	assert_int_equal(notify_send(&n, "READY=1"), 0);
	/* Nobody to tell: no watchdog either, and the jobs do not inherit it. */
	assert_int_equal(notify_watchdog_interval_ms(&n), 0);
	assert_null(getenv("WATCHDOG_USEC"));
	notify_close(&n);
}

static void
test_bad_socket_names(void **state)
{
	struct notifier n;
	char longname[200];

	(void)state;
	setenv("NOTIFY_SOCKET", "relative/path", 1);
	assert_int_equal(notify_open(&n), -1);
	assert_false(notify_enabled(&n));
	assert_int_equal(notify_send(&n, "READY=1"), 0);
	memset(longname, 'x', sizeof(longname) - 1);
	longname[0] = '/';
	longname[sizeof(longname) - 1] = '\0';
	setenv("NOTIFY_SOCKET", longname, 1);
	assert_int_equal(notify_open(&n), -1);
	assert_null(getenv("NOTIFY_SOCKET"));
}

static void
test_listener_gone(void **state)
{
	struct notifier n;
	char name[64];
	int fd;

	(void)state;
	snprintf(name, sizeof(name), "@runner-test-gone-%ld", (long)getpid());
	fd = listener(name);
	setenv("NOTIFY_SOCKET", name, 1);
	assert_int_equal(notify_open(&n), 0);
	close(fd);
	/* Fails every time, said once (the log is not checked here), never blocks. */
	assert_int_equal(notify_send(&n, "WATCHDOG=1"), -1);
	assert_int_equal(notify_send(&n, "WATCHDOG=1"), -1);
	assert_true(n.failed);
	notify_close(&n);
}

static void
test_watchdog(void **state)
{
	struct notifier n;
	char name[64], pid[32];
	int fd;

	(void)state;
	snprintf(name, sizeof(name), "@runner-test-wd-%ld", (long)getpid());
	fd = listener(name);

	setenv("NOTIFY_SOCKET", name, 1);
	setenv("WATCHDOG_USEC", "30000000", 1);
	unsetenv("WATCHDOG_PID");
	assert_int_equal(notify_open(&n), 0);
	assert_int_equal(notify_watchdog_interval_ms(&n), 15000);
	assert_null(getenv("WATCHDOG_USEC"));
	notify_close(&n);

	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	setenv("NOTIFY_SOCKET", name, 1);
	setenv("WATCHDOG_USEC", "3000", 1);
	setenv("WATCHDOG_PID", pid, 1);
	assert_int_equal(notify_open(&n), 0);
	assert_int_equal(notify_watchdog_interval_ms(&n), 1);
	assert_null(getenv("WATCHDOG_PID"));
	notify_close(&n);

	/* Meant for another process (our parent): not ours to feed. */
	snprintf(pid, sizeof(pid), "%ld", (long)getppid());
	setenv("NOTIFY_SOCKET", name, 1);
	setenv("WATCHDOG_USEC", "30000000", 1);
	setenv("WATCHDOG_PID", pid, 1);
	assert_int_equal(notify_open(&n), 0);
	assert_int_equal(notify_watchdog_interval_ms(&n), 0);
	notify_close(&n);

	setenv("NOTIFY_SOCKET", name, 1);
	setenv("WATCHDOG_USEC", "soon", 1);
	assert_int_equal(notify_open(&n), 0);
	assert_int_equal(notify_watchdog_interval_ms(&n), 0);
	notify_close(&n);
	close(fd);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_path_socket),
		cmocka_unit_test(test_abstract_socket),
		cmocka_unit_test(test_no_socket_is_a_noop),
		cmocka_unit_test(test_bad_socket_names),
		cmocka_unit_test(test_listener_gone),
		cmocka_unit_test(test_watchdog),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
