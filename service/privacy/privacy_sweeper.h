/* privacy_sweeper: the retention sweeper. A thread on every replica wakes
 * every --retention-sweep-ms; the replica that takes the PostgreSQL
 * advisory lock sweeps and the others skip that round, so one replica at
 * a time erases. A sweep lists the tenants that keep records and, for each
 * tenant and each rule of the policy (privacy_retention.h), runs the
 * erasers of the tiers the rule covers — the very erasers Privacy.Forget
 * runs (tier/tier_erase.h) — with the rule's selection (records last
 * changed before now less its period, its label, its PII kind), in
 * batches of --retention-batch records until a batch erases nothing. It
 * logs every rule that erased something (tenant, tier, count) and a line
 * per sweep; a failure is logged and the next sweep goes on where this one
 * stopped (erasure is idempotent). Then, under the same lock, it keeps
 * the audit trail (audit/audit_keeper.h: days ahead made, days past
 * --audit-retention and the size guard dropped). */
#ifndef MEMORYD_PRIVACY_PRIVACY_SWEEPER_H
#define MEMORYD_PRIVACY_PRIVACY_SWEEPER_H

#include <stdint.h>

#include "service/audit/audit_keeper.h"
#include "service/core/strbuf.h"
#include "service/privacy/privacy_retention.h"
#include "service/tier/tier.h"

typedef struct privacy_sweeper privacy_sweeper;

/* Starts the thread (its first sweep one period from now) over env's
 * erasers (env and what it points to outlive the sweeper); policy is
 * copied. 0, or -1 (out of memory or threads). */
int privacy_sweeper_start(const tier_env *env, const retention_policy *policy, int period_ms,
                          int batch, const audit_keeper_policy *audit, privacy_sweeper **out);
/* Stops the thread (a sweep under way ends after its current batch) and
 * frees; accepts NULL. */
void privacy_sweeper_stop(privacy_sweeper *s);

/* Sweeps by outcome and what they erased by tier, since the start, and the
 * audit trail as the last sweep here found it: a metrics collector
 * (metrics.h; arg: the sweeper). */
void privacy_sweeper_metrics_collect(strbuf *out, void *arg);

#endif
