/* metrics_http: the Prometheus scrape endpoint, GET /metrics on its own
 * HTTP listener (libmicrohttpd, one thread of its own), apart from the
 * gRPC port so it can stay inside the cluster network. Every other path
 * is 404, every other method 405. */
#ifndef MEMORYD_METRICS_METRICS_HTTP_H
#define MEMORYD_METRICS_METRICS_HTTP_H

#include <stddef.h>

typedef struct metrics_http metrics_http;

/* Listens on listen ("host:port"; port 0 picks a free one; host a name or
 * an address, [v6] in brackets). *out is freed with metrics_http_stop.
 * Returns 0, or -1 with the reason in err. */
int metrics_http_start(const char *listen, metrics_http **out, char *err, size_t errlen);
/* The port bound. */
int metrics_http_port(const metrics_http *h);
/* Stops listening and frees h (NULL is fine). */
void metrics_http_stop(metrics_http *h);

#endif
