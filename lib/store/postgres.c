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

/* Intermediate: the descriptors, until each moves beside its function. */

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

