/*
 * rotate_batch.c — the group commit of ticket rotations (docs/design.md,
 * "Ticket rotation in batches"), on both engines:
 *
 *   conformance sqlite|postgres rotate-batch
 *
 * A batch is built deterministically with og__rotate_batch (the test hook:
 * the given rotations as ONE batch, lib/store/store_int.h); the queue that
 * coalesces og_ticket_rotate callers is exercised by many callers on two
 * store objects. Every claim compares a batched answer with what the
 * one-row path answers (og_ticket_rotate on a store object whose batches
 * hold one rotation), or with the store's rows.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "store/store_int.h" /* og__rotate_batch: a batch built by the test */

#define ISSUER "support-approvals"
#define SEC INT64_C(1000000)
#define TICKET_SZ (OG_TICKET_LEN + 1)

static const char *const r_revokers[] = {"supervisor-3"};
static const og_revoke_policy r_policy = {r_revokers, 1};

/* A store object on the suite's store whose batches hold at most batch_max
 * rotations (1: the one-row path). */
static og_store *r_store(int batch_max, int pool)
{
    og_store_options o;
    og_store *s = NULL;
    int rc;

    og_store_options_default(&o);
    o.rotate_batch_max = batch_max;
    o.pool_size = pool;
    o.timings.store_timeout_us = 30 * SEC; /* atomicity, not latency */
    og_timings_fit(&o.timings);
    rc = og_store_open(t_url, &o, &s);
    if (rc != 0) {
        fprintf(stderr, "og_store_open(%s): %s\n", t_url, og_err_name(rc));
        abort();
    }
    return s;
}

/* A family name no other test uses. */
static void r_family(char *out, size_t n, const char *tag)
{
    char u[OG_UUID_LEN + 1];

    t_uuid(u);
    snprintf(out, n, "%s-%.12s", tag, u);
}

/* A new ticket of family on s. */
static void r_ticket(og_store *s, const char *family, char out[TICKET_SZ])
{
    og_ticket_result t;

    assert_int_equal(og_ticket_create(s, ISSUER, family, &t), 0);
    assert_int_equal(t.outcome, OG_TICKET_ISSUED);
    memcpy(out, t.ticket, TICKET_SZ);
}

/* Tickets in family (both engines: the same table and columns). */
static int64_t r_count(t_raw *raw, const char *family, bool rotated)
{
    return t_raw_int(raw,
                     "SELECT count(*) FROM tickets WHERE family = '%s'%s",
                     family, rotated ? " AND rotated_at IS NOT NULL" : "");
}

/* ===========================================================================
 * A mixed batch answers as the one-row path does
 * ========================================================================= */
enum {
    MIX_FRESH,
    MIX_SIBLING,        /* a second live ticket of MIX_FRESH's family */
    MIX_REUSED,         /* rotated before: theft, its family revoked */
    MIX_FAMILY_REVOKED,
    MIX_UNKNOWN,        /* never created */
    MIX_FRESH2,
    MIX_N
};

typedef struct r_mix {
    char fam[MIX_N][40];
    char t[MIX_N][TICKET_SZ];
    char reused_successor[TICKET_SZ]; /* MIX_REUSED's live successor */
} r_mix;

/* Builds the state of every case on s: what the batch then meets. */
static void r_mix_new(og_store *s, r_mix *m)
{
    og_ticket_result t;
    og_revoke_outcome ro;
    og_strv list = {0};

    memset(m, 0, sizeof *m);
    for (int i = 0; i < MIX_N; i++)
        r_family(m->fam[i], sizeof m->fam[i], "rfam");
    memcpy(m->fam[MIX_SIBLING], m->fam[MIX_FRESH], sizeof m->fam[0]);
    for (int i = 0; i < MIX_N; i++)
        if (i != MIX_UNKNOWN)
            r_ticket(s, m->fam[i], m->t[i]);
    assert_int_equal(og_ticket_rotate(s, m->t[MIX_REUSED], &t), 0);
    assert_int_equal(t.outcome, OG_TICKET_ISSUED);
    memcpy(m->reused_successor, t.ticket, TICKET_SZ);
    assert_int_equal(og_family_revoke(s, &r_policy, ISSUER,
                                      m->fam[MIX_FAMILY_REVOKED],
                                      "supervisor-3", &ro, &list), 0);
    assert_int_equal(ro, OG_REVOKE_REVOKED);
    og_strv_free(&list);
    /* Unknown: a well-formed ticket no store holds (another's first
     * character changed). */
    memcpy(m->t[MIX_UNKNOWN], m->t[MIX_FRESH], TICKET_SZ);
    m->t[MIX_UNKNOWN][0] = m->t[MIX_UNKNOWN][0] == 'A' ? 'B' : 'A';
}

/* What the one-row path answers for each case, explicitly. */
static void r_mix_expect(const r_mix *m, int i, const og_ticket_result *r)
{
    switch (i) {
    case MIX_FRESH:
    case MIX_SIBLING:
    case MIX_FRESH2:
        assert_int_equal(r->outcome, OG_TICKET_ISSUED);
        assert_int_equal(strlen(r->ticket), OG_TICKET_LEN);
        assert_string_equal(r->issuer, ISSUER);
        assert_string_equal(r->family, m->fam[i]);
        break;
    case MIX_REUSED:
        assert_int_equal(r->outcome, OG_TICKET_REUSED);
        assert_string_equal(r->family, m->fam[i]);
        assert_string_equal(r->ticket, "");
        break;
    case MIX_FAMILY_REVOKED:
        assert_int_equal(r->outcome, OG_TICKET_FAMILY_REVOKED);
        assert_string_equal(r->family, m->fam[i]);
        assert_string_equal(r->ticket, "");
        break;
    case MIX_UNKNOWN:
        assert_int_equal(r->outcome, OG_TICKET_NOT_FOUND);
        assert_string_equal(r->ticket, "");
        break;
    default:
        fail();
    }
}

/* Runs the whole mix as one batch (with the fault point fault set, when
 * not NULL) and, on a twin built alike, through the one-row path; compares
 * every answer with the twin's and with the expectation, and what each
 * left. Returns the fallbacks the batch took. */
static uint64_t r_mix_run(const char *fault)
{
    og_store *s = r_store(64, 4), *one = r_store(1, 2);
    r_mix *m = calloc(1, sizeof *m), *twin = calloc(1, sizeof *twin);
    og_ticket_result out[MIX_N], alone, again;
    og_admit_stats before, after;
    const char *tickets[MIX_N];
    int rcs[MIX_N];
    t_raw *raw;

    assert_non_null(m);
    assert_non_null(twin);
    r_mix_new(s, m);
    r_mix_new(one, twin);
    for (int i = 0; i < MIX_N; i++)
        tickets[i] = m->t[i];
    og_store_rotate_stats(s, &before);
    if (fault)
        setenv("OG_FAULT", fault, 1);
    assert_int_equal(og__rotate_batch(s, MIX_N, tickets, out, rcs), 0);
    unsetenv("OG_FAULT");
    og_store_rotate_stats(s, &after);
    assert_true(after.batches == before.batches + 1);
    assert_true(after.rows == before.rows + MIX_N);
    for (int i = 0; i < MIX_N; i++) {
        if (rcs[i] != 0)
            fprintf(stderr, "row %d: %s\n", i, og_err_name(rcs[i]));
        assert_int_equal(rcs[i], 0);
        r_mix_expect(m, i, &out[i]);
        assert_int_equal(og_ticket_rotate(one, twin->t[i], &alone), 0);
        r_mix_expect(twin, i, &alone);
        assert_int_equal(out[i].outcome, alone.outcome);
    }
    raw = t_raw_open();
    for (int i = 0; i < MIX_N; i++) {
        if (i == MIX_UNKNOWN || i == MIX_SIBLING)
            continue;
        /* one successor per rotation, in the batch as alone: the fresh
         * family holds its two tickets and their two successors */
        assert_true(r_count(raw, m->fam[i], false) ==
                    r_count(raw, twin->fam[i], false));
        assert_true(r_count(raw, m->fam[i], true) ==
                    r_count(raw, twin->fam[i], true));
    }
    assert_true(r_count(raw, m->fam[MIX_FRESH], false) == 4);
    assert_true(r_count(raw, m->fam[MIX_FRESH], true) == 2);
    t_raw_close(raw);
    /* The reuse revoked its family: the successor rotated before is
     * refused now, and nothing can be created in it. */
    assert_int_equal(og_ticket_rotate(s, m->reused_successor, &again), 0);
    assert_int_equal(again.outcome, OG_TICKET_FAMILY_REVOKED);
    assert_int_equal(og_ticket_create(s, ISSUER, m->fam[MIX_REUSED], &again),
                     0);
    assert_int_equal(again.outcome, OG_TICKET_FAMILY_REVOKED);
    /* What the batch rotated stays rotated, and each successor is live:
     * the successors rotate, the tickets presented again are reuse. */
    for (int i = 0; i < MIX_N; i++) {
        if (out[i].outcome != OG_TICKET_ISSUED)
            continue;
        assert_int_equal(og_ticket_rotate(s, out[i].ticket, &again), 0);
        assert_int_equal(again.outcome, OG_TICKET_ISSUED);
    }
    assert_int_equal(og_ticket_rotate(s, m->t[MIX_FRESH2], &again), 0);
    assert_int_equal(again.outcome, OG_TICKET_REUSED);
    free(m);
    free(twin);
    og_store_free(one);
    og_store_free(s);
    return after.fallbacks - before.fallbacks;
}

static void mixed_rotation_batch_answers_as_the_one_row_path(void **state)
{
    (void)state;
    assert_true(r_mix_run(NULL) == 0); /* ONE statement, no fallback */
}

static void aborted_rotation_batch_falls_back_row_by_row(void **state)
{
    (void)state;
    if (!OG_TEST_FAULT_INJECTION)
        skip(); /* fault points not compiled in (-Dfault_injection=true) */
    /* PostgreSQL's statement aborted whole (the fault point stands for a
     * row that aborts it): the round falls back to one rotation per row,
     * every row still answering as alone. SQLite's savepoints keep a row's
     * error to its row; it never falls back. */
    assert_true(r_mix_run("rotate_batch_abort") ==
                (t_kind == T_POSTGRES ? 1u : 0u));
}

/* ===========================================================================
 * An unconfirmed commit answers every row unavailable
 * ========================================================================= */
static void unconfirmed_rotation_batch_is_unavailable_for_every_row(void **state)
{
    char fam[4][40], t[4][TICKET_SZ];
    const char *tickets[4];
    og_ticket_result out[4], r;
    og_store *s;
    t_raw *raw;
    int rcs[4];

    (void)state;
    if (!OG_TEST_FAULT_INJECTION)
        skip();
    s = r_store(64, 4);
    for (int i = 0; i < 4; i++) {
        r_family(fam[i], sizeof fam[i], "rack");
        r_ticket(s, fam[i], t[i]);
        tickets[i] = t[i];
    }
    /* Row 3 is unknown: its answer is read, not written. */
    t[3][0] = t[3][0] == 'A' ? 'B' : 'A';

    setenv("OG_FAULT", "rotate_batch_ack_lost", 1);
    assert_int_equal(og__rotate_batch(s, 4, tickets, out, rcs), 0);
    unsetenv("OG_FAULT");
    for (int i = 0; i < 4; i++) {
        assert_int_equal(rcs[i], OG_ESTORE_UNAVAILABLE);
        assert_string_equal(out[i].ticket, ""); /* no successor handed out */
    }
    /* The commit stayed: each ticket rotated, with one successor. */
    raw = t_raw_open();
    for (int i = 0; i < 3; i++) {
        assert_true(r_count(raw, fam[i], false) == 2);
        assert_true(r_count(raw, fam[i], true) == 1);
        assert_int_equal(og_ticket_rotate(s, t[i], &r), 0);
        assert_int_equal(r.outcome, OG_TICKET_REUSED);
    }
    t_raw_close(raw);
    og_store_free(s);
}

/* ===========================================================================
 * Batches of two instances race on the same tickets
 * ========================================================================= */
#define RACE_ROWS 16
#define RACE_ROUNDS 12

typedef struct r_race {
    char fam[RACE_ROUNDS][RACE_ROWS][40];
    char t[RACE_ROUNDS][RACE_ROWS][TICKET_SZ];
    int rc[RACE_ROUNDS][2][RACE_ROWS];
    int outcome[RACE_ROUNDS][2][RACE_ROWS];
    volatile int arrived[RACE_ROUNDS]; /* the start line of each round */
} r_race;

static void r_race_new(r_race *r)
{
    og_store *s = r_store(1, 2);

    memset(r, 0, sizeof *r);
    for (int k = 0; k < RACE_ROUNDS; k++)
        for (int i = 0; i < RACE_ROWS; i++) {
            r_family(r->fam[k][i], sizeof r->fam[k][i], "rrace");
            r_ticket(s, r->fam[k][i], r->t[k][i]);
        }
    og_store_free(s);
}

/* Racer who (0 or 1) runs every round on s, each round starting when both
 * arrived; the other racer lists the rows backwards (RB6). */
static void r_race_run(r_race *r, int who, og_store *s)
{
    const char *tickets[RACE_ROWS];
    og_ticket_result out[RACE_ROWS];
    int rcs[RACE_ROWS];

    for (int k = 0; k < RACE_ROUNDS; k++) {
        for (int i = 0; i < RACE_ROWS; i++)
            tickets[i] = r->t[k][who == 0 ? i : RACE_ROWS - 1 - i];
        __atomic_add_fetch(&r->arrived[k], 1, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&r->arrived[k], __ATOMIC_SEQ_CST) < 2)
            sched_yield();
        if (og__rotate_batch(s, RACE_ROWS, tickets, out, rcs) != 0)
            abort();
        for (int i = 0; i < RACE_ROWS; i++) {
            int j = who == 0 ? i : RACE_ROWS - 1 - i;
            r->rc[k][who][j] = rcs[i];
            r->outcome[k][who][j] = rcs[i] == 0 ? (int)out[i].outcome : -1;
        }
    }
}

/* Each ticket rotated exactly once, with exactly one successor; the loser
 * told reuse (theft: the family revoked). */
static void r_race_check(const r_race *r)
{
    t_raw *raw = t_raw_open();

    for (int k = 0; k < RACE_ROUNDS; k++)
        for (int i = 0; i < RACE_ROWS; i++) {
            int issued = 0;

            for (int w = 0; w < 2; w++) {
                assert_int_equal(r->rc[k][w][i], 0);
                issued += r->outcome[k][w][i] == OG_TICKET_ISSUED;
            }
            assert_int_equal(issued, 1);
            assert_int_equal(r->outcome[k][r->outcome[k][0][i] ==
                                                OG_TICKET_ISSUED
                                            ? 1
                                            : 0][i],
                             OG_TICKET_REUSED);
            assert_true(r_count(raw, r->fam[k][i], false) == 2);
            assert_true(r_count(raw, r->fam[k][i], true) == 1);
            assert_true(t_raw_int(raw,
                                  "SELECT count(*) FROM families WHERE "
                                  "family = '%s' AND revoked_at IS NOT NULL",
                                  r->fam[k][i]) == 1);
        }
    t_raw_close(raw);
}

/* Racer who on a store object of its own. */
static void r_race_in(void *ctx, int who)
{
    og_store *s = r_store(64, 2);

    r_race_run(ctx, who, s);
    og_store_free(s);
}

static void rotation_batches_of_two_store_objects_race(void **state)
{
    r_race *r = calloc(1, sizeof *r);

    (void)state;
    assert_non_null(r);
    r_race_new(r);
    t_race_threads(r_race_in, r);
    r_race_check(r);
    free(r);
}

static void rotation_batches_of_two_processes_race(void **state)
{
    r_race *r = mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    (void)state;
    assert_true(r != MAP_FAILED);
    r_race_new(r);
    t_race_processes(r_race_in, r);
    r_race_check(r);
    munmap(r, sizeof *r);
}

/* ===========================================================================
 * The queue: many callers on two store objects, the same tickets
 * ========================================================================= */
#define QUEUE_CALLERS 8
#define QUEUE_TICKETS 24

typedef struct r_queue {
    og_store *s[2];
    char fam[QUEUE_TICKETS][40];
    char t[QUEUE_TICKETS][TICKET_SZ];
    int issued[QUEUE_TICKETS]; /* with __atomic */
    int errors;
} r_queue;

typedef struct r_caller {
    r_queue *q;
    int who;
} r_caller;

static void *r_caller_thread(void *arg)
{
    r_caller *t = arg;

    for (int n = 0; n < QUEUE_TICKETS; n++) {
        /* each caller its own order over the same tickets */
        int i = (n * 7 + t->who * 5) % QUEUE_TICKETS;
        og_ticket_result r;

        if (og_ticket_rotate(t->q->s[t->who % 2], t->q->t[i], &r) != 0 ||
            (r.outcome != OG_TICKET_ISSUED && r.outcome != OG_TICKET_REUSED))
            __atomic_add_fetch(&t->q->errors, 1, __ATOMIC_SEQ_CST);
        else if (r.outcome == OG_TICKET_ISSUED)
            __atomic_add_fetch(&t->q->issued[i], 1, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

/* Every rotation answered, each ticket rotated by exactly one caller with
 * one successor, each rotation counted in exactly one batch of its store
 * object. */
static void r_queue_run(int batch_max)
{
    r_queue *q = calloc(1, sizeof *q);
    r_caller t[QUEUE_CALLERS];
    pthread_t th[QUEUE_CALLERS];
    og_admit_stats st[2];
    t_raw *raw;

    assert_non_null(q);
    q->s[0] = r_store(batch_max, 4);
    q->s[1] = r_store(batch_max, 4);
    for (int i = 0; i < QUEUE_TICKETS; i++) {
        r_family(q->fam[i], sizeof q->fam[i], "rq");
        r_ticket(q->s[0], q->fam[i], q->t[i]);
    }
    for (int w = 0; w < QUEUE_CALLERS; w++) {
        t[w] = (r_caller){q, w};
        assert_int_equal(pthread_create(&th[w], NULL, r_caller_thread, &t[w]),
                         0);
    }
    for (int w = 0; w < QUEUE_CALLERS; w++)
        pthread_join(th[w], NULL);
    assert_int_equal(q->errors, 0);
    raw = t_raw_open();
    for (int i = 0; i < QUEUE_TICKETS; i++) {
        assert_int_equal(q->issued[i], 1);
        assert_true(r_count(raw, q->fam[i], false) == 2);
    }
    t_raw_close(raw);
    og_store_rotate_stats(q->s[0], &st[0]);
    og_store_rotate_stats(q->s[1], &st[1]);
    assert_true(st[0].rows + st[1].rows ==
                (uint64_t)QUEUE_CALLERS * QUEUE_TICKETS);
    for (int k = 0; k < 2; k++) {
        assert_true(st[k].batches >= 1 && st[k].batches <= st[k].rows);
        if (batch_max == 1)
            assert_true(st[k].batches == st[k].rows);
        assert_true(st[k].fallbacks == 0);
    }
    og_store_free(q->s[0]);
    og_store_free(q->s[1]);
    free(q);
}

static void queued_rotations_rotate_each_ticket_once(void **state)
{
    (void)state;
    r_queue_run(64);
    r_queue_run(1);
}

/* ===========================================================================
 * kill -9 in the middle of batches
 * ========================================================================= */
#define KILL_ROWS 8
#define KILL_MAX 384

typedef struct r_killed {
    char fam[KILL_MAX][40];
    char t[KILL_MAX][TICKET_SZ];
    volatile int answered[KILL_MAX]; /* 1 + issued, once told */
    volatile int batches;
} r_killed;

static void r_killed_child(r_killed *k)
{
    og_store *s = r_store(64, 2);
    const char *tickets[KILL_ROWS];
    og_ticket_result out[KILL_ROWS];
    int rcs[KILL_ROWS];

    for (int base = 0; base + KILL_ROWS <= KILL_MAX; base += KILL_ROWS) {
        for (int i = 0; i < KILL_ROWS; i++)
            tickets[i] = k->t[base + i];
        if (og__rotate_batch(s, KILL_ROWS, tickets, out, rcs) != 0)
            _exit(3);
        for (int i = 0; i < KILL_ROWS; i++)
            if (rcs[i] == 0)
                k->answered[base + i] = 1 + (out[i].outcome ==
                                             OG_TICKET_ISSUED);
        __atomic_add_fetch(&k->batches, 1, __ATOMIC_SEQ_CST);
    }
    _exit(0);
}

static void killed_rotation_batches_keep_every_answer(void **state)
{
    r_killed *k = mmap(NULL, sizeof *k, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    og_store *s;
    t_raw *raw;
    int status, told = 0;
    pid_t pid;

    (void)state;
    assert_true(k != MAP_FAILED);
    memset(k, 0, sizeof *k);
    s = r_store(1, 2);
    for (int i = 0; i < KILL_MAX; i++) {
        r_family(k->fam[i], sizeof k->fam[i], "rkill");
        r_ticket(s, k->fam[i], k->t[i]);
    }
    og_store_free(s);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        r_killed_child(k);
    while (__atomic_load_n(&k->batches, __ATOMIC_SEQ_CST) < 3) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            fail_msg("the child ended before it was killed");
        usleep(1000);
    }
    usleep(7000);
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));

    /* Every rotation the child was told holds; whatever the kill cut, a
     * ticket is rotated exactly when it has its one successor. */
    raw = t_raw_open();
    for (int i = 0; i < KILL_MAX; i++) {
        int64_t all = r_count(raw, k->fam[i], false),
                rotated = r_count(raw, k->fam[i], true);

        assert_true(all == 1 + rotated);
        assert_true(rotated <= 1);
        if (!k->answered[i])
            continue;
        told++;
        assert_int_equal(k->answered[i], 2); /* rotated */
        assert_true(rotated == 1);
    }
    assert_true(told >= 3 * KILL_ROWS);
    t_raw_close(raw);
    /* Asked again, each ticket rotates now or is reuse: decided once. */
    s = r_store(64, 2);
    for (int i = 0; i < KILL_MAX; i += 11) {
        og_ticket_result r;

        assert_int_equal(og_ticket_rotate(s, k->t[i], &r), 0);
        if (k->answered[i])
            assert_int_equal(r.outcome, OG_TICKET_REUSED);
        else
            assert_true(r.outcome == OG_TICKET_ISSUED ||
                        r.outcome == OG_TICKET_REUSED);
    }
    og_store_free(s);
    munmap(k, sizeof *k);
}

const struct CMUnitTest t_rotate_batch_tests[] = {
    cmocka_unit_test(mixed_rotation_batch_answers_as_the_one_row_path),
    cmocka_unit_test(aborted_rotation_batch_falls_back_row_by_row),
    cmocka_unit_test(unconfirmed_rotation_batch_is_unavailable_for_every_row),
    cmocka_unit_test(rotation_batches_of_two_store_objects_race),
    cmocka_unit_test(rotation_batches_of_two_processes_race),
    cmocka_unit_test(queued_rotations_rotate_each_ticket_once),
    cmocka_unit_test(killed_rotation_batches_keep_every_answer),
};
const size_t t_rotate_batch_tests_count =
    sizeof t_rotate_batch_tests / sizeof t_rotate_batch_tests[0];
