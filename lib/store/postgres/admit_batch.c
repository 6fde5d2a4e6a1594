/*
 * admit_batch.c — group commit for PostgreSQL admissions: the callers of
 * one store object queue, and a leader admits what is queued in ONE
 * statement (one round trip, one commit) whose every row answers exactly
 * what the one-row statement (admit.c) would have answered. The store's
 * admission method (og__pg_admit) is here; admit.c keeps the one-row
 * statement, which a lone request still runs unchanged.
 *
 *  B1 Coalescing, never a timer. A caller leads when fewer than
 *     og_store_options.admit_batches_in_flight batches of this store object
 *     run, and takes EVERYTHING queued at that moment that B2 admits, up to
 *     admit_batch_max rows; the others wait on the condition variable. So a
 *     batch closes when it is full or when nobody else is waiting, and a
 *     lone request runs at once, as a batch of one, through the one-row
 *     statement (og__pg_admit_one) unchanged: batching adds no latency to
 *     it. admit_batch_max = 1 turns batching off: every caller runs the
 *     one-row statement at once, with no queue and no bound but the pool's,
 *     as before group commit (each call still counted as a batch of one).
 *     The consume verdict's group commit (consume_batch.c, CB1) is a
 *     second queue of this shape per store object (og__pg_batcher_new's
 *     kind); its batches run there.
 *  B2 Rows never meet. No two rows of a batch share a grant key (issuer,
 *     grant_id) or an operation id, and all rows of a batch are of one
 *     grant form: a request that would break this stays queued, in order,
 *     for a later batch. So no row's claim, insert or report can see or
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
 *     statement per row, which answers each exactly.
 *  B4 Deadlines as SQLite's G3: a caller whose deadline (its
 *     store_timeout, from the call) passes while queued leaves with
 *     OG_ESTORE_UNAVAILABLE, nothing of it having run; a batch's statement
 *     runs with the earliest deadline of its rows.
 *  B5 An unconfirmed commit (connection lost, the wait for a synchronous
 *     standby cancelled, I3; the fault point admit_batch_ack_lost) answers
 *     EVERY row OG_ESTORE_UNAVAILABLE, never an outcome: none of them is
 *     known to be committed. A row that claimed nothing and whose holder the
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
#include <time.h>

#include "internal.h"

/* The most rows one batch may hold (og_store_options.admit_batch_max is
 * checked against it by store.c). */
#define PGB_ROWS_MAX OG_ADMIT_BATCH_MAX

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
 * (og__pg_batcher_new, which joins admit.c's one-row statements too), into
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
 * The parameters: text[] literals
 * ========================================================================= */

void og__pg_buf_put(og__pg_buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        char *p;

        while (cap < b->len + n + 1)
            cap *= 2;
        if ((p = realloc(b->p, cap)) == NULL) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void og__pg_buf_elem(og__pg_buf *b, int i, const char *v)
{
    og__pg_buf_put(b, i == 0 ? "{" : ",", 1);
    if (v == NULL) {
        og__pg_buf_put(b, "NULL", 4);
        return;
    }
    og__pg_buf_put(b, "\"", 1);
    for (; *v; v++) {
        if (*v == '"' || *v == '\\')
            og__pg_buf_put(b, "\\", 1);
        og__pg_buf_put(b, v, 1);
    }
    og__pg_buf_put(b, "\"", 1);
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

/* The nine arrays of reqs[0..n) (n >= 1); 0, or OG_ENOMEM. */
static int pgb_arrays(const og__admit_req *const *reqs, int n,
                      og__pg_buf arr[ARR_COUNT])
{
    char expires[24];
    int i, a;

    for (i = 0; i < n; i++) {
        const og__admit_req *q = reqs[i];

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
    for (a = 0; a < ARR_COUNT; a++) {
        og__pg_buf_put(&arr[a], "}", 1);
        if (arr[a].oom)
            return OG_ENOMEM;
    }
    return 0;
}

/* ===========================================================================
 * Running one batch
 * ========================================================================= */

/* One row of the result into *out (0), or the error. A row that claimed
 * nothing was fenced by the statement's own commit (pgb_fence, I30). */
static int pgb_row(og__pg_store *pg, og__pg_conn *c, const PGresult *res,
                   int row, const og__admit_req *req, og_admission *out)
{
    og_admission result;
    og__consumption cons;
    og_operation op;
    bool have_op = false;
    int rc;

    memset(&result, 0, sizeof result);
    if (og__pg_get_bool(res, row, BATCH_ADMITTED)) {
        /* Confirmed at ReadyForQuery (I1). */
        if ((rc = og__pg_op_parse(res, row, BATCH_OP, &result.operation)) != 0)
            return rc;
        result.outcome = OG_OUTCOME_ADMITTED;
        result.refusal = OG_REFUSAL_NONE;
        *out = result;
        return 0;
    }
    rc = og__pg_unclaimed_parse(res, row, BATCH_HOLDER, BATCH_OP, req, true,
                                &cons, &op, &have_op);
    if (rc == 0 && !cons.present) /* I11: the snapshot missed the holder */
        rc = og__pg_consumption(pg, c, req, true, &cons, &op, &have_op);
    if (rc != 0)
        return rc;
    og__classify_unclaimed(req, &cons, have_op ? &op : NULL, &result);
    *out = result;
    return 0;
}

/* Runs reqs[0..n) (n >= 2, B2 holds) as ONE statement on a connection of
 * its own, with deadline_us (B4). 0 and outs/rcs, or OG__PG_REFUSE /
 * another error when the statement aborted whole and nothing of it is
 * committed (the caller falls back, B3); OG_ESTORE_UNAVAILABLE fills every
 * rcs (B5). */
static int pgb_statement(og__pg_store *pg, const og__admit_req *const *reqs,
                         int n, int64_t deadline_us, og_admission *outs,
                         int *rcs)
{
    og__pg_buf arr[ARR_COUNT];
    char owner[24], constraint[64];
    const char *params[13];
    const og__pg_stmt *stmt;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    bool seen[PGB_ROWS_MAX];
    int rc, i;

    memset(arr, 0, sizeof arr);
    memset(seen, 0, sizeof seen);
    constraint[0] = '\0';
    if ((rc = pgb_arrays(reqs, n, arr)) != 0)
        goto out;
    og__pg_fmt_i64(owner, sizeof owner, OG__INITIAL_OWNER_VERSION);
    params[0] = arr[ARR_ISSUER].p;
    params[1] = arr[ARR_GRANT].p;
    params[2] = arr[ARR_OP].p;
    params[3] = arr[ARR_EXPIRES].p;
    params[4] = arr[ARR_CALLER].p;
    params[5] = arr[ARR_ACCOUNT].p;
    params[6] = arr[ARR_AMOUNT].p;
    params[7] = arr[ARR_CURRENCY].p;
    params[8] = pg->leeway;
    params[9] = pg->lease;
    params[10] = pg->window;
    params[11] = owner;
    params[12] = arr[ARR_FAMILY].p;
    stmt = reqs[0]->form == OG_FORM_ROW
               ? og__pg_keyed(pg, &og__pg_admit_batch_row_stmt,
                              &og__pg_admit_batch_row_hashed_stmt)
               : og__pg_keyed(pg, &og__pg_admit_batch_stmt,
                              &og__pg_admit_batch_hashed_stmt);

    if ((rc = og__pg_acquire(pg, &c)) != 0)
        goto all; /* nothing ran */
    rc = og__pg_exec_prepared_until(pg, c, stmt, params, &res, constraint,
                                    sizeof constraint, deadline_us);
    if (rc == OG_ESTORE_UNAVAILABLE)
        goto all; /* B5: not confirmed, whatever it did */
    if (rc != 0)
        goto out; /* aborted whole: nothing is committed (B3) */
    if (og__fault("admit_batch_ack_lost")) {
        /* tests only (fault.c): committed, the acknowledgment lost */
        c->broken = true;
        rc = OG_ESTORE_UNAVAILABLE;
        goto all;
    }
    if (PQntuples(res) != n || og__pg_shape(res, BATCH_NCOLS, n) != 0) {
        rc = OG_EINTERNAL;
        goto all;
    }
    for (i = 0; i < n; i++) {
        int64_t k;

        if (og__pg_get_i64(res, i, BATCH_N, &k) != 0 || k < 1 || k > n ||
            seen[k - 1]) {
            rc = OG_EINTERNAL; /* the statement and this file disagree */
            goto all;
        }
        seen[k - 1] = true;
        rcs[k - 1] = pgb_row(pg, c, res, i, reqs[k - 1], &outs[k - 1]);
    }
    rc = 0;
    goto out;
all:
    for (i = 0; i < n; i++)
        rcs[i] = rc;
    rc = 0;
out:
    PQclear(res);
    if (c != NULL)
        og__pg_release(pg, c);
    for (i = 0; i < ARR_COUNT; i++)
        free(arr[i].p);
    return rc;
}

/* Admits reqs[0..n) as one batch (B1-B5): a batch of one through the one-row
 * statement; else the batched statement, or, when it aborted whole, the
 * one-row statement per row (B3). Fills outs/rcs; *fell_back. */
static void pgb_run(og__pg_store *pg, const og__admit_req *const *reqs, int n,
                    int64_t deadline_us, og_admission *outs, int *rcs,
                    bool *fell_back)
{
    int rc, i;

    *fell_back = false;
    if (n == 1) {
        rcs[0] = og__pg_admit_one(pg, reqs[0], deadline_us, &outs[0]);
        return;
    }
    rc = pgb_statement(pg, reqs, n, deadline_us, outs, rcs);
    if (rc == 0)
        return;
    *fell_back = true;
    for (i = 0; i < n; i++)
        rcs[i] = og__pg_admit_one(pg, reqs[i], deadline_us, &outs[i]);
}

/* ===========================================================================
 * The queue (B1, B2, B4)
 * ========================================================================= */

typedef struct pgb_waiter {
    const og__admit_req *req;
    og__pg_answer res; /* of the batcher's kind */
    int rc;
    int64_t deadline_us;
    bool taken; /* in a batch: its result is coming */
    bool done;
    /* Its own condition variable (CLOCK_MONOTONIC): a finished batch wakes
     * its own callers and the one caller at the head of the queue, who may
     * lead next, rather than every waiting thread. */
    pthread_cond_t cv;
    struct pgb_waiter *next;
} pgb_waiter;

struct og__pg_batcher {
    og__pg_batch_kind kind; /* admissions, or consume verdicts (CB1) */
    pthread_mutex_t mu;
    pthread_condattr_t ca; /* CLOCK_MONOTONIC, for the waiters' */
    pgb_waiter *head, *tail;
    int running;   /* batches in flight */
    int in_flight; /* at most this many */
    int max_rows;  /* rows per batch */
    og_admit_stats stats;
};

og__pg_batcher *og__pg_batcher_new(og__pg_batch_kind kind, int in_flight,
                                   int max_rows)
{
    og__pg_batcher *b = calloc(1, sizeof *b);

    pthread_once(&pgb_sql_once, pgb_sql_join);
    og__pg_admit_sql_join();
    if (b == NULL)
        return NULL;
    b->kind = kind;
    b->in_flight = in_flight < 1 ? 1 : in_flight;
    b->max_rows = max_rows < 1 ? 1 : max_rows > PGB_ROWS_MAX ? PGB_ROWS_MAX
                                                             : max_rows;
    pthread_mutex_init(&b->mu, NULL);
    pthread_condattr_init(&b->ca);
    pthread_condattr_setclock(&b->ca, CLOCK_MONOTONIC);
    return b;
}

void og__pg_batcher_free(og__pg_batcher *b)
{
    if (b == NULL)
        return;
    pthread_condattr_destroy(&b->ca);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

/* Whether q shares a grant key or (admissions: a consume verdict has no
 * operation) an operation id with batch[0..n) (B2, CB2). */
static bool pgb_conflicts(const og__pg_batcher *b, pgb_waiter *const *batch,
                          int n, const og__admit_req *q)
{
    for (int i = 0; i < n; i++) {
        const og__admit_req *p = batch[i]->req;

        if ((b->kind == OG__PG_BATCH_ADMIT &&
             strcmp(p->operation_id, q->operation_id) == 0) ||
            (strcmp(p->grant_id, q->grant_id) == 0 &&
             strcmp(p->issuer, q->issuer) == 0))
            return true;
    }
    return false;
}

/* Takes a batch off the queue (with mu): in order, every waiter of the
 * first one's form that B2 admits, up to max_rows; a waiter past its
 * deadline leaves with OG_ESTORE_UNAVAILABLE, nothing of it run (B4). */
static int pgb_take(og__pg_batcher *b, pgb_waiter **batch, int64_t now)
{
    pgb_waiter **pp = &b->head, *prev = NULL;
    int n = 0;

    while (*pp != NULL && n < b->max_rows) {
        pgb_waiter *w = *pp;
        bool expired = now >= w->deadline_us;

        if (!expired && n > 0 &&
            (w->req->form != batch[0]->req->form ||
             pgb_conflicts(b, batch, n, w->req))) {
            prev = w; /* stays queued, in order */
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        if (b->tail == w)
            b->tail = prev;
        w->next = NULL;
        if (expired) {
            w->rc = OG_ESTORE_UNAVAILABLE;
            w->done = true;
            pthread_cond_signal(&w->cv);
            continue;
        }
        w->taken = true;
        batch[n++] = w;
    }
    return n;
}

static void pgb_unqueue(og__pg_batcher *b, pgb_waiter *w)
{
    pgb_waiter **pp = &b->head, *prev = NULL;

    while (*pp != NULL && *pp != w) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (*pp != NULL) {
        *pp = w->next;
        if (b->tail == w)
            b->tail = prev;
    }
}

/* Wakes the caller at the head of the queue when a batch may start (with
 * mu): it leads next (B1). */
static void pgb_wake_head(og__pg_batcher *b)
{
    if (b->head != NULL && b->running < b->in_flight)
        pthread_cond_signal(&b->head->cv);
}

static struct timespec pgb_abs_mono(int64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
    return ts;
}

/* Leads one batch (with mu, released while it runs). Each row's answer is
 * written into its own waiter, which lives on its caller's stack until
 * done. */
static void pgb_lead(og__pg_store *pg, og__pg_batcher *b)
{
    pgb_waiter *batch[PGB_ROWS_MAX];
    const og__admit_req *reqs[PGB_ROWS_MAX];
    og_admission *outs = NULL;
    og_consume_result *couts = NULL;
    int rcs[PGB_ROWS_MAX];
    int64_t deadline;
    bool fell_back = false;
    int n, i;

    n = pgb_take(b, batch, og__pg_mono_us());
    if (n == 0)
        return;
    b->running++;
    pgb_wake_head(b); /* another batch may start beside this one */
    pthread_mutex_unlock(&b->mu);

    deadline = batch[0]->deadline_us;
    for (i = 0; i < n; i++) {
        reqs[i] = batch[i]->req;
        if (batch[i]->deadline_us < deadline)
            deadline = batch[i]->deadline_us;
    }
    if (b->kind == OG__PG_BATCH_CONSUME
            ? (couts = calloc((size_t)n, sizeof *couts)) == NULL
            : (outs = calloc((size_t)n, sizeof *outs)) == NULL)
        for (i = 0; i < n; i++)
            rcs[i] = OG_ENOMEM; /* nothing ran */
    else if (couts != NULL)
        og__pg_consume_run(pg, reqs, n, deadline, couts, rcs, &fell_back);
    else
        pgb_run(pg, reqs, n, deadline, outs, rcs, &fell_back);

    pthread_mutex_lock(&b->mu);
    for (i = 0; i < n; i++) {
        batch[i]->rc = rcs[i];
        if (rcs[i] == 0 && couts != NULL)
            batch[i]->res.consume = couts[i];
        else if (rcs[i] == 0)
            batch[i]->res.admission = outs[i];
        batch[i]->done = true;
        pthread_cond_signal(&batch[i]->cv);
    }
    free(outs);
    free(couts);
    b->stats.batches++;
    b->stats.rows += (uint64_t)n;
    if (fell_back)
        b->stats.fallbacks++;
    b->running--;
    pgb_wake_head(b);
}

int og__pg_batch_submit(og__pg_store *pg, og__pg_batcher *b,
                        const og__admit_req *req, og__pg_answer *out)
{
    pgb_waiter w = {.req = req,
                    .deadline_us = og__pg_mono_us() + pg->timeout_us};

    if (b->max_rows == 1) { /* B1: batching off, no queue */
        int rc = b->kind == OG__PG_BATCH_CONSUME
                     ? og__pg_consume_one(pg, req, w.deadline_us,
                                          &out->consume)
                     : og__pg_admit_one(pg, req, w.deadline_us,
                                        &out->admission);

        pthread_mutex_lock(&b->mu);
        b->stats.batches++;
        b->stats.rows++;
        pthread_mutex_unlock(&b->mu);
        return rc;
    }
    pthread_cond_init(&w.cv, &b->ca);
    pthread_mutex_lock(&b->mu);
    if (b->tail != NULL)
        b->tail->next = &w;
    else
        b->head = &w;
    b->tail = &w;
    while (!w.done) {
        if (!w.taken && b->running < b->in_flight) {
            pgb_lead(pg, b); /* B1: everything queued now */
            continue;
        }
        if (w.taken) {
            pthread_cond_wait(&w.cv, &b->mu);
            continue;
        }
        if (og__pg_mono_us() >= w.deadline_us) {
            pgb_unqueue(b, &w); /* B4: never ran */
            w.rc = OG_ESTORE_UNAVAILABLE;
            pgb_wake_head(b); /* it may have been woken to lead */
            break;
        }
        struct timespec until = pgb_abs_mono(w.deadline_us);
        pthread_cond_timedwait(&w.cv, &b->mu, &until);
    }
    pthread_mutex_unlock(&b->mu);
    pthread_cond_destroy(&w.cv);
    if (w.rc == 0)
        *out = w.res;
    return w.rc;
}

int og__pg_admit(void *impl, const og__admit_req *req, og_admission *out)
{
    og__pg_store *pg = impl;
    og__pg_answer a;
    int rc = og__pg_batch_submit(pg, pg->batcher, req, &a);

    if (rc == 0)
        *out = a.admission;
    return rc;
}

void og__pg_batch_count(og__pg_batcher *b, int rows, bool fell_back)
{
    pthread_mutex_lock(&b->mu);
    b->stats.batches++;
    b->stats.rows += (uint64_t)rows;
    if (fell_back)
        b->stats.fallbacks++;
    pthread_mutex_unlock(&b->mu);
}

void og__pg_batch_stats(og__pg_batcher *b, og_admit_stats *out)
{
    pthread_mutex_lock(&b->mu);
    *out = b->stats;
    pthread_mutex_unlock(&b->mu);
}

int og__pg_admit_batch(void *impl, const og__admit_req *reqs, int n,
                       og_admission *outs, int *rcs)
{
    og__pg_store *pg = impl;
    og__pg_batcher *b = pg->batcher;
    const og__admit_req *rows[PGB_ROWS_MAX];
    bool fell_back;
    int i;

    if (n < 1 || n > PGB_ROWS_MAX)
        return OG_EINVAL;
    for (i = 0; i < n; i++)
        rows[i] = &reqs[i];
    pgb_run(pg, rows, n, og__pg_mono_us() + pg->timeout_us, outs, rcs,
            &fell_back);
    og__pg_batch_count(b, n, fell_back);
    return 0;
}

void og__pg_admit_stats(void *impl, og_admit_stats *out)
{
    og__pg_batch_stats(((og__pg_store *)impl)->batcher, out);
}
