/* sess_erase: the session tier's eraser and exporter (tier/tier_erase.h).
 * Every session of the tenant in Redis is visited with SCAN. A principal's
 * records go from Redis (a session it owns goes whole, in another's only
 * the records it created) and from PostgreSQL (durable sessions it owns,
 * records it created in others'). A subject's records are those whose
 * value is a JSON object naming it (tier_erase.h's rule), in Redis and in
 * PostgreSQL; their sessions stay. A retention rule reaches only
 * PostgreSQL's copies (Redis's end with their sessions). Export reads
 * PostgreSQL's copies of durable sessions and Redis's records of the
 * others. */
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/clock.h"
#include "service/session/sess_lua.h"
#include "service/session/sess_pg.h"
#include "service/session/sess_record.h"
#include "service/session/sess_service_internal.h"
#include "service/store/redis_url.h"
#include "service/tier/tier_export.h"

#define SCAN_COUNT "1000"

/* One session key through script id (erase or export; EVAL: a blocking
 * context) with sel's words and clr: the reply (the caller frees it), or
 * NULL with c->err. */
static redisReply *run_script(tier_ctx *c, redisContext *rc, sess_script_id id, const char *key,
                              size_t klen, const char *zp, const tier_erase_sel *sel,
                              const char *clr) {
    const redis_script *s = sess_script(id);
    const char *who = sel->owner ? sel->owner : "",
               *subject = sel->subject_id ? sel->subject_id : "";
    const char *argv[] = {"EVAL",  s->body, "1", key, zp, "", "0", who, sel->dry_run ? "1" : "0",
                          subject, clr};
    size_t lens[] = {4, s->len,          1,          klen, strlen(zp), 0, 1, strlen(who),
                     1, strlen(subject), strlen(clr)};
    redisReply *r = redisCommandArgv(rc, 11, argv, lens);
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1) {
        tier_fail(c, STATUS_EUNAVAILABLE, "sessions: %s in Redis failed: %s", s->name,
                  r && r->type == REDIS_REPLY_ERROR ? r->str : rc->errstr);
        if (r) freeReplyObject(r);
        return NULL;
    }
    return r;
}

/* A walk over the tenant's sessions: its pooled connection, which a step
 * that waits for someone else (an export's reader) gives back meanwhile. */
typedef struct sess_walk {
    redis_pool *pool;
    redisContext *rc; /* NULL while given back */
} sess_walk;

static void walk_lend(sess_walk *w) {
    redis_pool_release(w->pool, w->rc, 0);
    w->rc = NULL;
}

static int walk_take(sess_walk *w, tier_ctx *c) {
    char err[256];
    if (!(w->rc = redis_pool_acquire(w->pool, c->deadline_ms, err, sizeof err)))
        return tier_fail(c, STATUS_EUNAVAILABLE, "sessions: Redis: %s", err);
    return STATUS_OK;
}

static int erase_key(tier_ctx *c, sess_walk *w, const char *key, size_t klen, const char *zp,
                     const tier_erase_sel *sel, void *arg) {
    int64_t *count = arg;
    redisReply *r = run_script(c, w->rc, SESS_SCRIPT_ERASE, key, klen, zp, sel, "0");
    if (!r) return c->err[0] ? STATUS_EUNAVAILABLE : STATUS_ENOMEM;
    if (r->elements == 2 && r->element[1]->type == REDIS_REPLY_INTEGER)
        *count += r->element[1]->integer;
    freeReplyObject(r);
    return STATUS_OK;
}

typedef int (*visit_fn)(tier_ctx *c, sess_walk *w, const char *key, size_t klen, const char *zp,
                        const tier_erase_sel *sel, void *arg);

/* Every session of sel's tenant in Redis, through fn (SCAN in bounded
 * steps, never KEYS). */
static int each_session(const sess_service *svc, tier_ctx *c, const tier_erase_sel *sel,
                        visit_fn fn, void *arg) {
    sess_walk w = {.pool = svc->env->redis};
    int status = walk_take(&w, c);
    if (status != STATUS_OK) return status;
    const char *prefix =
        arena_printf(c->ar, "memoryd:session:%zu:%s:", strlen(sel->tenant), sel->tenant);
    const char *zp =
        arena_printf(c->ar, "memoryd:sessions:%zu:%s:", strlen(sel->tenant), sel->tenant);
    char *match = prefix && zp ? arena_alloc(c->ar, 2 * strlen(prefix) + 2) : NULL;
    if (!match) {
        walk_lend(&w);
        return tier_fail(c, STATUS_ENOMEM, "out of memory");
    }
    size_t m = redis_glob_escape(prefix, strlen(prefix), match);
    match[m++] = '*';
    match[m] = '\0';
    char cursor[32] = "0";
    int broken = 0;
    do {
        redisReply *r = redisCommand(w.rc, "SCAN %s MATCH %s COUNT " SCAN_COUNT, cursor, match);
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING) {
            status = tier_fail(c, STATUS_EUNAVAILABLE, "sessions: SCAN failed");
            broken = !r;
            if (r) freeReplyObject(r);
            break;
        }
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        const redisReply *keys = r->element[1];
        for (size_t i = 0; status == STATUS_OK && i < keys->elements; i++) {
            status = fn(c, &w, keys->element[i]->str, keys->element[i]->len, zp, sel, arg);
            if (status == STATUS_OK && !w.rc) status = walk_take(&w, c);
        }
        freeReplyObject(r);
    } while (status == STATUS_OK && strcmp(cursor, "0") != 0);
    if (w.rc) redis_pool_release(svc->env->redis, w.rc, broken);
    return status;
}

/* An erasure of a principal's records (not a subject's, not a retention
 * rule's): its sessions go whole. */
static int by_principal(const tier_erase_sel *sel) {
    return sel->owner && !sel->subject_id && !tier_erase_is_retention(sel);
}

/* PostgreSQL: the selection's records (and, for a principal, its durable
 * sessions whole). */
typedef struct pg_job {
    const tier_erase_sel *sel;
    int64_t count;
} pg_job;

static int erase_pg_in(pgq_session *ss, tier_ctx *c, void *arg) {
    pg_job *j = arg;
    const tier_erase_sel *sel = j->sel;
    pgq_sql b = {0};
    /* A session the owner started goes with every record in it. */
    tier_erase_sql_begin(&b, sel, "session_records", "r");
    pgq_sql_add(&b, "(");
    int rc = tier_erase_sql_where_value(&b, c, sel, "r", "value", 0);
    if (rc != STATUS_OK) return rc;
    if (by_principal(sel))
        pgq_sql_add(&b,
                    ") OR (r.tenant = $%d AND EXISTS (SELECT 1 FROM sessions s WHERE"
                    " s.tenant = r.tenant AND s.id = r.session_id AND s.owner = $%d))",
                    pgq_text(&b, sel->tenant), pgq_text(&b, sel->owner));
    else pgq_sql_add(&b, ")");
    tier_erase_sql_end(&b, sel);
    PGresult *r = NULL;
    if ((rc = pgq_pipeline(ss, "erase session records", "BEGIN", &b, 0, &r)) != STATUS_OK)
        return rc;
    rc = tier_erase_sql_count(c, sel, r, "session records", &j->count);
    PQclear(r);
    if (rc == STATUS_OK && !sel->dry_run && by_principal(sel)) {
        pgq_sql d = {0};
        pgq_sql_add(&d, "DELETE FROM sessions WHERE tenant = $%d AND owner = $%d",
                    pgq_text(&d, sel->tenant), pgq_text(&d, sel->owner));
        rc = pgq_exec_ok(ss, &d, "erase sessions", &r);
        PQclear(r);
    }
    return rc == STATUS_OK ? tier_sql_commit(ss, c) : rc;
}

int sess_erase(void *state, tier_ctx *c, const tier_erase_sel *sel, int64_t *count) {
    const sess_service *svc = state;
    int64_t in_redis = 0;
    pg_job j = {.sel = sel};
    *count = 0;
    int retention = tier_erase_is_retention(sel);
    if (!sel->owner && !sel->subject_id && !retention) return STATUS_OK;
    /* A retention rule reaches PostgreSQL's copies only: Redis's records
     * end with their sessions. */
    int rc =
        retention || !svc->env->redis ? STATUS_OK : each_session(svc, c, sel, erase_key, &in_redis);
    if (rc == STATUS_OK) rc = tier_sql_run(svc->env->pg, c, TIER_MAX_STATEMENT_MS, erase_pg_in, &j);
    *count = rc == STATUS_OK ? in_redis + j.count : 0;
    return rc;
}

/* ------------------------------------------------------------ export */

#define EXPORT_PAGE 32 /* records (up to 256 KiB each) in memory at a time */

typedef struct export_job {
    const tier_erase_sel *sel;
    tier_export_emit emit;
    void *emit_arg;
} export_job;

/* One record's id and content as Export hands it over: {"session_id",
 * "key", "value"} (text when it is UTF-8, else base64url with
 * "value_encoding"), in c's arena. */
static int render_record(tier_ctx *c, const char *sid, const char *key, const uint8_t *v, size_t n,
                         tier_export_rec *rec) {
    json_t *o = json_object();
    json_object_set_new(o, "session_id", json_string(sid));
    json_object_set_new(o, "key", json_string(key));
    const char *encoding;
    json_t *value = tier_export_bytes(c, v, n, &encoding);
    if (value) json_object_set_new(o, "value", value);
    if (value && strcmp(encoding, "text") != 0)
        json_object_set_new(o, "value_encoding", json_string(encoding));
    rec->kind = "session_record";
    rec->id = arena_printf(c->ar, "%s/%s", sid, key);
    if (!value || !rec->id) {
        json_decref(o);
        return tier_fail(c, STATUS_ENOMEM, "out of memory");
    }
    return tier_export_json(c, o, &rec->json);
}

/* A row of PostgreSQL's copy (select_records' columns) as a record. */
static int render_row(tier_ctx *c, const PGresult *r, int i, const tier_erase_sel *sel,
                      tier_export_rec *rec, tier_meta *m) {
    memset(m, 0, sizeof *m);
    m->tenant = sel->tenant;
    int64_t label;
    const char *sid = pgq_col_str(c->ar, r, i, 0), *key = pgq_col_str(c->ar, r, i, 1);
    const uint8_t *v = (const uint8_t *)PQgetvalue(r, i, 2);
    size_t n = (size_t)PQgetlength(r, i, 2);
    m->owner = pgq_col_str(c->ar, r, i, 3);
    if (!sid || !key || !m->owner || pgq_col_int(r, i, 4, &label) != 0 ||
        pgq_col_int(r, i, 5, &m->version) != 0 || pgq_col_ts(r, i, 6, &m->create_us) != 0 ||
        pgq_col_ts(r, i, 7, &m->update_us) != 0 ||
        pgq_col_text_array(c->ar, r, i, 8, &m->pii_kinds, &m->npii) != 0)
        return tier_fail(c, STATUS_EINTERNAL, "unreadable session record");
    m->label = (int)label;
    return render_record(c, sid, key, v, n, rec);
}

/* The records of one plain session in Redis (durable ones are exported
 * from PostgreSQL), each in an arena of its own while it is emitted, with
 * the walk's connection given back meanwhile. */
static int export_key(tier_ctx *c, sess_walk *w, const char *key, size_t klen, const char *zp,
                      const tier_erase_sel *sel, void *arg) {
    export_job *j = arg;
    char clr[8];
    snprintf(clr, sizeof clr, "%d", sel->max_label ? sel->max_label : 4);
    redisReply *r = run_script(c, w->rc, SESS_SCRIPT_EXPORT, key, klen, zp, sel, clr);
    if (!r) return STATUS_EUNAVAILABLE;
    /* The reply is ours: the connection goes back while a slow reader
     * takes the records (the walk takes one again for its next step). */
    if (r->elements > 1) walk_lend(w);
    /* The session id is what follows the tenant's prefix in its key. */
    size_t plen = strlen(zp) - strlen("memoryd:sessions:") + strlen("memoryd:session:");
    const char *sid = klen > plen ? arena_strndup(c->ar, key + plen, klen - plen) : NULL;
    int status = sid ? STATUS_OK : tier_fail(c, STATUS_EINTERNAL, "unexpected session key");
    for (size_t i = 1; status == STATUS_OK && i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i], *v = r->element[i + 1];
        arena *keep = c->ar, *rec_arena = arena_create();
        sess_rec rec;
        if (!rec_arena) {
            status = tier_fail(c, STATUS_ENOMEM, "out of memory");
            break;
        }
        c->ar = rec_arena;
        const char *name =
            k->type == REDIS_REPLY_STRING ? arena_strndup(c->ar, k->str, k->len) : NULL;
        if (!name || v->type != REDIS_REPLY_STRING ||
            sess_rec_parse(c->ar, v->str, v->len, 1, &rec) != 0) {
            status = tier_fail(c, STATUS_EUNAVAILABLE,
                               "sessions: Redis holds a record memoryd did not write");
        } else {
            tier_meta m = {.tenant = sel->tenant,
                           .owner = rec.owner,
                           .label = rec.label,
                           .version = rec.version,
                           .create_us = rec.create_ms * 1000,
                           .update_us = rec.update_ms * 1000,
                           .pii_kinds = rec.pii_kinds,
                           .npii = rec.npii};
            tier_export_rec out = {.meta = &m};
            status = render_record(c, sid, name, rec.value, (size_t)rec.size, &out);
            if (status == STATUS_OK) status = j->emit(j->emit_arg, &out);
        }
        c->ar = keep;
        arena_free(rec_arena);
    }
    freeReplyObject(r);
    return status;
}

/* PostgreSQL's copies of the selection's records (durable sessions). */
static int select_records(pgq_sql *b, tier_ctx *c, const tier_erase_sel *sel) {
    pgq_sql_add(b, "SELECT r.session_id, r.key, r.value, r.owner, r.label, r.version, r.created_at,"
                   " r.updated_at, r.pii_kinds FROM session_records r WHERE ");
    return tier_erase_sql_where_value(b, c, sel, "r", "value", 0);
}

static const tier_export_pages export_records = {.kind = "session_record",
                                                 .what = "export session records",
                                                 .key = "r.session_id, r.key",
                                                 .nkey = 2,
                                                 .key_cols = {0, 1},
                                                 .page = EXPORT_PAGE,
                                                 .select = select_records,
                                                 .render = render_row};

int sess_export(void *state, tier_ctx *c, const tier_erase_sel *sel, tier_export_emit emit,
                void *emit_arg) {
    const sess_service *svc = state;
    if (tier_erase_is_retention(sel) || (!sel->owner && !sel->subject_id)) return STATUS_OK;
    export_job j = {.sel = sel, .emit = emit, .emit_arg = emit_arg};
    int rc = svc->env->redis ? each_session(svc, c, sel, export_key, &j) : STATUS_OK;
    return rc == STATUS_OK
               ? tier_export_pages_run(svc->env->pg, c, &export_records, sel, emit, emit_arg)
               : rc;
}
