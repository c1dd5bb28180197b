/* redis_script: a Lua script run in Redis on the event loop (aredis.h),
 * as EVALSHA, and as EVAL when Redis does not know the script yet
 * (NOSCRIPT: after a restart or a SCRIPT FLUSH). A module keeps its
 * scripts in a table and hashes them once (redis_scripts_hash, under its
 * own pthread_once); each run is a redis_eval in memory that outlives the
 * command (a call's arena). What a script takes and answers is its
 * module's business. */
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
    char sha[41]; /* hex SHA-1 of body: redis_scripts_hash */
} redis_script;

/* Fills the sha of scripts[0..n): once, before any run (pthread_once). */
void redis_scripts_hash(redis_script *scripts, size_t n);

/* One run: the caller fills argv from index REDIS_EVAL_ARGV0 (KEYS then
 * ARGV), then redis_eval_submit. done runs once on the loop thread as
 * aredis's does (status, and the reply on STATUS_OK). */
#define REDIS_EVAL_ARGV0 3 /* EVALSHA <sha> <numkeys> */
typedef struct redis_eval redis_eval;
struct redis_eval {
    aredis_cmd cmd; /* first: cancel it with aredis_cancel(r, &e->cmd) */
    aredis *r;
    const redis_script *script;
    const char **argv;
    size_t *lens;
    int argc, nkeys;
    int retried;
    void (*done)(redis_eval *e, int status, redisReply *reply);
    void *arg; /* the caller's */
};

/* Readies e for script (hashed) with room for nkeys + nargs words in arena
 * a: 0, or -1 when out of memory. */
int redis_eval_init(redis_eval *e, aredis *r, arena *a, const redis_script *script, int nkeys,
                    int nargs);
/* Word i (from 0, KEYS first) of the run. */
void redis_eval_word(redis_eval *e, int i, const char *s, size_t len);
/* Sends it with deadline_ms (what: "session get", for errors). */
void redis_eval_submit(redis_eval *e, const char *what, int64_t deadline_ms);

#endif
