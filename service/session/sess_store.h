/* sess_store: sessions in Redis, each operation one script (sess_lua.h)
 * on the event loop, and its answer decoded. No gRPC: the handlers
 * (sess_service.c) map the codes.
 *
 * Keys: a session is "memoryd:session:<tenant length>:<tenant>:<id>"; its
 * owner's index "memoryd:sessions:<tenant length>:<tenant>:<owner
 * length>:<owner>" (lengths first: no two tenants or owners share a key). */
#ifndef MEMORYD_SESSION_SESS_STORE_H
#define MEMORYD_SESSION_SESS_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "service/core/arena.h"
#include "service/session/sess_lua.h"
#include "service/session/sess_record.h"
#include "service/store/aredis.h"
#include "service/store/redis_script.h"

/* A session as a script reports it. */
typedef struct sess_info {
    const char *id;
    int state; /* memory.v1.SessionState */
    const char *owner;
    int durable;
    int64_t duration_ms, create_ms, expire_ms, purge_ms; /* Unix ms */
} sess_info;

/* Who calls: the scripts' ARGV[2..3]. */
typedef struct sess_caller {
    const char *tenant;
    const char *sub;
    int all; /* may touch other principals' sessions (session:...:all) */
} sess_caller;

/* One script run and its answer. Lives in the call's arena. */
typedef struct sess_op sess_op;
struct sess_op {
    redis_eval e; /* first: the eval's done finds the op */
    arena *a;
    const char *id;
    int code;       /* SESS_*, on STATUS_OK */
    sess_info info; /* when the session was there */
    sess_rec *recs; /* GET (one), SET (its header), LIST */
    size_t nrecs;
    int64_t count;    /* END: records; ERASE: records erased */
    const char *full; /* SESS_FULL: "keys" or "bytes" */
    int64_t over[3];  /* SESS_OVER_QUOTA: the quota (0-based TIER_QUOTA_*), use, use after */
    int64_t use[4];   /* Start and Set that went: the uses after them (TIER_QUOTA_* order) */
    int has_use;
    int with_values; /* LIST */
    char err[256];   /* on a failure status */
    void (*done)(sess_op *op, int status);
    void *arg; /* the caller's */
};

/* Session id's key in a (NULL when out of memory). */
const char *sess_key(arena *a, const char *tenant, const char *id, size_t *len);

/* Readies op for script on session id of caller's tenant, with nargs
 * words after the common three (ARGV[4..]): fill them with
 * sess_op_arg, then sess_op_submit. 0, or -1 when out of memory. */
int sess_op_init(sess_op *op, aredis *r, arena *a, sess_script_id script, const sess_caller *who,
                 const char *id, int nargs);
void sess_op_arg(sess_op *op, int i, const char *s, size_t len);
/* sess_op_arg of a number (in the arena): 0, or -1 when out of memory. */
int sess_op_num(sess_op *op, int i, int64_t v);
/* Sends it; done runs once on the loop thread with STATUS_OK (op->code
 * and what the script answered decoded) or a failure (op->err). */
void sess_op_submit(sess_op *op, int64_t deadline_ms);

#endif
