/* rpc_internal: state shared by rpc_server.c (lifecycle, workers, request
 * slots) and rpc_call.c (per-call state machines). Not for other modules. */
#ifndef MEMORYD_RPC_INTERNAL_H
#define MEMORYD_RPC_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "service/core/arena_pool.h"
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
    /* rpc_call objects alive: the queue may only shut down at zero, or a
     * handler still running would start a batch on a dead queue. */
    atomic_int live_calls;
    arena_pool *arenas; /* recycled per-call arenas */
    int64_t gpr_mono_offset_ms; /* CLOCK_MONOTONIC ms minus gpr's monotonic ms */
    size_t max_message_bytes;   /* the send limit the channel args set */
    rpc_tag shutdown_tag;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int shutdown_notified; /* guarded by lock */
};

/* rpc_call.c: takes ownership of call, metadata array contents and payload
 * from a request slot and runs the call. m is NULL for an unknown method. */
void rpc_call_dispatch(rpc_server *srv, const rpc_method_entry *m, grpc_call *call,
                       gpr_timespec deadline, grpc_metadata_array *md, grpc_byte_buffer *payload,
                       const char *unknown_path);

#endif
