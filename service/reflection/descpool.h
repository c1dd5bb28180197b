/* descpool: an index over a serialized FileDescriptorSet: files by name
 * with their raw bytes, symbols (packages' services, methods, messages,
 * fields, enums, enum values) to the file defining them.
 *
 * A parser only (no I/O): reflection and the UNIMPLEMENTED describer use
 * it, and tests/fuzzers feed it bytes directly. */
#ifndef MEMORYD_REFLECTION_DESCPOOL_H
#define MEMORYD_REFLECTION_DESCPOOL_H

#include <stddef.h>
#include <stdint.h>

typedef struct descpool descpool;

/* Indexes data (not copied: it must outlive the pool). Returns 0, or -1
 * when the bytes are not a FileDescriptorSet or a file is malformed. */
int descpool_create(const uint8_t *data, size_t len, descpool **out);
void descpool_free(descpool *p); /* accepts NULL */

/* Index of the file named name, or -1. */
int descpool_find_file(const descpool *p, const char *name);
/* Index of the file defining a fully-qualified symbol (no leading dot), or -1. */
int descpool_find_symbol(const descpool *p, const char *symbol);
/* 1 when symbol is a message type. */
int descpool_is_message(const descpool *p, const char *symbol);

size_t descpool_file_count(const descpool *p);
const char *descpool_file_name(const descpool *p, int file);
/* The file's serialized FileDescriptorProto, exactly as in the set. */
void descpool_file_bytes(const descpool *p, int file, const uint8_t **data, size_t *len);

/* Appends file and, transitively, its dependencies to out (each once;
 * requested file first). out must hold descpool_file_count entries;
 * returns how many were written. */
size_t descpool_file_closure(const descpool *p, int file, int *out);

/* Fully-qualified service names, in file order. */
size_t descpool_service_count(const descpool *p);
const char *descpool_service_name(const descpool *p, size_t i);

/* 1 when path "/pkg.Service/Method" names a method in the set. */
int descpool_has_method_path(const descpool *p, const char *path);

#endif
