/* episodic_filter: the payload filter of common.proto (Qdrant's filter
 * language) checked for the limits the API states and evaluated against a
 * point, with Qdrant's semantics (tests/contract/README.md lists them and
 * where in Qdrant's source each was confirmed), so the embedded backend
 * answers exactly as a Qdrant server would. Pure functions, no I/O. */
#ifndef MEMORYD_EPISODIC_EPISODIC_FILTER_H
#define MEMORYD_EPISODIC_EPISODIC_FILTER_H

#include <jansson.h>
#include <stddef.h>

#include "memory/v1/common.pb-c.h"
#include "service/vstore/vstore.h"

#define EPISODIC_FILTER_MAX_CONDITIONS 64
#define EPISODIC_FILTER_MAX_DEPTH 8
#define EPISODIC_FILTER_MAX_KEY 256
#define EPISODIC_FILTER_MAX_VALUES 1024

/* Checks f (NULL is fine: no filter) against the API's rules: at most 64
 * conditions in all, nested at most 8 deep, every condition set, keys in
 * the path syntax, match values strings / bools / integers |n| <= 2^53,
 * any/except lists of 1..1024 strings or 1..1024 integers, ranges with a
 * finite bound, has_id lists of 1..1024 valid ids. Returns 0, or -1 with
 * err naming the offending field below prefix (e.g.
 * "filter.must[2].field.key: ..."). */
int episodic_filter_check(const Memory__V1__Filter *f, const char *prefix, char *err,
                          size_t errlen);

/* 1 if the point (id, payload: its user payload object, may be NULL =
 * empty) matches f (NULL matches everything). f must have passed
 * episodic_filter_check. */
int episodic_filter_match(const Memory__V1__Filter *f, const vs_id *id, json_t *payload);

/* A PointId message as a vs_id: 0, or -1 when unset or not a UUID. */
int episodic_filter_point_id(const Memory__V1__PointId *pid, vs_id *out);

#endif
