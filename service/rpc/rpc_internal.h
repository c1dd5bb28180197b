/* rpc_internal: state shared by rpc_server.c (lifecycle, workers, request
 * slots) and rpc_call.c (per-call state machines). Not for other modules. */
#ifndef MEMORYD_RPC_INTERNAL_H
#define MEMORYD_RPC_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "service/core/arena_pool.h"
#include "service/core/dlist.h"
#include "service/core/taskpool.h"
#include "service/core/traceparent.h"

/* "1-" and 16 hex digits of the write's Unix microseconds (rpc_call.c). */
#define CONSISTENCY_TOKEN_MAX 24
#include "service/rpc/rpc.h"

/* Every completion-queue tag is one of these, embedded in its owner; the
 * worker calls done() with the completion's success bit. */
typedef struct rpc_tag {
    void (*done)(struct rpc_tag *tag, int ok);
} rpc_tag;

#define RPC_CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

typedef struct rpc_method_entry {
    rpc_method m;
    void *registered; /* grpc_server_register_method handle */
} rpc_method_entry;

typedef struct {
    rpc_interceptor_fn fn;
    void *arg;
} rpc_interceptor;

typedef struct {
    rpc_observer_fn fn;
    void *arg;
} rpc_observer;

struct rpc_server {
    rpc_server_options opts; /* strings not owned: copied below */
    char *listen;
    char *tls_cert_pem, *tls_key_pem;
    char *tls_client_ca_pem; /* NULL: client certificates are not asked for */
    grpc_server *server;
    grpc_completion_queue *cq;
    pthread_t *threads;
    int nthreads;
    int port;
    int prepost; /* requests kept posted per method */

    rpc_method_entry *methods;
    size_t nmethods, cap_methods;
    rpc_interceptor *interceptors;
    size_t ninterceptors;
    rpc_observer *observers;
    size_t nobservers;
    rpc_unknown_fn unknown_fn;
    void *unknown_arg;

    atomic_int started, shutting_down, shut_down;
    /* Shutdown's drain (rpc_server_shutdown): while DRAIN_BACKLOG, the
     * calls the completion queue held when it began are still served;
     * the drain marker's completion, queued behind them, turns it to
     * DRAIN_REFUSING. */
    atomic_int drain;
    atomic_int drain_markers_seen;
    rpc_tag drain_tag;
    grpc_channel *drain_marker; /* an idle channel whose watch is the marker */
    atomic_int served_calls;    /* calls handed to handlers, not yet destroyed */
    dlist streams;              /* streaming calls being served; guarded by lock */
    /* rpc_call objects alive: the queue may only shut down at zero, or a
     * handler still running would start a batch on a dead queue. */
    atomic_int live_calls;
    arena_pool *arenas;            /* recycled per-call arenas */
    taskpool *tasks;               /* where blocking handlers run */
    int64_t gpr_mono_offset_ms;    /* CLOCK_MONOTONIC ms minus gpr's monotonic ms */
    size_t max_message_bytes;      /* the send limit the channel args set */
    size_t max_call_memory;        /* per call arena */
    size_t stream_buffer_bytes;    /* per stream send queue */
    int max_streams;               /* served streams at once */
    int64_t consistency_window_us; /* rpc_call_wants_fresh's */
    int nstreams;                  /* on streams; guarded by lock */
    rpc_tag shutdown_tag;
    pthread_mutex_t lock; /* shutdown_notified, streams */
    pthread_cond_t cond;
    int shutdown_notified; /* guarded by lock */
};

/* ---- a call (rpc_call.c, rpc_stream.c) ---- */

#define REQUEST_ID_MAX 64

typedef struct send_item {
    struct send_item *next;
    grpc_byte_buffer *bb;
    size_t bytes;
} send_item;

enum { RPC_SERVING = 0, RPC_DRAIN_BACKLOG = 1, RPC_DRAIN_REFUSING = 2 };

struct rpc_call {
    rpc_server *srv;
    const rpc_method_entry *entry; /* NULL: unknown method */
    const char *path;              /* in the arena */
    grpc_call *call;
    grpc_metadata_array md; /* request metadata, owned by the call */
    int64_t start_ms, deadline_ms;
    int64_t start_us;
    arena *arena;
    const ProtobufCMessage *request;
    char request_id[REQUEST_ID_MAX + 1];
    int client_request_id;                 /* request_id came from the client */
    trace_ctx trace;                       /* the client's traceparent, or a trace started here */
    char traceparent[TRACEPARENT_LEN + 1]; /* what the call sends on */
    int64_t consistency_us;   /* the client's consistency token's write time; 0: none */
    int consistency_bad;      /* the client sent one that does not parse, or several */
    int consistency_withheld; /* rpc_call_no_consistency_token */
    char consistency_out[CONSISTENCY_TOKEN_MAX]; /* a write's token for its answer */
    char *peer;                                  /* gpr_malloc'd, lazily */
    const char *client_identity;                 /* in the arena, lazily */
    char *error_message;                         /* in the arena (handler thread) */
    void *principal;
    void (*principal_release)(void *);
    struct {
        void (*fn)(void *);
        void *arg;
    } on_destroy[RPC_ON_DESTROY_MAX]; /* rpc_call_on_destroy's, run in turn */
    int n_on_destroy;
    void *audit; /* the audit module's per-call note (arena memory) */

    /* Final batch (status + trailing metadata) and what it references. */
    rpc_tag final_tag;
    grpc_metadata trailer[3];      /* x-request-id, memoryd-consistency, the handler's */
    const char *extra_trailer_key; /* the handler's (rpc_call_set_trailer) */
    char extra_trailer_value[RPC_TRAILER_VALUE_MAX];
    grpc_slice details;
    grpc_byte_buffer *unary_response;
    ProtobufCMessage *unary_resp; /* the handler's response, for rpc_call_complete */
    int cancelled_flag;           /* written by RECV_CLOSE_ON_SERVER */
    int close_posted;             /* RECV_CLOSE_ON_SERVER went out on its own batch */

    /* Streaming state, guarded by lock. */
    pthread_mutex_t lock;
    atomic_int refs;
    rpc_tag close_tag, send_tag, recv_tag;
    int initial_md_sent;
    int send_in_flight;
    grpc_byte_buffer *sending;
    send_item *queue_head, *queue_tail;
    size_t queued_bytes; /* encoded bytes on the queue */
    int finish_requested, status_sent, closed, cancelled;
    grpc_status_code final_status;
    char *final_message; /* malloc'd: finish may come from any thread */
    void (*on_cancel)(rpc_call *, void *);
    void *on_cancel_arg;
    /* rpc_call_continue_blocking: what runs on the task pool */
    taskpool_task blocking_task;
    rpc_unary_fn blocking_fn;
    void *blocking_arg;
    int blocking_always;           /* run blocking_fn even past the deadline */
    int served;                    /* counted in srv->served_calls */
    dlist stream_link;             /* on srv->streams while a served stream lives */
    arena *msg_arena;              /* bidi: per-message requests and responses */
    grpc_byte_buffer *recv_buffer; /* bidi: RECV_MESSAGE target */
};

/* rpc_call.c: takes ownership of call, metadata array contents and payload
 * from a request slot and runs the call. m is NULL for an unknown method. */
void rpc_call_dispatch(rpc_server *srv, const rpc_method_entry *m, grpc_call *call,
                       gpr_timespec deadline, grpc_metadata_array *md, grpc_byte_buffer *payload,
                       const char *unknown_path);

/* rpc_stream.c: posts RECV_CLOSE_ON_SERVER on a batch of its own (a
 * stream at its start; a pending unary call when it asks to hear of a
 * cancel), so cancellation is learnt while the call runs. */
void rpc_call_watch_close(rpc_call *c);

/* rpc_call.c, for rpc_stream.c. */
void rpc_call_ref(rpc_call *c);
/* A reference unless the last one is gone already (the call is being
 * destroyed): 1 if taken. For finding calls through a list. */
int rpc_call_try_ref(rpc_call *c);
void rpc_call_unref(rpc_call *c); /* destroys the call with the last reference */
grpc_byte_buffer *rpc_call_encode(const ProtobufCMessage *msg);
/* The request of a unary or server-streaming call (takes payload): checks
 * it came, runs the interceptors (authentication) before decoding it, then
 * decodes it into c->request. */
grpc_status_code rpc_call_take_request(rpc_call *c, grpc_byte_buffer *payload);
/* Decodes bb into arena a (c's, or its per-message one) as c's request
 * type: INVALID_ARGUMENT for bad bytes, RESOURCE_EXHAUSTED past the call's
 * memory cap, with the message set. bb stays the caller's. */
grpc_status_code rpc_call_decode_into(rpc_call *c, arena *a, grpc_byte_buffer *bb,
                                      const ProtobufCMessage **out);
grpc_status_code rpc_call_intercept(rpc_call *c); /* the interceptor chain */
void rpc_call_notify(rpc_call *c, grpc_status_code status, const char *message);
/* grpc_call_start_batch, completing tag itself (logged) when it fails. */
void rpc_call_start_batch(rpc_call *c, const grpc_op *ops, size_t n, rpc_tag *tag);
/* Fills the status op; details and trailer live in the call until it dies. */
void rpc_call_status_op(rpc_call *c, grpc_op *op, grpc_status_code status, const char *message);

/* rpc_stream.c, for rpc_call.c: the tags of a new call, and running a
 * server-streaming call (takes payload) or a bidi call. */
void rpc_stream_init(rpc_call *c);
void rpc_stream_run(rpc_call *c, grpc_byte_buffer *payload);
void rpc_stream_run_bidi(rpc_call *c);
/* Ends a served stream for shutdown's drain: UNAVAILABLE, and its handler
 * hears it through its cancel callback. Takes a reference it drops. */
void rpc_stream_end_for_drain(rpc_call *c);

#endif
