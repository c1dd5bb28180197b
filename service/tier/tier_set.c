/* tier_set: opening, registering and freeing the tier table; see tier.h. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/log.h"
#include "service/tier/tier.h"

struct tier_set {
    tier_env env; /* what the tiers opened in; their states may point at it */
    const tier *const *tiers;
    void **states;
    size_t n; /* opened */
};

int tier_oom(char *err, size_t errlen) {
    snprintf(err, errlen, "out of memory");
    return -1;
}

void *tier_state_new(size_t size, char *err, size_t errlen) {
    void *state = calloc(1, size);
    if (!state) tier_oom(err, errlen);
    return state;
}

void tier_set_free(tier_set *s) {
    if (!s) return;
    for (size_t i = s->n; i-- > 0;)
        if (s->tiers[i]->free) s->tiers[i]->free(s->states[i]);
    free(s->states);
    free(s);
}

/* Tier t's records, open in state, into env's erasers in their order
 * (after those of the same order: the table's order breaks ties). */
static int add_eraser(tier_env *env, const tier *t, void *state, char *err, size_t errlen) {
    const tier_records *r = t->records;
    if (env->nerasers >= TIER_MAX_ERASERS) {
        snprintf(err, errlen, "too many tiers keep records (TIER_MAX_ERASERS is %d)",
                 TIER_MAX_ERASERS);
        return -1;
    }
    assert(r->erase);
    tier_eraser e = {
        .r = r, .state = state, .name = t->name, .tier = r->tier_of ? r->tier_of(state) : r->tier};
    size_t at = env->nerasers;
    while (at > 0 && env->erasers[at - 1].r->order > r->order) {
        env->erasers[at] = env->erasers[at - 1];
        at--;
    }
    env->erasers[at] = e;
    env->nerasers++;
    return 0;
}

/* Tier t's route, open in state, into env's routes (table order). */
static int add_route(tier_env *env, const tier *t, void *state, char *err, size_t errlen) {
    if (env->nroutes >= TIER_MAX_ROUTES) {
        snprintf(err, errlen, "too many tiers are routable (TIER_MAX_ROUTES is %d)",
                 TIER_MAX_ROUTES);
        return -1;
    }
    const tier_route *r = t->route;
    assert(r->prepare && r->start && (r->blocking || r->cancel));
    env->routes[env->nroutes++] = (tier_routable){.route = r, .state = state, .name = t->name};
    return 0;
}

int tier_set_open(const tier *const *tiers, size_t n, tier_env *env, rpc_server *srv,
                  tier_set **out, char *err, size_t errlen) {
    tier_set *s = calloc(1, sizeof *s);
    if (!s || !(s->states = calloc(n ? n : 1, sizeof *s->states))) {
        free(s);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    s->tiers = tiers;
    s->env = *env;
    env = &s->env;
    if (!env->max_response_bytes) env->max_response_bytes = TIER_DEFAULT_RESPONSE_BYTES;
    for (size_t i = 0; i < n; i++) {
        const tier *t = tiers[i];
        char why[400] = "";
        s->n = i + 1; /* freed from here on, whatever open left in states[i] */
        if (t->open && t->open(env, &s->states[i], why, sizeof why) != 0) {
            snprintf(err, errlen, "the %s tier: %s", t->name, why[0] ? why : "cannot start");
            tier_set_free(s);
            return -1;
        }
        if ((t->records && add_eraser(env, t, s->states[i], why, sizeof why) != 0) ||
            (t->route && add_route(env, t, s->states[i], why, sizeof why) != 0)) {
            snprintf(err, errlen, "the %s tier: %s", t->name, why);
            tier_set_free(s);
            return -1;
        }
        if (rpc_server_add_methods(srv, t->methods, t->nmethods, s->states[i]) != 0) {
            snprintf(err, errlen, "the %s tier: cannot register its methods", t->name);
            tier_set_free(s);
            return -1;
        }
        log_fields(LOG_DEBUG, "tier open", LOG_F_STR, "tier", t->name, LOG_F_INT, "methods",
                   (int64_t)t->nmethods, LOG_F_END);
    }
    *out = s;
    return 0;
}

int tier_set_health_deps(const tier_set *s, health_dep **deps, size_t *n) {
    size_t total = 0;
    for (size_t i = 0; i < s->n; i++) total += s->tiers[i]->nservices;
    health_dep *d = calloc(total ? total : 1, sizeof *d);
    if (!d) return -1;
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        const tier *t = s->tiers[i];
        for (size_t j = 0; j < t->nservices; j++, k++) {
            d[k].service = t->services[j].name;
            d[k].needs = t->services[j].needs;
            if ((d[k].needs & HEALTH_NEEDS_PROBE) && t->probe) {
                d[k].backend = t->probe_backend;
                d[k].probe = t->probe;
                d[k].probe_arg = s->states[i];
            }
        }
    }
    *deps = d;
    *n = total;
    return 0;
}

int tier_set_serves(const tier_set *s, const char *service) {
    for (size_t i = 0; i < s->n; i++)
        for (size_t j = 0; j < s->tiers[i]->nservices; j++)
            if (strcmp(s->tiers[i]->services[j].name, service) == 0) return 1;
    return 0;
}
