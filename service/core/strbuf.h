/* strbuf: a growable, always NUL-terminated byte string for the text the
 * service builds (audit COPY lines, Qdrant request bodies). A failed
 * allocation sets oom and turns later writes into no-ops, so a builder
 * checks once at the end. A zeroed strbuf is empty; strbuf_free releases
 * it (strbuf_take hands the bytes over instead). */
#ifndef MEMORYD_CORE_STRBUF_H
#define MEMORYD_CORE_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct strbuf {
    char *p; /* NULL until the first write */
    size_t len, cap;
    int oom;
} strbuf;

/* Each returns 0, or -1 when out of memory (then, and ever after, b->oom). */
int strbuf_put(strbuf *b, const void *s, size_t n);
int strbuf_puts(strbuf *b, const char *s);
int strbuf_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int strbuf_vprintf(strbuf *b, const char *fmt, va_list ap);

/* The bytes (malloc'd, NUL-terminated; "" for an empty buffer, NULL when
 * out of memory), with their length in *len; b is empty after. */
char *strbuf_take(strbuf *b, size_t *len);
void strbuf_free(strbuf *b);

#endif
