/* pg_migrate: versioned schema migrations applied at start-up.
 *
 * Each migration runs in its own transaction together with the row that
 * records it in schema_migrations, so a crash never leaves one half
 * applied; an advisory lock serialises replicas starting at once.
 * Applying the same list twice changes nothing. */
#ifndef MEMORYD_STORE_PG_MIGRATE_H
#define MEMORYD_STORE_PG_MIGRATE_H

#include <libpq-fe.h>
#include <stddef.h>

typedef struct pg_migration {
    int version;      /* strictly increasing, never reused */
    const char *name; /* short description, recorded with the version */
    const char *sql;  /* one or more statements */
} pg_migration;

/* memoryd's own schema, in order (service/store/schema.c). */
extern const pg_migration memoryd_migrations[];
extern const size_t memoryd_migrations_count;

/* Applies the migrations of list missing from conn's database. Returns 0
 * and the number applied in *applied, or -1 with the failing version and
 * Postgres's message in err (that migration is rolled back). */
int pg_migrate(PGconn *conn, const pg_migration *list, size_t n, int *applied, char *err,
               size_t errlen);

/* The highest version recorded in conn's database (0 for none), or -1. */
int pg_migrate_current_version(PGconn *conn);

#endif
