/* audit_service: the memory.v1.Audit service over the audit trail
 * (audit.h): Audit.List pages the trail (the read diode in its WHERE
 * clause, keyset pages, on pgq), Audit.Watch streams rows from every
 * replica as they are written (a listener thread LISTENing on
 * memoryd_audit; see audit_watch.c). Both need the scope audit:read:
 * breadth :own sees the caller's own calls, :all the tenant's.
 *
 * The listener holds a dedicated libpq connection (not from the pool: it
 * sits in LISTEN for the life of the process), fetches announced rows,
 * fans them out to Watch streams and checks every ~1 s that each stream's
 * token is still live. A Watch client that stops reading does not hold up
 * the others, but its records wait in the runtime's send queue, which has
 * no bound yet. */
#ifndef MEMORYD_AUDIT_SERVICE_AUDIT_SERVICE_H
#define MEMORYD_AUDIT_SERVICE_AUDIT_SERVICE_H

#include <stddef.h>

#include "service/auth/principal.h"
#include "service/rpc/rpc.h"
#include "service/store/apg.h"
#include "service/store/pg_pool.h"
#include "service/tier/tier.h"

/* 0 if p's token is still usable; on -1 err says why and Watch ends the
 * stream with UNAUTHENTICATED. */
typedef int (*audit_check_live_fn)(void *ctx, const principal *p, char *err, size_t errlen);

/* Zero fields take the default shown. */
typedef struct audit_service_options {
    size_t max_watchers; /* open Watch streams (1024); beyond: RESOURCE_EXHAUSTED */
    /* Called about once a second per stream. NULL (tests): streams end
     * when the token's `exp` passes, with no revocation check. */
    audit_check_live_fn check_live;
    void *check_live_ctx; /* borrowed; must outlive the service */
} audit_service_options;

typedef struct audit_service audit_service;

/* Starts the listener (pg and pga borrowed: Watch's listener and catch-up
 * use pg, List runs on pga's event loop; PostgreSQL need not be reachable:
 * it retries). On 0 *out is the caller's (audit_service_free, after the rpc
 * server is shut down); on -1 err says why. */
int audit_service_create(pg_pool *pg, apg *pga, const audit_service_options *o, audit_service **out,
                         char *err, size_t errlen);
/* Stops the listener, ends any Watch stream still open with UNAVAILABLE,
 * frees; accepts NULL. */
void audit_service_free(audit_service *s);

/* Registers List and Watch (what the tier does through its table; for
 * tests that build a server by hand). Returns 0 or -1. */
int audit_service_register(rpc_server *srv, audit_service *s);

/* Open Watch streams. */
size_t audit_service_watchers(audit_service *s);

/* The tier: serves memory.v1.Audit (needs PostgreSQL); streams end when
 * their token is revoked or expires (env->auth). */
extern const tier audit_tier;

#endif
