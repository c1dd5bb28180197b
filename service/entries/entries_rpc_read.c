/* entries_rpc_read: the Entries handlers that read: Read, List, Search and
 * Stats. Only entries actually returned are named in the audit trail. */
#include "service/auth/authn.h"
#include "service/core/text.h"
#include "service/entries/entries_service_internal.h"
#include "service/tier/tier_check.h"
#include "service/tier/tier_page.h"

#define TERM_MAX_CHARS 256
#define CREATED_BY_MAX 256

static grpc_status_code render_read(tier_pending_call *pc) {
    const entries_record *rec = pc->out;
    Memory__V1__EntriesReadResponse *resp = (Memory__V1__EntriesReadResponse *)pc->resp;
    if (!(resp->entry = entries_render(pc->c->ar, rec))) return rpc_call_oom(pc->call);
    entries_target(pc->call, rec->ns, rec->key);
    return GRPC_STATUS_OK;
}

/* On the event loop: the statement is submitted and the loop thread
 * answers (rpc.h's execution model). */
RPC_UNARY_HANDLER(entries_do_read, entries_service, Memory__V1__EntriesReadRequest,
                  Memory__V1__EntriesReadResponse) {
    const principal *p = authn_principal(call);
    RPC_CHECK(entries_check_address(call, req->namespace_, req->key));
    RPC_CHECK(entries_check_ns_allowed(call, p, req->namespace_));
    tier_pending_call *pc =
        tier_pending_new(call, "entries", NULL, sizeof(entries_record), render_read, &resp->base);
    tier_async *op = pc ? entries_store_read_async(&svc->store, pc->c, req->namespace_, req->key,
                                                   pc->out, tier_pending_done, pc)
                        : NULL;
    return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call);
}

static ProtobufCMessage *render_one(arena *a, const void *rec) {
    Memory__V1__Entry *e = entries_render(a, rec);
    return e ? &e->base : NULL;
}

static const char *name_one(arena *a, const void *rec) {
    const entries_record *r = rec;
    return arena_printf(a, "%s/%s", r->ns, r->key);
}

/* Renders entries while the answer stays within the byte budget (the
 * first always goes); *cut is set when some were left out. */
static grpc_status_code render_entries(rpc_call *call, const entries_service *svc,
                                       const entries_record *recs, size_t n,
                                       Memory__V1__Entry ***out, size_t *nout, int *cut) {
    static const tier_page_kind entries = {sizeof *recs, render_one, name_one};
    ProtobufCMessage **msgs;
    RPC_CHECK(
        tier_page_fill(call, &entries, recs, n, svc->env->max_response_bytes, &msgs, nout, cut));
    *out = (Memory__V1__Entry **)msgs;
    return GRPC_STATUS_OK;
}

/* List's answer until the loop thread renders it: the page, and the
 * cursor's binding for the next page's token. */
typedef struct {
    entries_page page;
    tier_page pg;
} list_pending;

static grpc_status_code render_list(tier_pending_call *pc) {
    list_pending *lp = pc->out;
    Memory__V1__EntriesListResponse *resp = (Memory__V1__EntriesListResponse *)pc->resp;
    const entries_record *recs = lp->page.recs;
    int cut;
    RPC_CHECK(render_entries(pc->call, pc->arg, recs, lp->page.n, &resp->entries, &resp->n_entries,
                             &cut));
    size_t last = resp->n_entries;
    if ((lp->page.more || cut) && last > 0) {
        const char *next[2] = {recs[last - 1].ns, recs[last - 1].key};
        if (!(resp->next_page_token = tier_page_seal(pc->call, &lp->pg, next, 2)))
            return rpc_call_oom(pc->call);
    }
    return GRPC_STATUS_OK;
}

RPC_UNARY_HANDLER(entries_do_list, entries_service, Memory__V1__EntriesListRequest,
                  Memory__V1__EntriesListResponse) {
    const principal *p = authn_principal(call);
    entries_list_in in = {0};
    in.ns_pattern = req->namespace_pattern;
    in.key_pattern = req->key_pattern;
    RPC_CHECK(entries_check_ns_pattern(call, "namespace_pattern", &in.ns_pattern));
    RPC_CHECK(entries_check_key_pattern(call, &in.key_pattern));
    RPC_CHECK(tier_page_size(call, req->page_size, &in.limit));
    in.with_values = req->with_values;
    tier_pending_call *pc =
        tier_pending_new(call, "entries", NULL, sizeof(list_pending), render_list, &resp->base);
    if (!pc) return rpc_call_oom(call);
    list_pending *lp = pc->out;
    RPC_CHECK(tier_page_bind(call, p, &req->base, &lp->pg));
    RPC_CHECK(tier_page_resume(call, &lp->pg, req->page_token, &in.after_ns, &in.after_key, 1));
    pc->arg = svc;
    tier_async *op =
        entries_store_list_async(&svc->store, pc->c, &in, &lp->page, tier_pending_done, pc);
    return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call);
}

static grpc_status_code render_search(tier_pending_call *pc) {
    const entries_page *page = pc->out;
    Memory__V1__EntriesSearchResponse *resp = (Memory__V1__EntriesSearchResponse *)pc->resp;
    int cut;
    grpc_status_code st = render_entries(pc->call, pc->arg, page->recs, page->n, &resp->entries,
                                         &resp->n_entries, &cut);
    if (st == GRPC_STATUS_OK && page->scores) {
        resp->scores = page->scores; /* in the call's arena, as the entries */
        resp->n_scores = resp->n_entries;
    }
    return st;
}

RPC_UNARY_HANDLER(entries_do_search, entries_service, Memory__V1__EntriesSearchRequest,
                  Memory__V1__EntriesSearchResponse) {
    entries_search_in in = {0};
    in.ns_pattern = req->namespace_pattern;
    tier_time_range tr;
    RPC_CHECK(entries_check_ns_pattern(call, "namespace_pattern", &in.ns_pattern));
    RPC_CHECK(tier_check_text(call, "term", req->term, TERM_MAX_CHARS));
    RPC_CHECK(tier_check_tags(call, "tags", req->tags, req->n_tags, ENTRIES_TAGS_MAX,
                              ENTRIES_TAG_MAX_CHARS, (const char ***)&in.tags, &in.ntags));
    RPC_CHECK(
        tier_check_name(call, "content_type", req->content_type, ENTRIES_CONTENT_TYPE_MAX, 0));
    RPC_CHECK(tier_check_name(call, "created_by", req->created_by, CREATED_BY_MAX, 0));
    RPC_CHECK(tier_check_time_range(call, "time_range", req->time_range, &tr));
    if (req->limit < 0 || req->limit > TIER_PAGE_MAX)
        return rpc_call_invalid(call, "limit: %d; must be 1 to %d (0 = %d)", req->limit,
                                TIER_PAGE_MAX, TIER_PAGE_DEFAULT);
    in.term = req->term;
    in.content_type = req->content_type;
    in.created_by = req->created_by;
    in.has_start = tr.has_start;
    in.start_us = tr.start_us;
    in.has_end = tr.has_end;
    in.end_us = tr.end_us;
    in.limit = req->limit ? req->limit : TIER_PAGE_DEFAULT;
    in.with_values = req->with_values;
    RPC_CHECK(tier_check_text_match(call, "match", req->match, "term", req->term, &in.ranked));
    tier_pending_call *pc =
        tier_pending_new(call, "entries", NULL, sizeof(entries_page), render_search, &resp->base);
    if (!pc) return rpc_call_oom(call);
    pc->arg = svc;
    tier_async *op =
        entries_store_search_async(&svc->store, pc->c, &in, pc->out, tier_pending_done, pc);
    return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call);
}

static grpc_status_code render_stats(tier_pending_call *pc) {
    const entries_stats *s = pc->out;
    Memory__V1__EntriesStatsResponse *resp = (Memory__V1__EntriesStatsResponse *)pc->resp;
    resp->entry_count = s->entry_count;
    resp->namespace_count = s->namespace_count;
    resp->value_bytes = s->value_bytes;
    resp->stored_bytes = s->stored_bytes;
    resp->compressed_count = s->compressed_count;
    return GRPC_STATUS_OK;
}

RPC_UNARY_HANDLER(entries_do_stats, entries_service, Memory__V1__EntriesStatsRequest,
                  Memory__V1__EntriesStatsResponse) {
    const char *pat = req->namespace_pattern;
    RPC_CHECK(entries_check_ns_pattern(call, "namespace_pattern", &pat));
    tier_pending_call *pc =
        tier_pending_new(call, "entries", NULL, sizeof(entries_stats), render_stats, &resp->base);
    tier_async *op =
        pc ? entries_store_stats_async(&svc->store, pc->c, pat, pc->out, tier_pending_done, pc)
           : NULL;
    return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call);
}
