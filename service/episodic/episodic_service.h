/* episodic_service: the memory.v1.EpisodicMemory gRPC service
 * (protos/memory/v1/episodic_memory.proto) over a vector store (vstore.h,
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

#include "service/audit/audit.h"
#include "service/episodic/vstore.h"
#include "service/rpc/rpc.h"

typedef struct episodic_options {
    int redact_pii; /* 0: PII in payloads is rejected (default); 1: redacted */
} episodic_options;

typedef struct episodic_service episodic_service;

/* Registers the methods on srv (before rpc_server_start). vs is borrowed
 * and must outlive the server; aud may be NULL; o may be NULL. On 0 *out
 * is owned by the caller (episodic_service_free after the server is
 * freed). -1 on a registration error or out of memory. */
int episodic_register(rpc_server *srv, vstore *vs, audit *aud, const episodic_options *o,
                      episodic_service **out);

/* Accepts NULL. */
void episodic_service_free(episodic_service *s);

#endif
