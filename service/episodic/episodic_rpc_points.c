/* episodic_rpc_points: EpisodicMemory's points: Upsert (checks, the PII
 * policy, an embedding for texts), GetPoints, DeletePoints, Count; see
 * episodic_service.h. */
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

#define POINTS_MAX 1000         /* points in one Upsert */
#define PAYLOAD_MAX (64 * 1024) /* bytes of one point's payload as JSON */

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

RPC_UNARY_HANDLER(episodic_do_upsert, episodic_service, Memory__V1__EpisodicMemoryUpsertRequest,
                  Memory__V1__EpisodicMemoryUpsertResponse) {
    arena *a = rpc_call_arena(call);
    if (req->n_points == 0 || req->n_points > POINTS_MAX)
        return rpc_call_invalid(call, "points: %zu points; give 1 to %d", req->n_points,
                                POINTS_MAX);
    tier_ctx c;
    vs_collection col;
    RPC_CHECK(episodic_service_collection_of(call, svc, req->collection, &c, &col));

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
        if ((st = episodic_service_check_id(call, f, p->id, &in[i].id)) != GRPC_STATUS_OK) break;
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
            if ((st = episodic_service_check_batch_vector(call, f, p, &col, &batch_dims,
                                                          &in[i].vector)) != GRPC_STATUS_OK)
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
        st = episodic_service_status(call, vstore_catalog_claim_dims(svc->pg, &c, &col, batch_dims),
                                     &c);
        if (st == GRPC_STATUS_OK && col.dims != batch_dims)
            st = rpc_call_invalid(call,
                                  "points[].vector: %d components; collection %s has %d "
                                  "dimensions (set by another write meanwhile)",
                                  batch_dims, col.name, col.dims);
    }
    if (st == GRPC_STATUS_OK) {
        tier_ctx_audit_writes(&c, call, svc->audit);
        for (size_t i = 0; i < n; i++) episodic_service_target(call, col.name, &in[i].id);
        int rc = episodic_service_audited(svc, &c, vstore_upsert(svc->vs, &c, &col, in, n));
        st = episodic_service_status(call, rc, &c);
        if (rc == STATUS_OK) resp->upserted_count = (int64_t)n;
    }
    release_inputs(in, n);
    return st;
}

/* ------------------------------------------------------------ reads */

RPC_UNARY_HANDLER(episodic_do_get_points, episodic_service, Memory__V1__GetPointsRequest,
                  Memory__V1__GetPointsResponse) {
    vs_id *ids;
    RPC_CHECK(episodic_service_check_ids(call, "ids", req->ids, req->n_ids, &ids));
    tier_ctx c;
    vs_collection col;
    RPC_CHECK(episodic_service_collection_of(call, svc, req->collection, &c, &col));
    vs_point *pts;
    size_t n;
    int rc = vstore_get(svc->vs, &c, &col, ids, req->n_ids, req->with_payload, req->with_vector,
                        &pts, &n);
    if (rc != STATUS_OK) return episodic_service_status(call, rc, &c);
    resp->points = arena_alloc(c.ar, (n ? n : 1) * sizeof *resp->points);
    grpc_status_code st = resp->points ? GRPC_STATUS_OK : rpc_call_oom(call);
    for (size_t i = 0; st == GRPC_STATUS_OK && i < n; i++) {
        if (!(resp->points[i] = episodic_service_render_point(c.ar, c.p, &pts[i], col.dims))) {
            st = rpc_call_oom(call);
            break;
        }
        resp->n_points = i + 1;
        episodic_service_target(call, col.name, &pts[i].id);
    }
    vs_points_release(pts, n);
    return st;
}

RPC_UNARY_HANDLER(episodic_do_delete_points, episodic_service, Memory__V1__DeletePointsRequest,
                  Memory__V1__DeletePointsResponse) {
    grpc_status_code st;
    vs_id *ids = NULL;
    size_t nids = 0;
    switch (req->selector_case) {
    case MEMORY__V1__DELETE_POINTS_REQUEST__SELECTOR_IDS:
        nids = req->ids->n_ids;
        st = episodic_service_check_ids(call, "ids.ids", req->ids->ids, nids, &ids);
        break;
    case MEMORY__V1__DELETE_POINTS_REQUEST__SELECTOR_FILTER:
        st = episodic_service_check_filter(call, "filter", req->filter);
        break;
    default: st = rpc_call_invalid(call, "selector: set ids or filter");
    }
    if (st != GRPC_STATUS_OK) return st;
    tier_ctx c;
    vs_collection col;
    RPC_CHECK(episodic_service_collection_of(call, svc, req->collection, &c, &col));
    int64_t deleted = 0;
    tier_ctx_audit_writes(&c, call, svc->audit);
    for (size_t i = 0; i < nids; i++) episodic_service_target(call, col.name, &ids[i]);
    if (!ids) tier_target(call, "collection:%s", col.name);
    int rc = ids ? vstore_delete_ids(svc->vs, &c, &col, ids, nids, &deleted)
                 : vstore_delete_filter(svc->vs, &c, &col, req->filter, NULL, &deleted);
    rc = episodic_service_audited(svc, &c, rc);
    if (rc != STATUS_OK) return episodic_service_status(call, rc, &c);
    resp->deleted_count = deleted;
    return GRPC_STATUS_OK;
}

RPC_UNARY_HANDLER(episodic_do_count, episodic_service, Memory__V1__EpisodicMemoryCountRequest,
                  Memory__V1__EpisodicMemoryCountResponse) {
    RPC_CHECK(episodic_service_check_filter(call, "filter", req->filter));
    tier_ctx c;
    vs_collection col;
    RPC_CHECK(episodic_service_collection_of(call, svc, req->collection, &c, &col));
    int rc = vstore_count(svc->vs, &c, &col, req->filter, req->exact, &resp->count);
    return episodic_service_status(call, rc, &c);
}
