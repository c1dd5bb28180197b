/* call_metrics: what the gRPC runtime serves, as metrics:
 *   memoryd_calls_total{method,code}           calls finished
 *   memoryd_call_duration_seconds{method}      their latency (histogram)
 *   memoryd_calls_in_flight                    calls being handled
 *   memoryd_streams_open                       server streams being served
 * method is a registered method's path, or "other" for every path nobody
 * registered (so a client cannot grow the label set). Recording is an
 * rpc observer: two relaxed atomic adds and a histogram bucket per call. */
#ifndef MEMORYD_METRICS_CALL_METRICS_H
#define MEMORYD_METRICS_CALL_METRICS_H

#include "service/rpc/rpc.h"

typedef struct call_metrics call_metrics;

/* Registers the observer on srv and the collector. Call once every method
 * is registered and before rpc_server_start (the label set is the method
 * table then). *out is freed with call_metrics_free, after srv stopped.
 * Returns 0, or -1 (out of memory, registry full). */
int call_metrics_create(rpc_server *srv, call_metrics **out);
void call_metrics_free(call_metrics *m);

#endif
