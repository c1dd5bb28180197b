/* entries_store_internal: what entries_store.c (rows, globs, values),
 * entries_store_read.c and entries_store_write.c share. Not for other
 * modules. */
#ifndef MEMORYD_ENTRIES_ENTRIES_STORE_INTERNAL_H
#define MEMORYD_ENTRIES_ENTRIES_STORE_INTERNAL_H

#include <libpq-fe.h>

#include "service/entries/entries_store.h"
#include "service/store/pgq.h"
#include "service/tier/tier_sql.h"

/* The columns every row-returning query selects, in this order. */
#define ENTRIES_COLS                                                                               \
    "tenant, namespace, key, owner, label, content_type, metadata, tags, pii_kinds,"               \
    " size_bytes, version, created_at, updated_at, expires_at, compressed"
enum {
    ECOL_TENANT,
    ECOL_NS,
    ECOL_KEY,
    ECOL_OWNER,
    ECOL_LABEL,
    ECOL_CTYPE,
    ECOL_META,
    ECOL_TAGS,
    ECOL_PII,
    ECOL_SIZE,
    ECOL_VERSION,
    ECOL_CREATED,
    ECOL_UPDATED,
    ECOL_EXPIRES,
    ECOL_COMPRESSED,
    ECOL_VALUE, /* only when asked for */
};

/* The read diode for entries (tier_sql_read_diode, and not expired) as a
 * WHERE fragment without a leading AND. */
void entries_read_diode(pgq_sql *b, const tier_ctx *c);

/* Fills rec from row; with_value: column ECOL_VALUE exists (NULL there =
 * value not sent, e.g. over the byte budget). No read filter. */
int entries_decode_row(tier_ctx *c, const PGresult *r, int row, int with_value,
                       entries_record *rec);
/* The first max rows, decoded and each checked by the final read filter. */
int entries_decode_rows(tier_ctx *c, const PGresult *r, int with_value, int max,
                        entries_record **out, size_t *n);

/* A LIKE pattern (escape `\`) for a validated namespace or key pattern:
 * `*` becomes `%`, LIKE's own metacharacters match literally. NULL on OOM. */
char *entries_to_like(arena *ar, const char *pat);

/* The arguments of an operation over the namespaces a pattern matches
 * (Stats, PurgeExpired): the pattern and where its answer goes. */
typedef struct entries_ns_args {
    const char *ns_pattern;
    void *out;
} entries_ns_args;

/* Appends " AND namespace LIKE ANY(the token's ns globs) AND namespace
 * LIKE ns_pattern" to a statement. STATUS_OK with *none = 1 when the token
 * may touch no namespace (no claim, or only globs that match nothing, as
 * principal_ns_allows treats them): then there is nothing to run. */
int entries_sql_ns_scope(tier_ctx *c, const char *ns_pattern, pgq_sql *b, int *none);

/* The stored form of a value: a zstd frame when over
 * ENTRIES_COMPRESS_OVER bytes. */
int entries_compress(tier_ctx *c, const uint8_t *v, size_t n, const uint8_t **stored,
                     size_t *stored_len, int *compressed);
/* The text Search matches (lowered in SQL): the key, and the value when it
 * is UTF-8 text PostgreSQL can hold (no NUL). NULL on OOM. */
const char *entries_search_source(arena *ar, const char *key, const uint8_t *v, size_t vlen);

#endif
