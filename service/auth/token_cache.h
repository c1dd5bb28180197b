/* token_cache: verified tokens kept until they expire, so the hot path
 * verifies an Ed25519 signature once per token instead of once per call.
 * Keyed by the exact token bytes (found through a randomly seeded hash,
 * then compared whole); sharded so worker threads rarely share a
 * lock; bounded, evicting the oldest insertion of a shard when full. */
#ifndef MEMORYD_AUTH_TOKEN_CACHE_H
#define MEMORYD_AUTH_TOKEN_CACHE_H
#include "service/auth/principal.h"
#include <stddef.h>
#include <stdint.h>

typedef struct token_cache token_cache;

/* Holds at most max tokens (at least one per shard). NULL on OOM. */
token_cache *token_cache_create(size_t max);
/* Drops every entry's principal reference; accepts NULL. */
void token_cache_free(token_cache *tc);

/* The principal cached for token[0..len) with a new reference the caller
 * must release, or NULL when absent or no longer valid at now_s (an entry
 * past its valid_until is removed). */
principal *token_cache_get(token_cache *tc, const char *token, size_t len, int64_t now_s);
/* Caches token -> p until valid_until (Unix seconds; exp + allowed skew).
 * Takes its own reference on p; the caller keeps its own. Replaces an
 * existing entry for the same token. Silently does nothing on OOM. */
void token_cache_put(token_cache *tc, const char *token, size_t len, principal *p,
                     int64_t valid_until);
size_t token_cache_count(token_cache *tc);
/* Drops every entry (a key left the key set: its tokens must be verified
 * again, and fail). */
void token_cache_clear(token_cache *tc);

#endif
