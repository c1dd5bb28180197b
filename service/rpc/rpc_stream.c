/* rpc_stream: the state machines of streaming calls (server-streaming and
 * bidi). They keep RECV_CLOSE_ON_SERVER posted to learn about
 * cancellation, allow one send in flight with a queue behind it, and are
 * reference counted because completions, handlers and other threads
 * (rpc_call_send / rpc_call_finish) all hold on to them. */
#include <stdlib.h>
#include <string.h>

#include "service/rpc/rpc_internal.h"

static void stream_status_done(rpc_tag *tag, int ok) {
    (void)ok;
    rpc_call_unref(RPC_CONTAINER_OF(tag, rpc_call, final_tag));
}

/* Caller holds c->lock. The stream's first batch sends the initial
 * metadata: puts that op in ops[0] then and returns how many ops it used. */
static size_t initial_metadata_op(rpc_call *c, grpc_op *ops) {
    if (c->initial_md_sent) return 0;
    c->initial_md_sent = 1;
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    return 1;
}

/* Caller holds c->lock. Starts the status batch when nothing is in flight. */
static void maybe_send_status_locked(rpc_call *c) {
    if (!c->finish_requested || c->status_sent || c->send_in_flight || c->queue_head) return;
    c->status_sent = 1;
    grpc_op ops[2] = {{0}};
    size_t n = initial_metadata_op(c, ops);
    rpc_call_status_op(c, &ops[n++], c->final_status, c->final_message);
    c->final_tag.done = stream_status_done;
    rpc_call_ref(c);
    rpc_call_start_batch(c, ops, n, &c->final_tag);
}

/* Caller holds c->lock. Starts sending the queue head if the line is free. */
static void pump_sends_locked(rpc_call *c) {
    if (c->send_in_flight || !c->queue_head) return;
    send_item *it = c->queue_head;
    c->queue_head = it->next;
    if (!c->queue_head) c->queue_tail = NULL;
    c->queued_bytes -= it->bytes;
    c->sending = it->bb;
    free(it);
    c->send_in_flight = 1;
    grpc_op ops[2] = {{0}};
    size_t n = initial_metadata_op(c, ops);
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = c->sending;
    rpc_call_ref(c);
    rpc_call_start_batch(c, ops, n, &c->send_tag);
}

static void bidi_post_recv(rpc_call *c);

static void send_done(rpc_tag *tag, int ok) {
    rpc_call *c = RPC_CONTAINER_OF(tag, rpc_call, send_tag);
    int post_recv = 0;
    pthread_mutex_lock(&c->lock);
    grpc_byte_buffer_destroy(c->sending);
    c->sending = NULL;
    c->send_in_flight = 0;
    if (!ok) c->cancelled = 1;
    if (ok && c->entry && c->entry->m.kind == RPC_BIDI_STREAM && !c->finish_requested &&
        !c->queue_head)
        post_recv = 1;
    pump_sends_locked(c);
    maybe_send_status_locked(c);
    pthread_mutex_unlock(&c->lock);
    if (post_recv) bidi_post_recv(c);
    rpc_call_unref(c);
}

struct rpc_msg {
    grpc_byte_buffer *bb;
    size_t bytes;
};

rpc_msg *rpc_msg_encode(const ProtobufCMessage *msg) {
    rpc_msg *m = malloc(sizeof *m);
    if (!m) return NULL;
    m->bytes = protobuf_c_message_get_packed_size(msg);
    if (!(m->bb = rpc_call_encode(msg))) {
        free(m);
        return NULL;
    }
    return m;
}

void rpc_msg_free(rpc_msg *m) {
    if (!m) return;
    grpc_byte_buffer_destroy(m->bb);
    free(m);
}

/* Queues the bytes of msg or m (one is NULL): encoded only once it is
 * known to fit, a copy of m's (a reference to its slices) otherwise. */
static int send_queued(rpc_call *c, const ProtobufCMessage *msg, const rpc_msg *m) {
    size_t bytes = m ? m->bytes : protobuf_c_message_get_packed_size(msg);
    pthread_mutex_lock(&c->lock);
    if (c->finish_requested || c->cancelled || c->closed) {
        pthread_mutex_unlock(&c->lock);
        return -1;
    }
    /* One message always fits an empty queue (or a big one could never go). */
    if (c->queue_head && c->queued_bytes + bytes > c->srv->stream_buffer_bytes) {
        pthread_mutex_unlock(&c->lock);
        return RPC_SEND_OVERFLOW;
    }
    send_item *it = malloc(sizeof *it);
    if (!it) {
        pthread_mutex_unlock(&c->lock);
        return -1;
    }
    it->bb = m ? grpc_byte_buffer_copy(m->bb) : rpc_call_encode(msg);
    it->bytes = bytes;
    c->queued_bytes += bytes;
    it->next = NULL;
    if (c->queue_tail) c->queue_tail->next = it;
    else c->queue_head = it;
    c->queue_tail = it;
    pump_sends_locked(c);
    pthread_mutex_unlock(&c->lock);
    return 0;
}

int rpc_call_send(rpc_call *c, const ProtobufCMessage *msg) { return send_queued(c, msg, NULL); }

int rpc_call_send_msg(rpc_call *c, const rpc_msg *m) { return send_queued(c, NULL, m); }

size_t rpc_call_queued_bytes(rpc_call *c) {
    pthread_mutex_lock(&c->lock);
    size_t n = c->queued_bytes;
    pthread_mutex_unlock(&c->lock);
    return n;
}

/* Records the final status once; returns 1 if this call did it. */
static int request_finish(rpc_call *c, grpc_status_code status, const char *message) {
    pthread_mutex_lock(&c->lock);
    if (c->finish_requested) {
        pthread_mutex_unlock(&c->lock);
        return 0;
    }
    c->finish_requested = 1;
    c->final_status = status;
    if (status != GRPC_STATUS_OK && !message) message = rpc_status_name(status);
    c->final_message = message ? strdup(message) : NULL;
    maybe_send_status_locked(c);
    pthread_mutex_unlock(&c->lock);
    rpc_call_notify(c, status, message);
    return 1;
}

void rpc_call_finish(rpc_call *c, grpc_status_code status, const char *message) {
    request_finish(c, status, message);
    rpc_call_unref(c); /* the handler's reference */
}

int rpc_call_on_cancel(rpc_call *c, void (*fn)(rpc_call *, void *), void *arg) {
    /* A unary call learns of a cancel only once it watches for the close
     * (the handler's thread, before it returns RPC_PENDING). */
    if (c->entry && c->entry->m.kind == RPC_UNARY && !c->close_posted) rpc_call_watch_close(c);
    pthread_mutex_lock(&c->lock);
    /* finish_requested: the drain ended the stream before its handler got
     * here, and would never call the callback. */
    int gone = c->cancelled || c->closed || c->finish_requested;
    if (!gone) {
        c->on_cancel = fn;
        c->on_cancel_arg = arg;
    }
    pthread_mutex_unlock(&c->lock);
    if (gone) rpc_call_set_error(c, "the client cancelled the call");
    return gone ? -1 : 0;
}

static void close_done(rpc_tag *tag, int ok) {
    (void)ok;
    rpc_call *c = RPC_CONTAINER_OF(tag, rpc_call, close_tag);
    void (*fn)(rpc_call *, void *) = NULL;
    void *arg = NULL;
    pthread_mutex_lock(&c->lock);
    c->closed = 1;
    if (c->cancelled_flag) c->cancelled = 1;
    if (c->cancelled && !c->finish_requested) {
        fn = c->on_cancel;
        arg = c->on_cancel_arg;
        c->on_cancel = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    if (fn) fn(c, arg);
    rpc_call_unref(c);
}

void rpc_call_watch_close(rpc_call *c) {
    grpc_op op = {.op = GRPC_OP_RECV_CLOSE_ON_SERVER,
                  .data.recv_close_on_server.cancelled = &c->cancelled_flag};
    c->close_posted = 1;
    rpc_call_ref(c); /* dropped by the close tag */
    rpc_call_start_batch(c, &op, 1, &c->close_tag);
}

void rpc_stream_end_for_drain(rpc_call *c) {
    void (*fn)(rpc_call *, void *) = NULL;
    void *arg = NULL;
    pthread_mutex_lock(&c->lock);
    int ended = c->finish_requested;
    if (!ended) { /* the same rule as a client's cancel (close_done) */
        fn = c->on_cancel;
        arg = c->on_cancel_arg;
        c->on_cancel = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    if (!ended) {
        request_finish(c, GRPC_STATUS_UNAVAILABLE,
                       "memoryd is shutting down: reconnect (to another replica) to resume "
                       "the stream");
        if (fn) fn(c, arg); /* the handler lets go; its own status comes too late */
    }
    rpc_call_unref(c);
}

/* Ends a stream from the runtime side (the handler holds no reference). */
static void stream_end(rpc_call *c, grpc_status_code status) {
    const char *msg = status == GRPC_STATUS_OK ? NULL : c->error_message;
    request_finish(c, status, msg);
}

void rpc_stream_run(rpc_call *c, grpc_byte_buffer *payload) {
    const rpc_method *m = &c->entry->m;
    rpc_call_watch_close(c);
    grpc_status_code st = rpc_call_take_request(c, payload);
    if (st == GRPC_STATUS_OK) {
        rpc_call_ref(c); /* the handler's reference, dropped by rpc_call_finish */
        st = m->stream(c, c->request, m->arg);
        if (st == RPC_PENDING) {
            rpc_call_unref(c); /* the runtime's own reference */
            return;
        }
        rpc_call_unref(c);
    }
    stream_end(c, st);
    rpc_call_unref(c);
}

static void bidi_recv_done(rpc_tag *tag, int ok) {
    rpc_call *c = RPC_CONTAINER_OF(tag, rpc_call, recv_tag);
    const rpc_method *m = &c->entry->m;
    grpc_byte_buffer *bb = c->recv_buffer;
    c->recv_buffer = NULL;
    if (!ok || !bb) { /* half-close (or failure): the stream is over */
        if (bb) grpc_byte_buffer_destroy(bb);
        stream_end(c, GRPC_STATUS_OK);
        rpc_call_unref(c);
        return;
    }
    arena_reset(c->msg_arena);
    arena_set_limit(c->msg_arena, c->srv->max_call_memory);
    const ProtobufCMessage *req = NULL;
    grpc_status_code st = rpc_call_decode_into(c, c->msg_arena, bb, &req);
    grpc_byte_buffer_destroy(bb);
    int send = 1;
    ProtobufCMessage *resp = NULL;
    if (st != GRPC_STATUS_OK) {
        /* the message is set */
    } else if (!(resp = arena_message(c->msg_arena, m->response))) {
        st = GRPC_STATUS_RESOURCE_EXHAUSTED;
    } else {
        st = m->bidi(c, req, resp, &send, m->arg);
    }
    if (st != GRPC_STATUS_OK) {
        stream_end(c, st);
    } else if (send) {
        if (rpc_call_send(c, resp) != 0) stream_end(c, GRPC_STATUS_CANCELLED);
        /* the next receive is posted when this send completes */
    } else {
        bidi_post_recv(c);
    }
    rpc_call_unref(c);
}

static void bidi_post_recv(rpc_call *c) {
    grpc_op op = {.op = GRPC_OP_RECV_MESSAGE, .data.recv_message.recv_message = &c->recv_buffer};
    rpc_call_ref(c); /* dropped by bidi_recv_done */
    rpc_call_start_batch(c, &op, 1, &c->recv_tag);
}

void rpc_stream_run_bidi(rpc_call *c) {
    rpc_call_watch_close(c);
    c->msg_arena = arena_pool_get(c->srv->arenas);
    grpc_status_code st = c->msg_arena ? rpc_call_intercept(c) : GRPC_STATUS_RESOURCE_EXHAUSTED;
    if (st == GRPC_STATUS_OK) bidi_post_recv(c);
    else stream_end(c, st);
    rpc_call_unref(c);
}

void rpc_stream_init(rpc_call *c) {
    c->close_tag.done = close_done;
    c->send_tag.done = send_done;
    c->recv_tag.done = bidi_recv_done;
}
