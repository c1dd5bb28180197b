/* revocation: the set of revoked token ids every call is checked against.
 * Revocations live in PostgreSQL (revoked_tokens) so every replica honours
 * them; each replica keeps the set in memory and a background thread
 * reloads it whenever the table's count or highest sequence number changes
 * (revocations are rare, lookups happen on every call). A revocation made
 * through this replica applies locally at once. */
#ifndef MEMORYD_AUTH_REVOCATION_H
#define MEMORYD_AUTH_REVOCATION_H
#include "service/store/pg_pool.h"
#include <stddef.h>
#include <stdint.h>

typedef struct revocation revocation;

/* Loads the set from pg (borrowed; must outlive the set) and starts the
 * refresh thread polling every poll_ms. pg NULL = a local-only set (unit
 * tests). Failing to load at start is an error: serving while unable to
 * know which tokens are revoked would let them through. On 0 *out is owned
 * by the caller (revocation_free). */
int revocation_create(pg_pool *pg, int poll_ms, revocation **out, char *err, size_t errlen);
/* Stops the thread and frees the set; accepts NULL. */
void revocation_free(revocation *r);

/* 1 if jti is revoked. Lock-free while nothing is revoked. */
int revocation_contains(revocation *r, const char *jti);

/* Revokes jti: stored in Postgres (first revocation wins, later ones keep
 * its time) and added to the local set. *revoked_at_s receives the stored
 * time in Unix seconds. Returns 0, or -1 with err when Postgres fails
 * (nothing changed then). */
int revocation_add(revocation *r, const char *jti, const char *by, const char *tenant,
                   const char *reason, int64_t deadline_ms, int64_t *revoked_at_s, char *err,
                   size_t errlen);

/* Number of revoked ids currently known. */
size_t revocation_count(revocation *r);

#endif
