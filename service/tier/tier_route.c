/* tier_route: what the tiers' parts of a routed query share; see
 * tier_route.h. */
#include "service/tier/tier_route.h"

Memory__V1__RouterResult *tier_route_result(arena *a, Memory__V1__Tier tier, Memory__V1__Tier also,
                                            double score) {
    Memory__V1__RouterResult *r = arena_message(a, &memory__v1__router_result__descriptor);
    Memory__V1__Tier *t = r ? arena_alloc(a, 2 * sizeof *t) : NULL;
    if (!t) return NULL;
    t[0] = tier;
    t[1] = also;
    r->tiers = t;
    r->n_tiers = also ? 2 : 1;
    r->tier = tier;
    r->score = score;
    return r;
}
