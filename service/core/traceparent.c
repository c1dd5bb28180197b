/* traceparent: W3C trace context parsing and ids. */
#include "service/core/traceparent.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static int lower_hex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

static int all_zero(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != '0') return 0;
    return 1;
}

static int hex_digit(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

int traceparent_parse(const char *v, size_t n, char trace_id[TRACE_ID_HEX + 1],
                      char parent_id[TRACE_SPAN_HEX + 1], uint8_t *flags) {
    /* The fixed layout: vv-<32>-<16>-ff at offsets 0, 3, 36, 53. */
    if (!v || n < TRACEPARENT_LEN) return -1;
    if (!lower_hex(v, 2) || memcmp(v, "ff", 2) == 0) return -1;
    int v00 = memcmp(v, "00", 2) == 0;
    if (v00 ? n != TRACEPARENT_LEN : (n > TRACEPARENT_LEN && v[TRACEPARENT_LEN] != '-')) return -1;
    if (v[2] != '-' || v[35] != '-' || v[52] != '-') return -1;
    const char *tid = v + 3, *pid = v + 36, *fl = v + 53;
    if (!lower_hex(tid, TRACE_ID_HEX) || all_zero(tid, TRACE_ID_HEX) ||
        !lower_hex(pid, TRACE_SPAN_HEX) || all_zero(pid, TRACE_SPAN_HEX) || !lower_hex(fl, 2))
        return -1;
    memcpy(trace_id, tid, TRACE_ID_HEX);
    trace_id[TRACE_ID_HEX] = '\0';
    memcpy(parent_id, pid, TRACE_SPAN_HEX);
    parent_id[TRACE_SPAN_HEX] = '\0';
    *flags = (uint8_t)(hex_digit(fl[0]) << 4 | hex_digit(fl[1]));
    return 0;
}

void trace_random_hex(char *out, size_t n) {
    static _Thread_local uint64_t state;
    if (state == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        state = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)&ts;
        if (state == 0) state = 0x9e3779b97f4a7c15ull;
    }
    static const char hex[] = "0123456789abcdef";
    do {
        for (size_t i = 0; i < n; i += 16) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            for (size_t j = 0; j < 16 && i + j < n; j++)
                out[i + j] = hex[(state >> (60 - 4 * j)) & 15];
        }
    } while (all_zero(out, n));
    out[n] = '\0';
}

void trace_ctx_start(trace_ctx *t, const char *v, size_t n) {
    char parent[TRACE_SPAN_HEX + 1];
    t->from_client = traceparent_parse(v, n, t->trace_id, parent, &t->flags) == 0;
    if (!t->from_client) {
        trace_random_hex(t->trace_id, TRACE_ID_HEX);
        t->flags = 0;
    }
    trace_random_hex(t->span_id, TRACE_SPAN_HEX);
}

void trace_ctx_format(const trace_ctx *t, char out[TRACEPARENT_LEN + 1]) {
    snprintf(out, TRACEPARENT_LEN + 1, "00-%s-%s-%02x", t->trace_id, t->span_id, t->flags);
}
