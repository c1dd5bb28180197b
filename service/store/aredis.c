/* aredis: see aredis.h. Everything but aredis_submit, aredis_cancel and
 * the create/free handshake runs on the loop thread. The commands awaiting
 * replies sit in a ring in the order they were sent, which is the order
 * hiredis calls back in; a command answered early (deadline, cancel)
 * leaves its slot empty and its late reply is dropped. */
#include "service/store/aredis.h"

#include <hiredis/async.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "service/core/clock.h"
#include "service/core/log.h"
#include "service/core/status.h"
#include "service/store/aredis_uv.h"
#include "service/store/redis_url.h"

#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 1000
#define STALL_MS_DEFAULT 2000 /* aredis_options.stall_ms when unset */

struct aredis {
    evloop *loop;
    aredis_options o;
    redis_url url;
    redisAsyncContext *ac; /* NULL: down (the backoff timer reconnects) */
    int up;                /* the connect callback said OK */
    atomic_int connected;
    atomic_int attempts_failed; /* connection attempts that failed (create's wait ends) */
    int backoff_ms;
    char last_error[200];
    backend_stats stats;       /* counted as commands are answered */
    uv_timer_t conn_timer;     /* connect timeout, then reconnect backoff */
    uv_timer_t deadline_timer; /* the earliest deadline in flight */
    uv_async_t cancel_wake;
    /* in flight, oldest first: cmds[i] NULL once answered early */
    aredis_cmd **cmds;
    int64_t *deadlines; /* each command's own: it is answered ETIMEOUT then */
    int64_t *sent;      /* when each went out: Redis owes the oldest since then */
    int64_t armed_at;   /* when deadline_timer fires; INT64_MAX: stopped */
    int head, count;
    int closing;
    /* create and free wait for the loop thread */
    evloop_task task;
    evloop_waiter setup;
    int handles, setup_failed;
};

/* privdata of the commands sent on connecting (AUTH, SELECT), and of the
 * PING after them whose answer makes the connection usable. */
static char setup_command, ready_command;

static int64_t now_ms(void) { return clock_mono_ms(NULL); }

static const char *what(const aredis_cmd *q) { return q->what ? q->what : "Redis command"; }

/* Every command ends here: counted, then handed back to its owner. */
static void answer(aredis_cmd *q, int status, redisReply *reply) {
    backend_stats *st = &q->r->stats;
    backend_stats_count(st, status);
    metrics_observe_us(&st->duration, (uint64_t)(clock_mono_us() - q->submit_us));
    q->done(q, status, reply);
}

static void answer_err(aredis_cmd *q, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void answer_err(aredis_cmd *q, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q->err, sizeof q->err, fmt, ap);
    va_end(ap);
    answer(q, status, NULL);
}

static int cancelled(const aredis_cmd *q) {
    return __atomic_load_n(&q->cancelled, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------ in flight */

static void on_deadline(uv_timer_t *t);
static void drop_connection(aredis *r, const char *why);

static int slot(const aredis *r, int i) { return (r->head + i) % r->o.max_in_flight; }

/* Arms the deadline timer for the earliest of: the deadline of a command
 * still waiting, and the moment the oldest reply has been owed for
 * stall_ms (then Redis has stopped answering). */
static void arm_deadlines(aredis *r) {
    int64_t at = r->count > 0 ? r->sent[r->head] + r->o.stall_ms : INT64_MAX;
    for (int i = 0; i < r->count; i++) {
        int s = slot(r, i);
        if (r->cmds[s] && !r->cmds[s]->wait_reply && r->deadlines[s] < at) at = r->deadlines[s];
    }
    r->armed_at = at;
    if (at == INT64_MAX) {
        uv_timer_stop(&r->deadline_timer);
        return;
    }
    uv_update_time(evloop_uv(r->loop)); /* timers count from the loop's cached time */
    int64_t in = at - now_ms();
    uv_timer_start(&r->deadline_timer, on_deadline, in > 0 ? (uint64_t)in : 0, 0);
}

/* Commands past their own deadline are answered ETIMEOUT, and that is all
 * a deadline does: a caller's short deadline says nothing of Redis, whose
 * late reply is then dropped while the connection serves everyone else.
 * Only when the oldest reply has been owed for stall_ms has Redis stopped
 * answering (and so has everything behind it): then the connection goes. */
static void on_deadline(uv_timer_t *t) {
    aredis *r = t->data;
    int64_t now = now_ms();
    for (int i = 0; i < r->count; i++) {
        int s = slot(r, i);
        aredis_cmd *q = r->cmds[s];
        if (q && !q->wait_reply && r->deadlines[s] <= now) {
            r->cmds[s] = NULL;
            answer_err(q, STATUS_ETIMEOUT, "%s: the deadline passed; Redis had not answered",
                       what(q));
        }
    }
    if (r->count > 0 && now - r->sent[r->head] >= r->o.stall_ms) {
        char why[96];
        snprintf(why, sizeof why, "Redis did not answer a command for %lld ms",
                 (long long)r->o.stall_ms);
        drop_connection(r, why);
    } else {
        arm_deadlines(r);
    }
}

/* apg_cancel's counterpart rang: answer every cancelled command. */
static void on_cancel_wake(uv_async_t *h) {
    aredis *r = h->data;
    for (int i = 0; i < r->count; i++) {
        int s = slot(r, i);
        aredis_cmd *q = r->cmds[s];
        if (q && !q->wait_reply && cancelled(q)) {
            r->cmds[s] = NULL;
            answer_err(q, STATUS_ECANCELLED, "%s: cancelled by the caller", what(q));
        }
    }
}

static void ready(aredis *r);

/* hiredis's callback, in the order commands were sent; reply NULL when
 * the connection went before the reply came. */
static void on_reply(redisAsyncContext *ac, void *reply_, void *privdata) {
    aredis *r = ac->data;
    redisReply *reply = reply_;
    if (privdata == &setup_command) {
        if (reply && reply->type == REDIS_REPLY_ERROR)
            log_fields(LOG_WARN, "redis: the connection's AUTH or SELECT was refused", LOG_F_STR,
                       "error", reply->str, LOG_F_END);
        return;
    }
    if (privdata == &ready_command) {
        if (reply && reply->type != REDIS_REPLY_ERROR && r->ac == ac) ready(r);
        return;
    }
    if (r->count == 0) return; /* cannot happen: every command has its slot */
    aredis_cmd *q = r->cmds[r->head];
    r->head = slot(r, 1);
    r->count--;
    if (!reply) /* hiredis answers NULL only when the connection is going: say so before
                 * the caller hears it, not after (on_disconnect runs later) */
        atomic_store(&r->connected, 0);
    if (!q) return; /* answered early; its reply is dropped */
    if (!reply)
        answer_err(q, STATUS_EUNAVAILABLE, "%s: Redis connection lost (%s)%s", what(q),
                   r->last_error[0] ? r->last_error : "closed",
                   q->wait_reply ? " before it answered: the write may have been applied" : "");
    else if (reply->type == REDIS_REPLY_ERROR)
        answer_err(q, STATUS_EUNAVAILABLE, "%s: Redis refused: %.*s", what(q), (int)reply->len,
                   reply->str);
    else answer(q, STATUS_OK, reply);
}

/* ------------------------------------------------------------ connection */

static void connect_now(aredis *r);

static void on_conn_timer(uv_timer_t *t) {
    aredis *r = t->data;
    if (r->ac && !r->up) {
        char why[64];
        snprintf(why, sizeof why, "connecting took over %d ms", r->o.connect_timeout_ms);
        drop_connection(r, why);
    } else if (!r->ac) {
        connect_now(r);
    }
}

static void schedule_reconnect(aredis *r) {
    if (r->closing) return;
    r->backoff_ms = r->backoff_ms ? r->backoff_ms * 2 : BACKOFF_FIRST_MS;
    if (r->backoff_ms > BACKOFF_MAX_MS) r->backoff_ms = BACKOFF_MAX_MS;
    uv_timer_start(&r->conn_timer, on_conn_timer, (uint64_t)r->backoff_ms, 0);
}

/* The connection is gone or going (hiredis frees ac): remember why, and
 * reconnect after the backoff. */
static void lost(aredis *r, const char *why) {
    int was_up = r->up;
    atomic_fetch_add(&r->attempts_failed, 1);
    r->ac = NULL;
    r->up = 0;
    atomic_store(&r->connected, 0);
    if (was_up || !r->last_error[0])
        log_fields(LOG_WARN, "redis: connection lost; reconnecting with backoff", LOG_F_STR,
                   "error", why, LOG_F_END);
    snprintf(r->last_error, sizeof r->last_error, "%s", why);
    uv_timer_stop(&r->conn_timer);
    schedule_reconnect(r);
    if (was_up && r->o.on_state) r->o.on_state(r->o.arg, 0);
}

/* Closes the connection ourselves: what is in flight is answered
 * (EUNAVAILABLE, through on_reply), then hiredis frees it. */
static void drop_connection(aredis *r, const char *why) {
    redisAsyncContext *ac = r->ac;
    if (!ac) return;
    lost(r, why);
    redisAsyncFree(ac); /* runs on_reply for each; on_disconnect sees ac is no longer ours */
    arm_deadlines(r);
}

static void on_connect(const redisAsyncContext *ac, int status) {
    aredis *r = ac->data;
    if (r->ac != ac) return;
    if (status != REDIS_OK) { /* hiredis frees ac after this */
        lost(r, ac->errstr[0] ? ac->errstr : "cannot connect");
        return;
    }
    /* A peer that vanished without a FIN (a dead host, a cut link) is
     * noticed by TCP keepalive: a subscriber connection sends nothing
     * that would notice it otherwise. */
    redisEnableKeepAlive(&r->ac->c);
    /* Usable once the PING sent behind AUTH and SELECT is answered (ready):
     * a port that accepts but does not serve (a Redis shutting down, or
     * frozen) must not hold commands; conn_timer still bounds the wait. */
}

/* The connection answered: commands may go. */
static void ready(aredis *r) {
    uv_timer_stop(&r->conn_timer);
    r->up = 1;
    r->backoff_ms = 0;
    atomic_store(&r->connected, 1);
    if (r->last_error[0]) {
        log_fields(LOG_INFO, "redis: connected again", LOG_F_END);
        r->last_error[0] = '\0';
    }
    if (r->o.on_state) r->o.on_state(r->o.arg, 1);
}

static void on_disconnect(const redisAsyncContext *ac, int status) {
    aredis *r = ac->data;
    (void)status;
    if (r->ac == ac) lost(r, ac->errstr[0] ? ac->errstr : "the server closed the connection");
}

static void connect_now(aredis *r) {
    redisAsyncContext *ac = redisAsyncConnect(r->url.host, r->url.port);
    if (!ac || ac->err) {
        char why[200];
        snprintf(why, sizeof why, "%s", ac ? ac->errstr : "out of memory");
        if (ac) redisAsyncFree(ac);
        lost(r, why);
        return;
    }
    ac->data = r;
    if (aredis_uv_attach(ac, evloop_uv(r->loop)) != REDIS_OK) {
        redisAsyncFree(ac);
        lost(r, "cannot watch the connection's socket");
        return;
    }
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    r->ac = ac;
    /* Sent once connected, ahead of every command. */
    if (r->url.password[0])
        redisAsyncCommand(ac, on_reply, &setup_command, "AUTH %s", r->url.password);
    if (r->url.db) redisAsyncCommand(ac, on_reply, &setup_command, "SELECT %d", r->url.db);
    redisAsyncCommand(ac, on_reply, &ready_command, "PING");
    uv_update_time(evloop_uv(r->loop));
    uv_timer_start(&r->conn_timer, on_conn_timer, (uint64_t)r->o.connect_timeout_ms, 0);
}

/* ------------------------------------------------------------ submitting */

static void submit_on_loop(evloop_task *t) {
    aredis_cmd *q = (aredis_cmd *)((char *)t - offsetof(aredis_cmd, task));
    aredis *r = q->r;
    if (r->closing) {
        answer_err(q, STATUS_EUNAVAILABLE, "%s: the server is shutting down", what(q));
    } else if (cancelled(q)) {
        answer_err(q, STATUS_ECANCELLED, "%s: cancelled by the caller", what(q));
    } else if (q->deadline_ms <= now_ms()) {
        answer_err(q, STATUS_ETIMEOUT, "%s: the deadline passed before it was sent", what(q));
    } else if (!r->ac || !r->up) {
        /* Never queued behind a (re)connect: the caller hears at once. */
        answer_err(q, STATUS_EUNAVAILABLE, "%s: Redis is unreachable (%s); retrying", what(q),
                   r->last_error[0] ? r->last_error
                   : r->ac          ? "connecting"
                                    : "not connected");
    } else if (r->count >= r->o.max_in_flight) {
        answer_err(q, STATUS_EBUSY, "%s: Redis is saturated: %d commands await replies", what(q),
                   r->count);
    } else if (redisAsyncCommandArgv(r->ac, on_reply, NULL, q->argc, q->argv, q->lens) !=
               REDIS_OK) {
        answer_err(q, STATUS_EUNAVAILABLE, "%s: Redis connection lost (%s)", what(q),
                   r->ac->errstr[0] ? r->ac->errstr : "cannot send");
    } else {
        int s = slot(r, r->count++);
        r->cmds[s] = q;
        r->deadlines[s] = q->deadline_ms;
        r->sent[s] = now_ms();
        if (r->count == 1 || (!q->wait_reply && q->deadline_ms < r->armed_at)) arm_deadlines(r);
    }
}

void aredis_submit(aredis *r, aredis_cmd *q) {
    q->r = r;
    q->err[0] = '\0';
    q->submit_us = clock_mono_us();
    if (q->deadline_ms == INT64_MAX) q->deadline_ms = now_ms() + r->o.default_timeout_ms;
    q->task.fn = submit_on_loop;
    evloop_post(r->loop, &q->task);
}

void aredis_cancel(aredis *r, aredis_cmd *q) {
    __atomic_store_n(&q->cancelled, 1, __ATOMIC_RELEASE);
    uv_async_send(&r->cancel_wake);
}

int aredis_connected(const aredis *r) { return atomic_load(&((aredis *)r)->connected); }

const backend_stats *aredis_stats(const aredis *r) { return &r->stats; }

/* The connection's state, read on the loop thread for the scraper (as
 * apg_gauges). */
static void gauges_on_loop(void *arg, void *out) {
    aredis *r = arg;
    backend_gauges *g = out;
    g->size = 1;
    g->open = r->up;
    g->in_use = r->count > 0;
    g->waiting = r->count;
}

void aredis_gauges(void *client, backend_gauges *out) {
    aredis *r = client;
    if (evloop_call(r->loop, gauges_on_loop, r, out, sizeof *out, 1000) != 0)
        *out = (backend_gauges){-1, -1, -1, -1};
}

/* ------------------------------------------------------------ pub/sub */

/* hiredis's callback for every reply on a subscribed channel: ["subscribe",
 * channel, count], ["message", channel, payload], ["unsubscribe", channel,
 * count]; NULL when the connection goes (lost() tells the user). */
static void on_sub_reply(redisAsyncContext *ac, void *reply_, void *privdata) {
    (void)privdata;
    aredis *r = ac->data;
    const redisReply *rp = reply_;
    if (!rp || rp->type != REDIS_REPLY_ARRAY || rp->elements != 3 ||
        rp->element[0]->type != REDIS_REPLY_STRING || rp->element[1]->type != REDIS_REPLY_STRING)
        return;
    const char *kind = rp->element[0]->str;
    const redisReply *ch = rp->element[1], *third = rp->element[2];
    if (strcmp(kind, "message") == 0 && third->type == REDIS_REPLY_STRING)
        r->o.on_message(r->o.arg, AREDIS_MESSAGE, ch->str, ch->len, third->str, third->len);
    else if (strcmp(kind, "subscribe") == 0)
        r->o.on_message(r->o.arg, AREDIS_SUBSCRIBED, ch->str, ch->len, NULL, 0);
    else if (strcmp(kind, "unsubscribe") == 0)
        r->o.on_message(r->o.arg, AREDIS_UNSUBSCRIBED, ch->str, ch->len, NULL, 0);
}

static int sub_command(aredis *r, const char *verb, const char *channel, size_t len) {
    if (!r->ac || !r->up) return -1;
    const char *argv[2] = {verb, channel};
    size_t lens[2] = {strlen(verb), len};
    return redisAsyncCommandArgv(r->ac, on_sub_reply, NULL, 2, argv, lens) == REDIS_OK ? 0 : -1;
}

int aredis_subscribe(aredis *r, const char *channel, size_t len) {
    return sub_command(r, "SUBSCRIBE", channel, len);
}

int aredis_unsubscribe(aredis *r, const char *channel, size_t len) {
    return sub_command(r, "UNSUBSCRIBE", channel, len);
}

typedef struct {
    aredis_cmd q;
    evloop_waiter answered;
    int status;
} ping_cmd;

static void ping_done(aredis_cmd *q, int status, redisReply *r) {
    ping_cmd *pc = (ping_cmd *)q;
    if (status == STATUS_OK && !(r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0))
        status = STATUS_EUNAVAILABLE;
    pc->status = status;
    evloop_wake(&pc->answered);
}

int aredis_ping(aredis *r, int64_t deadline_ms) {
    static const char *argv[] = {"PING"};
    static const size_t lens[] = {4};
    ping_cmd pc = {.q = {.argc = 1,
                         .argv = argv,
                         .lens = lens,
                         .what = "ping",
                         .deadline_ms = deadline_ms,
                         .done = ping_done}};
    evloop_waiter_init(&pc.answered);
    aredis_submit(r, &pc.q);
    /* aredis answers every command by its deadline: no timed wait needed. */
    evloop_wait(&pc.answered);
    evloop_waiter_destroy(&pc.answered);
    return pc.status;
}

/* ------------------------------------------------------------ life */

static void setup_on_loop(evloop_task *t) {
    aredis *r = (aredis *)((char *)t - offsetof(aredis, task));
    uv_loop_t *uv = evloop_uv(r->loop);
    if (uv_async_init(uv, &r->cancel_wake, on_cancel_wake) != 0) {
        r->setup_failed = 1;
        evloop_wake(&r->setup);
        return;
    }
    r->cancel_wake.data = r;
    uv_timer_init(uv, &r->conn_timer);
    uv_timer_init(uv, &r->deadline_timer);
    r->conn_timer.data = r->deadline_timer.data = r;
    r->handles = 3;
    connect_now(r);
    evloop_wake(&r->setup);
}

static void handle_closed(uv_handle_t *h) {
    aredis *r = h->data;
    if (--r->handles == 0) evloop_wake(&r->setup);
}

static void teardown_on_loop(evloop_task *t) {
    aredis *r = (aredis *)((char *)t - offsetof(aredis, task));
    r->closing = 1;
    if (r->ac) {
        redisAsyncContext *ac = r->ac;
        snprintf(r->last_error, sizeof r->last_error, "the server is shutting down");
        r->ac = NULL;
        redisAsyncFree(ac);
    }
    uv_close((uv_handle_t *)&r->conn_timer, handle_closed);
    uv_close((uv_handle_t *)&r->deadline_timer, handle_closed);
    uv_close((uv_handle_t *)&r->cancel_wake, handle_closed);
}

static void destroy(aredis *r) {
    evloop_waiter_destroy(&r->setup);
    free(r->cmds);
    free(r->deadlines);
    free(r->sent);
    free(r);
}

int aredis_create(evloop *loop, const aredis_options *o, aredis **out, char *err, size_t errlen) {
    if (o->connect_timeout_ms < 1 || o->default_timeout_ms < 1 || o->max_in_flight < 1)
        return snprintf(err, errlen, "redis: bad client options"), -1;
    aredis *r = calloc(1, sizeof *r);
    if (!r) return snprintf(err, errlen, "redis: out of memory"), -1;
    if (redis_url_parse(o->url, &r->url, err, errlen) != 0) {
        free(r);
        return -1;
    }
    r->loop = loop;
    r->o = *o;
    r->o.url = NULL; /* parsed into r->url; the string is not kept */
    if (r->o.stall_ms <= 0) r->o.stall_ms = STALL_MS_DEFAULT;
    atomic_init(&r->connected, 0);
    atomic_init(&r->attempts_failed, 0);
    r->cmds = calloc((size_t)o->max_in_flight, sizeof *r->cmds);
    r->deadlines = calloc((size_t)o->max_in_flight, sizeof *r->deadlines);
    r->sent = calloc((size_t)o->max_in_flight, sizeof *r->sent);
    evloop_waiter_init(&r->setup);
    if (!r->cmds || !r->deadlines || !r->sent) {
        destroy(r);
        return snprintf(err, errlen, "redis: out of memory"), -1;
    }
    r->task.fn = setup_on_loop;
    evloop_post(loop, &r->task);
    evloop_wait(&r->setup);
    if (r->setup_failed) {
        destroy(r);
        return snprintf(err, errlen, "redis: cannot set up the client on the event loop"), -1;
    }
    /* Commands are refused until the connection has answered its PING:
     * give the first one its connect timeout, so a server that starts
     * with Redis up serves from its first call (one that is down costs
     * start-up this wait, then the backoff takes over). */
    for (int64_t until = now_ms() + o->connect_timeout_ms;
         !atomic_load(&r->connected) && !atomic_load(&r->attempts_failed) && now_ms() < until;) {
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    *out = r;
    return 0;
}

void aredis_free(aredis *r) {
    if (!r) return;
    r->task.fn = teardown_on_loop;
    evloop_post(r->loop, &r->task);
    evloop_wait(&r->setup);
    destroy(r);
}
