/* episodic_text: text in place of vectors; see episodic_text.h. */
#include "service/episodic/episodic_text.h"

#include <stdint.h>
#include <string.h>

#include "service/core/text.h"
#include "service/episodic/episodic_index.h"
#include "service/tier/tier_call.h"
#include "service/vstore/vstore_catalog.h"

grpc_status_code episodic_text_check(rpc_call *call, const char *field, const char *text) {
    size_t n = strlen(text);
    if (n == 0)
        return rpc_call_invalid(call, "%s: empty; give 1 to %d bytes", field, EMBED_TEXT_MAX);
    if (n > EMBED_TEXT_MAX)
        return rpc_call_invalid(call, "%s: %zu bytes; at most %d", field, n, EMBED_TEXT_MAX);
    if (!text_utf8_valid((const uint8_t *)text, n))
        return rpc_call_invalid(call, "%s: not valid UTF-8", field);
    return GRPC_STATUS_OK;
}

static grpc_status_code no_embedder(rpc_call *call, const char *field) {
    rpc_call_set_error(call,
                       "%s: text needs an embedder, and this server has none (start it with "
                       "--embedder-url and --embedder-model); send vectors instead",
                       field);
    return GRPC_STATUS_FAILED_PRECONDITION;
}

/* col may take emb's model: it records that one, or none (claim then
 * records it). */
static grpc_status_code model_rule(rpc_call *call, embedder *emb, pg_pool *pg, tier_ctx *c,
                                   vs_collection *col, int claim) {
    const char *model = embedder_model(emb);
    if (!col->embedder_model && claim) {
        const char *recorded;
        RPC_CHECK(tier_status(call, vstore_catalog_claim_model(pg, c, col, model, &recorded), c));
        col->embedder_model = recorded;
    }
    if (col->embedder_model && strcmp(col->embedder_model, model) != 0) {
        rpc_call_set_error(call,
                           "collection %s holds vectors of embedder model %s; this server "
                           "embeds with %s, and mixing models is refused (send vectors of %s, or "
                           "use another collection)",
                           col->name, col->embedder_model, model, col->embedder_model);
        return GRPC_STATUS_FAILED_PRECONDITION;
    }
    return GRPC_STATUS_OK;
}

grpc_status_code episodic_text_embed(rpc_call *call, embedder *emb, pg_pool *pg, tier_ctx *c,
                                     vs_collection *col, const char *field,
                                     const char *const *texts, size_t n, int claim, float **out) {
    if (!emb) return no_embedder(call, field);
    /* Refused before the embedder is asked; recorded only after it has
     * answered, so a failed first upsert records nothing. */
    if (col->embedder_model) RPC_CHECK(model_rule(call, emb, pg, c, col, 0));
    float *v;
    int dims;
    int rc = embedder_embed(emb, texts, n, col->dims, c->deadline_ms, c->cancel, c->traceparent,
                            c->ar, &v, &dims, c->err, sizeof c->err);
    if (rc == STATUS_EPRECONDITION) {
        char why[sizeof c->err];
        memcpy(why, c->err, sizeof why);
        return tier_status(call, tier_fail(c, rc, "%s: collection %s: %s", field, col->name, why),
                           c);
    }
    if (rc != STATUS_OK) return tier_status(call, rc, c);
    /* A text-only collection takes the model's length, before it records
     * the model: a length set meanwhile by another write refuses both. */
    if (claim && col->dims == 0) {
        RPC_CHECK(tier_status(call, vstore_catalog_claim_dims(pg, c, col, dims), c));
        if (col->dims != dims) {
            rpc_call_set_error(call,
                               "%s: collection %s has %d dimensions (set meanwhile); the "
                               "embedder's model makes %d",
                               field, col->name, col->dims, dims);
            return GRPC_STATUS_FAILED_PRECONDITION;
        }
    }
    if (!col->embedder_model) RPC_CHECK(model_rule(call, emb, pg, c, col, claim));
    if (col->distance == VS_COSINE)
        for (size_t i = 0; i < n; i++) episodic_index_normalize(v + i * (size_t)dims, dims);
    *out = v;
    return GRPC_STATUS_OK;
}

grpc_status_code episodic_text_model_dims(rpc_call *call, embedder *emb, tier_ctx *c, int *dims) {
    if (!emb) {
        rpc_call_set_error(call,
                           "dims: 0 asks the server's embedder for its model's length, and this "
                           "server has none (--embedder-url); give dims");
        return GRPC_STATUS_FAILED_PRECONDITION;
    }
    const char *probe = "memoryd: the length of this model's vectors";
    float *v;
    int rc = embedder_embed(emb, &probe, 1, 0, c->deadline_ms, c->cancel, c->traceparent, c->ar, &v,
                            dims, c->err, sizeof c->err);
    return tier_status(call, rc, c);
}
