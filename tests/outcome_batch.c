/*
 * outcome_batch.c — the group commit of outcomes (docs/design.md, "Group
 * commit of outcomes"; lib/store/sqlite/exec.c, Q31-Q35; the shared queue,
 * lib/store/batcher.c, GQ1-GQ5), on both engines:
 *
 *   conformance sqlite|postgres outcome-batch
 *
 * A batch is built deterministically with og__op_outcome_batch (the test
 * hook: the given writes as ONE batch on SQLite; on PostgreSQL as rounds of
 * rows naming no operation twice, each one statement,
 * lib/store/postgres/outcome_batch.c, OB2). Both engines batch: every
 * case runs on both. Every claim compares a batched answer with what the
 * one-row path answers (a store object whose outcome batches hold one
 * write), or with the store's rows and events.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "batch_harness.h"
#include "store/store_int.h" /* og__op_outcome_batch, og__op_insert */

#define SEC INT64_C(1000000)
#define ADMITTED OG_OP_BIT(OG_OP_ADMITTED)
#define STARTED OG_OP_BIT(OG_OP_STARTED)
#define UNKNOWN OG_OP_BIT(OG_OP_UNKNOWN)

/* A store object on the suite's store whose outcome batches hold at most
 * batch_max writes (1: the one-row path). */
static og_store *ob_store(int batch_max, int pool)
{
    og_store_options o;

    t_batch_options(&o, pool);
    o.outcome_batch_max = batch_max;
    return t_batch_store(&o);
}

/* An admitted credit on s. */
static og_operation ob_credit(og_store *s)
{
    og_admission a;
    t_case c;

    t_case_new(&c); /* issued in row form */
    assert_int_equal(og_admit(s, &c.g, &c.in, &a), 0);
    assert_int_equal(a.outcome, OG_OUTCOME_ADMITTED);
    return a.operation;
}

static og_operation ob_get(og_store *s, const char *id)
{
    og_operation op;

    assert_int_equal(og_operation_get(s, id, &op), 1);
    return op;
}

/* The stored events of id (without the derived "admitted" one). */
static int ob_events(og_store *s, const char *id, const char *kind)
{
    og_op_events e;
    int n = 0;

    assert_int_equal(og_op_history(s, id, &e), 0);
    for (size_t i = 0; i < e.n; i++)
        if (strcmp(e.v[i].kind, "admitted") != 0 &&
            (!kind || strcmp(e.v[i].kind, kind) == 0))
            n++;
    og_op_events_free(&e);
    return n;
}

/* SQLite's batch is one transaction of savepoints (Q31, Q32); PostgreSQL's
 * one statement, whose abort falls back to one-row statements (OB4). */
static bool ob_pg(void)
{
    return t_kind == T_POSTGRES;
}

/* ===========================================================================
 * A mixed batch answers as the one-row path
 * ========================================================================= */
#define MIX_ROWS 10

static const og_op_outcome ob_ok = {OG_OP_SUCCEEDED, "provider_accepted",
                                    "ref-1", "handler", NULL};
static const og_op_outcome ob_fail = {OG_OP_FAILED, "provider_rejected",
                                      NULL, "handler", NULL};

/* One scenario's operations, fresh on s, and its rows over them:
 *   0 record a credit Admitted at v1                  -> recorded
 *   1 record a credit at a stale version (v2)         -> not
 *   2 record a credit expecting Started               -> not (status)
 *   3 start a payout at v1                            -> started
 *   4 start the same payout again                     -> not (Started now)
 *   5 record that payout, expecting Started, at v1    -> recorded
 *   6 start a payout whose lease lapsed               -> not
 *   7 record an operation that does not exist         -> not
 *   8 record row 0's credit again                     -> not (terminal)
 *   9 record a credit Failed from Admitted            -> recorded */
typedef struct ob_mix {
    char id[MIX_ROWS][OG_UUID_LEN + 1];
    og__outcome_row rows[MIX_ROWS];
} ob_mix;

static void ob_mix_new(og_store *s, ob_mix *m)
{
    og_operation c0 = ob_credit(s), c1 = ob_credit(s), c2 = ob_credit(s),
                 c9 = ob_credit(s), p3 = t_payout_op(s), p6 = t_payout_op(s);

    t_set_op_time(NULL, p6.operation_id, "lease_until", -5);
    memcpy(m->id[0], c0.operation_id, sizeof m->id[0]);
    memcpy(m->id[1], c1.operation_id, sizeof m->id[1]);
    memcpy(m->id[2], c2.operation_id, sizeof m->id[2]);
    memcpy(m->id[3], p3.operation_id, sizeof m->id[3]);
    memcpy(m->id[4], p3.operation_id, sizeof m->id[4]);
    memcpy(m->id[5], p3.operation_id, sizeof m->id[5]);
    memcpy(m->id[6], p6.operation_id, sizeof m->id[6]);
    t_uuid(m->id[7]);
    memcpy(m->id[8], c0.operation_id, sizeof m->id[8]);
    memcpy(m->id[9], c9.operation_id, sizeof m->id[9]);
#define REC(i, exp, v, o)                                                      \
    m->rows[i] = (og__outcome_row){OG__OUTCOME_RECORD, m->id[i], v, NULL, exp, \
                                   o, false}
#define START(i, v)                                                            \
    m->rows[i] = (og__outcome_row){OG__OUTCOME_START, m->id[i], v, "worker-1", \
                                   0, NULL, false}
    REC(0, ADMITTED, 1, &ob_ok);
    REC(1, ADMITTED, 2, &ob_ok);
    REC(2, STARTED, 1, &ob_ok);
    START(3, 1);
    START(4, 1);
    REC(5, STARTED, 1, &ob_ok);
    START(6, 1);
    REC(7, ADMITTED, 1, &ob_ok);
    REC(8, ADMITTED, 1, &ob_fail);
    REC(9, ADMITTED | UNKNOWN, 1, &ob_fail);
#undef REC
#undef START
}

/* The one-row path: each row through og_op_start / og_op_record on s. */
static void ob_one_row(og_store *s, ob_mix *m, int *rcs)
{
    for (int i = 0; i < MIX_ROWS; i++) {
        og__outcome_row *r = &m->rows[i];

        r->hit = false;
        rcs[i] = r->kind == OG__OUTCOME_START
                     ? og_op_start(s, r->operation_id, r->owner_version,
                                   r->actor, &r->hit)
                     : og_op_record(s, r->operation_id, r->expected,
                                    r->owner_version, r->o, &r->hit);
    }
}

static void mixed_outcome_batch_answers_as_the_one_row_path(void **state)
{
    og_store *batched, *single;
    ob_mix a, b;
    int rcs_a[MIX_ROWS], rcs_b[MIX_ROWS];
    const bool expect[MIX_ROWS] = {true,  false, false, true,  false,
                                   true,  false, false, false, true};
    og_admit_stats st;

    (void)state;
    batched = ob_store(64, 4);
    single = ob_store(1, 4);
    ob_mix_new(batched, &a);
    ob_mix_new(single, &b);
    assert_int_equal(og__op_outcome_batch(batched, a.rows, MIX_ROWS, rcs_a), 0);
    ob_one_row(single, &b, rcs_b);
    for (int i = 0; i < MIX_ROWS; i++) {
        og_operation oa, ob;

        assert_int_equal(rcs_a[i], 0);
        assert_int_equal(rcs_b[i], 0);
        assert_int_equal(a.rows[i].hit, expect[i]);
        assert_int_equal(a.rows[i].hit, b.rows[i].hit);
        if (i == 7)
            continue; /* no such operation */
        oa = ob_get(batched, a.id[i]);
        ob = ob_get(single, b.id[i]);
        assert_int_equal(oa.status, ob.status);
        assert_int_equal(oa.owner_version, ob.owner_version);
        assert_int_equal(ob_events(batched, a.id[i], NULL),
                         ob_events(single, b.id[i], NULL));
    }
    /* The rows that changed nothing left no event (M16). */
    assert_int_equal(ob_events(batched, a.id[1], NULL), 0);
    assert_int_equal(ob_events(batched, a.id[6], NULL), 0);
    assert_int_equal(ob_get(batched, a.id[3]).status, OG_OP_SUCCEEDED);
    assert_int_equal(ob_events(batched, a.id[3], "started"), 1);
    assert_int_equal(ob_events(batched, a.id[3], "outcome"), 1);
    /* One batch of ten, counted as such; on PostgreSQL three rounds (OB2):
     * rows 0-3, row 4 (row 3's payout again), rows 5-9 (row 4's payout;
     * row 8 names row 0's credit, of an earlier round). */
    og_store_outcome_stats(batched, &st);
    assert_true(st.batches == (ob_pg() ? 3u : 1u) && st.rows == MIX_ROWS &&
                st.fallbacks == 0);
    og_store_free(batched);
    og_store_free(single);
}

/* ===========================================================================
 * NotStarted only for a payout above the initial owner version (P2)
 * ========================================================================= */
/* An operation on s taken over once (owner version 2, still Admitted). */
static og_operation ob_taken(og_store *s, og_operation op)
{
    og_operation tk;
    bool taken = false;

    t_set_op_time(NULL, op.operation_id, "lease_until", -5);
    assert_int_equal(
        og_op_takeover(s, op.operation_id, 1, "recovery", &tk, &taken), 0);
    assert_true(taken);
    assert_int_equal(tk.owner_version, 2);
    return tk;
}

static void not_started_rows_of_a_batch_keep_the_payout_rule(void **state)
{
    const og_op_outcome ns = {OG_OP_NOT_STARTED, "provider_not_found", NULL,
                              "recovery", NULL};
    og_store *s;
    og_operation p0, p1, c2;
    og__outcome_row rows[4];
    int rcs[4];
    og_admit_stats st;

    (void)state;
    s = ob_store(64, 4);
    p0 = ob_taken(s, t_payout_op(s)); /* a payout above the initial version */
    p1 = t_payout_op(s);              /* a payout at the initial version */
    c2 = ob_taken(s, ob_credit(s));   /* a credit above it */
    rows[0] = (og__outcome_row){OG__OUTCOME_RECORD, p0.operation_id, 2, NULL,
                                ADMITTED, &ns, false};
    rows[1] = (og__outcome_row){OG__OUTCOME_RECORD, p1.operation_id, 1, NULL,
                                ADMITTED, &ns, false};
    rows[2] = (og__outcome_row){OG__OUTCOME_RECORD, c2.operation_id, 2, NULL,
                                ADMITTED, &ns, false};
    rows[3] = (og__outcome_row){OG__OUTCOME_RECORD, c2.operation_id, 2, NULL,
                                ADMITTED, &ob_ok, false};
    assert_int_equal(og__op_outcome_batch(s, rows, 4, rcs), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(rcs[i], 0);
    /* M22, P2: NotStarted only for row 0; row 3, the credit's own outcome
     * after the refused NotStarted, is recorded. */
    assert_true(rows[0].hit);
    assert_false(rows[1].hit);
    assert_false(rows[2].hit);
    assert_true(rows[3].hit);
    assert_int_equal(ob_get(s, p0.operation_id).status, OG_OP_NOT_STARTED);
    assert_int_equal(ob_get(s, p1.operation_id).status, OG_OP_ADMITTED);
    assert_int_equal(ob_events(s, p1.operation_id, "outcome"), 0);
    assert_int_equal(ob_get(s, c2.operation_id).status, OG_OP_SUCCEEDED);
    assert_int_equal(ob_events(s, c2.operation_id, "outcome"), 1);
    /* PostgreSQL: rows 0-2 one statement, row 3 (c2 again) a round of its
     * own (OB2); no round fell back. */
    og_store_outcome_stats(s, &st);
    assert_true(st.batches == (ob_pg() ? 2u : 1u) && st.rows == 4 &&
                st.fallbacks == 0);
    og_store_free(s);
}

/* ===========================================================================
 * A row whose write fails fails alone
 * ========================================================================= */
static void outcome_row_that_fails_leaves_the_others_written(void **state)
{
    og_store *s;
    og_operation c0, c1, c2, p3;
    /* Started on a credit: the transition table refuses it before any I/O
     * (og_op_record); the hook lets it reach the store, whose CHECK
     * (operations_payout_status_check) fails that one write. */
    const og_op_outcome bad = {OG_OP_STARTED, NULL, NULL, "handler", NULL};
    og__outcome_row rows[4];
    int rcs[4];
    og_admit_stats st;

    (void)state;
    s = ob_store(64, 4);
    c0 = ob_credit(s);
    c1 = ob_credit(s);
    c2 = ob_credit(s);
    p3 = t_payout_op(s);
    rows[0] = (og__outcome_row){OG__OUTCOME_RECORD, c0.operation_id, 1, NULL,
                                ADMITTED, &ob_ok, false};
    rows[1] = (og__outcome_row){OG__OUTCOME_RECORD, c1.operation_id, 1, NULL,
                                ADMITTED, &bad, false};
    rows[2] = (og__outcome_row){OG__OUTCOME_RECORD, c2.operation_id, 1, NULL,
                                ADMITTED, &ob_fail, false};
    rows[3] = (og__outcome_row){OG__OUTCOME_START, p3.operation_id, 1,
                                "worker-1", 0, NULL, false};
    assert_int_equal(og__op_outcome_batch(s, rows, 4, rcs), 0);
    assert_true(rcs[1] < 0); /* its own error */
    assert_false(rows[1].hit);
    for (int i = 0; i < 4; i++)
        if (i != 1) {
            assert_int_equal(rcs[i], 0);
            assert_true(rows[i].hit);
        }
    /* Nothing of the failed row stayed; the others committed. */
    assert_int_equal(ob_get(s, c1.operation_id).status, OG_OP_ADMITTED);
    assert_int_equal(ob_events(s, c1.operation_id, NULL), 0);
    assert_int_equal(ob_get(s, c0.operation_id).status, OG_OP_SUCCEEDED);
    assert_int_equal(ob_get(s, c2.operation_id).status, OG_OP_FAILED);
    assert_int_equal(ob_get(s, p3.operation_id).status, OG_OP_STARTED);
    assert_int_equal(ob_events(s, p3.operation_id, "started"), 1);
    /* The failed row's operation is still the owner's to record. */
    assert_int_equal(og_op_record(s, c1.operation_id, ADMITTED, 1, &ob_ok,
                                  &rows[1].hit),
                     0);
    assert_true(rows[1].hit);
    /* SQLite: savepoints, no round fell back; PostgreSQL: the CHECK
     * aborted the statement, and the round fell back to one-row
     * statements (OB4). The lone record above is a batch of its own. */
    og_store_outcome_stats(s, &st);
    assert_true(st.batches == 2 && st.rows == 5);
    assert_true(st.fallbacks == (ob_pg() ? 1u : 0u));
    og_store_free(s);
}

/* ===========================================================================
 * An unconfirmed commit answers every row unavailable
 * ========================================================================= */
static void unconfirmed_outcome_commit_is_unavailable_for_every_row(
    void **state)
{
    og_store *s;
    og_operation c0, c1, p2, p3;
    og__outcome_row rows[4];
    int rcs[4];
    bool hit = true;

    (void)state;
    if (!OG_TEST_FAULT_INJECTION)
        skip(); /* fault points not compiled in (-Dfault_injection=true) */
    s = ob_store(64, 4);
    c0 = ob_credit(s);
    c1 = ob_credit(s);
    p2 = t_payout_op(s);
    p3 = t_payout_op(s);
    rows[0] = (og__outcome_row){OG__OUTCOME_RECORD, c0.operation_id, 1, NULL,
                                ADMITTED, &ob_ok, false};
    /* a stale row: it wrote nothing, and still is not told so */
    rows[1] = (og__outcome_row){OG__OUTCOME_RECORD, c1.operation_id, 2, NULL,
                                ADMITTED, &ob_ok, false};
    rows[2] = (og__outcome_row){OG__OUTCOME_START, p2.operation_id, 1,
                                "worker-1", 0, NULL, false};
    rows[3] = (og__outcome_row){OG__OUTCOME_START, p3.operation_id, 1,
                                "worker-1", 0, NULL, false};
    setenv("OG_FAULT", "outcome_batch_ack_lost", 1);
    assert_int_equal(og__op_outcome_batch(s, rows, 4, rcs), 0);
    unsetenv("OG_FAULT");
    for (int i = 0; i < 4; i++) {
        assert_int_equal(rcs[i], OG_ESTORE_UNAVAILABLE);
        assert_false(rows[i].hit);
    }
    /* The commit stayed: the writes are there, and a repeat changes
     * nothing. */
    assert_int_equal(ob_get(s, c0.operation_id).status, OG_OP_SUCCEEDED);
    assert_int_equal(ob_get(s, c1.operation_id).status, OG_OP_ADMITTED);
    assert_int_equal(ob_get(s, p2.operation_id).status, OG_OP_STARTED);
    assert_int_equal(og_op_start(s, p2.operation_id, 1, "worker-1", &hit), 0);
    assert_false(hit);

    /* A lone start through the queue whose acknowledgment is lost
     * (og_op_start's own point, above the backend): unavailable, Started
     * stays, and the owner may not send (P1). */
    p3 = t_payout_op(s);
    setenv("OG_FAULT", OG__FAULT_START_ACK_LOST, 1);
    hit = false;
    assert_int_equal(og_op_start(s, p3.operation_id, 1, "worker-1", &hit),
                     OG_ESTORE_UNAVAILABLE);
    unsetenv("OG_FAULT");
    assert_false(hit);
    assert_int_equal(ob_get(s, p3.operation_id).status, OG_OP_STARTED);
    og_store_free(s);
}

/* ===========================================================================
 * Two store objects, two processes race starts and records
 * ========================================================================= */
#define RACE_OPS 12
#define RACE_ROUNDS 6
#define RACE_THREADS 4 /* per racer: so its store object's queue batches */

/* One round: payout attempts, half of them taken over before the race
 * (owner version 2: every write at version 1 is fenced). Each racer starts
 * every attempt at versions 1 and 2, then records it Succeeded from
 * Started at both. Results per racer and attempt. */
typedef struct ob_round {
    char id[RACE_OPS][OG_UUID_LEN + 1];
    int64_t version[RACE_OPS]; /* the current owner version */
    int started[2][RACE_OPS][3];  /* [racer][op][v]: 1 started, 0 not, -1 err */
    int recorded[2][RACE_OPS][3];
} ob_round;

typedef struct ob_race {
    ob_round rounds[RACE_ROUNDS];
    volatile int arrived[RACE_ROUNDS];
} ob_race;

static void ob_race_new(og_store *s, ob_race *r)
{
    memset(r, 0, sizeof *r);
    for (int k = 0; k < RACE_ROUNDS; k++)
        for (int i = 0; i < RACE_OPS; i++) {
            ob_round *d = &r->rounds[k];
            og_operation p = t_payout_op(s), tk;
            bool taken = false;

            memcpy(d->id[i], p.operation_id, sizeof d->id[i]);
            d->version[i] = 1;
            if (i % 2 == 1) {
                t_set_op_time(NULL, p.operation_id, "lease_until", -5);
                assert_int_equal(og_op_takeover(s, p.operation_id, 1,
                                                "recovery", &tk, &taken),
                                 0);
                assert_true(taken);
                d->version[i] = tk.owner_version;
            }
        }
}

typedef struct ob_worker {
    ob_race *race;
    og_store *s;
    int who, t;
} ob_worker;

static void *ob_worker_run(void *arg)
{
    ob_worker *w = arg;

    for (int k = 0; k < RACE_ROUNDS; k++) {
        ob_round *d = &w->race->rounds[k];

        if (w->t == 0) {
            __atomic_add_fetch(&w->race->arrived[k], 1, __ATOMIC_SEQ_CST);
        }
        while (__atomic_load_n(&w->race->arrived[k], __ATOMIC_SEQ_CST) < 2)
            sched_yield();
        for (int i = w->t; i < RACE_OPS; i += RACE_THREADS)
            for (int v = 1; v <= 2; v++) {
                bool hit = false;
                int rc = og_op_start(w->s, d->id[i], v, "worker-1", &hit);

                d->started[w->who][i][v] = rc != 0 ? -1 : hit;
            }
        for (int i = w->t; i < RACE_OPS; i += RACE_THREADS)
            for (int v = 1; v <= 2; v++) {
                bool hit = false;
                int rc = og_op_record(w->s, d->id[i], STARTED, v, &ob_ok, &hit);

                d->recorded[w->who][i][v] = rc != 0 ? -1 : hit;
            }
    }
    return NULL;
}

/* Racer who: RACE_THREADS threads on one store object of its own. */
static void ob_racer(ob_race *r, int who)
{
    og_store *s = ob_store(64, 4);
    ob_worker w[RACE_THREADS];
    pthread_t th[RACE_THREADS];
    og_admit_stats st;

    for (int t = 0; t < RACE_THREADS; t++) {
        w[t] = (ob_worker){r, s, who, t};
        if (pthread_create(&th[t], NULL, ob_worker_run, &w[t]) != 0)
            abort();
    }
    for (int t = 0; t < RACE_THREADS; t++)
        pthread_join(th[t], NULL);
    /* Every write of this store object counted in exactly one batch. */
    og_store_outcome_stats(s, &st);
    if (st.rows != (uint64_t)RACE_ROUNDS * RACE_OPS * 4)
        abort();
    og_store_free(s);
}

/* Per attempt: exactly one start won, at the current owner version, none
 * at a fenced one; exactly one record; the store holds one "started" and
 * one "outcome" event, and Succeeded. */
static void ob_race_check(og_store *s, const ob_race *r)
{
    for (int k = 0; k < RACE_ROUNDS; k++)
        for (int i = 0; i < RACE_OPS; i++) {
            const ob_round *d = &r->rounds[k];
            int64_t cur = d->version[i];

            for (int v = 1; v <= 2; v++) {
                int won = 0, rec = 0;

                for (int w = 0; w < 2; w++) {
                    assert_true(d->started[w][i][v] >= 0);
                    assert_true(d->recorded[w][i][v] >= 0);
                    won += d->started[w][i][v];
                    rec += d->recorded[w][i][v];
                }
                assert_int_equal(won, v == cur ? 1 : 0);
                assert_int_equal(rec, v == cur ? 1 : 0);
            }
            assert_int_equal(ob_get(s, d->id[i]).status, OG_OP_SUCCEEDED);
            assert_int_equal(ob_events(s, d->id[i], "started"), 1);
            assert_int_equal(ob_events(s, d->id[i], "outcome"), 1);
        }
}

static void ob_race_in(void *ctx, int who)
{
    ob_racer(ctx, who);
}

static void outcome_batches_of_two_store_objects_race(void **state)
{
    ob_race *r = calloc(1, sizeof *r);
    og_store *s = ob_store(64, 4);

    (void)state;
    assert_non_null(r);
    ob_race_new(s, r);
    t_race_threads(ob_race_in, r);
    ob_race_check(s, r);
    og_store_free(s);
    free(r);
}

static void outcome_batches_of_two_processes_race(void **state)
{
    ob_race *r = mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    og_store *s = ob_store(64, 4);

    (void)state;
    assert_true(r != MAP_FAILED);
    ob_race_new(s, r);
    t_race_processes(ob_race_in, r);
    ob_race_check(s, r);
    og_store_free(s);
    munmap(r, sizeof *r);
}

/* ===========================================================================
 * kill -9 in the middle of batches
 * ========================================================================= */
#define KILL_OPS 384
#define KILL_THREADS 6

/* Per attempt, what the child was told: bit 1 started, bit 2 recorded. */
typedef struct ob_killed {
    char id[KILL_OPS][OG_UUID_LEN + 1];
    volatile int told[KILL_OPS];
    volatile int progress;
} ob_killed;

typedef struct ob_kworker {
    ob_killed *k;
    og_store *s;
    int t;
} ob_kworker;

static void *ob_kworker_run(void *arg)
{
    ob_kworker *w = arg;

    for (int i = w->t; i < KILL_OPS; i += KILL_THREADS) {
        bool hit = false;

        if (og_op_start(w->s, w->k->id[i], 1, "worker-1", &hit) != 0 || !hit)
            continue;
        w->k->told[i] |= 1;
        hit = false;
        if (og_op_record(w->s, w->k->id[i], STARTED, 1, &ob_ok, &hit) == 0 &&
            hit)
            w->k->told[i] |= 2;
        __atomic_add_fetch(&w->k->progress, 1, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

static void ob_killed_child(void *ctx)
{
    ob_killed *k = ctx;
    og_store *s = ob_store(64, 4);
    ob_kworker w[KILL_THREADS];
    pthread_t th[KILL_THREADS];

    for (int t = 0; t < KILL_THREADS; t++) {
        w[t] = (ob_kworker){k, s, t};
        if (pthread_create(&th[t], NULL, ob_kworker_run, &w[t]) != 0)
            _exit(3);
    }
    for (int t = 0; t < KILL_THREADS; t++)
        pthread_join(th[t], NULL);
    _exit(0);
}

static void killed_outcome_batches_leave_one_row_states(void **state)
{
    ob_killed *k = t_shared_zeroed(sizeof *k);
    og_store *s = ob_store(64, 4);
    int told = 0;

    (void)state;
    for (int i = 0; i < KILL_OPS; i++) {
        og_operation p = t_payout_op(s);
        memcpy(k->id[i], p.operation_id, sizeof k->id[i]);
    }
    t_kill_midway(ob_killed_child, k, &k->progress, 24, 5000);

    for (int i = 0; i < KILL_OPS; i++) {
        og_operation op = ob_get(s, k->id[i]);
        int started = ob_events(s, k->id[i], "started");
        int outcomes = ob_events(s, k->id[i], "outcome");

        /* A state the one-row path produces: each status with exactly the
         * events that lead to it, at the initial owner version. */
        assert_int_equal(op.owner_version, 1);
        if (op.status == OG_OP_ADMITTED) {
            assert_int_equal(started + outcomes, 0);
        } else if (op.status == OG_OP_STARTED) {
            assert_int_equal(started, 1);
            assert_int_equal(outcomes, 0);
        } else {
            assert_int_equal(op.status, OG_OP_SUCCEEDED);
            assert_int_equal(started, 1);
            assert_int_equal(outcomes, 1);
        }
        /* What the child was told holds. */
        if (k->told[i] & 1) {
            told++;
            assert_true(op.status == OG_OP_STARTED ||
                        op.status == OG_OP_SUCCEEDED);
        }
        if (k->told[i] & 2)
            assert_int_equal(op.status, OG_OP_SUCCEEDED);
    }
    assert_true(told >= 24);
    og_store_free(s);
    munmap(k, sizeof *k);
}

/* ===========================================================================
 * The queue: many callers on one store object
 * ========================================================================= */
#define QUEUE_CALLERS 8
#define QUEUE_EACH 12

typedef struct ob_caller {
    og_store *s;
    og_operation ops[QUEUE_EACH];
    int recorded;
} ob_caller;

static void *ob_caller_run(void *arg)
{
    ob_caller *c = arg;

    for (int i = 0; i < QUEUE_EACH; i++) {
        bool hit = false;

        if (og_op_record(c->s, c->ops[i].operation_id, ADMITTED, 1, &ob_ok,
                         &hit) == 0 &&
            hit)
            c->recorded++;
    }
    return NULL;
}

/* Many callers' records through one store object's queue: each is
 * recorded once, every one counted in exactly one batch; with batches of
 * one, one batch per record. */
static void ob_queue(int batch_max)
{
    og_store *s = ob_store(batch_max, 4);
    ob_caller *c = calloc(QUEUE_CALLERS, sizeof *c);
    pthread_t th[QUEUE_CALLERS];
    og_admit_stats st;
    int total = 0;

    assert_non_null(c);
    for (int i = 0; i < QUEUE_CALLERS; i++) {
        c[i].s = s;
        for (int j = 0; j < QUEUE_EACH; j++)
            c[i].ops[j] = ob_credit(s);
    }
    for (int i = 0; i < QUEUE_CALLERS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, ob_caller_run, &c[i]),
                         0);
    for (int i = 0; i < QUEUE_CALLERS; i++) {
        pthread_join(th[i], NULL);
        total += c[i].recorded;
    }
    assert_int_equal(total, QUEUE_CALLERS * QUEUE_EACH);
    for (int i = 0; i < QUEUE_CALLERS; i++)
        for (int j = 0; j < QUEUE_EACH; j++) {
            assert_int_equal(ob_get(s, c[i].ops[j].operation_id).status,
                             OG_OP_SUCCEEDED);
            assert_int_equal(ob_events(s, c[i].ops[j].operation_id, NULL), 1);
        }
    og_store_outcome_stats(s, &st);
    assert_true(st.rows == (uint64_t)total);
    assert_true(st.batches >= 1 && st.batches <= st.rows);
    if (batch_max == 1)
        assert_true(st.batches == st.rows);
    assert_true(st.fallbacks == 0);
    free(c);
    og_store_free(s);
}

static void queued_outcome_writes_are_each_written_once(void **state)
{
    (void)state;
    ob_queue(64);
    ob_queue(1);
}

/* ===========================================================================
 * Admissions and outcome writes in one queue (SQLite: one transaction)
 * ========================================================================= */
#define MIXED_CALLERS 8
#define MIXED_EACH 10

typedef struct ob_mixed {
    og_store *s;
    char ops[MIXED_EACH][OG_UUID_LEN + 1];
    int admitted, recorded;
} ob_mixed;

static void *ob_mixed_run(void *arg)
{
    ob_mixed *m = arg;

    for (int i = 0; i < MIXED_EACH; i++) {
        og_admission a;
        t_case c;
        bool hit = false;

        t_case_new(&c); /* issued in row form */
        if (og_admit(m->s, &c.g, &c.in, &a) != 0 ||
            a.outcome != OG_OUTCOME_ADMITTED)
            continue;
        m->admitted++;
        memcpy(m->ops[i], c.op, sizeof m->ops[i]);
        if (og_op_record(m->s, c.op, ADMITTED, 1, &ob_ok, &hit) == 0 && hit)
            m->recorded++;
    }
    return NULL;
}

/* Callers admitting and recording at once on one store object: on SQLite
 * both kinds share the queue and its batches (Q35, G6). Each admission and
 * each record answers as alone, lands once, and is counted once in its
 * kind's counters. */
static void admissions_and_outcome_writes_share_the_queue(void **state)
{
    og_store *s = ob_store(64, 4);
    ob_mixed *m = calloc(MIXED_CALLERS, sizeof *m);
    pthread_t th[MIXED_CALLERS];
    og_admit_stats as, os;
    int admitted = 0, recorded = 0;

    (void)state;
    assert_non_null(m);
    for (int i = 0; i < MIXED_CALLERS; i++) {
        m[i].s = s;
        assert_int_equal(pthread_create(&th[i], NULL, ob_mixed_run, &m[i]),
                         0);
    }
    for (int i = 0; i < MIXED_CALLERS; i++) {
        pthread_join(th[i], NULL);
        admitted += m[i].admitted;
        recorded += m[i].recorded;
    }
    assert_int_equal(admitted, MIXED_CALLERS * MIXED_EACH);
    assert_int_equal(recorded, MIXED_CALLERS * MIXED_EACH);
    for (int i = 0; i < MIXED_CALLERS; i++)
        for (int j = 0; j < MIXED_EACH; j++) {
            assert_int_equal(ob_get(s, m[i].ops[j]).status, OG_OP_SUCCEEDED);
            assert_int_equal(ob_events(s, m[i].ops[j], NULL), 1);
        }
    og_store_admit_stats(s, &as);
    og_store_outcome_stats(s, &os);
    assert_true(as.rows == (uint64_t)admitted);
    assert_true(as.batches >= 1 && as.batches <= as.rows);
    assert_true(os.rows == (uint64_t)recorded);
    assert_true(os.batches >= 1 && os.batches <= os.rows);
    free(m);
    og_store_free(s);
}

/* How many times needle occurs in hay. */
static int ob_count_of(const char *hay, const char *needle)
{
    int n = 0;

    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

/* Fails on a plan that reads operations other than by its key: any
 * sequential scan, and fewer than `probes` probes of operations_pkey (the
 * locks and the UPDATE's rows, per plan shown). */
static void ob_plan_probes(const char *plan, int probes)
{
    bool bad = strstr(plan, "Seq Scan") != NULL ||
               ob_count_of(plan, "using operations_pkey on operations") <
                   probes;

    if (bad)
        fprintf(stderr, "plans:\n%s\n", plan);
    assert_false(bad);
}

/* The custom plan of the batched statement sql (its text as
 * og_store_explain shows it) for a full batch of records on the store at
 * url: the statement prepared by hand, as the store prepares it. */
static char *ob_full_batch_plan(const char *url, const char *sql)
{
    enum { N = OG_ADMIT_BATCH_MAX };
    size_t cap = strlen(sql) + (size_t)N * 256 + 1024, len;
    char *q = malloc(cap), *plan;
    t_raw *r = t_raw_open_url(url);
    static const char *const rep[8] = {
        "record", "1", "\"Started,Unknown\"", "Succeeded", "found", "NULL",
        "agent-1", "NULL"};

    assert_non_null(q);
    assert_int_equal(t_raw_exec(r, "SET plan_cache_mode = force_custom_plan"),
                     0);
    len = (size_t)snprintf(q, cap, "PREPARE ob_full AS %s", sql);
    assert_int_equal(t_raw_exec(r, q), 0);
    len = (size_t)snprintf(q, cap, "EXPLAIN EXECUTE ob_full ('{");
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(q + len, cap - len,
                                "%s00000000-0000-4000-8000-%012d",
                                i ? "," : "", i + 1);
    for (int a = 0; a < 8; a++) {
        len += (size_t)snprintf(q + len, cap - len, "}', '{");
        for (int i = 0; i < N; i++)
            len += (size_t)snprintf(q + len, cap - len, "%s%s", i ? "," : "",
                                    rep[a]);
    }
    assert_true(len + 4 < cap);
    snprintf(q + len, cap - len, "}')");
    plan = t_raw_lines(r, q);
    assert_non_null(plan);
    free(q);
    t_raw_close(r);
    return plan;
}

/* docs/performance.md, "PLAN": a store's first batches plan the batched
 * outcome statement on an operations table that is empty and never
 * analysed, and PostgreSQL may keep that generic plan. On such a store
 * every plan of the statement (og_store_explain's custom and generic plans
 * of a batch of two, and the custom plan of a full batch) probes
 * operations_pkey for each row's lock and each row's UPDATE, and scans no
 * table. The UPDATE joined cur with plain equalities: its generic plan
 * hash-joined a Seq Scan of operations (custom plans too, from 16 rows). */
static void outcome_batch_plans_probe_by_key_on_a_new_store(void **state)
{
    static const char heading[] =
        "### Outcome writes, batched (group commit)";
    char *plan = NULL, *b, *sql, *full, url[4200];
    const char *p, *q;
    og_store *s;

    (void)state;
    if (t_kind != T_POSTGRES)
        skip(); /* SQLite's outcome batch runs the one-row statements */
    s = t_fresh_store("ob_new_plans", url, sizeof url);
    assert_int_equal(og_store_explain(s, 1000, &plan), 0);
    assert_non_null(plan);
    p = strstr(plan, heading);
    assert_non_null(p);
    q = strstr(p + 4, "\n### "); /* the section ends at the next */
    b = strndup(p, q ? (size_t)(q - p) : strlen(p));
    assert_non_null(b);
    /* custom and generic: the locks and the UPDATE, two rows each */
    assert_non_null(strstr(b, "Generic plan"));
    ob_plan_probes(b, 4);
    /* the statement as the store prepares it, planned for a full batch */
    p = strstr(b, "```sql\n");
    assert_non_null(p);
    q = strstr(p + 7, "\n```");
    assert_non_null(q);
    sql = strndup(p + 7, (size_t)(q - (p + 7)));
    assert_non_null(sql);
    full = ob_full_batch_plan(url, sql);
    ob_plan_probes(full, 2);
    free(full);
    free(sql);
    free(b);
    free(plan);
    og_store_free(s);
}

const struct CMUnitTest t_outcome_batch_tests[] = {
    cmocka_unit_test(mixed_outcome_batch_answers_as_the_one_row_path),
    cmocka_unit_test(not_started_rows_of_a_batch_keep_the_payout_rule),
    cmocka_unit_test(outcome_row_that_fails_leaves_the_others_written),
    cmocka_unit_test(unconfirmed_outcome_commit_is_unavailable_for_every_row),
    cmocka_unit_test(outcome_batches_of_two_store_objects_race),
    cmocka_unit_test(outcome_batches_of_two_processes_race),
    cmocka_unit_test(killed_outcome_batches_leave_one_row_states),
    cmocka_unit_test(queued_outcome_writes_are_each_written_once),
    cmocka_unit_test(admissions_and_outcome_writes_share_the_queue),
    cmocka_unit_test(outcome_batch_plans_probe_by_key_on_a_new_store),
};
const size_t t_outcome_batch_tests_count =
    sizeof t_outcome_batch_tests / sizeof t_outcome_batch_tests[0];
