/* cache_erase: a subject's cache values out of L2 and every L1; see
 * cache_erase.h. */
#include "service/cache_service/cache_erase.h"

#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/cache/cache_codec.h"
#include "service/core/clock.h"
#include "service/core/log.h"

/* Keys Redis looks at per SCAN step: a step costs Redis well under a
 * millisecond, and a Redis of a million keys takes some 250 of them. */
#define SCAN_COUNT "4096"

/* KEYS: a batch of keys; ARGV[1] the owner to match ("" any), ARGV[2] "1"
 * for a dry run. A value's owner sits at bytes 20..21 (its length,
 * little-endian) and 22.. (cache_codec.h). Returns how many matched. */
static const char erase_script[] =
    "local n = 0 "
    "for _, k in ipairs(KEYS) do "
    " local hit = ARGV[1] == '' "
    " if not hit then "
    "  local h = redis.call('GETRANGE', k, 20, 21) "
    "  if #h == 2 then "
    "   local len = string.byte(h, 1) + 256 * string.byte(h, 2) "
    "   hit = len == #ARGV[1] and redis.call('GETRANGE', k, 22, 21 + len) == ARGV[1] "
    "  end "
    " end "
    " if hit then "
    "  if ARGV[2] ~= '1' then hit = redis.call('UNLINK', k) == 1 end "
    "  if hit then n = n + 1 end "
    " end "
    "end "
    "return n";

/* One prefix to erase under: the owner whose values go (NULL: all), and
 * whether its values count. */
typedef struct erase_part {
    char prefix[1200];
    size_t plen;
    const char *owner;
    int counted;
} erase_part;

/* The prefix as a SCAN MATCH pattern (out holds 2 * plen + 2 bytes): glob
 * characters escaped, then "*". */
static void match_pattern(const erase_part *p, char *out) {
    size_t o = redis_glob_escape(p->prefix, p->plen, out);
    out[o++] = '*';
    out[o] = '\0';
}

static int redis_failed(tier_ctx *c, redisContext *rc, redisReply *r, const char *what) {
    if (r && r->type == REDIS_REPLY_ERROR)
        return tier_fail(c, STATUS_EUNAVAILABLE, "cache: %s refused by Redis: %.200s", what,
                         r->str);
    return tier_fail(c, STATUS_EUNAVAILABLE, "cache: %s failed: %s", what,
                     rc->errstr[0] ? rc->errstr : "unexpected reply");
}

/* SCAN over p's prefix, each batch through the script. */
static int erase_l2_part(redisContext *rc, tier_ctx *c, const erase_part *p, int dry_run,
                         int64_t *count) {
    char pattern[2 * sizeof p->prefix + 2];
    match_pattern(p, pattern);
    char cursor[32] = "0";
    do {
        if (clock_mono_us() / 1000 >= c->deadline_ms)
            return tier_fail(c, STATUS_ETIMEOUT, "cache: the deadline passed while erasing");
        redisReply *r = redisCommand(rc, "SCAN %s MATCH %b COUNT " SCAN_COUNT, cursor, pattern,
                                     strlen(pattern));
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY) {
            int code = redis_failed(c, rc, r, "SCAN");
            if (r) freeReplyObject(r);
            return code;
        }
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        redisReply *keys = r->element[1];
        if (keys->elements > 0) {
            size_t n = keys->elements, argc = 3 + n + 2;
            const char **argv = malloc(argc * sizeof *argv);
            size_t *lens = malloc(argc * sizeof *lens);
            if (!argv || !lens) {
                free(argv), free(lens), freeReplyObject(r);
                return tier_fail(c, STATUS_ENOMEM, "out of memory");
            }
            char nkeys[24];
            snprintf(nkeys, sizeof nkeys, "%zu", n);
            argv[0] = "EVAL", lens[0] = 4;
            argv[1] = erase_script, lens[1] = sizeof erase_script - 1;
            argv[2] = nkeys, lens[2] = strlen(nkeys);
            for (size_t i = 0; i < n; i++)
                argv[3 + i] = keys->element[i]->str, lens[3 + i] = keys->element[i]->len;
            argv[3 + n] = p->owner ? p->owner : "", lens[3 + n] = strlen(argv[3 + n]);
            argv[4 + n] = dry_run ? "1" : "0", lens[4 + n] = 1;
            redisReply *e = redisCommandArgv(rc, (int)argc, argv, lens);
            free(argv), free(lens);
            if (!e || e->type != REDIS_REPLY_INTEGER) {
                int code = redis_failed(c, rc, e, "erase script");
                if (e) freeReplyObject(e);
                freeReplyObject(r);
                return code;
            }
            if (p->counted) *count += e->integer;
            freeReplyObject(e);
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    return STATUS_OK;
}

static int announce(redisContext *rc, tier_ctx *c, const char *replica, const erase_part *p) {
    char msg[CACHE_INVAL_BYTES(sizeof p->prefix)];
    size_t mlen = cache_inval_encode_prefix(replica, p->prefix, p->plen, msg);
    redisReply *r = redisCommand(rc, "PUBLISH %s %b", CACHE_INVALIDATE_CHANNEL, msg, mlen);
    int ok = r && r->type == REDIS_REPLY_INTEGER;
    int code = ok ? STATUS_OK : redis_failed(c, rc, r, "PUBLISH");
    if (r) freeReplyObject(r);
    return code;
}

static void set_prefix(erase_part *p, const char *owner, int counted, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void set_prefix(erase_part *p, const char *owner, int counted, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(p->prefix, sizeof p->prefix, fmt, ap);
    va_end(ap);
    p->plen = w > 0 && (size_t)w < sizeof p->prefix ? (size_t)w : 0;
    p->owner = owner;
    p->counted = counted;
}

/* The prefixes sel reaches (cache_codec.h's key layout): an owner's
 * values are its private slot and what it wrote to the shared one; a
 * subject's are every value the selection reaches (values are opaque);
 * and always the tenant's copies of other tiers' records, uncounted. */
static size_t erase_parts(const tier_erase_sel *sel, erase_part *parts) {
    size_t tl = strlen(sel->tenant), n = 0;
    const char *t = sel->tenant;
    if (sel->owner) {
        set_prefix(&parts[n++], NULL, 1, "memoryd:c:%zu:%s:o%zu:%s:", tl, t, strlen(sel->owner),
                   sel->owner);
        set_prefix(&parts[n++], sel->owner, 1, "memoryd:c:%zu:%s:s:", tl, t);
    } else {
        set_prefix(&parts[n++], NULL, 1, "memoryd:c:%zu:%s:", tl, t);
    }
    /* The copies of other tiers' records (entities, entries), which their
     * tiers drop one by one as they erase: flushed again here, after them
     * (the cache runs last), so a copy that a concurrent read put back, or
     * whose invalidation Redis missed, goes too. */
    set_prefix(&parts[n++], NULL, 0, "memoryd:e:%zu:%s:", tl, t);
    set_prefix(&parts[n++], NULL, 0, "memoryd:n:%zu:%s:", tl, t);
    return n;
}

int cache_erase(cache_l1 *l1, redis_pool *redis, const char *replica, tier_ctx *c,
                const tier_erase_sel *sel, int64_t *count) {
    *count = 0;
    /* Values live an hour at most (their TTL): retention has nothing to do. */
    if (tier_erase_is_retention(sel)) return STATUS_OK;
    erase_part parts[4];
    size_t n = erase_parts(sel, parts);
    for (size_t i = 0; i < n; i++)
        if (parts[i].plen == 0)
            return tier_fail(c, STATUS_EINVALID, "cache: tenant or owner too long");
    if (redis) {
        char err[256] = "";
        redisContext *rc = redis_pool_acquire(redis, c->deadline_ms, err, sizeof err);
        if (!rc) return tier_fail(c, STATUS_EUNAVAILABLE, "cache: Redis: %s", err);
        int code = STATUS_OK;
        for (size_t i = 0; code == STATUS_OK && i < n; i++)
            code = erase_l2_part(rc, c, &parts[i], sel->dry_run, count);
        for (size_t i = 0; code == STATUS_OK && !sel->dry_run && i < n; i++)
            code = announce(rc, c, replica, &parts[i]);
        redis_pool_release(redis, rc, code != STATUS_OK);
        if (code != STATUS_OK) return code;
    }
    for (size_t i = 0; i < n; i++) {
        size_t got =
            cache_l1_erase(l1, parts[i].prefix, parts[i].plen, parts[i].owner, sel->dry_run);
        if (!redis && parts[i].counted) *count += (int64_t)got;
    }
    return STATUS_OK;
}
