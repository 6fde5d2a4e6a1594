/*
 * sqlite.c — the embedded store: SQLite in WAL mode, one host, any number of
 * threads and processes on one file.
 *
 * SQLite has no data-modifying CTEs, so the admission is ONE write
 * transaction (BEGIN IMMEDIATE … COMMIT) holding the claim and the operation
 * insert — see sq_admit() — and so is every grant-lifecycle call (Q8). The
 * claim is the insert into grant_consumptions (token form) or the
 * conditional UPDATE of the grant's row (row form). Invariants this file
 * protects:
 *
 *   Q1  One writer at a time: BEGIN IMMEDIATE takes the database's write lock
 *       before the claim reads anything, so two connections — in one process
 *       or two — can never both see the key as free. The PRIMARY KEY on
 *       grant_consumptions is the atomic check inside that lock.
 *   Q2  The claim and the operation insert commit together or not at all: a
 *       unique violation on operations rolls the claim back (REFUSED).
 *   Q3  The deadline is checked in the claim itself against SQLite's clock
 *       ('now' is fixed for the duration of one sqlite3_step, like
 *       statement_timestamp()); lease_until, submit_by and created_at come
 *       from a later 'now', when the operation row is written (like
 *       clock_timestamp()).
 *   Q4  Durable before ADMITTED: WAL with synchronous=FULL fsyncs the WAL at
 *       every commit, and ADMITTED is returned only after COMMIT returned
 *       SQLITE_OK. A busy database past busy_timeout, an I/O error or a
 *       commit that fails is OG_ESTORE_UNAVAILABLE, never REFUSED.
 *   Q5  Amounts are canonical decimal TEXT — never REAL — so equality is exact.
 *   Q6  A connection whose transaction state is unknown (ROLLBACK failed) is
 *       closed, never reused.
 *   Q7  Every wait is bounded by the store timeout, measured from the start
 *       of the call: the admissions of one store object queue for group
 *       commit (see "Group commit"; a waiting thread is woken, it does not
 *       poll), and the cross-process wait for SQLite's write lock polls with
 *       short jittered sleeps (sq_busy) until the same deadline. SQLite's default
 *       handler sleeps up to 100 ms between polls, which starved waiters past
 *       their timeout under 16+ concurrent callers.
 *   Q8  Every grant-lifecycle call — issuance, revocation, family
 *       revocation, the consume verdict, ticket creation and rotation — is
 *       ONE BEGIN IMMEDIATE transaction on a pool connection holding all its
 *       statements (sq_begin/sq_end), with the admission's deadline (Q7).
 *       What it reads and what it writes are one state: no other writer runs
 *       in between (Q1). An outcome that wrote nothing rolls back; any other
 *       is answered only after COMMIT returned SQLITE_OK.
 *   Q9  Family ordering. An admission, consume, issuance, ticket creation or
 *       rotation in a family reads the family's row inside its write
 *       transaction and claims or writes only when the row exists with
 *       revoked_at NULL; a family revocation marks that row and revokes the
 *       family's live grants in its own write transaction. The write lock
 *       orders them: an admission committed first holds its key and is not
 *       in the revocation's list; one that runs after is refused
 *       (family_blocked). PostgreSQL gets the same order from FOR SHARE on
 *       the family's row.
 *   Q10 kind = 'admission' exactly when operation_id is set. SQLite cannot add
 *       migration 2's table CHECK to an existing table, so two triggers abort
 *       any write that breaks it (a defect: OG_EINTERNAL). A hashed store's
 *       table is created by migration 5 and carries the CHECK itself.
 *   Q11 Presenting a rotated ticket is theft: the family is revoked in the
 *       same transaction that saw the reuse, before the reuse is answered.
 *   Q12 The fallback revocation retention (now + max grant lifetime + issue
 *       skew + leeway) is computed by a statement that runs after the write
 *       lock was taken, so a lock wait never shortens it (PostgreSQL's
 *       clock_timestamp()).
 *   Q13 Every execution write — a payout's start (sq_op_start), an
 *       outcome (sq_op_record), recovery's takeover, an operator's
 *       resolution — is ONE BEGIN IMMEDIATE
 *       transaction (sq_begin/sq_end) holding the conditional UPDATE of the
 *       operation and the INSERT of its operation_events row: both commit or
 *       neither does. An UPDATE that hits no row rolls back, so a stale
 *       writer leaves neither a change nor an event. An outcome's from_status
 *       is read in the same transaction, under the write lock (Q1), so it is
 *       the status the UPDATE replaced.
 *   Q14 Each UPDATE names the state it expects, and the owner version where
 *       the protocol has one: an outcome requires status IN the expected set
 *       AND owner_version = v, and its statement can only ever name
 *       'Admitted', 'Started' and 'Unknown' (other bits are never bound), so
 *       Succeeded, Failed, NotStarted, NotApplied and NeedsReconciliation
 *       are never overwritten by an owner; a start requires Admitted AND
 *       owner_version = v AND lease_until and submit_by ahead (Q25); a
 *       takeover requires Admitted/Started/Unknown AND lease_until < now AND
 *       owner_version = v; a resolution requires NeedsReconciliation. A
 *       takeover and a resolution raise owner_version, fencing every writer
 *       that still expects the old one — a start included; an outcome and a
 *       start keep it.
 *   Q15 One clock, one instant per statement: SQLite's 'now' is fixed for
 *       one sqlite3_step, so a takeover's expiry test, its new lease_until
 *       (now + the store's recovery_lease) and its event's time are the same
 *       instant, as are an outcome's or a resolution's updated_at and the
 *       event's at (taken from RETURNING, never from this process's clock).
 *   Q16 op_may_submit is a read (no transaction; one SELECT is one WAL
 *       snapshot) of owner_version = v AND now < min(lease_until,
 *       submit_by) on SQLite's clock AND status IN (Admitted, Unknown) for a
 *       credit, Started for a payout (Q25). Any error is returned, never
 *       turned into "yes".
 *   Q17 operations.updated_at is NULL until the first status change and is
 *       read as created_at, so admission stays ONE insert (no event row,
 *       no new column written) and migration 3 needs no backfill. A takeover
 *       leaves it unchanged: it tracks status changes.
 *   Q18 op_list's statement is assembled from fixed fragments and the fixed
 *       status names, never from caller text (the bound and the limit are
 *       parameters), and so is the kind. When the status set lies within
 *       Admitted/Started/Unknown, the recovery scan index's predicate
 *       (SQ_OWNED) is repeated verbatim: SQLite uses a partial index only
 *       when the query's WHERE implies the index's.
 *   Q19 A refusal record outlives every admission that could still commit:
 *       cleanup (SQ_CLEANUP) deletes a grant_consumptions row only where
 *       retain_until < now - cleanup_margin on SQLite's clock, the clock the
 *       claim decided its deadline on (Q3), re-checked on the row it
 *       deletes. Here an admission cannot even be delayed between its
 *       deadline check and its commit behind a delete: both hold the write
 *       lock (Q1) for their whole transaction. The margin (T9) covers
 *       clock steps on the host.
 *   Q20 Cleanup deletes grant_consumptions rows and nothing else: at most
 *       `batch` rows per BEGIN IMMEDIATE transaction, picked oldest first
 *       over grant_consumptions_retain_until_idx by their primary key (the
 *       table has no rowid; (issuer, grant_id), or key_hash in a hashed
 *       store, Q23), so admissions wait for one short batch at most.
 *   Q21 Archiving takes terminal operations only (SQ_TERMINAL: Succeeded,
 *       Failed, NotStarted, NotApplied; no writer expects them, so they
 *       never change again) and moves or deletes each with its events in
 *       ONE BEGIN IMMEDIATE transaction. The batch is one fixed set: every
 *       statement of the transaction selects it with the same bound cutoff
 *       (read once from SQLite's clock) and a total order (last change,
 *       then id), under the write lock. Admitted, Started, Unknown and
 *       NeedsReconciliation stay.
 *   Q22 An archived operation still answers for its id: the claim requires
 *       that operations_archive does not hold the request's operation id,
 *       and the follow-up read finds the operation in operations, else in
 *       operations_archive, so a same-operation retry is ALREADY_ADMITTED
 *       with the archived record and another grant under the id is refused
 *       (OPERATION_ID_TAKEN). Exact here: the write lock orders the archive
 *       and the admission.
 *   Q23 Consumption keys (schema 5). A readable store keys grant_consumptions
 *       by (issuer, grant_id); a hashed one by key_hash =
 *       og_consumption_key(issuer, grant_id) alone, its PRIMARY KEY and ON
 *       CONFLICT target, and keeps no identifier in the table (operations
 *       keep them). The mode is read from og_store_settings once per store
 *       object (sq_read_keys) and picks one of two variants of each
 *       statement that touches the table (SQ_KEYED); both variants come
 *       from ONE template (SQ_CLAIM_SQL(K), SQ_READ_CONSUMPTION_SQL(K),
 *       SQ_REVOKE_TOKEN_SQL(K), SQ_CLEANUP_SQL(K)), so Q1-Q3, Q8, Q9, Q12
 *       and the retention invariants Q19, Q20 and Q22 (the claim's
 *       archived-id condition is in the template) hold for both
 *       unchanged; the operation archives keep identifiers, as operations
 *       do, and are the same in both modes. A family's revocation, whose
 *       readable statement RETURNs the grant ids a hashed table does not
 *       have, lists the family's grants and claims each key in the same
 *       write transaction (sq_family_claim_hashed). Every key SQLite stores or looks up is
 *       computed by SQL through og_consumption_key(), which is the C
 *       function of lib/core/consumption_key.c registered on every
 *       connection (sq_open_db): one implementation, for bound parameters,
 *       the issuance log's ids and migration 5's rewrite alike.
 *   Q24 A redemption recovery point is written by ONE autocommit INSERT ...
 *       ON CONFLICT (caller, idempotency_key) DO NOTHING: the first writer
 *       of a key wins and nothing ever overwrites it; "inserted" is
 *       reported only after the statement completed, i.e. committed (Q4).
 *       The read is ONE SELECT (one WAL snapshot) answering both "the key's
 *       own point" and "the same code under another key", so the two can
 *       never come from different states. The store holds only sealed
 *       bytes and the token's SHA-256.
 *   Q25 Operation kinds (schema 7). An operation is a credit (admission's:
 *       kind's DEFAULT, so SQ_INSERT_OP writes no new column) or a payout
 *       attempt; a NULL idempotency key or client reference reads as the
 *       operation id. A payout is sent only once Started (P1): OP_START is
 *       the one write to Started — an Admitted payout at the owner's
 *       version whose lease_until and submit_by are ahead of the step's
 *       'now' —, OP_MAY_SUBMIT says yes for a payout only in Started, and
 *       OP_RECORD writes NotStarted only for a payout whose owner version a
 *       takeover raised (P2). The rebuilt operations table holds both rules
 *       as CHECKs too. Migration 7 rebuilds operations, operation_events
 *       and operations_archive (SQLite cannot alter a CHECK) in the
 *       migrator's transaction, with foreign keys off on the migrating
 *       connection and checked before the commit, and carries
 *       operation_events' AUTOINCREMENT high-water mark over, so no event
 *       number is ever handed out twice.
 *   Q26 The payout decision (og_payout_decide, sq_payout_decide) is ONE
 *       BEGIN IMMEDIATE transaction: it reads the facts — the payout, its
 *       tenant's settings, beneficiary and destination, the release day's
 *       counters — under the write lock (Q1), so none can change before it
 *       commits; the pure core decides (og__payout_plan_decide,
 *       lib/core/payout_plan.c); then it writes. Allowed: the reservation
 *       (Q27), the decision row, the approval with the attempt number
 *       (Q28), the grant's `grants` row (issuer 'payouts', row form, no
 *       family, the window's end as its expiry), its bindings, the job and
 *       a payout_events entry per step, all at one instant of SQLite's
 *       clock. Anything else: the decision row and its entry alone. Any
 *       failure, the fault points OG__FAULT_DECIDE_* included, rolls all
 *       of it back. Decisions and history entries are never changed or
 *       removed: triggers abort every UPDATE and DELETE of payout_decisions
 *       and payout_events.
 *   Q27 The reservation is ONE conditional write of the tenant's day row
 *       (SQ_PAYOUT_RESERVE: INSERT ... ON CONFLICT DO UPDATE ... WHERE
 *       paid + reserved + amount <= daily_limit). Under the write lock it
 *       checks the very counters the decision read, so it takes whatever
 *       the core allowed; should it take nothing, the decision written is
 *       Denied tenant.daily-limit, alone. The day is the release day of the
 *       grant's not_before at the tenant's offset (og_payout_release_day),
 *       kept on the binding, so a release goes back to that day whatever
 *       the offset becomes.
 *   Q28 The attempt number is attempt_count + 1, allocated by the
 *       approval's conditional UPDATE (SQ_PAYOUT_APPROVE: the version read,
 *       the state the mode expects, no active attempt) in the decision's
 *       transaction; re-authorizations are serialized by the write lock,
 *       and payout_grants' UNIQUE (payout_id, attempt_number) is the
 *       schema's own guard.
 *   Q29 A binding's reservation is released exactly once: released_at is
 *       set only where it is NULL, by a revocation (SQ_PAYOUT_GRANT_REVOKE:
 *       the grant's row live, unconsumed and unrevoked, ONE conditional
 *       write; then SQ_PAYOUT_RELEASE and the day's counter, in the same
 *       transaction) or by an expiry batch (one BEGIN IMMEDIATE per batch,
 *       unconsumed grants with expires_at < now - admission leeway -
 *       cleanup margin, every statement of the batch selecting the same
 *       set, SQ_PAYOUT_EXPIRE_PICK, with one clock, as Q21; the marks
 *       last). A consumed grant's reservation is never released here: it
 *       follows its attempt.
 *   Q30 The outbox is the queue. A take (SQ_PAYOUT_JOB_TAKE) is ONE UPDATE
 *       under the write lock of the oldest job with done_at IS NULL AND
 *       available_at <= now, over payout_jobs_available_idx: deliveries +
 *       1, available_at = now + lease, so a job whose taker went quiet is
 *       delivered again when the lease ends. An acknowledgment or a
 *       postponement is conditional on (deliveries = the delivery held, not
 *       acknowledged): a superseded delivery changes nothing. A job holds
 *       references only (payout, grant, correlation); a resubmission copies
 *       them under a new id.
 *   Q31 The claim (og_payout_claim, sq_payout_claim) is ONE BEGIN IMMEDIATE
 *       transaction: the facts (SQ_PAYOUT_CLAIM_FACTS: the binding, its
 *       grants row, the consuming operation, the payout, its tenant,
 *       beneficiary and destination, the clock) read under the write lock,
 *       so no fenced fact can change before the commit; the pure verdict
 *       (og__payout_plan_claim, PP4); and for CLAIMED only, at the facts'
 *       instant, the grant's row consumed (SQ_PAYOUT_CLAIM_GRANT, its
 *       conditions re-asserted: unconsumed, unrevoked, not_before <= now <
 *       expires_at + leeway), the payout Approved at the executable
 *       version with no active attempt -> Executing (SQ_PAYOUT_CLAIM_PAYOUT),
 *       the attempt (SQ_PAYOUT_CLAIM_OP: kind payout, Admitted at the
 *       initial owner version, key and reference fixed before any send) and
 *       the "claimed" entry. A write that then takes nothing is a defect:
 *       everything rolls back. Every other outcome rolls back: zero rows
 *       anywhere. The daily limit is not checked (the decision reserved).
 *       A commit that is not confirmed is OG_ESTORE_UNAVAILABLE: unknown,
 *       do not send.
 *   Q32 The resolution (og_payout_resolve, sq_payout_resolve) is ONE BEGIN
 *       IMMEDIATE transaction: og_op_record's own write (sq_op_record_in:
 *       SQ_OP_RECORD, status in the expected set AND owner version = v,
 *       and its "outcome" event); when it takes nothing, NOT_RECORDED and
 *       everything rolls back. Then the attempt's binding and payout
 *       (SQ_PAYOUT_RESOLVE_FACTS, each by its key), the pure plan
 *       (og__payout_plan_resolve, PP5), and for RESOLVED the payout's
 *       conditional move (SQ_PAYOUT_RESOLVE_PAYOUT: the version read, this
 *       attempt active, Executing or Unknown), for a terminal outcome the
 *       binding's release once (SQ_PAYOUT_RELEASE on released_at IS NULL)
 *       with its day (SQ_PAYOUT_PAY: reserved -> paid, or
 *       SQ_PAYOUT_UNRESERVE), and one "resolved" entry, all at the
 *       outcome's instant. A write that then takes nothing is a defect:
 *       rolled back. NOT_ACTIVE rolls the outcome back too.
 *
 * Timestamps are INTEGER microseconds since the Unix epoch at the
 * millisecond resolution of SQLite's clock.
 */
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/store_int.h"

/* SQLite's clock in microseconds (millisecond resolution, exact). */
#define SQ_NOW \
    "(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) * 1000)"

/* The columns admission writes, in the order sq_read_op() reads them. */
#define SQ_OP_INSERT_COLS                                                     \
    "operation_id, issuer, grant_id, caller_id, account_id, amount, "         \
    "currency, status, owner_version, lease_until, submit_by, created_at"

/* Every read of an operation (sq_read_op()): the admitted columns, then
 * migration 3's, then migration 7's. updated_at is NULL until the first
 * status change (Q17); a NULL idempotency key or client reference is the
 * operation id (Q25). */
#define SQ_OP_COLS                                                            \
    SQ_OP_INSERT_COLS ", coalesce(updated_at, created_at),"                   \
    " provider_reference, outcome_reason, kind,"                              \
    " coalesce(idempotency_key, operation_id),"                               \
    " coalesce(client_reference, operation_id)"
#define SQ_OP_NCOLS 18 /* the columns SQ_OP_COLS names */

/* Every stored column of operations and operation_events up to schema 6
 * (what migration 7 copies), and from schema 7 (what the archives repeat). */
#define SQ_V6_OP_COLS                                                         \
    SQ_OP_INSERT_COLS ", updated_at, provider_reference, outcome_reason"
#define SQ_OP_STORED_COLS                                                     \
    SQ_V6_OP_COLS ", kind, idempotency_key, client_reference"
#define SQ_EVENT_COLS                                                         \
    "seq, operation_id, at, kind, from_status, to_status, owner_version,"     \
    " reason, provider_reference, actor, evidence"

/* Status sets as migration 7 leaves them in the schema; each partial
 * index's predicate is repeated verbatim by the statements that use the
 * index (Q18, Q21). */
#define SQ_V7_STATUSES                                                        \
    "('Admitted', 'Succeeded', 'Failed', 'Unknown', 'NeedsReconciliation',"   \
    " 'Started', 'NotStarted', 'NotApplied')"
#define SQ_OWNED "('Admitted', 'Started', 'Unknown')"
#define SQ_TERMINAL "('Succeeded', 'Failed', 'NotStarted', 'NotApplied')"

/* ===========================================================================
 * Schema: versioned migrations. Each runs inside the migrator's
 * BEGIN IMMEDIATE, so concurrent migrators serialize.
 * ========================================================================= */
typedef struct sq_migration {
    int version;
    const char *description;
    const char *sql;
    const char *sql_hashed; /* a hashed store's variant; NULL: sql */
    const char *fk_check;   /* NULL, or a table whose foreign keys are
                               checked (PRAGMA foreign_key_check) before
                               the migration commits: one that rebuilt it
                               with foreign keys off (Q25) */
} sq_migration;

#define SQ_STR_(x) #x
#define SQ_STR(x) SQ_STR_(x)

/* Migration 7: operation kinds, their idempotency keys and client
 * references, and the statuses of a payout attempt (Q25). SQLite cannot
 * alter a CHECK, and every CHECK that lists statuses must widen, so
 * operations, operation_events and operations_archive are rebuilt the way
 * SQLite documents it ("Making Other Kinds Of Table Schema Changes"): the
 * new table, a copy of every row, the old table dropped, the new one
 * renamed, its indexes created again — inside the migrator's BEGIN
 * IMMEDIATE with foreign keys off on that connection (sq_migrate), and
 * PRAGMA foreign_key_check on operation_events before the commit.
 * operation_events keeps its AUTOINCREMENT high-water mark: the copy's
 * sqlite_sequence row is set to the old table's, so no event number an
 * archived event holds is handed out again (the archive keys on it, Q21).
 * Old rows become credits (kind's DEFAULT) whose key and reference are
 * their id (NULL). The indexes whose predicates list statuses get the new
 * sets (recovery: + Started; the archive's terminal set: + NotStarted,
 * NotApplied). operations_payout_status_check and
 * operations_not_started_check hold P1/P2 in the schema as the statements
 * hold them (Q25); the first is a CHECK of the kind column. Nothing here
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
    "  SELECT " SQ_V6_OP_COLS " FROM operations;"                             \
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
    "INSERT INTO operation_events_v7 (" SQ_EVENT_COLS ")"                     \
    "  SELECT " SQ_EVENT_COLS " FROM operation_events;"                       \
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
    "  ON operation_events (operation_id, seq);"                              \
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

/* Migration 5: the store's settings and its consumption keys (Q23). It runs
 * after migration 4 and touches none of its tables (the operation archives
 * keep their identifiers, as operations do). og_store_settings has exactly
 * one row; og_consumption_key() is registered on the migrating connection,
 * so a hashed store's existing claims are rewritten under their keys in the
 * migration's own transaction. The hashed table: the atomic check is its
 * PRIMARY KEY on key_hash, migration 2's kind rule is a table CHECK (Q10),
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
    "  reason         TEXT"                                                   \
    ") STRICT;"

/* Moves payout_events' rows into its rebuilt table tmp, with its
 * AUTOINCREMENT high-water mark, and puts tmp in its place with its index
 * and append-only triggers. */
#define SQ_PAYOUT_EVENTS_REBUILD(tmp)                                         \
    "INSERT INTO " tmp " (" SQ_PAYOUT_EVENT_COLS ")"                          \
    "  SELECT " SQ_PAYOUT_EVENT_COLS " FROM payout_events ORDER BY seq;"      \
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

/* Migration 8: the payout decision side (Q26-Q30). New tables only: it
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
    /* The reservation counters of one release day (Q27). */               \
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
    ") STRICT, WITHOUT ROWID;"                                                \
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
    ") STRICT, WITHOUT ROWID;"                                                \
    /* History (Q26): no foreign key, so a missing payout's Deferred        \
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
    SQ_APPEND_ONLY("payout_decisions")                                        \
    /* A payout grant's bindings; the grant itself is its `grants` row.     \
     * released_at is set once, by an expiry or a revocation (Q29). */       \
    SQ_PAYOUT_GRANTS_TABLE("payout_grants", "")                              \
    /* The janitor's scan (Q29): unreleased bindings by expiry. */          \
    "CREATE INDEX payout_grants_unreleased_idx ON payout_grants (expires_at)"  \
    "  WHERE released_at IS NULL;"                                            \
    /* A day's bindings: the foreign key's child side, so that writing a    \
     * day's row never scans the bindings. */                                \
    "CREATE INDEX payout_grants_day_idx ON payout_grants (tenant_id, release_day);" \
    /* The outbox is the queue (Q30): references only. */                   \
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
    "  WHERE done_at IS NULL;"                                                \
    /* The payout's history: one row per step (Q26), append-only. */        \
    SQ_PAYOUT_EVENTS_TABLE("payout_events", "")                              \
    "CREATE INDEX payout_events_payout_idx ON payout_events (payout_id, seq);" \
    SQ_APPEND_ONLY("payout_events")

/* Migration 9: the claim's history (Q31). payout_events' kind CHECK
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

/* Migration 10: the resolution (Q32). payout_grants' release_cause CHECK
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
    "CREATE INDEX payout_grants_day_idx ON payout_grants (tenant_id, release_day);" \
    SQ_PAYOUT_EVENTS_TABLE("payout_events_v10", ", 'claimed', 'resolved'")   \
    SQ_PAYOUT_EVENTS_REBUILD("payout_events_v10")

static const sq_migration sq_migrations[] = {
    {1, "grant_consumptions and operations (token form)",
     /* One row per claimed grant key, by an admission or a revocation. */
     "CREATE TABLE grant_consumptions ("
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
     "  WHERE status IN ('Admitted', 'Unknown');", NULL, NULL},
    {2, "claim kinds, families, issuance log, grant rows, tickets",
     /* What holds a claimed key: an admission (operation_id set), a
      * revocation, or the consume verdict. */
     "ALTER TABLE grant_consumptions ADD COLUMN kind TEXT NOT NULL"
     "  DEFAULT 'admission'"
     "  CHECK (kind IN ('admission', 'revocation', 'consume'));"
     "UPDATE grant_consumptions SET kind = 'revocation'"
     "  WHERE operation_id IS NULL;"
     /* Q10: PostgreSQL's grant_consumptions_kind_check2, as triggers. */
     "CREATE TRIGGER grant_consumptions_kind_check2_insert"
     "  BEFORE INSERT ON grant_consumptions"
     "  WHEN (NEW.kind = 'admission') <> (NEW.operation_id IS NOT NULL)"
     "  BEGIN SELECT RAISE(ABORT, 'grant_consumptions_kind_check2'); END;"
     "CREATE TRIGGER grant_consumptions_kind_check2_update"
     "  BEFORE UPDATE OF kind, operation_id ON grant_consumptions"
     "  WHEN (NEW.kind = 'admission') <> (NEW.operation_id IS NOT NULL)"
     "  BEGIN SELECT RAISE(ABORT, 'grant_consumptions_kind_check2'); END;"
     /* One row per (issuer, family): what admissions, consumes, issuance and
      * tickets read and family revocation updates (Q9). */
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
      * stays, so that presenting it again is recognised as reuse (Q11). */
     "CREATE TABLE tickets ("
     "  ticket_hash TEXT    NOT NULL PRIMARY KEY"
     "              CHECK (length(ticket_hash) = 64 AND"
     "                     ticket_hash NOT GLOB '*[^0-9a-f]*'),"
     "  issuer      TEXT    NOT NULL,"
     "  family      TEXT    NOT NULL,"
     "  created_at  INTEGER NOT NULL,"
     "  rotated_at  INTEGER,"
     "  FOREIGN KEY (issuer, family) REFERENCES families (issuer, family)"
     ") STRICT, WITHOUT ROWID;", NULL, NULL},
    {3, "execution: outcomes, provider references, operation history",
     /* Q17: updated_at stays NULL until the first status change and is read
      * as created_at, so admission stays ONE insert and old rows need no
      * backfill. */
     "ALTER TABLE operations ADD COLUMN updated_at INTEGER;"
     "ALTER TABLE operations ADD COLUMN provider_reference TEXT"
     "  CHECK (provider_reference IS NULL OR"
     "         length(CAST(provider_reference AS BLOB)) BETWEEN 1 AND 128);"
     "ALTER TABLE operations ADD COLUMN outcome_reason TEXT"
     "  CHECK (outcome_reason IS NULL OR"
     "         length(CAST(outcome_reason AS BLOB)) BETWEEN 1 AND 64);"
     /* Recovery's scan (Q18): expired leases among the owned statuses. */
     "CREATE INDEX operations_recovery_scan_idx"
     "  ON operations (status, lease_until)"
     "  WHERE status IN ('Admitted', 'Unknown');"
     /* The operators' backlog, oldest first, by status. */
     "CREATE INDEX operations_backlog_idx ON operations (status, created_at);"
     /* One row per execution write (Q13); admission writes none: its event
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
     "  ON operation_events (operation_id, seq);", NULL, NULL},
    {4, "retention: operations and events archives, terminal index",
     /* Finished operations and their history, on their own schedule
      * (Q21): the same columns plus archived_at (store clock), without the
      * checks a live row needs. seq is never reused (AUTOINCREMENT), so it
      * stays a key in the archive. */
     "CREATE TABLE operations_archive ("
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
     "  WHERE status IN ('Succeeded', 'Failed');", NULL, NULL},
    {5, "settings: consumption keys (readable or hashed)",
     SQ_MIGRATION_5("readable", ""),
     SQ_MIGRATION_5("hashed", SQ_HASHED_CONSUMPTIONS), NULL},
    /* Touches no table of migrations 4 and 5: readable and hashed stores
     * get the same table, keyed by (caller, idempotency key), never by a
     * grant's consumption key. */
    {6, "redemption recovery points",
     /* Q24: one sealed result per (caller, idempotency key); the token is
      * kept only as its SHA-256. A rowid table: a row holds up to 64 KiB,
      * too large for WITHOUT ROWID's clustered pages. */
     "CREATE TABLE redemptions ("
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
     "CREATE INDEX redemptions_code_idx ON redemptions (code_hash);", NULL,
     NULL},
    {7, "operation kinds, idempotency keys, client references; statuses "
        "Started, NotStarted, NotApplied",
     SQ_MIGRATION_7, NULL, "operation_events"},
    {8, "payouts: context, decisions, grants' bindings, reservations, jobs",
     SQ_MIGRATION_8, NULL, NULL},
    {9, "payouts: the claim's history entry", SQ_MIGRATION_9, NULL, NULL},
    {10, "payouts: the resolution's release causes and history entry",
     SQ_MIGRATION_10, NULL, "payout_jobs"},
};
_Static_assert(sizeof sq_migrations / sizeof sq_migrations[0] ==
                   OG_SCHEMA_VERSION,
               "one SQLite migration per schema version");

/* ===========================================================================
 * Statements, prepared once per connection on first use.
 * ========================================================================= */

/* The claim's condition that an archived operation keeps its id (Q22); ?3
 * is the operation id (NULL for the consume verdict: no row matches). */
#define SQ_OP_ID_NOT_ARCHIVED                                                 \
    "NOT EXISTS (SELECT 1 FROM operations_archive a"                          \
    " WHERE a.operation_id = ?3)"


/* One archive batch (Q21): at most ?2 terminal operations whose last change
 * lies in [?4, ?1), in a total order, over operations_terminal_idx (its
 * expression and predicate repeated verbatim). INDEXED BY: without ANALYZE
 * statistics the planner prefers operations_backlog_idx's status range and
 * sorts every finished operation for each batch. */
#define SQ_ARCHIVE_PICK                                                       \
    "SELECT operation_id FROM operations INDEXED BY operations_terminal_idx"  \
    " WHERE status IN " SQ_TERMINAL                                           \
    "   AND coalesce(updated_at, created_at) >= ?4"                           \
    "   AND coalesce(updated_at, created_at) < ?1"                            \
    " ORDER BY coalesce(updated_at, created_at), operation_id LIMIT ?2"

/* The statements that claim, read or delete a consumption key, written once
 * each as a template of K, READABLE or HASHED (Q23), and listed below in both
 * variants (NAME and NAME_HASHED). A readable store runs exactly the
 * statements schema 4 ran. */
#define SQ_KCOLS_READABLE "issuer, grant_id"
#define SQ_KCOLS_HASHED "key_hash"
#define SQ_KVALS_READABLE(i, g) i ", " g
#define SQ_KVALS_HASHED(i, g) "og_consumption_key(" i ", " g ")"
#define SQ_KEQ_READABLE(i, g) "issuer = " i " AND grant_id = " g
#define SQ_KEQ_HASHED(i, g) "key_hash = og_consumption_key(" i ", " g ")"
#define SQ_KRET_READABLE "grant_id"
#define SQ_KRET_HASHED "key_hash"
/* "INSERT INTO grant_consumptions (key columns, ...) SELECT <key>, " and
 * the conflict clause every claim ends with: a row only when it took the
 * key. */
#define SQ_CLAIM_INTO(K, i, g)                                                 \
    "INSERT INTO grant_consumptions"                                           \
    " (" SQ_KCOLS_##K ", operation_id, consumed_at, retain_until, kind)"       \
    " SELECT " SQ_KVALS_##K(i, g) ", "
#define SQ_CLAIM_END(K)                                                        \
    " ON CONFLICT (" SQ_KCOLS_##K ") DO NOTHING"                               \
    " RETURNING " SQ_KRET_##K

/* The claim, token form: ?1 issuer, ?2 grant id, ?3 operation id (NULL for
 * the consume verdict), ?4 expires_at, ?5 leeway, ?6 kind. Returns a row
 * only when this statement took the key. Both instances, as the row form's
 * claim, leave an archived operation's id alone (Q22). */
#define SQ_CLAIM_SQL(K)                                                        \
    SQ_CLAIM_INTO(K, "?1", "?2") "?3, " SQ_NOW ", ?4 + ?5, ?6"                 \
    " WHERE ?4 + ?5 > " SQ_NOW " AND " SQ_OP_ID_NOT_ARCHIVED                   \
    SQ_CLAIM_END(K)
/* What holds a key: ?1 issuer, ?2 grant id. */
#define SQ_READ_CONSUMPTION_SQL(K)                                             \
    "SELECT operation_id, kind FROM grant_consumptions"                        \
    " WHERE " SQ_KEQ_##K("?1", "?2")
/* The family's live token-form grants (readable: claimed as a set, their
 * ids RETURNED): ?1 issuer, ?2 family, ?3 leeway, ?4 max lifetime + issue
 * skew + leeway (the fallback, Q12). INDEXED BY: without ANALYZE statistics
 * the planner prefers the issuer's whole primary-key range, a scan of all
 * its grants under the write lock. A hashed table cannot RETURN a grant
 * id, so the hashed store lists the same rows with FAMILY_TOKENS and claims
 * each with FAMILY_TOKEN_CLAIM_HASHED, in the same transaction. */
#define SQ_FAMILY_TOKENS_FROM                                                  \
    " FROM grant_issuance gi INDEXED BY grant_issuance_family_idx,"            \
    "      (SELECT " SQ_NOW " AS now) t"                                       \
    " WHERE gi.issuer = ?1 AND gi.family = ?2 AND gi.form = 'token'"           \
    "   AND (gi.expires_at IS NULL OR gi.expires_at + ?3 > t.now)"
#define SQ_FAMILY_RETAIN "coalesce(gi.expires_at + ?3, t.now + ?4)"
/* One grant's revocation, token form: ?1 issuer, ?2 grant id, ?3 trusted
 * expires_at (0: none), ?4 leeway, ?5 max lifetime + issue skew + leeway.
 * Retained until the trusted expiry + leeway, else the issuance log's, else
 * the fallback (Q12); nothing without proof of issuance. */
#define SQ_REVOKE_TOKEN_SQL(K)                                                 \
    SQ_CLAIM_INTO(K, "?1", "?2") "NULL, r.now, r.retain, 'revocation'"         \
    " FROM (SELECT t.now, CASE WHEN ?3 > 0 THEN ?3 + ?4 ELSE"                  \
    "         (SELECT coalesce(gi.expires_at + ?4, t.now + ?5)"                \
    "          FROM grant_issuance gi"                                         \
    "          WHERE gi.issuer = ?1 AND gi.grant_id = ?2) END AS retain"       \
    "       FROM (SELECT " SQ_NOW " AS now) t) r"                              \
    " WHERE r.retain IS NOT NULL"                                              \
    SQ_CLAIM_END(K)
/* Cleanup (Q19, Q20): ?1 cleanup_margin, ?2 batch, ?3 the pass's keyset
 * cursor. At most ?2 due rows, oldest first over
 * grant_consumptions_retain_until_idx, picked by their primary key (the
 * table has no rowid: (issuer, grant_id), resp. key_hash) and deleted where
 * the bound still holds; returns each deleted row's kind and key. */
#define SQ_CLEANUP_SQL(K)                                                      \
    "DELETE FROM grant_consumptions"                                           \
    " WHERE (" SQ_KCOLS_##K ") IN ("                                           \
    "   SELECT " SQ_KCOLS_##K " FROM grant_consumptions"                       \
    "   WHERE retain_until >= ?3 AND retain_until < " SQ_NOW " - ?1"           \
    "   ORDER BY retain_until LIMIT ?2)"                                       \
    "   AND retain_until < " SQ_NOW " - ?1"                                    \
    " RETURNING kind, retain_until"

/* ===========================================================================
 * The payout store's statements (Q26-Q30). The code that runs them is
 * "The payout store" below; each write runs inside one BEGIN IMMEDIATE
 * transaction (sq_begin), the reads inside one read transaction.
 * ========================================================================= */

/* The payout's columns og_payout_get reads (sq_payout_view). */
#define SQ_PAYOUT_VIEW_COLS                                                    \
    "payout_id, tenant_id, beneficiary_id, destination_id,"                    \
    " destination_version, amount, currency, purpose, state, version,"         \
    " attempt_count, active_attempt, release_day, requester_id, created_at,"   \
    " updated_at"
/* Every fact a decision reads, in sq_read_facts' order: the payout, its
 * tenant's settings, its beneficiary, its destination (never the token),
 * and the store's clock. The foreign keys make the joins total. */
#define SQ_PAYOUT_FACTS_SQL                                                    \
    "SELECT p.state, p.version, p.attempt_count, p.active_attempt,"            \
    "       p.tenant_id, p.beneficiary_id, p.destination_id,"                  \
    "       p.destination_version, p.amount, p.currency, p.purpose,"           \
    "       t.payouts_suspended, t.daily_limit, t.currency,"                   \
    "       t.settlement_offset_minutes, t.settings_version,"                  \
    "       b.verified, b.status, b.version,"                                  \
    "       d.beneficiary_id, d.version, d.changed_at, " SQ_NOW                \
    " FROM payouts p"                                                          \
    " JOIN tenants t ON t.tenant_id = p.tenant_id"                             \
    " JOIN beneficiaries b ON b.beneficiary_id = p.beneficiary_id"             \
    " JOIN destinations d ON d.destination_id = p.destination_id"              \
    " WHERE p.payout_id = ?1"
/* The unreleased, unconsumed payout grants past ?1 (= now - leeway -
 * margin, read once), from the cursor ?3, oldest expiry first, at most ?2:
 * one expiry batch (Q29). Every statement of the batch selects this one
 * set (the write lock holds it still); INDEXED BY: the janitor's scan. */
#define SQ_PAYOUT_EXPIRE_PICK                                                  \
    "SELECT b.grant_id FROM payout_grants b"                                   \
    "   INDEXED BY payout_grants_unreleased_idx"                               \
    " JOIN grants g ON g.issuer = b.issuer AND g.grant_id = b.grant_id"        \
    " WHERE b.released_at IS NULL AND g.consumed_at IS NULL"                   \
    "   AND b.expires_at >= ?3 AND b.expires_at < ?1"                          \
    " ORDER BY b.expires_at, b.grant_id LIMIT ?2"

#define SQ_PAYOUT_STATEMENTS(X)                                                \
    X(BEGIN_READ, "BEGIN")                                                     \
    /* Tenants: ?1 id, ?2 suspended, ?3 limit, ?4 currency, ?5 offset,       \
     * ?6 expected settings_version. A row only when written. */             \
    X(PAYOUT_TENANT_CREATE,                                                    \
      "INSERT INTO tenants (tenant_id, payouts_suspended, daily_limit,"        \
      "   currency, settlement_offset_minutes, settings_version, updated_at)"  \
      " VALUES (?1, ?2, ?3, ?4, ?5, 1, " SQ_NOW ")"                            \
      " ON CONFLICT DO NOTHING RETURNING settings_version")                    \
    X(PAYOUT_TENANT_UPDATE,                                                    \
      "UPDATE tenants SET payouts_suspended = ?2, daily_limit = ?3,"           \
      "   settlement_offset_minutes = ?5,"                                     \
      "   settings_version = settings_version + 1, updated_at = " SQ_NOW       \
      " WHERE tenant_id = ?1 AND settings_version = ?6 AND currency = ?4"      \
      " RETURNING settings_version")                                           \
    /* A put's report, one row: the record's version (NULL: none), whether \
     * its fixed field matches ?2, whether what it names exists. */           \
    X(PAYOUT_TENANT_STATE,                                                     \
      "SELECT t.settings_version, t.currency = ?2, 1"                          \
      " FROM (SELECT 1) LEFT JOIN tenants t ON t.tenant_id = ?1")              \
    /* Beneficiaries: ?1 id, ?2 tenant, ?3 verified, ?4 status, ?5 expected. \
     * A create names a tenant that exists (no foreign-key error). */        \
    X(PAYOUT_BENEFICIARY_CREATE,                                               \
      "INSERT INTO beneficiaries (beneficiary_id, tenant_id, verified, status," \
      "   version, updated_at)"                                                \
      " SELECT ?1, ?2, ?3, ?4, 1, " SQ_NOW " FROM tenants WHERE tenant_id = ?2" \
      " ON CONFLICT DO NOTHING RETURNING version")                             \
    X(PAYOUT_BENEFICIARY_UPDATE,                                               \
      "UPDATE beneficiaries SET verified = ?3, status = ?4,"                   \
      "   version = version + 1, updated_at = " SQ_NOW                         \
      " WHERE beneficiary_id = ?1 AND version = ?5 AND tenant_id = ?2"         \
      " RETURNING version")                                                    \
    X(PAYOUT_BENEFICIARY_STATE,                                                \
      "SELECT b.version, b.tenant_id = ?2,"                                    \
      "       EXISTS (SELECT 1 FROM tenants WHERE tenant_id = ?2)"             \
      " FROM (SELECT 1) LEFT JOIN beneficiaries b ON b.beneficiary_id = ?1")   \
    /* Destinations: ?1 id, ?2 beneficiary, ?3 token, ?4 expected. Every     \
     * write moves changed_at (a token rotation is a change). */             \
    X(PAYOUT_DESTINATION_CREATE,                                               \
      "INSERT INTO destinations (destination_id, beneficiary_id,"              \
      "   provider_token, version, changed_at)"                                \
      " SELECT ?1, ?2, ?3, 1, " SQ_NOW " FROM beneficiaries"                   \
      " WHERE beneficiary_id = ?2"                                             \
      " ON CONFLICT DO NOTHING RETURNING version")                             \
    X(PAYOUT_DESTINATION_UPDATE,                                               \
      "UPDATE destinations SET beneficiary_id = ?2, provider_token = ?3,"      \
      "   version = version + 1, changed_at = " SQ_NOW                         \
      " WHERE destination_id = ?1 AND version = ?4"                            \
      "   AND EXISTS (SELECT 1 FROM beneficiaries WHERE beneficiary_id = ?2)"  \
      " RETURNING version")                                                    \
    X(PAYOUT_DESTINATION_STATE,                                                \
      "SELECT d.version, 1,"                                                   \
      "       EXISTS (SELECT 1 FROM beneficiaries WHERE beneficiary_id = ?2)"  \
      " FROM (SELECT 1) LEFT JOIN destinations d ON d.destination_id = ?1")    \
    /* The executor's read of the secret (S7): ?1 id, ?2 version. */         \
    X(PAYOUT_DESTINATION_TOKEN,                                                \
      "SELECT provider_token FROM destinations"                                \
      " WHERE destination_id = ?1 AND version = ?2")                           \
    /* A draft: ?1 payout, ?2 tenant, ?3 beneficiary, ?4 destination,        \
     * ?5 destination version, ?6 amount, ?7 currency, ?8 purpose or NULL,   \
     * ?9 requester. Only into a tenant of that currency, with the           \
     * beneficiary of that tenant and an existing destination. */            \
    X(PAYOUT_DRAFT,                                                            \
      "INSERT INTO payouts (payout_id, tenant_id, beneficiary_id,"             \
      "   destination_id, destination_version, amount, currency, purpose,"     \
      "   state, version, attempt_count, requester_id, created_at, updated_at)" \
      " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'Draft', 1, 0, ?9, t.now, t.now" \
      " FROM (SELECT " SQ_NOW " AS now) t"                                     \
      " WHERE EXISTS (SELECT 1 FROM tenants WHERE tenant_id = ?2"              \
      "                 AND currency = ?7)"                                    \
      "   AND EXISTS (SELECT 1 FROM beneficiaries WHERE tenant_id = ?2"        \
      "                 AND beneficiary_id = ?3)"                              \
      "   AND EXISTS (SELECT 1 FROM destinations WHERE destination_id = ?4)"   \
      " ON CONFLICT DO NOTHING RETURNING created_at")                          \
    /* Why a draft wrote nothing: payout, tenant, currency, beneficiary of   \
     * the tenant, destination. */                                            \
    X(PAYOUT_DRAFT_STATE,                                                      \
      "SELECT EXISTS (SELECT 1 FROM payouts WHERE payout_id = ?1),"            \
      "       EXISTS (SELECT 1 FROM tenants WHERE tenant_id = ?2),"            \
      "       EXISTS (SELECT 1 FROM tenants WHERE tenant_id = ?2"              \
      "                 AND currency = ?7),"                                   \
      "       EXISTS (SELECT 1 FROM beneficiaries WHERE tenant_id = ?2"        \
      "                 AND beneficiary_id = ?3),"                             \
      "       EXISTS (SELECT 1 FROM destinations WHERE destination_id = ?4)")  \
    /* History (Q26): ?1 payout, ?2 at, ?3 kind, ?4 actor, ?5 correlation,   \
     * ?6 decision, ?7 grant, ?8 job, ?9 from state, ?10 to state,           \
     * ?11 payout version, ?12 amount, ?13 release day, ?14 reason. */       \
    X(PAYOUT_EVENT,                                                            \
      "INSERT INTO payout_events (payout_id, at, kind, actor, correlation_id," \
      "   decision_id, grant_id, job_id, from_state, to_state, payout_version," \
      "   amount, release_day, reason)"                                        \
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)") \
    /* A cancellation: the state it replaces, read under the write lock,     \
     * then ?1 payout, ?2 expected version. */                               \
    X(PAYOUT_STATE,                                                            \
      "SELECT state, version FROM payouts WHERE payout_id = ?1")               \
    X(PAYOUT_CANCEL,                                                           \
      "UPDATE payouts SET state = 'Cancelled', version = version + 1,"         \
      "   updated_at = " SQ_NOW                                                \
      " WHERE payout_id = ?1 AND version = ?2"                                 \
      "   AND (state = 'Draft' OR"                                             \
      "        (state = 'Approved' AND active_attempt IS NULL))"               \
      " RETURNING version, updated_at")                                        \
    X(PAYOUT_GET,                                                              \
      "SELECT " SQ_PAYOUT_VIEW_COLS " FROM payouts WHERE payout_id = ?1")      \
    /* The facts (Q26): ?1 payout; then the day's counters, ?1 tenant,       \
     * ?2 day. */                                                             \
    X(PAYOUT_FACTS, SQ_PAYOUT_FACTS_SQL)                                       \
    X(PAYOUT_DAY,                                                              \
      "SELECT paid, reserved, version FROM tenant_days"                        \
      " WHERE tenant_id = ?1 AND day = ?2")                                    \
    /* The reservation (Q27): ONE conditional write of the day's row, ?1     \
     * tenant, ?2 day, ?3 amount. The first of a day inserts it within the   \
     * limit; later ones add to it while paid + reserved + amount stays      \
     * within the limit. A row (the new reserved total) only when it         \
     * reserved. */                                                           \
    X(PAYOUT_RESERVE,                                                          \
      "INSERT INTO tenant_days (tenant_id, day, paid, reserved, version)"      \
      " SELECT ?1, ?2, 0, ?3, 1 FROM tenants"                                  \
      " WHERE tenant_id = ?1 AND ?3 <= daily_limit"                            \
      " ON CONFLICT (tenant_id, day) DO UPDATE"                                \
      "   SET reserved = tenant_days.reserved + excluded.reserved,"            \
      "       version = tenant_days.version + 1"                               \
      "   WHERE tenant_days.paid + tenant_days.reserved + excluded.reserved"   \
      "         <= (SELECT t.daily_limit FROM tenants t"                       \
      "             WHERE t.tenant_id = excluded.tenant_id)"                   \
      " RETURNING reserved")                                                   \
    /* The decision (append-only): ?1 id, ?2 payout, ?3 tenant or NULL,      \
     * ?4 mode, ?5 outcome, ?6 reason, ?7 policy, ?8 fingerprint or NULL,    \
     * ?9..?12 the versions evaluated or NULL, ?13 requester, ?14 role,      \
     * ?15 approval limit, ?16 observed_at, ?17 decided_at, ?18 correlation. */ \
    X(PAYOUT_DECISION,                                                         \
      "INSERT INTO payout_decisions (decision_id, payout_id, tenant_id, mode," \
      "   outcome, reason, policy_version, terms_fingerprint,"                 \
      "   tenant_settings_version, beneficiary_version, destination_version,"  \
      "   payout_version, requester_id, requester_role,"                       \
      "   requester_approval_limit, observed_at, decided_at, correlation_id)"  \
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,"  \
      "         ?15, ?16, ?17, ?18)")                                          \
    /* The approval: ?1 payout, ?2 the version read, ?3 the state expected   \
     * (Draft; Approved for a re-authorization), ?4 release day, ?5 now.     \
     * The attempt number is attempt_count + 1, allocated here (Q28). */     \
    X(PAYOUT_APPROVE,                                                          \
      "UPDATE payouts SET state = 'Approved', version = version + 1,"          \
      "   attempt_count = attempt_count + 1, release_day = ?4, updated_at = ?5" \
      " WHERE payout_id = ?1 AND version = ?2 AND state = ?3"                  \
      "   AND active_attempt IS NULL"                                          \
      " RETURNING version, attempt_count, amount, tenant_id")                  \
    /* The grant's bindings: ?1 grant, ?2 decision, ?3 payout, ?4 tenant,    \
     * ?5 fingerprint, ?6 executable version, ?7 attempt, ?8 policy,         \
     * ?9 amount, ?10 day, ?11 not_before, ?12 expires_at, ?13 now. */       \
    X(PAYOUT_BIND,                                                             \
      "INSERT INTO payout_grants (grant_id, issuer, decision_id, payout_id,"   \
      "   tenant_id, operation, audience, terms_fingerprint,"                  \
      "   executable_payout_version, attempt_number, policy_version, amount,"  \
      "   release_day, not_before, expires_at, created_at)"                    \
      " VALUES (?1, '" OG_PAYOUT_ISSUER "', ?2, ?3, ?4,"                       \
      "         '" OG_PAYOUT_OPERATION "', '" OG_PAYOUT_AUDIENCE "',"          \
      "         ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)")                      \
    /* The job (Q30): ?1 job, ?2 payout, ?3 grant, ?4 correlation, ?5 now. */ \
    X(PAYOUT_JOB,                                                              \
      "INSERT INTO payout_jobs (job_id, payout_id, grant_id, correlation_id,"  \
      "   created_at, available_at, deliveries)"                               \
      " VALUES (?1, ?2, ?3, ?4, ?5, ?5, 0)")                                   \
    /* Take (Q30): the oldest available job, over payout_jobs_available_idx, \
     * ?1 lease. A row only when one was taken. */                            \
    X(PAYOUT_JOB_TAKE,                                                         \
      "UPDATE payout_jobs SET deliveries = deliveries + 1,"                    \
      "   delivered_at = " SQ_NOW ", available_at = " SQ_NOW " + ?1"           \
      " WHERE job_id = (SELECT job_id FROM payout_jobs"                        \
      "                 WHERE done_at IS NULL AND available_at <= " SQ_NOW     \
      "                 ORDER BY available_at, job_id LIMIT 1)"                \
      " RETURNING job_id, payout_id, grant_id, correlation_id,"                \
      "   resubmitted_from, deliveries, available_at")                         \
    /* Ack and postpone: ?1 job, ?2 the delivery held, ?3 delay. */          \
    X(PAYOUT_JOB_ACK,                                                          \
      "UPDATE payout_jobs SET done_at = " SQ_NOW                               \
      " WHERE job_id = ?1 AND deliveries = ?2 AND done_at IS NULL"             \
      " RETURNING 1")                                                          \
    X(PAYOUT_JOB_POSTPONE,                                                     \
      "UPDATE payout_jobs SET available_at = " SQ_NOW " + ?3"                  \
      " WHERE job_id = ?1 AND deliveries = ?2 AND done_at IS NULL"             \
      " RETURNING 1")                                                          \
    /* Resubmission: ?1 the job copied, ?2 the new id. */                    \
    X(PAYOUT_JOB_RESUBMIT,                                                     \
      "INSERT INTO payout_jobs (job_id, payout_id, grant_id, correlation_id,"  \
      "   resubmitted_from, created_at, available_at, deliveries)"             \
      " SELECT ?2, j.payout_id, j.grant_id, j.correlation_id, j.job_id,"       \
      "        t.now, t.now, 0"                                                \
      " FROM payout_jobs j, (SELECT " SQ_NOW " AS now) t WHERE j.job_id = ?1"  \
      " RETURNING payout_id, grant_id, correlation_id, created_at")            \
    /* A payout grant and its row, with the clock its state is derived at:   \
     * ?1 grant. */                                                           \
    X(PAYOUT_GRANT_GET,                                                        \
      "SELECT b.grant_id, b.decision_id, b.payout_id, b.tenant_id,"            \
      "       b.operation, b.audience, b.terms_fingerprint, b.policy_version,"  \
      "       b.executable_payout_version, b.attempt_number, b.amount,"        \
      "       b.release_day, b.not_before, g.expires_at, b.created_at,"        \
      "       g.consumed_at, g.consumed_by_operation, g.revoked_at,"           \
      "       b.released_at, " SQ_NOW                                          \
      " FROM payout_grants b"                                                  \
      " JOIN grants g ON g.issuer = b.issuer AND g.grant_id = b.grant_id"      \
      " WHERE b.grant_id = ?1")                                                \
    /* A finance hold (Q29): ?1 grant. The grant's row, live. */             \
    X(PAYOUT_GRANT_REVOKE,                                                     \
      "UPDATE grants SET revoked_at = " SQ_NOW                                 \
      " WHERE issuer = '" OG_PAYOUT_ISSUER "' AND grant_id = ?1"               \
      "   AND consumed_at IS NULL AND revoked_at IS NULL"                      \
      "   AND EXISTS (SELECT 1 FROM payout_grants b WHERE b.grant_id = ?1)"    \
      " RETURNING revoked_at")                                                 \
    X(PAYOUT_GRANT_PAYOUT,                                                     \
      "SELECT payout_id FROM payout_grants WHERE grant_id = ?1")               \
    /* Releases one binding's reservation, once: ?1 grant, ?2 now,           \
     * ?3 cause. */                                                           \
    X(PAYOUT_RELEASE,                                                          \
      "UPDATE payout_grants SET released_at = ?2, release_cause = ?3"          \
      " WHERE grant_id = ?1 AND released_at IS NULL"                           \
      " RETURNING payout_id, tenant_id, release_day, amount")                  \
    X(PAYOUT_UNRESERVE,                                                        \
      "UPDATE tenant_days SET reserved = reserved - ?3, version = version + 1" \
      " WHERE tenant_id = ?1 AND day = ?2 RETURNING reserved")                 \
    /* One expiry batch (Q29): ?1 now - leeway - margin, ?2 batch,           \
     * ?3 cursor, ?4 now. First the batch's size and greatest expiry (the    \
     * next cursor), then its reservations, history and marks; the marks     \
     * last, since the pick reads released_at. */                             \
    X(PAYOUT_EXPIRE_CURSOR,                                                    \
      "SELECT count(*), max(expires_at) FROM payout_grants"                    \
      " WHERE grant_id IN (" SQ_PAYOUT_EXPIRE_PICK ")")                        \
    X(PAYOUT_EXPIRE_DAYS,                                                      \
      "UPDATE tenant_days SET reserved = reserved - s.amount,"                 \
      "   version = version + 1"                                               \
      " FROM (SELECT tenant_id, release_day, sum(amount) AS amount"            \
      "       FROM payout_grants WHERE grant_id IN (" SQ_PAYOUT_EXPIRE_PICK ")" \
      "       GROUP BY tenant_id, release_day) s"                              \
      " WHERE tenant_days.tenant_id = s.tenant_id"                             \
      "   AND tenant_days.day = s.release_day")                                \
    X(PAYOUT_EXPIRE_EVENTS,                                                    \
      "INSERT INTO payout_events (payout_id, at, kind, actor, grant_id,"       \
      "   amount, release_day, reason)"                                        \
      " SELECT payout_id, ?4, 'reservation-released', 'janitor', grant_id,"    \
      "        amount, release_day, 'expired'"                                 \
      " FROM payout_grants WHERE grant_id IN (" SQ_PAYOUT_EXPIRE_PICK ")")     \
    X(PAYOUT_EXPIRE_MARK,                                                      \
      "UPDATE payout_grants SET released_at = ?4, release_cause = 'expired'"   \
      " WHERE grant_id IN (" SQ_PAYOUT_EXPIRE_PICK ")")                                                   \
    /* The claim's facts (Q31): ?1 grant. The binding and its grants row,    \
     * the operation that consumed it, the payout, its tenant, beneficiary   \
     * and destination (never the token), the store's clock: under the      \
     * write lock, none of it changes before the commit. */                  \
    X(PAYOUT_CLAIM_FACTS,                                                      \
      "SELECT b.payout_id, b.audience, b.executable_payout_version,"           \
      "       b.attempt_number, b.not_before, g.expires_at,"                   \
      "       g.consumed_at IS NOT NULL, g.consumed_by_operation,"             \
      "       g.revoked_at IS NOT NULL,"                                       \
      "       (o.operation_id IS NOT NULL OR a.operation_id IS NOT NULL),"     \
      "       coalesce(o.kind, a.kind) = 'payout',"                            \
      "       coalesce(o.client_reference, a.client_reference,"                \
      "                o.operation_id, a.operation_id),"                       \
      "       p.state, p.version, p.active_attempt IS NOT NULL, p.amount,"     \
      "       p.currency, p.destination_id, t.payouts_suspended,"              \
      "       t.settings_version, bn.status, bn.version, d.version, " SQ_NOW   \
      " FROM payout_grants b"                                                  \
      " JOIN grants g ON g.issuer = b.issuer AND g.grant_id = b.grant_id"      \
      " JOIN payouts p ON p.payout_id = b.payout_id"                           \
      " JOIN tenants t ON t.tenant_id = p.tenant_id"                           \
      " JOIN beneficiaries bn ON bn.beneficiary_id = p.beneficiary_id"         \
      " JOIN destinations d ON d.destination_id = p.destination_id"            \
      " LEFT JOIN operations o ON o.operation_id = g.consumed_by_operation"    \
      " LEFT JOIN operations_archive a"                                        \
      "   ON a.operation_id = g.consumed_by_operation"                         \
      " WHERE b.grant_id = ?1")                                                \
    /* The claim's writes (Q31), each conditional as if nothing had been     \
     * read: ?1 grant, ?2 operation, ?3 now, ?4 leeway. */                   \
    X(PAYOUT_CLAIM_GRANT,                                                      \
      "UPDATE grants SET consumed_at = ?3, consumed_by_operation = ?2"         \
      " WHERE issuer = '" OG_PAYOUT_ISSUER "' AND grant_id = ?1"               \
      "   AND consumed_at IS NULL AND revoked_at IS NULL"                      \
      "   AND expires_at + ?4 > ?3"                                            \
      "   AND EXISTS (SELECT 1 FROM payout_grants b"                           \
      "               WHERE b.grant_id = ?1 AND b.not_before <= ?3)"           \
      " RETURNING 1")                                                          \
    /* ?1 payout, ?2 its executable version, ?3 operation, ?4 now. */        \
    X(PAYOUT_CLAIM_PAYOUT,                                                     \
      "UPDATE payouts SET state = 'Executing', version = version + 1,"         \
      "   active_attempt = ?3, updated_at = ?4"                                \
      " WHERE payout_id = ?1 AND version = ?2 AND state = 'Approved'"          \
      "   AND active_attempt IS NULL"                                          \
      " RETURNING version")                                                    \
    /* The attempt: ?1 operation, ?2 grant, ?3 worker, ?4 destination,       \
     * ?5 amount, ?6 currency, ?7 now, ?8 lease, ?9 send window, ?10 key,    \
     * ?11 reference. */                                                      \
    X(PAYOUT_CLAIM_OP,                                                         \
      "INSERT INTO operations (" SQ_OP_INSERT_COLS ", kind, idempotency_key,"  \
      "   client_reference)"                                                   \
      " VALUES (?1, '" OG_PAYOUT_ISSUER "', ?2, ?3, ?4, ?5, ?6, 'Admitted', "   \
      SQ_STR(OG__INITIAL_OWNER_VERSION) ", ?7 + ?8, ?7 + ?9, ?7, 'payout',"    \
      "         ?10, ?11)"                                                     \
      " RETURNING " SQ_OP_COLS)                                                \
    /* The resolution's facts (Q32): ?1 the attempt. Its binding, through   \
     * the operation's grant (each by its key), and the payout. */          \
    X(PAYOUT_RESOLVE_FACTS,                                                    \
      "SELECT b.payout_id, b.grant_id, b.release_day, b.amount,"               \
      "       b.released_at IS NOT NULL, p.state, p.version,"                  \
      "       coalesce(p.active_attempt = o.operation_id, 0)"                  \
      " FROM operations o"                                                     \
      " JOIN payout_grants b ON b.grant_id = o.grant_id"                       \
      " JOIN payouts p ON p.payout_id = b.payout_id"                           \
      " WHERE o.operation_id = ?1 AND o.kind = 'payout'"                       \
      "   AND o.issuer = '" OG_PAYOUT_ISSUER "'")                              \
    /* ?1 payout, ?2 version read, ?3 the attempt, ?4 new state, ?5 1: clear \
     * the active attempt, ?6 now. */                                         \
    X(PAYOUT_RESOLVE_PAYOUT,                                                   \
      "UPDATE payouts SET state = ?4, version = version + 1,"                  \
      "   active_attempt = CASE WHEN ?5 THEN NULL ELSE active_attempt END,"    \
      "   updated_at = ?6"                                                     \
      " WHERE payout_id = ?1 AND version = ?2 AND active_attempt = ?3"         \
      "   AND state IN ('Executing', 'Unknown')"                               \
      " RETURNING version")                                                    \
    /* A Succeeded attempt's amount, reserved -> paid: ?1 tenant, ?2 day,    \
     * ?3 amount. */                                                          \
    X(PAYOUT_PAY,                                                              \
      "UPDATE tenant_days SET reserved = reserved - ?3, paid = paid + ?3,"     \
      "   version = version + 1"                                               \
      " WHERE tenant_id = ?1 AND day = ?2 RETURNING reserved")

#define SQ_STATEMENTS(X)                                                       \
    X(BEGIN, "BEGIN IMMEDIATE")                                                \
    X(COMMIT, "COMMIT")                                                        \
    X(ROLLBACK, "ROLLBACK")                                                    \
    X(SAVEPOINT, "SAVEPOINT og_admit")                                         \
    X(RELEASE, "RELEASE og_admit")                                             \
    X(ROLLBACK_TO, "ROLLBACK TO og_admit")                                     \
    /* The claim, token form (SQ_CLAIM_SQL; Q22). */                        \
    X(CLAIM, SQ_CLAIM_SQL(READABLE))                                           \
    X(CLAIM_HASHED, SQ_CLAIM_SQL(HASHED))                                      \
    /* The claim, row form: ?1 issuer, ?2 grant id, ?3 operation id (NULL for \
     * the verdict), ?4 leeway. The row's expires_at is the trusted deadline; \
     * the request's is ignored. Returns the row's family when it took it. */ \
    X(ROW_CLAIM,                                                               \
      "UPDATE grants SET consumed_at = " SQ_NOW ", consumed_by_operation = ?3" \
      " WHERE issuer = ?1 AND grant_id = ?2 AND consumed_at IS NULL"           \
      "   AND revoked_at IS NULL AND expires_at + ?4 > " SQ_NOW                \
      "   AND " SQ_OP_ID_NOT_ARCHIVED                                          \
      " RETURNING family")                                                     \
    /* The operation, in the same transaction: ?1..?7 the binding,            \
     * ?8 owner version, ?9 execution lease, ?10 submission window. */        \
    X(INSERT_OP,                                                               \
      "INSERT INTO operations (" SQ_OP_INSERT_COLS ")"                         \
      " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, 'Admitted', ?8,"                    \
      "        t.now + ?9, t.now + ?10, t.now"                                 \
      " FROM (SELECT " SQ_NOW " AS now) t"                                     \
      " RETURNING " SQ_OP_COLS)                                                \
    X(READ_CONSUMPTION, SQ_READ_CONSUMPTION_SQL(READABLE))                     \
    X(READ_CONSUMPTION_HASHED, SQ_READ_CONSUMPTION_SQL(HASHED))                \
    X(READ_GRANT,                                                              \
      "SELECT consumed_at IS NOT NULL, consumed_by_operation,"                 \
      "       revoked_at IS NOT NULL"                                          \
      " FROM grants WHERE issuer = ?1 AND grant_id = ?2")                      \
    /* Families (Q9): ?1 issuer, ?2 family. */                                 \
    X(FAMILY_STATE,                                                            \
      "SELECT revoked_at IS NULL FROM families"                                \
      " WHERE issuer = ?1 AND family = ?2")                                    \
    X(FAMILY_CREATE,                                                           \
      "INSERT INTO families (issuer, family, created_at)"                      \
      " VALUES (?1, ?2, " SQ_NOW ")")                                          \
    /* Marks the family revoked, creating it revoked when never seen; a row   \
     * only when this call revoked it. */                                      \
    X(FAMILY_REVOKE,                                                           \
      "INSERT INTO families (issuer, family, created_at, revoked_at)"          \
      " VALUES (?1, ?2, " SQ_NOW ", " SQ_NOW ")"                               \
      " ON CONFLICT (issuer, family) DO UPDATE"                                \
      "   SET revoked_at = excluded.revoked_at"                                \
      "   WHERE families.revoked_at IS NULL"                                   \
      " RETURNING 1")                                                          \
    /* The family's live token-form grants (SQ_FAMILY_TOKENS_FROM). */       \
    X(FAMILY_REVOKE_TOKENS,                                                    \
      SQ_CLAIM_INTO(READABLE, "gi.issuer", "gi.grant_id") "NULL, t.now,"       \
      "        " SQ_FAMILY_RETAIN ", 'revocation'"                             \
      SQ_FAMILY_TOKENS_FROM                                                    \
      SQ_CLAIM_END(READABLE))                                                  \
    /* Hashed: the same grants, listed with when and how long to hold them */ \
    X(FAMILY_TOKENS,                                                           \
      "SELECT gi.grant_id, t.now, " SQ_FAMILY_RETAIN SQ_FAMILY_TOKENS_FROM)     \
    /* ...and each claimed: ?1 issuer, ?2 grant id, ?3 now, ?4 retain. */     \
    X(FAMILY_TOKEN_CLAIM_HASHED,                                               \
      SQ_CLAIM_INTO(HASHED, "?1", "?2") "NULL, ?3, ?4, 'revocation'"           \
      SQ_CLAIM_END(HASHED))                                                    \
    X(FAMILY_REVOKE_ROWS,                                                      \
      "UPDATE grants INDEXED BY grants_family_idx"                             \
      " SET revoked_at = " SQ_NOW                                              \
      " WHERE issuer = ?1 AND family = ?2"                                     \
      "   AND consumed_at IS NULL AND revoked_at IS NULL"                      \
      " RETURNING grant_id")                                                   \
    /* Issuance: ?1 issuer, ?2 grant id, ?3 family or NULL, ?4 subject,       \
     * ?5 action, ?6 params digest, ?7 issued_at, ?8 expires_at or NULL,      \
     * ?9 form. A row only when the key was new. */                            \
    X(ISSUANCE_INSERT,                                                         \
      "INSERT INTO grant_issuance (issuer, grant_id, family, subject, action," \
      "   params_digest, issued_at, expires_at, form, recorded_at)"            \
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, " SQ_NOW ")"               \
      " ON CONFLICT (issuer, grant_id) DO NOTHING"                             \
      " RETURNING grant_id")                                                   \
    X(GRANT_INSERT,                                                            \
      "INSERT INTO grants (issuer, grant_id, family, expires_at)"              \
      " VALUES (?1, ?2, ?3, ?4)")                                              \
    /* One grant's revocation, token form (SQ_REVOKE_TOKEN_SQL). */          \
    X(REVOKE_TOKEN, SQ_REVOKE_TOKEN_SQL(READABLE))                             \
    X(REVOKE_TOKEN_HASHED, SQ_REVOKE_TOKEN_SQL(HASHED))                        \
    X(REVOKE_ROW,                                                              \
      "UPDATE grants SET revoked_at = " SQ_NOW                                 \
      " WHERE issuer = ?1 AND grant_id = ?2"                                   \
      "   AND consumed_at IS NULL AND revoked_at IS NULL"                      \
      " RETURNING grant_id")                                                   \
    /* Tickets: ?1 hash, ?2 issuer, ?3 family. */                              \
    X(TICKET_INSERT,                                                           \
      "INSERT INTO tickets (ticket_hash, issuer, family, created_at)"          \
      " VALUES (?1, ?2, ?3, " SQ_NOW ")")                                      \
    /* Rotation's first half: ?1 the presented ticket's hash. */              \
    X(TICKET_ROTATE,                                                           \
      "UPDATE tickets SET rotated_at = " SQ_NOW                                \
      " WHERE ticket_hash = ?1 AND rotated_at IS NULL"                         \
      "   AND EXISTS (SELECT 1 FROM families f WHERE f.issuer = tickets.issuer" \
      "               AND f.family = tickets.family AND f.revoked_at IS NULL)" \
      " RETURNING issuer, family")                                             \
    X(TICKET_READ,                                                             \
      "SELECT t.rotated_at IS NOT NULL, t.issuer, t.family,"                   \
      "       coalesce(f.revoked_at IS NOT NULL, 1)"                           \
      " FROM tickets t LEFT JOIN families f"                                   \
      "   ON f.issuer = t.issuer AND f.family = t.family"                      \
      " WHERE t.ticket_hash = ?1")                                             \
    X(READ_OP, "SELECT " SQ_OP_COLS " FROM operations WHERE operation_id = ?1") \
    /* The admission's follow-up (Q22): live, else archived. */                \
    X(READ_OP_ANY,                                                             \
      "SELECT " SQ_OP_COLS " FROM operations WHERE operation_id = ?1"          \
      " UNION ALL"                                                             \
      " SELECT " SQ_OP_COLS " FROM operations_archive WHERE operation_id = ?1" \
      " LIMIT 1")                                                              \
    /* Retention (Q19-Q22). Cleanup (SQ_CLEANUP_SQL). */                   \
    X(CLEANUP, SQ_CLEANUP_SQL(READABLE))                                       \
    X(CLEANUP_HASHED, SQ_CLEANUP_SQL(HASHED))                                  \
    X(CLOCK, "SELECT " SQ_NOW)                                                 \
    /* Archiving: ?1 cutoff (last change before it), ?2 batch, ?3 archived_at \
     * (the same 'now' the cutoff came from), ?4 the pass's keyset cursor.    \
     * The batch's greatest key, read first: the next cursor. */              \
    X(ARCHIVE_CURSOR,                                                          \
      "SELECT max(coalesce(updated_at, created_at)) FROM operations"           \
      " WHERE operation_id IN (" SQ_ARCHIVE_PICK ")")                          \
    X(ARCHIVE_EVENTS,                                                          \
      "INSERT INTO operation_events_archive (" SQ_EVENT_COLS ", archived_at)"  \
      " SELECT " SQ_EVENT_COLS ", ?3 FROM operation_events"                    \
      " WHERE operation_id IN (" SQ_ARCHIVE_PICK ")")                          \
    X(DELETE_EVENTS,                                                           \
      "DELETE FROM operation_events WHERE operation_id IN (" SQ_ARCHIVE_PICK ")") \
    X(ARCHIVE_OPS,                                                             \
      "INSERT INTO operations_archive (" SQ_OP_STORED_COLS ", archived_at)"    \
      " SELECT " SQ_OP_STORED_COLS ", ?3 FROM operations"                      \
      " WHERE operation_id IN (" SQ_ARCHIVE_PICK ")")                          \
    X(DELETE_OPS,                                                              \
      "DELETE FROM operations WHERE operation_id IN (" SQ_ARCHIVE_PICK ")"     \
      "   AND status IN " SQ_TERMINAL)                                         \
    /* Execution (Q13-Q18). ?1 is the operation id in each. */                \
    /* May the owner at version ?2 send a create request now? A read: a     \
     * credit from Admitted or Unknown, a payout only once Started (Q25). */  \
    X(OP_MAY_SUBMIT,                                                           \
      "SELECT 1 FROM operations"                                               \
      " WHERE operation_id = ?1"                                               \
      "   AND ((kind = 'credit' AND status IN ('Admitted', 'Unknown'))"        \
      "        OR (kind = 'payout' AND status = 'Started'))"                   \
      "   AND owner_version = ?2"                                              \
      "   AND " SQ_NOW " < min(lease_until, submit_by)")                       \
    /* A payout attempt's start (Q25: P1, P2): ?2 the owner's version. One    \
     * 'now' for the lease and submit_by tests and the returned event time    \
     * (Q15), read under the write lock. A row only when it started. */       \
    X(OP_START,                                                                \
      "UPDATE operations SET status = 'Started', updated_at = " SQ_NOW         \
      " WHERE operation_id = ?1 AND kind = 'payout' AND status = 'Admitted'"   \
      "   AND owner_version = ?2"                                              \
      "   AND lease_until > " SQ_NOW " AND submit_by > " SQ_NOW                \
      " RETURNING updated_at")                                                 \
    /* The status an execution write replaces, read under the write lock. */ \
    X(OP_STATUS, "SELECT status FROM operations WHERE operation_id = ?1")      \
    /* An outcome: ?2 expected owner version, ?3 'Admitted' or NULL, ?4       \
     * 'Started' or NULL, ?5 'Unknown' or NULL (the expected set; nothing     \
     * else can be replaced, Q14), ?6 new status, ?7 reason or NULL, ?8       \
     * provider reference or NULL. NotStarted only for a payout above the     \
     * initial owner version (Q25: P2), whatever store.c checked. A row only  \
     * when it hit. */                                                         \
    X(OP_RECORD,                                                               \
      "UPDATE operations SET status = ?6, outcome_reason = ?7,"                \
      "   provider_reference = coalesce(?8, provider_reference),"              \
      "   updated_at = " SQ_NOW                                                \
      " WHERE operation_id = ?1 AND owner_version = ?2"                        \
      "   AND status IN (?3, ?4, ?5)"                                          \
      "   AND (?6 <> 'NotStarted' OR (kind = 'payout' AND owner_version > "    \
      SQ_STR(OG__INITIAL_OWNER_VERSION) "))"                                   \
      " RETURNING updated_at")                                                 \
    /* Recovery's takeover: ?2 expected owner version, ?3 recovery lease.     \
     * 'now' is one value for the whole step (Q15): the expiry test, the new  \
     * lease and the returned event time. A Started payout is taken over too  \
     * (P3); the new version fences its old owner's start and records. */    \
    X(OP_TAKEOVER,                                                             \
      "UPDATE operations SET owner_version = owner_version + 1,"               \
      "   lease_until = " SQ_NOW " + ?3"                                       \
      " WHERE operation_id = ?1 AND status IN " SQ_OWNED                       \
      "   AND lease_until < " SQ_NOW " AND owner_version = ?2"                 \
      " RETURNING " SQ_OP_COLS ", " SQ_NOW)                                    \
    /* og__op_insert (tests only): ?1..?7 the binding, ?8 owner version,     \
     * ?9 execution lease, ?10 submission window, ?11 kind, ?12 idempotency   \
     * key, ?13 client reference (NULL: the operation id). No claim. */      \
    X(OP_INSERT,                                                               \
      "INSERT INTO operations (" SQ_OP_INSERT_COLS ", kind, idempotency_key,"  \
      "   client_reference)"                                                   \
      " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, 'Admitted', ?8,"                    \
      "        t.now + ?9, t.now + ?10, t.now, ?11, ?12, ?13"                  \
      " FROM (SELECT " SQ_NOW " AS now) t"                                     \
      " RETURNING " SQ_OP_COLS)                                                \
    /* An operator's resolution: ?2 'Succeeded', 'Failed' or 'NotApplied',    \
     * ?3 reason, ?4 provider reference or NULL. */                            \
    X(OP_RESOLVE,                                                              \
      "UPDATE operations SET status = ?2, owner_version = owner_version + 1,"  \
      "   outcome_reason = ?3,"                                                \
      "   provider_reference = coalesce(?4, provider_reference),"              \
      "   updated_at = " SQ_NOW                                                \
      " WHERE operation_id = ?1 AND status = 'NeedsReconciliation'"            \
      " RETURNING owner_version, updated_at")                                  \
    /* The event of the write above, in its transaction: ?2 at, ?3 kind,      \
     * ?4 from, ?5 to, ?6 owner version after, ?7 reason, ?8 provider         \
     * reference, ?9 actor, ?10 evidence (NULL: none). */                     \
    X(OP_EVENT,                                                                \
      "INSERT INTO operation_events (operation_id, at, kind, from_status,"     \
      "   to_status, owner_version, reason, provider_reference, actor,"        \
      "   evidence)"                                                           \
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)")                     \
    X(OP_HISTORY,                                                              \
      "SELECT seq, at, kind, from_status, to_status, owner_version, reason,"   \
      "       provider_reference, actor, evidence"                             \
      " FROM operation_events WHERE operation_id = ?1 ORDER BY seq")           \
    /* Redemption recovery points (Q24). ?1 caller, ?2 idempotency key,    \
     * ?3 code hash, ?4 nonce, ?5 sealed. A row only when this statement     \
     * wrote the point; an existing one is never overwritten. */              \
    X(REDEMPTION_PUT,                                                          \
      "INSERT INTO redemptions (caller, idempotency_key, code_hash, nonce,"    \
      "   sealed, created_at)"                                                 \
      " VALUES (?1, ?2, ?3, ?4, ?5, " SQ_NOW ")"                               \
      " ON CONFLICT (caller, idempotency_key) DO NOTHING RETURNING 1")         \
    /* The key's own point first, else another point of the same code (?3   \
     * NULL: none asked for); one statement, one snapshot. */                 \
    X(REDEMPTION_GET,                                                          \
      "SELECT caller = ?1 AND idempotency_key = ?2, code_hash, nonce, sealed," \
      "       created_at"                                                      \
      " FROM redemptions"                                                      \
      " WHERE (caller = ?1 AND idempotency_key = ?2) OR code_hash = ?3"        \
      " ORDER BY 1 DESC LIMIT 1")                                              \
    X(SCHEMA_TABLE,                                                            \
      "SELECT count(*) FROM sqlite_schema"                                     \
      " WHERE type = 'table' AND name = 'og_schema_migrations'")               \
    X(SCHEMA_VERSION, "SELECT coalesce(max(version), 0) FROM og_schema_migrations") \
    X(READ_KEYS, "SELECT consumption_keys FROM og_store_settings")          \
    SQ_PAYOUT_STATEMENTS(X)

enum {
#define X(name, sql) SQ_##name,
    SQ_STATEMENTS(X)
#undef X
    SQ_N
};

static const char *const sq_sql[SQ_N] = {
#define X(name, sql) sql,
    SQ_STATEMENTS(X)
#undef X
};

/* Each statement's name, for og_store_explain's headings. */
static const char *const sq_names[SQ_N] = {
#define X(name, sql) #name,
    SQ_STATEMENTS(X)
#undef X
};

typedef struct sq_store {
    char *path;
    og_store_options opts;
    og__pool *pool;
    /* Group commit (see "Group commit" below): the queue of admissions
     * waiting for a leader, and whether one is running a batch. */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    struct sq_waiter *head, *tail;
    bool leading;
    og_consumption_keys keys; /* Q23: read by sq_read_keys at open */
} sq_store;

/* Statement NAME in the store's consumption keys (Q23). */
#define SQ_KEYED(s, NAME)                                                      \
    ((s)->keys == OG_KEYS_HASHED ? SQ_##NAME##_HASHED : SQ_##NAME)

typedef struct sq_conn {
    sqlite3 *db;
    sqlite3_stmt *st[SQ_N];
    int64_t deadline_us; /* CLOCK_MONOTONIC; the busy handler gives up here */
    uint32_t jitter;     /* xorshift state for the busy handler's sleeps */
} sq_conn;

static int64_t sq_mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* SQLite's busy handler: 0 gives up (SQLITE_BUSY, i.e. unavailable), 1 asks
 * SQLite to try again. Sleeps 50 us .. ~2 ms, growing with the attempt count,
 * jittered so that processes polling the same lock do not move in step (Q7). */
static int sq_busy(void *arg, int count)
{
    sq_conn *c = arg;
    int64_t left = c->deadline_us - sq_mono_us();
    int64_t cap = count < 5 ? INT64_C(50) << count : 2000;
    struct timespec ts;
    int64_t us;

    if (left <= 0)
        return 0;
    c->jitter ^= c->jitter << 13;
    c->jitter ^= c->jitter >> 17;
    c->jitter ^= c->jitter << 5;
    us = cap / 2 + (int64_t)(c->jitter % (uint32_t)(cap / 2 + 1));
    if (us > left)
        us = left;
    ts.tv_sec = (time_t)(us / 1000000);
    ts.tv_nsec = (long)(us % 1000000) * 1000;
    nanosleep(&ts, NULL);
    return 1;
}

/* Arms the deadline for one store call on c. */
static void sq_arm(sq_conn *c, int64_t deadline_us)
{
    c->deadline_us = deadline_us;
}

/* ===========================================================================
 * Connections
 * ========================================================================= */

/* og_consumption_key(issuer, grant_id) in SQL (Q23): the C function of
 * lib/core/consumption_key.c over the arguments' bytes. NULL for a NULL
 * argument, as a strict SQL function. */
static void sq_key_function(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    unsigned char key[OG_CONSUMPTION_KEY_LEN];
    const unsigned char *issuer, *grant_id;
    int issuer_len, grant_id_len;

    (void)argc;
    if (sqlite3_value_type(v[0]) == SQLITE_NULL ||
        sqlite3_value_type(v[1]) == SQLITE_NULL) {
        sqlite3_result_null(ctx);
        return;
    }
    /* text first, then its length: the documented order of the calls */
    issuer = sqlite3_value_text(v[0]);
    issuer_len = sqlite3_value_bytes(v[0]);
    grant_id = sqlite3_value_text(v[1]);
    grant_id_len = sqlite3_value_bytes(v[1]);
    if (!issuer || !grant_id) {
        sqlite3_result_error_nomem(ctx);
        return;
    }
    if (og__consumption_key((const char *)issuer, (size_t)issuer_len,
                            (const char *)grant_id, (size_t)grant_id_len,
                            key) != 0) {
        sqlite3_result_error(ctx, "og_consumption_key: argument too long", -1);
        return;
    }
    sqlite3_result_blob(ctx, key, sizeof key, SQLITE_TRANSIENT);
}

int og__sqlite_register_key_function(sqlite3 *db)
{
    return sqlite3_create_function_v2(
        db, "og_consumption_key", 2,
        SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, NULL,
        sq_key_function, NULL, NULL, NULL);
}

/* Applies the per-connection settings every store call relies on (Q4). */
static int sq_configure(sqlite3 *db, const og_store_options *o)
{
    int ms = (int)(o->timings.store_timeout_us / 1000);
    int rc;

    sqlite3_busy_timeout(db, ms > 0 ? ms : 1);
    /* foreign_keys: the schema's references hold here as in PostgreSQL. */
    rc = sqlite3_exec(db,
                      "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                      " PRAGMA foreign_keys=ON;",
                      NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return og__sqlite_classify(sqlite3_extended_errcode(db));
    return 0;
}

/* Opens a connection; create=true only for migrations, so opening a store
 * that was never migrated does not leave an empty file behind. */
static int sq_open_db(const sq_store *s, bool create, sqlite3 **out)
{
    sqlite3 *db = NULL;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX |
                (create ? SQLITE_OPEN_CREATE : 0);
    int rc = sqlite3_open_v2(s->path, &db, flags, NULL);

    if (rc != SQLITE_OK) {
        rc = db ? og__sqlite_classify(sqlite3_extended_errcode(db))
                : OG_ENOMEM;
        sqlite3_close(db);
        return rc;
    }
    sqlite3_extended_result_codes(db, 1);
    if (og__sqlite_register_key_function(db) != SQLITE_OK) { /* Q23 */
        rc = og__sqlite_classify(sqlite3_extended_errcode(db));
        sqlite3_close(db);
        return rc;
    }
    if ((rc = sq_configure(db, &s->opts)) < 0) {
        sqlite3_close(db);
        return rc;
    }
    *out = db;
    return 0;
}

static int sq_connect(void *ctx, void **conn)
{
    sq_conn *c = calloc(1, sizeof *c);
    int rc;

    if (!c)
        return OG_ENOMEM;
    if ((rc = sq_open_db(ctx, false, &c->db)) < 0) {
        free(c);
        return rc;
    }
    /* Replaces sq_configure's busy_timeout: the deadline is per call. */
    c->jitter = ((uint32_t)(uintptr_t)c ^ (uint32_t)getpid() ^
                 (uint32_t)sq_mono_us()) | 1u;
    c->deadline_us = sq_mono_us() + ((sq_store *)ctx)->opts.timings.store_timeout_us;
    sqlite3_busy_handler(c->db, sq_busy, c);
    *conn = c;
    return 0;
}

static void sq_disconnect(void *ctx, void *conn)
{
    sq_conn *c = conn;

    for (int i = 0; i < SQ_N; i++)
        sqlite3_finalize(c->st[i]);
    sqlite3_close(c->db);
    free(c);
}

static const og__pool_ops sq_pool_ops = {.connect = sq_connect,
                                         .disconnect = sq_disconnect};

/* The prepared statement i, reset and with bindings cleared, or NULL. */
static sqlite3_stmt *sq_stmt(sq_conn *c, int i)
{
    if (!c->st[i]) {
        if (sqlite3_prepare_v3(c->db, sq_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                               &c->st[i], NULL) != SQLITE_OK)
            return NULL;
    }
    sqlite3_reset(c->st[i]);
    sqlite3_clear_bindings(c->st[i]);
    return c->st[i];
}

/* The error for the connection's last failure. */
static int sq_err(sq_conn *c)
{
    return og__sqlite_classify(sqlite3_extended_errcode(c->db));
}

/* Runs a statement that returns no row. */
static int sq_exec(sq_conn *c, int i)
{
    sqlite3_stmt *st = sq_stmt(c, i);
    int rc;

    if (!st)
        return sq_err(c);
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : sq_err(c);
}

/* Ends a failed transaction. false when the connection's state is unknown
 * and it must be closed (Q6). */
static bool sq_rollback(sq_conn *c)
{
    for (int i = 0; i < SQ_N; i++)
        if (c->st[i])
            sqlite3_reset(c->st[i]);
    if (sqlite3_get_autocommit(c->db))
        return true; /* SQLite already rolled back (e.g. after an I/O error) */
    return sq_exec(c, SQ_ROLLBACK) == 0;
}

/* ===========================================================================
 * Rows
 * ========================================================================= */
static int sq_text(sqlite3_stmt *st, int col, char *dst, size_t n)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    return og__copy(dst, n, (const char *)t) < 0 ? OG_EINTERNAL : 0;
}

/* Copies a column that may be NULL ("" then) into a fixed buffer. */
static int sq_text_opt(sqlite3_stmt *st, int col, char *dst, size_t n)
{
    if (sqlite3_column_type(st, col) == SQLITE_NULL) {
        dst[0] = '\0';
        return 0;
    }
    return sq_text(st, col, dst, n);
}

/* Fills *op from the SQ_OP_COLS columns of the current row. */
static int sq_read_op(sqlite3_stmt *st, og_operation *op)
{
    int status;

    memset(op, 0, sizeof *op);
    if (sq_text(st, 0, op->operation_id, sizeof op->operation_id) < 0 ||
        sq_text(st, 1, op->issuer, sizeof op->issuer) < 0 ||
        sq_text(st, 2, op->grant_id, sizeof op->grant_id) < 0 ||
        sq_text(st, 3, op->caller_id, sizeof op->caller_id) < 0 ||
        sq_text(st, 4, op->account_id, sizeof op->account_id) < 0 ||
        sq_text(st, 5, op->amount, sizeof op->amount) < 0 ||
        sq_text(st, 6, op->currency, sizeof op->currency) < 0)
        return OG_EINTERNAL;
    status = og__op_status_parse((const char *)sqlite3_column_text(st, 7));
    if (status < 0)
        return OG_EINTERNAL;
    op->status = (og_op_status)status;
    op->owner_version = sqlite3_column_int64(st, 8);
    op->lease_until_us = sqlite3_column_int64(st, 9);
    op->submit_by_us = sqlite3_column_int64(st, 10);
    op->created_at_us = sqlite3_column_int64(st, 11);
    op->updated_at_us = sqlite3_column_int64(st, 12);
    if (sq_text_opt(st, 13, op->provider_reference,
                    sizeof op->provider_reference) < 0 ||
        sq_text_opt(st, 14, op->reason, sizeof op->reason) < 0 ||
        sq_text(st, 16, op->idempotency_key, sizeof op->idempotency_key) < 0 ||
        sq_text(st, 17, op->client_reference, sizeof op->client_reference) < 0)
        return OG_EINTERNAL;
    status = og__op_kind_parse((const char *)sqlite3_column_text(st, 15));
    if (status < 0)
        return OG_EINTERNAL;
    op->kind = (og_op_kind)status;
    return 0;
}

/* Reads the operation by id on c with statement which (SQ_READ_OP: live
 * only; SQ_READ_OP_ANY: live, else archived): 1 found, 0 not, negative
 * error. */
static int sq_read_op_by_id(sq_conn *c, int which, const char *id,
                            og_operation *op)
{
    sqlite3_stmt *st = sq_stmt(c, which);
    int rc;

    if (!st)
        return sq_err(c);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        rc = sq_read_op(st, op) < 0 ? OG_EINTERNAL : 1;
    else if (rc == SQLITE_DONE)
        rc = 0;
    else
        rc = sq_err(c);
    sqlite3_reset(st);
    return rc;
}

/* Steps st once: 1 when it yields a row (its columns readable until the next
 * step or reset), 0 when it is done, or the error. */
static int sq_step(sq_conn *c, sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);

    if (rc == SQLITE_ROW)
        return 1;
    return rc == SQLITE_DONE ? 0 : sq_err(c);
}

/* Runs st to completion — from its start, or after a row sq_step() returned,
 * never after it returned 0 (stepping a finished statement runs it again) —
 * and resets it. 0 or the error. */
static int sq_done(sq_conn *c, sqlite3_stmt *st)
{
    int rc;

    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        ;
    rc = rc == SQLITE_DONE ? 0 : sq_err(c);
    sqlite3_reset(st);
    return rc;
}

/* Binds text, or NULL for NULL or "" (no family, no operation). */
static void sq_bind_opt(sqlite3_stmt *st, int i, const char *text)
{
    if (text && text[0])
        sqlite3_bind_text(st, i, text, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

/* ===========================================================================
 * Families (Q9)
 * ========================================================================= */
typedef enum sq_family {
    SQ_FAM_UNNAMED = 0, /* the grant names no family: nothing to order */
    SQ_FAM_LIVE,
    SQ_FAM_MISSING,     /* never created: nothing was issued into it */
    SQ_FAM_REVOKED,
} sq_family;

/* The family's row, read inside the caller's write transaction. */
static int sq_family_state(sq_conn *c, const char *issuer, const char *family,
                           sq_family *state)
{
    sqlite3_stmt *st;
    int rc;

    if (!family[0]) {
        *state = SQ_FAM_UNNAMED;
        return 0;
    }
    if (!(st = sq_stmt(c, SQ_FAMILY_STATE)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, family, -1, SQLITE_STATIC);
    if ((rc = sq_step(c, st)) == 1)
        *state = sqlite3_column_int(st, 0) ? SQ_FAM_LIVE : SQ_FAM_REVOKED;
    else if (rc == 0)
        *state = SQ_FAM_MISSING;
    sqlite3_reset(st);
    return rc < 0 ? rc : 0;
}

/* A live family for issuance and tickets: creates a missing one. 1 live
 * (now), 0 revoked, or the error. */
static int sq_family_ensure(sq_conn *c, const char *issuer, const char *family)
{
    sq_family fam;
    sqlite3_stmt *st;
    int rc;

    if ((rc = sq_family_state(c, issuer, family, &fam)) < 0)
        return rc;
    if (fam == SQ_FAM_REVOKED)
        return 0;
    if (fam == SQ_FAM_LIVE || fam == SQ_FAM_UNNAMED)
        return 1;
    if (!(st = sq_stmt(c, SQ_FAMILY_CREATE)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, family, -1, SQLITE_STATIC);
    return (rc = sq_done(c, st)) < 0 ? rc : 1;
}

/* Binds ?1..?10 of a new operation's insert (SQ_INSERT_OP, SQ_OP_INSERT):
 * req's binding, the initial owner version, the lease and the window. */
static void sq_bind_new_op(sqlite3_stmt *st, const og__admit_req *req,
                           const og_timings *t)
{
    sqlite3_bind_text(st, 1, req->operation_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, req->issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, req->grant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, req->caller_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, req->account_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, req->amount, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, req->currency, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 8, OG__INITIAL_OWNER_VERSION);
    sqlite3_bind_int64(st, 9, t->execution_lease_us);
    sqlite3_bind_int64(st, 10, t->submission_window_us);
}

/* ===========================================================================
 * The admission
 * ========================================================================= */

/* The claim for req in its form, on SQLite's clock (Q3): by op_id, or by the
 * consume verdict when op_id is NULL. 1 when this statement took the grant
 * (row form: the row's family copied into row_family, "" for none), 0 when
 * it took nothing, or the error. The caller has checked the family (Q9). */
static int sq_claim(sq_store *s, sq_conn *c, const og__admit_req *req,
                    const char *op_id, char row_family[OG_ID_MAX + 1])
{
    const og_timings *t = &s->opts.timings;
    sqlite3_stmt *st;
    int rc, claimed;

    if (req->form == OG_FORM_ROW) {
        if (!(st = sq_stmt(c, SQ_ROW_CLAIM)))
            return sq_err(c);
        sq_bind_opt(st, 3, op_id);
        sqlite3_bind_int64(st, 4, t->admission_leeway_us);
    } else {
        if (!(st = sq_stmt(c, SQ_KEYED(s, CLAIM))))
            return sq_err(c);
        sq_bind_opt(st, 3, op_id);
        sqlite3_bind_int64(st, 4, req->expires_at_us);
        sqlite3_bind_int64(st, 5, t->admission_leeway_us);
        sqlite3_bind_text(st, 6, op_id ? "admission" : "consume", -1,
                          SQLITE_STATIC);
    }
    sqlite3_bind_text(st, 1, req->issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, req->grant_id, -1, SQLITE_STATIC);
    /* RETURNING: a row only if this statement took the grant. */
    if ((claimed = sq_step(c, st)) <= 0) {
        sqlite3_reset(st);
        return claimed;
    }
    if (req->form == OG_FORM_ROW && row_family &&
        sq_text_opt(st, 0, row_family, OG_ID_MAX + 1) < 0) {
        sqlite3_reset(st);
        return OG_EINTERNAL;
    }
    if ((rc = sq_done(c, st)) < 0)
        return rc;
    return 1;
}

static int sq_kind_parse(const char *text, og__claim_kind *kind)
{
    if (!text)
        return OG_EINTERNAL;
    if (strcmp(text, "admission") == 0)
        *kind = OG__CLAIM_ADMISSION;
    else if (strcmp(text, "revocation") == 0)
        *kind = OG__CLAIM_REVOCATION;
    else if (strcmp(text, "consume") == 0)
        *kind = OG__CLAIM_CONSUME;
    else
        return OG_EINTERNAL;
    return 0;
}

/* After a claim that took nothing, inside the same transaction: what holds
 * req's grant, in the shape both forms share, and whether its family
 * blocked the claim (fam: sq_family_state() of the same transaction). */
static int sq_consumption(const sq_store *s, sq_conn *c,
                          const og__admit_req *req, sq_family fam,
                          og__consumption *cons)
{
    og__consumption r = {0};
    sqlite3_stmt *st;
    int rc;

    if (req->form == OG_FORM_ROW) {
        if (!(st = sq_stmt(c, SQ_READ_GRANT)))
            return sq_err(c);
    } else if (!(st = sq_stmt(c, SQ_KEYED(s, READ_CONSUMPTION)))) {
        return sq_err(c);
    }
    sqlite3_bind_text(st, 1, req->issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, req->grant_id, -1, SQLITE_STATIC);
    rc = sq_step(c, st);
    if (rc == 0 && req->form == OG_FORM_ROW) {
        r.not_issued = true; /* no row: nothing was issued under the key */
    } else if (rc == 1 && req->form == OG_FORM_ROW) {
        if (sqlite3_column_type(st, 1) != SQLITE_NULL) {
            r.present = r.has_operation = true;
            r.kind = OG__CLAIM_ADMISSION;
            rc = sq_text(st, 1, r.operation_id, sizeof r.operation_id);
        } else if (sqlite3_column_int(st, 0)) {
            r.present = true;
            r.kind = OG__CLAIM_CONSUME;
        } else if (sqlite3_column_int(st, 2)) {
            r.present = true;
            r.kind = OG__CLAIM_REVOCATION;
        } /* else a live row: the deadline or the family refused it */
    } else if (rc == 1) {
        r.present = true;
        rc = sq_kind_parse((const char *)sqlite3_column_text(st, 1), &r.kind);
        if (rc == 0 && r.kind == OG__CLAIM_ADMISSION) {
            r.has_operation = true;
            rc = sq_text(st, 0, r.operation_id, sizeof r.operation_id);
        }
    }
    sqlite3_reset(st);
    if (rc < 0)
        return rc;
    r.family_blocked = fam == SQ_FAM_MISSING || fam == SQ_FAM_REVOKED;
    *cons = r;
    return 0;
}

/* After a claim that took nothing, inside the same transaction: read what
 * holds the key and what the operation id names, and classify. */
static int sq_followup(const sq_store *s, sq_conn *c, const og__admit_req *req,
                       sq_family fam, og_admission *out)
{
    og__consumption cons;
    og_operation op;
    int rc;

    if ((rc = sq_consumption(s, c, req, fam, &cons)) < 0)
        return rc;
    rc = sq_read_op_by_id(c, SQ_READ_OP_ANY, req->operation_id, &op); /* Q22 */
    if (rc < 0)
        return rc;
    og__classify_unclaimed(req, &cons, rc == 1 ? &op : NULL, out);
    return 0;
}

/* One admission inside the batch's write transaction, in its own savepoint:
 * the family's row (Q9), the claim, then the operation insert (Q1, Q2).
 * Returns 0 with *out, or a negative error. *keep says whether the savepoint
 * holds a write to keep (ADMITTED); every other answer rolls the savepoint
 * back. */
static int sq_admit_one(sq_store *s, sq_conn *c, const og__admit_req *req,
                        og_admission *out, bool *keep)
{
    const og_timings *t = &s->opts.timings;
    og_admission res;
    sqlite3_stmt *st;
    sq_family fam;
    int rc, step;

    *keep = false;
    /* 1. The family, read under the write lock: a revocation committed
     * before this transaction is seen, one after it waits for it (Q9). */
    if ((rc = sq_family_state(c, req->issuer, req->family, &fam)) < 0)
        return rc;
    if (fam == SQ_FAM_MISSING || fam == SQ_FAM_REVOKED)
        return sq_followup(s, c, req, fam, out); /* no claim; report */

    /* 2. The claim: the key (token form) or the row (row form) and the
     * deadline, on SQLite's clock (Q3). */
    if ((rc = sq_claim(s, c, req, req->operation_id, NULL)) < 0)
        return rc;
    if (rc == 0)
        return sq_followup(s, c, req, fam, out); /* nothing written; report */

    /* 3. The operation, bound to the grant, in the same transaction (row
     * form: chained to the row's UPDATE exactly as to the key's insert). */
    if (!(st = sq_stmt(c, SQ_INSERT_OP)))
        return sq_err(c);
    sq_bind_new_op(st, req, t);
    step = sqlite3_step(st);
    if (step != SQLITE_ROW) {
        int ext = sqlite3_extended_errcode(c->db);
        sqlite3_reset(st);
        /* Q2: a taken operation id or a grant already bound to an operation
         * refuses the whole admission; rolling back the savepoint undoes the
         * claim. */
        if (ext == SQLITE_CONSTRAINT_PRIMARYKEY || ext == SQLITE_CONSTRAINT_UNIQUE) {
            memset(out, 0, sizeof *out);
            out->outcome = OG_OUTCOME_REFUSED;
            out->refusal = ext == SQLITE_CONSTRAINT_PRIMARYKEY
                               ? OG_REFUSAL_OPERATION_ID_TAKEN
                               : OG_REFUSAL_GRANT_SPENT;
            return 0;
        }
        return og__sqlite_classify(ext);
    }
    memset(&res, 0, sizeof res);
    res.outcome = OG_OUTCOME_ADMITTED;
    rc = sq_read_op(st, &res.operation);
    step = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc < 0)
        return rc;
    if (step != SQLITE_DONE)
        return sq_err(c);
    *out = res;
    *keep = true;
    return 0;
}

/* ===========================================================================
 * Group commit
 *
 * SQLite has one writer at a time and every commit fsyncs the WAL (Q4), so
 * the obvious design — one transaction per admission — spends one fsync per
 * admission and makes concurrent callers poll for the lock. Instead, callers
 * of one store object queue; one of them, the leader, takes every queued
 * admission (up to SQ_BATCH_MAX), runs them in ONE BEGIN IMMEDIATE
 * transaction, each in its own SAVEPOINT, and commits once. Invariants:
 *
 *   G1  Each admission is still atomic on its own: its claim and its
 *       operation insert are one savepoint, released together or rolled
 *       back together.
 *   G2  No answer before the commit: every caller in a batch learns its
 *       outcome only after COMMIT returned SQLITE_OK. An admission refused
 *       because of a batch-mate's claim is therefore refused on committed
 *       state. A failed commit answers OG_ESTORE_UNAVAILABLE to every caller
 *       in the batch — true, since none of their writes is confirmed.
 *   G3  A caller whose deadline passes while it is still queued leaves the
 *       queue with OG_ESTORE_UNAVAILABLE; nothing of it has run. A caller
 *       taken into a batch waits for the batch, which is bounded by the
 *       earliest deadline in it.
 *   G4  An error confined to one admission (a defect such as a CHECK
 *       failure) rolls back that admission's savepoint only; an error that
 *       ends the transaction (I/O, full disk) fails the whole batch.
 *   G5  Each admission reads its family's row inside the batch's transaction
 *       (Q9), so a family revocation comes before or after the whole batch,
 *       never between its admissions, and it cannot list a grant the batch
 *       admitted: its claim is committed before the revocation runs.
 * ========================================================================= */
#define SQ_BATCH_MAX 128

typedef struct sq_waiter {
    const og__admit_req *req;
    og_admission res;
    int rc;
    int64_t deadline_us;
    bool taken; /* in a batch: its result is coming */
    bool done;
    struct sq_waiter *next;
} sq_waiter;

/* Runs a savepoint statement; false when the transaction is gone. */
static bool sq_savepoint(sq_conn *c, int which)
{
    return sq_exec(c, which) == 0 && !sqlite3_get_autocommit(c->db);
}

/* Runs batch[0..n) in one write transaction on c; fills each rc/res. */
static void sq_run_batch(sq_store *s, sq_conn *c, sq_waiter **batch, int n)
{
    int64_t deadline = batch[0]->deadline_us;
    int rc, i;

    for (i = 1; i < n; i++)
        if (batch[i]->deadline_us < deadline)
            deadline = batch[i]->deadline_us;
    sq_arm(c, deadline);

    if ((rc = sq_exec(c, SQ_BEGIN)) < 0) /* lock wait past the deadline */
        goto fail_all;
    for (i = 0; i < n; i++) {
        bool keep = false;

        if (!sq_savepoint(c, SQ_SAVEPOINT)) {
            rc = sq_err(c);
            goto fail_all;
        }
        batch[i]->rc = sq_admit_one(s, c, batch[i]->req, &batch[i]->res, &keep);
        if (sqlite3_get_autocommit(c->db)) { /* G4: SQLite ended the txn */
            rc = batch[i]->rc < 0 ? batch[i]->rc : OG_ESTORE_UNAVAILABLE;
            goto fail_all;
        }
        for (int k = 0; k < SQ_N; k++) /* no statement may stay active */
            if (c->st[k])
                sqlite3_reset(c->st[k]);
        if (batch[i]->rc < 0 || !keep) {
            if (!sq_savepoint(c, SQ_ROLLBACK_TO)) { /* G1 */
                rc = OG_ESTORE_UNAVAILABLE;
                goto fail_all;
            }
        }
        if (sq_exec(c, SQ_RELEASE) < 0) {
            rc = sq_err(c);
            goto fail_all;
        }
    }
    if ((rc = sq_exec(c, SQ_COMMIT)) < 0) /* G2 */
        goto fail_all;
    for (i = 0; i < n; i++) /* tests only (fault.c): committed, ack lost */
        if (batch[i]->rc == 0 && batch[i]->res.outcome == OG_OUTCOME_ADMITTED &&
            og__fault("admit_ack_lost"))
            batch[i]->rc = OG_ESTORE_UNAVAILABLE;
    return;

fail_all:
    if (rc >= 0)
        rc = OG_ESTORE_UNAVAILABLE;
    /* Not committed, or not confirmed: every caller in the batch gets the
     * error that ended the transaction, never an outcome (G2). */
    for (i = 0; i < n; i++)
        batch[i]->rc = rc;
}

/* Takes up to SQ_BATCH_MAX waiters off the queue (FIFO). Called with mu. */
static int sq_take_batch(sq_store *s, sq_waiter **batch)
{
    int n = 0;

    while (s->head && n < SQ_BATCH_MAX) {
        sq_waiter *w = s->head;
        s->head = w->next;
        if (!s->head)
            s->tail = NULL;
        w->taken = true;
        batch[n++] = w;
    }
    return n;
}

/* Removes w from the queue (it gave up before being taken). With mu. */
static void sq_unqueue(sq_store *s, sq_waiter *w)
{
    sq_waiter **pp = &s->head, *prev = NULL;

    while (*pp && *pp != w) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (*pp) {
        *pp = w->next;
        if (s->tail == w)
            s->tail = prev;
    }
}

static struct timespec sq_abs_mono(int64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    return ts;
}

static int sq_admit(void *impl, const og__admit_req *req, og_admission *out)
{
    sq_store *s = impl;
    sq_waiter w = {.req = req, .rc = 0,
                   .deadline_us = sq_mono_us() + s->opts.timings.store_timeout_us};
    sq_waiter *batch[SQ_BATCH_MAX];

    pthread_mutex_lock(&s->mu);
    if (s->tail)
        s->tail->next = &w;
    else
        s->head = &w;
    s->tail = &w;

    while (!w.done) {
        if (!s->leading) {
            /* Lead: run everything queued, then hand over. */
            void *conn = NULL;
            bool broken = false;
            int n, rc;

            s->leading = true;
            n = sq_take_batch(s, batch);
            pthread_mutex_unlock(&s->mu);

            rc = og__pool_get(s->pool, &conn);
            if (rc < 0) {
                for (int i = 0; i < n; i++)
                    batch[i]->rc = rc;
            } else {
                sq_run_batch(s, conn, batch, n);
                broken = !sq_rollback(conn); /* no-op after a commit */
                og__pool_put(s->pool, conn, broken);
            }

            pthread_mutex_lock(&s->mu);
            for (int i = 0; i < n; i++)
                batch[i]->done = true;
            s->leading = false;
            pthread_cond_broadcast(&s->cv);
            continue;
        }
        if (!w.taken && sq_mono_us() >= w.deadline_us) {
            sq_unqueue(s, &w); /* G3: never ran */
            w.rc = OG_ESTORE_UNAVAILABLE;
            break;
        }
        if (w.taken) {
            pthread_cond_wait(&s->cv, &s->mu);
        } else {
            struct timespec until = sq_abs_mono(w.deadline_us);
            pthread_cond_timedwait(&s->cv, &s->mu, &until);
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (w.rc == 0)
        *out = w.res;
    return w.rc;
}

static int sq_operation_get(void *impl, const char *id, og_operation *out)
{
    sq_store *s = impl;
    void *conn;
    int rc;

    if ((rc = og__pool_get(s->pool, &conn)) < 0)
        return rc;
    sq_arm(conn, sq_mono_us() + s->opts.timings.store_timeout_us);
    rc = sq_read_op_by_id(conn, SQ_READ_OP, id, out);
    og__pool_put(s->pool, conn, false);
    return rc;
}

/* ===========================================================================
 * Grant lifecycle: issuance, revocation, families, the consume verdict,
 * tickets. Each call is ONE write transaction (Q8): sq_begin() takes a pool
 * connection, arms the call's deadline and runs BEGIN IMMEDIATE; sq_end()
 * commits when the call wrote something to keep, rolls back otherwise, and
 * gives the connection back.
 * ========================================================================= */

/* sq_begin with the BEGIN statement `which`: SQ_BEGIN (IMMEDIATE: the
 * write lock first) or SQ_BEGIN_READ (one snapshot for several reads). */
static int sq_begin_as(sq_store *s, int which, sq_conn **out)
{
    int64_t deadline = sq_mono_us() + s->opts.timings.store_timeout_us;
    void *conn;
    int rc;

    if ((rc = og__pool_get(s->pool, &conn)) < 0)
        return rc;
    sq_arm(conn, deadline); /* the lock wait ends here (Q7) */
    if ((rc = sq_exec(conn, which)) < 0) {
        og__pool_put(s->pool, conn, !sq_rollback(conn));
        return rc;
    }
    *out = conn;
    return 0;
}

static int sq_begin(sq_store *s, sq_conn **out)
{
    return sq_begin_as(s, SQ_BEGIN, out);
}

/* Ends the transaction sq_begin() opened: COMMIT when rc is 0 and keep,
 * else ROLLBACK. Returns rc, or the commit's error (the write is then not
 * confirmed: OG_ESTORE_UNAVAILABLE, Q4). */
static int sq_end(sq_store *s, sq_conn *c, int rc, bool keep)
{
    if (rc == 0 && keep)
        rc = sq_exec(c, SQ_COMMIT);
    og__pool_put(s->pool, c, !sq_rollback(c)); /* no-op after COMMIT (Q6) */
    return rc;
}

/* The fallback retention beyond now (Q12). */
static int64_t sq_fallback_us(const og_timings *t)
{
    return t->max_grant_lifetime_us + t->issue_time_skew_us +
           t->admission_leeway_us;
}

/* ---- issuance ----------------------------------------------------------- */

static int sq_issue_in(sq_store *s, sq_conn *c, const og__issuance_req *req,
                       og_issue_outcome *out, bool *keep)
{
    sqlite3_stmt *st;
    int rc;

    /* The family first: ordered against its revocation (Q9). */
    if ((rc = sq_family_ensure(c, req->issuer, req->family)) <= 0) {
        *out = OG_ISSUE_FAMILY_REVOKED;
        return rc;
    }
    if (!(st = sq_stmt(c, SQ_ISSUANCE_INSERT)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, req->issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, req->grant_id, -1, SQLITE_STATIC);
    sq_bind_opt(st, 3, req->family);
    sqlite3_bind_text(st, 4, req->subject, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, req->action, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, req->params_digest, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 7, req->issued_at_us);
    if (req->expires_at_us != 0)
        sqlite3_bind_int64(st, 8, req->expires_at_us);
    else
        sqlite3_bind_null(st, 8); /* no trusted expiry: fallback retention */
    sqlite3_bind_text(st, 9, req->form == OG_FORM_ROW ? "row" : "token", -1,
                      SQLITE_STATIC);
    if ((rc = sq_step(c, st)) <= 0) {
        sqlite3_reset(st);
        /* The key was issued before. A family created above stays, as in
         * PostgreSQL's single statement, so both backends hold the same
         * families after the same history. */
        *out = OG_ISSUE_DUPLICATE_ID;
        *keep = true;
        return rc;
    }
    if ((rc = sq_done(c, st)) < 0)
        return rc;
    if (req->form == OG_FORM_ROW) {
        if (!(st = sq_stmt(c, SQ_GRANT_INSERT)))
            return sq_err(c);
        sqlite3_bind_text(st, 1, req->issuer, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, req->grant_id, -1, SQLITE_STATIC);
        sq_bind_opt(st, 3, req->family);
        sqlite3_bind_int64(st, 4, req->expires_at_us);
        if ((rc = sq_done(c, st)) < 0)
            return rc;
    }
    *out = OG_ISSUE_RECORDED;
    *keep = true;
    return 0;
}

static int sq_issuance_record(void *impl, const og__issuance_req *req,
                              og_issue_outcome *out)
{
    sq_store *s = impl;
    og_issue_outcome o = OG_ISSUE_RECORDED;
    bool keep = false;
    sq_conn *c;
    int rc;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_issue_in(s, c, req, &o, &keep);
    rc = sq_end(s, c, rc, keep);
    if (rc == 0)
        *out = o;
    return rc;
}

/* ---- one grant's revocation --------------------------------------------- */

static int sq_revoke_in(sq_store *s, sq_conn *c, const og__revoke_req *req,
                        og_revoke_outcome *out, bool *keep)
{
    const og_timings *t = &s->opts.timings;
    sqlite3_stmt *st;
    int rc;

    if (req->form == OG_FORM_ROW) {
        if (!(st = sq_stmt(c, SQ_REVOKE_ROW)))
            return sq_err(c);
    } else {
        if (!(st = sq_stmt(c, SQ_KEYED(s, REVOKE_TOKEN))))
            return sq_err(c);
        sqlite3_bind_int64(st, 3, req->trusted_expires_at_us);
        sqlite3_bind_int64(st, 4, t->admission_leeway_us);
        sqlite3_bind_int64(st, 5, sq_fallback_us(t));
    }
    sqlite3_bind_text(st, 1, req->issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, req->grant_id, -1, SQLITE_STATIC);
    if ((rc = sq_step(c, st)) < 0) {
        sqlite3_reset(st);
        return rc;
    }
    if (rc == 1) {
        if ((rc = sq_done(c, st)) < 0)
            return rc;
        *out = OG_REVOKE_REVOKED;
        *keep = true;
        return 0;
    }
    sqlite3_reset(st);

    /* Nothing written: the key (row) is held already, or there is no proof
     * that the grant was ever issued. */
    if (!(st = sq_stmt(c, req->form == OG_FORM_ROW
                              ? SQ_READ_GRANT
                              : SQ_KEYED(s, READ_CONSUMPTION))))
        return sq_err(c);
    sqlite3_bind_text(st, 1, req->issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, req->grant_id, -1, SQLITE_STATIC);
    rc = sq_step(c, st);
    sqlite3_reset(st);
    if (rc < 0)
        return rc;
    *out = rc == 1 ? OG_REVOKE_ALREADY_USED_OR_REVOKED : OG_REVOKE_NOT_ISSUED;
    return 0;
}

static int sq_revoke(void *impl, const og__revoke_req *req,
                     og_revoke_outcome *out)
{
    sq_store *s = impl;
    og_revoke_outcome o = OG_REVOKE_REVOKED;
    bool keep = false;
    sq_conn *c;
    int rc;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_revoke_in(s, c, req, &o, &keep);
    rc = sq_end(s, c, rc, keep);
    if (rc == 0)
        *out = o;
    return rc;
}

/* ---- family revocation -------------------------------------------------- */

static int sq_strcmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs a RETURNING grant_id statement, pushing each id onto list (NULL:
 * discarded). 0 or the error. */
static int sq_collect(sq_conn *c, sqlite3_stmt *st, og_strv *list)
{
    int rc;

    while ((rc = sq_step(c, st)) == 1) {
        const char *id = (const char *)sqlite3_column_text(st, 0);

        if (!id) {
            rc = OG_EINTERNAL;
            break;
        }
        if (list && (rc = og__strv_push(list, id)) < 0)
            break;
    }
    sqlite3_reset(st);
    return rc;
}

/* A hashed store's claims of the family's live token-form grants (Q23): the
 * table cannot RETURN a grant id, so the grants are listed (FAMILY_TOKENS:
 * the very rows and retention FAMILY_REVOKE_TOKENS would claim, at one
 * 'now') and each key is claimed on its own, pushing the ids whose claim
 * took the key. Under the write lock (Q1) nothing else runs in between, so
 * this claims what the readable set-based statement claims. */
static int sq_family_claim_hashed(sq_conn *c, const og_timings *t,
                                  const char *issuer, const char *family,
                                  int64_t fallback_us, og_strv *list)
{
    sqlite3_stmt *grants, *claim;
    int rc, took;

    if (!(grants = sq_stmt(c, SQ_FAMILY_TOKENS)))
        return sq_err(c);
    sqlite3_bind_text(grants, 1, issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(grants, 2, family, -1, SQLITE_STATIC);
    sqlite3_bind_int64(grants, 3, t->admission_leeway_us);
    sqlite3_bind_int64(grants, 4, fallback_us);
    while ((rc = sq_step(c, grants)) == 1) {
        const char *id = (const char *)sqlite3_column_text(grants, 0);

        if (!id) {
            rc = OG_EINTERNAL;
            break;
        }
        /* grant_issuance is read, grant_consumptions written: the listing
         * statement may stay active across the claims. */
        if (!(claim = sq_stmt(c, SQ_FAMILY_TOKEN_CLAIM_HASHED))) {
            rc = sq_err(c);
            break;
        }
        sqlite3_bind_text(claim, 1, issuer, -1, SQLITE_STATIC);
        sqlite3_bind_text(claim, 2, id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(claim, 3, sqlite3_column_int64(grants, 1));
        sqlite3_bind_int64(claim, 4, sqlite3_column_int64(grants, 2));
        took = sq_step(c, claim); /* 1: RETURNING, this claim took it */
        if (took != 1) {
            sqlite3_reset(claim);
            if ((rc = took) < 0)
                break;
            continue;
        }
        if ((rc = sq_done(c, claim)) < 0 ||
            (list && (rc = og__strv_push(list, id)) < 0))
            break;
    }
    sqlite3_reset(grants);
    return rc;
}

/* Revokes (issuer, family) inside c's transaction: marks the family's row
 * revoked (creating it revoked when never seen), then revokes its live
 * token-form grants (claims their keys as revocations) and its live rows.
 * Appends the grants this call revoked to *list (NULL: discarded), sorted
 * bytewise; none when the family was revoked already. *keep when anything
 * was written. */
static int sq_family_revoke_in(sq_store *s, sq_conn *c, const char *issuer,
                               const char *family, og_strv *list, bool *keep)
{
    const og_timings *t = &s->opts.timings;
    size_t first = list ? list->n : 0;
    sqlite3_stmt *st;
    int rc;

    if (!(st = sq_stmt(c, SQ_FAMILY_REVOKE)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, family, -1, SQLITE_STATIC);
    if ((rc = sq_step(c, st)) <= 0) {
        sqlite3_reset(st);
        return rc; /* 0: revoked before; its grants were revoked then */
    }
    if ((rc = sq_done(c, st)) < 0)
        return rc;
    *keep = true;

    if (s->keys == OG_KEYS_HASHED) {
        rc = sq_family_claim_hashed(c, t, issuer, family, sq_fallback_us(t),
                                    list);
    } else {
        if (!(st = sq_stmt(c, SQ_FAMILY_REVOKE_TOKENS)))
            return sq_err(c);
        sqlite3_bind_text(st, 1, issuer, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, family, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, t->admission_leeway_us);
        sqlite3_bind_int64(st, 4, sq_fallback_us(t));
        rc = sq_collect(c, st, list);
    }
    if (rc < 0)
        return rc;

    if (!(st = sq_stmt(c, SQ_FAMILY_REVOKE_ROWS)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, family, -1, SQLITE_STATIC);
    if ((rc = sq_collect(c, st, list)) < 0)
        return rc;
    if (list && list->n > first)
        qsort(list->v + first, list->n - first, sizeof *list->v, sq_strcmp);
    return 0;
}

static int sq_family_revoke(void *impl, const char *issuer, const char *family,
                            og_strv *out)
{
    sq_store *s = impl;
    og_strv list = {NULL, 0};
    bool keep = false;
    sq_conn *c;
    int rc;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_family_revoke_in(s, c, issuer, family, &list, &keep);
    rc = sq_end(s, c, rc, keep);
    if (rc < 0) {
        og_strv_free(&list); /* nothing committed: nothing to report */
        return rc;
    }
    *out = list;
    return 0;
}

/* ---- the consume verdict ------------------------------------------------ */

static int sq_consume_in(sq_store *s, sq_conn *c, const og__admit_req *req,
                         og_consume_result *out, bool *keep)
{
    og__consumption cons;
    sq_family fam;
    int rc;

    memset(out, 0, sizeof *out);
    if ((rc = sq_family_state(c, req->issuer, req->family, &fam)) < 0)
        return rc;
    if (fam != SQ_FAM_MISSING && fam != SQ_FAM_REVOKED) {
        /* The admission's claim with no operation (Q9, Q3). */
        if ((rc = sq_claim(s, c, req, NULL, out->family)) < 0)
            return rc;
        if (rc == 1) {
            if (req->form == OG_FORM_TOKEN)
                memcpy(out->family, req->family, sizeof out->family);
            out->consumed = true;
            out->refusal = OG_REFUSAL_NONE;
            *keep = true;
            return 0;
        }
    }
    if ((rc = sq_consumption(s, c, req, fam, &cons)) < 0)
        return rc;
    out->consumed = false; /* a denial, without exception */
    out->refusal = og__classify_consume(&cons);
    return 0;
}

static int sq_consume(void *impl, const og__admit_req *req,
                      og_consume_result *out)
{
    sq_store *s = impl;
    og_consume_result res;
    bool keep = false;
    sq_conn *c;
    int rc;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_consume_in(s, c, req, &res, &keep);
    rc = sq_end(s, c, rc, keep);
    if (rc == 0)
        *out = res;
    return rc;
}

/* ---- tickets ------------------------------------------------------------ */

static int sq_ticket_insert(sq_conn *c, const char *hash, const char *issuer,
                            const char *family)
{
    sqlite3_stmt *st = sq_stmt(c, SQ_TICKET_INSERT);

    if (!st)
        return sq_err(c);
    sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, family, -1, SQLITE_STATIC);
    return sq_done(c, st);
}

static int sq_ticket_create(void *impl, const char *issuer, const char *family,
                            const char *hash, og_ticket_outcome *out)
{
    sq_store *s = impl;
    og_ticket_outcome o = OG_TICKET_FAMILY_REVOKED;
    bool keep = false;
    sq_conn *c;
    int rc;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    /* The family first, ordered against its revocation (Q9). */
    if ((rc = sq_family_ensure(c, issuer, family)) == 1 &&
        (rc = sq_ticket_insert(c, hash, issuer, family)) == 0) {
        o = OG_TICKET_ISSUED;
        keep = true;
    }
    rc = sq_end(s, c, rc < 0 ? rc : 0, keep);
    if (rc == 0)
        *out = o;
    return rc;
}

static int sq_ticket_rotate_in(sq_store *s, sq_conn *c, const char *old_hash,
                               const char *new_hash, og_ticket_outcome *out,
                               char *issuer, char *family, bool *keep)
{
    sqlite3_stmt *st;
    bool rotated = false, revoked = false;
    int rc;

    /* The rotation: the old ticket, live and in a live family, is marked
     * rotated and the new one created in its family. */
    if (!(st = sq_stmt(c, SQ_TICKET_ROTATE)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, old_hash, -1, SQLITE_STATIC);
    if ((rc = sq_step(c, st)) == 1) {
        if (sq_text(st, 0, issuer, OG_ID_MAX + 1) < 0 ||
            sq_text(st, 1, family, OG_ID_MAX + 1) < 0) {
            sqlite3_reset(st);
            return OG_EINTERNAL;
        }
        if ((rc = sq_done(c, st)) < 0 ||
            (rc = sq_ticket_insert(c, new_hash, issuer, family)) < 0)
            return rc;
        *out = OG_TICKET_ISSUED;
        *keep = true;
        return 0;
    }
    sqlite3_reset(st);
    if (rc < 0)
        return rc;

    /* Nothing rotated: unknown, reused, or its family is revoked. */
    if (!(st = sq_stmt(c, SQ_TICKET_READ)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, old_hash, -1, SQLITE_STATIC);
    if ((rc = sq_step(c, st)) == 1) {
        rotated = sqlite3_column_int(st, 0) != 0;
        revoked = sqlite3_column_int(st, 3) != 0;
        if (sq_text(st, 1, issuer, OG_ID_MAX + 1) < 0 ||
            sq_text(st, 2, family, OG_ID_MAX + 1) < 0)
            rc = OG_EINTERNAL;
    }
    sqlite3_reset(st);
    if (rc <= 0) {
        *out = OG_TICKET_NOT_FOUND;
        return rc;
    }
    if (rotated) {
        /* Reuse, including a concurrent presentation that lost the race:
         * theft. The family goes in this same transaction (Q11). */
        *out = OG_TICKET_REUSED;
        return sq_family_revoke_in(s, c, issuer, family, NULL, keep);
    }
    if (!revoked) /* live, unrotated, family live: the UPDATE would have run */
        return OG_EINTERNAL;
    *out = OG_TICKET_FAMILY_REVOKED;
    return 0;
}

static int sq_ticket_rotate(void *impl, const char *old_hash,
                            const char *new_hash, og_ticket_outcome *out,
                            char *issuer, char *family)
{
    sq_store *s = impl;
    og_ticket_outcome o = OG_TICKET_NOT_FOUND;
    char iss[OG_ID_MAX + 1] = "", fam[OG_ID_MAX + 1] = "";
    bool keep = false;
    sq_conn *c;
    int rc;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_ticket_rotate_in(s, c, old_hash, new_hash, &o, iss, fam, &keep);
    rc = sq_end(s, c, rc, keep);
    if (rc < 0)
        return rc;
    *out = o;
    if (iss[0]) { /* known: the ticket exists */
        memcpy(issuer, iss, sizeof iss);
        memcpy(family, fam, sizeof fam);
    }
    return 0;
}

/* ===========================================================================
 * Execution: the ownership protocol (Q13-Q18). Each write is ONE write
 * transaction (sq_begin/sq_end, as in Q8): the conditional UPDATE on
 * (status, owner_version) and its event row commit together, or nothing
 * does. The reads run on a pool connection without a transaction: one
 * SELECT is one snapshot in WAL mode.
 * ========================================================================= */

/* Appends the event of the write just made, in its transaction (Q13). */
static int sq_op_event(sq_conn *c, const char *id, int64_t at, const char *kind,
                       og_op_status from, og_op_status to,
                       int64_t owner_version, const char *reason,
                       const char *provider_reference, const char *actor,
                       const char *evidence)
{
    sqlite3_stmt *st = sq_stmt(c, SQ_OP_EVENT);

    if (!st)
        return sq_err(c);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, at);
    sqlite3_bind_text(st, 3, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, og_op_status_name(from), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, og_op_status_name(to), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, owner_version);
    sq_bind_opt(st, 7, reason);
    sq_bind_opt(st, 8, provider_reference);
    sqlite3_bind_text(st, 9, actor, -1, SQLITE_STATIC);
    sq_bind_opt(st, 10, evidence);
    return sq_done(c, st);
}

/* Reads a status column of the current row; OG_EINTERNAL when it is not
 * one (the schema's CHECK forbids that). */
static int sq_status_col(sqlite3_stmt *st, int col, og_op_status *out)
{
    int v = og__op_status_parse((const char *)sqlite3_column_text(st, col));

    if (v < 0)
        return OG_EINTERNAL;
    *out = (og_op_status)v;
    return 0;
}

static int sq_op_may_submit(void *impl, const char *id, int64_t owner_version,
                            bool *may)
{
    sq_store *s = impl;
    sqlite3_stmt *st;
    void *conn;
    int rc;

    if ((rc = og__pool_get(s->pool, &conn)) < 0)
        return rc;
    sq_arm(conn, sq_mono_us() + s->opts.timings.store_timeout_us);
    if (!(st = sq_stmt(conn, SQ_OP_MAY_SUBMIT))) {
        rc = sq_err(conn);
    } else {
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, owner_version);
        rc = sq_step(conn, st);
        sqlite3_reset(st);
    }
    og__pool_put(s->pool, conn, false);
    if (rc < 0)
        return rc; /* Q16: an error is "no", never a stale "yes" */
    *may = rc == 1;
    return 0;
}

/* ---- a payout attempt's start ------------------------------------------ */

static int sq_op_start_in(sq_conn *c, const char *id, int64_t owner_version,
                          const char *actor, bool *started)
{
    sqlite3_stmt *st = sq_stmt(c, SQ_OP_START);
    int64_t at;
    int rc;

    if (!st)
        return sq_err(c);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, owner_version);
    if ((rc = sq_step(c, st)) <= 0) {
        sqlite3_reset(st);
        return rc; /* 0: not an Admitted payout at this version, or the
                      lease or submit_by passed: nothing written */
    }
    at = sqlite3_column_int64(st, 0); /* the step's 'now' (Q15) */
    if ((rc = sq_done(c, st)) < 0)
        return rc;
    if ((rc = sq_op_event(c, id, at, "started", OG_OP_ADMITTED, OG_OP_STARTED,
                          owner_version, NULL, NULL, actor, NULL)) < 0)
        return rc;
    *started = true;
    return 0;
}

static int sq_op_start(void *impl, const char *id, int64_t owner_version,
                       const char *actor, bool *started)
{
    sq_store *s = impl;
    bool st = false;
    sq_conn *c;
    int rc;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_op_start_in(c, id, owner_version, actor, &st);
    /* true only after COMMIT returned SQLITE_OK (Q4): then, and only then,
     * the caller may send (P1) */
    rc = sq_end(s, c, rc, st);
    if (rc == 0)
        *started = st;
    return rc;
}

/* ---- outcomes ----------------------------------------------------------- */

static int sq_op_record_in(sq_conn *c, const char *id, unsigned expected,
                           int64_t owner_version, const og_op_outcome *o,
                           bool *recorded, int64_t *at_out)
{
    og_op_status from = OG_OP_ADMITTED; /* set below; gcc -O3 cannot see it */
    sqlite3_stmt *st;
    int64_t at;
    int rc;

    /* The status the UPDATE would replace: read under the write lock, so
     * no writer runs between this read and the UPDATE (Q1, Q13). */
    if (!(st = sq_stmt(c, SQ_OP_STATUS)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    if ((rc = sq_step(c, st)) == 1)
        rc = sq_status_col(st, 0, &from) < 0 ? OG_EINTERNAL : 1;
    sqlite3_reset(st);
    if (rc <= 0)
        return rc; /* 0: no such operation, nothing recorded */

    /* The conditional write: expected status and owner version (Q14). */
    if (!(st = sq_stmt(c, SQ_OP_RECORD)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, owner_version);
    if (expected & OG_OP_BIT(OG_OP_ADMITTED))
        sqlite3_bind_text(st, 3, og_op_status_name(OG_OP_ADMITTED), -1,
                          SQLITE_STATIC);
    if (expected & OG_OP_BIT(OG_OP_STARTED))
        sqlite3_bind_text(st, 4, og_op_status_name(OG_OP_STARTED), -1,
                          SQLITE_STATIC);
    if (expected & OG_OP_BIT(OG_OP_UNKNOWN))
        sqlite3_bind_text(st, 5, og_op_status_name(OG_OP_UNKNOWN), -1,
                          SQLITE_STATIC);
    sqlite3_bind_text(st, 6, og_op_status_name(o->status), -1, SQLITE_STATIC);
    sq_bind_opt(st, 7, o->reason);
    sq_bind_opt(st, 8, o->provider_reference);
    if ((rc = sq_step(c, st)) <= 0) {
        sqlite3_reset(st);
        return rc; /* 0: another owner moved on, or not expected */
    }
    at = sqlite3_column_int64(st, 0);
    if ((rc = sq_done(c, st)) < 0)
        return rc;
    if ((rc = sq_op_event(c, id, at, "outcome", from, o->status,
                          owner_version, o->reason, o->provider_reference,
                          o->actor, NULL)) < 0)
        return rc;
    *recorded = true;
    if (at_out)
        *at_out = at;
    return 0;
}

static int sq_op_record(void *impl, const char *id, unsigned expected,
                        int64_t owner_version, const og_op_outcome *o,
                        bool *recorded)
{
    sq_store *s = impl;
    bool r = false;
    sq_conn *c;
    int rc;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_op_record_in(c, id, expected, owner_version, o, &r, NULL);
    rc = sq_end(s, c, rc, r); /* nothing hit: ROLLBACK, nothing written */
    if (rc == 0)
        *recorded = r;
    return rc;
}

/* ---- recovery's takeover ------------------------------------------------ */

static int sq_op_takeover_in(sq_store *s, sq_conn *c, const char *id,
                             int64_t owner_version, const char *actor,
                             og_operation *out, bool *taken)
{
    og_operation op;
    sqlite3_stmt *st;
    int64_t at;
    int rc;

    if (!(st = sq_stmt(c, SQ_OP_TAKEOVER)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, owner_version);
    sqlite3_bind_int64(st, 3, s->opts.timings.recovery_lease_us);
    if ((rc = sq_step(c, st)) <= 0) {
        sqlite3_reset(st);
        return rc; /* 0: owned by a live lease, moved on, or final */
    }
    rc = sq_read_op(st, &op);
    at = sqlite3_column_int64(st, SQ_OP_NCOLS); /* the step's 'now' (Q15) */
    if (rc < 0) {
        sqlite3_reset(st);
        return rc;
    }
    if ((rc = sq_done(c, st)) < 0)
        return rc;
    /* The status does not change: from = to. */
    if ((rc = sq_op_event(c, id, at, "takeover", op.status, op.status,
                          op.owner_version, NULL, NULL, actor, NULL)) < 0)
        return rc;
    *out = op;
    *taken = true;
    return 0;
}

static int sq_op_takeover(void *impl, const char *id, int64_t owner_version,
                          const char *actor, og_operation *out, bool *taken)
{
    sq_store *s = impl;
    og_operation op;
    bool t = false;
    sq_conn *c;
    int rc;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_op_takeover_in(s, c, id, owner_version, actor, &op, &t);
    rc = sq_end(s, c, rc, t);
    if (rc < 0)
        return rc; /* not confirmed: the caller owns nothing */
    *taken = t;
    if (t)
        *out = op;
    return 0;
}

/* ---- an operator's resolution ------------------------------------------- */

static int sq_op_resolve_in(sq_conn *c, const char *id, og_op_status to,
                            const char *operator_id, const char *reason,
                            const char *evidence,
                            const char *provider_reference, bool *resolved)
{
    sqlite3_stmt *st;
    int64_t version, at;
    int rc;

    if (!(st = sq_stmt(c, SQ_OP_RESOLVE)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, og_op_status_name(to), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, reason, -1, SQLITE_STATIC);
    sq_bind_opt(st, 4, provider_reference);
    if ((rc = sq_step(c, st)) <= 0) {
        sqlite3_reset(st);
        return rc; /* 0: not NeedsReconciliation (any more) */
    }
    version = sqlite3_column_int64(st, 0);
    at = sqlite3_column_int64(st, 1);
    if ((rc = sq_done(c, st)) < 0)
        return rc;
    if ((rc = sq_op_event(c, id, at, "resolved", OG_OP_NEEDS_RECONCILIATION,
                          to, version, reason, provider_reference,
                          operator_id, evidence)) < 0)
        return rc;
    *resolved = true;
    return 0;
}

static int sq_op_resolve(void *impl, const char *id, og_op_status to,
                         const char *operator_id, const char *reason,
                         const char *evidence, const char *provider_reference,
                         bool *resolved)
{
    sq_store *s = impl;
    bool r = false;
    sq_conn *c;
    int rc;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_op_resolve_in(c, id, to, operator_id, reason, evidence,
                          provider_reference, &r);
    rc = sq_end(s, c, rc, r);
    if (rc == 0)
        *resolved = r;
    return rc;
}

/* ---- og__op_insert (tests only) ----------------------------------------- */

static int sq_op_insert(void *impl, const og__admit_req *req, og_op_kind k,
                        const char *idempotency_key,
                        const char *client_reference, og_operation *out)
{
    sq_store *s = impl;
    const og_timings *t = &s->opts.timings;
    sqlite3_stmt *st;
    og_operation op;
    void *conn;
    int rc;

    if ((rc = og__pool_get(s->pool, &conn)) < 0)
        return rc;
    sq_arm(conn, sq_mono_us() + t->store_timeout_us);
    if (!(st = sq_stmt(conn, SQ_OP_INSERT))) {
        rc = sq_err(conn);
        goto out;
    }
    sq_bind_new_op(st, req, t);
    sqlite3_bind_text(st, 11, og_op_kind_name(k), -1, SQLITE_STATIC);
    sq_bind_opt(st, 12, idempotency_key);
    sq_bind_opt(st, 13, client_reference);
    if ((rc = sq_step(conn, st)) == 1)
        rc = sq_read_op(st, &op);
    else if (rc == 0)
        rc = OG_EINTERNAL; /* RETURNING always yields the row */
    if (rc < 0) {
        sqlite3_reset(st);
        goto out;
    }
    /* Autocommit: committed when the statement completes (Q4). */
    if ((rc = sq_done(conn, st)) == 0)
        *out = op;
out:
    og__pool_put(s->pool, conn, !sq_rollback(conn));
    return rc;
}

/* ---- listing ------------------------------------------------------------ */

/* Appends text to sql (size n); -1 when it does not fit. */
static int sq_cat(char *sql, size_t n, const char *text)
{
    size_t used = strlen(sql), add = strlen(text);

    if (used + add >= n)
        return -1;
    memcpy(sql + used, text, add + 1);
    return 0;
}

/* The listing statement for f (Q18): status literals from the fixed status
 * table, never caller text; the creation bound (?1) and the limit (?2)
 * bound. When the set lies within the owned statuses, the recovery scan
 * index's own predicate is repeated verbatim so the planner may use that
 * partial index. */
static int sq_list_sql(const og_op_filter *f, char *sql, size_t n)
{
    const unsigned owned = OG__OP_OWNED;
    int bad = 0;

    sql[0] = '\0';
    bad |= sq_cat(sql, n, "SELECT " SQ_OP_COLS " FROM operations WHERE 1");
    if (f->statuses != 0 && (f->statuses & ~owned) == 0)
        bad |= sq_cat(sql, n, " AND status IN " SQ_OWNED);
    if (f->statuses != 0 && f->statuses != owned) {
        const char *sep = " AND status IN (";

        for (int st = 0; st < OG_OP_STATUS_COUNT; st++) {
            if (!(f->statuses & OG_OP_BIT(st)))
                continue;
            bad |= sq_cat(sql, n, sep);
            bad |= sq_cat(sql, n, "'");
            bad |= sq_cat(sql, n, og_op_status_name((og_op_status)st));
            bad |= sq_cat(sql, n, "'");
            sep = ", ";
        }
        bad |= sq_cat(sql, n, ")");
    }
    /* One kind, or all (there are two): its fixed name, as the statuses. */
    for (int k = 0; k < OG_OP_KIND_COUNT; k++)
        if (f->kinds == OG_OP_KIND_BIT(k)) {
            bad |= sq_cat(sql, n, " AND kind = '");
            bad |= sq_cat(sql, n, og_op_kind_name((og_op_kind)k));
            bad |= sq_cat(sql, n, "'");
        }
    if (f->lease_expired)
        bad |= sq_cat(sql, n, " AND lease_until < " SQ_NOW);
    if (f->created_before_us > 0)
        bad |= sq_cat(sql, n, " AND created_at < ?1");
    bad |= sq_cat(sql, n, " ORDER BY created_at, operation_id LIMIT ?2");
    return bad ? OG_EINTERNAL : 0;
}

static int sq_op_list_on(sq_conn *c, const og_op_filter *f, og_op_list *out)
{
    char sql[2048];
    og_op_list l = {NULL, 0};
    size_t cap = 0;
    sqlite3_stmt *st = NULL;
    int rc;

    if ((rc = sq_list_sql(f, sql, sizeof sql)) < 0)
        return rc;
    if (sqlite3_prepare_v3(c->db, sql, -1, 0, &st, NULL) != SQLITE_OK)
        return sq_err(c);
    if (f->created_before_us > 0)
        sqlite3_bind_int64(st, 1, f->created_before_us);
    sqlite3_bind_int(st, 2, f->limit);
    while ((rc = sq_step(c, st)) == 1) {
        if (l.n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            og_operation *v;

            if (ncap > (size_t)f->limit)
                ncap = (size_t)f->limit; /* the LIMIT caps the rows */
            if (ncap <= l.n) {
                rc = OG_EINTERNAL; /* more rows than the LIMIT */
                break;
            }
            if (!(v = realloc(l.v, ncap * sizeof *v))) {
                rc = OG_ENOMEM;
                break;
            }
            l.v = v;
            cap = ncap;
        }
        if ((rc = sq_read_op(st, &l.v[l.n])) < 0)
            break;
        l.n++;
    }
    sqlite3_finalize(st);
    if (rc < 0) {
        og_op_list_free(&l);
        return rc;
    }
    *out = l;
    return 0;
}

static int sq_op_list(void *impl, const og_op_filter *f, og_op_list *out)
{
    sq_store *s = impl;
    void *conn;
    int rc;

    if ((rc = og__pool_get(s->pool, &conn)) < 0)
        return rc;
    sq_arm(conn, sq_mono_us() + s->opts.timings.store_timeout_us);
    rc = sq_op_list_on(conn, f, out);
    og__pool_put(s->pool, conn, false);
    return rc;
}

/* ---- history ------------------------------------------------------------ */

/* Fills *e from the OP_HISTORY columns of the current row. */
static int sq_read_event(sqlite3_stmt *st, og_op_event *e)
{
    memset(e, 0, sizeof *e);
    e->seq = sqlite3_column_int64(st, 0);
    e->at_us = sqlite3_column_int64(st, 1);
    e->owner_version = sqlite3_column_int64(st, 5);
    if (sq_text(st, 2, e->kind, sizeof e->kind) < 0 ||
        sq_status_col(st, 3, &e->from_status) < 0 ||
        sq_status_col(st, 4, &e->to_status) < 0 ||
        sq_text_opt(st, 6, e->reason, sizeof e->reason) < 0 ||
        sq_text_opt(st, 7, e->provider_reference,
                    sizeof e->provider_reference) < 0 ||
        sq_text(st, 8, e->actor, sizeof e->actor) < 0 ||
        sq_text_opt(st, 9, e->evidence, sizeof e->evidence) < 0)
        return OG_EINTERNAL;
    return 0;
}

static int sq_op_history_on(sq_conn *c, const char *id, og_op_events *out)
{
    og_op_events l = {NULL, 0};
    size_t cap = 0;
    sqlite3_stmt *st = sq_stmt(c, SQ_OP_HISTORY);
    int rc;

    if (!st)
        return sq_err(c);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    while ((rc = sq_step(c, st)) == 1) {
        if (l.n == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            og_op_event *v = realloc(l.v, ncap * sizeof *v);

            if (!v) {
                rc = OG_ENOMEM;
                break;
            }
            l.v = v;
            cap = ncap;
        }
        if ((rc = sq_read_event(st, &l.v[l.n])) < 0)
            break;
        l.n++;
    }
    sqlite3_reset(st);
    if (rc < 0) {
        og_op_events_free(&l);
        return rc;
    }
    *out = l;
    return 0;
}

static int sq_op_history(void *impl, const char *id, og_op_events *out)
{
    sq_store *s = impl;
    void *conn;
    int rc;

    if ((rc = og__pool_get(s->pool, &conn)) < 0)
        return rc;
    sq_arm(conn, sq_mono_us() + s->opts.timings.store_timeout_us);
    rc = sq_op_history_on(conn, id, out);
    og__pool_put(s->pool, conn, false);
    return rc;
}

/* ===========================================================================
 * Retention (Q19-Q22): one batch per BEGIN IMMEDIATE transaction; store.c
 * loops.
 * ========================================================================= */

static int sq_cleanup_in(sq_store *s, sq_conn *c, int batch,
                         int64_t *from_us, og_cleanup_stats *out, bool *keep)
{
    sqlite3_stmt *st = sq_stmt(c, SQ_KEYED(s, CLEANUP));
    og__claim_kind kind;
    int rc;

    if (!st)
        return sq_err(c);
    sqlite3_bind_int64(st, 1, s->opts.timings.cleanup_margin_us);
    sqlite3_bind_int(st, 2, batch);
    sqlite3_bind_int64(st, 3, *from_us);
    while ((rc = sq_step(c, st)) == 1) {
        int64_t key = sqlite3_column_int64(st, 1);

        if (key > *from_us)
            *from_us = key;
        if ((rc = sq_kind_parse((const char *)sqlite3_column_text(st, 0),
                                &kind)) < 0)
            break;
        if (kind == OG__CLAIM_ADMISSION)
            out->admissions++;
        else if (kind == OG__CLAIM_REVOCATION)
            out->revocations++;
        else
            out->consumes++;
        *keep = true;
    }
    sqlite3_reset(st);
    return rc;
}

static int sq_cleanup_batch(void *impl, int batch, int64_t *from_us,
                            og_cleanup_stats *out)
{
    sq_store *s = impl;
    og_cleanup_stats one = {0, 0, 0, 0};
    int64_t from = *from_us;
    bool keep = false;
    sq_conn *c;
    int rc;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_cleanup_in(s, c, batch, &from, &one, &keep);
    rc = sq_end(s, c, rc, keep);
    if (rc == 0) {
        *out = one;
        *from_us = from;
    }
    return rc;
}

/* One archive batch's fixed parameters (Q21). */
typedef struct sq_archive_args {
    int64_t cutoff; /* ?1: last change before it */
    int batch;      /* ?2 */
    int64_t now;    /* ?3: archived_at */
    int64_t from;   /* ?4: the pass's keyset cursor */
} sq_archive_args;

/* Runs archive statement i for the batch a and adds the rows it changed to
 * *changed (NULL: not counted). */
static int sq_archive_step(sq_conn *c, int i, const sq_archive_args *a,
                           int64_t *changed)
{
    sqlite3_stmt *st = sq_stmt(c, i);
    int rc;

    if (!st)
        return sq_err(c);
    sqlite3_bind_int64(st, 1, a->cutoff);
    sqlite3_bind_int(st, 2, a->batch);
    sqlite3_bind_int64(st, 3, a->now); /* the copies' archived_at; the
                                          DELETEs leave ?3 unused */
    sqlite3_bind_int64(st, 4, a->from);
    if ((rc = sq_done(c, st)) < 0)
        return rc;
    if (changed)
        *changed += sqlite3_changes64(c->db);
    return 0;
}

/* Reads one integer from statement i for the batch a: SQLite's clock
 * (SQ_CLOCK), the batch's greatest key (SQ_ARCHIVE_CURSOR; *out left as it
 * is when the batch is empty). */
static int sq_archive_read(sq_conn *c, int i, const sq_archive_args *a,
                           int64_t *out)
{
    sqlite3_stmt *st = sq_stmt(c, i);
    int rc;

    if (!st)
        return sq_err(c);
    if (i == SQ_ARCHIVE_CURSOR) {
        sqlite3_bind_int64(st, 1, a->cutoff);
        sqlite3_bind_int(st, 2, a->batch);
        sqlite3_bind_int64(st, 4, a->from);
    }
    if ((rc = sq_step(c, st)) == 1 &&
        sqlite3_column_type(st, 0) != SQLITE_NULL)
        *out = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    return rc < 0 ? rc : rc == 1 ? 0 : OG_EINTERNAL;
}

static int sq_archive_in(sq_conn *c, int64_t older_than_us,
                         og_archive_mode mode, int batch, int64_t *from_us,
                         og_archive_stats *out, bool *keep)
{
    sq_archive_args a = {0, batch, 0, *from_us};
    int64_t ops = 0, events = 0, next = *from_us;
    int rc;

    /* One cutoff for every statement of the batch (Q21). */
    if ((rc = sq_archive_read(c, SQ_CLOCK, &a, &a.now)) < 0)
        return rc;
    a.cutoff = a.now - older_than_us;
    if ((rc = sq_archive_read(c, SQ_ARCHIVE_CURSOR, &a, &next)) < 0 ||
        (mode == OG_ARCHIVE_MOVE &&
         (rc = sq_archive_step(c, SQ_ARCHIVE_EVENTS, &a, NULL)) < 0) ||
        (rc = sq_archive_step(c, SQ_DELETE_EVENTS, &a, &events)) < 0 ||
        (mode == OG_ARCHIVE_MOVE &&
         (rc = sq_archive_step(c, SQ_ARCHIVE_OPS, &a, NULL)) < 0) ||
        (rc = sq_archive_step(c, SQ_DELETE_OPS, &a, &ops)) < 0)
        return rc;
    out->operations = ops;
    out->events = events;
    *from_us = next;
    *keep = ops > 0;
    return 0;
}

static int sq_archive_batch(void *impl, int64_t older_than_us,
                            og_archive_mode mode, int batch, int64_t *from_us,
                            og_archive_stats *out)
{
    sq_store *s = impl;
    og_archive_stats one = {0, 0, 0};
    int64_t from = *from_us;
    bool keep = false;
    sq_conn *c;
    int rc;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_archive_in(c, older_than_us, mode, batch, &from, &one, &keep);
    rc = sq_end(s, c, rc, keep);
    if (rc == 0) {
        *out = one;
        *from_us = from;
    }
    return rc;
}

/* ===========================================================================
 * Redemption recovery points (Q24)
 * ========================================================================= */

static int sq_redemption_put(void *impl, const og_redemption_record *r,
                             bool *inserted)
{
    sq_store *s = impl;
    sqlite3_stmt *st;
    void *conn;
    int rc, row;

    if ((rc = og__pool_get(s->pool, &conn)) < 0)
        return rc;
    sq_arm(conn, sq_mono_us() + s->opts.timings.store_timeout_us);
    if (!(st = sq_stmt(conn, SQ_REDEMPTION_PUT))) {
        rc = sq_err(conn);
        goto out;
    }
    sqlite3_bind_text(st, 1, r->caller, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->idempotency_key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, r->code_hash, -1, SQLITE_STATIC);
    sqlite3_bind_blob(st, 4, r->nonce, OG_REDEMPTION_NONCE_LEN, SQLITE_STATIC);
    sqlite3_bind_blob(st, 5, r->sealed, (int)r->sealed_len, SQLITE_STATIC);
    /* Autocommit: the write commits when the statement completes, so the
     * answer waits for sq_done (Q4), not for the RETURNING row. */
    if ((row = sq_step(conn, st)) < 0) {
        rc = row;
        sqlite3_reset(st);
        goto out;
    }
    if ((rc = sq_done(conn, st)) == 0)
        *inserted = row == 1;
out:
    og__pool_put(s->pool, conn, !sq_rollback(conn));
    return rc;
}

/* Copies the OWN row of REDEMPTION_GET into *out (sealed malloc'd). */
static int sq_read_point(sqlite3_stmt *st, og_redemption_point *out)
{
    int nlen = sqlite3_column_bytes(st, 2), slen = sqlite3_column_bytes(st, 3);
    const void *nonce = sqlite3_column_blob(st, 2);
    const void *sealed = sqlite3_column_blob(st, 3);

    if (sq_text(st, 1, out->code_hash, sizeof out->code_hash) < 0 ||
        nlen != OG_REDEMPTION_NONCE_LEN || !nonce || !sealed ||
        slen <= OG_REDEMPTION_TAG_LEN || slen > OG_REDEMPTION_SEALED_MAX)
        return OG_EINTERNAL; /* the schema's CHECKs forbid it */
    if (!(out->sealed = malloc((size_t)slen)))
        return OG_ENOMEM;
    memcpy(out->nonce, nonce, OG_REDEMPTION_NONCE_LEN);
    memcpy(out->sealed, sealed, (size_t)slen);
    out->sealed_len = (size_t)slen;
    out->created_at_us = sqlite3_column_int64(st, 4);
    return 0;
}

static int sq_redemption_get(void *impl, const char *caller, const char *key,
                             const char *code_hash, og_redemption_found *found,
                             og_redemption_point *out)
{
    sq_store *s = impl;
    sqlite3_stmt *st;
    void *conn;
    int rc;

    if ((rc = og__pool_get(s->pool, &conn)) < 0)
        return rc;
    sq_arm(conn, sq_mono_us() + s->opts.timings.store_timeout_us);
    if (!(st = sq_stmt(conn, SQ_REDEMPTION_GET))) {
        rc = sq_err(conn);
        goto out;
    }
    sqlite3_bind_text(st, 1, caller, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    sq_bind_opt(st, 3, code_hash);
    rc = sq_step(conn, st);
    if (rc == 0) {
        *found = OG_REDEMPTION_ABSENT;
    } else if (rc == 1 && sqlite3_column_int(st, 0) == 0) {
        *found = OG_REDEMPTION_CODE_ELSEWHERE; /* nothing of it is read */
        rc = 0;
    } else if (rc == 1 && (rc = sq_read_point(st, out)) == 0) {
        *found = OG_REDEMPTION_OWN;
    }
    sqlite3_reset(st);
out:
    og__pool_put(s->pool, conn, false);
    return rc;
}

/* ===========================================================================
 * The payout store (Q26-Q30). Every write is ONE BEGIN IMMEDIATE
 * transaction (sq_begin/sq_end, as in Q8) holding its history entries; a
 * write that changed nothing rolls back and reports why from a read of the
 * same transaction. The statements are SQ_PAYOUT_STATEMENTS above.
 * ========================================================================= */

/* Steps st (a write RETURNING at most one integer, or a one-row read): 1
 * and *v = column 0 when it yields a row, 0 when none, or the error. Runs
 * it to completion and resets it. */
static int sq_one_i64(sq_conn *c, sqlite3_stmt *st, int64_t *v)
{
    int rc = sq_step(c, st);

    if (rc != 1) {
        sqlite3_reset(st);
        return rc;
    }
    *v = sqlite3_column_int64(st, 0);
    return (rc = sq_done(c, st)) < 0 ? rc : 1;
}

/* Binds v, or NULL for 0 (no version, no amount). */
static void sq_bind_i64_opt(sqlite3_stmt *st, int i, int64_t v)
{
    if (v != 0)
        sqlite3_bind_int64(st, i, v);
    else
        sqlite3_bind_null(st, i);
}

/* One history entry (Q26): NULL (or 0) fields are absent. */
typedef struct sq_payout_event {
    const char *payout_id;
    int64_t at;
    const char *kind, *actor, *correlation_id, *decision_id, *grant_id,
        *job_id, *from_state, *to_state;
    int64_t payout_version, amount;
    const char *release_day, *reason;
} sq_payout_event;

static int sq_payout_event_add(sq_conn *c, const sq_payout_event *e)
{
    sqlite3_stmt *st = sq_stmt(c, SQ_PAYOUT_EVENT);

    if (!st)
        return sq_err(c);
    sqlite3_bind_text(st, 1, e->payout_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, e->at);
    sqlite3_bind_text(st, 3, e->kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, e->actor, -1, SQLITE_STATIC);
    sq_bind_opt(st, 5, e->correlation_id);
    sq_bind_opt(st, 6, e->decision_id);
    sq_bind_opt(st, 7, e->grant_id);
    sq_bind_opt(st, 8, e->job_id);
    sq_bind_opt(st, 9, e->from_state);
    sq_bind_opt(st, 10, e->to_state);
    sq_bind_i64_opt(st, 11, e->payout_version);
    sq_bind_i64_opt(st, 12, e->amount);
    sq_bind_opt(st, 13, e->release_day);
    sq_bind_opt(st, 14, e->reason);
    return sq_done(c, st);
}

/* ---- puts ---------------------------------------------------------------- */

/* Finishes a put whose write statement w and report statement state are
 * bound: WRITTEN with the version w returned, else the report's meaning
 * (og__payout_put_classify). *keep when written. */
static int sq_put_finish(sq_conn *c, sqlite3_stmt *w, sqlite3_stmt *state,
                         int64_t expected, og_payout_put_result *out,
                         bool *keep)
{
    int64_t v = 0;
    int rc = sq_one_i64(c, w, &v);

    if (rc != 0) {
        sqlite3_reset(state);
        if (rc < 0)
            return rc;
        out->outcome = OG_PAYOUT_WRITTEN;
        out->version = v;
        *keep = true;
        return 0;
    }
    if ((rc = sq_step(c, state)) == 1) {
        bool exists = sqlite3_column_type(state, 0) != SQLITE_NULL;

        out->outcome = og__payout_put_classify(
            expected, exists, sqlite3_column_int64(state, 0),
            sqlite3_column_int(state, 1) != 0,
            sqlite3_column_int(state, 2) != 0);
        out->version = 0;
    }
    sqlite3_reset(state);
    return rc < 0 ? rc : rc == 1 ? 0 : OG_EINTERNAL; /* the report is a row */
}

/* Runs a put: the write (create when expected is 0, else update) and its
 * report, both bound by bind(c, write, state, arg), in ONE transaction. */
static int sq_put(sq_store *s, int create, int update, int report,
                  int64_t expected,
                  void (*bind)(sqlite3_stmt *, sqlite3_stmt *, const void *),
                  const void *arg, og_payout_put_result *out)
{
    og_payout_put_result res = {OG_PAYOUT_WRITTEN, 0};
    sqlite3_stmt *w, *state;
    bool keep = false;
    sq_conn *c;
    int rc;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    if (!(w = sq_stmt(c, expected == 0 ? create : update)) ||
        !(state = sq_stmt(c, report))) {
        rc = sq_err(c);
    } else {
        bind(w, state, arg);
        rc = sq_put_finish(c, w, state, expected, &res, &keep);
        /* No binding outlives the call: the caller's buffers (a provider
         * token, S7) are wiped or gone once it returns. */
        sqlite3_clear_bindings(w);
        sqlite3_clear_bindings(state);
    }
    rc = sq_end(s, c, rc, keep);
    if (rc == 0)
        *out = res;
    return rc;
}

/* The tenant's: ?1 id, ?2 suspended, ?3 limit, ?4 currency, ?5 offset,
 * ?6 expected (the create has no ?6); report ?1 id, ?2 currency. */
static void sq_bind_tenant(sqlite3_stmt *w, sqlite3_stmt *state,
                           const void *arg)
{
    const og__payout_tenant_req *r = arg;

    sqlite3_bind_text(w, 1, r->tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_int(w, 2, r->payouts_suspended);
    sqlite3_bind_int64(w, 3, r->daily_limit);
    sqlite3_bind_text(w, 4, r->currency, -1, SQLITE_STATIC);
    sqlite3_bind_int(w, 5, r->offset_minutes);
    if (sqlite3_bind_parameter_count(w) >= 6)
        sqlite3_bind_int64(w, 6, r->expected_version);
    sqlite3_bind_text(state, 1, r->tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(state, 2, r->currency, -1, SQLITE_STATIC);
}

static int sq_payout_tenant_put(void *impl, const og__payout_tenant_req *r,
                                og_payout_put_result *out)
{
    return sq_put(impl, SQ_PAYOUT_TENANT_CREATE, SQ_PAYOUT_TENANT_UPDATE,
                  SQ_PAYOUT_TENANT_STATE, r->expected_version, sq_bind_tenant,
                  r, out);
}

/* ?1 id, ?2 tenant, ?3 verified, ?4 status, ?5 expected (update only);
 * report ?1 id, ?2 tenant. */
static void sq_bind_beneficiary(sqlite3_stmt *w, sqlite3_stmt *state,
                                const void *arg)
{
    const og__payout_beneficiary_req *r = arg;

    sqlite3_bind_text(w, 1, r->beneficiary_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(w, 2, r->tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_int(w, 3, r->verified);
    sqlite3_bind_text(w, 4, r->status, -1, SQLITE_STATIC);
    if (sqlite3_bind_parameter_count(w) >= 5)
        sqlite3_bind_int64(w, 5, r->expected_version);
    sqlite3_bind_text(state, 1, r->beneficiary_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(state, 2, r->tenant_id, -1, SQLITE_STATIC);
}

static int sq_payout_beneficiary_put(void *impl,
                                     const og__payout_beneficiary_req *r,
                                     og_payout_put_result *out)
{
    return sq_put(impl, SQ_PAYOUT_BENEFICIARY_CREATE,
                  SQ_PAYOUT_BENEFICIARY_UPDATE, SQ_PAYOUT_BENEFICIARY_STATE,
                  r->expected_version, sq_bind_beneficiary, r, out);
}

/* ?1 id, ?2 beneficiary, ?3 token (bound, never copied: S7), ?4 expected
 * (update only); report ?1 id, ?2 beneficiary. */
static void sq_bind_destination(sqlite3_stmt *w, sqlite3_stmt *state,
                                const void *arg)
{
    const og__payout_destination_req *r = arg;

    sqlite3_bind_text(w, 1, r->destination_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(w, 2, r->beneficiary_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(w, 3, r->provider_token, -1, SQLITE_STATIC);
    if (sqlite3_bind_parameter_count(w) >= 4)
        sqlite3_bind_int64(w, 4, r->expected_version);
    sqlite3_bind_text(state, 1, r->destination_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(state, 2, r->beneficiary_id, -1, SQLITE_STATIC);
}

static int sq_payout_destination_put(void *impl,
                                     const og__payout_destination_req *r,
                                     og_payout_put_result *out)
{
    return sq_put(impl, SQ_PAYOUT_DESTINATION_CREATE,
                  SQ_PAYOUT_DESTINATION_UPDATE, SQ_PAYOUT_DESTINATION_STATE,
                  r->expected_version, sq_bind_destination, r, out);
}

/* ---- the executor's read of a token (S7) -------------------------------- */

/* A one-row read on a pool connection, outside a transaction (one SELECT
 * is one WAL snapshot): statement which with ?1 key (and ?2 n when the
 * statement has it); on a row, read(s, st, out). 1 read, 0 no row, or the
 * error. */
static int sq_read_row(sq_store *s, int which, const char *key, int64_t n,
                       int (*read)(sq_store *, sqlite3_stmt *, void *),
                       void *out)
{
    sqlite3_stmt *st;
    void *conn;
    int rc;

    if ((rc = og__pool_get(s->pool, &conn)) < 0)
        return rc;
    sq_arm(conn, sq_mono_us() + s->opts.timings.store_timeout_us);
    if (!(st = sq_stmt(conn, which))) {
        rc = sq_err(conn);
    } else {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        if (sqlite3_bind_parameter_count(st) >= 2)
            sqlite3_bind_int64(st, 2, n);
        if ((rc = sq_step(conn, st)) == 1 && read(s, st, out) < 0)
            rc = OG_EINTERNAL;
        sqlite3_reset(st);
    }
    og__pool_put(s->pool, conn, false);
    return rc;
}

/* The token's reader: out is OG_PAYOUT_TOKEN_MAX + 1 bytes. */
static int sq_token_row(sq_store *s, sqlite3_stmt *st, void *out)
{
    (void)s;
    return sq_text(st, 0, out, OG_PAYOUT_TOKEN_MAX + 1);
}

static int sq_payout_destination_token(void *impl, const char *id,
                                       int64_t version, char *out,
                                       size_t outlen)
{
    if (outlen < OG_PAYOUT_TOKEN_MAX + 1)
        return OG_EINTERNAL; /* store.c passes its own buffer */
    return sq_read_row(impl, SQ_PAYOUT_DESTINATION_TOKEN, id, version,
                       sq_token_row, out);
}

/* ---- drafts and cancellations -------------------------------------------- */

static int sq_payout_draft_in(sq_conn *c, const og__payout_draft_req *r,
                              og_payout_put_result *out, bool *keep)
{
    sqlite3_stmt *st;
    int64_t at = 0;
    int rc, i;

    for (i = 0; i < 2; i++) { /* the draft, then (nothing written) why */
        if (!(st = sq_stmt(c, i == 0 ? SQ_PAYOUT_DRAFT : SQ_PAYOUT_DRAFT_STATE)))
            return sq_err(c);
        sqlite3_bind_text(st, 1, r->payout_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, r->tenant_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, r->beneficiary_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, r->destination_id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 5, r->destination_version);
        sqlite3_bind_int64(st, 6, r->amount_minor);
        sqlite3_bind_text(st, 7, r->currency, -1, SQLITE_STATIC);
        if (i == 1)
            break;
        sq_bind_opt(st, 8, r->has_purpose ? r->purpose : NULL);
        sqlite3_bind_text(st, 9, r->requester_id, -1, SQLITE_STATIC);
        if ((rc = sq_one_i64(c, st, &at)) != 0) {
            sq_payout_event ev = {
                .payout_id = r->payout_id, .at = at, .kind = "drafted",
                .actor = r->requester_id, .to_state = "Draft",
                .payout_version = 1, .amount = r->amount_minor};

            if (rc < 0 || (rc = sq_payout_event_add(c, &ev)) < 0)
                return rc;
            out->outcome = OG_PAYOUT_WRITTEN;
            out->version = 1;
            *keep = true;
            return 0;
        }
    }
    if ((rc = sq_step(c, st)) == 1) {
        if (sqlite3_column_int(st, 0))
            out->outcome = OG_PAYOUT_VERSION_CONFLICT; /* the id is taken */
        else if (!sqlite3_column_int(st, 1) || !sqlite3_column_int(st, 3) ||
                 !sqlite3_column_int(st, 4))
            out->outcome = OG_PAYOUT_NOT_FOUND;
        else if (!sqlite3_column_int(st, 2))
            out->outcome = OG_PAYOUT_REFUSED; /* not the tenant's currency */
        else
            rc = OG_EINTERNAL; /* nothing explains it under the write lock */
        out->version = 0;
    }
    sqlite3_reset(st);
    return rc < 0 ? rc : rc == 1 ? 0 : OG_EINTERNAL;
}

static int sq_payout_draft(void *impl, const og__payout_draft_req *r,
                           og_payout_put_result *out)
{
    sq_store *s = impl;
    og_payout_put_result res = {OG_PAYOUT_WRITTEN, 0};
    bool keep = false;
    sq_conn *c;
    int rc;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_payout_draft_in(c, r, &res, &keep);
    rc = sq_end(s, c, rc, keep);
    if (rc == 0)
        *out = res;
    return rc;
}

static int sq_payout_cancel_in(sq_conn *c, const char *id, int64_t expected,
                               const char *actor, og_payout_put_result *out,
                               bool *keep)
{
    char from[16];
    int64_t version = 0, at;
    sqlite3_stmt *st;
    int rc;

    /* The state it replaces, read under the write lock (Q1). */
    if (!(st = sq_stmt(c, SQ_PAYOUT_STATE)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    if ((rc = sq_step(c, st)) == 1) {
        version = sqlite3_column_int64(st, 1);
        rc = sq_text(st, 0, from, sizeof from) < 0 ? OG_EINTERNAL : 1;
    }
    sqlite3_reset(st);
    if (rc <= 0) {
        out->outcome = OG_PAYOUT_NOT_FOUND;
        return rc;
    }
    if (!(st = sq_stmt(c, SQ_PAYOUT_CANCEL)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, expected);
    if ((rc = sq_step(c, st)) != 1) {
        sqlite3_reset(st);
        out->outcome = version != expected ? OG_PAYOUT_VERSION_CONFLICT
                                           : OG_PAYOUT_REFUSED;
        return rc;
    }
    version = sqlite3_column_int64(st, 0);
    at = sqlite3_column_int64(st, 1);
    if ((rc = sq_done(c, st)) < 0)
        return rc;
    {
        sq_payout_event ev = {.payout_id = id, .at = at, .kind = "cancelled",
                              .actor = actor, .from_state = from,
                              .to_state = "Cancelled",
                              .payout_version = version};
        if ((rc = sq_payout_event_add(c, &ev)) < 0)
            return rc;
    }
    out->outcome = OG_PAYOUT_WRITTEN;
    out->version = version;
    *keep = true;
    return 0;
}

static int sq_payout_cancel(void *impl, const char *id, int64_t expected,
                            const char *actor, og_payout_put_result *out)
{
    sq_store *s = impl;
    og_payout_put_result res = {OG_PAYOUT_WRITTEN, 0};
    bool keep = false;
    sq_conn *c;
    int rc;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_payout_cancel_in(c, id, expected, actor, &res, &keep);
    rc = sq_end(s, c, rc, keep);
    if (rc == 0)
        *out = res;
    return rc;
}

/* ---- reads ---------------------------------------------------------------- */

/* Reads the SQ_PAYOUT_VIEW_COLS of the current row. */
static int sq_payout_view(sqlite3_stmt *st, og_payout_view *v)
{
    int state;

    memset(v, 0, sizeof *v);
    if (sq_text(st, 0, v->payout_id, sizeof v->payout_id) < 0 ||
        sq_text(st, 1, v->tenant_id, sizeof v->tenant_id) < 0 ||
        sq_text(st, 2, v->beneficiary_id, sizeof v->beneficiary_id) < 0 ||
        sq_text(st, 3, v->destination_id, sizeof v->destination_id) < 0 ||
        sq_text(st, 6, v->currency, sizeof v->currency) < 0 ||
        sq_text_opt(st, 7, v->purpose, sizeof v->purpose) < 0 ||
        sq_text_opt(st, 11, v->active_attempt, sizeof v->active_attempt) < 0 ||
        sq_text_opt(st, 12, v->release_day, sizeof v->release_day) < 0 ||
        sq_text(st, 13, v->requester_id, sizeof v->requester_id) < 0)
        return OG_EINTERNAL;
    state = og__payout_state_parse((const char *)sqlite3_column_text(st, 8));
    v->destination_version = sqlite3_column_int64(st, 4);
    v->amount_minor = sqlite3_column_int64(st, 5);
    v->has_purpose = sqlite3_column_type(st, 7) != SQLITE_NULL;
    v->version = sqlite3_column_int64(st, 9);
    v->attempt_count = sqlite3_column_int64(st, 10);
    v->created_at_us = sqlite3_column_int64(st, 14);
    v->updated_at_us = sqlite3_column_int64(st, 15);
    if (state < 0 || og_payout_amount_format(v->amount_minor, v->currency,
                                             v->amount, sizeof v->amount) != 0)
        return OG_EINTERNAL;
    v->state = (og_payout_state)state;
    return 0;
}

static int sq_payout_view_row(sq_store *s, sqlite3_stmt *st, void *out)
{
    (void)s;
    return sq_payout_view(st, out);
}

static int sq_payout_get(void *impl, const char *id, og_payout_view *out)
{
    return sq_read_row(impl, SQ_PAYOUT_GET, id, 0, sq_payout_view_row, out);
}

/* The current row of SQ_PAYOUT_FACTS into *f. */
static int sq_facts_row(sqlite3_stmt *st, og__payout_facts *f)
{
    int state, status;

    if (sq_text_opt(st, 3, f->active_attempt, sizeof f->active_attempt) < 0 ||
        sq_text(st, 4, f->tenant_id, sizeof f->tenant_id) < 0 ||
        sq_text(st, 5, f->beneficiary_id, sizeof f->beneficiary_id) < 0 ||
        sq_text(st, 6, f->destination_id, sizeof f->destination_id) < 0 ||
        sq_text(st, 9, f->currency, sizeof f->currency) < 0 ||
        sq_text_opt(st, 10, f->purpose, sizeof f->purpose) < 0 ||
        sq_text(st, 13, f->tenant_currency, sizeof f->tenant_currency) < 0 ||
        sq_text(st, 19, f->destination_beneficiary_id,
                sizeof f->destination_beneficiary_id) < 0)
        return OG_EINTERNAL;
    state = og__payout_state_parse((const char *)sqlite3_column_text(st, 0));
    status = og__payout_bstatus_parse((const char *)sqlite3_column_text(st, 17));
    if (state < 0 || status < 0)
        return OG_EINTERNAL;
    f->found = true;
    f->state = (og_payout_state)state;
    f->version = sqlite3_column_int64(st, 1);
    f->attempt_count = sqlite3_column_int64(st, 2);
    f->destination_version = sqlite3_column_int64(st, 7);
    f->amount_minor = sqlite3_column_int64(st, 8);
    f->has_purpose = sqlite3_column_type(st, 10) != SQLITE_NULL;
    f->payouts_suspended = sqlite3_column_int(st, 11) != 0;
    f->daily_limit = sqlite3_column_int64(st, 12);
    f->offset_minutes = sqlite3_column_int(st, 14);
    f->settings_version = sqlite3_column_int64(st, 15);
    f->verified = sqlite3_column_int(st, 16) != 0;
    f->beneficiary_status = (og_payout_beneficiary_status)status;
    f->beneficiary_version = sqlite3_column_int64(st, 18);
    f->destination_record_version = sqlite3_column_int64(st, 20);
    f->destination_changed_at_us = sqlite3_column_int64(st, 21);
    f->observed_at_us = sqlite3_column_int64(st, 22);
    return 0;
}

/* Reads the facts of payout id inside c's transaction: the payout with its
 * tenant, beneficiary and destination, then the counters of the release
 * day of release_at_us in the tenant's offset. A missing payout is
 * found = false at the store's clock. */
static int sq_read_facts(sq_conn *c, const char *id, int64_t release_at_us,
                         og__payout_facts *f)
{
    sqlite3_stmt *st;
    int rc;

    memset(f, 0, sizeof *f);
    if (!(st = sq_stmt(c, SQ_PAYOUT_FACTS)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    if ((rc = sq_step(c, st)) == 1)
        rc = sq_facts_row(st, f);
    sqlite3_reset(st);
    if (rc < 0)
        return rc;
    if (!f->found) {
        if (!(st = sq_stmt(c, SQ_CLOCK)))
            return sq_err(c);
        return sq_one_i64(c, st, &f->observed_at_us) == 1 ? 0 : sq_err(c);
    }
    if (og__copy(f->payout_id, sizeof f->payout_id, id) < 0 ||
        og_payout_release_day(release_at_us, f->offset_minutes,
                              f->release_day) != 0)
        return OG_EINTERNAL; /* both checked before the store */
    if (!(st = sq_stmt(c, SQ_PAYOUT_DAY)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, f->tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, f->release_day, -1, SQLITE_STATIC);
    if ((rc = sq_step(c, st)) == 1) {
        f->paid = sqlite3_column_int64(st, 0);
        f->reserved = sqlite3_column_int64(st, 1);
        f->day_version = sqlite3_column_int64(st, 2);
    }
    sqlite3_reset(st);
    return rc < 0 ? rc : 0;
}

/* One read transaction: one WAL snapshot for both reads. */
static int sq_payout_facts(void *impl, const char *id, int64_t release_at_us,
                           og__payout_facts *out)
{
    sq_store *s = impl;
    og__payout_facts f;
    sq_conn *c;
    int rc;

    if ((rc = sq_begin_as(s, SQ_BEGIN_READ, &c)) < 0)
        return rc;
    rc = sq_read_facts(c, id, release_at_us, &f);
    rc = sq_end(s, c, rc, false); /* a read: ROLLBACK ends it */
    if (rc == 0)
        *out = f;
    return rc;
}

/* ---- the decision (Q26-Q28) ------------------------------------------------ */

/* The decision row and its history entry. */
static int sq_decision_write(sq_conn *c, const og__payout_decide_req *r,
                             const og__payout_facts *f,
                             const og__payout_plan *p, int64_t now)
{
    const og_payout_verdict *v = &p->verdict;
    const char *reason = og_payout_reason_name(v->reason);
    bool read = v->terms_fingerprint[0] != '\0'; /* the facts were there */
    sqlite3_stmt *st = sq_stmt(c, SQ_PAYOUT_DECISION);
    int rc;

    if (!st)
        return sq_err(c);
    sqlite3_bind_text(st, 1, r->decision_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->payout_id, -1, SQLITE_STATIC);
    sq_bind_opt(st, 3, f->found ? f->tenant_id : NULL);
    sqlite3_bind_text(st, 4, p->mode, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, og_payout_outcome_name(v->outcome), -1,
                      SQLITE_STATIC);
    sqlite3_bind_text(st, 6, reason, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, v->policy_version, -1, SQLITE_STATIC);
    sq_bind_opt(st, 8, read ? v->terms_fingerprint : NULL);
    sq_bind_i64_opt(st, 9, read ? v->evaluated.tenant_settings : 0);
    sq_bind_i64_opt(st, 10, read ? v->evaluated.beneficiary : 0);
    sq_bind_i64_opt(st, 11, read ? v->evaluated.destination : 0);
    sq_bind_i64_opt(st, 12, read ? v->evaluated.payout : 0);
    sqlite3_bind_text(st, 13, r->requester_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 14, r->requester_role, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 15, r->approval_limit);
    sqlite3_bind_int64(st, 16, f->observed_at_us);
    sqlite3_bind_int64(st, 17, now);
    sqlite3_bind_text(st, 18, r->correlation_id, -1, SQLITE_STATIC);
    if ((rc = sq_done(c, st)) < 0)
        return rc;
    {
        sq_payout_event ev = {.payout_id = r->payout_id, .at = now,
                              .kind = "decided", .actor = r->requester_id,
                              .correlation_id = r->correlation_id,
                              .decision_id = r->decision_id, .reason = reason};
        return sq_payout_event_add(c, &ev);
    }
}

/* What an Allowed decision enables, after the reservation and the
 * decision: the approval with the attempt number (Q28), the grant's row
 * and bindings, the job, a history entry per step. */
static int sq_decision_issue(sq_store *s, sq_conn *c,
                             const og__payout_decide_req *r,
                             const og__payout_facts *f,
                             const og__payout_plan *p, int64_t now)
{
    sqlite3_stmt *st;
    int64_t version, attempt;
    int rc;

    if (!(st = sq_stmt(c, SQ_PAYOUT_APPROVE)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, r->payout_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, f->version);
    sqlite3_bind_text(st, 3, p->from_state, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, f->release_day, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, now);
    if ((rc = sq_step(c, st)) != 1) {
        sqlite3_reset(st);
        /* read in this transaction, under the write lock: it cannot have
         * moved */
        return rc < 0 ? rc : OG_EINTERNAL;
    }
    version = sqlite3_column_int64(st, 0);
    attempt = sqlite3_column_int64(st, 1);
    if ((rc = sq_done(c, st)) < 0)
        return rc;
    if (version != p->new_version || attempt != p->attempt_number)
        return OG_EINTERNAL;

    /* The grant's row: row form, no family, the window's end trusted. */
    if (!(st = sq_stmt(c, SQ_GRANT_INSERT)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, OG_PAYOUT_ISSUER, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->grant_id, -1, SQLITE_STATIC);
    sqlite3_bind_null(st, 3);
    sqlite3_bind_int64(st, 4, r->expires_at_us);
    if ((rc = sq_done(c, st)) < 0)
        return rc;
    if (!(st = sq_stmt(c, SQ_PAYOUT_BIND)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, r->grant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->decision_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, r->payout_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, f->tenant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, p->verdict.terms_fingerprint, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, version);
    sqlite3_bind_int64(st, 7, attempt);
    sqlite3_bind_text(st, 8, p->verdict.policy_version, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 9, f->amount_minor);
    sqlite3_bind_text(st, 10, f->release_day, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 11, r->not_before_us);
    sqlite3_bind_int64(st, 12, r->expires_at_us);
    sqlite3_bind_int64(st, 13, now);
    if ((rc = sq_done(c, st)) < 0)
        return rc;
    if (!(st = sq_stmt(c, SQ_PAYOUT_JOB)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, r->job_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->payout_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, r->grant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, r->correlation_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, now);
    if ((rc = sq_done(c, st)) < 0)
        return rc;
    {
        const sq_payout_event evs[] = {
            {.kind = "reserved", .amount = f->amount_minor,
             .release_day = f->release_day},
            {.kind = "approved", .from_state = p->from_state,
             .to_state = "Approved", .payout_version = version},
            {.kind = "grant-issued", .grant_id = r->grant_id},
            {.kind = "job-queued", .grant_id = r->grant_id,
             .job_id = r->job_id},
        };
        for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++) {
            sq_payout_event ev = evs[i];

            ev.payout_id = r->payout_id;
            ev.at = now;
            ev.actor = r->requester_id;
            ev.correlation_id = r->correlation_id;
            ev.decision_id = r->decision_id;
            if ((rc = sq_payout_event_add(c, &ev)) < 0)
                return rc;
        }
    }
    (void)s;
    return 0;
}

static int sq_payout_decide_in(sq_store *s, sq_conn *c,
                               const og__payout_decide_req *r,
                               og_payout_decision *out)
{
    og__payout_facts f;
    og__payout_plan p;
    sqlite3_stmt *st;
    int64_t now = 0, reserved = 0;
    int rc;

    /* 1. The facts, under the write lock: nothing changes them before the
     * commit (Q1, Q26). */
    if ((rc = sq_read_facts(c, r->payout_id, r->not_before_us, &f)) < 0)
        return rc;
    /* 2. The pure core decides (PP1). */
    if ((rc = og__payout_plan_decide(&f, r, &p)) < 0)
        return rc;
    /* 3. The reservation, ONE conditional write (Q27). Under the write
     * lock the counters just read are the ones it checks, so it succeeds
     * whenever the core allowed; it still decides on its own. */
    if (p.allowed) {
        if (!(st = sq_stmt(c, SQ_PAYOUT_RESERVE)))
            return sq_err(c);
        sqlite3_bind_text(st, 1, f.tenant_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, f.release_day, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, f.amount_minor);
        if ((rc = sq_one_i64(c, st, &reserved)) < 0)
            return rc;
        if (rc == 0)
            og__payout_plan_limit_taken(&p);
    }
    if (og__fault(OG__FAULT_DECIDE_AFTER_RESERVATION))
        return OG_ESTORE_UNAVAILABLE;
    /* 4. One instant for the decision and everything it writes. */
    if (!(st = sq_stmt(c, SQ_CLOCK)))
        return sq_err(c);
    if ((rc = sq_one_i64(c, st, &now)) != 1)
        return rc < 0 ? rc : OG_EINTERNAL;
    if ((rc = sq_decision_write(c, r, &f, &p, now)) < 0)
        return rc;
    if (og__fault(OG__FAULT_DECIDE_AFTER_DECISION))
        return OG_ESTORE_UNAVAILABLE;
    if (p.allowed && (rc = sq_decision_issue(s, c, r, &f, &p, now)) < 0)
        return rc;
    if (og__fault(OG__FAULT_DECIDE_BEFORE_COMMIT))
        return OG_ESTORE_UNAVAILABLE;

    og__payout_decision_fill(r, &f, &p, now, out);
    return 0;
}

static int sq_payout_decide(void *impl, const og__payout_decide_req *r,
                            og_payout_decision *out)
{
    sq_store *s = impl;
    og_payout_decision d;
    sq_conn *c;
    int rc;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_payout_decide_in(s, c, r, &d);
    /* Every decision is kept: Allowed or not, it is history (Q26). Any
     * error rolls all of it back. */
    rc = sq_end(s, c, rc, true);
    if (rc == 0)
        *out = d;
    return rc;
}

/* ---- the claim (Q31) ------------------------------------------------------ */

/* Reads the claim's facts of r's grant: 1 (a payout grant), 0, <0. */
static int sq_claim_facts(sq_conn *c, const char *grant_id,
                          og__payout_claim_facts *f)
{
    sqlite3_stmt *st = sq_stmt(c, SQ_PAYOUT_CLAIM_FACTS);
    int rc, state, status;

    memset(f, 0, sizeof *f);
    if (!st)
        return sq_err(c);
    sqlite3_bind_text(st, 1, grant_id, -1, SQLITE_STATIC);
    if ((rc = sq_step(c, st)) != 1) {
        sqlite3_reset(st);
        return rc;
    }
    state = og__payout_state_parse((const char *)sqlite3_column_text(st, 12));
    status = og__payout_bstatus_parse((const char *)sqlite3_column_text(st, 20));
    if (sq_text(st, 0, f->payout_id, sizeof f->payout_id) < 0 ||
        sq_text(st, 1, f->audience, sizeof f->audience) < 0 ||
        sq_text_opt(st, 7, f->consumed_by, sizeof f->consumed_by) < 0 ||
        sq_text_opt(st, 11, f->consumer_reference,
                    sizeof f->consumer_reference) < 0 ||
        sq_text(st, 16, f->currency, sizeof f->currency) < 0 ||
        sq_text(st, 17, f->destination_id, sizeof f->destination_id) < 0 ||
        state < 0 || status < 0) {
        sqlite3_reset(st);
        return OG_EINTERNAL;
    }
    f->found = true;
    f->executable_version = sqlite3_column_int64(st, 2);
    f->attempt_number = sqlite3_column_int64(st, 3);
    f->not_before_us = sqlite3_column_int64(st, 4);
    f->expires_at_us = sqlite3_column_int64(st, 5);
    f->consumed = sqlite3_column_int(st, 6) != 0;
    f->revoked = sqlite3_column_int(st, 8) != 0;
    f->consumer_found = sqlite3_column_int(st, 9) != 0;
    f->consumer_payout = sqlite3_column_int(st, 10) != 0;
    f->state = (og_payout_state)state;
    f->payout_version = sqlite3_column_int64(st, 13);
    f->active_attempt = sqlite3_column_int(st, 14) != 0;
    f->amount_minor = sqlite3_column_int64(st, 15);
    f->payouts_suspended = sqlite3_column_int(st, 18) != 0;
    f->settings_version = sqlite3_column_int64(st, 19);
    f->beneficiary_status = (og_payout_beneficiary_status)status;
    f->beneficiary_version = sqlite3_column_int64(st, 21);
    f->destination_version = sqlite3_column_int64(st, 22);
    f->now_us = sqlite3_column_int64(st, 23);
    return (rc = sq_done(c, st)) < 0 ? rc : 1;
}

/* The claim's writes, at the facts' instant. Each re-asserts its
 * conditions; under the write lock they hold, so a write that takes
 * nothing is a defect (rolled back). */
static int sq_claim_write(sq_store *s, sq_conn *c,
                          const og__payout_claim_req *r,
                          const og__payout_claim_facts *f,
                          const og__payout_claim_plan *p, og_operation *op)
{
    sqlite3_stmt *st;
    int64_t v = 0;
    int rc;

    if (!(st = sq_stmt(c, SQ_PAYOUT_CLAIM_GRANT)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, r->grant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->operation_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, f->now_us);
    sqlite3_bind_int64(st, 4, s->opts.timings.admission_leeway_us);
    if ((rc = sq_one_i64(c, st, &v)) != 1)
        return rc < 0 ? rc : OG_EINTERNAL;
    if (!(st = sq_stmt(c, SQ_PAYOUT_CLAIM_PAYOUT)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, f->payout_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, f->executable_version);
    sqlite3_bind_text(st, 3, r->operation_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, f->now_us);
    if ((rc = sq_one_i64(c, st, &v)) != 1 || v != p->new_version)
        return rc < 0 ? rc : OG_EINTERNAL;
    if (!(st = sq_stmt(c, SQ_PAYOUT_CLAIM_OP)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, r->operation_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->grant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, r->worker_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, f->destination_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, p->amount, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, f->currency, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 7, f->now_us);
    sqlite3_bind_int64(st, 8, r->lease_us);
    sqlite3_bind_int64(st, 9, r->send_window_us);
    sqlite3_bind_text(st, 10, p->idempotency_key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 11, p->client_reference, -1, SQLITE_STATIC);
    if ((rc = sq_step(c, st)) == 1)
        rc = sq_read_op(st, op);
    else if (rc == 0)
        rc = OG_EINTERNAL; /* VALUES always inserts or fails */
    if (rc < 0) {
        sqlite3_reset(st);
        return rc;
    }
    if ((rc = sq_done(c, st)) < 0)
        return rc;
    return sq_payout_event_add(c, &(sq_payout_event){
                                      .payout_id = f->payout_id,
                                      .at = f->now_us,
                                      .kind = "claimed",
                                      .actor = r->worker_id,
                                      .grant_id = r->grant_id,
                                      .from_state = "Approved",
                                      .to_state = "Executing",
                                      .payout_version = p->new_version,
                                      .reason = p->client_reference,
                                  });
}

static int sq_payout_claim_in(sq_store *s, sq_conn *c,
                              const og__payout_claim_req *r,
                              og_payout_claim_result *out, bool *keep)
{
    og__payout_claim_facts f;
    og__payout_claim_plan p;
    int rc;

    /* 1. The facts, under the write lock (Q1, Q31). */
    if ((rc = sq_claim_facts(c, r->grant_id, &f)) < 0)
        return rc;
    /* 2. The pure verdict (PP4). */
    if ((rc = og__payout_plan_claim(&f, r, s->opts.timings.admission_leeway_us,
                                    &p)) < 0)
        return rc;
    memset(out, 0, sizeof *out);
    out->outcome = p.outcome;
    if (f.found) {
        memcpy(out->payout_id, f.payout_id, sizeof out->payout_id);
        out->attempt_number = f.attempt_number;
    }
    if (p.outcome == OG_PAYOUT_CLAIM_DUPLICATE)
        memcpy(out->attempt.operation_id, f.consumed_by,
               sizeof out->attempt.operation_id);
    if (p.outcome != OG_PAYOUT_CLAIM_CLAIMED)
        return 0; /* nothing written: the caller rolls back */
    /* 3. The writes. */
    if ((rc = sq_claim_write(s, c, r, &f, &p, &out->attempt)) < 0)
        return rc;
    if (og__fault(OG__FAULT_CLAIM_BEFORE_COMMIT))
        return OG_ESTORE_UNAVAILABLE;
    out->has_attempt = true;
    *keep = true;
    return 0;
}

static int sq_payout_claim(void *impl, const og__payout_claim_req *r,
                           og_payout_claim_result *out)
{
    sq_store *s = impl;
    og_payout_claim_result res;
    bool keep = false;
    sq_conn *c;
    int rc;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_payout_claim_in(s, c, r, &res, &keep);
    /* Only CLAIMED commits; every other outcome and any error roll back:
     * zero rows anywhere (Q31). */
    rc = sq_end(s, c, rc, keep);
    if (rc == 0)
        *out = res;
    return rc;
}

/* ---- jobs (Q30) ---------------------------------------------------------- */

static int sq_payout_job_take_in(sq_conn *c, int64_t lease_us,
                                 og_payout_job *out, bool *keep)
{
    sqlite3_stmt *st = sq_stmt(c, SQ_PAYOUT_JOB_TAKE);
    int rc;

    if (!st)
        return sq_err(c);
    sqlite3_bind_int64(st, 1, lease_us);
    if ((rc = sq_step(c, st)) == 1) {
        memset(out, 0, sizeof *out);
        if (sq_text(st, 0, out->job_id, sizeof out->job_id) < 0 ||
            sq_text(st, 1, out->payout_id, sizeof out->payout_id) < 0 ||
            sq_text(st, 2, out->grant_id, sizeof out->grant_id) < 0 ||
            sq_text(st, 3, out->correlation_id, sizeof out->correlation_id) < 0 ||
            sq_text_opt(st, 4, out->resubmitted_from,
                        sizeof out->resubmitted_from) < 0) {
            sqlite3_reset(st);
            return OG_EINTERNAL;
        }
        out->delivery = sqlite3_column_int64(st, 5);
        out->lease_until_us = sqlite3_column_int64(st, 6);
        if ((rc = sq_done(c, st)) < 0)
            return rc;
        *keep = true;
        return 1;
    }
    sqlite3_reset(st);
    return rc;
}

static int sq_payout_job_take(void *impl, int64_t lease_us,
                              og_payout_job *out)
{
    sq_store *s = impl;
    og_payout_job j;
    bool keep = false;
    sq_conn *c;
    int rc, end;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_payout_job_take_in(c, lease_us, &j, &keep);
    if ((end = sq_end(s, c, rc < 0 ? rc : 0, keep)) < 0)
        return end; /* a take not known to have committed took nothing */
    if (rc == 1)
        *out = j;
    return rc;
}

/* Ack (SQ_PAYOUT_JOB_ACK) or postpone (SQ_PAYOUT_JOB_POSTPONE, ?3 the
 * delay): ONE conditional write on the delivery held. */
static int sq_payout_job_settle(sq_store *s, int which, const char *id,
                                int64_t delivery, int64_t delay_us,
                                bool *done)
{
    sqlite3_stmt *st;
    int64_t one = 0;
    sq_conn *c;
    int rc;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    if (!(st = sq_stmt(c, which))) {
        rc = sq_err(c);
    } else {
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, delivery);
        if (which == SQ_PAYOUT_JOB_POSTPONE)
            sqlite3_bind_int64(st, 3, delay_us);
        rc = sq_one_i64(c, st, &one);
    }
    if ((rc = sq_end(s, c, rc < 0 ? rc : 0, rc == 1)) == 0)
        *done = one == 1;
    return rc;
}

static int sq_payout_job_ack(void *impl, const char *id, int64_t delivery,
                             bool *acked)
{
    return sq_payout_job_settle(impl, SQ_PAYOUT_JOB_ACK, id, delivery, 0,
                                acked);
}

static int sq_payout_job_postpone(void *impl, const char *id,
                                  int64_t delivery, int64_t delay_us,
                                  bool *postponed)
{
    return sq_payout_job_settle(impl, SQ_PAYOUT_JOB_POSTPONE, id, delivery,
                                delay_us, postponed);
}

static int sq_payout_job_resubmit_in(sq_conn *c, const char *id,
                                     const char *actor, const char *new_id,
                                     bool *keep)
{
    char payout[OG_ID_MAX + 1], grant[OG_ID_MAX + 1], corr[OG_ID_MAX + 1];
    sqlite3_stmt *st = sq_stmt(c, SQ_PAYOUT_JOB_RESUBMIT);
    int64_t at;
    int rc;

    if (!st)
        return sq_err(c);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, new_id, -1, SQLITE_STATIC);
    if ((rc = sq_step(c, st)) != 1) {
        sqlite3_reset(st);
        return rc; /* 0: no such job */
    }
    at = sqlite3_column_int64(st, 3);
    if (sq_text(st, 0, payout, sizeof payout) < 0 ||
        sq_text(st, 1, grant, sizeof grant) < 0 ||
        sq_text(st, 2, corr, sizeof corr) < 0) {
        sqlite3_reset(st);
        return OG_EINTERNAL;
    }
    if ((rc = sq_done(c, st)) < 0)
        return rc;
    {
        sq_payout_event ev = {.payout_id = payout, .at = at,
                              .kind = "job-resubmitted", .actor = actor,
                              .correlation_id = corr, .grant_id = grant,
                              .job_id = new_id};
        if ((rc = sq_payout_event_add(c, &ev)) < 0)
            return rc;
    }
    *keep = true;
    return 1;
}

static int sq_payout_job_resubmit(void *impl, const char *id,
                                  const char *actor, const char *new_id)
{
    sq_store *s = impl;
    bool keep = false;
    sq_conn *c;
    int rc, end;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_payout_job_resubmit_in(c, id, actor, new_id, &keep);
    if ((end = sq_end(s, c, rc < 0 ? rc : 0, keep)) < 0)
        return end;
    return rc;
}

/* ---- payout grants (Q29) --------------------------------------------------- */

static int sq_payout_grant_row(sq_store *s, sqlite3_stmt *st, void *out)
{
    og_payout_grant_view *v = out;

    memset(v, 0, sizeof *v);
    if (sq_text(st, 0, v->grant_id, sizeof v->grant_id) < 0 ||
        sq_text(st, 1, v->decision_id, sizeof v->decision_id) < 0 ||
        sq_text(st, 2, v->payout_id, sizeof v->payout_id) < 0 ||
        sq_text(st, 3, v->tenant_id, sizeof v->tenant_id) < 0 ||
        sq_text(st, 4, v->operation, sizeof v->operation) < 0 ||
        sq_text(st, 5, v->audience, sizeof v->audience) < 0 ||
        sq_text(st, 6, v->terms_fingerprint, sizeof v->terms_fingerprint) < 0 ||
        sq_text(st, 7, v->policy_version, sizeof v->policy_version) < 0 ||
        sq_text(st, 11, v->release_day, sizeof v->release_day) < 0 ||
        sq_text_opt(st, 16, v->consumed_by_operation,
                    sizeof v->consumed_by_operation) < 0)
        return OG_EINTERNAL;
    v->executable_payout_version = sqlite3_column_int64(st, 8);
    v->attempt_number = sqlite3_column_int64(st, 9);
    v->reserved_minor = sqlite3_column_int64(st, 10);
    v->not_before_us = sqlite3_column_int64(st, 12);
    v->expires_at_us = sqlite3_column_int64(st, 13);
    v->created_at_us = sqlite3_column_int64(st, 14);
    v->consumed_at_us = sqlite3_column_int64(st, 15); /* NULL reads 0 */
    v->revoked_at_us = sqlite3_column_int64(st, 17);
    v->released_at_us = sqlite3_column_int64(st, 18);
    v->read_at_us = sqlite3_column_int64(st, 19);
    v->state = og__payout_grant_state(
        sqlite3_column_type(st, 15) != SQLITE_NULL,
        sqlite3_column_type(st, 17) != SQLITE_NULL, v->expires_at_us,
        s->opts.timings.admission_leeway_us, v->read_at_us);
    return 0;
}

static int sq_payout_grant_get(void *impl, const char *grant_id,
                               og_payout_grant_view *out)
{
    return sq_read_row(impl, SQ_PAYOUT_GRANT_GET, grant_id, 0,
                       sq_payout_grant_row, out);
}

/* Marks grant_id's binding released at `at` for `cause` — only where it is
 * not yet (Q29) — and moves its amount off the day's reserved counter
 * (onto paid when `paid`). 1 and the amount and day, 0 when it was
 * released before (nothing written), or an error. */
static int sq_settle(sq_conn *c, const char *grant_id, int64_t at,
                     const char *cause, bool paid, char *payout,
                     int64_t *amount, char day[OG_PAYOUT_DAY_LEN + 1])
{
    char tenant[OG_ID_MAX + 1];
    sqlite3_stmt *st = sq_stmt(c, SQ_PAYOUT_RELEASE);
    int64_t left;
    int rc;

    if (!st)
        return sq_err(c);
    sqlite3_bind_text(st, 1, grant_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, at);
    sqlite3_bind_text(st, 3, cause, -1, SQLITE_STATIC);
    if ((rc = sq_step(c, st)) != 1) {
        sqlite3_reset(st);
        return rc; /* 0: released before, once is all */
    }
    *amount = sqlite3_column_int64(st, 3);
    if (sq_text(st, 0, payout, OG_ID_MAX + 1) < 0 ||
        sq_text(st, 1, tenant, sizeof tenant) < 0 ||
        sq_text(st, 2, day, OG_PAYOUT_DAY_LEN + 1) < 0) {
        sqlite3_reset(st);
        return OG_EINTERNAL;
    }
    if ((rc = sq_done(c, st)) < 0)
        return rc;
    if (!(st = sq_stmt(c, paid ? SQ_PAYOUT_PAY : SQ_PAYOUT_UNRESERVE)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, day, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, *amount);
    if ((rc = sq_one_i64(c, st, &left)) != 1)
        return rc < 0 ? rc : OG_EINTERNAL; /* the binding's day row exists */
    return 1;
}

/* Releases grant_id's reservation once (Q29), at `at`, for `cause`, with
 * its history entry; nothing when it was released before. */
static int sq_release(sq_conn *c, const char *grant_id, int64_t at,
                      const char *cause, const char *actor)
{
    char payout[OG_ID_MAX + 1], day[OG_PAYOUT_DAY_LEN + 1];
    int64_t amount = 0;
    int rc;

    if ((rc = sq_settle(c, grant_id, at, cause, false, payout, &amount,
                        day)) <= 0)
        return rc;
    {
        sq_payout_event ev = {.payout_id = payout, .at = at,
                              .kind = "reservation-released", .actor = actor,
                              .grant_id = grant_id, .amount = amount,
                              .release_day = day, .reason = cause};
        return sq_payout_event_add(c, &ev);
    }
}

static int sq_payout_grant_revoke_in(sq_conn *c, const char *grant_id,
                                     const char *actor,
                                     og_revoke_outcome *out, bool *keep)
{
    char payout[OG_ID_MAX + 1];
    sqlite3_stmt *st = sq_stmt(c, SQ_PAYOUT_GRANT_PAYOUT);
    int64_t at = 0;
    int rc;

    if (!st)
        return sq_err(c);
    sqlite3_bind_text(st, 1, grant_id, -1, SQLITE_STATIC);
    if ((rc = sq_step(c, st)) == 1)
        rc = sq_text(st, 0, payout, sizeof payout) < 0 ? OG_EINTERNAL : 1;
    sqlite3_reset(st);
    if (rc <= 0) {
        *out = OG_REVOKE_NOT_ISSUED; /* not a payout grant */
        return rc;
    }
    /* The grant's row, live: ONE conditional write (Q29). */
    if (!(st = sq_stmt(c, SQ_PAYOUT_GRANT_REVOKE)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, grant_id, -1, SQLITE_STATIC);
    if ((rc = sq_one_i64(c, st, &at)) <= 0) {
        *out = OG_REVOKE_ALREADY_USED_OR_REVOKED;
        return rc;
    }
    {
        sq_payout_event ev = {.payout_id = payout, .at = at,
                              .kind = "grant-revoked", .actor = actor,
                              .grant_id = grant_id};
        if ((rc = sq_payout_event_add(c, &ev)) < 0)
            return rc;
    }
    /* Unconsumed: its reservation goes with it, unless an expiry released
     * it already. */
    if ((rc = sq_release(c, grant_id, at, "revoked", actor)) < 0)
        return rc;
    *out = OG_REVOKE_REVOKED;
    *keep = true;
    return 0;
}

static int sq_payout_grant_revoke(void *impl, const char *grant_id,
                                  const char *actor, og_revoke_outcome *out)
{
    sq_store *s = impl;
    og_revoke_outcome o = OG_REVOKE_NOT_ISSUED;
    bool keep = false;
    sq_conn *c;
    int rc;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_payout_grant_revoke_in(c, grant_id, actor, &o, &keep);
    if ((rc = sq_end(s, c, rc, keep)) == 0)
        *out = o;
    return rc;
}

/* One expiry batch's fixed parameters (Q29), as the archive's (Q21). */
typedef struct sq_expire_args {
    int64_t cutoff; /* ?1: now - leeway - cleanup margin */
    int batch;      /* ?2 */
    int64_t from;   /* ?3: the pass's keyset cursor */
    int64_t now;    /* ?4: released_at, the history's time */
} sq_expire_args;

static int sq_expire_step(sq_conn *c, int i, const sq_expire_args *a,
                          int64_t *count, int64_t *last)
{
    sqlite3_stmt *st = sq_stmt(c, i);
    int rc;

    if (!st)
        return sq_err(c);
    sqlite3_bind_int64(st, 1, a->cutoff);
    sqlite3_bind_int(st, 2, a->batch);
    sqlite3_bind_int64(st, 3, a->from);
    if (sqlite3_bind_parameter_count(st) >= 4)
        sqlite3_bind_int64(st, 4, a->now);
    if (i != SQ_PAYOUT_EXPIRE_CURSOR)
        return sq_done(c, st);
    if ((rc = sq_step(c, st)) == 1) {
        *count = sqlite3_column_int64(st, 0);
        if (sqlite3_column_type(st, 1) != SQLITE_NULL)
            *last = sqlite3_column_int64(st, 1);
    }
    sqlite3_reset(st);
    return rc < 0 ? rc : rc == 1 ? 0 : OG_EINTERNAL;
}

static int sq_payout_expire_in(sq_store *s, sq_conn *c, int batch,
                               int64_t *from_us, int64_t *taken, bool *keep)
{
    const og_timings *t = &s->opts.timings;
    sq_expire_args a = {0, batch, *from_us, 0};
    int64_t count = 0, last = *from_us, marked;
    sqlite3_stmt *st;
    int rc;

    /* One clock for the whole batch: every statement picks the same set. */
    if (!(st = sq_stmt(c, SQ_CLOCK)))
        return sq_err(c);
    if ((rc = sq_one_i64(c, st, &a.now)) != 1)
        return rc < 0 ? rc : OG_EINTERNAL;
    a.cutoff = a.now - t->admission_leeway_us - t->cleanup_margin_us;
    if ((rc = sq_expire_step(c, SQ_PAYOUT_EXPIRE_CURSOR, &a, &count, &last)) <
        0)
        return rc;
    if (count == 0) {
        *taken = 0;
        return 0;
    }
    if ((rc = sq_expire_step(c, SQ_PAYOUT_EXPIRE_DAYS, &a, NULL, NULL)) < 0 ||
        (rc = sq_expire_step(c, SQ_PAYOUT_EXPIRE_EVENTS, &a, NULL, NULL)) < 0 ||
        (rc = sq_expire_step(c, SQ_PAYOUT_EXPIRE_MARK, &a, NULL, NULL)) < 0)
        return rc;
    marked = sqlite3_changes64(c->db);
    if (marked != count)
        return OG_EINTERNAL; /* the pick is one set under the write lock */
    *taken = count;
    *from_us = last;
    *keep = true;
    return 0;
}

static int sq_payout_expire_batch(void *impl, int batch, int64_t *from_us,
                                  int64_t *taken)
{
    sq_store *s = impl;
    int64_t from = *from_us, n = 0;
    bool keep = false;
    sq_conn *c;
    int rc;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_payout_expire_in(s, c, batch, &from, &n, &keep);
    if ((rc = sq_end(s, c, rc, keep)) == 0) {
        *taken = n;
        *from_us = from;
    }
    return rc;
}

/* ===========================================================================
 * Schema version and migrations
 * ========================================================================= */

/* Version on an open connection: 0 when never migrated. */
static int sq_version_on(sqlite3 *db, int *version)
{
    sqlite3_stmt *st = NULL;
    int rc, v = 0, present;

    rc = sqlite3_prepare_v2(db, sq_sql[SQ_SCHEMA_TABLE], -1, &st, NULL);
    if (rc != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW)
        goto fail;
    present = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    st = NULL;
    if (present) {
        rc = sqlite3_prepare_v2(db, sq_sql[SQ_SCHEMA_VERSION], -1, &st, NULL);
        if (rc != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW)
            goto fail;
        v = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
    }
    *version = v;
    return 0;
fail:
    rc = og__sqlite_classify(sqlite3_extended_errcode(db));
    sqlite3_finalize(st);
    return rc;
}

static int sq_schema_version(void *impl, int *version)
{
    sq_store *s = impl;
    void *conn;
    int rc;

    /* A store that does not exist yet has never been migrated. */
    if (access(s->path, F_OK) != 0) {
        *version = 0;
        return 0;
    }
    if ((rc = og__pool_get(s->pool, &conn)) < 0)
        return rc;
    sq_arm(conn, sq_mono_us() + s->opts.timings.store_timeout_us);
    rc = sq_version_on(((sq_conn *)conn)->db, version);
    og__pool_put(s->pool, conn, rc < 0);
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

static int sq_migrate(void *impl, og_consumption_keys keys, int target,
                      int *from, int *to)
{
    sq_store *s = impl;
    sqlite3 *db = NULL;
    int rc, v = 0;
    size_t i;

    if ((rc = sq_open_db(s, true, &db)) < 0)
        return rc;
    /* A migration that rebuilds a table drops it while another table's
     * foreign key names it; with the keys enforced the drop would fail
     * (or delete). So this connection, which runs migrations only, turns
     * them off — outside the transaction, where the pragma works — and
     * each such migration checks its table's keys before the commit
     * (sq_migration.fk_check; Q25). BEGIN IMMEDIATE serializes concurrent
     * migrators; each re-reads the version under the lock. */
    if (sqlite3_exec(db,
                     "PRAGMA foreign_keys=OFF;"
                     "BEGIN IMMEDIATE;"
                     "CREATE TABLE IF NOT EXISTS og_schema_migrations ("
                     "  version     INTEGER PRIMARY KEY,"
                     "  description TEXT    NOT NULL,"
                     "  applied_at  INTEGER NOT NULL) STRICT;",
                     NULL, NULL, NULL) != SQLITE_OK)
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
        sqlite3_stmt *st = NULL;

        if (m->version <= v || m->version > target)
            continue;
        if (sqlite3_exec(db,
                         keys == OG_KEYS_HASHED && m->sql_hashed ? m->sql_hashed
                                                                 : m->sql,
                         NULL, NULL, NULL) != SQLITE_OK)
            goto fail;
        if (m->fk_check && (rc = sq_fk_check(db, m->fk_check)) < 0)
            goto out;
        if (sqlite3_prepare_v2(db,
                               "INSERT INTO og_schema_migrations"
                               " (version, description, applied_at)"
                               " VALUES (?1, ?2, " SQ_NOW ")",
                               -1, &st, NULL) != SQLITE_OK)
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

/* The consumption keys the store records (Q23); the store object runs that
 * mode's statements from now on. */
static int sq_read_keys(void *impl, og_consumption_keys *keys)
{
    sq_store *s = impl;
    og_consumption_keys k = OG_KEYS_READABLE;
    sqlite3_stmt *st;
    void *conn;
    int rc;

    if ((rc = og__pool_get(s->pool, &conn)) < 0)
        return rc;
    sq_arm(conn, sq_mono_us() + s->opts.timings.store_timeout_us);
    if (!(st = sq_stmt(conn, SQ_READ_KEYS))) {
        rc = sq_err(conn);
    } else {
        if ((rc = sq_step(conn, st)) == 1)
            rc = og_consumption_keys_parse(
                     (const char *)sqlite3_column_text(st, 0), &k) < 0
                     ? OG_EINTERNAL
                     : 0;
        else if (rc == 0)
            rc = OG_EINTERNAL; /* migration 5 writes the row */
        sqlite3_reset(st);
    }
    og__pool_put(s->pool, conn, false);
    if (rc < 0)
        return rc;
    s->keys = k;
    *keys = k;
    return 0;
}

/* ===========================================================================
 * Open / close
 * ========================================================================= */
static int sq_open(const char *target, const og_store_options *opts,
                   void **impl)
{
    sq_store *s = calloc(1, sizeof *s);

    if (!s)
        return OG_ENOMEM;
    s->path = strdup(target);
    s->opts = *opts;
    s->keys = OG_KEYS_READABLE; /* until sq_read_keys */
    s->pool = og__pool_new(&sq_pool_ops, s, opts->pool_size,
                           opts->timings.store_timeout_us);
    if (!s->path || !s->pool) {
        og__pool_free(s->pool);
        free(s->path);
        free(s);
        return OG_ENOMEM;
    }
    {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&s->cv, &ca);
        pthread_condattr_destroy(&ca);
    }
    pthread_mutex_init(&s->mu, NULL);
    *impl = s;
    return 0;
}

static void sq_close(void *impl)
{
    sq_store *s = impl;

    og__pool_free(s->pool);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->path);
    free(s);
}

/* ===========================================================================
 * Plans (og_store_explain): EXPLAIN QUERY PLAN of the very text each
 * statement is prepared from. EQP plans without binding: the values do not
 * change SQLite's choice of index.
 * ========================================================================= */

#define SQ_EQP_MAX 256 /* plan rows; ours have a handful */

/* The plan of statement i as the sqlite3 shell draws it (indented by
 * depth), written as a block. */
static int sq_explain_stmt(sq_conn *c, const char *title, int i, FILE *out)
{
    char *sql = sqlite3_mprintf("EXPLAIN QUERY PLAN %s", sq_sql[i]);
    int ids[SQ_EQP_MAX], depth[SQ_EQP_MAX], n = 0, rc;
    char *text[SQ_EQP_MAX];
    sqlite3_stmt *st = NULL;

    if (!sql)
        return OG_ENOMEM;
    rc = sqlite3_prepare_v2(c->db, sql, -1, &st, NULL);
    sqlite3_free(sql);
    if (rc != SQLITE_OK)
        return sq_err(c);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && n < SQ_EQP_MAX) {
        int id = sqlite3_column_int(st, 0), parent = sqlite3_column_int(st, 1);
        const char *detail = (const char *)sqlite3_column_text(st, 3);

        depth[n] = 0;
        for (int k = n - 1; k >= 0; k--)
            if (ids[k] == parent) {
                depth[n] = depth[k] + 1;
                break;
            }
        ids[n] = id;
        text[n] = sqlite3_mprintf("%*s%s", 2 * depth[n], "",
                                  detail ? detail : "");
        if (!text[n])
            break;
        n++;
    }
    if (rc == SQLITE_ROW || rc == SQLITE_DONE)
        rc = n > 0 && text[n - 1] ? 0 : OG_EINTERNAL;
    else
        rc = sq_err(c);
    sqlite3_finalize(st);
    if (rc == 0) {
        og__explain_statement(out, title, sq_names[i], sq_sql[i], NULL, 0);
        og__explain_plan(out, NULL, (const char *const *)text, n);
    }
    for (int k = 0; k < n; k++)
        sqlite3_free(text[k]);
    return rc;
}

static int sq_explain(void *impl, int batch, FILE *out)
{
    sq_store *s = impl;
    const struct {
        const char *title;
        int stmt;
    } steps[] = {
        {"Admission, token form: the family's state (a grant with a family)",
         SQ_FAMILY_STATE},
        {"Admission, token form: the claim", SQ_KEYED(s, CLAIM)},
        {"Admission, row form: the claim", SQ_ROW_CLAIM},
        {"Admission: the operation, in the same transaction", SQ_INSERT_OP},
        {"Admission: what holds a key the claim did not take",
         SQ_KEYED(s, READ_CONSUMPTION)},
        {"Cleanup, one batch", SQ_KEYED(s, CLEANUP)},
        {"Payout decision: the daily-limit reservation", SQ_PAYOUT_RESERVE},
        {"Payout jobs: take the oldest available", SQ_PAYOUT_JOB_TAKE},
        {"Payout grants: one expiry batch (its pick)", SQ_PAYOUT_EXPIRE_MARK},
    };
    void *conn;
    int rc = 0;

    (void)batch; /* a LIMIT value: no bearing on SQLite's plan */
    if ((rc = og__pool_get(s->pool, &conn)) < 0)
        return rc;
    sq_arm(conn, sq_mono_us() + s->opts.timings.store_timeout_us);
    fputs("SQLite runs the statements below for each admission in its own "
          "savepoint (claim and operation together, G1), queued admissions "
          "grouped in one `BEGIN IMMEDIATE` transaction with one commit "
          "(group commit).\n\n", out);
    for (size_t k = 0; rc == 0 && k < sizeof steps / sizeof steps[0]; k++)
        rc = sq_explain_stmt(conn, steps[k].title, steps[k].stmt, out);
    og__pool_put(s->pool, conn, false);
    return rc;
}

/* ---- the resolution (Q32) ----------------------------------------------- */

static int sq_resolve_facts(sq_conn *c, const char *id,
                            og__payout_resolve_facts *f)
{
    sqlite3_stmt *st = sq_stmt(c, SQ_PAYOUT_RESOLVE_FACTS);
    int rc, state;

    memset(f, 0, sizeof *f);
    if (!st)
        return sq_err(c);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    if ((rc = sq_step(c, st)) != 1) {
        sqlite3_reset(st);
        return rc; /* 0: not a payout attempt with a binding */
    }
    state = og__payout_state_parse((const char *)sqlite3_column_text(st, 5));
    if (sq_text(st, 0, f->payout_id, sizeof f->payout_id) < 0 ||
        sq_text(st, 1, f->grant_id, sizeof f->grant_id) < 0 ||
        sq_text(st, 2, f->release_day, sizeof f->release_day) < 0 ||
        state < 0) {
        sqlite3_reset(st);
        return OG_EINTERNAL;
    }
    f->found = true;
    f->amount_minor = sqlite3_column_int64(st, 3);
    f->released = sqlite3_column_int(st, 4) != 0;
    f->state = (og_payout_state)state;
    f->payout_version = sqlite3_column_int64(st, 6);
    f->active = sqlite3_column_int(st, 7) != 0;
    return (rc = sq_done(c, st)) < 0 ? rc : 1;
}

static int sq_payout_resolve_in(sq_conn *c, const char *id, unsigned expected,
                                int64_t owner_version, const og_op_outcome *o,
                                og_payout_resolution *out, bool *keep)
{
    og__payout_resolve_facts f;
    og__payout_resolve_plan p;
    sqlite3_stmt *st;
    bool recorded = false;
    int64_t at = 0, v = 0, amount = 0;
    char payout[OG_ID_MAX + 1], day[OG_PAYOUT_DAY_LEN + 1] = "";
    int rc;

    memset(out, 0, sizeof *out);
    /* 1. The outcome: og_op_record's own write, under the write lock. */
    if ((rc = sq_op_record_in(c, id, expected, owner_version, o, &recorded,
                              &at)) < 0)
        return rc;
    if (!recorded) {
        out->outcome = OG_PAYOUT_RESOLVE_NOT_RECORDED;
        return 0; /* nothing written: the caller rolls back */
    }
    /* 2. The attempt's payout and binding, and what follows (PP5). */
    if ((rc = sq_resolve_facts(c, id, &f)) < 0)
        return rc;
    if ((rc = og__payout_plan_resolve(&f, o->status, &p)) < 0)
        return rc;
    if (p.outcome != OG_PAYOUT_RESOLVE_RESOLVED) {
        out->outcome = p.outcome;
        return 0; /* the outcome rolls back with the rest */
    }
    /* 3. The payout, conditional on what was read. */
    if (!(st = sq_stmt(c, SQ_PAYOUT_RESOLVE_PAYOUT)))
        return sq_err(c);
    sqlite3_bind_text(st, 1, f.payout_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, f.payout_version);
    sqlite3_bind_text(st, 3, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, p.to_state, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 5, p.clear_attempt ? 1 : 0);
    sqlite3_bind_int64(st, 6, at);
    if ((rc = sq_one_i64(c, st, &v)) != 1 || v != p.new_version)
        return rc < 0 ? rc : OG_EINTERNAL;
    /* 4. The reservation, once, with the attempt's end. */
    if (p.release_cause) {
        rc = sq_settle(c, f.grant_id, at, p.release_cause,
                       p.reservation == OG_PAYOUT_RESERVATION_PAID, payout,
                       &amount, day);
        if (rc != 1)
            return rc < 0 ? rc : OG_EINTERNAL; /* read unreleased: a defect */
    }
    /* 5. The history. */
    {
        sq_payout_event ev = {.payout_id = f.payout_id, .at = at,
                              .kind = "resolved", .actor = o->actor,
                              .grant_id = f.grant_id,
                              .from_state = p.from_state,
                              .to_state = p.to_state,
                              .payout_version = p.new_version,
                              .amount = amount,
                              .release_day = p.release_cause ? day : NULL,
                              .reason = og_op_status_name(o->status)};
        if ((rc = sq_payout_event_add(c, &ev)) < 0)
            return rc;
    }
    if (og__fault(OG__FAULT_RESOLVE_BEFORE_COMMIT))
        return OG_ESTORE_UNAVAILABLE;
    out->outcome = OG_PAYOUT_RESOLVE_RESOLVED;
    memcpy(out->payout_id, f.payout_id, sizeof out->payout_id);
    memcpy(out->grant_id, f.grant_id, sizeof out->grant_id);
    out->state = p.to;
    out->payout_version = p.new_version;
    out->attempt_cleared = p.clear_attempt;
    out->reservation = p.reservation;
    out->amount_minor = f.amount_minor;
    memcpy(out->release_day, f.release_day, sizeof out->release_day);
    *keep = true;
    return 0;
}

static int sq_payout_resolve(void *impl, const char *id, unsigned expected,
                             int64_t owner_version, const og_op_outcome *o,
                             og_payout_resolution *out)
{
    sq_store *s = impl;
    og_payout_resolution res;
    bool keep = false;
    sq_conn *c;
    int rc;

    if ((rc = sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_payout_resolve_in(c, id, expected, owner_version, o, &res, &keep);
    /* Only RESOLVED commits; NOT_RECORDED, NOT_ACTIVE and any error roll
     * back: nothing changed anywhere (Q32). */
    rc = sq_end(s, c, rc, keep);
    if (rc == 0)
        *out = res;
    return rc;
}

const og__store_methods og__sqlite_methods = {
    .name = "sqlite",
    .open = sq_open,
    .close = sq_close,
    .schema_version = sq_schema_version,
    .migrate = sq_migrate,
    .read_keys = sq_read_keys,
    .admit = sq_admit,
    .operation_get = sq_operation_get,
    .issuance_record = sq_issuance_record,
    .revoke = sq_revoke,
    .family_revoke = sq_family_revoke,
    .consume = sq_consume,
    .ticket_create = sq_ticket_create,
    .ticket_rotate = sq_ticket_rotate,
    .op_may_submit = sq_op_may_submit,
    .op_start = sq_op_start,
    .op_record = sq_op_record,
    .op_takeover = sq_op_takeover,
    .op_resolve = sq_op_resolve,
    .op_list = sq_op_list,
    .op_insert = sq_op_insert,
    .op_history = sq_op_history,
    .cleanup_batch = sq_cleanup_batch,
    .archive_batch = sq_archive_batch,
    .redemption_put = sq_redemption_put,
    .redemption_get = sq_redemption_get,
    .explain = sq_explain,
    .payout_tenant_put = sq_payout_tenant_put,
    .payout_beneficiary_put = sq_payout_beneficiary_put,
    .payout_destination_put = sq_payout_destination_put,
    .payout_destination_token = sq_payout_destination_token,
    .payout_draft = sq_payout_draft,
    .payout_cancel = sq_payout_cancel,
    .payout_get = sq_payout_get,
    .payout_facts = sq_payout_facts,
    .payout_decide = sq_payout_decide,
    .payout_claim = sq_payout_claim,
    .payout_resolve = sq_payout_resolve,
    .payout_job_take = sq_payout_job_take,
    .payout_job_ack = sq_payout_job_ack,
    .payout_job_postpone = sq_payout_job_postpone,
    .payout_job_resubmit = sq_payout_job_resubmit,
    .payout_grant_get = sq_payout_grant_get,
    .payout_grant_revoke = sq_payout_grant_revoke,
    .payout_expire_batch = sq_payout_expire_batch,
};
