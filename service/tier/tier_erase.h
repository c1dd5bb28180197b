/* tier_erase: erasing a data subject's records, tier by tier. Every tier
 * that keeps records says so in its descriptor (tier.records: how they are
 * erased, exported and swept); the tier table turns each into an eraser of
 * the tier environment, and Privacy.Forget, Privacy.Export and the
 * retention sweeper run those in their declared order, so there is one
 * erasure path and it reaches every store a record can live in.
 *
 * An eraser is storage code: no gRPC. It runs on a task-pool thread and
 * may block on its backend until c->deadline_ms (or c->cancel fires). It
 * gets a context whose principal is the erasure's (tier_erase_principal):
 * the selection's tenant, its owner as `sub` when the selection has one
 * (c's breadths are then PRINCIPAL_OWN, else PRINCIPAL_ALL), and the
 * highest read ceiling, because labels never limit erasure. Tier code that
 * applies the diodes from c->p therefore sees exactly the records the
 * selection may reach; the subject id narrows them further. */
#ifndef MEMORYD_TIER_TIER_ERASE_H
#define MEMORYD_TIER_TIER_ERASE_H

#include <stdint.h>

#include "service/auth/principal.h"
#include "service/tier/tier_ctx.h"
#include "service/tier/tier_meta.h"

/* What to erase, within one tenant: at least one of owner, subject_id
 * and before_us is set. Forget sets the first two; the retention sweeper
 * the last three fields (a rule of its policy) and a batch bound. */
typedef struct tier_erase_sel {
    const char *tenant;
    /* Only records this principal owns (a token `sub`); NULL: any owner. */
    const char *owner;
    /* Only records whose JSON content (entity and relationship properties,
     * task provenance, point payloads, entry metadata, blackboard values;
     * session values and working documents when they are JSON objects)
     * has a top-level string "subject_id" equal to it; NULL: any. */
    const char *subject_id;
    /* Only records last changed before this (Unix µs); 0: any time. */
    int64_t before_us;
    /* Only records with this memory.v1.Label; 0: any. */
    int label;
    /* Only records carrying this PII kind ("email"), or any kind ("*");
     * NULL: with or without. */
    const char *pii_kind;
    /* At most this many records per table (a bounded batch: the sweeper
     * calls again while records go); 0: every match. Not with dry_run. */
    int64_t limit;
    /* Count what would be erased; erase nothing. */
    int dry_run;
    /* Only records labelled at most this (memory.v1.Label): an export is a
     * read and keeps the caller's read ceiling; 0: any (erasure). */
    int max_label;
    /* Namespaced tiers (entries, working memory) only: with ns_limited,
     * only records in a namespace one of the nns globs ns (auth/nsglob.h)
     * matches, none when nns is 0 (tier_erase_sql_ns). Forget and Export
     * set it from a token whose `ns` claim does not cover every namespace;
     * the retention sweeper never does. */
    int ns_limited;
    char *const *ns;
    size_t nns;
} tier_erase_sel;

/* The rule in Lua, for stores that select in Redis scripts (blackboard
 * values, session values): names_subject(v, subject) is true when the
 * bytes v are a JSON object whose top-level "subject_id" is the string
 * subject. Values that do not spell "subject_id" (nor hold a \u escape
 * that could) are not decoded. Paste it into a script's body. */
/* clang-format off */
#define TIER_ERASE_LUA_NAMES_SUBJECT \
    "local UESC = string.char(92) .. 'u'\n" \
    "local function names_subject(v, subject)\n" \
    "  if not (string.find(v, 'subject_id', 1, true) or string.find(v, UESC, 1, true)) then\n" \
    "    return false\n" \
    "  end\n" \
    "  local ok, doc = pcall(cjson.decode, v)\n" \
    "  return ok and type(doc) == 'table' and type(doc.subject_id) == 'string' and\n" \
    "    doc.subject_id == subject\n" \
    "end\n"
/* clang-format on */

/* 1 when sel has a retention condition (before_us, label, pii_kind): tiers
 * whose records end by their own TTLs (the cache, blackboards) erase
 * nothing for it. */
int tier_erase_is_retention(const tier_erase_sel *sel);

/* Erases (or counts) sel's records of the tier: STATUS_OK with *count, or a
 * STATUS_E* code with c->err (a failure may leave part of the tier erased:
 * erasure is idempotent, the caller runs it again). */
typedef int (*tier_erase_fn)(void *state, tier_ctx *c, const tier_erase_sel *sel, int64_t *count);

/* ---- export (Privacy.Export): the same selection, read ---- */

/* One record of the selection as an exporter hands it over (valid during
 * the emit call only). */
typedef struct tier_export_rec {
    const char *kind;      /* "entity", "relationship", "task", "point", "entry",
                            * "blackboard_item" */
    const char *id;        /* its address in the tier (PrivacyExportResponse.id) */
    const char *json;      /* its content, a JSON object (PrivacyExportResponse.record) */
    const tier_meta *meta; /* owner, label, versions, times */
} tier_export_rec;
/* Takes one record: STATUS_OK to go on, or a code that ends the export
 * (STATUS_ECANCELLED: the client went away), which the exporter returns. */
typedef int (*tier_export_emit)(void *arg, const tier_export_rec *r);
/* Hands every record of sel that c may read (c->p: the selection's tenant
 * and owner, read ceiling sel->max_label) to emit, holding a bounded batch
 * in memory at a time: STATUS_OK, emit's code, or the backend's with
 * c->err. Blocks like an eraser. */
typedef int (*tier_export_fn)(void *state, tier_ctx *c, const tier_erase_sel *sel,
                              tier_export_emit emit, void *emit_arg);

/* ---- what a tier that keeps records declares ---- */

/* The order erasers run in (tier_records.order, ascending): the stores of
 * record first, then the copies other tiers' records leave behind (the
 * cache), so a copy a concurrent read put back while its store was erased
 * goes too. */
#define TIER_ORDER_RECORDS 10 /* stores of record: 10, 20, ... below copies */
#define TIER_ORDER_COPIES 90  /* caches of the stores' records */

/* A tier's records, as its descriptor declares them (static: the
 * descriptor's). */
typedef struct tier_records {
    int tier; /* the memory.v1.Tier its counts go under */
    /* For a tier whose counts go under one of two values by configuration
     * (the cache: L2 with Redis, else L1): that value for the tier's open
     * state. NULL: .tier. */
    int (*tier_of)(const void *state);
    int order;           /* TIER_ORDER_*: where it runs among the erasers */
    tier_erase_fn erase; /* required */
    /* The same selection's records, read (NULL: the tier has nothing to
     * export, as the cache's opaque values). */
    tier_export_fn exporter;
    /* The tables its long-term records live in, each with a leading
     * `tenant` column: the retention sweeper finds a tenant's records
     * there, and a retention rule may name the tier. NULL-terminated; NULL:
     * its records end by their own TTLs (cache values, blackboards) and no
     * rule sweeps them. */
    const char *const *tables;
} tier_records;

/* The tier_records of a tier whose long-term records live in the tables
 * listed last: `static const tier_records records = TIER_RECORDS(
 * MEMORY__V1__TIER__TIER_X, TIER_ORDER_RECORDS, x_erase, x_export, "x");`
 * (a tier whose records end by their TTLs sets the fields itself). */
#define TIER_RECORDS(tier_, order_, erase_, exporter_, ...)                                        \
    {                                                                                              \
        .tier = (tier_), .order = (order_), .erase = (erase_), .exporter = (exporter_),            \
        .tables = (const char *const[]) {                                                          \
            __VA_ARGS__, NULL                                                                      \
        }                                                                                          \
    }

/* One tier's records, open: what Privacy and the sweeper walk
 * (tier_env.erasers, in order). */
typedef struct tier_eraser {
    const tier_records *r; /* what the tier declared (its descriptor's) */
    void *state;           /* the tier's, handed to r->erase and r->exporter */
    const char *name;      /* the tier's name: logs, errors, `<name>:read` for Export */
    int tier;              /* the memory.v1.Tier its count goes under (r->tier_of's) */
} tier_eraser;

#define TIER_MAX_ERASERS 12

/* The principal an erasure's context carries (above; an export's has the
 * read ceiling sel->max_label); NULL when out of memory. The caller
 * releases it with principal_unref. A selection without an owner gets a
 * placeholder sub (" erasure") that no code reads as an owner: its
 * contexts have PRINCIPAL_ALL breadths, which never filter by sub. */
principal *tier_erase_principal(const tier_erase_sel *sel);

/* sel->subject_id as the JSON object {"subject_id": ...} (for containment
 * tests) in arena a; NULL when out of memory. */
const char *tier_erase_subject_json(arena *a, const tier_erase_sel *sel);

/* sel's rows of a table keeping the record columns (tenant, owner, label,
 * updated_at, pii_kinds) as a WHERE fragment (without WHERE) on alias
 * (NULL: none), for c an erasure's context: c's tenant and owner
 * and label bound (tier_sql_read_diode: the highest label for an erasure,
 * the caller's read ceiling for an export); when sel
 * has a subject id, json_col's top-level "subject_id" equal to it, both as
 * `->>` (which an expression index serves) and by containment (exact: a
 * string, not a number that prints the same; json_col NULL: the table
 * keeps no JSON content and matches no subject); and sel's retention
 * conditions. STATUS_OK, or STATUS_ENOMEM. */
struct pgq_sql;
struct pg_result; /* libpq's PGresult */
int tier_erase_sql_where(struct pgq_sql *b, tier_ctx *c, const tier_erase_sel *sel,
                         const char *alias, const char *json_col);

/* tier_erase_sql_where for a table that keeps its content as opaque bytes
 * or text (session values, working documents) in column value_col: a
 * record names subject S when the content is a JSON object whose
 * top-level "subject_id" is the string S (memoryd_subject_of, schema
 * migration 15), the same rule as for the JSON columns. is_text: the
 * column is text (converted to UTF-8 bytes), else bytea. */
int tier_erase_sql_where_value(struct pgq_sql *b, tier_ctx *c, const tier_erase_sel *sel,
                               const char *alias, const char *value_col, int is_text);

/* For a namespaced tier, after tier_erase_sql_where: sel's namespace
 * bound on column col (" AND col LIKE ANY(...)", or " AND false" when
 * sel is limited to no usable namespace); nothing when sel->ns_limited is
 * 0. STATUS_OK, or STATUS_ENOMEM with c->err. */
int tier_erase_sql_ns(struct pgq_sql *b, tier_ctx *c, const tier_erase_sel *sel, const char *col);

/* ---- an erasure's statement ----
 *
 * The start of the statement erasing (or, for a dry run, counting) sel's
 * rows of table, whose condition the caller appends (aliased alias, or
 * the table's name when alias is NULL), then tier_erase_sql_end. Without
 * a batch bound a plain DELETE, which rechecks its condition on a row
 * updated meanwhile (Forget: a row changed while it runs is still
 * erased); with one, the rows of one batch by ctid (a row updated
 * meanwhile waits for the sweeper's next batch); a dry run a count(*).
 * Table and alias are the tier's SQL names, never a caller's. */
void tier_erase_sql_begin(struct pgq_sql *b, const tier_erase_sel *sel, const char *table,
                          const char *alias);
/* Closes what tier_erase_sql_begin opened (a batch's LIMIT). */
void tier_erase_sql_end(struct pgq_sql *b, const tier_erase_sel *sel);
/* What the statement erased (its row count) or, for a dry run, counted:
 * STATUS_OK with *count, or STATUS_EINTERNAL with c->err naming what. */
int tier_erase_sql_count(tier_ctx *c, const tier_erase_sel *sel, const struct pg_result *r,
                         const char *what, int64_t *count);

/* ---- an eraser of one table in one statement (static: the tier's) ---- */
struct pg_pool;
typedef struct tier_erase_table {
    const char *table; /* its SQL name */
    const char *what;  /* "entries": in messages and logs */
    /* Appends the condition of sel's rows (tier_erase_sql_where and, for
     * a namespaced tier, tier_erase_sql_ns): STATUS_OK or a code with
     * c->err. */
    int (*where)(struct pgq_sql *b, tier_ctx *c, const tier_erase_sel *sel);
    /* Columns the erased rows return (" namespace, key"), and what to do
     * with them once erased (drop their copies); NULL: nothing. */
    const char *returning;
    void (*erased)(void *state, tier_ctx *c, const struct pg_result *r);
} tier_erase_table;

/* Erases (or counts) sel's rows of t, on pg (a tier_erase_fn's body):
 * STATUS_OK with *count, or a code with c->err. state goes to t->erased. */
int tier_erase_table_run(const tier_erase_table *t, struct pg_pool *pg, void *state, tier_ctx *c,
                         const tier_erase_sel *sel, int64_t *count);

#endif
