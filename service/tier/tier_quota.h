/* tier_quota: how much of the shared Redis one tenant, and one principal,
 * may hold in a tier that keeps its records there (blackboards, sessions):
 * a count of objects (boards, sessions) and their bytes, each per tenant
 * and per principal, so that one token cannot fill Redis and take the
 * cache, sessions and boards of every tenant down with it.
 *
 * The accounting lives in Redis beside the records and changes inside the
 * tier's own scripts (TIER_QUOTA_LUA), in the same atomic step as the
 * change it counts: every replica sees one use, and no race between a
 * check and a write can pass a limit. Per tenant and tier, under a prefix
 * "memoryd:quota:<tier>:<tenant length>:<tenant>:":
 *     ...h  hash   n (objects), b (bytes), n:<principal>, b:<principal>;
 *                  c:<object>: its charge (who created it, charged the
 *                  count, and the bytes charged to each principal);
 *                  x: when the two keys expire (never empty, so its
 *                  expiry holds)
 *     ...x  zset   object -> when Redis drops it (Unix ms); and "" at +inf
 *                  (never empty either)
 * An object that expires is released (its charge subtracted) by the next
 * script of its tenant and tier that opens the accounting; the two keys
 * expire together, an hour or more after the last object, so a tenant that
 * stops writing leaves nothing behind. The scripts build the prefix from
 * the tenant in their own keys (one Redis: Redis Cluster is not
 * supported). A count is charged to the object's creator; bytes to the
 * principal each record belongs to (the tier's rule). Use never goes below
 * zero: a record written before quotas existed is released only as far as
 * it was charged.
 *
 * A refusal is STATUS_EQUOTA with a message naming the quota, its flag and
 * how the use goes down (RESOURCE_EXHAUSTED); metrics show each quota's
 * limit, refusals, and the highest use against it among recent writes. */
#ifndef MEMORYD_TIER_TIER_QUOTA_H
#define MEMORYD_TIER_TIER_QUOTA_H

#include <stddef.h>
#include <stdint.h>

/* The four quotas of a tier, in the order the scripts take and name them. */
typedef enum tier_quota_id {
    TIER_QUOTA_COUNT_TENANT = 0,
    TIER_QUOTA_COUNT_PRINCIPAL = 1,
    TIER_QUOTA_BYTES_TENANT = 2,
    TIER_QUOTA_BYTES_PRINCIPAL = 3,
    TIER_QUOTA_N = 4,
} tier_quota_id;

typedef struct tier_quota_def {
    const char *tier;               /* "blackboard": metrics' tier label (static) */
    const char *objects;            /* "boards": messages (static) */
    const char *freed_by;           /* how use goes down: messages (static) */
    int64_t limit[TIER_QUOTA_N];    /* bytes in bytes; 0: no limit */
    const char *flag[TIER_QUOTA_N]; /* "--quota-boards-per-tenant" (static) */
} tier_quota_def;

typedef struct tier_quota tier_quota;

/* A tier's quotas (def is copied; its strings are borrowed for ever).
 * NULL when out of memory. The first one registers the metrics collector;
 * free them after the server that uses them. */
tier_quota *tier_quota_create(const tier_quota_def *def);
void tier_quota_free(tier_quota *q);

/* The limit of quota id (0: none), for the scripts' words. */
int64_t tier_quota_limit(const tier_quota *q, tier_quota_id id);

/* A script's refusal: quota which (TIER_QUOTA_*), the use before the
 * change and the use it would make. Counts it and writes the message for
 * the caller into err. */
void tier_quota_refused(tier_quota *q, int which, int64_t use, int64_t would, char *err,
                        size_t errlen);
/* The use after an admitted change (in TIER_QUOTA_* order): metrics. */
void tier_quota_observe(tier_quota *q, const int64_t use[TIER_QUOTA_N]);

/* The accounting in Lua, for a tier's scripts. Needs num(n) (a number as
 * an integer string). Q_open(prefix, now) once per script before any
 * other; then:
 *   Q_load(m)            the charge of object m, or nil
 *   Q_new(m, creator)    a new object's charge (a stale one released first)
 *   Q_adopt(m, creator, bytes) the charge of an object made before quotas
 *                        (or by a replica without them), charged once for
 *                        what it holds: bytes = {principal = n, ...}
 *   Q_charge(r, o, d)    d bytes more (or fewer) charged to principal o
 *   Q_save(m, r, expiry, moved) the charge kept until m's expiry (Unix
 *                        ms; moved: it may have changed since the last save)
 *   Q_expire(m, expiry)  m's expiry changed, its charge not
 *   Q_release(m)         m gone: its charge subtracted
 *   Q_over(lim, p, dn, o, db) the quota that dn more objects of creator p
 *                        and db more bytes of principal o would pass, as
 *                        {quota (1-based TIER_QUOTA_* + 1), use, would},
 *                        or nil (the principal's quota is named before the
 *                        tenant's); lim = {count/tenant, count/principal,
 *                        bytes/tenant, bytes/principal} (0: none)
 *   Q_use(p, o)          {count/tenant, count of p, bytes/tenant, bytes of o}
 * Changes of the use wait in Q.d for Q_save, Q_expire or Q_release to
 * apply them (one HINCRBY per field a script changed, however many times):
 * a script that charges ends in Q_save, as every change of an object does. */
/* clang-format off */
#define TIER_QUOTA_LUA \
    "local Q\n" \
    "local function Q_add(f, d)\n" \
    "  if d ~= 0 then Q.d[f] = (Q.d[f] or 0) + d end\n" \
    "end\n" \
    "local function Q_flush()\n" \
    "  for f, d in pairs(Q.d) do\n" \
    "    if d ~= 0 then\n" \
    "      local v = redis.call('HINCRBY', Q.h, f, d)\n" \
    "      if v <= 0 then redis.call('HDEL', Q.h, f); v = 0 end\n" \
    "      Q.v[f] = v\n" \
    "    end\n" \
    "  end\n" \
    "  Q.d = {}\n" \
    "end\n" \
    "local function Q_parse(s)\n" \
    "  local cl, pos = string.match(s, '^(%d+):()')\n" \
    "  if not cl then return nil end\n" \
    "  cl = tonumber(cl)\n" \
    "  local r = {creator = string.sub(s, pos, pos + cl - 1), b = {}}\n" \
    "  pos = pos + cl\n" \
    "  while pos <= #s do\n" \
    "    local n, ol, p = string.match(s, '^ (%d+) (%d+):()', pos)\n" \
    "    if not n then break end\n" \
    "    ol = tonumber(ol)\n" \
    "    r.b[string.sub(s, p, p + ol - 1)] = tonumber(n)\n" \
    "    pos = p + ol\n" \
    "  end\n" \
    "  return r\n" \
    "end\n" \
    "local function Q_release(m)\n" \
    "  local s = redis.call('HGET', Q.h, 'c:' .. m)\n" \
    "  redis.call('ZREM', Q.x, m)\n" \
    "  if not s then return end\n" \
    "  redis.call('HDEL', Q.h, 'c:' .. m)\n" \
    "  local r = Q_parse(s)\n" \
    "  if not r then return end\n" \
    "  if r.creator ~= '' then Q_add('n', -1); Q_add('n:' .. r.creator, -1) end\n" \
    "  for o, n in pairs(r.b) do Q_add('b', -n); Q_add('b:' .. o, -n) end\n" \
    "  Q_flush()\n" \
    "end\n" \
    /* Redis drops a key once its time is past, by the time its script \
     * started (not TIME's): only objects a second past their expiry are \
     * released, never one this script may still see and change; at most \
     * 256 a script, so a crowd expiring at once never stalls Redis (the \
     * rest go with the next scripts; until then use is over-counted, \
     * never under). */ \
    "local function Q_open(prefix, now)\n" \
    "  if Q then return end\n" \
    "  Q = {h = prefix .. 'h', x = prefix .. 'x', now = now, d = {}, v = {}}\n" \
    "  local due = redis.call('ZRANGEBYSCORE', Q.x, '-inf', '(' .. num(now - 1000), 'LIMIT', 0, 256)\n" \
    "  for _, m in ipairs(due) do Q_release(m) end\n" \
    "end\n" \
    "local function Q_load(m)\n" \
    "  local s = redis.call('HGET', Q.h, 'c:' .. m)\n" \
    "  return s and Q_parse(s)\n" \
    "end\n" \
    "local function Q_new(m, creator)\n" \
    "  Q_release(m)\n" \
    "  Q_add('n', 1)\n" \
    "  Q_add('n:' .. creator, 1)\n" \
    "  return {creator = creator, b = {}, fresh = true}\n" \
    "end\n" \
    "local function Q_adopt(m, creator, bytes)\n" \
    "  Q_release(m)\n" \
    "  local r = {creator = creator, b = {}, fresh = true}\n" \
    "  if creator ~= '' then Q_add('n', 1); Q_add('n:' .. creator, 1) end\n" \
    "  for o, n in pairs(bytes) do\n" \
    "    if n > 0 then r.b[o] = n; Q_add('b', n); Q_add('b:' .. o, n) end\n" \
    "  end\n" \
    "  return r\n" \
    "end\n" \
    "local function Q_charge(r, o, d)\n" \
    "  local have = r.b[o] or 0\n" \
    "  if d < -have then d = -have end\n" \
    "  if d == 0 then return end\n" \
    "  r.b[o] = have + d\n" \
    "  Q_add('b', d)\n" \
    "  Q_add('b:' .. o, d)\n" \
    "end\n" \
    /* The keys outlive the latest object by an hour, extended only when \
     * an expiry passes what they have (an hour's uses of a session). */ \
    "local function Q_expire(m, expiry)\n" \
    "  redis.call('ZADD', Q.x, expiry, m)\n" \
    "  Q_flush()\n" \
    "  if redis.call('PTTL', Q.h) < expiry - Q.now then\n" \
    "    local keep = num(expiry + 3600000)\n" \
    "    redis.call('HSET', Q.h, 'x', keep)\n" \
    "    redis.call('ZADD', Q.x, 'inf', '')\n" \
    "    redis.call('PEXPIREAT', Q.h, keep)\n" \
    "    redis.call('PEXPIREAT', Q.x, keep)\n" \
    "  end\n" \
    "end\n" \
    /* moved: the expiry may differ from the one saved last (or none was). */ \
    "local function Q_save(m, r, expiry, moved)\n" \
    "  local t = {#r.creator .. ':' .. r.creator}\n" \
    "  for o, n in pairs(r.b) do\n" \
    "    if n > 0 then t[#t + 1] = ' ' .. num(n) .. ' ' .. #o .. ':' .. o end\n" \
    "  end\n" \
    "  redis.call('HSET', Q.h, 'c:' .. m, table.concat(t))\n" \
    "  if moved or r.fresh then Q_expire(m, expiry) else Q_flush() end\n" \
    "end\n" \
    /* Read once a script (Q.v; Q_flush keeps it), with what waits in Q.d. */ \
    "local function Q_use(p, o)\n" \
    "  local f, miss = {'n', 'n:' .. p, 'b', 'b:' .. o}, {}\n" \
    "  for i = 1, 4 do if not Q.v[f[i]] then miss[#miss + 1] = f[i] end end\n" \
    "  if #miss > 0 then\n" \
    "    local u = redis.call('HMGET', Q.h, unpack(miss))\n" \
    "    for i, k in ipairs(miss) do Q.v[k] = tonumber(u[i]) or 0 end\n" \
    "  end\n" \
    "  local out = {}\n" \
    "  for i = 1, 4 do out[i] = Q.v[f[i]] + (Q.d[f[i]] or 0) end\n" \
    "  return out\n" \
    "end\n" \
    "local function Q_over(lim, p, dn, o, db)\n" \
    "  local use, add = Q_use(p, o), {dn, dn, db, db}\n" \
    "  for _, i in ipairs({2, 1, 4, 3}) do\n" \
    "    if add[i] > 0 and lim[i] > 0 and use[i] + add[i] > lim[i] then\n" \
    "      return {i, use[i], use[i] + add[i]}\n" \
    "    end\n" \
    "  end\n" \
    "  return nil\n" \
    "end\n"
/* clang-format on */

#endif
