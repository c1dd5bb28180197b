/* rpc_log: the access log, an rpc observer writing one JSON line per call:
 * failed calls at warn level, successful ones at debug level. */
#ifndef MEMORYD_RPC_RPC_LOG_H
#define MEMORYD_RPC_RPC_LOG_H

#include "service/rpc/rpc.h"

/* An rpc_observer_fn; arg is unused. */
void rpc_log_observer(rpc_call *call, grpc_status_code status, const char *message, void *arg);

#endif
