/* entries_pii: the PII policy applied to what an entry write stores (key,
 * value as bytes, tags, metadata Struct), on top of the detectors in
 * service/privacy/pii.h and pii_struct.h. Three outcomes:
 *   allow  (token holds `pii:write`): stored as is, the kinds found are
 *          returned for RecordMeta.pii_kinds;
 *   reject (default policy): ENTRIES_PII_EFOUND with why naming every kind
 *          and field path found ("email at value, phone at metadata.a.b[2]");
 *   redact: matches are replaced and the write goes on (a key cannot be
 *          redacted — it names the entry — so PII in a key is rejected
 *          under this policy too).
 * Results live in the arena; inputs are never modified. No I/O. */
#ifndef MEMORYD_ENTRIES_ENTRIES_PII_H
#define MEMORYD_ENTRIES_ENTRIES_PII_H

#include <stddef.h>
#include <stdint.h>

#include "google/protobuf/struct.pb-c.h"
#include "service/core/arena.h"

#define ENTRIES_PII_EFOUND 1     /* rejected: why says what was found where */
#define ENTRIES_PII_ENOMEM (-1)

typedef enum entries_pii_mode {
    ENTRIES_PII_MODE_REJECT = 0,
    ENTRIES_PII_MODE_REDACT = 1,
    ENTRIES_PII_MODE_ALLOW = 2,
} entries_pii_mode;

typedef struct entries_pii_input {
    const char *key;                         /* NULL: not scanned */
    const uint8_t *value;
    size_t value_len;
    const char *const *tags;
    size_t ntags;
    const Google__Protobuf__Struct *metadata; /* NULL: none */
} entries_pii_input;

typedef struct entries_pii_result {
    const uint8_t *value; /* the input's, or a redacted copy */
    size_t value_len;
    const char *const *tags; /* same count as the input's */
    const Google__Protobuf__Struct *metadata;
    const char *const *kinds; /* distinct kinds found (allow mode; else empty) */
    size_t nkinds;
} entries_pii_result;

/* Returns 0 (out filled), ENTRIES_PII_EFOUND (why filled) or
 * ENTRIES_PII_ENOMEM. */
int entries_pii_apply(arena *a, const entries_pii_input *in, entries_pii_mode mode,
                      entries_pii_result *out, char *why, size_t whylen);

#endif
