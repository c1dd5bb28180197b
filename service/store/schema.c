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
     " REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION "
     "audit_log_announce();"},
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
    {5, "global memory",
     /* The knowledge graph and task history (GlobalMemory). Ids, types and
      * names collate "C": pages are keyset cursors in byte order whatever
      * the database's locale. Relationships reference both ends with ON
      * DELETE CASCADE, so deleting an entity can never leave a dangling
      * edge, and a concurrent delete cannot slip between PutRelationship's
      * existence check and its insert. `search` is the full-text vector of
      * the name (weight A) and every string property value (weight B),
      * with the 'simple' configuration (no stemming, no stop words: agents
      * write in every language). Every read carries the diode predicates
      * on tenant, owner and label; the (tenant, ...) btrees serve the
      * orderings QueryEntities offers. */
     "CREATE TABLE entities ("
     " tenant text NOT NULL,"
     " id text COLLATE \"C\" NOT NULL,"
     " owner text NOT NULL,"
     " label smallint NOT NULL CHECK (label BETWEEN 1 AND 4),"
     " entity_type text COLLATE \"C\" NOT NULL,"
     " name text COLLATE \"C\" NOT NULL DEFAULT '',"
     " properties jsonb NOT NULL DEFAULT '{}',"
     " pii_kinds text[] NOT NULL DEFAULT '{}',"
     " search tsvector GENERATED ALWAYS AS ("
     "  setweight(to_tsvector('simple', name), 'A') ||"
     "  setweight(jsonb_to_tsvector('simple', properties, '[\"string\"]'), 'B')) STORED,"
     " version bigint NOT NULL CHECK (version >= 1),"
     " created_at timestamptz NOT NULL,"
     " updated_at timestamptz NOT NULL,"
     " PRIMARY KEY (tenant, id));"
     "CREATE INDEX entities_type ON entities (tenant, entity_type, id);"
     "CREATE INDEX entities_owner ON entities (tenant, owner, id);"
     "CREATE INDEX entities_name ON entities (tenant, name, id);"
     "CREATE INDEX entities_created ON entities (tenant, created_at, id);"
     "CREATE INDEX entities_updated ON entities (tenant, updated_at, id);"
     "CREATE INDEX entities_properties ON entities USING gin (properties jsonb_path_ops);"
     "CREATE INDEX entities_search ON entities USING gin (search);"
     "CREATE TABLE relationships ("
     " tenant text NOT NULL,"
     " source_id text COLLATE \"C\" NOT NULL,"
     " rel_type text COLLATE \"C\" NOT NULL,"
     " target_id text COLLATE \"C\" NOT NULL,"
     " owner text NOT NULL,"
     " label smallint NOT NULL CHECK (label BETWEEN 1 AND 4),"
     " properties jsonb NOT NULL DEFAULT '{}',"
     " pii_kinds text[] NOT NULL DEFAULT '{}',"
     " version bigint NOT NULL CHECK (version >= 1),"
     " created_at timestamptz NOT NULL,"
     " updated_at timestamptz NOT NULL,"
     " PRIMARY KEY (tenant, source_id, rel_type, target_id),"
     " FOREIGN KEY (tenant, source_id) REFERENCES entities (tenant, id) ON DELETE CASCADE,"
     " FOREIGN KEY (tenant, target_id) REFERENCES entities (tenant, id) ON DELETE CASCADE);"
     "CREATE INDEX relationships_in ON relationships (tenant, target_id, rel_type, source_id);"
     "CREATE TABLE tasks ("
     " tenant text NOT NULL,"
     " id text COLLATE \"C\" NOT NULL,"
     " owner text NOT NULL,"
     " label smallint NOT NULL CHECK (label BETWEEN 1 AND 4),"
     " task_type text COLLATE \"C\" NOT NULL DEFAULT '',"
     " description text NOT NULL DEFAULT '',"
     " status smallint NOT NULL CHECK (status BETWEEN 1 AND 5),"
     " provenance jsonb,"
     " result jsonb,"
     " entity_ids text[] NOT NULL DEFAULT '{}',"
     " pii_kinds text[] NOT NULL DEFAULT '{}',"
     " start_time timestamptz NOT NULL,"
     " end_time timestamptz,"
     " version bigint NOT NULL CHECK (version >= 1),"
     " created_at timestamptz NOT NULL,"
     " updated_at timestamptz NOT NULL,"
     " PRIMARY KEY (tenant, id));"
     "CREATE INDEX tasks_start ON tasks (tenant, start_time DESC, id);"
     "CREATE INDEX tasks_status ON tasks (tenant, status, start_time DESC, id);"},
    {6, "episodic memory",
     /* The episodic tier's catalog (both backends) and the embedded
      * backend's points. cid, not (tenant, name), keys the points: a
      * collection deleted and created again under the same name is a new
      * collection, and a replica's in-memory index of the old one must not
      * be mistaken for it. `seq` is the collection's change counter: every
      * write takes the collection row's lock, bumps seq and stamps the
      * points it touches with it, so a replica catches up by reading the
      * points with seq above the one it has applied. A deleted point stays
      * as a tombstone (vector NULL) for the same reason. Vectors are
      * little-endian float32 arrays. */
     "CREATE TABLE episodic_collections ("
     " cid bigserial PRIMARY KEY,"
     " tenant text NOT NULL,"
     " name text COLLATE \"C\" NOT NULL,"
     " dims integer NOT NULL CHECK (dims BETWEEN 1 AND 65536),"
     " distance smallint NOT NULL CHECK (distance BETWEEN 1 AND 3),"
     " owner text NOT NULL,"
     " seq bigint NOT NULL DEFAULT 0,"
     " created_at timestamptz NOT NULL,"
     " UNIQUE (tenant, name));"
     "CREATE TABLE episodic_points ("
     " cid bigint NOT NULL REFERENCES episodic_collections (cid) ON DELETE CASCADE,"
     " pid text COLLATE \"C\" NOT NULL,"
     " seq bigint NOT NULL,"
     " owner text NOT NULL,"
     " label smallint NOT NULL CHECK (label BETWEEN 1 AND 4),"
     " vector bytea,"
     " payload jsonb,"
     " pii_kinds text[] NOT NULL DEFAULT '{}',"
     " version bigint NOT NULL CHECK (version >= 1),"
     " created_at timestamptz NOT NULL,"
     " updated_at timestamptz NOT NULL,"
     " PRIMARY KEY (cid, pid));"
     "CREATE INDEX episodic_points_seq ON episodic_points (cid, seq);"},
    {7, "revocations per tenant",
     /* A revocation belongs to the tenant it was made in: an admin of one
      * tenant cannot revoke another tenant's token by its jti, and two
      * tenants' tokens may share a jti. */
     "ALTER TABLE revoked_tokens DROP CONSTRAINT revoked_tokens_pkey;"
     "ALTER TABLE revoked_tokens ADD PRIMARY KEY (tenant, jti);"},
    {8, "server secrets",
     /* Keys every replica of a deployment shares (store/server_secret):
      * page tokens are sealed with one, so any replica opens them and no
      * caller can forge one. */
     "CREATE TABLE server_secrets ("
     " name text PRIMARY KEY,"
     " value bytea NOT NULL,"
     " created_at timestamptz NOT NULL DEFAULT now());"},
    {9, "revocations expire",
     /* A revocation matters until the revoked token expires (its
      * descendants expire no later): it is pruned then, as are issued
      * tokens. NULL: the expiry is unknown (a token memoryd did not mint,
      * revoked by an admin by its id), and the revocation is kept. */
     "ALTER TABLE revoked_tokens ADD COLUMN expires_at timestamptz;"
     "CREATE INDEX revoked_tokens_expires_at ON revoked_tokens (expires_at);"
     "CREATE INDEX issued_tokens_expires_at ON issued_tokens (expires_at);"},
    {10, "privacy",
     /* Privacy.Forget's stored receipts (the signed JWS and its payload;
      * identifiers and counts, never erased content), newest first per
      * tenant for ListReceipts; subject_principal is the erased principal
      * (NULL for an erasure by subject id), so a principal lists the
      * receipts about itself. And the indexes that find a data subject's
      * records by the top-level "subject_id" of their JSON content
      * (entities' properties have a GIN index already). */
     "CREATE TABLE privacy_receipts ("
     " tenant text NOT NULL,"
     " receipt_id text COLLATE \"C\" NOT NULL,"
     " requested_by text NOT NULL,"
     " subject_principal text,"
     " complete_time timestamptz NOT NULL,"
     " receipt jsonb NOT NULL,"
     " signed text NOT NULL,"
     " PRIMARY KEY (tenant, receipt_id));"
     "CREATE INDEX privacy_receipts_time ON privacy_receipts"
     " (tenant, complete_time DESC, receipt_id DESC);"
     "CREATE INDEX entries_subject ON entries (tenant, (metadata->>'subject_id'));"
     "CREATE INDEX relationships_subject ON relationships (tenant, (properties->>'subject_id'));"
     "CREATE INDEX tasks_subject ON tasks (tenant, (provenance->>'subject_id'));"},
    {11, "audit trace and client certificate",
     /* Each call's W3C trace id (the client's traceparent, or one memoryd
      * started) and, under mutual TLS, the client certificate's identity
      * beside the token's principal. Older rows have neither: ''. */
     "ALTER TABLE audit_log ADD COLUMN trace_id text NOT NULL DEFAULT '',"
     " ADD COLUMN client_identity text NOT NULL DEFAULT '';"},
    {12, "working memory",
     /* WorkingMemory's documents: one row per (node, thread, path), thread
      * '' being the node's global memory, so a memory is one index range
      * read in path order (COLLATE "C": byte order, which keeps every
      * directory's documents together for the tree). chars is the
      * content's length in code points, kept so Render can budget a
      * memory without reading its content. */
     "CREATE TABLE working_memory ("
     " tenant text NOT NULL,"
     " node text COLLATE \"C\" NOT NULL,"
     " thread text COLLATE \"C\" NOT NULL,"
     " path text COLLATE \"C\" NOT NULL,"
     " owner text NOT NULL,"
     " label smallint NOT NULL CHECK (label BETWEEN 1 AND 4),"
     " content text NOT NULL,"
     " chars integer NOT NULL CHECK (chars >= 0),"
     " pii_kinds text[] NOT NULL DEFAULT '{}',"
     " version bigint NOT NULL CHECK (version >= 1),"
     " created_at timestamptz NOT NULL,"
     " updated_at timestamptz NOT NULL,"
     " PRIMARY KEY (tenant, node, thread, path));"
     "CREATE INDEX working_memory_owner ON working_memory (tenant, owner);"},
    {13, "durable sessions",
     /* The PostgreSQL copy of sessions started durable (Redis holds every
      * session; session.proto). purge_at follows the session's life as
      * PostgreSQL last heard of it (the sweeper asks Redis before it
      * closes one); closed_at is set when the sweeper closed it, its
      * records holding PII redacted or dropped. */
     "CREATE TABLE sessions ("
     " tenant text NOT NULL,"
     " id text COLLATE \"C\" NOT NULL,"
     " owner text NOT NULL,"
     " duration_ms bigint NOT NULL,"
     " grace_ms bigint NOT NULL,"
     " created_at timestamptz NOT NULL,"
     " purge_at timestamptz NOT NULL,"
     " ended_at timestamptz,"
     " closed_at timestamptz,"
     " PRIMARY KEY (tenant, id));"
     "CREATE INDEX sessions_due ON sessions (purge_at) WHERE closed_at IS NULL;"
     "CREATE INDEX sessions_owner ON sessions (tenant, owner);"
     "CREATE TABLE session_records ("
     " tenant text NOT NULL,"
     " session_id text COLLATE \"C\" NOT NULL,"
     " key text COLLATE \"C\" NOT NULL,"
     " owner text NOT NULL,"
     " label smallint NOT NULL CHECK (label BETWEEN 1 AND 4),"
     " value bytea NOT NULL,"
     " pii_kinds text[] NOT NULL DEFAULT '{}',"
     " version bigint NOT NULL CHECK (version >= 1),"
     " created_at timestamptz NOT NULL,"
     " updated_at timestamptz NOT NULL,"
     " PRIMARY KEY (tenant, session_id, key),"
     " FOREIGN KEY (tenant, session_id) REFERENCES sessions (tenant, id) ON DELETE CASCADE);"
     "CREATE INDEX session_records_owner ON session_records (tenant, owner);"},
    {14, "episodic embedder model",
     /* The embedder model whose vectors fill a collection (set at create,
      * or by its first text upsert; NULL: none yet): text is embedded
      * only with it (episodic_memory.proto). */
     "ALTER TABLE episodic_collections ADD COLUMN embedder_model text;"},
    {15, "subject of opaque values",
     /* The data subject a session value or a working document names, by
      * the rule every tier's eraser and exporter applies (privacy.proto):
      * the value itself when it is a JSON object (UTF-8) whose top-level
      * "subject_id" is a string; NULL otherwise, never an error. Erasers
      * call it only on rows whose bytes could spell the key (a cheap
      * position() test first), since each call may start a subtransaction
      * (its EXCEPTION block): for the same reason it is PARALLEL UNSAFE (a
      * subtransaction inside a parallel query fails before PostgreSQL 17),
      * and STABLE as convert_from is. */
     "CREATE FUNCTION memoryd_subject_of(v bytea) RETURNS text"
     " LANGUAGE plpgsql STABLE STRICT PARALLEL UNSAFE AS $f$"
     " DECLARE j jsonb;"
     " BEGIN"
     "  j := convert_from(v, 'UTF8')::jsonb;"
     "  IF jsonb_typeof(j) = 'object' AND jsonb_typeof(j->'subject_id') = 'string' THEN"
     "   RETURN j->>'subject_id';"
     "  END IF;"
     "  RETURN NULL;"
     " EXCEPTION WHEN others THEN RETURN NULL;"
     " END $f$;"},
    {16, "audit trail in daily partitions",
     /* The trail is partitioned by day (UTC) so retention drops whole
      * partitions (audit/audit_keeper.h), which costs the calls nothing.
      * A partition is named after the UTC midnight its range ends at
      * (audit_log_upto_YYYYMMDD). The rows written before this migration
      * become the first partition, from the beginning to the midnight
      * after the newest of them (dropped whole once that has aged out);
      * an empty old table is dropped. A default partition takes a row for
      * which no day's partition exists (memoryd down for longer than the
      * days made ahead), so a write never fails for want of one.
      * memoryd_audit_partitions makes the partitions of `days` days from
      * from_day; a day inside the first partition's range, or with rows
      * in the default partition, or made meanwhile by another replica, is
      * skipped. */
     "ALTER TABLE audit_log RENAME TO audit_log_before;"
     "ALTER INDEX audit_log_pkey RENAME TO audit_log_before_pkey;"
     "ALTER INDEX audit_log_tenant_time RENAME TO audit_log_before_tenant_time;"
     "ALTER INDEX audit_log_principal_time RENAME TO audit_log_before_principal_time;"
     "ALTER INDEX audit_log_targets RENAME TO audit_log_before_targets;"
     "DROP TRIGGER audit_log_announce ON audit_log_before;"
     "CREATE TABLE audit_log (LIKE audit_log_before INCLUDING DEFAULTS) PARTITION BY RANGE (time);"
     "ALTER SEQUENCE audit_log_id_seq OWNED BY audit_log.id;"
     "ALTER TABLE audit_log ADD PRIMARY KEY (id, time);"
     "CREATE INDEX audit_log_tenant_time ON audit_log (tenant, time DESC, id DESC);"
     "CREATE INDEX audit_log_principal_time ON audit_log (tenant, principal, time DESC, id DESC);"
     "CREATE INDEX audit_log_targets ON audit_log USING gin (target_ids);"
     "CREATE TABLE audit_log_default PARTITION OF audit_log DEFAULT;"
     "CREATE TRIGGER audit_log_announce AFTER INSERT ON audit_log"
     " REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT EXECUTE FUNCTION "
     "audit_log_announce();"
     "DO $m$ DECLARE hi timestamptz; name text; BEGIN"
     " SELECT max(time) INTO hi FROM audit_log_before;"
     " IF hi IS NULL THEN DROP TABLE audit_log_before; RETURN; END IF;"
     " hi := (date_trunc('day', hi AT TIME ZONE 'UTC') + interval '1 day') AT TIME ZONE 'UTC';"
     " name := 'audit_log_upto_' || to_char(hi AT TIME ZONE 'UTC', 'YYYYMMDD');"
     " ALTER TABLE audit_log_before DROP CONSTRAINT audit_log_before_pkey;"
     " ALTER TABLE audit_log_before ADD PRIMARY KEY (id, time);"
     " EXECUTE format('ALTER TABLE audit_log_before ADD CHECK (time < %L)', hi);"
     " EXECUTE format('ALTER TABLE audit_log_before RENAME TO %I', name);"
     " EXECUTE format('ALTER TABLE audit_log ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO "
     "(%L)',"
     "  name, hi);"
     "END $m$;"
     "CREATE FUNCTION memoryd_audit_partitions(from_day date, days int) RETURNS int"
     " LANGUAGE plpgsql AS $f$"
     " DECLARE d date; made int := 0; name text; lo text; hi text;"
     " BEGIN"
     /* ATTACH takes a lock that writes pass (SHARE UPDATE EXCLUSIVE), where
      * CREATE ... PARTITION OF would take one they wait behind; and no lock
      * is waited for long: a day skipped now is made by the next call. */
     "  PERFORM set_config('lock_timeout', '200ms', true);"
     "  FOR i IN 0 .. days - 1 LOOP"
     "   d := from_day + i;"
     "   name := 'audit_log_upto_' || to_char(d + 1, 'YYYYMMDD');"
     "   CONTINUE WHEN to_regclass(name) IS NOT NULL;"
     "   lo := d::text || ' 00:00:00+00';"
     "   hi := (d + 1)::text || ' 00:00:00+00';"
     "   BEGIN"
     "    EXECUTE format('CREATE TABLE %I (LIKE audit_log INCLUDING DEFAULTS)', name);"
     "    EXECUTE format('ALTER TABLE audit_log ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',"
     "     name, lo, hi);"
     "    made := made + 1;"
     "   EXCEPTION WHEN invalid_object_definition OR check_violation OR duplicate_table"
     "    OR lock_not_available THEN"
     "    NULL;"
     "   END;"
     "  END LOOP;"
     "  RETURN made;"
     " END $f$;"
     "SELECT memoryd_audit_partitions((now() AT TIME ZONE 'UTC')::date, 8);"},
    {17, "episodic text",
     /* A point may carry a text (ranked lexically in memory, beside the
      * vectors) and may have no vector: a text-only point, kept without
      * an embedder. A tombstone is now a row with neither. A collection
      * of dims 0 holds no vector yet; its first vector sets dims. */
     "ALTER TABLE episodic_points ADD COLUMN text text;"
     "ALTER TABLE episodic_collections DROP CONSTRAINT episodic_collections_dims_check;"
     "ALTER TABLE episodic_collections ADD CONSTRAINT episodic_collections_dims_check"
     " CHECK (dims BETWEEN 0 AND 65536);"},
    {18, "ranked text documents",
     /* TEXT_MATCH_RANKED (tier/tier_sql_rank.h): each entry's and entity's
      * text analyzed at write time in the server's --text-language, so a
      * ranked query reads only the rows sharing a word with it (an entry's
      * first 65536 characters: TIER_SQL_RANK_DOC_CHARS). Rows written
      * before are analyzed here in the default language. */
     "ALTER TABLE entries ADD COLUMN search_doc tsvector;"
     "UPDATE entries SET search_doc = to_tsvector('english', left(search_text, 65536));"
     "CREATE INDEX entries_doc ON entries USING gin (search_doc);"
     "ALTER TABLE entities ADD COLUMN rank_doc tsvector;"
     "UPDATE entities SET rank_doc = to_tsvector('english', name) ||"
     " jsonb_to_tsvector('english', properties, '[\"string\"]');"
     "CREATE INDEX entities_rank_doc ON entities USING gin (rank_doc);"},
};

const size_t memoryd_migrations_count = sizeof memoryd_migrations / sizeof memoryd_migrations[0];
