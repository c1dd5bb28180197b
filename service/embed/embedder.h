/* embedder: text to vectors through an OpenAI-compatible embeddings
 * endpoint (POST <url>/embeddings; what OpenAI, Ollama, vLLM and
 * text-embeddings-inference serve), over the shared HTTP client: pooled
 * keep-alive connections, each request bounded by the call's deadline and
 * the configured timeout, abandoned when the caller cancels. Inputs are
 * sent in batches of at most `batch` texts, one request after another.
 * Thread-safe.
 *
 * Failures, as status codes with the server's own text:
 *   no connection, HTTP 429/5xx     STATUS_EUNAVAILABLE
 *   no answer in time, HTTP 408     STATUS_ETIMEOUT
 *   HTTP 400/413/422 (the input)    STATUS_EINVALID
 *   HTTP 401/403 (memoryd's key)    STATUS_EAUTH
 *   HTTP 404/409 (model, URL)       STATUS_EPRECONDITION
 *   vectors of another length       STATUS_EPRECONDITION
 *   an answer of another shape      STATUS_EINTERNAL */
#ifndef MEMORYD_EMBED_EMBEDDER_H
#define MEMORYD_EMBED_EMBEDDER_H

#include <stddef.h>
#include <stdint.h>

#include "service/core/arena.h"
#include "service/core/cancel.h"
#include "service/metrics/backend_metrics.h"

/* One text's bound, in bytes (callers check it: INVALID_ARGUMENT). */
#define EMBED_TEXT_MAX 32768

typedef struct embedder embedder;

typedef struct embedder_config {
    const char *url;     /* the API's base: http(s)://host:port/v1 (required) */
    const char *model;   /* the model asked for (required) */
    const char *api_key; /* sent as `Authorization: Bearer`; NULL or "": none; never logged */
    int timeout_ms;      /* one request at most; <= 0: 10000 */
    int batch;           /* texts a request; <= 0: 64 */
} embedder_config;

/* STATUS_OK with *out (embedder_free), or a code with err. */
int embedder_create(const embedder_config *cfg, embedder **out, char *err, size_t errlen);
void embedder_free(embedder *e); /* accepts NULL */

/* The model name, as configured: what collections record. */
const char *embedder_model(const embedder *e);
/* The URL as logs show it (credentials masked). */
const char *embedder_url(const embedder *e);

/* Embeds texts[0..n) (n >= 1, each valid UTF-8 of 1 to EMBED_TEXT_MAX
 * bytes) into n vectors of *dims floats in a (*out, input order), by
 * deadline_ms (CLOCK_MONOTONIC; INT64_MAX: none), cancel (NULL: none) and
 * traceparent (NULL: none). dims_want > 0: the length the vectors must
 * have (else STATUS_EPRECONDITION naming the model and both lengths); 0:
 * the model's, learned from the answer. */
int embedder_embed(embedder *e, const char *const *texts, size_t n, int dims_want,
                   int64_t deadline_ms, cancel_token *cancel, const char *traceparent, arena *a,
                   float **out, int *dims, char *err, size_t errlen);

/* Requests by outcome and their times (backend_metrics.h). */
const backend_stats *embedder_stats(const embedder *e);

#endif
