/* bb_hub: the change streams of this replica; see bb_hub.h. One file over
 * 600 lines on purpose: boards, streams, their reads, the channel, expiry
 * and the tick are one state machine of the loop thread, sharing its
 * structs and its ordering rules (who frees a board or a watcher, and
 * when); the Redis scripts it drives are bb_store.c's. */
#include "service/blackboard/bb_hub.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "memory/v1/blackboard.pb-c.h"
#include "service/blackboard/bb_render.h"
#include "service/core/clock.h"
#include "service/core/dlist.h"
#include "service/core/log.h"
#include "service/core/status.h"

#define TICK_MS 50                 /* retries, slow readers, expiry, linger */
#define LIVE_CHECK_MS 1000         /* tokens that expired or were revoked */
#define SYNC_TIMEOUT_MS 5000       /* one snapshot or catch-up read */
#define RETRY_MS 200               /* after a read failed */
#define LINGER_MS 5000             /* a board's channel outlives its last stream */
#define RING_MAX 64                /* recent events a board keeps ... */
#define RING_BYTES (1u << 20)      /* ... and their bytes at most */
#define HUB_RING_BYTES (64u << 20) /* every board's rings together */
#define RECHECK_MS 250             /* between expiry checks of one board */
#define SWEEP_BATCH 64             /* boards per lease sweep */
#define BUCKETS 1024               /* boards' hash table */

enum chan_state { CH_NONE, CH_SUBSCRIBING, CH_LIVE, CH_UNSUBSCRIBING };
enum watch_state { W_WAIT, W_SYNC, W_LIVE, W_BEHIND, W_ENDED };

/* One event as every stream of its board gets it. */
typedef struct hub_event {
    arena *ar;
    int64_t rev;
    bb_header h;
    char id[BB_BOARD_ID_LEN + 1];
    rpc_msg *enc; /* the event's message, encoded once for every stream */
    size_t bytes; /* what it holds: about its encoded message */
} hub_event;

typedef struct board {
    struct bb_hub *hub;
    struct board *hnext;
    dlist link; /* hub->boards */
    arena *ar;  /* names, tenant */
    const char *tenant;
    bb_names n;
    int chan;
    dlist watchers;
    int nwatchers;
    int64_t idle_since; /* mono ms the last stream left; 0 while watched */
    int64_t last_rev;   /* the last revision heard on the channel; 0: none yet */
    char id[BB_BOARD_ID_LEN + 1];
    int64_t expire_ms;     /* wall; 0 unknown or no board */
    int checking;          /* an expiry check in flight */
    int64_t next_check_ms; /* wall: not before */
    hub_event *ring[RING_MAX];
    int ring_head, ring_n;
    size_t ring_bytes;
} board;

typedef struct watcher {
    dlist link; /* its board's watchers (loop thread) */
    dlist all;  /* hub->all, under hub->lock: what on_cancel looks in */
    bb_hub *hub;
    board *b;
    rpc_call *call;
    principal *p; /* our reference */
    bb_caller c;
    char *tenant, *task;
    int state;
    int resume; /* rev and id say where the client's state is */
    int64_t rev;
    char id[BB_BOARD_ID_LEN + 1];
    unsigned sync_seq; /* the read whose answer counts */
    int need_snapshot; /* a send overflowed: what the client has is not w->rev */
    int64_t retry_at;
    int64_t waiting_since; /* mono ms it last stopped being live; 0 while live */
    int refs;              /* the stream's own, and one per read in flight (loop thread) */
    int added, cancel_pending;
    evloop_task add_task, cancel_task;
} watcher;

struct bb_hub {
    bb_hub_options o;
    aredis *sub; /* the subscriber connection */
    uv_timer_t tick;
    int up; /* the subscriber connection (loop thread) */
    atomic_int live;
    int64_t down_since; /* mono ms; the hub starts down */
    int64_t last_live_check, last_sweep;
    int sweeping, closing, ops;
    size_t ring_bytes; /* every board's rings */
    board *buckets[BUCKETS];
    dlist boards;
    pthread_mutex_t lock; /* all */
    dlist all;
    evloop_task task;
    evloop_waiter waiter;
    int setup_failed, tick_closed;
};

static int64_t mono(void) { return clock_mono_ms(NULL); }

/* Board ids sort by creation (bb_codec.h): < 0 when a is the older board.
 * Both are set (BB_BOARD_ID_LEN digits). */
static int id_cmp(const char *a, const char *b) { return memcmp(a, b, BB_BOARD_ID_LEN); }

/* ------------------------------------------------------------ boards */

static unsigned hash(const char *s, size_t n) {
    unsigned h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h % BUCKETS;
}

static board *board_find(bb_hub *h, const char *base, size_t n) {
    for (board *b = h->buckets[hash(base, n)]; b; b = b->hnext)
        if (b->n.base_len == n && memcmp(b->n.base, base, n) == 0) return b;
    return NULL;
}

static void event_free(hub_event *e) {
    rpc_msg_free(e->enc);
    arena_free(e->ar); /* e with it */
}

static void ring_clear(board *b) {
    for (int i = 0; i < b->ring_n; i++) event_free(b->ring[(b->ring_head + i) % RING_MAX]);
    b->hub->ring_bytes -= b->ring_bytes;
    b->ring_head = b->ring_n = 0;
    b->ring_bytes = 0;
}

static void board_free(bb_hub *h, board *b) {
    board **pp = &h->buckets[hash(b->n.base, b->n.base_len)];
    while (*pp != b) pp = &(*pp)->hnext;
    *pp = b->hnext;
    dlist_remove(&b->link);
    ring_clear(b);
    arena_free(b->ar);
    free(b);
}

static board *board_get(bb_hub *h, const char *tenant, const char *task) {
    arena *a = arena_create();
    bb_names n;
    if (!a || bb_names_make(a, tenant, task, &n) != 0) {
        arena_free(a);
        return NULL;
    }
    board *b = board_find(h, n.base, n.base_len);
    if (b) {
        arena_free(a);
        return b;
    }
    if (!(b = calloc(1, sizeof *b)) || !(b->tenant = arena_strdup(a, tenant))) {
        free(b);
        arena_free(a);
        return NULL;
    }
    b->ar = a;
    b->hub = h;
    b->n = n;
    dlist_init(&b->watchers);
    unsigned k = hash(n.base, n.base_len);
    b->hnext = h->buckets[k];
    h->buckets[k] = b;
    dlist_push_back(&h->boards, &b->link);
    return b;
}

/* Subscribes b's channel when it has streams and the connection is up. */
static void board_kick(bb_hub *h, board *b) {
    if (!h->up || b->chan != CH_NONE || b->nwatchers == 0) return;
    if (aredis_subscribe(h->sub, b->n.channel, b->n.channel_len) == 0) b->chan = CH_SUBSCRIBING;
}

/* ------------------------------------------------------------ streams */

static void watcher_unref(watcher *w) {
    if (--w->refs > 0) return;
    principal_unref(w->p);
    free(w);
}

static void detach(watcher *w) {
    if (w->state == W_ENDED) return;
    w->state = W_ENDED;
    if (w->b) {
        dlist_remove(&w->link);
        if (--w->b->nwatchers == 0) w->b->idle_since = mono();
        w->b = NULL;
    }
}

/* The one place a stream's call is finished and its own reference goes. */
static void finish(watcher *w, grpc_status_code st, const char *msg) {
    detach(w);
    rpc_call_finish(w->call, st, msg);
    watcher_unref(w);
}

/* Sends the EXPIRED event first when expired. */
static void send_expired(watcher *w) {
    arena *a = arena_create();
    Memory__V1__BlackboardSubscribeResponse *m =
        a ? arena_message(a, &memory__v1__blackboard_subscribe_response__descriptor) : NULL;
    if (m) {
        m->kind = MEMORY__V1__BLACKBOARD_EVENT_KIND__BLACKBOARD_EVENT_KIND_EXPIRED;
        m->version = w->rev;
        m->board_id = arena_strdup(a, w->id);
        m->event_time = bb_render_time(a, clock_wall_ms(NULL));
        if (m->board_id && m->event_time) rpc_call_send(w->call, &m->base);
    }
    arena_free(a);
}

/* Ends a stream from the server's side. If the client's cancel got there
 * first, its task finishes the call. */
static void end(watcher *w, grpc_status_code st, const char *msg, int expired) {
    if (w->state == W_ENDED) return;
    pthread_mutex_lock(&w->hub->lock);
    int ours = !dlist_empty(&w->all);
    dlist_remove(&w->all);
    pthread_mutex_unlock(&w->hub->lock);
    if (!ours) {
        detach(w);
        return;
    }
    if (expired) send_expired(w);
    finish(w, st, msg);
}

static void cancel_on_loop(evloop_task *t) {
    watcher *w = DLIST_ENTRY(t, watcher, cancel_task);
    if (!w->added) { /* its add task comes next and finishes it */
        w->cancel_pending = 1;
        return;
    }
    if (rpc_call_remaining_ms(w->call) == 0)
        finish(w, GRPC_STATUS_DEADLINE_EXCEEDED, "blackboard: the stream's deadline passed");
    else
        finish(w, GRPC_STATUS_UNAVAILABLE,
               "blackboard: the stream was cancelled (by the client or server shutdown)");
}

/* A worker thread: the client cancelled, the deadline passed, or the
 * server drains. */
static void on_cancel(rpc_call *call, void *arg) {
    bb_hub *h = arg;
    watcher *found = NULL;
    pthread_mutex_lock(&h->lock);
    for (dlist *l = h->all.next; l != &h->all; l = l->next) {
        watcher *w = DLIST_ENTRY(l, watcher, all);
        if (w->call == call) {
            found = w;
            dlist_remove(&w->all);
            break;
        }
    }
    pthread_mutex_unlock(&h->lock);
    if (found) evloop_post(h->o.loop, &found->cancel_task);
}

/* ------------------------------------------------------------ sending */

/* 0 sent (or the stream is ending); 1 the client reads too slowly. */
static void overflowed(watcher *w) {
    w->state = W_BEHIND;
    w->need_snapshot = 1; /* until one is queued, whatever happens meanwhile */
}

static int send_to(watcher *w, const ProtobufCMessage *m) {
    if (rpc_call_send(w->call, m) != RPC_SEND_OVERFLOW) return 0;
    overflowed(w);
    return 1;
}

static void start_sync(watcher *w, int snapshot);

/* One change to a live stream, in revision order. */
static void deliver(watcher *w, const hub_event *e) {
    if (w->id[0]) {
        int c = id_cmp(e->id, w->id);
        if (c < 0) return; /* an older board's */
        if (c > 0) {       /* its board expired; this is a new one */
            end(w, GRPC_STATUS_OK, NULL, 1);
            return;
        }
    }
    if (e->rev <= w->rev) return;
    if (e->rev != w->rev + 1) { /* a revision missed: catch up from the log */
        start_sync(w, 0);
        return;
    }
    if (!w->id[0]) memcpy(w->id, e->id, sizeof w->id);
    w->rev = e->rev;
    if (bb_visible(&w->c, &e->h) && rpc_call_send_msg(w->call, e->enc) == RPC_SEND_OVERFLOW)
        overflowed(w);
}

/* After a read brought w to w->rev: what the channel brought meanwhile. */
static void catch_up(watcher *w) {
    board *b = w->b;
    if (!b) return;
    if (w->id[0] && b->id[0]) {
        int c = id_cmp(b->id, w->id);
        if (c > 0) { /* the channel has a newer board: w's expired */
            end(w, GRPC_STATUS_OK, NULL, 1);
            return;
        }
        if (c < 0) return; /* the channel has not heard of w's board yet: it will */
    }
    if (b->last_rev <= w->rev) return;
    for (int i = 0; i < b->ring_n && w->state == W_LIVE; i++) {
        const hub_event *e = b->ring[(b->ring_head + i) % RING_MAX];
        if (e->rev <= w->rev) continue;
        if (e->rev != w->rev + 1) break;
        deliver(w, e);
    }
    if (w->state == W_LIVE && b->last_rev > w->rev) start_sync(w, 0);
}

/* ------------------------------------------------------------ reads */

typedef struct sync_op {
    bb_sync s; /* first */
    watcher *w;
    unsigned seq;
    arena *ar;
} sync_op;

/* bb_hub_free waits for the tick's handle and every Redis op. */
static void maybe_closed(bb_hub *h) {
    if (h->closing && h->tick_closed && h->ops == 0) evloop_wake(&h->waiter);
}

static void op_done(bb_hub *h) {
    h->ops--;
    maybe_closed(h);
}

static Memory__V1__BlackboardSubscribeResponse *snapshot_message(arena *a, const watcher *w,
                                                                 const bb_sync *s) {
    Memory__V1__BlackboardSubscribeResponse *m =
        arena_message(a, &memory__v1__blackboard_subscribe_response__descriptor);
    if (!m) return NULL;
    m->kind = MEMORY__V1__BLACKBOARD_EVENT_KIND__BLACKBOARD_EVENT_KIND_SNAPSHOT;
    m->version = s->rev;
    m->items = arena_alloc(a, (s->nitems ? s->nitems : 1) * sizeof *m->items);
    m->board_id = arena_strndup(a, s->board_id, s->board_id_len);
    m->event_time = bb_render_time(a, s->now_ms);
    if (!m->items || !m->board_id || !m->event_time) return NULL;
    if (s->expire_ms > 0 && !(m->expire_time = bb_render_time(a, s->expire_ms))) return NULL;
    for (size_t i = 0; i < s->nitems; i++) {
        const bb_item *it = &s->items[i];
        if (!bb_check_visible(&w->c, &it->h, it->key, it->key_len)) continue;
        if (!(m->items[m->n_items] = bb_render_item(a, w->tenant, it->key, it->key_len, &it->h,
                                                    it->json, it->json_len, s->expire_ms)))
            return NULL;
        m->n_items++;
    }
    return m;
}

static Memory__V1__BlackboardSubscribeResponse *event_message(arena *a, const char *tenant,
                                                              const bb_event *ev);

/* What a read says of the board itself: its id and expiry (the tick
 * checks expiry by them). */
static void learn_board(board *b, const bb_sync *s) {
    if (s->board_id_len != BB_BOARD_ID_LEN) return;
    if (!b->id[0]) {
        memcpy(b->id, s->board_id, BB_BOARD_ID_LEN);
        b->id[BB_BOARD_ID_LEN] = '\0';
        b->expire_ms = s->expire_ms;
    } else if (memcmp(b->id, s->board_id, BB_BOARD_ID_LEN) == 0 && s->expire_ms > b->expire_ms) {
        b->expire_ms = s->expire_ms;
    }
}

/* A read's answer to the stream: the snapshot, or the changes. */
static int apply_sync(watcher *w, const bb_sync *s, arena *a) {
    if (w->b) learn_board(w->b, s);
    if (s->snapshot) {
        Memory__V1__BlackboardSubscribeResponse *m = snapshot_message(a, w, s);
        if (!m) return -1;
        w->rev = s->rev;
        snprintf(w->id, sizeof w->id, "%.*s", (int)s->board_id_len, s->board_id);
        w->resume = 1;
        w->state = W_LIVE;
        w->waiting_since = 0;
        if (send_to(w, &m->base) == 0) w->need_snapshot = 0;
        return 0;
    }
    w->state = W_LIVE;
    w->waiting_since = 0;
    for (size_t i = 0; i < s->nevents && w->state == W_LIVE; i++) {
        const bb_event *ev = &s->events[i];
        if (!bb_check_visible(&w->c, &ev->h, ev->key, ev->key_len)) continue;
        Memory__V1__BlackboardSubscribeResponse *m = event_message(a, w->tenant, ev);
        if (!m) return -1;
        send_to(w, &m->base);
    }
    w->rev = s->rev;
    w->resume = 1;
    return 0;
}

static void sync_done(bb_sync *s, int status) {
    sync_op *op = (sync_op *)s;
    watcher *w = op->w;
    bb_hub *h = w->hub;
    if (w->state == W_SYNC && op->seq == w->sync_seq) {
        if (status == STATUS_OK) {
            if (apply_sync(w, s, op->ar) != 0)
                end(w, GRPC_STATUS_RESOURCE_EXHAUSTED, "blackboard: out of memory", 0);
            else if (w->state == W_LIVE) catch_up(w);
        } else {
            log_fields(LOG_WARN, "blackboard: a stream's read failed; retrying", LOG_F_STR,
                       "reason", s->err, LOG_F_END);
            w->state = W_WAIT;
            w->retry_at = mono() + RETRY_MS;
            if (!w->waiting_since) w->waiting_since = mono();
        }
    }
    arena_free(op->ar);
    free(op);
    watcher_unref(w);
    op_done(h);
}

/* Reads w's board: a snapshot, or (resuming) the changes after w->rev. */
static void start_sync(watcher *w, int snapshot) {
    bb_hub *h = w->hub;
    sync_op *op = calloc(1, sizeof *op);
    arena *a = op ? arena_create() : NULL;
    bb_names n; /* in the op's arena: the board may go before the answer */
    if (!a || bb_names_from_base(a, w->b->n.base, w->b->n.base_len, &n) != 0) {
        arena_free(a);
        free(op);
        end(w, GRPC_STATUS_RESOURCE_EXHAUSTED, "blackboard: out of memory", 0);
        return;
    }
    w->state = W_SYNC;
    w->retry_at = 0;
    op->w = w;
    op->ar = a;
    op->seq = ++w->sync_seq;
    op->s.done = sync_done;
    int64_t after = w->resume && !snapshot && !w->need_snapshot ? w->rev : -1;
    if (bb_sync_start(&op->s, h->o.redis, a, &n, &h->o.lim, &w->c, after, w->id,
                      mono() + SYNC_TIMEOUT_MS) != 0) {
        arena_free(a);
        free(op);
        end(w, GRPC_STATUS_RESOURCE_EXHAUSTED, "blackboard: out of memory", 0);
        return;
    }
    w->refs++;
    h->ops++;
}

/* ------------------------------------------------------------ events */

static Memory__V1__BlackboardSubscribeResponse *event_message(arena *a, const char *tenant,
                                                              const bb_event *ev) {
    Memory__V1__BlackboardSubscribeResponse *m =
        arena_message(a, &memory__v1__blackboard_subscribe_response__descriptor);
    Memory__V1__BlackboardItem **items = arena_alloc(a, sizeof *items);
    if (!m || !items) return NULL;
    m->kind = ev->kind == BB_PUT ? MEMORY__V1__BLACKBOARD_EVENT_KIND__BLACKBOARD_EVENT_KIND_PUT
                                 : MEMORY__V1__BLACKBOARD_EVENT_KIND__BLACKBOARD_EVENT_KIND_DELETE;
    m->cause = ev->kind == BB_LEASE_EXPIRED
                   ? MEMORY__V1__BLACKBOARD_CHANGE_CAUSE__BLACKBOARD_CHANGE_CAUSE_LEASE_EXPIRED
                   : MEMORY__V1__BLACKBOARD_CHANGE_CAUSE__BLACKBOARD_CHANGE_CAUSE_POST;
    m->version = ev->rev;
    m->board_id = arena_strndup(a, ev->id, ev->id_len);
    m->event_time = bb_render_time(a, ev->time_ms);
    m->expire_time = bb_render_time(a, ev->expire_ms);
    items[0] = bb_render_item(a, tenant, ev->key, ev->key_len, &ev->h, ev->json, ev->json_len,
                              ev->expire_ms);
    if (!m->board_id || !m->event_time || !m->expire_time || !items[0]) return NULL;
    m->items = items;
    m->n_items = 1;
    return m;
}

static void ring_push(board *b, hub_event *e) {
    bb_hub *h = b->hub;
    while (b->ring_n > 0 && (b->ring_n == RING_MAX || b->ring_bytes + e->bytes > RING_BYTES ||
                             h->ring_bytes + e->bytes > HUB_RING_BYTES)) {
        hub_event *old = b->ring[b->ring_head];
        b->ring_head = (b->ring_head + 1) % RING_MAX;
        b->ring_n--;
        b->ring_bytes -= old->bytes;
        h->ring_bytes -= old->bytes;
        event_free(old);
    }
    b->ring[(b->ring_head + b->ring_n++) % RING_MAX] = e;
    b->ring_bytes += e->bytes;
    h->ring_bytes += e->bytes;
}

static void on_event(board *b, const char *msg, size_t len) {
    bb_event ev;
    if (bb_event_parse(msg, len, &ev) != 0 || ev.id_len != BB_BOARD_ID_LEN) {
        log_fields(LOG_WARN, "blackboard: a malformed change message was ignored", LOG_F_STR,
                   "board", b->n.base, LOG_F_END);
        return;
    }
    int age = b->id[0] ? id_cmp(ev.id, b->id) : 1;
    if (age < 0) return; /* an older board's, late */
    int same_board = age == 0;
    if (same_board && ev.rev <= b->last_rev) return;
    if (!same_board) { /* a new board: the ring holds the old one's */
        ring_clear(b);
        b->last_rev = 0;
    }
    int gap = same_board && b->last_rev && ev.rev != b->last_rev + 1;
    arena *a = arena_create();
    hub_event *e = a ? arena_zalloc(a, sizeof *e) : NULL;
    if (e) {
        e->ar = a;
        e->rev = ev.rev;
        e->h = ev.h;
        e->h.owner = arena_strndup(a, ev.h.owner, ev.h.owner_len);
        memcpy(e->id, ev.id, BB_BOARD_ID_LEN);
        e->bytes = len; /* the encoded message, about the size of the text */
        /* The decoded message is needed only to encode it: a scratch arena. */
        arena *scratch = e->h.owner ? arena_create() : NULL;
        Memory__V1__BlackboardSubscribeResponse *m =
            scratch ? event_message(scratch, b->tenant, &ev) : NULL;
        e->enc = m ? rpc_msg_encode(&m->base) : NULL;
        arena_free(scratch);
    }
    if (e && e->enc) {
        ring_push(b, e);
    } else {
        arena_free(a);
        e = NULL;
        log_fields(LOG_WARN, "blackboard: out of memory for a change; its streams catch up",
                   LOG_F_END);
    }
    b->last_rev = ev.rev;
    memcpy(b->id, ev.id, BB_BOARD_ID_LEN);
    b->id[BB_BOARD_ID_LEN] = '\0';
    b->expire_ms = ev.expire_ms;
    for (dlist *l = b->watchers.next, *next; l != &b->watchers; l = next) {
        next = l->next;
        watcher *w = DLIST_ENTRY(l, watcher, link);
        if (w->state != W_LIVE) continue;
        if (gap || !e) start_sync(w, 0);
        else deliver(w, e);
    }
}

/* ------------------------------------------------------------ the channel */

static void on_message(void *arg, aredis_sub_kind kind, const char *ch, size_t chlen,
                       const char *msg, size_t len) {
    bb_hub *h = arg;
    if (h->closing || chlen < 2) return;
    board *b = board_find(h, ch, chlen - 2); /* the channel is "<base>:c" */
    if (!b) return;
    switch (kind) {
    case AREDIS_SUBSCRIBED:
        if (b->chan != CH_SUBSCRIBING) return;
        b->chan = CH_LIVE;
        b->last_rev = 0; /* what came before the subscription was not heard */
        ring_clear(b);
        for (dlist *l = b->watchers.next, *next; l != &b->watchers; l = next) {
            next = l->next;
            watcher *w = DLIST_ENTRY(l, watcher, link);
            if (w->state == W_WAIT && !w->retry_at) start_sync(w, 0);
        }
        return;
    case AREDIS_UNSUBSCRIBED:
        b->chan = CH_NONE;
        if (b->nwatchers) board_kick(h, b);
        else if (!b->checking) board_free(h, b);
        return;
    case AREDIS_MESSAGE:
        if (b->chan == CH_LIVE) on_event(b, msg, len);
        return;
    }
}

/* The subscriber connection came up (subscribe every watched board again;
 * its streams catch up once subscribed) or went (every subscription with
 * it: streams wait, up to the grace). */
static void on_state(void *arg, int up) {
    bb_hub *h = arg;
    if (h->closing) return;
    h->up = up;
    atomic_store(&h->live, up);
    if (!up) h->down_since = mono();
    for (dlist *l = h->boards.next, *next; l != &h->boards; l = next) {
        next = l->next;
        board *b = DLIST_ENTRY(l, board, link);
        b->chan = CH_NONE;
        b->last_rev = 0;
        ring_clear(b);
        for (dlist *k = b->watchers.next; k != &b->watchers; k = k->next) {
            watcher *w = DLIST_ENTRY(k, watcher, link);
            w->state = W_WAIT; /* a read in flight no longer counts */
            w->sync_seq++;
            w->retry_at = 0;
            if (!w->waiting_since) w->waiting_since = mono();
        }
        if (up) board_kick(h, b);
        else if (!b->nwatchers && !b->checking) board_free(h, b);
    }
    if (up) log_fields(LOG_INFO, "blackboard: change streams hear Redis again", LOG_F_END);
    else
        log_fields(LOG_WARN,
                   "blackboard: the Redis subscription is lost; streams wait for it to return",
                   LOG_F_INT, "grace_ms", h->o.grace_ms, LOG_F_END);
}

/* ------------------------------------------------------------ expiry */

typedef struct check_op {
    aredis_cmd cmd; /* first */
    bb_hub *h;
    board *b;
    char id[BB_BOARD_ID_LEN + 1]; /* the board it asks about */
    const char *argv[4];
    size_t lens[4];
} check_op;

static void checked(aredis_cmd *q, int status, redisReply *r) {
    check_op *op = (check_op *)q;
    bb_hub *h = op->h;
    board *b = op->b;
    b->checking = 0;
    b->next_check_ms = clock_wall_ms(NULL) + RECHECK_MS;
    /* The channel may have moved on to a newer board meanwhile: then the
     * answer is about a board whose streams deliver() ends. */
    if (status == STATUS_OK && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        strcmp(b->id, op->id) == 0) {
        const redisReply *id = r->element[0], *x = r->element[1];
        int same = id->type == REDIS_REPLY_STRING && id->len == BB_BOARD_ID_LEN &&
                   memcmp(id->str, b->id, BB_BOARD_ID_LEN) == 0;
        if (same && x->type == REDIS_REPLY_STRING) {
            b->expire_ms = strtoll(x->str, NULL, 10); /* extended meanwhile */
        } else {
            /* Gone (or another board by now): its streams end with EXPIRED. */
            for (dlist *l = b->watchers.next, *next; l != &b->watchers; l = next) {
                next = l->next;
                watcher *w = DLIST_ENTRY(l, watcher, link);
                if (w->id[0] && strcmp(w->id, b->id) == 0) end(w, GRPC_STATUS_OK, NULL, 1);
            }
            b->id[0] = '\0';
            b->expire_ms = 0;
            b->last_rev = 0;
        }
    }
    free(op);
    if (!h->closing && !b->nwatchers && b->chan == CH_NONE) board_free(h, b);
    op_done(h);
}

static void check_expiry(bb_hub *h, board *b) {
    check_op *op = calloc(1, sizeof *op);
    if (!op) return;
    op->h = h;
    op->b = b;
    memcpy(op->id, b->id, sizeof op->id);
    op->argv[0] = "HMGET", op->lens[0] = 5;
    op->argv[1] = b->n.key[BB_KEY_META], op->lens[1] = b->n.base_len + 2;
    op->argv[2] = "id", op->lens[2] = 2;
    op->argv[3] = "x", op->lens[3] = 1;
    op->cmd = (aredis_cmd){.argc = 4,
                           .argv = op->argv,
                           .lens = op->lens,
                           .what = "blackboard expiry check",
                           .deadline_ms = mono() + SYNC_TIMEOUT_MS,
                           .done = checked};
    b->checking = 1;
    h->ops++;
    aredis_submit(h->o.redis, &op->cmd);
}

/* ------------------------------------------------------------ leases */

typedef struct sweep_op {
    bb_sweep s; /* first */
    bb_hub *h;
    arena *ar;
    char **bases; /* copies of the due step's answer */
    size_t *lens;
    size_t n, next;
} sweep_op;

static void sweep_next(sweep_op *op);

static void sweep_end(sweep_op *op) {
    bb_hub *h = op->h;
    for (size_t i = 0; i < op->n; i++) free(op->bases[i]);
    free(op->bases);
    free(op->lens);
    arena_free(op->ar);
    free(op);
    h->sweeping = 0;
    op_done(h);
}

static void board_swept(bb_sweep *s, int status) {
    sweep_op *op = (sweep_op *)s;
    if (status != STATUS_OK)
        log_fields(LOG_WARN, "blackboard: a lease sweep failed", LOG_F_STR, "reason", s->err,
                   LOG_F_END);
    sweep_next(op);
}

static void sweep_next(sweep_op *op) {
    while (op->next < op->n && !op->h->closing) {
        size_t i = op->next++;
        bb_names n;
        arena_reset(op->ar);
        op->s.done = board_swept;
        if (bb_names_from_base(op->ar, op->bases[i], op->lens[i], &n) == 0 &&
            bb_sweep_board_start(&op->s, op->h->o.redis, op->ar, &n, &op->h->o.lim,
                                 mono() + SYNC_TIMEOUT_MS) == 0)
            return;
    }
    sweep_end(op);
}

static void due_answered(bb_sweep *s, int status) {
    sweep_op *op = (sweep_op *)s;
    if (status == STATUS_OK && s->nbases) {
        op->bases = calloc(s->nbases, sizeof *op->bases);
        op->lens = calloc(s->nbases, sizeof *op->lens);
        for (size_t i = 0; op->bases && op->lens && i < s->nbases; i++) {
            if (!(op->bases[i] = malloc(s->base_lens[i] ? s->base_lens[i] : 1))) break;
            memcpy(op->bases[i], s->bases[i], s->base_lens[i]);
            op->lens[i] = s->base_lens[i];
            op->n = i + 1;
        }
    }
    sweep_next(op);
}

static void sweep(bb_hub *h) {
    sweep_op *op = calloc(1, sizeof *op);
    if (!op || !(op->ar = arena_create())) {
        free(op);
        return;
    }
    op->h = h;
    op->s.done = due_answered;
    if (bb_sweep_due_start(&op->s, h->o.redis, op->ar, SWEEP_BATCH, mono() + SYNC_TIMEOUT_MS) !=
        0) {
        arena_free(op->ar);
        free(op);
        return;
    }
    h->sweeping = 1;
    h->ops++;
}

/* ------------------------------------------------------------ the tick */

/* 1 when it ended w (which may be freed then). */
static int check_live(bb_hub *h, watcher *w) {
    char err[160] = "";
    if (authn_check_live(h->o.auth, w->p, err, sizeof err) == 0) return 0;
    char msg[200];
    snprintf(msg, sizeof msg, "blackboard: %s", err[0] ? err : "the token is no longer valid");
    end(w, GRPC_STATUS_UNAUTHENTICATED, msg, 0);
    return 1;
}

static void tick_watcher(bb_hub *h, board *b, watcher *w, int64_t now, int live_check) {
    if (live_check && check_live(h, w)) return;
    /* Not live (Redis lost, or reads failing) for longer than the grace,
     * however often the connection came and went meanwhile. */
    if ((w->state == W_WAIT || w->state == W_SYNC) && w->waiting_since &&
        now - w->waiting_since > h->o.grace_ms) {
        end(w, GRPC_STATUS_UNAVAILABLE,
            "blackboard: Redis is unreachable; reconnect and resume with after_version", 0);
        return;
    }
    if (w->state == W_WAIT && w->retry_at && now >= w->retry_at && b->chan == CH_LIVE)
        start_sync(w, 0);
    else if (w->state == W_BEHIND && rpc_call_queued_bytes(w->call) == 0)
        start_sync(w, 1); /* the slow reader caught up: a fresh snapshot */
}

static void on_tick(uv_timer_t *t) {
    bb_hub *h = t->data;
    int64_t now = mono(), wall = clock_wall_ms(NULL);
    int live_check = now - h->last_live_check >= LIVE_CHECK_MS;
    if (live_check) h->last_live_check = now;

    for (dlist *l = h->boards.next, *next; l != &h->boards; l = next) {
        next = l->next;
        board *b = DLIST_ENTRY(l, board, link);
        for (dlist *k = b->watchers.next, *kn; k != &b->watchers; k = kn) {
            kn = k->next;
            watcher *w = DLIST_ENTRY(k, watcher, link);
            tick_watcher(h, b, w, now, live_check);
        }
        if (b->nwatchers && b->id[0] && b->expire_ms && wall >= b->expire_ms &&
            wall >= b->next_check_ms && !b->checking)
            check_expiry(h, b);
        if (!b->nwatchers && !b->checking && now - b->idle_since > LINGER_MS) {
            if (b->chan == CH_LIVE || b->chan == CH_SUBSCRIBING) {
                if (aredis_unsubscribe(h->sub, b->n.channel, b->n.channel_len) == 0)
                    b->chan = CH_UNSUBSCRIBING;
            } else if (b->chan == CH_NONE) {
                board_free(h, b);
            }
        }
    }
    if (now - h->last_sweep >= BB_HUB_SWEEP_MS && !h->sweeping && aredis_connected(h->o.redis)) {
        h->last_sweep = now;
        sweep(h);
    }
}

/* ------------------------------------------------------------ streams in */

static void add_on_loop(evloop_task *t) {
    watcher *w = DLIST_ENTRY(t, watcher, add_task);
    bb_hub *h = w->hub;
    w->added = 1;
    if (w->cancel_pending) {
        finish(w, GRPC_STATUS_CANCELLED, "blackboard: the client cancelled the stream");
        return;
    }
    if (!h->up && mono() - h->down_since > h->o.grace_ms) {
        end(w, GRPC_STATUS_UNAVAILABLE, "blackboard: Redis is unreachable; retry with backoff", 0);
        return;
    }
    board *b = board_get(h, w->tenant, w->task);
    if (!b) {
        end(w, GRPC_STATUS_RESOURCE_EXHAUSTED, "blackboard: out of memory", 0);
        return;
    }
    w->b = b;
    w->state = W_WAIT;
    w->waiting_since = mono();
    dlist_push_back(&b->watchers, &w->link);
    b->nwatchers++;
    b->idle_since = 0;
    if (b->chan == CH_LIVE) start_sync(w, 0);
    else board_kick(h, b);
}

grpc_status_code bb_hub_watch(bb_hub *h, rpc_call *call, const principal *p, const bb_caller *c,
                              const bb_watch_req *req) {
    size_t lt = strlen(req->tenant) + 1, lk = strlen(req->task) + 1, ls = strlen(c->sub) + 1;
    watcher *w = calloc(1, sizeof *w + lt + lk + ls);
    if (!w) {
        rpc_call_set_error(call, "blackboard: out of memory");
        return GRPC_STATUS_RESOURCE_EXHAUSTED;
    }
    char *s = (char *)(w + 1);
    w->tenant = memcpy(s, req->tenant, lt);
    w->task = memcpy(s + lt, req->task, lk);
    w->c = *c;
    w->c.sub = memcpy(s + lt + lk, c->sub, ls);
    w->hub = h;
    w->call = call;
    w->p = (principal *)p;
    principal_ref(w->p);
    w->refs = 1;
    w->state = W_WAIT;
    if (req->has_after) {
        w->resume = 1;
        w->rev = req->after;
        snprintf(w->id, sizeof w->id, "%s", req->board_id ? req->board_id : "");
    }
    w->add_task.fn = add_on_loop;
    w->cancel_task.fn = cancel_on_loop;
    dlist_init(&w->link);
    pthread_mutex_lock(&h->lock);
    dlist_push_back(&h->all, &w->all);
    pthread_mutex_unlock(&h->lock);
    if (rpc_call_on_cancel(call, on_cancel, h) != 0) {
        pthread_mutex_lock(&h->lock);
        dlist_remove(&w->all);
        pthread_mutex_unlock(&h->lock);
        principal_unref(w->p);
        free(w);
        return GRPC_STATUS_CANCELLED;
    }
    evloop_post(h->o.loop, &w->add_task);
    return RPC_PENDING;
}

int bb_hub_live(const bb_hub *h) { return h && atomic_load(&((bb_hub *)h)->live); }

/* ------------------------------------------------------------ life */

static void setup_on_loop(evloop_task *t) {
    bb_hub *h = (bb_hub *)((char *)t - offsetof(bb_hub, task));
    if (uv_timer_init(evloop_uv(h->o.loop), &h->tick) != 0) {
        h->setup_failed = 1;
    } else {
        h->tick.data = h;
        uv_timer_start(&h->tick, on_tick, TICK_MS, TICK_MS);
    }
    evloop_wake(&h->waiter);
}

static void tick_closed(uv_handle_t *handle) {
    bb_hub *h = handle->data;
    h->tick_closed = 1;
    maybe_closed(h);
}

static void teardown_on_loop(evloop_task *t) {
    bb_hub *h = (bb_hub *)((char *)t - offsetof(bb_hub, task));
    h->closing = 1;
    for (dlist *l = h->boards.next; l != &h->boards; l = l->next) {
        board *b = DLIST_ENTRY(l, board, link);
        while (!dlist_empty(&b->watchers))
            end(DLIST_ENTRY(b->watchers.next, watcher, link), GRPC_STATUS_UNAVAILABLE,
                "blackboard: the server is shutting down", 0);
    }
    uv_close((uv_handle_t *)&h->tick, tick_closed);
}

int bb_hub_create(const bb_hub_options *o, bb_hub **out, char *err, size_t errlen) {
    bb_hub *h = calloc(1, sizeof *h);
    if (!h) return snprintf(err, errlen, "blackboard: out of memory"), -1;
    h->o = *o;
    h->o.redis_url = NULL;
    h->down_since = mono();
    atomic_init(&h->live, 0);
    dlist_init(&h->boards);
    dlist_init(&h->all);
    pthread_mutex_init(&h->lock, NULL);
    evloop_waiter_init(&h->waiter);
    h->task.fn = setup_on_loop;
    evloop_post(o->loop, &h->task);
    evloop_wait(&h->waiter);
    aredis_options so = {.url = o->redis_url,
                         .connect_timeout_ms = 1000,
                         .default_timeout_ms = 1000,
                         .max_in_flight = 1,
                         .on_message = on_message,
                         .on_state = on_state,
                         .arg = h};
    if (h->setup_failed) {
        snprintf(err, errlen, "blackboard: cannot start its timer");
        bb_hub_free(h);
        return -1;
    }
    if (aredis_create(o->loop, &so, &h->sub, err, errlen) != 0) {
        bb_hub_free(h);
        return -1;
    }
    *out = h;
    return 0;
}

void bb_hub_free(bb_hub *h) {
    if (!h) return;
    if (!h->setup_failed) {
        h->task.fn = teardown_on_loop;
        evloop_post(h->o.loop, &h->task);
        evloop_wait(&h->waiter);
    }
    aredis_free(h->sub); /* its callbacks see closing */
    while (!dlist_empty(&h->boards)) board_free(h, DLIST_ENTRY(h->boards.next, board, link));
    evloop_waiter_destroy(&h->waiter);
    pthread_mutex_destroy(&h->lock);
    free(h);
}
