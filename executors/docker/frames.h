/*
 * The engine's multiplexed stream (attach, logs, exec with Tty false):
 * 8-byte headers [stream, 0, 0, 0, size as 32-bit big-endian], then size
 * bytes.  Headers and payloads split across reads at any byte, so the
 * demuxer keeps its place between calls.  Pure: no I/O.
 */
#ifndef EXECUTORS_DOCKER_FRAMES_H
#define EXECUTORS_DOCKER_FRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct frames {
	unsigned char	hdr[8];
	size_t		hdr_len;	/* bytes of hdr read so far */
	uint32_t	left;		/* payload bytes still due for stream */
	int		stream;		/* 0 stdin, 1 stdout, 2 stderr */
};

/* stream: 1 stdout, 2 stderr (0, stdin's echo, is passed on too). */
typedef void	frames_out_cb(int stream, const char *data, size_t len, void *arg);

void	frames_init(struct frames *f);
/* Feed bytes; out is called for each payload piece, never with len 0. */
void	frames_feed(struct frames *f, const char *data, size_t len, frames_out_cb *out,
	    void *arg);
/* Whether the stream stopped inside a frame (a truncated answer). */
bool	frames_partial(const struct frames *f);

#endif
