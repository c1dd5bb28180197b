/* apg_conn: one connection of the asynchronous PostgreSQL pool; see
 * apg.h and apg_internal.h. A connection is a small state machine: UNUSED
 * (opened on demand) or DOWN (waiting to reconnect) -> CONNECTING
 * (PQconnectPoll driven by its socket) -> IDLE <-> BUSY (one statement in
 * its pipeline). Its one timer is the connect deadline, the query deadline
 * or the reconnect backoff, by state. Loop thread only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/log.h"
#include "service/store/apg_internal.h"

/* Short enough that writes work again within about a second of
 * PostgreSQL's return; a refused connect costs next to nothing. */
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 1000

/* ------------------------------------------------------------ sockets */

static void free_poll(uv_handle_t *h) {
    conn_poll *cp = (conn_poll *)h;
    apg *p = cp->p;
    free(cp);
    apg_handle_gone(p);
}

static void unwatch(apg_conn *c) {
    if (!c->poll) return;
    uv_poll_stop(&c->poll->h);
    c->poll->c = NULL;
    uv_close((uv_handle_t *)&c->poll->h, free_poll);
    c->poll = NULL;
}

static void on_poll(uv_poll_t *h, int status, int events);

/* Watches the connection's current socket for events; 0 or -1. */
static int watch(apg_conn *c, int events) {
    int fd = PQsocket(c->pg);
    if (fd < 0) return -1;
    if (c->poll && c->poll_fd != fd) unwatch(c);
    if (!c->poll) {
        conn_poll *cp = calloc(1, sizeof *cp);
        if (!cp) return -1;
        if (uv_poll_init_socket(evloop_uv(c->p->loop), &cp->h, fd) != 0) {
            free(cp);
            return -1;
        }
        cp->p = c->p;
        cp->c = c;
        c->p->handles++;
        c->poll = cp;
        c->poll_fd = fd;
    }
    return uv_poll_start(&c->poll->h, events, on_poll) == 0 ? 0 : -1;
}

/* ------------------------------------------------------------ connections */

static void conn_release_statement(apg_conn *c) {
    if (c->plan_open) pgq_plan_done(&c->plan, 0);
    c->plan_open = 0;
    PQclear(c->res);
    PQclear(c->failure);
    c->res = c->failure = NULL;
}

void apg_conn_close(apg_conn *c) {
    uv_timer_stop(&c->timer);
    unwatch(c);
    if (c->state == C_IDLE || c->state == C_BUSY || c->state == C_HELD)
        atomic_fetch_sub(&c->p->connected, 1);
    conn_release_statement(c);
    c->q = c->holder = NULL;
    if (c->pg) PQfinish(c->pg);
    c->pg = NULL;
    c->state = C_UNUSED;
}

static void on_timer(uv_timer_t *t);

static void schedule_reconnect(apg_conn *c) {
    c->backoff_ms = c->backoff_ms ? c->backoff_ms * 2 : BACKOFF_FIRST_MS;
    if (c->backoff_ms > BACKOFF_MAX_MS) c->backoff_ms = BACKOFF_MAX_MS;
    uv_timer_start(&c->timer, on_timer, (uint64_t)c->backoff_ms, 0);
}

/* A connection attempt failed: back off, and when no connection is left
 * that could serve the queue, fail it fast rather than let it wait. */
static void conn_failed(apg_conn *c, const char *why) {
    apg *p = c->p;
    int logged = p->last_error[0] != '\0';
    apg_first_line(p->last_error, sizeof p->last_error, why);
    if (!logged)
        log_fields(LOG_WARN, "postgres: connection failed; retrying with backoff", LOG_F_STR,
                   "error", p->last_error, LOG_F_END);
    apg_conn_close(c);
    if (p->closing) return;
    c->state = C_DOWN;
    schedule_reconnect(c);
    if (!apg_any_alive(p)) {
        char why2[256];
        snprintf(why2, sizeof why2, "PostgreSQL is unreachable (%s); retrying", p->last_error);
        apg_fail_queue(p, STATUS_EUNAVAILABLE, why2);
    }
}

/* Closes c and answers its statement (if any) with status and "<what>:
 * <msg>"; opens a fresh connection when calls are waiting. */
static void end_with(apg_conn *c, int status, const char *msg) {
    apg_query *q = c->q;
    apg_conn_close(c);
    if (q) apg_answer_err(q, status, "%s: %s", apg_what(q), msg);
    if (!c->p->closing && apg_queue_first(c->p)) apg_conn_connect(c);
}

/* A connection that worked broke: answer its statement; the next query
 * that needs a connection opens a fresh one. */
static void conn_broken(apg_conn *c, const char *why) {
    char line[200], msg[256];
    apg_first_line(line, sizeof line, why);
    log_fields(LOG_WARN, "postgres: connection lost", LOG_F_STR, "error", line, LOG_F_STR, "during",
               c->q ? apg_what(c->q) : "idle", LOG_F_END);
    snprintf(msg, sizeof msg, "PostgreSQL connection lost (%s)", line);
    end_with(c, STATUS_EUNAVAILABLE, msg);
}

static void conn_ready(apg_conn *c) {
    apg *p = c->p;
    uv_timer_stop(&c->timer);
    if (PQsetnonblocking(c->pg, 1) != 0 || !PQenterPipelineMode(c->pg)) {
        conn_failed(c, PQerrorMessage(c->pg));
        return;
    }
    c->state = C_IDLE;
    c->backoff_ms = 0;
    atomic_fetch_add(&p->connected, 1);
    if (p->last_error[0]) {
        log_fields(LOG_INFO, "postgres: connected again", LOG_F_END);
        p->last_error[0] = '\0';
    }
    if (watch(c, UV_READABLE) != 0) {
        conn_broken(c, "cannot watch the connection's socket");
        return;
    }
    apg_take_next(c);
}

static void connect_step(apg_conn *c, PostgresPollingStatusType st) {
    if (st == PGRES_POLLING_OK) {
        conn_ready(c);
    } else if (st == PGRES_POLLING_FAILED) {
        conn_failed(c, PQerrorMessage(c->pg));
    } else if (watch(c, st == PGRES_POLLING_READING ? UV_READABLE : UV_WRITABLE) != 0) {
        conn_failed(c, "cannot watch the connection's socket");
    }
}

void apg_conn_connect(apg_conn *c) {
    apg *p = c->p;
    c->pg = PQconnectStartParams(p->params.kw, p->params.vals, 0);
    if (!c->pg) {
        conn_failed(c, "out of memory");
        return;
    }
    if (PQstatus(c->pg) == CONNECTION_BAD) {
        conn_failed(c, PQerrorMessage(c->pg));
        return;
    }
    c->state = C_CONNECTING;
    uv_update_time(evloop_uv(p->loop));
    uv_timer_start(&c->timer, on_timer, (uint64_t)p->o.connect_timeout_ms, 0);
    connect_step(c, PGRES_POLLING_WRITING); /* libpq: start as if it said WRITING */
}

/* ------------------------------------------------------------ statements */

static void query_finished(apg_conn *c) {
    apg_query *q = c->q;
    PGresult *res = c->res, *failure = c->failure;
    c->res = c->failure = NULL;
    if (c->plan_open) pgq_plan_done(&c->plan, 0);
    c->plan_open = 0;
    c->q = NULL;
    c->state = C_IDLE;
    uv_timer_stop(&c->timer);
    if (watch(c, UV_READABLE) != 0) {
        PQclear(res);
        PQclear(failure);
        c->q = q;
        conn_broken(c, "cannot watch the connection's socket");
        return;
    }
    if (!failure && res &&
        (PQresultStatus(res) == PGRES_TUPLES_OK || PQresultStatus(res) == PGRES_COMMAND_OK)) {
        if (q->hold) { /* the transaction goes on: the connection waits for q */
            c->state = C_HELD;
            c->holder = q;
            q->held = c;
            apg_answer(q, STATUS_OK, res);
            return;
        }
        apg_answer(q, STATUS_OK, res);
    } else {
        const PGresult *why = failure ? failure : res;
        const char *state = why ? PQresultErrorField(why, PG_DIAG_SQLSTATE) : NULL;
        snprintf(q->sqlstate, sizeof q->sqlstate, "%s", state ? state : "");
        char line[200];
        apg_first_line(line, sizeof line, why ? PQresultErrorMessage(why) : "no result");
        PQclear(res);
        PQclear(failure);
        /* 57014: the connection's statement_timeout, the server's own
         * bound on a statement whose caller gave no deadline. */
        int status = strcmp(q->sqlstate, "57014") == 0 ? STATUS_ETIMEOUT : STATUS_EUNAVAILABLE;
        log_fields(LOG_WARN, "postgres: statement failed", LOG_F_STR, "during", apg_what(q),
                   LOG_F_STR, "sqlstate", q->sqlstate, LOG_F_STR, "error", line, LOG_F_END);
        apg_answer_err(q, status, "%s failed: %s", apg_what(q), line);
        /* A transaction the failure left open (aborted) dies with its
         * connection; the next query that needs one opens a fresh one. */
        if (PQtransactionStatus(c->pg) != PQTRANS_IDLE) {
            apg_conn_close(c);
            if (!c->p->closing && apg_queue_first(c->p)) apg_conn_connect(c);
            return;
        }
    }
    apg_take_next(c);
}

void apg_conn_resume(apg_query *q) {
    apg_conn *c = q->held;
    q->held = NULL;
    if (!c || c->state != C_HELD || c->holder != q) {
        apg_answer_err(q, STATUS_EUNAVAILABLE, "%s: the connection of its transaction was lost",
                       apg_what(q));
        return;
    }
    c->holder = NULL;
    c->state = C_BUSY;
    c->q = q; /* so that ending the connection answers q */
    if (__atomic_load_n(&q->cancelled, __ATOMIC_ACQUIRE))
        end_with(c, STATUS_ECANCELLED, "cancelled by the caller");
    else if (q->deadline_ms <= apg_now_ms())
        end_with(c, STATUS_ETIMEOUT, "the deadline passed between its statements");
    else apg_conn_start(c, q);
}

/* Reads what has arrived: before's result (when sent), the Parse's (when
 * one was sent), the statement's, after's, then the pipeline's sync, which
 * ends the statement. */
static void read_results(apg_conn *c) {
    int ends = 0;
    while (c->state == C_BUSY && !PQisBusy(c->pg)) {
        if (PQstatus(c->pg) == CONNECTION_BAD) break; /* libpq gave up on it */
        PGresult *r = PQgetResult(c->pg);
        if (!r) { /* the end of one command's results; two in a row: nothing more yet */
            if (++ends > 1) break;
            continue;
        }
        ends = 0;
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_PIPELINE_SYNC) {
            PQclear(r);
            query_finished(c);
            return;
        }
        if (c->seen == c->parse_at && c->plan_open) {
            pgq_plan_done(&c->plan, st == PGRES_COMMAND_OK);
            c->plan_open = 0;
        }
        if (st == PGRES_FATAL_ERROR && !c->failure) {
            c->failure = r;
        } else if (c->seen == c->stmt_at && !c->res) {
            c->res = r;
        } else {
            PQclear(r);
        }
        c->seen++;
    }
    /* libpq drops a connection it cannot make sense of (lost sync, a
     * FATAL from the server) and then answers only NULLs: say so now, not
     * at the deadline. */
    if (c->state == C_BUSY && PQstatus(c->pg) == CONNECTION_BAD)
        conn_broken(c, PQerrorMessage(c->pg));
}

static void flush(apg_conn *c) {
    int r = PQflush(c->pg);
    if (r < 0 || watch(c, r == 1 ? UV_READABLE | UV_WRITABLE : UV_READABLE) != 0)
        conn_broken(c, PQerrorMessage(c->pg));
}

void apg_conn_start(apg_conn *c, apg_query *q) {
    const pgq_sql *s = q->sql;
    if (s->overflow) {
        static const char why[] = "the statement is longer than its buffer";
        if (c->state == C_BUSY) { /* a held transaction's next statement: it ends here */
            end_with(c, STATUS_EINTERNAL, why);
            return;
        }
        apg_answer_err(q, STATUS_EINTERNAL, "%s: %s", apg_what(q), why);
        return;
    }
    c->q = q;
    c->state = C_BUSY;
    c->seen = 0;
    int before = q->before != NULL;
    if (before && !PQsendQueryParams(c->pg, q->before, 0, NULL, NULL, NULL, NULL, 0)) {
        conn_broken(c, PQerrorMessage(c->pg));
        return;
    }
    pgq_plan_make(c->pg, s->buf, &s->params, &c->plan);
    c->plan_open = 1;
    int parses = pgq_plan_send(c->pg, &c->plan, s->buf, &s->params);
    if (parses < 0 ||
        (q->after && !PQsendQueryParams(c->pg, q->after, 0, NULL, NULL, NULL, NULL, 0)) ||
        !PQpipelineSync(c->pg)) {
        conn_broken(c, PQerrorMessage(c->pg));
        return;
    }
    c->parse_at = parses ? before : -1;
    c->stmt_at = before + parses;
    if (!parses) { /* nothing to learn from a Parse */
        pgq_plan_done(&c->plan, 0);
        c->plan_open = 0;
    }
    uv_update_time(evloop_uv(c->p->loop)); /* timers count from the loop's cached time */
    int64_t in = q->deadline_ms - apg_now_ms();
    uv_timer_start(&c->timer, on_timer, in > 0 ? (uint64_t)in : 0, 0);
    flush(c);
}

/* The running statement must end now: close its connection (the server
 * stops the statement when it notices); open another for those waiting. */
void apg_conn_abandon(apg_conn *c, int status, const char *why) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s after %lld ms", why, (long long)(apg_now_ms() - c->q->submit_ms));
    end_with(c, status, msg);
}

/* ------------------------------------------------------------ events */

static void on_poll(uv_poll_t *h, int status, int events) {
    conn_poll *cp = (conn_poll *)h;
    apg_conn *c = cp->c;
    if (!c) return;
    if (status < 0) {
        /* libuv reports a socket error (POLLERR) as UV_EBADF; libpq reads
         * the real reason off the socket. */
        if (c->state == C_CONNECTING) connect_step(c, PQconnectPoll(c->pg));
        else if (c->state == C_IDLE || c->state == C_BUSY || c->state == C_HELD)
            conn_broken(c, PQconsumeInput(c->pg) ? uv_strerror(status) : PQerrorMessage(c->pg));
        return;
    }
    switch (c->state) {
    case C_CONNECTING: connect_step(c, PQconnectPoll(c->pg)); break;
    case C_BUSY:
        if (events & UV_WRITABLE) {
            flush(c);
            if (c->state != C_BUSY) return;
        }
        if (events & UV_READABLE) {
            if (!PQconsumeInput(c->pg)) {
                conn_broken(c, PQerrorMessage(c->pg));
                return;
            }
            read_results(c);
        }
        break;
    case C_IDLE:
    case C_HELD:
        /* Nothing is asked: data is a notice, or the server closing. */
        if (!PQconsumeInput(c->pg) || PQstatus(c->pg) != CONNECTION_OK) {
            conn_broken(c, PQerrorMessage(c->pg));
            return;
        }
        for (PGnotify *n; (n = PQnotifies(c->pg));) PQfreemem(n);
        break;
    default: break;
    }
}

static void on_timer(uv_timer_t *t) {
    apg_conn *c = t->data;
    char why[64];
    switch (c->state) {
    case C_CONNECTING:
        snprintf(why, sizeof why, "connecting took over %d ms", c->p->o.connect_timeout_ms);
        conn_failed(c, why);
        break;
    case C_BUSY: {
        /* libuv's timers run on its cached loop time: a timer armed after a
         * long turn may fire early. Only a passed deadline abandons. */
        int64_t left = c->q->deadline_ms - apg_now_ms();
        if (left > 0) uv_timer_start(&c->timer, on_timer, (uint64_t)left, 0);
        else
            apg_conn_abandon(c, STATUS_ETIMEOUT,
                             "the deadline passed; PostgreSQL had not answered");
        break;
    }
    case C_DOWN: apg_conn_connect(c); break;
    default: break;
    }
}

void apg_conn_handle_closed(uv_handle_t *h) { apg_handle_gone(((apg_conn *)h->data)->p); }
