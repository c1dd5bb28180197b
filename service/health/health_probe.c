/* health_probe: the dependency table and the probe loop. */
#include "service/health/health_probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/log.h"
#include "service/core/worker.h"
#include "service/rpc/rpc.h"

/* Every server has these, whatever its tiers. */
static const health_dep builtin[] = {
    {"", HEALTH_NEEDS_PG, NULL, NULL, NULL}, /* the server as a whole */
    {"grpc.health.v1.Health", 0, NULL, NULL, NULL},
};

struct health_probe {
    health *h;
    apg *pg;
    aredis *redis;
    health_dep *deps;
    int *probe_up; /* per dep with a probe: last seen, -1 before the first */
    size_t ndeps;
    int interval_ms;
    worker *thread;
    int pg_up, redis_up; /* last seen, -1 before the first probe */
};

/* Records what a probe of backend saw, logging a change ("redis is down",
 * "qdrant is back") with the service that needs it (NULL: shared by several). */
static void note(const char *backend, const char *service, int up, int *last) {
    if (up != *last && *last != -1) {
        log_level level = up ? LOG_INFO : LOG_WARN;
        char msg[128];
        snprintf(msg, sizeof msg, "%s is %s", backend, up ? "back" : "down");
        if (service) log_fields(level, msg, LOG_F_STR, "service", service, LOG_F_END);
        else log_msg(level, "%s", msg);
    }
    *last = up;
}

static void probe_once(health_probe *p) {
    int64_t deadline = rpc_now_ms() + (p->interval_ms < 1000 ? 1000 : p->interval_ms);
    int pg_up = apg_ping(p->pg, deadline) == 0;
    int redis_up = p->redis && aredis_ping(p->redis, deadline) == 0;
    note("postgres", NULL, pg_up, &p->pg_up);
    if (p->redis) note("redis", NULL, redis_up, &p->redis_up);
    for (size_t i = 0; i < p->ndeps; i++) {
        const health_dep *d = &p->deps[i];
        int probe_up = 1;
        if ((d->needs & HEALTH_NEEDS_PROBE) && d->probe) {
            probe_up = d->probe(d->probe_arg) == 0;
            note(d->backend ? d->backend : "?", d->service, probe_up, &p->probe_up[i]);
        }
        int ok = (!(d->needs & HEALTH_NEEDS_PG) || pg_up) &&
                 (!(d->needs & HEALTH_NEEDS_REDIS) || redis_up) && probe_up;
        health_set(p->h, d->service, ok ? HEALTH_SERVING : HEALTH_NOT_SERVING);
    }
}

static void probe_main(worker *w, void *arg) {
    health_probe *p = arg;
    while (!worker_nap(w, p->interval_ms)) probe_once(p);
}

int health_probe_start(health *h, apg *pg, aredis *redis, const health_dep *deps, size_t n,
                       int interval_ms, health_probe **out) {
    size_t nb = sizeof builtin / sizeof builtin[0];
    health_probe *p = calloc(1, sizeof *p);
    if (!p) return -1;
    if (!(p->deps = calloc(nb + n, sizeof *p->deps)) ||
        !(p->probe_up = calloc(nb + n, sizeof *p->probe_up)))
        return health_probe_stop(p), -1;
    memcpy(p->deps, builtin, sizeof builtin);
    if (n) memcpy(p->deps + nb, deps, n * sizeof *deps);
    p->ndeps = nb + n;
    for (size_t i = 0; i < p->ndeps; i++) p->probe_up[i] = -1;
    p->h = h;
    p->pg = pg;
    p->redis = redis;
    p->interval_ms = interval_ms;
    p->pg_up = p->redis_up = -1;
    probe_once(p);
    if (worker_start(probe_main, p, &p->thread) != 0) return health_probe_stop(p), -1;
    *out = p;
    return 0;
}

void health_probe_stop(health_probe *p) {
    if (!p) return;
    worker_stop(p->thread, NULL);
    free(p->probe_up);
    free(p->deps);
    free(p);
}
