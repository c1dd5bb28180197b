/* episodic_embedded_internal: what the embedded backend's files share:
 * episodic_embedded.c (the in-memory map of collections, catch-up, reads,
 * collections, open) and episodic_embedded_write.c (upsert and deletes).
 * Not for other modules. */
#ifndef MEMORYD_EPISODIC_EPISODIC_EMBEDDED_INTERNAL_H
#define MEMORYD_EPISODIC_EPISODIC_EMBEDDED_INTERNAL_H

#include <pthread.h>

#include "service/episodic/episodic_embedded.h"
#include "service/episodic/episodic_index.h"
#include "service/metrics/metrics.h"
#include "service/store/pgq.h"

#define EMB_BUCKETS 256

typedef struct ecoll {
    char *key; /* tenant "\n" name */
    int64_t cid;
    pthread_rwlock_t rw;     /* guards x */
    pthread_mutex_t sync_mu; /* one catch-up at a time; guards applied */
    episodic_index *x;
    const char *language; /* texts' (embedded.language) */
    int64_t applied;      /* the collection seq this index reflects */
    int refs;             /* the map's reference + callers'; under embedded.mu */
    size_t bytes;         /* episodic_index_bytes when last accounted; under embedded.mu */
    size_t points;        /* episodic_index_count then; under embedded.mu */
    int64_t used_ms;      /* last read or write; under embedded.mu */
    struct ecoll *next;
} ecoll;

typedef struct embedded {
    vstore base;
    pg_pool *pg;
    pthread_mutex_t mu;
    ecoll *buckets[EMB_BUCKETS];
    size_t budget;             /* bytes all indexes may hold; 0: no limit */
    size_t total;              /* sum of the mapped collections' bytes; under mu */
    size_t points;             /* and of their points; under mu */
    size_t ncoll;              /* collections mapped; under mu */
    metrics_counter evictions; /* collections dropped from memory for the budget */
    char language[32];         /* texts are analyzed in it (lex_text.h) */
} embedded;

/* One operation's arguments, handed through pgq_run. */
typedef struct op {
    embedded *e;
    tier_ctx *c;
    const vs_collection *col;
    ecoll *ec;
    /* upsert */
    const vs_point_in *pts;
    size_t n;
    /* deletes */
    const vs_id *ids;
    const Memory__V1__Filter *filter;
    const vs_meta_sel *meta; /* delete by filter: an erasure's further conditions */
    int64_t deleted;
} op;

/* The collection's state on this replica, with a reference (episodic_embedded_release);
 * NULL when out of memory. */
ecoll *episodic_embedded_acquire(embedded *e, const tier_ctx *c, const vs_collection *col);
void episodic_embedded_release(embedded *e, ecoll *ec);
/* Applies the points stamped since ec->applied (in the session's open
 * transaction when in_tx). */
int episodic_embedded_sync_index(pgq_session *ss, tier_ctx *c, ecoll *ec, int in_tx);
/* Runs fn(ss, o) in a pgq session with the call's deadline. */
int episodic_embedded_run(op *o, pgq_fn fn);
/* One statement: inside the session's open transaction when in_tx, else
 * alone in one round trip. */
int episodic_embedded_query(pgq_session *ss, int in_tx, const char *what, const pgq_sql *b,
                            PGresult **out);
const char *episodic_embedded_pid_text(arena *a, const vs_id *id);
/* Drops name's state from this replica (the collection is gone). */
void episodic_embedded_forget(embedded *e, const tier_ctx *c, const char *name);
/* After ec was brought up to date: counts its memory against the budget,
 * evicting idle collections as needed. STATUS_ENOMEM (c->err naming the
 * flag) when ec alone is over the budget: it is dropped from memory. */
int episodic_embedded_account(embedded *e, tier_ctx *c, ecoll *ec, const char *name);

/* Whether the point in slot passes the read diode, the filter, the time
 * window and (with modifiable) the write diode: an episodic_index accept callback. */
typedef struct episodic_embedded_accept_args {
    const tier_ctx *c;
    const Memory__V1__Filter *filter;
    int modifiable;                 /* also require that the caller may modify the point */
    const tier_time_range *updated; /* only points updated in it; NULL = any time */
} episodic_embedded_accept_args;
int episodic_embedded_accept(const episodic_index *x, size_t slot, void *arg);

/* episodic_embedded_write.c: the write operations of vstore_ops. */
vs_upsert_fn episodic_embedded_upsert;
vs_delete_ids_fn episodic_embedded_delete_ids;
vs_delete_filter_fn episodic_embedded_delete_filter;

#endif
