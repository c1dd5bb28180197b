/* episodic_rpc_collections: EpisodicMemory's collections: CreateCollection,
 * GetCollection, ListCollections, DeleteCollection; see episodic_service.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory/v1/episodic_memory.pb-c.h"
#include "service/auth/authn.h"
#include "service/core/log.h"
#include "service/core/text.h"
#include "service/episodic/episodic_filter.h"
#include "service/episodic/episodic_service_internal.h"
#include "service/episodic/episodic_text.h"
#include "service/pb/pbjson.h"
#include "service/pb/pbtime.h"
#include "service/pii/pii_policy.h"
#include "service/tier/tier_call.h"
#include "service/tier/tier_check.h"
#include "service/tier/tier_page.h"
#include "service/vstore/vstore_catalog.h"

#define MODEL_NAME_MAX 256 /* characters of an embedding model's name */

static Memory__V1__Collection *render_collection(arena *a, const principal *p,
                                                 const vs_collection *col) {
    Memory__V1__Collection *m = arena_message(a, &memory__v1__collection__descriptor);
    if (!m) return NULL;
    m->name = (char *)col->name;
    m->dims = col->dims;
    m->distance = (Memory__V1__Distance)col->distance;
    if (col->embedder_model) m->embedder_model = (char *)col->embedder_model;
    tier_meta meta = {.owner = col->owner,
                      .label = MEMORY__V1__LABEL__LABEL_PUBLIC,
                      .version = 1,
                      .create_us = col->created_us,
                      .update_us = col->created_us};
    if (!(m->meta = episodic_service_render_meta(a, p, &meta))) return NULL;
    return m;
}

/* ------------------------------------------------------------ collections */

RPC_UNARY_HANDLER(episodic_do_create_collection, episodic_service,
                  Memory__V1__CreateCollectionRequest, Memory__V1__CreateCollectionResponse) {
    RPC_CHECK(episodic_service_check_name(call, "name", req->name));
    if (req->dims < 0 || req->dims > VS_MAX_DIMS)
        return rpc_call_invalid(call,
                                "dims: %d; must be 1 to %d (0: the embedder model's, or set by "
                                "the first vector)",
                                req->dims, VS_MAX_DIMS);
    if (req->distance < VS_COSINE || req->distance > VS_EUCLID)
        return rpc_call_invalid(call,
                                "distance: %d; set DISTANCE_COSINE, DISTANCE_DOT or "
                                "DISTANCE_EUCLID",
                                (int)req->distance);
    const char *model = req->embedder_model[0] ? req->embedder_model : NULL;
    long chars = model ? text_name_chars(model) : 0;
    if (chars < 0 || chars > MODEL_NAME_MAX)
        return rpc_call_invalid(call, "embedder_model: %s; give 1 to %d printable characters",
                                chars < 0 ? "not printable UTF-8" : "too long", MODEL_NAME_MAX);
    int dims = req->dims;
    tier_ctx c;
    RPC_CHECK(episodic_service_ctx(&c, call));
    if (dims == 0 && svc->emb) {
        /* The server's model, whose length is asked of the embedder.
         * Without one, the collection starts text-only: its first vector
         * sets dims. */
        if (model && strcmp(model, embedder_model(svc->emb)) != 0)
            return rpc_call_invalid(call,
                                    "embedder_model: %s, but dims 0 takes the length of the "
                                    "server's model, %s",
                                    model, embedder_model(svc->emb));
        RPC_CHECK(episodic_text_model_dims(call, svc->emb, &c, &dims));
        model = embedder_model(svc->emb);
    }
    tier_ctx_audit_writes(&c, call, svc->audit);
    tier_target(call, "collection:%s", req->name);
    vs_collection col;
    int rc =
        vstore_create_collection(svc->vs, &c, req->name, dims, (int)req->distance, model, &col);
    if (rc != STATUS_OK) return episodic_service_status(call, rc, &c);
    if (!(resp->collection = render_collection(c.ar, c.p, &col))) return rpc_call_oom(call);
    return GRPC_STATUS_OK;
}

RPC_UNARY_HANDLER(episodic_do_get_collection, episodic_service, Memory__V1__GetCollectionRequest,
                  Memory__V1__GetCollectionResponse) {
    RPC_CHECK(episodic_service_check_name(call, "name", req->name));
    tier_ctx c;
    RPC_CHECK(episodic_service_ctx(&c, call));
    vs_collection col;
    int rc = vstore_get_collection(svc->vs, &c, req->name, &col);
    if (rc != STATUS_OK) return episodic_service_status(call, rc, &c);
    if (!(resp->collection = render_collection(c.ar, c.p, &col))) return rpc_call_oom(call);
    return GRPC_STATUS_OK;
}

RPC_UNARY_HANDLER(episodic_do_list_collections, episodic_service,
                  Memory__V1__ListCollectionsRequest, Memory__V1__ListCollectionsResponse) {
    int size, resumed;
    tier_page pg;
    const char *after = NULL;
    RPC_CHECK(tier_page_size(call, req->page_size, &size));
    RPC_CHECK(tier_page_bind(call, authn_principal(call), &req->base, &pg));
    RPC_CHECK(tier_page_open(call, &pg, req->page_token, &after, 1, 1, &resumed));
    tier_ctx c;
    RPC_CHECK(episodic_service_ctx(&c, call));
    vs_collection *cols;
    size_t n;
    /* One more than the page: whether a next page exists. */
    int rc =
        vstore_list_collections(svc->vs, &c, resumed ? after : NULL, (size_t)size + 1, &cols, &n);
    if (rc != STATUS_OK) return episodic_service_status(call, rc, &c);
    size_t shown = n > (size_t)size ? (size_t)size : n;
    resp->collections = arena_alloc(c.ar, (shown ? shown : 1) * sizeof *resp->collections);
    if (!resp->collections) return rpc_call_oom(call);
    for (size_t i = 0; i < shown; i++)
        if (!(resp->collections[i] = render_collection(c.ar, c.p, &cols[i])))
            return rpc_call_oom(call);
    resp->n_collections = shown;
    if (n > (size_t)size) {
        const char *next = cols[shown - 1].name;
        if (!(resp->next_page_token = tier_page_seal(call, &pg, &next, 1)))
            return rpc_call_oom(call);
    }
    return GRPC_STATUS_OK;
}

RPC_UNARY_HANDLER(episodic_do_delete_collection, episodic_service,
                  Memory__V1__DeleteCollectionRequest, Memory__V1__DeleteCollectionResponse) {
    RPC_CHECK(episodic_service_check_name(call, "name", req->name));
    tier_ctx c;
    RPC_CHECK(episodic_service_ctx(&c, call));
    tier_ctx_audit_writes(&c, call, svc->audit);
    tier_target(call, "collection:%s", req->name);
    int rc = vstore_delete_collection(svc->vs, &c, req->name);
    if (rc != STATUS_OK) return episodic_service_status(call, rc, &c);
    return GRPC_STATUS_OK;
}
