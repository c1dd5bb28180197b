/* bb_lua: the scripts (bb_codec.h has the formats they write); running
 * them is store/redis_script's. See bb_lua.h. */
#include "service/blackboard/bb_lua.h"

#include "service/blackboard/bb_codec.h"

#include <stdio.h>
#include <string.h>

#include "service/core/arena.h"
#include "service/core/status.h"
#include "service/tier/tier_erase.h"
#include "service/tier/tier_quota.h"

/* The scripts are Lua, one line per L(): clang-format would fold them. */
/* clang-format off */
#define L(line) line "\n"

/* What every board script shares: the keys, the clock (Redis's: one clock
 * for every replica), headers, the board's state, events and leases. */
#define PRELUDE \
    L("local K_HDR, K_VAL, K_META, K_LOG, K_LEASE, K_INDEX =") \
    L("  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]") \
    L("local BASE, CHANNEL = ARGV[1], ARGV[2]") \
    L("local LOG_MAX, LOG_BYTES = tonumber(ARGV[3]), tonumber(ARGV[4])") \
    L("local function num(n) return string.format('%d', n) end") \
    L("local NOW") \
    L("local function now_ms()") \
    L("  local t = redis.call('TIME')") \
    L("  NOW = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)") \
    L("  return NOW") \
    L("end") \
    L("local function header_at(s, init)") \
    L("  local v, l, c, u, le, p, z, ol, pos = string.match(s,") \
    L("    '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+):()', init)") \
    L("  if not v then return nil end") \
    L("  ol = tonumber(ol)") \
    L("  return {ver = tonumber(v), label = tonumber(l), create = c, update = u,") \
    L("    lease = tonumber(le), pii = p, size = tonumber(z),") \
    L("    owner = string.sub(s, pos, pos + ol - 1)}, pos + ol") \
    L("end") \
    /* An event's item header, and where its value starts. */ \
    L("local function event_header(ev)") \
    L("  local il, p = string.match(ev, '^%a %d+ %d+ %d+ (%d+):()')") \
    L("  if not il then return nil end") \
    L("  local kl, q = string.match(ev, '^(%d+):()', p + tonumber(il))") \
    L("  if not kl then return nil end") \
    L("  return header_at(ev, q + tonumber(kl))") \
    L("end") \
    L("local function header(h)") \
    L("  return num(h.ver) .. ' ' .. num(h.label) .. ' ' .. h.create .. ' ' .. h.update .. ' ' ..") \
    L("    num(h.lease) .. ' ' .. h.pii .. ' ' .. num(h.size) .. ' ' .. #h.owner .. ':' .. h.owner") \
    L("end") \
    /* The tenant's quota accounting (tier_quota.h): the board is an \
     * object of its creator; an item's bytes and those of the log's \
     * events about it are its owner's. QR, the board's charge, is loaded \
     * before a script's first change (charge_load) and kept by save; a \
     * board without one (made before quotas, or by a replica without \
     * them) is charged what it holds then, once, and counts for no \
     * creator. */ \
    TIER_QUOTA_LUA \
    L("local QR") \
    L("local function quota_open()") \
    L("  local tl, p = string.match(BASE, '^memoryd:bb:{(%d+):()')") \
    L("  Q_open('" BB_QUOTA_PREFIX "' .. tl .. ':' .. string.sub(BASE, p, p + tonumber(tl) - 1) ..") \
    L("    ':', NOW)") \
    L("end") \
    L("local function charge_load()") \
    L("  if QR then return end") \
    L("  quota_open()") \
    L("  QR = Q_load(BASE)") \
    L("  if QR then return end") \
    L("  local bytes = {}") \
    L("  local hk = redis.call('HGETALL', K_HDR)") \
    L("  for i = 2, #hk, 2 do") \
    L("    local h = header_at(hk[i], 1)") \
    L("    if h then bytes[h.owner] = (bytes[h.owner] or 0) + h.size end") \
    L("  end") \
    L("  for _, ev in ipairs(redis.call('LRANGE', K_LOG, 0, -1)) do") \
    L("    local h = event_header(ev)") \
    L("    if h then bytes[h.owner] = (bytes[h.owner] or 0) + #ev end") \
    L("  end") \
    L("  QR = Q_adopt(BASE, '', bytes)") \
    L("end") \
    L("local function charge(owner, d)") \
    L("  charge_load()") \
    L("  Q_charge(QR, owner, d)") \
    L("end") \
    L("local function board()") \
    L("  local m = redis.call('HMGET', K_META, 'r', 'id', 'x', 'b', 'f')") \
    L("  if not m[1] then return nil end") \
    L("  return {r = tonumber(m[1]), id = m[2], x = tonumber(m[3]), b = tonumber(m[4]),") \
    L("    f = tonumber(m[5]), x0 = tonumber(m[3])}") \
    L("end") \
    /* One revision's event: logged (the log trimmed to its bounds, f \
     * following the oldest entry) and published. */ \
    L("local function emit(bd, kind, now, key, owner, hdr, json)") \
    L("  local ev = kind .. ' ' .. num(bd.r) .. ' ' .. num(now) .. ' ' .. num(bd.x) .. ' ' ..") \
    L("    #bd.id .. ':' .. bd.id .. #key .. ':' .. key .. hdr .. (json or '')") \
    L("  redis.call('RPUSH', K_LOG, ev)") \
    L("  charge(owner, #ev)") \
    L("  local lb = redis.call('HINCRBY', K_META, 'lb', #ev)") \
    L("  local n = redis.call('LLEN', K_LOG)") \
    L("  while n > LOG_MAX or (n > 1 and lb > LOG_BYTES) do") \
    L("    local old = redis.call('LPOP', K_LOG)") \
    L("    local oh = event_header(old)") \
    L("    if oh then charge(oh.owner, -#old) end") \
    L("    lb = redis.call('HINCRBY', K_META, 'lb', -#old)") \
    L("    bd.f = bd.f + 1") \
    L("    n = n - 1") \
    L("  end") \
    L("  redis.call('PUBLISH', CHANNEL, ev)") \
    L("end") \
    L("local function index_leases()") \
    L("  local first = redis.call('ZRANGE', K_LEASE, 0, 0, 'WITHSCORES')") \
    L("  if #first == 0 then redis.call('ZREM', K_INDEX, BASE)") \
    L("  else redis.call('ZADD', K_INDEX, first[2], BASE) end") \
    L("end") \
    L("local function save(bd)") \
    L("  redis.call('HSET', K_META, 'r', num(bd.r), 'id', bd.id, 'x', num(bd.x),") \
    L("    'b', num(bd.b), 'f', num(bd.f))") \
    L("  for _, k in ipairs({K_HDR, K_VAL, K_META, K_LOG, K_LEASE}) do") \
    L("    redis.call('PEXPIREAT', k, num(bd.x))") \
    L("  end") \
    L("  if QR then Q_save(BASE, QR, bd.x, bd.x ~= bd.x0) end") \
    L("  index_leases()") \
    L("end") \
    /* Deletes key (its header h) in a revision of its own, logged and \
     * published as an event of kind ('D' or 'L'), h taking the delete's \
     * version; the caller saves the board. Every way a key goes (a post, \
     * a lease, an erasure) goes through here, so all look alike. */ \
    L("local function remove(bd, kind, now, key, h)") \
    L("  bd.r = bd.r + 1") \
    L("  bd.b = bd.b - h.size") \
    L("  charge(h.owner, -h.size)") \
    L("  redis.call('HDEL', K_HDR, key)") \
    L("  redis.call('HDEL', K_VAL, key)") \
    L("  redis.call('ZREM', K_LEASE, key)") \
    L("  h.ver = bd.r") \
    L("  emit(bd, kind, now, key, h.owner, header(h), nil)") \
    L("end") \
    /* Deletes the keys whose lease ran out, one revision each; true when \
     * it changed the board (the caller saves it). */ \
    L("local function expire_due(bd, now)") \
    L("  local due = redis.call('ZRANGEBYSCORE', K_LEASE, '-inf', now)") \
    L("  if #due == 0 then return false end") \
    L("  charge_load()") \
    L("  for _, key in ipairs(due) do") \
    L("    redis.call('ZREM', K_LEASE, key)") \
    L("    local hs = redis.call('HGET', K_HDR, key)") \
    L("    local h = hs and header_at(hs, 1)") \
    L("    if h and h.lease > 0 and h.lease <= now then remove(bd, 'L', now, key, h) end") \
    L("  end") \
    L("  return true") \
    L("end")

/* ARGV[5..]: key, caller, clearance, write:all (1/0), has expected (1/0),
 * expected, delete (1/0), label, ttl ms (0: unset), lease ms (0: none),
 * PII kinds, size, JSON value, 4 random hex digits for a new board's id,
 * most keys, most bytes, default ttl ms. A new board's id is its creation
 * time (Redis's, 12 hex digits of Unix ms) and the random digits: the ids
 * of one task's boards sort by age; then read:all (1/0), then the four
 * quotas (tier_quota.h's order; 0: none). Answers {0, revision, expiry,
 * created, header, board id, then the four uses after the change (the
 * caller's count, the item owner's bytes)} or an error: {1} a key the
 * caller may neither read nor change, {2, current version, the caller's
 * own key (1/0)} not the expected version, {3} no such key to delete, {4,
 * keys} full, {5, bytes, bytes after} too big, {6} another's key, {7,
 * quota (1-based), use, use it would make} over a quota.
 *
 * A key hidden from the caller (above its clearance, or another's without
 * read:all) that it may not change either is refused before anything else
 * is compared, one way for both reasons: {2, 0, 0} (as a missing key's
 * mismatch) when the post names a version, so a claim held by another
 * agent is ABORTED as a claim race lost is, else {1}. Of a key the caller
 * may read, the version is compared before the owner. */
static const char post_body[] =
    PRELUDE
    L("local key, sub, clr, wall = ARGV[5], ARGV[6], tonumber(ARGV[7]), ARGV[8] == '1'")
    L("local has_exp, expected, del = ARGV[9] == '1', tonumber(ARGV[10]), ARGV[11] == '1'")
    L("local label, ttl, lease = tonumber(ARGV[12]), tonumber(ARGV[13]), tonumber(ARGV[14])")
    L("local pii, size, json, rnd = ARGV[15], tonumber(ARGV[16]), ARGV[17], ARGV[18]")
    L("local max_keys, max_bytes, def_ttl = tonumber(ARGV[19]), tonumber(ARGV[20]), tonumber(ARGV[21])")
    L("local rall = ARGV[22] == '1'")
    L("local qlim = {tonumber(ARGV[23]), tonumber(ARGV[24]), tonumber(ARGV[25]), tonumber(ARGV[26])}")
    L("local now = now_ms()")
    L("local bd = board()")
    L("if bd and expire_due(bd, now) then save(bd) end")
    L("local hs = bd and redis.call('HGET', K_HDR, key)")
    L("local old = hs and header_at(hs, 1) or nil")
    L("if old and (old.label > clr or (old.owner ~= sub and not rall and not wall)) then")
    L("  if has_exp then return {2, 0, 0} end")
    L("  return {1}")
    L("end")
    L("local cur = old and old.ver or 0")
    L("if has_exp and cur ~= expected then")
    L("  return {2, cur, (old and old.owner == sub) and 1 or 0}")
    L("end")
    L("if old and old.owner ~= sub and not wall then return {6} end")
    L("if del and not old then return {3} end")
    L("if not del then")
    L("  if not old and bd and redis.call('HLEN', K_HDR) >= max_keys then return {4, max_keys} end")
    L("  local b = (bd and bd.b or 0) - (old and old.size or 0) + size")
    L("  if b > max_bytes then return {5, bd and bd.b or 0, b} end")
    L("end")
    /* What the change may add to the tenant's and the principals' use: a \
     * new board, and the item's growth and its log event (measured once \
     * written; here bounded from above). A delete always goes. */
    L("if bd then charge_load() else")
    L("  quota_open()")
    L("  Q_release(BASE)") /* a board Redis dropped before its charge went */
    L("end")
    L("local owner = old and old.owner or sub")
    L("local grow = del and 0 or size - (old and old.size or 0) + #json + #key + #owner + #pii + 160")
    L("local over = Q_over(qlim, sub, bd and 0 or 1, owner, grow)")
    L("if over then return {7, over[1], over[2], over[3]} end")
    L("local created = 0")
    L("if not bd then")
    L("  bd = {r = 0, id = string.format('%012x', now) .. string.sub(rnd, 1, 4),")
    L("    x = now + (ttl > 0 and ttl or def_ttl), b = 0, f = 1}")
    L("  redis.call('DEL', K_HDR, K_VAL, K_LOG, K_LEASE)")
    L("  redis.call('HDEL', K_META, 'lb')")
    L("  QR = Q_new(BASE, sub)")
    L("  created = 1")
    L("elseif ttl > 0 and now + ttl > bd.x then")
    L("  bd.x = now + ttl")
    L("end")
    L("local h")
    L("if del then")
    L("  remove(bd, 'D', now, key, old)")
    L("  h = header(old)")
    L("else")
    L("  bd.r = bd.r + 1")
    L("  if old and old.label > label then label = old.label end")
    L("  local lease_at = lease > 0 and now + lease or 0")
    L("  h = header({ver = bd.r, label = label, create = old and old.create or num(now),")
    L("    update = num(now), lease = lease_at, pii = pii, size = size,")
    L("    owner = owner})")
    L("  bd.b = bd.b - (old and old.size or 0) + size")
    L("  charge(owner, size - (old and old.size or 0))")
    L("  redis.call('HSET', K_HDR, key, h)")
    L("  redis.call('HSET', K_VAL, key, json)")
    L("  if lease_at > 0 then redis.call('ZADD', K_LEASE, lease_at, key)")
    L("  elseif old and old.lease > 0 then redis.call('ZREM', K_LEASE, key) end")
    L("  emit(bd, 'P', now, key, owner, h, json)")
    L("end")
    L("save(bd)")
    L("local use = Q_use(sub, owner)")
    L("return {0, bd.r, bd.x, created, h, bd.id, use[1], use[2], use[3], use[4]}");

/* ARGV[5..]: caller, clearance, read:all (1/0), after ('' : a snapshot),
 * board id. Answers {'S', revision, expiry, board id, now, key, header,
 * value, ...} (the keys the caller may read; revision 0 and no id without
 * a board) or {'E', revision, expiry, board id, now, event, ...} (the
 * events after `after` the caller may read) when after and the board id
 * match the board and its log reaches back that far. Leases that ran out
 * are expired first, as every script does. */
static const char sync_body[] =
    PRELUDE
    L("local sub, clr, rall, after, want_id = ARGV[5], tonumber(ARGV[6]), ARGV[7] == '1',")
    L("  ARGV[8], ARGV[9]")
    L("local function visible(h) return h and h.label <= clr and (rall or h.owner == sub) end")
    L("local now = now_ms()")
    L("local bd = board()")
    L("if not bd then return {'S', 0, 0, '', now} end")
    L("if expire_due(bd, now) then save(bd) end")
    L("local a = after ~= '' and tonumber(after) or nil")
    L("if a and want_id == bd.id and a <= bd.r and a + 1 >= bd.f then")
    L("  local out = {'E', bd.r, bd.x, bd.id, now}")
    L("  if a < bd.r then")
    L("    for _, ev in ipairs(redis.call('LRANGE', K_LOG, a + 1 - bd.f, -1)) do")
    L("      if visible(event_header(ev)) then out[#out + 1] = ev end")
    L("    end")
    L("  end")
    L("  return out")
    L("end")
    L("local out = {'S', bd.r, bd.x, bd.id, now}")
    L("local hk = redis.call('HGETALL', K_HDR)")
    L("for i = 1, #hk, 2 do")
    L("  if visible(header_at(hk[i + 1], 1)) then")
    L("    local v = redis.call('HGET', K_VAL, hk[i])")
    L("    if v then")
    L("      out[#out + 1] = hk[i]")
    L("      out[#out + 1] = hk[i + 1]")
    L("      out[#out + 1] = v")
    L("    end")
    L("  end")
    L("end")
    L("return out");

/* No ARGV beyond the four. Answers 1 (the board's due leases expired), or
 * 0 when the board is gone (its index entry goes with it). */
static const char sweep_body[] =
    PRELUDE
    L("local bd = board()")
    L("if not bd then")
    L("  redis.call('ZREM', K_INDEX, BASE)")
    L("  return 0")
    L("end")
    L("if expire_due(bd, now_ms()) then save(bd) else index_leases() end")
    L("return 1");

/* ARGV[5..]: by owner (1/0), the owner, by subject (1/0), the subject id,
 * dry run (1/0). Deletes every key of the board whose owner is the owner
 * and whose value is a JSON object with a top-level string "subject_id"
 * equal to the subject id (each test only when asked for), whatever its
 * label: each a delete as a post's, in a revision of its own (a DELETE
 * event for every stream), so the board's items, bytes, log and streams
 * stay as consistent as after any delete. The board stays, empty or not,
 * until it expires, as a post's delete of its last key leaves it.
 *
 * The change log would replay erased values to a stream resuming from
 * before the erasure, so it loses its oldest events up to the last PUT
 * whose value the same tests select (an erased key's, or an older value
 * of a key that names the subject no more): a resume from before that
 * revision gets a SNAPSHOT, as when the log no longer reaches back; later
 * events, the erasure's DELETEs among them, stay.
 *
 * A dry run changes nothing: it skips the keys whose lease ran out, which
 * the next script expires anyway. Answers how many keys matched. */
static const char erase_body[] =
    PRELUDE
    TIER_ERASE_LUA_NAMES_SUBJECT
    L("local by_owner, owner = ARGV[5] == '1', ARGV[6]")
    L("local by_subject, subject, dry = ARGV[7] == '1', ARGV[8], ARGV[9] == '1'")
    L("local function selects(h, v)")
    L("  return h and (not by_owner or h.owner == owner) and")
    L("    (not by_subject or (v and names_subject(v, subject)))")
    L("end")
    L("local bd = board()")
    L("if not bd then return 0 end")
    L("local now = now_ms()")
    L("if not dry then charge_load() end")
    L("local changed = not dry and expire_due(bd, now)")
    L("local n = 0")
    L("local hk = redis.call('HGETALL', K_HDR)")
    L("for i = 1, #hk, 2 do")
    L("  local key, h = hk[i], header_at(hk[i + 1], 1)")
    L("  local hit = h and not (dry and h.lease > 0 and h.lease <= now) and")
    L("    selects(h, by_subject and redis.call('HGET', K_VAL, key))")
    L("  if hit then")
    L("    n = n + 1")
    L("    if not dry then")
    L("      remove(bd, 'D', now, key, h)")
    L("      changed = true")
    L("    end")
    L("  end")
    L("end")
    L("if not dry then")
    L("  local cut, cut_bytes, run, owners, lens = 0, 0, 0, {}, {}")
    L("  for i, ev in ipairs(redis.call('LRANGE', K_LOG, 0, -1)) do")
    L("    run = run + #ev")
    L("    local h, vpos = event_header(ev)")
    L("    owners[i], lens[i] = h and h.owner or '', #ev")
    L("    if string.sub(ev, 1, 1) == 'P' and selects(h, h and string.sub(ev, vpos)) then")
    L("      cut, cut_bytes = i, run")
    L("    end")
    L("  end")
    L("  if cut > 0 then")
    L("    for i = 1, cut do")
    L("      if owners[i] ~= '' then charge(owners[i], -lens[i]) end")
    L("    end")
    L("    redis.call('LTRIM', K_LOG, cut, -1)")
    L("    redis.call('HINCRBY', K_META, 'lb', -cut_bytes)")
    L("    bd.f = bd.f + cut")
    L("    changed = true")
    L("  end")
    L("end")
    L("if changed then save(bd) end")
    L("return n");

/* ARGV[5..]: by owner (1/0), the owner, by subject (1/0), the subject id,
 * the highest label (0: any). Reads, never writes: the items the erase
 * script would select with the same words, less those labelled above the
 * highest label (an export is a read and keeps the reader's ceiling) and
 * those whose lease ran out (gone for every reader; the next script that
 * writes expires them). One script, so the items are one revision's.
 * Answers {board expiry, key, header, value, ...}, or {} without a board. */
static const char export_body[] =
    PRELUDE
    TIER_ERASE_LUA_NAMES_SUBJECT
    L("local by_owner, owner = ARGV[5] == '1', ARGV[6]")
    L("local by_subject, subject = ARGV[7] == '1', ARGV[8]")
    L("local max_label = tonumber(ARGV[9])")
    L("local bd = board()")
    L("if not bd then return {} end")
    L("local now = now_ms()")
    L("local out = {num(bd.x)}")
    L("local hk = redis.call('HGETALL', K_HDR)")
    L("for i = 1, #hk, 2 do")
    L("  local key, h = hk[i], header_at(hk[i + 1], 1)")
    L("  local hit = h and (not by_owner or h.owner == owner) and")
    L("    (max_label == 0 or h.label <= max_label) and not (h.lease > 0 and h.lease <= now)")
    L("  local v = hit and redis.call('HGET', K_VAL, key)")
    L("  if v and (not by_subject or names_subject(v, subject)) then")
    L("    out[#out + 1] = key")
    L("    out[#out + 1] = hk[i + 1]")
    L("    out[#out + 1] = v")
    L("  end")
    L("end")
    L("return out");

/* KEYS[1] the lease index; ARGV[1] how many. The bases of boards with a
 * lease that ran out, by Redis's clock. */
static const char due_body[] =
    L("local t = redis.call('TIME')")
    L("local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)")
    L("return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, ARGV[1])");
/* clang-format on */

static redis_script scripts[BB_SCRIPT_COUNT] = {
    REDIS_SCRIPT("blackboard post", post_body),
    REDIS_SCRIPT("blackboard sync", sync_body),
    REDIS_SCRIPT("blackboard lease sweep", sweep_body),
    REDIS_SCRIPT("blackboard lease index", due_body),
    REDIS_SCRIPT("blackboard erase", erase_body),
    REDIS_SCRIPT("blackboard export", export_body),
};

bb_script *bb_script_get(bb_script_id id) { return &scripts[id]; }

int bb_eval_init(bb_eval *e, aredis *r, arena *a, bb_script_id script, int nkeys, int nargs) {
    return redis_eval_init(e, r, a, bb_script_get(script), nkeys, nargs);
}
