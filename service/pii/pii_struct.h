/* pii_struct: the PII detectors (pii.h) applied to what a write carries —
 * plain strings/bytes and google.protobuf.Struct payloads walked
 * recursively (object keys and string values) — collecting the kinds found
 * and where ("metadata.contact.emails[2]"), for INVALID_ARGUMENT messages
 * and RecordMeta.pii_kinds, and redacting in place. No I/O. */
#ifndef MEMORYD_PII_PII_STRUCT_H
#define MEMORYD_PII_PII_STRUCT_H
#include "google/protobuf/struct.pb-c.h"
#include "service/core/arena.h"
#include <stddef.h>

#define PII_MAX_DEPTH 64    /* Struct nesting walked; deeper is an error */
#define PII_MAX_FINDINGS 16 /* locations kept for the message */
#define PII_PATH_MAX 160

typedef struct pii_findings {
    unsigned kinds; /* OR of every kind found */
    size_t total;   /* locations with PII (may exceed PII_MAX_FINDINGS) */
    size_t n;       /* locations kept */
    struct {
        unsigned kinds;
        char path[PII_PATH_MAX];
    } at[PII_MAX_FINDINGS];
} pii_findings;

void pii_findings_init(pii_findings *f);

/* Scans s[0..n) as field `path`. */
void pii_scan_field(pii_findings *f, const char *path, const char *s, size_t n);

/* Scans every key and string value of st under root ("metadata"). Returns
 * 0, or -1 when st nests deeper than PII_MAX_DEPTH (nothing is decided
 * then: callers refuse the write). */
int pii_scan_struct(pii_findings *f, const char *root, const Google__Protobuf__Struct *st);

/* The same for one Value of any kind, found under root ("value"). */
int pii_scan_value(pii_findings *f, const char *root, const Google__Protobuf__Value *v);

/* "email at metadata.contact; payment_card at value" (bounded by outlen,
 * always NUL-terminated; "and N more" when locations were dropped). */
void pii_findings_format(const pii_findings *f, char *out, size_t outlen);

/* A redacted copy of s[0..n) in arena a (NUL-terminated, length in
 * *outlen), or s itself when nothing matched. NULL on OOM. */
const char *pii_redact_arena(arena *a, const char *s, size_t n, size_t *outlen);

/* Redacts every key and string value of st in place, replacing pointers
 * with arena copies (the old strings are left to their owner). Returns 0,
 * or -1 on OOM or nesting deeper than PII_MAX_DEPTH. */
int pii_redact_struct(arena *a, Google__Protobuf__Struct *st);
/* The same for one Value. */
int pii_redact_value(arena *a, Google__Protobuf__Value *v);

#endif
