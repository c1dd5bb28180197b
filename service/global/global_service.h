/* global_service: the memory.v1.GlobalMemory gRPC service
 * (protos/memory/v1/global_memory.proto) over global_store. It validates
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

#include <stddef.h>

#include "service/audit/audit.h"
#include "service/cache/cache_aside.h"
#include "service/cache/cache_l2.h"
#include "service/rpc/rpc.h"
#include "service/store/pg_pool.h"

/* Zero fields take the default shown. */
typedef struct global_options {
    int redact_pii;            /* 0: PII is rejected (default); 1: redacted */
    int default_page_size;     /* QueryEntities / ListTasks page when 0 is asked (50) */
    int max_depth;             /* Traverse max_depth ceiling, 1..10 (10) */
    size_t max_response_bytes; /* encoded answer budget (3 MiB; keep it below the
                                * server's max message size) */
    int max_statement_ms;      /* statement_timeout for calls without deadline (30000) */
    /* GetEntity through this cache-aside L1 when set (borrowed): loads are
     * single-flight and tenant-wide, the read diode is applied to every
     * copy handed out; PutEntity and DeleteEntity drop the entity from this
     * replica's L1 and announce it to the others through entity_l2 (may be
     * NULL: no Redis, one replica). */
    cache_aside *entity_cache;
    cache_l2 *entity_l2;
} global_options;

typedef struct global_service global_service;

/* Registers the methods on srv (before rpc_server_start). pg and aud are
 * borrowed and must outlive the server; aud may be NULL (no audit rows).
 * o may be NULL. On 0 *out is owned by the caller: free it with
 * global_service_free after the server is freed. Returns -1 on a
 * registration error or out of memory. */
int global_register(rpc_server *srv, pg_pool *pg, audit *aud, const global_options *o,
                    global_service **out);

/* Accepts NULL. */
void global_service_free(global_service *s);

#endif
