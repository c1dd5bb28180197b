/* cache_sub: invalidation subscriber thread; see cache_sub.h. */
#include "service/cache/cache_sub.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/cache/cache_codec.h"
#include "service/core/clock.h"
#include "service/core/log.h"
#include "service/core/worker.h"

#define POLL_MS 200 /* how soon a stop request is noticed */
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

struct cache_sub {
    redis_pool *pool;
    cache_l1 *l1;
    char replica[CACHE_REPLICA_ID_LEN + 1];
    worker *thread;
    pthread_mutex_t lock; /* with cond: going live, for cache_sub_wait_live */
    pthread_cond_t cond;  /* CLOCK_MONOTONIC */
    atomic_int live;
};

static void set_live(cache_sub *s, int live) {
    pthread_mutex_lock(&s->lock);
    atomic_store(&s->live, live);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static void handle(cache_sub *s, const redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || strcmp(r->element[0]->str, "message") != 0 ||
        r->element[2]->type != REDIS_REPLY_STRING)
        return; /* subscribe confirmations and the like */
    const char *key;
    size_t klen;
    int rc = cache_inval_decode(r->element[2]->str, r->element[2]->len, s->replica, &key, &klen);
    if (rc == 0) cache_l1_delete(s->l1, key, klen);
    else if (rc == 2) cache_l1_erase(s->l1, key, klen, NULL, 0);
    else if (rc < 0) log_fields(LOG_WARN, "malformed cache invalidation ignored", LOG_F_END);
}

/* Reads messages until the connection fails or a stop; 0 on stop. */
static int listen_until_broken(worker *w, cache_sub *s, redisContext *c) {
    for (;;) {
        void *reply = NULL;
        while (redisGetReplyFromReader(c, &reply) == REDIS_OK && reply) {
            handle(s, reply);
            freeReplyObject(reply);
            reply = NULL;
        }
        if (c->err) return -1;
        if (worker_stopping(w)) return 0;
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        int n = poll(&pfd, 1, POLL_MS);
        if (n < 0) continue; /* EINTR */
        if (n > 0 && redisBufferRead(c) != REDIS_OK) return -1;
    }
}

static void sub_main(worker *w, void *arg) {
    cache_sub *s = arg;
    int backoff = BACKOFF_MIN_MS;
    log_outage deaf = {0};
    while (!worker_stopping(w)) {
        char err[256] = "";
        redisContext *c = redis_pool_open(s->pool, err, sizeof err);
        redisReply *r = c ? redisCommand(c, "SUBSCRIBE %s", CACHE_INVALIDATE_CHANNEL) : NULL;
        if (c && !r) snprintf(err, sizeof err, "SUBSCRIBE failed: %s", c->errstr);
        int ok = r && r->type == REDIS_REPLY_ARRAY;
        if (r && !ok) snprintf(err, sizeof err, "SUBSCRIBE refused");
        if (r) freeReplyObject(r);
        if (!ok) {
            if (c) redisFree(c);
            log_outage_begin(&deaf,
                             "cache invalidations not heard; L1 is not shared-safe until "
                             "Redis is back",
                             "reason", err);
            if (worker_nap(w, backoff)) break;
            backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
            continue;
        }
        /* Invalidations sent while unsubscribed were missed: forget L1. */
        cache_l1_clear(s->l1);
        set_live(s, 1);
        log_outage_end(&deaf, "cache invalidations heard again");
        backoff = BACKOFF_MIN_MS;
        int rc = listen_until_broken(w, s, c);
        set_live(s, 0);
        if (rc != 0)
            log_outage_begin(&deaf, "cache invalidation subscription lost", "reason", c->errstr);
        redisFree(c);
    }
}

cache_sub *cache_sub_start(redis_pool *pool, cache_l1 *l1, const char *replica) {
    cache_sub *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->pool = pool;
    s->l1 = l1;
    snprintf(s->replica, sizeof s->replica, "%s", replica);
    clock_cond_init(&s->cond);
    pthread_mutex_init(&s->lock, NULL);
    atomic_init(&s->live, 0);
    if (worker_start(sub_main, s, &s->thread) == 0) return s;
    cache_sub_stop(s);
    return NULL;
}

void cache_sub_stop(cache_sub *s) {
    if (!s) return;
    worker_stop(s->thread, NULL);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

int cache_sub_live(const cache_sub *s) { return s && atomic_load(&s->live); }

int cache_sub_wait_live(cache_sub *s, int64_t deadline_ms) {
    struct timespec ts = clock_cond_deadline(deadline_ms);
    pthread_mutex_lock(&s->lock);
    while (!atomic_load(&s->live) && pthread_cond_timedwait(&s->cond, &s->lock, &ts) == 0) {}
    int live = atomic_load(&s->live);
    pthread_mutex_unlock(&s->lock);
    return live ? 0 : -1;
}
