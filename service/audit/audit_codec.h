/* audit_codec: the audit trail's byte formats, apart from any I/O so tests
 * and fuzzers can feed them bytes: records as COPY lines and array
 * literals, audit_log rows in binary results, filters. Shared by the trail
 * (audit.c) and the Audit service (audit_list.c, audit_watch.c); not for
 * other modules. */
#ifndef MEMORYD_AUDIT_AUDIT_CODEC_H
#define MEMORYD_AUDIT_AUDIT_CODEC_H
#include <libpq-fe.h>

#include "memory/v1/audit.pb-c.h"
#include "service/auth/principal.h"
#include "service/core/arena.h"
#include "service/core/status.h"
#include "service/core/strbuf.h"

#define AUDIT_SCOPE "audit:read"
#define AUDIT_CHANNEL "memoryd_audit"
#define AUDIT_MAX_TARGETS 1024   /* per call; more are ignored */
#define AUDIT_MAX_ID_BYTES 1024  /* per target id (and filter.target_id) */
#define AUDIT_MAX_NAME_BYTES 256 /* filter.principal, filter.method */

/* The columns every read selects, in the order audit_codec_row decodes. */
#define AUDIT_COLUMNS                                                                              \
    "id, time, tenant, principal, token_id, method, target_ids, status_code, duration_us,"         \
    " request_id, trace_id, client_identity"

/* One finished call waiting for the writer: a single malloc, the strings
 * and the targets array live behind the struct (free() it once). */
typedef struct audit_rec {
    int64_t time_us; /* Unix microseconds */
    int64_t duration_us;
    int32_t status;
    const char *tenant, *principal, *token_id, *method, *request_id, *trace_id, *client_identity;
    const char **targets;
    size_t ntargets;
} audit_rec;

/* One row read back from audit_log. Strings point into the PGresult (valid
 * until PQclear); targets come from the caller's allocator. */
typedef struct audit_row {
    int64_t id;
    int64_t time_us;
    const char *tenant, *principal, *token_id, *method, *request_id, *trace_id, *client_identity;
    char **targets;
    size_t ntargets;
    int32_t status;
    int64_t duration_us;
} audit_row;

/* A validated AuditFilter. NULL fields match everything. */
typedef struct audit_filter {
    const char *principal;
    const char *method;         /* full path "/pkg.Svc/M" */
    const char *service_prefix; /* "/pkg.Svc/" for a whole service */
    const char *target;
} audit_filter;

/* ---- audit_codec.c: pure helpers, no I/O ---- */

/* Copies at most max bytes of s into out (room for max + 1), replacing
 * bytes that are not valid UTF-8 with '?' and never cutting a character
 * in half; NUL-terminates. Returns the length written. */
size_t audit_codec_utf8_clean(const char *s, size_t max, char *out);

/* Appends a PostgreSQL text[] literal ({"a","b"}) of v[0..n). */
void audit_codec_array_literal(strbuf *b, const char *const *v, size_t n);
/* Appends one COPY text-format line for r (the AUDIT_COPY_COLUMNS order). */
void audit_codec_copy_row(strbuf *b, const audit_rec *r);
#define AUDIT_COPY_COLUMNS                                                                         \
    "time, tenant, principal, token_id, method, target_ids, status_code, duration_us, request_id," \
    " trace_id, client_identity"
/* "YYYY-MM-DD HH:MM:SS.uuuuuu+00" for Unix microseconds; out has 40 bytes. */
void audit_codec_time(int64_t unix_us, char out[40]);

/* Decodes a binary-format text[] value. Elements are NUL-terminated copies
 * from alloc(ctx, size) (NULL elements are skipped). Returns 0, or -1 when
 * the bytes are not a one-dimensional text array or alloc fails. */
int audit_codec_text_array(const char *data, size_t len, void *(*alloc)(void *ctx, size_t n),
                           void *ctx, char ***out, size_t *n);
/* Decodes row i of a binary-format result of SELECT AUDIT_COLUMNS. Returns
 * 0, or -1 (wrong shape, out of memory). */
int audit_codec_row(const PGresult *r, int i, void *(*alloc)(void *ctx, size_t n), void *ctx,
                    audit_row *out);
/* Points rec (initialised here) at row; ts, d and idbuf (24 bytes) are the
 * caller's storage for the nested messages and the id text. */
void audit_codec_record(const audit_row *row, Memory__V1__AuditRecord *rec,
                        Google__Protobuf__Timestamp *ts, Google__Protobuf__Duration *d,
                        char idbuf[24]);

/* Shape of a method filter: 1 full method "/pkg.Svc/Method", 2 service
 * "pkg.Svc", 0 neither. */
int audit_codec_method_kind(const char *s);

/* Validates in (may be NULL) for a caller (own_sub) holding audit:read at
 * breadth; at PRINCIPAL_OWN the principal filter is forced to own_sub.
 * Strings of out point into in or the arena. */
int audit_codec_filter(const Memory__V1__AuditFilter *in, const char *own_sub,
                       principal_breadth breadth, arena *ar, audit_filter *out, char *err,
                       size_t errlen);
/* 1 if row (already known to be in the watcher's tenant) passes f. */
int audit_codec_filter_match(const audit_filter *f, const audit_row *row);

#endif
