/* instance: this process's row in server_instances (start and stop times,
 * host, pid, version), written best-effort: a failure is logged, never
 * fatal. */
#ifndef MEMORYD_STORE_INSTANCE_H
#define MEMORYD_STORE_INSTANCE_H

#include "service/store/pg_pool.h"

typedef struct instance instance;

/* Records the start; returns a handle (NULL when it could not be written). */
instance *instance_start(pg_pool *pg, const char *listen);
/* Records the stop and frees the handle; accepts NULL. */
void instance_stop(instance *inst, pg_pool *pg);
/* The instance id (a UUID string). */
const char *instance_id(const instance *inst);

#endif
