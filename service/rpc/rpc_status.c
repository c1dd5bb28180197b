/* rpc_status: memoryd's status codes as gRPC statuses; see rpc.h. */
#include "service/core/status.h"
#include "service/rpc/rpc.h"

grpc_status_code rpc_status_of(int code) {
    switch (code) {
    case STATUS_OK: return GRPC_STATUS_OK;
    case STATUS_ENOTFOUND: return GRPC_STATUS_NOT_FOUND;
    case STATUS_EDENIED: return GRPC_STATUS_PERMISSION_DENIED;
    case STATUS_ECONFLICT: return GRPC_STATUS_ABORTED;
    case STATUS_EUNAVAILABLE: return GRPC_STATUS_UNAVAILABLE;
    case STATUS_ETIMEOUT: return GRPC_STATUS_DEADLINE_EXCEEDED;
    case STATUS_ENOMEM: return GRPC_STATUS_RESOURCE_EXHAUSTED;
    case STATUS_EINVALID: return GRPC_STATUS_INVALID_ARGUMENT;
    case STATUS_EEXISTS: return GRPC_STATUS_ALREADY_EXISTS;
    case STATUS_ETOOBIG: return GRPC_STATUS_FAILED_PRECONDITION;
    case STATUS_EAUTH: return GRPC_STATUS_UNAVAILABLE;
    case STATUS_EBUSY: return GRPC_STATUS_RESOURCE_EXHAUSTED;
    case STATUS_ECANCELLED: return GRPC_STATUS_CANCELLED;
    case STATUS_EPRECONDITION: return GRPC_STATUS_FAILED_PRECONDITION;
    case STATUS_EQUOTA: return GRPC_STATUS_RESOURCE_EXHAUSTED;
    default: return GRPC_STATUS_INTERNAL;
    }
}

grpc_status_code rpc_call_fail(rpc_call *call, int code, const char *err) {
    if (code == STATUS_OK) return GRPC_STATUS_OK;
    rpc_call_set_error(call, "%s", err && err[0] ? err : status_text(code));
    return rpc_status_of(code);
}
