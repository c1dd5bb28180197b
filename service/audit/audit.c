/* audit: the trail: the observer, the bounded queue and the writer
 * thread; see audit.h. The observer copies each record into one malloc'd block and
 * hands it to the queue under a mutex held for a pointer store; the writer
 * takes up to batch_max records at a time and inserts them with one COPY
 * (one statement, so one trigger run and one NOTIFY per batch). */
#include "service/audit/audit.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/audit/audit_codec.h"
#include "service/core/clock.h"
#include "service/core/log.h"

#define DEFAULT_QUEUE 65536
#define DEFAULT_BATCH 512
#define DEFAULT_FLUSH_MS 5000
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define OUTAGE_LOG_EVERY_MS 30000
/* The writer's bound on waiting for a pooled connection and on one COPY. */
#define WRITE_TIMEOUT_MS 5000

/* Outcome of one attempt at writing a batch. */
#define W_OK 0
#define W_RETRY 1 /* the connection or the server: try again later */
#define W_FATAL 2 /* PostgreSQL refused the rows themselves */

struct audit {
    pg_pool *pg;
    audit_options o;

    /* The queue: a ring of record pointers, guarded by qlock. */
    pthread_mutex_t qlock;
    pthread_cond_t qwake; /* the writer: records arrived, or stop */
    pthread_cond_t qdone; /* audit_flush / audit_free: the writer made progress */
    audit_rec **ring;
    size_t head, count;
    uint64_t enq_seq, done_seq; /* records entered / finished (written, failed, dropped) */
    int writer_waiting;
    int writer_lingering; /* waiting linger_ms for a fuller batch */
    int flush_waiters;    /* audit_flush callers: cut the linger short */
    int stopping, writer_exited;
    int64_t flush_deadline_ms;
    PGcancel *cancel;          /* the writer's in-flight statement, for audit_free */
    int64_t last_drop_warn_ms; /* qlock */
    int64_t last_fail_log_ms;  /* writer thread only */
    pthread_t writer;

    atomic_uint_fast64_t queued, written, dropped, failed, batches;
    /* Calls that ended before a token was verified: counted, logged at
     * most once a second, never queued (a flood of bad tokens must not
     * push real records out of the queue). */
    atomic_uint_fast64_t unauthenticated;
    atomic_int_fast64_t unauth_logged_ms;
    atomic_uint_fast64_t unauth_logged_count;
};

/* The per-call note hung on rpc_call_set_audit (call arena). */
typedef struct audit_note {
    char **targets;
    size_t ntargets, cap, ignored;
    int in_tx;     /* audit_write_in_tx inserted a row */
    int committed; /* ...and the handler's COMMIT succeeded */
} audit_note;

/* ---- the per-call note ---- */

static audit_note *note_get(rpc_call *call) {
    audit_note *n = rpc_call_audit(call);
    if (n) return n;
    n = arena_zalloc(rpc_call_arena(call), sizeof *n);
    if (n) rpc_call_set_audit(call, n);
    return n;
}

void audit_add_target(rpc_call *call, const char *id) {
    if (!call || !id) return;
    const rpc_method *m = rpc_call_method(call);
    if (!m || m->kind == RPC_BIDI_STREAM) return;
    audit_note *n = note_get(call);
    if (!n) return;
    if (n->ntargets == AUDIT_MAX_TARGETS) {
        n->ignored++;
        return;
    }
    arena *ar = rpc_call_arena(call);
    if (n->ntargets == n->cap) {
        size_t cap = n->cap ? n->cap * 2 : 8;
        if (cap > AUDIT_MAX_TARGETS) cap = AUDIT_MAX_TARGETS;
        char **v = arena_alloc(ar, cap * sizeof *v);
        if (!v) return;
        if (n->ntargets) memcpy(v, n->targets, n->ntargets * sizeof *v);
        n->targets = v;
        n->cap = cap;
    }
    size_t len = strlen(id);
    if (len > AUDIT_MAX_ID_BYTES) len = AUDIT_MAX_ID_BYTES;
    char *copy = arena_alloc(ar, len + 1);
    if (!copy) return;
    audit_codec_utf8_clean(id, len, copy);
    n->targets[n->ntargets++] = copy;
}

void audit_committed(rpc_call *call) {
    audit_note *n = call ? rpc_call_audit(call) : NULL;
    if (n && n->in_tx) n->committed = 1;
}

/* ---- records ---- */

/* Copies everything the row needs out of the call into one malloc'd block
 * (the call dies right after the observer). NULL on out of memory. */
static audit_rec *rec_build(rpc_call *call, int status, int64_t time_us) {
    const principal *p = rpc_call_principal(call);
    const audit_note *note = rpc_call_audit(call);
    enum { NSTR = 7 };
    const char *src[NSTR] = {p ? principal_tenant(p) : "",  p ? principal_sub(p) : "",
                             p ? principal_jti(p) : "",     rpc_call_path(call),
                             rpc_call_request_id(call),     rpc_call_trace_id(call),
                             rpc_call_client_identity(call)};
    size_t nt = note ? note->ntargets : 0;
    size_t size = sizeof(audit_rec) + nt * sizeof(char *);
    size_t lens[NSTR];
    for (int i = 0; i < NSTR; i++) {
        if (!src[i]) src[i] = "";
        lens[i] = strlen(src[i]);
        size += lens[i] + 1;
    }
    for (size_t i = 0; i < nt; i++) size += strlen(note->targets[i]) + 1;
    audit_rec *r = malloc(size);
    if (!r) return NULL;
    r->targets = (const char **)(r + 1);
    r->ntargets = nt;
    char *s = (char *)(r->targets + nt);
    const char **dst[NSTR] = {&r->tenant,     &r->principal, &r->token_id,       &r->method,
                              &r->request_id, &r->trace_id,  &r->client_identity};
    for (int i = 0; i < NSTR; i++) {
        /* Claims came through a JSON parser, paths from the method table
         * and request ids are printable ASCII: cleaning never shortens
         * them, it only guarantees PostgreSQL accepts the batch. */
        audit_codec_utf8_clean(src[i], lens[i], s);
        *dst[i] = s;
        s += lens[i] + 1;
    }
    for (size_t i = 0; i < nt; i++) {
        size_t n = strlen(note->targets[i]);
        memcpy(s, note->targets[i], n + 1);
        r->targets[i] = s;
        s += n + 1;
    }
    r->time_us = time_us;
    int64_t dur = clock_mono_us() - rpc_call_start_ms(call) * 1000;
    r->duration_us = dur > 0 ? dur : 0;
    r->status = status;
    return r;
}

static void observe(rpc_call *call, grpc_status_code status, const char *message, void *arg) {
    (void)message;
    audit *a = arg;
    const rpc_method *m = rpc_call_method(call);
    if (!m || !m->scope) return; /* unknown, health, reflection */
    const audit_note *note = rpc_call_audit(call);
    if (note && note->committed && status == GRPC_STATUS_OK) return; /* written in its tx */
    if (!rpc_call_principal(call)) {
        uint64_t n = atomic_fetch_add(&a->unauthenticated, 1) + 1;
        int64_t now = rpc_now_ms(), last = atomic_load(&a->unauth_logged_ms);
        if (now - last >= 1000 &&
            atomic_compare_exchange_strong(&a->unauth_logged_ms, &last, now)) {
            uint64_t before = atomic_exchange(&a->unauth_logged_count, n);
            log_fields(LOG_WARN, "calls refused before a token was verified (not audited)",
                       LOG_F_INT, "since_last", (int64_t)(n - before), LOG_F_INT, "total",
                       (int64_t)n, LOG_F_STR, "last_method", rpc_call_path(call), LOG_F_STR,
                       "last_status", rpc_status_name(status), LOG_F_END);
        }
        return;
    }
    audit_rec *r = rec_build(call, (int)status, clock_wall_us());
    int warn = 0;
    uint64_t dropped = 0;
    pthread_mutex_lock(&a->qlock);
    if (r && a->count < a->o.queue_capacity && !a->stopping) {
        a->ring[(a->head + a->count) % a->o.queue_capacity] = r;
        a->count++;
        a->enq_seq++;
        r = NULL;
        atomic_fetch_add(&a->queued, 1);
        if (a->writer_waiting || (a->writer_lingering && a->count >= a->o.batch_max))
            pthread_cond_signal(&a->qwake);
    } else {
        dropped = atomic_fetch_add(&a->dropped, 1) + 1;
        int64_t now = rpc_now_ms();
        if (now - a->last_drop_warn_ms >= 1000) {
            a->last_drop_warn_ms = now;
            warn = 1;
        }
    }
    pthread_mutex_unlock(&a->qlock);
    if (warn)
        log_fields(LOG_WARN, "audit queue full: records dropped", LOG_F_INT, "dropped_total",
                   (int64_t)dropped, LOG_F_INT, "queue_capacity", (int64_t)a->o.queue_capacity,
                   LOG_F_STR, "method", rpc_call_path(call), LOG_F_END);
    free(r);
}

/* ---- writing ---- */

/* Retry connection-level and transient server conditions; anything else
 * is about the rows and will not get better by waiting. */
static int classify(const pgq_session *ss) {
    const char *st = ss->sqlstate;
    if (ss->broken || !st[0]) return W_RETRY;
    if (strncmp(st, "08", 2) == 0 || strncmp(st, "53", 2) == 0 || strncmp(st, "57", 2) == 0 ||
        strncmp(st, "40", 2) == 0 || strcmp(st, "55P03") == 0 || strncmp(st, "58", 2) == 0)
        return W_RETRY;
    return W_FATAL;
}

static void set_cancel(audit *a, PGcancel *cancel) {
    pthread_mutex_lock(&a->qlock);
    a->cancel = cancel;
    pthread_mutex_unlock(&a->qlock);
}

/* One COPY of the batch in a pgq session, cancellable by audit_free. */
static int copy_batch(audit *a, audit_rec **batch, size_t n, char *err, size_t errlen) {
    strbuf b = {0};
    for (size_t i = 0; i < n; i++) audit_codec_copy_row(&b, batch[i]);
    if (b.oom) {
        strbuf_free(&b);
        snprintf(err, errlen, "out of memory");
        return W_RETRY;
    }
    pgq_session ss;
    int rc = pgq_begin(&ss, a->pg, "audit", rpc_now_ms() + WRITE_TIMEOUT_MS, 0, err, errlen);
    if (rc == STATUS_OK) {
        PGcancel *cancel = PQgetCancel(ss.conn);
        set_cancel(a, cancel);
        rc = pgq_copy_in(&ss, "writing the audit trail",
                         "COPY audit_log (" AUDIT_COPY_COLUMNS ") FROM STDIN", b.p, b.len);
        set_cancel(a, NULL);
        PQfreeCancel(cancel);
    }
    int w = rc == STATUS_OK ? W_OK : ss.conn ? classify(&ss) : W_RETRY;
    pgq_end(&ss);
    strbuf_free(&b);
    return w;
}

/* 1 once audit_free's flush time is up. */
static int give_up(audit *a) {
    pthread_mutex_lock(&a->qlock);
    int g = a->stopping && rpc_now_ms() >= a->flush_deadline_ms;
    pthread_mutex_unlock(&a->qlock);
    return g;
}

/* Sleeps ms unless audit_free's flush time runs out first. */
static void backoff_sleep(audit *a, int ms) {
    int64_t until = rpc_now_ms() + ms;
    pthread_mutex_lock(&a->qlock);
    for (;;) {
        int64_t end = a->stopping && a->flush_deadline_ms < until ? a->flush_deadline_ms : until;
        if (rpc_now_ms() >= end) break;
        struct timespec ts = clock_cond_deadline(end);
        pthread_cond_timedwait(&a->qwake, &a->qlock, &ts);
    }
    pthread_mutex_unlock(&a->qlock);
}

/* Writes one batch, waiting out outages; returns how many rows were
 * written. Rows PostgreSQL refuses are logged and counted as failed (a
 * refused batch is retried row by row so one bad row does not sink its
 * neighbours). *gave_up is set when audit_free's flush time ran out. */
static size_t write_batch(audit *a, audit_rec **batch, size_t n, int64_t *outage_ms, int *gave_up) {
    int backoff = BACKOFF_MIN_MS;
    int64_t last_log = 0;
    for (;;) {
        if (give_up(a)) {
            *gave_up = 1;
            return 0;
        }
        char err[512] = "";
        int rc = copy_batch(a, batch, n, err, sizeof err);
        if (rc == W_OK) {
            if (*outage_ms) {
                log_fields(LOG_INFO, "audit writer recovered", LOG_F_INT, "outage_ms",
                           rpc_now_ms() - *outage_ms, LOG_F_END);
                *outage_ms = 0;
            }
            atomic_fetch_add(&a->batches, 1);
            return n;
        }
        if (rc == W_FATAL && n > 1) {
            size_t w = 0;
            for (size_t i = 0; i < n && !*gave_up; i++)
                w += write_batch(a, batch + i, 1, outage_ms, gave_up);
            return w;
        }
        if (rc == W_FATAL) {
            uint64_t failed = atomic_fetch_add(&a->failed, 1) + 1;
            int64_t now = rpc_now_ms();
            if (now - a->last_fail_log_ms >= 1000) { /* a missing table fails every row */
                a->last_fail_log_ms = now;
                log_fields(LOG_ERROR, "audit record refused by PostgreSQL; dropped", LOG_F_STR,
                           "method", batch[0]->method, LOG_F_STR, "error", err, LOG_F_INT,
                           "failed_total", (int64_t)failed, LOG_F_END);
            }
            return 0;
        }
        int64_t now = rpc_now_ms();
        if (!*outage_ms) *outage_ms = now;
        if (!last_log || now - last_log >= OUTAGE_LOG_EVERY_MS) {
            last_log = now;
            log_fields(LOG_WARN, "audit writer cannot reach PostgreSQL; retrying", LOG_F_STR,
                       "error", err, LOG_F_INT, "batch", (int64_t)n, LOG_F_INT, "backoff_ms",
                       (int64_t)backoff, LOG_F_END);
        }
        backoff_sleep(a, backoff);
        backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
    }
}

/* Frees what is still queued at the end of audit_free's flush time.
 * Caller holds qlock. */
static size_t drop_queued_locked(audit *a) {
    size_t left = a->count;
    while (a->count > 0) {
        free(a->ring[a->head]);
        a->head = (a->head + 1) % a->o.queue_capacity;
        a->count--;
    }
    a->done_seq += left;
    return left;
}

static void *writer_main(void *arg) {
    audit *a = arg;
    audit_rec **owned = malloc(a->o.batch_max * sizeof *owned);
    audit_rec *one;
    audit_rec **batch = owned ? owned : &one; /* no memory for batches: go row by row */
    size_t max = owned ? a->o.batch_max : 1;
    int64_t outage_ms = 0;
    int gave_up = 0;
    pthread_mutex_lock(&a->qlock);
    for (;;) {
        while (a->count == 0 && !a->stopping) {
            a->writer_waiting = 1;
            pthread_cond_wait(&a->qwake, &a->qlock);
            a->writer_waiting = 0;
        }
        if (a->count == 0) break; /* stopping, all written */
        if (a->o.linger_ms > 0 && a->count < max && !a->stopping && !a->flush_waiters) {
            int64_t until = rpc_now_ms() + a->o.linger_ms;
            a->writer_lingering = 1;
            while (a->count < max && !a->stopping && !a->flush_waiters && rpc_now_ms() < until) {
                struct timespec ts = clock_cond_deadline(until);
                pthread_cond_timedwait(&a->qwake, &a->qlock, &ts);
            }
            a->writer_lingering = 0;
        }
        size_t n = 0;
        while (n < max && a->count > 0) {
            batch[n++] = a->ring[a->head];
            a->head = (a->head + 1) % a->o.queue_capacity;
            a->count--;
        }
        pthread_mutex_unlock(&a->qlock);
        uint64_t failed0 = atomic_load(&a->failed);
        size_t w = write_batch(a, batch, n, &outage_ms, &gave_up);
        size_t lost = n - w - (size_t)(atomic_load(&a->failed) - failed0);
        atomic_fetch_add(&a->written, w);
        for (size_t i = 0; i < n; i++) free(batch[i]);
        pthread_mutex_lock(&a->qlock);
        a->done_seq += n;
        if (gave_up) {
            /* audit_free's flush time ran out: what is left is lost. */
            lost += drop_queued_locked(a);
            atomic_fetch_add(&a->dropped, lost);
            log_fields(LOG_ERROR, "audit flush timed out: records dropped", LOG_F_INT, "dropped",
                       (int64_t)lost, LOG_F_END);
        }
        pthread_cond_broadcast(&a->qdone);
        if (gave_up) break;
    }
    a->writer_exited = 1;
    pthread_cond_broadcast(&a->qdone);
    pthread_mutex_unlock(&a->qlock);
    free(owned);
    return NULL;
}

int audit_sql_in_tx(rpc_call *call, pgq_sql *b, char *err, size_t errlen) {
    audit_note *note = note_get(call);
    audit_rec *r = note ? rec_build(call, GRPC_STATUS_OK, clock_wall_us()) : NULL;
    strbuf targets = {0};
    if (r) audit_codec_array_literal(&targets, r->targets, r->ntargets);
    /* The statement borrows its strings until it has run: the call's
     * arena keeps them that long. */
    arena *a = rpc_call_arena(call);
    enum { NSTR = 8 };
    const char *s[NSTR] = {NULL};
    int have = r && !targets.oom;
    if (have) {
        const char *src[NSTR] = {r->tenant, r->principal,  r->token_id, r->method,
                                 targets.p, r->request_id, r->trace_id, r->client_identity};
        for (int i = 0; i < NSTR; i++) have = have && (s[i] = arena_strdup(a, src[i])) != NULL;
    }
    int rc = -1;
    if (!have) {
        snprintf(err, errlen, "audit: out of memory");
    } else {
        int p_time = pgq_ts(b, r->time_us);
        int p_tenant = pgq_text(b, s[0]);
        int p_principal = pgq_text(b, s[1]);
        int p_token = pgq_text(b, s[2]);
        int p_method = pgq_text(b, s[3]);
        int p_targets = pgq_text_array(b, s[4]);
        int p_status = pgq_int4(b, r->status);
        int p_duration = pgq_int8(b, r->duration_us);
        int p_request = pgq_text(b, s[5]);
        int p_trace = pgq_text(b, s[6]);
        int p_client = pgq_text(b, s[7]);
        pgq_sql_add(b,
                    "INSERT INTO audit_log (" AUDIT_COPY_COLUMNS ") VALUES ($%d, $%d, $%d, $%d,"
                    " $%d, $%d, $%d, $%d, $%d, $%d, $%d)",
                    p_time, p_tenant, p_principal, p_token, p_method, p_targets, p_status,
                    p_duration, p_request, p_trace, p_client);
        note->in_tx = 1;
        rc = 0;
    }
    strbuf_free(&targets);
    free(r);
    return rc;
}

int audit_write_in_tx(pgq_session *ss, rpc_call *call, char *err, size_t errlen) {
    pgq_sql b = {0};
    if (audit_sql_in_tx(call, &b, err, errlen) != 0) return -1;
    PGresult *res;
    if (pgq_exec_ok(ss, &b, "the audit row", &res) != STATUS_OK) {
        audit_note *note = rpc_call_audit(call);
        if (note) note->in_tx = 0;
        snprintf(err, errlen, "audit: cannot insert the audit row: %s", ss->err);
        return -1;
    }
    PQclear(res);
    return 0;
}

/* ---- lifecycle ---- */

int audit_create(pg_pool *pg, const audit_options *o, audit **out, char *err, size_t errlen) {
    assert(pg && out);
    audit *a = calloc(1, sizeof *a);
    if (!a) return snprintf(err, errlen, "audit: out of memory"), -1;
    a->pg = pg;
    if (o) a->o = *o;
    if (!a->o.queue_capacity) a->o.queue_capacity = DEFAULT_QUEUE;
    if (!a->o.batch_max) a->o.batch_max = DEFAULT_BATCH;
    if (a->o.flush_timeout_ms <= 0) a->o.flush_timeout_ms = DEFAULT_FLUSH_MS;
    a->ring = calloc(a->o.queue_capacity, sizeof *a->ring);
    pthread_mutex_init(&a->qlock, NULL);
    clock_cond_init(&a->qwake);
    clock_cond_init(&a->qdone);
    a->last_drop_warn_ms = a->last_fail_log_ms = INT64_MIN / 2;
    atomic_store(&a->unauth_logged_ms, INT64_MIN / 2);
    if (!a->ring) {
        snprintf(err, errlen, "audit: out of memory (queue of %zu)", a->o.queue_capacity);
        goto fail;
    }
    int rc = pthread_create(&a->writer, NULL, writer_main, a);
    if (rc != 0) {
        snprintf(err, errlen, "audit: cannot start the writer thread: %s", strerror(rc));
        goto fail;
    }
    *out = a;
    return 0;
fail:
    pthread_cond_destroy(&a->qwake);
    pthread_cond_destroy(&a->qdone);
    pthread_mutex_destroy(&a->qlock);
    free(a->ring);
    free(a);
    return -1;
}

void audit_free(audit *a) {
    if (!a) return;
    pthread_mutex_lock(&a->qlock);
    a->stopping = 1;
    a->flush_deadline_ms = rpc_now_ms() + a->o.flush_timeout_ms;
    pthread_cond_broadcast(&a->qwake);
    while (!a->writer_exited) {
        struct timespec ts = clock_cond_deadline(a->flush_deadline_ms);
        if (pthread_cond_timedwait(&a->qdone, &a->qlock, &ts) == ETIMEDOUT) {
            /* The writer may sit in a statement (a lock wait, a dead
             * server): cancel it so the thread can be joined. */
            char buf[256];
            if (a->cancel) PQcancel(a->cancel, buf, sizeof buf);
            pthread_cond_broadcast(&a->qwake);
            ts = clock_cond_deadline(rpc_now_ms() + 100);
            pthread_cond_timedwait(&a->qdone, &a->qlock, &ts);
        }
    }
    pthread_mutex_unlock(&a->qlock);
    pthread_join(a->writer, NULL);
    pthread_cond_destroy(&a->qwake);
    pthread_cond_destroy(&a->qdone);
    pthread_mutex_destroy(&a->qlock);
    free(a->ring);
    free(a);
}

int audit_hook_before_commit(pgq_session *ss, void *call, char *err, size_t errlen) {
    return audit_write_in_tx(ss, call, err, errlen);
}

void audit_hook_after_commit(void *call) { audit_committed(call); }

int audit_hook_commit_sql(void *call, pgq_sql *b, char *err, size_t errlen) {
    return audit_sql_in_tx(call, b, err, errlen);
}

int audit_flush(audit *a, int64_t deadline_ms) {
    pthread_mutex_lock(&a->qlock);
    uint64_t want = a->enq_seq;
    a->flush_waiters++;
    pthread_cond_broadcast(&a->qwake); /* a lingering writer writes now */
    while (a->done_seq < want && !a->writer_exited) {
        if (rpc_now_ms() >= deadline_ms) break;
        struct timespec ts = clock_cond_deadline(deadline_ms);
        pthread_cond_timedwait(&a->qdone, &a->qlock, &ts);
    }
    int rc = a->done_seq >= want ? 0 : -1;
    a->flush_waiters--;
    pthread_mutex_unlock(&a->qlock);
    return rc;
}

uint64_t audit_dropped(const audit *a) { return atomic_load(&((audit *)a)->dropped); }

void audit_get_stats(const audit *a, audit_stats *out) {
    audit *m = (audit *)a;
    out->queued = atomic_load(&m->queued);
    out->written = atomic_load(&m->written);
    out->dropped = atomic_load(&m->dropped);
    out->failed = atomic_load(&m->failed);
    out->batches = atomic_load(&m->batches);
    out->unauthenticated = atomic_load(&m->unauthenticated);
    pthread_mutex_lock(&m->qlock);
    out->queue_depth = m->count;
    pthread_mutex_unlock(&m->qlock);
    out->queue_capacity = m->o.queue_capacity;
}

int audit_observe(rpc_server *srv, audit *a) { return rpc_server_add_observer(srv, observe, a); }
