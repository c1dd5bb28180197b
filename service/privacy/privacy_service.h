/* privacy_service: the Privacy tier (memory.v1.Privacy,
 * protos/memory/v1/privacy.proto): Forget runs the erasers every tier
 * offers (tier/tier_erase.h) one after another, in memory.v1.Tier order,
 * then issues a receipt (privacy_receipt.h), signed with --signing-key
 * and, unless a dry run, stored with the call's audit row in one
 * transaction; ListReceipts pages the stored ones.
 *
 * Forget's selection: by principal (with privacy:forget only the caller
 * itself) or by subject id (with privacy:forget only among the caller's
 * own records; privacy:forget:all: every owner's). The erasers get a
 * context whose principal sees exactly that, whatever the labels. */
#ifndef MEMORYD_PRIVACY_PRIVACY_SERVICE_H
#define MEMORYD_PRIVACY_PRIVACY_SERVICE_H

#include "service/tier/tier.h"

/* Serves memory.v1.Privacy (needs PostgreSQL). Must come after every tier
 * that offers an eraser. */
extern const tier privacy_tier;

#endif
