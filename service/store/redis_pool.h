/* redis_pool: a fixed-size pool of hiredis connections with reconnection
 * and backoff (conn_pool.h). */
#ifndef MEMORYD_STORE_REDIS_POOL_H
#define MEMORYD_STORE_REDIS_POOL_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

typedef struct redis_pool redis_pool;

/* Creates a pool for url (see redis_url.h) and opens one connection.
 * Returns 0 when connected; 1 when the pool was created but Redis did not
 * answer (reason in err; the pool reconnects later, Redis being optional);
 * -1 with *out untouched for a malformed URL. timeout_ms bounds connecting
 * and every command. */
int redis_pool_create(const char *url, int size, int timeout_ms, redis_pool **out, char *err,
                      size_t errlen);
void redis_pool_free(redis_pool *p); /* accepts NULL */

/* A connected context or NULL (reason in err) when Redis is unreachable or
 * nothing frees up before deadline_ms (CLOCK_MONOTONIC). Its commands time
 * out at deadline_ms (or the pool's timeout, whichever is sooner). */
redisContext *redis_pool_acquire(redis_pool *p, int64_t deadline_ms, char *err, size_t errlen);
/* broken=1 after an I/O or protocol error: the context is reopened later. */
void redis_pool_release(redis_pool *p, redisContext *c, int broken);

/* A new connection outside the pool (same URL, AUTH, SELECT, timeout), for
 * a long-lived use such as SUBSCRIBE; the caller frees it with redisFree.
 * NULL with the reason in err. */
redisContext *redis_pool_open(redis_pool *p, char *err, size_t errlen);

/* PING on a pooled connection; 0 when Redis answers PONG. */
int redis_pool_ping(redis_pool *p, int64_t deadline_ms);

/* s[0..n) for a SCAN MATCH pattern, its glob characters (* ? [ ] \)
 * escaped, into out (room for 2 * n bytes; not NUL-terminated): the
 * pattern's length. A tenant's text matches only itself. */
size_t redis_glob_escape(const char *s, size_t n, char *out);

#endif
