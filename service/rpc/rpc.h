/* rpc: memoryd's gRPC runtime on the gRPC C core.
 *
 * It owns the server, the completion-queue worker threads, the method table
 * and the per-call state machines (unary, server-streaming, bidi). Handlers
 * see decoded protobuf-c messages and a call context, never bytes; the
 * runtime decodes requests (INVALID_ARGUMENT when undecodable), runs the
 * interceptor chain, calls the handler, encodes the response and sends the
 * status with the request id in trailing metadata. Unknown methods answer
 * UNIMPLEMENTED at once.
 *
 * Execution model (issue: no completion-queue thread waits on a backend):
 * the worker threads (completion-queue threads, one per core by default)
 * decode, run the interceptor chain, call the handler and encode. A
 * handler either answers at once (returns a status) or starts backend work
 * on the event loop (store/evloop.h, store/apg.h) and returns RPC_PENDING;
 * the loop thread then fills the response and ends the call with
 * rpc_call_complete (the gRPC core takes batches from any thread). While a
 * call is pending it belongs to its backend work: the worker that ran the
 * handler touches it no more, the completion runs on the loop thread, and
 * the call's arena is the completion's. A deadline reaches the backend
 * work as its own deadline (rpc_call_deadline_ms); a client's cancel
 * reaches it through rpc_call_on_cancel, which the handler registers
 * before it returns RPC_PENDING (the backend then ends the work and
 * completes the call, CANCELLED). Handlers that compute for long or wait
 * on a blocking backend client (EpisodicMemory's) never run on a
 * completion-queue thread: their methods are marked .blocking (or the
 * handler hands its slow part over with rpc_call_continue_blocking), and
 * they run on the server's task pool (core/taskpool.h), bounded in threads
 * and queue; a client's cancel reaches their blocking clients through a
 * cancel token (core/cancel.h, tier_ctx_watch_cancel). See the README's
 * Architecture section. */
#ifndef MEMORYD_RPC_RPC_H
#define MEMORYD_RPC_RPC_H

#include <grpc/grpc.h>
#include <grpc/status.h>
#include <protobuf-c/protobuf-c.h>
#include <stdint.h>

#include "service/core/arena.h"

typedef struct rpc_server rpc_server;
typedef struct rpc_call rpc_call;

typedef enum {
    RPC_UNARY = 0,         /* one request, one response */
    RPC_SERVER_STREAM = 1, /* one request, a stream of responses */
    RPC_BIDI_STREAM = 2,   /* each request answered by zero or one response */
} rpc_kind;

/* Returned by a streaming handler that keeps the call open: it took a
 * reference and will end the call later with rpc_call_finish. */
#define RPC_PENDING ((grpc_status_code)-1)

/* Unary: fill *resp (already initialised by the runtime, allocated in the
 * call's arena) and return GRPC_STATUS_OK, or return an error status after
 * rpc_call_set_error. Memory for response fields comes from
 * rpc_call_arena(call) or static storage; the runtime frees nothing else.
 * Or return RPC_PENDING having started work that will fill *resp and call
 * rpc_call_complete exactly once, from any thread. */
typedef grpc_status_code (*rpc_unary_fn)(rpc_call *call, const ProtobufCMessage *req,
                                         ProtobufCMessage *resp, void *arg);

/* Server-streaming: send with rpc_call_send, then return a final status, or
 * return RPC_PENDING to keep streaming from other threads (see
 * rpc_call_on_cancel) and end with rpc_call_finish. */
typedef grpc_status_code (*rpc_stream_fn)(rpc_call *call, const ProtobufCMessage *req, void *arg);

/* Bidi: called for each request message; GRPC_STATUS_OK sends *resp (or
 * nothing when *send is set to 0), any other status ends the stream. The
 * stream ends OK when the client half-closes. */
typedef grpc_status_code (*rpc_bidi_fn)(rpc_call *call, const ProtobufCMessage *req,
                                        ProtobufCMessage *resp, int *send, void *arg);

/* One entry of the method table. The runtime copies the struct; the strings
 * and descriptors must outlive the server (use static storage). */
typedef struct rpc_method {
    const char *path; /* "/package.Service/Method" */
    rpc_kind kind;
    const ProtobufCMessageDescriptor *request;
    const ProtobufCMessageDescriptor *response;
    const char *scope; /* capability the caller needs; NULL = open to all */
    rpc_unary_fn unary;
    rpc_stream_fn stream;
    rpc_bidi_fn bidi;
    void *arg; /* handed to the handler */
    /* Unary only: the handler may wait on a backend through a blocking
     * client or compute for long, so the runtime runs it on the server's
     * task pool (rpc_call_continue_blocking), never on a completion-queue
     * thread. */
    int blocking;
    /* Answered normally while the server drains for shutdown (health
     * checks, so a balancer hears NOT_SERVING); every other method is
     * refused UNAVAILABLE then (see rpc_server_shutdown). */
    int serves_while_draining;
} rpc_method;

/* Interceptor: runs for every call of a registered method before its
 * request is decoded (it sees the method and the metadata: an
 * unauthenticated caller makes memoryd decode nothing) and before the
 * handler. A non-OK return ends the call with that status (set the message
 * with rpc_call_set_error). */
typedef grpc_status_code (*rpc_interceptor_fn)(rpc_call *call, void *arg);

/* Observer: runs once per call when its final status is decided (logging,
 * metrics, audit). Must not block for long; must not end the call. */
typedef void (*rpc_observer_fn)(rpc_call *call, grpc_status_code status, const char *message,
                                void *arg);

/* Describes a method path nobody registered, for the UNIMPLEMENTED message
 * (e.g. "part of the API but not built yet"); returns NULL when unknown. */
typedef const char *(*rpc_unknown_fn)(const char *path, void *arg);

typedef struct rpc_server_options {
    const char *listen;    /* host:port; port 0 picks a free port */
    int workers;           /* completion-queue threads; <= 0: one per core */
    int max_message_bytes; /* receive and send limit */
    int keepalive_time_ms;
    int keepalive_timeout_ms;
    const char *tls_cert_pem; /* PEM contents (not paths); NULL = plaintext */
    const char *tls_key_pem;
    /* Mutual TLS: client certificates are required and verified against
     * these CAs (PEM contents); NULL = no client certificates. */
    const char *tls_client_ca_pem;
    /* Connections are sent GOAWAY after this long (±10% jitter, gRPC's),
     * so clients of an L4 balancer reconnect and spread over replicas;
     * the calls in flight then get grace to finish. <= 0: no limit / 30 s. */
    int max_connection_age_ms;
    int max_connection_age_grace_ms;
    /* Keepalive enforcement: a client pinging more often than this without
     * calls is sent GOAWAY (ENHANCE_YOUR_CALM) once it has more than
     * max_ping_strikes such pings. <= 0: 10 s / 2. */
    int min_ping_interval_ms;
    int max_ping_strikes;
    /* Read-your-writes (common.proto): a read carrying a consistency token
     * younger than this is answered past every replica-local cache. At
     * least the longest a stale copy can live in one (the L1 TTL) plus the
     * replicas' clock difference. <= 0: 60 s. */
    int64_t consistency_window_ms;
    int task_threads;   /* the task pool's threads (blocking handlers); <= 0: 16 */
    int task_queue_max; /* calls waiting for one of them; <= 0: 1024 */
    /* Bounds per caller. <= 0: the defaults in brackets. */
    size_t max_call_memory;     /* bytes a call's arena may hold [64 MiB] */
    size_t stream_buffer_bytes; /* encoded messages queued on one stream [256 KiB] */
    int max_streams;            /* streams open at once, server-wide [1024] */
} rpc_server_options;

/* Creates a server (nothing listens yet). *out is freed with
 * rpc_server_free. Returns 0, or -1 with the reason in err. grpc_init must
 * have been called. */
int rpc_server_create(const rpc_server_options *opts, rpc_server **out, char *err, size_t errlen);

/* Method table, interceptors, observers: only before rpc_server_start.
 * Return 0, or -1 on a duplicate path / bad entry / out of memory. */
int rpc_server_add_method(rpc_server *srv, const rpc_method *m);

/* Defines a unary handler with a typed state, request and response:
 *     RPC_UNARY_HANDLER(do_get, cache_service, Memory__V1__CacheGetRequest,
 *                       Memory__V1__CacheGetResponse) {
 *         ... call, svc (State *: the method's arg), req (const Req *), resp (Resp *) ...
 *     }
 * do_get has the rpc_unary_fn signature, for the method table; prefix
 * `static` for a handler private to its file. RPC_UNARY_FN(do_get);
 * declares one defined elsewhere. */
#define RPC_UNARY_FN(fn)                                                                           \
    grpc_status_code fn(rpc_call *call, const ProtobufCMessage *req, ProtobufCMessage *resp,       \
                        void *arg)
#define RPC_UNARY_HANDLER(fn, State, Req, Resp)                                                    \
    RPC_UNARY_FN(fn);                                                                              \
    static grpc_status_code fn##_typed(rpc_call *call, State *svc, const Req *req, Resp *resp)     \
        __attribute__((unused));                                                                   \
    RPC_UNARY_FN(fn) { return fn##_typed(call, arg, (const Req *)req, (Resp *)resp); }             \
    static grpc_status_code fn##_typed(                                                            \
        rpc_call *call __attribute__((unused)), State *svc __attribute__((unused)),                \
        const Req *req __attribute__((unused)), Resp *resp __attribute__((unused)))

/* Returns from a handler with the status of a check that failed:
 * RPC_CHECK(tier_check_label(call, "label", req->label)); */
#define RPC_CHECK(expr)                                                                            \
    do {                                                                                           \
        grpc_status_code rpc_check_ = (expr);                                                      \
        if (rpc_check_ != GRPC_STATUS_OK) return rpc_check_;                                       \
    } while (0)

/* Method-table entries for rpc_server_add_methods, for methods whose
 * messages are named <Method>Request / <Method>Response (as every
 * memory.v1 method's are): svc is the full service name
 * ("memory.v1.Cache"), name the method's, messages the protobuf-c name
 * both share before "_request" / "_response" (memory__v1__cache_get),
 * scope the capability the method needs (NULL: open to all), fn the
 * handler:
 *     static const rpc_method methods[] = {
 *         RPC_METHOD_UNARY("memory.v1.Cache", "Get", memory__v1__cache_get, "cache:read",
 *                          do_get),
 *     }; */
#define RPC_METHOD_UNARY(svc, name, messages, scope_, fn)                                          \
    {                                                                                              \
        .path = "/" svc "/" name, .kind = RPC_UNARY, .request = &messages##_request__descriptor,   \
        .response = &messages##_response__descriptor, .scope = (scope_), .unary = (fn)             \
    }
/* The same for a handler that may block (rpc_method.blocking): it runs on
 * the task pool. */
#define RPC_METHOD_BLOCKING(svc, name, messages, scope_, fn)                                       \
    {                                                                                              \
        .path = "/" svc "/" name, .kind = RPC_UNARY, .request = &messages##_request__descriptor,   \
        .response = &messages##_response__descriptor, .scope = (scope_), .unary = (fn),            \
        .blocking = 1                                                                              \
    }
#define RPC_METHOD_SERVER_STREAM(svc, name, messages, scope_, fn)                                  \
    {                                                                                              \
        .path = "/" svc "/" name, .kind = RPC_SERVER_STREAM,                                       \
        .request = &messages##_request__descriptor, .response = &messages##_response__descriptor,  \
        .scope = (scope_), .stream = (fn)                                                          \
    }

/* Registers methods[0..n), each with arg as its handler argument (the
 * entries' own arg is ignored). Returns 0, or -1 (logged, naming the path)
 * when one could not be added; the ones before it stay registered. */
int rpc_server_add_methods(rpc_server *srv, const rpc_method *methods, size_t n, void *arg);
int rpc_server_add_interceptor(rpc_server *srv, rpc_interceptor_fn fn, void *arg);
int rpc_server_add_observer(rpc_server *srv, rpc_observer_fn fn, void *arg);
void rpc_server_set_unknown_describer(rpc_server *srv, rpc_unknown_fn fn, void *arg);

/* Binds the listener and starts the workers. Returns 0, or -1 with a
 * message in err (e.g. the address is in use). */
int rpc_server_start(rpc_server *srv, char *err, size_t errlen);
/* The port actually bound (useful with port 0). */
int rpc_server_port(const rpc_server *srv);

/* The method table, in registration order (fixed once started): its size
 * and the path of entry i. */
size_t rpc_server_method_count(const rpc_server *srv);
const char *rpc_server_method_path(const rpc_server *srv, size_t i);

/* What a running server holds now, for metrics. */
typedef struct rpc_server_stats {
    int calls_in_flight; /* handed to handlers, not yet finished */
    int streams_open;    /* server streams being served */
} rpc_server_stats;
void rpc_server_get_stats(rpc_server *srv, rpc_server_stats *out);

/* Shuts the server down in three steps. Blocks; safe to call once.
 *  1. Drain: every call the runtime had been handed before this call (those
 *     already running, and those the completion queue held for a busy
 *     worker) carries on; any later call is refused UNAVAILABLE "shutting
 *     down" without running (safe for a client to retry elsewhere), except
 *     methods marked serves_while_draining. Open streams end at once with
 *     UNAVAILABLE (their handlers hear it through rpc_call_on_cancel).
 *  2. When those calls have ended, or grace_ms has passed, gRPC shuts down
 *     (GOAWAY to clients); what still runs then is cancelled, logged.
 *  3. The workers are joined. */
void rpc_server_shutdown(rpc_server *srv, int grace_ms);
/* Frees a server (shutting it down first if needed); accepts NULL. */
void rpc_server_free(rpc_server *srv);

/* ---- the call context seen by interceptors and handlers ---- */

const rpc_method *rpc_call_method(const rpc_call *call); /* NULL for unknown methods */
const char *rpc_call_path(const rpc_call *call);
/* Decoded request (NULL for bidi streams and unknown methods). */
const ProtobufCMessage *rpc_call_request(const rpc_call *call);
/* The call's arena: memory lives until the call ends (on bidi streams,
 * until the next request message). Only the thread currently running the
 * handler may allocate from it. */
arena *rpc_call_arena(rpc_call *call);
/* Deadline on CLOCK_MONOTONIC in ms (INT64_MAX when none) and what is left
 * of it now (never negative). */
int64_t rpc_call_deadline_ms(const rpc_call *call);
int64_t rpc_call_remaining_ms(const rpc_call *call);
/* First value of request metadata key (lower case), NUL-terminated copy in
 * the arena; NULL when absent. */
const char *rpc_call_metadata(rpc_call *call, const char *key);
/* The same value without a copy: a pointer to len bytes (not
 * NUL-terminated) owned by the call, valid until the call ends; NULL when
 * absent. For hot paths (the authorization header on every call). */
const char *rpc_call_metadata_view(const rpc_call *call, const char *key, size_t *len);
/* Request id: the client's x-request-id if sane, else generated. */
const char *rpc_call_request_id(rpc_call *call);
/* The call's W3C trace id (32 hex digits): the client's `traceparent`'s,
 * or one started for the call. Log lines written on the thread running
 * the call's handler carry it (log_trace_enter). */
const char *rpc_call_trace_id(const rpc_call *call);
/* The `traceparent` to send to backends: the trace id with this call's
 * own span id. */
const char *rpc_call_traceparent(const rpc_call *call);
/* The verified client certificate's identity under mutual TLS (its
 * subject alternative names, else its common name, joined by ","), ""
 * without one; fetched on first use. */
const char *rpc_call_client_identity(rpc_call *call);
/* 1 when name is exactly one of the verified client certificate's
 * identities (each compared whole: an identity may hold a comma). */
int rpc_call_client_identity_is(rpc_call *call, const char *name);
/* 1 when the call carries a consistency token (`memoryd-consistency`
 * request metadata, from a write's response) young enough that a copy in
 * a replica-local cache may predate that write: the read must then go to
 * the shared store (PostgreSQL, Redis). A malformed token never reaches a
 * handler (INVALID_ARGUMENT). */
int rpc_call_wants_fresh(const rpc_call *call);
/* A write that succeeded without reaching the shared store (the cache's
 * fallback to this replica's L1 while Redis is down) calls this: its
 * answer then carries no consistency token, which would promise what the
 * shared store does not hold. */
void rpc_call_no_consistency_token(rpc_call *call);
/* One trailing-metadata entry the handler adds to the call's status: key
 * a lowercase name that outlives the call (a literal), value copied (at
 * most RPC_TRAILER_VALUE_MAX - 1 bytes of it). At most one per call, set
 * before the status is sent (a later one replaces it). */
#define RPC_TRAILER_VALUE_MAX 128
void rpc_call_set_trailer(rpc_call *call, const char *key, const char *value);
/* Peer address ("ipv4:127.0.0.1:5000"), fetched on first use. */
const char *rpc_call_peer(rpc_call *call);
/* Monotonic ms (and us) when the call arrived. */
int64_t rpc_call_start_ms(const rpc_call *call);
int64_t rpc_call_start_us(const rpc_call *call);
/* The call's method as an index into the server's method table (see
 * rpc_server_method_path), -1 for a method nobody registered. */
int rpc_call_method_index(const rpc_call *call);

/* Sets the status message for the error status the handler returns. */
void rpc_call_set_error(rpc_call *call, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The message rpc_call_set_error set (in the call's arena), NULL when none:
 * for a stream's rpc_call_finish. */
const char *rpc_call_error(const rpc_call *call);
/* The same, returning INVALID_ARGUMENT (name the offending field first:
 * "limit: 1001; must be 1 to 1000"), or RESOURCE_EXHAUSTED with "out of
 * memory": `return rpc_call_invalid(call, ...);` */
grpc_status_code rpc_call_invalid(rpc_call *call, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
grpc_status_code rpc_call_oom(rpc_call *call);
/* Ends a handler on a memoryd status code (core/status.h) from a tier or
 * backend: sets the message to err when it is non-empty (else the code's
 * default text) and returns rpc_status_of(code). `return
 * rpc_call_fail(call, rc, ctx->err);` */
grpc_status_code rpc_call_fail(rpc_call *call, int code, const char *err);

/* Per-call slot for the auth module's principal (set by an interceptor).
 * The call owns one reference: release (may be NULL) runs when the call is
 * destroyed or the slot is set again. */
void rpc_call_set_principal(rpc_call *call, void *principal, void (*release)(void *));
void *rpc_call_principal(const rpc_call *call);
/* Per-call slot for the audit module's note (target ids, "already
 * audited"); the note lives in the call's arena, the runtime frees nothing. */
void rpc_call_set_audit(rpc_call *call, void *note);
void *rpc_call_audit(const rpc_call *call);

/* ---- streaming (thread-safe) ---- */

/* Queues msg (encoded now; the caller keeps msg). Returns 0; -1 once the
 * call was finished or cancelled; RPC_SEND_OVERFLOW (nothing queued) when
 * the client reads so slowly that the stream's buffer
 * (--stream-buffer-bytes) would overflow: the method then does what its
 * proto documents for a slow reader (end the stream, or resynchronise). */
#define RPC_SEND_OVERFLOW (-2)
int rpc_call_send(rpc_call *call, const ProtobufCMessage *msg);
/* One message encoded once for many streams (a change fanned out to every
 * subscriber): each send takes a reference to the same bytes. Create and
 * free on any thread; free it when no more sends need it (the queued
 * copies keep their own references). NULL when out of memory. */
typedef struct rpc_msg rpc_msg;
rpc_msg *rpc_msg_encode(const ProtobufCMessage *msg);
void rpc_msg_free(rpc_msg *m); /* accepts NULL */
/* rpc_call_send of an encoded message: the same results. */
int rpc_call_send_msg(rpc_call *call, const rpc_msg *m);
/* Bytes queued on the stream behind the message being sent: 0 when a
 * message of any size would be taken now (a method that resynchronises a
 * slow reader waits for that). */
size_t rpc_call_queued_bytes(rpc_call *call);
/* The status message of a stream ended on RPC_SEND_OVERFLOW. */
#define RPC_OVERFLOW_MESSAGE                                                                       \
    "the client reads the stream too slowly: its send buffer (--stream-buffer-bytes) is full"
/* Runs fn(arg) when the call is destroyed, whatever ended it (quotas hand
 * their places back with it): 0, or -1 (fn will not run) when the call
 * has RPC_ON_DESTROY_MAX already. Before the handler returns, on the
 * thread that runs it. */
#define RPC_ON_DESTROY_MAX 4
int rpc_call_on_destroy(rpc_call *call, void (*fn)(void *arg), void *arg);
/* Ends a stream the handler kept (RPC_PENDING) and drops the handler's
 * reference; message may be NULL. Queued messages go out first. */
void rpc_call_finish(rpc_call *call, grpc_status_code status, const char *message);
/* Called at most once, on a worker thread, when the client cancels (or its
 * deadline passes), a stream is ended by the server's drain (its status is
 * then already UNAVAILABLE) or the server cancels open calls at shutdown,
 * before rpc_call_finish / rpc_call_complete. The handler must still end the call.
 * Set before returning RPC_PENDING (from a streaming or a unary handler).
 * Returns -1 (and registers nothing, the call's error message set) when the
 * call is already cancelled or ended: the handler should then end it at once, e.g.
 * by returning GRPC_STATUS_CANCELLED. */
int rpc_call_on_cancel(rpc_call *call, void (*fn)(rpc_call *call, void *arg), void *arg);
/* Ends a unary call whose handler returned RPC_PENDING, with the response
 * the handler was given (filled by now) when status is OK; set the message
 * first with rpc_call_set_error otherwise. Any thread, exactly once. */
void rpc_call_complete(rpc_call *call, grpc_status_code status);
/* From a unary handler on a completion-queue thread, for work that may
 * block (a backend through a blocking client, a long computation): runs
 * fn(call, req, resp, arg) on the server's task pool, where it answers as
 * a handler does (a status, or RPC_PENDING and rpc_call_complete later),
 * and returns RPC_PENDING for the handler to return. A call whose deadline
 * passed while it waited for a thread ends DEADLINE_EXCEEDED without fn;
 * a full queue answers RESOURCE_EXHAUSTED at once, naming
 * --task-threads/--task-queue-max (nothing runs). Methods with .blocking
 * go this way as a whole. A server-streaming handler may hand over the
 * same way (resp is then NULL): fn's status ends the stream, or fn returns
 * RPC_PENDING and the stream ends later with rpc_call_finish. */
grpc_status_code rpc_call_continue_blocking(rpc_call *call, rpc_unary_fn fn, void *arg);
/* rpc_call_continue_blocking on a pool of the caller's (one that outlives
 * the server's calls) instead of the server's task pool: for work that may
 * hold its thread long (a stream waiting for a slow reader) and must not
 * hold a thread every other blocking call needs. RESOURCE_EXHAUSTED, with
 * what ("the export threads") in the message, when the pool's queue is
 * full. */
struct taskpool;
grpc_status_code rpc_call_continue_on(rpc_call *call, struct taskpool *pool, const char *what,
                                      rpc_unary_fn fn, void *arg);
/* The same, but fn runs even when the deadline passed while it waited for
 * a thread (it then finds rpc_call_remaining_ms at 0): for a handler whose
 * other work, already started, ends through fn. */
grpc_status_code rpc_call_run_blocking(rpc_call *call, rpc_unary_fn fn, void *arg);

/* ---- helpers ---- */

int64_t rpc_now_ms(void); /* CLOCK_MONOTONIC */
const char *rpc_status_name(grpc_status_code code);
/* The one mapping from memoryd's status codes to gRPC's: NOT_FOUND,
 * PERMISSION_DENIED, ABORTED (conflict), UNAVAILABLE (a backend down or
 * refusing memoryd's credentials), DEADLINE_EXCEEDED, INTERNAL,
 * RESOURCE_EXHAUSTED (out of memory), INVALID_ARGUMENT, ALREADY_EXISTS,
 * FAILED_PRECONDITION (too big); INTERNAL for unknown codes. */
grpc_status_code rpc_status_of(int code);

#endif
