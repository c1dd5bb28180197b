/* authn: token authentication and scope authorization for every call; see
 * authn.h. */
#include "service/auth/authn.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "service/auth/jwk_private.h"
#include "service/auth/revocation.h"
#include "service/auth/token_cache.h"
#include "service/core/log.h"

#define KEY_RELOAD_MIN_INTERVAL_S 1

struct authn {
    char *jwks_path;
    char *issuer;
    int skew_s;
    int open_infra;
    pthread_rwlock_t keys_lock; /* guards keys, keys_mtime, keys_checked */
    jwks *keys;
    struct timespec keys_mtime;
    int64_t keys_checked_s;
    EVP_PKEY *signing_key;
    char *signing_kid;
    token_cache *cache;
    revocation *revoked;
};

static int file_mtime(const char *path, struct timespec *out) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    *out = st.st_mtim;
    return 0;
}

int authn_create(const authn_options *o, pg_pool *pg, authn **out, char *err, size_t errlen) {
    *out = NULL;
    authn *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    pthread_rwlock_init(&a->keys_lock, NULL);
    a->skew_s = o->skew_s < 0 ? 0 : o->skew_s;
    a->open_infra = o->open_infra;
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
    file_mtime(a->jwks_path, &a->keys_mtime);
    a->keys_checked_s = (int64_t)time(NULL);
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
    if (revocation_create(pg, o->revocation_poll_ms, &a->revoked, why, sizeof why) != 0) {
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
    free(a);
}

/* Key rotation without a restart: when a token names a kid we do not
 * know, re-read the JWKS file if it changed (at most once a second). */
static int maybe_reload_keys(authn *a, int64_t now_s) {
    pthread_rwlock_wrlock(&a->keys_lock);
    int reloaded = 0;
    struct timespec mt;
    if (now_s - a->keys_checked_s >= KEY_RELOAD_MIN_INTERVAL_S &&
        file_mtime(a->jwks_path, &mt) == 0 &&
        (mt.tv_sec != a->keys_mtime.tv_sec || mt.tv_nsec != a->keys_mtime.tv_nsec)) {
        jwks *fresh = NULL;
        char why[512];
        if (jwks_load_file(a->jwks_path, &fresh, why, sizeof why) == 0) {
            jwks_free(a->keys);
            a->keys = fresh;
            reloaded = 1;
            log_fields(LOG_INFO, "token keys reloaded", LOG_F_STR, "jwks", a->jwks_path, LOG_F_INT,
                       "keys", (int64_t)jwks_count(fresh), LOG_F_END);
        } else {
            log_fields(LOG_WARN,
                       "token keys file changed but cannot be used; keeping the old "
                       "keys",
                       LOG_F_STR, "error", why, LOG_F_END);
        }
        a->keys_mtime = mt;
    }
    a->keys_checked_s = now_s;
    pthread_rwlock_unlock(&a->keys_lock);
    return reloaded;
}

static int verify(authn *a, const char *token, size_t len, int64_t now_s, jwt_claims **claims,
                  char *err, size_t errlen) {
    pthread_rwlock_rdlock(&a->keys_lock);
    int rc = jwt_verify(a->keys, token, len, now_s, a->skew_s, claims, err, errlen);
    pthread_rwlock_unlock(&a->keys_lock);
    if (rc == JWT_EKID && maybe_reload_keys(a, now_s)) {
        pthread_rwlock_rdlock(&a->keys_lock);
        rc = jwt_verify(a->keys, token, len, now_s, a->skew_s, claims, err, errlen);
        pthread_rwlock_unlock(&a->keys_lock);
    }
    return rc;
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
        rpc_call_set_error(call, "the authorization metadata must be `Bearer <jwt>`");
        return GRPC_STATUS_UNAUTHENTICATED;
    }
    int64_t now_s = (int64_t)time(NULL);
    principal *p = token_cache_get(a->cache, token, len, now_s);
    char why[512];
    if (!p) {
        jwt_claims *claims = NULL;
        int rc = verify(a, token, len, now_s, &claims, why, sizeof why);
        if (rc != JWT_OK) {
            rpc_call_set_error(call, "invalid capability token: %s", why);
            return GRPC_STATUS_UNAUTHENTICATED;
        }
        int64_t valid_until = claims->exp + a->skew_s;
        p = principal_create(claims);
        if (!p) {
            rpc_call_set_error(call, "out of memory");
            return GRPC_STATUS_RESOURCE_EXHAUSTED;
        }
        token_cache_put(a->cache, token, len, p, valid_until);
    }
    if (check_revoked(a, principal_claims(p), why, sizeof why) != 0) {
        principal_unref(p);
        rpc_call_set_error(call, "%s", why);
        return GRPC_STATUS_UNAUTHENTICATED;
    }
    /* From here on the call owns the reference (released with the call),
     * so handlers and the audit observer can read the principal. */
    rpc_call_set_principal(call, p, principal_release);
    if (principal_scope(p, needed) == PRINCIPAL_DENY) {
        char have[512];
        list_scopes(p, have, sizeof have);
        rpc_call_set_error(call, "%s needs scope `%s`; the token has: %s", m->path, needed, have);
        return GRPC_STATUS_PERMISSION_DENIED;
    }
    return GRPC_STATUS_OK;
}

const principal *authn_principal(const rpc_call *call) { return rpc_call_principal(call); }

void authn_revoke_sql(pgq_sql *b, const char *jti, const principal *by, const char *reason) {
    revocation_store_sql(b, jti, principal_sub(by), principal_tenant(by), reason);
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
