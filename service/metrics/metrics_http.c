/* metrics_http: see metrics_http.h. */
#include "service/metrics/metrics_http.h"

#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "service/metrics/metrics.h"

struct metrics_http {
    struct MHD_Daemon *daemon;
    int port;
};

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *text) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls) {
    (void)cls, (void)version, (void)upload_data, (void)con_cls;
    if (*upload_data_size != 0) { /* a body nobody asked for: ignore it */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (strcmp(url, "/metrics") != 0)
        return reply(conn, MHD_HTTP_NOT_FOUND, "not found: GET /metrics\n");
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "GET /metrics\n");
    size_t len = 0;
    char *text = metrics_render(&len);
    if (!text) return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* Splits "host:port" / "[v6]:port" into host and port strings. */
static int split_listen(const char *listen, char *host, size_t hostlen, char *port,
                        size_t portlen) {
    const char *colon = strrchr(listen, ':');
    if (!colon || colon[1] == '\0' || strlen(colon + 1) >= portlen) return -1;
    const char *h = listen;
    size_t n = (size_t)(colon - listen);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') h++, n -= 2;
    if (n == 0 || n >= hostlen) return -1;
    memcpy(host, h, n);
    host[n] = '\0';
    strcpy(port, colon + 1);
    for (const char *p = port; *p; p++)
        if (*p < '0' || *p > '9') return -1;
    return atoi(port) <= 65535 ? 0 : -1;
}

int metrics_http_start(const char *listen, metrics_http **out, char *err, size_t errlen) {
    char host[256], port[8];
    if (split_listen(listen, host, sizeof host, port, sizeof port) != 0) {
        snprintf(err, errlen, "--metrics-listen: %s is not host:port", listen);
        return -1;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(host, port, &hints, &ai);
    if (gai != 0) {
        snprintf(err, errlen, "--metrics-listen: %s: %s", listen, gai_strerror(gai));
        return -1;
    }
    metrics_http *h = calloc(1, sizeof *h);
    if (!h) {
        freeaddrinfo(ai);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->daemon = MHD_start_daemon(flags, 0, NULL, NULL, handle, NULL, MHD_OPTION_SOCK_ADDR,
                                 ai->ai_addr, MHD_OPTION_CONNECTION_LIMIT, 64u,
                                 MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->daemon) {
        free(h);
        snprintf(err, errlen, "--metrics-listen: cannot listen on %s (in use?)", listen);
        return -1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : atoi(port);
    *out = h;
    return 0;
}

int metrics_http_port(const metrics_http *h) { return h->port; }

void metrics_http_stop(metrics_http *h) {
    if (!h) return;
    MHD_stop_daemon(h->daemon);
    free(h);
}
