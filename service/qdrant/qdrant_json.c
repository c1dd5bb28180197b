/* qdrant_json: Qdrant request bodies (see the header); the writer is
 * qdrant_wbuf.c, filters qdrant_filter.c, answers qdrant_parse.c. */
#include "service/qdrant/qdrant_json.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "service/qdrant/qdrant_json_internal.h"

static void w_with_payload(wbuf *b, int payload) {
    qdrant_json_w_lit(b,
                      payload == QDRANT_JSON_PAYLOAD_ALL ? "true" : "{\"include\":[\"memoryd\"]}");
}

/* The end of a request that reads points: what of them to return. */
static int finish_read(wbuf *b, int payload, int with_vector, char **out, size_t *len) {
    qdrant_json_w_lit(b, ",\"with_payload\":");
    w_with_payload(b, payload);
    qdrant_json_w_lit(b, ",\"with_vector\":");
    qdrant_json_w_bool(b, with_vector);
    qdrant_json_w_lit(b, "}");
    return qdrant_json_w_finish(b, out, len);
}

/* ------------------------------------------------------------------ */
/* public builders                                                      */

int qdrant_json_version_at_least(const qdrant_json_version *v, int major, int minor) {
    return v->major > major || (v->major == major && v->minor >= minor);
}

const char *qdrant_json_distance_name(int distance) {
    switch (distance) {
    case VS_COSINE: return "Cosine";
    case VS_DOT: return "Dot";
    case VS_EUCLID: return "Euclid";
    default: return NULL;
    }
}

int qdrant_json_distance_parse(const char *name) {
    if (!name) return 0;
    if (strcmp(name, "Cosine") == 0) return VS_COSINE;
    if (strcmp(name, "Dot") == 0) return VS_DOT;
    if (strcmp(name, "Euclid") == 0) return VS_EUCLID;
    return 0;
}

int qdrant_json_create_collection(int dims, int distance, char **out, size_t *len, char *err,
                                  size_t errlen) {
    wbuf b;
    qdrant_json_w_init(&b, err, errlen);
    const char *d = qdrant_json_distance_name(distance);
    if (!d) qdrant_json_w_fail(&b, STATUS_EINVALID, "unknown distance %d", distance);
    else if (dims < 1 || dims > VS_MAX_DIMS)
        qdrant_json_w_fail(&b, STATUS_EINVALID, "dims %d out of 1..%d", dims, VS_MAX_DIMS);
    else qdrant_json_w_fmt(&b, "{\"vectors\":{\"size\":%d,\"distance\":\"%s\"}}", dims, d);
    return qdrant_json_w_finish(&b, out, len);
}

int qdrant_json_payload_index(const char *field, int kind, const qdrant_json_version *v, char **out,
                              size_t *len, char *err, size_t errlen) {
    wbuf b;
    qdrant_json_w_init(&b, err, errlen);
    qdrant_json_w_lit(&b, "{\"field_name\":");
    qdrant_json_w_str(&b, field ? field : "", "index field");
    /* is_tenant (1.11+) lays the tenant's points out together on disk;
     * older servers reject the parameterised schema. */
    if (kind == QDRANT_JSON_INDEX_INTEGER) qdrant_json_w_lit(&b, ",\"field_schema\":\"integer\"}");
    else if (kind == QDRANT_JSON_INDEX_TENANT && v && qdrant_json_version_at_least(v, 1, 11))
        qdrant_json_w_lit(&b, ",\"field_schema\":{\"type\":\"keyword\",\"is_tenant\":true}}");
    else qdrant_json_w_lit(&b, ",\"field_schema\":\"keyword\"}");
    return qdrant_json_w_finish(&b, out, len);
}

static void w_vector(wbuf *b, const float *v, int dims) {
    if (!v) {
        qdrant_json_w_fail(b, STATUS_EINVALID, "a point has no vector");
        return;
    }
    qdrant_json_w_lit(b, "[");
    for (int i = 0; i < dims && !b->rc; i++) {
        if (i) qdrant_json_w_lit(b, ",");
        qdrant_json_w_f32(b, v[i], "vector component");
    }
    qdrant_json_w_lit(b, "]");
}

static void w_meta(wbuf *b, const char *tenant, const tier_meta *m, const char *const *pii,
                   size_t npii) {
    qdrant_json_w_lit(b, "{\"tenant\":");
    qdrant_json_w_str(b, tenant, "tenant");
    qdrant_json_w_lit(b, ",\"owner\":");
    qdrant_json_w_str(b, m->owner ? m->owner : "", "owner");
    qdrant_json_w_fmt(b,
                      ",\"label\":%d,\"version\":%" PRId64 ",\"created_us\":%" PRId64
                      ",\"updated_us\":%" PRId64 ",\"pii_kinds\":[",
                      m->label, m->version, m->create_us, m->update_us);
    for (size_t i = 0; i < npii; i++) {
        if (i) qdrant_json_w_lit(b, ",");
        qdrant_json_w_str(b, pii[i] ? pii[i] : "", "pii kind");
    }
    qdrant_json_w_lit(b, "]}");
}

int qdrant_json_upsert(const char *tenant, int dims, const vs_point_in *pts, const tier_meta *metas,
                       size_t n, char **out, size_t *len, char *err, size_t errlen) {
    wbuf b;
    qdrant_json_w_init(&b, err, errlen);
    if (!tenant || !tenant[0]) qdrant_json_w_fail(&b, STATUS_EINVALID, "upsert needs a tenant");
    if (dims < 1 || dims > VS_MAX_DIMS)
        qdrant_json_w_fail(&b, STATUS_EINVALID, "dims %d out of range", dims);
    qdrant_json_w_lit(&b, "{\"points\":[");
    for (size_t i = 0; i < n && !b.rc; i++) {
        const vs_point_in *p = &pts[i];
        if (i) qdrant_json_w_lit(&b, ",");
        qdrant_json_w_lit(&b, "{\"id\":");
        qdrant_json_w_id(&b, &p->id);
        qdrant_json_w_lit(&b, ",\"vector\":");
        w_vector(&b, p->vector, dims);
        qdrant_json_w_lit(&b, ",\"payload\":{\"payload\":");
        if (p->payload && !json_is_object(p->payload))
            qdrant_json_w_fail(&b, STATUS_EINVALID, "a point payload must be a JSON object");
        if (p->payload) qdrant_json_w_json(&b, p->payload, "point payload");
        else qdrant_json_w_lit(&b, "{}");
        qdrant_json_w_lit(&b, ",\"memoryd\":");
        w_meta(&b, tenant, &metas[i], p->pii_kinds, p->npii);
        qdrant_json_w_lit(&b, "}}");
    }
    qdrant_json_w_lit(&b, "]}");
    return qdrant_json_w_finish(&b, out, len);
}

static void w_id_list(wbuf *b, const vs_id *ids, size_t n) {
    qdrant_json_w_lit(b, "[");
    for (size_t i = 0; i < n; i++) {
        if (i) qdrant_json_w_lit(b, ",");
        qdrant_json_w_id(b, &ids[i]);
    }
    qdrant_json_w_lit(b, "]");
}

int qdrant_json_retrieve(const vs_id *ids, size_t n, int payload, int with_vector, char **out,
                         size_t *len, char *err, size_t errlen) {
    wbuf b;
    qdrant_json_w_init(&b, err, errlen);
    qdrant_json_w_lit(&b, "{\"ids\":");
    w_id_list(&b, ids, n);
    return finish_read(&b, payload, with_vector, out, len);
}

int qdrant_json_query(const qdrant_json_scope *s, const vs_search *q, int dims, int legacy_search,
                      char **out, size_t *len, char *err, size_t errlen) {
    wbuf b;
    qdrant_json_w_init(&b, err, errlen);
    if (dims < 1 || dims > VS_MAX_DIMS)
        qdrant_json_w_fail(&b, STATUS_EINVALID, "dims %d out of range", dims);
    if (q->limit < 1) qdrant_json_w_fail(&b, STATUS_EINVALID, "limit %d is below 1", q->limit);
    if (q->offset < 0) qdrant_json_w_fail(&b, STATUS_EINVALID, "offset %d is negative", q->offset);
    qdrant_json_w_lit(&b, legacy_search ? "{\"vector\":" : "{\"query\":");
    w_vector(&b, q->vector, dims);
    qdrant_json_w_lit(&b, ",\"filter\":");
    qdrant_json_w_scoped_filter(&b, s, q->filter);
    qdrant_json_w_fmt(&b, ",\"limit\":%d,\"offset\":%d", q->limit, q->offset);
    if (q->has_threshold) {
        qdrant_json_w_lit(&b, ",\"score_threshold\":");
        qdrant_json_w_f32(&b, q->threshold, "score threshold");
    }
    return finish_read(&b, q->with_payload ? QDRANT_JSON_PAYLOAD_ALL : QDRANT_JSON_PAYLOAD_META,
                       q->with_vector, out, len);
}

int qdrant_json_scroll(const qdrant_json_scope *s, const Memory__V1__Filter *f, int limit,
                       const vs_id *offset, int payload, int with_vector, char **out, size_t *len,
                       char *err, size_t errlen) {
    wbuf b;
    qdrant_json_w_init(&b, err, errlen);
    if (limit < 1) qdrant_json_w_fail(&b, STATUS_EINVALID, "limit %d is below 1", limit);
    qdrant_json_w_lit(&b, "{\"filter\":");
    qdrant_json_w_scoped_filter(&b, s, f);
    qdrant_json_w_fmt(&b, ",\"limit\":%d", limit);
    if (offset) {
        qdrant_json_w_lit(&b, ",\"offset\":");
        qdrant_json_w_id(&b, offset);
    }
    return finish_read(&b, payload, with_vector, out, len);
}

int qdrant_json_count(const qdrant_json_scope *s, const Memory__V1__Filter *f, int exact,
                      char **out, size_t *len, char *err, size_t errlen) {
    wbuf b;
    qdrant_json_w_init(&b, err, errlen);
    qdrant_json_w_lit(&b, "{\"filter\":");
    qdrant_json_w_scoped_filter(&b, s, f);
    qdrant_json_w_lit(&b, ",\"exact\":");
    qdrant_json_w_bool(&b, exact);
    qdrant_json_w_lit(&b, "}");
    return qdrant_json_w_finish(&b, out, len);
}

int qdrant_json_delete(const vs_id *ids, size_t n, char **out, size_t *len, char *err,
                       size_t errlen) {
    wbuf b;
    qdrant_json_w_init(&b, err, errlen);
    qdrant_json_w_lit(&b, "{\"points\":");
    w_id_list(&b, ids, n);
    qdrant_json_w_lit(&b, "}");
    return qdrant_json_w_finish(&b, out, len);
}
