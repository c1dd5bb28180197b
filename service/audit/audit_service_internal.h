/* audit_service_internal: what audit_service.c (the tier), audit_list.c
 * (Audit.List) and audit_watch.c (Audit.Watch and the listener) share. Not
 * for other modules. */
#ifndef MEMORYD_AUDIT_AUDIT_SERVICE_INTERNAL_H
#define MEMORYD_AUDIT_AUDIT_SERVICE_INTERNAL_H

#include "service/audit/audit_codec.h"
#include "service/audit/audit_service.h"

typedef struct audit_watch audit_watch;

struct audit_service {
    pg_pool *pg;
    audit_service_options o;
    audit_watch *watch;
};

grpc_status_code audit_list_handler(rpc_call *call, const ProtobufCMessage *req,
                                    ProtobufCMessage *resp, void *arg);

/* ---- audit_watch.c ---- */
int audit_watch_start(audit_service *a, char *err, size_t errlen);
/* Stops the listener and ends open streams with UNAVAILABLE; accepts a
 * NULL a->watch. */
void audit_watch_stop(audit_service *a);
grpc_status_code audit_watch_handler(rpc_call *call, const ProtobufCMessage *req, void *arg);
size_t audit_watch_count(audit_service *a);

#endif
