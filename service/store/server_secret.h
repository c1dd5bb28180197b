/* server_secret: secrets every replica of one deployment shares, kept in
 * PostgreSQL (server_secrets): the first replica to ask for a name creates
 * it from the system's random source, the others read that one. What is
 * keyed with them (page-token seals) then verifies on any replica and on
 * no other deployment. */
#ifndef MEMORYD_STORE_SERVER_SECRET_H
#define MEMORYD_STORE_SERVER_SECRET_H

#include <stddef.h>

#include "service/store/pg_pool.h"

#define SERVER_SECRET_LEN 32

/* The secret called name into out (SERVER_SECRET_LEN bytes), created when
 * absent. 0, or -1 with err (PostgreSQL unreachable, no entropy). Blocks
 * for at most a few seconds: for start-up. */
int server_secret_get(pg_pool *pg, const char *name, unsigned char *out, char *err, size_t errlen);

#endif
