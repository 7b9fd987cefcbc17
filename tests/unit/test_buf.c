/*
 * Unit tests for the capped byte buffer and the allocation wrappers it
 * sits on.  The cap tests check the whole state after a refused append,
 * because "fails but leaves half the data" is the bug they guard against.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/buf.h"
#include "lib/xmalloc.h"

static void
assert_invariant(const struct buf *b)
{
	assert_non_null(b->ptr);
	assert_int_equal(b->ptr[b->len], '\0');
	if (b->cap != 0)
		assert_true(b->len < b->cap);
	else
		assert_int_equal(b->len, 0);
	assert_true(b->len <= b->max);
}

static void
test_init_empty(void **state)
{
	struct buf	b;

	(void)state;
	buf_init(&b, 100);
	assert_invariant(&b);
	assert_string_equal(b.ptr, "");
	assert_int_equal(b.len, 0);
	assert_int_equal(b.cap, 0);
	assert_int_equal(b.max, 100);
	/* Releasing a never-used buffer must not free the shared "". */
	buf_release(&b);
	assert_invariant(&b);
	assert_int_equal(b.max, 100);
}

static void
test_append_and_nul(void **state)
{
	struct buf	b;

	(void)state;
	buf_init(&b, BUF_UNLIMITED);
	assert_int_equal(buf_append(&b, "abc", 3), 0);
	assert_invariant(&b);
	assert_string_equal(b.ptr, "abc");
	assert_int_equal(buf_puts(&b, "def"), 0);
	assert_int_equal(buf_putc(&b, 'g'), 0);
	assert_int_equal(buf_append(&b, "ignored", 0), 0);
	assert_invariant(&b);
	assert_int_equal(b.len, 7);
	assert_string_equal(b.ptr, "abcdefg");
	buf_release(&b);
}

static void
test_binary_data(void **state)
{
	struct buf	b;
	const char	data[] = { 'a', '\0', 'b', '\0', 'c' };

	(void)state;
	buf_init(&b, BUF_UNLIMITED);
	assert_int_equal(buf_append(&b, data, sizeof data), 0);
	assert_int_equal(b.len, sizeof data);
	assert_memory_equal(b.ptr, data, sizeof data);
	assert_int_equal(b.ptr[b.len], '\0');
	buf_release(&b);
}

static void
test_growth_keeps_contents(void **state)
{
	struct buf	b;
	size_t		i;

	(void)state;
	buf_init(&b, BUF_UNLIMITED);
	for (i = 0; i < 100000; i++) {
		assert_int_equal(buf_putc(&b, (char)('a' + i % 26)), 0);
		assert_int_equal(b.ptr[b.len], '\0');
	}
	assert_int_equal(b.len, 100000);
	for (i = 0; i < 100000; i++)
		assert_int_equal(b.ptr[i], 'a' + i % 26);
	/* Doubling: far fewer than one reallocation per byte. */
	assert_true(b.cap < 2 * 100000 + 64);
	buf_release(&b);
}

static void
test_cap_refuses_and_keeps(void **state)
{
	struct buf	 b;
	char		*before;
	size_t		 cap;

	(void)state;
	buf_init(&b, 10);
	assert_int_equal(buf_append(&b, "12345678", 8), 0);
	before = b.ptr;
	cap = b.cap;

	assert_int_equal(buf_append(&b, "abc", 3), -ENOSPC);
	assert_int_equal(b.len, 8);
	assert_ptr_equal(b.ptr, before);
	assert_int_equal(b.cap, cap);
	assert_string_equal(b.ptr, "12345678");
	assert_invariant(&b);

	assert_int_equal(buf_puts(&b, "xyz"), -ENOSPC);
	assert_string_equal(b.ptr, "12345678");

	/* Exactly up to max is allowed. */
	assert_int_equal(buf_append(&b, "90", 2), 0);
	assert_string_equal(b.ptr, "1234567890");
	assert_int_equal(buf_putc(&b, '!'), -ENOSPC);
	assert_int_equal(b.len, 10);
	assert_string_equal(b.ptr, "1234567890");
	assert_invariant(&b);
	buf_release(&b);
}

static void
test_cap_zero_and_huge(void **state)
{
	struct buf	b;

	(void)state;
	buf_init(&b, 0);
	assert_int_equal(buf_putc(&b, 'x'), -ENOSPC);
	assert_int_equal(b.cap, 0);
	assert_string_equal(b.ptr, "");
	assert_int_equal(buf_append(&b, "", 0), 0);
	buf_release(&b);

	/* A length that would wrap len + n must be refused, not wrap. */
	buf_init(&b, BUF_UNLIMITED);
	assert_int_equal(buf_putc(&b, 'x'), 0);
	assert_int_equal(buf_append(&b, "y", SIZE_MAX), -ENOSPC);
	assert_int_equal(buf_append(&b, "y", BUF_UNLIMITED), -ENOSPC);
	assert_string_equal(b.ptr, "x");
	buf_release(&b);
}

static void
test_printf(void **state)
{
	struct buf	b;

	(void)state;
	buf_init(&b, BUF_UNLIMITED);
	assert_int_equal(buf_printf(&b, "%d-%s", 42, "x"), 0);
	assert_int_equal(buf_printf(&b, "/%05u", 7u), 0);
	assert_string_equal(b.ptr, "42-x/00007");
	assert_int_equal(b.len, 10);
	assert_int_equal(buf_printf(&b, "%s", ""), 0);
	assert_int_equal(b.len, 10);
	assert_invariant(&b);
	buf_release(&b);
}

static void
test_printf_grows(void **state)
{
	struct buf	 b;
	char		*big;
	size_t		 i;

	(void)state;
	big = xmalloc(10001);
	for (i = 0; i < 10000; i++)
		big[i] = (char)('A' + i % 26);
	big[10000] = '\0';

	buf_init(&b, BUF_UNLIMITED);
	/* First write into an unallocated buffer, several arguments. */
	assert_int_equal(buf_printf(&b, "[%s|%d|%s]", big, -5, "tail"), 0);
	assert_int_equal(b.len, 1 + 10000 + 9);
	assert_int_equal(b.ptr[0], '[');
	assert_memory_equal(b.ptr + 1, big, 10000);
	assert_string_equal(b.ptr + 10001, "|-5|tail]");
	/* Again, now that part of the output fits in place and part not. */
	assert_int_equal(buf_printf(&b, "%s%s", big, big), 0);
	assert_int_equal(b.len, 30010);
	assert_memory_equal(b.ptr + 10010, big, 10000);
	assert_memory_equal(b.ptr + 20010, big, 10000);
	assert_invariant(&b);
	buf_release(&b);
	free(big);
}

/* Every output length around the allocated size, including exact fits. */
static void
test_printf_boundaries(void **state)
{
	struct buf	b;
	char		src[300], want[600];
	size_t		pre, n;

	(void)state;
	memset(src, 'x', sizeof src);
	for (pre = 0; pre < 70; pre += 7) {
		for (n = 0; n < 270; n++) {
			buf_init(&b, BUF_UNLIMITED);
			memset(want, 'p', pre);
			assert_int_equal(buf_append(&b, want, pre), 0);
			assert_int_equal(buf_printf(&b, "%.*s", (int)n, src), 0);
			assert_int_equal(b.len, pre + n);
			assert_invariant(&b);
			memcpy(want + pre, src, n);
			assert_memory_equal(b.ptr, want, pre + n);
			buf_release(&b);
		}
	}
}

static void
test_printf_respects_max(void **state)
{
	struct buf	b;

	(void)state;
	buf_init(&b, 20);
	assert_int_equal(buf_printf(&b, "%s", "0123456789"), 0);
	assert_int_equal(buf_printf(&b, "%s-%d", "abcdefghij", 1), -ENOSPC);
	assert_int_equal(b.len, 10);
	assert_string_equal(b.ptr, "0123456789");
	assert_invariant(&b);
	assert_int_equal(buf_printf(&b, "%s", "abcdefghij"), 0);
	assert_string_equal(b.ptr, "0123456789abcdefghij");
	assert_int_equal(buf_printf(&b, "%s", "z"), -ENOSPC);
	assert_string_equal(b.ptr, "0123456789abcdefghij");
	buf_release(&b);

	/* Refused on an unallocated buffer too. */
	buf_init(&b, 3);
	assert_int_equal(buf_printf(&b, "%d", 12345), -ENOSPC);
	assert_int_equal(b.len, 0);
	assert_string_equal(b.ptr, "");
	buf_release(&b);
}

static int
call_vprintf(struct buf *b, const char *fmt, ...)
{
	va_list	ap;
	int	rc;

	va_start(ap, fmt);
	rc = buf_vprintf(b, fmt, ap);
	va_end(ap);
	return rc;
}

static void
test_vprintf(void **state)
{
	struct buf	b;
	char		big[300];

	(void)state;
	memset(big, 'q', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	buf_init(&b, BUF_UNLIMITED);
	/* Needs a second vsnprintf pass: the va_list must be copied. */
	assert_int_equal(call_vprintf(&b, "%s:%d:%s", big, 7, "end"), 0);
	assert_int_equal(b.len, 299 + 6);
	assert_string_equal(b.ptr + 299, ":7:end");
	buf_release(&b);
}

static void
test_reset_keeps_memory(void **state)
{
	struct buf	 b;
	char		*p;
	size_t		 cap;

	(void)state;
	buf_init(&b, BUF_UNLIMITED);
	assert_int_equal(buf_puts(&b, "hello"), 0);
	p = b.ptr;
	cap = b.cap;
	buf_reset(&b);
	assert_int_equal(b.len, 0);
	assert_string_equal(b.ptr, "");
	assert_ptr_equal(b.ptr, p);
	assert_int_equal(b.cap, cap);
	assert_int_equal(buf_puts(&b, "hi"), 0);
	assert_string_equal(b.ptr, "hi");
	buf_release(&b);

	buf_init(&b, 5);
	buf_reset(&b);		/* on the shared "" */
	assert_string_equal(b.ptr, "");
	buf_release(&b);
}

static void
test_consume(void **state)
{
	struct buf	b;

	(void)state;
	buf_init(&b, BUF_UNLIMITED);
	assert_int_equal(buf_puts(&b, "abcdefgh"), 0);
	buf_consume(&b, 0);
	assert_string_equal(b.ptr, "abcdefgh");
	buf_consume(&b, 3);
	assert_int_equal(b.len, 5);
	assert_string_equal(b.ptr, "defgh");
	assert_invariant(&b);
	buf_consume(&b, 5);
	assert_int_equal(b.len, 0);
	assert_string_equal(b.ptr, "");
	assert_int_equal(buf_puts(&b, "xy"), 0);
	assert_string_equal(b.ptr, "xy");
	buf_release(&b);

	/* Consuming frees room under the cap. */
	buf_init(&b, 4);
	assert_int_equal(buf_puts(&b, "abcd"), 0);
	assert_int_equal(buf_putc(&b, 'e'), -ENOSPC);
	buf_consume(&b, 2);
	assert_int_equal(buf_puts(&b, "ef"), 0);
	assert_string_equal(b.ptr, "cdef");
	buf_release(&b);

	buf_init(&b, 4);
	buf_consume(&b, 0);	/* on the shared "" */
	assert_string_equal(b.ptr, "");
	buf_release(&b);
}

static void
test_detach(void **state)
{
	struct buf	 b;
	char		*s;
	size_t		 len = 99;

	(void)state;
	buf_init(&b, 50);
	assert_int_equal(buf_puts(&b, "payload"), 0);
	s = buf_detach(&b, &len);
	assert_string_equal(s, "payload");
	assert_int_equal(len, 7);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.cap, 0);
	assert_int_equal(b.max, 50);
	assert_string_equal(b.ptr, "");
	assert_true(b.ptr != s);
	/* The buffer is reusable and independent of what it handed out. */
	assert_int_equal(buf_puts(&b, "again"), 0);
	assert_string_equal(s, "payload");
	free(s);
	s = buf_detach(&b, NULL);
	assert_string_equal(s, "again");
	free(s);

	/* An empty buffer still hands out something the caller can free. */
	len = 99;
	s = buf_detach(&b, &len);
	assert_non_null(s);
	assert_string_equal(s, "");
	assert_int_equal(len, 0);
	free(s);
	buf_release(&b);
}

static void
test_release(void **state)
{
	struct buf	b;

	(void)state;
	buf_init(&b, 77);
	assert_int_equal(buf_puts(&b, "something"), 0);
	buf_release(&b);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.cap, 0);
	assert_int_equal(b.max, 77);
	assert_string_equal(b.ptr, "");
	assert_int_equal(buf_puts(&b, "more"), 0);
	assert_string_equal(b.ptr, "more");
	buf_release(&b);
}

static void
test_xmalloc_helpers(void **state)
{
	char	*s;
	int	*a;
	size_t	 i;

	(void)state;
	s = xmemdup("a\0b", 3);
	assert_memory_equal(s, "a\0b", 3);
	assert_int_equal(s[3], '\0');
	free(s);

	s = xstrdup("copy");
	assert_string_equal(s, "copy");
	free(s);

	s = xasprintf("%s=%d", "n", 12);
	assert_string_equal(s, "n=12");
	free(s);

	a = xcalloc(16, sizeof *a);
	for (i = 0; i < 16; i++)
		assert_int_equal(a[i], 0);
	a = xreallocarray(a, 1000, sizeof *a);
	a[999] = 5;
	assert_int_equal(a[0], 0);
	free(a);

	/* Zero sizes still give a pointer that can be freed. */
	s = xmalloc(0);
	assert_non_null(s);
	free(s);
}

/* Run fn in a child and return its raw wait status and its stderr. */
static int
run_child(void (*fn)(void), char *out, size_t outsz)
{
	int	p[2], status;
	pid_t	pid;
	ssize_t	n;
	size_t	got = 0;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		dup2(p[1], 2);
		signal(SIGABRT, SIG_DFL);
		fn();
		_exit(0);
	}
	close(p[1]);
	while (got + 1 < outsz &&
	    (n = read(p[0], out + got, outsz - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

static void
overflowing_array(void)
{
	volatile size_t	n = SIZE_MAX / 2;

	free(xreallocarray(NULL, n, 4));
}

static void
test_xreallocarray_overflow_aborts(void **state)
{
	char	out[4096];
	int	status;

	(void)state;
	status = run_child(overflowing_array, out, sizeof out);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
	assert_non_null(strstr(out, "runner: out of memory allocating "));
	assert_non_null(strstr(out, " bytes\n"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_empty),
		cmocka_unit_test(test_append_and_nul),
		cmocka_unit_test(test_binary_data),
		cmocka_unit_test(test_growth_keeps_contents),
		cmocka_unit_test(test_cap_refuses_and_keeps),
		cmocka_unit_test(test_cap_zero_and_huge),
		cmocka_unit_test(test_printf),
		cmocka_unit_test(test_printf_grows),
		cmocka_unit_test(test_printf_boundaries),
		cmocka_unit_test(test_printf_respects_max),
		cmocka_unit_test(test_vprintf),
		cmocka_unit_test(test_reset_keeps_memory),
		cmocka_unit_test(test_consume),
		cmocka_unit_test(test_detach),
		cmocka_unit_test(test_release),
		cmocka_unit_test(test_xmalloc_helpers),
		cmocka_unit_test(test_xreallocarray_overflow_aborts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
