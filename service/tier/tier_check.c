/* tier_check: request checks shared by the tiers; see tier_check.h. */
#include "service/tier/tier_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/text.h"
#include "service/core/uuid.h"
#include "service/pb/pbjson.h"
#include "service/pb/pbtime.h"

grpc_status_code tier_check_id(rpc_call *call, const char *field, const char **id, int generate) {
    if (!(*id)[0]) {
        if (!generate) return rpc_call_invalid(call, "%s: required", field);
        char *uuid = arena_alloc(rpc_call_arena(call), UUID_TEXT_LEN);
        if (!uuid) return rpc_call_oom(call);
        uuid_new(uuid);
        *id = uuid;
        return GRPC_STATUS_OK;
    }
    long n = text_name_chars(*id);
    if (n < 0)
        return rpc_call_invalid(call,
                                "%s: \"%s\" is not valid UTF-8 or contains a control character",
                                field, text_quote(rpc_call_arena(call), *id));
    if (n > TIER_ID_MAX)
        return rpc_call_invalid(call, "%s: %ld characters; at most %d", field, n, TIER_ID_MAX);
    return GRPC_STATUS_OK;
}

grpc_status_code tier_check_name(rpc_call *call, const char *field, const char *s, long max,
                                 int required) {
    long n = text_name_chars(s);
    if (n < 0)
        return rpc_call_invalid(call, "%s: not valid UTF-8 or contains a control character", field);
    if (n == 0 && required)
        return rpc_call_invalid(call, "%s: required (1 to %ld characters)", field, max);
    if (n > max) return rpc_call_invalid(call, "%s: %ld characters; at most %ld", field, n, max);
    return GRPC_STATUS_OK;
}

grpc_status_code tier_check_text(rpc_call *call, const char *field, const char *s, long max) {
    long n = text_utf8_chars(s);
    if (n < 0) return rpc_call_invalid(call, "%s: not valid UTF-8", field);
    if (n > max) return rpc_call_invalid(call, "%s: %ld characters; at most %ld", field, n, max);
    return GRPC_STATUS_OK;
}

grpc_status_code tier_check_label(rpc_call *call, const char *field, int label) {
    if (label < 0 || label > MEMORY__V1__LABEL__LABEL_SECRET)
        return rpc_call_invalid(call, "%s: %d is not a memory.v1.Label", field, label);
    return GRPC_STATUS_OK;
}

grpc_status_code tier_check_expected(rpc_call *call, int64_t v, tier_expect kind) {
    if (kind == TIER_EXPECT_ANY && v < 0)
        return rpc_call_invalid(call, "expected_version: %lld; must not be negative", (long long)v);
    if (kind == TIER_EXPECT_CREATE_OK && v < 0)
        return rpc_call_invalid(call,
                                "expected_version: %lld; must be 0 (must not exist) or a "
                                "version >= 1",
                                (long long)v);
    if (kind == TIER_EXPECT_VERSION && v < 1)
        return rpc_call_invalid(call, "expected_version: %lld; must be a version >= 1",
                                (long long)v);
    return GRPC_STATUS_OK;
}

grpc_status_code tier_check_precondition(rpc_call *call, int given, int64_t expected,
                                         tier_expect kind, int *has, int64_t *v) {
    *has = given;
    *v = given ? expected : 0;
    return given ? tier_check_expected(call, expected, kind) : GRPC_STATUS_OK;
}

grpc_status_code tier_check_tags(rpc_call *call, const char *field, char *const *tags, size_t n,
                                 size_t max, long max_chars, const char ***out, size_t *nout) {
    /* Duplicates are found pairwise: bound the work before looking. */
    if (n > TIER_TAGS_GIVEN_MAX)
        return rpc_call_invalid(call, "%s: %zu tags; at most %d", field, n, TIER_TAGS_GIVEN_MAX);
    arena *a = rpc_call_arena(call);
    const char **v = arena_alloc(a, (n ? n : 1) * sizeof *v);
    if (!v) return rpc_call_oom(call);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char f[64];
        snprintf(f, sizeof f, "%s[%zu]", field, i);
        grpc_status_code st = tier_check_name(call, f, tags[i], max_chars, 1);
        if (st != GRPC_STATUS_OK) return st;
        int dup = 0;
        for (size_t j = 0; j < k && !dup; j++) dup = strcmp(v[j], tags[i]) == 0;
        if (!dup) v[k++] = tags[i];
    }
    if (k > max) return rpc_call_invalid(call, "%s: %zu distinct tags; at most %zu", field, k, max);
    *out = v;
    *nout = k;
    return GRPC_STATUS_OK;
}

grpc_status_code tier_check_time(rpc_call *call, const char *field,
                                 const Google__Protobuf__Timestamp *ts, int64_t *us) {
    if (!ts || pbtime_timestamp_us(ts, us) != 0)
        return rpc_call_invalid(call, "%s: not a valid timestamp", field);
    return GRPC_STATUS_OK;
}

grpc_status_code tier_check_duration(rpc_call *call, const char *field,
                                     const Google__Protobuf__Duration *d, int64_t min_ms,
                                     int64_t max_ms, const char *range, int64_t *ms) {
    int64_t us;
    *ms = 0;
    if (!d) return GRPC_STATUS_OK;
    if (pbtime_duration_us(d, &us) != 0 || us / 1000 < min_ms || us / 1000 > max_ms)
        return d->nanos ? rpc_call_invalid(call, "%s: %llds + %dns; must be %s", field,
                                           (long long)d->seconds, (int)d->nanos, range)
                        : rpc_call_invalid(call, "%s: %llds; must be %s", field,
                                           (long long)d->seconds, range);
    *ms = us / 1000;
    return GRPC_STATUS_OK;
}

grpc_status_code tier_check_time_range(rpc_call *call, const char *field,
                                       const Memory__V1__TimeRange *tr, tier_time_range *out) {
    memset(out, 0, sizeof *out);
    if (!tr) return GRPC_STATUS_OK;
    char f[64];
    grpc_status_code st;
    if (tr->start_time) {
        snprintf(f, sizeof f, "%s.start_time", field);
        if ((st = tier_check_time(call, f, tr->start_time, &out->start_us)) != GRPC_STATUS_OK)
            return st;
        out->has_start = 1;
    }
    if (tr->end_time) {
        snprintf(f, sizeof f, "%s.end_time", field);
        if ((st = tier_check_time(call, f, tr->end_time, &out->end_us)) != GRPC_STATUS_OK)
            return st;
        out->has_end = 1;
    }
    if (out->has_start && out->has_end && out->start_us >= out->end_us)
        return rpc_call_invalid(call,
                                "%s: start_time must be before end_time (the range is "
                                "[start_time, end_time))",
                                field);
    return GRPC_STATUS_OK;
}

grpc_status_code tier_check_struct(rpc_call *call, const char *field,
                                   const Google__Protobuf__Struct *st, size_t max,
                                   const char **json) {
    char *text = NULL, why[300];
    size_t len = 0;
    if (pbjson_from_struct(st, field, &text, &len, why, sizeof why) != 0)
        return rpc_call_invalid(call, "%s", why);
    if (len > max) {
        free(text);
        return rpc_call_invalid(call, "%s: %zu bytes encoded as JSON; at most %zu", field, len,
                                max);
    }
    *json = arena_strndup(rpc_call_arena(call), text, len);
    free(text);
    return *json ? GRPC_STATUS_OK : rpc_call_oom(call);
}

grpc_status_code tier_check_text_match(rpc_call *call, const char *field, int match,
                                       const char *query_field, const char *query, int *ranked) {
    if (match < MEMORY__V1__TEXT_MATCH__TEXT_MATCH_UNSPECIFIED ||
        match > MEMORY__V1__TEXT_MATCH__TEXT_MATCH_RANKED)
        return rpc_call_invalid(call, "%s: %d; TEXT_MATCH_STRICT or TEXT_MATCH_RANKED", field,
                                match);
    *ranked = match == MEMORY__V1__TEXT_MATCH__TEXT_MATCH_RANKED;
    if (*ranked && !query[0])
        return rpc_call_invalid(call, "%s: TEXT_MATCH_RANKED ranks by a text; give %s", field,
                                query_field);
    return GRPC_STATUS_OK;
}
