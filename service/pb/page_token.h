/* page_token: the opaque page tokens of List/Query methods (common.proto
 * "Pagination"). A token is a keyset cursor — a few text fields, e.g. the
 * sort key and id of the last item returned — sealed with a digest of what
 * it is bound to: a domain naming the method, and binding strings (tenant,
 * principal, a digest of the request's filters). A token presented by
 * another caller, with other filters, or altered is refused. The cursor is
 * not secret (the caller saw that item), but it reaches SQL, so the seal is
 * a MAC (HMAC-SHA-256) under a key only the servers know: the deployment's
 * shared key (page_token_set_key, from store/server_secret), so a token
 * opens on every replica and a forged cursor never reaches a query. No I/O,
 * so tests and fuzzers can feed them bytes. */
#ifndef MEMORYD_PB_PAGE_TOKEN_H
#define MEMORYD_PB_PAGE_TOKEN_H

#include <stddef.h>

#include "service/core/arena.h"

#define PAGE_TOKEN_MAX 4096       /* characters; longer input is refused unread */
#define PAGE_TOKEN_FIELD_MAX 1024 /* bytes per cursor field */
#define PAGE_TOKEN_FIELDS_MAX 4
#define PAGE_TOKEN_KEY_LEN 32

/* The seal's key, for the whole process: call once at start-up, before any
 * token is made or opened. Until then (tests, tools) a random key of this
 * process seals them. */
void page_token_set_key(const unsigned char key[PAGE_TOKEN_KEY_LEN]);

/* A token for the cursor fields[0..nfields) in arena a; NULL when out of
 * memory, a field is longer than PAGE_TOKEN_FIELD_MAX or holds a NUL, or
 * nfields is 0 or over PAGE_TOKEN_FIELDS_MAX. */
char *page_token_encode(arena *a, const char *domain, const char *const *bind, size_t nbind,
                        const char *const *fields, size_t nfields);

/* Opens token: on 0 fields[0..nfields) (in arena a) are the cursor. -1
 * when the token is malformed, altered, has another field count, or is
 * bound to another domain or binding. */
int page_token_decode(arena *a, const char *domain, const char *const *bind, size_t nbind,
                      const char *token, const char **fields, size_t nfields);

#endif
