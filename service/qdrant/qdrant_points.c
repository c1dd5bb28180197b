/* qdrant_points: points in Qdrant's answers: ids, memoryd's metadata in
 * the payload, vectors, and the hits and records of searches, retrieves
 * and scrolls; see qdrant_json.h. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "service/qdrant/qdrant_json_internal.h"

int qdrant_json_parse_id(const json_t *j, vs_id *out) {
    memset(out, 0, sizeof *out);
    if (json_is_integer(j)) {
        json_int_t v = json_integer_value(j);
        if (v < 0) return -1;
        out->num = (uint64_t)v;
        return 0;
    }
    if (json_is_string(j)) {
        /* An embedded NUL would let strlen see less than the string. */
        if (strlen(json_string_value(j)) != json_string_length(j)) return -1;
        return vs_id_parse(json_string_value(j), out) == 0 ? 0 : -1;
    }
    return -1;
}

/* A metadata string: non-empty, no NUL, at most max bytes. */
static const char *meta_str(const json_t *o, const char *key, size_t max) {
    json_t *x = json_object_get(o, key);
    if (!json_is_string(x)) return NULL;
    size_t n = json_string_length(x);
    if (n == 0 || n > max || strlen(json_string_value(x)) != n) return NULL;
    return json_string_value(x);
}

int qdrant_json_parse_meta(const json_t *payload, const char *tenant, arena *a, tier_meta *out,
                           char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    json_t *m = json_is_object(payload) ? json_object_get(payload, "memoryd") : NULL;
    if (!json_is_object(m)) return text_fail(err, errlen, STATUS_EINTERNAL, "no memoryd metadata");
    const char *t = meta_str(m, "tenant", 4096);
    if (!t) return text_fail(err, errlen, STATUS_EINTERNAL, "memoryd.tenant is not a string");
    /* Another tenant's name is not repeated into a message that may leave
     * the service. */
    if (tenant && strcmp(t, tenant) != 0)
        return text_fail(err, errlen, STATUS_EINTERNAL, "memoryd.tenant names another tenant");
    const char *owner = meta_str(m, "owner", 4096);
    if (!owner) return text_fail(err, errlen, STATUS_EINTERNAL, "memoryd.owner is not a string");
    int64_t label, version, created, updated;
    if (qdrant_json_int_member(m, "label", 1, 4, &label) != 0)
        return text_fail(err, errlen, STATUS_EINTERNAL, "memoryd.label is not 1..4");
    if (qdrant_json_int_member(m, "version", 1, INT64_MAX, &version) != 0)
        return text_fail(err, errlen, STATUS_EINTERNAL,
                         "memoryd.version is not a positive integer");
    if (qdrant_json_int_member(m, "created_us", 0, INT64_MAX, &created) != 0 ||
        qdrant_json_int_member(m, "updated_us", 0, INT64_MAX, &updated) != 0)
        return text_fail(err, errlen, STATUS_EINTERNAL,
                         "memoryd.created_us/updated_us are not times");
    json_t *pk = json_object_get(m, "pii_kinds");
    if (!json_is_array(pk) || json_array_size(pk) > QDRANT_JSON_MAX_PII)
        return text_fail(err, errlen, STATUS_EINTERNAL,
                         "memoryd.pii_kinds is not a list of at most %d", QDRANT_JSON_MAX_PII);
    size_t npii = json_array_size(pk);
    const char **pii = NULL;
    if (npii) {
        pii = arena_alloc(a, npii * sizeof *pii);
        if (!pii) return text_fail(err, errlen, STATUS_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < npii; i++) {
        json_t *x = json_array_get(pk, i);
        size_t n = json_string_length(x);
        if (!json_is_string(x) || n == 0 || n > QDRANT_JSON_MAX_PII_LEN ||
            strlen(json_string_value(x)) != n)
            return text_fail(err, errlen, STATUS_EINTERNAL, "memoryd.pii_kinds[%zu] is not a kind",
                             i);
        if (!(pii[i] = arena_strdup(a, json_string_value(x))))
            return text_fail(err, errlen, STATUS_ENOMEM, "out of memory");
    }
    *out = (tier_meta){.owner = arena_strdup(a, owner),
                       .label = (int)label,
                       .version = version,
                       .create_us = created,
                       .update_us = updated,
                       .pii_kinds = pii,
                       .npii = npii};
    return out->owner ? STATUS_OK : text_fail(err, errlen, STATUS_ENOMEM, "out of memory");
}

/* A JSON number as a float: finite and within float range (a double
 * outside it has no float value: converting it is undefined). */
static int to_float(const json_t *x, float *out) {
    if (!json_is_number(x)) return -1;
    double d = json_number_value(x);
    if (!isfinite(d) || d > FLT_MAX || d < -FLT_MAX) return -1;
    *out = (float)d;
    return 0;
}

/* One Record or ScoredPoint (the fields they share). The payload reference
 * is taken last, so every earlier failure leaves nothing to drop. */
static int parse_point(const json_t *pj, const qdrant_json_read *r, arena *a, vs_point *out,
                       char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (!json_is_object(pj))
        return text_fail(err, errlen, STATUS_EINTERNAL, "a point is not an object");
    if (qdrant_json_parse_id(json_object_get(pj, "id"), &out->id) != 0)
        return text_fail(err, errlen, STATUS_EINTERNAL, "a point has no valid id");
    char idt[37], why[256];
    vs_id_text(&out->id, idt);
    json_t *payload = json_object_get(pj, "payload");
    int rc = qdrant_json_parse_meta(payload, r->tenant, a, &out->meta, why, sizeof why);
    if (rc != STATUS_OK)
        return text_fail(err, errlen, rc, "qdrant point %s is corrupt: %s", idt, why);
    if (r->with_vector) {
        json_t *v = json_object_get(pj, "vector");
        if (!json_is_array(v))
            return text_fail(err, errlen, STATUS_EINTERNAL,
                             "qdrant point %s has no (unnamed) vector", idt);
        if (r->dims < 1 || r->dims > VS_MAX_DIMS || json_array_size(v) != (size_t)r->dims)
            return text_fail(err, errlen, STATUS_EINTERNAL,
                             "qdrant point %s has %zu vector components, not %d", idt,
                             json_array_size(v), r->dims);
        float *f = arena_alloc(a, (size_t)r->dims * sizeof *f);
        if (!f) return text_fail(err, errlen, STATUS_ENOMEM, "out of memory");
        for (int i = 0; i < r->dims; i++)
            if (to_float(json_array_get(v, (size_t)i), &f[i]) != 0)
                return text_fail(err, errlen, STATUS_EINTERNAL,
                                 "qdrant point %s: vector component %d is not a float", idt, i);
        out->vector = f;
    }
    if (r->with_payload) {
        json_t *user = json_object_get(payload, "payload");
        if (!json_is_object(user))
            return text_fail(err, errlen, STATUS_EINTERNAL,
                             "qdrant point %s is corrupt: no payload object", idt);
        out->payload = json_incref(user);
    }
    return STATUS_OK;
}

/* res's list of points (res itself when key is NULL; what names the
 * request in errors) and zeroed room in a for as many items of elem bytes. */
static int points_of(json_t *res, const char *key, const char *what, arena *a, size_t elem,
                     json_t **pts, void **room, char *err, size_t errlen) {
    *pts = key ? json_object_get(res, key) : res;
    if (!json_is_array(*pts))
        return text_fail(err, errlen, STATUS_EINTERNAL, "qdrant's %s result has no list of points",
                         what);
    size_t cnt = json_array_size(*pts);
    *room = cnt ? arena_zalloc(a, cnt * elem) : NULL;
    if (cnt && !*room) return text_fail(err, errlen, STATUS_ENOMEM, "out of memory");
    return STATUS_OK;
}

int qdrant_json_parse_hits(const char *body, size_t len, const qdrant_json_read *r,
                           int legacy_search, arena *a, vs_hit **out, size_t *n, char *err,
                           size_t errlen) {
    *out = NULL;
    *n = 0;
    json_t *res = NULL;
    int rc = qdrant_json_parse_envelope(body, len, &res, err, errlen);
    if (rc != STATUS_OK) return rc;
    json_t *pts;
    void *room;
    rc = points_of(res, legacy_search ? NULL : "points", legacy_search ? "search" : "query", a,
                   sizeof(vs_hit), &pts, &room, err, errlen);
    if (rc != STATUS_OK) {
        json_decref(res);
        return rc;
    }
    vs_hit *hits = room;
    size_t cnt = json_array_size(pts), i = 0;
    for (; i < cnt; i++) {
        json_t *pj = json_array_get(pts, i);
        rc = parse_point(pj, r, a, &hits[i].point, err, errlen);
        if (rc != STATUS_OK) break;
        if (to_float(json_object_get(pj, "score"), &hits[i].score) != 0) {
            json_decref(hits[i].point.payload);
            hits[i].point.payload = NULL;
            rc = text_fail(err, errlen, STATUS_EINTERNAL, "a qdrant hit has no valid score");
            break;
        }
    }
    json_decref(res);
    if (rc != STATUS_OK) {
        vs_hits_release(hits, i);
        return rc;
    }
    *out = hits;
    *n = cnt;
    return STATUS_OK;
}

int qdrant_json_parse_records(const char *body, size_t len, const qdrant_json_read *r, int scroll,
                              arena *a, vs_point **out, size_t *n, vs_id *next, int *has_next,
                              char *err, size_t errlen) {
    *out = NULL;
    *n = 0;
    if (has_next) *has_next = 0;
    json_t *res = NULL;
    int rc = qdrant_json_parse_envelope(body, len, &res, err, errlen);
    if (rc != STATUS_OK) return rc;
    json_t *pts;
    void *room;
    rc = points_of(res, scroll ? "points" : NULL, scroll ? "scroll" : "retrieve", a,
                   sizeof(vs_point), &pts, &room, err, errlen);
    if (rc != STATUS_OK) {
        json_decref(res);
        return rc;
    }
    vs_id nx;
    int hn = 0;
    if (scroll) {
        json_t *o = json_object_get(res, "next_page_offset");
        if (o && !json_is_null(o)) {
            if (qdrant_json_parse_id(o, &nx) != 0) {
                json_decref(res);
                return text_fail(err, errlen, STATUS_EINTERNAL,
                                 "qdrant's next_page_offset is not a point id");
            }
            hn = 1;
        }
    }
    vs_point *p = room;
    size_t cnt = json_array_size(pts), i = 0;
    for (; i < cnt; i++) {
        rc = parse_point(json_array_get(pts, i), r, a, &p[i], err, errlen);
        if (rc != STATUS_OK) break;
    }
    json_decref(res);
    if (rc != STATUS_OK) {
        vs_points_release(p, i);
        return rc;
    }
    *out = p;
    *n = cnt;
    if (hn && next) *next = nx;
    if (has_next) *has_next = hn;
    return STATUS_OK;
}
