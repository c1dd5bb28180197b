/* cache_codec: the byte formats of the cache tier, apart from any I/O so
 * they can be unit-tested and fuzzed.
 *
 * Keys. Every cache key names its tenant, and either an owner (a private
 * slot, written by a principal holding cache:write) or the tenant's shared
 * slot (written by a principal holding cache:write:all):
 *     memoryd:c:<len>:<tenant>:o<len>:<owner>:<key>
 *     memoryd:c:<len>:<tenant>:s:<key>
 * Lengths are decimal byte counts, so no tenant or owner text can make one
 * slot's key equal to another's. Records cached for other tiers
 * (cache_records.h), by a one-letter kind (e: GlobalMemory entities):
 *     memoryd:<kind>:<len>:<tenant>:<id>
 * The same strings key L1, L2 (Redis) and the invalidation messages.
 *
 * Values in Redis (little-endian):
 *     0 'm'  1 version (1)  2 label  3 flags (0)
 *     4..11 created Unix ms  12..19 expire Unix ms  20..21 owner length
 *     owner bytes, then the value bytes.
 * Byte 2 is the label so a Redis script can read it with GETRANGE k 2 2.
 *
 * Invalidation messages on CACHE_INVALIDATE_CHANNEL: "<replica id> <key>",
 * the replica id being 16 hex digits (a replica skips its own), or
 * "<replica id>*<prefix>" for every key starting with prefix (an erasure
 * flushing a tenant's or a principal's entries). */
#ifndef MEMORYD_CACHE_CACHE_CODEC_H
#define MEMORYD_CACHE_CACHE_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "service/cache/cache_item.h"
#include "service/core/arena.h"

#define CACHE_INVALIDATE_CHANNEL "memoryd:cache:invalidate"
#define CACHE_HEADER_BYTES 22
#define CACHE_REPLICA_ID_LEN 16

/* The key of a slot in arena a: owner NULL for the tenant's shared slot.
 * Sets *len; NULL when out of memory. */
char *cache_key_slot(arena *a, const char *tenant, const char *owner, const char *key,
                     size_t keylen, size_t *len);
/* The key of record id of tenant kept for another tier (cache_records.h):
 * kind 'e' for entities (GetEntity's cache-aside). */
char *cache_key_record(arena *a, char kind, const char *tenant, const char *id, size_t *len);
/* cache_key_record(a, 'e', ...). */
char *cache_key_entity(arena *a, const char *tenant, const char *id, size_t *len);

/* The Redis value for it in arena a (*len set); NULL when out of memory. */
uint8_t *cache_blob_encode(arena *a, const cache_item *it, size_t *len);
/* A new item (one reference, caller's) from a Redis value; NULL when the
 * bytes are not a well-formed value (or out of memory). */
cache_item *cache_blob_decode(const uint8_t *b, size_t len);

/* Writes "<replica> <key>" into buf, which holds at least
 * CACHE_INVAL_BYTES(keylen) bytes; returns its length (no NUL written). */
#define CACHE_INVAL_BYTES(keylen) ((keylen) + CACHE_REPLICA_ID_LEN + 1)
size_t cache_inval_encode(const char *replica, const char *key, size_t keylen, char *buf);
/* The same for every key starting with prefix[0..plen). */
size_t cache_inval_encode_prefix(const char *replica, const char *prefix, size_t plen, char *buf);
/* Splits a message: 0 with *key and *keylen pointing into msg, 2 the same
 * for a prefix, 1 when it is this replica's own (skip it), -1 when
 * malformed. */
int cache_inval_decode(const char *msg, size_t len, const char *replica, const char **key,
                       size_t *keylen);

#endif
