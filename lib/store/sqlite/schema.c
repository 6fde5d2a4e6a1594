/*
 * schema.c — the SQLite store's schema: the versioned migrations (their SQL
 * and the code applying them), the schema version, and the consumption
 * keys mode a migrated store records (og__sq_read_keys, Q6).
 *
 * Invariants:
 *
 *   Q7  kind = 'admission' exactly when operation_id is set. SQLite cannot
 *       add migration 2's table CHECK to an existing table, so two triggers
 *       abort any write that breaks it (a defect: OG_EINTERNAL, M5). A
 *       hashed store's table is created by migration 5 and carries the
 *       CHECK itself.
 *
 * The migrations run inside the migrator's one BEGIN IMMEDIATE, so
 * concurrent migrators serialize, each re-reading the version under the
 * lock. Migration 7 rebuilds the operation tables for the operation kinds
 * (M22, Q18, exec.c), migrations 8-10 create and widen the payout store's
 * tables (M27-M35, Q22-Q28, payout.c and payout_run.c), migration 11 adds
 * a payout attempt's reconciliation (Q29, payout_after.c).
 */
#include <unistd.h>

#include "internal.h"

/* The statuses migration 7 leaves in the schema's CHECKs. */
#define SQ_V7_STATUSES                                                        \
    "('Admitted', 'Succeeded', 'Failed', 'Unknown', 'NeedsReconciliation',"   \
    " 'Started', 'NotStarted', 'NotApplied')"

/* ===========================================================================
 * Schema: versioned migrations. Each runs inside the migrator's
 * BEGIN IMMEDIATE, so concurrent migrators serialize.
 * ========================================================================= */
typedef struct sq_migration {
    int version;
    const char *description;
    /* Its SQL, run in order: each text (one or more statements) is a
     * literal under the 4,095 characters ISO C asks a compiler to take. */
    const char *const *sql;
    const char *const *sql_hashed; /* a hashed store's variant; NULL: sql */
    const char *fk_check;   /* NULL, or a table whose foreign keys are
                               checked (PRAGMA foreign_key_check) before
                               the migration commits: one that rebuilt it
                               with foreign keys off (Q18) */
} sq_migration;

/* A migration's list of texts, NULL-terminated. */
#define SQ_STEPS(...) ((const char *const[]){__VA_ARGS__, NULL})


/* Migration 7: operation kinds, their idempotency keys and client
 * references, and the statuses of a payout attempt (Q18). SQLite cannot
 * alter a CHECK, and every CHECK that lists statuses must widen, so
 * operations, operation_events and operations_archive are rebuilt the way
 * SQLite documents it ("Making Other Kinds Of Table Schema Changes"): the
 * new table, a copy of every row, the old table dropped, the new one
 * renamed, its indexes created again — inside the migrator's BEGIN
 * IMMEDIATE with foreign keys off on that connection (og__sq_migrate), and
 * PRAGMA foreign_key_check on operation_events before the commit.
 * operation_events keeps its AUTOINCREMENT high-water mark: the copy's
 * sqlite_sequence row is set to the old table's, so no event number an
 * archived event holds is handed out again (the archive keys on it, Q21).
 * Old rows become credits (kind's DEFAULT) whose key and reference are
 * their id (NULL). The indexes whose predicates list statuses get the new
 * sets (recovery: + Started; the archive's terminal set: + NotStarted,
 * NotApplied). operations_payout_status_check and
 * operations_not_started_check hold P1/P2 in the schema as the statements
 * hold them (Q18); the first is a CHECK of the kind column. Nothing here
 * touches grant_consumptions: both consumption keys get the same. The
 * rebuild writes every operation once, under the write lock. */
#define SQ_MIGRATION_7                                                        \
    "CREATE TABLE operations_v7 ("                                            \
    "  operation_id  TEXT    NOT NULL PRIMARY KEY CHECK (length(operation_id) = 36)," \
    "  issuer        TEXT    NOT NULL,"                                       \
    "  grant_id      TEXT    NOT NULL,"                                       \
    "  caller_id     TEXT    NOT NULL"                                        \
    "                CHECK (length(CAST(caller_id AS BLOB)) BETWEEN 1 AND 128)," \
    "  account_id    TEXT    NOT NULL"                                        \
    "                CHECK (length(CAST(account_id AS BLOB)) BETWEEN 1 AND 128)," \
    "  amount        TEXT    NOT NULL  /* canonical decimal, never REAL */"   \
    "                CHECK (amount GLOB '[0-9]*' AND amount NOT GLOB '*[^0-9.]*')," \
    "  currency      TEXT    NOT NULL"                                        \
    "                CHECK (length(currency) = 3 AND currency NOT GLOB '*[^A-Z]*')," \
    "  status        TEXT    NOT NULL CHECK (status IN " SQ_V7_STATUSES "),"  \
    "  owner_version INTEGER NOT NULL CHECK (owner_version >= 1),"            \
    "  lease_until   INTEGER NOT NULL,"                                       \
    "  submit_by     INTEGER NOT NULL,  /* latest time a create may be sent */" \
    "  created_at    INTEGER NOT NULL,"                                       \
    "  updated_at    INTEGER,"                                                \
    "  provider_reference TEXT CHECK (provider_reference IS NULL OR"          \
    "                  length(CAST(provider_reference AS BLOB)) BETWEEN 1 AND 128)," \
    "  outcome_reason TEXT CHECK (outcome_reason IS NULL OR"                  \
    "                  length(CAST(outcome_reason AS BLOB)) BETWEEN 1 AND 64)," \
    "  kind          TEXT    NOT NULL DEFAULT 'credit'"                       \
    "                CHECK (kind IN ('credit', 'payout'))"                    \
    "                CONSTRAINT operations_payout_status_check"               \
    "                CHECK (kind = 'payout' OR status NOT IN ('Started', 'NotStarted'))," \
    "  idempotency_key TEXT  /* NULL: the operation id */"                    \
    "                CHECK (idempotency_key IS NULL OR"                       \
    "                  length(CAST(idempotency_key AS BLOB)) BETWEEN 1 AND 128)," \
    "  client_reference TEXT /* NULL: the operation id */"                    \
    "                CHECK (client_reference IS NULL OR"                      \
    "                  length(CAST(client_reference AS BLOB)) BETWEEN 1 AND 128)," \
    "  CONSTRAINT operations_grant_key UNIQUE (issuer, grant_id),"            \
    "  CONSTRAINT operations_not_started_check CHECK (status <> 'NotStarted'" \
    "    OR owner_version > " SQ_STR(OG__INITIAL_OWNER_VERSION) ")"           \
    ") STRICT, WITHOUT ROWID;"                                                \
    "INSERT INTO operations_v7 (" SQ_V6_OP_COLS ")"                           \
    "  SELECT " SQ_V6_OP_COLS " FROM operations;",                            \
    "CREATE TABLE operation_events_v7 ("                                      \
    "  seq                INTEGER PRIMARY KEY AUTOINCREMENT,"                 \
    "  operation_id       TEXT    NOT NULL"                                   \
    "                     REFERENCES operations (operation_id),"              \
    "  at                 INTEGER NOT NULL,  /* store clock */"               \
    "  kind               TEXT    NOT NULL"                                   \
    "                     CHECK (kind IN ('outcome', 'takeover', 'resolved', 'started'))," \
    "  from_status        TEXT    NOT NULL CHECK (from_status IN " SQ_V7_STATUSES ")," \
    "  to_status          TEXT    NOT NULL CHECK (to_status IN " SQ_V7_STATUSES ")," \
    "  owner_version      INTEGER NOT NULL  /* after the event */"            \
    "                     CHECK (owner_version >= 1),"                        \
    "  reason             TEXT    CHECK (reason IS NULL OR"                   \
    "                       length(CAST(reason AS BLOB)) BETWEEN 1 AND 64),"  \
    "  provider_reference TEXT    CHECK (provider_reference IS NULL OR"       \
    "                       length(CAST(provider_reference AS BLOB))"         \
    "                         BETWEEN 1 AND 128),"                            \
    "  actor              TEXT    NOT NULL CHECK ("                           \
    "                       length(CAST(actor AS BLOB)) BETWEEN 1 AND 128),"  \
    "  evidence           TEXT    CHECK (evidence IS NULL OR"                 \
    "                       length(CAST(evidence AS BLOB)) BETWEEN 1 AND 1024)" \
    ") STRICT;"                                                               \
    "INSERT INTO operation_events_v7 (" SQ_V7_EVENT_COLS ")"                  \
    "  SELECT " SQ_V7_EVENT_COLS " FROM operation_events;"                       \
    "DELETE FROM sqlite_sequence WHERE name = 'operation_events_v7';"         \
    "INSERT INTO sqlite_sequence (name, seq)"                                 \
    "  SELECT 'operation_events_v7', seq FROM sqlite_sequence"                \
    "  WHERE name = 'operation_events';"                                      \
    "DROP TABLE operation_events;"                                            \
    "DROP TABLE operations;"                                                  \
    "ALTER TABLE operations_v7 RENAME TO operations;"                         \
    "ALTER TABLE operation_events_v7 RENAME TO operation_events;"             \
    "CREATE INDEX operations_recovery_idx ON operations (lease_until)"        \
    "  WHERE status IN " SQ_OWNED ";"                                         \
    "CREATE INDEX operations_recovery_scan_idx"                               \
    "  ON operations (status, lease_until)"                                   \
    "  WHERE status IN " SQ_OWNED ";"                                         \
    "CREATE INDEX operations_backlog_idx ON operations (status, created_at);" \
    "CREATE INDEX operations_terminal_idx"                                    \
    "  ON operations (coalesce(updated_at, created_at), operation_id)"        \
    "  WHERE status IN " SQ_TERMINAL ";"                                      \
    "CREATE INDEX operation_events_operation_idx"                             \
    "  ON operation_events (operation_id, seq);",                             \
    "CREATE TABLE operations_archive_v7 ("                                    \
    "  operation_id       TEXT    NOT NULL PRIMARY KEY,"                      \
    "  issuer             TEXT    NOT NULL,"                                  \
    "  grant_id           TEXT    NOT NULL,"                                  \
    "  caller_id          TEXT    NOT NULL,"                                  \
    "  account_id         TEXT    NOT NULL,"                                  \
    "  amount             TEXT    NOT NULL,"                                  \
    "  currency           TEXT    NOT NULL,"                                  \
    "  status             TEXT    NOT NULL CHECK (status IN " SQ_TERMINAL ")," \
    "  owner_version      INTEGER NOT NULL,"                                  \
    "  lease_until        INTEGER NOT NULL,"                                  \
    "  submit_by          INTEGER NOT NULL,"                                  \
    "  created_at         INTEGER NOT NULL,"                                  \
    "  updated_at         INTEGER,"                                           \
    "  provider_reference TEXT,"                                              \
    "  outcome_reason     TEXT,"                                              \
    "  archived_at        INTEGER NOT NULL,"                                  \
    "  kind               TEXT    NOT NULL DEFAULT 'credit',"                 \
    "  idempotency_key    TEXT,"                                              \
    "  client_reference   TEXT"                                               \
    ") STRICT, WITHOUT ROWID;"                                                \
    "INSERT INTO operations_archive_v7 (" SQ_V6_OP_COLS ", archived_at)"      \
    "  SELECT " SQ_V6_OP_COLS ", archived_at FROM operations_archive;"        \
    "DROP TABLE operations_archive;"                                          \
    "ALTER TABLE operations_archive_v7 RENAME TO operations_archive;"

/* Migration 5: the store's settings and its consumption keys (Q6). It runs
 * after migration 4 and touches none of its tables (the operation archives
 * keep their identifiers, as operations do). og_store_settings has exactly
 * one row; og_consumption_key() is registered on the migrating connection,
 * so a hashed store's existing claims are rewritten under their keys in the
 * migration's own transaction. The hashed table: the atomic check is its
 * PRIMARY KEY on key_hash, migration 2's kind rule is a table CHECK (Q7),
 * no column holds an issuer or a grant id, and it gets back the index
 * cleanup picks its rows over (grant_consumptions_retain_until_idx, Q20). */
#define SQ_MIGRATION_5(keys, convert)                                         \
    "CREATE TABLE og_store_settings ("                                        \
    "  singleton        INTEGER NOT NULL PRIMARY KEY CHECK (singleton = 1),"  \
    "  consumption_keys TEXT    NOT NULL"                                     \
    "                   CHECK (consumption_keys IN ('readable', 'hashed'))"   \
    ") STRICT;"                                                               \
    "INSERT INTO og_store_settings (singleton, consumption_keys)"             \
    "  VALUES (1, '" keys "');" convert
#define SQ_HASHED_CONSUMPTIONS                                                \
    "CREATE TABLE grant_consumptions_hashed ("                                \
    "  key_hash     BLOB    NOT NULL PRIMARY KEY /* the atomic check */"      \
    "               CHECK (length(key_hash) = 32),"                           \
    "               /* og_consumption_key(issuer, grant_id) */"               \
    "  operation_id TEXT    CHECK (operation_id IS NULL OR length(operation_id) = 36)," \
    "  consumed_at  INTEGER NOT NULL,"                                        \
    "  retain_until INTEGER NOT NULL,"                                        \
    "  kind         TEXT    NOT NULL"                                         \
    "               CHECK (kind IN ('admission', 'revocation', 'consume')),"  \
    "  CONSTRAINT grant_consumptions_kind_check2"                             \
    "    CHECK ((kind = 'admission') = (operation_id IS NOT NULL))"           \
    ") STRICT, WITHOUT ROWID;"                                                \
    "INSERT INTO grant_consumptions_hashed"                                   \
    "  (key_hash, operation_id, consumed_at, retain_until, kind)"             \
    "  SELECT og_consumption_key(issuer, grant_id), operation_id,"            \
    "         consumed_at, retain_until, kind"                                \
    "  FROM grant_consumptions;"                                              \
    "DROP TABLE grant_consumptions;" /* its index and triggers with it */     \
    "ALTER TABLE grant_consumptions_hashed RENAME TO grant_consumptions;"     \
    "CREATE INDEX grant_consumptions_retain_until_idx"                        \
    "  ON grant_consumptions (retain_until);"

/* payout_events as each migration creates it: name, and the kinds added
 * after migration 8's (", 'claimed'" ...). Migrations 9 and 10 rebuild the
 * table to widen the kind CHECK, the one thing SQLite cannot alter. */
#define SQ_PAYOUT_EVENTS_TABLE(name, kinds)                                   \
    SQ_PAYOUT_EVENTS_TABLE_X(name, kinds, "")
#define SQ_PAYOUT_EVENTS_TABLE_X(name, kinds, more)                           \
    "CREATE TABLE " name " ("                                                 \
    "  seq            INTEGER PRIMARY KEY AUTOINCREMENT,"                     \
    "  payout_id      TEXT    NOT NULL,"                                      \
    "  at             INTEGER NOT NULL,  /* store clock */"                   \
    "  kind           TEXT    NOT NULL CHECK (kind IN ('drafted', 'decided'," \
    "                   'reserved', 'approved', 'grant-issued', 'job-queued'," \
    "                   'cancelled', 'grant-revoked', 'reservation-released'," \
    "                   'job-resubmitted'" kinds "))," /* + later kinds */     \
    "  actor          TEXT    NOT NULL,"                                      \
    "  correlation_id TEXT,"                                                  \
    "  decision_id    TEXT,"                                                  \
    "  grant_id       TEXT,"                                                  \
    "  job_id         TEXT,"                                                  \
    "  from_state     TEXT,"                                                  \
    "  to_state       TEXT,"                                                  \
    "  payout_version INTEGER,"                                               \
    "  amount         INTEGER,"                                               \
    "  release_day    TEXT,"                                                  \
    "  reason         TEXT" more /* + later columns */                        \
    ") STRICT;"

/* Moves payout_events' rows into its rebuilt table tmp, with its
 * AUTOINCREMENT high-water mark, and puts tmp in its place with its index
 * and append-only triggers. */
#define SQ_PAYOUT_EVENTS_REBUILD(tmp)                                         \
    SQ_PAYOUT_EVENTS_REBUILD_COLS(tmp, SQ_PAYOUT_EVENT_COLS)
#define SQ_PAYOUT_EVENTS_REBUILD_COLS(tmp, cols)                              \
    "INSERT INTO " tmp " (" cols ")"                                          \
    "  SELECT " cols " FROM payout_events ORDER BY seq;"                      \
    "DELETE FROM sqlite_sequence WHERE name = '" tmp "';"                     \
    "INSERT INTO sqlite_sequence (name, seq)"                                 \
    "  SELECT '" tmp "', seq FROM sqlite_sequence"                            \
    "  WHERE name = 'payout_events';"                                         \
    "DROP TABLE payout_events;"                                               \
    "ALTER TABLE " tmp " RENAME TO payout_events;"                            \
    "CREATE INDEX payout_events_payout_idx ON payout_events (payout_id, seq);" \
    SQ_APPEND_ONLY("payout_events")

/* payout_grants as each migration creates it: name, and the release
 * causes added after migration 8's. Migration 10 rebuilds the table to
 * widen the release_cause CHECK. */
#define SQ_PAYOUT_GRANTS_TABLE(name, causes)                                  \
    "CREATE TABLE " name " ("                                                 \
    "  grant_id                  TEXT    NOT NULL PRIMARY KEY,"               \
    "  issuer                    TEXT    NOT NULL CHECK (issuer = 'payouts')," \
    "  decision_id               TEXT    NOT NULL UNIQUE"                     \
    "                            REFERENCES payout_decisions (decision_id),"  \
    "  payout_id                 TEXT    NOT NULL REFERENCES payouts (payout_id)," \
    "  tenant_id                 TEXT    NOT NULL,"                           \
    "  operation                 TEXT    NOT NULL"                            \
    "                            CHECK (operation = 'payout.submit'),"        \
    "  audience                  TEXT    NOT NULL,"                           \
    "  terms_fingerprint         TEXT    NOT NULL "                           \
    "                            " SQ_PAYOUT_FP_CHECK("terms_fingerprint") "," \
    "  executable_payout_version INTEGER NOT NULL"                            \
    "                            CHECK (executable_payout_version >= 1),"     \
    "  attempt_number            INTEGER NOT NULL CHECK (attempt_number >= 1)," \
    "  policy_version            TEXT    NOT NULL,"                           \
    "  amount                    INTEGER NOT NULL CHECK (amount >= 1),"       \
    "  release_day               TEXT    NOT NULL,"                           \
    "  not_before                INTEGER NOT NULL,"                           \
    "  expires_at                INTEGER NOT NULL,"                           \
    "  created_at                INTEGER NOT NULL,"                           \
    "  released_at               INTEGER,  /* reservation released */"        \
    "  release_cause             TEXT    CHECK (release_cause IS NULL OR"     \
    "                              release_cause IN ('expired', 'revoked'"    \
    causes "))," /* + the attempt's ends from migration 10 */                \
    "  CHECK ((released_at IS NULL) = (release_cause IS NULL)),"              \
    "  CHECK (not_before < expires_at),"                                      \
    "  UNIQUE (payout_id, attempt_number),  /* one grant per attempt */"      \
    "  FOREIGN KEY (issuer, grant_id) REFERENCES grants (issuer, grant_id),"  \
    "  FOREIGN KEY (tenant_id, release_day)"                                  \
    "    REFERENCES tenant_days (tenant_id, day)"                             \
    ") STRICT, WITHOUT ROWID;"

/* Migration 8: the payout decision side (Q22-Q26). New tables only: it
 * changes nothing of migrations 1-6 (the payout grants are rows of the
 * existing `grants` table, issuer 'payouts', and their bindings are a
 * table of their own), so it applies the same to a readable and a hashed
 * store. Money is INTEGER minor units of the tenant's one currency; a day
 * is 'YYYY-MM-DD' (og_payout_release_day). The history tables are
 * append-only, enforced by the store (triggers), not by convention. */
#define SQ_PAYOUT_ID_CHECK(c) "CHECK (length(CAST(" c " AS BLOB)) BETWEEN 1 AND 128)"
#define SQ_PAYOUT_CURRENCY_CHECK(c)                                           \
    "CHECK (length(" c ") = 3 AND " c " NOT GLOB '*[^A-Z]*')"
#define SQ_PAYOUT_DAY_CHECK(c)                                                \
    "CHECK (" c " GLOB '[0-9][0-9][0-9][0-9]-[0-1][0-9]-[0-3][0-9]')"
#define SQ_PAYOUT_FP_CHECK(c)                                                 \
    "CHECK (length(" c ") = 64 AND " c " NOT GLOB '*[^0-9a-f]*')"
#define SQ_PAYOUT_STATES                                                      \
    "('Draft', 'Approved', 'Executing', 'Paid', 'Failed', 'Unknown',"         \
    " 'Cancelled')"
#define SQ_APPEND_ONLY(t)                                                     \
    "CREATE TRIGGER " t "_append_only_update BEFORE UPDATE ON " t             \
    "  BEGIN SELECT RAISE(ABORT, '" t " is append-only'); END;"               \
    "CREATE TRIGGER " t "_append_only_delete BEFORE DELETE ON " t             \
    "  BEGIN SELECT RAISE(ABORT, '" t " is append-only'); END;"
#define SQ_MIGRATION_8                                                        \
    /* A tenant's settings; settings_version moves with each of them and   \
     * never with the counters (the claim fences it). */                    \
    "CREATE TABLE tenants ("                                                  \
    "  tenant_id                 TEXT    NOT NULL PRIMARY KEY"                \
    "                            " SQ_PAYOUT_ID_CHECK("tenant_id") ","        \
    "  payouts_suspended         INTEGER NOT NULL"                            \
    "                            CHECK (payouts_suspended IN (0, 1)),"        \
    "  daily_limit               INTEGER NOT NULL  /* minor units */"         \
    "                            CHECK (daily_limit BETWEEN 0 AND"            \
    "                                   999999999999999999),"                 \
    "  currency                  TEXT    NOT NULL  /* fixed */"               \
    "                            " SQ_PAYOUT_CURRENCY_CHECK("currency") ","   \
    "  settlement_offset_minutes INTEGER NOT NULL"                            \
    "                            CHECK (settlement_offset_minutes"            \
    "                                   BETWEEN -840 AND 840),"               \
    "  settings_version          INTEGER NOT NULL CHECK (settings_version >= 1)," \
    "  updated_at                INTEGER NOT NULL"                            \
    ") STRICT, WITHOUT ROWID;"                                                \
    /* The reservation counters of one release day (Q23). */               \
    "CREATE TABLE tenant_days ("                                              \
    "  tenant_id TEXT    NOT NULL REFERENCES tenants (tenant_id),"            \
    "  day       TEXT    NOT NULL " SQ_PAYOUT_DAY_CHECK("day") ","            \
    "  paid      INTEGER NOT NULL CHECK (paid >= 0),"                         \
    "  reserved  INTEGER NOT NULL CHECK (reserved >= 0),"                     \
    "  version   INTEGER NOT NULL CHECK (version >= 1),"                      \
    "  PRIMARY KEY (tenant_id, day)"                                          \
    ") STRICT, WITHOUT ROWID;"                                                \
    "CREATE TABLE beneficiaries ("                                            \
    "  beneficiary_id TEXT    NOT NULL PRIMARY KEY"                           \
    "                 " SQ_PAYOUT_ID_CHECK("beneficiary_id") ","              \
    "  tenant_id      TEXT    NOT NULL REFERENCES tenants (tenant_id),"       \
    "  verified       INTEGER NOT NULL CHECK (verified IN (0, 1)),"           \
    "  status         TEXT    NOT NULL"                                       \
    "                 CHECK (status IN ('Active', 'Suspended', 'Closed')),"   \
    "  version        INTEGER NOT NULL CHECK (version >= 1),"                 \
    "  updated_at     INTEGER NOT NULL,"                                      \
    "  UNIQUE (tenant_id, beneficiary_id)  /* payouts name both */"           \
    ") STRICT, WITHOUT ROWID;"                                                \
    /* provider_token is a SECRET: no other table, result or log has it. */ \
    "CREATE TABLE destinations ("                                             \
    "  destination_id TEXT    NOT NULL PRIMARY KEY"                           \
    "                 " SQ_PAYOUT_ID_CHECK("destination_id") ","              \
    "  beneficiary_id TEXT    NOT NULL REFERENCES beneficiaries (beneficiary_id)," \
    "  provider_token TEXT    NOT NULL"                                       \
    "                 CHECK (length(CAST(provider_token AS BLOB))"            \
    "                        BETWEEN 1 AND 512),"                             \
    "  version        INTEGER NOT NULL CHECK (version >= 1),"                 \
    "  changed_at     INTEGER NOT NULL  /* store clock, every change */"      \
    ") STRICT, WITHOUT ROWID;",                                               \
    "CREATE TABLE payouts ("                                                  \
    "  payout_id           TEXT    NOT NULL PRIMARY KEY"                      \
    "                      " SQ_PAYOUT_ID_CHECK("payout_id") ","              \
    "  tenant_id           TEXT    NOT NULL,"                                 \
    "  beneficiary_id      TEXT    NOT NULL,"                                 \
    "  destination_id      TEXT    NOT NULL"                                  \
    "                      REFERENCES destinations (destination_id),"         \
    "  destination_version INTEGER NOT NULL CHECK (destination_version >= 1)," \
    "  amount              INTEGER NOT NULL  /* minor units */"               \
    "                      CHECK (amount BETWEEN 1 AND 999999999999999),"     \
    "  currency            TEXT    NOT NULL " SQ_PAYOUT_CURRENCY_CHECK("currency") "," \
    "  purpose             TEXT    /* NULL: absent; else normalized */"       \
    "                      CHECK (purpose IS NULL OR"                         \
    "                             length(CAST(purpose AS BLOB)) BETWEEN 1 AND 140)," \
    "  state               TEXT    NOT NULL CHECK (state IN " SQ_PAYOUT_STATES ")," \
    "  version             INTEGER NOT NULL CHECK (version >= 1),"            \
    "  attempt_count       INTEGER NOT NULL CHECK (attempt_count >= 0),"      \
    "  active_attempt      TEXT    /* set by the claim */"                    \
    "                      CHECK (active_attempt IS NULL OR"                  \
    "                             length(active_attempt) = 36),"              \
    "  release_day         TEXT    CHECK (release_day IS NULL OR"             \
    "                                     release_day GLOB '[0-9]*'),"        \
    "  requester_id        TEXT    NOT NULL " SQ_PAYOUT_ID_CHECK("requester_id") "," \
    "  created_at          INTEGER NOT NULL,"                                 \
    "  updated_at          INTEGER NOT NULL,"                                 \
    "  FOREIGN KEY (tenant_id, beneficiary_id)"                               \
    "    REFERENCES beneficiaries (tenant_id, beneficiary_id)"                \
    ") STRICT, WITHOUT ROWID;",                                               \
    /* History (Q22): no foreign key, so a missing payout's Deferred        \
     * decision is recorded too. */                                          \
    "CREATE TABLE payout_decisions ("                                         \
    "  decision_id              TEXT    NOT NULL PRIMARY KEY"                 \
    "                           CHECK (length(decision_id) = 36),"            \
    "  payout_id                TEXT    NOT NULL,"                            \
    "  tenant_id                TEXT,   /* NULL: the payout was missing */"   \
    "  mode                     TEXT    NOT NULL"                             \
    "                           CHECK (mode IN ('submit', 'reauthorize')),"   \
    "  outcome                  TEXT    NOT NULL CHECK (outcome IN ('Allowed'," \
    "                             'Denied', 'Deferred', 'AcknowledgmentRequired'," \
    "                             'EscalationRecommended')),"                 \
    "  reason                   TEXT    NOT NULL"                             \
    "                           CHECK (length(reason) BETWEEN 1 AND 64),"     \
    "  policy_version           TEXT    NOT NULL,"                            \
    "  terms_fingerprint        TEXT    CHECK (terms_fingerprint IS NULL OR"  \
    "                             (length(terms_fingerprint) = 64 AND"        \
    "                              terms_fingerprint NOT GLOB '*[^0-9a-f]*')),"\
    "  tenant_settings_version  INTEGER,  /* the versions evaluated; NULL */" \
    "  beneficiary_version      INTEGER,  /* when nothing could be read */"   \
    "  destination_version      INTEGER,"                                     \
    "  payout_version           INTEGER,"                                     \
    "  requester_id             TEXT    NOT NULL,  /* captured */"            \
    "  requester_role           TEXT    NOT NULL,"                            \
    "  requester_approval_limit INTEGER NOT NULL,"                            \
    "  observed_at              INTEGER NOT NULL,  /* the facts' read */"     \
    "  decided_at               INTEGER NOT NULL,  /* store clock */"         \
    "  correlation_id           TEXT    NOT NULL"                             \
    ") STRICT, WITHOUT ROWID;"                                                \
    "CREATE INDEX payout_decisions_payout_idx"                                \
    "  ON payout_decisions (payout_id, decided_at);"                          \
    SQ_APPEND_ONLY("payout_decisions"),                                       \
    /* A payout grant's bindings; the grant itself is its `grants` row.     \
     * released_at is set once, by an expiry or a revocation (Q25). */       \
    SQ_PAYOUT_GRANTS_TABLE("payout_grants", "")                              \
    /* The janitor's scan (Q25): unreleased bindings by expiry. */          \
    "CREATE INDEX payout_grants_unreleased_idx ON payout_grants (expires_at)"  \
    "  WHERE released_at IS NULL;"                                            \
    /* A day's bindings: the foreign key's child side, so that writing a    \
     * day's row never scans the bindings. */                                \
    "CREATE INDEX payout_grants_day_idx ON payout_grants (tenant_id, release_day);" \
    /* The outbox is the queue (Q26): references only. */                   \
    "CREATE TABLE payout_jobs ("                                              \
    "  job_id           TEXT    NOT NULL PRIMARY KEY CHECK (length(job_id) = 36)," \
    "  payout_id        TEXT    NOT NULL,"                                    \
    "  grant_id         TEXT    NOT NULL REFERENCES payout_grants (grant_id)," \
    "  correlation_id   TEXT    NOT NULL,"                                    \
    "  resubmitted_from TEXT    REFERENCES payout_jobs (job_id),"             \
    "  created_at       INTEGER NOT NULL,"                                    \
    "  available_at     INTEGER NOT NULL,  /* deliverable from then */"       \
    "  deliveries       INTEGER NOT NULL CHECK (deliveries >= 0),"            \
    "  delivered_at     INTEGER,"                                             \
    "  done_at          INTEGER            /* acknowledged */"                \
    ") STRICT, WITHOUT ROWID;"                                                \
    "CREATE INDEX payout_jobs_available_idx ON payout_jobs (available_at, job_id)" \
    "  WHERE done_at IS NULL;",                                               \
    /* The payout's history: one row per step (Q22), append-only. */        \
    SQ_PAYOUT_EVENTS_TABLE("payout_events", "")                              \
    "CREATE INDEX payout_events_payout_idx ON payout_events (payout_id, seq);" \
    SQ_APPEND_ONLY("payout_events")

/* Migration 9: the claim's history (Q27). payout_events' kind CHECK
 * gains 'claimed'; SQLite cannot alter a CHECK, so the table is rebuilt as
 * migration 7 rebuilds (the new table, every row copied, the old dropped,
 * the new renamed, its index and triggers created again), keeping its
 * AUTOINCREMENT high-water mark. No table references payout_events. */
#define SQ_PAYOUT_EVENT_COLS                                                  \
    "seq, payout_id, at, kind, actor, correlation_id, decision_id, grant_id," \
    " job_id, from_state, to_state, payout_version, amount, release_day,"     \
    " reason"
#define SQ_MIGRATION_9                                                        \
    SQ_PAYOUT_EVENTS_TABLE("payout_events_v9", ", 'claimed'")                \
    SQ_PAYOUT_EVENTS_REBUILD("payout_events_v9")

/* Migration 10: the resolution (Q28). payout_grants' release_cause CHECK
 * gains the attempt's ends ('paid', 'failed', 'not-started',
 * 'not-applied') and payout_events' kind CHECK 'resolved'. Both tables are
 * rebuilt as migration 9 rebuilds payout_events (the history keeps its
 * AUTOINCREMENT high-water mark); payout_jobs names payout_grants, so its
 * foreign keys are checked before the commit (sq_migration.fk_check). */
#define SQ_PAYOUT_GRANT_COLS                                                  \
    "grant_id, issuer, decision_id, payout_id, tenant_id, operation,"        \
    " audience, terms_fingerprint, executable_payout_version,"               \
    " attempt_number, policy_version, amount, release_day, not_before,"      \
    " expires_at, created_at, released_at, release_cause"
#define SQ_MIGRATION_10                                                       \
    SQ_PAYOUT_GRANTS_TABLE("payout_grants_v10",                              \
                           ", 'paid', 'failed', 'not-started', 'not-applied'") \
    "INSERT INTO payout_grants_v10 (" SQ_PAYOUT_GRANT_COLS ")"                \
    "  SELECT " SQ_PAYOUT_GRANT_COLS " FROM payout_grants;"                   \
    "DROP TABLE payout_grants;"                                               \
    "ALTER TABLE payout_grants_v10 RENAME TO payout_grants;"                  \
    "CREATE INDEX payout_grants_unreleased_idx ON payout_grants (expires_at)"  \
    "  WHERE released_at IS NULL;"                                            \
    "CREATE INDEX payout_grants_day_idx ON payout_grants (tenant_id, release_day);", \
    SQ_PAYOUT_EVENTS_TABLE("payout_events_v10", ", 'claimed', 'resolved'")   \
    SQ_PAYOUT_EVENTS_REBUILD("payout_events_v10")

/* Migration 11: a payout attempt's reconciliation (Q29). operations (and
 * the archive, which repeats its columns) gain taken_at (the store's clock
 * at the last takeover: when a lookup began), lookups (the reconciler's
 * backoff index) and final_absence_after (from when "not found" may be
 * final: submit_by + the provider's skew and visibility delay; NULL:
 * never) — plain ADD COLUMNs, old rows NULL, 0, NULL. operation_events'
 * kind CHECK gains 'lookup' and the table a source column (late evidence);
 * payout_events' kind CHECK gains 'returned' and the table an evidence
 * column, with a unique partial index holding one return per payout.
 * SQLite cannot alter a CHECK, so both event tables are rebuilt as
 * migrations 7 and 9 rebuild them (every row copied, the AUTOINCREMENT
 * high-water mark kept, indexes and triggers again); operation_events
 * names operations, so its foreign keys are checked before the commit. */
#define SQ_OP_EVENTS_V11                                                      \
    "CREATE TABLE operation_events_v11 ("                                     \
    "  seq                INTEGER PRIMARY KEY AUTOINCREMENT,"                 \
    "  operation_id       TEXT    NOT NULL"                                   \
    "                     REFERENCES operations (operation_id),"              \
    "  at                 INTEGER NOT NULL,  /* store clock */"               \
    "  kind               TEXT    NOT NULL"                                   \
    "                     CHECK (kind IN ('outcome', 'takeover', 'resolved'," \
    "                       'started', 'lookup')),"                           \
    "  from_status        TEXT    NOT NULL CHECK (from_status IN " SQ_V7_STATUSES ")," \
    "  to_status          TEXT    NOT NULL CHECK (to_status IN " SQ_V7_STATUSES ")," \
    "  owner_version      INTEGER NOT NULL  /* after the event */"            \
    "                     CHECK (owner_version >= 1),"                        \
    "  reason             TEXT    CHECK (reason IS NULL OR"                   \
    "                       length(CAST(reason AS BLOB)) BETWEEN 1 AND 64),"  \
    "  provider_reference TEXT    CHECK (provider_reference IS NULL OR"       \
    "                       length(CAST(provider_reference AS BLOB))"         \
    "                         BETWEEN 1 AND 128),"                            \
    "  actor              TEXT    NOT NULL CHECK ("                           \
    "                       length(CAST(actor AS BLOB)) BETWEEN 1 AND 128),"  \
    "  evidence           TEXT    CHECK (evidence IS NULL OR"                 \
    "                       length(CAST(evidence AS BLOB)) BETWEEN 1 AND 1024)," \
    "  source             TEXT    CHECK (source IS NULL OR"                   \
    "                       source IN ('late-response', 'notification'))"     \
    ") STRICT;"                                                               \
    "INSERT INTO operation_events_v11 (" SQ_V7_EVENT_COLS ")"                 \
    "  SELECT " SQ_V7_EVENT_COLS " FROM operation_events ORDER BY seq;"       \
    "DELETE FROM sqlite_sequence WHERE name = 'operation_events_v11';"        \
    "INSERT INTO sqlite_sequence (name, seq)"                                 \
    "  SELECT 'operation_events_v11', seq FROM sqlite_sequence"               \
    "  WHERE name = 'operation_events';"                                      \
    "DROP TABLE operation_events;"                                            \
    "ALTER TABLE operation_events_v11 RENAME TO operation_events;"             \
    "CREATE INDEX operation_events_operation_idx"                             \
    "  ON operation_events (operation_id, seq);"
#define SQ_MIGRATION_11_OPS                                                   \
    "ALTER TABLE operations ADD COLUMN taken_at INTEGER;"                     \
    "ALTER TABLE operations ADD COLUMN lookups INTEGER NOT NULL DEFAULT 0"    \
    "  CHECK (lookups >= 0);"                                                 \
    "ALTER TABLE operations ADD COLUMN final_absence_after INTEGER;"          \
    "ALTER TABLE operations_archive ADD COLUMN taken_at INTEGER;"             \
    "ALTER TABLE operations_archive ADD COLUMN lookups INTEGER NOT NULL"      \
    "  DEFAULT 0;"                                                            \
    "ALTER TABLE operations_archive ADD COLUMN final_absence_after INTEGER;"  \
    "ALTER TABLE operation_events_archive ADD COLUMN source TEXT;"
#define SQ_MIGRATION_11_PAYOUT_EVENTS                                         \
    SQ_PAYOUT_EVENTS_TABLE_X("payout_events_v11",                            \
                             ", 'claimed', 'resolved', 'returned'",           \
                             ", evidence TEXT CHECK (evidence IS NULL OR"     \
                             " length(CAST(evidence AS BLOB))"                \
                             " BETWEEN 1 AND 1024)")                          \
    SQ_PAYOUT_EVENTS_REBUILD("payout_events_v11")                             \
    "CREATE UNIQUE INDEX payout_events_returned_key ON payout_events"         \
    "  (payout_id) WHERE kind = 'returned';"
/* Migration 12: fidelity (docs/payouts.md, sections 4 and 5).
 *  - A tenant's settlement time zone is an IANA name
 *    (og_payout_release_day), no longer a fixed offset: every existing
 *    tenant's offset becomes the zone of that fixed offset — 0 is "UTC",
 *    whole hours are the database's fixed zones "Etc/GMT-N" (UTC+N: the
 *    POSIX sign is inverted in these names) and "Etc/GMT+N" (UTC-N). An
 *    offset no such zone has (not whole hours, or below UTC-12) stops the
 *    migration (NOT NULL): set the tenant to a whole-hour offset first, then
 *    to its zone once migrated. The day a reservation was made for is kept
 *    on its binding; only later days follow the zone.
 *  - The payout policy's current release: one row per operation, seeded
 *    with this build's OG_PAYOUT_POLICY_VERSION; decisions and claims
 *    fence on it (og_payout_policy_release_get/_set). */
#define SQ_MIGRATION_12                                                       \
    "ALTER TABLE tenants ADD COLUMN settlement_time_zone TEXT NOT NULL"       \
    "  DEFAULT 'UTC'"                                                         \
    "  CHECK (length(CAST(settlement_time_zone AS BLOB)) BETWEEN 1 AND 64);"  \
    "UPDATE tenants SET settlement_time_zone = CASE"                          \
    "  WHEN settlement_offset_minutes = 0 THEN 'UTC'"                         \
    "  WHEN settlement_offset_minutes % 60 = 0"                               \
    "       AND settlement_offset_minutes BETWEEN -720 AND 840"               \
    "    THEN 'Etc/GMT' || CASE WHEN settlement_offset_minutes > 0"           \
    "                           THEN '-' ELSE '+' END"                        \
    "         || abs(settlement_offset_minutes / 60)"                         \
    "  ELSE NULL END;"                                                        \
    "ALTER TABLE tenants DROP COLUMN settlement_offset_minutes;"              \
    "CREATE TABLE payout_policy_releases ("                                   \
    "  operation       TEXT    NOT NULL PRIMARY KEY"                          \
    "                  CHECK (operation = '" OG_PAYOUT_OPERATION "'),"        \
    "  current_version TEXT    NOT NULL"                                      \
    "                  " SQ_PAYOUT_ID_CHECK("current_version") ","            \
    "  updated_at      INTEGER NOT NULL,  /* store clock */"                  \
    "  updated_by      TEXT    NOT NULL " SQ_PAYOUT_ID_CHECK("updated_by")    \
    ") STRICT, WITHOUT ROWID;"                                                \
    "INSERT INTO payout_policy_releases"                                      \
    "  VALUES ('" OG_PAYOUT_OPERATION "', '" OG_PAYOUT_POLICY_VERSION "',"    \
    "          " SQ_NOW ", 'migration-12');"

/* Migration 13: the archive's payout attempts by grant, for a return's
 * read of the payout's last attempt (og_payout_return_record; the live
 * ones by the (issuer, grant_id) key): without it each return read the
 * whole archive (docs/plans.md, "Payout return"). Partial: only payout
 * attempts. */
#define SQ_MIGRATION_13                                                       \
    "CREATE INDEX IF NOT EXISTS operations_archive_payout_grant_idx"          \
    "  ON operations_archive (issuer, grant_id) WHERE kind = 'payout';"

/* Migration 14: an approver's fresh decision names the pending
 * AcknowledgmentRequired or EscalationRecommended decision it settles, and
 * the destination version an acknowledgment covers (docs/payouts.md,
 * section 4, "Acknowledgment and escalation"). Unique where set: one
 * pending decision is settled once, whatever two approvers race. */
#define SQ_MIGRATION_14_DECISIONS                                             \
    "ALTER TABLE payout_decisions ADD COLUMN settles_decision_id TEXT"        \
    "  CHECK (settles_decision_id IS NULL OR"                                 \
    "         length(settles_decision_id) = 36);"                             \
    "ALTER TABLE payout_decisions"                                            \
    "  ADD COLUMN acknowledged_destination_version INTEGER"                   \
    "  CHECK (acknowledged_destination_version IS NULL OR"                    \
    "         acknowledged_destination_version >= 1);"                        \
    "CREATE UNIQUE INDEX payout_decisions_settles_idx"                        \
    "  ON payout_decisions (settles_decision_id)"                             \
    "  WHERE settles_decision_id IS NOT NULL;"
/* ... and a Draft's terms are edited (og_payout_edit): payout_events' kind
 * CHECK gains 'edited'. SQLite cannot alter a CHECK, so the table is
 * rebuilt as migration 11 rebuilt it (every row and its evidence copied,
 * the AUTOINCREMENT high-water mark kept, indexes and triggers again). */
#define SQ_MIGRATION_14_PAYOUT_EVENTS                                         \
    SQ_PAYOUT_EVENTS_TABLE_X("payout_events_v14",                            \
                             ", 'claimed', 'resolved', 'returned', 'edited'", \
                             ", evidence TEXT CHECK (evidence IS NULL OR"     \
                             " length(CAST(evidence AS BLOB))"                \
                             " BETWEEN 1 AND 1024)")                          \
    SQ_PAYOUT_EVENTS_REBUILD_COLS("payout_events_v14",                       \
                                  SQ_PAYOUT_EVENT_COLS ", evidence")          \
    "CREATE UNIQUE INDEX payout_events_returned_key ON payout_events"         \
    "  (payout_id) WHERE kind = 'returned';"

/* Migration 15: the admission writes fewer index entries (docs/performance.md,
 * "The admission statement, part by part (SLIM)"), as PostgreSQL's
 * migration 15. operations_recovery_idx (lease_until, partial on the owned
 * statuses) is dropped: operations_recovery_scan_idx (status, lease_until)
 * has the same predicate and serves every statement that repeats it (Q17;
 * the takeover reads by primary key). operations_backlog_idx holds the
 * statuses SQ_BACKLOG only — every status but Admitted and Started, whose
 * rows the recovery scan index holds — and og__sq_op_list_sql repeats
 * that predicate for a set within it, as it repeats SQ_OWNED. An admission
 * inserts into the recovery scan index alone of the three. */
#define SQ_MIGRATION_15                                                       \
    "DROP INDEX operations_recovery_idx;"                                     \
    "DROP INDEX operations_backlog_idx;"                                      \
    "CREATE INDEX operations_backlog_idx ON operations (status, created_at)"  \
    "  WHERE status IN " SQ_BACKLOG ";"

static const sq_migration sq_migrations[] = {
    {1, "grant_consumptions and operations (token form)",
     /* One row per claimed grant key, by an admission or a revocation. */
     SQ_STEPS("CREATE TABLE grant_consumptions ("
     "  issuer       TEXT    NOT NULL"
     "               CHECK (length(CAST(issuer AS BLOB)) BETWEEN 1 AND 128),"
     "  grant_id     TEXT    NOT NULL"
     "               CHECK (length(CAST(grant_id AS BLOB)) BETWEEN 1 AND 128),"
     "  operation_id TEXT    CHECK (operation_id IS NULL OR length(operation_id) = 36),"
     "                       /* NULL only for a revocation holding this key */"
     "  consumed_at  INTEGER NOT NULL,  /* when the key was claimed */"
     "  retain_until INTEGER NOT NULL,  /* expires_at + admission leeway */"
     "  PRIMARY KEY (issuer, grant_id)  /* the atomic check */"
     ") STRICT, WITHOUT ROWID;"
     "CREATE INDEX grant_consumptions_retain_until_idx"
     "  ON grant_consumptions (retain_until);"
     "CREATE TABLE operations ("
     "  operation_id  TEXT    NOT NULL PRIMARY KEY CHECK (length(operation_id) = 36),"
     "  issuer        TEXT    NOT NULL,"
     "  grant_id      TEXT    NOT NULL,"
     "  caller_id     TEXT    NOT NULL"
     "                CHECK (length(CAST(caller_id AS BLOB)) BETWEEN 1 AND 128),"
     "  account_id    TEXT    NOT NULL"
     "                CHECK (length(CAST(account_id AS BLOB)) BETWEEN 1 AND 128),"
     "  amount        TEXT    NOT NULL  /* canonical decimal, never REAL */"
     "                CHECK (amount GLOB '[0-9]*' AND amount NOT GLOB '*[^0-9.]*'),"
     "  currency      TEXT    NOT NULL"
     "                CHECK (length(currency) = 3 AND currency NOT GLOB '*[^A-Z]*'),"
     "  status        TEXT    NOT NULL CHECK (status IN ('Admitted', 'Succeeded',"
     "                  'Failed', 'Unknown', 'NeedsReconciliation')),"
     "  owner_version INTEGER NOT NULL CHECK (owner_version >= 1),"
     "  lease_until   INTEGER NOT NULL,"
     "  submit_by     INTEGER NOT NULL,  /* latest time a create may be sent */"
     "  created_at    INTEGER NOT NULL,"
     "  CONSTRAINT operations_grant_key UNIQUE (issuer, grant_id)"
     "                                   /* one operation per grant */"
     ") STRICT, WITHOUT ROWID;"
     "CREATE INDEX operations_recovery_idx ON operations (lease_until)"
     "  WHERE status IN ('Admitted', 'Unknown');"), NULL, NULL},
    {2, "claim kinds, families, issuance log, grant rows, tickets",
     /* What holds a claimed key: an admission (operation_id set), a
      * revocation, or the consume verdict. */
     SQ_STEPS("ALTER TABLE grant_consumptions ADD COLUMN kind TEXT NOT NULL"
     "  DEFAULT 'admission'"
     "  CHECK (kind IN ('admission', 'revocation', 'consume'));"
     "UPDATE grant_consumptions SET kind = 'revocation'"
     "  WHERE operation_id IS NULL;"
     /* Q7: PostgreSQL's grant_consumptions_kind_check2, as triggers. */
     "CREATE TRIGGER grant_consumptions_kind_check2_insert"
     "  BEFORE INSERT ON grant_consumptions"
     "  WHEN (NEW.kind = 'admission') <> (NEW.operation_id IS NOT NULL)"
     "  BEGIN SELECT RAISE(ABORT, 'grant_consumptions_kind_check2'); END;"
     "CREATE TRIGGER grant_consumptions_kind_check2_update"
     "  BEFORE UPDATE OF kind, operation_id ON grant_consumptions"
     "  WHEN (NEW.kind = 'admission') <> (NEW.operation_id IS NOT NULL)"
     "  BEGIN SELECT RAISE(ABORT, 'grant_consumptions_kind_check2'); END;"
     /* One row per (issuer, family): what admissions, consumes, issuance and
      * tickets read and family revocation updates (Q5). */
     "CREATE TABLE families ("
     "  issuer     TEXT    NOT NULL"
     "             CHECK (length(CAST(issuer AS BLOB)) BETWEEN 1 AND 128),"
     "  family     TEXT    NOT NULL"
     "             CHECK (length(CAST(family AS BLOB)) BETWEEN 1 AND 128),"
     "  created_at INTEGER NOT NULL,"
     "  revoked_at INTEGER,"
     "  PRIMARY KEY (issuer, family)"
     ") STRICT, WITHOUT ROWID;"
     /* The issuance log: proof of issuance and the trusted expiry that
      * revocation needs. */
     "CREATE TABLE grant_issuance ("
     "  issuer        TEXT    NOT NULL"
     "                CHECK (length(CAST(issuer AS BLOB)) BETWEEN 1 AND 128),"
     "  grant_id      TEXT    NOT NULL"
     "                CHECK (length(CAST(grant_id AS BLOB)) BETWEEN 1 AND 128),"
     "  family        TEXT    CHECK (family IS NULL OR"
     "                  length(CAST(family AS BLOB)) BETWEEN 1 AND 128),"
     "  subject       TEXT    NOT NULL"
     "                CHECK (length(CAST(subject AS BLOB)) BETWEEN 1 AND 128),"
     "  action        TEXT    NOT NULL"
     "                CHECK (length(CAST(action AS BLOB)) BETWEEN 1 AND 128),"
     "  params_digest TEXT    NOT NULL  /* SHA-256, 64 lower-case hex */"
     "                CHECK (length(params_digest) = 64 AND"
     "                       params_digest NOT GLOB '*[^0-9a-f]*'),"
     "  issued_at     INTEGER NOT NULL,"
     "  expires_at    INTEGER,          /* NULL: fallback retention */"
     "  form          TEXT    NOT NULL CHECK (form IN ('token', 'row')),"
     "  recorded_at   INTEGER NOT NULL, /* store clock */"
     "  PRIMARY KEY (issuer, grant_id),"
     "  FOREIGN KEY (issuer, family) REFERENCES families (issuer, family)"
     ") STRICT, WITHOUT ROWID;"
     "CREATE INDEX grant_issuance_family_idx ON grant_issuance (issuer, family)"
     "  WHERE family IS NOT NULL;"
     /* Row form: issued grants as rows; the row's expires_at is trusted. */
     "CREATE TABLE grants ("
     "  issuer                TEXT    NOT NULL"
     "                        CHECK (length(CAST(issuer AS BLOB)) BETWEEN 1 AND 128),"
     "  grant_id              TEXT    NOT NULL"
     "                        CHECK (length(CAST(grant_id AS BLOB)) BETWEEN 1 AND 128),"
     "  family                TEXT    CHECK (family IS NULL OR"
     "                          length(CAST(family AS BLOB)) BETWEEN 1 AND 128),"
     "  expires_at            INTEGER NOT NULL,"
     "  revoked_at            INTEGER,"
     "  consumed_at           INTEGER,"
     "  consumed_by_operation TEXT    /* NULL with consumed_at: the verdict */"
     "                        CHECK (consumed_by_operation IS NULL OR"
     "                          (length(consumed_by_operation) = 36 AND"
     "                           consumed_at IS NOT NULL)),"
     "  PRIMARY KEY (issuer, grant_id)"
     ") STRICT, WITHOUT ROWID;"
     "CREATE INDEX grants_family_idx ON grants (issuer, family)"
     "  WHERE family IS NOT NULL;"
     /* Tickets by SHA-256 of their text, never the text. A rotated ticket
      * stays, so that presenting it again is recognised as reuse (M15). */
     "CREATE TABLE tickets ("
     "  ticket_hash TEXT    NOT NULL PRIMARY KEY"
     "              CHECK (length(ticket_hash) = 64 AND"
     "                     ticket_hash NOT GLOB '*[^0-9a-f]*'),"
     "  issuer      TEXT    NOT NULL,"
     "  family      TEXT    NOT NULL,"
     "  created_at  INTEGER NOT NULL,"
     "  rotated_at  INTEGER,"
     "  FOREIGN KEY (issuer, family) REFERENCES families (issuer, family)"
     ") STRICT, WITHOUT ROWID;"), NULL, NULL},
    {3, "execution: outcomes, provider references, operation history",
     /* M20: updated_at stays NULL until the first status change and is read
      * as created_at, so admission stays ONE insert and old rows need no
      * backfill. */
     SQ_STEPS("ALTER TABLE operations ADD COLUMN updated_at INTEGER;"
     "ALTER TABLE operations ADD COLUMN provider_reference TEXT"
     "  CHECK (provider_reference IS NULL OR"
     "         length(CAST(provider_reference AS BLOB)) BETWEEN 1 AND 128);"
     "ALTER TABLE operations ADD COLUMN outcome_reason TEXT"
     "  CHECK (outcome_reason IS NULL OR"
     "         length(CAST(outcome_reason AS BLOB)) BETWEEN 1 AND 64);"
     /* Recovery's scan (Q17): expired leases among the owned statuses. */
     "CREATE INDEX operations_recovery_scan_idx"
     "  ON operations (status, lease_until)"
     "  WHERE status IN ('Admitted', 'Unknown');"
     /* The operators' backlog, oldest first, by status. */
     "CREATE INDEX operations_backlog_idx ON operations (status, created_at);"
     /* One row per execution write (Q14); admission writes none: its event
      * is read from the operation itself. */
     "CREATE TABLE operation_events ("
     "  seq                INTEGER PRIMARY KEY AUTOINCREMENT,"
     "  operation_id       TEXT    NOT NULL"
     "                     REFERENCES operations (operation_id),"
     "  at                 INTEGER NOT NULL,  /* store clock */"
     "  kind               TEXT    NOT NULL"
     "                     CHECK (kind IN ('outcome', 'takeover', 'resolved')),"
     "  from_status        TEXT    NOT NULL CHECK (from_status IN ('Admitted',"
     "                       'Succeeded', 'Failed', 'Unknown',"
     "                       'NeedsReconciliation')),"
     "  to_status          TEXT    NOT NULL CHECK (to_status IN ('Admitted',"
     "                       'Succeeded', 'Failed', 'Unknown',"
     "                       'NeedsReconciliation')),"
     "  owner_version      INTEGER NOT NULL  /* after the event */"
     "                     CHECK (owner_version >= 1),"
     "  reason             TEXT    CHECK (reason IS NULL OR"
     "                       length(CAST(reason AS BLOB)) BETWEEN 1 AND 64),"
     "  provider_reference TEXT    CHECK (provider_reference IS NULL OR"
     "                       length(CAST(provider_reference AS BLOB))"
     "                         BETWEEN 1 AND 128),"
     "  actor              TEXT    NOT NULL CHECK ("
     "                       length(CAST(actor AS BLOB)) BETWEEN 1 AND 128),"
     "  evidence           TEXT    CHECK (evidence IS NULL OR"
     "                       length(CAST(evidence AS BLOB)) BETWEEN 1 AND 1024)"
     ") STRICT;"
     "CREATE INDEX operation_events_operation_idx"
     "  ON operation_events (operation_id, seq);"), NULL, NULL},
    {4, "retention: operations and events archives, terminal index",
     /* Finished operations and their history, on their own schedule
      * (Q21): the same columns plus archived_at (store clock), without the
      * checks a live row needs. seq is never reused (AUTOINCREMENT), so it
      * stays a key in the archive. */
     SQ_STEPS("CREATE TABLE operations_archive ("
     "  operation_id       TEXT    NOT NULL PRIMARY KEY,"
     "  issuer             TEXT    NOT NULL,"
     "  grant_id           TEXT    NOT NULL,"
     "  caller_id          TEXT    NOT NULL,"
     "  account_id         TEXT    NOT NULL,"
     "  amount             TEXT    NOT NULL,"
     "  currency           TEXT    NOT NULL,"
     "  status             TEXT    NOT NULL"
     "                     CHECK (status IN ('Succeeded', 'Failed')),"
     "  owner_version      INTEGER NOT NULL,"
     "  lease_until        INTEGER NOT NULL,"
     "  submit_by          INTEGER NOT NULL,"
     "  created_at         INTEGER NOT NULL,"
     "  updated_at         INTEGER,"
     "  provider_reference TEXT,"
     "  outcome_reason     TEXT,"
     "  archived_at        INTEGER NOT NULL"
     ") STRICT, WITHOUT ROWID;"
     "CREATE TABLE operation_events_archive ("
     "  seq                INTEGER PRIMARY KEY,"
     "  operation_id       TEXT    NOT NULL,"
     "  at                 INTEGER NOT NULL,"
     "  kind               TEXT    NOT NULL,"
     "  from_status        TEXT    NOT NULL,"
     "  to_status          TEXT    NOT NULL,"
     "  owner_version      INTEGER NOT NULL,"
     "  reason             TEXT,"
     "  provider_reference TEXT,"
     "  actor              TEXT    NOT NULL,"
     "  evidence           TEXT,"
     "  archived_at        INTEGER NOT NULL"
     ") STRICT;"
     "CREATE INDEX operation_events_archive_operation_idx"
     "  ON operation_events_archive (operation_id, seq);"
     /* The archive job's scan, in its total order (Q21). */
     "CREATE INDEX operations_terminal_idx"
     "  ON operations (coalesce(updated_at, created_at), operation_id)"
     "  WHERE status IN ('Succeeded', 'Failed');"), NULL, NULL},
    {5, "settings: consumption keys (readable or hashed)",
     SQ_STEPS(SQ_MIGRATION_5("readable", "")),
     SQ_STEPS(SQ_MIGRATION_5("hashed", SQ_HASHED_CONSUMPTIONS)), NULL},
    /* Touches no table of migrations 4 and 5: readable and hashed stores
     * get the same table, keyed by (caller, idempotency key), never by a
     * grant's consumption key. */
    {6, "redemption recovery points",
     /* M26: one sealed result per (caller, idempotency key); the token is
      * kept only as its SHA-256. A rowid table: a row holds up to 64 KiB,
      * too large for WITHOUT ROWID's clustered pages. */
     SQ_STEPS("CREATE TABLE redemptions ("
     "  caller          TEXT    NOT NULL"
     "                  CHECK (length(CAST(caller AS BLOB)) BETWEEN 1 AND 128),"
     "  idempotency_key TEXT    NOT NULL"
     "                  CHECK (length(CAST(idempotency_key AS BLOB))"
     "                         BETWEEN 1 AND 128),"
     "  code_hash       TEXT    NOT NULL  /* SHA-256 of the token, hex */"
     "                  CHECK (length(code_hash) = 64 AND"
     "                         code_hash NOT GLOB '*[^0-9a-f]*'),"
     "  nonce           BLOB    NOT NULL CHECK (length(nonce) = 24),"
     "  sealed          BLOB    NOT NULL  /* ciphertext and tag */"
     "                  CHECK (length(sealed) BETWEEN 17 AND 65552),"
     "  created_at      INTEGER NOT NULL,"
     "  PRIMARY KEY (caller, idempotency_key)  /* the first writer wins */"
     ") STRICT;"
     "CREATE INDEX redemptions_code_idx ON redemptions (code_hash);"),
     NULL, NULL},
    {7, "operation kinds, idempotency keys, client references; statuses "
        "Started, NotStarted, NotApplied",
     SQ_STEPS(SQ_MIGRATION_7), NULL, "operation_events"},
    {8, "payouts: context, decisions, grants' bindings, reservations, jobs",
     SQ_STEPS(SQ_MIGRATION_8), NULL, NULL},
    {9, "payouts: the claim's history entry", SQ_STEPS(SQ_MIGRATION_9), NULL,
     NULL},
    {10, "payouts: the resolution's release causes and history entry",
     SQ_STEPS(SQ_MIGRATION_10), NULL, "payout_jobs"},
    {11, "payouts: takeover instant, lookups, final absence, late evidence, "
         "returns",
     SQ_STEPS(SQ_MIGRATION_11_OPS, SQ_OP_EVENTS_V11,
              SQ_MIGRATION_11_PAYOUT_EVENTS),
     NULL, "operation_events"},
    {12, "payouts: settlement time zones; the policy's current release",
     SQ_STEPS(SQ_MIGRATION_12), NULL, NULL},
    {13, "payouts: archived attempts by grant (returns)",
     SQ_STEPS(SQ_MIGRATION_13), NULL, NULL},
    {14, "payouts: approvals settle acknowledgments and escalations; "
         "drafts are edited",
     SQ_STEPS(SQ_MIGRATION_14_DECISIONS, SQ_MIGRATION_14_PAYOUT_EVENTS), NULL,
     NULL},
    {15, "admission: the backlog index without the statuses in flight; one "
         "recovery index",
     SQ_STEPS(SQ_MIGRATION_15), NULL, NULL},
};
_Static_assert(sizeof sq_migrations / sizeof sq_migrations[0] ==
                   OG_SCHEMA_VERSION,
               "one SQLite migration per schema version");

/* ===========================================================================
 * Schema version and migrations
 * ========================================================================= */

/* Whether the migrations' own table exists, and the version it records. */
static const char sq_schema_table_sql[] =
    "SELECT count(*) FROM sqlite_schema"
    " WHERE type = 'table' AND name = 'og_schema_migrations'";
enum { SCHEMA_TABLE_COUNT, SCHEMA_TABLE_NCOLS };
static const char sq_schema_version_sql[] =
    "SELECT coalesce(max(version), 0) FROM og_schema_migrations";
enum { SCHEMA_VERSION_VERSION, SCHEMA_VERSION_NCOLS };

/* Version on an open connection: 0 when never migrated. */
static int sq_version_on(sqlite3 *db, int *version)
{
    sqlite3_stmt *st = NULL;
    int rc, v = 0, present;

    rc = sqlite3_prepare_v2(db, sq_schema_table_sql, -1, &st, NULL);
    if (rc != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW)
        goto fail;
    present = sqlite3_column_int(st, SCHEMA_TABLE_COUNT);
    sqlite3_finalize(st);
    st = NULL;
    if (present) {
        rc = sqlite3_prepare_v2(db, sq_schema_version_sql, -1, &st, NULL);
        if (rc != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW)
            goto fail;
        v = sqlite3_column_int(st, SCHEMA_VERSION_VERSION);
        sqlite3_finalize(st);
    }
    *version = v;
    return 0;
fail:
    rc = og__sqlite_classify(sqlite3_extended_errcode(db));
    sqlite3_finalize(st);
    return rc;
}

int og__sq_schema_version(void *impl, int *version)
{
    og__sq_store *s = impl;
    og__sq_conn *c;
    int rc;

    /* A store that does not exist yet has never been migrated. */
    if (access(s->path, F_OK) != 0) {
        *version = 0;
        return 0;
    }
    if ((rc = og__sq_acquire(s, &c)) < 0)
        return rc;
    rc = sq_version_on(c->db, version);
    og__sq_release(s, c, rc < 0);
    return rc;
}

/* PRAGMA foreign_key_check(table) on db: 0 when it reports no row,
 * OG_EINTERNAL when it does (a migration broke a reference: a defect, and
 * the migration is rolled back), or the error. */
static int sq_fk_check(sqlite3 *db, const char *table)
{
    char *sql = sqlite3_mprintf("PRAGMA foreign_key_check(\"%w\")", table);
    sqlite3_stmt *st = NULL;
    int rc;

    if (!sql)
        return OG_ENOMEM;
    rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    sqlite3_free(sql);
    if (rc != SQLITE_OK)
        return og__sqlite_classify(sqlite3_extended_errcode(db));
    rc = sqlite3_step(st);
    rc = rc == SQLITE_DONE  ? 0
         : rc == SQLITE_ROW ? OG_EINTERNAL
                            : og__sqlite_classify(sqlite3_extended_errcode(db));
    sqlite3_finalize(st);
    return rc;
}

/* The migrator's start: foreign keys off (see og__sq_migrate), the write
 * lock, the migrations' own table. */
static const char sq_migrate_begin_sql[] =
    "PRAGMA foreign_keys=OFF;"
    "BEGIN IMMEDIATE;"
    "CREATE TABLE IF NOT EXISTS og_schema_migrations ("
    "  version     INTEGER PRIMARY KEY,"
    "  description TEXT    NOT NULL,"
    "  applied_at  INTEGER NOT NULL) STRICT;";
/* One migration applied: ?1 version, ?2 description. */
static const char sq_migration_record_sql[] =
    "INSERT INTO og_schema_migrations"
    " (version, description, applied_at)"
    " VALUES (?1, ?2, " SQ_NOW ")";

int og__sq_migrate(void *impl, og_consumption_keys keys, int target,
                   int *from, int *to)
{
    og__sq_store *s = impl;
    sqlite3 *db = NULL;
    int rc, v = 0;
    size_t i;

    if ((rc = og__sq_open_db(s, true, &db)) < 0)
        return rc;
    /* A migration that rebuilds a table drops it while another table's
     * foreign key names it; with the keys enforced the drop would fail
     * (or delete). So this connection, which runs migrations only, turns
     * them off — outside the transaction, where the pragma works — and
     * each such migration checks its table's keys before the commit
     * (sq_migration.fk_check; Q18). BEGIN IMMEDIATE serializes concurrent
     * migrators; each re-reads the version under the lock. */
    if (sqlite3_exec(db, sq_migrate_begin_sql, NULL, NULL, NULL) != SQLITE_OK)
        goto fail;
    if ((rc = sq_version_on(db, &v)) < 0)
        goto out;
    *from = v;
    if (v > OG_SCHEMA_VERSION) {
        rc = OG_ESCHEMA; /* a newer build migrated this store */
        goto out;
    }
    for (i = 0; i < sizeof sq_migrations / sizeof sq_migrations[0]; i++) {
        const sq_migration *m = &sq_migrations[i];
        const char *const *step;
        sqlite3_stmt *st = NULL;

        if (m->version <= v || m->version > target)
            continue;
        for (step = keys == OG_KEYS_HASHED && m->sql_hashed ? m->sql_hashed
                                                            : m->sql;
             *step; step++)
            if (sqlite3_exec(db, *step, NULL, NULL, NULL) != SQLITE_OK)
                goto fail;
        if (m->fk_check && (rc = sq_fk_check(db, m->fk_check)) < 0)
            goto out;
        if (sqlite3_prepare_v2(db, sq_migration_record_sql, -1, &st, NULL) !=
            SQLITE_OK)
            goto fail;
        sqlite3_bind_int(st, 1, m->version);
        sqlite3_bind_text(st, 2, m->description, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE)
            goto fail;
        v = m->version;
    }
    if (v != target) {
        rc = OG_ESCHEMA; /* beyond target already (tests' og__store_migrate_to) */
        goto out;
    }
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        goto fail;
    *to = v;
    rc = 0;
    goto out;
fail:
    rc = og__sqlite_classify(sqlite3_extended_errcode(db));
out:
    if (!sqlite3_get_autocommit(db))
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(db);
    return rc;
}

/* The store's one settings row (migration 5). */
static const char sq_read_keys_sql[] =
    "SELECT consumption_keys FROM og_store_settings";
enum { READ_KEYS_KEYS, READ_KEYS_NCOLS };

/* The consumption keys the store records (Q6); the store object runs that
 * mode's statements from now on. */
int og__sq_read_keys(void *impl, og_consumption_keys *keys)
{
    og__sq_store *s = impl;
    og_consumption_keys k = OG_KEYS_READABLE;
    sqlite3_stmt *st;
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_acquire(s, &c)) < 0)
        return rc;
    if ((rc = og__sq_stmt(c, sq_read_keys_sql, &st)) == 0) {
        if ((rc = og__sq_step(c, st)) == 1)
            rc = og_consumption_keys_parse(
                     (const char *)sqlite3_column_text(st, READ_KEYS_KEYS),
                     &k) < 0
                     ? OG_EINTERNAL
                     : 0;
        else if (rc == 0)
            rc = OG_EINTERNAL; /* migration 5 writes the row */
        sqlite3_reset(st);
    }
    og__sq_release(s, c, false);
    if (rc < 0)
        return rc;
    s->keys = k;
    *keys = k;
    return 0;
}
