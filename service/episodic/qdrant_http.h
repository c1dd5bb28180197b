/* qdrant_http: the HTTP side of the Qdrant backend, apart from what the
 * requests mean: pooled libcurl easy handles with keep-alive, an `api-key`
 * header, one exchange bounded by the call's deadline and a timeout,
 * answers bounded in size, transport failures and HTTP statuses mapped to
 * status codes that keep Qdrant's own text, and the server's version
 * (detected, cached, asked again while Qdrant is down). Thread-safe. */
#ifndef MEMORYD_EPISODIC_QDRANT_HTTP_H
#define MEMORYD_EPISODIC_QDRANT_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "service/core/cancel.h"
#include "service/episodic/qdrant_json.h"
#include "service/metrics/backend_metrics.h"

typedef struct qdrant_http qdrant_http;

/* An answer: its HTTP status and body (NUL-terminated, for messages). */
typedef struct qdrant_resp {
    long status;
    char *body;
    size_t len, cap;
    int too_big;
} qdrant_resp;

void qdrant_resp_free(qdrant_resp *r);

/* For url (http(s)://host:port[/path]; user:password@ is masked in logs)
 * and api_key (NULL or "": none; never logged). timeout_ms bounds an
 * exchange of a call without deadline, connect_timeout_ms a connect.
 * STATUS_OK with *out (qdrant_http_free), or a code with err. */
int qdrant_http_create(const char *url, const char *api_key, int timeout_ms, int connect_timeout_ms,
                       qdrant_http **out, char *err, size_t errlen);
void qdrant_http_free(qdrant_http *h); /* accepts NULL */

/* The URL as logs and messages show it (credentials masked). */
const char *qdrant_http_url(const qdrant_http *h);

/* method path with body (NULL: none), by deadline_ms (CLOCK_MONOTONIC,
 * INT64_MAX: none) and the create-time timeout, abandoned at once when
 * cancel (NULL: none) fires (STATUS_ECANCELLED; the connection is
 * dropped), with a `traceparent` header when traceparent is not NULL (the
 * caller's trace, traceparent.h): STATUS_OK only for a 2xx
 * answer, in *r (qdrant_resp_free it). Otherwise the failure's code with
 * err: a passed deadline or a timeout STATUS_ETIMEOUT, no connection
 * STATUS_EUNAVAILABLE, 404 STATUS_ENOTFOUND, 409 STATUS_EEXISTS, 400/413/422
 * STATUS_EINVALID, 401/403 STATUS_EAUTH, 429/5xx STATUS_EUNAVAILABLE, an
 * oversize or unexpected answer STATUS_EINTERNAL; r is freed then but
 * r->status kept (callers tell a 404 apart). */
int qdrant_http_call(qdrant_http *h, const char *method, const char *path, const char *body,
                     size_t blen, int64_t deadline_ms, cancel_token *cancel,
                     const char *traceparent, qdrant_resp *r, char *err, size_t errlen);

/* The server's version: cached, else asked (GET /) now, by deadline_ms and
 * timeout_ms (the connect timeout for a health probe: it must not hang).
 * STATUS_OK with *v, or the failure as qdrant_http_call. The first success
 * is logged. */
int qdrant_http_version(qdrant_http *h, int64_t deadline_ms, long timeout_ms, qj_version *v,
                        char *err, size_t errlen);
/* Asks again even when cached (the health probe). */
int qdrant_http_probe(qdrant_http *h);
/* The timeouts given at create. */
int qdrant_http_timeout_ms(const qdrant_http *h);
/* Requests by outcome (a 404 or 409 counts as refused) and their times,
 * version probes included (backend_metrics.h). */
const backend_stats *qdrant_http_stats(const qdrant_http *h);

#endif
