/* stream_quota: how many streams one tenant, and one principal, may have
 * open at once (--max-streams-per-tenant, --max-streams-per-principal), so
 * one token cannot take every stream the server allows (--max-streams,
 * counted by the runtime) away from everyone else.
 *
 * An interceptor placed after authentication: a streaming call with a
 * principal takes a place in its tenant's and its principal's counts, and
 * hands them back when the call is destroyed, whatever ended it. Calls
 * without a principal (open health and reflection) are bounded by the
 * server-wide limit and their own (--max-health-watchers). Thread-safe. */
#ifndef MEMORYD_AUTH_STREAM_QUOTA_H
#define MEMORYD_AUTH_STREAM_QUOTA_H

#include "service/rpc/rpc.h"

typedef struct stream_quota stream_quota;

/* Limits <= 0 take the defaults (256 per tenant, 32 per principal). NULL
 * when out of memory. Free after the server that uses it. */
stream_quota *stream_quota_create(int per_tenant, int per_principal);
/* The same counts for one kind of call with limits of its own (Privacy.
 * Export's): what names them in refusals ("exports"), with the flags that
 * set them (static strings). */
stream_quota *stream_quota_create_for(const char *what, int per_tenant, const char *tenant_flag,
                                      int per_principal, const char *principal_flag);
void stream_quota_free(stream_quota *q);

/* The interceptor (arg: the stream_quota): RESOURCE_EXHAUSTED naming the
 * flag when the tenant or the principal is at its limit. */
grpc_status_code stream_quota_interceptor(rpc_call *call, void *arg);
/* Takes call's places in q (its principal's, which must be set), handed
 * back when the call is destroyed: GRPC_STATUS_OK, or RESOURCE_EXHAUSTED
 * naming the flag. For a handler whose calls have a quota of their own. */
grpc_status_code stream_quota_take(stream_quota *q, rpc_call *call);

/* Streams counted for a tenant / for (tenant, sub) now (for tests). */
int stream_quota_count(stream_quota *q, const char *tenant, const char *sub);

#endif
