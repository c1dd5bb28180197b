/* tier_route: a tier's part of a routed query (memory.v1.Router,
 * protos/memory/v1/router.proto). A tier the Router can reach declares
 * one in its descriptor (tier.route): which of RouterQuery's queries it
 * answers, the read scope a caller needs to see its part, and how a part
 * is prepared, started and cancelled. tier_set_open collects them into
 * tier_env.routes; the Router walks those and knows no tier by name.
 *
 * A part's life, for one call:
 *   prepare  checks the query (errors name prefix + the field, as the
 *            tier's own method would) and builds the part in c->ar;
 *   start    runs it: done(arg, rc) comes exactly once, on any thread
 *            (before start returns, too), with the answer filled when rc is
 *            STATUS_OK, or c->err saying what failed;
 *   cancel   any thread, any time after prepare, also after done (the
 *            part then ends STATUS_ECANCELLED, or has ended); it may run
 *            done before it returns.
 * The part's memory (c->ar, the answer) lives until the call is
 * destroyed. The read diode is the tier's, in its backend query and on
 * every record, with c's principal and read breadth (a recall narrows
 * both to one user). */
#ifndef MEMORYD_TIER_TIER_ROUTE_H
#define MEMORYD_TIER_TIER_ROUTE_H

#include <stddef.h>

#include "memory/v1/router.pb-c.h"
#include "service/rpc/rpc.h"
#include "service/tier/tier_ctx.h"

/* The query a part answers: one of RouterQuery's (a hybrid and a recall
 * run a VECTOR and a GRAPH part). */
typedef enum tier_route_kind {
    TIER_ROUTE_VECTOR = 0, /* Memory__V1__VectorSearchQuery */
    TIER_ROUTE_GRAPH = 1,  /* Memory__V1__GraphQuery */
    TIER_ROUTE_RECENT = 2, /* Memory__V1__RecentLookupQuery */
    TIER_ROUTE_KINDS = 3
} tier_route_kind;

/* The most levels a part reports (the recent lookup: L1, L2, Entries). */
#define TIER_ROUTE_LEVELS 3

/* What a part answered, filled by the part before done(STATUS_OK). */
typedef struct tier_route_answer {
    Memory__V1__RouterResult **results; /* best first, in c->ar (tier_route_result) */
    size_t n;
    /* What answered: the route's tier, or the level that did. */
    Memory__V1__Tier tier;
    /* The levels the part passed, the answering one (tier) among them,
     * each with its outcome (the answering one's is the part's); 0: tier
     * alone. */
    int nlevels;
    Memory__V1__Tier level_tier[TIER_ROUTE_LEVELS];
    Memory__V1__TierOutcome level_outcome[TIER_ROUTE_LEVELS];
    /* Answered in part (a hybrid search without its vector part): why. */
    const char *partial;
    /* Records for the call's audit row ("entity:ada"), in c->ar: the
     * Router names them once every part has ended (parts run on several
     * threads at once). A part may instead name its records itself when
     * it is the only one that does (the vector part, with Search's code). */
    const char **targets;
    size_t ntargets;
} tier_route_answer;

typedef void (*tier_route_done)(void *arg, int rc);

typedef struct tier_route {
    tier_route_kind kind;
    Memory__V1__Tier tier; /* its reports' tier until it answers */
    const char *label;     /* "episodic memory": the Router's messages */
    const char *ctx_tier;  /* its contexts' tier name ("episodic"): logs, metrics */
    /* The scope that lets a caller see the part ("episodic:read"); a
     * recall for another user needs its `:all` breadth. */
    const char *read_scope;
    /* prepare and start block (a backend behind a blocking client): the
     * Router calls both on a task-pool thread, and a cancel reaches the
     * part through c->cancel alone (cancel is not called). */
    int blocking;
    /* query is the kind's message; the part reads at most limit records.
     * GRPC_STATUS_OK with *part, or the call's status with its message
     * set (the request's fault: INVALID_ARGUMENT, NOT_FOUND, ...; or the
     * backend's, when a blocking part looks something up). */
    grpc_status_code (*prepare)(void *state, rpc_call *call, const char *prefix,
                                const ProtobufCMessage *query, int limit, tier_ctx *c,
                                tier_route_answer *ans, tier_route_done done, void *arg,
                                void **part);
    void (*start)(void *part);
    void (*cancel)(void *part); /* NULL: c->cancel is enough (blocking parts) */
} tier_route;

/* A tier's route with its open state (tier_env.routes). */
typedef struct tier_routable {
    const tier_route *route;
    void *state;
    const char *name; /* the tier's name, for logs */
} tier_routable;

/* The most routable tiers one table may hold. */
#define TIER_MAX_ROUTES 8

/* A result of tier (and also, 0: none) with score, its record unset, in
 * a; NULL when out of memory. */
Memory__V1__RouterResult *tier_route_result(arena *a, Memory__V1__Tier tier, Memory__V1__Tier also,
                                            double score);

#endif
