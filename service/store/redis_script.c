/* redis_script: see redis_script.h. */
#include "service/store/redis_script.h"

#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "service/core/status.h"

static pthread_mutex_t hashing = PTHREAD_MUTEX_INITIALIZER;

/* s's sha, computed on first use: once hashed, a load and no lock. */
static const char *sha_of(redis_script *s) {
    if (__atomic_load_n(&s->hashed, __ATOMIC_ACQUIRE)) return s->sha;
    pthread_mutex_lock(&hashing);
    if (!__atomic_load_n(&s->hashed, __ATOMIC_RELAXED)) {
        unsigned char d[SHA_DIGEST_LENGTH];
        SHA1((const unsigned char *)s->body, s->len, d);
        for (int j = 0; j < SHA_DIGEST_LENGTH; j++) snprintf(s->sha + 2 * j, 3, "%02x", d[j]);
        __atomic_store_n(&s->hashed, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&hashing);
    return s->sha;
}

static void eval_done(aredis_cmd *q, int status, redisReply *reply) {
    redis_eval *e = (redis_eval *)q;
    /* Redis forgot the script (restarted, SCRIPT FLUSH): send it whole. */
    if (status == STATUS_EUNAVAILABLE && !e->retried && strstr(q->err, "NOSCRIPT")) {
        e->retried = 1;
        e->argv[0] = "EVAL";
        e->lens[0] = 4;
        e->argv[1] = e->script->body;
        e->lens[1] = e->script->len;
        aredis_submit(e->r, &e->cmd);
        return;
    }
    e->done(e, status, reply);
}

int redis_eval_init(redis_eval *e, aredis *r, arena *a, redis_script *script, int nkeys,
                    int nargs) {
    int argc = REDIS_EVAL_ARGV0 + nkeys + nargs;
    char *nk = arena_printf(a, "%d", nkeys);
    e->argv = arena_alloc(a, (size_t)argc * sizeof *e->argv);
    e->lens = arena_alloc(a, (size_t)argc * sizeof *e->lens);
    if (!nk || !e->argv || !e->lens) return -1;
    e->r = r;
    e->script = script;
    e->argc = argc;
    e->nkeys = nkeys;
    e->retried = 0;
    e->wait_reply = 0;
    e->argv[0] = "EVALSHA";
    e->lens[0] = 7;
    e->argv[1] = sha_of(script);
    e->lens[1] = 40;
    e->argv[2] = nk;
    e->lens[2] = strlen(nk);
    return 0;
}

void redis_eval_word(redis_eval *e, int i, const char *s, size_t len) {
    e->argv[REDIS_EVAL_ARGV0 + i] = s;
    e->lens[REDIS_EVAL_ARGV0 + i] = len;
}

void redis_eval_submit(redis_eval *e, const char *what, int64_t deadline_ms) {
    e->cmd = (aredis_cmd){.argc = e->argc,
                          .argv = e->argv,
                          .lens = e->lens,
                          .what = what,
                          .deadline_ms = deadline_ms,
                          .wait_reply = e->wait_reply,
                          .done = eval_done};
    aredis_submit(e->r, &e->cmd);
}
