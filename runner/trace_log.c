/*
 * The job log buffer: every byte of job and runner output goes through
 * UTF-8 sanitising, the masker, the timestamper and the output limit, and
 * what survives is appended to a file with its running crc32 and size
 * (protocol.md 6.4, 6.5).
 *
 * Stages, in the order bytes meet them:
 *
 *   sanitiser (per stream)  invalid UTF-8 becomes U+FFFD, one per maximal
 *                           invalid subpart (Unicode's "best practice"); a
 *                           sequence cut by the end of a write waits in the
 *                           stream's state for the rest.
 *   masker (per stream)     a secret printed in pieces is masked as long as
 *                           its pieces come on one stream; a masker for all
 *                           streams would see the other stream's bytes in
 *                           between and let it through (gitlab-runner keeps
 *                           one per stream for this reason).
 *   timestamper (per stream) splits lines and prefixes the 32-byte header;
 *                           the partial line of each stream waits for its
 *                           '\n' (or a '\r', 8 KiB, or the end).
 *   limit                   cuts at output_limit on a character boundary
 *                           and appends the notice once.
 *   file                    a 32 KiB write buffer in front of the file; crc
 *                           and size count the bytes kept, so they always
 *                           describe file + buffer exactly.
 *
 * When a write to the file fails (a full disk), the log ends there: what
 * the buffer holds stays in memory, the disk notice follows it from the
 * reserve behind the buffer, and nothing more is taken.  The reserve is
 * allocated with the buffer so that saying so needs neither disk nor a
 * new allocation.
 *
 * With a masker per stream, whatever a masker releases belongs to its own
 * stream, so the timestamper always knows whose line it is.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/buf.h"
#include "lib/crc32.h"
#include "lib/xmalloc.h"
#include "runner/mask.h"
#include "runner/trace_log.h"

#define TL_NSTREAMS	3
/*
 * Per running job: 32 KiB already makes a write(2) rare next to the bytes
 * it carries, and a hundred jobs should not cost a hundred 64 KiB buffers.
 */
#define TL_WBUF_SIZE	(32 * 1024)
/* Room behind the write buffer for the disk notice, header included. */
#define TL_RESERVE	256
/* The timestamper's partial-line buffer, header included (as gitlab-runner). */
#define TS_BUFSIZE	(8 * 1024)
#define TS_HDRLEN	32

static const char	 replacement[] = "\xef\xbf\xbd";	/* U+FFFD */

struct utf8_state {
	unsigned char	 seq[4];
	size_t		 len;		/* bytes of seq held */
	size_t		 need;		/* length the lead byte announced */
};

struct ts_state {
	struct buf	 line;		/* header + partial line, or empty */
	int		 cont;		/* next header gets '+' */
};

struct trace_log {
	char		*path;
	int		 fd;
	int		 readonly;	/* reopened: no writes */
	int		 finished;
	int		 truncated;
	int		 timestamps;
	uint64_t	 limit;
	int64_t		(*now_us)(void);

	uint64_t	 size;		/* bytes kept: file + wbuf */
	uint32_t	 crc;		/* of the file and wbuf's first crc_done bytes */
	size_t		 crc_done;
	uint64_t	 flushed;	/* bytes in the file */
	char		*wbuf;
	size_t		 wlen;

	int		 err;		/* first error of the current call */
	int		 disk_err;	/* errno of the failed write: the log is sealed */

	struct utf8_state u8[TL_NSTREAMS];
	struct ts_state	 ts[TL_NSTREAMS];
	struct buf	 sbuf;		/* sanitised bytes of one write */

	struct masker	*masker[TL_NSTREAMS];
	struct buf	 mbuf;		/* masker output of one call */

	/* "2026-08-21T10:15:02." of ts_sec: a second's lines share it. */
	int64_t		 ts_sec;
	char		 ts_date[21];
	/*
	 * The clock is read once a call: the lines of one write arrived
	 * together.  ts_time is "2026-08-21T10:15:02.123456Z " of ts_us.
	 */
	bool		 now_valid;
	int64_t		 now;
	int64_t		 ts_us;
	char		 ts_time[TS_HDRLEN - 4];
};

/* File stage. */

static void	ts_header(struct trace_log *, enum trace_stream, char [TS_HDRLEN + 1]);

static void
tl_seterr(struct trace_log *t, int err)
{
	if (t->err == 0)
		t->err = err;
}

/* The last byte kept, '\n' for none: does the notice need a line of its own? */
static char
tl_last_byte(const struct trace_log *t)
{
	char	 c = '\n';

	if (t->wlen > 0)
		return t->wbuf[t->wlen - 1];
	if (t->flushed > 0 && pread(t->fd, &c, 1, (off_t)(t->flushed - 1)) != 1)
		c = '\n';	/* unreadable: a blank line costs nothing */
	return c;
}

/*
 * The disk failed with err: seal the log.  What the buffer holds is kept
 * (it is counted already) and the notice goes behind it, into the reserve,
 * as a runner line; GitLab gets both from memory.
 */
static void
tl_disk_failed(struct trace_log *t, int err)
{
	char	 hdr[TS_HDRLEN + 1], *p = t->wbuf + t->wlen;
	size_t	 room = TL_WBUF_SIZE + TL_RESERVE - t->wlen, n = 0;
	int	 len;

	t->disk_err = err;
	if (tl_last_byte(t) != '\n')
		p[n++] = '\n';
	if (t->timestamps) {
		/* Now, not when the last write came: a flush may fail much later. */
		t->now_valid = false;
		ts_header(t, TRACE_RUNNER, hdr);
		memcpy(p + n, hdr, TS_HDRLEN);
		n += TS_HDRLEN;
	}
	len = snprintf(p + n, room - n, "\x1b[31;1mERROR: the job log could not be "
	    "written to disk: %s\x1b[0;m\n", strerror(err));
	if (len < 0)
		len = 0;
	n += (size_t)len < room - n ? (size_t)len : room - n - 1;
	/* Cut by the reserve's size, it still ends its line. */
	p[n - 1] = '\n';
	t->wlen += n;
	t->size += n;
}

/*
 * Write the buffer out; on failure keep what was not written and seal the
 * log (tl_disk_failed).  Sealed, there is nothing more to write: 0.
 */
static int
tl_flush(struct trace_log *t)
{
	size_t	 off = 0;
	ssize_t	 n;
	int	 rc = 0;

	if (t->disk_err != 0)
		return 0;
	/* The crc goes over whole buffers: per line, zlib's call cost dominated. */
	if (t->wlen > t->crc_done) {
		t->crc = crc32_update(t->crc, t->wbuf + t->crc_done,
		    t->wlen - t->crc_done);
		t->crc_done = t->wlen;
	}
	while (off < t->wlen) {
		n = pwrite(t->fd, t->wbuf + off, t->wlen - off,
		    (off_t)(t->flushed + off));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			break;
		}
		if (n == 0) {
			rc = -EIO;
			break;
		}
		off += (size_t)n;
	}
	t->flushed += off;
	memmove(t->wbuf, t->wbuf + off, t->wlen - off);
	t->wlen -= off;
	t->crc_done -= off;
	if (rc != 0)
		tl_disk_failed(t, -rc);
	return rc;
}

/*
 * Keep n bytes.  If the disk fails with the buffer full, the rest is
 * dropped and not counted, so crc and size still describe exactly the
 * bytes we have; so is everything after.
 */
static void
tl_store(struct trace_log *t, const char *p, size_t n)
{
	size_t	 k;
	int	 rc;

	if (t->disk_err != 0)
		return;
	while (n > 0) {
		if (t->wlen == TL_WBUF_SIZE && (rc = tl_flush(t)) != 0) {
			tl_seterr(t, rc);
			return;
		}
		k = TL_WBUF_SIZE - t->wlen;
		if (k > n)
			k = n;
		memcpy(t->wbuf + t->wlen, p, k);
		t->wlen += k;
		t->size += k;
		p += k;
		n -= k;
	}
}

/* Limit stage. */

static void	tl_emit(struct trace_log *, const char *, size_t);

/*
 * A header and its line: one call, two copies, when both fit the buffer
 * and the limit (every line of a job's output comes this way).
 */
static void
tl_emit2(struct trace_log *t, const char *a, size_t na, const char *b,
    size_t nb)
{
	size_t	 n = na + nb;

	if (!t->truncated && t->disk_err == 0 && t->size <= t->limit &&
	    n <= t->limit - t->size && n <= TL_WBUF_SIZE - t->wlen) {
		memcpy(t->wbuf + t->wlen, a, na);
		memcpy(t->wbuf + t->wlen + na, b, nb);
		t->wlen += n;
		t->size += n;
		return;
	}
	tl_emit(t, a, na);
	tl_emit(t, b, nb);
}

static void
tl_emit(struct trace_log *t, const char *p, size_t n)
{
	char	 notice[256];
	size_t	 keep;
	int	 len;

	if (t->truncated || n == 0)
		return;
	if (t->size <= t->limit && n <= t->limit - t->size) {
		tl_store(t, p, n);
		return;
	}

	keep = t->size < t->limit ? (size_t)(t->limit - t->size) : 0;
	/* p[keep] is the first byte dropped: do not keep half its character. */
	while (keep > 0 && ((unsigned char)p[keep] & 0xc0) == 0x80)
		keep--;
	tl_store(t, p, keep);

	len = snprintf(notice, sizeof notice, "\n\x1b[33;1mJob's log exceeded "
	    "limit of %llu bytes.\nJob execution will continue but no more "
	    "output will be collected.\x1b[0;m\n", (unsigned long long)t->limit);
	tl_store(t, notice, (size_t)len);
	t->truncated = 1;
}

/* Timestamper stage. */

static int64_t
tl_now(struct trace_log *t)
{
	struct timespec	 ts;

	if (t->now_valid)
		return t->now;
	if (t->now_us != NULL)
		t->now = t->now_us();
	else {
		clock_gettime(CLOCK_REALTIME, &ts);
		t->now = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
	}
	t->now_valid = true;
	return t->now;
}

/*
 * "2026-08-21T10:15:02.123456Z 01O " and the '+' flag is used up.  Every
 * line gets one, so the date is formatted once a second, the time once a
 * call, and the rest by hand: snprintf and gmtime_r per line were a
 * quarter of the log path.
 */
static void
ts_header(struct trace_log *t, enum trace_stream s, char out[TS_HDRLEN + 1])
{
	int64_t		 us = tl_now(t);
	int64_t		 sec = us / 1000000, frac = us % 1000000;
	time_t		 tt;
	struct tm	 tm;
	char		 tmp[64];
	int		 i;

	if (us == t->ts_us && t->ts_time[0] != '\0')
		goto stream;
	if (frac < 0) {
		frac += 1000000;
		sec--;
	}
	if (sec != t->ts_sec || t->ts_date[0] == '\0') {
		tt = (time_t)sec;
		if (gmtime_r(&tt, &tm) == NULL)
			memset(&tm, 0, sizeof tm);
		snprintf(tmp, sizeof tmp, "%04d-%02d-%02dT%02d:%02d:%02d.",
		    (tm.tm_year + 1900) % 10000, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		    tm.tm_min, tm.tm_sec);
		memcpy(t->ts_date, tmp, 20);
		t->ts_date[20] = '\0';
		t->ts_sec = sec;
	}
	memcpy(t->ts_time, t->ts_date, 20);
	for (i = 25; i >= 20; i--) {
		t->ts_time[i] = (char)('0' + frac % 10);
		frac /= 10;
	}
	t->ts_time[26] = 'Z';
	t->ts_time[27] = ' ';
	t->ts_us = us;
stream:
	memcpy(out, t->ts_time, TS_HDRLEN - 4);
	out[28] = '0';
	out[29] = s == TRACE_RUNNER ? '0' : '1';
	out[30] = s == TRACE_STDERR ? 'E' : 'O';
	out[31] = t->ts[s].cont ? '+' : ' ';
	out[TS_HDRLEN] = '\0';
	t->ts[s].cont = 0;
}

static void
ts_emit_header(struct trace_log *t, enum trace_stream s)
{
	char	 hdr[TS_HDRLEN + 1];

	ts_header(t, s, hdr);
	tl_emit(t, hdr, TS_HDRLEN);
}

/* Emit the stream's pending line (it starts with its header). */
static void
ts_emit_pending(struct trace_log *t, enum trace_stream s)
{
	struct ts_state	*ts = &t->ts[s];

	tl_emit(t, ts->line.ptr, ts->line.len);
	buf_reset(&ts->line);
}

/* Start the entry: the pending line if there is one, else a fresh header. */
static void
ts_begin(struct trace_log *t, enum trace_stream s)
{
	if (t->ts[s].line.len > 0)
		ts_emit_pending(t, s);
	else
		ts_emit_header(t, s);
}

/*
 * One write's worth of bytes of stream s, the way gitlab-runner's
 * timestamper takes a Write(): whole lines out, then the rest either
 * flushed ('\r' in it, or too long) or kept for the next write.
 */
static void
ts_write(struct trace_log *t, enum trace_stream s, const char *p, size_t n)
{
	struct ts_state	*ts = &t->ts[s];
	const char	*nl, *q;
	char		 hdr[TS_HDRLEN + 1];
	size_t		 end, i, len;

	if (n == 0)
		return;
	if (!t->timestamps) {
		tl_emit(t, p, n);
		return;
	}

	if ((nl = memrchr(p, '\n', n)) != NULL) {
		end = (size_t)(nl - p) + 1;
		for (i = 0; i < end; i += len) {
			q = memchr(p + i, '\n', end - i);
			len = (size_t)(q - (p + i)) + 1;
			if (ts->line.len > 0) {
				ts_emit_pending(t, s);
				tl_emit(t, p + i, len);
				continue;
			}
			ts_header(t, s, hdr);
			tl_emit2(t, hdr, TS_HDRLEN, p + i, len);
		}
		p += end;
		n -= end;
		if (n == 0)
			return;
	}

	/* A progress bar or section marker: show it now, continue with '+'. */
	if (memchr(p, '\r', n) != NULL) {
		ts_begin(t, s);
		tl_emit(t, p, n);
		tl_emit(t, "\n", 1);
		ts->cont = 1;
		return;
	}

	/* Do not hold arbitrarily long lines in memory. */
	if (ts->line.len + n > TS_BUFSIZE) {
		ts_begin(t, s);
		ts->cont = 1;
		tl_emit(t, p, n);
		tl_emit(t, "\n", 1);
		return;
	}

	/* The header carries the time the line started. */
	if (ts->line.len == 0) {
		ts_header(t, s, hdr);
		buf_append(&ts->line, hdr, TS_HDRLEN);
	}
	buf_append(&ts->line, p, n);
}

static void
ts_finish(struct trace_log *t, enum trace_stream s)
{
	struct ts_state	*ts = &t->ts[s];

	if (ts->line.len == 0)
		return;
	buf_putc(&ts->line, '\n');
	ts_emit_pending(t, s);
}

/* Masker stage. */

/*
 * What the masker hands on is mbuf (what it held back before, masks)
 * and then a run of p not copied (mostly all of it).  The timestamper
 * takes them as one write: mbuf with the run's first line, then the
 * rest, which is the same as one write because the first ends a line.
 */
static void
mask_write(struct trace_log *t, enum trace_stream s, const char *p, size_t n)
{
	const char	*d, *nl;
	size_t		 dn, k;

	if (n == 0)
		return;
	if (t->masker[s] == NULL) {
		ts_write(t, s, p, n);
		return;
	}
	buf_reset(&t->mbuf);
	if (masker_write_direct(t->masker[s], p, n, &t->mbuf, &d, &dn) != 0)
		tl_seterr(t, -ENOMEM);
	if (dn == 0) {
		ts_write(t, s, t->mbuf.ptr, t->mbuf.len);
		return;
	}
	if (t->mbuf.len == 0) {
		ts_write(t, s, d, dn);
		return;
	}
	nl = memchr(d, '\n', dn);
	k = nl != NULL ? (size_t)(nl - d) + 1 : dn;
	buf_append(&t->mbuf, d, k);
	ts_write(t, s, t->mbuf.ptr, t->mbuf.len);
	ts_write(t, s, d + k, dn - k);
}

/* The stream ended: what each masker held back was no secret. */
static void
mask_finish(struct trace_log *t)
{
	int i;

	for (i = 0; i < TL_NSTREAMS; i++) {
		if (t->masker[i] == NULL)
			continue;
		buf_reset(&t->mbuf);
		if (masker_flush(t->masker[i], &t->mbuf) != 0)
			tl_seterr(t, -ENOMEM);
		ts_write(t, (enum trace_stream)i, t->mbuf.ptr, t->mbuf.len);
	}
}

/* Sanitiser stage. */

/* Is c allowed as byte number i (1..3) of a sequence led by lead? */
static int
utf8_cont_ok(unsigned char lead, size_t i, unsigned char c)
{
	if (i == 1) {
		/* No overlongs, no surrogates, nothing past U+10FFFF. */
		switch (lead) {
		case 0xe0:
			return c >= 0xa0 && c <= 0xbf;
		case 0xed:
			return c >= 0x80 && c <= 0x9f;
		case 0xf0:
			return c >= 0x90 && c <= 0xbf;
		case 0xf4:
			return c >= 0x80 && c <= 0x8f;
		}
	}
	return (c & 0xc0) == 0x80;
}

static size_t
utf8_seqlen(unsigned char c)
{
	if (c >= 0xc2 && c <= 0xdf)
		return 2;
	if (c >= 0xe0 && c <= 0xef)
		return 3;
	if (c >= 0xf0 && c <= 0xf4)
		return 4;
	return 0;
}

/*
 * Does p hold only whole, valid sequences?  ASCII 8 bytes at a time: job
 * output is mostly that.
 */
static bool
utf8_valid(const unsigned char *p, size_t n)
{
	size_t		 i = 0, k, need;
	uint64_t	 w;

	while (i < n) {
		if (n - i >= 8) {
			memcpy(&w, p + i, 8);
			if ((w & 0x8080808080808080ull) == 0) {
				i += 8;
				continue;
			}
		}
		if (p[i] < 0x80) {
			i++;
			continue;
		}
		if ((need = utf8_seqlen(p[i])) == 0 || need > n - i)
			return false;
		for (k = 1; k < need; k++) {
			if (!utf8_cont_ok(p[i], k, p[i + k]))
				return false;
		}
		i += need;
	}
	return true;
}

/*
 * Sanitise p: the bytes to go on, p itself when it is valid and nothing
 * is pending (the common case, no copy), else t->sbuf's, carrying an
 * unfinished sequence in u.
 */
static const char *
utf8_sanitise(struct trace_log *t, struct utf8_state *u, const char *p,
    size_t n, size_t *outlen)
{
	const unsigned char	*s = (const unsigned char *)p;
	size_t			 i = 0, j;
	unsigned char		 c;

	if (u->len == 0 && utf8_valid(s, n)) {
		*outlen = n;
		return p;
	}
	buf_reset(&t->sbuf);
	while (i < n) {
		c = s[i];
		if (u->len > 0) {
			if (utf8_cont_ok(u->seq[0], u->len, c)) {
				u->seq[u->len++] = c;
				i++;
				if (u->len == u->need) {
					buf_append(&t->sbuf, u->seq, u->len);
					u->len = 0;
				}
				continue;
			}
			/* The maximal subpart so far is one error; c starts anew. */
			buf_append(&t->sbuf, replacement, 3);
			u->len = 0;
			continue;
		}
		if (c < 0x80) {
			for (j = i; j < n && s[j] < 0x80; j++)
				;
			buf_append(&t->sbuf, s + i, j - i);
			i = j;
			continue;
		}
		if ((u->need = utf8_seqlen(c)) == 0)
			buf_append(&t->sbuf, replacement, 3);
		else
			u->seq[u->len++] = c;
		i++;
	}
	*outlen = t->sbuf.len;
	return t->sbuf.ptr;
}

/* Public interface. */

static struct trace_log *
tl_alloc(const char *path)
{
	struct trace_log	*t;
	int			 i;

	t = xcalloc(1, sizeof *t);
	t->path = xstrdup(path);
	t->fd = -1;
	t->crc = crc32_update(0, NULL, 0);
	for (i = 0; i < TL_NSTREAMS; i++)
		buf_init(&t->ts[i].line, BUF_UNLIMITED);
	buf_init(&t->sbuf, BUF_UNLIMITED);
	buf_init(&t->mbuf, BUF_UNLIMITED);
	return t;
}

static void
tl_free(struct trace_log *t)
{
	int	 i;

	for (i = 0; i < TL_NSTREAMS; i++)
		buf_release(&t->ts[i].line);
	buf_release(&t->sbuf);
	buf_release(&t->mbuf);
	for (i = 0; i < TL_NSTREAMS; i++)
		if (t->masker[i] != NULL)
			masker_free(t->masker[i]);
	free(t->wbuf);
	free(t->path);
	free(t);
}

/*
 * On failure the maskers are not taken over: the caller still owns them,
 * as with every other argument of a call that failed.
 */
struct trace_log *
trace_log_open(const struct trace_log_config *cfg)
{
	struct trace_log	*t;
	int			 fd, i;

	fd = open(cfg->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd == -1)
		return NULL;
	t = tl_alloc(cfg->path);
	t->fd = fd;
	t->limit = cfg->limit;
	t->timestamps = cfg->timestamps;
	for (i = 0; i < TL_NSTREAMS; i++)
		t->masker[i] = cfg->masker[i];
	t->now_us = cfg->now_us;
	t->wbuf = xmalloc(TL_WBUF_SIZE + TL_RESERVE);
	return t;
}

struct trace_log *
trace_log_reopen(const char *path)
{
	struct trace_log	*t;
	char			*rbuf;
	ssize_t			 n;
	int			 fd, saved;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return NULL;
	t = tl_alloc(path);
	t->fd = fd;
	t->readonly = 1;
	t->finished = 1;

	rbuf = xmalloc(TL_WBUF_SIZE);
	for (;;) {
		n = read(fd, rbuf, TL_WBUF_SIZE);
		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			saved = errno;
			free(rbuf);
			close(fd);
			tl_free(t);
			errno = saved;
			return NULL;
		}
		t->crc = crc32_update(t->crc, rbuf, (size_t)n);
		t->size += (uint64_t)n;
	}
	free(rbuf);
	t->flushed = t->size;
	return t;
}

void
trace_log_close(struct trace_log *t, bool remove)
{
	if (t == NULL)
		return;
	/* Whatever reached the buffer belongs in the file if it stays. */
	if (!remove && !t->readonly)
		(void)tl_flush(t);
	if (t->fd != -1)
		close(t->fd);
	if (remove)
		(void)unlink(t->path);
	tl_free(t);
}

int
trace_log_write(struct trace_log *t, enum trace_stream s, const char *data,
    size_t len)
{
	if (t->readonly)
		return -EBADF;
	if ((int)s < 0 || s >= TL_NSTREAMS)
		return -EINVAL;
	if (t->disk_err != 0)
		return -t->disk_err;
	/* Past the limit or the end the job goes on, its output does not. */
	if (t->finished || t->truncated || len == 0)
		return 0;

	t->err = 0;
	t->now_valid = false;
	data = utf8_sanitise(t, &t->u8[s], data, len, &len);
	mask_write(t, s, data, len);
	return t->err;
}

int
trace_log_printf(struct trace_log *t, const char *fmt, ...)
{
	struct buf	 b;
	va_list		 ap;
	int		 rc;

	buf_init(&b, BUF_UNLIMITED);
	va_start(ap, fmt);
	rc = buf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (rc == 0)
		rc = trace_log_write(t, TRACE_RUNNER, b.ptr, b.len);
	buf_release(&b);
	return rc;
}

int
trace_log_finish(struct trace_log *t)
{
	struct utf8_state	*u;
	int			 i, rc;

	if (t->readonly)
		return 0;
	t->err = 0;
	t->now_valid = false;
	if (!t->finished) {
		t->finished = 1;
		/* An unfinished character at the end is an error, not a wait. */
		for (i = 0; i < TL_NSTREAMS; i++) {
			u = &t->u8[i];
			if (u->len == 0)
				continue;
			u->len = 0;
			if (!t->truncated)
				mask_write(t, (enum trace_stream)i, replacement, 3);
		}
		if (!t->truncated)
			mask_finish(t);
		for (i = 0; i < TL_NSTREAMS; i++) {
			if (!t->truncated)
				ts_finish(t, (enum trace_stream)i);
			buf_release(&t->ts[i].line);
		}
		/* The log may live on for sending; the pipeline is done. */
		buf_release(&t->sbuf);
		buf_release(&t->mbuf);
	}
	if ((rc = tl_flush(t)) != 0)
		tl_seterr(t, rc);
	if (t->err == 0 && t->disk_err != 0)
		return -t->disk_err;
	return t->err;
}

int
trace_log_flush(struct trace_log *t)
{
	if (t->readonly || t->fd == -1)
		return 0;
	return tl_flush(t);
}

int
trace_log_sync(struct trace_log *t)
{
	int rc;

	if (t->readonly || t->fd == -1)
		return 0;
	if ((rc = tl_flush(t)) != 0)
		return rc;
	return fdatasync(t->fd) == 0 ? 0 : -errno;
}

int
trace_log_disk_error(const struct trace_log *t)
{
	return t->disk_err;
}

uint64_t
trace_log_size(const struct trace_log *t)
{
	return t->size;
}

uint32_t
trace_log_crc32(const struct trace_log *t)
{
	if (t->wlen == t->crc_done)
		return t->crc;
	return crc32_update(t->crc, t->wbuf + t->crc_done,
	    t->wlen - t->crc_done);
}

bool
trace_log_truncated(const struct trace_log *t)
{
	return t->truncated;
}

/*
 * Bytes still in the write buffer are copied from there, so a read sees
 * everything kept so far without forcing a flush (and the log stays const).
 */
ssize_t
trace_log_read(const struct trace_log *t, uint64_t offset, char *dst,
    size_t len)
{
	size_t	 done = 0, want, k;
	ssize_t	 n;

	if (offset >= t->size || len == 0)
		return 0;
	if (len > t->size - offset)
		len = (size_t)(t->size - offset);
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;

	while (offset + done < t->flushed && done < len) {
		want = len - done;
		if (want > t->flushed - (offset + done))
			want = (size_t)(t->flushed - (offset + done));
		n = pread(t->fd, dst + done, want, (off_t)(offset + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return (ssize_t)done;	/* the file shrank under us */
		done += (size_t)n;
	}
	if (done < len) {
		k = len - done;
		memcpy(dst + done, t->wbuf + (offset + done - t->flushed), k);
		done += k;
	}
	return (ssize_t)done;
}

const char *
trace_log_path(const struct trace_log *t)
{
	return t->path;
}

int
trace_log_file(const struct trace_log *t, uint64_t *in_file)
{
	*in_file = t->fd == -1 ? 0 : t->flushed;
	return t->fd;
}
