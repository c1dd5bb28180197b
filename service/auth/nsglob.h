/* nsglob: entry namespaces, keys and the `*` patterns over them (see
 * protos/memory/v1/entries.proto). A namespace is three `:`-separated
 * segments of [A-Za-z0-9_.-]{1,64}; in a pattern `*` matches any run of
 * characters inside one segment (never a `:`); in a key pattern `*` matches
 * any run. Nothing else is special. Pure functions, no allocation unless
 * stated, so tests and fuzzers can drive them with bytes. */
#ifndef MEMORYD_AUTH_NSGLOB_H
#define MEMORYD_AUTH_NSGLOB_H
#include <stddef.h>

#define NSGLOB_SEGMENT_MAX 64
#define NSGLOB_NAMESPACE_MAX (3 * NSGLOB_SEGMENT_MAX + 2)

#define NSGLOB_KEY_MAX 512

/* 1 if glob (a namespace pattern) matches namespace ns. Both
 * NUL-terminated; an invalid glob matches nothing. */
int nsglob_match(const char *glob, const char *ns);

/* Validation. Each returns 0 when s[0..len) is valid, else -1 with a
 * reason in why (e.g. "segment 2 is empty", "character '%' is not
 * allowed in segment 1") for an INVALID_ARGUMENT message.
 * - namespace: exactly three `:`-separated segments of
 *   [A-Za-z0-9_.-]{1,64};
 * - pattern: the same, where segments may also contain `*`;
 * - key: 1..512 bytes of valid UTF-8 without control characters (C0, DEL,
 *   C1) and without `*`;
 * - key pattern: the same, `*` allowed. */
int nsglob_check_namespace(const char *s, size_t len, char *why, size_t whylen);
int nsglob_check_pattern(const char *s, size_t len, char *why, size_t whylen);
int nsglob_check_key(const char *s, size_t len, char *why, size_t whylen);
int nsglob_check_key_pattern(const char *s, size_t len, char *why, size_t whylen);

/* 1 if every namespace pattern inner can match is also matched by pattern
 * outer (exact language containment, segment by segment: outer must match
 * inner's text with each of inner's `*` consumable only by a `*` of
 * outer). Access.Attenuate checks each child glob against each parent glob
 * on its own, so coverage by a union of parent globs is not recognised
 * (conservative). Invalid patterns cover nothing. */
int nsglob_covers(const char *outer, const char *inner);

/* 1 if the pattern has no `*` (an equality predicate will do). */
int nsglob_is_literal(const char *pattern);

/* Translates a namespace or key pattern into a SQL LIKE pattern for
 * `LIKE $n ESCAPE '\'`: `*` becomes `%`; `%`, `_` and `\` are escaped.
 * Writes a NUL-terminated result; returns its length, or -1 when out is
 * too small (2 * len + 1 always suffices). For namespace patterns `%` may
 * in principle span a `:`, but it cannot produce a false match: stored
 * namespaces and patterns both have exactly two literal colons, so no `%`
 * can absorb one. */
int nsglob_to_like(const char *pattern, size_t len, char *out, size_t outlen);

#endif
