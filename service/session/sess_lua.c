/* sess_lua: the scripts; see sess_lua.h. */
#include "service/session/sess_lua.h"

#include "service/tier/tier_erase.h"
#include "service/tier/tier_quota.h"

/* The scripts are Lua, one line per L(): clang-format would fold them. */
/* clang-format off */
#define L(line) line "\n"

#define PRELUDE \
    L("local K, ZPREFIX, CALLER, ALL = KEYS[1], ARGV[1], ARGV[2], ARGV[3] == '1'") \
    L("local function num(n) return string.format('%d', n) end") \
    L("local function now_ms()") \
    L("  local t = redis.call('TIME')") \
    L("  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)") \
    L("end") \
    L("local function load()") \
    L("  local m = redis.call('HMGET', K, '@o', '@d', '@c', '@a', '@e', '@u', '@b', '@g')") \
    L("  if not m[1] then return nil end") \
    L("  return {o = m[1], d = tonumber(m[2]), c = tonumber(m[3]), a = tonumber(m[4]),") \
    L("    e = tonumber(m[5]), u = m[6], b = tonumber(m[7]), g = tonumber(m[8])}") \
    L("end") \
    /* ACTIVE 1, EXPIRED 2, ENDED 3 (memory.v1.SessionState). */ \
    L("local function state(s, now)") \
    L("  if s.e > 0 then return 3 elseif now < s.a + s.d then return 1 else return 2 end") \
    L("end") \
    L("local function expire(s) if s.e > 0 then return s.e end return s.a + s.d end") \
    L("local function purge(s) return expire(s) + s.g end") \
    L("local function reply(code, s, st, ...)") \
    L("  local r = {code, st, s.o, s.u, num(s.d), num(s.c), num(expire(s)), num(purge(s))}") \
    L("  for _, v in ipairs({...}) do r[#r + 1] = v end") \
    L("  return r") \
    L("end") \
    /* The tenant's quota accounting (tier_quota.h): a session is an \
     * object of its owner, and so are its bytes: its records (keys, \
     * headers, values) and OWN_BYTES for its own fields. QR, its charge, \
     * is loaded before a script changes it (charge_load); a session \
     * without one (made before quotas, or by a replica without them) is \
     * charged what it holds then, once. */ \
    TIER_QUOTA_LUA \
    L("local QR") \
    L("local function quota_open(now)") \
    L("  Q_open('" SESS_QUOTA_PREFIX "' .. string.match(ZPREFIX, '^memoryd:sessions:(.*)$'), now)") \
    L("end") \
    L("local function quota_limits(i)") \
    L("  return {tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]),") \
    L("    tonumber(ARGV[i + 3])}") \
    L("end") \
    L("local OWN_BYTES = 160") \
    L("local function charge_load(s, now)") \
    L("  if QR then return end") \
    L("  quota_open(now)") \
    L("  QR = Q_load(K)") \
    L("  if QR then return end") \
    L("  local bytes = #K + OWN_BYTES") \
    L("  local all = redis.call('HGETALL', K)") \
    L("  for i = 1, #all, 2 do") \
    L("    if string.sub(all[i], 1, 2) == 'k:' then bytes = bytes + #all[i] + #all[i + 1] end") \
    L("  end") \
    L("  QR = Q_adopt(K, s.o, {[s.o] = bytes})") \
    L("end") \
    L("local function quota_use(s)") \
    L("  local u = Q_use(s.o, s.o)") \
    L("  return num(u[1]), num(u[2]), num(u[3]), num(u[4])") \
    L("end") \
    /* The session's purge time, in the hash's expiry, the owner's index \
     * and the quota accounting (its charge, when the script changed it). */ \
    L("local function keep(s, now)") \
    L("  local p = purge(s)") \
    L("  redis.call('PEXPIREAT', K, num(p))") \
    L("  local z = ZPREFIX .. #s.o .. ':' .. s.o") \
    L("  redis.call('ZADD', z, p, K)") \
    L("  if redis.call('PTTL', z) < p - now then redis.call('PEXPIREAT', z, num(p)) end") \
    L("  quota_open(now)") \
    L("  if QR then Q_save(K, QR, p, true) else Q_expire(K, p) end") \
    L("end") \
    /* Use extends the session; within a granule of its last extension \
     * (a second, or a hundredth of a short duration) it needs no write: \
     * the hot path of a session in use is then reads alone. True when it \
     * extended it. */ \
    L("local function touch(s, now)") \
    L("  if now - s.a < math.min(1000, math.floor(s.d / 100)) then return false end") \
    L("  s.a = now") \
    L("  redis.call('HSET', K, '@a', num(now))") \
    L("  keep(s, now)") \
    L("  return true") \
    L("end") \
    L("local function open()") \
    L("  local s = load()") \
    L("  if s and (s.o == CALLER or ALL) then return s end") \
    L("  return nil") \
    L("end") \
    /* A record's header: its fields and where its value starts. */ \
    L("local function header(v)") \
    L("  local l, ver, c, u, p, ol, pos = string.match(v, '^(%d+) (%d+) (%d+) (%d+) (%S+) (%d+):()')") \
    L("  if not l then return nil end") \
    L("  ol = tonumber(ol)") \
    L("  return {label = tonumber(l), ver = tonumber(ver), c = c, u = u, p = p,") \
    L("    o = string.sub(v, pos, pos + ol - 1), vstart = pos + ol + 1}") \
    L("end") \
    L("local META = 8")

/* A new session of CALLER, unless it or its tenant holds the most
 * already (ARGV[7..10]: the quotas). */
static const char start_body[] =
    PRELUDE
    L("local now = now_ms()")
    L("local z = ZPREFIX .. #CALLER .. ':' .. CALLER")
    L("redis.call('ZREMRANGEBYSCORE', z, '-inf', now)")
    L("if redis.call('EXISTS', K) == 1 then return {7} end")
    L("quota_open(now)")
    L("local over = Q_over(quota_limits(7), CALLER, 1, CALLER, #K + OWN_BYTES)")
    L("if over then return {6, over[1], over[2], over[3]} end")
    L("local s = {o = CALLER, d = tonumber(ARGV[4]), c = now, a = now, e = 0, u = ARGV[6],")
    L("  b = 0, g = tonumber(ARGV[5])}")
    L("redis.call('HSET', K, '@o', s.o, '@d', num(s.d), '@c', num(now), '@a', num(now),")
    L("  '@e', '0', '@u', s.u, '@b', '0', '@g', num(s.g))")
    L("QR = Q_new(K, CALLER)")
    L("Q_charge(QR, CALLER, #K + OWN_BYTES)")
    L("keep(s, now)")
    L("return reply(0, s, 1, quota_use(s))");

/* A read's start: the session (reply 1 when there is none), its state
 * now, and its idle clock restarted when it is open. */
#define OPEN_AND_TOUCH                                                                             \
    L("local s = open()")                                                                          \
    L("if not s then return {1} end")                                                              \
    L("local now = now_ms()")                                                                      \
    L("local st = state(s, now)")                                                                  \
    L("if st == 1 then touch(s, now) end")

static const char get_body[] =
    PRELUDE OPEN_AND_TOUCH
    L("local v = redis.call('HGET', K, 'k:' .. ARGV[4])")
    L("local h = v and header(v)")
    L("if not h or h.label > tonumber(ARGV[5]) then return reply(2, s, st) end")
    L("return reply(0, s, st, v)");

/* The label: the requested one, at least the writer's floor, never below
 * the record's. The owner: whoever created the record. The bytes: the
 * session owner's (ARGV[12..15]: the quotas). */
static const char set_body[] =
    PRELUDE
    L("local s = open()")
    L("if not s then return {1} end")
    L("local now = now_ms()")
    L("local st = state(s, now)")
    L("if st ~= 1 then return reply(3, s, st) end")
    L("local f, value = 'k:' .. ARGV[4], ARGV[9]")
    L("local label = math.max(tonumber(ARGV[6]), tonumber(ARGV[7]))")
    L("local ver, created, owner, oldsize = 0, num(now), CALLER, 0")
    L("local old = redis.call('HGET', K, f)")
    L("local h = old and header(old)")
    L("if h then")
    L("  if h.label > tonumber(ARGV[5]) then return reply(5, s, st) end")
    L("  ver, created, owner = h.ver, h.c, h.o")
    L("  oldsize = #old - h.vstart + 1")
    L("  label = math.max(label, h.label)")
    L("elseif redis.call('HLEN', K) - META >= tonumber(ARGV[10]) then")
    L("  return reply(4, s, st, 'keys')")
    L("end")
    L("local bytes = s.b - oldsize + #value")
    L("if bytes > tonumber(ARGV[11]) then return reply(4, s, st, 'bytes') end")
    L("local hdr = num(label) .. ' ' .. num(ver + 1) .. ' ' .. created .. ' ' .. num(now) .. ' ' ..")
    L("  ARGV[8] .. ' ' .. #owner .. ':' .. owner .. '\\n'")
    /* A new record adds its field's name too. */
    L("local grow = #hdr + #value - (old and #old or -#f)")
    L("charge_load(s, now)")
    L("local over = Q_over(quota_limits(12), s.o, 0, s.o, grow)")
    L("if over then return {6, over[1], over[2], over[3]} end")
    L("redis.call('HSET', K, f, hdr .. value, '@b', num(bytes))")
    L("Q_charge(QR, s.o, grow)")
    L("if not touch(s, now) then Q_save(K, QR, purge(s), false) end")
    L("return reply(0, s, st, hdr .. num(#value), quota_use(s))");

static const char list_body[] =
    PRELUDE OPEN_AND_TOUCH
    L("local clr, values = tonumber(ARGV[4]), ARGV[5] == '1'")
    L("local all = redis.call('HGETALL', K)")
    L("local r = reply(0, s, st)")
    L("for i = 1, #all, 2 do")
    L("  local f, v = all[i], all[i + 1]")
    L("  if string.sub(f, 1, 2) == 'k:' then")
    L("    local h = header(v)")
    L("    if h and h.label <= clr then")
    L("      r[#r + 1] = string.sub(f, 3)")
    L("      if values then r[#r + 1] = v")
    L("      else r[#r + 1] = string.sub(v, 1, h.vstart - 1) .. num(#v - h.vstart + 1) end")
    L("    end")
    L("  end")
    L("end")
    L("return r");

static const char end_body[] =
    PRELUDE
    L("local s = open()")
    L("if not s then return {1} end")
    L("local now = now_ms()")
    /* An EXPIRED session ended at its expiry: End does not lengthen it. */
    L("if s.e == 0 then")
    L("  s.e = math.min(now, s.a + s.d)")
    L("  redis.call('HSET', K, '@e', num(s.e))")
    L("  keep(s, now)")
    L("end")
    L("return reply(0, s, 3, redis.call('HLEN', K) - META)");

/* A data subject's records out of one session. ARGV[4] who (a principal,
 * '' for any), ARGV[5] dry run (1/0), ARGV[6] subject id ('' for none).
 * By principal alone: the whole session when it is who's (and its index
 * entry), else the records who created. By subject id: the records whose
 * value names it (tier_erase.h's rule), created by who when who is given;
 * the session itself stays. */
static const char erase_body[] =
    PRELUDE
    TIER_ERASE_LUA_NAMES_SUBJECT
    L("local s = load()")
    L("if not s then return {1} end")
    L("local who, dry, subject = ARGV[4], ARGV[5] == '1', ARGV[6]")
    L("local n = 0")
    L("if not dry then charge_load(s, now_ms()) end")
    /* A durable session's records are counted where PostgreSQL erases
     * them (sess_pg.c), not twice. */
    L("local counted = s.u ~= '1'")
    L("if subject == '' and s.o == who then")
    L("  n = redis.call('HLEN', K) - META")
    L("  if not dry then")
    L("    redis.call('DEL', K)")
    L("    redis.call('ZREM', ZPREFIX .. #s.o .. ':' .. s.o, K)")
    L("    Q_release(K)")
    L("  end")
    L("  return {0, counted and n or 0}")
    L("end")
    L("local all = redis.call('HGETALL', K)")
    L("for i = 1, #all, 2 do")
    L("  local f, v = all[i], all[i + 1]")
    L("  local h = string.sub(f, 1, 2) == 'k:' and header(v)")
    L("  if h and (who == '' or h.o == who) and")
    L("      (subject == '' or names_subject(string.sub(v, h.vstart), subject)) then")
    L("    n = n + 1")
    L("    if not dry then")
    L("      redis.call('HDEL', K, f)")
    L("      redis.call('HINCRBY', K, '@b', -(#v - h.vstart + 1))")
    L("      Q_charge(QR, s.o, -(#f + #v))")
    L("    end")
    L("  end")
    L("end")
    L("if not dry and n > 0 then Q_save(K, QR, purge(s), false) end")
    L("return {0, counted and n or 0}");

/* Reads, never writes: the records of a plain (not durable) session that
 * erasure with the same words would select, less those labelled above
 * ARGV[7] (an export is a read). ARGV[4] who, ARGV[5] unused, ARGV[6]
 * subject, as erase. Answers {durable (1/0), field, record, ...}: the
 * records as stored (header and value), or {1} without the session.
 * Durable sessions answer no records: PostgreSQL's copies are exported. */
static const char export_body[] =
    PRELUDE
    TIER_ERASE_LUA_NAMES_SUBJECT
    L("local s = load()")
    L("if not s then return {1} end")
    L("local who, subject, clr = ARGV[4], ARGV[6], tonumber(ARGV[7])")
    L("if s.u == '1' then return {'1'} end")
    L("local out = {'0'}")
    L("local all = redis.call('HGETALL', K)")
    L("for i = 1, #all, 2 do")
    L("  local f, v = all[i], all[i + 1]")
    L("  local h = string.sub(f, 1, 2) == 'k:' and header(v)")
    L("  if h and h.label <= clr and (who == '' or h.o == who) and")
    L("      (subject == '' or names_subject(string.sub(v, h.vstart), subject)) then")
    L("    out[#out + 1] = string.sub(f, 3)")
    L("    out[#out + 1] = v")
    L("  end")
    L("end")
    L("return out");
/* clang-format on */

static redis_script scripts[SESS_SCRIPT_COUNT] = {
    REDIS_SCRIPT("session start", start_body),   REDIS_SCRIPT("session get", get_body),
    REDIS_SCRIPT("session set", set_body),       REDIS_SCRIPT("session list", list_body),
    REDIS_SCRIPT("session end", end_body),       REDIS_SCRIPT("session erase", erase_body),
    REDIS_SCRIPT("session export", export_body),
};

redis_script *sess_script(sess_script_id id) { return &scripts[id]; }
