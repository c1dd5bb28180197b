/* router_service: the Router tier (memory.v1.Router, protos/memory/v1/
 * router.proto): one query answered by the tiers it needs, through their
 * own functions (GlobalMemory's and EpisodicMemory's parts, offered in
 * tier_env), in parallel, within the caller's budget.
 *
 * A call is a run (router_run.c) of up to two parts: the graph part on the
 * event loop (GlobalMemory's statements) and the vector part on a task-pool
 * thread (EpisodicMemory's backend call, which blocks). Each part obeys the
 * run's deadline itself (PostgreSQL statements are cancelled, Qdrant
 * requests end), so the run always hears from every part by then; the last
 * part to end answers the call (Query) or ends the stream (QueryStream,
 * which sends each part's message as soon as that part ends). A client's
 * cancel fires both parts' cancels.
 *
 * Scopes: router:query, plus each part's tier read scope (router.proto). */
#ifndef MEMORYD_ROUTER_ROUTER_SERVICE_H
#define MEMORYD_ROUTER_ROUTER_SERVICE_H

#include "service/tier/tier.h"

/* The tier: serves memory.v1.Router (needs PostgreSQL). Must open after
 * GlobalMemory and EpisodicMemory (env->global, env->episodic). */
extern const tier router_tier;

#endif
