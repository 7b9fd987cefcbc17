/*
 * Streaming secret masker (protocol.md 6.5 steps 1-3, interface in mask.h).
 *
 * Three stages in gitlab-runner's order.  Each hands its output to the next
 * as spans of the bytes it was given plus a "mask" event, so nothing is
 * copied between them:
 *
 *	phrases -> URL parameters -> token prefixes -> out
 *
 * Only the phrase stage holds bytes back.  The other two replace what
 * *follows* a pattern (the value after "?private_token=", the run after
 * "glpat-") and print the pattern itself verbatim, so they can print as
 * they go and only remember how far into a key or prefix they are.
 *
 * Phrases are found by one Aho-Corasick automaton over all of them, with
 * leftmost-longest semantics: the match that starts first wins, and of
 * those starting at the same byte the longest.  That gives the results of
 * gitlab-runner's chain of one matcher per phrase (masker_test.go) without
 * its cost per phrase.  The automaton runs over the whole stream and is
 * never reset; its state is the longest suffix of the stream that is a
 * prefix of some phrase, and exactly those bytes (the "window") are held
 * back, so the hold never exceeds the longest phrase.  Every match seen is
 * noted by its start.  No match can start before the window any more, so
 * a start there is decided: a plain byte, or the longest match noted for
 * it, which is then also the leftmost one left.  Deciding walks a pointer
 * forward (jumping over chosen matches) and never looks at a byte twice,
 * so a phrase that is the head of another (a pending match) costs nothing
 * extra.  What can cost more is phrases that end like one another ("a",
 * "aa", "aaa"): each match ending at a byte is noted.
 *
 * Before the automaton, a filter skips text where no phrase can begin:
 * memchr() for a few first bytes, 16 places at a time for a few first
 * pairs, else a table of the first 2 or 3 bytes of every phrase; with
 * phrases of 8 bytes or more, a jump table first (Wu-Manber), which looks
 * at one place in up to 30 where there are few phrases.  The automaton is a table (a DFA, one row per state,
 * columns per byte class) for the shallow states and the plain trie with
 * failure links for the deep ones once the table reaches DENSE_MAX
 * entries, so a large or binary set of phrases cannot make it huge.
 * Transitions that need attention (into a match state or into the sparse
 * part) carry a flag bit, so the inner loop is one load, one test a byte.
 * The token prefixes are found by the same kind of automaton.
 *
 * Where the rules overlap:
 *   - phrases are replaced before the other rules look at the text, so a
 *     phrase wins over any key or prefix it overlaps (gitlab-runner's
 *     order);
 *   - a mask from an earlier stage inside a URL value or token run being
 *     replaced is part of it: the value or run still becomes one
 *     "[MASKED]"; anywhere else it breaks a partial key or prefix;
 *   - a URL value is dropped before the token stage sees it, so
 *     "?private_token=glpat-x" gives one "[MASKED]";
 *   - among token prefixes the first to be complete starts the run (the
 *     leftmost end), and the run swallows everything in [0-9A-Za-z._=-],
 *     other prefixes included.  gitlab-runner's chain can print a mask
 *     twice there ("ab[MASKED][MASKED]"); here it is one.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "api/redact.h"
#include "lib/buf.h"
#include "lib/xmalloc.h"
#include "runner/mask.h"

#define MASK_TEXT	"[MASKED]"
#define MASK_LEN	(sizeof(MASK_TEXT) - 1)

/* Table entries (4 bytes each) before the deeper states go sparse: 8 MiB. */
#define DENSE_MAX	((size_t)1 << 21)
/* Flag on a table entry: the target is a match state or a sparse one. */
#define AC_SPECIAL	0x80000000u
/* Total phrase bytes accepted; beyond it state numbers could overflow. */
#define PATTERN_BYTES_MAX	((size_t)1 << 30)

/* Entries (bits) of the filter of the first 2 or 3 bytes of every pattern. */
#define GRAM_SIZE	65536
/* 2-byte entries set past which 3 bytes filter better (if all that long). */
#define GRAM2_MAX	256

/* Up to this many bytes are looked for with memchr(), each. */
#define FIND_MAX	3
/* Up to this many first pairs are looked for 16 places at a time. */
#define PAIR_MAX	4
/*
 * The shortest pattern for the jump table, and the window it uses (see
 * ac_skip()).  8 is GitLab's least masked variable length; past 32 a
 * longer window fills the table with small shifts for many patterns.
 */
#define JUMP_MINLEN	8
#define JUMP_WINDOW	32
/*
 * The jump table has at least JUMP_SPARSE entries for each 4 bytes of a
 * window put in, so that text hits one by chance rarely (1 in 64 at most,
 * below JUMP_BITS_MAX) and the jumps stay long; and 2^JUMP_BITS_MIN
 * entries at least.  With a job's few secrets that is a few KiB, not 64.
 */
#define JUMP_SPARSE	64
#define JUMP_BITS_MIN	10
#define JUMP_BITS_MAX	16

#define PREFIXES_MAX	15
#define URL_KEY_MAX	20	/* strlen("x-amz-security-token") */

struct pattern {
	const uint8_t	*p;
	size_t		 len;
};

/*
 * States are numbered breadth first, so a state's failure target has a
 * smaller number, the dense part is a prefix [0, ndense) and the children
 * of state s are the contiguous range [child[s], child[s + 1]).
 */
struct ac {
	uint32_t	 nstates;
	uint32_t	 ndense;
	unsigned	 shift;		/* a row has 1 << shift entries */
	size_t		 maxlen;	/* longest pattern */
	uint8_t		 cls[256];	/* byte -> class; 0: in no pattern */
	uint8_t		 skip[256];	/* byte leaves the root where it is */
	unsigned	 nstart;	/* bytes that leave the root */
	uint8_t		 start[FIND_MAX];	/* they, when that few */
	/*
	 * gramlen 2 or 3: the filter is gram[], or with gramlen 2 and npair
	 * first pairs pair[] (then gram is NULL: the pairs are all it said).
	 */
	unsigned	 gramlen;
	uint8_t		*gram;		/* GRAM_SIZE bits: can a pattern start so */
	unsigned	 npair;
	uint8_t		 pair[PAIR_MAX][2];
	size_t		 window;	/* jump[] is there: its window */
	uint8_t		*jump;		/* by gram4() of 4 bytes */
	unsigned	 jshift;	/* gram4()'s: 32 - log2(jump[]'s size) */
	uint32_t	*delta;		/* ndense rows: target | AC_SPECIAL */
	uint32_t	*fail;
	uint32_t	*depth;
	uint32_t	*out;		/* longest pattern ending here, or 0 */
	uint32_t	*child;		/* nstates + 1 entries */
	uint8_t		*incls;		/* class of the edge into the state */
};

enum url_state {
	URL_IDLE,	/* looking for '?' or '&' */
	URL_KEY,	/* reading a key up to '=' */
	URL_VALUE,	/* dropping a secret value */
};

/*
 * The automata, built once and shared by a masker and its clones: they
 * are only read while masking, so one copy serves every stream of a job.
 */
struct rules {
	unsigned	 refs;		/* maskers using them */
	struct ac	*phr;
	struct ac	*tok;
};

struct masker {
	struct rules	*rules;
	/* rules->phr and ->tok, at hand. */
	struct ac	*phr;		/* NULL: no phrases */
	struct ac	*tok;		/* NULL: no prefixes */
	bool		 url;

	/*
	 * Phrase stage.  Positions count stream bytes.  hold[] has the bytes
	 * [hbase, hbase + holdlen) that were not yet handed on; during a
	 * write the new bytes follow at dbase.  Before cur all is decided:
	 * bytes in [emitted, cur) are plain ones not yet handed on.
	 */
	uint32_t	 ps;
	uint64_t	 pos;		/* next byte to scan */
	uint64_t	 emitted;	/* everything before was handed on */
	uint64_t	 hbase;
	uint64_t	 dbase;
	uint64_t	 cur;		/* first start not decided yet */
	uint8_t		*hold;
	size_t		 holdlen;
	/*
	 * Matches noted by start position, for starts in [cur, pos): a ring
	 * as long as the window can be.  ctag is the position + 1 an entry
	 * is for (0: none), clen the length of the longest match there.
	 */
	uint64_t	*ctag;
	uint32_t	*clen;
	size_t		 ringmask;
	bool		 has_cand;	/* [cur, last_cand] holds a match */
	uint64_t	 last_cand;

	/* URL stage. */
	enum url_state	 ustate;
	size_t		 keylen;
	char		 key[URL_KEY_MAX];

	/* Token stage. */
	uint32_t	 ts;
	bool		 trun;		/* in the run after a prefix */
	bool		 tmasked;	/* this run's mask was printed */

	struct buf	*out;		/* during a call */
	int		 err;
	/*
	 * masker_write_direct(): the input is [dlo, dhi); what is handed on
	 * is out, then the run of input [dir, dir + ndir), not yet copied.
	 * dlo is 0 otherwise.
	 */
	uintptr_t	 dlo, dhi;
	const uint8_t	*dir;
	size_t		 ndir;
};


#define URL_KEY(s)	{ s, sizeof(s) - 1 }
static const struct {
	const char	*s;
	size_t		 len;
} url_keys[] = {
	URL_KEY("private_token"), URL_KEY("authenticity_token"),
	URL_KEY("rss_token"), URL_KEY("x-amz-signature"),
	URL_KEY("x-amz-credential"), URL_KEY("x-amz-security-token"),
};

static const char *const default_prefixes[] = { "glpat-", NULL };

static void	url_feed(struct masker *, const uint8_t *, size_t);
static void	url_mask(struct masker *);

/* '?', '&', white space and controls end a URL parameter value. */
static inline bool
url_end(uint8_t c)
{
	return c <= ' ' || c == '?' || c == '&' || c == 0x7f;
}

/* [0-9A-Za-z._=-]: what a token may be made of. */
static inline bool
tok_alpha(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	    c == '=';
}

/*
 * Length of the white space character at p (Go's unicode.IsSpace, which
 * gitlab-runner's TrimSpace uses), or 0.  Unicode spaces count too: a
 * value with a trailing no-break space must still mask the value.
 */
static size_t
space_len(const uint8_t *p, size_t n)
{
	if (n >= 1 && (p[0] == ' ' || (p[0] >= '\t' && p[0] <= '\r')))
		return 1;
	if (n >= 2 && p[0] == 0xc2 && (p[1] == 0x85 || p[1] == 0xa0))
		return 2;
	if (n >= 3) {
		if (p[0] == 0xe1 && p[1] == 0x9a && p[2] == 0x80)
			return 3;
		if (p[0] == 0xe2 && p[1] == 0x80 &&
		    ((p[2] >= 0x80 && p[2] <= 0x8a) || p[2] == 0xa8 ||
		    p[2] == 0xa9 || p[2] == 0xaf))
			return 3;
		if (p[0] == 0xe2 && p[1] == 0x81 && p[2] == 0x9f)
			return 3;
		if (p[0] == 0xe3 && p[1] == 0x80 && p[2] == 0x80)
			return 3;
	}
	return 0;
}

static struct pattern
trim(const char *s)
{
	struct pattern	 t;
	size_t		 k;

	t.p = (const uint8_t *)s;
	t.len = strlen(s);
	while ((k = space_len(t.p, t.len)) != 0) {
		t.p += k;
		t.len -= k;
	}
	for (;;) {
		for (k = 1; k <= 3 && k <= t.len; k++) {
			if (space_len(t.p + t.len - k, k) == k)
				break;
		}
		if (k > 3 || k > t.len)
			break;
		t.len -= k;
	}
	return t;
}

static int
pattern_cmp(const void *a, const void *b)
{
	const struct pattern	*x = a, *y = b;
	size_t			 n = x->len < y->len ? x->len : y->len;
	int			 c;

	if ((c = memcmp(x->p, y->p, n)) != 0)
		return c;
	return (x->len > y->len) - (x->len < y->len);
}

/*
 * Where in the filter the 2 or 3 bytes at p go: 2 bytes exactly, 3 hashed
 * (Fibonacci hashing).  The filter is a bit per entry: 8 KiB stays in the
 * L1 cache, which pays for the shift and mask a test takes, and every
 * masker of a job holding 64 KiB of bytes was most of its memory.
 */
static inline uint32_t
gram2(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

/*
 * 4 bytes hashed, for the jump table: digits and hex are sparser so.
 * shift is 32 - the hash's bits.
 */
static inline uint32_t
gram4(const uint8_t *p, unsigned shift)
{
	uint32_t	 v;

	memcpy(&v, p, 4);
	return (v * 0x9e3779b1u) >> shift;
}

static inline uint32_t
gram3(const uint8_t *p)
{
	uint32_t	 v = (uint32_t)p[0] | (uint32_t)p[1] << 8 |
			    (uint32_t)p[2] << 16;

	return (v * 0x9e3779b1u) >> 16;
}

/*
 * The first of the nb bytes b[] in [p, e), or e.  memchr() is much faster
 * than any loop here; next[] (NULL at first) keeps where each byte was
 * found, so that calls that move through one span search it once.
 */
static const uint8_t *
find_any(const uint8_t *b, unsigned nb, const uint8_t **next,
    const uint8_t *p, const uint8_t *e)
{
	const uint8_t	*best = e, *q;
	unsigned	 k;

	for (k = 0; k < nb; k++) {
		if (next[k] == NULL || next[k] < p) {
			q = memchr(p, b[k], (size_t)(e - p));
			next[k] = q != NULL ? q : e;
		}
		if (next[k] < best)
			best = next[k];
	}
	return best;
}

/*
 * The first of the bytes b0 and b1 in [p, e), or e: one pass where two
 * memchr() calls would each read up to the other's hit, again and again
 * in a URL full of '&'.
 */
static const uint8_t *
find2(const uint8_t *p, const uint8_t *e, uint8_t b0, uint8_t b1)
{
#ifdef __SSE2__
	const __m128i	 v0 = _mm_set1_epi8((char)b0), v1 = _mm_set1_epi8((char)b1);
	__m128i		 x;
	unsigned	 bits;

	for (; e - p >= 16; p += 16) {
		x = _mm_loadu_si128((const __m128i *)(const void *)p);
		bits = (unsigned)_mm_movemask_epi8(_mm_or_si128(
		    _mm_cmpeq_epi8(x, v0), _mm_cmpeq_epi8(x, v1)));
		if (bits != 0)
			return p + __builtin_ctz(bits);
	}
#endif
	for (; p < e; p++) {
		if (*p == b0 || *p == b1)
			return p;
	}
	return e;
}

/*
 * The first place in [p, e - 1) where one of the pairs begins, or a place
 * with fewer than 2 bytes left.  Sixteen places are tested at once: the
 * token prefixes (glpat- and the rest: "gl", "_g") and a phrase or two are
 * found at memchr()'s speed, not a table load a byte.
 */
static const uint8_t *
pair_find(const struct ac *a, const uint8_t *p, const uint8_t *e)
{
	unsigned	 k;

#ifdef __SSE2__
	__m128i		 c0[PAIR_MAX], c1[PAIR_MAX], x0, x1, hit;
	unsigned	 bits;

	for (k = 0; k < a->npair; k++) {
		c0[k] = _mm_set1_epi8((char)a->pair[k][0]);
		c1[k] = _mm_set1_epi8((char)a->pair[k][1]);
	}
	for (; e - p > 16; p += 16) {
		x0 = _mm_loadu_si128((const __m128i *)(const void *)p);
		x1 = _mm_loadu_si128((const __m128i *)(const void *)(p + 1));
		hit = _mm_and_si128(_mm_cmpeq_epi8(x0, c0[0]),
		    _mm_cmpeq_epi8(x1, c1[0]));
		for (k = 1; k < a->npair; k++)
			hit = _mm_or_si128(hit, _mm_and_si128(
			    _mm_cmpeq_epi8(x0, c0[k]), _mm_cmpeq_epi8(x1, c1[k])));
		if ((bits = (unsigned)_mm_movemask_epi8(hit)) != 0)
			return p + __builtin_ctz(bits);
	}
#endif
	for (; e - p >= 2; p++) {
		for (k = 0; k < a->npair; k++) {
			if (p[0] == a->pair[k][0] && p[1] == a->pair[k][1])
				return p;
		}
	}
	return p;
}

/* Bit h of the filter g, as 0 or 1. */
static inline unsigned
gbit(const uint8_t *g, uint32_t h)
{
	return (unsigned)(g[h >> 3] >> (h & 7)) & 1;
}

static inline void
gset(uint8_t *g, uint32_t h)
{
	g[h >> 3] |= (uint8_t)(1u << (h & 7));
}

/* Can a pattern begin at p (2 or 3 bytes there)? */
static inline bool
gram_hit(const struct ac *a, const uint8_t *p)
{
	unsigned	 k;

	if (a->npair == 0)
		return gbit(a->gram, a->gramlen == 3 ? gram3(p) : gram2(p)) != 0;
	for (k = 0; k < a->npair; k++) {
		if (p[0] == a->pair[k][0] && p[1] == a->pair[k][1])
			return true;
	}
	return false;
}

/*
 * From the root: the first place in [p, e) where a pattern can begin.
 * Where the first bytes are no pattern's first bytes no pattern begins, and
 * whatever prefix of one the automaton would pass through there dies
 * before the next candidate, so the root is the right state at it.
 * next[] is for find_any().
 *
 * With patterns of at least JUMP_MINLEN bytes it first jumps (Wu and
 * Manber's shift table): if the last 4 bytes of the window at p
 * (window bytes, the shortest pattern's length at most) are nowhere in
 * the first window bytes of a pattern, no pattern begins at p or anywhere
 * up to the place those 4 bytes could be a pattern's; jump[] holds how
 * far that is.  It only jumps over starts whose whole window is in
 * [p, e), so a prefix begun there is dead by e too, and what is held back
 * at the end of a write is still right.
 */
static const uint8_t *
ac_skip(const struct ac *a, const uint8_t *p, const uint8_t *e,
    const uint8_t **next)
{
	const uint8_t	*g = a->gram;
	unsigned	 sh;

	if (a->gramlen == 0 && a->nstart <= FIND_MAX)
		return find_any(a->start, a->nstart, next, p, e);
	if (a->jump != NULL) {
		while ((size_t)(e - p) >= a->window) {
			sh = a->jump[gram4(p + a->window - 4, a->jshift)];
			if (sh != 0)
				p += sh;
			else if (gram_hit(a, p))
				return p;
			else
				p++;
		}
	}
	if (a->npair > 0) {
		p = pair_find(a, p, e);
		if (e - p >= 2)
			return p;
	} else if (a->gramlen == 3) {
		/*
		 * Four places a turn, one branch: the loads do not depend
		 * on each other, so the CPU overlaps them.
		 */
		for (; e - p >= 6; p += 4) {
			if (gbit(g, gram3(p)) | gbit(g, gram3(p + 1)) |
			    gbit(g, gram3(p + 2)) | gbit(g, gram3(p + 3)))
				break;
		}
		for (; e - p >= 3; p++) {
			if (gbit(g, gram3(p)))
				return p;
		}
	} else if (a->gramlen == 2) {
		for (; e - p >= 5; p += 4) {
			if (gbit(g, gram2(p)) | gbit(g, gram2(p + 1)) |
			    gbit(g, gram2(p + 2)) | gbit(g, gram2(p + 3)))
				break;
		}
		for (; e - p >= 2; p++) {
			if (gbit(g, gram2(p)))
				return p;
		}
	}
	/* The last bytes, or all with one-byte patterns: one at a time. */
	while (p < e && a->skip[*p])
		p++;
	return p;
}

/* The next state, for any state; c is a class. */
static uint32_t
ac_next_cls(const struct ac *a, uint32_t s, uint8_t c)
{
	uint32_t	 v;

	while (s >= a->ndense) {
		for (v = a->child[s]; v < a->child[s + 1]; v++) {
			if (a->incls[v] == c)
				return v;
		}
		s = a->fail[s];
	}
	return a->delta[((size_t)s << a->shift) + c] & ~AC_SPECIAL;
}

static void
ac_free(struct ac *a)
{
	if (a == NULL)
		return;
	free(a->delta);
	free(a->fail);
	free(a->depth);
	free(a->out);
	free(a->child);
	free(a->incls);
	free(a->gram);
	free(a->jump);
	free(a);
}

/*
 * Build the automaton for n patterns (sorted here; duplicates dropped).
 * A trie is built first in insertion order from the sorted list (each
 * pattern shares its common prefix with the one before), then renumbered
 * breadth first, which the failure links and the dense/sparse split need.
 */
static struct ac *
ac_build(struct pattern *pats, size_t n)
{
	struct ac	*a;
	uint32_t	*tfirst, *tnext, *tlast, *path, *order, *parent;
	uint8_t		*tbyte, *tterm, *term;
	size_t		 total = 0, maxlen = 0, minlen = SIZE_MAX, i, d, lcp;
	size_t		 ncls = 1, row;
	uint32_t	 nt, head, tail, u, v, s, c, h;
	unsigned	 bits;
	bool		 used[256] = { false };

	qsort(pats, n, sizeof *pats, pattern_cmp);
	for (i = 0; i < n; i++) {
		total += pats[i].len;
		if (pats[i].len > maxlen)
			maxlen = pats[i].len;
		if (pats[i].len < minlen)
			minlen = pats[i].len;
		for (d = 0; d < pats[i].len; d++)
			used[pats[i].p[d]] = true;
	}

	a = xcalloc(1, sizeof *a);
	a->maxlen = maxlen;
	for (c = 0; c < 256; c++) {
		if (used[c])
			a->cls[c] = (uint8_t)ncls++;
	}
	while (((size_t)1 << a->shift) < ncls)
		a->shift++;

	/* The trie, nodes in creation order. */
	tfirst = xreallocarray(NULL, total + 1, sizeof *tfirst);
	tnext = xreallocarray(NULL, total + 1, sizeof *tnext);
	tlast = xreallocarray(NULL, total + 1, sizeof *tlast);
	tbyte = xmalloc(total + 1);
	tterm = xcalloc(total + 1, 1);
	path = xreallocarray(NULL, maxlen + 1, sizeof *path);
	tfirst[0] = tnext[0] = UINT32_MAX;
	tbyte[0] = 0;
	path[0] = 0;
	nt = 1;
	for (i = 0; i < n; i++) {
		lcp = 0;
		if (i > 0) {
			while (lcp < pats[i].len && lcp < pats[i - 1].len &&
			    pats[i].p[lcp] == pats[i - 1].p[lcp])
				lcp++;
			if (lcp == pats[i].len)
				continue;	/* sorted: a duplicate */
		}
		for (d = lcp; d < pats[i].len; d++) {
			v = nt++;
			u = path[d];
			tbyte[v] = pats[i].p[d];
			tfirst[v] = tnext[v] = UINT32_MAX;
			if (tfirst[u] == UINT32_MAX)
				tfirst[u] = v;
			else
				tnext[tlast[u]] = v;
			tlast[u] = v;
			path[d + 1] = v;
		}
		tterm[path[pats[i].len]] = 1;
	}
	free(path);
	free(tlast);

	/* Breadth-first renumbering. */
	a->nstates = nt;
	order = xreallocarray(NULL, nt, sizeof *order);
	parent = xreallocarray(NULL, nt, sizeof *parent);
	term = xmalloc(nt);
	a->child = xreallocarray(NULL, (size_t)nt + 1, sizeof *a->child);
	a->incls = xmalloc(nt);
	a->depth = xreallocarray(NULL, nt, sizeof *a->depth);
	a->fail = xreallocarray(NULL, nt, sizeof *a->fail);
	a->out = xreallocarray(NULL, nt, sizeof *a->out);
	order[0] = 0;
	parent[0] = 0;
	a->incls[0] = 0;
	a->depth[0] = 0;
	for (head = 0, tail = 1; head < nt; head++) {
		u = order[head];
		term[head] = tterm[u];
		a->child[head] = tail;
		for (v = tfirst[u]; v != UINT32_MAX; v = tnext[v]) {
			order[tail] = v;
			parent[tail] = head;
			a->incls[tail] = a->cls[tbyte[v]];
			a->depth[tail] = a->depth[head] + 1;
			tail++;
		}
	}
	a->child[nt] = nt;
	free(order);
	free(tfirst);
	free(tnext);
	free(tbyte);
	free(tterm);

	/* Failure links, outputs and the dense rows, in breadth-first order. */
	row = (size_t)1 << a->shift;
	a->ndense = DENSE_MAX / row < nt ? (uint32_t)(DENSE_MAX / row) : nt;
	a->delta = xcalloc(a->ndense * row, sizeof *a->delta);
	for (s = 0; s < nt; s++) {
		if (s == 0 || parent[s] == 0)
			a->fail[s] = 0;
		else
			a->fail[s] = ac_next_cls(a, a->fail[parent[s]],
			    a->incls[s]);
		if (s == 0)
			a->out[s] = 0;	/* no empty patterns */
		else
			a->out[s] = term[s] ? s : a->out[a->fail[s]];
		if (s >= a->ndense)
			continue;
		if (s != 0)
			memcpy(a->delta + s * row, a->delta + a->fail[s] * row,
			    ncls * sizeof *a->delta);
		for (v = a->child[s]; v < a->child[s + 1]; v++)
			a->delta[s * row + a->incls[v]] = v;
	}
	free(parent);
	free(term);

	for (s = 0; s < a->ndense; s++) {
		for (c = 0; c < ncls; c++) {
			v = a->delta[s * row + c];
			if (a->out[v] != 0 || v >= a->ndense)
				a->delta[s * row + c] = v | AC_SPECIAL;
		}
	}
	for (c = 0; c < 256; c++) {
		a->skip[c] = a->delta[a->cls[c]] == 0;
		if (!a->skip[c] && a->nstart++ < FIND_MAX)
			a->start[a->nstart - 1] = (uint8_t)c;
	}
	if (minlen >= 2) {
		a->gramlen = 2;
		a->gram = xcalloc(GRAM_SIZE / 8, 1);
		for (i = 0, c = 0; i < n; i++) {
			c += !gbit(a->gram, gram2(pats[i].p));
			gset(a->gram, gram2(pats[i].p));
		}
		if (c > GRAM2_MAX && minlen >= 3) {
			a->gramlen = 3;
			memset(a->gram, 0, GRAM_SIZE / 8);
			for (i = 0; i < n; i++)
				gset(a->gram, gram3(pats[i].p));
		} else if (c <= PAIR_MAX) {
			for (i = 0; i < n; i++) {
				for (d = 0; d < a->npair; d++) {
					if (memcmp(a->pair[d], pats[i].p, 2) == 0)
						break;
				}
				if (d == a->npair)
					memcpy(a->pair[a->npair++], pats[i].p, 2);
			}
			/* 8 KiB a job's secrets and token prefixes do without. */
			free(a->gram);
			a->gram = NULL;
		}
	}
	if (minlen >= JUMP_MINLEN) {
		/* Where 4 bytes end in a pattern's window: window - end. */
		a->window = minlen < JUMP_WINDOW ? minlen : JUMP_WINDOW;
		for (bits = JUMP_BITS_MIN; bits < JUMP_BITS_MAX &&
		    ((size_t)1 << bits) / JUMP_SPARSE / (a->window - 3) < n;
		    bits++)
			;
		a->jshift = 32 - bits;
		a->jump = xmalloc((size_t)1 << bits);
		memset(a->jump, (int)(a->window - 3), (size_t)1 << bits);
		for (i = 0; i < n; i++) {
			for (d = 4; d <= a->window; d++) {
				h = gram4(pats[i].p + d - 4, a->jshift);
				if (a->jump[h] > a->window - d)
					a->jump[h] = (uint8_t)(a->window - d);
			}
		}
	}
	return a;
}

/* Into out.  Past the cap, keep what fits, drop the rest of the call. */
static void
out_copy(struct masker *m, const void *p, size_t n)
{
	struct buf	*b = m->out;
	size_t		 room;

	if (n == 0 || m->err != 0)
		return;
	if (buf_append(b, p, n) == 0)
		return;
	room = b->max > b->len ? b->max - b->len : 0;
	if (room > 0 && room < n)
		buf_append(b, p, room);
	m->err = -ENOSPC;
}

/*
 * The final sink.  For masker_write_direct(), input handed on as it came
 * is only noted while it is one run, and copied when something else
 * follows it: mostly nothing does, and a whole write goes on uncopied.
 */
static void
out_put(struct masker *m, const void *p, size_t n)
{
	uintptr_t	 q = (uintptr_t)p;

	if (n == 0 || m->err != 0)
		return;
	if (m->dlo != 0) {
		if (q >= m->dlo && q <= m->dhi && n <= m->dhi - q) {
			if (m->ndir > 0 && p == m->dir + m->ndir) {
				m->ndir += n;
				return;
			}
			out_copy(m, m->dir, m->ndir);
			m->dir = p;
			m->ndir = n;
			return;
		}
		out_copy(m, m->dir, m->ndir);
		m->ndir = 0;
	}
	out_copy(m, p, n);
}

/* Token stage: "<prefix><run>" keeps the prefix, the run becomes one mask. */
static void
tok_feed(struct masker *m, const uint8_t *p, size_t n)
{
	const struct ac	*a = m->tok;
	const uint8_t	*next[FIND_MAX] = { NULL };
	size_t		 i = 0, start = 0, j;
	uint32_t	 s, t;

	if (a == NULL) {
		out_put(m, p, n);
		return;
	}
	s = m->ts;
	while (i < n) {
		if (m->trun) {
			for (j = i; i < n && tok_alpha(p[i]); i++)
				;
			if (i > j && !m->tmasked) {
				out_put(m, MASK_TEXT, MASK_LEN);
				m->tmasked = true;
			}
			start = i;
			if (i < n)
				m->trun = false;
			continue;
		}
		if (s == 0) {
			i = (size_t)(ac_skip(a, p + i, p + n, next) - p);
			if (i == n)
				break;
		}
		if (s < a->ndense) {
			t = a->delta[((size_t)s << a->shift) + a->cls[p[i++]]];
			s = t & ~AC_SPECIAL;
			if ((t & AC_SPECIAL) == 0)
				continue;
		} else
			s = ac_next_cls(a, s, a->cls[p[i++]]);
		if (a->out[s] != 0) {
			/* A prefix is complete: print it, drop what follows. */
			out_put(m, p + start, i - start);
			start = i;
			m->trun = true;
			m->tmasked = false;
			s = 0;
		}
	}
	m->ts = s;
	if (start < n)
		out_put(m, p + start, n - start);
}

static void
tok_mask(struct masker *m)
{
	if (m->tok != NULL && m->trun) {
		/* Part of the run being replaced. */
		if (!m->tmasked)
			out_put(m, MASK_TEXT, MASK_LEN);
		m->tmasked = true;
		return;
	}
	m->ts = 0;
	out_put(m, MASK_TEXT, MASK_LEN);
}

static bool
url_key_secret(const char *key, size_t len)
{
	size_t	 i;

	for (i = 0; i < sizeof(url_keys) / sizeof(url_keys[0]); i++) {
		if (url_keys[i].len == len &&
		    memcmp(url_keys[i].s, key, len) == 0)
			return true;
	}
	return false;
}

/*
 * URL stage.  The mask is printed as soon as "?key=" is complete: the value
 * is dropped anyway, so printing it at the value's end would be the same
 * text, later.  An empty value is masked too (gitlab-runner does).  Only
 * ASCII white space and controls end a value; a Unicode space is taken as
 * part of it, which masks more, never less.
 */
static void
url_feed(struct masker *m, const uint8_t *p, size_t n)
{
	size_t			 i = 0, start = 0;
	uint8_t			 c;

	if (!m->url) {
		tok_feed(m, p, n);
		return;
	}
	while (i < n) {
		switch (m->ustate) {
		case URL_IDLE:
			i = (size_t)(find2(p + i, p + n, '?', '&') - p);
			if (i < n) {
				m->ustate = URL_KEY;
				m->keylen = 0;
				i++;
			}
			break;
		case URL_KEY:
			c = p[i++];
			if (c == '?' || c == '&')
				m->keylen = 0;
			else if (c == '=') {
				m->ustate = URL_IDLE;
				if (url_key_secret(m->key, m->keylen)) {
					tok_feed(m, p + start, i - start);
					tok_mask(m);
					start = i;
					m->ustate = URL_VALUE;
				}
			} else if (m->keylen == URL_KEY_MAX)
				m->ustate = URL_IDLE;	/* too long a key */
			else {
				if (c >= 'A' && c <= 'Z')
					c += 'a' - 'A';
				m->key[m->keylen++] = (char)c;
			}
			break;
		case URL_VALUE:
			while (i < n && !url_end(p[i]))
				i++;
			start = i;
			/* The byte that ends it is looked at again. */
			if (i < n)
				m->ustate = URL_IDLE;
			break;
		}
	}
	if (start < n)
		tok_feed(m, p + start, n - start);
}

static void
url_mask(struct masker *m)
{
	if (m->url) {
		if (m->ustate == URL_VALUE)
			return;		/* inside a value already masked */
		m->ustate = URL_IDLE;
	}
	tok_mask(m);
}

/* Hand the stream bytes [from, to) on; they lie in hold[], then in d. */
static void
phr_emit(struct masker *m, const uint8_t *d, uint64_t from, uint64_t to)
{
	uint64_t	 e;

	if (from < m->dbase) {
		e = to < m->dbase ? to : m->dbase;
		if (from < e)
			url_feed(m, m->hold + (from - m->hbase), e - from);
		from = e;
	}
	if (from < to)
		url_feed(m, d + (from - m->dbase), to - from);
}

/* The length of the longest match seen starting at position j, or 0. */
static uint32_t
phr_cand(const struct masker *m, uint64_t j)
{
	size_t	 k = (size_t)j & m->ringmask;

	return m->ctag[k] == j + 1 ? m->clen[k] : 0;
}

/*
 * Note every match ending here that starts where a match may still be
 * chosen.  A start seen again later gets the longer match.
 */
static void
phr_record(struct masker *m)
{
	const struct ac	*a = m->phr;
	uint32_t	 t;
	uint64_t	 j;
	size_t		 k;

	for (t = a->out[m->ps]; t != 0; t = a->out[a->fail[t]]) {
		j = m->pos - a->depth[t];
		if (j < m->cur)
			continue;	/* inside a match already chosen */
		k = (size_t)j & m->ringmask;
		m->ctag[k] = j + 1;
		m->clen[k] = a->depth[t];
		if (!m->has_cand || j > m->last_cand)
			m->last_cand = j;
		m->has_cand = true;
	}
}

/* The match at cur is final: hand on what precedes it, then the mask. */
static void
phr_commit(struct masker *m, const uint8_t *d, uint32_t len)
{
	phr_emit(m, d, m->emitted, m->cur);
	url_mask(m);
	m->cur += len;
	m->emitted = m->cur;
}

/*
 * After a step into state m->ps: note the matches ending here, then move
 * cur on.  No match can start before the window (the state's string), so
 * a start before it is decided: a plain byte or, with a match, the final
 * longest one there, which is also the leftmost left.  A start at the
 * window's first byte is final too when the state has no children.
 */
static void
phr_post(struct masker *m, const uint8_t *d)
{
	const struct ac	*a = m->phr;
	uint32_t	 s = m->ps, len;
	uint64_t	 ws = m->pos - a->depth[s];

	if (a->out[s] != 0)
		phr_record(m);
	for (;;) {
		if (m->has_cand && m->last_cand < m->cur)
			m->has_cand = false;
		if (!m->has_cand) {
			if (m->cur < ws)
				m->cur = ws;
			return;
		}
		if ((len = phr_cand(m, m->cur)) != 0) {
			if (m->cur < ws || (m->cur == ws &&
			    a->child[s] == a->child[s + 1])) {
				phr_commit(m, d, len);
				continue;
			}
			return;		/* a longer one may still come */
		}
		if (m->cur >= ws)
			return;		/* a later start is pending */
		m->cur++;
	}
}

/* The common case: no match pending, a dense state. */
static void
phr_fast(struct masker *m, const uint8_t *d, size_t n)
{
	const struct ac	*a = m->phr;
	const uint32_t	*delta = a->delta;
	const uint8_t	*cls = a->cls;
	const uint8_t	*p = d + (m->pos - m->dbase), *e = d + n;
	const uint8_t	*next[FIND_MAX] = { NULL };
	unsigned	 sh = a->shift;
	uint32_t	 s = m->ps, t;
	uint64_t	 ws;

	while (p < e) {
		if (s == 0 && (p = ac_skip(a, p, e, next)) == e)
			break;
		t = delta[((size_t)s << sh) + cls[*p++]];
		if (t & AC_SPECIAL) {
			m->ps = t & ~AC_SPECIAL;
			m->pos = m->dbase + (uint64_t)(p - d);
			phr_post(m, d);
			return;
		}
		s = t;
	}
	m->ps = s;
	m->pos = m->dbase + n;
	ws = m->pos - a->depth[s];
	if (m->cur < ws)
		m->cur = ws;
}

static void
phr_write(struct masker *m, const uint8_t *d, size_t n)
{
	const struct ac	*a = m->phr;
	uint64_t	 end, from;
	size_t		 keep = 0;

	m->dbase = m->hbase + m->holdlen;
	end = m->dbase + n;
	while (m->pos < end) {
		if (!m->has_cand && m->ps < a->ndense) {
			phr_fast(m, d, n);
			continue;
		}
		m->ps = ac_next_cls(a, m->ps, a->cls[d[m->pos - m->dbase]]);
		m->pos++;
		phr_post(m, d);
	}

	/* Hand on what is decided; hold [cur, end), at most the window. */
	phr_emit(m, d, m->emitted, m->cur);
	m->emitted = m->cur;
	if (m->cur < m->dbase) {
		keep = (size_t)(m->dbase - m->cur);
		memmove(m->hold, m->hold + (m->cur - m->hbase), keep);
	}
	from = m->cur > m->dbase ? m->cur - m->dbase : 0;
	if (n > from)
		memcpy(m->hold + keep, d + from, n - from);
	m->holdlen = keep + (size_t)(n - from);
	m->hbase = m->cur;
	m->dbase = end;
}

static void
phr_flush(struct masker *m)
{
	uint32_t	 len;

	m->dbase = m->hbase + m->holdlen;
	/* Nothing longer can come: every pending match is final. */
	while (m->has_cand && m->cur <= m->last_cand) {
		if ((len = phr_cand(m, m->cur)) != 0)
			phr_commit(m, NULL, len);
		else
			m->cur++;
	}
	phr_emit(m, NULL, m->emitted, m->dbase);
	m->ps = 0;
	m->has_cand = false;
	m->holdlen = 0;
	m->pos = m->cur = m->emitted = m->hbase = m->dbase;
}

/* Shorter first, then bytewise: the order of gitlab-runner's internal.Unique. */
static int
pattern_cmp_len(const void *a, const void *b)
{
	const struct pattern	*x = a, *y = b;

	if (x->len != y->len)
		return (x->len > y->len) - (x->len < y->len);
	return memcmp(x->p, y->p, x->len);
}

/*
 * Trimmed, non-empty patterns, in the order given.  With ranked, as
 * gitlab-runner ranks token prefixes: sorted shortest first, duplicates
 * dropped, then cut at max, so which ones count does not depend on the
 * order they came in.
 */
static struct pattern *
collect(const char *const *v, size_t n, size_t max, bool ranked, size_t *np)
{
	struct pattern	*pats;
	struct pattern	 t;
	size_t		 i, k = 0, u, total = 0;

	pats = xreallocarray(NULL, n > 0 ? n : 1, sizeof *pats);
	for (i = 0; i < n; i++) {
		if (v[i] == NULL)
			continue;
		t = trim(v[i]);
		if (t.len == 0 || t.len > PATTERN_BYTES_MAX - total)
			continue;
		total += t.len;
		pats[k++] = t;
	}
	if (ranked && k > 0) {
		qsort(pats, k, sizeof *pats, pattern_cmp_len);
		for (i = 1, u = 1; i < k; i++)
			if (pattern_cmp_len(&pats[u - 1], &pats[i]) != 0)
				pats[u++] = pats[i];
		k = u;
	}
	*np = k < max ? k : max;
	return pats;
}

/* A masker for the rules, at the start of a stream. */
static struct masker *
masker_start(struct rules *r, bool url_params)
{
	struct masker	*m;
	size_t		 ring;

	m = xcalloc(1, sizeof *m);
	m->rules = r;
	r->refs++;
	m->phr = r->phr;
	m->tok = r->tok;
	m->url = url_params;
	if (m->phr != NULL) {
		m->hold = xmalloc(m->phr->maxlen);
		/* The window is at most maxlen, and one byte is being added. */
		for (ring = 4; ring < m->phr->maxlen + 2; ring *= 2)
			;
		m->ringmask = ring - 1;
		m->ctag = xcalloc(ring, sizeof *m->ctag);
		m->clen = xcalloc(ring, sizeof *m->clen);
	}
	return m;
}

struct masker *
masker_new(const char *const *phrases, size_t n_phrases,
    const char *const *prefixes, size_t n_prefixes, bool url_params)
{
	struct rules	*r;
	struct pattern	*pats;
	size_t		 np;

	r = xcalloc(1, sizeof *r);

	/* Duplicates among phrases go when the sorted trie is built. */
	pats = collect(phrases, phrases != NULL ? n_phrases : 0, SIZE_MAX,
	    false, &np);
	if (np > 0)
		r->phr = ac_build(pats, np);
	free(pats);

	/* The PREFIXES_MAX shortest distinct prefixes count (protocol.md 6.5). */
	pats = collect(prefixes, prefixes != NULL ? n_prefixes : 0,
	    PREFIXES_MAX, true, &np);
	if (np > 0)
		r->tok = ac_build(pats, np);
	free(pats);
	return masker_start(r, url_params);
}

struct masker *
masker_clone(const struct masker *m)
{
	return masker_start(m->rules, m->url);
}

void
masker_free(struct masker *m)
{
	if (m == NULL)
		return;
	if (--m->rules->refs == 0) {
		ac_free(m->rules->phr);
		ac_free(m->rules->tok);
		free(m->rules);
	}
	free(m->hold);
	free(m->ctag);
	free(m->clen);
	free(m);
}

int
masker_write(struct masker *m, const char *data, size_t len, struct buf *out)
{
	m->out = out;
	m->err = 0;
	m->dlo = 0;
	if (m->phr != NULL)
		phr_write(m, (const uint8_t *)data, len);
	else if (len > 0)
		url_feed(m, (const uint8_t *)data, len);
	m->out = NULL;
	return m->err;
}

int
masker_write_direct(struct masker *m, const char *data, size_t len,
    struct buf *out, const char **direct, size_t *direct_len)
{
	m->dlo = (uintptr_t)data;
	m->dhi = (uintptr_t)data + len;
	m->dir = NULL;
	m->ndir = 0;
	m->out = out;
	m->err = 0;
	if (len > 0 && m->phr != NULL)
		phr_write(m, (const uint8_t *)data, len);
	else if (len > 0)
		url_feed(m, (const uint8_t *)data, len);
	*direct = (const char *)m->dir;
	*direct_len = m->err == 0 ? m->ndir : 0;
	m->out = NULL;
	m->dlo = 0;
	return m->err;
}

int
masker_flush(struct masker *m, struct buf *out)
{
	m->out = out;
	m->err = 0;
	if (m->phr != NULL)
		phr_flush(m);
	/*
	 * A URL value or token run open at the end was masked when it
	 * began; partial keys and prefixes were printed as they came.
	 */
	m->ustate = URL_IDLE;
	m->ts = 0;
	m->trun = false;
	m->out = NULL;
	return m->err;
}

const char *const *
masker_default_prefixes(bool all_default_tokens)
{
	return all_default_tokens ? redact_token_prefixes : default_prefixes;
}
