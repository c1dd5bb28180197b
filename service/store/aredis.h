/* aredis: one asynchronous Redis connection on the event loop (evloop.h),
 * through hiredis's libuv adapter, for commands a completion-queue thread
 * must not wait on (the cache's L2 lookups). Commands come from any
 * thread and are pipelined in order on the one connection: Redis runs
 * commands one at a time and answers in order, so more connections would
 * add nothing but sockets.
 *
 * Every command carries a deadline (the client's default when it has
 * none) and may be cancelled; either answers it at once. Redis answers in
 * order, so when the oldest command outlives its deadline, everything
 * behind it waits too: the connection is closed (whatever was still in
 * flight is answered STATUS_EUNAVAILABLE) and reopened with backoff.
 * While it is down, commands fail fast with STATUS_EUNAVAILABLE; at most
 * max_in_flight wait for replies (more: STATUS_EBUSY).
 *
 * Ownership: aredis_create returns a client the caller frees with
 * aredis_free before evloop_free. A command and what its argv points to
 * are the caller's and must stay valid until its done has run. */
#ifndef MEMORYD_STORE_AREDIS_H
#define MEMORYD_STORE_AREDIS_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "service/core/dlist.h"
#include "service/metrics/backend_metrics.h"
#include "service/store/evloop.h"

typedef struct aredis aredis;
typedef struct aredis_cmd aredis_cmd;

/* A subscriber connection's news (aredis_options.on_message), on the loop
 * thread: a channel's subscription confirmed or ended, or a message on it.
 * The bytes are hiredis's, valid during the call only. */
typedef enum aredis_sub_kind {
    AREDIS_SUBSCRIBED = 0,
    AREDIS_UNSUBSCRIBED = 1,
    AREDIS_MESSAGE = 2,
} aredis_sub_kind;
typedef void (*aredis_message_fn)(void *arg, aredis_sub_kind kind, const char *channel,
                                  size_t channel_len, const char *msg, size_t msg_len);

typedef struct aredis_options {
    const char *url;            /* redis_url.h */
    int connect_timeout_ms;     /* one connection attempt */
    int64_t default_timeout_ms; /* a command submitted without a deadline */
    int max_in_flight;          /* commands awaiting replies; more: STATUS_EBUSY */
    /* How long the oldest reply may be owed before Redis is taken for
     * stalled and the connection dropped (every command in flight then
     * answers EUNAVAILABLE); 0: 2000 ms. A command's own deadline never
     * does that: it answers that command ETIMEOUT, nothing more. */
    int64_t stall_ms;
    /* A subscriber connection (pub/sub) when set: it takes no commands but
     * aredis_subscribe / aredis_unsubscribe, and hears its channels through
     * on_message. on_state(arg, up) tells when the connection comes up (no
     * channel is subscribed then: the user subscribes again) and when it is
     * lost (every subscription with it). Both on the loop thread. */
    aredis_message_fn on_message;
    void (*on_state)(void *arg, int up);
    void *arg;
} aredis_options;

/* Called once per command on the loop thread: STATUS_OK with reply (not
 * an error reply; hiredis frees it when done returns: copy what is kept),
 * or a STATUS_E* code with the reason in q->err and reply NULL. The
 * command is the caller's again when done returns. */
typedef void (*aredis_done_fn)(aredis_cmd *q, int status, redisReply *reply);

struct aredis_cmd {
    /* set by the caller before aredis_submit */
    int argc;
    const char **argv;
    const size_t *lens;
    const char *what;    /* "cache lookup": errors */
    int64_t deadline_ms; /* CLOCK_MONOTONIC ms; INT64_MAX: the client's default */
    /* A write whose effect must not be orphaned (its audit row and
     * write-through follow its reply): once sent, neither its deadline nor
     * a cancel answers it early (Redis would apply it all the same); it
     * waits for its reply, or for the connection to be taken for stalled
     * (EUNAVAILABLE: applied or not, unknown). Before it is sent, both
     * still end it, and nothing is applied. */
    int wait_reply;
    aredis_done_fn done;
    void *arg;
    /* set by aredis */
    char err[256];
    /* aredis's */
    evloop_task task;
    aredis *r;
    int64_t submit_us; /* for the metrics' histogram */
    int cancelled;     /* set by aredis_cancel on any thread: __atomic builtins */
};

/* Starts connecting on loop (without waiting). 0 with *out, or -1 with
 * the reason in err (a malformed URL, out of memory). */
int aredis_create(evloop *loop, const aredis_options *o, aredis **out, char *err, size_t errlen);
/* Answers what is in flight (STATUS_EUNAVAILABLE), closes the connection
 * on the loop thread, waits for that, frees. From a thread other than the
 * loop's; accepts NULL. */
void aredis_free(aredis *r);

/* Sends q (any thread; allocates nothing). */
void aredis_submit(aredis *r, aredis_cmd *q);
/* Asks that q end now with STATUS_ECANCELLED (any thread, before or after
 * the submit); q stays the client's until its done has run. r is the
 * client q is (or will be) sent on, never NULL: a cancel can run before
 * the code that would record r in the caller's state. */
void aredis_cancel(aredis *r, aredis_cmd *q);

/* 1 while the connection is up; a racy snapshot for health and logs. */
int aredis_connected(const aredis *r);

/* The client's command counts and times (backend_metrics.h), for
 * backend_metrics_add with aredis_gauges: the connection (size 1, open or
 * not) and the commands awaiting replies (in_use: 1 while any does),
 * read on the loop thread as apg_gauges reads its pool's. */
const backend_stats *aredis_stats(const aredis *r);
void aredis_gauges(void *r, backend_gauges *out);

/* A subscriber connection's (UN)SUBSCRIBE of one channel, on the loop
 * thread: 0 when sent (on_message confirms it), -1 when the connection is
 * down (on_state will say when it is back). Do not subscribe to a channel
 * whose unsubscription is not yet confirmed: hiredis would drop the new
 * subscription's messages. */
int aredis_subscribe(aredis *r, const char *channel, size_t len);
int aredis_unsubscribe(aredis *r, const char *channel, size_t len);

/* PING with deadline_ms, waiting for the answer: 0 when Redis answered
 * PONG, else a STATUS_E* code (a hung Redis is noticed by the deadline).
 * For threads that may block (the health probe); never the loop's. */
int aredis_ping(aredis *r, int64_t deadline_ms);

#endif
