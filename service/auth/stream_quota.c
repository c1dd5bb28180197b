/* stream_quota: one count per tenant and per (tenant, principal) with open
 * streams, kept in a list: there are at most as many as open streams
 * (--max-streams), and a stream opens rarely, so a scan is cheap. */
#include "service/auth/stream_quota.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "service/auth/principal.h"

typedef struct count {
    struct count *next;
    int open;
    size_t tenant_len; /* key = tenant, or tenant '\0' sub */
    size_t key_len;
    char key[];
} count;

struct stream_quota {
    pthread_mutex_t lock;
    count *counts;
    int per_tenant, per_principal;
    const char *what, *tenant_flag, *principal_flag; /* in refusals */
};

/* A stream's places, handed back when its call is destroyed. */
typedef struct {
    stream_quota *q;
    count *tenant, *principal;
} places;

stream_quota *stream_quota_create_for(const char *what, int per_tenant, const char *tenant_flag,
                                      int per_principal, const char *principal_flag) {
    stream_quota *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    pthread_mutex_init(&q->lock, NULL);
    q->per_tenant = per_tenant;
    q->per_principal = per_principal;
    q->what = what;
    q->tenant_flag = tenant_flag;
    q->principal_flag = principal_flag;
    return q;
}

stream_quota *stream_quota_create(int per_tenant, int per_principal) {
    return stream_quota_create_for(
        "streams", per_tenant > 0 ? per_tenant : 256, "--max-streams-per-tenant",
        per_principal > 0 ? per_principal : 32, "--max-streams-per-principal");
}

void stream_quota_free(stream_quota *q) {
    if (!q) return;
    while (q->counts) {
        count *c = q->counts;
        q->counts = c->next;
        free(c);
    }
    pthread_mutex_destroy(&q->lock);
    free(q);
}

/* Caller holds the lock. The count for tenant (sub NULL) or (tenant, sub);
 * create: make it (open 0) when missing; NULL when missing or out of memory. */
static count *find_locked(stream_quota *q, const char *tenant, const char *sub, int create) {
    size_t tl = strlen(tenant), kl = sub ? tl + 1 + strlen(sub) : tl;
    for (count *c = q->counts; c; c = c->next)
        if (c->key_len == kl && c->tenant_len == tl && memcmp(c->key, tenant, tl) == 0 &&
            (!sub || strcmp(c->key + tl + 1, sub) == 0))
            return c;
    if (!create) return NULL;
    count *c = malloc(sizeof *c + kl + 1);
    if (!c) return NULL;
    c->open = 0;
    c->tenant_len = tl;
    c->key_len = kl;
    memcpy(c->key, tenant, tl + 1);
    if (sub) memcpy(c->key + tl + 1, sub, strlen(sub) + 1);
    c->next = q->counts;
    q->counts = c;
    return c;
}

/* Caller holds the lock. Frees c once no stream counts in it. */
static void drop_if_idle_locked(stream_quota *q, count *c) {
    if (c->open > 0) return;
    for (count **pp = &q->counts; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            free(c);
            return;
        }
}

static void give_back(void *arg) {
    places *pl = arg;
    pthread_mutex_lock(&pl->q->lock);
    pl->principal->open--;
    pl->tenant->open--;
    drop_if_idle_locked(pl->q, pl->principal);
    drop_if_idle_locked(pl->q, pl->tenant);
    pthread_mutex_unlock(&pl->q->lock);
}

grpc_status_code stream_quota_interceptor(rpc_call *call, void *arg) {
    const rpc_method *m = rpc_call_method(call);
    if (!m || m->kind == RPC_UNARY || !rpc_call_principal(call)) return GRPC_STATUS_OK;
    return stream_quota_take(arg, call);
}

grpc_status_code stream_quota_take(stream_quota *q, rpc_call *call) {
    const rpc_method *m = rpc_call_method(call);
    const principal *p = rpc_call_principal(call);
    places *pl = arena_alloc(rpc_call_arena(call), sizeof *pl);
    if (!pl) return rpc_call_oom(call);
    const char *tenant = principal_tenant(p), *sub = principal_sub(p);
    pthread_mutex_lock(&q->lock);
    count *t = find_locked(q, tenant, NULL, 1);
    count *s = t ? find_locked(q, tenant, sub, 1) : NULL;
    grpc_status_code st = GRPC_STATUS_OK;
    if (!t || !s) {
        st = GRPC_STATUS_RESOURCE_EXHAUSTED;
        rpc_call_set_error(call, "out of memory");
    } else if (t->open >= q->per_tenant) {
        st = GRPC_STATUS_RESOURCE_EXHAUSTED;
        rpc_call_set_error(call, "%s: tenant %s already has %d %s open, its limit (%s)",
                           m ? m->path : "call", tenant, q->per_tenant, q->what, q->tenant_flag);
    } else if (s->open >= q->per_principal) {
        st = GRPC_STATUS_RESOURCE_EXHAUSTED;
        rpc_call_set_error(call,
                           "%s: principal %s already has %d %s open, its limit (%s); close one "
                           "first",
                           m ? m->path : "call", sub, q->per_principal, q->what, q->principal_flag);
    }
    if (st == GRPC_STATUS_OK) {
        *pl = (places){q, t, s};
        if (rpc_call_on_destroy(call, give_back, pl) != 0) {
            st = GRPC_STATUS_INTERNAL; /* a programming error: too many hooks */
            rpc_call_set_error(call, "%s: no room to count the call's %s", m ? m->path : "call",
                               q->what);
        } else {
            t->open++;
            s->open++;
        }
    }
    if (st != GRPC_STATUS_OK) { /* counts made for this call alone go again */
        if (s) drop_if_idle_locked(q, s);
        if (t) drop_if_idle_locked(q, t);
    }
    pthread_mutex_unlock(&q->lock);
    return st;
}

int stream_quota_count(stream_quota *q, const char *tenant, const char *sub) {
    pthread_mutex_lock(&q->lock);
    count *c = find_locked(q, tenant, sub, 0);
    int n = c ? c->open : 0;
    pthread_mutex_unlock(&q->lock);
    return n;
}
