/* health_probe: the dependency table and the probe loop. */
#include "service/health/health_probe.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "service/core/log.h"
#include "service/rpc/rpc.h"

#define NEEDS_PG (1u << 0)    /* the service reads or writes PostgreSQL */
#define NEEDS_REDIS (1u << 1) /* the service cannot work without Redis */
#define NEEDS_VECTORS (1u << 2) /* the vector store, when it is not PostgreSQL */

static const struct {
    const char *service;
    unsigned needs;
} deps[] = {
    {"", NEEDS_PG}, /* the server as a whole */
    {"memory.v1.GlobalMemory", NEEDS_PG},
    /* The catalog is in Postgres; points in Postgres too or in Qdrant. */
    {"memory.v1.EpisodicMemory", NEEDS_PG | NEEDS_VECTORS},
    {"memory.v1.Cache", 0},                 /* L1 answers without Redis */
    /* The cache's shared level: NOT_SERVING = Cache degraded to this
     * replica's L1 (Redis down or not configured). */
    {"memory.v1.Cache.L2", NEEDS_REDIS},
    {"memory.v1.Entries", NEEDS_PG},
    {"memory.v1.Blackboard", NEEDS_REDIS},
    {"memory.v1.Router", NEEDS_PG},
    {"memory.v1.Audit", NEEDS_PG},
    {"memory.v1.Access", NEEDS_PG},
    {"memory.v1.Privacy", NEEDS_PG},
    {"grpc.health.v1.Health", 0},
};

struct health_probe {
    health *h;
    pg_pool *pg;
    redis_pool *redis;
    health_probe_fn vectors;
    void *vectors_arg;
    int interval_ms;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stop;
    int pg_up, redis_up, vectors_up; /* last seen, -1 before the first probe */
};

static void probe_once(health_probe *p) {
    int64_t deadline = rpc_now_ms() + (p->interval_ms < 2000 ? 2000 : p->interval_ms);
    int pg_up = pg_pool_ping(p->pg, deadline) == 0;
    int redis_up = p->redis && redis_pool_ping(p->redis, deadline) == 0;
    if (pg_up != p->pg_up && p->pg_up != -1)
        log_fields(pg_up ? LOG_INFO : LOG_WARN, pg_up ? "postgres is back" : "postgres is down",
                   LOG_F_END);
    if (p->redis && redis_up != p->redis_up && p->redis_up != -1)
        log_fields(redis_up ? LOG_INFO : LOG_WARN, redis_up ? "redis is back" : "redis is down",
                   LOG_F_END);
    int vectors_up = !p->vectors || p->vectors(p->vectors_arg) == 0;
    if (p->vectors && vectors_up != p->vectors_up && p->vectors_up != -1)
        log_fields(vectors_up ? LOG_INFO : LOG_WARN,
                   vectors_up ? "vector store is back" : "vector store is down", LOG_F_END);
    p->pg_up = pg_up;
    p->redis_up = redis_up;
    p->vectors_up = vectors_up;
    for (size_t i = 0; i < sizeof deps / sizeof deps[0]; i++) {
        int ok = (!(deps[i].needs & NEEDS_PG) || pg_up) &&
                 (!(deps[i].needs & NEEDS_REDIS) || redis_up) &&
                 (!(deps[i].needs & NEEDS_VECTORS) || vectors_up);
        health_set(p->h, deps[i].service, ok ? HEALTH_SERVING : HEALTH_NOT_SERVING);
    }
}

static void *probe_main(void *arg) {
    health_probe *p = arg;
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += p->interval_ms / 1000;
        ts.tv_nsec += (long)(p->interval_ms % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&p->cond, &p->lock, &ts);
        if (p->stop) break;
        pthread_mutex_unlock(&p->lock);
        probe_once(p);
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int health_probe_start(health *h, pg_pool *pg, redis_pool *redis, health_probe_fn vectors,
                       void *vectors_arg, int interval_ms, health_probe **out) {
    health_probe *p = calloc(1, sizeof *p);
    if (!p) return -1;
    p->h = h;
    p->pg = pg;
    p->redis = redis;
    p->vectors = vectors;
    p->vectors_arg = vectors_arg;
    p->interval_ms = interval_ms;
    p->pg_up = p->redis_up = p->vectors_up = -1;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    probe_once(p);
    if (pthread_create(&p->thread, NULL, probe_main, p) != 0) {
        pthread_mutex_destroy(&p->lock);
        pthread_cond_destroy(&p->cond);
        free(p);
        return -1;
    }
    *out = p;
    return 0;
}

void health_probe_stop(health_probe *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p);
}
