/* router_fuse: a hybrid query's fusion (router.proto's HybridQuery),
 * apart from any I/O and protobuf: reciprocal-rank fusion of the graph
 * part's entities and the vector part's points, merging results that refer
 * to the same entity, with the graph distance as a boost. */
#ifndef MEMORYD_ROUTER_ROUTER_FUSE_H
#define MEMORYD_ROUTER_ROUTER_FUSE_H

#include <stddef.h>

#include "service/tier/tier_rank.h"

/* One graph result, in the graph part's order (best first). */
typedef struct rfuse_entity {
    const char *id;
    int depth; /* from start_id; 0 for an entity query */
} rfuse_entity;

/* One fused result and its fused score: a graph result (entity >= 0)
 * with the best-ranked point that named it (point >= 0) or none (-1), or a
 * point alone (entity -1; it stands for every later point naming the same
 * entity). */
typedef struct rfuse_result {
    double score;
    long entity;
    long point;
} rfuse_result;

/* Fuses ne entities (traversal: 1 when they come from a traversal, whose
 * depths then boost them) and np points (point_entity[j]: the entity id
 * point j names, NULL when none), in each part's order. out has room for
 * ne + np results; returns how many, best first (highest score; ties:
 * graph results first, then by rank). */
size_t rfuse(const rfuse_entity *ents, size_t ne, int traversal, const char *const *point_entity,
             size_t np, rfuse_result *out);

/* The boost weight of a graph result at depth (router.proto). */
double rfuse_graph_weight(int traversal, int depth);

#endif
