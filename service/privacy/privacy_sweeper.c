/* privacy_sweeper: the retention sweeper; see privacy_sweeper.h. */
#include "service/privacy/privacy_sweeper.h"

#include <libpq-fe.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/clock.h"
#include "service/core/log.h"
#include "service/core/strbuf.h"
#include "service/core/worker.h"
#include "service/metrics/metrics.h"
#include "service/privacy/privacy_receipt.h"
#include "service/store/pgq.h"
#include "service/tier/tier_erase.h"

/* pg_try_advisory_lock's key: "memoryd" and 1, as a 64-bit number. */
#define SWEEP_LOCK "7881713864051454977"
#define BATCH_MS 30000 /* deadline of one batch */

/* How a sweep ended: every rule ran; some batch failed; not run here
 * (another replica held the lock, or no connection). */
enum { SWEEP_COMPLETE, SWEEP_PARTIAL, SWEEP_SKIPPED, SWEEP_OUTCOMES };
static const char *const sweep_outcomes[SWEEP_OUTCOMES] = {"complete", "partial", "skipped"};

struct privacy_sweeper {
    const tier_env *env;
    char *tenants_sql; /* the tenants of the tiers' tables (malloc'd) */
    retention_policy policy;
    int period_ms;
    int batch;
    worker *thread;
    worker *self; /* the same, as the thread knows it (set before its first sweep) */
    metrics_counter erased[PRIVACY_TIER_MAX];
    metrics_counter sweeps[SWEEP_OUTCOMES];
    audit_keeper_policy audit;
    metrics_counter audit_dropped[2]; /* by reason: age, size */
    metrics_counter audit_pruned;
    _Atomic int64_t audit_bytes, audit_partitions; /* the last round's */
};

/* Runs sql on conn; 1 when its one value is "t", 0 otherwise, -1 on
 * failure (logged). */
static int ask(PGconn *conn, const char *sql, const char *what) {
    PGresult *r = PQexec(conn, sql);
    int ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    int yes = ok && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    if (!ok)
        log_fields(LOG_WARN, "retention sweep: statement failed", LOG_F_STR, "what", what,
                   LOG_F_STR, "reason", PQerrorMessage(conn), LOG_F_END);
    PQclear(r);
    return ok ? yes : -1;
}

/* Every tenant that keeps long-term records, in any table a retention
 * rule reaches (the tables the tiers' descriptors list): one index probe
 * per tenant and table (a skip scan on the tenant that leads each table's
 * primary key), not a scan of the rows. malloc'd; NULL when out of memory
 * or when no tier lists a table. */
static char *tenants_sql(const tier_env *env) {
    strbuf b = {0}, in = {0};
    int n = 0;
    strbuf_puts(&b, "WITH RECURSIVE ");
    for (size_t i = 0; i < env->nerasers; i++)
        for (const char *const *t = env->erasers[i].r->tables; t && *t; t++, n++) {
            strbuf_printf(&b,
                          "%st%d AS (SELECT min(tenant) AS t FROM %s UNION ALL SELECT (SELECT "
                          "min(tenant) FROM %s WHERE tenant > t%d.t) FROM t%d WHERE t%d.t IS NOT "
                          "NULL)",
                          n ? ", " : "", n, *t, *t, n, n, n);
            strbuf_printf(&in, "%sSELECT t FROM t%d WHERE t IS NOT NULL", n ? " UNION " : "", n);
        }
    char *tail = strbuf_take(&in, NULL);
    strbuf_printf(&b, " %s", tail ? tail : "");
    int ok = n > 0 && tail && !b.oom;
    free(tail);
    if (!ok) {
        strbuf_free(&b);
        return NULL;
    }
    return strbuf_take(&b, NULL);
}

/* One rule on one tier of one tenant, batch after batch: what it erased,
 * or -1 (logged) when a batch failed. */
static int64_t sweep_rule(privacy_sweeper *s, const tier_eraser *e, const retention_rule *rule,
                          const char *tenant, int64_t now_us) {
    tier_erase_sel sel = {.tenant = tenant,
                          .before_us = now_us - rule->after_s * 1000000,
                          .label = rule->label,
                          .pii_kind = rule->pii_kind[0] ? rule->pii_kind : NULL,
                          .limit = s->batch};
    principal *ep = tier_erase_principal(&sel);
    if (!ep) return -1;
    int64_t total = 0;
    while (!worker_stopping(s->self)) {
        arena *a = arena_create();
        if (!a) {
            total = -1;
            break;
        }
        tier_ctx c;
        tier_ctx_make(&c, "privacy", ep, clock_mono_us() / 1000 + BATCH_MS, a);
        c.read_breadth = c.write_breadth = PRINCIPAL_ALL;
        int64_t n = 0;
        int rc = e->r->erase(e->state, &c, &sel, &n);
        if (rc != STATUS_OK) {
            char text[160];
            retention_rule_text(rule, text, sizeof text);
            log_fields(LOG_WARN, "retention sweep: a batch failed; the next sweep goes on",
                       LOG_F_STR, "tier", e->name, LOG_F_STR, "tenant", tenant, LOG_F_STR, "rule",
                       text, LOG_F_STR, "code", status_name(rc), LOG_F_STR, "reason", c.err,
                       LOG_F_END);
            arena_free(a);
            total = -1;
            break;
        }
        arena_free(a);
        total += n;
        if (n == 0 || worker_stopping(s->self)) break;
    }
    principal_unref(ep);
    if (total > 0) {
        metrics_add(&s->erased[e->tier], (uint64_t)total);
        char text[160];
        retention_rule_text(rule, text, sizeof text);
        log_fields(LOG_INFO, "retention: erased records past their period", LOG_F_STR, "tier",
                   e->name, LOG_F_STR, "tenant", tenant, LOG_F_STR, "rule", text, LOG_F_INT,
                   "erased", total, LOG_F_END);
    }
    return total;
}

/* Every rule, tier and tenant; 0, or -1 when something failed. */
static int sweep_tenants(privacy_sweeper *s, PGconn *conn, int64_t *erased, size_t *ntenants) {
    PGresult *r = PQexec(conn, s->tenants_sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        log_fields(LOG_WARN, "retention sweep: cannot list the tenants", LOG_F_STR, "reason",
                   PQerrorMessage(conn), LOG_F_END);
        PQclear(r);
        return -1;
    }
    pg_pool_watch(s->env->pg, conn, INT64_MAX); /* idle while the erasers run */
    int failed = 0;
    int64_t now_us = clock_wall_us();
    *ntenants = (size_t)PQntuples(r);
    for (int i = 0; i < PQntuples(r) && !worker_stopping(s->self); i++)
        for (size_t k = 0; k < s->policy.n; k++)
            for (size_t j = 0; j < s->env->nerasers; j++) {
                const tier_eraser *e = &s->env->erasers[j];
                /* A tier without tables ends its records by their TTLs. */
                if (!e->r->tables || !retention_rule_covers(&s->policy.rules[k], e->tier)) continue;
                int64_t n = sweep_rule(s, e, &s->policy.rules[k], PQgetvalue(r, i, 0), now_us);
                if (n < 0) failed = 1;
                else *erased += n;
            }
    PQclear(r);
    return failed ? -1 : 0;
}

/* The audit trail's round (the lock held); 0, or -1 (logged). */
static int keep_audit(privacy_sweeper *s, PGconn *conn) {
    char err[256];
    audit_keeper_report rep;
    pg_pool_watch(s->env->pg, conn, clock_mono_us() / 1000 + BATCH_MS);
    int rc = audit_keeper_run(conn, &s->audit, clock_wall_us(), &rep, err, sizeof err);
    metrics_add(&s->audit_dropped[0], (uint64_t)rep.dropped_age);
    metrics_add(&s->audit_dropped[1], (uint64_t)rep.dropped_size);
    metrics_add(&s->audit_pruned, (uint64_t)rep.pruned_rows);
    if (rc == 0) {
        atomic_store(&s->audit_bytes, rep.bytes);
        atomic_store(&s->audit_partitions, rep.partitions);
    }
    log_fields(rc == 0 ? LOG_INFO : LOG_WARN, "audit trail kept", LOG_F_INT, "made_ahead",
               (int64_t)rep.made, LOG_F_INT, "dropped_past_retention", (int64_t)rep.dropped_age,
               LOG_F_INT, "dropped_for_size", (int64_t)rep.dropped_size, LOG_F_INT,
               "pruned_default_rows", rep.pruned_rows, LOG_F_INT, "bytes", rep.bytes, LOG_F_INT,
               "partitions", (int64_t)rep.partitions, LOG_F_STR, "error", rc == 0 ? "" : err,
               LOG_F_END);
    return rc;
}

static void sweep(privacy_sweeper *s) {
    char err[256];
    pg_pool *pool = s->env->pg;
    PGconn *conn = pg_pool_acquire(pool, clock_mono_us() / 1000 + BATCH_MS, err, sizeof err);
    if (!conn) {
        metrics_inc(&s->sweeps[SWEEP_SKIPPED]);
        log_fields(LOG_WARN, "retention sweep skipped: no PostgreSQL connection", LOG_F_STR,
                   "reason", err, LOG_F_END);
        return;
    }
    int64_t t0 = clock_mono_us();
    /* The lock's and the tenant list's statements end by a deadline; the
     * connection then idles (holding the lock) while the erasers work on
     * connections of their own. */
    pg_pool_watch(pool, conn, clock_mono_us() / 1000 + BATCH_MS);
    int locked = ask(conn, "SELECT pg_try_advisory_lock(" SWEEP_LOCK ")", "advisory lock");
    if (locked == 0)
        log_fields(LOG_DEBUG, "retention sweep skipped: another replica is sweeping", LOG_F_END);
    int64_t erased = 0;
    size_t ntenants = 0;
    int rc = locked == 1 && s->policy.n > 0 && s->tenants_sql
                 ? sweep_tenants(s, conn, &erased, &ntenants)
                 : 0;
    if (locked == 1 && keep_audit(s, conn) != 0) rc = -1;
    metrics_inc(&s->sweeps[locked != 1 ? SWEEP_SKIPPED : rc == 0 ? SWEEP_COMPLETE : SWEEP_PARTIAL]);
    if (locked == 1) {
        pg_pool_watch(pool, conn, clock_mono_us() / 1000 + BATCH_MS);
        if (ask(conn, "SELECT pg_advisory_unlock(" SWEEP_LOCK ")", "advisory unlock") != 1)
            locked = -1; /* the connection goes: its session's lock with it */
        log_fields(rc == 0 ? LOG_INFO : LOG_WARN, "retention sweep", LOG_F_INT, "tenants",
                   (int64_t)ntenants, LOG_F_INT, "rules", (int64_t)s->policy.n, LOG_F_INT, "erased",
                   erased, LOG_F_INT, "duration_ms", (clock_mono_us() - t0) / 1000, LOG_F_STR,
                   "outcome", rc == 0 ? "complete" : "partial", LOG_F_END);
    }
    pg_pool_release(pool, conn, locked < 0);
}

static void sweeper_main(worker *w, void *arg) {
    privacy_sweeper *s = arg;
    s->self = w;
    while (!worker_nap(w, s->period_ms)) sweep(s);
}

int privacy_sweeper_start(const tier_env *env, const retention_policy *policy, int period_ms,
                          int batch, const audit_keeper_policy *audit, privacy_sweeper **out) {
    privacy_sweeper *s = calloc(1, sizeof *s);
    if (!s) return -1;
    s->env = env;
    /* NULL with no tier keeping long-term records: only the audit trail
     * is kept. */
    s->tenants_sql = tenants_sql(env);
    int tables = 0;
    for (size_t i = 0; i < env->nerasers; i++) tables |= env->erasers[i].r->tables != NULL;
    if (tables && !s->tenants_sql) {
        free(s);
        return -1;
    }
    s->policy = *policy;
    s->audit = *audit;
    s->period_ms = period_ms;
    s->batch = batch;
    if (worker_start(sweeper_main, s, &s->thread) != 0) {
        free(s->tenants_sql);
        free(s);
        return -1;
    }
    *out = s;
    return 0;
}

void privacy_sweeper_stop(privacy_sweeper *s) {
    if (!s) return;
    worker_stop(s->thread, NULL);
    free(s->tenants_sql);
    free(s);
}

void privacy_sweeper_metrics_collect(strbuf *out, void *arg) {
    privacy_sweeper *s = arg;
    metrics_family(out, "memoryd_retention_sweeps_total", "counter",
                   "Retention sweeps on this replica by outcome: complete, partial (a batch "
                   "failed; the next sweep goes on), skipped (another replica was sweeping, or "
                   "PostgreSQL was out of reach).");
    metrics_samples_by_label(out, "memoryd_retention_sweeps_total", "outcome", sweep_outcomes,
                             s->sweeps, SWEEP_OUTCOMES);
    metrics_family(out, "memoryd_retention_erased_total", "counter",
                   "Records this replica's sweeps erased for the retention policy, by tier.");
    for (size_t j = 0; j < s->env->nerasers; j++) {
        const tier_eraser *e = &s->env->erasers[j];
        if (e->tier < 0 || e->tier >= PRIVACY_TIER_MAX) continue;
        strbuf_puts(out, "memoryd_retention_erased_total{tier=\"");
        metrics_label_value(out, e->name);
        strbuf_printf(out, "\"} %llu\n", (unsigned long long)metrics_get(&s->erased[e->tier]));
    }
    static const char *const reasons[2] = {"retention", "size_guard"};
    metrics_family(out, "memoryd_audit_partitions_dropped_total", "counter",
                   "Days of the audit trail this replica's sweeps dropped whole, by reason: past "
                   "--audit-retention, or the oldest past days over --audit-max-mib.");
    metrics_samples_by_label(out, "memoryd_audit_partitions_dropped_total", "reason", reasons,
                             s->audit_dropped, 2);
    metrics_family(out, "memoryd_audit_default_rows_pruned_total", "counter",
                   "Audit rows past the retention deleted from the default partition (rows "
                   "written while no partition of their day existed).");
    strbuf_printf(out, "memoryd_audit_default_rows_pruned_total %llu\n",
                  (unsigned long long)metrics_get(&s->audit_pruned));
    metrics_family(out, "memoryd_audit_trail_bytes", "gauge",
                   "The audit trail's size on disk (tables and indexes) when this replica last "
                   "kept it; 0 before its first sweep.");
    strbuf_printf(out, "memoryd_audit_trail_bytes %lld\n", (long long)atomic_load(&s->audit_bytes));
    metrics_family(out, "memoryd_audit_trail_partitions", "gauge",
                   "Day partitions of the audit trail (past and made ahead) when this replica "
                   "last kept it.");
    strbuf_printf(out, "memoryd_audit_trail_partitions %lld\n",
                  (long long)atomic_load(&s->audit_partitions));
}
