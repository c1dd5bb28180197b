/* pii: detectors for personal data and secrets in written values (the
 * write diode, DESIGN §5). Pure functions over bytes (any bytes, not
 * necessarily NUL-terminated or UTF-8) so tests and fuzzers drive them
 * directly. Linear time: detectors start only at word boundaries and every
 * forward scan is bounded.
 *
 * Kinds and what counts (a match must stand alone: the characters around it
 * may not continue it, so "x4111111111111111" or "AKIA...Z9" inside a longer
 * word do not fire):
 *   email         local@domain.tld, local 1-64 chars, a dotted domain whose
 *                 last label is 2+ letters ("user@localhost" is not one)
 *   phone         "+" and 8-15 digits (spaces, dashes, dots, parentheses
 *                 allowed between), or North American (ddd) ddd-dddd,
 *                 ddd-ddd-dddd, ddd.ddd.dddd
 *   payment_card  13-19 digits, single spaces or dashes allowed between,
 *                 a known issuer prefix and a valid Luhn check digit
 *   national_id   US SSN ddd-dd-dddd with area not 000/666/9xx, group not 00,
 *                 serial not 0000 (the undashed 9-digit form is too common in
 *                 ordinary numbers to flag)
 *   iban          country code, 2 check digits, BBAN of the country's length
 *                 (spaces every 4 allowed), mod-97 check = 1
 *   api_key       AWS AKIA/ASIA ids, GitHub ghp_/gho_/ghu_/ghs_/ghr_ and
 *                 github_pat_ tokens, Slack xox?- tokens, Google AIza keys,
 *                 Stripe sk_live_/rk_live_, OpenAI-style sk-... (32+ chars)
 *   private_key   a "-----BEGIN ... PRIVATE KEY-----" block (RSA, EC,
 *                 OPENSSH, ENCRYPTED, plain PKCS#8) through its END line
 *   bearer_token  "Bearer <20+ token chars>" and bare JWTs (eyJ...eyJ...sig) */
#ifndef MEMORYD_PII_PII_H
#define MEMORYD_PII_PII_H
#include <stddef.h>

#define PII_EMAIL (1u << 0)        /* "email" */
#define PII_PHONE (1u << 1)        /* "phone" */
#define PII_PAYMENT_CARD (1u << 2) /* "payment_card" */
#define PII_NATIONAL_ID (1u << 3)  /* "national_id" */
#define PII_IBAN (1u << 4)         /* "iban" */
#define PII_API_KEY (1u << 5)      /* "api_key" */
#define PII_PRIVATE_KEY (1u << 6)  /* "private_key" */
#define PII_BEARER_TOKEN (1u << 7) /* "bearer_token" */
#define PII_KIND_COUNT 8

typedef struct pii_hit {
    unsigned kind; /* one PII_* flag */
    size_t start, len;
} pii_hit;

/* Scans s[0..n). Writes up to max hits into hits (may be NULL with max
 * 0), ordered by start and non-overlapping, and the total number found into
 * *nhits (may be NULL). Returns the OR of every kind found. */
unsigned pii_scan(const char *s, size_t n, pii_hit *hits, size_t max, size_t *nhits);

/* Stable name of one kind ("email", ...), or "unknown". */
const char *pii_kind_name(unsigned kind);
/* The kind named name ("email" -> PII_EMAIL), 0 for no kind: the
 * inverse of pii_kind_name, for stores that keep the kinds as flags. */
unsigned pii_kind_of(const char *name);
/* Names of the kinds in kinds, in the PII_* order, into out[0..max);
 * returns how many were written. */
size_t pii_kind_names(unsigned kinds, const char **out, size_t max);

/* The marker a redacted match becomes: "[REDACTED:<kind>]". */
#define PII_REDACT_FMT "[REDACTED:%s]"

/* Writes s[0..n) with every match replaced by its marker into out
 * (outlen bytes, NUL-terminated when it fits). Returns the length the
 * result needs (excluding the NUL): call with outlen 0 to size the buffer.
 * Also returns the kinds redacted in *kinds (may be NULL). */
size_t pii_redact(const char *s, size_t n, char *out, size_t outlen, unsigned *kinds);

#endif
