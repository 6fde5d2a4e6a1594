/*
 * schema.c — the PostgreSQL store's schema: the versioned migrations (their
 * SQL and the code applying them), the schema version, the server-side
 * bounds a connection carries (og__pg_session_bounds, I8) and the
 * consumption keys mode a migrated store records (og__pg_read_keys, I9).
 *
 * Each migration runs in its own transaction under a transaction-scoped
 * advisory lock, re-reads the version after taking the lock, and records
 * itself in og_schema_migrations in the same transaction — so concurrent
 * migrators serialize and each migration is applied exactly once. Each
 * migration's comment names the invariants its tables carry: migration 1
 * the admission's (M8, I10, admit.c), 2 the grant lifecycle's (M12-M15,
 * I6, I7, grants.c), 3 execution's (M16-M21, I15, I16, exec.c), 4
 * retention's (M23-M25, M10, I18-I20, retention.c), 5 the consumption keys
 * (M11, I9), 6 redemption's (M26, I21, redeem.c), 7 the operation kinds
 * (M22, I17, exec.c), 8-10 the payout store's (M27-M35, I22-I28, payout.c
 * and payout_run.c), 11 a payout attempt's reconciliation (M36, I29,
 * payout_after.c), 12-14 the payout store's again, 15 the admission's
 * per-row work: domains and a narrower backlog index (docs/performance.md). The SQL functions PG_US, PG_TS and
 * og_consumption_key() the statements use keep microseconds exact (I5) and
 * the key one implementation (I9).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ===========================================================================
 * Schema: versioned migrations
 * ========================================================================= */

static const char pg_migration_1_sql[] =
    "CREATE TABLE grant_consumptions (\n"
    "  issuer       text        NOT NULL CHECK (octet_length(issuer) BETWEEN 1 AND 128),\n"
    "  grant_id     text        NOT NULL CHECK (octet_length(grant_id) BETWEEN 1 AND 128),\n"
    "  operation_id uuid,                    -- NULL only for a revocation holding this key\n"
    "  consumed_at  timestamptz NOT NULL,    -- when the key was claimed\n"
    "  retain_until timestamptz NOT NULL,    -- expires_at + admission leeway\n"
    "  CONSTRAINT grant_consumptions_pkey PRIMARY KEY (issuer, grant_id));\n"
    "CREATE INDEX grant_consumptions_retain_until_idx ON grant_consumptions (retain_until);\n"
    "CREATE TABLE operations (\n"
    "  operation_id  uuid        NOT NULL,\n"
    "  issuer        text        NOT NULL,\n"
    "  grant_id      text        NOT NULL,\n"
    "  caller_id     text        NOT NULL CHECK (octet_length(caller_id) BETWEEN 1 AND 128),\n"
    "  account_id    text        NOT NULL CHECK (octet_length(account_id) BETWEEN 1 AND 128),\n"
    "  amount        numeric     NOT NULL CHECK (amount > 0),\n"
    "  currency      text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),\n"
    "  status        text        NOT NULL CHECK (status IN ('Admitted','Succeeded','Failed','Unknown','NeedsReconciliation')),\n"
    "  owner_version bigint      NOT NULL CHECK (owner_version >= 1),\n"
    "  lease_until   timestamptz NOT NULL,\n"
    "  submit_by     timestamptz NOT NULL,\n"
    "  created_at    timestamptz NOT NULL,\n"
    "  CONSTRAINT operations_pkey PRIMARY KEY (operation_id),\n"
    "  CONSTRAINT operations_grant_key UNIQUE (issuer, grant_id));   -- defense in depth: one operation per grant\n"
    "CREATE INDEX operations_recovery_idx ON operations (lease_until) WHERE status IN ('Admitted','Unknown');\n";

/* Migration 2: claim kinds, families, the issuance log, row-form grants and
 * tickets. The kind column names what holds a claimed key; its second CHECK
 * keeps "an admission is exactly a claim with an operation" true for every
 * row, old and new. A family's row is what admissions, consumes, issuance,
 * ticket creation and the family's revocation contend for (I6). */
static const char pg_migration_2_sql[] =
    "ALTER TABLE grant_consumptions ADD COLUMN kind text NOT NULL DEFAULT 'admission'\n"
    "    CHECK (kind IN ('admission', 'revocation', 'consume'));\n"
    "UPDATE grant_consumptions SET kind = 'revocation' WHERE operation_id IS NULL;\n"
    "ALTER TABLE grant_consumptions ADD CONSTRAINT grant_consumptions_kind_check2\n"
    "    CHECK ((kind = 'admission') = (operation_id IS NOT NULL));\n"
    "CREATE TABLE families (\n"
    "  issuer     text        NOT NULL,\n"
    "  family     text        NOT NULL,\n"
    "  created_at timestamptz NOT NULL,\n"
    "  revoked_at timestamptz,\n"
    "  PRIMARY KEY (issuer, family));\n"
    "CREATE TABLE grant_issuance (\n"
    "  issuer        text        NOT NULL,\n"
    "  grant_id      text        NOT NULL,\n"
    "  family        text,\n"
    "  subject       text        NOT NULL,\n"
    "  action        text        NOT NULL,\n"
    "  params_digest text        NOT NULL CHECK (params_digest ~ '^[0-9a-f]{64}$'),\n"
    "  issued_at     timestamptz NOT NULL,\n"
    "  expires_at    timestamptz,            -- NULL: the issuer records no expiry (fallback retention)\n"
    "  form          text        NOT NULL CHECK (form IN ('token', 'row')),\n"
    "  recorded_at   timestamptz NOT NULL,   -- store clock\n"
    "  PRIMARY KEY (issuer, grant_id),\n"
    "  FOREIGN KEY (issuer, family) REFERENCES families (issuer, family));\n"
    "CREATE INDEX grant_issuance_family_idx ON grant_issuance (issuer, family) WHERE family IS NOT NULL;\n"
    "CREATE TABLE grants (\n"
    "  issuer                text        NOT NULL,\n"
    "  grant_id              text        NOT NULL,\n"
    "  family                text,\n"
    "  expires_at            timestamptz NOT NULL,\n"
    "  revoked_at            timestamptz,\n"
    "  consumed_at           timestamptz,\n"
    "  consumed_by_operation uuid,        -- NULL with consumed_at set: consumed by the verdict\n"
    "  PRIMARY KEY (issuer, grant_id));\n"
    "CREATE INDEX grants_family_idx ON grants (issuer, family) WHERE family IS NOT NULL;\n"
    "CREATE TABLE tickets (\n"
    "  ticket_hash text        PRIMARY KEY CHECK (ticket_hash ~ '^[0-9a-f]{64}$'),\n"
    "  issuer      text        NOT NULL,\n"
    "  family      text        NOT NULL,\n"
    "  created_at  timestamptz NOT NULL,\n"
    "  rotated_at  timestamptz,\n"
    "  FOREIGN KEY (issuer, family) REFERENCES families (issuer, family));\n";

/* Migration 3: execution (M16-M21, I15, I16). The new operations columns
 * are added without a default, which PostgreSQL records in the catalog
 * only: no table rewrite, and an old row's NULL updated_at reads as its
 * created_at (M20). operation_events is the history every execution write
 * appends to in the same statement; its FK takes a KEY SHARE lock on the
 * operation's row, which the writer's own FOR NO KEY UPDATE lock does not
 * conflict with.
 * operations_recovery_idx (lease_until only) is replaced by one that leads
 * with status, serving "status IN (...) AND lease_until < now"; the backlog
 * index orders by (created_at, operation_id) within a status, the order
 * og_op_list() returns. */
static const char pg_migration_3_sql[] =
    "ALTER TABLE operations\n"
    "  ADD COLUMN updated_at         timestamptz,   -- NULL: no status change since admission\n"
    "  ADD COLUMN provider_reference text CHECK (octet_length(provider_reference) BETWEEN 1 AND 128),\n"
    "  ADD COLUMN outcome_reason     text CHECK (octet_length(outcome_reason) BETWEEN 1 AND 64);\n"
    "CREATE TABLE operation_events (\n"
    "  seq                bigint      GENERATED ALWAYS AS IDENTITY,\n"
    "  operation_id       uuid        NOT NULL REFERENCES operations (operation_id),\n"
    "  at                 timestamptz NOT NULL,   -- store clock\n"
    "  kind               text        NOT NULL CHECK (kind IN ('outcome','takeover','resolved')),\n"
    "  from_status        text        NOT NULL CHECK (from_status IN ('Admitted','Succeeded','Failed','Unknown','NeedsReconciliation')),\n"
    "  to_status          text        NOT NULL CHECK (to_status IN ('Admitted','Succeeded','Failed','Unknown','NeedsReconciliation')),\n"
    "  owner_version      bigint      NOT NULL CHECK (owner_version >= 1),   -- after the event\n"
    "  reason             text        CHECK (octet_length(reason) BETWEEN 1 AND 64),\n"
    "  provider_reference text        CHECK (octet_length(provider_reference) BETWEEN 1 AND 128),\n"
    "  actor              text        NOT NULL CHECK (octet_length(actor) BETWEEN 1 AND 128),\n"
    "  evidence           text        CHECK (octet_length(evidence) BETWEEN 1 AND 1024),\n"
    "  CONSTRAINT operation_events_pkey PRIMARY KEY (seq));\n"
    "CREATE INDEX operation_events_operation_idx ON operation_events (operation_id, seq);\n"
    "DROP INDEX operations_recovery_idx;\n"
    "CREATE INDEX operations_recovery_idx ON operations (status, lease_until)\n"
    "    WHERE status IN ('Admitted','Unknown');\n"
    "CREATE INDEX operations_backlog_idx ON operations (status, created_at, operation_id);\n";

/* Migration 4: retention. The archive tables take finished operations and
 * their history on their own, longer schedule (I20); same columns plus
 * archived_at, without the checks a live row needs (they held when the row
 * was written). operations_terminal_idx serves the archive job's scan of
 * terminal operations by last status change. IF NOT EXISTS: on a large
 * operations table an operator may build it beforehand with CREATE INDEX
 * CONCURRENTLY (same definition), since building it here blocks writes to
 * operations until it is built. */
static const char pg_migration_4_sql[] =
    "CREATE TABLE operations_archive (\n"
    "  operation_id       uuid        NOT NULL,\n"
    "  issuer             text        NOT NULL,\n"
    "  grant_id           text        NOT NULL,\n"
    "  caller_id          text        NOT NULL,\n"
    "  account_id         text        NOT NULL,\n"
    "  amount             numeric     NOT NULL,\n"
    "  currency           text        NOT NULL,\n"
    "  status             text        NOT NULL CHECK (status IN ('Succeeded','Failed')),\n"
    "  owner_version      bigint      NOT NULL,\n"
    "  lease_until        timestamptz NOT NULL,\n"
    "  submit_by          timestamptz NOT NULL,\n"
    "  created_at         timestamptz NOT NULL,\n"
    "  updated_at         timestamptz,\n"
    "  provider_reference text,\n"
    "  outcome_reason     text,\n"
    "  archived_at        timestamptz NOT NULL,   -- store clock\n"
    "  CONSTRAINT operations_archive_pkey PRIMARY KEY (operation_id));\n"
    "CREATE TABLE operation_events_archive (\n"
    "  seq                bigint      NOT NULL,\n"
    "  operation_id       uuid        NOT NULL,\n"
    "  at                 timestamptz NOT NULL,\n"
    "  kind               text        NOT NULL,\n"
    "  from_status        text        NOT NULL,\n"
    "  to_status          text        NOT NULL,\n"
    "  owner_version      bigint      NOT NULL,\n"
    "  reason             text,\n"
    "  provider_reference text,\n"
    "  actor              text        NOT NULL,\n"
    "  evidence           text,\n"
    "  archived_at        timestamptz NOT NULL,\n"
    "  CONSTRAINT operation_events_archive_pkey PRIMARY KEY (seq));\n"
    "CREATE INDEX operation_events_archive_operation_idx\n"
    "    ON operation_events_archive (operation_id, seq);\n"
    "CREATE INDEX IF NOT EXISTS operations_terminal_idx\n"
    "    ON operations ((coalesce(updated_at, created_at)))\n"
    "    WHERE status IN ('Succeeded','Failed');\n";

/* Migration 5: the store's settings and its consumption keys (I9). It runs
 * after migration 4 and touches none of its tables (the operation archives
 * keep their identifiers, as operations do). og_store_settings holds
 * exactly one row. og_consumption_key() is the encoding of
 * lib/core/consumption_key.c over the builtin sha256(): lengths are
 * int4send (4 bytes, big-endian) of the UTF-8 byte count. STABLE, as
 * convert_to() is, so the planner inlines its body into each statement. A
 * readable store gets the function too (operators may look a key up).
 *
 * A hashed store then gets a new grant_consumptions keyed by key_hash
 * alone; the old table's claims are copied under their keys in the same
 * transaction and the old table dropped — a new table rather than
 * ALTER ... DROP COLUMN, which would leave the identifiers in the old
 * tuples on disk. The new table gets the old one's constraints and its
 * retain_until index back under their names: cleanup picks its rows over
 * grant_consumptions_retain_until_idx (I19) and by ctid, whatever the key.
 * Privileges granted on the old table (an admission role's) are not carried
 * over: grant them again after migrating. */
#define PG_MIGRATION_5_SQL(keys, convert)                                      \
    "CREATE TABLE og_store_settings (\n"                                       \
    "  singleton        boolean PRIMARY KEY DEFAULT true CHECK (singleton),\n" \
    "  consumption_keys text    NOT NULL CHECK (consumption_keys IN ('readable', 'hashed')));\n" \
    "INSERT INTO og_store_settings (consumption_keys) VALUES ('" keys "');\n"  \
    "CREATE FUNCTION og_consumption_key(issuer text, grant_id text) RETURNS bytea\n" \
    "  LANGUAGE sql STABLE STRICT PARALLEL SAFE\n"                             \
    "  RETURN sha256(int4send(octet_length(convert_to(issuer, 'UTF8'))) || convert_to(issuer, 'UTF8')\n" \
    "             || int4send(octet_length(convert_to(grant_id, 'UTF8'))) || convert_to(grant_id, 'UTF8'));\n" \
    convert
#define PG_HASHED_CONSUMPTIONS_SQL                                              \
    "ALTER TABLE grant_consumptions RENAME TO grant_consumptions_readable;\n"  \
    "ALTER INDEX grant_consumptions_pkey RENAME TO grant_consumptions_readable_pkey;\n" \
    "ALTER INDEX grant_consumptions_retain_until_idx\n"                        \
    "  RENAME TO grant_consumptions_readable_retain_until_idx;\n"              \
    "CREATE TABLE grant_consumptions (\n"                                      \
    "  key_hash     bytea       NOT NULL CHECK (octet_length(key_hash) = 32), -- og_consumption_key(issuer, grant_id)\n" \
    "  operation_id uuid,                    -- NULL unless kind = 'admission'\n" \
    "  consumed_at  timestamptz NOT NULL,    -- when the key was claimed\n"    \
    "  retain_until timestamptz NOT NULL,    -- expires_at + admission leeway\n" \
    "  kind         text        NOT NULL\n"                                    \
    "               CONSTRAINT grant_consumptions_kind_check CHECK (kind IN ('admission', 'revocation', 'consume')),\n" \
    "  CONSTRAINT grant_consumptions_pkey PRIMARY KEY (key_hash),\n"           \
    "  CONSTRAINT grant_consumptions_kind_check2 CHECK ((kind = 'admission') = (operation_id IS NOT NULL)));\n" \
    "CREATE INDEX grant_consumptions_retain_until_idx ON grant_consumptions (retain_until);\n" \
    "INSERT INTO grant_consumptions (key_hash, operation_id, consumed_at, retain_until, kind)\n" \
    "  SELECT og_consumption_key(issuer, grant_id), operation_id, consumed_at, retain_until, kind\n" \
    "  FROM grant_consumptions_readable;\n"                                    \
    "DROP TABLE grant_consumptions_readable;\n"
static const char pg_migration_5_sql[] = PG_MIGRATION_5_SQL("readable", "");
static const char pg_migration_5_hashed_sql[] =
    PG_MIGRATION_5_SQL("hashed", PG_HASHED_CONSUMPTIONS_SQL);

/* Migration 6: redemption recovery points (I21). It touches no table of
 * migrations 4 and 5, so readable and hashed stores get the same table:
 * redemptions are keyed by (caller, idempotency key), never by a grant's
 * consumption key. One sealed result per (caller, idempotency key); the
 * token itself is kept only as its SHA-256. */
static const char pg_migration_6_sql[] =
    "CREATE TABLE redemptions (\n"
    "  caller          text        NOT NULL CHECK (octet_length(caller) BETWEEN 1 AND 128),\n"
    "  idempotency_key text        NOT NULL CHECK (octet_length(idempotency_key) BETWEEN 1 AND 128),\n"
    "  code_hash       text        NOT NULL CHECK (code_hash ~ '^[0-9a-f]{64}$'),   -- SHA-256 of the token\n"
    "  nonce           bytea       NOT NULL CHECK (octet_length(nonce) = 24),\n"
    "  sealed          bytea       NOT NULL CHECK (octet_length(sealed) BETWEEN 17 AND 65552),\n"
    "  created_at      timestamptz NOT NULL,\n"
    "  CONSTRAINT redemptions_pkey PRIMARY KEY (caller, idempotency_key));   -- the first writer wins\n"
    "CREATE INDEX redemptions_code_idx ON redemptions (code_hash);\n";

/* Migration 7: operation kinds, their idempotency keys and client
 * references, and the statuses of a payout attempt (M16, M17, M25, M22).
 * It must not rewrite operations, the one table every admission writes:
 *  - the new columns are catalog changes only: kind NOT NULL with the
 *    constant DEFAULT 'credit' (a "missing value" every old row reads,
 *    PostgreSQL 11+), idempotency_key and client_reference nullable, NULL
 *    read as the operation id (PG_OP_COLUMNS);
 *  - every CHECK that lists statuses (operations, the events' from/to, the
 *    archive), the events' kind CHECK, and the new columns' CHECKs are
 *    added NOT VALID: a catalog change enforced on every row written from
 *    now on, no scan. The widened ones replace narrower ones every old row
 *    satisfied, and the new columns' hold for the defaults, so validating
 *    is a formality: pg_migration_7_validate does it after this
 *    transaction commits, in one of its own, under SHARE UPDATE EXCLUSIVE
 *    locks that block neither admissions nor execution writes;
 *  - operations_payout_status_check and operations_not_started_check put
 *    P1/P2 in the schema as well as in the statements (I17): Started and
 *    NotStarted belong to payouts, NotStarted to an owner version above the
 *    initial one;
 *  - the two partial indexes whose predicates list statuses are rebuilt
 *    under their names: recovery's scan covers Started (a payout whose
 *    lease lapsed after it started is swept too), the archive's terminal
 *    set gains NotStarted and NotApplied. Building them is the part that
 *    takes time on a large table: the ALTER TABLE's lock (held to the end
 *    of the transaction) blocks access to operations until both are built.
 * Stores of either consumption keys get the same statements: nothing here
 * touches grant_consumptions. */
#define PG_V7_STATUSES                                                         \
    "('Admitted','Succeeded','Failed','Unknown','NeedsReconciliation',"       \
    "'Started','NotStarted','NotApplied')"
static const char pg_migration_7_sql[] =
    "ALTER TABLE operations\n"
    "  ADD COLUMN kind             text NOT NULL DEFAULT 'credit',   -- catalog only: no rewrite\n"
    "  ADD COLUMN idempotency_key  text,   -- NULL: the operation id\n"
    "  ADD COLUMN client_reference text,   -- NULL: the operation id\n"
    "  ADD CONSTRAINT operations_kind_check CHECK (kind IN ('credit','payout')) NOT VALID,\n"
    "  ADD CONSTRAINT operations_idempotency_key_check\n"
    "      CHECK (octet_length(idempotency_key) BETWEEN 1 AND 128) NOT VALID,\n"
    "  ADD CONSTRAINT operations_client_reference_check\n"
    "      CHECK (octet_length(client_reference) BETWEEN 1 AND 128) NOT VALID,\n"
    "  DROP CONSTRAINT operations_status_check,\n"
    "  ADD CONSTRAINT operations_status_check CHECK (status IN " PG_V7_STATUSES ") NOT VALID,\n"
    "  ADD CONSTRAINT operations_payout_status_check\n"
    "      CHECK (kind = 'payout' OR status NOT IN ('Started','NotStarted')) NOT VALID,\n"
    "  ADD CONSTRAINT operations_not_started_check\n"
    "      CHECK (status <> 'NotStarted' OR owner_version > " PG_STR(OG__INITIAL_OWNER_VERSION) ") NOT VALID;\n"
    "ALTER TABLE operation_events\n"
    "  DROP CONSTRAINT operation_events_kind_check,\n"
    "  ADD CONSTRAINT operation_events_kind_check\n"
    "      CHECK (kind IN ('outcome','takeover','resolved','started')) NOT VALID,\n"
    "  DROP CONSTRAINT operation_events_from_status_check,\n"
    "  ADD CONSTRAINT operation_events_from_status_check CHECK (from_status IN " PG_V7_STATUSES ") NOT VALID,\n"
    "  DROP CONSTRAINT operation_events_to_status_check,\n"
    "  ADD CONSTRAINT operation_events_to_status_check CHECK (to_status IN " PG_V7_STATUSES ") NOT VALID;\n"
    "ALTER TABLE operations_archive\n"
    "  ADD COLUMN kind             text NOT NULL DEFAULT 'credit',\n"
    "  ADD COLUMN idempotency_key  text,\n"
    "  ADD COLUMN client_reference text,\n"
    "  DROP CONSTRAINT operations_archive_status_check,\n"
    "  ADD CONSTRAINT operations_archive_status_check CHECK (status IN " PG_V7_TERMINAL ") NOT VALID;\n"
    "DROP INDEX operations_recovery_idx;\n"
    "CREATE INDEX operations_recovery_idx ON operations (status, lease_until)\n"
    "    WHERE status IN " PG_V7_OWNED ";\n"
    "DROP INDEX operations_terminal_idx;\n"
    "CREATE INDEX operations_terminal_idx\n"
    "    ON operations ((coalesce(updated_at, created_at)))\n"
    "    WHERE status IN " PG_V7_TERMINAL ";\n";

/* After migration 7 committed, in a transaction of its own: validates each
 * of its constraints still NOT VALID (ALTER TABLE ... VALIDATE CONSTRAINT:
 * one scan per table under SHARE UPDATE EXCLUSIVE, which admissions and
 * execution writes do not wait for). Every migrate runs it, so constraints
 * left NOT VALID by a migrator that died after the commit are validated by
 * the next; with nothing left to do it is one catalog read. */
static const char pg_migration_7_validate[] =
    "DO $og$\n"
    "DECLARE c record;\n"
    "BEGIN\n"
    "  FOR c IN SELECT conrelid::regclass AS rel, conname FROM pg_constraint\n"
    "           WHERE contype = 'c' AND NOT convalidated\n"
    "             AND conrelid IN ('operations'::regclass, 'operation_events'::regclass,\n"
    "                              'operations_archive'::regclass)\n"
    "           ORDER BY 1, 2\n"
    "  LOOP\n"
    "    EXECUTE format('ALTER TABLE %s VALIDATE CONSTRAINT %I', c.rel, c.conname);\n"
    "  END LOOP;\n"
    "END\n"
    "$og$";

/* Migration 8: the payout decision side (I22-I26). New tables only: it
 * changes nothing of migrations 1-7 (a payout grant is a row of the
 * existing `grants` table, issuer 'payouts'; its bindings are a table of
 * their own), so readable and hashed stores get the same. Money is bigint
 * minor units of the tenant's one currency. The history tables are
 * append-only, enforced by the store: a trigger refuses UPDATE, DELETE and
 * TRUNCATE (docs/design.md, "Schema": append-only by a trigger, not by
 * convention). destinations.provider_token is a SECRET: no other table
 * holds it and no statement but the executor's read returns it. Three
 * texts, run in order in the migration's transaction: the context... */
static const char pg_migration_8_context_sql[] =
    "CREATE TABLE tenants (\n"
    "  tenant_id                 text        PRIMARY KEY CHECK (octet_length(tenant_id) BETWEEN 1 AND 128),\n"
    "  payouts_suspended         boolean     NOT NULL,\n"
    "  daily_limit               bigint      NOT NULL CHECK (daily_limit BETWEEN 0 AND 999999999999999999),  -- minor units\n"
    "  currency                  text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),   -- fixed at creation\n"
    "  settlement_offset_minutes integer     NOT NULL CHECK (settlement_offset_minutes BETWEEN -840 AND 840),\n"
    "  settings_version          bigint      NOT NULL CHECK (settings_version >= 1),     -- every settings change\n"
    "  updated_at                timestamptz NOT NULL);\n"
    "CREATE TABLE tenant_days (                        -- the reservation counters of a release day (I23)\n"
    "  tenant_id text   NOT NULL REFERENCES tenants (tenant_id),\n"
    "  day       date   NOT NULL,\n"
    "  paid      bigint NOT NULL CHECK (paid >= 0),\n"
    "  reserved  bigint NOT NULL CHECK (reserved >= 0),\n"
    "  version   bigint NOT NULL CHECK (version >= 1),\n"
    "  CONSTRAINT tenant_days_pkey PRIMARY KEY (tenant_id, day));\n"
    "CREATE TABLE beneficiaries (\n"
    "  beneficiary_id text        PRIMARY KEY CHECK (octet_length(beneficiary_id) BETWEEN 1 AND 128),\n"
    "  tenant_id      text        NOT NULL REFERENCES tenants (tenant_id),   -- fixed at creation\n"
    "  verified       boolean     NOT NULL,\n"
    "  status         text        NOT NULL CHECK (status IN ('Active','Suspended','Closed')),\n"
    "  version        bigint      NOT NULL CHECK (version >= 1),\n"
    "  updated_at     timestamptz NOT NULL,\n"
    "  CONSTRAINT beneficiaries_tenant_key UNIQUE (tenant_id, beneficiary_id));\n"
    "CREATE TABLE destinations (\n"
    "  destination_id text        PRIMARY KEY CHECK (octet_length(destination_id) BETWEEN 1 AND 128),\n"
    "  beneficiary_id text        NOT NULL REFERENCES beneficiaries (beneficiary_id),\n"
    "  provider_token text        NOT NULL CHECK (octet_length(provider_token) BETWEEN 1 AND 512),  -- SECRET\n"
    "  version        bigint      NOT NULL CHECK (version >= 1),\n"
    "  changed_at     timestamptz NOT NULL);\n"
    "CREATE TABLE payouts (\n"
    "  payout_id           text        PRIMARY KEY CHECK (octet_length(payout_id) BETWEEN 1 AND 128),\n"
    "  tenant_id           text        NOT NULL,\n"
    "  beneficiary_id      text        NOT NULL,\n"
    "  destination_id      text        NOT NULL REFERENCES destinations (destination_id),\n"
    "  destination_version bigint      NOT NULL CHECK (destination_version >= 1),\n"
    "  amount              bigint      NOT NULL CHECK (amount BETWEEN 1 AND 999999999999999),  -- minor units\n"
    "  currency            text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),\n"
    "  purpose             text        CHECK (octet_length(purpose) BETWEEN 1 AND 140),  -- NULL: absent\n"
    "  state               text        NOT NULL CHECK (state IN ('Draft','Approved','Executing','Paid','Failed','Unknown','Cancelled')),\n"
    "  version             bigint      NOT NULL CHECK (version >= 1),\n"
    "  attempt_count       bigint      NOT NULL CHECK (attempt_count >= 0),\n"
    "  active_attempt      uuid,                   -- set by the claim\n"
    "  release_day         date,                   -- of the last Allowed decision\n"
    "  requester_id        text        NOT NULL CHECK (octet_length(requester_id) BETWEEN 1 AND 128),\n"
    "  created_at          timestamptz NOT NULL,\n"
    "  updated_at          timestamptz NOT NULL,\n"
    "  FOREIGN KEY (tenant_id, beneficiary_id) REFERENCES beneficiaries (tenant_id, beneficiary_id));\n";
/* ...the decisions, append-only... */
static const char pg_migration_8_decisions_sql[] =
    "CREATE TABLE payout_decisions (                   -- history (I22): no foreign key, a missing payout's Deferred counts\n"
    "  decision_id              uuid        PRIMARY KEY,\n"
    "  payout_id                text        NOT NULL,\n"
    "  tenant_id                text,                -- NULL: the payout was missing\n"
    "  mode                     text        NOT NULL CHECK (mode IN ('submit','reauthorize')),\n"
    "  outcome                  text        NOT NULL CHECK (outcome IN ('Allowed','Denied','Deferred','AcknowledgmentRequired','EscalationRecommended')),\n"
    "  reason                   text        NOT NULL CHECK (octet_length(reason) BETWEEN 1 AND 64),\n"
    "  policy_version           text        NOT NULL,\n"
    "  terms_fingerprint        text        CHECK (terms_fingerprint ~ '^[0-9a-f]{64}$'),\n"
    "  tenant_settings_version  bigint,              -- the versions evaluated; NULL when nothing was read\n"
    "  beneficiary_version      bigint,\n"
    "  destination_version      bigint,\n"
    "  payout_version           bigint,\n"
    "  requester_id             text        NOT NULL,   -- captured\n"
    "  requester_role           text        NOT NULL,\n"
    "  requester_approval_limit bigint      NOT NULL,\n"
    "  observed_at              timestamptz NOT NULL,   -- the facts' read\n"
    "  decided_at               timestamptz NOT NULL,   -- store clock\n"
    "  correlation_id           text        NOT NULL);\n"
    "CREATE INDEX payout_decisions_payout_idx ON payout_decisions (payout_id, decided_at);\n"
    "CREATE FUNCTION og_append_only() RETURNS trigger LANGUAGE plpgsql AS\n"
    "  $$BEGIN RAISE EXCEPTION '% is append-only', TG_TABLE_NAME; END$$;\n"
    "CREATE TRIGGER payout_decisions_append_only BEFORE UPDATE OR DELETE ON payout_decisions\n"
    "  FOR EACH ROW EXECUTE FUNCTION og_append_only();\n"
    "CREATE TRIGGER payout_decisions_no_truncate BEFORE TRUNCATE ON payout_decisions\n"
    "  FOR EACH STATEMENT EXECUTE FUNCTION og_append_only();\n";
/* ...the grants' bindings, the jobs and the history. */
static const char pg_migration_8_run_sql[] =
    "CREATE TABLE payout_grants (                      -- a payout grant's bindings; the grant is its grants row\n"
    "  grant_id                  text        PRIMARY KEY,\n"
    "  issuer                    text        NOT NULL CHECK (issuer = 'payouts'),\n"
    "  decision_id               uuid        NOT NULL UNIQUE REFERENCES payout_decisions (decision_id),\n"
    "  payout_id                 text        NOT NULL REFERENCES payouts (payout_id),\n"
    "  tenant_id                 text        NOT NULL,\n"
    "  operation                 text        NOT NULL CHECK (operation = 'payout.submit'),\n"
    "  audience                  text        NOT NULL,\n"
    "  terms_fingerprint         text        NOT NULL CHECK (terms_fingerprint ~ '^[0-9a-f]{64}$'),\n"
    "  executable_payout_version bigint      NOT NULL CHECK (executable_payout_version >= 1),\n"
    "  attempt_number            bigint      NOT NULL CHECK (attempt_number >= 1),\n"
    "  policy_version            text        NOT NULL,\n"
    "  amount                    bigint      NOT NULL CHECK (amount >= 1),   -- reserved\n"
    "  release_day               date        NOT NULL,\n"
    "  not_before                timestamptz NOT NULL,\n"
    "  expires_at                timestamptz NOT NULL,\n"
    "  created_at                timestamptz NOT NULL,\n"
    "  released_at               timestamptz,         -- the reservation released, once (I25)\n"
    "  release_cause             text        CHECK (release_cause IN ('expired','revoked')),\n"
    "  CHECK ((released_at IS NULL) = (release_cause IS NULL)),\n"
    "  CHECK (not_before < expires_at),\n"
    "  CONSTRAINT payout_grants_attempt_key UNIQUE (payout_id, attempt_number),   -- one grant per attempt\n"
    "  FOREIGN KEY (issuer, grant_id) REFERENCES grants (issuer, grant_id),\n"
    "  FOREIGN KEY (tenant_id, release_day) REFERENCES tenant_days (tenant_id, day));\n"
    "CREATE INDEX payout_grants_unreleased_idx ON payout_grants (expires_at) WHERE released_at IS NULL;\n"
    "CREATE INDEX payout_grants_day_idx ON payout_grants (tenant_id, release_day);   -- the day's FK, child side\n"
    "CREATE TABLE payout_jobs (                        -- the outbox is the queue (I26): references only\n"
    "  job_id           uuid        PRIMARY KEY,\n"
    "  payout_id        text        NOT NULL,\n"
    "  grant_id         text        NOT NULL REFERENCES payout_grants (grant_id),\n"
    "  correlation_id   text        NOT NULL,\n"
    "  resubmitted_from uuid        REFERENCES payout_jobs (job_id),\n"
    "  created_at       timestamptz NOT NULL,\n"
    "  available_at     timestamptz NOT NULL,       -- deliverable from then\n"
    "  deliveries       bigint      NOT NULL CHECK (deliveries >= 0),\n"
    "  delivered_at     timestamptz,\n"
    "  done_at          timestamptz);               -- acknowledged\n"
    "CREATE INDEX payout_jobs_available_idx ON payout_jobs (available_at, job_id) WHERE done_at IS NULL;\n"
    "CREATE TABLE payout_events (                      -- the payout's history, a row per step (I22)\n"
    "  seq            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,\n"
    "  payout_id      text        NOT NULL,\n"
    "  at             timestamptz NOT NULL,\n"
    "  kind           text        NOT NULL CHECK (kind IN ('drafted','decided','reserved','approved',\n"
    "                   'grant-issued','job-queued','cancelled','grant-revoked','reservation-released',\n"
    "                   'job-resubmitted')),\n"
    "  actor          text        NOT NULL,\n"
    "  correlation_id text,\n"
    "  decision_id    uuid,\n"
    "  grant_id       text,\n"
    "  job_id         uuid,\n"
    "  from_state     text,\n"
    "  to_state       text,\n"
    "  payout_version bigint,\n"
    "  amount         bigint,\n"
    "  release_day    date,\n"
    "  reason         text);\n"
    "CREATE INDEX payout_events_payout_idx ON payout_events (payout_id, seq);\n"
    "CREATE TRIGGER payout_events_append_only BEFORE UPDATE OR DELETE ON payout_events\n"
    "  FOR EACH ROW EXECUTE FUNCTION og_append_only();\n"
    "CREATE TRIGGER payout_events_no_truncate BEFORE TRUNCATE ON payout_events\n"
    "  FOR EACH STATEMENT EXECUTE FUNCTION og_append_only();\n";

/* Migration 9: the claim's history (I27). payout_events' kind CHECK gains
 * 'claimed': dropped and added again in one ALTER TABLE (a scan of the
 * history under its lock; every old row satisfies the wider list). */
static const char pg_migration_9_sql[] =
    "ALTER TABLE payout_events\n"
    "  DROP CONSTRAINT payout_events_kind_check,\n"
    "  ADD CONSTRAINT payout_events_kind_check CHECK (kind IN ('drafted','decided','reserved',\n"
    "      'approved','grant-issued','job-queued','cancelled','grant-revoked',\n"
    "      'reservation-released','job-resubmitted','claimed'));\n";

/* Migration 10: the resolution (I28). payout_grants' release_cause CHECK
 * gains the attempt's ends and payout_events' kind CHECK 'resolved': each
 * dropped and added again in one ALTER TABLE, as migration 9 (every old
 * row satisfies the wider lists). */
static const char pg_migration_10_sql[] =
    "ALTER TABLE payout_grants\n"
    "  DROP CONSTRAINT payout_grants_release_cause_check,\n"
    "  ADD CONSTRAINT payout_grants_release_cause_check CHECK (release_cause IN ('expired',\n"
    "      'revoked','paid','failed','not-started','not-applied'));\n"
    "ALTER TABLE payout_events\n"
    "  DROP CONSTRAINT payout_events_kind_check,\n"
    "  ADD CONSTRAINT payout_events_kind_check CHECK (kind IN ('drafted','decided','reserved',\n"
    "      'approved','grant-issued','job-queued','cancelled','grant-revoked',\n"
    "      'reservation-released','job-resubmitted','claimed','resolved'));\n";

/* Migration 11: a payout attempt's reconciliation (I29). operations (and
 * the archive, which repeats its columns) gain taken_at (the store's clock
 * at the last takeover: when a lookup began), lookups (the reconciler's
 * backoff index; a constant default: catalog only, no rewrite) and
 * final_absence_after (from when "not found" may be final; NULL: never).
 * operation_events' kind CHECK gains 'lookup' and the table a source
 * column (late evidence); payout_events' kind CHECK gains 'returned' and
 * the table an evidence column, with a unique partial index holding one
 * return per payout. The widened operation_events CHECK is added NOT VALID
 * and validated by migration 7's validate step, which every migrate runs
 * (a scan that does not block writes); payout_events' as migration 9's. */
static const char pg_migration_11_sql[] =
    "ALTER TABLE operations\n"
    "  ADD COLUMN taken_at            timestamptz,   -- NULL: never taken over\n"
    "  ADD COLUMN lookups             bigint NOT NULL DEFAULT 0 CHECK (lookups >= 0),\n"
    "  ADD COLUMN final_absence_after timestamptz;   -- NULL: not found is never final\n"
    "ALTER TABLE operations_archive\n"
    "  ADD COLUMN taken_at            timestamptz,\n"
    "  ADD COLUMN lookups             bigint NOT NULL DEFAULT 0,\n"
    "  ADD COLUMN final_absence_after timestamptz;\n"
    "ALTER TABLE operation_events\n"
    "  ADD COLUMN source text CHECK (source IN ('late-response','notification')),\n"
    "  DROP CONSTRAINT operation_events_kind_check,\n"
    "  ADD CONSTRAINT operation_events_kind_check\n"
    "      CHECK (kind IN ('outcome','takeover','resolved','started','lookup')) NOT VALID;\n"
    "ALTER TABLE operation_events_archive ADD COLUMN source text;\n"
    "ALTER TABLE payout_events\n"
    "  ADD COLUMN evidence text CHECK (octet_length(evidence) BETWEEN 1 AND 1024),\n"
    "  DROP CONSTRAINT payout_events_kind_check,\n"
    "  ADD CONSTRAINT payout_events_kind_check CHECK (kind IN ('drafted','decided','reserved',\n"
    "      'approved','grant-issued','job-queued','cancelled','grant-revoked',\n"
    "      'reservation-released','job-resubmitted','claimed','resolved','returned'));\n"
    "CREATE UNIQUE INDEX payout_events_returned_key ON payout_events (payout_id)\n"
    "    WHERE kind = 'returned';   -- one return per payout\n";
/* Migration 12: fidelity (docs/payouts.md, sections 4 and 5). A tenant's
 * settlement time zone is an IANA name: every existing offset becomes the
 * zone of that fixed offset ("UTC"; whole hours "Etc/GMT-N" for UTC+N and
 * "Etc/GMT+N" for UTC-N, the POSIX sign inverted in these names); an offset
 * no such zone has (not whole hours, or below UTC-12) stops the migration
 * with a message: set the tenant to a whole-hour offset first. And the
 * payout policy's current release, one row per operation, seeded with this
 * build's OG_PAYOUT_POLICY_VERSION (og_payout_policy_release_get/_set). */
static const char pg_migration_12_sql[] =
    "ALTER TABLE tenants ADD COLUMN settlement_time_zone text\n"
    "  CHECK (octet_length(settlement_time_zone) BETWEEN 1 AND 64);\n"
    "UPDATE tenants SET settlement_time_zone = CASE\n"
    "  WHEN settlement_offset_minutes = 0 THEN 'UTC'\n"
    "  WHEN settlement_offset_minutes % 60 = 0 AND settlement_offset_minutes BETWEEN -720 AND 840\n"
    "    THEN 'Etc/GMT' || CASE WHEN settlement_offset_minutes > 0 THEN '-' ELSE '+' END\n"
    "         || abs(settlement_offset_minutes / 60)\n"
    "  END;\n"
    "DO $og$ BEGIN\n"
    "  IF EXISTS (SELECT 1 FROM tenants WHERE settlement_time_zone IS NULL) THEN\n"
    "    RAISE EXCEPTION 'migration 12: a tenant''s settlement offset has no fixed-offset zone '\n"
    "      '(not whole hours, or below UTC-12): set it to whole hours first';\n"
    "  END IF;\n"
    "END $og$;\n"
    "ALTER TABLE tenants ALTER COLUMN settlement_time_zone SET NOT NULL,\n"
    "  DROP COLUMN settlement_offset_minutes;\n"
    "CREATE TABLE payout_policy_releases (\n"
    "  operation       text        PRIMARY KEY CHECK (operation = '" OG_PAYOUT_OPERATION "'),\n"
    "  current_version text        NOT NULL CHECK (octet_length(current_version) BETWEEN 1 AND 128),\n"
    "  updated_at      timestamptz NOT NULL,\n"
    "  updated_by      text        NOT NULL CHECK (octet_length(updated_by) BETWEEN 1 AND 128));\n"
    "INSERT INTO payout_policy_releases\n"
    "  VALUES ('" OG_PAYOUT_OPERATION "', '" OG_PAYOUT_POLICY_VERSION "', clock_timestamp(),\n"
    "          'migration-12');\n";

/* Migration 13: the archive's payout attempts by grant. A return after
 * completion (og_payout_return_record) reads the payout's last attempt,
 * live or archived, by its binding's grant: live ones by
 * operations_grant_key, archived ones had no index but the primary key,
 * so each return read the whole archive (docs/plans.md, "Payout return").
 * Partial: only payout attempts, a small part of an archive of credits.
 * IF NOT EXISTS: on a large archive an operator may build it beforehand
 * with CREATE INDEX CONCURRENTLY (same definition), as migration 4 says. */
static const char pg_migration_13_sql[] =
    "CREATE INDEX IF NOT EXISTS operations_archive_payout_grant_idx\n"
    "    ON operations_archive (issuer, grant_id) WHERE kind = 'payout';\n";

/* Migration 14: an approver's fresh decision names the pending
 * AcknowledgmentRequired or EscalationRecommended decision it settles, and
 * the destination version an acknowledgment covers (docs/payouts.md,
 * section 4, "Acknowledgment and escalation"). Unique where set: one
 * pending decision is settled once, whatever two approvers race. Adding
 * nullable columns without a default rewrites no row. And a Draft's edit
 * gets its history kind. */
static const char pg_migration_14_sql[] =
    "ALTER TABLE payout_decisions ADD COLUMN settles_decision_id uuid,\n"
    "    ADD COLUMN acknowledged_destination_version bigint\n"
    "        CHECK (acknowledged_destination_version >= 1);\n"
    "CREATE UNIQUE INDEX payout_decisions_settles_idx ON payout_decisions (settles_decision_id)\n"
    "    WHERE settles_decision_id IS NOT NULL;\n"
    /* ... and a Draft's terms are edited (og_payout_edit): the history's
     * kinds gain 'edited' */
    "ALTER TABLE payout_events\n"
    "  DROP CONSTRAINT payout_events_kind_check,\n"
    "  ADD CONSTRAINT payout_events_kind_check CHECK (kind IN ('drafted','decided','reserved',\n"
    "      'approved','grant-issued','job-queued','cancelled','grant-revoked',\n"
    "      'reservation-released','job-resubmitted','claimed','resolved','returned',\n"
    "      'edited'));\n";

/* Migration 15: an admission does less work per row (docs/performance.md,
 * "The admission statement, part by part (SLIM)"). Two changes, each
 * keeping what it replaces.
 *
 * The single-column CHECKs of operations and grant_consumptions become
 * domains with the same conditions. PostgreSQL reads a table's CHECK
 * constraints from the catalog's text form and compiles them again for
 * every statement that writes a row (stringToNode and planning of each,
 * per execution: about a quarter of the admission's CPU in the backend
 * for the eighteen it had); a domain's constraints are compiled once per
 * connection and kept in its type cache. The conditions are the same, and
 * a domain's are checked on every value assigned to the column — each
 * insert, each UPDATE that sets it — which is when a table CHECK on one
 * column can fail. The three CHECKs that tie two columns together stay
 * table CHECKs. Done without rewriting or scanning either table: the
 * domains are created without constraints, the columns altered to them
 * (binary-coercible, so only the indexes whose predicates name status are
 * built again, as migration 7 built them), and the constraints added NOT
 * VALID — every stored value already met the table CHECK being dropped,
 * which checked exactly this, and every value written from now on is
 * checked; pg_migration_15_validate then validates them after the commit
 * (a scan per domain of the tables that use it, which holds writes to
 * that table back while it runs). The two-column CHECKs that name an altered column are dropped
 * and added again NOT VALID so that the ALTER does not scan, and
 * validated after the commit (migration 7's validate step for operations,
 * pg_migration_15_validate for grant_consumptions), under locks that do
 * not block admissions.
 *
 * operations_backlog_idx held every operation, so every admission inserted
 * an entry into it at the index's right edge (status 'Admitted', the
 * newest created_at), where all concurrent admissions contend. It now
 * holds the statuses PG_V15_BACKLOG: every status but the two an owner
 * holds in flight, Admitted and Started, whose rows operations_recovery_idx
 * (status, lease_until) holds. Every listing og_op_scan runs still has a
 * partial index whose predicate its status set proves (I16): a set within
 * PG_V15_BACKLOG (the operators' backlog, Unknown and NeedsReconciliation;
 * a terminal status) walks the backlog index in scan order, a set within
 * PG_V7_OWNED (recovery, the payout sweep) the recovery index, as before.
 * An outcome write leaves Admitted or Started and is not a HOT update
 * either way (status is indexed): it inserts into the backlog index then,
 * as it did. Built again under its name in the migration's transaction,
 * which blocks admissions until it is built, as migration 7's indexes did.
 * A readable and a hashed store differ only in grant_consumptions'
 * columns. */
static const char pg_migration_15_domains_sql[] =
    "CREATE DOMAIN og_text128 AS text;        -- 1..128 bytes\n"
    "CREATE DOMAIN og_text64 AS text;         -- 1..64 bytes\n"
    "CREATE DOMAIN og_amount AS numeric;      -- > 0\n"
    "CREATE DOMAIN og_currency AS text;       -- ISO 4217 form\n"
    "CREATE DOMAIN og_op_status AS text;      -- an operation's status\n"
    "CREATE DOMAIN og_owner_version AS bigint;   -- >= 1\n"
    "CREATE DOMAIN og_count AS bigint;        -- >= 0\n"
    "CREATE DOMAIN og_op_kind AS text;        -- credit or payout\n"
    "CREATE DOMAIN og_claim_kind AS text;     -- what holds a consumption key\n";
static const char pg_migration_15_operations_sql[] =
    "ALTER TABLE operations\n"
    "  DROP CONSTRAINT operations_caller_id_check,\n"
    "  DROP CONSTRAINT operations_account_id_check,\n"
    "  DROP CONSTRAINT operations_amount_check,\n"
    "  DROP CONSTRAINT operations_currency_check,\n"
    "  DROP CONSTRAINT operations_status_check,\n"
    "  DROP CONSTRAINT operations_owner_version_check,\n"
    "  DROP CONSTRAINT operations_provider_reference_check,\n"
    "  DROP CONSTRAINT operations_outcome_reason_check,\n"
    "  DROP CONSTRAINT operations_kind_check,\n"
    "  DROP CONSTRAINT operations_idempotency_key_check,\n"
    "  DROP CONSTRAINT operations_client_reference_check,\n"
    "  DROP CONSTRAINT operations_lookups_check,\n"
    "  DROP CONSTRAINT operations_payout_status_check,\n"
    "  DROP CONSTRAINT operations_not_started_check,\n"
    "  ALTER COLUMN caller_id TYPE og_text128,\n"
    "  ALTER COLUMN account_id TYPE og_text128,\n"
    "  ALTER COLUMN amount TYPE og_amount,\n"
    "  ALTER COLUMN currency TYPE og_currency,\n"
    "  ALTER COLUMN status TYPE og_op_status,\n"
    "  ALTER COLUMN owner_version TYPE og_owner_version,\n"
    "  ALTER COLUMN provider_reference TYPE og_text128,\n"
    "  ALTER COLUMN outcome_reason TYPE og_text64,\n"
    "  ALTER COLUMN kind TYPE og_op_kind,\n"
    "  ALTER COLUMN idempotency_key TYPE og_text128,\n"
    "  ALTER COLUMN client_reference TYPE og_text128,\n"
    "  ALTER COLUMN lookups TYPE og_count,\n"
    "  ADD CONSTRAINT operations_payout_status_check\n"
    "      CHECK (kind = 'payout' OR status NOT IN ('Started','NotStarted')) NOT VALID,\n"
    "  ADD CONSTRAINT operations_not_started_check\n"
    "      CHECK (status <> 'NotStarted' OR owner_version > " PG_STR(OG__INITIAL_OWNER_VERSION) ") NOT VALID;\n"
    "DROP INDEX operations_backlog_idx;\n"
    "CREATE INDEX operations_backlog_idx ON operations (status, created_at, operation_id)\n"
    "    WHERE status IN " PG_V15_BACKLOG ";\n";
#define PG_MIGRATION_15_CLAIMS_SQL(key_checks, key_columns)                   \
    "ALTER TABLE grant_consumptions\n"                                         \
    key_checks                                                                 \
    "  DROP CONSTRAINT grant_consumptions_kind_check,\n"                       \
    "  DROP CONSTRAINT grant_consumptions_kind_check2,\n"                      \
    key_columns                                                                \
    "  ALTER COLUMN kind TYPE og_claim_kind,\n"                                \
    "  ADD CONSTRAINT grant_consumptions_kind_check2\n"                        \
    "      CHECK ((kind = 'admission') = (operation_id IS NOT NULL)) NOT VALID;\n" \
    "ALTER DOMAIN og_text128 ADD CONSTRAINT og_text128_check\n"                \
    "  CHECK (octet_length(VALUE) BETWEEN 1 AND 128) NOT VALID;\n"             \
    "ALTER DOMAIN og_text64 ADD CONSTRAINT og_text64_check\n"                  \
    "  CHECK (octet_length(VALUE) BETWEEN 1 AND 64) NOT VALID;\n"              \
    "ALTER DOMAIN og_amount ADD CONSTRAINT og_amount_check CHECK (VALUE > 0) NOT VALID;\n" \
    "ALTER DOMAIN og_currency ADD CONSTRAINT og_currency_check\n"              \
    "  CHECK (VALUE ~ '^[A-Z]{3}$') NOT VALID;\n"                              \
    "ALTER DOMAIN og_op_status ADD CONSTRAINT og_op_status_check\n"            \
    "  CHECK (VALUE IN " PG_V7_STATUSES ") NOT VALID;\n"                       \
    "ALTER DOMAIN og_owner_version ADD CONSTRAINT og_owner_version_check\n"    \
    "  CHECK (VALUE >= 1) NOT VALID;\n"                                        \
    "ALTER DOMAIN og_count ADD CONSTRAINT og_count_check CHECK (VALUE >= 0) NOT VALID;\n" \
    "ALTER DOMAIN og_op_kind ADD CONSTRAINT og_op_kind_check\n"                \
    "  CHECK (VALUE IN ('credit','payout')) NOT VALID;\n"                      \
    "ALTER DOMAIN og_claim_kind ADD CONSTRAINT og_claim_kind_check\n"          \
    "  CHECK (VALUE IN ('admission','revocation','consume')) NOT VALID;\n"
static const char pg_migration_15_claims_sql[] = PG_MIGRATION_15_CLAIMS_SQL(
    "  DROP CONSTRAINT grant_consumptions_issuer_check,\n"
    "  DROP CONSTRAINT grant_consumptions_grant_id_check,\n",
    "  ALTER COLUMN issuer TYPE og_text128,\n"
    "  ALTER COLUMN grant_id TYPE og_text128,\n");
static const char pg_migration_15_claims_hashed_sql[] =
    PG_MIGRATION_15_CLAIMS_SQL("", "");

/* After migration 15 committed, in a transaction of its own, as migration
 * 7's validate step: grant_consumptions' CHECK left NOT VALID (a scan under
 * SHARE UPDATE EXCLUSIVE, which claims do not wait for), then each domain
 * constraint left NOT VALID (ALTER DOMAIN ... VALIDATE CONSTRAINT: a scan
 * of each table with a column of that domain under a SHARE lock, which
 * DOES hold writes to that table back while it scans — PostgreSQL
 * validates a domain no other way). Every migrate runs it, so what a
 * migrator that died after the commit left is validated by the next;
 * with nothing left to do it is one catalog read. Until then nothing is
 * unchecked: the stored values met the dropped table CHECKs, and every
 * value written meets the domain's. */
static const char pg_migration_15_validate[] =
    "DO $og$\n"
    "DECLARE c record;\n"
    "BEGIN\n"
    "  FOR c IN SELECT conname FROM pg_constraint\n"
    "           WHERE contype = 'c' AND NOT convalidated\n"
    "             AND conrelid = 'grant_consumptions'::regclass\n"
    "           ORDER BY 1\n"
    "  LOOP\n"
    "    EXECUTE format('ALTER TABLE grant_consumptions VALIDATE CONSTRAINT %I', c.conname);\n"
    "  END LOOP;\n"
    "  FOR c IN SELECT contypid::regtype AS dom, conname FROM pg_constraint\n"
    "           WHERE contype = 'c' AND NOT convalidated AND contypid IN\n"
    "             ('og_text128'::regtype, 'og_text64'::regtype, 'og_amount'::regtype,\n"
    "              'og_currency'::regtype, 'og_op_status'::regtype,\n"
    "              'og_owner_version'::regtype, 'og_count'::regtype,\n"
    "              'og_op_kind'::regtype, 'og_claim_kind'::regtype)\n"
    "           ORDER BY 1, 2\n"
    "  LOOP\n"
    "    EXECUTE format('ALTER DOMAIN %s VALIDATE CONSTRAINT %I', c.dom, c.conname);\n"
    "  END LOOP;\n"
    "END\n"
    "$og$";

typedef struct pg_migration {
    int version;
    const char *description;
    /* Its SQL, run in order in the migration's one transaction: each text
     * may hold several statements (sent with the simple protocol) and is a
     * literal under the 4,095 characters ISO C asks a compiler to take. */
    const char *const *sql;
    const char *const *sql_hashed; /* NULL: sql; else a hashed store's */
    const char *validate; /* NULL, or run after the migration committed, on
                             every migrate of a store at this version or
                             later: idempotent, its own transaction */
} pg_migration;

/* A migration's list of texts, NULL-terminated. */
#define PG_STEPS(...) ((const char *const[]){__VA_ARGS__, NULL})

static const pg_migration pg_migrations[] = {
    {1, "grant consumptions and operations", PG_STEPS(pg_migration_1_sql),
     NULL, NULL},
    {2, "claim kinds, families, issuance log, grant rows, tickets",
     PG_STEPS(pg_migration_2_sql), NULL, NULL},
    {3, "execution: updated_at, provider reference, outcome reason, events",
     PG_STEPS(pg_migration_3_sql), NULL, NULL},
    {4, "retention: operations and events archives, terminal index",
     PG_STEPS(pg_migration_4_sql), NULL, NULL},
    {5, "settings: consumption keys (readable or hashed)",
     PG_STEPS(pg_migration_5_sql), PG_STEPS(pg_migration_5_hashed_sql), NULL},
    {6, "redemption recovery points", PG_STEPS(pg_migration_6_sql), NULL,
     NULL},
    {7, "operation kinds, idempotency keys, client references; statuses "
        "Started, NotStarted, NotApplied",
     PG_STEPS(pg_migration_7_sql), NULL, pg_migration_7_validate},
    {8, "payouts: context, decisions, grants' bindings, reservations, jobs",
     PG_STEPS(pg_migration_8_context_sql, pg_migration_8_decisions_sql,
              pg_migration_8_run_sql),
     NULL, NULL},
    {9, "payouts: the claim's history entry", PG_STEPS(pg_migration_9_sql),
     NULL, NULL},
    {10, "payouts: the resolution's release causes and history entry",
     PG_STEPS(pg_migration_10_sql), NULL, NULL},
    {11, "payouts: takeover instant, lookups, final absence, late evidence, "
         "returns",
     PG_STEPS(pg_migration_11_sql), NULL, NULL},
    {12, "payouts: settlement time zones; the policy's current release",
     PG_STEPS(pg_migration_12_sql), NULL, NULL},
    {13, "payouts: archived attempts by grant (returns)",
     PG_STEPS(pg_migration_13_sql), NULL, NULL},
    {14, "payouts: approvals settle acknowledgments and escalations; "
         "drafts are edited",
     PG_STEPS(pg_migration_14_sql), NULL, NULL},
    {15, "admission: domains for the single-column checks; the backlog "
         "index without the statuses in flight",
     PG_STEPS(pg_migration_15_domains_sql, pg_migration_15_operations_sql,
              pg_migration_15_claims_sql),
     PG_STEPS(pg_migration_15_domains_sql, pg_migration_15_operations_sql,
              pg_migration_15_claims_hashed_sql),
     pg_migration_15_validate},
};
#define PG_MIGRATION_COUNT ((int)(sizeof pg_migrations / sizeof pg_migrations[0]))

_Static_assert(sizeof pg_migrations / sizeof pg_migrations[0] ==
                   OG_SCHEMA_VERSION,
               "one migration per schema version, numbered 1..N");

/* ===========================================================================
 * The schema version
 * ========================================================================= */

/* Reads one integer from the single cell of a one-row result. */
static int pg_result_int(const PGresult *res, int *out)
{
    int64_t v;

    if (PQntuples(res) != 1 || PQnfields(res) != 1 || PQgetisnull(res, 0, 0))
        return OG_EINTERNAL;
    if (og__pg_parse_i64(PQgetvalue(res, 0, 0), &v) != 0 || v < 0 ||
        v > INT32_MAX)
        return OG_EINTERNAL;
    *out = (int)v;
    return 0;
}

/* Whether the migrations table exists, and the version it records. */
static const char pg_schema_table_sql[] =
    "SELECT (to_regclass('og_schema_migrations') IS NOT NULL)::int";
static const char pg_schema_version_sql[] =
    "SELECT coalesce(max(version), 0) FROM og_schema_migrations";

/* The current version on c: 0 without a migrations table. */
static int pg_version_on(og__pg_store *pg, og__pg_conn *c,
                         PGTransactionStatusType expect, int *version)
{
    PGresult *res = NULL;
    int exists = 0, v = 0;
    int rc;

    rc = og__pg_exec_params(pg, c, pg_schema_table_sql, 0, NULL, expect, &res);
    if (rc != 0)
        goto out;
    rc = pg_result_int(res, &exists);
    if (rc != 0 || !exists)
        goto out;
    PQclear(res);
    res = NULL;
    rc =
        og__pg_exec_params(pg, c, pg_schema_version_sql, 0, NULL, expect, &res);
    if (rc != 0)
        goto out;
    rc = pg_result_int(res, &v);
out:
    PQclear(res);
    if (rc == 0)
        *version = v;
    return rc;
}

int og__pg_schema_version(void *impl, int *version)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    int rc;

    rc = og__pg_acquire(pg, &c);
    if (rc != 0)
        return rc;
    rc = pg_version_on(pg, c, PQTRANS_IDLE, version);
    og__pg_release(pg, c);
    return rc;
}

/* ===========================================================================
 * The session bounds (I8)
 * ========================================================================= */

/* The server-side bounds an admission connection carries, read back from
 * pg_settings (milliseconds; NULL for transaction_timeout before 17). */
static const char pg_session_bounds_sql[] =
    "SELECT (SELECT setting FROM pg_settings"
    "         WHERE name = 'statement_timeout'),"
    " (SELECT setting FROM pg_settings WHERE name = 'lock_timeout'),"
    " (SELECT setting FROM pg_settings WHERE name = 'transaction_timeout'),"
    " current_setting('server_version_num'),"
    " current_setting('synchronous_standby_names') <> '' AND"
    "   current_setting('synchronous_commit')"
    "     IN ('on', 'remote_write', 'remote_apply')";
enum {
    SESSION_BOUNDS_STATEMENT_TIMEOUT,
    SESSION_BOUNDS_LOCK_TIMEOUT,
    SESSION_BOUNDS_TRANSACTION_TIMEOUT,
    SESSION_BOUNDS_SERVER_VERSION,
    SESSION_BOUNDS_SYNC_COMMIT_WAITS,
    SESSION_BOUNDS_NCOLS
};

int og__pg_session_bounds(void *impl, og_session_bounds *out)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    og_session_bounds b;
    int rc;

    rc = og__pg_acquire(pg, &c);
    if (rc != 0)
        return rc;
    rc = og__pg_exec_params(pg, c, pg_session_bounds_sql, 0, NULL, PQTRANS_IDLE,
                            &res);
    og__pg_release(pg, c);
    if (rc != 0)
        return rc;
    if (PQntuples(res) != 1 || PQnfields(res) != SESSION_BOUNDS_NCOLS) {
        PQclear(res);
        return OG_EINTERNAL;
    }
    memset(&b, 0, sizeof b);
    b.applicable = true;
    b.statement_timeout_ms =
        strtoll(PQgetvalue(res, 0, SESSION_BOUNDS_STATEMENT_TIMEOUT), NULL, 10);
    b.lock_timeout_ms =
        strtoll(PQgetvalue(res, 0, SESSION_BOUNDS_LOCK_TIMEOUT), NULL, 10);
    b.has_transaction_timeout =
        !PQgetisnull(res, 0, SESSION_BOUNDS_TRANSACTION_TIMEOUT);
    if (b.has_transaction_timeout)
        b.transaction_timeout_ms = strtoll(
            PQgetvalue(res, 0, SESSION_BOUNDS_TRANSACTION_TIMEOUT), NULL, 10);
    b.server_version_num = (int)strtol(
        PQgetvalue(res, 0, SESSION_BOUNDS_SERVER_VERSION), NULL, 10);
    b.sync_commit_waits =
        PQgetvalue(res, 0, SESSION_BOUNDS_SYNC_COMMIT_WAITS)[0] == 't';
    PQclear(res);
    *out = b;
    return 0;
}

/* ===========================================================================
 * Migrating
 * ========================================================================= */

/* "oncegate" in ASCII as a bigint: the advisory lock key every migrator
 * takes. A constant, so migrators of every build contend for the same lock. */
static const char pg_migrate_lock_sql[] =
    "SELECT pg_advisory_xact_lock(8029759185026510181)";
/* The table of applied migrations, created by the first migrator. */
static const char pg_migrations_table_sql[] =
    "CREATE TABLE IF NOT EXISTS og_schema_migrations ("
    " version     integer     PRIMARY KEY,"
    " description text        NOT NULL,"
    " applied_at  timestamptz NOT NULL DEFAULT clock_timestamp())";
/* A migration applied: $1 its version, $2 its description. */
static const char pg_migration_record_sql[] =
    "INSERT INTO og_schema_migrations (version, description)"
    " VALUES ($1::integer, $2::text)";

/* Applies migration m unless another migrator got there first. Any failure
 * leaves the transaction open; the caller discards the connection, which
 * rolls it back. */
static int pg_apply(og__pg_store *pg, og__pg_conn *c, const pg_migration *m,
                    og_consumption_keys keys, int *seen)
{
    char version[16];
    const char *params[2];
    const char *const *step;
    int cur = 0;
    int rc;

    rc = og__pg_exec_params(pg, c, "BEGIN", 0, NULL, PQTRANS_INTRANS, NULL);
    if (rc != 0)
        return rc;
    rc = og__pg_exec_params(pg, c, pg_migrate_lock_sql, 0, NULL,
                            PQTRANS_INTRANS, NULL);
    if (rc != 0)
        return rc;
    rc = og__pg_exec_params(pg, c, pg_migrations_table_sql, 0, NULL,
                            PQTRANS_INTRANS, NULL);
    if (rc != 0)
        return rc;
    /* Re-read under the lock: the version seen before it may be stale. */
    rc = pg_version_on(pg, c, PQTRANS_INTRANS, &cur);
    if (rc != 0)
        return rc;
    *seen = cur;
    if (cur > OG_SCHEMA_VERSION) {
        c->broken = true;
        return OG_ESCHEMA;
    }
    if (cur >= m->version)
        return og__pg_exec_params(pg, c, "ROLLBACK", 0, NULL, PQTRANS_IDLE,
                                  NULL);
    for (step = keys == OG_KEYS_HASHED && m->sql_hashed ? m->sql_hashed
                                                        : m->sql;
         *step; step++)
        if ((rc = og__pg_exec_script(pg, c, *step, PQTRANS_INTRANS)) != 0)
            return rc;
    snprintf(version, sizeof version, "%d", m->version);
    params[0] = version;
    params[1] = m->description;
    rc = og__pg_exec_params(pg, c, pg_migration_record_sql, 2, params,
                            PQTRANS_INTRANS, NULL);
    if (rc != 0)
        return rc;
    return og__pg_exec_params(pg, c, "COMMIT", 0, NULL, PQTRANS_IDLE, NULL);
}

/* Runs the validate step of every migration the store has (pg_migration):
 * each its own implicit transaction, after the migrations committed. */
static int pg_validate(og__pg_store *pg, og__pg_conn *c, int version)
{
    int rc = 0, i;

    for (i = 0; i < PG_MIGRATION_COUNT && rc == 0; i++)
        if (pg_migrations[i].validate && pg_migrations[i].version <= version)
            rc = og__pg_exec_script(pg, c, pg_migrations[i].validate,
                                    PQTRANS_IDLE);
    return rc;
}

int og__pg_migrate(void *impl, og_consumption_keys keys, int target, int *from,
                   int *to)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    int before = 0, after = 0, seen = 0;
    bool first = true;
    int rc, i;

    rc = og__pg_acquire(pg, &c);
    if (rc != 0)
        return rc;
    rc = pg_version_on(pg, c, PQTRANS_IDLE, &before);
    if (rc != 0)
        goto out;
    if (before > OG_SCHEMA_VERSION) {
        rc = OG_ESCHEMA;
        goto out;
    }
    for (i = 0; i < PG_MIGRATION_COUNT; i++) {
        if (pg_migrations[i].version <= before ||
            pg_migrations[i].version > target)
            continue;
        rc = pg_apply(pg, c, &pg_migrations[i], keys, &seen);
        if (rc != 0) {
            c->broken = true;
            goto out;
        }
        /* "from" is what this migrator found under the lock: a concurrent
         * migrator may have applied everything since the first read. */
        if (first)
            before = seen;
        first = false;
    }
    rc = pg_version_on(pg, c, PQTRANS_IDLE, &after);
    if (rc == 0 && after != target)
        rc = OG_ESCHEMA;
    if (rc == 0)
        rc = pg_validate(pg, c, after);
out:
    og__pg_release(pg, c);
    if (rc == 0) {
        *from = before;
        *to = after;
    }
    return rc;
}

/* ===========================================================================
 * The consumption keys (I9)
 * ========================================================================= */

/* migration 5 writes exactly one row */
static const char pg_read_keys_sql[] =
    "SELECT consumption_keys FROM og_store_settings";
enum { READ_KEYS_KEYS, READ_KEYS_NCOLS };

/* The consumption keys the store records (I9); from now on this store
 * object's connections prepare and run that mode's statements. */
int og__pg_read_keys(void *impl, og_consumption_keys *keys)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    og_consumption_keys k = OG_KEYS_READABLE;
    int rc;

    rc = og__pg_acquire(pg, &c);
    if (rc != 0)
        return rc;
    rc = og__pg_exec_params(pg, c, pg_read_keys_sql, 0, NULL, PQTRANS_IDLE,
                            &res);
    og__pg_release(pg, c);
    if (rc != 0)
        return rc;
    if (PQntuples(res) != 1 || PQnfields(res) != READ_KEYS_NCOLS ||
        PQgetisnull(res, 0, READ_KEYS_KEYS) ||
        og_consumption_keys_parse(PQgetvalue(res, 0, READ_KEYS_KEYS), &k) != 0)
        rc = OG_EINTERNAL;
    PQclear(res);
    if (rc != 0)
        return rc;
    pg->keys = k;
    *keys = k;
    return 0;
}
