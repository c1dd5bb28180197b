/* access: the memory.v1.Access service (protos/memory/v1/access.proto):
 * WhoAmI reports the calling token's claims, Attenuate mints a narrower
 * child token signed with memoryd's own key, Revoke revokes a token (and
 * with it every token attenuated from it). */
#ifndef MEMORYD_ACCESS_ACCESS_H
#define MEMORYD_ACCESS_ACCESS_H
#include "service/auth/authn.h"
#include "service/rpc/rpc.h"
#include "service/store/pg_pool.h"

/* Registers the three methods. a and pg are borrowed and must outlive the
 * server. Returns 0, or -1 on a registration error. */
int access_register(rpc_server *srv, authn *a, pg_pool *pg);

#endif
