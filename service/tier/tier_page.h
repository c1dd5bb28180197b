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

/* The INVALID_ARGUMENT answer to a page token that opened but whose
 * cursor the method cannot use. */
grpc_status_code tier_page_refuse(rpc_call *call, const tier_page *pg);

/* The token for the cursor fields[0..n) in the arena; NULL when out of
 * memory or a field is too long to carry (the caller answers oom). */
char *tier_page_seal(rpc_call *call, const tier_page *pg, const char *const *fields, size_t n);

/* The answer's byte budget: adds item i's encoded size to *used and
 * returns 1 while the answer stays within max; the first item always
 * fits (an answer is never empty for lack of room). */
int tier_page_fits(size_t *used, const ProtobufCMessage *item, size_t i, size_t max);

#endif
