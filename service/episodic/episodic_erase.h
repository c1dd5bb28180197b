/* episodic_erase: EpisodicMemory's eraser (tier/tier_erase.h) over either
 * backend: in every collection of the tenant, the points the erasure's
 * context reaches (its owner, or any) whose payload's "subject_id" matches,
 * through the backend's own delete by filter, so the embedded indexes of
 * every replica catch up before their next read (the collection's change
 * counter) and Qdrant's points go with a filter on the scope. */
#ifndef MEMORYD_EPISODIC_EPISODIC_ERASE_H
#define MEMORYD_EPISODIC_EPISODIC_ERASE_H

#include "service/episodic/vstore.h"
#include "service/tier/tier_erase.h"

/* vs is borrowed. STATUS_OK with *count (points erased, or on a dry run
 * counted), or the backend's code with c->err (collections done before
 * the failure stay erased). */
int episodic_erase(vstore *vs, tier_ctx *c, const tier_erase_sel *sel, int64_t *count);

#endif
