/* vstore: what every vector-store backend shares: point ids, the write
 * and read diodes per point, error formatting. */
#include "service/episodic/vstore.h"

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
    if (id->uuid[0])
        memcpy(buf, id->uuid, sizeof id->uuid);
    else
        snprintf(buf, 37, "%llu", (unsigned long long)id->num);
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

int vs_fail(vs_ctx *c, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return code;
}

int vs_visible(const vs_ctx *c, const char *owner, int label) {
    return principal_may_read(c->p, c->read_breadth, principal_tenant(c->p), owner, label);
}

int vs_stamp(vs_ctx *c, const vs_id *id, const vs_meta *existing, int requested_label,
             int64_t now_us, vs_meta *out) {
    memset(out, 0, sizeof *out);
    out->updated_us = now_us;
    if (!existing) {
        out->owner = principal_sub(c->p);
        out->label = principal_stamp_label(c->p, requested_label, 0);
        out->version = 1;
        out->created_us = now_us;
        return STATUS_OK;
    }
    /* A point the caller could not read may not be changed either: another
     * owner's without the :all write breadth, or one labelled above the
     * caller's read ceiling (common.proto, write diode). */
    int other_owner = strcmp(existing->owner, principal_sub(c->p)) != 0;
    if ((other_owner && c->write_breadth != PRINCIPAL_ALL) ||
        existing->label > (int)principal_clr(c->p)) {
        char buf[37];
        return vs_fail(c, STATUS_EDENIED, "point %s exists and may not be modified by %s",
                       vs_id_text(id, buf), principal_sub(c->p));
    }
    out->owner = existing->owner;
    out->label = principal_stamp_label(c->p, requested_label, existing->label);
    out->version = existing->version + 1;
    out->created_us = existing->created_us;
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

int64_t vs_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
