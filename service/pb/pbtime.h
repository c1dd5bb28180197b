/* pbtime: google.protobuf.Timestamp and Duration <-> microseconds, with
 * the range checks the API promises (a Timestamp must lie in
 * 0001-01-01..9999-12-31, nanos in 0..999999999). Messages are built in a
 * call's arena. */
#ifndef MEMORYD_PB_PBTIME_H
#define MEMORYD_PB_PBTIME_H
#include "google/protobuf/duration.pb-c.h"
#include "google/protobuf/timestamp.pb-c.h"
#include "service/core/arena.h"
#include <stdint.h>

/* A Timestamp for Unix time us (microseconds) in arena a; NULL on OOM. */
Google__Protobuf__Timestamp *pbtime_timestamp(arena *a, int64_t unix_us);
/* ts -> Unix microseconds. Returns 0, or -1 when ts is out of the
 * documented range (bad nanos, before year 1, after year 9999). */
int pbtime_timestamp_us(const Google__Protobuf__Timestamp *ts, int64_t *unix_us);
/* A Duration of us microseconds in arena a; NULL on OOM. */
Google__Protobuf__Duration *pbtime_duration(arena *a, int64_t us);
/* d -> microseconds. Returns 0, or -1 when nanos and seconds disagree in
 * sign, |nanos| > 999999999 or the value overflows. */
int pbtime_duration_us(const Google__Protobuf__Duration *d, int64_t *us);

#endif
