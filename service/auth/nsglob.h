/* nsglob: entry namespaces, keys and the `*` patterns over them (see
 * protos/memory/v1/entries.proto). A namespace is three `:`-separated
 * segments of [A-Za-z0-9_.-]{1,64}; in a namespace pattern `*` matches any
 * run of characters inside one segment (never a `:`); in a key pattern `*`
 * matches any run. Nothing else is special. Pure functions without
 * allocation or global state, so tests and fuzzers can drive them with
 * bytes; every function is safe on any NUL-terminated (or s[0..len)) input,
 * valid or not. */
#ifndef MEMORYD_AUTH_NSGLOB_H
#define MEMORYD_AUTH_NSGLOB_H
#include <stddef.h>

#define NSGLOB_SEGMENT_MAX 64                             /* bytes per segment, `*` included */
#define NSGLOB_NAMESPACE_MAX (3 * NSGLOB_SEGMENT_MAX + 2) /* bytes per namespace or pattern */
#define NSGLOB_KEY_MAX 512                                /* bytes per key or key pattern */

/* ---- validation ----
 * What counts as valid:
 * - namespace: exactly three `:`-separated segments, each 1..64 bytes of
 *   [A-Za-z0-9_.-];
 * - namespace pattern: the same, where segments may also contain `*` (a
 *   segment may be just `*`; `*` counts towards the 64);
 * - key: 1..512 bytes of valid UTF-8 (no overlong forms, surrogates or
 *   code points above U+10FFFF), without control characters (C0 including
 *   NUL, DEL, C1) and without `*`;
 * - key pattern: the same with `*` allowed. An empty pattern is invalid;
 *   callers that treat "" as "everything" substitute `*:*:*` / `*` first.
 * s[0..len) need not be NUL-terminated; an embedded NUL makes it invalid.
 *
 * nsglob_check_*: 0 when valid, else -1 with a one-line reason written to
 * why (NUL-terminated, truncated to whylen), e.g. "namespace: segment 2 is
 * empty", "namespace: character '%' is not allowed in segment 1", "key:
 * control character U+000A at byte 3". The reason starts with what was
 * checked and ": ", so API messages can name their own field instead. why
 * may be NULL (with any whylen) when only the verdict matters.
 *
 * nsglob_valid_*: the same verdicts as 1 (valid) / 0 (invalid). */
int nsglob_check_namespace(const char *s, size_t len, char *why, size_t whylen);
int nsglob_check_pattern(const char *s, size_t len, char *why, size_t whylen);
int nsglob_check_key(const char *s, size_t len, char *why, size_t whylen);
int nsglob_check_key_pattern(const char *s, size_t len, char *why, size_t whylen);

int nsglob_valid_namespace(const char *s, size_t len);
int nsglob_valid_pattern(const char *s, size_t len);
int nsglob_valid_key(const char *s, size_t len);
int nsglob_valid_key_pattern(const char *s, size_t len);

/* ---- matching ----
 * 1 if glob is a valid namespace pattern, ns a valid namespace and glob
 * matches ns segment by segment; else 0. Both NUL-terminated. An invalid
 * glob matches nothing (so a bad `ns` claim in a token grants nothing, as
 * in the SQL the Entries store builds), and nothing matches an invalid
 * namespace. */
int nsglob_match(const char *glob, const char *ns);

/* 1 if pattern is a valid key pattern, key a valid key and pattern matches
 * key (`*` = any run, possibly empty, possibly spanning several UTF-8
 * characters); else 0. Both NUL-terminated. Byte-wise matching equals
 * character-wise matching here because both sides are valid UTF-8 and
 * every literal is a whole character. */
int nsglob_key_match(const char *pattern, const char *key);

/* ---- containment ----
 * 1 if both are valid namespace patterns and every namespace inner matches
 * is also matched by outer; else 0 (invalid patterns cover nothing and are
 * covered by nothing). Exact, not a heuristic: segment by segment, outer
 * must match inner's text with each `*` of inner consumable only by a `*`
 * of outer (so `a*` covers `ab*` and `a*b` covers `a*xb`, but `*b` does
 * not cover `*` and `a:b:c` does not cover `a:b:*`); the 64-byte segment
 * limit never changes the answer (see nsglob.c). Access.Attenuate checks
 * each child glob against each parent glob on its own, so a child glob
 * covered only by the union of several parent globs is refused (`x*:y:z`
 * under `x:y:z` plus `xa*:y:z`, `xb*:y:z`, ... for every character):
 * conservative, never too wide. */
int nsglob_covers(const char *outer, const char *inner);

/* ---- SQL ----
 * 1 if the (NUL-terminated) pattern has no `*`, so an equality predicate
 * will do and can use a plain index; 0 otherwise. Says nothing about
 * validity. */
int nsglob_is_literal(const char *pattern);

/* Translates a namespace or key pattern s[0..len) into a SQL LIKE pattern
 * for `col LIKE $n ESCAPE '\'` (passed as a bind parameter, never spliced
 * into SQL text): `*` becomes `%`; `%`, `_` and `\` are escaped with `\`;
 * every other byte (`'` included) is copied. Writes a NUL-terminated result
 * to out and returns its length (len..2*len), or -1 when outlen is too
 * small (2 * len + 1 always suffices); on -1 out's contents are
 * unspecified. Validate the pattern first: the translation is only
 * claimed to match what nsglob_match / nsglob_key_match match for valid
 * patterns against valid stored values.
 *
 * Why `%` may stand for a namespace pattern's `*` although `%` can cross a
 * `:` and `*` cannot: a valid pattern and a valid stored namespace each
 * contain exactly two `:`, both literal. The pattern's two colons must be
 * matched by two distinct colons of the namespace, in order, so they are
 * matched by exactly the namespace's two colons, and no `%` can absorb one.
 * Key patterns need no such argument: there `*` and `%` both span
 * anything. `_` is a valid namespace character, hence the escaping. */
int nsglob_to_like(const char *s, size_t len, char *out, size_t outlen);

#endif
