/* episodic_erase: EpisodicMemory's eraser and exporter (tier/tier_erase.h)
 * over either backend: in every collection of the tenant, the points the
 * context reaches (its owner, or any) whose payload's "subject_id" matches.
 * Erasure goes through the backend's own delete by filter, so the embedded
 * indexes of every replica catch up before their next read (the
 * collection's change counter) and Qdrant's points go with a filter on the
 * scope; export pages through vstore_scroll, which applies the same diode
 * and filter inside the backend. */
#ifndef MEMORYD_EPISODIC_EPISODIC_ERASE_H
#define MEMORYD_EPISODIC_EPISODIC_ERASE_H

#include "service/tier/tier_erase.h"
#include "service/vstore/vstore.h"

/* vs is borrowed. STATUS_OK with *count (points erased, or on a dry run
 * counted), or the backend's code with c->err (collections done before
 * the failure stay erased). */
int episodic_erase(vstore *vs, tier_ctx *c, const tier_erase_sel *sel, int64_t *count);

/* A tier_export_fn over vs (borrowed): every point of sel that c reads
 * (c->p's tenant and read ceiling, its owner unless c->read_breadth is
 * PRINCIPAL_ALL) goes to emit as kind "point", id "<collection>/<point
 * id>", json its payload (compact; "{}" when it has none) and meta its
 * metadata with the tenant filled in; collections by name, points by id,
 * 256 points in memory at a time (in an arena of their own:
 * c->ar does not grow with the export). Retention selections export
 * nothing. STATUS_OK; emit's code as soon as it returns one (nothing more
 * is emitted); or the backend's code with c->err (records emitted before
 * stay emitted). */
int episodic_export(vstore *vs, tier_ctx *c, const tier_erase_sel *sel, tier_export_emit emit,
                    void *emit_arg);

#endif
