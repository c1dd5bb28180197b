/* episodic_service: the episodic tier and memory.v1.EpisodicMemory; see
 * episodic_service.h. */
#include "service/episodic/episodic_service.h"
#include "service/episodic/episodic_erase.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory/v1/episodic_memory.pb-c.h"
#include "service/auth/authn.h"
#include "service/core/log.h"
#include "service/core/text.h"
#include "service/embed/embedder.h"
#include "service/episodic/episodic_embedded.h"
#include "service/episodic/episodic_filter.h"
#include "service/episodic/episodic_index.h"
#include "service/episodic/episodic_service_internal.h"
#include "service/episodic/episodic_text.h"
#include "service/lexical/lex_text.h"
#include "service/metrics/backend_metrics.h"
#include "service/pb/pbjson.h"
#include "service/pb/pbtime.h"
#include "service/pii/pii_policy.h"
#include "service/qdrant/qdrant_store.h"
#include "service/tier/tier_call.h"
#include "service/tier/tier_check.h"
#include "service/tier/tier_page.h"
#include "service/vstore/vstore_catalog.h"

#define IDS_MAX 1000

grpc_status_code episodic_service_status(rpc_call *call, int rc, const tier_ctx *c) {
    return tier_status(call, rc, c);
}

/* The call's context. Every method blocks a task-pool thread (the
 * embedded index computes; the Qdrant client waits), so a client's cancel
 * is watched: it ends a Qdrant transfer at once. */
grpc_status_code episodic_service_ctx(tier_ctx *c, rpc_call *call) {
    *c = tier_ctx_for(call, "episodic", NULL);
    return tier_ctx_watch_cancel(c, call);
}

/* A write's audit row is stored before it is answered: in the write's own
 * transaction on the embedded backend (its catalog and points are in
 * PostgreSQL, and the context carries the audit hooks:
 * tier_ctx_audit_writes, with the targets named before the write runs),
 * in one of its own after a Qdrant write, here. */
int episodic_service_audited(const episodic_service *svc, tier_ctx *c, int rc) {
    if (rc != STATUS_OK || !svc->remote) return rc;
    return tier_sql_audit_row(svc->pg, c);
}

void episodic_service_target(rpc_call *call, const char *collection, const vs_id *id) {
    char buf[37];
    tier_target(call, "point:%s/%s", collection, vs_id_text(id, buf));
}

/* ------------------------------------------------------------ validation */

grpc_status_code episodic_service_check_name(rpc_call *call, const char *field, const char *name) {
    size_t n = strlen(name);
    if (n == 0) return rpc_call_invalid(call, "%s: required", field);
    if (n > VS_NAME_MAX)
        return rpc_call_invalid(call, "%s: %zu characters; at most %d", field, n, VS_NAME_MAX);
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '-'))
            return rpc_call_invalid(call, "%s: only A-Z, a-z, 0-9, '_' and '-' are allowed", field);
    }
    return GRPC_STATUS_OK;
}

/* The request's vector checked against the collection: a copy in the
 * arena, normalized for COSINE. */
grpc_status_code episodic_service_check_vector(rpc_call *call, const char *field, const float *v,
                                               size_t n, const vs_collection *col,
                                               const float **out) {
    if (n != (size_t)col->dims)
        return rpc_call_invalid(call, "%s: %zu components; collection %s has %d dimensions", field,
                                n, col->name, col->dims);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return rpc_call_invalid(call, "%s[%zu]: %s is not a finite number", field, i,
                                    isnan(v[i]) ? "NaN" : "infinity");
    float *copy = arena_alloc(rpc_call_arena(call), n * sizeof *copy);
    if (!copy) return rpc_call_oom(call);
    memcpy(copy, v, n * sizeof *copy);
    if (col->distance == VS_COSINE) episodic_index_normalize(copy, (int)n);
    *out = copy;
    return GRPC_STATUS_OK;
}

/* An upserted point's vector: against the collection's dims, or, in a
 * collection of dims 0, against the batch's first vector (*batch_dims,
 * set by it). */
grpc_status_code episodic_service_check_batch_vector(rpc_call *call, const char *field,
                                                     const Memory__V1__PointInput *p,
                                                     const vs_collection *col, int *batch_dims,
                                                     const float **out) {
    if (col->dims == 0) {
        if (p->n_vector > VS_MAX_DIMS)
            return rpc_call_invalid(call, "%s: %zu components; at most %d", field, p->n_vector,
                                    VS_MAX_DIMS);
        if (*batch_dims && p->n_vector != (size_t)*batch_dims)
            return rpc_call_invalid(call,
                                    "%s: %zu components; collection %s has no vector yet, and "
                                    "this batch's first has %d (one length per collection)",
                                    field, p->n_vector, col->name, *batch_dims);
        *batch_dims = (int)p->n_vector;
    }
    vs_collection sized = *col;
    sized.dims = *batch_dims;
    return episodic_service_check_vector(call, field, p->vector, p->n_vector, &sized, out);
}

grpc_status_code episodic_service_check_id(rpc_call *call, const char *field,
                                           const Memory__V1__PointId *pid, vs_id *out) {
    if (!pid || pid->kind_case == MEMORY__V1__POINT_ID__KIND__NOT_SET)
        return rpc_call_invalid(call, "%s: required (num or uuid)", field);
    if (episodic_filter_point_id(pid, out) != 0)
        return rpc_call_invalid(call,
                                "%s: \"%s\" is not a UUID "
                                "(xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)",
                                field, pid->uuid);
    return GRPC_STATUS_OK;
}

grpc_status_code episodic_service_check_ids(rpc_call *call, const char *field,
                                            Memory__V1__PointId **pids, size_t n, vs_id **out) {
    if (n == 0 || n > IDS_MAX)
        return rpc_call_invalid(call, "%s: %zu ids; give 1 to %d", field, n, IDS_MAX);
    vs_id *ids = arena_alloc(rpc_call_arena(call), n * sizeof *ids);
    if (!ids) return rpc_call_oom(call);
    for (size_t i = 0; i < n; i++) {
        char f[64];
        snprintf(f, sizeof f, "%s[%zu]", field, i);
        RPC_CHECK(episodic_service_check_id(call, f, pids[i], &ids[i]));
    }
    *out = ids;
    return GRPC_STATUS_OK;
}

grpc_status_code episodic_service_check_filter(rpc_call *call, const char *field,
                                               const Memory__V1__Filter *f) {
    char why[400];
    if (episodic_filter_check(f, field, why, sizeof why) != 0)
        return rpc_call_invalid(call, "%s", why);
    return GRPC_STATUS_OK;
}

/* A point call's context and the collection it names (validated, then
 * looked up). */
grpc_status_code episodic_service_collection_of(rpc_call *call, episodic_service *svc,
                                                const char *name, tier_ctx *c, vs_collection *col) {
    RPC_CHECK(episodic_service_check_name(call, "collection", name));
    RPC_CHECK(episodic_service_ctx(c, call));
    return episodic_service_status(call, vstore_get_collection(svc->vs, c, name, col), c);
}

/* ------------------------------------------------------------ rendering */

static Memory__V1__PointId *render_id(arena *a, const vs_id *id) {
    Memory__V1__PointId *m = arena_message(a, &memory__v1__point_id__descriptor);
    if (!m) return NULL;
    if (id->uuid[0]) {
        m->kind_case = MEMORY__V1__POINT_ID__KIND_UUID;
        m->uuid = arena_strdup(a, id->uuid);
        if (!m->uuid) return NULL;
    } else {
        m->kind_case = MEMORY__V1__POINT_ID__KIND_NUM;
        m->num = id->num;
    }
    return m;
}

/* Points and collections keep no tenant of their own: it is the caller's. */
Memory__V1__RecordMeta *episodic_service_render_meta(arena *a, const principal *p,
                                                     const tier_meta *v) {
    tier_meta m = *v;
    m.tenant = principal_tenant(p);
    return tier_meta_render(a, &m);
}

Memory__V1__Point *episodic_service_render_point(arena *a, const principal *p, const vs_point *pt,
                                                 int dims) {
    Memory__V1__Point *m = arena_message(a, &memory__v1__point__descriptor);
    if (!m) return NULL;
    if (!(m->id = render_id(a, &pt->id)) ||
        !(m->meta = episodic_service_render_meta(a, p, &pt->meta)))
        return NULL;
    if (pt->vector) {
        m->n_vector = (size_t)dims;
        m->vector = (float *)pt->vector;
    }
    if (pt->payload && !(m->payload = pbjson_json_to_struct(a, pt->payload))) return NULL;
    if (pt->text) m->text = (char *)pt->text;
    return m;
}

/* ------------------------------------------------------------ the tier */

static int erase(void *state, tier_ctx *c, const tier_erase_sel *sel, int64_t *count) {
    return episodic_erase(((episodic_service *)state)->vs, c, sel, count);
}

static int exporter(void *state, tier_ctx *c, const tier_erase_sel *sel, tier_export_emit emit,
                    void *emit_arg) {
    return episodic_export(((episodic_service *)state)->vs, c, sel, emit, emit_arg);
}

static int episodic_open(tier_env *env, void **state, char *err, size_t errlen) {
    const config *c = env->cfg;
    episodic_service *svc = *state = tier_state_new(sizeof *svc, err, errlen);
    if (!svc) return -1;
    svc->pii = env->pii;
    svc->pg = env->pg;
    svc->audit = env->audit;
    svc->remote = c && c->qdrant_url && c->qdrant_url[0];
    const char *lang = tier_env_text_language(env);
    if (!lex_analyzer_of_thread(lang) || strlen(lang) >= sizeof svc->language) {
        snprintf(err, errlen,
                 "--text-language %s: libstemmer has no stemmer of that name (english, "
                 "german, french, spanish, italian, dutch, russian, ...)",
                 lang);
        return -1;
    }
    snprintf(svc->language, sizeof svc->language, "%s", lang);
    if (svc->remote) {
        qdrant_options qo = {.url = c->qdrant_url,
                             .api_key = c->qdrant_api_key,
                             .collection_prefix = c->qdrant_collection_prefix,
                             .timeout_ms = c->qdrant_timeout_ms};
        if (qdrant_store_open(env->pg, &qo, &svc->vs, err, errlen) != 0) return -1;
    } else {
        if (episodic_embedded_open(env->pg, c ? (size_t)c->episodic_index_max_mb << 20 : 0, lang,
                                   &svc->vs) != 0)
            return tier_oom(err, errlen);
    }
    if (c && c->embedder_url && c->embedder_url[0]) {
        embedder_config ec = {.url = c->embedder_url,
                              .model = c->embedder_model,
                              .api_key = c->embedder_api_key,
                              .timeout_ms = c->embedder_timeout_ms,
                              .batch = c->embedder_batch};
        if (embedder_create(&ec, &svc->emb, err, errlen) != STATUS_OK) return -1;
        log_fields(LOG_INFO, "text embedder configured", LOG_F_STR, "url", embedder_url(svc->emb),
                   LOG_F_STR, "model", embedder_model(svc->emb), LOG_F_END);
    }
    /* Scraped only when memoryd serves /metrics (main resets the registry). */
    int metrics = c && c->metrics_listen && c->metrics_listen[0];
    if (metrics && vstore_register_metrics(svc->vs) != 0)
        return snprintf(err, errlen, "cannot register the episodic backend's metrics"), -1;
    if (metrics && svc->emb &&
        backend_metrics_add("embedder", "http", embedder_stats(svc->emb), BACKEND_HAS_DURATION,
                            NULL, NULL) != 0)
        return snprintf(err, errlen, "cannot register the embedder's metrics"), -1;
    log_fields(LOG_INFO, "episodic memory serving", LOG_F_STR, "backend", vstore_name(svc->vs),
               LOG_F_END);
    return 0;
}

static void episodic_free(void *state) {
    episodic_service *svc = state;
    if (!svc) return;
    vstore_free(svc->vs);
    embedder_free(svc->emb);
    free(svc);
}

/* EpisodicMemory's health with Qdrant: the Qdrant server answers. */
static int episodic_probe(void *state) {
    episodic_service *svc = state;
    return svc->remote ? vstore_probe(svc->vs) : 0;
}

#define SVC "memory.v1.EpisodicMemory"
static const rpc_method methods[] = {
    RPC_METHOD_BLOCKING(SVC, "CreateCollection", memory__v1__create_collection, "episodic:write",
                        episodic_do_create_collection),
    RPC_METHOD_BLOCKING(SVC, "GetCollection", memory__v1__get_collection, "episodic:read",
                        episodic_do_get_collection),
    RPC_METHOD_BLOCKING(SVC, "ListCollections", memory__v1__list_collections, "episodic:read",
                        episodic_do_list_collections),
    RPC_METHOD_BLOCKING(SVC, "DeleteCollection", memory__v1__delete_collection,
                        "episodic:write:all", episodic_do_delete_collection),
    RPC_METHOD_BLOCKING(SVC, "Upsert", memory__v1__episodic_memory_upsert, "episodic:write",
                        episodic_do_upsert),
    RPC_METHOD_BLOCKING(SVC, "Search", memory__v1__episodic_memory_search, "episodic:read",
                        episodic_do_search),
    RPC_METHOD_BLOCKING(SVC, "GetPoints", memory__v1__get_points, "episodic:read",
                        episodic_do_get_points),
    RPC_METHOD_BLOCKING(SVC, "DeletePoints", memory__v1__delete_points, "episodic:write",
                        episodic_do_delete_points),
    RPC_METHOD_BLOCKING(SVC, "Count", memory__v1__episodic_memory_count, "episodic:read",
                        episodic_do_count),
};

/* The catalog is in PostgreSQL; points in PostgreSQL too, or in Qdrant. */
static const tier_service services[] = {{SVC, HEALTH_NEEDS_PG | HEALTH_NEEDS_PROBE}};

static const tier_records records =
    TIER_RECORDS(MEMORY__V1__TIER__TIER_EPISODIC, TIER_ORDER_RECORDS + 10, erase, exporter,
                 "episodic_collections");

const tier episodic_tier = {
    TIER_FIELDS("episodic", services, methods, episodic_open, episodic_free),
    .route = &episodic_route,
    .probe = episodic_probe,
    .probe_backend = "qdrant",
    .records = &records,
};
