/* rpc_log: access log lines. Successful calls are logged only at debug
 * level: one write(2) per call would cost more than the call itself on the
 * hot path. */
#include "service/rpc/rpc_log.h"

#include "service/core/log.h"

void rpc_log_observer(rpc_call *call, grpc_status_code status, const char *message, void *arg) {
    (void)arg;
    log_level level = status == GRPC_STATUS_OK ? LOG_DEBUG : LOG_WARN;
    if (!log_enabled(level)) return;
    double ms = (double)(rpc_now_ms() - rpc_call_start_ms(call));
    log_trace_scope scope; /* the observer may run on a thread that is not the call's */
    log_trace_enter(&scope, rpc_call_trace_id(call));
    log_fields(level, "call", LOG_F_STR, "method", rpc_call_path(call), LOG_F_STR, "status",
               rpc_status_name(status), LOG_F_INT, "code", (int64_t)status, LOG_F_DBL,
               "duration_ms", ms, LOG_F_STR, "peer", rpc_call_peer(call), LOG_F_STR, "request_id",
               rpc_call_request_id(call), LOG_F_STR, "error", message, LOG_F_END);
    log_trace_leave(&scope);
}
