/* http_client: the HTTP side of a REST backend; see http_client.h.
 *
 * Connection reuse: a pool of handles (mutex + free list) rather than a
 * CURLSH sharing one connection cache. A handle is an easy handle with a
 * multi handle of its own: the multi keeps the keep-alive connection, so
 * a thread that takes a handle reuses the connection of the previous call
 * made with it, and no libcurl state is ever touched by two threads at
 * once: nothing to lock during a transfer (CURLSH needs lock callbacks
 * that libcurl takes around every use of the shared cache). The multi is
 * what lets a client's cancel end a transfer at once: the transfer waits
 * in curl_multi_poll, which the cancel interrupts with curl_multi_wakeup
 * (core/cancel.h). The pool grows to the number of concurrent calls;
 * beyond HTTP_IDLE_HANDLES idle handles, returned ones are closed. */
#include "service/http/http_client.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/core/cancel.h"
#include "service/core/clock.h"
#include "service/core/status.h"
#include "service/core/text.h"
#include "service/core/traceparent.h"

#define HTTP_MAX_RESPONSE ((size_t)64 << 20) /* the default bound of an answer */
#define HTTP_IDLE_HANDLES 32                 /* easy handles kept for reuse */

struct http_client {
    char *service;   /* names the server in messages */
    char *url;       /* without a trailing '/' */
    char *shown_url; /* url with any user:password@ masked, for logs and messages */
    int timeout_ms, connect_timeout_ms;
    size_t max_response;
    http_error_text_fn *error_text;
    struct curl_slist *headers; /* read-only after create: shared by every handle */
    pthread_mutex_t mu;         /* guards idle and nidle */
    struct qhandle *idle[HTTP_IDLE_HANDLES];
    int nidle;
    backend_stats stats; /* atomic counters: not under mu */
};

/* One transfer at a time: the request (easy) and its connection (multi). */
typedef struct qhandle {
    CURL *easy;
    CURLM *multi;
} qhandle;

static void qhandle_free(qhandle *h) {
    if (!h) return;
    if (h->easy) curl_easy_cleanup(h->easy);
    if (h->multi) curl_multi_cleanup(h->multi);
    free(h);
}

static int64_t mono_ms(void) { return clock_mono_ms(NULL); }

void http_resp_free(http_resp *r) {
    free(r->body);
    memset(r, 0, sizeof *r);
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_OK;
/* curl_global_init is not thread-safe in every libcurl build. */
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static qhandle *handle_take(http_client *q) {
    qhandle *h = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->nidle > 0) h = q->idle[--q->nidle];
    pthread_mutex_unlock(&q->mu);
    if (h) return h;
    h = calloc(1, sizeof *h);
    if (h && (!(h->easy = curl_easy_init()) || !(h->multi = curl_multi_init()))) {
        qhandle_free(h);
        h = NULL;
    }
    return h;
}

/* The reset drops options pointing into the finished call's stack (error
 * buffer, response) but keeps the live connection for the next call. */
static void handle_give(http_client *q, qhandle *h, int broken) {
    if (!h) return;
    if (broken) {
        qhandle_free(h);
        return;
    }
    curl_easy_reset(h->easy);
    pthread_mutex_lock(&q->mu);
    if (q->nidle < HTTP_IDLE_HANDLES) {
        q->idle[q->nidle++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&q->mu);
    qhandle_free(h);
}

static void wake_multi(void *multi) { curl_multi_wakeup(multi); }

/* Runs h's transfer to its end (the easy handle's timeouts bound it) or
 * until cancel fires (*cancelled = 1; the transfer is abandoned mid-way,
 * so the caller drops the handle). */
static CURLcode perform(qhandle *h, cancel_token *cancel, int *cancelled) {
    *cancelled = 0;
    if (curl_multi_add_handle(h->multi, h->easy) != CURLM_OK) return CURLE_FAILED_INIT;
    CURLcode cc = CURLE_OK;
    int running = 1, failed = 0;
    if (cancel_wait_begin(cancel, wake_multi, h->multi) != 0) *cancelled = 1;
    while (!*cancelled && !failed) {
        failed = curl_multi_perform(h->multi, &running) != CURLM_OK;
        if (failed || !running) break;
        /* Returns early when a socket is ready, libcurl's own timer is due,
         * or the cancel wakes it. */
        failed = curl_multi_poll(h->multi, NULL, 0, 1000, NULL) != CURLM_OK;
        *cancelled = cancel_fired(cancel);
    }
    cancel_wait_end(cancel);
    if (failed) cc = CURLE_FAILED_INIT;
    else if (!*cancelled) {
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(h->multi, &left)) != NULL)
            if (m->msg == CURLMSG_DONE) cc = m->data.result;
    }
    curl_multi_remove_handle(h->multi, h->easy);
    return cc;
}

/* Where an answer's bytes go, and its bound. */
typedef struct sink {
    http_resp *r;
    size_t max;
} sink;

static size_t on_data(char *p, size_t size, size_t nmemb, void *arg) {
    sink *k = arg;
    http_resp *r = k->r;
    size_t n = size * nmemb;
    if (n > k->max - r->len) {
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
static int exchange(http_client *q, const char *method, const char *path, const char *body,
                    size_t blen, int64_t deadline_ms, cancel_token *cancel, const char *traceparent,
                    long timeout_ms, http_resp *r, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    if (deadline_ms != INT64_MAX) {
        int64_t left = deadline_ms - mono_ms();
        if (left <= 0)
            return text_fail(err, errlen, STATUS_ETIMEOUT,
                             "deadline passed before calling %s (%s %s)", q->service, method, path);
        if (left < timeout_ms) timeout_ms = (long)left;
    }
    long connect_ms = q->connect_timeout_ms < timeout_ms ? q->connect_timeout_ms : timeout_ms;

    size_t ulen = strlen(q->url) + strlen(path) + 1;
    char *url = malloc(ulen);
    qhandle *qh = url ? handle_take(q) : NULL;
    if (!qh) {
        free(url);
        return text_fail(err, errlen, STATUS_ENOMEM, "out of memory calling %s", q->service);
    }
    snprintf(url, ulen, "%s%s", q->url, path);
    CURL *h = qh->easy;

    char cerr[CURL_ERROR_SIZE];
    cerr[0] = '\0';
    sink k = {r, q->max_response};
    int bad = 0;
    bad |= curl_easy_setopt(h, CURLOPT_URL, url) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect_ms) != CURLE_OK;
    /* The call's trace goes first, ahead of the shared headers: a node on
     * this stack, read by curl only during the transfer below. */
    char trace_header[TRACEPARENT_LEN + 16];
    struct curl_slist trace_node = {trace_header, q->headers};
    if (traceparent) snprintf(trace_header, sizeof trace_header, "traceparent: %s", traceparent);
    bad |=
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, traceparent ? &trace_node : q->headers) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_USERAGENT, "memoryd") != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data) != CURLE_OK;
    bad |= curl_easy_setopt(h, CURLOPT_WRITEDATA, &k) != CURLE_OK;
    if (body) {
        bad |= curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen) != CURLE_OK;
        bad |= curl_easy_setopt(h, CURLOPT_POSTFIELDS, body) != CURLE_OK;
    }
    if (strcmp(method, "GET") == 0) bad |= curl_easy_setopt(h, CURLOPT_HTTPGET, 1L) != CURLE_OK;
    else if (strcmp(method, "POST") != 0)
        bad |= curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method) != CURLE_OK;
    if (bad) {
        handle_give(q, qh, 1);
        free(url);
        return text_fail(err, errlen, STATUS_EINTERNAL, "libcurl refused an option for %s %s",
                         method, path);
    }

    int cancelled;
    CURLcode cc = perform(qh, cancel, &cancelled);
    free(url);
    if (!cancelled && cc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    handle_give(q, qh, cancelled || cc != CURLE_OK);
    if (cancelled) {
        http_resp_free(r);
        return text_fail(err, errlen, STATUS_ECANCELLED, "the call was cancelled during %s %s",
                         method, path);
    }
    if (cc == CURLE_OK) return STATUS_OK;

    const char *why = cerr[0] ? cerr : curl_easy_strerror(cc);
    int rc;
    if (r->too_big)
        rc = text_fail(err, errlen, STATUS_EINTERNAL, "%s's answer to %s %s exceeds %zu KiB",
                       q->service, method, path, q->max_response >> 10);
    else if (cc == CURLE_OPERATION_TIMEDOUT)
        rc = text_fail(err, errlen, STATUS_ETIMEOUT, "%s did not answer %s %s within %ld ms",
                       q->service, method, path, timeout_ms);
    else if (cc == CURLE_OUT_OF_MEMORY || cc == CURLE_WRITE_ERROR)
        rc = text_fail(err, errlen, STATUS_ENOMEM, "out of memory reading %s's answer", q->service);
    else
        rc = text_fail(err, errlen, STATUS_EUNAVAILABLE, "%s at %s unreachable: %s", q->service,
                       q->shown_url, why);
    http_resp_free(r);
    return rc;
}

/* The body as an error text: printable ASCII, cut with "..." to fit. */
static void plain_text(const char *body, size_t len, char *out, size_t outlen) {
    if (outlen == 0) return;
    if (!body || len == 0) {
        snprintf(out, outlen, "(empty body)");
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < len && n + 1 < outlen; i++)
        out[n++] = body[i] >= 0x20 && body[i] < 0x7f ? body[i] : '?';
    out[n] = '\0';
    if (n < len && outlen > 4) memcpy(out + outlen - 4, "...", 4);
}

/* Maps a non-2xx answer onto a status code with the server's own text. */
static int http_error(const http_client *q, const http_resp *r, const char *method,
                      const char *path, char *err, size_t errlen) {
    char text[320];
    q->error_text(r->body, r->len, text, sizeof text);
    const char *sv = q->service;
    long st = r->status;
    if (st == 404)
        return text_fail(err, errlen, STATUS_ENOTFOUND, "%s: not found (HTTP 404): %s", sv, text);
    if (st == 409)
        return text_fail(err, errlen, STATUS_EEXISTS, "%s: already exists (HTTP 409): %s", sv,
                         text);
    if (st == 400 || st == 413 || st == 422)
        return text_fail(err, errlen, STATUS_EINVALID, "%s refused %s %s (HTTP %ld): %s", sv,
                         method, path, st, text);
    if (st == 401 || st == 403)
        return text_fail(err, errlen, STATUS_EAUTH, "%s refused the API key (HTTP %ld): %s", sv, st,
                         text);
    if (st == 408)
        return text_fail(err, errlen, STATUS_ETIMEOUT, "%s timed out on %s %s (HTTP 408): %s", sv,
                         method, path, text);
    if (st == 429 || (st >= 500 && st <= 599))
        return text_fail(err, errlen, STATUS_EUNAVAILABLE, "%s is unavailable (HTTP %ld): %s", sv,
                         st, text);
    return text_fail(err, errlen, STATUS_EINTERNAL, "unexpected HTTP %ld from %s for %s %s: %s", st,
                     sv, method, path, text);
}

/* One request ended with rc after starting at start_us. */
static int counted(http_client *q, int64_t start_us, int rc) {
    backend_stats_count(&q->stats, rc);
    metrics_observe_us(&q->stats.duration, (uint64_t)(clock_mono_us() - start_us));
    return rc;
}

int http_client_call(http_client *q, const char *method, const char *path, const char *body,
                     size_t blen, int64_t deadline_ms, cancel_token *cancel,
                     const char *traceparent, long timeout_ms, http_resp *r, char *err,
                     size_t errlen) {
    if (timeout_ms <= 0) timeout_ms = q->timeout_ms;
    int64_t start_us = clock_mono_us();
    int rc = exchange(q, method, path, body, blen, deadline_ms, cancel, traceparent, timeout_ms, r,
                      err, errlen);
    if (rc == STATUS_OK && (r->status < 200 || r->status > 299)) {
        rc = http_error(q, r, method, path, err, errlen);
        long st = r->status;
        http_resp_free(r);
        r->status = st;
    }
    return counted(q, start_us, rc);
}

const backend_stats *http_client_stats(const http_client *q) { return &q->stats; }
const char *http_client_url(const http_client *q) { return q->shown_url; }
int http_client_timeout_ms(const http_client *q) { return q->timeout_ms; }
int http_client_connect_timeout_ms(const http_client *q) { return q->connect_timeout_ms; }

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

void http_client_free(http_client *q) {
    if (!q) return;
    for (int i = 0; i < q->nidle; i++) qhandle_free(q->idle[i]);
    curl_slist_free_all(q->headers);
    pthread_mutex_destroy(&q->mu);
    free(q->service);
    free(q->url);
    free(q->shown_url);
    free(q);
}

/* The headers every request carries, the credential's among them. */
static struct curl_slist *headers(const http_client_config *cfg) {
    struct curl_slist *l = NULL;
    static const char *const fixed[] = {"Content-Type: application/json",
                                        "Accept: application/json",
                                        "Expect:"}; /* no 100-continue round trip on big bodies */
    for (int i = 0; i < 3; i++) {
        struct curl_slist *nl = curl_slist_append(l, fixed[i]);
        if (!nl) goto oom;
        l = nl;
    }
    if (cfg->auth_secret && cfg->auth_secret[0]) {
        const char *prefix = cfg->auth_prefix ? cfg->auth_prefix : "";
        size_t n = strlen(cfg->auth_name) + 2 + strlen(prefix) + strlen(cfg->auth_secret) + 1;
        char *h = malloc(n);
        struct curl_slist *nl = NULL;
        if (h) {
            snprintf(h, n, "%s: %s%s", cfg->auth_name, prefix, cfg->auth_secret);
            nl = curl_slist_append(l, h);
            memset(h, 0, n); /* the list holds its own copy */
            free(h);
        }
        if (!nl) goto oom;
        l = nl;
    }
    return l;
oom:
    curl_slist_free_all(l);
    return NULL;
}

int http_client_create(const http_client_config *cfg, http_client **out, char *err, size_t errlen) {
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return text_fail(err, errlen, STATUS_EINTERNAL, "libcurl: %s",
                         curl_easy_strerror(curl_init_rc));
    http_client *q = calloc(1, sizeof *q);
    if (!q) return text_fail(err, errlen, STATUS_ENOMEM, "out of memory");
    q->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 10000;
    q->connect_timeout_ms = cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 2000;
    q->max_response = cfg->max_response ? cfg->max_response : HTTP_MAX_RESPONSE;
    q->error_text = cfg->error_text ? cfg->error_text : plain_text;
    pthread_mutex_init(&q->mu, NULL);
    q->service = strdup(cfg->service ? cfg->service : "http server");
    q->url = strdup(cfg->url);
    if (q->url) {
        size_t n = strlen(q->url);
        while (n > 0 && q->url[n - 1] == '/') q->url[--n] = '\0';
        q->shown_url = mask_url(q->url);
    }
    q->headers = headers(cfg);
    if (!q->service || !q->url || !q->shown_url || !q->headers) {
        http_client_free(q);
        return text_fail(err, errlen, STATUS_ENOMEM, "out of memory");
    }
    *out = q;
    return STATUS_OK;
}
