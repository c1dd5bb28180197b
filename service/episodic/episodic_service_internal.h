/* episodic_service_internal: what the files of the EpisodicMemory service
 * share: episodic_service.c (checks, rendering, the tier),
 * episodic_rpc_collections.c, episodic_rpc_points.c and episodic_search.c
 * (Search and the Router's part). Not for other modules. */
#ifndef MEMORYD_EPISODIC_EPISODIC_SERVICE_INTERNAL_H
#define MEMORYD_EPISODIC_EPISODIC_SERVICE_INTERNAL_H

#include "memory/v1/episodic_memory.pb-c.h"
#include "service/audit/audit.h"
#include "service/embed/embedder.h"
#include "service/episodic/episodic_service.h"
#include "service/pii/pii_policy.h"
#include "service/rpc/rpc.h"
#include "service/store/pg_pool.h"
#include "service/tier/tier_ctx.h"
#include "service/vstore/vstore.h"

#define LIMIT_MAX 1000
#define LIMIT_DEFAULT 10
#define OFFSET_MAX 10000

/* The tier's state: the vector store (embedded, or Qdrant when a URL is
 * configured; it owns it), the embedder (when configured; it owns it too)
 * and the PII policy. */
typedef struct episodic_service episodic_service;
struct episodic_service {
    vstore *vs;
    embedder *emb; /* NULL: no --embedder-url, texts are ranked lexically only */
    int remote;    /* Qdrant: a backend of its own for health */
    pii_policy pii;
    pg_pool *pg;       /* the catalog's (and the audit rows of Qdrant writes) */
    audit *audit;      /* writes' rows */
    char language[32]; /* texts are analyzed in it (--text-language) */
};

/* Its part of a routed query (episodic_search.c). */
extern const tier_route episodic_route;

/* A backend's STATUS_* as the call's status, its message from c. */
grpc_status_code episodic_service_status(rpc_call *call, int rc, const tier_ctx *c);
/* The call's context (blocking methods: the client's cancel is watched). */
grpc_status_code episodic_service_ctx(tier_ctx *c, rpc_call *call);
/* Names a point in the call's audit row. */
void episodic_service_target(rpc_call *call, const char *collection, const vs_id *id);
/* A collection name; a filter; a vector against col (a copy in the call's
 * arena, normalized for COSINE): GRPC_STATUS_OK or INVALID_ARGUMENT. */
grpc_status_code episodic_service_check_name(rpc_call *call, const char *field, const char *name);
grpc_status_code episodic_service_check_filter(rpc_call *call, const char *field,
                                               const Memory__V1__Filter *f);
grpc_status_code episodic_service_check_vector(rpc_call *call, const char *field, const float *v,
                                               size_t n, const vs_collection *col,
                                               const float **out);
/* A point as memory.v1.Point in a (the caller's tenant in its meta). */
Memory__V1__Point *episodic_service_render_point(arena *a, const principal *p, const vs_point *pt,
                                                 int dims);

/* A backend's code from a write, its audit row written first when it
 * succeeded (Qdrant's writes are not in PostgreSQL's transaction). */
int episodic_service_audited(const episodic_service *svc, tier_ctx *c, int rc);
/* A point's vector in a batch whose points must agree on dims (the first
 * sets *batch_dims for a collection created without them). */
grpc_status_code episodic_service_check_batch_vector(rpc_call *call, const char *field,
                                                     const Memory__V1__PointInput *p,
                                                     const vs_collection *col, int *batch_dims,
                                                     const float **out);
/* A point id (a number or a UUID); the n ids of a request. */
grpc_status_code episodic_service_check_id(rpc_call *call, const char *field,
                                           const Memory__V1__PointId *pid, vs_id *out);
grpc_status_code episodic_service_check_ids(rpc_call *call, const char *field,
                                            Memory__V1__PointId **pids, size_t n, vs_id **out);
/* The collection a request names, with the call's context. */
grpc_status_code episodic_service_collection_of(rpc_call *call, episodic_service *svc,
                                                const char *name, tier_ctx *c, vs_collection *col);
/* A record's metadata as memory.v1.RecordMeta in a. */
Memory__V1__RecordMeta *episodic_service_render_meta(arena *a, const principal *p,
                                                     const tier_meta *v);

/* The handlers (episodic_rpc_collections.c, episodic_rpc_points.c). */
RPC_UNARY_FN(episodic_do_create_collection);
RPC_UNARY_FN(episodic_do_get_collection);
RPC_UNARY_FN(episodic_do_list_collections);
RPC_UNARY_FN(episodic_do_delete_collection);
RPC_UNARY_FN(episodic_do_upsert);
RPC_UNARY_FN(episodic_do_get_points);
RPC_UNARY_FN(episodic_do_delete_points);
RPC_UNARY_FN(episodic_do_count);

/* EpisodicMemory.Search (episodic_search.c). */
grpc_status_code episodic_do_search(rpc_call *call, const ProtobufCMessage *req,
                                    ProtobufCMessage *resp, void *arg);

#endif
