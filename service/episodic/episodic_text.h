/* episodic_text: text in place of vectors (episodic_memory.proto): the
 * checks of a text field, and its embedding for a collection under the
 * model rules (a collection is filled by one embedder model: the one it
 * records, or, when it records none yet, the server's, which an upsert
 * then records). Every function blocks on the embedder (task-pool threads
 * only) and returns GRPC_STATUS_OK or the call's status with its message
 * set. */
#ifndef MEMORYD_EPISODIC_EPISODIC_TEXT_H
#define MEMORYD_EPISODIC_EPISODIC_TEXT_H

#include <stddef.h>

#include "service/embed/embedder.h"
#include "service/rpc/rpc.h"
#include "service/store/pg_pool.h"
#include "service/vstore/vstore.h"

/* field holds 1 to EMBED_TEXT_MAX bytes of UTF-8. */
grpc_status_code episodic_text_check(rpc_call *call, const char *field, const char *text);

/* texts[0..n) (checked) as n vectors of col->dims floats in c's arena
 * (*out; unit length for COSINE), embedded by emb (NULL: none configured,
 * FAILED_PRECONDITION) within c's deadline and cancel. FAILED_PRECONDITION
 * when col records another model than emb's, or the model's vectors have
 * another length. claim: an upsert's, which records emb's model on a
 * collection that has none (col is updated). field names the texts in
 * messages ("points[].text", "text"). */
grpc_status_code episodic_text_embed(rpc_call *call, embedder *emb, pg_pool *pg, tier_ctx *c,
                                     vs_collection *col, const char *field,
                                     const char *const *texts, size_t n, int claim, float **out);

/* The length of emb's model's vectors, asked of the embedder now (for a
 * collection created with dims 0). */
grpc_status_code episodic_text_model_dims(rpc_call *call, embedder *emb, tier_ctx *c, int *dims);

#endif
