/* access_store: issued_tokens on pgq; see access_store.h. */
#include "service/access/access_store.h"

#include "service/store/pgq.h"

#define TIER "access"
#define MAX_STATEMENT_MS 30000 /* for calls without a deadline */

typedef struct {
    arena *ar;
    const jwt_claims *minted;
} record_args;

static int record(pgq_session *ss, void *arg) {
    record_args *a = arg;
    const jwt_claims *m = a->minted;
    const char *anc = pgq_array_literal(a->ar, (const char *const *)m->anc, m->nanc);
    if (!anc) return pgq_fail(ss, STATUS_ENOMEM, "out of memory");
    pgq_sql b = {0};
    int p_jti = pgq_text(&b, m->jti);
    int p_parent = pgq_text(&b, m->parent);
    int p_anc = pgq_text_array(&b, anc);
    int p_tenant = pgq_text(&b, m->tenant);
    int p_sub = pgq_text(&b, m->sub);
    pgq_sql_add(&b,
                "INSERT INTO issued_tokens (jti, parent_jti, ancestors, tenant, principal,"
                " expires_at) VALUES ($%d, $%d, $%d, $%d, $%d, $%d)",
                p_jti, p_parent, p_anc, p_tenant, p_sub, pgq_ts(&b, m->exp * 1000000));
    PGresult *r;
    int rc = pgq_pipeline(ss, "record the token", NULL, &b, 1, &r);
    PQclear(r);
    return rc;
}

int access_store_record(pg_pool *pg, int64_t deadline_ms, const jwt_claims *minted, char *err,
                        size_t errlen) {
    arena *ar = arena_create();
    if (!ar) return STATUS_ENOMEM;
    record_args a = {ar, minted};
    int rc = pgq_run(pg, TIER, deadline_ms, MAX_STATEMENT_MS, err, errlen, record, &a);
    arena_free(ar);
    return rc;
}

/* One "is there such a row" query. */
typedef struct {
    const char *what;
    pgq_sql b;
    int *yes;
} exists_args;

static int exists(pgq_session *ss, void *arg) {
    exists_args *a = arg;
    PGresult *r;
    int rc = pgq_pipeline(ss, a->what, NULL, &a->b, 1, &r);
    if (rc == STATUS_OK) *a->yes = PQntuples(r) > 0;
    PQclear(r);
    return rc;
}

int access_store_descends(pg_pool *pg, int64_t deadline_ms, const char *target,
                          const char *ancestor, const char *tenant, int *yes, char *err,
                          size_t errlen) {
    exists_args a = {.what = "token ancestry", .yes = yes};
    *yes = 0;
    pgq_sql_add(&a.b,
                "SELECT 1 FROM issued_tokens WHERE jti = $%d AND tenant = $%d"
                " AND $%d = ANY(ancestors)",
                pgq_text(&a.b, target), pgq_text(&a.b, tenant), pgq_text(&a.b, ancestor));
    return pgq_run(pg, TIER, deadline_ms, MAX_STATEMENT_MS, err, errlen, exists, &a);
}

int access_store_other_tenant(pg_pool *pg, int64_t deadline_ms, const char *target,
                              const char *tenant, int *yes, char *err, size_t errlen) {
    exists_args a = {.what = "token tenant", .yes = yes};
    *yes = 0;
    pgq_sql_add(&a.b, "SELECT 1 FROM issued_tokens WHERE jti = $%d AND tenant <> $%d",
                pgq_text(&a.b, target), pgq_text(&a.b, tenant));
    return pgq_run(pg, TIER, deadline_ms, MAX_STATEMENT_MS, err, errlen, exists, &a);
}
