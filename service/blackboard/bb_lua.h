/* bb_lua: the blackboard's Redis scripts, and running one on the event
 * loop. Every change to a board is one script (check, write, bump the
 * revision, append to the change log, publish), so Redis applies it
 * atomically: no other writer slips in between a compare and its set.
 * Scripts go as EVALSHA (the body is hashed once, at start-up), and as
 * EVAL when Redis does not know the script yet (NOSCRIPT: after a restart
 * or a SCRIPT FLUSH).
 *
 * Every board script takes the board's keys (bb_codec.h, in bb_key order)
 * and the lease index as KEYS, and as ARGV[1..4]: the board's base, its
 * channel, the change log's most entries and most bytes. What each takes
 * after that and what it answers is in bb_store.c, its one caller. */
#ifndef MEMORYD_BLACKBOARD_BB_LUA_H
#define MEMORYD_BLACKBOARD_BB_LUA_H

#include <stddef.h>

#include "service/core/arena.h"
#include "service/store/aredis.h"
#include "service/store/redis_script.h"

typedef redis_script bb_script;

typedef enum bb_script_id {
    BB_SCRIPT_POST = 0,   /* set or delete one key */
    BB_SCRIPT_SYNC = 1,   /* a snapshot, or the changes after a revision */
    BB_SCRIPT_SWEEP = 2,  /* delete one board's keys whose lease ran out */
    BB_SCRIPT_DUE = 3,    /* the boards with a lease that ran out */
    BB_SCRIPT_ERASE = 4,  /* delete one board's keys of a data subject */
    BB_SCRIPT_EXPORT = 5, /* read one board's keys of a data subject */
    BB_SCRIPT_COUNT = 6,
} bb_script_id;

/* The script (redis_script hashes it on its first run). */
bb_script *bb_script_get(bb_script_id id);

/* One script run on the event loop (store/redis_script.h): the caller fills
 * argv from index BB_EVAL_ARGV0 (KEYS then ARGV), then bb_eval_submit. */
#define BB_EVAL_ARGV0 REDIS_EVAL_ARGV0
typedef redis_eval bb_eval;

/* Readies e for script with room for n KEYS+ARGV words in arena a; -1 when
 * out of memory. Then set e->argv[BB_EVAL_ARGV0 + i] / e->lens[...]. */
int bb_eval_init(bb_eval *e, aredis *r, arena *a, bb_script_id script, int nkeys, int nargs);
/* Sends it with deadline_ms (what: "blackboard post", for errors). */
#define bb_eval_submit redis_eval_submit

#endif
