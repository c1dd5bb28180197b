/* A minimal C agent of memoryd: checks the server's health, records one
 * entity in global memory and reads it back, with the protobuf-c messages
 * of //protos:api_c and the mdc_* helper.
 *
 *   MEMORYD_TOKEN=$(cat .local/dev-token) bazel run //clients/c:example -- [ADDRESS]
 *
 * (ADDRESS defaults to localhost:50051.) MEMORYD_TOKEN is a capability
 * token with global:read and global:write; without one the example only
 * shows GetEntity answering UNAUTHENTICATED. Exits 1 when memoryd cannot
 * be reached (UNAVAILABLE, DEADLINE_EXCEEDED, or any failed health
 * check), 0 when the calls went through, whatever their status. */
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
  const Grpc__Health__V1__HealthCheckResponse *h =
      (const Grpc__Health__V1__HealthCheckResponse *)resp;
  const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(
      &grpc__health__v1__health_check_response__serving_status__descriptor, h->status);
  printf("health: %s\n", v ? v->name : "?");
  protobuf_c_message_free_unpacked(resp, NULL);
  free(msg);

  /* 2. Record one entity of the knowledge graph, then read it back.
   *
   * A real agent sends its capability token with every call, looks up
   * what it knows before acting (GetEntity / QueryEntities / Traverse, or
   * Router.Query across all tiers), records what it learned with PutEntity
   * and PutRelationship and logs the task with RecordTask — treating
   * NOT_FOUND as "not known yet" and retrying UNAVAILABLE with backoff. */
  const char *token = getenv("MEMORYD_TOKEN");
  if (token && *token) {
    if (mdc_client_set_token(c, token) != 0) {
      fprintf(stderr, "MEMORYD_TOKEN is not a usable token\n");
      mdc_client_free(c);
      return 1;
    }
    Google__Protobuf__Value lang = GOOGLE__PROTOBUF__VALUE__INIT;
    lang.kind_case = GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE;
    lang.string_value = "C";
    Google__Protobuf__Struct__FieldsEntry field = GOOGLE__PROTOBUF__STRUCT__FIELDS_ENTRY__INIT;
    field.key = "written_in";
    field.value = &lang;
    Google__Protobuf__Struct__FieldsEntry *fields[] = {&field};
    Google__Protobuf__Struct props = GOOGLE__PROTOBUF__STRUCT__INIT;
    props.n_fields = 1;
    props.fields = fields;
    Memory__V1__PutEntityRequest put = MEMORY__V1__PUT_ENTITY_REQUEST__INIT;
    put.id = "example-entity";
    put.type = "example";
    put.name = "written by the C example";
    put.properties = &props;
    rc = mdc_call_unary(c, "/memory.v1.GlobalMemory/PutEntity", &put.base,
                        &memory__v1__put_entity_response__descriptor, DEADLINE_MS, &code, &msg,
                        &resp);
    if (rc != 0) {
      fprintf(stderr, "PutEntity: %s: %s\n", mdc_strerror(rc), msg ? msg : "");
      exit_code = 1;
    } else if (code == GRPC_STATUS_OK) {
      const Memory__V1__PutEntityResponse *p = (const Memory__V1__PutEntityResponse *)resp;
      printf("PutEntity: OK: %s version=%lld\n", p->created ? "created" : "replaced",
             p->entity && p->entity->meta ? (long long)p->entity->meta->version : 0LL);
    } else {
      /* GetEntity below still runs: it shows what the token may read. */
      printf("PutEntity: %s: %s\n", mdc_status_name(code), msg);
      if (unreachable(code)) exit_code = 1;
    }
    if (resp) protobuf_c_message_free_unpacked(resp, NULL);
    resp = NULL;
    free(msg);
    msg = NULL;
  }
  Memory__V1__GetEntityRequest req = MEMORY__V1__GET_ENTITY_REQUEST__INIT;
  req.id = "example-entity";
  rc =
      mdc_call_unary(c, "/memory.v1.GlobalMemory/GetEntity", &req.base,
                     &memory__v1__get_entity_response__descriptor, DEADLINE_MS, &code, &msg, &resp);
  if (rc != 0) {
    fprintf(stderr, "GetEntity: %s: %s\n", mdc_strerror(rc), msg ? msg : "");
    exit_code = 1;
  } else if (code == GRPC_STATUS_OK) {
    const Memory__V1__GetEntityResponse *e = (const Memory__V1__GetEntityResponse *)resp;
    const Memory__V1__Entity *ent = e->entity;
    printf("GetEntity: OK: id=%s name=\"%s\" version=%lld\n", ent && ent->id ? ent->id : "",
           ent && ent->name ? ent->name : "",
           ent && ent->meta ? (long long)ent->meta->version : 0LL);
  } else {
    printf("GetEntity: %s: %s\n", mdc_status_name(code), msg);
    if (unreachable(code)) exit_code = 1;
  }
  if (resp) protobuf_c_message_free_unpacked(resp, NULL);
  free(msg);
  mdc_client_free(c);
  return exit_code;
}
