/* bb_store_tenant: every board of a tenant, walked on one pooled
 * connection, for erasure and export; see bb_store.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/blackboard/bb_render.h"
#include "service/blackboard/bb_store.h"
#include "service/blackboard/bb_store_internal.h"
#include "service/core/array.h"
#include "service/core/cancel.h"
#include "service/core/clock.h"
#include "service/core/log.h"
#include "service/core/status.h"

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
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            !bb_store_is_string(r->element[0]) || r->element[0]->len >= sizeof cursor ||
            r->element[1]->type != REDIS_REPLY_ARRAY) {
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
            if (bb_store_is_string(k) && k->len > 2 && boards_add(out, k->str, k->len - 2) != 0)
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
        bb_store_board_words(e, w->a, &n, lim, next) != 0)
        return tier_fail(w->c, STATUS_ENOMEM, "out of memory");
    return STATUS_OK;
}

/* The selection's words, as the erase and export scripts both take them:
 * by owner (1/0), the owner, by subject (1/0), the subject id. */
static void selection_words(bb_eval *e, int *i, const tier_erase_sel *sel) {
    bb_store_word(e, (*i)++, sel->owner ? "1" : "0", 1);
    bb_store_word(e, (*i)++, sel->owner ? sel->owner : "", sel->owner ? strlen(sel->owner) : 0);
    bb_store_word(e, (*i)++, sel->subject_id ? "1" : "0", 1);
    bb_store_word(e, (*i)++, sel->subject_id ? sel->subject_id : "",
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
    bb_store_word(&e, i++, x->sel->dry_run ? "1" : "0", 1);
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
    if (bb_store_number(&e, w->a, i++, x->sel->max_label) != 0)
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
    if (r->elements > 0 && (r->elements % 3 != 1 || bb_store_integer(r->element[0]) < 0))
        code = bb_store_malformed(w->c->err, sizeof w->c->err, w->op);
    int64_t expire_ms = r->elements > 0 ? bb_store_integer(r->element[0]) : 0;
    for (size_t j = 1; code == STATUS_OK && j < r->elements; j += 3) {
        const redisReply *k = r->element[j], *hs = r->element[j + 1], *v = r->element[j + 2];
        bb_header h;
        size_t used;
        if (!bb_store_is_string(k) || !bb_store_is_string(hs) || !bb_store_is_string(v) ||
            bb_header_parse(hs->str, hs->len, &h, &used) != 0) {
            code = bb_store_malformed(w->c->err, sizeof w->c->err, w->op);
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
