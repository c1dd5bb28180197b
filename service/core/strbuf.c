/* strbuf: a growable string; see strbuf.h. */
#include "service/core/strbuf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for more bytes and the NUL. */
static int reserve(strbuf *b, size_t more) {
    if (b->oom) return -1;
    if (more < b->cap - b->len) return 0;
    if (more >= SIZE_MAX / 2 - b->len) return b->oom = 1, -1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap <= b->len + more) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return b->oom = 1, -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

int strbuf_put(strbuf *b, const void *s, size_t n) {
    if (reserve(b, n) != 0) return -1;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

int strbuf_puts(strbuf *b, const char *s) { return strbuf_put(b, s, strlen(s)); }

int strbuf_vprintf(strbuf *b, const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    int rc = -1;
    if (n >= 0 && (size_t)n < sizeof tmp) rc = strbuf_put(b, tmp, (size_t)n);
    else if (n >= 0 && reserve(b, (size_t)n) == 0) {
        vsnprintf(b->p + b->len, (size_t)n + 1, fmt, again);
        b->len += (size_t)n;
        rc = 0;
    }
    va_end(again);
    return rc;
}

int strbuf_printf(strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = strbuf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

char *strbuf_take(strbuf *b, size_t *len) {
    char *p = b->oom ? NULL : b->p ? b->p : strdup("");
    if (b->oom) free(b->p);
    if (len) *len = p ? b->len : 0;
    memset(b, 0, sizeof *b);
    return p;
}

void strbuf_free(strbuf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}
