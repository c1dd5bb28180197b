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

#include "memory/v1/router.pb-c.h"
#include "service/tier/tier.h"
#include "service/tier/tier_ctx.h"

/* The tier: serves memory.v1.Entries (needs PostgreSQL). Opened with
 * env->pg, env->audit, env->pii and env->max_response_bytes (0: 3 MiB). */
extern const tier entries_tier;

/* ---- Entries' part of a routed query (router/, through tier_env.entries)
 * ----
 *
 * A router.proto RecentLookupQuery: one entry, cache-aside. This replica's
 * L1 first, then L2 (Redis), then PostgreSQL, whose answer fills both
 * (cache_records.h: single flight, tenant-wide copies with the read diode
 * applied to each one handed out, dropped on every replica by every write
 * to the entry). An entry found nowhere, or hidden from the caller, is no
 * result (not NOT_FOUND). */
struct entries_service;
typedef struct entries_lookup entries_lookup;

/* Where a lookup's answer came from. */
#define ENTRIES_FROM_L1 1    /* this replica's L1 (or a concurrent lookup's load) */
#define ENTRIES_FROM_L2 2    /* Redis */
#define ENTRIES_FROM_STORE 3 /* PostgreSQL */

/* Checks q (errors name prefix + the field; the namespace must be within
 * the token's ns claim: PERMISSION_DENIED) for the caller of c (a context
 * of tier "entries" in the call's arena, whose deadline the lookup keeps).
 * done(arg, rc, from) runs once after entries_lookup_start: STATUS_OK
 * (entries_lookup_entry then has the entry, or NULL), or the failure with
 * c->err, from saying which level answered or failed. */
grpc_status_code entries_lookup_prepare(struct entries_service *svc, rpc_call *call,
                                        const char *prefix, const Memory__V1__RecentLookupQuery *q,
                                        tier_ctx *c, void (*done)(void *arg, int rc, int from),
                                        void *arg, entries_lookup **out);
/* Starts it: done may run before this returns (an L1 hit). */
void entries_lookup_start(entries_lookup *lk);
/* The client is gone (any thread): the lookup ends CANCELLED, or done has
 * run already. */
void entries_lookup_cancel(entries_lookup *lk);
/* After done(STATUS_OK): the entry (in c's arena), NULL when none. */
Memory__V1__Entry *entries_lookup_entry(const entries_lookup *lk);

#endif
