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

#include "service/tier/tier.h"

/* The tier: serves memory.v1.GlobalMemory (needs PostgreSQL). Opened with
 * env->pg, env->audit, env->pii, env->max_response_bytes (0: 3 MiB),
 * cfg->traverse_max_depth, and env->entity_cache when the cache tier
 * offers one (GetEntity then answers through it: loads are single-flight
 * and tenant-wide, the read diode is applied to every copy handed out,
 * PutEntity and DeleteEntity invalidate every replica). The Router
 * reaches it with a GraphQuery (global_router.c). */
extern const tier global_tier;

#endif
