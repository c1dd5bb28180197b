/* pgq_decode: binary-format result columns as C values; see pgq.h. Pure
 * functions over a PGresult. */
#include <arpa/inet.h>
#include <string.h>

#include "service/store/pgq.h"

#define PG_EPOCH_US 946684800000000LL /* 2000-01-01 in Unix microseconds */

static int32_t get_be32(const char *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return (int32_t)ntohl(v);
}
static int64_t get_be64(const char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | (unsigned char)p[i];
    return (int64_t)v;
}

int pgq_col_int(const PGresult *r, int row, int col, int64_t *out) {
    if (PQgetisnull(r, row, col)) return -1;
    int len = PQgetlength(r, row, col);
    const char *p = PQgetvalue(r, row, col);
    if (len == 8) *out = get_be64(p);
    else if (len == 4) *out = get_be32(p);
    else if (len == 2) *out = (int16_t)(((unsigned char)p[0] << 8) | (unsigned char)p[1]);
    else return -1;
    return 0;
}

int pgq_col_float4(const PGresult *r, int row, int col, float *out) {
    if (PQgetisnull(r, row, col) || PQgetlength(r, row, col) != 4) return -1;
    uint32_t bits = (uint32_t)get_be32(PQgetvalue(r, row, col));
    memcpy(out, &bits, 4);
    return 0;
}

int pgq_col_ts(const PGresult *r, int row, int col, int64_t *unix_us) {
    if (PQgetisnull(r, row, col) || PQgetlength(r, row, col) != 8) return -1;
    *unix_us = get_be64(PQgetvalue(r, row, col)) + PG_EPOCH_US;
    return 0;
}

int pgq_col_bool(const PGresult *r, int row, int col, int *out) {
    if (PQgetisnull(r, row, col) || PQgetlength(r, row, col) != 1) return -1;
    *out = PQgetvalue(r, row, col)[0] != 0;
    return 0;
}

const char *pgq_col_str(arena *ar, const PGresult *r, int row, int col) {
    if (PQgetisnull(r, row, col)) return NULL;
    return arena_strndup(ar, PQgetvalue(r, row, col), (size_t)PQgetlength(r, row, col));
}

const char *pgq_col_jsonb(arena *ar, const PGresult *r, int row, int col) {
    int len = PQgetlength(r, row, col);
    const char *p = PQgetvalue(r, row, col);
    if (PQgetisnull(r, row, col) || len < 1 || p[0] != 1) return NULL;
    return arena_strndup(ar, p + 1, (size_t)len - 1);
}

int pgq_col_text_array(arena *ar, const PGresult *r, int row, int col, const char ***out,
                       size_t *n) {
    *out = NULL;
    *n = 0;
    if (PQgetisnull(r, row, col)) return -1;
    const char *p = PQgetvalue(r, row, col);
    size_t len = (size_t)PQgetlength(r, row, col);
    if (len < 12) return -1;
    int32_t ndim = get_be32(p);
    if (ndim == 0) return 0;
    if (ndim != 1 || len < 20) return -1;
    int32_t count = get_be32(p + 12);
    if (count < 0 || count > 100000) return -1;
    const char **v = arena_alloc(ar, ((size_t)count + 1) * sizeof *v);
    if (!v) return -1;
    size_t off = 20;
    for (int32_t i = 0; i < count; i++) {
        if (len - off < 4) return -1;
        int32_t el = get_be32(p + off);
        off += 4;
        if (el < 0 || (size_t)el > len - off) return -1; /* NULL elements never stored */
        if (!(v[i] = arena_strndup(ar, p + off, (size_t)el))) return -1;
        off += (size_t)el;
    }
    *out = v;
    *n = (size_t)count;
    return 0;
}
