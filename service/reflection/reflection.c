/* reflection: answers each ServerReflectionRequest on the stream with one
 * response. Errors about a request (unknown file or symbol) go in
 * error_response and the stream stays OK, as the protocol requires. */
#include "service/reflection/reflection.h"

#include <stdio.h>
#include <string.h>

#include "grpc/reflection/v1/reflection.pb-c.h"

typedef Grpc__Reflection__V1__ServerReflectionRequest refl_request;
typedef Grpc__Reflection__V1__ServerReflectionResponse refl_response;

static void set_error(arena *a, refl_response *resp, grpc_status_code code, const char *what,
                      const char *name) {
    Grpc__Reflection__V1__ErrorResponse *e = arena_alloc(a, sizeof *e);
    grpc__reflection__v1__error_response__init(e);
    e->error_code = code;
    e->error_message = arena_printf(a, "%s \"%s\" not found", what, name);
    resp->message_response_case =
        GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ERROR_RESPONSE;
    resp->error_response = e;
}

static void set_files(arena *a, const descpool *pool, refl_response *resp, int file) {
    size_t total = descpool_file_count(pool);
    int *order = arena_alloc(a, total * sizeof *order);
    size_t n = descpool_file_closure(pool, file, order);
    Grpc__Reflection__V1__FileDescriptorResponse *fr = arena_alloc(a, sizeof *fr);
    grpc__reflection__v1__file_descriptor_response__init(fr);
    fr->file_descriptor_proto = arena_alloc(a, n * sizeof *fr->file_descriptor_proto);
    fr->n_file_descriptor_proto = n;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *data;
        size_t len;
        descpool_file_bytes(pool, order[i], &data, &len);
        /* Sent as is: the bytes are already a serialized FileDescriptorProto. */
        fr->file_descriptor_proto[i].data = (uint8_t *)data;
        fr->file_descriptor_proto[i].len = len;
    }
    resp->message_response_case =
        GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_FILE_DESCRIPTOR_RESPONSE;
    resp->file_descriptor_response = fr;
}

static void set_services(arena *a, const descpool *pool, refl_response *resp) {
    size_t n = descpool_service_count(pool);
    Grpc__Reflection__V1__ListServiceResponse *ls = arena_alloc(a, sizeof *ls);
    grpc__reflection__v1__list_service_response__init(ls);
    ls->service = arena_alloc(a, n * sizeof *ls->service);
    ls->n_service = n;
    for (size_t i = 0; i < n; i++) {
        ls->service[i] = arena_alloc(a, sizeof **ls->service);
        grpc__reflection__v1__service_response__init(ls->service[i]);
        ls->service[i]->name = (char *)descpool_service_name(pool, i);
    }
    resp->message_response_case =
        GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_LIST_SERVICES_RESPONSE;
    resp->list_services_response = ls;
}

static grpc_status_code on_request(rpc_call *call, const ProtobufCMessage *req_msg,
                                   ProtobufCMessage *resp_msg, int *send, void *arg) {
    (void)send;
    const descpool *pool = arg;
    const refl_request *req = (const void *)req_msg;
    refl_response *resp = (void *)resp_msg;
    arena *a = rpc_call_arena(call); /* per message on bidi streams */

    resp->valid_host = req->host ? req->host : "";
    resp->original_request = (refl_request *)req;
    int file;
    switch (req->message_request_case) {
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_BY_FILENAME:
        file = descpool_find_file(pool, req->file_by_filename);
        if (file < 0) set_error(a, resp, GRPC_STATUS_NOT_FOUND, "file", req->file_by_filename);
        else set_files(a, pool, resp, file);
        break;
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_SYMBOL:
        file = descpool_find_symbol(pool, req->file_containing_symbol);
        if (file < 0)
            set_error(a, resp, GRPC_STATUS_NOT_FOUND, "symbol", req->file_containing_symbol);
        else set_files(a, pool, resp, file);
        break;
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_EXTENSION:
        /* The API defines no extensions. */
        set_error(a, resp, GRPC_STATUS_NOT_FOUND, "extension of",
                  req->file_containing_extension && req->file_containing_extension->containing_type
                      ? req->file_containing_extension->containing_type
                      : "");
        break;
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_ALL_EXTENSION_NUMBERS_OF_TYPE: {
        const char *type = req->all_extension_numbers_of_type;
        if (!descpool_is_message(pool, type)) {
            set_error(a, resp, GRPC_STATUS_NOT_FOUND, "message type", type);
            break;
        }
        Grpc__Reflection__V1__ExtensionNumberResponse *en = arena_alloc(a, sizeof *en);
        grpc__reflection__v1__extension_number_response__init(en);
        en->base_type_name = (char *)type;
        resp->message_response_case =
            GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ALL_EXTENSION_NUMBERS_RESPONSE;
        resp->all_extension_numbers_response = en;
        break;
    }
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_LIST_SERVICES:
        set_services(a, pool, resp);
        break;
    default: {
        Grpc__Reflection__V1__ErrorResponse *e = arena_alloc(a, sizeof *e);
        grpc__reflection__v1__error_response__init(e);
        e->error_code = GRPC_STATUS_INVALID_ARGUMENT;
        e->error_message = "the request names no reflection operation";
        resp->message_response_case =
            GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ERROR_RESPONSE;
        resp->error_response = e;
    }
    }
    return GRPC_STATUS_OK;
}

int reflection_register(rpc_server *srv, const descpool *pool) {
    static const char *const paths[] = {
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
    };
    for (size_t i = 0; i < 2; i++) {
        const rpc_method m = {
            .path = paths[i],
            .kind = RPC_BIDI_STREAM,
            .request = &grpc__reflection__v1__server_reflection_request__descriptor,
            .response = &grpc__reflection__v1__server_reflection_response__descriptor,
            .bidi = on_request,
            .arg = (void *)pool,
        };
        if (rpc_server_add_method(srv, &m) != 0) return -1;
    }
    return 0;
}

const char *reflection_describe_unknown(const char *path, void *arg) {
    static _Thread_local char text[600];
    if (!descpool_has_method_path(arg, path)) return NULL;
    snprintf(text, sizeof text,
             "%s is part of the memoryd API but not implemented in this "
             "build yet",
             path + 1);
    return text;
}
