/* request_decode_fuzz: the runtime's request decoding (rpc_call.c decode():
 * the pb_check guard, then protobuf_c_message_unpack into the call's
 * arena) for every request type
 * the server accepts -- each method input of the memory.v1 services, of
 * grpc.health.v1 and of grpc.reflection.v1 (v1alpha is wire-identical).
 *
 * For each type the bytes are decoded twice: through an arena allocator,
 * as the server does, and through malloc, which ASan can see into. Both
 * must agree on whether the bytes decode; a decoded message must survive
 * a re-encode (pack writes exactly get_packed_size bytes) and decode again.
 */
#include <string.h>

#include "grpc/health/v1/health.pb-c.h"
#include "grpc/reflection/v1/reflection.pb-c.h"
#include "memory/v1/access.pb-c.h"
#include "memory/v1/audit.pb-c.h"
#include "memory/v1/blackboard.pb-c.h"
#include "memory/v1/cache.pb-c.h"
#include "memory/v1/entries.pb-c.h"
#include "memory/v1/episodic_memory.pb-c.h"
#include "memory/v1/global_memory.pb-c.h"
#include "memory/v1/privacy.pb-c.h"
#include "memory/v1/router.pb-c.h"
#include "service/core/arena.h"
#include "service/rpc/pb_check.h"
#include "tests/fuzz/fuzz_target.h"

/* Every service the server registers. A new .proto service must be added
 * here (the request types are then found through its descriptor). */
static const ProtobufCServiceDescriptor *const services[] = {
    &memory__v1__access__descriptor,
    &memory__v1__audit__descriptor,
    &memory__v1__blackboard__descriptor,
    &memory__v1__cache__descriptor,
    &memory__v1__entries__descriptor,
    &memory__v1__episodic_memory__descriptor,
    &memory__v1__global_memory__descriptor,
    &memory__v1__privacy__descriptor,
    &memory__v1__router__descriptor,
    &grpc__health__v1__health__descriptor,
    &grpc__reflection__v1__server_reflection__descriptor,
};

#define MAX_TYPES 256

static const ProtobufCMessageDescriptor *types[MAX_TYPES];
static size_t n_types;

/* Distinct method input types, in service/method order. */
static void collect_types(void) {
  for (size_t s = 0; s < sizeof services / sizeof services[0]; s++) {
    for (unsigned m = 0; m < services[s]->n_methods; m++) {
      const ProtobufCMessageDescriptor *in = services[s]->methods[m].input;
      size_t k = 0;
      while (k < n_types && types[k] != in) k++;
      if (k < n_types) continue;
      if (n_types == MAX_TYPES) abort();
      types[n_types++] = in;
    }
  }
}

static void decode_one(arena *a, const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                       size_t size) {
  arena_reset(a); /* the server reuses pooled arenas the same way */
  /* What the guard refuses never reaches protobuf-c in the server. */
  const char *why;
  if (pb_check(desc, data, size, PB_CHECK_MAX_DEPTH, &why) != 0) return;
  ProtobufCMessage *m = protobuf_c_message_unpack(desc, arena_protobuf_allocator(a), size, data);
  ProtobufCMessage *h = protobuf_c_message_unpack(desc, NULL, size, data);
  FUZZ_CHECK((m == NULL) == (h == NULL));
  if (h) {
    FUZZ_CHECK(protobuf_c_message_check(h));
    protobuf_c_message_free_unpacked(h, NULL);
  }
  if (!m) return;
  FUZZ_CHECK(m->descriptor == desc);

  /* Exact-size buffer: ASan flags pack writing past its own estimate. */
  size_t n = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) abort();
  FUZZ_CHECK(protobuf_c_message_pack(m, buf) == n);
  /* Handlers may echo decoded sub-messages (a Struct, say) into replies
   * or storage; what we accepted must encode to bytes we accept again
   * (protobuf-c alone breaks this for an over-long field number 0, which
   * pb_check refuses: see README.md, "Regression seeds"). */
  ProtobufCMessage *again = protobuf_c_message_unpack(desc, arena_protobuf_allocator(a), n, buf);
  FUZZ_CHECK(again != NULL);
  FUZZ_CHECK(protobuf_c_message_get_packed_size(again) == n);
  free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static arena *a;
  if (!a) {
    collect_types();
    if (!(a = arena_create())) abort();
  }
  for (size_t i = 0; i < n_types; i++) decode_one(a, types[i], data, size);
  return 0;
}
