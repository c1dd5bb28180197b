/* apg: asynchronous PostgreSQL on the event loop; see apg.h. This file
 * holds the pool: answering, the wait queue, submission and cancellation,
 * set-up and tear-down; apg_conn.c holds a connection's state machine.
 *
 * Everything below apg_submit / apg_cancel / apg_create / apg_free runs on
 * the loop thread and so needs no lock. */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/clock.h"
#include "service/core/log.h"
#include "service/store/apg_internal.h"

int64_t apg_now_ms(void) { return clock_mono_ms(NULL); }

/* ------------------------------------------------------------ answering */

void apg_answer(apg_query *q, int status, PGresult *res) {
    backend_stats *st = &q->pool->stats;
    int64_t waited_us = clock_mono_us() - q->submit_us;
    backend_stats_count(st, status);
    metrics_observe_us(&st->duration, (uint64_t)waited_us);
    /* Answered without a connection (its deadline passed in the queue, it
     * was cancelled, PostgreSQL was down): all of it was waiting. */
    if (!q->started) metrics_observe_us(&st->wait, (uint64_t)waited_us);
    q->done(q, status, res);
}

/* Starts q on the idle c, counting how long it waited for a connection. */
static void start(apg_conn *c, apg_query *q) {
    q->started = 1;
    metrics_observe_us(&q->pool->stats.wait, (uint64_t)(clock_mono_us() - q->submit_us));
    apg_conn_start(c, q);
}

void apg_answer_err(apg_query *q, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q->err, sizeof q->err, fmt, ap);
    va_end(ap);
    apg_answer(q, status, NULL);
}

const char *apg_what(const apg_query *q) { return q->what ? q->what : "query"; }

void apg_first_line(char *dst, size_t n, const char *msg) {
    snprintf(dst, n, "%s", msg && *msg ? msg : "no message from libpq");
    dst[strcspn(dst, "\r\n")] = '\0';
}

/* ------------------------------------------------------------ the wait queue */

apg_query *apg_queue_first(const apg *p) {
    dlist *l = dlist_first(&p->queue);
    return l ? DLIST_ENTRY(l, apg_query, link) : NULL;
}

/* The query after q in the queue, or NULL. */
static apg_query *queue_next(const apg *p, const apg_query *q) {
    return q->link.next == &p->queue ? NULL : DLIST_ENTRY(q->link.next, apg_query, link);
}

static void queue_remove(apg *p, apg_query *q) {
    dlist_remove(&q->link);
    p->qlen--;
}

static void on_queue_timer(uv_timer_t *t);

static void arm_queue_timer(apg *p, int64_t at) {
    if (at >= p->queue_timer_at) return;
    p->queue_timer_at = at;
    uv_update_time(evloop_uv(p->loop)); /* timers count from the loop's cached time */
    int64_t in = at - apg_now_ms();
    uv_timer_start(&p->queue_timer, on_queue_timer, in > 0 ? (uint64_t)in : 0, 0);
}

/* Answers the queries whose deadline passed while they waited, and re-arms
 * for the earliest of the rest. */
static void on_queue_timer(uv_timer_t *t) {
    apg *p = t->data;
    p->queue_timer_at = INT64_MAX;
    int64_t now = apg_now_ms(), next = INT64_MAX;
    for (apg_query *q = apg_queue_first(p), *n; q; q = n) {
        n = queue_next(p, q);
        if (q->deadline_ms <= now) {
            queue_remove(p, q);
            apg_answer_err(q, STATUS_ETIMEOUT,
                           "%s: the deadline passed after %lld ms waiting for a PostgreSQL "
                           "connection (all %d busy or connecting)",
                           apg_what(q), (long long)(now - q->submit_ms), p->o.size);
        } else if (q->deadline_ms < next) {
            next = q->deadline_ms;
        }
    }
    if (next != INT64_MAX) arm_queue_timer(p, next);
}

int apg_any_alive(const apg *p) {
    for (int i = 0; i < p->o.size; i++)
        if (p->conns[i].state == C_CONNECTING || p->conns[i].state == C_IDLE ||
            p->conns[i].state == C_BUSY)
            return 1;
    return 0;
}

void apg_fail_queue(apg *p, int status, const char *why) {
    for (apg_query *q; (q = apg_queue_first(p));) {
        queue_remove(p, q);
        apg_answer_err(q, status, "%s: %s", apg_what(q), why);
    }
}

static int cancelled(const apg_query *q) {
    return __atomic_load_n(&q->cancelled, __ATOMIC_ACQUIRE);
}

/* 1 when q, about to run, is still wanted; else answers it (cancelled, or
 * its deadline passed) and returns 0. */
static int still_wanted(apg_query *q, int64_t now) {
    if (cancelled(q))
        apg_answer_err(q, STATUS_ECANCELLED, "%s: cancelled by the caller", apg_what(q));
    else if (q->deadline_ms <= now)
        apg_answer_err(q, STATUS_ETIMEOUT,
                       "%s: the deadline passed waiting for a PostgreSQL connection", apg_what(q));
    else return 1;
    return 0;
}

void apg_take_next(apg_conn *c) {
    apg *p = c->p;
    int64_t now = apg_now_ms();
    for (apg_query *q; c->state == C_IDLE && (q = apg_queue_first(p));) {
        queue_remove(p, q);
        if (still_wanted(q, now)) start(c, q);
    }
}

/* apg_cancel rang: end every cancelled query, waiting or running. */
static void on_cancel_wake(uv_async_t *h) {
    apg *p = h->data;
    for (apg_query *q = apg_queue_first(p), *n; q; q = n) {
        n = queue_next(p, q);
        if (cancelled(q)) {
            queue_remove(p, q);
            apg_answer_err(q, STATUS_ECANCELLED, "%s: cancelled by the caller", apg_what(q));
        }
    }
    for (int i = 0; i < p->o.size; i++) {
        apg_conn *c = &p->conns[i];
        if (c->state == C_BUSY && cancelled(c->q))
            apg_conn_abandon(c, STATUS_ECANCELLED, "cancelled by the caller");
    }
}

/* ------------------------------------------------------------ submitting */

static void submit_on_loop(evloop_task *t) {
    apg_query *q = (apg_query *)((char *)t - offsetof(apg_query, task));
    apg *p = q->pool;
    if (p->closing) {
        apg_answer_err(q, STATUS_EUNAVAILABLE, "%s: the server is shutting down", apg_what(q));
        return;
    }
    if (q->held) { /* the next statement of its transaction */
        apg_conn_resume(q);
        return;
    }
    if (!still_wanted(q, apg_now_ms())) return;
    apg_conn *unused = NULL;
    for (int i = 0; i < p->o.size; i++) {
        if (p->conns[i].state == C_IDLE) {
            start(&p->conns[i], q);
            return;
        }
        if (p->conns[i].state == C_UNUSED && !unused) unused = &p->conns[i];
    }
    /* The last attempt to connect failed and nothing is open: fail fast
     * (the backoff timers keep trying) rather than queue behind a connect
     * that is likely to fail too. */
    if (!apg_any_alive(p) && (p->last_error[0] || !unused)) {
        apg_answer_err(q, STATUS_EUNAVAILABLE, "%s: PostgreSQL is unreachable (%s); retrying",
                       apg_what(q), p->last_error[0] ? p->last_error : "not connected");
        return;
    }
    if (p->qlen >= p->o.max_queue && !q->first) {
        apg_answer_err(q, STATUS_EBUSY,
                       "%s: PostgreSQL is saturated: all %d connections busy and %d calls "
                       "waiting (--pg-pool-size, --pg-queue-max)",
                       apg_what(q), p->o.size, p->qlen);
        return;
    }
    if (q->first) dlist_push_front(&p->queue, &q->link);
    else dlist_push_back(&p->queue, &q->link);
    p->qlen++;
    arm_queue_timer(p, q->deadline_ms);
    /* Grow to the demand, up to size; a connect that fails at once
     * answers the queue, q included. */
    if (unused) apg_conn_connect(unused);
}

void apg_submit(apg *p, apg_query *q) {
    /* A resubmitted query keeps its transaction's connection (q->held). */
    q->pool = p;
    dlist_init(&q->link);
    q->err[0] = '\0';
    q->sqlstate[0] = '\0';
    q->submit_us = clock_mono_us();
    q->started = q->held != NULL; /* a transaction's next statement has its connection */
    q->submit_ms = q->submit_us / 1000;
    if (q->deadline_ms == INT64_MAX) q->deadline_ms = q->submit_ms + p->o.default_timeout_ms;
    q->task.fn = submit_on_loop;
    evloop_post(p->loop, &q->task);
}

void apg_cancel(apg *p, apg_query *q) {
    __atomic_store_n(&q->cancelled, 1, __ATOMIC_RELEASE);
    uv_async_send(&p->cancel_wake);
}

typedef struct {
    apg_query q;
    pgq_sql sql;
    evloop_waiter answered;
    int status;
} ping_call;

static void ping_done(apg_query *q, int status, PGresult *res) {
    ping_call *pc = q->arg;
    PQclear(res);
    pc->status = status;
    evloop_wake(&pc->answered);
}

int apg_ping(apg *p, int64_t deadline_ms) {
    assert(!evloop_on_loop(p->loop));
    /* First in line: a pool busy with calls is up, not down; only one
     * whose connections never free up (a frozen server) fails the ping. */
    ping_call pc = {
        .q = {.what = "ping", .deadline_ms = deadline_ms, .done = ping_done, .first = 1}};
    pc.q.arg = &pc;
    pc.q.sql = &pc.sql;
    pgq_sql_add(&pc.sql, "SELECT 1");
    evloop_waiter_init(&pc.answered);
    apg_submit(p, &pc.q);
    /* apg answers every query by its deadline: no timed wait needed. */
    evloop_wait(&pc.answered);
    evloop_waiter_destroy(&pc.answered);
    return pc.status;
}

int apg_connected(const apg *p) { return atomic_load(&((apg *)p)->connected); }

const backend_stats *apg_stats(const apg *p) { return &p->stats; }

/* A gauge snapshot: the connections' states and the queue belong to the
 * loop thread, so it reads them for the scraper (who gives up after a
 * second: a stalled loop shows as missing gauges, not a hung scrape). */
static void gauges_on_loop(void *arg, void *out) {
    apg *p = arg;
    backend_gauges *g = out;
    g->size = p->o.size;
    g->open = g->in_use = 0;
    for (int i = 0; i < p->o.size; i++) {
        conn_state s = p->conns[i].state;
        g->open += s == C_IDLE || s == C_BUSY || s == C_HELD;
        g->in_use += s == C_BUSY || s == C_HELD;
    }
    g->waiting = p->qlen;
}

void apg_gauges(void *pool, backend_gauges *out) {
    apg *p = pool;
    if (evloop_call(p->loop, gauges_on_loop, p, out, sizeof *out, 1000) != 0)
        *out = (backend_gauges){-1, -1, -1, -1};
}

/* ------------------------------------------------------------ life */

static void setup_on_loop(evloop_task *t) {
    apg *p = (apg *)((char *)t - offsetof(apg, task));
    uv_loop_t *uv = evloop_uv(p->loop);
    /* The one handle whose set-up can fail (an eventfd): first, so nothing
     * else needs undoing when it does. */
    if (uv_async_init(uv, &p->cancel_wake, on_cancel_wake) != 0) {
        p->setup_failed = 1;
        evloop_wake(&p->setup);
        return;
    }
    p->cancel_wake.data = p;
    uv_timer_init(uv, &p->queue_timer);
    p->queue_timer.data = p;
    p->handles = 2;
    for (int i = 0; i < p->o.size; i++) {
        apg_conn *c = &p->conns[i];
        c->p = p;
        uv_timer_init(uv, &c->timer);
        c->timer.data = c;
        p->handles++;
    }
    apg_conn_connect(&p->conns[0]); /* the others open on demand */
    evloop_wake(&p->setup);
}

void apg_handle_gone(apg *p) {
    if (--p->handles == 0) evloop_wake(&p->setup);
}

static void handle_closed(uv_handle_t *h) { apg_handle_gone(h->data); }

static void teardown_on_loop(evloop_task *t) {
    apg *p = (apg *)((char *)t - offsetof(apg, task));
    p->closing = 1;
    apg_fail_queue(p, STATUS_EUNAVAILABLE, "the server is shutting down");
    for (int i = 0; i < p->o.size; i++) {
        apg_conn *c = &p->conns[i];
        apg_query *q = c->q;
        apg_conn_close(c);
        c->state = C_CLOSED;
        if (q)
            apg_answer_err(q, STATUS_EUNAVAILABLE, "%s: the server is shutting down", apg_what(q));
        uv_close((uv_handle_t *)&c->timer, apg_conn_handle_closed);
    }
    uv_close((uv_handle_t *)&p->queue_timer, handle_closed);
    uv_close((uv_handle_t *)&p->cancel_wake, handle_closed);
}

/* Sets the pool up on the loop thread and waits for it: 0, or -1 with
 * the reason in err. */
static int setup(apg *p, char *err, size_t errlen) {
    p->task.fn = setup_on_loop;
    evloop_post(p->loop, &p->task);
    evloop_wait(&p->setup);
    if (!p->setup_failed) return 0;
    snprintf(err, errlen, "postgres: cannot set up the pool on the event loop");
    return -1;
}

/* Frees what apg_create made once nothing on the loop refers to p. */
static void destroy(apg *p) {
    evloop_waiter_destroy(&p->setup);
    pg_params_free(&p->params);
    free(p->conns);
    free(p);
}

int apg_create(evloop *loop, const apg_options *o, apg **out, char *err, size_t errlen) {
    if (o->size < 1 || o->max_queue < 0 || o->connect_timeout_ms < 1 || o->default_timeout_ms < 1)
        return snprintf(err, errlen, "postgres: bad pool options"), -1;
    apg *p = calloc(1, sizeof *p);
    if (!p) return snprintf(err, errlen, "postgres: out of memory"), -1;
    p->loop = loop;
    p->o = *o;
    p->queue_timer_at = INT64_MAX;
    dlist_init(&p->queue);
    atomic_init(&p->connected, 0);
    int rc = pg_params_init(&p->params, o->url, err, errlen);
    if (rc == 0 && !(p->conns = calloc((size_t)o->size, sizeof *p->conns)))
        snprintf(err, errlen, "postgres: out of memory"), rc = -1;
    if (rc != 0) {
        pg_params_free(&p->params);
        free(p);
        return -1;
    }
    evloop_waiter_init(&p->setup);
    if (setup(p, err, errlen) == 0) {
        *out = p;
        return 0;
    }
    destroy(p);
    return -1;
}

void apg_free(apg *p) {
    if (!p) return;
    p->task.fn = teardown_on_loop;
    evloop_post(p->loop, &p->task);
    evloop_wait(&p->setup);
    destroy(p);
}
