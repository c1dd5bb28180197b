/* episodic_service: the EpisodicMemory gRPC service; see episodic_service.h. */
#include "service/episodic/episodic_service.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory/v1/episodic_memory.pb-c.h"
#include "service/auth/authn.h"
#include "service/privacy/pii.h"
#include "service/privacy/pii_struct.h"
#include "service/core/log.h"
#include "service/episodic/episodic_filter.h"
#include "service/episodic/episodic_index.h"
#include "service/pb/page_token.h"
#include "service/pb/pbjson.h"
#include "service/pb/pbtime.h"

#define POINTS_MAX 1000
#define IDS_MAX 1000
#define PAYLOAD_MAX (64 * 1024)
#define LIMIT_MAX 1000
#define LIMIT_DEFAULT 10
#define OFFSET_MAX 10000
#define PAGE_MAX 1000
#define PAGE_DEFAULT 50
#define LIST_TOKEN_DOMAIN "memory.v1.EpisodicMemory/ListCollections"

struct episodic_service {
    vstore *vs;
    audit *aud;
    episodic_options o;
};

/* ------------------------------------------------------------ status */

static grpc_status_code vs_status(rpc_call *call, int rc, const vs_ctx *c) {
    return rpc_call_fail(call, rc, c->err);
}

static void init_ctx(vs_ctx *c, rpc_call *call) {
    memset(c, 0, sizeof *c);
    c->p = authn_principal(call);
    c->read_breadth = principal_scope(c->p, "episodic:read");
    c->write_breadth = principal_scope(c->p, "episodic:write");
    c->deadline_ms = rpc_call_deadline_ms(call);
    c->ar = rpc_call_arena(call);
}

static void target(rpc_call *call, const char *fmt, const char *a, const char *b) {
    const char *t = b ? arena_printf(rpc_call_arena(call), fmt, a, b)
                      : arena_printf(rpc_call_arena(call), fmt, a);
    if (t) audit_add_target(call, t);
}

static void point_target(rpc_call *call, const char *collection, const vs_id *id) {
    char buf[37];
    target(call, "point:%s/%s", collection, vs_id_text(id, buf));
}

/* ------------------------------------------------------------ validation */

static grpc_status_code check_name(rpc_call *call, const char *field, const char *name) {
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
static grpc_status_code check_vector(rpc_call *call, const char *field, const float *v, size_t n,
                                     const vs_collection *col, const float **out) {
    if (n != (size_t)col->dims)
        return rpc_call_invalid(call, "%s: %zu components; collection %s has %d dimensions",
                                field, n, col->name, col->dims);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return rpc_call_invalid(call, "%s[%zu]: %s is not a finite number", field, i,
                                    isnan(v[i]) ? "NaN" : "infinity");
    float *copy = arena_alloc(rpc_call_arena(call), n * sizeof *copy);
    if (!copy) return rpc_call_oom(call);
    memcpy(copy, v, n * sizeof *copy);
    if (col->distance == VS_COSINE) eidx_normalize(copy, (int)n);
    *out = copy;
    return GRPC_STATUS_OK;
}

static grpc_status_code check_id(rpc_call *call, const char *field,
                                 const Memory__V1__PointId *pid, vs_id *out) {
    if (!pid || pid->kind_case == MEMORY__V1__POINT_ID__KIND__NOT_SET)
        return rpc_call_invalid(call, "%s: required (num or uuid)", field);
    if (efilter_point_id(pid, out) != 0)
        return rpc_call_invalid(call, "%s: \"%s\" is not a UUID "
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
        grpc_status_code st = check_id(call, f, pids[i], &ids[i]);
        if (st != GRPC_STATUS_OK) return st;
    }
    *out = ids;
    return GRPC_STATUS_OK;
}

static grpc_status_code check_filter(rpc_call *call, const char *field,
                                     const Memory__V1__Filter *f) {
    char why[400];
    if (efilter_check(f, field, why, sizeof why) != 0) return rpc_call_invalid(call, "%s", why);
    return GRPC_STATUS_OK;
}

/* The collection a point call names (validated, then looked up). */
static grpc_status_code collection_of(rpc_call *call, episodic_service *svc, vs_ctx *c,
                                      const char *name, vs_collection *col) {
    grpc_status_code st = check_name(call, "collection", name);
    if (st != GRPC_STATUS_OK) return st;
    return vs_status(call, svc->vs->ops->get_collection(svc->vs, c, name, col), c);
}

/* ------------------------------------------------------------ rendering */

static Memory__V1__PointId *render_id(arena *a, const vs_id *id) {
    Memory__V1__PointId *m = arena_alloc(a, sizeof *m);
    if (!m) return NULL;
    memory__v1__point_id__init(m);
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

static Memory__V1__RecordMeta *render_meta(arena *a, const principal *p, const vs_meta *v) {
    Memory__V1__RecordMeta *m = arena_alloc(a, sizeof *m);
    if (!m) return NULL;
    memory__v1__record_meta__init(m);
    m->tenant = (char *)principal_tenant(p);
    m->owner = (char *)v->owner;
    m->label = (Memory__V1__Label)v->label;
    m->version = v->version;
    m->create_time = pbtime_timestamp(a, v->created_us);
    m->update_time = pbtime_timestamp(a, v->updated_us);
    if (!m->create_time || !m->update_time) return NULL;
    m->n_pii_kinds = v->npii;
    m->pii_kinds = (char **)v->pii_kinds;
    return m;
}

static Memory__V1__Point *render_point(arena *a, const principal *p, const vs_point *pt,
                                       int dims) {
    Memory__V1__Point *m = arena_alloc(a, sizeof *m);
    if (!m) return NULL;
    memory__v1__point__init(m);
    if (!(m->id = render_id(a, &pt->id)) || !(m->meta = render_meta(a, p, &pt->meta)))
        return NULL;
    if (pt->vector) {
        m->n_vector = (size_t)dims;
        m->vector = (float *)pt->vector;
    }
    if (pt->payload && !(m->payload = pbjson_json_to_struct(a, pt->payload))) return NULL;
    return m;
}

static Memory__V1__Collection *render_collection(arena *a, const principal *p,
                                                 const vs_collection *col) {
    Memory__V1__Collection *m = arena_alloc(a, sizeof *m);
    if (!m) return NULL;
    memory__v1__collection__init(m);
    m->name = (char *)col->name;
    m->dims = col->dims;
    m->distance = (Memory__V1__Distance)col->distance;
    vs_meta meta = {.owner = col->owner, .label = MEMORY__V1__LABEL__LABEL_PUBLIC,
                    .version = 1, .created_us = col->created_us, .updated_us = col->created_us};
    if (!(m->meta = render_meta(a, p, &meta))) return NULL;
    return m;
}

/* ------------------------------------------------------------ collections */

static grpc_status_code do_create_collection(rpc_call *call, const ProtobufCMessage *reqm,
                                             ProtobufCMessage *respm, void *arg) {
    episodic_service *svc = arg;
    const Memory__V1__CreateCollectionRequest *req =
        (const Memory__V1__CreateCollectionRequest *)reqm;
    Memory__V1__CreateCollectionResponse *resp = (Memory__V1__CreateCollectionResponse *)respm;
    grpc_status_code st = check_name(call, "name", req->name);
    if (st != GRPC_STATUS_OK) return st;
    if (req->dims < 1 || req->dims > VS_MAX_DIMS)
        return rpc_call_invalid(call, "dims: %d; must be 1 to %d", req->dims, VS_MAX_DIMS);
    if (req->distance < VS_COSINE || req->distance > VS_EUCLID)
        return rpc_call_invalid(call, "distance: %d; set DISTANCE_COSINE, DISTANCE_DOT or "
                                      "DISTANCE_EUCLID", (int)req->distance);
    vs_ctx c;
    init_ctx(&c, call);
    vs_collection col;
    int rc = svc->vs->ops->create_collection(svc->vs, &c, req->name, req->dims,
                                             (int)req->distance, &col);
    if (rc != STATUS_OK) return vs_status(call, rc, &c);
    target(call, "collection:%s", req->name, NULL);
    if (!(resp->collection = render_collection(c.ar, c.p, &col))) return rpc_call_oom(call);
    return GRPC_STATUS_OK;
}

static grpc_status_code do_get_collection(rpc_call *call, const ProtobufCMessage *reqm,
                                          ProtobufCMessage *respm, void *arg) {
    episodic_service *svc = arg;
    const Memory__V1__GetCollectionRequest *req = (const Memory__V1__GetCollectionRequest *)reqm;
    Memory__V1__GetCollectionResponse *resp = (Memory__V1__GetCollectionResponse *)respm;
    grpc_status_code st = check_name(call, "name", req->name);
    if (st != GRPC_STATUS_OK) return st;
    vs_ctx c;
    init_ctx(&c, call);
    vs_collection col;
    int rc = svc->vs->ops->get_collection(svc->vs, &c, req->name, &col);
    if (rc != STATUS_OK) return vs_status(call, rc, &c);
    if (!(resp->collection = render_collection(c.ar, c.p, &col))) return rpc_call_oom(call);
    return GRPC_STATUS_OK;
}

static grpc_status_code do_list_collections(rpc_call *call, const ProtobufCMessage *reqm,
                                            ProtobufCMessage *respm, void *arg) {
    episodic_service *svc = arg;
    const Memory__V1__ListCollectionsRequest *req =
        (const Memory__V1__ListCollectionsRequest *)reqm;
    Memory__V1__ListCollectionsResponse *resp = (Memory__V1__ListCollectionsResponse *)respm;
    if (req->page_size < 0)
        return rpc_call_invalid(call, "page_size: %d; must be >= 0", req->page_size);
    size_t size = req->page_size == 0 ? PAGE_DEFAULT
                  : req->page_size > PAGE_MAX ? PAGE_MAX : (size_t)req->page_size;
    vs_ctx c;
    init_ctx(&c, call);
    const char *bind[] = {principal_tenant(c.p), principal_sub(c.p)};
    const char *after = NULL;
    if (req->page_token[0] &&
        page_token_decode(c.ar, LIST_TOKEN_DOMAIN, bind, 2, req->page_token, &after, 1) != 0)
        return rpc_call_invalid(call, "page_token: not a token from a previous ListCollections "
                                      "by this caller");
    vs_collection *cols;
    size_t n;
    /* One more than the page: whether a next page exists. */
    int rc = svc->vs->ops->list_collections(svc->vs, &c, after, size + 1, &cols, &n);
    if (rc != STATUS_OK) return vs_status(call, rc, &c);
    size_t shown = n > size ? size : n;
    resp->collections = arena_alloc(c.ar, (shown ? shown : 1) * sizeof *resp->collections);
    if (!resp->collections) return rpc_call_oom(call);
    for (size_t i = 0; i < shown; i++)
        if (!(resp->collections[i] = render_collection(c.ar, c.p, &cols[i])))
            return rpc_call_oom(call);
    resp->n_collections = shown;
    if (n > size) {
        const char *field = cols[shown - 1].name;
        if (!(resp->next_page_token =
                  page_token_encode(c.ar, LIST_TOKEN_DOMAIN, bind, 2, &field, 1)))
            return rpc_call_oom(call);
    }
    return GRPC_STATUS_OK;
}

static grpc_status_code do_delete_collection(rpc_call *call, const ProtobufCMessage *reqm,
                                             ProtobufCMessage *respm, void *arg) {
    (void)respm;
    episodic_service *svc = arg;
    const Memory__V1__DeleteCollectionRequest *req =
        (const Memory__V1__DeleteCollectionRequest *)reqm;
    grpc_status_code st = check_name(call, "name", req->name);
    if (st != GRPC_STATUS_OK) return st;
    vs_ctx c;
    init_ctx(&c, call);
    int rc = svc->vs->ops->delete_collection(svc->vs, &c, req->name);
    if (rc != STATUS_OK) return vs_status(call, rc, &c);
    target(call, "collection:%s", req->name, NULL);
    return GRPC_STATUS_OK;
}

/* ------------------------------------------------------------ Upsert */

/* The write diode's PII rule over one payload: with `pii:write` the kinds
 * found are kept for RecordMeta.pii_kinds; otherwise PII is refused
 * (naming kinds and paths) or, under the redact policy, replaced. */
static grpc_status_code payload_pii(rpc_call *call, const episodic_service *svc, const char *path,
                                    Google__Protobuf__Struct **st, const char ***kinds,
                                    size_t *nkinds) {
    pii_findings f;
    pii_findings_init(&f);
    *kinds = NULL;
    *nkinds = 0;
    if (!*st) return GRPC_STATUS_OK;
    if (pii_scan_struct(&f, path, *st) != 0)
        return rpc_call_invalid(call, "%s: nests deeper than %d levels", path, PII_MAX_DEPTH);
    if (!f.kinds) return GRPC_STATUS_OK;
    arena *a = rpc_call_arena(call);
    if (principal_has(authn_principal(call), "pii:write")) {
        const char *names[PII_KIND_COUNT];
        size_t n = pii_kind_names(f.kinds, names, PII_KIND_COUNT);
        const char **v = arena_alloc(a, (n ? n : 1) * sizeof *v);
        if (!v) return rpc_call_oom(call);
        memcpy(v, names, n * sizeof *v);
        *kinds = v;
        *nkinds = n;
        return GRPC_STATUS_OK;
    }
    if (!svc->o.redact_pii) {
        char found[400];
        pii_findings_format(&f, found, sizeof found);
        return rpc_call_invalid(call, "PII found (%s); nothing was written", found);
    }
    Google__Protobuf__Struct *copy = pbjson_struct_copy(a, *st);
    if (!copy || pii_redact_struct(a, copy) != 0) return rpc_call_oom(call);
    *st = copy;
    return GRPC_STATUS_OK;
}

static int id_order(const void *a, const void *b) { return vs_id_cmp(a, b); }

static void release_inputs(vs_point_in *in, size_t n) {
    for (size_t i = 0; i < n; i++) json_decref(in[i].payload);
}

static grpc_status_code do_upsert(rpc_call *call, const ProtobufCMessage *reqm,
                                  ProtobufCMessage *respm, void *arg) {
    episodic_service *svc = arg;
    const Memory__V1__EpisodicMemoryUpsertRequest *req =
        (const Memory__V1__EpisodicMemoryUpsertRequest *)reqm;
    Memory__V1__EpisodicMemoryUpsertResponse *resp =
        (Memory__V1__EpisodicMemoryUpsertResponse *)respm;
    arena *a = rpc_call_arena(call);
    if (req->n_points == 0 || req->n_points > POINTS_MAX)
        return rpc_call_invalid(call, "points: %zu points; give 1 to %d", req->n_points,
                                POINTS_MAX);
    vs_ctx c;
    init_ctx(&c, call);
    vs_collection col;
    grpc_status_code st = collection_of(call, svc, &c, req->collection, &col);
    if (st != GRPC_STATUS_OK) return st;

    size_t n = req->n_points;
    vs_point_in *in = arena_zalloc(a, n * sizeof *in);
    vs_id *sorted = arena_alloc(a, n * sizeof *sorted);
    if (!in || !sorted) return rpc_call_oom(call);
    /* Validate the whole batch before anything is written. */
    for (size_t i = 0; i < n && st == GRPC_STATUS_OK; i++) {
        const Memory__V1__PointInput *p = req->points[i];
        char f[64];
        snprintf(f, sizeof f, "points[%zu].id", i);
        if ((st = check_id(call, f, p->id, &in[i].id)) != GRPC_STATUS_OK) break;
        snprintf(f, sizeof f, "points[%zu].vector", i);
        if ((st = check_vector(call, f, p->vector, p->n_vector, &col, &in[i].vector)) !=
            GRPC_STATUS_OK)
            break;
        if ((int)p->label < 0 || p->label > MEMORY__V1__LABEL__LABEL_SECRET) {
            st = rpc_call_invalid(call, "points[%zu].label: %d is not a memory.v1.Label", i,
                                  (int)p->label);
            break;
        }
        in[i].label = (int)p->label;
        Google__Protobuf__Struct *payload = p->payload;
        snprintf(f, sizeof f, "points[%zu].payload", i);
        if ((st = payload_pii(call, svc, f, &payload, &in[i].pii_kinds, &in[i].npii)) !=
            GRPC_STATUS_OK)
            break;
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
    if (st == GRPC_STATUS_OK) {
        int rc = svc->vs->ops->upsert(svc->vs, &c, &col, in, n);
        st = vs_status(call, rc, &c);
        if (rc == STATUS_OK) {
            resp->upserted_count = (int64_t)n;
            for (size_t i = 0; i < n; i++) point_target(call, col.name, &in[i].id);
        }
    }
    release_inputs(in, n);
    return st;
}

/* ------------------------------------------------------------ reads */

static grpc_status_code do_search(rpc_call *call, const ProtobufCMessage *reqm,
                                  ProtobufCMessage *respm, void *arg) {
    episodic_service *svc = arg;
    const Memory__V1__EpisodicMemorySearchRequest *req =
        (const Memory__V1__EpisodicMemorySearchRequest *)reqm;
    Memory__V1__EpisodicMemorySearchResponse *resp =
        (Memory__V1__EpisodicMemorySearchResponse *)respm;
    if (req->limit < 0 || req->limit > LIMIT_MAX)
        return rpc_call_invalid(call, "limit: %d; must be 1 to %d (0: %d)", req->limit,
                                LIMIT_MAX, LIMIT_DEFAULT);
    if (req->offset < 0 || req->offset > OFFSET_MAX)
        return rpc_call_invalid(call, "offset: %d; must be 0 to %d", req->offset, OFFSET_MAX);
    int has_threshold = req->threshold_case ==
                        MEMORY__V1__EPISODIC_MEMORY_SEARCH_REQUEST__THRESHOLD_SCORE_THRESHOLD;
    if (has_threshold && !isfinite(req->score_threshold))
        return rpc_call_invalid(call, "score_threshold: must be a finite number");
    grpc_status_code st = check_filter(call, "filter", req->filter);
    if (st != GRPC_STATUS_OK) return st;
    vs_ctx c;
    init_ctx(&c, call);
    vs_collection col;
    if ((st = collection_of(call, svc, &c, req->collection, &col)) != GRPC_STATUS_OK) return st;
    vs_search q = {.limit = req->limit ? req->limit : LIMIT_DEFAULT,
                   .offset = req->offset,
                   .filter = req->filter,
                   .has_threshold = has_threshold,
                   .threshold = req->score_threshold,
                   .with_payload = req->with_payload,
                   .with_vector = req->with_vector};
    if ((st = check_vector(call, "vector", req->vector, req->n_vector, &col, &q.vector)) !=
        GRPC_STATUS_OK)
        return st;
    vs_hit *hits;
    size_t n;
    int rc = svc->vs->ops->search(svc->vs, &c, &col, &q, &hits, &n);
    if (rc != STATUS_OK) return vs_status(call, rc, &c);
    resp->points = arena_alloc(c.ar, (n ? n : 1) * sizeof *resp->points);
    st = resp->points ? GRPC_STATUS_OK : rpc_call_oom(call);
    for (size_t i = 0; st == GRPC_STATUS_OK && i < n; i++) {
        Memory__V1__ScoredPoint *sp = arena_alloc(c.ar, sizeof *sp);
        if (!sp) {
            st = rpc_call_oom(call);
            break;
        }
        memory__v1__scored_point__init(sp);
        sp->score = hits[i].score;
        if (!(sp->point = render_point(c.ar, c.p, &hits[i].point, col.dims))) {
            st = rpc_call_oom(call);
            break;
        }
        resp->points[i] = sp;
        resp->n_points = i + 1;
        point_target(call, col.name, &hits[i].point.id);
    }
    vs_hits_release(hits, n);
    return st;
}

static grpc_status_code do_get_points(rpc_call *call, const ProtobufCMessage *reqm,
                                      ProtobufCMessage *respm, void *arg) {
    episodic_service *svc = arg;
    const Memory__V1__GetPointsRequest *req = (const Memory__V1__GetPointsRequest *)reqm;
    Memory__V1__GetPointsResponse *resp = (Memory__V1__GetPointsResponse *)respm;
    vs_id *ids;
    grpc_status_code st = check_ids(call, "ids", req->ids, req->n_ids, &ids);
    if (st != GRPC_STATUS_OK) return st;
    vs_ctx c;
    init_ctx(&c, call);
    vs_collection col;
    if ((st = collection_of(call, svc, &c, req->collection, &col)) != GRPC_STATUS_OK) return st;
    vs_point *pts;
    size_t n;
    int rc = svc->vs->ops->get(svc->vs, &c, &col, ids, req->n_ids, req->with_payload,
                               req->with_vector, &pts, &n);
    if (rc != STATUS_OK) return vs_status(call, rc, &c);
    resp->points = arena_alloc(c.ar, (n ? n : 1) * sizeof *resp->points);
    st = resp->points ? GRPC_STATUS_OK : rpc_call_oom(call);
    for (size_t i = 0; st == GRPC_STATUS_OK && i < n; i++) {
        if (!(resp->points[i] = render_point(c.ar, c.p, &pts[i], col.dims))) {
            st = rpc_call_oom(call);
            break;
        }
        resp->n_points = i + 1;
        point_target(call, col.name, &pts[i].id);
    }
    vs_points_release(pts, n);
    return st;
}

static grpc_status_code do_delete_points(rpc_call *call, const ProtobufCMessage *reqm,
                                         ProtobufCMessage *respm, void *arg) {
    episodic_service *svc = arg;
    const Memory__V1__DeletePointsRequest *req = (const Memory__V1__DeletePointsRequest *)reqm;
    Memory__V1__DeletePointsResponse *resp = (Memory__V1__DeletePointsResponse *)respm;
    grpc_status_code st;
    vs_id *ids = NULL;
    size_t nids = 0;
    switch (req->selector_case) {
    case MEMORY__V1__DELETE_POINTS_REQUEST__SELECTOR_IDS:
        nids = req->ids->n_ids;
        st = check_ids(call, "ids.ids", req->ids->ids, nids, &ids);
        break;
    case MEMORY__V1__DELETE_POINTS_REQUEST__SELECTOR_FILTER:
        st = check_filter(call, "filter", req->filter);
        break;
    default:
        st = rpc_call_invalid(call, "selector: set ids or filter");
    }
    if (st != GRPC_STATUS_OK) return st;
    vs_ctx c;
    init_ctx(&c, call);
    vs_collection col;
    if ((st = collection_of(call, svc, &c, req->collection, &col)) != GRPC_STATUS_OK) return st;
    int64_t deleted = 0;
    int rc = ids ? svc->vs->ops->delete_ids(svc->vs, &c, &col, ids, nids, &deleted)
                 : svc->vs->ops->delete_filter(svc->vs, &c, &col, req->filter, &deleted);
    if (rc != STATUS_OK) return vs_status(call, rc, &c);
    resp->deleted_count = deleted;
    for (size_t i = 0; i < nids; i++) point_target(call, col.name, &ids[i]);
    if (!ids) target(call, "collection:%s", col.name, NULL);
    return GRPC_STATUS_OK;
}

static grpc_status_code do_count(rpc_call *call, const ProtobufCMessage *reqm,
                                 ProtobufCMessage *respm, void *arg) {
    episodic_service *svc = arg;
    const Memory__V1__EpisodicMemoryCountRequest *req =
        (const Memory__V1__EpisodicMemoryCountRequest *)reqm;
    Memory__V1__EpisodicMemoryCountResponse *resp =
        (Memory__V1__EpisodicMemoryCountResponse *)respm;
    grpc_status_code st = check_filter(call, "filter", req->filter);
    if (st != GRPC_STATUS_OK) return st;
    vs_ctx c;
    init_ctx(&c, call);
    vs_collection col;
    if ((st = collection_of(call, svc, &c, req->collection, &col)) != GRPC_STATUS_OK) return st;
    int rc = svc->vs->ops->count(svc->vs, &c, &col, req->filter, req->exact, &resp->count);
    return vs_status(call, rc, &c);
}

/* ------------------------------------------------------------ registration */

int episodic_register(rpc_server *srv, vstore *vs, audit *aud, const episodic_options *o,
                      episodic_service **out) {
    episodic_service *svc = calloc(1, sizeof *svc);
    if (!svc) return -1;
    svc->vs = vs;
    svc->aud = aud;
    if (o) svc->o = *o;
#define M(name, req, resp, scope, fn)                                                        \
    {"/memory.v1.EpisodicMemory/" name, &memory__v1__##req##__descriptor,                   \
     &memory__v1__##resp##__descriptor, scope, fn}
    static const rpc_unary_def methods[] = {
        M("CreateCollection", create_collection_request, create_collection_response,
          "episodic:write", do_create_collection),
        M("GetCollection", get_collection_request, get_collection_response, "episodic:read",
          do_get_collection),
        M("ListCollections", list_collections_request, list_collections_response,
          "episodic:read", do_list_collections),
        M("DeleteCollection", delete_collection_request, delete_collection_response,
          "episodic:write:all", do_delete_collection),
        M("Upsert", episodic_memory_upsert_request, episodic_memory_upsert_response,
          "episodic:write", do_upsert),
        M("Search", episodic_memory_search_request, episodic_memory_search_response,
          "episodic:read", do_search),
        M("GetPoints", get_points_request, get_points_response, "episodic:read", do_get_points),
        M("DeletePoints", delete_points_request, delete_points_response, "episodic:write",
          do_delete_points),
        M("Count", episodic_memory_count_request, episodic_memory_count_response,
          "episodic:read", do_count),
    };
#undef M
    if (rpc_server_add_unary_methods(srv, methods, sizeof methods / sizeof methods[0], svc) != 0) {
        free(svc);
        return -1;
    }
    log_fields(LOG_INFO, "episodic memory serving", LOG_F_STR, "backend", vs->ops->name,
               LOG_F_END);
    *out = svc;
    return 0;
}

void episodic_service_free(episodic_service *s) { free(s); }
