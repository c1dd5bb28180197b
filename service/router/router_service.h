/* router_service: the Router tier (memory.v1.Router, protos/memory/v1/
 * router.proto): one query answered by the tiers it needs, in parallel,
 * within the caller's budget. It knows no tier by name: each RouterQuery
 * kind (vector search, graph query, recent lookup) is answered by the
 * route a tier declares (tier.route, tier_route.h), found in
 * tier_env.routes; a hybrid or a recall fuses a vector and a graph part.
 *
 * A call is a run (router_run.c) of its parts. Each part obeys the run's
 * deadline itself (PostgreSQL statements are cancelled, Qdrant requests
 * end), so the run always hears from every part by then; the last part to
 * end answers the call (Query) or ends the stream (QueryStream, which
 * sends each part's message as soon as that part ends). A client's cancel
 * reaches every part.
 *
 * Scopes: router:query, plus each part's tier read scope (router.proto). */
#ifndef MEMORYD_ROUTER_ROUTER_SERVICE_H
#define MEMORYD_ROUTER_ROUTER_SERVICE_H

#include "service/tier/tier.h"

/* The tier: serves memory.v1.Router (needs PostgreSQL). Reads the routes
 * of the whole table when a query comes, wherever it stands in it. */
extern const tier router_tier;

#endif
