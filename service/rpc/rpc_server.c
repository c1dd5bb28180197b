/* rpc_server: server lifecycle, worker threads and the request slots that
 * keep grpc_server_request_(registered_)call posted. */
#include <errno.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "service/core/array.h"
#include "service/core/clock.h"
#include "service/core/log.h"
#include "service/rpc/rpc_internal.h"

/* A posted request for one registered method. It is re-posted as soon as a
 * call arrives so the method always has a slot waiting. */
typedef struct {
    rpc_tag tag;
    rpc_server *srv;
    rpc_method_entry *entry;
    grpc_call *call;
    gpr_timespec deadline;
    grpc_metadata_array md;
    grpc_byte_buffer *payload;
} method_slot;

/* The catch-all request for paths nobody registered. Without it a call to
 * an unknown method would hang until its deadline. */
typedef struct {
    rpc_tag tag;
    rpc_server *srv;
    grpc_call *call;
    grpc_call_details details;
    grpc_metadata_array md;
} unknown_slot;

static int post_method_slot(method_slot *s);
static int post_unknown_slot(unknown_slot *s);

static void method_slot_done(rpc_tag *tag, int ok) {
    method_slot *s = RPC_CONTAINER_OF(tag, method_slot, tag);
    if (!ok) { /* server shutting down: the slot retires */
        grpc_metadata_array_destroy(&s->md);
        free(s);
        return;
    }
    grpc_call *call = s->call;
    grpc_metadata_array md = s->md;
    grpc_byte_buffer *payload = s->payload;
    gpr_timespec deadline = s->deadline;
    rpc_method_entry *entry = s->entry;
    rpc_server *srv = s->srv;
    /* Re-post before running the handler so arrivals never wait for it. */
    grpc_metadata_array_init(&s->md);
    s->call = NULL;
    s->payload = NULL;
    if (post_method_slot(s) != 0) {
        grpc_metadata_array_destroy(&s->md);
        free(s);
    }
    rpc_call_dispatch(srv, entry, call, deadline, &md, payload, NULL);
}

static int post_method_slot(method_slot *s) {
    if (atomic_load(&s->srv->shutting_down)) return -1;
    grpc_call_error e = grpc_server_request_registered_call(
        s->srv->server, s->entry->registered, &s->call, &s->deadline, &s->md,
        s->entry->m.kind == RPC_BIDI_STREAM ? NULL : &s->payload, s->srv->cq, s->srv->cq, &s->tag);
    if (e != GRPC_CALL_OK) {
        if (!atomic_load(&s->srv->shutting_down))
            log_fields(LOG_ERROR, "request_registered_call failed", LOG_F_STR, "method",
                       s->entry->m.path, LOG_F_INT, "error", (int64_t)e, LOG_F_END);
        return -1;
    }
    return 0;
}

static void unknown_slot_done(rpc_tag *tag, int ok) {
    unknown_slot *s = RPC_CONTAINER_OF(tag, unknown_slot, tag);
    if (!ok) {
        grpc_call_details_destroy(&s->details);
        grpc_metadata_array_destroy(&s->md);
        free(s);
        return;
    }
    grpc_call *call = s->call;
    grpc_metadata_array md = s->md;
    char path[512];
    size_t n = GRPC_SLICE_LENGTH(s->details.method);
    if (n >= sizeof path) n = sizeof path - 1;
    memcpy(path, GRPC_SLICE_START_PTR(s->details.method), n);
    path[n] = '\0';
    gpr_timespec deadline = s->details.deadline;
    rpc_server *srv = s->srv;
    grpc_call_details_destroy(&s->details);
    grpc_call_details_init(&s->details);
    grpc_metadata_array_init(&s->md);
    s->call = NULL;
    if (post_unknown_slot(s) != 0) {
        grpc_call_details_destroy(&s->details);
        grpc_metadata_array_destroy(&s->md);
        free(s);
    }
    rpc_call_dispatch(srv, NULL, call, deadline, &md, NULL, path);
}

static int post_unknown_slot(unknown_slot *s) {
    if (atomic_load(&s->srv->shutting_down)) return -1;
    grpc_call_error e = grpc_server_request_call(s->srv->server, &s->call, &s->details, &s->md,
                                                 s->srv->cq, s->srv->cq, &s->tag);
    return e == GRPC_CALL_OK ? 0 : -1;
}

static void shutdown_done(rpc_tag *tag, int ok) {
    (void)ok;
    rpc_server *srv = RPC_CONTAINER_OF(tag, rpc_server, shutdown_tag);
    pthread_mutex_lock(&srv->lock);
    srv->shutdown_notified = 1;
    pthread_cond_broadcast(&srv->cond);
    pthread_mutex_unlock(&srv->lock);
}

/* The drain marker's completion: everything the queue held when the drain
 * began has been handed out, so later calls are refused. */
static void drain_marker_done(rpc_tag *tag, int ok) {
    (void)ok; /* a watch that times out completes "not ok": the point */
    rpc_server *srv = RPC_CONTAINER_OF(tag, rpc_server, drain_tag);
    atomic_store(&srv->drain, RPC_DRAIN_REFUSING);
    atomic_fetch_add(&srv->drain_markers_seen, 1);
}

/* Queues the drain marker behind whatever the completion queue holds: an
 * idle channel's connectivity watch with a deadline of now, which gRPC
 * completes on the queue when its timer fires (the C API has no other
 * way to post a tag). Without it the drain refuses at once. */
static void post_drain_marker(rpc_server *srv) {
    if (!srv->drain_marker) {
        grpc_channel_credentials *creds = grpc_insecure_credentials_create();
        srv->drain_marker =
            creds ? grpc_channel_create("unix:/nonexistent/memoryd-drain-marker", creds, NULL)
                  : NULL;
        if (creds) grpc_channel_credentials_release(creds);
    }
    if (!srv->drain_marker) { /* as if it had come */
        drain_marker_done(&srv->drain_tag, 0);
        return;
    }
    grpc_channel_watch_connectivity_state(srv->drain_marker, GRPC_CHANNEL_IDLE,
                                          gpr_now(GPR_CLOCK_MONOTONIC), srv->cq, &srv->drain_tag);
}

/* Ends every served stream (UNAVAILABLE). The list is copied under the
 * lock with a reference each: ending one may destroy it. A call whose last
 * reference is already gone is being destroyed (it leaves the list under
 * the lock, after its count reached zero): it is skipped, not revived. */
static void end_streams(rpc_server *srv) {
    for (;;) {
        rpc_call *batch[64];
        size_t n = 0;
        pthread_mutex_lock(&srv->lock);
        for (dlist *l = srv->streams.next; l != &srv->streams && n < 64; l = l->next) {
            rpc_call *c = DLIST_ENTRY(l, rpc_call, stream_link);
            if (rpc_call_try_ref(c)) batch[n++] = c;
        }
        /* Off the list now, so the next round sees the rest. */
        for (size_t i = 0; i < n; i++) dlist_remove(&batch[i]->stream_link);
        srv->nstreams -= (int)n;
        pthread_mutex_unlock(&srv->lock);
        if (n == 0) return;
        for (size_t i = 0; i < n; i++) rpc_stream_end_for_drain(batch[i]);
    }
}

static void *worker_main(void *arg) {
    rpc_server *srv = arg;
    for (;;) {
        grpc_event ev =
            grpc_completion_queue_next(srv->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN) break;
        if (ev.type == GRPC_OP_COMPLETE) {
            rpc_tag *tag = ev.tag;
            tag->done(tag, ev.success);
        }
    }
    return NULL;
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

int rpc_server_create(const rpc_server_options *opts, rpc_server **out, char *err, size_t errlen) {
    rpc_server *srv = calloc(1, sizeof *srv);
    if (!srv) return snprintf(err, errlen, "out of memory"), -1;
    srv->opts = *opts;
    srv->listen = strdup(opts->listen ? opts->listen : "127.0.0.1:0");
    srv->tls_cert_pem = dup_or_null(opts->tls_cert_pem);
    srv->tls_key_pem = dup_or_null(opts->tls_key_pem);
    srv->tls_client_ca_pem = dup_or_null(opts->tls_client_ca_pem);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    srv->nthreads = opts->workers > 0 ? opts->workers : (cores > 0 ? (int)cores : 2);
    srv->prepost = srv->nthreads * 2 < 8 ? 8 : srv->nthreads * 2;
    pthread_mutex_init(&srv->lock, NULL);
    clock_cond_init(&srv->cond);
    srv->shutdown_tag.done = shutdown_done;
    srv->drain_tag.done = drain_marker_done;
    dlist_init(&srv->streams);
    /* Enough idle arenas for the calls a busy server has in flight. */
    srv->arenas = arena_pool_create(1024);
    int task_threads = opts->task_threads > 0 ? opts->task_threads : 16;
    int task_queue = opts->task_queue_max > 0 ? opts->task_queue_max : 1024;
    if (taskpool_create("tasks", task_threads, (size_t)task_queue, &srv->tasks, err, errlen) != 0) {
        rpc_server_free(srv);
        return -1;
    }
    srv->gpr_mono_offset_ms = rpc_now_ms() - gpr_time_to_millis(gpr_now(GPR_CLOCK_MONOTONIC));

    int max_msg = opts->max_message_bytes > 0 ? opts->max_message_bytes : 4 << 20;
    srv->max_message_bytes = (size_t)max_msg;
    srv->max_call_memory = opts->max_call_memory > 0 ? opts->max_call_memory : (size_t)64 << 20;
    srv->stream_buffer_bytes =
        opts->stream_buffer_bytes > 0 ? opts->stream_buffer_bytes : (size_t)256 << 10;
    srv->max_streams = opts->max_streams > 0 ? opts->max_streams : 1024;
    srv->consistency_window_us =
        (opts->consistency_window_ms > 0 ? opts->consistency_window_ms : 60000) * 1000;
    /* Channel-arg helpers are not exported from Debian's build: build the
     * grpc_arg structs by hand. */
    grpc_arg args[] = {
        {GRPC_ARG_INTEGER, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, {.integer = max_msg}},
        {GRPC_ARG_INTEGER, GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, {.integer = max_msg}},
        {GRPC_ARG_INTEGER,
         GRPC_ARG_KEEPALIVE_TIME_MS,
         {.integer = opts->keepalive_time_ms > 0 ? opts->keepalive_time_ms : 60000}},
        {GRPC_ARG_INTEGER,
         GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
         {.integer = opts->keepalive_timeout_ms > 0 ? opts->keepalive_timeout_ms : 20000}},
        {GRPC_ARG_INTEGER, GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, {.integer = 1}},
        /* Rebalancing behind L4 balancers: connections end after an age. */
        {GRPC_ARG_INTEGER,
         GRPC_ARG_MAX_CONNECTION_AGE_MS,
         {.integer = opts->max_connection_age_ms > 0 ? opts->max_connection_age_ms : INT_MAX}},
        {GRPC_ARG_INTEGER,
         GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
         {.integer =
              opts->max_connection_age_grace_ms > 0 ? opts->max_connection_age_grace_ms : 30000}},
        /* Pings faster than this, with no call open, are strikes; too many
         * strikes and the connection is sent GOAWAY. */
        {GRPC_ARG_INTEGER,
         GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
         {.integer = opts->min_ping_interval_ms > 0 ? opts->min_ping_interval_ms : 10000}},
        {GRPC_ARG_INTEGER,
         GRPC_ARG_HTTP2_MAX_PING_STRIKES,
         {.integer = opts->max_ping_strikes > 0 ? opts->max_ping_strikes : 2}},
        /* Without this a second memoryd would silently share the port. */
        {GRPC_ARG_INTEGER, GRPC_ARG_ALLOW_REUSEPORT, {.integer = 0}},
    };
    grpc_channel_args ch_args = {sizeof args / sizeof args[0], args};
    srv->server = grpc_server_create(&ch_args, NULL);
    srv->cq = grpc_completion_queue_create_for_next(NULL);
    if (!srv->listen || !srv->server || !srv->cq || !srv->arenas) {
        snprintf(err, errlen, "cannot create the gRPC server");
        rpc_server_free(srv);
        return -1;
    }
    grpc_server_register_completion_queue(srv->server, srv->cq, NULL);
    *out = srv;
    return 0;
}

int rpc_server_add_method(rpc_server *srv, const rpc_method *m) {
    if (atomic_load(&srv->started) || !m->path || m->path[0] != '/' || !m->request || !m->response)
        return -1;
    if ((m->kind == RPC_UNARY && !m->unary) || (m->kind == RPC_SERVER_STREAM && !m->stream) ||
        (m->kind == RPC_BIDI_STREAM && !m->bidi))
        return -1;
    for (size_t i = 0; i < srv->nmethods; i++)
        if (strcmp(srv->methods[i].m.path, m->path) == 0) return -1;
    rpc_method_entry *grown =
        array_grow(srv->methods, &srv->cap_methods, srv->nmethods + 1, sizeof *grown, 32);
    if (!grown) return -1;
    srv->methods = grown;
    rpc_method_entry *e = &srv->methods[srv->nmethods];
    e->m = *m;
    /* Streams that read several messages must not have the first one read
     * for them; unary and server-streaming get it with the call. */
    e->registered = grpc_server_register_method(srv->server, m->path, NULL,
                                                m->kind == RPC_BIDI_STREAM
                                                    ? GRPC_SRM_PAYLOAD_NONE
                                                    : GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER,
                                                0);
    if (!e->registered) return -1;
    srv->nmethods++;
    return 0;
}

int rpc_server_add_methods(rpc_server *srv, const rpc_method *methods, size_t n, void *arg) {
    for (size_t i = 0; i < n; i++) {
        rpc_method m = methods[i];
        m.arg = arg;
        if (rpc_server_add_method(srv, &m) != 0) {
            log_fields(LOG_ERROR, "cannot register method", LOG_F_STR, "path", m.path, LOG_F_END);
            return -1;
        }
    }
    return 0;
}

int rpc_server_add_interceptor(rpc_server *srv, rpc_interceptor_fn fn, void *arg) {
    if (atomic_load(&srv->started)) return -1;
    rpc_interceptor *p =
        realloc(srv->interceptors, (srv->ninterceptors + 1) * sizeof *srv->interceptors);
    if (!p) return -1;
    srv->interceptors = p;
    p[srv->ninterceptors++] = (rpc_interceptor){fn, arg};
    return 0;
}

int rpc_server_add_observer(rpc_server *srv, rpc_observer_fn fn, void *arg) {
    if (atomic_load(&srv->started)) return -1;
    rpc_observer *p = realloc(srv->observers, (srv->nobservers + 1) * sizeof *srv->observers);
    if (!p) return -1;
    srv->observers = p;
    p[srv->nobservers++] = (rpc_observer){fn, arg};
    return 0;
}

void rpc_server_set_unknown_describer(rpc_server *srv, rpc_unknown_fn fn, void *arg) {
    srv->unknown_fn = fn;
    srv->unknown_arg = arg;
}

static int bind_listener(rpc_server *srv, char *err, size_t errlen) {
    grpc_server_credentials *creds;
    if (srv->tls_cert_pem && srv->tls_key_pem) {
        grpc_ssl_pem_key_cert_pair pair = {srv->tls_key_pem, srv->tls_cert_pem};
        creds = grpc_ssl_server_credentials_create_ex(
            srv->tls_client_ca_pem, &pair, 1,
            srv->tls_client_ca_pem ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                   : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
            NULL);
    } else {
        creds = grpc_insecure_server_credentials_create();
    }
    if (!creds) return snprintf(err, errlen, "cannot create server credentials"), -1;
    srv->port = grpc_server_add_http2_port(srv->server, srv->listen, creds);
    grpc_server_credentials_release(creds);
    if (srv->port <= 0) {
        snprintf(err, errlen,
                 "cannot listen on %s: the address is in use, not local, or not host:port",
                 srv->listen);
        return -1;
    }
    return 0;
}

static int post_all_slots(rpc_server *srv) {
    for (size_t i = 0; i < srv->nmethods; i++) {
        for (int k = 0; k < srv->prepost; k++) {
            method_slot *s = calloc(1, sizeof *s);
            if (!s) return -1;
            s->tag.done = method_slot_done;
            s->srv = srv;
            s->entry = &srv->methods[i];
            grpc_metadata_array_init(&s->md);
            if (post_method_slot(s) != 0) {
                grpc_metadata_array_destroy(&s->md);
                free(s);
                return -1;
            }
        }
    }
    for (int k = 0; k < 2; k++) {
        unknown_slot *u = calloc(1, sizeof *u);
        if (!u) return -1;
        u->tag.done = unknown_slot_done;
        u->srv = srv;
        grpc_call_details_init(&u->details);
        grpc_metadata_array_init(&u->md);
        if (post_unknown_slot(u) != 0) {
            grpc_call_details_destroy(&u->details);
            grpc_metadata_array_destroy(&u->md);
            free(u);
            return -1;
        }
    }
    return 0;
}

int rpc_server_start(rpc_server *srv, char *err, size_t errlen) {
    if (bind_listener(srv, err, errlen) != 0) return -1;
    grpc_server_start(srv->server);
    atomic_store(&srv->started, 1);
    if (post_all_slots(srv) != 0) {
        snprintf(err, errlen, "cannot post gRPC request slots");
        return -1;
    }
    srv->threads = calloc((size_t)srv->nthreads, sizeof *srv->threads);
    if (!srv->threads) return snprintf(err, errlen, "out of memory"), -1;
    for (int i = 0; i < srv->nthreads; i++) {
        if (pthread_create(&srv->threads[i], NULL, worker_main, srv) != 0) {
            snprintf(err, errlen, "cannot start worker thread %d", i);
            srv->nthreads = i;
            return -1;
        }
    }
    return 0;
}

int rpc_server_port(const rpc_server *srv) { return srv->port; }

size_t rpc_server_method_count(const rpc_server *srv) { return srv->nmethods; }

const char *rpc_server_method_path(const rpc_server *srv, size_t i) {
    return i < srv->nmethods ? srv->methods[i].m.path : NULL;
}

void rpc_server_get_stats(rpc_server *srv, rpc_server_stats *out) {
    out->calls_in_flight = atomic_load(&srv->served_calls);
    pthread_mutex_lock(&srv->lock);
    out->streams_open = srv->nstreams;
    pthread_mutex_unlock(&srv->lock);
}

/* Waits for the shutdown notification until deadline (monotonic ms) or
 * forever when deadline is negative. Returns 1 once notified. */
static int wait_notified(rpc_server *srv, int64_t deadline_ms) {
    pthread_mutex_lock(&srv->lock);
    while (!srv->shutdown_notified) {
        if (deadline_ms < 0) {
            pthread_cond_wait(&srv->cond, &srv->lock);
            continue;
        }
        struct timespec until = clock_cond_deadline(deadline_ms);
        if (pthread_cond_timedwait(&srv->cond, &srv->lock, &until) == ETIMEDOUT) break;
    }
    int done = srv->shutdown_notified;
    pthread_mutex_unlock(&srv->lock);
    return done;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

void rpc_server_shutdown(rpc_server *srv, int grace_ms) {
    if (!atomic_load(&srv->started) || atomic_exchange(&srv->shutting_down, 1)) return;
    int64_t deadline = rpc_now_ms() + (grace_ms > 0 ? grace_ms : 0);
    /* Drain first, with gRPC still serving: were it shut down now, it
     * would cancel the calls it holds for want of a request slot and the
     * ones arriving before clients hear GOAWAY (CANCELLED, which a client
     * cannot safely retry), and count neither. */
    atomic_store(&srv->drain, RPC_DRAIN_BACKLOG);
    int posted = 1;
    post_drain_marker(srv);
    end_streams(srv);
    /* Done when nothing is served across a whole marker round: a call the
     * queue held when the count last fell to zero (a health check, which
     * is still served) is dispatched, and counted, before the next marker
     * comes back. */
    int quiet = 0;
    while (rpc_now_ms() < deadline) {
        if (atomic_load(&srv->served_calls) > 0) quiet = 0;
        if (atomic_load(&srv->served_calls) > 0 || atomic_load(&srv->drain_markers_seen) < posted) {
            sleep_ms(5);
            continue;
        }
        if (quiet) break;
        quiet = 1;
        posted++;
        post_drain_marker(srv);
    }
    int left = atomic_load(&srv->served_calls);
    atomic_store(&srv->drain, RPC_DRAIN_REFUSING);
    grpc_server_shutdown_and_notify(srv->server, srv->cq, &srv->shutdown_tag);
    if (left > 0) {
        log_fields(LOG_WARN, "grace period over: cancelling the calls still running", LOG_F_INT,
                   "grace_ms", (int64_t)grace_ms, LOG_F_INT, "calls", (int64_t)left, LOG_F_END);
        grpc_server_cancel_all_calls(srv->server);
    }
    /* The core reports shutdown once every connection is gone, and clients
     * may keep idle connections open for long: cancel what arrived since
     * (refusals on their way out) after a short wait, and go on. */
    int forced = 0;
    int64_t force_at = rpc_now_ms() + 1000;
    while (!wait_notified(srv, rpc_now_ms() + 20)) {
        if (forced || (atomic_load(&srv->live_calls) > 0 && rpc_now_ms() < force_at)) continue;
        grpc_server_cancel_all_calls(srv->server);
        forced = 1;
    }
    /* Handlers may still be running (a blocked backend call whose client
     * already gave up): their final batches need the queue. */
    int64_t warned_at = rpc_now_ms();
    while (atomic_load(&srv->live_calls) > 0) {
        if (rpc_now_ms() - warned_at > 5000) {
            log_fields(LOG_WARN, "waiting for handlers to return", LOG_F_INT, "calls",
                       (int64_t)atomic_load(&srv->live_calls), LOG_F_END);
            warned_at = rpc_now_ms();
        }
        sleep_ms(5);
    }
    if (srv->drain_marker) grpc_channel_destroy(srv->drain_marker);
    srv->drain_marker = NULL;
    grpc_server_destroy(srv->server);
    srv->server = NULL;
    grpc_completion_queue_shutdown(srv->cq);
    for (int i = 0; i < srv->nthreads; i++) pthread_join(srv->threads[i], NULL);
    srv->nthreads = 0;
    atomic_store(&srv->shut_down, 1);
}

void rpc_server_free(rpc_server *srv) {
    if (!srv) return;
    if (atomic_load(&srv->started) && !atomic_load(&srv->shut_down)) rpc_server_shutdown(srv, 0);
    if (srv->server) {
        /* Created but never started: shutting down still needs the queue. */
        grpc_server_shutdown_and_notify(srv->server, srv->cq, &srv->shutdown_tag);
        grpc_server_destroy(srv->server);
        grpc_completion_queue_shutdown(srv->cq);
        while (grpc_completion_queue_next(srv->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
               GRPC_QUEUE_SHUTDOWN) {}
    }
    if (srv->cq) grpc_completion_queue_destroy(srv->cq);
    free(srv->threads);
    free(srv->methods);
    free(srv->interceptors);
    free(srv->observers);
    free(srv->listen);
    free(srv->tls_cert_pem);
    free(srv->tls_key_pem);
    free(srv->tls_client_ca_pem);
    /* Empty by now: its tasks are calls, all ended above. */
    taskpool_free(srv->tasks);
    arena_pool_free(srv->arenas);
    pthread_mutex_destroy(&srv->lock);
    pthread_cond_destroy(&srv->cond);
    free(srv);
}
