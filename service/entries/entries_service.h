/* entries_service: the memory.v1.Entries gRPC service
 * (protos/memory/v1/entries.proto) over entries_store. It validates every
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
 * - Page tokens are keyset cursors sealed with a SHA-256 digest of the
 *   caller and the patterns (not a secret MAC): see entries_token.h. */
#ifndef MEMORYD_ENTRIES_ENTRIES_SERVICE_H
#define MEMORYD_ENTRIES_ENTRIES_SERVICE_H

#include <stddef.h>

#include "service/audit/audit.h"
#include "service/rpc/rpc.h"
#include "service/store/pg_pool.h"

/* What a write containing PII gets when the token lacks `pii:write`. */
typedef enum entries_pii_policy {
    ENTRIES_PII_REJECT = 0, /* INVALID_ARGUMENT naming kinds and paths; nothing stored */
    ENTRIES_PII_REDACT = 1, /* the PII is replaced by a marker and the write goes on */
} entries_pii_policy;

/* Zero fields take the default shown. */
typedef struct entries_options {
    entries_pii_policy pii_policy; /* ENTRIES_PII_REJECT */
    int default_page_size;         /* List page and Search limit when 0 is asked (50) */
    int max_page_size;             /* List pages are capped here (1000) */
    size_t max_response_bytes;     /* encoded size of a List/Search answer (3 MiB; keep
                                    * it below the server's max message size); at
                                    * least one entry is always returned */
    int max_statement_ms;          /* statement_timeout for calls without deadline (30000) */
} entries_options;

typedef struct entries_service entries_service;

/* Registers the methods on srv (before rpc_server_start). pg and aud are
 * borrowed and must outlive the server; aud may be NULL (no audit rows,
 * for tests). o may be NULL (defaults). On 0 *out is owned by the caller:
 * free it with entries_service_free after the server is freed. Returns -1
 * on a registration error or out of memory (nothing to free then). */
int entries_register(rpc_server *srv, pg_pool *pg, audit *aud, const entries_options *o,
                     entries_service **out);

/* Accepts NULL. */
void entries_service_free(entries_service *s);

/* "reject" / "redact" -> policy. Returns 0, or -1 for anything else. */
int entries_pii_policy_parse(const char *name, entries_pii_policy *out);

#endif
