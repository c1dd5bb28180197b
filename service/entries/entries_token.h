/* entries_token: List's opaque page tokens. A token is a keyset cursor
 * (the last namespace and key returned) sealed with a digest of what it is
 * bound to: the caller (tenant, principal) and the request's filters. A
 * token presented by another caller or with other filters, or altered, is
 * refused. The cursor is not secret (the caller saw that entry); the read
 * diode is applied in SQL on every page, so a forged position could only
 * start a listing somewhere the caller may list anyway.
 * Pure functions (no I/O), so tests and fuzzers can feed them bytes. */
#ifndef MEMORYD_ENTRIES_ENTRIES_TOKEN_H
#define MEMORYD_ENTRIES_ENTRIES_TOKEN_H

#include <stddef.h>

#include "service/core/arena.h"

#define ENTRIES_TOKEN_MAX 2048 /* characters; longer input is refused unread */

/* What a token is bound to. All strings NUL-terminated, never NULL. */
typedef struct entries_token_binding {
    const char *tenant;
    const char *principal;
    const char *ns_pattern;
    const char *key_pattern;
} entries_token_binding;

/* A token for the cursor (ns, key) in arena a; NULL when out of memory or
 * when ns/key are too long to encode (ns <= 255 bytes, key <= 1024). */
char *entries_token_encode(arena *a, const entries_token_binding *b, const char *ns,
                           const char *key);

/* Opens token: on 0 *ns and *key (in arena a) are the cursor. -1 when the
 * token is malformed, altered or bound to something else. */
int entries_token_decode(arena *a, const entries_token_binding *b, const char *token,
                         const char **ns, const char **key);

#endif
