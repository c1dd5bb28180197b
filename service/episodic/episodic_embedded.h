/* episodic_embedded: the default vector-store backend. Points are durable
 * in PostgreSQL (episodic_points, vectors as float32 bytea, payloads as
 * jsonb); each replica keeps an exact in-memory index (episodic_index) per
 * collection, loaded lazily on the collection's first read and brought up
 * to date before every read by the collection's change counter (seq,
 * migration 6), so writes made through another replica are seen as soon
 * as they are committed. Filters run in memory (episodic_filter) with the
 * same semantics as the Qdrant mapping. */
#ifndef MEMORYD_EPISODIC_EPISODIC_EMBEDDED_H
#define MEMORYD_EPISODIC_EPISODIC_EMBEDDED_H

#include "service/episodic/vstore.h"
#include "service/store/pg_pool.h"

/* pg is borrowed and must outlive the store. On 0 *out is owned by the
 * caller (vstore_free). -1 when out of memory. */
int episodic_embedded_open(pg_pool *pg, vstore **out);

#endif
