/* router_internal: what the Router's files share (router_service.c: the
 * requests and the tier; router_run.c: a call's run of its parts;
 * router_recall.c: a recall's words). */
#ifndef MEMORYD_ROUTER_ROUTER_INTERNAL_H
#define MEMORYD_ROUTER_ROUTER_INTERNAL_H

#include "memory/v1/router.pb-c.h"
#include "service/router/router_service.h"

typedef struct router_service {
    const tier_env *env; /* its routes (complete once the table has opened) */
    int64_t default_deadline_ms;
} router_service;

/* A request of either method, normalised (the two messages have the same
 * fields): the query of each kind it has (NULL: none) and the prefix its
 * errors name fields with. */
typedef struct router_query {
    const ProtobufCMessage *part[TIER_ROUTE_KINDS];
    const char *prefix[TIER_ROUTE_KINDS];
    int hybrid; /* a vector and a graph part, fused */
    int limit;
    /* A recall: a hybrid whose parts read only this user's records
     * ("" = the caller's); no graph part when its text has no words. */
    int recall;
    const char *recall_user;
    /* Why a part of the query is reported SKIPPED instead of run (the
     * token lacks its tier's scope; a recall's text has no words for the
     * graph); NULL: it runs when it is in the query. */
    const char *skip[TIER_ROUTE_KINDS];
} router_query;

/* The route that answers kind in env (the first in table order), or
 * NULL when no tier does. */
const tier_routable *router_route_of(const tier_env *env, tier_route_kind kind);

/* Runs q's parts (each kind q has is answered by a route of svc's env,
 * the token may read every part not skipped, and one part at least runs).
 * For Query, resp is filled; a stream (resp NULL) gets each part's
 * message as it ends. RPC_PENDING (the run ends the call), or the call's
 * status when nothing runs. */
grpc_status_code router_run(rpc_call *call, router_service *svc, const router_query *q,
                            Memory__V1__RouterQueryResponse *resp);

/* A recall's graph part: the words of text, any of them, in web-search
 * syntax ("a or b"), within RECALL_QUERY_MAX bytes, in a; "" when the text
 * has none, NULL when out of memory. */
#define RECALL_QUERY_MAX 1024
const char *router_recall_words(arena *a, const char *text);

#endif
