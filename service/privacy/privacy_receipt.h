/* privacy_receipt: the receipt Privacy.Forget issues, as data: its JSON
 * payload (what is signed, stored and shown), the signed form (a JWS,
 * auth/jws.h, of typ PRIVACY_RECEIPT_TYP) and the proto message. Pure: no
 * I/O, no clock; the CLI (`memoryd receipt verify`), the tests and the
 * fuzzer drive it directly.
 *
 * The payload, as privacy.proto documents it:
 *   {"iss":"memoryd","receipt_id":...,"tenant":...,
 *    "principal":... | "subject_id":...,"dry_run":false,
 *    "complete_time":"2026-11-26T09:00:00.123456Z",
 *    "counts":{"global":3,"episodic":0,"cache_l1":0,"cache_l2":1,
 *              "entries":4,"blackboard":0},
 *    "request_id":...,"requested_by":...,
 *    "scope":{"records":"principal","owner":"alice","namespaces":["planner:*:*"]}}
 * ("records":"tenant" without "owner" for every principal's records). */
#ifndef MEMORYD_PRIVACY_PRIVACY_RECEIPT_H
#define MEMORYD_PRIVACY_PRIVACY_RECEIPT_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "service/auth/jwks.h"
#include "service/core/arena.h"

#define PRIVACY_RECEIPT_TYP "memoryd-forget-receipt+jwt"
/* memory.v1.Tier values 1..privacy_tiers() have counts: every value of
 * the enum but TIER_UNSPECIFIED, named after it ("cache_l1"). The values
 * stay below PRIVACY_TIER_MAX, the counts' room. */
#define PRIVACY_TIER_MAX 32
#define PRIVACY_SUBJECT_MAX 256 /* characters of a principal or subject id */

typedef struct privacy_receipt {
    char receipt_id[64];
    const char *tenant;
    const char *principal;  /* the subject: exactly one of these is set */
    const char *subject_id; /* (NULL the other) */
    int dry_run;
    int64_t complete_us;              /* Unix µs */
    int64_t counts[PRIVACY_TIER_MAX]; /* by memory.v1.Tier; [0] unused */
    const char *request_id;
    const char *requested_by;
    /* How far the erasure reached (the signed "scope"): only scope_owner's
     * records (NULL: every principal's in the tenant), and in the
     * namespaced tiers (entries, working memory) only the nns globs ns
     * ("*:*:*": every namespace; none at all: none). has_scope is 0 in a
     * receipt issued before receipts stated their scope (parse only). */
    int has_scope;
    const char *scope_owner;
    const char *const *ns;
    size_t nns;
} privacy_receipt;

/* The payload JSON, malloc'd (free()); NULL when out of memory. */
char *privacy_receipt_json(const privacy_receipt *r);

/* Reads a payload (json[0..len)) into *r, strings in arena a: 0, or -1 with
 * what is wrong in err (not an object, a field missing or of the wrong
 * type, both or neither subject, a negative count, a bad time). */
int privacy_receipt_parse(arena *a, const char *json, size_t len, privacy_receipt *r, char *err,
                          size_t errlen);

/* Signs r's payload with an Ed25519 key: 0 with *jws malloc'd (free()), or
 * -1 with err. */
int privacy_receipt_sign(EVP_PKEY *key, const char *kid, const privacy_receipt *r, char **jws,
                         char *err, size_t errlen);

/* Verifies a signed receipt with keys (auth/jws.h: the typ must be
 * PRIVACY_RECEIPT_TYP) and reads its payload into *r (strings in a): 0, or
 * -1 with why in err. On 0, *kid (may be NULL) is the key's id in a. */
int privacy_receipt_verify(const jwks *keys, const char *jws, size_t len, arena *a,
                           privacy_receipt *r, const char **kid, char *err, size_t errlen);

/* The proto message in arena a (signed may be NULL: ""). NULL when out of
 * memory. */
struct Memory__V1__ForgetReceipt; /* privacy.pb-c.h (not included: C++ includes this) */
struct Memory__V1__ForgetReceipt *privacy_receipt_render(arena *a, const privacy_receipt *r,
                                                         const char *signed_receipt);

/* The scope in words, for people ("the records of principal alice only,
 * in namespaces planner:*:*"), in a; NULL when out of memory. */
const char *privacy_receipt_scope_text(arena *a, const privacy_receipt *r);

/* The highest memory.v1.Tier value: the tiers a receipt counts are
 * 1..privacy_tiers(). */
int privacy_tiers(void);

/* The name a receipt counts a memory.v1.Tier under: the enum value's name
 * in lower case without "TIER_" ("global", "cache_l1"); NULL for 0 and
 * values past privacy_tiers(). */
const char *privacy_tier_name(int tier);

#endif
