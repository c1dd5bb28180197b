/* wm_rpc_write: the WorkingMemory handlers that write: Append, Update and
 * DeleteDocument. Every write runs the PII policy over what the caller adds
 * (judge_added) and records its audit row in its transaction. */
#include <string.h>

#include "service/auth/authn.h"
#include "service/core/text.h"
#include "service/pii/pii.h"
#include "service/tier/tier_check.h"
#include "service/working/wm_path.h"
#include "service/working/wm_service_internal.h"

/* Bytes a document may reach before its characters are counted: no UTF-8
 * character is longer than four. */
#define DOC_MAX_BYTES ((size_t)WM_DOC_MAX_CHARS * 4)

typedef struct edit_ctx {
    arena *a;
    pii_mode mode;
    const char *path;
    const char *append;             /* Append */
    const char *find, *replacement; /* Update */
    int32_t max_replacements;
    int64_t count; /* occurrences replaced */
} edit_ctx;

/* chars < 0: more than the most, not counted (the bytes alone showed it). */
static int too_big(int64_t chars, char *err, size_t errlen) {
    if (chars < 0)
        text_errf(err, errlen, "the document would grow past %d characters", WM_DOC_MAX_CHARS);
    else
        text_errf(err, errlen, "the document would grow to %lld characters; at most %d",
                  (long long)chars, WM_DOC_MAX_CHARS);
    return STATUS_ETOOBIG;
}

/* The PII policy judges what the caller adds: the text it appends or puts
 * in (field, as the request names it), and the path of a document it
 * creates. Others' content already stored is neither judged again nor
 * rewritten: a caller without pii:write appending to a document whose
 * owner stored PII with pii:write neither redacts that PII nor is refused
 * for it. *added may then point at a redacted copy. */
static int judge_added(edit_ctx *e, const char *field, const char **added, int creating, char *err,
                       size_t errlen) {
    const char *path = e->path;
    pii_field f[] = {PII_TEXT(field, added), PII_NAME("path", &path)};
    return pii_policy_apply(e->a, e->mode, f, creating ? 2 : 1, NULL, NULL, err, errlen);
}

/* Where the caller's text went in the new content. */
typedef struct span {
    size_t at, len;
} span;

/* One scan of the new content serves two ends. PII the caller's text forms
 * with the text around it ("alice" stored, "@example.com" appended): a
 * detector's hit that overlaps one of the caller's spans is the caller's
 * too. REJECT refuses it, naming the field; REDACT replaces each such hit
 * whole (*content then points at a redacted copy in the arena); ALLOW
 * keeps it. Hits wholly in others' text are left alone. And *kinds gets
 * the kinds the stored content holds, whoever wrote each part (its
 * pii_kinds). */
static int judge_content(edit_ctx *e, const char *field, const char **content, const span *sp,
                         size_t nsp, unsigned *kinds, char *err, size_t errlen) {
    size_t len = strlen(*content), n = 0, found = 0;
    *kinds = 0;
    pii_scan(*content, len, NULL, 0, &n);
    if (n == 0) return STATUS_OK;
    pii_hit *hits = arena_alloc(e->a, n * sizeof *hits);
    if (!hits) return STATUS_ENOMEM;
    pii_scan(*content, len, hits, n, &n);
    for (size_t i = 0; i < n; i++) {
        int ours = 0;
        for (size_t k = 0; k < nsp && !ours && e->mode != PII_MODE_ALLOW; k++)
            ours = hits[i].start < sp[k].at + sp[k].len && sp[k].at < hits[i].start + hits[i].len;
        if (ours) hits[found++] = hits[i];
        else *kinds |= hits[i].kind; /* stays as it is */
    }
    if (found == 0) return STATUS_OK;
    if (e->mode == PII_MODE_REJECT) {
        text_errf(err, errlen,
                  "%s at %s (with the text around it): personal data or secrets need pii:write",
                  pii_kind_name(hits[0].kind), field);
        return STATUS_EINVALID;
    }
    size_t cap = len + 1;
    for (size_t i = 0; i < found; i++) cap += 32;
    char *out = arena_alloc(e->a, cap), *w = out;
    if (!out) return STATUS_ENOMEM;
    size_t from = 0;
    for (size_t i = 0; i < found; i++) {
        memcpy(w, *content + from, hits[i].start - from);
        w += hits[i].start - from;
        w += snprintf(w, cap - (size_t)(w - out), PII_REDACT_FMT, pii_kind_name(hits[i].kind));
        from = hits[i].start + hits[i].len;
    }
    memcpy(w, *content + from, len - from + 1);
    *content = out;
    return STATUS_OK;
}

/* The new content, its size and the kinds of PII it holds (judge_content's). */
static int edit_finish(edit_ctx *e, const char *content, unsigned kinds, wm_edit_out *out,
                       char *err, size_t errlen) {
    long chars = text_utf8_chars(content);
    if (chars < 0) {
        text_errf(err, errlen, "the document is not valid UTF-8");
        return STATUS_EINTERNAL;
    }
    if (chars > WM_DOC_MAX_CHARS) return too_big(chars, err, errlen);
    const char **names = arena_alloc(e->a, PII_KIND_COUNT * sizeof *names);
    if (!names) return STATUS_ENOMEM;
    out->npii = pii_kind_names(kinds, names, PII_KIND_COUNT);
    out->pii_kinds = names;
    out->changed = 1;
    out->content = content;
    out->chars = chars;
    return STATUS_OK;
}

static int edit_append(void *arg, const char *cur, int exists, wm_edit_out *out, char *err,
                       size_t errlen) {
    edit_ctx *e = arg;
    const char *add = e->append;
    int rc = judge_added(e, "text", &add, !exists, err, errlen);
    if (rc != STATUS_OK) return rc;
    size_t cl = strlen(cur), al = strlen(add);
    if (exists && al == 0) return STATUS_OK; /* nothing to add: no new version */
    if (cl + al > DOC_MAX_BYTES)
        return too_big((int64_t)text_utf8_chars(cur) + text_utf8_chars(add), err, errlen);
    char *buf = arena_alloc(e->a, cl + al + 1);
    if (!buf) return STATUS_ENOMEM;
    memcpy(buf, cur, cl);
    memcpy(buf + cl, add, al + 1);
    const char *content = buf;
    span added = {cl, al};
    unsigned kinds;
    if ((rc = judge_content(e, "text", &content, &added, 1, &kinds, err, errlen)) != STATUS_OK)
        return rc;
    return edit_finish(e, content, kinds, out, err, errlen);
}

/* Occurrences of find in s (non-overlapping, first first), at most max (0:
 * all). UTF-8 is self-synchronizing: a match of whole characters never
 * starts inside another character. */
static int64_t count_matches(const char *s, const char *find, size_t fl, int32_t max) {
    int64_t n = 0;
    for (const char *p = strstr(s, find); p && (!max || n < max); p = strstr(p + fl, find)) n++;
    return n;
}

static int edit_update(void *arg, const char *cur, int exists, wm_edit_out *out, char *err,
                       size_t errlen) {
    edit_ctx *e = arg;
    (void)exists;
    size_t fl = strlen(e->find), cl = strlen(cur);
    e->count = count_matches(cur, e->find, fl, e->max_replacements);
    if (e->count == 0) return STATUS_OK; /* out->changed stays 0 */
    const char *put = e->replacement;
    int rc = judge_added(e, "new_text", &put, 0, err, errlen);
    if (rc != STATUS_OK) return rc;
    size_t rl = strlen(put);
    /* The size first: a short find replaced by a long text many times. */
    size_t total = cl - (size_t)e->count * fl;
    if (rl && (size_t)e->count > (DOC_MAX_BYTES - total) / rl) return too_big(-1, err, errlen);
    total += (size_t)e->count * rl;
    if (total > DOC_MAX_BYTES) return too_big(-1, err, errlen);
    char *buf = arena_alloc(e->a, total + 1), *w = buf;
    span *put_at = arena_alloc(e->a, (size_t)e->count * sizeof *put_at);
    if (!buf || !put_at) return STATUS_ENOMEM;
    const char *p = cur;
    for (int64_t done = 0; done < e->count; done++) {
        const char *m = strstr(p, e->find);
        memcpy(w, p, (size_t)(m - p));
        w += m - p;
        put_at[done] = (span){(size_t)(w - buf), rl};
        memcpy(w, put, rl);
        w += rl;
        p = m + fl;
    }
    strcpy(w, p);
    const char *content = buf;
    unsigned kinds;
    if ((rc = judge_content(e, "new_text", &content, put_at, (size_t)e->count, &kinds, err,
                            errlen)) != STATUS_OK)
        return rc;
    return edit_finish(e, content, kinds, out, err, errlen);
}

/* What Append and Update answer with, until the loop thread renders it. */
typedef struct {
    edit_ctx e;
    wm_record rec;
    int created;
    wm_addr m;
    Memory__V1__RecordMeta **meta;
    int64_t *chars;
    protobuf_c_boolean *created_out; /* Append's */
    int64_t *replacement_count;      /* Update's */
} edit_pending;

static grpc_status_code render_edit(tier_pending_call *pc) {
    edit_pending *ep = pc->out;
    if (!(*ep->meta = tier_meta_render(pc->c->ar, &ep->rec.meta))) return rpc_call_oom(pc->call);
    *ep->chars = ep->rec.chars;
    if (ep->created_out) *ep->created_out = ep->created;
    if (ep->replacement_count) *ep->replacement_count = ep->e.count;
    return GRPC_STATUS_OK;
}

/* The store's edit with tmpl's answer fields, once the request is checked. */
static grpc_status_code edit(rpc_call *call, wm_service *svc, ProtobufCMessage *resp,
                             const wm_edit_in *in, wm_edit_fn fn, const edit_pending *tmpl) {
    wm_target(call, &in->m, in->path);
    tier_pending_call *pc =
        tier_pending_new(call, "working", svc->env->audit, sizeof(edit_pending), render_edit, resp);
    if (!pc) return rpc_call_oom(call);
    edit_pending *ep = pc->out;
    *ep = *tmpl;
    ep->m = in->m;
    ep->e.a = rpc_call_arena(call);
    ep->e.mode = pii_policy_mode(svc->env->pii, authn_principal(call));
    ep->e.path = in->path;
    wm_edit_in sin = *in;
    sin.edit = fn;
    sin.edit_arg = &ep->e;
    tier_async *op = wm_store_edit_async(&svc->store, pc->c, &sin, &ep->rec, &ep->created,
                                         tier_pending_done, pc);
    return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call);
}

RPC_UNARY_HANDLER(wm_do_append, wm_service, Memory__V1__WorkingMemoryAppendRequest,
                  Memory__V1__WorkingMemoryAppendResponse) {
    wm_memory_ref ref;
    wm_edit_in in = {.create = 1};
    RPC_CHECK(wm_check_memory(call, req->memory, &ref));
    RPC_CHECK(wm_check_path(call, "path", req->path, 0, &in.path));
    RPC_CHECK(tier_check_text(call, "text", req->text, WM_DOC_MAX_CHARS));
    RPC_CHECK(tier_check_label(call, "label", (int)req->label));
    RPC_CHECK(TIER_CHECK_PRECONDITION(call, req, MEMORY__V1__WORKING_MEMORY_APPEND_REQUEST,
                                      TIER_EXPECT_CREATE_OK, &in.has_expected,
                                      &in.expected_version));
    in.m = ref.m;
    in.label = (int)req->label;
    edit_pending tmpl = {.e = {.append = req->text},
                         .meta = &resp->meta,
                         .chars = &resp->chars,
                         .created_out = &resp->created};
    return edit(call, svc, &resp->base, &in, edit_append, &tmpl);
}

RPC_UNARY_HANDLER(wm_do_update, wm_service, Memory__V1__WorkingMemoryUpdateRequest,
                  Memory__V1__WorkingMemoryUpdateResponse) {
    wm_memory_ref ref;
    wm_edit_in in = {0};
    RPC_CHECK(wm_check_memory(call, req->memory, &ref));
    RPC_CHECK(wm_check_path(call, "path", req->path, 0, &in.path));
    if (!req->old_text[0])
        return rpc_call_invalid(call, "old_text: required (1 to %d characters)", WM_FIND_MAX_CHARS);
    RPC_CHECK(tier_check_text(call, "old_text", req->old_text, WM_FIND_MAX_CHARS));
    RPC_CHECK(tier_check_text(call, "new_text", req->new_text, WM_DOC_MAX_CHARS));
    if (req->max_replacements < 0)
        return rpc_call_invalid(call, "max_replacements: %d; must not be negative (0 = all)",
                                req->max_replacements);
    RPC_CHECK(TIER_CHECK_PRECONDITION(call, req, MEMORY__V1__WORKING_MEMORY_UPDATE_REQUEST,
                                      TIER_EXPECT_VERSION, &in.has_expected, &in.expected_version));
    in.m = ref.m;
    edit_pending tmpl = {.e = {.find = req->old_text,
                               .replacement = req->new_text,
                               .max_replacements = req->max_replacements},
                         .meta = &resp->meta,
                         .chars = &resp->chars,
                         .replacement_count = &resp->replacement_count};
    return edit(call, svc, &resp->base, &in, edit_update, &tmpl);
}

static grpc_status_code render_delete(tier_pending_call *pc) {
    ((Memory__V1__WorkingMemoryDeleteDocumentResponse *)pc->resp)->deleted_count =
        *(int64_t *)pc->out;
    return GRPC_STATUS_OK;
}

RPC_UNARY_HANDLER(wm_do_delete, wm_service, Memory__V1__WorkingMemoryDeleteDocumentRequest,
                  Memory__V1__WorkingMemoryDeleteDocumentResponse) {
    wm_memory_ref ref;
    wm_delete_in in = {.recursive = req->recursive};
    RPC_CHECK(wm_check_memory(call, req->memory, &ref));
    RPC_CHECK(
        wm_check_path(call, "path", req->path, req->recursive ? WM_PATH_ROOT_OK : 0, &in.path));
    RPC_CHECK(TIER_CHECK_PRECONDITION(call, req, MEMORY__V1__WORKING_MEMORY_DELETE_DOCUMENT_REQUEST,
                                      TIER_EXPECT_VERSION, &in.has_expected, &in.expected_version));
    if (in.has_expected && in.recursive)
        return rpc_call_invalid(call, "expected_version: not with recursive");
    in.m = ref.m;
    wm_target(call, &in.m, in.path);
    tier_pending_call *pc = tier_pending_new(call, "working", svc->env->audit, sizeof(int64_t),
                                             render_delete, &resp->base);
    tier_async *op =
        pc ? wm_store_delete_async(&svc->store, pc->c, &in, pc->out, tier_pending_done, pc) : NULL;
    return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call);
}
