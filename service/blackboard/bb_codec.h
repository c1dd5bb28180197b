/* bb_codec: the byte formats of the blackboard tier, apart from any I/O so
 * they can be unit-tested and fuzzed. The Lua scripts (bb_lua.c) write
 * them; this file reads them.
 *
 * Keys. A board of (tenant, task) lives in five Redis keys sharing one
 * base (lengths are decimal byte counts, so no tenant text can make two
 * boards' keys equal; the braces keep a board in one cluster slot):
 *     memoryd:bb:{<len>:<tenant>:<task>}:k   hash  key -> item header
 *     ...:v   hash  key -> JSON value
 *     ...:m   hash  r (revision), id (board id), x (expiry, Unix ms),
 *                   b (items' encoded bytes), f (oldest revision in the
 *                   log), lb (log bytes)
 *     ...:l   list  the change log: one event per revision, oldest first
 *     ...:e   zset  key -> lease expiry (Unix ms)
 * and its changes are published on the channel "<base>:c". One key of
 * all boards, BB_LEASE_INDEX (zset: base -> its earliest lease expiry),
 * lets any replica find the leases that ran out.
 *
 * Item header (text, so redis-cli shows it):
 *     "<version> <label> <create ms> <update ms> <lease ms|0> <pii kinds>
 *      <size> <owner len>:<owner>"
 * size is the item's share of the board's byte limit (its encoded size).
 *
 * Event (a log entry and a channel message):
 *     "<kind> <revision> <time ms> <board expiry ms> <id len>:<id>
 *      <key len>:<key><header><JSON value, PUT only>"
 * (no spaces after the lengths' colons); kind P = put, D = delete by a
 * post, L = delete because the key's lease ran out. A delete's header is
 * the deleted item's, with the version of the delete. */
#ifndef MEMORYD_BLACKBOARD_BB_CODEC_H
#define MEMORYD_BLACKBOARD_BB_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "service/core/arena.h"

#define BB_LEASE_INDEX "memoryd:bb:leases"
/* The quota accounting's prefix (tier_quota.h), before "<tenant length>:
 * <tenant>:"; the scripts build it from a board's base. */
#define BB_QUOTA_PREFIX "memoryd:quota:bb:"
/* A board id: 16 hex digits, its creation time (12 digits of Unix ms, by
 * Redis's clock) then 4 random ones, so the ids of one task's successive
 * boards compare (memcmp) in the order they were created. */
#define BB_BOARD_ID_LEN 16

/* The five keys of a board and its channel. */
typedef enum bb_key {
    BB_KEY_HEADERS = 0,
    BB_KEY_VALUES = 1,
    BB_KEY_META = 2,
    BB_KEY_LOG = 3,
    BB_KEY_LEASES = 4,
    BB_KEY_COUNT = 5,
} bb_key;

typedef struct bb_names {
    const char *base; /* the lease index's member for this board */
    const char *key[BB_KEY_COUNT];
    const char *channel;
    size_t base_len, channel_len; /* the keys are base_len + 2 bytes */
} bb_names;

/* The names of tenant's board of task, in arena a; -1 when out of memory. */
int bb_names_make(arena *a, const char *tenant, const char *task, bb_names *out);
/* The same from a board's base (as the lease index holds it); -1 when out
 * of memory. */
int bb_names_from_base(arena *a, const char *base, size_t len, bb_names *out);
/* The tenant and task a board's base names (its inverse): 0 with them
 * pointing into base[0..len) (not NUL-terminated), or -1 when base is not
 * a board's. The task is what the API calls the board's task_id. */
int bb_base_parse(const char *base, size_t len, const char **tenant, size_t *tenant_len,
                  const char **task, size_t *task_len);

typedef struct bb_header {
    int64_t version;
    int label;
    int64_t create_ms, update_ms;
    int64_t lease_ms; /* 0: no lease */
    unsigned pii;     /* PII_* kinds (privacy/pii.h) */
    int64_t size;
    const char *owner; /* not NUL-terminated */
    size_t owner_len;
} bb_header;

/* Parses a header at s[0..n): 0 with *h (owner pointing into s) and *used
 * (its length), or -1 when malformed. */
int bb_header_parse(const char *s, size_t n, bb_header *h, size_t *used);

typedef enum bb_event_kind {
    BB_PUT = 'P',
    BB_DELETE = 'D',
    BB_LEASE_EXPIRED = 'L',
} bb_event_kind;

typedef struct bb_event {
    bb_event_kind kind;
    int64_t rev, time_ms, expire_ms;
    const char *id, *key, *json; /* into the parsed bytes; not NUL-terminated */
    size_t id_len, key_len, json_len;
    bb_header h;
} bb_event;

/* Parses an event: 0, or -1 when malformed (a PUT without a value, a
 * delete with one, a bad kind or number). */
int bb_event_parse(const char *s, size_t n, bb_event *ev);

#endif
