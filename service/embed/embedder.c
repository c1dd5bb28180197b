/* embedder: text to vectors over HTTP; see embedder.h. */
#include "service/embed/embedder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/status.h"
#include "service/core/text.h"
#include "service/embed/embed_json.h"
#include "service/http/http_client.h"

/* An answer of 64 vectors of 4096 floats as JSON text is about 6 MiB. */
#define EMBED_MAX_RESPONSE ((size_t)32 << 20)

struct embedder {
    http_client *http;
    char *model;
    int batch;
};

const char *embedder_model(const embedder *e) { return e->model; }
const char *embedder_url(const embedder *e) { return http_client_url(e->http); }
const backend_stats *embedder_stats(const embedder *e) { return http_client_stats(e->http); }

void embedder_free(embedder *e) {
    if (!e) return;
    http_client_free(e->http);
    free(e->model);
    free(e);
}

int embedder_create(const embedder_config *cfg, embedder **out, char *err, size_t errlen) {
    if (!cfg->url || !cfg->url[0] || !cfg->model || !cfg->model[0])
        return text_fail(err, errlen, STATUS_EINVALID, "an embedder needs a URL and a model");
    /* A line break would end the header and start another. */
    if (cfg->api_key && strpbrk(cfg->api_key, "\r\n"))
        return text_fail(err, errlen, STATUS_EINVALID,
                         "--embedder-api-key holds a line break (a file read with its newline?)");
    embedder *e = calloc(1, sizeof *e);
    if (!e || !(e->model = strdup(cfg->model))) {
        embedder_free(e);
        return text_fail(err, errlen, STATUS_ENOMEM, "out of memory");
    }
    e->batch = cfg->batch > 0 ? cfg->batch : 64;
    http_client_config hc = {.service = "embedder",
                             .url = cfg->url,
                             .auth_name = "Authorization",
                             .auth_prefix = "Bearer ",
                             .auth_secret = cfg->api_key,
                             .timeout_ms = cfg->timeout_ms,
                             .max_response = EMBED_MAX_RESPONSE,
                             .error_text = embed_json_error_text};
    int rc = http_client_create(&hc, &e->http, err, errlen);
    if (rc != STATUS_OK) {
        embedder_free(e);
        return rc;
    }
    *out = e;
    return STATUS_OK;
}

/* One request: texts[0..n) into out (n × dims, dims fixed by the caller
 * or, when 0, learned here). */
static int embed_batch(embedder *e, const char *const *texts, size_t n, int *dims,
                       int64_t deadline_ms, cancel_token *cancel, const char *traceparent, arena *a,
                       float **out, char *err, size_t errlen) {
    size_t blen;
    char *body = embed_json_request(e->model, texts, n, &blen);
    if (!body)
        return text_fail(err, errlen, STATUS_EINVALID,
                         "a text is not valid UTF-8 (or out of memory)");
    http_resp r;
    int rc = http_client_call(e->http, "POST", "/embeddings", body, blen, deadline_ms, cancel,
                              traceparent, 0, &r, err, errlen);
    free(body);
    if (rc == STATUS_ENOTFOUND || rc == STATUS_EEXISTS) {
        /* A 404 is the model (or the URL's path) the server does not
         * have: memoryd's configuration, not the caller's collection. */
        char why[400];
        snprintf(why, sizeof why, "%s", err);
        return text_fail(err, errlen, STATUS_EPRECONDITION, "%s (model %s at %s/embeddings)", why,
                         e->model, http_client_url(e->http));
    }
    if (rc != STATUS_OK) return rc;
    int got = 0;
    rc = embed_json_parse(r.body, r.len, n, *dims, a, out, &got, err, errlen);
    http_resp_free(&r);
    if (rc == STATUS_EPRECONDITION)
        return text_fail(err, errlen, STATUS_EPRECONDITION,
                         "embedder model %s returns %d-dimensional vectors; %d are needed",
                         e->model, got, *dims);
    if (rc == STATUS_OK) *dims = got;
    return rc;
}

int embedder_embed(embedder *e, const char *const *texts, size_t n, int dims_want,
                   int64_t deadline_ms, cancel_token *cancel, const char *traceparent, arena *a,
                   float **out, int *dims, char *err, size_t errlen) {
    *out = NULL;
    *dims = 0;
    if (n == 0) return text_fail(err, errlen, STATUS_EINVALID, "nothing to embed");
    int d = dims_want;
    float *all = NULL;
    for (size_t at = 0; at < n; at += (size_t)e->batch) {
        size_t k = n - at < (size_t)e->batch ? n - at : (size_t)e->batch;
        float *part;
        int rc = embed_batch(e, texts + at, k, &d, deadline_ms, cancel, traceparent, a, &part, err,
                             errlen);
        if (rc != STATUS_OK) return rc;
        if (at == 0 && k == n) {
            all = part; /* one batch: its vectors are the answer */
        } else {
            if (!all && !(all = arena_alloc(a, n * (size_t)d * sizeof *all)))
                return text_fail(err, errlen, STATUS_ENOMEM, "out of memory");
            memcpy(all + at * (size_t)d, part, k * (size_t)d * sizeof *all);
        }
    }
    *out = all;
    *dims = d;
    return STATUS_OK;
}
