/*
 * Streaming masking of secrets in job output (protocol.md 6.5, steps 1-3).
 *
 * A job prints what it likes, in writes of any size; secrets must never
 * reach GitLab, not even a prefix of one.  The masker sees the output as one
 * stream, in order, and hands on only bytes that can no longer turn out to
 * be part of a secret, so a secret split across any number of writes is
 * still replaced, and nothing of it is emitted early.
 *
 * Three kinds of rules, applied in this order of precedence:
 *   1. phrases: the values of masked variables, replaced by "[MASKED]";
 *      where two phrases could match at the same place the longest wins, and
 *      the cost per byte does not grow with the number of phrases
 *      (Aho-Corasick);
 *   2. URL parameters: after "?key=" or "&key=" for the keys private_token,
 *      authenticity_token, rss_token, x-amz-signature, x-amz-credential,
 *      x-amz-security-token (case-insensitive), the value up to the next
 *      '?', '&', white space or control character becomes "[MASKED]";
 *   3. token prefixes: "<prefix><run of [0-9A-Za-z._=-]>" keeps the prefix
 *      and the run becomes "[MASKED]" (glpat-abc -> glpat-[MASKED]).
 *
 * Ownership: the masker copies every phrase and prefix it is given.  The
 * compiled rules (the automata, the bulk of a masker's memory) are shared
 * between a masker and its clones, read only, and freed with the last of
 * them; each masker has its own stream state.  Maskers are not thread-safe,
 * a masker and its clones included: use them from one thread.
 */
#ifndef RUNNER_MASK_H
#define RUNNER_MASK_H

#include <stdbool.h>
#include <stddef.h>

struct buf;
struct masker;

/*
 * phrases: the masked values (trimmed of white space, empty ones and
 * duplicates dropped by the masker).  prefixes: the token prefixes, in any
 * order; NULL for none.  They are ranked as gitlab-runner's logger ranks
 * them: trimmed, shortest first (then bytewise), duplicates dropped, and
 * only the first 15 count.  url_params: apply rule 2.
 */
struct masker	*masker_new(const char *const *phrases, size_t n_phrases,
		    const char *const *prefixes, size_t n_prefixes, bool url_params);
/*
 * A masker with m's rules and a fresh stream (what m holds back is not
 * carried over): the same result as masker_new() with m's arguments, for
 * a few bytes of its own.  m and the clone may be freed in either order.
 */
struct masker	*masker_clone(const struct masker *m);
void		 masker_free(struct masker *m);

/*
 * Feed len bytes; append to out what is now safe to send.  Returns 0, or
 * -ENOSPC if out is full (out then holds what fitted; the rest is lost, as
 * the caller's cap says).
 */
int		 masker_write(struct masker *m, const char *data, size_t len, struct buf *out);
/*
 * The same, without copying what goes on as it came: what is safe to
 * send is out's new bytes, then the *direct_len bytes at *direct, which
 * are data's own (0 of them when something was masked at the end, or
 * out filled up).  out's cap does not count them.
 */
int		 masker_write_direct(struct masker *m, const char *data, size_t len,
		    struct buf *out, const char **direct, size_t *direct_len);
/* The stream ended: append everything held back (partial matches are not secrets). */
int		 masker_flush(struct masker *m, struct buf *out);

/*
 * The prefixes gitlab-runner masks: glpat- always, and with
 * FF_MASK_ALL_DEFAULT_TOKENS the other GitLab token prefixes.  Returns a
 * static NULL-terminated list.
 */
const char *const *masker_default_prefixes(bool all_default_tokens);

#endif
