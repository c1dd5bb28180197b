/* memoryd_client: blocking unary calls to memoryd over the gRPC C core,
 * with protobuf-c messages. See memoryd_client.h for ownership rules. */
#include "memoryd_client.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mdc_client {
  grpc_channel *channel;
  char *target;
  char *authorization; /* "Bearer <jwt>", or NULL: no token */
};

int mdc_client_create(const char *target, mdc_client **out) {
  if (out) *out = NULL;
  if (!target || !*target || !out) return MDC_ERR_ARG;
  mdc_client *c = calloc(1, sizeof *c);
  if (!c) return MDC_ERR_NOMEM;
  c->target = strdup(target);
  if (!c->target) {
    free(c);
    return MDC_ERR_NOMEM;
  }
  grpc_init();
  /* The channel-arg helper functions are not exported as C symbols in
   * Debian's libgrpc, so the arg is built by hand. */
  grpc_arg args[1];
  memset(args, 0, sizeof args);
  args[0].type = GRPC_ARG_STRING;
  args[0].key = GRPC_ARG_PRIMARY_USER_AGENT_STRING;
  args[0].value.string = "memoryd-c-client";
  grpc_channel_args ca = {.num_args = 1, .args = args};
  grpc_channel_credentials *creds = grpc_insecure_credentials_create();
  /* A bad target yields a "lame" channel whose calls fail with a status,
   * never NULL; the check is for allocation failure. */
  c->channel = grpc_channel_create(target, creds, &ca);
  grpc_channel_credentials_release(creds);
  if (!c->channel) {
    mdc_client_free(c);
    return MDC_ERR_NOMEM;
  }
  *out = c;
  return MDC_OK;
}

void mdc_client_free(mdc_client *c) {
  if (!c) return;
  if (c->channel) grpc_channel_destroy(c->channel);
  free(c->target);
  free(c->authorization);
  free(c);
  /* Pairs with the grpc_init in mdc_client_create; the core shuts down
   * when the last reference (ours or the application's) goes. */
  grpc_shutdown();
}

const char *mdc_client_target(const mdc_client *c) { return c ? c->target : NULL; }

/* A malloc'd printf, or NULL when out of memory. */
static char *mdc_format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *mdc_format(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0) s = NULL;
  va_end(ap);
  return s;
}

/* Decodes a received byte buffer as a message of desc; NULL when the bytes
 * are not one. Kept apart from the call so the decoding rule is in one
 * place: protobuf-c refuses wire-type mismatches, truncation and bad
 * UTF-8 in strings. */
static ProtobufCMessage *mdc_decode(grpc_byte_buffer *buf, const ProtobufCMessageDescriptor *desc,
                                    size_t *len) {
  grpc_byte_buffer_reader reader;
  *len = 0;
  if (!grpc_byte_buffer_reader_init(&reader, buf)) return NULL; /* undecompressable */
  grpc_slice all = grpc_byte_buffer_reader_readall(&reader);
  grpc_byte_buffer_reader_destroy(&reader);
  *len = GRPC_SLICE_LENGTH(all);
  ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, *len, GRPC_SLICE_START_PTR(all));
  grpc_slice_unref(all);
  return m;
}

static int mdc_valid_descriptor(const ProtobufCMessageDescriptor *d) {
  return d && d->magic == PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC;
}

int mdc_call_unary(mdc_client *c, const char *method, const ProtobufCMessage *request,
                   const ProtobufCMessageDescriptor *response_desc, int deadline_ms,
                   grpc_status_code *code, char **message, ProtobufCMessage **response) {
  if (code) *code = GRPC_STATUS_UNKNOWN;
  if (message) *message = NULL;
  if (response) *response = NULL;
  if (!c || !method || method[0] != '/' || !request || !mdc_valid_descriptor(request->descriptor) ||
      !mdc_valid_descriptor(response_desc) || !code || !message || !response)
    return MDC_ERR_ARG;

  /* Encode first: nothing is sent when this fails. */
  size_t req_len = protobuf_c_message_get_packed_size(request);
  grpc_slice req_slice = grpc_slice_malloc(req_len);
  protobuf_c_message_pack(request, GRPC_SLICE_START_PTR(req_slice));
  grpc_byte_buffer *send_buf = grpc_raw_byte_buffer_create(&req_slice, 1);
  grpc_slice_unref(req_slice);

  grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
  gpr_timespec deadline = deadline_ms > 0
                              ? gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                             gpr_time_from_millis(deadline_ms, GPR_TIMESPAN))
                              : gpr_inf_future(GPR_CLOCK_MONOTONIC);
  /* The method slice only has to live through grpc_channel_create_call. */
  grpc_slice method_slice = grpc_slice_from_copied_string(method);
  grpc_call *call = grpc_channel_create_call(c->channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                             method_slice, NULL, deadline, NULL);
  grpc_slice_unref(method_slice);

  grpc_byte_buffer *recv_buf = NULL;
  grpc_metadata_array initial_md, trailing_md;
  grpc_metadata_array_init(&initial_md);
  grpc_metadata_array_init(&trailing_md);
  grpc_status_code status = GRPC_STATUS_UNKNOWN;
  grpc_slice details = grpc_empty_slice();
  const char *error_string = NULL;

  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  /* The metadata is copied into the call when the batch starts. */
  grpc_metadata auth;
  memset(&auth, 0, sizeof auth);
  if (c->authorization) {
    auth.key = grpc_slice_from_static_string("authorization");
    auth.value = grpc_slice_from_static_string(c->authorization);
    ops[0].data.send_initial_metadata.count = 1;
    ops[0].data.send_initial_metadata.metadata = &auth;
  }
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = send_buf;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial_md;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &recv_buf;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &trailing_md;
  ops[5].data.recv_status_on_client.status = &status;
  ops[5].data.recv_status_on_client.status_details = &details;
  ops[5].data.recv_status_on_client.error_string = &error_string;

  int rc = MDC_OK;
  void *tag = &ops; /* any unique address */
  grpc_call_error err = grpc_call_start_batch(call, ops, 6, tag, NULL);
  if (err != GRPC_CALL_OK) {
    /* Only illegal arguments get here (e.g. a method path the core
     * rejects); the call never started, so the queue gets no event. */
    rc = MDC_ERR_CALL;
    *message = mdc_format("%s: gRPC refused to start the call: %s", method,
                          grpc_call_error_to_string(err));
  } else {
    /* The deadline bounds the call, so this wait ends. */
    grpc_event ev = grpc_completion_queue_pluck(cq, tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    *code = status;
    if (ev.type != GRPC_OP_COMPLETE || !ev.success) {
      /* The core completes the batch with success even for failed calls;
       * anything else is a broken runtime, not a server answer. */
      rc = MDC_ERR_CALL;
      *code = GRPC_STATUS_UNKNOWN;
      *message = mdc_format("%s: the call did not complete (event type %d)", method, (int)ev.type);
    } else if (status != GRPC_STATUS_OK) {
      size_t n = GRPC_SLICE_LENGTH(details);
      if (n == 0 && error_string)
        *message = strdup(error_string); /* local failures may carry only this */
      else
        *message = strndup((const char *)GRPC_SLICE_START_PTR(details), n);
    } else if (!recv_buf) {
      rc = MDC_ERR_DECODE;
      *message = mdc_format("%s: status OK but no response message", method);
    } else {
      size_t len;
      *response = mdc_decode(recv_buf, response_desc, &len);
      if (*response) {
        *message = strndup((const char *)GRPC_SLICE_START_PTR(details), GRPC_SLICE_LENGTH(details));
      } else {
        rc = MDC_ERR_DECODE;
        *message = mdc_format("%s: the %zu-byte response is not a valid %s", method, len,
                              response_desc->name);
      }
    }
    if (!*message) {
      if (*response) protobuf_c_message_free_unpacked(*response, NULL);
      *response = NULL;
      rc = MDC_ERR_NOMEM;
    }
  }

  grpc_call_unref(call);
  grpc_completion_queue_shutdown(cq);
  grpc_completion_queue_destroy(cq);
  grpc_byte_buffer_destroy(send_buf);
  if (recv_buf) grpc_byte_buffer_destroy(recv_buf);
  grpc_metadata_array_destroy(&initial_md);
  grpc_metadata_array_destroy(&trailing_md);
  grpc_slice_unref(details);
  gpr_free((void *)error_string);
  return rc;
}

const char *mdc_strerror(int rc) {
  switch (rc) {
    case MDC_OK:
      return "ok";
    case MDC_ERR_ARG:
      return "bad argument";
    case MDC_ERR_NOMEM:
      return "out of memory";
    case MDC_ERR_CALL:
      return "gRPC could not run the call";
    case MDC_ERR_DECODE:
      return "response did not decode";
    default:
      return "unknown mdc error";
  }
}

const char *mdc_status_name(grpc_status_code code) {
  static const char *const names[] = {"OK",
                                      "CANCELLED",
                                      "UNKNOWN",
                                      "INVALID_ARGUMENT",
                                      "DEADLINE_EXCEEDED",
                                      "NOT_FOUND",
                                      "ALREADY_EXISTS",
                                      "PERMISSION_DENIED",
                                      "RESOURCE_EXHAUSTED",
                                      "FAILED_PRECONDITION",
                                      "ABORTED",
                                      "OUT_OF_RANGE",
                                      "UNIMPLEMENTED",
                                      "INTERNAL",
                                      "UNAVAILABLE",
                                      "DATA_LOSS",
                                      "UNAUTHENTICATED"};
  if ((int)code >= 0 && (size_t)code < sizeof names / sizeof names[0]) return names[code];
  return "UNKNOWN_CODE";
}

int mdc_client_set_token(mdc_client *c, const char *jwt) {
  if (!c) return MDC_ERR_ARG;
  char *v = NULL;
  if (jwt && *jwt) {
    if (strchr(jwt, '\n') || strchr(jwt, '\r')) return MDC_ERR_ARG;
    v = mdc_format("Bearer %s", jwt);
    if (!v) return MDC_ERR_NOMEM;
  }
  free(c->authorization);
  c->authorization = v;
  return MDC_OK;
}
