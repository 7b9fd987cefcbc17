/*
 * Unit tests for the streaming masker.  A masker must give the same output
 * however its input is cut into writes, so every expectation is checked
 * under many cuttings: gitlab-runner's own split ('|' in the inputs, taken
 * from masker_test.go, urlsanitizer_test.go and token_masker_test.go),
 * one byte per write, and every split into two and three writes.  Random
 * inputs are compared with a whole-string reference written here from the
 * rules' definitions rather than from the streaming code, so the two share
 * no mistakes.
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

#include <cmocka.h>

#include "lib/buf.h"
#include "lib/xmalloc.h"
#include "runner/mask.h"
#include "tests/seeded_rand.h"

#define MASKED	"[MASKED]"

struct cfg {
	const char *const	*phrases;
	size_t			 nphrases;
	const char *const	*prefixes;
	size_t			 nprefixes;
	bool			 url;
};

#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

/* Inputs up to this long get every 3-write split; longer ones fewer. */
#define ALL_SPLITS_MAX	160

static size_t
rnd_below(size_t n)
{
	return n == 0 ? 0 : rnd() % n;
}

static void
print_escaped(const char *label, const char *p, size_t n)
{
	size_t	 i;

	fprintf(stderr, "%s (%zu): \"", label, n);
	for (i = 0; i < n && i < 400; i++) {
		unsigned char	 c = (unsigned char)p[i];

		if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"')
			fputc(c, stderr);
		else
			fprintf(stderr, "\\x%02x", c);
	}
	fprintf(stderr, "%s\"\n", i < n ? "..." : "");
}

/*
 * One write through masker_write_direct(): out's new bytes, then the run
 * of the input it did not copy, which must lie inside the input.  The
 * input is a copy of its own, so that ASan sees reads past it.
 */
static void
write_direct(struct masker *m, const char *in, size_t n, struct buf *out)
{
	char		*own = xmalloc(n > 0 ? n : 1);
	const char	*d = NULL;
	size_t		 dn = 0;

	memcpy(own, in, n);
	assert_int_equal(masker_write_direct(m, own, n, out, &d, &dn), 0);
	if (dn > 0) {
		assert_true(d >= own && d + dn <= own + n);
		buf_append(out, d, dn);
	}
	free(own);
}

/*
 * Feed in[0..len) cut before each offset in cuts[] (ascending), flush, and
 * leave the output in out.  Every other feed goes through
 * masker_write_direct(), which must hand on the same bytes.
 */
static void
feed(struct masker *m, const char *in, size_t len, const size_t *cuts,
    size_t ncuts, struct buf *out)
{
	static unsigned	 calls;
	size_t		 i, from = 0, to;
	bool		 direct = calls++ % 2 == 1;

	for (i = 0; i <= ncuts; i++) {
		to = i < ncuts ? cuts[i] : len;
		if (direct)
			write_direct(m, in + from, to - from, out);
		else
			assert_int_equal(masker_write(m, in + from, to - from,
			    out), 0);
		from = to;
	}
	assert_int_equal(masker_flush(m, out), 0);
}

static void
expect_cut(struct masker *m, const char *in, size_t len, const size_t *cuts,
    size_t ncuts, const char *want, size_t wantlen)
{
	struct buf	 out;
	size_t		 i;

	buf_init(&out, BUF_UNLIMITED);
	feed(m, in, len, cuts, ncuts, &out);
	if (out.len != wantlen || memcmp(out.ptr, want, wantlen) != 0) {
		print_escaped("input", in, len);
		fprintf(stderr, "cuts:");
		for (i = 0; i < ncuts; i++)
			fprintf(stderr, " %zu", cuts[i]);
		fprintf(stderr, "\n");
		print_escaped("want", want, wantlen);
		print_escaped("got", out.ptr, out.len);
		buf_release(&out);
		fail();
	}
	buf_release(&out);
}

static struct masker *
cfg_masker(const struct cfg *c)
{
	return masker_new(c->phrases, c->nphrases, c->prefixes, c->nprefixes,
	    c->url);
}

/*
 * Check one case under every cutting: '|' in `split` marks the writes
 * the original test used; the same text is then cut every other way.
 * The masker is reused across cuttings, which also checks that a flush
 * leaves it ready for a new stream.
 */
static void
check_len(const struct cfg *c, const char *split, size_t splitlen,
    const char *want, size_t wantlen)
{
	struct masker	*m;
	char		*in;
	size_t		*cuts, len = 0, ncuts = 0, i, j, k;

	in = xmalloc(splitlen + 1);
	cuts = xreallocarray(NULL, splitlen + 1, sizeof *cuts);
	for (i = 0; i < splitlen; i++) {
		if (split[i] == '|')
			cuts[ncuts++] = len;
		else
			in[len++] = split[i];
	}
	m = cfg_masker(c);

	expect_cut(m, in, len, cuts, ncuts, want, wantlen);
	expect_cut(m, in, len, NULL, 0, want, wantlen);
	/* One byte per write. */
	for (i = 0; i + 1 < len; i++)
		cuts[i] = i + 1;
	expect_cut(m, in, len, cuts, len > 0 ? len - 1 : 0, want, wantlen);

	if (len <= ALL_SPLITS_MAX) {
		for (i = 0; i <= len; i++) {
			cuts[0] = i;
			expect_cut(m, in, len, cuts, 1, want, wantlen);
			for (j = i; j <= len; j++) {
				cuts[1] = j;
				expect_cut(m, in, len, cuts, 2, want, wantlen);
			}
		}
	} else {
		/* Long inputs: every 2-write split near the ends, random ones. */
		for (i = 0; i <= len; i += (i < 64 || len - i < 64) ? 1 : 97) {
			cuts[0] = i;
			expect_cut(m, in, len, cuts, 1, want, wantlen);
		}
		for (k = 0; k < 200; k++) {
			size_t	 n = 1 + rnd_below(8);

			for (i = 0; i < n; i++)
				cuts[i] = rnd_below(len + 1);
			/* Sort the few cut points. */
			for (i = 1; i < n; i++)
				for (j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
					size_t	 t = cuts[j];

					cuts[j] = cuts[j - 1];
					cuts[j - 1] = t;
				}
			expect_cut(m, in, len, cuts, n, want, wantlen);
		}
	}
	masker_free(m);
	free(cuts);
	free(in);
}

static void
check(const struct cfg *c, const char *split, const char *want)
{
	check_len(c, split, strlen(split), want, strlen(want));
}

/* masker_test.go, every case. */
static void
test_gitlab_masker(void **state)
{
	static const char *const secrets[] = { "secrets" };
	static const char *const at[] = { "at" };
	static const char *const middle[] = { "middle" };
	static const char *const buffer[] = { "buffer" };
	static const char *const four[] = { "all", "values", "are", "masked" };
	static const char *const foobar[] = { "foo", "bar" };
	static const char *const five[] = { "split", "all", "values", "are",
	    "masked" };
	static const char *const pm[] = { "mask", "prefix_mask" };
	static const char *const overlap[] = { "this is the end", "en foobar",
	    "en" };
	struct cfg	 none = { NULL, 0, NULL, 0, false };
	struct cfg	 c = { NULL, 0, NULL, 0, false };

	(void)state;
	check(&none, "no escaping at all", "no escaping at all");

	c.phrases = secrets;
	c.nphrases = 1;
	check(&c, "secrets", MASKED);
	check(&c, "secret|s", MASKED);
	check(&c, "s|ecrets", MASKED);
	check(&c, "secretssecrets", MASKED MASKED);
	check(&c, "ssecrets", "s" MASKED);
	check(&c, "s|secrets", "s" MASKED);

	c.phrases = at;
	check(&c, "at the start of the buffer",
	    MASKED " the start of the buffer");
	c.phrases = middle;
	check(&c, "in the middle of the buffer", "in the " MASKED " of the buffer");
	c.phrases = buffer;
	check(&c, "at the end of the buffer", "at the end of the " MASKED);

	c.phrases = four;
	c.nphrases = NELEM(four);
	check(&c, "all values are masked",
	    MASKED " " MASKED " " MASKED " " MASKED);

	c.phrases = foobar;
	c.nphrases = NELEM(foobar);
	check(&c, "prefixed and suffixed: xfoox ybary ffoo barr ffooo bbarr",
	    "prefixed and suffixed: x" MASKED "x y" MASKED "y f" MASKED " "
	    MASKED "r f" MASKED "o b" MASKED "r");
	check(&c, "prefix|ed, su|ffi|xed |and split|:| xfo|ox y|bary ffo|o ba|rr ffooo b|barr",
	    "prefixed, suffixed and split: x" MASKED "x y" MASKED "y f" MASKED
	    " " MASKED "r f" MASKED "o b" MASKED "r");

	c.phrases = five;
	c.nphrases = NELEM(five);
	check(&c, "sp|lit al|l val|ues ar|e |mask|ed",
	    MASKED " " MASKED " " MASKED " " MASKED " " MASKED);

	c.phrases = pm;
	c.nphrases = NELEM(pm);
	check(&c, "prefix_mask mask prefix_|mask prefix_ma|sk mas|k",
	    MASKED " " MASKED " " MASKED " " MASKED " " MASKED);

	c.phrases = overlap;
	c.nphrases = NELEM(overlap);
	check(&c, "overlap: this is the en| foobar",
	    "overlap: this is the " MASKED);
}

/* The 16000-byte secret of masker_test.go, split 8000|8000 and otherwise. */
static void
test_gitlab_large_secret(void **state)
{
	const char	*phr[1];
	char		*secret, *in, *want;
	struct cfg	 c = { NULL, 1, NULL, 0, false };

	(void)state;
	secret = xmalloc(16001);
	memset(secret, '_', 16000);
	secret[16000] = '\0';
	phr[0] = secret;
	c.phrases = phr;
	in = xasprintf("large secret: %.8000s|%.8000s", secret, secret);
	check(&c, in, "large secret: " MASKED);
	free(in);
	/* One byte short is not the secret, and all of it comes out. */
	in = xasprintf("x%.7999s|%.8000sy", secret, secret);
	want = xasprintf("x%.7999s%.8000sy", secret, secret);
	check(&c, in, want);
	free(want);
	free(in);
	free(secret);
}

/* urlsanitizer_test.go, every case. */
static void
test_gitlab_url(void **state)
{
	struct cfg	 c = { NULL, 0, NULL, 0, true };
	char		*in, *zeros;

	(void)state;
	check(&c, "no escaping at all http://example.org/?test=foobar",
	    "no escaping at all http://example.org/?test=foobar");
	check(&c, "multiple: &private_token=hello &?x-amz-security-token=hello &?x-amz-security-token=hello ?x-amz-security?x-amz-security-token=hello",
	    "multiple: &private_token=" MASKED " &?x-amz-security-token=" MASKED
	    " &?x-amz-security-token=" MASKED " ?x-amz-security?x-amz-security-token=" MASKED);
	check(&c, "above known key size: http://example.org/?this-is-a-really-really-long-key-name=foobar",
	    "above known key size: http://example.org/?this-is-a-really-really-long-key-name=foobar");
	check(&c, "http://example.com/?private_token=deadbeef sensitive URL at the start",
	    "http://example.com/?private_token=" MASKED " sensitive URL at the start");
	check(&c, "a sensitive URL at the end http://example.com/?authenticity_token=deadbeef",
	    "a sensitive URL at the end http://example.com/?authenticity_token=" MASKED);
	check(&c, "a sensitive URL http://example.com/?rss_token=deadbeef in the middle",
	    "a sensitive URL http://example.com/?rss_token=" MASKED " in the middle");
	check(&c, "a sensitive URL http://example.com/?X-AMZ-sigNATure=deadbeef with mixed case",
	    "a sensitive URL http://example.com/?X-AMZ-sigNATure=" MASKED " with mixed case");
	check(&c, "a sensitive URL http://example.com/?param=second&x-amz-credential=deadbeef second param",
	    "a sensitive URL http://example.com/?param=second&x-amz-credential=" MASKED " second param");
	check(&c, "a sensitive URL http://example.com/?rss_token=hide&x-amz-credential=deadbeef both params",
	    "a sensitive URL http://example.com/?rss_token=" MASKED "&x-amz-credential=" MASKED " both params");
	check(&c, "a long sensitive URL http://example.com/?x-amz-credential=abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789",
	    "a long sensitive URL http://example.com/?x-amz-credential=" MASKED);

	zeros = xmalloc(8 * 1024 + 1);
	memset(zeros, '0', 8 * 1024);
	zeros[8 * 1024] = '\0';
	in = xasprintf("a really long sensitive URL http://example.com/?x-amz-credential=%s that is still scrubbed", zeros);
	check(&c, in, "a really long sensitive URL http://example.com/?x-amz-credential=" MASKED " that is still scrubbed");
	free(in);
	free(zeros);

	check(&c, "spl|it sensit|ive UR|L http://example.com/?x-amz-cred|ential=abcdefghij|klmnopqrstuvwxyz01234567",
	    "split sensitive URL http://example.com/?x-amz-credential=" MASKED);
	check(&c, "newline: http://example.com/?x-amz-credential=abc\nhttp://example.com/?x-amz-credential=abc",
	    "newline: http://example.com/?x-amz-credential=" MASKED "\nhttp://example.com/?x-amz-credential=" MASKED);
	check(&c, "control character: http://example.com/?x-amz-credential=abc\bhttp://example.com/?x-amz-credential=abc",
	    "control character: http://example.com/?x-amz-credential=" MASKED "\bhttp://example.com/?x-amz-credential=" MASKED);
	check(&c, "rss_token=notmasked http://example.com/?rss_token=!@#$A&x-amz-credential=abc&test=test",
	    "rss_token=notmasked http://example.com/?rss_token=" MASKED "&x-amz-credential=" MASKED "&test=test");
	check(&c, "query string with no value: http://example.com/?x-amz-credential=&private_token=gitlab",
	    "query string with no value: http://example.com/?x-amz-credential=" MASKED "&private_token=" MASKED);
	check(&c, "invalid URL with double &: http://example.com/?x-amz-credential=abc&&private_token=gitlab",
	    "invalid URL with double &: http://example.com/?x-amz-credential=" MASKED "&&private_token=" MASKED);
	check(&c, "invalid URL with double ?: http://example.com/?x-amz-credential=abc??private_token=gitlab",
	    "invalid URL with double ?: http://example.com/?x-amz-credential=" MASKED "??private_token=" MASKED);
	check(&c, "split on &: http://example.com/|&|x-amz-cre|dential=abc",
	    "split on &: http://example.com/&x-amz-credential=" MASKED);
	check(&c, "split on ?: http://example.com/|?|x-amz-cre|dential=abc",
	    "split on ?: http://example.com/?x-amz-credential=" MASKED);
	check(&c, "split after ?: http://example.com/|?||x-amz-cre|dential=abc",
	    "split after ?: http://example.com/?x-amz-credential=" MASKED);
	check(&c, "interweaved tokens: ?|one ?x-amz-credential=abc two=three ?|one=two &token &x-amz-credential=abc =token ?=",
	    "interweaved tokens: ?one ?x-amz-credential=" MASKED " two=three ?one=two &token &x-amz-credential=" MASKED " =token ?=");
	check(&c, "terminated before mask: ?x", "terminated before mask: ?x");
	check(&c, "terminated before mask: ?x|-", "terminated before mask: ?x-");
	check(&c, "terminated before mask: ?x-|", "terminated before mask: ?x-");
	check(&c, "terminated before mask: ?x-amz-credential=",
	    "terminated before mask: ?x-amz-credential=" MASKED);
	check(&c, "terminated before mask: ?x-amz-credential=|",
	    "terminated before mask: ?x-amz-credential=" MASKED);
}

/* token_masker_test.go: glpat- is always on there, so it is listed here. */
static void
test_gitlab_tokens(void **state)
{
	static const char *const def[] = { "glpat-" };
	static const char *const token[] = { "token-", "glpat-" };
	static const char *const tok[] = { "tok-", "glpat-" };
	static const char *const spaced[] = { " mask1- ", "\tmask2-", "mask3-\t",
	    "mask4-", "mask5-", "mask6-", "mask7-", "mask8-", "mask9-", "glpat-" };
	struct cfg	 c = { NULL, 0, def, 1, false };

	(void)state;
	check(&c, "Lorem ipsum dolor sit amet, ex ea commodo glpat-imperdiet in voluptate velit esse",
	    "Lorem ipsum dolor sit amet, ex ea commodo glpat-" MASKED " in voluptate velit esse");
	check(&c, "Lorem ipsum dolor sit amet, ex ea commodo in voluptate velit esseglpat-imperdiet",
	    "Lorem ipsum dolor sit amet, ex ea commodo in voluptate velit esseglpat-" MASKED);
	check(&c, "glpat-imperdiet Lorem ipsum dolor sit amet, ex ea commodo in voluptate velit esse",
	    "glpat-" MASKED " Lorem ipsum dolor sit amet, ex ea commodo in voluptate velit esse");
	check(&c, "esseglpat-imperdiet=_-. end Lorem ipsum dolor sit amet, ex ea commodo  in voluptate velit",
	    "esseglpat-" MASKED " end Lorem ipsum dolor sit amet, ex ea commodo  in voluptate velit");
	check(&c, "glpat-impglpat-erdiet Lorem ipsum dolor sit amet, ex ea commodo  in voluptate velit esse",
	    "glpat-" MASKED " Lorem ipsum dolor sit amet, ex ea commodo  in voluptate velit esse");
	check(&c, "glpat|-imperdiet Lorem ipsum dolor sit amet, ex ea commodo gl|pat-imperdiet in voluptate velit esse",
	    "glpat-" MASKED " Lorem ipsum dolor sit amet, ex ea commodo glpat-" MASKED " in voluptate velit esse");
	check(&c, "glpat| -imperdiet Lorem ipsum dolor sit amet",
	    "glpat -imperdiet Lorem ipsum dolor sit amet");
	check(&c, "Lorglpat-ipsu dolor sit amglpat-t, consglpat-ctglpat-tur adipiscing glpat-lit, sglpat-d do glpat-iusmod tglpat-mpor incididunt ut laborglpat-=_ glpat-t dolorglpat-=_ magna aliqua.",
	    "Lorglpat-" MASKED " dolor sit amglpat-" MASKED ", consglpat-" MASKED " adipiscing glpat-" MASKED ", sglpat-" MASKED " do glpat-" MASKED " tglpat-" MASKED " incididunt ut laborglpat-" MASKED " glpat-" MASKED " dolorglpat-" MASKED " magna aliqua.");
	check(&c, "Lorglpat-ipsu dolor sit amglp|at-t, consglpat-ctg|lpat-tur adipiscing glpat-lit, sglpat-|d do glpat-iusmod t|glpat-mpor incididunt ut |laborglpat-=_ glpat-t dolorglpat-=_ magna aliqua.",
	    "Lorglpat-" MASKED " dolor sit amglpat-" MASKED ", consglpat-" MASKED " adipiscing glpat-" MASKED ", sglpat-" MASKED " do glpat-" MASKED " tglpat-" MASKED " incididunt ut laborglpat-" MASKED " glpat-" MASKED " dolorglpat-" MASKED " magna aliqua.");
	check(&c, "Lorglpat- ipsu dolor sit amglpat-t, consglpat-ctglpat-tur adipiscing glpat-lit, sglpat-d do glpat-iusmod tglpat-mpor incididunt ut laborglpat-=_ glpat-t dolorglpat-=_ magna aliqua.",
	    "Lorglpat- ipsu dolor sit amglpat-" MASKED ", consglpat-" MASKED " adipiscing glpat-" MASKED ", sglpat-" MASKED " do glpat-" MASKED " tglpat-" MASKED " incididunt ut laborglpat-" MASKED " glpat-" MASKED " dolorglpat-" MASKED " magna aliqua.");

	c.prefixes = token;
	c.nprefixes = NELEM(token);
	check(&c, "token-imperdiet Lorem ipsum dolor sit amet, ex ea commodo in voluptate velit esse",
	    "token-" MASKED " Lorem ipsum dolor sit amet, ex ea commodo in voluptate velit esse");

	c.prefixes = tok;
	c.nprefixes = NELEM(tok);
	check(&c, "Lortok-ipsu dolor sit amt|ok-t, cons-ctg|lpat-tur adipiscing tok-lit, stok-|d do tok-iusmod t|tok-mpor incididunt ut |labortok-=_ tok-t dolortok-=_ magna aliqua. Tglpat-llus orci ac auctor auguglpat-eee mauris auguglpat-wEr_ lorem",
	    "Lortok-" MASKED " dolor sit amtok-" MASKED ", cons-ctglpat-" MASKED " adipiscing tok-" MASKED ", stok-" MASKED " do tok-" MASKED " ttok-" MASKED " incididunt ut labortok-" MASKED " tok-" MASKED " dolortok-" MASKED " magna aliqua. Tglpat-" MASKED " orci ac auctor auguglpat-" MASKED " mauris auguglpat-" MASKED " lorem");

	c.prefixes = spaced;
	c.nprefixes = NELEM(spaced);
	check(&c, "Lormask1-ipsu dolor sit amm|ask2-t, cons-ctg|lpat-tur adipiscing mask5-lit, smask11-|d do mask7-iusmod t|glpat-mpor incididunt ut |labormask10-=_ mask9-t",
	    "Lormask1-" MASKED " dolor sit ammask2-" MASKED ", cons-ctglpat-" MASKED " adipiscing mask5-" MASKED ", smask11-d do mask7-" MASKED " tglpat-" MASKED " incididunt ut labormask10-=_ mask9-" MASKED);
}

/*
 * The limit of 15 (protocol.md 6.5) counts the prefixes as gitlab-runner's
 * internal.Unique ranks them: shortest first, then bytewise, duplicates
 * and blanks dropped.  The order given does not matter: glpat- comes
 * first here, yet the 15 shorter ones push it out, and p16- with it.
 */
static void
test_prefix_limit(void **state)
{
	static const char *const pre[] = { "glpat-", "glpat-", " ", "p1-",
	    "p2-", "p3-", "p4-", "p5-", "p6-", "p7-", "p8-", "p9-", "p10-",
	    "p11-", "p12-", "p13-", "p14-", "p15-", "p16-" };
	struct cfg	 c = { NULL, 0, pre, NELEM(pre), false };

	(void)state;
	check(&c, "glpat-a p1-a p|7-a p14-a p15-a p16-a",
	    "glpat-a p1-" MASKED " p7-" MASKED " p14-" MASKED
	    " p15-" MASKED " p16-a");
}

/* The payload's prefixes, then the defaults: the list make_masker() gives. */
static size_t
with_defaults(const char **out, const char *const *custom, size_t n)
{
	const char *const *def = masker_default_prefixes(true);
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		out[k++] = custom[i];
	for (i = 0; def[i] != NULL; i++)
		out[k++] = def[i];
	return k;
}

/*
 * token_masker_test.go's cases with custom prefixes, which it runs with
 * Unique(append(prefixes, DefaultTokenPrefixes(true)...)).
 */
static void
test_gitlab_custom_prefixes(void **state)
{
	static const char *const tok[] = { "tok-" };
	static const char *const eleven[] = { "mask1-", "mask2-", "mask3-",
	    "mask4-", "mask5-", "mask6-", "mask7-", "mask8-", "mask9-",
	    "mask10-", "mask11-" };
	/* common/buildtest/masking.go: every one of them masks. */
	static const char *const build[] = { "glpat-", "mytoken:", "foobar-" };
	const char *all[32];
	struct cfg c = { NULL, 0, all, 0, false };

	(void)state;
	c.nprefixes = with_defaults(all, tok, NELEM(tok));
	check(&c, "Lortok-ipsu dolor sit amt|ok-t, cons-ctg|lpat-tur adipiscing tok-lit, stok-|d gltok-test do tok-iusmod t|tok-mpor incididunt ut |labortok-=_ tok-t dolortok-=_ magna aliqua. Tglpat-llus orci ac auctor auguglpat-eee mauris auguglpat-wEr_ lorem",
	    "Lortok-" MASKED " dolor sit amtok-" MASKED ", cons-ctglpat-" MASKED " adipiscing tok-" MASKED ", stok-" MASKED " gltok-" MASKED " do tok-" MASKED " ttok-" MASKED " incididunt ut labortok-" MASKED " tok-" MASKED " dolortok-" MASKED " magna aliqua. Tglpat-" MASKED " orci ac auctor auguglpat-" MASKED " mauris auguglpat-" MASKED " lorem");

	/* "ignored sixteenth prefix and more": mask6- and longer are cut. */
	c.nprefixes = with_defaults(all, eleven, NELEM(eleven));
	check(&c, "Lormask1-ipsu dolor sit amm|ask2-t, cons-ctg|lpat-tur adipiscing mask5-lit, smask11-|d do mask7-iusmod t|glpat-mpor incididunt ut |labormask10-=_ mask9-t",
	    "Lormask1-" MASKED " dolor sit ammask2-" MASKED ", cons-ctglpat-" MASKED " adipiscing mask5-" MASKED ", smask11-d do mask7-iusmod tglpat-" MASKED " incididunt ut labormask10-=_ mask9-t");

	c.nprefixes = with_defaults(all, build, NELEM(build));
	check(&c, "TOKEN_REVEALS=glpat-abcdef mytoken:ghijklmno foobar-pqrstuvwxyz\n",
	    "TOKEN_REVEALS=glpat-" MASKED " mytoken:" MASKED " foobar-" MASKED "\n");
}

static void
test_default_prefixes(void **state)
{
	const char *const	*p;
	struct masker		*m;
	struct buf		 out;
	size_t			 n;
	char			*in, *want;

	(void)state;
	p = masker_default_prefixes(false);
	assert_string_equal(p[0], "glpat-");
	assert_null(p[1]);

	p = masker_default_prefixes(true);
	for (n = 0; p[n] != NULL; n++)
		;
	assert_int_equal(n, 14);
	assert_string_equal(p[0], "glpat-");
	assert_string_equal(p[12], "_gitlab_session=");
	m = masker_new(NULL, 0, p, n, false);
	buf_init(&out, BUF_UNLIMITED);
	for (n = 0; p[n] != NULL; n++) {
		in = xasprintf("x %sAbc-1.2_3=4 y", p[n]);
		want = xasprintf("x %s" MASKED " y", p[n]);
		buf_reset(&out);
		assert_int_equal(masker_write(m, in, strlen(in), &out), 0);
		assert_int_equal(masker_flush(m, &out), 0);
		assert_string_equal(out.ptr, want);
		free(in);
		free(want);
	}
	/* Case-sensitive. */
	buf_reset(&out);
	assert_int_equal(masker_write(m, "GLPAT-abc", 9, &out), 0);
	assert_int_equal(masker_flush(m, &out), 0);
	assert_string_equal(out.ptr, "GLPAT-abc");
	buf_release(&out);
	masker_free(m);
}

/* Leftmost, then longest; a longer phrase still possible keeps a match pending. */
static void
test_leftmost_longest(void **state)
{
	static const char *const p1[] = { "abcd", "bc" };
	static const char *const p2[] = { "ab", "abcdef", "cd" };
	static const char *const p3[] = { "a", "aaaab" };
	static const char *const p4[] = { "ab", "abzz", "c" };
	struct cfg	 c = { p1, 2, NULL, 0, false };

	(void)state;
	check(&c, "abcd", MASKED);
	check(&c, "abce", "a" MASKED "e");
	check(&c, "abc", "a" MASKED);
	c.phrases = p2;
	c.nphrases = 3;
	check(&c, "abcdef", MASKED);
	check(&c, "abcdeX", MASKED MASKED "eX");
	check(&c, "abcd", MASKED MASKED);
	c.phrases = p3;
	c.nphrases = 2;
	check(&c, "aaaaaaab", MASKED MASKED MASKED MASKED);
	check(&c, "aaaaaaa", MASKED MASKED MASKED MASKED MASKED MASKED MASKED);
	c.phrases = p4;
	c.nphrases = 3;
	check(&c, "abcq", MASKED MASKED "q");
	check(&c, "abzc", MASKED "z" MASKED);
}

/* Nothing that could still become a phrase is printed; the rest is. */
static void
test_streaming_hold(void **state)
{
	static const char *const p[] = { "secret", "ab", "abcd" };
	static const char *const p2[] = { "ab", "abx", "bc" };
	struct masker	*m;
	struct buf	 out;

	(void)state;
	m = masker_new(p, NELEM(p), NULL, 0, false);
	buf_init(&out, BUF_UNLIMITED);
	assert_int_equal(masker_write(m, "hello se", 8, &out), 0);
	assert_string_equal(out.ptr, "hello ");
	assert_int_equal(masker_write(m, "cre", 3, &out), 0);
	assert_string_equal(out.ptr, "hello ");
	assert_int_equal(masker_write(m, "x", 1, &out), 0);
	assert_string_equal(out.ptr, "hello secrex");
	assert_int_equal(masker_write(m, " secre", 6, &out), 0);
	assert_string_equal(out.ptr, "hello secrex ");
	/* The stream ends: a partial match is no secret. */
	assert_int_equal(masker_flush(m, &out), 0);
	assert_string_equal(out.ptr, "hello secrex secre");

	/* A complete match waiting for a longer one is masked at the end. */
	buf_reset(&out);
	assert_int_equal(masker_write(m, "x ab", 4, &out), 0);
	assert_string_equal(out.ptr, "x ");
	assert_int_equal(masker_write(m, "c", 1, &out), 0);
	assert_string_equal(out.ptr, "x ");
	assert_int_equal(masker_flush(m, &out), 0);
	assert_string_equal(out.ptr, "x " MASKED "c");
	buf_reset(&out);
	assert_int_equal(masker_write(m, "ab", 2, &out), 0);
	assert_int_equal(masker_flush(m, &out), 0);
	assert_string_equal(out.ptr, MASKED);
	buf_release(&out);
	masker_free(m);

	/*
	 * A match is handed on as soon as the window has moved past its
	 * start, even while a later phrase ("bc") is still open.
	 */
	m = masker_new(p2, NELEM(p2), NULL, 0, false);
	buf_init(&out, BUF_UNLIMITED);
	assert_int_equal(masker_write(m, "ab", 2, &out), 0);
	assert_int_equal(out.len, 0);
	assert_int_equal(masker_write(m, "c", 1, &out), 0);
	assert_string_equal(out.ptr, MASKED);
	assert_int_equal(masker_write(m, "y", 1, &out), 0);
	assert_string_equal(out.ptr, MASKED "cy");
	/* Flushing an empty stream, twice. */
	buf_reset(&out);
	assert_int_equal(masker_flush(m, &out), 0);
	assert_int_equal(masker_flush(m, &out), 0);
	assert_int_equal(out.len, 0);
	buf_release(&out);
	masker_free(m);
}

/*
 * A clone shares the rules, not the stream: a secret split across writes
 * is masked in each, however their writes interleave, and either may be
 * freed first.
 */
static void
test_clone(void **state)
{
	static const char *const p[] = { "secret-value", "sec" };
	static const char *const pre[] = { "glpat-" };
	struct masker	*m, *c, *c2;
	struct buf	 o1, o2, o3;
	int		 order;

	(void)state;
	for (order = 0; order < 2; order++) {
		m = masker_new(p, NELEM(p), pre, NELEM(pre), true);
		buf_init(&o1, BUF_UNLIMITED);
		buf_init(&o2, BUF_UNLIMITED);
		/* Cloned while m holds "secret-" back: the clone starts afresh. */
		assert_int_equal(masker_write(m, "a secret-", 9, &o1), 0);
		assert_string_equal(o1.ptr, "a ");
		c = masker_clone(m);
		assert_int_equal(masker_write(c, "b secr", 6, &o2), 0);
		assert_string_equal(o2.ptr, "b ");
		assert_int_equal(masker_write(m, "val", 3, &o1), 0);
		assert_int_equal(masker_write(c, "et-va", 5, &o2), 0);
		write_direct(m, "ue glpat-x ?private_token=y", 27, &o1);
		write_direct(c, "lue! secre", 10, &o2);
		assert_int_equal(masker_flush(m, &o1), 0);
		assert_int_equal(masker_flush(c, &o2), 0);
		assert_string_equal(o1.ptr, "a " MASKED " glpat-" MASKED " ?private_token=" MASKED);
		assert_string_equal(o2.ptr, "b " MASKED "! " MASKED "re");

		/* A clone of a clone, outliving both. */
		c2 = masker_clone(c);
		if (order == 0) {
			masker_free(m);
			masker_free(c);
		} else {
			masker_free(c);
			masker_free(m);
		}
		buf_init(&o3, BUF_UNLIMITED);
		assert_int_equal(masker_write(c2, "x secret-v", 10, &o3), 0);
		assert_int_equal(masker_write(c2, "alue glpat-z", 12, &o3), 0);
		assert_int_equal(masker_flush(c2, &o3), 0);
		assert_string_equal(o3.ptr, "x " MASKED " glpat-" MASKED);
		masker_free(c2);
		buf_release(&o1);
		buf_release(&o2);
		buf_release(&o3);
	}

	/* No rules at all: the clone passes the text on as it came. */
	m = masker_new(NULL, 0, NULL, 0, false);
	c = masker_clone(m);
	masker_free(m);
	buf_init(&o1, BUF_UNLIMITED);
	assert_int_equal(masker_write(c, "secret", 6, &o1), 0);
	assert_int_equal(masker_flush(c, &o1), 0);
	assert_string_equal(o1.ptr, "secret");
	buf_release(&o1);
	masker_free(c);
}

/* Values and runs of any length are dropped as they come, never held. */
static void
test_long_value_not_held(void **state)
{
	static const char *const pre[] = { "glpat-" };
	static const char *const phr[] = { "secretvalue" };
	struct masker	*m;
	struct buf	 out;
	char		 chunk[1000];
	int		 i;

	(void)state;
	memset(chunk, 'a', sizeof chunk);
	m = masker_new(phr, 1, pre, 1, true);
	buf_init(&out, BUF_UNLIMITED);
	assert_int_equal(masker_write(m, "get ?PRIVATE_", 13, &out), 0);
	assert_int_equal(masker_write(m, "TOKEN=", 6, &out), 0);
	assert_string_equal(out.ptr, "get ?PRIVATE_TOKEN=" MASKED);
	for (i = 0; i < 1000; i++)
		assert_int_equal(masker_write(m, chunk, sizeof chunk, &out), 0);
	assert_string_equal(out.ptr, "get ?PRIVATE_TOKEN=" MASKED);
	assert_int_equal(masker_write(m, " gl", 3, &out), 0);
	assert_int_equal(masker_write(m, "pat-", 4, &out), 0);
	assert_int_equal(masker_write(m, "x", 1, &out), 0);
	assert_string_equal(out.ptr, "get ?PRIVATE_TOKEN=" MASKED " glpat-" MASKED);
	for (i = 0; i < 1000; i++)
		assert_int_equal(masker_write(m, chunk, sizeof chunk, &out), 0);
	/* A phrase inside a run is part of the run. */
	assert_int_equal(masker_write(m, "secretvalue", 11, &out), 0);
	assert_int_equal(masker_write(m, "b c", 3, &out), 0);
	assert_int_equal(masker_flush(m, &out), 0);
	assert_string_equal(out.ptr, "get ?PRIVATE_TOKEN=" MASKED " glpat-" MASKED " c");
	buf_release(&out);
	masker_free(m);
}

/* Where rules overlap (see mask.c): a phrase wins; one mask per value or run. */
static void
test_rule_overlap(void **state)
{
	static const char *const pre[] = { "glpat-", "ab-", "ab-cd-" };
	static const char *const phr[] = { "s3cr3t", "pat-x" };
	static const char *const key[] = { "te_tok" };
	struct cfg	 c = { phr, NELEM(phr), pre, NELEM(pre), true };
	struct cfg	 k = { key, NELEM(key), pre, NELEM(pre), true };

	(void)state;
	check(&c, "?private_token=s3cr3t&a=1", "?private_token=" MASKED "&a=1");
	check(&c, "?private_token=xs3cr3tx y", "?private_token=" MASKED " y");
	check(&c, "?private_token=glpat-abc y", "?private_token=" MASKED " y");
	check(&c, "glpat-s3cr3t y", "glpat-" MASKED " y");
	check(&c, "glpat-as3cr3tb y", "glpat-" MASKED " y");
	check(&c, "glpat-x y", "gl" MASKED " y");
	check(&k, "?private_token=abc", "?priva" MASKED "en=abc");
	check(&c, "s3cr3t-glpat-q", MASKED "-glpat-" MASKED);
	check(&c, "ab-cd-xyz ab- x", "ab-" MASKED " ab- x");
	check(&c, "&private_token=glpat-", "&private_token=" MASKED);
}

static void
test_trim_and_duplicates(void **state)
{
	static const char *const p1[] = { "  secret\t\n", "secret", "", " \t ",
	    "\xc2\xa0" "nbsp" "\xe3\x80\x80", "\xe2\x80\x8a" };
	static const char *const p2[] = { "   ", "" };
	struct cfg	 c = { p1, NELEM(p1), NULL, 0, false };

	(void)state;
	check(&c, "a secret b  secret\t", "a " MASKED " b  " MASKED "\t");
	check(&c, "x nbsp y", "x " MASKED " y");
	check(&c, "\xe2\x80\x8a", "\xe2\x80\x8a");
	c.phrases = p2;
	c.nphrases = 2;
	check(&c, "   ", "   ");
	c.phrases = NULL;
	c.nphrases = 5;
	check(&c, "nothing", "nothing");
}

static void
test_binary(void **state)
{
	static const char *const p[] = { "\xff\xfe\x80", "\x01" };
	struct cfg	 c = { p, NELEM(p), NULL, 0, true };
	const char	 in[] = "a\0\xff\xfe\x80\0b\x01?private_token=\x80\0z";
	const char	 want[] = "a\0" MASKED "\0b" MASKED "?private_token=" MASKED "\0z";

	(void)state;
	check_len(&c, in, sizeof in - 1, want, sizeof want - 1);
}

static void
test_enospc(void **state)
{
	static const char *const p[] = { "secret" };
	struct masker	*m;
	struct buf	 out;

	(void)state;
	m = masker_new(p, 1, NULL, 0, false);
	buf_init(&out, 10);
	assert_int_equal(masker_write(m, "0123456789abc", 13, &out), -ENOSPC);
	assert_int_equal(out.len, 10);
	assert_string_equal(out.ptr, "0123456789");
	/* The stream goes on: state stays in step with the input. */
	buf_reset(&out);
	assert_int_equal(masker_write(m, "xx secr", 7, &out), 0);
	assert_string_equal(out.ptr, "xx ");
	assert_int_equal(masker_write(m, "et yyyy", 7, &out), -ENOSPC);
	assert_string_equal(out.ptr, "xx [MASKED");	/* 7 of the 8 bytes */
	buf_reset(&out);
	assert_int_equal(masker_write(m, "sec", 3, &out), 0);
	assert_int_equal(out.len, 0);
	assert_int_equal(masker_write(m, "ret", 3, &out), 0);
	assert_string_equal(out.ptr, MASKED);
	/* Nothing fits at all. */
	buf_release(&out);
	buf_init(&out, 0);
	assert_int_equal(masker_write(m, "abc", 3, &out), -ENOSPC);
	assert_int_equal(out.len, 0);
	assert_int_equal(masker_write(m, "se", 2, &out), 0);
	assert_int_equal(masker_flush(m, &out), -ENOSPC);
	assert_int_equal(masker_flush(m, &out), 0);
	buf_release(&out);
	masker_free(m);
}

/*
 * The reference: each rule applied to the whole text at once, written
 * from its definition.  Text is an array of symbols: bytes, and MASK for
 * a replacement made by an earlier rule.
 */
#define SYM_MASK	256

struct syms {
	int	*v;
	size_t	 n, cap;
};

static void
syms_add(struct syms *s, int c)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->v = xreallocarray(s->v, s->cap, sizeof *s->v);
	}
	s->v[s->n++] = c;
}

/* Rule 1: at each place the longest phrase starting there, else the byte. */
static struct syms
ref_phrases(const char *in, size_t len, const char *const *phr, size_t nphr)
{
	struct syms	 out = { NULL, 0, 0 };
	size_t		 i, k, best, pl;

	for (i = 0; i < len;) {
		best = 0;
		for (k = 0; k < nphr; k++) {
			pl = strlen(phr[k]);
			if (pl > best && pl <= len - i && memcmp(in + i, phr[k], pl) == 0)
				best = pl;
		}
		if (best > 0) {
			syms_add(&out, SYM_MASK);
			i += best;
		} else
			syms_add(&out, (unsigned char)in[i++]);
	}
	return out;
}

static bool
ref_value_end(int c)
{
	return c != SYM_MASK && (c == '?' || c == '&' || c <= ' ' || c == 0x7f);
}

/* Rule 2: '?' or '&', a known key, '=': the value up to its end goes. */
static struct syms
ref_url(const struct syms *in)
{
	static const char *const keys[] = { "private_token",
	    "authenticity_token", "rss_token", "x-amz-signature",
	    "x-amz-credential", "x-amz-security-token" };
	struct syms	 out = { NULL, 0, 0 };
	size_t		 i, j, k, q;
	char		 key[32];
	bool		 hit;

	for (i = 0; i < in->n;) {
		hit = false;
		if (in->v[i] == '?' || in->v[i] == '&') {
			for (j = i + 1; j < in->n && in->v[j] != '?' &&
			    in->v[j] != '&' && in->v[j] != '=' &&
			    in->v[j] != SYM_MASK; j++)
				;
			if (j < in->n && in->v[j] == '=' && j - i - 1 < sizeof key) {
				for (q = i + 1; q < j; q++) {
					int	 c = in->v[q];

					key[q - i - 1] = (char)(c >= 'A' && c <= 'Z' ?
					    c + 'a' - 'A' : c);
				}
				for (k = 0; k < NELEM(keys); k++)
					if (strlen(keys[k]) == j - i - 1 &&
					    memcmp(keys[k], key, j - i - 1) == 0)
						hit = true;
			}
			if (hit) {
				for (q = i; q <= j; q++)
					syms_add(&out, in->v[q]);
				syms_add(&out, SYM_MASK);
				for (i = j + 1; i < in->n && !ref_value_end(in->v[i]); i++)
					;
				continue;
			}
		}
		syms_add(&out, in->v[i++]);
	}
	return out;
}

static bool
ref_tok_alpha(int c)
{
	return c == SYM_MASK || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
	    (c >= 'A' && c <= 'Z') || c == '.' || c == '_' || c == '=' || c == '-';
}

/*
 * Rule 3: the first place where a prefix is complete (counting only text
 * since the last run or mask) starts a run; the run becomes one mask.
 */
static struct syms
ref_tok(const struct syms *in, const char *const *pre, size_t npre)
{
	struct syms	 out = { NULL, 0, 0 };
	size_t		 i, k, q, pl, seg = 0;
	bool		 hit;

	for (i = 0; i < in->n;) {
		syms_add(&out, in->v[i]);
		if (in->v[i] == SYM_MASK) {
			seg = ++i;
			continue;
		}
		i++;
		hit = false;
		for (k = 0; k < npre && !hit; k++) {
			pl = strlen(pre[k]);
			if (pl == 0 || pl > i - seg)
				continue;
			for (q = 0; q < pl && in->v[i - pl + q] ==
			    (unsigned char)pre[k][q]; q++)
				;
			hit = q == pl;
		}
		if (!hit)
			continue;
		for (q = i; q < in->n && ref_tok_alpha(in->v[q]); q++)
			;
		if (q > i)
			syms_add(&out, SYM_MASK);
		seg = i = q;
	}
	return out;
}

static char *
ref_mask(const char *in, size_t len, const struct cfg *c, size_t *outlen)
{
	struct syms	 a, b;
	struct buf	 out;
	size_t		 i;

	a = ref_phrases(in, len, c->phrases, c->nphrases);
	if (c->url) {
		b = ref_url(&a);
		free(a.v);
		a = b;
	}
	if (c->nprefixes > 0) {
		b = ref_tok(&a, c->prefixes, c->nprefixes);
		free(a.v);
		a = b;
	}
	buf_init(&out, BUF_UNLIMITED);
	for (i = 0; i < a.n; i++) {
		if (a.v[i] == SYM_MASK)
			buf_puts(&out, MASKED);
		else
			buf_putc(&out, (char)a.v[i]);
	}
	free(a.v);
	return buf_detach(&out, outlen);
}

/* A random string over alphabet, length in [min, max]. */
static char *
rnd_string(const char *alphabet, size_t min, size_t max)
{
	size_t	 n = min + rnd_below(max - min + 1), i, na = strlen(alphabet);
	char	*s = xmalloc(n + 1);

	for (i = 0; i < n; i++)
		s[i] = alphabet[rnd_below(na)];
	s[n] = '\0';
	return s;
}

/* Random cut points for len bytes, ascending; sometimes one byte per write. */
static size_t
rnd_cuts(size_t len, size_t *cuts)
{
	size_t	 n, i, j, t;

	if (len > 1 && rnd_below(8) == 0) {
		for (i = 0; i + 1 < len; i++)
			cuts[i] = i + 1;
		return len - 1;
	}
	n = rnd_below(6);
	for (i = 0; i < n; i++)
		cuts[i] = rnd_below(len + 1);
	for (i = 1; i < n; i++)
		for (j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
			t = cuts[j];
			cuts[j] = cuts[j - 1];
			cuts[j - 1] = t;
		}
	return n;
}

/* Compare one masker with the reference on a text under several cuttings. */
static void
compare_ref(struct masker *m, const struct cfg *c, const char *in, size_t len,
    int cuttings)
{
	size_t	*cuts, ncuts, wantlen;
	char	*want;
	int	 k;

	want = ref_mask(in, len, c, &wantlen);
	cuts = xreallocarray(NULL, len + 8, sizeof *cuts);
	for (k = 0; k < cuttings; k++) {
		ncuts = rnd_cuts(len, cuts);
		expect_cut(m, in, len, cuts, ncuts, want, wantlen);
	}
	free(cuts);
	free(want);
}

/*
 * Random phrases over a small alphabet (so they overlap and are prefixes
 * of one another) against random text built partly from them.
 */
static void
test_random_phrases(void **state)
{
	char		*phr[8], *text;
	struct cfg	 c = { NULL, 0, NULL, 0, false };
	struct masker	*m;
	struct buf	 t;
	size_t		 np, i, k;
	int		 round, texts;

	(void)state;
	for (round = 0; round < 400; round++) {
		np = 1 + rnd_below(NELEM(phr));
		for (i = 0; i < np; i++) {
			if (i > 0 && rnd_below(3) == 0) {
				/* Prefix, suffix or extension of an earlier one. */
				const char	*o = phr[rnd_below(i)];
				size_t		 ol = strlen(o);
				char		*ext;

				switch (rnd_below(3)) {
				case 0:
					phr[i] = xasprintf("%.*s", (int)(1 + rnd_below(ol)), o);
					break;
				case 1:
					phr[i] = xstrdup(o + rnd_below(ol));
					break;
				default:
					ext = rnd_string("ab", 1, 3);
					phr[i] = xasprintf("%s%s", o, ext);
					free(ext);
					break;
				}
			} else
				phr[i] = rnd_string(round % 2 ? "ab" : "abc", 1, 6);
		}
		c.phrases = (const char *const *)phr;
		c.nphrases = np;
		m = cfg_masker(&c);
		for (texts = 0; texts < 10; texts++) {
			buf_init(&t, BUF_UNLIMITED);
			for (k = rnd_below(12); k > 0; k--) {
				if (rnd_below(2))
					buf_puts(&t, phr[rnd_below(np)]);
				else {
					char	*s = rnd_string("abcd", 0, 4);

					buf_puts(&t, s);
					free(s);
				}
			}
			text = buf_detach(&t, &k);
			compare_ref(m, &c, text, k, 8);
			free(text);
		}
		masker_free(m);
		for (i = 0; i < np; i++)
			free(phr[i]);
	}
}

/* All three rules together, text made of the pieces they look for. */
static void
test_random_pipeline(void **state)
{
	static const char *const pieces[] = { "?", "&", "=", "private_token",
	    "PRIVATE_TOKEN", "rss_token", "x-amz-signature", "glpat-", "glrt-",
	    "glrtr-", "gl", "tok", "-", "_", ".", " ", "\n", "a", "b", "1",
	    "!", "\x01", "\xc3\xbc", "@", "k" };
	/* Some with bytes a token run cannot hold, some inside others. */
	static const char *const prefixes[] = { "glpat-", "glrt-", "glrtr-",
	    "tok-", "a=", "@@", "k@" };
	char		*phr[6], *text;
	struct cfg	 c = { NULL, 0, prefixes, 0, false };
	struct masker	*m;
	struct buf	 t;
	size_t		 np, i, k;
	int		 round, texts;

	(void)state;
	for (round = 0; round < 300; round++) {
		np = rnd_below(NELEM(phr) + 1);
		for (i = 0; i < np; i++) {
			buf_init(&t, BUF_UNLIMITED);
			for (k = 1 + rnd_below(3); k > 0; k--)
				buf_puts(&t, pieces[rnd_below(NELEM(pieces))]);
			/* Not white space at the ends, which the masker trims. */
			if (rnd_below(2))
				buf_putc(&t, 'a');
			phr[i] = text = buf_detach(&t, NULL);
			while (*text == ' ' || *text == '\n')
				text++;
			memmove(phr[i], text, strlen(text) + 1);
			if (phr[i][0] == '\0')
				strcpy(phr[i], "b");
			for (k = strlen(phr[i]); phr[i][k - 1] == ' ' ||
			    phr[i][k - 1] == '\n'; k--)
				phr[i][k - 1] = '\0';
		}
		c.phrases = (const char *const *)phr;
		c.nphrases = np;
		c.nprefixes = rnd_below(NELEM(prefixes) + 1);
		c.url = rnd_below(4) != 0;
		m = cfg_masker(&c);
		for (texts = 0; texts < 10; texts++) {
			buf_init(&t, BUF_UNLIMITED);
			for (k = rnd_below(25); k > 0; k--) {
				if (np > 0 && rnd_below(5) == 0)
					buf_puts(&t, phr[rnd_below(np)]);
				else
					buf_puts(&t, pieces[rnd_below(NELEM(pieces))]);
			}
			text = buf_detach(&t, &k);
			compare_ref(m, &c, text, k, 8);
			free(text);
		}
		masker_free(m);
		for (i = 0; i < np; i++)
			free(phr[i]);
	}
}

/*
 * Long binary phrases over most byte values, so the automaton's table
 * reaches its size limit and the deeper states are matched without it.
 * Some phrases begin with the middle of another, and the text then runs
 * from the one into the other: that needs the failure links of the deep
 * states.
 */
static void
test_random_binary_large(void **state)
{
	enum { NP = 100 };
	char		*phr[NP], *text;
	size_t		 src[NP], srcoff[NP];
	struct cfg	 c = { NULL, NP, NULL, 0, false };
	struct masker	*m;
	struct buf	 t;
	size_t		 i, j, k, len, pl, off;
	int		 round, texts;

	(void)state;
	for (round = 0; round < 3; round++) {
		for (i = 0; i < NP; i++) {
			len = 50 + rnd_below(200);
			phr[i] = xmalloc(len + 1);
			for (k = 0; k < len; k++)
				phr[i][k] = (char)(0x21 + rnd_below(0xff - 0x21 + 1));
			phr[i][len] = '\0';
			src[i] = i;
			j = rnd_below(i + 1);
			pl = strlen(phr[j]);
			if (j < i && rnd_below(2) == 0) {
				/* The same head as an earlier one. */
				memcpy(phr[i], phr[j], (pl < len ? pl : len) / 2 + 1);
			} else if (j < i) {
				/* Starts with the middle of an earlier one. */
				off = pl / 3 + rnd_below(pl / 2);
				k = pl - off < len - 1 ? pl - off : len - 1;
				memcpy(phr[i], phr[j] + off, k);
				src[i] = j;
				srcoff[i] = off;
			}
			/* No (Unicode) white space at the ends, which is trimmed. */
			if ((unsigned char)phr[i][0] >= 0xc2)
				phr[i][0] = 'w';
			if ((unsigned char)phr[i][len - 1] >= 0x80)
				phr[i][len - 1] = 'z';
		}
		c.phrases = (const char *const *)phr;
		m = cfg_masker(&c);
		for (texts = 0; texts < 20; texts++) {
			buf_init(&t, BUF_UNLIMITED);
			for (k = 5 + rnd_below(20); k > 0; k--) {
				i = rnd_below(NP);
				pl = strlen(phr[i]);
				switch (rnd_below(3)) {
				case 0:
					buf_puts(&t, phr[i]);
					break;
				case 1:
					/* A fragment: starts like a phrase, breaks off. */
					off = rnd_below(3) == 0 ? rnd_below(pl) : 0;
					buf_append(&t, phr[i] + off, rnd_below(pl - off) + 1);
					buf_putc(&t, (char)rnd_below(256));
					break;
				default:
					/* From the head of one phrase into another. */
					if (src[i] != i)
						buf_append(&t, phr[src[i]], srcoff[i]);
					buf_puts(&t, phr[i]);
					break;
				}
			}
			text = buf_detach(&t, &len);
			compare_ref(m, &c, text, len, 4);
			free(text);
		}
		masker_free(m);
		for (i = 0; i < NP; i++)
			free(phr[i]);
	}
}

/*
 * The filters in front of the automaton, on texts long enough for them:
 * phrases of 8 bytes or more (the jump table: a window of the shortest
 * phrase's length, shifts by the last 3 bytes of it) over a small
 * alphabet, so the table holds many short shifts, and one to four short
 * phrases (the pair filter, 16 places at a time).  Phrases sit near the
 * cuts, at the ends of texts and across 16-byte blocks; cuts fall
 * everywhere, so what is held back at the end of a write is checked.
 */
static void
test_random_filters(void **state)
{
	static const char *const prefixes[] = { "glpat-", "_gitlab_session=" };
	char		*phr[12], *text, *w;
	struct cfg	 c = { NULL, 0, prefixes, 0, false };
	struct masker	*m;
	struct buf	 t;
	size_t		 np, i, k, len;
	int		 round, texts;
	bool		 longp;

	(void)state;
	for (round = 0; round < 200; round++) {
		longp = round % 2 == 0;
		np = longp ? 1 + rnd_below(NELEM(phr)) : 1 + rnd_below(4);
		for (i = 0; i < np; i++) {
			if (longp)
				phr[i] = rnd_string(round % 4 ? "abc" : "abcdefgh",
				    8, 8 + rnd_below(40));
			else
				phr[i] = rnd_string("abc", 2, 7);
			if (i > 0 && rnd_below(3) == 0) {
				/* The same head as an earlier one. */
				k = strlen(phr[i]) < strlen(phr[0]) ?
				    strlen(phr[i]) : strlen(phr[0]);
				memcpy(phr[i], phr[0], k / 2);
			}
		}
		c.phrases = (const char *const *)phr;
		c.nphrases = np;
		c.nprefixes = rnd_below(3);
		c.url = rnd_below(2) != 0;
		m = cfg_masker(&c);
		for (texts = 0; texts < 6; texts++) {
			buf_init(&t, BUF_UNLIMITED);
			for (k = rnd_below(40); k > 0; k--) {
				i = rnd_below(np);
				switch (rnd_below(6)) {
				case 0:
					buf_puts(&t, phr[i]);
					break;
				case 1:
					/* A phrase but its last byte. */
					buf_append(&t, phr[i], strlen(phr[i]) - 1);
					break;
				case 2:
					buf_puts(&t, rnd_below(2) ? "glpat-x1 " :
					    "?private_token=v&_gitlab_session=s ");
					break;
				default:
					w = rnd_string(rnd_below(2) ? "abc" :
					    "abcdefghijklmnopqrstuvwxyz _-", 1, 24);
					buf_puts(&t, w);
					free(w);
					break;
				}
			}
			text = buf_detach(&t, &len);
			compare_ref(m, &c, text, len, 6);
			free(text);
		}
		masker_free(m);
		for (i = 0; i < np; i++)
			free(phr[i]);
	}
}

/* 1000 phrases of 32 bytes, in text that holds some of them. */
static void
test_thousand_phrases(void **state)
{
	enum { NP = 1000 };
	static const char	 alnum[] =
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	char			*phr[NP], *text, *w;
	struct cfg		 c = { NULL, NP, NULL, 0, false };
	struct masker		*m;
	struct buf		 t;
	size_t			 i, k, len;

	(void)state;
	for (i = 0; i < NP; i++)
		phr[i] = rnd_string(alnum, 32, 32);
	c.phrases = (const char *const *)phr;
	m = cfg_masker(&c);
	buf_init(&t, BUF_UNLIMITED);
	for (k = 0; k < 400; k++) {
		w = rnd_string(alnum, 1, 12);
		buf_puts(&t, w);
		free(w);
		buf_putc(&t, k % 10 ? ' ' : '\n');
		if (k % 7 == 0)
			buf_puts(&t, phr[rnd_below(NP)]);
		if (k % 11 == 0)	/* all but the last byte */
			buf_append(&t, phr[rnd_below(NP)], 31);
	}
	text = buf_detach(&t, &len);
	compare_ref(m, &c, text, len, 20);
	free(text);
	masker_free(m);
	for (i = 0; i < NP; i++)
		free(phr[i]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gitlab_masker),
		cmocka_unit_test(test_gitlab_large_secret),
		cmocka_unit_test(test_gitlab_url),
		cmocka_unit_test(test_gitlab_tokens),
		cmocka_unit_test(test_prefix_limit),
		cmocka_unit_test(test_gitlab_custom_prefixes),
		cmocka_unit_test(test_default_prefixes),
		cmocka_unit_test(test_leftmost_longest),
		cmocka_unit_test(test_streaming_hold),
		cmocka_unit_test(test_clone),
		cmocka_unit_test(test_long_value_not_held),
		cmocka_unit_test(test_rule_overlap),
		cmocka_unit_test(test_trim_and_duplicates),
		cmocka_unit_test(test_binary),
		cmocka_unit_test(test_enospc),
		cmocka_unit_test(test_random_phrases),
		cmocka_unit_test(test_random_pipeline),
		cmocka_unit_test(test_random_binary_large),
		cmocka_unit_test(test_thousand_phrases),
		cmocka_unit_test(test_random_filters),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
