/*
 * admit_batch.c — group commit for PostgreSQL admissions: the callers of
 * one store object queue, and a leader admits what is queued in ONE
 * statement (one round trip, one commit) whose every row answers exactly
 * what the one-row statement (admit.c) would have answered. The store's
 * admission method (og__pg_admit) is here; admit.c keeps the one-row
 * statement, which a lone request still runs unchanged. The queue is the
 * shared one (lib/store/batcher.c, GQ1-GQ5) and a batch runs as every
 * PostgreSQL batch does (batch_run.c, BR1-BR6); what is the admissions'
 * own is below: the statement, the rule that rows never meet, the answers.
 *
 *  B1 Coalescing, never a timer (GQ1). A caller leads when fewer than
 *     og_store_options.admit_batches_in_flight batches of this store object
 *     run, and takes EVERYTHING queued at that moment that B2 admits, up to
 *     admit_batch_max rows; the others wait, each on its own condition
 *     variable. So a batch closes when it is full or when nobody else is
 *     waiting, and a lone request runs at once, as a batch of one, through
 *     the one-row statement (og__pg_admit_one) unchanged (BR1): batching
 *     adds no latency to it. admit_batch_max = 1 turns batching off (GQ5):
 *     every caller runs the one-row statement at once, with no queue and no
 *     bound but the pool's, as before group commit (each call still
 *     counted as a batch of one, BR6). The consume verdicts
 *     (consume_batch.c, CB1) and the outcome writes (outcome_batch.c, OB1)
 *     have queues of their own per store object, of the same shape.
 *  B2 Rows never meet. No two rows of a batch share a grant key (issuer,
 *     grant_id) or an operation id, and all rows of a batch are of one
 *     grant form (og__pg_req_conflicts, the queue's conflicts test): a
 *     request that would break this stays queued, in order, for a later
 *     batch (GQ2). So no row's claim, insert or report can see or
 *     wait for another row of its own statement, and each row's answer is
 *     what the one-row statement would have answered at that instant.
 *  B3 One statement, one commit (pg_admit_batch_sql): arrays bound as
 *     parameters and unnest()ed WITH ORDINALITY; each row claims its own key
 *     with its own ON CONFLICT (token form) or conditional UPDATE of its
 *     grant's row (row form), in the readable or the hashed instance (I9);
 *     its deadline on statement_timestamp() (I5); its family locked as
 *     PG_FAMILY_CTE does (advisory lock shared, then the family's row FOR
 *     SHARE and live; I6, I7; a row with no family skips it); the archived
 *     id check (I12); its operation inserted from the claim's RETURNING only
 *     (I10); and for a row that claimed nothing, the report from the
 *     statement's snapshot (I11) — ONE implicit transaction, confirmed at
 *     ReadyForQuery (I1). A failure that aborts the statement and is not
 *     unavailability — a unique violation on operations (I4: an operation id
 *     taken by another grant's operation, an operation already holding the
 *     grant), or any other error one row can cause — rolls back every row
 *     (nothing was claimed), and that round falls back to the one-row
 *     statement per row, which answers each exactly (BR2).
 *  B4 Deadlines as SQLite's G3 (GQ3): a caller whose deadline (its
 *     store_timeout, from the call) passes while queued leaves with
 *     OG_ESTORE_UNAVAILABLE, nothing of it having run; a batch's statement
 *     runs with the earliest deadline of its rows (BR5).
 *  B5 An unconfirmed commit (connection lost, the wait for a synchronous
 *     standby cancelled, I3; the fault point admit_batch_ack_lost) answers
 *     EVERY row OG_ESTORE_UNAVAILABLE, never an outcome (BR3): none of them
 *     is known to be committed. A row that claimed nothing and whose holder the
 *     snapshot missed gets the one-row follow-up read (og__pg_consumption,
 *     fenced in its own commit: I30), and a failure of that read answers
 *     that row its error. The read fence (I30) of every other row that
 *     claimed nothing is folded into the statement: ONE transactional
 *     logical message (pgb_fence), emitted only when at least one row
 *     claimed nothing, makes the batch's own commit wait for a synchronous
 *     standby even when it wrote nothing else — so a cancelled wait is this
 *     rule's unconfirmed commit, and an all-replay batch is still one round
 *     trip.
 *  B6 One lock order. A batch takes its locks in one global order: the
 *     families' advisory locks (sorted by key), the families' rows (sorted),
 *     the grants' rows (row form, sorted), the consumption keys (sorted by
 *     issuer, grant_id) and the operation ids (sorted): every lock it waits
 *     for comes after every lock it holds. Two batches, or a batch and a
 *     revocation (which takes one family's locks before its grants', I7),
 *     therefore never wait for each other in a cycle, as two one-row
 *     statements, which hold one key each, never do.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "batch_run.h"

/* ===========================================================================
 * The batched statement (B3, B6)
 *
 * Parameters (text format), one array element per row, in the order of
 * the rows:
 *   $1 issuer[]   $2 grant_id[]   $3 operation_id[] (uuid)
 *   $4 expires_at[] (bigint µs; the row form ignores it: the grant's row
 *      carries the trusted one)
 *   $5 caller[]   $6 account[]   $7 amount[] (canonical)   $8 currency[]
 *   $9 admission leeway   $10 execution lease   $11 submission window
 *   $12 initial owner version   $13 family[] (NULL elements: none)
 * Its rows, one per request (any order): the request's ordinality, then
 * as pg_admit_sql's one row.
 * ========================================================================= */

/* The requests, one row each, numbered n = 1.. in the order bound. */
#define PGB_REQ_CTE                                                            \
    "req AS (\n"                                                               \
    "  SELECT * FROM unnest($1::text[], $2::text[], $3::uuid[], $4::bigint[],\n" \
    "                       $5::text[], $6::text[], $7::text[], $8::text[], $13::text[])\n" \
    "    WITH ORDINALITY AS r (issuer, grant_id, op, expires_at, caller, account,\n" \
    "                          amount, currency, family, n))"

/* Token form: each row's own INSERT ... ON CONFLICT DO NOTHING on its key,
 * in the order of the keys (the Sort reads every row, and so evaluates
 * every family check, before the first insert). RETURNING the key and the
 * operation id: what ties a claim to its request (B2: both unique in the
 * batch). */
#define PGB_CLAIM_TOKEN(K)                                                     \
    "claim AS (\n"                                                             \
    "  " PG_CLAIM_INTO(K) "\n"                                                 \
    "  SELECT " PG_KVALS_##K("r.issuer", "r.grant_id") ", r.op, statement_timestamp(), d.admit_until, 'admission'\n" \
    "  FROM req r CROSS JOIN LATERAL (SELECT " PG_TS("r.expires_at") " + " PG_US("$9") " AS admit_until) d\n" \
    "  WHERE d.admit_until > statement_timestamp()\n"                          \
    "    AND (SELECT locked FROM famn) >= 0\n"                                 \
    "    AND " PG_BATCH_FAMILY_LIVE "\n"                                            \
    "    AND " PG_BATCH_OP_ID_NOT_ARCHIVED("r.op") "\n"                              \
    "  ORDER BY r.issuer, r.grant_id\n"                                        \
    "  " PG_ON_KEY_CONFLICT(K) "\n"                                            \
    "  RETURNING " PG_KCOLS_##K ", operation_id)"
#define PGB_CLAIM_TOKEN_JOIN(K)                                                \
    PG_KEQ_##K("c.", "r.issuer", "r.grant_id") " AND c.operation_id = r.op"

/* Row form: the grants' rows locked in their order (lck, after the
 * families: B6), then each row's conditional UPDATE, whose conditions Read
 * Committed re-checks on the newest version after any wait, as the one-row
 * UPDATE's (I10). */
#define PGB_CLAIM_ROW                                                          \
    PG_BATCH_GRANTS_LCK ",\n"                                                 \
    "claim AS (\n"                                                             \
    "  UPDATE grants g SET consumed_at = statement_timestamp(), consumed_by_operation = r.op\n" \
    "  FROM req r\n"                                                           \
    "  WHERE g.issuer = r.issuer AND g.grant_id = r.grant_id\n"                \
    "    AND g.consumed_at IS NULL AND g.revoked_at IS NULL\n"                 \
    "    AND g.expires_at + " PG_US("$9") " > statement_timestamp()\n"         \
    "    AND (SELECT count(*) FROM lck) >= 0\n"                                \
    "    AND " PG_BATCH_FAMILY_LIVE "\n"                                            \
    "    AND " PG_BATCH_OP_ID_NOT_ARCHIVED("r.op") "\n"                              \
    "  RETURNING g.issuer, g.grant_id, r.op AS operation_id)"
#define PGB_CLAIM_ROW_JOIN                                                     \
    "c.issuer = r.issuer AND c.grant_id = r.grant_id AND c.operation_id = r.op"

/* The read fence (I30, B5), once per batch: a CTE that calls a volatile
 * function is never inlined, so it runs at most once, and only when the
 * report's rows read it — the scalar subquery over it is an InitPlan,
 * evaluated when the first report row is projected. A batch whose every
 * row claimed never emits it; one with any row that claimed nothing emits
 * exactly one message, and its commit waits for the standby. */
#define PGB_FENCE_CTE "pgb_fence AS (SELECT " PG_READ_FENCE_EXPR " AS lsn),\n"

/* The tail: each claimed row's operation, from the claim's RETURNING only
 * (I10; in the order of the ids, B6), then one row per request — the new
 * operation (PGB_TAIL_INS), or what holds the key read from the
 * statement's snapshot (I11, PGB_TAIL_REPORT) with the read fence's
 * column, as pg_admit_sql's tail. join ties a claim to its request; K the
 * consumption keys (I9).
 * The report reads each table by the request's key in a LATERAL subquery
 * with LIMIT 1 (the keys are unique: the same row, or none), which the
 * planner cannot flatten into a join: each lookup is a probe of the key's
 * index, as in the one-row statement, whatever the table's statistics say.
 * As plain joins, a generic plan made while the tables were small (a new
 * store, statistics not yet gathered) hashed a sequential scan of
 * grant_consumptions on every batch until the next ANALYZE: the
 * first-replay regression of docs/performance.md (FENCE). */
#define PGB_TAIL_INS(join)                                                     \
    PGB_FENCE_CTE                                                              \
    "ins AS (\n"                                                               \
    "  INSERT INTO operations (operation_id, issuer, grant_id, caller_id, account_id, amount, currency,\n" \
    "    status, owner_version, lease_until, submit_by, created_at)\n"        \
    "  SELECT r.op, r.issuer, r.grant_id, r.caller, r.account, r.amount::numeric, r.currency,\n" \
    "         'Admitted', $12::bigint, t.now + " PG_US("$10") ", t.now + " PG_US("$11") ", t.now\n" \
    "  FROM claim c JOIN req r ON " join "\n"                                  \
    "  CROSS JOIN LATERAL (SELECT clock_timestamp() AS now) t\n"               \
    "  ORDER BY r.op\n"                                                        \
    "  RETURNING operation_id AS k, " PG_OP_COLUMNS_NEW("") ")\n"              \
    "SELECT r.n, true, ins.*, NULL::bool, NULL::text, NULL::text, NULL::bool,\n" \
    "       NULL::bool, NULL::text, NULL::bool, NULL::bool, NULL::bool,\n"     \
    "       NULL::pg_lsn\n"                                                    \
    "FROM ins JOIN req r ON r.op = ins.k\n"
#define PGB_TAIL_REPORT(K)                                                     \
    "UNION ALL\n"                                                              \
    "SELECT r.n, false, r.op, " PG_OP_COLUMNS_REPORT("o.") ",\n"               \
    "       " PG_UNCLAIMED_COLUMNS("r.family", K) ",\n"                        \
    "       (SELECT f.lsn FROM pgb_fence f)\n"                                 \
    "FROM req r\n"                                                             \
    PG_BATCH_REPORT_JOINS(K)                                                   \
    "LEFT JOIN LATERAL (" PG_OP_LIVE_OR_ARCHIVED("r.op", PG_OP_STORED_COLS_V7) ") o ON true\n" \
    "WHERE NOT EXISTS (SELECT 1 FROM ins WHERE ins.k = r.op)"

/* Each statement is longer than the 4095 characters of one literal ISO C
 * guarantees, so it is written as three literals (its head, the insert,
 * the report) and joined once, before the first store object opens
 * (og__pg_admit_open, which joins admit.c's one-row statements too), into
 * a buffer the descriptor names. */
#define PGB_HEAD_TOKEN(K)                                                      \
    "WITH " PGB_REQ_CTE ",\n" PG_BATCH_FAMILY_CTES ",\n" PGB_CLAIM_TOKEN(K) ",\n"
#define PGB_HEAD_ROW                                                           \
    "WITH " PGB_REQ_CTE ",\n" PG_BATCH_FAMILY_CTES ",\n" PGB_CLAIM_ROW ",\n"
enum { PGB_TOKEN, PGB_TOKEN_HASHED, PGB_ROW, PGB_ROW_HASHED, PGB_NSTMTS };
static const char *const pgb_parts[PGB_NSTMTS][3] = {
    [PGB_TOKEN] = {PGB_HEAD_TOKEN(READABLE),
                   PGB_TAIL_INS(PGB_CLAIM_TOKEN_JOIN(READABLE)),
                   PGB_TAIL_REPORT(READABLE)},
    [PGB_TOKEN_HASHED] = {PGB_HEAD_TOKEN(HASHED),
                          PGB_TAIL_INS(PGB_CLAIM_TOKEN_JOIN(HASHED)),
                          PGB_TAIL_REPORT(HASHED)},
    [PGB_ROW] = {PGB_HEAD_ROW, PGB_TAIL_INS(PGB_CLAIM_ROW_JOIN),
                 PGB_TAIL_REPORT(READABLE)},
    [PGB_ROW_HASHED] = {PGB_HEAD_ROW, PGB_TAIL_INS(PGB_CLAIM_ROW_JOIN),
                        PGB_TAIL_REPORT(HASHED)},
};
#define PGB_SQL_MAX 8192
static char pgb_sql[PGB_NSTMTS][PGB_SQL_MAX];
static pthread_once_t pgb_sql_once = PTHREAD_ONCE_INIT;

static void pgb_sql_join(void)
{
    for (int i = 0; i < PGB_NSTMTS; i++)
        og__pg_sql_join(pgb_sql[i], PGB_SQL_MAX, pgb_parts[i], 3);
}

const og__pg_stmt og__pg_admit_batch_stmt = {
    "og_admit_batch", pgb_sql[PGB_TOKEN], 13, OG_KEYS_READABLE};
const og__pg_stmt og__pg_admit_batch_hashed_stmt = {
    "og_admit_batch_hashed", pgb_sql[PGB_TOKEN_HASHED], 13, OG_KEYS_HASHED};
const og__pg_stmt og__pg_admit_batch_row_stmt = {
    "og_admit_batch_row", pgb_sql[PGB_ROW], 13, OG_KEYS_READABLE};
const og__pg_stmt og__pg_admit_batch_row_hashed_stmt = {
    "og_admit_batch_row_hashed", pgb_sql[PGB_ROW_HASHED], 13,
    OG_KEYS_HASHED};
/* Its rows: the request's ordinality, whether it admitted, its operation
 * id, then as pg_admit_sql's row (the read fence's column last, not
 * read). */
enum {
    BATCH_N,
    BATCH_ADMITTED,
    BATCH_KEY,
    BATCH_OP,
    BATCH_HOLDER = BATCH_OP + OP_NCOLS,
    BATCH_FENCE = BATCH_HOLDER + UNCLAIMED_NCOLS,
    BATCH_NCOLS
};

/* ===========================================================================
 * A batch of admissions (batch_run.c, BR1-BR6)
 * ========================================================================= */

/* One admission in the queue: its request (first, as og__pg_req_conflicts
 * reads it), and where its answer goes. */
typedef struct pgb_row {
    const og__admit_req *req;
    og_admission *out;
} pgb_row;

/* The request of a row whose first member is its request: an admission's,
 * a verdict's (consume_batch.c). */
static const og__admit_req *pgb_req(const void *row)
{
    return *(const og__admit_req *const *)row;
}

enum {
    ARR_ISSUER,
    ARR_GRANT,
    ARR_OP,
    ARR_EXPIRES,
    ARR_CALLER,
    ARR_ACCOUNT,
    ARR_AMOUNT,
    ARR_CURRENCY,
    ARR_FAMILY,
    ARR_COUNT
};

_Static_assert(ARR_COUNT <= OG__PG_BATCH_ARRAYS, "the arrays fit the args");
_Static_assert(BATCH_N == 0, "the ordinality comes first (BR4)");

/* The batch's statement (B3) over rows[0..n): the nine arrays, the
 * parameters, the statement of the rows' form and keys; 0, or OG_ENOMEM
 * (the round falls back, BR2). */
static int pgb_bind(og__pg_store *pg, void *const *rows, int n,
                    og__pg_batch_args *a)
{
    og__pg_buf *arr = a->arr;
    char expires[24];
    int rc;

    for (int i = 0; i < n; i++) {
        const og__admit_req *q = pgb_req(rows[i]);

        og__pg_fmt_i64(expires, sizeof expires, q->expires_at_us);
        og__pg_buf_elem(&arr[ARR_ISSUER], i, q->issuer);
        og__pg_buf_elem(&arr[ARR_GRANT], i, q->grant_id);
        og__pg_buf_elem(&arr[ARR_OP], i, q->operation_id);
        og__pg_buf_elem(&arr[ARR_EXPIRES], i, expires);
        og__pg_buf_elem(&arr[ARR_CALLER], i, q->caller_id);
        og__pg_buf_elem(&arr[ARR_ACCOUNT], i, q->account_id);
        og__pg_buf_elem(&arr[ARR_AMOUNT], i, q->amount);
        og__pg_buf_elem(&arr[ARR_CURRENCY], i, q->currency);
        og__pg_buf_elem(&arr[ARR_FAMILY], i, q->family[0] ? q->family : NULL);
    }
    if ((rc = og__pg_bufs_end(arr, ARR_COUNT)) != 0)
        return rc;
    a->params[0] = arr[ARR_ISSUER].p;
    a->params[1] = arr[ARR_GRANT].p;
    a->params[2] = arr[ARR_OP].p;
    a->params[3] = arr[ARR_EXPIRES].p;
    a->params[4] = arr[ARR_CALLER].p;
    a->params[5] = arr[ARR_ACCOUNT].p;
    a->params[6] = arr[ARR_AMOUNT].p;
    a->params[7] = arr[ARR_CURRENCY].p;
    a->params[8] = pg->leeway;
    a->params[9] = pg->lease;
    a->params[10] = pg->window;
    a->params[11] = PG_STR(OG__INITIAL_OWNER_VERSION);
    a->params[12] = arr[ARR_FAMILY].p;
    a->stmt = pgb_req(rows[0])->form == OG_FORM_ROW
                  ? og__pg_keyed(pg, &og__pg_admit_batch_row_stmt,
                                 &og__pg_admit_batch_row_hashed_stmt)
                  : og__pg_keyed(pg, &og__pg_admit_batch_stmt,
                                 &og__pg_admit_batch_hashed_stmt);
    return 0;
}

/* Result row i answers row (og__pg_batch_kind.answer): its admission, or
 * its error in *rc. A row that claimed nothing was fenced by the
 * statement's own commit (pgb_fence, I30, B5). */
static int pgb_answer(og__pg_store *pg, og__pg_conn *c, const PGresult *res,
                      int i, void *row, int *rc)
{
    const pgb_row *r = row;
    og_admission result;
    og__consumption cons;
    og_operation op;
    bool have_op = false;

    memset(&result, 0, sizeof result);
    if (og__pg_get_bool(res, i, BATCH_ADMITTED)) {
        /* Confirmed at ReadyForQuery (I1). */
        if ((*rc = og__pg_op_parse(res, i, BATCH_OP, &result.operation)) != 0)
            return 0;
        result.outcome = OG_OUTCOME_ADMITTED;
        result.refusal = OG_REFUSAL_NONE;
        *r->out = result;
        return 0;
    }
    *rc = og__pg_unclaimed_parse(res, i, BATCH_HOLDER, BATCH_OP, r->req, true,
                                 &cons, &op, &have_op);
    if (*rc == 0 && !cons.present) /* I11: the snapshot missed the holder */
        *rc = og__pg_consumption(pg, c, r->req, true, &cons, &op, &have_op);
    if (*rc != 0)
        return 0;
    og__classify_unclaimed(r->req, &cons, have_op ? &op : NULL, &result);
    *r->out = result;
    return 0;
}

/* A batch of one, and each row of a fallback (B3): the one-row statement
 * (admit.c). */
static int pgb_one(og__pg_store *pg, void *row, int64_t deadline_us)
{
    const pgb_row *r = row;

    return og__pg_admit_one(pg, r->req, deadline_us, r->out);
}

bool og__pg_req_conflicts(void *const *rows, int n, const void *row,
                          bool by_operation)
{
    const og__admit_req *q = pgb_req(row);

    if (pgb_req(rows[0])->form != q->form)
        return true;
    for (int i = 0; i < n; i++) {
        const og__admit_req *p = pgb_req(rows[i]);

        if ((by_operation && strcmp(p->operation_id, q->operation_id) == 0) ||
            (strcmp(p->grant_id, q->grant_id) == 0 &&
             strcmp(p->issuer, q->issuer) == 0))
            return true;
    }
    return false;
}

/* B2: row may not join rows[0..n) when it is of another form than theirs,
 * or shares a grant key or an operation id with one of them. */
static bool pgb_conflicts(void *const *rows, int n, const void *row)
{
    return og__pg_req_conflicts(rows, n, row, true);
}

static const og__pg_batch_kind pgb_kind = {
    .one = pgb_one,
    .bind = pgb_bind,
    .answer = pgb_answer,
    .conflicts = pgb_conflicts,
    .ncols = BATCH_NCOLS,
    .ack_lost_fault = "admit_batch_ack_lost",
};

/* ===========================================================================
 * The store's side
 * ========================================================================= */

int og__pg_admit_open(og__pg_store *pg, int in_flight, int max_rows)
{
    pthread_once(&pgb_sql_once, pgb_sql_join);
    og__pg_admit_sql_join();
    return og__pg_batch_new(pg, &pgb_kind, in_flight, max_rows,
                            &pg->admit_batch);
}

/* One admission through the queue (B1), bounded by the store timeout. */
int og__pg_admit(void *impl, const og__admit_req *req, og_admission *out)
{
    og__pg_store *pg = impl;
    og_admission a;
    pgb_row r = {req, &a};
    int rc = og__pg_batch_submit(pg->admit_batch, &r);

    if (rc == 0)
        *out = a;
    return rc;
}

int og__pg_admit_batch(void *impl, const og__admit_req *reqs, int n,
                       og_admission *outs, int *rcs)
{
    og__pg_store *pg = impl;
    pgb_row r[OG__BATCH_ROWS_MAX];
    void *rows[OG__BATCH_ROWS_MAX];

    if (n < 1 || n > OG__BATCH_ROWS_MAX)
        return OG_EINVAL;
    for (int i = 0; i < n; i++) {
        r[i] = (pgb_row){&reqs[i], &outs[i]};
        rows[i] = &r[i];
    }
    return og__pg_batch_direct(pg->admit_batch, rows, n, rcs);
}

void og__pg_admit_stats(void *impl, og_admit_stats *out)
{
    og__pg_batch_stats(((og__pg_store *)impl)->admit_batch, out);
}
