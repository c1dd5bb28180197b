/* audit_watch: Audit.Watch: its streams, how rows reach them, and how
 * streams whose token died end; the listener thread that reads the rows is
 * audit_listener.c.
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
 * slow client cannot hold up the others, and a stream's queue is bounded
 * (--stream-buffer-bytes). A stream whose queue is full ends with
 * RESOURCE_EXHAUSTED rather than skip records: an audit consumer must not
 * silently miss any; it reconnects and Lists the gap. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "service/audit_service/audit_service_internal.h"
#include "service/core/clock.h"
#include "service/core/log.h"
#include "service/core/worker.h"

static int64_t now_ms(void) { return rpc_now_ms(); }

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
    const char **dst[4] = {&wt->f.principal, &wt->f.method, &wt->f.service_prefix, &wt->f.target};
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
    const principal *p;
    audit_filter f;
    RPC_CHECK(audit_caller_filter(call, "Audit.Watch", req->filter, &p, &f));
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
        struct timespec ts = clock_cond_deadline(until);
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

void audit_watch_fan_out(audit_watch *w, const audit_row *row, uint64_t seq) {
    Memory__V1__AuditRecord rec;
    Google__Protobuf__Timestamp ts;
    Google__Protobuf__Duration d;
    char idbuf[24];
    audit_codec_record(row, &rec, &ts, &d, idbuf);
    Memory__V1__AuditWatchResponse resp = MEMORY__V1__AUDIT_WATCH_RESPONSE__INIT;
    resp.record = &rec;
    watcher *slow = NULL;
    pthread_mutex_lock(&w->lock);
    for (watcher **pp = &w->list; *pp;) {
        watcher *wt = *pp;
        if (seq <= wt->start_seq || strcmp(wt->tenant, row->tenant) != 0 ||
            !audit_codec_filter_match(&wt->f, row)) {
            pp = &wt->next;
            continue;
        }
        /* -1 means the stream is ending; its cancel callback unlinks it. */
        if (rpc_call_send(wt->call, &resp.base) != RPC_SEND_OVERFLOW) {
            pp = &wt->next;
            continue;
        }
        *pp = wt->next;
        w->n--;
        wt->next = slow;
        slow = wt;
    }
    pthread_mutex_unlock(&w->lock);
    while (slow) { /* ended outside the lock, as check_live ends its own */
        watcher *wt = slow;
        slow = wt->next;
        rpc_call_finish(wt->call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                        "audit: " RPC_OVERFLOW_MESSAGE
                        "; reconnect and use Audit.List for the gap");
        watcher_free(wt);
    }
}

/* ---- live checks ---- */

void audit_watch_check_live(audit_watch *w) {
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
    pthread_mutex_init(&w->lock, NULL);
    clock_cond_init(&w->cond);
    if (worker_start(audit_listener_main, w, &w->thread) != 0) {
        snprintf(err, errlen, "audit: cannot start the listener thread (out of memory or threads)");
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

/* worker_stop's interrupt: new Watch calls stop waiting for LISTEN, the
 * listener's poll wakes, and a fetch it sits in (behind a lock on the
 * table) is cancelled rather than left to its statement_timeout. */
static void interrupt_listener(void *arg) {
    audit_watch *w = arg;
    pthread_mutex_lock(&w->lock);
    w->stop = 1;
    pthread_cond_broadcast(&w->cond);
    char buf[256];
    if (w->cancel) PQcancel(w->cancel, buf, sizeof buf);
    pthread_mutex_unlock(&w->lock);
    uint64_t one = 1;
    if (write(w->wake_fd, &one, sizeof one) < 0) {
        /* cannot fail on a fresh eventfd; the poll times out anyway */
    }
}

void audit_watch_stop(audit_service *a) {
    audit_watch *w = a->watch;
    if (!w) return;
    worker_stop(w->thread, interrupt_listener);
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
    free(w->keys); /* and vals: one block */
    free(w->recent);
    close(w->wake_fd);
    arena_free(w->scratch);
    free(w);
}
