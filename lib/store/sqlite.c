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

#include "sqlite/internal.h"

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
    /* The claim, token form (SQ_CLAIM_SQL; Q22). */                        \
    /* The claim, row form: ?1 issuer, ?2 grant id, ?3 operation id (NULL for \
     * the verdict), ?4 leeway. The row's expires_at is the trusted deadline; \
     * the request's is ignored. Returns the row's family when it took it. */ \
    /* The operation, in the same transaction: ?1..?7 the binding,            \
     * ?8 owner version, ?9 execution lease, ?10 submission window. */        \
    /* Families (Q9): ?1 issuer, ?2 family. */                                 \
    /* Marks the family revoked, creating it revoked when never seen; a row   \
     * only when this call revoked it. */                                      \
    /* The family's live token-form grants (SQ_FAMILY_TOKENS_FROM). */       \
    /* Hashed: the same grants, listed with when and how long to hold them */ \
    /* ...and each claimed: ?1 issuer, ?2 grant id, ?3 now, ?4 retain. */     \
    /* Issuance: ?1 issuer, ?2 grant id, ?3 family or NULL, ?4 subject,       \
     * ?5 action, ?6 params digest, ?7 issued_at, ?8 expires_at or NULL,      \
     * ?9 form. A row only when the key was new. */                            \
    /* One grant's revocation, token form (SQ_REVOKE_TOKEN_SQL). */          \
    /* Tickets: ?1 hash, ?2 issuer, ?3 family. */                              \
    /* Rotation's first half: ?1 the presented ticket's hash. */              \
    /* The admission's follow-up (Q22): live, else archived. */                \
    /* Retention (Q19-Q22). Cleanup (SQ_CLEANUP_SQL). */                   \
    X(CLOCK, "SELECT " SQ_NOW)                                                 \
    /* Archiving: ?1 cutoff (last change before it), ?2 batch, ?3 archived_at \
     * (the same 'now' the cutoff came from), ?4 the pass's keyset cursor.    \
     * The batch's greatest key, read first: the next cursor. */              \
    /* Execution (Q13-Q18). ?1 is the operation id in each. */                \
    /* May the owner at version ?2 send a create request now? A read: a     \
     * credit from Admitted or Unknown, a payout only once Started (Q25). */  \
    /* A payout attempt's start (Q25: P1, P2): ?2 the owner's version. One    \
     * 'now' for the lease and submit_by tests and the returned event time    \
     * (Q15), read under the write lock. A row only when it started. */       \
    /* The status an execution write replaces, read under the write lock. */ \
    /* An outcome: ?2 expected owner version, ?3 'Admitted' or NULL, ?4       \
     * 'Started' or NULL, ?5 'Unknown' or NULL (the expected set; nothing     \
     * else can be replaced, Q14), ?6 new status, ?7 reason or NULL, ?8       \
     * provider reference or NULL. NotStarted only for a payout above the     \
     * initial owner version (Q25: P2), whatever store.c checked. A row only  \
     * when it hit. */                                                         \
    /* Recovery's takeover: ?2 expected owner version, ?3 recovery lease.     \
     * 'now' is one value for the whole step (Q15): the expiry test, the new  \
     * lease and the returned event time. A Started payout is taken over too  \
     * (P3); the new version fences its old owner's start and records. */    \
    /* og__op_insert (tests only): ?1..?7 the binding, ?8 owner version,     \
     * ?9 execution lease, ?10 submission window, ?11 kind, ?12 idempotency   \
     * key, ?13 client reference (NULL: the operation id). No claim. */      \
    /* An operator's resolution: ?2 'Succeeded', 'Failed' or 'NotApplied',    \
     * ?3 reason, ?4 provider reference or NULL. */                            \
    /* The event of the write above, in its transaction: ?2 at, ?3 kind,      \
     * ?4 from, ?5 to, ?6 owner version after, ?7 reason, ?8 provider         \
     * reference, ?9 actor, ?10 evidence (NULL: none). */                     \
    /* Redemption recovery points (Q24). ?1 caller, ?2 idempotency key,    \
     * ?3 code hash, ?4 nonce, ?5 sealed. A row only when this statement     \
     * wrote the point; an existing one is never overwritten. */              \
    /* The key's own point first, else another point of the same code (?3   \
     * NULL: none asked for); one statement, one snapshot. */                 \
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

/* Until each subsystem has its file in lib/store/sqlite/: the statements
 * of the list above run through the folder's statement cache (conn.c). */
typedef og__sq_store sq_store;
typedef og__sq_conn sq_conn;
#define SQ_KEYED_I(s, NAME)                                                    \
    ((s)->keys == OG_KEYS_HASHED ? SQ_##NAME##_HASHED : SQ_##NAME)
static sqlite3_stmt *sq_stmt(sq_conn *c, int i)
{
    sqlite3_stmt *st;

    return og__sq_stmt(c, sq_sql[i], &st) < 0 ? NULL : st;
}
#define sq_mono_us og__sq_mono_us
#define sq_arm og__sq_arm
#define sq_open_db og__sq_open_db
#define sq_err og__sq_err
#define sq_rollback og__sq_rollback
#define sq_text og__sq_text
#define sq_text_opt og__sq_text_opt
#define sq_read_op og__sq_read_op
#define sq_step og__sq_step
#define sq_done og__sq_done
#define sq_bind_opt og__sq_bind_opt
#define sq_begin og__sq_begin
#define sq_end og__sq_end
#define sq_one_i64 og__sq_one_i64
#define sq_op_record_in og__sq_op_record_in


/* ===========================================================================
 * The payout store (Q26-Q30). Every write is ONE BEGIN IMMEDIATE
 * transaction (sq_begin/sq_end, as in Q8) holding its history entries; a
 * write that changed nothing rolls back and reports why from a read of the
 * same transaction. The statements are SQ_PAYOUT_STATEMENTS above.
 * ========================================================================= */

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

int og__sq_payout_tenant_put(void *impl, const og__payout_tenant_req *r,
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

int og__sq_payout_beneficiary_put(void *impl,
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

int og__sq_payout_destination_put(void *impl,
                                     const og__payout_destination_req *r,
                                     og_payout_put_result *out)
{
    return sq_put(impl, SQ_PAYOUT_DESTINATION_CREATE,
                  SQ_PAYOUT_DESTINATION_UPDATE, SQ_PAYOUT_DESTINATION_STATE,
                  r->expected_version, sq_bind_destination, r, out);
}

/* ---- the executor's read of a token (S7) -------------------------------- */

/* The token's reader: out is OG_PAYOUT_TOKEN_MAX + 1 bytes. */
static int sq_token_row(sq_store *s, sqlite3_stmt *st, void *out)
{
    (void)s;
    return sq_text(st, 0, out, OG_PAYOUT_TOKEN_MAX + 1);
}

int og__sq_payout_destination_token(void *impl, const char *id,
                                       int64_t version, char *out,
                                       size_t outlen)
{
    if (outlen < OG_PAYOUT_TOKEN_MAX + 1)
        return OG_EINTERNAL; /* store.c passes its own buffer */
    return og__sq_read_row(impl, sq_sql[SQ_PAYOUT_DESTINATION_TOKEN], id, version,
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

int og__sq_payout_draft(void *impl, const og__payout_draft_req *r,
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

int og__sq_payout_cancel(void *impl, const char *id, int64_t expected,
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

int og__sq_payout_get(void *impl, const char *id, og_payout_view *out)
{
    return og__sq_read_row(impl, sq_sql[SQ_PAYOUT_GET], id, 0, sq_payout_view_row, out);
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
int og__sq_payout_facts(void *impl, const char *id, int64_t release_at_us,
                           og__payout_facts *out)
{
    sq_store *s = impl;
    og__payout_facts f;
    sq_conn *c;
    int rc;

    if ((rc = og__sq_begin_read(s, &c)) < 0)
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
    if ((rc = og__sq_grant_insert(c, OG_PAYOUT_ISSUER, r->grant_id, NULL,
                                  r->expires_at_us)) < 0)
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

int og__sq_payout_decide(void *impl, const og__payout_decide_req *r,
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

int og__sq_payout_claim(void *impl, const og__payout_claim_req *r,
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

int og__sq_payout_job_take(void *impl, int64_t lease_us,
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

int og__sq_payout_job_ack(void *impl, const char *id, int64_t delivery,
                             bool *acked)
{
    return sq_payout_job_settle(impl, SQ_PAYOUT_JOB_ACK, id, delivery, 0,
                                acked);
}

int og__sq_payout_job_postpone(void *impl, const char *id,
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

int og__sq_payout_job_resubmit(void *impl, const char *id,
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

int og__sq_payout_grant_get(void *impl, const char *grant_id,
                               og_payout_grant_view *out)
{
    return og__sq_read_row(impl, sq_sql[SQ_PAYOUT_GRANT_GET], grant_id, 0,
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

int og__sq_payout_grant_revoke(void *impl, const char *grant_id,
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

int og__sq_payout_expire_batch(void *impl, int batch, int64_t *from_us,
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
 * Plans (og_store_explain): EXPLAIN QUERY PLAN of the very text each
 * statement is prepared from. EQP plans without binding: the values do not
 * change SQLite's choice of index.
 * ========================================================================= */

#define SQ_EQP_MAX 256 /* plan rows; ours have a handful */

/* The columns of an EXPLAIN QUERY PLAN row. */
enum { EQP_ID, EQP_PARENT, EQP_NOTUSED, EQP_DETAIL };

/* The plan of statement sql, headed title and name, as the sqlite3 shell
 * draws it (indented by depth), written as a block. */
static int sq_explain_stmt(og__sq_conn *c, const char *title,
                           const char *name, const char *stmt, FILE *out)
{
    char *sql = sqlite3_mprintf("EXPLAIN QUERY PLAN %s", stmt);
    int ids[SQ_EQP_MAX], depth[SQ_EQP_MAX], n = 0, rc;
    char *text[SQ_EQP_MAX];
    sqlite3_stmt *st = NULL;

    if (!sql)
        return OG_ENOMEM;
    rc = sqlite3_prepare_v2(c->db, sql, -1, &st, NULL);
    sqlite3_free(sql);
    if (rc != SQLITE_OK)
        return og__sq_err(c);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && n < SQ_EQP_MAX) {
        int id = sqlite3_column_int(st, EQP_ID);
        int parent = sqlite3_column_int(st, EQP_PARENT);
        const char *detail = (const char *)sqlite3_column_text(st, EQP_DETAIL);

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
        rc = og__sq_err(c);
    sqlite3_finalize(st);
    if (rc == 0) {
        og__explain_statement(out, title, name, stmt, NULL, 0);
        og__explain_plan(out, NULL, (const char *const *)text, n);
    }
    for (int k = 0; k < n; k++)
        sqlite3_free(text[k]);
    return rc;
}

/* The variant of statement name in s's consumption keys, with its heading
 * name: NAME, or NAME_HASHED. */
#define SQ_KEYED_STEP(s, title, NAME, name)                                    \
    {title, (s)->keys == OG_KEYS_HASHED ? #NAME "_HASHED" : #NAME,             \
     SQ_KEYED(s, name)}

int og__sq_explain(void *impl, int batch, FILE *out)
{
    og__sq_store *s = impl;
    const struct {
        const char *title;
        const char *name; /* the heading's (docs/plans.md) */
        const char *sql;
    } steps[] = {
        {"Admission, token form: the family's state (a grant with a family)",
         "FAMILY_STATE", og__sq_family_state_sql},
        SQ_KEYED_STEP(s, "Admission, token form: the claim", CLAIM,
                      og__sq_claim),
        {"Admission, row form: the claim", "ROW_CLAIM", og__sq_row_claim_sql},
        {"Admission: the operation, in the same transaction", "INSERT_OP",
         og__sq_insert_op_sql},
        SQ_KEYED_STEP(s, "Admission: what holds a key the claim did not take",
                      READ_CONSUMPTION, og__sq_read_consumption),
        SQ_KEYED_STEP(s, "Cleanup, one batch", CLEANUP, og__sq_cleanup),
        {"Payout decision: the daily-limit reservation",
         sq_names[SQ_PAYOUT_RESERVE], sq_sql[SQ_PAYOUT_RESERVE]},
        {"Payout jobs: take the oldest available",
         sq_names[SQ_PAYOUT_JOB_TAKE], sq_sql[SQ_PAYOUT_JOB_TAKE]},
        {"Payout grants: one expiry batch (its pick)",
         sq_names[SQ_PAYOUT_EXPIRE_MARK], sq_sql[SQ_PAYOUT_EXPIRE_MARK]},
    };
    og__sq_conn *c;
    int rc = 0;

    (void)batch; /* a LIMIT value: no bearing on SQLite's plan */
    if ((rc = og__sq_acquire(s, &c)) < 0)
        return rc;
    fputs("SQLite runs the statements below for each admission in its own "
          "savepoint (claim and operation together, G1), queued admissions "
          "grouped in one `BEGIN IMMEDIATE` transaction with one commit "
          "(group commit).\n\n", out);
    for (size_t k = 0; rc == 0 && k < sizeof steps / sizeof steps[0]; k++)
        rc = sq_explain_stmt(c, steps[k].title, steps[k].name, steps[k].sql,
                             out);
    og__sq_release(s, c, false);
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

int og__sq_payout_resolve(void *impl, const char *id, unsigned expected,
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
