/* entries_rpc_read: the Entries handlers that read: Read, List, Search and
 * Stats. Only entries actually returned are named in the audit trail. */
#include "service/auth/authn.h"
#include "service/core/text.h"
#include "service/entries/entries_service_internal.h"
#include "service/tier/tier_check.h"
#include "service/tier/tier_page.h"

#define TERM_MAX_CHARS 256
#define CREATED_BY_MAX 256

grpc_status_code entries_do_read(rpc_call *call, const ProtobufCMessage *reqm,
                                 ProtobufCMessage *respm, void *arg) {
    entries_service *svc = arg;
    const Memory__V1__EntriesReadRequest *req = (const Memory__V1__EntriesReadRequest *)reqm;
    Memory__V1__EntriesReadResponse *resp = (Memory__V1__EntriesReadResponse *)respm;
    const principal *p = authn_principal(call);
    grpc_status_code st;
    if ((st = entries_check_address(call, req->namespace_, req->key)) != GRPC_STATUS_OK ||
        (st = entries_check_ns_allowed(call, p, req->namespace_)) != GRPC_STATUS_OK)
        return st;
    tier_ctx c;
    entries_ctx(svc, call, 0, &c);
    entries_record rec;
    int rc = entries_store_read(svc->store, &c, req->namespace_, req->key, &rec);
    if (rc != STATUS_OK) return tier_status(call, rc, &c);
    entries_target(call, rec.ns, rec.key);
    if (!(resp->entry = entries_render(rpc_call_arena(call), &rec))) return rpc_call_oom(call);
    return GRPC_STATUS_OK;
}

/* Renders entries while the answer stays within the byte budget (the
 * first always goes); *cut is set when some were left out. */
static grpc_status_code render_entries(rpc_call *call, const entries_service *svc,
                                       const entries_record *recs, size_t n,
                                       Memory__V1__Entry ***out, size_t *nout, int *cut) {
    arena *a = rpc_call_arena(call);
    Memory__V1__Entry **v = arena_alloc(a, (n ? n : 1) * sizeof *v);
    if (!v) return rpc_call_oom(call);
    size_t used = 0, i = 0;
    *cut = 0;
    for (; i < n; i++) {
        if (!(v[i] = entries_render(a, &recs[i]))) return rpc_call_oom(call);
        if (!tier_page_fits(&used, &v[i]->base, i, svc->max_response_bytes)) {
            *cut = 1;
            break;
        }
        entries_target(call, recs[i].ns, recs[i].key);
    }
    *out = v;
    *nout = i;
    return GRPC_STATUS_OK;
}

grpc_status_code entries_do_list(rpc_call *call, const ProtobufCMessage *reqm,
                                 ProtobufCMessage *respm, void *arg) {
    entries_service *svc = arg;
    const Memory__V1__EntriesListRequest *req = (const Memory__V1__EntriesListRequest *)reqm;
    Memory__V1__EntriesListResponse *resp = (Memory__V1__EntriesListResponse *)respm;
    const principal *p = authn_principal(call);
    grpc_status_code st;
    entries_list_in in = {0};
    in.ns_pattern = req->namespace_pattern;
    in.key_pattern = req->key_pattern;
    if ((st = entries_check_ns_pattern(call, "namespace_pattern", &in.ns_pattern)) !=
            GRPC_STATUS_OK ||
        (st = entries_check_key_pattern(call, &in.key_pattern)) != GRPC_STATUS_OK ||
        (st = tier_page_size(call, req->page_size, &in.limit)) != GRPC_STATUS_OK)
        return st;
    in.with_values = req->with_values;
    tier_page pg;
    const char *cursor[2];
    int resumed;
    if ((st = tier_page_bind(call, p, reqm, &pg)) != GRPC_STATUS_OK ||
        (st = tier_page_open(call, &pg, req->page_token, cursor, 2, 1, &resumed)) !=
            GRPC_STATUS_OK)
        return st;
    if (resumed) {
        in.after_ns = cursor[0];
        in.after_key = cursor[1];
    }
    tier_ctx c;
    entries_ctx(svc, call, 0, &c);
    entries_record *recs;
    size_t n;
    int more, cut;
    int rc = entries_store_list(svc->store, &c, &in, &recs, &n, &more);
    if (rc != STATUS_OK) return tier_status(call, rc, &c);
    if ((st = render_entries(call, svc, recs, n, &resp->entries, &resp->n_entries, &cut)) !=
        GRPC_STATUS_OK)
        return st;
    size_t last = resp->n_entries;
    if ((more || cut) && last > 0) {
        const char *next[2] = {recs[last - 1].ns, recs[last - 1].key};
        if (!(resp->next_page_token = tier_page_seal(call, &pg, next, 2)))
            return rpc_call_oom(call);
    }
    return GRPC_STATUS_OK;
}

grpc_status_code entries_do_search(rpc_call *call, const ProtobufCMessage *reqm,
                                   ProtobufCMessage *respm, void *arg) {
    entries_service *svc = arg;
    const Memory__V1__EntriesSearchRequest *req = (const Memory__V1__EntriesSearchRequest *)reqm;
    Memory__V1__EntriesSearchResponse *resp = (Memory__V1__EntriesSearchResponse *)respm;
    grpc_status_code st;
    entries_search_in in = {0};
    in.ns_pattern = req->namespace_pattern;
    tier_time_range tr;
    if ((st = entries_check_ns_pattern(call, "namespace_pattern", &in.ns_pattern)) !=
            GRPC_STATUS_OK ||
        (st = tier_check_text(call, "term", req->term, TERM_MAX_CHARS)) != GRPC_STATUS_OK ||
        (st = tier_check_tags(call, "tags", req->tags, req->n_tags, ENTRIES_TAGS_MAX,
                              ENTRIES_TAG_MAX_CHARS, (const char ***)&in.tags, &in.ntags)) !=
            GRPC_STATUS_OK ||
        (st = tier_check_name(call, "content_type", req->content_type,
                              ENTRIES_CONTENT_TYPE_MAX, 0)) != GRPC_STATUS_OK ||
        (st = tier_check_name(call, "created_by", req->created_by, CREATED_BY_MAX, 0)) !=
            GRPC_STATUS_OK ||
        (st = tier_check_time_range(call, "time_range", req->time_range, &tr)) !=
            GRPC_STATUS_OK)
        return st;
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
    tier_ctx c;
    entries_ctx(svc, call, 0, &c);
    entries_record *recs;
    size_t n;
    int rc = entries_store_search(svc->store, &c, &in, &recs, &n);
    if (rc != STATUS_OK) return tier_status(call, rc, &c);
    int cut;
    return render_entries(call, svc, recs, n, &resp->entries, &resp->n_entries, &cut);
}

grpc_status_code entries_do_stats(rpc_call *call, const ProtobufCMessage *reqm,
                                  ProtobufCMessage *respm, void *arg) {
    entries_service *svc = arg;
    const Memory__V1__EntriesStatsRequest *req = (const Memory__V1__EntriesStatsRequest *)reqm;
    Memory__V1__EntriesStatsResponse *resp = (Memory__V1__EntriesStatsResponse *)respm;
    const char *pat = req->namespace_pattern;
    grpc_status_code st = entries_check_ns_pattern(call, "namespace_pattern", &pat);
    if (st != GRPC_STATUS_OK) return st;
    tier_ctx c;
    entries_ctx(svc, call, 0, &c);
    entries_stats s;
    int rc = entries_store_stats(svc->store, &c, pat, &s);
    if (rc != STATUS_OK) return tier_status(call, rc, &c);
    resp->entry_count = s.entry_count;
    resp->namespace_count = s.namespace_count;
    resp->value_bytes = s.value_bytes;
    resp->stored_bytes = s.stored_bytes;
    resp->compressed_count = s.compressed_count;
    return GRPC_STATUS_OK;
}
