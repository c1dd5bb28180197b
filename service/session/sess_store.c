/* sess_store: see sess_store.h. */
#include "service/session/sess_store.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/status.h"

#define COMMON_ARGS 3 /* ARGV[1..3]: owner index prefix, caller, all */

const char *sess_key(arena *a, const char *tenant, const char *id, size_t *len) {
    char *k = arena_printf(a, "memoryd:session:%zu:%s:%s", strlen(tenant), tenant, id);
    if (k && len) *len = strlen(k);
    return k;
}

int sess_op_init(sess_op *op, aredis *r, arena *a, sess_script_id script, const sess_caller *who,
                 const char *id, int nargs) {
    size_t klen;
    const char *key = sess_key(a, who->tenant, id, &klen);
    const char *zp = arena_printf(a, "memoryd:sessions:%zu:%s:", strlen(who->tenant), who->tenant);
    if (!key || !zp || redis_eval_init(&op->e, r, a, sess_script(script), 1, COMMON_ARGS + nargs))
        return -1;
    op->a = a;
    op->id = id;
    redis_eval_word(&op->e, 0, key, klen);
    redis_eval_word(&op->e, 1, zp, strlen(zp));
    redis_eval_word(&op->e, 2, who->sub, strlen(who->sub));
    redis_eval_word(&op->e, 3, who->all ? "1" : "0", 1);
    return 0;
}

void sess_op_arg(sess_op *op, int i, const char *s, size_t len) {
    redis_eval_word(&op->e, 1 + COMMON_ARGS + i, s, len);
}

int sess_op_num(sess_op *op, int i, int64_t v) {
    const char *s = arena_printf(op->a, "%lld", (long long)v);
    if (!s) return -1;
    sess_op_arg(op, i, s, strlen(s));
    return 0;
}

/* An answer of the wrong shape: the scripts and this decoder disagree. */
static int fail(sess_op *op, const char *fmt, const char *what) {
    snprintf(op->err, sizeof op->err, fmt, what);
    return STATUS_EINTERNAL;
}

static int reply_int(const redisReply *r, int64_t *out) {
    if (r->type == REDIS_REPLY_INTEGER) {
        *out = r->integer;
        return 0;
    }
    if (r->type != REDIS_REPLY_STRING || r->len == 0 || r->len > 18) return -1;
    char *end;
    *out = strtoll(r->str, &end, 10);
    return end == r->str + r->len ? 0 : -1;
}

/* {code, state, owner, durable, duration, created, expire, purge, ...}. */
static int decode_info(sess_op *op, const redisReply *r) {
    int64_t v[7];
    if (r->elements < 8 || r->element[2]->type != REDIS_REPLY_STRING ||
        r->element[3]->type != REDIS_REPLY_STRING)
        return -1;
    if (reply_int(r->element[1], &v[0]) != 0) return -1;
    for (int i = 4; i < 8; i++)
        if (reply_int(r->element[i], &v[i - 3]) != 0) return -1;
    op->info = (sess_info){.id = op->id,
                           .state = (int)v[0],
                           .owner = arena_strndup(op->a, r->element[2]->str, r->element[2]->len),
                           .durable = r->element[3]->len == 1 && r->element[3]->str[0] == '1',
                           .duration_ms = v[1],
                           .create_ms = v[2],
                           .expire_ms = v[3],
                           .purge_ms = v[4]};
    return op->info.owner ? 0 : -1;
}

/* The records in r's elements [from, to). */
static int decode_recs(sess_op *op, const redisReply *r, size_t from, size_t to, int keyed,
                       int with_value) {
    size_t n = (to - from) / (keyed ? 2 : 1);
    op->recs = arena_alloc(op->a, (n + 1) * sizeof *op->recs);
    if (!op->recs) return -1;
    for (size_t i = 0; i < n; i++) {
        const redisReply *k = keyed ? r->element[from + 2 * i] : NULL;
        const redisReply *b = r->element[from + (keyed ? 2 * i + 1 : i)];
        if (b->type != REDIS_REPLY_STRING || (k && k->type != REDIS_REPLY_STRING) ||
            sess_rec_parse(op->a, b->str, b->len, with_value, &op->recs[i]) != 0)
            return -1;
        if (k && !(op->recs[i].key = arena_strndup(op->a, k->str, k->len))) return -1;
    }
    op->nrecs = n;
    return 0;
}

static int decode(sess_op *op, const redisReply *r) {
    int64_t code;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || reply_int(r->element[0], &code) != 0)
        return -1;
    op->code = (int)code;
    sess_script_id id = (sess_script_id)(op->e.script - sess_script(0));
    if (id == SESS_SCRIPT_ERASE)
        return op->code == SESS_OK ? (r->elements == 2 ? reply_int(r->element[1], &op->count) : -1)
                                   : 0;
    if (op->code == SESS_OVER_QUOTA) {
        if (r->elements != 4) return -1;
        for (int i = 0; i < 3; i++)
            if (reply_int(r->element[1 + i], &op->over[i]) != 0) return -1;
        op->over[0]--;
        return 0;
    }
    if (r->elements == 1) return 0; /* no session (or none to report) */
    if (decode_info(op, r) != 0) return -1;
    if (op->code == SESS_FULL && r->elements > 8 && r->element[8]->type == REDIS_REPLY_STRING)
        op->full = arena_strndup(op->a, r->element[8]->str, r->element[8]->len);
    if (op->code != SESS_OK) return 0;
    size_t n = r->elements;
    if (id == SESS_SCRIPT_START || id == SESS_SCRIPT_SET) { /* the uses come last */
        if (n < 8 + 4) return -1;
        n -= 4;
        for (int i = 0; i < 4; i++)
            if (reply_int(r->element[n + i], &op->use[i]) != 0) return -1;
        op->has_use = 1;
    }
    switch (id) {
    case SESS_SCRIPT_START: return n == 8 ? 0 : -1;
    case SESS_SCRIPT_GET: return n == 9 ? decode_recs(op, r, 8, n, 0, 1) : -1;
    case SESS_SCRIPT_SET: return n == 9 ? decode_recs(op, r, 8, n, 0, 0) : -1;
    case SESS_SCRIPT_LIST:
        return (n - 8) % 2 == 0 ? decode_recs(op, r, 8, n, 1, op->with_values) : -1;
    case SESS_SCRIPT_END: return n == 9 ? reply_int(r->element[8], &op->count) : -1;
    default: return 0;
    }
}

static void evaluated(redis_eval *e, int status, redisReply *reply) {
    sess_op *op = (sess_op *)e;
    if (status != STATUS_OK) {
        snprintf(op->err, sizeof op->err, "%s", e->cmd.err);
    } else if (decode(op, reply) != 0) {
        status = fail(op, "%s: Redis answered in an unexpected shape", e->script->name);
    }
    op->done(op, status);
}

void sess_op_submit(sess_op *op, int64_t deadline_ms) {
    op->e.done = evaluated;
    /* A change, once sent, waits for Redis's answer whatever the caller
     * does: its audit row and write-through must follow it. */
    sess_script_id id = (sess_script_id)(op->e.script - sess_script(0));
    op->e.wait_reply = id == SESS_SCRIPT_START || id == SESS_SCRIPT_SET || id == SESS_SCRIPT_END;
    redis_eval_submit(&op->e, op->e.script->name, deadline_ms);
}
