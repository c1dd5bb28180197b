/* revocation: the set of revoked token ids every call is checked against.
 * Revocations live in PostgreSQL (revoked_tokens) so every replica honours
 * them; each replica keeps the set in memory and a background thread
 * reloads it whenever the table's count or highest sequence number changes
 * (revocations are rare, lookups happen on every call). A revocation made
 * through this replica applies locally at once. */
#ifndef MEMORYD_AUTH_REVOCATION_H
#define MEMORYD_AUTH_REVOCATION_H
#include "service/store/pg_pool.h"
#include "service/store/pgq.h"
#include <stddef.h>
#include <stdint.h>

typedef struct revocation revocation;

/* Loads the set from pg (borrowed; must outlive the set) and starts the
 * refresh thread polling every poll_ms. pg NULL = a local-only set (unit
 * tests). Failing to load at start is an error: serving while unable to
 * know which tokens are revoked would let them through. The thread also
 * prunes, at start and every REVOCATION_PRUNE_MS, the revocations and the
 * issued tokens that expired more than skew_s ago (tokens are accepted up
 * to skew_s past exp). On 0 *out is owned by the caller (revocation_free). */
#define REVOCATION_PRUNE_MS 60000
int revocation_create(pg_pool *pg, int poll_ms, int skew_s, revocation **out, char *err,
                      size_t errlen);
/* Stops the thread and frees the set; accepts NULL. */
void revocation_free(revocation *r);

/* 1 if token jti of tenant is revoked. A revocation belongs to the tenant
 * it was made in: another tenant's token with the same jti is not
 * revoked. Lock-free while nothing is revoked. */
int revocation_contains(revocation *r, const char *tenant, const char *jti);

/* Revoking jti of tenant, in two steps so the statement can run wherever the caller
 * runs its statements (the event loop): revocation_store_sql appends the
 * statement that stores it in PostgreSQL (the first revocation wins, later
 * ones keep its time; the strings are borrowed until it has run), and
 * revocation_stored takes that statement's answer: *revoked_at_s gets the
 * stored time in Unix seconds and jti joins the local set at once. Returns
 * 0, or -1 when the answer is not the statement's (nothing changed then). */
/* exp_s: the revoked token's expiry (Unix seconds) when the caller knows
 * it (its own token); 0 = take it from issued_tokens (tokens memoryd
 * minted), else unknown (kept for good). */
void revocation_store_sql(pgq_sql *b, const char *jti, const char *by, const char *tenant,
                          const char *reason, int64_t exp_s);
int revocation_stored(revocation *r, const PGresult *res, const char *tenant, const char *jti,
                      int64_t *revoked_at_s);

/* Number of revoked ids currently known. */
size_t revocation_count(revocation *r);

#endif
