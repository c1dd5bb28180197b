/* tier_page: how List and Query methods page (common.proto "Pagination"):
 * page sizes with the API's defaults and bounds, page tokens sealed to the
 * method, the caller and the request's filters (pb/page_token.h), and the
 * byte budget an answer must stay within. */
#ifndef MEMORYD_TIER_TIER_PAGE_H
#define MEMORYD_TIER_TIER_PAGE_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#include "service/auth/principal.h"
#include "service/rpc/rpc.h"

#define TIER_PAGE_DEFAULT 50 /* page_size 0 */
#define TIER_PAGE_MAX 1000   /* larger page sizes are cut to this */

/* page_size as the page length: 0 = TIER_PAGE_DEFAULT, above
 * TIER_PAGE_MAX = TIER_PAGE_MAX; negative is INVALID_ARGUMENT. */
grpc_status_code tier_page_size(rpc_call *call, int32_t asked, int *out);

/* What a method's page tokens are bound to: the method (the call's path),
 * the caller (tenant, principal) and a digest of the request with its
 * page_token and page_size cleared, so a token is refused when presented
 * by another caller, to another method or with other filters. */
typedef struct tier_page {
    const char *domain;
    const char *bind[3];
} tier_page;

/* Binds pg for req (the call's request message, which has page_token and
 * page_size fields). */
grpc_status_code tier_page_bind(rpc_call *call, const principal *p, const ProtobufCMessage *req,
                                tier_page *pg);

/* Opens a page token: *present = 0 when token is empty (the first page);
 * else fields[0..n) (in the arena) are its cursor. A token that is
 * altered, bound to something else, of another shape, or (nonempty) with
 * an empty field is INVALID_ARGUMENT naming page_token. */
grpc_status_code tier_page_open(rpc_call *call, const tier_page *pg, const char *token,
                                const char **fields, size_t n, int nonempty, int *present);

/* tier_page_open of a two-field cursor straight into where it goes:
 * *first and *second are set when token is present, left as they are on
 * the first page. */
grpc_status_code tier_page_resume(rpc_call *call, const tier_page *pg, const char *token,
                                  const char **first, const char **second, int nonempty);

/* The INVALID_ARGUMENT answer to a page token that opened but whose
 * cursor the method cannot use. */
grpc_status_code tier_page_refuse(rpc_call *call, const tier_page *pg);

/* The token for the cursor fields[0..n) in the arena; NULL when out of
 * memory or a field is too long to carry (the caller answers oom). */
char *tier_page_seal(rpc_call *call, const tier_page *pg, const char *const *fields, size_t n);

/* A kind of record a page answer holds: its size in bytes, how one is
 * rendered and how it is named in the audit trail (both in the arena;
 * NULL: out of memory). */
typedef struct tier_page_kind {
    size_t size;
    ProtobufCMessage *(*render)(arena *a, const void *item);
    const char *(*name)(arena *a, const void *item);
} tier_page_kind;

/* Renders records items[0..n) of kind k into an answer's repeated field while the answer
 * stays within max encoded bytes (the first always goes: an answer is
 * never empty for lack of room), naming each one returned in the audit
 * trail: *out (in the call's arena) and *nout; *cut when some were left
 * out. OK, or RESOURCE_EXHAUSTED when out of memory. */
grpc_status_code tier_page_fill(rpc_call *call, const tier_page_kind *k, const void *items,
                                size_t n, size_t max, ProtobufCMessage ***out, size_t *nout,
                                int *cut);

#endif
