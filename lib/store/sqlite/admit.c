/*
 * admit.c — the SQLite store's admission: the family's state, the claim,
 * the operation insert and, when the claim took nothing, the follow-up read
 * and its classification; the group commit that runs queued admissions in
 * one transaction; and og_operation_get. The claim and the reads of what
 * holds a key serve the consume verdict and revocation too (grants.c).
 *
 * The admission keeps M8-M11 (lib/store/store_int.h). SQLite has no
 * data-modifying CTEs, so it is ONE write transaction (BEGIN IMMEDIATE …
 * COMMIT) holding the claim and the operation insert. The claim is the
 * insert into grant_consumptions (token form) or the conditional UPDATE of
 * the grant's row (row form). Besides Q1, Q2, Q4, Q5 and Q6 (internal.h):
 *
 *   Q8  The claim and the operation insert commit together or not at all
 *       (M8): a unique violation on operations rolls the claim back
 *       (REFUSED, M5); the follow-up read of a claim that took nothing runs
 *       in the same transaction and only reports (M9).
 *   Q9  The deadline is checked in the claim itself against SQLite's clock
 *       (M6: 'now' is fixed for the duration of one sqlite3_step, like
 *       statement_timestamp()); lease_until, submit_by and created_at come
 *       from a later 'now', when the operation row is written (like
 *       clock_timestamp()).
 *   Q10 An archived operation still answers for its id (M10): the claim
 *       requires that operations_archive does not hold the request's
 *       operation id, and the follow-up read finds the operation in
 *       operations, else in operations_archive. Exact here: the write lock
 *       orders the archive (retention.c) and the admission.
 *
 * and the group commit's G1-G7 ("Group commit" below).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "store/batcher.h"

/* ===========================================================================
 * Families (Q5)
 * ========================================================================= */

/* ?1 issuer, ?2 family. */
const char og__sq_family_state_sql[] =
    "SELECT revoked_at IS NULL FROM families"
    " WHERE issuer = ?1 AND family = ?2";
enum { FAMILY_STATE_LIVE, FAMILY_STATE_NCOLS };

int og__sq_family_state(og__sq_conn *c, const char *issuer,
                        const char *family, og__sq_family *state)
{
    sqlite3_stmt *st;
    int rc;

    if (!family[0]) {
        *state = SQ_FAM_UNNAMED;
        return 0;
    }
    if ((rc = og__sq_stmt(c, og__sq_family_state_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, family, -1, SQLITE_STATIC);
    if ((rc = og__sq_step(c, st)) == 1)
        *state = sqlite3_column_int(st, FAMILY_STATE_LIVE) ? SQ_FAM_LIVE
                                                           : SQ_FAM_REVOKED;
    else if (rc == 0)
        *state = SQ_FAM_MISSING;
    sqlite3_reset(st);
    return rc < 0 ? rc : 0;
}

/* ===========================================================================
 * The claim (Q9, Q10)
 * ========================================================================= */

/* The claim's condition that an archived operation keeps its id (Q10); ?3
 * is the operation id (NULL for the consume verdict: no row matches). */
#define SQ_OP_ID_NOT_ARCHIVED                                                 \
    "NOT EXISTS (SELECT 1 FROM operations_archive a"                          \
    " WHERE a.operation_id = ?3)"

/* The claim, token form: ?1 issuer, ?2 grant id, ?3 operation id (NULL for
 * the consume verdict), ?4 expires_at, ?5 leeway, ?6 kind. Returns a row
 * only when this statement took the key. Both instances, as the row form's
 * claim, leave an archived operation's id alone (Q10). */
#define SQ_CLAIM_SQL(K)                                                        \
    SQ_CLAIM_INTO(K, "?1", "?2") "?3, " SQ_NOW ", ?4 + ?5, ?6"                 \
    " WHERE ?4 + ?5 > " SQ_NOW " AND " SQ_OP_ID_NOT_ARCHIVED                   \
    SQ_CLAIM_END(K)
const char og__sq_claim_sql[] = SQ_CLAIM_SQL(READABLE);
const char og__sq_claim_hashed_sql[] = SQ_CLAIM_SQL(HASHED);

/* The claim, row form: ?1 issuer, ?2 grant id, ?3 operation id (NULL for
 * the verdict), ?4 leeway. The row's expires_at is the trusted deadline;
 * the request's is ignored. Returns the row's family when it took it. */
const char og__sq_row_claim_sql[] =
    "UPDATE grants SET consumed_at = " SQ_NOW ", consumed_by_operation = ?3"
    " WHERE issuer = ?1 AND grant_id = ?2 AND consumed_at IS NULL"
    "   AND revoked_at IS NULL AND expires_at + ?4 > " SQ_NOW
    "   AND " SQ_OP_ID_NOT_ARCHIVED
    " RETURNING family";
enum { ROW_CLAIM_FAMILY, ROW_CLAIM_NCOLS };

int og__sq_claim(og__sq_store *s, og__sq_conn *c, const og__admit_req *req,
                 const char *op_id, char row_family[OG_ID_MAX + 1])
{
    const og_timings *t = &s->opts.timings;
    sqlite3_stmt *st;
    int rc, claimed;

    if (req->form == OG_FORM_ROW) {
        if ((rc = og__sq_stmt(c, og__sq_row_claim_sql, &st)) < 0)
            return rc;
        og__sq_bind_opt(st, 3, op_id);
        sqlite3_bind_int64(st, 4, t->admission_leeway_us);
    } else {
        if ((rc = og__sq_stmt(c, SQ_KEYED(s, og__sq_claim), &st)) < 0)
            return rc;
        og__sq_bind_opt(st, 3, op_id);
        sqlite3_bind_int64(st, 4, req->expires_at_us);
        sqlite3_bind_int64(st, 5, t->admission_leeway_us);
        sqlite3_bind_text(st, 6, op_id ? "admission" : "consume", -1,
                          SQLITE_STATIC);
    }
    sqlite3_bind_text(st, 1, req->issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, req->grant_id, -1, SQLITE_STATIC);
    /* RETURNING: a row only if this statement took the grant. */
    if ((claimed = og__sq_step(c, st)) <= 0) {
        sqlite3_reset(st);
        return claimed;
    }
    if (req->form == OG_FORM_ROW && row_family &&
        og__sq_text_opt(st, ROW_CLAIM_FAMILY, row_family, OG_ID_MAX + 1) < 0) {
        sqlite3_reset(st);
        return OG_EINTERNAL;
    }
    if ((rc = og__sq_done(c, st)) < 0)
        return rc;
    return 1;
}

/* ===========================================================================
 * What holds a key the claim did not take
 * ========================================================================= */

int og__sq_claim_kind_parse(const char *text, og__claim_kind *kind)
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

/* What holds a key, token form: ?1 issuer, ?2 grant id. */
#define SQ_READ_CONSUMPTION_SQL(K)                                             \
    "SELECT operation_id, kind FROM grant_consumptions"                        \
    " WHERE " SQ_KEQ_##K("?1", "?2")
const char og__sq_read_consumption_sql[] = SQ_READ_CONSUMPTION_SQL(READABLE);
const char og__sq_read_consumption_hashed_sql[] =
    SQ_READ_CONSUMPTION_SQL(HASHED);
enum {
    READ_CONSUMPTION_OPERATION_ID,
    READ_CONSUMPTION_KIND,
    READ_CONSUMPTION_NCOLS
};

/* ...and row form: the grant's row. */
static const char sq_read_grant_sql[] =
    "SELECT consumed_at IS NOT NULL, consumed_by_operation,"
    "       revoked_at IS NOT NULL"
    " FROM grants WHERE issuer = ?1 AND grant_id = ?2";
enum {
    READ_GRANT_CONSUMED,
    READ_GRANT_OPERATION_ID,
    READ_GRANT_REVOKED,
    READ_GRANT_NCOLS
};

/* The read of what holds (issuer, grant_id) in form, bound, in *out. */
static int sq_holder_stmt(const og__sq_store *s, og__sq_conn *c,
                          og_grant_form form, const char *issuer,
                          const char *grant_id, sqlite3_stmt **out)
{
    sqlite3_stmt *st;
    int rc;

    if ((rc = og__sq_stmt(c,
                          form == OG_FORM_ROW
                              ? sq_read_grant_sql
                              : SQ_KEYED(s, og__sq_read_consumption),
                          &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, issuer, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, grant_id, -1, SQLITE_STATIC);
    *out = st;
    return 0;
}

int og__sq_consumption(const og__sq_store *s, og__sq_conn *c,
                       const og__admit_req *req, og__sq_family fam,
                       og__consumption *cons)
{
    og__consumption r = {0};
    sqlite3_stmt *st;
    int rc;

    if ((rc = sq_holder_stmt(s, c, req->form, req->issuer, req->grant_id,
                             &st)) < 0)
        return rc;
    rc = og__sq_step(c, st);
    if (rc == 0 && req->form == OG_FORM_ROW) {
        r.not_issued = true; /* no row: nothing was issued under the key */
    } else if (rc == 1 && req->form == OG_FORM_ROW) {
        if (sqlite3_column_type(st, READ_GRANT_OPERATION_ID) != SQLITE_NULL) {
            r.present = r.has_operation = true;
            r.kind = OG__CLAIM_ADMISSION;
            rc = og__sq_text(st, READ_GRANT_OPERATION_ID, r.operation_id,
                             sizeof r.operation_id);
        } else if (sqlite3_column_int(st, READ_GRANT_CONSUMED)) {
            r.present = true;
            r.kind = OG__CLAIM_CONSUME;
        } else if (sqlite3_column_int(st, READ_GRANT_REVOKED)) {
            r.present = true;
            r.kind = OG__CLAIM_REVOCATION;
        } /* else a live row: the deadline or the family refused it */
    } else if (rc == 1) {
        r.present = true;
        rc = og__sq_claim_kind_parse(
            (const char *)sqlite3_column_text(st, READ_CONSUMPTION_KIND),
            &r.kind);
        if (rc == 0 && r.kind == OG__CLAIM_ADMISSION) {
            r.has_operation = true;
            rc = og__sq_text(st, READ_CONSUMPTION_OPERATION_ID,
                             r.operation_id, sizeof r.operation_id);
        }
    }
    sqlite3_reset(st);
    if (rc < 0)
        return rc;
    r.family_blocked = fam == SQ_FAM_MISSING || fam == SQ_FAM_REVOKED;
    *cons = r;
    return 0;
}

int og__sq_holder_exists(const og__sq_store *s, og__sq_conn *c,
                         og_grant_form form, const char *issuer,
                         const char *grant_id)
{
    sqlite3_stmt *st;
    int rc;

    if ((rc = sq_holder_stmt(s, c, form, issuer, grant_id, &st)) < 0)
        return rc;
    rc = og__sq_step(c, st);
    sqlite3_reset(st);
    return rc;
}

/* ===========================================================================
 * An operation by id
 * ========================================================================= */

/* ?1 the operation id: live only (og_operation_get), or live, else archived
 * (the admission's follow-up, Q10). */
static const char sq_read_op_sql[] =
    "SELECT " SQ_OP_COLS " FROM operations WHERE operation_id = ?1";
static const char sq_read_op_any_sql[] =
    "SELECT " SQ_OP_COLS " FROM operations WHERE operation_id = ?1"
    " UNION ALL"
    " SELECT " SQ_OP_COLS " FROM operations_archive WHERE operation_id = ?1"
    " LIMIT 1";

/* Reads the operation by id on c with statement sql (sq_read_op_sql or
 * sq_read_op_any_sql): 1 found, 0 not, negative error. */
static int sq_read_op_by_id(og__sq_conn *c, const char *sql, const char *id,
                            og_operation *op)
{
    sqlite3_stmt *st;
    int rc;

    if ((rc = og__sq_stmt(c, sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        rc = og__row_operation(og__sq_row(st), 0, op) < 0 ? OG_EINTERNAL
                                                          : 1;
    else if (rc == SQLITE_DONE)
        rc = 0;
    else
        rc = og__sq_err(c);
    sqlite3_reset(st);
    return rc;
}

/* After a claim that took nothing, inside the same transaction: read what
 * holds the key and what the operation id names, and classify. */
static int sq_followup(const og__sq_store *s, og__sq_conn *c,
                       const og__admit_req *req, og__sq_family fam,
                       og_admission *out)
{
    og__consumption cons;
    og_operation op;
    int rc;

    if ((rc = og__sq_consumption(s, c, req, fam, &cons)) < 0)
        return rc;
    rc = sq_read_op_by_id(c, sq_read_op_any_sql, req->operation_id,
                          &op); /* Q10 */
    if (rc < 0)
        return rc;
    og__classify_unclaimed(req, &cons, rc == 1 ? &op : NULL, out);
    return 0;
}

/* ===========================================================================
 * The admission
 * ========================================================================= */

/* The operation, in the claim's transaction: ?1..?7 the binding,
 * ?8 owner version, ?9 execution lease, ?10 submission window. */
const char og__sq_insert_op_sql[] =
    "INSERT INTO operations (" SQ_OP_INSERT_COLS ")"
    " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, 'Admitted', ?8,"
    "        t.now + ?9, t.now + ?10, t.now"
    " FROM (SELECT " SQ_NOW " AS now) t"
    " RETURNING " SQ_OP_COLS;

void og__sq_bind_new_op(sqlite3_stmt *st, const og__admit_req *req,
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

/* One admission inside the batch's write transaction, in its own savepoint:
 * the family's row (Q5), the claim, then the operation insert (Q1, Q8).
 * Returns 0 with *out, or a negative error. *keep says whether the savepoint
 * holds a write to keep (ADMITTED); every other answer rolls the savepoint
 * back. */
static int sq_admit_one(og__sq_store *s, og__sq_conn *c,
                        const og__admit_req *req, og_admission *out,
                        bool *keep)
{
    const og_timings *t = &s->opts.timings;
    og_admission res;
    sqlite3_stmt *st;
    og__sq_family fam;
    int rc, step;

    *keep = false;
    /* 1. The family, read under the write lock: a revocation committed
     * before this transaction is seen, one after it waits for it (Q5). */
    if ((rc = og__sq_family_state(c, req->issuer, req->family, &fam)) < 0)
        return rc;
    if (fam == SQ_FAM_MISSING || fam == SQ_FAM_REVOKED)
        return sq_followup(s, c, req, fam, out); /* no claim; report */

    /* 2. The claim: the key (token form) or the row (row form) and the
     * deadline, on SQLite's clock (Q9). */
    if ((rc = og__sq_claim(s, c, req, req->operation_id, NULL)) < 0)
        return rc;
    if (rc == 0)
        return sq_followup(s, c, req, fam, out); /* nothing written; report */

    /* 3. The operation, bound to the grant, in the same transaction (row
     * form: chained to the row's UPDATE exactly as to the key's insert). */
    if ((rc = og__sq_stmt(c, og__sq_insert_op_sql, &st)) < 0)
        return rc;
    og__sq_bind_new_op(st, req, t);
    step = sqlite3_step(st);
    if (step != SQLITE_ROW) {
        int ext = sqlite3_extended_errcode(c->db);
        sqlite3_reset(st);
        /* Q8: a taken operation id or a grant already bound to an operation
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
    rc = og__row_operation(og__sq_row(st), 0, &res.operation);
    step = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc < 0)
        return rc;
    if (step != SQLITE_DONE)
        return og__sq_err(c);
    *out = res;
    *keep = true;
    return 0;
}

/* ===========================================================================
 * Group commit
 *
 * SQLite has one writer at a time and every commit fsyncs the WAL (Q2), so
 * the obvious design — one transaction per admission — spends one fsync per
 * admission and makes concurrent callers poll for the lock. Instead, callers
 * of one store object queue (the shared queue, lib/store/batcher.c, GQ1-GQ4,
 * one batch at a time); one of them, the leader, takes every queued
 * admission (up to og_store_options.admit_batch_max, the cap PostgreSQL's
 * batches share: lib/store/postgres/admit_batch.c, B1), runs them in ONE
 * BEGIN IMMEDIATE transaction, each in its own SAVEPOINT, and commits
 * once; the store's counters (og_store_admit_stats) count its batches and
 * their rows. Invariants:
 *
 *   G1  Each admission is still atomic on its own: its claim and its
 *       operation insert are one savepoint, released together or rolled
 *       back together.
 *   G2  No answer before the commit: every caller in a batch learns its
 *       outcome only after COMMIT returned SQLITE_OK. An admission refused
 *       because of a batch-mate's claim is therefore refused on committed
 *       state. A failed commit answers OG_ESTORE_UNAVAILABLE to every caller
 *       in the batch — true, since none of their writes is confirmed. So
 *       does a commit whose acknowledgment is lost (the fault point
 *       admit_batch_ack_lost, tests only), for every caller alike.
 *   G3  A caller whose deadline passes while it is still queued leaves the
 *       queue with OG_ESTORE_UNAVAILABLE; nothing of it has run. A caller
 *       taken into a batch waits for the batch, which is bounded by the
 *       earliest deadline in it.
 *   G4  An error confined to one admission (a defect such as a CHECK
 *       failure) rolls back that admission's savepoint only; an error that
 *       ends the transaction (I/O, full disk) fails the whole batch.
 *   G5  Each admission reads its family's row inside the batch's transaction
 *       (Q5), so a family revocation comes before or after the whole batch,
 *       never between its admissions, and it cannot list a grant the batch
 *       admitted: its claim is committed before the revocation runs.
 *   G6  The consume verdict shares the queue and the batches: a verdict is
 *       a waiter like an admission, run in its own savepoint of the same
 *       transaction (og__sq_consume_in, grants.c: the family's row, the
 *       claim with no operation, or the read of what holds the key), so
 *       G1-G5 hold for it as written, and a batch may hold admissions and
 *       verdicts side by side: a verdict refused because a batch-mate
 *       admitted the grant is refused on committed state (G2), as it would
 *       be after that admission alone. The fault point consume_batch_ack_lost
 *       is admit_batch_ack_lost's twin (tests only). Measured: 16 verdicts
 *       per commit against one (docs/performance.md, "VERDICT").
 *   G7  The queue is the store's one queue of writes: outcome writes
 *       (exec.c, Q31-Q36) join the same batches, each in its own savepoint
 *       as an admission, so a batch of mixed kinds is one transaction and
 *       one commit. A batch holds at most admit_batch_max admissions and
 *       verdicts together, and outcome_batch_max outcome writes; a row past
 *       its kind's share waits, in order, for the next batch (GQ2). Each
 *       kind is counted apart (og_store_admit_stats, og__consume_stats,
 *       og_store_outcome_stats): a batch holding several counts once in
 *       each.
 *   G8  Ticket rotations are a fourth kind of row of the same queue, each
 *       in its own savepoint (og__sq_rotate_in, grants.c: the old ticket
 *       marked rotated and its successor created, or the read of why not,
 *       and on reuse the family's revocation, Q12, all in the savepoint),
 *       up to rotate_batch_max of them per batch (GQ2, as G7). Rows run
 *       one after another under the one write lock, so every rotation
 *       answers as it would alone after its predecessors' commit: two
 *       presentations of one ticket in one batch rotate it once, and the
 *       second is reuse, as in two transactions. No answer before the
 *       commit (G2); the fault point rotate_batch_ack_lost is
 *       admit_batch_ack_lost's twin (tests only). rotate_batch_max = 1 is
 *       no queue: each rotation its own transaction at once, as before
 *       (og__sq_ticket_rotate). Counted apart (og_store_rotate_stats).
 * ========================================================================= */
static const char sq_savepoint_sql[] = "SAVEPOINT og_write";
static const char sq_release_sql[] = "RELEASE og_write";
static const char sq_rollback_to_sql[] = "ROLLBACK TO og_write";

/* Runs a savepoint statement; false when the transaction is gone. */
static bool sq_savepoint(og__sq_conn *c, const char *sql)
{
    return og__sq_exec(c, sql) == 0 && !sqlite3_get_autocommit(c->db);
}

/* One row of a batch on c, in its savepoint: an admission (G1), a consume
 * verdict (G6), an outcome write (exec.c, Q31) or a ticket's rotation
 * (G8). *keep: whether it wrote something to keep. */
static int sq_write_one(og__sq_store *s, og__sq_conn *c, og__sq_write *w,
                        bool *keep)
{
    int rc;

    if (w->req && w->consume)
        return og__sq_consume_in(s, c, w->req, &w->cres, keep);
    if (w->req)
        return sq_admit_one(s, c, w->req, &w->res, keep);
    if (w->rotate)
        return og__sq_rotate_in(s, c, w->rotate, keep);
    rc = og__sq_outcome_in(c, w->outcome);
    *keep = rc == 0 && w->outcome->hit;
    return rc;
}

/* Runs batch[0..n) in one write transaction on c, bounded by deadline_us
 * (the earliest of the batch's callers', G3); fills each row's answer and
 * rcs. */
static void sq_run_batch(og__sq_store *s, og__sq_conn *c,
                         og__sq_write *const *batch, int n,
                         int64_t deadline_us, int *rcs)
{
    int rc, i;

    og__sq_arm(c, deadline_us);
    if ((rc = og__sq_begin_on(c)) < 0) /* lock wait past the deadline */
        goto fail_all;
    for (i = 0; i < n; i++) {
        bool keep = false;

        if (!sq_savepoint(c, sq_savepoint_sql)) {
            rc = og__sq_err(c);
            goto fail_all;
        }
        rcs[i] = sq_write_one(s, c, batch[i], &keep);
        if (sqlite3_get_autocommit(c->db)) { /* G4: SQLite ended the txn */
            rc = rcs[i] < 0 ? rcs[i] : OG_ESTORE_UNAVAILABLE;
            goto fail_all;
        }
        og__sq_reset_all(c); /* no statement may stay active */
        if (rcs[i] < 0 || !keep) {
            if (batch[i]->outcome)
                batch[i]->outcome->hit = false;
            if (!sq_savepoint(c, sq_rollback_to_sql)) { /* G1, Q32 */
                rc = OG_ESTORE_UNAVAILABLE;
                goto fail_all;
            }
        }
        if (og__sq_exec(c, sq_release_sql) < 0) {
            rc = og__sq_err(c);
            goto fail_all;
        }
    }
    if ((rc = og__sq_commit(c)) < 0) /* G2, Q33 */
        goto fail_all;
    /* tests only (fault.c): committed, the acknowledgment lost */
    if (og__fault("admit_batch_ack_lost") ||
        og__fault("consume_batch_ack_lost") ||
        og__fault("outcome_batch_ack_lost") ||
        og__fault("rotate_batch_ack_lost")) {
        rc = OG_ESTORE_UNAVAILABLE;
        goto fail_all;
    }
    for (i = 0; i < n; i++) /* tests only (fault.c): committed, ack lost */
        if (rcs[i] == 0 && batch[i]->req && !batch[i]->consume &&
            batch[i]->res.outcome == OG_OUTCOME_ADMITTED &&
            og__fault("admit_ack_lost"))
            rcs[i] = OG_ESTORE_UNAVAILABLE;
    return;

fail_all:
    if (rc >= 0)
        rc = OG_ESTORE_UNAVAILABLE;
    /* Not committed, or not confirmed: every caller in the batch gets the
     * error that ended the transaction, never an answer (G2, Q33). */
    for (i = 0; i < n; i++) {
        if (batch[i]->outcome)
            batch[i]->outcome->hit = false;
        rcs[i] = rc;
    }
}

/* The queue's run (lib/store/batcher.c): one batch, one transaction, on a
 * pool connection; a lone outcome write is its one-row transaction (Q31).
 * Counts each kind's batch. Never falls back: a row's failure is its
 * savepoint's (G4, Q32). */
static void sq_write_run(void *ctx, void *const *rows, int n,
                         int64_t deadline_us, int *rcs)
{
    og__sq_store *s = ctx;
    og__sq_write *const *ws = (og__sq_write *const *)rows;
    void *conn = NULL;
    int admissions = 0, consumes = 0, rotations = 0, rc, i;

    for (i = 0; i < n; i++) {
        admissions += ws[i]->req != NULL && !ws[i]->consume;
        consumes += ws[i]->req != NULL && ws[i]->consume;
        rotations += ws[i]->rotate != NULL;
    }
    if (n == 1 && ws[0]->outcome != NULL) {
        rcs[0] = og__sq_outcome_one(s, ws[0]->outcome, deadline_us);
    } else if ((rc = og__pool_get(s->pool, &conn)) < 0) {
        for (i = 0; i < n; i++)
            rcs[i] = rc;
    } else {
        sq_run_batch(s, conn, ws, n, deadline_us, rcs);
        og__sq_release(s, conn, !og__sq_rollback(conn)); /* no-op after
                                                             COMMIT */
    }
    pthread_mutex_lock(&s->stats_mu);
    if (admissions > 0) {
        s->admit_stats.batches++;
        s->admit_stats.rows += (uint64_t)admissions;
    }
    if (consumes > 0) {
        s->consume_stats.batches++;
        s->consume_stats.rows += (uint64_t)consumes;
    }
    if (rotations > 0) {
        s->rotate_stats.batches++;
        s->rotate_stats.rows += (uint64_t)rotations;
    }
    pthread_mutex_unlock(&s->stats_mu);
    if (n > admissions + consumes + rotations)
        og__sq_outcome_count(s, n - admissions - consumes - rotations);
}

/* A row's share of a batch (G7, G8): 0 admissions and verdicts, 1
 * outcome writes, 2 rotations. */
static int sq_write_share(const og__sq_write *w)
{
    return w->req != NULL ? 0 : w->rotate != NULL ? 2 : 1;
}

/* G7, G8: a row whose kind already fills its share of the batch
 * (admit_batch_max admissions and verdicts, outcome_batch_max outcome
 * writes, rotate_batch_max rotations) waits for the next batch. */
static bool sq_write_conflicts(void *ctx, void *const *rows, int n,
                               const void *row)
{
    const og__sq_store *s = ctx;
    const int cap[3] = {s->opts.admit_batch_max, s->opts.outcome_batch_max,
                        s->opts.rotate_batch_max};
    int share = sq_write_share(row), same = 0;

    for (int i = 0; i < n; i++)
        same += sq_write_share(rows[i]) == share;
    return same >= cap[share];
}

/* One writer: even batches of one queue, one at a time (queue_lone). */
const og__batch_ops og__sq_write_ops = {.run = sq_write_run,
                                        .conflicts = sq_write_conflicts,
                                        .queue_lone = true};

int og__sq_write_submit(og__sq_store *s, og__sq_write *w, int64_t deadline_us)
{
    return og__batcher_submit(s->writes, w, deadline_us);
}

int og__sq_write_direct(og__sq_store *s, og__sq_kind kind, void *rows,
                        int n, og__sq_write **out, int *rcs)
{
    void *ptrs[OG__BATCH_ROWS_MAX];
    og__sq_write *ws;
    int rc;

    if (n < 1 || n > OG__BATCH_ROWS_MAX)
        return OG_EINVAL;
    if ((ws = calloc((size_t)n, sizeof *ws)) == NULL)
        return OG_ENOMEM;
    for (int i = 0; i < n; i++) {
        if (kind == SQ_WRITE_OUTCOME)
            ws[i].outcome = &((og__outcome_row *)rows)[i];
        else if (kind == SQ_WRITE_ROTATE)
            ws[i].rotate = &((og__rotate_row *)rows)[i];
        else
            ws[i].req = &((const og__admit_req *)rows)[i];
        ws[i].consume = kind == SQ_WRITE_CONSUME;
        ptrs[i] = &ws[i];
    }
    /* Waits for the queue's batch in flight, then leads its own. */
    rc = og__batcher_direct(s->writes, ptrs, n,
                            og__sq_mono_us() + s->opts.timings.store_timeout_us,
                            rcs);
    if (rc != 0 || out == NULL)
        free(ws);
    else
        *out = ws;
    return rc;
}

int og__sq_admit(void *impl, const og__admit_req *req, og_admission *out)
{
    og__sq_store *s = impl;
    og__sq_write w = {.req = req};
    int rc = og__sq_write_submit(
        s, &w, og__sq_mono_us() + s->opts.timings.store_timeout_us);

    if (rc == 0)
        *out = w.res;
    return rc;
}

int og__sq_admit_batch(void *impl, const og__admit_req *reqs, int n,
                       og_admission *outs, int *rcs)
{
    og__sq_write *ws = NULL;
    int rc = og__sq_write_direct(impl, SQ_WRITE_ADMIT, (void *)reqs, n, &ws,
                                 rcs);

    for (int i = 0; i < n && rc == 0; i++)
        if (rcs[i] == 0)
            outs[i] = ws[i].res;
    free(ws);
    return rc;
}

/* The consume verdict (G6): a row of the queue like an admission. */
int og__sq_consume(void *impl, const og__admit_req *req,
                   og_consume_result *out)
{
    og__sq_store *s = impl;
    og__sq_write w = {.req = req, .consume = true};
    int rc = og__sq_write_submit(
        s, &w, og__sq_mono_us() + s->opts.timings.store_timeout_us);

    if (rc == 0)
        *out = w.cres;
    return rc;
}

int og__sq_consume_batch(void *impl, const og__admit_req *reqs, int n,
                         og_consume_result *outs, int *rcs)
{
    og__sq_write *ws = NULL;
    int rc = og__sq_write_direct(impl, SQ_WRITE_CONSUME, (void *)reqs, n,
                                 &ws, rcs);

    for (int i = 0; i < n && rc == 0; i++)
        if (rcs[i] == 0)
            outs[i] = ws[i].cres;
    free(ws);
    return rc;
}

/* The test hook: rows[0..n) rotated as ONE batch of their own (G8). */
int og__sq_rotate_batch(void *impl, og__rotate_row *rows, int n, int *rcs)
{
    return og__sq_write_direct(impl, SQ_WRITE_ROTATE, rows, n, NULL, rcs);
}

void og__sq_rotate_stats(void *impl, og_admit_stats *out)
{
    og__sq_store *s = impl;

    pthread_mutex_lock(&s->stats_mu);
    *out = s->rotate_stats;
    pthread_mutex_unlock(&s->stats_mu);
}

void og__sq_consume_stats(void *impl, og_admit_stats *out)
{
    og__sq_store *s = impl;

    pthread_mutex_lock(&s->stats_mu);
    *out = s->consume_stats;
    pthread_mutex_unlock(&s->stats_mu);
}

void og__sq_admit_stats(void *impl, og_admit_stats *out)
{
    og__sq_store *s = impl;

    pthread_mutex_lock(&s->stats_mu);
    *out = s->admit_stats;
    pthread_mutex_unlock(&s->stats_mu);
}

/* ===========================================================================
 * og_operation_get
 * ========================================================================= */

int og__sq_operation_get(void *impl, const char *id, og_operation *out)
{
    og__sq_store *s = impl;
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_acquire(s, &c)) < 0)
        return rc;
    rc = sq_read_op_by_id(c, sq_read_op_sql, id, out);
    og__sq_release(s, c, false);
    return rc;
}
