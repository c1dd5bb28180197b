/* aredis_uv: hiredis's asynchronous context on a libuv loop, for aredis.
 * hiredis ships an adapter (adapters/libuv.h), but the one in Debian's
 * hiredis 0.14 drops every poll callback that carries an error status: a
 * peer that resets the connection (a Redis killed with SIGKILL) makes
 * libuv report POLLERR once and stop the watcher, and hiredis never reads
 * the error, so the connection looks up while nothing answers. Here an
 * error status is handed to hiredis as readiness, so its read finds the
 * error and the connection is closed at once. */
#ifndef MEMORYD_STORE_AREDIS_UV_H
#define MEMORYD_STORE_AREDIS_UV_H

#include <hiredis/async.h>
#include <uv.h>

/* Watches ac's socket on loop (the loop's thread only). REDIS_OK, or
 * REDIS_ERR (already attached, out of memory, libuv refused the fd); on
 * REDIS_ERR the caller frees ac. hiredis frees the watcher with ac. */
int aredis_uv_attach(redisAsyncContext *ac, uv_loop_t *loop);

#endif
