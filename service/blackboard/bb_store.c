/* bb_store: marshalling and parsing around the scripts; see bb_store.h. */
#include "service/blackboard/bb_store.h"
#include "service/blackboard/bb_store_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/blackboard/bb_render.h"
#include "service/core/array.h"
#include "service/core/cancel.h"
#include "service/core/clock.h"
#include "service/core/log.h"
#include "service/core/status.h"

void bb_store_word(bb_eval *e, int i, const char *s, size_t len) {
    e->argv[BB_EVAL_ARGV0 + i] = s;
    e->lens[BB_EVAL_ARGV0 + i] = len;
}

int bb_store_number(bb_eval *e, arena *a, int i, int64_t v) {
    char *s = arena_printf(a, "%lld", (long long)v);
    if (!s) return -1;
    bb_store_word(e, i, s, strlen(s));
    return 0;
}

int bb_store_board_words(bb_eval *e, arena *a, const bb_names *n, const bb_limits *lim, int *next) {
    for (int i = 0; i < BB_KEY_COUNT; i++) bb_store_word(e, i, n->key[i], n->base_len + 2);
    bb_store_word(e, BB_KEY_COUNT, BB_LEASE_INDEX, strlen(BB_LEASE_INDEX));
    bb_store_word(e, BOARD_KEYS, n->base, n->base_len);
    bb_store_word(e, BOARD_KEYS + 1, n->channel, n->channel_len);
    if (bb_store_number(e, a, BOARD_KEYS + 2, lim->log_entries) != 0 ||
        bb_store_number(e, a, BOARD_KEYS + 3, lim->log_bytes) != 0)
        return -1;
    *next = BOARD_KEYS + BOARD_ARGS;
    return 0;
}

int64_t bb_store_integer(const redisReply *r) {
    if (r->type == REDIS_REPLY_INTEGER) return r->integer;
    if (r->type == REDIS_REPLY_STRING) return strtoll(r->str, NULL, 10);
    return -1;
}

int bb_store_is_string(const redisReply *r) { return r->type == REDIS_REPLY_STRING; }

int bb_store_malformed(char *err, size_t errlen, const char *what) {
    snprintf(err, errlen, "%s: Redis answered something memoryd did not write", what);
    return STATUS_EUNAVAILABLE;
}

/* ------------------------------------------------------------ post */

static int post_answer(bb_post *p, const redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1)
        return bb_store_malformed(p->err, sizeof p->err, "post");
    int64_t code = bb_store_integer(r->element[0]);
    switch (code) {
    case 0: {
        if (r->elements != 6 + TIER_QUOTA_N || !bb_store_is_string(r->element[4]) ||
            !bb_store_is_string(r->element[5]))
            return bb_store_malformed(p->err, sizeof p->err, "post");
        if (p->quota) {
            int64_t use[TIER_QUOTA_N];
            for (int i = 0; i < TIER_QUOTA_N; i++) use[i] = bb_store_integer(r->element[6 + i]);
            tier_quota_observe(p->quota, use);
        }
        size_t used;
        p->rev = bb_store_integer(r->element[1]);
        p->expire_ms = bb_store_integer(r->element[2]);
        p->created = bb_store_integer(r->element[3]) == 1;
        if (bb_header_parse(r->element[4]->str, r->element[4]->len, &p->h, &used) != 0)
            return bb_store_malformed(p->err, sizeof p->err, "post");
        char *owner = arena_strndup(p->ar, p->h.owner, p->h.owner_len);
        char *id = arena_strndup(p->ar, r->element[5]->str, r->element[5]->len);
        if (!owner || !id) return STATUS_ENOMEM;
        p->h.owner = owner;
        p->board_id = id;
        return STATUS_OK;
    }
    case 1:
        snprintf(p->err, sizeof p->err,
                 "the key is taken by a value you may neither read nor modify (another "
                 "principal's, or labelled above your clearance)");
        return STATUS_EDENIED;
    case 2: {
        int64_t cur = r->elements > 1 ? bb_store_integer(r->element[1]) : -1;
        int own = r->elements > 2 && bb_store_integer(r->element[2]) == 1;
        if (cur > 0 && (own || p->read_all)) /* a version the caller may read anyway */
            snprintf(p->err, sizeof p->err,
                     "expected_version does not match: the key is at version %lld", (long long)cur);
        else /* one text for a missing key and one the caller may not read */
            snprintf(p->err, sizeof p->err,
                     "expected_version does not match: the key does not exist or is not one "
                     "you may read");
        return STATUS_ECONFLICT;
    }
    case 3: snprintf(p->err, sizeof p->err, "the key does not exist"); return STATUS_ENOTFOUND;
    case 4:
        snprintf(p->err, sizeof p->err, "the board already holds %lld keys, its most",
                 (long long)(r->elements > 1 ? bb_store_integer(r->element[1]) : 0));
        return STATUS_EPRECONDITION;
    case 5:
        snprintf(p->err, sizeof p->err,
                 "the board's items would take %lld bytes encoded, over its limit (they take "
                 "%lld now)",
                 (long long)(r->elements > 2 ? bb_store_integer(r->element[2]) : 0),
                 (long long)(r->elements > 1 ? bb_store_integer(r->element[1]) : 0));
        return STATUS_EPRECONDITION;
    case 6:
        snprintf(p->err, sizeof p->err,
                 "the key belongs to another principal; changing it needs blackboard:write:all");
        return STATUS_EDENIED;
    case 7:
        if (r->elements != 4 || !p->quota) return bb_store_malformed(p->err, sizeof p->err, "post");
        tier_quota_refused(p->quota, (int)bb_store_integer(r->element[1]) - 1,
                           bb_store_integer(r->element[2]), bb_store_integer(r->element[3]), p->err,
                           sizeof p->err);
        return STATUS_EQUOTA;
    default: return bb_store_malformed(p->err, sizeof p->err, "post");
    }
}

static void post_done(bb_eval *e, int status, redisReply *r) {
    bb_post *p = (bb_post *)e;
    if (status == STATUS_OK) status = post_answer(p, r);
    else snprintf(p->err, sizeof p->err, "%s", e->cmd.err);
    p->done(p, status);
}

int bb_post_start(bb_post *p, aredis *r, arena *a, const bb_names *n, const bb_limits *lim,
                  const bb_caller *c, const bb_post_in *in, int64_t deadline_ms) {
    bb_eval *e = &p->e;
    int i;
    p->ar = a;
    p->read_all = c->read_all;
    p->quota = lim->quota;
    p->err[0] = '\0';
    if (bb_eval_init(e, r, a, BB_SCRIPT_POST, BOARD_KEYS, BOARD_ARGS + 18 + TIER_QUOTA_N) != 0 ||
        bb_store_board_words(e, a, n, lim, &i) != 0)
        return -1;
    bb_store_word(e, i++, in->key, strlen(in->key));
    bb_store_word(e, i++, c->sub, strlen(c->sub));
    if (bb_store_number(e, a, i++, c->clr) != 0) return -1;
    bb_store_word(e, i++, c->write_all ? "1" : "0", 1);
    bb_store_word(e, i++, in->has_expected ? "1" : "0", 1);
    if (bb_store_number(e, a, i++, in->has_expected ? in->expected : 0) != 0) return -1;
    bb_store_word(e, i++, in->del ? "1" : "0", 1);
    if (bb_store_number(e, a, i++, in->label) != 0 || bb_store_number(e, a, i++, in->ttl_ms) != 0 ||
        bb_store_number(e, a, i++, in->lease_ms) != 0 || bb_store_number(e, a, i++, in->pii) != 0 ||
        bb_store_number(e, a, i++, in->size) != 0)
        return -1;
    bb_store_word(e, i++, in->json ? in->json : "", in->json ? in->json_len : 0);
    const char *id = arena_printf(a, "%04x", in->id_random & 0xffffu);
    if (!id) return -1;
    bb_store_word(e, i++, id, 4);
    if (bb_store_number(e, a, i++, lim->max_keys) != 0 ||
        bb_store_number(e, a, i++, lim->max_bytes) != 0 ||
        bb_store_number(e, a, i++, lim->default_ttl_ms) != 0)
        return -1;
    bb_store_word(e, i++, c->read_all ? "1" : "0", 1);
    for (int q = 0; q < TIER_QUOTA_N; q++)
        if (bb_store_number(e, a, i++,
                            lim->quota ? tier_quota_limit(lim->quota, (tier_quota_id)q) : 0) != 0)
            return -1;
    e->done = post_done;
    e->wait_reply = 1; /* its audit row follows its answer, whatever the caller does */
    bb_eval_submit(e, "blackboard post", deadline_ms);
    return 0;
}

/* ------------------------------------------------------------ sync */

static int item_cmp(const void *x, const void *y) {
    const bb_item *a = x, *b = y;
    size_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
    int c = memcmp(a->key, b->key, n);
    return c ? c : (a->key_len > b->key_len) - (a->key_len < b->key_len);
}

static int sync_items(bb_sync *s, const redisReply *r) {
    size_t n = (r->elements - 5) / 3;
    if ((r->elements - 5) % 3 != 0) return bb_store_malformed(s->err, sizeof s->err, "read");
    s->items = arena_alloc(s->ar, (n ? n : 1) * sizeof *s->items);
    if (!s->items) return STATUS_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const redisReply *k = r->element[5 + 3 * i], *h = r->element[6 + 3 * i],
                         *v = r->element[7 + 3 * i];
        bb_item *it = &s->items[i];
        size_t used;
        if (!bb_store_is_string(k) || !bb_store_is_string(h) || !bb_store_is_string(v) ||
            bb_header_parse(h->str, h->len, &it->h, &used) != 0)
            return bb_store_malformed(s->err, sizeof s->err, "read");
        it->key = k->str;
        it->key_len = k->len;
        it->json = v->str;
        it->json_len = v->len;
    }
    qsort(s->items, n, sizeof *s->items, item_cmp);
    s->nitems = n;
    return STATUS_OK;
}

static int sync_events(bb_sync *s, const redisReply *r) {
    size_t n = r->elements - 5;
    s->events = arena_alloc(s->ar, (n ? n : 1) * sizeof *s->events);
    if (!s->events) return STATUS_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const redisReply *ev = r->element[5 + i];
        if (!bb_store_is_string(ev) || bb_event_parse(ev->str, ev->len, &s->events[i]) != 0)
            return bb_store_malformed(s->err, sizeof s->err, "change log");
    }
    s->nevents = n;
    return STATUS_OK;
}

static int sync_answer(bb_sync *s, const redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 5 || !bb_store_is_string(r->element[0]) ||
        r->element[0]->len != 1 || !bb_store_is_string(r->element[3]))
        return bb_store_malformed(s->err, sizeof s->err, "read");
    s->snapshot = r->element[0]->str[0] == 'S';
    s->rev = bb_store_integer(r->element[1]);
    s->expire_ms = bb_store_integer(r->element[2]);
    s->board_id = r->element[3]->str;
    s->board_id_len = r->element[3]->len;
    s->now_ms = bb_store_integer(r->element[4]);
    return s->snapshot ? sync_items(s, r) : sync_events(s, r);
}

static void sync_done(bb_eval *e, int status, redisReply *r) {
    bb_sync *s = (bb_sync *)e;
    if (status == STATUS_OK) status = sync_answer(s, r);
    else snprintf(s->err, sizeof s->err, "%s", e->cmd.err);
    s->done(s, status);
}

int bb_sync_start(bb_sync *s, aredis *r, arena *a, const bb_names *n, const bb_limits *lim,
                  const bb_caller *c, int64_t after, const char *board_id, int64_t deadline_ms) {
    bb_eval *e = &s->e;
    int i;
    s->ar = a;
    s->err[0] = '\0';
    s->items = NULL;
    s->events = NULL;
    s->nitems = s->nevents = 0;
    if (bb_eval_init(e, r, a, BB_SCRIPT_SYNC, BOARD_KEYS, BOARD_ARGS + 5) != 0 ||
        bb_store_board_words(e, a, n, lim, &i) != 0)
        return -1;
    bb_store_word(e, i++, c->sub, strlen(c->sub));
    if (bb_store_number(e, a, i++, c->clr) != 0) return -1;
    bb_store_word(e, i++, c->read_all ? "1" : "0", 1);
    if (after >= 0) {
        if (bb_store_number(e, a, i++, after) != 0) return -1;
    } else {
        bb_store_word(e, i++, "", 0);
    }
    bb_store_word(e, i++, board_id ? board_id : "", board_id ? strlen(board_id) : 0);
    e->done = sync_done;
    bb_eval_submit(e, after >= 0 ? "blackboard resume" : "blackboard read", deadline_ms);
    return 0;
}

/* ------------------------------------------------------------ leases */

static void due_done(bb_eval *e, int status, redisReply *r) {
    bb_sweep *s = (bb_sweep *)e;
    s->nbases = 0;
    if (status == STATUS_OK && r->type != REDIS_REPLY_ARRAY)
        status = bb_store_malformed(s->err, sizeof s->err, "lease index");
    else if (status != STATUS_OK) snprintf(s->err, sizeof s->err, "%s", e->cmd.err);
    for (size_t i = 0; status == STATUS_OK && i < r->elements && s->nbases < s->cap; i++) {
        if (!bb_store_is_string(r->element[i])) continue;
        s->bases[s->nbases] = r->element[i]->str;
        s->base_lens[s->nbases++] = r->element[i]->len;
    }
    s->done(s, status);
}

int bb_sweep_due_start(bb_sweep *s, aredis *r, arena *a, int max, int64_t deadline_ms) {
    bb_eval *e = &s->e;
    s->err[0] = '\0';
    s->bases = arena_alloc(a, (size_t)max * sizeof *s->bases);
    s->base_lens = arena_alloc(a, (size_t)max * sizeof *s->base_lens);
    if (!s->bases || !s->base_lens || bb_eval_init(e, r, a, BB_SCRIPT_DUE, 1, 1) != 0) return -1;
    s->cap = (size_t)max;
    bb_store_word(e, 0, BB_LEASE_INDEX, strlen(BB_LEASE_INDEX));
    if (bb_store_number(e, a, 1, max) != 0) return -1;
    e->done = due_done;
    bb_eval_submit(e, "blackboard lease index", deadline_ms);
    return 0;
}

static void swept(bb_eval *e, int status, redisReply *r) {
    (void)r;
    bb_sweep *s = (bb_sweep *)e;
    if (status != STATUS_OK) snprintf(s->err, sizeof s->err, "%s", e->cmd.err);
    s->nbases = 0;
    s->done(s, status);
}

int bb_sweep_board_start(bb_sweep *s, aredis *r, arena *a, const bb_names *n, const bb_limits *lim,
                         int64_t deadline_ms) {
    bb_eval *e = &s->e;
    int i;
    s->err[0] = '\0';
    if (bb_eval_init(e, r, a, BB_SCRIPT_SWEEP, BOARD_KEYS, BOARD_ARGS) != 0 ||
        bb_store_board_words(e, a, n, lim, &i) != 0)
        return -1;
    e->done = swept;
    bb_eval_submit(e, "blackboard lease sweep", deadline_ms);
    return 0;
}
