/* evloop: a libuv loop on its own thread; see evloop.h. */
#include "service/store/evloop.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "service/core/clock.h"
#include "service/core/log.h"

struct evloop {
    uv_loop_t uv;
    uv_async_t wake; /* evloop_post's doorbell */
    pthread_t thread;
    pthread_mutex_t lock; /* guards the queue and stopping */
    evloop_task *head, *tail;
    int stopping;
    char name[32];
};

/* Takes the whole queue at once, so a task posting again (a retry) runs on
 * the next turn, not in this loop. */
static void run_posted(uv_async_t *h) {
    evloop *l = h->data;
    pthread_mutex_lock(&l->lock);
    evloop_task *t = l->head;
    l->head = l->tail = NULL;
    int stopping = l->stopping;
    pthread_mutex_unlock(&l->lock);
    while (t) {
        evloop_task *next = t->next;
        t->fn(t);
        t = next;
    }
    if (stopping) uv_stop(&l->uv);
}

static void *loop_main(void *arg) {
    evloop *l = arg;
    uv_run(&l->uv, UV_RUN_DEFAULT);
    return NULL;
}

int evloop_create(const char *name, evloop **out, char *err, size_t errlen) {
    evloop *l = calloc(1, sizeof *l);
    if (!l) return snprintf(err, errlen, "evloop: out of memory"), -1;
    snprintf(l->name, sizeof l->name, "%s", name ? name : "evloop");
    int rc = uv_loop_init(&l->uv);
    if (rc != 0) {
        snprintf(err, errlen, "evloop %s: uv_loop_init: %s", l->name, uv_strerror(rc));
        free(l);
        return -1;
    }
    pthread_mutex_init(&l->lock, NULL);
    if ((rc = uv_async_init(&l->uv, &l->wake, run_posted)) != 0) {
        snprintf(err, errlen, "evloop %s: uv_async_init: %s", l->name, uv_strerror(rc));
        uv_loop_close(&l->uv);
        pthread_mutex_destroy(&l->lock);
        free(l);
        return -1;
    }
    l->wake.data = l;
    l->uv.data = l;
    if ((rc = pthread_create(&l->thread, NULL, loop_main, l)) != 0) {
        snprintf(err, errlen, "evloop %s: cannot start its thread: %s", l->name, strerror(rc));
        uv_close((uv_handle_t *)&l->wake, NULL);
        uv_run(&l->uv, UV_RUN_NOWAIT);
        uv_loop_close(&l->uv);
        pthread_mutex_destroy(&l->lock);
        free(l);
        return -1;
    }
    *out = l;
    return 0;
}

static void close_handle(uv_handle_t *h, void *arg) {
    (void)arg;
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

/* The loop stops after the tasks posted so far (run_posted). */
static void request_stop(evloop *l) {
    pthread_mutex_lock(&l->lock);
    l->stopping = 1;
    pthread_mutex_unlock(&l->lock);
    uv_async_send(&l->wake);
}

void evloop_free(evloop *l) {
    if (!l) return;
    request_stop(l);
    pthread_join(l->thread, NULL);
    /* Back on this thread with the loop stopped: whatever a user left open
     * is closed so uv_loop_close can succeed (their close callbacks were
     * theirs to run before; a handle left here has none). */
    uv_walk(&l->uv, close_handle, NULL);
    uv_run(&l->uv, UV_RUN_DEFAULT);
    if (uv_loop_close(&l->uv) != 0)
        log_fields(LOG_WARN, "event loop closed with handles still active", LOG_F_STR, "loop",
                   l->name, LOG_F_END);
    pthread_mutex_destroy(&l->lock);
    free(l);
}

void evloop_post(evloop *l, evloop_task *task) {
    task->next = NULL;
    pthread_mutex_lock(&l->lock);
    if (l->tail) l->tail->next = task;
    else l->head = task;
    l->tail = task;
    pthread_mutex_unlock(&l->lock);
    uv_async_send(&l->wake);
}

struct uv_loop_s *evloop_uv(evloop *l) {
    return &l->uv;
}

int evloop_on_loop(const evloop *l) { return pthread_equal(pthread_self(), l->thread); }

void evloop_waiter_init(evloop_waiter *w) {
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    w->done = 0;
}

void evloop_waiter_destroy(evloop_waiter *w) {
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
}

void evloop_wake(evloop_waiter *w) {
    pthread_mutex_lock(&w->lock);
    w->done = 1;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

void evloop_wait(evloop_waiter *w) {
    pthread_mutex_lock(&w->lock);
    while (!w->done) pthread_cond_wait(&w->cond, &w->lock);
    w->done = 0;
    pthread_mutex_unlock(&w->lock);
}

/* One evloop_call: on the heap, freed by whichever of the caller (done
 * waiting) and the loop (done running) lets go last. */
typedef struct {
    evloop_task task; /* first: the task is the call */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int ran, refs;
    void (*fn)(void *arg, void *out);
    void *arg;
    size_t out_len;
    unsigned char out[]; /* fn's result */
} loop_call;

static void loop_call_unref(loop_call *c) {
    pthread_mutex_lock(&c->lock);
    int last = --c->refs == 0;
    pthread_mutex_unlock(&c->lock);
    if (!last) return;
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    free(c);
}

static void loop_call_run(evloop_task *t) {
    loop_call *c = (loop_call *)t;
    pthread_mutex_lock(&c->lock);
    int wanted = c->refs == 2; /* the caller still waits */
    pthread_mutex_unlock(&c->lock);
    if (wanted) c->fn(c->arg, c->out);
    pthread_mutex_lock(&c->lock);
    c->ran = 1;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
    loop_call_unref(c);
}

int evloop_call(evloop *l, void (*fn)(void *arg, void *out), void *arg, void *out, size_t out_len,
                int timeout_ms) {
    loop_call *c = calloc(1, sizeof *c + out_len);
    if (!c) return -1;
    c->task.fn = loop_call_run;
    c->fn = fn;
    c->arg = arg;
    c->out_len = out_len;
    c->refs = 2;
    pthread_mutex_init(&c->lock, NULL);
    if (clock_cond_init(&c->cond) != 0) {
        pthread_mutex_destroy(&c->lock);
        free(c);
        return -1;
    }
    evloop_post(l, &c->task);
    struct timespec until = clock_cond_deadline(clock_mono_ms(NULL) + timeout_ms);
    pthread_mutex_lock(&c->lock);
    while (!c->ran && pthread_cond_timedwait(&c->cond, &c->lock, &until) == 0) {}
    int ok = c->ran;
    if (ok) memcpy(out, c->out, out_len);
    pthread_mutex_unlock(&c->lock);
    loop_call_unref(c);
    return ok ? 0 : -1;
}
