/* vstore: what every vector-store backend shares: point ids, the write
 * and read diodes per point, error formatting. */
#include "service/vstore/vstore.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int vs_id_cmp(const vs_id *a, const vs_id *b) {
    int au = a->uuid[0] != '\0', bu = b->uuid[0] != '\0';
    if (au != bu) return au - bu;
    if (au) return strcmp(a->uuid, b->uuid);
    return a->num < b->num ? -1 : a->num > b->num;
}

const char *vs_id_text(const vs_id *id, char *buf) {
    if (id->uuid[0]) memcpy(buf, id->uuid, sizeof id->uuid);
    else snprintf(buf, 37, "%llu", (unsigned long long)id->num);
    return buf;
}

int vs_uuid_parse(const char *s, vs_id *out) {
    static const int dash[] = {8, 13, 18, 23};
    if (strlen(s) != 36) return -1;
    for (int i = 0, d = 0; i < 36; i++) {
        if (d < 4 && i == dash[d]) {
            if (s[i] != '-') return -1;
            d++;
            continue;
        }
        if (!isxdigit((unsigned char)s[i])) return -1;
    }
    for (int i = 0; i < 36; i++) out->uuid[i] = (char)tolower((unsigned char)s[i]);
    out->uuid[36] = '\0';
    out->num = 0;
    return 0;
}

int vs_id_parse(const char *s, vs_id *out) {
    if (strchr(s, '-')) return vs_uuid_parse(s, out);
    size_t n = strlen(s);
    if (n == 0 || n > 20 || (n > 1 && s[0] == '0')) return -1;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return -1;
    errno = 0;
    unsigned long long v = strtoull(s, NULL, 10);
    if (errno == ERANGE) return -1;
    memset(out, 0, sizeof *out);
    out->num = v;
    return 0;
}

void vstore_free(vstore *vs) {
    if (vs) vs->ops->free(vs);
}

const char *vstore_name(const vstore *vs) { return vs->ops->name; }
int vstore_probe(vstore *vs) { return vs->ops->probe(vs); }
int vstore_register_metrics(vstore *vs) { return vs->ops->register_metrics(vs); }

int vstore_create_collection(vstore *vs, tier_ctx *c, const char *name, int dims, int distance,
                             const char *model, vs_collection *out) {
    return vs->ops->create_collection(vs, c, name, dims, distance, model, out);
}

int vstore_get_collection(vstore *vs, tier_ctx *c, const char *name, vs_collection *out) {
    return vs->ops->get_collection(vs, c, name, out);
}

int vstore_list_collections(vstore *vs, tier_ctx *c, const char *after, size_t limit,
                            vs_collection **out, size_t *n) {
    return vs->ops->list_collections(vs, c, after, limit, out, n);
}

int vstore_delete_collection(vstore *vs, tier_ctx *c, const char *name) {
    return vs->ops->delete_collection(vs, c, name);
}

int vstore_upsert(vstore *vs, tier_ctx *c, const vs_collection *col, const vs_point_in *pts,
                  size_t n) {
    return vs->ops->upsert(vs, c, col, pts, n);
}

int vstore_search(vstore *vs, tier_ctx *c, const vs_collection *col, const vs_search *q,
                  vs_hit **out, size_t *n) {
    return vs->ops->search(vs, c, col, q, out, n);
}

int vstore_get(vstore *vs, tier_ctx *c, const vs_collection *col, const vs_id *ids, size_t n,
               int with_payload, int with_vector, vs_point **out, size_t *nout) {
    return vs->ops->get(vs, c, col, ids, n, with_payload, with_vector, out, nout);
}

int vstore_delete_ids(vstore *vs, tier_ctx *c, const vs_collection *col, const vs_id *ids, size_t n,
                      int64_t *deleted) {
    return vs->ops->delete_ids(vs, c, col, ids, n, deleted);
}

int vstore_delete_filter(vstore *vs, tier_ctx *c, const vs_collection *col,
                         const Memory__V1__Filter *filter, const vs_meta_sel *meta,
                         int64_t *deleted) {
    return vs->ops->delete_filter(vs, c, col, filter, meta, deleted);
}

int vstore_count(vstore *vs, tier_ctx *c, const vs_collection *col,
                 const Memory__V1__Filter *filter, int exact, int64_t *count) {
    return vs->ops->count(vs, c, col, filter, exact, count);
}

int vstore_scroll(vstore *vs, tier_ctx *c, const vs_collection *col,
                  const Memory__V1__Filter *filter, const vs_id *after, size_t limit,
                  int with_payload, vs_point **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (limit == 0) return STATUS_OK;
    /* One page is held whole (and Qdrant takes an int limit). */
    if (limit > VS_SCROLL_MAX)
        return tier_fail(c, STATUS_EINVALID, "scroll limit %zu is above %d", limit, VS_SCROLL_MAX);
    return vs->ops->scroll(vs, c, col, filter, after, limit, with_payload, out, n);
}

int vs_stamp(tier_ctx *c, const vs_id *id, const tier_meta *existing, int requested_label,
             int64_t now_us, tier_meta *out) {
    memset(out, 0, sizeof *out);
    out->update_us = now_us;
    if (!existing) {
        out->owner = principal_sub(c->p);
        out->label = principal_stamp_label(c->p, requested_label, 0);
        out->version = 1;
        out->create_us = now_us;
        return STATUS_OK;
    }
    /* A point the caller could not read may not be changed either
     * (common.proto, write diode). */
    tier_row row = {1, existing->owner, existing->label, existing->version};
    char buf[37];
    int rc = tier_may_modify(c, &row, "point", vs_id_text(id, buf));
    if (rc != STATUS_OK) return rc;
    out->owner = existing->owner;
    out->label = principal_stamp_label(c->p, requested_label, existing->label);
    out->version = existing->version + 1;
    out->create_us = existing->create_us;
    return STATUS_OK;
}

void vs_points_release(vs_point *pts, size_t n) {
    if (!pts) return;
    for (size_t i = 0; i < n; i++) {
        json_decref(pts[i].payload);
        pts[i].payload = NULL;
    }
}

void vs_hits_release(vs_hit *hits, size_t n) {
    if (!hits) return;
    for (size_t i = 0; i < n; i++) {
        json_decref(hits[i].point.payload);
        hits[i].point.payload = NULL;
    }
}

int vs_meta_match(const vs_meta_sel *s, const tier_meta *m) {
    if (!s) return 1;
    if (s->updated_before_us && m->update_us >= s->updated_before_us) return 0;
    if (s->label && m->label != s->label) return 0;
    if (!s->pii_kind) return 1;
    if (strcmp(s->pii_kind, "*") == 0) return m->npii > 0;
    for (size_t i = 0; i < m->npii; i++)
        if (m->pii_kinds[i] && strcmp(m->pii_kinds[i], s->pii_kind) == 0) return 1;
    return 0;
}
