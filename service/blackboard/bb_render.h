/* bb_render: blackboard records as memory.v1 messages, and the read
 * diode's final check on them: the one place Read, Post and the change
 * streams turn headers (bb_codec.h) into BlackboardItems. No I/O. */
#ifndef MEMORYD_BLACKBOARD_BB_RENDER_H
#define MEMORYD_BLACKBOARD_BB_RENDER_H

#include <stddef.h>
#include <stdint.h>

#include "memory/v1/blackboard.pb-c.h"
#include "service/blackboard/bb_codec.h"
#include "service/blackboard/bb_store.h"
#include "service/core/arena.h"
#include "service/tier/tier_meta.h"

/* The read diode on one item of the caller's tenant's board: its label at
 * most the clearance, and the caller's own unless it reads :all. */
int bb_visible(const bb_caller *c, const bb_header *h);

/* The final check behind the scripts' own filter: an item the caller may
 * not see means a script let it through (a bug): logged loudly, naming
 * it, and 0 returned so it is dropped; 1 when visible. */
int bb_check_visible(const bb_caller *c, const bb_header *h, const char *key, size_t key_len);

/* One item: its key, value (json parsed; none when json_len is 0) and
 * meta (version and times from h; expire_time the board's). Copies what
 * it needs into arena a. NULL when out of memory or when json is not JSON
 * (memoryd wrote it: a corrupt store). */
Memory__V1__BlackboardItem *bb_render_item(arena *a, const char *tenant, const char *key,
                                           size_t key_len, const bb_header *h, const char *json,
                                           size_t json_len, int64_t board_expire_ms);

/* RecordMeta for h (as bb_render_item's). */
Memory__V1__RecordMeta *bb_render_meta(arena *a, const char *tenant, const bb_header *h,
                                       int64_t board_expire_ms);

/* The same as a tier_meta (Privacy.Export's records) in *out: its owner
 * and PII kinds' array copied into arena a, the kinds' names static, tenant
 * borrowed. 0, or -1 when out of memory. */
int bb_render_tier_meta(arena *a, const char *tenant, const bb_header *h, int64_t board_expire_ms,
                        tier_meta *out);

/* A Timestamp for Unix ms. */
Google__Protobuf__Timestamp *bb_render_time(arena *a, int64_t unix_ms);

#endif
