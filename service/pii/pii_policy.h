/* pii_policy: the write diode's rule for personal data and secrets
 * (DESIGN §5), the same on every write path. The detectors (pii.h,
 * pii_struct.h) run over the fields a write stores; then:
 *   allow  (the token holds `pii:write`): stored as is; the kinds found are
 *          returned for RecordMeta.pii_kinds;
 *   reject (the default policy): refused, naming every kind and field path
 *          found ("email at value; phone at metadata.a.b[2]"), nothing is
 *          written;
 *   redact (the other policy): every match is replaced by
 *          "[REDACTED:<kind>]" and the write goes on — except in a field
 *          that names the record (an id, a key): a name cannot be rewritten,
 *          so PII there refuses the write under this policy too.
 * Inputs are never modified: redacted copies live in the arena. No I/O. */
#ifndef MEMORYD_PII_PII_POLICY_H
#define MEMORYD_PII_PII_POLICY_H

#include <stddef.h>

#include "google/protobuf/struct.pb-c.h"
#include "service/auth/principal.h"
#include "service/core/arena.h"
#include "service/core/status.h"
#include "service/core/strbuf.h"

/* What the server does with PII written without `pii:write` (--pii-policy). */
typedef enum pii_policy {
    PII_POLICY_REJECT = 0,
    PII_POLICY_REDACT = 1,
} pii_policy;

/* "reject" / "redact". Returns 0, or -1 for anything else. */
int pii_policy_parse(const char *name, pii_policy *out);

typedef enum pii_mode {
    PII_MODE_REJECT = 0,
    PII_MODE_REDACT = 1,
    PII_MODE_ALLOW = 2,
} pii_mode;

/* The mode for a write by p: ALLOW with `pii:write`, else the policy's. */
pii_mode pii_policy_mode(pii_policy policy, const principal *p);

/* One field a write stores. Exactly one of text, st and v is set. */
typedef struct pii_field {
    const char *path;                    /* "value", "tags[2]", "points[0].payload": messages */
    const char **text;                   /* text or bytes; replaced by a redacted copy */
    size_t *len;                         /* its length; NULL: NUL-terminated */
    const Google__Protobuf__Struct **st; /* a Struct (NULL *st: absent); replaced */
    const Google__Protobuf__Value **v;   /* a Value of any kind (NULL *v: absent); replaced */
    int names_record;                    /* an id or key: never redacted */
} pii_field;

/* Field initialisers: PII_TEXT("name", &in.name), PII_STRUCT("properties", &st),
 * PII_VALUE("value", &v). */
#define PII_NAME(path_, pp)                                                                        \
    { .path = (path_), .text = (pp), .names_record = 1 }
#define PII_TEXT(path_, pp)                                                                        \
    { .path = (path_), .text = (pp) }
#define PII_BYTES(path_, pp, lenp)                                                                 \
    { .path = (path_), .text = (pp), .len = (lenp) }
#define PII_STRUCT(path_, stp)                                                                     \
    { .path = (path_), .st = (stp) }
#define PII_VALUE(path_, vp)                                                                       \
    { .path = (path_), .v = (vp) }

/* Applies mode to f[0..n). STATUS_OK: the fields may now point at
 * redacted copies, and *kinds / *nkinds (both may be NULL) name the kinds
 * found in ALLOW mode (none otherwise). STATUS_EINVALID: refused, why
 * says what and where (also for a Struct nested deeper than
 * PII_MAX_DEPTH, whatever the mode). STATUS_ENOMEM. */
int pii_policy_apply(arena *a, pii_mode mode, pii_field *f, size_t n, const char ***kinds,
                     size_t *nkinds, char *why, size_t whylen);

/* The writes pii_policy_apply saw carry PII, by action and kind: a metrics
 * collector (metrics.h; arg unused). */
void pii_policy_metrics_collect(strbuf *out, void *arg);

#endif
