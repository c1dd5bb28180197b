/* cancel: how a client's cancel reaches work that blocks a thread (the
 * task pool's handlers, core/taskpool.h): a flag the work checks, and a
 * wake-up the work installs while it waits, so the cancel ends the wait at
 * once instead of at the next timeout. Work on the event loop needs none
 * of this (it is cancelled through its own handle).
 *
 * One side fires (any thread, once is enough); the other side, the thread
 * doing the work, brackets each wait with cancel_wait_begin/end. Storage:
 * the caller's (a call's arena); cancel_init before either side uses it. */
#ifndef MEMORYD_CORE_CANCEL_H
#define MEMORYD_CORE_CANCEL_H

#include <pthread.h>

/* fired is read and written with the compiler's atomic builtins (not C11
 * atomics, which C++ code including this header cannot name). */
typedef struct cancel_token {
    int fired;
    pthread_mutex_t lock; /* wake and wake_arg */
    void (*wake)(void *arg);
    void *wake_arg;
} cancel_token;

/* No matching destroy: a fire may come after the work ended (until the
 * storage goes), and a default mutex holds no resources. */
void cancel_init(cancel_token *t);

/* Sets the flag and wakes the waiting work, if any. Any thread. */
void cancel_fire(cancel_token *t);

/* 1 once fired. NULL t: never. */
int cancel_fired(const cancel_token *t);

/* Installs wake(arg) for the wait to come: returns 0, or -1 (nothing
 * installed) when the token has fired already. wake runs on the firing
 * thread, under the token's lock, so it must only poke the waiter (a
 * write to an eventfd, curl_multi_wakeup). NULL t: 0, nothing installed. */
int cancel_wait_begin(cancel_token *t, void (*wake)(void *arg), void *arg);
/* Removes it: after this returns, wake is not running and will not run. */
void cancel_wait_end(cancel_token *t);

#endif
