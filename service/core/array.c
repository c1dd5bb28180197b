/* array: doubling growth; see array.h. */
#include "service/core/array.h"

#include <stdint.h>
#include <stdlib.h>

void *array_grow(void *items, size_t *cap, size_t need, size_t elem, size_t min_cap) {
    if (need <= *cap && items) return items;
    size_t n = *cap ? *cap : (min_cap ? min_cap : 1);
    while (n < need) {
        if (n > SIZE_MAX / 2) return NULL;
        n *= 2;
    }
    if (elem && n > SIZE_MAX / elem) return NULL;
    void *p = realloc(items, n * elem);
    if (!p) return NULL;
    *cap = n;
    return p;
}
