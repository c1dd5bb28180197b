/* server_secret: shared secrets in PostgreSQL; see server_secret.h. */
#include "service/store/server_secret.h"

#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>

#include "service/core/clock.h"
#include "service/core/status.h"
#include "service/store/pgq.h"

#define TIMEOUT_MS 5000

typedef struct {
    const char *name;
    const unsigned char *fresh;
    unsigned char *out;
    int found;
} secret_args;

/* Inserts fresh unless the name exists, and reads what is stored. A
 * replica that lost the race to insert may not see the winner's row in
 * this statement's snapshot: found = 0, and the caller asks again. */
static int fetch(pgq_session *ss, void *arg) {
    secret_args *a = arg;
    pgq_sql b = {0};
    int p_name = pgq_text(&b, a->name);
    pgq_sql_add(&b,
                "WITH ins AS (INSERT INTO server_secrets (name, value) VALUES ($%d, $%d)"
                " ON CONFLICT (name) DO NOTHING RETURNING value)"
                " SELECT value FROM ins UNION ALL"
                " SELECT value FROM server_secrets WHERE name = $%d LIMIT 1",
                p_name, pgq_bytes(&b, a->fresh, SERVER_SECRET_LEN), p_name);
    PGresult *r;
    int rc = pgq_pipeline(ss, "reading a server secret", NULL, &b, 1, &r);
    if (rc != STATUS_OK) return rc;
    a->found = PQntuples(r) == 1;
    if (a->found && PQgetlength(r, 0, 0) != SERVER_SECRET_LEN)
        rc = pgq_fail(ss, STATUS_EINTERNAL, "server secret %s has %d bytes, want %d", a->name,
                      PQgetlength(r, 0, 0), SERVER_SECRET_LEN);
    else if (a->found) memcpy(a->out, PQgetvalue(r, 0, 0), SERVER_SECRET_LEN);
    PQclear(r);
    return rc;
}

int server_secret_get(pg_pool *pg, const char *name, unsigned char *out, char *err, size_t errlen) {
    unsigned char fresh[SERVER_SECRET_LEN];
    if (RAND_bytes(fresh, sizeof fresh) != 1)
        return snprintf(err, errlen, "no entropy for server secret %s", name), -1;
    secret_args a = {name, fresh, out, 0};
    for (int attempt = 0; attempt < 3 && !a.found; attempt++) {
        if (pgq_run(pg, "secrets", clock_mono_ms(NULL) + TIMEOUT_MS, TIMEOUT_MS, NULL, err, errlen,
                    fetch, &a) != STATUS_OK)
            return -1;
    }
    memset(fresh, 0, sizeof fresh);
    if (!a.found) return snprintf(err, errlen, "server secret %s: not readable", name), -1;
    return 0;
}
