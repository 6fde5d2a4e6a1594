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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "batch_harness.h"
#include "store/store_int.h" /* og__rotate_batch: a batch built by the test */

#define ISSUER "support-approvals"
#define TICKET_SZ (OG_TICKET_LEN + 1)

static const char *const r_revokers[] = {"supervisor-3"};
static const og_revoke_policy r_policy = {r_revokers, 1};

/* A store object on the suite's store whose batches hold at most batch_max
 * rotations (1: the one-row path). */
static og_store *r_store(int batch_max, int pool)
{
    og_store_options o;

    t_batch_options(&o, pool);
    o.rotate_batch_max = batch_max;
    return t_batch_store(&o);
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
    og_ticket_result out[MIX_N];      /* the batch's answers */
} r_mix;

/* Builds the state of every case on s: what the batch then meets. */
static void r_mix_new(og_store *s, void *mix)
{
    r_mix *m = mix;
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

/* The whole mix as ONE batch on s. */
static int r_mix_batch(og_store *s, void *mix, int *rcs)
{
    r_mix *m = mix;
    const char *tickets[MIX_N];

    for (int i = 0; i < MIX_N; i++)
        tickets[i] = m->t[i];
    return og__rotate_batch(s, MIX_N, tickets, m->out, rcs);
}

/* Row i answered as expected, and as the twin's through the one-row
 * path. */
static void r_mix_row(void *mix, og_store *one, void *twin_mix, int i)
{
    r_mix *m = mix, *twin = twin_mix;
    og_ticket_result alone;

    r_mix_expect(m, i, &m->out[i]);
    assert_int_equal(og_ticket_rotate(one, twin->t[i], &alone), 0);
    r_mix_expect(twin, i, &alone);
    assert_int_equal(m->out[i].outcome, alone.outcome);
}

/* What the batch left equals what the one-row path left. */
static void r_mix_after(og_store *s, void *mix, void *twin_mix)
{
    r_mix *m = mix, *twin = twin_mix;
    og_ticket_result again;
    t_raw *raw = t_raw_open();

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
        if (m->out[i].outcome != OG_TICKET_ISSUED)
            continue;
        assert_int_equal(og_ticket_rotate(s, m->out[i].ticket, &again), 0);
        assert_int_equal(again.outcome, OG_TICKET_ISSUED);
    }
    assert_int_equal(og_ticket_rotate(s, m->t[MIX_FRESH2], &again), 0);
    assert_int_equal(again.outcome, OG_TICKET_REUSED);
}

/* The mix as one batch against the one-row path (t_mix_def). */
static t_mix_def r_mix_def = {sizeof(r_mix), MIX_N, r_store,
                              og_store_rotate_stats, r_mix_new, r_mix_batch,
                              r_mix_row, r_mix_after, "rotate_batch_abort"};

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

static void r_race_new(void *ctx)
{
    r_race *r = ctx;
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
static void r_race_run(void *ctx, int who, og_store *s)
{
    r_race *r = ctx;
    const char *tickets[RACE_ROWS];
    og_ticket_result out[RACE_ROWS];
    int rcs[RACE_ROWS];

    for (int k = 0; k < RACE_ROUNDS; k++) {
        for (int i = 0; i < RACE_ROWS; i++)
            tickets[i] = r->t[k][who == 0 ? i : RACE_ROWS - 1 - i];
        t_race_start(&r->arrived[k]);
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
static void r_race_check(const void *ctx)
{
    const r_race *r = ctx;
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

static t_race_def r_race_def = {sizeof(r_race), r_store, r_race_new, r_race_run,
                                r_race_check};

/* ===========================================================================
 * The queue: many callers on two store objects, the same tickets
 * ========================================================================= */
#define QUEUE_CALLERS 8
#define QUEUE_TICKETS 24

typedef struct r_queue {
    char fam[QUEUE_TICKETS][40];
    char t[QUEUE_TICKETS][TICKET_SZ];
} r_queue;

static void r_queue_new(void *ctx, og_store *s)
{
    r_queue *q = ctx;

    for (int i = 0; i < QUEUE_TICKETS; i++) {
        r_family(q->fam[i], sizeof q->fam[i], "rq");
        r_ticket(s, q->fam[i], q->t[i]);
    }
}

/* A ticket rotates once: the caller that rotated it won it; the others
 * are told reuse. */
static int r_queue_call(void *ctx, og_store *s, int i)
{
    r_queue *q = ctx;
    og_ticket_result r;

    if (og_ticket_rotate(s, q->t[i], &r) != 0)
        return -1;
    if (r.outcome == OG_TICKET_ISSUED)
        return 1;
    return r.outcome == OG_TICKET_REUSED ? 0 : -1;
}

/* One successor per ticket. */
static void r_queue_check(void *ctx, t_raw *raw, int i)
{
    r_queue *q = ctx;

    assert_true(r_count(raw, q->fam[i], false) == 2);
}

static t_queue_def r_queue_def = {sizeof(r_queue), QUEUE_CALLERS, QUEUE_TICKETS,
                                  r_store, og_store_rotate_stats, r_queue_new,
                                  r_queue_call, r_queue_check};

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

/* Tickets base.. as ONE batch; answered: 1 + rotated. */
static int r_killed_batch(void *ctx, og_store *s, int base)
{
    r_killed *k = ctx;
    const char *tickets[KILL_ROWS];
    og_ticket_result out[KILL_ROWS];
    int rcs[KILL_ROWS];

    for (int i = 0; i < KILL_ROWS; i++)
        tickets[i] = k->t[base + i];
    if (og__rotate_batch(s, KILL_ROWS, tickets, out, rcs) != 0)
        return -1;
    for (int i = 0; i < KILL_ROWS; i++)
        if (rcs[i] == 0)
            k->answered[base + i] = 1 + (out[i].outcome == OG_TICKET_ISSUED);
    return 0;
}

static void r_killed_child(void *ctx)
{
    r_killed *k = ctx;

    t_batches_until_killed(r_store(64, 2), KILL_MAX, KILL_ROWS,
                           r_killed_batch, k, &k->batches);
}

static void killed_rotation_batches_keep_every_answer(void **state)
{
    r_killed *k = t_shared_zeroed(sizeof *k);
    og_store *s;
    t_raw *raw;
    int told = 0;

    (void)state;
    s = r_store(1, 2);
    for (int i = 0; i < KILL_MAX; i++) {
        r_family(k->fam[i], sizeof k->fam[i], "rkill");
        r_ticket(s, k->fam[i], k->t[i]);
    }
    og_store_free(s);
    t_kill_midway(r_killed_child, k, &k->batches, 3, 7000);

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

/* The cases the shared harness runs (batch_harness.h) carry this file's
 * description as their initial state. */
const struct CMUnitTest t_rotate_batch_tests[] = {
    {"mixed_rotation_batch_answers_as_the_one_row_path",
     t_mix_takes_no_fallback, NULL, NULL, &r_mix_def},
    {"aborted_rotation_batch_falls_back_row_by_row",
     t_mix_falls_back_once, NULL, NULL, &r_mix_def},
    cmocka_unit_test(unconfirmed_rotation_batch_is_unavailable_for_every_row),
    {"rotation_batches_of_two_store_objects_race",
     t_race_in_threads, NULL, NULL, &r_race_def},
    {"rotation_batches_of_two_processes_race",
     t_race_in_processes, NULL, NULL, &r_race_def},
    {"queued_rotations_rotate_each_ticket_once",
     t_queue_in_batches_and_alone, NULL, NULL, &r_queue_def},
    cmocka_unit_test(killed_rotation_batches_keep_every_answer),
};
const size_t t_rotate_batch_tests_count =
    sizeof t_rotate_batch_tests / sizeof t_rotate_batch_tests[0];
