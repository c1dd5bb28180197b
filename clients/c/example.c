/* A minimal C agent of memoryd: checks the server's health, then asks
 * global memory for one entity, with the protobuf-c messages of
 * //protos:api_c and the mdc_* helper.
 *
 *   bazel run //clients/c:example -- [ADDRESS]     (default localhost:50051)
 *
 * Exits 1 when memoryd cannot be reached (UNAVAILABLE, DEADLINE_EXCEEDED,
 * or any failed health check), 0 when the calls went through, whatever
 * GetEntity's status: until the global tier lands it answers
 * UNIMPLEMENTED. */
#include <stdio.h>
#include <stdlib.h>

#include "clients/c/memoryd_client.h"
#include "grpc/health/v1/health.pb-c.h"
#include "memory/v1/global_memory.pb-c.h"

#define DEADLINE_MS 5000 /* every call gets one: a stalled server must not hang us */

static int unreachable(grpc_status_code code) {
  return code == GRPC_STATUS_UNAVAILABLE || code == GRPC_STATUS_DEADLINE_EXCEEDED;
}

int main(int argc, char **argv) {
  const char *target = argc > 1 ? argv[1] : "localhost:50051";
  mdc_client *c;
  int rc = mdc_client_create(target, &c);
  if (rc != 0) {
    fprintf(stderr, "mdc_client_create(%s): %s\n", target, mdc_strerror(rc));
    return 1;
  }
  int exit_code = 0;
  grpc_status_code code;
  char *msg = NULL;
  ProtobufCMessage *resp = NULL;

  /* 1. Is memoryd there and serving? ("" = the server as a whole.) */
  Grpc__Health__V1__HealthCheckRequest hreq = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
  rc = mdc_call_unary(c, "/grpc.health.v1.Health/Check", &hreq.base,
                      &grpc__health__v1__health_check_response__descriptor, DEADLINE_MS, &code,
                      &msg, &resp);
  if (rc != 0 || code != GRPC_STATUS_OK) {
    fprintf(stderr, "cannot reach memoryd at %s: %s: %s\n", target,
            rc != 0 ? mdc_strerror(rc) : mdc_status_name(code), msg ? msg : "");
    free(msg);
    mdc_client_free(c);
    return 1;
  }
  const Grpc__Health__V1__HealthCheckResponse *h = (const Grpc__Health__V1__HealthCheckResponse *)resp;
  const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(
      &grpc__health__v1__health_check_response__serving_status__descriptor, h->status);
  printf("health: %s\n", v ? v->name : "?");
  protobuf_c_message_free_unpacked(resp, NULL);
  free(msg);

  /* 2. Read one entity of the knowledge graph.
   *
   * A real agent would send its capability token with every call (an
   * `authorization: Bearer <jwt>` header, once tokens land), look up what
   * it knows before acting (GetEntity / QueryEntities / Traverse, or
   * Router.Query across all tiers), record what it learned with PutEntity
   * and PutRelationship and log the task with RecordTask — treating
   * NOT_FOUND as "not known yet" and retrying UNAVAILABLE with backoff. */
  Memory__V1__GetEntityRequest req = MEMORY__V1__GET_ENTITY_REQUEST__INIT;
  req.id = "example-entity";
  rc = mdc_call_unary(c, "/memory.v1.GlobalMemory/GetEntity", &req.base,
                      &memory__v1__get_entity_response__descriptor, DEADLINE_MS, &code, &msg,
                      &resp);
  if (rc != 0) {
    fprintf(stderr, "GetEntity: %s: %s\n", mdc_strerror(rc), msg ? msg : "");
    exit_code = 1;
  } else if (code == GRPC_STATUS_OK) {
    const Memory__V1__GetEntityResponse *e = (const Memory__V1__GetEntityResponse *)resp;
    printf("GetEntity: OK: id=%s\n", e->entity && e->entity->id ? e->entity->id : "");
  } else {
    printf("GetEntity: %s: %s\n", mdc_status_name(code), msg);
    if (unreachable(code)) exit_code = 1;
  }
  if (resp) protobuf_c_message_free_unpacked(resp, NULL);
  free(msg);
  mdc_client_free(c);
  return exit_code;
}
