/* apg_internal: the pool and connection state apg.c (the pool: queue,
 * submission, cancellation, life) and apg_conn.c (one connection's state
 * machine on its socket) share. Loop thread only. Not for other modules. */
#ifndef MEMORYD_STORE_APG_INTERNAL_H
#define MEMORYD_STORE_APG_INTERNAL_H

#include <stdatomic.h>
#include <uv.h>

#include "service/store/apg.h"
#include "service/store/pg_params.h"
#include "service/store/pgq_internal.h"

typedef struct apg_conn apg_conn;

/* UNUSED: not open, opened when a query finds no idle connection (the
 * first at start); DOWN: a connection attempt failed, the next is on the
 * backoff timer. */
/* HELD: between two statements of one query's transaction (hold). */
typedef enum { C_UNUSED, C_DOWN, C_CONNECTING, C_IDLE, C_BUSY, C_HELD, C_CLOSED } conn_state;

/* A poll handle is closed asynchronously, so it lives apart from the
 * connection (whose socket changes on every reconnect). */
typedef struct conn_poll {
    uv_poll_t h;
    apg *p;
    struct apg_conn *c; /* NULL once closing */
} conn_poll;

struct apg_conn {
    apg *p;
    conn_state state;
    PGconn *pg;
    conn_poll *poll;
    int poll_fd;
    uv_timer_t timer;
    int backoff_ms;
    /* the running statement */
    apg_query *q;
    apg_query *holder; /* C_HELD: whose transaction */
    pgq_plan plan;
    int plan_open;     /* plan's key not yet released */
    int parse_at;      /* index of the Parse's result; -1: none was sent */
    int stmt_at;       /* index of the statement's own result */
    int seen;          /* results read so far */
    PGresult *res;     /* the statement's */
    PGresult *failure; /* the first refused one (Parse or statement) */
};

struct apg {
    evloop *loop;
    apg_options o;
    pg_params params; /* the URL's, with memoryd's settings */
    apg_conn *conns;
    dlist queue; /* apg_query.link, oldest first */
    int qlen;
    uv_timer_t queue_timer;
    int64_t queue_timer_at; /* INT64_MAX: not armed */
    uv_async_t cancel_wake;
    char last_error[200];
    backend_stats stats; /* counted as queries are started and answered */
    atomic_int connected;
    int closing;
    /* create and free wait for the loop thread */
    evloop_task task;
    evloop_waiter setup;
    int handles; /* open uv handles of the pool */
    int setup_failed;
};

/* ---- apg.c ---- */
int64_t apg_now_ms(void);
/* Hands q back to its owner, who may free it: touch nothing of q after. */
void apg_answer(apg_query *q, int status, PGresult *res);
void apg_answer_err(apg_query *q, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *apg_what(const apg_query *q);
/* The first line of libpq's message (they end in newlines). */
void apg_first_line(char *dst, size_t n, const char *msg);
/* The oldest waiting query, or NULL. */
apg_query *apg_queue_first(const apg *p);
/* Gives an idle connection the next query that is still wanted. */
void apg_take_next(apg_conn *c);
/* 1 when a connection is connecting, idle or busy. */
int apg_any_alive(const apg *p);
/* Answers every waiting query with status and why. */
void apg_fail_queue(apg *p, int status, const char *why);
/* A uv handle of the pool finished closing: the last one ends apg_free's
 * wait. */
void apg_handle_gone(apg *p);

/* ---- apg_conn.c ---- */
/* Starts connecting (non-blocking, bounded by connect_timeout_ms). */
void apg_conn_connect(apg_conn *c);
/* Closes the connection (the server ends what it ran when it next checks
 * the socket) and leaves it UNUSED, its statement forgotten. */
void apg_conn_close(apg_conn *c);
/* Sends q on the idle (or q's held) connection c. */
void apg_conn_start(apg_conn *c, apg_query *q);
/* Runs q's next statement on the connection it holds (q->held), or
 * answers it and closes that connection. */
void apg_conn_resume(apg_query *q);
/* Ends c's running statement now with status, closing the connection. */
void apg_conn_abandon(apg_conn *c, int status, const char *why);
/* The close callback of a connection's timer (apg_handle_gone). */
void apg_conn_handle_closed(uv_handle_t *h);

#endif
