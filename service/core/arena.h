/* arena: a bump allocator whose memory is released all at once.
 *
 * Each call owns one arena: the decoded request, the handler's response and
 * every string in them live there and die with the call, so handlers never
 * free message fields one by one. Not thread-safe: one call, one thread at
 * a time. */
#ifndef MEMORYD_CORE_ARENA_H
#define MEMORYD_CORE_ARENA_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

typedef struct arena arena;

/* Returns a new arena or NULL when out of memory. Free with arena_free. */
arena *arena_create(void);
/* Releases every block; accepts NULL. */
void arena_free(arena *a);
/* Drops all allocations but keeps the first block for reuse. */
void arena_reset(arena *a);

/* 16-byte aligned memory valid until arena_free/arena_reset; NULL when out
 * of memory. arena_zalloc zero-fills. */
void *arena_alloc(arena *a, size_t size);
void *arena_zalloc(arena *a, size_t size);
/* Copies of a NUL-terminated string / of n bytes plus a NUL. */
char *arena_strdup(arena *a, const char *s);
char *arena_strndup(arena *a, const char *s, size_t n);
char *arena_printf(arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A protobuf-c allocator drawing from the arena (free is a no-op), for
 * protobuf_c_message_unpack. The struct is owned by the arena. */
ProtobufCAllocator *arena_protobuf_allocator(arena *a);
/* A message of desc's type in the arena, initialized (its defaults);
 * NULL when out of memory. */
void *arena_message(arena *a, const ProtobufCMessageDescriptor *desc);

/* Bytes handed out so far (for limits and tests). */
size_t arena_used(const arena *a);

/* Caps the memory the arena holds (its blocks, the first one included) at
 * limit bytes; 0 = no cap. An allocation past it returns NULL and marks the
 * arena (arena_over_limit) until the next reset; the cap itself stays. */
void arena_set_limit(arena *a, size_t limit);
int arena_over_limit(const arena *a);

#endif
