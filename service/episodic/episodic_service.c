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

#define POINTS_MAX 1000
#define IDS_MAX 1000
#define PAYLOAD_MAX (64 * 1024)
#define MODEL_NAME_MAX 256

grpc_status_code esvc_status(rpc_call *call, int rc, const tier_ctx *c) {
    return tier_status(call, rc, c);
}

/* The call's context. Every method blocks a task-pool thread (the
 * embedded index computes; the Qdrant client waits), so a client's cancel
 * is watched: it ends a Qdrant transfer at once. */
grpc_status_code esvc_ctx(tier_ctx *c, rpc_call *call) {
    *c = tier_ctx_for(call, "episodic", NULL);
    return tier_ctx_watch_cancel(c, call);
}

/* A write's audit row is stored before it is answered: in the write's own
 * transaction on the embedded backend (its catalog and points are in
 * PostgreSQL, and the context carries the audit hooks:
 * tier_ctx_audit_writes, with the targets named before the write runs),
 * in one of its own after a Qdrant write, here. */
static int audited(const episodic_service *svc, tier_ctx *c, int rc) {
    if (rc != STATUS_OK || !svc->remote) return rc;
    return tier_sql_audit_row(svc->pg, c);
}

void esvc_target(rpc_call *call, const char *collection, const vs_id *id) {
    char buf[37];
    tier_target(call, "point:%s/%s", collection, vs_id_text(id, buf));
}

/* ------------------------------------------------------------ validation */

grpc_status_code esvc_check_name(rpc_call *call, const char *field, const char *name) {
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
grpc_status_code esvc_check_vector(rpc_call *call, const char *field, const float *v, size_t n,
                                   const vs_collection *col, const float **out) {
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
static grpc_status_code check_batch_vector(rpc_call *call, const char *field,
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
    return esvc_check_vector(call, field, p->vector, p->n_vector, &sized, out);
}

static grpc_status_code check_id(rpc_call *call, const char *field, const Memory__V1__PointId *pid,
                                 vs_id *out) {
    if (!pid || pid->kind_case == MEMORY__V1__POINT_ID__KIND__NOT_SET)
        return rpc_call_invalid(call, "%s: required (num or uuid)", field);
    if (episodic_filter_point_id(pid, out) != 0)
        return rpc_call_invalid(call,
                                "%s: \"%s\" is not a UUID "
                                "(xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)",
                                field, pid->uuid);
    return GRPC_STATUS_OK;
}

static grpc_status_code check_ids(rpc_call *call, const char *field, Memory__V1__PointId **pids,
                                  size_t n, vs_id **out) {
    if (n == 0 || n > IDS_MAX)
        return rpc_call_invalid(call, "%s: %zu ids; give 1 to %d", field, n, IDS_MAX);
    vs_id *ids = arena_alloc(rpc_call_arena(call), n * sizeof *ids);
    if (!ids) return rpc_call_oom(call);
    for (size_t i = 0; i < n; i++) {
        char f[64];
        snprintf(f, sizeof f, "%s[%zu]", field, i);
        RPC_CHECK(check_id(call, f, pids[i], &ids[i]));
    }
    *out = ids;
    return GRPC_STATUS_OK;
}

grpc_status_code esvc_check_filter(rpc_call *call, const char *field, const Memory__V1__Filter *f) {
    char why[400];
    if (episodic_filter_check(f, field, why, sizeof why) != 0)
        return rpc_call_invalid(call, "%s", why);
    return GRPC_STATUS_OK;
}

/* A point call's context and the collection it names (validated, then
 * looked up). */
static grpc_status_code collection_of(rpc_call *call, episodic_service *svc, const char *name,
                                      tier_ctx *c, vs_collection *col) {
    RPC_CHECK(esvc_check_name(call, "collection", name));
    RPC_CHECK(esvc_ctx(c, call));
    return esvc_status(call, vstore_get_collection(svc->vs, c, name, col), c);
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
static Memory__V1__RecordMeta *render_meta(arena *a, const principal *p, const tier_meta *v) {
    tier_meta m = *v;
    m.tenant = principal_tenant(p);
    return tier_meta_render(a, &m);
}

Memory__V1__Point *esvc_render_point(arena *a, const principal *p, const vs_point *pt, int dims) {
    Memory__V1__Point *m = arena_message(a, &memory__v1__point__descriptor);
    if (!m) return NULL;
    if (!(m->id = render_id(a, &pt->id)) || !(m->meta = render_meta(a, p, &pt->meta))) return NULL;
    if (pt->vector) {
        m->n_vector = (size_t)dims;
        m->vector = (float *)pt->vector;
    }
    if (pt->payload && !(m->payload = pbjson_json_to_struct(a, pt->payload))) return NULL;
    if (pt->text) m->text = (char *)pt->text;
    return m;
}

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
    if (!(m->meta = render_meta(a, p, &meta))) return NULL;
    return m;
}

/* ------------------------------------------------------------ collections */

static RPC_UNARY_HANDLER(do_create_collection, episodic_service,
                         Memory__V1__CreateCollectionRequest,
                         Memory__V1__CreateCollectionResponse) {
    RPC_CHECK(esvc_check_name(call, "name", req->name));
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
    RPC_CHECK(esvc_ctx(&c, call));
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
    if (rc != STATUS_OK) return esvc_status(call, rc, &c);
    if (!(resp->collection = render_collection(c.ar, c.p, &col))) return rpc_call_oom(call);
    return GRPC_STATUS_OK;
}

static RPC_UNARY_HANDLER(do_get_collection, episodic_service, Memory__V1__GetCollectionRequest,
                         Memory__V1__GetCollectionResponse) {
    RPC_CHECK(esvc_check_name(call, "name", req->name));
    tier_ctx c;
    RPC_CHECK(esvc_ctx(&c, call));
    vs_collection col;
    int rc = vstore_get_collection(svc->vs, &c, req->name, &col);
    if (rc != STATUS_OK) return esvc_status(call, rc, &c);
    if (!(resp->collection = render_collection(c.ar, c.p, &col))) return rpc_call_oom(call);
    return GRPC_STATUS_OK;
}

static RPC_UNARY_HANDLER(do_list_collections, episodic_service, Memory__V1__ListCollectionsRequest,
                         Memory__V1__ListCollectionsResponse) {
    int size, resumed;
    tier_page pg;
    const char *after = NULL;
    RPC_CHECK(tier_page_size(call, req->page_size, &size));
    RPC_CHECK(tier_page_bind(call, authn_principal(call), &req->base, &pg));
    RPC_CHECK(tier_page_open(call, &pg, req->page_token, &after, 1, 1, &resumed));
    tier_ctx c;
    RPC_CHECK(esvc_ctx(&c, call));
    vs_collection *cols;
    size_t n;
    /* One more than the page: whether a next page exists. */
    int rc =
        vstore_list_collections(svc->vs, &c, resumed ? after : NULL, (size_t)size + 1, &cols, &n);
    if (rc != STATUS_OK) return esvc_status(call, rc, &c);
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

static RPC_UNARY_HANDLER(do_delete_collection, episodic_service,
                         Memory__V1__DeleteCollectionRequest,
                         Memory__V1__DeleteCollectionResponse) {
    RPC_CHECK(esvc_check_name(call, "name", req->name));
    tier_ctx c;
    RPC_CHECK(esvc_ctx(&c, call));
    tier_ctx_audit_writes(&c, call, svc->audit);
    tier_target(call, "collection:%s", req->name);
    int rc = vstore_delete_collection(svc->vs, &c, req->name);
    if (rc != STATUS_OK) return esvc_status(call, rc, &c);
    return GRPC_STATUS_OK;
}

/* ------------------------------------------------------------ Upsert */

/* The PII policy over point i's payload and text (*text NULL: none; under
 * redact, the redacted text is what gets embedded); with `pii:write` the
 * kinds found are kept for RecordMeta.pii_kinds. */
static grpc_status_code point_pii(rpc_call *call, const episodic_service *svc, size_t i,
                                  const Google__Protobuf__Struct **st, const char **text,
                                  const char ***kinds, size_t *nkinds) {
    char payload_path[48], text_path[48];
    snprintf(payload_path, sizeof payload_path, "points[%zu].payload", i);
    snprintf(text_path, sizeof text_path, "points[%zu].text", i);
    pii_field f[] = {PII_STRUCT(payload_path, st), PII_TEXT(text_path, text)};
    char why[512];
    int rc =
        pii_policy_apply(rpc_call_arena(call), pii_policy_mode(svc->pii, authn_principal(call)), f,
                         *text ? 2 : 1, kinds, nkinds, why, sizeof why);
    if (rc == STATUS_EINVALID) return rpc_call_invalid(call, "%s", why);
    return rc == STATUS_OK ? GRPC_STATUS_OK : rpc_call_oom(call);
}

static int id_order(const void *a, const void *b) { return vs_id_cmp(a, b); }

static void release_inputs(vs_point_in *in, size_t n) {
    for (size_t i = 0; i < n; i++) json_decref(in[i].payload);
}

static RPC_UNARY_HANDLER(do_upsert, episodic_service, Memory__V1__EpisodicMemoryUpsertRequest,
                         Memory__V1__EpisodicMemoryUpsertResponse) {
    arena *a = rpc_call_arena(call);
    if (req->n_points == 0 || req->n_points > POINTS_MAX)
        return rpc_call_invalid(call, "points: %zu points; give 1 to %d", req->n_points,
                                POINTS_MAX);
    tier_ctx c;
    vs_collection col;
    RPC_CHECK(collection_of(call, svc, req->collection, &c, &col));

    size_t n = req->n_points, ntext = 0;
    int batch_dims = col.dims; /* 0: the first vector's length sets it */
    vs_point_in *in = arena_zalloc(a, n * sizeof *in);
    vs_id *sorted = arena_alloc(a, n * sizeof *sorted);
    const char **texts = arena_alloc(a, n * sizeof *texts); /* the points given as text */
    size_t *text_of = arena_alloc(a, n * sizeof *text_of);  /* and where they are */
    if (!in || !sorted || !texts || !text_of) return rpc_call_oom(call);
    /* Validate the whole batch before anything is written. */
    grpc_status_code st = GRPC_STATUS_OK;
    for (size_t i = 0; i < n && st == GRPC_STATUS_OK; i++) {
        const Memory__V1__PointInput *p = req->points[i];
        char f[64];
        snprintf(f, sizeof f, "points[%zu].id", i);
        if ((st = check_id(call, f, p->id, &in[i].id)) != GRPC_STATUS_OK) break;
        const char *text = NULL;
        if (!p->text[0] && !p->n_vector) {
            st = rpc_call_invalid(call, "points[%zu]: give a vector, a text or both", i);
            break;
        }
        if (p->text[0]) {
            snprintf(f, sizeof f, "points[%zu].text", i);
            if ((st = episodic_text_check(call, f, p->text)) != GRPC_STATUS_OK) break;
            text = p->text;
        }
        if (p->n_vector) {
            snprintf(f, sizeof f, "points[%zu].vector", i);
            if ((st = check_batch_vector(call, f, p, &col, &batch_dims, &in[i].vector)) !=
                GRPC_STATUS_OK)
                break;
        }
        snprintf(f, sizeof f, "points[%zu].label", i);
        if ((st = tier_check_label(call, f, (int)p->label)) != GRPC_STATUS_OK) break;
        in[i].label = (int)p->label;
        const Google__Protobuf__Struct *payload = p->payload;
        if ((st = point_pii(call, svc, i, &payload, &text, &in[i].pii_kinds, &in[i].npii)) !=
            GRPC_STATUS_OK)
            break;
        /* A redacted text may have grown past the bound. */
        snprintf(f, sizeof f, "points[%zu].text", i);
        if (text && (st = episodic_text_check(call, f, text)) != GRPC_STATUS_OK) break;
        in[i].text = text;
        if (text && !p->n_vector && svc->emb) { /* embedded below */
            texts[ntext] = text;
            text_of[ntext++] = i;
        }
        snprintf(f, sizeof f, "points[%zu].payload", i);
        char why[300];
        if (!(in[i].payload = pbjson_struct_to_json(payload, f, why, sizeof why))) {
            st = rpc_call_invalid(call, "%s", why);
            break;
        }
        size_t bytes = json_dumpb(in[i].payload, NULL, 0, JSON_COMPACT);
        if (bytes > PAYLOAD_MAX)
            st = rpc_call_invalid(call, "%s: %zu bytes encoded as JSON; at most %d", f, bytes,
                                  PAYLOAD_MAX);
        sorted[i] = in[i].id;
    }
    if (st == GRPC_STATUS_OK) {
        qsort(sorted, n, sizeof *sorted, id_order);
        for (size_t i = 1; i < n; i++) {
            if (vs_id_cmp(&sorted[i - 1], &sorted[i]) == 0) {
                char buf[37];
                st = rpc_call_invalid(call, "points: id %s appears more than once",
                                      vs_id_text(&sorted[i], buf));
                break;
            }
        }
    }
    /* The whole batch is valid. Its texts without vectors are embedded,
     * in one go: in a collection without vectors yet, to the length of the
     * batch's own vectors when it has some (the embedder's model must
     * match), and only then is a length recorded, so a batch the embedder
     * fails sets nothing. */
    int unsized = col.dims == 0;
    if (unsized) col.dims = batch_dims;
    float *vecs = NULL;
    if (st == GRPC_STATUS_OK && ntext > 0)
        st = episodic_text_embed(call, svc->emb, svc->pg, &c, &col, "points[].text", texts, ntext,
                                 1, &vecs);
    for (size_t k = 0; st == GRPC_STATUS_OK && k < ntext; k++)
        in[text_of[k]].vector = vecs + k * (size_t)col.dims;
    /* The batch's vectors claim the length (unless episodic_text_embed has, or
     * another call set one meanwhile). */
    if (st == GRPC_STATUS_OK && unsized && batch_dims > 0) {
        col.dims = 0;
        st = esvc_status(call, vstore_catalog_claim_dims(svc->pg, &c, &col, batch_dims), &c);
        if (st == GRPC_STATUS_OK && col.dims != batch_dims)
            st = rpc_call_invalid(call,
                                  "points[].vector: %d components; collection %s has %d "
                                  "dimensions (set by another write meanwhile)",
                                  batch_dims, col.name, col.dims);
    }
    if (st == GRPC_STATUS_OK) {
        tier_ctx_audit_writes(&c, call, svc->audit);
        for (size_t i = 0; i < n; i++) esvc_target(call, col.name, &in[i].id);
        int rc = audited(svc, &c, vstore_upsert(svc->vs, &c, &col, in, n));
        st = esvc_status(call, rc, &c);
        if (rc == STATUS_OK) resp->upserted_count = (int64_t)n;
    }
    release_inputs(in, n);
    return st;
}

/* ------------------------------------------------------------ reads */

static RPC_UNARY_HANDLER(do_get_points, episodic_service, Memory__V1__GetPointsRequest,
                         Memory__V1__GetPointsResponse) {
    vs_id *ids;
    RPC_CHECK(check_ids(call, "ids", req->ids, req->n_ids, &ids));
    tier_ctx c;
    vs_collection col;
    RPC_CHECK(collection_of(call, svc, req->collection, &c, &col));
    vs_point *pts;
    size_t n;
    int rc = vstore_get(svc->vs, &c, &col, ids, req->n_ids, req->with_payload, req->with_vector,
                        &pts, &n);
    if (rc != STATUS_OK) return esvc_status(call, rc, &c);
    resp->points = arena_alloc(c.ar, (n ? n : 1) * sizeof *resp->points);
    grpc_status_code st = resp->points ? GRPC_STATUS_OK : rpc_call_oom(call);
    for (size_t i = 0; st == GRPC_STATUS_OK && i < n; i++) {
        if (!(resp->points[i] = esvc_render_point(c.ar, c.p, &pts[i], col.dims))) {
            st = rpc_call_oom(call);
            break;
        }
        resp->n_points = i + 1;
        esvc_target(call, col.name, &pts[i].id);
    }
    vs_points_release(pts, n);
    return st;
}

static RPC_UNARY_HANDLER(do_delete_points, episodic_service, Memory__V1__DeletePointsRequest,
                         Memory__V1__DeletePointsResponse) {
    grpc_status_code st;
    vs_id *ids = NULL;
    size_t nids = 0;
    switch (req->selector_case) {
    case MEMORY__V1__DELETE_POINTS_REQUEST__SELECTOR_IDS:
        nids = req->ids->n_ids;
        st = check_ids(call, "ids.ids", req->ids->ids, nids, &ids);
        break;
    case MEMORY__V1__DELETE_POINTS_REQUEST__SELECTOR_FILTER:
        st = esvc_check_filter(call, "filter", req->filter);
        break;
    default: st = rpc_call_invalid(call, "selector: set ids or filter");
    }
    if (st != GRPC_STATUS_OK) return st;
    tier_ctx c;
    vs_collection col;
    RPC_CHECK(collection_of(call, svc, req->collection, &c, &col));
    int64_t deleted = 0;
    tier_ctx_audit_writes(&c, call, svc->audit);
    for (size_t i = 0; i < nids; i++) esvc_target(call, col.name, &ids[i]);
    if (!ids) tier_target(call, "collection:%s", col.name);
    int rc = ids ? vstore_delete_ids(svc->vs, &c, &col, ids, nids, &deleted)
                 : vstore_delete_filter(svc->vs, &c, &col, req->filter, NULL, &deleted);
    rc = audited(svc, &c, rc);
    if (rc != STATUS_OK) return esvc_status(call, rc, &c);
    resp->deleted_count = deleted;
    return GRPC_STATUS_OK;
}

static RPC_UNARY_HANDLER(do_count, episodic_service, Memory__V1__EpisodicMemoryCountRequest,
                         Memory__V1__EpisodicMemoryCountResponse) {
    RPC_CHECK(esvc_check_filter(call, "filter", req->filter));
    tier_ctx c;
    vs_collection col;
    RPC_CHECK(collection_of(call, svc, req->collection, &c, &col));
    int rc = vstore_count(svc->vs, &c, &col, req->filter, req->exact, &resp->count);
    return esvc_status(call, rc, &c);
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
    env->episodic = svc;
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
                        do_create_collection),
    RPC_METHOD_BLOCKING(SVC, "GetCollection", memory__v1__get_collection, "episodic:read",
                        do_get_collection),
    RPC_METHOD_BLOCKING(SVC, "ListCollections", memory__v1__list_collections, "episodic:read",
                        do_list_collections),
    RPC_METHOD_BLOCKING(SVC, "DeleteCollection", memory__v1__delete_collection,
                        "episodic:write:all", do_delete_collection),
    RPC_METHOD_BLOCKING(SVC, "Upsert", memory__v1__episodic_memory_upsert, "episodic:write",
                        do_upsert),
    RPC_METHOD_BLOCKING(SVC, "Search", memory__v1__episodic_memory_search, "episodic:read",
                        esvc_do_search),
    RPC_METHOD_BLOCKING(SVC, "GetPoints", memory__v1__get_points, "episodic:read", do_get_points),
    RPC_METHOD_BLOCKING(SVC, "DeletePoints", memory__v1__delete_points, "episodic:write",
                        do_delete_points),
    RPC_METHOD_BLOCKING(SVC, "Count", memory__v1__episodic_memory_count, "episodic:read", do_count),
};

/* The catalog is in PostgreSQL; points in PostgreSQL too, or in Qdrant. */
static const tier_service services[] = {{SVC, HEALTH_NEEDS_PG | HEALTH_NEEDS_PROBE}};

static const tier_records records =
    TIER_RECORDS(MEMORY__V1__TIER__TIER_EPISODIC, TIER_ORDER_RECORDS + 10, erase, exporter,
                 "episodic_collections");

const tier episodic_tier = {
    TIER_FIELDS("episodic", services, methods, episodic_open, episodic_free),
    .probe = episodic_probe,
    .probe_backend = "qdrant",
    .records = &records,
};
