/* arena_pool: a mutex-guarded stack of reset arenas. */
#include "service/core/arena_pool.h"

#include <pthread.h>
#include <stdlib.h>

struct arena_pool {
    pthread_mutex_t lock;
    size_t n, max;
    arena *idle[]; /* max entries */
};

arena_pool *arena_pool_create(size_t max) {
    arena_pool *p = calloc(1, sizeof *p + max * sizeof(arena *));
    if (!p) return NULL;
    pthread_mutex_init(&p->lock, NULL);
    p->max = max;
    return p;
}

void arena_pool_free(arena_pool *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) arena_free(p->idle[i]);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

arena *arena_pool_get(arena_pool *p) {
    arena *a = NULL;
    pthread_mutex_lock(&p->lock);
    if (p->n) a = p->idle[--p->n];
    pthread_mutex_unlock(&p->lock);
    return a ? a : arena_create();
}

void arena_pool_put(arena_pool *p, arena *a) {
    if (!a) return;
    /* Reset outside the lock: it may free the arena's extra blocks. */
    arena_reset(a);
    pthread_mutex_lock(&p->lock);
    if (p->n < p->max) {
        p->idle[p->n++] = a;
        a = NULL;
    }
    pthread_mutex_unlock(&p->lock);
    arena_free(a);
}
