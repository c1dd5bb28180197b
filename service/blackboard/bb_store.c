/* bb_store: marshalling and parsing around the scripts; see bb_store.h. */
#include "service/blackboard/bb_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/blackboard/bb_render.h"
#include "service/core/array.h"
#include "service/core/cancel.h"
#include "service/core/clock.h"
#include "service/core/log.h"
#include "service/core/status.h"

#define BOARD_KEYS (BB_KEY_COUNT + 1) /* the board's, then the lease index */
#define BOARD_ARGS 4                  /* base, channel, log entries, log bytes */

/* Sets word i (counting from the first KEY) to s[0..len). */
static void word(bb_eval *e, int i, const char *s, size_t len) {
    e->argv[BB_EVAL_ARGV0 + i] = s;
    e->lens[BB_EVAL_ARGV0 + i] = len;
}

static int number(bb_eval *e, arena *a, int i, int64_t v) {
    char *s = arena_printf(a, "%lld", (long long)v);
    if (!s) return -1;
    word(e, i, s, strlen(s));
    return 0;
}

/* The KEYS and ARGV[1..4] every board script takes; the next word's
 * index in *next. */
static int board_words(bb_eval *e, arena *a, const bb_names *n, const bb_limits *lim, int *next) {
    for (int i = 0; i < BB_KEY_COUNT; i++) word(e, i, n->key[i], n->base_len + 2);
    word(e, BB_KEY_COUNT, BB_LEASE_INDEX, strlen(BB_LEASE_INDEX));
    word(e, BOARD_KEYS, n->base, n->base_len);
    word(e, BOARD_KEYS + 1, n->channel, n->channel_len);
    if (number(e, a, BOARD_KEYS + 2, lim->log_entries) != 0 ||
        number(e, a, BOARD_KEYS + 3, lim->log_bytes) != 0)
        return -1;
    *next = BOARD_KEYS + BOARD_ARGS;
    return 0;
}

static int64_t integer(const redisReply *r) {
    if (r->type == REDIS_REPLY_INTEGER) return r->integer;
    if (r->type == REDIS_REPLY_STRING) return strtoll(r->str, NULL, 10);
    return -1;
}

static int is_string(const redisReply *r) { return r->type == REDIS_REPLY_STRING; }

/* A reply the scripts never give: the data in Redis is not ours. */
static int malformed(char *err, size_t errlen, const char *what) {
    snprintf(err, errlen, "%s: Redis answered something memoryd did not write", what);
    return STATUS_EUNAVAILABLE;
}

/* ------------------------------------------------------------ post */

static int post_answer(bb_post *p, const redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1)
        return malformed(p->err, sizeof p->err, "post");
    int64_t code = integer(r->element[0]);
    switch (code) {
    case 0: {
        if (r->elements != 6 + TIER_QUOTA_N || !is_string(r->element[4]) ||
            !is_string(r->element[5]))
            return malformed(p->err, sizeof p->err, "post");
        if (p->quota) {
            int64_t use[TIER_QUOTA_N];
            for (int i = 0; i < TIER_QUOTA_N; i++) use[i] = integer(r->element[6 + i]);
            tier_quota_observe(p->quota, use);
        }
        size_t used;
        p->rev = integer(r->element[1]);
        p->expire_ms = integer(r->element[2]);
        p->created = integer(r->element[3]) == 1;
        if (bb_header_parse(r->element[4]->str, r->element[4]->len, &p->h, &used) != 0)
            return malformed(p->err, sizeof p->err, "post");
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
        int64_t cur = r->elements > 1 ? integer(r->element[1]) : -1;
        int own = r->elements > 2 && integer(r->element[2]) == 1;
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
                 (long long)(r->elements > 1 ? integer(r->element[1]) : 0));
        return STATUS_EPRECONDITION;
    case 5:
        snprintf(p->err, sizeof p->err,
                 "the board's items would take %lld bytes encoded, over its limit (they take "
                 "%lld now)",
                 (long long)(r->elements > 2 ? integer(r->element[2]) : 0),
                 (long long)(r->elements > 1 ? integer(r->element[1]) : 0));
        return STATUS_EPRECONDITION;
    case 6:
        snprintf(p->err, sizeof p->err,
                 "the key belongs to another principal; changing it needs blackboard:write:all");
        return STATUS_EDENIED;
    case 7:
        if (r->elements != 4 || !p->quota) return malformed(p->err, sizeof p->err, "post");
        tier_quota_refused(p->quota, (int)integer(r->element[1]) - 1, integer(r->element[2]),
                           integer(r->element[3]), p->err, sizeof p->err);
        return STATUS_EQUOTA;
    default: return malformed(p->err, sizeof p->err, "post");
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
        board_words(e, a, n, lim, &i) != 0)
        return -1;
    word(e, i++, in->key, strlen(in->key));
    word(e, i++, c->sub, strlen(c->sub));
    if (number(e, a, i++, c->clr) != 0) return -1;
    word(e, i++, c->write_all ? "1" : "0", 1);
    word(e, i++, in->has_expected ? "1" : "0", 1);
    if (number(e, a, i++, in->has_expected ? in->expected : 0) != 0) return -1;
    word(e, i++, in->del ? "1" : "0", 1);
    if (number(e, a, i++, in->label) != 0 || number(e, a, i++, in->ttl_ms) != 0 ||
        number(e, a, i++, in->lease_ms) != 0 || number(e, a, i++, in->pii) != 0 ||
        number(e, a, i++, in->size) != 0)
        return -1;
    word(e, i++, in->json ? in->json : "", in->json ? in->json_len : 0);
    const char *id = arena_printf(a, "%04x", in->id_random & 0xffffu);
    if (!id) return -1;
    word(e, i++, id, 4);
    if (number(e, a, i++, lim->max_keys) != 0 || number(e, a, i++, lim->max_bytes) != 0 ||
        number(e, a, i++, lim->default_ttl_ms) != 0)
        return -1;
    word(e, i++, c->read_all ? "1" : "0", 1);
    for (int q = 0; q < TIER_QUOTA_N; q++)
        if (number(e, a, i++, lim->quota ? tier_quota_limit(lim->quota, (tier_quota_id)q) : 0) != 0)
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
    if ((r->elements - 5) % 3 != 0) return malformed(s->err, sizeof s->err, "read");
    s->items = arena_alloc(s->ar, (n ? n : 1) * sizeof *s->items);
    if (!s->items) return STATUS_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const redisReply *k = r->element[5 + 3 * i], *h = r->element[6 + 3 * i],
                         *v = r->element[7 + 3 * i];
        bb_item *it = &s->items[i];
        size_t used;
        if (!is_string(k) || !is_string(h) || !is_string(v) ||
            bb_header_parse(h->str, h->len, &it->h, &used) != 0)
            return malformed(s->err, sizeof s->err, "read");
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
        if (!is_string(ev) || bb_event_parse(ev->str, ev->len, &s->events[i]) != 0)
            return malformed(s->err, sizeof s->err, "change log");
    }
    s->nevents = n;
    return STATUS_OK;
}

static int sync_answer(bb_sync *s, const redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 5 || !is_string(r->element[0]) ||
        r->element[0]->len != 1 || !is_string(r->element[3]))
        return malformed(s->err, sizeof s->err, "read");
    s->snapshot = r->element[0]->str[0] == 'S';
    s->rev = integer(r->element[1]);
    s->expire_ms = integer(r->element[2]);
    s->board_id = r->element[3]->str;
    s->board_id_len = r->element[3]->len;
    s->now_ms = integer(r->element[4]);
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
        board_words(e, a, n, lim, &i) != 0)
        return -1;
    word(e, i++, c->sub, strlen(c->sub));
    if (number(e, a, i++, c->clr) != 0) return -1;
    word(e, i++, c->read_all ? "1" : "0", 1);
    if (after >= 0) {
        if (number(e, a, i++, after) != 0) return -1;
    } else {
        word(e, i++, "", 0);
    }
    word(e, i++, board_id ? board_id : "", board_id ? strlen(board_id) : 0);
    e->done = sync_done;
    bb_eval_submit(e, after >= 0 ? "blackboard resume" : "blackboard read", deadline_ms);
    return 0;
}

/* ------------------------------------------------------------ leases */

static void due_done(bb_eval *e, int status, redisReply *r) {
    bb_sweep *s = (bb_sweep *)e;
    s->nbases = 0;
    if (status == STATUS_OK && r->type != REDIS_REPLY_ARRAY)
        status = malformed(s->err, sizeof s->err, "lease index");
    else if (status != STATUS_OK) snprintf(s->err, sizeof s->err, "%s", e->cmd.err);
    for (size_t i = 0; status == STATUS_OK && i < r->elements && s->nbases < s->cap; i++) {
        if (!is_string(r->element[i])) continue;
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
    word(e, 0, BB_LEASE_INDEX, strlen(BB_LEASE_INDEX));
    if (number(e, a, 1, max) != 0) return -1;
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
        board_words(e, a, n, lim, &i) != 0)
        return -1;
    e->done = swept;
    bb_eval_submit(e, "blackboard lease sweep", deadline_ms);
    return 0;
}

/* ------------------------------------------------------------ a tenant's boards */

/* Erasure and export walk every board of a tenant the same way, blocking
 * on one pooled connection: the boards found by SCAN, then one script per
 * board. */

#define SCAN_COUNT "4096" /* keys Redis looks at per SCAN step (well under a ms) */

/* The bases of the boards found (malloc'd, each base too). */
typedef struct tenant_boards {
    char **base;
    size_t n, cap;
} tenant_boards;

static void boards_free(tenant_boards *b) {
    for (size_t i = 0; i < b->n; i++) free(b->base[i]);
    free(b->base);
}

static int boards_add(tenant_boards *b, const char *base, size_t len) {
    char **grown = array_grow(b->base, &b->cap, b->n + 1, sizeof *b->base, 64);
    char *copy = grown ? strndup(base, len) : NULL;
    if (!copy) return -1;
    b->base = grown;
    b->base[b->n++] = copy;
    return 0;
}

static int base_cmp(const void *x, const void *y) {
    return strcmp(*(char *const *)x, *(char *const *)y);
}

/* One walk: what every step needs. */
typedef struct board_walk {
    redis_pool *redis;
    redisContext *conn; /* NULL while a step gave it back (walk_lend) */
    tier_ctx *c;
    const char *op; /* "blackboard erase": errors and logs */
    arena *a;       /* one board's script words (and items) at a time */
    int broken;     /* Redis failed: the connection's replies may be out of step */
} board_walk;

/* Why Redis failed, in c->err: past the deadline ETIMEOUT (hiredis's
 * timeout reads as an I/O error), else EUNAVAILABLE. The connection goes
 * back to the pool to be reopened: after an I/O error or a timeout its
 * replies are out of step (a refusal by Redis leaves it usable, but
 * telling the two apart is not worth it on a failure path). */
static int walk_failed(board_walk *w, const redisReply *r, const char *what) {
    tier_ctx *c = w->c;
    w->broken = 1;
    if (clock_mono_us() / 1000 >= c->deadline_ms)
        return tier_fail(c, STATUS_ETIMEOUT, "%s: the deadline passed during %s", w->op, what);
    if (r && r->type == REDIS_REPLY_ERROR)
        return tier_fail(c, STATUS_EUNAVAILABLE, "%s: Redis refused %s: %.200s", w->op, what,
                         r->str);
    return tier_fail(c, STATUS_EUNAVAILABLE, "%s: %s failed: %s", w->op, what,
                     w->conn->err ? w->conn->errstr
                                  : "Redis answered something memoryd did not ask for");
}

/* STATUS_OK while the walk may go on. */
/* A step that then waits for someone else (an export's reader) gives the
 * connection back meanwhile; the walk takes one again for its next board. */
static void walk_lend(board_walk *w) {
    redis_pool_release(w->redis, w->conn, w->broken);
    w->conn = NULL;
}

static int walk_go_on(board_walk *w) {
    if (w->c->cancel && cancel_fired(w->c->cancel))
        return tier_fail(w->c, STATUS_ECANCELLED, "%s: cancelled", w->op);
    if (clock_mono_us() / 1000 >= w->c->deadline_ms)
        return tier_fail(w->c, STATUS_ETIMEOUT, "%s: the deadline passed", w->op);
    return STATUS_OK;
}

/* Every board of tenant into *out, sorted and without repeats (SCAN may
 * return a key twice). A board has one meta key; the MATCH pattern is the
 * tenant's prefix (bb_codec.h) with the glob characters escaped, and the
 * tenant's length in it keeps other tenants' boards out. */
static int walk_find_boards(board_walk *w, const char *tenant, tenant_boards *out) {
    size_t tl = strlen(tenant);
    char *pattern = malloc(2 * tl + 64);
    if (!pattern) return tier_fail(w->c, STATUS_ENOMEM, "out of memory");
    size_t plen = (size_t)sprintf(pattern, "memoryd:bb:{%zu:", tl);
    plen += redis_glob_escape(tenant, tl, pattern + plen);
    plen += (size_t)sprintf(pattern + plen, ":*}:m");
    char cursor[32] = "0";
    int code = STATUS_OK;
    do {
        if ((code = walk_go_on(w)) != STATUS_OK) break;
        redisReply *r =
            redisCommand(w->conn, "SCAN %s MATCH %b COUNT " SCAN_COUNT, cursor, pattern, plen);
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 || !is_string(r->element[0]) ||
            r->element[0]->len >= sizeof cursor || r->element[1]->type != REDIS_REPLY_ARRAY) {
            code = walk_failed(w, r, "SCAN");
            if (r) freeReplyObject(r);
            break;
        }
        memcpy(cursor, r->element[0]->str, r->element[0]->len);
        cursor[r->element[0]->len] = '\0';
        const redisReply *keys = r->element[1];
        for (size_t i = 0; code == STATUS_OK && i < keys->elements; i++) {
            const redisReply *k = keys->element[i];
            /* the base: the meta key without its ":m" */
            if (is_string(k) && k->len > 2 && boards_add(out, k->str, k->len - 2) != 0)
                code = tier_fail(w->c, STATUS_ENOMEM, "out of memory");
        }
        freeReplyObject(r);
    } while (code == STATUS_OK && strcmp(cursor, "0") != 0);
    free(pattern);
    if (code != STATUS_OK || out->n < 2) return code;
    /* A base holds no NUL (its tenant and task are C strings). */
    qsort(out->base, out->n, sizeof *out->base, base_cmp);
    size_t kept = 1;
    for (size_t i = 1; i < out->n; i++) {
        if (strcmp(out->base[i], out->base[kept - 1]) == 0) free(out->base[i]);
        else out->base[kept++] = out->base[i];
    }
    out->n = kept;
    return STATUS_OK;
}

/* Readies *e to run script on the board of base (its keys, then ARGV[1..4]
 * from lim, room for nsel words more from *next): STATUS_OK or ENOMEM. */
static int walk_script_init(board_walk *w, bb_script_id script, const char *base,
                            const bb_limits *lim, int nsel, bb_eval *e, int *next) {
    bb_names n;
    if (bb_names_from_base(w->a, base, strlen(base), &n) != 0 ||
        bb_eval_init(e, NULL, w->a, script, BOARD_KEYS, BOARD_ARGS + nsel) != 0 ||
        board_words(e, w->a, &n, lim, next) != 0)
        return tier_fail(w->c, STATUS_ENOMEM, "out of memory");
    return STATUS_OK;
}

/* The selection's words, as the erase and export scripts both take them:
 * by owner (1/0), the owner, by subject (1/0), the subject id. */
static void selection_words(bb_eval *e, int *i, const tier_erase_sel *sel) {
    word(e, (*i)++, sel->owner ? "1" : "0", 1);
    word(e, (*i)++, sel->owner ? sel->owner : "", sel->owner ? strlen(sel->owner) : 0);
    word(e, (*i)++, sel->subject_id ? "1" : "0", 1);
    word(e, (*i)++, sel->subject_id ? sel->subject_id : "",
         sel->subject_id ? strlen(sel->subject_id) : 0);
}

/* Runs e on the walk's connection: Redis's reply (freeReplyObject it), or
 * NULL on an I/O error. */
static redisReply *walk_script_run(board_walk *w, bb_eval *e) {
    redisReply *r = redisCommandArgv(w->conn, e->argc, e->argv, e->lens);
    /* Redis forgot the script (restarted, SCRIPT FLUSH): send it whole, as
     * bb_lua's eval does on the loop. */
    if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
        freeReplyObject(r);
        e->argv[0] = "EVAL";
        e->lens[0] = 4;
        e->argv[1] = e->script->body;
        e->lens[1] = e->script->len;
        r = redisCommandArgv(w->conn, e->argc, e->argv, e->lens);
    }
    return r;
}

/* One board's step of a walk: STATUS_OK to go on, else a code (with c->err
 * when the walk's own) that ends it. */
typedef int (*board_step)(board_walk *w, const char *base, void *arg);

/* Runs step on every board of tenant, one at a time (the arena reset in
 * between), checking c's deadline and cancel before each; op names the
 * walk in errors. STATUS_OK, or the first failure's code. */
static int walk_tenant(redis_pool *redis, tier_ctx *c, const char *op, const char *tenant,
                       board_step step, void *arg) {
    char err[256] = "";
    board_walk w = {.redis = redis, .c = c, .op = op};
    w.conn = redis_pool_acquire(redis, c->deadline_ms, err, sizeof err);
    if (!w.conn) {
        int code = clock_mono_us() / 1000 >= c->deadline_ms ? STATUS_ETIMEOUT : STATUS_EUNAVAILABLE;
        return tier_fail(c, code, "%s: Redis: %s", op, err);
    }
    tenant_boards b = {0};
    w.a = arena_create();
    int code =
        w.a ? walk_find_boards(&w, tenant, &b) : tier_fail(c, STATUS_ENOMEM, "out of memory");
    for (size_t i = 0; code == STATUS_OK && i < b.n; i++) {
        if ((code = walk_go_on(&w)) == STATUS_OK && !w.conn &&
            !(w.conn = redis_pool_acquire(redis, c->deadline_ms, err, sizeof err)))
            code = tier_fail(c, STATUS_EUNAVAILABLE, "%s: Redis: %s", op, err);
        if (code == STATUS_OK) code = step(&w, b.base[i], arg);
        arena_reset(w.a);
    }
    if (w.conn) redis_pool_release(redis, w.conn, w.broken);
    arena_free(w.a);
    boards_free(&b);
    return code;
}

/* ------------------------------------------------------------ erasure */

typedef struct erase_run {
    const bb_limits *lim;
    const tier_erase_sel *sel;
    int64_t *count;
} erase_run;

/* One board's erasure: one script, so Redis applies it atomically. */
static int erase_board(board_walk *w, const char *base, void *arg) {
    const erase_run *x = arg;
    bb_eval e;
    int i;
    int code = walk_script_init(w, BB_SCRIPT_ERASE, base, x->lim, 5, &e, &i);
    if (code != STATUS_OK) return code;
    selection_words(&e, &i, x->sel);
    word(&e, i++, x->sel->dry_run ? "1" : "0", 1);
    redisReply *r = walk_script_run(w, &e);
    if (!r || r->type != REDIS_REPLY_INTEGER) code = walk_failed(w, r, "the erase script");
    else *x->count += r->integer;
    if (r) freeReplyObject(r);
    return code;
}

int bb_erase_tenant(redis_pool *redis, const bb_limits *lim, tier_ctx *c, const tier_erase_sel *sel,
                    int64_t *count) {
    *count = 0;
    erase_run x = {.lim = lim, .sel = sel, .count = count};
    int code = walk_tenant(redis, c, "blackboard erase", sel->tenant, erase_board, &x);
    if (code != STATUS_OK)
        log_fields(LOG_WARN, "blackboard erase failed", LOG_F_STR, "error", c->err, LOG_F_INT,
                   "erased", *count, LOG_F_END);
    return code;
}

/* ------------------------------------------------------------ export */

/* A read appends nothing to the change log: the script's log bounds go
 * unused. */
static const bb_limits read_limits = {0};

typedef struct export_run {
    const tier_erase_sel *sel;
    tier_export_emit emit;
    void *emit_arg;
    int emitted; /* the code ending the walk is emit's (not logged: the caller's) */
    int64_t n;   /* records emitted: logs */
} export_run;

/* A record must be a JSON object (PrivacyExportResponse.record is a
 * Struct): a value that is one (compact, as bb_service.c stores values) is
 * the record; any other JSON value is wrapped as {"value": ...}. A NUL-
 * terminated copy in arena a; NULL when out of memory. */
static const char *export_json(arena *a, const char *v, size_t len) {
    if (len > 0 && v[0] == '{') return arena_strndup(a, v, len);
    return arena_printf(a, "{\"value\":%.*s}", (int)len, v);
}

/* One board's items: one read-only script, so they are one revision's, in
 * one reply, freed before the next board's. */
static int export_board(board_walk *w, const char *base, void *arg) {
    export_run *x = arg;
    const char *tenant, *task;
    size_t tenant_len, task_len;
    /* The MATCH pattern found base; checked again, as the read diode is on
     * the way out, because another tenant's record must never leave. */
    if (bb_base_parse(base, strlen(base), &tenant, &tenant_len, &task, &task_len) != 0 ||
        tenant_len != strlen(x->sel->tenant) || memcmp(tenant, x->sel->tenant, tenant_len) != 0) {
        log_fields(LOG_ERROR,
                   "blackboard export: SCAN found a key not of the tenant's boards; skipped",
                   LOG_F_STR, "base", base, LOG_F_END);
        return STATUS_OK;
    }
    bb_eval e;
    int i;
    int code = walk_script_init(w, BB_SCRIPT_EXPORT, base, &read_limits, 5, &e, &i);
    if (code != STATUS_OK) return code;
    selection_words(&e, &i, x->sel);
    if (number(&e, w->a, i++, x->sel->max_label) != 0)
        return tier_fail(w->c, STATUS_ENOMEM, "out of memory");
    redisReply *r = walk_script_run(w, &e);
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        code = walk_failed(w, r, "the export script");
        if (r) freeReplyObject(r);
        return code;
    }
    /* The reply is ours: the connection goes back while a slow reader
     * takes the items. */
    if (r->elements > 1) walk_lend(w);
    /* {}: the board expired since SCAN found it */
    if (r->elements > 0 && (r->elements % 3 != 1 || integer(r->element[0]) < 0))
        code = malformed(w->c->err, sizeof w->c->err, w->op);
    int64_t expire_ms = r->elements > 0 ? integer(r->element[0]) : 0;
    for (size_t j = 1; code == STATUS_OK && j < r->elements; j += 3) {
        const redisReply *k = r->element[j], *hs = r->element[j + 1], *v = r->element[j + 2];
        bb_header h;
        size_t used;
        if (!is_string(k) || !is_string(hs) || !is_string(v) ||
            bb_header_parse(hs->str, hs->len, &h, &used) != 0) {
            code = malformed(w->c->err, sizeof w->c->err, w->op);
            break;
        }
        tier_meta m;
        const char *id = arena_printf(w->a, "%.*s/%.*s", (int)task_len, task, (int)k->len, k->str);
        const char *json = export_json(w->a, v->str, v->len);
        if (!id || !json || bb_render_tier_meta(w->a, x->sel->tenant, &h, expire_ms, &m) != 0) {
            code = tier_fail(w->c, STATUS_ENOMEM, "out of memory");
            break;
        }
        tier_export_rec rec = {.kind = "blackboard_item", .id = id, .json = json, .meta = &m};
        if ((code = x->emit(x->emit_arg, &rec)) != STATUS_OK) x->emitted = 1;
        else x->n++;
    }
    freeReplyObject(r);
    return code;
}

int bb_export_tenant(redis_pool *redis, tier_ctx *c, const tier_erase_sel *sel,
                     tier_export_emit emit, void *emit_arg) {
    /* Boards end with their task (their TTL): no retention rule selects
     * them. Without an owner or a subject the scripts would select every
     * item: never a data subject's export. */
    if (tier_erase_is_retention(sel) || (!sel->owner && !sel->subject_id)) return STATUS_OK;
    export_run x = {.sel = sel, .emit = emit, .emit_arg = emit_arg};
    int code = walk_tenant(redis, c, "blackboard export", sel->tenant, export_board, &x);
    if (code != STATUS_OK && !x.emitted)
        log_fields(LOG_WARN, "blackboard export failed", LOG_F_STR, "error", c->err, LOG_F_INT,
                   "exported", x.n, LOG_F_END);
    return code;
}
