/* taskpool: a fixed set of threads running posted tasks in order, for work
 * that must not run on a completion-queue thread or the event loop: a
 * handler that computes for long (a vector search over a large index) or
 * still waits on a backend through a blocking client (rpc.h's "blocking"
 * methods). The queue is bounded: a post past max_queue is refused at
 * once, so a saturated pool says so instead of queuing without end.
 *
 * Ownership: tasks are the poster's memory (intrusive, nothing is
 * allocated per post) and must stay valid until their fn has run. */
#ifndef MEMORYD_CORE_TASKPOOL_H
#define MEMORYD_CORE_TASKPOOL_H

#include <stddef.h>

#include "service/core/dlist.h"

typedef struct taskpool taskpool;

typedef struct taskpool_task {
    void (*fn)(struct taskpool_task *task); /* runs on one of the pool's threads */
    dlist link;                             /* the pool's queue: not the poster's */
} taskpool_task;

/* Starts nthreads threads ("name" in logs; > 0) with room for max_queue
 * waiting tasks (> 0). 0 with *out the caller's (taskpool_free), or -1
 * with the reason in err (nothing started). */
int taskpool_create(const char *name, int nthreads, size_t max_queue, taskpool **out, char *err,
                    size_t errlen);
/* Runs what is queued, joins the threads, frees. No thread may post once
 * it started. Accepts NULL. */
void taskpool_free(taskpool *p);

/* Queues task (any thread; allocates nothing): 0, or -1 when max_queue
 * tasks are waiting already (nothing queued; the caller answers
 * "saturated"). */
int taskpool_post(taskpool *p, taskpool_task *task);

/* Threads and queue bound, for messages naming the limits. */
int taskpool_threads(const taskpool *p);
size_t taskpool_max_queue(const taskpool *p);

#endif
