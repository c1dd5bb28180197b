/* redis_url: parses redis://[[user]:password@]host[:port][/db] (no I/O, so
 * tests and fuzzers can feed it strings). */
#ifndef MEMORYD_STORE_REDIS_URL_H
#define MEMORYD_STORE_REDIS_URL_H

#include <stddef.h>

typedef struct redis_url {
    char host[256];
    int port;           /* default 6379 */
    char password[256]; /* empty: no AUTH */
    int db;             /* default 0 */
} redis_url;

/* Returns 0, or -1 with what is wrong in err. */
int redis_url_parse(const char *url, redis_url *out, char *err, size_t errlen);

#endif
