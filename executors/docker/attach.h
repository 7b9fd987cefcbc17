/*
 * A stage's conversation with its container: POST /containers/{id}/attach
 * with stdin, stdout and stderr, hijacked (Upgrade: tcp; answer 101 or
 * 200 with the raw stream), opened before the container starts so no
 * output is lost; the script written to stdin and stdin half-closed
 * (shutdown SHUT_WR) so the shell reads EOF; the frames demultiplexed into
 * on_output until the engine closes the stream (the shell exited).
 *
 * libcurl with CURLOPT_CONNECT_ONLY makes the connection (unix socket, or
 * tcp with TLS) and then only moves bytes; a uv_poll on its socket drives
 * it from the loop, so nothing blocks.
 *
 * Contract: NULL from attach_open() means no callback will come;
 * otherwise on_attached comes once (error 0: start the container now, then
 * attach_send()), then on_output any number of times, then on_done exactly
 * once (also after attach_close()); the attach is freed after on_done.
 * An on_attached with an error (the engine refused: its message is the
 * cause) is followed by on_done with the same error and cause.
 */
#ifndef EXECUTORS_DOCKER_ATTACH_H
#define EXECUTORS_DOCKER_ATTACH_H

#include <stddef.h>

struct attach;
struct engine;

typedef void	attach_event_cb(int error, const char *cause, void *arg);
typedef void	attach_output_cb(int stream, const char *data, size_t len, void *arg);

struct attach	*attach_open(struct engine *e, const char *container_id,
		    attach_event_cb *on_attached, attach_output_cb *on_output,
		    attach_event_cb *on_done, void *arg, char **cause);
/* Write data (copied) to the container's stdin, then half-close it. */
void		 attach_send(struct attach *a, const char *data, size_t len);
/* Drop the connection now; on_done comes with -ECANCELED if it has not come. */
void		 attach_close(struct attach *a);

#endif
