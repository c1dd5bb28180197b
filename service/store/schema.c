/* schema: memoryd's PostgreSQL schema as an ordered list of migrations.
 * Append new versions at the end; never edit one that has shipped. */
#include "service/store/pg_migrate.h"

const pg_migration memoryd_migrations[] = {
    {1, "server instances",
     /* Every memoryd that starts registers itself: operators see which
      * replicas ran which version, and later tiers use the id to tell their
      * own cross-replica notifications apart. */
     "CREATE TABLE server_instances ("
     " instance_id uuid PRIMARY KEY,"
     " hostname text NOT NULL,"
     " pid integer NOT NULL,"
     " version text NOT NULL,"
     " listen text NOT NULL,"
     " started_at timestamptz NOT NULL DEFAULT now(),"
     " stopped_at timestamptz);"
     "CREATE INDEX server_instances_started_at ON server_instances (started_at DESC);"},
};

const size_t memoryd_migrations_count = sizeof memoryd_migrations / sizeof memoryd_migrations[0];
