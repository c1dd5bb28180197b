/* episodic_embedded: the default vector-store backend. Points are durable
 * in PostgreSQL (episodic_points, vectors as float32 bytea, payloads as
 * jsonb); each replica keeps an exact in-memory index (episodic_index) per
 * collection, loaded lazily on the collection's first read and brought up
 * to date before every read by the collection's change counter (seq,
 * migration 6), so writes made through another replica are seen as soon
 * as they are committed. Texts (migration 17) are kept beside the vectors
 * and searched by BM25 in the same index. Filters run in memory (episodic_filter) with the
 * same semantics as the Qdrant mapping. */
#ifndef MEMORYD_EPISODIC_EPISODIC_EMBEDDED_H
#define MEMORYD_EPISODIC_EPISODIC_EMBEDDED_H

#include "service/store/pg_pool.h"
#include "service/vstore/vstore.h"

/* pg is borrowed and must outlive the store. The in-memory indexes of all
 * collections together may hold budget_bytes (vectors, ids, metadata,
 * texts, their lexical index and hash tables, as episodic_index_bytes counts them;
 * payloads come on top; 0: no limit): past it the least recently used idle
 * collections leave memory (a later read loads them again), and a
 * collection that alone needs more fails its reads RESOURCE_EXHAUSTED
 * naming --episodic-index-max-mb. Texts are analyzed in language (a
 * Snowball stemmer's name, lex_text.h; NULL: english). On 0 *out is owned
 * by the caller (vstore_free). -1 when out of memory or the language is
 * unknown. */
int episodic_embedded_open(pg_pool *pg, size_t budget_bytes, const char *language, vstore **out);

#endif
