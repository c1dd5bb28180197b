/* pbtime: Timestamp/Duration conversions; see pbtime.h. */
#include "service/pb/pbtime.h"

#include <time.h>

#define MIN_SECONDS (-62135596800LL) /* 0001-01-01T00:00:00Z */
#define MAX_SECONDS 253402300799LL   /* 9999-12-31T23:59:59Z */

Google__Protobuf__Timestamp *pbtime_timestamp(arena *a, int64_t unix_us) {
    Google__Protobuf__Timestamp *ts = arena_message(a, &google__protobuf__timestamp__descriptor);
    if (!ts) return NULL;
    int64_t s = unix_us / 1000000, r = unix_us % 1000000;
    if (r < 0) {
        s--;
        r += 1000000;
    }
    ts->seconds = s;
    ts->nanos = (int32_t)(r * 1000);
    return ts;
}

int pbtime_timestamp_us(const Google__Protobuf__Timestamp *ts, int64_t *unix_us) {
    if (ts->nanos < 0 || ts->nanos > 999999999 || ts->seconds < MIN_SECONDS ||
        ts->seconds > MAX_SECONDS)
        return -1;
    *unix_us = ts->seconds * 1000000 + ts->nanos / 1000;
    return 0;
}

Google__Protobuf__Duration *pbtime_duration(arena *a, int64_t us) {
    Google__Protobuf__Duration *d = arena_message(a, &google__protobuf__duration__descriptor);
    if (!d) return NULL;
    d->seconds = us / 1000000;
    d->nanos = (int32_t)((us % 1000000) * 1000);
    return d;
}

int pbtime_duration_us(const Google__Protobuf__Duration *d, int64_t *us) {
    if (d->nanos > 999999999 || d->nanos < -999999999) return -1;
    if ((d->seconds > 0 && d->nanos < 0) || (d->seconds < 0 && d->nanos > 0)) return -1;
    /* 315576000000 s is the largest Duration the spec allows (10000 years). */
    if (d->seconds > 315576000000LL || d->seconds < -315576000000LL) return -1;
    *us = d->seconds * 1000000 + d->nanos / 1000;
    return 0;
}
