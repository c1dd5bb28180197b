/* entries_service: the Entries tier (memory.v1.Entries,
 * protos/memory/v1/entries.proto) over entries_store. It validates every
 * request field (errors name the field), applies the token's namespace
 * globs, runs the PII policy on what is written, converts between protobuf
 * messages and store records (metadata Struct <-> JSON), maps store codes
 * to gRPC statuses and names every entry a call touched in the audit
 * trail. Write and DeleteEntry record their audit row inside the data's
 * transaction.
 *
 * Methods: Write, Read, List, Search, DeleteEntry, Stats, Append, Replace
 * (scope entries:read / entries:write) and PurgeExpired (scope admin).
 *
 * Decisions the protos leave open:
 * - DeleteEntry (like Write) answers PERMISSION_DENIED for an existing
 *   entry the caller may not modify (another owner without
 *   entries:write:all, or a label above clr), as common.proto's write
 *   diode says; NOT_FOUND means absent or expired. Write already reveals
 *   existence that way, so Delete hiding it would protect nothing.
 * - Two concurrent creates of one key are serialized by the database: the
 *   loser waits for the winner's commit and is then evaluated as an update
 *   (so with expected_version 0 it gets ABORTED, without it it replaces).
 * - Under the redact policy PII in a key is still rejected: a key names
 *   the entry and cannot be rewritten.
 * - Page tokens are keyset cursors (the last namespace and key) sealed to
 *   the caller and the request's filters (tier_page.h). */
#ifndef MEMORYD_ENTRIES_ENTRIES_SERVICE_H
#define MEMORYD_ENTRIES_ENTRIES_SERVICE_H

#include "service/tier/tier.h"

/* The tier: serves memory.v1.Entries (needs PostgreSQL). Opened with
 * env->pg, env->audit, env->pii and env->max_response_bytes (0: 3 MiB).
 * The Router reaches it with a RecentLookupQuery, through env->entry_cache
 * (entries_recent.c). */
extern const tier entries_tier;

#endif
