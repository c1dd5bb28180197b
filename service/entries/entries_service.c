/* entries_service: the Entries tier (descriptor, state), the request
 * checks its handlers share and entry rendering; the handlers are in
 * entries_rpc_read.c and entries_rpc_write.c. See entries_service.h. */
#include "service/entries/entries_service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/auth/authn.h"
#include "service/auth/nsglob.h"
#include "service/core/log.h"
#include "service/core/text.h"
#include "service/entries/entries_service_internal.h"
#include "service/pb/pbjson.h"

/* ------------------------------------------------------------ checks */

/* nsglob's reasons may start with what they checked ("namespace: ...");
 * our messages name the request field instead. */
static const char *reason(const char *why) {
    const char *p = why;
    while ((*p >= 'a' && *p <= 'z') || *p == ' ') p++;
    return p != why && p[0] == ':' && p[1] == ' ' ? p + 2 : why;
}

/* s of field: present (required says how it looks) and what nsglob's
 * check (a namespace or a key: what) accepts. */
static grpc_status_code check_part(rpc_call *call, const char *field, const char *s,
                                   const char *required, const char *what,
                                   int (*check)(const char *, size_t, char *, size_t)) {
    char why[256];
    if (!s[0]) return rpc_call_invalid(call, "%s: required%s", field, required);
    if (check(s, strlen(s), why, sizeof why) != 0)
        return rpc_call_invalid(call, "%s: \"%s\" is not a %s: %s", field,
                                text_quote(rpc_call_arena(call), s), what, reason(why));
    return GRPC_STATUS_OK;
}

grpc_status_code entries_check_namespace(rpc_call *call, const char *field, const char *ns) {
    return check_part(call, field, ns, " (agent:workflow:node)", "namespace",
                      nsglob_check_namespace);
}

grpc_status_code entries_check_key(rpc_call *call, const char *field, const char *key) {
    return check_part(call, field, key, "", "key", nsglob_check_key);
}

grpc_status_code entries_check_ns_pattern(rpc_call *call, const char *field, const char **pat) {
    char why[256];
    if (!(*pat)[0]) *pat = "*:*:*";
    if (nsglob_check_pattern(*pat, strlen(*pat), why, sizeof why) != 0)
        return rpc_call_invalid(call, "%s: \"%s\" is not a namespace pattern: %s", field,
                                text_quote(rpc_call_arena(call), *pat), reason(why));
    return GRPC_STATUS_OK;
}

grpc_status_code entries_check_key_pattern(rpc_call *call, const char **pat) {
    char why[256];
    if (!(*pat)[0]) *pat = "*";
    if (nsglob_check_key_pattern(*pat, strlen(*pat), why, sizeof why) != 0)
        return rpc_call_invalid(call, "key_pattern: \"%s\" is not a key pattern: %s",
                                text_quote(rpc_call_arena(call), *pat), reason(why));
    return GRPC_STATUS_OK;
}

grpc_status_code entries_check_ns_allowed(rpc_call *call, const principal *p, const char *ns) {
    if (principal_ns_allows(p, ns)) return GRPC_STATUS_OK;
    rpc_call_set_error(call, "namespace \"%s\" is outside the token's ns claim", ns);
    return GRPC_STATUS_PERMISSION_DENIED;
}

grpc_status_code entries_check_address(rpc_call *call, const char *ns, const char *key) {
    RPC_CHECK(entries_check_namespace(call, "namespace", ns));
    RPC_CHECK(entries_check_key(call, "key", key));
    return GRPC_STATUS_OK;
}

/* ------------------------------------------------------------ the router's copies */

const char *entries_cache_id(arena *a, const char *ns, const char *key) {
    return arena_printf(a, "%zu:%s%s", strlen(ns), ns, key);
}

void entries_changed(const entries_service *svc, tier_ctx *c, const char *ns, const char *key) {
    if (!svc->records) return;
    const char *id = entries_cache_id(c->ar, ns, key);
    if (id) cache_records_changed(svc->records, c->ar, principal_tenant(c->p), id);
    else
        log_fields(LOG_WARN, "entry change not announced to the router's cache: out of memory",
                   LOG_F_STR, "namespace", ns, LOG_F_STR, "key", key, LOG_F_END);
}

/* ------------------------------------------------------------ rendering */

void entries_target(rpc_call *call, const char *ns, const char *key) {
    tier_target(call, "%s/%s", ns, key);
}

Memory__V1__Entry *entries_render(arena *a, const entries_record *r) {
    Memory__V1__Entry *e = arena_message(a, &memory__v1__entry__descriptor);
    if (!e) return NULL;
    e->namespace_ = (char *)r->ns;
    e->key = (char *)r->key;
    if (r->has_value) {
        e->value.data = (uint8_t *)r->value;
        e->value.len = r->value_len;
    }
    e->content_type = (char *)r->content_type;
    if (pbjson_to_struct(a, r->metadata_json, strlen(r->metadata_json), &e->metadata) != 0)
        return NULL;
    e->n_tags = r->ntags;
    e->tags = (char **)r->tags;
    e->size_bytes = r->size_bytes;
    if (!(e->meta = tier_meta_render(a, &r->meta))) return NULL;
    return e;
}

/* ------------------------------------------------------------ the tier */

static int entries_open(tier_env *env, void **state, char *err, size_t errlen) {
    entries_service *svc = *state = tier_state_new(sizeof *svc, err, errlen);
    if (!svc) return -1;
    svc->env = env;
    svc->store = tier_store_on(env->pg, env->pga, env->max_response_bytes);
    svc->store.text_language = tier_env_text_language(env);
    svc->records = env->entry_cache;
    return 0;
}

#define SVC "memory.v1.Entries"
static const rpc_method methods[] = {
    RPC_METHOD_UNARY(SVC, "Write", memory__v1__entries_write, "entries:write", entries_do_write),
    RPC_METHOD_UNARY(SVC, "Read", memory__v1__entries_read, "entries:read", entries_do_read),
    RPC_METHOD_UNARY(SVC, "List", memory__v1__entries_list, "entries:read", entries_do_list),
    RPC_METHOD_UNARY(SVC, "Search", memory__v1__entries_search, "entries:read", entries_do_search),
    RPC_METHOD_UNARY(SVC, "DeleteEntry", memory__v1__entries_delete_entry, "entries:write",
                     entries_do_delete),
    RPC_METHOD_UNARY(SVC, "Stats", memory__v1__entries_stats, "entries:read", entries_do_stats),
    RPC_METHOD_UNARY(SVC, "Append", memory__v1__entries_append, "entries:write", entries_do_append),
    RPC_METHOD_UNARY(SVC, "Replace", memory__v1__entries_replace, "entries:write",
                     entries_do_replace),
    RPC_METHOD_UNARY(SVC, "PurgeExpired", memory__v1__entries_purge_expired, "admin",
                     entries_do_purge),
};

static const tier_service services[] = {{SVC, HEALTH_NEEDS_PG}};

static const tier_records records =
    TIER_RECORDS(MEMORY__V1__TIER__TIER_ENTRIES, TIER_ORDER_RECORDS + 20, entries_erase,
                 entries_export, "entries");

const tier entries_tier = {TIER_FIELDS("entries", services, methods, entries_open, free),
                           .records = &records, .route = &entries_route};
