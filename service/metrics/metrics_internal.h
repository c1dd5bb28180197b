/* metrics_internal: what metrics.c and backend_metrics.c share. */
#ifndef MEMORYD_METRICS_METRICS_INTERNAL_H
#define MEMORYD_METRICS_METRICS_INTERNAL_H

/* Forgets every registered backend client (metrics_reset_collectors). */
void backend_metrics_reset(void);

#endif
