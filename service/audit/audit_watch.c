/* audit_watch: Audit.Watch and the listener thread behind it.
 *
 * One dedicated libpq connection (not from the pool: it sits in LISTEN for
 * the life of the process) receives "<lo> <hi>" on memoryd_audit each time
 * any replica inserts a batch. The thread fetches those rows — ids in
 * [lo, hi] written by the same statement, i.e. with the xmin of row lo, so
 * rows of a concurrent batch whose ids interleave are not delivered twice
 * — and hands each to every stream whose tenant, breadth and filter match.
 *
 * Delivery guarantee: a stream is registered (under the lock the listener
 * fans out under) before its handler returns, and only while LISTEN is
 * active, so any row committed after that is announced to us later and
 * delivered. Notifications are numbered as they are read; a stream gets
 * rows of notifications read after it registered, never older history.
 * If the connection drops, the thread reconnects with backoff and catches
 * up (up to CATCHUP_MAX rows with ids above the highest seen); rows with
 * lower ids committed during the gap are missed (the proto promises
 * "roughly").
 *
 * The listener's fetches run on its own LISTEN connection (they must see
 * the rows the notification announced), with their own statement_timeout.
 *
 * Slow streams: fan-out never blocks (rpc_call_send only queues), so a
 * slow client cannot hold up the others. What a client that stops reading
 * costs is not bounded yet: the runtime queues its messages without limit
 * and rpc.h does not say how many are pending. With such a count the
 * policy would be drop-and-end: finish the stream with RESOURCE_EXHAUSTED
 * (an audit consumer must not silently miss records; it can reconnect and
 * List the gap). */
#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/audit/audit_service_internal.h"
#include "service/core/log.h"

#define LISTEN_WAIT_MS 5000  /* how long a new Watch waits for LISTEN to be up */
#define POLL_MS 250
#define LIVE_CHECK_MS 1000
#define FETCH_CHUNK 1000
#define CATCHUP_MAX 10000
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define LISTENER_TIMEOUT_MS 10000 /* statement_timeout on the listener connection */

typedef struct watcher {
    struct watcher *next;
    rpc_call *call;
    principal *p; /* our reference: tenant and sub below point into it */
    const char *tenant;
    audit_filter f; /* strings in strs */
    char *strs;
    uint64_t start_seq; /* notifications read before the stream registered */
    char why[192];      /* why the listener ends it */
} watcher;

struct audit_watch {
    audit_service *a;
    pthread_mutex_t lock; /* list, n, listening, seq, stop */
    pthread_cond_t cond;  /* listening or stop changed */
    watcher *list;
    size_t n;
    int listening;
    int stop;
    uint64_t seq;
    pthread_t thread;
    int wake_fd; /* eventfd: audit_watch_stop interrupts the poll */

    /* Listener thread only. */
    PGconn *conn;
    PGcancel *cancel; /* for conn; guarded by lock (audit_watch_stop uses it) */
    const char **keys, **vals; /* connection parameters, copied from a pooled connection */
    char *kv_strs;
    int64_t max_seen;  /* highest audit_log id announced or caught up */
    int64_t *recent;   /* ids delivered by the last catch-up (sorted) */
    size_t nrecent;
    arena *scratch;    /* target arrays of fetched rows */
};

static int64_t now_ms(void) { return rpc_now_ms(); }

static struct timespec mono_abs(int64_t ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    return ts;
}

static void *arena_alloc_cb(void *ctx, size_t n) { return arena_alloc(ctx, n); }

/* ---- watchers ---- */

static void watcher_free(watcher *wt) {
    if (!wt) return;
    principal_unref(wt->p);
    free(wt->strs);
    free(wt);
}

static watcher *watcher_new(const principal *p, const audit_filter *f) {
    watcher *wt = calloc(1, sizeof *wt);
    if (!wt) return NULL;
    const char *src[4] = {f->principal, f->method, f->service_prefix, f->target};
    const char **dst[4] = {&wt->f.principal, &wt->f.method, &wt->f.service_prefix,
                           &wt->f.target};
    size_t size = 1;
    for (int i = 0; i < 4; i++) size += src[i] ? strlen(src[i]) + 1 : 0;
    if (!(wt->strs = malloc(size))) {
        free(wt);
        return NULL;
    }
    char *s = wt->strs;
    for (int i = 0; i < 4; i++) {
        if (!src[i]) continue;
        size_t n = strlen(src[i]) + 1;
        memcpy(s, src[i], n);
        *dst[i] = s;
        s += n;
    }
    wt->p = (principal *)p;
    principal_ref(wt->p);
    wt->tenant = principal_tenant(p);
    return wt;
}

/* Unlinks call's watcher; NULL when the listener already ended it.
 * Caller holds w->lock. */
static watcher *unlink_call_locked(audit_watch *w, rpc_call *call) {
    for (watcher **pp = &w->list; *pp; pp = &(*pp)->next) {
        if ((*pp)->call == call) {
            watcher *wt = *pp;
            *pp = wt->next;
            w->n--;
            return wt;
        }
    }
    return NULL;
}

/* The client cancelled, the deadline passed, or the server is shutting
 * down (it cancels open streams): the runtime cannot tell us which. */
static void on_cancel(rpc_call *call, void *arg) {
    audit_watch *w = arg;
    pthread_mutex_lock(&w->lock);
    watcher *wt = unlink_call_locked(w, call);
    pthread_mutex_unlock(&w->lock);
    if (!wt) return;
    if (rpc_call_remaining_ms(call) == 0)
        rpc_call_finish(call, GRPC_STATUS_DEADLINE_EXCEEDED, "audit: the stream's deadline passed");
    else
        rpc_call_finish(call, GRPC_STATUS_UNAVAILABLE,
                        "audit: the stream was cancelled (by the client or server shutdown)");
    watcher_free(wt);
}

grpc_status_code audit_watch_handler(rpc_call *call, const ProtobufCMessage *msg, void *arg) {
    audit_service *a = arg;
    audit_watch *w = a->watch;
    const Memory__V1__AuditWatchRequest *req = (const Memory__V1__AuditWatchRequest *)msg;
    const principal *p = rpc_call_principal(call);
    if (!p) {
        rpc_call_set_error(call, "audit: Audit.Watch needs a verified token");
        return GRPC_STATUS_UNAUTHENTICATED;
    }
    principal_breadth breadth = principal_scope(p, AUDIT_SCOPE);
    if (breadth == PRINCIPAL_DENY) {
        rpc_call_set_error(call, "audit: Audit.Watch needs the audit:read scope");
        return GRPC_STATUS_PERMISSION_DENIED;
    }
    audit_filter f;
    char err[256];
    int frc = audit_codec_filter(req->filter, principal_sub(p), breadth, rpc_call_arena(call), &f,
                                 err, sizeof err);
    if (frc != 0) {
        rpc_call_set_error(call, "%s", err);
        return frc == STATUS_EDENIED ? GRPC_STATUS_PERMISSION_DENIED
                                         : GRPC_STATUS_INVALID_ARGUMENT;
    }
    watcher *wt = watcher_new(p, &f);
    if (!wt) {
        rpc_call_set_error(call, "out of memory");
        return GRPC_STATUS_RESOURCE_EXHAUSTED;
    }
    int64_t until = now_ms() + LISTEN_WAIT_MS;
    if (rpc_call_deadline_ms(call) < until) until = rpc_call_deadline_ms(call);
    grpc_status_code st = GRPC_STATUS_OK;
    pthread_mutex_lock(&w->lock);
    while (!w->listening && !w->stop && now_ms() < until) {
        struct timespec ts = mono_abs(until);
        pthread_cond_timedwait(&w->cond, &w->lock, &ts);
    }
    if (w->stop) {
        rpc_call_set_error(call, "audit: the server is shutting down");
        st = GRPC_STATUS_UNAVAILABLE;
    } else if (!w->listening) {
        rpc_call_set_error(call, "audit: the audit change feed is not connected to PostgreSQL; "
                                 "retry with backoff");
        st = GRPC_STATUS_UNAVAILABLE;
    } else if (w->n >= a->o.max_watchers) {
        rpc_call_set_error(call, "audit: too many open Audit.Watch streams (at most %zu)",
                           a->o.max_watchers);
        st = GRPC_STATUS_RESOURCE_EXHAUSTED;
    } else if (rpc_call_on_cancel(call, on_cancel, w) != 0) {
        st = GRPC_STATUS_CANCELLED; /* already gone: end it now */
    } else {
        wt->call = call;
        wt->start_seq = w->seq;
        wt->next = w->list;
        w->list = wt;
        w->n++;
        wt = NULL;
    }
    pthread_mutex_unlock(&w->lock);
    if (wt) {
        watcher_free(wt);
        return st;
    }
    return RPC_PENDING;
}

size_t audit_watch_count(audit_service *a) {
    audit_watch *w = a->watch;
    if (!w) return 0;
    pthread_mutex_lock(&w->lock);
    size_t n = w->n;
    pthread_mutex_unlock(&w->lock);
    return n;
}

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

static void fan_out(audit_watch *w, const audit_row *row, uint64_t seq) {
    Memory__V1__AuditRecord rec;
    Google__Protobuf__Timestamp ts;
    Google__Protobuf__Duration d;
    char idbuf[24];
    audit_codec_record(row, &rec, &ts, &d, idbuf);
    Memory__V1__AuditWatchResponse resp = MEMORY__V1__AUDIT_WATCH_RESPONSE__INIT;
    resp.record = &rec;
    pthread_mutex_lock(&w->lock);
    for (watcher *wt = w->list; wt; wt = wt->next) {
        if (seq <= wt->start_seq || strcmp(wt->tenant, row->tenant) != 0 ||
            !audit_codec_filter_match(&wt->f, row))
            continue;
        /* -1 means the stream is ending; its cancel callback unlinks it. */
        rpc_call_send(wt->call, &resp.base);
    }
    pthread_mutex_unlock(&w->lock);
}

static void close_conn(audit_watch *w);
static int stopping(audit_watch *w);

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
            log_fields(LOG_ERROR, "audit watch cannot read announced rows", LOG_F_STR, "error",
                       why, LOG_F_END);
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
        fan_out(w, &row, seq);
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
    w->keys = calloc(n + 1, sizeof *w->keys);
    w->vals = calloc(n + 1, sizeof *w->vals);
    w->kv_strs = malloc(size);
    if (!w->keys || !w->vals || !w->kv_strs) {
        PQconninfoFree(opts);
        free(w->keys);
        free(w->vals);
        free(w->kv_strs);
        w->keys = w->vals = NULL;
        w->kv_strs = NULL;
        return snprintf(err, errlen, "out of memory"), -1;
    }
    char *s = w->kv_strs;
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
    int rows = fetch(w,
                     "SELECT " AUDIT_COLUMNS " FROM audit_log WHERE id > $1 ORDER BY id LIMIT $2",
                     2, v, seq, 0, &last, 1);
    if (rows == CATCHUP_MAX)
        log_fields(LOG_WARN, "audit watch: more records than it catches up were written while "
                   "it was disconnected; some were not streamed", LOG_F_INT, "caught_up",
                   (int64_t)rows, LOG_F_END);
    if (last > w->max_seen) w->max_seen = last;
}

/* ---- live checks ---- */

static void check_live(audit_watch *w) {
    const audit_service_options *o = &w->a->o;
    int64_t now_s = (int64_t)time(NULL);
    watcher *dead = NULL;
    pthread_mutex_lock(&w->lock);
    for (watcher **pp = &w->list; *pp;) {
        watcher *wt = *pp;
        char err[160] = "";
        int bad;
        if (o->check_live) {
            bad = o->check_live(o->check_live_ctx, wt->p, err, sizeof err) != 0;
        } else {
            bad = principal_claims(wt->p)->exp <= now_s;
            snprintf(err, sizeof err, "the token expired");
        }
        if (!bad) {
            pp = &wt->next;
            continue;
        }
        snprintf(wt->why, sizeof wt->why, "audit: %s",
                 err[0] ? err : "the token is no longer valid");
        *pp = wt->next;
        w->n--;
        wt->next = dead;
        dead = wt;
    }
    pthread_mutex_unlock(&w->lock);
    while (dead) {
        watcher *wt = dead;
        dead = wt->next;
        rpc_call_finish(wt->call, GRPC_STATUS_UNAUTHENTICATED, wt->why);
        watcher_free(wt);
    }
}

/* ---- the thread ---- */

static int stopping(audit_watch *w) {
    pthread_mutex_lock(&w->lock);
    int s = w->stop;
    pthread_mutex_unlock(&w->lock);
    return s;
}

static void sleep_unless_stopped(audit_watch *w, int ms) {
    int64_t until = now_ms() + ms;
    pthread_mutex_lock(&w->lock);
    while (!w->stop && now_ms() < until) {
        struct timespec ts = mono_abs(until);
        pthread_cond_timedwait(&w->cond, &w->lock, &ts);
    }
    pthread_mutex_unlock(&w->lock);
}

static void *listen_main(void *arg) {
    audit_watch *w = arg;
    int backoff = BACKOFF_MIN_MS, connected_before = 0;
    int64_t next_live = now_ms() + LIVE_CHECK_MS, last_err_log = 0;
    while (!stopping(w)) {
        if (!w->conn) {
            char err[512] = "";
            if (connect_listener(w, err, sizeof err) != 0) {
                int64_t now = now_ms();
                if (!last_err_log || now - last_err_log >= 30000) {
                    last_err_log = now;
                    log_fields(LOG_WARN, "audit watch cannot LISTEN; retrying", LOG_F_STR,
                               "error", err, LOG_F_END);
                }
                sleep_unless_stopped(w, backoff);
                backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
                if (now_ms() >= next_live) {
                    check_live(w);
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
            check_live(w);
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
    return NULL;
}

int audit_watch_start(audit_service *a, char *err, size_t errlen) {
    audit_watch *w = calloc(1, sizeof *w);
    if (!w || !(w->scratch = arena_create())) {
        free(w);
        return snprintf(err, errlen, "audit: out of memory"), -1;
    }
    w->a = a;
    if ((w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
        snprintf(err, errlen, "audit: eventfd: %s", strerror(errno));
        arena_free(w->scratch);
        free(w);
        return -1;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&w->thread, NULL, listen_main, w);
    if (rc != 0) {
        snprintf(err, errlen, "audit: cannot start the listener thread: %s", strerror(rc));
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        close(w->wake_fd);
        arena_free(w->scratch);
        free(w);
        return -1;
    }
    a->watch = w;
    return 0;
}

void audit_watch_stop(audit_service *a) {
    audit_watch *w = a->watch;
    if (!w) return;
    pthread_mutex_lock(&w->lock);
    w->stop = 1;
    pthread_cond_broadcast(&w->cond);
    /* The thread may sit in a fetch (behind a lock on the table): cancel
     * it rather than wait for its statement_timeout. */
    char buf[256];
    if (w->cancel) PQcancel(w->cancel, buf, sizeof buf);
    pthread_mutex_unlock(&w->lock);
    uint64_t one = 1;
    if (write(w->wake_fd, &one, sizeof one) < 0) {
        /* cannot fail on a fresh eventfd; the poll times out anyway */
    }
    pthread_join(w->thread, NULL);
    /* Streams still open (audit_free before the server shut down). */
    pthread_mutex_lock(&w->lock);
    watcher *list = w->list;
    w->list = NULL;
    w->n = 0;
    pthread_mutex_unlock(&w->lock);
    while (list) {
        watcher *wt = list;
        list = wt->next;
        rpc_call_finish(wt->call, GRPC_STATUS_UNAVAILABLE, "audit: the server is shutting down");
        watcher_free(wt);
    }
    a->watch = NULL;
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w->keys);
    free(w->vals);
    free(w->kv_strs);
    free(w->recent);
    close(w->wake_fd);
    arena_free(w->scratch);
    free(w);
}
