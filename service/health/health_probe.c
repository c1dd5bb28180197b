/* health_probe: the dependency table and the probe loop. */
#include "service/health/health_probe.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/core/log.h"
#include "service/rpc/rpc.h"

/* Every server has these, whatever its tiers. */
static const health_dep builtin[] = {
    {"", HEALTH_NEEDS_PG, NULL, NULL, NULL}, /* the server as a whole */
    {"grpc.health.v1.Health", 0, NULL, NULL, NULL},
};

struct health_probe {
    health *h;
    pg_pool *pg;
    redis_pool *redis;
    health_dep *deps;
    int *probe_up; /* per dep with a probe: last seen, -1 before the first */
    size_t ndeps;
    int interval_ms;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stop;
    int pg_up, redis_up; /* last seen, -1 before the first probe */
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
    p->pg_up = pg_up;
    p->redis_up = redis_up;
    for (size_t i = 0; i < p->ndeps; i++) {
        const health_dep *d = &p->deps[i];
        int probe_up = 1;
        if ((d->needs & HEALTH_NEEDS_PROBE) && d->probe) {
            probe_up = d->probe(d->probe_arg) == 0;
            if (probe_up != p->probe_up[i] && p->probe_up[i] != -1)
                log_fields(probe_up ? LOG_INFO : LOG_WARN,
                           probe_up ? "backend is back" : "backend is down", LOG_F_STR, "backend",
                           d->backend ? d->backend : "?", LOG_F_STR, "service", d->service,
                           LOG_F_END);
            p->probe_up[i] = probe_up;
        }
        int ok = (!(d->needs & HEALTH_NEEDS_PG) || pg_up) &&
                 (!(d->needs & HEALTH_NEEDS_REDIS) || redis_up) && probe_up;
        health_set(p->h, d->service, ok ? HEALTH_SERVING : HEALTH_NOT_SERVING);
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

int health_probe_start(health *h, pg_pool *pg, redis_pool *redis, const health_dep *deps, size_t n,
                       int interval_ms, health_probe **out) {
    size_t nb = sizeof builtin / sizeof builtin[0];
    health_probe *p = calloc(1, sizeof *p);
    if (!p || !(p->deps = calloc(nb + n, sizeof *p->deps)) ||
        !(p->probe_up = calloc(nb + n, sizeof *p->probe_up))) {
        if (p) free(p->deps);
        free(p);
        return -1;
    }
    memcpy(p->deps, builtin, sizeof builtin);
    if (n) memcpy(p->deps + nb, deps, n * sizeof *deps);
    p->ndeps = nb + n;
    for (size_t i = 0; i < p->ndeps; i++) p->probe_up[i] = -1;
    p->h = h;
    p->pg = pg;
    p->redis = redis;
    p->interval_ms = interval_ms;
    p->pg_up = p->redis_up = -1;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    probe_once(p);
    if (pthread_create(&p->thread, NULL, probe_main, p) != 0) {
        pthread_mutex_destroy(&p->lock);
        pthread_cond_destroy(&p->cond);
        free(p->probe_up);
        free(p->deps);
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
    free(p->probe_up);
    free(p->deps);
    free(p);
}
