/* pg_params: the libpq connection parameters of memoryd's PostgreSQL
 * pools (pg_pool, apg): the URL's own, with memoryd's settings added to
 * its "options" (the server's per-connection settings):
 * client_connection_check_interval, so a server waiting on a lock or a
 * long statement notices within PG_CHECK_INTERVAL_MS that the client cut
 * the connection (a cancel, a passed deadline) and stops. Also
 * application_name "memoryd" unless the URL names one. No I/O. */
#ifndef MEMORYD_STORE_PG_PARAMS_H
#define MEMORYD_STORE_PG_PARAMS_H

#include <libpq-fe.h>
#include <stddef.h>

#define PG_CHECK_INTERVAL_MS 100

typedef struct pg_params {
    const char **kw, **vals; /* NULL-terminated: PQconnectStartParams(kw, vals, 0) */
    PQconninfoOption *info;  /* private: the parsed URL the values point into */
    char *options;           /* private */
} pg_params;

/* 0, or -1 with err (a bad URL, out of memory; pp is then freed). */
int pg_params_init(pg_params *pp, const char *url, char *err, size_t errlen);
void pg_params_free(pg_params *pp); /* accepts a zeroed one */

#endif
