/*
 * payout_run.c — what runs a decided payout in the SQLite store (schemas
 * 8-10): the jobs (take, ack, postpone, resubmit), the claim's and the
 * resolution's steps (lib/store/payout_run.c runs each in one transaction,
 * S6), and the payout grants (get, revoke, the expiry batch). The decision
 * that creates them is payout.c.
 *
 * These keep M27, M28 and M32-M35 (lib/store/store_int.h). Every write is
 * ONE BEGIN IMMEDIATE transaction (og__sq_begin/og__sq_end, as Q11)
 * holding its history entries (og__sq_payout_event_add). Besides Q22-Q24
 * (payout.c), how:
 *
 *   Q25 A binding's reservation is released once (M32) by a revocation
 *       (sq_payout_grant_revoke_sql: the grant's row live, ONE conditional
 *       write; then og__sq_payout_release_sql on released_at IS NULL and the
 *       day's counter, in the same transaction) or by an expiry batch (one
 *       BEGIN IMMEDIATE per batch, every statement of it selecting the same
 *       set, SQ_PAYOUT_EXPIRE_PICK, with one clock, as Q21; the marks
 *       last, since the pick reads released_at).
 *   Q26 A job's take (M33, og__sq_payout_job_take_sql) is ONE UPDATE under
 *       the write lock of the oldest available job over
 *       payout_jobs_available_idx.
 *   Q27 The claim's transaction is BEGIN IMMEDIATE: its facts
 *       (og__sq_payout_claim_facts_sql: the binding, its grants row, the
 *       consuming operation, the payout, its tenant, beneficiary and
 *       destination, the clock) are read under the write lock, so no fenced
 *       fact can change before the commit and the consuming operation is
 *       the one committed (M34); the writes (og__sq_payout_claim_grant_sql,
 *       og__sq_payout_claim_payout_sql, og__sq_payout_claim_op_sql and the
 *       "claimed" entry) run at the facts' instant, each re-asserting its
 *       conditions, so one that takes nothing is a defect.
 *   Q28 The resolution's transaction is BEGIN IMMEDIATE: its record step is
 *       og__sq_op_record_in (exec.c: og_op_record's statement and event),
 *       whose instant every write of the resolution shares
 *       (og__sq_conn.txn_at_us); its facts (og__sq_payout_resolve_facts_sql,
 *       each by its key) are read under the write lock (M35); the writes
 *       are og__sq_payout_resolve_payout_sql, then for a terminal outcome
 *       og__sq_payout_release_sql on released_at IS NULL with the day's
 *       counter (og__sq_payout_pay_sql: reserved -> paid, or
 *       og__sq_payout_unreserve_sql), then the "resolved" entry.
 */
#include <string.h>

#include "internal.h"

/* ===========================================================================
 * Jobs (Q26)
 * ========================================================================= */

/* Take: the oldest available job, over payout_jobs_available_idx, ?1 lease.
 * A row only when one was taken. */
const char og__sq_payout_job_take_sql[] =
    "UPDATE payout_jobs SET deliveries = deliveries + 1,"
    "   delivered_at = " SQ_NOW ", available_at = " SQ_NOW " + ?1"
    " WHERE job_id = (SELECT job_id FROM payout_jobs"
    "                 WHERE done_at IS NULL AND available_at <= " SQ_NOW
    "                 ORDER BY available_at, job_id LIMIT 1)"
    " RETURNING job_id, payout_id, grant_id, correlation_id,"
    "   resubmitted_from, deliveries, available_at";
/* Its columns: PAYOUT_JOB_* (rows.h). */

static int sq_payout_job_take_in(og__sq_conn *c, int64_t lease_us,
                                 og_payout_job *out, bool *keep)
{
    sqlite3_stmt *st;
    int rc;

    if ((rc = og__sq_stmt(c, og__sq_payout_job_take_sql, &st)) < 0)
        return rc;
    sqlite3_bind_int64(st, 1, lease_us);
    if ((rc = og__sq_step(c, st)) == 1) {
        if (og__row_payout_job(og__sq_row(st), out) < 0) {
            sqlite3_reset(st);
            return OG_EINTERNAL;
        }
        if ((rc = og__sq_done(c, st)) < 0)
            return rc;
        *keep = true;
        return 1;
    }
    sqlite3_reset(st);
    return rc;
}

int og__sq_payout_job_take(void *impl, int64_t lease_us, og_payout_job *out)
{
    og__sq_store *s = impl;
    og_payout_job j;
    bool keep = false;
    og__sq_conn *c;
    int rc, end;

    if ((rc = og__sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_payout_job_take_in(c, lease_us, &j, &keep);
    if ((end = og__sq_end(s, c, rc < 0 ? rc : 0, keep)) < 0)
        return end; /* a take not known to have committed took nothing */
    if (rc == 1)
        *out = j;
    return rc;
}

/* Ack and postpone: ?1 job, ?2 the delivery held, ?3 delay. */
const char og__sq_payout_job_ack_sql[] =
    "UPDATE payout_jobs SET done_at = " SQ_NOW
    " WHERE job_id = ?1 AND deliveries = ?2 AND done_at IS NULL"
    " RETURNING 1";
static const char sq_payout_job_postpone_sql[] =
    "UPDATE payout_jobs SET available_at = " SQ_NOW " + ?3"
    " WHERE job_id = ?1 AND deliveries = ?2 AND done_at IS NULL"
    " RETURNING 1";

/* Ack (og__sq_payout_job_ack_sql) or postpone (sq_payout_job_postpone_sql, ?3
 * the delay): ONE conditional write on the delivery held. */
static int sq_payout_job_settle(og__sq_store *s, const char *sql,
                                const char *id, int64_t delivery,
                                int64_t delay_us, bool *done)
{
    sqlite3_stmt *st;
    int64_t one = 0;
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_begin(s, &c)) < 0)
        return rc;
    if ((rc = og__sq_stmt(c, sql, &st)) == 0) {
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, delivery);
        if (sql == sq_payout_job_postpone_sql)
            sqlite3_bind_int64(st, 3, delay_us);
        rc = og__sq_one_i64(c, st, &one);
    }
    if ((rc = og__sq_end(s, c, rc < 0 ? rc : 0, rc == 1)) == 0)
        *done = one == 1;
    return rc;
}

int og__sq_payout_job_ack(void *impl, const char *id, int64_t delivery,
                          bool *acked)
{
    return sq_payout_job_settle(impl, og__sq_payout_job_ack_sql, id,
                                delivery, 0, acked);
}

int og__sq_payout_job_postpone(void *impl, const char *id, int64_t delivery,
                               int64_t delay_us, bool *postponed)
{
    return sq_payout_job_settle(impl, sq_payout_job_postpone_sql, id,
                                delivery, delay_us, postponed);
}

/* ===========================================================================
 * The claim (Q27)
 * ========================================================================= */

/* The claim's facts: ?1 grant. The binding and its grants row, the
 * operation that consumed it, the payout, its tenant, beneficiary and
 * destination (never the token), the store's clock: under the write lock,
 * none of it changes before the commit. */
const char og__sq_payout_claim_facts_sql[] =
    "SELECT b.payout_id, b.audience, b.executable_payout_version,"
    "       b.attempt_number, b.not_before, g.expires_at,"
    "       g.consumed_at IS NOT NULL, g.consumed_by_operation,"
    "       g.revoked_at IS NOT NULL,"
    "       (o.operation_id IS NOT NULL OR a.operation_id IS NOT NULL),"
    "       coalesce(o.kind, a.kind) = 'payout',"
    "       coalesce(o.client_reference, a.client_reference,"
    "                o.operation_id, a.operation_id),"
    "       p.state, p.version, p.active_attempt IS NOT NULL, p.amount,"
    "       p.currency, p.destination_id, t.payouts_suspended,"
    "       t.settings_version, bn.status, bn.version, d.version,"
    "       r.current_version, " SQ_NOW
    " FROM payout_grants b"
    " JOIN grants g ON g.issuer = b.issuer AND g.grant_id = b.grant_id"
    " JOIN payouts p ON p.payout_id = b.payout_id"
    " JOIN payout_policy_releases r ON r.operation = '" OG_PAYOUT_OPERATION "'"
    " JOIN tenants t ON t.tenant_id = p.tenant_id"
    " JOIN beneficiaries bn ON bn.beneficiary_id = p.beneficiary_id"
    " JOIN destinations d ON d.destination_id = p.destination_id"
    " LEFT JOIN operations o ON o.operation_id = g.consumed_by_operation"
    " LEFT JOIN operations_archive a"
    "   ON a.operation_id = g.consumed_by_operation"
    " WHERE b.grant_id = ?1";
/* Its columns: CLAIM_FACTS_* (rows.h). */

/* The claim's facts of grant_id (found: a payout grant), under the write
 * lock (Q1, Q27): none of it changes before the commit. */
int og__sq_payout_claim_facts(void *impl, void *tx, const char *grant_id,
                              og__payout_claim_facts *out)
{
    og__sq_conn *c = tx;
    og__payout_claim_facts f;
    sqlite3_stmt *st;
    int rc;

    (void)impl;
    memset(&f, 0, sizeof f);
    if ((rc = og__sq_stmt(c, og__sq_payout_claim_facts_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, grant_id, -1, SQLITE_STATIC);
    if ((rc = og__sq_step(c, st)) == 1 &&
        (rc = og__row_claim_facts(og__sq_row(st), &f)) == 0)
        rc = og__sq_done(c, st);
    sqlite3_reset(st);
    if (rc == 0) /* 0 rows: not a payout grant */
        *out = f;
    return rc;
}

/* The claim's writes, each conditional as if nothing had been read:
 * ?1 grant, ?2 operation, ?3 now, ?4 the policy release the claim fenced.
 * The grant's window has no leeway: not_before <= now < expires_at on the
 * store's clock, the same for every claimer (docs/payouts.md, section 5). */
const char og__sq_payout_claim_grant_sql[] =
    "UPDATE grants SET consumed_at = ?3, consumed_by_operation = ?2"
    " WHERE issuer = '" OG_PAYOUT_ISSUER "' AND grant_id = ?1"
    "   AND consumed_at IS NULL AND revoked_at IS NULL"
    "   AND expires_at > ?3"
    "   AND EXISTS (SELECT 1 FROM payout_grants b"
    "               WHERE b.grant_id = ?1 AND b.not_before <= ?3)"
    "   AND EXISTS (SELECT 1 FROM payout_policy_releases r"
    "               WHERE r.operation = '" OG_PAYOUT_OPERATION "'"
    "                 AND r.current_version = ?4)"
    " RETURNING 1";
/* ?1 payout, ?2 its executable version, ?3 operation, ?4 now. */
const char og__sq_payout_claim_payout_sql[] =
    "UPDATE payouts SET state = 'Executing', version = version + 1,"
    "   active_attempt = ?3, updated_at = ?4"
    " WHERE payout_id = ?1 AND version = ?2 AND state = 'Approved'"
    "   AND active_attempt IS NULL"
    " RETURNING version";
/* The attempt: ?1 operation, ?2 grant, ?3 worker, ?4 destination,
 * ?5 amount, ?6 currency, ?7 now, ?8 lease, ?9 send window, ?10 key,
 * ?11 reference, ?12 final-absence margin (NULL: "not found" is never
 * final, and NULL + anything stays NULL). Its row is SQ_OP_COLS (OP_*). */
const char og__sq_payout_claim_op_sql[] =
    "INSERT INTO operations (" SQ_OP_INSERT_COLS ", kind, idempotency_key,"
    "   client_reference, final_absence_after)"
    " VALUES (?1, '" OG_PAYOUT_ISSUER "', ?2, ?3, ?4, ?5, ?6, 'Admitted', "
    SQ_STR(OG__INITIAL_OWNER_VERSION) ", ?7 + ?8, ?7 + ?9, ?7, 'payout',"
    "         ?10, ?11, ?7 + ?9 + ?12)"
    " RETURNING " SQ_OP_COLS;

/* The claim's writes, at the facts' instant. Each re-asserts its
 * conditions; under the write lock they hold, so a write that takes
 * nothing is a defect (rolled back). */
int og__sq_payout_claim_write(void *impl, void *tx,
                              const og__payout_claim_req *r,
                              const og__payout_claim_facts *f,
                              const og__payout_claim_plan *p,
                              og_operation *attempt)
{
    og__sq_conn *c = tx;
    og_operation op;
    sqlite3_stmt *st;
    int64_t v = 0;
    int rc;

    (void)impl;
    if ((rc = og__sq_stmt(c, og__sq_payout_claim_grant_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, r->grant_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->operation_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, f->now_us);
    sqlite3_bind_text(st, 4, r->policy_version, -1, SQLITE_STATIC);
    if ((rc = og__sq_one_i64(c, st, &v)) != 1)
        return rc < 0 ? rc : OG_EINTERNAL;
    if ((rc = og__sq_stmt(c, og__sq_payout_claim_payout_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, f->payout_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, f->executable_version);
    sqlite3_bind_text(st, 3, r->operation_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, f->now_us);
    if ((rc = og__sq_one_i64(c, st, &v)) != 1 || v != p->new_version)
        return rc < 0 ? rc : OG_EINTERNAL;
    if ((rc = og__sq_stmt(c, og__sq_payout_claim_op_sql, &st)) < 0)
        return rc;
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
    if (r->final_absence_margin_us >= 0)
        sqlite3_bind_int64(st, 12, r->final_absence_margin_us);
    else
        sqlite3_bind_null(st, 12);
    if ((rc = og__sq_step(c, st)) == 1)
        rc = og__row_operation(og__sq_row(st), 0, &op);
    else if (rc == 0)
        rc = OG_EINTERNAL; /* VALUES always inserts or fails */
    if (rc < 0) {
        sqlite3_reset(st);
        return rc;
    }
    if ((rc = og__sq_done(c, st)) < 0)
        return rc;
    rc = og__sq_payout_event_add(c, &(og__sq_payout_event){
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
    if (rc == 0)
        *attempt = op;
    return rc;
}

/* ===========================================================================
 * A binding's reservation, released once (Q25)
 * ========================================================================= */

/* Releases one binding's reservation, once: ?1 grant, ?2 now, ?3 cause. */
const char og__sq_payout_release_sql[] =
    "UPDATE payout_grants SET released_at = ?2, release_cause = ?3"
    " WHERE grant_id = ?1 AND released_at IS NULL"
    " RETURNING payout_id, tenant_id, release_day, amount";
enum {
    PAYOUT_RELEASE_PAYOUT_ID,
    PAYOUT_RELEASE_TENANT_ID,
    PAYOUT_RELEASE_DAY,
    PAYOUT_RELEASE_AMOUNT,
    PAYOUT_RELEASE_NCOLS
};
/* The day's counters: ?1 tenant, ?2 day, ?3 amount; reserved -> paid (a
 * Succeeded attempt's), or reserved released. */
const char og__sq_payout_pay_sql[] =
    "UPDATE tenant_days SET reserved = reserved - ?3, paid = paid + ?3,"
    "   version = version + 1"
    " WHERE tenant_id = ?1 AND day = ?2 RETURNING reserved";
const char og__sq_payout_unreserve_sql[] =
    "UPDATE tenant_days SET reserved = reserved - ?3, version = version + 1"
    " WHERE tenant_id = ?1 AND day = ?2 RETURNING reserved";

/* Marks grant_id's binding released at `at` for `cause` — only where it is
 * not yet (Q25) — and moves its amount off the day's reserved counter
 * (onto paid when `paid`). 1 and the amount and day, 0 when it was
 * released before (nothing written), or an error. */
static int sq_settle(og__sq_conn *c, const char *grant_id, int64_t at,
                     const char *cause, bool paid, char *payout,
                     int64_t *amount, char day[OG_PAYOUT_DAY_LEN + 1])
{
    char tenant[OG_ID_MAX + 1];
    sqlite3_stmt *st;
    int64_t left;
    int rc;

    if ((rc = og__sq_stmt(c, og__sq_payout_release_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, grant_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, at);
    sqlite3_bind_text(st, 3, cause, -1, SQLITE_STATIC);
    if ((rc = og__sq_step(c, st)) != 1) {
        sqlite3_reset(st);
        return rc; /* 0: released before, once is all */
    }
    *amount = sqlite3_column_int64(st, PAYOUT_RELEASE_AMOUNT);
    if (og__sq_text(st, PAYOUT_RELEASE_PAYOUT_ID, payout, OG_ID_MAX + 1) < 0 ||
        og__sq_text(st, PAYOUT_RELEASE_TENANT_ID, tenant, sizeof tenant) < 0 ||
        og__sq_text(st, PAYOUT_RELEASE_DAY, day, OG_PAYOUT_DAY_LEN + 1) < 0) {
        sqlite3_reset(st);
        return OG_EINTERNAL;
    }
    if ((rc = og__sq_done(c, st)) < 0)
        return rc;
    if ((rc = og__sq_stmt(c,
                          paid ? og__sq_payout_pay_sql
                               : og__sq_payout_unreserve_sql,
                          &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, day, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, *amount);
    if ((rc = og__sq_one_i64(c, st, &left)) != 1)
        return rc < 0 ? rc : OG_EINTERNAL; /* the binding's day row exists */
    return 1;
}

/* Releases grant_id's reservation once (Q25), at `at`, for `cause`, with
 * its history entry; nothing when it was released before. */
static int sq_release(og__sq_conn *c, const char *grant_id, int64_t at,
                      const char *cause, const char *actor)
{
    char payout[OG_ID_MAX + 1], day[OG_PAYOUT_DAY_LEN + 1];
    int64_t amount = 0;
    int rc;

    if ((rc = sq_settle(c, grant_id, at, cause, false, payout, &amount,
                        day)) <= 0)
        return rc;
    {
        og__sq_payout_event ev = {.payout_id = payout, .at = at,
                                  .kind = "reservation-released",
                                  .actor = actor, .grant_id = grant_id,
                                  .amount = amount, .release_day = day,
                                  .reason = cause};
        return og__sq_payout_event_add(c, &ev);
    }
}

/* ===========================================================================
 * The resolution (Q28)
 * ========================================================================= */

/* The outcome: og_op_record's own write (exec.c), under the write lock;
 * its instant is the one the resolution's writes share (c->txn_at_us). */
int og__sq_payout_resolve_record(void *impl, void *tx, const char *id,
                                 unsigned expected, int64_t owner_version,
                                 const og_op_outcome *o, const char *source,
                                 bool *recorded)
{
    og__sq_conn *c = tx;

    (void)impl;
    return og__sq_op_record_in(c, id, expected, owner_version, o, source,
                               recorded, &c->txn_at_us);
}

/* The resolution's facts: ?1 the attempt. Its binding, through the
 * operation's grant (each by its key), and the payout. */
const char og__sq_payout_resolve_facts_sql[] =
    "SELECT b.payout_id, b.grant_id, b.release_day, b.amount,"
    "       b.released_at IS NOT NULL, p.state, p.version,"
    "       coalesce(p.active_attempt = o.operation_id, 0)"
    " FROM operations o"
    " JOIN payout_grants b ON b.grant_id = o.grant_id"
    " JOIN payouts p ON p.payout_id = b.payout_id"
    " WHERE o.operation_id = ?1 AND o.kind = 'payout'"
    "   AND o.issuer = '" OG_PAYOUT_ISSUER "'";
/* Its columns: RESOLVE_FACTS_* (rows.h). */

int og__sq_payout_resolve_facts(void *impl, void *tx, const char *id,
                                og__payout_resolve_facts *out)
{
    og__sq_conn *c = tx;
    og__payout_resolve_facts f;
    sqlite3_stmt *st;
    int rc;

    (void)impl;
    memset(&f, 0, sizeof f);
    if ((rc = og__sq_stmt(c, og__sq_payout_resolve_facts_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    if ((rc = og__sq_step(c, st)) == 1 &&
        (rc = og__row_resolve_facts(og__sq_row(st), &f)) == 0)
        rc = og__sq_done(c, st);
    sqlite3_reset(st);
    if (rc == 0) /* 0 rows: not a payout attempt with a binding */
        *out = f;
    return rc;
}

/* ?1 payout, ?2 version read, ?3 the attempt, ?4 new state, ?5 1: clear
 * the active attempt, ?6 now. */
const char og__sq_payout_resolve_payout_sql[] =
    "UPDATE payouts SET state = ?4, version = version + 1,"
    "   active_attempt = CASE WHEN ?5 THEN NULL ELSE active_attempt END,"
    "   updated_at = ?6"
    " WHERE payout_id = ?1 AND version = ?2 AND active_attempt = ?3"
    "   AND state IN ('Executing', 'Unknown')"
    " RETURNING version";

/* RESOLVED's writes, at the outcome's instant; each conditional on what
 * was read under the write lock, so one that takes nothing is a defect. */
int og__sq_payout_resolve_write(void *impl, void *tx, const char *id,
                                const og_op_outcome *o,
                                const og__payout_resolve_facts *f,
                                const og__payout_resolve_plan *p)
{
    og__sq_conn *c = tx;
    int64_t at = c->txn_at_us, v = 0, amount = 0;
    char payout[OG_ID_MAX + 1], day[OG_PAYOUT_DAY_LEN + 1] = "";
    sqlite3_stmt *st;
    int rc;

    (void)impl;
    /* The payout, conditional on what was read. */
    if ((rc = og__sq_stmt(c, og__sq_payout_resolve_payout_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, f->payout_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, f->payout_version);
    sqlite3_bind_text(st, 3, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, p->to_state, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 5, p->clear_attempt ? 1 : 0);
    sqlite3_bind_int64(st, 6, at);
    if ((rc = og__sq_one_i64(c, st, &v)) != 1 || v != p->new_version)
        return rc < 0 ? rc : OG_EINTERNAL;
    /* The reservation, once, with the attempt's end. */
    if (p->release_cause) {
        rc = sq_settle(c, f->grant_id, at, p->release_cause,
                       p->reservation == OG_PAYOUT_RESERVATION_PAID, payout,
                       &amount, day);
        if (rc != 1)
            return rc < 0 ? rc : OG_EINTERNAL; /* read unreleased: a defect */
    }
    /* The history. */
    {
        og__sq_payout_event ev = {.payout_id = f->payout_id, .at = at,
                                  .kind = "resolved", .actor = o->actor,
                                  .grant_id = f->grant_id,
                                  .from_state = p->from_state,
                                  .to_state = p->to_state,
                                  .payout_version = p->new_version,
                                  .amount = amount,
                                  .release_day = p->release_cause ? day : NULL,
                                  .reason = og_op_status_name(o->status)};
        return og__sq_payout_event_add(c, &ev);
    }
}

/* ===========================================================================
 * Resubmission (Q26)
 * ========================================================================= */

/* ?1 the job copied, ?2 the new id. */
static const char sq_payout_job_resubmit_sql[] =
    "INSERT INTO payout_jobs (job_id, payout_id, grant_id, correlation_id,"
    "   resubmitted_from, created_at, available_at, deliveries)"
    " SELECT ?2, j.payout_id, j.grant_id, j.correlation_id, j.job_id,"
    "        t.now, t.now, 0"
    " FROM payout_jobs j, (SELECT " SQ_NOW " AS now) t WHERE j.job_id = ?1"
    " ON CONFLICT (job_id) DO NOTHING"
    " RETURNING payout_id, grant_id, correlation_id, created_at";
/* ?1 the job copied: does it exist (nothing written with it: a job with
 * the new id exists already). */
static const char sq_payout_job_exists_sql[] =
    "SELECT count(*) FROM payout_jobs WHERE job_id = ?1";
enum {
    RESUBMIT_PAYOUT_ID,
    RESUBMIT_GRANT_ID,
    RESUBMIT_CORRELATION_ID,
    RESUBMIT_CREATED_AT,
    RESUBMIT_NCOLS
};

static int sq_payout_job_resubmit_in(og__sq_conn *c, const char *id,
                                     const char *actor, const char *new_id,
                                     bool *keep)
{
    char payout[OG_ID_MAX + 1], grant[OG_ID_MAX + 1], corr[OG_ID_MAX + 1];
    sqlite3_stmt *st;
    int64_t at;
    int rc;

    if ((rc = og__sq_stmt(c, sq_payout_job_resubmit_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, new_id, -1, SQLITE_STATIC);
    if ((rc = og__sq_step(c, st)) != 1) {
        sqlite3_reset(st);
        if (rc != 0)
            return rc;
        /* nothing written: no such job (0), or the new id taken (2) */
        if ((rc = og__sq_stmt(c, sq_payout_job_exists_sql, &st)) < 0)
            return rc;
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        if ((rc = og__sq_step(c, st)) != 1) {
            sqlite3_reset(st);
            return rc < 0 ? rc : OG_EINTERNAL;
        }
        at = sqlite3_column_int64(st, 0);
        if ((rc = og__sq_done(c, st)) < 0)
            return rc;
        return at > 0 ? 2 : 0;
    }
    at = sqlite3_column_int64(st, RESUBMIT_CREATED_AT);
    if (og__sq_text(st, RESUBMIT_PAYOUT_ID, payout, sizeof payout) < 0 ||
        og__sq_text(st, RESUBMIT_GRANT_ID, grant, sizeof grant) < 0 ||
        og__sq_text(st, RESUBMIT_CORRELATION_ID, corr, sizeof corr) < 0) {
        sqlite3_reset(st);
        return OG_EINTERNAL;
    }
    if ((rc = og__sq_done(c, st)) < 0)
        return rc;
    {
        og__sq_payout_event ev = {.payout_id = payout, .at = at,
                                  .kind = "job-resubmitted", .actor = actor,
                                  .correlation_id = corr, .grant_id = grant,
                                  .job_id = new_id};
        if ((rc = og__sq_payout_event_add(c, &ev)) < 0)
            return rc;
    }
    *keep = true;
    return 1;
}

int og__sq_payout_job_resubmit(void *impl, const char *id, const char *actor,
                               const char *new_id)
{
    og__sq_store *s = impl;
    bool keep = false;
    og__sq_conn *c;
    int rc, end;

    if ((rc = og__sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_payout_job_resubmit_in(c, id, actor, new_id, &keep);
    if ((end = og__sq_end(s, c, rc < 0 ? rc : 0, keep)) < 0)
        return end;
    return rc;
}

/* ===========================================================================
 * Payout grants (Q25)
 * ========================================================================= */

/* A payout grant and its row, with the clock its state is derived at:
 * ?1 grant. */
static const char sq_payout_grant_get_sql[] =
    "SELECT b.grant_id, b.decision_id, b.payout_id, b.tenant_id,"
    "       b.operation, b.audience, b.terms_fingerprint, b.policy_version,"
    "       b.executable_payout_version, b.attempt_number, b.amount,"
    "       b.release_day, b.not_before, g.expires_at, b.created_at,"
    "       g.consumed_at, g.consumed_by_operation, g.revoked_at,"
    "       b.released_at, " SQ_NOW
    " FROM payout_grants b"
    " JOIN grants g ON g.issuer = b.issuer AND g.grant_id = b.grant_id"
    " WHERE b.grant_id = ?1";
/* Its columns: PAYOUT_GRANT_* (rows.h). */

static int sq_payout_grant_row(og__sq_store *s, sqlite3_stmt *st, void *out)
{
    (void)s;
    return og__row_payout_grant(og__sq_row(st), out);
}

int og__sq_payout_grant_get(void *impl, const char *grant_id,
                            og_payout_grant_view *out)
{
    return og__sq_read_row(impl, sq_payout_grant_get_sql, grant_id, 0,
                           sq_payout_grant_row, out);
}

/* A finance hold: ?1 grant. Its payout (is it a payout grant?), then the
 * grant's row, live: ONE conditional write (Q25). */
static const char sq_payout_grant_payout_sql[] =
    "SELECT payout_id FROM payout_grants WHERE grant_id = ?1";
enum { GRANT_PAYOUT_PAYOUT_ID, GRANT_PAYOUT_NCOLS };
static const char sq_payout_grant_revoke_sql[] =
    "UPDATE grants SET revoked_at = " SQ_NOW
    " WHERE issuer = '" OG_PAYOUT_ISSUER "' AND grant_id = ?1"
    "   AND consumed_at IS NULL AND revoked_at IS NULL"
    "   AND EXISTS (SELECT 1 FROM payout_grants b WHERE b.grant_id = ?1)"
    " RETURNING revoked_at";

static int sq_payout_grant_revoke_in(og__sq_conn *c, const char *grant_id,
                                     const char *actor,
                                     og__payout_revoke_report *out)
{
    char payout[OG_ID_MAX + 1];
    sqlite3_stmt *st;
    int64_t at = 0;
    int rc;

    if ((rc = og__sq_stmt(c, sq_payout_grant_payout_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, grant_id, -1, SQLITE_STATIC);
    if ((rc = og__sq_step(c, st)) == 1)
        rc = og__sq_text(st, GRANT_PAYOUT_PAYOUT_ID, payout, sizeof payout) < 0
                 ? OG_EINTERNAL
                 : 1;
    sqlite3_reset(st);
    if (rc <= 0)
        return rc; /* 0: not a payout grant */
    out->payout_grant = true;
    /* The grant's row, live: ONE conditional write (Q25). */
    if ((rc = og__sq_stmt(c, sq_payout_grant_revoke_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, grant_id, -1, SQLITE_STATIC);
    if ((rc = og__sq_one_i64(c, st, &at)) <= 0)
        return rc; /* 0: consumed or revoked already */
    {
        og__sq_payout_event ev = {.payout_id = payout, .at = at,
                                  .kind = "grant-revoked", .actor = actor,
                                  .grant_id = grant_id};
        if ((rc = og__sq_payout_event_add(c, &ev)) < 0)
            return rc;
    }
    /* Unconsumed: its reservation goes with it, unless an expiry released
     * it already. */
    if ((rc = sq_release(c, grant_id, at, "revoked", actor)) < 0)
        return rc;
    out->revoked = true;
    return 0;
}

int og__sq_payout_grant_revoke(void *impl, const char *grant_id,
                               const char *actor,
                               og__payout_revoke_report *out)
{
    og__sq_store *s = impl;
    og__payout_revoke_report rep = {false, false};
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_payout_grant_revoke_in(c, grant_id, actor, &rep);
    if ((rc = og__sq_end(s, c, rc, rep.revoked)) == 0)
        *out = rep;
    return rc;
}

/* The unreleased, unconsumed payout grants past ?1 (= now - cleanup margin,
 * read once: no admission leeway, PP7), from the cursor ?3, oldest expiry first, at most ?2:
 * one expiry batch (Q25). Every statement of the batch selects this one
 * set (the write lock holds it still); INDEXED BY: the janitor's scan. */
#define SQ_PAYOUT_EXPIRE_PICK                                                  \
    "SELECT b.grant_id FROM payout_grants b"                                   \
    "   INDEXED BY payout_grants_unreleased_idx"                               \
    " JOIN grants g ON g.issuer = b.issuer AND g.grant_id = b.grant_id"        \
    " WHERE b.released_at IS NULL AND g.consumed_at IS NULL"                   \
    "   AND b.expires_at >= ?3 AND b.expires_at < ?1"                          \
    " ORDER BY b.expires_at, b.grant_id LIMIT ?2"

/* One expiry batch (Q25): ?1 now - cleanup margin, ?2 batch, ?3 cursor,
 * ?4 now. First the batch's size and greatest expiry (the next cursor),
 * then its reservations, history and marks; the marks last, since the pick
 * reads released_at. */
static const char sq_payout_expire_cursor_sql[] =
    "SELECT count(*), max(expires_at) FROM payout_grants"
    " WHERE grant_id IN (" SQ_PAYOUT_EXPIRE_PICK ")";
enum { EXPIRE_PICKED, EXPIRE_CURSOR, EXPIRE_NCOLS };
const char og__sq_payout_expire_days_sql[] =
    "UPDATE tenant_days SET reserved = reserved - s.amount,"
    "   version = version + 1"
    " FROM (SELECT tenant_id, release_day, sum(amount) AS amount"
    "       FROM payout_grants WHERE grant_id IN (" SQ_PAYOUT_EXPIRE_PICK ")"
    "       GROUP BY tenant_id, release_day) s"
    " WHERE tenant_days.tenant_id = s.tenant_id"
    "   AND tenant_days.day = s.release_day";
const char og__sq_payout_expire_events_sql[] =
    "INSERT INTO payout_events (payout_id, at, kind, actor, grant_id,"
    "   amount, release_day, reason)"
    " SELECT payout_id, ?4, 'reservation-released', 'janitor', grant_id,"
    "        amount, release_day, 'expired'"
    " FROM payout_grants WHERE grant_id IN (" SQ_PAYOUT_EXPIRE_PICK ")";
const char og__sq_payout_expire_mark_sql[] =
    "UPDATE payout_grants SET released_at = ?4, release_cause = 'expired'"
    " WHERE grant_id IN (" SQ_PAYOUT_EXPIRE_PICK ")";

/* One expiry batch's fixed parameters (Q25), as the archive's (Q21). */
typedef struct sq_expire_args {
    int64_t cutoff; /* ?1: now - cleanup margin (PP7) */
    int batch;      /* ?2 */
    int64_t from;   /* ?3: the pass's keyset cursor */
    int64_t now;    /* ?4: released_at, the history's time */
} sq_expire_args;

/* Binds the batch a to statement st (?4 when it has it). */
static void sq_expire_bind(sqlite3_stmt *st, const sq_expire_args *a)
{
    sqlite3_bind_int64(st, 1, a->cutoff);
    sqlite3_bind_int(st, 2, a->batch);
    sqlite3_bind_int64(st, 3, a->from);
    if (sqlite3_bind_parameter_count(st) >= 4)
        sqlite3_bind_int64(st, 4, a->now);
}

/* Runs the batch a's write sql. */
static int sq_expire_step(og__sq_conn *c, const char *sql,
                          const sq_expire_args *a)
{
    sqlite3_stmt *st;
    int rc;

    if ((rc = og__sq_stmt(c, sql, &st)) < 0)
        return rc;
    sq_expire_bind(st, a);
    return og__sq_done(c, st);
}

/* The batch a's size into *count and its greatest expiry into *last (left
 * as it is when the batch is empty). */
static int sq_expire_cursor(og__sq_conn *c, const sq_expire_args *a,
                            int64_t *count, int64_t *last)
{
    sqlite3_stmt *st;
    int rc;

    if ((rc = og__sq_stmt(c, sq_payout_expire_cursor_sql, &st)) < 0)
        return rc;
    sq_expire_bind(st, a);
    if ((rc = og__sq_step(c, st)) == 1) {
        *count = sqlite3_column_int64(st, EXPIRE_PICKED);
        if (sqlite3_column_type(st, EXPIRE_CURSOR) != SQLITE_NULL)
            *last = sqlite3_column_int64(st, EXPIRE_CURSOR);
    }
    sqlite3_reset(st);
    return rc < 0 ? rc : rc == 1 ? 0 : OG_EINTERNAL;
}

static int sq_payout_expire_in(og__sq_store *s, og__sq_conn *c, int batch,
                               int64_t *from_us, int64_t *taken, bool *keep)
{
    const og_timings *t = &s->opts.timings;
    sq_expire_args a = {0, batch, *from_us, 0};
    int64_t count = 0, last = *from_us, marked;
    int rc;

    /* One clock for the whole batch: every statement picks the same set. */
    if ((rc = og__sq_clock(c, &a.now)) < 0)
        return rc;
    a.cutoff = a.now - t->cleanup_margin_us;
    if ((rc = sq_expire_cursor(c, &a, &count, &last)) < 0)
        return rc;
    if (count == 0) {
        *taken = 0;
        return 0;
    }
    if ((rc = sq_expire_step(c, og__sq_payout_expire_days_sql, &a)) < 0 ||
        (rc = sq_expire_step(c, og__sq_payout_expire_events_sql, &a)) < 0 ||
        (rc = sq_expire_step(c, og__sq_payout_expire_mark_sql, &a)) < 0)
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
    og__sq_store *s = impl;
    int64_t from = *from_us, n = 0;
    bool keep = false;
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_payout_expire_in(s, c, batch, &from, &n, &keep);
    if ((rc = og__sq_end(s, c, rc, keep)) == 0) {
        *taken = n;
        *from_us = from;
    }
    return rc;
}

/* ===========================================================================
 * Operators' statistics (og_payout_stats_read)
 * ========================================================================= */

/* ONE statement, so one WAL snapshot (the parts add up): first the totals
 * row (tenant NULL) — held reservations over the unreleased bindings (the
 * janitor's partial index), and of their grants the unconsumed, unrevoked
 * ones by window on SQLite's clock, read once — then the ?1 largest
 * holders by tenant. */
static const char sq_payout_stats_sql[] =
    "WITH t AS MATERIALIZED (SELECT " SQ_NOW " AS now)"
    " SELECT NULL, count(*), coalesce(sum(b.amount), 0),"
    "   coalesce(sum(g.consumed_at IS NULL AND g.revoked_at IS NULL"
    "                AND t.now < b.not_before), 0),"
    "   coalesce(sum(g.consumed_at IS NULL AND g.revoked_at IS NULL"
    "                AND b.not_before <= t.now AND t.now < g.expires_at), 0),"
    "   coalesce(sum(g.consumed_at IS NULL AND g.revoked_at IS NULL"
    "                AND g.expires_at <= t.now), 0)"
    " FROM t, payout_grants b INDEXED BY payout_grants_unreleased_idx"
    " JOIN grants g ON g.issuer = b.issuer AND g.grant_id = b.grant_id"
    " WHERE b.released_at IS NULL"
    " UNION ALL"
    " SELECT * FROM (SELECT tenant_id, count(*), sum(amount), 0, 0, 0"
    "   FROM payout_grants INDEXED BY payout_grants_unreleased_idx"
    "   WHERE released_at IS NULL"
    "   GROUP BY tenant_id ORDER BY 3 DESC, 1 LIMIT ?1)";
enum {
    STATS_TENANT,
    STATS_RESERVATIONS,
    STATS_AMOUNT,
    STATS_PENDING,
    STATS_OPEN,
    STATS_EXPIRED,
    STATS_NCOLS
};

int og__sq_payout_stats(void *impl, og_payout_stats *out)
{
    og__sq_store *s = impl;
    bool totals = false;
    sqlite3_stmt *st;
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_acquire(s, &c)) < 0)
        return rc;
    if ((rc = og__sq_stmt(c, sq_payout_stats_sql, &st)) < 0)
        goto out;
    sqlite3_bind_int(st, 1, OG_PAYOUT_STATS_TENANTS);
    while ((rc = og__sq_step(c, st)) == 1) {
        og_payout_stats_held h = {sqlite3_column_int64(st, STATS_RESERVATIONS),
                                  sqlite3_column_int64(st, STATS_AMOUNT)};

        if (sqlite3_column_type(st, STATS_TENANT) == SQLITE_NULL) {
            out->total = h;
            out->grants_pending = sqlite3_column_int64(st, STATS_PENDING);
            out->grants_open = sqlite3_column_int64(st, STATS_OPEN);
            out->grants_expired = sqlite3_column_int64(st, STATS_EXPIRED);
            totals = true;
        } else if (out->n_tenants < OG_PAYOUT_STATS_TENANTS &&
                   og__sq_text(st, STATS_TENANT,
                               out->tenants[out->n_tenants].tenant_id,
                               sizeof out->tenants[0].tenant_id) == 0) {
            out->tenants[out->n_tenants++].held = h;
        } else {
            rc = OG_EINTERNAL;
            break;
        }
    }
    sqlite3_reset(st);
    if (rc == 0 && !totals)
        rc = OG_EINTERNAL; /* an aggregate always yields its row */
out:
    og__sq_release(s, c, false);
    return rc;
}
