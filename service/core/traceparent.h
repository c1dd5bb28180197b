/* traceparent: W3C Trace Context (https://www.w3.org/TR/trace-context/)
 * for memoryd's calls: the `traceparent` a client sends is read, and a
 * call without one gets a trace id of its own, so its log lines, its audit
 * row and the requests it makes of HTTP backends (Qdrant) share one id a
 * tracing system can follow. memoryd records no spans: it passes the
 * trace on with a span id of its own for each call.
 *
 * Parsing is apart from I/O and allocates nothing. */
#ifndef MEMORYD_CORE_TRACEPARENT_H
#define MEMORYD_CORE_TRACEPARENT_H

#include <stddef.h>
#include <stdint.h>

#define TRACE_ID_HEX 32
#define TRACE_SPAN_HEX 16
/* "00-" trace "-" span "-" flags */
#define TRACEPARENT_LEN (3 + TRACE_ID_HEX + 1 + TRACE_SPAN_HEX + 1 + 2)

typedef struct trace_ctx {
    char trace_id[TRACE_ID_HEX + 1];  /* lower-case hex, never all zeros */
    char span_id[TRACE_SPAN_HEX + 1]; /* this call's: the parent of what it calls */
    uint8_t flags;   /* trace-flags (bit 0: sampled) as received; 0 when started here */
    int from_client; /* the trace id came in the request */
} trace_ctx;

/* Reads a traceparent header value v[0..n) as the specification says:
 * version 00 is exactly 55 characters; a later version (not ff) may be
 * longer, with '-' after the 55th; ids are lower-case hex and not all
 * zeros. 0 with the trace id, parent id and flags, or -1 (out untouched)
 * for anything else: the caller then starts a trace of its own. */
int traceparent_parse(const char *v, size_t n, char trace_id[TRACE_ID_HEX + 1],
                      char parent_id[TRACE_SPAN_HEX + 1], uint8_t *flags);

/* A context for a call: the client's trace (value v[0..n), NULL or
 * unreadable: a new trace id) and a new span id. */
void trace_ctx_start(trace_ctx *t, const char *v, size_t n);

/* "00-<trace id>-<span id>-<flags>" into out (TRACEPARENT_LEN + 1 bytes):
 * what the call sends on to backends. */
void trace_ctx_format(const trace_ctx *t, char out[TRACEPARENT_LEN + 1]);

/* n random lower-case hex digits into out (NUL-terminated; n+1 bytes),
 * never all zeros: a per-thread xorshift seeded from the clock, unique
 * enough to correlate, free of locks. Not for secrets. */
void trace_random_hex(char *out, size_t n);

#endif
