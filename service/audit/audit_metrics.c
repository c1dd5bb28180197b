/* audit_metrics: the audit trail's figures as Prometheus metrics. */
#include "service/audit/audit.h"
#include "service/metrics/metrics.h"

void audit_metrics_collect(strbuf *out, void *arg) {
    audit_stats st;
    audit_get_stats(arg, &st);
    metrics_family(out, "memoryd_audit_rows_total", "counter",
                   "Audit records by outcome: written to PostgreSQL, dropped because the queue was "
                   "full, or refused by PostgreSQL for good.");
    metrics_sample_u64(out, "memoryd_audit_rows_total", "outcome=\"written\"", st.written);
    metrics_sample_u64(out, "memoryd_audit_rows_total", "outcome=\"dropped\"", st.dropped);
    metrics_sample_u64(out, "memoryd_audit_rows_total", "outcome=\"failed\"", st.failed);
    metrics_family(
        out, "memoryd_audit_unaudited_calls_total", "counter",
        "Calls that ended before a token was verified (counted and logged, not audited).");
    metrics_sample_u64(out, "memoryd_audit_unaudited_calls_total", NULL, st.unauthenticated);
    metrics_family(out, "memoryd_audit_queue_depth", "gauge",
                   "Audit records waiting for the writer.");
    metrics_sample_u64(out, "memoryd_audit_queue_depth", NULL, st.queue_depth);
    metrics_family(out, "memoryd_audit_queue_capacity", "gauge",
                   "Audit records the queue holds before it drops.");
    metrics_sample_u64(out, "memoryd_audit_queue_capacity", NULL, st.queue_capacity);
}
