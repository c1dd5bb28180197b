/* health: status table + Check/Watch handlers. One mutex guards the table
 * and the watcher list; it is held while sending to watchers (sends only
 * queue, never block) so a change and a new watcher cannot cross. */
#include "service/health/health.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "grpc/health/v1/health.pb-c.h"

typedef struct entry {
    struct entry *next;
    char *service;
    health_status status;
} entry;

typedef struct watcher {
    struct watcher *next;
    rpc_call *call;
    char *service;
    int last_sent; /* wire value last sent, -1 before the first */
} watcher;

struct health {
    pthread_mutex_t lock;
    entry *entries;
    watcher *watchers;
    int nwatchers, max_watchers;
    int shut_down;
};

health *health_create(int max_watchers) {
    health *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->max_watchers = max_watchers > 0 ? max_watchers : 1024;
    pthread_mutex_init(&h->lock, NULL);
    return h;
}

void health_free(health *h) {
    if (!h) return;
    while (h->entries) {
        entry *e = h->entries;
        h->entries = e->next;
        free(e->service);
        free(e);
    }
    /* Watchers end with their calls at server shutdown; any left here
     * belong to a server that was never shut down. */
    while (h->watchers) {
        watcher *w = h->watchers;
        h->watchers = w->next;
        free(w->service);
        free(w);
    }
    pthread_mutex_destroy(&h->lock);
    free(h);
}

static entry *find_locked(health *h, const char *service) {
    for (entry *e = h->entries; e; e = e->next)
        if (strcmp(e->service, service) == 0) return e;
    return NULL;
}

/* The wire value a watcher of service should see now. */
static int wire_status_locked(health *h, const char *service) {
    entry *e = find_locked(h, service);
    if (!e) return GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN;
    return e->status == HEALTH_SERVING
               ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
               : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
}

/* Sends the current status to w if it changed. Returns rpc_call_send's
 * refusal when the call is gone or its client stopped reading (the caller
 * drops the watcher). */
static int update_watcher_locked(health *h, watcher *w) {
    int now = wire_status_locked(h, w->service);
    if (now == w->last_sent) return 0;
    Grpc__Health__V1__HealthCheckResponse resp = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    resp.status = now;
    int rc = rpc_call_send(w->call, &resp.base);
    if (rc != 0) return rc;
    w->last_sent = now;
    return 0;
}

static void notify_locked(health *h, const char *service) {
    watcher **pp = &h->watchers;
    while (*pp) {
        watcher *w = *pp;
        int rc = 0;
        if ((service && strcmp(w->service, service) != 0) ||
            (rc = update_watcher_locked(h, w)) == 0) {
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        h->nwatchers--;
        if (rc == RPC_SEND_OVERFLOW)
            rpc_call_finish(w->call, GRPC_STATUS_RESOURCE_EXHAUSTED, RPC_OVERFLOW_MESSAGE);
        else rpc_call_finish(w->call, GRPC_STATUS_CANCELLED, "watch ended");
        free(w->service);
        free(w);
    }
}

int health_set(health *h, const char *service, health_status status) {
    pthread_mutex_lock(&h->lock);
    if (h->shut_down) status = HEALTH_NOT_SERVING;
    entry *e = find_locked(h, service);
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e || !(e->service = strdup(service))) {
            free(e);
            pthread_mutex_unlock(&h->lock);
            return -1;
        }
        e->next = h->entries;
        h->entries = e;
    } else if (e->status == status) {
        pthread_mutex_unlock(&h->lock);
        return 0;
    }
    e->status = status;
    notify_locked(h, service);
    pthread_mutex_unlock(&h->lock);
    return 0;
}

health_status health_get(health *h, const char *service) {
    pthread_mutex_lock(&h->lock);
    entry *e = find_locked(h, service);
    health_status st = e ? e->status : HEALTH_UNKNOWN;
    pthread_mutex_unlock(&h->lock);
    return st;
}

void health_shutdown(health *h) {
    pthread_mutex_lock(&h->lock);
    h->shut_down = 1;
    for (entry *e = h->entries; e; e = e->next) e->status = HEALTH_NOT_SERVING;
    notify_locked(h, NULL);
    pthread_mutex_unlock(&h->lock);
}

/* ---- handlers ---- */

/* Service names are looked up, and a watcher keeps its own for the
 * stream's life: longer than any real one is refused up front. */
static grpc_status_code check_name(rpc_call *call, const char *service) {
    if (strlen(service) <= HEALTH_SERVICE_NAME_MAX) return GRPC_STATUS_OK;
    rpc_call_set_error(call, "the service name is over %d bytes: no service is named so",
                       HEALTH_SERVICE_NAME_MAX);
    return GRPC_STATUS_INVALID_ARGUMENT;
}

static grpc_status_code check(rpc_call *call, const ProtobufCMessage *req_msg,
                              ProtobufCMessage *resp_msg, void *arg) {
    health *h = arg;
    const Grpc__Health__V1__HealthCheckRequest *req = (const void *)req_msg;
    Grpc__Health__V1__HealthCheckResponse *resp = (void *)resp_msg;
    const char *service = req->service ? req->service : "";
    RPC_CHECK(check_name(call, service));
    health_status st = health_get(h, service);
    if (st == HEALTH_UNKNOWN) {
        rpc_call_set_error(call, "unknown service \"%s\"", service);
        return GRPC_STATUS_NOT_FOUND;
    }
    resp->status = st == HEALTH_SERVING
                       ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
                       : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
    return GRPC_STATUS_OK;
}

static void watch_cancelled(rpc_call *call, void *arg) {
    health *h = arg;
    pthread_mutex_lock(&h->lock);
    for (watcher **pp = &h->watchers; *pp; pp = &(*pp)->next) {
        watcher *w = *pp;
        if (w->call != call) continue;
        *pp = w->next;
        h->nwatchers--;
        free(w->service);
        free(w);
        pthread_mutex_unlock(&h->lock);
        rpc_call_finish(call, GRPC_STATUS_CANCELLED, "watch cancelled");
        return;
    }
    pthread_mutex_unlock(&h->lock);
}

static grpc_status_code watch(rpc_call *call, const ProtobufCMessage *req_msg, void *arg) {
    health *h = arg;
    const Grpc__Health__V1__HealthCheckRequest *req = (const void *)req_msg;
    RPC_CHECK(check_name(call, req->service ? req->service : ""));
    watcher *w = calloc(1, sizeof *w);
    if (!w || !(w->service = strdup(req->service ? req->service : ""))) {
        free(w);
        rpc_call_set_error(call, "out of memory");
        return GRPC_STATUS_RESOURCE_EXHAUSTED;
    }
    w->call = call;
    w->last_sent = -1;
    pthread_mutex_lock(&h->lock);
    if (h->nwatchers >= h->max_watchers) {
        pthread_mutex_unlock(&h->lock);
        free(w->service);
        free(w);
        rpc_call_set_error(call,
                           "%d Health/Watch streams are open, this server's limit "
                           "(--max-health-watchers); poll Health/Check instead",
                           h->max_watchers);
        return GRPC_STATUS_RESOURCE_EXHAUSTED;
    }
    if (update_watcher_locked(h, w) != 0 || rpc_call_on_cancel(call, watch_cancelled, h) != 0) {
        pthread_mutex_unlock(&h->lock);
        free(w->service);
        free(w);
        return GRPC_STATUS_CANCELLED;
    }
    w->next = h->watchers;
    h->watchers = w;
    h->nwatchers++;
    pthread_mutex_unlock(&h->lock);
    return RPC_PENDING;
}

#define SVC "grpc.health.v1.Health"
static const rpc_method methods[] = {
    /* Answered while the server drains: balancers must hear NOT_SERVING. */
    {.path = "/" SVC "/Check",
     .kind = RPC_UNARY,
     .request = &grpc__health__v1__health_check_request__descriptor,
     .response = &grpc__health__v1__health_check_response__descriptor,
     .unary = check,
     .serves_while_draining = 1},
    RPC_METHOD_SERVER_STREAM(SVC, "Watch", grpc__health__v1__health_check, NULL, watch),
};

int health_register(rpc_server *srv, health *h) {
    return rpc_server_add_methods(srv, methods, sizeof methods / sizeof methods[0], h);
}
