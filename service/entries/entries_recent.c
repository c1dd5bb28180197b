/* entries_recent: Entries' part of a routed query (router.proto's
 * RecentLookupQuery, tier_route.h): one entry, cache-aside. This
 * replica's L1 first, then L2 (Redis), then PostgreSQL, whose answer fills
 * both (cache_records.h: single flight, tenant-wide copies with the read
 * diode applied to each one handed out, dropped on every replica by every
 * write to the entry). An entry found nowhere, or hidden from the caller,
 * is no result (not NOT_FOUND). The part reports each level it passed;
 * the one that answered (or failed) carries the outcome. */
#include <stdio.h>

#include "service/auth/authn.h"
#include "service/entries/entries_service_internal.h"

/* Where a lookup's answer came from: its level among the reports. */
enum { FROM_L1 = 0, FROM_L2 = 1, FROM_STORE = 2 };

typedef struct entries_lookup {
    entries_service *svc;
    tier_ctx *c;
    const char *ns, *key, *id;
    cache_records_fetch f;
    entries_record rec; /* what a load or a read found */
    tier_async *load;   /* the tenant-wide load that fills the cache */
    tier_async *read;   /* the caller's own read (no cache, or a hidden copy) */
    /* A cancel and the own read can cross (a cancel may come before the
     * start, or while the cache hands the caller to its read): each side
     * sets its flag, then looks at the other's (both seq_cst), so at least
     * one of them cancels the read. */
    int reading;   /* read is built and about to be submitted */
    int cancelled; /* the client is gone */
    tier_route_answer *ans;
    tier_route_done done;
    void *arg;
} entries_lookup;

static grpc_status_code lookup_prepare(void *state, rpc_call *call, const char *prefix,
                                       const ProtobufCMessage *query, int limit, tier_ctx *c,
                                       tier_route_answer *ans, tier_route_done done, void *arg,
                                       void **out) {
    (void)limit; /* one entry */
    entries_service *svc = state;
    const Memory__V1__RecentLookupQuery *q = (const Memory__V1__RecentLookupQuery *)query;
    char field[96];
    snprintf(field, sizeof field, "%snamespace", prefix);
    RPC_CHECK(entries_check_namespace(call, field, q->namespace_));
    snprintf(field, sizeof field, "%skey", prefix);
    RPC_CHECK(entries_check_key(call, field, q->key));
    RPC_CHECK(entries_check_ns_allowed(call, c->p, q->namespace_));
    entries_lookup *lk = arena_zalloc(c->ar, sizeof *lk);
    if (!lk) return rpc_call_oom(call);
    *lk = (entries_lookup){.svc = svc,
                           .c = c,
                           .ns = q->namespace_,
                           .key = q->key,
                           .ans = ans,
                           .done = done,
                           .arg = arg};
    *out = lk;
    return GRPC_STATUS_OK;
}

/* The answer's levels: those above from missed, those below were not
 * asked (nor L2 without Redis, which has none to miss). */
static void report_levels(entries_lookup *lk, int from) {
    static const Memory__V1__Tier levels[TIER_ROUTE_LEVELS] = {MEMORY__V1__TIER__TIER_CACHE_L1,
                                                               MEMORY__V1__TIER__TIER_CACHE_L2,
                                                               MEMORY__V1__TIER__TIER_ENTRIES};
    tier_route_answer *ans = lk->ans;
    ans->tier = levels[from];
    ans->nlevels = TIER_ROUTE_LEVELS;
    for (int k = 0; k < TIER_ROUTE_LEVELS; k++) {
        ans->level_tier[k] = levels[k];
        ans->level_outcome[k] = k < from ? MEMORY__V1__TIER_OUTCOME__TIER_OUTCOME_MISS
                                         : MEMORY__V1__TIER_OUTCOME__TIER_OUTCOME_SKIPPED;
    }
    if (!lk->svc->env->redis)
        ans->level_outcome[FROM_L2] = MEMORY__V1__TIER_OUTCOME__TIER_OUTCOME_SKIPPED;
}

/* The entry as the answer's one result, named for the audit row. */
static int answer_entry(entries_lookup *lk, Memory__V1__Entry *e) {
    arena *a = lk->c->ar;
    tier_route_answer *ans = lk->ans;
    Memory__V1__RouterResult *res = tier_route_result(a, ans->tier, 0, 1.0);
    if (!res || !(ans->results = arena_alloc(a, sizeof *ans->results)) ||
        !(ans->targets = arena_alloc(a, sizeof *ans->targets)) ||
        !(ans->targets[0] = arena_printf(a, "%s/%s", e->namespace_, e->key)))
        return -1;
    res->record_case = MEMORY__V1__ROUTER_RESULT__RECORD_ENTRY;
    res->entry = e;
    ans->results[0] = res;
    ans->n = ans->ntargets = 1;
    return 0;
}

/* The end, once: a missing or hidden entry is no result. */
static void answer(entries_lookup *lk, int rc, Memory__V1__Entry *e, int from) {
    if (rc == STATUS_ENOTFOUND) rc = STATUS_OK, e = NULL;
    report_levels(lk, from);
    if (rc == STATUS_OK && e && answer_entry(lk, e) != 0)
        rc = tier_fail(lk->c, STATUS_ENOMEM, "out of memory");
    lk->done(lk->arg, rc);
}

/* The caller's own read answered (loop thread). */
static void read_done(void *arg, int rc) {
    entries_lookup *lk = arg;
    Memory__V1__Entry *e = NULL;
    if (rc == STATUS_OK && !(e = entries_render(lk->c->ar, &lk->rec)))
        rc = tier_fail(lk->c, STATUS_ENOMEM, "out of memory");
    answer(lk, rc, e, FROM_STORE);
}

/* Reads the entry as the caller may see it, from PostgreSQL. A copy in L1
 * or L2 that is hidden from the caller ends here too, so a hidden entry
 * looks exactly like an absent one (both: PostgreSQL answered, nothing). */
static void read_own(entries_lookup *lk) {
    lk->read =
        entries_store_read_async(&lk->svc->store, lk->c, lk->ns, lk->key, &lk->rec, read_done, lk);
    if (!lk->read) {
        answer(lk, tier_fail(lk->c, STATUS_ENOMEM, "out of memory"), NULL, FROM_STORE);
        return;
    }
    __atomic_store_n(&lk->reading, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&lk->cancelled, __ATOMIC_SEQ_CST))
        tier_async_cancel(&lk->svc->store, lk->read); /* sticky: the submit answers CANCELLED */
    tier_async_submit(&lk->svc->store, lk->read);
}

/* The tenant-wide load answered (loop thread): the entry as the cache
 * keeps it. */
static void loaded(void *arg, int rc) {
    entries_lookup *lk = arg;
    cache_record rec = {0};
    Memory__V1__Entry *m = NULL;
    const tier_meta *meta = &lk->rec.meta;
    if (rc == STATUS_OK && !(m = entries_render(lk->c->ar, &lk->rec))) rc = STATUS_ENOMEM;
    if (m)
        rec = (cache_record){&m->base, meta->owner, meta->label, meta->update_us,
                             meta->has_expire ? meta->expire_us / 1000 : 0};
    cache_records_loaded(&lk->f, rc, &rec);
}

static void start_load(void *arg, cache_records_fetch *f) {
    (void)f;
    entries_lookup *lk = arg;
    tier_async_submit(&lk->svc->store, lk->load);
}

static int from_level(int level) {
    return level == CACHE_RECORDS_FROM_L2      ? FROM_L2
           : level == CACHE_RECORDS_FROM_STORE ? FROM_STORE
                                               : FROM_L1;
}

/* The cache's answer: a copy hidden from the caller (or none in a level
 * above PostgreSQL) sends the caller to its own read. */
static void settle(entries_lookup *lk, int rc, ProtobufCMessage *m, int level) {
    if (rc == STATUS_ENOTFOUND && level != CACHE_RECORDS_FROM_STORE) {
        read_own(lk);
        return;
    }
    answer(lk, rc, (Memory__V1__Entry *)m, from_level(level));
}

static void fetched(void *arg, int rc, ProtobufCMessage *m) {
    entries_lookup *lk = arg;
    settle(lk, rc, m, lk->f.level);
}

static void lookup_start(void *part) {
    entries_lookup *lk = part;
    entries_service *svc = lk->svc;
    tier_ctx *c = lk->c;
    if (!svc->records || c->fresh) { /* read-your-writes: past the cache */
        read_own(lk);
        return;
    }
    ProtobufCMessage *m = NULL;
    if (!(lk->id = entries_cache_id(c->ar, lk->ns, lk->key))) {
        answer(lk, tier_fail(c, STATUS_ENOMEM, "out of memory"), NULL, FROM_L1);
        return;
    }
    /* A hot entry: L1 answers without the fetch's machinery. */
    int rc = cache_records_peek(svc->records, c->p, c->read_breadth, lk->id, c->ar, &m);
    if (rc != CACHE_RECORDS_MISS) {
        if (rc == STATUS_ENOMEM) tier_fail(c, rc, "out of memory");
        settle(lk, rc, m, CACHE_RECORDS_FROM_L1);
        return;
    }
    if (!(lk->load =
              entries_store_load_async(&svc->store, c, lk->ns, lk->key, &lk->rec, loaded, lk))) {
        answer(lk, tier_fail(c, STATUS_ENOMEM, "out of memory"), NULL, FROM_L1);
        return;
    }
    cache_records_fetch_init(&lk->f, c->p, c->read_breadth, c->ar, c->deadline_ms, start_load,
                             fetched, lk);
    rc = cache_records_get(svc->records, &lk->f, lk->id, &m);
    if (rc == CACHE_RECORDS_PENDING) return;
    if (rc == STATUS_ECANCELLED) tier_fail(c, rc, "the client cancelled the call");
    settle(lk, rc, m, CACHE_RECORDS_FROM_L1);
}

static void lookup_cancel(void *part) {
    entries_lookup *lk = part;
    entries_service *svc = lk->svc;
    __atomic_store_n(&lk->cancelled, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&lk->reading, __ATOMIC_SEQ_CST)) {
        tier_async_cancel(&svc->store, lk->read);
        return;
    }
    if (!svc->records) return; /* the read is yet to come: read_own sees the flag */
    int r = cache_records_cancel(svc->records, &lk->f);
    if (r == CACHE_ASIDE_LOADING) {
        tier_async_cancel(&svc->store, lk->load);
    } else if (r == CACHE_ASIDE_LEFT) {
        tier_fail(lk->c, STATUS_ECANCELLED, "the client cancelled the call");
        answer(lk, STATUS_ECANCELLED, NULL, FROM_L1);
    }
}

const tier_route entries_route = {
    .kind = TIER_ROUTE_RECENT,
    .tier = MEMORY__V1__TIER__TIER_ENTRIES,
    .label = "entries",
    .ctx_tier = "entries",
    .read_scope = "entries:read",
    .prepare = lookup_prepare,
    .start = lookup_start,
    .cancel = lookup_cancel,
};
