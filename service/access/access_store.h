/* access_store: the token store behind the Access service: the
 * issued_tokens table, which records every token memoryd minted (by
 * Attenuate) with its tenant, principal and ancestors, so Revoke can tell
 * a caller's descendants from other tokens. Statement builders and result
 * decoders only (parameterized SQL): the caller runs the statements on
 * the event loop (tier_sql.h's tier_async) with the call's deadline. No
 * gRPC, no I/O. */
#ifndef MEMORYD_ACCESS_ACCESS_STORE_H
#define MEMORYD_ACCESS_ACCESS_STORE_H

#include <libpq-fe.h>

#include "service/auth/jwt.h"
#include "service/core/arena.h"
#include "service/store/pgq.h"

/* Appends the INSERT that records a minted token (its jti, parent,
 * ancestors, tenant, principal and expiry) to b. The claims' strings are
 * borrowed until the statement has run; the ancestors' literal goes in ar.
 * Returns 0, or -1 when out of memory. */
int access_store_record_sql(pgq_sql *b, arena *ar, const jwt_claims *minted);

/* Appends the SELECT of token target's ancestry as seen from a caller
 * (token ancestor of tenant) to b: one row that access_store_ancestry
 * decodes. */
void access_store_ancestry_sql(pgq_sql *b, const char *target, const char *ancestor,
                               const char *tenant);

/* *descends = 1 if target was minted in tenant with ancestor among its
 * ancestors (at any depth); *foreign = 1 if it was minted for another
 * tenant. Returns 0, or -1 when r is not the statement's answer. */
int access_store_ancestry(const PGresult *r, int *descends, int *foreign);

#endif
