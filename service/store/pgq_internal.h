/* pgq_internal: the prepared-statement plan pgq.c and apg.c share (not for
 * other modules). A statement is prepared once per connection, named by a
 * hash of its text and parameter types; the Parse goes out in the same
 * pipeline as the first execution. */
#ifndef MEMORYD_STORE_PGQ_INTERNAL_H
#define MEMORYD_STORE_PGQ_INTERNAL_H

#include <libpq-fe.h>
#include <stdint.h>

#include "service/store/pgq.h"

struct pgq_stmt_cache;

typedef struct pgq_stmt_key {
    char *key; /* malloc'd: the text and the parameter types */
    size_t len;
    uint64_t hash;
    char name[24];
} pgq_stmt_key;

/* How one statement goes out on one connection. */
typedef struct pgq_plan {
    struct pgq_stmt_cache *cache; /* the connection's (libpq instance data) */
    pgq_stmt_key key;
    int state; /* 1 prepared, 0 to prepare now, -1 unnamed */
} pgq_plan;

/* Plans sql with q's parameter types on conn (never fails: without memory
 * the statement goes out unnamed). Release with pgq_plan_done. */
void pgq_plan_make(PGconn *conn, const char *sql, const pgq_params *q, pgq_plan *p);
/* Queues the statement on conn, which must be in pipeline mode (Parse when
 * new, then Bind/Execute). Returns how many results come before the
 * statement's own (1 with a Parse, else 0), or -1 when libpq refused. */
int pgq_plan_send(PGconn *conn, pgq_plan *p, const char *sql, const pgq_params *q);
/* Records the statement as prepared on its connection when its Parse
 * succeeded, and frees the plan's key. */
void pgq_plan_done(pgq_plan *p, int prepared_ok);

#endif
