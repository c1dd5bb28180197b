/* sess_lua: the session scripts. Every operation on a session is one
 * script (store/redis_script.h), so Redis applies its checks (the session's
 * state and owner, the record's label, the bounds), its write and the
 * extension of the session's life atomically, in one round trip, by one
 * clock (Redis's TIME) for every replica.
 *
 * A session is a hash (KEYS[1], sess_store.h's key) of meta fields (@o
 * owner, @d duration ms, @c created, @a last used, @e ended (0: not), @u
 * durable, @b bytes of values, @g grace ms; times Unix ms) and one field
 * "k:<key>" per record: a header "<label> <version> <created ms> <updated
 * ms> <pii kinds, comma-separated, or -> <owner length>:<owner>\n" and the
 * value. The hash expires (PEXPIREAT) at its purge time. Each owner's
 * sessions are indexed in a sorted set (ARGV[1] .. owner length ":" ..
 * owner; members the session keys, scores their purge times) by which
 * erasure and export find them; its name is built inside the scripts
 * from the stored owner (one Redis: Redis Cluster is not supported).
 *
 * A use extends a session to within a second of its true expiry (less
 * for short durations): a use within that long of the last extension
 * writes nothing.
 *
 * Every script takes ARGV[1] the owner index prefix, ARGV[2] the caller,
 * ARGV[3] "1" when the caller may touch other principals' sessions, and
 * answers {code, state, owner, durable, duration, created, expire, purge,
 * ...}: SESS_OK or another SESS_* code (then possibly nothing else). */
#ifndef MEMORYD_SESSION_SESS_LUA_H
#define MEMORYD_SESSION_SESS_LUA_H

#include "service/store/redis_script.h"

typedef enum sess_script_id {
    SESS_SCRIPT_START = 0,  /* ARGV[4..10]: duration ms, grace ms, durable, the 4 quotas */
    SESS_SCRIPT_GET = 1,    /* ARGV[4..5]: key, clr; then the record or nothing */
    SESS_SCRIPT_SET = 2,    /* ARGV[4..15]: key, clr, label, lvl, pii, value, max keys,
                             * max bytes, the 4 quotas; then the record's header and size */
    SESS_SCRIPT_LIST = 3,   /* ARGV[4..5]: clr, with values; then key, record pairs */
    SESS_SCRIPT_END = 4,    /* then the number of records */
    SESS_SCRIPT_ERASE = 5,  /* ARGV[4..6]: principal ('' any), dry run, subject id ('' none);
                             * then the number erased (sess_lua.c) */
    SESS_SCRIPT_EXPORT = 6, /* ARGV[4..7]: principal, unused, subject id, clr; then
                             * durable, key, record pairs (sess_lua.c) */
    SESS_SCRIPT_COUNT = 7,
} sess_script_id;

/* What a script answers first. */
enum {
    SESS_OK = 0,
    SESS_NO_SESSION = 1, /* absent, past its grace, or not the caller's */
    SESS_NO_KEY = 2,     /* no such record the caller may see */
    SESS_CLOSED = 3,     /* a write to an EXPIRED or ENDED session */
    SESS_FULL = 4,       /* the session's keys or bytes */
    SESS_DENIED = 5,     /* the record's label is above the caller's clr */
    SESS_OVER_QUOTA = 6, /* then the quota (1-based), its use, the use it would make */
    SESS_EXISTS = 7,     /* Start: the id is taken */
};

/* The quota accounting's prefix (tier_quota.h), before "<tenant length>:
 * <tenant>:"; the scripts build it from the owner index prefix. Start and
 * Set take the four quotas (tier_quota.h's order; 0: none) and answer,
 * when they succeed, the four uses after the change (the session owner's)
 * after everything else. */
#define SESS_QUOTA_PREFIX "memoryd:quota:session:"

/* The script (redis_script hashes it on its first run). */
redis_script *sess_script(sess_script_id id);

#endif
