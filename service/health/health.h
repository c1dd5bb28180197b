/* health: the grpc.health.v1.Health service (Check and Watch) over a table
 * of serving statuses, one per service name ("" is the server as a whole).
 *
 * Statuses are set by the backend probe (health_probe.h) and by shutdown;
 * Watch streams get the current status at once and every change after. */
#ifndef MEMORYD_HEALTH_HEALTH_H
#define MEMORYD_HEALTH_HEALTH_H

#include "service/rpc/rpc.h"

typedef enum {
    HEALTH_UNKNOWN = 0, /* as grpc.health.v1 SERVICE_UNKNOWN for watchers */
    HEALTH_SERVING = 1,
    HEALTH_NOT_SERVING = 2,
} health_status;

typedef struct health health;

/* Longest service name Check and Watch accept (the longest real one is
 * about 30 bytes): a watcher keeps its name for the stream's life. */
#define HEALTH_SERVICE_NAME_MAX 256

/* Returns a table knowing no services, or NULL (out of memory). At most
 * max_watchers Watch streams are open at once (<= 0: 1024); Watch is open
 * without a token, so this is what bounds its memory. */
health *health_create(int max_watchers);
/* Frees the table; watchers must be gone (server shut down). Accepts NULL. */
void health_free(health *h);

/* Declares or updates a service's status (copied name). Watchers of that
 * service are told about changes. Returns 0 or -1 (out of memory). After
 * health_shutdown every status is pinned to NOT_SERVING. Thread-safe. */
int health_set(health *h, const char *service, health_status status);
/* The status of service, HEALTH_UNKNOWN when it was never declared. */
health_status health_get(health *h, const char *service);
/* Everything NOT_SERVING for good (graceful shutdown started). */
void health_shutdown(health *h);

/* Registers /grpc.health.v1.Health/Check and Watch. h must outlive srv. */
int health_register(rpc_server *srv, health *h);

#endif
