/* bb_store: the blackboard's operations on Redis, each one script
 * (bb_lua.h) run on the event loop, with its arguments marshalled and its
 * answer parsed; and the erasure (Privacy.Forget) and export
 * (Privacy.Export) of a data subject, which run the same way but blocking
 * on a pooled connection, as erasers and exporters do. No
 * gRPC: callers give the caller's identity and breadths, and get STATUS_*
 * codes (core/status.h) with the reason.
 *
 * Every operation lives in memory that outlives the command (a call's
 * arena, or one the caller owns), and its done runs once on the loop
 * thread. Whatever done is handed that points into Redis's reply is valid
 * during done only. */
#ifndef MEMORYD_BLACKBOARD_BB_STORE_H
#define MEMORYD_BLACKBOARD_BB_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "service/blackboard/bb_codec.h"
#include "service/blackboard/bb_lua.h"
#include "service/core/arena.h"
#include "service/store/aredis.h"
#include "service/store/redis_pool.h"
#include "service/tier/tier_erase.h"
#include "service/tier/tier_quota.h"

/* The bounds every board has (bb_service.c fills them from the flags). */
typedef struct bb_limits {
    int max_keys;           /* keys per board */
    int64_t max_bytes;      /* the items' encoded bytes per board */
    int64_t default_ttl_ms; /* a new board's, when the post gives none */
    int log_entries;        /* change log: most entries ... */
    int64_t log_bytes;      /* ... and bytes */
    tier_quota *quota;      /* the tenants' and principals' quotas (NULL: none); borrowed */
} bb_limits;

/* Who asks: the read and write diodes' inputs. */
typedef struct bb_caller {
    const char *sub;
    int clr;       /* read ceiling: labels above it are hidden and untouchable */
    int read_all;  /* blackboard:read:all: others' keys are visible */
    int write_all; /* blackboard:write:all: others' keys may be changed */
} bb_caller;

/* ---- Post ---- */

typedef struct bb_post_in {
    const char *key;
    int del;
    const char *json; /* the value (not with del) */
    size_t json_len;
    int has_expected;
    int64_t expected;
    int label;          /* the write diode's stamp (the script keeps the old one if higher) */
    int64_t ttl_ms;     /* 0: unset */
    int64_t lease_ms;   /* 0: none */
    unsigned pii;       /* kinds the value holds (written with pii:write) */
    int64_t size;       /* the item's encoded bytes, for the board's limit */
    unsigned id_random; /* 16 random bits: the tail of the id of a board this post creates */
} bb_post_in;

typedef struct bb_post bb_post;
struct bb_post {
    bb_eval e; /* first: the eval's done finds the post */
    /* set by the caller */
    void (*done)(bb_post *p, int status);
    void *arg;
    /* the answer on STATUS_OK: the item's header (its owner in the arena) */
    int64_t rev, expire_ms;
    int created;
    bb_header h;
    const char *board_id; /* in the arena */
    char err[256];        /* why, on failure */
    arena *ar;
    int read_all; /* the caller's: may the version of another's key be named */
    tier_quota *quota;
};
/* Starts p on board n for caller c (in and c themselves may go when this
 * returns; the strings they point to are borrowed until done):
 * 0, or -1 when out of memory (done never runs). Codes: STATUS_OK,
 * STATUS_EDENIED (the key's label is above c's clearance, or another's
 * key without write_all), STATUS_ECONFLICT (not the expected version),
 * STATUS_ENOTFOUND (delete of a missing key), STATUS_EPRECONDITION (the
 * board is full or would pass its byte limit), STATUS_EQUOTA (the change
 * would pass a quota of lim->quota: p->err names it), or the backend's codes
 * (EUNAVAILABLE, ETIMEOUT, ECANCELLED, EBUSY). */
int bb_post_start(bb_post *p, aredis *r, arena *a, const bb_names *n, const bb_limits *lim,
                  const bb_caller *c, const bb_post_in *in, int64_t deadline_ms);

/* ---- a snapshot, or the changes after a revision (Read, Subscribe) ---- */

typedef struct bb_item {
    const char *key; /* not NUL-terminated */
    size_t key_len;
    bb_header h;
    const char *json;
    size_t json_len;
} bb_item;

typedef struct bb_sync bb_sync;
struct bb_sync {
    bb_eval e; /* first */
    void (*done)(bb_sync *s, int status);
    void *arg;
    /* the answer on STATUS_OK (pointing into the reply: valid during done) */
    int snapshot; /* 1: items (ordered by key); 0: events after `after` */
    int64_t rev, expire_ms, now_ms;
    const char *board_id; /* "" without a board */
    size_t board_id_len;
    bb_item *items; /* in the arena */
    size_t nitems;
    bb_event *events;
    size_t nevents;
    char err[256];
    arena *ar;
};
/* A snapshot of what c may see (after < 0), or the changes after revision
 * `after` of board board_id when the log still has them (else a snapshot
 * anyway). 0, or -1 when out of memory (done never runs). */
int bb_sync_start(bb_sync *s, aredis *r, arena *a, const bb_names *n, const bb_limits *lim,
                  const bb_caller *c, int64_t after, const char *board_id, int64_t deadline_ms);

/* ---- leases that ran out (any replica; the scripts are idempotent) ---- */

typedef struct bb_sweep bb_sweep;
struct bb_sweep {
    bb_eval e; /* first */
    void (*done)(bb_sweep *s, int status);
    void *arg;
    /* the due step's answer: the boards' bases (valid during done) */
    const char **bases;
    size_t *base_lens;
    size_t nbases, cap;
    char err[256];
};
/* Asks for at most max boards with a lease that ran out. */
int bb_sweep_due_start(bb_sweep *s, aredis *r, arena *a, int max, int64_t deadline_ms);
/* Expires the due leases of board n (DELETE events with cause expiry). */
int bb_sweep_board_start(bb_sweep *s, aredis *r, arena *a, const bb_names *n, const bb_limits *lim,
                         int64_t deadline_ms);

/* ---- erasure (tier/tier_erase.h) ---- */

/* Erases (or with sel->dry_run counts) the keys of every board of
 * sel->tenant that sel selects: owned by sel->owner and/or with a value
 * whose top-level "subject_id" is sel->subject_id, whatever their labels.
 * Boards are found by SCAN (bounded steps, never KEYS); each board's keys
 * go in one script (BB_SCRIPT_ERASE), each as a delete by a post: a
 * revision, a DELETE in the change log, published to every replica's
 * streams. Blocks on a connection of redis (borrowed) until c->deadline_ms
 * at most, or until c->cancel fires. STATUS_OK with *count (keys erased,
 * or that would be); else STATUS_EUNAVAILABLE (Redis down or refusing),
 * STATUS_ETIMEOUT, STATUS_ECANCELLED or STATUS_ENOMEM with c->err, and
 * *count the keys erased before the failure (run it again: it is
 * idempotent). Only the selection is read from c (and its deadline,
 * cancel and err): the principal is not consulted. */
int bb_erase_tenant(redis_pool *redis, const bb_limits *lim, tier_ctx *c, const tier_erase_sel *sel,
                    int64_t *count);

/* ---- export (tier/tier_erase.h) ---- */

/* Hands emit (with emit_arg) every item of every board of sel->tenant
 * that erasure with sel would select (owner and/or subject id, as
 * bb_erase_tenant), less those labelled above sel->max_label when it is
 * set (an export is a read) and those whose lease ran out: kind
 * "blackboard_item", id "<task_id>/<key>", json the item's value (a JSON
 * object as stored; any other JSON value as {"value": <it>}), meta its
 * header's (tenant, owner, label, version = the revision of its last
 * change, create and update times, PII kinds, the board's expiry). The
 * record lives in this function's memory until emit returns. Changes
 * nothing in Redis: each board is read by one read-only script
 * (BB_SCRIPT_EXPORT), so its items are one revision's, and one board's
 * items at most are held at a time. A retention selection (tier_erase_is_
 * retention), or one with neither owner nor subject, exports nothing.
 * Blocks on a connection of redis (borrowed) until c->deadline_ms at most,
 * or until c->cancel fires, checked between boards. STATUS_OK; emit's code
 * when it returns one (the export stops there, c->err untouched); else
 * STATUS_EUNAVAILABLE (Redis down, refusing, or answering what memoryd did
 * not write), STATUS_ETIMEOUT, STATUS_ECANCELLED or STATUS_ENOMEM with
 * c->err, the records emitted before it standing. Only the selection is
 * read from c (and its deadline, cancel and err): the principal is not
 * consulted. */
int bb_export_tenant(redis_pool *redis, tier_ctx *c, const tier_erase_sel *sel,
                     tier_export_emit emit, void *emit_arg);

#endif
