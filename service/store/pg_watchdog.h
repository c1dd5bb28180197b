/* pg_watchdog: bounds every blocking libpq round trip by its call's
 * deadline. A session arms its connection with the deadline; if a libpq
 * call on it is still waiting grace_ms after that (a PostgreSQL that stops
 * answering: frozen, hung, partitioned; statement_timeout only helps a
 * server that still runs), the watchdog's thread shuts the connection's
 * socket down (shutdown(2), not close: the descriptor stays the session's),
 * so the blocked call returns with a lost connection, which the session
 * then reports as the deadline it is. The asynchronous pool (apg.h) needs
 * none of this; the blocking pool's sessions use it until they move.
 *
 * Thread-safe. A connection is armed by at most one session at a time and
 * must be disarmed before it is closed or handed to another. */
#ifndef MEMORYD_STORE_PG_WATCHDOG_H
#define MEMORYD_STORE_PG_WATCHDOG_H

#include <libpq-fe.h>
#include <stdint.h>

typedef struct pg_watchdog pg_watchdog;

/* Room for capacity armed connections at once (the pool's size); starts
 * the thread. 0 with *out, or -1 (out of memory or threads). */
int pg_watchdog_create(int capacity, int grace_ms, pg_watchdog **out);
/* Stops the thread and frees; accepts NULL. Nothing may be armed. */
void pg_watchdog_free(pg_watchdog *w);

/* Arms conn until deadline_ms (CLOCK_MONOTONIC ms; INT64_MAX: never cut).
 * Arming an armed connection moves its deadline. */
void pg_watchdog_arm(pg_watchdog *w, PGconn *conn, int64_t deadline_ms);
/* Cuts armed conn now, as if its deadline had passed (a client's cancel):
 * any thread; the cut itself happens on the watchdog's thread. Nothing
 * when conn is not armed. */
void pg_watchdog_expire(pg_watchdog *w, const PGconn *conn);
/* Disarms conn; 1 when the watchdog had cut it (the connection is then
 * broken: drop it), else 0. */
int pg_watchdog_disarm(pg_watchdog *w, PGconn *conn);
/* 1 when the watchdog has cut conn (it stays armed). */
int pg_watchdog_cut(pg_watchdog *w, const PGconn *conn);

#endif
