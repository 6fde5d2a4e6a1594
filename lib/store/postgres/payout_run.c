/*
 * payout_run.c — what runs a decided payout: the outbox's jobs (take, ack,
 * postpone, resubmit), the claim's and the resolution's steps (which
 * lib/store/payout_run.c runs in one transaction each, S6), and payout
 * grants (read, finance hold, expiry batches).
 *
 * These keep M27, M28 and M32-M35 (lib/store/store_int.h); how:
 *
 *  I25 Every release re-checks released_at IS NULL on the newest version
 *      (M32). A revocation (pg_payout_grant_revoke_sql) is ONE statement:
 *      the grant's row live (unconsumed, unrevoked; a claim in flight is
 *      waited for and re-checked), then the binding's release and the
 *      day's counter from its RETURNING. An expiry batch
 *      (pg_payout_expire_sql) is ONE statement over unconsumed grants with
 *      expires_at < statement_timestamp() - cleanup margin (no admission
 *      leeway, PP7), their binding and grant rows locked SKIP LOCKED (janitors
 *      split the work; a claim or revocation in flight keeps its rows), the
 *      day rows locked in key order before they change (no deadlock between
 *      janitors).
 *  I26 A take (M33) is ONE statement: the oldest available job over
 *      payout_jobs_available_idx, FOR UPDATE SKIP LOCKED (takers split the
 *      queue instead of queueing on one row).
 *  I27 The claim is ONE explicit Read Committed transaction, not one
 *      statement: the fence must hold the context rows until the commit
 *      (docs/payouts.md, section 5 step 3: FOR SHARE, or a concurrent
 *      suspension could commit between a check and the claim's commit), and
 *      the attempt's amount is the payout's minor units in its currency's
 *      scale, which the pure core formats. Its facts' statement
 *      (pg_payout_claim_facts_sql) locks the grant's and the payout's rows
 *      FOR UPDATE and the tenant's, beneficiary's and destination's (and
 *      the policy's current release, schema 12) FOR SHARE — a change in
 *      flight is waited for and its newest version read; a claim that waited for another claim reads the consuming
 *      operation in a fresh statement (pg_payout_claim_consumer_sql: the
 *      facts' snapshot predates that commit) and reports DUPLICATE (M34).
 *      Its writes are ONE statement (pg_payout_claim_sql) built like the
 *      row-form admission, each CTE from another's RETURNING.
 *      operations_grant_key is the schema's guard of one attempt per grant.
 *      The grant's row is locked before the payout's and no writer locks a
 *      payout and then an issued grant's row, so claims, revocations and
 *      decisions cannot deadlock.
 *  I28 The resolution is ONE explicit Read Committed transaction: its
 *      record step is og_op_record's own prepared statement
 *      (pg_op_record_sql, exec.c, run by og__pg_op_record_in: the row
 *      locked FOR NO KEY UPDATE); its facts' statement locks the attempt's
 *      binding and payout FOR UPDATE (pg_payout_resolve_facts_sql); its
 *      writes are ONE statement (pg_payout_resolve_sql), whose counts must
 *      be the plan's (M35). Lock order: the operation, then the payout and
 *      binding, then the day — the claim never locks an operation, and
 *      decisions and expiries take a payout or binding before a day.
 */
#include <string.h>

#include "internal.h"

/* ===========================================================================
 * Jobs (I26)
 * ========================================================================= */

/* Take (I26): $1 lease (µs). pick: the oldest available job over
 * payout_jobs_available_idx, skipping any another taker holds (FOR UPDATE
 * SKIP LOCKED: takers split the queue instead of queueing on one row); the
 * UPDATE starts its delivery. Zero rows: none available. */
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
const og__pg_stmt og__pg_payout_job_take_stmt = {
    "og_payout_job_take", pg_payout_job_take_sql, 1, OG_KEYS_AS_STORED};
/* Its columns: PAYOUT_JOB_* (rows.h). */

int og__pg_payout_job_take(void *impl, int64_t lease_us, og_payout_job *out)
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
    if (rc == 0 && og__pg_shape(res, PAYOUT_JOB_NCOLS, 1) != 0)
        rc = OG_EINTERNAL;
    if (rc == 0 && PQntuples(res) == 1)
        rc = og__row_payout_job(og__pg_row(res, 0), &j) == 0 ? 1
                                                             : OG_EINTERNAL;
    PQclear(res);
    og__pg_release(pg, c);
    if (rc == 1)
        *out = j;
    return rc;
}

/* Runs a job write whose statement returns a row exactly when it changed
 * the job: *done. */
static int pg_payout_job_settle(og__pg_store *pg, const og__pg_stmt *stmt,
                               const char *const *params, bool *done)
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
const og__pg_stmt og__pg_payout_job_ack_stmt = {
    "og_payout_job_ack", pg_payout_job_ack_sql, 2, OG_KEYS_AS_STORED};
static const og__pg_stmt pg_payout_job_postpone_stmt = {
    "og_payout_job_postpone", pg_payout_job_postpone_sql, 3,
    OG_KEYS_AS_STORED};

int og__pg_payout_job_ack(void *impl, const char *id, int64_t delivery,
                          bool *acked)
{
    char d[24];
    const char *params[2] = {id, d};

    og__pg_fmt_i64(d, sizeof d, delivery);
    return pg_payout_job_settle(impl, &og__pg_payout_job_ack_stmt, params,
                                acked);
}

int og__pg_payout_job_postpone(void *impl, const char *id, int64_t delivery,
                               int64_t delay_us, bool *postponed)
{
    char d[24], delay[24];
    const char *params[3] = {id, d, delay};

    og__pg_fmt_i64(d, sizeof d, delivery);
    og__pg_fmt_i64(delay, sizeof delay, delay_us);
    return pg_payout_job_settle(impl, &pg_payout_job_postpone_stmt, params,
                               postponed);
}

/* ===========================================================================
 * The claim (I27)
 * ========================================================================= */

/* The claim's facts (I27), CLAIM_FACTS_* (rows.h): $1 grant.
 * The grant's row and the payout's are locked FOR UPDATE (the claim writes
 * both), the tenant's, beneficiary's and destination's FOR SHARE, and so
 * is the policy's current release (schema 12): a change to
 * any fenced fact either committed before — and a locker that waited reads its
 * newest version — or waits until the claim commits (docs/payouts.md, section
 * 5 step 3). The consuming operation (a redelivery's evidence) is read, not
 * locked. Then the store's clock, after the locks: the instant the claim
 * decides and writes at. */
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
    "       d.version, r.current_version, " PG_EPOCH_US("clock_timestamp()") "\n"
    "FROM payout_grants b\n"
    "JOIN grants g ON g.issuer = b.issuer AND g.grant_id = b.grant_id\n"
    "JOIN payouts p ON p.payout_id = b.payout_id\n"
    "JOIN payout_policy_releases r ON r.operation = '" OG_PAYOUT_OPERATION "'\n"
    "JOIN tenants t ON t.tenant_id = p.tenant_id\n"
    "JOIN beneficiaries bn ON bn.beneficiary_id = p.beneficiary_id\n"
    "JOIN destinations d ON d.destination_id = p.destination_id\n"
    "LEFT JOIN operations o ON o.operation_id = g.consumed_by_operation\n"
    "LEFT JOIN operations_archive a ON a.operation_id = g.consumed_by_operation\n"
    "WHERE b.grant_id = $1::text\n"
    "FOR UPDATE OF g, p FOR SHARE OF t, bn, d, r";
const og__pg_stmt og__pg_payout_claim_facts_stmt = {
    "og_payout_claim_facts", pg_payout_claim_facts_sql, 1, OG_KEYS_AS_STORED};

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
const og__pg_stmt og__pg_payout_claim_consumer_stmt = {
    "og_payout_claim_consumer", pg_payout_claim_consumer_sql, 1,
    OG_KEYS_AS_STORED};
enum {
    CLAIM_CONSUMER_IS_PAYOUT,
    CLAIM_CONSUMER_REFERENCE,
    CLAIM_CONSUMER_NCOLS
};

/* The claim's facts, their rows locked until the commit (I27); a claim
 * that waited for another claim reads the consuming operation in a fresh
 * statement. */
int og__pg_payout_claim_facts(void *impl, void *tx, const char *grant_id,
                              og__payout_claim_facts *out)
{
    og__pg_conn *c = tx;
    const char *fparams[1] = {grant_id};
    og__payout_claim_facts f;
    PGresult *res = NULL;
    int rc;

    memset(&f, 0, sizeof f);
    rc = og__pg_run_in(impl, c, &og__pg_payout_claim_facts_stmt, fparams, &res,
                       c->txn_deadline_us);
    if (rc == 0 && og__pg_shape(res, CLAIM_FACTS_NCOLS, 1) != 0)
        rc = OG_EINTERNAL;
    if (rc == 0 && PQntuples(res) == 1)
        rc = og__row_claim_facts(og__pg_row(res, 0), &f);
    PQclear(res);
    res = NULL;
    if (rc != 0)
        return rc;
    if (f.found && f.consumed && f.consumed_by[0] != '\0' &&
        !f.consumer_found) {
        const char *oparams[1] = {f.consumed_by};

        rc = og__pg_run_in(impl, c, &og__pg_payout_claim_consumer_stmt, oparams,
                           &res, c->txn_deadline_us);
        if (rc == 0 && og__pg_shape(res, CLAIM_CONSUMER_NCOLS, 1) != 0)
            rc = OG_EINTERNAL;
        if (rc == 0 && PQntuples(res) == 1) {
            f.consumer_found = true;
            f.consumer_payout =
                og__pg_get_bool(res, 0, CLAIM_CONSUMER_IS_PAYOUT);
            if (og__pg_get_text(res, 0, CLAIM_CONSUMER_REFERENCE,
                                f.consumer_reference,
                                sizeof f.consumer_reference) != 0)
                rc = OG_EINTERNAL;
        }
        PQclear(res);
        if (rc != 0)
            return rc;
    }
    *out = f;
    return 0;
}

/* The claim's writes (I27), ONE statement at the facts' instant, each CTE
 * re-asserting its conditions as the row-form admission does (the rows are
 * ours since the facts' read, so they hold; repeating them keeps the
 * guarantee readable in one place): $1 grant  $2 operation  $3 now (µs)
 * $4 the policy release fenced  $5 executable version  $6 worker  $7 amount (decimal)
 * $8 lease (µs)  $9 send window (µs)  $10 key  $11 reference.
 *  - gr: the grant's row consumed (unconsumed, unrevoked, not_before <=
 *    now < expires_at: no leeway, docs/payouts.md section 5), the
 *    policy's current release still the one the recheck ran;
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
    "    AND g.expires_at > " PG_TS("$3") "\n"
    "    AND EXISTS (SELECT 1 FROM payout_policy_releases r\n"
    "                WHERE r.operation = '" OG_PAYOUT_OPERATION "' AND r.current_version = $4::text)\n"
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
    "      idempotency_key, client_reference, final_absence_after)\n"
    "  SELECT $2::uuid, '" OG_PAYOUT_ISSUER "', gr.grant_id, $6::text, pay.destination_id,\n"
    "         $7::numeric, pay.currency, 'Admitted', " PG_STR(OG__INITIAL_OWNER_VERSION) ",\n"
    "         " PG_TS("$3") " + " PG_US("$8") ", " PG_TS("$3") " + " PG_US("$9") ",\n"
    "         " PG_TS("$3") ", 'payout', $10::text, $11::text,\n"
    "         " PG_TS("$3") " + " PG_US("$9") " + " PG_US("$12") "   -- NULL stays NULL\n"
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
const og__pg_stmt og__pg_payout_claim_stmt = {
    "og_payout_claim", pg_payout_claim_sql, 12, OG_KEYS_AS_STORED};
/* Its row: the attempt's operation columns, then the payout's new version
 * and the history entries written. */
enum {
    CLAIM_OP = 0,
    CLAIM_VERSION = OP_NCOLS,
    CLAIM_EVENTS,
    CLAIM_NCOLS
};

/* CLAIMED's writes, ONE statement at the facts' instant (I27). */
int og__pg_payout_claim_write(void *impl, void *tx,
                              const og__payout_claim_req *r,
                              const og__payout_claim_facts *f,
                              const og__payout_claim_plan *p,
                              og_operation *attempt)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = tx;
    char now[24], exec[24], lease[24], window[24], margin[24];
    const char *params[12] = {r->grant_id,
                              r->operation_id,
                              now,
                              r->policy_version,
                              exec,
                              r->worker_id,
                              p->amount,
                              lease,
                              window,
                              p->idempotency_key,
                              p->client_reference,
                              r->final_absence_margin_us < 0 ? NULL : margin};
    PGresult *res = NULL;
    og_operation op;
    int64_t v = 0, events = 0;
    int rc;

    og__pg_fmt_i64(now, sizeof now, f->now_us);
    og__pg_fmt_i64(exec, sizeof exec, f->executable_version);
    og__pg_fmt_i64(lease, sizeof lease, r->lease_us);
    og__pg_fmt_i64(window, sizeof window, r->send_window_us);
    og__pg_fmt_i64(margin, sizeof margin, r->final_absence_margin_us);
    rc = og__pg_run_in(pg, c, &og__pg_payout_claim_stmt, params, &res,
                       c->txn_deadline_us);
    /* The rows are ours: every step wrote its one row, or it is a defect. */
    if (rc == 0 &&
        (PQntuples(res) != 1 || og__pg_shape(res, CLAIM_NCOLS, 1) != 0 ||
         og__pg_op_parse(res, 0, CLAIM_OP, &op) != 0 ||
         og__pg_get_i64(res, 0, CLAIM_VERSION, &v) != 0 ||
         og__pg_get_i64(res, 0, CLAIM_EVENTS, &events) != 0 ||
         v != p->new_version || events != 1))
        rc = OG_EINTERNAL;
    PQclear(res);
    if (rc == 0)
        *attempt = op;
    return rc;
}

/* ===========================================================================
 * The resolution (I28)
 * ========================================================================= */

/* The outcome: og_op_record's own statement, in this transaction. */
int og__pg_payout_resolve_record(void *impl, void *tx, const char *id,
                                 unsigned expected, int64_t owner_version,
                                 const og_op_outcome *o, const char *source,
                                 bool *recorded)
{
    og__pg_conn *c = tx;

    return og__pg_op_record_in(impl, c, id, expected, owner_version, o,
                               source, recorded, c->txn_deadline_us);
}

/* The resolution's facts (I28), RESOLVE_FACTS_* (rows.h): $1 the
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
const og__pg_stmt og__pg_payout_resolve_facts_stmt = {
    "og_payout_resolve_facts", pg_payout_resolve_facts_sql, 1,
    OG_KEYS_AS_STORED};

int og__pg_payout_resolve_facts(void *impl, void *tx, const char *id,
                                og__payout_resolve_facts *out)
{
    og__pg_conn *c = tx;
    const char *fparams[1] = {id};
    og__payout_resolve_facts f;
    PGresult *res = NULL;
    int rc;

    memset(&f, 0, sizeof f);
    rc = og__pg_run_in(impl, c, &og__pg_payout_resolve_facts_stmt, fparams,
                       &res, c->txn_deadline_us);
    if (rc == 0 && og__pg_shape(res, RESOLVE_FACTS_NCOLS, 1) != 0)
        rc = OG_EINTERNAL;
    if (rc == 0 && PQntuples(res) == 1)
        rc = og__row_resolve_facts(og__pg_row(res, 0), &f);
    PQclear(res);
    if (rc == 0)
        *out = f;
    return rc;
}

/* The resolution's writes (I28), ONE statement after the outcome's: $1
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
const og__pg_stmt og__pg_payout_resolve_stmt = {
    "og_payout_resolve", pg_payout_resolve_sql, 10, OG_KEYS_AS_STORED};
enum {
    RESOLVE_VERSION,
    RESOLVE_RELEASED,
    RESOLVE_DAYS,
    RESOLVE_EVENTS,
    RESOLVE_NCOLS
};

/* RESOLVED's writes, ONE statement after the outcome's (I28). */
int og__pg_payout_resolve_write(void *impl, void *tx, const char *id,
                                const og_op_outcome *o,
                                const og__payout_resolve_facts *f,
                                const og__payout_resolve_plan *p)
{
    og__pg_conn *c = tx;
    char pv[24];
    const char *params[10] = {f->payout_id,
                              pv,
                              id,
                              p->to_state,
                              p->clear_attempt ? "true" : "false",
                              f->grant_id,
                              p->release_cause,
                              o->actor,
                              p->from_state,
                              og_op_status_name(o->status)};
    int64_t v = 0, rel = 0, days = 0, events = 0;
    PGresult *res = NULL;
    int rc;

    og__pg_fmt_i64(pv, sizeof pv, f->payout_version);
    rc = og__pg_run_in(impl, c, &og__pg_payout_resolve_stmt, params, &res,
                       c->txn_deadline_us);
    /* The rows are ours: each step wrote exactly what the plan says, or it
     * is a defect. */
    if (rc == 0 &&
        (PQntuples(res) != 1 || og__pg_shape(res, RESOLVE_NCOLS, 1) != 0 ||
         og__pg_get_i64(res, 0, RESOLVE_VERSION, &v) != 0 ||
         og__pg_get_i64(res, 0, RESOLVE_RELEASED, &rel) != 0 ||
         og__pg_get_i64(res, 0, RESOLVE_DAYS, &days) != 0 ||
         og__pg_get_i64(res, 0, RESOLVE_EVENTS, &events) != 0 ||
         v != p->new_version || rel != (p->release_cause ? 1 : 0) ||
         days != rel || events != 1))
        rc = OG_EINTERNAL;
    PQclear(res);
    return rc;
}

/* ===========================================================================
 * Resubmission (I26)
 * ========================================================================= */

/* Resubmission: $1 the job copied  $2 the new id  $3 actor. One row: how
 * many it wrote, and whether the job copied exists (written 0 with it: a
 * job with the new id exists already — the primary key decides, even
 * against a concurrent twin). */
static const char pg_payout_job_resubmit_sql[] =
    "WITH ins AS (\n"
    "  INSERT INTO payout_jobs (job_id, payout_id, grant_id, correlation_id, resubmitted_from,\n"
    "                           created_at, available_at, deliveries)\n"
    "  SELECT $2::uuid, j.payout_id, j.grant_id, j.correlation_id, j.job_id, t.now, t.now, 0\n"
    "  FROM payout_jobs j, (SELECT clock_timestamp() AS now) t WHERE j.job_id = $1::uuid\n"
    "  ON CONFLICT (job_id) DO NOTHING\n"
    "  RETURNING job_id, payout_id, grant_id, correlation_id, created_at),\n"
    "ev AS (\n"
    "  INSERT INTO payout_events (payout_id, at, kind, actor, correlation_id, grant_id, job_id)\n"
    "  SELECT payout_id, created_at, 'job-resubmitted', $3::text, correlation_id, grant_id, job_id\n"
    "  FROM ins\n"
    "  RETURNING 1)\n"
    "SELECT (SELECT count(*) FROM ins),\n"
    "       (SELECT count(*) FROM payout_jobs WHERE job_id = $1::uuid)";
static const og__pg_stmt pg_payout_job_resubmit_stmt = {
    "og_payout_job_resubmit", pg_payout_job_resubmit_sql, 3,
    OG_KEYS_AS_STORED};
enum { RESUBMIT_WRITTEN, RESUBMIT_SOURCE, RESUBMIT_NCOLS };

int og__pg_payout_job_resubmit(void *impl, const char *id, const char *actor,
                               const char *new_id)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    const char *params[3] = {id, new_id, actor};
    int64_t n = 0, src = 0;
    int rc;

    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    rc = og__pg_run(pg, c, &pg_payout_job_resubmit_stmt, params, &res);
    if (rc == 0 &&
        (PQntuples(res) != 1 || og__pg_shape(res, RESUBMIT_NCOLS, 2) != 0 ||
         og__pg_get_i64(res, 0, RESUBMIT_WRITTEN, &n) != 0 || n < 0 || n > 1 ||
         og__pg_get_i64(res, 0, RESUBMIT_SOURCE, &src) != 0))
        rc = OG_EINTERNAL;
    PQclear(res);
    og__pg_release(pg, c);
    return rc != 0 ? rc : n == 1 ? 1 : src > 0 ? 2 : 0;
}

/* ===========================================================================
 * Payout grants (I25)
 * ========================================================================= */

/* A payout grant and its row, with the clock its state is derived at:
 * $1 grant. */
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
static const og__pg_stmt pg_payout_grant_get_stmt = {
    "og_payout_grant_get", pg_payout_grant_get_sql, 1, OG_KEYS_AS_STORED};
/* Its columns: PAYOUT_GRANT_* (rows.h). */

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
    if (rc == 0 && og__pg_shape(res, PAYOUT_GRANT_NCOLS, 1) != 0)
        rc = OG_EINTERNAL;
    if (rc == 0 && PQntuples(res) == 1) {
        if (og__row_payout_grant(og__pg_row(res, 0), &v) == 0) {
            *out = v;
            rc = 1;
        } else {
            rc = OG_EINTERNAL;
        }
    }
    PQclear(res);
    og__pg_release(pg, c);
    return rc;
}

/* A finance hold (I25): $1 grant  $2 actor.
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
static const og__pg_stmt pg_payout_grant_revoke_stmt = {
    "og_payout_grant_revoke", pg_payout_grant_revoke_sql, 2,
    OG_KEYS_AS_STORED};
enum {
    GRANT_REVOKE_REVOKED,
    GRANT_REVOKE_IS_PAYOUT_GRANT,
    GRANT_REVOKE_DAYS,
    GRANT_REVOKE_RELEASED,
    GRANT_REVOKE_NCOLS
};

int og__pg_payout_grant_revoke(void *impl, const char *grant_id,
                               const char *actor,
                               og__payout_revoke_report *out)
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
    if (rc == 0 &&
        (PQntuples(res) != 1 || og__pg_shape(res, GRANT_REVOKE_NCOLS, 1) != 0 ||
         og__pg_get_i64(res, 0, GRANT_REVOKE_DAYS, &days) != 0 ||
         og__pg_get_i64(res, 0, GRANT_REVOKE_RELEASED, &released) != 0 ||
         days != released)) /* each binding has its day row */
        rc = OG_EINTERNAL;
    if (rc == 0) {
        out->revoked = og__pg_get_bool(res, 0, GRANT_REVOKE_REVOKED);
        out->payout_grant =
            og__pg_get_bool(res, 0, GRANT_REVOKE_IS_PAYOUT_GRANT);
    }
    PQclear(res);
    og__pg_release(pg, c);
    return rc;
}

/* One expiry batch (I25): $1 cleanup margin (µs)  $2 batch
 * $3 cursor (µs).
 *  - pick: at most $2 unreleased bindings of unconsumed grants past
 *    expires_at + margin (no leeway: PP7), oldest first from the cursor, in the
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
const og__pg_stmt og__pg_payout_expire_stmt = {
    "og_payout_expire", pg_payout_expire_sql, 3, OG_KEYS_AS_STORED};
enum {
    EXPIRE_RELEASED,
    EXPIRE_PICKED,
    EXPIRE_DAYS,
    EXPIRE_CURSOR,
    EXPIRE_NCOLS
};
_Static_assert(EXPIRE_NCOLS == PG_BATCH_NCOLS, "a keyset batch's row");

int og__pg_payout_expire_batch(void *impl, int batch, int64_t *from_us,
                               int64_t *taken)
{
    og__pg_store *pg = impl;
    int64_t v[EXPIRE_NCOLS];
    int rc;

    rc = og__pg_run_batch(pg, &og__pg_payout_expire_stmt, pg->expiry_margin,
                          batch, *from_us, v);
    /* released = picked (the pick locked them unreleased), each release
     * changed its day's row: sums over fewer rows, never more */
    if (rc == 0 && (v[EXPIRE_RELEASED] != v[EXPIRE_PICKED] ||
                    v[EXPIRE_DAYS] > v[EXPIRE_RELEASED] ||
                    (v[EXPIRE_RELEASED] > 0 && v[EXPIRE_DAYS] < 1)))
        rc = OG_EINTERNAL;
    if (rc == 0) {
        *taken = v[EXPIRE_RELEASED];
        *from_us = v[EXPIRE_CURSOR];
    }
    return rc;
}

/* ===========================================================================
 * Operators' statistics (og_payout_stats_read)
 * ========================================================================= */

/* ONE statement, so one snapshot (the parts add up): first the totals row
 * (tenant NULL) — held reservations over the unreleased bindings (the
 * janitor's partial index), and of their grants the unconsumed, unrevoked
 * ones by window on the store's clock, read once — then the $1 largest
 * holders by tenant. */
static const char pg_payout_stats_sql[] =
    "WITH t AS MATERIALIZED (SELECT clock_timestamp() AS now)\n"
    "SELECT NULL::text, count(*), coalesce(sum(b.amount), 0)::bigint,\n"
    "       count(*) FILTER (WHERE g.consumed_at IS NULL AND g.revoked_at IS NULL\n"
    "                          AND t.now < b.not_before),\n"
    "       count(*) FILTER (WHERE g.consumed_at IS NULL AND g.revoked_at IS NULL\n"
    "                          AND b.not_before <= t.now AND t.now < g.expires_at),\n"
    "       count(*) FILTER (WHERE g.consumed_at IS NULL AND g.revoked_at IS NULL\n"
    "                          AND g.expires_at <= t.now)\n"
    "FROM t, payout_grants b\n"
    "JOIN grants g ON g.issuer = b.issuer AND g.grant_id = b.grant_id\n"
    "WHERE b.released_at IS NULL\n"
    "UNION ALL\n"
    "(SELECT tenant_id, count(*), sum(amount)::bigint, 0, 0, 0\n"
    " FROM payout_grants WHERE released_at IS NULL\n"
    " GROUP BY tenant_id ORDER BY 3 DESC, 1 LIMIT $1::int)";
static const og__pg_stmt pg_payout_stats_stmt = {
    "og_payout_stats", pg_payout_stats_sql, 1, OG_KEYS_AS_STORED};
enum {
    STATS_TENANT,
    STATS_RESERVATIONS,
    STATS_AMOUNT,
    STATS_PENDING,
    STATS_OPEN,
    STATS_EXPIRED,
    STATS_NCOLS
};

int og__pg_payout_stats(void *impl, og_payout_stats *out)
{
    og__pg_store *pg = impl;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    char limit[16];
    const char *params[1] = {limit};
    bool totals = false;
    int rc;

    snprintf(limit, sizeof limit, "%d", OG_PAYOUT_STATS_TENANTS);
    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    rc = og__pg_run(pg, c, &pg_payout_stats_stmt, params, &res);
    if (rc == 0 &&
        og__pg_shape(res, STATS_NCOLS, OG_PAYOUT_STATS_TENANTS + 1) != 0)
        rc = OG_EINTERNAL;
    for (int i = 0; rc == 0 && i < PQntuples(res); i++) {
        og_payout_stats_held h;

        if (og__pg_get_i64(res, i, STATS_RESERVATIONS, &h.reservations) !=
                0 ||
            og__pg_get_i64(res, i, STATS_AMOUNT, &h.reserved_minor) != 0) {
            rc = OG_EINTERNAL;
        } else if (PQgetisnull(res, i, STATS_TENANT)) {
            out->total = h;
            if (og__pg_get_i64(res, i, STATS_PENDING, &out->grants_pending) !=
                    0 ||
                og__pg_get_i64(res, i, STATS_OPEN, &out->grants_open) != 0 ||
                og__pg_get_i64(res, i, STATS_EXPIRED, &out->grants_expired) !=
                    0)
                rc = OG_EINTERNAL;
            totals = true;
        } else if (out->n_tenants < OG_PAYOUT_STATS_TENANTS &&
                   og__pg_get_text(res, i, STATS_TENANT,
                                   out->tenants[out->n_tenants].tenant_id,
                                   sizeof out->tenants[0].tenant_id) == 0) {
            out->tenants[out->n_tenants++].held = h;
        } else {
            rc = OG_EINTERNAL;
        }
    }
    if (rc == 0 && !totals)
        rc = OG_EINTERNAL; /* an aggregate always yields its row */
    PQclear(res);
    og__pg_release(pg, c);
    return rc;
}
