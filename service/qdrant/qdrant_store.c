/* qdrant_store: the Qdrant backend: its handle, Qdrant collection names,
 * collections (in the catalog and in Qdrant), open; the point operations
 * are in qdrant_store_points.c, the bodies in qdrant_json, the HTTP in
 * qdrant_http. See the header for the contract. */
#include "service/qdrant/qdrant_store.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/clock.h"
#include "service/core/log.h"
#include "service/core/text.h"
#include "service/qdrant/qdrant_store_internal.h"
#include "service/store/pgq.h"
#include "service/tier/tier_sql.h"
#include "service/vstore/vstore_catalog.h"

static int64_t mono_ms(void) { return clock_mono_ms(NULL); }

/* Logs failures that are ours or the backend's, not the caller's: an
 * input Qdrant refused, or the call's own deadline running out before we
 * sent anything, is not news for the operator. */
int qdrant_logged(const char *op, int rc, const char *err) {
    if (rc == STATUS_ETIMEOUT && strncmp(err, "deadline passed", 15) == 0) return rc;
    if (rc == STATUS_EINTERNAL)
        log_fields(LOG_ERROR, "qdrant call failed", LOG_F_STR, "op", op, LOG_F_STR, "error", err,
                   LOG_F_END);
    else if (rc == STATUS_EUNAVAILABLE || rc == STATUS_ETIMEOUT || rc == STATUS_EAUTH)
        log_fields(LOG_WARN, "qdrant call failed", LOG_F_STR, "op", op, LOG_F_STR, "error", err,
                   LOG_F_END);
    return rc;
}

/* The server's version, detecting it first if no call has reached Qdrant
 * yet (it was down at open). */
int qdrant_ready(qdrant *q, tier_ctx *c, qdrant_json_version *v) {
    char why[400];
    int rc = qdrant_http_version(q->http, c->deadline_ms, qdrant_http_timeout_ms(q->http), v, why,
                                 sizeof why);
    if (rc == STATUS_OK) return STATUS_OK;
    /* A refused key and the call's own deadline keep their codes; anything
     * else means there is no usable Qdrant yet. */
    if (rc == STATUS_EAUTH || rc == STATUS_ENOMEM ||
        (rc == STATUS_ETIMEOUT && c->deadline_ms != INT64_MAX && mono_ms() >= c->deadline_ms))
        tier_fail(c, rc, "%s", why);
    else if (strncmp(why, "qdrant at ", 10) == 0) rc = tier_fail(c, STATUS_EUNAVAILABLE, "%s", why);
    else
        rc = tier_fail(c, STATUS_EUNAVAILABLE, "qdrant at %s unreachable: %s",
                       qdrant_http_url(q->http), why);
    return qdrant_logged("detect", rc, c->err);
}

/* ------------------------------------------------------------------ */
/* names                                                                */

static int name_ok(const char *s, size_t max) {
    size_t n = strlen(s);
    if (n > max) return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch == '-'))
            return 0;
    }
    return 1;
}

/* The tenant is hashed: any text is a valid tenant, few are valid Qdrant
 * collection names, and 64 bits keep collisions out of reach for any
 * realistic number of tenants. */
int qdrant_store_collection_name(const char *prefix, const char *tenant, const char *name,
                                 char *out) {
    if (!prefix) prefix = "memoryd_";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (!EVP_Digest(tenant, strlen(tenant), md, &mdlen, EVP_sha256(), NULL) || mdlen < 8) return -1;
    char hex[17];
    for (int i = 0; i < 8; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
    int n = snprintf(out, EPISODIC_QDRANT_NAME_MAX, "%s%s_%s", prefix, hex, name);
    return n < 0 || n >= EPISODIC_QDRANT_NAME_MAX ? -1 : 0;
}

/* The Qdrant name of collection name in the caller's tenant. */
int qdrant_qname(qdrant *q, tier_ctx *c, const char *name, char *out) {
    if (!name_ok(name, VS_NAME_MAX) || !name[0] ||
        qdrant_store_collection_name(q->prefix, principal_tenant(c->p), name, out) != 0)
        return tier_fail(c, STATUS_EINVALID, "collection name is not 1..%d of [A-Za-z0-9_-]",
                         VS_NAME_MAX);
    return STATUS_OK;
}

/* What every point operation starts with: the server's version known (it
 * picks the endpoints) and the collection's Qdrant name in qn. */
int qdrant_target(vstore *vs, tier_ctx *c, const char *name, qtarget *t) {
    t->q = (qdrant *)vs;
    t->name = name;
    int rc = qdrant_ready(t->q, c, &t->v);
    return rc == STATUS_OK ? qdrant_qname(t->q, c, name, t->qn) : rc;
}

/* The catalog has the collection, Qdrant does not: an inconsistency an
 * operator has to look at, so logged as an error. */
int qdrant_missing(tier_ctx *c, const char *qn, const char *name) {
    char said[sizeof c->err];
    memcpy(said, c->err, sizeof said); /* Qdrant's own answer */
    tier_fail(c, STATUS_ENOTFOUND,
              "qdrant has no collection %s for collection %s of memoryd's catalog (created "
              "outside memoryd's catalog, or dropped in qdrant?): %.200s",
              qn, name, said);
    log_fields(LOG_ERROR, "qdrant collection missing", LOG_F_STR, "collection", qn, LOG_F_END);
    return STATUS_ENOTFOUND;
}

/* call() for an operation on a collection's points: a 404 means the
 * Qdrant collection is missing. */
typedef struct {
    const vs_collection *col;
    int (*fn)(void *arg);
    void *arg;
} serialized_args;

/* The lock lives as long as this transaction, which holds nothing else:
 * pgq_run ends the session with a ROLLBACK that releases it. */
static int serialized_in(pgq_session *ss, tier_ctx *c, void *arg) {
    (void)c;
    serialized_args *s = arg;
    pgq_sql b = {0};
    pgq_sql_add(&b,
                "SELECT pg_advisory_xact_lock(hashtextextended('memoryd qdrant write ' ||"
                " $%d::text, 0))",
                pgq_int8(&b, s->col->cid));
    PGresult *r;
    int rc = pgq_pipeline(ss, "waiting for the collection's other writers", "BEGIN", &b, 0, &r);
    if (rc != STATUS_OK) return rc;
    PQclear(r);
    return s->fn(s->arg);
}

int qdrant_serialized(qdrant *q, tier_ctx *c, const vs_collection *col, int (*fn)(void *arg),
                      void *arg) {
    serialized_args s = {col, fn, arg};
    return tier_sql_run(q->pg, c, 0, serialized_in, &s);
}

int qdrant_points_call(const qtarget *t, tier_ctx *c, const char *op, const char *method,
                       const char *suffix, const char *body, size_t blen, http_resp *r) {
    char path[QDRANT_PATH_MAX];
    snprintf(path, sizeof path, "/collections/%s/points%s", t->qn, suffix);
    int rc = qdrant_http_call(t->q->http, method, path, body, blen, c->deadline_ms, c->cancel,
                              c->traceparent, r, c->err, sizeof c->err);
    if (rc == STATUS_ENOTFOUND) return qdrant_missing(c, t->qn, t->name);
    return qdrant_logged(op, rc, c->err);
}

/* ------------------------------------------------------------------ */
/* collections                                                          */

typedef struct hook_arg {
    qdrant *q;
    qdrant_json_version version;
} hook_arg;

/* After a 409: a Qdrant collection of that name exists though the catalog
 * has no row for it — left behind when a create failed after the Qdrant
 * PUT but before the catalog's COMMIT. Taken over when it has the right
 * shape and no points; anything else is refused rather than adopted. */
static int adopt(qdrant *q, tier_ctx *c, const vs_collection *col, const char *qn) {
    char path[QDRANT_PATH_MAX], why[400];
    http_resp r;
    int dims = 0, dist = 0;
    int64_t n = -1;
    snprintf(path, sizeof path, "/collections/%s", qn);
    int rc = qdrant_http_call(q->http, "GET", path, NULL, 0, c->deadline_ms, c->cancel,
                              c->traceparent, &r, why, sizeof why);
    if (rc == STATUS_OK) {
        rc = qdrant_json_parse_collection(r.body, r.len, &dims, &dist, why, sizeof why);
        http_resp_free(&r);
    }
    if (rc == STATUS_OK) {
        static const char count_all[] = "{\"exact\":true}";
        snprintf(path, sizeof path, "/collections/%s/points/count", qn);
        rc = qdrant_http_call(q->http, "POST", path, count_all, sizeof count_all - 1,
                              c->deadline_ms, c->cancel, c->traceparent, &r, why, sizeof why);
        if (rc == STATUS_OK) {
            rc = qdrant_json_parse_count(r.body, r.len, &n, why, sizeof why);
            http_resp_free(&r);
        }
    }
    if (rc != STATUS_OK) return qdrant_logged("create", tier_fail(c, rc, "%s", why), c->err);
    if (dims != col->dims || dist != col->distance || n != 0)
        return tier_fail(c, STATUS_EEXISTS,
                         "qdrant already has a collection %s that memoryd's catalog does not list "
                         "(%d dims, %s, %" PRId64 " points); remove it in qdrant to create %s",
                         qn, dims,
                         qdrant_json_distance_name(dist) ? qdrant_json_distance_name(dist) : "?", n,
                         col->name);
    log_fields(LOG_WARN, "qdrant collection left from a failed create taken over", LOG_F_STR,
               "collection", qn, LOG_F_END);
    return STATUS_OK;
}

static int drop(qdrant *q, tier_ctx *c, const char *qn, char *err, size_t errlen) {
    char path[QDRANT_PATH_MAX];
    snprintf(path, sizeof path, "/collections/%s", qn);
    http_resp r;
    int rc = qdrant_http_call(q->http, "DELETE", path, NULL, 0, c->deadline_ms, c->cancel,
                              c->traceparent, &r, err, errlen);
    if (rc == STATUS_ENOTFOUND) return STATUS_OK; /* already gone: what we wanted */
    if (rc != STATUS_OK) return rc;
    int deleted = 0;
    rc = qdrant_json_parse_bool(r.body, r.len, &deleted, err, errlen);
    http_resp_free(&r);
    return rc;
}

/* Runs inside the catalog's transaction: a failure here rolls the row
 * back, so the Qdrant side is undone before returning one. */
static int create_hook(tier_ctx *c, const vs_collection *col, void *arg) {
    hook_arg *h = arg;
    qdrant *q = h->q;
    char qn[EPISODIC_QDRANT_NAME_MAX], path[QDRANT_PATH_MAX];
    int rc = qdrant_qname(q, c, col->name, qn);
    if (rc != STATUS_OK) return rc;

    char *body = NULL;
    size_t blen = 0;
    rc = qdrant_json_create_collection(col->dims, col->distance, &body, &blen, c->err,
                                       sizeof c->err);
    if (rc != STATUS_OK) return rc;
    snprintf(path, sizeof path, "/collections/%s", qn);
    http_resp r;
    rc = qdrant_http_call(q->http, "PUT", path, body, blen, c->deadline_ms, c->cancel,
                          c->traceparent, &r, c->err, sizeof c->err);
    free(body);
    if (rc == STATUS_EEXISTS) {
        rc = adopt(q, c, col, qn);
    } else if (rc == STATUS_OK) {
        int created = 0;
        rc = qdrant_json_parse_bool(r.body, r.len, &created, c->err, sizeof c->err);
        http_resp_free(&r);
        if (rc == STATUS_OK && !created)
            rc = tier_fail(c, STATUS_EINTERNAL, "qdrant answered false to creating collection %s",
                           qn);
    }
    if (rc != STATUS_OK) return qdrant_logged("create", rc, c->err);

    /* The diode filters on tenant and owner in every read, a search's
     * time window (RecallOptions) on the update time: all indexed, so
     * Qdrant plans a filtered search knowing how much each keeps. */
    static const struct {
        const char *field;
        int kind;
    } indexes[] = {{"memoryd.tenant", QDRANT_JSON_INDEX_TENANT},
                   {"memoryd.owner", QDRANT_JSON_INDEX_KEYWORD},
                   {"memoryd.updated_us", QDRANT_JSON_INDEX_INTEGER}};
    snprintf(path, sizeof path, "/collections/%s/index?wait=true", qn);
    for (size_t i = 0; i < sizeof indexes / sizeof indexes[0] && rc == STATUS_OK; i++) {
        rc = qdrant_json_payload_index(indexes[i].field, indexes[i].kind, &h->version, &body, &blen,
                                       c->err, sizeof c->err);
        if (rc != STATUS_OK) break;
        rc = qdrant_http_call(q->http, "PUT", path, body, blen, c->deadline_ms, c->cancel,
                              c->traceparent, &r, c->err, sizeof c->err);
        free(body);
        if (rc == STATUS_OK) {
            rc = qdrant_json_parse_update(r.body, r.len, c->err, sizeof c->err);
            http_resp_free(&r);
        }
    }
    if (rc != STATUS_OK) {
        qdrant_logged("create index", rc, c->err);
        char why[256];
        if (drop(q, c, qn, why, sizeof why) != STATUS_OK)
            log_fields(LOG_ERROR, "qdrant collection left behind after a failed create", LOG_F_STR,
                       "collection", qn, LOG_F_STR, "error", why, LOG_F_END);
    }
    return rc;
}

static int delete_hook(tier_ctx *c, const vs_collection *col, void *arg) {
    qdrant *q = arg;
    char qn[EPISODIC_QDRANT_NAME_MAX];
    int rc = qdrant_qname(q, c, col->name, qn);
    if (rc != STATUS_OK) return rc;
    return qdrant_logged("delete collection", drop(q, c, qn, c->err, sizeof c->err), c->err);
}

static int qdrant_store_create_collection(vstore *vs, tier_ctx *c, const char *name, int dims,
                                          int distance, const char *model, vs_collection *out) {
    qdrant *q = (qdrant *)vs;
    if (dims == 0)
        return tier_fail(c, STATUS_EPRECONDITION,
                         "dims: 0 takes the length of the server's embedder model, and this "
                         "server has no embedder (--embedder-url); the Qdrant backend needs "
                         "dims");
    hook_arg h = {.q = q};
    int rc = qdrant_ready(q, c, &h.version);
    if (rc != STATUS_OK) return rc;
    return vstore_catalog_create(q->pg, c, name, dims, distance, model, create_hook, &h, out);
}

static int qdrant_store_get_collection(vstore *vs, tier_ctx *c, const char *name,
                                       vs_collection *out) {
    return vstore_catalog_get(((qdrant *)vs)->pg, c, name, out);
}

static int qdrant_store_list_collections(vstore *vs, tier_ctx *c, const char *after, size_t limit,
                                         vs_collection **out, size_t *n) {
    return vstore_catalog_list(((qdrant *)vs)->pg, c, after, limit, out, n);
}

static int qdrant_store_delete_collection(vstore *vs, tier_ctx *c, const char *name) {
    qdrant *q = (qdrant *)vs;
    qdrant_json_version v;
    int rc = qdrant_ready(q, c, &v);
    if (rc != STATUS_OK) return rc;
    return vstore_catalog_delete(q->pg, c, name, delete_hook, q);
}

static int qdrant_store_probe(vstore *vs) { return qdrant_http_probe(((qdrant *)vs)->http); }

static int qdrant_store_register_metrics(vstore *vs) {
    return backend_metrics_add("qdrant", "http", qdrant_http_stats(((qdrant *)vs)->http),
                               BACKEND_HAS_DURATION, NULL, NULL);
}

static void qdrant_store_free(vstore *vs) {
    qdrant *q = (qdrant *)vs;
    if (!q) return;
    qdrant_http_free(q->http);
    free(q->prefix);
    free(q);
}

static const vstore_ops qdrant_ops = VSTORE_OPS("qdrant", qdrant_store);

/* ------------------------------------------------------------------ */
/* open                                                                 */

int qdrant_store_open(pg_pool *pg, const qdrant_options *o, vstore **out, char *err,
                      size_t errlen) {
    if (!o || !o->url || !o->url[0]) return text_fail(err, errlen, -1, "qdrant: no URL configured");
    if (strncmp(o->url, "http://", 7) != 0 && strncmp(o->url, "https://", 8) != 0)
        return text_fail(err, errlen, -1, "qdrant URL must start with http:// or https://");
    const char *prefix = o->collection_prefix ? o->collection_prefix : "memoryd_";
    if (!name_ok(prefix, 64))
        return text_fail(err, errlen, -1,
                         "qdrant collection prefix must be 0..64 of [A-Za-z0-9_-]");
    if (o->api_key && strpbrk(o->api_key, "\r\n"))
        return text_fail(err, errlen, -1, "qdrant API key holds a line break");
    qdrant *q = calloc(1, sizeof *q);
    if (!q || !(q->prefix = strdup(prefix))) {
        free(q);
        return text_fail(err, errlen, -1, "out of memory");
    }
    q->base.ops = &qdrant_ops;
    q->pg = pg;
    if (qdrant_http_create(o->url, o->api_key, o->timeout_ms, o->connect_timeout_ms, &q->http, err,
                           errlen) != STATUS_OK) {
        qdrant_store_free(&q->base);
        return -1;
    }
    qdrant_json_version v;
    char why[400];
    if (qdrant_http_version(q->http, INT64_MAX, qdrant_http_timeout_ms(q->http), &v, why,
                            sizeof why) != STATUS_OK)
        log_fields(LOG_WARN, "qdrant not reachable at start; retrying on each call", LOG_F_STR,
                   "url", qdrant_http_url(q->http), LOG_F_STR, "error", why, LOG_F_END);
    *out = &q->base;
    return 0;
}
