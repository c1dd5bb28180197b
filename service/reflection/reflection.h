/* reflection: gRPC server reflection (grpc.reflection.v1 and v1alpha) from
 * an embedded FileDescriptorSet, so grpcurl and other reflection clients
 * can list, describe and call every method without .proto files. */
#ifndef MEMORYD_REFLECTION_REFLECTION_H
#define MEMORYD_REFLECTION_REFLECTION_H

#include "service/reflection/descpool.h"
#include "service/rpc/rpc.h"

/* Registers ServerReflectionInfo under both package versions (their wire
 * formats are identical). pool must outlive srv. */
int reflection_register(rpc_server *srv, const descpool *pool);

/* An rpc_unknown_fn: for a path that names a method of the API that no
 * module registered, says it is not implemented yet; NULL otherwise.
 * arg is the descpool. The returned text is static per thread. */
const char *reflection_describe_unknown(const char *path, void *arg);

#endif
