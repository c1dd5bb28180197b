/* tier_export: an export (tier_erase.h's tier_export_fn) of one kind of
 * record kept in one PostgreSQL table, a keyset page at a time. The tier
 * writes the SELECT of the selection's rows and renders a row; the kit
 * pages by the key columns, gives each page's strings an arena of their
 * own and hands the rows over only once the page's connection is back,
 * so an export of any size holds one page and a slow reader holds no
 * connection. Storage code: no gRPC; blocks like an eraser. */
#ifndef MEMORYD_TIER_TIER_EXPORT_H
#define MEMORYD_TIER_TIER_EXPORT_H

#include <jansson.h>
#include <libpq-fe.h>

#include "service/store/pg_pool.h"
#include "service/store/pgq.h"
#include "service/tier/tier_ctx.h"
#include "service/tier/tier_erase.h"
#include "service/tier/tier_meta.h"

#define TIER_EXPORT_MAX_KEY 3

/* One kind of record (static: the tier's). */
typedef struct tier_export_pages {
    const char *kind; /* tier_export_rec.kind: "entry" */
    const char *what; /* the statement's name in logs: "export entries" */
    /* The keyset: the ORDER BY columns as the SELECT names them
     * ("r.source_id, r.rel_type, r.target_id"), how many, and where each
     * is in a row of the SELECT. */
    const char *key;
    int nkey; /* 1 to TIER_EXPORT_MAX_KEY */
    int key_cols[TIER_EXPORT_MAX_KEY];
    int page; /* rows in memory at a time */
    /* Appends "SELECT <columns> FROM <table> WHERE <sel's rows>" (the kit
     * adds the cursor, the order and the limit): STATUS_OK, or a code with
     * c->err. */
    int (*select)(pgq_sql *b, tier_ctx *c, const tier_erase_sel *sel);
    /* Row i as a record: rec's id and json, and *meta (rec->meta points at
     * it), in c's arena. STATUS_OK, or a code with c->err (STATUS_ENOMEM:
     * the kit says "out of memory"). */
    int (*render)(tier_ctx *c, const PGresult *r, int i, const tier_erase_sel *sel,
                  tier_export_rec *rec, tier_meta *meta);
} tier_export_pages;

/* A record's content for its tier_export_rec.json: the JSON object o (its
 * reference taken; NULL, as a jansson constructor that ran out of memory
 * returns, fails) as compact text in c's arena. STATUS_OK, or
 * STATUS_ENOMEM with c->err. */
int tier_export_json(tier_ctx *c, json_t *o, const char **json);

/* Stored bytes as an export shows them: a JSON string of their text when
 * they are UTF-8 (*encoding "text"), else of their base64url (*encoding
 * "base64url"); NULL when out of memory. */
json_t *tier_export_bytes(tier_ctx *c, const void *v, size_t n, const char **encoding);

/* Every row of k that sel reaches, through emit, page after page:
 * STATUS_OK, emit's code (which ends it), or a backend's or render's code
 * with c->err. */
int tier_export_pages_run(pg_pool *pg, tier_ctx *c, const tier_export_pages *k,
                          const tier_erase_sel *sel, tier_export_emit emit, void *emit_arg);

#endif
