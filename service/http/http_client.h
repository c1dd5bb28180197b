/* http_client: the HTTP side of a REST backend (Qdrant, the text
 * embedder), apart from what its requests mean: pooled libcurl easy
 * handles with keep-alive, one credential header, one exchange bounded by
 * the call's deadline and a timeout and abandoned when the caller cancels,
 * answers bounded in size, transport failures and HTTP statuses mapped to
 * status codes that keep the server's own text. Thread-safe.
 *
 * Every message names the server by the service name given at create
 * ("qdrant refused POST /collections/x/points (HTTP 400): ..."). */
#ifndef MEMORYD_HTTP_HTTP_CLIENT_H
#define MEMORYD_HTTP_HTTP_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "service/core/cancel.h"
#include "service/metrics/backend_metrics.h"

typedef struct http_client http_client;

/* An answer: its HTTP status and body (NUL-terminated, for messages). */
typedef struct http_resp {
    long status;
    char *body;
    size_t len, cap;
    int too_big;
} http_resp;

void http_resp_free(http_resp *r);

/* The text of a failed answer for an error message, into out (always
 * NUL-terminated, never fails): each server has its own error shape. */
typedef void http_error_text_fn(const char *body, size_t len, char *out, size_t outlen);

typedef struct http_client_config {
    const char *service; /* "qdrant", "embedder": names the server in messages */
    const char *url;     /* http(s)://host:port[/path]; user:password@ masked in logs */
    /* The credential, sent as the header "<auth_name>: <auth_prefix><auth_secret>"
     * ("api-key: K", "Authorization: Bearer K"); auth_secret NULL or "":
     * none. Copied (the copy made to build it is wiped), never logged. */
    const char *auth_name, *auth_prefix, *auth_secret;
    int timeout_ms;         /* bounds an exchange (also of a call with a deadline); <= 0: 10000 */
    int connect_timeout_ms; /* bounds a connect; <= 0: 2000 */
    size_t max_response;    /* larger answers are STATUS_EINTERNAL; 0: 64 MiB */
    http_error_text_fn *error_text; /* NULL: the body, printable ASCII */
} http_client_config;

/* STATUS_OK with *out (http_client_free), or a code with err. */
int http_client_create(const http_client_config *cfg, http_client **out, char *err, size_t errlen);
void http_client_free(http_client *h); /* accepts NULL */

/* method path with body (NULL: none; JSON), by deadline_ms (CLOCK_MONOTONIC,
 * INT64_MAX: none) and timeout_ms (0: the create-time timeout), abandoned
 * at once when cancel (NULL: none) fires (STATUS_ECANCELLED; the
 * connection is dropped), with a `traceparent` header when traceparent is
 * not NULL (the caller's trace, traceparent.h): STATUS_OK only for a 2xx
 * answer, in *r (http_resp_free it). Otherwise the failure's code with
 * err: a passed deadline or a timeout STATUS_ETIMEOUT, no connection
 * STATUS_EUNAVAILABLE, 404 STATUS_ENOTFOUND, 409 STATUS_EEXISTS,
 * 400/413/422 STATUS_EINVALID, 401/403 STATUS_EAUTH, 408 STATUS_ETIMEOUT,
 * 429/5xx STATUS_EUNAVAILABLE, an oversize or unexpected answer
 * STATUS_EINTERNAL; r is freed then but r->status kept (callers tell a
 * 404 apart). Counted in the client's stats. */
int http_client_call(http_client *h, const char *method, const char *path, const char *body,
                     size_t blen, int64_t deadline_ms, cancel_token *cancel,
                     const char *traceparent, long timeout_ms, http_resp *r, char *err,
                     size_t errlen);

/* The URL as logs and messages show it (credentials masked). */
const char *http_client_url(const http_client *h);
/* The timeouts given at create (defaults applied). */
int http_client_timeout_ms(const http_client *h);
int http_client_connect_timeout_ms(const http_client *h);
/* Requests by outcome (a 404 or 409 counts as refused) and their times
 * (backend_metrics.h). */
const backend_stats *http_client_stats(const http_client *h);

#endif
