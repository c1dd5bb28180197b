/* bb_codec: see bb_codec.h. */
#include "service/blackboard/bb_codec.h"

#include <string.h>

static const char *const suffix[BB_KEY_COUNT] = {":k", ":v", ":m", ":l", ":e"};

static int names_from(arena *a, const char *base, size_t len, bb_names *out) {
    out->base = base;
    out->base_len = len;
    for (int i = 0; i < BB_KEY_COUNT; i++)
        if (!(out->key[i] = arena_printf(a, "%.*s%s", (int)len, base, suffix[i]))) return -1;
    out->channel = arena_printf(a, "%.*s:c", (int)len, base);
    out->channel_len = len + 2;
    return out->channel ? 0 : -1;
}

int bb_names_make(arena *a, const char *tenant, const char *task, bb_names *out) {
    char *base = arena_printf(a, "memoryd:bb:{%zu:%s:%s}", strlen(tenant), tenant, task);
    return base ? names_from(a, base, strlen(base), out) : -1;
}

int bb_names_from_base(arena *a, const char *base, size_t len, bb_names *out) {
    char *copy = arena_strndup(a, base, len);
    return copy ? names_from(a, copy, len, out) : -1;
}

/* A decimal number of at most 18 digits (no sign) ending at a byte equal
 * to end, which is consumed. Advances *p; -1 when malformed. */
static int number(const char **p, const char *lim, char end, int64_t *out) {
    const char *s = *p;
    int64_t v = 0;
    int digits = 0;
    while (s < lim && *s >= '0' && *s <= '9') {
        if (++digits > 18) return -1;
        v = v * 10 + (*s++ - '0');
    }
    if (digits == 0 || s >= lim || *s != end) return -1;
    *p = s + 1;
    *out = v;
    return 0;
}

/* "<len>:<bytes>": the bytes and their length; -1 when malformed. */
static int counted(const char **p, const char *lim, const char **str, size_t *len) {
    int64_t n;
    if (number(p, lim, ':', &n) != 0 || n > lim - *p) return -1;
    *str = *p;
    *len = (size_t)n;
    *p += n;
    return 0;
}

int bb_base_parse(const char *base, size_t len, const char **tenant, size_t *tenant_len,
                  const char **task, size_t *task_len) {
    static const char prefix[] = "memoryd:bb:{";
    const char *p = base + sizeof prefix - 1, *lim = base + len;
    /* The task is the rest up to the closing brace: it may hold any
     * character, braces and colons too, while the tenant is counted. */
    if (len < sizeof prefix + 2 || memcmp(base, prefix, sizeof prefix - 1) != 0 || lim[-1] != '}' ||
        counted(&p, lim - 1, tenant, tenant_len) != 0 || p >= lim - 1 || *p != ':')
        return -1;
    *task = p + 1;
    *task_len = (size_t)(lim - 1 - *task);
    return 0;
}

int bb_header_parse(const char *s, size_t n, bb_header *h, size_t *used) {
    const char *p = s, *lim = s + n;
    int64_t label, pii;
    if (number(&p, lim, ' ', &h->version) != 0 || number(&p, lim, ' ', &label) != 0 ||
        number(&p, lim, ' ', &h->create_ms) != 0 || number(&p, lim, ' ', &h->update_ms) != 0 ||
        number(&p, lim, ' ', &h->lease_ms) != 0 || number(&p, lim, ' ', &pii) != 0 ||
        number(&p, lim, ' ', &h->size) != 0 || counted(&p, lim, &h->owner, &h->owner_len) != 0)
        return -1;
    if (label < 1 || label > 4 || pii > 0xffff) return -1;
    h->label = (int)label;
    h->pii = (unsigned)pii;
    *used = (size_t)(p - s);
    return 0;
}

int bb_event_parse(const char *s, size_t n, bb_event *ev) {
    const char *p = s, *lim = s + n;
    if (n < 2 || s[1] != ' ') return -1;
    ev->kind = (bb_event_kind)s[0];
    if (ev->kind != BB_PUT && ev->kind != BB_DELETE && ev->kind != BB_LEASE_EXPIRED) return -1;
    p += 2;
    size_t used;
    if (number(&p, lim, ' ', &ev->rev) != 0 || number(&p, lim, ' ', &ev->time_ms) != 0 ||
        number(&p, lim, ' ', &ev->expire_ms) != 0 || counted(&p, lim, &ev->id, &ev->id_len) != 0 ||
        counted(&p, lim, &ev->key, &ev->key_len) != 0 ||
        bb_header_parse(p, (size_t)(lim - p), &ev->h, &used) != 0)
        return -1;
    p += used;
    ev->json = p;
    ev->json_len = (size_t)(lim - p);
    if (ev->rev < 1 || ev->key_len == 0) return -1;
    return (ev->kind == BB_PUT) == (ev->json_len > 0) ? 0 : -1;
}
