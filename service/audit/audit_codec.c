/* audit_codec: the audit trail's pure encoders and decoders (COPY lines,
 * array literals, binary result rows, filters), kept away from I/O so
 * tests and fuzzers can feed them bytes. See audit_codec.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/audit/audit_codec.h"

/* ---- text ---- */

/* Length of the valid UTF-8 sequence at s (at most avail bytes), 0 if the
 * byte there does not start one. */
static size_t utf8_seq(const unsigned char *s, size_t avail) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c == 0xe0) n = 3, lo = 0xa0;
    else if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef) n = 3;
    else if (c == 0xed) n = 3, hi = 0x9f; /* no UTF-16 surrogates */
    else if (c == 0xf0) n = 4, lo = 0x90;
    else if (c >= 0xf1 && c <= 0xf3) n = 4;
    else if (c == 0xf4) n = 4, hi = 0x8f;
    else return 0;
    if (avail < n) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xbf) return 0;
    return n;
}

size_t audit_codec_utf8_clean(const char *s, size_t max, char *out) {
    const unsigned char *p = (const unsigned char *)s;
    size_t len = strlen(s), i = 0, o = 0;
    while (i < len) {
        size_t n = utf8_seq(p + i, len - i);
        if (n == 0) {
            if (o + 1 > max) break;
            out[o++] = '?';
            i++;
            continue;
        }
        if (o + n > max) break;
        memcpy(out + o, p + i, n);
        o += n;
        i += n;
    }
    out[o] = '\0';
    return o;
}

/* One character of a COPY text-format field (copy) or as is. */
static void emit(strbuf *b, char c, int copy) {
    if (copy) {
        switch (c) {
        case '\\': strbuf_put(b, "\\\\", 2); return;
        case '\n': strbuf_put(b, "\\n", 2); return;
        case '\r': strbuf_put(b, "\\r", 2); return;
        case '\t': strbuf_put(b, "\\t", 2); return;
        default: break;
        }
    }
    strbuf_put(b, &c, 1);
}

static void emit_str(strbuf *b, const char *s, int copy) {
    if (!copy) {
        strbuf_puts(b, s);
        return;
    }
    for (; *s; s++) emit(b, *s, 1);
}

/* Every element is quoted, so none is mistaken for NULL or needs the
 * unquoted-element rules; inside quotes only " and \ are special. */
static void array_literal(strbuf *b, const char *const *v, size_t n, int copy) {
    emit(b, '{', copy);
    for (size_t i = 0; i < n; i++) {
        if (i) emit(b, ',', copy);
        emit(b, '"', copy);
        for (const char *s = v[i]; *s; s++) {
            if (*s == '"' || *s == '\\') emit(b, '\\', copy);
            emit(b, *s, copy);
        }
        emit(b, '"', copy);
    }
    emit(b, '}', copy);
}

void audit_codec_array_literal(strbuf *b, const char *const *v, size_t n) {
    array_literal(b, v, n, 0);
}

void audit_codec_time(int64_t unix_us, char out[40]) {
    int64_t s = unix_us / 1000000, us = unix_us % 1000000;
    if (us < 0) {
        s--;
        us += 1000000;
    }
    time_t t = (time_t)s;
    struct tm tm;
    gmtime_r(&t, &tm);
    /* The compiler cannot see that gmtime_r's fields are small. */
    char tmp[96];
    int n = snprintf(tmp, sizeof tmp, "%04d-%02d-%02d %02d:%02d:%02d.%06d+00", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)us);
    size_t len = n > 0 && n < 40 ? (size_t)n : 0;
    memcpy(out, tmp, len);
    out[len] = '\0';
}

void audit_codec_copy_row(strbuf *b, const audit_rec *r) {
    char t[40];
    audit_codec_time(r->time_us, t);
    strbuf_puts(b, t);
    const char *fields[] = {r->tenant, r->principal, r->token_id, r->method};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        strbuf_put(b, "\t", 1);
        emit_str(b, fields[i], 1);
    }
    strbuf_put(b, "\t", 1);
    array_literal(b, r->targets, r->ntargets, 1);
    strbuf_printf(b, "\t%d\t%lld\t", (int)r->status, (long long)r->duration_us);
    emit_str(b, r->request_id, 1);
    strbuf_put(b, "\t", 1);
    emit_str(b, r->trace_id, 1);
    strbuf_put(b, "\t", 1);
    emit_str(b, r->client_identity, 1);
    strbuf_put(b, "\n", 1);
}

/* ---- binary results ---- */

static int32_t be32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

static int64_t be64(const unsigned char *p) {
    return (int64_t)((uint64_t)(uint32_t)be32(p) << 32 | (uint32_t)be32(p + 4));
}

int audit_codec_text_array(const char *data, size_t len, void *(*alloc)(void *ctx, size_t n),
                           void *ctx, char ***out, size_t *n) {
    const unsigned char *p = (const unsigned char *)data, *end = p + len;
    *out = NULL;
    *n = 0;
    if (len < 12) return -1;
    int32_t ndim = be32(p);
    /* p + 4: has-null flag; p + 8: element type (text, varchar: both
     * arrive as plain bytes) */
    p += 12;
    if (ndim == 0) return 0;
    if (ndim != 1 || end - p < 8) return -1;
    int32_t count = be32(p);
    p += 8; /* dimension, lower bound */
    if (count < 0 || (size_t)count > (size_t)(end - p) / 4) return -1;
    char **v = count ? alloc(ctx, (size_t)count * sizeof *v) : NULL;
    if (count && !v) return -1;
    size_t k = 0;
    for (int32_t i = 0; i < count; i++) {
        if (end - p < 4) return -1;
        int32_t el = be32(p);
        p += 4;
        if (el == -1) continue;
        if (el < 0 || el > end - p) return -1;
        char *s = alloc(ctx, (size_t)el + 1);
        if (!s) return -1;
        memcpy(s, p, (size_t)el);
        s[el] = '\0';
        v[k++] = s;
        p += el;
    }
    if (p != end) return -1;
    *out = v;
    *n = k;
    return 0;
}

#define PG_EPOCH_UNIX_US 946684800000000LL /* 2000-01-01 in Unix microseconds */

static const char *text_col(const PGresult *r, int i, int col) {
    return PQgetisnull(r, i, col) ? NULL : PQgetvalue(r, i, col);
}

static int int_col(const PGresult *r, int i, int col, int size, int64_t *v) {
    if (PQgetisnull(r, i, col) || PQgetlength(r, i, col) != size) return -1;
    const unsigned char *p = (const unsigned char *)PQgetvalue(r, i, col);
    *v = size == 8 ? be64(p) : be32(p);
    return 0;
}

int audit_codec_row(const PGresult *r, int i, void *(*alloc)(void *ctx, size_t n), void *ctx,
                    audit_row *out) {
    if (PQnfields(r) != 12 || i < 0 || i >= PQntuples(r)) return -1;
    for (int c = 0; c < 12; c++)
        if (PQfformat(r, c) != 1) return -1;
    int64_t st;
    memset(out, 0, sizeof *out);
    if (int_col(r, i, 0, 8, &out->id) || int_col(r, i, 1, 8, &out->time_us) ||
        int_col(r, i, 7, 4, &st) || int_col(r, i, 8, 8, &out->duration_us))
        return -1;
    out->time_us += PG_EPOCH_UNIX_US;
    out->status = (int32_t)st;
    if (!(out->tenant = text_col(r, i, 2)) || !(out->principal = text_col(r, i, 3)) ||
        !(out->token_id = text_col(r, i, 4)) || !(out->method = text_col(r, i, 5)) ||
        !(out->request_id = text_col(r, i, 9)) || !(out->trace_id = text_col(r, i, 10)) ||
        !(out->client_identity = text_col(r, i, 11)) || PQgetisnull(r, i, 6))
        return -1;
    return audit_codec_text_array(PQgetvalue(r, i, 6), (size_t)PQgetlength(r, i, 6), alloc, ctx,
                                  &out->targets, &out->ntargets);
}

void audit_codec_record(const audit_row *row, Memory__V1__AuditRecord *rec,
                        Google__Protobuf__Timestamp *ts, Google__Protobuf__Duration *d,
                        char idbuf[24]) {
    memory__v1__audit_record__init(rec);
    google__protobuf__timestamp__init(ts);
    google__protobuf__duration__init(d);
    snprintf(idbuf, 24, "%lld", (long long)row->id);
    int64_t s = row->time_us / 1000000, us = row->time_us % 1000000;
    if (us < 0) {
        s--;
        us += 1000000;
    }
    ts->seconds = s;
    ts->nanos = (int32_t)(us * 1000);
    d->seconds = row->duration_us / 1000000;
    d->nanos = (int32_t)(row->duration_us % 1000000 * 1000);
    rec->id = idbuf;
    rec->time = ts;
    rec->principal = (char *)row->principal;
    rec->token_id = (char *)row->token_id;
    rec->tenant = (char *)row->tenant;
    rec->method = (char *)row->method;
    rec->n_target_ids = row->ntargets;
    rec->target_ids = row->targets;
    rec->status_code = row->status;
    rec->duration = d;
    rec->request_id = (char *)row->request_id;
    rec->trace_id = (char *)row->trace_id;
    rec->client_identity = (char *)row->client_identity;
}

/* ---- filters ---- */

/* Length of the dotted identifier at s ([A-Za-z_][A-Za-z0-9_]* joined by
 * single dots), 0 if none starts there. */
static size_t dotted_ident(const char *s) {
    size_t i = 0;
    for (;;) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')) return 0;
        i++;
        while ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
               (s[i] >= '0' && s[i] <= '9') || s[i] == '_')
            i++;
        if (s[i] != '.') return i;
        i++;
    }
}

int audit_codec_method_kind(const char *s) {
    if (s[0] == '/') {
        size_t n = dotted_ident(s + 1);
        if (n == 0 || s[1 + n] != '/') return 0;
        const char *m = s + 2 + n;
        size_t k = dotted_ident(m);
        return k > 0 && m[k] == '\0' && !memchr(m, '.', k) ? 1 : 0;
    }
    size_t n = dotted_ident(s);
    return n > 0 && s[n] == '\0' ? 2 : 0;
}

static int valid_utf8(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    size_t len = strlen(s);
    for (size_t i = 0; i < len;) {
        size_t n = utf8_seq(p + i, len - i);
        if (n == 0) return 0;
        i += n;
    }
    return 1;
}

int audit_codec_filter(const Memory__V1__AuditFilter *in, const char *own_sub,
                       principal_breadth breadth, arena *ar, audit_filter *out, char *err,
                       size_t errlen) {
    memset(out, 0, sizeof *out);
    const char *who = in && in->principal ? in->principal : "";
    const char *method = in && in->method ? in->method : "";
    const char *target = in && in->target_id ? in->target_id : "";
    if (strlen(who) > AUDIT_MAX_NAME_BYTES || !valid_utf8(who)) {
        snprintf(err, errlen, "filter.principal must be valid UTF-8 of at most %d bytes",
                 AUDIT_MAX_NAME_BYTES);
        return STATUS_EINVALID;
    }
    if (strlen(target) > AUDIT_MAX_ID_BYTES || !valid_utf8(target)) {
        snprintf(err, errlen, "filter.target_id must be valid UTF-8 of at most %d bytes",
                 AUDIT_MAX_ID_BYTES);
        return STATUS_EINVALID;
    }
    if (method[0]) {
        int kind = strlen(method) <= AUDIT_MAX_NAME_BYTES ? audit_codec_method_kind(method) : 0;
        if (kind == 0) {
            snprintf(err, errlen,
                     "filter.method must be a full method name (\"/memory.v1.Cache/Get\") or a "
                     "service (\"memory.v1.Cache\")");
            return STATUS_EINVALID;
        }
        if (kind == 1) {
            out->method = method;
        } else if (!(out->service_prefix = arena_printf(ar, "/%s/", method))) {
            snprintf(err, errlen, "out of memory");
            return STATUS_EINVALID;
        }
    }
    if (breadth != PRINCIPAL_ALL) {
        /* audit:read (= :own) sees only its own principal's calls: naming
         * someone else is a request for more than the token grants. */
        if (who[0] && strcmp(who, own_sub) != 0) {
            snprintf(err, errlen,
                     "filter.principal names another principal: reading other principals' "
                     "audit records needs the audit:read:all scope");
            return STATUS_EDENIED;
        }
        out->principal = own_sub;
    } else if (who[0]) {
        out->principal = who;
    }
    if (target[0]) out->target = target;
    return 0;
}

int audit_codec_filter_match(const audit_filter *f, const audit_row *row) {
    if (f->principal && strcmp(f->principal, row->principal) != 0) return 0;
    if (f->method && strcmp(f->method, row->method) != 0) return 0;
    if (f->service_prefix &&
        strncmp(f->service_prefix, row->method, strlen(f->service_prefix)) != 0)
        return 0;
    if (f->target) {
        size_t i = 0;
        while (i < row->ntargets && strcmp(row->targets[i], f->target) != 0) i++;
        if (i == row->ntargets) return 0;
    }
    return 1;
}
