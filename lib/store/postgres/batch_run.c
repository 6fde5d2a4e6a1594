/*
 * batch_run.c — running one PostgreSQL group commit (batch_run.h), for
 * every kind of row that batches: admissions (admit_batch.c, B1-B6),
 * consume verdicts (consume_batch.c, CB1-CB6) and outcome writes
 * (outcome_batch.c, OB1-OB6). Each kind's file holds its statement, its
 * rule that rows never meet and how a result row answers; what every kind
 * did alike is here: the shared waiter queue (lib/store/batcher.c,
 * GQ1-GQ5), the statement's run, the fallback, the unconfirmed commit and
 * the counters.
 *
 *  BR1 A batch of one runs its kind's one-row statement, unchanged (a lone
 *      request pays nothing for batching, GQ1); a batch of two or more runs
 *      its kind's ONE statement, one round trip and one commit, on a
 *      connection of its own, in its own implicit transaction.
 *  BR2 A statement that aborts whole and is not unavailability (a
 *      constraint one row breaks, a defect; the kind's abort fault point;
 *      parameters that could not be built) commits nothing, and that round
 *      falls back to the one-row statement per row, each answering exactly
 *      as alone: a failing row fails alone. The batch counts one fallback.
 *  BR3 An unconfirmed commit — OG_ESTORE_UNAVAILABLE from the statement
 *      (connection lost, the wait for a synchronous standby cancelled, I3),
 *      or the kind's acknowledgment-lost fault point — answers EVERY row
 *      OG_ESTORE_UNAVAILABLE, never an outcome and never a fallback: none
 *      of them is known to be committed, or not. No connection at all
 *      answers every row its error; nothing ran.
 *  BR4 Answers only after ReadyForQuery (I1), and each to its own request:
 *      the result holds n rows of the kind's columns, column 0 each row's
 *      ordinality, every one of 1..n exactly once. Anything else is a
 *      defect of the statement or of its kind's file: every row answers
 *      OG_EINTERNAL, its answer cleared.
 *  BR5 The statement and each one-row statement of a fallback run with the
 *      earliest deadline of the batch's rows (GQ3).
 *  BR6 Every batch is counted once, with its rows (og_store_admit_stats
 *      and its siblings, /metrics): a batch of the queue, a lone row with
 *      the queue off (GQ5: a batch of one) and a batch of the test hooks
 *      alike; and a fallback once per batch that fell back.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "batch_run.h"

struct og__pg_batch {
    const og__pg_batch_kind *kind;
    og__pg_store *pg;
    og__batcher *queue;
    pthread_mutex_t mu; /* stats */
    og_admit_stats stats;
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

int og__pg_bufs_end(og__pg_buf *arr, int count)
{
    int rc = 0;

    for (int a = 0; a < count; a++) {
        og__pg_buf_put(&arr[a], "}", 1);
        if (arr[a].oom)
            rc = OG_ENOMEM;
    }
    return rc;
}

/* ===========================================================================
 * One batch
 * ========================================================================= */

/* Every row of the batch answers rc (BR3, BR4). */
static void br_all(const og__pg_batch_kind *k, void *const *rows, int n,
                   int rc, int *rcs)
{
    for (int i = 0; i < n; i++) {
        if (k->clear != NULL)
            k->clear(rows[i]);
        rcs[i] = rc;
    }
}

/* Runs rows[0..n) (n >= 2, the kind's conflicts holding) as ONE statement
 * before deadline_us (BR5). 0 and every row's answer and rcs, or an error
 * when the statement aborted whole and nothing of it is committed (the
 * caller falls back, BR2). */
static int br_statement(og__pg_batch *b, void *const *rows, int n,
                        int64_t deadline_us, int *rcs)
{
    const og__pg_batch_kind *k = b->kind;
    og__pg_store *pg = b->pg;
    og__pg_batch_args a;
    og__pg_conn *c = NULL;
    PGresult *res = NULL;
    bool seen[OG__BATCH_ROWS_MAX];
    int rc, i;

    memset(&a, 0, sizeof a);
    memset(seen, 0, sizeof seen);
    for (i = 0; i < n && k->clear != NULL; i++)
        k->clear(rows[i]);
    if ((rc = k->bind(pg, rows, n, &a)) != 0)
        goto out;
    if ((rc = og__pg_acquire(pg, &c)) != 0)
        goto all; /* nothing ran */
    if (k->abort_fault != NULL && og__fault(k->abort_fault)) {
        /* tests only (fault.c): as if one row had aborted the statement
         * before anything was written (BR2) */
        rc = OG_EINTERNAL;
        goto out;
    }
    rc = og__pg_exec_prepared_until(pg, c, a.stmt, a.params, &res, NULL, 0,
                                    deadline_us);
    if (rc == OG_ESTORE_UNAVAILABLE)
        goto all; /* BR3: not confirmed, whatever it did */
    if (rc != 0)
        goto out; /* aborted whole: nothing is committed (BR2) */
    if (k->ack_lost_fault != NULL && og__fault(k->ack_lost_fault)) {
        /* tests only (fault.c): committed, the acknowledgment lost */
        c->broken = true;
        rc = OG_ESTORE_UNAVAILABLE;
        goto all;
    }
    if (PQntuples(res) != n || og__pg_shape(res, k->ncols, n) != 0) {
        rc = OG_EINTERNAL;
        goto all;
    }
    for (i = 0; i < n; i++) {
        int64_t r;

        if (og__pg_get_i64(res, i, 0, &r) != 0 || r < 1 || r > n ||
            seen[r - 1] ||
            k->answer(pg, c, res, i, rows[r - 1], &rcs[r - 1]) != 0) {
            rc = OG_EINTERNAL; /* the statement and its file disagree */
            goto all;
        }
        seen[r - 1] = true;
    }
    if (k->finish != NULL)
        k->finish(pg, c, rows, n, rcs);
    rc = 0;
    goto out;
all:
    br_all(k, rows, n, rc, rcs);
    rc = 0;
out:
    PQclear(res);
    if (c != NULL)
        og__pg_release(pg, c);
    for (i = 0; i < OG__PG_BATCH_ARRAYS; i++)
        free(a.arr[i].p);
    return rc;
}

/* Counts one batch of n rows (BR6). */
static void br_count(og__pg_batch *b, int n, bool fell_back)
{
    pthread_mutex_lock(&b->mu);
    b->stats.batches++;
    b->stats.rows += (uint64_t)n;
    if (fell_back)
        b->stats.fallbacks++;
    pthread_mutex_unlock(&b->mu);
}

/* The queue's run (og__batch_ops.run): one batch (BR1, BR2), counted
 * (BR6). */
static void br_run(void *ctx, void *const *rows, int n, int64_t deadline_us,
                   int *rcs)
{
    og__pg_batch *b = ctx;
    const og__pg_batch_kind *k = b->kind;
    bool fell_back = false;

    if (n == 1)
        rcs[0] = k->one(b->pg, rows[0], deadline_us);
    else if (br_statement(b, rows, n, deadline_us, rcs) != 0) {
        fell_back = true;
        for (int i = 0; i < n; i++)
            rcs[i] = k->one(b->pg, rows[i], deadline_us);
    }
    br_count(b, n, fell_back);
}

/* The queue's conflicts test (GQ2): the kind's. */
static bool br_conflicts(void *ctx, void *const *rows, int n, const void *row)
{
    const og__pg_batch *b = ctx;

    return b->kind->conflicts != NULL && b->kind->conflicts(rows, n, row);
}

static const og__batch_ops br_ops = {br_run, br_conflicts, false};

/* ===========================================================================
 * A store object's group commit of one kind
 * ========================================================================= */

int og__pg_batch_new(og__pg_store *pg, const og__pg_batch_kind *kind,
                     int in_flight, int max_rows, og__pg_batch **out)
{
    og__pg_batch *b = calloc(1, sizeof *b);

    if (b == NULL)
        return OG_ENOMEM;
    b->kind = kind;
    b->pg = pg;
    b->queue = og__batcher_new(&br_ops, b, in_flight, max_rows);
    if (b->queue == NULL) {
        free(b);
        return OG_ENOMEM;
    }
    pthread_mutex_init(&b->mu, NULL);
    *out = b;
    return 0;
}

void og__pg_batch_free(og__pg_batch *b)
{
    if (b == NULL)
        return;
    og__batcher_free(b->queue);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

int og__pg_batch_submit(og__pg_batch *b, void *row)
{
    return og__batcher_submit(b->queue, row,
                              og__pg_mono_us() + b->pg->timeout_us);
}

int og__pg_batch_direct(og__pg_batch *b, void *const *rows, int n, int *rcs)
{
    return og__batcher_direct(b->queue, rows, n,
                              og__pg_mono_us() + b->pg->timeout_us, rcs);
}

void og__pg_batch_stats(og__pg_batch *b, og_admit_stats *out)
{
    pthread_mutex_lock(&b->mu);
    *out = b->stats;
    pthread_mutex_unlock(&b->mu);
}
