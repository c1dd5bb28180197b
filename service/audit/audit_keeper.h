/* audit_keeper: the audit trail's size over time. The trail is partitioned
 * by UTC day (schema migration 16), each partition named after the
 * midnight its range ends at (audit_log_upto_YYYYMMDD); the keeper makes
 * the partitions of the days ahead, drops whole the partitions whose every
 * row is older than the retention (--audit-retention), prunes the default
 * partition's old rows, and, with a size guard (--audit-max-mib), drops the
 * oldest partitions of past days until the trail fits. Dropping a
 * partition is a catalog change: no deleted rows to pay for. It needs the
 * trail's table lock, which it waits for 200 ms at most (writes of the
 * trail queue behind it meanwhile; a drop that cannot have it is tried
 * again at the next sweep); days are made ahead with ATTACH, whose lock
 * writes pass.
 *
 * Blocking libpq on a connection of the caller's (the retention sweeper's,
 * which holds the sweep's advisory lock: one replica keeps the trail at a
 * time). No gRPC. */
#ifndef MEMORYD_AUDIT_AUDIT_KEEPER_H
#define MEMORYD_AUDIT_AUDIT_KEEPER_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

/* Days of partitions made ahead of today (UTC). */
#define AUDIT_KEEPER_DAYS_AHEAD 8

typedef struct audit_keeper_policy {
    int64_t retention_s; /* rows older than this go; 0: kept for ever */
    int64_t max_bytes;   /* the trail's most; 0: no guard */
} audit_keeper_policy;

typedef struct audit_keeper_report {
    int made;            /* partitions made ahead */
    int dropped_age;     /* partitions dropped past the retention */
    int dropped_size;    /* ... and by the size guard */
    int64_t pruned_rows; /* rows of the default partition past the retention */
    int64_t bytes;       /* the trail's size after the round */
    int partitions;      /* day partitions left */
    int64_t oldest_us;   /* where the oldest partition's range ends (Unix µs); 0: none */
} audit_keeper_report;

/* Makes the partitions of today and the AUDIT_KEEPER_DAYS_AHEAD - 1 days
 * after (idempotent; days another replica made are skipped): *made, 0, or
 * -1 with err. memoryd runs it at start-up, so writes of the coming days
 * find their partition even on a replica that never sweeps. */
int audit_keeper_make_ahead(PGconn *conn, int *made, char *err, size_t errlen);

/* One round at now_us (Unix µs): make ahead, then drop and prune by pol.
 * 0 with *out, or -1 with err (what was dropped before stays dropped). */
int audit_keeper_run(PGconn *conn, const audit_keeper_policy *pol, int64_t now_us,
                     audit_keeper_report *out, char *err, size_t errlen);

/* The end of the range of the partition named name (Unix µs of the UTC
 * midnight its name says): 0, or -1 when name is not a day partition's. */
int audit_keeper_partition_end(const char *name, int64_t *end_us);

#endif
