/* sess_pg: durable sessions in PostgreSQL (tables sessions and
 * session_records, migration 13): the write-through of Start, Set and End
 * (built here, run by the handlers as tier_async transactions that end
 * with the audit row), the read of a durable session Redis no longer
 * holds, the sweeper that closes durable sessions past their grace
 * (applying the PII policy to their records), and the tier's eraser and
 * exporter. No gRPC. */
#ifndef MEMORYD_SESSION_SESS_PG_H
#define MEMORYD_SESSION_SESS_PG_H

#include <stdint.h>

#include "service/pii/pii_policy.h"
#include "service/session/sess_store.h"
#include "service/store/pg_pool.h"
#include "service/store/redis_pool.h"
#include "service/tier/tier_erase.h"
#include "service/tier/tier_sql.h"

/* Statements of the write-through (c: the caller's context; tenant and
 * owner from c->p and info). */
void sess_pg_start_sql(pgq_sql *b, const tier_ctx *c, const sess_info *s);
/* The record (its header as the script stored it, value the bytes) and
 * the session's purge time, in one statement. */
void sess_pg_set_sql(pgq_sql *b, const tier_ctx *c, const sess_info *s, const sess_rec *r,
                     const uint8_t *value, size_t len);
void sess_pg_end_sql(pgq_sql *b, const tier_ctx *c, const sess_info *s);

/* A durable session of c's tenant as PostgreSQL keeps it, when Redis does
 * not: its info (state ENDED, or EXPIRED while within its grace — Redis
 * lost it, so it takes no more writes —, CLOSED after) and its records
 * (key NULL: all; with values). */
typedef struct sess_pg_read {
    const char *id;
    const char *key; /* NULL: every record; values always come back */
    sess_info info;
    sess_rec *recs;
    size_t nrecs;
    int found;   /* the session is there */
    int unswept; /* past its purge time, not yet closed by the sweeper */
} sess_pg_read;

/* What closing a durable session does to a record holding PII, also for a
 * read of one the sweeper has not reached yet: STATUS_OK with *drop set
 * (policy reject) or the value redacted in place into a (policy redact;
 * *v and *n replaced), or STATUS_ENOMEM / STATUS_EINTERNAL. */
int sess_pg_close_record(arena *a, pii_policy policy, const char **v, size_t *n, int *drop);
/* sess_pg_close_record over a read's records that hold PII. */
int sess_pg_close_read(arena *a, pii_policy policy, sess_pg_read *r);
/* On the event loop (tier_sql.h), one round trip; STATUS_OK with found 0
 * when PostgreSQL has no such session either. The read diode is the
 * caller's (sess_service.c). */
tier_async *sess_pg_read_async(tier_ctx *c, const sess_pg_read *in, sess_pg_read *out,
                               tier_async_done_fn done, void *arg);

/* Closes the durable sessions past their purge time that Redis no longer
 * holds (a session Redis still holds was used since PostgreSQL last heard:
 * its purge time there is moved on instead): their records holding PII
 * are redacted (policy redact) or deleted (reject). At most batch
 * sessions; *closed counts them. Blocks (a worker thread). */
int sess_pg_sweep(pg_pool *pg, redis_pool *redis, pii_policy policy, int batch, int64_t *closed,
                  char *err, size_t errlen);

/* The eraser and exporter (tier_erase.h); state: the session tier. */
int sess_erase(void *state, tier_ctx *c, const tier_erase_sel *sel, int64_t *count);
int sess_export(void *state, tier_ctx *c, const tier_erase_sel *sel, tier_export_emit emit,
                void *emit_arg);

#endif
