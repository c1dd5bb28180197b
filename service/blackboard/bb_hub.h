/* bb_hub: this replica's Blackboard.Subscribe streams. One Redis
 * subscriber connection (aredis.h's pub/sub mode) on the event loop is
 * SUBSCRIBEd to the channel of every board a stream here watches; each
 * event a board's script publishes is parsed once and handed to that
 * board's streams, in revision order, through the read diode.
 *
 * A stream starts once its board's channel is subscribed: then a snapshot
 * (or, resuming, the change log after the client's revision) is read, so
 * nothing published after the subscription is missed; events that
 * arrived meanwhile are kept in the board's ring of recent events and
 * delivered after what the read returned. A gap in revisions (a lost
 * message) or a ring that no longer reaches back makes the stream catch up
 * from the change log. A stream whose client reads too slowly (its send
 * buffer full) skips events until its buffer drains, then gets a fresh
 * SNAPSHOT. When the subscriber connection drops, streams wait up to
 * --blackboard-redis-grace-ms for it to return and catch up (the log, or
 * a SNAPSHOT); past that they end UNAVAILABLE. A board that expires ends
 * its streams with an EXPIRED event and OK; a token that expires or is
 * revoked ends them UNAUTHENTICATED.
 *
 * The hub also sweeps leases that ran out (any replica may: the sweep
 * script is idempotent) every BB_HUB_SWEEP_MS.
 *
 * Threads: everything runs on the loop thread but bb_hub_watch (a worker
 * thread, which posts the stream to the loop) and the streams' cancel
 * callbacks (which post the cancel). */
#ifndef MEMORYD_BLACKBOARD_BB_HUB_H
#define MEMORYD_BLACKBOARD_BB_HUB_H

#include <stdint.h>

#include "service/auth/authn.h"
#include "service/auth/principal.h"
#include "service/blackboard/bb_store.h"
#include "service/rpc/rpc.h"
#include "service/store/aredis.h"
#include "service/store/evloop.h"

#define BB_HUB_SWEEP_MS 100

typedef struct bb_hub bb_hub;

typedef struct bb_hub_options {
    evloop *loop;
    aredis *redis;         /* commands (borrowed; outlives the hub) */
    const char *redis_url; /* the hub's own subscriber connection */
    bb_limits lim;
    int64_t grace_ms; /* how long streams wait for Redis to return */
    authn *auth;      /* tokens that expired or were revoked end their streams */
} bb_hub_options;

/* Starts the hub on o->loop: 0 with *out, or -1 with the reason in err. */
int bb_hub_create(const bb_hub_options *o, bb_hub **out, char *err, size_t errlen);
/* Ends the streams still open (UNAVAILABLE), waits for the hub's Redis
 * work in flight, frees. After the server is shut down; accepts NULL. */
void bb_hub_free(bb_hub *h);

/* What a Subscribe asks for. */
typedef struct bb_watch_req {
    const char *tenant, *task;
    int has_after;
    int64_t after;
    const char *board_id; /* with has_after */
} bb_watch_req;

/* From a Subscribe handler: registers the stream (caller c of principal p,
 * who must stay referenced by the call) and returns RPC_PENDING; or a
 * status to end it with (RESOURCE_EXHAUSTED out of memory, CANCELLED when
 * the client is gone). */
grpc_status_code bb_hub_watch(bb_hub *h, rpc_call *call, const principal *p, const bb_caller *c,
                              const bb_watch_req *req);

/* 1 while the subscriber connection is up (health's probe). */
int bb_hub_live(const bb_hub *h);

#endif
