/* tier: what a tier of memoryd is to the rest of the server. Each tier
 * (entries/, global/, cache/, episodic/, ..., and the Access and Audit
 * services) exports one `const tier` descriptor: the gRPC services it
 * serves and the backends each needs (for health), its method table, and
 * how to open and free its state. main.c walks one table of descriptors:
 * adding a tier is its own folder plus one line there.
 *
 * The environment a tier opens in (tier_env) holds the shared backends,
 * the audit trail and the settings; a tier may offer something to the
 * tiers after it in the table through a field of the environment (the
 * cache tier's entity cache, used by GlobalMemory). */
#ifndef MEMORYD_TIER_TIER_H
#define MEMORYD_TIER_TIER_H

#include <stddef.h>

#include "service/audit/audit.h"
#include "service/auth/authn.h"
#include "service/core/config.h"
#include "service/health/health_probe.h"
#include "service/pii/pii_policy.h"
#include "service/rpc/rpc.h"
#include "service/store/apg.h"
#include "service/store/aredis.h"
#include "service/store/pg_pool.h"
#include "service/store/redis_pool.h"
#include "service/tier/tier_erase.h"
#include "service/tier/tier_route.h"

struct cache_records;

typedef struct tier_env {
    const config *cfg;   /* every flag (core/config.h) */
    pg_pool *pg;         /* PostgreSQL: always there */
    apg *pga;            /* PostgreSQL on the event loop (store/apg.h): always there */
    redis_pool *redis;   /* NULL: no Redis configured */
    aredis *redis_async; /* Redis on the event loop (store/aredis.h); NULL with redis */
    evloop *loop;        /* the event loop the backends' I/O runs on */
    authn *auth;         /* tokens, revocations */
    audit *audit;        /* the audit trail */
    pii_policy pii;      /* --pii-policy, for every write path */
    /* The most a List/Query answer may encode to, below the message limit
     * with room for the framing around the values (0 before tier_set_open:
     * TIER_DEFAULT_RESPONSE_BYTES). */
    size_t max_response_bytes;
    /* Offered by the cache tier when --cache-entities is on (NULL
     * otherwise): GlobalMemory.GetEntity's cache-aside (cache_records.h). */
    struct cache_records *entity_cache;
    /* Offered by the cache tier (always): the router's cache-aside over
     * Entries (RecentLookupQuery), which Entries' writes invalidate. */
    struct cache_records *entry_cache;
    /* Every tier of the table that keeps records (its tier.records, with
     * its state), in their order (tier_erase.h); filled as the tiers open,
     * so complete once the table is. */
    tier_eraser erasers[TIER_MAX_ERASERS];
    size_t nerasers;
    /* Every tier of the table the Router can reach (its tier.route, with
     * its state), in table order; filled as the tiers open. */
    tier_routable routes[TIER_MAX_ROUTES];
    size_t nroutes;
} tier_env;

/* The language texts are analyzed in (--text-language; "english" without
 * a config): lexical/lex_text.h's stemmer, PostgreSQL's text search
 * configuration of that name. Lives as long as env's config. */
static inline const char *tier_env_text_language(const tier_env *env) {
    const char *l = env->cfg ? env->cfg->text_language : NULL;
    return l && l[0] ? l : "english";
}

/* A gRPC service (or a health sub-service such as "memory.v1.Cache.L2")
 * a tier serves, and the backends it is SERVING only with. */
typedef struct tier_service {
    const char *name;
    unsigned needs; /* HEALTH_NEEDS_* (health_probe.h) */
} tier_service;

typedef struct tier {
    const char *name; /* "entries": logs */
    const tier_service *services;
    size_t nservices;
    const rpc_method *methods; /* registered with the tier's state as handler arg */
    size_t nmethods;
    /* Opens the tier's state in env (and may fill env's offers; env lives
     * as long as the tier set, so a state may keep a pointer to it). 0, or -1
     * with the reason in err; a state it stored in *state before failing
     * is then freed with free. */
    int (*open)(tier_env *env, void **state, char *err, size_t errlen);
    /* Frees the state after the server is gone; accepts NULL and a state
     * whose open failed half way. */
    void (*free)(void *state);
    /* For services needing HEALTH_NEEDS_PROBE: a backend only this tier
     * knows (Qdrant): 0 when it answers. NULL: no such backend. */
    int (*probe)(void *state);
    const char *probe_backend; /* its name in logs */
    /* The records it keeps, for Forget, Export and the retention sweeper
     * (tier_erase.h); NULL: it keeps none. */
    const tier_records *records;
    /* Its part of a routed query (tier_route.h); NULL: the Router does not
     * reach it. */
    const tier_route *route;
} tier;

#define TIER_COUNT(array) (sizeof(array) / sizeof((array)[0]))
/* A descriptor: `const tier x_tier = {TIER_FIELDS("x", services, methods,
 * x_open, x_free)};`, then .records if it keeps records, .route if the
 * Router reaches it, and .probe and .probe_backend if it has a backend of
 * its own. */
#define TIER_FIELDS(name_, services_, methods_, open_, free_)                                      \
    .name = (name_), .services = (services_), .nservices = TIER_COUNT(services_),                  \
    .methods = (methods_), .nmethods = TIER_COUNT(methods_), .open = (open_), .free = (free_)

/* A tier's zeroed state of size bytes for its open; NULL with "out of
 * memory" in err. */
void *tier_state_new(size_t size, char *err, size_t errlen);
/* For an open that fails for want of memory: "out of memory" in err; -1. */
int tier_oom(char *err, size_t errlen);

/* The most a List/Query answer may encode to when env does not say. */
#define TIER_DEFAULT_RESPONSE_BYTES ((size_t)3 << 20)

/* ---- the table main.c walks ---- */

typedef struct tier_set tier_set;

/* Opens tiers[0..n) in order in a copy of env the set keeps (with its
 * defaults filled in) and registers their methods on srv
 * (before it starts). On failure the tiers opened so far are freed and err
 * names the tier. On 0 *out is the caller's (tier_set_free after the
 * server is freed). */
int tier_set_open(const tier *const *tiers, size_t n, tier_env *env, rpc_server *srv,
                  tier_set **out, char *err, size_t errlen);
/* Frees the tiers in reverse order; accepts NULL. */
void tier_set_free(tier_set *s);

/* The health dependencies of every service of the set, for
 * health_probe_start: *deps is malloc'd (free it after the probe). */
int tier_set_health_deps(const tier_set *s, health_dep **deps, size_t *n);
/* 1 when a tier of the set serves service. */
int tier_set_serves(const tier_set *s, const char *service);

#endif
