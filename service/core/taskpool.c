/* taskpool: see taskpool.h. One mutex and condition variable guard the
 * queue; a thread takes the first task, runs it unlocked, and comes back. */
#include "service/core/taskpool.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct taskpool {
    pthread_mutex_t lock;
    pthread_cond_t ready;
    dlist queue;
    size_t queued, max_queue;
    int stopping;
    int nthreads, started;
    pthread_t threads[];
};

static void *run(void *arg) {
    taskpool *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        dlist *first = dlist_first(&p->queue);
        if (!first) {
            if (p->stopping) break;
            pthread_cond_wait(&p->ready, &p->lock);
            continue;
        }
        dlist_remove(first);
        p->queued--;
        pthread_mutex_unlock(&p->lock);
        taskpool_task *t = DLIST_ENTRY(first, taskpool_task, link);
        t->fn(t);
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* Stops and joins the threads that started, then frees. */
static void stop(taskpool *p) {
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    pthread_cond_broadcast(&p->ready);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->started; i++) pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->ready);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

int taskpool_create(const char *name, int nthreads, size_t max_queue, taskpool **out, char *err,
                    size_t errlen) {
    *out = NULL;
    if (nthreads <= 0 || max_queue == 0)
        return snprintf(err, errlen, "%s: needs at least one thread and one queue slot", name), -1;
    taskpool *p = calloc(1, sizeof *p + (size_t)nthreads * sizeof(pthread_t));
    if (!p) return snprintf(err, errlen, "%s: out of memory", name), -1;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->ready, NULL);
    dlist_init(&p->queue);
    p->max_queue = max_queue;
    p->nthreads = nthreads;
    for (; p->started < nthreads; p->started++) {
        if (pthread_create(&p->threads[p->started], NULL, run, p) != 0) {
            snprintf(err, errlen, "%s: cannot start thread %d of %d", name, p->started + 1,
                     nthreads);
            stop(p);
            return -1;
        }
    }
    *out = p;
    return 0;
}

void taskpool_free(taskpool *p) {
    if (p) stop(p);
}

int taskpool_post(taskpool *p, taskpool_task *task) {
    pthread_mutex_lock(&p->lock);
    int full = p->queued >= p->max_queue;
    if (!full) {
        dlist_push_back(&p->queue, &task->link);
        p->queued++;
        pthread_cond_signal(&p->ready);
    }
    pthread_mutex_unlock(&p->lock);
    return full ? -1 : 0;
}

int taskpool_threads(const taskpool *p) { return p->nthreads; }

size_t taskpool_max_queue(const taskpool *p) { return p->max_queue; }
