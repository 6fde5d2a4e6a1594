/*
 * exec.c — the SQLite store's execution: the ownership protocol that moves
 * an admitted operation (op_may_submit, op_start, op_record, op_takeover,
 * op_resolve), the operators' listing, og__op_insert (tests) and the
 * history: M16-M22 (lib/store/store_int.h). Each write is ONE write
 * transaction (og__sq_begin/og__sq_end, as Q11): the conditional UPDATE on
 * (status, owner_version) and its event row commit together, or nothing
 * does. The reads run on a pool connection without a transaction: one
 * SELECT is one snapshot in WAL mode.
 *
 * Invariants:
 *
 *   Q14 Every execution write — a payout's start (og__sq_op_start), an
 *       outcome (og__sq_op_record), recovery's takeover, an operator's
 *       resolution — is ONE BEGIN IMMEDIATE transaction holding the
 *       conditional UPDATE of the operation and the INSERT of its
 *       operation_events row (M16): an UPDATE that hits no row rolls back,
 *       so a stale writer leaves neither a change nor an event. An outcome's
 *       from_status is read in the same transaction, under the write lock
 *       (Q1), so it is the status the UPDATE replaced. Each UPDATE names the
 *       state it expects and the owner version (M17); an outcome's statement
 *       can only ever name 'Admitted', 'Started' and 'Unknown' (other bits
 *       are never bound), so a terminal status is never overwritten by an
 *       owner.
 *   Q15 One clock, one instant per statement (M18): SQLite's 'now' is fixed
 *       for one sqlite3_step, so a takeover's expiry test, its new
 *       lease_until (now + the store's recovery_lease) and its event's time
 *       are the same instant, as are an outcome's or a resolution's
 *       updated_at and the event's at (taken from RETURNING, never from this
 *       process's clock).
 *   Q16 op_may_submit (M19) is one SELECT without a transaction: one WAL
 *       snapshot, on SQLite's clock. Any error is returned, never turned
 *       into "yes".
 *   Q17 op_list's statement (M21) is assembled from fixed fragments and the
 *       fixed status names (the bound and the limit are parameters), and so
 *       is the kind. When the status set lies within
 *       Admitted/Started/Unknown, the recovery scan index's predicate
 *       (SQ_OWNED) is repeated verbatim: SQLite uses a partial index only
 *       when the query's WHERE implies the index's; from schema 15 a set
 *       within SQ_BACKLOG repeats the backlog index's predicate so.
 *   Q18 Operation kinds (M22, schema 7): the admission's insert
 *       (og__sq_insert_op_sql) writes no new column (a credit is kind's
 *       DEFAULT); og__sq_op_start_sql is the one write to Started, its
 *       lease and submit_by tested against the step's 'now';
 *       sq_op_may_submit_sql says yes for a payout only in Started;
 *       og__sq_op_record_sql writes
 *       NotStarted only for a payout whose owner version a takeover raised.
 *       The rebuilt operations table holds both rules as CHECKs too.
 *       Migration 7 (schema.c) rebuilds operations, operation_events and
 *       operations_archive (SQLite cannot alter a CHECK) in the migrator's
 *       transaction, with foreign keys off on the migrating connection and
 *       checked before the commit, and carries operation_events'
 *       AUTOINCREMENT high-water mark over, so no event number is ever
 *       handed out twice.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "store/batcher.h"

static int sq_outcome_submit(og__sq_store *s, og__outcome_row *row,
                             bool *hit);

/* ===========================================================================
 * Events and statuses
 * ========================================================================= */

/* The event of the write above, in its transaction: ?1 operation id, ?2 at,
 * ?3 kind, ?4 from, ?5 to, ?6 owner version after, ?7 reason, ?8 provider
 * reference, ?9 actor, ?10 evidence (NULL: none), ?11 source (NULL: none;
 * schema 11). */
const char og__sq_op_event_sql[] =
    "INSERT INTO operation_events (operation_id, at, kind, from_status,"
    "   to_status, owner_version, reason, provider_reference, actor,"
    "   evidence, source)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";

/* Appends the event of the write just made, in its transaction (Q14). */
int og__sq_op_event(og__sq_conn *c, const char *id, int64_t at,
                    const char *kind, og_op_status from, og_op_status to,
                    int64_t owner_version, const char *reason,
                    const char *provider_reference, const char *actor,
                    const char *evidence, const char *source)
{
    sqlite3_stmt *st;
    int rc;

    if ((rc = og__sq_stmt(c, og__sq_op_event_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, at);
    sqlite3_bind_text(st, 3, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, og_op_status_name(from), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, og_op_status_name(to), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 6, owner_version);
    og__sq_bind_opt(st, 7, reason);
    og__sq_bind_opt(st, 8, provider_reference);
    sqlite3_bind_text(st, 9, actor, -1, SQLITE_STATIC);
    og__sq_bind_opt(st, 10, evidence);
    og__sq_bind_opt(st, 11, source);
    return og__sq_done(c, st);
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

/* ===========================================================================
 * op_may_submit (Q16)
 * ========================================================================= */

/* May the owner at version ?2 send a create request now? ?1 the operation
 * id. A read: a credit from Admitted or Unknown, a payout only once Started
 * (Q18). */
static const char sq_op_may_submit_sql[] =
    "SELECT 1 FROM operations"
    " WHERE operation_id = ?1"
    "   AND ((kind = 'credit' AND status IN ('Admitted', 'Unknown'))"
    "        OR (kind = 'payout' AND status = 'Started'))"
    "   AND owner_version = ?2"
    "   AND " SQ_NOW " < min(lease_until, submit_by)";

int og__sq_op_may_submit(void *impl, const char *id, int64_t owner_version,
                         bool *may)
{
    og__sq_store *s = impl;
    sqlite3_stmt *st;
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_acquire(s, &c)) < 0)
        return rc;
    if ((rc = og__sq_stmt(c, sq_op_may_submit_sql, &st)) == 0) {
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, owner_version);
        rc = og__sq_step(c, st);
        sqlite3_reset(st);
    }
    og__sq_release(s, c, false);
    if (rc < 0)
        return rc; /* Q16: an error is "no", never a stale "yes" */
    *may = rc == 1;
    return 0;
}

/* ===========================================================================
 * A payout attempt's start (Q18: P1, P2)
 * ========================================================================= */

/* ?1 the operation id, ?2 the owner's version. One 'now' for the lease and
 * submit_by tests and the returned event time (Q15), read under the write
 * lock. A row only when it started. */
const char og__sq_op_start_sql[] =
    "UPDATE operations SET status = 'Started', updated_at = " SQ_NOW
    " WHERE operation_id = ?1 AND kind = 'payout' AND status = 'Admitted'"
    "   AND owner_version = ?2"
    "   AND lease_until > " SQ_NOW " AND submit_by > " SQ_NOW
    " RETURNING updated_at";
enum { OP_START_UPDATED_AT, OP_START_NCOLS };

static int sq_op_start_in(og__sq_conn *c, const char *id,
                          int64_t owner_version, const char *actor,
                          bool *started)
{
    sqlite3_stmt *st;
    int64_t at;
    int rc;

    if ((rc = og__sq_stmt(c, og__sq_op_start_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, owner_version);
    if ((rc = og__sq_step(c, st)) <= 0) {
        sqlite3_reset(st);
        return rc; /* 0: not an Admitted payout at this version, or the
                      lease or submit_by passed: nothing written */
    }
    at = sqlite3_column_int64(st, OP_START_UPDATED_AT); /* the step's 'now'
                                                           (Q15) */
    if ((rc = og__sq_done(c, st)) < 0)
        return rc;
    if ((rc = og__sq_op_event(c, id, at, "started", OG_OP_ADMITTED,
                              OG_OP_STARTED, owner_version, NULL, NULL, actor,
                              NULL, NULL)) < 0)
        return rc;
    *started = true;
    return 0;
}

int og__sq_op_start(void *impl, const char *id, int64_t owner_version,
                    const char *actor, bool *started)
{
    og__outcome_row row = {.kind = OG__OUTCOME_START,
                           .operation_id = id,
                           .owner_version = owner_version,
                           .actor = actor};

    return sq_outcome_submit(impl, &row, started);
}

/* ===========================================================================
 * Outcomes (Q14)
 * ========================================================================= */

/* The status an execution write replaces, read under the write lock: ?1
 * the operation id. */
static const char sq_op_status_sql[] =
    "SELECT status FROM operations WHERE operation_id = ?1";
enum { OP_STATUS_STATUS, OP_STATUS_NCOLS };

/* An outcome: ?1 the operation id, ?2 expected owner version, ?3 'Admitted'
 * or NULL, ?4 'Started' or NULL, ?5 'Unknown' or NULL (the expected set;
 * nothing else can be replaced, Q14), ?6 new status, ?7 reason or NULL, ?8
 * provider reference or NULL. NotStarted only for a payout above the
 * initial owner version (Q18: P2), whatever store.c checked; NotApplied
 * only once "not found" may be final, as of the takeover that began the
 * lookup and as of now (Q29: P6). A row only when it hit. */
const char og__sq_op_record_sql[] =
    "UPDATE operations SET status = ?6, outcome_reason = ?7,"
    "   provider_reference = coalesce(?8, provider_reference),"
    "   updated_at = " SQ_NOW
    " WHERE operation_id = ?1 AND owner_version = ?2"
    "   AND status IN (?3, ?4, ?5)"
    "   AND (?6 <> 'NotStarted' OR (kind = 'payout' AND owner_version > "
    SQ_STR(OG__INITIAL_OWNER_VERSION) "))"
    "   AND (?6 <> 'NotApplied' OR " SQ_FINAL_ABSENCE ")"
    " RETURNING updated_at";
enum { OP_RECORD_UPDATED_AT, OP_RECORD_NCOLS };

int og__sq_op_record_in(og__sq_conn *c, const char *id, unsigned expected,
                        int64_t owner_version, const og_op_outcome *o,
                        const char *source, bool *recorded, int64_t *at_out)
{
    og_op_status from = OG_OP_ADMITTED; /* set below; gcc -O3 cannot see it */
    sqlite3_stmt *st;
    int64_t at;
    int rc;

    /* The status the UPDATE would replace: read under the write lock, so
     * no writer runs between this read and the UPDATE (Q1, Q14). */
    if ((rc = og__sq_stmt(c, sq_op_status_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    if ((rc = og__sq_step(c, st)) == 1)
        rc = sq_status_col(st, OP_STATUS_STATUS, &from) < 0 ? OG_EINTERNAL
                                                             : 1;
    sqlite3_reset(st);
    if (rc <= 0)
        return rc; /* 0: no such operation, nothing recorded */

    /* The conditional write: expected status and owner version (Q14). */
    if ((rc = og__sq_stmt(c, og__sq_op_record_sql, &st)) < 0)
        return rc;
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
    og__sq_bind_opt(st, 7, o->reason);
    og__sq_bind_opt(st, 8, o->provider_reference);
    if ((rc = og__sq_step(c, st)) <= 0) {
        sqlite3_reset(st);
        return rc; /* 0: another owner moved on, or not expected */
    }
    at = sqlite3_column_int64(st, OP_RECORD_UPDATED_AT);
    if ((rc = og__sq_done(c, st)) < 0)
        return rc;
    if ((rc = og__sq_op_event(c, id, at, "outcome", from, o->status,
                              owner_version, o->reason,
                              o->provider_reference, o->actor, o->evidence,
                              source)) < 0)
        return rc;
    *recorded = true;
    if (at_out)
        *at_out = at;
    return 0;
}

int og__sq_op_record(void *impl, const char *id, unsigned expected,
                     int64_t owner_version, const og_op_outcome *o,
                     bool *recorded)
{
    og__outcome_row row = {.kind = OG__OUTCOME_RECORD,
                           .operation_id = id,
                           .owner_version = owner_version,
                           .expected = expected,
                           .o = o};

    return sq_outcome_submit(impl, &row, recorded);
}

/* ===========================================================================
 * Group commit of outcomes (Q31-Q35)
 *
 * Every start and record is a write transaction and an fsync, one writer
 * at a time (Q2), so concurrent owners of one store object queue for the
 * write lock one commit each. Instead they queue in the store's one queue
 * of writes, beside the admissions (admit.c, G7; the shared waiter queue,
 * lib/store/batcher.c, GQ1-GQ5: a batch closes when it is full or nobody
 * else waits, never on a timer), and the leader writes what is queued, up
 * to og_store_options.outcome_batch_max outcome writes, in ONE BEGIN
 * IMMEDIATE transaction, each row in its own SAVEPOINT, and commits once:
 *
 *   Q31 Each row is the one-row write, unchanged (sq_op_start_in,
 *       og__sq_op_record_in: the conditional UPDATE and its event, Q14,
 *       M16-M18), run under the batch's write lock; a batch of one is the
 *       one-row transaction itself. The rows of a batch run in queue
 *       order, so two rows on one operation answer exactly what two
 *       one-row writes in that order answer — the second sees the first,
 *       as it would after its commit: the owner version fences them as
 *       ever (M17), and of two starts for one version one is started.
 *   Q32 A row that changed nothing (stale owner version, unexpected
 *       status, lapsed lease) rolls its savepoint back: nothing of it
 *       stays, as its one-row transaction's ROLLBACK (M16). A row whose
 *       write fails alone (a CHECK, a defect) rolls back its savepoint
 *       only and answers its error; the other rows go on. An error that
 *       ends the transaction (I/O, a full disk, the lock wait past the
 *       batch's deadline) fails the whole batch.
 *   Q33 No answer before the commit: a row learns "started" or
 *       "recorded" only after COMMIT returned SQLITE_OK, so a payout is
 *       sent only once its Started write is durable (P1). A failed commit
 *       answers every row OG_ESTORE_UNAVAILABLE, and so does a commit
 *       whose acknowledgment is lost (the fault point
 *       outcome_batch_ack_lost, tests only): none of them is confirmed,
 *       whichever committed, exactly as a one-row write whose answer was
 *       lost (og_op_start's start-ack-lost stays above, lib/store/exec.c).
 *   Q34 The batch's deadline is the earliest of its rows' (GQ3), armed
 *       for the lock wait as a one-row write's (Q4).
 *   Q35 Outcome writes and admissions share one queue and one
 *       transaction per batch (G7): each row is its own savepoint either
 *       way, so an admission and an outcome write of one batch never
 *       affect each other (an outcome write cannot name an operation its
 *       batch-mate admits: its caller learns the operation only once that
 *       admission's commit answered).
 *   Q36 outcome_batch_max = 1 turns the batching of outcomes off: every
 *       write runs alone, at once, in its one-row transaction, beside the
 *       queue (GQ5), as before group commit.
 * ========================================================================= */

/* One row inside the batch's transaction (Q31). */
int og__sq_outcome_in(og__sq_conn *c, og__outcome_row *r)
{
    r->hit = false;
    if (r->kind == OG__OUTCOME_START)
        return sq_op_start_in(c, r->operation_id, r->owner_version, r->actor,
                              &r->hit);
    return og__sq_op_record_in(c, r->operation_id, r->expected,
                               r->owner_version, r->o, NULL, &r->hit, NULL);
}

/* One row alone: the one-row transaction (Q31), bounded by its caller's
 * deadline (Q34). Nothing hit: ROLLBACK, nothing written; "started" or
 * "recorded" only after COMMIT returned SQLITE_OK (Q2, P1). */
int og__sq_outcome_one(og__sq_store *s, og__outcome_row *r,
                       int64_t deadline_us)
{
    void *conn;
    og__sq_conn *c;
    int rc;

    r->hit = false;
    if ((rc = og__pool_get(s->pool, &conn)) < 0)
        return rc;
    c = conn;
    og__sq_arm(c, deadline_us); /* the lock wait ends here (Q4) */
    if ((rc = og__sq_begin_on(c)) < 0) {
        og__sq_release(s, c, !og__sq_rollback(c));
        return rc;
    }
    rc = og__sq_outcome_in(c, r);
    rc = og__sq_end(s, c, rc, r->hit);
    if (rc < 0)
        r->hit = false;
    return rc;
}

/* Counts one batch holding n outcome writes (og_store_outcome_stats). */
void og__sq_outcome_count(og__sq_store *s, int n)
{
    pthread_mutex_lock(&s->stats_mu);
    s->outcome_stats.batches++;
    s->outcome_stats.rows += (uint64_t)n;
    pthread_mutex_unlock(&s->stats_mu);
}

/* Q36: outcome_batch_max = 1 writes each alone, at once, with no queue;
 * otherwise the write joins the store's one queue of writes (admit.c). */
static int sq_outcome_submit(og__sq_store *s, og__outcome_row *row,
                             bool *hit)
{
    int64_t deadline = og__sq_mono_us() + s->opts.timings.store_timeout_us;
    int rc;

    if (s->opts.outcome_batch_max == 1) {
        rc = og__sq_outcome_one(s, row, deadline);
        og__sq_outcome_count(s, 1);
    } else {
        og__sq_write w = {.outcome = row};
        rc = og__sq_write_submit(s, &w, deadline);
    }
    if (rc == 0)
        *hit = row->hit;
    return rc;
}

int og__sq_outcome_batch(void *impl, og__outcome_row *rows, int n, int *rcs)
{
    return og__sq_write_direct(impl, SQ_WRITE_OUTCOME, rows, n, NULL, rcs);
}

void og__sq_outcome_stats(void *impl, og_admit_stats *out)
{
    og__sq_store *s = impl;

    pthread_mutex_lock(&s->stats_mu);
    *out = s->outcome_stats;
    pthread_mutex_unlock(&s->stats_mu);
}

/* ===========================================================================
 * Recovery's takeover (Q14, Q15)
 * ========================================================================= */

/* ?1 the operation id, ?2 expected owner version, ?3 recovery lease. 'now'
 * is one value for the whole step (Q15): the expiry test, the new lease and
 * the returned event time. A Started payout is taken over too (P3); the new
 * version fences its old owner's start and records. */
const char og__sq_op_takeover_sql[] =
    "UPDATE operations SET owner_version = owner_version + 1,"
    "   lease_until = " SQ_NOW " + ?3, taken_at = " SQ_NOW
    " WHERE operation_id = ?1 AND status IN " SQ_OWNED
    "   AND lease_until < " SQ_NOW " AND owner_version = ?2"
    " RETURNING " SQ_OP_COLS ", " SQ_NOW;
/* The step's clock, after the operation's columns. */
enum { OP_TAKEOVER_NOW = OP_NCOLS, OP_TAKEOVER_NCOLS };

static int sq_op_takeover_in(og__sq_store *s, og__sq_conn *c, const char *id,
                             int64_t owner_version, const char *actor,
                             og_operation *out, bool *taken)
{
    og_operation op;
    sqlite3_stmt *st;
    int64_t at;
    int rc;

    if ((rc = og__sq_stmt(c, og__sq_op_takeover_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, owner_version);
    sqlite3_bind_int64(st, 3, s->opts.timings.recovery_lease_us);
    if ((rc = og__sq_step(c, st)) <= 0) {
        sqlite3_reset(st);
        return rc; /* 0: owned by a live lease, moved on, or final */
    }
    rc = og__row_operation(og__sq_row(st), 0, &op);
    at = sqlite3_column_int64(st, OP_TAKEOVER_NOW); /* the step's 'now' (Q15) */
    if (rc < 0) {
        sqlite3_reset(st);
        return rc;
    }
    if ((rc = og__sq_done(c, st)) < 0)
        return rc;
    /* The status does not change: from = to. */
    if ((rc = og__sq_op_event(c, id, at, "takeover", op.status, op.status,
                              op.owner_version, NULL, NULL, actor, NULL,
                              NULL)) < 0)
        return rc;
    *out = op;
    *taken = true;
    return 0;
}

int og__sq_op_takeover(void *impl, const char *id, int64_t owner_version,
                       const char *actor, og_operation *out, bool *taken)
{
    og__sq_store *s = impl;
    og_operation op;
    bool t = false;
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_op_takeover_in(s, c, id, owner_version, actor, &op, &t);
    rc = og__sq_end(s, c, rc, t);
    if (rc < 0)
        return rc; /* not confirmed: the caller owns nothing */
    *taken = t;
    if (t)
        *out = op;
    return 0;
}

/* ===========================================================================
 * An operator's resolution (Q14)
 * ========================================================================= */

/* ?1 the operation id, ?2 'Succeeded', 'Failed' or 'NotApplied', ?3 reason,
 * ?4 provider reference or NULL. */
static const char sq_op_resolve_sql[] =
    "UPDATE operations SET status = ?2, owner_version = owner_version + 1,"
    "   outcome_reason = ?3,"
    "   provider_reference = coalesce(?4, provider_reference),"
    "   updated_at = " SQ_NOW
    " WHERE operation_id = ?1 AND status = 'NeedsReconciliation'"
    " RETURNING owner_version, updated_at";
enum { OP_RESOLVE_OWNER_VERSION, OP_RESOLVE_UPDATED_AT, OP_RESOLVE_NCOLS };

static int sq_op_resolve_in(og__sq_conn *c, const char *id, og_op_status to,
                            const char *operator_id, const char *reason,
                            const char *evidence,
                            const char *provider_reference, bool *resolved)
{
    sqlite3_stmt *st;
    int64_t version, at;
    int rc;

    if ((rc = og__sq_stmt(c, sq_op_resolve_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, og_op_status_name(to), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, reason, -1, SQLITE_STATIC);
    og__sq_bind_opt(st, 4, provider_reference);
    if ((rc = og__sq_step(c, st)) <= 0) {
        sqlite3_reset(st);
        return rc; /* 0: not NeedsReconciliation (any more) */
    }
    version = sqlite3_column_int64(st, OP_RESOLVE_OWNER_VERSION);
    at = sqlite3_column_int64(st, OP_RESOLVE_UPDATED_AT);
    if ((rc = og__sq_done(c, st)) < 0)
        return rc;
    if ((rc = og__sq_op_event(c, id, at, "resolved",
                              OG_OP_NEEDS_RECONCILIATION, to, version, reason,
                              provider_reference, operator_id, evidence,
                              NULL)) < 0)
        return rc;
    *resolved = true;
    return 0;
}

int og__sq_op_resolve(void *impl, const char *id, og_op_status to,
                      const char *operator_id, const char *reason,
                      const char *evidence, const char *provider_reference,
                      bool *resolved)
{
    og__sq_store *s = impl;
    bool r = false;
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_begin(s, &c)) < 0)
        return rc;
    rc = sq_op_resolve_in(c, id, to, operator_id, reason, evidence,
                          provider_reference, &r);
    rc = og__sq_end(s, c, rc, r);
    if (rc == 0)
        *resolved = r;
    return rc;
}

/* ===========================================================================
 * Listing (Q17)
 * ========================================================================= */

/* Appends text to sql (size n); -1 when it does not fit. */
static int sq_cat(char *sql, size_t n, const char *text)
{
    size_t used = strlen(sql), add = strlen(text);

    if (used + add >= n)
        return -1;
    memcpy(sql + used, text, add + 1);
    return 0;
}

/* The listing statement for f (Q17): status literals from the fixed status
 * table, never caller text; the creation bound (?1) and the limit (?2)
 * bound. When the set lies within the owned statuses, the recovery scan
 * index's own predicate is repeated verbatim so the planner may use that
 * partial index; else when it lies within SQ_BACKLOG, the backlog index's
 * (schema 15). Its rows are SQ_OP_COLS (OP_*). */
int og__sq_op_list_sql(const og_op_filter *f, char *sql, size_t n)
{
    const unsigned owned = OG__OP_OWNED, backlog = OG__OP_BACKLOG;
    int bad = 0;

    sql[0] = '\0';
    bad |= sq_cat(sql, n, "SELECT " SQ_OP_COLS " FROM operations WHERE 1");
    if (f->statuses != 0 && (f->statuses & ~owned) == 0)
        bad |= sq_cat(sql, n, " AND status IN " SQ_OWNED);
    else if (f->statuses != 0 && (f->statuses & ~backlog) == 0)
        bad |= sq_cat(sql, n, " AND status IN " SQ_BACKLOG);
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

/* The listing runs a statement of its own, prepared for the call and
 * finalized after it: its text varies with the filter, so it is not a
 * cached statement. */
static int sq_op_list_on(og__sq_conn *c, const og_op_filter *f,
                         og_op_list *out)
{
    char sql[2048];
    og_op_list l = {NULL, 0};
    size_t cap = 0;
    sqlite3_stmt *st = NULL;
    int rc;

    if ((rc = og__sq_op_list_sql(f, sql, sizeof sql)) < 0)
        return rc;
    if (sqlite3_prepare_v3(c->db, sql, -1, 0, &st, NULL) != SQLITE_OK)
        return og__sq_err(c);
    if (f->created_before_us > 0)
        sqlite3_bind_int64(st, 1, f->created_before_us);
    sqlite3_bind_int(st, 2, f->limit);
    while ((rc = og__sq_step(c, st)) == 1) {
        if (l.n == cap) {
            /* the LIMIT caps the rows: more is a defect, not memory */
            og_operation *v = og__grow(l.v, sizeof *v, &cap, 16,
                                       (size_t)f->limit);

            if (!v) {
                rc = cap >= (size_t)f->limit ? OG_EINTERNAL : OG_ENOMEM;
                break;
            }
            l.v = v;
        }
        rc = og__row_operation(og__sq_row(st), 0, &l.v[l.n]);
        if (rc < 0)
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

int og__sq_op_list(void *impl, const og_op_filter *f, og_op_list *out)
{
    og__sq_store *s = impl;
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_acquire(s, &c)) < 0)
        return rc;
    rc = sq_op_list_on(c, f, out);
    og__sq_release(s, c, false);
    return rc;
}

/* ===========================================================================
 * og__op_insert (tests only)
 * ========================================================================= */

/* ?1..?7 the binding, ?8 owner version, ?9 execution lease, ?10 submission
 * window, ?11 kind, ?12 idempotency key, ?13 client reference (NULL: the
 * operation id). No claim. */
static const char sq_op_insert_sql[] =
    "INSERT INTO operations (" SQ_OP_INSERT_COLS ", kind, idempotency_key,"
    "   client_reference)"
    " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, 'Admitted', ?8,"
    "        t.now + ?9, t.now + ?10, t.now, ?11, ?12, ?13"
    " FROM (SELECT " SQ_NOW " AS now) t"
    " RETURNING " SQ_OP_COLS;

int og__sq_op_insert(void *impl, const og__admit_req *req, og_op_kind k,
                     const char *idempotency_key,
                     const char *client_reference, og_operation *out)
{
    og__sq_store *s = impl;
    const og_timings *t = &s->opts.timings;
    sqlite3_stmt *st;
    og_operation op;
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_acquire(s, &c)) < 0)
        return rc;
    if ((rc = og__sq_stmt(c, sq_op_insert_sql, &st)) < 0)
        goto out;
    og__sq_bind_new_op(st, req, t);
    sqlite3_bind_text(st, 11, og_op_kind_name(k), -1, SQLITE_STATIC);
    og__sq_bind_opt(st, 12, idempotency_key);
    og__sq_bind_opt(st, 13, client_reference);
    if ((rc = og__sq_step(c, st)) == 1)
        rc = og__row_operation(og__sq_row(st), 0, &op);
    else if (rc == 0)
        rc = OG_EINTERNAL; /* RETURNING always yields the row */
    if (rc < 0) {
        sqlite3_reset(st);
        goto out;
    }
    /* Autocommit: committed when the statement completes (Q2). */
    if ((rc = og__sq_done(c, st)) == 0)
        *out = op;
out:
    og__sq_release(s, c, !og__sq_rollback(c));
    return rc;
}

/* ===========================================================================
 * History
 * ========================================================================= */

/* ?1 the operation id. */
static const char sq_op_history_sql[] =
    "SELECT seq, at, kind, from_status, to_status, owner_version, reason,"
    "       provider_reference, actor, evidence, source"
    " FROM operation_events WHERE operation_id = ?1 ORDER BY seq";
/* Its columns: OP_HISTORY_* (rows.h). */

static int sq_op_history_on(og__sq_conn *c, const char *id,
                            og_op_events *out)
{
    og_op_events l = {NULL, 0};
    size_t cap = 0;
    sqlite3_stmt *st;
    int rc;

    if ((rc = og__sq_stmt(c, sq_op_history_sql, &st)) < 0)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    while ((rc = og__sq_step(c, st)) == 1) {
        if (l.n == cap) {
            og_op_event *v = og__grow(l.v, sizeof *v, &cap, 8,
                                      OG__OP_HISTORY_MAX);

            if (!v) {
                rc = OG_ENOMEM;
                break;
            }
            l.v = v;
        }
        if ((rc = og__row_op_event(og__sq_row(st), &l.v[l.n])) < 0)
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

int og__sq_op_history(void *impl, const char *id, og_op_events *out)
{
    og__sq_store *s = impl;
    og__sq_conn *c;
    int rc;

    if ((rc = og__sq_acquire(s, &c)) < 0)
        return rc;
    rc = sq_op_history_on(c, id, out);
    og__sq_release(s, c, false);
    return rc;
}
