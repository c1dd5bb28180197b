/* audit_listener: the thread behind Audit.Watch: one dedicated libpq
 * connection LISTENing on memoryd_audit (see audit_watch.c for why and for
 * the delivery guarantee), the fetch of announced rows on that connection
 * (with its own statement_timeout), reconnection with backoff and
 * catch-up, and the live checks of open streams once a second. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "service/audit_service/audit_service_internal.h"
#include "service/core/log.h"
#include "service/core/worker.h"

static int64_t now_ms(void) { return rpc_now_ms(); }

static void *arena_alloc_cb(void *ctx, size_t n) { return arena_alloc(ctx, n); }

/* ---- fan-out ---- */

static int recent_has(const audit_watch *w, int64_t id) {
    size_t lo = 0, hi = w->nrecent;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (w->recent[mid] == id) return 1;
        if (w->recent[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return 0;
}

static void close_conn(audit_watch *w);

/* Set by audit_watch_stop (under the lock, with the fetch cancelled). */
static int stopping(audit_watch *w) {
    pthread_mutex_lock(&w->lock);
    int s = w->stop;
    pthread_mutex_unlock(&w->lock);
    return s;
}

static void drop_conn(audit_watch *w, const char *why) {
    if (!w->conn) return;
    log_fields(LOG_WARN, "audit watch lost its PostgreSQL connection; reconnecting", LOG_F_STR,
               "error", why, LOG_F_END);
    close_conn(w);
}

/* Runs a binary-result fetch on the listener connection and fans out its
 * rows. Returns the number of rows, or -1 (connection dropped or query
 * failed; logged). *last_id gets the highest id seen. */
static int fetch(audit_watch *w, const char *sql, int nparams, const char *const *params,
                 uint64_t seq, int skip_recent, int64_t *last_id, int remember) {
    PGresult *r = PQexecParams(w->conn, sql, nparams, NULL, params, NULL, NULL, 1);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        const char *m = PQresultErrorMessage(r);
        char why[256];
        snprintf(why, sizeof why, "%.*s", (int)strcspn(m, "\n"), m);
        PQclear(r);
        if (PQstatus(w->conn) != CONNECTION_OK) drop_conn(w, why);
        else if (!stopping(w)) /* (audit_watch_stop cancels a running fetch) */
            log_fields(LOG_ERROR, "audit watch cannot read announced rows", LOG_F_STR, "error", why,
                       LOG_F_END);
        return -1;
    }
    int rows = PQntuples(r);
    for (int i = 0; i < rows; i++) {
        audit_row row;
        arena_reset(w->scratch);
        if (audit_codec_row(r, i, arena_alloc_cb, w->scratch, &row) != 0) {
            log_msg(LOG_ERROR, "audit watch: cannot decode an audit_log row");
            continue;
        }
        *last_id = row.id;
        if (remember) w->recent[w->nrecent++] = row.id;
        if (skip_recent && recent_has(w, row.id)) continue;
        audit_watch_fan_out(w, &row, seq);
    }
    PQclear(r);
    return rows;
}

/* Rows of one announced batch, in chunks. */
static void deliver_batch(audit_watch *w, int64_t lo, int64_t hi, uint64_t seq) {
    char los[24], his[24], after[24];
    snprintf(los, sizeof los, "%lld", (long long)lo);
    snprintf(his, sizeof his, "%lld", (long long)hi);
    int64_t last = lo - 1;
    for (;;) {
        snprintf(after, sizeof after, "%lld", (long long)last);
        const char *v[3] = {los, his, after};
        int rows = fetch(w,
                         "SELECT " AUDIT_COLUMNS " FROM audit_log WHERE id BETWEEN $1 AND $2"
                         " AND id > $3 AND xmin = (SELECT xmin FROM audit_log WHERE id = $1)"
                         " ORDER BY id LIMIT 1000",
                         3, v, seq, 1, &last, 0);
        if (rows < FETCH_CHUNK) return;
    }
}

/* "<lo> <hi>", both decimal, lo <= hi. */
static int parse_payload(const char *s, int64_t *lo, int64_t *hi) {
    char *end;
    long long a = strtoll(s, &end, 10);
    if (end == s || *end != ' ') return -1;
    const char *t = end + 1;
    long long b = strtoll(t, &end, 10);
    if (end == t || *end != '\0' || a <= 0 || b < a) return -1;
    *lo = a;
    *hi = b;
    return 0;
}

static void handle_notifications(audit_watch *w) {
    PGnotify *nf;
    while (w->conn && (nf = PQnotifies(w->conn)) != NULL) {
        int64_t lo, hi;
        if (strcmp(nf->relname, AUDIT_CHANNEL) == 0 && parse_payload(nf->extra, &lo, &hi) == 0) {
            pthread_mutex_lock(&w->lock);
            uint64_t seq = ++w->seq;
            int any = w->n > 0;
            pthread_mutex_unlock(&w->lock);
            if (hi > w->max_seen) w->max_seen = hi;
            if (any) deliver_batch(w, lo, hi, seq);
        }
        PQfreemem(nf);
    }
}

/* ---- the connection ---- */

/* Copies the parameters of a pooled connection so the listener connects
 * exactly where the pool does, without knowing the URL. */
static int load_conninfo(audit_watch *w, char *err, size_t errlen) {
    PGconn *c = pg_pool_acquire(w->a->pg, now_ms() + 2000, err, errlen);
    if (!c) return -1;
    PQconninfoOption *opts = PQconninfo(c);
    pg_pool_release(w->a->pg, c, 0);
    if (!opts) return snprintf(err, errlen, "out of memory"), -1;
    size_t n = 1, size = sizeof "memoryd-audit-listen";
    for (PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val || !o->val[0] || strcmp(o->keyword, "application_name") == 0) continue;
        n++;
        size += strlen(o->keyword) + strlen(o->val) + 2;
    }
    /* One block: the keys, the values (each NULL-terminated), the text. */
    const char **block = malloc(2 * (n + 1) * sizeof *block + size);
    if (!block) {
        PQconninfoFree(opts);
        return snprintf(err, errlen, "out of memory"), -1;
    }
    w->keys = block;
    w->vals = block + n + 1;
    w->keys[n] = w->vals[n] = NULL;
    char *s = (char *)(block + 2 * (n + 1));
    size_t i = 0;
    for (PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val || !o->val[0] || strcmp(o->keyword, "application_name") == 0) continue;
        w->keys[i] = strcpy(s, o->keyword);
        s += strlen(s) + 1;
        w->vals[i++] = strcpy(s, o->val);
        s += strlen(s) + 1;
    }
    w->keys[i] = "application_name";
    w->vals[i] = strcpy(s, "memoryd-audit-listen");
    PQconninfoFree(opts);
    return 0;
}

/* The highest id handed out so far. Read from the sequence, not with
 * max(id): that would wait behind any lock on the table. */
static int64_t max_id(PGconn *c) {
    PGresult *r = PQexec(c, "SELECT coalesce(pg_sequence_last_value("
                            "pg_get_serial_sequence('audit_log', 'id')::regclass), 0)");
    int64_t v = PQresultStatus(r) == PGRES_TUPLES_OK ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : -1;
    PQclear(r);
    return v;
}

static int connect_listener(audit_watch *w, char *err, size_t errlen) {
    if (!w->keys && load_conninfo(w, err, errlen) != 0) return -1;
    PGconn *c = PQconnectdbParams(w->keys, w->vals, 0);
    if (!c || PQstatus(c) != CONNECTION_OK) {
        const char *m = c ? PQerrorMessage(c) : "out of memory";
        snprintf(err, errlen, "%.*s", (int)strcspn(m, "\n"), m);
        PQfinish(c);
        return -1;
    }
    char sql[96];
    snprintf(sql, sizeof sql, "SET statement_timeout = %d; LISTEN " AUDIT_CHANNEL,
             LISTENER_TIMEOUT_MS);
    PGresult *r = PQexec(c, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok) {
        const char *m = PQresultErrorMessage(r);
        snprintf(err, errlen, "%.*s", (int)strcspn(m, "\n"), m);
    }
    PQclear(r);
    if (!ok) {
        PQfinish(c);
        return -1;
    }
    PGcancel *cancel = PQgetCancel(c);
    pthread_mutex_lock(&w->lock);
    w->conn = c;
    w->cancel = cancel;
    pthread_mutex_unlock(&w->lock);
    return 0;
}

/* Closes the listener connection (listener thread only). */
static void close_conn(audit_watch *w) {
    pthread_mutex_lock(&w->lock);
    PGcancel *cancel = w->cancel;
    w->cancel = NULL;
    w->listening = 0;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    PQfreeCancel(cancel);
    PQfinish(w->conn);
    w->conn = NULL;
}

/* After a reconnect: rows announced while we were not listening. */
static void catch_up(audit_watch *w) {
    free(w->recent);
    w->recent = NULL;
    w->nrecent = 0;
    pthread_mutex_lock(&w->lock);
    uint64_t seq = ++w->seq;
    int any = w->n > 0;
    pthread_mutex_unlock(&w->lock);
    if (!any || !(w->recent = malloc(CATCHUP_MAX * sizeof *w->recent))) {
        int64_t m = max_id(w->conn);
        if (m > w->max_seen) w->max_seen = m;
        return;
    }
    char after[24], limit[24];
    snprintf(after, sizeof after, "%lld", (long long)w->max_seen);
    snprintf(limit, sizeof limit, "%d", CATCHUP_MAX);
    const char *v[2] = {after, limit};
    int64_t last = w->max_seen;
    int rows =
        fetch(w, "SELECT " AUDIT_COLUMNS " FROM audit_log WHERE id > $1 ORDER BY id LIMIT $2", 2, v,
              seq, 0, &last, 1);
    if (rows == CATCHUP_MAX)
        log_fields(LOG_WARN,
                   "audit watch: more records than it catches up were written while "
                   "it was disconnected; some were not streamed",
                   LOG_F_INT, "caught_up", (int64_t)rows, LOG_F_END);
    if (last > w->max_seen) w->max_seen = last;
}

/* ---- the thread ---- */

void audit_listener_main(worker *thread, void *arg) {
    audit_watch *w = arg;
    int backoff = BACKOFF_MIN_MS, connected_before = 0;
    int64_t next_live = now_ms() + LIVE_CHECK_MS, last_err_log = 0;
    while (!worker_stopping(thread)) {
        if (!w->conn) {
            char err[512] = "";
            if (connect_listener(w, err, sizeof err) != 0) {
                int64_t now = now_ms();
                if (!last_err_log || now - last_err_log >= 30000) {
                    last_err_log = now;
                    log_fields(LOG_WARN, "audit watch cannot LISTEN; retrying", LOG_F_STR, "error",
                               err, LOG_F_END);
                }
                worker_nap(thread, backoff);
                backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
                if (now_ms() >= next_live) {
                    audit_watch_check_live(w);
                    next_live = now_ms() + LIVE_CHECK_MS;
                }
                continue;
            }
            backoff = BACKOFF_MIN_MS;
            last_err_log = 0;
            if (connected_before) {
                catch_up(w);
            } else {
                int64_t m = max_id(w->conn);
                if (m > w->max_seen) w->max_seen = m;
            }
            connected_before = 1;
            if (!w->conn) continue;
            pthread_mutex_lock(&w->lock);
            w->listening = 1;
            pthread_cond_broadcast(&w->cond);
            pthread_mutex_unlock(&w->lock);
        }
        handle_notifications(w);
        if (now_ms() >= next_live) {
            audit_watch_check_live(w);
            next_live = now_ms() + LIVE_CHECK_MS;
        }
        if (!w->conn) continue;
        struct pollfd pfd[2] = {{.fd = PQsocket(w->conn), .events = POLLIN},
                                {.fd = w->wake_fd, .events = POLLIN}};
        int pr = poll(pfd, 2, POLL_MS);
        if (pr > 0 && pfd[0].revents && !PQconsumeInput(w->conn)) {
            char why[256];
            snprintf(why, sizeof why, "%.*s", (int)strcspn(PQerrorMessage(w->conn), "\n"),
                     PQerrorMessage(w->conn));
            drop_conn(w, why);
        }
    }
    if (w->conn) close_conn(w);
}
