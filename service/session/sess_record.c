/* sess_record: see sess_record.h. */
#include "service/session/sess_record.h"

#include <string.h>

/* A decimal of at most 18 digits at *p, ending at stop. */
static int number(const char **p, const char *end, char stop, int64_t *out) {
    const char *s = *p;
    int64_t v = 0;
    int n = 0;
    while (s < end && *s >= '0' && *s <= '9' && n < 18) v = v * 10 + (*s++ - '0'), n++;
    if (n == 0 || s >= end || *s != stop) return -1;
    *out = v;
    *p = s + 1;
    return 0;
}

static int kinds(arena *a, const char *s, size_t len, sess_rec *out) {
    out->pii_kinds = NULL;
    out->npii = 0;
    if (len == 1 && s[0] == '-') return 0;
    size_t n = 1;
    for (size_t i = 0; i < len; i++) n += s[i] == ',';
    const char **k = arena_alloc(a, n * sizeof *k);
    if (!k) return -1;
    size_t start = 0, j = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != ',') {
            /* A kind is a name such as "payment_card". */
            if (!((s[i] >= 'a' && s[i] <= 'z') || s[i] == '_')) return -1;
            continue;
        }
        if (i == start) return -1; /* an empty kind */
        if (!(k[j++] = arena_strndup(a, s + start, i - start))) return -1;
        start = i + 1;
    }
    out->pii_kinds = k;
    out->npii = j;
    return 0;
}

int sess_rec_parse(arena *a, const char *blob, size_t len, int with_value, sess_rec *out) {
    const char *p = blob, *end = blob + len;
    int64_t label, ol;
    memset(out, 0, sizeof *out);
    if (number(&p, end, ' ', &label) != 0 || label < 1 || label > 4 ||
        number(&p, end, ' ', &out->version) != 0 || number(&p, end, ' ', &out->create_ms) != 0 ||
        number(&p, end, ' ', &out->update_ms) != 0)
        return -1;
    const char *sp = memchr(p, ' ', (size_t)(end - p));
    if (!sp || sp == p || kinds(a, p, (size_t)(sp - p), out) != 0) return -1;
    p = sp + 1;
    if (number(&p, end, ':', &ol) != 0 || ol > end - p || ol == 0 || memchr(p, '\0', (size_t)ol))
        return -1;
    if (!(out->owner = arena_strndup(a, p, (size_t)ol))) return -1;
    p += ol;
    if (p >= end || *p != '\n') return -1;
    p++;
    out->label = (int)label;
    if (with_value) {
        out->has_value = 1;
        out->value = (const uint8_t *)p;
        out->size = end - p;
        return 0;
    }
    /* The size: every byte left, digits. */
    if (end - p < 1 || end - p > 18) return -1;
    for (out->size = 0; p < end; p++) {
        if (*p < '0' || *p > '9') return -1;
        out->size = out->size * 10 + (*p - '0');
    }
    return 0;
}

const char *sess_rec_pii_field(arena *a, const char *const *k, size_t n) {
    if (n == 0) return "-";
    size_t len = 0;
    for (size_t i = 0; i < n; i++) len += strlen(k[i]) + 1;
    char *s = arena_alloc(a, len), *w = s;
    if (!s) return NULL;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(k[i]);
        memcpy(w, k[i], l);
        w += l;
        *w++ = i + 1 < n ? ',' : '\0';
    }
    return s;
}
