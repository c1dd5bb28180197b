/* pb_check: a pre-flight scan of protobuf wire bytes before protobuf-c
 * decodes them.
 *
 * protobuf-c 1.4 recurses once per nested message with no depth limit, so
 * a 34 KiB request of nested google.protobuf.Value lists overflows a worker
 * thread's stack and kills the server. It also accepts a field number 0
 * spelled as an over-long varint, then re-encodes it as bytes it rejects.
 * And it hands string fields to handlers as C strings, so a string with
 * an embedded NUL would silently lose its tail ("a\0b" read as "a").
 * This scan walks the message against its descriptor without allocating
 * and refuses all three, so the decoder only ever sees bounded, sane input.
 * A parser only: no I/O, fed bytes by tests and fuzzers. */
#ifndef MEMORYD_RPC_PB_CHECK_H
#define MEMORYD_RPC_PB_CHECK_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

/* protobuf's own default recursion limit. */
#define PB_CHECK_MAX_DEPTH 100

/* Returns 0 when data (a desc message) nests at most max_depth messages
 * deep, every tag is well-formed and no string field holds a NUL byte; otherwise -1 with a static
 * reason in *why. Bytes protobuf-c would reject for other reasons may pass: the scan only guards
 * what protobuf-c gets wrong. */
int pb_check(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len, int max_depth,
             const char **why);

/* Reads a base-128 varint of at most 10 bytes from p; returns the bytes
 * used, or 0 when it is truncated or too long. */
size_t pb_read_varint(const uint8_t *p, size_t len, uint64_t *out);

#endif
