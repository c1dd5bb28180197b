/* episodic_qdrant: the Qdrant backend's HTTP side — libcurl transfers,
 * error mapping, version detection — and the vstore operations built from
 * qdrant_json's bodies and parsers. See the header for the contract. */
#include "service/episodic/episodic_qdrant.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/core/log.h"
#include "service/episodic/episodic_catalog.h"
#include "service/episodic/qdrant_json.h"

#define QDRANT_MAX_RESPONSE ((size_t)64 << 20) /* larger answers are STATUS_EINTERNAL */
#define QDRANT_IDLE_HANDLES 32                 /* easy handles kept for reuse */
#define QDRANT_SCROLL_PAGE 256                 /* points per page in delete_filter */
#define QDRANT_BODY_TARGET ((size_t)16 << 20)  /* upsert bodies are kept below this */
#define QDRANT_PATH_MAX 512

/* Connection reuse: a pool of CURL easy handles (mutex + free list) rather
 * than a CURLSH sharing one connection cache. An easy handle keeps its own
 * keep-alive connections, so a worker that takes a handle reuses the
 * connection of the previous call made with it, and no libcurl state is
 * ever touched by two threads at once: nothing to lock during a transfer
 * (CURLSH needs lock callbacks that libcurl takes around every use of the
 * shared cache). The pool grows to the number of concurrent calls; beyond
 * QDRANT_IDLE_HANDLES idle handles, returned ones are closed. */
typedef struct qdrant {
    vstore base;
    pg_pool *pg;
    char *url;       /* without a trailing '/' */
    char *shown_url; /* url with any user:password@ masked, for logs and messages */
    char *prefix;
    int timeout_ms, connect_timeout_ms;
    struct curl_slist *headers; /* read-only after open: shared by every handle */
    pthread_mutex_t mu;         /* guards everything below */
    int have_version;
    qj_version version;
    CURL *idle[QDRANT_IDLE_HANDLES];
    int nidle;
} qdrant;

/* An answer: status and body (NUL-terminated for messages). */
typedef struct resp {
    long status;
    char *body;
    size_t len, cap;
    int too_big;
} resp;

static void resp_free(resp *r) {
    free(r->body);
    memset(r, 0, sizeof *r);
}

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return code;
}

/* ------------------------------------------------------------------ */
/* transfers                                                            */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_OK;
/* curl_global_init is not thread-safe in every libcurl build. */
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static CURL *handle_take(qdrant *q) {
    CURL *h = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->nidle > 0) h = q->idle[--q->nidle];
    pthread_mutex_unlock(&q->mu);
    return h ? h : curl_easy_init();
}

/* The reset drops options pointing into the finished call's stack (error
 * buffer, response) but keeps the live connection for the next call. */
static void handle_give(qdrant *q, CURL *h, int broken) {
    if (!h) return;
    if (broken) {
        curl_easy_cleanup(h);
        return;
    }
    curl_easy_reset(h);
    pthread_mutex_lock(&q->mu);
    if (q->nidle < QDRANT_IDLE_HANDLES) {
        q->idle[q->nidle++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&q->mu);
    if (h) curl_easy_cleanup(h);
}

static size_t on_data(char *p, size_t size, size_t nmemb, void *arg) {
    resp *r = arg;
    size_t n = size * nmemb;
    if (n > QDRANT_MAX_RESPONSE - r->len) {
        r->too_big = 1;
        return 0; /* aborts the transfer (CURLE_WRITE_ERROR) */
    }
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n + 1) cap *= 2;
        char *b = realloc(r->body, cap);
        if (!b) return 0;
        r->body = b;
        r->cap = cap;
    }
    memcpy(r->body + r->len, p, n);
    r->len += n;
    r->body[r->len] = '\0';
    return n;
}

/* One HTTP exchange. STATUS_OK when an answer arrived, whatever its status
 * (r->status, r->body); otherwise the transport failure, mapped: a passed
 * deadline or a curl timeout STATUS_ETIMEOUT, connection errors
 * STATUS_EUNAVAILABLE, an oversize answer STATUS_EINTERNAL. timeout_ms bounds this
 * exchange besides the deadline. */
static int http(qdrant *q, const char *method, const char *path, const char *body, size_t blen,
                int64_t deadline_ms, long timeout_ms, resp *r, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    if (deadline_ms != INT64_MAX) {
        int64_t left = deadline_ms - mono_ms();
        if (left <= 0)
            return fail(err, errlen, STATUS_ETIMEOUT, "deadline passed before calling qdrant (%s %s)",
                        method, path);
        if (left < timeout_ms) timeout_ms = (long)left;
    }
    long connect_ms = q->connect_timeout_ms < timeout_ms ? q->connect_timeout_ms : timeout_ms;

    size_t ulen = strlen(q->url) + strlen(path) + 1;
    char *url = malloc(ulen);
    CURL *h = url ? handle_take(q) : NULL;
    if (!h) {
        free(url);
        return fail(err, errlen, STATUS_ENOMEM, "out of memory calling qdrant");
    }
    snprintf(url, ulen, "%s%s", q->url, path);

    char cerr[CURL_ERROR_SIZE];
    cerr[0] = '\0';
    int bad = 0;
    bad |= curl_easy_setopt(h, CURLOPT_URL, url) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect_ms) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_HTTPHEADER, q->headers) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_USERAGENT, "memoryd") != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_WRITEDATA, r) != CURLE_OK;
    if (body) {
        bad |= curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_POSTFIELDS, body) != CURLE_OK;
    }
    if (strcmp(method, "GET") == 0)
        bad |= curl_easy_setopt(h, CURLOPT_HTTPGET, 1L) != CURLE_OK;
    else if (strcmp(method, "POST") != 0)
        bad |= curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method) != CURLE_OK;
    if (bad) {
        handle_give(q, h, 1);
        free(url);
        return fail(err, errlen, STATUS_EINTERNAL, "libcurl refused an option for %s %s", method, path);
    }

    CURLcode cc = curl_easy_perform(h);
    free(url);
    if (cc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    handle_give(q, h, cc != CURLE_OK);
    if (cc == CURLE_OK) return STATUS_OK;

    const char *why = cerr[0] ? cerr : curl_easy_strerror(cc);
    int rc;
    if (r->too_big)
        rc = fail(err, errlen, STATUS_EINTERNAL, "qdrant's answer to %s %s exceeds %zu MiB", method,
                  path, QDRANT_MAX_RESPONSE >> 20);
    else if (cc == CURLE_OPERATION_TIMEDOUT)
        rc = fail(err, errlen, STATUS_ETIMEOUT, "qdrant did not answer %s %s within %ld ms", method,
                  path, timeout_ms);
    else if (cc == CURLE_OUT_OF_MEMORY || cc == CURLE_WRITE_ERROR)
        rc = fail(err, errlen, STATUS_ENOMEM, "out of memory reading qdrant's answer");
    else
        rc = fail(err, errlen, STATUS_EUNAVAILABLE, "qdrant at %s unreachable: %s", q->shown_url, why);
    resp_free(r);
    return rc;
}

/* Maps a non-2xx answer onto a VS code with Qdrant's own text. */
static int http_error(const resp *r, const char *method, const char *path, char *err,
                      size_t errlen) {
    char text[320];
    qj_error_text(r->body, r->len, text, sizeof text);
    long st = r->status;
    if (st == 404) return fail(err, errlen, STATUS_ENOTFOUND, "qdrant: not found (HTTP 404): %s", text);
    if (st == 409)
        return fail(err, errlen, STATUS_EEXISTS, "qdrant: already exists (HTTP 409): %s", text);
    if (st == 400 || st == 413 || st == 422)
        return fail(err, errlen, STATUS_EINVALID, "qdrant refused %s %s (HTTP %ld): %s", method, path,
                    st, text);
    if (st == 401 || st == 403)
        return fail(err, errlen, STATUS_EAUTH, "qdrant refused the API key (HTTP %ld): %s", st, text);
    if (st == 408)
        return fail(err, errlen, STATUS_ETIMEOUT, "qdrant timed out on %s %s (HTTP 408): %s", method,
                    path, text);
    if (st == 429 || (st >= 500 && st <= 599))
        return fail(err, errlen, STATUS_EUNAVAILABLE, "qdrant is unavailable (HTTP %ld): %s", st, text);
    return fail(err, errlen, STATUS_EINTERNAL, "unexpected HTTP %ld from qdrant for %s %s: %s", st,
                method, path, text);
}

/* http() plus the status check: STATUS_OK only for a 2xx answer (r then holds
 * it; the caller frees it with resp_free). On error r is freed, except its
 * status, which callers read to tell a 404 or 409 apart. */
static int call(qdrant *q, const char *method, const char *path, const char *body, size_t blen,
                int64_t deadline_ms, resp *r, char *err, size_t errlen) {
    int rc = http(q, method, path, body, blen, deadline_ms, q->timeout_ms, r, err, errlen);
    if (rc != STATUS_OK) return rc;
    if (r->status >= 200 && r->status <= 299) return STATUS_OK;
    rc = http_error(r, method, path, err, errlen);
    long st = r->status;
    resp_free(r);
    r->status = st;
    return rc;
}

/* Logs failures that are ours or the backend's, not the caller's: an
 * input Qdrant refused, or the call's own deadline running out before we
 * sent anything, is not news for the operator. */
static int logged(const char *op, int rc, const char *err) {
    if (rc == STATUS_ETIMEOUT && strncmp(err, "deadline passed", 15) == 0) return rc;
    if (rc == STATUS_EINTERNAL)
        log_fields(LOG_ERROR, "qdrant call failed", LOG_F_STR, "op", op, LOG_F_STR, "error", err,
                   LOG_F_END);
    else if (rc == STATUS_EUNAVAILABLE || rc == STATUS_ETIMEOUT || rc == STATUS_EAUTH)
        log_fields(LOG_WARN, "qdrant call failed", LOG_F_STR, "op", op, LOG_F_STR, "error", err,
                   LOG_F_END);
    return rc;
}

/* ------------------------------------------------------------------ */
/* version                                                              */

static int detect(qdrant *q, int64_t deadline_ms, long timeout_ms, qj_version *v, char *err,
                  size_t errlen) {
    resp r;
    int rc = http(q, "GET", "/", NULL, 0, deadline_ms, timeout_ms, &r, err, errlen);
    if (rc != STATUS_OK) return rc;
    if (r.status < 200 || r.status > 299) {
        rc = http_error(&r, "GET", "/", err, errlen);
        resp_free(&r);
        return rc;
    }
    rc = qj_parse_version(r.body, r.len, v, err, errlen);
    resp_free(&r);
    return rc;
}

static void version_set(qdrant *q, const qj_version *v) {
    pthread_mutex_lock(&q->mu);
    int first = !q->have_version;
    q->version = *v;
    q->have_version = 1;
    pthread_mutex_unlock(&q->mu);
    if (first) {
        char vt[48];
        snprintf(vt, sizeof vt, "%d.%d.%d", v->major, v->minor, v->patch);
        log_fields(LOG_INFO, "qdrant backend connected", LOG_F_STR, "url", q->shown_url, LOG_F_STR,
                   "version", vt, LOG_F_STR, "search_api",
                   qj_version_at_least(v, 1, 10) ? "query" : "search", LOG_F_END);
    }
}

/* The server's version, detecting it first if no call has reached Qdrant
 * yet (it was down at open). */
static int ready(qdrant *q, tier_ctx *c, qj_version *v) {
    pthread_mutex_lock(&q->mu);
    int have = q->have_version;
    if (have) *v = q->version;
    pthread_mutex_unlock(&q->mu);
    if (have) return STATUS_OK;
    char why[400];
    int rc = detect(q, c->deadline_ms, q->timeout_ms, v, why, sizeof why);
    if (rc == STATUS_OK) {
        version_set(q, v);
        return STATUS_OK;
    }
    /* A refused key and the call's own deadline keep their codes; anything
     * else means there is no usable Qdrant yet. */
    if (rc == STATUS_EAUTH || rc == STATUS_ENOMEM ||
        (rc == STATUS_ETIMEOUT && c->deadline_ms != INT64_MAX && mono_ms() >= c->deadline_ms))
        tier_fail(c, rc, "%s", why);
    else if (strncmp(why, "qdrant at ", 10) == 0)
        rc = tier_fail(c, STATUS_EUNAVAILABLE, "%s", why);
    else
        rc = tier_fail(c, STATUS_EUNAVAILABLE, "qdrant at %s unreachable: %s", q->shown_url, why);
    return logged("detect", rc, c->err);
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
int episodic_qdrant_collection_name(const char *prefix, const char *tenant, const char *name,
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
static int qname(qdrant *q, tier_ctx *c, const char *name, char *out) {
    if (!name_ok(name, VS_NAME_MAX) || !name[0] ||
        episodic_qdrant_collection_name(q->prefix, principal_tenant(c->p), name, out) != 0)
        return tier_fail(c, STATUS_EINVALID, "collection name is not 1..%d of [A-Za-z0-9_-]",
                       VS_NAME_MAX);
    return STATUS_OK;
}

/* What every point operation starts with: the server's version known (it
 * picks the endpoints) and the collection's Qdrant name in qn. */
static int ready_collection(qdrant *q, tier_ctx *c, const char *name, qj_version *v, char *qn) {
    int rc = ready(q, c, v);
    return rc == STATUS_OK ? qname(q, c, name, qn) : rc;
}

/* The catalog has the collection, Qdrant does not: an inconsistency an
 * operator has to look at, so logged as an error. */
static int missing(tier_ctx *c, const char *qn, const char *name) {
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
static int points_call(qdrant *q, tier_ctx *c, const char *op, const char *qn, const char *name,
                       const char *method, const char *path, const char *body, size_t blen,
                       resp *r) {
    int rc = call(q, method, path, body, blen, c->deadline_ms, r, c->err, sizeof c->err);
    if (rc == STATUS_ENOTFOUND) return missing(c, qn, name);
    return logged(op, rc, c->err);
}

/* ------------------------------------------------------------------ */
/* collections                                                          */

typedef struct hook_arg {
    qdrant *q;
    qj_version version;
} hook_arg;

/* After a 409: a Qdrant collection of that name exists though the catalog
 * has no row for it — left behind when a create failed after the Qdrant
 * PUT but before the catalog's COMMIT. Taken over when it has the right
 * shape and no points; anything else is refused rather than adopted. */
static int adopt(qdrant *q, tier_ctx *c, const vs_collection *col, const char *qn) {
    char path[QDRANT_PATH_MAX], why[400];
    resp r;
    int dims = 0, dist = 0;
    int64_t n = -1;
    snprintf(path, sizeof path, "/collections/%s", qn);
    int rc = call(q, "GET", path, NULL, 0, c->deadline_ms, &r, why, sizeof why);
    if (rc == STATUS_OK) {
        rc = qj_parse_collection(r.body, r.len, &dims, &dist, why, sizeof why);
        resp_free(&r);
    }
    if (rc == STATUS_OK) {
        static const char count_all[] = "{\"exact\":true}";
        snprintf(path, sizeof path, "/collections/%s/points/count", qn);
        rc = call(q, "POST", path, count_all, sizeof count_all - 1, c->deadline_ms, &r, why,
                  sizeof why);
        if (rc == STATUS_OK) {
            rc = qj_parse_count(r.body, r.len, &n, why, sizeof why);
            resp_free(&r);
        }
    }
    if (rc != STATUS_OK) return logged("create", tier_fail(c, rc, "%s", why), c->err);
    if (dims != col->dims || dist != col->distance || n != 0)
        return tier_fail(c, STATUS_EEXISTS,
                       "qdrant already has a collection %s that memoryd's catalog does not list "
                       "(%d dims, %s, %" PRId64 " points); remove it in qdrant to create %s",
                       qn, dims, qj_distance_name(dist) ? qj_distance_name(dist) : "?", n,
                       col->name);
    log_fields(LOG_WARN, "qdrant collection left from a failed create taken over", LOG_F_STR,
               "collection", qn, LOG_F_END);
    return STATUS_OK;
}

static int drop(qdrant *q, tier_ctx *c, const char *qn, char *err, size_t errlen) {
    char path[QDRANT_PATH_MAX];
    snprintf(path, sizeof path, "/collections/%s", qn);
    resp r;
    int rc = call(q, "DELETE", path, NULL, 0, c->deadline_ms, &r, err, errlen);
    if (rc == STATUS_ENOTFOUND) return STATUS_OK; /* already gone: what we wanted */
    if (rc != STATUS_OK) return rc;
    int deleted = 0;
    rc = qj_parse_bool(r.body, r.len, &deleted, err, errlen);
    resp_free(&r);
    return rc;
}

/* Runs inside the catalog's transaction: a failure here rolls the row
 * back, so the Qdrant side is undone before returning one. */
static int create_hook(tier_ctx *c, const vs_collection *col, void *arg) {
    hook_arg *h = arg;
    qdrant *q = h->q;
    char qn[EPISODIC_QDRANT_NAME_MAX], path[QDRANT_PATH_MAX];
    int rc = qname(q, c, col->name, qn);
    if (rc != STATUS_OK) return rc;

    char *body = NULL;
    size_t blen = 0;
    rc = qj_create_collection(col->dims, col->distance, &body, &blen, c->err, sizeof c->err);
    if (rc != STATUS_OK) return rc;
    snprintf(path, sizeof path, "/collections/%s", qn);
    resp r;
    rc = call(q, "PUT", path, body, blen, c->deadline_ms, &r, c->err, sizeof c->err);
    free(body);
    if (rc == STATUS_EEXISTS) {
        rc = adopt(q, c, col, qn);
    } else if (rc == STATUS_OK) {
        int created = 0;
        rc = qj_parse_bool(r.body, r.len, &created, c->err, sizeof c->err);
        resp_free(&r);
        if (rc == STATUS_OK && !created)
            rc = tier_fail(c, STATUS_EINTERNAL, "qdrant answered false to creating collection %s", qn);
    }
    if (rc != STATUS_OK) return logged("create", rc, c->err);

    /* The diode filters on tenant and owner in every read: both indexed. */
    static const char *const fields[] = {"memoryd.tenant", "memoryd.owner"};
    snprintf(path, sizeof path, "/collections/%s/index?wait=true", qn);
    for (int i = 0; i < 2 && rc == STATUS_OK; i++) {
        rc = qj_payload_index(fields[i], i == 0, &h->version, &body, &blen, c->err, sizeof c->err);
        if (rc != STATUS_OK) break;
        rc = call(q, "PUT", path, body, blen, c->deadline_ms, &r, c->err, sizeof c->err);
        free(body);
        if (rc == STATUS_OK) {
            rc = qj_parse_update(r.body, r.len, c->err, sizeof c->err);
            resp_free(&r);
        }
    }
    if (rc != STATUS_OK) {
        logged("create index", rc, c->err);
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
    int rc = qname(q, c, col->name, qn);
    if (rc != STATUS_OK) return rc;
    return logged("delete collection", drop(q, c, qn, c->err, sizeof c->err), c->err);
}

static int q_create_collection(vstore *vs, tier_ctx *c, const char *name, int dims, int distance,
                               vs_collection *out) {
    qdrant *q = (qdrant *)vs;
    hook_arg h = {.q = q};
    int rc = ready(q, c, &h.version);
    if (rc != STATUS_OK) return rc;
    return ecat_create(q->pg, c, name, dims, distance, create_hook, &h, out);
}

static int q_get_collection(vstore *vs, tier_ctx *c, const char *name, vs_collection *out) {
    return ecat_get(((qdrant *)vs)->pg, c, name, out);
}

static int q_list_collections(vstore *vs, tier_ctx *c, const char *after, size_t limit,
                              vs_collection **out, size_t *n) {
    return ecat_list(((qdrant *)vs)->pg, c, after, limit, out, n);
}

static int q_delete_collection(vstore *vs, tier_ctx *c, const char *name) {
    qdrant *q = (qdrant *)vs;
    qj_version v;
    int rc = ready(q, c, &v);
    if (rc != STATUS_OK) return rc;
    return ecat_delete(q->pg, c, name, delete_hook, q);
}

/* ------------------------------------------------------------------ */
/* points                                                               */

static qj_scope read_scope(const tier_ctx *c) {
    qj_scope s = {
        .tenant = principal_tenant(c->p),
        .owner = c->read_breadth == PRINCIPAL_ALL ? NULL : principal_sub(c->p),
        .clr = (int)principal_clr(c->p),
    };
    return s;
}

static int cmp_point(const void *a, const void *b) {
    return vs_id_cmp(&((const vs_point *)a)->id, &((const vs_point *)b)->id);
}

static const vs_point *find_point(const vs_point *sorted, size_t n, const vs_id *id) {
    vs_point key;
    key.id = *id;
    return n ? bsearch(&key, sorted, n, sizeof *sorted, cmp_point) : NULL;
}

/* The stored metadata of those of ids that exist (payload "memoryd" only),
 * sorted by id, in c->ar. Any point of another tenant in the answer is
 * STATUS_EINTERNAL (the parser checks memoryd.tenant). */
static int existing(qdrant *q, tier_ctx *c, const char *qn, const vs_collection *col,
                    const vs_id *ids, size_t n, vs_point **out, size_t *nout) {
    char path[QDRANT_PATH_MAX];
    char *body = NULL;
    size_t blen = 0;
    int rc = qj_retrieve(ids, n, QJ_PAYLOAD_META, 0, &body, &blen, c->err, sizeof c->err);
    if (rc != STATUS_OK) return rc;
    snprintf(path, sizeof path, "/collections/%s/points", qn);
    resp r;
    rc = points_call(q, c, "retrieve", qn, col->name, "POST", path, body, blen, &r);
    free(body);
    if (rc != STATUS_OK) return rc;
    qj_read rd = {.tenant = principal_tenant(c->p), .dims = col->dims};
    rc = qj_parse_records(r.body, r.len, &rd, 0, c->ar, out, nout, NULL, NULL, c->err,
                          sizeof c->err);
    resp_free(&r);
    if (rc != STATUS_OK) return logged("retrieve", rc, c->err);
    if (*nout > 1) qsort(*out, *nout, sizeof **out, cmp_point);
    return STATUS_OK;
}

static int q_upsert(vstore *vs, tier_ctx *c, const vs_collection *col, const vs_point_in *pts,
                    size_t n) {
    qdrant *q = (qdrant *)vs;
    qj_version v;
    char qn[EPISODIC_QDRANT_NAME_MAX], path[QDRANT_PATH_MAX];
    int rc = ready_collection(q, c, col->name, &v, qn);
    if (rc != STATUS_OK || n == 0) return rc;

    vs_id *ids = arena_alloc(c->ar, n * sizeof *ids);
    tier_meta *metas = arena_alloc(c->ar, n * sizeof *metas);
    if (!ids || !metas) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) ids[i] = pts[i].id;
    vs_point *old = NULL;
    size_t nold = 0;
    rc = existing(q, c, qn, col, ids, n, &old, &nold);
    if (rc != STATUS_OK) return rc;

    /* The write diode decides every point before anything is written. */
    int64_t now = vs_now_us();
    for (size_t i = 0; i < n; i++) {
        const vs_point *e = find_point(old, nold, &pts[i].id);
        rc = vs_stamp(c, &pts[i].id, e ? &e->meta : NULL, pts[i].label, now, &metas[i]);
        if (rc != STATUS_OK) return rc;
        metas[i].pii_kinds = pts[i].pii_kinds;
        metas[i].npii = pts[i].npii;
    }

    /* Batches of bounded size: 1000 points of 65536 dims would be ~800 MB
     * of JSON, far over Qdrant's request limit (32 MiB by default). A batch
     * whose body comes out too big is halved until it fits (one point is at
     * most ~1.5 MB: 65536 components and a 64 KiB payload). */
    snprintf(path, sizeof path, "/collections/%s/points?wait=true", qn);
    for (size_t at = 0, m = n; at < n && rc == STATUS_OK; at += m) {
        char *body = NULL;
        size_t blen = 0;
        if (m > n - at) m = n - at;
        for (;;) {
            rc = qj_upsert(principal_tenant(c->p), col->dims, pts + at, metas + at, m, &body, &blen,
                           c->err, sizeof c->err);
            if (rc != STATUS_OK || blen <= QDRANT_BODY_TARGET || m == 1) break;
            free(body);
            m = (m + 1) / 2;
        }
        if (rc != STATUS_OK) break;
        resp r;
        rc = points_call(q, c, "upsert", qn, col->name, "PUT", path, body, blen, &r);
        free(body);
        if (rc != STATUS_OK) break;
        rc = logged("upsert", qj_parse_update(r.body, r.len, c->err, sizeof c->err), c->err);
        resp_free(&r);
    }
    return rc;
}

/* A hit Qdrant's filter should not have let through: dropped, and logged
 * because it means the pushed-down diode and ours disagree. */
static int leak_check(tier_ctx *c, const char *op, const vs_point *p) {
    if (tier_may_read(c, p->meta.owner, p->meta.label)) return 1;
    char idt[37];
    log_fields(LOG_ERROR, "qdrant returned a point the read diode hides; dropped", LOG_F_STR, "op",
               op, LOG_F_STR, "id", vs_id_text(&p->id, idt), LOG_F_END);
    return 0;
}

static int worse(int distance, float score, float threshold) {
    return distance == VS_EUCLID ? score > threshold : score < threshold;
}

static int cmp_hit_id(const void *a, const void *b) {
    return vs_id_cmp(&((const vs_hit *)a)->point.id, &((const vs_hit *)b)->point.id);
}

static int q_search(vstore *vs, tier_ctx *c, const vs_collection *col, const vs_search *s,
                    vs_hit **out, size_t *n) {
    qdrant *q = (qdrant *)vs;
    qj_version v;
    char qn[EPISODIC_QDRANT_NAME_MAX], path[QDRANT_PATH_MAX];
    *out = NULL;
    *n = 0;
    int rc = ready_collection(q, c, col->name, &v, qn);
    if (rc != STATUS_OK) return rc;

    /* /points/query arrived in 1.10; /points/search is gone from 1.19's
     * spec. */
    int legacy = !qj_version_at_least(&v, 1, 10);
    qj_scope scope = read_scope(c);
    char *body = NULL;
    size_t blen = 0;
    /* Qdrant's score_threshold is strict (score > t, distance < t); the API
     * promises score >= t and distance <= t. Scores are f32 on both sides,
     * so the next float beyond t makes Qdrant's strict test ours. */
    vs_search sq = *s;
    if (sq.has_threshold)
        sq.threshold = nextafterf(s->threshold, col->distance == VS_EUCLID ? INFINITY : -INFINITY);
    rc = qj_query(&scope, &sq, col->dims, legacy, &body, &blen, c->err, sizeof c->err);
    if (rc != STATUS_OK) return rc;
    snprintf(path, sizeof path, "/collections/%s/points/%s", qn, legacy ? "search" : "query");
    resp r;
    rc = points_call(q, c, "search", qn, col->name, "POST", path, body, blen, &r);
    free(body);
    if (rc != STATUS_OK) return rc;
    qj_read rd = {.tenant = scope.tenant,
                  .dims = col->dims,
                  .with_payload = s->with_payload,
                  .with_vector = s->with_vector};
    vs_hit *hits = NULL;
    size_t nh = 0;
    rc = qj_parse_hits(r.body, r.len, &rd, legacy, c->ar, &hits, &nh, c->err, sizeof c->err);
    resp_free(&r);
    if (rc != STATUS_OK) return logged("search", rc, c->err);

    size_t k = 0;
    for (size_t i = 0; i < nh; i++) {
        int keep = leak_check(c, "search", &hits[i].point) &&
                   !(s->has_threshold && worse(col->distance, hits[i].score, s->threshold)) &&
                   k < (size_t)(s->limit > 0 ? s->limit : 0);
        if (!keep) {
            json_decref(hits[i].point.payload);
            hits[i].point.payload = NULL;
            continue;
        }
        hits[k++] = hits[i];
    }
    /* Qdrant orders by score only; equal scores are put in id order so
     * answers (and pages) are deterministic. */
    for (size_t i = 0; i < k;) {
        size_t j = i + 1;
        while (j < k && hits[j].score == hits[i].score) j++;
        if (j - i > 1) qsort(hits + i, j - i, sizeof *hits, cmp_hit_id);
        i = j;
    }
    *out = hits;
    *n = k;
    return STATUS_OK;
}

static int q_get(vstore *vs, tier_ctx *c, const vs_collection *col, const vs_id *ids, size_t n,
                 int with_payload, int with_vector, vs_point **out, size_t *nout) {
    qdrant *q = (qdrant *)vs;
    qj_version v;
    char qn[EPISODIC_QDRANT_NAME_MAX], path[QDRANT_PATH_MAX];
    *out = NULL;
    *nout = 0;
    int rc = ready_collection(q, c, col->name, &v, qn);
    if (rc != STATUS_OK || n == 0) return rc;
    if (n > 100000) return tier_fail(c, STATUS_EINVALID, "too many ids (%zu)", n);

    /* A scroll, not a retrieve: the diode filters inside Qdrant. */
    qj_scope scope = read_scope(c);
    scope.ids = ids;
    scope.nids = n;
    char *body = NULL;
    size_t blen = 0;
    rc = qj_scroll(&scope, NULL, (int)n, NULL, with_payload ? QJ_PAYLOAD_ALL : QJ_PAYLOAD_META,
                   with_vector, &body, &blen, c->err, sizeof c->err);
    if (rc != STATUS_OK) return rc;
    snprintf(path, sizeof path, "/collections/%s/points/scroll", qn);
    resp r;
    rc = points_call(q, c, "get", qn, col->name, "POST", path, body, blen, &r);
    free(body);
    if (rc != STATUS_OK) return rc;
    qj_read rd = {.tenant = scope.tenant,
                  .dims = col->dims,
                  .with_payload = with_payload,
                  .with_vector = with_vector};
    vs_point *found = NULL;
    size_t nf = 0;
    rc = qj_parse_records(r.body, r.len, &rd, 1, c->ar, &found, &nf, NULL, NULL, c->err,
                          sizeof c->err);
    resp_free(&r);
    if (rc != STATUS_OK) return logged("get", rc, c->err);
    if (nf > 1) qsort(found, nf, sizeof *found, cmp_point);

    /* In the order asked, each id once; what is left over is released. */
    vs_point *res = arena_alloc(c->ar, (nf ? nf : 1) * sizeof *res);
    char *taken = calloc(nf ? nf : 1, 1);
    if (!res || !taken) {
        free(taken);
        vs_points_release(found, nf);
        return tier_fail(c, STATUS_ENOMEM, "out of memory");
    }
    size_t k = 0;
    for (size_t i = 0; i < n && k < nf; i++) {
        const vs_point *p = find_point(found, nf, &ids[i]);
        if (!p) continue;
        size_t at = (size_t)(p - found);
        if (taken[at]) continue;
        taken[at] = 1;
        if (!leak_check(c, "get", p)) continue;
        res[k++] = *p;
        found[at].payload = NULL; /* moved */
    }
    free(taken);
    vs_points_release(found, nf);
    *out = res;
    *nout = k;
    return STATUS_OK;
}

static int delete_by_ids(qdrant *q, tier_ctx *c, const char *qn, const vs_collection *col,
                         const vs_id *ids, size_t n) {
    char path[QDRANT_PATH_MAX];
    char *body = NULL;
    size_t blen = 0;
    int rc = qj_delete(ids, n, &body, &blen, c->err, sizeof c->err);
    if (rc != STATUS_OK) return rc;
    snprintf(path, sizeof path, "/collections/%s/points/delete?wait=true", qn);
    resp r;
    rc = points_call(q, c, "delete", qn, col->name, "POST", path, body, blen, &r);
    free(body);
    if (rc != STATUS_OK) return rc;
    rc = qj_parse_update(r.body, r.len, c->err, sizeof c->err);
    resp_free(&r);
    return logged("delete", rc, c->err);
}

static int q_delete_ids(vstore *vs, tier_ctx *c, const vs_collection *col, const vs_id *ids, size_t n,
                        int64_t *deleted) {
    qdrant *q = (qdrant *)vs;
    qj_version v;
    char qn[EPISODIC_QDRANT_NAME_MAX];
    *deleted = 0;
    int rc = ready_collection(q, c, col->name, &v, qn);
    if (rc != STATUS_OK || n == 0) return rc;

    vs_point *old = NULL;
    size_t nold = 0;
    rc = existing(q, c, qn, col, ids, n, &old, &nold);
    if (rc != STATUS_OK || nold == 0) return rc;
    /* vs_stamp is the write diode: a point the caller may not modify may
     * not be deleted either, and then nothing is. */
    int64_t now = vs_now_us();
    vs_id *del = arena_alloc(c->ar, nold * sizeof *del);
    if (!del) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    size_t nd = 0;
    for (size_t i = 0; i < nold; i++) {
        if (i && vs_id_cmp(&old[i - 1].id, &old[i].id) == 0) continue;
        tier_meta m;
        rc = vs_stamp(c, &old[i].id, &old[i].meta, 0, now, &m);
        if (rc != STATUS_OK) return rc;
        del[nd++] = old[i].id;
    }
    rc = delete_by_ids(q, c, qn, col, del, nd);
    if (rc == STATUS_OK) *deleted = (int64_t)nd;
    return rc;
}

static int q_delete_filter(vstore *vs, tier_ctx *c, const vs_collection *col,
                           const Memory__V1__Filter *filter, int64_t *deleted) {
    qdrant *q = (qdrant *)vs;
    qj_version v;
    char qn[EPISODIC_QDRANT_NAME_MAX], path[QDRANT_PATH_MAX];
    *deleted = 0;
    int rc = ready_collection(q, c, col->name, &v, qn);
    if (rc != STATUS_OK) return rc;

    /* Visible to the caller and, without the :all write breadth, owned by
     * it: one owner condition serves both. */
    qj_scope scope = read_scope(c);
    if (c->write_breadth != PRINCIPAL_ALL) scope.owner = principal_sub(c->p);
    qj_read rd = {.tenant = scope.tenant, .dims = col->dims};
    snprintf(path, sizeof path, "/collections/%s/points/scroll", qn);
    /* Pages are transient: their own arena, reset per page, so deleting a
     * million points does not grow the call's arena by a million. */
    arena *pa = arena_create();
    if (!pa) return tier_fail(c, STATUS_ENOMEM, "out of memory");
    vs_id offset;
    int has_offset = 0;
    int64_t total = 0, now = vs_now_us();
    for (;; arena_reset(pa)) {
        char *body = NULL;
        size_t blen = 0;
        rc = qj_scroll(&scope, filter, QDRANT_SCROLL_PAGE, has_offset ? &offset : NULL,
                       QJ_PAYLOAD_META, 0, &body, &blen, c->err, sizeof c->err);
        if (rc != STATUS_OK) break;
        resp r;
        rc = points_call(q, c, "delete_filter", qn, col->name, "POST", path, body, blen, &r);
        free(body);
        if (rc != STATUS_OK) break;
        vs_point *page = NULL;
        size_t np = 0;
        vs_id next;
        int has_next = 0;
        rc = qj_parse_records(r.body, r.len, &rd, 1, pa, &page, &np, &next, &has_next, c->err,
                              sizeof c->err);
        resp_free(&r);
        if (rc != STATUS_OK) {
            logged("delete_filter", rc, c->err);
            break;
        }
        vs_id *del = np ? arena_alloc(pa, np * sizeof *del) : NULL;
        if (np && !del) {
            rc = tier_fail(c, STATUS_ENOMEM, "out of memory");
            break;
        }
        size_t nd = 0;
        for (size_t i = 0; i < np; i++) {
            /* Defence in depth: what the filter should have excluded is
             * left alone (and logged), never deleted. */
            if (!leak_check(c, "delete_filter", &page[i])) continue;
            tier_meta m;
            if (vs_stamp(c, &page[i].id, &page[i].meta, 0, now, &m) != STATUS_OK) {
                log_fields(LOG_ERROR, "qdrant returned a point the write diode protects; kept",
                           LOG_F_STR, "error", c->err, LOG_F_END);
                c->err[0] = '\0';
                continue;
            }
            del[nd++] = page[i].id;
        }
        if (nd) {
            rc = delete_by_ids(q, c, qn, col, del, nd);
            if (rc != STATUS_OK) break;
            total += (int64_t)nd;
        }
        if (!has_next) break;
        if (has_offset && vs_id_cmp(&next, &offset) == 0) {
            rc = logged("delete_filter",
                        tier_fail(c, STATUS_EINTERNAL, "qdrant's scroll does not advance"), c->err);
            break;
        }
        offset = next;
        has_offset = 1;
    }
    arena_free(pa);
    /* Pages deleted before a failure stay deleted: report them. */
    *deleted = total;
    return rc;
}

static int q_count(vstore *vs, tier_ctx *c, const vs_collection *col,
                   const Memory__V1__Filter *filter, int exact, int64_t *count) {
    qdrant *q = (qdrant *)vs;
    qj_version v;
    char qn[EPISODIC_QDRANT_NAME_MAX], path[QDRANT_PATH_MAX];
    *count = 0;
    int rc = ready_collection(q, c, col->name, &v, qn);
    if (rc != STATUS_OK) return rc;
    qj_scope scope = read_scope(c);
    char *body = NULL;
    size_t blen = 0;
    rc = qj_count(&scope, filter, exact, &body, &blen, c->err, sizeof c->err);
    if (rc != STATUS_OK) return rc;
    snprintf(path, sizeof path, "/collections/%s/points/count", qn);
    resp r;
    rc = points_call(q, c, "count", qn, col->name, "POST", path, body, blen, &r);
    free(body);
    if (rc != STATUS_OK) return rc;
    rc = qj_parse_count(r.body, r.len, count, c->err, sizeof c->err);
    resp_free(&r);
    return logged("count", rc, c->err);
}

/* GET / bounded by the connect timeout: a health probe must not hang. */
static int q_probe(vstore *vs) {
    qdrant *q = (qdrant *)vs;
    qj_version v;
    char why[400];
    if (detect(q, INT64_MAX, q->connect_timeout_ms, &v, why, sizeof why) != STATUS_OK) return -1;
    version_set(q, &v);
    return 0;
}

static void q_free(vstore *vs) {
    qdrant *q = (qdrant *)vs;
    if (!q) return;
    for (int i = 0; i < q->nidle; i++) curl_easy_cleanup(q->idle[i]);
    curl_slist_free_all(q->headers);
    pthread_mutex_destroy(&q->mu);
    free(q->url);
    free(q->shown_url);
    free(q->prefix);
    free(q);
}

static const vstore_ops qdrant_ops = {
    .name = "qdrant",
    .create_collection = q_create_collection,
    .get_collection = q_get_collection,
    .list_collections = q_list_collections,
    .delete_collection = q_delete_collection,
    .upsert = q_upsert,
    .search = q_search,
    .get = q_get,
    .delete_ids = q_delete_ids,
    .delete_filter = q_delete_filter,
    .count = q_count,
    .probe = q_probe,
    .free = q_free,
};

/* ------------------------------------------------------------------ */
/* open                                                                 */

/* url with "user:password@" replaced by "***@", for logs and messages. */
static char *mask_url(const char *url) {
    const char *auth = strstr(url, "://");
    auth = auth ? auth + 3 : url;
    size_t end = strcspn(auth, "/?#");
    const char *at = memchr(auth, '@', end);
    if (!at) return strdup(url);
    size_t n = strlen(url) + 4;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%.*s***%s", (int)(auth - url), url, at);
    return s;
}

int episodic_qdrant_open(pg_pool *pg, const qdrant_options *o, vstore **out, char *err,
                         size_t errlen) {
    if (!o || !o->url || !o->url[0]) return fail(err, errlen, -1, "qdrant: no URL configured");
    if (strncmp(o->url, "http://", 7) != 0 && strncmp(o->url, "https://", 8) != 0)
        return fail(err, errlen, -1, "qdrant URL must start with http:// or https://");
    const char *prefix = o->collection_prefix ? o->collection_prefix : "memoryd_";
    if (!name_ok(prefix, 64))
        return fail(err, errlen, -1, "qdrant collection prefix must be 0..64 of [A-Za-z0-9_-]");
    if (o->api_key && strpbrk(o->api_key, "\r\n"))
        return fail(err, errlen, -1, "qdrant API key holds a line break");
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return fail(err, errlen, -1, "libcurl: %s", curl_easy_strerror(curl_init_rc));

    qdrant *q = calloc(1, sizeof *q);
    if (!q) return fail(err, errlen, -1, "out of memory");
    q->base.ops = &qdrant_ops;
    q->pg = pg;
    q->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 10000;
    q->connect_timeout_ms = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 2000;
    pthread_mutex_init(&q->mu, NULL);
    q->url = strdup(o->url);
    q->prefix = strdup(prefix);
    if (q->url) {
        size_t n = strlen(q->url);
        while (n > 0 && q->url[n - 1] == '/') q->url[--n] = '\0';
        q->shown_url = mask_url(q->url);
    }
    int bad = !q->url || !q->prefix || !q->shown_url;
    struct curl_slist *l = NULL;
    static const char *const fixed[] = {"Content-Type: application/json",
                                        "Accept: application/json",
                                        "Expect:"}; /* no 100-continue round trip on big bodies */
    for (int i = 0; i < 3 && !bad; i++) {
        struct curl_slist *nl = curl_slist_append(l, fixed[i]);
        bad = !nl;
        if (nl) l = nl;
    }
    if (!bad && o->api_key && o->api_key[0]) {
        size_t n = strlen(o->api_key) + sizeof "api-key: ";
        char *h = malloc(n);
        struct curl_slist *nl = NULL;
        if (h) {
            snprintf(h, n, "api-key: %s", o->api_key);
            nl = curl_slist_append(l, h);
            memset(h, 0, n); /* the list holds its own copy */
            free(h);
        }
        bad = !nl;
        if (nl) l = nl;
    }
    q->headers = l;
    if (bad) {
        q_free(&q->base);
        return fail(err, errlen, -1, "out of memory");
    }

    qj_version v;
    char why[400];
    if (detect(q, INT64_MAX, q->timeout_ms, &v, why, sizeof why) == STATUS_OK)
        version_set(q, &v);
    else
        log_fields(LOG_WARN, "qdrant not reachable at start; retrying on each call", LOG_F_STR,
                   "url", q->shown_url, LOG_F_STR, "error", why, LOG_F_END);
    *out = &q->base;
    return 0;
}
