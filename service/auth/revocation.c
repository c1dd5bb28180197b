/* revocation: revoked token ids, shared through PostgreSQL; see
 * revocation.h. */
#include "service/auth/revocation.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/clock.h"
#include "service/core/log.h"
#include "service/core/worker.h"
#include "service/store/pgq.h"

/* Bounds a refresh, and a revocation of a call without a deadline. */
#define REFRESH_TIMEOUT_MS 5000

/* A revocation belongs to a tenant: the set's entries are keys of
 * (tenant, jti), the tenant's length first so no two pairs share a key. */
#define KEY_MAX 1100

/* The key of (tenant, jti) into buf (KEY_MAX bytes); NULL when too long
 * (such a token was refused long before: claims are bounded). */
static const char *key_of(char *buf, const char *tenant, const char *jti) {
    int n = snprintf(buf, KEY_MAX, "%zu:%s%s", strlen(tenant), tenant, jti);
    return n > 0 && n < KEY_MAX ? buf : NULL;
}

/* An immutable sorted array of keys; replaced as a whole under the lock. */
typedef struct {
    char **ids;
    size_t n;
} id_set;

struct revocation {
    pg_pool *pg;
    int poll_ms;
    pthread_rwlock_t lock;
    id_set set;
    atomic_size_t count; /* set.n, readable without the lock */
    int64_t seen_count, seen_max_seq;
    int skew_s;
    int64_t next_prune_ms; /* poller thread only */
    worker *poller;        /* NULL without PostgreSQL */
};

static int cmp_ids(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void set_free(id_set *s) {
    for (size_t i = 0; i < s->n; i++) free(s->ids[i]);
    free(s->ids);
    s->ids = NULL;
    s->n = 0;
}

static void install(revocation *r, id_set *fresh) {
    qsort(fresh->ids, fresh->n, sizeof *fresh->ids, cmp_ids);
    pthread_rwlock_wrlock(&r->lock);
    id_set old = r->set;
    r->set = *fresh;
    atomic_store(&r->count, fresh->n);
    pthread_rwlock_unlock(&r->lock);
    set_free(&old);
}

typedef struct {
    revocation *r;
    int force;
} refresh_args;

/* Installs every revocation of res (tenant, jti: text). */
static int install_rows(revocation *r, const PGresult *res, char *err, size_t errlen) {
    id_set fresh = {calloc((size_t)PQntuples(res) + 1, sizeof(char *)), 0};
    for (int i = 0; fresh.ids && i < PQntuples(res); i++) {
        char buf[KEY_MAX];
        const char *key = key_of(buf, PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
        char *id = key ? strdup(key) : NULL;
        if (!id) break;
        fresh.ids[fresh.n++] = id;
    }
    if (!fresh.ids || fresh.n != (size_t)PQntuples(res)) {
        set_free(&fresh);
        snprintf(err, errlen, "out of memory");
        return STATUS_ENOMEM;
    }
    install(r, &fresh);
    return STATUS_OK;
}

/* Reads count and max(seq); reloads every id when either changed since the
 * last load (or force). */
static int refresh_in(pgq_session *ss, void *arg) {
    refresh_args *a = arg;
    revocation *r = a->r;
    pgq_sql b = {0};
    pgq_sql_add(&b, "SELECT count(*), coalesce(max(seq), 0)::int8 FROM revoked_tokens");
    PGresult *res;
    int rc = pgq_pipeline(ss, "reading revoked_tokens", NULL, &b, 1, &res);
    if (rc != STATUS_OK) return rc;
    int64_t cnt = 0, max_seq = 0;
    if (PQntuples(res) != 1 || pgq_col_int(res, 0, 0, &cnt) != 0 ||
        pgq_col_int(res, 0, 1, &max_seq) != 0)
        rc = pgq_fail(ss, STATUS_EINTERNAL, "unexpected revoked_tokens summary");
    PQclear(res);
    if (rc != STATUS_OK || (!a->force && cnt == r->seen_count && max_seq == r->seen_max_seq))
        return rc;
    pgq_sql ids = {0};
    pgq_sql_add(&ids, "SELECT tenant, jti FROM revoked_tokens");
    if ((rc = pgq_pipeline(ss, "reading revoked_tokens", NULL, &ids, 1, &res)) != STATUS_OK)
        return rc;
    rc = install_rows(r, res, ss->err, ss->errlen);
    PQclear(res);
    if (rc != STATUS_OK) return rc;
    r->seen_count = cnt;
    r->seen_max_seq = max_seq;
    return STATUS_OK;
}

/* Returns 0, or -1 with err. */
static int refresh(revocation *r, int force, char *err, size_t errlen) {
    refresh_args a = {r, force};
    return pgq_run(r->pg, "revocation", clock_mono_ms(NULL) + REFRESH_TIMEOUT_MS,
                   REFRESH_TIMEOUT_MS, NULL, err, errlen, refresh_in, &a) == STATUS_OK
               ? 0
               : -1;
}

/* Deletes revocations and issued tokens past expiry (+ skew): what no
 * token can present any more. Every replica prunes; the deletes are
 * idempotent. */
static int prune_in(pgq_session *ss, void *arg) {
    revocation *r = arg;
    pgq_sql b = {0};
    int p_skew = pgq_int8(&b, r->skew_s);
    pgq_sql_add(&b,
                "WITH gone AS (DELETE FROM revoked_tokens WHERE expires_at < now() -"
                " make_interval(secs => $%d) RETURNING 1), issued AS (DELETE FROM issued_tokens"
                " WHERE expires_at < now() - make_interval(secs => $%d) RETURNING 1)"
                " SELECT (SELECT count(*) FROM gone)::int8, (SELECT count(*) FROM issued)::int8",
                p_skew, p_skew);
    PGresult *res;
    int rc = pgq_pipeline(ss, "pruning expired revocations", NULL, &b, 1, &res);
    if (rc != STATUS_OK) return rc;
    int64_t revoked = 0, issued = 0;
    if (PQntuples(res) == 1 && pgq_col_int(res, 0, 0, &revoked) == 0 &&
        pgq_col_int(res, 0, 1, &issued) == 0 && (revoked || issued))
        log_fields(LOG_INFO, "expired revocations and issued tokens pruned", LOG_F_INT,
                   "revocations", revoked, LOG_F_INT, "issued_tokens", issued, LOG_F_END);
    PQclear(res);
    return STATUS_OK;
}

static void maybe_prune(revocation *r) {
    int64_t now = clock_mono_ms(NULL);
    if (now < r->next_prune_ms) return;
    r->next_prune_ms = now + REVOCATION_PRUNE_MS;
    char err[256];
    if (pgq_run(r->pg, "revocation", now + REFRESH_TIMEOUT_MS, REFRESH_TIMEOUT_MS, NULL, err,
                sizeof err, prune_in, r) != STATUS_OK)
        log_fields(LOG_WARN, "cannot prune expired revocations; retrying later", LOG_F_STR, "error",
                   err, LOG_F_END);
}

static void poll_main(worker *w, void *arg) {
    revocation *r = arg;
    log_outage failing = {0};
    maybe_prune(r);
    while (!worker_nap(w, r->poll_ms)) {
        maybe_prune(r);
        char err[256];
        if (refresh(r, 0, err, sizeof err) == 0)
            log_outage_end(&failing, "revoked tokens refreshed again");
        else
            log_outage_begin(&failing,
                             "cannot refresh revoked tokens; revocations made on other "
                             "replicas are not seen until PostgreSQL answers",
                             "error", err);
    }
}

int revocation_create(pg_pool *pg, int poll_ms, int skew_s, revocation **out, char *err,
                      size_t errlen) {
    revocation *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    r->pg = pg;
    r->poll_ms = poll_ms > 0 ? poll_ms : 1000;
    r->skew_s = skew_s > 0 ? skew_s : 0;
    r->seen_count = r->seen_max_seq = -1;
    pthread_rwlock_init(&r->lock, NULL);
    atomic_init(&r->count, 0);
    if (pg) {
        char why[256];
        if (refresh(r, 1, why, sizeof why) != 0) {
            snprintf(err, errlen, "cannot load revoked tokens: %s", why);
            revocation_free(r);
            return -1;
        }
        if (worker_start(poll_main, r, &r->poller) != 0) {
            snprintf(err, errlen, "cannot start the revocation thread (out of memory or threads)");
            revocation_free(r);
            return -1;
        }
    }
    *out = r;
    return 0;
}

void revocation_free(revocation *r) {
    if (!r) return;
    worker_stop(r->poller, NULL);
    set_free(&r->set);
    pthread_rwlock_destroy(&r->lock);
    free(r);
}

static int contains_key(revocation *r, const char *key) {
    pthread_rwlock_rdlock(&r->lock);
    int found = r->set.n && bsearch(&key, r->set.ids, r->set.n, sizeof *r->set.ids, cmp_ids);
    pthread_rwlock_unlock(&r->lock);
    return found;
}

int revocation_contains(revocation *r, const char *tenant, const char *jti) {
    if (atomic_load_explicit(&r->count, memory_order_acquire) == 0) return 0;
    char buf[KEY_MAX];
    const char *key = key_of(buf, tenant, jti);
    return key && contains_key(r, key);
}

/* Adds one revocation to the local set (copy-on-write). */
static void add_local(revocation *r, const char *tenant, const char *jti) {
    char buf[KEY_MAX];
    const char *key = key_of(buf, tenant, jti);
    if (!key || contains_key(r, key)) return;
    pthread_rwlock_rdlock(&r->lock);
    size_t n = r->set.n;
    id_set fresh = {calloc(n + 1, sizeof(char *)), 0};
    for (size_t i = 0; fresh.ids && i < n; i++) {
        char *id = strdup(r->set.ids[i]);
        if (!id) break;
        fresh.ids[fresh.n++] = id;
    }
    pthread_rwlock_unlock(&r->lock);
    char *id = fresh.ids && fresh.n == n ? strdup(key) : NULL;
    if (!id) { /* out of memory: the next refresh will pick it up */
        set_free(&fresh);
        return;
    }
    fresh.ids[fresh.n++] = id;
    install(r, &fresh);
}

/* The no-op update makes RETURNING yield the first revocation's row when
 * the id was already revoked. */
void revocation_store_sql(pgq_sql *b, const char *jti, const char *by, const char *tenant,
                          const char *reason, int64_t exp_s) {
    int p_jti = pgq_text(b, jti);
    int p_by = pgq_text(b, by);
    int p_tenant = pgq_text(b, tenant);
    int p_reason = pgq_text(b, reason ? reason : "");
    pgq_sql_add(b,
                "INSERT INTO revoked_tokens (jti, revoked_by, tenant, reason, expires_at)"
                " VALUES ($%d, $%d, $%d, $%d, coalesce(to_timestamp(nullif($%d, 0)),"
                " (SELECT expires_at FROM issued_tokens WHERE jti = $%d AND tenant = $%d)))"
                " ON CONFLICT (tenant, jti) DO UPDATE SET jti = EXCLUDED.jti"
                " RETURNING extract(epoch FROM revoked_at)::int8",
                p_jti, p_by, p_tenant, p_reason, pgq_int8(b, exp_s), p_jti, p_tenant);
}

int revocation_stored(revocation *r, const PGresult *res, const char *tenant, const char *jti,
                      int64_t *revoked_at_s) {
    if (PQntuples(res) != 1 || pgq_col_int(res, 0, 0, revoked_at_s) != 0) return -1;
    add_local(r, tenant, jti);
    return 0;
}

size_t revocation_count(revocation *r) { return atomic_load(&r->count); }
