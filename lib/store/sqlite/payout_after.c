/*
 * payout_after.c — a payout attempt after its send in the SQLite store
 * (schema 11): the reconciler's backoff, the attempt's read and an
 * operator's record step for late evidence and operators (orchestrated by
 * lib/store/payout_after.c, S6), and a return. The outcome's own NotApplied
 * guard is exec.c's og__sq_op_record_sql (SQ_FINAL_ABSENCE).
 *
 * These keep M36 (lib/store/store_int.h); how:
 *
 *   Q29 Each write runs under the write lock: the backoff is ONE BEGIN
 *       IMMEDIATE transaction holding its conditional UPDATE (kind payout,
 *       Unknown, the owner version) and its "lookup" event, as Q14; late
 *       evidence and the operator's resolution read and write inside the
 *       orchestration's BEGIN IMMEDIATE, so the version late evidence then
 *       expects is the newest committed one and stays so until the commit,
 *       and the operator's UPDATE (sq_payout_operator_record_sql) tests its
 *       NotApplied guard — at or after final_absence_after, or after
 *       submit_by when it is NULL — against the step's 'now' (Q15), which
 *       the resolution's writes then share (og__sq_conn.txn_at_us, Q28).
 *       The return (og__sq_payout_return_sql) is ONE INSERT ... SELECT in its
 *       own BEGIN IMMEDIATE that finds the payout Paid and its
 *       highest-numbered attempt (live or archived) Succeeded with the
 *       reference; payout_events_returned_key with ON CONFLICT DO NOTHING
 *       takes nothing the second time.
 */
#include <string.h>

#include "internal.h"

/* ===========================================================================
 * The reconciler's backoff
 * ========================================================================= */

/* ?1 the operation id, ?2 owner version, ?3 delay (µs). updated_at is
 * left: the status does not change. A row only when it deferred: the
 * step's 'now' (Q15). */
const char og__sq_payout_reconcile_later_sql[] =
    "UPDATE operations SET lease_until = " SQ_NOW " + ?3,"
    "   lookups = lookups + 1"
    " WHERE operation_id = ?1 AND kind = 'payout' AND status = 'Unknown'"
    "   AND owner_version = ?2"
    " RETURNING " SQ_NOW;

static int sq_reconcile_later_in(og__sq_conn *c, const char *id,
                                 int64_t owner_version, int64_t delay_us,
                                 const char *reason, const char *actor,
                                 bool *deferred)
{
    sqlite3_stmt *st;
    int64_t at = 0;
    int rc;

    if ((rc = og__sq_stmt(c, og__sq_payout_reconcile_later_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, owner_version);
    sqlite3_bind_int64(st, 3, delay_us);
    if ((rc = og__sq_one_i64(c, st, &at)) <= 0)
        return rc; /* 0: not an Unknown payout attempt at this version */
    if ((rc = og__sq_op_event(c, id, at, "lookup", OG_OP_UNKNOWN,
                              OG_OP_UNKNOWN, owner_version, reason, NULL,
                              actor, NULL, NULL)) < 0)
        return rc;
    *deferred = true;
    return 0;
}

int og__sq_payout_reconcile_later(void *impl, const char *id,
                                  int64_t owner_version, int64_t delay_us,
                                  const char *reason, const char *actor,
                                  bool *deferred)
{
    og__sq_store *s = impl;
    og__sq_conn *c;
    bool d = false;
    int rc;

    if ((rc = og__sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_reconcile_later_in(c, id, owner_version, delay_us, reason, actor,
                               &d);
    rc = og__sq_end(s, c, rc, d);
    if (rc == 0)
        *deferred = d;
    return rc;
}

/* ===========================================================================
 * Late evidence's read and an operator's record step (in a transaction)
 * ========================================================================= */

/* ?1 the operation id. Its row is SQ_OP_COLS (OP_*). */
const char og__sq_payout_attempt_read_sql[] =
    "SELECT " SQ_OP_COLS " FROM operations WHERE operation_id = ?1";

int og__sq_payout_attempt_read(void *impl, void *tx, const char *id,
                               og_operation *out)
{
    og__sq_conn *c = tx;
    og_operation op;
    sqlite3_stmt *st;
    int rc;

    (void)impl;
    if ((rc = og__sq_stmt(c, og__sq_payout_attempt_read_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    if ((rc = og__sq_step(c, st)) == 1 &&
        (rc = og__row_operation(og__sq_row(st), 0, &op)) == 0 &&
        (rc = og__sq_done(c, st)) == 0)
        rc = 1;
    sqlite3_reset(st);
    if (rc == 1)
        *out = op;
    return rc;
}

/* og_op_resolve's statement (exec.c) with the operator's NotApplied guard
 * (Q29): ?1 the operation id, ?2 'Succeeded', 'Failed' or 'NotApplied', ?3
 * reason, ?4 provider reference or NULL. */
static const char sq_payout_operator_record_sql[] =
    "UPDATE operations SET status = ?2, owner_version = owner_version + 1,"
    "   outcome_reason = ?3,"
    "   provider_reference = coalesce(?4, provider_reference),"
    "   updated_at = " SQ_NOW
    " WHERE operation_id = ?1 AND kind = 'payout'"
    "   AND status = 'NeedsReconciliation'"
    "   AND (?2 <> 'NotApplied' OR CASE WHEN final_absence_after IS NOT NULL"
    "        THEN " SQ_NOW " >= final_absence_after"
    "        ELSE " SQ_NOW " > submit_by END)"
    " RETURNING owner_version, updated_at";
enum {
    OPERATOR_RECORD_OWNER_VERSION,
    OPERATOR_RECORD_UPDATED_AT,
    OPERATOR_RECORD_NCOLS
};

int og__sq_payout_operator_record(void *impl, void *tx, const char *id,
                                  og_op_status to, const char *operator_id,
                                  const char *reason, const char *evidence,
                                  const char *provider_reference,
                                  bool *recorded)
{
    og__sq_conn *c = tx;
    sqlite3_stmt *st;
    int64_t version, at;
    int rc;

    (void)impl;
    if ((rc = og__sq_stmt(c, sq_payout_operator_record_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, og_op_status_name(to), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, reason, -1, SQLITE_STATIC);
    og__sq_bind_opt(st, 4, provider_reference);
    if ((rc = og__sq_step(c, st)) <= 0) {
        sqlite3_reset(st);
        return rc; /* 0: not NeedsReconciliation, or NotApplied too early */
    }
    version = sqlite3_column_int64(st, OPERATOR_RECORD_OWNER_VERSION);
    at = sqlite3_column_int64(st, OPERATOR_RECORD_UPDATED_AT);
    if ((rc = og__sq_done(c, st)) < 0)
        return rc;
    if ((rc = og__sq_op_event(c, id, at, "resolved",
                              OG_OP_NEEDS_RECONCILIATION, to, version, reason,
                              provider_reference, operator_id, evidence,
                              NULL)) < 0)
        return rc;
    c->txn_at_us = at; /* the instant the resolution's writes share (Q28) */
    *recorded = true;
    return 0;
}

/* ===========================================================================
 * A return after completion (P8)
 * ========================================================================= */

/* ?1 payout, ?2 provider reference, ?3 actor, ?4 evidence (NULL: none).
 * la: the payout's highest-numbered attempt that has an operation, live or
 * archived, each reached by its binding's grant (the (issuer, grant_id)
 * key; the archive's by operations_archive_payout_grant_idx, migration 13):
 * joins, not a UNION ALL, which SQLite would read whole before joining it.
 * A row only when the entry was written. */
const char og__sq_payout_return_sql[] =
    "INSERT INTO payout_events (payout_id, at, kind, actor, grant_id,"
    "   from_state, to_state, payout_version, reason, evidence)"
    " SELECT p.payout_id, " SQ_NOW ", 'returned', ?3, la.grant_id, 'Paid',"
    "        'Paid', p.version, ?2, ?4"
    " FROM payouts p,"
    "   (SELECT b.grant_id,"
    "           CASE WHEN o.operation_id IS NOT NULL THEN o.status"
    "                ELSE a.status END AS status,"
    "           CASE WHEN o.operation_id IS NOT NULL THEN o.provider_reference"
    "                ELSE a.provider_reference END AS provider_reference"
    "    FROM payout_grants b"
    "    LEFT JOIN operations o ON o.issuer = '" OG_PAYOUT_ISSUER "'"
    "      AND o.grant_id = b.grant_id AND o.kind = 'payout'"
    "    LEFT JOIN operations_archive a ON a.issuer = '" OG_PAYOUT_ISSUER "'"
    "      AND a.grant_id = b.grant_id AND a.kind = 'payout'"
    "    WHERE b.payout_id = ?1"
    "      AND (o.operation_id IS NOT NULL OR a.operation_id IS NOT NULL)"
    "    ORDER BY b.attempt_number DESC LIMIT 1) la"
    " WHERE p.payout_id = ?1 AND p.state = 'Paid'"
    "   AND la.status = 'Succeeded' AND la.provider_reference = ?2"
    " ON CONFLICT DO NOTHING"
    " RETURNING 1";

int og__sq_payout_return(void *impl, const char *payout_id,
                         const char *provider_reference, const char *actor,
                         const char *evidence, bool *recorded)
{
    og__sq_store *s = impl;
    sqlite3_stmt *st;
    og__sq_conn *c;
    int64_t one = 0;
    bool r = false;
    int rc;

    if ((rc = og__sq_begin(s, &c)) < 0)
        return rc;
    if ((rc = og__sq_stmt(c, og__sq_payout_return_sql, &st)) == 0) {
        sqlite3_bind_text(st, 1, payout_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, provider_reference, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, actor, -1, SQLITE_STATIC);
        og__sq_bind_opt(st, 4, evidence);
        if ((rc = og__sq_one_i64(c, st, &one)) == 1) {
            r = true;
            rc = 0;
        }
    }
    rc = og__sq_end(s, c, rc, r);
    if (rc == 0)
        *recorded = r;
    return rc;
}
