/* vstore_catalog: the tenant's episodic collections in PostgreSQL
 * (table episodic_collections), shared by both vector-store backends: it
 * is the authority on which collections exist, their dims, distance,
 * creator and creation time. The embedded backend keeps its points beside
 * it (episodic_points); the Qdrant backend keeps one Qdrant collection per
 * catalog row and creates / drops it inside the catalog's transaction
 * through the hooks below, so a failure on either side leaves neither.
 *
 * Every function takes the tenant from ctx->p and returns STATUS_OK or a
 * negative STATUS_E* code with a message in ctx->err. Results live in ctx->ar. */
#ifndef MEMORYD_VSTORE_VSTORE_CATALOG_H
#define MEMORYD_VSTORE_VSTORE_CATALOG_H

#include <stddef.h>

#include "service/store/pg_pool.h"
#include "service/vstore/vstore.h"

/* Runs inside the catalog transaction, after the row is written (create)
 * or locked (delete) and before COMMIT; a non-STATUS_OK return rolls the
 * transaction back and is the call's result (the hook fills ctx->err). */
typedef int (*vstore_catalog_hook)(tier_ctx *c, const vs_collection *col, void *arg);

/* STATUS_EEXISTS when the tenant has a collection of that name. model:
 * the embedder model it records (NULL: none). hook may be NULL. On
 * STATUS_OK *out is the new collection. */
int vstore_catalog_create(pg_pool *pg, tier_ctx *c, const char *name, int dims, int distance,
                          const char *model, vstore_catalog_hook hook, void *arg,
                          vs_collection *out);

/* Records model as the embedder model of col (by its catalog id, so a
 * collection deleted and re-created under its name meanwhile is not
 * touched) unless it has one: STATUS_OK with *recorded the model it now
 * records (in c's arena; another one than model when it had one);
 * STATUS_ENOTFOUND when col is gone. */
int vstore_catalog_claim_model(pg_pool *pg, tier_ctx *c, const vs_collection *col,
                               const char *model, const char **recorded);

/* Records dims as col's vector length (by its catalog id) unless it has
 * one (dims 0 in the catalog: no vector yet): STATUS_OK with col->dims the
 * length it now records (another one than dims when it had one);
 * STATUS_ENOTFOUND when col is gone. */
int vstore_catalog_claim_dims(pg_pool *pg, tier_ctx *c, vs_collection *col, int dims);

/* STATUS_ENOTFOUND when absent. */
int vstore_catalog_get(pg_pool *pg, tier_ctx *c, const char *name, vs_collection *out);

/* By name, names > after (NULL: from the start), at most limit. */
int vstore_catalog_list(pg_pool *pg, tier_ctx *c, const char *after, size_t limit,
                        vs_collection **out, size_t *n);

/* Deletes the row (and, by cascade, its embedded points). STATUS_ENOTFOUND
 * when absent. hook may be NULL. */
int vstore_catalog_delete(pg_pool *pg, tier_ctx *c, const char *name, vstore_catalog_hook hook,
                          void *arg);

#endif
