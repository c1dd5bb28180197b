/* entries_store: the Entries tier's storage in PostgreSQL (table `entries`,
 * migration 4). It knows SQL, zstd and the caller's principal, never gRPC:
 * every query carries the read diode (tier_sql.h, plus: not expired) and,
 * for List/Search/Stats, the token's `ns` globs; rows coming back are
 * checked again (tier_check_row). Writes run in one transaction with row
 * locks, the write diode and compare-and-set, and call the context's
 * before-commit hook (the audit row).
 *
 * Inputs are assumed validated by the caller (namespaces, keys, patterns,
 * sizes); the store re-checks nothing it does not need for safety.
 *
 * Every function takes the call's tier_ctx (tier "entries"). Results are
 * allocated in ctx->ar and live as long as it. Functions return STATUS_OK
 * or a negative STATUS_E* code with a message in ctx->err. */
#ifndef MEMORYD_ENTRIES_ENTRIES_STORE_H
#define MEMORYD_ENTRIES_ENTRIES_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "service/core/status.h"
#include "service/store/pg_pool.h"
#include "service/tier/tier_ctx.h"
#include "service/tier/tier_meta.h"
#include "service/tier/tier_sql.h"

#define ENTRIES_VALUE_MAX (1024 * 1024) /* bytes */
#define ENTRIES_COMPRESS_OVER 1024      /* values longer than this are stored zstd-compressed */

/* A tier_store (tier_sql.h): the pool and the answer budget. */
typedef tier_store entries_store;

/* One stored entry as the store returns it. Strings are NUL-terminated;
 * metadata_json is the jsonb text ("{}" when empty). */
typedef struct entries_record {
    const char *ns;
    const char *key;
    const char *content_type;
    const char *metadata_json;
    const char **tags;
    size_t ntags;
    int64_t size_bytes; /* uncompressed */
    tier_meta meta;     /* tenant, owner, label, version, times, pii_kinds */
    int has_value;      /* value was asked for (and fits the byte budget) */
    const uint8_t *value;
    size_t value_len;
} entries_record;

/* The store's max_response_bytes bounds the value bytes of a List/Search
 * answer (which has at least one entry). Values over 1 KiB are stored as
 * zstd frames of level ENTRIES_ZSTD_LEVEL. */
#define ENTRIES_ZSTD_LEVEL 3

/* ---- Write ---- */

typedef struct entries_write_in {
    const char *ns;
    const char *key;
    const uint8_t *value;
    size_t value_len;
    const char *content_type;  /* never NULL */
    const char *metadata_json; /* JSON object text; NULL = {} */
    const char *const *tags;   /* deduplicated, validated */
    size_t ntags;
    const char *const *pii_kinds;
    size_t npii;
    int has_expire; /* absolute expiry */
    int64_t expire_us;
    int has_ttl; /* expiry relative to the database's now() */
    int64_t ttl_us;
    int has_expected; /* compare-and-set */
    int64_t expected_version;
    int label; /* requested memory.v1.Label (0 = unspecified) */
} entries_write_in;

/* Creates or replaces (ns, key) in the caller's tenant. An expired entry
 * counts as absent (the write creates version 1 with the caller as owner).
 * Replacing keeps owner and create time, bumps the version and stamps
 * label = max(requested, lvl, existing). STATUS_EDENIED when the entry
 * exists and belongs to another owner without `entries:write:all`, or its
 * label is above the caller's clr; STATUS_ECONFLICT on a version mismatch
 * (expected 0 = must not exist). A concurrent create of the same key is
 * waited for and the write then re-evaluated as a replace. *created tells
 * which happened; *out gets the stored metadata (no value). On the
 * event loop, as the reads below (in is copied; out and created live in
 * c's arena): the row lock, the write, then the audit row with COMMIT, a
 * round trip each. */
tier_async *entries_store_write_async(entries_store *s, tier_ctx *c, const entries_write_in *in,
                                      entries_record *out, int *created, tier_async_done_fn done,
                                      void *arg);

/* ---- Read ---- */

/* The reads run on the event loop (tier_sql.h's tier_async): each returns
 * its statement, ready for tier_pending; done(arg, rc) runs once, on the
 * loop thread (or in the submit when there is nothing to send), with the
 * output filled when rc is STATUS_OK. Inputs are copied; strings they
 * point to and the output must live in c's arena. NULL when out of memory.
 *
 * Read: one visible entry with its value (decompressed). STATUS_ENOTFOUND
 * when absent, expired or hidden by the read diode. */
tier_async *entries_store_read_async(entries_store *s, tier_ctx *c, const char *ns, const char *key,
                                     entries_record *out, tier_async_done_fn done, void *arg);
/* The entry of c's tenant whatever its owner and label (unexpired), as
 * entries_store_read_async: for a cache shared by the tenant's callers,
 * which must apply the rest of the read diode (principal_may_read, the ns
 * claim) to every copy it hands out. */
tier_async *entries_store_load_async(entries_store *s, tier_ctx *c, const char *ns, const char *key,
                                     entries_record *out, tier_async_done_fn done, void *arg);
/* Read's statement (the benchmark's direct side runs it too). */
void entries_sql_read(const tier_ctx *c, const char *ns, const char *key, pgq_sql *b);

/* ---- List ---- */

typedef struct entries_list_in {
    const char *ns_pattern;  /* validated nsglob pattern */
    const char *key_pattern; /* validated key pattern (`*` = any run) */
    int with_values;
    int limit;            /* 1..1000 */
    const char *after_ns; /* keyset cursor; NULL = from the start */
    const char *after_key;
} entries_list_in;

/* What List and Search answer. */
typedef struct entries_page {
    entries_record *recs; /* in c's arena */
    size_t n;
    int more;      /* List: entries remain past the last one returned */
    float *scores; /* a ranked Search's, one per record; NULL otherwise */
} entries_page;

/* Visible entries inside the token's ns globs matching both patterns,
 * ordered by (namespace, key) in byte order, after the cursor. more is
 * set when entries remain past the last one returned (the answer may stop
 * early when values exceed max_response_bytes). */
tier_async *entries_store_list_async(entries_store *s, tier_ctx *c, const entries_list_in *in,
                                     entries_page *out, tier_async_done_fn done, void *arg);

/* ---- Search ---- */

typedef struct entries_search_in {
    const char *ns_pattern;  /* validated nsglob pattern */
    const char *term;        /* "" = any; matched case-insensitively and literally */
    const char *const *tags; /* every one required */
    size_t ntags;
    const char *content_type; /* "" = any */
    const char *created_by;   /* "" = any */
    int has_start;            /* update_time >= start */
    int64_t start_us;
    int has_end; /* update_time < end */
    int64_t end_us;
    int limit; /* 1..1000 */
    int with_values;
    int ranked; /* term as a question, ranked by BM25 (tier_sql_rank.h) */
} entries_search_in;

/* Visible entries matching every criterion, most recently updated first;
 * ranked: those sharing a word with the term, best first (ties by
 * namespace, key), their scores in out->scores. */
tier_async *entries_store_search_async(entries_store *s, tier_ctx *c, const entries_search_in *in,
                                       entries_page *out, tier_async_done_fn done, void *arg);

/* ---- Delete ---- */

/* Deletes a live entry. STATUS_ENOTFOUND when absent or expired;
 * STATUS_EDENIED as for write; STATUS_ECONFLICT on a version mismatch. On
 * the event loop, as Write. */
tier_async *entries_store_delete_async(entries_store *s, tier_ctx *c, const char *ns,
                                       const char *key, int has_expected, int64_t expected_version,
                                       tier_async_done_fn done, void *arg);

/* ---- Append / Replace ---- */

/* What an edit makes of the current value. */
typedef struct entries_edit_out {
    int changed;          /* 0: nothing is written, the version stays */
    const uint8_t *value; /* the new value (arena or static), when changed */
    size_t value_len;
    const char *const *pii_kinds; /* kinds to add to the record's pii_kinds */
    size_t npii;
} entries_edit_out;

/* Computes the new value from the current one (inside the transaction,
 * the row locked). Returns STATUS_OK, or a code (STATUS_ETOOBIG,
 * STATUS_EINVALID for PII refused, ...) with err set, which the store
 * passes back unchanged. */
typedef int (*entries_edit_fn)(void *arg, const uint8_t *value, size_t len, entries_edit_out *out,
                               char *err, size_t errlen);

typedef struct entries_modify_in {
    const char *ns;
    const char *key;
    int has_expected;
    int64_t expected_version;
    entries_edit_fn edit;
    void *edit_arg;
} entries_modify_in;

/* Rewrites a live entry's value through edit: STATUS_ENOTFOUND when absent
 * or expired, STATUS_EDENIED as for write, STATUS_ECONFLICT on a version
 * mismatch, STATUS_ETOOBIG when the result exceeds ENTRIES_VALUE_MAX.
 * Everything else is kept; the label is stamped max(lvl, existing). *out
 * gets the metadata after the call (unchanged when the edit changed
 * nothing; then no before_commit hook runs). */
tier_async *entries_store_modify_async(entries_store *s, tier_ctx *c, const entries_modify_in *in,
                                       entries_record *out, tier_async_done_fn done, void *arg);

/* ---- PurgeExpired ---- */

/* Deletes the expired entries of the caller's tenant, every owner, inside
 * the token's ns globs and ns_pattern: one DELETE and the audit row with
 * COMMIT, on the event loop as Write. */
tier_async *entries_store_purge_async(entries_store *s, tier_ctx *c, const char *ns_pattern,
                                      int64_t *purged, tier_async_done_fn done, void *arg);

/* ---- Stats ---- */

typedef struct entries_stats {
    int64_t entry_count;
    int64_t namespace_count;
    int64_t value_bytes;
    int64_t stored_bytes;
    int64_t compressed_count;
} entries_stats;

/* Aggregates over the visible, unexpired entries inside the token's ns
 * globs and ns_pattern. */
tier_async *entries_store_stats_async(entries_store *s, tier_ctx *c, const char *ns_pattern,
                                      entries_stats *out, tier_async_done_fn done, void *arg);

#endif
