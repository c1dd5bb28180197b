/* aredis_uv: hiredis on libuv, errors included; see aredis_uv.h. */
#include "service/store/aredis_uv.h"

#include <stdlib.h>

typedef struct watch {
    uv_poll_t poll;
    redisAsyncContext *ac; /* NULL once hiredis let go of it */
    int events;            /* UV_READABLE | UV_WRITABLE wanted */
} watch;

static void on_poll(uv_poll_t *h, int status, int events) {
    watch *w = h->data;
    /* An error (POLLERR: the peer reset the connection) is news for
     * whatever is watched: hiredis's read or write then meets the error
     * and closes the context. libuv has stopped the poll by now. */
    if (status < 0) events = w->events;
    if (w->ac && (events & UV_READABLE)) redisAsyncHandleRead(w->ac);
    if (w->ac && (events & UV_WRITABLE)) redisAsyncHandleWrite(w->ac);
}

static void update(watch *w, int events) {
    w->events = events;
    if (events) uv_poll_start(&w->poll, events, on_poll);
    else uv_poll_stop(&w->poll);
}

static void add_read(void *arg) {
    watch *w = arg;
    update(w, w->events | UV_READABLE);
}

static void del_read(void *arg) {
    watch *w = arg;
    update(w, w->events & ~UV_READABLE);
}

static void add_write(void *arg) {
    watch *w = arg;
    update(w, w->events | UV_WRITABLE);
}

static void del_write(void *arg) {
    watch *w = arg;
    update(w, w->events & ~UV_WRITABLE);
}

static void closed(uv_handle_t *h) { free(h->data); }

static void cleanup(void *arg) {
    watch *w = arg;
    w->ac = NULL; /* hiredis is freeing it */
    uv_close((uv_handle_t *)&w->poll, closed);
}

int aredis_uv_attach(redisAsyncContext *ac, uv_loop_t *loop) {
    if (ac->ev.data) return REDIS_ERR;
    watch *w = calloc(1, sizeof *w);
    if (!w) return REDIS_ERR;
    if (uv_poll_init(loop, &w->poll, ac->c.fd) != 0) {
        free(w);
        return REDIS_ERR;
    }
    w->poll.data = w;
    w->ac = ac;
    ac->ev.data = w;
    ac->ev.addRead = add_read;
    ac->ev.delRead = del_read;
    ac->ev.addWrite = add_write;
    ac->ev.delWrite = del_write;
    ac->ev.cleanup = cleanup;
    return REDIS_OK;
}
