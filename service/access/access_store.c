/* access_store: issued_tokens statements; see access_store.h. */
#include "service/access/access_store.h"

int access_store_record_sql(pgq_sql *b, arena *ar, const jwt_claims *m) {
    const char *anc = pgq_array_literal(ar, (const char *const *)m->anc, m->nanc);
    if (!anc) return -1;
    int p_jti = pgq_text(b, m->jti);
    int p_parent = pgq_text(b, m->parent);
    int p_anc = pgq_text_array(b, anc);
    int p_tenant = pgq_text(b, m->tenant);
    int p_sub = pgq_text(b, m->sub);
    pgq_sql_add(b,
                "INSERT INTO issued_tokens (jti, parent_jti, ancestors, tenant, principal,"
                " expires_at) VALUES ($%d, $%d, $%d, $%d, $%d, $%d)",
                p_jti, p_parent, p_anc, p_tenant, p_sub, pgq_ts(b, m->exp * 1000000));
    return 0;
}

void access_store_ancestry_sql(pgq_sql *b, const char *target, const char *ancestor,
                               const char *tenant) {
    int p_target = pgq_text(b, target);
    int p_tenant = pgq_text(b, tenant);
    pgq_sql_add(b,
                "SELECT EXISTS (SELECT 1 FROM issued_tokens WHERE jti = $%d AND tenant = $%d"
                " AND $%d = ANY(ancestors)),"
                " EXISTS (SELECT 1 FROM issued_tokens WHERE jti = $%d AND tenant <> $%d)",
                p_target, p_tenant, pgq_text(b, ancestor), p_target, p_tenant);
}

int access_store_ancestry(const PGresult *r, int *descends, int *foreign) {
    if (PQntuples(r) != 1 || PQnfields(r) != 2) return -1;
    return pgq_col_bool(r, 0, 0, descends) == 0 && pgq_col_bool(r, 0, 1, foreign) == 0 ? 0 : -1;
}
