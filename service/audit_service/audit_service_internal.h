/* audit_service_internal: what audit_service.c (the tier), audit_list.c
 * (Audit.List) and audit_watch.c (Audit.Watch and the listener) share. Not
 * for other modules. */
#ifndef MEMORYD_AUDIT_SERVICE_AUDIT_SERVICE_INTERNAL_H
#define MEMORYD_AUDIT_SERVICE_AUDIT_SERVICE_INTERNAL_H

#include "service/audit/audit_codec.h"
#include "service/audit_service/audit_service.h"
#include "service/tier/tier_sql.h"

#include <pthread.h>

typedef struct audit_watch audit_watch;

struct audit_service {
    pg_pool *pg;
    tier_store store; /* Audit.List on the event loop */
    audit_service_options o;
    audit_watch *watch;
};

/* The caller of an Audit method (what: "Audit.List") and the filter it
 * asked for, narrowed to its own records without the :all breadth:
 * UNAUTHENTICATED, PERMISSION_DENIED or INVALID_ARGUMENT otherwise. */
grpc_status_code audit_caller_filter(rpc_call *call, const char *what,
                                     const Memory__V1__AuditFilter *in, const principal **p,
                                     audit_filter *f);

RPC_UNARY_FN(audit_list_handler);

/* ---- audit_watch.c ---- */
int audit_watch_start(audit_service *a, char *err, size_t errlen);
/* Stops the listener and ends open streams with UNAVAILABLE; accepts a
 * NULL a->watch. */
void audit_watch_stop(audit_service *a);
grpc_status_code audit_watch_handler(rpc_call *call, const ProtobufCMessage *req, void *arg);
size_t audit_watch_count(audit_service *a);

/* ---- audit_watch.c and audit_listener.c: Audit.Watch ---- */

#define LISTEN_WAIT_MS 5000 /* how long a new Watch waits for LISTEN to be up */
#define POLL_MS 250
#define LIVE_CHECK_MS 1000
#define FETCH_CHUNK 1000
#define CATCHUP_MAX 10000
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define LISTENER_TIMEOUT_MS 10000 /* statement_timeout on the listener connection */

typedef struct watcher {
    struct watcher *next;
    rpc_call *call;
    principal *p; /* our reference: tenant and sub below point into it */
    const char *tenant;
    audit_filter f; /* strings in strs */
    char *strs;
    uint64_t start_seq; /* notifications read before the stream registered */
    char why[192];      /* why the listener ends it */
} watcher;

struct audit_watch {
    audit_service *a;
    pthread_mutex_t lock; /* list, n, listening, seq, stop */
    pthread_cond_t cond;  /* listening or stop changed */
    watcher *list;
    size_t n;
    int listening;
    int stop;
    uint64_t seq;
    struct worker *thread; /* the listener */
    int wake_fd;           /* eventfd: audit_watch_stop interrupts the poll */

    /* Listener thread only. */
    PGconn *conn;
    PGcancel *cancel; /* for conn; guarded by lock (audit_watch_stop uses it) */
    /* Connection parameters copied from a pooled connection: keys, vals
     * and their text in one malloc'd block (at keys). */
    const char **keys, **vals;
    int64_t max_seen; /* highest audit_log id announced or caught up */
    int64_t *recent;  /* ids delivered by the last catch-up (sorted) */
    size_t nrecent;
    arena *scratch; /* target arrays of fetched rows */
};

/* audit_watch.c: hands row (of notification seq) to every stream it
 * matches; ends streams whose token died. Listener thread only. */
void audit_watch_fan_out(audit_watch *w, const audit_row *row, uint64_t seq);
void audit_watch_check_live(audit_watch *w);
/* audit_listener.c: the listener thread's body (arg: the audit_watch). */
void audit_listener_main(struct worker *thread, void *arg);

#endif
