/* tier_check: the request checks every tier shares. Each one names the
 * request field in its INVALID_ARGUMENT message ("label: 9 is not a
 * memory.v1.Label") and returns GRPC_STATUS_OK or that status, so a
 * handler reads
 *     if ((st = tier_check_label(call, "label", req->label)) != GRPC_STATUS_OK) return st;
 * Strings the checks produce live in the call's arena. */
#ifndef MEMORYD_TIER_TIER_CHECK_H
#define MEMORYD_TIER_TIER_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "google/protobuf/duration.pb-c.h"
#include "google/protobuf/struct.pb-c.h"
#include "google/protobuf/timestamp.pb-c.h"
#include "memory/v1/common.pb-c.h"
#include "service/rpc/rpc.h"
#include "service/tier/tier_meta.h"

#define TIER_ID_MAX 256 /* characters of a record id */

/* A record id: 1 to TIER_ID_MAX characters of UTF-8 without control
 * characters. An empty one is replaced by a fresh UUID (in the arena)
 * when generate is set, else refused as required. */
grpc_status_code tier_check_id(rpc_call *call, const char *field, const char **id, int generate);

/* A name (type, tag, content type, principal): UTF-8 without control
 * characters, at most max characters, and not empty when required. */
grpc_status_code tier_check_name(rpc_call *call, const char *field, const char *s, long max,
                                 int required);

/* Free text: valid UTF-8, at most max characters. */
grpc_status_code tier_check_text(rpc_call *call, const char *field, const char *s, long max);

/* A memory.v1.Label value (0 = unspecified is accepted). */
grpc_status_code tier_check_label(rpc_call *call, const char *field, int label);

/* What an expected_version may be. */
typedef enum tier_expect {
    TIER_EXPECT_CREATE_OK = 0, /* 0 (must not exist) or a version >= 1: writes */
    TIER_EXPECT_VERSION = 1,   /* a version >= 1: deletes of records that must exist */
    TIER_EXPECT_ANY = 2,       /* anything not negative (a mismatch is ABORTED, not invalid) */
} tier_expect;
grpc_status_code tier_check_expected(rpc_call *call, int64_t v, tier_expect kind);
/* A request's precondition (TIER_HAS_EXPECTED) checked as kind and
 * copied where the store takes it: *has and *v. */
#define TIER_CHECK_PRECONDITION(call, req, PREFIX, kind, has, v)                                   \
    tier_check_precondition((call), TIER_HAS_EXPECTED(req, PREFIX), (req)->expected_version,       \
                            (kind), (has), (v))
grpc_status_code tier_check_precondition(rpc_call *call, int given, int64_t expected,
                                         tier_expect kind, int *has, int64_t *v);

/* Validated tags (each a name of 1 to max_chars characters), duplicates
 * dropped (first kept), at most max distinct (and TIER_TAGS_GIVEN_MAX
 * given); *out in the arena. */
#define TIER_TAGS_GIVEN_MAX 1000
grpc_status_code tier_check_tags(rpc_call *call, const char *field, char *const *tags, size_t n,
                                 size_t max, long max_chars, const char ***out, size_t *nout);

/* ts as Unix microseconds; invalid when outside the documented range. */
grpc_status_code tier_check_time(rpc_call *call, const char *field,
                                 const Google__Protobuf__Timestamp *ts, int64_t *us);

/* A Duration of min_ms to max_ms (whole milliseconds) as *ms; d unset
 * gives 0 (the caller decides whether unset is allowed). The message names
 * the field, the value and range ("1 s to 3600 s"). */
grpc_status_code tier_check_duration(rpc_call *call, const char *field,
                                     const Google__Protobuf__Duration *d, int64_t min_ms,
                                     int64_t max_ms, const char *range, int64_t *ms);

/* tr may be NULL (no range). Invalid when an end is not a timestamp or
 * the range is empty (start_time at or after end_time). */
grpc_status_code tier_check_time_range(rpc_call *call, const char *field,
                                       const Memory__V1__TimeRange *tr, tier_time_range *out);

/* A TextMatch (common.proto) named field, for the text query named
 * query_field: *ranked = 1 for TEXT_MATCH_RANKED, which needs a query;
 * invalid for a value outside the enum. */
grpc_status_code tier_check_text_match(rpc_call *call, const char *field, int match,
                                       const char *query_field, const char *query, int *ranked);

/* st (NULL: {}) as compact JSON text in the arena, at most max bytes; NaN
 * and infinities are refused naming their path. */
grpc_status_code tier_check_struct(rpc_call *call, const char *field,
                                   const Google__Protobuf__Struct *st, size_t max,
                                   const char **json);

/* Whether a request's `oneof precondition { int64 expected_version }` is
 * set: TIER_HAS_EXPECTED(req, MEMORY__V1__ENTRIES_APPEND_REQUEST). */
#define TIER_HAS_EXPECTED(req, PREFIX)                                                             \
    ((req)->precondition_case == PREFIX##__PRECONDITION_EXPECTED_VERSION)

#endif
