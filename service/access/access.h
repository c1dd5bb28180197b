/* access: the memory.v1.Access service (protos/memory/v1/access.proto):
 * WhoAmI reports the calling token's claims, Attenuate mints a narrower
 * child token signed with memoryd's own key (recorded in the token store,
 * access_store.h), Revoke revokes a token (and with it every token
 * attenuated from it). */
#ifndef MEMORYD_ACCESS_ACCESS_H
#define MEMORYD_ACCESS_ACCESS_H

#include "service/tier/tier.h"

/* The tier: serves memory.v1.Access (needs PostgreSQL). Opened with
 * env->auth (keys, revocations) and env->pg (the token store). */
extern const tier access_tier;

#endif
