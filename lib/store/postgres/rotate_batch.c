/*
 * rotate_batch.c — group commit of ticket rotations on PostgreSQL: the
 * rotations (og_ticket_rotate) asked of one store object queue on the
 * shared waiter queue (lib/store/batcher.c, GQ1-GQ5) as a kind of
 * batch_run.c's group commit (BR1-BR6), and a leader rotates
 * what is queued in ONE statement (one round trip, one commit) whose every
 * row answers exactly what the one-row rotation (grants.c,
 * og__pg_ticket_rotate_one) would have answered: rotated with its
 * successor, reused (the family then revoked), family revoked, unknown.
 * 16 rotations per statement ran 2.2-4.7x the one-row statement's rows/s
 * under pgbench (docs/performance.md, "VERDICT"); end to end, batches of
 * 64 ran a median 1.10x (C API) and 1.42x (HTTP) the one-row rotations at
 * 64 clients, 0.86x and 0.88x at 16 (docs/performance.md, "ROTATE"): on
 * by default (RB1).
 *
 *  RB1 The queue: og_store_options.rotate_batch_max rows per batch (64 by
 *      default), and admit_batches_in_flight batches at once; a batch
 *      closes when it is full or when nobody else waits, never on a timer
 *      (GQ1), and a lone rotation runs the one-row rotation unchanged.
 *      rotate_batch_max = 1 is no queue at all: every rotation its one-row
 *      statement at once (GQ5).
 *  RB2 Rows never meet: no two rows of a batch present one ticket (the
 *      queue's conflicts test keeps the later one for a later batch, GQ2;
 *      the test hook refuses such a batch, store.c). A row's successor is
 *      a fresh random ticket no other row names. Rows of one family may
 *      share a batch: the statement reads families and writes none, and a
 *      reuse revokes its family only after the statement, in a statement
 *      of its own as the one-row rotation does (I14), so the batch answers
 *      as its rotations run one by one with the reuses last — an order the
 *      concurrent callers could have had.
 *  RB3 One statement, one commit (prb_sql): the arrays unnest()ed WITH
 *      ORDINALITY; each old ticket's row locked FOR NO KEY UPDATE (the
 *      lock the one-row UPDATE takes) while unrotated, read by its key in
 *      a LATERAL subquery with LIMIT 1 over the requests sorted by hash,
 *      its family's liveness read by the family's key the same way; the
 *      locked rows of live families marked rotated, found by their keys as
 *      an array (= ANY: an index probe; as a join, the generic plan made
 *      on a new store's empty tickets hashed a sequential scan of it,
 *      docs/performance.md "VERDICT2" and "ROTATE"); each
 *      successor created from the UPDATE's RETURNING only; and for a row
 *      that rotated nothing, its ticket's state read from the statement's
 *      snapshot. A snapshot that shows the ticket unknown, or unrotated in
 *      a live family (a rotation committed while this one waited for the
 *      lock), is not an answer: that row gets the one-row state read, a
 *      statement of its own (og__pg_ticket_state). A reused ticket's
 *      family is revoked after the batch, by the family revocation
 *      statement, before that row is answered (M15, I14); if it fails,
 *      that row fails, as alone. A statement that aborts and is not
 *      unavailability rolls back every row (nothing was rotated), and that
 *      round falls back to the one-row rotation per row, which answers
 *      each exactly (the fault point rotate_batch_abort stands for it).
 *  RB4 The statement runs with the earliest deadline of its rows (GQ3);
 *      so does each one-row rotation of a fallback.
 *  RB5 No answer before ReadyForQuery (I1). An unconfirmed commit
 *      (connection lost, the wait for a synchronous standby cancelled, I3;
 *      the fault point rotate_batch_ack_lost) answers EVERY row
 *      OG_ESTORE_UNAVAILABLE: none of them is known to be committed. ONE
 *      read fence (I30) ends a batch that answers any row unknown or
 *      family revoked (read from a row this batch did not write); a failed
 *      fence answers those rows its error. A reuse's answer waits for its
 *      revocation's own commit.
 *  RB6 One lock order: the old tickets' rows sorted by hash, and nothing
 *      else (families are read, not locked; the one-row rotation locks its
 *      one ticket, a family revocation no ticket). Two batches, or a batch
 *      and a one-row rotation, never wait in a cycle.
 */
#include <stdlib.h>
#include <string.h>

#include "batch_run.h"

#define PRB_ROWS_MAX OG__BATCH_ROWS_MAX

/* ===========================================================================
 * The batched statement (RB3, RB6)
 *
 * Parameters (text format), one array element per row:
 *   $1 old_hash[]  $2 new_hash[]
 * Its rows, one per request: the request's ordinality, whether it rotated,
 * the ticket's issuer and family (NULL when unknown), whether the ticket
 * was found, was rotated before, and its family is revoked (NULL when it
 * rotated).
 * ========================================================================= */
/* The family of ticket t live, read by the family's key (no semi-join a
 * generic plan could hash over a scan of families). */
#define PRB_FAMILY_REVOKED(t)                                                  \
    "coalesce((SELECT f.revoked_at IS NOT NULL FROM families f\n"             \
    "          WHERE f.issuer = " t ".issuer AND f.family = " t ".family LIMIT 1), true)"

static const char prb_sql[] =
    "WITH req AS (\n"
    "  SELECT * FROM unnest($1::text[], $2::text[])\n"
    "    WITH ORDINALITY AS r (old_hash, new_hash, n)),\n"
    /* Locked in hash order, each by its key (RB6). */
    "lck AS MATERIALIZED (\n"
    "  SELECT q.n, q.old_hash, q.new_hash, t.issuer, t.family, t.revoked FROM (\n"
    "    SELECT * FROM req ORDER BY old_hash) q\n"
    "  CROSS JOIN LATERAL (SELECT t.issuer, t.family,\n"
    "                             " PRB_FAMILY_REVOKED("t") " AS revoked\n"
    "    FROM tickets t WHERE t.ticket_hash = q.old_hash AND t.rotated_at IS NULL\n"
    "    LIMIT 1 FOR NO KEY UPDATE OF t) t),\n"
    "old AS (\n"
    "  UPDATE tickets t SET rotated_at = statement_timestamp()\n"
    "  WHERE t.ticket_hash = ANY (ARRAY(SELECT old_hash FROM lck WHERE NOT revoked))\n"
    "    AND t.rotated_at IS NULL\n"
    "  RETURNING t.ticket_hash),\n"
    "rot AS MATERIALIZED (\n"
    "  SELECT l.n, l.new_hash, l.issuer, l.family FROM lck l\n"
    "  WHERE EXISTS (SELECT 1 FROM old o WHERE o.ticket_hash = l.old_hash)),\n"
    "ins AS (\n"
    "  INSERT INTO tickets (ticket_hash, issuer, family, created_at)\n"
    "  SELECT new_hash, issuer, family, clock_timestamp() FROM rot ORDER BY new_hash\n"
    "  RETURNING 1)\n"
    "SELECT n, true, issuer, family, NULL::bool, NULL::bool, NULL::bool\n"
    "FROM rot WHERE (SELECT count(*) FROM ins) >= 0\n"
    "UNION ALL\n"
    "SELECT r.n, false, s.issuer, s.family, s.issuer IS NOT NULL, s.rotated, s.revoked\n"
    "FROM req r\n"
    "LEFT JOIN LATERAL (SELECT t.issuer, t.family, t.rotated_at IS NOT NULL AS rotated,\n"
    "                          " PRB_FAMILY_REVOKED("t") " AS revoked\n"
    "                   FROM tickets t WHERE t.ticket_hash = r.old_hash LIMIT 1) s ON true\n"
    "WHERE NOT EXISTS (SELECT 1 FROM rot WHERE rot.n = r.n)";
/* Not static: oncegate explain shows it (explain.c, docs/plans.md). */
const og__pg_stmt og__pg_rotate_batch_stmt = {"og_rotate_batch", prb_sql, 2,
                                              OG_KEYS_AS_STORED};
enum {
    PRB_N,
    PRB_ROTATED,
    PRB_ISSUER,
    PRB_FAMILY,
    PRB_FOUND,
    PRB_WAS_ROTATED,
    PRB_REVOKED,
    PRB_NCOLS
};
enum { ARR_OLD, ARR_NEW, ARR_COUNT };

/* ===========================================================================
 * A batch of rotations (batch_run.c, BR1-BR6)
 * ========================================================================= */

/* A rotation in the queue: the store's row, and whether its answer was
 * read from a row this batch did not write (the read fence, RB5). */
typedef struct prb_req {
    og__rotate_row *r;
    bool fence;
} prb_req;

_Static_assert(ARR_COUNT <= OG__PG_BATCH_ARRAYS, "the arrays fit the args");
_Static_assert(PRB_N == 0, "the ordinality comes first (BR4)");

/* One row alone: the one-row rotation (grants.c) before deadline_us
 * (RB3, RB4). */
static int prb_one(og__pg_store *pg, void *row, int64_t deadline_us)
{
    return og__pg_ticket_rotate_one(pg, ((prb_req *)row)->r, deadline_us);
}

/* The batch's statement (RB3) over rows[0..n): the two arrays; 0, or
 * OG_ENOMEM (the round falls back). */
static int prb_bind(og__pg_store *pg, void *const *rows, int n,
                    og__pg_batch_args *a)
{
    (void)pg;
    for (int i = 0; i < n; i++) {
        const og__rotate_row *r = ((const prb_req *)rows[i])->r;

        og__pg_buf_elem(&a->arr[ARR_OLD], i, r->old_hash);
        og__pg_buf_elem(&a->arr[ARR_NEW], i, r->new_hash);
    }
    a->params[0] = a->arr[ARR_OLD].p;
    a->params[1] = a->arr[ARR_NEW].p;
    a->stmt = &og__pg_rotate_batch_stmt;
    return og__pg_bufs_end(a->arr, ARR_COUNT);
}

/* Result row i answers row (og__pg_batch_kind.answer): rotated, read after
 * ReadyForQuery (I1); or what the snapshot shows, with the one-row state
 * read when the snapshot is no answer (RB3) and the family revoked after
 * a reuse (M15, I14). That row's own failure into *rc. */
static int prb_answer(og__pg_store *pg, og__pg_conn *c, const PGresult *res,
                      int i, void *row, int *rc)
{
    prb_req *q = row;
    og__rotate_row *r = q->r;
    og__pg_ticket_seen seen;

    if (PQgetisnull(res, i, PRB_ROTATED))
        return OG_EINTERNAL; /* the statement and this file disagree */
    memset(&seen, 0, sizeof seen);
    if (og__pg_get_bool(res, i, PRB_ROTATED)) {
        r->outcome = OG_TICKET_ISSUED; /* confirmed at ReadyForQuery (I1) */
        if (og__pg_get_text(res, i, PRB_ISSUER, r->issuer,
                            sizeof r->issuer) != 0 ||
            og__pg_get_text(res, i, PRB_FAMILY, r->family,
                            sizeof r->family) != 0)
            return OG_EINTERNAL;
        *rc = 0;
        return 0;
    }
    if (!PQgetisnull(res, i, PRB_FOUND) && og__pg_get_bool(res, i, PRB_FOUND)) {
        seen.found = true;
        seen.rotated = og__pg_get_bool(res, i, PRB_WAS_ROTATED);
        seen.family_revoked = og__pg_get_bool(res, i, PRB_REVOKED);
        if (og__pg_get_text(res, i, PRB_ISSUER, seen.issuer,
                            sizeof seen.issuer) != 0 ||
            og__pg_get_text(res, i, PRB_FAMILY, seen.family,
                            sizeof seen.family) != 0)
            return OG_EINTERNAL;
    }
    /* RB3: unknown, or live in the snapshot, is no answer yet. */
    if ((!seen.found || (!seen.rotated && !seen.family_revoked)) &&
        (*rc = og__pg_ticket_state(pg, c, r->old_hash, &seen)) != 0)
        return 0;
    memcpy(r->issuer, seen.issuer, sizeof r->issuer);
    memcpy(r->family, seen.family, sizeof r->family);
    *rc = og__pg_ticket_refused(pg, c, &seen, &r->outcome, &q->fence);
    return 0;
}

/* RB5: ONE read fence (I30) after a batch that answered any row from a
 * row it did not write; its failure answers those rows that are unknown
 * or family revoked. */
static void prb_finish(og__pg_store *pg, og__pg_conn *c, void *const *rows,
                       int n, int *rcs)
{
    bool fence = false;
    int rc;

    for (int i = 0; i < n; i++)
        fence = fence || ((const prb_req *)rows[i])->fence;
    if (!fence || (rc = og__pg_read_fence(pg, c)) == 0)
        return;
    for (int i = 0; i < n; i++) {
        const og__rotate_row *r = ((const prb_req *)rows[i])->r;

        if (rcs[i] == 0 && (r->outcome == OG_TICKET_NOT_FOUND ||
                            r->outcome == OG_TICKET_FAMILY_REVOKED))
            rcs[i] = rc;
    }
}

/* No answer yet, or none when every row fails (BR3, BR4). */
static void prb_clear(void *row)
{
    prb_req *q = row;

    q->fence = false;
    q->r->outcome = OG_TICKET_NOT_FOUND;
    q->r->issuer[0] = q->r->family[0] = '\0';
}

/* RB2: row may not join a batch presenting its ticket already. */
static bool prb_conflicts(void *const *rows, int n, const void *row)
{
    const og__rotate_row *r = ((const prb_req *)row)->r;

    for (int i = 0; i < n; i++)
        if (strcmp(((const prb_req *)rows[i])->r->old_hash, r->old_hash) == 0)
            return true;
    return false;
}

static const og__pg_batch_kind prb_kind = {
    .one = prb_one,
    .bind = prb_bind,
    .answer = prb_answer,
    .finish = prb_finish,
    .clear = prb_clear,
    .conflicts = prb_conflicts,
    .ncols = PRB_NCOLS,
    .abort_fault = "rotate_batch_abort",
    .ack_lost_fault = "rotate_batch_ack_lost",
};

/* ===========================================================================
 * The store's side
 * ========================================================================= */

int og__pg_rotate_open(og__pg_store *pg, int in_flight, int max_rows)
{
    return og__pg_batch_new(pg, &prb_kind, in_flight, max_rows,
                            &pg->rotate_batch);
}

/* The store's method: one rotation through the queue (RB1), bounded by
 * the store timeout. */
int og__pg_ticket_rotate(void *impl, const char *old_hash,
                         const char *new_hash, og_ticket_outcome *out,
                         char *issuer, char *family)
{
    og__pg_store *pg = impl;
    og__rotate_row row;
    prb_req q = {&row, false};
    int rc;

    memset(&row, 0, sizeof row);
    if (og__copy(row.old_hash, sizeof row.old_hash, old_hash) != 0 ||
        og__copy(row.new_hash, sizeof row.new_hash, new_hash) != 0)
        return OG_EINTERNAL; /* lib/store/grants.c hashed them: a defect */
    if ((rc = og__pg_batch_submit(pg->rotate_batch, &q)) != 0)
        return rc;
    *out = row.outcome;
    if (issuer != NULL)
        memcpy(issuer, row.issuer, sizeof row.issuer);
    if (family != NULL)
        memcpy(family, row.family, sizeof row.family);
    return 0;
}

/* The test hook: rows[0..n) (RB2 holds: store.c checked) as ONE batch
 * bypassing the queue. */
int og__pg_rotate_batch(void *impl, og__rotate_row *rows, int n, int *rcs)
{
    og__pg_store *pg = impl;
    prb_req q[PRB_ROWS_MAX];
    void *ptrs[PRB_ROWS_MAX];

    if (n < 1 || n > PRB_ROWS_MAX)
        return OG_EINVAL;
    for (int i = 0; i < n; i++) {
        q[i].r = &rows[i];
        q[i].fence = false;
        ptrs[i] = &q[i];
    }
    return og__pg_batch_direct(pg->rotate_batch, ptrs, n, rcs);
}

void og__pg_rotate_stats(void *impl, og_admit_stats *out)
{
    og__pg_batch_stats(((og__pg_store *)impl)->rotate_batch, out);
}
