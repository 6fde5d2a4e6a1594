/*
 * outcome_batch.c — group commit of outcomes on PostgreSQL: the payout
 * starts and outcome records (og_op_start, og_op_record) asked of one store
 * object queue on the shared waiter queue (lib/store/batcher.c, GQ1-GQ5),
 * and a leader writes what is queued in ONE statement (one round trip, one
 * commit) whose every row answers exactly what its one-row statement
 * (exec.c, pg_op_start_sql, pg_op_record_sql) would have answered. One
 * statement writing 16 outcome rows measured 5.7-12.9x one row per
 * transaction under pgbench (docs/performance.md, "OUTCOME"). A batch
 * runs as every PostgreSQL batch does (batch_run.c, BR1-BR6).
 *
 *  OB1 The queue: og_store_options.outcome_batch_max rows per batch, and
 *      admit_batches_in_flight batches at once; a batch closes when it is
 *      full or when nobody else waits, never on a timer (GQ1), and a lone
 *      write runs its one-row statement unchanged. outcome_batch_max = 1 is
 *      no queue at all: every write its one-row statement at once (GQ5).
 *  OB2 Rows never meet: no two rows of a batch name one operation (the
 *      queue's conflicts test keeps the later one for a later batch, GQ2;
 *      the test hook splits its rows into rounds in order,
 *      og__pg_outcome_batch). So
 *      no row's lock, condition or event can see another row of its
 *      statement, and each answers as its one-row statement run alone.
 *  OB3 One statement, one commit (pob_sql): the arrays unnest()ed WITH
 *      ORDINALITY; each row's operation locked FOR NO KEY UPDATE where its
 *      one-row statement's conditions hold (status set, owner version,
 *      kind, NotStarted only above the initial version: M17, I17), read by
 *      its key in a LATERAL subquery with LIMIT 1 over the requests sorted
 *      by operation id: one lock order, so two batches never wait in a
 *      cycle, and every plan of the locks, custom or generic, probes the
 *      primary key (as admit_batch.c and consume_batch.c,
 *      docs/performance.md "VERDICT2"). The UPDATE reaches each of cur's
 *      rows by its key too: its key and version equalities are written
 *      x = ANY (ARRAY[y]) (POB_EQ), which no hash or merge join can use,
 *      so it joins cur in a nested loop whose inner side probes
 *      operations_pkey per row: a sequential scan, even materialized,
 *      costs more per row than the probe, on a new store's never analysed
 *      operations too (docs/performance.md "PLAN"; tests/outcome_batch.c,
 *      outcome_batch_plans_probe_by_key_on_a_new_store). Then
 *      clock_timestamp() read ONCE, after every lock
 *      (M18: a lock wait never eats a lease); then each row's conditional
 *      UPDATE repeating its conditions (a start's lease_until and
 *      submit_by, a NotApplied's final absence, PG_FINAL_ABSENCE, at that
 *      instant), and its event INSERTed from the UPDATE's RETURNING: an
 *      event exactly when its row changed (M16, I15).
 *  OB4 A statement that aborts and is not unavailability (a CHECK a row
 *      breaks, a defect) rolls back every row, and that round falls back
 *      to the one-row statement per row, which answers each exactly: a
 *      failing row fails alone (BR2).
 *  OB5 The statement runs with the earliest deadline of its rows (GQ3);
 *      so does each one-row statement of a fallback (BR5).
 *  OB6 No answer before ReadyForQuery (I1): a payout is sent only once
 *      its Started write is durable (P1). An unconfirmed commit
 *      (connection lost, the wait for a synchronous standby cancelled, I3;
 *      the fault point outcome_batch_ack_lost) answers EVERY row
 *      OG_ESTORE_UNAVAILABLE: none of them is known to be committed (BR3).
 */
#include <stdlib.h>
#include <string.h>

#include "batch_run.h"

#define POB_ROWS_MAX OG__BATCH_ROWS_MAX

/* ===========================================================================
 * The batched statement (OB3)
 *
 * Parameters (text format), one array element per row:
 *   $1 operation_id[]  $2 what[] ('start' | 'record')  $3 owner_version[]
 *   $4 expected[] (a record's expected statuses, comma-separated; a
 *      start's: 'Admitted')  $5 to_status[] (a start's: 'Started')
 *   $6 reason[]  $7 provider_reference[]  $8 actor[]  $9 evidence[]
 *   (NULL elements: none; a start's are NULL).
 * Its rows, one per request: the request's ordinality and whether it
 * wrote.
 * ========================================================================= */
/* Row o's column col equal to request q's (x = ANY (ARRAY[y]) is x = y,
 * NULL as NULL): a ScalarArrayOpExpr, which no hash or merge join can use,
 * where upd's plain equalities let a generic plan made on a new store's
 * never analysed operations hash-join a Seq Scan of it (OB3). */
#define POB_EQ(o, q, col) o col " = ANY (ARRAY[" q col "])"
/* The one-row statements' conditions for request q on row o (cur, then
 * repeated in upd): a start's (pg_op_start_sql) or a record's
 * (pg_op_record_sql, PG_NOT_STARTED_OK). */
#define POB_COND(q, o)                                                         \
    POB_EQ(o, q, "owner_version") "\n"                                         \
    "      AND CASE WHEN " q "what = 'start'\n"                                \
    "        THEN " o "kind = 'payout' AND " o "status = 'Admitted'\n"         \
    "        ELSE " o "status = ANY (string_to_array(" q "expected, ','))\n"   \
    "          AND (" q "to_status <> 'NotStarted' OR (" o "kind = 'payout'\n"  \
    "               AND " o "owner_version > " PG_STR(OG__INITIAL_OWNER_VERSION) "))\n" \
    "        END"

static const char pob_sql[] =
    "WITH req AS (\n"
    "  SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::text[], $5::text[],\n"
    "                       $6::text[], $7::text[], $8::text[], $9::text[])\n"
    "    WITH ORDINALITY AS r (operation_id, what, owner_version, expected, to_status,\n"
    "                          reason, provider_reference, actor, evidence, n)),\n"
    /* Locked in operation-id order, each by its key (OB3). */
    "cur AS MATERIALIZED (\n"
    "  SELECT q.*, o.status AS from_status FROM (\n"
    "    SELECT * FROM req ORDER BY operation_id) q\n"
    "  CROSS JOIN LATERAL (SELECT o.status FROM operations o\n"
    "    WHERE o.operation_id = q.operation_id\n"
    "      AND " POB_COND("q.", "o.") "\n"
    "    LIMIT 1 FOR NO KEY UPDATE OF o) o),\n"
    /* One instant, read after every lock: the aggregate reads all of cur
     * before this row exists (M18). */
    "t AS MATERIALIZED (\n"
    "  SELECT clock_timestamp() AS now FROM (SELECT count(*) AS k FROM cur) l),\n"
    "upd AS (\n"
    "  UPDATE operations o\n"
    "  SET status = c.to_status,\n"
    "      outcome_reason = CASE WHEN c.what = 'start' THEN o.outcome_reason ELSE c.reason END,\n"
    "      provider_reference = coalesce(c.provider_reference, o.provider_reference),\n"
    "      updated_at = t.now\n"
    "  FROM cur c, t\n"
    "  WHERE " POB_EQ("o.", "c.", "operation_id") "\n"
    "    AND " POB_COND("c.", "o.") "\n"
    "    AND (c.what <> 'start' OR (o.lease_until > t.now AND o.submit_by > t.now))\n"
    "    AND (c.what = 'start' OR c.to_status <> 'NotApplied' OR " PG_FINAL_ABSENCE("o.", "t.now") ")\n"
    "  RETURNING c.n, o.operation_id, c.what, c.from_status, o.status AS to_status,\n"
    "            o.owner_version, t.now AS event_at, c.reason, c.provider_reference,\n"
    "            c.actor, c.evidence),\n"
    "ev AS (\n"
    "  INSERT INTO operation_events (operation_id, at, kind, from_status, to_status, owner_version,\n"
    "                                reason, provider_reference, actor, evidence, source)\n"
    "  SELECT operation_id, event_at, CASE WHEN what = 'start' THEN 'started' ELSE 'outcome' END,\n"
    "         from_status, to_status, owner_version, reason, provider_reference, actor,\n"
    "         evidence, NULL::text\n"
    "  FROM upd\n"
    "  RETURNING operation_id)\n"
    "SELECT r.n, EXISTS (SELECT 1 FROM ev WHERE ev.operation_id = r.operation_id)\n"
    "FROM req r";
const og__pg_stmt og__pg_outcome_batch_stmt = {"og_outcome_batch", pob_sql,
                                               9, OG_KEYS_AS_STORED};
enum { POB_N, POB_HIT, POB_NCOLS };
enum {
    ARR_ID,
    ARR_WHAT,
    ARR_VERSION,
    ARR_EXPECTED,
    ARR_TO,
    ARR_REASON,
    ARR_REF,
    ARR_ACTOR,
    ARR_EVIDENCE,
    ARR_COUNT
};

/* The expected statuses of a record as "Admitted,Unknown" (status names
 * are plain letters: no quoting). 0, or OG_EINTERNAL (store.c checked
 * them: a defect). */
static int pob_expected(unsigned bits, char *buf, size_t n)
{
    size_t len = 0;

    buf[0] = '\0';
    for (int st = 0; st < OG_OP_STATUS_COUNT; st++) {
        int w;

        if (!(bits & OG_OP_BIT(st)))
            continue;
        w = snprintf(buf + len, n - len, "%s%s", len > 0 ? "," : "",
                     og_op_status_name((og_op_status)st));
        if (w < 0 || (size_t)w >= n - len)
            return OG_EINTERNAL;
        len += (size_t)w;
    }
    return len > 0 ? 0 : OG_EINTERNAL;
}

/* The nine arrays of rows[0..n); 0, or the error. */
static int pob_arrays(og__outcome_row *const *rows, int n,
                      og__pg_buf arr[ARR_COUNT])
{
    char version[24], expected[PG_STATUSES_MAX];

    for (int i = 0; i < n; i++) {
        const og__outcome_row *r = rows[i];
        bool start = r->kind == OG__OUTCOME_START;
        const og_op_outcome *o = start ? NULL : r->o;
        const char *to = start ? "Started" : og_op_status_name(o->status);
        int rc;

        if (start)
            snprintf(expected, sizeof expected, "Admitted");
        else if ((rc = pob_expected(r->expected, expected, sizeof expected)) !=
                 0)
            return rc;
        if (strcmp(to, "?") == 0)
            return OG_EINTERNAL; /* store.c checked it: a defect */
        og__pg_fmt_i64(version, sizeof version, r->owner_version);
        og__pg_buf_elem(&arr[ARR_ID], i, r->operation_id);
        og__pg_buf_elem(&arr[ARR_WHAT], i, start ? "start" : "record");
        og__pg_buf_elem(&arr[ARR_VERSION], i, version);
        og__pg_buf_elem(&arr[ARR_EXPECTED], i, expected);
        og__pg_buf_elem(&arr[ARR_TO], i, to);
        og__pg_buf_elem(&arr[ARR_REASON], i, o ? o->reason : NULL);
        og__pg_buf_elem(&arr[ARR_REF], i, o ? o->provider_reference : NULL);
        og__pg_buf_elem(&arr[ARR_ACTOR], i, start ? r->actor : o->actor);
        og__pg_buf_elem(&arr[ARR_EVIDENCE], i, o ? o->evidence : NULL);
    }
    return og__pg_bufs_end(arr, ARR_COUNT);
}

/* ===========================================================================
 * A batch of outcome writes (batch_run.c, BR1-BR6)
 * ========================================================================= */

/* One row alone: its one-row statement (exec.c) on a connection of its
 * own, before deadline_us (OB5). 0 and r->hit, or the error. */
static int pob_one(og__pg_store *pg, void *row, int64_t deadline_us)
{
    og__outcome_row *r = row;
    char version[24], statuses[PG_STATUSES_MAX];
    const char *params[9];
    const og__pg_stmt *stmt;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    int rc;

    r->hit = false;
    if (r->kind == OG__OUTCOME_START) {
        og__pg_fmt_i64(version, sizeof version, r->owner_version);
        params[0] = r->operation_id;
        params[1] = version;
        params[2] = r->actor;
        stmt = &og__pg_op_start_stmt;
    } else {
        rc = og__pg_op_record_params(r->operation_id, r->expected,
                                     r->owner_version, r->o, NULL, version,
                                     statuses, params);
        if (rc != 0)
            return rc;
        stmt = &og__pg_op_record_stmt;
    }
    if ((rc = og__pg_acquire(pg, &c)) != 0)
        return rc;
    rc = og__pg_exec_prepared_until(pg, c, stmt, params, &res, NULL, 0,
                                    deadline_us);
    if (rc == OG__PG_REFUSE)
        rc = OG_EINTERNAL; /* never an outcome (og__pg_run) */
    if (rc == 0 && (PQntuples(res) != 1 || og__pg_shape(res, 1, 1) != 0 ||
                    PQgetisnull(res, 0, 0)))
        rc = OG_EINTERNAL;
    if (rc == 0)
        r->hit = og__pg_get_bool(res, 0, 0); /* after ReadyForQuery (I1) */
    PQclear(res);
    og__pg_release(pg, c);
    return rc;
}

_Static_assert(ARR_COUNT <= OG__PG_BATCH_ARRAYS, "the arrays fit the args");
_Static_assert(POB_N == 0, "the ordinality comes first (BR4)");

/* The batch's statement (OB3) over rows[0..n): the nine arrays as its
 * parameters; 0, or the error (the round falls back, OB4). */
static int pob_bind(og__pg_store *pg, void *const *rows, int n,
                    og__pg_batch_args *a)
{
    int rc = pob_arrays((og__outcome_row *const *)rows, n, a->arr);

    (void)pg;
    for (int i = 0; i < ARR_COUNT && rc == 0; i++)
        a->params[i] = a->arr[i].p;
    a->stmt = &og__pg_outcome_batch_stmt;
    return rc;
}

/* Result row i answers row (og__pg_batch_kind.answer): whether it wrote,
 * read after ReadyForQuery (I1, OB6). */
static int pob_answer(og__pg_store *pg, og__pg_conn *c, const PGresult *res,
                      int i, void *row, int *rc)
{
    (void)pg;
    (void)c;
    if (PQgetisnull(res, i, POB_HIT))
        return OG_EINTERNAL; /* the statement and this file disagree */
    ((og__outcome_row *)row)->hit = og__pg_get_bool(res, i, POB_HIT);
    *rc = 0;
    return 0;
}

/* No answer yet, or none when every row fails (OB6). */
static void pob_clear(void *row)
{
    ((og__outcome_row *)row)->hit = false;
}

/* OB2: row may not join a batch naming its operation already. */
static bool pob_conflicts(void *const *rows, int n, const void *row)
{
    const og__outcome_row *r = row;

    for (int i = 0; i < n; i++)
        if (strcmp(((const og__outcome_row *)rows[i])->operation_id,
                   r->operation_id) == 0)
            return true;
    return false;
}

static const og__pg_batch_kind pob_kind = {
    .one = pob_one,
    .bind = pob_bind,
    .answer = pob_answer,
    .clear = pob_clear,
    .conflicts = pob_conflicts,
    .ncols = POB_NCOLS,
    .ack_lost_fault = "outcome_batch_ack_lost",
};

/* ===========================================================================
 * The store's side
 * ========================================================================= */

int og__pg_outcome_open(og__pg_store *pg, int in_flight, int max_rows)
{
    return og__pg_batch_new(pg, &pob_kind, in_flight, max_rows,
                            &pg->outcome_batch);
}

/* One write through the queue (OB1), bounded by the store timeout. */
int og__pg_outcome_submit(og__pg_store *pg, og__outcome_row *row, bool *hit)
{
    int rc = og__pg_batch_submit(pg->outcome_batch, row);

    if (rc == 0)
        *hit = row->hit;
    return rc;
}

/* The test hook: rows[0..n) in order, as rounds of rows that name no
 * operation twice (OB2), each round one batch bypassing the queue: a row
 * naming an operation of the round in progress starts the next, so it
 * sees what its predecessor wrote, as after that one's commit. */
int og__pg_outcome_batch(void *impl, og__outcome_row *rows, int n, int *rcs)
{
    og__pg_store *pg = impl;
    og__outcome_row *round[POB_ROWS_MAX];
    int from = 0, rc;

    if (n < 1 || n > POB_ROWS_MAX)
        return OG_EINVAL;
    while (from < n) {
        int k = 0;

        while (from + k < n &&
               !pob_conflicts((void *const *)round, k, &rows[from + k])) {
            round[k] = &rows[from + k];
            k++;
        }
        rc = og__pg_batch_direct(pg->outcome_batch, (void *const *)round, k,
                                 rcs + from);
        if (rc != 0)
            return rc;
        from += k;
    }
    return 0;
}

void og__pg_outcome_stats(void *impl, og_admit_stats *out)
{
    og__pg_batch_stats(((og__pg_store *)impl)->outcome_batch, out);
}
