/* redis_script: a Lua script run in Redis on the event loop (aredis.h),
 * as EVALSHA, and as EVAL when Redis does not know the script yet
 * (NOSCRIPT: after a restart or a SCRIPT FLUSH). A module keeps its
 * scripts in a static table; each is hashed on its first run. Each run is
 * a redis_eval in memory that outlives the command (a call's arena). What a script takes and
 * answers is its module's business. */
#ifndef MEMORYD_STORE_REDIS_SCRIPT_H
#define MEMORYD_STORE_REDIS_SCRIPT_H

#include <stddef.h>
#include <stdint.h>

#include "service/core/arena.h"
#include "service/store/aredis.h"

typedef struct redis_script {
    const char *name; /* "blackboard post": errors */
    const char *body;
    size_t len;
    char sha[41]; /* hex SHA-1 of body, once hashed */
    int hashed;   /* private (atomic builtins: C++ includes this header too): sha is filled */
} redis_script;
/* A table entry: REDIS_SCRIPT("blackboard post", post_body). */
#define REDIS_SCRIPT(name_, body_)                                                                 \
    { .name = (name_), .body = (body_), .len = sizeof(body_) - 1 }

/* One run: the caller fills argv from index REDIS_EVAL_ARGV0 (KEYS then
 * ARGV), then redis_eval_submit. done runs once on the loop thread as
 * aredis's does (status, and the reply on STATUS_OK). */
#define REDIS_EVAL_ARGV0 3 /* EVALSHA <sha> <numkeys> */
typedef struct redis_eval redis_eval;
struct redis_eval {
    aredis_cmd cmd; /* first: cancel it with aredis_cancel(r, &e->cmd) */
    aredis *r;
    redis_script *script;
    const char **argv;
    size_t *lens;
    int argc, nkeys;
    int retried;
    int wait_reply; /* a write: aredis_cmd.wait_reply (set before submitting) */
    void (*done)(redis_eval *e, int status, redisReply *reply);
    void *arg; /* the caller's */
};

/* Readies e for script (hashing it on its first run; thread-safe) with
 * room for nkeys + nargs words in arena a: 0, or -1 when out of memory. */
int redis_eval_init(redis_eval *e, aredis *r, arena *a, redis_script *script, int nkeys, int nargs);
/* Word i (from 0, KEYS first) of the run. */
void redis_eval_word(redis_eval *e, int i, const char *s, size_t len);
/* Sends it with deadline_ms (what: "session get", for errors). */
void redis_eval_submit(redis_eval *e, const char *what, int64_t deadline_ms);

#endif
