/* audit_keeper: partitions made, dropped and pruned; see audit_keeper.h. */
#include "service/audit/audit_keeper.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/core/log.h"
#include "service/core/text.h"

#define PREFIX "audit_log_upto_"
#define DAY_US (86400LL * 1000000)

int audit_keeper_partition_end(const char *name, int64_t *end_us) {
    size_t pl = strlen(PREFIX);
    if (strncmp(name, PREFIX, pl) != 0 || strlen(name) != pl + 8) return -1;
    struct tm tm = {0};
    int v[3], widths[3] = {4, 2, 2};
    const char *p = name + pl;
    for (int i = 0; i < 3; i++) {
        v[i] = 0;
        for (int k = 0; k < widths[i]; k++, p++) {
            if (*p < '0' || *p > '9') return -1;
            v[i] = v[i] * 10 + (*p - '0');
        }
    }
    if (v[0] < 1970 || v[1] < 1 || v[1] > 12 || v[2] < 1 || v[2] > 31) return -1;
    tm.tm_year = v[0] - 1900;
    tm.tm_mon = v[1] - 1;
    tm.tm_mday = v[2];
    time_t t = timegm(&tm);
    if (t < 0) return -1;
    *end_us = (int64_t)t * 1000000;
    return 0;
}

/* Runs sql (no parameters but vals): its result when it succeeded, else
 * NULL with err. */
static PGresult *run(PGconn *conn, const char *sql, int n, const char *const *vals,
                     ExecStatusType want, char *err, size_t errlen) {
    PGresult *r = PQexecParams(conn, sql, n, NULL, vals, NULL, NULL, 0);
    if (PQresultStatus(r) == want) return r;
    text_errf(err, errlen, "audit trail: %s", PQresultErrorMessage(r));
    PQclear(r);
    return NULL;
}

int audit_keeper_make_ahead(PGconn *conn, int *made, char *err, size_t errlen) {
    char days[8];
    snprintf(days, sizeof days, "%d", AUDIT_KEEPER_DAYS_AHEAD);
    const char *v[1] = {days};
    PGresult *r = run(conn,
                      "SELECT memoryd_audit_partitions((now() AT TIME ZONE 'UTC')::date, "
                      "$1::int)",
                      1, v, PGRES_TUPLES_OK, err, errlen);
    if (!r) return -1;
    *made = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return 0;
}

/* The day partitions, oldest first, with their sizes. */
typedef struct part {
    char name[64];
    int64_t end_us, bytes;
} part;

static int list_parts(PGconn *conn, part **out, int *n, int64_t *default_bytes, char *err,
                      size_t errlen) {
    PGresult *r = run(conn,
                      "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_inherits i"
                      " JOIN pg_class c ON c.oid = i.inhrelid"
                      " WHERE i.inhparent = 'audit_log'::regclass ORDER BY c.relname",
                      0, NULL, PGRES_TUPLES_OK, err, errlen);
    if (!r) return -1;
    int rows = PQntuples(r), k = 0;
    part *p = calloc((size_t)rows + 1, sizeof *p);
    if (!p) {
        PQclear(r);
        return text_errf(err, errlen, "audit trail: out of memory"), -1;
    }
    *default_bytes = 0;
    for (int i = 0; i < rows; i++) {
        const char *name = PQgetvalue(r, i, 0);
        int64_t bytes = atoll(PQgetvalue(r, i, 1)), end;
        if (audit_keeper_partition_end(name, &end) != 0) {
            *default_bytes += bytes; /* the default partition */
            continue;
        }
        snprintf(p[k].name, sizeof p[k].name, "%s", name);
        p[k].end_us = end;
        p[k++].bytes = bytes;
    }
    PQclear(r);
    *out = p;
    *n = k;
    return 0;
}

/* Drops one day partition (its name checked by audit_keeper_partition_end:
 * the identifier is safe to quote). */
static int drop(PGconn *conn, const part *p, const char *why, char *err, size_t errlen) {
    char sql[128];
    snprintf(sql, sizeof sql, "DROP TABLE \"%s\"", p->name);
    PGresult *r = run(conn, sql, 0, NULL, PGRES_COMMAND_OK, err, errlen);
    if (!r) return -1;
    PQclear(r);
    log_fields(LOG_INFO, "audit trail: a day's partition dropped", LOG_F_STR, "partition", p->name,
               LOG_F_STR, "reason", why, LOG_F_INT, "bytes", p->bytes, LOG_F_END);
    return 0;
}

/* A drop takes the lock writes of the trail wait behind: it waits for it
 * at most this long (then the next sweep tries again), so writes queue
 * behind it no longer. */
#define DROP_LOCK_TIMEOUT "SET lock_timeout = '200ms'"

static int keep(PGconn *conn, const audit_keeper_policy *pol, int64_t now_us,
                audit_keeper_report *out, char *err, size_t errlen);

int audit_keeper_run(PGconn *conn, const audit_keeper_policy *pol, int64_t now_us,
                     audit_keeper_report *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    PGresult *r = run(conn, DROP_LOCK_TIMEOUT, 0, NULL, PGRES_COMMAND_OK, err, errlen);
    if (!r) return -1;
    PQclear(r);
    int rc = keep(conn, pol, now_us, out, err, errlen);
    PQclear(PQexec(conn, "RESET lock_timeout")); /* the pool's connection, as it was */
    return rc;
}

static int keep(PGconn *conn, const audit_keeper_policy *pol, int64_t now_us,
                audit_keeper_report *out, char *err, size_t errlen) {
    if (audit_keeper_make_ahead(conn, &out->made, err, errlen) != 0) return -1;
    part *parts = NULL;
    int n = 0, first = 0, rc = 0;
    int64_t default_bytes = 0;
    if (list_parts(conn, &parts, &n, &default_bytes, err, errlen) != 0) return -1;
    int64_t cutoff = pol->retention_s ? now_us - pol->retention_s * 1000000 : INT64_MIN;
    /* Past the retention: every row of a partition ending by the cutoff. */
    while (rc == 0 && first < n && parts[first].end_us <= cutoff) {
        if ((rc = drop(conn, &parts[first], "retention", err, errlen)) == 0) {
            out->dropped_age++;
            first++;
        }
    }
    if (rc == 0 && pol->retention_s) {
        char when[40];
        time_t s = (time_t)(cutoff / 1000000);
        struct tm tm;
        gmtime_r(&s, &tm);
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S+00", &tm);
        const char *v[1] = {when};
        PGresult *r = run(conn, "DELETE FROM audit_log_default WHERE time < $1::timestamptz", 1, v,
                          PGRES_COMMAND_OK, err, errlen);
        if (!r) rc = -1;
        else out->pruned_rows = atoll(PQcmdTuples(r));
        PQclear(r);
    }
    int64_t total = default_bytes;
    for (int i = first; i < n; i++) total += parts[i].bytes;
    /* The size guard: the oldest days first, never today's or later (a
     * partition ending after today's midnight still takes rows). */
    int64_t today = now_us - now_us % DAY_US;
    while (rc == 0 && pol->max_bytes && total > pol->max_bytes && first < n &&
           parts[first].end_us <= today) {
        if ((rc = drop(conn, &parts[first], "size guard (--audit-max-mib)", err, errlen)) == 0) {
            total -= parts[first].bytes;
            out->dropped_size++;
            first++;
        }
    }
    if (rc == 0 && pol->max_bytes && total > pol->max_bytes)
        log_fields(LOG_WARN,
                   "audit trail: over its size guard with nothing left to drop but today's "
                   "rows",
                   LOG_F_INT, "bytes", total, LOG_F_INT, "max_bytes", pol->max_bytes, LOG_F_END);
    out->bytes = total;
    out->partitions = n - first;
    out->oldest_us = first < n ? parts[first].end_us : 0;
    free(parts);
    return rc;
}
