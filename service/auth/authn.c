/* authn: token authentication and scope authorization for every call; see
 * authn.h. */
#include "service/auth/authn.h"

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "service/auth/jwk_private.h"
#include "service/auth/revocation.h"
#include "service/auth/token_cache.h"
#include "service/core/clock.h"
#include "service/core/log.h"
#include "service/metrics/metrics.h"

#define KEY_RELOAD_DEFAULT_MS 1000

/* Why a call was refused, for the metrics. */
enum {
    REFUSED_MISSING,
    REFUSED_MALFORMED,
    REFUSED_INVALID,
    REFUSED_REVOKED,
    REFUSED_CERTIFICATE,
    REFUSED_SCOPE,
    REFUSED_KINDS
};
static const char *const refused_names[REFUSED_KINDS] = {"missing", "malformed",   "invalid",
                                                         "revoked", "certificate", "scope"};

/* What identifies a version of the key file. */
typedef struct {
    struct timespec mtime;
    ino_t ino;
    off_t size;
} file_version;

struct authn {
    char *jwks_path;
    char *issuer;
    int skew_s;
    int open_infra;
    /* Guards keys. Readers verify a token and cache it under it; a reload
     * swaps the set and empties the token cache under it, so no token of a
     * removed key is cached after the reload. */
    pthread_rwlock_t keys_lock;
    jwks *keys;
    /* The file check: at most once per reload_ms (keys_checked_ms, taken
     * by compare-and-swap so a flood of calls, or of unknown kids, costs
     * an atomic load each and never waits); reload_lock (try-locked) and
     * keys_version belong to the one thread checking. */
    int reload_ms;
    atomic_int_fast64_t keys_checked_ms;
    pthread_mutex_t reload_lock;
    file_version keys_version;
    EVP_PKEY *signing_key;
    char *signing_kid;
    token_cache *cache;
    revocation *revoked;
    int bind_to_client_certificate;
    /* the metrics (authn_metrics_collect) */
    metrics_counter cache_hits, cache_misses;
    metrics_counter refused[REFUSED_KINDS];
};

static int file_version_of(const char *path, file_version *out) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    *out = (file_version){st.st_mtim, st.st_ino, st.st_size};
    return 0;
}

static int same_version(const file_version *a, const file_version *b) {
    return a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
           a->ino == b->ino && a->size == b->size;
}

int authn_create(const authn_options *o, pg_pool *pg, authn **out, char *err, size_t errlen) {
    *out = NULL;
    authn *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    pthread_rwlock_init(&a->keys_lock, NULL);
    pthread_mutex_init(&a->reload_lock, NULL);
    a->reload_ms = o->jwks_reload_ms > 0 ? o->jwks_reload_ms : KEY_RELOAD_DEFAULT_MS;
    a->skew_s = o->skew_s < 0 ? 0 : o->skew_s;
    a->open_infra = o->open_infra;
    a->bind_to_client_certificate = o->bind_to_client_certificate;
    a->jwks_path = strdup(o->jwks_path ? o->jwks_path : "");
    a->issuer = strdup(o->issuer && o->issuer[0] ? o->issuer : "memoryd");
    a->cache = token_cache_create(o->cache_max ? o->cache_max : 65536);
    char why[512];
    if (!a->jwks_path || !a->issuer || !a->cache) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (jwks_load_file(a->jwks_path, &a->keys, why, sizeof why) != 0) {
        snprintf(err, errlen, "--jwks (MEMORYD_JWKS): %s", why);
        goto fail;
    }
    file_version_of(a->jwks_path, &a->keys_version);
    atomic_store(&a->keys_checked_ms, clock_mono_ms(NULL));
    if (o->signing_key_path && o->signing_key_path[0]) {
        if (jwk_private_load_file(o->signing_key_path, &a->signing_key, &a->signing_kid, why,
                                  sizeof why) != 0) {
            snprintf(err, errlen, "--signing-key (MEMORYD_SIGNING_KEY): %s", why);
            goto fail;
        }
        if (!jwks_find(a->keys, a->signing_kid)) {
            snprintf(err, errlen,
                     "--signing-key: its kid \"%s\" is not in the --jwks file %s, "
                     "so tokens memoryd mints would not verify; add its public key there",
                     a->signing_kid, a->jwks_path);
            goto fail;
        }
    }
    if (revocation_create(pg, o->revocation_poll_ms, a->skew_s, &a->revoked, why, sizeof why) !=
        0) {
        snprintf(err, errlen, "%s", why);
        goto fail;
    }
    log_fields(LOG_INFO, "token keys loaded", LOG_F_STR, "jwks", a->jwks_path, LOG_F_INT, "keys",
               (int64_t)jwks_count(a->keys), LOG_F_INT, "skipped", (int64_t)jwks_skipped(a->keys),
               LOG_F_STR, "signing_kid", a->signing_kid ? a->signing_kid : "", LOG_F_INT, "revoked",
               (int64_t)revocation_count(a->revoked), LOG_F_END);
    *out = a;
    return 0;
fail:
    authn_free(a);
    return -1;
}

void authn_free(authn *a) {
    if (!a) return;
    revocation_free(a->revoked);
    token_cache_free(a->cache);
    jwks_free(a->keys);
    EVP_PKEY_free(a->signing_key);
    free(a->signing_kid);
    free(a->jwks_path);
    free(a->issuer);
    pthread_rwlock_destroy(&a->keys_lock);
    pthread_mutex_destroy(&a->reload_lock);
    free(a);
}

/* The kids of old that fresh lacks, space-separated into out; how many. */
static size_t removed_kids(const jwks *old, const jwks *fresh, char *out, size_t outlen) {
    size_t n = 0, used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < jwks_count(old); i++) {
        if (jwks_find(fresh, jwks_kid(old, i))) continue;
        n++;
        if (used < outlen)
            used += (size_t)snprintf(out + used, outlen - used, "%s%s", used ? " " : "",
                                     jwks_kid(old, i));
    }
    return n;
}

/* Key rotation and retirement without a restart: re-reads the JWKS file
 * when it changed, at most once per reload_ms, whoever calls (every call
 * does: a cheap atomic check). A key gone from the file stops verifying at
 * once, and the tokens it signed leave the token cache. */
static void maybe_reload_keys(authn *a) {
    int64_t now = clock_mono_ms(NULL), last = atomic_load(&a->keys_checked_ms);
    if (now - last < a->reload_ms ||
        !atomic_compare_exchange_strong(&a->keys_checked_ms, &last, now))
        return;
    if (pthread_mutex_trylock(&a->reload_lock) != 0) return; /* a slow check still runs */
    file_version v;
    if (file_version_of(a->jwks_path, &v) == 0 && !same_version(&v, &a->keys_version)) {
        jwks *fresh = NULL;
        char why[512], removed[512];
        if (jwks_load_file(a->jwks_path, &fresh, why, sizeof why) == 0) {
            /* Only this thread replaces keys: reading them unlocked is safe. */
            size_t nremoved = removed_kids(a->keys, fresh, removed, sizeof removed);
            pthread_rwlock_wrlock(&a->keys_lock);
            jwks *old = a->keys;
            a->keys = fresh;
            if (nremoved) token_cache_clear(a->cache);
            pthread_rwlock_unlock(&a->keys_lock);
            jwks_free(old);
            log_fields(nremoved ? LOG_WARN : LOG_INFO, "token keys reloaded", LOG_F_STR, "jwks",
                       a->jwks_path, LOG_F_INT, "keys", (int64_t)jwks_count(fresh), LOG_F_STR,
                       "removed", removed, LOG_F_END);
        } else {
            log_fields(LOG_WARN, "token keys file changed but cannot be used; keeping the old keys",
                       LOG_F_STR, "error", why, LOG_F_END);
        }
        a->keys_version = v;
    }
    pthread_mutex_unlock(&a->reload_lock);
}

/* Verifies a token not in the cache and caches its principal, both under
 * the key-set lock (see struct authn). NULL with why set, *status the
 * call's. */
static principal *verify_and_cache(authn *a, const char *token, size_t len, int64_t now_s,
                                   grpc_status_code *status, char *why, size_t whylen) {
    jwt_claims *claims = NULL;
    pthread_rwlock_rdlock(&a->keys_lock);
    int rc = jwt_verify(a->keys, token, len, now_s, a->skew_s, &claims, why, whylen);
    principal *p = NULL;
    if (rc == JWT_OK) {
        int64_t valid_until = claims->exp + a->skew_s;
        p = principal_create(claims);
        if (p) token_cache_put(a->cache, token, len, p, valid_until);
    }
    pthread_rwlock_unlock(&a->keys_lock);
    if (rc != JWT_OK) {
        *status = GRPC_STATUS_UNAUTHENTICATED;
    } else if (!p) {
        snprintf(why, whylen, "out of memory");
        *status = GRPC_STATUS_RESOURCE_EXHAUSTED;
    }
    return p;
}

/* 0 if neither the token nor any token it was attenuated from is revoked. */
static int check_revoked(authn *a, const jwt_claims *c, char *err, size_t errlen) {
    /* Ancestors share the token's tenant (Attenuate keeps it). */
    if (revocation_contains(a->revoked, c->tenant, c->jti)) {
        snprintf(err, errlen, "token %s was revoked", c->jti);
        return -1;
    }
    for (size_t i = 0; i < c->nanc; i++) {
        if (revocation_contains(a->revoked, c->tenant, c->anc[i])) {
            snprintf(err, errlen, "token %s was attenuated from token %s, which was revoked",
                     c->jti, c->anc[i]);
            return -1;
        }
    }
    if (c->parent && revocation_contains(a->revoked, c->tenant, c->parent)) {
        snprintf(err, errlen, "token %s was attenuated from token %s, which was revoked", c->jti,
                 c->parent);
        return -1;
    }
    return 0;
}

int authn_check_live(authn *a, const principal *p, char *err, size_t errlen) {
    const jwt_claims *c = principal_claims(p);
    if ((int64_t)time(NULL) - a->skew_s >= c->exp) {
        snprintf(err, errlen, "token %s expired", c->jti);
        return -1;
    }
    maybe_reload_keys(a);
    pthread_rwlock_rdlock(&a->keys_lock);
    int known = c->kid && jwks_find(a->keys, c->kid) != NULL;
    pthread_rwlock_unlock(&a->keys_lock);
    if (!known) {
        snprintf(err, errlen, "token %s was signed with key %s, no longer in the key set", c->jti,
                 c->kid ? c->kid : "?");
        return -1;
    }
    return check_revoked(a, c, err, errlen);
}

/* The token of an `authorization: Bearer <jwt>` value v[0..n), or NULL. */
static const char *bearer_token(const char *v, size_t n, size_t *len) {
    while (n && *v == ' ') v++, n--;
    if (n < 7 || strncasecmp(v, "bearer", 6) != 0 || v[6] != ' ') return NULL;
    v += 7, n -= 7;
    while (n && *v == ' ') v++, n--;
    while (n && v[n - 1] == ' ') n--;
    if (!n) return NULL;
    *len = n;
    return v;
}

static void list_scopes(const principal *p, char *out, size_t outlen) {
    const jwt_claims *c = principal_claims(p);
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < c->nscopes && used < outlen; i++)
        used += (size_t)snprintf(out + used, outlen - used, "%s%s", i ? " " : "", c->scopes[i]);
}

grpc_status_code authn_interceptor(rpc_call *call, void *arg) {
    authn *a = arg;
    const rpc_method *m = rpc_call_method(call);
    if (!m) return GRPC_STATUS_OK;
    int open = m->scope == NULL;
    if (open && a->open_infra) return GRPC_STATUS_OK;
    const char *needed = m->scope ? m->scope : "";

    size_t vlen = 0;
    const char *value = rpc_call_metadata_view(call, "authorization", &vlen);
    if (!value) {
        metrics_inc(&a->refused[REFUSED_MISSING]);
        rpc_call_set_error(call,
                           "missing capability token: send request metadata "
                           "`authorization: Bearer <jwt>`%s%s%s",
                           needed[0] ? " (" : "", needed[0] ? needed : "",
                           needed[0] ? " is needed)" : "");
        return GRPC_STATUS_UNAUTHENTICATED;
    }
    size_t len = 0;
    const char *token = bearer_token(value, vlen, &len);
    if (!token) {
        metrics_inc(&a->refused[REFUSED_MALFORMED]);
        rpc_call_set_error(call, "the authorization metadata must be `Bearer <jwt>`");
        return GRPC_STATUS_UNAUTHENTICATED;
    }
    maybe_reload_keys(a);
    int64_t now_s = (int64_t)time(NULL);
    principal *p = token_cache_get(a->cache, token, len, now_s);
    char why[512];
    metrics_inc(p ? &a->cache_hits : &a->cache_misses);
    if (!p) {
        grpc_status_code st;
        p = verify_and_cache(a, token, len, now_s, &st, why, sizeof why);
        if (!p) {
            if (st == GRPC_STATUS_UNAUTHENTICATED) metrics_inc(&a->refused[REFUSED_INVALID]);
            rpc_call_set_error(
                call, "%s%s", st == GRPC_STATUS_UNAUTHENTICATED ? "invalid capability token: " : "",
                why);
            return st;
        }
    }
    if (check_revoked(a, principal_claims(p), why, sizeof why) != 0) {
        metrics_inc(&a->refused[REFUSED_REVOKED]);
        principal_unref(p);
        rpc_call_set_error(call, "%s", why);
        return GRPC_STATUS_UNAUTHENTICATED;
    }
    /* From here on the call owns the reference (released with the call),
     * so handlers and the audit observer can read the principal. */
    rpc_call_set_principal(call, p, principal_release);
    if (a->bind_to_client_certificate && !rpc_call_client_identity_is(call, principal_sub(p))) {
        metrics_inc(&a->refused[REFUSED_CERTIFICATE]);
        rpc_call_set_error(call,
                           "the token's sub \"%s\" is not an identity of the client certificate "
                           "(\"%s\"): under --tls-client-identity=sub a token is accepted only "
                           "from the client it was issued to",
                           principal_sub(p), rpc_call_client_identity(call));
        return GRPC_STATUS_UNAUTHENTICATED;
    }
    if (principal_scope(p, needed) == PRINCIPAL_DENY) {
        metrics_inc(&a->refused[REFUSED_SCOPE]);
        char have[512];
        list_scopes(p, have, sizeof have);
        rpc_call_set_error(call, "%s needs scope `%s`; the token has: %s", m->path, needed, have);
        return GRPC_STATUS_PERMISSION_DENIED;
    }
    return GRPC_STATUS_OK;
}

const principal *authn_principal(const rpc_call *call) { return rpc_call_principal(call); }

void authn_metrics_collect(strbuf *out, void *arg) {
    authn *a = arg;
    metrics_family(out, "memoryd_token_cache_lookups_total", "counter",
                   "Lookups of presented tokens in the verified-token cache, by result (a miss "
                   "verifies the signature).");
    metrics_sample_u64(out, "memoryd_token_cache_lookups_total", "result=\"hit\"",
                       metrics_get(&a->cache_hits));
    metrics_sample_u64(out, "memoryd_token_cache_lookups_total", "result=\"miss\"",
                       metrics_get(&a->cache_misses));
    metrics_family(out, "memoryd_token_cache_entries", "gauge", "Verified tokens cached now.");
    metrics_sample_u64(out, "memoryd_token_cache_entries", NULL, token_cache_count(a->cache));
    metrics_family(out, "memoryd_auth_refusals_total", "counter",
                   "Calls refused by authentication or authorization, by reason: no token, a "
                   "malformed header, a token that does not verify, a revoked token, a token "
                   "from a client whose certificate does not name its sub, a missing scope.");
    metrics_samples_by_label(out, "memoryd_auth_refusals_total", "reason", refused_names,
                             a->refused, REFUSED_KINDS);
    if (a->revoked) {
        metrics_family(out, "memoryd_revoked_tokens", "gauge",
                       "Revoked tokens this replica knows of (still unexpired), from PostgreSQL.");
        metrics_sample_u64(out, "memoryd_revoked_tokens", NULL, revocation_count(a->revoked));
    }
}

void authn_revoke_sql(pgq_sql *b, const char *jti, const principal *by, const char *reason) {
    /* The caller's own token: its expiry is known here. */
    int64_t exp_s = strcmp(jti, principal_jti(by)) == 0 ? principal_claims(by)->exp : 0;
    revocation_store_sql(b, jti, principal_sub(by), principal_tenant(by), reason, exp_s);
}

int authn_revoked(authn *a, const PGresult *res, const principal *by, const char *jti,
                  int64_t *revoked_at_s) {
    return revocation_stored(a->revoked, res, principal_tenant(by), jti, revoked_at_s);
}

EVP_PKEY *authn_signing_key(const authn *a, const char **kid) {
    if (kid) *kid = a->signing_kid;
    return a->signing_key;
}

const char *authn_issuer(const authn *a) { return a->issuer; }
int authn_skew_s(const authn *a) { return a->skew_s; }
