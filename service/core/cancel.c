/* cancel: a cancel flag with a wake-up; see cancel.h. */
#include "service/core/cancel.h"

#include <stddef.h>

void cancel_init(cancel_token *t) {
    t->fired = 0;
    pthread_mutex_init(&t->lock, NULL);
    t->wake = NULL;
    t->wake_arg = NULL;
}

void cancel_fire(cancel_token *t) {
    __atomic_store_n(&t->fired, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_lock(&t->lock);
    if (t->wake) t->wake(t->wake_arg);
    pthread_mutex_unlock(&t->lock);
}

int cancel_fired(const cancel_token *t) {
    return t && __atomic_load_n(&t->fired, __ATOMIC_SEQ_CST);
}

int cancel_wait_begin(cancel_token *t, void (*wake)(void *arg), void *arg) {
    if (!t) return 0;
    pthread_mutex_lock(&t->lock);
    /* Checked under the lock: a fire either sees wake installed or is
     * seen here. */
    int fired = __atomic_load_n(&t->fired, __ATOMIC_SEQ_CST);
    if (!fired) {
        t->wake = wake;
        t->wake_arg = arg;
    }
    pthread_mutex_unlock(&t->lock);
    return fired ? -1 : 0;
}

void cancel_wait_end(cancel_token *t) {
    if (!t) return;
    pthread_mutex_lock(&t->lock);
    t->wake = NULL;
    t->wake_arg = NULL;
    pthread_mutex_unlock(&t->lock);
}
