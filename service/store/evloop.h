/* evloop: one libuv event loop on a thread of its own, where memoryd's
 * backend I/O runs (the asynchronous PostgreSQL client, apg.h). A
 * completion-queue thread never waits on a backend: it hands work to the
 * loop with evloop_post and returns; the loop thread answers the call when
 * the backend does.
 *
 * Ownership: evloop_create returns a loop the caller frees with
 * evloop_free, after every user of the loop is gone (their handles closed
 * on the loop thread). Tasks are the poster's memory: a task must stay
 * valid until its fn has run, and may be posted again from inside fn. */
#ifndef MEMORYD_STORE_EVLOOP_H
#define MEMORYD_STORE_EVLOOP_H

#include <pthread.h>
#include <stddef.h>

struct uv_loop_s; /* <uv.h>, which only the files using handles include */

typedef struct evloop evloop;

typedef struct evloop_task {
    void (*fn)(struct evloop_task *task); /* runs on the loop thread */
    struct evloop_task *next;             /* the loop's queue: not the poster's */
} evloop_task;

/* Starts the loop thread ("name" in logs). 0 with *out, or -1 with the
 * reason in err (nothing started). */
int evloop_create(const char *name, evloop **out, char *err, size_t errlen);
/* Stops the loop: runs the tasks already posted, closes every handle still
 * open on it (their close callbacks run), joins the thread, frees. Accepts
 * NULL. No thread may post after it started. */
void evloop_free(evloop *l);

/* Queues task->fn to run on the loop thread, soon and in posting order.
 * Thread-safe; never blocks on I/O; allocates nothing. */
void evloop_post(evloop *l, evloop_task *task);

/* The libuv loop, for handles (uv_poll_t, uv_timer_t) that live on it:
 * only the loop thread may touch them. */
struct uv_loop_s *evloop_uv(evloop *l);
/* 1 on the loop thread (for assertions). */
int evloop_on_loop(const evloop *l);

/* A wait for something the loop thread does (a client's set-up or
 * tear-down, a blocking ping's answer): another thread evloop_waits, the
 * loop thread evloop_wakes. After a wait it is ready for the next. */
typedef struct evloop_waiter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
} evloop_waiter;
void evloop_waiter_init(evloop_waiter *w);
void evloop_waiter_destroy(evloop_waiter *w);
void evloop_wake(evloop_waiter *w);
void evloop_wait(evloop_waiter *w);

/* Runs fn(arg, out) on the loop thread, out being out_len bytes of its
 * own, and waits up to timeout_ms for it: 0 with the result copied to out,
 * or -1 when the loop did not get to it in time (a stalled loop must not
 * hang the caller: a metrics scrape reading state only the loop thread may
 * touch). fn may still run later, so arg must outlive the loop's queue
 * (a client freed before evloop_free). Never from the loop thread. */
int evloop_call(evloop *l, void (*fn)(void *arg, void *out), void *arg, void *out, size_t out_len,
                int timeout_ms);

#endif
