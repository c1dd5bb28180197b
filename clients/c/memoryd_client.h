/* memoryd_client: a tiny C client for memoryd on the gRPC C core — one
 * channel per handle, one blocking unary call of any method with protobuf-c
 * messages (the memory.v1 types come from //protos:api_c).
 *
 * Ownership, in short: mdc_client_create's handle is freed with
 * mdc_client_free; everything mdc_call_unary hands back (status message,
 * decoded response) belongs to the caller. No call keeps a pointer to its
 * arguments after it returns.
 *
 * Threads: one handle may be used by several threads at once (each call
 * has its own completion queue); mdc_client_free must not race a call.
 *
 * Example:
 *
 *   mdc_client *c;
 *   if (mdc_client_create("localhost:50051", &c) != 0) ...;
 *   Memory__V1__GetEntityRequest req = MEMORY__V1__GET_ENTITY_REQUEST__INIT;
 *   req.id = "e1";
 *   grpc_status_code code;
 *   char *msg;
 *   ProtobufCMessage *resp;
 *   int rc = mdc_call_unary(c, "/memory.v1.GlobalMemory/GetEntity", &req.base,
 *                           &memory__v1__get_entity_response__descriptor, 5000,
 *                           &code, &msg, &resp);
 *   if (rc == 0 && code == GRPC_STATUS_OK) use((Memory__V1__GetEntityResponse *)resp);
 *   free(msg);
 *   if (resp) protobuf_c_message_free_unpacked(resp, NULL);
 *   mdc_client_free(c);
 *
 * Every memory.v1 method needs a capability token: set it once with
 * mdc_client_set_token and each call carries `authorization: Bearer <jwt>`.
 * Not here yet: TLS and streaming calls. */
#ifndef MEMORYD_CLIENTS_C_MEMORYD_CLIENT_H
#define MEMORYD_CLIENTS_C_MEMORYD_CLIENT_H

#include <grpc/status.h>
#include <protobuf-c/protobuf-c.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes of mdc functions: 0 or one of these. They say whether mdc
 * could do the call, not how the server answered (that is the gRPC status
 * code, an out-parameter). */
#define MDC_OK 0
#define MDC_ERR_ARG (-1)   /* NULL or malformed argument; nothing was sent */
#define MDC_ERR_NOMEM (-2) /* out of memory */
#define MDC_ERR_CALL (-3)  /* the gRPC core refused to start the call */
#define MDC_ERR_DECODE                                 \
  (-4) /* status OK, but the response is missing or is \
          not a message of the given descriptor */

typedef struct mdc_client mdc_client;

/* Opens a plaintext channel to target ("host:port", or any gRPC target
 * URI such as "dns:///host:port" or "unix:/path"). Connection happens
 * lazily on the first call, so an unreachable server is reported by that
 * call (GRPC_STATUS_UNAVAILABLE), not here. Initialises the gRPC core (a
 * reference, released by mdc_client_free).
 * Returns 0 and *out (free with mdc_client_free), MDC_ERR_ARG or
 * MDC_ERR_NOMEM (then *out is NULL). */
int mdc_client_create(const char *target, mdc_client **out);

/* Closes the channel and releases the gRPC core reference. NULL is fine. */
void mdc_client_free(mdc_client *c);

/* The target the handle was created with (owned by the handle). */
const char *mdc_client_target(const mdc_client *c);

/* Sets the capability token (a JWT, e.g. the contents of .local/dev-token)
 * sent as `authorization: Bearer <jwt>` with every later call; NULL or ""
 * removes it. The string is copied. Must not race a call on the same
 * handle. Returns 0, MDC_ERR_ARG (c NULL, or a line break in jwt) or
 * MDC_ERR_NOMEM (the previous token is kept). */
int mdc_client_set_token(mdc_client *c, const char *jwt);

/* One unary call of method ("/package.Service/Method") with request,
 * waiting at most deadline_ms milliseconds (<= 0: no deadline). Blocks.
 *
 * Returns 0 when the call ran to a gRPC status, which is then in *code —
 * OK or not (UNIMPLEMENTED, UNAVAILABLE for an unreachable server,
 * DEADLINE_EXCEEDED, ...). Returns a negative MDC_ERR_* when mdc itself
 * failed; MDC_ERR_DECODE comes with *code = GRPC_STATUS_OK (the server
 * succeeded, the bytes did not decode as response_desc).
 *
 * On every return except MDC_ERR_ARG:
 *   *code     the call's gRPC status (GRPC_STATUS_UNKNOWN if it never ran);
 *   *message  a malloc'd, NUL-terminated text the caller frees with free():
 *             the server's status message (may be ""), or what went wrong
 *             in mdc; NULL only after MDC_ERR_NOMEM;
 *   *response the decoded response when rc == 0 and *code == OK, freed by
 *             the caller with protobuf_c_message_free_unpacked(resp, NULL);
 *             NULL otherwise.
 * On MDC_ERR_ARG the out-parameters that are not NULL are set to
 * GRPC_STATUS_UNKNOWN / NULL / NULL.
 *
 * request is only read; it stays the caller's. */
int mdc_call_unary(mdc_client *c, const char *method, const ProtobufCMessage *request,
                   const ProtobufCMessageDescriptor *response_desc, int deadline_ms,
                   grpc_status_code *code, char **message, ProtobufCMessage **response);

/* A static description of an mdc return code ("ok", "bad argument", ...). */
const char *mdc_strerror(int rc);

/* The canonical name of a gRPC status code ("UNIMPLEMENTED", ...), static. */
const char *mdc_status_name(grpc_status_code code);

#ifdef __cplusplus
}
#endif

#endif
