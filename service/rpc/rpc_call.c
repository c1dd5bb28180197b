/* rpc_call: a call's context (accessors, request ids, errors), its
 * lifetime, encoding and decoding, the unary state machine and dispatch;
 * streaming calls are in rpc_stream.c. One file over 600 lines on
 * purpose: the call's refcount, lock and batch order are one state
 * machine, and every section here reads or moves that state.
 *
 * Unary calls finish with a single batch (initial metadata, message,
 * status, close) and need no lock: only one completion is ever pending. */
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/core/clock.h"
#include "service/core/log.h"
#include "service/rpc/pb_check.h"
#include "service/rpc/rpc_internal.h"

/* How close to its deadline a cancel of a call whose request never came
 * counts as the deadline (see request_arrived). */
#define DEADLINE_SLACK_MS 100

static const char *const status_names[] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

const char *rpc_status_name(grpc_status_code code) {
    if ((unsigned)code < sizeof status_names / sizeof status_names[0]) return status_names[code];
    return "UNKNOWN";
}

int64_t rpc_now_ms(void) { return clock_mono_ms(NULL); }

/* ---- accessors ---- */

const rpc_method *rpc_call_method(const rpc_call *c) { return c->entry ? &c->entry->m : NULL; }
const char *rpc_call_path(const rpc_call *c) { return c->path; }
const ProtobufCMessage *rpc_call_request(const rpc_call *c) { return c->request; }
arena *rpc_call_arena(rpc_call *c) { return c->msg_arena ? c->msg_arena : c->arena; }
int64_t rpc_call_deadline_ms(const rpc_call *c) { return c->deadline_ms; }
int64_t rpc_call_start_ms(const rpc_call *c) { return c->start_ms; }
int64_t rpc_call_start_us(const rpc_call *c) { return c->start_us; }
int rpc_call_method_index(const rpc_call *c) {
    return c->entry ? (int)(c->entry - c->srv->methods) : -1;
}
static void generate_request_id(rpc_call *c);

const char *rpc_call_request_id(rpc_call *c) {
    if (!c->request_id[0]) generate_request_id(c);
    return c->request_id;
}
void rpc_call_set_principal(rpc_call *c, void *p, void (*release)(void *)) {
    if (c->principal && c->principal_release) c->principal_release(c->principal);
    c->principal = p;
    c->principal_release = release;
}
void rpc_call_set_audit(rpc_call *c, void *note) { c->audit = note; }
void *rpc_call_audit(const rpc_call *c) { return c->audit; }
void *rpc_call_principal(const rpc_call *c) { return c->principal; }

int64_t rpc_call_remaining_ms(const rpc_call *c) {
    if (c->deadline_ms == INT64_MAX) return INT64_MAX;
    int64_t left = c->deadline_ms - rpc_now_ms();
    return left > 0 ? left : 0;
}

const char *rpc_call_metadata_view(const rpc_call *c, const char *key, size_t *len) {
    size_t klen = strlen(key);
    for (size_t i = 0; i < c->md.count; i++) {
        const grpc_slice *k = &c->md.metadata[i].key;
        if (GRPC_SLICE_LENGTH(*k) == klen && memcmp(GRPC_SLICE_START_PTR(*k), key, klen) == 0) {
            *len = GRPC_SLICE_LENGTH(c->md.metadata[i].value);
            return (const char *)GRPC_SLICE_START_PTR(c->md.metadata[i].value);
        }
    }
    return NULL;
}

const char *rpc_call_metadata(rpc_call *c, const char *key) {
    size_t klen = strlen(key);
    for (size_t i = 0; i < c->md.count; i++) {
        const grpc_slice *k = &c->md.metadata[i].key;
        if (GRPC_SLICE_LENGTH(*k) == klen && memcmp(GRPC_SLICE_START_PTR(*k), key, klen) == 0) {
            const grpc_slice *v = &c->md.metadata[i].value;
            return arena_strndup(c->arena, (const char *)GRPC_SLICE_START_PTR(*v),
                                 GRPC_SLICE_LENGTH(*v));
        }
    }
    return NULL;
}

const char *rpc_call_client_identity(rpc_call *c) {
    if (c->client_identity) return c->client_identity;
    c->client_identity = "";
    if (!c->srv->tls_client_ca_pem) return c->client_identity;
    grpc_auth_context *ctx = grpc_call_auth_context(c->call);
    if (!ctx) return c->client_identity;
    if (grpc_auth_context_peer_is_authenticated(ctx)) {
        grpc_auth_property_iterator it = grpc_auth_context_peer_identity(ctx);
        size_t len = 0;
        char buf[1024];
        const grpc_auth_property *p;
        while ((p = grpc_auth_property_iterator_next(&it)) != NULL) {
            size_t n = p->value_length;
            if (len + (len > 0) + n >= sizeof buf) break;
            if (len) buf[len++] = ',';
            memcpy(buf + len, p->value, n);
            len += n;
        }
        buf[len] = '\0';
        const char *copy = arena_strdup(c->arena, buf);
        if (copy) c->client_identity = copy;
    }
    grpc_auth_context_release(ctx);
    return c->client_identity;
}

int rpc_call_client_identity_is(rpc_call *c, const char *name) {
    size_t n = strlen(name);
    if (!c->srv->tls_client_ca_pem || !n) return 0;
    grpc_auth_context *ctx = grpc_call_auth_context(c->call);
    if (!ctx) return 0;
    int found = 0;
    if (grpc_auth_context_peer_is_authenticated(ctx)) {
        grpc_auth_property_iterator it = grpc_auth_context_peer_identity(ctx);
        const grpc_auth_property *p;
        while (!found && (p = grpc_auth_property_iterator_next(&it)) != NULL)
            found = p->value_length == n && memcmp(p->value, name, n) == 0;
    }
    grpc_auth_context_release(ctx);
    return found;
}

const char *rpc_call_peer(rpc_call *c) {
    if (!c->peer) c->peer = grpc_call_get_peer(c->call);
    return c->peer ? c->peer : "unknown";
}

static void set_error(rpc_call *c, const char *fmt, va_list ap) {
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    c->error_message = arena_strdup(c->arena, buf);
}

void rpc_call_set_error(rpc_call *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error(c, fmt, ap);
    va_end(ap);
}

grpc_status_code rpc_call_invalid(rpc_call *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error(c, fmt, ap);
    va_end(ap);
    return GRPC_STATUS_INVALID_ARGUMENT;
}

grpc_status_code rpc_call_oom(rpc_call *c) {
    if (arena_over_limit(c->arena)) {
        /* Lift the cap for the few bytes of the message: the call ends now. */
        arena_set_limit(c->arena, 0);
        rpc_call_set_error(c,
                           "%s: the call needs more than the %zu MiB of memory a call may use "
                           "(--max-call-memory)",
                           c->path, c->srv->max_call_memory >> 20);
    } else {
        c->error_message = (char *)"out of memory"; /* static; never freed (arena memory) */
    }
    return GRPC_STATUS_RESOURCE_EXHAUSTED;
}

const char *rpc_call_error(const rpc_call *c) { return c->error_message; }

int rpc_call_on_destroy(rpc_call *c, void (*fn)(void *), void *arg) {
    if (c->n_on_destroy == RPC_ON_DESTROY_MAX) return -1;
    c->on_destroy[c->n_on_destroy].fn = fn;
    c->on_destroy[c->n_on_destroy++].arg = arg;
    return 0;
}

/* ---- request ids ---- */

static int request_id_is_sane(const grpc_slice *v) {
    size_t n = GRPC_SLICE_LENGTH(*v);
    if (n == 0 || n > REQUEST_ID_MAX) return 0;
    const unsigned char *p = GRPC_SLICE_START_PTR(*v);
    for (size_t i = 0; i < n; i++)
        if (p[i] < 0x21 || p[i] > 0x7e) return 0; /* printable, no spaces */
    return 1;
}

/* ---- consistency tokens (read-your-writes across replicas) ---- */

/* "1-" and the write's Unix microseconds in 16 hex digits: 0, or -1 for
 * anything else. */
static int consistency_parse(const char *v, size_t n, int64_t *us) {
    if (n != 18 || v[0] != '1' || v[1] != '-') return -1;
    uint64_t x = 0;
    for (size_t i = 2; i < n; i++) {
        char ch = v[i];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (d < 0) return -1;
        x = x << 4 | (uint64_t)d;
    }
    if (x == 0 || x > (uint64_t)INT64_MAX) return -1;
    *us = (int64_t)x;
    return 0;
}

int rpc_call_wants_fresh(const rpc_call *c) {
    /* A token from a replica whose clock runs ahead reads as young: that
     * errs on the fresh side. */
    return c->consistency_us && clock_wall_us() - c->consistency_us < c->srv->consistency_window_us;
}

void rpc_call_no_consistency_token(rpc_call *c) { c->consistency_withheld = 1; }

/* A write that succeeded answers with its token: the time it finished
 * here, after its change reached the shared stores. Writes are the methods
 * of a "<tier>:write" scope, and Privacy.Forget. */
static int is_write(const rpc_call *c) {
    const char *scope = c->entry ? c->entry->m.scope : NULL;
    return scope && !c->consistency_withheld &&
           (strstr(scope, ":write") != NULL || strcmp(scope, "privacy:forget") == 0);
}

/* Takes the client's x-request-id when it sent a sane one (otherwise an
 * id is generated only if something asks for it: a failure, a log line)
 * and its traceparent, or starts a trace. */
static void take_client_ids(rpc_call *c) {
    const grpc_slice *traceparent = NULL;
    for (size_t i = 0; i < c->md.count; i++) {
        const grpc_slice *k = &c->md.metadata[i].key;
        size_t klen = GRPC_SLICE_LENGTH(*k);
        const char *key = (const char *)GRPC_SLICE_START_PTR(*k);
        if (klen == 11 && memcmp(key, "traceparent", 11) == 0 && !traceparent) {
            traceparent = &c->md.metadata[i].value;
        } else if (klen == 19 && memcmp(key, "memoryd-consistency", 19) == 0) {
            /* One token, from the past (give or take the clocks): a token
             * from the future would turn caches off for as long as it
             * says. */
            const grpc_slice *v = &c->md.metadata[i].value;
            c->consistency_bad |=
                c->consistency_us != 0 ||
                consistency_parse((const char *)GRPC_SLICE_START_PTR(*v), GRPC_SLICE_LENGTH(*v),
                                  &c->consistency_us) != 0 ||
                c->consistency_us > clock_wall_us() + c->srv->consistency_window_us;
        } else if (klen == 12 && memcmp(key, "x-request-id", 12) == 0 && !c->client_request_id &&
                   request_id_is_sane(&c->md.metadata[i].value)) {
            size_t n = GRPC_SLICE_LENGTH(c->md.metadata[i].value);
            memcpy(c->request_id, GRPC_SLICE_START_PTR(c->md.metadata[i].value), n);
            c->request_id[n] = '\0';
            c->client_request_id = 1;
        }
    }
    trace_ctx_start(&c->trace,
                    traceparent ? (const char *)GRPC_SLICE_START_PTR(*traceparent) : NULL,
                    traceparent ? GRPC_SLICE_LENGTH(*traceparent) : 0);
    trace_ctx_format(&c->trace, c->traceparent);
}

static void generate_request_id(rpc_call *c) { trace_random_hex(c->request_id, 16); }

const char *rpc_call_trace_id(const rpc_call *c) { return c->trace.trace_id; }
const char *rpc_call_traceparent(const rpc_call *c) { return c->traceparent; }

/* ---- encode / decode ---- */

/* Decodes bb as a desc message into the arena; NULL (with the reason in
 * *why) when the bytes are malformed or fail the pb_check guard. */
static const ProtobufCMessage *decode(arena *a, const ProtobufCMessageDescriptor *desc,
                                      grpc_byte_buffer *bb, const char **why) {
    grpc_byte_buffer_reader reader;
    *why = "malformed protobuf";
    if (!grpc_byte_buffer_reader_init(&reader, bb)) return NULL;
    grpc_slice s = grpc_byte_buffer_reader_readall(&reader);
    grpc_byte_buffer_reader_destroy(&reader);
    ProtobufCMessage *msg = NULL;
    if (pb_check(desc, GRPC_SLICE_START_PTR(s), GRPC_SLICE_LENGTH(s), PB_CHECK_MAX_DEPTH, why) ==
        0) {
        *why = "malformed protobuf";
        msg = protobuf_c_message_unpack(desc, arena_protobuf_allocator(a), GRPC_SLICE_LENGTH(s),
                                        GRPC_SLICE_START_PTR(s));
    }
    grpc_slice_unref(s);
    return msg;
}

/* n is msg's packed size (the caller often knows it already). */
static grpc_byte_buffer *encode_sized(const ProtobufCMessage *msg, size_t n) {
    grpc_slice s = grpc_slice_malloc(n);
    protobuf_c_message_pack(msg, GRPC_SLICE_START_PTR(s));
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return bb;
}

grpc_byte_buffer *rpc_call_encode(const ProtobufCMessage *msg) {
    return encode_sized(msg, protobuf_c_message_get_packed_size(msg));
}

/* ---- lifetime ---- */

static void call_destroy(rpc_call *c) {
    for (int i = 0; i < c->n_on_destroy; i++) c->on_destroy[i].fn(c->on_destroy[i].arg);
    if (c->principal && c->principal_release) c->principal_release(c->principal);
    while (c->queue_head) {
        send_item *it = c->queue_head;
        c->queue_head = it->next;
        grpc_byte_buffer_destroy(it->bb);
        free(it);
    }
    if (c->sending) grpc_byte_buffer_destroy(c->sending);
    if (c->recv_buffer) grpc_byte_buffer_destroy(c->recv_buffer);
    if (c->unary_response) grpc_byte_buffer_destroy(c->unary_response);
    for (size_t i = 0; i < sizeof c->trailer / sizeof c->trailer[0]; i++)
        grpc_slice_unref(c->trailer[i].value);
    grpc_slice_unref(c->details);
    if (c->peer) gpr_free(c->peer);
    free(c->final_message);
    grpc_metadata_array_destroy(&c->md);
    if (c->call) grpc_call_unref(c->call);
    pthread_mutex_destroy(&c->lock);
    rpc_server *srv = c->srv;
    arena_pool_put(srv->arenas, c->msg_arena);
    int served = c->served;
    if (c->stream_link.next) { /* listed once: still on the list unless the drain took it */
        pthread_mutex_lock(&srv->lock);
        if (c->stream_link.next != &c->stream_link) {
            dlist_remove(&c->stream_link);
            srv->nstreams--;
        }
        pthread_mutex_unlock(&srv->lock);
    }
    arena_pool_put(srv->arenas, c->arena); /* the call itself lived in it */
    if (served) atomic_fetch_sub(&srv->served_calls, 1);
    atomic_fetch_sub(&srv->live_calls, 1);
}

void rpc_call_ref(rpc_call *c) { atomic_fetch_add(&c->refs, 1); }

int rpc_call_try_ref(rpc_call *c) {
    int n = atomic_load(&c->refs);
    while (n > 0)
        if (atomic_compare_exchange_weak(&c->refs, &n, n + 1)) return 1;
    return 0;
}

void rpc_call_unref(rpc_call *c) {
    if (atomic_fetch_sub(&c->refs, 1) == 1) call_destroy(c);
}

void rpc_call_notify(rpc_call *c, grpc_status_code status, const char *message) {
    for (size_t i = 0; i < c->srv->nobservers; i++)
        c->srv->observers[i].fn(c, status, message, c->srv->observers[i].arg);
}

void rpc_call_start_batch(rpc_call *c, const grpc_op *ops, size_t n, rpc_tag *tag) {
    grpc_call_error e = grpc_call_start_batch(c->call, ops, n, tag, NULL);
    if (e != GRPC_CALL_OK) {
        /* A programming error (two sends in flight, ...): complete the tag
         * ourselves so the reference it holds is released. */
        log_fields(LOG_ERROR, "grpc_call_start_batch failed", LOG_F_STR, "method", c->path,
                   LOG_F_INT, "error", (int64_t)e, LOG_F_END);
        tag->done(tag, 0);
    }
}

/* Fills the status op; details and trailer live in the call until it dies. */
void rpc_call_status_op(rpc_call *c, grpc_op *op, grpc_status_code status, const char *message) {
    /* The id goes back when the client chose it or the call failed (so the
     * caller can quote it against our logs); a fresh random value on every
     * successful call would only churn the HPACK table. */
    int send_id = c->client_request_id || status != GRPC_STATUS_OK;
    size_t n = 0;
    if (send_id) {
        c->trailer[n].key = grpc_slice_from_static_string("x-request-id");
        c->trailer[n++].value = grpc_slice_from_static_string(rpc_call_request_id(c));
    }
    if (status == GRPC_STATUS_OK && is_write(c)) {
        snprintf(c->consistency_out, sizeof c->consistency_out, "1-%016llx",
                 (unsigned long long)clock_wall_us());
        c->trailer[n].key = grpc_slice_from_static_string("memoryd-consistency");
        c->trailer[n++].value = grpc_slice_from_static_string(c->consistency_out);
    }
    if (c->extra_trailer_key) {
        c->trailer[n].key = grpc_slice_from_static_string(c->extra_trailer_key);
        c->trailer[n++].value = grpc_slice_from_static_string(c->extra_trailer_value);
    }
    c->details = grpc_slice_from_copied_string(message ? message : "");
    memset(op, 0, sizeof *op);
    op->op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    op->data.send_status_from_server.trailing_metadata_count = n;
    op->data.send_status_from_server.trailing_metadata = c->trailer;
    op->data.send_status_from_server.status = status;
    op->data.send_status_from_server.status_details = message && *message ? &c->details : NULL;
}

/* ---- unary ---- */

static void unary_done(rpc_tag *tag, int ok) {
    (void)ok;
    rpc_call_unref(RPC_CONTAINER_OF(tag, rpc_call, final_tag));
}

static void unary_finish(rpc_call *c, grpc_status_code status, const ProtobufCMessage *resp) {
    /* gRPC core would refuse an oversize answer with "Sent message larger
     * than max"; say which limit and what to ask for instead, and do not
     * pack megabytes only to drop them. */
    size_t size = status == GRPC_STATUS_OK && resp ? protobuf_c_message_get_packed_size(resp) : 0;
    if (size > c->srv->max_message_bytes) {
        rpc_call_set_error(c,
                           "%s: the response would be %zu bytes, over the %zu-byte message limit "
                           "(--max-message-bytes); ask for fewer results or leave vectors and "
                           "payloads out",
                           c->entry->m.path, size, c->srv->max_message_bytes);
        status = GRPC_STATUS_RESOURCE_EXHAUSTED;
    }
    const char *message = status == GRPC_STATUS_OK ? NULL : c->error_message;
    if (status != GRPC_STATUS_OK && !message) message = rpc_status_name(status);
    rpc_call_notify(c, status, message);
    grpc_op ops[4];
    size_t n = 0;
    memset(ops, 0, sizeof ops);
    ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (status == GRPC_STATUS_OK && resp) {
        c->unary_response = encode_sized(resp, size);
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = c->unary_response;
    }
    rpc_call_status_op(c, &ops[n++], status, message);
    if (!c->close_posted) {
        ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        ops[n++].data.recv_close_on_server.cancelled = &c->cancelled_flag;
    }
    c->final_tag.done = unary_done;
    rpc_call_start_batch(c, ops, n, &c->final_tag);
}

grpc_status_code rpc_call_intercept(rpc_call *c) {
    for (size_t i = 0; i < c->srv->ninterceptors; i++) {
        grpc_status_code st = c->srv->interceptors[i].fn(c, c->srv->interceptors[i].arg);
        if (st != GRPC_STATUS_OK) return st;
    }
    return GRPC_STATUS_OK;
}

/* Whether the request of a unary or server-streaming call came (payload
 * is NULL otherwise): CANCELLED / DEADLINE_EXCEEDED when the stream broke
 * first, INVALID_ARGUMENT when the client sent none. */
static grpc_status_code request_arrived(rpc_call *c, const grpc_byte_buffer *payload) {
    const rpc_method *m = &c->entry->m;
    if (payload) return GRPC_STATUS_OK;
    if (grpc_call_failed_before_recv_message(c->call)) {
        /* The stream broke before its message came: the client went away
         * or the deadline passed, which is what the logs and the audit
         * row must say (the status itself reaches nobody). */
        /* The client's deadline and this server's copy of it (from
         * grpc-timeout, counted from when the headers arrived) are one
         * instant on two clocks: a cancel that comes within
         * DEADLINE_SLACK_MS of it is the client's deadline firing first. */
        if (c->deadline_ms != INT64_MAX && rpc_now_ms() + DEADLINE_SLACK_MS >= c->deadline_ms) {
            rpc_call_set_error(c, "%s: the deadline passed before the request arrived", m->path);
            return GRPC_STATUS_DEADLINE_EXCEEDED;
        }
        rpc_call_set_error(c, "%s: the client cancelled the call before its request arrived",
                           m->path);
        return GRPC_STATUS_CANCELLED;
    }
    rpc_call_set_error(c, "%s: the request message is missing", m->path);
    return GRPC_STATUS_INVALID_ARGUMENT;
}

grpc_status_code rpc_call_decode_into(rpc_call *c, arena *a, grpc_byte_buffer *bb,
                                      const ProtobufCMessage **out) {
    const rpc_method *m = &c->entry->m;
    const char *why;
    *out = decode(a, m->request, bb, &why);
    if (*out) return GRPC_STATUS_OK;
    if (arena_over_limit(a)) {
        arena_set_limit(a, 0); /* room for the message: the call ends now */
        arena_set_limit(c->arena, 0);
        rpc_call_set_error(c,
                           "%s: the request needs more than the %zu MiB of memory a call may "
                           "use, decoded (--max-call-memory)",
                           m->path, c->srv->max_call_memory >> 20);
        return GRPC_STATUS_RESOURCE_EXHAUSTED;
    }
    rpc_call_set_error(c, "%s: %s is not a valid %s message (%s)", m->path,
                       a == c->arena ? "the request" : "a request", m->request->name, why);
    return GRPC_STATUS_INVALID_ARGUMENT;
}

grpc_status_code rpc_call_take_request(rpc_call *c, grpc_byte_buffer *payload) {
    grpc_status_code st = request_arrived(c, payload);
    /* Authenticate from the metadata before decoding anything: a caller
     * without a valid token costs no arena memory. */
    if (st == GRPC_STATUS_OK) st = rpc_call_intercept(c);
    if (st == GRPC_STATUS_OK) st = rpc_call_decode_into(c, c->arena, payload, &c->request);
    if (payload) grpc_byte_buffer_destroy(payload);
    return st;
}

static void run_unary(rpc_call *c, grpc_byte_buffer *payload) {
    const rpc_method *m = &c->entry->m;
    grpc_status_code st = rpc_call_take_request(c, payload);
    ProtobufCMessage *resp = NULL;
    if (st == GRPC_STATUS_OK) {
        resp = arena_message(c->arena, m->response);
        if (!resp) {
            rpc_call_set_error(c, "out of memory");
            st = GRPC_STATUS_RESOURCE_EXHAUSTED;
        } else {
            /* The call's one reference belongs to its final batch; this
             * one keeps it alive while the handler runs, since a handler
             * that goes asynchronous may see it completed (and the batch
             * done) before it returns. */
            c->unary_resp = resp;
            rpc_call_ref(c);
            st = m->blocking ? rpc_call_continue_blocking(c, m->unary, m->arg)
                             : m->unary(c, c->request, resp, m->arg);
            if (st == RPC_PENDING) {
                rpc_call_unref(c);
                return;
            }
            unary_finish(c, st, resp);
            rpc_call_unref(c);
            return;
        }
    }
    unary_finish(c, st, resp);
}

void rpc_call_complete(rpc_call *c, grpc_status_code status) {
    pthread_mutex_lock(&c->lock);
    c->finish_requested = 1; /* a cancel that comes now calls nobody */
    pthread_mutex_unlock(&c->lock);
    unary_finish(c, status, c->unary_resp);
}

/* ---- the task pool ---- */

static void run_blocking(taskpool_task *t) {
    rpc_call *c = RPC_CONTAINER_OF(t, rpc_call, blocking_task);
    log_trace_scope trace_scope;
    log_trace_enter(&trace_scope, c->trace.trace_id);
    grpc_status_code st;
    if (rpc_now_ms() >= c->deadline_ms && !c->blocking_always) {
        rpc_call_set_error(c, "the deadline passed while the call waited for a task thread");
        st = GRPC_STATUS_DEADLINE_EXCEEDED;
    } else {
        st = c->blocking_fn(c, c->request, c->unary_resp, c->blocking_arg);
    }
    if (st != RPC_PENDING) {
        if (c->entry->m.kind == RPC_SERVER_STREAM)
            rpc_call_finish(c, st, st == GRPC_STATUS_OK ? NULL : c->error_message);
        else unary_finish(c, st, c->unary_resp);
    }
    rpc_call_unref(c);
    log_trace_leave(&trace_scope);
}

grpc_status_code rpc_call_run_blocking(rpc_call *c, rpc_unary_fn fn, void *arg) {
    c->blocking_always = 1;
    return rpc_call_continue_blocking(c, fn, arg);
}

/* Posts fn's run on pool: RPC_PENDING, or -1 (nothing posted) when its
 * queue is full. */
static int post_blocking(rpc_call *c, taskpool *pool, rpc_unary_fn fn, void *arg) {
    c->blocking_fn = fn;
    c->blocking_arg = arg;
    c->blocking_task.fn = run_blocking;
    rpc_call_ref(c); /* the task's, dropped when it has run */
    if (taskpool_post(pool, &c->blocking_task) == 0) return 0;
    rpc_call_unref(c);
    return -1;
}

grpc_status_code rpc_call_continue_blocking(rpc_call *c, rpc_unary_fn fn, void *arg) {
    if (post_blocking(c, c->srv->tasks, fn, arg) == 0) return RPC_PENDING;
    rpc_call_set_error(c,
                       "the server is saturated: %zu calls wait for its %d task threads"
                       " (--task-threads, --task-queue-max)",
                       taskpool_max_queue(c->srv->tasks), taskpool_threads(c->srv->tasks));
    return GRPC_STATUS_RESOURCE_EXHAUSTED;
}

grpc_status_code rpc_call_continue_on(rpc_call *c, taskpool *pool, const char *what,
                                      rpc_unary_fn fn, void *arg) {
    if (post_blocking(c, pool, fn, arg) == 0) return RPC_PENDING;
    rpc_call_set_error(c, "saturated: %zu calls wait for %s (%d): try again later",
                       taskpool_max_queue(pool), what, taskpool_threads(pool));
    return GRPC_STATUS_RESOURCE_EXHAUSTED;
}

/* ---- dispatch ---- */

/* Whether the drain refuses c: once the backlog the drain began with is
 * served, every call but the methods that serve while draining; streams
 * from the start of the drain, which ends them anyway. */
static int refused_by_drain(const rpc_call *c) {
    int drain = atomic_load(&c->srv->drain);
    if (drain == RPC_SERVING) return 0;
    if (c->entry && c->entry->m.serves_while_draining) return 0;
    if (drain == RPC_DRAIN_REFUSING) return 1;
    return c->entry && c->entry->m.kind != RPC_UNARY;
}

/* Counts c as served (shutdown waits for it) and, for a stream, lists it
 * for the drain to end; the check and the listing are one step under the
 * server's lock, so a stream is either refused or ended by the drain.
 * Returns OK, or the refusal's status with its message set. */
static grpc_status_code serve(rpc_call *c) {
    rpc_server *srv = c->srv;
    int streaming = c->entry && c->entry->m.kind != RPC_UNARY;
    grpc_status_code st = GRPC_STATUS_OK;
    if (streaming) pthread_mutex_lock(&srv->lock);
    if (refused_by_drain(c)) {
        st = GRPC_STATUS_UNAVAILABLE;
    } else if (c->consistency_bad) {
        st = GRPC_STATUS_INVALID_ARGUMENT;
    } else if (streaming && srv->nstreams >= srv->max_streams) {
        st = GRPC_STATUS_RESOURCE_EXHAUSTED;
    } else {
        c->served = 1;
        atomic_fetch_add(&srv->served_calls, 1);
        if (streaming) {
            dlist_push_back(&srv->streams, &c->stream_link);
            srv->nstreams++;
        }
    }
    if (streaming) pthread_mutex_unlock(&srv->lock);
    if (st == GRPC_STATUS_UNAVAILABLE)
        rpc_call_set_error(c,
                           "memoryd is shutting down: %s did not run; retry it (on another "
                           "replica)",
                           c->path ? c->path : "the call");
    else if (st == GRPC_STATUS_INVALID_ARGUMENT)
        rpc_call_set_error(c, "memoryd-consistency metadata: not one consistency token (\"1-\" and "
                              "16 hex digits, as a write's response carries it, from the past); "
                              "nothing ran");
    else if (st == GRPC_STATUS_RESOURCE_EXHAUSTED)
        rpc_call_set_error(c,
                           "%s: this server already has %d streams open, its limit "
                           "(--max-streams); retry later or on another replica",
                           c->path, srv->max_streams);
    return st;
}

static void run_unknown(rpc_call *c) {
    const char *known =
        c->srv->unknown_fn ? c->srv->unknown_fn(c->path, c->srv->unknown_arg) : NULL;
    if (known) rpc_call_set_error(c, "%s", known);
    else rpc_call_set_error(c, "unknown method %s", c->path);
    unary_finish(c, GRPC_STATUS_UNIMPLEMENTED, NULL);
}

void rpc_call_dispatch(rpc_server *srv, const rpc_method_entry *entry, grpc_call *call,
                       gpr_timespec deadline, grpc_metadata_array *md, grpc_byte_buffer *payload,
                       const char *unknown_path) {
    arena *a = arena_pool_get(srv->arenas);
    rpc_call *c = a ? arena_zalloc(a, sizeof *c) : NULL;
    if (!c) {
        /* Nothing sensible to answer with; dropping the call cancels it. */
        log_msg(LOG_ERROR, "out of memory accepting a call");
        if (payload) grpc_byte_buffer_destroy(payload);
        grpc_metadata_array_destroy(md);
        grpc_call_cancel(call, NULL);
        grpc_call_unref(call);
        arena_pool_put(srv->arenas, a);
        return;
    }
    atomic_fetch_add(&srv->live_calls, 1);
    arena_set_limit(a, srv->max_call_memory);
    c->srv = srv;
    c->entry = entry;
    c->arena = a;
    c->call = call;
    c->md = *md;
    c->start_us = clock_mono_us();
    c->start_ms = c->start_us / 1000;
    c->trailer[0].value = c->trailer[1].value = grpc_empty_slice();
    c->details = grpc_empty_slice();
    pthread_mutex_init(&c->lock, NULL);
    atomic_init(&c->refs, 1);
    rpc_stream_init(c);
    if (gpr_time_cmp(deadline, gpr_inf_future(deadline.clock_type)) == 0) {
        c->deadline_ms = INT64_MAX;
    } else {
        /* gpr's monotonic clock counts from process start: shift it onto
         * CLOCK_MONOTONIC with the offset measured once at server start. */
        gpr_timespec mono = deadline.clock_type == GPR_CLOCK_MONOTONIC
                                ? deadline
                                : gpr_convert_clock_type(deadline, GPR_CLOCK_MONOTONIC);
        c->deadline_ms = gpr_time_to_millis(mono) + srv->gpr_mono_offset_ms;
    }
    take_client_ids(c);
    /* This thread's log lines are the call's until it is handed on. */
    log_trace_scope trace_scope;
    log_trace_enter(&trace_scope, c->trace.trace_id);
    c->path = entry ? entry->m.path : arena_strdup(a, unknown_path);
    grpc_status_code refused = serve(c);
    if (refused != GRPC_STATUS_OK) {
        if (payload) grpc_byte_buffer_destroy(payload);
        unary_finish(c, refused, NULL);
        log_trace_leave(&trace_scope);
        return;
    }
    if (!entry) {
        run_unknown(c);
        log_trace_leave(&trace_scope);
        return;
    }
    switch (entry->m.kind) {
    case RPC_UNARY: run_unary(c, payload); break;
    case RPC_SERVER_STREAM: rpc_stream_run(c, payload); break;
    case RPC_BIDI_STREAM: rpc_stream_run_bidi(c); break;
    }
    log_trace_leave(&trace_scope);
}

void rpc_call_set_trailer(rpc_call *c, const char *key, const char *value) {
    pthread_mutex_lock(&c->lock);
    snprintf(c->extra_trailer_value, sizeof c->extra_trailer_value, "%s", value);
    c->extra_trailer_key = key;
    pthread_mutex_unlock(&c->lock);
}
