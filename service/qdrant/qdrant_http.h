/* qdrant_http: the HTTP side of the Qdrant backend: the shared HTTP client
 * (http/http_client.h) with Qdrant's `api-key` header and Qdrant's error
 * texts, and the server's version (detected, cached, asked again while
 * Qdrant is down). Thread-safe. */
#ifndef MEMORYD_QDRANT_QDRANT_HTTP_H
#define MEMORYD_QDRANT_QDRANT_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "service/core/cancel.h"
#include "service/http/http_client.h"
#include "service/metrics/backend_metrics.h"
#include "service/qdrant/qdrant_json.h"

typedef struct qdrant_http qdrant_http;

/* For url (http(s)://host:port[/path]; user:password@ is masked in logs)
 * and api_key (NULL or "": none; never logged). timeout_ms bounds an
 * exchange of a call without deadline, connect_timeout_ms a connect.
 * STATUS_OK with *out (qdrant_http_free), or a code with err. */
int qdrant_http_create(const char *url, const char *api_key, int timeout_ms, int connect_timeout_ms,
                       qdrant_http **out, char *err, size_t errlen);
void qdrant_http_free(qdrant_http *h); /* accepts NULL */

/* The URL as logs and messages show it (credentials masked). */
const char *qdrant_http_url(const qdrant_http *h);

/* http_client_call with the create-time timeout. */
int qdrant_http_call(qdrant_http *h, const char *method, const char *path, const char *body,
                     size_t blen, int64_t deadline_ms, cancel_token *cancel,
                     const char *traceparent, http_resp *r, char *err, size_t errlen);

/* The server's version: cached, else asked (GET /) now, by deadline_ms and
 * timeout_ms (the connect timeout for a health probe: it must not hang).
 * STATUS_OK with *v, or the failure as qdrant_http_call. The first success
 * is logged. */
int qdrant_http_version(qdrant_http *h, int64_t deadline_ms, long timeout_ms,
                        qdrant_json_version *v, char *err, size_t errlen);
/* Asks again even when cached (the health probe). */
int qdrant_http_probe(qdrant_http *h);
/* The timeouts given at create. */
int qdrant_http_timeout_ms(const qdrant_http *h);
/* Requests by outcome (a 404 or 409 counts as refused) and their times,
 * version probes included (backend_metrics.h). */
const backend_stats *qdrant_http_stats(const qdrant_http *h);

#endif
