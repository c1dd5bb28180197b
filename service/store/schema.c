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
    {2, "capability tokens",
     /* Revocations are shared by every replica: each polls this table
      * (count + max seq) and reloads its in-memory set when it changes.
      * issued_tokens records tokens memoryd minted by Attenuate with their
      * whole ancestry, so Revoke can tell whether a caller is revoking its
      * own descendant. */
     "CREATE TABLE revoked_tokens ("
     " jti text PRIMARY KEY,"
     " seq bigserial NOT NULL,"
     " revoked_at timestamptz NOT NULL DEFAULT clock_timestamp(),"
     " revoked_by text NOT NULL,"
     " tenant text NOT NULL,"
     " reason text NOT NULL DEFAULT '');"
     "CREATE TABLE issued_tokens ("
     " jti text PRIMARY KEY,"
     " parent_jti text NOT NULL,"
     " ancestors text[] NOT NULL,"
     " tenant text NOT NULL,"
     " principal text NOT NULL,"
     " issued_at timestamptz NOT NULL DEFAULT clock_timestamp(),"
     " expires_at timestamptz NOT NULL);"
     "CREATE INDEX issued_tokens_ancestors ON issued_tokens USING gin (ancestors);"},
    {3, "audit trail",
     /* One row per finished call. Rows are listed newest first inside a
      * tenant, optionally by principal; target ids are searched through a
      * GIN index. A statement-level trigger announces each inserted batch
      * (its id range) on channel memoryd_audit, delivered at commit, so
      * Audit.Watch on every replica sees every row exactly once. */
     "CREATE TABLE audit_log ("
     " id bigserial PRIMARY KEY,"
     " time timestamptz NOT NULL,"
     " tenant text NOT NULL DEFAULT '',"
     " principal text NOT NULL DEFAULT '',"
     " token_id text NOT NULL DEFAULT '',"
     " method text NOT NULL,"
     " target_ids text[] NOT NULL DEFAULT '{}',"
     " status_code integer NOT NULL,"
     " duration_us bigint NOT NULL,"
     " request_id text NOT NULL DEFAULT '');"
     "CREATE INDEX audit_log_tenant_time ON audit_log (tenant, time DESC, id DESC);"
     "CREATE INDEX audit_log_principal_time ON audit_log (tenant, principal, time DESC, id DESC);"
     "CREATE INDEX audit_log_targets ON audit_log USING gin (target_ids);"
     "CREATE FUNCTION audit_log_announce() RETURNS trigger LANGUAGE plpgsql AS $$"
     " DECLARE lo bigint; hi bigint;"
     " BEGIN"
     "  SELECT min(id), max(id) INTO lo, hi FROM inserted;"
     "  IF lo IS NOT NULL THEN PERFORM pg_notify('memoryd_audit', lo || ' ' || hi); END IF;"
     "  RETURN NULL;"
     " END $$;"
     "CREATE TRIGGER audit_log_announce AFTER INSERT ON audit_log"
     " REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION audit_log_announce();"},
    {4, "entries",
     /* Namespaced key-value entries. value holds the bytes as written, or
      * their zstd frame when compressed; search_text is the key and (when
      * the value is UTF-8) value, lower-cased with ICU's root locale, that
      * Search matches with a trigram index. Every read carries the diode
      * predicates on tenant, owner and label, which the primary key and the
      * owner index serve. namespace and key collate "C": List pages in byte
      * order with keyset cursors, whatever the database's locale. */
     "CREATE EXTENSION IF NOT EXISTS pg_trgm;"
     "CREATE TABLE entries ("
     " tenant text NOT NULL,"
     " namespace text COLLATE \"C\" NOT NULL,"
     " key text COLLATE \"C\" NOT NULL,"
     " owner text NOT NULL,"
     " label smallint NOT NULL CHECK (label BETWEEN 1 AND 4),"
     " value bytea NOT NULL,"
     " compressed boolean NOT NULL,"
     " size_bytes bigint NOT NULL,"
     " content_type text NOT NULL,"
     " metadata jsonb NOT NULL DEFAULT '{}',"
     " tags text[] NOT NULL DEFAULT '{}',"
     " pii_kinds text[] NOT NULL DEFAULT '{}',"
     " search_text text NOT NULL,"
     " version bigint NOT NULL CHECK (version >= 1),"
     " created_at timestamptz NOT NULL,"
     " updated_at timestamptz NOT NULL,"
     " expires_at timestamptz,"
     " PRIMARY KEY (tenant, namespace, key));"
     "CREATE INDEX entries_owner ON entries (tenant, owner, namespace, key);"
     "CREATE INDEX entries_updated ON entries (tenant, updated_at DESC);"
     "CREATE INDEX entries_tags ON entries USING gin (tags);"
     "CREATE INDEX entries_search ON entries USING gin (search_text gin_trgm_ops);"
     "CREATE INDEX entries_expires ON entries (expires_at) WHERE expires_at IS NOT NULL;"},
};

const size_t memoryd_migrations_count = sizeof memoryd_migrations / sizeof memoryd_migrations[0];
