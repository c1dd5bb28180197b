/* qdrant_http: the HTTP side of the Qdrant backend; see qdrant_http.h.
 * Transfers, pooling, deadlines and status mapping are the shared HTTP
 * client's; what is Qdrant's here is its credential header, its error
 * envelope and its version. */
#include "service/qdrant/qdrant_http.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/log.h"
#include "service/core/text.h"

struct qdrant_http {
    http_client *http;
    pthread_mutex_t mu; /* guards the version */
    int have_version;
    qdrant_json_version version;
};

int qdrant_http_call(qdrant_http *q, const char *method, const char *path, const char *body,
                     size_t blen, int64_t deadline_ms, cancel_token *cancel,
                     const char *traceparent, http_resp *r, char *err, size_t errlen) {
    return http_client_call(q->http, method, path, body, blen, deadline_ms, cancel, traceparent, 0,
                            r, err, errlen);
}

const backend_stats *qdrant_http_stats(const qdrant_http *q) { return http_client_stats(q->http); }
const char *qdrant_http_url(const qdrant_http *q) { return http_client_url(q->http); }
int qdrant_http_timeout_ms(const qdrant_http *q) { return http_client_timeout_ms(q->http); }

static int detect(qdrant_http *q, int64_t deadline_ms, long timeout_ms, qdrant_json_version *v,
                  char *err, size_t errlen) {
    http_resp r;
    int rc = http_client_call(q->http, "GET", "/", NULL, 0, deadline_ms, NULL, NULL, timeout_ms, &r,
                              err, errlen);
    if (rc != STATUS_OK) return rc;
    rc = qdrant_json_parse_version(r.body, r.len, v, err, errlen);
    http_resp_free(&r);
    return rc;
}

static void version_set(qdrant_http *q, const qdrant_json_version *v) {
    pthread_mutex_lock(&q->mu);
    int first = !q->have_version;
    q->version = *v;
    q->have_version = 1;
    pthread_mutex_unlock(&q->mu);
    if (first) {
        char vt[48];
        snprintf(vt, sizeof vt, "%d.%d.%d", v->major, v->minor, v->patch);
        log_fields(LOG_INFO, "qdrant backend connected", LOG_F_STR, "url", qdrant_http_url(q),
                   LOG_F_STR, "version", vt, LOG_F_STR, "search_api",
                   qdrant_json_version_at_least(v, 1, 10) ? "query" : "search", LOG_F_END);
    }
}

int qdrant_http_version(qdrant_http *q, int64_t deadline_ms, long timeout_ms,
                        qdrant_json_version *v, char *err, size_t errlen) {
    pthread_mutex_lock(&q->mu);
    int have = q->have_version;
    if (have) *v = q->version;
    pthread_mutex_unlock(&q->mu);
    if (have) return STATUS_OK;
    int rc = detect(q, deadline_ms, timeout_ms, v, err, errlen);
    if (rc == STATUS_OK) version_set(q, v);
    return rc;
}

int qdrant_http_probe(qdrant_http *q) {
    qdrant_json_version v;
    char why[400];
    if (detect(q, INT64_MAX, http_client_connect_timeout_ms(q->http), &v, why, sizeof why) !=
        STATUS_OK)
        return -1;
    version_set(q, &v);
    return 0;
}

void qdrant_http_free(qdrant_http *q) {
    if (!q) return;
    http_client_free(q->http);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

int qdrant_http_create(const char *url, const char *api_key, int timeout_ms, int connect_timeout_ms,
                       qdrant_http **out, char *err, size_t errlen) {
    qdrant_http *q = calloc(1, sizeof *q);
    if (!q) return text_fail(err, errlen, STATUS_ENOMEM, "out of memory");
    pthread_mutex_init(&q->mu, NULL);
    http_client_config cfg = {.service = "qdrant",
                              .url = url,
                              .auth_name = "api-key",
                              .auth_secret = api_key,
                              .timeout_ms = timeout_ms,
                              .connect_timeout_ms = connect_timeout_ms,
                              .error_text = qdrant_json_error_text};
    int rc = http_client_create(&cfg, &q->http, err, errlen);
    if (rc != STATUS_OK) {
        qdrant_http_free(q);
        return rc;
    }
    *out = q;
    return STATUS_OK;
}
