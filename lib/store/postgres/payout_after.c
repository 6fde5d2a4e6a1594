/*
 * payout_after.c — a payout attempt after its send in the PostgreSQL store
 * (schema 11): the reconciler's backoff, the attempt's read and an
 * operator's record step for late evidence and operators (orchestrated by
 * lib/store/payout_after.c, S6), and a return. The outcome's own NotApplied
 * guard is exec.c's pg_op_record_sql (PG_FINAL_ABSENCE).
 *
 * These keep M36 (lib/store/store_int.h); how:
 *
 *  I29 Each write is ONE statement of exec.c's shape (I15): the backoff
 *      (pg_payout_reconcile_later_sql) and the operator's record step
 *      (pg_payout_operator_record_sql) lock the operation's row FOR NO KEY
 *      UPDATE where its kind, status and owner version are the expected
 *      ones, read clock_timestamp() once after the lock, UPDATE with the
 *      same conditions — the operator's NotApplied only at or after
 *      final_absence_after, or after submit_by when it is NULL, at that
 *      instant — and INSERT the event from the UPDATE's RETURNING. Late
 *      evidence reads the attempt FOR NO KEY UPDATE in its transaction
 *      (pg_payout_attempt_read_sql), so the version it then expects is the
 *      newest committed one and stays so until the commit. The return
 *      (pg_payout_return_sql) is ONE INSERT ... SELECT that finds the
 *      payout Paid and its highest-numbered attempt (live or archived)
 *      Succeeded with the reference, and ON CONFLICT on
 *      payout_events_returned_key takes nothing the second time: two
 *      concurrent returns of one payout write one entry, and neither fails.
 */
#include <string.h>

#include "internal.h"

/* ===========================================================================
 * The reconciler's backoff
 * ========================================================================= */

/* $1 operation_id  $2 owner_version  $3 delay (µs)  $4 reason  $5 actor.
 * One row: whether it deferred. updated_at is left: the status does not
 * change. */
static const char pg_payout_reconcile_later_sql[] =
    "WITH cur AS MATERIALIZED (\n"
    "  SELECT operation_id FROM operations\n"
    "  WHERE operation_id = $1::uuid AND kind = 'payout' AND status = 'Unknown'\n"
    "    AND owner_version = $2::bigint\n"
    "  FOR NO KEY UPDATE),\n"
    "t AS MATERIALIZED (SELECT clock_timestamp() AS now FROM cur),\n"
    "upd AS (\n"
    "  UPDATE operations o\n"
    "  SET lease_until = t.now + " PG_US("$3") ", lookups = o.lookups + 1\n"
    "  FROM cur, t\n"
    "  WHERE o.operation_id = cur.operation_id\n"
    "    AND o.kind = 'payout' AND o.status = 'Unknown' AND o.owner_version = $2::bigint\n"
    "  RETURNING o.operation_id, o.owner_version, t.now AS event_at),\n"
    "ev AS (\n"
    "  INSERT INTO operation_events (operation_id, at, kind, from_status, to_status, owner_version,\n"
    "                                reason, actor)\n"
    "  SELECT operation_id, event_at, 'lookup', 'Unknown', 'Unknown', owner_version,\n"
    "         $4::text, $5::text\n"
    "  FROM upd\n"
    "  RETURNING seq)\n"
    "SELECT EXISTS (SELECT 1 FROM ev)";
const og__pg_stmt og__pg_payout_reconcile_later_stmt = {
    "og_payout_reconcile_later", pg_payout_reconcile_later_sql, 5,
    OG_KEYS_AS_STORED};

/* A statement whose one row holds one bool, run on its own connection in
 * its implicit transaction: the answer once confirmed (I1). */
static int pg_bool(og__pg_store *pg, const og__pg_stmt *stmt,
                   const char *const *params, bool *out)
{
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    int rc;

    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    rc = og__pg_run(pg, c, stmt, params, &res);
    if (rc == 0 && (PQntuples(res) != 1 || og__pg_shape(res, 1, 1) != 0 ||
                    PQgetisnull(res, 0, 0)))
        rc = OG_EINTERNAL;
    if (rc == 0)
        *out = og__pg_get_bool(res, 0, 0);
    PQclear(res);
    og__pg_release(pg, c);
    return rc;
}

int og__pg_payout_reconcile_later(void *impl, const char *operation_id,
                                  int64_t owner_version, int64_t delay_us,
                                  const char *reason, const char *actor,
                                  bool *deferred)
{
    char version[24], delay[24];
    const char *params[5] = {operation_id, version, delay, reason, actor};

    og__pg_fmt_i64(version, sizeof version, owner_version);
    og__pg_fmt_i64(delay, sizeof delay, delay_us);
    return pg_bool(impl, &og__pg_payout_reconcile_later_stmt, params, deferred);
}

/* ===========================================================================
 * Late evidence's read and an operator's record step (in a transaction)
 * ========================================================================= */

/* $1 operation_id. The row, locked until the transaction ends. */
static const char pg_payout_attempt_read_sql[] =
    "SELECT " PG_OP_COLUMNS("") " FROM operations WHERE operation_id = $1::uuid\n"
    "FOR NO KEY UPDATE";
const og__pg_stmt og__pg_payout_attempt_read_stmt = {
    "og_payout_attempt_read", pg_payout_attempt_read_sql, 1,
    OG_KEYS_AS_STORED};

int og__pg_payout_attempt_read(void *impl, void *tx, const char *id,
                               og_operation *out)
{
    og__pg_conn *c = tx;
    const char *params[1] = {id};
    PGresult *res = NULL;
    og_operation op;
    int rc;

    rc = og__pg_run_in(impl, c, &og__pg_payout_attempt_read_stmt, params, &res,
                       c->txn_deadline_us);
    if (rc == 0 && og__pg_shape(res, OP_NCOLS, 1) != 0)
        rc = OG_EINTERNAL;
    if (rc == 0 && PQntuples(res) == 1 &&
        (rc = og__pg_op_parse(res, 0, 0, &op)) == 0)
        rc = 1;
    PQclear(res);
    if (rc == 1)
        *out = op;
    return rc;
}

/* og_op_resolve's statement (exec.c) with the operator's NotApplied guard
 * (I29): $1 operation_id  $2 to  $3 operator  $4 reason  $5 evidence
 * $6 provider reference (NULL: keep). One row: whether it recorded. */
static const char pg_payout_operator_record_sql[] =
    "WITH cur AS MATERIALIZED (\n"
    "  SELECT operation_id, status FROM operations\n"
    "  WHERE operation_id = $1::uuid AND kind = 'payout' AND status = 'NeedsReconciliation'\n"
    "  FOR NO KEY UPDATE),\n"
    "t AS MATERIALIZED (SELECT clock_timestamp() AS now FROM cur),\n"
    "upd AS (\n"
    "  UPDATE operations o\n"
    "  SET status = $2::text, owner_version = o.owner_version + 1, outcome_reason = $4::text,\n"
    "      provider_reference = coalesce($6::text, o.provider_reference), updated_at = t.now\n"
    "  FROM cur, t\n"
    "  WHERE o.operation_id = cur.operation_id AND o.status = 'NeedsReconciliation'\n"
    "    AND ($2::text <> 'NotApplied' OR CASE WHEN o.final_absence_after IS NOT NULL\n"
    "                                         THEN t.now >= o.final_absence_after\n"
    "                                         ELSE t.now > o.submit_by END)\n"
    "  RETURNING o.operation_id, cur.status AS from_status, o.status AS to_status,\n"
    "            o.owner_version, t.now AS event_at),\n"
    "ev AS (\n"
    "  INSERT INTO operation_events (operation_id, at, kind, from_status, to_status, owner_version,\n"
    "                                reason, provider_reference, actor, evidence)\n"
    "  SELECT operation_id, event_at, 'resolved', from_status, to_status, owner_version,\n"
    "         $4::text, $6::text, $3::text, $5::text\n"
    "  FROM upd\n"
    "  RETURNING seq)\n"
    "SELECT EXISTS (SELECT 1 FROM ev)";
static const og__pg_stmt pg_payout_operator_record_stmt = {
    "og_payout_operator_record", pg_payout_operator_record_sql, 6,
    OG_KEYS_AS_STORED};

int og__pg_payout_operator_record(void *impl, void *tx, const char *id,
                                  og_op_status to, const char *operator_id,
                                  const char *reason, const char *evidence,
                                  const char *provider_reference,
                                  bool *recorded)
{
    og__pg_conn *c = tx;
    const char *params[6] = {id,     og_op_status_name(to), operator_id,
                             reason, evidence,              provider_reference};
    PGresult *res = NULL;
    int rc;

    if (to != OG_OP_SUCCEEDED && to != OG_OP_FAILED && to != OG_OP_NOT_APPLIED)
        return OG_EINTERNAL; /* payout_after.c checked it: a defect */
    rc = og__pg_run_in(impl, c, &pg_payout_operator_record_stmt, params, &res,
                       c->txn_deadline_us);
    if (rc == 0 && (PQntuples(res) != 1 || og__pg_shape(res, 1, 1) != 0 ||
                    PQgetisnull(res, 0, 0)))
        rc = OG_EINTERNAL;
    if (rc == 0)
        *recorded = og__pg_get_bool(res, 0, 0);
    PQclear(res);
    return rc;
}

/* ===========================================================================
 * A return after completion (P8)
 * ========================================================================= */

/* $1 payout  $2 provider reference  $3 actor  $4 evidence (NULL: none).
 * la: the payout's highest-numbered attempt that has an operation, live or
 * archived, each reached by its binding's grant (operations_grant_key;
 * the archive's operations_archive_payout_grant_idx, migration 13): joins,
 * since a join with a UNION ALL is not pushed into it and read every
 * payout attempt. One row per entry written (none: not Paid, not that attempt,
 * or returned before). */
static const char pg_payout_return_sql[] =
    "WITH la AS (\n"
    "  SELECT b.grant_id,\n"
    "         CASE WHEN o.operation_id IS NOT NULL THEN o.status ELSE a.status END AS status,\n"
    "         CASE WHEN o.operation_id IS NOT NULL THEN o.provider_reference\n"
    "              ELSE a.provider_reference END AS provider_reference\n"
    "  FROM payout_grants b\n"
    "  LEFT JOIN operations o ON o.issuer = '" OG_PAYOUT_ISSUER "' AND o.grant_id = b.grant_id\n"
    "    AND o.kind = 'payout'\n"
    "  LEFT JOIN operations_archive a ON a.issuer = '" OG_PAYOUT_ISSUER "' AND a.grant_id = b.grant_id\n"
    "    AND a.kind = 'payout'\n"
    "  WHERE b.payout_id = $1::text\n"
    "    AND (o.operation_id IS NOT NULL OR a.operation_id IS NOT NULL)\n"
    "  ORDER BY b.attempt_number DESC LIMIT 1)\n"
    "INSERT INTO payout_events (payout_id, at, kind, actor, grant_id, from_state, to_state,\n"
    "                           payout_version, reason, evidence)\n"
    "SELECT p.payout_id, clock_timestamp(), 'returned', $3::text, la.grant_id, 'Paid', 'Paid',\n"
    "       p.version, $2::text, $4::text\n"
    "FROM payouts p, la\n"
    "WHERE p.payout_id = $1::text AND p.state = 'Paid'\n"
    "  AND la.status = 'Succeeded' AND la.provider_reference = $2::text\n"
    "ON CONFLICT (payout_id) WHERE kind = 'returned' DO NOTHING\n"
    "RETURNING 1";
const og__pg_stmt og__pg_payout_return_stmt = {
    "og_payout_return", pg_payout_return_sql, 4, OG_KEYS_AS_STORED};

int og__pg_payout_return(void *impl, const char *payout_id,
                         const char *provider_reference, const char *actor,
                         const char *evidence, bool *recorded)
{
    og__pg_store *pg = impl;
    const char *params[4] = {payout_id, provider_reference, actor, evidence};
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    int rc;

    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    rc = og__pg_run(pg, c, &og__pg_payout_return_stmt, params, &res);
    if (rc == 0 && og__pg_shape(res, 1, 1) != 0)
        rc = OG_EINTERNAL;
    if (rc == 0)
        *recorded = PQntuples(res) == 1; /* confirmed (I1) */
    PQclear(res);
    og__pg_release(pg, c);
    return rc;
}
