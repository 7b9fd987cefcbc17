/*
 * A job's log as it is kept for GitLab: everything the job and the runner
 * write, after masking, made valid UTF-8, stamped per line, cut at
 * output_limit, stored in a file with the running crc32 and byte size of
 * exactly what is kept (protocol.md 6.4, 6.5).
 *
 * The bytes live in a file, not in memory: a hundred jobs printing their
 * 4 MiB each cost the daemon disk, not RAM, and after a crash the file is
 * still there for the journal to send.  Reads for sending are ranges of it.
 *
 * Pipeline of trace_log_write(), per stream:
 *   UTF-8 sanitising (invalid sequences become U+FFFD; a sequence split
 *   across writes is completed, not replaced) -> the stream's masker (mask.h) ->
 *   timestamps (FF_TIMESTAMPS: "2026-08-21T10:15:02.123456Z 01O " per
 *   line, '+' for a continued line, see protocol.md 6.5 step 4) ->
 *   output_limit (cut on a character boundary, then the notice once) ->
 *   file, crc32, bytesize.
 *
 * A write to the file that fails (a full disk) seals the log: it ends with
 * the bytes kept so far and the runner line "ERROR: the job log could not
 * be written to disk: <reason>", which come from memory, and every later
 * write fails with the same error.  The job fails; the log says why.
 */
#ifndef RUNNER_TRACE_LOG_H
#define RUNNER_TRACE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct masker;
struct trace_log;

enum trace_stream {
	TRACE_RUNNER = 0,	/* runner messages: stream 00, type O */
	TRACE_STDOUT = 1,	/* job output: stream 01, type O */
	TRACE_STDERR = 2,	/* job output: stream 01, type E */
};

struct trace_log_config {
	const char	*path;		/* the file; created (0600), truncated */
	uint64_t	 limit;		/* output_limit in bytes */
	bool		 timestamps;	/* FF_TIMESTAMPS */
	/*
	 * One masker per stream, indexed by enum trace_stream; taken over
	 * (freed with the log) when the log opens; NULL for none.  One per
	 * stream because a secret printed in pieces on stdout with a stderr
	 * line between them must still be seen whole.
	 */
	struct masker	*masker[3];
	/* Wall clock for the timestamps in microseconds; NULL: the real one (tests pin it). */
	int64_t		(*now_us)(void);
};

/* NULL with errno set if the file cannot be created. */
struct trace_log	*trace_log_open(const struct trace_log_config *cfg);
/*
 * Reopen an existing log file after a restart: the bytes already in it
 * are the log; crc32 and size are recomputed from them.  Nothing more can be
 * written.
 */
struct trace_log	*trace_log_reopen(const char *path);
/* Close the file; with remove, delete it. */
void			 trace_log_close(struct trace_log *t, bool remove);

/* Job or runner output; returns 0 or -errno (the disk failed: sealed). */
int			 trace_log_write(struct trace_log *t, enum trace_stream s,
			    const char *data, size_t len);
/* printf into the log as a runner message. */
int			 trace_log_printf(struct trace_log *t, const char *fmt, ...)
			    __attribute__((format(printf, 2, 3)));
/*
 * The job ended: let the masker hand over what it held back, end open
 * lines.  Later writes are dropped.
 */
int			 trace_log_finish(struct trace_log *t);

/*
 * Put every byte written so far on disk (write buffer out, fdatasync).
 * The sender calls it before a PATCH: GitLab must never hold a byte that a
 * crash or a power cut could take from the file the journal points at,
 * or the report sent after the restart would not describe GitLab's log.
 * Returns 0 or -errno.
 */
int			 trace_log_sync(struct trace_log *t);
/*
 * Only the write buffer out to the file, no fdatasync: for a caller that
 * syncs the file itself, off the event loop (the sender).  0 or -errno.
 * The call that fails seals the log; sealed, both return 0: what is not
 * in the file stays in memory by design.
 */
int			 trace_log_flush(struct trace_log *t);
/* The errno that sealed the log (see above), or 0. */
int			 trace_log_disk_error(const struct trace_log *t);

uint64_t		 trace_log_size(const struct trace_log *t);	/* bytesize */
uint32_t		 trace_log_crc32(const struct trace_log *t);	/* of those bytes */
bool			 trace_log_truncated(const struct trace_log *t);	/* limit hit */
/* Read up to len bytes at offset; returns the count, or -errno. */
ssize_t			 trace_log_read(const struct trace_log *t, uint64_t offset,
			    char *dst, size_t len);
const char		*trace_log_path(const struct trace_log *t);
/*
 * The log file's descriptor (owned by t) and, in *in_file, how many bytes
 * of the log it holds: those are final and may be read with pread, as the
 * sender's PATCHes are.  -1 when there is no file.  Once the log is sealed
 * the bytes after in_file are final too, in memory: trace_log_read them.
 */
int			 trace_log_file(const struct trace_log *t, uint64_t *in_file);

#endif
