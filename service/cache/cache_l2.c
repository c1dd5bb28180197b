/* cache_l2: Redis commands of the cache tier; see cache_l2.h. */
#include "service/cache/cache_l2.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/cache/cache_codec.h"
#include "service/core/clock.h"
#include "service/core/log.h"
#include "service/metrics/metrics.h"

/* KEYS[1] key; ARGV: blob, ttl ms, max label, channel, message. Byte 2 of
 * a blob (GETRANGE 2 2; Lua's index 3) is its label; reading one byte keeps
 * a 1 MiB value from being copied into the script. A write never lowers
 * the label of what it replaces (common.proto: max(requested, floor,
 * existing)): the blob is restamped then. Returns the stored label, or 0
 * when the existing value is above the writer's clearance. */
static const char set_script[] = "local l = redis.call('GETRANGE', KEYS[1], 2, 2) "
                                 "local v = ARGV[1] "
                                 "if l ~= '' then "
                                 "  if string.byte(l) > tonumber(ARGV[3]) then return 0 end "
                                 "  if string.byte(l) > string.byte(v, 3) then "
                                 "    v = string.sub(v, 1, 2) .. l .. string.sub(v, 4) end "
                                 "end "
                                 "redis.call('SET', KEYS[1], v, 'PX', ARGV[2]) "
                                 "redis.call('PUBLISH', ARGV[4], ARGV[5]) "
                                 "return string.byte(v, 3)";

/* KEYS[1] key; ARGV: max label, channel, message. 1 deleted, 0 absent,
 * -1 denied. */
static const char delete_script[] =
    "local l = redis.call('GETRANGE', KEYS[1], 2, 2) "
    "if l ~= '' and string.byte(l) > tonumber(ARGV[1]) then return -1 end "
    "local n = redis.call('DEL', KEYS[1]) "
    "redis.call('PUBLISH', ARGV[2], ARGV[3]) "
    "return n";

struct cache_l2 {
    aredis *ar;
    char replica[CACHE_REPLICA_ID_LEN + 1];
    metrics_counter hits, misses;
};

cache_l2 *cache_l2_create(aredis *ar, const char *replica) {
    cache_l2 *l2 = calloc(1, sizeof *l2);
    if (!l2) return NULL;
    l2->ar = ar;
    snprintf(l2->replica, sizeof l2->replica, "%s", replica);
    return l2;
}

void cache_l2_free(cache_l2 *l2) { free(l2); }

void cache_l2_get_stats(const cache_l2 *l2, uint64_t *hits, uint64_t *misses) {
    *hits = metrics_get(&l2->hits);
    *misses = metrics_get(&l2->misses);
}

/* A command's deadline: the call's, or CACHE_L2_COMMAND_MS from now if
 * sooner. */
static int64_t bounded(int64_t deadline_ms) {
    int64_t cap = clock_mono_ms(NULL) + CACHE_L2_COMMAND_MS;
    return deadline_ms < cap ? deadline_ms : cap;
}

static void mget_done(aredis_cmd *q, int status, redisReply *r) {
    cache_l2_lookup *lk = q->arg;
    if (status == STATUS_OK && (r->type != REDIS_REPLY_ARRAY || r->elements != lk->n)) {
        snprintf(q->err, sizeof q->err, "Redis answered MGET with something else than %zu values",
                 lk->n);
        status = STATUS_EUNAVAILABLE;
    }
    for (size_t i = 0; status == STATUS_OK && i < lk->n; i++) {
        const redisReply *e = r->element[i];
        if (e->type == REDIS_REPLY_STRING)
            lk->out[i] = cache_blob_decode((const uint8_t *)e->str, e->len);
        metrics_inc(lk->out[i] ? &lk->l2->hits : &lk->l2->misses);
    }
    lk->done(lk, status);
}

int cache_l2_mget_start(cache_l2 *l2, cache_l2_lookup *lk, arena *a, const char *const *keys,
                        const size_t *klens, size_t n, int64_t deadline_ms, cache_item **out) {
    const char **argv = arena_alloc(a, (n + 1) * sizeof *argv);
    size_t *lens = arena_alloc(a, (n + 1) * sizeof *lens);
    if (!argv || !lens) return -1;
    for (size_t i = 0; i < n; i++) out[i] = NULL;
    argv[0] = "MGET";
    lens[0] = 4;
    for (size_t i = 0; i < n; i++) argv[i + 1] = keys[i], lens[i + 1] = klens[i];
    lk->out = out;
    lk->n = n;
    lk->l2 = l2;
    lk->cmd = (aredis_cmd){.argc = (int)n + 1,
                           .argv = argv,
                           .lens = lens,
                           .what = "cache lookup",
                           .deadline_ms = bounded(deadline_ms),
                           .done = mget_done,
                           .arg = lk};
    aredis_submit(l2->ar, &lk->cmd);
    return 0;
}

void cache_l2_mget_cancel(cache_l2 *l2, cache_l2_lookup *lk) { aredis_cancel(l2->ar, &lk->cmd); }

static void write_done(aredis_cmd *q, int status, redisReply *r) {
    cache_l2_write *w = (cache_l2_write *)q;
    if (status == STATUS_OK) {
        if (r->type != REDIS_REPLY_INTEGER) {
            snprintf(q->err, sizeof q->err, "Redis script answered type %d, not an integer",
                     r->type);
            status = STATUS_EUNAVAILABLE;
        } else if (w->is_delete) {
            status = r->integer < 0    ? STATUS_EDENIED
                     : r->integer == 0 ? STATUS_ENOTFOUND
                                       : STATUS_OK;
        } else {
            status = r->integer >= 1 ? STATUS_OK : STATUS_EDENIED;
            w->stored_label = (int)r->integer;
        }
    }
    w->done(w, status);
}

/* EVAL of body on key with args, then the channel and key's invalidation
 * (built in arena a), as the scripts take them. */
static int start_script(cache_l2 *l2, cache_l2_write *w, arena *a, const char *body,
                        const char *key, size_t klen, int nargs, int64_t deadline_ms) {
    char *msg = arena_alloc(a, CACHE_INVAL_BYTES(klen));
    if (!msg) return -1;
    int argc = 0;
    w->argv[argc] = "EVAL", w->lens[argc++] = 4;
    w->argv[argc] = body, w->lens[argc++] = strlen(body);
    w->argv[argc] = "1", w->lens[argc++] = 1;
    w->argv[argc] = key, w->lens[argc++] = klen;
    for (int i = 0; i < nargs; i++) w->argv[argc] = w->args[i], w->lens[argc++] = w->arg_lens[i];
    w->argv[argc] = CACHE_INVALIDATE_CHANNEL, w->lens[argc++] = strlen(CACHE_INVALIDATE_CHANNEL);
    w->argv[argc] = msg, w->lens[argc++] = cache_inval_encode(l2->replica, key, klen, msg);
    w->cmd = (aredis_cmd){.argc = argc,
                          .argv = w->argv,
                          .lens = w->lens,
                          .what = w->is_delete ? "cache delete" : "cache write",
                          .deadline_ms = bounded(deadline_ms),
                          /* once sent, its audit row follows its answer */
                          .wait_reply = 1,
                          .done = write_done};
    aredis_submit(l2->ar, &w->cmd);
    return 0;
}

int cache_l2_set_start(cache_l2 *l2, cache_l2_write *w, arena *a, const char *key, size_t klen,
                       const uint8_t *blob, size_t blen, int64_t ttl_ms, int max_label,
                       int64_t deadline_ms) {
    snprintf(w->ttl, sizeof w->ttl, "%lld", (long long)ttl_ms);
    snprintf(w->label, sizeof w->label, "%d", max_label);
    w->is_delete = 0;
    w->args[0] = (const char *)blob, w->arg_lens[0] = blen;
    w->args[1] = w->ttl, w->arg_lens[1] = strlen(w->ttl);
    w->args[2] = w->label, w->arg_lens[2] = strlen(w->label);
    return start_script(l2, w, a, set_script, key, klen, 3, deadline_ms);
}

int cache_l2_delete_start(cache_l2 *l2, cache_l2_write *w, arena *a, const char *key, size_t klen,
                          int max_label, int64_t deadline_ms) {
    snprintf(w->label, sizeof w->label, "%d", max_label);
    w->is_delete = 1;
    w->args[0] = w->label, w->arg_lens[0] = strlen(w->label);
    return start_script(l2, w, a, delete_script, key, klen, 1, deadline_ms);
}

void cache_l2_write_cancel(cache_l2 *l2, cache_l2_write *w) { aredis_cancel(l2->ar, &w->cmd); }

/* ---- records kept in L2 too ---- */

/* KEYS: the record's value key, its generation key. ARGV: blob, ttl ms,
 * the generation its load started from ("" for none). A fill lands only
 * if no change came since (a change bumps the generation), so a load that
 * raced a write never stores what the write replaced. */
static const char fill_script[] = "if (redis.call('GET', KEYS[2]) or '') == ARGV[3] then "
                                  "  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) "
                                  "end return 0";

/* KEYS: value key, generation key. ARGV: the generation's TTL ms, the
 * channel, the invalidation message. */
static const char changed_script[] = "redis.call('INCR', KEYS[2]) "
                                     "redis.call('PEXPIRE', KEYS[2], ARGV[1]) "
                                     "redis.call('DEL', KEYS[1]) "
                                     "redis.call('PUBLISH', ARGV[2], ARGV[3]) return 0";

/* How long a record's generation outlives its last change: far longer
 * than any load (a load's deadline), so a load never sees it vanish and
 * come back as the same number. */
#define GENERATION_TTL_MS "86400000"

static void record_got(aredis_cmd *q, int status, redisReply *r) {
    cache_l2_record_get *g = q->arg;
    if (status == STATUS_OK && (r->type != REDIS_REPLY_ARRAY || r->elements != 2)) {
        snprintf(q->err, sizeof q->err, "Redis answered MGET with something else than 2 values");
        status = STATUS_EUNAVAILABLE;
    }
    if (status == STATUS_OK) {
        const redisReply *v = r->element[0], *gen = r->element[1];
        if (v->type == REDIS_REPLY_STRING)
            g->item = cache_blob_decode((const uint8_t *)v->str, v->len);
        if (gen->type == REDIS_REPLY_STRING) {
            if (gen->len >= sizeof g->gen) {
                snprintf(q->err, sizeof q->err, "a record generation is not a number");
                status = STATUS_EUNAVAILABLE;
                cache_item_unref(g->item);
                g->item = NULL;
            } else {
                memcpy(g->gen, gen->str, gen->len);
                g->gen[gen->len] = '\0';
            }
        }
    }
    if (status == STATUS_OK) metrics_inc(g->item ? &g->l2->hits : &g->l2->misses);
    g->done(g, status);
}

void cache_l2_record_get_start(cache_l2 *l2, cache_l2_record_get *g, const char *key, size_t klen,
                               const char *gkey, size_t gklen, int64_t deadline_ms) {
    g->item = NULL;
    g->gen[0] = '\0';
    g->l2 = l2;
    g->argv[0] = "MGET", g->lens[0] = 4;
    g->argv[1] = key, g->lens[1] = klen;
    g->argv[2] = gkey, g->lens[2] = gklen;
    g->cmd = (aredis_cmd){.argc = 3,
                          .argv = g->argv,
                          .lens = g->lens,
                          .what = "record lookup",
                          .deadline_ms = bounded(deadline_ms),
                          .done = record_got,
                          .arg = g};
    aredis_submit(l2->ar, &g->cmd);
}

void cache_l2_record_get_cancel(cache_l2 *l2, cache_l2_record_get *g) {
    aredis_cancel(l2->ar, &g->cmd);
}

/* A command sent without waiting for its answer: the command and copies
 * of its words, freed when done; a failure is logged as what, naming id. */
typedef struct {
    aredis_cmd cmd;
    const char *argv[8];
    size_t lens[8];
    char id[200]; /* the record, for the log */
    const char *what;
    char bytes[];
} unwaited_cmd;

static void unwaited_done(aredis_cmd *q, int status, redisReply *r) {
    (void)r;
    unwaited_cmd *u = (unwaited_cmd *)q;
    if (status != STATUS_OK)
        log_fields(LOG_WARN, u->what, LOG_F_STR, "id", u->id, LOG_F_STR, "reason", q->err,
                   LOG_F_END);
    free(u);
}

/* Sends words[0..n) (n <= 8; each copied) on the event loop without
 * waiting (any thread). */
static void send_unwaited(cache_l2 *l2, const char *what, const char *id, const char *const *words,
                          const size_t *lens, int n) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += lens[i];
    unwaited_cmd *u = malloc(sizeof *u + total + 1);
    if (!u) {
        log_fields(LOG_WARN, what, LOG_F_STR, "id", id, LOG_F_STR, "reason", "out of memory",
                   LOG_F_END);
        return;
    }
    snprintf(u->id, sizeof u->id, "%s", id);
    u->what = what;
    char *p = u->bytes;
    for (int i = 0; i < n; i++) {
        memcpy(p, words[i], lens[i]);
        u->argv[i] = p, u->lens[i] = lens[i];
        p += lens[i];
    }
    u->cmd = (aredis_cmd){.argc = n,
                          .argv = u->argv,
                          .lens = u->lens,
                          .what = "unwaited command",
                          .deadline_ms = INT64_MAX,
                          .done = unwaited_done};
    aredis_submit(l2->ar, &u->cmd);
}

/* key's invalidation message, malloc'd (*len set); NULL when out of
 * memory (logged as what). */
static char *inval_message(const cache_l2 *l2, const char *what, const char *key, size_t klen,
                           const char *id, size_t *len) {
    char *msg = malloc(CACHE_INVAL_BYTES(klen));
    if (!msg)
        log_fields(LOG_WARN, what, LOG_F_STR, "id", id, LOG_F_STR, "reason", "out of memory",
                   LOG_F_END);
    else *len = cache_inval_encode(l2->replica, key, klen, msg);
    return msg;
}

void cache_l2_publish(cache_l2 *l2, const char *key, size_t klen, const char *id) {
    static const char what[] = "record invalidation not announced; other replicas drop their "
                               "L1 when their subscription recovers";
    size_t mlen;
    char *msg = inval_message(l2, what, key, klen, id, &mlen);
    if (!msg) return;
    const char *w[] = {"PUBLISH", CACHE_INVALIDATE_CHANNEL, msg};
    size_t l[] = {7, strlen(CACHE_INVALIDATE_CHANNEL), mlen};
    send_unwaited(l2, what, id, w, l, 3);
    free(msg);
}

void cache_l2_record_fill(cache_l2 *l2, const char *key, size_t klen, const char *gkey,
                          size_t gklen, const uint8_t *blob, size_t blen, int64_t ttl_ms,
                          const char *gen) {
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", (long long)ttl_ms);
    const char *w[] = {"EVAL", fill_script, "2", key, gkey, (const char *)blob, ttl, gen};
    size_t l[] = {4, strlen(fill_script), 1, klen, gklen, blen, strlen(ttl), strlen(gen)};
    send_unwaited(l2, "record not kept in L2 (the next lookup loads it again)", key, w, l, 8);
}

void cache_l2_record_changed(cache_l2 *l2, const char *key, size_t klen, const char *gkey,
                             size_t gklen, const char *id) {
    static const char what[] = "record change not announced: other replicas drop their L1 when "
                               "their subscription recovers; L2 may keep the old copy until its "
                               "TTL";
    size_t mlen;
    char *msg = inval_message(l2, what, key, klen, id, &mlen);
    if (!msg) return;
    const char *w[] = {
        "EVAL", changed_script, "2", key, gkey, GENERATION_TTL_MS, CACHE_INVALIDATE_CHANNEL, msg};
    size_t l[] = {4,
                  strlen(changed_script),
                  1,
                  klen,
                  gklen,
                  strlen(GENERATION_TTL_MS),
                  strlen(CACHE_INVALIDATE_CHANNEL),
                  mlen};
    send_unwaited(l2, what, id, w, l, 8);
    free(msg);
}
