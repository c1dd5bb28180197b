/* global_service: the GlobalMemory tier (memory.v1.GlobalMemory,
 * protos/memory/v1/global_memory.proto) over global_store. It validates
 * every request field (errors name the field), runs the PII policy on what
 * is written (ids, names, descriptions, JSON properties/provenance/result),
 * converts between protobuf messages and store records (Struct <-> JSON),
 * seals page tokens to the caller and the request's filters, maps store
 * codes to gRPC statuses and names every record a call touched in the
 * audit trail ("entity:<id>", "relationship:<source>/<type>/<target>",
 * "task:<id>"). Writes record their audit row inside the data's
 * transaction.
 *
 * Scopes: global:read (GetEntity, QueryEntities, Traverse, ListTasks) and
 * global:write (PutEntity, DeleteEntity, PutRelationship,
 * DeleteRelationship, RecordTask), with the `:all` breadths for other
 * principals' records.
 *
 * Decisions the protos leave open:
 * - Writing or deleting an existing record the caller may not modify
 *   answers PERMISSION_DENIED (as common.proto's write diode says), so a
 *   write reveals that an id is taken; reads never reveal hidden records.
 * - Under the redact policy PII in an id is still rejected: an id names the
 *   record and cannot be rewritten.
 * - Full-text search uses the 'simple' configuration: words are lower-cased,
 *   not stemmed, no stop words (agents write in every language).
 * - Traverse.truncated is also set when the edges among the returned
 *   entities did not fit the answer (max_response_bytes). */
#ifndef MEMORYD_GLOBAL_GLOBAL_SERVICE_H
#define MEMORYD_GLOBAL_GLOBAL_SERVICE_H

#include "memory/v1/router.pb-c.h"
#include "service/tier/tier.h"
#include "service/tier/tier_ctx.h"

/* The tier: serves memory.v1.GlobalMemory (needs PostgreSQL). Opened with
 * env->pg, env->audit, env->pii, env->max_response_bytes (0: 3 MiB),
 * cfg->traverse_max_depth, and env->entity_cache when the cache tier
 * offers one (GetEntity then answers through it: loads are single-flight
 * and tenant-wide, the read diode is applied to every copy handed out,
 * PutEntity and DeleteEntity invalidate every replica). */
extern const tier global_tier;

/* ---- GlobalMemory's part of a routed query (router/, through
 * tier_env.global) ----
 *
 * A router.proto GraphQuery run as GlobalMemory runs its own queries (the
 * same statements, the same read diode in them and on every row): an
 * entity query (type, predicates, full text; best rank first with a text
 * query, else by id), or, with start_id, a traversal whose entities are
 * then filtered by those criteria (by depth, then id). */
struct global_service;
typedef struct global_graph global_graph;

/* Checks q (errors name prefix + the field: "hybrid.graph_query.type")
 * and builds the query for at most limit entities in c (a context of tier
 * "global" in the call's arena); done(arg, rc) runs once on the loop
 * thread after global_graph_submit. GRPC_STATUS_OK with *out, or the
 * call's error status (set on call). */
grpc_status_code global_graph_prepare(struct global_service *svc, rpc_call *call,
                                      const char *prefix, const Memory__V1__GraphQuery *q,
                                      int limit, tier_ctx *c, void (*done)(void *arg, int rc),
                                      void *arg, global_graph **out);
/* Sends the query on the event loop. */
void global_graph_submit(global_graph *g);
/* Ends it with STATUS_ECANCELLED unless it has ended (its statement is
 * cancelled in PostgreSQL); any thread. */
void global_graph_cancel(global_graph *g);
/* After done(STATUS_OK): the entities found, best first, rendered into a
 * (*ents), with their depth from start_id (0 without a traversal) and
 * score: the full-text rank with a text query, else 1 / (1 + depth).
 * Returns how many, or -1 when out of memory. */
typedef struct global_graph_hit {
    Memory__V1__Entity *entity;
    int depth;
    double score;
} global_graph_hit;
long global_graph_hits(global_graph *g, arena *a, global_graph_hit **hits);

#endif
