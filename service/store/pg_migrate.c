/* pg_migrate: apply missing migrations under an advisory lock. */
#include "service/store/pg_migrate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/log.h"

/* Any constant works as long as every memoryd uses the same one. */
#define MIGRATE_LOCK_KEY "7236577163431313"

static int exec_ok(PGconn *conn, const char *sql, char *err, size_t errlen) {
    PGresult *r = PQexec(conn, sql);
    ExecStatusType st = PQresultStatus(r);
    int ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
    if (!ok) {
        const char *m = PQresultErrorMessage(r);
        snprintf(err, errlen, "%.*s", (int)strcspn(m, "\n"), m);
    }
    PQclear(r);
    return ok ? 0 : -1;
}

int pg_migrate_current_version(PGconn *conn) {
    PGresult *r = PQexec(conn, "SELECT coalesce(max(version), 0) FROM schema_migrations");
    int v = PQresultStatus(r) == PGRES_TUPLES_OK ? atoi(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    return v;
}

static int is_applied(PGconn *conn, int version, int *applied) {
    char v[16];
    snprintf(v, sizeof v, "%d", version);
    const char *params[] = {v};
    PGresult *r = PQexecParams(conn, "SELECT 1 FROM schema_migrations WHERE version = $1::int", 1,
                               NULL, params, NULL, NULL, 0);
    int ok = PQresultStatus(r) == PGRES_TUPLES_OK;
    if (ok) *applied = PQntuples(r) > 0;
    PQclear(r);
    return ok ? 0 : -1;
}

static int apply_one(PGconn *conn, const pg_migration *m, char *err, size_t errlen) {
    char why[512];
    if (exec_ok(conn, "BEGIN", why, sizeof why) != 0) goto fail;
    if (exec_ok(conn, m->sql, why, sizeof why) != 0) goto rollback;
    char v[16];
    snprintf(v, sizeof v, "%d", m->version);
    const char *params[] = {v, m->name};
    PGresult *r =
        PQexecParams(conn, "INSERT INTO schema_migrations (version, name) VALUES ($1::int, $2)", 2,
                     NULL, params, NULL, NULL, 0);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok) snprintf(why, sizeof why, "%s", PQresultErrorMessage(r));
    PQclear(r);
    if (!ok) goto rollback;
    if (exec_ok(conn, "COMMIT", why, sizeof why) != 0) goto fail;
    return 0;
rollback:
    exec_ok(conn, "ROLLBACK", err, errlen);
fail:
    snprintf(err, errlen, "migration %d (%s) failed: %s", m->version, m->name, why);
    return -1;
}

int pg_migrate(PGconn *conn, const pg_migration *list, size_t n, int *applied, char *err,
               size_t errlen) {
    *applied = 0;
    for (size_t i = 1; i < n; i++) {
        if (list[i].version <= list[i - 1].version) {
            snprintf(err, errlen, "migration list out of order at version %d", list[i].version);
            return -1;
        }
    }
    char why[512];
    if (exec_ok(conn, "SELECT pg_advisory_lock(" MIGRATE_LOCK_KEY ")", why, sizeof why) != 0) {
        snprintf(err, errlen, "cannot take the migration lock: %s", why);
        return -1;
    }
    int rc = exec_ok(conn,
                     "CREATE TABLE IF NOT EXISTS schema_migrations ("
                     " version integer PRIMARY KEY,"
                     " name text NOT NULL,"
                     " applied_at timestamptz NOT NULL DEFAULT now())",
                     why, sizeof why);
    if (rc != 0) snprintf(err, errlen, "cannot create schema_migrations: %s", why);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        int done = 0;
        if (is_applied(conn, list[i].version, &done) != 0) {
            snprintf(err, errlen, "cannot read schema_migrations");
            rc = -1;
            break;
        }
        if (done) continue;
        rc = apply_one(conn, &list[i], err, errlen);
        if (rc == 0) {
            (*applied)++;
            log_fields(LOG_INFO, "migration applied", LOG_F_INT, "version",
                       (int64_t)list[i].version, LOG_F_STR, "name", list[i].name, LOG_F_END);
        }
    }
    if (rc == 0 && n > 0) {
        int current = pg_migrate_current_version(conn);
        if (current > list[n - 1].version)
            log_fields(LOG_WARN, "database schema is newer than this memoryd", LOG_F_INT,
                       "database_version", (int64_t)current, LOG_F_INT, "known_version",
                       (int64_t)list[n - 1].version, LOG_F_END);
    }
    exec_ok(conn, "SELECT pg_advisory_unlock(" MIGRATE_LOCK_KEY ")", why, sizeof why);
    return rc;
}
