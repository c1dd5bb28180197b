/* global_service: the GlobalMemory tier (descriptor, state), its PII rule
 * and rendering; the handlers are in global_rpc_entities.c,
 * global_rpc_graph.c and global_rpc_tasks.c. See global_service.h. */
#include "service/global/global_service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/auth/authn.h"
#include "service/global/global_service_internal.h"
#include "service/pb/pbjson.h"
#include "service/pb/pbtime.h"

grpc_status_code global_pii(rpc_call *call, const global_service *svc, const char *id_path,
                            const char **id, pii_field *f, size_t n, const char *const **kinds,
                            size_t *nkinds) {
    pii_field all[4];
    if (n + 1 > sizeof all / sizeof all[0]) return rpc_call_oom(call);
    all[0] = (pii_field)PII_NAME(id_path, id);
    memcpy(all + 1, f, n * sizeof *f);
    char why[512];
    int rc = pii_policy_apply(rpc_call_arena(call),
                              pii_policy_mode(svc->env->pii, authn_principal(call)), all, n + 1,
                              (const char ***)kinds, nkinds, why, sizeof why);
    if (rc == STATUS_EINVALID) return rpc_call_invalid(call, "%s", why);
    return rc == STATUS_OK ? GRPC_STATUS_OK : rpc_call_oom(call);
}

/* ------------------------------------------------------------ rendering */

static Google__Protobuf__Struct *render_json(arena *a, const char *json) {
    Google__Protobuf__Struct *s = NULL;
    return pbjson_to_struct(a, json, strlen(json), &s) == 0 ? s : NULL;
}

Memory__V1__Entity *global_render_entity(arena *a, const global_entity *e) {
    Memory__V1__Entity *m = arena_message(a, &memory__v1__entity__descriptor);
    if (!m) return NULL;
    m->id = (char *)e->id;
    m->type = (char *)e->type;
    m->name = (char *)e->name;
    if (!(m->properties = render_json(a, e->properties_json)) ||
        !(m->meta = tier_meta_render(a, &e->meta)))
        return NULL;
    return m;
}

Memory__V1__Relationship *global_render_rel(arena *a, const global_rel *r) {
    Memory__V1__Relationship *m = arena_message(a, &memory__v1__relationship__descriptor);
    if (!m) return NULL;
    m->source_id = (char *)r->source_id;
    m->type = (char *)r->type;
    m->target_id = (char *)r->target_id;
    if (!(m->properties = render_json(a, r->properties_json)) ||
        !(m->meta = tier_meta_render(a, &r->meta)))
        return NULL;
    return m;
}

Memory__V1__Task *global_render_task(arena *a, const global_task *t) {
    Memory__V1__Task *m = arena_message(a, &memory__v1__task__descriptor);
    if (!m) return NULL;
    m->id = (char *)t->id;
    m->type = (char *)t->type;
    m->description = (char *)t->description;
    m->status = (Memory__V1__TaskStatus)t->status;
    if (t->provenance_json && !(m->provenance = render_json(a, t->provenance_json))) return NULL;
    if (t->result_json && !(m->result = render_json(a, t->result_json))) return NULL;
    m->n_entity_ids = t->nentity_ids;
    m->entity_ids = (char **)t->entity_ids;
    if (!(m->start_time = pbtime_timestamp(a, t->start_us))) return NULL;
    if (t->has_end && !(m->end_time = pbtime_timestamp(a, t->end_us))) return NULL;
    if (!(m->meta = tier_meta_render(a, &t->meta))) return NULL;
    return m;
}

static ProtobufCMessage *page_entity(arena *a, const void *e) {
    Memory__V1__Entity *m = global_render_entity(a, e);
    return m ? &m->base : NULL;
}
static ProtobufCMessage *page_task(arena *a, const void *t) {
    Memory__V1__Task *m = global_render_task(a, t);
    return m ? &m->base : NULL;
}
static const char *name_entity(arena *a, const void *e) {
    return arena_printf(a, "entity:%s", ((const global_entity *)e)->id);
}
static const char *name_task(arena *a, const void *t) {
    return arena_printf(a, "task:%s", ((const global_task *)t)->id);
}
const tier_page_kind global_entity_page = {sizeof(global_entity), page_entity, name_entity};
const tier_page_kind global_task_page = {sizeof(global_task), page_task, name_task};

/* ------------------------------------------------------------ the tier */

static int global_open(tier_env *env, void **state, char *err, size_t errlen) {
    global_service *svc = *state = tier_state_new(sizeof *svc, err, errlen);
    if (!svc) return -1;
    svc->env = env;
    svc->max_depth = env->cfg ? env->cfg->traverse_max_depth : 10;
    if (svc->max_depth <= 0 || svc->max_depth > 10) svc->max_depth = 10;
    svc->entities = env->entity_cache;
    svc->store = tier_store_on(env->pg, env->pga, env->max_response_bytes);
    svc->store.text_language = tier_env_text_language(env);
    return 0;
}

#define SVC "memory.v1.GlobalMemory"
static const rpc_method methods[] = {
    RPC_METHOD_UNARY(SVC, "PutEntity", memory__v1__put_entity, "global:write",
                     global_do_put_entity),
    RPC_METHOD_UNARY(SVC, "GetEntity", memory__v1__get_entity, "global:read", global_do_get_entity),
    RPC_METHOD_UNARY(SVC, "DeleteEntity", memory__v1__delete_entity, "global:write",
                     global_do_delete_entity),
    RPC_METHOD_UNARY(SVC, "QueryEntities", memory__v1__query_entities, "global:read",
                     global_do_query_entities),
    RPC_METHOD_UNARY(SVC, "PutRelationship", memory__v1__put_relationship, "global:write",
                     global_do_put_rel),
    RPC_METHOD_UNARY(SVC, "DeleteRelationship", memory__v1__delete_relationship, "global:write",
                     global_do_delete_rel),
    RPC_METHOD_UNARY(SVC, "Traverse", memory__v1__traverse, "global:read", global_do_traverse),
    RPC_METHOD_UNARY(SVC, "RecordTask", memory__v1__record_task, "global:write",
                     global_do_record_task),
    RPC_METHOD_UNARY(SVC, "ListTasks", memory__v1__list_tasks, "global:read", global_do_list_tasks),
};

static const tier_service services[] = {{SVC, HEALTH_NEEDS_PG}};

static const tier_records records =
    TIER_RECORDS(MEMORY__V1__TIER__TIER_GLOBAL, TIER_ORDER_RECORDS, global_erase, global_export,
                 "entities", "relationships", "tasks");

const tier global_tier = {TIER_FIELDS("global", services, methods, global_open, free),
                          .records = &records, .route = &global_route};
