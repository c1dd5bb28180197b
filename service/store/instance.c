/* instance: server_instances bookkeeping. */
#include "service/store/instance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "service/core/clock.h"
#include "service/core/log.h"

#ifndef MEMORYD_VERSION
#define MEMORYD_VERSION "0.1.0"
#endif

struct instance {
    char id[40];
};

/* Bounded so a hung Postgres cannot stall start-up or shutdown. */
static int64_t soon(void) { return clock_mono_ms(NULL) + 3000; }

instance *instance_start(pg_pool *pg, const char *listen) {
    char err[256], host[256] = "unknown", pid[16];
    gethostname(host, sizeof host - 1);
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    PGconn *c = pg_pool_acquire(pg, soon(), err, sizeof err);
    if (!c) {
        log_fields(LOG_WARN, "cannot record the instance", LOG_F_STR, "error", err, LOG_F_END);
        return NULL;
    }
    const char *params[] = {host, pid, MEMORYD_VERSION, listen};
    PGresult *r = PQexecParams(c,
                               "INSERT INTO server_instances (instance_id, hostname, pid, version,"
                               " listen) VALUES (gen_random_uuid(), $1, $2::int, $3, $4)"
                               " RETURNING instance_id",
                               4, NULL, params, NULL, NULL, 0);
    instance *inst = NULL;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && (inst = calloc(1, sizeof *inst))) {
        snprintf(inst->id, sizeof inst->id, "%s", PQgetvalue(r, 0, 0));
        log_fields(LOG_INFO, "instance registered", LOG_F_STR, "instance_id", inst->id, LOG_F_END);
    } else {
        log_fields(LOG_WARN, "cannot record the instance", LOG_F_STR, "error",
                   PQresultErrorMessage(r), LOG_F_END);
    }
    int ok = PQresultStatus(r) == PGRES_TUPLES_OK;
    PQclear(r);
    pg_pool_release(pg, c, !ok);
    return inst;
}

void instance_stop(instance *inst, pg_pool *pg) {
    if (!inst) return;
    char err[256];
    PGconn *c = pg ? pg_pool_acquire(pg, soon(), err, sizeof err) : NULL;
    if (c) {
        const char *params[] = {inst->id};
        PGresult *r = PQexecParams(c,
                                   "UPDATE server_instances SET stopped_at = now()"
                                   " WHERE instance_id = $1::uuid",
                                   1, NULL, params, NULL, NULL, 0);
        int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
        pg_pool_release(pg, c, !ok);
    }
    free(inst);
}

const char *instance_id(const instance *inst) { return inst->id; }
