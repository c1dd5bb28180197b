/* array: growing a malloc'd array by doubling, the one way the service's
 * tables (method table, statement cache, descriptor symbols, id lists)
 * grow. */
#ifndef MEMORYD_CORE_ARRAY_H
#define MEMORYD_CORE_ARRAY_H

#include <stddef.h>

/* Room for need elements of elem bytes in items (malloc'd or NULL, with
 * room for *cap): items itself when there is, else its reallocation to at
 * least double (first: min_cap) with *cap updated. NULL when out of memory
 * or the size overflows; items is then unchanged and still the caller's. */
void *array_grow(void *items, size_t *cap, size_t need, size_t elem, size_t min_cap);

#endif
