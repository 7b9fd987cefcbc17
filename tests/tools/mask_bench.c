/*
 * mask_bench: throughput of the secret masker on job-log-like text.
 *
 *	mask_bench [N_PHRASES] [MB]
 *
 * Masks MB MiB (default 256) of generated log text in 4 KiB writes, as a
 * job's output arrives, with N random 32-byte phrases (default 0), URL
 * parameter masking and all default token prefixes on: the setup of a
 * real job.  The text is made once (8 MiB, reused in a loop) and now and
 * then holds a phrase, a token and a secret URL parameter, so masking
 * happens, but rarely, as in a real log.  Prints one line:
 *
 *	phrases=N mb=M seconds=S mb_per_s=X cpu_seconds=C
 *
 * C is the CPU time of the same span: on a busy machine, where the wall
 * clock also counts other processes' turns, it is the steadier figure.
 *
 * It only measures; it checks nothing.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/buf.h"
#include "lib/xmalloc.h"
#include "runner/mask.h"
#include "tests/seeded_rand.h"

#define TEXT_SIZE	(8u << 20)
#define WRITE_SIZE	4096

static const char *const words[] = {
	"build", "test", "runner", "cache", "artifact", "module", "config",
	"install", "package", "compile", "link", "deploy", "docker", "image",
	"layer", "pull", "push", "error", "warning", "info", "debug", "main",
	"src", "lib", "utils", "network", "request", "response", "timeout",
	"retry", "success", "failed", "pipeline", "stage", "job", "service",
};

static const char *
word(void)
{
	return words[rnd() % (sizeof(words) / sizeof(words[0]))];
}

/* One line of a plausible CI log. */
static void
log_line(struct buf *b, uint64_t n)
{
	switch (rnd() % 8) {
	case 0:
		buf_printf(b, "\x1b[32;1m$ make -j4 %s\x1b[0;m\n", word());
		break;
	case 1:
		buf_printf(b, "cc -O2 -Wall -Isrc -c src/%s/%s.c -o build/%s.o\n",
		    word(), word(), word());
		break;
	case 2:
		buf_printf(b, "2026-08-21T10:%02u:%02u.%06uZ INFO  %s: %s id=%08x "
		    "duration=%ums status=200\n", rnd() % 60, rnd() % 60,
		    rnd() % 1000000, word(), word(), rnd(), rnd() % 5000);
		break;
	case 3:
		buf_printf(b, "Downloading https://registry.example.com/%s/%s-%u.%u.%u.tar.gz"
		    "?ref=main&sha=%08x%08x (%u kB)\n", word(), word(), rnd() % 9,
		    rnd() % 20, rnd() % 100, rnd(), rnd(), rnd() % 10000);
		break;
	case 4:
		buf_printf(b, "test_%s_%s ... ok (%u.%03us)\n", word(), word(),
		    rnd() % 10, rnd() % 1000);
		break;
	case 5:
		buf_printf(b, "  %3u%% |%-20.*s| %u/%u files\r", rnd() % 101,
		    (int)(rnd() % 21), "====================", rnd() % 900,
		    1000u);
		break;
	case 6:
		buf_printf(b, "commit %08x%08x%08x%08x%08x Merge branch '%s-%s' "
		    "into 'main'\n", rnd(), rnd(), rnd(), rnd(), rnd(), word(),
		    word());
		break;
	default:
		buf_printf(b, "{\"level\":\"%s\",\"msg\":\"%s %s %s\",\"n\":%llu}\n",
		    word(), word(), word(), word(), (unsigned long long)n);
		break;
	}
}

int
main(int argc, char **argv)
{
	static const char	 alnum[] =
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	const char *const	*prefixes;
	struct masker		*m;
	struct buf		 text, out;
	struct timespec		 t0, t1, c0, c1;
	char			**phr;
	size_t			 np = 0, mb = 256, nprefixes, i, k, off, total, n;
	uint64_t		 line = 0;
	double			 secs, csecs;

	if (argc > 1)
		np = strtoul(argv[1], NULL, 10);
	if (argc > 2)
		mb = strtoul(argv[2], NULL, 10);
	if (argc > 3 || mb == 0) {
		fprintf(stderr, "usage: mask_bench [N_PHRASES] [MB]\n");
		return 2;
	}

	phr = xreallocarray(NULL, np > 0 ? np : 1, sizeof *phr);
	for (i = 0; i < np; i++) {
		phr[i] = xmalloc(33);
		for (k = 0; k < 32; k++)
			phr[i][k] = alnum[rnd() % (sizeof(alnum) - 1)];
		phr[i][32] = '\0';
	}

	buf_init(&text, BUF_UNLIMITED);
	while (text.len < TEXT_SIZE) {
		log_line(&text, line++);
		/* About every 64 KiB something to mask. */
		if (rnd() % 1000 == 0) {
			if (np > 0)
				buf_printf(&text, "export TOKEN=%s\n", phr[rnd() % np]);
			buf_printf(&text, "git clone https://x:glpat-%08x%08x@gitlab.example.com/\n",
			    rnd(), rnd());
			buf_printf(&text, "curl https://gitlab.example.com/api/v4/projects"
			    "?private_token=%08x%08x&per_page=100\n", rnd(), rnd());
		}
	}

	prefixes = masker_default_prefixes(true);
	for (nprefixes = 0; prefixes[nprefixes] != NULL; nprefixes++)
		;
	m = masker_new((const char *const *)phr, np, prefixes, nprefixes, true);
	buf_init(&out, BUF_UNLIMITED);

	total = mb << 20;
	off = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
	for (i = 0; i < total; i += n) {
		n = total - i < WRITE_SIZE ? total - i : WRITE_SIZE;
		if (off + n > text.len)
			off = 0;
		masker_write(m, text.ptr + off, n, &out);
		off += n;
		buf_reset(&out);	/* the consumer took it */
	}
	masker_flush(m, &out);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);

	secs = (double)(t1.tv_sec - t0.tv_sec) +
	    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	csecs = (double)(c1.tv_sec - c0.tv_sec) +
	    (double)(c1.tv_nsec - c0.tv_nsec) / 1e9;
	printf("phrases=%zu mb=%zu seconds=%.3f mb_per_s=%.0f cpu_seconds=%.3f\n",
	    np, mb, secs, (double)mb / secs, csecs);

	masker_free(m);
	buf_release(&out);
	buf_release(&text);
	for (i = 0; i < np; i++)
		free(phr[i]);
	free(phr);
	return 0;
}
