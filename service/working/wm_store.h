/* wm_store: WorkingMemory's storage in PostgreSQL (table working_memory,
 * migration 12). It knows SQL and the caller's principal, never gRPC:
 * every query carries the read diode (tier_sql.h) and rows coming back are
 * checked again (tier_check_row, with the token's ns claim over the node);
 * writes run in one transaction that starts with a row lock, applies the
 * write diode and compare-and-set, and ends with the audit row and COMMIT.
 *
 * Every operation runs on the event loop (tier_sql.h's tier_async): it
 * returns its op ready for tier_pending, and done(arg, rc) runs once on the
 * loop thread with the output filled when rc is STATUS_OK. Inputs are
 * copied; strings they point to and the outputs must live in c's arena.
 * NULL when out of memory. Inputs are validated by the caller (paths
 * normalized by wm_path, node a namespace inside the token's ns claim). */
#ifndef MEMORYD_WORKING_WM_STORE_H
#define MEMORYD_WORKING_WM_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "service/tier/tier_ctx.h"
#include "service/tier/tier_meta.h"
#include "service/tier/tier_sql.h"
#include "service/working/wm_render.h"

#define WM_DOC_MAX_CHARS 262144 /* characters of one document */
#define WM_DOCS_MAX 10000       /* documents of one memory (checked as a document is created) */

typedef tier_store wm_store;

/* A memory: a node and a thread ("" = the node's global memory). */
typedef struct wm_addr {
    const char *node;
    const char *thread;
} wm_addr;

/* One document as the store returns it. */
typedef struct wm_record {
    const char *path;
    const char *content; /* NULL unless asked for */
    int64_t chars;
    tier_meta meta;
} wm_record;

/* ---- Read, List ---- */

/* The visible document at path, with its content; STATUS_ENOTFOUND when
 * absent or hidden. */
tier_async *wm_store_read_async(wm_store *s, tier_ctx *c, const wm_addr *m, const char *path,
                                wm_record *out, tier_async_done_fn done, void *arg);

typedef struct wm_list_in {
    wm_addr m;
    const char *dir;   /* normalized; "/" = all */
    const char *after; /* keyset cursor (a path); NULL = from the start */
    int limit;         /* 1..1000 */
} wm_list_in;

typedef struct wm_page {
    wm_record *recs; /* without content */
    size_t n;
    int more; /* documents remain past the last one */
} wm_page;

/* The visible documents at and under dir, in path (byte) order. */
tier_async *wm_store_list_async(wm_store *s, tier_ctx *c, const wm_list_in *in, wm_page *out,
                                tier_async_done_fn done, void *arg);

/* ---- Render ---- */

typedef struct wm_render_in {
    wm_addr m;
    int global_fallback; /* m is a thread's: the node's global memory when it shows nothing */
    int64_t full_budget; /* contents are fetched when FULL may fit this; 0: never */
} wm_render_in;

typedef struct wm_memory {
    wm_doc *docs; /* in path order; contents NULL when FULL cannot fit */
    size_t n;
    int fell_back; /* the documents are the node's global memory */
} wm_memory;

/* The visible documents of the memory (or, with global_fallback, of the
 * node's global memory when the caller sees none in the thread's), in one
 * round trip. */
tier_async *wm_store_render_async(wm_store *s, tier_ctx *c, const wm_render_in *in, wm_memory *out,
                                  tier_async_done_fn done, void *arg);
/* Render's statement and the decoding of its result into *out (in c's
 * arena, each row through the final read filter): what
 * wm_store_render_async runs, for the benchmark's direct side too. */
void wm_sql_render(const tier_ctx *c, const wm_render_in *in, pgq_sql *b);
int wm_decode_render(tier_ctx *c, const wm_render_in *in, const PGresult *r, wm_memory *out);

/* ---- Append, Update ---- */

/* What an edit makes of a document's current content ("" when it does not
 * exist). */
typedef struct wm_edit_out {
    int changed;         /* 0: nothing is written, the version stays */
    const char *content; /* the new content (in c's arena), when changed */
    int64_t chars;
    const char *const *pii_kinds; /* the kinds the new content holds (pii:write) */
    size_t npii;
} wm_edit_out;

/* Computes the new content, inside the transaction with the row locked:
 * STATUS_OK, or a code with err set (STATUS_ETOOBIG, STATUS_EINVALID for
 * PII refused), which the store passes back. */
typedef int (*wm_edit_fn)(void *arg, const char *content, int exists, wm_edit_out *out, char *err,
                          size_t errlen);

typedef struct wm_edit_in {
    wm_addr m;
    const char *path;
    int create; /* an absent document is created (Append); else STATUS_ENOTFOUND */
    int label;  /* requested memory.v1.Label (0 = unspecified) */
    int has_expected;
    int64_t expected_version;
    wm_edit_fn edit;
    void *edit_arg;
} wm_edit_in;

/* Rewrites (or creates) the document through edit. STATUS_EDENIED when it
 * exists and the caller may not modify it; STATUS_ECONFLICT on a version
 * mismatch; STATUS_ETOOBIG when creating it would pass WM_DOCS_MAX
 * documents. The label is stamped max(requested, lvl, existing). *out
 * gets the document's metadata after the call (unchanged when the edit
 * changed nothing: then the row lock is rolled back and no audit row
 * written) and *created whether it was created. */
tier_async *wm_store_edit_async(wm_store *s, tier_ctx *c, const wm_edit_in *in, wm_record *out,
                                int *created, tier_async_done_fn done, void *arg);

/* ---- Delete ---- */

typedef struct wm_delete_in {
    wm_addr m;
    const char *path;
    int recursive;    /* and every document under path */
    int has_expected; /* not with recursive */
    int64_t expected_version;
} wm_delete_in;

/* Deletes the visible documents at (and with recursive under) path, all
 * or none: STATUS_ENOTFOUND when there are none, STATUS_EDENIED when the
 * caller may not modify one of them, STATUS_ECONFLICT on a version
 * mismatch. *deleted counts them. */
tier_async *wm_store_delete_async(wm_store *s, tier_ctx *c, const wm_delete_in *in,
                                  int64_t *deleted, tier_async_done_fn done, void *arg);

#endif
