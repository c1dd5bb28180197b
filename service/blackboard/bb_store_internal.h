/* bb_store_internal: what bb_store.c (a board's scripts) and
 * bb_store_tenant.c (a tenant's boards, for erasure and export) share: how
 * a script's words are laid out. Not for other modules. */
#ifndef MEMORYD_BLACKBOARD_BB_STORE_INTERNAL_H
#define MEMORYD_BLACKBOARD_BB_STORE_INTERNAL_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "service/blackboard/bb_store.h"
#include "service/core/arena.h"

#define BOARD_KEYS (BB_KEY_COUNT + 1) /* the board's, then the lease index */
#define BOARD_ARGS 4                  /* base, channel, log entries, log bytes */

/* Sets word i (counting from the first KEY) to s[0..len). */
void bb_store_word(bb_eval *e, int i, const char *s, size_t len);
/* Word i as the decimal v, in a: 0, or -1 when out of memory. */
int bb_store_number(bb_eval *e, arena *a, int i, int64_t v);
/* The KEYS and ARGV[1..4] every board script takes; the next word's
 * index in *next. 0, or -1 when out of memory. */
int bb_store_board_words(bb_eval *e, arena *a, const bb_names *n, const bb_limits *lim, int *next);
/* An integer reply (or a decimal string) as a number; -1 otherwise. */
int64_t bb_store_integer(const redisReply *r);
int bb_store_is_string(const redisReply *r);
/* A reply the scripts never give: the data in Redis is not ours.
 * STATUS_EUNAVAILABLE with err. */
int bb_store_malformed(char *err, size_t errlen, const char *what);

#endif
