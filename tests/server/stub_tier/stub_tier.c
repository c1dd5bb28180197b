/* stub_tier: a tier a test adds to memoryd with its folder and one line
 * of the tier table (main.c's MEMORYD_TEST_TIER), to show that this is
 * all a record-keeping, routable tier needs: its notes (table stub_notes,
 * which the test creates as the tier's migration would) are erased by
 * Forget, exported by Export, swept by the retention sweeper and found by
 * the Router's recent lookup, through what its descriptor declares alone
 * (neither Privacy nor the Router names it). Its counts go under
 * TIER_ENTRIES (a new tier would add its own value to memory.v1.Tier). */
#include <jansson.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#include "service/store/pgq.h"
#include "service/tier/tier.h"
#include "service/tier/tier_export.h"
#include "service/tier/tier_sql.h"

typedef struct stub {
  const tier_env *env;
} stub;

static int stub_open(tier_env *env, void **state, char *err, size_t errlen) {
  stub *s = *state = tier_state_new(sizeof *s, err, errlen);
  if (!s) return -1;
  s->env = env;
  return 0;
}

/* ---- its records: erase and export by selection ---- */

static int erase_where(pgq_sql *b, tier_ctx *c, const tier_erase_sel *sel) {
  return tier_erase_sql_where(b, c, sel, NULL, "body");
}

static const tier_erase_table erase_notes = {
    .table = "stub_notes", .what = "erase stub notes", .where = erase_where};

static int stub_erase(void *state, tier_ctx *c, const tier_erase_sel *sel, int64_t *count) {
  const stub *s = state;
  return tier_erase_table_run(&erase_notes, s->env->pg, state, c, sel, count);
}

static int select_notes(pgq_sql *b, tier_ctx *c, const tier_erase_sel *sel) {
  pgq_sql_add(b, "SELECT key, body::text, owner, label FROM stub_notes WHERE ");
  return erase_where(b, c, sel);
}

static int render_note(tier_ctx *c, const PGresult *r, int i, const tier_erase_sel *sel,
                       tier_export_rec *rec, tier_meta *meta) {
  (void)sel;
  const char *key = pgq_col_str(c->ar, r, i, 0), *body = pgq_col_str(c->ar, r, i, 1);
  const char *owner = pgq_col_str(c->ar, r, i, 2);
  int64_t label = 0;
  if (!key || !body || !owner) return STATUS_ENOMEM;
  if (pgq_col_int(r, i, 3, &label) != 0) return STATUS_EINTERNAL;
  json_t *o = json_pack("{s:s, s:o}", "key", key, "body", json_loads(body, 0, NULL));
  int rc = tier_export_json(c, o, &rec->json);
  rec->id = key;
  *meta = (tier_meta){.owner = owner, .label = (int)label};
  return rc;
}

static const tier_export_pages export_notes = {.kind = "stub_note",
                                               .what = "export stub notes",
                                               .key = "key",
                                               .nkey = 1,
                                               .key_cols = {0},
                                               .page = 16,
                                               .select = select_notes,
                                               .render = render_note};

static int stub_export(void *state, tier_ctx *c, const tier_erase_sel *sel, tier_export_emit emit,
                       void *emit_arg) {
  const stub *s = state;
  if (tier_erase_is_retention(sel)) return STATUS_OK;
  return tier_export_pages_run(s->env->pg, c, &export_notes, sel, emit, emit_arg);
}

/* ---- its route: a recent lookup of one note by key (blocking) ---- */

typedef struct lookup {
  const stub *s;
  tier_ctx *c;
  const char *key;
  tier_route_answer *ans;
  tier_route_done done;
  void *arg;
} lookup;

static grpc_status_code lookup_prepare(void *state, rpc_call *call, const char *prefix,
                                       const ProtobufCMessage *query, int limit, tier_ctx *c,
                                       tier_route_answer *ans, tier_route_done done, void *arg,
                                       void **out) {
  (void)limit;
  const Memory__V1__RecentLookupQuery *q = (const Memory__V1__RecentLookupQuery *)query;
  if (!q->key[0]) return rpc_call_invalid(call, "%skey: required", prefix);
  lookup *lk = arena_zalloc(c->ar, sizeof *lk);
  if (!lk) return rpc_call_oom(call);
  *lk = (lookup){state, c, q->key, ans, done, arg};
  *out = lk;
  return GRPC_STATUS_OK;
}

/* The note the caller may read (the read diode in the statement), as an
 * entry of namespace "stub". */
static int read_in(pgq_session *ss, tier_ctx *c, void *arg) {
  lookup *lk = arg;
  pgq_sql b = {0};
  pgq_sql_add(&b, "SELECT body::text FROM stub_notes WHERE ");
  tier_sql_read_diode(&b, c, NULL);
  pgq_sql_add(&b, " AND key = $%d", pgq_text(&b, lk->key));
  PGresult *r = NULL;
  int rc = pgq_pipeline(ss, "read a stub note", NULL, &b, 1, &r);
  if (rc != STATUS_OK) return rc;
  if (PQntuples(r) == 1) {
    Memory__V1__Entry *e = arena_message(c->ar, &memory__v1__entry__descriptor);
    Memory__V1__RouterResult *res =
        e ? tier_route_result(c->ar, MEMORY__V1__TIER__TIER_ENTRIES, 0, 1.0) : NULL;
    const char *body = pgq_col_str(c->ar, r, 0, 0);
    tier_route_answer *ans = lk->ans;
    if (!res || !body || !(ans->results = arena_alloc(c->ar, sizeof *ans->results)) ||
        !(ans->targets = arena_alloc(c->ar, sizeof *ans->targets)) ||
        !(ans->targets[0] = arena_printf(c->ar, "stub/%s", lk->key))) {
      rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
    } else {
      e->namespace_ = "stub";
      e->key = (char *)lk->key;
      e->value.data = (uint8_t *)body;
      e->value.len = strlen(body);
      e->content_type = "application/json";
      res->record_case = MEMORY__V1__ROUTER_RESULT__RECORD_ENTRY;
      res->entry = e;
      ans->results[0] = res;
      ans->n = ans->ntargets = 1;
    }
  }
  PQclear(r);
  return rc;
}

static void lookup_start(void *part) {
  lookup *lk = part;
  lk->done(lk->arg, tier_sql_run(lk->s->env->pg, lk->c, TIER_MAX_STATEMENT_MS, read_in, lk));
}

static const tier_route route = {
    .kind = TIER_ROUTE_RECENT,
    .tier = MEMORY__V1__TIER__TIER_ENTRIES,
    .label = "stub notes",
    .ctx_tier = "stub",
    .read_scope = "entries:read",
    .blocking = 1,
    .prepare = lookup_prepare,
    .start = lookup_start,
};

/* ---- the descriptor ---- */

static const tier_records records = TIER_RECORDS(MEMORY__V1__TIER__TIER_ENTRIES, TIER_ORDER_RECORDS,
                                                 stub_erase, stub_export, "stub_notes");

/* No gRPC service of its own: the test writes its notes in SQL. */
const tier stub_tier = {
    .name = "stub", .open = stub_open, .free = free, .records = &records, .route = &route};
