/* tier_page: page sizes, request-bound page tokens, answer budgets; see
 * tier_page.h. */
#include "service/tier/tier_page.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

#include "service/audit/audit.h"
#include "service/pb/page_token.h"

grpc_status_code tier_page_size(rpc_call *call, int32_t asked, int *out) {
    if (asked < 0) return rpc_call_invalid(call, "page_size: %d; must not be negative", (int)asked);
    *out = asked == 0 ? TIER_PAGE_DEFAULT : asked > TIER_PAGE_MAX ? TIER_PAGE_MAX : (int)asked;
    return GRPC_STATUS_OK;
}

/* Clears one field of the (shallow) copy m. */
static void clear_field(const ProtobufCMessageDescriptor *d, ProtobufCMessage *m,
                        const char *name) {
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, name);
    if (!f) return;
    void *at = (char *)m + f->offset;
    if (f->type == PROTOBUF_C_TYPE_STRING) *(const char **)at = "";
    else if (f->type == PROTOBUF_C_TYPE_INT32) *(int32_t *)at = 0;
}

/* Hex SHA-256 of req packed without its page fields. */
static const char *filters_digest(arena *a, const ProtobufCMessage *req) {
    const ProtobufCMessageDescriptor *d = req->descriptor;
    ProtobufCMessage *copy = arena_alloc(a, d->sizeof_message);
    char *hex = arena_alloc(a, 65);
    if (!copy || !hex) return NULL;
    memcpy(copy, req, d->sizeof_message);
    clear_field(d, copy, "page_token");
    clear_field(d, copy, "page_size");
    size_t n = protobuf_c_message_get_packed_size(copy);
    uint8_t *buf = arena_alloc(a, n ? n : 1);
    if (!buf) return NULL;
    protobuf_c_message_pack(copy, buf);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int ml = 0;
    if (EVP_Digest(buf, n, md, &ml, EVP_sha256(), NULL) != 1 || ml != 32) return NULL;
    for (unsigned i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return hex;
}

grpc_status_code tier_page_bind(rpc_call *call, const principal *p, const ProtobufCMessage *req,
                                tier_page *pg) {
    pg->domain = rpc_call_path(call);
    pg->bind[0] = principal_tenant(p);
    pg->bind[1] = principal_sub(p);
    pg->bind[2] = filters_digest(rpc_call_arena(call), req);
    return pg->bind[2] ? GRPC_STATUS_OK : rpc_call_oom(call);
}

grpc_status_code tier_page_open(rpc_call *call, const tier_page *pg, const char *token,
                                const char **fields, size_t n, int nonempty, int *present) {
    *present = token && token[0];
    if (!*present) return GRPC_STATUS_OK;
    int ok =
        page_token_decode(rpc_call_arena(call), pg->domain, pg->bind, 3, token, fields, n) == 0;
    for (size_t i = 0; ok && nonempty && i < n; i++) ok = fields[i][0] != '\0';
    return ok ? GRPC_STATUS_OK : tier_page_refuse(call, pg);
}

grpc_status_code tier_page_resume(rpc_call *call, const tier_page *pg, const char *token,
                                  const char **first, const char **second, int nonempty) {
    const char *cursor[2];
    int present;
    grpc_status_code st = tier_page_open(call, pg, token, cursor, 2, nonempty, &present);
    if (st == GRPC_STATUS_OK && present) *first = cursor[0], *second = cursor[1];
    return st;
}

grpc_status_code tier_page_refuse(rpc_call *call, const tier_page *pg) {
    const char *method = strrchr(pg->domain, '/');
    return rpc_call_invalid(call,
                            "page_token: not a next_page_token of a previous %s call by this "
                            "caller with these filters",
                            method ? method + 1 : pg->domain);
}

char *tier_page_seal(rpc_call *call, const tier_page *pg, const char *const *fields, size_t n) {
    return page_token_encode(rpc_call_arena(call), pg->domain, pg->bind, 3, fields, n);
}

grpc_status_code tier_page_fill(rpc_call *call, const tier_page_kind *k, const void *items,
                                size_t n, size_t max, ProtobufCMessage ***out, size_t *nout,
                                int *cut) {
    arena *a = rpc_call_arena(call);
    ProtobufCMessage **v = arena_alloc(a, (n ? n : 1) * sizeof *v);
    if (!v) return rpc_call_oom(call);
    size_t used = 0, i = 0;
    *cut = 0;
    for (; i < n; i++) {
        const void *item = (const char *)items + i * k->size;
        if (!(v[i] = k->render(a, item))) return rpc_call_oom(call);
        /* A repeated message field costs its bytes plus a tag and a length. */
        used += protobuf_c_message_get_packed_size(v[i]) + 8;
        if (i > 0 && used > max) {
            *cut = 1;
            break;
        }
        audit_add_target(call, k->name(a, item));
    }
    *out = v;
    *nout = i;
    return GRPC_STATUS_OK;
}
