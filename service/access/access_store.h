/* access_store: the token store behind the Access service: the
 * issued_tokens table, which records every token memoryd minted (by
 * Attenuate) with its tenant, principal and ancestors, so Revoke can tell
 * a caller's descendants from other tokens. On pgq (parameterized
 * statements, statement_timeout from the call's deadline, connection loss
 * as STATUS_EUNAVAILABLE). No gRPC. */
#ifndef MEMORYD_ACCESS_ACCESS_STORE_H
#define MEMORYD_ACCESS_ACCESS_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "service/auth/jwt.h"
#include "service/store/pg_pool.h"

/* Each returns STATUS_OK or a STATUS_E* code with the reason in err;
 * deadline_ms is CLOCK_MONOTONIC (INT64_MAX: none). */

/* Records a minted token (its jti, parent, ancestors, tenant, principal and
 * expiry). */
int access_store_record(pg_pool *pg, int64_t deadline_ms, const jwt_claims *minted, char *err,
                        size_t errlen);

/* *yes = 1 if token target was minted in tenant with ancestor among its
 * ancestors (at any depth). */
int access_store_descends(pg_pool *pg, int64_t deadline_ms, const char *target,
                          const char *ancestor, const char *tenant, int *yes, char *err,
                          size_t errlen);

/* *yes = 1 if token target was minted for a tenant other than tenant. */
int access_store_other_tenant(pg_pool *pg, int64_t deadline_ms, const char *target,
                              const char *tenant, int *yes, char *err, size_t errlen);

#endif
