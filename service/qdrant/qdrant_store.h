/* qdrant_store: the vector-store backend over Qdrant's REST API
 * (libcurl), used when a Qdrant URL is configured. Collections live in the
 * episodic catalog (PostgreSQL), each backed by one Qdrant collection named
 * prefix + hex(SHA-256(tenant))[0..16) + "_" + name, created and dropped
 * inside the catalog's transaction. Points carry their memoryd metadata in
 * the payload (qdrant_json.h has the layout); every read pushes the read
 * diode into Qdrant's filter and checks it again on the way out; writes
 * read the existing points first and stamp them through vs_stamp.
 *
 * Qdrant has no transactions: an upsert or delete that fails half way may
 * have written part of its batch (the API documents upserts as
 * idempotent), and a point changed between our read and our write is not
 * seen by the write diode of that call. */
#ifndef MEMORYD_QDRANT_QDRANT_STORE_H
#define MEMORYD_QDRANT_QDRANT_STORE_H

#include <stddef.h>

#include "service/store/pg_pool.h"
#include "service/vstore/vstore.h"

typedef struct qdrant_options {
    const char *url;               /* http(s)://host:port[/path], required */
    const char *api_key;           /* sent as `api-key`; NULL or "" = none; never logged */
    const char *collection_prefix; /* NULL = "memoryd_"; [A-Za-z0-9_-]{0,64} */
    int timeout_ms;                /* bound for calls without deadline; <= 0: 10000 */
    int connect_timeout_ms;        /* <= 0: 2000 */
} qdrant_options;

/* Opens the backend: strings in o are copied, pg is borrowed and must
 * outlive the store. Asks Qdrant for its version (GET /) and logs it; when
 * Qdrant does not answer, logs a warning and succeeds anyway: every later
 * call tries again first and fails with STATUS_EUNAVAILABLE until Qdrant
 * answers. Returns 0 with *out owned by the caller (vstore_free), or -1
 * with the reason in err (bad options, out of memory) and *out untouched. */
int qdrant_store_open(pg_pool *pg, const qdrant_options *o, vstore **out, char *err, size_t errlen);

/* The Qdrant collection name for (tenant, name) into out (at least
 * EPISODIC_QDRANT_NAME_MAX bytes); prefix NULL = "memoryd_". Exposed for
 * tests and operators. Returns 0, or -1 when the result would not fit. */
#define EPISODIC_QDRANT_NAME_MAX 160
int qdrant_store_collection_name(const char *prefix, const char *tenant, const char *name,
                                 char *out);

#endif
