/*
 * The demuxer of the engine's multiplexed stream: a header is gathered
 * byte by byte into f->hdr (it may arrive in eight reads), a payload is
 * passed on in whatever pieces it arrives, so nothing is copied but the
 * eight header bytes.
 */
#include <string.h>

#include "executors/docker/frames.h"

void
frames_init(struct frames *f)
{
	memset(f, 0, sizeof(*f));
}

void
frames_feed(struct frames *f, const char *data, size_t len, frames_out_cb *out, void *arg)
{
	size_t n;

	while (len > 0) {
		if (f->left > 0) {
			n = len < f->left ? len : f->left;
			out(f->stream, data, n, arg);
			f->left -= (uint32_t)n;
			data += n;
			len -= n;
			continue;
		}
		n = sizeof(f->hdr) - f->hdr_len;
		if (n > len)
			n = len;
		memcpy(f->hdr + f->hdr_len, data, n);
		f->hdr_len += n;
		data += n;
		len -= n;
		if (f->hdr_len < sizeof(f->hdr))
			break;
		f->stream = f->hdr[0];
		f->left = (uint32_t)f->hdr[4] << 24 | (uint32_t)f->hdr[5] << 16 |
		    (uint32_t)f->hdr[6] << 8 | (uint32_t)f->hdr[7];
		/* A zero-length frame is a whole frame: the next header follows. */
		f->hdr_len = 0;
	}
}

bool
frames_partial(const struct frames *f)
{
	return f->hdr_len > 0 || f->left > 0;
}
