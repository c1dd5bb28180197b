/* sess_pg: see sess_pg.h. */
#include "service/session/sess_pg.h"

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/auth/principal.h"
#include "service/core/b64url.h"
#include "service/core/clock.h"
#include "service/core/log.h"
#include "service/core/text.h"
#include "service/session/sess_service_internal.h"

/* ------------------------------------------------------------ write-through */

void sess_pg_start_sql(pgq_sql *b, const tier_ctx *c, const sess_info *s) {
    pgq_sql_add(b,
                "INSERT INTO sessions (tenant, id, owner, duration_ms, grace_ms, created_at,"
                " purge_at) VALUES ($%d, $%d, $%d, $%d, $%d, $%d, $%d)",
                pgq_text(b, principal_tenant(c->p)), pgq_text(b, s->id), pgq_text(b, s->owner),
                pgq_int8(b, s->duration_ms), pgq_int8(b, s->purge_ms - s->expire_ms),
                pgq_ts(b, s->create_ms * 1000), pgq_ts(b, s->purge_ms * 1000));
}

void sess_pg_set_sql(pgq_sql *b, const tier_ctx *c, const sess_info *s, const sess_rec *r,
                     const uint8_t *value, size_t len) {
    const char *pii = pgq_array_literal(c->ar, r->pii_kinds, r->npii);
    int p_tenant = pgq_text(b, principal_tenant(c->p)), p_id = pgq_text(b, s->id);
    int p_purge = pgq_ts(b, s->purge_ms * 1000);
    int p_key = pgq_text(b, r->key), p_owner = pgq_text(b, r->owner);
    int p_label = pgq_int4(b, r->label), p_value = pgq_bytes(b, value, len);
    int p_pii = pgq_text_array(b, pii ? pii : "{}"), p_version = pgq_int8(b, r->version);
    int p_created = pgq_ts(b, r->create_ms * 1000), p_updated = pgq_ts(b, r->update_ms * 1000);
    pgq_sql_add(
        b,
        "WITH s AS (UPDATE sessions SET purge_at = GREATEST(purge_at, $%d) WHERE tenant = $%d"
        " AND id = $%d)"
        " INSERT INTO session_records (tenant, session_id, key, owner, label, value,"
        " pii_kinds, version, created_at, updated_at) VALUES ($%d, $%d, $%d, $%d, $%d,"
        " $%d, $%d, $%d, $%d, $%d) ON CONFLICT (tenant, session_id, key) DO UPDATE SET"
        " label = EXCLUDED.label, value = EXCLUDED.value, pii_kinds = EXCLUDED.pii_kinds,"
        " version = EXCLUDED.version, updated_at = EXCLUDED.updated_at"
        /* Two Sets of a key race here in either order: Redis's
         * version decides which one PostgreSQL keeps. */
        " WHERE session_records.version < EXCLUDED.version",
        p_purge, p_tenant, p_id, p_tenant, p_id, p_key, p_owner, p_label, p_value, p_pii, p_version,
        p_created, p_updated);
}

void sess_pg_end_sql(pgq_sql *b, const tier_ctx *c, const sess_info *s) {
    pgq_sql_add(b,
                "UPDATE sessions SET ended_at = COALESCE(ended_at, $%d),"
                " purge_at = GREATEST(purge_at, $%d)"
                " WHERE tenant = $%d AND id = $%d",
                pgq_ts(b, s->expire_ms * 1000), pgq_ts(b, s->purge_ms * 1000),
                pgq_text(b, principal_tenant(c->p)), pgq_text(b, s->id));
}

/* ------------------------------------------------------------ reading PostgreSQL's copy */

enum {
    PCOL_OWNER,
    PCOL_DURATION,
    PCOL_GRACE,
    PCOL_CREATED,
    PCOL_PURGE,
    PCOL_ENDED,
    PCOL_CLOSED,
    PCOL_NOW,
    PCOL_KEY,
    PCOL_ROWNER,
    PCOL_LABEL,
    PCOL_PII,
    PCOL_VERSION,
    PCOL_RCREATED,
    PCOL_RUPDATED,
    PCOL_SIZE,
    PCOL_VALUE
};

static int64_t ms_col(const PGresult *r, int row, int col, int *bad) {
    int64_t us = 0;
    if (PQgetisnull(r, row, col)) return 0;
    if (pgq_col_ts(r, row, col, &us) != 0) *bad = 1;
    return us / 1000;
}

static int decode_read(tier_async *op, const PGresult *r) {
    sess_pg_read *out = *(sess_pg_read **)op->arg;
    tier_ctx *c = op->c;
    int rows = PQntuples(r), bad = 0;
    out->found = rows > 0;
    if (!rows) return STATUS_OK;
    int64_t grace = 0;
    sess_info *s = &out->info;
    s->id = out->id;
    s->durable = 1;
    s->owner = pgq_col_str(c->ar, r, 0, PCOL_OWNER);
    if (pgq_col_int(r, 0, PCOL_DURATION, &s->duration_ms) != 0 ||
        pgq_col_int(r, 0, PCOL_GRACE, &grace) != 0)
        bad = 1;
    s->create_ms = ms_col(r, 0, PCOL_CREATED, &bad);
    s->purge_ms = ms_col(r, 0, PCOL_PURGE, &bad);
    int64_t ended = ms_col(r, 0, PCOL_ENDED, &bad), closed = ms_col(r, 0, PCOL_CLOSED, &bad);
    int64_t now = ms_col(r, 0, PCOL_NOW, &bad);
    s->expire_ms = ended ? ended : s->purge_ms - grace;
    /* Never ACTIVE: without its Redis copy it takes no more writes. */
    s->state = closed || now >= s->purge_ms ? 4 : ended ? 3 : 2;
    out->unswept = !closed && now >= s->purge_ms;
    out->recs = arena_alloc(c->ar, (size_t)rows * sizeof *out->recs);
    if (!s->owner || !out->recs) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    for (int i = 0; i < rows && !bad; i++) {
        if (PQgetisnull(r, i, PCOL_KEY)) continue; /* a session without records */
        sess_rec *rec = &out->recs[out->nrecs++];
        int64_t label = 0;
        memset(rec, 0, sizeof *rec);
        rec->key = pgq_col_str(c->ar, r, i, PCOL_KEY);
        rec->owner = pgq_col_str(c->ar, r, i, PCOL_ROWNER);
        if (!rec->key || !rec->owner || pgq_col_int(r, i, PCOL_LABEL, &label) != 0 ||
            pgq_col_text_array(c->ar, r, i, PCOL_PII, &rec->pii_kinds, &rec->npii) != 0 ||
            pgq_col_int(r, i, PCOL_VERSION, &rec->version) != 0 ||
            pgq_col_int(r, i, PCOL_SIZE, &rec->size) != 0)
            bad = 1;
        rec->label = (int)label;
        rec->create_ms = ms_col(r, i, PCOL_RCREATED, &bad);
        rec->update_ms = ms_col(r, i, PCOL_RUPDATED, &bad);
        if (!PQgetisnull(r, i, PCOL_VALUE)) {
            size_t n = (size_t)PQgetlength(r, i, PCOL_VALUE);
            uint8_t *v = arena_alloc(c->ar, n + 1);
            if (!v) return tier_fail(c, STATUS_ENOMEM, "out of memory");
            memcpy(v, PQgetvalue(r, i, PCOL_VALUE), n);
            rec->value = v;
            rec->has_value = 1;
        }
    }
    return bad ? tier_fail(c, STATUS_EINTERNAL, "session %s: unreadable row", out->id) : STATUS_OK;
}

tier_async *sess_pg_read_async(tier_ctx *c, const sess_pg_read *in, sess_pg_read *out,
                               tier_async_done_fn done, void *arg) {
    *out = *in;
    tier_async *op =
        tier_async_new(c, "read durable session", decode_read, &out, sizeof out, done, arg);
    if (!op) return NULL;
    pgq_sql *b = &op->sql;
    pgq_sql_add(b,
                "SELECT s.owner, s.duration_ms, s.grace_ms, s.created_at, s.purge_at, s.ended_at,"
                " s.closed_at, now(), r.key, r.owner, r.label, r.pii_kinds, r.version,"
                " r.created_at, r.updated_at, octet_length(r.value), r.value FROM sessions s"
                " LEFT JOIN session_records r ON r.tenant = s.tenant AND r.session_id = s.id");
    if (in->key) pgq_sql_add(b, " AND r.key = $%d", pgq_text(b, in->key));
    pgq_sql_add(b, " WHERE s.tenant = $%d AND s.id = $%d ORDER BY r.key",
                pgq_text(b, principal_tenant(c->p)), pgq_text(b, in->id));
    return op;
}

/* ------------------------------------------------------------ closing */

int sess_pg_close_record(arena *a, pii_policy policy, const char **v, size_t *n, int *drop) {
    *drop = policy == PII_POLICY_REJECT;
    if (*drop) return STATUS_OK;
    char why[256];
    pii_field f[] = {PII_BYTES("value", v, n)};
    return pii_policy_apply(a, PII_MODE_REDACT, f, 1, NULL, NULL, why, sizeof why);
}

int sess_pg_close_read(arena *a, pii_policy policy, sess_pg_read *r) {
    size_t kept = 0;
    for (size_t i = 0; i < r->nrecs; i++) {
        sess_rec *rec = &r->recs[i];
        if (rec->npii) {
            int drop;
            const char *v = (const char *)rec->value;
            size_t n = (size_t)rec->size;
            int rc = sess_pg_close_record(a, policy, &v, &n, &drop);
            if (rc != STATUS_OK) return rc;
            if (drop) continue;
            rec->value = (const uint8_t *)v;
            rec->size = (int64_t)n;
            rec->pii_kinds = NULL;
            rec->npii = 0;
        }
        r->recs[kept++] = *rec;
    }
    r->nrecs = kept;
    return STATUS_OK;
}

/* ------------------------------------------------------------ the sweeper */

#define REDIS_WAIT_MS 2000 /* the sweeper's wait for a Redis connection and its answer */

typedef struct sweep_job {
    redis_pool *redis;
    pii_policy policy;
    int batch;
    int64_t closed;
} sweep_job;

/* Redis's remaining life of session id of tenant in ms: > 0 while it is
 * there, 0 when it is gone, -1 when Redis cannot say. */
static int64_t redis_ttl(redis_pool *pool, const char *tenant, const char *id) {
    char err[128];
    redisContext *rc =
        redis_pool_acquire(pool, clock_mono_us() / 1000 + REDIS_WAIT_MS, err, sizeof err);
    if (!rc) return -1;
    arena *a = arena_create();
    size_t klen;
    const char *key = a ? sess_key(a, tenant, id, &klen) : NULL;
    redisReply *r = key ? redisCommand(rc, "PTTL %b", key, klen) : NULL;
    int64_t ttl = r && r->type == REDIS_REPLY_INTEGER ? (r->integer > 0 ? r->integer : 0) : -1;
    redis_pool_release(pool, rc, r == NULL);
    if (r) freeReplyObject(r);
    arena_free(a);
    return ttl;
}

/* The records of a session holding PII, redacted in place (redact) or
 * deleted (reject), and the session closed: one transaction. */
static int close_session(pgq_session *ss, sweep_job *j, const char *tenant, const char *id) {
    pgq_sql b = {0};
    PGresult *r = NULL;
    int rc;
    if (j->policy == PII_POLICY_REJECT) {
        pgq_sql_add(&b,
                    "DELETE FROM session_records WHERE tenant = $%d AND session_id = $%d"
                    " AND pii_kinds <> '{}'",
                    pgq_text(&b, tenant), pgq_text(&b, id));
        if ((rc = pgq_pipeline(ss, "drop session PII", "BEGIN", &b, 0, &r)) != STATUS_OK) return rc;
        PQclear(r);
    } else {
        pgq_sql_add(&b,
                    "SELECT key, value FROM session_records WHERE tenant = $%d AND session_id = $%d"
                    " AND pii_kinds <> '{}' FOR UPDATE",
                    pgq_text(&b, tenant), pgq_text(&b, id));
        if ((rc = pgq_pipeline(ss, "session PII", "BEGIN", &b, 0, &r)) != STATUS_OK) return rc;
        arena *a = arena_create();
        for (int i = 0; a && rc == STATUS_OK && i < PQntuples(r); i++) {
            const char *key = pgq_col_str(a, r, i, 0);
            const char *v = PQgetvalue(r, i, 1);
            size_t n = (size_t)PQgetlength(r, i, 1);
            int drop;
            if (!key || sess_pg_close_record(a, j->policy, &v, &n, &drop) != STATUS_OK) {
                rc = pgq_fail(ss, STATUS_EINTERNAL, "cannot redact session %s", id);
                break;
            }
            pgq_sql u = {0};
            pgq_sql_add(
                &u,
                "UPDATE session_records SET value = $%d, pii_kinds = '{}' WHERE tenant = $%d"
                " AND session_id = $%d AND key = $%d",
                pgq_bytes(&u, v, n), pgq_text(&u, tenant), pgq_text(&u, id), pgq_text(&u, key));
            PGresult *ur = NULL;
            rc = pgq_exec_ok(ss, &u, "redact session record", &ur);
            PQclear(ur);
        }
        arena_free(a);
        PQclear(r);
        if (rc != STATUS_OK) return rc;
    }
    pgq_sql cl = {0};
    pgq_sql_add(&cl, "UPDATE sessions SET closed_at = now() WHERE tenant = $%d AND id = $%d",
                pgq_text(&cl, tenant), pgq_text(&cl, id));
    if ((rc = pgq_exec_ok(ss, &cl, "close session", &r)) != STATUS_OK) return rc;
    PQclear(r);
    if ((rc = pgq_commit(ss, NULL, NULL, NULL)) == STATUS_OK) j->closed++;
    return rc;
}

static int sweep_in(pgq_session *ss, void *arg) {
    sweep_job *j = arg;
    pgq_sql b = {0};
    PGresult *due = NULL;
    pgq_sql_add(&b,
                "SELECT tenant, id FROM sessions WHERE closed_at IS NULL AND purge_at <= now()"
                " ORDER BY purge_at LIMIT %d",
                j->batch);
    int rc = pgq_pipeline(ss, "due sessions", NULL, &b, 1, &due);
    for (int i = 0; rc == STATUS_OK && i < PQntuples(due); i++) {
        const char *tenant = PQgetvalue(due, i, 0), *id = PQgetvalue(due, i, 1);
        int64_t ttl = redis_ttl(j->redis, tenant, id);
        if (ttl < 0) {
            rc = pgq_fail(ss, STATUS_EUNAVAILABLE, "Redis cannot say whether session %s lives", id);
        } else if (ttl > 0) {
            /* Used since PostgreSQL heard of it: its purge moved on. */
            pgq_sql u = {0};
            PGresult *ur = NULL;
            pgq_sql_add(&u,
                        "UPDATE sessions SET purge_at = now() + $%d * interval '1 millisecond'"
                        " WHERE tenant = $%d AND id = $%d",
                        pgq_int8(&u, ttl), pgq_text(&u, tenant), pgq_text(&u, id));
            rc = pgq_exec_ok(ss, &u, "move session purge", &ur);
            PQclear(ur);
        } else {
            rc = close_session(ss, j, tenant, id);
        }
    }
    PQclear(due);
    return rc;
}

int sess_pg_sweep(pg_pool *pg, redis_pool *redis, pii_policy policy, int batch, int64_t *closed,
                  char *err, size_t errlen) {
    sweep_job j = {redis, policy, batch, 0};
    int rc =
        pgq_run(pg, "session", INT64_MAX, TIER_MAX_STATEMENT_MS, NULL, err, errlen, sweep_in, &j);
    *closed = j.closed;
    return rc;
}
