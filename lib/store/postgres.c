/*
 * postgres.c — the PostgreSQL backend (libpq 15).
 *
 * Invariants this file protects. Comments below cite them as (I1)...(I30).
 *
 *  I1  One statement admits. The claim and the insert into operations are
 *      ONE statement, run alone in its own implicit Read Committed
 *      transaction: pg_admit_sql (token form: the claim is an insert on
 *      grant_consumptions) or pg_admit_row_sql (row form: the claim is
 *      the conditional UPDATE of the grant's row in grants), or their hashed
 *      instances (I23). Both rows commit together or neither does; the
 *      unique key (issuer, grant_id) — in a hashed store key_hash —, resp.
 *      the row lock on the grant's row with its consumed_at/revoked_at
 *      conditions re-checked after any wait, lets at most one statement ever
 *      claim a grant.
 *  I2  A commit is confirmed only at ReadyForQuery. With the extended
 *      protocol the server sends the RETURNING rows and CommandComplete
 *      BEFORE the implicit transaction commits at Sync, so an ErrorResponse
 *      (a failed commit, a terminated backend) can still follow the rows.
 *      A statement succeeds only when PQgetResult() returned NULL, no error
 *      result came at all, PQstatus() is CONNECTION_OK and
 *      PQtransactionStatus() is the expected one (PQTRANS_IDLE for every
 *      statement outside a migration).
 *  I3  A timeout, a cancellation or a lost connection is
 *      OG_ESTORE_UNAVAILABLE — never a refusal and never "unused": the write
 *      may have committed. The client deadline is store_timeout_us per
 *      statement; at the deadline the statement is cancelled and the
 *      connection discarded, since its state is unknown.
 *  I4  A WARNING "canceling (the) wait for synchronous replication" means the
 *      commit happened locally but is not known to be on the standby: the
 *      statement reports OG_ESTORE_UNAVAILABLE, never a success.
 *  I5  Only a unique violation on operations_pkey or operations_grant_key
 *      refuses, and only in the admission (og__pg_classify() decides). Every
 *      other constraint failure, in every statement, is a defect and
 *      surfaces as OG_EINTERNAL, never as a refusal and never as UNAVAILABLE
 *      (which would invite a retry of a statement that can only fail again).
 *  I6  Every deadline (expires_at + leeway) is compared with the store's
 *      statement_timestamp() inside the statement that claims, and every
 *      microsecond value crosses the wire as an exact bigint.
 *  I7  This file logs nothing; statement parameters go to the server only.
 *  I8  A family orders its grants. Admission and the consume verdict of a
 *      grant that names a family claim only while they hold a FOR SHARE lock
 *      on the family's row with revoked_at IS NULL; issuance and ticket
 *      creation lock it with ON CONFLICT DO UPDATE ... WHERE revoked_at IS
 *      NULL; family revocation UPDATEs it. Under Read Committed the later
 *      locker waits for the earlier one to commit and then re-checks the
 *      row's newest version, so whichever commits first wins: no claim and
 *      no issuance commits after the family's revocation, and a revocation
 *      that waited for an admission finds that grant's key or row taken and
 *      does not list it.
 *  I8a The family's advisory lock queues fairly (PG_FAMILY_KEY): taken
 *      shared by admissions and consumes, exclusive by revocation, issuance
 *      and ticket creation, always before the family's row lock, so steady
 *      admissions cannot starve a revocation.
 *  I9  Revocation never outlives its proof. A token-form revocation holds
 *      the grant's key until the trusted expiry + leeway (the verified
 *      token's exp, or the issuance log's), or, when the log records no
 *      expiry, clock_timestamp() + max grant lifetime + issue-time skew +
 *      leeway — past any admission a validator would still accept. Without
 *      either proof nothing is written (NOT_ISSUED).
 *  I10 Each lifecycle method is ONE conditional write (issuance, revocation,
 *      family revocation, consume, ticket creation, ticket rotation); a read
 *      after a write that changed nothing only reports why and never turns
 *      into a write — except ticket reuse, which then revokes the family with
 *      the family revocation statement (a second, separate write).
 *  I11 A ticket is stored as its hash only, and a rotated ticket is kept:
 *      presenting it again is recognised as reuse.
 *  I12 An admission that claims nothing is reported from its own
 *      statement's snapshot when that snapshot shows the key's holder: a
 *      holder committed before the statement began never changes (keys are
 *      held until cleanup, a grant row's consumed/revoked marks are final),
 *      so a replay or a same-operation retry costs one round trip. When the
 *      snapshot shows no holder, a fresh statement reads again. Either read
 *      only reports; the claim decided (C1, C2 in lib/core/admission.c).
 *  I13 Each execution write (pg_op_start_sql, pg_op_record_sql,
 *      pg_op_takeover_sql, pg_op_resolve_sql) is ONE statement: a CTE locks
 *      the operation's row FOR NO KEY UPDATE where its status and
 *      owner_version are the expected ones — under Read Committed a locker
 *      that waited re-checks them on the row's newest version — then reads
 *      clock_timestamp() ONCE, after the lock (a lock wait never eats a
 *      lease; updated_at, the new lease and the event's `at` are one
 *      instant), then UPDATEs the row with the same conditions (a start's
 *      lease_until and submit_by tests use that instant) and INSERTs the
 *      event from the UPDATE's RETURNING. The event exists exactly when the
 *      row changed; a stale owner, an unexpected status, an unexpired lease
 *      (takeover) or an expired one (start) changes nothing and records
 *      nothing. Terminal statuses are never expected (store.c), so
 *      they are never overwritten.
 *  I14 The owner version fences. A start and a record require
 *      owner_version = v and leave it; a takeover (status Admitted, Started
 *      or Unknown, lease_until < now) and a resolution (status
 *      NeedsReconciliation) increment it, so a late write of the previous
 *      owner — its og_op_start included — finds another version and changes
 *      nothing. A takeover's lease is now + the store's recovery_lease;
 *      updated_at tracks status changes only, so a takeover leaves it.
 *  I15 op_may_submit is a read against clock_timestamp(): owner_version =
 *      v, now < least(lease_until, submit_by), and status Admitted or
 *      Unknown for a credit, Started for a payout (I25). A failure is an
 *      error, which the caller reads as "do not send".
 *  I16 op_list and op_history only read. op_list runs as an unnamed
 *      statement, planned with its parameters on every call: a generic plan
 *      of a named one could not prove the partial recovery index's
 *      predicate from a status parameter. Its lease_expired test uses
 *      statement_timestamp() (stable, so an index condition); the takeover
 *      decides with its own clock anyway.
 *  I17 updated_at NULL means "no status change since admission" and reads
 *      as created_at (migration 3 adds the column without a table rewrite).
 *      Admission writes no event: it stays ONE insert of the operation (I1);
 *      og_op_history() derives the "admitted" entry from the record.
 *  I18 The server-side bound on an admission (seed 000, "Retention and
 *      Cleanup"): every connection carries statement_timeout = lock_timeout
 *      = store_timeout, and on servers 17+ transaction_timeout too — set on
 *      the connection, or (session_bounds_from_role) by the deployment on
 *      the role, and then only checked. A lock wait before the claim is
 *      covered (lock_timeout, statement_timeout); the commit is NOT:
 *      PostgreSQL disables statement_timeout (and transaction_timeout)
 *      before it commits, and a synchronous-replication wait at commit has
 *      no timeout at all. og_store_session_bounds() reports the settings
 *      and whether commits wait for a synchronous standby, so the service
 *      can refuse a cleanup margin that does not cover them.
 *  I19 A refusal record outlives every admission that could still commit.
 *      Cleanup (pg_cleanup_sql) deletes a grant_consumptions row only
 *      where retain_until < statement_timestamp() - cleanup_margin, and the
 *      DELETE re-checks that on the row it removes. An admission that could
 *      still claim the key evaluated its deadline (retain_until is exactly
 *      that deadline, I6) at its own statement_timestamp(), so it started
 *      before retain_until; the server aborts it store_timeout later, or it
 *      commits within commit_bound of its last timeout-covered moment (I18,
 *      checked at startup), and T9 makes cleanup_margin longer than both
 *      plus the largest clock step. So no admission that could have missed
 *      the row is still running when the row goes. statement_timestamp() is
 *      the cleanup statement's start: any wait makes it delete less, never
 *      more.
 *  I20 Cleanup deletes grant_consumptions rows and nothing else, in batches
 *      of at most `batch` rows per statement, each its own implicit
 *      transaction: the row ids come from an index scan of
 *      grant_consumptions_retain_until_idx (oldest first, from the pass's
 *      keyset cursor, so no batch walks the dead entries of the ones before
 *      it) under FOR UPDATE SKIP LOCKED, so concurrent janitors split the
 *      work instead of queueing, and no batch holds locks for long.
 *  I21 Archiving (pg_archive_sql) takes terminal operations only —
 *      Succeeded, Failed, NotStarted and NotApplied (PG_V7_TERMINAL), which
 *      no writer ever expects (store.c), so they never change again — and
 *      moves or deletes each together with its events in ONE statement: an
 *      operation and its history leave together or not at all (the events'
 *      foreign key is checked at the end of that statement). Admitted,
 *      Started, Unknown and NeedsReconciliation stay: recovery, the
 *      sweeper and operators need them. It never touches
 *      grant_consumptions.
 *  I22 An archived operation still answers for its id. The admission claims
 *      nothing while operations_archive holds the request's operation id,
 *      and every report of a claim that did not happen reads the operation
 *      from operations, else from operations_archive: a same-operation retry
 *      gets ALREADY_ADMITTED with the archived record, another operation
 *      GRANT_SPENT from the consumption row, another grant under that id
 *      OPERATION_ID_TAKEN; never an admission. That check reads the
 *      statement's snapshot: an archive that commits while an admission
 *      reusing the same finished operation's id for another grant is
 *      running is not seen by it (the operations key no longer conflicts
 *      either). Operation ids are fresh per operation, so that needs a
 *      client's reuse of an id it finished long ago, at that very instant;
 *      the grant itself stays single-use either way (its key is the claim).
 *  I23 Consumption keys (schema 5). A readable store keys grant_consumptions
 *      by (issuer, grant_id); a hashed store by key_hash =
 *      og_consumption_key(issuer, grant_id) alone — its primary key, the ON
 *      CONFLICT target of every claim and the column every lookup matches —
 *      and keeps no issuer or grant id in the table: the operation record
 *      keeps them. Every statement that names the table's key is ONE
 *      template of the mode ("Consumption keys" below), so I1-I12 read the
 *      same for both with "the key" for (issuer, grant_id), and so does
 *      I22: both instances of each admission carry PG_OP_ID_NOT_ARCHIVED
 *      and read the operation live or archived. Cleanup (I19, I20) names no
 *      key: it picks rows by ctid over grant_consumptions_retain_until_idx,
 *      which migration 5 gives the hashed table too, so one statement
 *      serves both. The admission stays one statement and one round trip. The key is computed by the store, in
 *      the statement, by the SQL function migration 5 creates, whether it
 *      comes from the statement's parameters or from grant_issuance rows
 *      (family revocation): within one store there is one implementation.
 *      The mode is read from og_store_settings when the store object opens
 *      (og__pg_read_keys) and decides which statements its connections prepare.
 *  I24 A redemption recovery point is written by ONE statement, INSERT ...
 *      ON CONFLICT (caller, idempotency_key) DO NOTHING, in its own implicit
 *      transaction: the primary key lets exactly one writer of a key win
 *      (a concurrent insert waits for the holder and then does nothing),
 *      nothing overwrites a point, and "inserted" is reported only after
 *      ReadyForQuery (I2). The read is ONE statement answering both "the
 *      key's own point" and "the same code under another key" from one
 *      snapshot. The store holds only sealed bytes and the token's SHA-256;
 *      binary values cross the wire as hex text.
 *  I25 Operation kinds (schema 7). Every operation is a credit (what
 *      admission inserts: kind's DEFAULT, so the admission statements write
 *      no new column) or a payout attempt; idempotency_key and
 *      client_reference are NULL for "the operation id", so old rows need
 *      no backfill and migration 7 rewrites nothing. A payout is sent only
 *      once Started (P1): pg_op_start_sql is the one write to Started —
 *      status Admitted, the owner's version, lease_until and submit_by
 *      still ahead of its clock —, pg_op_may_submit_sql answers yes for a
 *      payout only in Started, and NotStarted is recorded only for a payout
 *      whose owner version a takeover raised (P2: its claimer's start can
 *      no longer succeed, so Admitted then means "nothing was sent"). The
 *      schema holds both rules too (operations_payout_status_check,
 *      operations_not_started_check): a statement that broke one would fail
 *      as a defect (I5), never commit. The credit path's statements are
 *      those of schema 6 apart from the columns every read returns.
 *  I26 The payout decision (og_payout_decide, og__pg_payout_decide) is ONE
 *      explicit transaction under Read Committed with one client deadline:
 *      the facts' statement locks the payout's row FOR UPDATE and its
 *      tenant's, beneficiary's and destination's rows FOR SHARE, so a
 *      change to any of them either committed before (and is read: a
 *      locker that waited reads the newest version) or waits until the
 *      decision commits; the pure core decides (og__payout_plan_decide,
 *      lib/core/payout_plan.c); then the reservation (I27), the decision
 *      row with its history entry, and for Allowed one statement writing
 *      the approval (I28), the grant's `grants` row (issuer 'payouts', row
 *      form), its bindings, the job and their history; anything else
 *      writes the decision alone. COMMIT is confirmed at ReadyForQuery
 *      (I2); any failure, the fault points OG__FAULT_DECIDE_* included,
 *      rolls everything back. The context read alone is one REPEATABLE
 *      READ, READ ONLY transaction: one snapshot. A trigger refuses every
 *      UPDATE, DELETE and TRUNCATE of payout_decisions and payout_events.
 *  I27 The reservation is ONE conditional write of the tenant's day row:
 *      INSERT ... ON CONFLICT DO UPDATE ... WHERE paid + reserved + amount
 *      <= daily_limit. The day's counters are read without a lock (locking
 *      them FOR SHARE would deadlock two reservations); ON CONFLICT DO
 *      UPDATE locks the row and evaluates its WHERE on the newest committed
 *      version after waiting for a concurrent reservation, so two decisions
 *      never both pass on the same headroom. When it takes nothing, the
 *      decision written is Denied tenant.daily-limit, alone.
 *  I28 The attempt number is attempt_count + 1, allocated by the approval's
 *      UPDATE, conditional on the version read, the state the mode expects
 *      and no active attempt, on a row the decision holds FOR UPDATE: two
 *      re-authorizations are ordered by that lock and the second reads the
 *      first's result. payout_grants_attempt_key (payout_id,
 *      attempt_number) is the schema's own guard.
 *  I29 A binding's reservation is released exactly once: released_at IS
 *      NULL is re-checked on the newest version by every release. A
 *      revocation (pg_payout_grant_revoke_sql) is ONE statement: the
 *      grant's row live (unconsumed, unrevoked; a claim in flight is
 *      waited for and re-checked), then the binding's release and the
 *      day's counter from its RETURNING. An expiry batch (pg_payout_
 *      expire_sql) is ONE statement over unconsumed grants with expires_at
 *      < statement_timestamp() - admission leeway - cleanup margin, their
 *      binding and grant rows locked SKIP LOCKED (janitors split the work;
 *      a claim or revocation in flight keeps its rows), the day rows
 *      locked in key order before they change (no deadlock between
 *      janitors). A consumed grant's reservation is never released here:
 *      it follows its attempt.
 *  I30 The outbox is the queue. A take is ONE statement: the oldest job
 *      with done_at IS NULL AND available_at <= now over
 *      payout_jobs_available_idx, FOR UPDATE SKIP LOCKED (takers split the
 *      queue), then deliveries + 1 and available_at = now + lease, so a job
 *      whose taker went quiet is delivered again when the lease ends.
 *      Acknowledgment and postponement are conditional on (deliveries =
 *      the delivery held, not acknowledged). A job holds references only;
 *      a resubmission copies them under a new id.
 *  I31 The claim (og_payout_claim, og__pg_payout_claim) is ONE explicit Read
 *      Committed transaction, not one statement: the fence must hold the
 *      context rows until the commit (seed section 10: FOR SHARE, or a
 *      concurrent suspension could commit between a check and the claim's
 *      commit), and the attempt's amount is the payout's minor units in its
 *      currency's scale, which the pure core formats. Its facts' statement
 *      (pg_payout_claim_facts_sql) locks the grant's and the payout's rows
 *      FOR UPDATE and the tenant's, beneficiary's and destination's FOR
 *      SHARE — a change in flight is waited for and its newest version
 *      read; a claim that waited for another claim reads the consuming
 *      operation in a fresh statement (pg_payout_claim_consumer_sql: the
 *      facts' snapshot predates that commit) — then the pure verdict
 *      (og__payout_plan_claim, PP4) and, for CLAIMED only, ONE statement
 *      (pg_payout_claim_sql) built like the row-form admission: the
 *      conditional UPDATE of the grant's row (unconsumed, unrevoked,
 *      not_before <= now < expires_at + leeway), the payout Approved at the
 *      executable version with no active attempt -> Executing, the
 *      attempt's insert (kind payout, Admitted, owner version 1, key and
 *      reference) and the "claimed" entry, from each other's RETURNING;
 *      anything it does not write is a defect and rolls back. Every other
 *      outcome rolls back: zero rows anywhere. COMMIT is confirmed at
 *      ReadyForQuery (I2); an unconfirmed one is OG_ESTORE_UNAVAILABLE:
 *      unknown, do not send. operations_grant_key is the schema's guard of
 *      one attempt per grant. The grant's row is locked before the payout's
 *      and no writer locks a payout and then an issued grant's row, so
 *      claims, revocations and decisions cannot deadlock.
 *  I32 The resolution (og_payout_resolve, og__pg_payout_resolve) is ONE explicit
 *      Read Committed transaction: og_op_record's own prepared statement
 *      (pg_op_record_sql, its parameters from pg_op_record_params: status
 *      in the expected set AND owner version = v, the row locked FOR NO
 *      KEY UPDATE, its "outcome" event); when it takes nothing,
 *      NOT_RECORDED and ROLLBACK. Then the attempt's binding and payout
 *      FOR UPDATE (pg_payout_resolve_facts_sql, each by its key), the pure
 *      plan (og__payout_plan_resolve, PP5), and for RESOLVED ONE statement
 *      (pg_payout_resolve_sql): the payout conditional on the version read
 *      and this attempt active, the binding released once (released_at IS
 *      NULL) for a terminal outcome, its day's counters (reserved -> paid,
 *      or unreserved), and one "resolved" entry; a count other than the
 *      plan's is a defect and rolls back. NOT_ACTIVE rolls the outcome
 *      back too. Lock order: the operation, then the payout and binding,
 *      then the day — the claim never locks an operation, and decisions
 *      and expiries take a payout or binding before a day.
 *
 * Connections come from og__pool. Each PGconn is used by one thread at a
 * time (the pool guarantees it) and carries a og__pg_conn wrapper that holds the
 * notice-receiver state (I4) and which statements are prepared on it.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>
#include <sodium.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "postgres/internal.h"

/* Take (I30): $1 lease (µs). pick: the oldest available job over
 * payout_jobs_available_idx, skipping any another taker holds (FOR UPDATE
 * SKIP LOCKED: takers split the queue instead of queueing on one row); the
 * UPDATE starts its delivery. Zero rows: none available. */
#define PG_PAYOUT_JOB_NCOLS 7
static const char pg_payout_job_take_sql[] =
    "WITH pick AS (\n"
    "  SELECT job_id FROM payout_jobs\n"
    "  WHERE done_at IS NULL AND available_at <= statement_timestamp()\n"
    "  ORDER BY available_at, job_id\n"
    "  LIMIT 1\n"
    "  FOR UPDATE SKIP LOCKED)\n"
    "UPDATE payout_jobs j SET deliveries = j.deliveries + 1, delivered_at = statement_timestamp(),\n"
    "       available_at = statement_timestamp() + " PG_US("$1") "\n"
    "FROM pick WHERE j.job_id = pick.job_id\n"
    "RETURNING j.job_id::text, j.payout_id, j.grant_id, j.correlation_id, j.resubmitted_from::text,\n"
    "          j.deliveries, " PG_EPOCH_US("j.available_at");

/* Ack and postpone, conditional on the delivery held: $1 job  $2 delivery
 * ($3 delay, µs). One row only when it changed the job. */
static const char pg_payout_job_ack_sql[] =
    "UPDATE payout_jobs SET done_at = clock_timestamp()\n"
    "WHERE job_id = $1::uuid AND deliveries = $2::bigint AND done_at IS NULL\n"
    "RETURNING 1";
static const char pg_payout_job_postpone_sql[] =
    "UPDATE payout_jobs SET available_at = clock_timestamp() + " PG_US("$3") "\n"
    "WHERE job_id = $1::uuid AND deliveries = $2::bigint AND done_at IS NULL\n"
    "RETURNING 1";

/* Resubmission: $1 the job copied  $2 the new id  $3 actor. One row: how
 * many it wrote (0: no such job). */
static const char pg_payout_job_resubmit_sql[] =
    "WITH ins AS (\n"
    "  INSERT INTO payout_jobs (job_id, payout_id, grant_id, correlation_id, resubmitted_from,\n"
    "                           created_at, available_at, deliveries)\n"
    "  SELECT $2::uuid, j.payout_id, j.grant_id, j.correlation_id, j.job_id, t.now, t.now, 0\n"
    "  FROM payout_jobs j, (SELECT clock_timestamp() AS now) t WHERE j.job_id = $1::uuid\n"
    "  RETURNING job_id, payout_id, grant_id, correlation_id, created_at),\n"
    "ev AS (\n"
    "  INSERT INTO payout_events (payout_id, at, kind, actor, correlation_id, grant_id, job_id)\n"
    "  SELECT payout_id, created_at, 'job-resubmitted', $3::text, correlation_id, grant_id, job_id\n"
    "  FROM ins\n"
    "  RETURNING 1)\n"
    "SELECT count(*) FROM ins";

/* A payout grant and its row, with the clock its state is derived at:
 * $1 grant. */
#define PG_PAYOUT_GRANT_NCOLS 20
static const char pg_payout_grant_get_sql[] =
    "SELECT b.grant_id, b.decision_id::text, b.payout_id, b.tenant_id, b.operation, b.audience,\n"
    "       b.terms_fingerprint, b.policy_version, b.executable_payout_version, b.attempt_number,\n"
    "       b.amount, to_char(b.release_day, 'YYYY-MM-DD'), " PG_EPOCH_US("b.not_before") ",\n"
    "       " PG_EPOCH_US("g.expires_at") ", " PG_EPOCH_US("b.created_at") ",\n"
    "       " PG_EPOCH_US("g.consumed_at") ", g.consumed_by_operation::text,\n"
    "       " PG_EPOCH_US("g.revoked_at") ", " PG_EPOCH_US("b.released_at") ",\n"
    "       " PG_EPOCH_US("clock_timestamp()") "\n"
    "FROM payout_grants b JOIN grants g ON g.issuer = b.issuer AND g.grant_id = b.grant_id\n"
    "WHERE b.grant_id = $1::text";

/* A finance hold (I29): $1 grant  $2 actor.
 *  - rv: the grant's row, live (unconsumed, unrevoked): ONE conditional
 *    write; a claim or a revocation in flight is waited for and the row
 *    re-checked;
 *  - rel: its binding's reservation released, once: released_at IS NULL
 *    is re-checked on the newest version, so an expiry that committed
 *    first leaves nothing to release;
 *  - days: the day's counter, from rel only; ev: the history.
 * One row: revoked, is it a payout grant, days changed, bindings released. */
static const char pg_payout_grant_revoke_sql[] =
    "WITH rv AS (\n"
    "  UPDATE grants g SET revoked_at = clock_timestamp()\n"
    "  FROM payout_grants b\n"
    "  WHERE g.issuer = '" OG_PAYOUT_ISSUER "' AND g.grant_id = $1::text AND b.grant_id = g.grant_id\n"
    "    AND g.consumed_at IS NULL AND g.revoked_at IS NULL\n"
    "  RETURNING g.grant_id, g.revoked_at, b.payout_id),\n"
    "rel AS (\n"
    "  UPDATE payout_grants b SET released_at = rv.revoked_at, release_cause = 'revoked'\n"
    "  FROM rv WHERE b.grant_id = rv.grant_id AND b.released_at IS NULL\n"
    "  RETURNING b.grant_id, b.payout_id, b.tenant_id, b.release_day, b.amount, b.released_at),\n"
    "days AS (\n"
    "  UPDATE tenant_days d SET reserved = d.reserved - rel.amount, version = d.version + 1\n"
    "  FROM rel WHERE d.tenant_id = rel.tenant_id AND d.day = rel.release_day\n"
    "  RETURNING 1),\n"
    "ev AS (\n"
    "  INSERT INTO payout_events (payout_id, at, kind, actor, grant_id, amount, release_day, reason)\n"
    "  SELECT payout_id, revoked_at, 'grant-revoked', $2::text, grant_id, NULL::bigint, NULL::date,\n"
    "         NULL::text FROM rv\n"
    "  UNION ALL\n"
    "  SELECT payout_id, released_at, 'reservation-released', $2::text, grant_id, amount,\n"
    "         release_day, 'revoked' FROM rel\n"
    "  RETURNING 1)\n"
    "SELECT EXISTS (SELECT 1 FROM rv), EXISTS (SELECT 1 FROM payout_grants WHERE grant_id = $1::text),\n"
    "       (SELECT count(*) FROM days), (SELECT count(*) FROM rel)";

/* One expiry batch (I29): $1 leeway + cleanup margin (µs)  $2 batch
 * $3 cursor (µs).
 *  - pick: at most $2 unreleased bindings of unconsumed grants past
 *    expires_at + leeway + margin, oldest first from the cursor, in the
 *    order of payout_grants_unreleased_idx; the binding's and the grant's
 *    rows locked, SKIP LOCKED (janitors split the work; a claim or a
 *    revocation in flight keeps its rows);
 *  - rel: released_at set, re-checked (once), each picked row by its key
 *    (= ANY (ARRAY(...)): an index lookup per id, as pg_archive_sql);
 *  - sums, lk, days: per (tenant, day) the amount released, the day rows
 *    locked in key order (two janitors cannot deadlock) and decreased;
 *  - ev: a history entry per grant.
 * One row: released, bindings picked, day rows changed, the new cursor. */
static const char pg_payout_expire_sql[] =
    "WITH pick AS MATERIALIZED (\n"
    "  SELECT b.grant_id, b.expires_at FROM payout_grants b\n"
    "  JOIN grants g ON g.issuer = b.issuer AND g.grant_id = b.grant_id\n"
    "  WHERE b.released_at IS NULL AND g.consumed_at IS NULL\n"
    "    AND b.expires_at >= " PG_TS("$3") "\n"
    "    AND b.expires_at < statement_timestamp() - " PG_US("$1") "\n"
    "  ORDER BY b.expires_at\n"
    "  LIMIT $2::integer\n"
    "  FOR UPDATE OF b, g SKIP LOCKED),\n"
    "rel AS (\n"
    "  UPDATE payout_grants b SET released_at = statement_timestamp(), release_cause = 'expired'\n"
    "  WHERE b.grant_id = ANY (ARRAY(SELECT grant_id FROM pick)) AND b.released_at IS NULL\n"
    "  RETURNING b.grant_id, b.payout_id, b.tenant_id, b.release_day, b.amount, b.released_at),\n"
    "sums AS (\n"
    "  SELECT tenant_id, release_day, sum(amount) AS amount FROM rel GROUP BY tenant_id, release_day),\n"
    "lk AS MATERIALIZED (\n"
    "  SELECT d.tenant_id, d.day FROM tenant_days d\n"
    "  JOIN sums s ON d.tenant_id = s.tenant_id AND d.day = s.release_day\n"
    "  ORDER BY d.tenant_id, d.day\n"
    "  FOR UPDATE OF d),\n"
    "days AS (\n"
    "  UPDATE tenant_days d SET reserved = d.reserved - s.amount, version = d.version + 1\n"
    "  FROM sums s, lk\n"
    "  WHERE d.tenant_id = s.tenant_id AND d.day = s.release_day\n"
    "    AND lk.tenant_id = d.tenant_id AND lk.day = d.day\n"
    "  RETURNING 1),\n"
    "ev AS (\n"
    "  INSERT INTO payout_events (payout_id, at, kind, actor, grant_id, amount, release_day, reason)\n"
    "  SELECT payout_id, released_at, 'reservation-released', 'janitor', grant_id, amount,\n"
    "         release_day, 'expired' FROM rel\n"
    "  RETURNING 1)\n"
    "SELECT (SELECT count(*) FROM rel), (SELECT count(*) FROM pick), (SELECT count(*) FROM days),\n"
    "       coalesce((SELECT " PG_EPOCH_US("max(expires_at)") " FROM pick), $3::bigint)";

/* The claim's facts (I31), in pg_claim_facts_parse's order: $1 grant.
 * The grant's row and the payout's are locked FOR UPDATE (the claim writes
 * both), the tenant's, beneficiary's and destination's FOR SHARE: a
 * change to any fenced fact either committed before — and a locker that
 * waited reads its newest version — or waits until the claim commits
 * (seed section 10). The consuming operation (a redelivery's evidence) is
 * read, not locked. Then the store's clock, after the locks: the instant
 * the claim decides and writes at. */
#define PG_CLAIM_FACTS_NCOLS 24
static const char pg_payout_claim_facts_sql[] =
    "SELECT b.payout_id, b.audience, b.executable_payout_version, b.attempt_number,\n"
    "       " PG_EPOCH_US("b.not_before") ", " PG_EPOCH_US("g.expires_at") ",\n"
    "       g.consumed_at IS NOT NULL, g.consumed_by_operation::text, g.revoked_at IS NOT NULL,\n"
    "       (o.operation_id IS NOT NULL OR a.operation_id IS NOT NULL),\n"
    "       coalesce(o.kind, a.kind) = 'payout',\n"
    "       coalesce(o.client_reference, a.client_reference, o.operation_id::text,\n"
    "                a.operation_id::text),\n"
    "       p.state, p.version, p.active_attempt IS NOT NULL, p.amount, p.currency,\n"
    "       p.destination_id, t.payouts_suspended, t.settings_version, bn.status, bn.version,\n"
    "       d.version, " PG_EPOCH_US("clock_timestamp()") "\n"
    "FROM payout_grants b\n"
    "JOIN grants g ON g.issuer = b.issuer AND g.grant_id = b.grant_id\n"
    "JOIN payouts p ON p.payout_id = b.payout_id\n"
    "JOIN tenants t ON t.tenant_id = p.tenant_id\n"
    "JOIN beneficiaries bn ON bn.beneficiary_id = p.beneficiary_id\n"
    "JOIN destinations d ON d.destination_id = p.destination_id\n"
    "LEFT JOIN operations o ON o.operation_id = g.consumed_by_operation\n"
    "LEFT JOIN operations_archive a ON a.operation_id = g.consumed_by_operation\n"
    "WHERE b.grant_id = $1::text\n"
    "FOR UPDATE OF g, p FOR SHARE OF t, bn, d";

/* The operation that consumed a grant, read in a statement of its own: $1
 * operation. The facts' statement reads it from its snapshot, taken BEFORE
 * a lock wait on the grant's row; a claim that waited for the winner sees
 * the winner's consumed_at (the newest row version) but not its operation
 * — a fresh statement does (Read Committed: a new snapshot). */
static const char pg_payout_claim_consumer_sql[] =
    "SELECT kind = 'payout', coalesce(client_reference, operation_id::text)\n"
    "FROM operations WHERE operation_id = $1::uuid\n"
    "UNION ALL\n"
    "SELECT kind = 'payout', coalesce(client_reference, operation_id::text)\n"
    "FROM operations_archive WHERE operation_id = $1::uuid\n"
    "LIMIT 1";

/* The claim's writes (I31), ONE statement at the facts' instant, each CTE
 * re-asserting its conditions as the row-form admission does (the rows are
 * ours since the facts' read, so they hold; repeating them keeps the
 * guarantee readable in one place): $1 grant  $2 operation  $3 now (µs)
 * $4 leeway (µs)  $5 executable version  $6 worker  $7 amount (decimal)
 * $8 lease (µs)  $9 send window (µs)  $10 key  $11 reference.
 *  - gr: the grant's row consumed (unconsumed, unrevoked, not_before <=
 *    now < expires_at + leeway);
 *  - pay: the payout Approved at the executable version with no active
 *    attempt -> Executing, version + 1, active_attempt;
 *  - op: the attempt, kind payout, Admitted at the initial owner version;
 *  - ev: the "claimed" history entry.
 * One row (none when a step took nothing): the operation, the payout's new
 * version, the entries written. */
static const char pg_payout_claim_sql[] =
    "WITH gr AS (\n"
    "  UPDATE grants g SET consumed_at = " PG_TS("$3") ", consumed_by_operation = $2::uuid\n"
    "  FROM payout_grants b\n"
    "  WHERE g.issuer = '" OG_PAYOUT_ISSUER "' AND g.grant_id = $1::text\n"
    "    AND b.grant_id = g.grant_id AND g.consumed_at IS NULL AND g.revoked_at IS NULL\n"
    "    AND b.not_before <= " PG_TS("$3") "\n"
    "    AND g.expires_at + " PG_US("$4") " > " PG_TS("$3") "\n"
    "  RETURNING g.grant_id, b.payout_id),\n"
    "pay AS (\n"
    "  UPDATE payouts p SET state = 'Executing', version = p.version + 1,\n"
    "         active_attempt = $2::uuid, updated_at = " PG_TS("$3") "\n"
    "  FROM gr\n"
    "  WHERE p.payout_id = gr.payout_id AND p.version = $5::bigint AND p.state = 'Approved'\n"
    "    AND p.active_attempt IS NULL\n"
    "  RETURNING p.payout_id, p.version, p.destination_id, p.currency),\n"
    "op AS (\n"
    "  INSERT INTO operations (operation_id, issuer, grant_id, caller_id, account_id, amount,\n"
    "      currency, status, owner_version, lease_until, submit_by, created_at, kind,\n"
    "      idempotency_key, client_reference)\n"
    "  SELECT $2::uuid, '" OG_PAYOUT_ISSUER "', gr.grant_id, $6::text, pay.destination_id,\n"
    "         $7::numeric, pay.currency, 'Admitted', " PG_STR(OG__INITIAL_OWNER_VERSION) ",\n"
    "         " PG_TS("$3") " + " PG_US("$8") ", " PG_TS("$3") " + " PG_US("$9") ",\n"
    "         " PG_TS("$3") ", 'payout', $10::text, $11::text\n"
    "  FROM gr, pay\n"
    "  RETURNING *),\n"
    "ev AS (\n"
    "  INSERT INTO payout_events (payout_id, at, kind, actor, grant_id, from_state, to_state,\n"
    "                             payout_version, reason)\n"
    "  SELECT pay.payout_id, " PG_TS("$3") ", 'claimed', $6::text, gr.grant_id, 'Approved',\n"
    "         'Executing', pay.version, $11::text\n"
    "  FROM gr, pay, op\n"
    "  RETURNING 1)\n"
    "SELECT " PG_OP_COLUMNS("op.") ", (SELECT version FROM pay), (SELECT count(*) FROM ev)\n"
    "FROM op";

/* The resolution's facts (I32), in pg_resolve_facts_parse's order: $1 the
 * attempt. Its binding through the operation's grant, and its payout, each
 * by its key, both locked FOR UPDATE (the resolution writes both). */
static const char pg_payout_resolve_facts_sql[] =
    "SELECT b.payout_id, b.grant_id, to_char(b.release_day, 'YYYY-MM-DD'), b.amount,\n"
    "       b.released_at IS NOT NULL, p.state, p.version,\n"
    "       coalesce(p.active_attempt = o.operation_id, false)\n"
    "FROM operations o\n"
    "JOIN payout_grants b ON b.grant_id = o.grant_id\n"
    "JOIN payouts p ON p.payout_id = b.payout_id\n"
    "WHERE o.operation_id = $1::uuid AND o.kind = 'payout' AND o.issuer = '" OG_PAYOUT_ISSUER "'\n"
    "FOR UPDATE OF b, p";

/* The resolution's writes (I32), ONE statement after the outcome's: $1
 * payout  $2 version read  $3 the attempt  $4 new state  $5 clear the active
 * attempt  $6 grant  $7 release cause (NULL: held)  $8 actor  $9 from state
 * $10 the attempt's status.
 *  - pay: the payout, conditional on the version read and the attempt;
 *  - rel: the binding released once ($7 set, released_at IS NULL);
 *  - days: its day, reserved -> paid ('paid') or unreserved;
 *  - ev: one "resolved" entry.
 * One row: the new version, bindings released, days changed, entries. */
static const char pg_payout_resolve_sql[] =
    "WITH t AS MATERIALIZED (SELECT clock_timestamp() AS now),\n"
    "pay AS (\n"
    "  UPDATE payouts p SET state = $4::text, version = p.version + 1,\n"
    "         active_attempt = CASE WHEN $5::boolean THEN NULL ELSE p.active_attempt END,\n"
    "         updated_at = t.now\n"
    "  FROM t\n"
    "  WHERE p.payout_id = $1::text AND p.version = $2::bigint AND p.active_attempt = $3::uuid\n"
    "    AND p.state IN ('Executing','Unknown')\n"
    "  RETURNING p.payout_id, p.version, t.now),\n"
    "rel AS (\n"
    "  UPDATE payout_grants b SET released_at = pay.now, release_cause = $7::text\n"
    "  FROM pay\n"
    "  WHERE $7::text IS NOT NULL AND b.grant_id = $6::text AND b.payout_id = pay.payout_id\n"
    "    AND b.released_at IS NULL\n"
    "  RETURNING b.tenant_id, b.release_day, b.amount),\n"
    "days AS (\n"
    "  UPDATE tenant_days d SET reserved = d.reserved - rel.amount,\n"
    "         paid = d.paid + CASE WHEN $7::text = 'paid' THEN rel.amount ELSE 0 END,\n"
    "         version = d.version + 1\n"
    "  FROM rel WHERE d.tenant_id = rel.tenant_id AND d.day = rel.release_day\n"
    "  RETURNING 1),\n"
    "ev AS (\n"
    "  INSERT INTO payout_events (payout_id, at, kind, actor, grant_id, from_state, to_state,\n"
    "                             payout_version, amount, release_day, reason)\n"
    "  SELECT pay.payout_id, pay.now, 'resolved', $8::text, $6::text, $9::text, $4::text,\n"
    "         pay.version, (SELECT amount FROM rel), (SELECT release_day FROM rel), $10::text\n"
    "  FROM pay\n"
    "  RETURNING 1)\n"
    "SELECT (SELECT version FROM pay), (SELECT count(*) FROM rel), (SELECT count(*) FROM days),\n"
    "       (SELECT count(*) FROM ev)";
/* Intermediate: the descriptors, until each moves beside its function. */
const og__pg_stmt og__pg_payout_job_take_stmt = {"og_payout_job_take", pg_payout_job_take_sql, 1, OG_KEYS_AS_STORED};
static const og__pg_stmt pg_payout_job_ack_stmt = {"og_payout_job_ack", pg_payout_job_ack_sql, 2, OG_KEYS_AS_STORED};
static const og__pg_stmt pg_payout_job_postpone_stmt = {"og_payout_job_postpone", pg_payout_job_postpone_sql, 3, OG_KEYS_AS_STORED};
static const og__pg_stmt pg_payout_job_resubmit_stmt = {"og_payout_job_resubmit", pg_payout_job_resubmit_sql, 3, OG_KEYS_AS_STORED};
static const og__pg_stmt pg_payout_grant_get_stmt = {"og_payout_grant_get", pg_payout_grant_get_sql, 1, OG_KEYS_AS_STORED};
static const og__pg_stmt pg_payout_grant_revoke_stmt = {"og_payout_grant_revoke", pg_payout_grant_revoke_sql, 2, OG_KEYS_AS_STORED};
const og__pg_stmt og__pg_payout_expire_stmt = {"og_payout_expire", pg_payout_expire_sql, 3, OG_KEYS_AS_STORED};
static const og__pg_stmt pg_payout_claim_facts_stmt = {"og_payout_claim_facts", pg_payout_claim_facts_sql, 1, OG_KEYS_AS_STORED};
static const og__pg_stmt pg_payout_claim_consumer_stmt = {"og_payout_claim_consumer", pg_payout_claim_consumer_sql, 1, OG_KEYS_AS_STORED};
static const og__pg_stmt pg_payout_claim_stmt = {"og_payout_claim", pg_payout_claim_sql, 11, OG_KEYS_AS_STORED};
static const og__pg_stmt pg_payout_resolve_facts_stmt = {"og_payout_resolve_facts", pg_payout_resolve_facts_sql, 1, OG_KEYS_AS_STORED};
static const og__pg_stmt pg_payout_resolve_stmt = {"og_payout_resolve", pg_payout_resolve_sql, 10, OG_KEYS_AS_STORED};

/* ---- the claim (I31) ------------------------------------------------------ */

/* Row 0 of pg_payout_claim_facts_sql into *f. */
static int pg_claim_facts_parse(const PGresult *r, og__payout_claim_facts *f)
{
    int state, status;

    if (og__pg_shape(r, PG_CLAIM_FACTS_NCOLS, 1) != 0 ||
        og__pg_get_text(r, 0, 0, f->payout_id, sizeof f->payout_id) ||
        og__pg_get_text(r, 0, 1, f->audience, sizeof f->audience) ||
        og__pg_get_i64(r, 0, 2, &f->executable_version) ||
        og__pg_get_i64(r, 0, 3, &f->attempt_number) ||
        og__pg_get_i64(r, 0, 4, &f->not_before_us) ||
        og__pg_get_i64(r, 0, 5, &f->expires_at_us) || PQgetisnull(r, 0, 6) ||
        og__pg_get_opt_text(r, 0, 7, f->consumed_by, sizeof f->consumed_by) ||
        PQgetisnull(r, 0, 8) || PQgetisnull(r, 0, 9) ||
        og__pg_get_opt_text(r, 0, 11, f->consumer_reference,
                        sizeof f->consumer_reference) ||
        og__pg_get_i64(r, 0, 13, &f->payout_version) || PQgetisnull(r, 0, 14) ||
        og__pg_get_i64(r, 0, 15, &f->amount_minor) ||
        og__pg_get_text(r, 0, 16, f->currency, sizeof f->currency) ||
        og__pg_get_text(r, 0, 17, f->destination_id, sizeof f->destination_id) ||
        PQgetisnull(r, 0, 18) || og__pg_get_i64(r, 0, 19, &f->settings_version) ||
        og__pg_get_i64(r, 0, 21, &f->beneficiary_version) ||
        og__pg_get_i64(r, 0, 22, &f->destination_version) ||
        og__pg_get_i64(r, 0, 23, &f->now_us))
        return OG_EINTERNAL;
    state = og__payout_state_parse(PQgetvalue(r, 0, 12));
    status = og__payout_bstatus_parse(PQgetvalue(r, 0, 20));
    if (state < 0 || status < 0)
        return OG_EINTERNAL;
    f->found = true;
    f->consumed = og__pg_get_bool(r, 0, 6);
    f->revoked = og__pg_get_bool(r, 0, 8);
    f->consumer_found = og__pg_get_bool(r, 0, 9);
    f->consumer_payout = !PQgetisnull(r, 0, 10) && og__pg_get_bool(r, 0, 10);
    f->state = (og_payout_state)state;
    f->active_attempt = og__pg_get_bool(r, 0, 14);
    f->payouts_suspended = og__pg_get_bool(r, 0, 18);
    f->beneficiary_status = (og_payout_beneficiary_status)status;
    return 0;
}

static int pg_payout_claim_in(og__pg_store *pg, og__pg_conn *c,
                              const og__payout_claim_req *r,
                              og_payout_claim_result *out, bool *claimed,
                              int64_t deadline_us)
{
    const char *fparams[1] = {r->grant_id};
    og__payout_claim_facts f;
    og__payout_claim_plan p;
    PGresult *res = NULL;
    int64_t v = 0, events = 0;
    int rc;

    /* 1. The facts, their rows locked until the commit (I31). */
    memset(&f, 0, sizeof f);
    rc = og__pg_run_in(pg, c, &pg_payout_claim_facts_stmt, fparams, &res,
                   deadline_us);
    if (rc == 0 && PQntuples(res) == 1)
        rc = pg_claim_facts_parse(res, &f);
    else if (rc == 0 && PQntuples(res) != 0)
        rc = OG_EINTERNAL;
    PQclear(res);
    res = NULL;
    if (rc != 0)
        return rc;
    if (f.found && f.consumed && f.consumed_by[0] != '\0' &&
        !f.consumer_found) {
        const char *oparams[1] = {f.consumed_by};

        rc = og__pg_run_in(pg, c, &pg_payout_claim_consumer_stmt, oparams, &res,
                       deadline_us);
        if (rc == 0 && og__pg_shape(res, 2, 1) != 0)
            rc = OG_EINTERNAL;
        if (rc == 0 && PQntuples(res) == 1) {
            f.consumer_found = true;
            f.consumer_payout = og__pg_get_bool(res, 0, 0);
            if (og__pg_get_text(res, 0, 1, f.consumer_reference,
                            sizeof f.consumer_reference) != 0)
                rc = OG_EINTERNAL;
        }
        PQclear(res);
        res = NULL;
        if (rc != 0)
            return rc;
    }
    /* 2. The pure verdict (PP4). */
    if ((rc = og__payout_plan_claim(&f, r, pg->admission_leeway_us, &p)) != 0)
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
        return 0; /* nothing written; the caller rolls back */
    /* 3. The writes, ONE statement. */
    {
        char now[24], exec[24], lease[24], window[24];
        const char *params[11] = {r->grant_id, r->operation_id, now,
                                  pg->leeway, exec, r->worker_id, p.amount,
                                  lease, window, p.idempotency_key,
                                  p.client_reference};

        og__pg_fmt_i64(now, sizeof now, f.now_us);
        og__pg_fmt_i64(exec, sizeof exec, f.executable_version);
        og__pg_fmt_i64(lease, sizeof lease, r->lease_us);
        og__pg_fmt_i64(window, sizeof window, r->send_window_us);
        rc = og__pg_run_in(pg, c, &pg_payout_claim_stmt, params, &res, deadline_us);
    }
    /* The rows are ours: every step wrote its one row, or it is a defect. */
    if (rc == 0 &&
        (PQntuples(res) != 1 || og__pg_shape(res, OP_NCOLS + 2, 1) != 0 ||
         og__pg_op_parse(res, 0, 0, &out->attempt) != 0 ||
         og__pg_get_i64(res, 0, OP_NCOLS, &v) != 0 ||
         og__pg_get_i64(res, 0, OP_NCOLS + 1, &events) != 0 ||
         v != p.new_version || events != 1))
        rc = OG_EINTERNAL;
    PQclear(res);
    if (rc != 0)
        return rc;
    if (og__fault(OG__FAULT_CLAIM_BEFORE_COMMIT))
        return OG_ESTORE_UNAVAILABLE;
    out->has_attempt = true;
    *claimed = true;
    return 0;
}

/* ONE explicit transaction (I31): Read Committed with the facts' rows
 * locked, one deadline for all of it; only CLAIMED commits. */
int og__pg_payout_claim(void *impl, const og__payout_claim_req *r,
                           og_payout_claim_result *out)
{
    og__pg_store *pg = impl;
    int64_t deadline = og__pg_mono_us() + pg->timeout_us;
    og_payout_claim_result res;
    bool claimed = false;
    og__pg_conn *c = NULL;
    int rc;

    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    rc = og__pg_txn(pg, c, "BEGIN", PQTRANS_INTRANS, deadline);
    if (rc == 0) {
        rc = pg_payout_claim_in(pg, c, r, &res, &claimed, deadline);
        /* Anything but CLAIMED wrote nothing: roll back (og__pg_txn_end rolls
         * back on a non-zero rc). */
        if (rc == 0 && !claimed) {
            /* A ROLLBACK that fails discards the connection (the server
             * then rolls back): either way nothing was written. */
            (void)og__pg_txn_end(pg, c, 1, deadline);
        } else {
            rc = og__pg_txn_end(pg, c, rc, deadline);
        }
    }
    og__pg_release(pg, c);
    if (rc == 0)
        *out = res;
    return rc;
}

/* ---- jobs (I30) ---------------------------------------------------------- */

int og__pg_payout_job_take(void *impl, int64_t lease_us,
                              og_payout_job *out)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    char lease[24];
    const char *params[1] = {lease};
    og_payout_job j;
    int rc;

    og__pg_fmt_i64(lease, sizeof lease, lease_us);
    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    rc = og__pg_run(pg, c, &og__pg_payout_job_take_stmt, params, &res);
    if (rc == 0 && og__pg_shape(res, PG_PAYOUT_JOB_NCOLS, 1) != 0)
        rc = OG_EINTERNAL;
    if (rc == 0 && PQntuples(res) == 1) {
        memset(&j, 0, sizeof j);
        rc = og__pg_get_text(res, 0, 0, j.job_id, sizeof j.job_id) ||
                     og__pg_get_text(res, 0, 1, j.payout_id, sizeof j.payout_id) ||
                     og__pg_get_text(res, 0, 2, j.grant_id, sizeof j.grant_id) ||
                     og__pg_get_text(res, 0, 3, j.correlation_id,
                                 sizeof j.correlation_id) ||
                     og__pg_get_opt_text(res, 0, 4, j.resubmitted_from,
                                     sizeof j.resubmitted_from) ||
                     og__pg_get_i64(res, 0, 5, &j.delivery) ||
                     og__pg_get_i64(res, 0, 6, &j.lease_until_us)
                 ? OG_EINTERNAL
                 : 1;
    }
    PQclear(res);
    og__pg_release(pg, c);
    if (rc == 1)
        *out = j;
    return rc;
}

/* Runs a job write whose statement returns a row exactly when it changed
 * the job: *done. */
static int pg_payout_job_write(og__pg_store *pg, const og__pg_stmt *stmt, const char *const *params,
                               bool *done)
{
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    int rc;

    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    rc = og__pg_run(pg, c, stmt, params, &res);
    if (rc == 0 && og__pg_shape(res, 1, 1) != 0)
        rc = OG_EINTERNAL;
    if (rc == 0)
        *done = PQntuples(res) == 1;
    PQclear(res);
    og__pg_release(pg, c);
    return rc;
}

int og__pg_payout_job_ack(void *impl, const char *id, int64_t delivery,
                             bool *acked)
{
    char d[24];
    const char *params[2] = {id, d};

    og__pg_fmt_i64(d, sizeof d, delivery);
    return pg_payout_job_write(impl, &pg_payout_job_ack_stmt, params, acked);
}

int og__pg_payout_job_postpone(void *impl, const char *id,
                                  int64_t delivery, int64_t delay_us,
                                  bool *postponed)
{
    char d[24], delay[24];
    const char *params[3] = {id, d, delay};

    og__pg_fmt_i64(d, sizeof d, delivery);
    og__pg_fmt_i64(delay, sizeof delay, delay_us);
    return pg_payout_job_write(impl, &pg_payout_job_postpone_stmt, params,
                               postponed);
}

int og__pg_payout_job_resubmit(void *impl, const char *id,
                                  const char *actor, const char *new_id)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    const char *params[3] = {id, new_id, actor};
    int64_t n = 0;
    int rc;

    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    rc = og__pg_run(pg, c, &pg_payout_job_resubmit_stmt, params, &res);
    if (rc == 0 && (PQntuples(res) != 1 || og__pg_shape(res, 1, 1) != 0 ||
                    og__pg_get_i64(res, 0, 0, &n) != 0 || n < 0 || n > 1))
        rc = OG_EINTERNAL;
    PQclear(res);
    og__pg_release(pg, c);
    return rc == 0 ? (int)n : rc;
}

/* ---- payout grants (I29) ----------------------------------------------------- */

/* A nullable µs column: NULL reads 0. */
static int pg_get_opt_i64(const PGresult *r, int col, int64_t *out)
{
    if (PQgetisnull(r, 0, col)) {
        *out = 0;
        return 0;
    }
    return og__pg_get_i64(r, 0, col, out);
}

int og__pg_payout_grant_get(void *impl, const char *grant_id,
                               og_payout_grant_view *out)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    const char *params[1] = {grant_id};
    og_payout_grant_view v;
    int rc;

    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    rc = og__pg_run(pg, c, &pg_payout_grant_get_stmt, params, &res);
    if (rc == 0 && og__pg_shape(res, PG_PAYOUT_GRANT_NCOLS, 1) != 0)
        rc = OG_EINTERNAL;
    if (rc == 0 && PQntuples(res) == 1) {
        memset(&v, 0, sizeof v);
        if (og__pg_get_text(res, 0, 0, v.grant_id, sizeof v.grant_id) ||
            og__pg_get_text(res, 0, 1, v.decision_id, sizeof v.decision_id) ||
            og__pg_get_text(res, 0, 2, v.payout_id, sizeof v.payout_id) ||
            og__pg_get_text(res, 0, 3, v.tenant_id, sizeof v.tenant_id) ||
            og__pg_get_text(res, 0, 4, v.operation, sizeof v.operation) ||
            og__pg_get_text(res, 0, 5, v.audience, sizeof v.audience) ||
            og__pg_get_text(res, 0, 6, v.terms_fingerprint,
                        sizeof v.terms_fingerprint) ||
            og__pg_get_text(res, 0, 7, v.policy_version,
                        sizeof v.policy_version) ||
            og__pg_get_i64(res, 0, 8, &v.executable_payout_version) ||
            og__pg_get_i64(res, 0, 9, &v.attempt_number) ||
            og__pg_get_i64(res, 0, 10, &v.reserved_minor) ||
            og__pg_get_text(res, 0, 11, v.release_day, sizeof v.release_day) ||
            og__pg_get_i64(res, 0, 12, &v.not_before_us) ||
            og__pg_get_i64(res, 0, 13, &v.expires_at_us) ||
            og__pg_get_i64(res, 0, 14, &v.created_at_us) ||
            pg_get_opt_i64(res, 15, &v.consumed_at_us) ||
            og__pg_get_opt_text(res, 0, 16, v.consumed_by_operation,
                            sizeof v.consumed_by_operation) ||
            pg_get_opt_i64(res, 17, &v.revoked_at_us) ||
            pg_get_opt_i64(res, 18, &v.released_at_us) ||
            og__pg_get_i64(res, 0, 19, &v.read_at_us)) {
            rc = OG_EINTERNAL;
        } else {
            v.state = og__payout_grant_state(
                !PQgetisnull(res, 0, 15), !PQgetisnull(res, 0, 17),
                v.expires_at_us, pg->admission_leeway_us, v.read_at_us);
            *out = v;
            rc = 1;
        }
    }
    PQclear(res);
    og__pg_release(pg, c);
    return rc;
}

int og__pg_payout_grant_revoke(void *impl, const char *grant_id,
                                  const char *actor, og_revoke_outcome *out)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    const char *params[2] = {grant_id, actor};
    int64_t days = 0, released = 0;
    int rc;

    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    rc = og__pg_run(pg, c, &pg_payout_grant_revoke_stmt, params, &res);
    if (rc == 0 && (PQntuples(res) != 1 || og__pg_shape(res, 4, 1) != 0 ||
                    og__pg_get_i64(res, 0, 2, &days) != 0 ||
                    og__pg_get_i64(res, 0, 3, &released) != 0 ||
                    days != released)) /* each binding has its day row */
        rc = OG_EINTERNAL;
    if (rc == 0)
        *out = og__pg_get_bool(res, 0, 0) ? OG_REVOKE_REVOKED
               : og__pg_get_bool(res, 0, 1) ? OG_REVOKE_ALREADY_USED_OR_REVOKED
                                        : OG_REVOKE_NOT_ISSUED;
    PQclear(res);
    og__pg_release(pg, c);
    return rc;
}

int og__pg_payout_expire_batch(void *impl, int batch, int64_t *from_us,
                                  int64_t *taken)
{
    og__pg_store *pg = impl;
    int64_t v[4];
    int rc;

    rc = og__pg_run_batch(pg, &og__pg_payout_expire_stmt, pg->expiry_margin, batch,
                      *from_us, v);
    /* released = picked (the pick locked them unreleased), each release
     * changed its day's row: sums over fewer rows, never more */
    if (rc == 0 && (v[0] != v[1] || v[2] > v[0] || (v[0] > 0 && v[2] < 1)))
        rc = OG_EINTERNAL;
    if (rc == 0) {
        *taken = v[0];
        *from_us = v[3];
    }
    return rc;
}

/* ===========================================================================
 * The method table.
 * ========================================================================= */
/* ===========================================================================
 * Plans (og_store_explain): EXPLAIN EXECUTE of the store's own prepared
 * statements, so what is shown is what admissions and cleanup run.
 * ========================================================================= */

/* The plan of prepared statement i on c for the n literal values (NULL:
 * SQL NULL) under plan_cache_mode = mode, written as a block. */
static int pg_explain_one(og__pg_store *pg, og__pg_conn *c, const og__pg_stmt *s,
                          const char *const *values, int n, const char *mode,
                          const char *caption, FILE *out)
{
    char set[64], *sql = NULL;
    size_t len = 0;
    const char **lines = NULL;
    PGresult *res = NULL;
    FILE *q;
    int rc, rows;

    snprintf(set, sizeof set, "SET plan_cache_mode = %s", mode);
    if ((rc = og__pg_exec_params(pg, c, set, 0, NULL, PQTRANS_IDLE, NULL)) != 0)
        return rc;
    if ((rc = og__pg_prepare(pg, c, s, og__pg_mono_us() + pg->timeout_us)) !=
        0)
        return rc == OG__PG_REFUSE ? OG_EINTERNAL : rc;
    if (!(q = open_memstream(&sql, &len)))
        return OG_ENOMEM;
    fprintf(q, "EXPLAIN EXECUTE %s", s->name);
    for (int k = 0; k < n; k++) {
        char *lit = values[k] ? PQescapeLiteral(c->conn, values[k],
                                                strlen(values[k]))
                              : NULL;
        if (values[k] && !lit) {
            fclose(q);
            free(sql);
            return OG_ENOMEM;
        }
        fprintf(q, "%s%s", k ? ", " : " (", lit ? lit : "NULL");
        PQfreemem(lit);
    }
    fputs(n > 0 ? ")" : "", q);
    if (fclose(q) != 0 || !sql) {
        free(sql);
        return OG_ENOMEM;
    }
    rc = og__pg_exec_params(pg, c, sql, 0, NULL, PQTRANS_IDLE, &res);
    free(sql);
    if (rc != 0)
        return rc;
    rows = PQntuples(res);
    if (PQnfields(res) != 1 || rows < 1) {
        PQclear(res);
        return OG_EINTERNAL;
    }
    if (!(lines = calloc((size_t)rows, sizeof *lines))) {
        PQclear(res);
        return OG_ENOMEM;
    }
    for (int r = 0; r < rows; r++)
        lines[r] = PQgetvalue(res, r, 0);
    og__explain_plan(out, caption, lines, rows);
    free(lines);
    PQclear(res);
    return 0;
}

/* One statement's section: its text, its values, its custom and generic
 * plans. */
static int pg_explain_stmt(og__pg_store *pg, og__pg_conn *c, const char *title, const og__pg_stmt *s,
                           const char *const *values, FILE *out)
{
    int rc, n = s->nparams;

    og__explain_statement(out, title, s->name, s->sql, values, n);
    rc = pg_explain_one(pg, c, s, values, n, "force_custom_plan",
                        "Custom plan (planned for these values, as "
                        "PostgreSQL does for a prepared statement's first "
                        "five executions):",
                        out);
    if (rc == 0)
        rc = pg_explain_one(pg, c, s, values, n, "force_generic_plan",
                            "Generic plan (the one PostgreSQL may keep "
                            "after five executions, for any values):",
                            out);
    return rc;
}

int og__pg_explain(void *impl, int batch, FILE *out)
{
    og__pg_store *pg = impl;
    og__pg_conn *c;
    char expires[24], owner[24], limit[16], from[24];
    /* A grant of the default lifetime (15 min) on its first admission;
     * the ids are of the documented shapes, held by no row. */
    const char *admit[13] = {
        "support-approvals", "g-explain-1", "00000000-0000-4000-8000-000000000001",
        expires, "agent-1", "acct-1", "10.00", "EUR", pg->leeway, pg->lease,
        pg->window, owner, NULL};
    const char *row[12] = {
        "support-approvals", "g-explain-1", "00000000-0000-4000-8000-000000000001",
        NULL, "agent-1", "acct-1", "10.00", "EUR", pg->leeway, pg->lease,
        pg->window, owner};
    const char *unclaimed[4] = {"support-approvals", "g-explain-1",
                                "00000000-0000-4000-8000-000000000001", NULL};
    const char *cleanup[3] = {pg->cleanup_margin, limit, from};
    /* A tenant's day of no row, a 30 s delivery lease, a janitor batch. */
    const char *reserve[3] = {"T-explain", "2026-01-15", "425000"};
    const char *take[1] = {"30000000"};
    const char *expire[3] = {pg->expiry_margin, limit, from};
    int rc;

    og__pg_fmt_i64(expires, sizeof expires,
               (int64_t)time(NULL) * 1000000 + INT64_C(900000000));
    og__pg_fmt_i64(owner, sizeof owner, OG__INITIAL_OWNER_VERSION);
    snprintf(limit, sizeof limit, "%d", batch);
    og__pg_fmt_i64(from, sizeof from, OG__TIME_MIN_US); /* a pass's first batch */
    if ((rc = og__pg_acquire(pg, &c)) < 0)
        return rc;
    rc = pg_explain_stmt(pg, c, "Admission, token form", og__pg_keyed(pg, &og__pg_admit_stmt, &og__pg_admit_hashed_stmt),
                         admit, out);
    if (rc == 0)
        rc = pg_explain_stmt(pg, c, "Admission, row form",
                             og__pg_keyed(pg, &og__pg_admit_row_stmt, &og__pg_admit_row_hashed_stmt), row, out);
    if (rc == 0)
        rc = pg_explain_stmt(pg, c,
                             "Admission, the follow-up read of a claim that "
                             "did not happen",
                             og__pg_keyed(pg, &og__pg_unclaimed_stmt, &og__pg_unclaimed_hashed_stmt), unclaimed, out);
    if (rc == 0)
        rc = pg_explain_stmt(pg, c, "Cleanup, one batch", &og__pg_cleanup_stmt,
                             cleanup, out);
    if (rc == 0)
        rc = pg_explain_stmt(pg, c,
                             "Payout decision: the daily-limit reservation",
                             &og__pg_payout_reserve_stmt, reserve, out);
    if (rc == 0)
        rc = pg_explain_stmt(pg, c, "Payout jobs: take the oldest available",
                             &og__pg_payout_job_take_stmt, take, out);
    if (rc == 0)
        rc = pg_explain_stmt(pg, c, "Payout grants: one expiry batch",
                             &og__pg_payout_expire_stmt, expire, out);
    /* plan_cache_mode was changed on this session: it ends with it. */
    c->broken = true;
    og__pg_release(pg, c);
    return rc;
}

/* ---- the resolution (I32) ------------------------------------------------- */

/* Row 0 of pg_payout_resolve_facts_sql into *f. */
static int pg_resolve_facts_parse(const PGresult *r,
                                  og__payout_resolve_facts *f)
{
    char state[32];
    int st;

    if (og__pg_shape(r, 8, 1) != 0 ||
        og__pg_get_text(r, 0, 0, f->payout_id, sizeof f->payout_id) ||
        og__pg_get_text(r, 0, 1, f->grant_id, sizeof f->grant_id) ||
        og__pg_get_text(r, 0, 2, f->release_day, sizeof f->release_day) ||
        og__pg_get_i64(r, 0, 3, &f->amount_minor) ||
        og__pg_get_text(r, 0, 5, state, sizeof state) ||
        og__pg_get_i64(r, 0, 6, &f->payout_version) ||
        (st = og__payout_state_parse(state)) < 0)
        return OG_EINTERNAL;
    f->found = true;
    f->released = og__pg_get_bool(r, 0, 4);
    f->state = (og_payout_state)st;
    f->active = og__pg_get_bool(r, 0, 7);
    return 0;
}

static int pg_payout_resolve_in(og__pg_store *pg, og__pg_conn *c, const char *id,
                                unsigned expected, int64_t owner_version,
                                const og_op_outcome *o,
                                og_payout_resolution *out, bool *keep,
                                int64_t deadline_us)
{
    og__payout_resolve_facts f;
    og__payout_resolve_plan p;
    PGresult *res = NULL;
    int64_t v = 0, rel = 0, days = 0, events = 0;
    bool recorded = false;
    int rc;

    memset(out, 0, sizeof *out);
    /* 1. The outcome: og_op_record's own statement, in this transaction. */
    if ((rc = og__pg_op_record_in(pg, c, id, expected, owner_version, o,
                                  &recorded, deadline_us)) != 0)
        return rc;
    if (!recorded) {
        out->outcome = OG_PAYOUT_RESOLVE_NOT_RECORDED;
        return 0; /* nothing written: the caller rolls back */
    }
    /* 2. The attempt's binding and payout, locked (PP5). */
    {
        const char *fparams[1] = {id};

        memset(&f, 0, sizeof f);
        rc = og__pg_run_in(pg, c, &pg_payout_resolve_facts_stmt, fparams, &res,
                       deadline_us);
        if (rc == 0 && PQntuples(res) == 1)
            rc = pg_resolve_facts_parse(res, &f);
        else if (rc == 0 && PQntuples(res) != 0)
            rc = OG_EINTERNAL;
        PQclear(res);
        res = NULL;
        if (rc != 0)
            return rc;
    }
    if ((rc = og__payout_plan_resolve(&f, o->status, &p)) != 0)
        return rc;
    if (p.outcome != OG_PAYOUT_RESOLVE_RESOLVED) {
        out->outcome = p.outcome;
        return 0; /* the outcome rolls back with the rest */
    }
    /* 3. The writes, ONE statement. */
    {
        char pv[24];
        const char *params[10] = {f.payout_id, pv, id, p.to_state,
                                  p.clear_attempt ? "true" : "false",
                                  f.grant_id, p.release_cause, o->actor,
                                  p.from_state, og_op_status_name(o->status)};

        og__pg_fmt_i64(pv, sizeof pv, f.payout_version);
        rc = og__pg_run_in(pg, c, &pg_payout_resolve_stmt, params, &res,
                       deadline_us);
    }
    /* The rows are ours: each step wrote exactly what the plan says, or it
     * is a defect. */
    if (rc == 0 &&
        (PQntuples(res) != 1 || og__pg_shape(res, 4, 1) != 0 ||
         og__pg_get_i64(res, 0, 0, &v) != 0 || og__pg_get_i64(res, 0, 1, &rel) != 0 ||
         og__pg_get_i64(res, 0, 2, &days) != 0 ||
         og__pg_get_i64(res, 0, 3, &events) != 0 || v != p.new_version ||
         rel != (p.release_cause ? 1 : 0) || days != rel || events != 1))
        rc = OG_EINTERNAL;
    PQclear(res);
    if (rc != 0)
        return rc;
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

int og__pg_payout_resolve(void *impl, const char *id, unsigned expected,
                             int64_t owner_version, const og_op_outcome *o,
                             og_payout_resolution *out)
{
    og__pg_store *pg = impl;
    int64_t deadline = og__pg_mono_us() + pg->timeout_us;
    og_payout_resolution res;
    bool keep = false;
    og__pg_conn *c = NULL;
    int rc;

    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    rc = og__pg_txn(pg, c, "BEGIN", PQTRANS_INTRANS, deadline);
    if (rc == 0) {
        rc = pg_payout_resolve_in(pg, c, id, expected, owner_version, o, &res,
                                  &keep, deadline);
        /* Only RESOLVED commits; NOT_RECORDED and NOT_ACTIVE roll back
         * (the outcome's write with them): nothing changed (I32). */
        if (rc == 0 && !keep)
            (void)og__pg_txn_end(pg, c, 1, deadline);
        else
            rc = og__pg_txn_end(pg, c, rc, deadline);
    }
    og__pg_release(pg, c);
    if (rc == 0)
        *out = res;
    return rc;
}

