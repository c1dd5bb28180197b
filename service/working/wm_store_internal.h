/* wm_store_internal: what wm_store.c (reads) and wm_store_write.c share.
 * Not for other modules. */
#ifndef MEMORYD_WORKING_WM_STORE_INTERNAL_H
#define MEMORYD_WORKING_WM_STORE_INTERNAL_H

#include <libpq-fe.h>

#include "service/store/pgq.h"
#include "service/working/wm_store.h"

/* The columns every document-returning query selects, in this order; a
 * query that reads contents adds `content` last. */
#define WM_COLS "tenant, path, owner, label, pii_kinds, version, created_at, updated_at, chars"
enum {
    WCOL_TENANT,
    WCOL_PATH,
    WCOL_OWNER,
    WCOL_LABEL,
    WCOL_PII,
    WCOL_VERSION,
    WCOL_CREATED,
    WCOL_UPDATED,
    WCOL_CHARS,
    WCOL_CONTENT
};

/* Appends " AND node = $ AND thread = $" for memory m. */
void wm_sql_memory(pgq_sql *b, const wm_addr *m, const char *alias);
/* Appends " AND (path = dir OR path under dir/)"; nothing for "/". */
void wm_sql_under(pgq_sql *b, const char *dir);

/* Fills rec from row whose WM_COLS start at column off (content when the
 * column after them is there and not NULL). No read filter: for a row lock,
 * which the write diode judges. */
int wm_decode_cols(tier_ctx *c, const PGresult *r, int row, int off, wm_record *rec);
/* wm_decode_cols at column 0, then the final read filter (the node within
 * the token's ns claim). */
int wm_decode_row(tier_ctx *c, const wm_addr *m, const PGresult *r, int row, wm_record *rec);

#endif
