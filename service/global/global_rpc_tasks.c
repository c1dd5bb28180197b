/* global_rpc_tasks: the GlobalMemory handlers for task history:
 * RecordTask and ListTasks. */
#include <stdio.h>
#include <stdlib.h>

#include "service/auth/authn.h"
#include "service/global/global_service_internal.h"
#include "service/tier/tier_check.h"
#include "service/tier/tier_page.h"

#define DESCRIPTION_MAX 4096
#define TASK_JSON_MAX (1024 * 1024)
#define ENTITY_IDS_MAX 1000

static grpc_status_code task_in(rpc_call *call, const Memory__V1__RecordTaskRequest *req,
                                global_task_in *in) {
    in->id = req->id;
    in->description = req->description;
    RPC_CHECK(tier_check_id(call, "id", &in->id, 1));
    RPC_CHECK(tier_check_name(call, "type", req->type, GLOBAL_TYPE_MAX, 0));
    RPC_CHECK(tier_check_text(call, "description", req->description, DESCRIPTION_MAX));
    RPC_CHECK(tier_check_label(call, "label", (int)req->label));
    if (req->status < MEMORY__V1__TASK_STATUS__TASK_STATUS_PENDING ||
        req->status > MEMORY__V1__TASK_STATUS__TASK_STATUS_CANCELLED)
        return rpc_call_invalid(call,
                                "status: %s; a task needs PENDING, RUNNING, SUCCEEDED, FAILED "
                                "or CANCELLED",
                                req->status == 0 ? "TASK_STATUS_UNSPECIFIED" : "unknown");
    if (req->n_entity_ids > ENTITY_IDS_MAX)
        return rpc_call_invalid(call, "entity_ids: %zu; at most %d", req->n_entity_ids,
                                ENTITY_IDS_MAX);
    for (size_t i = 0; i < req->n_entity_ids; i++) {
        char field[48];
        const char *id = req->entity_ids[i];
        snprintf(field, sizeof field, "entity_ids[%zu]", i);
        RPC_CHECK(tier_check_id(call, field, &id, 0));
    }
    if (req->start_time) {
        RPC_CHECK(tier_check_time(call, "start_time", req->start_time, &in->start_us));
        in->has_start = 1;
    }
    if (req->end_time) {
        RPC_CHECK(tier_check_time(call, "end_time", req->end_time, &in->end_us));
        in->has_end = 1;
        if (in->has_start && in->end_us < in->start_us)
            return rpc_call_invalid(call, "end_time: before start_time");
    }
    in->type = req->type;
    in->status = (int)req->status;
    in->entity_ids = (const char *const *)req->entity_ids;
    in->nentity_ids = req->n_entity_ids;
    in->label = (int)req->label;
    return GRPC_STATUS_OK;
}

/* RecordTask's answer until the loop thread renders it. */
typedef struct {
    global_task t;
    int created;
} task_put;

static grpc_status_code render_record(tier_pending_call *pc) {
    const task_put *w = pc->out;
    Memory__V1__RecordTaskResponse *resp = (Memory__V1__RecordTaskResponse *)pc->resp;
    if (!(resp->task = global_render_task(pc->c->ar, &w->t))) return rpc_call_oom(pc->call);
    resp->created = w->created;
    return GRPC_STATUS_OK;
}

RPC_UNARY_HANDLER(global_do_record_task, global_service, Memory__V1__RecordTaskRequest,
                  Memory__V1__RecordTaskResponse) {
    global_task_in in = {0};
    RPC_CHECK(task_in(call, req, &in));
    const Google__Protobuf__Struct *prov = req->provenance, *result = req->result;
    pii_field f[] = {PII_TEXT("description", &in.description), PII_STRUCT("provenance", &prov),
                     PII_STRUCT("result", &result)};
    RPC_CHECK(global_pii(call, svc, "id", &in.id, f, 3, &in.pii_kinds, &in.npii));
    if (prov)
        RPC_CHECK(tier_check_struct(call, "provenance", prov, TASK_JSON_MAX, &in.provenance_json));
    if (result)
        RPC_CHECK(tier_check_struct(call, "result", result, TASK_JSON_MAX, &in.result_json));
    tier_target(call, "task:%s", in.id);
    tier_pending_call *pc = tier_pending_new(call, "global", svc->env->audit, sizeof(task_put),
                                             render_record, &resp->base);
    task_put *w = pc ? pc->out : NULL;
    tier_async *op = w ? global_record_task_async(&svc->store, pc->c, &in, &w->t, &w->created,
                                                  tier_pending_done, pc)
                       : NULL;
    return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call);
}

/* ListTasks' answer until the loop thread renders it: the tasks and the
 * cursor's binding for the next page's token. */
typedef struct {
    global_tasks_out page;
    tier_page pg;
} tasks_pending;

static grpc_status_code render_tasks(tier_pending_call *pc) {
    const tasks_pending *tp = pc->out;
    const global_service *svc = pc->arg;
    const global_task *tasks = tp->page.tasks;
    Memory__V1__ListTasksResponse *resp = (Memory__V1__ListTasksResponse *)pc->resp;
    ProtobufCMessage **msgs;
    int cut;
    RPC_CHECK(tier_page_fill(pc->call, &global_task_page, tasks, tp->page.n,
                             svc->env->max_response_bytes, &msgs, &resp->n_tasks, &cut));
    resp->tasks = (Memory__V1__Task **)msgs;
    size_t i = resp->n_tasks;
    if ((tp->page.more || cut) && i > 0) {
        const char *us = arena_printf(pc->c->ar, "%lld", (long long)tasks[i - 1].start_us);
        const char *next[2] = {us, tasks[i - 1].id};
        if (!us || !(resp->next_page_token = tier_page_seal(pc->call, &tp->pg, next, 2)))
            return rpc_call_oom(pc->call);
    }
    return GRPC_STATUS_OK;
}

RPC_UNARY_HANDLER(global_do_list_tasks, global_service, Memory__V1__ListTasksRequest,
                  Memory__V1__ListTasksResponse) {
    global_list_tasks_in in = {0};
    if (req->status < 0 || req->status > MEMORY__V1__TASK_STATUS__TASK_STATUS_CANCELLED)
        return rpc_call_invalid(call, "status: %d is not a memory.v1.TaskStatus", (int)req->status);
    in.status = (int)req->status;
    in.type = req->type;
    tier_time_range tr;
    const char *cursor[2];
    int resumed;
    RPC_CHECK(tier_check_name(call, "type", req->type, GLOBAL_TYPE_MAX, 0));
    RPC_CHECK(tier_page_size(call, req->page_size, &in.limit));
    RPC_CHECK(tier_check_time_range(call, "time_range", req->time_range, &tr));
    tier_pending_call *pc =
        tier_pending_new(call, "global", NULL, sizeof(tasks_pending), render_tasks, &resp->base);
    if (!pc) return rpc_call_oom(call);
    tasks_pending *tp = pc->out;
    RPC_CHECK(tier_page_bind(call, authn_principal(call), &req->base, &tp->pg));
    RPC_CHECK(tier_page_open(call, &tp->pg, req->page_token, cursor, 2, 1, &resumed));
    in.has_start = tr.has_start;
    in.start_us = tr.start_us;
    in.has_end = tr.has_end;
    in.end_us = tr.end_us;
    if (resumed) {
        char *end = NULL;
        in.after_start_us = strtoll(cursor[0], &end, 10);
        if (!end || *end) return tier_page_refuse(call, &tp->pg);
        in.has_after = 1;
        in.after_id = cursor[1];
    }
    pc->arg = svc;
    tier_async *op =
        global_list_tasks_async(&svc->store, pc->c, &in, &tp->page, tier_pending_done, pc);
    return op ? tier_pending(call, &svc->store, op) : rpc_call_oom(call);
}
