/* arena: chunked bump allocator. Small requests share blocks; a request
 * larger than a quarter block gets a block of its own so big messages do
 * not waste the tail of a shared block. */
#include "service/core/arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_BLOCK_SIZE 8192
#define ARENA_ALIGN 16

typedef struct arena_block {
    struct arena_block *next; /* every malloc'd block, newest first */
    size_t used, cap;
    _Alignas(ARENA_ALIGN) unsigned char data[];
} arena_block;

struct arena {
    arena_block *cur;   /* block small allocations bump from */
    arena_block *extra; /* malloc'd blocks to free (never includes first) */
    size_t total;
    size_t held;  /* bytes of every block, the first one included */
    size_t limit; /* 0: none */
    int over;     /* an allocation was refused for the limit */
    ProtobufCAllocator pb;
    arena_block first; /* must stay last: its data[] runs into the allocation */
};

static void *pb_alloc(void *ctx, size_t size) { return arena_alloc((arena *)ctx, size); }
static void pb_free(void *ctx, void *ptr) {
    (void)ctx;
    (void)ptr;
}

static void init_state(arena *a) {
    a->first.next = NULL;
    a->first.used = 0;
    a->first.cap = ARENA_BLOCK_SIZE;
    a->cur = &a->first;
    a->extra = NULL;
    a->total = 0;
    a->held = ARENA_BLOCK_SIZE;
    a->over = 0;
}

arena *arena_create(void) {
    arena *a = malloc(sizeof(arena) + ARENA_BLOCK_SIZE);
    if (!a) return NULL;
    init_state(a);
    a->limit = 0;
    a->pb.alloc = pb_alloc;
    a->pb.free = pb_free;
    a->pb.allocator_data = a;
    return a;
}

static void free_extra(arena *a) {
    arena_block *b = a->extra;
    while (b) {
        arena_block *next = b->next;
        free(b);
        b = next;
    }
}

void arena_free(arena *a) {
    if (!a) return;
    free_extra(a);
    free(a);
}

void arena_reset(arena *a) {
    free_extra(a);
    init_state(a);
}

static arena_block *new_block(arena *a, size_t cap) {
    if (a->limit && (cap > a->limit || a->held > a->limit - cap)) {
        a->over = 1;
        return NULL;
    }
    arena_block *b = malloc(sizeof(arena_block) + cap);
    if (!b) return NULL;
    b->cap = cap;
    b->used = 0;
    b->next = a->extra;
    a->extra = b;
    a->held += cap;
    return b;
}

void *arena_alloc(arena *a, size_t size) {
    if (size == 0) size = 1;
    if (size > SIZE_MAX / 2) return NULL;
    size_t need = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    arena_block *b = a->cur;
    if (b->cap - b->used < need) {
        if (need > ARENA_BLOCK_SIZE / 4) {
            /* A large request gets a block of its own; the current block's
             * free tail stays available for later small requests. */
            b = new_block(a, need);
            if (!b) return NULL;
        } else {
            b = new_block(a, ARENA_BLOCK_SIZE);
            if (!b) return NULL;
            a->cur = b;
        }
    }
    void *p = b->data + b->used;
    b->used += need;
    a->total += need;
    return p;
}

void *arena_zalloc(arena *a, size_t size) {
    void *p = arena_alloc(a, size);
    if (p) memset(p, 0, size);
    return p;
}

char *arena_strndup(arena *a, const char *s, size_t n) {
    char *p = arena_alloc(a, n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *arena_strdup(arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }

char *arena_printf(arena *a, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return NULL;
    char *p = arena_alloc(a, (size_t)n + 1);
    if (!p) return NULL;
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

ProtobufCAllocator *arena_protobuf_allocator(arena *a) { return &a->pb; }

size_t arena_used(const arena *a) { return a->total; }

void arena_set_limit(arena *a, size_t limit) { a->limit = limit; }
int arena_over_limit(const arena *a) { return a->over; }

void *arena_message(arena *a, const ProtobufCMessageDescriptor *desc) {
    ProtobufCMessage *m = arena_alloc(a, desc->sizeof_message);
    if (m) desc->message_init(m);
    return m;
}
