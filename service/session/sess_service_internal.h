/* sess_service_internal: the session tier's state, which its handlers
 * (sess_service.c), its PostgreSQL side and its eraser (sess_pg.c,
 * sess_erase.c) share. Not for other modules. */
#ifndef MEMORYD_SESSION_SESS_SERVICE_INTERNAL_H
#define MEMORYD_SESSION_SESS_SERVICE_INTERNAL_H

#include "service/core/worker.h"
#include "service/tier/tier.h"
#include "service/tier/tier_quota.h"
#include "service/tier/tier_sql.h"

#define SESS_KEY_MAX_CHARS 256
#define SESS_VALUE_MAX (256 * 1024)      /* bytes of one value */
#define SESS_KEYS_MAX 1000               /* records of one session */
#define SESS_BYTES_MAX (2 * 1024 * 1024) /* bytes of a session's values */
#define SESS_DURATION_DEFAULT_MS (30 * 60 * 1000)
#define SESS_DURATION_MIN_MS 1000
#define SESS_DURATION_MAX_MS (7LL * 24 * 3600 * 1000)
#define SESS_SWEEP_BATCH 100

typedef struct sess_service {
    const tier_env *env; /* audit trail, PII policy, pools */
    tier_store store;    /* PostgreSQL: durable sessions, audit rows */
    worker *sweeper;     /* closes durable sessions past their grace; NULL: none */
    tier_quota *quota;   /* sessions and their bytes per tenant and principal */
} sess_service;

#endif
