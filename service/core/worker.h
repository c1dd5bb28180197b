/* worker: a background thread of the service (the health probe, the
 * revocation poller, the cache invalidation subscriber, the audit
 * listener) and the stop request it naps on. The thread body loops until
 * worker_stopping (worker_nap returns it); worker_stop asks, wakes the nap,
 * lets the owner interrupt blocking I/O, and joins. */
#ifndef MEMORYD_CORE_WORKER_H
#define MEMORYD_CORE_WORKER_H

#include <stdint.h>

typedef struct worker worker;

/* The thread's body; it should return soon after worker_stopping(w). */
typedef void (*worker_fn)(worker *w, void *arg);

/* Starts fn(w, arg) on a new thread. 0 with *out the caller's (free it
 * with worker_stop), or -1 (out of memory or threads; nothing started). */
int worker_start(worker_fn fn, void *arg, worker **out);

/* Asks the thread to stop and wakes its nap; then, when interrupt is not
 * NULL, calls interrupt(arg) (the arg of worker_start) so that I/O the
 * thread blocks in ends early (an eventfd its poll watches, a PQcancel);
 * joins the thread and frees w. Accepts NULL. */
void worker_stop(worker *w, void (*interrupt)(void *arg));

/* 1 once worker_stop was called. Any thread. */
int worker_stopping(worker *w);

/* Sleeps ms (monotonic) unless a stop comes first; returns
 * worker_stopping. */
int worker_nap(worker *w, int64_t ms);

#endif
