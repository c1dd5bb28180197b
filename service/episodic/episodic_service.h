/* episodic_service: the episodic tier (memory.v1.EpisodicMemory,
 * protos/memory/v1/episodic_memory.proto) over a vector store (vstore.h,
 * either backend). It validates every request (vector lengths against the
 * collection, finite components, filters, ids, sizes; errors name the
 * field), normalizes vectors of COSINE collections, runs the PII policy on
 * payloads, converts Struct payloads to JSON and back, seals
 * ListCollections page tokens to the caller, maps status codes to gRPC
 * statuses and names what a call touched in the audit trail
 * ("collection:<name>", "point:<collection>/<id>").
 *
 * Scopes: episodic:read (GetCollection, ListCollections, Search,
 * GetPoints, Count), episodic:write (CreateCollection, Upsert,
 * DeletePoints) and episodic:write:all (DeleteCollection: it removes every
 * principal's points), with the `:all` breadths for other principals'
 * points. */
#ifndef MEMORYD_EPISODIC_EPISODIC_SERVICE_H
#define MEMORYD_EPISODIC_EPISODIC_SERVICE_H

#include "memory/v1/episodic_memory.pb-c.h"
#include "memory/v1/router.pb-c.h"
#include "service/tier/tier.h"
#include "service/tier/tier_ctx.h"

/* The tier: serves memory.v1.EpisodicMemory (needs PostgreSQL, and Qdrant
 * when --qdrant-url is set: its probe). Opens the embedded backend, or
 * Qdrant with the --qdrant-* flags; env->pii for payloads. */
extern const tier episodic_tier;

/* ---- EpisodicMemory's part of a routed query (router/, through
 * tier_env.episodic) ----
 *
 * A router.proto VectorSearchQuery run as EpisodicMemory.Search runs (the
 * same checks, the same backend call with the read diode inside it). Both
 * block: task-pool threads only. */
struct episodic_service;
typedef struct episodic_search episodic_search;

/* Checks q (errors name prefix + the field: "hybrid.vector_search.vector")
 * and looks up its collection with c (a context of tier "episodic" in the
 * call's arena, whose deadline and cancel token the search obeys), for at
 * most limit points. GRPC_STATUS_OK with *out, or the call's error status
 * (set on call): INVALID_ARGUMENT, NOT_FOUND for an unknown collection,
 * or the catalog's failure (UNAVAILABLE, DEADLINE_EXCEEDED, ...). */
grpc_status_code episodic_search_prepare(struct episodic_service *svc, rpc_call *call,
                                         const char *prefix, const Memory__V1__VectorSearchQuery *q,
                                         int limit, tier_ctx *c, episodic_search **out);
/* Runs the search: STATUS_OK with the points best first (in c's arena,
 * each named in the call's audit row), or a code with c->err. */
int episodic_search_run(episodic_search *s, Memory__V1__ScoredPoint ***points, size_t *n);
/* What the scores mean, as a memory.v1.Distance: the collection's
 * (EUCLID scores are distances), or DOT (higher is better) for a lexical
 * search's BM25 scores and a hybrid's fused ones. */
int episodic_search_distance(const episodic_search *s);
/* After a run: why a hybrid answered with its lexical part alone (its
 * vector part failed or ran out of time), or NULL. */
const char *episodic_search_partial(const episodic_search *s);

#endif
