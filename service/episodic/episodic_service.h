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

#include "service/tier/tier.h"

/* The tier: serves memory.v1.EpisodicMemory (needs PostgreSQL, and Qdrant
 * when --qdrant-url is set: its probe). Opens the embedded backend, or
 * Qdrant with the --qdrant-* flags; env->pii for payloads. The Router
 * reaches it with a VectorSearchQuery (episodic_search.c). */
extern const tier episodic_tier;

#endif
